//! `experiment NAME --machine P --sensitivity`: the base sweep and one sweep per assumed
//! constant at 0.5x and 2x, and the tables of the bands. Locks: none.

use super::*;

/// Constants to perturb: (key, the profile's value).
pub(super) type Constants = Vec<(String, f64)>;

/// The constants `--sensitivity LIST` names (empty: the profile's whole `assumed` list), as
/// (key, value in `profile`), and the ones held with the reason. Only assumed constants are
/// accepted.
///
/// # Errors
/// One line naming an unknown or cited constant and listing the valid ones.
pub(super) fn sensitivity_constants(
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
                let v = profile
                    .constant(&key)
                    .expect("every key is in the profile's assumed list, and validate_assumed keeps that list to its constant_keys");
                constants.push((key, v));
            }
        }
    }
    Ok((constants, held))
}

/// `--sensitivity`: the base sweep and one sweep per perturbation, in child processes, then the
/// base result with the bands, reported and written as a plain run's.
pub(super) fn sensitivity(
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
    let (mut result, tally) =
        base.expect("sweeps starts with the base sweep, which the loop's first pass (i == 0) stored");
    #[cfg(feature = "sim")]
    if let Some(t) = tally {
        crate::sim_cmd::adopt(t);
    }
    #[cfg(not(feature = "sim"))]
    let _ = tally;
    let base_medians = medians(&result);
    result.sensitivity =
        Some(Sensitivity::analyse(plan.experiment, &profile.name, &base_medians, &runs, held));
    finish_run(args, &mut result, out, t0.elapsed().as_secs_f64())
}

/// The sensitivity tables: each effect's band and the constant that moves it most, each
/// curve's peak band.
pub(super) fn print_sensitivity(s: &lockstack_workloads::experiments::sensitivity::Sensitivity) {
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
