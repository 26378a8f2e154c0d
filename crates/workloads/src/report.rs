//! Facts every report states next to its figures: the machine, the lock stack's counters over
//! a measured phase, and their comparison with real PostgreSQL 15's lock traffic.

use lockstack_common::TrancheId;
use serde::Serialize;

/// The machine a run was measured on, and whether its thread count oversubscribes it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineNote {
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Busy threads the run used.
    pub threads: usize,
    /// True when `threads > cores`: the run then measures the OS scheduler (time slices,
    /// preempted lock holders) rather than cache-line contention, and the per-operation
    /// counters (blocks, spin delays per 1000 operations) are the figures that keep their meaning.
    pub oversubscribed: bool,
}

impl MachineNote {
    /// Describes a run with `threads` busy threads on this machine.
    pub fn for_threads(threads: usize) -> MachineNote {
        let cores = lockstack_common::sync::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        MachineNote { cores, threads, oversubscribed: threads > cores }
    }

    /// One line for a text report.
    pub fn line(&self) -> String {
        if self.oversubscribed {
            format!(
                "note: {} busy threads on {} cores: this run measures the scheduler (preempted \
                 holders, time slices), not cache-line contention; compare the per-operation \
                 counters, which keep their meaning at any thread count",
                self.threads, self.cores
            )
        } else {
            let s = if self.threads == 1 { "" } else { "s" };
            format!("machine: {} busy thread{s} on {} cores", self.threads, self.cores)
        }
    }
}

/// The lock stack's counters at one instant: every subsystem's sums over all backends, read
/// while nothing runs (or at most a few increments behind while backends run). Two of them
/// give a phase's counts with [`StackCounters::since`].
#[derive(Clone, Debug, Default)]
pub struct StackCounters {
    /// LWLock tranche counters (process-wide: every thread of this process that used an
    /// LWLock counts, so measure one run at a time).
    pub lwlocks: lockstack_lwlock::stats::LwLockStatsSnapshot,
    /// Heavyweight lock manager.
    pub lmgr: lockstack_lmgr::LmgrStats,
    /// Buffer pool.
    pub buffers: lockstack_bufmgr::BufferStats,
    /// WAL.
    pub wal: lockstack_xlog::WalStats,
    /// CLOG SLRU.
    pub clog: lockstack_clog::SlruStats,
    /// ProcArray (snapshots, xids, transaction ends).
    pub procarray: lockstack_procarray::ProcArrayStats,
}

impl StackCounters {
    /// Reads every counter of `engine`'s subsystems, and the process's LWLock counters.
    pub fn take(engine: &lockstack_engine::engine::Engine) -> StackCounters {
        StackCounters {
            lwlocks: lockstack_lwlock::stats::snapshot(),
            lmgr: engine.lmgr.stats(),
            buffers: engine.pool.stats(),
            wal: engine.wal.stats(),
            clog: engine.clog.stats(),
            procarray: engine.procarray.stats(),
        }
    }

    /// `self - earlier`, counter by counter (saturating): the counts of the phase between the
    /// two readings.
    pub fn since(&self, earlier: &StackCounters) -> StackCounters {
        let (c, e) = (&self.clog, &earlier.clog);
        StackCounters {
            lwlocks: self.lwlocks.since(&earlier.lwlocks),
            lmgr: self.lmgr.since(&earlier.lmgr),
            buffers: self.buffers.since(&earlier.buffers),
            wal: self.wal.since(&earlier.wal),
            clog: lockstack_clog::SlruStats {
                hits: c.hits.saturating_sub(e.hits),
                reads: c.reads.saturating_sub(e.reads),
                writes: c.writes.saturating_sub(e.writes),
                evictions: c.evictions.saturating_sub(e.evictions),
                zeroed: c.zeroed.saturating_sub(e.zeroed),
                flushes: c.flushes.saturating_sub(e.flushes),
                truncates: c.truncates.saturating_sub(e.truncates),
            },
            procarray: self.procarray.since(&earlier.procarray),
        }
    }

    /// Shared and exclusive acquisitions of `tranche` (zeros if it saw no traffic).
    pub fn lwlock(&self, tranche: TrancheId) -> (u64, u64) {
        let s = self.lwlocks.tranche(tranche);
        (s.sh_acquire, s.ex_acquire)
    }

    /// `GetSnapshotData` calls: snapshots computed plus snapshots reused (PostgreSQL 14+ reuses
    /// inside `GetSnapshotData`, after taking ProcArrayLock, so both are calls).
    pub fn get_snapshot_data(&self) -> u64 {
        self.procarray.snapshots_taken + self.procarray.snapshots_reused
    }

    /// Heavyweight lock requests granted anew: fast-path grants plus main-table acquisitions.
    /// PostgreSQL's `LockAcquireExtended` count also includes requests for a lock the
    /// transaction already holds in that mode (answered from the local lock table); lockstack's
    /// lock manager does not count those, and the built-in scripts make none.
    pub fn lock_requests(&self) -> u64 {
        self.lmgr.fast_path_grants + self.lmgr.main_acquisitions_total()
    }
}

/// Buffer pool counters of a run (a subset of [`lockstack_bufmgr::BufferStats`]; event counts).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BufferCounters {
    /// Look-ups that found the page in the pool (`shared_blks_hit`).
    pub hits: u64,
    /// Pages read from the storage manager (`shared_blks_read`).
    pub reads: u64,
    /// Pages added by extending a relation.
    pub extends: u64,
    /// Victim buffers that held another page.
    pub evictions: u64,
    /// Dirty pages written.
    pub writes: u64,
    /// Pins and unpins that did not get the buffer header at the first attempt.
    pub pin_waits: u64,
    /// Waits for another backend's I/O on the same buffer.
    pub io_waits: u64,
    /// Sleeps waiting for a cleanup lock (`BufferPin` waits).
    pub cleanup_waits: u64,
}

impl From<&lockstack_bufmgr::BufferStats> for BufferCounters {
    fn from(s: &lockstack_bufmgr::BufferStats) -> Self {
        BufferCounters {
            hits: s.hits,
            reads: s.reads,
            extends: s.extends,
            evictions: s.evictions,
            writes: s.writes,
            pin_waits: s.pin_waits,
            io_waits: s.io_waits,
            cleanup_waits: s.cleanup_waits,
        }
    }
}

/// WAL counters of a run (from [`lockstack_xlog::WalStats`]; event counts except `bytes`), for
/// `lockstack pgbench`'s report and `lockstack wal`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct WalCounters {
    /// Records inserted.
    pub records: u64,
    /// Bytes those records occupy (headers and alignment included, page headers not).
    pub bytes: u64,
    /// Insertions that had to wait for their insertion lock (or `WALInsertLock`).
    pub insert_lock_waits: u64,
    /// Flush requests that found their position not yet flushed.
    pub flush_requests: u64,
    /// Flushes issued (`fdatasync` calls, or modelled flush delays).
    pub flushes: u64,
    /// Flush requests another backend's flush covered (group commit followers).
    pub flushed_by_others: u64,
    /// Commits that did not flush (`synchronous_commit = off`).
    pub async_commits: u64,
    /// Write calls.
    pub writes: u64,
    /// Writes forced by a full WAL buffer ring.
    pub buffers_full: u64,
    /// commit_delay sleeps.
    pub commit_delays: u64,
}

impl From<&lockstack_xlog::WalStats> for WalCounters {
    fn from(s: &lockstack_xlog::WalStats) -> Self {
        WalCounters {
            records: s.records,
            bytes: s.bytes,
            insert_lock_waits: s.insert_lock_waits,
            flush_requests: s.flush_requests,
            flushes: s.flushes,
            flushed_by_others: s.flushed_by_others,
            async_commits: s.async_commits,
            writes: s.writes,
            buffers_full: s.buffers_full,
            commit_delays: s.commit_delays,
        }
    }
}

/// CLOG SLRU counters of a run (`pg_stat_slru` for `Xact`; event counts).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClogCounters {
    /// Page look-ups satisfied by a buffer (`blks_hit`): status reads and updates.
    pub hits: u64,
    /// Page look-ups that had to read storage (`blks_read`).
    pub reads: u64,
    /// Pages written.
    pub writes: u64,
    /// Pages evicted from a buffer.
    pub evictions: u64,
    /// Pages created by zeroing (a new page of xids).
    pub zeroed: u64,
}

impl From<&lockstack_clog::SlruStats> for ClogCounters {
    fn from(s: &lockstack_clog::SlruStats) -> Self {
        ClogCounters {
            hits: s.hits,
            reads: s.reads,
            writes: s.writes,
            evictions: s.evictions,
            zeroed: s.zeroed,
        }
    }
}

/// ProcArray counters of a run (from [`lockstack_procarray::ProcArrayStats`]; event counts).
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProcArrayCounters {
    /// `GetSnapshotData` calls (computed plus reused).
    pub get_snapshot_data: u64,
    /// Snapshots reused because no xid-bearing transaction ended (14+ `snapshot_reuse`).
    pub snapshots_reused: u64,
    /// Top-level xids assigned.
    pub xids_assigned: u64,
    /// Ends of transactions without an xid (no ProcArrayLock).
    pub end_readonly: u64,
    /// Ends of transactions with an xid, by any strategy.
    pub end_with_xid: u64,
    /// Ends performed by another backend's group clear (followers).
    pub end_group_follower: u64,
}

impl From<&lockstack_procarray::ProcArrayStats> for ProcArrayCounters {
    fn from(s: &lockstack_procarray::ProcArrayStats) -> Self {
        ProcArrayCounters {
            get_snapshot_data: s.snapshots_taken + s.snapshots_reused,
            snapshots_reused: s.snapshots_reused,
            xids_assigned: s.xids_assigned,
            end_readonly: s.end_readonly,
            end_with_xid: s.end_with_xid(),
            end_group_follower: s.end_group_follower,
        }
    }
}

/// The lock manager's counters of a run (see `lockstack_lmgr::LmgrStats`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct LockCounters {
    /// Relation locks granted in fast-path slots.
    pub fast_path_grants: u64,
    /// Main-table acquisitions per partition.
    pub main_acquisitions: Vec<u64>,
    /// Main-table acquisitions, total.
    pub main_acquisitions_total: u64,
    /// Fast-path entries transferred by strong lockers (plus VXID locks materialised).
    pub transfers: u64,
    /// Weak locks that fell back to the main table (strong counter set or slots full).
    pub spills: u64,
    /// Heavyweight lock waits.
    pub waits: u64,
    /// Deadlocks reported.
    pub deadlocks: u64,
}

impl From<&lockstack_lmgr::LmgrStats> for LockCounters {
    fn from(s: &lockstack_lmgr::LmgrStats) -> Self {
        LockCounters {
            fast_path_grants: s.fast_path_grants,
            main_acquisitions: s.main_acquisitions.clone(),
            main_acquisitions_total: s.main_acquisitions_total(),
            transfers: s.transfers,
            spills: s.spills(),
            waits: s.waits,
            deadlocks: s.deadlocks,
        }
    }
}

/// The lock stack's counters over a pgbench run's measured phase (after the load and the
/// clients' connections, before their disconnections), besides the LWLock tranches and the
/// wait-event profile, which `PgbenchResult` carries in their own fields.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LockStackReport {
    /// Transactions the figures are divided by for per-transaction values: committed plus
    /// failed (a failed transaction did its work up to the failure).
    pub transactions: u64,
    /// Heavyweight lock manager: fast-path grants, main-table acquisitions per partition,
    /// transfers, spills, waits, deadlocks.
    pub heavyweight: LockCounters,
    /// Buffer pool.
    pub buffers: BufferCounters,
    /// WAL.
    pub wal: WalCounters,
    /// CLOG.
    pub clog: ClogCounters,
    /// ProcArray: snapshots, xids, transaction ends.
    pub procarray: ProcArrayCounters,
}

impl LockStackReport {
    /// The report of a phase whose counts are `d` (a [`StackCounters::since`] difference) over
    /// `transactions` transactions.
    pub fn new(d: &StackCounters, transactions: u64) -> LockStackReport {
        LockStackReport {
            transactions,
            heavyweight: LockCounters::from(&d.lmgr),
            buffers: BufferCounters::from(&d.buffers),
            wal: WalCounters::from(&d.wal),
            clog: ClogCounters::from(&d.clog),
            procarray: ProcArrayCounters::from(&d.procarray),
        }
    }

    /// `n` per transaction (0 when no transaction ran).
    pub fn per_txn(&self, n: u64) -> f64 {
        if self.transactions == 0 { 0.0 } else { n as f64 / self.transactions as f64 }
    }
}

/// One row of the fidelity reference (`docs/fidelity.md`): real PostgreSQL 15.18's calls per
/// transaction for pgbench's built-ins (one backend, warm cache, scale 10, prepared statements
/// sent as `EXECUTE` through psql, counted with gdb breakpoints over 400 transactions).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Pg15Row {
    /// The call, as the reference names it (tranche and mode for LWLocks).
    pub call: &'static str,
    /// Per transaction of `-S` (select-only).
    pub select_only: f64,
    /// Per transaction of `-N` (simple-update).
    pub simple_update: f64,
    /// Per transaction of tpcb-like.
    pub tpcb_like: f64,
}

impl Pg15Row {
    /// The value for built-in `name` (`select-only`, `simple-update`, `tpcb-like`), `None` for
    /// anything else.
    pub fn for_builtin(&self, name: &str) -> Option<f64> {
        match name {
            "select-only" => Some(self.select_only),
            "simple-update" => Some(self.simple_update),
            "tpcb-like" => Some(self.tpcb_like),
            _ => None,
        }
    }
}

const fn pg15(call: &'static str, select_only: f64, simple_update: f64, tpcb_like: f64) -> Pg15Row {
    Pg15Row { call, select_only, simple_update, tpcb_like }
}

/// The reference table, in its order (source: `docs/fidelity.md`, counted 2026-11-29).
pub const PG15_LOCK_TRAFFIC: [Pg15Row; 14] = [
    pg15("LockAcquireExtended", 4.00, 11.00, 19.15),
    pg15("LockFastPath EXCL", 5.00, 8.01, 12.30),
    pg15("LockManager EXCL", 0.0, 2.00, 2.00),
    pg15("GetSnapshotData", 1.00, 5.00, 9.02),
    pg15("ProcArray SHARED", 1.00, 5.01, 9.13),
    pg15("ProcArray EXCL (cond.)", 0.0, 1.00, 1.00),
    pg15("XidGen EXCL", 0.0, 1.00, 1.00),
    pg15("XactSLRU EXCL (cond.)", 0.0, 1.00, 1.00),
    pg15("XactSLRU SHARED", 0.0, 0.0, 2.97),
    pg15("WALInsert EXCL", 0.0, 3.05, 5.09),
    pg15("BufferMapping SHARED", 4.00, 12.22, 20.53),
    pg15("BufferContent SHARED", 4.00, 9.09, 15.39),
    pg15("BufferContent EXCL", 0.0, 3.19, 5.29),
    pg15("MultiXactGen SHARED", 0.0, 1.00, 1.00),
];

/// One row of the fidelity comparison: our count of the reference's call next to PostgreSQL
/// 15's.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityRow {
    /// The call, as [`PG15_LOCK_TRAFFIC`] names it.
    pub call: &'static str,
    /// Our count over the measured phase.
    pub ours: u64,
    /// Our count per transaction.
    pub ours_per_txn: f64,
    /// PostgreSQL 15's per transaction, when the run's script is one built-in (`None` for
    /// custom scripts and mixes).
    pub pg15_per_txn: Option<f64>,
    /// False when the engine does not model what the row counts (it then reports 0).
    pub modelled: bool,
    /// What our figure counts, where that is not obvious from the name.
    pub note: &'static str,
}

impl FidelityRow {
    /// `ours_per_txn - pg15_per_txn`, when there is a reference value.
    pub fn diff(&self) -> Option<f64> {
        self.pg15_per_txn.map(|p| self.ours_per_txn - p)
    }
}

/// The fidelity rows of a phase: counts `d` over `transactions` transactions, compared with
/// [`PG15_LOCK_TRAFFIC`]'s column for built-in `builtin` (`select-only`, `simple-update`,
/// `tpcb-like`; `None` or another name: no reference column).
pub fn fidelity(d: &StackCounters, transactions: u64, builtin: Option<&str>) -> Vec<FidelityRow> {
    let lw = |t| d.lwlock(t);
    let xact = {
        let (a, b) = (lw(TrancheId::XACT_SLRU), lw(TrancheId::XACT_SLRU_BANK));
        (a.0 + b.0, a.1 + b.1)
    };
    let ours: [(u64, bool, &'static str); 14] = [
        (
            d.lock_requests(),
            true,
            "new grants (fast path + main table); re-requests of a lock already held are not counted",
        ),
        (lw(TrancheId::LOCK_FAST_PATH).1, true, ""),
        (lw(TrancheId::LOCK_MANAGER).1, true, ""),
        (d.get_snapshot_data(), true, "snapshots computed + reused"),
        (lw(TrancheId::PROC_ARRAY).0, true, "snapshots and xmin-horizon scans"),
        (lw(TrancheId::PROC_ARRAY).1, true, "conditional with group clear (pg96+)"),
        (lw(TrancheId::XID_GEN).1, true, ""),
        (xact.1, true, "XactSLRU + XactSLRUBank (banks: pg17)"),
        (xact.0, true, "XactSLRU + XactSLRUBank (banks: pg17)"),
        (lw(TrancheId::WAL_INSERT).1, true, ""),
        (lw(TrancheId::BUFFER_MAPPING).0, true, "one per buffer look-up (ReadBuffer)"),
        (lw(TrancheId::BUFFER_CONTENT).0, true, ""),
        (lw(TrancheId::BUFFER_CONTENT).1, true, ""),
        (
            lw(TrancheId::MULTI_XACT_GEN).0,
            true,
            "MultiXactIdSetOldestMember: a transaction's first row lock or update",
        ),
    ];
    PG15_LOCK_TRAFFIC
        .iter()
        .zip(ours)
        .map(|(pg, (n, modelled, note))| FidelityRow {
            call: pg.call,
            ours: n,
            ours_per_txn: if transactions == 0 { 0.0 } else { n as f64 / transactions as f64 },
            pg15_per_txn: builtin.and_then(|b| pg.for_builtin(b)),
            modelled,
            note,
        })
        .collect()
}
