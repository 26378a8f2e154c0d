//! `lockstack wal`: argument parsing and the text/JSON output of the engine's WAL insertion
//! workload.

use clap::Args;
use lockstack_workloads::micro::wal::{self, TrancheCounters, WalBenchConfig, WalBenchReport};

use crate::Failure;

/// Arguments of `lockstack wal`.
#[derive(Args, Debug)]
pub(crate) struct WalArgs {
    /// Insertion design: `single` (9.2: one WALInsertLock) or `locks:N` (9.4+: N insertion
    /// locks, 1..=128).
    #[arg(long, default_value = "locks:8")]
    insert: String,
    /// Worker threads (backends).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Payload bytes per record (plus a 24-byte header).
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Seconds to run (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// WAL buffers, in 8 KiB pages.
    #[arg(long, default_value_t = 512)]
    wal_buffers: usize,
    /// Commit (flush) after this many records per backend; 0 = never.
    #[arg(long, default_value_t = 0)]
    commit_every: u32,
    /// Modelled flush time in microseconds (default: flushes cost nothing).
    #[arg(long, value_name = "US")]
    flush_delay_us: Option<u64>,
    /// Commit asynchronously (synchronous_commit = off; a WAL writer flushes).
    #[arg(long)]
    async_commit: bool,
    /// commit_delay in microseconds (0..=100000).
    #[arg(long, default_value_t = 0)]
    commit_delay_us: u64,
    /// commit_siblings (0..=1000).
    #[arg(long, default_value_t = 5)]
    commit_siblings: usize,
    /// Also write the full report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

pub(crate) fn run(args: WalArgs) -> Result<(), Failure> {
    let mode = args.insert.parse().map_err(|e| Failure::input(format!("--insert: {e}")))?;
    let duration = crate::duration_arg(args.duration)?;
    let mut cfg = WalBenchConfig::new(mode, args.threads, args.record_size, duration);
    cfg.wal_buffers = args.wal_buffers;
    cfg.commit_every = args.commit_every;
    cfg.flush_delay_us = args.flush_delay_us;
    cfg.synchronous_commit = !args.async_commit;
    cfg.commit_delay_us = args.commit_delay_us;
    cfg.commit_siblings = args.commit_siblings;
    cfg.validate().map_err(|e| {
        Failure::input(crate::name_flags(
            &e,
            &[
                ("wal_buffers", "--wal-buffers"),
                ("commit_delay", "--commit-delay-us"),
                ("commit_siblings", "--commit-siblings"),
            ],
        ))
    })?;
    crate::prepare_json(args.json.as_deref())?;
    let report = wal::run(&cfg).map_err(|e| Failure { message: e, code: 2 })?;
    print_report(&report);
    crate::write_json(args.json.as_deref(), &report)?;
    if !report.invariant_ok {
        return Err(Failure { message: "WAL positions do not add up (see 'invariant')".into(), code: 2 });
    }
    Ok(())
}

fn lock_line(name: &str, c: &TrancheCounters, records: u64) {
    outln!(
        "  {:<14} {:>12} acquisitions {:>10} sleeps ({:>7.2} per 1000 records) {:>10.1} ms asleep",
        name,
        c.acquisitions,
        c.blocks,
        1000.0 * c.blocks as f64 / records.max(1) as f64,
        c.wait_ns as f64 / 1e6
    );
}

fn print_report(rep: &WalBenchReport) {
    let c = &rep.config;
    outln!(
        "wal insertion: {}, {} threads, {}-byte records, {:.1} s, {} WAL buffers, commit every {}{}",
        c.insert_mode,
        c.threads,
        c.record_size,
        rep.elapsed_secs,
        c.wal_buffers,
        c.commit_every,
        match c.flush_delay_us {
            Some(us) => format!(", modelled flush {us} us"),
            None => ", memory sink".into(),
        }
    );
    outln!("{}", rep.machine.line());
    outln!();
    outln!(
        "  {:.0} records/s, {:.1} MB/s of WAL; {} records, {} commits",
        rep.records_per_sec,
        rep.mb_per_sec,
        rep.records,
        rep.commits
    );
    let w = &rep.wal;
    outln!(
        "  WAL: {} insertion-lock acquisitions that waited, {} writes ({} forced by full buffers), {} flushes, {} flush requests served by others, {} commit_delay sleeps",
        w.insert_lock_waits,
        w.writes,
        w.buffers_full,
        w.flushes,
        w.flushed_by_others,
        w.commit_delays
    );
    lock_line("WALInsert", &rep.wal_insert, rep.records);
    lock_line("WALWrite", &rep.wal_write, rep.records);
    lock_line("WALBufMapping", &rep.wal_buf_mapping, rep.records);
    outln!("  invariant: {}", if rep.invariant_ok { "ok" } else { "BROKEN" });
}
