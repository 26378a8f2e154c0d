//! Sessions: one [`Session`] per backend attached to the [`Engine`], running statements
//! (`SELECT` by key, with or without a row lock; `UPDATE` by key; an `INSERT` into history)
//! through every subsystem. The write path (updates, row locks, history inserts) is in
//! `update.rs`; this file holds the session, its transaction control and its reads.
//!
//! A transaction takes its VXID lock (eager or on demand), relation locks per statement (fast
//! path or main table), a snapshot per statement (READ COMMITTED), pins and locks buffers to
//! walk the B-tree and the heap, checks visibility against CLOG, assigns an xid on its first
//! write under XidGenLock, writes WAL for every change and for its commit, flushes it per
//! `synchronous_commit`, sets its CLOG status (possibly through the group update), clears
//! itself from the ProcArray by the configured strategy, and releases its locks: the order of
//! `CommitTransaction` in `src/backend/access/transam/xact.c`.
//!
//! Updates follow PostgreSQL at READ COMMITTED (`heap_update`, `ExecUpdate` with
//! `EvalPlanQual`): find the version the statement's snapshot sees; if another in-progress
//! transaction has already set its xmax, take that version's heavyweight tuple lock
//! (`heap_acquire_tuplock`), wait on that transaction's xid lock in lmgr and try again; if a
//! committed transaction has, retry on the newest committed version, first waiting on the
//! committer's xid lock if a fresh snapshot still shows it running (committed in CLOG but not
//! yet out of the ProcArray), so that a retry never loops on snapshots.
//!
//! Every error path ends the transaction: [`Session::commit`] and [`Session::rollback`] clear
//! the ProcArray entry, release every lock and wake the waiters even when WAL or CLOG fails. The new version goes on
//! the same page when it fits (a HOT update, no index entry), after an opportunistic prune
//! under a conditional cleanup lock when the page is nearly full; otherwise on another page
//! with a new index entry. Row locks of several `FOR SHARE` lockers are shared through a
//! MultiXact in xmax ([`crate::multixact`]); an updater of such a row waits for each running
//! member (`MultiXactIdWait`). Departure: the retry takes a fresh snapshot and
//! re-reads the row through the index instead of following the ctid chain, which gives the same
//! result for single-row updates by key.
//!
//! When the cleanup lock is busy the hot row moves to another page by a non-HOT update. A
//! look-up visits every index entry of its key, as PostgreSQL's scan does (not only up to the
//! visible version), and removes each entry whose whole HOT chain is dead to every snapshot
//! (the effect of `_bt_killitems`), tries to prune that page and remembers it; non-HOT versions go
//! to remembered pages (pruned first) before the relation is extended, a small stand-in for
//! the free space map and the pages autovacuum would visit.

//!
//! Transaction phases are `tracing` spans at trace level (`statement`, `snapshot`,
//! `assign_xid`, `commit` with `wal_commit` and `clog_commit`, `procarray_end`,
//! `release_locks`); `RUST_LOG=lockstack_engine=trace lockstack pgbench ...` prints them.

use lockstack_common::sync::Ordering;
use std::sync::Arc;

use lockstack_bufmgr::page::{self, LpFlags};
use lockstack_bufmgr::vm::{VISIBILITYMAP_ALL_FROZEN, VISIBILITYMAP_ALL_VISIBLE, VmBuffer};
use lockstack_bufmgr::{BackendBuffers, ForkNumber, LwLockMode};
use lockstack_clog::XidStatus;
use lockstack_common::{AttachedBackend, BackendId, BlockNumber, TransactionId};
use lockstack_lmgr::{LockMode, LockOptions, LockTag};
use lockstack_procarray::{Snapshot, xid_in_mvcc_snapshot};
use lockstack_xlog::{Record, WalBackend};

use crate::btree::Tid;
use crate::heap::tuple::{self, HEAP_ONLY_TUPLE, PruneOracle, Row};
use crate::heap::visibility::{self, TupleXactInfo, VisibilityContext, XidState};
use crate::multixact::{MultiXactId, MultiXactMember, MultiXactStatus};
use crate::tables::{self, TableId};

use crate::engine::{Engine, FREE_PAGES_MAX, FREE_PAGES_TRIES};
use crate::error::EngineError;

mod rowlock;
mod subxact;
mod update;
mod user;

pub use rowlock::{RowLockStrength, WaitPolicy};
pub use user::{NewValues, RowChange, RowPredicate, RowQuery};

/// A SQL-level error message as the engine's error (the user tables' statements and row locks).
fn sql_err(m: String) -> EngineError {
    EngineError::Sql(m)
}

/// Resource manager ids in WAL records (PostgreSQL's `RM_XACT_ID`, `RM_HEAP_ID`).
const RM_XACT: u8 = 1;
const RM_HEAP: u8 = 10;
const XLOG_XACT_COMMIT: u8 = 0x00;
const XLOG_XACT_ABORT: u8 = 0x20;
const XLOG_HEAP_INSERT: u8 = 0x00;
const XLOG_HEAP_DELETE: u8 = 0x10;
const XLOG_HEAP_UPDATE: u8 = 0x20;
const XLOG_HEAP_HOT_UPDATE: u8 = 0x40;
const XLOG_HEAP_LOCK: u8 = 0x60;

/// One backend's connection: its handles on every subsystem and its transaction state.
pub struct Session {
    engine: Arc<Engine>,
    id: BackendId,
    pa: lockstack_procarray::Backend,
    lm: lockstack_lmgr::Backend,
    bb: BackendBuffers,
    wal: WalBackend,
    _attached: Option<AttachedBackend>,
    in_xact: bool,
    xid: TransactionId,
    cid: u32,
    snapshot: Snapshot,
    tids: Vec<Tid>,
    vmbuf: VmBuffer,
    /// Open subtransactions, outermost first (`SAVEPOINT`; `subxact.rs`).
    subxacts: Vec<subxact::SubXact>,
    /// This transaction's subxids that have not been rolled back, in assignment order.
    live_subxids: Vec<TransactionId>,
    /// `REPEATABLE READ`: one snapshot for the whole transaction (`IsolationUsesXactSnapshot`).
    repeatable_read: bool,
    /// Whether this transaction has taken its snapshot (read by REPEATABLE READ only).
    xact_snapshot_taken: bool,
}

struct VisCtx<'a> {
    snap: &'a Snapshot,
    engine: &'a Engine,
    xid: TransactionId,
    /// The transaction's live subxids (empty outside savepoints).
    subxids: &'a [TransactionId],
    cid: u32,
}

impl VisibilityContext for VisCtx<'_> {
    fn in_snapshot(&self, xid: TransactionId) -> bool {
        // pg_subtrans errors (I/O in file mode) count as "still running": the conservative
        // answer hides the row rather than showing one that may not be committed.
        xid_in_mvcc_snapshot(xid, self.snap, &*self.engine.subtrans).unwrap_or(true)
    }
    fn xid_state(&self, xid: TransactionId) -> XidState {
        match self.engine.clog.get_status(xid) {
            Ok((XidStatus::Committed, lsn)) => XidState::Committed { lsn },
            Ok((XidStatus::Aborted, _)) => XidState::Aborted,
            _ => XidState::InProgress,
        }
    }
    fn wal_flushed(&self, lsn: u64) -> bool {
        self.engine.wal.flushed_upto().0 >= lsn
    }
    fn my_xid(&self) -> TransactionId {
        self.xid
    }
    fn is_current_xid(&self, xid: TransactionId) -> bool {
        xid.is_valid() && (xid == self.xid || self.subxids.contains(&xid))
    }
    fn my_cid(&self) -> u32 {
        self.cid
    }
}

struct Pruner<'a> {
    engine: &'a Engine,
    horizon: TransactionId,
}

impl PruneOracle for Pruner<'_> {
    fn committed(&self, xid: TransactionId) -> bool {
        matches!(self.engine.clog.get_status(xid), Ok((XidStatus::Committed, _)))
    }
    fn aborted(&self, xid: TransactionId) -> bool {
        matches!(self.engine.clog.get_status(xid), Ok((XidStatus::Aborted, _)))
    }
    fn oldest_xmin(&self) -> TransactionId {
        self.horizon
    }
}

/// The row-locking clause of a `SELECT` on pgbench's tables (`LockClauseStrength`,
/// `src/include/nodes/lockoptions.h`, PostgreSQL 9.3+). A plain read takes AccessShareLock on
/// the table; a locking one RowShareLock and a row lock of the clause's
/// [`RowLockStrength`] in the tuple's xmax (the same strengths, conflict table and wait as on
/// user tables).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockClauseStrength {
    /// `LCS_NONE`: a plain read, no row lock.
    None,
    /// `LCS_FORKEYSHARE`: `FOR KEY SHARE` (blocks only `FOR UPDATE`, key updates and deletes).
    ForKeyShare,
    /// `LCS_FORSHARE`: `FOR SHARE` (a shared row lock, a MultiXact when several hold it).
    ForShare,
    /// `LCS_FORNOKEYUPDATE`: `FOR NO KEY UPDATE` (exclusive, but lets `FOR KEY SHARE` in).
    ForNoKeyUpdate,
    /// `LCS_FORUPDATE`: `FOR UPDATE` (an exclusive row lock).
    ForUpdate,
}

impl LockClauseStrength {
    /// The tuple-lock strength the clause takes (`ExecInitLockRows` choosing the
    /// `LockTupleMode`), `None` for a plain read.
    pub fn row_lock(self) -> Option<RowLockStrength> {
        match self {
            LockClauseStrength::None => None,
            LockClauseStrength::ForKeyShare => Some(RowLockStrength::KeyShare),
            LockClauseStrength::ForShare => Some(RowLockStrength::Share),
            LockClauseStrength::ForNoKeyUpdate => Some(RowLockStrength::NoKeyUpdate),
            LockClauseStrength::ForUpdate => Some(RowLockStrength::Update),
        }
    }
}

fn now_us() -> i64 {
    lockstack_common::sync::time::system_now_us()
}

impl Engine {
    /// Attaches backend `id` (a client thread).
    ///
    /// # Errors
    /// If `id` is out of range or already attached.
    pub fn session(self: &Arc<Self>, id: BackendId) -> Result<Session, EngineError> {
        if id.index() >= self.cfg.max_backends {
            return Err(EngineError::Usage(format!(
                "backend {id} out of range 0..{}",
                self.cfg.max_backends
            )));
        }
        // A thread publishes wait events for one backend; a second session on the same thread
        // (tests, the isolation runner's driver) publishes nowhere.
        let attached =
            lockstack_common::backend::current_backend().is_none().then(|| self.backends.attach(id));
        let usage = |e: lockstack_common::AttachError| EngineError::Usage(e.to_string());
        let pa = self.procarray.attach(id).map_err(usage)?;
        let lm = self.lmgr.attach(id).map_err(usage)?;
        let bb = self.pool.attach(id).map_err(usage)?;
        let wal = self.wal.attach(id).map_err(usage)?;
        Ok(Session {
            engine: Arc::clone(self),
            id,
            pa,
            lm,
            bb,
            wal,
            _attached: attached,
            in_xact: false,
            xid: TransactionId::INVALID,
            cid: 0,
            snapshot: Snapshot::default(),
            tids: Vec::new(),
            vmbuf: VmBuffer::new(),
            subxacts: Vec::new(),
            live_subxids: Vec::new(),
            repeatable_read: false,
            xact_snapshot_taken: false,
        })
    }
}

impl Session {
    /// This backend's id.
    pub fn id(&self) -> BackendId {
        self.id
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// True inside an explicit transaction block.
    pub fn in_transaction(&self) -> bool {
        self.in_xact
    }

    /// This session's (`deadlock_timeout`, `lock_timeout`); new sessions start with the
    /// engine's `lmgr` configuration (`--set lmgr.deadlock_timeout` / `lmgr.lock_timeout`).
    pub fn lock_timeouts(&self) -> (std::time::Duration, Option<std::time::Duration>) {
        (self.lm.deadlock_timeout(), self.lm.lock_timeout())
    }

    /// `SET deadlock_timeout`: how long this session waits on a heavyweight lock (a row's
    /// xid or tuple lock, a relation lock) before it runs the deadlock detector (lmgr's
    /// `Backend::set_deadlock_timeout`; PostgreSQL's default, and the engine's, is 1 s).
    pub fn set_deadlock_timeout(&mut self, t: std::time::Duration) {
        self.lm.set_deadlock_timeout(t);
    }

    /// `BEGIN`: starts a transaction block (VXID, and its lock when VXID locks are eager).
    pub fn begin(&mut self) {
        if !self.in_xact {
            self.start_xact();
        }
        self.in_xact = true;
    }

    /// `BEGIN ISOLATION LEVEL REPEATABLE READ` (after [`Session::begin`], before the block's
    /// first statement): the first statement's snapshot serves the whole transaction, and a
    /// row that a transaction invisible to it has updated or deleted cannot be locked, updated
    /// or deleted ("could not serialize access due to concurrent update"; PostgreSQL 9.1+'s
    /// REPEATABLE READ, `IsolationUsesXactSnapshot`). The level ends with the transaction.
    pub fn set_repeatable_read(&mut self) {
        self.repeatable_read = true;
    }

    /// Whether the current transaction is `REPEATABLE READ`.
    pub fn is_repeatable_read(&self) -> bool {
        self.repeatable_read
    }

    fn start_xact(&mut self) {
        self.xact_snapshot_taken = false;
        self.lm.start_transaction();
        self.pa.start_transaction();
        self.xid = TransactionId::INVALID;
        self.cid = 0;
    }

    /// Runs `f` as one statement: inside the current block, or as its own transaction.
    fn statement<R>(
        &mut self,
        f: impl FnOnce(&mut Session) -> Result<R, EngineError>,
    ) -> Result<R, EngineError> {
        let implicit = !self.in_xact;
        if implicit {
            self.start_xact();
            self.in_xact = true;
        }
        let span = tracing::trace_span!("statement", backend = self.id.0, cid = self.cid).entered();
        if !(self.repeatable_read && self.xact_snapshot_taken) {
            let _s = tracing::trace_span!("snapshot").entered();
            self.take_snapshot();
            self.xact_snapshot_taken = true;
        }
        let r = f(self);
        drop(span);
        self.cid += 1;
        if implicit {
            match &r {
                // A failed commit has already ended the transaction (aborted).
                Ok(_) => self.commit()?,
                // The statement's error is the one to report; the rollback ends the
                // transaction (releasing its locks) even when it fails itself.
                Err(_) => {
                    let _ = self.rollback();
                }
            }
        }
        r
    }

    fn take_snapshot(&mut self) {
        let Snapshot { xmin, xmax, xip, subxip, suboverflowed, xact_completion_count } =
            self.pa.get_snapshot_data();
        // Field by field into the session's copy, reusing its arrays (PostgreSQL allocates a
        // snapshot's xip array once per backend); the derived `clone_from` would allocate.
        let d = &mut self.snapshot;
        d.xmin = *xmin;
        d.xmax = *xmax;
        d.xip.clear();
        d.xip.extend_from_slice(xip);
        d.subxip.clear();
        d.subxip.extend_from_slice(subxip);
        d.suboverflowed = *suboverflowed;
        d.xact_completion_count = *xact_completion_count;
    }

    fn ensure_xid(&mut self) -> Result<TransactionId, EngineError> {
        if !self.xid.is_valid() {
            let _s = tracing::trace_span!("assign_xid").entered();
            let xid = self.pa.try_assign_xid()?;
            self.lm.xact_lock_table_insert(xid)?;
            self.xid = xid;
        }
        if !self.subxacts.is_empty() {
            self.assign_subxids()?;
            return Ok(self.cur_xid());
        }
        Ok(self.xid)
    }

    fn lock_table(&mut self, t: TableId, mode: LockMode) -> Result<(), EngineError> {
        self.lm.lock_relation(t.heap_oid(), mode)?;
        if let Some(i) = t.index_oid() {
            self.lm.lock_relation(i, mode)?;
        }
        Ok(())
    }

    fn vis<'a>(&'a self, snap: &'a Snapshot) -> VisCtx<'a> {
        VisCtx { snap, engine: &self.engine, xid: self.xid, subxids: &self.live_subxids, cid: self.cid }
    }

    /// Finds the version of `key` visible to the statement's snapshot: (TID, columns, whether
    /// its page is worth pruning: a prune hint is set and free space is under 10%, the test of
    /// `heap_page_prune_opt`).
    ///
    /// Like PostgreSQL's equality index scan (`index_getnext_slot` until the key's entries run
    /// out, `heapam_index_fetch_tuple` and `heap_hot_search_buffer` for each), it visits every
    /// index entry of the key, also after the visible version, and removes the entries whose
    /// whole HOT chain is dead to every snapshot (`kill_prior_tuple`, `_bt_killitems`).
    fn fetch_visible(&mut self, t: TableId, key: i64) -> Result<Option<(Tid, Row, bool)>, EngineError> {
        let index = self
            .engine
            .table(t)
            .index
            .as_ref()
            .ok_or_else(|| EngineError::Usage(format!("{} has no key", t.name())))?;
        self.tids.clear();
        index.lookup(&self.bb, key, &mut self.tids)?;
        let rel = t.heap_oid();
        let mut horizon: Option<TransactionId> = None;
        let mut dead: Vec<Tid> = Vec::new();
        let mut result = None;
        for i in 0..self.tids.len() {
            let tid = self.tids[i];
            let buf = self.bb.read_block(rel, BlockNumber(tid.block))?;
            // The page header and the line pointer are independent misses: start both now.
            let lp = page::SIZE_OF_PAGE_HEADER + usize::from(tid.offset.max(1) - 1) * page::SIZE_OF_ITEM_ID;
            self.bb.prefetch(buf, 0..1);
            self.bb.prefetch(buf, lp..lp + page::SIZE_OF_ITEM_ID);
            let g = self.bb.lock(buf, LwLockMode::Shared);
            let ctx = self.vis(&self.snapshot);
            // Every entry is fetched, also after the visible version: PostgreSQL's executor
            // asks the index scan for the next tuple until the key's entries run out (it does
            // not know that at most one version is visible), and each fetch may kill its entry.
            let found = tuple::hot_search(g.page(), tid.offset, |_, tup| {
                let h = tuple::header(tup);
                tuple::column(tup, 0) == key && visibility::satisfies_mvcc(&h.xact, &ctx).visible
            });
            if found.is_none() {
                // Nothing visible here: if nothing ever can be again, the index entry is dead
                // (`heap_hot_search_buffer`'s all_dead, which lets the scan kill the entry).
                let h = *horizon.get_or_insert_with(|| self.engine.procarray.get_oldest_xmin());
                let pr = Pruner { engine: &self.engine, horizon: h };
                if tuple::chain_all_dead(g.page(), tid.offset, &pr) {
                    dead.push(tid);
                }
            }
            let out = found.filter(|_| result.is_none()).map(|off| {
                let p = g.page();
                let tup = page::get_item(p, off).expect("hot_search returns only offsets of LP_NORMAL line pointers, and the page is still locked");
                let prunable = page::prune_xid(p) != 0 && page::free_space(p) < page::BLCKSZ / 10;
                (Tid { block: tid.block, offset: off }, tuple::row(tup), prunable)
            });
            drop(g);
            self.bb.release(buf);
            // A key has at most one version visible to an MVCC snapshot; keep the first.
            if out.is_some() {
                result = out;
            }
        }
        if !dead.is_empty() {
            let engine = Arc::clone(&self.engine);
            let index = engine.table(t).index.as_ref().expect(
                "the index was looked up at the top of this function, and a table's index never goes away",
            );
            for tid in dead {
                index.delete(&self.bb, key, tid)?;
                let buf = self.bb.read_block(rel, BlockNumber(tid.block))?;
                // Pruned now or not (the cleanup lock may be busy), the page holds space that
                // no index entry leads to any more: remember it.
                self.prune_opt(buf);
                // The LP_DEAD root stays: turning it LP_UNUSED would let its TID be reused
                // while another backend that saw the old entry still means to kill it (VACUUM
                // avoids that with its cleanup-lock protocol on the index, which we do not have).
                self.bb.release(buf);
                self.engine.note_free_page(t, tid.block);
            }
        }
        Ok(result)
    }

    /// `SELECT cols FROM t WHERE key = k [FOR KEY SHARE|FOR SHARE|FOR NO KEY UPDATE|FOR UPDATE]`:
    /// the visible row's columns.
    ///
    /// # Errors
    /// Lock errors (deadlock, timeout) while waiting for a row lock; buffer errors.
    pub fn select(
        &mut self,
        t: TableId,
        key: i64,
        lock: LockClauseStrength,
    ) -> Result<Option<Row>, EngineError> {
        self.select_with(t, key, lock, WaitPolicy::Block)
    }

    /// [`Session::select`] with a wait policy for its row lock: `NOWAIT` fails with `could not
    /// obtain lock on row in relation "t"` and `SKIP LOCKED` returns no row where the tuple
    /// lock or a holder of the row would make it wait (a plain read ignores the policy).
    ///
    /// # Errors
    /// As [`Session::select`], and NOWAIT's error.
    pub fn select_with(
        &mut self,
        t: TableId,
        key: i64,
        lock: LockClauseStrength,
        wait: WaitPolicy,
    ) -> Result<Option<Row>, EngineError> {
        self.top_level_only("a statement on pgbench's tables")?;
        self.statement(|s| {
            let Some(strength) = lock.row_lock() else {
                s.lock_table(t, LockMode::AccessShare)?;
                return Ok(s.fetch_visible(t, key)?.map(|(_, cols, _)| cols));
            };
            s.lock_table(t, LockMode::RowShare)?;
            s.modify_row(t, key, |_| Ok(None), Some(strength), wait)
        })
    }

    /// `COMMIT` / `END` (also ends an implicit single-statement transaction).
    ///
    /// The transaction has ended when this returns, with or without an error: its locks are
    /// released and its waiters woken (locking rule: a backend never stops, or returns an
    /// error to its caller, with a transaction whose xid lock others may wait on still open).
    /// If the commit record cannot be inserted or flushed, the transaction is aborted instead
    /// (PostgreSQL errors out of `RecordTransactionCommit` before its critical section and
    /// `AbortTransaction` runs; a write error inside `XLogFlush` is a PANIC there, which ends
    /// every backend and so every transaction).
    ///
    /// # Errors
    /// WAL errors (the transaction was aborted), CLOG errors (the transaction ended with its
    /// status unrecorded).
    pub fn commit(&mut self) -> Result<(), EngineError> {
        if !self.in_xact {
            return Ok(());
        }
        let _span = tracing::trace_span!("commit", backend = self.id.0, xid = self.xid.0).entered();
        if self.xid.is_valid() {
            let wal = {
                let _s = tracing::trace_span!("wal_commit").entered();
                self.wal
                    .insert(&Record {
                        rmid: RM_XACT,
                        info: XLOG_XACT_COMMIT,
                        xid: self.xid,
                        data: &now_us().to_le_bytes(),
                    })
                    .and_then(|lsn| self.wal.commit(lsn).map(|()| lsn))
            };
            let lsn = match wal {
                Ok(lsn) => lsn,
                Err(e) => {
                    // Not durable: abort (the abort record cannot be written either, but
                    // CLOG, the ProcArray and the locks are set right all the same).
                    let _ = self.rollback();
                    return Err(e.into());
                }
            };
            let _s = tracing::trace_span!("clog_commit").entered();
            let clog = self.engine.clog.set_tree_status_as(
                Some(self.id),
                self.xid,
                &self.live_subxids,
                XidStatus::Committed,
                lsn.0,
            );
            if let Err(e) = clog {
                self.finish();
                return Err(e.into());
            }
        }
        let xid = self.xid;
        self.finish();
        self.engine.truncate_subtrans_if_due(xid)
    }

    /// `ROLLBACK` / `ABORT`: marks the xid aborted; nothing is undone physically.
    ///
    /// The transaction has ended when this returns, with or without an error (as
    /// `AbortTransaction` always reaches `ProcArrayEndTransaction` and `LockReleaseAll`): a
    /// failed abort record (a full disk, a poisoned WAL) still marks the xid aborted in CLOG,
    /// and a failed CLOG update still clears the ProcArray entry, releases the locks and wakes
    /// the waiters. The abort record is not flushed, as in `RecordTransactionAbort`.
    ///
    /// # Errors
    /// The first WAL or CLOG error.
    pub fn rollback(&mut self) -> Result<(), EngineError> {
        if !self.in_xact {
            return Ok(());
        }
        let mut first: Option<EngineError> = None;
        if self.xid.is_valid() {
            let rec = Record { rmid: RM_XACT, info: XLOG_XACT_ABORT, xid: self.xid, data: &[] };
            let lsn = match self.wal.insert(&rec) {
                Ok(lsn) => lsn.0,
                Err(e) => {
                    first = Some(e.into());
                    0
                }
            };
            if let Err(e) = self.engine.clog.set_tree_status_as(
                Some(self.id),
                self.xid,
                &self.live_subxids,
                XidStatus::Aborted,
                lsn,
            ) {
                first.get_or_insert(e.into());
            }
        }
        let xid = self.xid;
        self.finish();
        let truncated = self.engine.truncate_subtrans_if_due(xid);
        first.map_or(truncated, Err)
    }

    fn finish(&mut self) {
        {
            let _s = tracing::trace_span!("procarray_end").entered();
            self.pa.end_transaction();
        }
        // AtEOXact_MultiXact: our xid is no longer in progress, so no multi we belong to can
        // make anyone wait for us; the oldest-member horizon may move past us.
        self.engine.multixact.at_eoxact(self.id);
        let _s = tracing::trace_span!("release_locks").entered();
        self.lm.release_all(false);
        self.lm.end_transaction();
        self.vmbuf.release(&self.bb);
        // Error paths may leave pins behind; a transaction end drops them all, as
        // PostgreSQL's resource owner does.
        self.bb.release_all();
        self.in_xact = false;
        self.xid = TransactionId::INVALID;
        self.cid = 0;
        self.subxacts.clear();
        self.live_subxids.clear();
        self.repeatable_read = false;
        self.xact_snapshot_taken = false;
    }

    /// Sums a table's rows visible to a fresh snapshot (for the consistency checks).
    ///
    /// # Errors
    /// Buffer errors.
    pub fn table_sums(&mut self, t: TableId) -> Result<tables::TableSums, EngineError> {
        self.statement(|s| {
            s.lock_table(t, LockMode::AccessShare)?;
            let snap = s.snapshot.clone();
            let ctx = s.vis(&snap);
            let sums = tables::scan_sums(&s.bb, t, |tup| {
                visibility::satisfies_mvcc(&tuple::header(tup).xact, &ctx).visible
            })?;
            Ok(sums)
        })
    }
}

#[cfg(test)]
mod tests;
