//! A sweep spread over processes: `--point K` measures one point into its file, `--jobs N`
//! runs every point in child processes of this binary, `experiment merge DIR` builds a
//! single-process run's files from the point files. Locks: none.

use super::*;

/// What must agree between the point files of one sweep besides the plan: the simulated
/// machine and its clock (empty natively).
pub(super) fn context(sim: &SimArgs) -> BTreeMap<String, String> {
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
        if sim.sim_layout_shift != 0 {
            c.insert("sim_layout_shift".to_string(), sim.sim_layout_shift.to_string());
        }
    }
    c
}

/// `--point K --out DIR`: measures point K and writes its file.
pub(super) fn run_point(args: &ExperimentArgs, sim: &SimArgs, plan: &Plan, k: i64) -> Result<(), Failure> {
    if args.jobs.is_some() {
        return Err(Failure::input("--point K runs one point in this process: not with --jobs"));
    }
    if args.smoke || args.json.is_some() || args.measured.is_some() {
        return Err(Failure::input(
            "--point K writes its point file only: not with --smoke, --json or --measured (give them to 'experiment merge')",
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
pub(super) fn simulated_tally() -> Result<Option<serde_json::Value>, Failure> {
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

/// A point file whose `simulated` field is not a simulated machine's tally.
#[derive(Debug, thiserror::Error)]
#[error("{}: simulated: not a simulated machine's tally: {source}", path.display())]
pub(super) struct NotATally {
    /// The point file.
    path: std::path::PathBuf,
    /// The JSON decoder's error.
    source: serde_json::Error,
}

/// For callers that carry errors as text: the message, as displayed.
impl From<NotATally> for String {
    fn from(e: NotATally) -> String {
        e.to_string()
    }
}

/// The simulated machine's phases of every merged point, in point order (`None` for a native
/// sweep).
///
/// # Errors
/// [`NotATally`] for the first point file whose `simulated` field does not decode.
pub(super) fn merged_tally(m: &points::Merged) -> Result<Option<SimTally>, NotATally> {
    let mut tally: Option<SimTally> = None;
    for (v, path) in m.simulated.iter().zip(&m.files) {
        let Some(v) = v else { continue };
        let t: SimTally =
            serde_json::from_value(v.clone()).map_err(|source| NotATally { path: path.clone(), source })?;
        match &mut tally {
            None => tally = Some(t),
            Some(all) => all.phases.extend(t.phases),
        }
    }
    Ok(tally)
}

/// The arguments of the child that measures point `k` of `plan` into `dir`: every option of
/// the plan spelled out, and the simulation flags.
pub(super) fn child_args(plan: &Plan, sim: &SimArgs, k: usize, dir: &Path) -> Vec<OsString> {
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
    // The user directory, where the children find user profiles and calibrations.
    if let Some(home) = lockstack_workloads::experiments::user_dir::overridden() {
        a.push("--home".into());
        a.push(home.as_os_str().to_owned());
    }
    a.push("--point".into());
    a.push(k.to_string().into());
    a.push("--out".into());
    a.push(dir.as_os_str().to_owned());
    a
}

/// `--jobs N`: runs every point of `plan` in a child process (at most `jobs` at once) into a
/// temporary directory under `out`, then merges them. A child that fails ends the run: the
/// others are killed and the child's last stderr line is the error (exit 2).
pub(super) fn run_children(
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
pub(super) fn run_sweeps(
    plan: &Plan,
    sweeps: &[(SimArgs, PathBuf)],
    jobs: usize,
    progress: &mut Progress,
) -> Result<(), Failure> {
    let exe = crate::child::this_binary("--jobs: this binary's path")?;
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
            let child = crate::child::command(&exe)
                .args(child_args(plan, sim, k, dir))
                .stdout(Stdio::null())
                .stderr(err)
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
                        let text = crate::child::last_line_of(&err_path);
                        let line = text.strip_prefix("lockstack: ").unwrap_or(&text);
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

/// `experiment merge DIR`: the files, report and (when the points ran under `--machine`) the
/// simulated machine's section of the points in DIR.
pub(super) fn merge(args: &ExperimentArgs, sim: &SimArgs) -> Result<(), Failure> {
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
    let mut merged = points::merge(dir).map_err(Failure::input)?;
    let tally = merged_tally(&merged).map_err(Failure::input)?;
    let out = args.out.clone().unwrap_or_else(|| dir.clone());
    std::fs::create_dir_all(&out).map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    crate::prepare_json(args.json.as_deref())?;
    outln!("merged {} point files from {}", merged.files.len(), dir.display());
    let verdict = finish_run(args, &mut merged.result, &out, t0.elapsed().as_secs_f64());
    if let Some(t) = tally {
        let s = crate::sim_cmd::section(&t);
        crate::sim_cmd::print_section("experiment", &s);
        if let Some(path) = &args.json {
            crate::sim_cmd::add_to_json(path, &s)?;
        }
    }
    verdict
}
