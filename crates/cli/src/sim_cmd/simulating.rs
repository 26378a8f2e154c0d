//! The simulating build's side of `--machine`: the one simulation every measured phase of the
//! process runs on, the phase runner registered with the sync facade's hook, and the tallies
//! it keeps. Locks: none of the lock stack's; a mutex over the process's phase tallies.

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
/// Whether `--machine` named a profile (built-in or in the user directory) rather than a file.
static PROFILE_NAMED: OnceLock<bool> = OnceLock::new();
/// `--sim-layout-shift`: the heap layout's base shift.
static LAYOUT_SHIFT: OnceLock<usize> = OnceLock::new();
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
    let sim = SIM.get().expect("setup registers SIM before any phase runs, and a tally follows a phase");
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
    let p =
        SIM.get().expect("setup registers SIM before any phase runs, and a report follows a phase").profile();
    let text = match MachineProfile::builtin_source(&p.name) {
        Some(t) => t.to_string(),
        None => PROFILE_FILE
            .get()
            .and_then(|f| lockstack_common::input::read_text_file(f, lockstack_sim::MAX_PROFILE_BYTES).ok())
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
    g.layout_shift = LAYOUT_SHIFT.get().copied().unwrap_or(0);
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

/// The simulated machine as a stored calibration sees it: `None` when this process does not
/// simulate.
pub(crate) fn calibration_target() -> Option<super::CalibrationTarget> {
    let sim = SIM.get()?;
    Some(super::CalibrationTarget {
        profile: sim.profile().name.clone(),
        named: PROFILE_NAMED.get().copied().unwrap_or(false),
        postgres_costs: POSTGRES_COSTS.get().copied().flatten().is_some(),
    })
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
            if is_background(&task.name) {
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
    let spec = a.machine.as_deref().expect("main calls setup only when --machine was given");
    let _ = LAYOUT_SHIFT.set(a.sim_layout_shift);
    let _ = PROFILE_NAMED.set(
        MachineProfile::builtin_source(spec).is_some()
            || lockstack_workloads::experiments::user_dir::profile_path(spec).is_some(),
    );
    let profile = super::machine_profile(a)?;
    if MachineProfile::builtin_source(spec).is_none() {
        // The file's comments say which figures are cited (read again for the report).
        // A user profile by name is its file in the user directory.
        let file = lockstack_workloads::experiments::user_dir::profile_path(spec)
            .unwrap_or_else(|| std::path::PathBuf::from(spec));
        let _ = PROFILE_FILE.set(file);
    }
    let clock = match a.sim_clock {
        SimClock::Measured => ClockMode::Measured,
        SimClock::Deterministic => ClockMode::Deterministic(match &a.sim_segments {
            None => SegmentTable::builtin().clone(),
            Some(p) => {
                let text = lockstack_common::input::read_text_file(p, lockstack_sim::MAX_SEGMENT_TABLE_BYTES)
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
            Some(lockstack_sim::PgCostRates::new(lockstack_sim::PgCostFile::builtin(), release, rate, source))
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

/// Whether the task named `name` is a monitor or a background process, not a backend (the
/// wait sampler, the WAL writer): its sleeps would dilute the backends' shares, and a
/// wait-event sampler, which reads the backends' slots only, never sees its waits.
fn is_background(name: &str) -> bool {
    [lockstack_common::backend::WAIT_SAMPLER_THREAD, lockstack_common::backend::WAL_WRITER_THREAD]
        .contains(&name)
}

/// Every phase's time split so far over the backends, as in the report's section: the main
/// task (the phase's own body: timer, progress, joins) and the background tasks left out.
fn phase_times() -> Vec<TimeSplit> {
    let reports = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
    reports
        .iter()
        .map(|r| {
            let mut s = TimeSplit::default();
            for t in r.stats.tasks.iter().skip(1).filter(|t| !is_background(&t.name)) {
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
        machine: SimulatedMachine { profile: p.name.clone(), cores: p.cores(), hw_threads: p.hw_threads() },
        phase_times,
        engine_defaults: experiment_engine_defaults,
        postgres_ipc: POSTGRES_COSTS.get().copied().flatten(),
        layout_shift: LAYOUT_SHIFT.get().copied().unwrap_or(0),
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
        flush && matches!(sink, lockstack_xlog::WalSink::Memory | lockstack_xlog::WalSink::Modelled { .. })
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
    let mut tally =
        ADOPTED.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_else(|| tally_of(&reports));
    // Children's phases (`experiment` under --machine) carry the children's ground, and a
    // child runs one point without knowing that its postgres_ipc is a stored calibration: the
    // calibration this process noted (the plan's) is the run's.
    if let Some(c) = CALIBRATION.lock().unwrap_or_else(|e| e.into_inner()).clone() {
        tally.ground.calibration = c;
    }
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
