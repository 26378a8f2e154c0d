//! `--machine PROFILE`: runs a command's measured phase on a simulated machine.
//!
//! The ordinary `lockstack` is built without the sync facade's hook (it costs the production
//! path a quarter of an uncontended LWLock acquisition), so given `--machine` it re-runs, with
//! the same arguments, the simulating binary that build.rs builds next to it
//! (`LOCKSTACK_SIM_BIN`; Unix `exec`, so stdio and the exit code pass through). The simulating
//! binary (cargo feature `sim`) resolves the profile, registers a phase runner with the facade
//! (`hook::set_phase_runner`), and runs the command: set-up runs natively, and every measured
//! phase (`hook::measured_phase`: the clients, workers or sessions, their timer, progress,
//! sleeps and wait-event sampling) runs inside `Simulation::run`, so every clock is virtual.
//! After the command's own report it prints the "simulated machine" section (and adds it to the
//! `--json` document).

use std::collections::BTreeMap;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

use crate::Failure;

/// The simulation flags, global to every workload command.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct SimArgs {
    /// Run the measured phase on a simulated machine: a built-in profile (`lockstack machine
    /// list`) or a profile TOML file. Virtual time: -T and --duration are virtual seconds.
    #[arg(long, global = true, value_name = "PROFILE")]
    pub(crate) machine: Option<String>,
    /// Under --machine: override constants of the profile for this run, KEY=VALUE
    /// comma-separated or repeated (`costs.owner_grace_ns=40`, `pgbench.wal_flush_us=100`; a
    /// key's last part alone is accepted when unambiguous). The keys: every number under the
    /// profile's [costs] and [pgbench].
    #[arg(long, global = true, value_name = "KEY=VALUE,...", value_delimiter = ',')]
    pub(crate) machine_set: Vec<String>,
    /// How local work between two synchronization operations is costed under --machine:
    /// deterministic (a segment table, the same output every run) or measured (host time).
    #[arg(long, global = true, value_enum, default_value_t = SimClock::Deterministic)]
    pub(crate) sim_clock: SimClock,
    /// Deterministic clock: read the segment costs from this table (saved by a measured run
    /// with --sim-save-segments); without it every segment costs 20 ns (assumed).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) sim_segments: Option<std::path::PathBuf>,
    /// Whose costs local work carries under --machine: postgres (PostgreSQL 15's instructions,
    /// measured with callgrind, for each region the lock stack marks — lock-manager, ProcArray,
    /// buffer, WAL and CLOG work under their locks and each statement's executor work — at the
    /// profile's instruction rate; this code's own costs elsewhere) or own (this code's own
    /// costs everywhere, for simulating the crates in another system). Default: postgres for
    /// pgbench and experiment, own for the micro-benchmarks.
    #[arg(long, global = true, value_enum, value_name = "WHOSE")]
    pub(crate) costs: Option<SimCosts>,
    /// Measured clock: write the segment costs the run measured to this file (JSON).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) sim_save_segments: Option<std::path::PathBuf>,
    /// The deterministic clock's calibration pass: run the command natively (no --machine),
    /// time the lock stack's code between every two synchronization operations on this host,
    /// and write the segment table to FILE (JSON) for `--machine P --sim-segments FILE`.
    /// Run it at 1 client: contention is the simulator's to model, not the table's.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) time_segments: Option<std::path::PathBuf>,
}

/// The `--costs` modes.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SimCosts {
    /// PostgreSQL's measured instructions for the regions the lock stack marks.
    Postgres,
    /// This code's own costs everywhere.
    Own,
}

/// The `--sim-clock` modes.
#[derive(ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum SimClock {
    /// Segment costs from a table: byte-identical output run to run.
    #[default]
    Deterministic,
    /// Segment costs measured on this host (varies run to run).
    Measured,
}

/// Whether any simulation flag was given without `--machine` (refused: it would be ignored).
pub(crate) fn check_flags(a: &SimArgs, command: &str) -> Result<(), Failure> {
    if a.time_segments.is_some() {
        if a.machine.is_some() {
            return Err(Failure::input(
                "--time-segments runs natively to calibrate --machine runs; give it without --machine",
            ));
        }
        if command == "machine" {
            return Err(Failure::input(
                "--time-segments applies to the workload commands, not to 'lockstack machine'",
            ));
        }
        if a.sim_clock != SimClock::Deterministic || a.sim_segments.is_some() || a.sim_save_segments.is_some()
        {
            return Err(Failure::input("--sim-clock, --sim-segments and --sim-save-segments need --machine"));
        }
        if let Some(p) = &a.time_segments
            && p.is_dir()
        {
            return Err(Failure::input(format!("--time-segments {}: is a directory", p.display())));
        }
        return Ok(());
    }
    if a.machine.is_none() {
        if a.sim_clock != SimClock::Deterministic
            || a.sim_segments.is_some()
            || a.sim_save_segments.is_some()
            || a.costs.is_some()
            || !a.machine_set.is_empty()
        {
            return Err(Failure::input(
                "--sim-clock, --sim-segments, --sim-save-segments, --costs and --machine-set need --machine",
            ));
        }
        return Ok(());
    }
    if !a.machine_set.is_empty() {
        machine_profile(a)?;
    }
    if command == "machine" {
        return Err(Failure::input(
            "--machine applies to the workload commands (pgbench, lwlock, ...), not to 'lockstack machine'",
        ));
    }
    if a.sim_segments.is_some() && a.sim_clock == SimClock::Measured {
        return Err(Failure::input("--sim-segments is read by --sim-clock deterministic, not measured"));
    }
    if a.sim_save_segments.is_some() && a.sim_clock == SimClock::Deterministic {
        return Err(Failure::input("--sim-save-segments needs --sim-clock measured"));
    }
    Ok(())
}

/// The `--machine-set` list as (key, value) pairs, keys as given.
///
/// # Errors
/// One line naming the entry that is not KEY=VALUE with a number.
pub(crate) fn machine_set_pairs(a: &SimArgs) -> Result<Vec<(String, f64)>, Failure> {
    a.machine_set
        .iter()
        .map(|kv| {
            let (k, v) = kv.split_once('=').ok_or_else(|| {
                Failure::input(format!("--machine-set {kv:?}: expected KEY=VALUE (costs.owner_grace_ns=40)"))
            })?;
            let v: f64 = v
                .trim()
                .parse()
                .map_err(|_| Failure::input(format!("--machine-set {kv:?}: {v:?} is not a number")))?;
            Ok((k.trim().to_string(), v))
        })
        .collect()
}

/// The `--machine` profile with the `--machine-set` overrides applied.
///
/// # Errors
/// One line: the profile cannot be resolved, an override names no constant of it (the valid
/// ones listed) or makes it invalid.
pub(crate) fn machine_profile(a: &SimArgs) -> Result<lockstack_sim::MachineProfile, Failure> {
    let spec = a.machine.as_deref().ok_or_else(|| Failure::input("--machine-set needs --machine"))?;
    let profile = lockstack_sim::MachineProfile::resolve(spec)
        .map_err(|e| Failure::input(format!("--machine: {e}")))?;
    let pairs = machine_set_pairs(a)?;
    if pairs.is_empty() {
        return Ok(profile);
    }
    profile.with_constants(&pairs).map_err(|e| Failure::input(format!("--machine-set: {e}")))
}

/// Where the simulating binary is: `LOCKSTACK_SIM_BIN` in the environment, else where build.rs
/// built it.
#[cfg(not(feature = "sim"))]
fn sim_bin() -> std::path::PathBuf {
    std::env::var_os("LOCKSTACK_SIM_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("LOCKSTACK_SIM_BIN")))
}

/// The ordinary binary's `--machine`: replaces this process with the simulating binary, same
/// arguments. Returns only on failure.
#[cfg(not(feature = "sim"))]
pub(crate) fn reexec() -> Failure {
    let bin = sim_bin();
    if !bin.is_file() {
        return Failure::input(format!(
            "--machine needs the simulating binary {}, which is missing: rebuild with `cargo build --release -p lockstack-cli` (without LOCKSTACK_NO_SIM_BUILD=1)",
            bin.display()
        ));
    }
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(std::env::args_os().skip(1));
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let e = cmd.exec();
        Failure::input(format!("--machine: could not run {}: {e}", bin.display()))
    }
    #[cfg(not(unix))]
    {
        match cmd.status() {
            Ok(s) => std::process::exit(s.code().unwrap_or(2)),
            Err(e) => Failure::input(format!("--machine: could not run {}: {e}", bin.display())),
        }
    }
}

#[cfg(feature = "sim")]
pub(crate) use simulating::{
    adopt, finish, finish_timing, note_calibration, pgbench_defaults, setup, setup_timing,
    tally_if_simulating,
};

/// Without the simulator there is no section to note a calibration in.
#[cfg(not(feature = "sim"))]
pub(crate) fn note_calibration(_text: String) {}

/// The simulation an experiment's driver collects each point's time split from: `None`
/// without `--machine` (and in the ordinary binary, which never simulates).
pub(crate) fn experiment_simulation() -> Option<lockstack_workloads::experiments::driver::Simulation> {
    #[cfg(feature = "sim")]
    {
        simulating::experiment_simulation()
    }
    #[cfg(not(feature = "sim"))]
    {
        None
    }
}

/// Under `--machine`, refuses a resolved configuration whose synchronization the model cannot
/// see (a dependency's own locks): `why` is the reason one of `lockstack_engine::simcheck`'s
/// functions (or the LWLock micro-benchmark's) gave for the configuration after presets,
/// `--set` and flag aliases. One line, exit code 1. Without `--machine` it accepts anything.
pub(crate) fn refuse(why: Option<String>) -> Result<(), Failure> {
    #[cfg(feature = "sim")]
    if simulating::hw_threads().is_some()
        && let Some(why) = why
    {
        return Err(Failure::input(format!("--machine: {why}")));
    }
    let _ = why;
    Ok(())
}

/// Refuses a `--set sim.*` knob (the simulated machine's client, statement and rate figures)
/// in a command that does not run on a simulated machine, where it would change nothing: one
/// line naming the assignment, exit code 1.
pub(crate) fn refuse_sim_knobs_natively(set: &[String]) -> Result<(), Failure> {
    if simulated() {
        return Ok(());
    }
    match set.iter().find(|s| s.trim_start().starts_with("sim.")) {
        Some(s) => Err(Failure::input(format!(
            "--set {s}: sim.* knobs apply only under --machine PROFILE (natively they change nothing); add --machine or drop it"
        ))),
        None => Ok(()),
    }
}

/// Whether this command runs on the simulated machine (`--machine`, in the simulating binary).
pub(crate) fn simulated() -> bool {
    #[cfg(feature = "sim")]
    {
        simulating::hw_threads().is_some()
    }
    #[cfg(not(feature = "sim"))]
    {
        false
    }
}

/// The note on busy threads against cores: the simulated machine's hardware threads under
/// `--machine`, this host's otherwise.
pub(crate) fn machine_note(threads: usize) -> lockstack_workloads::report::MachineNote {
    #[cfg(feature = "sim")]
    if let Some(hw) = simulating::hw_threads() {
        return lockstack_workloads::report::MachineNote { cores: hw, threads, oversubscribed: threads > hw };
    }
    lockstack_workloads::report::MachineNote::for_threads(threads)
}

/// Without the simulator there is nothing to default (see the simulating build's version).
#[cfg(not(feature = "sim"))]
pub(crate) fn pgbench_defaults(_run: &mut lockstack_workloads::settings::RunConfig, _wal: bool) {}

#[cfg(feature = "sim")]
mod simulating {
    use std::sync::{Mutex, OnceLock};

    use super::{
        CacheTally, Ground, HotLine, MissTally, PhaseTally, SimArgs, SimClock, SimCosts, SimTally, Sources,
    };
    use crate::Failure;
    use lockstack_common::sync::hook;
    use lockstack_sim::{ClockMode, MachineProfile, SegmentTable, SimConfig, SimReport, Simulation, facade};

    use lockstack_workloads::experiments::driver::{self, SimulatedMachine, TimeSplit};

    /// The simulation every measured phase of this process runs on.
    static SIM: OnceLock<Simulation> = OnceLock::new();
    /// Where the deterministic clock's segment costs come from (for the report).
    static SEGMENT_SOURCE: OnceLock<String> = OnceLock::new();
    /// Whose costs local work carries (for the report).
    static COSTS_SOURCE: OnceLock<String> = OnceLock::new();
    /// With PostgreSQL's costs, the profile's `postgres_ipc`.
    static POSTGRES_COSTS: OnceLock<Option<f64>> = OnceLock::new();
    /// The client and server costs in use (the last engine configured). Plain values: state
    /// kept from before a phase allocates nothing, so that the phase's allocations land where
    /// they would without it (the deterministic clock keys lines by address).
    static COSTS_IN_USE: Mutex<Option<CostsInUse>> = Mutex::new(None);
    /// The calibration the command applied (`experiment`'s `calibrated to:` lines).
    static CALIBRATION: Mutex<Option<String>> = Mutex::new(None);
    /// A profile given as a file: its path, for the comments beside its figures.
    static PROFILE_FILE: OnceLock<std::path::PathBuf> = OnceLock::new();

    /// The WAL flush an engine was configured with.
    #[derive(Clone, Copy)]
    enum WalFlush {
        Modelled(std::time::Duration),
        Memory,
        Files,
    }

    /// The client and server costs an engine was configured with, and which of them are not
    /// the profile's.
    #[derive(Clone, Copy)]
    struct CostsInUse {
        client_cpu: Option<std::time::Duration>,
        client_rtt: Option<std::time::Duration>,
        wal: WalFlush,
        postgres_ipc: Option<f64>,
        /// Client CPU, round trip, WAL flush: not the profile's figure.
        overridden: [bool; 3],
    }
    /// Each phase's report, in order.
    static REPORTS: Mutex<Vec<SimReport>> = Mutex::new(Vec::new());
    /// The tally [`finish`] prints instead of this process's own phases (`experiment --jobs`:
    /// its children's phases, merged).
    static ADOPTED: Mutex<Option<SimTally>> = Mutex::new(None);

    /// The tally of `reports`: the simulated machine's profile and each phase's figures.
    fn tally_of(reports: &[SimReport]) -> SimTally {
        let sim = SIM.get().expect("set up");
        let p = sim.profile();
        SimTally {
            profile: p.name.clone(),
            cores: p.cores(),
            hw_threads: p.hw_threads(),
            segment_costs: SEGMENT_SOURCE.get().cloned().unwrap_or_default(),
            costs: COSTS_SOURCE.get().cloned().unwrap_or_default(),
            ground: ground(),
            phases: reports.iter().map(PhaseTally::of).collect(),
        }
    }

    /// The run's ground as the section states it: a calibration the command noted, else "not
    /// calibrated" and the rate PostgreSQL's counts were charged at.
    fn ground() -> Ground {
        let p = SIM.get().expect("set up").profile();
        let text = match MachineProfile::builtin_source(&p.name) {
            Some(t) => t.to_string(),
            None => PROFILE_FILE
                .get()
                .and_then(|f| {
                    lockstack_common::input::read_text_file(f, lockstack_sim::MAX_PROFILE_BYTES).ok()
                })
                .unwrap_or_default(),
        };
        let mut g = Ground { description: p.description.clone(), ..Ground::default() };
        (g.provenance, g.cited, g.assumed) = super::provenance(&text);
        if let Some(c) = *COSTS_IN_USE.lock().unwrap_or_else(|e| e.into_inner()) {
            let as_us = |d: Option<std::time::Duration>| d.map(|d| d.as_nanos() as f64 / 1000.0);
            g.client_cpu_us = as_us(c.client_cpu);
            g.client_rtt_us = as_us(c.client_rtt);
            g.wal_flush = match c.wal {
                WalFlush::Modelled(d) => format!("modelled fsync {} us", d.as_nanos() as f64 / 1000.0),
                WalFlush::Memory => "none (in-memory WAL, never flushed)".to_string(),
                WalFlush::Files => "the host's fdatasync (--data-dir), host time".to_string(),
            };
            g.postgres_ipc_set = c.postgres_ipc;
            g.overridden = ["client_cpu_us", "client_rtt_us", "wal_flush_us"]
                .iter()
                .zip(c.overridden)
                .filter(|(_, o)| *o)
                .map(|(k, _)| k.to_string())
                .collect();
        }
        g.calibration = CALIBRATION.lock().unwrap_or_else(|e| e.into_inner()).clone().unwrap_or_default();
        if g.calibration.is_empty() {
            g.calibration = match (POSTGRES_COSTS.get().copied().flatten(), g.postgres_ipc_set) {
                (None, _) => "not calibrated (--costs own: no PostgreSQL counts to rate)".to_string(),
                (Some(_), Some(ipc)) => format!("not calibrated (--set sim.postgres_ipc {ipc})"),
                (Some(ipc), None) => format!(
                    "not calibrated (the profile's postgres_ipc {ipc}, {})",
                    g.provenance.get("postgres_ipc").map_or("assumed", String::as_str)
                ),
            };
        }
        g
    }

    /// Records the calibration the command applied (`experiment`'s `calibrated to:` lines),
    /// for the section's `calibration:` line.
    pub(crate) fn note_calibration(text: String) {
        *CALIBRATION.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }

    /// The tally of this process's phases so far (`experiment --point K` stores it in the
    /// point file).
    pub(crate) fn tally() -> SimTally {
        tally_of(&REPORTS.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// [`tally`] when this process set up a simulated machine (`--machine`); `None` for a
    /// native run of the simulating binary.
    pub(crate) fn tally_if_simulating() -> Option<SimTally> {
        SIM.get().map(|_| tally())
    }

    /// Makes [`finish`] print `tally` (other processes' phases) instead of this process's.
    pub(crate) fn adopt(tally: SimTally) {
        *ADOPTED.lock().unwrap_or_else(|e| e.into_inner()) = Some(tally);
    }

    impl PhaseTally {
        fn of(r: &SimReport) -> PhaseTally {
            let mut t = PhaseTally {
                clock: r.stats.clock_mode.clone(),
                virtual_seconds: r.stats.virtual_seconds,
                host_seconds: r.host.host_seconds,
                events: r.stats.events,
                transfers: r.stats.transfers,
                segment_overhead_ns: r.host.segment_overhead_ns,
                clipped_segments: r.host.clipped_segments,
                segments_from_table: r.stats.segments_from_table,
                segments_at_default: r.stats.segments_at_default,
                segments_by_file_pair: r.stats.segments_by_file_pair,
                sources: {
                    let ts = &r.stats.time_sources;
                    Sources {
                        own_code_ns: ts.own_code_ns,
                        untimed_ns: ts.untimed_ns,
                        replaced_own_ns: ts.replaced_own_ns,
                        postgres_ns: ts.postgres_ns,
                        modelled_ns: ts.modelled_ns,
                        regions: ts.regions.iter().map(|(k, v)| (k.clone(), (v.calls, v.ns))).collect(),
                        unknown_regions: ts.unknown_regions.clone(),
                        postgres_ipc: ts.postgres_ipc.into_iter().collect(),
                    }
                },
                ..PhaseTally::default()
            };
            for task in r.stats.tasks.iter().skip(1) {
                t.tasks += 1;
                if [
                    lockstack_common::backend::WAIT_SAMPLER_THREAD,
                    lockstack_common::backend::WAL_WRITER_THREAD,
                ]
                .contains(&task.name.as_str())
                {
                    // A monitor or a background process, not a backend: its sleeps would
                    // dilute the backends' shares, and a wait-event sampler, which reads the
                    // backends' slots only, never sees its waits.
                    t.background_tasks += 1;
                    for (c, v) in task.waiting_ns.iter().chain(&task.spinning_ns) {
                        *t.background_ns.entry(c.clone()).or_default() += v;
                    }
                    continue;
                }
                t.worker_ns += task.running_ns
                    + task.spinning_ns.values().sum::<u64>()
                    + task.waiting_ns.values().sum::<u64>()
                    + task.sleeping_ns
                    + task.joining_ns
                    + task.runnable_ns;
                for (c, v) in &task.waiting_ns {
                    *t.waiting_ns.entry(c.clone()).or_default() += v;
                }
                for (c, v) in &task.spinning_ns {
                    *t.spinning_ns.entry(c.clone()).or_default() += v;
                }
            }
            t.caches = r.stats.caches.as_ref().map(|c| CacheTally {
                private_kib: c.private_kib,
                private_ways: c.private_ways,
                llc_kib: c.llc_kib,
                llc_ways: c.llc_ways,
                private_evictions: c.private_evictions,
                llc_evictions: c.llc_evictions,
                back_invalidations: c.back_invalidations,
            });
            t.misses = r
                .stats
                .misses_by_structure
                .iter()
                .map(|(k, m)| {
                    let m = MissTally {
                        lines: m.lines,
                        accesses: m.accesses,
                        transfers: m.transfers,
                        llc_fills: m.llc_fills,
                        memory_fills: m.memory_fills,
                        refills: m.refills,
                    };
                    (k.clone(), m)
                })
                .collect();
            t.hot_lines = r
                .stats
                .hot_lines
                .iter()
                .map(|l| HotLine {
                    name: l.name.clone(),
                    transfers: l.transfers,
                    invalidations: l.invalidations,
                    accesses: l.accesses,
                })
                .collect();
            t
        }
    }

    /// The phase runner: the measured phase as the main task of [`SIM`]. A simulation that
    /// cannot complete (a deadlock of the simulated tasks) fails the run: exit code 2.
    fn run_phase(phase: &mut dyn FnMut()) {
        let sim = SIM.get().expect("setup registers the simulation before the runner");
        match facade::run_phase(sim, phase) {
            Ok(r) => REPORTS.lock().unwrap_or_else(|e| e.into_inner()).push(r),
            Err(e) => {
                let text = e.to_string();
                let line: Vec<&str> = text.lines().map(str::trim).collect();
                errln!("lockstack: --machine {}: {}", sim.profile().name, line.join("; "));
                std::process::exit(2);
            }
        }
    }

    /// Resolves the profile, the clock and the costs and registers the phase runner.
    /// `default_costs` applies without `--costs`; `release` (a preset name) picks the release
    /// whose PostgreSQL counts apply.
    pub(crate) fn setup(a: &SimArgs, default_costs: SimCosts, release: Option<&str>) -> Result<(), Failure> {
        let spec = a.machine.as_deref().expect("setup is called with --machine");
        let profile = super::machine_profile(a)?;
        if MachineProfile::builtin_source(spec).is_none() {
            // The file's comments say which figures are cited (read again for the report).
            let _ = PROFILE_FILE.set(std::path::PathBuf::from(spec));
        }
        let clock = match a.sim_clock {
            SimClock::Measured => ClockMode::Measured,
            SimClock::Deterministic => ClockMode::Deterministic(match &a.sim_segments {
                None => SegmentTable::builtin().clone(),
                Some(p) => {
                    let text =
                        lockstack_common::input::read_text_file(p, lockstack_sim::MAX_SEGMENT_TABLE_BYTES)
                            .map_err(|e| Failure::input(format!("--sim-segments {e}")))?;
                    serde_json::from_str(&text)
                        .map_err(|e| Failure::input(format!("--sim-segments {}: {e}", p.display())))?
                }
            }),
        };
        if let Some(p) = &a.sim_save_segments
            && p.is_dir()
        {
            return Err(Failure::input(format!("--sim-save-segments {}: is a directory", p.display())));
        }
        // The lock stack's segments are host-timed (measured) or host-calibrated: the host's own
        // cache misses are in them, so the model does not charge cold misses again.
        let segment_overhead_ns =
            if matches!(clock, ClockMode::Measured) { facade::segment_overhead_ns(&profile) } else { 0.0 };
        // A segment the table does not know costs the table's median (20 ns, assumed, if empty).
        let default_segment_ns = match &clock {
            ClockMode::Deterministic(t) if !t.segments.is_empty() => t.median_ns(),
            _ => SimConfig::default().default_segment_ns,
        };
        let source = match (&clock, &a.sim_segments) {
            (ClockMode::Measured, _) => "host time, measured".to_string(),
            (_, Some(p)) => format!("table {}", p.display()),
            (_, None) => "built-in table (crates/sim/segments/builtin.json)".to_string(),
        };
        let _ = SEGMENT_SOURCE
            .set(format!("{source}; a segment it lacks costs its median, {default_segment_ns:.1} ns"));
        let pg_costs = match a.costs.unwrap_or(default_costs) {
            SimCosts::Own => None,
            SimCosts::Postgres => {
                let rate = profile.costs.instructions_per_ns();
                let source = format!(
                    "PostgreSQL 15 instruction counts (crates/sim/costs/pg15.toml) for release {} at {rate:.2} instructions/ns ({} GHz x IPC {})",
                    release.unwrap_or(lockstack_sim::pgcosts::MEASURED_RELEASE),
                    profile.costs.clock_ghz,
                    profile.costs.postgres_ipc
                );
                Some(lockstack_sim::PgCostRates::new(
                    lockstack_sim::PgCostFile::builtin(),
                    release,
                    rate,
                    source,
                ))
            }
        };
        let _ = POSTGRES_COSTS.set(pg_costs.as_ref().map(|_| profile.costs.postgres_ipc));
        let _ = COSTS_SOURCE.set(match &pg_costs {
            Some(r) => format!("postgres: {}", r.source),
            None => "own: this code's own segment costs everywhere".to_string(),
        });
        let sim = Simulation::new(profile).with_config(SimConfig {
            clock,
            default_segment_ns,
            segment_overhead_ns,
            cold_misses: false,
            pg_costs,
            ..SimConfig::default()
        });
        if SIM.set(sim).is_err() || hook::set_phase_runner(run_phase).is_err() {
            return Err(Failure::run("the simulation was set up twice"));
        }
        Ok(())
    }

    /// Each timed phase's segment table (`--time-segments`), in order.
    static TIMED: Mutex<Vec<SegmentTable>> = Mutex::new(Vec::new());

    fn time_phase(phase: &mut dyn FnMut()) {
        let table = lockstack_sim::timer::time_phase(phase);
        TIMED.lock().unwrap_or_else(|e| e.into_inner()).push(table);
    }

    /// `--time-segments`: registers the native timing pass as the phase runner.
    pub(crate) fn setup_timing() -> Result<(), Failure> {
        hook::set_phase_runner(time_phase).map_err(|_| Failure::run("the phase runner was set up twice"))
    }

    /// Merges tables of several phases (sample-weighted means).
    fn merge_tables(tables: &[SegmentTable]) -> SegmentTable {
        let mut table = SegmentTable::default();
        for t in tables {
            table.merge(t);
        }
        table
    }

    /// After a `--time-segments` command: writes the table and says what it holds.
    pub(crate) fn finish_timing(path: &std::path::Path) -> Result<(), Failure> {
        let tables = std::mem::take(&mut *TIMED.lock().unwrap_or_else(|e| e.into_inner()));
        if tables.is_empty() {
            return Err(Failure::input("--time-segments: this command has no measured phase to time"));
        }
        let table = merge_tables(&tables);
        let text = serde_json::to_string_pretty(&table)
            .map_err(|e| Failure::run(format!("encoding the segment table: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure::output(format!("--time-segments {}: {e}", path.display())))?;
        let samples: u64 = table.segments.values().map(|c| c.samples).sum();
        let total: f64 = table.segments.values().map(|c| c.ns * c.samples as f64).sum();
        outln!();
        outln!(
            "segment timing (native calibration pass): {} segments, {} samples, mean {:.1} ns after {:.1} ns of timing subtracted from each; written to {}",
            table.segments.len(),
            samples,
            if samples == 0 { 0.0 } else { total / samples as f64 },
            lockstack_sim::timer::timer_overhead_ns(),
            path.display()
        );
        Ok(())
    }

    /// Every phase's time split so far, the main task (the phase's own body: timer, progress,
    /// joins) left out as in the report's section.
    fn phase_times() -> Vec<TimeSplit> {
        let reports = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
        reports
            .iter()
            .map(|r| {
                let mut s = TimeSplit::default();
                for t in r.stats.tasks.iter().skip(1) {
                    s.tasks += 1;
                    s.running_ns += t.running_ns;
                    for (c, v) in t.waiting_ns.iter().chain(&t.spinning_ns) {
                        *s.waits_ns.entry(c.clone()).or_default() += v;
                    }
                    s.sleeping_ns += t.sleeping_ns;
                    s.joining_ns += t.joining_ns;
                    s.runnable_ns += t.runnable_ns;
                }
                s
            })
            .collect()
    }

    /// The experiment driver's view of the simulation, under `--machine`.
    pub(super) fn experiment_simulation() -> Option<driver::Simulation> {
        let sim = SIM.get()?;
        let p = sim.profile();
        Some(driver::Simulation {
            machine: SimulatedMachine {
                profile: p.name.clone(),
                cores: p.cores(),
                hw_threads: p.hw_threads(),
            },
            phase_times,
            engine_defaults: experiment_engine_defaults,
            postgres_ipc: POSTGRES_COSTS.get().copied().flatten(),
        })
    }

    /// The simulated machine's hardware threads, under `--machine`.
    pub(super) fn hw_threads() -> Option<usize> {
        SIM.get().map(|s| s.profile().hw_threads() as usize)
    }

    /// Under `--machine`: the pgbench client's per-statement work and round trip default to
    /// the profile's `[pgbench]` figures (unless `--set sim.client_*_us` gave them), and (with
    /// `wal`) an in-memory WAL flushes with the profile's `wal_flush_us` (a modelled fsync,
    /// slept). pgbench calls it with `wal` before the caller's `--set` list (so that `--set
    /// wal.flush=memory` keeps an unflushed WAL) and without it after.
    pub(crate) fn pgbench_defaults(run: &mut lockstack_workloads::settings::RunConfig, wal: bool) {
        let replace = |sink: &lockstack_xlog::WalSink| wal && matches!(sink, lockstack_xlog::WalSink::Memory);
        profile_defaults(run, replace);
    }

    /// The profile's client costs per statement (unless set) and, where `replace` says so of
    /// the engine's WAL sink, its WAL flush as a modelled fsync.
    fn profile_defaults(
        lockstack_workloads::settings::RunConfig { engine, sim: costs }: &mut lockstack_workloads::settings::RunConfig,
        replace: impl Fn(&lockstack_xlog::WalSink) -> bool,
    ) {
        let Some(sim) = SIM.get() else {
            return;
        };
        let p = &sim.profile().pgbench;
        // `--set sim.caches`: the cache capacities of the phases that follow.
        sim.set_caches(costs.caches);
        let us = |v: f64| std::time::Duration::from_nanos((v * 1000.0).round() as u64);
        costs.client_cpu.get_or_insert(us(p.client_cpu_us));
        costs.client_rtt.get_or_insert(us(p.client_rtt_us));
        // PostgreSQL's waits: LWLocks queue at once, spinlocks sleep as s_lock.c does (the
        // native defaults depart from both for a machine with fewer cores than threads).
        engine.lwlock_spin_rounds.get_or_insert(0);
        engine.lwlock_spin_schedule.get_or_insert(lockstack_lwlock::SpinSchedule::Postgres);
        if replace(&engine.wal.sink) {
            engine.wal.sink = lockstack_xlog::WalSink::Modelled { flush_delay: us(p.wal_flush_us) };
        }
        // The costs in use, for the section (the last engine configured: pgbench's after its
        // `--set` list, an experiment's last point).
        let wal = match &engine.wal.sink {
            lockstack_xlog::WalSink::Modelled { flush_delay } => WalFlush::Modelled(*flush_delay),
            lockstack_xlog::WalSink::Memory => WalFlush::Memory,
            lockstack_xlog::WalSink::Files { .. } => WalFlush::Files,
        };
        *COSTS_IN_USE.lock().unwrap_or_else(|e| e.into_inner()) = Some(CostsInUse {
            client_cpu: costs.client_cpu,
            client_rtt: costs.client_rtt,
            wal,
            postgres_ipc: costs.postgres_ipc,
            overridden: [
                costs.client_cpu != Some(us(p.client_cpu_us)),
                costs.client_rtt != Some(us(p.client_rtt_us)),
                !matches!(wal, WalFlush::Modelled(d) if d == us(p.wal_flush_us)),
            ],
        });
    }

    /// An experiment point's engine under `--machine`: the client's costs as pgbench's, and
    /// (`flush`) the profile's WAL flush in place of an in-memory or modelled sink (an
    /// experiment's own modelled figure is for native runs; the machine's storage is a property
    /// of its profile).
    fn experiment_engine_defaults(run: &mut lockstack_workloads::settings::RunConfig, flush: bool) {
        profile_defaults(run, |sink| {
            flush
                && matches!(sink, lockstack_xlog::WalSink::Memory | lockstack_xlog::WalSink::Modelled { .. })
        });
    }

    /// After the command: saves a measured segment table, prints the section and adds it to
    /// the `--json` document (`args`: the raw arguments, for `--json FILE`).
    pub(crate) fn finish(a: &SimArgs, command: &str, args: &[String]) -> Result<(), Failure> {
        let reports = std::mem::take(&mut *REPORTS.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(path) = &a.sim_save_segments {
            let tables: Vec<SegmentTable> = reports.iter().map(|r| r.segments.clone()).collect();
            let table = merge_tables(&tables);
            let text = serde_json::to_string_pretty(&table)
                .map_err(|e| Failure::run(format!("encoding the segment table: {e}")))?;
            std::fs::write(path, text + "\n")
                .map_err(|e| Failure::output(format!("--sim-save-segments {}: {e}", path.display())))?;
        }
        let tally =
            ADOPTED.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_else(|| tally_of(&reports));
        if tally.phases.is_empty() {
            // Nothing was simulated (`experiment NAME --list-points`): no section.
            return Ok(());
        }
        let s = super::section(&tally);
        super::print_section(command, &s);
        if let Some(path) = json_path(args) {
            super::add_to_json(&path, &s)?;
        }
        Ok(())
    }

    fn json_path(args: &[String]) -> Option<std::path::PathBuf> {
        let mut out = None;
        for (i, a) in args.iter().enumerate() {
            if a == "--json" {
                out = args.get(i + 1).map(std::path::PathBuf::from);
            } else if let Some(v) = a.strip_prefix("--json=") {
                out = Some(v.into());
            }
        }
        out
    }
}

/// The figures of one simulated phase that the "simulated machine" section adds up: sums over
/// its tasks (the main task excluded), wait classes and hot lines by name. A phase's tally
/// goes into `experiment --point K`'s file, so that merging a sweep prints the section a
/// single process prints.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub(crate) struct PhaseTally {
    /// `deterministic` or `measured`.
    clock: String,
    /// Virtual seconds of the phase.
    virtual_seconds: f64,
    /// Host wall-clock seconds the phase took.
    host_seconds: f64,
    /// Simulated events.
    events: u64,
    /// Core-to-core line transfers.
    transfers: u64,
    /// Simulated tasks other than the main one.
    tasks: usize,
    /// Of those, the background tasks (the wait sampler, the WAL writer): not backends.
    #[serde(default)]
    background_tasks: usize,
    /// The backends' virtual time (every task but the main one and the background tasks), ns:
    /// running, spinning, waiting, sleeping, joining, runnable.
    worker_ns: u64,
    /// The backends' parked (or asleep under a class) time per wait class, ns.
    waiting_ns: BTreeMap<String, u64>,
    /// The backends' spinning time per wait class, ns.
    spinning_ns: BTreeMap<String, u64>,
    /// The background tasks' parked, asleep or spinning time per wait class, ns (the WAL
    /// writer's `Activity:WalWriterMain` sleeps and its `IO:WALSync` flushes).
    #[serde(default)]
    background_ns: BTreeMap<String, u64>,
    /// The phase's hot lines, as the simulator reports them.
    hot_lines: Vec<HotLine>,
    /// Measured clock: host ns subtracted from each segment as the measurement's own cost.
    #[serde(default)]
    segment_overhead_ns: f64,
    /// Measured clock: segments the host interrupted, charged their call-site pair's mean.
    #[serde(default)]
    clipped_segments: u64,
    /// Deterministic clock: segments charged from the segment table, and at its median.
    #[serde(default)]
    segments_from_table: u64,
    #[serde(default)]
    segments_at_default: u64,
    /// Deterministic clock: segments charged their file pair's mean (their lines moved).
    #[serde(default)]
    segments_by_file_pair: u64,
    /// Where the tasks' virtual time came from (all tasks, the main one included).
    #[serde(default)]
    sources: Sources,
    /// The caches' capacities and evictions; `None` without capacity.
    #[serde(default)]
    caches: Option<CacheTally>,
    /// Private-cache misses per data structure (the simulator's `misses_by_structure`).
    #[serde(default)]
    misses: BTreeMap<String, MissTally>,
}

/// The capacities of a phase's caches and its evictions (the simulator's `CacheStats`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub(crate) struct CacheTally {
    private_kib: u32,
    private_ways: u32,
    llc_kib: u32,
    llc_ways: u32,
    private_evictions: u64,
    llc_evictions: u64,
    back_invalidations: u64,
}

/// One data structure's private-cache misses (the simulator's `StructureMisses`), summable.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
pub(crate) struct MissTally {
    /// Lines of the structure that missed.
    lines: u64,
    /// Accesses to them.
    accesses: u64,
    /// Misses served by another core.
    transfers: u64,
    /// Misses served by a last-level cache (capacity).
    llc_fills: u64,
    /// Misses served by memory (first touches and refills).
    memory_fills: u64,
    /// Refills from memory of an evicted line (capacity).
    refills: u64,
}

impl MissTally {
    fn add(&mut self, o: &MissTally) {
        self.lines += o.lines;
        self.accesses += o.accesses;
        self.transfers += o.transfers;
        self.llc_fills += o.llc_fills;
        self.memory_fills += o.memory_fills;
        self.refills += o.refills;
    }

    /// All misses.
    pub(crate) fn misses(&self) -> u64 {
        self.transfers + self.llc_fills + self.memory_fills
    }

    /// Misses the caches' capacity caused.
    pub(crate) fn capacity(&self) -> u64 {
        self.llc_fills + self.refills
    }
}

/// Where virtual time came from, ns (the simulator's `TimeSources`, summable over phases).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub(crate) struct Sources {
    /// This code's own segments outside PostgreSQL cost regions.
    own_code_ns: u64,
    /// The part of `own_code_ns` the segment table did not know (charged its median).
    untimed_ns: u64,
    /// This code's own segments inside regions, replaced by PostgreSQL's counts.
    replaced_own_ns: u64,
    /// PostgreSQL's counts.
    postgres_ns: u64,
    /// Modelled work (the client's CPU, `sim.statement_cpu_us`).
    modelled_ns: u64,
    /// Per region: calls and ns.
    regions: BTreeMap<String, (u64, u64)>,
    /// Regions entered without a figure in the cost table.
    unknown_regions: Vec<String>,
    /// The instructions per cycle PostgreSQL's counts were charged at, each distinct value of
    /// the phases (a calibrated or `--set` `sim.postgres_ipc`, else the profile's).
    #[serde(default)]
    postgres_ipc: Vec<f64>,
}

impl Sources {
    fn add(&mut self, o: &Sources) {
        self.own_code_ns += o.own_code_ns;
        self.untimed_ns += o.untimed_ns;
        self.replaced_own_ns += o.replaced_own_ns;
        self.postgres_ns += o.postgres_ns;
        self.modelled_ns += o.modelled_ns;
        for (k, (c, n)) in &o.regions {
            let e = self.regions.entry(k.clone()).or_default();
            e.0 += c;
            e.1 += n;
        }
        for r in &o.unknown_regions {
            if !self.unknown_regions.contains(r) {
                self.unknown_regions.push(r.clone());
            }
        }
        for &i in &o.postgres_ipc {
            if !self.postgres_ipc.iter().any(|&x| (x - i).abs() < 1e-9) {
                self.postgres_ipc.push(i);
            }
        }
    }
}

/// The simulated machine a process ran on and its phases, in order.
#[derive(Serialize, Deserialize, Debug, Clone)]
pub(crate) struct SimTally {
    /// Profile name.
    pub(crate) profile: String,
    /// Cores of the profile.
    pub(crate) cores: u32,
    /// Hardware threads of the profile.
    pub(crate) hw_threads: u32,
    /// Deterministic clock: where segment costs came from (the table and its default).
    #[serde(default)]
    pub(crate) segment_costs: String,
    /// Whose costs local work carried (`postgres: ...` or `own: ...`).
    #[serde(default)]
    pub(crate) costs: String,
    /// What the run stands on besides the costs.
    #[serde(default)]
    pub(crate) ground: Ground,
    /// Each measured phase.
    pub(crate) phases: Vec<PhaseTally>,
}

/// What a simulated run stands on besides its topology and cost mode: where the profile's
/// figures come from, the calibration, and the client and server costs in use.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
pub(crate) struct Ground {
    /// The profile's description line.
    pub(crate) description: String,
    /// For the figures the run's costs rest on (`clock_ghz`, `postgres_ipc`, `client_cpu_us`,
    /// `client_rtt_us`, `wal_flush_us`): `cited` or `assumed`, as the comment beside each in
    /// the profile says (`assumed (default)`: the profile does not give it).
    pub(crate) provenance: BTreeMap<String, String>,
    /// How many of the profile's figures carry a citation, and how many say "assumed".
    pub(crate) cited: usize,
    /// See `cited`.
    pub(crate) assumed: usize,
    /// `calibrated to: ...`, or `not calibrated (...)` and the rate used.
    pub(crate) calibration: String,
    /// The pgbench client's own CPU per statement in use, us (`sim.client_cpu_us`).
    pub(crate) client_cpu_us: Option<f64>,
    /// The client-backend round trip per statement in use, us (`sim.client_rtt_us`).
    pub(crate) client_rtt_us: Option<f64>,
    /// The WAL flush in use (a modelled fsync and its time, none, or the host's).
    pub(crate) wal_flush: String,
    /// `--set sim.postgres_ipc`, when given.
    pub(crate) postgres_ipc_set: Option<f64>,
    /// The ground figures whose value in use is not the profile's (`--set`, `--data-dir`).
    #[serde(default)]
    pub(crate) overridden: Vec<String>,
}

/// The figures of the profile whose source the section names.
#[cfg(feature = "sim")]
const GROUND_FIGURES: [&str; 5] =
    ["clock_ghz", "postgres_ipc", "client_cpu_us", "client_rtt_us", "wal_flush_us"];

/// Reads a profile's TOML text for the comment beside each figure: the ground figures'
/// `cited` or `assumed`, and how many figures of the file are cited and how many assumed
/// (a comment that opens with "assumed" is assumed, any other comment a citation: "Intel
/// Xeon X7560, the profile's assumed model: 2.26 GHz (Intel ARK)" cites the clock of a model
/// the profile assumes).
#[cfg(feature = "sim")]
fn provenance(text: &str) -> (BTreeMap<String, String>, usize, usize) {
    let (mut map, mut cited, mut assumed) = (BTreeMap::new(), 0, 0);
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let (code, comment) = line.split_once('#').unwrap_or((line, ""));
        let Some((key, _)) = code.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if key == "name" || key == "description" {
            continue;
        }
        let kind = if comment.trim().to_lowercase().starts_with("assumed") {
            assumed += 1;
            "assumed"
        } else if comment.trim().is_empty() {
            "uncommented"
        } else {
            cited += 1;
            "cited"
        };
        if GROUND_FIGURES.contains(&key) {
            map.insert(key.to_string(), kind.to_string());
        }
    }
    for k in GROUND_FIGURES {
        map.entry(k.to_string()).or_insert_with(|| "assumed (default)".to_string());
    }
    (map, cited, assumed)
}

/// One wait class's share of the backends' virtual time.
#[derive(Serialize)]
struct ClassShare {
    class: String,
    /// Parked, or asleep under the class (a spinlock's back-off sleeps), ms.
    waiting_ms: f64,
    /// Running under the class (spinning, retrying), ms.
    spinning_ms: f64,
    /// Parked, asleep or spinning: (waiting + spinning) / the backends' time, 0 to 1.
    share: f64,
    /// Parked or asleep only, 0 to 1: the time a backend publishes the class's wait event,
    /// what a wait-event sampler counts under it.
    parked_share: f64,
    /// Spinning only, 0 to 1: no wait event is published, a sampler counts it as "no wait
    /// event".
    spinning_share: f64,
}

/// One hot line.
#[derive(Serialize, Deserialize, Debug, Clone)]
struct HotLine {
    name: String,
    transfers: u64,
    invalidations: u64,
    accesses: u64,
}

/// The "simulated machine" section.
#[derive(Serialize)]
pub(crate) struct Section {
    profile: String,
    cores: u32,
    hw_threads: u32,
    clock: String,
    phases: usize,
    virtual_seconds: f64,
    host_seconds: f64,
    events: u64,
    events_per_host_second: f64,
    /// Measured clock: host ns subtracted from each segment as the measurement's own cost.
    segment_overhead_ns: f64,
    /// Measured clock: segments the host interrupted, charged their call-site pair's mean.
    clipped_segments: u64,
    /// Deterministic clock: where segment costs come from.
    segment_costs: String,
    /// Deterministic clock: segments charged from the table, and at its median.
    segments_from_table: u64,
    segments_at_default: u64,
    /// Deterministic clock: segments charged the mean of the table's segments between the
    /// same two files (their call sites moved since the table was made).
    segments_by_file_pair: u64,
    /// Whose costs local work carried.
    costs: String,
    /// The profile's sources, the calibration and the client and server costs in use.
    ground: Ground,
    /// Where the tasks' virtual time came from.
    time_sources: Sources,
    /// The segments the table did not know, as a share of the tasks' virtual time.
    untimed_share: f64,
    transfers: u64,
    tasks: usize,
    /// Of `tasks`, the backends: every task but the background ones (the wait sampler, the
    /// WAL writer), whose time the shares are of.
    backend_tasks: usize,
    /// The backends' virtual time the shares are of (the harness's own waits left out), ms.
    backend_ms: f64,
    /// Per wait class of the lock stack (LWLock tranche, `Lock:<tag kind>`, ...): share of
    /// the backends' virtual time (the harness's own waits left out of both).
    waits: Vec<ClassShare>,
    /// The background tasks' waits per class (the WAL writer's sleeps and flushes), ms: not
    /// in the backends' time, nor in a wait-event sampler's profile.
    background_waits: Vec<(String, f64)>,
    /// The harness's own waits (`Harness:start`, `Harness:end`, ...: start and end gates,
    /// sessions idle between steps), which are not lock waits, with their share of the same
    /// time as `waits`.
    harness_waits: Vec<ClassShare>,
    hot_lines: Vec<HotLine>,
    /// The caches' capacities and the phases' evictions summed; `None` without capacity.
    caches: Option<CacheTally>,
    /// Private-cache misses per data structure, summed over the phases.
    pub(crate) misses_by_structure: BTreeMap<String, MissTally>,
}

/// The section of `t`: its phases added up, wait classes by share, the ten hottest lines.
pub(crate) fn section(t: &SimTally) -> Section {
    let (mut waits, mut spins): (BTreeMap<String, u64>, BTreeMap<String, u64>) = Default::default();
    let mut lines: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let mut worker_ns = 0u64;
    let (mut tasks, mut background_tasks) = (0, 0);
    let mut background: BTreeMap<String, u64> = BTreeMap::new();
    for r in &t.phases {
        tasks += r.tasks;
        background_tasks += r.background_tasks;
        worker_ns += r.worker_ns;
        for (c, v) in &r.background_ns {
            *background.entry(c.clone()).or_default() += v;
        }
        for (c, v) in &r.waiting_ns {
            *waits.entry(c.clone()).or_default() += v;
        }
        for (c, v) in &r.spinning_ns {
            *spins.entry(c.clone()).or_default() += v;
        }
        for l in &r.hot_lines {
            let e = lines.entry(l.name.clone()).or_default();
            e.0 += l.transfers;
            e.1 += l.invalidations;
            e.2 += l.accesses;
        }
    }
    // The backends' time without the harness's own waits (its start and end gates).
    let harness = |c: &str| c.starts_with(lockstack_common::sync::hook::HARNESS_CLASS_PREFIX);
    let harness_ns: u64 = waits.iter().chain(spins.iter()).filter(|(c, _)| harness(c)).map(|(_, v)| v).sum();
    let worker_ns = worker_ns.saturating_sub(harness_ns);
    let mut classes: Vec<String> = waits.keys().chain(spins.keys()).cloned().collect();
    classes.sort();
    classes.dedup();
    let mut waits: Vec<ClassShare> = classes
        .into_iter()
        .map(|c| {
            let (w, s) = (waits.get(&c).copied().unwrap_or(0), spins.get(&c).copied().unwrap_or(0));
            let of = |ns: u64| if worker_ns == 0 { 0.0 } else { ns as f64 / worker_ns as f64 };
            ClassShare {
                share: of(w + s),
                parked_share: of(w),
                spinning_share: of(s),
                waiting_ms: w as f64 / 1e6,
                spinning_ms: s as f64 / 1e6,
                class: c,
            }
        })
        .collect();
    waits.sort_by(|a, b| b.share.total_cmp(&a.share).then_with(|| a.class.cmp(&b.class)));
    let (harness_waits, waits): (Vec<ClassShare>, Vec<ClassShare>) =
        waits.into_iter().partition(|w| harness(&w.class));
    let mut hot: Vec<HotLine> = lines
        .into_iter()
        .map(|(name, (transfers, invalidations, accesses))| HotLine {
            name,
            transfers,
            invalidations,
            accesses,
        })
        .collect();
    hot.sort_by(|a, b| b.transfers.cmp(&a.transfers).then_with(|| a.name.cmp(&b.name)));
    hot.truncate(10);
    let host_seconds: f64 = t.phases.iter().map(|r| r.host_seconds).sum();
    let events: u64 = t.phases.iter().map(|r| r.events).sum();
    let mut sources = Sources::default();
    for r in &t.phases {
        sources.add(&r.sources);
    }
    let untimed_share = if worker_ns == 0 { 0.0 } else { sources.untimed_ns as f64 / worker_ns as f64 };
    let mut caches: Option<CacheTally> = None;
    let mut misses_by_structure: BTreeMap<String, MissTally> = BTreeMap::new();
    for r in &t.phases {
        if let Some(c) = &r.caches {
            let e = caches.get_or_insert_with(|| CacheTally {
                private_evictions: 0,
                llc_evictions: 0,
                back_invalidations: 0,
                ..c.clone()
            });
            e.private_evictions += c.private_evictions;
            e.llc_evictions += c.llc_evictions;
            e.back_invalidations += c.back_invalidations;
        }
        for (k, m) in &r.misses {
            misses_by_structure.entry(k.clone()).or_default().add(m);
        }
    }
    Section {
        caches,
        misses_by_structure,
        profile: t.profile.clone(),
        cores: t.cores,
        hw_threads: t.hw_threads,
        clock: t.phases.first().map_or_else(String::new, |r| r.clock.clone()),
        phases: t.phases.len(),
        virtual_seconds: t.phases.iter().map(|r| r.virtual_seconds).sum(),
        host_seconds,
        events,
        events_per_host_second: if host_seconds > 0.0 { events as f64 / host_seconds } else { 0.0 },
        segment_overhead_ns: t.phases.first().map_or(0.0, |r| r.segment_overhead_ns),
        clipped_segments: t.phases.iter().map(|r| r.clipped_segments).sum(),
        segment_costs: t.segment_costs.clone(),
        segments_from_table: t.phases.iter().map(|r| r.segments_from_table).sum(),
        segments_at_default: t.phases.iter().map(|r| r.segments_at_default).sum(),
        segments_by_file_pair: t.phases.iter().map(|r| r.segments_by_file_pair).sum(),
        costs: t.costs.clone(),
        ground: t.ground.clone(),
        time_sources: sources,
        untimed_share,
        transfers: t.phases.iter().map(|r| r.transfers).sum(),
        tasks,
        backend_tasks: tasks.saturating_sub(background_tasks),
        backend_ms: worker_ns as f64 / 1e6,
        waits,
        background_waits: background.into_iter().map(|(c, ns)| (c, ns as f64 / 1e6)).collect(),
        harness_waits,
        hot_lines: hot,
    }
}

/// Prints the "simulated machine" section after `command`'s report.
pub(crate) fn print_section(command: &str, s: &Section) {
    outln!();
    outln!(
        "simulated machine: {} ({} cores, {} hardware threads), {} clock",
        s.profile,
        s.cores,
        s.hw_threads,
        s.clock
    );
    if command == "pgbench" {
        outln!("  tps and latencies above are per virtual second of the simulated machine");
    }
    print_ground(s);
    outln!("  measured phases: {}, simulated tasks: {}", s.phases, s.tasks);
    outln!("  virtual seconds: {:.6}", s.virtual_seconds);
    outln!("  host seconds: {:.3}", s.host_seconds);
    outln!("  simulated events: {} ({:.0} per host second)", s.events, s.events_per_host_second);
    if s.clock == "deterministic" {
        let n = s.segments_from_table + s.segments_at_default + s.segments_by_file_pair;
        let share = |k: u64| if n == 0 { 0.0 } else { 100.0 * k as f64 / n as f64 };
        outln!(
            "  segment costs: {}; {:.1}% of segments found in it, {:.1}% by their two files (their lines moved), {:.1}% at its median",
            s.segment_costs,
            share(s.segments_from_table),
            share(s.segments_by_file_pair),
            share(s.segments_at_default)
        );
    }
    if !s.costs.is_empty() {
        outln!("  costs: {}", s.costs);
        let ms = |ns: u64| ns as f64 / 1e6;
        let ts = &s.time_sources;
        outln!(
            "  local work charged: PostgreSQL's counts {:.3} ms ({} regions), this code's own {:.3} ms (of which untimed {:.3} ms, {:.2}% of the tasks' time), modelled client and statement work {:.3} ms; this code's own {:.3} ms inside regions replaced by PostgreSQL's counts",
            ms(ts.postgres_ns),
            ts.regions.len(),
            ms(ts.own_code_ns),
            ms(ts.untimed_ns),
            s.untimed_share * 100.0,
            ms(ts.modelled_ns),
            ms(ts.replaced_own_ns)
        );
        if !ts.postgres_ipc.is_empty() {
            let list: Vec<String> = ts.postgres_ipc.iter().map(|i| format!("{i:.3}")).collect();
            outln!(
                "  PostgreSQL's counts charged at IPC {} (the rate the costs line names is the profile's; a calibrated or --set sim.postgres_ipc replaces it)",
                list.join(", ")
            );
        }
        if !ts.unknown_regions.is_empty() {
            outln!(
                "  regions without a PostgreSQL figure (charged as own code): {}",
                ts.unknown_regions.join(", ")
            );
        }
    }
    if s.clock == "measured" {
        outln!(
            "  measured segments: {:.1} host ns of measuring subtracted from each, {} interrupted by the host charged their mean",
            s.segment_overhead_ns,
            s.clipped_segments
        );
    }
    outln!("  line transfers: {}", s.transfers);
    outln!(
        "  waiting, share of the {} backends' virtual time ({:.3} ms: every task but the main one, the wait sampler and the WAL writer, each from its start to its end, the harness's gates left out):",
        s.backend_tasks,
        s.backend_ms
    );
    outln!(
        "    per LWLock tranche (LWLock:<tranche> in a wait-event profile), heavyweight lock class, other wait event; parked or asleep is the time the backend publishes the wait event (what a wait-event sampler counts), spinning publishes none (a sampler counts it as no wait event)"
    );
    if s.waits.is_empty() {
        outln!("    (no waits)");
    }
    for w in &s.waits {
        outln!(
            "    {:<28} {:>7.3}%  parked or asleep {:.3}% ({:.3} ms), spinning {:.3}% ({:.3} ms)",
            w.class,
            w.share * 100.0,
            w.parked_share * 100.0,
            w.waiting_ms,
            w.spinning_share * 100.0,
            w.spinning_ms
        );
    }
    if !s.background_waits.is_empty() {
        let list: Vec<String> = s.background_waits.iter().map(|(c, ms)| format!("{c} {ms:.3} ms")).collect();
        outln!(
            "  background tasks' waits (the WAL writer's; not in the backends' time above, nor in a wait-event profile): {}",
            list.join(", ")
        );
    }
    if !s.harness_waits.is_empty() {
        let list: Vec<String> = s
            .harness_waits
            .iter()
            .map(|w| format!("{} {:.3} ms", w.class, w.waiting_ms + w.spinning_ms))
            .collect();
        outln!(
            "  harness waits (start/end gates, idle sessions; not lock waits, left out above): {}",
            list.join(", ")
        );
    }
    outln!("  hottest cache lines (by core-to-core transfers):");
    if s.hot_lines.is_empty() {
        outln!("    (no line moved between cores)");
    }
    for l in &s.hot_lines {
        outln!(
            "    {:<40} {:>10} transfers {:>10} invalidations {:>10} accesses",
            l.name,
            l.transfers,
            l.invalidations,
            l.accesses
        );
    }
    match &s.caches {
        Some(c) => outln!(
            "  caches: {} KiB private per core ({}-way), {} KiB last-level ({}-way, inclusive), LRU; {} private and {} LLC evictions, {} private copies back-invalidated",
            c.private_kib,
            c.private_ways,
            c.llc_kib,
            c.llc_ways,
            c.private_evictions,
            c.llc_evictions,
            c.back_invalidations
        ),
        None => outln!(
            "  caches: no capacity (the profile has no [caches], or --set sim.caches=off): lines leave a cache only when another core takes them"
        ),
    }
    let mut top: Vec<(&String, &MissTally)> = s.misses_by_structure.iter().collect();
    top.sort_by(|a, b| b.1.misses().cmp(&a.1.misses()).then_with(|| a.0.cmp(b.0)));
    outln!("  private-cache misses by structure (top 10; capacity: from the LLC or refilled from memory):");
    for (name, m) in top.into_iter().take(10) {
        outln!(
            "    {:<40} {:>10} misses {:>10} capacity {:>10} transfers {:>10} accesses",
            name,
            m.misses(),
            m.capacity(),
            m.transfers,
            m.accesses
        );
    }
}

/// The section's ground lines: the profile's sources, the calibration, the costs in use.
fn print_ground(s: &Section) {
    let g = &s.ground;
    let prov = |k: &str| {
        if g.overridden.iter().any(|o| o == k) {
            "set for this run, not the profile's".to_string()
        } else {
            format!("the profile's, {}", g.provenance.get(k).map_or("assumed (default)", String::as_str))
        }
    };
    outln!(
        "  profile: {}; its figures: {} cited, {} assumed (`lockstack machine show {}`)",
        g.description,
        g.cited,
        g.assumed,
        s.profile
    );
    outln!("  calibration: {}", g.calibration);
    let us = |v: Option<f64>| v.map_or_else(|| "not charged".to_string(), |v| format!("{v} us"));
    let ipc = match g.postgres_ipc_set {
        Some(v) => format!("; sim.postgres_ipc {v} (--set)"),
        None => String::new(),
    };
    if g.wal_flush.is_empty() && g.client_cpu_us.is_none() {
        outln!("  client and server costs: none modelled (no client side: a micro-benchmark){ipc}");
        return;
    }
    outln!(
        "  client and server costs: client CPU {} per statement ({}), round trip {} ({}), WAL flush {} ({}){ipc}",
        us(g.client_cpu_us),
        prov("client_cpu_us"),
        us(g.client_rtt_us),
        prov("client_rtt_us"),
        g.wal_flush,
        prov("wal_flush_us"),
    );
}

/// Adds the section to the `--json` document the command wrote, as `simulated_machine`.
pub(crate) fn add_to_json(path: &std::path::Path, s: &Section) -> Result<(), Failure> {
    if !path.is_file() {
        // A device or FIFO was written once; it cannot be amended.
        return Ok(());
    }
    let bad = |e: &dyn std::fmt::Display| Failure::output(format!("--json {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
    let mut doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e))?;
    let value = serde_json::to_value(s).map_err(|e| bad(&e))?;
    match &mut doc {
        serde_json::Value::Object(m) => {
            m.insert("simulated_machine".to_string(), value);
        }
        other => {
            let inner = std::mem::take(other);
            *other = serde_json::json!({ "result": inner, "simulated_machine": value });
        }
    }
    crate::write_json(Some(path), &doc)
}
