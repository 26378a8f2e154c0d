//! A sweep spread over processes or hosts: one file per point (`lockstack experiment NAME
//! --point K --out DIR` writes `DIR/NAME-point-K.json`), and the merge of a directory of them
//! into the [`ExperimentResult`] a single-process run produces (`lockstack experiment merge DIR`,
//! and `--jobs N`, which runs its points in child processes and merges them).
//!
//! A [`PointFile`] holds the point's [`Point`] (result and raw counters), the plan's identity
//! ([`PlanId`]: experiment and every resolved option), the caller's `context` (the CLI puts the
//! `--machine` profile and clock there: points measured on different simulated machines must
//! not merge), the [`MachineNote`] of the process that measured it, and an opaque `simulated`
//! section (the CLI's per-phase tally of the simulated machine). [`merge`] checks that every
//! file comes from one plan and context and that each point is present exactly once, then
//! builds the result with [`driver::assemble`], the function [`driver::run`] ends with.
//!
//! Floats go through JSON and back exactly (`serde_json`'s `float_roundtrip`), so a merged
//! result's files equal a single-process run's byte for byte when the points themselves are
//! reproducible (the simulated machine's deterministic clock).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::driver::{self, ExperimentResult, Options, Plan, Point, PointSpec};
use super::error::PointsError;
use crate::report::MachineNote;

pub use super::limits::FORMAT;

/// The largest point file [`merge`] reads, bytes (64 MiB). A point file holds one point's
/// result, counters and simulated-machine tally, tens of kilobytes; the bound keeps a stray
/// huge file (or a FIFO named like a point file) from filling memory.
pub const MAX_POINT_FILE_BYTES: u64 = 64 << 20;

/// What identifies a plan: the experiment and every option [`Plan::new`] resolved. Two
/// processes given equal identities measure the same points in the same order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanId {
    /// Experiment name (`pgxact`).
    pub experiment: String,
    /// Release preset.
    pub preset: String,
    /// The caller's `--set` list, in order.
    pub set: Vec<String>,
    /// Workload names, in plan order.
    pub workloads: Vec<String>,
    /// Client counts, ascending.
    pub clients: Vec<usize>,
    /// Seconds per point.
    pub duration_s: f64,
    /// Runs per point.
    pub runs: usize,
    /// Scale factor.
    pub scale: i64,
    /// Base random seed.
    pub seed: u64,
    /// The `--machine` profile (its stored calibrations and default clients apply).
    #[serde(default)]
    pub machine: Option<String>,
    /// The simulated machine the points ran on (its cores and threads, for the plots).
    #[serde(default)]
    pub simulated: Option<super::driver::SimulatedMachine>,
    /// With PostgreSQL's costs, the profile's `postgres_ipc` (stored calibrations apply).
    #[serde(default)]
    pub postgres_ipc: Option<f64>,
}

/// A merged plan's phase times: none (each point file carries its own time split; a merged
/// plan measures nothing, so its engine defaults do nothing either).
fn no_phases() -> Vec<super::driver::TimeSplit> {
    Vec::new()
}

impl PlanId {
    /// The identity of `plan`.
    pub fn of(plan: &Plan) -> PlanId {
        PlanId {
            experiment: plan.experiment.name.to_string(),
            preset: plan.preset.clone(),
            set: plan.set.clone(),
            workloads: plan.workloads.iter().map(|w| w.name.to_string()).collect(),
            clients: plan.clients.clone(),
            duration_s: plan.duration_s,
            runs: plan.runs,
            scale: plan.scale,
            seed: plan.seed,
            machine: plan.machine.clone(),
            simulated: plan.simulation.as_ref().map(|s| s.machine.clone()),
            postgres_ipc: plan.simulation.as_ref().and_then(|s| s.postgres_ipc),
        }
    }

    /// The options that resolve to this plan (every one given).
    pub fn options(&self) -> Options {
        Options {
            clients: Some(self.clients.clone()),
            duration_s: Some(self.duration_s),
            runs: Some(self.runs),
            scale: Some(self.scale),
            preset: Some(self.preset.clone()),
            set: self.set.clone(),
            workloads: Some(self.workloads.clone()),
            seed: self.seed,
            machine: self.machine.clone(),
            simulation: self.simulated.clone().map(|machine| super::driver::Simulation {
                machine,
                phase_times: no_phases,
                engine_defaults: |_, _| {},
                postgres_ipc: self.postgres_ipc,
                // Nothing is measured from this plan (the shift is in the context).
                layout_shift: 0,
            }),
        }
    }

    /// Resolves the plan again (as [`Plan::new`] checks it) and checks that it has this
    /// identity.
    ///
    /// # Errors
    /// An unknown experiment, options [`Plan::new`] refuses, or options that do not resolve
    /// to themselves (an edited file): one line.
    pub fn plan(&self) -> Result<Plan, PointsError> {
        let e = super::find(&self.experiment)?;
        let plan = Plan::new(e, &self.options()).map_err(PointsError::Plan)?;
        if PlanId::of(&plan) != *self {
            return Err(PointsError::NotSelfResolving { experiment: self.experiment.clone() });
        }
        Ok(plan)
    }

    /// The first field in which `self` and `other` differ, as `name (A vs B)`; `None` when
    /// equal.
    pub fn difference(&self, other: &PlanId) -> Option<String> {
        let a = serde_json::to_value(self).ok()?;
        let b = serde_json::to_value(other).ok()?;
        let (a, b) = (a.as_object()?, b.as_object()?);
        a.iter().find(|(k, v)| b.get(*k) != Some(*v)).map(|(k, v)| {
            let w = b.get(k).map_or_else(|| "none".to_string(), |w| w.to_string());
            format!("{k} ({v} vs {w})")
        })
    }
}

/// One point's file: everything [`merge`] needs from it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PointFile {
    /// [`FORMAT`].
    pub format: String,
    /// The plan the point belongs to.
    pub plan: PlanId,
    /// What else must agree between the points of one sweep (the CLI: `machine`,
    /// `sim_clock`, `sim_segments` under `--machine`); empty for a native run.
    pub context: BTreeMap<String, String>,
    /// Index K of the point in the plan's order.
    pub index: usize,
    /// Points in the plan.
    pub total: usize,
    /// The measured point.
    pub point: Point,
    /// The machine note of the process that measured it (the simulated machine's hardware
    /// threads under `--machine`).
    pub machine: MachineNote,
    /// The caller's record of the simulated machine's phases for this point (`null` for a
    /// native run); [`merge`] hands them back in point order without reading them.
    pub simulated: Option<serde_json::Value>,
}

/// The file name of point `index` of experiment `name`: `NAME-point-K.json`.
pub fn file_name(name: &str, index: usize) -> String {
    format!("{name}-point-{index}.json")
}

/// Measures point `spec` of `plan` ([`driver::run_point`]) and wraps it as a [`PointFile`].
///
/// # Errors
/// As [`driver::run_point`].
pub fn run_one(
    plan: &Plan,
    spec: &PointSpec,
    context: BTreeMap<String, String>,
    machine: MachineNote,
) -> Result<PointFile, PointsError> {
    let point = driver::run_point(plan, spec).map_err(PointsError::Run)?;
    Ok(PointFile {
        format: FORMAT.to_string(),
        plan: PlanId::of(plan),
        context,
        index: spec.index,
        total: plan.points(),
        point,
        machine,
        simulated: None,
    })
}

/// Writes `file` into `dir` as [`file_name`], whole or not at all (a temporary file renamed
/// into place), and returns its path.
///
/// # Errors
/// The path and the I/O or encoding error, on one line.
pub fn write(dir: &Path, file: &PointFile) -> Result<PathBuf, PointsError> {
    let path = dir.join(file_name(&file.plan.experiment, file.index));
    let tmp = dir.join(format!(".{}.tmp", file_name(&file.plan.experiment, file.index)));
    let text = serde_json::to_string_pretty(file).map_err(PointsError::Encode)?;
    std::fs::write(&tmp, text + "\n").map_err(|source| PointsError::Io { path: tmp.clone(), source })?;
    std::fs::rename(&tmp, &path).map_err(|source| PointsError::Io { path: path.clone(), source })?;
    Ok(path)
}

/// What [`merge`] read from a directory.
#[derive(Debug)]
pub struct Merged {
    /// The result, as [`driver::run`] would have returned it: points in plan order, the
    /// machine note of point 0.
    pub result: ExperimentResult,
    /// The context every file shares.
    pub context: BTreeMap<String, String>,
    /// Each point's `simulated` section, in plan order.
    pub simulated: Vec<Option<serde_json::Value>>,
    /// The files read, in plan order.
    pub files: Vec<PathBuf>,
}

/// Whether `name` looks like a point file: `*-point-K.json`.
fn is_point_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .and_then(|s| s.rsplit_once("-point-"))
        .is_some_and(|(_, k)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
}

/// Reads every `*-point-K.json` file of `dir` and merges them into the result of their plan.
///
/// # Errors
/// One line naming the problem: `dir` unreadable or holding no point file; a file larger than
/// [`MAX_POINT_FILE_BYTES`], or that does not parse as a point file or has another format;
/// files from different plans or contexts (naming the field); a point whose index is outside
/// its plan or does not match the plan's point at that index; a point present twice (naming
/// both files); points missing (naming their indexes, the first few).
pub fn merge(dir: &Path) -> Result<Merged, PointsError> {
    let io = |source| PointsError::Io { path: dir.to_path_buf(), source };
    let entries = std::fs::read_dir(dir).map_err(io)?;
    let mut paths = Vec::new();
    for entry in entries {
        let entry = entry.map_err(io)?;
        if entry.file_name().to_str().is_some_and(is_point_file) {
            paths.push(entry.path());
        }
    }
    paths.sort();
    if paths.is_empty() {
        return Err(PointsError::NoPointFiles { dir: dir.to_path_buf() });
    }
    let mut files: Vec<(PathBuf, PointFile)> = Vec::with_capacity(paths.len());
    for p in paths {
        let text = crate::input::read_text_file(&p, MAX_POINT_FILE_BYTES)?;
        let f: PointFile = serde_json::from_str(&text)
            .map_err(|source| PointsError::NotAPointFile { path: p.clone(), source })?;
        if f.format != FORMAT {
            return Err(PointsError::Format { path: p, format: f.format });
        }
        files.push((p, f));
    }
    let (first_path, first) = (&files[0].0, &files[0].1);
    for (p, f) in &files[1..] {
        if let Some(d) = first.plan.difference(&f.plan) {
            return Err(PointsError::DifferentPlans {
                first: first_path.clone(),
                other: p.clone(),
                difference: d,
            });
        }
        if f.context != first.context {
            let key = first
                .context
                .keys()
                .chain(f.context.keys())
                .find(|k| first.context.get(*k) != f.context.get(*k))
                .cloned()
                .unwrap_or_default();
            let show =
                |m: &BTreeMap<String, String>| m.get(&key).map_or("none".to_string(), |v| format!("\"{v}\""));
            return Err(PointsError::DifferentRuns {
                first: first_path.clone(),
                other: p.clone(),
                a: show(&first.context),
                b: show(&f.context),
                key,
            });
        }
    }
    let plan = first
        .plan
        .plan()
        .map_err(|e| PointsError::FilePlan { path: first_path.clone(), message: Box::new(e) })?;
    let specs = plan.point_specs();
    let mut slots: Vec<Option<(PathBuf, PointFile)>> = vec![None; specs.len()];
    for (p, f) in files {
        let Some(spec) = specs.get(f.index).filter(|_| f.total == specs.len()) else {
            return Err(PointsError::OutOfPlan {
                path: p,
                index: f.index,
                total: f.total,
                points: specs.len(),
            });
        };
        let q = &f.point;
        if q.run != spec.run
            || q.workload != spec.workload.name
            || q.clients != spec.clients
            || q.variant != spec.variant.name
        {
            return Err(PointsError::Mismatch {
                path: p,
                index: f.index,
                plan_index: spec.index,
                got: format!("run {} {} c={} {}", q.run, q.workload, q.clients, q.variant),
                want: format!(
                    "run {} {} c={} {}",
                    spec.run, spec.workload.name, spec.clients, spec.variant.name
                ),
            });
        }
        if let Some((other, _)) = &slots[f.index] {
            return Err(PointsError::Twice { index: f.index, first: other.clone(), second: p });
        }
        let k = f.index;
        slots[k] = Some((p, f));
    }
    let missing: Vec<String> =
        slots.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(k, _)| k.to_string()).collect();
    if !missing.is_empty() {
        let shown: Vec<&str> = missing.iter().take(10).map(String::as_str).collect();
        let more = if missing.len() > shown.len() { ", ..." } else { "" };
        return Err(PointsError::Missing {
            dir: dir.to_path_buf(),
            missing: missing.len(),
            points: specs.len(),
            shown: format!("{}{more}", shown.join(", ")),
        });
    }
    let slots: Vec<(PathBuf, PointFile)> = slots.into_iter().flatten().collect();
    let context = slots[0].1.context.clone();
    let machine = slots[0].1.machine.clone();
    let mut points = Vec::with_capacity(slots.len());
    let mut simulated = Vec::with_capacity(slots.len());
    let mut paths = Vec::with_capacity(slots.len());
    for (p, f) in slots {
        points.push(f.point);
        simulated.push(f.simulated);
        paths.push(p);
    }
    Ok(Merged { result: driver::assemble(&plan, points, machine), context, simulated, files: paths })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::find;

    fn plan() -> Plan {
        let o = Options {
            clients: Some(vec![1, 2]),
            duration_s: Some(0.01),
            runs: Some(1),
            ..Options::default()
        };
        Plan::new(find("vm-pin").unwrap(), &o).unwrap()
    }

    /// Point files merged in any order give the result `driver::run` gives (the buffer
    /// workloads natively are not reproducible, so the points are measured once and both
    /// paths assemble them); damage, duplicates, gaps and foreign files are each one line.
    #[test]
    fn merge_assembles_what_run_assembles_and_names_bad_files() {
        let plan = plan();
        let specs = plan.point_specs();
        assert_eq!(specs.len(), plan.points());
        assert!(specs.iter().enumerate().all(|(k, s)| s.index == k));
        let dir = tempfile::tempdir().unwrap();
        let note = MachineNote::for_threads(2);
        let mut files = Vec::new();
        let mut measured = vec![None; specs.len()];
        for s in specs.iter().rev() {
            let f = run_one(&plan, s, BTreeMap::new(), note.clone()).unwrap();
            files.push(write(dir.path(), &f).unwrap());
            measured[s.index] = Some(f.point);
        }
        let m = merge(dir.path()).unwrap();
        let direct = driver::assemble(&plan, measured.into_iter().flatten().collect(), note.clone());
        // Same points in plan order, every float read back exactly.
        assert_eq!(serde_json::to_string(&m.result).unwrap(), serde_json::to_string(&direct).unwrap());
        assert_eq!(m.result.points.len(), plan.points());

        // A missing point, then a duplicate under another name, then damage.
        let last = &files[0];
        let saved = std::fs::read_to_string(last).unwrap();
        std::fs::remove_file(last).unwrap();
        let err = merge(dir.path()).unwrap_err().to_string();
        assert!(err.contains("points missing") && err.contains(&format!("{}", specs.len() - 1)), "{err}");
        std::fs::write(last, &saved).unwrap();
        std::fs::write(dir.path().join("copy-point-0.json"), std::fs::read(&files[files.len() - 1]).unwrap())
            .unwrap();
        assert!(merge(dir.path()).unwrap_err().to_string().contains("present twice"));
        std::fs::write(dir.path().join("copy-point-0.json"), &saved[..saved.len() / 2]).unwrap();
        assert!(merge(dir.path()).unwrap_err().to_string().contains("not a point file"));
        // A file from another plan names the field that differs.
        let mut other: PointFile = serde_json::from_str(&saved).unwrap();
        other.plan.seed = 7;
        std::fs::write(dir.path().join("copy-point-0.json"), serde_json::to_string(&other).unwrap()).unwrap();
        let err = merge(dir.path()).unwrap_err().to_string();
        assert!(err.contains("different plans") && err.contains("seed"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        assert!(merge(empty.path()).unwrap_err().to_string().contains("no point files"));
    }
}
