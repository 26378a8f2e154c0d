//! The acquire path: `LockAcquireExtended` from the local lock table through the fast path (see
//! `fast_path.rs`) to the main table, where a request is granted, refused (`dontWait`) or
//! queued; the wait itself is in `waiting.rs`.
//!
//! Locks touched: the tag's `LockManager` partition lock exclusive for the main-table request;
//! a backend's own `fpInfoLock` through the fast path; the strong-lock counters' mutex.

use lockstack_common::Oid;
use lockstack_common::sync::Instant;

use super::{Backend, LockAcquireResult, LockOptions, Requester, WaitStatus};
use crate::deadlock;
use crate::error::LockError;
use crate::local::{LocalKey, LocalLock};
use crate::mode::LockMode;
use crate::table::Join;
use crate::tag::LockTag;

impl Backend {
    /// `LockAcquireExtended(tag, mode, sessionLock, dontWait)`.
    ///
    /// Waits (publishing `Lock:<kind>` as the wait event) until granted, unless
    /// `opts.dont_wait`. While waiting, runs the deadlock detector once `deadlock_timeout` has
    /// passed and gives up when `lock_timeout` has.
    ///
    /// The local lock table is searched once (PostgreSQL's `hash_search(HASH_ENTER)` of the
    /// LOCALLOCK): the entry, or the place for it, is kept until the request is decided.
    ///
    /// # Errors
    /// [`LockError::NotAvailable`] (dont_wait), [`LockError::Deadlock`] (this backend is the
    /// victim, found at queue insertion or by the detector), [`LockError::LockTimeout`]. After
    /// an error the request has left no trace; locks held before are still held.
    #[inline]
    pub fn lock(
        &mut self,
        tag: LockTag,
        mode: LockMode,
        opts: LockOptions,
    ) -> Result<LockAcquireResult, LockError> {
        let key = LocalKey::new(&tag, mode);
        self.local.reserve_one();
        let found = self.local.find(&key);
        let _cost = lockstack_common::sync::hook::pg_region(if found.is_ok() {
            "lmgr.lock_acquire.local_held"
        } else {
            "lmgr.lock_acquire.local"
        });
        let vacant = match found {
            Ok(i) => {
                // Entries exist only while held (`unlock` and `release_all` remove them at 0).
                let l = self.local.get_mut(i);
                debug_assert!(l.session + l.xact > 0);
                if opts.session {
                    l.session += 1;
                } else {
                    l.xact += 1;
                }
                return Ok(LockAcquireResult::AlreadyHeld);
            }
            Err(i) => i,
        };
        let hash = tag.hash_code();
        if self.lmgr.eligible_for_fast_path(&tag, mode) && self.try_fast_path(tag.field2, mode, hash) {
            let l = LocalLock {
                session: u32::from(opts.session),
                xact: u32::from(!opts.session),
                strong: false,
                hash,
            };
            self.local.insert_at(vacant, &key, l);
            return Ok(LockAcquireResult::Acquired);
        }
        self.lock_main(vacant, &key, tag, mode, hash, opts)
    }
    /// The main-table half of `LockAcquireExtended` (steps after the fast path): strong-lock
    /// bookkeeping and transfer, the request in the partition, waiting. `vacant` is the local
    /// table's free slot for `key` (nothing changed the local table since it was found).
    #[inline(never)]
    pub(super) fn lock_main(
        &mut self,
        vacant: usize,
        key: &LocalKey,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
        opts: LockOptions,
    ) -> Result<LockAcquireResult, LockError> {
        let lmgr = &*self.lmgr;
        let counters = &*self.counters;
        let strong = lmgr.conflicts_with_fast_path(&tag, mode);
        if strong {
            lmgr.fp.begin_strong(hash);
            if tag.field1 == lmgr.cfg.database.0 {
                let p = lmgr.partition_of(hash);
                let moved = lmgr.fp.transfer(tag.field2, |b, m| {
                    lmgr.with_partition(p, Some(counters), |t| t.setup_and_grant(tag, b, m));
                });
                counters.transfers.add(moved as u64);
            }
        }
        let req = Requester {
            lmgr,
            me: self.id,
            counters,
            deadlock_timeout: self.deadlock_timeout,
            lock_timeout: self.lock_timeout,
        };
        match req.acquire_main(tag, mode, hash, opts.dont_wait) {
            Ok(()) => {
                let l = LocalLock {
                    session: u32::from(opts.session),
                    xact: u32::from(!opts.session),
                    strong,
                    hash,
                };
                self.local.insert_at(vacant, key, l);
                Ok(LockAcquireResult::Acquired)
            }
            Err(e) => {
                if strong {
                    lmgr.fp.end_strong(hash);
                }
                Err(e)
            }
        }
    }
    /// `ConditionalLockAcquire`: [`lock`](Self::lock) with `dont_wait`; `Ok(false)` when the
    /// lock is not available.
    ///
    /// # Errors
    /// Never [`LockError::NotAvailable`]; the other errors cannot happen without waiting, so in
    /// practice this always returns `Ok`.
    pub fn conditional_lock(
        &mut self,
        tag: LockTag,
        mode: LockMode,
        session: bool,
    ) -> Result<bool, LockError> {
        match self.lock(tag, mode, LockOptions { session, dont_wait: true }) {
            Ok(_) => Ok(true),
            Err(LockError::NotAvailable { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
    /// [`lock`](Self::lock) on `LockTag::relation(MyDatabaseId, rel)` as a transaction lock
    /// (`LockRelationOid`).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    #[inline]
    pub fn lock_relation(&mut self, rel: Oid, mode: LockMode) -> Result<LockAcquireResult, LockError> {
        self.lock(LockTag::relation(self.lmgr.cfg.database, rel), mode, LockOptions::XACT)
    }
}

impl Requester<'_> {
    /// Steps 6-10 of `LockAcquireExtended`: the main-table request, queueing and waiting.
    pub(super) fn acquire_main(
        &self,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
        dont_wait: bool,
    ) -> Result<(), LockError> {
        let (lmgr, me, counters) = (self.lmgr, self.me, self.counters);
        let p = lmgr.partition_of(hash);
        let outcome = lmgr.with_partition(p, Some(counters), |t| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_acquire.main");
            let (e, pl) = t.setup(tag, me, mode);
            let conflict = mode.conflict_mask() & e.wait_mask != 0 || e.check_conflicts(mode, pl.hold_mask);
            if !conflict {
                e.grant(pl, mode);
                return Join::Granted;
            }
            // PostgreSQL 9.x-16 (`LockAcquireExtended`): a conflicting NOWAIT request fails
            // here, before `ProcSleep` could grant it by jumping the queue; 17+ asks the queue
            // first (`nowait_queue_jump`).
            let j = if dont_wait && !lmgr.cfg.nowait_queue_jump {
                Join::NotAvailable
            } else {
                t.join_wait_queue(tag, me, mode, dont_wait)
            };
            match j {
                Join::Granted => {}
                Join::Queued => {
                    let mut st = lmgr.procs[me.index()].wait.lock();
                    st.status = WaitStatus::Waiting;
                    st.tag = Some(tag);
                    st.mode = mode;
                    let first =
                        self.lock_timeout.map_or(self.deadlock_timeout, |l| l.min(self.deadlock_timeout));
                    lmgr.set_timer(me, Instant::now().checked_add(first));
                }
                Join::NotAvailable | Join::EarlyDeadlock(_) => t.abandon_request(tag, me, mode),
            }
            j
        });
        match outcome {
            Join::Granted => {
                counters.main_acquisitions[p].incr();
                Ok(())
            }
            Join::NotAvailable => {
                counters.not_available.incr();
                Err(LockError::NotAvailable { tag, mode })
            }
            Join::EarlyDeadlock(other) => {
                counters.deadlocks.incr();
                let details = [
                    deadlock::DetailEntry { backend: me, tag, mode },
                    deadlock::DetailEntry { backend: other.backend, tag, mode: other.mode },
                ];
                Err(LockError::Deadlock { detail: deadlock::describe(&details) })
            }
            Join::Queued => {
                let r = self.wait_on_lock(tag, mode, p);
                if r.is_ok() {
                    counters.main_acquisitions[p].incr();
                }
                r
            }
        }
    }
}
