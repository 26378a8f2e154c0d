//! The ProcArray: membership, xid assignment, `get_snapshot_data`, the end of transactions and
//! the global xmin horizon (`src/backend/storage/ipc/procarray.c`,
//! `src/backend/access/transam/varsup.c`).
//!
//! Locking follows PostgreSQL (reference §4.2 and §7):
//!
//! * `XidGenLock` (exclusive) serialises xid assignment; the new xid is stored in the backend's
//!   entry before the lock is released, so an assigned xid is visible to snapshots before any
//!   later xid can be (and therefore before any later xid can complete).
//! * `get_snapshot_data` holds `ProcArrayLock` shared; an xid leaves the running set, and
//!   `latest_completed_xid` advances, only under `ProcArrayLock` exclusive (taken by the ending
//!   backend, a FlexLock releaser or a group leader).
//! * Membership changes take `ProcArrayLock` then `XidGenLock`, both exclusive, because `Dense`
//!   entries move and xid assignment writes them under `XidGenLock` only.

use crate::sync::Ordering;
use crate::sync::plain::AtomicBool as StdBool;
use std::fmt;
use std::hint::cold_path;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::{
    AttachError, BackendId, LocalTransactionId, StatsRegistry, TrancheId, TransactionId,
    VirtualTransactionId, WaitEvent,
};
use lockstack_lwlock::{
    FlexLock, FlexRole, GroupCombiner, GroupRole, LwLock, LwLockHeld, LwLockImpl, LwLockMode,
};

use crate::config::{ConfigError, EndXactStrategy, GlobalXminMode, Layout, ProcArrayConfig};
use crate::old_snapshot::{Clock, OldSnapshotTimeMap, SystemClock};
use crate::proc::{
    PGPROC_MAX_CACHED_SUBXIDS, PROC_KNOWN_FLAGS, PROC_SNAPSHOT_SKIP, PgProc, PgXact, SubXidState,
};
use crate::snapshot::Snapshot;
use crate::stats::{BackendProcStats, ProcArrayStats};
use crate::sync::{AtomicU8, AtomicU32, AtomicU64, fence};
use lockstack_common::sync::hook;

/// Errors of ProcArray xid assignment and subtransaction calls (membership errors are
/// [`AttachError`]s, as for every subsystem).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcArrayError {
    /// `abort_subxids` was given an xid that is not a live subtransaction of this backend.
    NotMySubxid(TransactionId),
    /// `set_vacuum_flags` was given bits outside the known vacuum/status flags.
    UnknownVacuumFlags(u8),
    /// The xid-extension hook failed (its message); no xid was assigned.
    XidExtend(String),
    /// `set_xid_extend_hook` was called when a hook was already installed.
    XidExtendHookSet,
}

impl fmt::Display for ProcArrayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcArrayError::NotMySubxid(x) => {
                write!(f, "xid {x} is not a live subtransaction of this backend's transaction")
            }
            ProcArrayError::UnknownVacuumFlags(v) => write!(f, "vacuum flags {v:#04x} include unknown bits"),
            ProcArrayError::XidExtend(e) => write!(f, "could not extend the transaction status logs: {e}"),
            ProcArrayError::XidExtendHookSet => f.write_str("an xid-extension hook is already installed"),
        }
    }
}

impl std::error::Error for ProcArrayError {}

/// What the end-of-transaction code must do for one backend: clear its entry and advance
/// `latest_completed_xid` to `latest_xid` (PostgreSQL passes the latest xid of the transaction
/// tree explicitly, because the subxid cache may have overflowed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EndXactRequest {
    /// The ending backend's `pgprocno`.
    pub pgprocno: u32,
    /// The newest xid among the transaction and its committed subtransactions.
    pub latest_xid: TransactionId,
}

/// How a transaction left the ProcArray.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EndXactRole {
    /// It had no xid: xmin cleared without ProcArrayLock.
    ReadOnly,
    /// `Exclusive`: own blocking exclusive acquisition.
    Exclusive,
    /// `FlexLock`: the lock was free and the caller cleared its entry.
    FlexDirect,
    /// `FlexLock`: queued and cleared by a releasing holder.
    FlexQueued,
    /// `GroupClear`: the conditional exclusive acquire succeeded.
    GroupAlone,
    /// `GroupClear`: led a group of `members` requests (its own included).
    GroupLeader {
        /// Requests cleared under the leader's one exclusive acquisition.
        members: usize,
    },
    /// `GroupClear`: cleared by another backend's group.
    GroupFollower,
}

/// Result of [`Backend::end_transaction`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EndXactOutcome {
    /// The top-level xid that ended (invalid for a read-only transaction).
    pub xid: TransactionId,
    /// The newest xid of the tree (what `latest_completed_xid` was advanced to, if newer).
    pub latest_xid: TransactionId,
    /// How the entry was cleared.
    pub role: EndXactRole,
}

/// `ShmemVariableCache` / `TransamVariables`: the xid counters, on their own cache line.
struct TransamVariables {
    next_xid: AtomicU32,
    latest_completed_xid: AtomicU32,
    xact_completion_count: AtomicU64,
}

/// 14's dense arrays, in ProcArray order (`ProcGlobal->xids`, `subxidStates`, `statusFlags`).
struct DenseArrays {
    xids: Box<[AtomicU32]>,
    subxid_states: Box<[SubXidState]>,
    status_flags: Box<[AtomicU8]>,
}

/// Where the hot fields live, per [`Layout`].
enum Hot {
    Pgproc,
    Pgxact(Box<[PgXact]>),
    PgxactPadded(Box<[CachePadded<PgXact>]>),
    Dense(DenseArrays),
}

/// Read access to the hot fields of the PGXACT-era layouts, indexed by `pgprocno`; the three
/// implementations are monomorphised into the snapshot loop (no `dyn`).
///
/// The per-member accessors used by the loop are `unsafe` and skip the bounds check (PostgreSQL
/// indexes `allPgXact[pgprocno]` unchecked too): the caller guarantees `p < max_backends`, which
/// holds for every `pgprocnos[i]` with `i < num_procs` read under ProcArrayLock (see
/// [`ProcArray::scan_pgxact`]).
trait HotView {
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

struct ProcView<'a>(&'a [PgProc]);
struct XactView<'a>(&'a [PgXact]);
struct PaddedView<'a>(&'a [CachePadded<PgXact>]);

impl HotView for ProcView<'_> {
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
        self.0[p].subxid_overflowed.load(Ordering::Relaxed)
    }
    #[inline(always)]
    fn nxids(&self, p: usize) -> usize {
        self.0[p].subxid_count.load(Ordering::Acquire) as usize
    }
}

macro_rules! xact_view {
    ($t:ty) => {
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
                self.0[p].overflowed.load(Ordering::Relaxed)
            }
            #[inline(always)]
            fn nxids(&self, p: usize) -> usize {
                self.0[p].nxids.load(Ordering::Acquire) as usize
            }
        }
    };
}
xact_view!(XactView<'_>);
xact_view!(PaddedView<'_>);

/// `a` precedes `b`: with `FAST`, the plain signed difference of two xids known to be normal
/// (`NormalTransactionIdPrecedes`, 9.2); otherwise the general comparison (9.1).
#[inline(always)]
fn prec<const FAST: bool>(a: TransactionId, b: TransactionId) -> bool {
    if FAST { (a.0.wrapping_sub(b.0) as i32) < 0 } else { a.precedes(b) }
}

/// Members whose dense xids the 14 loop tests for "all 0" at once (see `ProcArray::scan_dense`).
/// 8 measured faster than 16 at 1000 members / 10 running: a chunk holding an xid is walked
/// entry by entry, so larger chunks cost more per running member.
const DENSE_CHUNK: usize = 8;

/// Members per iteration of the PGXACT-era snapshot loop (see `ProcArray::scan_pgxact`). Of 1, 2,
/// 4, 8 and 16, 8 was the fastest for `Pgxact` and for `Pgproc` alike at 1000 members.
const PGXACT_UNROLL: usize = 8;

/// Running state of the 9.2 snapshot loop, passed to its out-of-line member step.
struct Fold {
    me: usize,
    xmax: TransactionId,
    xmin: TransactionId,
    globalxmin: TransactionId,
}

/// Output of one ProcArray scan besides the snapshot itself.
struct ScanResult {
    xmin: TransactionId,
    globalxmin: Option<TransactionId>,
}

/// The shared ProcArray of one simulated server: `max_backends` `PgProc`s, the hot-field
/// layout, `ProcArrayLock`, `XidGenLock`, the xid counters and the old-snapshot map.
///
/// Create it with [`ProcArray::new`], then make each client thread a member with
/// [`ProcArray::attach`], which returns that thread's [`Backend`] handle.
pub struct ProcArray {
    cfg: ProcArrayConfig,
    procs: Box<[PgProc]>,
    hot: Hot,
    /// `ProcArrayStruct.numProcs`; changed under ProcArrayLock (+ XidGenLock) exclusive.
    num_procs: AtomicU32,
    /// `ProcArrayStruct.pgprocnos[]`, sorted ascending (9.2+ keeps it in `PGPROC` order).
    pgprocnos: Box<[AtomicU32]>,
    attached: Box<[StdBool]>,
    /// ProcArrayLock; every release goes through `release_pa` so FlexLock can run queued work.
    proc_array_lock: FlexLock<EndXactRequest, LwLock>,
    group: GroupCombiner<EndXactRequest>,
    xid_gen_lock: LwLock,
    transam: CachePadded<TransamVariables>,
    old_snapshot: OldSnapshotTimeMap,
    stats: StatsRegistry<BackendProcStats>,
    /// Called for every new xid under XidGenLock (see [`ProcArray::set_xid_extend_hook`]).
    extend_hook: std::sync::OnceLock<XidExtendHook>,
}

/// What `GetNewTransactionId` runs for each new xid, under XidGenLock and before the xid is
/// handed out: `ExtendCLOG`, `ExtendCommitTs` and `ExtendSUBTRANS` in PostgreSQL (8.0-18), which
/// zero a status page when the xid is the first on it. An `Err` (an I/O error while making room
/// for the page) fails the assignment: the xid is not consumed, as PostgreSQL's `ereport(ERROR)`
/// there leaves `nextXid` unchanged. The message is passed on in
/// [`ProcArrayError::XidExtend`].
pub type XidExtendHook = Box<dyn Fn(TransactionId) -> Result<(), XidExtendError> + Send + Sync>;

/// The error an [`XidExtendHook`] returns: whatever its status logs failed with (a CLOG or
/// pg_subtrans I/O error in the engine).
pub type XidExtendError = Box<dyn std::error::Error + Send + Sync>;

impl fmt::Debug for ProcArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcArray")
            .field("config", &self.cfg)
            .field("num_procs", &self.num_procs())
            .field("next_xid", &self.next_xid())
            .field("latest_completed_xid", &self.latest_completed_xid())
            .finish_non_exhaustive()
    }
}

impl ProcArray {
    /// A ProcArray for `cfg` (no members yet) reading old-snapshot time from the wall clock.
    ///
    /// Memory: `max_backends` × (`size_of::<PgProc>()` ≈ 1 KiB + the layout's arrays).
    ///
    /// # Errors
    /// If `cfg` fails [`ProcArrayConfig::validate`].
    pub fn new(cfg: ProcArrayConfig) -> Result<Arc<ProcArray>, ConfigError> {
        Self::with_clock(cfg, Arc::new(SystemClock))
    }

    /// As [`new`](Self::new), with the clock old_snapshot_threshold reads (a
    /// [`crate::VirtualClock`] in tests).
    ///
    /// # Errors
    /// If `cfg` fails [`ProcArrayConfig::validate`].
    pub fn with_clock(cfg: ProcArrayConfig, clock: Arc<dyn Clock>) -> Result<Arc<ProcArray>, ConfigError> {
        cfg.validate()?;
        let n = cfg.max_backends;
        let procs: Box<[PgProc]> = (0..n).map(|i| PgProc::new(i as u32)).collect();
        let hot = match cfg.layout {
            Layout::Pgproc => Hot::Pgproc,
            Layout::Pgxact => Hot::Pgxact((0..n).map(|_| PgXact::new()).collect()),
            Layout::PgxactPadded => {
                Hot::PgxactPadded((0..n).map(|_| CachePadded::new(PgXact::new())).collect())
            }
            Layout::Dense => Hot::Dense(DenseArrays {
                xids: (0..n).map(|_| AtomicU32::new(0)).collect(),
                subxid_states: (0..n).map(|_| SubXidState::new()).collect(),
                status_flags: (0..n).map(|_| AtomicU8::new(0)).collect(),
            }),
        };
        // Only the strategy in use needs a member slot per backend.
        let flex_members = if cfg.end_xact == EndXactStrategy::FlexLock { n } else { 1 };
        let group_members = if cfg.end_xact == EndXactStrategy::GroupClear { n } else { 1 };
        let latest = cfg.first_xid.prev();
        let pa = Arc::new(ProcArray {
            procs,
            hot,
            num_procs: AtomicU32::new(0),
            pgprocnos: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(),
            attached: (0..n).map(|_| StdBool::new(false)).collect(),
            proc_array_lock: FlexLock::new(
                LwLock::new(cfg.lwlock_kind, TrancheId::PROC_ARRAY, 0),
                flex_members,
            ),
            group: GroupCombiner::new(group_members, WaitEvent::PROC_ARRAY_GROUP_UPDATE),
            xid_gen_lock: LwLock::new(cfg.lwlock_kind, TrancheId::XID_GEN, 0),
            transam: CachePadded::new(TransamVariables {
                next_xid: AtomicU32::new(cfg.first_xid.0),
                latest_completed_xid: AtomicU32::new(latest.0),
                // PostgreSQL starts at 1 so that 0 can mean "snapshot not cacheable".
                xact_completion_count: AtomicU64::new(1),
            }),
            extend_hook: std::sync::OnceLock::new(),
            old_snapshot: OldSnapshotTimeMap::new(
                cfg.old_snapshot_threshold,
                cfg.time_map,
                clock,
                cfg.lwlock_kind,
            ),
            stats: StatsRegistry::new(),
            cfg,
        });
        pa.name_lines();
        Ok(pa)
    }

    /// Names the hot lines for a simulation's statistics (see `hook::name_line`): the two
    /// LWLocks, the xid counter, `numProcs` and `pgprocnos`, each PGPROC's hot words
    /// (`"PGPROC 5 xid + xmin"`, `"PGPROC 5 pgxactoff"`) and each member's hot fields in the
    /// layout's array (`"PgXact 5"`, `"ProcGlobal xids 0-15"`).
    fn name_lines(&self) {
        self.proc_array_lock.lock().name_line_as(|| "ProcArrayLock".to_string());
        // XidGenLock and OldSnapshotTimeMapLock are unpadded fields of this struct and may
        // share a line: such a line is named for both.
        self.old_snapshot.name_lines();
        let shared = self.old_snapshot.lock_addr() as usize / hook::LINE_BYTES
            == self.xid_gen_lock.word_addr() as usize / hook::LINE_BYTES;
        self.xid_gen_lock.name_line_as(|| {
            if shared { "XidGenLock + OldSnapshotTimeMapLock".to_string() } else { "XidGenLock".to_string() }
        });
        hook::name_line(&self.transam.next_xid as *const AtomicU32 as *const u8, || {
            "XidGen nextXid".to_string()
        });
        hook::name_line(&self.num_procs as *const AtomicU32 as *const u8, || {
            "ProcArray numProcs".to_string()
        });
        hook::name_elements(&self.pgprocnos, "ProcArray pgprocnos");
        // Each PGPROC's hot words, in every layout: `xid` and `xmin` (GetSnapshotData sets and
        // clears `xmin`, which 14 keeps in PGPROC) and `pgxactoff` (14's dense index).
        for (i, p) in self.procs.iter().enumerate() {
            let a = |r: &AtomicU32| r as *const AtomicU32 as *const u8;
            hook::name_fields(
                &format!("PGPROC {i}"),
                &[("xid", a(&p.xid)), ("xmin", a(&p.xmin)), ("pgxactoff", a(&p.pgxactoff))],
            );
        }
        match &self.hot {
            Hot::Pgproc => {}
            Hot::Pgxact(x) => hook::name_elements(x, "PgXact"),
            Hot::PgxactPadded(x) => hook::name_elements(x, "PgXact"),
            Hot::Dense(d) => {
                hook::name_elements(&d.xids, "ProcGlobal xids");
                hook::name_elements(&d.subxid_states, "ProcGlobal subxidStates");
                hook::name_elements(&d.status_flags, "ProcGlobal statusFlags");
            }
        }
    }

    /// The configuration this ProcArray was built with.
    pub fn config(&self) -> &ProcArrayConfig {
        &self.cfg
    }

    /// The layout of the hot fields.
    pub fn layout(&self) -> Layout {
        self.cfg.layout
    }

    /// The `PgProc` of slot `id` (member or not).
    ///
    /// # Panics
    /// If `id` is not below `max_backends`.
    pub fn proc(&self, id: BackendId) -> &PgProc {
        &self.procs[id.index()]
    }

    /// The next xid to be assigned (`nextXid`; a hint when read without XidGenLock).
    pub fn next_xid(&self) -> TransactionId {
        TransactionId(self.transam.next_xid.load(Ordering::Acquire))
    }

    /// `latestCompletedXid`: the newest xid that has left the running set (a hint when read
    /// without ProcArrayLock). Starts as `first_xid - 1`.
    pub fn latest_completed_xid(&self) -> TransactionId {
        TransactionId(self.transam.latest_completed_xid.load(Ordering::Acquire))
    }

    /// `xactCompletionCount` (14+): bumped under exclusive ProcArrayLock at every end of an
    /// xid-bearing transaction and every subtransaction abort that removed cached xids. Starts
    /// at 1.
    pub fn xact_completion_count(&self) -> u64 {
        self.transam.xact_completion_count.load(Ordering::Acquire)
    }

    /// Number of members (`numProcs`).
    pub fn num_procs(&self) -> usize {
        self.num_procs.load(Ordering::Acquire) as usize
    }

    /// The members in ProcArray order (ascending backend id). Takes ProcArrayLock shared.
    pub fn members(&self) -> Vec<BackendId> {
        let held = self.proc_array_lock.acquire(LwLockMode::Shared);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let v = (0..n).map(|i| BackendId(self.pgprocnos[i].load(Ordering::Relaxed))).collect();
        self.release_pa(held);
        v
    }

    /// The ProcArrayLock (for statistics and `is_locked` hints; do not acquire it directly
    /// under the `FlexLock` strategy, whose releases must run queued requests).
    pub fn proc_array_lock(&self) -> &LwLock {
        self.proc_array_lock.lock()
    }

    /// The XidGenLock.
    pub fn xid_gen_lock(&self) -> &LwLock {
        &self.xid_gen_lock
    }

    /// The old_snapshot_threshold state (time map, newest xmin).
    pub fn old_snapshot_map(&self) -> &OldSnapshotTimeMap {
        &self.old_snapshot
    }

    /// Sums every backend's counters (including backends that have detached).
    pub fn stats(&self) -> ProcArrayStats {
        let mut s = ProcArrayStats::default();
        self.stats.for_each(|b| s.add_backend(b));
        s
    }

    /// Makes backend `id` a member (`InitProcess` + `ProcArrayAdd`): inserts it in ProcArray
    /// order under ProcArrayLock and XidGenLock exclusive, and returns its handle.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below `max_backends`,
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<Backend, AttachError> {
        let max = self.cfg.max_backends;
        if id.index() >= max {
            return Err(AttachError::OutOfRange { id, max_backends: max });
        }
        if self.attached[id.index()].swap(true, Ordering::AcqRel) {
            return Err(AttachError::AlreadyAttached { id, subsystem: "ProcArray" });
        }
        self.proc_array_add(id.0);
        Ok(Backend {
            pa: Arc::clone(self),
            pgprocno: id.0,
            xid: TransactionId::INVALID,
            subxids: Vec::new(),
            n_cached: 0,
            overflowed: false,
            lxid: LocalTransactionId::INVALID,
            snapshot: Snapshot::default(),
            recent_global_xmin: TransactionId::INVALID,
            horizon_valid: false,
            stats: self.stats.register(),
            detached: false,
        })
    }

    fn proc_array_add(&self, pgprocno: u32) {
        let pa = self.proc_array_lock.acquire(LwLockMode::Exclusive);
        let xg = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let pos = (0..n).find(|&i| self.pgprocnos[i].load(Ordering::Relaxed) > pgprocno).unwrap_or(n);
        for i in (pos..n).rev() {
            self.move_entry(i, i + 1);
        }
        self.pgprocnos[pos].store(pgprocno, Ordering::Relaxed);
        let proc = &self.procs[pgprocno as usize];
        proc.pgxactoff.store(pos as u32, Ordering::Relaxed);
        if let Hot::Dense(d) = &self.hot {
            d.xids[pos].store(proc.xid.load(Ordering::Relaxed), Ordering::Relaxed);
            d.subxid_states[pos].count.store(proc.subxid_count.load(Ordering::Relaxed), Ordering::Relaxed);
            d.subxid_states[pos]
                .overflowed
                .store(proc.subxid_overflowed.load(Ordering::Relaxed), Ordering::Relaxed);
            d.status_flags[pos].store(proc.vacuum_flags.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.num_procs.store(n as u32 + 1, Ordering::Release);
        self.xid_gen_lock.release(xg);
        self.release_pa(pa);
    }

    fn proc_array_remove(&self, pgprocno: u32) {
        let pa = self.proc_array_lock.acquire(LwLockMode::Exclusive);
        let xg = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        if let Some(pos) = (0..n).find(|&i| self.pgprocnos[i].load(Ordering::Relaxed) == pgprocno) {
            for i in pos + 1..n {
                self.move_entry(i, i - 1);
            }
            self.pgprocnos[n - 1].store(u32::MAX, Ordering::Relaxed);
            if let Hot::Dense(d) = &self.hot {
                d.xids[n - 1].store(0, Ordering::Relaxed);
                d.subxid_states[n - 1].count.store(0, Ordering::Relaxed);
                d.subxid_states[n - 1].overflowed.store(false, Ordering::Relaxed);
                d.status_flags[n - 1].store(0, Ordering::Relaxed);
            }
            self.procs[pgprocno as usize].pgxactoff.store(u32::MAX, Ordering::Relaxed);
            self.num_procs.store(n as u32 - 1, Ordering::Release);
        }
        self.xid_gen_lock.release(xg);
        self.release_pa(pa);
    }

    /// Moves ProcArray position `from` to `to` (both locks held exclusive).
    fn move_entry(&self, from: usize, to: usize) {
        let p = self.pgprocnos[from].load(Ordering::Relaxed);
        self.pgprocnos[to].store(p, Ordering::Relaxed);
        self.procs[p as usize].pgxactoff.store(to as u32, Ordering::Relaxed);
        if let Hot::Dense(d) = &self.hot {
            d.xids[to].store(d.xids[from].load(Ordering::Relaxed), Ordering::Relaxed);
            let (sf, st) = (&d.subxid_states[from], &d.subxid_states[to]);
            st.count.store(sf.count.load(Ordering::Relaxed), Ordering::Relaxed);
            st.overflowed.store(sf.overflowed.load(Ordering::Relaxed), Ordering::Relaxed);
            d.status_flags[to].store(d.status_flags[from].load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Releases ProcArrayLock; under `FlexLock`, runs the requests queued meanwhile.
    #[inline]
    fn release_pa(&self, held: LwLockHeld) {
        if self.cfg.end_xact == EndXactStrategy::FlexLock {
            self.proc_array_lock.release(held, |r| self.end_xact_internal(r));
        } else {
            self.proc_array_lock.lock().release(held);
        }
    }

    /// The own xmin slot of the layout (`PgProc.xmin` for `Pgproc` and `Dense`).
    #[inline]
    fn xmin_slot(&self, p: usize) -> &AtomicU32 {
        match &self.hot {
            Hot::Pgproc | Hot::Dense(_) => &self.procs[p].xmin,
            Hot::Pgxact(x) => &x[p].xmin,
            Hot::PgxactPadded(x) => &x[p].xmin,
        }
    }

    /// The authoritative top-level xid of slot `p` (any lock or none: a hint).
    fn xid_of(&self, p: usize) -> TransactionId {
        TransactionId(match &self.hot {
            Hot::Pgproc | Hot::Dense(_) => self.procs[p].xid.load(Ordering::Relaxed),
            Hot::Pgxact(x) => x[p].xid.load(Ordering::Relaxed),
            Hot::PgxactPadded(x) => x[p].xid.load(Ordering::Relaxed),
        })
    }

    /// Installs the hook that `GetNewTransactionId` runs for every new xid under XidGenLock,
    /// before the xid is handed out (see [`XidExtendHook`]); a transaction engine passes its
    /// CLOG and SUBTRANS extension here, so that a status page always exists before any xid on
    /// it can be published, let alone commit. Set it before the first xid is assigned.
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtendHookSet`] if a hook is already installed (it is kept).
    pub fn set_xid_extend_hook(&self, hook: XidExtendHook) -> Result<(), ProcArrayError> {
        self.extend_hook.set(hook).map_err(|_| ProcArrayError::XidExtendHookSet)
    }

    /// `GetNewTransactionId`: takes XidGenLock, runs the extension hook for `nextXid`, hands it
    /// out, publishes it in slot `p` (top-level, or the subxid cache / overflow flag), and only
    /// then releases the lock. If the hook fails, nothing is consumed or published.
    fn get_new_transaction_id(
        &self,
        p: usize,
        is_subxact: bool,
    ) -> Result<(TransactionId, bool), ProcArrayError> {
        let held = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let cost = lockstack_common::sync::hook::pg_region("procarray.xid_assign");
        let xid = TransactionId(self.transam.next_xid.load(Ordering::Relaxed));
        if let Some(hook) = self.extend_hook.get()
            && let Err(e) = hook(xid)
        {
            drop(cost);
            self.xid_gen_lock.release(held);
            return Err(ProcArrayError::XidExtend(e.to_string()));
        }
        self.transam.next_xid.store(xid.next().0, Ordering::Relaxed);
        let proc = &self.procs[p];
        let mut overflowed_now = false;
        if !is_subxact {
            match &self.hot {
                Hot::Pgproc => proc.xid.store(xid.0, Ordering::Relaxed),
                Hot::Pgxact(x) => x[p].xid.store(xid.0, Ordering::Relaxed),
                Hot::PgxactPadded(x) => x[p].xid.store(xid.0, Ordering::Relaxed),
                Hot::Dense(d) => {
                    let off = proc.pgxactoff.load(Ordering::Relaxed) as usize;
                    proc.xid.store(xid.0, Ordering::Relaxed);
                    d.xids[off].store(xid.0, Ordering::Relaxed);
                }
            }
        } else {
            // Only this backend writes its own count, so a relaxed read of it is exact.
            let (count, over): (&AtomicU8, &crate::sync::AtomicBool) = match &self.hot {
                Hot::Pgproc | Hot::Dense(_) => (&proc.subxid_count, &proc.subxid_overflowed),
                Hot::Pgxact(x) => (&x[p].nxids, &x[p].overflowed),
                Hot::PgxactPadded(x) => (&x[p].nxids, &x[p].overflowed),
            };
            let n = count.load(Ordering::Relaxed) as usize;
            let dense = match &self.hot {
                Hot::Dense(d) => Some(&d.subxid_states[proc.pgxactoff.load(Ordering::Relaxed) as usize]),
                _ => None,
            };
            if n < PGPROC_MAX_CACHED_SUBXIDS && !over.load(Ordering::Relaxed) {
                proc.subxids[n].store(xid.0, Ordering::Relaxed);
                // The xid must be visible before the count that covers it (PG's write barrier).
                count.store(n as u8 + 1, Ordering::Release);
                if let Some(s) = dense {
                    s.count.store(n as u8 + 1, Ordering::Release);
                }
            } else {
                over.store(true, Ordering::Relaxed);
                if let Some(s) = dense {
                    s.overflowed.store(true, Ordering::Relaxed);
                }
                overflowed_now = true;
            }
        }
        drop(cost);
        self.xid_gen_lock.release(held);
        Ok((xid, overflowed_now))
    }

    /// `ProcArrayEndTransactionInternal`: clears slot `req.pgprocno` and advances
    /// `latest_completed_xid`. Caller holds ProcArrayLock exclusive (directly, as a FlexLock
    /// releaser, or as a group leader).
    fn end_xact_internal(&self, req: &mut EndXactRequest) {
        let _cost = lockstack_common::sync::hook::pg_region("procarray.end_transaction");
        let p = req.pgprocno as usize;
        let proc = &self.procs[p];
        match &self.hot {
            Hot::Pgproc => clear_pgproc(proc),
            Hot::Pgxact(x) => clear_pgxact(&x[p]),
            Hot::PgxactPadded(x) => clear_pgxact(&x[p]),
            Hot::Dense(d) => {
                let off = proc.pgxactoff.load(Ordering::Relaxed) as usize;
                d.xids[off].store(0, Ordering::Relaxed);
                let s = &d.subxid_states[off];
                // Avoid dirtying shared lines that are already clear (PG does the same).
                if s.count.load(Ordering::Relaxed) != 0 {
                    s.count.store(0, Ordering::Relaxed);
                }
                if s.overflowed.load(Ordering::Relaxed) {
                    s.overflowed.store(false, Ordering::Relaxed);
                }
                if d.status_flags[off].load(Ordering::Relaxed) != 0 {
                    d.status_flags[off].store(0, Ordering::Relaxed);
                }
                clear_pgproc(proc);
            }
        }
        proc.lxid.store(0, Ordering::Relaxed);
        self.advance_latest_completed(req.latest_xid);
        let c = self.transam.xact_completion_count.load(Ordering::Relaxed);
        self.transam.xact_completion_count.store(c + 1, Ordering::Relaxed);
    }

    /// `MaintainLatestCompletedXid` (ProcArrayLock exclusive held).
    fn advance_latest_completed(&self, latest_xid: TransactionId) {
        let cur = TransactionId(self.transam.latest_completed_xid.load(Ordering::Relaxed));
        if latest_xid.follows(cur) {
            self.transam.latest_completed_xid.store(latest_xid.0, Ordering::Relaxed);
        }
    }

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
    fn scan_pgxact<V: HotView, const EAGER: bool, const SKIP: bool, const FAST: bool>(
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
    fn pgxact_member<V: HotView, const EAGER: bool, const FAST: bool>(
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
    fn copy_subxids<V: HotView>(&self, v: &V, p: usize, snap: &mut Snapshot) {
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
    fn push_subxids(&self, p: usize, k: usize, snap: &mut Snapshot) {
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
    fn scan_dense(&self, d: &DenseArrays, me: usize, xmax: TransactionId, snap: &mut Snapshot) -> ScanResult {
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
    fn dense_running(
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

    fn dispatch_scan(&self, me: usize, xmax: TransactionId, snap: &mut Snapshot) -> ScanResult {
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

fn clear_pgproc(proc: &PgProc) {
    proc.xid.store(0, Ordering::Relaxed);
    proc.xmin.store(0, Ordering::Relaxed);
    if proc.vacuum_flags.load(Ordering::Relaxed) != 0 {
        proc.vacuum_flags.store(0, Ordering::Relaxed);
    }
    if proc.subxid_count.load(Ordering::Relaxed) != 0 {
        proc.subxid_count.store(0, Ordering::Relaxed);
    }
    if proc.subxid_overflowed.load(Ordering::Relaxed) {
        proc.subxid_overflowed.store(false, Ordering::Relaxed);
    }
}

fn clear_pgxact(x: &PgXact) {
    x.xid.store(0, Ordering::Relaxed);
    x.xmin.store(0, Ordering::Relaxed);
    if x.vacuum_flags.load(Ordering::Relaxed) != 0 {
        x.vacuum_flags.store(0, Ordering::Relaxed);
    }
    if x.delay_chkpt.load(Ordering::Relaxed) {
        x.delay_chkpt.store(false, Ordering::Relaxed);
    }
    if x.nxids.load(Ordering::Relaxed) != 0 {
        x.nxids.store(0, Ordering::Relaxed);
    }
    if x.overflowed.load(Ordering::Relaxed) {
        x.overflowed.store(false, Ordering::Relaxed);
    }
}

/// One member of a [`ProcArray`]: the per-backend state PostgreSQL keeps in backend-local
/// memory (`MyProc`, the current transaction's xids, the static snapshot buffers,
/// `RecentGlobalXmin`) plus its counters.
///
/// A `Backend` is used by one thread at a time (`Send`, not `Sync`). Dropping it ends any
/// transaction still open and leaves the ProcArray, as [`Backend::detach`] does.
pub struct Backend {
    pa: Arc<ProcArray>,
    pgprocno: u32,
    xid: TransactionId,
    /// Live (not aborted) subxids of the current transaction, in assignment order.
    subxids: Vec<TransactionId>,
    /// How many of them sit in the shared cache.
    n_cached: usize,
    overflowed: bool,
    lxid: LocalTransactionId,
    snapshot: Snapshot,
    recent_global_xmin: TransactionId,
    horizon_valid: bool,
    stats: lockstack_common::StatsBlock<BackendProcStats>,
    detached: bool,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("pgprocno", &self.pgprocno)
            .field("xid", &self.xid)
            .field("subxids", &self.subxids.len())
            .field("overflowed", &self.overflowed)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// This backend's id (= `pgprocno`).
    pub fn id(&self) -> BackendId {
        BackendId(self.pgprocno)
    }

    /// The ProcArray this backend belongs to.
    pub fn proc_array(&self) -> &Arc<ProcArray> {
        &self.pa
    }

    /// The current top-level xid, or invalid if none has been assigned.
    pub fn xid(&self) -> TransactionId {
        self.xid
    }

    /// The live subtransaction xids of the current transaction, oldest first.
    pub fn subxids(&self) -> &[TransactionId] {
        &self.subxids
    }

    /// True once the current transaction had more than 64 subxids (the cache overflowed).
    pub fn subxids_overflowed(&self) -> bool {
        self.overflowed
    }

    /// This backend's counters.
    pub fn stats(&self) -> &BackendProcStats {
        &self.stats
    }

    /// Starts a transaction and returns its virtual xid (`backend/lxid`); no shared counter is
    /// touched (`StartTransaction` → `VirtualXactLockTableInsert`, 8.3+). Calling it inside an
    /// open transaction just returns the current vxid.
    pub fn start_transaction(&mut self) -> VirtualTransactionId {
        if !self.in_transaction() {
            self.lxid = self.lxid.next();
            self.pa.procs[self.pgprocno as usize].lxid.store(self.lxid.0, Ordering::Relaxed);
        }
        VirtualTransactionId { backend_id: self.id(), local_xid: self.lxid }
    }

    fn in_transaction(&self) -> bool {
        self.pa.procs[self.pgprocno as usize].lxid.load(Ordering::Relaxed) != 0
    }

    /// `GetTopTransactionId` / `AssignTransactionId` for the top level: the current xid, assigned
    /// now (under XidGenLock, published before its release) if the transaction had none.
    ///
    /// # Panics
    /// If the ProcArray's [`XidExtendHook`] fails; use [`try_assign_xid`](Self::try_assign_xid)
    /// with a hook that can.
    pub fn assign_xid(&mut self) -> TransactionId {
        self.try_assign_xid().unwrap_or_else(|e| panic!("assign_xid: {e}"))
    }

    /// [`assign_xid`](Self::assign_xid) that reports a failing [`XidExtendHook`].
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtend`]: the transaction keeps no xid (a later call retries).
    pub fn try_assign_xid(&mut self) -> Result<TransactionId, ProcArrayError> {
        if !self.xid.is_valid() {
            self.start_transaction();
            let (xid, _) = self.pa.get_new_transaction_id(self.pgprocno as usize, false)?;
            self.xid = xid;
            self.stats.xids_assigned.incr();
        }
        Ok(self.xid)
    }

    /// `AssignTransactionId` for a subtransaction: assigns the top-level xid first if needed
    /// (read it back with [`xid`](Self::xid)), then a new subxid, published in the 64-entry
    /// cache or, when full, by setting the overflow flag. The caller records the parent in
    /// pg_subtrans (`SubTransSetParent`) before anyone can need it.
    ///
    /// # Panics
    /// If the ProcArray's [`XidExtendHook`] fails; use
    /// [`try_assign_subxid`](Self::try_assign_subxid) with a hook that can.
    pub fn assign_subxid(&mut self) -> TransactionId {
        self.try_assign_subxid().unwrap_or_else(|e| panic!("assign_subxid: {e}"))
    }

    /// [`assign_subxid`](Self::assign_subxid) that reports a failing [`XidExtendHook`].
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtend`]: no subxid was assigned (the top-level xid may have been).
    pub fn try_assign_subxid(&mut self) -> Result<TransactionId, ProcArrayError> {
        self.try_assign_xid()?;
        if self.subxids.capacity() == 0 {
            self.subxids.reserve(PGPROC_MAX_CACHED_SUBXIDS);
        }
        let (xid, overflowed_now) = self.pa.get_new_transaction_id(self.pgprocno as usize, true)?;
        self.subxids.push(xid);
        if overflowed_now {
            self.overflowed = true;
            self.stats.subxid_overflows.incr();
        } else {
            self.n_cached += 1;
        }
        self.stats.subxids_assigned.incr();
        Ok(xid)
    }

    /// `XidCacheRemoveRunningXids`: a subtransaction aborted; removes `xids` (its xid and its
    /// children's) from the shared cache under ProcArrayLock exclusive and advances
    /// `latest_completed_xid` to the newest of them. Xids beyond the overflowed cache are only
    /// forgotten locally (snapshots keep treating them as running, which is harmless: they
    /// aborted).
    ///
    /// # Errors
    /// [`ProcArrayError::NotMySubxid`] if an xid is not a live subxid of this transaction;
    /// nothing is changed then.
    pub fn abort_subxids(&mut self, xids: &[TransactionId]) -> Result<(), ProcArrayError> {
        if let Some(&bad) = xids.iter().find(|x| !self.subxids.contains(x)) {
            return Err(ProcArrayError::NotMySubxid(bad));
        }
        if xids.is_empty() {
            return Ok(());
        }
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let proc = &pa.procs[p];
        let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
        let (count, dense) = match &pa.hot {
            Hot::Pgproc => (&proc.subxid_count, None),
            Hot::Pgxact(x) => (&x[p].nxids, None),
            Hot::PgxactPadded(x) => (&x[p].nxids, None),
            Hot::Dense(d) => {
                (&proc.subxid_count, Some(&d.subxid_states[proc.pgxactoff.load(Ordering::Relaxed) as usize]))
            }
        };
        let mut latest = TransactionId::INVALID;
        for &x in xids {
            if !latest.is_valid() || x.follows(latest) {
                latest = x;
            }
            let n = count.load(Ordering::Relaxed) as usize;
            if let Some(j) = (0..n).rev().find(|&j| proc.subxids[j].load(Ordering::Relaxed) == x.0) {
                // Move the last cached xid into the hole, then shrink the count.
                let last = proc.subxids[n - 1].load(Ordering::Relaxed);
                proc.subxids[j].store(last, Ordering::Relaxed);
                count.store(n as u8 - 1, Ordering::Release);
                if let Some(s) = dense {
                    s.count.store(n as u8 - 1, Ordering::Release);
                }
                self.n_cached -= 1;
            }
        }
        pa.advance_latest_completed(latest);
        let c = pa.transam.xact_completion_count.load(Ordering::Relaxed);
        pa.transam.xact_completion_count.store(c + 1, Ordering::Relaxed);
        pa.release_pa(held);
        self.subxids.retain(|x| !xids.contains(x));
        self.stats.subxact_aborts.incr();
        Ok(())
    }

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

    /// Sets this backend's vacuum/status flags (any of [`PROC_IS_AUTOVACUUM`],
    /// [`PROC_IN_VACUUM`], [`PROC_IN_ANALYZE`], [`PROC_VACUUM_FOR_WRAPAROUND`],
    /// [`PROC_IN_LOGICAL_DECODING`]) under ProcArrayLock exclusive, as lazy VACUUM does in
    /// `vacuum_rel` (`vacuum.c`; 9.2 `MyPgXact->vacuumFlags`, 14 `statusFlags` and its dense
    /// copy). While `PROC_IN_VACUUM` or `PROC_IN_LOGICAL_DECODING` is set, other backends'
    /// snapshots and the global xmin horizon ignore this backend's xmin and xid. The flags are
    /// cleared when the transaction ends.
    ///
    /// # Errors
    /// [`ProcArrayError::UnknownVacuumFlags`] if `flags` has a bit outside those five (nothing
    /// is changed then).
    ///
    /// [`PROC_IS_AUTOVACUUM`]: crate::PROC_IS_AUTOVACUUM
    /// [`PROC_IN_VACUUM`]: crate::PROC_IN_VACUUM
    /// [`PROC_IN_ANALYZE`]: crate::PROC_IN_ANALYZE
    /// [`PROC_VACUUM_FOR_WRAPAROUND`]: crate::PROC_VACUUM_FOR_WRAPAROUND
    /// [`PROC_IN_LOGICAL_DECODING`]: crate::PROC_IN_LOGICAL_DECODING
    pub fn set_vacuum_flags(&mut self, flags: u8) -> Result<(), ProcArrayError> {
        if flags & !PROC_KNOWN_FLAGS != 0 {
            return Err(ProcArrayError::UnknownVacuumFlags(flags));
        }
        self.store_vacuum_flags(flags);
        Ok(())
    }

    /// This backend's vacuum/status flags (0 when none is set).
    pub fn vacuum_flags(&self) -> u8 {
        self.pa.procs[self.pgprocno as usize].vacuum_flags.load(Ordering::Relaxed)
    }

    /// Stores `flags` in `PgProc` and in the layout's hot copy under ProcArrayLock exclusive.
    fn store_vacuum_flags(&self, flags: u8) {
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let proc = &pa.procs[p];
        let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
        proc.vacuum_flags.store(flags, Ordering::Relaxed);
        match &pa.hot {
            Hot::Pgproc => {}
            Hot::Pgxact(x) => x[p].vacuum_flags.store(flags, Ordering::Relaxed),
            Hot::PgxactPadded(x) => x[p].vacuum_flags.store(flags, Ordering::Relaxed),
            Hot::Dense(d) => d.status_flags[proc.pgxactoff.load(Ordering::Relaxed) as usize]
                .store(flags, Ordering::Relaxed),
        }
        pa.release_pa(held);
    }

    /// `ProcArrayEndTransaction` (commit or abort alike: the ProcArray does not care which; CLOG
    /// does). Without an xid, clears xmin without any lock. With one, clears the entry under
    /// ProcArrayLock exclusive by the configured [`EndXactStrategy`], advancing
    /// `latest_completed_xid` to the newest xid of the tree and bumping the completion count.
    pub fn end_transaction(&mut self) -> EndXactOutcome {
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let xid = self.xid;
        if !xid.is_valid() {
            pa.xmin_slot(p).store(0, Ordering::Relaxed);
            pa.procs[p].lxid.store(0, Ordering::Relaxed);
            if pa.procs[p].vacuum_flags.load(Ordering::Relaxed) != 0 {
                // 14: the shared copy of the flags changes only under ProcArrayLock exclusive.
                self.store_vacuum_flags(0);
            }
            self.stats.end_readonly.incr();
            return EndXactOutcome { xid, latest_xid: xid, role: EndXactRole::ReadOnly };
        }
        let mut latest = xid;
        for &s in &self.subxids {
            if s.follows(latest) {
                latest = s;
            }
        }
        let req = EndXactRequest { pgprocno: self.pgprocno, latest_xid: latest };
        let role = match pa.cfg.end_xact {
            EndXactStrategy::Exclusive => {
                let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
                pa.end_xact_internal(&mut { req });
                pa.release_pa(held);
                self.stats.end_exclusive.incr();
                EndXactRole::Exclusive
            }
            EndXactStrategy::FlexLock => {
                let (_, r) = pa.proc_array_lock.run(p, req, |r| pa.end_xact_internal(r));
                match r {
                    FlexRole::Direct => {
                        self.stats.end_flex_direct.incr();
                        EndXactRole::FlexDirect
                    }
                    FlexRole::Queued => {
                        self.stats.end_flex_queued.incr();
                        EndXactRole::FlexQueued
                    }
                }
            }
            EndXactStrategy::GroupClear => {
                let (_, r) = pa.group.run(p, pa.proc_array_lock.lock(), req, |r| pa.end_xact_internal(r));
                match r {
                    GroupRole::Alone => {
                        self.stats.end_group_alone.incr();
                        EndXactRole::GroupAlone
                    }
                    GroupRole::Leader { members } => {
                        self.stats.end_group_leader.incr();
                        self.stats.end_group_led_members.add(members as u64);
                        EndXactRole::GroupLeader { members }
                    }
                    GroupRole::Follower => {
                        self.stats.end_group_follower.incr();
                        EndXactRole::GroupFollower
                    }
                }
            }
        };
        self.xid = TransactionId::INVALID;
        self.subxids.clear();
        self.n_cached = 0;
        self.overflowed = false;
        EndXactOutcome { xid, latest_xid: latest, role }
    }

    /// Ends any open transaction and leaves the ProcArray (`ProcArrayRemove` under ProcArrayLock
    /// and XidGenLock exclusive); the slot can then be attached again.
    pub fn detach(mut self) {
        self.detach_inner();
    }

    fn detach_inner(&mut self) {
        if self.detached {
            return;
        }
        self.detached = true;
        self.end_transaction();
        self.reset_xmin();
        self.pa.proc_array_remove(self.pgprocno);
        self.pa.attached[self.pgprocno as usize].store(false, Ordering::Release);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.detach_inner();
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;
