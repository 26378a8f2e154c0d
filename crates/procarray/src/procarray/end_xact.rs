//! The end of a transaction: clearing the member's xid and xmin and advancing
//! `latestCompletedXid` (`ProcArrayEndTransaction`), by the backend itself, a FlexLock releaser
//! or a group leader (9.6's group XID clearing), per [`EndXactStrategy`](crate::EndXactStrategy).
//!
//! Locks touched: `ProcArrayLock` exclusive (taken by the ending backend, the FlexLock releaser
//! or the group leader); never `XidGenLock`.

use crate::sync::Ordering;

use lockstack_common::TransactionId;
use lockstack_lwlock::{FlexRole, GroupRole, LwLockMode};

use super::{Backend, EndXactOutcome, EndXactRequest, EndXactRole, Hot, ProcArray};
use crate::config::EndXactStrategy;
use crate::proc::{PgProc, PgXact};

impl ProcArray {
    /// `ProcArrayEndTransactionInternal`: clears slot `req.pgprocno` and advances
    /// `latest_completed_xid`. Caller holds ProcArrayLock exclusive (directly, as a FlexLock
    /// releaser, or as a group leader).
    pub(super) fn end_xact_internal(&self, req: &mut EndXactRequest) {
        let _cost = lockstack_common::sync::hook::pg_region("procarray.end_transaction");
        let p = req.pgprocno as usize;
        let proc = &self.procs[p];
        match &self.hot {
            Hot::Pgproc => clear_pgproc(proc),
            Hot::Pgxact(x) => clear_pgxact(&x[p]),
            Hot::PgxactPadded(x) => clear_pgxact(&x[p]),
            Hot::Dense(d) => {
                let off = proc.pgxactoff.load(Ordering::Relaxed) as usize;
                d.xids[off].store(0, Ordering::Relaxed);
                let s = &d.subxid_states[off];
                // Avoid dirtying shared lines that are already clear (PG does the same).
                if s.count.load(Ordering::Relaxed) != 0 {
                    s.count.store(0, Ordering::Relaxed);
                }
                if s.overflowed.load(Ordering::Relaxed) {
                    s.overflowed.store(false, Ordering::Relaxed);
                }
                if d.status_flags[off].load(Ordering::Relaxed) != 0 {
                    d.status_flags[off].store(0, Ordering::Relaxed);
                }
                clear_pgproc(proc);
            }
        }
        proc.lxid.store(0, Ordering::Relaxed);
        self.advance_latest_completed(req.latest_xid);
        let c = self.transam.xact_completion_count.load(Ordering::Relaxed);
        self.transam.xact_completion_count.store(c + 1, Ordering::Relaxed);
    }
    /// `MaintainLatestCompletedXid` (ProcArrayLock exclusive held).
    pub(super) fn advance_latest_completed(&self, latest_xid: TransactionId) {
        let cur = TransactionId(self.transam.latest_completed_xid.load(Ordering::Relaxed));
        if latest_xid.follows(cur) {
            self.transam.latest_completed_xid.store(latest_xid.0, Ordering::Relaxed);
        }
    }
}

pub(super) fn clear_pgproc(proc: &PgProc) {
    proc.xid.store(0, Ordering::Relaxed);
    proc.xmin.store(0, Ordering::Relaxed);
    if proc.vacuum_flags.load(Ordering::Relaxed) != 0 {
        proc.vacuum_flags.store(0, Ordering::Relaxed);
    }
    if proc.subxid_count.load(Ordering::Relaxed) != 0 {
        proc.subxid_count.store(0, Ordering::Relaxed);
    }
    if proc.subxid_overflowed.load(Ordering::Relaxed) {
        proc.subxid_overflowed.store(false, Ordering::Relaxed);
    }
}

pub(super) fn clear_pgxact(x: &PgXact) {
    x.xid.store(0, Ordering::Relaxed);
    x.xmin.store(0, Ordering::Relaxed);
    if x.vacuum_flags.load(Ordering::Relaxed) != 0 {
        x.vacuum_flags.store(0, Ordering::Relaxed);
    }
    if x.delay_chkpt.load(Ordering::Relaxed) {
        x.delay_chkpt.store(false, Ordering::Relaxed);
    }
    if x.nxids.load(Ordering::Relaxed) != 0 {
        x.nxids.store(0, Ordering::Relaxed);
    }
    if x.overflowed.load(Ordering::Relaxed) {
        x.overflowed.store(false, Ordering::Relaxed);
    }
}

impl Backend {
    /// `ProcArrayEndTransaction` (commit or abort alike: the ProcArray does not care which; CLOG
    /// does). Without an xid, clears xmin without any lock. With one, clears the entry under
    /// ProcArrayLock exclusive by the configured [`EndXactStrategy`], advancing
    /// `latest_completed_xid` to the newest xid of the tree and bumping the completion count.
    pub fn end_transaction(&mut self) -> EndXactOutcome {
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let xid = self.xid;
        if !xid.is_valid() {
            pa.xmin_slot(p).store(0, Ordering::Relaxed);
            pa.procs[p].lxid.store(0, Ordering::Relaxed);
            if pa.procs[p].vacuum_flags.load(Ordering::Relaxed) != 0 {
                // 14: the shared copy of the flags changes only under ProcArrayLock exclusive.
                self.store_vacuum_flags(0);
            }
            self.stats.end_readonly.incr();
            return EndXactOutcome { xid, latest_xid: xid, role: EndXactRole::ReadOnly };
        }
        let mut latest = xid;
        for &s in &self.subxids {
            if s.follows(latest) {
                latest = s;
            }
        }
        let req = EndXactRequest { pgprocno: self.pgprocno, latest_xid: latest };
        let role = match pa.cfg.end_xact {
            EndXactStrategy::Exclusive => {
                let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
                pa.end_xact_internal(&mut { req });
                pa.release_pa(held);
                self.stats.end_exclusive.incr();
                EndXactRole::Exclusive
            }
            EndXactStrategy::FlexLock => {
                let (_, r) = pa.proc_array_lock.run(p, req, |r| pa.end_xact_internal(r));
                match r {
                    FlexRole::Direct => {
                        self.stats.end_flex_direct.incr();
                        EndXactRole::FlexDirect
                    }
                    FlexRole::Queued => {
                        self.stats.end_flex_queued.incr();
                        EndXactRole::FlexQueued
                    }
                }
            }
            EndXactStrategy::GroupClear => {
                let (_, r) = pa.group.run(p, pa.proc_array_lock.lock(), req, |r| pa.end_xact_internal(r));
                match r {
                    GroupRole::Alone => {
                        self.stats.end_group_alone.incr();
                        EndXactRole::GroupAlone
                    }
                    GroupRole::Leader { members } => {
                        self.stats.end_group_leader.incr();
                        self.stats.end_group_led_members.add(members as u64);
                        EndXactRole::GroupLeader { members }
                    }
                    GroupRole::Follower => {
                        self.stats.end_group_follower.incr();
                        EndXactRole::GroupFollower
                    }
                }
            }
        };
        self.xid = TransactionId::INVALID;
        self.subxids.clear();
        self.n_cached = 0;
        self.overflowed = false;
        EndXactOutcome { xid, latest_xid: latest, role }
    }
}
