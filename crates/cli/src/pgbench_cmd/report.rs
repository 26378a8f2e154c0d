//! `lockstack pgbench`'s output: the report pgbench prints, with the lock stack's sections,
//! and the `--json` document. Touches no lock: it reads a finished run's result.

use lockstack_workloads::pgbench::runner::{PgbenchConfig, PgbenchResult};
use lockstack_workloads::report::REPORT_SECTIONS;

use crate::Failure;

use super::args::{PgbenchArgs, protocol};

/// The `--json` document: the run's configuration under `"config"` (what was run, so a file
/// says how it was made), then every field of the result.
pub(crate) fn json_document(
    args: &PgbenchArgs,
    cfg: &PgbenchConfig,
    res: &PgbenchResult,
) -> Result<serde_json::Value, Failure> {
    let mut doc = serde_json::to_value(res).map_err(|e| Failure::run(format!("encoding JSON: {e}")))?;
    let scripts: Vec<serde_json::Value> =
        cfg.scripts.iter().map(|s| serde_json::json!({ "name": s.name, "weight": s.weight })).collect();
    let config = serde_json::json!({
        "scale": cfg.scale,
        "fillfactor": cfg.fillfactor,
        "clients": cfg.clients,
        "threads": cfg.threads,
        "duration_s": cfg.duration.map(|d| d.as_secs_f64()),
        "transactions_per_client": cfg.transactions,
        "scripts": scripts,
        "preset": args.preset,
        "set": args.set,
        "protocol": protocol(args),
        "random_seed": cfg.seed,
        "wait_sampling_hz": cfg.wait_sampling_hz,
        "per_command_latencies": args.report_per_command,
        "data_dir": args.data_dir.as_ref().map(|d| d.display().to_string()),
        "load_from": args.load_from.as_ref().map(|d| d.display().to_string()),
        "calibration": args.calibration,
        "tps": res.transactions as f64 / res.elapsed_s,
    });
    if let Some(map) = doc.as_object_mut() {
        map.insert("config".into(), config);
    }
    Ok(doc)
}

pub(crate) fn print_report(args: &PgbenchArgs, cfg: &PgbenchConfig, r: &PgbenchResult) {
    let ttype = if cfg.scripts.len() == 1 { cfg.scripts[0].name.clone() } else { "multiple scripts".into() };
    outln!("transaction type: {ttype}");
    outln!("scaling factor: {}", cfg.scale);
    outln!("query mode: {}", protocol(args));
    outln!("number of clients: {}", cfg.clients);
    // pgbench multiplexes clients over -j threads; here every client is a thread of its own
    // (docs/workloads.md), so say both.
    if crate::sim_cmd::simulated() {
        // Under --machine there are no host threads to speak of: each client and its backend
        // are one task of the simulated machine.
        outln!(
            "number of threads: {} (simulated: each client and its backend are one task, {} tasks)",
            cfg.threads,
            cfg.clients
        );
    } else {
        outln!(
            "number of threads: {} (each client runs on its own thread here: {} busy)",
            cfg.threads,
            cfg.clients
        );
    }
    outln!("maximum number of tries: 1");
    match (cfg.duration, cfg.transactions) {
        (Some(d), _) => {
            outln!("duration: {} s", d.as_secs_f64());
            outln!("number of transactions actually processed: {}", r.transactions);
        }
        (None, Some(t)) => {
            outln!("number of transactions per client: {t}");
            outln!(
                "number of transactions actually processed: {}/{}",
                r.transactions,
                t * cfg.clients as u64
            );
        }
        (None, None) => {}
    }
    let all = (r.transactions + r.failed).max(1);
    outln!("number of failed transactions: {} ({:.3}%)", r.failed, 100.0 * r.failed as f64 / all as f64);
    outln!("latency average = {:.3} ms", r.latency_avg_ms);
    if args.progress.is_some() || args.report_per_command {
        outln!("latency stddev = {:.3} ms", r.latency_stddev_ms);
    }
    outln!("initial connection time = 0.000 ms");
    outln!("tps = {:.6} (without initial connection time)", r.transactions as f64 / r.elapsed_s);
    for (i, s) in r.scripts.iter().enumerate() {
        if r.scripts.len() > 1 {
            // In u64: up to 128 weights of up to i32::MAX each.
            let tw: u64 = r.scripts.iter().map(|s| u64::from(s.weight)).sum();
            outln!("SQL script {}: {}", i + 1, s.name);
            outln!(
                " - weight: {} (targets {:.1}% of total)",
                s.weight,
                100.0 * f64::from(s.weight) / tw as f64
            );
            outln!(
                " - {} transactions ({:.1}% of total, tps = {:.6})",
                s.transactions,
                100.0 * s.transactions as f64 / r.transactions.max(1) as f64,
                s.transactions as f64 / r.elapsed_s
            );
        }
        if args.report_per_command {
            let prefix = if r.scripts.len() > 1 { " - " } else { "" };
            outln!("{prefix}statement latencies in milliseconds and failures:");
            for (c, t) in s.commands.iter().zip(&s.texts) {
                let ms =
                    if c.count > 0 { c.total_ns.unwrap_or(0) as f64 / c.count as f64 / 1e6 } else { 0.0 };
                outln!("   {ms:>11.3}  {:>10}  {t}", c.failures);
            }
        }
    }
    outln!();
    let place = match (&args.data_dir, &args.load_from) {
        (Some(dir), _) => format!("tables opened from {} in {:.2} s", dir.display(), r.load_s),
        (None, Some(dir)) => format!("tables copied into memory from {} in {:.2} s", dir.display(), r.load_s),
        (None, None) => format!("tables loaded in memory in {:.2} s", r.load_s),
    };
    let ls = &r.lock_stack;
    let preset = if args.set.is_empty() {
        args.preset.clone()
    } else {
        format!("{} with --set {}", args.preset, args.set.join(" --set "))
    };
    outln!(
        "-- lock stack ({preset}; {place}; counters over the {} transactions of the run) --",
        ls.transactions
    );
    outln!("{}", crate::sim_cmd::machine_note(cfg.clients).line());
    outln!("LWLock tranche       shared acq  exclusive acq     sleeps   wait ms   per txn (sh/ex)");
    let tx = ls.transactions.max(1) as f64;
    for (t, s) in &ls.counters.lwlocks.tranches {
        let (sh, ex) = (s.sh_acquire, s.ex_acquire);
        if sh + ex == 0 {
            continue;
        }
        outln!(
            "{:<18} {sh:>12} {ex:>14} {:>10} {:>9.1}   {:.2}/{:.2}",
            t.name(),
            s.block,
            s.wait_ns as f64 / 1e6,
            sh as f64 / tx,
            ex as f64 / tx
        );
    }
    for (i, section) in REPORT_SECTIONS.iter().enumerate() {
        if i == 0 {
            outln!("{:<32} {:>12} {:>10}", section.title, "total", "per txn");
        } else {
            outln!("{}", section.title);
        }
        for (label, path) in section.lines {
            let n = ls.count(path);
            let label = if *path == "wal.flushes" { flushes_label(args, cfg) } else { label.to_string() };
            outln!("  {label:<30} {n:>12} {:>10.2}", ls.per_txn(n));
            if *path == "lmgr.main_acquisitions_total" {
                print_partitions(&ls.counters.lmgr.main_acquisitions);
            }
        }
    }
    if r.wait_samples > 0 {
        let clock = if crate::sim_cmd::simulated() { " of virtual time" } else { "" };
        outln!(
            "wait-event profile ({} samples of the connected backends, {} rounds at {} Hz{clock} from before the clients connect to after they disconnect; {} samples of clients idle at the start and end gates left out; spinning publishes no wait event: it counts as no wait event; sampling error up to +/-{:.1} points, two binomial standard errors):",
            r.wait_samples,
            r.wait_rounds,
            cfg.wait_sampling_hz,
            r.wait_idle_samples,
            100.0 / (r.wait_samples as f64).sqrt()
        );
        const SHOWN: usize = 8;
        let pct = |n: u64| 100.0 * n as f64 / r.wait_samples as f64;
        for (e, n) in r.wait_events.iter().take(SHOWN) {
            outln!("  {e:<28} {:>5.1}%", pct(*n));
        }
        let others: u64 = r.wait_events.iter().skip(SHOWN).map(|(_, n)| n).sum();
        if others > 0 {
            outln!("  {:<28} {:>5.1}%", "(other wait events)", pct(others));
        }
        let waiting: u64 = r.wait_events.iter().map(|(_, n)| n).sum();
        let running = r.wait_samples.saturating_sub(waiting);
        outln!("  {:<28} {:>5.1}%", "(no wait event)", pct(running));
    }
    match &r.fidelity_builtin {
        Some(b) => {
            let caveat = if ["pg14", "pg17"].contains(&args.preset.as_str()) {
                String::new()
            } else {
                format!("; PostgreSQL 15 corresponds to --preset pg14 or pg17, not {}", args.preset)
            };
            outln!(
                "fidelity vs PostgreSQL 15 ({b}, per transaction; PostgreSQL 15.18 counted with gdb, docs/fidelity.md{caveat}):"
            );
        }
        None => {
            outln!("fidelity vs PostgreSQL 15 (per transaction; no reference: not one built-in script):")
        }
    }
    outln!("  {:<26} {:>9} {:>9} {:>8}", "call", "ours", "PG 15", "diff");
    for f in &r.fidelity {
        let pg = f.pg15_per_txn.map(|p| format!("{p:.2}")).unwrap_or_else(|| "-".into());
        let diff = f.diff().map(|d| format!("{d:+.2}")).unwrap_or_else(|| "-".into());
        let flag = if f.diff().is_some_and(|d| d.abs() > 1.0) { " *" } else { "" };
        let note = if f.modelled { String::new() } else { format!("  ({})", f.note) };
        outln!("  {:<26} {:>9.2} {pg:>9} {diff:>8}{flag}{note}", f.call, f.ours_per_txn);
    }
    if r.fidelity.iter().any(|f| f.diff().is_some_and(|d| d.abs() > 1.0)) {
        outln!("  * differs by more than 1 per transaction: docs/fidelity.md explains why");
    }
    outln!("consistency checks:");
    for c in &r.checks {
        outln!("  {:<4} {} ({})", if c.ok { "ok" } else { "FAIL" }, c.name, c.detail);
    }
}

/// The WAL section's flushes row, saying what a flush was in this run: the host's `fdatasync`
/// (`--data-dir`), a modelled fsync of the configured time (`--set wal.flush=modelled:US`, or
/// the profile's under `--machine`), or none (an in-memory WAL is never flushed).
fn flushes_label(args: &PgbenchArgs, cfg: &PgbenchConfig) -> String {
    if args.data_dir.is_some() {
        return "flushes (fdatasync)".to_string();
    }
    match &cfg.engine.wal.sink {
        lockstack_xlog::WalSink::Files { .. } => "flushes (fdatasync)".to_string(),
        lockstack_xlog::WalSink::Modelled { flush_delay } => {
            format!("flushes (modelled, {} us each)", flush_delay.as_nanos() as f64 / 1000.0)
        }
        lockstack_xlog::WalSink::Memory => "flushes (none: WAL in memory)".to_string(),
    }
}

/// The busiest partitions' main-table acquisitions, `partition:count` for the first 16
/// partitions that counted any.
fn print_partitions(per_partition: &[u64]) {
    let parts: Vec<String> =
        per_partition.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| format!("{i}:{n}")).collect();
    if !parts.is_empty() {
        const SHOWN: usize = 16;
        let more = parts.len().saturating_sub(SHOWN);
        let tail = if more > 0 { format!(" (+{more} more)") } else { String::new() };
        let shown = parts.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(" ");
        outln!("    by partition (partition:count) {shown}{tail}");
    }
}
