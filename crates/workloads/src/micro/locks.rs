//! `lockstack locks`: the 2011 fast-path experiment (seed 003) on the heavyweight lock manager.
//!
//! Each worker thread is a backend running read-only "transactions" in a loop, as
//! `pgbench -S` does from the lock manager's point of view: start a transaction (which takes
//! the VXID lock, eagerly or on demand), take AccessShareLock on each of `relations` tables
//! (a table and its index in pgbench -S), end the transaction. With fast path off and eager
//! VXID locks every one of those goes through a LockManager partition lock; with both on,
//! none does. The report gives throughput and the lock manager's and LWLocks' counters.

use super::error::BenchError;
use lockstack_common::sync::{AtomicBool, Ordering};
use std::time::Duration;

use lockstack_common::sync::Instant;

use lockstack_common::{BackendId, Oid, TrancheId};
pub use lockstack_lmgr::VxidLocks;
use lockstack_lmgr::{FastPath, Lmgr, LmgrConfig, LockMode};
use lockstack_lwlock::stats;
use serde::Serialize;

pub use crate::report::LockCounters;
use crate::report::MachineNote;

/// What to run.
#[derive(Clone, Debug, Serialize)]
pub struct LocksConfig {
    /// Fast-path relation locks on (9.2's 16 slots) or off (9.1).
    pub fast_path: bool,
    /// VXID locks: `eager` (9.1) or `on-demand` (9.2).
    #[serde(serialize_with = "ser_vxid")]
    pub vxid: VxidLocks,
    /// Worker threads (backends).
    pub threads: usize,
    /// Relations locked per transaction (all threads lock the same ones).
    pub relations: usize,
    /// Main lock table partitions.
    pub partitions: usize,
    /// Run time.
    pub duration: Duration,
}

fn ser_vxid<S: serde::Serializer>(v: &VxidLocks, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

impl LocksConfig {
    /// Checks the ranges: 1..=1024 threads, 1..=1000 relations, partitions a power of two up
    /// to 1024, duration above zero.
    ///
    /// # Errors
    /// A one-line message naming the flag.
    pub fn validate(&self) -> Result<(), BenchError> {
        if !(1..=1024).contains(&self.threads) {
            return Err(BenchError::Config(format!("--threads must be 1..=1024, got {}", self.threads)));
        }
        if !(1..=1000).contains(&self.relations) {
            return Err(BenchError::Config(format!("--relations must be 1..=1000, got {}", self.relations)));
        }
        if !self.partitions.is_power_of_two() || self.partitions > 1024 {
            return Err(BenchError::Config(format!(
                "--partitions must be a power of two in 1..=1024, got {}",
                self.partitions
            )));
        }
        if self.duration.is_zero() {
            return Err(BenchError::Config("--duration must be above 0".into()));
        }
        Ok(())
    }
}

/// LWLOCK_STATS-style counters of one tranche during the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TrancheCounters {
    /// Shared acquisitions.
    pub sh_acquire: u64,
    /// Exclusive acquisitions.
    pub ex_acquire: u64,
    /// Sleeps.
    pub block: u64,
}

/// The result of a run.
#[derive(Clone, Debug, Serialize)]
pub struct LocksReport {
    /// The configuration.
    pub config: LocksConfig,
    /// Machine note.
    pub machine: MachineNote,
    /// Transactions completed.
    pub transactions: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Relation lock+unlock pairs per second.
    pub locks_per_sec: f64,
    /// Lock manager counters.
    pub lmgr: LockCounters,
    /// The LockManager partition locks.
    pub lock_manager: TrancheCounters,
    /// The per-backend LockFastPath locks.
    pub lock_fast_path: TrancheCounters,
    /// `Lmgr::check_invariants` held at the end and the tables were empty.
    pub invariants_ok: bool,
}

/// Runs the workload.
///
/// # Errors
/// The config's validation message.
pub fn run(cfg: &LocksConfig) -> Result<LocksReport, BenchError> {
    cfg.validate()?;
    let lmgr = Lmgr::new(LmgrConfig {
        max_backends: cfg.threads,
        partitions: cfg.partitions,
        fast_path: if cfg.fast_path { FastPath::PG92 } else { FastPath::Off },
        vxid: cfg.vxid,
        ..LmgrConfig::default()
    })?;
    let stop = AtomicBool::new(false);
    let gate = lockstack_common::StartGate::new();
    let before = stats::snapshot();
    let mut elapsed = Duration::ZERO;
    let transactions: u64 = lockstack_common::sync::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|i| {
                let (lmgr, stop, gate) = (&lmgr, &stop, &gate);
                s.spawn(move || {
                    let mut b = lmgr.attach(BackendId(i as u32)).expect(
                        "the lock manager was built with max_backends = threads, so ids 0..threads attach",
                    );
                    let rels: Vec<Oid> = (0..cfg.relations).map(|r| Oid(16384 + r as u32)).collect();
                    gate.arrive_and_wait();
                    let first = Instant::now();
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            b.start_transaction();
                            for &r in &rels {
                                // AccessShareLock conflicts with nothing these threads take.
                                let _ = b.lock_relation(r, LockMode::AccessShare);
                            }
                            b.end_transaction();
                        }
                        n += 64;
                    }
                    (n, first, Instant::now())
                })
            })
            .collect();
        gate.open_when_arrived(cfg.threads, || handles.iter().any(|h| h.is_finished()));
        let start = Instant::now();
        lockstack_common::sync::sleep(cfg.duration);
        stop.store(true, Ordering::Relaxed);
        let done: Vec<(u64, Instant, Instant)> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        elapsed = super::workers_interval(done.iter().map(|d| (d.1, d.2)), start.elapsed());
        done.iter().map(|d| d.0).sum()
    });
    let lw = stats::snapshot().since(&before);
    let t = |id: TrancheId| {
        let s = lw.tranche(id);
        TrancheCounters { sh_acquire: s.sh_acquire, ex_acquire: s.ex_acquire, block: s.block }
    };
    let invariants_ok =
        lmgr.check_invariants().is_ok() && lmgr.main_table_len() == 0 && lmgr.fast_path_len() == 0;
    let secs = elapsed.as_secs_f64().max(1e-9);
    Ok(LocksReport {
        config: cfg.clone(),
        machine: MachineNote::for_threads(cfg.threads),
        transactions,
        tps: transactions as f64 / secs,
        locks_per_sec: (transactions * cfg.relations as u64) as f64 / secs,
        lmgr: LockCounters::from(&lmgr.stats()),
        lock_manager: t(TrancheId::LOCK_MANAGER),
        lock_fast_path: t(TrancheId::LOCK_FAST_PATH),
        invariants_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_path_and_on_demand_vxid_keep_transactions_out_of_the_main_table() {
        let mk = |fast_path, vxid| LocksConfig {
            fast_path,
            vxid,
            threads: 2,
            relations: 2,
            partitions: 16,
            duration: Duration::from_millis(50),
        };
        let fast = run(&mk(true, VxidLocks::OnDemand)).unwrap();
        assert!(fast.invariants_ok);
        assert!(fast.transactions > 0);
        assert_eq!(fast.lmgr.main_acquisitions_total, 0);
        assert_eq!(fast.lmgr.fast_path_grants, 2 * fast.transactions);
        let slow = run(&mk(false, VxidLocks::Eager)).unwrap();
        assert!(slow.invariants_ok);
        assert_eq!(slow.lmgr.fast_path_grants, 0);
        // Two relations and one VXID lock per transaction.
        assert_eq!(slow.lmgr.main_acquisitions_total, 3 * slow.transactions);
        assert!(run(&LocksConfig { threads: 0, ..mk(true, VxidLocks::Eager) }).is_err());
    }
}
