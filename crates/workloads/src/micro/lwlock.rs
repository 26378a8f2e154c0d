//! `lockstack lwlock`: the same reader/writer contention workload on each LWLock
//! implementation and on parking_lot's and std's `RwLock` as baselines, in one run.
//!
//! Each worker thread loops for the run's duration: with probability `shared_ratio` it takes the
//! lock shared and reads a pair of counters (checking that they are equal), otherwise it takes
//! the lock exclusively and increments both; it holds the lock for `hold_ns` of busy work. At the
//! end the pair must equal the number of exclusive operations (a lost update means the lock
//! failed). The LWLock rows also report the `LWLOCK_STATS` counters of the run's tranche.

use super::error::{BenchError, check_threads_and_duration};
use lockstack_common::sync::{AtomicBool, Ordering};
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::time::Duration;

use lockstack_common::sync::Instant;

use hdrhistogram::Histogram;
use lockstack_common::backend::{WaitEventProfile, WaitSampler};
use lockstack_common::{BackendId, BackendStatusArray};
use lockstack_lwlock::{
    AtomicLwLock, LwLockImpl, LwLockMode, Pg92LwLock, ReadBiasedLwLock, TrancheId, stats,
};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::report::MachineNote;

/// What a row runs on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockUnderTest {
    /// `lockstack_lwlock::Pg92LwLock`.
    Pg92,
    /// `lockstack_lwlock::AtomicLwLock`.
    Atomic,
    /// `lockstack_lwlock::ReadBiasedLwLock`.
    ReadBiased,
    /// `parking_lot::RwLock` (baseline).
    ParkingLot,
    /// `std::sync::RwLock` (baseline).
    Std,
}

impl LockUnderTest {
    /// Every lock, in report order.
    pub const ALL: [LockUnderTest; 5] = [
        LockUnderTest::Pg92,
        LockUnderTest::Atomic,
        LockUnderTest::ReadBiased,
        LockUnderTest::ParkingLot,
        LockUnderTest::Std,
    ];

    /// Name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            LockUnderTest::Pg92 => "pg92",
            LockUnderTest::Atomic => "atomic",
            LockUnderTest::ReadBiased => "read-biased",
            LockUnderTest::ParkingLot => "parking_lot",
            LockUnderTest::Std => "std",
        }
    }

    /// Parses a comma-separated list (`all` = every lock).
    ///
    /// # Errors
    /// A message naming the unknown entry and the valid ones.
    pub fn parse_list(s: &str) -> Result<Vec<LockUnderTest>, BenchError> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part == "all" {
                out.extend(Self::ALL);
                continue;
            }
            match Self::ALL.iter().find(|l| l.name() == part) {
                Some(l) => out.push(*l),
                None => {
                    return Err(BenchError::Config(format!(
                        "unknown lock implementation '{part}' (valid: all, pg92, atomic, read-biased, parking_lot, std)"
                    )));
                }
            }
        }
        out.dedup();
        if out.is_empty() {
            return Err(BenchError::Config("no lock implementation given".into()));
        }
        Ok(out)
    }
}

/// Parameters of one `lockstack lwlock` run.
#[derive(Clone, Debug, Serialize)]
pub struct LwLockBenchConfig {
    /// Locks to measure, one row each.
    pub locks: Vec<LockUnderTest>,
    /// Worker threads per row.
    pub threads: usize,
    /// Measured time per row.
    pub duration: Duration,
    /// Fraction of operations taken in shared mode, 0.0 to 1.0.
    pub shared_ratio: f64,
    /// Busy work while holding the lock, in ns (0 = just the lock and the counter access).
    pub hold_ns: u64,
    /// Seed of the per-thread random streams.
    pub seed: u64,
    /// Wait-event sampling rate in Hz (0 = off).
    pub wait_sampling_hz: u32,
    /// LWLock pre-sleep spin rounds (`lockstack_lwlock::set_spin_rounds`; 0 = PostgreSQL's
    /// behaviour).
    pub spin_rounds: u32,
}

impl LwLockBenchConfig {
    /// Checks ranges.
    ///
    /// # Errors
    /// A one-line message naming the bad parameter.
    pub fn validate(&self) -> Result<(), BenchError> {
        check_threads_and_duration(self.threads, self.duration)?;
        if !(0.0..=1.0).contains(&self.shared_ratio) {
            return Err(BenchError::Config(format!(
                "--shared-ratio must be between 0 and 1, got {}",
                self.shared_ratio
            )));
        }
        if self.wait_sampling_hz > 100_000 {
            return Err(BenchError::Config(format!(
                "--wait-sampling-hz must be at most 100000, got {}",
                self.wait_sampling_hz
            )));
        }
        if self.spin_rounds > 64 {
            return Err(BenchError::Config(format!(
                "--spin-rounds must be at most 64, got {}",
                self.spin_rounds
            )));
        }
        if self.hold_ns > 1_000_000_000 {
            return Err(BenchError::Config(format!("--hold-ns must be at most 1e9, got {}", self.hold_ns)));
        }
        Ok(())
    }
}

/// LWLOCK_STATS counters of one row (LWLock rows only).
#[derive(Clone, Debug, Default, Serialize)]
pub struct LwLockCounters {
    /// Shared acquisitions.
    pub sh_acquire: u64,
    /// Exclusive acquisitions.
    pub ex_acquire: u64,
    /// Sleeps.
    pub block: u64,
    /// Spin delays.
    pub spin_delay: u64,
    /// Time asleep, ns.
    pub wait_ns: u64,
    /// Self-dequeues after a successful phase-3 retry.
    pub dequeue_self: u64,
    /// Reader-bias revocations (read-biased only).
    pub bias_revoke: u64,
}

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct LwLockBenchRow {
    /// The lock measured.
    pub lock: LockUnderTest,
    /// Operations completed (shared + exclusive).
    pub ops: u64,
    /// Exclusive operations completed.
    pub exclusive_ops: u64,
    /// Operations per second over the measured time.
    pub ops_per_sec: f64,
    /// Median time to acquire (sampled every 16th operation), ns.
    pub acquire_p50_ns: u64,
    /// 99th percentile time to acquire, ns.
    pub acquire_p99_ns: u64,
    /// Maximum sampled time to acquire, ns.
    pub acquire_max_ns: u64,
    /// LWLOCK_STATS counters (None for the baselines).
    pub counters: Option<LwLockCounters>,
    /// True when the protected counters ended equal to the exclusive operation count.
    pub invariant_ok: bool,
    /// Sampled wait events (`LWLock:LwLockBench` for the LWLock rows; the baselines park
    /// outside lockstack and never publish one), as (event, samples).
    pub wait_events: Vec<(String, u64)>,
    /// Backend-samples taken (waiting or not).
    pub wait_samples: u64,
}

impl LwLockBenchRow {
    /// Sleeps per 1000 operations (None for the baselines).
    pub fn blocks_per_kop(&self) -> Option<f64> {
        self.counters.as_ref().map(|c| 1000.0 * c.block as f64 / self.ops.max(1) as f64)
    }
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct LwLockBenchReport {
    /// The parameters.
    pub config: LwLockBenchConfig,
    /// Cores and oversubscription.
    pub machine: MachineNote,
    /// One row per lock.
    pub rows: Vec<LwLockBenchRow>,
}

/// A lock the workload can drive: shared and exclusive sections around a closure.
trait Drive: Sync {
    fn shared<R>(&self, f: impl FnOnce() -> R) -> R;
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R;
}

struct Lw<L>(L);

impl<L: LwLockImpl> Drive for Lw<L> {
    #[inline]
    fn shared<R>(&self, f: impl FnOnce() -> R) -> R {
        let h = self.0.acquire(LwLockMode::Shared);
        let r = f();
        self.0.release(h);
        r
    }
    #[inline]
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let h = self.0.acquire(LwLockMode::Exclusive);
        let r = f();
        self.0.release(h);
        r
    }
}

impl Drive for parking_lot::RwLock<()> {
    #[inline]
    fn shared<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.read();
        f()
    }
    #[inline]
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.write();
        f()
    }
}

impl Drive for std::sync::RwLock<()> {
    #[inline]
    fn shared<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.read().unwrap_or_else(|e| e.into_inner());
        f()
    }
    #[inline]
    fn exclusive<R>(&self, f: impl FnOnce() -> R) -> R {
        let _g = self.write().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

/// Two counters the lock protects.
struct Protected(UnsafeCell<(u64, u64)>);

// SAFETY: every access goes through a shared or exclusive section of the lock under test
// (reads under shared, writes under exclusive), so there is never a write concurrent with
// another access; a broken lock shows up as a failed invariant, which is what we measure.
unsafe impl Sync for Protected {}

fn busy(ns: u64) {
    if ns == 0 {
        return;
    }
    let start = Instant::now();
    while (start.elapsed().as_nanos() as u64) < ns {
        lockstack_common::sync::spin_hint();
    }
}

struct ThreadResult {
    ops: u64,
    exclusive: u64,
    hist: Histogram<u64>,
    torn_reads: u64,
}

struct RowRun {
    threads: Vec<ThreadResult>,
    pair: (u64, u64),
    elapsed: Duration,
    profile: WaitEventProfile,
}

fn run_row<D: Drive>(lock: &D, cfg: &LwLockBenchConfig) -> RowRun {
    let data = Protected(UnsafeCell::new((0, 0)));
    let backends = BackendStatusArray::new(cfg.threads);
    let sampler =
        (cfg.wait_sampling_hz > 0).then(|| WaitSampler::spawn(Arc::clone(&backends), cfg.wait_sampling_hz));
    let stop = AtomicBool::new(false);
    let gate = lockstack_common::StartGate::new();
    let mut elapsed = Duration::ZERO;
    let results = lockstack_common::sync::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let (data, stop, gate, backends) = (&data, &stop, &gate, &backends);
                s.spawn(move || {
                    let _me = backends.attach(BackendId(t as u32));
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed.wrapping_add(t as u64));
                    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2)
                        .expect("1..=1e10 at 2 significant digits are valid histogram bounds");
                    let (mut ops, mut exclusive, mut torn) = (0u64, 0u64, 0u64);
                    gate.arrive_and_wait();
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            let sample = ops % 16 == 0;
                            let start = sample.then(Instant::now);
                            if rng.random_bool(cfg.shared_ratio) {
                                lock.shared(|| {
                                    if let Some(st) = start {
                                        hist.saturating_record(st.elapsed().as_nanos() as u64);
                                    }
                                    // SAFETY: shared section: no writer is inside.
                                    let (a, b) = unsafe { *data.0.get() };
                                    if a != b {
                                        torn += 1;
                                    }
                                    busy(cfg.hold_ns);
                                });
                            } else {
                                lock.exclusive(|| {
                                    if let Some(st) = start {
                                        hist.saturating_record(st.elapsed().as_nanos() as u64);
                                    }
                                    // SAFETY: exclusive section: nobody else is inside.
                                    let p = unsafe { &mut *data.0.get() };
                                    p.0 += 1;
                                    busy(cfg.hold_ns);
                                    p.1 += 1;
                                });
                                exclusive += 1;
                            }
                            ops += 1;
                        }
                    }
                    ThreadResult { ops, exclusive, hist, torn_reads: torn }
                })
            })
            .collect();
        gate.open_when_arrived(cfg.threads, || handles.iter().any(|h| h.is_finished()));
        let start = Instant::now();
        lockstack_common::sync::sleep(cfg.duration);
        stop.store(true, Ordering::Relaxed);
        let r: Vec<ThreadResult> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect();
        elapsed = start.elapsed();
        r
    });
    let profile = sampler.map(WaitSampler::stop).unwrap_or_default();
    RowRun { threads: results, pair: data.0.into_inner(), elapsed, profile }
}

fn summarize(lock: LockUnderTest, run: RowRun, counters: Option<LwLockCounters>) -> LwLockBenchRow {
    let RowRun { threads: res, pair, elapsed, profile } = run;
    let mut hist = Histogram::<u64>::new_with_bounds(1, 10_000_000_000, 2)
        .expect("1..=1e10 at 2 significant digits are valid histogram bounds");
    let (mut ops, mut excl, mut torn) = (0, 0, 0);
    for r in &res {
        ops += r.ops;
        excl += r.exclusive;
        torn += r.torn_reads;
        hist.add(&r.hist).expect("every histogram is made with the same bounds (1..=1e10, 2 digits)");
    }
    LwLockBenchRow {
        lock,
        ops,
        exclusive_ops: excl,
        ops_per_sec: ops as f64 / elapsed.as_secs_f64(),
        acquire_p50_ns: hist.value_at_quantile(0.5),
        acquire_p99_ns: hist.value_at_quantile(0.99),
        acquire_max_ns: hist.max(),
        counters,
        invariant_ok: torn == 0 && pair.0 == excl && pair.1 == excl,
        wait_events: profile.sorted().into_iter().map(|(e, n)| (e.to_string(), n)).collect(),
        wait_samples: profile.total(),
    }
}

fn lw_row<L: LwLockImpl>(which: LockUnderTest, lock: L, cfg: &LwLockBenchConfig) -> LwLockBenchRow {
    let tranche = lock.tranche();
    let before = stats::snapshot();
    let run = run_row(&Lw(lock), cfg);
    let d = stats::snapshot().since(&before).tranche(tranche);
    let counters = LwLockCounters {
        sh_acquire: d.sh_acquire,
        ex_acquire: d.ex_acquire,
        block: d.block,
        spin_delay: d.spin_delay,
        wait_ns: d.wait_ns,
        dequeue_self: d.dequeue_self,
        bias_revoke: d.bias_revoke,
    };
    summarize(which, run, Some(counters))
}

/// Runs every configured row and returns the report.
///
/// # Errors
/// The message of [`LwLockBenchConfig::validate`].
pub fn run(cfg: &LwLockBenchConfig) -> Result<LwLockBenchReport, BenchError> {
    cfg.validate()?;
    let previous_spin = lockstack_lwlock::spin_rounds();
    lockstack_lwlock::set_spin_rounds(cfg.spin_rounds);
    let tranche = TrancheId::register("LwLockBench");
    let mut rows = Vec::new();
    for (i, &which) in cfg.locks.iter().enumerate() {
        let inst = i as u32;
        let row = match which {
            LockUnderTest::Pg92 => lw_row(which, Pg92LwLock::with_id(tranche, inst), cfg),
            LockUnderTest::Atomic => lw_row(which, AtomicLwLock::with_id(tranche, inst), cfg),
            LockUnderTest::ReadBiased => lw_row(which, ReadBiasedLwLock::with_id(tranche, inst), cfg),
            LockUnderTest::ParkingLot => {
                let l = parking_lot::RwLock::new(());
                summarize(which, run_row(&l, cfg), None)
            }
            LockUnderTest::Std => {
                let l = std::sync::RwLock::new(());
                summarize(which, run_row(&l, cfg), None)
            }
        };
        rows.push(row);
    }
    lockstack_lwlock::set_spin_rounds(previous_spin);
    Ok(LwLockBenchReport { config: cfg.clone(), machine: MachineNote::for_threads(cfg.threads), rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_lock_keeps_the_invariant_and_counts_match() {
        let cfg = LwLockBenchConfig {
            locks: LockUnderTest::ALL.to_vec(),
            threads: 3,
            duration: Duration::from_millis(60),
            shared_ratio: 0.7,
            hold_ns: 0,
            seed: 1,
            wait_sampling_hz: 2000,
            spin_rounds: 0,
        };
        let rep = run(&cfg).unwrap();
        assert_eq!(rep.rows.len(), 5);
        for r in &rep.rows {
            assert!(r.invariant_ok, "{}: lock failed its invariant", r.lock.name());
            assert!(r.ops > 0 && r.exclusive_ops > 0, "{}: no progress", r.lock.name());
            assert!(r.wait_samples > 0, "{}: the sampler ran", r.lock.name());
            for (e, _) in &r.wait_events {
                assert_eq!(e, "LWLock:LwLockBench", "{}: only our tranche is ever waited on", r.lock.name());
            }
            if let Some(c) = &r.counters {
                assert_eq!(c.sh_acquire + c.ex_acquire, r.ops, "{}: LWLOCK_STATS count", r.lock.name());
                assert_eq!(c.ex_acquire, r.exclusive_ops, "{}", r.lock.name());
            }
        }
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let mut cfg = LwLockBenchConfig {
            locks: vec![LockUnderTest::Atomic],
            threads: 0,
            duration: Duration::from_secs(1),
            shared_ratio: 0.5,
            hold_ns: 0,
            seed: 0,
            wait_sampling_hz: 0,
            spin_rounds: 10,
        };
        assert!(run(&cfg).unwrap_err().to_string().contains("--threads"));
        cfg.threads = 1;
        cfg.shared_ratio = 1.5;
        assert!(run(&cfg).unwrap_err().to_string().contains("--shared-ratio"));
        assert!(LockUnderTest::parse_list("atomic,bogus").unwrap_err().to_string().contains("bogus"));
        assert_eq!(LockUnderTest::parse_list("all").unwrap().len(), 5);
    }
}

/// Why the LWLock micro-benchmark's lock list cannot be simulated (its `parking_lot` and `std`
/// baselines are the real dependencies' locks), in one line naming the first such lock, or
/// `None`.
pub fn unsupported_locks_under_simulation(locks: &[LockUnderTest]) -> Option<String> {
    locks.iter().find(|l| matches!(l, LockUnderTest::ParkingLot | LockUnderTest::Std)).map(|l| {
        format!(
            "locks={}: the baseline is the real {} RwLock, invisible to the simulated machine \
             (use pg92, atomic or read-biased)",
            l.name(),
            l.name()
        )
    })
}

#[cfg(test)]
mod simcheck_tests {
    use super::*;

    #[test]
    fn the_lwlock_baselines_are_refused() {
        assert_eq!(
            unsupported_locks_under_simulation(&[
                LockUnderTest::Pg92,
                LockUnderTest::Atomic,
                LockUnderTest::ReadBiased
            ]),
            None
        );
        let why = unsupported_locks_under_simulation(&LockUnderTest::ALL).expect("baselines refused");
        assert!(why.starts_with("locks=parking_lot: "), "{why}");
        let why = unsupported_locks_under_simulation(&[LockUnderTest::Std]).expect("std refused");
        assert!(why.starts_with("locks=std: "), "{why}");
    }
}
