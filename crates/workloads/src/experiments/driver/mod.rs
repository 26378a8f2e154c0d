//! Runs an experiment: every (run, workload, clients, variant) point on a fresh engine (pgbench
//! workloads, [`crate::pgbench::runner::run`]) or a fresh buffer pool (`vm-pin`,
//! [`crate::micro::buffers::run`]), then min / median / max throughput per (workload, variant,
//! clients) and the experiment's counters normalised per operation.
//!
//! Points are ordered run by run, and within a run variants alternate at each client count, so
//! that a slow stretch of a shared machine spreads over every variant instead of penalising one.
//!
//! A run is three steps that a sweep spread over processes or hosts can also take apart:
//! [`Plan::point_specs`] enumerates the points (index K, in that order), [`run_point`] measures
//! one and returns its serializable [`Point`], and [`assemble`] builds the [`ExperimentResult`]
//! from every point; [`run`] is the three in one process, and
//! [`super::points`] writes and merges the per-point files of `--point K`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::usl::{self, UslRow};
use super::{Counter, Experiment, Per, VM_CHECK_KEY, Variant, Workload, WorkloadKind};
use crate::micro::buffers::{self, BufferScenario, BuffersConfig, Check};
use crate::pgbench::runner::{self, PgbenchConfig};
use crate::pgbench::script::Builtin;
use crate::report::MachineNote;
use crate::settings::{self, RunConfig};
use lockstack_common::Counters;
use lockstack_engine::engine::EngineConfig;

pub use super::limits::{MAX_CLIENTS, MAX_DURATION_S, MAX_RUNS};

/// Heap pages of the `scan` table per unit of `--scale` (16 MiB).
pub const SCAN_PAGES_PER_SCALE: u32 = 2048;

/// Heap pages of the `vm-delete` table per unit of `--scale` (2 MiB, the seed's table size).
pub const DELETE_PAGES_PER_SCALE: u32 = 256;

/// Buffers per unit of scale ([`settings::BUFFERS_PER_SCALE`], shared with `lockstack pgbench`).
pub const BUFFERS_PER_SCALE: usize = settings::BUFFERS_PER_SCALE;

/// Buffers beyond the loaded tables (64 MiB) for the rows a run adds (history, new versions);
/// the pool is [`settings::pool_buffers`]`(scale, BUFFER_HEADROOM)`, the function
/// `lockstack pgbench` sizes its pool with, but with half its headroom
/// ([`settings::PGBENCH_BUFFER_HEADROOM`], 16384): a smaller pool halves the load time of every
/// point, which dominates short points. Runs long enough to outgrow it start evicting, which
/// shows in the `BufFreelist` counters.
pub const BUFFER_HEADROOM: usize = 8192;

/// The `--set` keys `vm-pin` accepts: the buffer-pool designs its pool is built with.
pub const VM_PIN_KEYS: [&str; 3] = ["bufmgr.header", "bufmgr.mapping", "bufmgr.victim"];

/// What the caller may change; `None` keeps the experiment's default.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Client counts (worker threads for `vm-pin`), each 1..=[`MAX_CLIENTS`].
    pub clients: Option<Vec<usize>>,
    /// Seconds per point, above 0 and at most [`MAX_DURATION_S`].
    pub duration_s: Option<f64>,
    /// Runs per point, 1..=[`MAX_RUNS`].
    pub runs: Option<usize>,
    /// pgbench scale factor (1..=100000); for `vm-pin`, a multiplier of the table sizes.
    pub scale: Option<i64>,
    /// Release preset instead of the experiment's.
    pub preset: Option<String>,
    /// `crate.knob=value` assignments applied to every variant, after the experiment's common
    /// list and before the variant's own.
    pub set: Vec<String>,
    /// Only these workloads (names), in the experiment's order.
    pub workloads: Option<Vec<String>>,
    /// Base seed of pgbench's client random generators (run `r` uses `seed + r`).
    pub seed: u64,
    /// The `--machine` profile's name when the run is simulated: the default client counts
    /// become the seed's on that machine ([`crate::experiments::SeedMachine`]) and stored
    /// calibrations for it apply.
    pub machine: Option<String>,
    /// Set when the measured phases run on a simulated machine (`--machine`): which machine,
    /// and where each point's [`Point::time`] comes from.
    pub simulation: Option<Simulation>,
}

/// The simulated machine a run's measured phases ran on (`--machine PROFILE`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulatedMachine {
    /// The profile's name (`opteron-24`) or the profile file given.
    pub profile: String,
    /// Physical cores.
    pub cores: u32,
    /// Hardware threads (cores x SMT ways).
    pub hw_threads: u32,
}

/// The time split of every measured phase the process has simulated so far, one entry per
/// phase in the order run (the caller's bridge to the simulator's per-task statistics, which
/// this crate does not depend on: under `--machine` the CLI converts each phase's
/// `lockstack_sim::SimStats::tasks`, leaving out the phase's main task).
pub type PhaseTimes = fn() -> Vec<TimeSplit>;

/// How a run under `--machine` reaches the simulation.
#[derive(Clone, Debug)]
pub struct Simulation {
    /// The machine.
    pub machine: SimulatedMachine,
    /// Every simulated phase's time split so far; [`run`] takes the phases each point added.
    pub phase_times: PhaseTimes,
    /// The machine's pgbench defaults for a point's engine (the client's CPU and round trip
    /// per statement unless set; with `true`, the WAL flush of its storage as a modelled
    /// fsync, replacing an in-memory or modelled sink): what `lockstack pgbench --machine`
    /// applies, so an experiment's point runs as pgbench would.
    pub engine_defaults: EngineDefaults,
    /// With PostgreSQL's costs (`--costs postgres`), the profile's `postgres_ipc` (what runs
    /// use unless calibrated); `None` with the lock stack's own costs, under which no stored
    /// calibration applies.
    pub postgres_ipc: Option<f64>,
    /// The heap layout's base shift (`--sim-layout-shift`, [`crate::layout::pad`] units): a
    /// point's run `r` measures with the shift `layout_shift + r`, so that its runs sample
    /// several layouts and their spread includes the layout's effect.
    pub layout_shift: usize,
}

/// See [`Simulation::engine_defaults`].
pub type EngineDefaults = fn(&mut RunConfig, bool);

/// Where the simulated backends (every task of a measured phase but its main task: clients,
/// workers, the WAL flusher) spent their virtual time, summed over the tasks, ns. The parts add
/// up to [`TimeSplit::total_ns`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TimeSplit {
    /// Tasks summed.
    pub tasks: usize,
    /// Running outside any wait class (local work and operations).
    pub running_ns: u64,
    /// Parked, spinning or asleep under a wait class, per class as the simulator books it (a
    /// spinlock's back-off sleeps are `Timeout:SpinDelay`, a modelled fsync `IO:WALSync`): an LWLock tranche by its
    /// name (`ProcArray`, `LockManager`), `Lock:<tag kind>` for heavyweight locks, another wait
    /// event as `Type:Name` (`IO:WALSync`), `unclassified` for a park with no wait event set
    /// (start and stop gates).
    pub waits_ns: BTreeMap<String, u64>,
    /// Asleep outside any wait class (timed sleeps: a client's round trip, think time).
    pub sleeping_ns: u64,
    /// Waiting to join another task.
    pub joining_ns: u64,
    /// Runnable without a hardware thread (time-sliced out, or every thread busy).
    pub runnable_ns: u64,
}

impl TimeSplit {
    /// The tasks' whole virtual time: the sum of the parts.
    pub fn total_ns(&self) -> u64 {
        self.running_ns
            + self.waits_ns.values().sum::<u64>()
            + self.sleeping_ns
            + self.joining_ns
            + self.runnable_ns
    }

    /// Adds `other`'s tasks and times to this one.
    pub fn add(&mut self, other: &TimeSplit) {
        self.tasks += other.tasks;
        self.running_ns += other.running_ns;
        for (k, v) in &other.waits_ns {
            *self.waits_ns.entry(k.clone()).or_default() += v;
        }
        self.sleeping_ns += other.sleeping_ns;
        self.joining_ns += other.joining_ns;
        self.runnable_ns += other.runnable_ns;
    }
}

/// An experiment with every option resolved and validated: what [`run`] executes.
#[derive(Clone, Debug, Serialize)]
pub struct Plan {
    /// The definition.
    pub experiment: &'static Experiment,
    /// Release preset.
    pub preset: String,
    /// The caller's `--set` list.
    pub set: Vec<String>,
    /// Workloads to run.
    pub workloads: Vec<&'static Workload>,
    /// Client counts, ascending, without duplicates.
    pub clients: Vec<usize>,
    /// Seconds per point.
    pub duration_s: f64,
    /// Runs per point.
    pub runs: usize,
    /// Scale factor.
    pub scale: i64,
    /// Base random seed.
    pub seed: u64,
    /// The simulated machine's profile name, under `--machine`.
    pub machine: Option<String>,
    /// The stored calibrations in effect (one per pgbench workload at most): each sets
    /// `sim.postgres_ipc` for its workload. Empty natively, with `--costs own`, without a
    /// stored calibration for the machine, or when the caller's `--set` gives `sim.postgres_ipc`.
    pub calibrated: Vec<crate::experiments::Calibrated>,
    /// Under `--machine`: whose costs the run carries (`postgres` or `own`); `None` natively.
    pub costs: Option<&'static str>,
    /// The simulated machine the measured phases run on (`--machine`), if any; in the JSON
    /// file as [`ExperimentResult::simulated`].
    #[serde(skip)]
    pub simulation: Option<Simulation>,
}

/// The knob a stored calibration sets.
pub const POSTGRES_IPC_KEY: &str = "sim.postgres_ipc";

fn key_of(assignment: &str) -> &str {
    assignment.split_once('=').map_or(assignment, |(k, _)| k).trim()
}

fn is_vm_pin(e: &Experiment) -> bool {
    e.workloads.iter().any(|w| matches!(w.kind, WorkloadKind::Buffers { .. }))
}

impl Plan {
    /// Resolves `opts` against `experiment`'s defaults and checks everything a run would
    /// reject, so that bad input fails before any measuring.
    ///
    /// # Errors
    /// A [`PlanError`], one line: an empty client list or a count outside 1..=[`MAX_CLIENTS`], a
    /// duration that is not a positive number of at most [`MAX_DURATION_S`] s, runs outside
    /// 1..=[`MAX_RUNS`], a scale outside 1..=100000 (1..=512 for `vm-pin`), an unknown preset or
    /// workload, a `--set` assignment [`settings::apply_set`] rejects, a key one of the
    /// experiment's variants sets (it would erase the comparison), or (`vm-pin`) a key other
    /// than [`VM_PIN_KEYS`] (and [`VM_CHECK_KEY`] for the others).
    pub fn new(experiment: &'static Experiment, opts: &Options) -> Result<Plan, PlanError> {
        let seed_machine = opts.machine.as_deref().and_then(|m| experiment.machine(m));
        let default_clients = seed_machine.map_or(experiment.clients, |m| m.clients);
        let mut clients = opts.clients.clone().unwrap_or_else(|| default_clients.to_vec());
        if clients.is_empty() {
            return Err(PlanError::NoClients);
        }
        if let Some(&bad) = clients.iter().find(|&&c| c == 0 || c > MAX_CLIENTS) {
            return Err(PlanError::ClientCount(bad));
        }
        clients.sort_unstable();
        clients.dedup();
        let duration_s =
            opts.duration_s.unwrap_or(seed_machine.map_or(experiment.duration_s, |m| m.duration_s));
        if !duration_s.is_finite() || duration_s <= 0.0 || duration_s > MAX_DURATION_S {
            return Err(PlanError::Duration(duration_s));
        }
        let runs = opts.runs.unwrap_or(experiment.runs);
        if runs == 0 || runs > MAX_RUNS {
            return Err(PlanError::Runs(runs));
        }
        let vm_pin = is_vm_pin(experiment);
        let scale = opts.scale.unwrap_or(seed_machine.map_or(1, |m| m.scale));
        let max_scale = if vm_pin { 512 } else { 100_000 };
        if !(1..=max_scale).contains(&scale) {
            return Err(PlanError::Scale { max: max_scale, experiment: experiment.name, scale });
        }
        if !vm_pin {
            // Every point loads the pgbench tables in memory: refuse a scale that cannot fit.
            settings::pool_buffers(scale, BUFFER_HEADROOM)?;
            settings::check_memory(scale)?;
        }
        let preset = opts.preset.clone().unwrap_or_else(|| experiment.preset.to_string());
        EngineConfig::preset(&preset, 2, 1024)?;
        let workloads = match &opts.workloads {
            // On one of the seed's machines: the workloads the thread measured there (all of
            // them when it names none).
            None => {
                let on_machine: Vec<&'static Workload> = experiment
                    .workloads
                    .iter()
                    .filter(|w| {
                        seed_machine.is_some_and(|m| {
                            experiment
                                .published
                                .iter()
                                .any(|p| p.workload == w.name && m.series.contains(&p.series))
                        })
                    })
                    .collect();
                if on_machine.is_empty() { experiment.workloads.iter().collect() } else { on_machine }
            }
            Some(names) => {
                for n in names {
                    if experiment.workload(n).is_none() {
                        let valid: Vec<&str> = experiment.workloads.iter().map(|w| w.name).collect();
                        return Err(PlanError::UnknownWorkload {
                            name: n.clone(),
                            experiment: experiment.name,
                            valid: valid.join(", "),
                        });
                    }
                }
                let v: Vec<&'static Workload> =
                    experiment.workloads.iter().filter(|w| names.iter().any(|n| n == w.name)).collect();
                if v.is_empty() {
                    return Err(PlanError::NoWorkload);
                }
                v
            }
        };
        let varied: Vec<&str> =
            experiment.variants.iter().flat_map(|v| v.set.iter().map(|s| key_of(s))).collect();
        for a in &opts.set {
            let key = key_of(a);
            if varied.contains(&key) {
                return Err(PlanError::VariedKnob { key: key.to_string(), experiment: experiment.name });
            }
            if !vm_pin && key == VM_CHECK_KEY {
                return Err(PlanError::VmCheckKnob(key.to_string()));
            }
            if vm_pin && !VM_PIN_KEYS.contains(&key) {
                return Err(PlanError::VmPinKnob { key: key.to_string(), accepted: VM_PIN_KEYS.join(", ") });
            }
        }
        let own_ipc = opts.set.iter().any(|a| key_of(a) == POSTGRES_IPC_KEY);
        let postgres_costs = opts.simulation.as_ref().is_some_and(|s| s.postgres_ipc.is_some());
        let calibrated = match (&opts.machine, own_ipc || !postgres_costs) {
            (Some(m), false) => {
                crate::experiments::user_dir::calibrations().map_err(PlanError::Calibrations)?;
                workloads.iter().filter_map(|w| experiment.calibration(m, w.name).copied()).collect()
            }
            _ => Vec::new(),
        };
        let plan = Plan {
            experiment,
            preset,
            set: opts.set.clone(),
            workloads,
            clients,
            duration_s,
            runs,
            scale,
            seed: opts.seed,
            machine: opts.machine.clone(),
            calibrated,
            costs: opts
                .simulation
                .as_ref()
                .map(|s| if s.postgres_ipc.is_some() { "postgres" } else { "own" }),
            simulation: opts.simulation.clone(),
        };
        for v in experiment.variants {
            plan.config(v, 1)?;
        }
        if vm_pin {
            for w in &plan.workloads {
                if let WorkloadKind::Buffers { scenario } = w.kind {
                    for &c in &plan.clients {
                        plan.buffers_config(scenario, &experiment.variants[0], c)?.validate()?;
                    }
                }
            }
        }
        Ok(plan)
    }

    /// Points the plan measures: runs x workloads x clients x variants.
    pub fn points(&self) -> usize {
        self.runs * self.workloads.len() * self.clients.len() * self.experiment.variants.len()
    }

    /// Seconds of measuring (points x duration), not counting table loads.
    pub fn measuring_s(&self) -> f64 {
        self.points() as f64 * self.duration_s
    }

    /// Every assignment a variant runs with, in the order applied: the experiment's common
    /// list, the caller's `--set` list, the variant's own list.
    pub fn assignments(&self, variant: &Variant) -> Vec<String> {
        let e = self.experiment;
        e.common
            .iter()
            .map(|s| s.to_string())
            .chain(self.set.iter().cloned())
            .chain(variant.set.iter().map(|s| s.to_string()))
            .collect()
    }

    /// The engine configuration of `variant` at `clients` clients and, for `vm-pin`, the
    /// visibility check it selects: [`Plan::run_config`] without the `sim.*` knobs.
    ///
    /// # Errors
    /// As [`Plan::run_config`].
    pub fn config(
        &self,
        variant: &Variant,
        clients: usize,
    ) -> Result<(EngineConfig, Option<Check>), PlanError> {
        self.run_config(variant, clients).map(|(run, check)| (run.engine, check))
    }

    /// The run configuration (the engine's and the `sim.*` knobs) of `variant` at `clients`
    /// clients and, for `vm-pin`, the visibility check it selects. The pool has
    /// [`BUFFERS_PER_SCALE`] x scale + [`BUFFER_HEADROOM`] buffers (`--set bufmgr.nbuffers=N`
    /// overrides it).
    ///
    /// # Errors
    /// An unknown preset, a rejected assignment, or an unknown `vm.check` value.
    pub fn run_config(
        &self,
        variant: &Variant,
        clients: usize,
    ) -> Result<(RunConfig, Option<Check>), PlanError> {
        let nbuffers = settings::pool_buffers(self.scale, BUFFER_HEADROOM)?;
        let mut cfg = RunConfig::new(EngineConfig::preset(&self.preset, clients + 1, nbuffers)?);
        let applied = self.assignments(variant);
        for a in &applied {
            settings::apply_set(&mut cfg, a)?;
        }
        // What the engine would refuse when a point starts is bad input now.
        settings::validate(&cfg.engine, &applied)?;
        let check = if is_vm_pin(self.experiment) {
            if !applied.iter().any(|a| key_of(a) == VM_CHECK_KEY) {
                return Err(PlanError::NoVmCheck(variant.name));
            }
            Some(cfg.engine.vm_check)
        } else {
            None
        };
        Ok((cfg, check))
    }

    fn buffers_config(
        &self,
        scenario: BufferScenario,
        variant: &Variant,
        clients: usize,
    ) -> Result<BuffersConfig, PlanError> {
        let (cfg, check) = self.config(variant, clients)?;
        let scale = u32::try_from(self.scale).unwrap_or(1);
        let table_pages = match scenario {
            BufferScenario::Scan | BufferScenario::HotPin => SCAN_PAGES_PER_SCALE * scale,
            BufferScenario::VmDelete => (DELETE_PAGES_PER_SCALE * scale).max(clients as u32),
        };
        Ok(BuffersConfig {
            scenario,
            headers: vec![cfg.bufmgr.header],
            vm_checks: check.into_iter().collect(),
            mapping: cfg.bufmgr.mapping,
            victim: cfg.bufmgr.victim,
            threads: clients,
            duration: Duration::from_secs_f64(self.duration_s),
            table_pages,
            pool_buffers: (table_pages as usize + 64).max(2 * clients + 64),
            vacuum_every: 0,
        })
    }
}

/// One point of a plan, before it is measured: what [`run_point`] runs.
#[derive(Clone, Copy, Debug)]
pub struct PointSpec {
    /// Index K in the plan's order (0-based), as `--list-points` prints it and `--point K`
    /// takes it.
    pub index: usize,
    /// Run number, from 0.
    pub run: usize,
    /// The workload.
    pub workload: &'static Workload,
    /// Clients (worker threads for `vm-pin`).
    pub clients: usize,
    /// The variant.
    pub variant: &'static Variant,
}

impl Plan {
    /// Every point of the plan in the order [`run`] measures them: run by run, then workload,
    /// client count and variant; `point_specs()[k].index == k`, and the length is
    /// [`Plan::points`].
    pub fn point_specs(&self) -> Vec<PointSpec> {
        let mut specs = Vec::with_capacity(self.points());
        for run in 0..self.runs {
            for &workload in &self.workloads {
                for &clients in &self.clients {
                    for variant in self.experiment.variants {
                        specs.push(PointSpec { index: specs.len(), run, workload, clients, variant });
                    }
                }
            }
        }
        specs
    }
}

/// One measured point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Point {
    /// Workload name.
    pub workload: String,
    /// Variant name.
    pub variant: String,
    /// Clients (worker threads).
    pub clients: usize,
    /// Run number, from 0.
    pub run: usize,
    /// Operations completed: committed transactions (pgbench) or pages scanned / deletes.
    pub ops: u64,
    /// Failed transactions (deadlocks, lock timeouts); 0 for `vm-pin`.
    pub failed: u64,
    /// Seconds measured.
    pub elapsed_s: f64,
    /// Seconds spent loading the tables before measuring (pgbench workloads).
    pub load_s: f64,
    /// Operations per second.
    pub throughput: f64,
    /// Raw counters of the measured phase by path, as [`crate::report::StackCounters`] names
    /// them (`lwlock.ProcArray.ex_acquire`, `lmgr.waits`, `wal.flushes`,
    /// `procarray.get_snapshot_data`, `lmgr.main_acquisitions_max` for the busiest partition,
    /// `lmgr.partitions`): every counter of a pgbench workload's run; for `vm-pin`, `buffers.*`
    /// of the pool's statistics and the acquisitions and blocks of the buffer tranches.
    pub counters: BTreeMap<String, u64>,
    /// True when every consistency check after the run held (pgbench's balance invariants, the
    /// buffer pool's invariants and contents).
    pub ok: bool,
    /// The first failed check, if any.
    pub error: Option<String>,
    /// Under `--machine`: where the simulated backends' virtual time went during the point's
    /// measured phase(s); `None` natively.
    #[serde(default)]
    pub time: Option<TimeSplit>,
}

impl Point {
    /// `counter` normalised as it says (missing raw counters read as 0).
    pub fn normalised(&self, counter: &Counter) -> f64 {
        let raw = self.counters.get(counter.key).copied().unwrap_or(0) as f64;
        let ops = self.ops.max(1) as f64;
        match counter.per {
            Per::Op => raw / ops,
            Per::KiloOp => 1000.0 * raw / ops,
            Per::UsPerOp => raw / 1000.0 / ops,
            Per::Per5Min => raw / self.elapsed_s.max(1e-9) * 300.0,
            Per::PartitionPer5Min => {
                let parts = self.counters.get("lmgr.partitions").copied().unwrap_or(1).max(1) as f64;
                raw / parts / self.elapsed_s.max(1e-9) * 300.0
            }
        }
    }
}

/// Throughput and counters of one (workload, variant, clients) over its runs.
#[derive(Clone, Debug, Serialize)]
pub struct SummaryRow {
    /// Workload name.
    pub workload: String,
    /// Variant name.
    pub variant: String,
    /// Clients.
    pub clients: usize,
    /// Runs summarised.
    pub runs: usize,
    /// Lowest throughput of the runs (operations per second).
    pub min: f64,
    /// Median throughput (the mean of the middle two for an even number of runs).
    pub median: f64,
    /// Highest throughput.
    pub max: f64,
    /// Median over the baseline's median, minus 1, in percent; `None` for the baseline itself.
    pub gain_pct: Option<f64>,
    /// The experiment's counters, normalised, median of the runs, in [`Experiment::counters`]
    /// order.
    pub counters: Vec<f64>,
}

/// Everything an experiment run produced.
#[derive(Clone, Debug, Serialize)]
pub struct ExperimentResult {
    /// What was run.
    pub plan: Plan,
    /// Counter column labels with their normalisation (`ProcArray ex/txn`), in
    /// [`Experiment::counters`] order.
    pub counter_labels: Vec<String>,
    /// The full assignment list of each variant, in variant order (name, assignments).
    pub variant_sets: Vec<(String, Vec<String>)>,
    /// Cores and oversubscription at the largest client count (the simulated machine's
    /// hardware threads under `--machine`).
    pub machine: MachineNote,
    /// The simulated machine the points ran on; `None` when they ran on this host.
    pub simulated: Option<SimulatedMachine>,
    /// What the simulated machine was calibrated to (a host, a published figure), when a
    /// calibration was applied; `None` (and nothing printed) otherwise. Filled by the
    /// calibration flow, not by [`run`].
    pub calibrated_to: Option<String>,
    /// Every point, in the order measured.
    pub points: Vec<Point>,
    /// One row per (workload, variant, clients), workloads and clients in plan order, variants
    /// in experiment order.
    pub summary: Vec<SummaryRow>,
    /// The Universal Scalability Law fitted to each (workload, variant)'s medians
    /// ([`fit_usl`]).
    pub usl: Vec<UslRow>,
    /// Under `--sensitivity`: the bands of the effects, peaks and medians over the perturbed
    /// sweeps ([`crate::experiments::sensitivity`]); `None` (and absent from the JSON)
    /// otherwise. Filled by the sensitivity flow, not by [`run`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<crate::experiments::sensitivity::Sensitivity>,
    /// The user's own figures (`--measured FILE.csv`, [`crate::experiments::measured`]) as
    /// published points whose series says `measured`: tabled and drawn next to the thread's.
    /// Empty (and absent from the JSON) without the flag. Filled by the CLI, not by [`run`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub measured: Vec<crate::experiments::Published>,
}

impl ExperimentResult {
    /// The thread's published points followed by the user's measured ones
    /// ([`ExperimentResult::measured`]): what the tables and plots set beside the curves.
    pub fn published(&self) -> Vec<&crate::experiments::Published> {
        self.plan.experiment.published.iter().chain(&self.measured).collect()
    }

    /// True when every point passed its consistency checks.
    pub fn all_ok(&self) -> bool {
        self.points.iter().all(|p| p.ok)
    }

    /// The summary row of (workload, variant, clients).
    pub fn row(&self, workload: &str, variant: &str, clients: usize) -> Option<&SummaryRow> {
        self.summary.iter().find(|r| r.workload == workload && r.variant == variant && r.clients == clients)
    }
}

/// What the progress callback sees: before a point starts (`finished` is `None`) and after it
/// ends.
#[derive(Debug)]
pub struct Step<'a> {
    /// Points finished so far.
    pub done: usize,
    /// Points in the plan.
    pub total: usize,
    /// Workload of the point.
    pub workload: &'a str,
    /// Variant of the point.
    pub variant: &'a str,
    /// Clients of the point.
    pub clients: usize,
    /// Run of the point, from 0.
    pub run: usize,
    /// The result, once the point has finished.
    pub finished: Option<&'a Point>,
}

/// Fits every (workload, variant) of `plan` on the median throughput per client count of
/// `summary` ([`SummaryRow::median`]) with [`usl::fit`]; workloads in plan order, variants in
/// experiment order.
pub fn fit_usl(plan: &Plan, summary: &[SummaryRow]) -> Vec<UslRow> {
    let mut out = Vec::new();
    for w in &plan.workloads {
        for v in plan.experiment.variants {
            let pts: Vec<(usize, f64)> = summary
                .iter()
                .filter(|r| r.workload == w.name && r.variant == v.name)
                .map(|r| (r.clients, r.median))
                .collect();
            if pts.is_empty() {
                continue;
            }
            let fitted = usl::fit(&pts);
            out.push(UslRow {
                workload: w.name.into(),
                variant: v.name.into(),
                clients: pts.iter().map(|p| p.0).collect(),
                no_fit: fitted.as_ref().err().map(usl::NoFit::to_string),
                fit: fitted.ok(),
            });
        }
    }
    out
}

mod measure;
pub use super::error::{PlanError, PointError};
pub use measure::{assemble, clients_name, median, op_name, run, run_point, summarise};

#[cfg(test)]
mod tests;
