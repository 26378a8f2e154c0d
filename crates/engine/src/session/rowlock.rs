//! Row locks on user tables: the four strengths and their conflict table, the wait policies,
//! and `heap_lock_tuple` with its update-chain walk (`heap_lock_updated_tuple`). Touches the
//! buffer content lock of the row's page (exclusive while stamping an xmax), the heavyweight
//! tuple lock (only while waiting), the holders' xid locks (waited on), and the MultiXact
//! store (a multi for compatible lockers). The rules are in user.rs's header and
//! docs/engine.md, "User tables".

use super::*;
use crate::usertable::{UserTable, Value, decode_row};

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
    pub(super) fn status(self) -> MultiXactStatus {
        match self {
            RowLockStrength::KeyShare => MultiXactStatus::ForKeyShare,
            RowLockStrength::Share => MultiXactStatus::ForShare,
            RowLockStrength::NoKeyUpdate => MultiXactStatus::ForNoKeyUpdate,
            RowLockStrength::Update => MultiXactStatus::ForUpdate,
        }
    }

    /// The strength a member holds the row in (a non-key updater as `FOR NO KEY UPDATE`).
    pub(super) fn of_status(s: MultiXactStatus) -> RowLockStrength {
        match s {
            MultiXactStatus::ForKeyShare => RowLockStrength::KeyShare,
            MultiXactStatus::ForShare => RowLockStrength::Share,
            MultiXactStatus::ForNoKeyUpdate | MultiXactStatus::NoKeyUpdate => RowLockStrength::NoKeyUpdate,
            MultiXactStatus::ForUpdate | MultiXactStatus::Update => RowLockStrength::Update,
        }
    }

    /// The xmax infomask bits of a lock-only xmax in this strength, and whether
    /// `HEAP_KEYS_UPDATED` goes with them (`compute_new_xmax_infomask`).
    pub(super) fn bits(self) -> (u16, bool) {
        match self {
            RowLockStrength::KeyShare => (visibility::XMAX_KEYSHR_LOCK, false),
            RowLockStrength::Share => (visibility::XMAX_SHR_LOCK, false),
            RowLockStrength::NoKeyUpdate => (visibility::XMAX_EXCL_LOCK, false),
            RowLockStrength::Update => (visibility::XMAX_EXCL_LOCK, true),
        }
    }

    /// The strength a single xid's xmax holds the row in, from its infomask bits.
    pub(super) fn of_xmax(infomask: u16, infomask2: u16) -> RowLockStrength {
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

/// What the lock check found for the version to lock.
pub(super) enum RowCheck {
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
pub(super) enum Locked {
    /// Locked this version (the newest), with its values.
    Row(Vec<Value>),
    /// `SKIP LOCKED` left it out.
    Skipped,
    /// Deleted by a committed transaction.
    Gone,
}

impl Session {
    /// `heap_lock_tuple` on user table `t` at `tid`, then along the update chain: returns the
    /// newest version's values once locked. Holds the tuple lock only while waiting, and
    /// releases it before returning, on every path.
    pub(super) fn lock_tuple(
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
        if let Some((tag, mode)) = tuplock {
            self.lm.unlock(tag, mode, false);
        }
        r
    }

    fn lock_tuple_inner(
        &mut self,
        t: &UserTable,
        mut tid: Tid,
        strength: RowLockStrength,
        wait: WaitPolicy,
        tuplock: &mut Option<(LockTag, LockMode)>,
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
                    let stamped = stamp_row_lock(
                        &self.engine,
                        &mut self.wal,
                        g.page_mut(),
                        tid,
                        (xid, self.cid),
                        strength,
                        multi,
                    );
                    if let Err(e) = stamped {
                        drop(g);
                        self.bb.release(buf);
                        return Err(e);
                    }
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
                        if let Some((tag, mode)) = newer_tuplock {
                            self.lm.unlock(tag, mode, false);
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
                    if let Some((tag, mode)) = tuplock.take() {
                        self.lm.unlock(tag, mode, false);
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
                    if !self.wait_for_holders(t.heap, tid, strength, wait, holders, upgrading, tuplock)? {
                        return if wait == WaitPolicy::Skip { Ok(Locked::Skipped) } else { Err(no_row()) };
                    }
                }
            }
        }
    }

    /// The wait of `heap_lock_tuple`, `heap_update` and `heap_delete` (heapam.c, 9.3-18) for
    /// the version at `tid` of relation `rel`, which `holders` (running transactions) hold in a
    /// strength that conflicts with `strength`: first the heavyweight tuple lock in
    /// `strength`'s mode (`heap_acquire_tuplock`; not when `upgrading`, PostgreSQL 12+'s
    /// `skip_tuple_lock`, nor when `tuplock` already holds it), so that one waiter per version
    /// sleeps on the holders and the others queue behind it; then each holder's xid lock in
    /// turn (`XactLockTableWait`, `MultiXactIdWait`). The one wait loop of every row lock and
    /// row change, on user tables and on pgbench's.
    ///
    /// Returns false when `wait` is NOWAIT or SKIP LOCKED and either lock would have made it
    /// wait (the caller errs or skips the row). The tuple lock taken stays in `tuplock` (with
    /// its mode) for the caller to release once it is done with the version.
    ///
    /// # Errors
    /// Lock errors (deadlock, lock timeout, statement timeout); pg_subtrans errors.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn wait_for_holders(
        &mut self,
        rel: lockstack_common::Oid,
        tid: Tid,
        strength: RowLockStrength,
        wait: WaitPolicy,
        holders: Vec<TransactionId>,
        upgrading: bool,
        tuplock: &mut Option<(LockTag, LockMode)>,
    ) -> Result<bool, EngineError> {
        if tuplock.is_none() && !upgrading {
            let db = self.engine.lmgr.database();
            let tag = LockTag::tuple(db, rel, BlockNumber(tid.block), tid.offset);
            let opts = LockOptions { session: false, dont_wait: wait != WaitPolicy::Block };
            match self.lm.lock(tag, strength.hwlock(), opts) {
                Ok(_) => *tuplock = Some((tag, strength.hwlock())),
                Err(lockstack_lmgr::LockError::NotAvailable { .. }) => return Ok(false),
                Err(e) => return Err(e.into()),
            }
        }
        for other in holders {
            if wait == WaitPolicy::Block {
                self.xact_lock_table_wait(other)?;
            } else if !self.conditional_xact_lock_table_wait(other)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// For a change by `xid` of a version this transaction already holds strongly enough: the
    /// lockers the change must keep in the version's xmax, that is running lockers other than
    /// `xid` itself (an enclosing or earlier subtransaction's lock, or another transaction's
    /// compatible one); `None` when there are none.
    pub(super) fn own_other_lockers(
        &self,
        h: &tuple::TupleHeader,
        xid: TransactionId,
    ) -> Option<Vec<MultiXactMember>> {
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
    pub(super) fn row_lock_check(
        &self,
        h: &tuple::TupleHeader,
        want: RowLockStrength,
    ) -> Result<RowCheck, EngineError> {
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

/// Stamps this transaction's row lock of `strength` on the version at `tid` of the
/// exclusively locked heap page `p` and WAL-logs it (`XLOG_HEAP_LOCK`), setting the page's LSN;
/// the caller marks the buffer dirty. `me` is the locking xid and its command id; `multi`, when
/// given, is the membership (us included) of the new MultiXact that holds the row instead of
/// our xid alone (`compute_new_xmax_infomask`, heapam.c 9.3-18). Used by the row locks of user
/// tables and of pgbench's.
///
/// # Errors
/// [`EngineError::Table`] if `tid` names no tuple on `p`; WAL errors.
pub(super) fn stamp_row_lock(
    engine: &Engine,
    wal: &mut WalBackend,
    p: &mut [u8],
    tid: Tid,
    (xid, cid): (TransactionId, u32),
    strength: RowLockStrength,
    multi: Option<Vec<MultiXactMember>>,
) -> Result<(), EngineError> {
    let item = page::get_item_mut(p, tid.offset).ok_or(EngineError::Table(tables::TableError::Corrupt(
        tables::CorruptRow::NoTupleToLock { block: tid.block, offset: tid.offset },
    )))?;
    match multi {
        Some(members) => {
            let multi = engine.multixact.create(&members);
            stamp_multi(item, multi, &members, cid);
        }
        None => {
            let (bits, keys) = strength.bits();
            tuple::set_xmax(item, xid, cid, Some(bits));
            tuple::set_keys_updated(item, keys);
        }
    }
    let lsn = wal.insert(&Record { rmid: RM_HEAP, info: XLOG_HEAP_LOCK, xid, data: &tid.to_bytes() })?;
    page::set_lsn(p, lsn.0);
    Ok(())
}

/// Stamps `multi` (of `members`) as the xmax of `t` at command `cmax`: lock-only with the
/// strongest member's strength bits (`compute_new_xmax_infomask`), or, with an updater
/// member, an updating xmax (`HEAP_XMAX_IS_MULTI` without `HEAP_XMAX_LOCK_ONLY`).
pub(super) fn stamp_multi(t: &mut [u8], multi: MultiXactId, members: &[MultiXactMember], cmax: u32) {
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
pub(super) fn resolve_updater(engine: &Engine, mut h: TupleXactInfo) -> TupleXactInfo {
    use visibility::{XMAX_INVALID, XMAX_IS_MULTI, XMAX_LOCK_ONLY};
    if h.infomask & (XMAX_IS_MULTI | XMAX_LOCK_ONLY | XMAX_INVALID) == XMAX_IS_MULTI
        && let Some(x) = engine.multixact.update_xid(MultiXactId(h.xmax.0))
    {
        h.infomask &= !XMAX_IS_MULTI;
        h.xmax = x;
    }
    h
}
