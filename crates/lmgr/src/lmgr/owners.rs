//! Subtransaction resource owners, reduced to what a savepoint needs: a mark of the
//! transaction-owned acquisitions held when a subtransaction starts, and the release of every
//! acquisition made since (`LockReleaseCurrentOwner` of the subtransaction's resource owner at
//! `AbortSubTransaction`, `src/backend/storage/lmgr/lock.c` and `access/transam/xact.c`,
//! PostgreSQL 8.0-18).
//!
//! PostgreSQL keeps one count per (lock, owner) (`LOCALLOCKOWNER`); here a lock's
//! transaction-owned count is split by the mark instead: the acquisitions above the count
//! recorded at the savepoint belong to the subtransaction (and its children), those at or below
//! it to its ancestors. This equals per-owner counting because acquisitions and releases inside
//! a subtransaction are nested: a statement releases only what it took (tuple locks), and a
//! parent's acquisitions are never released while a child runs. `RELEASE SAVEPOINT`
//! (`LockReassignCurrentOwner`, the locks pass to the parent) needs nothing: the parent's older
//! mark already covers them.
//!
//! Locks touched: those of [`Backend::unlock`] for each released acquisition.

use super::Backend;
use crate::mode::LockMode;
use crate::tag::LockTag;

/// The transaction-owned acquisition counts of one backend at a savepoint: (tag, mode, count)
/// for every lock held, in no particular order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct XactLockMark(Vec<(LockTag, LockMode, u32)>);

impl Backend {
    /// Records the transaction-owned acquisitions held now (at `DefineSavepoint` /
    /// `StartSubTransaction`), for [`release_since`](Self::release_since).
    pub fn xact_lock_mark(&self) -> XactLockMark {
        XactLockMark(
            self.local.iter().filter(|(_, _, l)| l.xact > 0).map(|(t, m, l)| (t, m, l.xact)).collect(),
        )
    }

    /// `LockReleaseCurrentOwner` of an aborting subtransaction: releases every
    /// transaction-owned acquisition made since `mark` was taken (the count above the marked
    /// one, or all of it for a lock not held then), waking waiters that can then proceed.
    /// Returns how many acquisitions were released.
    pub fn release_since(&mut self, mark: &XactLockMark) -> usize {
        let now: Vec<(LockTag, LockMode, u32)> =
            self.local.iter().filter(|(_, _, l)| l.xact > 0).map(|(t, m, l)| (t, m, l.xact)).collect();
        let mut released = 0;
        for (tag, mode, count) in now {
            let before = mark.0.iter().find(|(t, m, _)| *t == tag && *m == mode).map_or(0, |x| x.2);
            for _ in before..count {
                if self.unlock(tag, mode, false) {
                    released += 1;
                }
            }
        }
        released
    }
}
