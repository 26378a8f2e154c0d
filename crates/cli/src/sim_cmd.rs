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
    /// with --sim-save-segments); without it, the table built into the simulating binary
    /// (crates/sim/segments/builtin.json). A segment the table lacks costs its median.
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
    /// Under --machine: sample another heap layout by shifting what the command allocates by
    /// about N x 16 bytes (0 to 4096; 0, the default, changes nothing). A simulated figure
    /// depends on which objects share a 64-byte line; rerunning with several N measures how
    /// much (docs/sim.md, "Layout"). An experiment adds each point's run index to it, so that
    /// its runs sample layouts as well as keys.
    #[arg(long, global = true, default_value_t = 0, value_name = "N")]
    pub(crate) sim_layout_shift: usize,
    /// Measured clock: write the segment costs the run measured to this file (JSON).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) sim_save_segments: Option<std::path::PathBuf>,
    /// The deterministic clock's calibration pass: run the command natively (no --machine),
    /// time the lock stack's code between every two synchronization operations on this host,
    /// and write the segment table to FILE (JSON) for `--machine P --sim-segments FILE`.
    /// Run it at 1 client: contention is the simulator's to model, not the table's.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) time_segments: Option<std::path::PathBuf>,
    /// The user directory: stored calibrations (calibrations.toml, written by `experiment
    /// --calibrate`) and profiles (machines/NAME.toml, found by `--machine NAME` after the
    /// built-ins). Default: $LOCKSTACK_HOME, else $XDG_CONFIG_HOME/lockstack, else
    /// ~/.config/lockstack.
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) home: Option<std::path::PathBuf>,
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
    if a.sim_layout_shift > lockstack_workloads::layout::MAX_SHIFT {
        return Err(Failure::input(format!(
            "--sim-layout-shift must be at most {}, got {}",
            lockstack_workloads::layout::MAX_SHIFT,
            a.sim_layout_shift
        )));
    }
    if a.machine.is_none() {
        if a.sim_clock != SimClock::Deterministic
            || a.sim_segments.is_some()
            || a.sim_save_segments.is_some()
            || a.costs.is_some()
            || !a.machine_set.is_empty()
            || a.sim_layout_shift != 0
        {
            return Err(Failure::input(
                "--sim-clock, --sim-segments, --sim-save-segments, --sim-layout-shift, --costs and --machine-set need --machine",
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

/// A profile by name or file: a built-in, else the user's `machines/NAME.toml` (the user
/// directory, `--home`), else the file `spec`.
///
/// # Errors
/// The profile's own error (unknown, unreadable, invalid), one line; an unknown name also
/// names the user directory's file it looked for.
pub(crate) fn resolve_profile(spec: &str) -> Result<lockstack_sim::MachineProfile, ResolveProfileError> {
    use lockstack_workloads::experiments::user_dir;
    if let Some(p) = lockstack_sim::MachineProfile::builtin(spec) {
        return Ok(p);
    }
    if let Some(path) = user_dir::profile_path(spec) {
        return Ok(lockstack_sim::MachineProfile::resolve(&path.to_string_lossy())?);
    }
    lockstack_sim::MachineProfile::resolve(spec).map_err(|e| match e {
        lockstack_sim::ProfileError::Unknown { .. } if lockstack_sim::profile::looks_like_path(spec) => {
            ResolveProfileError::Profile(e)
        }
        lockstack_sim::ProfileError::Unknown { .. } => match user_dir::dir() {
            Ok(d) => ResolveProfileError::NoUserProfile {
                source: e,
                file: d.join(user_dir::MACHINES).join(format!("{spec}.toml")),
                spec: spec.to_string(),
            },
            Err(_) => ResolveProfileError::Profile(e),
        },
        _ => ResolveProfileError::Profile(e),
    })
}

/// Why [`resolve_profile`] found no profile.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveProfileError {
    /// The profile's own error: unknown (and no user directory), unreadable, invalid.
    #[error(transparent)]
    Profile(#[from] lockstack_sim::ProfileError),
    /// An unknown name that is not a user profile either; `file` is the user directory's file
    /// looked for.
    #[error("{source}; nor a user profile {} (`lockstack machine new {spec}` writes one)", file.display())]
    NoUserProfile {
        /// The profile crate's "unknown" error.
        source: lockstack_sim::ProfileError,
        /// `DIR/machines/SPEC.toml`.
        file: std::path::PathBuf,
        /// The name given.
        spec: String,
    },
}

/// The `--machine` profile with the `--machine-set` overrides applied.
///
/// # Errors
/// One line: the profile cannot be resolved, an override names no constant of it (the valid
/// ones listed) or makes it invalid.
pub(crate) fn machine_profile(a: &SimArgs) -> Result<lockstack_sim::MachineProfile, Failure> {
    let spec = a.machine.as_deref().ok_or_else(|| Failure::input("--machine-set needs --machine"))?;
    let profile = resolve_profile(spec).map_err(|e| Failure::input(format!("--machine: {e}")))?;
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
    adopt, calibration_target, finish, finish_timing, note_calibration, pgbench_defaults, setup,
    setup_timing, tally_if_simulating,
};

/// What a stored calibration is looked up and checked by: the simulated machine's profile name,
/// whether `--machine` named it (a built-in or a user profile) rather than giving a file, and
/// whether PostgreSQL's costs are charged (the only ones `sim.postgres_ipc` rates).
#[derive(Debug, Clone)]
pub(crate) struct CalibrationTarget {
    /// The profile's name.
    pub(crate) profile: String,
    /// Given by name, not as a file.
    pub(crate) named: bool,
    /// `--costs postgres`.
    pub(crate) postgres_costs: bool,
}

/// Without the simulator there is no section to note a calibration in.
#[cfg(not(feature = "sim"))]
pub(crate) fn note_calibration(_text: String) {}

/// Without the simulator no process simulates a machine.
#[cfg(not(feature = "sim"))]
pub(crate) fn calibration_target() -> Option<CalibrationTarget> {
    None
}

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
mod simulating;

mod section;
pub(crate) use section::{add_to_json, print_section, section};

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
    /// `--sim-layout-shift`: the heap layout's shift, in 16-byte units.
    #[serde(default)]
    pub(crate) layout_shift: usize,
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
