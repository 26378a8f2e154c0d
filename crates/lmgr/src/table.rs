//! The shared lock objects of one partition and the operations that run on them under its
//! partition lock (`lock.c`: `SetupLockInTable`, `LockCheckConflicts`, `GrantLock`,
//! `UnGrantLock`, `CleanUpLock`, `RemoveFromWaitQueue`; `proc.c`: `JoinWaitQueue`,
//! `ProcLockWakeup`).
//!
//! As in PostgreSQL, a partition has two hash tables: `LOCK` objects keyed by tag and `PROCLOCK`
//! objects keyed by (lock, backend). Both are created by the first request that needs them and
//! removed when the last hold or request on them goes; a LOCK lists the backends of its
//! PROCLOCKs (`procLocks`) so that its holders can be enumerated.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use lockstack_common::BackendId;
use lockstack_common::sync::hook::{Access, touch_slice, touch_val};

use crate::mode::{LockMask, LockMode};
use crate::tag::{LockTag, TagBuildHasher};
use crate::violation::{LockViolation, TableViolation};

/// `PROCLOCKTAG`: the lock and the backend (PostgreSQL keys by the two shared-memory addresses;
/// the tag identifies the lock just as well).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ProcLockTag {
    pub(crate) tag: LockTag,
    pub(crate) backend: BackendId,
}

/// `PROCLOCK`: one backend's holdings on one lock. It exists while the backend holds any mode
/// or waits for one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ProcLockEntry {
    pub(crate) hold_mask: LockMask,
}

/// One holder of a lock as listings and the deadlock detector see it: the backend and its
/// `holdMask`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ProcLock {
    pub(crate) backend: BackendId,
    pub(crate) hold_mask: LockMask,
}

/// A queued request (`PGPROC.links` in `waitProcs`, with `waitLockMode`). The waiter's own
/// holdings on the lock are read from its PROCLOCK when needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Waiter {
    pub(crate) backend: BackendId,
    pub(crate) mode: LockMode,
}

/// `LOCK`: per-mode request and grant counts (per backend, not per local acquisition), the
/// backends that have a PROCLOCK on it, and the wait queue.
#[derive(Clone, Debug, Default)]
pub(crate) struct LockEntry {
    pub(crate) grant_mask: LockMask,
    pub(crate) wait_mask: LockMask,
    pub(crate) requested: [u32; 9],
    pub(crate) n_requested: u32,
    pub(crate) granted: [u32; 9],
    pub(crate) n_granted: u32,
    /// Backends with a PROCLOCK on this lock (`procLocks`), oldest first.
    pub(crate) proclocks: Vec<BackendId>,
    pub(crate) wait_queue: VecDeque<Waiter>,
}

/// Where [`PartitionTables::join_wait_queue`] put a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Join {
    /// Granted at once (no conflict, or ahead of the waiters that wait for the requester).
    Granted,
    /// Queued; the caller sleeps.
    Queued,
    /// Would have to wait, and the caller said not to.
    NotAvailable,
    /// Must wait for a waiter that waits for it: a deadlock whatever the queue position.
    EarlyDeadlock(Waiter),
}

impl LockEntry {
    /// `LockCheckConflicts`: does `mode` conflict with modes granted to backends other than the
    /// requester, whose own holdings here are `my_hold`? (A backend never conflicts with
    /// itself.)
    pub(crate) fn check_conflicts(&self, mode: LockMode, my_hold: LockMask) -> bool {
        let conflict = mode.conflict_mask();
        if conflict & self.grant_mask == 0 {
            return false;
        }
        for m in LockMode::modes_in(conflict) {
            let mut others = self.granted[m.number()];
            if my_hold & m.bit() != 0 {
                others -= 1;
            }
            if others > 0 {
                return true;
            }
        }
        false
    }

    /// `GrantLock`: counts the grant on the LOCK and records it in the requester's PROCLOCK.
    pub(crate) fn grant(&mut self, pl: &mut ProcLockEntry, mode: LockMode) {
        let n = mode.number();
        self.granted[n] += 1;
        self.n_granted += 1;
        self.grant_mask |= mode.bit();
        if self.granted[n] == self.requested[n] {
            self.wait_mask &= !mode.bit();
        }
        pl.hold_mask |= mode.bit();
    }

    /// `UnGrantLock`: returns true when a waiter might now be grantable.
    pub(crate) fn ungrant(&mut self, pl: &mut ProcLockEntry, mode: LockMode) -> bool {
        let n = mode.number();
        self.requested[n] -= 1;
        self.n_requested -= 1;
        self.granted[n] -= 1;
        self.n_granted -= 1;
        if self.granted[n] == 0 {
            self.grant_mask &= !mode.bit();
        }
        pl.hold_mask &= !mode.bit();
        mode.conflict_mask() & self.wait_mask != 0
    }

    fn is_waiting(&self, b: BackendId) -> bool {
        self.wait_queue.iter().any(|w| w.backend == b)
    }
}

/// One partition's LOCK and PROCLOCK hash tables (`LockMethodLockHash`,
/// `LockMethodProcLockHash`, restricted to the partition's hash codes).
#[derive(Debug, Default)]
pub(crate) struct PartitionTables {
    pub(crate) locks: HashMap<LockTag, LockEntry, TagBuildHasher>,
    pub(crate) proclocks: HashMap<ProcLockTag, ProcLockEntry, TagBuildHasher>,
}

impl PartitionTables {
    /// `holdMask` of `b` on `tag` (0 without a PROCLOCK).
    pub(crate) fn hold_mask(&self, tag: LockTag, b: BackendId) -> LockMask {
        self.proclocks
            .get(&ProcLockTag { tag, backend: b })
            .inspect(|p| touch_val(*p, Access::Read))
            .map_or(0, |p| p.hold_mask)
    }

    /// The holders of lock `e` (tag `tag`) with their `holdMask`s, PROCLOCK list order.
    pub(crate) fn holders<'a>(
        &'a self,
        tag: LockTag,
        e: &'a LockEntry,
    ) -> impl Iterator<Item = ProcLock> + 'a {
        touch_slice(&e.proclocks, Access::Read);
        e.proclocks.iter().map(move |&b| ProcLock { backend: b, hold_mask: self.hold_mask(tag, b) })
    }

    /// `SetupLockInTable`: finds or creates the LOCK of `tag` and `b`'s PROCLOCK on it (one
    /// hash-table search each) and counts the request.
    ///
    /// # Panics
    /// If `b` already holds `mode` here (PostgreSQL: "lock %s on object %u/%u/%u is already
    /// held"): the caller's local table is out of step.
    pub(crate) fn setup(
        &mut self,
        tag: LockTag,
        b: BackendId,
        mode: LockMode,
    ) -> (&mut LockEntry, &mut ProcLockEntry) {
        let e = self.locks.entry(tag).or_default();
        touch_val(e, Access::Write);
        let pl = match self.proclocks.entry(ProcLockTag { tag, backend: b }) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(v) => {
                e.proclocks.push(b);
                touch_slice(&e.proclocks[e.proclocks.len() - 1..], Access::Write);
                v.insert(ProcLockEntry::default())
            }
        };
        touch_val(pl, Access::Write);
        assert!(pl.hold_mask & mode.bit() == 0, "lock {mode} on {tag} is already held by backend {b}");
        e.n_requested += 1;
        e.requested[mode.number()] += 1;
        (e, pl)
    }

    /// [`setup`](Self::setup) and `GrantLock` in one: enters a lock that is known to be
    /// grantable (a fast-path entry being transferred, a VXID lock being materialised).
    pub(crate) fn setup_and_grant(&mut self, tag: LockTag, b: BackendId, mode: LockMode) {
        let (e, pl) = self.setup(tag, b, mode);
        e.grant(pl, mode);
    }

    /// Deletes `b`'s PROCLOCK on `e` if it holds nothing and does not wait (the first half of
    /// `CleanUpLock`).
    fn drop_proclock_if_empty(
        proclocks: &mut HashMap<ProcLockTag, ProcLockEntry, TagBuildHasher>,
        e: &mut LockEntry,
        tag: LockTag,
        b: BackendId,
    ) {
        if let Entry::Occupied(o) = proclocks.entry(ProcLockTag { tag, backend: b })
            && o.get().hold_mask == 0
            && !e.is_waiting(b)
        {
            touch_val(o.get(), Access::Write);
            o.remove();
            touch_slice(&e.proclocks, Access::Read);
            if let Some(i) = e.proclocks.iter().position(|&x| x == b) {
                e.proclocks.swap_remove(i);
            }
        }
    }

    /// `CleanUpLock` on the LOCK of `tag` after `b` released or stopped waiting: drops `b`'s
    /// empty PROCLOCK and, when no request is left, the LOCK; otherwise, if `wakeup_needed`,
    /// grants the waiters that can now proceed and returns them (the caller wakes them).
    pub(crate) fn clean_up(&mut self, tag: LockTag, b: BackendId, wakeup_needed: bool) -> Vec<BackendId> {
        let Entry::Occupied(mut o) = self.locks.entry(tag) else { return Vec::new() };
        touch_val(o.get(), Access::Write);
        Self::drop_proclock_if_empty(&mut self.proclocks, o.get_mut(), tag, b);
        if o.get().n_requested == 0 {
            o.remove();
            Vec::new()
        } else if wakeup_needed {
            Self::wakeup_entry(&mut self.proclocks, o.get_mut(), tag)
        } else {
            Vec::new()
        }
    }

    /// `LockRelease`'s shared-table half: `UnGrantLock` of `b`'s `mode` on `tag`, then
    /// `CleanUpLock` (PROCLOCK and LOCK removed when empty). Returns the waiters granted.
    ///
    /// # Panics
    /// If `b` does not hold `mode` on `tag` in this table (the local table is out of step).
    pub(crate) fn release(&mut self, tag: LockTag, b: BackendId, mode: LockMode) -> Vec<BackendId> {
        let Entry::Occupied(mut lo) = self.locks.entry(tag) else {
            panic!("backend {b} releases {mode} on {tag}, which is not in the lock table")
        };
        let e = lo.get_mut();
        touch_val(e, Access::Write);
        let Entry::Occupied(mut po) = self.proclocks.entry(ProcLockTag { tag, backend: b }) else {
            panic!("backend {b} releases {mode} on {tag} but has no PROCLOCK there")
        };
        touch_val(po.get(), Access::Write);
        assert!(po.get().hold_mask & mode.bit() != 0, "backend {b} does not hold {mode} on {tag}");
        let wakeup_needed = e.ungrant(po.get_mut(), mode);
        if po.get().hold_mask == 0 && !e.is_waiting(b) {
            po.remove();
            touch_slice(&e.proclocks, Access::Read);
            if let Some(i) = e.proclocks.iter().position(|&x| x == b) {
                e.proclocks.swap_remove(i);
            }
        }
        if e.n_requested == 0 {
            lo.remove();
            Vec::new()
        } else if wakeup_needed {
            Self::wakeup_entry(&mut self.proclocks, e, tag)
        } else {
            Vec::new()
        }
    }

    /// Undoes [`setup`](Self::setup) for a request that was neither granted nor queued (the
    /// failure branch of `LockAcquireExtended`), dropping the PROCLOCK and LOCK if now empty.
    pub(crate) fn abandon_request(&mut self, tag: LockTag, b: BackendId, mode: LockMode) {
        let Entry::Occupied(mut o) = self.locks.entry(tag) else { return };
        let e = o.get_mut();
        touch_val(e, Access::Write);
        e.n_requested -= 1;
        e.requested[mode.number()] -= 1;
        Self::drop_proclock_if_empty(&mut self.proclocks, e, tag, b);
        if e.n_requested == 0 {
            o.remove();
        }
    }

    /// `RemoveFromWaitQueue` + `CleanUpLock`: takes `b`'s queued request on `tag` out of the
    /// queue (it gave up: deadlock victim, lock_timeout) and grants the waiters that can now
    /// proceed, which are returned.
    pub(crate) fn remove_from_wait_queue(&mut self, tag: LockTag, b: BackendId) -> Vec<BackendId> {
        if let Some(e) = self.locks.get_mut(&tag).inspect(|e| touch_val(*e, Access::Write))
            && let Some(pos) = e.wait_queue.iter().position(|w| w.backend == b)
            && let Some(w) = e.wait_queue.remove(pos)
        {
            let n = w.mode.number();
            e.n_requested -= 1;
            e.requested[n] -= 1;
            if e.granted[n] == e.requested[n] {
                e.wait_mask &= !w.mode.bit();
            }
        }
        self.clean_up(tag, b, true)
    }

    /// `ProcLockWakeup` on `tag` (after its queue was rearranged): returns the waiters granted.
    pub(crate) fn wakeup(&mut self, tag: LockTag) -> Vec<BackendId> {
        match self.locks.get_mut(&tag) {
            Some(e) => Self::wakeup_entry(&mut self.proclocks, e, tag),
            None => Vec::new(),
        }
    }

    /// `ProcLockWakeup`: grants, in queue order, every waiter whose request conflicts neither
    /// with granted modes nor with the requests of waiters still ahead of it. Returns the
    /// backends granted (the caller wakes them).
    fn wakeup_entry(
        proclocks: &mut HashMap<ProcLockTag, ProcLockEntry, TagBuildHasher>,
        e: &mut LockEntry,
        tag: LockTag,
    ) -> Vec<BackendId> {
        let mut woken = Vec::new();
        let mut ahead: LockMask = 0;
        let mut i = 0;
        while i < e.wait_queue.len() {
            let w = e.wait_queue[i];
            touch_val(&e.wait_queue[i], Access::Read);
            let pl = proclocks
                .get_mut(&ProcLockTag { tag, backend: w.backend })
                .expect("every waiter has a PROCLOCK: it is created before the backend joins the wait queue");
            touch_val(pl, Access::Read);
            if w.mode.conflict_mask() & ahead == 0 && !e.check_conflicts(w.mode, pl.hold_mask) {
                touch_val(pl, Access::Write);
                e.wait_queue.remove(i);
                e.grant(pl, w.mode);
                woken.push(w.backend);
            } else {
                ahead |= w.mode.bit();
                i += 1;
            }
        }
        woken
    }

    /// `JoinWaitQueue` (18; the first half of `ProcSleep` before): decides where `me`, whose
    /// request for `mode` on `tag` conflicts, goes in the queue, possibly granting at once when
    /// `me` already holds modes that waiters wait for. Queues the request unless it is
    /// granted, `dont_wait` is set, or it is an early deadlock.
    pub(crate) fn join_wait_queue(
        &mut self,
        tag: LockTag,
        me: BackendId,
        mode: LockMode,
        dont_wait: bool,
    ) -> Join {
        let held = self.hold_mask(tag, me);
        let Some(e) = self.locks.get(&tag) else { unreachable!("join_wait_queue without setup") };
        touch_val(e, Access::Read);
        let mut insert_at = None;
        let mut early = None;
        let mut grant_now = false;
        if held != 0 && e.wait_mask != 0 {
            let mut ahead: LockMask = 0;
            for (i, w) in e.wait_queue.iter().enumerate() {
                touch_val(w, Access::Read);
                // Must this waiter wait for me?
                if w.mode.conflict_mask() & held != 0 {
                    // Must I wait for it? Then it is a deadlock no matter where I queue.
                    if mode.conflict_mask() & self.hold_mask(tag, w.backend) != 0 {
                        early = Some(*w);
                        break;
                    }
                    if mode.conflict_mask() & ahead == 0 && !e.check_conflicts(mode, held) {
                        grant_now = true;
                        break;
                    }
                    insert_at = Some(i);
                    break;
                }
                ahead |= w.mode.bit();
            }
        }
        let (Some(e), Some(pl)) =
            (self.locks.get_mut(&tag), self.proclocks.get_mut(&ProcLockTag { tag, backend: me }))
        else {
            unreachable!("join_wait_queue without setup")
        };
        if grant_now {
            touch_val(pl, Access::Write);
            e.grant(pl, mode);
            return Join::Granted;
        }
        if dont_wait {
            return Join::NotAvailable;
        }
        if let Some(w) = early {
            return Join::EarlyDeadlock(w);
        }
        let w = Waiter { backend: me, mode };
        touch_val(e, Access::Write);
        let at = insert_at.unwrap_or(e.wait_queue.len());
        e.wait_queue.insert(at, w);
        touch_val(&e.wait_queue[at], Access::Write);
        e.wait_mask |= mode.bit();
        Join::Queued
    }

    /// Checks every LOCK's internal consistency against its PROCLOCKs and wait queue, and that
    /// every PROCLOCK belongs to a LOCK that lists it (`LOCK_PRINT`-style sanity as the tests
    /// need it). Errors name the lock.
    pub(crate) fn check(&self) -> Result<(), TableViolation> {
        let mut listed = 0;
        for (tag, e) in &self.locks {
            check_lock(self, *tag, e).map_err(|source| TableViolation::Lock { tag: *tag, source })?;
            listed += e.proclocks.len();
        }
        if listed != self.proclocks.len() {
            return Err(TableViolation::UnlistedProcLocks { in_table: self.proclocks.len(), listed });
        }
        Ok(())
    }
}

fn check_lock(t: &PartitionTables, tag: LockTag, e: &LockEntry) -> Result<(), LockViolation> {
    if e.n_requested == 0 {
        return Err(LockViolation::NoRequests);
    }
    let mut hold_counts = [0u32; 9];
    for b in &e.proclocks {
        let Some(p) = t.proclocks.get(&ProcLockTag { tag, backend: *b }) else {
            return Err(LockViolation::ListedWithoutProcLock(*b));
        };
        for m in LockMode::modes_in(p.hold_mask) {
            hold_counts[m.number()] += 1;
        }
        if p.hold_mask == 0 && !e.is_waiting(*b) {
            return Err(LockViolation::EmptyProcLock(*b));
        }
    }
    let mut wait_counts = [0u32; 9];
    for w in &e.wait_queue {
        wait_counts[w.mode.number()] += 1;
        if !e.proclocks.contains(&w.backend) {
            return Err(LockViolation::WaiterWithoutProcLock(w.backend));
        }
        if t.hold_mask(tag, w.backend) & w.mode.bit() != 0 {
            return Err(LockViolation::WaiterAlreadyHolds { backend: w.backend, mode: w.mode });
        }
    }
    let mut seen = e.proclocks.clone();
    seen.sort();
    if seen.windows(2).any(|w| w[0] == w[1]) {
        return Err(LockViolation::DuplicateProcLock);
    }
    for m in LockMode::ALL {
        let n = m.number();
        if e.granted[n] != hold_counts[n] {
            return Err(LockViolation::GrantedCount {
                mode: m,
                granted: e.granted[n],
                holders: hold_counts[n],
            });
        }
        if e.requested[n] != e.granted[n] + wait_counts[n] {
            return Err(LockViolation::RequestedCount {
                mode: m,
                requested: e.requested[n],
                granted: e.granted[n],
                waiting: wait_counts[n],
            });
        }
        if (e.grant_mask & m.bit() != 0) != (e.granted[n] > 0) {
            return Err(LockViolation::GrantMask(m));
        }
        if (e.wait_mask & m.bit() != 0) != (wait_counts[n] > 0) {
            return Err(LockViolation::WaitMask(m));
        }
    }
    if e.n_granted != e.granted.iter().sum::<u32>() || e.n_requested != e.requested.iter().sum::<u32>() {
        return Err(LockViolation::Totals);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_common::Oid;

    fn rel() -> LockTag {
        LockTag::relation(Oid(5), Oid(16384))
    }

    #[test]
    fn lock_and_proclock_objects_come_and_go_with_their_holders() {
        let mut t = PartitionTables::default();
        let (a, b) = (BackendId(0), BackendId(1));
        t.setup_and_grant(rel(), a, LockMode::AccessShare);
        t.setup_and_grant(rel(), b, LockMode::AccessShare);
        t.setup_and_grant(rel(), b, LockMode::RowExclusive);
        t.check().unwrap();
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 2));
        assert_eq!(t.hold_mask(rel(), b), LockMode::AccessShare.bit() | LockMode::RowExclusive.bit());
        assert!(t.release(rel(), b, LockMode::AccessShare).is_empty());
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 2), "b still holds RowExclusive");
        assert!(t.release(rel(), a, LockMode::AccessShare).is_empty());
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 1));
        t.check().unwrap();
        assert!(t.release(rel(), b, LockMode::RowExclusive).is_empty());
        assert_eq!((t.locks.len(), t.proclocks.len()), (0, 0));
    }

    #[test]
    fn queued_request_keeps_its_proclock_and_is_granted_on_release() {
        let mut t = PartitionTables::default();
        let (a, b) = (BackendId(0), BackendId(1));
        t.setup_and_grant(rel(), a, LockMode::AccessExclusive);
        let (e, pl) = t.setup(rel(), b, LockMode::AccessShare);
        assert!(e.check_conflicts(LockMode::AccessShare, pl.hold_mask));
        assert_eq!(t.join_wait_queue(rel(), b, LockMode::AccessShare, false), Join::Queued);
        t.check().unwrap();
        assert_eq!(t.hold_mask(rel(), b), 0);
        assert_eq!(t.proclocks.len(), 2, "a waiter has an empty PROCLOCK");
        assert_eq!(t.release(rel(), a, LockMode::AccessExclusive), vec![b]);
        assert_eq!(t.hold_mask(rel(), b), LockMode::AccessShare.bit());
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 1));
        t.check().unwrap();
    }

    #[test]
    fn abandoned_and_withdrawn_requests_leave_nothing_behind() {
        let mut t = PartitionTables::default();
        let (a, b) = (BackendId(0), BackendId(1));
        t.setup_and_grant(rel(), a, LockMode::AccessExclusive);
        t.setup(rel(), b, LockMode::Share);
        assert_eq!(t.join_wait_queue(rel(), b, LockMode::Share, true), Join::NotAvailable);
        t.abandon_request(rel(), b, LockMode::Share);
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 1));
        t.check().unwrap();
        t.setup(rel(), b, LockMode::Share);
        assert_eq!(t.join_wait_queue(rel(), b, LockMode::Share, false), Join::Queued);
        assert!(t.remove_from_wait_queue(rel(), b).is_empty());
        assert_eq!((t.locks.len(), t.proclocks.len()), (1, 1));
        t.check().unwrap();
        assert!(t.release(rel(), a, LockMode::AccessExclusive).is_empty());
        assert_eq!((t.locks.len(), t.proclocks.len()), (0, 0));
    }

    #[test]
    fn check_finds_a_proclock_no_lock_lists() {
        let mut t = PartitionTables::default();
        t.setup_and_grant(rel(), BackendId(0), LockMode::AccessShare);
        t.proclocks.insert(
            ProcLockTag { tag: rel(), backend: BackendId(3) },
            ProcLockEntry { hold_mask: LockMode::AccessShare.bit() },
        );
        let err = t.check().unwrap_err().to_string();
        assert!(err.contains("2 PROCLOCKs in the table but 1 listed"), "{err}");
    }
}
