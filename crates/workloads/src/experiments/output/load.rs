//! Reading a run back: `NAME.json` (what [`super::write_all`] wrote) into the
//! [`ExperimentResult`] it came from, so that `lockstack experiment plot DIR` redraws the plots
//! without running anything. No locks.
//!
//! The plan is resolved again from the file's options ([`Plan::new`], as a run resolves it) and
//! the result rebuilt from the file's points with [`driver::assemble`], the function every run
//! ends with, so the summary and the fits are recomputed exactly; the calibrations, the
//! calibration line, the `--sensitivity` bands and the user's `--measured` figures are taken
//! from the file.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::error::OutputError;
use crate::experiments::driver::{
    self, ExperimentResult, Options, Plan, Point, SimulatedMachine, Simulation,
};
use crate::experiments::sensitivity::Sensitivity;
use crate::experiments::{Calibrated, Experiment, Published, find};
use crate::report::MachineNote;

#[derive(Deserialize)]
struct FileExperiment {
    name: String,
}

#[derive(Deserialize)]
struct FileWorkload {
    name: String,
}

#[derive(Deserialize)]
struct FileCalibrated {
    workload: String,
    series: String,
    clients: u32,
    tps: f64,
    postgres_ipc: f64,
}

#[derive(Deserialize)]
struct FilePlan {
    experiment: FileExperiment,
    preset: String,
    set: Vec<String>,
    workloads: Vec<FileWorkload>,
    clients: Vec<usize>,
    duration_s: f64,
    runs: usize,
    scale: i64,
    seed: u64,
    machine: Option<String>,
    #[serde(default)]
    calibrated: Vec<FileCalibrated>,
    #[serde(default)]
    costs: Option<String>,
}

/// A `--measured` figure as the file holds it.
#[derive(Deserialize)]
struct FilePublished {
    workload: String,
    series: String,
    clients: u32,
    variant: String,
    low: Option<f64>,
    tps: f64,
    high: Option<f64>,
}

#[derive(Deserialize)]
struct FileResult {
    plan: FilePlan,
    machine: MachineNote,
    simulated: Option<SimulatedMachine>,
    calibrated_to: Option<String>,
    points: Vec<Point>,
    #[serde(default)]
    sensitivity: Option<Sensitivity>,
    #[serde(default)]
    measured: Vec<FilePublished>,
}

/// The catalog's names for a calibration in a file: the same figure, with the file's numbers.
fn calibration(e: &'static Experiment, machine: Option<&str>, c: &FileCalibrated) -> Option<Calibrated> {
    let m = e.machines.iter().find(|m| Some(m.profile) == machine)?;
    let w = e.workload(&c.workload)?;
    let series = m.series.iter().find(|s| **s == c.series)?;
    Some(Calibrated {
        experiment: e.name,
        machine: m.profile,
        workload: w.name,
        series,
        clients: c.clients,
        tps: c.tps,
        postgres_ipc: c.postgres_ipc,
    })
}

/// All `NAME.json` files of `dir` that hold an experiment's result (a file whose name is an
/// experiment's, `NAME.json`), sorted by name.
///
/// # Errors
/// `dir` unreadable.
pub fn results_in(dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| OutputError::file(dir, e))?
        .filter_map(|d| d.ok().map(|d| d.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_stem().and_then(|s| s.to_str()).is_some_and(|s| find(s).is_ok())
        })
        .collect();
    v.sort();
    Ok(v)
}

/// Reads `path` (a `NAME.json` of [`super::write_all`]) back into its result.
///
/// # Errors
/// The file unreadable or not such a result, an unknown experiment, options [`Plan::new`]
/// refuses, or a calibration the catalog does not know: one line naming the file.
pub fn read_result(path: &Path) -> Result<ExperimentResult, OutputError> {
    let text = std::fs::read_to_string(path).map_err(|e| OutputError::file(path, e))?;
    let f: FileResult = serde_json::from_str(&text).map_err(|e| OutputError::file(path, e))?;
    let e = find(&f.plan.experiment.name).map_err(|m| OutputError::invalid(path, format!("plan: {m}")))?;
    let postgres = f.plan.costs.as_deref() == Some("postgres");
    let opts = Options {
        clients: Some(f.plan.clients.clone()),
        duration_s: Some(f.plan.duration_s),
        runs: Some(f.plan.runs),
        scale: Some(f.plan.scale),
        preset: Some(f.plan.preset.clone()),
        set: f.plan.set.clone(),
        workloads: Some(f.plan.workloads.iter().map(|w| w.name.clone()).collect()),
        seed: f.plan.seed,
        machine: f.plan.machine.clone(),
        simulation: f.simulated.clone().map(|machine| Simulation {
            machine,
            phase_times: Vec::new,
            engine_defaults: |_, _| {},
            // Only whether PostgreSQL's costs were used matters here: the calibrations come
            // from the file.
            postgres_ipc: postgres.then_some(1.0),
            // Nothing is measured from this plan.
            layout_shift: 0,
        }),
    };
    let mut plan: Plan = Plan::new(e, &opts).map_err(|m| OutputError::invalid(path, format!("plan: {m}")))?;
    plan.calibrated = f
        .plan
        .calibrated
        .iter()
        .map(|c| {
            calibration(e, f.plan.machine.as_deref(), c).ok_or_else(|| {
                OutputError::invalid(
                    path,
                    format!("plan: calibration of {} to {}: not in the catalog", c.workload, c.series),
                )
            })
        })
        .collect::<Result<_, _>>()?;
    let mut r = driver::assemble(&plan, f.points, f.machine);
    r.calibrated_to = f.calibrated_to;
    r.sensitivity = f.sensitivity;
    // The user's figures keep their names: the strings are leaked, once per file read.
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    r.measured = f
        .measured
        .into_iter()
        .map(|m| Published {
            workload: leak(m.workload),
            series: leak(m.series),
            clients: m.clients,
            variant: leak(m.variant),
            low: m.low,
            tps: m.tps,
            high: m.high,
        })
        .collect();
    Ok(r)
}
