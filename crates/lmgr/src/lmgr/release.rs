//! The release path: one lock (`LockRelease`), every lock of a transaction or session
//! (`LockReleaseAll`), the session's advisory locks, and the wake-up of waiters that a release
//! lets in (`ProcLockWakeup`).
//!
//! Locks touched: the backend's `fpInfoLock` for fast-path holds; the tag's partition lock
//! exclusive for main-table holds; the woken waiters' wait mutexes.

use lockstack_common::{BackendId, Oid};

use super::{Backend, Lmgr};
use crate::local::LocalKey;
use crate::mode::LockMode;
use crate::stats::BackendCounters;
use crate::tag::{LockTag, LockTagKind};

impl Lmgr {
    /// `LockRelease`'s main-table half: takes `tag`'s partition lock, ungrants `me`'s `mode`
    /// (`UnGrantLock`) and cleans up (`CleanUpLock`), waking waiters that can now proceed.
    ///
    /// # Panics
    /// If `me` does not hold `mode` on `tag` in the main table (the local table is out of step).
    #[inline(never)]
    pub(super) fn release_main(
        &self,
        me: BackendId,
        counters: &BackendCounters,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
    ) {
        let p = self.partition_of(hash);
        self.with_partition(p, Some(counters), |t| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.main");
            for w in t.release(tag, me, mode) {
                self.wake(w);
            }
        });
    }
}

impl Backend {
    /// Releases one transaction-owned acquisition of `mode` on relation `rel`
    /// (`UnlockRelationOid`); false if none is held.
    #[inline]
    pub fn unlock_relation(&mut self, rel: Oid, mode: LockMode) -> bool {
        self.unlock(LockTag::relation(self.lmgr.cfg.database, rel), mode, false)
    }
    /// `LockRelease(tag, mode, sessionLock)`: drops one acquisition owned by the session
    /// (`session`) or the transaction; when the backend's count reaches zero the lock is
    /// released in its fast-path slot or the main table, and waiters that can proceed are
    /// granted. Returns false (PostgreSQL: WARNING "you don't own a lock of type ...") when
    /// that owner holds no such lock.
    ///
    /// The local lock table is searched once: the entry found is updated or removed in place
    /// (PostgreSQL searches with `HASH_FIND` and removes with a second `HASH_REMOVE` search in
    /// `RemoveLocalLock`).
    #[inline]
    pub fn unlock(&mut self, tag: LockTag, mode: LockMode, session: bool) -> bool {
        let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.local");
        let Ok(i) = self.local.find(&LocalKey::new(&tag, mode)) else { return false };
        let l = self.local.get_mut(i);
        let owned = if session { &mut l.session } else { &mut l.xact };
        if *owned == 0 {
            return false;
        }
        *owned -= 1;
        if l.session + l.xact > 0 {
            return true;
        }
        let l = self.local.remove_at(i);
        release_shared(&self.lmgr, self.id, &mut self.fp_used, &self.counters, tag, mode, l.hash);
        if l.strong {
            self.lmgr.fp.end_strong(l.hash);
        }
        true
    }
    /// `LockReleaseAll`: releases every transaction-owned acquisition and, with
    /// `session_too`, every session-owned one as well. Does not end the VXID (see
    /// [`end_transaction`](Self::end_transaction)).
    pub fn release_all(&mut self, session_too: bool) {
        let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release_all");
        let Backend { lmgr, id, local, fp_used, counters, fp_scratch, .. } = self;
        // Fast-path entries are collected and cleared under one hold of fpInfoLock afterwards,
        // as LockReleaseAll does; everything else is released from the main table now.
        let (reqs, found, main) = fp_scratch;
        reqs.clear();
        main.clear();
        local.retain(|tag, mode, l| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.local");
            l.xact = 0;
            if session_too {
                l.session = 0;
            }
            if l.session > 0 {
                return true;
            }
            if lmgr.eligible_for_fast_path(&tag, mode) && fp_used[lmgr.fp.group_of(tag.field2)] > 0 {
                reqs.push((tag.field2, mode));
                main.push((tag, mode, l.hash));
            } else {
                lmgr.release_main(*id, counters, tag, mode, l.hash);
            }
            if l.strong {
                lmgr.fp.end_strong(l.hash);
            }
            false
        });
        if !reqs.is_empty() {
            found.clear();
            found.resize(reqs.len(), false);
            lmgr.fp.ungrant_many(*id, reqs, found, fp_used);
            for (&(tag, mode, hash), &was_fast) in main.iter().zip(found.iter()) {
                if !was_fast {
                    lmgr.release_main(*id, counters, tag, mode, hash);
                }
            }
        }
    }
    /// Releases every session-owned acquisition of an advisory lock (`LockReleaseSession` of
    /// the user lock method, as `pg_advisory_unlock_all()` does); transaction-owned ones stay.
    pub fn release_advisory_session_locks(&mut self) {
        let keys: Vec<(LockTag, LockMode)> = self
            .local
            .iter()
            .filter(|(t, _, l)| t.kind == LockTagKind::Advisory && l.session > 0)
            .map(|(t, m, _)| (t, m))
            .collect();
        for (tag, mode) in keys {
            while self.local_lock(tag, mode).is_some_and(|l| l.session > 0) {
                self.unlock(tag, mode, true);
            }
        }
    }
}

/// Releases backend `me`'s hold of `mode` on `tag` (hash code `hash`) wherever it lives: its
/// fast-path slot (`FastPathUnGrantRelationLock` under its `fpInfoLock`) or, if it is not there
/// (taken in the main table, or transferred there by a strong locker), the main table.
#[inline]
pub(super) fn release_shared(
    lmgr: &Lmgr,
    me: BackendId,
    fp_used: &mut [u16],
    counters: &BackendCounters,
    tag: LockTag,
    mode: LockMode,
    hash: u32,
) {
    if lmgr.eligible_for_fast_path(&tag, mode) {
        let g = lmgr.fp.group_of(tag.field2);
        if fp_used[g] != 0
            && let Some(used) = lmgr.fp.ungrant(me, tag.field2, mode)
        {
            fp_used[g] = used;
            return;
        }
    }
    lmgr.release_main(me, counters, tag, mode, hash);
}
