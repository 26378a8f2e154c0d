//! Fast-path relation locks and the strong-lock counters (`lock.c`, 9.2+; 18's groups).
//!
//! Each backend owns `groups × 16` slots, each slot a relation oid plus three mode bits
//! (AccessShare, RowShare, RowExclusive), protected by the backend's own LWLock of tranche
//! `LockFastPath` (`fpInfoLock`). A backend writes only its own slots, except that a strong
//! locker, holding the target's `fpInfoLock`, moves the target's entries into the main table.
//! As in PostgreSQL (`PGPROC.fpLockBits`, `fpRelId`), that LWLock is the slots' only protection:
//! they live in an `LwLockCell` (an `UnsafeCell`, loom's under `--cfg loom`), with no mutex of
//! their own.
//!
//! The protocol that makes this safe (lmgr `README`, "Fast Path Locking"): a strong locker
//! increments the counter of the relation's strong-lock partition *before* it takes any
//! backend's `fpInfoLock`; a weak locker reads that counter *while holding* its own
//! `fpInfoLock`. Either the weak locker sees the count and falls back to the main table, or its
//! slot write is published by its `fpInfoLock` release before the strong locker acquires that
//! lock and transfers the entry. The counter is an atomic updated with read-modify-writes
//! (PostgreSQL uses a spinlock around plain increments).

use crossbeam_utils::CachePadded;
use lockstack_common::{BackendId, LocalTransactionId, TrancheId};
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};

use crate::config::FP_SLOTS_PER_GROUP;
use crate::mode::{LockMask, LockMode};
use crate::sync::{AtomicU32, LwLockCell, Ordering};
use lockstack_common::sync::hook::{Access, touch_slice, touch_val};

/// Result of [`FastPathArea::try_grant`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FastPathGrant {
    /// The lock is recorded in one of the backend's slots.
    Granted {
        /// The slots of the relation's group in use after the grant, as a mask (bit `s` =
        /// slot `s`; the number in use, PostgreSQL's `FastPathLocalUseCounts`, is its
        /// population count).
        used: u16,
    },
    /// The relation's strong-lock counter is non-zero: use the main table.
    StrongLockHeld,
    /// The relation's group has no free slot: use the main table.
    SlotsFull,
}

/// One group of 16 fast-path slots: each slot a relation oid plus the weak modes held on it.
///
/// PostgreSQL packs the modes as three bits per slot in one word (`fpLockBits`) and finds a
/// relation by testing the 16 slots one by one. Here the same information is kept as one
/// 16-bit slot mask per weak mode (bit `s` of `modes[m - 1]`: slot `s` holds mode `m`) plus
/// their union, the mask of used slots (whose population count is the number of used slots),
/// and the slot holding a relation is found by comparing the 16 oids at once
/// (a branch-free compare the compiler turns into a few vector instructions) and masking the
/// result with the used slots. What is stored and when a slot is taken or freed is unchanged.
#[derive(Debug, Clone, Default)]
struct FpGroup {
    /// Relation oid per slot (meaningful only where the slot is used).
    relid: [u32; FP_SLOTS_PER_GROUP],
    /// Per weak mode (AccessShare, RowShare, RowExclusive), the slots holding it.
    modes: [u16; 3],
    /// `modes[0] | modes[1] | modes[2]`.
    used: u16,
}

const _: () = assert!(FP_SLOTS_PER_GROUP == 16, "slot masks are u16");

impl FpGroup {
    /// Slots in use (holding at least one mode).
    #[inline]
    fn used(&self) -> u16 {
        debug_assert_eq!(self.used, self.modes[0] | self.modes[1] | self.modes[2]);
        self.used
    }

    /// Used slots whose relation is `relid` (at most one: a relation takes one slot per group).
    #[inline]
    fn slots_of(&self, relid: u32) -> u16 {
        match_mask(&self.relid, relid) & self.used()
    }

    /// The modes slot `s` holds, as a [`LockMask`].
    #[inline]
    fn slot_mask(&self, s: usize) -> LockMask {
        let mut bits: LockMask = 0;
        for (k, m) in self.modes.iter().enumerate() {
            bits |= ((m >> s) & 1) << (k + 1);
        }
        bits
    }

    /// Frees the slots in `slots` (all modes).
    #[inline]
    fn clear(&mut self, slots: u16) {
        for m in &mut self.modes {
            *m &= !slots;
        }
        self.used &= !slots;
    }

    /// `FastPathGrantRelationLock` within the group: the relation's slot if it has one, else a
    /// free slot; false if the group is full.
    #[inline]
    fn grant(&mut self, relid: u32, mode: LockMode) -> bool {
        let mut slot = self.slots_of(relid);
        if slot == 0 {
            let free = !self.used();
            if free == 0 {
                return false;
            }
            slot = free & free.wrapping_neg();
            self.relid[slot.trailing_zeros() as usize] = relid;
            self.used |= slot;
        }
        self.modes[mode.number() - 1] |= slot;
        true
    }

    /// `FastPathUnGrantRelationLock` within the group: false if the relation's slot does not
    /// hold `mode`.
    #[inline]
    fn ungrant(&mut self, relid: u32, mode: LockMode) -> bool {
        let slot = self.slots_of(relid);
        let m = &mut self.modes[mode.number() - 1];
        if *m & slot == 0 {
            return false;
        }
        *m &= !slot;
        self.used = self.modes[0] | self.modes[1] | self.modes[2];
        true
    }
}

/// Bit `s` set where `rels[s] == relid`.
#[inline]
fn match_mask(rels: &[u32; FP_SLOTS_PER_GROUP], relid: u32) -> u16 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi32, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16, _mm_packs_epi32,
            _mm_set1_epi32,
        };
        // SAFETY: SSE2 is part of the x86_64 baseline, so the intrinsics are always available;
        // the four unaligned 16-byte loads read exactly the 64 bytes of `rels`.
        unsafe {
            let key = _mm_set1_epi32(relid as i32);
            let p = rels.as_ptr().cast::<__m128i>();
            let a = _mm_cmpeq_epi32(_mm_loadu_si128(p), key);
            let b = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(1)), key);
            let c = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(2)), key);
            let d = _mm_cmpeq_epi32(_mm_loadu_si128(p.add(3)), key);
            // Lanes are 0 or -1, so saturating packs keep them: 16 bytes in slot order.
            let bytes = _mm_packs_epi16(_mm_packs_epi32(a, b), _mm_packs_epi32(c, d));
            _mm_movemask_epi8(bytes) as u16
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = 0u16;
        for (s, r) in rels.iter().enumerate() {
            m |= u16::from(*r == relid) << s;
        }
        m
    }
}

/// One backend's slots (`fpLockBits`, `fpRelId`) and its fast-path VXID lock
/// (`fpVXIDLock`, `fpLocalTransactionId`).
#[derive(Debug)]
pub(crate) struct FpState {
    /// The backend's groups of 16 slots, each on its own cache line (see `FpProc`).
    groups: Box<[CachePadded<FpGroup>]>,
    /// True while the backend's own VXID lock is held "in fast path" (not materialised).
    pub(crate) vxid_lock: bool,
    /// Local xid of that VXID lock; stays valid after a waiter materialised it, as the marker
    /// that the main table holds it.
    pub(crate) vxid_lxid: LocalTransactionId,
}

impl FpState {
    /// The relation entries as (relid, modes) pairs, in group and slot order.
    fn entries(&self) -> Vec<(u32, LockMask)> {
        let mut v = Vec::new();
        touch_slice(&self.groups, Access::Read);
        for g in self.groups.iter() {
            for s in 0..FP_SLOTS_PER_GROUP {
                let bits = g.slot_mask(s);
                if bits != 0 {
                    v.push((g.relid[s], bits));
                }
            }
        }
        v
    }
}

/// A copy of one backend's fast-path state, taken by [`FastPathArea::with_all_locked`] and
/// valid for as long as that call holds the backend's `fpInfoLock`.
#[derive(Debug, Clone)]
pub(crate) struct FpSnapshot {
    /// The relation entries as (relid, modes) pairs.
    pub(crate) entries: Vec<(u32, LockMask)>,
    /// [`FpState::vxid_lock`].
    pub(crate) vxid_lock: bool,
    /// [`FpState::vxid_lxid`].
    pub(crate) vxid_lxid: LocalTransactionId,
}

/// One backend's fast-path area: `fpInfoLock` and the data it protects. Each sits on its own
/// cache line (`CachePadded` in [`FastPathArea`]), and so does each of its slot groups: in
/// PostgreSQL both live in the backend's ~900-byte `PGPROC`, so two backends never share a line.
/// Packed side by side (as before), two clients' lock and unlock of their own fast-path slots
/// bounced one line between the cores at every relation lock.
struct FpProc {
    lock: LwLock,
    state: LwLockCell<FpState>,
}

// SAFETY: `state` is only reached through `FastPathArea::with_state`, `with_state_mut` and
// `transfer`, each of which holds `lock` (shared for reads, exclusive for writes) around the
// access, so the cell is never read and written concurrently from two
// threads; `FpState` itself is plain owned data (`Send`).
unsafe impl Sync for FpProc {}

/// Every backend's fast-path slots plus the 1024 strong-lock counters
/// (`FastPathStrongRelationLocks`).
pub struct FastPathArea {
    groups: usize,
    /// `groups - 1`.
    group_mask: usize,
    strong: Box<[AtomicU32]>,
    /// `strong.len() - 1`.
    strong_mask: usize,
    procs: Box<[CachePadded<FpProc>]>,
}

impl std::fmt::Debug for FastPathArea {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FastPathArea")
            .field("groups", &self.groups)
            .field("backends", &self.procs.len())
            .field("strong_partitions", &self.strong.len())
            .finish()
    }
}

impl FastPathArea {
    /// Slots for `backends` backends with `groups` groups of 16 each, `strong_partitions`
    /// strong-lock counters (1024 in PostgreSQL), and fast-path LWLocks of `kind`.
    ///
    /// # Panics
    /// If `groups` or `strong_partitions` is zero or not a power of two.
    pub fn new(backends: usize, groups: usize, strong_partitions: usize, kind: LwLockKind) -> FastPathArea {
        assert!(
            groups.is_power_of_two() && strong_partitions.is_power_of_two(),
            "fast path needs a power-of-two number (at least one) of groups and of counters"
        );
        let procs: Box<[CachePadded<FpProc>]> = (0..backends)
            .map(|i| {
                CachePadded::new(FpProc {
                    lock: LwLock::new(kind, TrancheId::LOCK_FAST_PATH, i as u32),
                    state: LwLockCell::new(FpState {
                        groups: (0..groups).map(|_| CachePadded::new(FpGroup::default())).collect(),
                        vxid_lock: false,
                        vxid_lxid: LocalTransactionId::INVALID,
                    }),
                })
            })
            .collect();
        let strong: Box<[AtomicU32]> = (0..strong_partitions).map(|_| AtomicU32::new(0)).collect();
        for p in procs.iter() {
            p.lock.name_line();
        }
        for (k, c) in
            strong.chunks(lockstack_common::sync::hook::LINE_BYTES / size_of::<AtomicU32>()).enumerate()
        {
            let n = c.len();
            lockstack_common::sync::hook::name_line(c.as_ptr() as *const u8, || {
                format!("FastPathStrongRelationLocks {}-{}", k * n, k * n + n - 1)
            });
        }
        FastPathArea { groups, group_mask: groups - 1, strong, strong_mask: strong_partitions - 1, procs }
    }

    /// Groups per backend.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The group relation `relid` maps to: `(relid × 49157) mod groups` (`FAST_PATH_REL_GROUP`,
    /// 18); always 0 with one group.
    #[inline]
    pub fn group_of(&self, relid: u32) -> usize {
        (relid.wrapping_mul(49157) as usize) & self.group_mask
    }

    /// The strong-lock counter index of a tag hash (`FastPathStrongLockHashPartition`).
    #[inline]
    pub fn strong_partition(&self, hash: u32) -> usize {
        // PostgreSQL's count is the constant 1024, so its `%` is a mask; ours is a power of two.
        hash as usize & self.strong_mask
    }

    /// Current value of strong-lock counter `p`.
    pub fn strong_count(&self, p: usize) -> u32 {
        self.strong[p].load(Ordering::Acquire)
    }

    /// Runs `f` on backend `b`'s slots while holding its `fpInfoLock` in shared mode.
    ///
    /// `f` must not call back into this area for backend `b` (the LWLock is not re-entrant).
    pub(crate) fn with_state<R>(&self, b: BackendId, f: impl FnOnce(&FpState) -> R) -> R {
        let p = &self.procs[b.index()];
        let held = p.lock.acquire(LwLockMode::Shared);
        // SAFETY: we hold `p.lock` (b's fpInfoLock) in shared mode until after `f` returns, so
        // no writer can hold it; writers only touch `p.state` under that lock held exclusively.
        let r = unsafe { p.state.with(f) };
        p.lock.release(held);
        r
    }

    /// Runs `f` on backend `b`'s slots while holding its `fpInfoLock` exclusively.
    ///
    /// `f` must not call back into this area for backend `b` (the LWLock is not re-entrant).
    #[inline]
    pub(crate) fn with_state_mut<R>(&self, b: BackendId, f: impl FnOnce(&mut FpState) -> R) -> R {
        let p = &self.procs[b.index()];
        let held = p.lock.acquire(LwLockMode::Exclusive);
        // SAFETY: we hold `p.lock` (b's fpInfoLock) exclusively until after `f` returns, and
        // every other access to `p.state` holds that lock too, so `f` has the only reference.
        let r = unsafe { p.state.with_mut(f) };
        p.lock.release(held);
        r
    }

    /// Weak locker, own backend `b`: records `mode` on relation `relid` in a slot unless the
    /// strong-lock counter of `hash` is non-zero or the group is full (`FastPathGrantRelationLock`
    /// under `fpInfoLock`, as `LockAcquireExtended` does).
    ///
    /// # Panics
    /// If `mode` is not weak, or `b` is out of range.
    #[inline]
    pub fn try_grant(&self, b: BackendId, relid: u32, mode: LockMode, hash: u32) -> FastPathGrant {
        assert!(mode.is_weak(), "only weak modes use fast path");
        let group = self.group_of(relid);
        let counter = &self.strong[self.strong_partition(hash)];
        self.with_state_mut(b, |st| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_acquire.fastpath");
            // Read the counter only now, under our fpInfoLock (see the module docs).
            if counter.load(Ordering::Acquire) != 0 {
                return FastPathGrant::StrongLockHeld;
            }
            let g = &mut st.groups[group];
            touch_val(&**g, Access::Write);
            if g.grant(relid, mode) {
                FastPathGrant::Granted { used: g.used() }
            } else {
                FastPathGrant::SlotsFull
            }
        })
    }

    /// Own backend `b` releases `mode` on `relid` from its slots (`FastPathUnGrantRelationLock`):
    /// `Some(mask of the slots of the group still in use)`, or `None` if it is not there (a
    /// strong locker transferred it to the main table).
    #[inline]
    pub fn ungrant(&self, b: BackendId, relid: u32, mode: LockMode) -> Option<u16> {
        let group = self.group_of(relid);
        self.with_state_mut(b, |st| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.fastpath");
            let g = &mut st.groups[group];
            touch_val(&**g, Access::Write);
            g.ungrant(relid, mode).then(|| g.used())
        })
    }

    /// Own backend `b` releases many fast-path entries under one hold of its `fpInfoLock`, as
    /// `LockReleaseAll` does (PostgreSQL `lock.c`, 9.2+). `reqs` holds (relid, mode) pairs;
    /// `found[i]` is set to whether entry `i` was still in a slot (false: a strong locker moved it
    /// to the main table, where the caller must release it). `used[g]` is set to the mask of the
    /// slots still in use in every group touched.
    ///
    /// # Panics
    /// If `found` is shorter than `reqs`, or `used` shorter than the number of groups.
    pub fn ungrant_many(&self, b: BackendId, reqs: &[(u32, LockMode)], found: &mut [bool], used: &mut [u16]) {
        assert!(found.len() >= reqs.len(), "one result per request");
        self.with_state_mut(b, |st| {
            for (i, &(relid, mode)) in reqs.iter().enumerate() {
                let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.fastpath");
                let group = self.group_of(relid);
                let g = &mut st.groups[group];
                touch_val(&**g, Access::Write);
                found[i] = g.ungrant(relid, mode);
                used[group] = g.used();
            }
        })
    }

    /// Strong locker: bumps the counter of `hash` (`BeginStrongLockAcquire`). From now on no
    /// new fast-path grant for relations of that counter succeeds.
    pub fn begin_strong(&self, hash: u32) {
        let p = self.strong_partition(hash);
        self.strong[p].fetch_add(1, Ordering::SeqCst);
    }

    /// Undoes one [`begin_strong`](Self::begin_strong) (`AbortStrongLockAcquire`, or the
    /// release of a strong lock in `RemoveLocalLock`).
    ///
    /// # Panics
    /// If the counter is already zero (an accounting bug).
    pub fn end_strong(&self, hash: u32) {
        let p = self.strong_partition(hash);
        let prev = self.strong[p].fetch_sub(1, Ordering::SeqCst);
        assert!(prev > 0, "strong-lock counter {p} underflow");
    }

    /// Strong locker: for every backend, under its `fpInfoLock`, removes each fast-path entry on
    /// `relid` and hands it to `sink(backend, mode)`, which must enter it into the main table
    /// before returning (`FastPathTransferRelationLocks`). Returns the number moved. Must be
    /// called after [`begin_strong`](Self::begin_strong). `sink` runs while that backend's
    /// `fpInfoLock` is held, so it must not call back into this area.
    pub fn transfer(&self, relid: u32, mut sink: impl FnMut(BackendId, LockMode)) -> usize {
        let group = self.group_of(relid);
        let mut moved = 0;
        for (i, p) in self.procs.iter().enumerate() {
            let held = p.lock.acquire(LwLockMode::Exclusive);
            // SAFETY: we hold `p.lock` (backend i's fpInfoLock) exclusively until the release
            // below, and every other access to `p.state` holds that lock too.
            let taken = unsafe {
                p.state.with_mut(|st| {
                    let _cost = lockstack_common::sync::hook::pg_region("lmgr.fastpath_transfer");
                    let g = &mut st.groups[group];
                    touch_val(&**g, Access::Write);
                    let slots = g.slots_of(relid);
                    let mut taken: LockMask = 0;
                    let mut rest = slots;
                    while rest != 0 {
                        taken |= g.slot_mask(rest.trailing_zeros() as usize);
                        rest &= rest - 1;
                    }
                    g.clear(slots);
                    taken
                })
            };
            // Still under the fpInfoLock: the owner cannot release (or re-take) the entry in
            // fast path before it is in the main table.
            for m in LockMode::modes_in(taken) {
                sink(BackendId(i as u32), m);
                moved += 1;
            }
            p.lock.release(held);
        }
        moved
    }

    /// Calls `f(backend)` for every backend other than `exclude` that holds, in fast path, a mode
    /// on `relid` in `conflicts` (the first half of `GetLockConflicts`).
    pub fn conflicting_holders(
        &self,
        relid: u32,
        conflicts: LockMask,
        exclude: Option<BackendId>,
        mut f: impl FnMut(BackendId),
    ) {
        let group = self.group_of(relid);
        for i in 0..self.procs.len() {
            let b = BackendId(i as u32);
            if Some(b) == exclude {
                continue;
            }
            let hit = self.with_state(b, |st| {
                let g = &st.groups[group];
                touch_val(&**g, Access::Read);
                let slots = g.slots_of(relid);
                slots != 0 && g.slot_mask(slots.trailing_zeros() as usize) & conflicts != 0
            });
            if hit {
                f(b);
            }
        }
    }

    /// Backend `b`'s fast-path relation entries as (relid, modes) pairs (for `pg_locks`-style
    /// listings and invariant checks).
    pub fn entries(&self, b: BackendId) -> Vec<(u32, LockMask)> {
        self.with_state(b, FpState::entries)
    }

    /// Takes every backend's `fpInfoLock` in shared mode, in backend order, copies each
    /// backend's state, and runs `f` on the copies (indexed by backend) while still holding all
    /// of them, so that nothing in any fast-path area changes until `f` returns: no grant,
    /// release or transfer, no VXID start or end.
    ///
    /// Lock order: `f` may take partition locks (an fpInfoLock before a partition lock, the
    /// order of `FastPathTransferRelationLocks` and `VirtualXactLock` in `lock.c`), but the
    /// caller must hold no partition lock when calling this. Nobody holds two fpInfoLocks
    /// otherwise, so taking them all in one order cannot deadlock against other backends.
    pub(crate) fn with_all_locked<R>(&self, f: impl FnOnce(&[FpSnapshot]) -> R) -> R {
        let helds: Vec<_> = self.procs.iter().map(|p| p.lock.acquire(LwLockMode::Shared)).collect();
        let snaps: Vec<FpSnapshot> = self
            .procs
            .iter()
            .map(|p| {
                // SAFETY: we hold `p.lock` (this backend's fpInfoLock) in shared mode until the
                // releases below, so no writer can hold it; writers only touch `p.state` under
                // that lock held exclusively.
                unsafe {
                    p.state.with(|st| FpSnapshot {
                        entries: st.entries(),
                        vxid_lock: st.vxid_lock,
                        vxid_lxid: st.vxid_lxid,
                    })
                }
            })
            .collect();
        let r = f(&snaps);
        for (p, held) in self.procs.iter().zip(helds).rev() {
            p.lock.release(held);
        }
        r
    }

    /// Backend `b`'s `fpInfoLock` itself (for tests that force an interleaving around it).
    #[cfg(test)]
    pub(crate) fn info_lock(&self, b: BackendId) -> &LwLock {
        &self.procs[b.index()].lock
    }

    /// Number of backends the area was built for.
    pub fn backends(&self) -> usize {
        self.procs.len()
    }

    /// Sum of all strong-lock counters.
    pub fn strong_total(&self) -> u64 {
        self.strong.iter().map(|c| u64::from(c.load(Ordering::Acquire))).sum()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn grant_fill_and_spill() {
        let fp = FastPathArea::new(2, 1, 1024, LwLockKind::Atomic);
        let b = BackendId(0);
        for rel in 0..16u32 {
            assert_eq!(
                fp.try_grant(b, 1000 + rel, LockMode::AccessShare, rel),
                FastPathGrant::Granted { used: ((1u32 << (rel + 1)) - 1) as u16 }
            );
        }
        // Same relation, another weak mode: same slot.
        assert_eq!(fp.try_grant(b, 1000, LockMode::RowExclusive, 0), FastPathGrant::Granted { used: 0xFFFF });
        assert_eq!(fp.try_grant(b, 2000, LockMode::AccessShare, 99), FastPathGrant::SlotsFull);
        assert_eq!(fp.entries(b).len(), 16);
        assert_eq!(fp.ungrant(b, 1000, LockMode::AccessShare), Some(0xFFFF));
        assert_eq!(fp.ungrant(b, 1000, LockMode::AccessShare), None);
        // Relation 1000 had slot 0, now free.
        assert_eq!(fp.ungrant(b, 1000, LockMode::RowExclusive), Some(0xFFFE));
        assert_eq!(fp.try_grant(b, 2000, LockMode::AccessShare, 99), FastPathGrant::Granted { used: 0xFFFF });
        assert_eq!(fp.entries(b)[0], (2000, LockMode::AccessShare.bit()));
    }

    /// The slot masks against PostgreSQL's representation (a mode bitmask and an oid per
    /// slot, searched slot by slot) over a random sequence of grants, ungrants and transfers.
    #[test]
    fn group_masks_match_a_per_slot_model() {
        let weak = [LockMode::AccessShare, LockMode::RowShare, LockMode::RowExclusive];
        let mut g = FpGroup::default();
        let mut model: [(u32, LockMask); FP_SLOTS_PER_GROUP] = [(0, 0); FP_SLOTS_PER_GROUP];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let (mut grants, mut fulls, mut misses) = (0, 0, 0);
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // 24 relations over 16 slots, so that the group fills up now and then.
            let relid = 1000 + (x % 24) as u32;
            let mode = weak[((x >> 8) % 3) as usize];
            match (x >> 16) % 5 {
                0 | 1 => {
                    let want = match model.iter().position(|&(r, m)| m != 0 && r == relid) {
                        Some(s) => Some(s),
                        None => model.iter().position(|&(_, m)| m == 0),
                    };
                    if let Some(s) = want {
                        model[s].0 = relid;
                        model[s].1 |= mode.bit();
                        grants += 1;
                    } else {
                        fulls += 1;
                    }
                    assert_eq!(g.grant(relid, mode), want.is_some());
                }
                2..=3 => {
                    let s = model.iter().position(|&(r, m)| m & mode.bit() != 0 && r == relid);
                    if let Some(s) = s {
                        model[s].1 &= !mode.bit();
                    } else {
                        misses += 1;
                    }
                    assert_eq!(g.ungrant(relid, mode), s.is_some());
                }
                _ => {
                    let slots = g.slots_of(relid);
                    let want: LockMask =
                        model.iter().filter(|&&(r, m)| m != 0 && r == relid).map(|&(_, m)| m).sum();
                    let got = if slots == 0 { 0 } else { g.slot_mask(slots.trailing_zeros() as usize) };
                    assert_eq!(got, want);
                    g.clear(slots);
                    for e in model.iter_mut().filter(|e| e.0 == relid) {
                        e.1 = 0;
                    }
                }
            }
            let used = model.iter().filter(|&&(_, m)| m != 0).count();
            assert_eq!(g.used().count_ones() as usize, used);
            for (s, &(r, m)) in model.iter().enumerate() {
                // Slots may differ in position; compare per relation.
                let slots = g.slots_of(r);
                let got = if slots == 0 { 0 } else { g.slot_mask(slots.trailing_zeros() as usize) };
                if m != 0 {
                    assert_eq!(got, m, "relation {r} (model slot {s})");
                    assert_eq!(slots.count_ones(), 1);
                }
            }
        }
        assert!(grants > 1000 && fulls > 100 && misses > 100, "{grants} {fulls} {misses}");
    }

    #[test]
    fn strong_counter_blocks_and_transfer_moves() {
        let fp = FastPathArea::new(3, 4, 1024, LwLockKind::Atomic);
        assert_eq!(
            fp.try_grant(BackendId(0), 7, LockMode::AccessShare, 42),
            FastPathGrant::Granted { used: 1 }
        );
        assert_eq!(fp.try_grant(BackendId(2), 7, LockMode::RowShare, 42), FastPathGrant::Granted { used: 1 });
        assert_eq!(
            fp.try_grant(BackendId(2), 7, LockMode::RowExclusive, 42),
            FastPathGrant::Granted { used: 1 }
        );
        fp.begin_strong(42);
        assert_eq!(fp.try_grant(BackendId(1), 7, LockMode::AccessShare, 42), FastPathGrant::StrongLockHeld);
        let mut got = Vec::new();
        assert_eq!(fp.transfer(7, |b, m| got.push((b, m))), 3);
        got.sort();
        assert_eq!(
            got,
            [
                (BackendId(0), LockMode::AccessShare),
                (BackendId(2), LockMode::RowShare),
                (BackendId(2), LockMode::RowExclusive)
            ]
        );
        assert!(fp.entries(BackendId(2)).is_empty());
        fp.end_strong(42);
        assert_eq!(fp.strong_total(), 0);
    }
}
