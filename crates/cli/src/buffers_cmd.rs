//! `lockstack buffers`: argument parsing and the text/JSON output of the engine's buffer-pin
//! experiments (seed 004).

use clap::Args;
use lockstack_engine::settings::{CommandKnobs, FlagAlias};
use lockstack_workloads::micro::buffers::{
    self, BufferScenario, BuffersConfig, BuffersReport, Check, Header,
};

use crate::Failure;
use crate::knob_args::KnobArgs;

/// Arguments of `lockstack buffers`.
#[derive(Args, Debug)]
pub(crate) struct BuffersArgs {
    /// Experiment: hot-pin (every thread pins one page), scan (concurrent full scans, checking
    /// all-visible per page), vm-delete (per-thread deletes on disjoint pages sharing the VM page).
    #[arg(long, default_value = "hot-pin")]
    scenario: String,
    /// Buffer header designs to compare: comma-separated spinlock (9.2), atomic (9.6),
    /// atomic-sub (PostgreSQL 19's fetch_sub unpin), atomic-add (fetch_add pins too), or all
    /// (the default, unless --preset or --set bufmgr.header names one).
    #[arg(long)]
    header: Option<String>,
    /// Visibility checks to compare (scan, vm-delete; default all, unless --set vm.check names
    /// one): comma-separated page-flag-first, always-vm, always-vm-keep-pin, or all.
    #[arg(long)]
    vm_check: Option<String>,
    /// Buffer mapping table: partitions-16, partitions-128 (the default) or dashmap; knob
    /// bufmgr.mapping.
    #[arg(long)]
    mapping: Option<String>,
    /// Victim selection: freelist-lock (9.2) or atomic-clock (9.5, the default); knob
    /// bufmgr.victim.
    #[arg(long)]
    victim: Option<String>,
    /// Worker threads per row.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds to run each row (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    duration: f64,
    /// Heap pages in the table (default: 2048 for scan, 256 = 2 MiB for vm-delete, as the seed).
    #[arg(long)]
    table_pages: Option<u32>,
    /// Buffers in the pool (default: enough for the whole table).
    #[arg(long)]
    pool_buffers: Option<usize>,
    /// vm-delete: mark the page all-visible again every N deletes, as VACUUM would (0 = never).
    #[arg(long, default_value_t = 0)]
    vacuum_every: u32,
    /// --preset, --set and --json.
    #[command(flatten)]
    common: KnobArgs,
}

fn parse_list<T: std::str::FromStr<Err = String> + PartialEq + Copy>(
    flag: &str,
    s: &str,
    all: &[T],
) -> Result<Vec<T>, Failure> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim) {
        if part == "all" {
            out.extend_from_slice(all);
        } else {
            out.push(part.parse::<T>().map_err(|e| Failure::input(format!("--{flag}: {e}")))?);
        }
    }
    let mut dedup = Vec::new();
    for x in out {
        if !dedup.contains(&x) {
            dedup.push(x);
        }
    }
    Ok(dedup)
}

/// The knobs `lockstack buffers` reads, with its defaults (9.5's mapping and victim search).
const KNOBS: CommandKnobs = CommandKnobs {
    command: "lockstack buffers",
    reads: &["bufmgr.header", "bufmgr.mapping", "bufmgr.victim", "vm.check"],
    defaults: &[("bufmgr.mapping", "partitions-128"), ("bufmgr.victim", "atomic-clock")],
};

pub(crate) fn run(args: BuffersArgs) -> Result<(), Failure> {
    let scenario: BufferScenario =
        args.scenario.parse().map_err(|e| Failure::input(format!("--scenario: {e}")))?;
    let knobs = args.common.resolve(
        &KNOBS,
        &[
            FlagAlias { flag: "--header", key: "bufmgr.header", given: args.header.is_some(), value: None },
            FlagAlias { flag: "--vm-check", key: "vm.check", given: args.vm_check.is_some(), value: None },
            FlagAlias {
                flag: "--mapping",
                key: "bufmgr.mapping",
                given: args.mapping.is_some(),
                value: args.mapping.as_deref(),
            },
            FlagAlias {
                flag: "--victim",
                key: "bufmgr.victim",
                given: args.victim.is_some(),
                value: args.victim.as_deref(),
            },
        ],
    )?;
    // The resolved configuration (preset, --set and the flag aliases), not the arguments.
    crate::sim_cmd::refuse(lockstack_engine::simcheck::unsupported_under_simulation(&knobs.cfg))?;
    let headers = match &args.header {
        Some(list) => parse_list("header", list, &Header::EVERY)?,
        None if knobs.assigned("bufmgr.header") => vec![knobs.cfg.bufmgr.header],
        None => Header::EVERY.to_vec(),
    };
    if scenario == BufferScenario::HotPin && args.vm_check.is_some() {
        return Err(Failure::input("--vm-check applies to --scenario scan and vm-delete, not hot-pin"));
    }
    if scenario == BufferScenario::HotPin && knobs.assigned("vm.check") {
        return Err(Failure::input("--set vm.check applies to --scenario scan and vm-delete, not hot-pin"));
    }
    let vm_checks = match &args.vm_check {
        Some(list) => parse_list("vm-check", list, &Check::ALL)?,
        None if knobs.assigned("vm.check") => vec![knobs.cfg.vm_check],
        None => Check::ALL.to_vec(),
    };
    let (mapping, victim) = (knobs.cfg.bufmgr.mapping, knobs.cfg.bufmgr.victim);
    let duration = crate::duration_arg(args.duration)?;
    let table_pages = args.table_pages.unwrap_or(match scenario {
        BufferScenario::HotPin => 1,
        BufferScenario::Scan => 2048,
        BufferScenario::VmDelete => 256,
    });
    let pool_buffers =
        args.pool_buffers.unwrap_or_else(|| (table_pages as usize + 64).max(2 * args.threads + 64));
    let cfg = BuffersConfig {
        scenario,
        headers,
        vm_checks,
        mapping,
        victim,
        threads: args.threads,
        duration,
        table_pages,
        pool_buffers,
        vacuum_every: args.vacuum_every,
    };
    cfg.validate().map_err(Failure::input)?;
    args.common.run_and_report(
        || buffers::run(&cfg).map_err(Failure::input),
        print_report,
        |report| {
            report.rows.iter().find(|r| !r.invariant_ok).map(|r| {
                format!(
                    "row {} {} failed its checks: {}",
                    r.header,
                    r.vm_check.as_deref().unwrap_or(""),
                    r.error.as_deref().unwrap_or("?")
                )
            })
        },
    )
}

fn print_report(rep: &BuffersReport) {
    let c = &rep.config;
    crate::knob_args::print_heading(
        format_args!(
            "buffers {}: {} threads, {:.1} s per row, {} table pages, {} buffers, mapping {}, victims {}{}",
            c.scenario,
            c.threads,
            c.duration_s,
            c.table_pages,
            c.pool_buffers,
            c.mapping,
            c.victim,
            if c.vacuum_every > 0 { format!(", vacuum every {}", c.vacuum_every) } else { String::new() }
        ),
        &rep.machine,
    );
    outln!(
        "{:<10} {:<19} {:>12} {:>10} {:>9} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8} {:>4}",
        "header",
        "vm check",
        "ops/s",
        "pin waits",
        "/kop",
        "spindelay",
        "vm pins",
        "vm waits",
        "hits",
        "map blk",
        "cnt blk",
        "ok"
    );
    for r in &rep.rows {
        let b = &r.buffers;
        outln!(
            "{:<10} {:<19} {:>12.0} {:>10} {:>9.2} {:>10} {:>10} {:>10} {:>9} {:>8} {:>8} {:>4}",
            r.header,
            r.vm_check.as_deref().unwrap_or("-"),
            r.ops_per_sec,
            b.pin_waits,
            r.pin_waits_per_kop(),
            b.pin_spin_delays,
            b.vm_pins,
            b.vm_pin_waits,
            b.hits,
            r.lwlocks.mapping_block,
            r.lwlocks.content_block,
            if r.invariant_ok { "yes" } else { "NO" }
        );
    }
    outln!();
    outln!("ops: pin+unpin pairs (hot-pin), pages scanned (scan), deletes (vm-delete).");
    outln!(
        "pin waits: pins/unpins that found the buffer header busy (spinlock held, or BM_LOCKED / lost CAS);"
    );
    outln!("spindelay: sleeps in s_lock-style waits for a busy header (PostgreSQL's spindelay).");
    outln!("vm pins: VM page pins taken; map/cnt blk: BufferMapping / BufferContent LWLock sleeps.");
}
