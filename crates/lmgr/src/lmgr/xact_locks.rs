//! Transaction and virtual-transaction locks: a backend's vxid at transaction start and end,
//! `XactLockTableInsert` / `XactLockTableWait` on a transaction id and `VirtualXactLock`.
//!
//! Locks touched: the partition locks of the xid and vxid tags (through the acquire and release
//! paths); the backend's `fpInfoLock` for its own vxid lock.

use std::sync::Arc;

use lockstack_common::sync::Ordering;
use lockstack_common::{LocalTransactionId, TransactionId, VirtualTransactionId};

use super::{Backend, LockOptions};
use crate::config::VxidLocks;
use crate::error::LockError;
use crate::mode::LockMode;
use crate::tag::LockTag;

pub(super) enum VxidProbe {
    Ended,
    Running,
    Wait,
}

impl Backend {
    /// Starts a transaction (`StartTransaction` → `VirtualXactLockTableInsert`): assigns the
    /// next local xid and takes ExclusiveLock on the VXID, in the main table (eager) or as a
    /// fast-path flag (on demand). If a transaction is running, returns its VXID unchanged.
    pub fn start_transaction(&mut self) -> VirtualTransactionId {
        if let Some(v) = self.vxid {
            return v;
        }
        self.next_lxid = self.next_lxid.next();
        let vxid = VirtualTransactionId { backend_id: self.id, local_xid: self.next_lxid };
        self.lmgr.procs[self.id.index()].lxid.store(vxid.local_xid.0, Ordering::Release);
        self.vxid = Some(vxid);
        match self.lmgr.cfg.vxid {
            VxidLocks::Eager => {
                // Nobody can hold a conflicting lock on a VXID that did not exist until now.
                let r = self.lock(LockTag::virtual_transaction(vxid), LockMode::Exclusive, LockOptions::XACT);
                debug_assert!(r.is_ok());
            }
            VxidLocks::OnDemand => self.lmgr.fp.with_state_mut(self.id, |st| {
                st.vxid_lock = true;
                st.vxid_lxid = vxid.local_xid;
            }),
        }
        vxid
    }
    /// Ends the transaction, committed or aborted (`LockReleaseAll` of transaction locks and
    /// `VirtualXactLockTableCleanup`): releases every transaction-owned lock, wakes whoever can
    /// now proceed, and ends the VXID. Session locks stay. Harmless outside a transaction.
    pub fn end_transaction(&mut self) {
        self.release_all(false);
        if self.vxid.take().is_some() && self.lmgr.cfg.vxid == VxidLocks::OnDemand {
            let (fast, lxid) = self.lmgr.fp.with_state_mut(self.id, |st| {
                let r = (st.vxid_lock, st.vxid_lxid);
                st.vxid_lock = false;
                st.vxid_lxid = LocalTransactionId::INVALID;
                r
            });
            if !fast && lxid.is_valid() {
                // A waiter materialised our VXID lock: release it in the main table
                // (`LockRefindAndRelease`).
                let tag = LockTag::virtual_transaction(VirtualTransactionId {
                    backend_id: self.id,
                    local_xid: lxid,
                });
                self.lmgr.release_main(self.id, &self.counters, tag, LockMode::Exclusive, tag.hash_code());
            }
        }
        self.lmgr.procs[self.id.index()].lxid.store(0, Ordering::Release);
    }
    /// `XactLockTableInsert(xid)`: the transaction's ExclusiveLock on its own xid, which row
    /// lockers wait on.
    ///
    /// # Errors
    /// As [`lock`](Self::lock) (cannot happen for a fresh xid).
    pub fn xact_lock_table_insert(&mut self, xid: TransactionId) -> Result<(), LockError> {
        self.lock(LockTag::transaction(xid), LockMode::Exclusive, LockOptions::XACT).map(|_| ())
    }
    /// `XactLockTableWait(xid)`: waits until transaction `xid` has ended (ShareLock on its xid
    /// lock, released at once). Returns at once if it has already ended.
    ///
    /// # Errors
    /// [`LockError::Deadlock`] or [`LockError::LockTimeout`] while waiting.
    pub fn xact_lock_table_wait(&mut self, xid: TransactionId) -> Result<(), LockError> {
        let tag = LockTag::transaction(xid);
        self.lock(tag, LockMode::Share, LockOptions::XACT)?;
        self.unlock(tag, LockMode::Share, false);
        Ok(())
    }
    /// `ConditionalXactLockTableWait`: true if transaction `xid` has ended, without waiting.
    pub fn conditional_xact_lock_table_wait(&mut self, xid: TransactionId) -> bool {
        let tag = LockTag::transaction(xid);
        match self.conditional_lock(tag, LockMode::Share, false) {
            Ok(true) => {
                self.unlock(tag, LockMode::Share, false);
                true
            }
            _ => false,
        }
    }
    /// `VirtualXactLock(vxid, wait)`: with `wait`, sleeps until the transaction `vxid` has
    /// ended and returns true; without, returns whether it has ended. In on-demand mode the
    /// waiter first materialises the holder's VXID lock in the main table (under the holder's
    /// `fpInfoLock` and the partition lock), then waits on it like any lock.
    ///
    /// # Errors
    /// [`LockError::Deadlock`] or [`LockError::LockTimeout`] while waiting.
    pub fn virtual_xact_lock(&mut self, vxid: VirtualTransactionId, wait: bool) -> Result<bool, LockError> {
        if !vxid.is_valid() || vxid.backend_id.index() >= self.lmgr.procs.len() {
            return Ok(true);
        }
        let tag = LockTag::virtual_transaction(vxid);
        if self.lmgr.cfg.vxid == VxidLocks::OnDemand {
            let lmgr = Arc::clone(&self.lmgr);
            let counters = &*self.counters;
            let probe = lmgr.fp.with_state_mut(vxid.backend_id, |st| {
                if st.vxid_lxid != vxid.local_xid {
                    return VxidProbe::Ended;
                }
                if !wait {
                    return VxidProbe::Running;
                }
                if st.vxid_lock {
                    let p = lmgr.partition_of(tag.hash_code());
                    lmgr.with_partition(p, Some(counters), |t| {
                        t.setup_and_grant(tag, vxid.backend_id, LockMode::Exclusive)
                    });
                    st.vxid_lock = false;
                    counters.vxid_materialised.incr();
                    counters.main_acquisitions[p].incr();
                }
                VxidProbe::Wait
            });
            match probe {
                VxidProbe::Ended => return Ok(true),
                VxidProbe::Running => return Ok(false),
                VxidProbe::Wait => {}
            }
        } else if !wait {
            return match self.conditional_lock(tag, LockMode::Share, false)? {
                true => {
                    self.unlock(tag, LockMode::Share, false);
                    Ok(true)
                }
                false => Ok(false),
            };
        }
        self.lock(tag, LockMode::Share, LockOptions::XACT)?;
        self.unlock(tag, LockMode::Share, false);
        Ok(true)
    }
}
