//! `lockstack experiment validation DIR`: docs/sim-validation.md from the seeds' sweeps, one
//! `--out` of one experiment on one machine per subdirectory. Locks: none.

use super::*;

/// The largest result file `experiment validation` reads.
pub(super) const MAX_RESULT_BYTES: u64 = 256 << 20;

/// `experiment validation DIR`: the markdown of docs/sim-validation.md, from every
/// subdirectory of DIR that holds an experiment's `NAME.json` of a `--machine` run.
pub(super) fn validation(args: &ExperimentArgs) -> Result<(), Failure> {
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
