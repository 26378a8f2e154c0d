//! What the lock manager tells about itself: `pg_locks` rows, conflicting and blocking backends
//! (`GetLockConflicts`, `pg_blocking_pids`), table sizes, counters and the invariant check.
//!
//! Locks touched: every partition lock shared (in order) for a consistent view, and each
//! backend's `fpInfoLock` to read its fast-path slots; a backend's own local table needs none.

use std::collections::HashMap;

use lockstack_common::sync::{Duration, Instant, Ordering};
use lockstack_common::{BackendId, InvariantViolation, Oid, VirtualTransactionId};

use super::{Backend, Lmgr, LockStatusRow, WaitStatus};
use crate::fastpath::FpSnapshot;
use crate::local::{LocalKey, LocalLock};
use crate::mode::{LockMask, LockMode};
use crate::stats::LmgrStats;
use crate::tag::LockTag;
use crate::violation::TableViolation;

impl Lmgr {
    /// `GetLockConflicts(tag, mode)`: the VXIDs of every backend other than `exclude` that
    /// holds a mode on `tag` conflicting with `mode`, fast-path holders included; backends not
    /// in a transaction are skipped. The answer may be stale as soon as it is returned.
    pub fn get_lock_conflicts(
        &self,
        tag: LockTag,
        mode: LockMode,
        exclude: Option<BackendId>,
    ) -> Vec<VirtualTransactionId> {
        let conflicts = mode.conflict_mask();
        let mut out: Vec<VirtualTransactionId> = Vec::new();
        if self.conflicts_with_fast_path(&tag, mode) && tag.field1 == self.cfg.database.0 {
            self.fp.conflicting_holders(tag.field2, conflicts, exclude, |b| {
                if let Some(v) = self.vxid_of(b) {
                    out.push(v);
                }
            });
        }
        let p = self.partition_of(tag.hash_code());
        let holders: Vec<BackendId> = self.with_partition_shared(p, |t| {
            t.locks
                .get(&tag)
                .map(|e| {
                    t.holders(tag, e)
                        .filter(|pl| Some(pl.backend) != exclude && pl.hold_mask & conflicts != 0)
                        .map(|pl| pl.backend)
                        .collect()
                })
                .unwrap_or_default()
        });
        for b in holders {
            if let Some(v) = self.vxid_of(b)
                && !out.contains(&v)
            {
                out.push(v);
            }
        }
        out
    }
    /// The earliest instant at which a backend queued on a heavyweight lock will run its
    /// deadlock check (`deadlock_timeout` after it began to wait, once per wait) or give up
    /// on its `lock_timeout`; `None` when no queued backend has either left. The instant is
    /// published when the request is queued (so it may be a few microseconds before the
    /// waiter's own timer) and withdrawn once the event has been handled: after the check,
    /// the timeout, or the grant. An observer that waits until no timer is due before some
    /// instant has therefore seen every such event before it happen (the isolation runner,
    /// which lets PostgreSQL's tester's 10 ms polls pass this way). Reads one atomic per
    /// backend, no lock.
    pub fn earliest_lock_timer(&self) -> Option<Instant> {
        let min = self.procs.iter().map(|p| p.timer.load(Ordering::Acquire)).filter(|&v| v != 0).min()?;
        self.epoch.checked_add(Duration::from_nanos(min - 1))
    }

    /// What backend `b` is waiting for, if it is queued on a heavyweight lock.
    pub fn waiting_for(&self, b: BackendId) -> Option<(LockTag, LockMode)> {
        let st = self.procs.get(b.index())?.wait.lock();
        match (st.status, st.tag) {
            (WaitStatus::Waiting, Some(t)) => Some((t, st.mode)),
            _ => None,
        }
    }
    /// `pg_blocking_pids(b)`: the backends that hold a mode conflicting with `b`'s awaited
    /// request, or are queued ahead of it with a conflicting request. Empty if `b` is not
    /// waiting. This is what the isolation runner asks to decide that a step is blocked.
    pub fn blocking_backends(&self, b: BackendId) -> Vec<BackendId> {
        let Some((tag, mode)) = self.waiting_for(b) else { return Vec::new() };
        let p = self.partition_of(tag.hash_code());
        self.with_partition_shared(p, |t| {
            let Some(e) = t.locks.get(&tag) else { return Vec::new() };
            let Some(pos) = e.wait_queue.iter().position(|w| w.backend == b) else { return Vec::new() };
            let conflict = mode.conflict_mask();
            let mut out: Vec<BackendId> = t
                .holders(tag, e)
                .filter(|pl| pl.backend != b && pl.hold_mask & conflict != 0)
                .map(|pl| pl.backend)
                .collect();
            for w in e.wait_queue.iter().take(pos) {
                if w.mode.bit() & conflict != 0 && !out.contains(&w.backend) {
                    out.push(w.backend);
                }
            }
            out
        })
    }
    /// Every granted and awaited lock (`GetLockStatusData`, the rows of `pg_locks`): main table
    /// first (in partition order), then each backend's fast-path slots and fast-path VXID lock.
    pub fn lock_status(&self) -> Vec<LockStatusRow> {
        let mut rows = self.with_all_partitions(None, |tables| {
            let mut rows = Vec::new();
            for t in tables.iter() {
                for (tag, e) in t.locks.iter() {
                    for pl in t.holders(*tag, e) {
                        for m in LockMode::modes_in(pl.hold_mask) {
                            rows.push(LockStatusRow {
                                tag: *tag,
                                backend: pl.backend,
                                mode: m,
                                granted: true,
                                fast_path: false,
                            });
                        }
                    }
                    for w in &e.wait_queue {
                        rows.push(LockStatusRow {
                            tag: *tag,
                            backend: w.backend,
                            mode: w.mode,
                            granted: false,
                            fast_path: false,
                        });
                    }
                }
            }
            rows
        });
        for i in 0..self.procs.len() {
            let b = BackendId(i as u32);
            for (relid, bits) in self.fp.entries(b) {
                for m in LockMode::modes_in(bits) {
                    rows.push(LockStatusRow {
                        tag: LockTag::relation(self.cfg.database, Oid(relid)),
                        backend: b,
                        mode: m,
                        granted: true,
                        fast_path: true,
                    });
                }
            }
            let (vxid_fast, lxid) = self.fp.with_state(b, |st| (st.vxid_lock, st.vxid_lxid));
            if vxid_fast {
                rows.push(LockStatusRow {
                    tag: LockTag::virtual_transaction(VirtualTransactionId {
                        backend_id: b,
                        local_xid: lxid,
                    }),
                    backend: b,
                    mode: LockMode::Exclusive,
                    granted: true,
                    fast_path: true,
                });
            }
        }
        rows
    }
    /// Number of lock objects in the main table (0 when nobody holds or awaits anything there).
    pub fn main_table_len(&self) -> usize {
        self.with_all_partitions(None, |tables| tables.iter().map(|t| t.locks.len()).sum())
    }
    /// Number of fast-path relation entries (modes) over all backends.
    pub fn fast_path_len(&self) -> usize {
        (0..self.procs.len())
            .map(|i| {
                self.fp
                    .entries(BackendId(i as u32))
                    .iter()
                    .map(|(_, bits)| bits.count_ones() as usize)
                    .sum::<usize>()
            })
            .sum()
    }
    /// Sum of all strong-lock counters (0 when no strong relation lock is held or being taken).
    pub fn strong_lock_total(&self) -> u64 {
        self.fp.strong_total()
    }
    /// Sums every backend's counters (attached or gone).
    pub fn stats(&self) -> LmgrStats {
        let mut s = LmgrStats {
            main_acquisitions: vec![0; self.cfg.partitions],
            partition_blocks: vec![0; self.cfg.partitions],
            ..Default::default()
        };
        self.counters.for_each(|c| s.add(c));
        s
    }
    /// Checks the shared state under every backend's fast-path lock and every partition lock:
    /// every lock's counts and masks agree with its holders and waiters, no empty lock or
    /// PROCLOCK remains, each waiting backend is queued exactly once and knows it, no fast-path
    /// entry coexists with a granted strong lock on its relation, and fast-path VXID locks
    /// belong to the running transaction.
    ///
    /// Safe to call with live traffic: it takes every `fpInfoLock` (shared, in backend order)
    /// and only then every partition lock (exclusive, in partition order), PostgreSQL's order
    /// (a backend's fast-path lock before a partition lock, as `FastPathTransferRelationLocks`
    /// and `VirtualXactLock` take them), so it never holds a partition lock while waiting for a
    /// fast-path lock, and it sees one consistent state. Every backend's fast-path locking and
    /// the whole lock table are blocked while it runs: a diagnostic, not for hot paths.
    ///
    /// # Errors
    /// The first violation found, naming the lock or backend.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let strong_mask: LockMask = LockMode::ALL.iter().filter(|m| m.is_strong()).map(|m| m.bit()).sum();
        self.fp
            .with_all_locked(|fp| self.check_invariants_locked(fp, strong_mask))
            .map_err(|v| InvariantViolation(v.to_string()))
    }
    /// [`check_invariants`](Self::check_invariants) with every fpInfoLock held (`fp` is their
    /// state, by backend): takes the partition locks and checks.
    pub(super) fn check_invariants_locked(
        &self,
        fp: &[FpSnapshot],
        strong_mask: LockMask,
    ) -> Result<(), TableViolation> {
        self.with_all_partitions(None, |tables| {
            let mut queued: HashMap<BackendId, LockTag> = HashMap::new();
            for (pi, t) in tables.iter().enumerate() {
                t.check()?;
                for (tag, e) in t.locks.iter() {
                    if self.partition_of(tag.hash_code()) != pi {
                        return Err(TableViolation::WrongPartition { tag: *tag, partition: pi });
                    }
                    for w in &e.wait_queue {
                        if queued.insert(w.backend, *tag).is_some() {
                            return Err(TableViolation::QueuedTwice(w.backend));
                        }
                        let st = self.procs[w.backend.index()].wait.lock();
                        if st.status != WaitStatus::Waiting || st.tag != Some(*tag) || st.mode != w.mode {
                            return Err(TableViolation::QueueUnknown { backend: w.backend, tag: *tag });
                        }
                    }
                }
            }
            for (i, p) in self.procs.iter().enumerate() {
                let b = BackendId(i as u32);
                let st = p.wait.lock();
                if st.status == WaitStatus::Waiting && !queued.contains_key(&b) {
                    return Err(TableViolation::WaitsInNoQueue(b));
                }
                drop(st);
                for (relid, bits) in &fp[i].entries {
                    let tag = LockTag::relation(self.cfg.database, Oid(*relid));
                    let t = &tables[self.partition_of(tag.hash_code())];
                    if let Some(e) = t.locks.get(&tag)
                        && e.grant_mask & strong_mask != 0
                    {
                        return Err(TableViolation::FastPathUnderStrong {
                            backend: b,
                            modes: LockMode::modes_in(*bits).collect(),
                            tag,
                        });
                    }
                }
                if fp[i].vxid_lock && p.lxid.load(Ordering::Acquire) != fp[i].vxid_lxid.0 {
                    return Err(TableViolation::StaleVxidLock(b));
                }
            }
            Ok(())
        })
    }
}

impl Backend {
    /// How many acquisitions of `mode` on `tag` this backend holds (session + transaction).
    pub fn local_count(&self, tag: LockTag, mode: LockMode) -> u32 {
        self.local_lock(tag, mode).map(|l| l.session + l.xact).unwrap_or(0)
    }
    pub(super) fn local_lock(&self, tag: LockTag, mode: LockMode) -> Option<&LocalLock> {
        self.local.get(&LocalKey::new(&tag, mode))
    }
    /// Number of (tag, mode) pairs in the local lock table.
    pub fn local_len(&self) -> usize {
        self.local.len()
    }
    /// [`Lmgr::get_lock_conflicts`] excluding this backend (PostgreSQL never lists the caller).
    pub fn get_lock_conflicts(&self, tag: LockTag, mode: LockMode) -> Vec<VirtualTransactionId> {
        self.lmgr.get_lock_conflicts(tag, mode, Some(self.id))
    }
}
