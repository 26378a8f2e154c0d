//! The ProcArray: membership, xid assignment, `get_snapshot_data`, the end of transactions and
//! the global xmin horizon (`src/backend/storage/ipc/procarray.c`,
//! `src/backend/access/transam/varsup.c`).
//!
//! Locking follows PostgreSQL (reference §4.2 and §7):
//!
//! * `XidGenLock` (exclusive) serialises xid assignment; the new xid is stored in the backend's
//!   entry before the lock is released, so an assigned xid is visible to snapshots before any
//!   later xid can be (and therefore before any later xid can complete).
//! * `get_snapshot_data` holds `ProcArrayLock` shared; an xid leaves the running set, and
//!   `latest_completed_xid` advances, only under `ProcArrayLock` exclusive (taken by the ending
//!   backend, a FlexLock releaser or a group leader).
//! * Membership changes take `ProcArrayLock` then `XidGenLock`, both exclusive, because `Dense`
//!   entries move and xid assignment writes them under `XidGenLock` only.
//!
//! This file holds the shared structure itself: the errors and end-of-transaction request types,
//! the hot-field layouts, [`ProcArray`] with its constructor and accessors, the [`Backend`]
//! handle with its accessors and vacuum flags (locks touched here: `ProcArrayLock` for the
//! member list and the vacuum flags; `ProcArrayLock`'s release runs queued FlexLock requests).
//! The work is in `procarray/`: `membership.rs` (attach and leave), `xid_assign.rs` (starting
//! transactions, xids and subxids), `snapshots.rs` (`get_snapshot_data` and the xmin horizon)
//! and `end_xact.rs` (the end of a transaction).

use crate::sync::Ordering;
use crate::sync::plain::AtomicBool as StdBool;
use std::fmt;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::{BackendId, LocalTransactionId, StatsRegistry, TrancheId, TransactionId, WaitEvent};
use lockstack_lwlock::{FlexLock, GroupCombiner, LwLock, LwLockHeld, LwLockImpl, LwLockMode};

use crate::config::{ConfigError, EndXactStrategy, Layout, ProcArrayConfig};
use crate::old_snapshot::{Clock, OldSnapshotTimeMap, SystemClock};
use crate::proc::{PROC_KNOWN_FLAGS, PgProc, PgXact, SubXidState};
use crate::snapshot::Snapshot;
use crate::stats::{BackendProcStats, ProcArrayStats};
use crate::sync::{AtomicU8, AtomicU32, AtomicU64};
use lockstack_common::sync::hook;

mod end_xact;
mod membership;
mod snapshots;
mod xid_assign;

/// Errors of ProcArray xid assignment and subtransaction calls (membership errors are
/// [`AttachError`](crate::AttachError)s, as for every subsystem).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProcArrayError {
    /// `abort_subxids` was given an xid that is not a live subtransaction of this backend.
    NotMySubxid(TransactionId),
    /// `set_vacuum_flags` was given bits outside the known vacuum/status flags.
    UnknownVacuumFlags(u8),
    /// The xid-extension hook failed (its message); no xid was assigned.
    XidExtend(String),
    /// `set_xid_extend_hook` was called when a hook was already installed.
    XidExtendHookSet,
}

impl fmt::Display for ProcArrayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcArrayError::NotMySubxid(x) => {
                write!(f, "xid {x} is not a live subtransaction of this backend's transaction")
            }
            ProcArrayError::UnknownVacuumFlags(v) => write!(f, "vacuum flags {v:#04x} include unknown bits"),
            ProcArrayError::XidExtend(e) => write!(f, "could not extend the transaction status logs: {e}"),
            ProcArrayError::XidExtendHookSet => f.write_str("an xid-extension hook is already installed"),
        }
    }
}

impl std::error::Error for ProcArrayError {}

/// What the end-of-transaction code must do for one backend: clear its entry and advance
/// `latest_completed_xid` to `latest_xid` (PostgreSQL passes the latest xid of the transaction
/// tree explicitly, because the subxid cache may have overflowed).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EndXactRequest {
    /// The ending backend's `pgprocno`.
    pub pgprocno: u32,
    /// The newest xid among the transaction and its committed subtransactions.
    pub latest_xid: TransactionId,
}

/// How a transaction left the ProcArray.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum EndXactRole {
    /// It had no xid: xmin cleared without ProcArrayLock.
    ReadOnly,
    /// `Exclusive`: own blocking exclusive acquisition.
    Exclusive,
    /// `FlexLock`: the lock was free and the caller cleared its entry.
    FlexDirect,
    /// `FlexLock`: queued and cleared by a releasing holder.
    FlexQueued,
    /// `GroupClear`: the conditional exclusive acquire succeeded.
    GroupAlone,
    /// `GroupClear`: led a group of `members` requests (its own included).
    GroupLeader {
        /// Requests cleared under the leader's one exclusive acquisition.
        members: usize,
    },
    /// `GroupClear`: cleared by another backend's group.
    GroupFollower,
}

/// Result of [`Backend::end_transaction`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EndXactOutcome {
    /// The top-level xid that ended (invalid for a read-only transaction).
    pub xid: TransactionId,
    /// The newest xid of the tree (what `latest_completed_xid` was advanced to, if newer).
    pub latest_xid: TransactionId,
    /// How the entry was cleared.
    pub role: EndXactRole,
}

/// `ShmemVariableCache` / `TransamVariables`: the xid counters, on their own cache line.
struct TransamVariables {
    next_xid: AtomicU32,
    latest_completed_xid: AtomicU32,
    xact_completion_count: AtomicU64,
}

/// 14's dense arrays, in ProcArray order (`ProcGlobal->xids`, `subxidStates`, `statusFlags`).
struct DenseArrays {
    xids: Box<[AtomicU32]>,
    subxid_states: Box<[SubXidState]>,
    status_flags: Box<[AtomicU8]>,
}

/// Where the hot fields live, per [`Layout`].
enum Hot {
    Pgproc,
    Pgxact(Box<[PgXact]>),
    PgxactPadded(Box<[CachePadded<PgXact>]>),
    Dense(DenseArrays),
}

/// The shared ProcArray of one simulated server: `max_backends` `PgProc`s, the hot-field
/// layout, `ProcArrayLock`, `XidGenLock`, the xid counters and the old-snapshot map.
///
/// Create it with [`ProcArray::new`], then make each client thread a member with
/// [`ProcArray::attach`], which returns that thread's [`Backend`] handle.
pub struct ProcArray {
    cfg: ProcArrayConfig,
    procs: Box<[PgProc]>,
    hot: Hot,
    /// `ProcArrayStruct.numProcs`; changed under ProcArrayLock (+ XidGenLock) exclusive.
    num_procs: AtomicU32,
    /// `ProcArrayStruct.pgprocnos[]`, sorted ascending (9.2+ keeps it in `PGPROC` order).
    pgprocnos: Box<[AtomicU32]>,
    attached: Box<[StdBool]>,
    /// ProcArrayLock; every release goes through `release_pa` so FlexLock can run queued work.
    proc_array_lock: FlexLock<EndXactRequest, LwLock>,
    group: GroupCombiner<EndXactRequest>,
    xid_gen_lock: LwLock,
    transam: CachePadded<TransamVariables>,
    old_snapshot: OldSnapshotTimeMap,
    stats: StatsRegistry<BackendProcStats>,
    /// Called for every new xid under XidGenLock (see [`ProcArray::set_xid_extend_hook`]).
    extend_hook: std::sync::OnceLock<XidExtendHook>,
}

/// What `GetNewTransactionId` runs for each new xid, under XidGenLock and before the xid is
/// handed out: `ExtendCLOG`, `ExtendCommitTs` and `ExtendSUBTRANS` in PostgreSQL (8.0-18), which
/// zero a status page when the xid is the first on it. An `Err` (an I/O error while making room
/// for the page) fails the assignment: the xid is not consumed, as PostgreSQL's `ereport(ERROR)`
/// there leaves `nextXid` unchanged. The message is passed on in
/// [`ProcArrayError::XidExtend`].
pub type XidExtendHook = Box<dyn Fn(TransactionId) -> Result<(), XidExtendError> + Send + Sync>;

/// The error an [`XidExtendHook`] returns: whatever its status logs failed with (a CLOG or
/// pg_subtrans I/O error in the engine).
pub type XidExtendError = Box<dyn std::error::Error + Send + Sync>;

impl fmt::Debug for ProcArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProcArray")
            .field("config", &self.cfg)
            .field("num_procs", &self.num_procs())
            .field("next_xid", &self.next_xid())
            .field("latest_completed_xid", &self.latest_completed_xid())
            .finish_non_exhaustive()
    }
}

impl ProcArray {
    /// A ProcArray for `cfg` (no members yet) reading old-snapshot time from the wall clock.
    ///
    /// Memory: `max_backends` × (`size_of::<PgProc>()` ≈ 1 KiB + the layout's arrays).
    ///
    /// # Errors
    /// If `cfg` fails [`ProcArrayConfig::validate`].
    pub fn new(cfg: ProcArrayConfig) -> Result<Arc<ProcArray>, ConfigError> {
        Self::with_clock(cfg, Arc::new(SystemClock))
    }

    /// As [`new`](Self::new), with the clock old_snapshot_threshold reads (a
    /// [`crate::VirtualClock`] in tests).
    ///
    /// # Errors
    /// If `cfg` fails [`ProcArrayConfig::validate`].
    pub fn with_clock(cfg: ProcArrayConfig, clock: Arc<dyn Clock>) -> Result<Arc<ProcArray>, ConfigError> {
        cfg.validate()?;
        let n = cfg.max_backends;
        let procs: Box<[PgProc]> = (0..n).map(|i| PgProc::new(i as u32)).collect();
        let hot = match cfg.layout {
            Layout::Pgproc => Hot::Pgproc,
            Layout::Pgxact => Hot::Pgxact((0..n).map(|_| PgXact::new()).collect()),
            Layout::PgxactPadded => {
                Hot::PgxactPadded((0..n).map(|_| CachePadded::new(PgXact::new())).collect())
            }
            Layout::Dense => Hot::Dense(DenseArrays {
                xids: (0..n).map(|_| AtomicU32::new(0)).collect(),
                subxid_states: (0..n).map(|_| SubXidState::new()).collect(),
                status_flags: (0..n).map(|_| AtomicU8::new(0)).collect(),
            }),
        };
        // Only the strategy in use needs a member slot per backend.
        let flex_members = if cfg.end_xact == EndXactStrategy::FlexLock { n } else { 1 };
        let group_members = if cfg.end_xact == EndXactStrategy::GroupClear { n } else { 1 };
        let latest = cfg.first_xid.prev();
        let pa = Arc::new(ProcArray {
            procs,
            hot,
            num_procs: AtomicU32::new(0),
            pgprocnos: (0..n).map(|_| AtomicU32::new(u32::MAX)).collect(),
            attached: (0..n).map(|_| StdBool::new(false)).collect(),
            proc_array_lock: FlexLock::new(
                LwLock::new(cfg.lwlock_kind, TrancheId::PROC_ARRAY, 0),
                flex_members,
            ),
            group: GroupCombiner::new(group_members, WaitEvent::PROC_ARRAY_GROUP_UPDATE),
            xid_gen_lock: LwLock::new(cfg.lwlock_kind, TrancheId::XID_GEN, 0),
            transam: CachePadded::new(TransamVariables {
                next_xid: AtomicU32::new(cfg.first_xid.0),
                latest_completed_xid: AtomicU32::new(latest.0),
                // PostgreSQL starts at 1 so that 0 can mean "snapshot not cacheable".
                xact_completion_count: AtomicU64::new(1),
            }),
            extend_hook: std::sync::OnceLock::new(),
            old_snapshot: OldSnapshotTimeMap::new(
                cfg.old_snapshot_threshold,
                cfg.time_map,
                clock,
                cfg.lwlock_kind,
            ),
            stats: StatsRegistry::new(),
            cfg,
        });
        pa.name_lines();
        Ok(pa)
    }

    /// Names the hot lines for a simulation's statistics (see `hook::name_line`): the two
    /// LWLocks, the xid counter, `numProcs` and `pgprocnos`, each PGPROC's hot words
    /// (`"PGPROC 5 xid + xmin"`, `"PGPROC 5 pgxactoff"`) and each member's hot fields in the
    /// layout's array (`"PgXact 5"`, `"ProcGlobal xids 0-15"`).
    fn name_lines(&self) {
        self.proc_array_lock.lock().name_line_as(|| "ProcArrayLock".to_string());
        // XidGenLock and OldSnapshotTimeMapLock are unpadded fields of this struct and may
        // share a line: such a line is named for both.
        self.old_snapshot.name_lines();
        let shared = self.old_snapshot.lock_addr() as usize / hook::LINE_BYTES
            == self.xid_gen_lock.word_addr() as usize / hook::LINE_BYTES;
        self.xid_gen_lock.name_line_as(|| {
            if shared { "XidGenLock + OldSnapshotTimeMapLock".to_string() } else { "XidGenLock".to_string() }
        });
        hook::name_line(&self.transam.next_xid as *const AtomicU32 as *const u8, || {
            "XidGen nextXid".to_string()
        });
        hook::name_line(&self.num_procs as *const AtomicU32 as *const u8, || {
            "ProcArray numProcs".to_string()
        });
        hook::name_elements(&self.pgprocnos, "ProcArray pgprocnos");
        // Each PGPROC's hot words, in every layout: `xid` and `xmin` (GetSnapshotData sets and
        // clears `xmin`, which 14 keeps in PGPROC) and `pgxactoff` (14's dense index).
        for (i, p) in self.procs.iter().enumerate() {
            let a = |r: &AtomicU32| r as *const AtomicU32 as *const u8;
            hook::name_fields(
                &format!("PGPROC {i}"),
                &[("xid", a(&p.xid)), ("xmin", a(&p.xmin)), ("pgxactoff", a(&p.pgxactoff))],
            );
        }
        match &self.hot {
            Hot::Pgproc => {}
            Hot::Pgxact(x) => hook::name_elements(x, "PgXact"),
            Hot::PgxactPadded(x) => hook::name_elements(x, "PgXact"),
            Hot::Dense(d) => {
                hook::name_elements(&d.xids, "ProcGlobal xids");
                hook::name_elements(&d.subxid_states, "ProcGlobal subxidStates");
                hook::name_elements(&d.status_flags, "ProcGlobal statusFlags");
            }
        }
    }

    /// The configuration this ProcArray was built with.
    pub fn config(&self) -> &ProcArrayConfig {
        &self.cfg
    }

    /// The layout of the hot fields.
    pub fn layout(&self) -> Layout {
        self.cfg.layout
    }

    /// The `PgProc` of slot `id` (member or not).
    ///
    /// # Panics
    /// If `id` is not below `max_backends`.
    pub fn proc(&self, id: BackendId) -> &PgProc {
        &self.procs[id.index()]
    }

    /// The next xid to be assigned (`nextXid`; a hint when read without XidGenLock).
    pub fn next_xid(&self) -> TransactionId {
        TransactionId(self.transam.next_xid.load(Ordering::Acquire))
    }

    /// `latestCompletedXid`: the newest xid that has left the running set (a hint when read
    /// without ProcArrayLock). Starts as `first_xid - 1`.
    pub fn latest_completed_xid(&self) -> TransactionId {
        TransactionId(self.transam.latest_completed_xid.load(Ordering::Acquire))
    }

    /// `xactCompletionCount` (14+): bumped under exclusive ProcArrayLock at every end of an
    /// xid-bearing transaction and every subtransaction abort that removed cached xids. Starts
    /// at 1.
    pub fn xact_completion_count(&self) -> u64 {
        self.transam.xact_completion_count.load(Ordering::Acquire)
    }

    /// Number of members (`numProcs`).
    pub fn num_procs(&self) -> usize {
        self.num_procs.load(Ordering::Acquire) as usize
    }

    /// The members in ProcArray order (ascending backend id). Takes ProcArrayLock shared.
    pub fn members(&self) -> Vec<BackendId> {
        let held = self.proc_array_lock.acquire(LwLockMode::Shared);
        let n = self.num_procs.load(Ordering::Relaxed) as usize;
        let v = (0..n).map(|i| BackendId(self.pgprocnos[i].load(Ordering::Relaxed))).collect();
        self.release_pa(held);
        v
    }

    /// The ProcArrayLock (for statistics and `is_locked` hints; do not acquire it directly
    /// under the `FlexLock` strategy, whose releases must run queued requests).
    pub fn proc_array_lock(&self) -> &LwLock {
        self.proc_array_lock.lock()
    }

    /// The XidGenLock.
    pub fn xid_gen_lock(&self) -> &LwLock {
        &self.xid_gen_lock
    }

    /// The old_snapshot_threshold state (time map, newest xmin).
    pub fn old_snapshot_map(&self) -> &OldSnapshotTimeMap {
        &self.old_snapshot
    }

    /// Sums every backend's counters (including backends that have detached).
    pub fn stats(&self) -> ProcArrayStats {
        let mut s = ProcArrayStats::default();
        self.stats.for_each(|b| s.add_backend(b));
        s
    }

    /// Releases ProcArrayLock; under `FlexLock`, runs the requests queued meanwhile.
    #[inline]
    fn release_pa(&self, held: LwLockHeld) {
        if self.cfg.end_xact == EndXactStrategy::FlexLock {
            self.proc_array_lock.release(held, |r| self.end_xact_internal(r));
        } else {
            self.proc_array_lock.lock().release(held);
        }
    }

    /// The own xmin slot of the layout (`PgProc.xmin` for `Pgproc` and `Dense`).
    #[inline]
    fn xmin_slot(&self, p: usize) -> &AtomicU32 {
        match &self.hot {
            Hot::Pgproc | Hot::Dense(_) => &self.procs[p].xmin,
            Hot::Pgxact(x) => &x[p].xmin,
            Hot::PgxactPadded(x) => &x[p].xmin,
        }
    }

    /// The authoritative top-level xid of slot `p` (any lock or none: a hint).
    fn xid_of(&self, p: usize) -> TransactionId {
        TransactionId(match &self.hot {
            Hot::Pgproc | Hot::Dense(_) => self.procs[p].xid.load(Ordering::Relaxed),
            Hot::Pgxact(x) => x[p].xid.load(Ordering::Relaxed),
            Hot::PgxactPadded(x) => x[p].xid.load(Ordering::Relaxed),
        })
    }
}

/// One member of a [`ProcArray`]: the per-backend state PostgreSQL keeps in backend-local
/// memory (`MyProc`, the current transaction's xids, the static snapshot buffers,
/// `RecentGlobalXmin`) plus its counters.
///
/// A `Backend` is used by one thread at a time (`Send`, not `Sync`). Dropping it ends any
/// transaction still open and leaves the ProcArray, as [`Backend::detach`] does.
pub struct Backend {
    pa: Arc<ProcArray>,
    pgprocno: u32,
    xid: TransactionId,
    /// Live (not aborted) subxids of the current transaction, in assignment order.
    subxids: Vec<TransactionId>,
    /// How many of them sit in the shared cache.
    n_cached: usize,
    overflowed: bool,
    lxid: LocalTransactionId,
    snapshot: Snapshot,
    recent_global_xmin: TransactionId,
    horizon_valid: bool,
    stats: lockstack_common::StatsBlock<BackendProcStats>,
    detached: bool,
}

impl fmt::Debug for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Backend")
            .field("pgprocno", &self.pgprocno)
            .field("xid", &self.xid)
            .field("subxids", &self.subxids.len())
            .field("overflowed", &self.overflowed)
            .finish_non_exhaustive()
    }
}

impl Backend {
    /// This backend's id (= `pgprocno`).
    pub fn id(&self) -> BackendId {
        BackendId(self.pgprocno)
    }

    /// The ProcArray this backend belongs to.
    pub fn proc_array(&self) -> &Arc<ProcArray> {
        &self.pa
    }

    /// The current top-level xid, or invalid if none has been assigned.
    pub fn xid(&self) -> TransactionId {
        self.xid
    }

    /// The live subtransaction xids of the current transaction, oldest first.
    pub fn subxids(&self) -> &[TransactionId] {
        &self.subxids
    }

    /// True once the current transaction had more than 64 subxids (the cache overflowed).
    pub fn subxids_overflowed(&self) -> bool {
        self.overflowed
    }

    /// This backend's counters.
    pub fn stats(&self) -> &BackendProcStats {
        &self.stats
    }

    /// Sets this backend's vacuum/status flags (any of [`PROC_IS_AUTOVACUUM`],
    /// [`PROC_IN_VACUUM`], [`PROC_IN_ANALYZE`], [`PROC_VACUUM_FOR_WRAPAROUND`],
    /// [`PROC_IN_LOGICAL_DECODING`]) under ProcArrayLock exclusive, as lazy VACUUM does in
    /// `vacuum_rel` (`vacuum.c`; 9.2 `MyPgXact->vacuumFlags`, 14 `statusFlags` and its dense
    /// copy). While `PROC_IN_VACUUM` or `PROC_IN_LOGICAL_DECODING` is set, other backends'
    /// snapshots and the global xmin horizon ignore this backend's xmin and xid. The flags are
    /// cleared when the transaction ends.
    ///
    /// # Errors
    /// [`ProcArrayError::UnknownVacuumFlags`] if `flags` has a bit outside those five (nothing
    /// is changed then).
    ///
    /// [`PROC_IS_AUTOVACUUM`]: crate::PROC_IS_AUTOVACUUM
    /// [`PROC_IN_VACUUM`]: crate::PROC_IN_VACUUM
    /// [`PROC_IN_ANALYZE`]: crate::PROC_IN_ANALYZE
    /// [`PROC_VACUUM_FOR_WRAPAROUND`]: crate::PROC_VACUUM_FOR_WRAPAROUND
    /// [`PROC_IN_LOGICAL_DECODING`]: crate::PROC_IN_LOGICAL_DECODING
    pub fn set_vacuum_flags(&mut self, flags: u8) -> Result<(), ProcArrayError> {
        if flags & !PROC_KNOWN_FLAGS != 0 {
            return Err(ProcArrayError::UnknownVacuumFlags(flags));
        }
        self.store_vacuum_flags(flags);
        Ok(())
    }

    /// This backend's vacuum/status flags (0 when none is set).
    pub fn vacuum_flags(&self) -> u8 {
        self.pa.procs[self.pgprocno as usize].vacuum_flags.load(Ordering::Relaxed)
    }

    /// Stores `flags` in `PgProc` and in the layout's hot copy under ProcArrayLock exclusive.
    fn store_vacuum_flags(&self, flags: u8) {
        let pa = &*self.pa;
        let p = self.pgprocno as usize;
        let proc = &pa.procs[p];
        let held = pa.proc_array_lock.acquire(LwLockMode::Exclusive);
        proc.vacuum_flags.store(flags, Ordering::Relaxed);
        match &pa.hot {
            Hot::Pgproc => {}
            Hot::Pgxact(x) => x[p].vacuum_flags.store(flags, Ordering::Relaxed),
            Hot::PgxactPadded(x) => x[p].vacuum_flags.store(flags, Ordering::Relaxed),
            Hot::Dense(d) => d.status_flags[proc.pgxactoff.load(Ordering::Relaxed) as usize]
                .store(flags, Ordering::Relaxed),
        }
        pa.release_pa(held);
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.detach_inner();
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;
