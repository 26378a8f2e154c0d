//! Facts every report states next to its figures: the machine, the lock stack's counters over
//! a measured phase, and their comparison with real PostgreSQL 15's lock traffic.
//!
//! Every counter is read by name through [`lockstack_common::Counters`]: each subsystem's stats
//! struct names its counters after its fields, and [`StackCounters`] prefixes them with the
//! subsystem's section (`lwlock.ProcArray.ex_acquire`, `lmgr.waits`, `wal.flushes`,
//! `procarray.get_snapshot_data`). The text report ([`REPORT_SECTIONS`]), `--json` (a map from
//! those paths to values), the experiments' counter columns and the fidelity table
//! ([`FIDELITY`]) all use these paths.

use lockstack_common::{Counters, TrancheId};
use serde::{Serialize, Serializer};

/// The machine a run was measured on, and whether its thread count oversubscribes it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
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
///
/// Read by name through [`Counters`]: the path of a counter is its section ([`SECTIONS`]), a
/// dot and the subsystem's own name for it (`lwlock.WALInsert.block`, `buffers.hits`). JSON
/// writes it as one object from path to value.
#[derive(Clone, Debug, Default)]
pub struct StackCounters {
    /// LWLock tranche counters (process-wide: every thread of this process that used an
    /// LWLock counts, so measure one run at a time). Section `lwlock`.
    pub lwlocks: lockstack_lwlock::stats::LwLockStatsSnapshot,
    /// Heavyweight lock manager. Section `lmgr`.
    pub lmgr: lockstack_lmgr::LmgrStats,
    /// Buffer pool. Section `buffers`.
    pub buffers: lockstack_bufmgr::BufferStats,
    /// WAL. Section `wal`.
    pub wal: lockstack_xlog::WalStats,
    /// CLOG SLRU. Section `clog`.
    pub clog: lockstack_clog::SlruStats,
    /// ProcArray (snapshots, xids, transaction ends). Section `procarray`.
    pub procarray: lockstack_procarray::ProcArrayStats,
}

/// The sections of [`StackCounters`]' counter paths, in visiting order.
pub const SECTIONS: [&str; 6] = ["lwlock", "lmgr", "buffers", "wal", "clog", "procarray"];

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
    #[must_use]
    pub fn since(&self, earlier: &StackCounters) -> StackCounters {
        StackCounters {
            lwlocks: self.lwlocks.since(&earlier.lwlocks),
            lmgr: self.lmgr.since(&earlier.lmgr),
            buffers: self.buffers.since(&earlier.buffers),
            wal: self.wal.since(&earlier.wal),
            clog: self.clog.since(&earlier.clog),
            procarray: self.procarray.since(&earlier.procarray),
        }
    }

    /// The counters of section `name` ([`SECTIONS`]), `None` for another name.
    pub fn section(&self, name: &str) -> Option<&dyn Counters> {
        Some(match name {
            "lwlock" => &self.lwlocks,
            "lmgr" => &self.lmgr,
            "buffers" => &self.buffers,
            "wal" => &self.wal,
            "clog" => &self.clog,
            "procarray" => &self.procarray,
            _ => return None,
        })
    }

    /// The counter at `path`, 0 when it has no value: an LWLock tranche that saw no traffic
    /// is absent from the snapshot. [`StackCounters::is_counter`] tells a path that can never
    /// have a value.
    pub fn count(&self, path: &str) -> u64 {
        self.get(path).unwrap_or(0)
    }

    /// True when `path` names a counter a reading can have: a section of [`SECTIONS`] and a
    /// counter of its struct; for `lwlock`, a named tranche ([`TrancheId::all_named`]) and a
    /// counter of [`lockstack_lwlock::stats::TrancheStats`].
    pub fn is_counter(path: &str) -> bool {
        let Some((section, name)) = path.split_once('.') else { return false };
        if section == "lwlock" {
            let Some((tranche, counter)) = name.split_once('.') else { return false };
            return TrancheId::all_named().iter().any(|t| t.name() == tranche)
                && lockstack_lwlock::stats::TrancheStats::default().get(counter).is_some();
        }
        StackCounters::default().section(section).is_some_and(|s| s.get(name).is_some())
    }
}

impl Counters for StackCounters {
    fn visit(&self, f: &mut dyn FnMut(&str, u64)) {
        for name in SECTIONS {
            if let Some(s) = self.section(name) {
                s.visit(&mut |n, v| f(&format!("{name}.{n}"), v));
            }
        }
    }

    fn get(&self, path: &str) -> Option<u64> {
        let (section, name) = path.split_once('.')?;
        self.section(section)?.get(name)
    }
}

impl Serialize for StackCounters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        counters_map(self, s)
    }
}

/// Serializes any [`Counters`] as one object from counter name to value, in visiting order
/// (for `#[serde(serialize_with = "...")]` on a stats field).
///
/// # Errors
/// Those of the serializer.
pub fn counters_map<C: Counters + ?Sized, S: Serializer>(c: &C, s: S) -> Result<S::Ok, S::Error> {
    let mut all: Vec<(String, u64)> = Vec::new();
    c.visit(&mut |n, v| all.push((n.to_string(), v)));
    s.collect_map(all)
}

/// Every counter of `c` by name, as a map (what the experiments keep per point).
pub fn counters_by_name(c: &(impl Counters + ?Sized)) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    c.visit(&mut |n, v| {
        out.insert(n.to_string(), v);
    });
    out
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
/// clients' connections, before their disconnections), besides the wait-event profile, which
/// `PgbenchResult` carries in its own fields. JSON: `{"transactions": N, "counters": {PATH:
/// VALUE, ...}}` with the paths of [`StackCounters`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct LockStackReport {
    /// Transactions the figures are divided by for per-transaction values: committed plus
    /// failed (a failed transaction did its work up to the failure).
    pub transactions: u64,
    /// Every counter of the phase.
    pub counters: StackCounters,
}

impl LockStackReport {
    /// The report of a phase whose counts are `d` (a [`StackCounters::since`] difference) over
    /// `transactions` transactions.
    pub fn new(d: StackCounters, transactions: u64) -> LockStackReport {
        LockStackReport { transactions, counters: d }
    }

    /// The counter at `path` (see [`StackCounters::count`]).
    pub fn count(&self, path: &str) -> u64 {
        self.counters.count(path)
    }

    /// `n` per transaction (0 when no transaction ran).
    pub fn per_txn(&self, n: u64) -> f64 {
        if self.transactions == 0 { 0.0 } else { n as f64 / self.transactions as f64 }
    }
}

/// One titled block of the text report's counters: (label, counter path) per line.
#[derive(Clone, Copy, Debug)]
pub struct ReportSection {
    /// The block's title line.
    pub title: &'static str,
    /// (label, path) of each line, in order.
    pub lines: &'static [(&'static str, &'static str)],
}

/// The counters `lockstack pgbench` prints after its LWLock table, by path: the layout of the
/// text report (total and per transaction on each line).
pub const REPORT_SECTIONS: [ReportSection; 5] = [
    ReportSection {
        title: "heavyweight locks",
        lines: &[
            ("fast-path grants", "lmgr.fast_path_grants"),
            ("main-table acquisitions", "lmgr.main_acquisitions_total"),
            ("transfers", "lmgr.transfers"),
            ("spills to the main table", "lmgr.spills"),
            ("waits", "lmgr.waits"),
            ("deadlocks", "lmgr.deadlocks"),
        ],
    },
    ReportSection {
        title: "buffers",
        lines: &[
            ("hits", "buffers.hits"),
            ("reads", "buffers.reads"),
            ("extends", "buffers.extends"),
            ("evictions", "buffers.evictions"),
            ("pin waits", "buffers.pin_waits"),
            ("cleanup-lock waits", "buffers.cleanup_waits"),
        ],
    },
    ReportSection {
        title: "WAL",
        lines: &[
            ("records", "wal.records"),
            ("bytes", "wal.bytes"),
            ("insertion locks waited for", "wal.insert_lock_waits"),
            ("flush requests", "wal.flush_requests"),
            // pgbench prints this row with what a flush was in its run (fdatasync, modelled, none).
            ("flushes", "wal.flushes"),
            ("flushes covered by others", "wal.flushed_by_others"),
            ("asynchronous commits", "wal.async_commits"),
        ],
    },
    ReportSection { title: "CLOG", lines: &[("hits", "clog.hits"), ("reads", "clog.reads")] },
    ReportSection {
        title: "ProcArray",
        lines: &[
            ("GetSnapshotData", "procarray.get_snapshot_data"),
            ("  of which reused", "procarray.snapshots_reused"),
            ("xids assigned", "procarray.xids_assigned"),
        ],
    },
];

/// One row of the fidelity table (`docs/fidelity.md`): a call real PostgreSQL 15 makes, the
/// counters that count it here, and PostgreSQL 15.18's calls per transaction for pgbench's
/// built-ins (one backend, warm cache, scale 10, prepared statements sent as `EXECUTE` through
/// psql, counted with gdb breakpoints over 400 transactions).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct FidelityRef {
    /// The call, as the reference names it (tranche and mode for LWLocks).
    pub call: &'static str,
    /// The [`StackCounters`] paths whose sum is our count of the call.
    pub paths: &'static [&'static str],
    /// PostgreSQL 15 per transaction of `-S` (select-only).
    pub select_only: f64,
    /// PostgreSQL 15 per transaction of `-N` (simple-update).
    pub simple_update: f64,
    /// PostgreSQL 15 per transaction of tpcb-like.
    pub tpcb_like: f64,
    /// False when the engine does not model what the row counts (it then reports 0).
    pub modelled: bool,
    /// What our figure counts, where that is not obvious from the name.
    pub note: &'static str,
}

impl FidelityRef {
    /// The PostgreSQL 15 value for built-in `name` (`select-only`, `simple-update`,
    /// `tpcb-like`), `None` for anything else.
    pub fn for_builtin(&self, name: &str) -> Option<f64> {
        match name {
            "select-only" => Some(self.select_only),
            "simple-update" => Some(self.simple_update),
            "tpcb-like" => Some(self.tpcb_like),
            _ => None,
        }
    }
}

const fn row(
    call: &'static str,
    paths: &'static [&'static str],
    [select_only, simple_update, tpcb_like]: [f64; 3],
    note: &'static str,
) -> FidelityRef {
    FidelityRef { call, paths, select_only, simple_update, tpcb_like, modelled: true, note }
}

const XACT_NOTE: &str = "XactSLRU + XactSLRUBank (banks: pg17)";

/// The fidelity table, in its order: (call, our counter paths, PostgreSQL 15's -S, -N and
/// tpcb-like per transaction; source `docs/fidelity.md`, counted 2026-11-29).
pub const FIDELITY: [FidelityRef; 14] = [
    row(
        "LockAcquireExtended",
        &["lmgr.lock_requests"],
        [4.00, 11.00, 19.15],
        "new grants (fast path + main table); re-requests of a lock already held are not counted",
    ),
    row("LockFastPath EXCL", &["lwlock.LockFastPath.ex_acquire"], [5.00, 8.01, 12.30], ""),
    row("LockManager EXCL", &["lwlock.LockManager.ex_acquire"], [0.0, 2.00, 2.00], ""),
    row(
        "GetSnapshotData",
        &["procarray.get_snapshot_data"],
        [1.00, 5.00, 9.02],
        "snapshots computed + reused",
    ),
    row(
        "ProcArray SHARED",
        &["lwlock.ProcArray.sh_acquire"],
        [1.00, 5.01, 9.13],
        "snapshots and xmin-horizon scans",
    ),
    row(
        "ProcArray EXCL (cond.)",
        &["lwlock.ProcArray.ex_acquire"],
        [0.0, 1.00, 1.00],
        "conditional with group clear (pg96+)",
    ),
    row("XidGen EXCL", &["lwlock.XidGen.ex_acquire"], [0.0, 1.00, 1.00], ""),
    row(
        "XactSLRU EXCL (cond.)",
        &["lwlock.XactSLRU.ex_acquire", "lwlock.XactSLRUBank.ex_acquire"],
        [0.0, 1.00, 1.00],
        XACT_NOTE,
    ),
    row(
        "XactSLRU SHARED",
        &["lwlock.XactSLRU.sh_acquire", "lwlock.XactSLRUBank.sh_acquire"],
        [0.0, 0.0, 2.97],
        XACT_NOTE,
    ),
    row("WALInsert EXCL", &["lwlock.WALInsert.ex_acquire"], [0.0, 3.05, 5.09], ""),
    row(
        "BufferMapping SHARED",
        &["lwlock.BufferMapping.sh_acquire"],
        [4.00, 12.22, 20.53],
        "one per buffer look-up (ReadBuffer)",
    ),
    row("BufferContent SHARED", &["lwlock.BufferContent.sh_acquire"], [4.00, 9.09, 15.39], ""),
    row("BufferContent EXCL", &["lwlock.BufferContent.ex_acquire"], [0.0, 3.19, 5.29], ""),
    row(
        "MultiXactGen SHARED",
        &["lwlock.MultiXactGen.sh_acquire"],
        [0.0, 1.00, 1.00],
        "MultiXactIdSetOldestMember: a transaction's first row lock or update",
    ),
];

/// One row of the fidelity comparison: our count of the reference's call next to PostgreSQL
/// 15's.
#[derive(Clone, Debug, Serialize)]
pub struct FidelityRow {
    /// The call, as [`FIDELITY`] names it.
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

/// The fidelity rows of a phase: counts `d` over `transactions` transactions, each [`FIDELITY`]
/// row's paths summed, compared with its column for built-in `builtin` (`select-only`,
/// `simple-update`, `tpcb-like`; `None` or another name: no reference column).
pub fn fidelity(d: &StackCounters, transactions: u64, builtin: Option<&str>) -> Vec<FidelityRow> {
    FIDELITY
        .iter()
        .map(|r| {
            let n: u64 = r.paths.iter().map(|p| d.count(p)).sum();
            FidelityRow {
                call: r.call,
                ours: n,
                ours_per_txn: if transactions == 0 { 0.0 } else { n as f64 / transactions as f64 },
                pg15_per_txn: builtin.and_then(|b| r.for_builtin(b)),
                modelled: r.modelled,
                note: r.note,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path the report, the fidelity table and the experiments' catalog read names a
    /// counter (a typo would otherwise read as 0).
    #[test]
    fn every_path_read_names_a_counter() {
        let report = REPORT_SECTIONS.iter().flat_map(|s| s.lines.iter().map(|l| l.1));
        let fidelity = FIDELITY.iter().flat_map(|r| r.paths.iter().copied());
        let experiments =
            crate::experiments::catalog::EXPERIMENTS.iter().flat_map(|e| e.counters.iter().map(|c| c.key));
        for p in report.chain(fidelity).chain(experiments) {
            assert!(StackCounters::is_counter(p), "{p} names no counter");
        }
        assert!(!StackCounters::is_counter("wal.no_such"));
        assert!(!StackCounters::is_counter("lwlock.NoSuchTranche.block"));
        assert!(!StackCounters::is_counter("lwlock.ProcArray.no_such"));
        assert!(!StackCounters::is_counter("nosection.hits"));
    }

    /// Paths read the subsystem's own counters: sections prefix the names, tranches are found
    /// by name, derived counters are visited, and JSON is one object from path to value.
    #[test]
    fn paths_read_the_subsystem_counters() {
        let mut c = StackCounters::default();
        c.wal.flushes = 3;
        c.procarray.snapshots_taken = 4;
        c.procarray.snapshots_reused = 1;
        c.lmgr.main_acquisitions = vec![2, 7];
        c.lmgr.fast_path_grants = 5;
        c.lwlocks.tranches.insert(
            TrancheId::PROC_ARRAY,
            lockstack_lwlock::stats::TrancheStats { ex_acquire: 9, ..Default::default() },
        );
        assert_eq!(c.count("wal.flushes"), 3);
        assert_eq!(c.count("procarray.get_snapshot_data"), 5);
        assert_eq!(c.count("lmgr.main_acquisitions_max"), 7);
        assert_eq!(c.count("lmgr.lock_requests"), 14);
        assert_eq!(c.count("lmgr.partitions"), 2);
        assert_eq!(c.count("lwlock.ProcArray.ex_acquire"), 9);
        assert_eq!(c.count("lwlock.ProcArray.acquisitions"), 9);
        assert_eq!(c.get("lwlock.WALInsert.ex_acquire"), None, "no traffic: absent");
        assert_eq!(c.count("lwlock.WALInsert.ex_acquire"), 0);
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(json["wal.flushes"], 3);
        assert_eq!(json["lwlock.ProcArray.ex_acquire"], 9);
        let by_name = counters_by_name(&c);
        assert_eq!(by_name.len(), json.as_object().unwrap().len(), "every path once");
        let f = fidelity(&c, 2, Some("simple-update"));
        let pa = f.iter().find(|r| r.call == "ProcArray EXCL (cond.)").unwrap();
        assert_eq!((pa.ours, pa.ours_per_txn, pa.pg15_per_txn), (9, 4.5, Some(1.0)));
    }
}
