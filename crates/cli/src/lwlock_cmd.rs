//! `lockstack lwlock`: argument parsing and the text/JSON output of the engine's LWLock
//! contention workload.

use clap::Args;
use lockstack_engine::settings::{CommandKnobs, FlagAlias};
use lockstack_workloads::micro::lwlock::{self, LockUnderTest, LwLockBenchConfig, LwLockBenchReport};

use crate::Failure;
use crate::knob_args::KnobArgs;

/// Arguments of `lockstack lwlock`.
#[derive(Args, Debug)]
pub(crate) struct LwLockArgs {
    /// Locks to compare: comma-separated list of pg92, atomic, read-biased, parking_lot, std,
    /// or all (the default, unless --preset or --set lwlock.kind names one LWLock kind).
    #[arg(long = "impl")]
    implementation: Option<String>,
    /// Worker threads per lock.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds to run each lock (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Fraction of operations in shared mode (0 to 1).
    #[arg(long, default_value_t = 0.9)]
    shared_ratio: f64,
    /// Busy work inside the lock, in ns.
    #[arg(long, default_value_t = 0)]
    hold_ns: u64,
    /// Pre-sleep spin rounds of the LWLocks (0 = PostgreSQL's behaviour: sleep at once;
    /// default: parking_lot's schedule).
    #[arg(long, default_value_t = lockstack_lwlock::DEFAULT_SPIN_ROUNDS)]
    spin_rounds: u32,
    /// Seed of the per-thread random streams.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Wait-event sampling rate (samples per second of every backend's wait event; 0 = off).
    #[arg(long, default_value_t = 1000)]
    wait_sampling_hz: u32,
    /// --preset, --set and --json.
    #[command(flatten)]
    common: KnobArgs,
}

/// The knob `lockstack lwlock` reads: one LWLock kind to run instead of the `--impl` list.
const KNOBS: CommandKnobs =
    CommandKnobs { command: "lockstack lwlock", reads: &["lwlock.kind"], defaults: &[] };

pub(crate) fn run(args: LwLockArgs) -> Result<(), Failure> {
    let knobs = args.common.resolve(
        &KNOBS,
        &[FlagAlias {
            flag: "--impl",
            key: "lwlock.kind",
            given: args.implementation.is_some(),
            value: None,
        }],
    )?;
    let list = match &args.implementation {
        Some(list) => list.as_str(),
        None if knobs.assigned("lwlock.kind") => knobs.cfg.lwlock_kind.name(),
        None => "all",
    };
    let locks = LockUnderTest::parse_list(list).map_err(|e| Failure::input(format!("--impl: {e}")))?;
    // The resolved list (--impl, else the preset's or --set's lwlock.kind, else all).
    crate::sim_cmd::refuse(lwlock::unsupported_locks_under_simulation(&locks))?;
    let duration = crate::duration_arg(args.duration)?;
    let cfg = LwLockBenchConfig {
        locks,
        threads: args.threads,
        duration,
        shared_ratio: args.shared_ratio,
        hold_ns: args.hold_ns,
        seed: args.seed,
        wait_sampling_hz: args.wait_sampling_hz,
        spin_rounds: args.spin_rounds,
    };
    cfg.validate().map_err(Failure::input)?;
    args.common.run_and_report(
        || lwlock::run(&cfg).map_err(Failure::input),
        print_report,
        |report| {
            report
                .rows
                .iter()
                .any(|r| !r.invariant_ok)
                .then(|| "a lock broke mutual exclusion (see the 'ok' column)".into())
        },
    )
}

fn print_report(rep: &LwLockBenchReport) {
    let c = &rep.config;
    crate::knob_args::print_heading(
        format_args!(
            "lwlock contention: {} threads, {:.1} s per lock, {:.0}% shared, hold {} ns, spin rounds {}",
            c.threads,
            c.duration.as_secs_f64(),
            c.shared_ratio * 100.0,
            c.hold_ns,
            c.spin_rounds
        ),
        &rep.machine,
    );
    outln!(
        "{:<12} {:>12} {:>10} {:>9} {:>9} {:>9} | {:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>8} {:>4}",
        "lock",
        "ops/s",
        "excl/s",
        "p50 ns",
        "p99 ns",
        "max us",
        "shacq",
        "exacq",
        "blk",
        "blk/kop",
        "spindly",
        "wait ms",
        "revoke",
        "ok"
    );
    for r in &rep.rows {
        let secs = c.duration.as_secs_f64();
        let stats = match &r.counters {
            Some(k) => format!(
                "{:>10} {:>10} {:>8} {:>9.2} {:>9} {:>10.1} {:>8}",
                k.sh_acquire,
                k.ex_acquire,
                k.block,
                r.blocks_per_kop().unwrap_or(0.0),
                k.spin_delay,
                k.wait_ns as f64 / 1e6,
                k.bias_revoke
            ),
            None => {
                format!("{:>10} {:>10} {:>8} {:>9} {:>9} {:>10} {:>8}", "-", "-", "-", "-", "-", "-", "-")
            }
        };
        outln!(
            "{:<12} {:>12.0} {:>10.0} {:>9} {:>9} {:>9.1} | {} {:>4}",
            r.lock.name(),
            r.ops_per_sec,
            r.exclusive_ops as f64 / secs,
            r.acquire_p50_ns,
            r.acquire_p99_ns,
            r.acquire_max_ns as f64 / 1000.0,
            stats,
            if r.invariant_ok { "yes" } else { "NO" }
        );
    }
    outln!();
    outln!("wait-event profile (share of backend samples; the rest were running):");
    for r in &rep.rows {
        let total = r.wait_samples.max(1) as f64;
        let events: Vec<String> =
            r.wait_events.iter().map(|(e, n)| format!("{e} {:.1}%", 100.0 * *n as f64 / total)).collect();
        let shown = if events.is_empty() { "(no waits sampled)".to_string() } else { events.join(", ") };
        outln!("  {:<12} {shown}", r.lock.name());
    }
    outln!();
    outln!(
        "shacq/exacq/blk/spindly/wait: LWLOCK_STATS counters of the run (blk = sleeps, blk/kop = sleeps per 1000 ops);"
    );
    outln!(
        "latencies are the time to acquire, sampled every 16th operation (they include Instant::now overhead)."
    );
}
