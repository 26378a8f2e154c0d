//! `lockstack wal`: argument parsing and the text/JSON output of the engine's WAL insertion
//! workload.

use clap::Args;
use lockstack_engine::settings::{CommandKnobs, FlagAlias};
use lockstack_workloads::micro::wal::{self, TrancheCounters, WalBenchConfig, WalBenchReport};

use crate::Failure;
use crate::knob_args::KnobArgs;

/// Arguments of `lockstack wal`.
#[derive(Args, Debug)]
pub(crate) struct WalArgs {
    /// Insertion design: `single` (9.2: one WALInsertLock) or `locks:N` (9.4+: N insertion
    /// locks, 1..=128; default locks:8); knob wal.insert.
    #[arg(long)]
    insert: Option<String>,
    /// Worker threads (backends).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Payload bytes per record (plus a 24-byte header).
    #[arg(long, default_value_t = 100)]
    record_size: usize,
    /// Seconds to run (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// WAL buffers, in 8 KiB pages (default 512); knob wal.buffers.
    #[arg(long)]
    wal_buffers: Option<usize>,
    /// Commit (flush) after this many records per backend; 0 = never.
    #[arg(long, default_value_t = 0)]
    commit_every: u32,
    /// Modelled flush time in microseconds (default: flushes cost nothing); knob wal.flush
    /// (modelled:US).
    #[arg(long, value_name = "US")]
    flush_delay_us: Option<u64>,
    /// Commit asynchronously (synchronous_commit = off; a WAL writer flushes); knob
    /// wal.synchronous_commit.
    #[arg(long)]
    async_commit: bool,
    /// commit_delay in microseconds (0..=100000, default 0); knob wal.commit_delay.
    #[arg(long)]
    commit_delay_us: Option<u64>,
    /// commit_siblings (0..=1000, default 5); knob wal.commit_siblings.
    #[arg(long)]
    commit_siblings: Option<usize>,
    /// --preset, --set and --json.
    #[command(flatten)]
    common: KnobArgs,
}

/// The knobs `lockstack wal` reads, with its defaults (9.4's insertion locks, flushes that cost
/// nothing, synchronous commit).
const KNOBS: CommandKnobs = CommandKnobs {
    command: "lockstack wal",
    reads: &[
        "wal.insert",
        "wal.buffers",
        "wal.flush",
        "wal.synchronous_commit",
        "wal.commit_delay",
        "wal.commit_siblings",
    ],
    defaults: &[
        ("wal.insert", "locks:8"),
        ("wal.buffers", "512"),
        ("wal.flush", "memory"),
        ("wal.synchronous_commit", "on"),
        ("wal.commit_delay", "0"),
        ("wal.commit_siblings", "5"),
    ],
};

pub(crate) fn run(args: WalArgs) -> Result<(), Failure> {
    let wal_buffers = args.wal_buffers.map(|n| n.to_string());
    let flush = args.flush_delay_us.map(|us| format!("modelled:{us}"));
    let commit_delay = args.commit_delay_us.map(|us| us.to_string());
    let siblings = args.commit_siblings.map(|n| n.to_string());
    let knobs = args.common.resolve(
        &KNOBS,
        &[
            FlagAlias {
                flag: "--insert",
                key: "wal.insert",
                given: args.insert.is_some(),
                value: args.insert.as_deref(),
            },
            FlagAlias {
                flag: "--wal-buffers",
                key: "wal.buffers",
                given: wal_buffers.is_some(),
                value: wal_buffers.as_deref(),
            },
            FlagAlias {
                flag: "--flush-delay-us",
                key: "wal.flush",
                given: flush.is_some(),
                value: flush.as_deref(),
            },
            FlagAlias {
                flag: "--async-commit",
                key: "wal.synchronous_commit",
                given: args.async_commit,
                value: Some("off"),
            },
            FlagAlias {
                flag: "--commit-delay-us",
                key: "wal.commit_delay",
                given: commit_delay.is_some(),
                value: commit_delay.as_deref(),
            },
            FlagAlias {
                flag: "--commit-siblings",
                key: "wal.commit_siblings",
                given: siblings.is_some(),
                value: siblings.as_deref(),
            },
        ],
    )?;
    let duration = crate::duration_arg(args.duration)?;
    let mut cfg = WalBenchConfig::new(knobs.cfg.wal.insert_mode, args.threads, args.record_size, duration);
    cfg.set_knobs(&knobs.cfg.wal);
    cfg.commit_every = args.commit_every;
    cfg.validate().map_err(|e| {
        Failure::input(crate::name_flags(
            &e.to_string(),
            &[
                ("wal_buffers", "--wal-buffers"),
                ("commit_delay", "--commit-delay-us"),
                ("commit_siblings", "--commit-siblings"),
            ],
        ))
    })?;
    args.common.run_and_report(
        || wal::run(&cfg).map_err(|e| Failure::run(e.to_string())),
        print_report,
        |report| (!report.invariant_ok).then(|| "WAL positions do not add up (see 'invariant')".into()),
    )
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
    crate::knob_args::print_heading(
        format_args!(
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
        ),
        &rep.machine,
    );
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
