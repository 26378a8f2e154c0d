//! `--machine PROFILE`: runs a command's measured phase on a simulated machine (issue 17).
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

use clap::{Args, ValueEnum};

use crate::Failure;

/// The simulation flags, global to every workload command.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct SimArgs {
    /// Run the measured phase on a simulated machine: a built-in profile (`lockstack machine
    /// list`) or a profile TOML file. Virtual time: -T and --duration are virtual seconds.
    #[arg(long, global = true, value_name = "PROFILE")]
    pub(crate) machine: Option<String>,
    /// How local work between two synchronization operations is costed under --machine:
    /// deterministic (a segment table, the same output every run) or measured (host time).
    #[arg(long, global = true, value_enum, default_value_t = SimClock::Deterministic)]
    pub(crate) sim_clock: SimClock,
    /// Deterministic clock: read the segment costs from this table (saved by a measured run
    /// with --sim-save-segments); without it every segment costs 20 ns (assumed).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) sim_segments: Option<std::path::PathBuf>,
    /// Measured clock: write the segment costs the run measured to this file (JSON).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) sim_save_segments: Option<std::path::PathBuf>,
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
    if a.machine.is_none() {
        if a.sim_clock != SimClock::Deterministic || a.sim_segments.is_some() || a.sim_save_segments.is_some()
        {
            return Err(Failure::input("--sim-clock, --sim-segments and --sim-save-segments need --machine"));
        }
        return Ok(());
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
pub(crate) use simulating::{finish, pgbench_defaults, setup};

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
pub(crate) fn pgbench_defaults(_engine: &mut lockstack_engine::engine::EngineConfig) {}

#[cfg(feature = "sim")]
mod simulating {
    use std::collections::BTreeMap;
    use std::sync::{Mutex, OnceLock};

    use lockstack_common::sync::hook;
    use lockstack_sim::{ClockMode, MachineProfile, SegmentTable, SimConfig, SimReport, Simulation, facade};
    use serde::Serialize;

    use super::{SimArgs, SimClock};
    use crate::Failure;

    /// The simulation every measured phase of this process runs on.
    static SIM: OnceLock<Simulation> = OnceLock::new();
    /// Each phase's report, in order.
    static REPORTS: Mutex<Vec<SimReport>> = Mutex::new(Vec::new());

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

    /// Resolves the profile and the clock and registers the phase runner.
    pub(crate) fn setup(a: &SimArgs) -> Result<(), Failure> {
        let spec = a.machine.as_deref().expect("setup is called with --machine");
        let profile = MachineProfile::resolve(spec).map_err(|e| Failure::input(format!("--machine: {e}")))?;
        let clock = match a.sim_clock {
            SimClock::Measured => ClockMode::Measured,
            SimClock::Deterministic => ClockMode::Deterministic(match &a.sim_segments {
                None => SegmentTable::default(),
                Some(p) => {
                    let text = std::fs::read_to_string(p)
                        .map_err(|e| Failure::input(format!("--sim-segments {}: {e}", p.display())))?;
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
        let sim = Simulation::new(profile).with_config(SimConfig { clock, ..SimConfig::default() });
        if SIM.set(sim).is_err() || hook::set_phase_runner(run_phase).is_err() {
            return Err(Failure::run("the simulation was set up twice"));
        }
        Ok(())
    }

    /// The simulated machine's hardware threads, under `--machine`.
    pub(super) fn hw_threads() -> Option<usize> {
        SIM.get().map(|s| s.profile().hw_threads() as usize)
    }

    /// Under `--machine`: the pgbench client's per-statement work and round trip default to
    /// the profile's `[pgbench]` figures (unless `--set sim.client_*_us` gave them), and an
    /// in-memory WAL flushes with the profile's `wal_flush_us` (a modelled fsync, slept).
    pub(crate) fn pgbench_defaults(engine: &mut lockstack_engine::engine::EngineConfig) {
        let Some(sim) = SIM.get() else {
            return;
        };
        let p = &sim.profile().pgbench;
        let us = |v: f64| std::time::Duration::from_nanos((v * 1000.0).round() as u64);
        engine.sim_client_cpu.get_or_insert(us(p.client_cpu_us));
        engine.sim_client_rtt.get_or_insert(us(p.client_rtt_us));
        if matches!(engine.wal.sink, lockstack_xlog::WalSink::Memory) {
            engine.wal.sink = lockstack_xlog::WalSink::Modelled { flush_delay: us(p.wal_flush_us) };
        }
    }

    /// One wait class's share of the backends' virtual time (for a harness class, of the same
    /// time, though it is left out of that time: see [`section`]).
    #[derive(Serialize)]
    struct ClassShare {
        class: String,
        waiting_ms: f64,
        spinning_ms: f64,
        share: f64,
    }

    /// One hot line.
    #[derive(Serialize)]
    struct HotLine {
        name: String,
        transfers: u64,
        invalidations: u64,
        accesses: u64,
    }

    /// The "simulated machine" section.
    #[derive(Serialize)]
    struct Section {
        profile: String,
        cores: u32,
        hw_threads: u32,
        clock: String,
        phases: usize,
        virtual_seconds: f64,
        host_seconds: f64,
        events: u64,
        events_per_host_second: f64,
        transfers: u64,
        tasks: usize,
        /// Per wait class of the lock stack (LWLock tranche, `Lock:<tag kind>`, ...): share of
        /// the backends' virtual time (the harness's own waits left out of both).
        waits: Vec<ClassShare>,
        /// The harness's own waits (`Harness:start`, `Harness:end`, ...: start and end gates,
        /// sessions idle between steps), which are not lock waits, with their share of the same
        /// time as `waits`.
        harness_waits: Vec<ClassShare>,
        hot_lines: Vec<HotLine>,
    }

    fn section(reports: &[SimReport]) -> Section {
        let sim = SIM.get().expect("set up");
        let p = sim.profile();
        let (mut waits, mut spins): (BTreeMap<String, u64>, BTreeMap<String, u64>) = Default::default();
        let mut lines: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
        let mut worker_ns = 0u64;
        let mut tasks = 0;
        for r in reports {
            for t in r.stats.tasks.iter().skip(1) {
                tasks += 1;
                if t.name == lockstack_common::backend::WAIT_SAMPLER_THREAD {
                    // A monitor, not a backend: its sleeps would dilute the shares.
                    continue;
                }
                worker_ns += t.running_ns
                    + t.spinning_ns.values().sum::<u64>()
                    + t.waiting_ns.values().sum::<u64>()
                    + t.sleeping_ns
                    + t.joining_ns
                    + t.runnable_ns;
                for (c, v) in &t.waiting_ns {
                    *waits.entry(c.clone()).or_default() += v;
                }
                for (c, v) in &t.spinning_ns {
                    *spins.entry(c.clone()).or_default() += v;
                }
            }
            for l in &r.stats.hot_lines {
                let e = lines.entry(l.name.clone()).or_default();
                e.0 += l.transfers;
                e.1 += l.invalidations;
                e.2 += l.accesses;
            }
        }
        // The backends' time without the harness's own waits (its start and end gates).
        let harness = |c: &str| c.starts_with(hook::HARNESS_CLASS_PREFIX);
        let harness_ns: u64 =
            waits.iter().chain(spins.iter()).filter(|(c, _)| harness(c)).map(|(_, v)| v).sum();
        let worker_ns = worker_ns.saturating_sub(harness_ns);
        let mut classes: Vec<String> = waits.keys().chain(spins.keys()).cloned().collect();
        classes.sort();
        classes.dedup();
        let mut waits: Vec<ClassShare> = classes
            .into_iter()
            .map(|c| {
                let (w, s) = (waits.get(&c).copied().unwrap_or(0), spins.get(&c).copied().unwrap_or(0));
                ClassShare {
                    share: if worker_ns == 0 { 0.0 } else { (w + s) as f64 / worker_ns as f64 },
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
        let host_seconds: f64 = reports.iter().map(|r| r.host.host_seconds).sum();
        let events: u64 = reports.iter().map(|r| r.stats.events).sum();
        Section {
            profile: p.name.clone(),
            cores: p.cores(),
            hw_threads: p.hw_threads(),
            clock: reports.first().map_or_else(String::new, |r| r.stats.clock_mode.clone()),
            phases: reports.len(),
            virtual_seconds: reports.iter().map(|r| r.stats.virtual_seconds).sum(),
            host_seconds,
            events,
            events_per_host_second: if host_seconds > 0.0 { events as f64 / host_seconds } else { 0.0 },
            transfers: reports.iter().map(|r| r.stats.transfers).sum(),
            tasks,
            waits,
            harness_waits,
            hot_lines: hot,
        }
    }

    /// After the command: saves a measured segment table, prints the section and adds it to
    /// the `--json` document (`args`: the raw arguments, for `--json FILE`).
    pub(crate) fn finish(a: &SimArgs, command: &str, args: &[String]) -> Result<(), Failure> {
        let reports = std::mem::take(&mut *REPORTS.lock().unwrap_or_else(|e| e.into_inner()));
        if let Some(path) = &a.sim_save_segments {
            let mut table = SegmentTable::default();
            for r in &reports {
                for (k, v) in &r.segments.segments {
                    let e = table
                        .segments
                        .entry(k.clone())
                        .or_insert(lockstack_sim::SegmentCost { ns: 0.0, samples: 0 });
                    let total = e.ns * e.samples as f64 + v.ns * v.samples as f64;
                    e.samples += v.samples;
                    e.ns = if e.samples == 0 { 0.0 } else { total / e.samples as f64 };
                }
            }
            let text = serde_json::to_string_pretty(&table)
                .map_err(|e| Failure::run(format!("encoding the segment table: {e}")))?;
            std::fs::write(path, text + "\n")
                .map_err(|e| Failure::output(format!("--sim-save-segments {}: {e}", path.display())))?;
        }
        let s = section(&reports);
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
        outln!("  measured phases: {}, simulated tasks: {}", s.phases, s.tasks);
        outln!("  virtual seconds: {:.6}", s.virtual_seconds);
        outln!("  host seconds: {:.3}", s.host_seconds);
        outln!("  simulated events: {} ({:.0} per host second)", s.events, s.events_per_host_second);
        outln!("  line transfers: {}", s.transfers);
        outln!(
            "  waiting, share of the backends' virtual time (per LWLock tranche, heavyweight lock class, other wait event):"
        );
        if s.waits.is_empty() {
            outln!("    (no waits)");
        }
        for w in &s.waits {
            outln!(
                "    {:<28} {:>7.3}%  parked {:.3} ms, spinning {:.3} ms",
                w.class,
                w.share * 100.0,
                w.waiting_ms,
                w.spinning_ms
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
                "    {:<48} {:>10} transfers {:>10} invalidations {:>10} accesses",
                l.name,
                l.transfers,
                l.invalidations,
                l.accesses
            );
        }
        if let Some(path) = json_path(args) {
            add_to_json(&path, &s)?;
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

    /// Adds the section to the `--json` document the command wrote, as `simulated_machine`.
    fn add_to_json(path: &std::path::Path, s: &Section) -> Result<(), Failure> {
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
}
