//! The `lockstack snapshot` experiment (seed 000): snapshot-taking threads against committing
//! threads on a ProcArray with many idle members, some holding xids, per layout.
//!
//! Two modes:
//! * timed ([`SnapshotWorkloadConfig::fixed_snapshots`] = `None`): `snapshot_threads` threads
//!   take snapshots (each followed by a read-only end of transaction, as `pgbench -S` does) and
//!   `committer_threads` threads assign an xid and commit, for `duration`;
//! * fixed ([`SnapshotWorkloadConfig::fixed_snapshots`] = `Some(n)`): the calling thread alone
//!   takes exactly `n` snapshots and nothing commits, so that
//!   `valgrind --tool=cachegrind` counts the cache misses of `n` snapshots and nothing else.

use std::sync::Arc;
use std::time::Duration;

use crate::sync::{AtomicBool, AtomicU64, Instant, Ordering, sleep, thread};

use lockstack_common::{BackendId, TrancheId};
use lockstack_lwlock::stats::{TrancheStats, snapshot as lwlock_stats};

use crate::config::{ConfigError, Layout, ProcArrayConfig};
use crate::procarray::ProcArray;
use crate::stats::ProcArrayStats;

/// What to run. Plain data: the CLI fills it from its flags.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotWorkloadConfig {
    /// The ProcArray to build (its `max_backends` is replaced by `backends`; its `layout` is the
    /// one measured).
    pub procarray: ProcArrayConfig,
    /// ProcArray members in total (idle ones included); must be at least
    /// `snapshot_threads + committer_threads + running_xids`.
    pub backends: usize,
    /// Idle members that hold an xid for the whole run (the snapshots' `xip` length).
    pub running_xids: usize,
    /// Threads taking snapshots (timed mode), at least 1.
    pub snapshot_threads: usize,
    /// Threads committing xid-bearing transactions (timed mode), 0 or more.
    pub committer_threads: usize,
    /// How long the timed mode runs (at least 1 ms).
    pub duration: Duration,
    /// `Some(n)`: single-thread mode taking exactly `n` snapshots (for cachegrind).
    pub fixed_snapshots: Option<u64>,
}

impl SnapshotWorkloadConfig {
    /// `backends` members, `running_xids` of them holding xids, 1 taker, 1 committer, 1 s, for
    /// `layout` (other ProcArray settings: [`ProcArrayConfig::new`]).
    pub fn new(layout: Layout, backends: usize, running_xids: usize) -> SnapshotWorkloadConfig {
        let mut procarray = ProcArrayConfig::new(backends.max(1));
        procarray.layout = layout;
        SnapshotWorkloadConfig {
            procarray,
            backends,
            running_xids,
            snapshot_threads: 1,
            committer_threads: 1,
            duration: Duration::from_secs(1),
            fixed_snapshots: None,
        }
    }

    /// Checks the sizes; the error says which value is wrong.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let (t, c) = match self.fixed_snapshots {
            Some(_) => (1, 0),
            None => (self.snapshot_threads, self.committer_threads),
        };
        if t == 0 {
            return Err(ConfigError("snapshot_threads must be at least 1".into()));
        }
        if self.fixed_snapshots.is_none() && self.duration < Duration::from_millis(1) {
            return Err(ConfigError(format!("duration must be at least 1 ms, got {:?}", self.duration)));
        }
        let need = t + c + self.running_xids;
        if self.backends < need {
            return Err(ConfigError(format!(
                "backends ({}) must be at least snapshot threads ({t}) + committer threads ({c}) + running xids ({})",
                self.backends, self.running_xids
            )));
        }
        let mut pc = self.procarray;
        pc.max_backends = self.backends;
        pc.validate()
    }
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotWorkloadResult {
    /// The layout measured.
    pub layout: Layout,
    /// Snapshots returned (computed or reused) by all taker threads.
    pub snapshots: u64,
    /// Xid-bearing transactions committed by all committer threads.
    pub commits: u64,
    /// Wall time of the measured phase.
    pub elapsed: Duration,
    /// `snapshots / elapsed`, per second.
    pub snapshots_per_sec: f64,
    /// `commits / elapsed`, per second.
    pub commits_per_sec: f64,
    /// Average nanoseconds per snapshot per taker thread (`elapsed × threads / snapshots`).
    pub ns_per_snapshot: f64,
    /// Average `xip` length of the last snapshot of each taker.
    pub xip_len: usize,
    /// ProcArrayLock counters during the measured phase (`lwlock::stats::snapshot().since()`;
    /// process-wide, so concurrent runs in one process add up).
    pub proc_array_lock: TrancheStats,
    /// XidGenLock counters during the measured phase.
    pub xid_gen_lock: TrancheStats,
    /// OldSnapshotTimeMapLock counters during the measured phase.
    pub old_snapshot_time_map_lock: TrancheStats,
    /// ProcArray counters during the measured phase.
    pub procarray: ProcArrayStats,
}

/// Runs the experiment described by `cfg` (see the module documentation).
///
/// # Errors
/// If `cfg` fails [`SnapshotWorkloadConfig::validate`].
pub fn run_snapshot_workload(cfg: &SnapshotWorkloadConfig) -> Result<SnapshotWorkloadResult, ConfigError> {
    cfg.validate()?;
    let mut pc = cfg.procarray;
    pc.max_backends = cfg.backends;
    let pa = ProcArray::new(pc)?;
    let (takers, committers) = match cfg.fixed_snapshots {
        Some(_) => (1, 0),
        None => (cfg.snapshot_threads, cfg.committer_threads),
    };
    // Members: takers first, then committers, then idle ones (some holding xids), spread so
    // the running xids are scattered through the array as in a real server.
    let first_idle = takers + committers;
    let mut idle = Vec::with_capacity(cfg.backends - first_idle);
    let n_idle = cfg.backends - first_idle;
    for i in 0..n_idle {
        idle.push(pa.attach(BackendId((first_idle + i) as u32)).map_err(|e| ConfigError(e.to_string()))?);
    }
    if let Some(step) = n_idle.checked_div(cfg.running_xids) {
        for k in 0..cfg.running_xids {
            idle[k * step].assign_xid();
        }
    }
    {
        // Commit one transaction after them, so that latest_completed_xid (hence xmax) passes
        // the running xids and snapshots list them.
        let mut b = pa.attach(BackendId(0)).map_err(|e| ConfigError(e.to_string()))?;
        b.assign_xid();
        b.end_transaction();
    }

    if let Some(n) = cfg.fixed_snapshots {
        let mut b = pa.attach(BackendId(0)).map_err(|e| ConfigError(e.to_string()))?;
        // Warm-up: grow the buffers once.
        b.get_snapshot_data();
        b.end_transaction();
        let lw0 = lwlock_stats();
        let pa0 = pa.stats();
        let t0 = Instant::now();
        for _ in 0..n {
            std::hint::black_box(b.get_snapshot_data());
            b.end_transaction();
        }
        let elapsed = t0.elapsed();
        let xip_len = b.snapshot().xip.len();
        return Ok(result(&pa, cfg, n, 0, elapsed, 1, xip_len, &lw0, &pa0));
    }

    let stop = Arc::new(AtomicBool::new(false));
    // Every thread warms up and arrives; the counters are read; then the gate opens.
    let gate = Arc::new(lockstack_common::StartGate::new());
    let snapshots = Arc::new(AtomicU64::new(0));
    let commits = Arc::new(AtomicU64::new(0));
    let xip_total = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for t in 0..takers + committers {
        let mut b = pa.attach(BackendId(t as u32)).map_err(|e| ConfigError(e.to_string()))?;
        let (stop, gate) = (Arc::clone(&stop), Arc::clone(&gate));
        let (snapshots, commits, xip_total) =
            (Arc::clone(&snapshots), Arc::clone(&commits), Arc::clone(&xip_total));
        let is_taker = t < takers;
        handles.push(thread::spawn(move || {
            if is_taker {
                b.get_snapshot_data();
                b.end_transaction();
            }
            gate.arrive_and_wait();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if is_taker {
                    std::hint::black_box(b.get_snapshot_data());
                } else {
                    b.assign_xid();
                }
                b.end_transaction();
                n += 1;
            }
            if is_taker {
                snapshots.fetch_add(n, Ordering::Relaxed);
                xip_total.fetch_add(b.snapshot().xip.len() as u64, Ordering::Relaxed);
            } else {
                commits.fetch_add(n, Ordering::Relaxed);
            }
        }));
    }
    gate.wait_arrived(takers + committers, || handles.iter().any(|h| h.is_finished()));
    let lw0 = lwlock_stats();
    let pa0 = pa.stats();
    gate.open();
    let t0 = Instant::now();
    sleep(cfg.duration);
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().map_err(|_| ConfigError("a workload thread panicked".into()))?;
    }
    let elapsed = t0.elapsed();
    let xip_len = (xip_total.load(Ordering::Relaxed) / takers as u64) as usize;
    Ok(result(
        &pa,
        cfg,
        snapshots.load(Ordering::Relaxed),
        commits.load(Ordering::Relaxed),
        elapsed,
        takers,
        xip_len,
        &lw0,
        &pa0,
    ))
}

#[allow(clippy::too_many_arguments)]
fn result(
    pa: &ProcArray,
    cfg: &SnapshotWorkloadConfig,
    snapshots: u64,
    commits: u64,
    elapsed: Duration,
    takers: usize,
    xip_len: usize,
    lw0: &lockstack_lwlock::stats::LwLockStatsSnapshot,
    pa0: &ProcArrayStats,
) -> SnapshotWorkloadResult {
    let lw = lwlock_stats().since(lw0);
    let secs = elapsed.as_secs_f64().max(1e-9);
    SnapshotWorkloadResult {
        layout: cfg.procarray.layout,
        snapshots,
        commits,
        elapsed,
        snapshots_per_sec: snapshots as f64 / secs,
        commits_per_sec: commits as f64 / secs,
        ns_per_snapshot: if snapshots == 0 { 0.0 } else { secs * 1e9 * takers as f64 / snapshots as f64 },
        xip_len,
        proc_array_lock: lw.tranche(TrancheId::PROC_ARRAY),
        xid_gen_lock: lw.tranche(TrancheId::XID_GEN),
        old_snapshot_time_map_lock: lw.tranche(TrancheId::OLD_SNAPSHOT_TIME_MAP),
        procarray: pa.stats().since(pa0),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fixed_mode_takes_exactly_n_snapshots() {
        for layout in Layout::ALL {
            let mut c = SnapshotWorkloadConfig::new(layout, 50, 5);
            c.fixed_snapshots = Some(200);
            let r = run_snapshot_workload(&c).unwrap();
            assert_eq!(r.snapshots, 200);
            assert_eq!(r.commits, 0);
            assert_eq!(r.xip_len, 5, "{layout}");
            assert_eq!(r.procarray.snapshots_taken + r.procarray.snapshots_reused, 200);
            if layout == Layout::Dense {
                assert_eq!(r.procarray.snapshots_reused, 200, "nothing commits: all reused");
            }
            assert!(r.proc_array_lock.sh_acquire >= 200);
        }
    }

    #[test]
    fn timed_mode_runs_takers_and_committers() {
        let mut c = SnapshotWorkloadConfig::new(Layout::Pgxact, 20, 3);
        c.snapshot_threads = 1;
        c.committer_threads = 1;
        c.duration = Duration::from_millis(50);
        let r = run_snapshot_workload(&c).unwrap();
        assert!(r.snapshots > 0 && r.commits > 0, "{r:?}");
        assert_eq!(r.procarray.end_with_xid(), r.commits);
        assert!(r.xip_len >= 3);
    }

    #[test]
    fn bad_sizes_are_errors() {
        let c = SnapshotWorkloadConfig::new(Layout::Dense, 3, 5);
        assert!(run_snapshot_workload(&c).unwrap_err().0.contains("backends"));
        let mut c = SnapshotWorkloadConfig::new(Layout::Dense, 30, 5);
        c.snapshot_threads = 0;
        assert!(run_snapshot_workload(&c).is_err());
    }
}
