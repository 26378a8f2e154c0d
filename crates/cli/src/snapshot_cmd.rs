//! `lockstack snapshot`: snapshot takers against committers, one row per ProcArray layout, with
//! ProcArrayLock counters (seed 000's experiment at the level of one crate).

use clap::Args;
use lockstack_engine::settings::{CommandKnobs, FlagAlias};
use lockstack_procarray::Layout;
use lockstack_workloads::micro::snapshot::{
    SnapshotWorkloadConfig, SnapshotWorkloadResult, run_snapshot_workload,
};
use lockstack_workloads::report::MachineNote;
use serde_json::json;

use crate::Failure;
use crate::knob_args::KnobArgs;

/// Arguments of `lockstack snapshot`.
#[derive(Args, Debug)]
pub(crate) struct SnapshotArgs {
    /// Layouts to compare: comma-separated pgproc, pgxact, pgxact-padded, dense, or all (the
    /// default, unless --preset or --set procarray.layout names one).
    #[arg(long)]
    layout: Option<String>,
    /// ProcArray members in total (idle ones included).
    #[arg(long, default_value_t = 1000)]
    backends: usize,
    /// Members holding an xid for the whole run (the snapshot's xip length).
    #[arg(long, default_value_t = 10)]
    running: usize,
    /// Threads taking snapshots.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Threads committing xid-bearing transactions.
    #[arg(long, default_value_t = 1)]
    committers: usize,
    /// End-of-transaction strategy: exclusive (the default), flexlock or group-clear; knob
    /// procarray.end_xact.
    #[arg(long)]
    end_xact: Option<String>,
    /// Seconds per layout (fractions allowed).
    #[arg(long, default_value_t = 1.0)]
    duration: f64,
    /// Single-thread mode: take exactly N snapshots per layout and stop (for
    /// `valgrind --tool=cachegrind`; see docs/procarray.md).
    #[arg(long, value_name = "N")]
    fixed: Option<u64>,
    /// --preset, --set and --json.
    #[command(flatten)]
    common: KnobArgs,
}

/// The workload's field names in validation errors, and the flags that set them.
const SNAPSHOT_FLAGS: &[(&str, &str)] = &[
    ("snapshot_threads", "--threads"),
    ("max_backends", "--backends"),
    ("backends (", "--backends ("),
    ("running xids", "running xids (--running)"),
    ("committer threads", "committer threads (--committers)"),
];

fn parse_layouts(s: &str) -> Result<Vec<Layout>, Failure> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part == "all" {
            out.extend(Layout::ALL);
        } else {
            out.push(part.parse::<Layout>().map_err(|e| Failure::input(format!("--layout: {e}")))?);
        }
    }
    out.dedup();
    Ok(out)
}

/// The knobs `lockstack snapshot` reads (every ProcArray knob and the LWLock kind of
/// ProcArrayLock), with its default end of transaction (9.2's exclusive lock).
const KNOBS: CommandKnobs = CommandKnobs {
    command: "lockstack snapshot",
    reads: &[
        "lwlock.kind",
        "procarray.layout",
        "procarray.end_xact",
        "procarray.global_xmin",
        "procarray.skip_subxids_without_xid",
        "procarray.fast_xid_compare",
        "procarray.snapshot_reuse",
        "procarray.old_snapshot_threshold",
        "procarray.time_map",
    ],
    defaults: &[("procarray.end_xact", "exclusive")],
};

pub(crate) fn run(args: SnapshotArgs) -> Result<(), Failure> {
    let knobs = args.common.resolve(
        &KNOBS,
        &[
            FlagAlias {
                flag: "--layout",
                key: "procarray.layout",
                given: args.layout.is_some(),
                value: None,
            },
            FlagAlias {
                flag: "--end-xact",
                key: "procarray.end_xact",
                given: args.end_xact.is_some(),
                value: args.end_xact.as_deref(),
            },
        ],
    )?;
    let knob_procarray = knobs.cfg.procarray;
    let layouts = match &args.layout {
        Some(list) => parse_layouts(list)?,
        None if knobs.assigned("procarray.layout") => vec![knob_procarray.layout],
        None => Layout::ALL.to_vec(),
    };
    let end_xact = knob_procarray.end_xact;
    let duration = crate::duration_arg(args.duration)?;
    if args.fixed == Some(0) {
        return Err(Failure::input("--fixed must be at least 1"));
    }
    if args.fixed.is_some() && (args.threads != 1 || args.committers != 1) {
        return Err(Failure::input(
            "--fixed runs one snapshot thread and no committers: --threads and --committers cannot be used with it",
        ));
    }
    let configs: Vec<SnapshotWorkloadConfig> = layouts
        .iter()
        .map(|&layout| {
            let mut c = SnapshotWorkloadConfig::new(layout, args.backends, args.running);
            c.procarray = lockstack_procarray::ProcArrayConfig {
                max_backends: c.procarray.max_backends,
                first_xid: c.procarray.first_xid,
                layout,
                ..knob_procarray
            };
            c.snapshot_threads = args.threads;
            c.committer_threads = args.committers;
            c.duration = duration;
            c.fixed_snapshots = args.fixed;
            c
        })
        .collect();
    for c in &configs {
        c.validate().map_err(|e| Failure::input(crate::name_flags(&e.to_string(), SNAPSHOT_FLAGS)))?;
    }
    crate::prepare_json(args.common.json.as_deref())?;
    let mut results = Vec::new();
    for c in &configs {
        results.push(run_snapshot_workload(c).map_err(|e| Failure::input(e.to_string()))?);
    }
    let threads = if args.fixed.is_some() { 1 } else { args.threads + args.committers };
    let machine = crate::sim_cmd::machine_note(threads);
    print(&args, end_xact.name(), &results, &machine);
    if args.common.json.is_some() {
        let rows: Vec<_> = results.iter().map(row_json).collect();
        let doc = json!({
            "backends": args.backends, "running": args.running, "threads": args.threads,
            "committers": args.committers, "end_xact": end_xact.name(), "duration_s": args.duration,
            "fixed_snapshots": args.fixed, "machine": machine, "rows": rows,
        });
        crate::write_json(args.common.json.as_deref(), &doc)?;
    }
    Ok(())
}

fn row_json(r: &SnapshotWorkloadResult) -> serde_json::Value {
    let p = &r.proc_array_lock;
    json!({
        "layout": r.layout.name(), "snapshots": r.snapshots, "commits": r.commits,
        "elapsed_s": r.elapsed.as_secs_f64(), "snapshots_per_sec": r.snapshots_per_sec,
        "commits_per_sec": r.commits_per_sec, "ns_per_snapshot": r.ns_per_snapshot, "xip_len": r.xip_len,
        "snapshots_reused": r.procarray.snapshots_reused,
        "proc_array_lock": {"sh_acquire": p.sh_acquire, "ex_acquire": p.ex_acquire, "block": p.block,
            "spin_delay": p.spin_delay, "wait_ns": p.wait_ns, "cond_fail": p.cond_fail,
            "group_leader": p.group_leader, "group_follower": p.group_follower},
        "xid_gen_lock": {"ex_acquire": r.xid_gen_lock.ex_acquire, "block": r.xid_gen_lock.block},
    })
}

fn print(args: &SnapshotArgs, end_xact: &str, results: &[SnapshotWorkloadResult], machine: &MachineNote) {
    match args.fixed {
        Some(n) => outln!(
            "snapshot: {} backends, {} running xids, single thread, {n} snapshots per layout",
            args.backends,
            args.running
        ),
        None => outln!(
            "snapshot: {} backends, {} running xids, {} snapshot threads, {} committers, end of xact {}, {:.1} s per layout",
            args.backends,
            args.running,
            args.threads,
            args.committers,
            end_xact,
            args.duration
        ),
    }
    outln!("{}", machine.line());
    outln!();
    outln!(
        "{:<14} {:>12} {:>10} {:>10} {:>9} | {:>10} {:>10} {:>8} {:>9} {:>10}",
        "layout",
        "snapshots/s",
        "ns/snap",
        "commits/s",
        "reused",
        "PA shacq",
        "PA exacq",
        "PA blk",
        "blk/kop",
        "PA wait ms"
    );
    for r in results {
        let p = &r.proc_array_lock;
        let ops = (r.snapshots + r.commits).max(1);
        outln!(
            "{:<14} {:>12.0} {:>10.1} {:>10.0} {:>9} | {:>10} {:>10} {:>8} {:>9.2} {:>10.1}",
            r.layout.name(),
            r.snapshots_per_sec,
            r.ns_per_snapshot,
            r.commits_per_sec,
            r.procarray.snapshots_reused,
            p.sh_acquire,
            p.ex_acquire,
            p.block,
            1000.0 * p.block as f64 / ops as f64,
            p.wait_ns as f64 / 1e6
        );
    }
    outln!();
    outln!(
        "PA = ProcArrayLock (LWLOCK_STATS); blk/kop = sleeps per 1000 snapshots+commits; reused = Dense snapshots served from cache."
    );
}
