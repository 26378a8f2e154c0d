//! ProcArray membership: attaching a backend (`InitProcess` + `ProcArrayAdd`), leaving
//! (`ProcArrayRemove`), and moving a `Dense` entry when the member array is compacted.
//!
//! Locks touched: `ProcArrayLock` then `XidGenLock`, both exclusive, for every membership change
//! (`Dense` entries move, and xid assignment writes them under `XidGenLock` only).

use crate::sync::Ordering;
use std::sync::Arc;

use lockstack_common::{AttachError, BackendId, LocalTransactionId, TransactionId};
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{Backend, Hot, ProcArray};
use crate::snapshot::Snapshot;

impl ProcArray {
    /// Makes backend `id` a member (`InitProcess` + `ProcArrayAdd`): inserts it in ProcArray
    /// order under ProcArrayLock and XidGenLock exclusive, and returns its handle.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below `max_backends`,
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<Backend, AttachError> {
        let max = self.cfg.max_backends;
        if id.index() >= max {
            return Err(AttachError::OutOfRange { id, max_backends: max });
        }
        if self.attached[id.index()].swap(true, Ordering::AcqRel) {
            return Err(AttachError::AlreadyAttached { id, subsystem: "ProcArray" });
        }
        self.proc_array_add(id.0);
        Ok(Backend {
            pa: Arc::clone(self),
            pgprocno: id.0,
            xid: TransactionId::INVALID,
            subxids: Vec::new(),
            n_cached: 0,
            overflowed: false,
            lxid: LocalTransactionId::INVALID,
            snapshot: Snapshot::default(),
            recent_global_xmin: TransactionId::INVALID,
            horizon_valid: false,
            stats: self.stats.register(),
            detached: false,
        })
    }
    pub(super) fn proc_array_add(&self, pgprocno: u32) {
        let pa = self.proc_array_lock.acquire(LwLockMode::Exclusive);
        let xg = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let pos = (0..n).find(|&i| self.pgprocnos[i].load(Ordering::Relaxed) > pgprocno).unwrap_or(n);
        for i in (pos..n).rev() {
            self.move_entry(i, i + 1);
        }
        self.pgprocnos[pos].store(pgprocno, Ordering::Relaxed);
        let proc = &self.procs[pgprocno as usize];
        proc.pgxactoff.store(pos as u32, Ordering::Relaxed);
        if let Hot::Dense(d) = &self.hot {
            d.xids[pos].store(proc.xid.load(Ordering::Relaxed), Ordering::Relaxed);
            d.subxid_states[pos].count.store(proc.subxid_count.load(Ordering::Relaxed), Ordering::Relaxed);
            d.subxid_states[pos]
                .overflowed
                .store(proc.subxid_overflowed.load(Ordering::Relaxed), Ordering::Relaxed);
            d.status_flags[pos].store(proc.vacuum_flags.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.num_procs.store(n as u32 + 1, Ordering::Release);
        self.xid_gen_lock.release(xg);
        self.release_pa(pa);
    }
    pub(super) fn proc_array_remove(&self, pgprocno: u32) {
        let pa = self.proc_array_lock.acquire(LwLockMode::Exclusive);
        let xg = self.xid_gen_lock.acquire(LwLockMode::Exclusive);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        if let Some(pos) = (0..n).find(|&i| self.pgprocnos[i].load(Ordering::Relaxed) == pgprocno) {
            for i in pos + 1..n {
                self.move_entry(i, i - 1);
            }
            self.pgprocnos[n - 1].store(u32::MAX, Ordering::Relaxed);
            if let Hot::Dense(d) = &self.hot {
                d.xids[n - 1].store(0, Ordering::Relaxed);
                d.subxid_states[n - 1].count.store(0, Ordering::Relaxed);
                d.subxid_states[n - 1].overflowed.store(false, Ordering::Relaxed);
                d.status_flags[n - 1].store(0, Ordering::Relaxed);
            }
            self.procs[pgprocno as usize].pgxactoff.store(u32::MAX, Ordering::Relaxed);
            self.num_procs.store(n as u32 - 1, Ordering::Release);
        }
        self.xid_gen_lock.release(xg);
        self.release_pa(pa);
    }
    /// Moves ProcArray position `from` to `to` (both locks held exclusive).
    pub(super) fn move_entry(&self, from: usize, to: usize) {
        let p = self.pgprocnos[from].load(Ordering::Relaxed);
        self.pgprocnos[to].store(p, Ordering::Relaxed);
        self.procs[p as usize].pgxactoff.store(to as u32, Ordering::Relaxed);
        if let Hot::Dense(d) = &self.hot {
            d.xids[to].store(d.xids[from].load(Ordering::Relaxed), Ordering::Relaxed);
            let (sf, st) = (&d.subxid_states[from], &d.subxid_states[to]);
            st.count.store(sf.count.load(Ordering::Relaxed), Ordering::Relaxed);
            st.overflowed.store(sf.overflowed.load(Ordering::Relaxed), Ordering::Relaxed);
            d.status_flags[to].store(d.status_flags[from].load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }
}

impl Backend {
    /// Ends any open transaction and leaves the ProcArray (`ProcArrayRemove` under ProcArrayLock
    /// and XidGenLock exclusive); the slot can then be attached again.
    pub fn detach(mut self) {
        self.detach_inner();
    }
    pub(super) fn detach_inner(&mut self) {
        if self.detached {
            return;
        }
        self.detached = true;
        self.end_transaction();
        self.reset_xmin();
        self.pa.proc_array_remove(self.pgprocno);
        self.pa.attached[self.pgprocno as usize].store(false, Ordering::Release);
    }
}
