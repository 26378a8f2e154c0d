//! `lockstack experiment NAME --machine P --calibrate` (issue 18, item 1): solves the one
//! unknown of a simulated run, `sim.statement_cpu_us` (the server's work per statement that
//! PostgreSQL does and this engine does not: parse, plan, executor, protocol), so that the
//! baseline variant's simulated throughput at the thread's lowest published client count
//! (1 where the thread gives it) equals the thread's figure. The machine's own figures (the
//! client's CPU and round trip, the WAL flush) stay the profile's; nothing else is fitted.
//!
//! At that client count a transaction's virtual time is `T(s) = T0 + k s` for `s` µs per
//! statement (k statements per transaction, on an uncontended machine), so two runs give `T0`
//! and `k`, and a third checks the solution. The runs are deterministic, so this is exact up
//! to the discreteness of a run's transaction count.

use super::driver::{self, Options, Plan, STATEMENT_CPU_KEY};
use super::{Calibrated, Experiment, Published, WorkloadKind};

/// The figure a workload is calibrated to on `machine`: the baseline variant's published
/// point at the fewest clients among the series measured there (the first series in the
/// machine's list with such a point).
pub fn target(e: &'static Experiment, machine: &str, workload: &str) -> Option<&'static Published> {
    let m = e.machine(machine)?;
    let base = e.baseline().name;
    m.series
        .iter()
        .filter_map(|series| {
            e.published
                .iter()
                .filter(|p| p.workload == workload && p.variant == base && p.series == *series)
                .min_by_key(|p| p.clients)
        })
        .min_by_key(|p| p.clients)
}

/// One solved calibration with its check.
#[derive(Clone, Debug)]
pub struct Solved {
    /// What to store in the catalogue.
    pub calibrated: Calibrated,
    /// Simulated tps of the baseline with no added statement work.
    pub tps_without: f64,
    /// Simulated tps with the solved value (the check run).
    pub tps_check: f64,
}

fn baseline_tps(
    e: &'static Experiment,
    base: &Options,
    workload: &str,
    clients: usize,
    us: f64,
) -> Result<f64, String> {
    let mut opts = base.clone();
    opts.clients = Some(vec![clients]);
    opts.runs = Some(1);
    opts.workloads = Some(vec![workload.to_string()]);
    opts.set.push(format!("{STATEMENT_CPU_KEY}={us}"));
    let plan = Plan::new(e, &opts)?;
    let r = driver::run(&plan, &mut |_| {})?;
    let row = r
        .row(workload, e.baseline().name, clients)
        .ok_or_else(|| format!("calibration: no result for {workload} at {clients} clients"))?;
    if row.median <= 0.0 {
        return Err(format!("calibration: {workload} ran no transaction at {clients} clients"));
    }
    Ok(row.median)
}

/// Solves `sim.statement_cpu_us` for each pgbench workload of the plan `base` describes, on
/// `machine` (the running simulation's profile: the caller runs this under `--machine`).
///
/// # Errors
/// One line: a machine the seed did not measure on, an experiment without pgbench workloads
/// (`vm-pin`), no published baseline figure for a workload on that machine, a caller's
/// `--set sim.statement_cpu_us`, a run that fails, a figure the engine cannot reach (its
/// own work alone is slower than the figure: the solution would be negative), or no workload
/// with a published baseline figure on that machine. Workloads without one are returned
/// as lines saying so, next to the solved ones.
pub fn solve(
    e: &'static Experiment,
    base: &Options,
    machine: &str,
) -> Result<(Vec<Solved>, Vec<String>), String> {
    if e.machine(machine).is_none() {
        let names: Vec<&str> = e.machines.iter().map(|m| m.profile).collect();
        return Err(format!(
            "--calibrate: {} published no figure on {machine} (its machines: {})",
            e.name,
            names.join(", ")
        ));
    }
    if base.set.iter().any(|a| a.split('=').next().map(str::trim) == Some(STATEMENT_CPU_KEY)) {
        return Err(format!("--calibrate solves {STATEMENT_CPU_KEY}; do not --set it"));
    }
    let workloads: Vec<&str> = e
        .workloads
        .iter()
        .filter(|w| matches!(w.kind, WorkloadKind::Pgbench { .. }))
        .filter(|w| base.workloads.as_ref().is_none_or(|ws| ws.iter().any(|n| n == w.name)))
        .map(|w| w.name)
        .collect();
    if workloads.is_empty() {
        return Err(format!(
            "--calibrate: {} runs no SQL statements, so there is nothing to calibrate",
            e.name
        ));
    }
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for w in workloads {
        let Some(t) = target(e, machine, w) else {
            skipped.push(format!(
                "{w}: the thread gives no figure for the baseline ({}) on {machine}; not calibrated",
                e.baseline().name
            ));
            continue;
        };
        let clients = t.clients as usize;
        let probe = 100.0;
        let tps0 = baseline_tps(e, base, w, clients, 0.0)?;
        let tps1 = baseline_tps(e, base, w, clients, probe)?;
        // Per-client transaction time, seconds: T = clients / tps (no contention at the
        // calibration point is assumed; a contended one is still solved by the secant below).
        let (t0, t1, goal) = (clients as f64 / tps0, clients as f64 / tps1, clients as f64 / t.tps);
        let slope = (t1 - t0) / probe;
        if slope <= 0.0 {
            return Err(format!("--calibrate: {w}: added statement work did not slow the run"));
        }
        let us = (goal - t0) / slope;
        if us < 0.0 {
            return Err(format!(
                "--calibrate: {w}: the simulated engine alone runs {tps0:.0} tps at {clients} clients, below the published {:.0}: nothing to add",
                t.tps
            ));
        }
        let us = (us * 100.0).round() / 100.0;
        let check = baseline_tps(e, base, w, clients, us)?;
        out.push(Solved {
            calibrated: Calibrated {
                machine: e.machine(machine).map_or("", |m| m.profile),
                workload: e.workload(w).map_or("", |x| x.name),
                series: t.series,
                clients: t.clients,
                tps: t.tps,
                statement_cpu_us: us,
            },
            tps_without: tps0,
            tps_check: check,
        });
    }
    if out.is_empty() {
        return Err(format!("--calibrate: {}", skipped.join("; ")));
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stored calibration is of a figure `--calibrate` would pick: the baseline's
    /// published point at the fewest clients on one of the seed's machines, figure for figure.
    #[test]
    fn stored_calibrations_name_the_figure_calibrate_solves_for() {
        let mut n = 0;
        for e in crate::experiments::all() {
            for c in e.calibrated {
                let t = target(e, c.machine, c.workload)
                    .unwrap_or_else(|| panic!("{}: no target for {} on {}", e.name, c.workload, c.machine));
                assert_eq!(
                    (t.series, t.clients, t.tps),
                    (c.series, c.clients, c.tps),
                    "{} {}",
                    e.name,
                    c.line()
                );
                assert!(c.statement_cpu_us > 0.0 && c.statement_cpu_us.is_finite(), "{}", c.line());
                n += 1;
            }
        }
        assert!(n >= 5, "the catalogue stores the calibrations solved so far");
    }
}
