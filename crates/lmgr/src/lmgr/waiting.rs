//! Waiting for a lock: sleeping in the wait queue until granted, timed out or found in a
//! deadlock (`ProcSleep`), and the deadlock check run after `deadlock_timeout`
//! (`CheckDeadLock`).
//!
//! Locks touched: the waiter's own `PGPROC` wait mutex and condition variable; its partition lock
//! exclusive to leave the queue; every partition lock (in order) for the deadlock check.

use lockstack_common::sync::Instant;
use lockstack_common::{BackendId, WaitEvent, WaitEventScope};

use super::{Lmgr, Requester, WaitStatus};
use crate::deadlock::{self, GraphLock, Outcome, WaitGraph};
use crate::error::LockError;
use crate::mode::LockMode;
use crate::stats::BackendCounters;
use crate::table::ProcLock;
use crate::tag::LockTag;

impl Requester<'_> {
    /// `WaitOnLock` / the sleeping half of `ProcSleep`.
    pub(super) fn wait_on_lock(&self, tag: LockTag, mode: LockMode, p: usize) -> Result<(), LockError> {
        let (lmgr, me) = (self.lmgr, self.me);
        let proc_ = &lmgr.procs[me.index()];
        self.counters.waits.incr();
        let _scope = WaitEventScope::new(WaitEvent::lock(tag.kind.wait_event_index()));
        let start = Instant::now();
        let deadlock_at = start + self.deadlock_timeout;
        let timeout_at = self.lock_timeout.map(|t| start + t);
        let mut checked = false;
        loop {
            {
                let mut st = proc_.wait.lock();
                loop {
                    if st.status == WaitStatus::Granted {
                        st.status = WaitStatus::Idle;
                        lmgr.set_timer(me, None);
                        return Ok(());
                    }
                    let next = match (checked, timeout_at) {
                        (false, Some(t)) => Some(t.min(deadlock_at)),
                        (false, None) => Some(deadlock_at),
                        (true, t) => t,
                    };
                    match next {
                        None => proc_.cv.wait(&mut st),
                        Some(t) => {
                            if proc_.cv.wait_until(&mut st, t).timed_out() {
                                if st.status == WaitStatus::Granted {
                                    continue;
                                }
                                break;
                            }
                        }
                    }
                }
            }
            let now = Instant::now();
            if let Some(t) = timeout_at
                && now >= t
            {
                // Give up unless the grant raced with the timer (`LockErrorCleanup`).
                let granted = lmgr.with_partition(p, Some(self.counters), |t| {
                    let mut st = proc_.wait.lock();
                    lmgr.set_timer(me, None);
                    if st.status == WaitStatus::Granted {
                        st.status = WaitStatus::Idle;
                        return true;
                    }
                    st.status = WaitStatus::Idle;
                    st.tag = None;
                    drop(st);
                    for w in t.remove_from_wait_queue(tag, me) {
                        lmgr.wake(w);
                    }
                    false
                });
                if granted {
                    return Ok(());
                }
                self.counters.lock_timeouts.incr();
                return Err(LockError::LockTimeout { tag, mode });
            }
            if !checked && now >= deadlock_at {
                checked = true;
                if let Some(err) = lmgr.check_dead_lock(me, self.counters) {
                    return Err(err);
                }
                // The check has run: what is left to time is the lock_timeout, if any (unless
                // a grant already withdrew the timer).
                let st = proc_.wait.lock();
                if st.status == WaitStatus::Waiting {
                    lmgr.set_timer(me, timeout_at);
                }
                drop(st);
            }
        }
    }
}

impl Lmgr {
    /// `CheckDeadLock` for waiter `me` once its deadlock_timeout expired: None if it is not
    /// (or no longer) deadlocked, after resolving soft deadlocks; the error if it is the victim
    /// (it has then been removed from the queue).
    pub(super) fn check_dead_lock(&self, me: BackendId, counters: &BackendCounters) -> Option<LockError> {
        counters.deadlock_checks.incr();
        self.with_all_partitions(Some(counters), |tables| {
            let (tag, mode) = {
                let st = self.procs[me.index()].wait.lock();
                if st.status != WaitStatus::Waiting {
                    return None;
                }
                (st.tag?, st.mode)
            };
            let mut g = WaitGraph::default();
            for t in tables.iter() {
                for (tg, e) in t.locks.iter() {
                    if !e.wait_queue.is_empty() {
                        g.push(GraphLock {
                            tag: *tg,
                            holders: t.holders(*tg, e).collect::<Vec<ProcLock>>(),
                            queue: e.wait_queue.iter().copied().collect(),
                        });
                    }
                }
            }
            match deadlock::deadlock_check(&g, me, self.cfg.max_backends) {
                Outcome::NoDeadlock => None,
                Outcome::Soft(orders) => {
                    counters.soft_deadlocks.incr();
                    for (li, order) in orders {
                        let lt = g.locks[li].tag;
                        let t = &mut tables[self.partition_of(lt.hash_code())];
                        if let Some(e) = t.locks.get_mut(&lt) {
                            e.wait_queue = order.into_iter().collect();
                        }
                        for w in t.wakeup(lt) {
                            self.wake(w);
                        }
                    }
                    None
                }
                Outcome::Hard(details) => {
                    counters.deadlocks.incr();
                    let t = &mut tables[self.partition_of(tag.hash_code())];
                    for w in t.remove_from_wait_queue(tag, me) {
                        self.wake(w);
                    }
                    let mut st = self.procs[me.index()].wait.lock();
                    st.status = WaitStatus::Idle;
                    st.tag = None;
                    self.set_timer(me, None);
                    let _ = mode;
                    Some(LockError::Deadlock { detail: deadlock::describe(&details) })
                }
            }
        })
    }
}
