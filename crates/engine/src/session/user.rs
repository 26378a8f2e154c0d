//! Statements on user tables ([`crate::usertable`]): `CREATE TABLE`, `DROP TABLE`,
//! `INSERT ... VALUES`, and `SELECT` by sequential scan with an optional row-locking clause
//! (`FOR KEY SHARE | FOR SHARE | FOR NO KEY UPDATE | FOR UPDATE`, `NOWAIT | SKIP LOCKED`).
//!
//! Row locks follow `heap_lock_tuple` (heapam.c, PostgreSQL 9.3-18): the four tuple-lock
//! strengths and their conflict table; a transaction that wants a row another running
//! transaction holds in a conflicting strength first takes the heavyweight tuple lock
//! (`heap_acquire_tuplock`, so later waiters queue behind the first one), then waits on each
//! conflicting holder's xid; compatible lockers share the row through a MultiXact whose members
//! carry their own strengths; a row replaced by a committed update is followed along its
//! ctid to the newest version (READ COMMITTED's `EvalPlanQual` fetch), and the caller re-checks
//! its WHERE clause on that version. `NOWAIT` fails and `SKIP LOCKED` skips where a wait would
//! be needed, on the tuple lock or on the holder.
//!
//! `UPDATE` and `DELETE` follow `heap_update` / `heap_delete` with `ExecUpdate`'s READ
//! COMMITTED retry: an update that changes the primary key, and a delete, hold the row as
//! `FOR UPDATE` does (`HEAP_KEYS_UPDATED`), any other update as `FOR NO KEY UPDATE`; a row
//! being changed or locked in a conflicting strength is waited for (tuple lock, then the
//! holders' xids); a row replaced by a committed update is followed to its newest version,
//! where the WHERE clause is evaluated again. The new version of an updated row goes on the
//! table's last page (or a new one) and gets a primary-key entry; the old one's ctid points
//! at it.
//!
//! Not modelled here: subtransactions; a MultiXact with an updater member (a `FOR KEY SHARE`
//! of a row a running transaction is updating without changing its key, and such an update
//! of a row others hold `FOR KEY SHARE`, are refused as unsupported rather than run
//! differently); waiting for a concurrent inserter of the same primary key (reported as a
//! duplicate at once).

use super::update::tid_bytes;
use super::*;
use crate::btree::BTree;
use crate::usertable::{TableDef, UserTable, Value, coerce, decode_row, encode_row, index_key};

/// The strength of a row lock (`LockTupleMode`, `src/include/nodes/lockoptions.h`, 9.3+),
/// weakest first.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum RowLockStrength {
    /// `FOR KEY SHARE` (`LockTupleKeyShare`): conflicts only with `FOR UPDATE` (and key
    /// updates, deletes).
    KeyShare,
    /// `FOR SHARE` (`LockTupleShare`): conflicts with `FOR NO KEY UPDATE` and stronger.
    Share,
    /// `FOR NO KEY UPDATE` (`LockTupleNoKeyExclusive`; also a non-key `UPDATE`): conflicts
    /// with `FOR SHARE` and stronger.
    NoKeyUpdate,
    /// `FOR UPDATE` (`LockTupleExclusive`; also `DELETE` and key updates): conflicts with all.
    Update,
}

impl RowLockStrength {
    /// Whether a holder in `self` blocks a request in `other`: PostgreSQL's documented
    /// row-level lock conflict table (explicit-locking.html, "Conflicting Row-Level Locks").
    pub fn conflicts_with(self, other: RowLockStrength) -> bool {
        use RowLockStrength::*;
        !matches!(
            (self, other),
            (KeyShare, KeyShare | Share | NoKeyUpdate) | (Share | NoKeyUpdate, KeyShare) | (Share, Share)
        )
    }

    /// The heavyweight mode of the tuple lock for this strength (`tupleLockExtraInfo`,
    /// heapam.c 9.3-18): AccessShare, RowShare, Exclusive, AccessExclusive.
    pub fn hwlock(self) -> LockMode {
        match self {
            RowLockStrength::KeyShare => LockMode::AccessShare,
            RowLockStrength::Share => LockMode::RowShare,
            RowLockStrength::NoKeyUpdate => LockMode::Exclusive,
            RowLockStrength::Update => LockMode::AccessExclusive,
        }
    }

    /// The MultiXact member status of a locker in this strength.
    fn status(self) -> MultiXactStatus {
        match self {
            RowLockStrength::KeyShare => MultiXactStatus::ForKeyShare,
            RowLockStrength::Share => MultiXactStatus::ForShare,
            RowLockStrength::NoKeyUpdate => MultiXactStatus::ForNoKeyUpdate,
            RowLockStrength::Update => MultiXactStatus::ForUpdate,
        }
    }

    /// The strength a member holds the row in (a non-key updater as `FOR NO KEY UPDATE`).
    fn of_status(s: MultiXactStatus) -> RowLockStrength {
        match s {
            MultiXactStatus::ForKeyShare => RowLockStrength::KeyShare,
            MultiXactStatus::ForShare => RowLockStrength::Share,
            MultiXactStatus::ForNoKeyUpdate | MultiXactStatus::NoKeyUpdate => RowLockStrength::NoKeyUpdate,
            MultiXactStatus::ForUpdate | MultiXactStatus::Update => RowLockStrength::Update,
        }
    }

    /// The xmax infomask bits of a lock-only xmax in this strength, and whether
    /// `HEAP_KEYS_UPDATED` goes with them (`compute_new_xmax_infomask`).
    fn bits(self) -> (u16, bool) {
        match self {
            RowLockStrength::KeyShare => (visibility::XMAX_KEYSHR_LOCK, false),
            RowLockStrength::Share => (visibility::XMAX_SHR_LOCK, false),
            RowLockStrength::NoKeyUpdate => (visibility::XMAX_EXCL_LOCK, false),
            RowLockStrength::Update => (visibility::XMAX_EXCL_LOCK, true),
        }
    }

    /// The strength a single xid's xmax holds the row in, from its infomask bits.
    fn of_xmax(infomask: u16, infomask2: u16) -> RowLockStrength {
        let keys = infomask2 & visibility::HEAP_KEYS_UPDATED != 0;
        if infomask & visibility::XMAX_LOCK_ONLY == 0 {
            return if keys { RowLockStrength::Update } else { RowLockStrength::NoKeyUpdate };
        }
        match infomask & visibility::XMAX_SHR_LOCK {
            visibility::XMAX_SHR_LOCK => RowLockStrength::Share,
            visibility::XMAX_KEYSHR_LOCK => RowLockStrength::KeyShare,
            _ if keys => RowLockStrength::Update,
            _ => RowLockStrength::NoKeyUpdate,
        }
    }
}

/// What a row lock does when it would have to wait (`LockWaitPolicy`,
/// `src/include/nodes/lockoptions.h`, 9.5+).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Wait (`LockWaitBlock`).
    Block,
    /// `SKIP LOCKED` (`LockWaitSkip`): leave the row out.
    Skip,
    /// `NOWAIT` (`LockWaitError`): fail with "could not obtain lock on row in relation".
    Error,
}

/// A `SELECT` on a user table, as far as the engine runs it: the scan, ordering, limit and
/// row-locking clause; the caller's predicate is the WHERE clause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowQuery {
    /// The table.
    pub table: String,
    /// `ORDER BY` column index and descending flag.
    pub order_by: Option<(usize, bool)>,
    /// `LIMIT n`.
    pub limit: Option<u64>,
    /// The row-locking clause and its wait policy.
    pub lock: Option<(RowLockStrength, WaitPolicy)>,
}

/// A WHERE clause: called on a row's values, with the session (it may take heavyweight
/// locks, as `pg_advisory_lock` in a WHERE clause does); true if the row qualifies.
pub type RowPredicate<'a> = dyn FnMut(&mut Session, &[Value]) -> Result<bool, EngineError> + 'a;

/// The new values of an updated row from the old ones, one per column (`None`: `DEFAULT`).
pub type NewValues<'a> = dyn Fn(&[Value]) -> Result<Vec<Option<Value>>, EngineError> + 'a;

/// What an `UPDATE` or `DELETE` does to each row it qualifies.
pub enum RowChange<'a> {
    /// `UPDATE`: the new values, one per column, computed from the version being replaced
    /// (the newest one, after a READ COMMITTED retry); `None` is `DEFAULT` (the column's
    /// default, its next serial value, or NULL).
    Update(&'a NewValues<'a>),
    /// `DELETE`.
    Delete,
}

/// How [`Session::change_tuple`] ended.
enum Changed {
    /// Updated or deleted.
    Done,
    /// Already deleted (by a committed transaction, or by this command).
    Gone,
    /// A committed update replaced it: the newest version's TID.
    Newer(Tid),
}

/// What the lock check found for the version to lock.
enum RowCheck {
    /// Free for us: stamp this xmax (ourselves alone, or a new multi of these members).
    Free(Option<Vec<MultiXactMember>>),
    /// We already hold it at least this strongly: nothing to write.
    Held,
    /// These running transactions hold it in a conflicting strength; the flag says whether
    /// we hold a lock on it ourselves (an upgrade), in which case the tuple lock is not taken
    /// (`heap_lock_tuple`'s `skip_tuple_lock`, PostgreSQL 12+): a waiter queued on the tuple
    /// lock may be waiting for us, and queueing behind it would deadlock.
    Wait(Vec<TransactionId>, bool),
    /// A committed update or delete replaced it; its ctid (itself when deleted).
    Updated(Tid),
}

/// How [`Session::lock_tuple`] ended.
enum Locked {
    /// Locked this version (the newest), with its values.
    Row(Vec<Value>),
    /// `SKIP LOCKED` left it out.
    Skipped,
    /// Deleted by a committed transaction.
    Gone,
}

fn sql_err(m: String) -> EngineError {
    EngineError::Sql(m)
}

impl Session {
    /// The user table named `name`.
    ///
    /// # Errors
    /// `relation "name" does not exist`.
    fn user_table(&self, name: &str) -> Result<Arc<UserTable>, EngineError> {
        self.engine.users.get(name).ok_or_else(|| sql_err(format!("relation \"{name}\" does not exist")))
    }

    fn lock_user_table(&mut self, t: &UserTable, mode: LockMode) -> Result<(), EngineError> {
        self.lm.lock_relation(t.heap, mode)?;
        if let Some(ix) = &t.index {
            self.lm.lock_relation(ix.rel(), mode)?;
        }
        Ok(())
    }

    /// `CREATE TABLE`: a new user table with an empty heap and, with a primary key, an empty
    /// B-tree, under AccessExclusiveLock on the new relation (held to the end of the
    /// transaction). Not transactional: a rollback does not remove it.
    ///
    /// # Errors
    /// `relation "name" already exists`; a primary key that is not one integer column
    /// (unsupported); buffer errors.
    pub fn create_table(&mut self, def: TableDef) -> Result<(), EngineError> {
        if def.columns.len() > 64 {
            return Err(sql_err("unsupported: more than 64 columns".into()));
        }
        if self.engine.users.get(&def.name).is_some() {
            return Err(sql_err(format!("relation \"{}\" already exists", def.name)));
        }
        self.statement(|s| {
            let heap = s.engine.users.new_oid();
            s.lm.lock_relation(heap, LockMode::AccessExclusive)?;
            let index = match def.primary_key {
                Some(_) => {
                    let ioid = s.engine.users.new_oid();
                    let kind = s.engine.cfg.lwlock_kind;
                    Some(BTree::build(&s.bb, ioid, std::iter::empty(), tables::INDEX_FILLFACTOR, kind)?)
                }
                None => None,
            };
            let serials = lockstack_common::sync::Mutex::new(vec![1; def.columns.len()]);
            let name = def.name.clone();
            let t = UserTable {
                def,
                heap,
                index: index.map(|ix| ix.with_search(s.engine.cfg.btree_search)),
                vm: lockstack_bufmgr::vm::VisibilityMap::new(heap),
                serials,
                insert_lock: lockstack_common::sync::Mutex::new(()),
            };
            if !s.engine.users.insert(Arc::new(t)) {
                return Err(sql_err(format!("relation \"{name}\" already exists")));
            }
            Ok(())
        })
    }

    /// `DROP TABLE name`: waits for AccessExclusiveLock on the table, then removes it from
    /// the catalog (its pages stay in the pool until evicted; OIDs are never reused).
    ///
    /// # Errors
    /// `table "name" does not exist` (unless `if_exists`); lock errors.
    pub fn drop_table(&mut self, name: &str, if_exists: bool) -> Result<(), EngineError> {
        self.statement(|s| {
            let Some(t) = s.engine.users.get(name) else {
                return if if_exists {
                    Ok(())
                } else {
                    Err(sql_err(format!("table \"{name}\" does not exist")))
                };
            };
            s.lock_user_table(&t, LockMode::AccessExclusive)?;
            s.engine.users.remove(name);
            Ok(())
        })
    }

    /// The heap relation of user table `name` (for `LOCK TABLE`).
    ///
    /// # Errors
    /// `relation "name" does not exist`.
    pub fn user_table_oid(&self, name: &str) -> Result<lockstack_common::Oid, EngineError> {
        Ok(self.user_table(name)?.heap)
    }

    /// The definition of user table `name`.
    ///
    /// # Errors
    /// `relation "name" does not exist`.
    pub fn user_table_def(&self, name: &str) -> Result<TableDef, EngineError> {
        Ok(self.user_table(name)?.def.clone())
    }

    /// `INSERT INTO name VALUES (...), ...`: each row gives one value per column, `None` for
    /// `DEFAULT` (the column's default, the next serial value, or NULL). Values are converted
    /// to the column types; a primary key already held by a live version is refused.
    /// Returns the number of rows inserted.
    ///
    /// # Errors
    /// PostgreSQL's messages for a bad value, a NULL in a NOT NULL column, or a duplicate key
    /// (`duplicate key value violates unique constraint "name_pkey"`); buffer and WAL errors.
    pub fn insert_rows(&mut self, name: &str, rows: Vec<Vec<Option<Value>>>) -> Result<u64, EngineError> {
        let t = self.user_table(name)?;
        self.statement(|s| {
            s.lock_user_table(&t, LockMode::RowExclusive)?;
            let xid = s.ensure_xid()?;
            let mut n = 0;
            for row in rows {
                if row.len() > t.def.columns.len() {
                    return Err(sql_err("INSERT has more expressions than target columns".into()));
                }
                let mut vals = Vec::with_capacity(t.def.columns.len());
                for (i, c) in t.def.columns.iter().enumerate() {
                    let v = row.get(i).cloned().flatten().unwrap_or_else(|| t.default_value(i));
                    vals.push(coerce(&t.def.name, c, v).map_err(sql_err)?);
                }
                if let Some(k) = t.def.primary_key {
                    if s.key_is_live(&t, k, &vals[k])? {
                        return Err(sql_err(format!(
                            "duplicate key value violates unique constraint \"{}\"",
                            t.def.pkey_name()
                        )));
                    }
                }
                let (slots, filler) = encode_row(&t.def, &vals);
                let mut tup = tuple::form_tuple(xid, s.cid, &slots, filler.len(), 0);
                let at = tup.len() - filler.len();
                tup[at..].copy_from_slice(&filler);
                let tid = s.user_heap_insert(&t, xid, &mut tup)?;
                if let (Some(ix), Some(k)) = (&t.index, t.def.primary_key)
                    && let Some(key) = index_key(&vals[k])
                {
                    ix.insert(&s.bb, key, tid)?;
                }
                n += 1;
            }
            Ok(n)
        })
    }

    /// Whether a version with `value` in key column `k` exists that is not known dead:
    /// inserted by a transaction that did not abort, and not deleted or updated away by one
    /// that committed (the unique check of `_bt_check_unique`, without its wait for an
    /// in-progress inserter). Entries under the same B-tree key with another value (a text
    /// key's hash shared by two texts) do not count.
    fn key_is_live(&mut self, t: &UserTable, k: usize, value: &Value) -> Result<bool, EngineError> {
        let Some(ix) = &t.index else { return Ok(false) };
        let Some(key) = index_key(value) else { return Ok(false) };
        self.tids.clear();
        ix.lookup(&self.bb, key, &mut self.tids)?;
        for i in 0..self.tids.len() {
            let tid = self.tids[i];
            let buf = self.bb.read_block(t.heap, BlockNumber(tid.block))?;
            let g = self.bb.lock(buf, LwLockMode::Shared);
            let h = page::get_item(g.page(), tid.offset).map(|x| {
                let same = matches!(value, Value::Int(_))
                    || decode_row(&t.def, x).is_ok_and(|row| row.get(k) == Some(value));
                (resolve_updater(&self.engine, tuple::header(x).xact), same)
            });
            drop(g);
            self.bb.release(buf);
            let Some((h, true)) = h else { continue };
            let xmin_dead = !self.is_current_xid(h.xmin)
                && h.infomask & visibility::XMIN_COMMITTED == 0
                && matches!(self.engine.clog.get_status(h.xmin), Ok((XidStatus::Aborted, _)));
            let lock_only = h.infomask & visibility::XMAX_LOCK_ONLY != 0;
            let xmax_done = h.xmax.is_valid()
                && h.infomask & visibility::XMAX_INVALID == 0
                && !lock_only
                && (self.is_current_xid(h.xmax)
                    || matches!(self.engine.clog.get_status(h.xmax), Ok((XidStatus::Committed, _))));
            if !xmin_dead && !xmax_done {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Puts `tup` on the table's last page if it fits, else on a new page; WAL-logs it.
    fn user_heap_insert(
        &mut self,
        t: &UserTable,
        xid: TransactionId,
        tup: &mut [u8],
    ) -> Result<Tid, EngineError> {
        let _g = t.insert_lock.lock();
        let nblocks = self.engine.pool.nblocks(t.heap, ForkNumber::Main)?;
        let (buf, block) = if nblocks > 0 {
            let b = self.bb.read_block(t.heap, BlockNumber(nblocks - 1))?;
            let fits = {
                let g = self.bb.lock(b, LwLockMode::Shared);
                page::free_space(g.page()) >= page::maxalign(tup.len())
            };
            if fits {
                (b, nblocks - 1)
            } else {
                self.bb.release(b);
                let (b, blk) = self.bb.extend(t.heap, ForkNumber::Main)?;
                (b, blk.0)
            }
        } else {
            let (b, blk) = self.bb.extend(t.heap, ForkNumber::Main)?;
            (b, blk.0)
        };
        let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
        if page::is_new(g.page()) {
            page::init(g.page_mut(), 0);
        }
        let Some(off) = page::add_item(g.page_mut(), tup, None) else {
            drop(g);
            self.bb.release(buf);
            return Err(sql_err(format!(
                "row is too big: size {}, maximum size {}",
                tup.len(),
                page::BLCKSZ / 4
            )));
        };
        let tid = Tid { block, offset: off };
        tuple::set_ctid(page::get_item_mut(g.page_mut(), off).expect("added"), tid);
        tuple::set_ctid(tup, tid);
        let lsn = self.wal.insert(&Record { rmid: RM_HEAP, info: XLOG_HEAP_INSERT, xid, data: tup })?;
        page::set_lsn(g.page_mut(), lsn.0);
        g.mark_dirty();
        drop(g);
        self.bb.release(buf);
        Ok(tid)
    }

    /// Every version of `t` visible to the statement's snapshot, in physical order (a
    /// sequential scan, share-locking one page at a time), with its TID.
    fn scan_visible(&mut self, t: &UserTable) -> Result<Vec<(Tid, Vec<Value>)>, EngineError> {
        let nblocks = self.engine.pool.nblocks(t.heap, ForkNumber::Main)?;
        let mut out = Vec::new();
        for blk in 0..nblocks {
            let buf = self.bb.read_block(t.heap, BlockNumber(blk))?;
            let g = self.bb.lock(buf, LwLockMode::Shared);
            let ctx = self.vis(&self.snapshot);
            let p = g.page();
            let mut err = None;
            for off in 1..=page::max_offset_number(p) {
                if page::item_id(p, off).flags != LpFlags::Normal {
                    continue;
                }
                let tup = page::get_item(p, off).expect("normal");
                let h = resolve_updater(&self.engine, tuple::header(tup).xact);
                if visibility::satisfies_mvcc(&h, &ctx).visible {
                    match decode_row(&t.def, tup) {
                        Ok(v) => out.push((Tid { block: blk, offset: off }, v)),
                        Err(e) => err = Some(e),
                    }
                }
            }
            drop(g);
            self.bb.release(buf);
            if let Some(e) = err {
                return Err(EngineError::Table(tables::TableError::Corrupt(e)));
            }
        }
        Ok(out)
    }

    /// `SELECT * FROM table [WHERE ...] [ORDER BY col] [LIMIT n] [FOR strength [NOWAIT | SKIP
    /// LOCKED]]` as one statement: a sequential scan under the statement's snapshot, `pred`
    /// (the WHERE clause; it may take heavyweight locks through [`Session::lock_backend`], as
    /// `pg_advisory_lock` in a WHERE clause does, once per row it is evaluated on), the sort,
    /// then the row locks in output order until `limit` rows are returned (PostgreSQL's plan
    /// for a locking query: Limit over LockRows over Sort). A row a committed update replaced
    /// while we waited is locked in its newest version and `pred` is evaluated again on that
    /// version (`EvalPlanQual`); a row that then fails it, or was deleted, is left out.
    ///
    /// # Errors
    /// `relation "t" does not exist`; `could not obtain lock on row in relation "t"` (NOWAIT);
    /// lock errors (deadlock, lock timeout); `pred`'s errors; buffer and WAL errors.
    pub fn select_rows(
        &mut self,
        q: &RowQuery,
        pred: &mut RowPredicate<'_>,
    ) -> Result<Vec<Vec<Value>>, EngineError> {
        let t = self.user_table(&q.table)?;
        self.statement(|s| {
            let mode = if q.lock.is_some() { LockMode::RowShare } else { LockMode::AccessShare };
            s.lock_user_table(&t, mode)?;
            let mut rows = Vec::new();
            for (tid, v) in s.scan_visible(&t)? {
                if pred(s, &v)? {
                    rows.push((tid, v));
                }
            }
            if let Some((col, desc)) = q.order_by {
                rows.sort_by(|a, b| {
                    let o = a.1[col].sort_cmp(&b.1[col]);
                    if desc { o.reverse() } else { o }
                });
            }
            let limit = q.limit.unwrap_or(u64::MAX);
            let mut out = Vec::new();
            for (tid, v) in rows {
                if out.len() as u64 >= limit {
                    break;
                }
                let Some((strength, wait)) = q.lock else {
                    out.push(v);
                    continue;
                };
                match s.lock_tuple(&t, tid, strength, wait)? {
                    Locked::Row(newest) if newest == v => out.push(v),
                    // A newer version: the WHERE clause again, on it.
                    Locked::Row(newest) => {
                        if pred(s, &newest)? {
                            out.push(newest);
                        }
                    }
                    Locked::Skipped | Locked::Gone => {}
                }
            }
            Ok(out)
        })
    }

    /// `UPDATE table SET ... [WHERE ...]` or `DELETE FROM table [WHERE ...]` as one statement:
    /// a sequential scan under the statement's snapshot, `pred` (the WHERE clause, as for
    /// [`Session::select_rows`]) on each visible row, then the change of each qualifying row,
    /// waiting for conflicting holders; a row a committed update replaced is changed in its
    /// newest version if `pred` still holds there (`EvalPlanQual`). Returns the number of
    /// rows changed.
    ///
    /// # Errors
    /// `relation "t" does not exist`; a duplicate primary key; lock errors (deadlock, lock
    /// timeout); an unsupported MultiXact with an updater member; `pred`'s and `change`'s
    /// errors; buffer and WAL errors.
    pub fn modify_rows(
        &mut self,
        table: &str,
        pred: &mut RowPredicate<'_>,
        change: RowChange<'_>,
    ) -> Result<u64, EngineError> {
        let t = self.user_table(table)?;
        self.statement(|s| {
            s.lock_user_table(&t, LockMode::RowExclusive)?;
            s.ensure_xid()?;
            s.engine.multixact.set_oldest_member(s.id);
            let mut rows = Vec::new();
            for (tid, v) in s.scan_visible(&t)? {
                if pred(s, &v)? {
                    rows.push(tid);
                }
            }
            let mut n = 0;
            for mut tid in rows {
                loop {
                    match s.change_tuple(&t, tid, &change)? {
                        Changed::Done => {
                            n += 1;
                            break;
                        }
                        Changed::Gone => break,
                        Changed::Newer(next) => {
                            let Some(v) = s.read_version(&t, next)? else { break };
                            if !pred(s, &v)? {
                                break;
                            }
                            tid = next;
                        }
                    }
                }
            }
            Ok(n)
        })
    }

    /// The values of the version at `tid` (`None` if the slot is empty).
    fn read_version(&mut self, t: &UserTable, tid: Tid) -> Result<Option<Vec<Value>>, EngineError> {
        let buf = self.bb.read_block(t.heap, BlockNumber(tid.block))?;
        let g = self.bb.lock(buf, LwLockMode::Shared);
        let v = page::get_item(g.page(), tid.offset).map(|tup| decode_row(&t.def, tup));
        drop(g);
        self.bb.release(buf);
        v.transpose().map_err(|e| EngineError::Table(tables::TableError::Corrupt(e)))
    }

    /// `heap_update` / `heap_delete` of the version at `tid`: waits out conflicting holders
    /// (tuple lock, then their xids), then stamps our xmax and, for an update, adds the new
    /// version. Holds the tuple lock only while waiting and releases it before returning.
    fn change_tuple(
        &mut self,
        t: &UserTable,
        tid: Tid,
        change: &RowChange<'_>,
    ) -> Result<Changed, EngineError> {
        let mut tuplock: Option<(LockTag, LockMode)> = None;
        let r = self.change_tuple_inner(t, tid, change, &mut tuplock);
        if let Some((tag, mode)) = tuplock {
            self.lm.unlock(tag, mode, false);
        }
        r
    }

    fn change_tuple_inner(
        &mut self,
        t: &UserTable,
        tid: Tid,
        change: &RowChange<'_>,
        tuplock: &mut Option<(LockTag, LockMode)>,
    ) -> Result<Changed, EngineError> {
        let xid = self.cur_xid();
        let mut key_checked = None;
        let mut computed: Option<Option<Vec<Value>>> = None;
        loop {
            let buf = self.bb.read_block(t.heap, BlockNumber(tid.block))?;
            let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
            let Some(tup) = page::get_item(g.page(), tid.offset).map(|x| x.to_vec()) else {
                drop(g);
                self.bb.release(buf);
                return Ok(Changed::Gone);
            };
            let h = tuple::header(&tup);
            let old = match decode_row(&t.def, &tup) {
                Ok(v) => v,
                Err(e) => {
                    drop(g);
                    self.bb.release(buf);
                    return Err(EngineError::Table(tables::TableError::Corrupt(e)));
                }
            };
            // The new values first: whether a key changes decides the strength held. They are
            // computed once per version (a version's values never change), so a DEFAULT's
            // serial advances once however long the update waits.
            if computed.is_none() {
                computed = Some(match change {
                    RowChange::Update(f) => match f(&old) {
                        Ok(v) => Some(
                            v.into_iter()
                                .enumerate()
                                .map(|(i, x)| x.unwrap_or_else(|| t.default_value(i)))
                                .collect::<Vec<_>>(),
                        ),
                        Err(e) => {
                            drop(g);
                            self.bb.release(buf);
                            return Err(e);
                        }
                    },
                    RowChange::Delete => None,
                });
            }
            let new = computed.clone().flatten();
            let key_changed = match (&new, t.def.primary_key) {
                (None, _) => true,
                (Some(v), Some(k)) => v[k] != old[k],
                (Some(_), None) => false,
            };
            let strength = if key_changed { RowLockStrength::Update } else { RowLockStrength::NoKeyUpdate };
            if self.is_current_xid(h.xact.xmax)
                && h.xact.infomask
                    & (visibility::XMAX_LOCK_ONLY | visibility::XMAX_INVALID | visibility::XMAX_IS_MULTI)
                    == 0
            {
                // Already changed by this transaction (by this command: TM_SelfModified).
                drop(g);
                self.bb.release(buf);
                return Ok(Changed::Gone);
            }
            let check = match self.row_lock_check(&h, strength) {
                // Our own lock strong enough for the change: the change replaces the locks of
                // this subtransaction (or of the transaction, outside savepoints) and keeps
                // those of enclosing or earlier ones, which a ROLLBACK TO must not lose
                // (`compute_new_xmax_infomask` makes a multi of them).
                Ok(RowCheck::Held) => RowCheck::Free(self.own_other_lockers(&h, xid)),
                Ok(RowCheck::Free(Some(members))) if members.iter().all(|m| m.xid == xid) => {
                    RowCheck::Free(None)
                }
                Ok(c) => c,
                Err(e) => {
                    drop(g);
                    self.bb.release(buf);
                    return Err(e);
                }
            };
            match check {
                RowCheck::Held => unreachable!("mapped above"),
                RowCheck::Updated(next) => {
                    drop(g);
                    self.bb.release(buf);
                    if self.repeatable_read {
                        // The version our snapshot saw was replaced by a transaction it does
                        // not see (`ExecUpdate` / `ExecDelete` under a transaction snapshot).
                        let what = if next == tid { "delete" } else { "update" };
                        return Err(sql_err(format!("could not serialize access due to concurrent {what}")));
                    }
                    return Ok(if next == tid { Changed::Gone } else { Changed::Newer(next) });
                }
                RowCheck::Wait(holders, upgrading) => {
                    drop(g);
                    self.bb.release(buf);
                    if tuplock.is_none() && !upgrading {
                        let db = self.engine.lmgr.database();
                        let tag = LockTag::tuple(db, t.heap, BlockNumber(tid.block), tid.offset);
                        self.lm.lock(tag, strength.hwlock(), LockOptions::XACT)?;
                        *tuplock = Some((tag, strength.hwlock()));
                    }
                    for other in holders {
                        self.xact_lock_table_wait(other)?;
                    }
                }
                RowCheck::Free(lockers) => {
                    if let (Some(v), Some(k)) = (&new, t.def.primary_key)
                        && key_changed
                        && key_checked.as_ref() != Some(&v[k])
                    {
                        key_checked = Some(v[k].clone());
                        drop(g);
                        let live = self.key_is_live(t, k, &v[k]);
                        self.bb.release(buf);
                        if live? {
                            return Err(sql_err(format!(
                                "duplicate key value violates unique constraint \"{}\"",
                                t.def.pkey_name()
                            )));
                        }
                        // Look again: the page was unlocked for the unique check.
                        continue;
                    }
                    // Other transactions still holding the row FOR KEY SHARE (the only
                    // strength compatible with a non-key update): the old version's xmax is a
                    // multi of them and us as its updater, and the new version keeps their
                    // locks (`heap_update`'s xmax_new_tuple).
                    let others: Vec<MultiXactMember> =
                        lockers.unwrap_or_default().into_iter().filter(|m| m.xid != xid).collect();
                    let item = page::get_item_mut(g.page_mut(), tid.offset).expect("present");
                    if others.is_empty() {
                        tuple::set_xmax(item, xid, self.cid, None);
                        tuple::set_keys_updated(item, key_changed);
                    } else {
                        let mut members = others.clone();
                        let status =
                            if key_changed { MultiXactStatus::Update } else { MultiXactStatus::NoKeyUpdate };
                        members.push(MultiXactMember { xid, status });
                        let multi = self.engine.multixact.create(&members);
                        stamp_multi(item, multi, &members, self.cid);
                    }
                    let info = if new.is_some() { XLOG_HEAP_UPDATE } else { XLOG_HEAP_DELETE };
                    let lsn = self.wal.insert(&Record { rmid: RM_HEAP, info, xid, data: &tid_bytes(tid) })?;
                    page::set_lsn(g.page_mut(), lsn.0);
                    g.mark_dirty();
                    drop(g);
                    if let Some(v) = new {
                        let vals = t
                            .def
                            .columns
                            .iter()
                            .zip(v)
                            .map(|(c, x)| coerce(&t.def.name, c, x).map_err(sql_err))
                            .collect::<Result<Vec<_>, _>>();
                        let vals = match vals {
                            Ok(v) => v,
                            Err(e) => {
                                self.bb.release(buf);
                                return Err(e);
                            }
                        };
                        let (slots, filler) = encode_row(&t.def, &vals);
                        let mut ntup = tuple::form_tuple(xid, self.cid, &slots, filler.len(), 0);
                        let at = ntup.len() - filler.len();
                        ntup[at..].copy_from_slice(&filler);
                        tuple::set_hint_bits(&mut ntup, visibility::UPDATED);
                        match &others[..] {
                            [] => {}
                            [one] => {
                                tuple::set_xmax(&mut ntup, one.xid, 0, Some(visibility::XMAX_KEYSHR_LOCK))
                            }
                            many => {
                                let multi = self.engine.multixact.create(many);
                                stamp_multi(&mut ntup, multi, many, 0);
                            }
                        }
                        let nt = match self.user_heap_insert(t, xid, &mut ntup) {
                            Ok(nt) => nt,
                            Err(e) => {
                                self.bb.release(buf);
                                return Err(e);
                            }
                        };
                        let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
                        let old = page::get_item_mut(g.page_mut(), tid.offset).expect("present");
                        tuple::set_ctid(old, nt);
                        g.mark_dirty();
                        drop(g);
                        if let (Some(ix), Some(k)) = (&t.index, t.def.primary_key)
                            && let Some(key) = index_key(&vals[k])
                        {
                            ix.insert(&self.bb, key, nt)?;
                        }
                    }
                    self.bb.release(buf);
                    return Ok(Changed::Done);
                }
            }
        }
    }

    /// The lock-manager handle of this backend, for heavyweight locks a front end takes
    /// itself (`LOCK TABLE`, advisory locks) inside the session's transaction; they are
    /// released with the transaction's other locks.
    pub fn lock_backend(&mut self) -> &mut lockstack_lmgr::Backend {
        &mut self.lm
    }

    /// `heap_lock_tuple` on user table `t` at `tid`, then along the update chain: returns the
    /// newest version's values once locked. Holds the tuple lock only while waiting, and
    /// releases it before returning, on every path.
    fn lock_tuple(
        &mut self,
        t: &UserTable,
        tid: Tid,
        strength: RowLockStrength,
        wait: WaitPolicy,
    ) -> Result<Locked, EngineError> {
        self.ensure_xid()?;
        self.engine.multixact.set_oldest_member(self.id);
        let mut tuplock = None;
        let r = self.lock_tuple_inner(t, tid, strength, wait, &mut tuplock, &mut false);
        if let Some(tag) = tuplock {
            self.lm.unlock(tag, strength.hwlock(), false);
        }
        r
    }

    fn lock_tuple_inner(
        &mut self,
        t: &UserTable,
        mut tid: Tid,
        strength: RowLockStrength,
        wait: WaitPolicy,
        tuplock: &mut Option<LockTag>,
        waited: &mut bool,
    ) -> Result<Locked, EngineError> {
        let xid = self.cur_xid();
        let no_row = || sql_err(format!("could not obtain lock on row in relation \"{}\"", t.def.name));
        loop {
            let buf = self.bb.read_block(t.heap, BlockNumber(tid.block))?;
            let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
            let Some(tup) = page::get_item(g.page(), tid.offset).map(|x| x.to_vec()) else {
                drop(g);
                self.bb.release(buf);
                return Ok(Locked::Gone);
            };
            let h = tuple::header(&tup);
            match self.row_lock_check(&h, strength)? {
                RowCheck::Held => {
                    drop(g);
                    self.bb.release(buf);
                    return decode_row(&t.def, &tup)
                        .map(Locked::Row)
                        .map_err(|e| EngineError::Table(tables::TableError::Corrupt(e)));
                }
                RowCheck::Free(multi) => {
                    // A running transaction has updated this version without touching its key
                    // (the only update a compatible lock can share): its newer versions are
                    // locked too (`heap_lock_updated_tuple`), waiting where one conflicts.
                    let chain = multi
                        .as_ref()
                        .is_some_and(|ms| ms.iter().any(|m| m.status.is_update() && m.xid != xid))
                        && h.ctid != tid;
                    let item = page::get_item_mut(g.page_mut(), tid.offset).expect("present");
                    match multi {
                        Some(members) => {
                            let multi = self.engine.multixact.create(&members);
                            stamp_multi(item, multi, &members, self.cid);
                        }
                        None => {
                            let (bits, keys) = strength.bits();
                            tuple::set_xmax(item, xid, self.cid, Some(bits));
                            tuple::set_keys_updated(item, keys);
                        }
                    }
                    let lsn = self.wal.insert(&Record {
                        rmid: RM_HEAP,
                        info: XLOG_HEAP_LOCK,
                        xid,
                        data: &tid_bytes(tid),
                    })?;
                    page::set_lsn(g.page_mut(), lsn.0);
                    g.mark_dirty();
                    drop(g);
                    self.bb.release(buf);
                    if chain {
                        let (mut newer_waited, mut newer_tuplock) = (false, None);
                        let r = self.lock_tuple_inner(
                            t,
                            h.ctid,
                            strength,
                            wait,
                            &mut newer_tuplock,
                            &mut newer_waited,
                        );
                        if let Some(tag) = newer_tuplock {
                            self.lm.unlock(tag, strength.hwlock(), false);
                        }
                        match r? {
                            Locked::Skipped => return Ok(Locked::Skipped),
                            // After a wait, this version again: its updater has ended.
                            _ if newer_waited => {
                                *waited = true;
                                continue;
                            }
                            _ => {}
                        }
                    }
                    return decode_row(&t.def, &tup)
                        .map(Locked::Row)
                        .map_err(|e| EngineError::Table(tables::TableError::Corrupt(e)));
                }
                RowCheck::Updated(next) => {
                    drop(g);
                    self.bb.release(buf);
                    if self.repeatable_read {
                        // `ExecLockRows` under a transaction snapshot: the version it saw was
                        // updated or deleted by a transaction it does not see; the same text
                        // for both.
                        return Err(sql_err("could not serialize access due to concurrent update".into()));
                    }
                    if let Some(tag) = tuplock.take() {
                        self.lm.unlock(tag, strength.hwlock(), false);
                    }
                    if next == tid {
                        return Ok(Locked::Gone);
                    }
                    tid = next;
                }
                RowCheck::Wait(holders, upgrading) => {
                    drop(g);
                    self.bb.release(buf);
                    *waited = true;
                    if tuplock.is_none() && !upgrading {
                        let db = self.engine.lmgr.database();
                        let tag = LockTag::tuple(db, t.heap, BlockNumber(tid.block), tid.offset);
                        let opts = LockOptions { session: false, dont_wait: wait != WaitPolicy::Block };
                        match self.lm.lock(tag, strength.hwlock(), opts) {
                            Ok(_) => *tuplock = Some(tag),
                            Err(lockstack_lmgr::LockError::NotAvailable { .. }) => {
                                return if wait == WaitPolicy::Skip {
                                    Ok(Locked::Skipped)
                                } else {
                                    Err(no_row())
                                };
                            }
                            Err(e) => return Err(e.into()),
                        }
                    }
                    for other in holders {
                        match wait {
                            WaitPolicy::Block => self.xact_lock_table_wait(other)?,
                            _ if self.conditional_xact_lock_table_wait(other)? => {}
                            WaitPolicy::Skip => return Ok(Locked::Skipped),
                            WaitPolicy::Error => return Err(no_row()),
                        }
                    }
                }
            }
        }
    }

    /// For a change by `xid` of a version this transaction already holds strongly enough: the
    /// lockers the change must keep in the version's xmax, that is running lockers other than
    /// `xid` itself (an enclosing or earlier subtransaction's lock, or another transaction's
    /// compatible one); `None` when there are none.
    fn own_other_lockers(&self, h: &tuple::TupleHeader, xid: TransactionId) -> Option<Vec<MultiXactMember>> {
        let x = &h.xact;
        if !x.xmax.is_valid() || x.infomask & visibility::XMAX_INVALID != 0 || x.xmax == xid {
            return None;
        }
        let keep: Vec<MultiXactMember> = if x.infomask & visibility::XMAX_IS_MULTI != 0 {
            self.engine
                .multixact
                .members(MultiXactId(x.xmax.0))
                .into_iter()
                .filter(|m| {
                    m.xid != xid
                        && !m.status.is_update()
                        && (self.is_current_xid(m.xid) || self.xid_running(m.xid))
                })
                .collect()
        } else if x.infomask & visibility::XMAX_LOCK_ONLY != 0 && self.is_current_xid(x.xmax) {
            vec![MultiXactMember {
                xid: x.xmax,
                status: RowLockStrength::of_xmax(x.infomask, h.infomask2).status(),
            }]
        } else {
            Vec::new()
        };
        (!keep.is_empty()).then_some(keep)
    }

    /// `heap_lock_tuple`'s reading of a version's xmax for a lock of `want` (with
    /// `HeapTupleSatisfiesUpdate`, `DoesMultiXactIdConflict` and `compute_new_xmax_infomask`),
    /// reduced to what the lock then does.
    ///
    /// # Errors
    /// None today (the result type leaves room for MultiXact look-up errors).
    fn row_lock_check(&self, h: &tuple::TupleHeader, want: RowLockStrength) -> Result<RowCheck, EngineError> {
        let x = &h.xact;
        let me = self.cur_xid();
        if !x.xmax.is_valid() || x.infomask & visibility::XMAX_INVALID != 0 {
            return Ok(RowCheck::Free(None));
        }
        if x.infomask & visibility::XMAX_IS_MULTI != 0 {
            let multi = MultiXactId(x.xmax.0);
            // A committed updater member: this version is replaced (TM_Updated), whatever
            // the lockers (its member list may be gone; the updater is kept).
            if let Some(u) = self.engine.multixact.update_xid(multi)
                && !self.is_current_xid(u)
                && matches!(self.engine.clog.get_status(u), Ok((XidStatus::Committed, _)))
            {
                return Ok(RowCheck::Updated(h.ctid));
            }
            let members = self.engine.multixact.members(multi);
            let mut keep = Vec::new();
            let mut conflicts = Vec::new();
            let mut mine: Option<RowLockStrength> = None;
            for m in members {
                let ms = RowLockStrength::of_status(m.status);
                // Members of this transaction (its top level or a live subxid) never conflict
                // with it (`TransactionIdIsCurrentTransactionId`); an aborted subxid's lock no
                // longer counts, as for any aborted member.
                if self.is_current_xid(m.xid) {
                    mine = mine.max(Some(ms));
                    keep.push(m);
                } else if self.xid_running(m.xid) {
                    if ms.conflicts_with(want) {
                        conflicts.push(m.xid);
                    } else {
                        keep.push(m);
                    }
                }
            }
            if !conflicts.is_empty() {
                conflicts.dedup();
                return Ok(RowCheck::Wait(conflicts, mine.is_some()));
            }
            if mine.is_some_and(|m| m >= want) {
                return Ok(RowCheck::Held);
            }
            if keep.iter().all(|m| m.xid == me) {
                return Ok(RowCheck::Free(None));
            }
            keep.push(MultiXactMember { xid: me, status: want.status() });
            return Ok(RowCheck::Free(Some(keep)));
        }
        let held = RowLockStrength::of_xmax(x.infomask, h.infomask2);
        let lock_only = x.infomask & visibility::XMAX_LOCK_ONLY != 0;
        if x.xmax == me {
            return Ok(if !lock_only || held >= want { RowCheck::Held } else { RowCheck::Free(None) });
        }
        if self.is_current_xid(x.xmax) {
            // Held by an enclosing or earlier subtransaction of ours (or by the top level
            // while we are in one): enough already, or a multi of its lock and ours, so
            // that a ROLLBACK TO of ours leaves its lock in place (`compute_new_xmax_infomask`).
            return Ok(if !lock_only || held >= want {
                RowCheck::Held
            } else {
                RowCheck::Free(Some(vec![
                    MultiXactMember { xid: x.xmax, status: held.status() },
                    MultiXactMember { xid: me, status: want.status() },
                ]))
            });
        }
        let status = if x.infomask & visibility::XMAX_COMMITTED != 0 {
            XidStatus::Committed
        } else {
            self.engine.clog.get_status(x.xmax).map(|(s, _)| s).unwrap_or(XidStatus::InProgress)
        };
        match status {
            XidStatus::Aborted => Ok(RowCheck::Free(None)),
            XidStatus::Committed if lock_only => Ok(RowCheck::Free(None)),
            XidStatus::Committed => Ok(RowCheck::Updated(h.ctid)),
            _ if held.conflicts_with(want) => Ok(RowCheck::Wait(vec![x.xmax], false)),
            // A running locker, or a running non-key updater and a KEY SHARE request: the
            // row is held by both, in a multi (with an updater member in the second case).
            _ => {
                let status = if lock_only { held.status() } else { MultiXactStatus::NoKeyUpdate };
                Ok(RowCheck::Free(Some(vec![
                    MultiXactMember { xid: x.xmax, status },
                    MultiXactMember { xid: me, status: want.status() },
                ])))
            }
        }
    }
}

/// Stamps `multi` (of `members`) as the xmax of `t` at command `cmax`: lock-only with the
/// strongest member's strength bits (`compute_new_xmax_infomask`), or, with an updater
/// member, an updating xmax (`HEAP_XMAX_IS_MULTI` without `HEAP_XMAX_LOCK_ONLY`).
fn stamp_multi(t: &mut [u8], multi: MultiXactId, members: &[MultiXactMember], cmax: u32) {
    if members.iter().any(|m| m.status.is_update()) {
        tuple::set_xmax(t, TransactionId(multi.0), cmax, None);
        tuple::set_hint_bits(t, visibility::XMAX_IS_MULTI);
        tuple::set_keys_updated(t, members.iter().any(|m| m.status == MultiXactStatus::Update));
        return;
    }
    let top = members
        .iter()
        .map(|m| RowLockStrength::of_status(m.status))
        .max()
        .unwrap_or(RowLockStrength::KeyShare);
    let (bits, keys) = top.bits();
    tuple::set_xmax_multi(t, multi, cmax, bits);
    tuple::set_keys_updated(t, keys);
}

/// A version's transaction fields with an updating multi's xmax replaced by its updater's
/// xid (`HeapTupleGetUpdateXid`), which is what visibility is decided on; other xmaxes as
/// they are.
fn resolve_updater(engine: &Engine, mut h: TupleXactInfo) -> TupleXactInfo {
    use visibility::{XMAX_INVALID, XMAX_IS_MULTI, XMAX_LOCK_ONLY};
    if h.infomask & (XMAX_IS_MULTI | XMAX_LOCK_ONLY | XMAX_INVALID) == XMAX_IS_MULTI
        && let Some(x) = engine.multixact.update_xid(MultiXactId(h.xmax.0))
    {
        h.infomask &= !XMAX_IS_MULTI;
        h.xmax = x;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineConfig;
    use crate::usertable::{ColumnDef, ColumnType};
    use RowLockStrength::*;

    /// PostgreSQL's documented row-level conflict table (explicit-locking.html), row by row:
    /// which requested strengths each held strength blocks.
    #[test]
    fn the_conflict_table_is_postgres_s() {
        let all = [KeyShare, Share, NoKeyUpdate, Update];
        let blocks = |held| match held {
            KeyShare => vec![Update],
            Share => vec![NoKeyUpdate, Update],
            NoKeyUpdate => vec![Share, NoKeyUpdate, Update],
            Update => all.to_vec(),
        };
        for held in all {
            for want in all {
                assert_eq!(held.conflicts_with(want), blocks(held).contains(&want), "{held:?} vs {want:?}");
                assert_eq!(held.conflicts_with(want), want.conflicts_with(held), "symmetric");
            }
            // The infomask bits decode back to the strength.
            let (bits, keys) = held.bits();
            let im2 = if keys { visibility::HEAP_KEYS_UPDATED } else { 0 };
            assert_eq!(RowLockStrength::of_xmax(bits | visibility::XMAX_LOCK_ONLY, im2), held);
            assert_eq!(RowLockStrength::of_status(held.status()), held);
        }
    }

    fn table(e: &Arc<Engine>) -> Session {
        let mut s = e.session(BackendId(0)).unwrap();
        let col = |name: &str, ty, not_null| ColumnDef {
            name: name.into(),
            ty,
            default: None,
            serial: false,
            not_null,
        };
        s.create_table(TableDef {
            name: "slot".into(),
            columns: vec![col("k", ColumnType::Int4, true), col("v", ColumnType::Text, false)],
            primary_key: Some(0),
        })
        .unwrap();
        let rows = (1..=3).map(|k| vec![Some(Value::Int(k)), Some(Value::Text(format!("v{k}")))]).collect();
        assert_eq!(s.insert_rows("slot", rows).unwrap(), 3);
        s
    }

    fn query(lock: Option<(RowLockStrength, WaitPolicy)>, limit: Option<u64>) -> RowQuery {
        RowQuery { table: "slot".into(), order_by: Some((0, false)), limit, lock }
    }

    fn all(_: &mut Session, _: &[Value]) -> Result<bool, EngineError> {
        Ok(true)
    }

    #[test]
    fn nowait_fails_skip_locked_skips_and_compatible_lockers_share() {
        let e = Engine::without_tables(EngineConfig::new(3, 256)).unwrap();
        let mut a = table(&e);
        let mut b = e.session(BackendId(1)).unwrap();
        let mut c = e.session(BackendId(2)).unwrap();
        a.begin();
        let got = a.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
        assert_eq!(got, vec![vec![Value::Int(1), Value::Text("v1".into())]]);
        b.begin();
        let err = b.select_rows(&query(Some((Share, WaitPolicy::Error)), None), &mut all).unwrap_err();
        assert_eq!(err.to_string(), "could not obtain lock on row in relation \"slot\"");
        b.rollback().unwrap();
        b.begin();
        let got = b.select_rows(&query(Some((Update, WaitPolicy::Skip)), Some(1)), &mut all).unwrap();
        assert_eq!(got[0][0], Value::Int(2), "row 1 skipped");
        // KEY SHARE does not conflict with FOR NO KEY UPDATE: a MultiXact of a and c.
        c.begin();
        let before = e.multixact.created();
        let got = c.select_rows(&query(Some((KeyShare, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
        assert_eq!(got[0][0], Value::Int(1));
        assert_eq!(e.multixact.created(), before + 1);
        // ... and the multi still makes a conflicting NOWAIT request fail, on either member.
        b.rollback().unwrap();
        b.begin();
        let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
        assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
        b.rollback().unwrap();
        a.commit().unwrap();
        b.begin();
        let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
        assert!(err.to_string().starts_with("could not obtain lock on row"), "c still holds it: {err}");
        b.rollback().unwrap();
        c.commit().unwrap();
        b.begin();
        assert_eq!(
            b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap().len(),
            1
        );
        b.commit().unwrap();
    }

    #[test]
    fn keys_stay_unique_and_updates_follow_the_chain() {
        let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
        let mut a = table(&e);
        let dup = a.insert_rows("slot", vec![vec![Some(Value::Int(2)), None]]).unwrap_err();
        assert_eq!(dup.to_string(), "duplicate key value violates unique constraint \"slot_pkey\"");
        let set_v = |_: &[Value]| -> Result<Vec<Option<Value>>, EngineError> {
            Ok(vec![Some(Value::Int(2)), Some(Value::Text("new".into()))])
        };
        let mut only2 = |_: &mut Session, r: &[Value]| Ok(r[0] == Value::Int(2));
        assert_eq!(a.modify_rows("slot", &mut only2, RowChange::Update(&set_v)).unwrap(), 1);
        let mut b = e.session(BackendId(1)).unwrap();
        // A later statement sees the new version of row 2, and row 3 no more.
        let mut only3 = |_: &mut Session, r: &[Value]| Ok(r[0] == Value::Int(3));
        assert_eq!(a.modify_rows("slot", &mut only3, RowChange::Delete).unwrap(), 1);
        b.begin();
        let got = b.select_rows(&query(Some((Share, WaitPolicy::Error)), None), &mut all).unwrap();
        let keys: Vec<_> = got.iter().map(|r| r[1].clone()).collect();
        assert_eq!(keys, vec![Value::Text("v1".into()), Value::Text("new".into())]);
        b.commit().unwrap();
        assert!(a.drop_table("slot", false).is_ok());
        assert_eq!(a.drop_table("slot", false).unwrap_err().to_string(), "table \"slot\" does not exist");
        assert!(a.drop_table("slot", true).is_ok());
    }

    /// A row lock taken inside a savepoint carries the subxid; `ROLLBACK TO` aborts it, so
    /// another session's NOWAIT request for the row then succeeds, while the lock taken before
    /// the savepoint stays.
    #[test]
    fn rollback_to_releases_a_subtransactions_row_lock() {
        let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
        let mut a = table(&e);
        let mut b = e.session(BackendId(1)).unwrap();
        a.begin();
        a.select_rows(&query(Some((KeyShare, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
        let top = a.xid;
        a.savepoint("sp").unwrap();
        a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
        let sub = a.cur_xid();
        assert!(sub.is_valid() && sub != top, "the row lock assigned a subxid");
        assert_eq!(e.subtrans.get_parent(sub).unwrap(), top, "its parent is in pg_subtrans");
        b.begin();
        let err =
            b.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
        assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
        b.rollback().unwrap();
        a.rollback_to_savepoint("sp").unwrap();
        assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Aborted, _))), "the subxid aborted");
        assert_eq!(e.lmgr.waiting_for(BackendId(1)), None);
        b.begin();
        let got = b.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
        assert_eq!(got[0][0], Value::Int(1), "the subtransaction's FOR UPDATE is gone");
        b.rollback().unwrap();
        b.begin();
        let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
        assert!(err.to_string().starts_with("could not obtain lock on row"), "KEY SHARE kept: {err}");
        b.rollback().unwrap();
        assert!(a.rollback_to_savepoint("nope").unwrap_err().to_string().contains("does not exist"));
        a.commit().unwrap();
        assert!(matches!(e.clog.get_status(top), Ok((XidStatus::Committed, _))));
        assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Aborted, _))), "stays aborted");
    }

    /// A released savepoint's row lock and subxid stay until the transaction ends, and the
    /// subxid commits with the top level.
    #[test]
    fn a_released_subtransactions_lock_is_kept_until_commit() {
        let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
        let mut a = table(&e);
        let mut b = e.session(BackendId(1)).unwrap();
        a.begin();
        a.savepoint("outer").unwrap();
        a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
        let sub = a.cur_xid();
        a.release_savepoint("outer").unwrap();
        assert_eq!(a.subxact_depth(), 0);
        assert!(a.release_savepoint("outer").unwrap_err().to_string().contains("does not exist"));
        b.begin();
        let err = b.select_rows(&query(Some((KeyShare, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
        assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
        b.rollback().unwrap();
        a.commit().unwrap();
        assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Committed, _))), "committed with the top");
        b.begin();
        let got = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
        assert_eq!(got[0][0], Value::Int(1));
        b.commit().unwrap();
    }

    /// A session blocked on a row a subtransaction locked sleeps on the subxid's lock and is
    /// woken by `ROLLBACK TO`, before the locker's transaction ends.
    #[test]
    fn a_waiter_on_a_subxid_wakes_at_rollback_to() {
        let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
        let mut a = table(&e);
        a.begin();
        a.savepoint("sp").unwrap();
        a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
        let sub = a.cur_xid();
        let e2 = Arc::clone(&e);
        let waiter = std::thread::spawn(move || {
            let mut b = e2.session(BackendId(1)).unwrap();
            b.begin();
            let got = b.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all);
            b.commit().unwrap();
            got.map(|rows| rows[0][0].clone())
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while e.lmgr.waiting_for(BackendId(1)).map(|w| w.0) != Some(LockTag::transaction(sub)) {
            assert!(std::time::Instant::now() < deadline, "the waiter never slept on the subxid's lock");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        a.rollback_to_savepoint("sp").unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), Value::Int(1), "woken while a's transaction runs");
        assert!(a.in_transaction());
        a.commit().unwrap();
    }
}
