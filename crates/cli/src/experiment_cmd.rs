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
use std::process::{Child, Stdio};

use clap::{Args, Parser};
use lockstack_workloads::experiments::calibrate::{self, CalibrateError};
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
    /// Client counts, comma-separated, each 1 to 1000 (worker threads for vm-pin; order and
    /// repeats do not matter); default: the experiment's
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
    /// With --machine and PostgreSQL's costs: fit sim.postgres_ipc so that the baseline's
    /// simulated throughput at the fewest clients equals the thread's published figure on
    /// that machine (one of the seed's), or with --measured your own figure (any machine),
    /// only where that count is at most a third of the cores; store the result in the user
    /// directory's calibrations.toml (--home), which later runs on that machine use, and exit.
    #[arg(long)]
    calibrate: bool,
    /// Your own measurements, a CSV file with a header: variant, clients, tps (required),
    /// machine, workload (optional; lines starting with # are comments). Drawn and tabled as
    /// one more series next to the thread's figures; with --calibrate, the figure fitted to.
    /// Rows naming a machine apply only under --machine with that name.
    #[arg(long, value_name = "FILE.csv")]
    measured: Option<PathBuf>,
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

fn options(args: &ExperimentArgs, machine: Option<&str>) -> Result<Options, Failure> {
    let clients = match &args.clients {
        Some(s) => Some(crate::clients_arg::parse_clients(s)?),
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

mod jobs;
mod report;
mod sensitivity;
mod validation;

use jobs::{merge, merged_tally, run_children, run_point, run_sweeps};
pub(crate) use report::print_experiment_help;
use report::{print_knobs, print_list, print_report, print_table, show};
use sensitivity::{print_sensitivity, sensitivity};
use validation::validation;

/// The user's `--measured` file of `exp`, read and checked.
fn read_measured(
    args: &ExperimentArgs,
    exp: &'static Experiment,
) -> Result<Option<experiments::measured::Measured>, Failure> {
    args.measured
        .as_deref()
        .map(|p| experiments::measured::Measured::read(p, exp).map_err(|e| Failure::input(e.to_string())))
        .transpose()
}

/// `--calibrate`: solves each workload's calibration, prints it and stores it in the user's
/// directory.
fn calibrate(
    exp: &'static Experiment,
    opts: &Options,
    sim: &SimArgs,
    measured: Option<&experiments::measured::Measured>,
) -> Result<(), Failure> {
    let machine = sim.machine.as_deref();
    let Some(machine) = machine else {
        let names: Vec<&str> = exp.machines.iter().map(|m| m.profile).collect();
        return Err(Failure::input(format!(
            "--calibrate needs --machine PROFILE: one of {}'s machines ({}), or any profile with --measured FILE.csv",
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
    let figures = measured.map(|m| m.as_published(Some(machine)));
    // Each calibration run in a fresh child process, as every simulated experiment point is
    // (see `run`): its figure must not depend on the calibration runs before it.
    let mut runs = 0;
    let mut run_plan = |plan: &Plan| -> Result<ExperimentResult, CalibrateError> {
        runs += 1;
        let mut progress = Progress::new(format!("calibration run {runs}"), plan.points());
        let r = run_children(plan, sim, 1, &std::env::temp_dir(), &mut progress);
        progress.finish();
        Ok(r.map_err(|f| CalibrateError::Run(f.message))?.0)
    };
    let (solved, skipped) =
        calibrate::solve(exp, opts, machine, cores, profile_ipc, figures.as_deref(), &mut run_plan)
            .map_err(|e| Failure::input(e.to_string()))?;
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
    let rows: Vec<experiments::Calibrated> = solved.iter().map(|s| s.calibrated).collect();
    let path = experiments::user_dir::store_calibrations(&rows).map_err(Failure::output)?;
    outln!(
        "stored in {} (replacing its rows of {} on {machine} for these workloads): `lockstack experiment {} --machine {machine}` now runs calibrated; delete the rows to undo",
        path.display(),
        exp.name,
        exp.name
    );
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
        let only_plot = args.dir.as_deref().is_some_and(|dir| {
            plain_plot(dir, args.out.as_deref()).as_deref() == Some(format!("{args:?}").as_str())
        }) && sim.machine.is_none()
            && sim.machine_set.is_empty();
        return crate::experiment_plot::run(only_plot, args.dir.as_deref(), args.out.as_deref());
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
    // Checked before any point runs: a bad file fails at once, not after the sweep.
    let measured = read_measured(&args, exp)?;
    if machine.is_some() {
        // The user's stored calibrations become the points' --set: a bad file fails here,
        // naming its row and field, not in every point's child.
        experiments::user_dir::calibrations().map_err(|e| Failure::input(e.to_string()))?;
    }
    if args.calibrate {
        if args.list_points || args.point.is_some() || args.jobs.is_some() || args.sensitivity.is_some() {
            return Err(Failure::input(
                "--calibrate runs its own points: not with --list-points, --point, --jobs or --sensitivity",
            ));
        }
        return calibrate(exp, &options(&args, machine)?, sim, measured.as_ref());
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
        if args.point.is_some() || args.jobs.is_some() || args.measured.is_some() {
            return Err(Failure::input(
                "--list-points prints the plan and exits: not with --point, --jobs or --measured",
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
    // Under --machine every point runs in a fresh child process, whatever --jobs: the
    // simulated machine maps host addresses to 64-byte lines, and a point run after another in
    // the same process would find the heap as that one left it, so its figures would depend on
    // the points before it. (A --sim-save-segments run measures one table in this process.)
    let children = jobs > 1 || (sim.machine.is_some() && sim.sim_save_segments.is_none());
    let result = if children {
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
    let mut result = result;
    let wall = t0.elapsed().as_secs_f64();
    finish_run(&args, &mut result, &out, wall)
}

/// The machine note of `plan`'s largest client count: the simulated machine's under
/// `--machine`, this host's otherwise.
fn machine_note(plan: &Plan) -> lockstack_workloads::report::MachineNote {
    crate::sim_cmd::machine_note(plan.clients.iter().copied().max().unwrap_or(1))
}

/// The report, the files, `--json`, the smoke check and the consistency verdict of a result.
fn finish_run(
    args: &ExperimentArgs,
    result: &mut ExperimentResult,
    out: &Path,
    wall: f64,
) -> Result<(), Failure> {
    let exp = result.plan.experiment;
    if let Some(m) = read_measured(args, exp)? {
        result.measured = m.as_published(result.plan.machine.as_deref());
        let workloads: Vec<&str> = result.plan.workloads.iter().map(|w| w.name).collect();
        for line in m.not_drawn(result.plan.machine.as_deref(), &workloads) {
            errln!("lockstack: {line}");
        }
    }
    let result = &*result;
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

/// `experiment plot`'s own arguments, parsed again to see whether anything else was given.
#[derive(Parser, Debug)]
struct OnlyPlot {
    #[command(flatten)]
    args: ExperimentArgs,
}

/// The arguments that `experiment plot DIR [--out OUT]` alone would give.
fn plain_plot(dir: &Path, out: Option<&Path>) -> Option<String> {
    let mut argv: Vec<std::ffi::OsString> = vec!["plot".into(), "plot".into(), dir.into()];
    if let Some(o) = out {
        argv.push("--out".into());
        argv.push(o.into());
    }
    OnlyPlot::try_parse_from(argv).ok().map(|p| format!("{:?}", p.args))
}
