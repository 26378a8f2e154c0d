//! `lockstack experiment NAME`: the five seed experiments, each one command with the seed-style
//! table (clients, baseline, variants, gain %), the key counters per variant, the seed's own
//! figures, and CSV / JSON / SVG files; `lockstack experiment list` lists them.

use lockstack_common::sync::Instant;
use std::path::{Path, PathBuf};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use lockstack_engine::settings;
use lockstack_workloads::experiments::driver::{self, ExperimentResult, Options, Plan};
use lockstack_workloads::experiments::{self, Experiment, VM_CHECK_KEY, output};

use crate::Failure;

/// Arguments of `lockstack experiment`.
#[derive(Args, Debug)]
pub(crate) struct ExperimentArgs {
    /// Experiment to run (pgxact, old-snapshot, flexlock, fastpath, vm-pin), or `list`.
    name: String,
    /// Client counts, comma-separated (worker threads for vm-pin); default: the experiment's.
    #[arg(long, value_name = "N,N,...")]
    clients: Option<String>,
    /// Seconds per point (fractions allowed); default: the experiment's.
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Runs per point (min / median / max are over these); default 3.
    #[arg(long, allow_negative_numbers = true)]
    runs: Option<i64>,
    /// pgbench scale factor (vm-pin: multiplies the table sizes); default 1.
    #[arg(short = 's', long, allow_negative_numbers = true)]
    scale: Option<i64>,
    /// Release preset the variants start from (pg91, pg92, pg96, pg14, pg17); default: the
    /// experiment's.
    #[arg(long)]
    preset: Option<String>,
    /// Override one design choice for every variant: crate.knob=value (repeatable; `--set help`
    /// lists the knobs). Knobs the experiment varies are refused.
    #[arg(long = "set", value_name = "CRATE.KNOB=VALUE")]
    set: Vec<String>,
    /// Only these workloads, comma-separated (e.g. select-only); default: all of the experiment's.
    #[arg(long, value_name = "NAME,...")]
    workload: Option<String>,
    /// Directory for NAME.csv, NAME-runs.csv, NAME.json and NAME.svg [default: out/experiments/NAME].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// CI mode: 0.05 s per point, 1 run, clients 1,2 (unless given), then re-read and check
    /// every file written (exit 2 if one is missing or malformed).
    #[arg(long)]
    smoke: bool,
    /// Also write the whole result as JSON to this file (each point's raw counters by path, as
    /// `lockstack pgbench --json` names them: `lwlock.ProcArray.ex_acquire`, `wal.flushes`).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Base seed of pgbench's client random generators (run r uses seed + r).
    #[arg(long = "random-seed", default_value_t = 0)]
    random_seed: u64,
}

fn parse_clients(s: &str) -> Result<Vec<usize>, Failure> {
    s.split(',')
        .map(|part| {
            let part = part.trim();
            part.parse::<usize>()
                .map_err(|_| Failure::input(format!("--clients: invalid count \"{part}\" in \"{s}\"")))
        })
        .collect()
}

fn options(args: &ExperimentArgs) -> Result<Options, Failure> {
    let clients = match &args.clients {
        Some(s) => Some(parse_clients(s)?),
        None if args.smoke => Some(vec![1, 2]),
        None => None,
    };
    let runs = match args.runs {
        Some(r) if r < 1 => return Err(Failure::input(format!("--runs must be at least 1, got {r}"))),
        Some(r) => Some(usize::try_from(r).map_err(|_| Failure::input(format!("--runs: {r} is too large")))?),
        None if args.smoke => Some(1),
        None => None,
    };
    let duration_s = args.duration.or(if args.smoke { Some(0.05) } else { None });
    let workloads =
        args.workload.as_ref().map(|w| w.split(',').map(|s| s.trim().to_string()).collect::<Vec<_>>());
    Ok(Options {
        clients,
        duration_s,
        runs,
        scale: args.scale,
        preset: args.preset.clone(),
        set: args.set.clone(),
        workloads,
        seed: args.random_seed,
    })
}

pub(crate) fn run(args: ExperimentArgs) -> Result<(), Failure> {
    if args.set.iter().any(|s| s == "help") {
        print_knobs();
        return Ok(());
    }
    if args.name == "list" {
        print_list();
        return Ok(());
    }
    let exp = experiments::find(&args.name).map_err(Failure::input)?;
    let plan = Plan::new(exp, &options(&args)?).map_err(Failure::input)?;
    // Every variant's resolved configuration (preset, --set, the variant's own assignments).
    for v in exp.variants {
        let clients = plan.clients.first().copied().unwrap_or(1);
        let (cfg, _) = plan.config(v, clients).map_err(Failure::input)?;
        crate::sim_cmd::refuse(lockstack_engine::simcheck::unsupported_under_simulation(&cfg))?;
    }
    let out = args.out.clone().unwrap_or_else(|| Path::new("out/experiments").join(exp.name));
    std::fs::create_dir_all(&out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    crate::prepare_json(args.json.as_deref())?;

    let bar = ProgressBar::new(plan.points() as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} points, eta {eta} {msg}")
            .map_err(|e| Failure::run(format!("progress bar: {e}")))?
            .progress_chars("=> "),
    );
    bar.set_prefix(exp.name);
    let t0 = Instant::now();
    let result = driver::run(&plan, &mut |s| {
        if s.finished.is_some() {
            bar.set_position(s.done as u64);
        } else {
            bar.set_message(format!("{} {} c={} run {}", s.workload, s.variant, s.clients, s.run + 1));
        }
    });
    bar.finish_and_clear();
    let result = result.map_err(Failure::run)?;
    let wall = t0.elapsed().as_secs_f64();

    print_report(&result, wall);
    let written = output::write_all(&result, &out).map_err(Failure::run)?;
    crate::write_json(args.json.as_deref(), &result)?;
    outln!(
        "wrote {}, {}, {}, {}",
        written.csv.display(),
        written.runs_csv.display(),
        written.json.display(),
        written.svg.display()
    );
    if args.smoke {
        let names: Vec<&str> = exp.variants.iter().map(|v| v.name).collect();
        let v = output::verify(&out, exp.name, &names, result.points.len(), result.summary.len())
            .map_err(|e| Failure::run(format!("smoke check: {e}")))?;
        outln!(
            "smoke check: ok ({} points, {} summary rows, {} SVG lines)",
            v.points,
            v.summary_rows,
            v.svg_lines
        );
    }
    if let Some(p) = result.points.iter().find(|p| !p.ok) {
        return Err(Failure::run(format!(
            "consistency check failed: {} {} c={} run {}: {}",
            p.workload,
            p.variant,
            p.clients,
            p.run + 1,
            p.error.as_deref().unwrap_or("?")
        )));
    }
    Ok(())
}

/// `experiment NAME --help`: what the experiment reruns (the thread it comes from, its
/// workloads, variants and defaults), printed before clap's help for the options. Called by
/// `main` when clap stops at `--help` after `experiment`; `args` are the arguments after
/// `experiment`, and the first that names an experiment is the one described (none: nothing
/// is printed).
pub(crate) fn print_experiment_help(args: &[String]) {
    let Some(e) = args.iter().find_map(|a| experiments::find(a).ok()) else { return };
    outln!("experiment {}: {}", e.name, e.title);
    outln!("thread:   \"{}\"", e.thread.title);
    outln!("authors:  {}", e.thread.authors);
    outln!("date:     {}", e.thread.date);
    outln!("seed:     {} (the thread's figures, transcribed: docs/experiments.md)", e.seed);
    let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
    outln!("workloads: {}", workloads.join(", "));
    outln!("variants (baseline first):");
    for v in e.variants {
        outln!("  {:<20} {}", v.name, v.about);
    }
    let clients: Vec<String> = e.clients.iter().map(usize::to_string).collect();
    outln!(
        "defaults: preset {}, clients {}, {} run(s) x {} s per point",
        e.preset,
        clients.join(","),
        e.runs,
        e.duration_s
    );
    outln!();
}

fn print_knobs() {
    outln!("--set crate.knob=value overrides (applied to every variant, after the experiment's own list):");
    for k in settings::knobs() {
        let only = if k.key == VM_CHECK_KEY { " (vm-pin only; its variants set it)" } else { "" };
        outln!("  {:<36} {:<42} {}{only}", k.key, k.values, k.doc);
    }
}

fn print_list() {
    outln!(
        "{:<13} {:<26} {:>6} {:>10}  what (variants; workloads)",
        "experiment",
        "seed",
        "points",
        "measure s"
    );
    for e in experiments::all() {
        let variants: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
        let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
        outln!(
            "{:<13} {:<26} {:>6} {:>10.1}  {} ({}; {})",
            e.name,
            e.seed,
            e.default_points(),
            e.default_points() as f64 * e.duration_s,
            e.title,
            variants.join(" vs "),
            workloads.join(", ")
        );
    }
    outln!("defaults: the clients, seconds per point and runs of each experiment (`--help` for overrides).");
}

/// A counter value with a precision that suits its size.
fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.1e}")
    }
}

/// Prints rows of cells as a table with right-aligned columns (the first left-aligned), the
/// header underlined.
fn print_table(header: &[String], rows: &[Vec<String>]) {
    let n = header.len();
    let width: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter().map(|r| r.get(i).map_or(0, String::len)).chain([header[i].len()]).max().unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(
                |(i, c)| {
                    if i == 0 { format!("{c:<w$}", w = width[i]) } else { format!("{c:>w$}", w = width[i]) }
                },
            )
            .collect();
        outln!("  {}", parts.join(" | "));
    };
    line(header);
    outln!("  {}", width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"));
    for r in rows {
        line(r);
    }
}

fn tps_cell(median: f64, min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) if lo < hi => format!("{median:.0} [{lo:.0}..{hi:.0}]"),
        _ => format!("{median:.0}"),
    }
}

fn gain_cell(g: Option<f64>) -> String {
    g.map_or("-".into(), |g| format!("{g:+.1}%"))
}

fn print_report(r: &ExperimentResult, wall_s: f64) {
    let plan = &r.plan;
    let e: &Experiment = plan.experiment;
    outln!("experiment {}: {}", e.name, e.title);
    outln!("thread: {} (seed {}; its figures: docs/experiments.md)", e.thread.line(), e.seed);
    let clients: Vec<String> = plan.clients.iter().map(usize::to_string).collect();
    outln!(
        "preset {}, scale {}, clients {}, {} run(s) x {:.2} s per point, {} points in {:.1} s",
        plan.preset,
        plan.scale,
        clients.join(","),
        plan.runs,
        plan.duration_s,
        r.points.len(),
        wall_s
    );
    outln!("variants (assignments applied after the preset, in order; the first is the baseline):");
    let wname = e.variants.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for (v, (_, set)) in e.variants.iter().zip(&r.variant_sets) {
        outln!("  {:<wname$}  {}", v.name, set.join(" "));
        outln!("  {:<wname$}  {}", "", v.about);
    }
    let base = e.baseline().name;
    for w in &plan.workloads {
        outln!();
        outln!(
            "{} ({}): {}, median [min..max] of {} run(s); gain % = median vs {base}",
            w.name,
            w.about,
            w.unit,
            plan.runs
        );
        let mut header = vec!["clients".to_string(), base.to_string()];
        for v in &e.variants[1..] {
            header.push(v.name.to_string());
            header.push("gain %".into());
        }
        let mut rows = Vec::new();
        for &c in &plan.clients {
            let mut row = vec![c.to_string()];
            for (i, v) in e.variants.iter().enumerate() {
                match r.row(w.name, v.name, c) {
                    Some(s) => {
                        row.push(tps_cell(s.median, Some(s.min), Some(s.max)));
                        if i > 0 {
                            row.push(gain_cell(s.gain_pct));
                        }
                    }
                    None => row.extend(std::iter::repeat_n("-".to_string(), if i > 0 { 2 } else { 1 })),
                }
            }
            rows.push(row);
        }
        print_table(&header, &rows);

        outln!();
        outln!("{}: key counters per variant (median of runs)", w.name);
        let op = driver::op_name(w);
        let mut header = vec!["variant".to_string(), "clients".to_string()];
        header.extend(e.counters.iter().map(|c| format!("{}{}", c.label, c.per.suffix(op))));
        let mut rows = Vec::new();
        for v in e.variants {
            for &c in &plan.clients {
                if let Some(s) = r.row(w.name, v.name, c) {
                    let mut row = vec![v.name.to_string(), c.to_string()];
                    row.extend(s.counters.iter().map(|x| num(*x)));
                    rows.push(row);
                }
            }
        }
        print_table(&header, &rows);
    }
    print_published(r);
    outln!();
    outln!("{}", r.machine.line());
}

fn print_published(r: &ExperimentResult) {
    let plan = &r.plan;
    let e = plan.experiment;
    let published: Vec<_> =
        e.published.iter().filter(|p| plan.workloads.iter().any(|w| w.name == p.workload)).collect();
    outln!();
    outln!("the seed's published figures ({}): {}", e.seed, e.published_context);
    if published.is_empty() && e.published_notes.is_empty() {
        outln!("  (none for these workloads)");
    }
    if !published.is_empty() {
        let variants: Vec<&str> =
            e.variants.iter().map(|v| v.name).filter(|n| published.iter().any(|p| p.variant == *n)).collect();
        let base = e.baseline().name;
        let mut header = vec!["workload".to_string(), "series".to_string(), "clients".to_string()];
        for v in &variants {
            header.push(format!("{v} tps"));
            if *v != base {
                header.push("gain %".into());
            }
        }
        let mut keys: Vec<(&str, &str, u32)> = Vec::new();
        for p in &published {
            let k = (p.workload, p.series, p.clients);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut rows = Vec::new();
        for (w, s, c) in keys {
            let find = |v: &str| {
                published
                    .iter()
                    .find(|p| p.workload == w && p.series == s && p.clients == c && p.variant == v)
            };
            let base_tps = find(base).map(|p| p.tps);
            let mut row = vec![w.to_string(), s.to_string(), c.to_string()];
            for v in &variants {
                let p = find(v);
                row.push(p.map_or("-".into(), |p| tps_cell(p.tps, p.low, p.high)));
                if *v != base {
                    let g = match (p, base_tps) {
                        (Some(p), Some(b)) if b > 0.0 => Some((p.tps / b - 1.0) * 100.0),
                        _ => None,
                    };
                    row.push(gain_cell(g));
                }
            }
            rows.push(row);
        }
        print_table(&header, &rows);
    }
    for n in e.published_notes {
        outln!("  * {n}");
    }
}
