//! Snapshots and the xmin horizon: `GetSnapshotData` over each hot-field layout (the
//! PGXACT-era loop over `PgProc`/`PgXact` views, 14's dense xid array), the global xmin
//! (`GetOldestXmin`) and the backend's own xmin.
//!
//! Locks touched: `ProcArrayLock` shared for every scan (exclusive only where `members` asks);
//! no other lock.

use crate::sync::Ordering;
use std::hint::cold_path;

use crossbeam_utils::CachePadded;
use lockstack_common::TransactionId;
use lockstack_lwlock::LwLockMode;

use super::{Backend, DenseArrays, Hot, ProcArray};
use crate::config::{GlobalXminMode, Layout};
use crate::proc::{PROC_SNAPSHOT_SKIP, PgProc, PgXact};
use crate::snapshot::Snapshot;
use crate::sync::{AtomicU32, fence};

/// Read access to the hot fields of the PGXACT-era layouts, indexed by `pgprocno`; the three
/// implementations are monomorphised into the snapshot loop (no `dyn`).
///
/// The per-member accessors used by the loop are `unsafe` and skip the bounds check (PostgreSQL
/// indexes `allPgXact[pgprocno]` unchecked too): the caller guarantees `p < max_backends`, which
/// holds for every `pgprocnos[i]` with `i < num_procs` read under ProcArrayLock (see
/// [`ProcArray::scan_pgxact`]).
pub(super) trait HotView {
    /// # Safety
    /// `p` is below `max_backends`.
    unsafe fn xid(&self, p: usize) -> TransactionId;
    /// # Safety
    /// `p` is below `max_backends`.
    unsafe fn xmin(&self, p: usize) -> TransactionId;
    /// # Safety
    /// `p` is below `max_backends`.
    unsafe fn vacuum_flags(&self, p: usize) -> u8;
    fn overflowed(&self, p: usize) -> bool;
    /// Acquire load: pairs with the release store after the subxid is written.
    fn nxids(&self, p: usize) -> usize;
}

pub(super) struct ProcView<'a>(&'a [PgProc]);
pub(super) struct XactView<'a>(&'a [PgXact]);
pub(super) struct PaddedView<'a>(&'a [CachePadded<PgXact>]);

/// Implements [`HotView`] for a view over a slice whose elements carry `xid`, `xmin` and
/// `vacuum_flags` atomics, naming the element's overflow flag and subxid count fields (they are
/// spelt differently in `PgProc` and `PgXact`).
macro_rules! hot_view {
    ($t:ty, $overflowed:ident, $nxids:ident) => {
        impl HotView for $t {
            #[inline(always)]
            unsafe fn xid(&self, p: usize) -> TransactionId {
                debug_assert!(p < self.0.len());
                // SAFETY: the caller guarantees `p < max_backends = self.0.len()`.
                TransactionId(unsafe { self.0.get_unchecked(p) }.xid.load(Ordering::Relaxed))
            }
            #[inline(always)]
            unsafe fn xmin(&self, p: usize) -> TransactionId {
                debug_assert!(p < self.0.len());
                // SAFETY: as in `xid`.
                TransactionId(unsafe { self.0.get_unchecked(p) }.xmin.load(Ordering::Relaxed))
            }
            #[inline(always)]
            unsafe fn vacuum_flags(&self, p: usize) -> u8 {
                debug_assert!(p < self.0.len());
                // SAFETY: as in `xid`.
                unsafe { self.0.get_unchecked(p) }.vacuum_flags.load(Ordering::Relaxed)
            }
            #[inline(always)]
            fn overflowed(&self, p: usize) -> bool {
                self.0[p].$overflowed.load(Ordering::Relaxed)
            }
            #[inline(always)]
            fn nxids(&self, p: usize) -> usize {
                self.0[p].$nxids.load(Ordering::Acquire) as usize
            }
        }
    };
}
hot_view!(ProcView<'_>, subxid_overflowed, subxid_count);
hot_view!(XactView<'_>, overflowed, nxids);
hot_view!(PaddedView<'_>, overflowed, nxids);

/// `a` precedes `b`: with `FAST`, the plain signed difference of two xids known to be normal
/// (`NormalTransactionIdPrecedes`, 9.2); otherwise the general comparison (9.1).
#[inline(always)]
pub(super) fn prec<const FAST: bool>(a: TransactionId, b: TransactionId) -> bool {
    if FAST { (a.0.wrapping_sub(b.0) as i32) < 0 } else { a.precedes(b) }
}

/// Members whose dense xids the 14 loop tests for "all 0" at once (see `ProcArray::scan_dense`).
/// 8 measured faster than 16 at 1000 members / 10 running: a chunk holding an xid is walked
/// entry by entry, so larger chunks cost more per running member.
pub(super) const DENSE_CHUNK: usize = 8;

/// Members per iteration of the PGXACT-era snapshot loop (see `ProcArray::scan_pgxact`). Of 1, 2,
/// 4, 8 and 16, 8 was the fastest for `Pgxact` and for `Pgproc` alike at 1000 members.
pub(super) const PGXACT_UNROLL: usize = 8;

/// Running state of the 9.2 snapshot loop, passed to its out-of-line member step.
pub(super) struct Fold {
    me: usize,
    xmax: TransactionId,
    xmin: TransactionId,
    globalxmin: TransactionId,
}

/// Output of one ProcArray scan besides the snapshot itself.
pub(super) struct ScanResult {
    xmin: TransactionId,
    globalxmin: Option<TransactionId>,
}

impl ProcArray {
    /// `GetOldestXmin` (≤ 13) / `ComputeXidHorizons` (14+): the oldest xid any member may still
    /// consider running: the minimum of every member's xid and xmin (skipping lazy VACUUM), or
    /// `latest_completed_xid + 1` if none. Scans the whole ProcArray under ProcArrayLock shared.
    pub fn get_oldest_xmin(&self) -> TransactionId {
        let held = self.proc_array_lock.acquire(LwLockMode::Shared);
        let mut result = TransactionId(self.transam.latest_completed_xid.load(Ordering::Relaxed)).next();
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        for i in 0..n {
            let p = self.pgprocnos[i].load(Ordering::Relaxed) as usize;
            let flags = match &self.hot {
                Hot::Pgproc => self.procs[p].vacuum_flags.load(Ordering::Relaxed),
                Hot::Pgxact(x) => x[p].vacuum_flags.load(Ordering::Relaxed),
                Hot::PgxactPadded(x) => x[p].vacuum_flags.load(Ordering::Relaxed),
                Hot::Dense(d) => d.status_flags[i].load(Ordering::Relaxed),
            };
            if flags & crate::proc::PROC_IN_VACUUM != 0 {
                continue;
            }
            let xid = self.xid_of(p);
            if xid.is_normal() && xid.precedes(result) {
                result = xid;
            }
            let xmin = TransactionId(self.xmin_slot(p).load(Ordering::Relaxed));
            if xmin.is_normal() && xmin.precedes(result) {
                result = xmin;
            }
        }
        self.release_pa(held);
        result
    }
    /// The PGXACT-era snapshot loop (9.1 and 9.2-13), generic over the layout and the seed-000
    /// knobs: `EAGER` reads every xmin for the horizon, `SKIP` skips the subxids of backends
    /// without an xid, `FAST` uses the normal-xid comparison.
    ///
    /// Per member it decides what 9.2's `GetSnapshotData` decides: skip a vacuuming (or
    /// logically decoding) member, (EAGER) fold a normal xmin into the horizon, list a normal
    /// xid below `xmax` and copy its subxids. With `SKIP` (9.2's "no xid, no subxids"), a member
    /// with neither a normal xmin nor a normal xid contributes nothing, so the common path only
    /// loads the `pgprocno`, the xmin and the xid and tests them together; everything else is
    /// out of line in [`Self::pgxact_member`]. On x86-64 that is 8 instructions per member (3
    /// loads, 1 not-taken branch) plus 3 per [`PGXACT_UNROLL`] members of loop control. How it
    /// differs from a literal transcription of PostgreSQL's C (which gcc compiles to about
    /// 15-18 instructions per member) without changing what is decided:
    ///
    /// * no bounds check on `pgprocno` (C has none either; see the SAFETY note);
    /// * 14's order of tests: the flags are read only for members with an xmin or an xid (9.2
    ///   reads them first, for every member; 14 reads `statusFlags` only for members with an
    ///   xid), since an idle member adds nothing whether or not it is vacuuming;
    /// * the xmin fold is out of line, taken only for members with a normal xmin, not two
    ///   conditional moves that would chain every member to the previous one through
    ///   `globalxmin`; the running state lives in memory ([`Fold`]) so the loop keeps its base
    ///   pointers in registers;
    /// * [`PGXACT_UNROLL`] members per loop iteration.
    ///
    /// Without `SKIP` (9.1) every member takes the long path, in 9.1's order: flags, xmin, xid,
    /// and the subxid-cache header of every other member.
    ///
    /// The same code runs for `Pgproc`, `Pgxact` and `PgxactPadded`: what differs between the
    /// layouts is only which cache lines those loads touch.
    #[inline(always)]
    pub(super) fn scan_pgxact<V: HotView, const EAGER: bool, const SKIP: bool, const FAST: bool>(
        &self,
        v: V,
        me: usize,
        xmax: TransactionId,
        snap: &mut Snapshot,
    ) -> ScanResult {
        let mut xmin = xmax;
        let mut globalxmin = xmax;
        // The 9.2 path keeps its running state in memory and handles every member with an xmin
        // or an xid out of line, so the loop over idle members has registers to spare.
        let mut fold = Fold { me, xmax, xmin, globalxmin };
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let members = &self.pgprocnos[..n];
        let mut groups = members.chunks_exact(PGXACT_UNROLL);
        macro_rules! member {
            ($slot:expr) => {
                'member: {
                    let slot: &AtomicU32 = $slot;
                    let p = slot.load(Ordering::Relaxed) as usize;
                    // Each field is read once: the owner may be storing a new xid concurrently
                    // (under XidGenLock) or clearing its xmin (without any lock).
                    //
                    // SAFETY: `pgprocnos[i]` for `i < num_procs` is the id of a member, stored
                    // by `proc_array_add` after `attach` checked it against `max_backends`;
                    // neither changes while we hold ProcArrayLock (shared here; membership
                    // changes take it exclusive). So `p < max_backends`, as the accessors need.
                    let (m, xid) = unsafe {
                        let m = if EAGER { v.xmin(p) } else { TransactionId::INVALID };
                        (m, v.xid(p))
                    };
                    // 9.2 with 14's order of tests: a member with neither a normal xmin nor a
                    // normal xid adds nothing to the snapshot, vacuuming or not, so its flags
                    // are read only otherwise (14 reads `statusFlags` only for members with an
                    // xid). `m | xid` below the first normal xid means both are below it.
                    if SKIP {
                        if (m.0 | xid.0) < TransactionId::FIRST_NORMAL.0 {
                            break 'member;
                        }
                        cold_path();
                        self.pgxact_member::<V, EAGER, FAST>(&v, p, m, xid, &mut fold, snap);
                        break 'member;
                    }
                    // 9.1 from here on, in its order: flags, xmin, xid, subxids.
                    // SAFETY: as above.
                    if unsafe { v.vacuum_flags(p) } & PROC_SNAPSHOT_SKIP != 0 {
                        cold_path();
                        break 'member;
                    }
                    if EAGER && m.is_normal() {
                        cold_path();
                        if prec::<FAST>(m, globalxmin) {
                            globalxmin = m;
                        }
                    }
                    // 9.1: the subxid-cache header of every other backend is read, xid or not.
                    if xid.is_normal() {
                        cold_path();
                        if !prec::<FAST>(xid, xmax) {
                            break 'member;
                        }
                        if p != me {
                            snap.xip.push(xid);
                        }
                        if prec::<FAST>(xid, xmin) {
                            xmin = xid;
                        }
                    }
                    if p == me || snap.suboverflowed {
                        break 'member;
                    }
                    self.copy_subxids(&v, p, snap);
                }
            };
        }
        for g in &mut groups {
            for slot in g {
                member!(slot);
            }
        }
        for slot in groups.remainder() {
            member!(slot);
        }
        if SKIP {
            xmin = fold.xmin;
            globalxmin = fold.globalxmin;
        }
        ScanResult { xmin, globalxmin: if EAGER { Some(globalxmin) } else { None } }
    }
    /// The 9.2 loop body for member `p` that has a normal xmin or a normal xid (read once, by the
    /// caller): skips a vacuuming or logically decoding member, (EAGER) folds a normal xmin into
    /// the horizon; for a normal xid before `xmax`, lowers `xmin` (the caller's own xid
    /// included), lists the xid unless it is the caller's, and copies the subxids or notes the
    /// overflow. Out of line, with the running state in `fold`, so that the loop over the many
    /// idle members keeps its own state in registers.
    #[inline(never)]
    pub(super) fn pgxact_member<V: HotView, const EAGER: bool, const FAST: bool>(
        &self,
        v: &V,
        p: usize,
        m: TransactionId,
        xid: TransactionId,
        fold: &mut Fold,
        snap: &mut Snapshot,
    ) {
        // SAFETY: the caller's `p` is a member's id, below `max_backends` (see `scan_pgxact`).
        if unsafe { v.vacuum_flags(p) } & PROC_SNAPSHOT_SKIP != 0 {
            return;
        }
        if EAGER && m.is_normal() && prec::<FAST>(m, fold.globalxmin) {
            fold.globalxmin = m;
        }
        // 9.2: no xid, no subxids either; an xid at or after xmax counts as running anyway.
        if !xid.is_normal() || !prec::<FAST>(xid, fold.xmax) {
            return;
        }
        if prec::<FAST>(xid, fold.xmin) {
            fold.xmin = xid;
        }
        if p == fold.me {
            return;
        }
        snap.xip.push(xid);
        if !snap.suboverflowed {
            self.copy_subxids(v, p, snap);
        }
    }
    /// Member `p`'s subxids into `snap`, or `snap.suboverflowed` if its cache overflowed (the
    /// 9.1/9.2 loops' per-member subxid step).
    #[inline]
    pub(super) fn copy_subxids<V: HotView>(&self, v: &V, p: usize, snap: &mut Snapshot) {
        if v.overflowed(p) {
            snap.suboverflowed = true;
        } else {
            let k = v.nxids(p);
            if k > 0 {
                self.push_subxids(p, k, snap);
            }
        }
    }
    /// Appends the first `k` cached subxids of `PgProc` `p` to `snap.subxip`. The caller has
    /// read `k` with acquire ordering (or fenced after it), which pairs with the release store
    /// of the count in `get_new_transaction_id`, so the `k` entries are the published ones.
    #[inline]
    pub(super) fn push_subxids(&self, p: usize, k: usize, snap: &mut Snapshot) {
        for s in &self.procs[p].subxids[..k] {
            snap.subxip.push(TransactionId(s.load(Ordering::Relaxed)));
        }
    }
    /// The 14+ loop over the dense arrays (`GetSnapshotData` in 14's `procarray.c`): per member
    /// one load of `xids[off]` and a test for 0; everything else (own entry, xmax, status flags,
    /// subxid state, `pgprocnos` for the subxid copy) only for members with an xid, out of line
    /// in [`Self::dense_running`]. Never reads an xmin. The caller's own xid enters xmin before
    /// the loop, as in 14.
    ///
    /// Beyond 14, whose loop tests one entry at a time: the test for 0 is done for
    /// [`DENSE_CHUNK`] entries at once (their bitwise or), about 2.5 instructions per idle
    /// member instead of 6; a chunk that holds an xid is then walked entry by entry as 14 does.
    #[inline(always)]
    pub(super) fn scan_dense(
        &self,
        d: &DenseArrays,
        me: usize,
        xmax: TransactionId,
        snap: &mut Snapshot,
    ) -> ScanResult {
        let my_off = self.procs[me].pgxactoff.load(Ordering::Relaxed) as usize;
        let my_xid = TransactionId(self.procs[me].xid.load(Ordering::Relaxed));
        let mut xmin = xmax;
        if my_xid.is_normal() && prec::<true>(my_xid, xmax) {
            xmin = my_xid;
        }
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let xids = &d.xids[..n];
        // Beyond 14's scalar loop: idle members are skipped `DENSE_CHUNK` at a time. The or of
        // a chunk's xids is 0 only if every entry is 0 (no xid); such a chunk needs no per-entry
        // work. Any other chunk is walked entry by entry exactly as 14 does, re-reading each
        // xid once for its own tests. The re-read is safe: while we hold ProcArrayLock shared
        // no xid can leave the array, and an xid stored since the chunk test was assigned after
        // `xmax` was fixed, so it is not before `xmax` and 14's loop would skip it too.
        let mut chunks = xids.chunks_exact(DENSE_CHUNK);
        let mut base = 0;
        for c in &mut chunks {
            let any = c.iter().fold(0, |a, x| a | x.load(Ordering::Relaxed));
            if any != 0 {
                cold_path();
                for (j, x) in c.iter().enumerate() {
                    let xid = x.load(Ordering::Relaxed);
                    if xid != TransactionId::INVALID.0 {
                        xmin = self.dense_running(d, base + j, TransactionId(xid), my_off, xmax, xmin, snap);
                    }
                }
            }
            base += DENSE_CHUNK;
        }
        // The last `n % DENSE_CHUNK` members: 14's loop as it is.
        for (j, x) in chunks.remainder().iter().enumerate() {
            // Read once: the owner may be storing a new xid concurrently (under XidGenLock).
            let xid = x.load(Ordering::Relaxed);
            if xid == TransactionId::INVALID.0 {
                continue;
            }
            cold_path();
            xmin = self.dense_running(d, base + j, TransactionId(xid), my_off, xmax, xmin, snap);
        }
        ScanResult { xmin, globalxmin: None }
    }
    /// The 14 loop body for dense position `off` whose xid is valid: skips the caller's own entry,
    /// xids not before `xmax` and vacuum / logical-decoding members, then lowers `xmin`, lists the
    /// xid and copies the subxids. Returns the new `xmin`. Out of line, as `pgxact_member`.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub(super) fn dense_running(
        &self,
        d: &DenseArrays,
        off: usize,
        xid: TransactionId,
        my_off: usize,
        xmax: TransactionId,
        mut xmin: TransactionId,
        snap: &mut Snapshot,
    ) -> TransactionId {
        if !xid.is_normal() || off == my_off || !prec::<true>(xid, xmax) {
            return xmin;
        }
        if d.status_flags[off].load(Ordering::Relaxed) & PROC_SNAPSHOT_SKIP != 0 {
            return xmin;
        }
        if prec::<true>(xid, xmin) {
            xmin = xid;
        }
        snap.xip.push(xid);
        if snap.suboverflowed {
            return xmin;
        }
        let s = &d.subxid_states[off];
        if s.overflowed.load(Ordering::Relaxed) {
            snap.suboverflowed = true;
        } else {
            let k = s.count.load(Ordering::Acquire) as usize;
            if k > 0 {
                fence(Ordering::Acquire);
                let p = self.pgprocnos[off].load(Ordering::Relaxed) as usize;
                self.push_subxids(p, k, snap);
            }
        }
        xmin
    }
    pub(super) fn dispatch_scan(&self, me: usize, xmax: TransactionId, snap: &mut Snapshot) -> ScanResult {
        let eager = self.cfg.global_xmin == GlobalXminMode::EverySnapshot;
        let skip = self.cfg.skip_subxids_without_xid;
        let fast = self.cfg.fast_xid_compare;
        macro_rules! knobs {
            ($view:expr) => {
                match (eager, skip, fast) {
                    (true, true, true) => self.scan_pgxact::<_, true, true, true>($view, me, xmax, snap),
                    (true, true, false) => self.scan_pgxact::<_, true, true, false>($view, me, xmax, snap),
                    (true, false, true) => self.scan_pgxact::<_, true, false, true>($view, me, xmax, snap),
                    (true, false, false) => self.scan_pgxact::<_, true, false, false>($view, me, xmax, snap),
                    (false, true, true) => self.scan_pgxact::<_, false, true, true>($view, me, xmax, snap),
                    (false, true, false) => self.scan_pgxact::<_, false, true, false>($view, me, xmax, snap),
                    (false, false, true) => self.scan_pgxact::<_, false, false, true>($view, me, xmax, snap),
                    (false, false, false) => {
                        self.scan_pgxact::<_, false, false, false>($view, me, xmax, snap)
                    }
                }
            };
        }
        match &self.hot {
            Hot::Pgproc => knobs!(ProcView(&self.procs)),
            Hot::Pgxact(x) => knobs!(XactView(x)),
            Hot::PgxactPadded(x) => knobs!(PaddedView(x)),
            Hot::Dense(d) => self.scan_dense(d, me, xmax, snap),
        }
    }
}

impl Backend {
    /// `GetSnapshotData`: computes a snapshot into this backend's reusable buffers and returns
    /// it. Holds ProcArrayLock shared for the scan; with `Dense` and reuse on, returns the
    /// previous snapshot unchanged if no xid-bearing transaction ended since it was computed.
    ///
    /// Also advertises the snapshot's xmin as this backend's xmin if it had none, updates the
    /// global xmin horizon (per [`GlobalXminMode`]) and maintains the old-snapshot time map when
    /// old_snapshot_threshold is on. No allocation once the buffers have grown to the largest
    /// snapshot seen.
    pub fn get_snapshot_data(&mut self) -> &Snapshot {
        let pa = &*self.pa;
        let me = self.pgprocno as usize;
        let snap = &mut self.snapshot;
        if snap.xip.capacity() < pa.cfg.max_backends {
            snap.xip.reserve(pa.cfg.max_backends);
        }
        let held = pa.proc_array_lock.acquire(LwLockMode::Shared);
        let count = pa.transam.xact_completion_count.load(Ordering::Relaxed);
        let reuse = pa.cfg.layout == Layout::Dense && pa.cfg.snapshot_reuse;
        let reused = reuse && snap.xact_completion_count == count;
        let mut cost = lockstack_common::sync::hook::pg_region(if reused {
            "procarray.get_snapshot_data.reuse"
        } else {
            "procarray.get_snapshot_data"
        });
        if reused {
            let slot = pa.xmin_slot(me);
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(snap.xmin.0, Ordering::Relaxed);
            }
            drop(cost);
            pa.release_pa(held);
            // Xmins may have moved since: the horizon must be recomputed when asked for.
            self.horizon_valid = false;
            self.stats.snapshots_reused.incr();
        } else {
            let xmax = TransactionId(pa.transam.latest_completed_xid.load(Ordering::Relaxed)).next();
            snap.xip.clear();
            snap.subxip.clear();
            snap.suboverflowed = false;
            let r = pa.dispatch_scan(me, xmax, snap);
            cost.add_items(u64::from(pa.num_procs.load(Ordering::Relaxed)));
            let slot = pa.xmin_slot(me);
            if slot.load(Ordering::Relaxed) == 0 {
                slot.store(r.xmin.0, Ordering::Relaxed);
            }
            drop(cost);
            pa.release_pa(held);
            snap.xmin = r.xmin;
            snap.xmax = xmax;
            snap.xact_completion_count = if reuse { count } else { 0 };
            match r.globalxmin {
                Some(g) => {
                    self.recent_global_xmin = if r.xmin.precedes(g) { r.xmin } else { g };
                    self.horizon_valid = true;
                }
                None => self.horizon_valid = false,
            }
            self.stats.snapshots_taken.incr();
        }
        if pa.old_snapshot.enabled() {
            let ts = pa.old_snapshot.current_timestamp();
            if pa.old_snapshot.maintain(ts, self.snapshot.xmin) {
                self.stats.time_map_exclusive.incr();
            }
        }
        &self.snapshot
    }
    /// The snapshot computed last (empty before the first [`get_snapshot_data`](Self::get_snapshot_data)).
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    /// `RecentXmin`: the xmin of the last snapshot.
    pub fn recent_xmin(&self) -> TransactionId {
        self.snapshot.xmin
    }
    /// `RecentGlobalXmin`: no xid older than this can be considered running by anyone (rows
    /// deleted before it can be pruned). With [`GlobalXminMode::EverySnapshot`] it comes from
    /// the last snapshot's scan; otherwise (and for `Dense`) it is computed here by a full scan
    /// ([`ProcArray::get_oldest_xmin`]) at most once per snapshot.
    pub fn recent_global_xmin(&mut self) -> TransactionId {
        if !self.horizon_valid {
            let g = self.pa.get_oldest_xmin();
            let x = self.snapshot.xmin;
            self.recent_global_xmin = if x.is_valid() && x.precedes(g) { x } else { g };
            self.horizon_valid = true;
            self.stats.horizon_scans.incr();
        }
        self.recent_global_xmin
    }
    /// `SnapshotResetXmin`: the backend no longer holds a snapshot; clears its advertised xmin
    /// without ProcArrayLock (it can only make others' horizon estimates more conservative).
    pub fn reset_xmin(&mut self) {
        self.pa.xmin_slot(self.pgprocno as usize).store(0, Ordering::Relaxed);
    }
}
