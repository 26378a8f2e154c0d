//! Starting a transaction and assigning xids: `GetNewTransactionId` with its extension hook, a
//! backend's top-level xid and subxids (cached up to `PGPROC_MAX_CACHED_SUBXIDS`, then
//! overflowed), and the abort of subtransactions.
//!
//! Locks touched: `XidGenLock` exclusive while an xid is taken and stored in the member's entry;
//! `ProcArrayLock` exclusive when aborted subxids leave the running set.

use crate::sync::Ordering;

use lockstack_common::{TransactionId, VirtualTransactionId};
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{Backend, Hot, ProcArray, ProcArrayError, XidExtendHook};
use crate::proc::PGPROC_MAX_CACHED_SUBXIDS;
use crate::sync::AtomicU8;

impl ProcArray {
    /// Installs the hook that `GetNewTransactionId` runs for every new xid under XidGenLock,
    /// before the xid is handed out (see [`XidExtendHook`]); a transaction engine passes its
    /// CLOG and SUBTRANS extension here, so that a status page always exists before any xid on
    /// it can be published, let alone commit. Set it before the first xid is assigned.
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtendHookSet`] if a hook is already installed (it is kept).
    pub fn set_xid_extend_hook(&self, hook: XidExtendHook) -> Result<(), ProcArrayError> {
        self.extend_hook.set(hook).map_err(|_| ProcArrayError::XidExtendHookSet)
    }
    /// `GetNewTransactionId`: takes XidGenLock, runs the extension hook for `nextXid`, hands it
    /// out, publishes it in slot `p` (top-level, or the subxid cache / overflow flag), and only
    /// then releases the lock. If the hook fails, nothing is consumed or published.
    pub(super) fn get_new_transaction_id(
        &self,
        p: usize,
        is_subxact: bool,
    ) -> Result<(TransactionId, bool), ProcArrayError> {
        let held = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let cost = lockstack_common::sync::hook::pg_region("procarray.xid_assign");
        let xid = TransactionId(self.transam.next_xid.load(Ordering::Relaxed));
        if let Some(hook) = self.extend_hook.get()
            && let Err(e) = hook(xid)
        {
            drop(cost);
            self.xid_gen_lock.release(held);
            return Err(ProcArrayError::XidExtend(e.to_string()));
        }
        self.transam.next_xid.store(xid.next().0, Ordering::Relaxed);
        let proc = &self.procs[p];
        let mut overflowed_now = false;
        if !is_subxact {
            match &self.hot {
                Hot::Pgproc => proc.xid.store(xid.0, Ordering::Relaxed),
                Hot::Pgxact(x) => x[p].xid.store(xid.0, Ordering::Relaxed),
                Hot::PgxactPadded(x) => x[p].xid.store(xid.0, Ordering::Relaxed),
                Hot::Dense(d) => {
                    let off = proc.pgxactoff.load(Ordering::Relaxed) as usize;
                    proc.xid.store(xid.0, Ordering::Relaxed);
                    d.xids[off].store(xid.0, Ordering::Relaxed);
                }
            }
        } else {
            // Only this backend writes its own count, so a relaxed read of it is exact.
            let (count, over): (&AtomicU8, &crate::sync::AtomicBool) = match &self.hot {
                Hot::Pgproc | Hot::Dense(_) => (&proc.subxid_count, &proc.subxid_overflowed),
                Hot::Pgxact(x) => (&x[p].nxids, &x[p].overflowed),
                Hot::PgxactPadded(x) => (&x[p].nxids, &x[p].overflowed),
            };
            let n = count.load(Ordering::Relaxed) as usize;
            let dense = match &self.hot {
                Hot::Dense(d) => Some(&d.subxid_states[proc.pgxactoff.load(Ordering::Relaxed) as usize]),
                _ => None,
            };
            if n < PGPROC_MAX_CACHED_SUBXIDS && !over.load(Ordering::Relaxed) {
                proc.subxids[n].store(xid.0, Ordering::Relaxed);
                // The xid must be visible before the count that covers it (PG's write barrier).
                count.store(n as u8 + 1, Ordering::Release);
                if let Some(s) = dense {
                    s.count.store(n as u8 + 1, Ordering::Release);
                }
            } else {
                over.store(true, Ordering::Relaxed);
                if let Some(s) = dense {
                    s.overflowed.store(true, Ordering::Relaxed);
                }
                overflowed_now = true;
            }
        }
        drop(cost);
        self.xid_gen_lock.release(held);
        Ok((xid, overflowed_now))
    }
}

impl Backend {
    /// Starts a transaction and returns its virtual xid (`backend/lxid`); no shared counter is
    /// touched (`StartTransaction` → `VirtualXactLockTableInsert`, 8.3+). Calling it inside an
    /// open transaction just returns the current vxid.
    pub fn start_transaction(&mut self) -> VirtualTransactionId {
        if !self.in_transaction() {
            self.lxid = self.lxid.next();
            self.pa.procs[self.pgprocno as usize].lxid.store(self.lxid.0, Ordering::Relaxed);
        }
        VirtualTransactionId { backend_id: self.id(), local_xid: self.lxid }
    }
    pub(super) fn in_transaction(&self) -> bool {
        self.pa.procs[self.pgprocno as usize].lxid.load(Ordering::Relaxed) != 0
    }
    /// `GetTopTransactionId` / `AssignTransactionId` for the top level: the current xid, assigned
    /// now (under XidGenLock, published before its release) if the transaction had none.
    ///
    /// # Panics
    /// If the ProcArray's [`XidExtendHook`] fails; use [`try_assign_xid`](Self::try_assign_xid)
    /// with a hook that can.
    pub fn assign_xid(&mut self) -> TransactionId {
        self.try_assign_xid().unwrap_or_else(|e| panic!("assign_xid: {e}"))
    }
    /// [`assign_xid`](Self::assign_xid) that reports a failing [`XidExtendHook`].
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtend`]: the transaction keeps no xid (a later call retries).
    pub fn try_assign_xid(&mut self) -> Result<TransactionId, ProcArrayError> {
        if !self.xid.is_valid() {
            self.start_transaction();
            let (xid, _) = self.pa.get_new_transaction_id(self.pgprocno as usize, false)?;
            self.xid = xid;
            self.stats.xids_assigned.incr();
        }
        Ok(self.xid)
    }
    /// `AssignTransactionId` for a subtransaction: assigns the top-level xid first if needed
    /// (read it back with [`xid`](Self::xid)), then a new subxid, published in the 64-entry
    /// cache or, when full, by setting the overflow flag. The caller records the parent in
    /// pg_subtrans (`SubTransSetParent`) before anyone can need it.
    ///
    /// # Panics
    /// If the ProcArray's [`XidExtendHook`] fails; use
    /// [`try_assign_subxid`](Self::try_assign_subxid) with a hook that can.
    pub fn assign_subxid(&mut self) -> TransactionId {
        self.try_assign_subxid().unwrap_or_else(|e| panic!("assign_subxid: {e}"))
    }
    /// [`assign_subxid`](Self::assign_subxid) that reports a failing [`XidExtendHook`].
    ///
    /// # Errors
    /// [`ProcArrayError::XidExtend`]: no subxid was assigned (the top-level xid may have been).
    pub fn try_assign_subxid(&mut self) -> Result<TransactionId, ProcArrayError> {
        self.try_assign_xid()?;
        if self.subxids.capacity() == 0 {
            self.subxids.reserve(PGPROC_MAX_CACHED_SUBXIDS);
        }
        let (xid, overflowed_now) = self.pa.get_new_transaction_id(self.pgprocno as usize, true)?;
        self.subxids.push(xid);
        if overflowed_now {
            self.overflowed = true;
            self.stats.subxid_overflows.incr();
        } else {
            self.n_cached += 1;
        }
        self.stats.subxids_assigned.incr();
        Ok(xid)
    }
    /// `XidCacheRemoveRunningXids`: a subtransaction aborted; removes `xids` (its xid and its
    /// children's) from the shared cache under ProcArrayLock exclusive and advances
    /// `latest_completed_xid` to the newest of them. Xids beyond the overflowed cache are only
    /// forgotten locally (snapshots keep treating them as running, which is harmless: they
    /// aborted).
    ///
    /// # Errors
    /// [`ProcArrayError::NotMySubxid`] if an xid is not a live subxid of this transaction;
    /// nothing is changed then.
    pub fn abort_subxids(&mut self, xids: &[TransactionId]) -> Result<(), ProcArrayError> {
        if let Some(&bad) = xids.iter().find(|x| !self.subxids.contains(x)) {
            return Err(ProcArrayError::NotMySubxid(bad));
        }
        if xids.is_empty() {
            return Ok(());
        }
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let proc = &pa.procs[p];
        let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
        let (count, dense) = match &pa.hot {
            Hot::Pgproc => (&proc.subxid_count, None),
            Hot::Pgxact(x) => (&x[p].nxids, None),
            Hot::PgxactPadded(x) => (&x[p].nxids, None),
            Hot::Dense(d) => {
                (&proc.subxid_count, Some(&d.subxid_states[proc.pgxactoff.load(Ordering::Relaxed) as usize]))
            }
        };
        let mut latest = TransactionId::INVALID;
        for &x in xids {
            if !latest.is_valid() || x.follows(latest) {
                latest = x;
            }
            let n = count.load(Ordering::Relaxed) as usize;
            if let Some(j) = (0..n).rev().find(|&j| proc.subxids[j].load(Ordering::Relaxed) == x.0) {
                // Move the last cached xid into the hole, then shrink the count.
                let last = proc.subxids[n - 1].load(Ordering::Relaxed);
                proc.subxids[j].store(last, Ordering::Relaxed);
                count.store(n as u8 - 1, Ordering::Release);
                if let Some(s) = dense {
                    s.count.store(n as u8 - 1, Ordering::Release);
                }
                self.n_cached -= 1;
            }
        }
        pa.advance_latest_completed(latest);
        let c = pa.transam.xact_completion_count.load(Ordering::Relaxed);
        pa.transam.xact_completion_count.store(c + 1, Ordering::Relaxed);
        pa.release_pa(held);
        self.subxids.retain(|x| !xids.contains(x));
        self.stats.subxact_aborts.incr();
        Ok(())
    }
}
