//! Subtransactions: `SAVEPOINT`, `ROLLBACK TO SAVEPOINT` and `RELEASE SAVEPOINT` inside a
//! transaction block (`DefineSavepoint`, `RollbackToSavepoint`, `ReleaseSavepoint`,
//! `AssignTransactionId`, `AbortSubTransaction` and `CommitSubTransaction` in
//! `src/backend/access/transam/xact.c`, PostgreSQL 8.0-18), and `XactLockTableWait`'s walk up
//! pg_subtrans (`src/backend/storage/lmgr/lmgr.c`).
//!
//! A subtransaction gets its own xid only when it first writes or locks a row; its parents get
//! theirs first, and each subxid's parent goes into pg_subtrans (`SubTransSetParent`) before
//! the xid is used. The subxid is published in the ProcArray's subxid cache (or overflows it)
//! and takes its own transaction lock, which row lockers wait on. `ROLLBACK TO` marks the
//! aborted subxids aborted in CLOG (an abort record first, not flushed), removes them from the
//! ProcArray, and releases every heavyweight lock taken since the savepoint, its subxids' own
//! locks among them; the savepoint stays defined. `RELEASE` forgets the savepoint and keeps
//! what it did: its subxids stay running and are committed or aborted with the top-level xid,
//! in one `TransactionIdSetTreeStatus` call.
//!
//! Departure: user tables only. pgbench's statements refuse to run inside a subtransaction
//! (their row-lock paths know only the top-level xid); `SET` values and `CREATE` / `DROP
//! TABLE` are not undone by `ROLLBACK TO` (the front end refuses what it cannot undo).

use lockstack_clog::XidStatus;
use lockstack_common::TransactionId;
use lockstack_lmgr::XactLockMark;
use lockstack_xlog::Record;

use super::{RM_XACT, Session, XLOG_XACT_ABORT};
use crate::error::EngineError;

/// One open subtransaction (a `TransactionState` below the top level).
#[derive(Debug)]
pub(super) struct SubXact {
    /// The savepoint's name as the front end wrote it (compared exactly).
    name: String,
    /// Its xid, invalid until it first writes or locks a row.
    pub(super) xid: TransactionId,
    /// `Session::live_subxids.len()` when it started (or was rolled back to): the subxids after
    /// that index were assigned inside it, except the lazily assigned xids of its ancestors.
    first_subxid: usize,
    /// The transaction-owned heavyweight locks held when it started.
    locks: XactLockMark,
}

impl Session {
    /// `SAVEPOINT name`: starts a subtransaction inside the current transaction block. A
    /// name may repeat; the newest savepoint of a name is the one `ROLLBACK TO` and `RELEASE`
    /// find.
    ///
    /// # Errors
    /// [`EngineError::Sql`] outside a transaction block (PostgreSQL: "SAVEPOINT can only be
    /// used in transaction blocks").
    pub fn savepoint(&mut self, name: &str) -> Result<(), EngineError> {
        if !self.in_xact {
            return Err(EngineError::Sql("SAVEPOINT can only be used in transaction blocks".into()));
        }
        self.subxacts.push(SubXact {
            name: name.to_string(),
            xid: TransactionId::INVALID,
            first_subxid: self.live_subxids.len(),
            locks: self.lm.xact_lock_mark(),
        });
        Ok(())
    }

    /// `ROLLBACK TO [SAVEPOINT] name`: aborts the newest subtransaction of that name and every
    /// one inside it, then starts it again (the savepoint stays defined). Their subxids are
    /// marked aborted in CLOG and leave the ProcArray, so their row locks and updates no longer
    /// count; the heavyweight locks taken since the savepoint, their xid locks included, are
    /// released and their waiters woken.
    ///
    /// # Errors
    /// [`EngineError::Sql`] outside a transaction block or if no savepoint has that name
    /// (nothing is changed then); a WAL, CLOG or ProcArray error after the locks were released
    /// (the subtransaction is gone all the same).
    pub fn rollback_to_savepoint(&mut self, name: &str) -> Result<(), EngineError> {
        let i = self.find_savepoint(name, "ROLLBACK TO SAVEPOINT")?;
        self.abort_subxacts_from(i)
    }

    /// `RELEASE [SAVEPOINT] name`: ends the newest subtransaction of that name and every one
    /// inside it, keeping what they did: their subxids, row locks and heavyweight locks now
    /// belong to the enclosing (sub)transaction, until it commits or aborts.
    ///
    /// # Errors
    /// [`EngineError::Sql`] outside a transaction block or if no savepoint has that name.
    pub fn release_savepoint(&mut self, name: &str) -> Result<(), EngineError> {
        let i = self.find_savepoint(name, "RELEASE SAVEPOINT")?;
        self.subxacts.truncate(i);
        Ok(())
    }

    /// `AbortSubTransaction` after an error inside a subtransaction: aborts the innermost one
    /// as [`rollback_to_savepoint`](Self::rollback_to_savepoint) of its name would (its
    /// savepoint stays defined, for the `ROLLBACK TO` the client must send next). Does nothing
    /// at the top level.
    ///
    /// # Errors
    /// As [`rollback_to_savepoint`](Self::rollback_to_savepoint) after the locks were released.
    pub fn abort_innermost_subxact(&mut self) -> Result<(), EngineError> {
        match self.subxacts.len() {
            0 => Ok(()),
            n => self.abort_subxacts_from(n - 1),
        }
    }

    /// How many subtransactions are open (0 at the top level or outside a transaction).
    pub fn subxact_depth(&self) -> usize {
        self.subxacts.len()
    }

    fn find_savepoint(&self, name: &str, what: &str) -> Result<usize, EngineError> {
        if !self.in_xact {
            return Err(EngineError::Sql(format!("{what} can only be used in transaction blocks")));
        }
        self.subxacts
            .iter()
            .rposition(|s| s.name == name)
            .ok_or_else(|| EngineError::Sql(format!("savepoint \"{name}\" does not exist")))
    }

    /// `AbortSubTransaction` of subtransaction `i` and those inside it, then its restart.
    fn abort_subxacts_from(&mut self, i: usize) -> Result<(), EngineError> {
        let ancestors: Vec<TransactionId> = self.subxacts[..i].iter().map(|s| s.xid).collect();
        let aborted: Vec<TransactionId> = self.live_subxids[self.subxacts[i].first_subxid..]
            .iter()
            .copied()
            .filter(|x| !ancestors.contains(x))
            .collect();
        let mut first: Option<EngineError> = None;
        if let Some(&head) = aborted.first() {
            // RecordTransactionAbort(isSubXact): an abort record naming the subxids, not
            // flushed, then TransactionIdAbortTree; then XidCacheRemoveRunningXids.
            let data: Vec<u8> = aborted.iter().flat_map(|x| x.0.to_le_bytes()).collect();
            let lsn = match self.wal.insert(&Record {
                rmid: RM_XACT,
                info: XLOG_XACT_ABORT,
                xid: head,
                data: &data,
            }) {
                Ok(lsn) => lsn.0,
                Err(e) => {
                    first = Some(e.into());
                    0
                }
            };
            if let Err(e) = self.engine.clog.set_tree_status_as(
                Some(self.id),
                head,
                &aborted[1..],
                XidStatus::Aborted,
                lsn,
            ) {
                first.get_or_insert(e.into());
            }
            if let Err(e) = self.pa.abort_subxids(&aborted) {
                first.get_or_insert(e.into());
            }
            self.live_subxids.retain(|x| !aborted.contains(x));
        }
        // LockReleaseCurrentOwner: the subtransactions' heavyweight locks, their xid locks
        // among them, so that their waiters wake now.
        let mark = std::mem::take(&mut self.subxacts[i].locks);
        self.lm.release_since(&mark);
        self.subxacts.truncate(i + 1);
        let s = &mut self.subxacts[i];
        s.xid = TransactionId::INVALID;
        s.first_subxid = self.live_subxids.len();
        s.locks = mark;
        first.map_or(Ok(()), Err)
    }

    /// The xid this (sub)transaction writes with: the innermost open subtransaction's, or the
    /// top level's (either may still be invalid).
    pub(super) fn cur_xid(&self) -> TransactionId {
        self.subxacts.last().map_or(self.xid, |s| s.xid)
    }

    /// `TransactionIdIsCurrentTransactionId`: the top-level xid or a subxid of this
    /// transaction that has not been rolled back.
    pub(super) fn is_current_xid(&self, xid: TransactionId) -> bool {
        xid.is_valid() && (xid == self.xid || self.live_subxids.contains(&xid))
    }

    /// `AssignTransactionId` for every open subtransaction without an xid, outermost first
    /// (the top level's xid is assigned before). Each subxid's parent goes into pg_subtrans
    /// before its xid lock is taken.
    pub(super) fn assign_subxids(&mut self) -> Result<(), EngineError> {
        for i in 0..self.subxacts.len() {
            if self.subxacts[i].xid.is_valid() {
                continue;
            }
            let parent = if i == 0 { self.xid } else { self.subxacts[i - 1].xid };
            let sub = self.pa.try_assign_subxid()?;
            self.engine.subtrans.set_parent(sub, parent)?;
            self.lm.xact_lock_table_insert(sub)?;
            self.subxacts[i].xid = sub;
            self.live_subxids.push(sub);
        }
        Ok(())
    }

    /// `XactLockTableWait(xid)`: waits on `xid`'s transaction lock; if that has gone while the
    /// xid still runs (a subxid whose lock went away while its top level runs), waits for the
    /// topmost parent pg_subtrans names instead.
    ///
    /// # Errors
    /// Lock errors (deadlock, lock timeout); pg_subtrans errors.
    pub(super) fn xact_lock_table_wait(&mut self, xid: TransactionId) -> Result<(), EngineError> {
        let mut xid = xid;
        loop {
            self.lm.xact_lock_table_wait(xid)?;
            if !self.xid_running(xid) {
                return Ok(());
            }
            let top = self.engine.subtrans.get_topmost_parent(xid)?;
            if top == xid {
                return Ok(());
            }
            xid = top;
        }
    }

    /// `ConditionalXactLockTableWait(xid)`: whether `xid` (and, as in
    /// [`xact_lock_table_wait`](Self::xact_lock_table_wait), its topmost parent) has ended,
    /// without waiting.
    ///
    /// # Errors
    /// pg_subtrans errors.
    pub(super) fn conditional_xact_lock_table_wait(
        &mut self,
        xid: TransactionId,
    ) -> Result<bool, EngineError> {
        let mut xid = xid;
        loop {
            if !self.lm.conditional_xact_lock_table_wait(xid) {
                return Ok(false);
            }
            if !self.xid_running(xid) {
                return Ok(true);
            }
            let top = self.engine.subtrans.get_topmost_parent(xid)?;
            if top == xid {
                return Ok(true);
            }
            xid = top;
        }
    }

    /// Refuses a statement whose code path knows only the top-level xid (pgbench's tables)
    /// inside a subtransaction.
    pub(super) fn top_level_only(&self, what: &str) -> Result<(), EngineError> {
        if self.subxacts.is_empty() {
            Ok(())
        } else {
            Err(EngineError::Usage(format!("unsupported: {what} inside a subtransaction (SAVEPOINT)")))
        }
    }
}
