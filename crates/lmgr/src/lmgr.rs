//! The shared lock manager ([`Lmgr`]) and a backend's handle on it ([`Backend`]): the
//! acquisition, wait and release paths of `lock.c` (`LockAcquireExtended`, `LockRelease`,
//! `LockReleaseAll`) and `proc.c` (`JoinWaitQueue`/`ProcSleep`, `ProcLockWakeup`,
//! `CheckDeadLock`).
//!
//! This file holds the shared structure and the handle: the per-backend `PGPROC` wait state,
//! the public result and option types, [`Lmgr`] with its constructor and partition helpers, and
//! [`Backend`] with its settings (locks touched here: the `LockManager` partition locks, taken
//! through `with_partition*`; a `PGPROC`'s wait mutex to wake it). The paths are in `lmgr/`:
//! `acquire.rs`, `waiting.rs` (sleep and deadlock check), `fast_path.rs`, `release.rs`,
//! `xact_locks.rs` (xid and vxid locks) and `status.rs` (`pg_locks` and diagnostics).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::{AtomicBool, AtomicU32, AtomicU64, Condvar, Instant, Mutex, Ordering};
use lockstack_common::{
    AttachError, BackendId, LocalTransactionId, Oid, StatsRegistry, TrancheId, VirtualTransactionId,
};
use lockstack_lwlock::{LwLock, LwRwLock, LwRwLockExt};

use crate::config::{LmgrConfig, LmgrConfigError, STRONG_LOCK_PARTITIONS};
use crate::fastpath::FastPathArea;
use crate::local::LocalTable;
use crate::mode::LockMode;
use crate::stats::BackendCounters;
use crate::table::PartitionTables;
use crate::tag::LockTag;

mod acquire;
mod fast_path;
mod owners;
pub use owners::XactLockMark;
mod release;
mod status;
mod waiting;
mod xact_locks;

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
    /// The next timed event of this backend's lock wait, as nanoseconds after [`Lmgr::epoch`]
    /// plus one (0: none): its deadlock check until that has run, then its `lock_timeout`.
    /// Written by the waiter (and cleared by whoever grants it); read without a lock by
    /// [`Lmgr::earliest_lock_timer`], which only an observer (the isolation runner) calls.
    timer: AtomicU64,
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
    /// Fail with [`LockError::NotAvailable`](crate::LockError::NotAvailable) instead of waiting (`dontWait`, NOWAIT).
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
    /// When the lock manager was created: the origin of the waits' published timers.
    epoch: Instant,
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
                    timer: AtomicU64::new(0),
                })
            })
            .collect();
        for p in partitions.iter() {
            p.name_line();
        }
        let groups = cfg.fast_path.groups().max(1);
        let fp = FastPathArea::new(cfg.max_backends, groups, STRONG_LOCK_PARTITIONS, cfg.lwlock_kind);
        Ok(Arc::new(Lmgr {
            cfg,
            partitions,
            procs,
            fp,
            counters: StatsRegistry::new(),
            epoch: Instant::now(),
        }))
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
        p.timer.store(0, Ordering::Release);
        p.cv.notify_one();
    }

    /// Publishes backend `b`'s next timed wait event (`None`: none left), for
    /// [`Lmgr::earliest_lock_timer`].
    fn set_timer(&self, b: BackendId, at: Option<Instant>) {
        let v = at.map_or(0, |t| {
            u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX - 1) + 1
        });
        self.procs[b.index()].timer.store(v, Ordering::Release);
    }

    fn vxid_of(&self, b: BackendId) -> Option<VirtualTransactionId> {
        let lxid = self.procs[b.index()].lxid.load(Ordering::Acquire);
        (lxid != 0).then_some(VirtualTransactionId { backend_id: b, local_xid: LocalTransactionId(lxid) })
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
mod tests;
