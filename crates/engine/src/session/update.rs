//! The write path of a [`Session`] on pgbench's tables: `UPDATE` by key (`heap_update` with its
//! `EvalPlanQual` retry at READ COMMITTED), the row locks of `SELECT ... FOR KEY SHARE|SHARE|NO
//! KEY UPDATE|UPDATE` (`heap_lock_tuple`), non-HOT placement of a new version, opportunistic
//! pruning, and the history `INSERT`. Touches the heap page's buffer content lock (exclusive
//! while changing a version), the tuple lock and the holders' xid locks (only while waiting,
//! through rowlock.rs's one wait loop), the MultiXact store, WAL insertion and the free-page
//! list. The strength check and the wait are rowlock.rs's, shared with user tables.

use super::rowlock::{RowCheck, resolve_updater, stamp_row_lock};
use super::*;

impl Session {
    /// `UPDATE t SET col = col + delta WHERE key = k`: true if a row was updated.
    ///
    /// Every pgbench column is `int4`, so, as in PostgreSQL (`int4pl`), a sum outside
    /// `i32::MIN..=i32::MAX` is an error and the row is left unchanged.
    ///
    /// # Errors
    /// [`EngineError::Usage`] "integer out of range" for such a sum; lock errors while waiting
    /// for the row; buffer, WAL and CLOG errors.
    pub fn update_add(&mut self, t: TableId, key: i64, col: usize, delta: i64) -> Result<bool, EngineError> {
        self.top_level_only("a statement on pgbench's tables")?;
        self.statement(|s| {
            s.lock_table(t, LockMode::RowExclusive)?;
            let r = s.modify_row(
                t,
                key,
                |cols| {
                    let mut c = cols.to_vec();
                    c[col] = c[col]
                        .checked_add(delta)
                        .filter(|v| i32::try_from(*v).is_ok())
                        .ok_or_else(|| EngineError::Usage("integer out of range".into()))?;
                    Ok(Some(c))
                },
                None,
                WaitPolicy::Block,
            )?;
            Ok(r.is_some())
        })
    }

    /// Finds the row, waits out concurrent holders, then either writes a new version built by
    /// `new_cols` (an update, `lock` is `None`) or only locks the row in strength `lock`.
    /// Returns the columns of the version it acted on.
    ///
    /// The strength check and the wait are those of user tables ([`Session::row_lock_check`],
    /// [`Session::wait_for_holders`]): before it waits for another transaction that holds the
    /// row, it takes the heavyweight tuple lock (`LOCKTAG_TUPLE` on the version's TID) in the
    /// mode of the strength, as `heap_update` and `heap_lock_tuple` do through
    /// `heap_acquire_tuplock` (heapam.c, 9.3-18): one waiter per row version sleeps on the
    /// holder's xid, the others queue on the tuple lock and are let through one at a time.
    /// The tuple lock is held only while the version it is on is the one acted upon, and is
    /// released before this returns, on every path, errors included (`UnlockTupleTuplock`).
    pub(super) fn modify_row(
        &mut self,
        t: TableId,
        key: i64,
        new_cols: impl Fn(&[i64]) -> Result<Option<Vec<i64>>, EngineError>,
        lock: Option<RowLockStrength>,
        wait: WaitPolicy,
    ) -> Result<Option<Row>, EngineError> {
        let mut tuplock: Option<(LockTag, LockMode)> = None;
        let r = self.modify_row_locked(t, key, new_cols, (lock, wait), &mut tuplock);
        if let Some((tag, mode)) = tuplock {
            self.lm.unlock(tag, mode, false);
        }
        r
    }

    /// The body of [`modify_row`](Self::modify_row); `tuplock` is the tuple lock it holds
    /// (with its mode), which the caller releases.
    ///
    /// Compatible lockers share the row through a new MultiXact (9.3+). Departure: the engine
    /// makes no MultiXact with an updater member on pgbench's tables (their reads, pruning and
    /// hint setting read a multi as lock-only), so where PostgreSQL lets an `UPDATE` in beside
    /// running `FOR KEY SHARE` lockers, or a `FOR KEY SHARE` in beside a running non-key
    /// updater, this waits for them (`pgbench_no_updater_multi`).
    fn modify_row_locked(
        &mut self,
        t: TableId,
        key: i64,
        new_cols: impl Fn(&[i64]) -> Result<Option<Vec<i64>>, EngineError>,
        (lock, wait): (Option<RowLockStrength>, WaitPolicy),
        tuplock: &mut Option<(LockTag, LockMode)>,
    ) -> Result<Option<Row>, EngineError> {
        // Every update of pgbench's tables leaves the key alone (`LockTupleNoKeyExclusive`).
        let strength = lock.unwrap_or(RowLockStrength::NoKeyUpdate);
        let xid = self.ensure_xid()?;
        let rel = t.heap_oid();
        loop {
            let Some((tid, _, prunable)) = self.fetch_visible(t, key)? else { return Ok(None) };
            // heap_update and heap_lock_tuple: before this transaction's xid can go into a
            // multi (ours or another backend's), record the oldest multi it may belong to.
            // Takes MultiXactGenLock shared once per transaction.
            self.engine.multixact.set_oldest_member(self.id);
            if let Some((tag, mode)) = *tuplock
                && (tag.field3, tag.field4) != (tid.block, tid.offset)
            {
                // The version we queued for was replaced by a committed update: PostgreSQL's
                // heap_update returns TM_Updated and releases the tuple lock before
                // EvalPlanQual goes on to the newer version.
                self.lm.unlock(tag, mode, false);
                *tuplock = None;
            }
            let buf = self.bb.read_block(rel, BlockNumber(tid.block))?;
            if prunable {
                let _ = self.prune_opt(buf);
            }
            let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
            let vm = &self.engine.table(t).vm;
            if page::is_all_visible(g.page()) && !vm.pin_ok(tid.block, &self.vmbuf) {
                // Pin the visibility-map page without holding the heap page's lock (it may
                // need I/O), then look again (heap_update's loop).
                drop(g);
                vm.pin(&self.bb, tid.block, &mut self.vmbuf)?;
                g = self.bb.lock(buf, LwLockMode::Exclusive);
            }
            // We hold the page exclusively anyway: record what CLOG now proves about its
            // tuples, so that later readers (who only share-lock) need not ask CLOG again.
            {
                let snap = std::mem::take(&mut self.snapshot);
                let ctx =
                    VisCtx { snap: &snap, engine: &self.engine, xid: self.xid, subxids: &[], cid: self.cid };
                let hinted = set_page_hints(g.page_mut(), &ctx);
                self.snapshot = snap;
                if hinted {
                    g.mark_dirty_hint();
                }
            }
            let tup = page::get_item(g.page(), tid.offset).map(|x| x.to_vec());
            let Some(tup) = tup else {
                drop(g);
                self.bb.release(buf);
                continue;
            };
            let h = tuple::header(&tup);
            let check = match self.row_lock_check(&h, strength) {
                // Our own lock strong enough: an update goes ahead, keeping the other
                // lockers' locks (which `pgbench_no_updater_multi` turns into a wait).
                Ok(RowCheck::Held) if lock.is_none() => RowCheck::Free(self.own_other_lockers(&h, xid)),
                Ok(c) => c,
                Err(e) => {
                    drop(g);
                    self.bb.release(buf);
                    return Err(e);
                }
            };
            match self.pgbench_no_updater_multi(check, &h, lock.is_none()) {
                RowCheck::Wait(holders, upgrading) => {
                    drop(g);
                    self.bb.release(buf);
                    // NOWAIT and SKIP LOCKED give up where the tuple lock or a holder would
                    // make them wait (`heap_lock_tuple`'s LockWaitError / LockWaitSkip).
                    if !self.wait_for_holders(rel, tid, strength, wait, holders, upgrading, tuplock)? {
                        return match wait {
                            WaitPolicy::Skip => Ok(None),
                            _ => Err(EngineError::Sql(format!(
                                "could not obtain lock on row in relation \"{}\"",
                                t.name()
                            ))),
                        };
                    }
                    self.take_snapshot();
                    continue;
                }
                RowCheck::Updated(_) => {
                    drop(g);
                    self.bb.release(buf);
                    // The committed transaction that replaced the version (an updating
                    // multi's updater member).
                    let updater = resolve_updater(&self.engine, h.xact).xmax;
                    self.take_snapshot();
                    // The updater's commit is in CLOG, but if it has not yet left the ProcArray
                    // the new snapshot still sees it running, so the same old version is found
                    // visible again, and again: a loop of snapshots that never waits, and whose
                    // ProcArrayLock traffic starves the updater's own exclusive end of
                    // transaction (0 tps at 1,000 clients under pg96). Wait on its xid lock,
                    // which it releases only after leaving the ProcArray, as PostgreSQL's
                    // EvalPlanQual fetch does for a newest version whose xmin is still in
                    // progress (`heapam_tuple_lock` 12-18, `EvalPlanQualFetch` 9.x:
                    // `XactLockTableWait(SnapshotDirty.xmin)`).
                    if xid_in_mvcc_snapshot(updater, &self.snapshot, &*self.engine.subtrans).unwrap_or(true) {
                        self.lm.xact_lock_table_wait(updater)?;
                        self.take_snapshot();
                    }
                    continue;
                }
                RowCheck::Held => {
                    drop(g);
                    self.bb.release(buf);
                    return Ok(Some(tuple::row(&tup)));
                }
                RowCheck::Free(multi) if lock.is_some() => {
                    let stamped = stamp_row_lock(
                        &self.engine,
                        &mut self.wal,
                        g.page_mut(),
                        tid,
                        (xid, self.cid),
                        strength,
                        multi,
                    );
                    if stamped.is_ok() {
                        g.mark_dirty();
                    }
                    drop(g);
                    self.bb.release(buf);
                    return stamped.map(|()| Some(tuple::row(&tup)));
                }
                // Free, with no other locker to keep (`pgbench_no_updater_multi`).
                RowCheck::Free(_) => {}
            }
            let cols = tuple::row(&tup);
            let built = new_cols(&cols).and_then(|v| {
                v.ok_or_else(|| EngineError::Usage(format!("an update of {} built no new row", t.name())))
            });
            let values = match built {
                Ok(v) => v,
                Err(e) => {
                    // Nothing is changed yet: give the page and the pin back and fail.
                    drop(g);
                    self.bb.release(buf);
                    return Err(e);
                }
            };
            // HOT if the new version fits on this page.
            let mut newtup = tuple::form_tuple(xid, self.cid, &values, t.filler(), HEAP_ONLY_TUPLE);
            let fits = page::free_space(g.page()) >= page::maxalign(newtup.len());
            let p = g.page_mut();
            let (new_tid, hot) = if fits {
                let off = page::add_item(p, &newtup, None).expect(
                    "free_space was checked above under the same exclusive lock, so the version fits",
                );
                let nt = Tid { block: tid.block, offset: off };
                tuple::set_ctid(
                    page::get_item_mut(p, off)
                        .expect("add_item just returned this offset under the same exclusive lock"),
                    nt,
                );
                (nt, true)
            } else {
                newtup[22..24].copy_from_slice(&0u16.to_le_bytes());
                (Tid { block: u32::MAX, offset: 0 }, false)
            };
            let old = page::get_item_mut(p, tid.offset).expect("the page has been exclusively locked since this tuple was read from it, so its line pointer is still there");
            tuple::set_xmax(old, xid, self.cid, None);
            if hot {
                tuple::set_hot_updated(old, new_tid);
            } else {
                // An aborted HOT update may have left the flag and a link to its version.
                tuple::clear_hot_updated(old);
            }
            let cleared = page::is_all_visible(p);
            if cleared {
                page::clear_all_visible(p);
            }
            if !hot {
                page::set_prune_xid(p, xid.0);
            }
            let info = if hot { XLOG_HEAP_HOT_UPDATE } else { XLOG_HEAP_UPDATE };
            let mut payload = tid.to_bytes().to_vec();
            payload.extend_from_slice(&newtup);
            let lsn = self.wal.insert(&Record { rmid: RM_HEAP, info, xid, data: &payload })?;
            page::set_lsn(g.page_mut(), lsn.0);
            if hot {
                page::set_prune_xid(g.page_mut(), xid.0);
            }
            g.mark_dirty();
            drop(g);
            if cleared {
                let vm = &self.engine.table(t).vm;
                vm.clear_bits(
                    &self.bb,
                    tid.block,
                    &self.vmbuf,
                    VISIBILITYMAP_ALL_VISIBLE | VISIBILITYMAP_ALL_FROZEN,
                );
            }
            if !hot {
                // The new version goes elsewhere; link the old one to it and index it.
                let nt = self.heap_insert_elsewhere(t, &mut newtup, tid.block)?;
                let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
                let old = page::get_item_mut(g.page_mut(), tid.offset).expect("the page stayed pinned and a version's line pointer is only reclaimed by pruning, which needs the cleanup lock our pin excludes");
                tuple::set_ctid(old, nt);
                g.mark_dirty();
                drop(g);
                if let Some(index) = &self.engine.table(t).index {
                    index.insert(&self.bb, key, nt)?;
                }
            }
            self.bb.release(buf);
            return Ok(Some(cols));
        }
    }

    /// Is `xid` still running, as CLOG says (`TransactionIdIsInProgress` for a member)?
    pub(super) fn xid_running(&self, xid: TransactionId) -> bool {
        !matches!(self.engine.clog.get_status(xid), Ok((XidStatus::Committed | XidStatus::Aborted, _)))
    }

    /// The departure of pgbench's tables from `heap_lock_tuple` / `heap_update`: no MultiXact
    /// with an updater member. `check` is [`Session::row_lock_check`]'s answer for version `h`
    /// (`updating` for an `UPDATE`, with `Free` carrying the other lockers to keep); where it
    /// would make a multi with an updater (a `FOR KEY SHARE` beside a running non-key updater,
    /// or an update beside running `FOR KEY SHARE` lockers), the answer becomes a wait for those
    /// other members, without the tuple lock if this transaction holds the row already (the
    /// upgrade case of `heap_lock_tuple`). Other answers pass unchanged.
    fn pgbench_no_updater_multi(&self, check: RowCheck, h: &tuple::TupleHeader, updating: bool) -> RowCheck {
        let RowCheck::Free(Some(members)) = check else { return check };
        if !updating && !members.iter().any(|m| m.status.is_update()) {
            return RowCheck::Free(Some(members));
        }
        let me = self.xid;
        let mut others: Vec<TransactionId> = members.iter().map(|m| m.xid).filter(|x| *x != me).collect();
        others.dedup();
        if others.is_empty() {
            return RowCheck::Free(None);
        }
        let x = &h.xact;
        let mine = x.xmax == me
            || (x.infomask & visibility::XMAX_IS_MULTI != 0
                && self.engine.multixact.members(MultiXactId(x.xmax.0)).iter().any(|m| m.xid == me));
        RowCheck::Wait(others, mine)
    }

    /// Prunes `buf`'s page if the cleanup lock is free right now (`heap_page_prune_opt`):
    /// never waits, since pruning is only an optimisation.
    /// Returns true if the page was pruned and has at least a quarter of a page free.
    pub(super) fn prune_opt(&mut self, buf: lockstack_bufmgr::Buffer) -> bool {
        let mut roomy = false;
        if let Some(mut g) = self.bb.conditional_lock_for_cleanup(buf) {
            let horizon = self.engine.procarray.get_oldest_xmin();
            let pr = Pruner { engine: &self.engine, horizon };
            let removed = tuple::prune_page(g.page_mut(), &pr);
            if removed > 0 {
                g.mark_dirty();
            }
            // Keep the hint while something on the page may still become prunable.
            let any_xmax = (1..=page::max_offset_number(g.page())).any(|o| {
                page::item_id(g.page(), o).flags == LpFlags::Normal
                    && tuple::header(page::get_item(g.page(), o).expect(
                        "the offset's line pointer was just checked to be LP_NORMAL, so it has a tuple",
                    ))
                    .xact
                    .xmax
                    .is_valid()
            });
            if !any_xmax {
                page::set_prune_xid(g.page_mut(), 0);
            }
            roomy = removed > 0 && page::free_space(g.page()) >= page::BLCKSZ / 4;
        }
        roomy
    }

    /// Puts `tup` on a page of `t` other than `avoid` (the relation's last page, or a new one)
    /// and returns its TID.
    fn heap_insert_elsewhere(&mut self, t: TableId, tup: &mut [u8], avoid: u32) -> Result<Tid, EngineError> {
        let rel = t.heap_oid();
        // Up to a few remembered pages, newest first: prune (if the cleanup lock is free), then
        // use the page if the version fits. Pages that still hold dead versions go back.
        let (mut revisit, mut roomy) = (Vec::new(), Vec::new());
        let mut placed = None;
        for _ in 0..FREE_PAGES_TRIES {
            let Some(block) = self.engine.free_pages(t).pop() else { break };
            if block == avoid {
                roomy.push(block);
                continue;
            }
            let buf = self.bb.read_block(rel, BlockNumber(block))?;
            self.prune_opt(buf);
            let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
            let fits =
                page::free_space(g.page()) >= page::maxalign(tup.len()) && !page::is_all_visible(g.page());
            if fits {
                let off = page::add_item(g.page_mut(), tup, None)
                    .expect("free_space was checked just above under the same exclusive lock");
                let tid = Tid { block, offset: off };
                tuple::set_ctid(
                    page::get_item_mut(g.page_mut(), off)
                        .expect("add_item just returned this offset under the same exclusive lock"),
                    tid,
                );
                g.mark_dirty();
                placed = Some(tid);
            }
            if page::free_space(g.page()) >= page::BLCKSZ / 4 {
                roomy.push(block);
            } else if page::prune_xid(g.page()) != 0 {
                revisit.push(block);
            }
            drop(g);
            self.bb.release(buf);
            if placed.is_some() {
                break;
            }
        }
        {
            // Pages still waiting for their dead versions to pass the horizon go to the back of
            // the queue (tried last), pages with room to the front (tried first).
            let mut l = self.engine.free_pages(t);
            for b in revisit {
                if !l.contains(&b) && l.len() < FREE_PAGES_MAX {
                    l.insert(0, b);
                }
            }
            for b in roomy {
                if !l.contains(&b) && l.len() < FREE_PAGES_MAX {
                    l.push(b);
                }
            }
        }
        if let Some(tid) = placed {
            return Ok(tid);
        }
        let nblocks = self.engine.pool.nblocks(rel, ForkNumber::Main)?;
        if nblocks > 0 && nblocks - 1 != avoid {
            let last = nblocks - 1;
            let buf = self.bb.read_block(rel, BlockNumber(last))?;
            let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
            if page::free_space(g.page()) >= page::maxalign(tup.len()) && !page::is_all_visible(g.page()) {
                let off = page::add_item(g.page_mut(), tup, None)
                    .expect("free_space was checked just above under the same exclusive lock");
                let tid = Tid { block: last, offset: off };
                tuple::set_ctid(
                    page::get_item_mut(g.page_mut(), off)
                        .expect("add_item just returned this offset under the same exclusive lock"),
                    tid,
                );
                g.mark_dirty();
                drop(g);
                self.bb.release(buf);
                return Ok(tid);
            }
            drop(g);
            self.bb.release(buf);
        }
        let (buf, blk) = self.bb.extend(rel, ForkNumber::Main)?;
        let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
        page::init(g.page_mut(), 0);
        let off = page::add_item(g.page_mut(), tup, None)
            .expect("a freshly initialised page has room for any tuple the engine forms");
        let tid = Tid { block: blk.0, offset: off };
        tuple::set_ctid(
            page::get_item_mut(g.page_mut(), off)
                .expect("add_item just returned this offset under the same exclusive lock"),
            tid,
        );
        g.mark_dirty();
        drop(g);
        self.bb.release(buf);
        Ok(tid)
    }

    /// `INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (...)`.
    ///
    /// # Errors
    /// Buffer, WAL and CLOG errors.
    pub fn insert_history(&mut self, values: [i64; 5]) -> Result<(), EngineError> {
        self.top_level_only("a statement on pgbench's tables")?;
        self.statement(|s| {
            s.lock_table(TableId::History, LockMode::RowExclusive)?;
            let xid = s.ensure_xid()?;
            let rel = TableId::History.heap_oid();
            let mut tup = tuple::form_tuple(xid, s.cid, &values, TableId::History.filler(), 0);
            loop {
                let target = s.engine.history_target.load(Ordering::Relaxed);
                if target == u32::MAX {
                    // No target: extend, fill our row in, and only then publish the block
                    // (PostgreSQL's `RelationGetBufferForTuple` likewise initialises and uses
                    // a new page under its lock before other backends can find it in the FSM).
                    let (buf, blk) = s.bb.extend(rel, ForkNumber::Main)?;
                    let placed = s.history_add(buf, xid, &mut tup)?;
                    s.bb.release(buf);
                    s.engine.history_target.store(blk.0, Ordering::Relaxed);
                    if placed {
                        return Ok(());
                    }
                    continue;
                }
                let buf = s.bb.read_block(rel, BlockNumber(target))?;
                let placed = s.history_add(buf, xid, &mut tup)?;
                s.bb.release(buf);
                if placed {
                    return Ok(());
                }
                // Page full: move the shared target on (if nobody did yet).
                let _ = s.engine.history_target.compare_exchange(
                    target,
                    u32::MAX,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        })
    }

    /// Adds history tuple `tup` (its ctid set here) to the pinned page `buf` under its exclusive
    /// lock and WAL-logs it; false if the page is full. The page is initialised only if it is
    /// still new (`PageIsNew`, as `RelationGetBufferForTuple` checks): another backend may
    /// already have initialised it and put rows there, which initialising again would wipe.
    pub(super) fn history_add(
        &mut self,
        buf: lockstack_bufmgr::Buffer,
        xid: TransactionId,
        tup: &mut [u8],
    ) -> Result<bool, EngineError> {
        let mut g = self.bb.lock(buf, LwLockMode::Exclusive);
        if page::is_new(g.page()) {
            page::init(g.page_mut(), 0);
        }
        let Some(off) = page::add_item(g.page_mut(), tup, None) else { return Ok(false) };
        let tid = Tid { block: self.bb.tag(buf).block.0, offset: off };
        tuple::set_ctid(
            page::get_item_mut(g.page_mut(), off)
                .expect("add_item just returned this offset under the same exclusive lock"),
            tid,
        );
        tuple::set_ctid(tup, tid);
        let lsn = self.wal.insert(&Record { rmid: RM_HEAP, info: XLOG_HEAP_INSERT, xid, data: tup })?;
        page::set_lsn(g.page_mut(), lsn.0);
        g.mark_dirty();
        Ok(true)
    }
}

/// Sets, on every tuple of an exclusively locked heap page, the hint bits that
/// `satisfies_mvcc` can prove from CLOG (`SetHintBits`); returns whether any changed.
fn set_page_hints(p: &mut [u8], ctx: &VisCtx<'_>) -> bool {
    use visibility::{XMAX_COMMITTED, XMAX_INVALID, XMIN_COMMITTED, XMIN_INVALID};
    let mut changed = false;
    for off in 1..=page::max_offset_number(p) {
        if page::item_id(p, off).flags != LpFlags::Normal {
            continue;
        }
        let t = page::get_item_mut(p, off)
            .expect("the loop skipped every line pointer that is not LP_NORMAL, so this one has a tuple");
        let h = tuple::header(t).xact;
        let have_xmin = h.infomask & (XMIN_COMMITTED | XMIN_INVALID) != 0;
        let have_xmax = !h.xmax.is_valid() || h.infomask & (XMAX_COMMITTED | XMAX_INVALID) != 0;
        if have_xmin && have_xmax {
            continue;
        }
        let add = visibility::satisfies_mvcc(&h, ctx).set_hints & !h.infomask;
        if add != 0 {
            tuple::set_hint_bits(t, add);
            changed = true;
        }
    }
    changed
}
