//! `lockstack wal`: WAL insertion throughput under one `WALInsertLock` (9.2) or N insertion
//! locks (9.4+), with the WALInsert / WALWrite / WALBufMapping LWLock counters of the run.
//!
//! Each worker is a backend that inserts records of `record_size` payload bytes for the run's
//! duration; with `commit_every > 0` it also commits (flushes, or hands to the WAL writer
//! when `synchronous_commit` is off) after every `commit_every` records. At the end the
//! WAL's insert position must equal the bytes the workers' records occupy (no reservation
//! lost or doubled), and the WAL's record counter must equal the workers' own count.

use super::error::{BenchError, check_threads_and_duration};
use lockstack_common::sync::{AtomicBool, Ordering};
use std::time::Duration;

use lockstack_common::sync::Instant;

use lockstack_common::{BackendId, TrancheId, TransactionId};
use lockstack_lwlock::stats;
use lockstack_xlog::ptr::{maxalign, recptr_to_bytepos};
use lockstack_xlog::{InsertMode, Record, Wal, WalConfig, WalSink, WalStats};
use serde::Serialize;

use crate::report::MachineNote;

/// Parameters of one `lockstack wal` run.
#[derive(Clone, Debug, Serialize)]
pub struct WalBenchConfig {
    /// `single` or `locks:N` (see [`InsertMode`]).
    #[serde(serialize_with = "ser_display")]
    pub insert_mode: InsertMode,
    /// Worker threads (backends), 1..=1024.
    pub threads: usize,
    /// Payload bytes per record (the 24-byte header comes on top), 0..=1 MiB.
    pub record_size: usize,
    /// Measured time.
    pub duration: Duration,
    /// WAL buffers in 8 KiB pages (4..=65536).
    pub wal_buffers: usize,
    /// Commit (flush) after this many records per worker; 0 = never (pure insertion).
    pub commit_every: u32,
    /// Modelled flush time in µs; `None` = memory sink (flushes cost nothing).
    pub flush_delay_us: Option<u64>,
    /// `synchronous_commit`.
    pub synchronous_commit: bool,
    /// `commit_delay` in µs (0..=100000).
    pub commit_delay_us: u64,
    /// `commit_siblings` (0..=1000).
    pub commit_siblings: usize,
}

fn ser_display<S: serde::Serializer>(m: &InsertMode, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(m)
}

impl WalBenchConfig {
    /// Defaults for everything but the four main knobs: 512 buffers, no commits, memory
    /// sink, synchronous commit, no commit_delay, commit_siblings 5.
    pub fn new(
        insert_mode: InsertMode,
        threads: usize,
        record_size: usize,
        duration: Duration,
    ) -> WalBenchConfig {
        WalBenchConfig {
            insert_mode,
            threads,
            record_size,
            duration,
            wal_buffers: 512,
            commit_every: 0,
            flush_delay_us: None,
            synchronous_commit: true,
            commit_delay_us: 0,
            commit_siblings: 5,
        }
    }

    /// Takes the knobs `lockstack wal` reads from `wal`, a [`WalConfig`] the knob registry
    /// ([`crate::settings::KNOBS`]) set: `wal.insert`, `wal.buffers`, `wal.flush` (a modelled
    /// flush delay, or none), `wal.synchronous_commit`, `wal.commit_delay`,
    /// `wal.commit_siblings`.
    pub fn set_knobs(&mut self, wal: &WalConfig) {
        self.insert_mode = wal.insert_mode;
        self.wal_buffers = wal.wal_buffers;
        self.flush_delay_us = match &wal.sink {
            WalSink::Modelled { flush_delay } => {
                Some(u64::try_from(flush_delay.as_micros()).unwrap_or(u64::MAX))
            }
            WalSink::Memory | WalSink::Files { .. } => None,
        };
        self.synchronous_commit = wal.synchronous_commit;
        self.commit_delay_us = wal.commit_delay_us;
        self.commit_siblings = wal.commit_siblings;
    }

    fn wal_config(&self) -> WalConfig {
        WalConfig {
            insert_mode: self.insert_mode,
            wal_buffers: self.wal_buffers,
            sink: match self.flush_delay_us {
                Some(us) => WalSink::Modelled { flush_delay: Duration::from_micros(us) },
                None => WalSink::Memory,
            },
            commit_delay_us: self.commit_delay_us,
            commit_siblings: self.commit_siblings,
            synchronous_commit: self.synchronous_commit,
            ..WalConfig::default()
        }
    }

    /// Checks ranges.
    ///
    /// # Errors
    /// A one-line message naming the bad parameter.
    pub fn validate(&self) -> Result<(), BenchError> {
        check_threads_and_duration(self.threads, self.duration)?;
        if self.record_size > 1024 * 1024 {
            return Err(BenchError::Config(format!(
                "--record-size must be at most 1048576 bytes, got {}",
                self.record_size
            )));
        }
        if let Some(us) = self.flush_delay_us
            && us > 1_000_000
        {
            return Err(BenchError::Config(format!("--flush-delay-us must be at most 1000000, got {us}")));
        }
        Ok(self.wal_config().validate()?)
    }
}

/// LWLOCK_STATS counters of one WAL tranche over the run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TrancheCounters {
    /// Exclusive acquisitions (these locks are only taken exclusively).
    pub acquisitions: u64,
    /// Sleeps waiting for the lock (including `wait_for_var` and acquire-or-wait sleeps).
    pub blocks: u64,
    /// Spin delays.
    pub spin_delay: u64,
    /// Time asleep, ns.
    pub wait_ns: u64,
}

impl TrancheCounters {
    fn of(s: &stats::LwLockStatsSnapshot, t: TrancheId) -> TrancheCounters {
        let d = s.tranche(t);
        TrancheCounters {
            acquisitions: d.acquisitions(),
            blocks: d.block,
            spin_delay: d.spin_delay,
            wait_ns: d.wait_ns,
        }
    }
}

/// Result of a `lockstack wal` run.
#[derive(Clone, Debug, Serialize)]
pub struct WalBenchReport {
    /// The parameters.
    pub config: WalBenchConfig,
    /// Cores and oversubscription.
    pub machine: MachineNote,
    /// Measured wall time, seconds.
    pub elapsed_secs: f64,
    /// Records inserted.
    pub records: u64,
    /// Records per second.
    pub records_per_sec: f64,
    /// WAL bytes per second, in MB (10^6 bytes), headers included.
    pub mb_per_sec: f64,
    /// Commits made.
    pub commits: u64,
    /// Per-backend WAL counters, summed (JSON: an object from counter name to value).
    #[serde(serialize_with = "crate::report::counters_map")]
    pub wal: WalStats,
    /// `WALInsert` tranche (the single WALInsertLock or the insertion locks).
    pub wal_insert: TrancheCounters,
    /// `WALWrite` tranche.
    pub wal_write: TrancheCounters,
    /// `WALBufMapping` tranche (insertion-locks mode only).
    pub wal_buf_mapping: TrancheCounters,
    /// True when the insert position equals the bytes of the records inserted and the WAL's
    /// record count equals the workers' count.
    pub invariant_ok: bool,
}

/// Runs the workload.
///
/// # Errors
/// A bad parameter (the message of [`WalBenchConfig::validate`]) or a WAL failure.
pub fn run(cfg: &WalBenchConfig) -> Result<WalBenchReport, BenchError> {
    cfg.validate()?;
    let wal = Wal::open(cfg.wal_config())?;
    let payload: Vec<u8> = (0..cfg.record_size).map(|i| (i * 31 + 7) as u8).collect();
    let stop = AtomicBool::new(false);
    let gate = lockstack_common::StartGate::new();
    let before = stats::snapshot();
    let mut elapsed = Duration::ZERO;
    let per_thread: Vec<Result<(u64, u64), BenchError>> = lockstack_common::sync::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let mut b = wal
                    .attach(BackendId(t as u32))
                    .expect("one thread per backend id, below the auxiliary range");
                let (stop, gate, payload) = (&stop, &gate, &payload);
                s.spawn(move || -> Result<(u64, u64), BenchError> {
                    let rec =
                        Record { rmid: 10, info: 0, xid: TransactionId(1000 + t as u32), data: payload };
                    let (mut n, mut commits) = (0u64, 0u64);
                    gate.arrive_and_wait();
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..32 {
                            let end = b.insert(&rec)?;
                            n += 1;
                            if cfg.commit_every > 0 && n.is_multiple_of(u64::from(cfg.commit_every)) {
                                b.commit(end)?;
                                commits += 1;
                            }
                        }
                    }
                    Ok((n, commits))
                })
            })
            .collect();
        gate.open_when_arrived(cfg.threads, || handles.iter().any(|h| h.is_finished()));
        let start = Instant::now();
        lockstack_common::sync::sleep(cfg.duration);
        stop.store(true, Ordering::Relaxed);
        let r = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(BenchError::Check("a worker panicked".into()))))
            .collect();
        elapsed = start.elapsed();
        r
    });
    let lw = stats::snapshot().since(&before);
    let (mut records, mut commits) = (0u64, 0u64);
    for r in per_thread {
        let (n, c) = r?;
        records += n;
        commits += c;
    }
    wal.shutdown()?;
    let ws = wal.stats();
    let rec_bytes = maxalign(24 + cfg.record_size as u64);
    let invariant_ok = ws.records == records
        && recptr_to_bytepos(wal.insert_position()) == records * rec_bytes
        && wal.flushed_upto() == wal.insert_position();
    let secs = elapsed.as_secs_f64();
    Ok(WalBenchReport {
        config: cfg.clone(),
        machine: MachineNote::for_threads(cfg.threads),
        elapsed_secs: secs,
        records,
        records_per_sec: records as f64 / secs,
        mb_per_sec: (records * rec_bytes) as f64 / secs / 1e6,
        commits,
        wal: ws,
        wal_insert: TrancheCounters::of(&lw, TrancheId::WAL_INSERT),
        wal_write: TrancheCounters::of(&lw, TrancheId::WAL_WRITE),
        wal_buf_mapping: TrancheCounters::of(&lw, TrancheId::WAL_BUF_MAPPING),
        invariant_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_parameters_are_rejected() {
        let ok = WalBenchConfig::new(InsertMode::SingleLock, 1, 100, Duration::from_secs(1));
        let mut c = ok.clone();
        c.threads = 0;
        assert!(run(&c).unwrap_err().to_string().contains("--threads"));
        let mut c = ok.clone();
        c.record_size = 2 << 20;
        assert!(run(&c).unwrap_err().to_string().contains("--record-size"));
        let mut c = ok;
        c.wal_buffers = 2;
        assert!(run(&c).unwrap_err().to_string().contains("wal_buffers"));
    }
}
