//! What a pgbench run reports: per-command latencies, per-script results, the consistency
//! checks' verdicts, progress lines and the whole run's result. Plain data; touches no lock.

use serde::Serialize;

use crate::report::{FidelityRow, LockStackReport};

/// Per-command latency totals (`-r`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CommandStats {
    /// Executions.
    pub count: u64,
    /// Total time, ns; `None` unless per-command timing (`-r`,
    /// [`RunOptions::per_command_latencies`]) was asked for, since only then is each command timed.
    pub total_ns: Option<u64>,
    /// Failures.
    pub failures: u64,
}

/// Per-script results.
#[derive(Clone, Debug, Serialize)]
pub struct ScriptResult {
    /// Script name.
    pub name: String,
    /// Weight.
    pub weight: u32,
    /// Committed transactions.
    pub transactions: u64,
    /// Failed transactions (deadlocks, lock timeouts).
    pub failed: u64,
    /// Per-command totals, in script order.
    pub commands: Vec<CommandStats>,
    /// Command texts.
    pub texts: Vec<String>,
}

/// One consistency check.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// Whether it held.
    pub ok: bool,
    /// The numbers behind it.
    pub detail: String,
}

/// A progress line (`-P`).
#[derive(Clone, Debug)]
pub struct Progress {
    /// Seconds since the start.
    pub at: f64,
    /// Transactions per second in the interval.
    pub tps: f64,
    /// Mean latency in the interval, ms.
    pub lat_ms: f64,
    /// Latency standard deviation in the interval, ms.
    pub stddev_ms: f64,
    /// Failures in the interval.
    pub failed: u64,
}

/// Everything a run measured.
#[derive(Clone, Debug, Serialize)]
pub struct PgbenchResult {
    /// Seconds spent building and loading the tables.
    pub load_s: f64,
    /// Seconds of the measured phase.
    pub elapsed_s: f64,
    /// Committed transactions, all scripts.
    pub transactions: u64,
    /// Failed transactions.
    pub failed: u64,
    /// Mean latency, ms.
    pub latency_avg_ms: f64,
    /// Latency standard deviation, ms.
    pub latency_stddev_ms: f64,
    /// Per script.
    pub scripts: Vec<ScriptResult>,
    /// Consistency checks run after the run.
    pub checks: Vec<Check>,
    /// Balance sums over the live rows before and after the run: (table, before, after), for
    /// pgbench_accounts, pgbench_tellers, pgbench_branches and pgbench_history (its delta sum).
    pub balance_sums: Vec<(String, i64, i64)>,
    /// Sampled wait events (`Type:Name`, samples), most sampled first. The sampler runs from
    /// before the clients connect to after they disconnect and samples only the slots a
    /// backend is attached to; a backend spinning publishes no event.
    pub wait_events: Vec<(String, u64)>,
    /// Backend-samples the shares are of: waiting or not, the idle ones
    /// ([`PgbenchResult::wait_idle_samples`]) left out.
    pub wait_samples: u64,
    /// Backend-samples that found a client idle at the harness's start or end gate
    /// (`Client:ClientRead`), left out of [`PgbenchResult::wait_samples`].
    pub wait_idle_samples: u64,
    /// Sampling rounds (each reads every attached backend's slot once).
    pub wait_rounds: u64,
    /// Every counter of the measured phase (LWLock tranches, heavyweight locks, buffers, WAL,
    /// CLOG, ProcArray), by path (`lwlock.ProcArray.ex_acquire`, `wal.flushes`).
    pub lock_stack: LockStackReport,
    /// The built-in whose PostgreSQL 15 column [`PgbenchResult::fidelity`] compares with
    /// (`select-only`, `simple-update`, `tpcb-like`), when the run's scripts are one built-in.
    pub fidelity_builtin: Option<String>,
    /// The rows of the PostgreSQL 15.18 reference (`docs/fidelity.md`) counted on this run, next to PostgreSQL 15's values.
    pub fidelity: Vec<FidelityRow>,
}
