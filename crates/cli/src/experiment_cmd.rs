//! `lockstack experiment NAME`: the five seed experiments, each one command with the seed-style
//! table (clients, baseline, variants, gain %), the key counters per variant, the seed's own
//! figures, and CSV / JSON / SVG files; `lockstack experiment list` lists them.
//!
//! A sweep can be spread: `--list-points` prints the plan's points, `--point K --out DIR`
//! measures one into `DIR/NAME-point-K.json`, `experiment merge DIR` builds the files a
//! single-process run writes from those, and `--jobs N` (under `--machine`) does all three with
//! N child processes of this binary.

use lockstack_common::sync::Instant;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use clap::Args;
use lockstack_workloads::experiments::driver::{self, ExperimentResult, Options, Plan};
use lockstack_workloads::experiments::{self, Experiment, VM_CHECK_KEY, output, points};
use lockstack_workloads::settings;

use crate::Failure;
use crate::progress::Progress;
use crate::sim_cmd::{SimArgs, SimClock, SimTally};

/// Arguments of `lockstack experiment`.
#[derive(Args, Debug)]
pub(crate) struct ExperimentArgs {
    /// Experiment to run (pgxact, old-snapshot, flexlock, fastpath, vm-pin), or `list`, or
    /// `show` (with NAME: the seed thread, its machines and published points, the stored
    /// calibrations and the commands that reproduce each figure), or `merge` (with DIR), or
    /// `plot` (with DIR: redraw the plots of the NAME.json files in DIR into --out), or
    /// `validation` (with DIR: print docs/sim-validation.md from the sweeps in DIR's
    /// subdirectories, each an `--out` of one experiment on one machine).
    pub(crate) name: String,
    /// `experiment merge DIR`: the directory of NAME-point-K.json files to merge (the merged
    /// files go to --out, default DIR itself).
    #[arg(value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print the plan's points, one a line (K, run, workload, clients, variant), and exit.
    #[arg(long)]
    list_points: bool,
    /// Run only point K of the plan (0-based, as --list-points numbers it) and write it to
    /// --out as NAME-point-K.json, for `experiment merge`.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    point: Option<i64>,
    /// Run the points in N child processes of this binary, then merge them (under --machine
    /// only: native points running side by side would measure each other).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    jobs: Option<i64>,
    /// Client counts, comma-separated (worker threads for vm-pin); default: the experiment's
    /// (under --machine with one of the seed's machines, the counts the thread ran there).
    #[arg(long, value_name = "N,N,...")]
    clients: Option<String>,
    /// Seconds per point (fractions allowed); default: the experiment's (under --machine with
    /// one of the seed's machines, that machine's: virtual seconds sized for a 5-minute sweep).
    #[arg(long, allow_negative_numbers = true)]
    duration: Option<f64>,
    /// Runs per point (min / median / max are over these); default 3.
    #[arg(long, allow_negative_numbers = true)]
    runs: Option<i64>,
    /// pgbench scale factor (vm-pin: multiplies the table sizes); default 1 (under --machine
    /// with one of the seed's machines, that machine's: 10 for the write experiments).
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
    /// Only these workloads, comma-separated (e.g. select-only); default: all of the experiment's
    /// (under --machine with one of the seed's machines, those the thread measured there).
    #[arg(long, value_name = "NAME,...")]
    workload: Option<String>,
    /// Directory for NAME.csv, NAME-runs.csv, NAME-usl.csv, NAME.json, NAME.svg and (under
    /// --machine) NAME-time.svg [default: out/experiments/NAME].
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
    /// With --machine (one of the seed's machines) and PostgreSQL's costs: fit sim.postgres_ipc
    /// so that the baseline's simulated throughput at the thread's fewest published clients
    /// equals the thread's figure (only where that count is at most a third of the cores),
    /// print it and the rows to store in crates/workloads/calibrations.toml, and exit.
    #[arg(long)]
    calibrate: bool,
    /// With --machine: rerun the sweep with each assumed constant of the profile (its
    /// `assumed` list, `lockstack machine show P`) at 0.5x and at 2x, one at a time, and report
    /// each effect's band (lowest and highest variant/baseline ratio), the constant that moves
    /// it most, each curve's peak band and each median's band (drawn in NAME.svg; also in
    /// NAME.json and NAME-sensitivity.csv). Alone: every assumed constant; with a list
    /// (`owner_grace_ns,futex_wake_latency_ns`): those. Runs 1 + 2 x constants sweeps in child
    /// processes (--jobs N at once); restrict --clients to keep it short.
    #[arg(long, value_name = "CONSTANT,...", num_args = 0..=1, default_missing_value = "", require_equals = false)]
    sensitivity: Option<String>,
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

fn options(args: &ExperimentArgs, machine: Option<&str>) -> Result<Options, Failure> {
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
        machine: machine.map(str::to_string),
        simulation: crate::sim_cmd::experiment_simulation(),
    })
}

/// The largest result file `experiment validation` reads.
const MAX_RESULT_BYTES: u64 = 256 << 20;

/// `experiment validation DIR`: the markdown of docs/sim-validation.md, from every
/// subdirectory of DIR that holds an experiment's `NAME.json` of a `--machine` run.
fn validation(args: &ExperimentArgs) -> Result<(), Failure> {
    use lockstack_workloads::experiments::validation::{Medians, Ranges, RunRange, Sweep, render};
    let Some(dir) = &args.dir else {
        return Err(Failure::input(
            "experiment validation needs DIR, whose subdirectories are the --out of each seed's sweep",
        ));
    };
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| Failure::input(format!("{}: {e}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    subdirs.sort();
    let mut sweeps = Vec::new();
    let mut sweep_dirs: Vec<PathBuf> = Vec::new();
    for sub in &subdirs {
        for e in experiments::all() {
            let path = sub.join(format!("{}.json", e.name));
            if !path.is_file() {
                continue;
            }
            let text = lockstack_workloads::input::read_text_file(&path, MAX_RESULT_BYTES)
                .map_err(Failure::input)?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|err| {
                Failure::input(format!("{}: not an experiment result: {err}", path.display()))
            })?;
            let Some(machine) = v.pointer("/plan/machine").and_then(|m| m.as_str()) else {
                return Err(Failure::input(format!(
                    "{}: not a --machine run (plan.machine is missing)",
                    path.display()
                )));
            };
            let mut medians = Medians::new();
            let mut ranges = Ranges::new();
            for row in v.get("summary").and_then(|s| s.as_array()).into_iter().flatten() {
                let field = |k: &str| row.get(k);
                let (Some(w), Some(var), Some(c), Some(m)) = (
                    field("workload").and_then(|x| x.as_str()),
                    field("variant").and_then(|x| x.as_str()),
                    field("clients").and_then(|x| x.as_u64()),
                    field("median").and_then(|x| x.as_f64()),
                ) else {
                    return Err(Failure::input(format!(
                        "{}: a summary row lacks workload, variant, clients or median",
                        path.display()
                    )));
                };
                let key = (w.to_string(), var.to_string(), c as usize);
                // The runs' spread, when the row has it (a row of one run, or an older file
                // without it, has none).
                if let (Some(min), Some(max), Some(runs)) = (
                    field("min").and_then(|x| x.as_f64()),
                    field("max").and_then(|x| x.as_f64()),
                    field("runs").and_then(|x| x.as_u64()),
                ) {
                    ranges.insert(key.clone(), RunRange { min, max, runs });
                }
                medians.insert(key, m);
            }
            if let Some(first) =
                sweeps.iter().position(|s: &Sweep| s.experiment.name == e.name && s.machine == machine)
            {
                return Err(Failure::input(format!(
                    "{}: {} on {machine} again (also in {}): one sweep per experiment and machine",
                    sub.display(),
                    e.name,
                    sweep_dirs[first].display()
                )));
            }
            let costs = v.pointer("/plan/costs").and_then(|c| c.as_str()).unwrap_or("").to_string();
            let mut command = format!("lockstack experiment {} --machine {machine}", e.name);
            let list = |k: &str| v.pointer(k).and_then(|x| x.as_array()).cloned().unwrap_or_default();
            let clients: Vec<String> = list("/plan/clients").iter().map(|c| c.to_string()).collect();
            command += &format!(" --clients {}", clients.join(","));
            if let Some(r) = v.pointer("/plan/runs").and_then(|x| x.as_u64()) {
                command += &format!(" --runs {r}");
            }
            if let Some(d) = v.pointer("/plan/duration_s").and_then(|x| x.as_f64()) {
                command += &format!(" --duration {d}");
            }
            for a in list("/plan/set") {
                if let Some(a) = a.as_str() {
                    command += &format!(" --set {a}");
                }
            }
            if costs == "own" {
                command += " --costs own";
            }
            sweep_dirs.push(sub.clone());
            sweeps.push(Sweep {
                experiment: e,
                machine: machine.to_string(),
                medians,
                ranges,
                calibrated_to: v.get("calibrated_to").and_then(|c| c.as_str()).map(str::to_string),
                costs,
                command,
            });
        }
    }
    if sweeps.is_empty() {
        return Err(Failure::input(format!(
            "{}: no subdirectory holds an experiment's result (NAME.json of `experiment NAME --machine P --out SUBDIR`)",
            dir.display()
        )));
    }
    outln!("{}", render(&sweeps, &format!("lockstack experiment validation {}", dir.display())).trim_end());
    Ok(())
}

/// `--calibrate`: solves and prints each workload's calibration.
fn calibrate(exp: &'static Experiment, opts: &Options, machine: Option<&str>) -> Result<(), Failure> {
    let Some(machine) = machine else {
        let names: Vec<&str> = exp.machines.iter().map(|m| m.profile).collect();
        return Err(Failure::input(format!(
            "--calibrate needs --machine PROFILE, one of {}'s machines: {}",
            exp.name,
            names.join(", ")
        )));
    };
    let Some((cores, profile_ipc)) =
        opts.simulation.as_ref().and_then(|s| s.postgres_ipc.map(|ipc| (s.machine.cores, ipc)))
    else {
        return Err(Failure::input(
            "--calibrate fits sim.postgres_ipc, the rate of PostgreSQL's costs: run it with --costs postgres (the default)",
        ));
    };
    let (solved, skipped) =
        lockstack_workloads::experiments::calibrate::solve(exp, opts, machine, cores, profile_ipc)
            .map_err(Failure::input)?;
    for line in &skipped {
        outln!("{line}");
    }
    for s in &solved {
        let c = &s.calibrated;
        outln!(
            "{}: calibrated to \"{}\" at {} client{}, {:.1} tps: sim.postgres_ipc = {:.3} (at the profile's {:.1} tps; check run {:.1} tps, {:+.2}%)",
            c.workload,
            c.series,
            c.clients,
            if c.clients == 1 { "" } else { "s" },
            c.tps,
            c.postgres_ipc,
            s.tps_without,
            s.tps_check,
            (s.tps_check / c.tps - 1.0) * 100.0
        );
    }
    outln!(
        "rows to store in crates/workloads/calibrations.toml (replacing {}'s rows for this machine; the file is built into lockstack, so rebuild to apply them):",
        exp.name
    );
    for s in &solved {
        outln!("{}", s.calibrated.toml());
    }
    Ok(())
}

pub(crate) fn run(args: ExperimentArgs, sim: &SimArgs) -> Result<(), Failure> {
    let machine = sim.machine.as_deref();
    if args.set.iter().any(|s| s == "help") {
        print_knobs();
        return Ok(());
    }
    crate::sim_cmd::refuse_sim_knobs_natively(&args.set)?;
    if args.name == "list" {
        print_list();
        return Ok(());
    }
    if args.name == "show" {
        return show(&args);
    }
    if args.name == "merge" {
        return merge(&args, sim);
    }
    if args.name == "plot" {
        return crate::experiment_plot::run(&args, args.dir.as_deref(), args.out.as_deref(), sim);
    }
    if args.name == "validation" {
        return validation(&args);
    }
    if let Some(d) = &args.dir {
        return Err(Failure::input(format!(
            "unexpected argument \"{}\": only 'experiment show NAME', 'experiment merge DIR' and 'experiment validation DIR' take a second argument",
            d.display()
        )));
    }
    let exp = experiments::find(&args.name).map_err(Failure::input)?;
    if args.calibrate {
        if args.list_points || args.point.is_some() || args.jobs.is_some() || args.sensitivity.is_some() {
            return Err(Failure::input(
                "--calibrate runs its own points: not with --list-points, --point, --jobs or --sensitivity",
            ));
        }
        return calibrate(exp, &options(&args, machine)?, machine);
    }
    if args.sensitivity.is_some() {
        if machine.is_none() {
            return Err(Failure::input(
                "--sensitivity perturbs the simulated machine's constants: it needs --machine PROFILE",
            ));
        }
        if args.list_points || args.point.is_some() || args.smoke || sim.sim_save_segments.is_some() {
            return Err(Failure::input(
                "--sensitivity runs its own sweeps: not with --list-points, --point, --smoke or --sim-save-segments",
            ));
        }
    }
    let plan = Plan::new(exp, &options(&args, machine)?).map_err(Failure::input)?;
    // Every variant's resolved configuration (preset, --set, the variant's own assignments).
    for v in exp.variants {
        let clients = plan.clients.first().copied().unwrap_or(1);
        let (cfg, _) = plan.config(v, clients).map_err(Failure::input)?;
        crate::sim_cmd::refuse(lockstack_engine::simcheck::unsupported_under_simulation(&cfg))?;
    }
    if args.list_points {
        if args.point.is_some() || args.jobs.is_some() {
            return Err(Failure::input(
                "--list-points prints the plan and exits: not with --point or --jobs",
            ));
        }
        for s in plan.point_specs() {
            outln!(
                "{} run={} workload={} clients={} variant={}",
                s.index,
                s.run,
                s.workload.name,
                s.clients,
                s.variant.name
            );
        }
        return Ok(());
    }
    if let Some(k) = args.point {
        return run_point(&args, sim, &plan, k);
    }
    let jobs = match args.jobs {
        None => 1,
        Some(n) if n < 1 => return Err(Failure::input(format!("--jobs must be at least 1, got {n}"))),
        Some(n) => usize::try_from(n).map_err(|_| Failure::input(format!("--jobs: {n} is too large")))?,
    };
    if jobs > 1 && sim.machine.is_none() {
        return Err(Failure::input(format!(
            "--jobs {jobs} needs --machine PROFILE: natively, points running side by side would measure each other"
        )));
    }
    if jobs > 1 && sim.sim_save_segments.is_some() {
        return Err(Failure::input(format!(
            "--jobs {jobs} with --sim-save-segments: each child would measure its own table; save one with --jobs 1"
        )));
    }
    let out = args.out.clone().unwrap_or_else(|| Path::new("out/experiments").join(exp.name));
    if let Some(list) = &args.sensitivity {
        return sensitivity(&args, sim, &plan, list, jobs, &out);
    }
    std::fs::create_dir_all(&out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    crate::prepare_json(args.json.as_deref())?;

    let mut progress = Progress::new(format!("experiment {}", exp.name), plan.points());
    let t0 = Instant::now();
    let result = if jobs > 1 {
        let r = run_children(&plan, sim, jobs, &out, &mut progress);
        progress.finish();
        let (result, tally) = r?;
        #[cfg(feature = "sim")]
        if let Some(t) = tally {
            crate::sim_cmd::adopt(t);
        }
        #[cfg(not(feature = "sim"))]
        let _ = tally;
        result
    } else {
        let result = driver::run(&plan, &mut |s| {
            if s.finished.is_some() {
                progress.set_done(s.done);
            } else {
                progress.set_message(format!(
                    "{} {} c={} run {}",
                    s.workload,
                    s.variant,
                    s.clients,
                    s.run + 1
                ));
            }
        });
        progress.finish();
        let mut result = result.map_err(Failure::run)?;
        result.machine = machine_note(&plan);
        result
    };
    let wall = t0.elapsed().as_secs_f64();
    finish_run(&args, &result, &out, wall)
}

/// The machine note of `plan`'s largest client count: the simulated machine's under
/// `--machine`, this host's otherwise.
fn machine_note(plan: &Plan) -> lockstack_workloads::report::MachineNote {
    crate::sim_cmd::machine_note(plan.clients.iter().copied().max().unwrap_or(1))
}

/// The report, the files, `--json`, the smoke check and the consistency verdict of a result.
fn finish_run(
    args: &ExperimentArgs,
    result: &ExperimentResult,
    out: &Path,
    wall: f64,
) -> Result<(), Failure> {
    let exp = result.plan.experiment;
    print_report(result, wall);
    if let Some(s) = &result.sensitivity {
        print_sensitivity(s);
    }
    let written = output::write_all(result, out).map_err(Failure::run)?;
    crate::write_json(args.json.as_deref(), result)?;
    outln!(
        "wrote {}, {}, {}, {}, {}",
        written.csv.display(),
        written.runs_csv.display(),
        written.usl_csv.display(),
        written.json.display(),
        written.svg.display()
    );
    match &written.time_svg {
        Some(p) => outln!("wrote {} (where the simulated backends' time went)", p.display()),
        None => outln!("not written: {}-time.svg (where the time went needs --machine)", exp.name),
    }
    if let Some(p) = &written.sensitivity_csv {
        outln!("wrote {} (the bands over the assumed constants)", p.display());
    }
    if args.smoke {
        let names: Vec<&str> = exp.variants.iter().map(|v| v.name).collect();
        let v = output::verify(out, exp.name, &names, result.points.len(), result.summary.len())
            .map_err(|e| Failure::run(format!("smoke check: {e}")))?;
        outln!(
            "smoke check: ok ({} points, {} summary rows, {} SVG lines, {} USL rows, {} timed points)",
            v.points,
            v.summary_rows,
            v.svg_lines,
            v.usl_rows,
            v.timed_points
        );
    }
    consistency(result.points.iter())
}

/// Exit 2 naming the first point whose consistency check failed.
fn consistency<'a>(mut pts: impl Iterator<Item = &'a driver::Point>) -> Result<(), Failure> {
    if let Some(p) = pts.find(|p| !p.ok) {
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

/// What must agree between the point files of one sweep besides the plan: the simulated
/// machine and its clock (empty natively).
fn context(sim: &SimArgs) -> BTreeMap<String, String> {
    let mut c = BTreeMap::new();
    if let Some(m) = &sim.machine {
        c.insert("machine".to_string(), m.clone());
        let clock = match sim.sim_clock {
            SimClock::Deterministic => "deterministic",
            SimClock::Measured => "measured",
        };
        c.insert("sim_clock".to_string(), clock.to_string());
        if let Some(p) = &sim.sim_segments {
            c.insert("sim_segments".to_string(), p.display().to_string());
        }
        if !sim.machine_set.is_empty() {
            c.insert("machine_set".to_string(), sim.machine_set.join(","));
        }
    }
    c
}

/// `--point K --out DIR`: measures point K and writes its file.
fn run_point(args: &ExperimentArgs, sim: &SimArgs, plan: &Plan, k: i64) -> Result<(), Failure> {
    if args.jobs.is_some() {
        return Err(Failure::input("--point K runs one point in this process: not with --jobs"));
    }
    if args.smoke || args.json.is_some() {
        return Err(Failure::input(
            "--point K writes its point file only: not with --smoke or --json (give them to 'experiment merge')",
        ));
    }
    let Some(out) = &args.out else {
        return Err(Failure::input(format!(
            "--point {k} needs --out DIR (where {} goes)",
            points::file_name(plan.experiment.name, k.max(0) as usize)
        )));
    };
    let total = plan.points();
    let spec = usize::try_from(k).ok().and_then(|k| plan.point_specs().get(k).copied()).ok_or_else(|| {
        Failure::input(format!("--point {k}: the plan has {total} points (0..={})", total.saturating_sub(1)))
    })?;
    std::fs::create_dir_all(out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    let mut file = points::run_one(plan, &spec, context(sim), machine_note(plan)).map_err(Failure::run)?;
    file.simulated = simulated_tally()?;
    let path = points::write(out, &file).map_err(Failure::output)?;
    let p = &file.point;
    outln!(
        "point {k} of {total}: run {} {} c={} {}: {:.0} {}; wrote {}",
        p.run,
        p.workload,
        p.clients,
        p.variant,
        p.throughput,
        spec.workload.unit,
        path.display()
    );
    consistency(std::iter::once(p))
}

/// This process's simulated phases as JSON, under `--machine`; `None` natively.
fn simulated_tally() -> Result<Option<serde_json::Value>, Failure> {
    #[cfg(feature = "sim")]
    {
        crate::sim_cmd::tally_if_simulating()
            .map(serde_json::to_value)
            .transpose()
            .map_err(|e| Failure::run(format!("encoding the simulated machine's tally: {e}")))
    }
    #[cfg(not(feature = "sim"))]
    {
        Ok(None)
    }
}

/// The simulated machine's phases of every merged point, in point order (`None` for a native
/// sweep).
fn merged_tally(m: &points::Merged) -> Result<Option<SimTally>, String> {
    let mut tally: Option<SimTally> = None;
    for (v, path) in m.simulated.iter().zip(&m.files) {
        let Some(v) = v else { continue };
        let t: SimTally = serde_json::from_value(v.clone())
            .map_err(|e| format!("{}: simulated: not a simulated machine's tally: {e}", path.display()))?;
        match &mut tally {
            None => tally = Some(t),
            Some(all) => all.phases.extend(t.phases),
        }
    }
    Ok(tally)
}

/// The arguments of the child that measures point `k` of `plan` into `dir`: every option of
/// the plan spelled out, and the simulation flags.
fn child_args(plan: &Plan, sim: &SimArgs, k: usize, dir: &Path) -> Vec<OsString> {
    let id = points::PlanId::of(plan);
    let list = |v: &[usize]| v.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let mut a: Vec<OsString> = Vec::new();
    let mut push = |s: &str| a.push(s.into());
    push("experiment");
    push(&id.experiment);
    push("--clients");
    push(&list(&id.clients));
    push("--duration");
    push(&id.duration_s.to_string());
    push("--runs");
    push(&id.runs.to_string());
    push("--scale");
    push(&id.scale.to_string());
    push("--preset");
    push(&id.preset);
    push("--workload");
    push(&id.workloads.join(","));
    push("--random-seed");
    push(&id.seed.to_string());
    for s in &id.set {
        push("--set");
        push(s);
    }
    for (key, value) in context(sim) {
        push(&format!("--{}", key.replace('_', "-")));
        push(&value);
    }
    push("--point");
    push(&k.to_string());
    a.push("--out".into());
    a.push(dir.as_os_str().to_owned());
    a
}

/// `--jobs N`: runs every point of `plan` in a child process (at most `jobs` at once) into a
/// temporary directory under `out`, then merges them. A child that fails ends the run: the
/// others are killed and the child's last stderr line is the error (exit 2).
fn run_children(
    plan: &Plan,
    sim: &SimArgs,
    jobs: usize,
    out: &Path,
    progress: &mut Progress,
) -> Result<(ExperimentResult, Option<SimTally>), Failure> {
    let tmp = out.join(format!(".points-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).map_err(|e| Failure::input(format!("--out {}: {e}", tmp.display())))?;
    run_sweeps(plan, &[(sim.clone(), tmp.clone())], jobs, progress)?;
    let merged = points::merge(&tmp).map_err(|e| Failure::run(format!("--jobs: {e}")))?;
    let tally = merged_tally(&merged).map_err(|e| Failure::run(format!("--jobs: {e}")))?;
    std::fs::remove_dir_all(&tmp)
        .map_err(|e| Failure::run(format!("--jobs: removing {}: {e}", tmp.display())))?;
    Ok((merged.result, tally))
}

/// Runs every point of `plan` once per sweep of `sweeps` (the simulation flags it runs with,
/// the directory its point files go to), each point in a child process of this binary, at
/// most `jobs` at once, in sweep order. A child that fails ends the run: the others are killed
/// and the child's last stderr line is the error (exit 2).
fn run_sweeps(
    plan: &Plan,
    sweeps: &[(SimArgs, PathBuf)],
    jobs: usize,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let exe =
        std::env::current_exe().map_err(|e| Failure::run(format!("--jobs: this binary's path: {e}")))?;
    let specs = plan.point_specs();
    let tasks: Vec<(usize, usize)> =
        (0..sweeps.len()).flat_map(|s| (0..specs.len()).map(move |k| (s, k))).collect();
    let mut running: Vec<(usize, Child, PathBuf)> = Vec::new();
    let mut next = 0;
    let mut done = 0;
    let fail = |running: &mut Vec<(usize, Child, PathBuf)>, msg: String| {
        for (_, c, _) in running.iter_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        Failure::run(msg)
    };
    while done < tasks.len() {
        while running.len() < jobs && next < tasks.len() {
            let (s, k) = tasks[next];
            let (sim, dir) = &sweeps[s];
            let err_path = dir.join(format!("point-{k}.stderr"));
            let err = std::fs::File::create(&err_path)
                .map_err(|e| fail(&mut running, format!("{}: {e}", err_path.display())))?;
            let child = Command::new(&exe)
                .args(child_args(plan, sim, k, dir))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(err)
                .env(crate::progress::QUIET_ENV, "1")
                .spawn()
                .map_err(|e| fail(&mut running, format!("--jobs: could not run {}: {e}", exe.display())))?;
            running.push((next, child, err_path));
            next += 1;
        }
        let mut finished = false;
        let mut i = 0;
        while i < running.len() {
            match running[i].1.try_wait() {
                Ok(None) => i += 1,
                Ok(Some(status)) => {
                    let (t, _, err_path) = running.swap_remove(i);
                    finished = true;
                    if !status.success() {
                        let text = std::fs::read_to_string(&err_path).unwrap_or_default();
                        let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
                        let line = line.strip_prefix("lockstack: ").unwrap_or(line);
                        let (sw, k) = tasks[t];
                        let sp = &specs[k];
                        let how = status
                            .code()
                            .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
                        let with = match sweeps[sw].0.machine_set.as_slice() {
                            [] => String::new(),
                            set => format!(" --machine-set {}", set.join(",")),
                        };
                        return Err(fail(
                            &mut running,
                            format!(
                                "--jobs: point {k} (run {} {} c={} {}{with}) failed ({how}): {line}",
                                sp.run, sp.workload.name, sp.clients, sp.variant.name
                            ),
                        ));
                    }
                    done += 1;
                    progress.set_done(done);
                }
                Err(e) => {
                    let msg = format!("--jobs: waiting for point {}: {e}", running[i].0);
                    return Err(fail(&mut running, msg));
                }
            }
        }
        if !finished {
            lockstack_common::sync::time::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(())
}

/// Constants to perturb: (key, the profile's value).
type Constants = Vec<(String, f64)>;

/// The constants `--sensitivity LIST` names (empty: the profile's whole `assumed` list), as
/// (key, value in `profile`), and the ones held with the reason. Only assumed constants are
/// accepted.
///
/// # Errors
/// One line naming an unknown or cited constant and listing the valid ones.
fn sensitivity_constants(
    profile: &lockstack_sim::MachineProfile,
    list: &str,
    plan: &Plan,
    sim: &SimArgs,
) -> Result<(Constants, Vec<String>), Failure> {
    let valid = || profile.assumed.join(", ");
    if profile.assumed.is_empty() {
        return Err(Failure::input(format!(
            "--sensitivity: machine profile {} lists no assumed constants (its `assumed` list is empty)",
            profile.name
        )));
    }
    let keys: Vec<String> = if list.trim().is_empty() {
        profile.assumed.clone()
    } else {
        let mut keys = Vec::new();
        for name in list.split(',').map(str::trim) {
            let key = profile
                .constant_key(name)
                .ok()
                .filter(|k| profile.assumed.contains(k))
                .ok_or_else(|| {
                    Failure::input(format!(
                        "--sensitivity: {name:?} is not an assumed constant of machine profile {}; they are: {}",
                        profile.name,
                        valid()
                    ))
                })?;
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    };
    let set_knob =
        |knob: &str| plan.set.iter().any(|s| s.split_once('=').is_some_and(|(k, _)| k.trim() == knob));
    let own_costs = matches!(sim.costs, Some(crate::sim_cmd::SimCosts::Own));
    let calibrated_all = !plan.calibrated.is_empty()
        && plan.workloads.iter().all(|w| plan.calibrated.iter().any(|c| c.workload == w.name));
    let mut constants = Vec::new();
    let mut held = Vec::new();
    for key in keys {
        let why = match key.as_str() {
            "costs.postgres_ipc" if own_costs => {
                Some("--costs own does not charge PostgreSQL's instructions")
            }
            "costs.postgres_ipc" if set_knob("sim.postgres_ipc") => {
                Some("--set sim.postgres_ipc replaces it")
            }
            "costs.postgres_ipc" if calibrated_all => {
                Some("every workload's sim.postgres_ipc is a stored calibration, which replaces it")
            }
            "pgbench.client_cpu_us" if set_knob("sim.client_cpu_us") => {
                Some("--set sim.client_cpu_us replaces it")
            }
            "pgbench.client_rtt_us" if set_knob("sim.client_rtt_us") => {
                Some("--set sim.client_rtt_us replaces it")
            }
            _ => None,
        };
        match why {
            Some(w) => held.push(format!("{key}: {w}")),
            None => {
                let v = profile.constant(&key).expect("constant_key found it");
                constants.push((key, v));
            }
        }
    }
    Ok((constants, held))
}

/// `--sensitivity`: the base sweep and one sweep per perturbation, in child processes, then the
/// base result with the bands, reported and written as a plain run's.
fn sensitivity(
    args: &ExperimentArgs,
    sim: &SimArgs,
    plan: &Plan,
    list: &str,
    jobs: usize,
    out: &Path,
) -> Result<(), Failure> {
    use lockstack_workloads::experiments::sensitivity::{Perturbation, Sensitivity};
    use lockstack_workloads::experiments::validation::Medians;
    let profile = crate::sim_cmd::machine_profile(sim)?;
    let (constants, held) = sensitivity_constants(&profile, list, plan, sim)?;
    for h in &held {
        outln!("sensitivity: held {h}");
    }
    if constants.is_empty() {
        return Err(Failure::input("--sensitivity: no constant left to perturb (each one named is held)"));
    }
    std::fs::create_dir_all(out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    crate::prepare_json(args.json.as_deref())?;
    let perturbations = Perturbation::all(&constants);
    let tmp = out.join(format!(".sensitivity-{}", std::process::id()));
    let mut sweeps: Vec<(SimArgs, PathBuf)> = vec![(sim.clone(), tmp.join("base"))];
    for (i, p) in perturbations.iter().enumerate() {
        let mut s = sim.clone();
        s.machine_set.push(p.machine_set());
        sweeps.push((s, tmp.join(format!("p{i}"))));
    }
    for (_, d) in &sweeps {
        std::fs::create_dir_all(d).map_err(|e| Failure::input(format!("--out {}: {e}", d.display())))?;
    }
    let total = sweeps.len() * plan.points();
    outln!(
        "sensitivity: {} constants x {} factors + the base = {} sweeps of {} points = {total} points, {jobs} at once",
        constants.len(),
        lockstack_workloads::experiments::sensitivity::FACTORS.len(),
        sweeps.len(),
        plan.points()
    );
    let mut progress = Progress::new(format!("experiment {} --sensitivity", plan.experiment.name), total);
    let t0 = Instant::now();
    let r = run_sweeps(plan, &sweeps, jobs, &mut progress);
    progress.finish();
    r?;
    let medians = |r: &ExperimentResult| -> Medians {
        r.summary.iter().map(|s| ((s.workload.clone(), s.variant.clone(), s.clients), s.median)).collect()
    };
    let mut base: Option<(ExperimentResult, Option<SimTally>)> = None;
    let mut runs: Vec<(Perturbation, Medians)> = Vec::new();
    for (i, (_, dir)) in sweeps.iter().enumerate() {
        let merged = points::merge(dir).map_err(|e| Failure::run(format!("--sensitivity: {e}")))?;
        if i == 0 {
            let tally = merged_tally(&merged).map_err(|e| Failure::run(format!("--sensitivity: {e}")))?;
            base = Some((merged.result, tally));
        } else {
            if let Some(p) = merged.result.points.iter().find(|p| !p.ok) {
                return Err(Failure::run(format!(
                    "consistency check failed under --machine-set {}: {} {} c={} run {}: {}",
                    perturbations[i - 1].machine_set(),
                    p.workload,
                    p.variant,
                    p.clients,
                    p.run + 1,
                    p.error.as_deref().unwrap_or("?")
                )));
            }
            runs.push((perturbations[i - 1].clone(), medians(&merged.result)));
        }
    }
    std::fs::remove_dir_all(&tmp)
        .map_err(|e| Failure::run(format!("--sensitivity: removing {}: {e}", tmp.display())))?;
    let (mut result, tally) = base.expect("the base sweep is the first");
    #[cfg(feature = "sim")]
    if let Some(t) = tally {
        crate::sim_cmd::adopt(t);
    }
    #[cfg(not(feature = "sim"))]
    let _ = tally;
    let base_medians = medians(&result);
    result.sensitivity =
        Some(Sensitivity::analyse(plan.experiment, &profile.name, &base_medians, &runs, held));
    finish_run(args, &result, out, t0.elapsed().as_secs_f64())
}

/// The sensitivity tables: each effect's band and the constant that moves it most, each
/// curve's peak band.
fn print_sensitivity(s: &lockstack_workloads::experiments::sensitivity::Sensitivity) {
    outln!();
    outln!(
        "sensitivity on {}: {} perturbations ({}), each one assumed constant at 0.5x or 2x",
        s.machine,
        s.perturbations.len(),
        s.perturbations.iter().map(|p| p.label()).collect::<Vec<_>>().join(", ")
    );
    for h in &s.held {
        outln!("  held: {h}");
    }
    let header: Vec<String> = [
        "workload",
        "series",
        "variant / baseline",
        "clients",
        "published",
        "base",
        "band [lo, hi]",
        "lo by",
        "hi by",
        "moved most by",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let rows: Vec<Vec<String>> = s
        .effects
        .iter()
        .map(|e| {
            vec![
                e.workload.clone(),
                e.series.clone(),
                format!("{} / {}", e.variant, e.baseline),
                e.clients.to_string(),
                format!("{:.3}", e.published),
                format!("{:.3}", e.base),
                format!("[{:.3}, {:.3}]", e.lo, e.hi),
                e.lo_by.clone(),
                e.hi_by.clone(),
                if e.most_sensitive == "-" {
                    "-".to_string()
                } else {
                    format!("{} ({:+.3})", e.most_sensitive, e.most_sensitive_shift)
                },
            ]
        })
        .collect();
    if rows.is_empty() {
        outln!("  no published effect at the client counts run");
    } else {
        print_table(&header, &rows);
    }
    let header: Vec<String> = ["workload", "variant", "peak (clients)", "band [lo, hi]", "moved by"]
        .iter()
        .map(|h| h.to_string())
        .collect();
    let rows: Vec<Vec<String>> = s
        .peaks
        .iter()
        .map(|p| {
            vec![
                p.workload.clone(),
                p.variant.clone(),
                p.base.to_string(),
                format!("[{}, {}]", p.lo, p.hi),
                if p.moved_by.is_empty() { "-".to_string() } else { p.moved_by.join(", ") },
            ]
        })
        .collect();
    print_table(&header, &rows);
}

/// `experiment merge DIR`: the files, report and (when the points ran under `--machine`) the
/// simulated machine's section of the points in DIR.
fn merge(args: &ExperimentArgs, sim: &SimArgs) -> Result<(), Failure> {
    let Some(dir) = &args.dir else {
        return Err(Failure::input("experiment merge needs DIR, the directory of NAME-point-K.json files"));
    };
    let plan_flags = [
        (args.clients.is_some(), "--clients"),
        (args.duration.is_some(), "--duration"),
        (args.runs.is_some(), "--runs"),
        (args.scale.is_some(), "--scale"),
        (args.preset.is_some(), "--preset"),
        (!args.set.is_empty(), "--set"),
        (args.workload.is_some(), "--workload"),
        (args.random_seed != 0, "--random-seed"),
        (args.list_points, "--list-points"),
        (args.point.is_some(), "--point"),
        (args.jobs.is_some(), "--jobs"),
        (sim.machine.is_some(), "--machine"),
        (!sim.machine_set.is_empty(), "--machine-set"),
        (args.sensitivity.is_some(), "--sensitivity"),
    ];
    if let Some((_, flag)) = plan_flags.iter().find(|(given, _)| *given) {
        return Err(Failure::input(format!(
            "experiment merge takes the plan and machine from the point files: {flag} is not accepted"
        )));
    }
    let t0 = Instant::now();
    let merged = points::merge(dir).map_err(Failure::input)?;
    let tally = merged_tally(&merged).map_err(Failure::input)?;
    let out = args.out.clone().unwrap_or_else(|| dir.clone());
    std::fs::create_dir_all(&out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    crate::prepare_json(args.json.as_deref())?;
    outln!("merged {} point files from {}", merged.files.len(), dir.display());
    let verdict = finish_run(args, &merged.result, &out, t0.elapsed().as_secs_f64());
    if let Some(t) = tally {
        let s = crate::sim_cmd::section(&t);
        crate::sim_cmd::print_section("experiment", &s);
        if let Some(path) = &args.json {
            crate::sim_cmd::add_to_json(path, &s)?;
        }
    }
    verdict
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

/// `experiment show NAME`: the seed thread, its machines and published points (each with the
/// series it comes from), the stored calibrations (crates/workloads/calibrations.toml), and the
/// commands that reproduce each figure.
///
/// # Errors
/// No NAME, or an unknown one: one line listing the valid names, exit code 1.
fn show(args: &ExperimentArgs) -> Result<(), Failure> {
    let names: Vec<&str> = experiments::all().iter().map(|e| e.name).collect();
    let Some(name) = args.dir.as_ref().map(|d| d.to_string_lossy().into_owned()) else {
        return Err(Failure::input(format!("experiment show needs NAME (valid: {})", names.join(", "))));
    };
    let e = experiments::find(&name).map_err(Failure::input)?;
    for line in show_text(e) {
        outln!("{line}");
    }
    Ok(())
}

/// The lines `experiment show` prints for `e`.
fn show_text(e: &Experiment) -> Vec<String> {
    let mut out = Vec::new();
    let tps = |v: f64| format!("{v:.0}");
    out.push(format!("experiment {}: {}", e.name, e.title));
    out.push(format!("thread:   \"{}\"", e.thread.title));
    out.push(format!("authors:  {}", e.thread.authors));
    out.push(format!("date:     {}", e.thread.date));
    out.push(format!("seed:     {} (the thread's figures, transcribed: docs/experiments.md)", e.seed));
    out.push(format!("context:  {}", e.published_context));
    let variants: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
    let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
    out.push(format!(
        "variants: {} (baseline first); workloads: {}",
        variants.join(", "),
        workloads.join(", ")
    ));
    out.push(String::new());
    out.push("machines (simulated profiles the thread's figures come from):".to_string());
    if e.machines.is_empty() {
        out.push("  none: the thread gives no machine a profile stands for".to_string());
    }
    for m in e.machines {
        let clients: Vec<String> = m.clients.iter().map(usize::to_string).collect();
        let series = if m.series.is_empty() {
            "none (the thread's notes only)".to_string()
        } else {
            m.series.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
        };
        out.push(format!(
            "  {}: series {series}; clients {}; {} virtual s per point, scale {}",
            m.profile,
            clients.join(","),
            m.duration_s,
            m.scale
        ));
    }
    out.push(String::new());
    out.push(format!(
        "published points ({}; source: the thread above, series as it names them):",
        e.published.len()
    ));
    if e.published.is_empty() {
        out.push("  none: the thread gives no throughput figures".to_string());
    }
    let mut series: Vec<&str> = Vec::new();
    for p in e.published {
        if !series.contains(&p.series) {
            series.push(p.series);
        }
    }
    for sr in series {
        let machine = e.machines.iter().find(|m| m.series.contains(&sr)).map_or("no profile", |m| m.profile);
        out.push(format!("  {sr} (on {machine}):"));
        for p in e.published.iter().filter(|p| p.series == sr) {
            let range = match (p.low, p.high) {
                (Some(l), Some(h)) => format!(" (runs {}..{})", tps(l), tps(h)),
                _ => String::new(),
            };
            out.push(format!(
                "    {:<14} {:<20} {:>4} clients  {:>9} tps{range}",
                p.workload,
                p.variant,
                p.clients,
                tps(p.tps)
            ));
        }
    }
    for n in e.published_notes {
        out.push(format!("  note: {n}"));
    }
    out.push(String::new());
    out.push("stored calibrations (crates/workloads/calibrations.toml; --costs postgres):".to_string());
    let cals: Vec<&experiments::Calibrated> = e.calibrations().collect();
    if cals.is_empty() {
        out.push("  none: every simulated point is predicted from the profile's postgres_ipc".to_string());
    }
    for c in cals {
        out.push(format!("  {}", c.line()));
    }
    out.push(String::new());
    out.push("to reproduce (each command writes its figures to its --out):".to_string());
    let mut step = |what: String, command: String| {
        out.push(format!("  {what}:"));
        out.push(format!("    {command}"));
    };
    let name = e.name;
    step(
        format!("on this host: {name}.svg, {name}.csv and the tables"),
        format!("lockstack experiment {name} --out out/experiments/{name}"),
    );
    for m in e.machines {
        let p = m.profile;
        step(
            format!(
                "on the simulated {p}: {name}.svg, {name}-time.svg and the tables (what `just validation` runs)"
            ),
            format!("lockstack experiment {name} --machine {p} --jobs 2 --out out/validation/{name}-{p}"),
        );
        if e.calibrations().any(|c| c.machine == p) {
            step(
                format!("the stored calibration on {p} (prints the rows above)"),
                format!("lockstack experiment {name} --machine {p} --calibrate"),
            );
        }
    }
    if !e.machines.is_empty() {
        step(
            "docs/sim-validation.md, from every seed's sweep in out/validation".to_string(),
            "lockstack experiment validation out/validation".to_string(),
        );
    }
    out
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
    if let Some(m) = &plan.machine {
        if plan.calibrated.is_empty() {
            outln!(
                "simulated on {m}, not calibrated (PostgreSQL's costs at the profile's postgres_ipc, or --costs own): every point is predicted"
            );
        }
        for c in &plan.calibrated {
            outln!("calibrated to: {}", c.line());
        }
        if !plan.calibrated.is_empty() {
            let lines: Vec<String> =
                plan.calibrated.iter().map(|c| format!("calibrated to: {}", c.line())).collect();
            crate::sim_cmd::note_calibration(lines.join("; "));
        }
    }
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
        let fitted = plan.calibrated.iter().find(|k| k.workload == w.name).map(|k| k.clients as usize);
        let mut rows = Vec::new();
        for &c in &plan.clients {
            // The baseline's cell at the calibrated client count is the one fitted point.
            let mut row = vec![if fitted == Some(c) { format!("{c} (fitted)") } else { c.to_string() }];
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
        if let Some(c) = fitted {
            outln!(
                "(fitted): {base} at {c} client{} is the point sim.postgres_ipc was fitted to; every other cell is predicted",
                if c == 1 { "" } else { "s" }
            );
        }

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
    print_usl(r);
    print_published(r);
    outln!();
    outln!("{}", r.machine.line());
    if r.simulated.is_some() {
        outln!("machine: {}", output::machine_title(r));
    }
    if let Some(c) = &r.calibrated_to {
        outln!("calibrated to: {c}");
    }
}

/// The Universal Scalability Law fits (Gunther, "Guerrilla Capacity Planning", 2007).
fn print_usl(r: &ExperimentResult) {
    outln!();
    outln!(
        "USL fit per curve, X(N) = lambda N / (1 + alpha (N-1) + beta N (N-1)), least squares on the medians \
         (Gunther, \"Guerrilla Capacity Planning\", 2007); N* = sqrt((1-alpha)/beta), the peak:"
    );
    let header: Vec<String> =
        ["workload", "variant", "lambda", "alpha", "beta", "N*", "X(N*)", "R^2"].map(String::from).to_vec();
    let rows: Vec<Vec<String>> = r
        .usl
        .iter()
        .map(|u| {
            let mut row = vec![u.workload.clone(), u.variant.clone()];
            match (&u.fit, &u.no_fit) {
                (Some(f), _) => row.extend([
                    format!("{:.0}", f.lambda),
                    format!("{:.4}", f.alpha),
                    format!("{:.2e}", f.beta),
                    f.peak_clients.map_or("none".into(), |n| format!("{n:.1}")),
                    f.peak_throughput.map_or("-".into(), |x| format!("{x:.0}")),
                    format!("{:.3}", f.r_squared),
                ]),
                (None, reason) => {
                    row.push(reason.clone().unwrap_or_else(|| "no fit".into()));
                    row.extend(std::iter::repeat_n(String::new(), 5));
                }
            }
            row
        })
        .collect();
    print_table(&header, &rows);
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
