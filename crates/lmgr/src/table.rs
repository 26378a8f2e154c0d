//! The shared lock objects (`LOCK` with its `PROCLOCK`s and wait queue) and the operations
//! that run on them under their partition lock (`lock.c`: `SetupLockInTable`,
//! `LockCheckConflicts`, `GrantLock`, `UnGrantLock`; `proc.c`: `ProcLockWakeup`).

use std::collections::VecDeque;

use lockstack_common::BackendId;

use crate::mode::{LockMask, LockMode};

/// One backend's holdings on one lock (`PROCLOCK`): it exists while the backend holds any mode
/// or waits for one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcLock {
    pub(crate) backend: BackendId,
    pub(crate) hold_mask: LockMask,
}

/// A queued request (`PGPROC.links` in `waitProcs`, with `waitLockMode`). The waiter's own
/// holdings on the lock (`heldLocks`) are read from its PROCLOCK when needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) backend: BackendId,
    pub(crate) mode: LockMode,
}

/// `LOCK`: per-mode request and grant counts (per backend, not per local acquisition), the
/// holders and the wait queue.
#[derive(Clone, Debug, Default)]
pub(crate) struct LockEntry {
    pub(crate) grant_mask: LockMask,
    pub(crate) wait_mask: LockMask,
    pub(crate) requested: [u32; 9],
    pub(crate) n_requested: u32,
    pub(crate) granted: [u32; 9],
    pub(crate) n_granted: u32,
    pub(crate) proclocks: Vec<ProcLock>,
    pub(crate) wait_queue: VecDeque<Waiter>,
}

impl LockEntry {
    pub(crate) fn proclock_index(&self, b: BackendId) -> Option<usize> {
        self.proclocks.iter().position(|p| p.backend == b)
    }

    pub(crate) fn hold_mask(&self, b: BackendId) -> LockMask {
        self.proclock_index(b).map(|i| self.proclocks[i].hold_mask).unwrap_or(0)
    }

    /// `SetupLockInTable` minus the hash lookup: makes sure `b` has a PROCLOCK and counts the
    /// request.
    ///
    /// # Panics
    /// If `b` already holds `mode` here (PostgreSQL: "lock %s on object %u/%u/%u is already
    /// held"): the caller's local table is out of step.
    pub(crate) fn setup(&mut self, b: BackendId, mode: LockMode) {
        match self.proclock_index(b) {
            Some(i) => assert!(
                self.proclocks[i].hold_mask & mode.bit() == 0,
                "lock {mode} is already held by backend {b}"
            ),
            None => self.proclocks.push(ProcLock { backend: b, hold_mask: 0 }),
        }
        self.n_requested += 1;
        self.requested[mode.number()] += 1;
    }

    /// Undoes [`setup`](Self::setup) for a request that was neither granted nor queued.
    pub(crate) fn unsetup(&mut self, b: BackendId, mode: LockMode) {
        self.n_requested -= 1;
        self.requested[mode.number()] -= 1;
        self.drop_proclock_if_empty(b);
    }

    pub(crate) fn drop_proclock_if_empty(&mut self, b: BackendId) {
        if let Some(i) = self.proclock_index(b)
            && self.proclocks[i].hold_mask == 0
            && !self.wait_queue.iter().any(|w| w.backend == b)
        {
            self.proclocks.swap_remove(i);
        }
    }

    /// `LockCheckConflicts`: does `mode` conflict with modes granted to backends other than
    /// `b`? (A backend never conflicts with itself.)
    pub(crate) fn check_conflicts(&self, mode: LockMode, b: BackendId) -> bool {
        let conflict = mode.conflict_mask();
        if conflict & self.grant_mask == 0 {
            return false;
        }
        let mine = self.hold_mask(b);
        for m in LockMode::modes_in(conflict) {
            let mut others = self.granted[m.number()];
            if mine & m.bit() != 0 {
                others -= 1;
            }
            if others > 0 {
                return true;
            }
        }
        false
    }

    /// `GrantLock`.
    pub(crate) fn grant(&mut self, b: BackendId, mode: LockMode) {
        let n = mode.number();
        self.granted[n] += 1;
        self.n_granted += 1;
        self.grant_mask |= mode.bit();
        if self.granted[n] == self.requested[n] {
            self.wait_mask &= !mode.bit();
        }
        let i = self.proclock_index(b).expect("grant without a PROCLOCK");
        self.proclocks[i].hold_mask |= mode.bit();
    }

    /// `UnGrantLock`: returns true when a waiter might now be grantable.
    pub(crate) fn ungrant(&mut self, b: BackendId, mode: LockMode) -> bool {
        let n = mode.number();
        self.requested[n] -= 1;
        self.n_requested -= 1;
        self.granted[n] -= 1;
        self.n_granted -= 1;
        if self.granted[n] == 0 {
            self.grant_mask &= !mode.bit();
        }
        let i = self.proclock_index(b).expect("ungrant without a PROCLOCK");
        self.proclocks[i].hold_mask &= !mode.bit();
        mode.conflict_mask() & self.wait_mask != 0
    }

    /// Removes `b`'s queued request (`RemoveFromWaitQueue` minus the wake-ups); returns the
    /// mode it waited for.
    pub(crate) fn remove_waiter(&mut self, b: BackendId) -> Option<LockMode> {
        let pos = self.wait_queue.iter().position(|w| w.backend == b)?;
        let w = self.wait_queue.remove(pos)?;
        let n = w.mode.number();
        self.n_requested -= 1;
        self.requested[n] -= 1;
        if self.granted[n] == self.requested[n] {
            self.wait_mask &= !w.mode.bit();
        }
        self.drop_proclock_if_empty(b);
        Some(w.mode)
    }

    /// `ProcLockWakeup`: grants, in queue order, every waiter whose request conflicts neither
    /// with granted modes nor with the requests of waiters still ahead of it. Returns the
    /// backends granted (the caller wakes them).
    pub(crate) fn wakeup(&mut self) -> Vec<BackendId> {
        let mut woken = Vec::new();
        let mut ahead: LockMask = 0;
        let mut i = 0;
        while i < self.wait_queue.len() {
            let w = self.wait_queue[i];
            if w.mode.conflict_mask() & ahead == 0 && !self.check_conflicts(w.mode, w.backend) {
                self.wait_queue.remove(i);
                self.grant(w.backend, w.mode);
                woken.push(w.backend);
            } else {
                ahead |= w.mode.bit();
                i += 1;
            }
        }
        woken
    }

    /// Checks this lock's internal consistency (`LOCK_PRINT`-style sanity as the tests need it).
    pub(crate) fn check(&self) -> Result<(), String> {
        if self.n_requested == 0 {
            return Err("lock object with no requests left in the table".into());
        }
        let mut hold_counts = [0u32; 9];
        for p in &self.proclocks {
            for m in LockMode::modes_in(p.hold_mask) {
                hold_counts[m.number()] += 1;
            }
            if p.hold_mask == 0 && !self.wait_queue.iter().any(|w| w.backend == p.backend) {
                return Err(format!("backend {} has an empty PROCLOCK and is not waiting", p.backend));
            }
        }
        let mut wait_counts = [0u32; 9];
        for w in &self.wait_queue {
            wait_counts[w.mode.number()] += 1;
            if self.proclock_index(w.backend).is_none() {
                return Err(format!("waiter {} has no PROCLOCK", w.backend));
            }
            if self.hold_mask(w.backend) & w.mode.bit() != 0 {
                return Err(format!("waiter {} already holds {}", w.backend, w.mode));
            }
        }
        let mut seen: Vec<BackendId> = self.proclocks.iter().map(|p| p.backend).collect();
        seen.sort();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err("duplicate PROCLOCK".into());
        }
        for m in LockMode::ALL {
            let n = m.number();
            if self.granted[n] != hold_counts[n] {
                return Err(format!("granted[{m}] = {} but {} holders", self.granted[n], hold_counts[n]));
            }
            if self.requested[n] != self.granted[n] + wait_counts[n] {
                return Err(format!(
                    "requested[{m}] = {} but granted {} + waiting {}",
                    self.requested[n], self.granted[n], wait_counts[n]
                ));
            }
            if (self.grant_mask & m.bit() != 0) != (self.granted[n] > 0) {
                return Err(format!("grantMask bit of {m} disagrees with granted count"));
            }
            if (self.wait_mask & m.bit() != 0) != (wait_counts[n] > 0) {
                return Err(format!("waitMask bit of {m} disagrees with the wait queue"));
            }
        }
        if self.n_granted != self.granted.iter().sum::<u32>()
            || self.n_requested != self.requested.iter().sum::<u32>()
        {
            return Err("nGranted/nRequested disagree with the per-mode counts".into());
        }
        Ok(())
    }
}
