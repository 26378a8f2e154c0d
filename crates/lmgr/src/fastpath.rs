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

use lockstack_common::{BackendId, LocalTransactionId, TrancheId};
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};

use crate::config::FP_SLOTS_PER_GROUP;
use crate::mode::{LockMask, LockMode};
use crate::sync::{AtomicU32, LwLockCell, Ordering};

/// Result of [`FastPathArea::try_grant`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FastPathGrant {
    /// The lock is recorded in one of the backend's slots; `used` slots of the relation's
    /// group are now in use.
    Granted {
        /// Slots of the group in use after the grant.
        used: usize,
    },
    /// The relation's strong-lock counter is non-zero: use the main table.
    StrongLockHeld,
    /// The relation's group has no free slot: use the main table.
    SlotsFull,
}

/// One backend's slots (`fpLockBits`, `fpRelId`) and its fast-path VXID lock
/// (`fpVXIDLock`, `fpLocalTransactionId`).
#[derive(Debug)]
pub(crate) struct FpState {
    /// One word per group: 3 bits per slot, bit `mode - 1` of slot `s` at `3 * s`.
    bits: Vec<u64>,
    /// Relation oid per slot (meaningful only where the slot's bits are non-zero).
    relid: Vec<u32>,
    /// True while the backend's own VXID lock is held "in fast path" (not materialised).
    pub(crate) vxid_lock: bool,
    /// Local xid of that VXID lock; stays valid after a waiter materialised it, as the marker
    /// that the main table holds it.
    pub(crate) vxid_lxid: LocalTransactionId,
}

/// One backend's fast-path area: `fpInfoLock` and the data it protects.
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
    strong: Box<[AtomicU32]>,
    procs: Box<[FpProc]>,
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

/// Bit `3 * s` for every slot `s` of a group word.
const SLOT_LOW_BITS: u64 = {
    let mut m = 0u64;
    let mut s = 0;
    while s < FP_SLOTS_PER_GROUP {
        m |= 1 << (3 * s);
        s += 1;
    }
    m
};

/// Slots in use in one group word (PostgreSQL recounts them in a loop over the slots; a
/// population count of the non-empty slots gives the same number).
#[inline]
fn used_in(word: u64) -> usize {
    ((word | (word >> 1) | (word >> 2)) & SLOT_LOW_BITS).count_ones() as usize
}

#[inline]
fn slot_bits(word: u64, slot: usize) -> LockMask {
    (((word >> (3 * slot)) & 7) as LockMask) << 1
}

impl FastPathArea {
    /// Slots for `backends` backends with `groups` groups of 16 each, `strong_partitions`
    /// strong-lock counters (1024 in PostgreSQL), and fast-path LWLocks of `kind`.
    ///
    /// # Panics
    /// If `groups` or `strong_partitions` is zero.
    pub fn new(backends: usize, groups: usize, strong_partitions: usize, kind: LwLockKind) -> FastPathArea {
        assert!(groups > 0 && strong_partitions > 0, "fast path needs at least one group and counter");
        let procs = (0..backends)
            .map(|i| FpProc {
                lock: LwLock::new(kind, TrancheId::LOCK_FAST_PATH, i as u32),
                state: LwLockCell::new(FpState {
                    bits: vec![0; groups],
                    relid: vec![0; groups * FP_SLOTS_PER_GROUP],
                    vxid_lock: false,
                    vxid_lxid: LocalTransactionId::INVALID,
                }),
            })
            .collect();
        let strong = (0..strong_partitions).map(|_| AtomicU32::new(0)).collect();
        FastPathArea { groups, strong, procs }
    }

    /// Groups per backend.
    pub fn groups(&self) -> usize {
        self.groups
    }

    /// The group relation `relid` maps to: `(relid × 49157) mod groups` (`FAST_PATH_REL_GROUP`,
    /// 18); always 0 with one group.
    #[inline]
    pub fn group_of(&self, relid: u32) -> usize {
        (relid.wrapping_mul(49157) as usize) & (self.groups - 1)
    }

    /// The strong-lock counter index of a tag hash (`FastPathStrongLockHashPartition`).
    #[inline]
    pub fn strong_partition(&self, hash: u32) -> usize {
        let n = self.strong.len();
        // PostgreSQL's count is the constant 1024, so its `%` is a mask; ours is a field.
        if n.is_power_of_two() { hash as usize & (n - 1) } else { hash as usize % n }
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
    pub fn try_grant(&self, b: BackendId, relid: u32, mode: LockMode, hash: u32) -> FastPathGrant {
        assert!(mode.is_weak(), "only weak modes use fast path");
        let group = self.group_of(relid);
        let part = self.strong_partition(hash);
        self.with_state_mut(b, |st| {
            // Read the counter only now, under our fpInfoLock (see the module docs).
            if self.strong[part].load(Ordering::Acquire) != 0 {
                return FastPathGrant::StrongLockHeld;
            }
            let base = group * FP_SLOTS_PER_GROUP;
            let rels = &mut st.relid[base..base + FP_SLOTS_PER_GROUP];
            let word = &mut st.bits[group];
            // One pass over the group, as FastPathGrantRelationLock: the relation's slot if it
            // has one, else (after the loop) an unused slot.
            let mut unused = FP_SLOTS_PER_GROUP;
            for (s, rel) in rels.iter().enumerate() {
                if slot_bits(*word, s) == 0 {
                    unused = s;
                } else if *rel == relid {
                    *word |= 1u64 << (3 * s + mode.number() - 1);
                    return FastPathGrant::Granted { used: used_in(*word) };
                }
            }
            if unused == FP_SLOTS_PER_GROUP {
                return FastPathGrant::SlotsFull;
            }
            rels[unused] = relid;
            *word |= 1u64 << (3 * unused + mode.number() - 1);
            FastPathGrant::Granted { used: used_in(*word) }
        })
    }

    /// Own backend `b` releases `mode` on `relid` from its slots (`FastPathUnGrantRelationLock`):
    /// `Some(slots of the group still in use)`, or `None` if it is not there (a strong locker
    /// transferred it to the main table).
    pub fn ungrant(&self, b: BackendId, relid: u32, mode: LockMode) -> Option<usize> {
        let group = self.group_of(relid);
        self.with_state_mut(b, |st| {
            let base = group * FP_SLOTS_PER_GROUP;
            let rels = &st.relid[base..base + FP_SLOTS_PER_GROUP];
            let word = &mut st.bits[group];
            for (s, rel) in rels.iter().enumerate() {
                let bit = 1u64 << (3 * s + mode.number() - 1);
                if *rel == relid && *word & bit != 0 {
                    *word &= !bit;
                    return Some(used_in(*word));
                }
            }
            None
        })
    }

    /// Own backend `b` releases many fast-path entries under one hold of its `fpInfoLock`, as
    /// `LockReleaseAll` does (PostgreSQL `lock.c`, 9.2+). `reqs` holds (relid, mode) pairs;
    /// `found[i]` is set to whether entry `i` was still in a slot (false: a strong locker moved it
    /// to the main table, where the caller must release it). `used[g]` is set to the slots still
    /// in use in every group touched.
    ///
    /// # Panics
    /// If `found` is shorter than `reqs`, or `used` shorter than the number of groups.
    pub fn ungrant_many(&self, b: BackendId, reqs: &[(u32, LockMode)], found: &mut [bool], used: &mut [u8]) {
        assert!(found.len() >= reqs.len(), "one result per request");
        self.with_state_mut(b, |st| {
            for (i, &(relid, mode)) in reqs.iter().enumerate() {
                let group = self.group_of(relid);
                let base = group * FP_SLOTS_PER_GROUP;
                let rels = &st.relid[base..base + FP_SLOTS_PER_GROUP];
                let word = &mut st.bits[group];
                found[i] = false;
                for (s, rel) in rels.iter().enumerate() {
                    let bit = 1u64 << (3 * s + mode.number() - 1);
                    if *rel == relid && *word & bit != 0 {
                        *word &= !bit;
                        found[i] = true;
                        break;
                    }
                }
                used[group] = used_in(*word) as u8;
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
        let base = group * FP_SLOTS_PER_GROUP;
        let mut moved = 0;
        for (i, p) in self.procs.iter().enumerate() {
            let held = p.lock.acquire(LwLockMode::Exclusive);
            // SAFETY: we hold `p.lock` (backend i's fpInfoLock) exclusively until the release
            // below, and every other access to `p.state` holds that lock too.
            let taken = unsafe {
                p.state.with_mut(|st| {
                    let mut taken: LockMask = 0;
                    for s in 0..FP_SLOTS_PER_GROUP {
                        let bits = slot_bits(st.bits[group], s);
                        if bits != 0 && st.relid[base + s] == relid {
                            taken |= bits;
                            st.bits[group] &= !(7u64 << (3 * s));
                        }
                    }
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
        let base = group * FP_SLOTS_PER_GROUP;
        for i in 0..self.procs.len() {
            let b = BackendId(i as u32);
            if Some(b) == exclude {
                continue;
            }
            let hit = self.with_state(b, |st| {
                (0..FP_SLOTS_PER_GROUP)
                    .any(|s| st.relid[base + s] == relid && slot_bits(st.bits[group], s) & conflicts != 0)
            });
            if hit {
                f(b);
            }
        }
    }

    /// Backend `b`'s fast-path relation entries as (relid, modes) pairs (for `pg_locks`-style
    /// listings and invariant checks).
    pub fn entries(&self, b: BackendId) -> Vec<(u32, LockMask)> {
        self.with_state(b, |st| {
            let mut v = Vec::new();
            for g in 0..self.groups {
                for s in 0..FP_SLOTS_PER_GROUP {
                    let bits = slot_bits(st.bits[g], s);
                    if bits != 0 {
                        v.push((st.relid[g * FP_SLOTS_PER_GROUP + s], bits));
                    }
                }
            }
            v
        })
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
                FastPathGrant::Granted { used: rel as usize + 1 }
            );
        }
        // Same relation, another weak mode: same slot.
        assert_eq!(fp.try_grant(b, 1000, LockMode::RowExclusive, 0), FastPathGrant::Granted { used: 16 });
        assert_eq!(fp.try_grant(b, 2000, LockMode::AccessShare, 99), FastPathGrant::SlotsFull);
        assert_eq!(fp.entries(b).len(), 16);
        assert_eq!(fp.ungrant(b, 1000, LockMode::AccessShare), Some(16));
        assert_eq!(fp.ungrant(b, 1000, LockMode::AccessShare), None);
        assert_eq!(fp.ungrant(b, 1000, LockMode::RowExclusive), Some(15));
        assert_eq!(fp.try_grant(b, 2000, LockMode::AccessShare, 99), FastPathGrant::Granted { used: 16 });
    }

    #[test]
    fn used_in_counts_non_empty_slots() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Leave some slots empty: clear each slot's bits with probability 1/2.
            let mut word = x & ((1u64 << (3 * FP_SLOTS_PER_GROUP)) - 1);
            for s in 0..FP_SLOTS_PER_GROUP {
                if (x >> (48 + (s % 16))) & 1 == 0 {
                    word &= !(7u64 << (3 * s));
                }
            }
            let naive = (0..FP_SLOTS_PER_GROUP).filter(|&s| slot_bits(word, s) != 0).count();
            assert_eq!(used_in(word), naive, "word {word:#x}");
        }
        assert_eq!(used_in(0), 0);
        assert_eq!(used_in((1u64 << 48) - 1), FP_SLOTS_PER_GROUP);
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
