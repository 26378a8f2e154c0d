//! `lockstack locks`: the fast-path / VXID experiment of seed 003 on the heavyweight lock
//! manager: throughput and lock counters.

use clap::Args;
use lockstack_engine::settings::{CommandKnobs, FlagAlias};
use lockstack_workloads::micro::locks::{self, LocksConfig, LocksReport};

use crate::Failure;
use crate::knob_args::KnobArgs;

/// Arguments of `lockstack locks`.
#[derive(Args, Debug)]
pub(crate) struct LocksArgs {
    /// Fast-path relation locks: on (9.2+, the default) or off (9.1); knob lmgr.fast_path.
    #[arg(long)]
    fast_path: Option<String>,
    /// VXID locks: eager (9.1) or on-demand (9.2+, the default); knob lmgr.vxid.
    #[arg(long)]
    vxid: Option<String>,
    /// Worker threads (backends).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Relations locked (AccessShareLock) per transaction.
    #[arg(long, default_value_t = 2)]
    relations: usize,
    /// Main lock table partitions (power of two; default 16); knob lmgr.partitions.
    #[arg(long)]
    partitions: Option<usize>,
    /// Seconds to run (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// --preset, --set and --json.
    #[command(flatten)]
    common: KnobArgs,
}

/// The knobs `lockstack locks` reads, with its defaults (9.2's fast path and VXID locks).
const KNOBS: CommandKnobs = CommandKnobs {
    command: "lockstack locks",
    reads: &["lmgr.fast_path", "lmgr.vxid", "lmgr.partitions"],
    defaults: &[("lmgr.fast_path", "1"), ("lmgr.vxid", "on-demand"), ("lmgr.partitions", "16")],
};

pub(crate) fn run(args: LocksArgs) -> Result<(), Failure> {
    let [fast_path_alias, vxid_alias] =
        crate::knob_args::lmgr_flag_aliases(args.fast_path.as_deref(), args.vxid.as_deref())?;
    let partitions = args.partitions.map(|n| n.to_string());
    let knobs = args.common.resolve(
        &KNOBS,
        &[
            fast_path_alias,
            vxid_alias,
            FlagAlias {
                flag: "--partitions",
                key: "lmgr.partitions",
                given: partitions.is_some(),
                value: partitions.as_deref(),
            },
        ],
    )?;
    let lmgr = &knobs.cfg.lmgr;
    let fast_path = match lmgr.fast_path.groups() {
        0 => false,
        1 => true,
        groups => {
            return Err(Failure::input(format!(
                "lmgr.fast_path={groups}: lockstack locks runs 9.2's 16 slots (1) or none (off); more groups are unsupported here"
            )));
        }
    };
    let vxid = lmgr.vxid;
    let duration = crate::duration_arg(args.duration)?;
    let cfg = LocksConfig {
        fast_path,
        vxid,
        threads: args.threads,
        relations: args.relations,
        partitions: lmgr.partitions,
        duration,
    };
    cfg.validate().map_err(Failure::input)?;
    args.common.run_and_report(
        || locks::run(&cfg).map_err(Failure::input),
        print_report,
        |report| {
            (!report.invariants_ok).then(|| "lock manager invariants broken at the end of the run".into())
        },
    )
}

fn print_report(r: &LocksReport) {
    let c = &r.config;
    crate::knob_args::print_heading(
        format_args!(
            "locks: fast path {}, VXID locks {}, {} threads, {} relations/xact, {} partitions, {:.1} s",
            if c.fast_path { "on" } else { "off" },
            c.vxid,
            c.threads,
            c.relations,
            c.partitions,
            c.duration.as_secs_f64()
        ),
        &r.machine,
    );
    outln!("transactions      {:>14}   ({:.0} tps)", r.transactions, r.tps);
    outln!("relation locks/s  {:>14.0}", r.locks_per_sec);
    let l = &r.lmgr;
    outln!("fast-path grants  {:>14}", l.fast_path_grants);
    outln!("main-table acq.   {:>14}   per partition: {:?}", l.main_acquisitions_total, l.main_acquisitions);
    outln!("transfers         {:>14}", l.transfers);
    outln!("spills            {:>14}", l.spills);
    outln!("waits             {:>14}", l.waits);
    outln!("deadlocks         {:>14}", l.deadlocks);
    outln!(
        "LockManager       shacq {:>10}  exacq {:>10}  blk {:>8}",
        r.lock_manager.sh_acquire,
        r.lock_manager.ex_acquire,
        r.lock_manager.block
    );
    outln!(
        "LockFastPath      shacq {:>10}  exacq {:>10}  blk {:>8}",
        r.lock_fast_path.sh_acquire,
        r.lock_fast_path.ex_acquire,
        r.lock_fast_path.block
    );
}
