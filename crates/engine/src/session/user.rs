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
//! Under REPEATABLE READ ([`Session::set_repeatable_read`]) a version the transaction's
//! snapshot saw that an invisible transaction has since updated or deleted is not followed:
//! the lock, update or delete fails with a serialization error. The row-lock machinery itself
//! (strengths, conflict check, `heap_lock_tuple`) is in `rowlock.rs`.
//!
//! Not modelled here: waiting for a concurrent inserter of the same primary key (reported as
//! a duplicate at once).

use super::rowlock::{Locked, RowCheck, resolve_updater, stamp_multi};
use super::*;
use crate::btree::BTree;
use crate::usertable::{TableDef, UserTable, Value, coerce, decode_row, encode_row, index_key};

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
                    vals.push(coerce(&t.def.name, c, v).map_err(|e| sql_err(e.into()))?);
                }
                if let Some(k) = t.def.primary_key
                    && s.key_is_live(&t, k, &vals[k])?
                {
                    return Err(sql_err(format!(
                        "duplicate key value violates unique constraint \"{}\"",
                        t.def.pkey_name()
                    )));
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
        tuple::set_ctid(
            page::get_item_mut(g.page_mut(), off)
                .expect("add_item just returned this offset under the same exclusive lock"),
            tid,
        );
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
                let tup = page::get_item(p, off).expect(
                    "the loop skipped every line pointer that is not LP_NORMAL, so this one has a tuple",
                );
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
                    // A blocking wait never gives up: its result is always true.
                    self.wait_for_holders(
                        t.heap,
                        tid,
                        strength,
                        WaitPolicy::Block,
                        holders,
                        upgrading,
                        tuplock,
                    )?;
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
                    let item = page::get_item_mut(g.page_mut(), tid.offset).expect("the page has been exclusively locked since this tuple was read from it, so its line pointer is still there");
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
                    let lsn = self.wal.insert(&Record { rmid: RM_HEAP, info, xid, data: &tid.to_bytes() })?;
                    page::set_lsn(g.page_mut(), lsn.0);
                    g.mark_dirty();
                    drop(g);
                    if let Some(v) = new {
                        let vals = t
                            .def
                            .columns
                            .iter()
                            .zip(v)
                            .map(|(c, x)| coerce(&t.def.name, c, x).map_err(|e| sql_err(e.into())))
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
                        let old = page::get_item_mut(g.page_mut(), tid.offset).expect("the page stayed pinned and a version's line pointer is only reclaimed by pruning, which needs the cleanup lock our pin excludes");
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
}

#[cfg(test)]
#[path = "user_tests.rs"]
mod tests;
