//! `lockstack locks`: the fast-path / VXID experiment of seed 003 on the heavyweight lock
//! manager: throughput and lock counters.

use std::time::Duration;

use clap::Args;
use lockstack_workloads::micro::locks::{self, LocksConfig, LocksReport, VxidLocks};

use crate::Failure;

/// Arguments of `lockstack locks`.
#[derive(Args, Debug)]
pub(crate) struct LocksArgs {
    /// Fast-path relation locks: on (9.2+) or off (9.1).
    #[arg(long, default_value = "on")]
    fast_path: String,
    /// VXID locks: eager (9.1) or on-demand (9.2+).
    #[arg(long, default_value = "on-demand")]
    vxid: String,
    /// Worker threads (backends).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Relations locked (AccessShareLock) per transaction.
    #[arg(long, default_value_t = 2)]
    relations: usize,
    /// Main lock table partitions (power of two).
    #[arg(long, default_value_t = 16)]
    partitions: usize,
    /// Seconds to run (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

pub(crate) fn run(args: LocksArgs) -> Result<(), Failure> {
    let fast_path = match args.fast_path.as_str() {
        "on" => true,
        "off" => false,
        other => return Err(Failure::input(format!("--fast-path must be on or off, got '{other}'"))),
    };
    let vxid: VxidLocks = args.vxid.parse().map_err(|e| Failure::input(format!("--vxid: {e}")))?;
    if !args.duration.is_finite() || args.duration <= 0.0 || args.duration > 3600.0 {
        return Err(Failure::input(format!(
            "--duration must be above 0 and at most 3600 seconds, got {}",
            args.duration
        )));
    }
    let cfg = LocksConfig {
        fast_path,
        vxid,
        threads: args.threads,
        relations: args.relations,
        partitions: args.partitions,
        duration: Duration::from_secs_f64(args.duration),
    };
    cfg.validate().map_err(Failure::input)?;
    if let Some(path) = &args.json {
        std::fs::File::create(path).map_err(|e| Failure::input(format!("--json {}: {e}", path.display())))?;
    }
    let report = locks::run(&cfg).map_err(Failure::input)?;
    print_report(&report);
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)
            .map_err(|e| Failure { message: format!("encoding JSON: {e}"), code: 2 })?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure { message: format!("--json {}: {e}", path.display()), code: 2 })?;
    }
    if !report.invariants_ok {
        return Err(Failure {
            message: "lock manager invariants broken at the end of the run".into(),
            code: 2,
        });
    }
    Ok(())
}

fn print_report(r: &LocksReport) {
    let c = &r.config;
    outln!(
        "locks: fast path {}, VXID locks {}, {} threads, {} relations/xact, {} partitions, {:.1} s",
        if c.fast_path { "on" } else { "off" },
        c.vxid,
        c.threads,
        c.relations,
        c.partitions,
        c.duration.as_secs_f64()
    );
    outln!("{}", r.machine.line());
    outln!();
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
