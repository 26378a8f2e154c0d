//! Lock-manager counters, one block per backend, summed on demand.

use lockstack_common::LocalCounter;

/// Counters of one backend; every field is written only by that backend.
#[derive(Debug)]
pub(crate) struct BackendCounters {
    pub(crate) fast_path_grants: LocalCounter,
    pub(crate) main_acquisitions: Box<[LocalCounter]>,
    pub(crate) partition_blocks: Box<[LocalCounter]>,
    pub(crate) transfers: LocalCounter,
    pub(crate) spills_strong: LocalCounter,
    pub(crate) spills_full: LocalCounter,
    pub(crate) waits: LocalCounter,
    pub(crate) deadlocks: LocalCounter,
    pub(crate) soft_deadlocks: LocalCounter,
    pub(crate) deadlock_checks: LocalCounter,
    pub(crate) lock_timeouts: LocalCounter,
    pub(crate) not_available: LocalCounter,
    pub(crate) vxid_materialised: LocalCounter,
}

impl BackendCounters {
    pub(crate) fn new(partitions: usize) -> BackendCounters {
        BackendCounters {
            fast_path_grants: LocalCounter::new(),
            main_acquisitions: (0..partitions).map(|_| LocalCounter::new()).collect(),
            partition_blocks: (0..partitions).map(|_| LocalCounter::new()).collect(),
            transfers: LocalCounter::new(),
            spills_strong: LocalCounter::new(),
            spills_full: LocalCounter::new(),
            waits: LocalCounter::new(),
            deadlocks: LocalCounter::new(),
            soft_deadlocks: LocalCounter::new(),
            deadlock_checks: LocalCounter::new(),
            lock_timeouts: LocalCounter::new(),
            not_available: LocalCounter::new(),
            vxid_materialised: LocalCounter::new(),
        }
    }
}

/// The sum of every backend's lock-manager counters (see [`crate::Lmgr::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LmgrStats {
    /// Relation locks granted in a fast-path slot.
    pub fast_path_grants: u64,
    /// Lock acquisitions that went through the main table, per partition (new grants, not
    /// re-acquisitions of a lock the backend already held, not releases). Includes VXID locks
    /// inserted eagerly and locks taken by waiters.
    pub main_acquisitions: Vec<u64>,
    /// Times a backend slept on a partition LWLock (`blk` of the LockManager tranche, counted by
    /// the lock manager's own callers).
    pub partition_blocks: Vec<u64>,
    /// Fast-path entries moved into the main table by strong lockers (one per mode moved) plus
    /// VXID locks materialised by waiters.
    pub transfers: u64,
    /// Weak relation locks that could not use fast path because a strong-lock counter was
    /// non-zero.
    pub spills_strong: u64,
    /// Weak relation locks that could not use fast path because the group's slots were full.
    pub spills_full: u64,
    /// Heavyweight lock waits (sleeps in `WaitOnLock`).
    pub waits: u64,
    /// Hard deadlocks reported ("deadlock detected" errors), including those found at queue
    /// insertion.
    pub deadlocks: u64,
    /// Soft deadlocks resolved by rearranging wait queues.
    pub soft_deadlocks: u64,
    /// Deadlock checks run (deadlock_timeout expiries while still waiting).
    pub deadlock_checks: u64,
    /// `lock_timeout` errors.
    pub lock_timeouts: u64,
    /// NOWAIT / conditional acquisitions that failed.
    pub not_available: u64,
    /// VXID locks materialised in the main table by a waiter (on-demand mode).
    pub vxid_materialised: u64,
}

impl LmgrStats {
    /// Total main-table acquisitions.
    pub fn main_acquisitions_total(&self) -> u64 {
        self.main_acquisitions.iter().sum()
    }

    /// Total partition-lock blocks.
    pub fn partition_blocks_total(&self) -> u64 {
        self.partition_blocks.iter().sum()
    }

    /// The busiest partition's main-table acquisitions (0 without partitions).
    pub fn main_acquisitions_max(&self) -> u64 {
        self.main_acquisitions.iter().copied().max().unwrap_or(0)
    }

    /// Weak relation locks that fell back to the main table.
    pub fn spills(&self) -> u64 {
        self.spills_strong + self.spills_full
    }

    /// Heavyweight lock requests granted anew: fast-path grants plus main-table acquisitions.
    /// PostgreSQL's `LockAcquireExtended` count also includes requests for a lock the
    /// transaction already holds in that mode (answered from the local lock table); this lock
    /// manager does not count those.
    pub fn lock_requests(&self) -> u64 {
        self.fast_path_grants + self.main_acquisitions_total()
    }

    pub(crate) fn add(&mut self, c: &BackendCounters) {
        self.fast_path_grants += c.fast_path_grants.get();
        if self.main_acquisitions.len() < c.main_acquisitions.len() {
            self.main_acquisitions.resize(c.main_acquisitions.len(), 0);
            self.partition_blocks.resize(c.partition_blocks.len(), 0);
        }
        for (s, v) in self.main_acquisitions.iter_mut().zip(c.main_acquisitions.iter()) {
            *s += v.get();
        }
        for (s, v) in self.partition_blocks.iter_mut().zip(c.partition_blocks.iter()) {
            *s += v.get();
        }
        self.transfers += c.transfers.get();
        self.spills_strong += c.spills_strong.get();
        self.spills_full += c.spills_full.get();
        self.waits += c.waits.get();
        self.deadlocks += c.deadlocks.get();
        self.soft_deadlocks += c.soft_deadlocks.get();
        self.deadlock_checks += c.deadlock_checks.get();
        self.lock_timeouts += c.lock_timeouts.get();
        self.not_available += c.not_available.get();
        self.vxid_materialised += c.vxid_materialised.get();
    }

    /// `self - earlier`, field by field (for measuring one phase of a run).
    #[must_use]
    pub fn since(&self, earlier: &LmgrStats) -> LmgrStats {
        let sub = |a: &[u64], b: &[u64]| -> Vec<u64> {
            a.iter().enumerate().map(|(i, x)| x.saturating_sub(b.get(i).copied().unwrap_or(0))).collect()
        };
        LmgrStats {
            fast_path_grants: self.fast_path_grants.saturating_sub(earlier.fast_path_grants),
            main_acquisitions: sub(&self.main_acquisitions, &earlier.main_acquisitions),
            partition_blocks: sub(&self.partition_blocks, &earlier.partition_blocks),
            transfers: self.transfers.saturating_sub(earlier.transfers),
            spills_strong: self.spills_strong.saturating_sub(earlier.spills_strong),
            spills_full: self.spills_full.saturating_sub(earlier.spills_full),
            waits: self.waits.saturating_sub(earlier.waits),
            deadlocks: self.deadlocks.saturating_sub(earlier.deadlocks),
            soft_deadlocks: self.soft_deadlocks.saturating_sub(earlier.soft_deadlocks),
            deadlock_checks: self.deadlock_checks.saturating_sub(earlier.deadlock_checks),
            lock_timeouts: self.lock_timeouts.saturating_sub(earlier.lock_timeouts),
            not_available: self.not_available.saturating_sub(earlier.not_available),
            vxid_materialised: self.vxid_materialised.saturating_sub(earlier.vxid_materialised),
        }
    }
}

/// The counters by name: the scalar fields, then the derived `main_acquisitions_total`,
/// `main_acquisitions_max` (the busiest partition), `partition_blocks_total`, `spills`,
/// `lock_requests` and `partitions` (the number of partitions counted). The per-partition
/// counts are read from [`LmgrStats::main_acquisitions`] and [`LmgrStats::partition_blocks`].
impl lockstack_common::Counters for LmgrStats {
    fn visit(&self, f: &mut dyn FnMut(&str, u64)) {
        f("fast_path_grants", self.fast_path_grants);
        f("transfers", self.transfers);
        f("spills_strong", self.spills_strong);
        f("spills_full", self.spills_full);
        f("waits", self.waits);
        f("deadlocks", self.deadlocks);
        f("soft_deadlocks", self.soft_deadlocks);
        f("deadlock_checks", self.deadlock_checks);
        f("lock_timeouts", self.lock_timeouts);
        f("not_available", self.not_available);
        f("vxid_materialised", self.vxid_materialised);
        f("main_acquisitions_total", self.main_acquisitions_total());
        f("main_acquisitions_max", self.main_acquisitions_max());
        f("partition_blocks_total", self.partition_blocks_total());
        f("spills", self.spills());
        f("lock_requests", self.lock_requests());
        f("partitions", self.main_acquisitions.len() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_common::Counters;

    /// Every scalar field is visited under its name (a new field must be added to `visit`:
    /// this test lists them through `since`, which names every field).
    #[test]
    fn visit_names_every_scalar_field() {
        let s = LmgrStats {
            fast_path_grants: 1,
            main_acquisitions: vec![2, 5],
            partition_blocks: vec![0, 3],
            transfers: 4,
            spills_strong: 6,
            spills_full: 7,
            waits: 8,
            deadlocks: 9,
            soft_deadlocks: 10,
            deadlock_checks: 11,
            lock_timeouts: 12,
            not_available: 13,
            vxid_materialised: 14,
        };
        let LmgrStats {
            fast_path_grants,
            main_acquisitions: _,
            partition_blocks: _,
            transfers,
            spills_strong,
            spills_full,
            waits,
            deadlocks,
            soft_deadlocks,
            deadlock_checks,
            lock_timeouts,
            not_available,
            vxid_materialised,
        } = s.clone();
        for (n, v) in [
            ("fast_path_grants", fast_path_grants),
            ("transfers", transfers),
            ("spills_strong", spills_strong),
            ("spills_full", spills_full),
            ("waits", waits),
            ("deadlocks", deadlocks),
            ("soft_deadlocks", soft_deadlocks),
            ("deadlock_checks", deadlock_checks),
            ("lock_timeouts", lock_timeouts),
            ("not_available", not_available),
            ("vxid_materialised", vxid_materialised),
            ("main_acquisitions_total", 7),
            ("main_acquisitions_max", 5),
            ("partition_blocks_total", 3),
            ("spills", 13),
            ("lock_requests", 8),
            ("partitions", 2),
        ] {
            assert_eq!(s.get(n), Some(v), "{n}");
        }
    }
}
