//! The shared lock manager ([`Lmgr`]) and a backend's handle on it ([`Backend`]): the
//! acquisition, wait and release paths of `lock.c` (`LockAcquireExtended`, `LockRelease`,
//! `LockReleaseAll`) and `proc.c` (`JoinWaitQueue`/`ProcSleep`, `ProcLockWakeup`,
//! `CheckDeadLock`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::{AtomicBool, AtomicU32, Condvar, Instant, Mutex, Ordering};
use lockstack_common::{
    AttachError, BackendId, InvariantViolation, LocalTransactionId, Oid, StatsRegistry, TrancheId,
    TransactionId, VirtualTransactionId, WaitEvent, WaitEventScope,
};
use lockstack_lwlock::{LwLock, LwRwLock, LwRwLockExt};

use crate::config::{FastPath, LmgrConfig, LmgrConfigError, STRONG_LOCK_PARTITIONS, VxidLocks};
use crate::deadlock::{self, GraphLock, Outcome, WaitGraph};
use crate::error::LockError;
use crate::fastpath::{FastPathArea, FastPathGrant, FpSnapshot};
use crate::local::{LocalKey, LocalLock, LocalTable};
use crate::mode::{LockMask, LockMode};
use crate::stats::{BackendCounters, LmgrStats};
use crate::table::{Join, PartitionTables, ProcLock};
use crate::tag::{LockTag, LockTagKind};

/// One partition of the shared lock table: the LOCK and PROCLOCK hash tables, reachable only
/// through the guards of their `LockManager` LWLock (as in PostgreSQL's shared memory, that
/// LWLock alone protects them).
type Partition = LwRwLock<PartitionTables>;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum WaitStatus {
    /// Not waiting.
    Idle,
    /// Queued on `tag` for `mode`.
    Waiting,
    /// Granted by another backend (`PROC_WAIT_STATUS_OK`); the waiter resets it to Idle.
    Granted,
}

struct WaitState {
    status: WaitStatus,
    tag: Option<LockTag>,
    mode: LockMode,
}

/// The shared part of a backend (what PostgreSQL keeps in its `PGPROC`).
struct Proc {
    wait: Mutex<WaitState>,
    cv: Condvar,
    /// Local xid of the running transaction (`PGPROC.vxid.lxid`), 0 between transactions.
    lxid: AtomicU32,
    attached: AtomicBool,
}

/// How a lock was obtained.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LockAcquireResult {
    /// Newly granted (`LOCKACQUIRE_OK`).
    Acquired,
    /// The backend already held this mode on this object; only its local count went up
    /// (`LOCKACQUIRE_ALREADY_HELD`).
    AlreadyHeld,
}

/// Options of one lock request.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct LockOptions {
    /// Session lock (survives transaction end until released or the backend detaches);
    /// otherwise a transaction lock, released by [`Backend::end_transaction`].
    pub session: bool,
    /// Fail with [`LockError::NotAvailable`] instead of waiting (`dontWait`, NOWAIT).
    pub dont_wait: bool,
}

impl LockOptions {
    /// A transaction lock that waits.
    pub const XACT: LockOptions = LockOptions { session: false, dont_wait: false };
    /// A session lock that waits.
    pub const SESSION: LockOptions = LockOptions { session: true, dont_wait: false };
}

/// A granted or awaited lock, as `pg_locks` lists it ([`Lmgr::lock_status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockStatusRow {
    /// The object.
    pub tag: LockTag,
    /// The holder or waiter.
    pub backend: BackendId,
    /// The mode.
    pub mode: LockMode,
    /// True if held, false if awaited.
    pub granted: bool,
    /// True if recorded in a fast-path slot.
    pub fast_path: bool,
}

/// PostgreSQL's heavyweight lock manager, shared by all backends of one "server".
///
/// Create it with [`Lmgr::new`], then give each backend thread its handle with
/// [`Lmgr::attach`]. The shared table is split into `partitions` hash tables, each protected by
/// an `LwLock` of tranche `LockManager` (8.2+); fast-path slots and VXID locks live in a
/// [`FastPathArea`] with one `LockFastPath` LWLock per backend (9.2+).
pub struct Lmgr {
    cfg: LmgrConfig,
    /// Each on its own cache line, as PostgreSQL pads the LWLocks of `MainLWLockArray`.
    partitions: Box<[CachePadded<Partition>]>,
    /// Each on its own cache line: `lxid` is written at every transaction start and end, and in
    /// PostgreSQL it lives in the backend's own `PGPROC`, never on a line another backend writes.
    procs: Box<[CachePadded<Proc>]>,
    fp: FastPathArea,
    counters: StatsRegistry<BackendCounters>,
}

impl std::fmt::Debug for Lmgr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lmgr").field("cfg", &self.cfg).finish()
    }
}

/// A backend's counters block when it has one, for the partition-lock helper.
type Counters<'a> = Option<&'a BackendCounters>;

impl Lmgr {
    /// A lock manager for `cfg` with empty tables.
    ///
    /// # Errors
    /// The first bad field ([`LmgrConfig::validate`]).
    pub fn new(cfg: LmgrConfig) -> Result<Arc<Lmgr>, LmgrConfigError> {
        cfg.validate()?;
        let partitions: Box<[CachePadded<Partition>]> = (0..cfg.partitions)
            .map(|i| {
                CachePadded::new(
                    LwLock::new(cfg.lwlock_kind, TrancheId::LOCK_MANAGER, i as u32)
                        .with_data(PartitionTables::default()),
                )
            })
            .collect();
        let procs = (0..cfg.max_backends)
            .map(|_| {
                CachePadded::new(Proc {
                    wait: Mutex::new(WaitState {
                        status: WaitStatus::Idle,
                        tag: None,
                        mode: LockMode::AccessShare,
                    }),
                    cv: Condvar::new(),
                    lxid: AtomicU32::new(0),
                    attached: AtomicBool::new(false),
                })
            })
            .collect();
        for p in partitions.iter() {
            p.name_line();
        }
        let groups = cfg.fast_path.groups().max(1);
        let fp = FastPathArea::new(cfg.max_backends, groups, STRONG_LOCK_PARTITIONS, cfg.lwlock_kind);
        Ok(Arc::new(Lmgr { cfg, partitions, procs, fp, counters: StatsRegistry::new() }))
    }

    /// The configuration.
    pub fn config(&self) -> &LmgrConfig {
        &self.cfg
    }

    /// The database every backend is connected to.
    pub fn database(&self) -> Oid {
        self.cfg.database
    }

    /// Attaches backend `id` (`InitProcess`): the returned handle is the only way to take
    /// locks as that backend. Dropping it releases every lock it holds, session locks included.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below `max_backends`,
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<Backend, AttachError> {
        let p = self
            .procs
            .get(id.index())
            .ok_or(AttachError::OutOfRange { id, max_backends: self.cfg.max_backends })?;
        if p.attached.swap(true, Ordering::AcqRel) {
            return Err(AttachError::AlreadyAttached { id, subsystem: "lock manager" });
        }
        let counters = self.counters.register_with(BackendCounters::new(self.cfg.partitions));
        Ok(Backend {
            lmgr: Arc::clone(self),
            id,
            local: LocalTable::default(),
            fp_used: vec![0; self.fp.groups()],
            fp_scratch: (Vec::new(), Vec::new(), Vec::new()),
            counters,
            deadlock_timeout: self.cfg.deadlock_timeout,
            lock_timeout: self.cfg.lock_timeout,
            next_lxid: LocalTransactionId::INVALID,
            vxid: None,
        })
    }

    #[inline]
    fn partition_of(&self, hash: u32) -> usize {
        hash as usize & (self.cfg.partitions - 1)
    }

    /// Runs `f` on the tables of partition `p` under its LWLock held exclusively, counting a
    /// block in `counters` if the LWLock had to be waited for.
    ///
    /// `f` must not take partition locks itself (LWLocks are not re-entrant).
    fn with_partition<R>(
        &self,
        p: usize,
        counters: Counters<'_>,
        f: impl FnOnce(&mut PartitionTables) -> R,
    ) -> R {
        let (mut tables, waited) = self.partitions[p].write_waited();
        if waited && let Some(c) = counters {
            c.partition_blocks[p].incr();
        }
        f(&mut tables)
    }

    /// Runs `f` on the tables of partition `p` under its LWLock held in shared mode (readers
    /// only: `GetLockConflicts`, `pg_blocking_pids`).
    fn with_partition_shared<R>(&self, p: usize, f: impl FnOnce(&PartitionTables) -> R) -> R {
        f(&self.partitions[p].read())
    }

    /// Takes every partition lock exclusively, in order (deadlock check, status listing,
    /// invariant check), and runs `f` on all partitions' tables; releases them in reverse order.
    fn with_all_partitions<R>(
        &self,
        counters: Counters<'_>,
        f: impl FnOnce(&mut [&mut PartitionTables]) -> R,
    ) -> R {
        let mut guards = Vec::with_capacity(self.partitions.len());
        for (i, part) in self.partitions.iter().enumerate() {
            let (g, waited) = part.write_waited();
            if waited && let Some(c) = counters {
                c.partition_blocks[i].incr();
            }
            guards.push(g);
        }
        let mut tables: Vec<&mut PartitionTables> = guards.iter_mut().map(|g| &mut **g).collect();
        let r = f(&mut tables);
        drop(tables);
        while guards.pop().is_some() {}
        r
    }

    /// `ProcWakeup`: tells a granted waiter. Called with the lock's partition held.
    fn wake(&self, b: BackendId) {
        let p = &self.procs[b.index()];
        let mut st = p.wait.lock();
        st.status = WaitStatus::Granted;
        st.tag = None;
        p.cv.notify_one();
    }

    fn vxid_of(&self, b: BackendId) -> Option<VirtualTransactionId> {
        let lxid = self.procs[b.index()].lxid.load(Ordering::Acquire);
        (lxid != 0).then_some(VirtualTransactionId { backend_id: b, local_xid: LocalTransactionId(lxid) })
    }

    fn fast_path_enabled(&self) -> bool {
        self.cfg.fast_path != FastPath::Off
    }

    /// `EligibleForRelationFastPath`.
    #[inline]
    fn eligible_for_fast_path(&self, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path_enabled()
            && tag.kind == LockTagKind::Relation
            && tag.field1 == self.cfg.database.0
            && mode.is_weak()
    }

    /// `ConflictsWithRelationFastPath`.
    #[inline]
    fn conflicts_with_fast_path(&self, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path_enabled() && tag.kind == LockTagKind::Relation && tag.field1 != 0 && mode.is_strong()
    }

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
            .map_err(InvariantViolation)
    }

    /// [`check_invariants`](Self::check_invariants) with every fpInfoLock held (`fp` is their
    /// state, by backend): takes the partition locks and checks.
    fn check_invariants_locked(&self, fp: &[FpSnapshot], strong_mask: LockMask) -> Result<(), String> {
        self.with_all_partitions(None, |tables| {
            let mut queued: HashMap<BackendId, LockTag> = HashMap::new();
            for (pi, t) in tables.iter().enumerate() {
                t.check()?;
                for (tag, e) in t.locks.iter() {
                    if self.partition_of(tag.hash_code()) != pi {
                        return Err(format!("{tag} is in partition {pi}, not its own"));
                    }
                    for w in &e.wait_queue {
                        if queued.insert(w.backend, *tag).is_some() {
                            return Err(format!("backend {} is queued on two locks", w.backend));
                        }
                        let st = self.procs[w.backend.index()].wait.lock();
                        if st.status != WaitStatus::Waiting || st.tag != Some(*tag) || st.mode != w.mode {
                            return Err(format!(
                                "backend {} is queued on {tag} but does not know it",
                                w.backend
                            ));
                        }
                    }
                }
            }
            for (i, p) in self.procs.iter().enumerate() {
                let b = BackendId(i as u32);
                let st = p.wait.lock();
                if st.status == WaitStatus::Waiting && !queued.contains_key(&b) {
                    return Err(format!("backend {b} thinks it waits but is in no queue"));
                }
                drop(st);
                for (relid, bits) in &fp[i].entries {
                    let tag = LockTag::relation(self.cfg.database, Oid(*relid));
                    let t = &tables[self.partition_of(tag.hash_code())];
                    if let Some(e) = t.locks.get(&tag)
                        && e.grant_mask & strong_mask != 0
                    {
                        return Err(format!(
                            "backend {b} holds {:?} on {tag} in fast path while a strong lock is granted",
                            LockMode::modes_in(*bits).collect::<Vec<_>>()
                        ));
                    }
                }
                if fp[i].vxid_lock && p.lxid.load(Ordering::Acquire) != fp[i].vxid_lxid.0 {
                    return Err(format!("backend {b} holds a fast-path VXID lock of a finished transaction"));
                }
            }
            Ok(())
        })
    }

    /// `LockRelease`'s main-table half: takes `tag`'s partition lock, ungrants `me`'s `mode`
    /// (`UnGrantLock`) and cleans up (`CleanUpLock`), waking waiters that can now proceed.
    ///
    /// # Panics
    /// If `me` does not hold `mode` on `tag` in the main table (the local table is out of step).
    #[inline(never)]
    fn release_main(
        &self,
        me: BackendId,
        counters: &BackendCounters,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
    ) {
        let p = self.partition_of(hash);
        self.with_partition(p, Some(counters), |t| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.main");
            for w in t.release(tag, me, mode) {
                self.wake(w);
            }
        });
    }

    /// `CheckDeadLock` for waiter `me` once its deadlock_timeout expired: None if it is not
    /// (or no longer) deadlocked, after resolving soft deadlocks; the error if it is the victim
    /// (it has then been removed from the queue).
    fn check_dead_lock(&self, me: BackendId, counters: &BackendCounters) -> Option<LockError> {
        counters.deadlock_checks.incr();
        self.with_all_partitions(Some(counters), |tables| {
            let (tag, mode) = {
                let st = self.procs[me.index()].wait.lock();
                if st.status != WaitStatus::Waiting {
                    return None;
                }
                (st.tag?, st.mode)
            };
            let mut g = WaitGraph::default();
            for t in tables.iter() {
                for (tg, e) in t.locks.iter() {
                    if !e.wait_queue.is_empty() {
                        g.push(GraphLock {
                            tag: *tg,
                            holders: t.holders(*tg, e).collect::<Vec<ProcLock>>(),
                            queue: e.wait_queue.iter().copied().collect(),
                        });
                    }
                }
            }
            match deadlock::deadlock_check(&g, me, self.cfg.max_backends) {
                Outcome::NoDeadlock => None,
                Outcome::Soft(orders) => {
                    counters.soft_deadlocks.incr();
                    for (li, order) in orders {
                        let lt = g.locks[li].tag;
                        let t = &mut tables[self.partition_of(lt.hash_code())];
                        if let Some(e) = t.locks.get_mut(&lt) {
                            e.wait_queue = order.into_iter().collect();
                        }
                        for w in t.wakeup(lt) {
                            self.wake(w);
                        }
                    }
                    None
                }
                Outcome::Hard(details) => {
                    counters.deadlocks.incr();
                    let t = &mut tables[self.partition_of(tag.hash_code())];
                    for w in t.remove_from_wait_queue(tag, me) {
                        self.wake(w);
                    }
                    let mut st = self.procs[me.index()].wait.lock();
                    st.status = WaitStatus::Idle;
                    st.tag = None;
                    let _ = mode;
                    Some(LockError::Deadlock { detail: deadlock::describe(&details) })
                }
            }
        })
    }
}

/// A backend's handle on the lock manager: its local lock table, fast-path bookkeeping,
/// timeouts and counters. Not `Sync`: one thread is one backend.
pub struct Backend {
    lmgr: Arc<Lmgr>,
    id: BackendId,
    local: LocalTable,
    /// `FastPathLocalUseCounts`, as masks: per group, a superset of the slots in use (its
    /// population count is PostgreSQL's count; all ones = full, zero = nothing to release).
    fp_used: Vec<u16>,
    counters: lockstack_common::StatsBlock<BackendCounters>,
    deadlock_timeout: Duration,
    lock_timeout: Option<Duration>,
    next_lxid: LocalTransactionId,
    vxid: Option<VirtualTransactionId>,
    /// Reused by [`release_all`](Self::release_all): fast-path (relid, mode) requests, whether
    /// each was still in a slot, and each one's (tag, mode, hash) for the main-table fallback.
    #[allow(clippy::type_complexity)]
    fp_scratch: (Vec<(u32, LockMode)>, Vec<bool>, Vec<(LockTag, LockMode, u32)>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend").field("id", &self.id).field("vxid", &self.vxid).finish()
    }
}

enum VxidProbe {
    Ended,
    Running,
    Wait,
}

impl Backend {
    /// This backend's id.
    pub fn id(&self) -> BackendId {
        self.id
    }

    /// The shared lock manager.
    pub fn lmgr(&self) -> &Arc<Lmgr> {
        &self.lmgr
    }

    /// Sets `deadlock_timeout` (PostgreSQL default 1 s): how long a waiter sleeps before it runs
    /// the deadlock detector.
    pub fn set_deadlock_timeout(&mut self, t: Duration) {
        self.deadlock_timeout = t;
    }

    /// The current `deadlock_timeout`.
    pub fn deadlock_timeout(&self) -> Duration {
        self.deadlock_timeout
    }

    /// Sets `lock_timeout` (9.3+; `None` = wait forever, PostgreSQL's 0).
    pub fn set_lock_timeout(&mut self, t: Option<Duration>) {
        self.lock_timeout = t;
    }

    /// The current `lock_timeout`.
    pub fn lock_timeout(&self) -> Option<Duration> {
        self.lock_timeout
    }

    /// The running transaction's VXID, if any.
    pub fn vxid(&self) -> Option<VirtualTransactionId> {
        self.vxid
    }

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

    /// `LockAcquireExtended(tag, mode, sessionLock, dontWait)`.
    ///
    /// Waits (publishing `Lock:<kind>` as the wait event) until granted, unless
    /// `opts.dont_wait`. While waiting, runs the deadlock detector once `deadlock_timeout` has
    /// passed and gives up when `lock_timeout` has.
    ///
    /// The local lock table is searched once (PostgreSQL's `hash_search(HASH_ENTER)` of the
    /// LOCALLOCK): the entry, or the place for it, is kept until the request is decided.
    ///
    /// # Errors
    /// [`LockError::NotAvailable`] (dont_wait), [`LockError::Deadlock`] (this backend is the
    /// victim, found at queue insertion or by the detector), [`LockError::LockTimeout`]. After
    /// an error the request has left no trace; locks held before are still held.
    #[inline]
    pub fn lock(
        &mut self,
        tag: LockTag,
        mode: LockMode,
        opts: LockOptions,
    ) -> Result<LockAcquireResult, LockError> {
        let key = LocalKey::new(&tag, mode);
        self.local.reserve_one();
        let found = self.local.find(&key);
        let _cost = lockstack_common::sync::hook::pg_region(if found.is_ok() {
            "lmgr.lock_acquire.local_held"
        } else {
            "lmgr.lock_acquire.local"
        });
        let vacant = match found {
            Ok(i) => {
                // Entries exist only while held (`unlock` and `release_all` remove them at 0).
                let l = self.local.get_mut(i);
                debug_assert!(l.session + l.xact > 0);
                if opts.session {
                    l.session += 1;
                } else {
                    l.xact += 1;
                }
                return Ok(LockAcquireResult::AlreadyHeld);
            }
            Err(i) => i,
        };
        let hash = tag.hash_code();
        if self.lmgr.eligible_for_fast_path(&tag, mode) && self.try_fast_path(tag.field2, mode, hash) {
            let l = LocalLock {
                session: u32::from(opts.session),
                xact: u32::from(!opts.session),
                strong: false,
                hash,
            };
            self.local.insert_at(vacant, &key, l);
            return Ok(LockAcquireResult::Acquired);
        }
        self.lock_main(vacant, &key, tag, mode, hash, opts)
    }

    /// The fast-path attempt of `LockAcquireExtended` for an eligible request: true if granted
    /// in a slot; false (a spill, counted) if the group is full or a strong lock is pending.
    #[inline]
    fn try_fast_path(&mut self, relid: u32, mode: LockMode, hash: u32) -> bool {
        let lmgr = &*self.lmgr;
        let g = lmgr.fp.group_of(relid);
        if self.fp_used[g] == u16::MAX {
            self.counters.spills_full.incr();
            return false;
        }
        match lmgr.fp.try_grant(self.id, relid, mode, hash) {
            FastPathGrant::Granted { used } => {
                self.fp_used[g] = used;
                self.counters.fast_path_grants.incr();
                true
            }
            FastPathGrant::StrongLockHeld => {
                self.counters.spills_strong.incr();
                false
            }
            FastPathGrant::SlotsFull => {
                self.fp_used[g] = u16::MAX;
                self.counters.spills_full.incr();
                false
            }
        }
    }

    /// The main-table half of `LockAcquireExtended` (steps after the fast path): strong-lock
    /// bookkeeping and transfer, the request in the partition, waiting. `vacant` is the local
    /// table's free slot for `key` (nothing changed the local table since it was found).
    #[inline(never)]
    fn lock_main(
        &mut self,
        vacant: usize,
        key: &LocalKey,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
        opts: LockOptions,
    ) -> Result<LockAcquireResult, LockError> {
        let lmgr = &*self.lmgr;
        let counters = &*self.counters;
        let strong = lmgr.conflicts_with_fast_path(&tag, mode);
        if strong {
            lmgr.fp.begin_strong(hash);
            if tag.field1 == lmgr.cfg.database.0 {
                let p = lmgr.partition_of(hash);
                let moved = lmgr.fp.transfer(tag.field2, |b, m| {
                    lmgr.with_partition(p, Some(counters), |t| t.setup_and_grant(tag, b, m));
                });
                counters.transfers.add(moved as u64);
            }
        }
        let req = Requester {
            lmgr,
            me: self.id,
            counters,
            deadlock_timeout: self.deadlock_timeout,
            lock_timeout: self.lock_timeout,
        };
        match req.acquire_main(tag, mode, hash, opts.dont_wait) {
            Ok(()) => {
                let l = LocalLock {
                    session: u32::from(opts.session),
                    xact: u32::from(!opts.session),
                    strong,
                    hash,
                };
                self.local.insert_at(vacant, key, l);
                Ok(LockAcquireResult::Acquired)
            }
            Err(e) => {
                if strong {
                    lmgr.fp.end_strong(hash);
                }
                Err(e)
            }
        }
    }

    /// `ConditionalLockAcquire`: [`lock`](Self::lock) with `dont_wait`; `Ok(false)` when the
    /// lock is not available.
    ///
    /// # Errors
    /// Never [`LockError::NotAvailable`]; the other errors cannot happen without waiting, so in
    /// practice this always returns `Ok`.
    pub fn conditional_lock(
        &mut self,
        tag: LockTag,
        mode: LockMode,
        session: bool,
    ) -> Result<bool, LockError> {
        match self.lock(tag, mode, LockOptions { session, dont_wait: true }) {
            Ok(_) => Ok(true),
            Err(LockError::NotAvailable { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// [`lock`](Self::lock) on `LockTag::relation(MyDatabaseId, rel)` as a transaction lock
    /// (`LockRelationOid`).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    #[inline]
    pub fn lock_relation(&mut self, rel: Oid, mode: LockMode) -> Result<LockAcquireResult, LockError> {
        self.lock(LockTag::relation(self.lmgr.cfg.database, rel), mode, LockOptions::XACT)
    }

    /// Releases one transaction-owned acquisition of `mode` on relation `rel`
    /// (`UnlockRelationOid`); false if none is held.
    #[inline]
    pub fn unlock_relation(&mut self, rel: Oid, mode: LockMode) -> bool {
        self.unlock(LockTag::relation(self.lmgr.cfg.database, rel), mode, false)
    }

    /// `LockRelease(tag, mode, sessionLock)`: drops one acquisition owned by the session
    /// (`session`) or the transaction; when the backend's count reaches zero the lock is
    /// released in its fast-path slot or the main table, and waiters that can proceed are
    /// granted. Returns false (PostgreSQL: WARNING "you don't own a lock of type ...") when
    /// that owner holds no such lock.
    ///
    /// The local lock table is searched once: the entry found is updated or removed in place
    /// (PostgreSQL searches with `HASH_FIND` and removes with a second `HASH_REMOVE` search in
    /// `RemoveLocalLock`).
    #[inline]
    pub fn unlock(&mut self, tag: LockTag, mode: LockMode, session: bool) -> bool {
        let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.local");
        let Ok(i) = self.local.find(&LocalKey::new(&tag, mode)) else { return false };
        let l = self.local.get_mut(i);
        let owned = if session { &mut l.session } else { &mut l.xact };
        if *owned == 0 {
            return false;
        }
        *owned -= 1;
        if l.session + l.xact > 0 {
            return true;
        }
        let l = self.local.remove_at(i);
        release_shared(&self.lmgr, self.id, &mut self.fp_used, &self.counters, tag, mode, l.hash);
        if l.strong {
            self.lmgr.fp.end_strong(l.hash);
        }
        true
    }

    /// `LockReleaseAll`: releases every transaction-owned acquisition and, with
    /// `session_too`, every session-owned one as well. Does not end the VXID (see
    /// [`end_transaction`](Self::end_transaction)).
    pub fn release_all(&mut self, session_too: bool) {
        let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release_all");
        let Backend { lmgr, id, local, fp_used, counters, fp_scratch, .. } = self;
        // Fast-path entries are collected and cleared under one hold of fpInfoLock afterwards,
        // as LockReleaseAll does; everything else is released from the main table now.
        let (reqs, found, main) = fp_scratch;
        reqs.clear();
        main.clear();
        local.retain(|tag, mode, l| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_release.local");
            l.xact = 0;
            if session_too {
                l.session = 0;
            }
            if l.session > 0 {
                return true;
            }
            if lmgr.eligible_for_fast_path(&tag, mode) && fp_used[lmgr.fp.group_of(tag.field2)] > 0 {
                reqs.push((tag.field2, mode));
                main.push((tag, mode, l.hash));
            } else {
                lmgr.release_main(*id, counters, tag, mode, l.hash);
            }
            if l.strong {
                lmgr.fp.end_strong(l.hash);
            }
            false
        });
        if !reqs.is_empty() {
            found.clear();
            found.resize(reqs.len(), false);
            lmgr.fp.ungrant_many(*id, reqs, found, fp_used);
            for (&(tag, mode, hash), &was_fast) in main.iter().zip(found.iter()) {
                if !was_fast {
                    lmgr.release_main(*id, counters, tag, mode, hash);
                }
            }
        }
    }

    /// Releases every session-owned acquisition of an advisory lock (`LockReleaseSession` of
    /// the user lock method, as `pg_advisory_unlock_all()` does); transaction-owned ones stay.
    pub fn release_advisory_session_locks(&mut self) {
        let keys: Vec<(LockTag, LockMode)> = self
            .local
            .iter()
            .filter(|(t, _, l)| t.kind == LockTagKind::Advisory && l.session > 0)
            .map(|(t, m, _)| (t, m))
            .collect();
        for (tag, mode) in keys {
            while self.local_lock(tag, mode).is_some_and(|l| l.session > 0) {
                self.unlock(tag, mode, true);
            }
        }
    }

    /// How many acquisitions of `mode` on `tag` this backend holds (session + transaction).
    pub fn local_count(&self, tag: LockTag, mode: LockMode) -> u32 {
        self.local_lock(tag, mode).map(|l| l.session + l.xact).unwrap_or(0)
    }

    fn local_lock(&self, tag: LockTag, mode: LockMode) -> Option<&LocalLock> {
        self.local.get(&LocalKey::new(&tag, mode))
    }

    /// Number of (tag, mode) pairs in the local lock table.
    pub fn local_len(&self) -> usize {
        self.local.len()
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

    /// [`Lmgr::get_lock_conflicts`] excluding this backend (PostgreSQL never lists the caller).
    pub fn get_lock_conflicts(&self, tag: LockTag, mode: LockMode) -> Vec<VirtualTransactionId> {
        self.lmgr.get_lock_conflicts(tag, mode, Some(self.id))
    }
}

/// What the main-table path needs of a requesting backend, borrowed apart from its local lock
/// table, so that [`Backend::lock`] can keep the LOCALLOCK slot it found while the request is
/// decided.
struct Requester<'a> {
    lmgr: &'a Lmgr,
    me: BackendId,
    counters: &'a BackendCounters,
    deadlock_timeout: Duration,
    lock_timeout: Option<Duration>,
}

impl Requester<'_> {
    /// Steps 6-10 of `LockAcquireExtended`: the main-table request, queueing and waiting.
    fn acquire_main(
        &self,
        tag: LockTag,
        mode: LockMode,
        hash: u32,
        dont_wait: bool,
    ) -> Result<(), LockError> {
        let (lmgr, me, counters) = (self.lmgr, self.me, self.counters);
        let p = lmgr.partition_of(hash);
        let outcome = lmgr.with_partition(p, Some(counters), |t| {
            let _cost = lockstack_common::sync::hook::pg_region("lmgr.lock_acquire.main");
            let (e, pl) = t.setup(tag, me, mode);
            let conflict = mode.conflict_mask() & e.wait_mask != 0 || e.check_conflicts(mode, pl.hold_mask);
            if !conflict {
                e.grant(pl, mode);
                return Join::Granted;
            }
            let j = t.join_wait_queue(tag, me, mode, dont_wait);
            match j {
                Join::Granted => {}
                Join::Queued => {
                    let mut st = lmgr.procs[me.index()].wait.lock();
                    st.status = WaitStatus::Waiting;
                    st.tag = Some(tag);
                    st.mode = mode;
                }
                Join::NotAvailable | Join::EarlyDeadlock(_) => t.abandon_request(tag, me, mode),
            }
            j
        });
        match outcome {
            Join::Granted => {
                counters.main_acquisitions[p].incr();
                Ok(())
            }
            Join::NotAvailable => {
                counters.not_available.incr();
                Err(LockError::NotAvailable { tag, mode })
            }
            Join::EarlyDeadlock(other) => {
                counters.deadlocks.incr();
                let details = [
                    deadlock::DetailEntry { backend: me, tag, mode },
                    deadlock::DetailEntry { backend: other.backend, tag, mode: other.mode },
                ];
                Err(LockError::Deadlock { detail: deadlock::describe(&details) })
            }
            Join::Queued => {
                let r = self.wait_on_lock(tag, mode, p);
                if r.is_ok() {
                    counters.main_acquisitions[p].incr();
                }
                r
            }
        }
    }

    /// `WaitOnLock` / the sleeping half of `ProcSleep`.
    fn wait_on_lock(&self, tag: LockTag, mode: LockMode, p: usize) -> Result<(), LockError> {
        let (lmgr, me) = (self.lmgr, self.me);
        let proc_ = &lmgr.procs[me.index()];
        self.counters.waits.incr();
        let _scope = WaitEventScope::new(WaitEvent::lock(tag.kind.wait_event_index()));
        let start = Instant::now();
        let deadlock_at = start + self.deadlock_timeout;
        let timeout_at = self.lock_timeout.map(|t| start + t);
        let mut checked = false;
        loop {
            {
                let mut st = proc_.wait.lock();
                loop {
                    if st.status == WaitStatus::Granted {
                        st.status = WaitStatus::Idle;
                        return Ok(());
                    }
                    let next = match (checked, timeout_at) {
                        (false, Some(t)) => Some(t.min(deadlock_at)),
                        (false, None) => Some(deadlock_at),
                        (true, t) => t,
                    };
                    match next {
                        None => proc_.cv.wait(&mut st),
                        Some(t) => {
                            if proc_.cv.wait_until(&mut st, t).timed_out() {
                                if st.status == WaitStatus::Granted {
                                    continue;
                                }
                                break;
                            }
                        }
                    }
                }
            }
            let now = Instant::now();
            if let Some(t) = timeout_at
                && now >= t
            {
                // Give up unless the grant raced with the timer (`LockErrorCleanup`).
                let granted = lmgr.with_partition(p, Some(self.counters), |t| {
                    let mut st = proc_.wait.lock();
                    if st.status == WaitStatus::Granted {
                        st.status = WaitStatus::Idle;
                        return true;
                    }
                    st.status = WaitStatus::Idle;
                    st.tag = None;
                    drop(st);
                    for w in t.remove_from_wait_queue(tag, me) {
                        lmgr.wake(w);
                    }
                    false
                });
                if granted {
                    return Ok(());
                }
                self.counters.lock_timeouts.incr();
                return Err(LockError::LockTimeout { tag, mode });
            }
            if !checked && now >= deadlock_at {
                checked = true;
                if let Some(err) = lmgr.check_dead_lock(me, self.counters) {
                    return Err(err);
                }
            }
        }
    }
}

/// Releases backend `me`'s hold of `mode` on `tag` (hash code `hash`) wherever it lives: its
/// fast-path slot (`FastPathUnGrantRelationLock` under its `fpInfoLock`) or, if it is not there
/// (taken in the main table, or transferred there by a strong locker), the main table.
#[inline]
fn release_shared(
    lmgr: &Lmgr,
    me: BackendId,
    fp_used: &mut [u16],
    counters: &BackendCounters,
    tag: LockTag,
    mode: LockMode,
    hash: u32,
) {
    if lmgr.eligible_for_fast_path(&tag, mode) {
        let g = lmgr.fp.group_of(tag.field2);
        if fp_used[g] != 0
            && let Some(used) = lmgr.fp.ungrant(me, tag.field2, mode)
        {
            fp_used[g] = used;
            return;
        }
    }
    lmgr.release_main(me, counters, tag, mode, hash);
}

impl Drop for Backend {
    /// Backend exit (`ProcKill` → `LockReleaseAll(allLocks)`): ends the transaction and releases
    /// session locks too, then detaches.
    fn drop(&mut self) {
        self.end_transaction();
        self.release_all(true);
        self.lmgr.procs[self.id.index()].attached.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lockstack_lwlock::LwLockImpl;

    fn wait_until(what: &str, cond: impl Fn() -> bool) {
        let start = Instant::now();
        while !cond() {
            assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn queued(lock: &LwLock) -> usize {
        match lock {
            LwLock::Atomic(l) => l.queued_waiters(),
            _ => unreachable!("the test configures atomic LWLocks"),
        }
    }

    /// What backend 2 does against backend 1 while the check runs.
    #[derive(Copy, Clone)]
    enum Race {
        /// `virtual_xact_lock` on backend 1's VXID (materialises it under backend 1's
        /// fpInfoLock and then the VXID's partition lock).
        VirtualXactLock,
        /// AccessExclusiveLock on a relation backend 1 holds AccessShareLock on in fast path
        /// (the transfer takes backend 1's fpInfoLock and then the relation's partition lock).
        StrongLockTransfer,
    }

    /// `check_invariants` holding the partition locks must never wait for a
    /// fast-path lock that another backend holds while it waits for a partition lock.
    ///
    /// Forced interleaving: the test holds backend 0's wait-state mutex, which the check takes
    /// (with every partition lock held) before it looks at backend 1's fast-path state. Once
    /// the check holds every partition lock, backend 2 starts `race` against backend 1, which
    /// takes backend 1's fpInfoLock and then a partition lock; then the test lets the check go
    /// on. With fpInfoLock taken after the partition locks, the check and backend 2 now wait
    /// for each other.
    fn check_invariants_against(race: Race) {
        let cfg = LmgrConfig {
            max_backends: 3,
            vxid: VxidLocks::OnDemand,
            lwlock_kind: lockstack_lwlock::LwLockKind::Atomic,
            ..LmgrConfig::default()
        };
        let lmgr = Lmgr::new(cfg).unwrap();
        let mut holder = lmgr.attach(BackendId(1)).unwrap();
        let vxid = holder.start_transaction();
        let rel = LockTag::relation(lmgr.database(), Oid(16384));
        holder.lock(rel, LockMode::AccessShare, LockOptions::XACT).unwrap();
        assert_eq!(lmgr.fast_path_len(), 1, "the AccessShareLock is held in fast path");
        let mut waiter = lmgr.attach(BackendId(2)).unwrap();
        let fp_lock = lmgr.fp.info_lock(BackendId(1));
        let contended = match race {
            Race::VirtualXactLock => LockTag::virtual_transaction(vxid),
            Race::StrongLockTransfer => rel,
        };
        // SAFETY: the raw lock is only read (its queue length), never acquired or released.
        let partition = unsafe { lmgr.partitions[lmgr.partition_of(contended.hash_code())].raw() };

        let gate = lmgr.procs[0].wait.lock();
        let checked = Arc::new(AtomicBool::new(false));
        let checker = {
            let (lmgr, checked) = (Arc::clone(&lmgr), Arc::clone(&checked));
            std::thread::spawn(move || {
                let r = lmgr.check_invariants();
                checked.store(true, Ordering::SeqCst);
                r
            })
        };
        wait_until("the check holds every partition lock", || {
            lmgr.partitions.iter().all(|p| p.is_locked_exclusive())
        });
        let racer = std::thread::spawn(move || {
            let r = match race {
                Race::VirtualXactLock => waiter.virtual_xact_lock(vxid, true).map(|ended| assert!(ended)),
                Race::StrongLockTransfer => {
                    waiter.lock(rel, LockMode::AccessExclusive, LockOptions::XACT).map(|_| ())
                }
            };
            waiter.end_transaction();
            r
        });
        // Either backend 2 holds backend 1's fpInfoLock (and will wait for the partition
        // lock), or it waits for an fpInfoLock (the check holds them all; the transfer visits
        // backends from 0 on).
        wait_until("backend 2 reached backend 1's fpInfoLock", || {
            fp_lock.is_locked_exclusive() || (0..3).any(|b| queued(lmgr.fp.info_lock(BackendId(b))) > 0)
        });
        drop(gate);
        let start = Instant::now();
        let deadlocked = loop {
            if checked.load(Ordering::SeqCst) {
                break false;
            }
            if fp_lock.is_locked_exclusive() && queued(fp_lock) > 0 && queued(partition) > 0 {
                break true;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for the check");
            std::thread::sleep(Duration::from_micros(200));
        };
        if deadlocked {
            // Dropping the holder would end its transaction, which needs the fpInfoLock that the
            // deadlocked backend 2 holds: leave it (and the stuck threads) behind.
            std::mem::forget(holder);
            panic!(
                "check_invariants waits for backend 1's fpInfoLock, held by backend 2, which \
                 waits for a partition lock the check holds"
            );
        }
        checker.join().unwrap().unwrap();
        // Backend 2 now waits for backend 1 in the main table.
        wait_until("backend 2 waits for backend 1", || lmgr.waiting_for(BackendId(2)).is_some());
        lmgr.check_invariants().unwrap();
        holder.end_transaction();
        racer.join().unwrap().unwrap();
        lmgr.check_invariants().unwrap();
        assert_eq!(lmgr.main_table_len(), 0);
        assert_eq!(lmgr.fast_path_len(), 0);
        assert_eq!(lmgr.strong_lock_total(), 0);
    }

    #[test]
    fn check_invariants_does_not_deadlock_with_virtual_xact_lock() {
        check_invariants_against(Race::VirtualXactLock);
    }

    #[test]
    fn check_invariants_does_not_deadlock_with_strong_lock_transfer() {
        check_invariants_against(Race::StrongLockTransfer);
    }
}
