//! `lockstack experiment NAME --machine P --calibrate`: fits the one parameter of a simulated
//! run with PostgreSQL's costs, `sim.postgres_ipc` (the instructions per cycle PostgreSQL's
//! code retires on the simulated core, which sets the rate at which its measured instruction
//! counts are charged), so that the baseline variant's simulated throughput at the thread's
//! lowest published client count equals the thread's figure. Only a figure at no more than a
//! third of the machine's cores is used (where contention does not yet set the curve), never a
//! fix variant's. The machine's own figures (the client's CPU and round trip, the WAL flush)
//! stay the profile's; nothing else is fitted.
//!
//! At that client count a transaction's virtual time is `T(i) = A + B / i` for IPC `i` (B:
//! PostgreSQL's instructions per transaction over the clock; A: everything else), so two runs
//! give `A` and `B`, and a third checks the solution. The runs are deterministic, so this is
//! exact up to the discreteness of a run's transaction count.

use super::driver::{self, ExperimentResult, Options, POSTGRES_IPC_KEY, Plan};
use super::{Calibrated, Experiment, Published, WorkloadKind};

/// The figure a workload is calibrated to among the user's own figures (`--measured`, already
/// narrowed to the machine's rows): the baseline variant's at the fewest clients.
pub fn measured_target<'a>(
    e: &Experiment,
    figures: &'a [Published],
    workload: &str,
) -> Option<&'a Published> {
    let base = e.baseline().name;
    figures.iter().filter(|p| p.workload == workload && p.variant == base).min_by_key(|p| p.clients)
}

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

/// Why a calibration could not be solved; each is one line that says what to do.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// The machine is not one of the thread's and no `--measured` figures were given.
    #[error(
        "--calibrate: {experiment} published no figure on {machine} (its machines: {machines}); to calibrate to your own figures, give --measured FILE.csv"
    )]
    NotTheThreadsMachine {
        /// The experiment.
        experiment: &'static str,
        /// The profile asked for.
        machine: String,
        /// The thread's profiles, comma-separated.
        machines: String,
    },
    /// The caller's `--set sim.postgres_ipc`, which the calibration fits.
    #[error("--calibrate fits {POSTGRES_IPC_KEY}; do not --set it")]
    IpcSet,
    /// The experiment runs no pgbench workload (`vm-pin`).
    #[error("--calibrate: {0} runs no SQL statements, so there is nothing to calibrate")]
    NoStatements(&'static str),
    /// Doubling the rate did not shorten the run: PostgreSQL's costs are not charged.
    #[error(
        "--calibrate: {0}: a faster instruction rate did not speed the run up: does this run charge PostgreSQL's costs (--costs postgres)?"
    )]
    NoSpeedUp(String),
    /// Everything but PostgreSQL's instructions is already slower than the figure.
    #[error(
        "--calibrate: {workload}: without PostgreSQL's instructions the simulated run alone takes {rest_us:.1} us per transaction at {clients} client{plural}, more than the figure's {tps:.0} tps allows ({goal_us:.1} us): the client and server costs outside them (profile [pgbench], --set sim.client_*) are too large",
        plural = if *clients == 1 { "" } else { "s" }
    )]
    Unreachable {
        /// The workload.
        workload: String,
        /// The time outside PostgreSQL's instructions, us per transaction.
        rest_us: f64,
        /// The figure's clients.
        clients: usize,
        /// The figure.
        tps: f64,
        /// The time per transaction the figure allows, us.
        goal_us: f64,
    },
    /// The fitted value is implausible.
    #[error(
        "--calibrate: {workload}: the fitted postgres_ipc {ipc} is outside 0.01..=10: the model and the figure disagree too much to calibrate (check the figure's machine, workload and client count)"
    )]
    OutOfRange {
        /// The workload.
        workload: String,
        /// The fitted value.
        ipc: f64,
    },
    /// No workload had a usable figure: the reasons, `; `-separated.
    #[error("--calibrate: {0}")]
    NothingToFit(String),
    /// A calibration run failed (its plan or its points): the run's own one line (a child
    /// process's last line of stderr, when the runs are children).
    #[error("{0}")]
    Run(String),
    /// A calibration run in this process failed ([`run_here`]).
    #[error("{0}")]
    Point(#[from] super::driver::PointError),
}

/// One solved calibration with its check.
#[derive(Clone, Debug)]
pub struct Solved {
    /// What to store in the catalogue.
    pub calibrated: Calibrated,
    /// Simulated tps of the baseline at the profile's `postgres_ipc` (uncalibrated).
    pub tps_without: f64,
    /// Simulated tps with the solved value (the check run).
    pub tps_check: f64,
}

/// Runs one plan and returns its result: [`driver::run`] in this process, or (the `lockstack`
/// command's choice under `--machine`) each point in a fresh child process, so that a
/// calibration run's figures do not depend on the runs before it in the same process.
pub type RunPlan<'a> = dyn FnMut(&Plan) -> Result<ExperimentResult, CalibrateError> + 'a;

/// Runs `plan` in this process ([`driver::run`]): a [`RunPlan`] for callers without child
/// processes.
///
/// # Errors
/// The run's one-line error.
pub fn run_here(plan: &Plan) -> Result<ExperimentResult, CalibrateError> {
    Ok(driver::run(plan, &mut |_| {})?)
}

fn baseline_tps(
    e: &'static Experiment,
    base: &Options,
    workload: &str,
    clients: usize,
    ipc: f64,
    run: &mut RunPlan<'_>,
) -> Result<f64, CalibrateError> {
    let mut opts = base.clone();
    opts.clients = Some(vec![clients]);
    opts.runs = Some(1);
    opts.workloads = Some(vec![workload.to_string()]);
    opts.set.push(format!("{POSTGRES_IPC_KEY}={ipc}"));
    let plan = Plan::new(e, &opts).map_err(|e| CalibrateError::Run(e.into()))?;
    let r = run(&plan)?;
    let row = r.row(workload, e.baseline().name, clients).ok_or_else(|| {
        CalibrateError::Run(format!("calibration: no result for {workload} at {clients} clients"))
    })?;
    if row.median <= 0.0 {
        return Err(CalibrateError::Run(format!(
            "calibration: {workload} ran no transaction at {clients} clients"
        )));
    }
    Ok(row.median)
}

/// Fits `sim.postgres_ipc` for each pgbench workload of the plan `base` describes, on
/// `machine` (the running simulation's profile: the caller runs this under `--machine`).
///
/// # Errors
/// One line: a machine the seed did not measure on, an experiment without pgbench workloads
/// (`vm-pin`), a caller's `--set sim.postgres_ipc`, a run that fails, a figure the model cannot
/// reach (what is not PostgreSQL's instructions is alone slower than the figure), or no
/// workload with a usable published baseline figure on that machine. Workloads without one
/// (none published, or only above a third of the cores) are returned as lines saying so and
/// what that means, next to the solved ones.
pub fn solve(
    e: &'static Experiment,
    base: &Options,
    machine: &str,
    cores: u32,
    profile_ipc: f64,
    measured: Option<&[Published]>,
    run: &mut RunPlan<'_>,
) -> Result<(Vec<Solved>, Vec<String>), CalibrateError> {
    if measured.is_none() && e.machine(machine).is_none() {
        let names: Vec<&str> = e.machines.iter().map(|m| m.profile).collect();
        return Err(CalibrateError::NotTheThreadsMachine {
            experiment: e.name,
            machine: machine.to_string(),
            machines: names.join(", "),
        });
    }
    if base.set.iter().any(|a| a.split('=').next().map(str::trim) == Some(POSTGRES_IPC_KEY)) {
        return Err(CalibrateError::IpcSet);
    }
    let workloads: Vec<&str> = e
        .workloads
        .iter()
        .filter(|w| matches!(w.kind, WorkloadKind::Pgbench { .. }))
        .filter(|w| base.workloads.as_ref().is_none_or(|ws| ws.iter().any(|n| n == w.name)))
        .map(|w| w.name)
        .collect();
    if workloads.is_empty() {
        return Err(CalibrateError::NoStatements(e.name));
    }
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for w in workloads {
        let found = match measured {
            Some(figures) => measured_target(e, figures, w).copied(),
            None => target(e, machine, w).copied(),
        };
        let Some(t) = found else {
            let whose = if measured.is_some() { "your --measured file" } else { "the thread" };
            let row = if measured.is_some() {
                format!(
                    "add a row: variant {}, clients, tps, machine {machine}, workload {w}",
                    e.baseline().name
                )
            } else {
                format!(
                    "calibrate against your own: --measured FILE.csv with a row: variant {}, clients, tps, machine {machine}, workload {w}",
                    e.baseline().name
                )
            };
            skipped.push(format!(
                "{w}: {whose} gives no figure for the baseline ({}) on {machine}; not calibrated ({row})",
                e.baseline().name
            ));
            continue;
        };
        let clients = t.clients as usize;
        // A figure at one client has no contention to shape it, whatever the core count (a
        // 2-core profile of the user's own machine calibrates at 1 client too).
        if t.clients > 1 && 3 * t.clients > cores {
            let whose = if measured.is_some() { "your" } else { "the thread's" };
            skipped.push(format!(
                "{w}: {whose} fewest-client baseline figure is at {clients} clients, above a third of {machine}'s {cores} cores, where contention shapes the curve; not calibrated: runs predict with the profile's postgres_ipc (a figure at 1 client calibrates)"
            ));
            continue;
        }
        let (i1, i2) = (profile_ipc, 2.0 * profile_ipc);
        let tps1 = baseline_tps(e, base, w, clients, i1, run)?;
        let tps2 = baseline_tps(e, base, w, clients, i2, run)?;
        // Per-client transaction time, seconds: T = clients / tps.
        let (t1, t2, goal) = (clients as f64 / tps1, clients as f64 / tps2, clients as f64 / t.tps);
        let b = (t1 - t2) / (1.0 / i1 - 1.0 / i2);
        if b <= 0.0 {
            return Err(CalibrateError::NoSpeedUp(w.to_string()));
        }
        let a = t1 - b / i1;
        if goal <= a {
            return Err(CalibrateError::Unreachable {
                workload: w.to_string(),
                rest_us: a * 1e6,
                clients,
                tps: t.tps,
                goal_us: goal * 1e6,
            });
        }
        let ipc = b / (goal - a);
        let ipc = (ipc * 1000.0).round() / 1000.0;
        if !(0.01..=10.0).contains(&ipc) {
            return Err(CalibrateError::OutOfRange { workload: w.to_string(), ipc });
        }
        let check = baseline_tps(e, base, w, clients, ipc, run)?;
        out.push(Solved {
            calibrated: Calibrated {
                experiment: e.name,
                machine: e
                    .machine(machine)
                    .map_or_else(|| &*Box::leak(machine.to_string().into_boxed_str()), |m| m.profile),
                workload: e.workload(w).map_or("", |x| x.name),
                series: t.series,
                clients: t.clients,
                tps: t.tps,
                postgres_ipc: ipc,
            },
            tps_without: tps1,
            tps_check: check,
        });
    }
    if out.is_empty() {
        return Err(CalibrateError::NothingToFit(skipped.join("; ")));
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stored calibration is of a figure `--calibrate` would pick (the baseline's
    /// published point at the fewest clients on one of the seed's machines, figure for figure),
    /// at no more than a third of the machine's cores, with a plausible IPC.
    #[test]
    fn stored_calibrations_name_the_figure_calibrate_solves_for() {
        for c in crate::experiments::calibrations() {
            let e = crate::experiments::find(c.experiment).unwrap();
            let t = target(e, c.machine, c.workload)
                .unwrap_or_else(|| panic!("{}: no target for {} on {}", e.name, c.workload, c.machine));
            assert_eq!((t.series, t.clients, t.tps), (c.series, c.clients, c.tps), "{} {}", e.name, c.line());
            assert!(c.postgres_ipc > 0.01 && c.postgres_ipc < 10.0, "{}", c.line());
            let m = e.machine(c.machine).unwrap();
            assert!(m.clients.contains(&(c.clients as usize)), "{}", c.line());
        }
    }

    #[test]
    fn a_row_round_trips_through_its_toml() {
        let c = Calibrated {
            experiment: "pgxact",
            machine: "xeon-32",
            workload: "select-only",
            series: "s",
            clients: 1,
            tps: 4343.5,
            postgres_ipc: 0.625,
        };
        let back = crate::experiments::parse_calibrations(&c.toml()).unwrap();
        assert_eq!(back, vec![c]);
    }
}
