//! The executor: tasks as stackful coroutines on one host thread, resumed in virtual-time
//! order (a conservative discrete-event simulation), on the hardware threads of a [`Machine`].

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;
use std::panic::{AssertUnwindSafe, Location};
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use serde::{Deserialize, Serialize};

use crate::cache::Caches;
use crate::machine::{LineMap, Lines, Machine, PS_PER_NS, ps};
use crate::profile::MachineProfile;
use crate::stats::{
    CacheStats, HostStats, LineStats, RegionStats, SimReport, SimStats, TaskStats, TimeSources,
};

/// A simulated task (a backend, a worker, a session): its index in spawn order, the main
/// task being 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId(pub u32);

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task {}", self.0)
    }
}

/// How local work between two operations advances a task's virtual clock.
#[derive(Debug, Clone)]
pub enum ClockMode {
    /// Each segment (the code between two operations, keyed by the call sites that bound it)
    /// costs what the table says, times the profile's speed factor; segments missing from the
    /// table cost [`SimConfig::default_segment_ns`]. The same inputs give byte-identical
    /// statistics.
    Deterministic(SegmentTable),
    /// Each segment costs the host time it took (the host's cycle counter, less
    /// [`SimConfig::segment_overhead_ns`]), times the speed factor. The run also fills a
    /// [`SegmentTable`] (returned in [`SimReport::segments`]): this is the calibration pass of
    /// the deterministic mode. A segment the host interrupted (over 50 us and over 50 times
    /// its key's mean of at least 16 earlier samples) is charged that mean instead and counted
    /// in [`crate::stats::HostStats::clipped_segments`].
    Measured,
}

/// The largest segment table file (`--sim-segments FILE`) read, bytes (16 MiB). The built-in
/// table, every segment of every workload, is about 130 KB; the bound keeps
/// `--sim-segments /dev/zero` from filling memory.
pub const MAX_SEGMENT_TABLE_BYTES: u64 = 16 << 20;

/// Mean host cost of each segment, keyed by `"from_site -> to_site"` (`file:line:col`, or
/// `<start>`/`<exit>` for a task's first and last segment). Serializable, so a calibration can
/// be saved and reused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SegmentTable {
    /// Segment key to its mean host cost.
    pub segments: BTreeMap<String, SegmentCost>,
}

impl SegmentTable {
    /// The table built into this crate: crates/sim/segments/builtin.json, written by
    /// `lockstack machine segments` (the native calibration pass over the workloads the
    /// simulated machine runs). A key whose lines moved since costs the mean of the table's
    /// segments between the same two files, else the table's median
    /// ([`SegmentTable::median_ns`]); the report says how many segments were found each way.
    ///
    /// # Panics
    /// If the embedded file is not a valid table (a test parses it).
    pub fn builtin() -> &'static SegmentTable {
        static TABLE: std::sync::OnceLock<SegmentTable> = std::sync::OnceLock::new();
        TABLE.get_or_init(|| {
            serde_json::from_str(include_str!("../segments/builtin.json"))
                .expect("the built-in segment table parses")
        })
    }

    /// The sample-weighted mean host ns of a segment (0 for an empty table).
    pub fn mean_ns(&self) -> f64 {
        let n: u64 = self.segments.values().map(|c| c.samples).sum();
        let total: f64 = self.segments.values().map(|c| c.ns * c.samples as f64).sum();
        if n == 0 { 0.0 } else { total / n as f64 }
    }

    /// The median over the table's segments of their mean host ns (each call-site pair counts
    /// once, however often it ran): what a segment the table does not know is charged
    /// (0 for an empty table).
    pub fn median_ns(&self) -> f64 {
        let mut v: Vec<f64> = self.segments.values().map(|c| c.ns).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    }

    /// Adds `other`'s samples to this table (sample-weighted means per key).
    pub fn merge(&mut self, other: &SegmentTable) {
        for (k, v) in &other.segments {
            let e = self.segments.entry(k.clone()).or_insert(SegmentCost { ns: 0.0, samples: 0 });
            let total = e.ns * e.samples as f64 + v.ns * v.samples as f64;
            e.samples += v.samples;
            e.ns = if e.samples == 0 { 0.0 } else { total / e.samples as f64 };
        }
    }
}

/// A segment key's two files without lines and columns (`"a.rs:1:2 -> b.rs:3:4"` gives
/// `"a.rs -> b.rs"`): what survives edits that move code within a file.
pub(crate) fn file_pair(key: &str) -> String {
    let strip = |site: &str| match site.split_once(':') {
        Some((file, _)) => file.to_string(),
        None => site.to_string(),
    };
    match key.split_once(" -> ") {
        Some((a, b)) => format!("{} -> {}", strip(a), strip(b)),
        None => key.to_string(),
    }
}

/// The sample-weighted mean host ns of each file pair of `table`.
fn file_pair_means(table: &SegmentTable) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (k, c) in &table.segments {
        let e = sums.entry(file_pair(k)).or_insert((0.0, 0));
        e.0 += c.ns * c.samples as f64;
        e.1 += c.samples;
    }
    sums.into_iter().filter(|(_, (_, n))| *n > 0).map(|(k, (t, n))| (k, t / n as f64)).collect()
}

/// Where a deterministic segment's cost came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SegmentSource {
    /// The table's entry for its two call sites.
    Exact,
    /// The mean of the table's segments between the same two files ([`file_pair`]).
    FilePair,
    /// Neither: the table's median.
    Default,
}

/// One segment's calibrated cost.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SegmentCost {
    /// Mean host nanoseconds.
    pub ns: f64,
    /// Samples the mean is over.
    pub samples: u64,
}

/// How a simulation runs.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The clock mode (default: deterministic with an empty table).
    pub clock: ClockMode,
    /// Host ns charged for a segment the table does not know (scaled by the speed factor):
    /// 20 ns, assumed (a few dozen instructions between two synchronization operations).
    pub default_segment_ns: f64,
    /// Host ns subtracted from each measured segment (floored at 0): what the measurement
    /// itself adds to a segment (the two cycle-counter reads and the path from the caller to
    /// the executor and back), so that an empty segment costs 0. Default 0; the facade's
    /// runner measures it ([`crate::facade::segment_overhead_ns`]) for the lock stack's path.
    pub segment_overhead_ns: f64,
    /// Whether a line no core holds costs `memory_ns` (a cold miss; default true). The model
    /// has no cache capacity, so a line misses to memory exactly once per run, on first touch.
    /// Runs of real code whose segments are host-timed or host-calibrated turn it off: the
    /// host's own misses on that data are in the segments' time already, and charging them
    /// again would count them twice.
    pub cold_misses: bool,
    /// Each task's coroutine stack, bytes (default 256 KiB; mapped lazily).
    pub stack_size: usize,
    /// How many hottest lines [`SimStats::hot_lines`] lists (default 10).
    pub top_lines: usize,
    /// The run's seed: tasks read it (mixed with their id) through [`crate::task::seed`].
    pub seed: u64,
    /// `--costs postgres`: PostgreSQL's instructions per region (`hook::pg_region`), at the
    /// profile's instruction rate; `None` (`--costs own`): regions are not charged and the lock
    /// stack's own segment costs apply everywhere.
    pub pg_costs: Option<crate::pgcosts::PgCostRates>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            clock: ClockMode::Deterministic(SegmentTable::default()),
            default_segment_ns: 20.0,
            segment_overhead_ns: 0.0,
            cold_misses: true,
            stack_size: 256 * 1024,
            top_lines: 10,
            seed: 0,
            pg_costs: None,
        }
    }
}

/// Why a simulation did not complete.
#[derive(Debug)]
pub enum SimError {
    /// Every unfinished task waits on something no other task can provide (parked without a
    /// deadline, or joining such a task) and no timer is pending.
    Deadlock {
        /// Virtual time at which the simulation ran out of events, ns.
        at_ns: u64,
        /// Each unfinished task and what it waits on.
        tasks: Vec<BlockedTask>,
    },
    /// The main task panicked; the payload's message.
    MainPanicked(String),
    /// [`Simulation::run`] was called from inside a running simulation.
    Nested,
    /// A coroutine stack could not be allocated.
    Stack(String),
}

/// One task that was still waiting when a deadlock was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedTask {
    /// The task.
    pub id: TaskId,
    /// Its name.
    pub name: String,
    /// What it does: `parked`, `joining task N`, `runnable`.
    pub state: String,
    /// The call site it waits at (`file:line:col`).
    pub site: String,
    /// The wait class set with [`crate::task::wait_class`], if any.
    pub class: Option<String>,
    /// Since when it waits, ns of virtual time.
    pub since_ns: u64,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::Deadlock { at_ns, tasks } => {
                write!(
                    f,
                    "simulation deadlock at {at_ns} ns of virtual time: no task can run and no timer is pending"
                )?;
                for t in tasks {
                    write!(
                        f,
                        "\n  {} {:?}: {} since {} ns at {}",
                        t.id, t.name, t.state, t.since_ns, t.site
                    )?;
                    if let Some(c) = &t.class {
                        write!(f, " (wait class {c})")?;
                    }
                }
                Ok(())
            }
            SimError::MainPanicked(m) => write!(f, "the simulation's main task panicked: {m}"),
            SimError::Nested => write!(f, "a simulation cannot be run from inside a simulated task"),
            SimError::Stack(e) => write!(f, "could not allocate a coroutine stack: {e}"),
        }
    }
}

impl std::error::Error for SimError {}

/// A simulation of one machine profile: build it, then [`Simulation::run`] a main task.
#[derive(Debug)]
pub struct Simulation {
    profile: MachineProfile,
    config: SimConfig,
    /// [`Simulation::set_caches`]: whether the profile's cache capacities apply.
    caches: std::sync::atomic::AtomicBool,
}

impl Clone for Simulation {
    fn clone(&self) -> Simulation {
        Simulation {
            profile: self.profile.clone(),
            config: self.config.clone(),
            caches: std::sync::atomic::AtomicBool::new(
                self.caches.load(std::sync::atomic::Ordering::Relaxed),
            ),
        }
    }
}

pub(crate) const NONE: u32 = u32::MAX;
/// Reserved site ids: a task's first and last segment boundaries.
pub(crate) const SITE_START: u32 = 0;
pub(crate) const SITE_EXIT: u32 = 1;

const EV_RESUME: u8 = 0;
const EV_TIMER: u8 = 1;

/// An event: resume a task that holds a hardware thread, or a timer (sleep or timed park)
/// expiring. Packed in one `u128` so that the heap compares one integer: time (64 bits), then
/// task id (32), then kind (1), then the park generation (31). Ties go to the lower task id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ev(u128);

impl Ev {
    fn new(time: u64, task: u32, kind: u8, generation: u32) -> Ev {
        Ev((u128::from(time) << 64)
            | (u128::from(task) << 32)
            | (u128::from(kind & 1) << 31)
            | u128::from(generation & 0x7fff_ffff))
    }
    pub(crate) fn time(self) -> u64 {
        (self.0 >> 64) as u64
    }
    pub(crate) fn task(self) -> u32 {
        (self.0 >> 32) as u32
    }
    fn kind(self) -> u8 {
        ((self.0 >> 31) & 1) as u8
    }
    fn generation(self) -> u32 {
        (self.0 & 0x7fff_ffff) as u32
    }
}

/// What a task is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Holds a hardware thread (executing, or waiting in the event heap for its turn).
    Running,
    /// Runnable, waiting in the run queue for a hardware thread.
    Ready,
    /// Asleep in park.
    Parked,
    /// Asleep in sleep.
    Sleeping,
    /// Waiting for the task to finish.
    Joining(u32),
    /// Done.
    Finished,
}

type Payload = Box<dyn Any + Send + 'static>;

/// A task's task-local values (the facade's `thread_local!`), keyed by the address of their
/// key, kept in the order they were created and dropped in the reverse order (as a thread's
/// TLS destructors run). The order matters beyond the destructors: the values are freed one
/// by one, and the allocator hands freed blocks out again to later allocations, such as
/// another task's first LWLock waiter; a hash map's drop order (its hasher's random seed)
/// placed those at addresses that differed run to run, and with them which objects shared a
/// cache line in the model.
#[derive(Default)]
pub(crate) struct TaskLocals(Vec<(usize, Box<dyn Any>)>);

impl TaskLocals {
    /// The value for `key`, if this task created one.
    pub(crate) fn get(&self, key: usize) -> Option<&dyn Any> {
        self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v)
    }

    /// Stores `v` for `key` unless a value is there already (an `init` that created it).
    pub(crate) fn insert_if_absent(&mut self, key: usize, v: Box<dyn Any>) {
        if self.get(key).is_none() {
            self.0.push((key, v));
        }
    }

    /// Drops the values, the most recently created first.
    pub(crate) fn clear(&mut self) {
        while let Some(v) = self.0.pop() {
            drop(v);
        }
    }
}

impl Drop for TaskLocals {
    fn drop(&mut self) {
        self.clear();
    }
}

pub(crate) struct Task {
    pub(crate) name: String,
    pub(crate) clock: u64,
    pub(crate) state: State,
    pub(crate) hw: u32,
    last_hw: u32,
    pub(crate) last_site: u32,
    slice_start: u64,
    pub(crate) token: bool,
    pub(crate) generation: u32,
    pub(crate) park_result: bool,
    pub(crate) wait_site: Option<&'static Location<'static>>,
    pub(crate) wait_class: Option<&'static str>,
    pub(crate) since: u64,
    pub(crate) outcome: Option<Result<(), Payload>>,
    pub(crate) joined: bool,
    pub(crate) joiners: Vec<u32>,
    pub(crate) locals: TaskLocals,
    pub(crate) yielder: *const Yielder<(), ()>,
    pub(crate) seg_start: Option<u64>,
    pub(crate) ops: u64,
    /// How many charged PostgreSQL cost regions the task is inside.
    pub(crate) region_depth: u32,
    running_ps: u64,
    spinning_ps: BTreeMap<&'static str, u64>,
    waiting_ps: BTreeMap<&'static str, u64>,
    sleeping_ps: u64,
    joining_ps: u64,
    runnable_ps: u64,
    panicked: bool,
}

/// The class time is booked under when a task waits or spins without naming one.
pub(crate) const UNCLASSIFIED: &str = "unclassified";

/// Where the tasks' virtual time came from, ps (see [`TimeSources`]).
#[derive(Default)]
pub(crate) struct SourcesPs {
    own: u64,
    untimed: u64,
    replaced: u64,
    postgres: u64,
    modelled: u64,
    unknown_regions: std::collections::BTreeSet<&'static str>,
}

pub(crate) struct Exec {
    pub(crate) m: Machine,
    /// The profile's cache sizes, when the caches have a capacity in this run.
    profile_caches: Option<crate::profile::CacheSizes>,
    pub(crate) lines: Lines,
    pub(crate) line_names: LineMap<String>,
    pub(crate) tasks: Vec<Task>,
    heap: BinaryHeap<Reverse<Ev>>,
    ready: VecDeque<u32>,
    hw_task: Vec<u32>,
    hw_last_task: Vec<u32>,
    running: u32,
    max_running: u32,
    pub(crate) current: u32,
    pub(crate) in_task: bool,
    pub(crate) teardown: bool,
    pub(crate) events: u64,
    context_switches: u64,
    preemptions: u64,
    pub(crate) parks: u64,
    pub(crate) wakes: u64,
    pub(crate) spawned: Vec<(u32, Box<dyn FnOnce()>)>,
    site_ids: LineMap<u32>,
    site_names: Vec<String>,
    /// Segment key to (cost in ps, whether the table had it).
    seg_cache: LineMap<(u64, SegmentSource)>,
    /// Deterministic clock: segments charged from the table, and at the default cost.
    segments_from_table: u64,
    segments_at_default: u64,
    segments_by_file_pair: u64,
    measured: Option<LineMap<(f64, u64)>>,
    /// Host ns per cycle-counter tick, and the per-segment overhead subtracted (measured mode).
    ns_per_tick: f64,
    segment_overhead_ns: f64,
    pub(crate) clipped_segments: u64,
    /// Region name to (ps per call, ps per item), under `--costs postgres`.
    pg_rates: Option<BTreeMap<String, (u64, u64)>>,
    /// The profile's `postgres_ipc`, and what the region rates are multiplied by (the profile's
    /// over a calibrated one: [`crate::task::set_postgres_ipc`]).
    pub(crate) profile_ipc: f64,
    pub(crate) pg_rate_scale: f64,
    /// [`Exec::pg_rates`] by the address of the region's name (the hook passes `&'static str`s).
    region_cache: LineMap<Option<(u64, u64)>>,
    /// Where virtual time came from ([`TimeSources`]), ps.
    pub(crate) sources: SourcesPs,
    /// Per region: (calls, ps charged).
    regions: BTreeMap<&'static str, (u64, u64)>,
    table: SegmentTable,
    /// The table's sample-weighted mean per pair of files ([`file_pair`]).
    file_pairs: BTreeMap<String, f64>,
    default_segment_ps: u64,
    pub(crate) seed: u64,
    main_done: bool,
    end_time: u64,
}

thread_local! {
    /// The simulation running on this host thread, while [`Simulation::run`] runs.
    pub(crate) static CURRENT: Cell<*const RefCell<Exec>> = const { Cell::new(std::ptr::null()) };
}

/// Resets [`CURRENT`] when a run ends, also by a panic.
struct CurrentGuard;

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null()));
    }
}

/// Sets the executor's teardown flag when dropped (also by a panic of the scheduler loop), so
/// that coroutines unwound afterwards do not suspend again.
struct TeardownGuard<'a>(&'a RefCell<Exec>);

impl Drop for TeardownGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut ex) = self.0.try_borrow_mut() {
            ex.teardown = true;
        }
    }
}

/// What an operation did to the task that performed it.
pub(crate) enum After {
    /// It continues (after the scheduler's turn, if another task is earlier).
    Continue,
    /// It gave up its hardware thread (parked, slept, joined, was preempted): suspend until
    /// the scheduler resumes it.
    Block,
    /// It waits for a line, keeping its hardware thread: suspend until its resume event, then
    /// apply the operation again.
    Retry,
}

impl Exec {
    fn new(profile: &MachineProfile, config: &SimConfig, caches: bool) -> Exec {
        let mut m = Machine::new(profile);
        if !config.cold_misses {
            m.no_cold_misses();
        }
        let hw = profile.hw_threads() as usize;
        let (measured, table) = match &config.clock {
            ClockMode::Deterministic(t) => (None, t.clone()),
            ClockMode::Measured => (Some(LineMap::default()), SegmentTable::default()),
        };
        let default_segment_ps = ps(config.default_segment_ns * m.speed_factor);
        Exec {
            profile_caches: profile.caches.clone().filter(|_| caches),
            m,
            lines: Lines {
                caches: profile
                    .caches
                    .as_ref()
                    .filter(|_| caches)
                    .map(|c| Caches::new(c, profile.cores(), profile.topology.cores_per_llc)),
                ..Lines::default()
            },
            line_names: LineMap::default(),
            tasks: Vec::new(),
            heap: BinaryHeap::new(),
            ready: VecDeque::new(),
            hw_task: vec![NONE; hw],
            hw_last_task: vec![NONE; hw],
            running: 0,
            max_running: 0,
            current: NONE,
            in_task: false,
            teardown: false,
            events: 0,
            context_switches: 0,
            preemptions: 0,
            parks: 0,
            wakes: 0,
            spawned: Vec::new(),
            site_ids: LineMap::default(),
            site_names: vec!["<start>".to_string(), "<exit>".to_string()],
            seg_cache: LineMap::default(),
            segments_from_table: 0,
            segments_at_default: 0,
            segments_by_file_pair: 0,
            ns_per_tick: if matches!(config.clock, ClockMode::Measured) {
                crate::hostclock::ns_per_tick()
            } else {
                1.0
            },
            segment_overhead_ns: config.segment_overhead_ns,
            clipped_segments: 0,
            pg_rates: config.pg_costs.as_ref().map(|r| {
                r.regions
                    .iter()
                    .map(|(k, &(fixed, per))| (k.clone(), (fixed.round() as u64, per.round() as u64)))
                    .collect()
            }),
            region_cache: LineMap::default(),
            profile_ipc: profile.costs.postgres_ipc,
            pg_rate_scale: 1.0,
            sources: SourcesPs::default(),
            regions: BTreeMap::new(),
            measured,
            file_pairs: file_pair_means(&table),
            table,
            default_segment_ps,
            seed: config.seed,
            main_done: false,
            end_time: 0,
        }
    }

    /// Interns a call site.
    pub(crate) fn site(&mut self, loc: &'static Location<'static>) -> u32 {
        let key = loc as *const Location<'static> as usize as u64;
        if let Some(&id) = self.site_ids.get(&key) {
            return id;
        }
        let id = self.site_names.len() as u32;
        self.site_names.push(format!("{}:{}:{}", loc.file(), loc.line(), loc.column()));
        self.site_ids.insert(key, id);
        id
    }

    /// Charges `cost` ps of execution to the current task, under its wait class if it has one.
    pub(crate) fn charge(&mut self, id: u32, cost: u64) {
        let t = &mut self.tasks[id as usize];
        t.clock += cost;
        match t.wait_class {
            None => t.running_ps += cost,
            Some(c) => *t.spinning_ps.entry(c).or_insert(0) += cost,
        }
    }

    /// Charges `cost` ps of spinning (a pause) to the current task.
    pub(crate) fn charge_spin(&mut self, id: u32, cost: u64) {
        let t = &mut self.tasks[id as usize];
        t.clock += cost;
        *t.spinning_ps.entry(t.wait_class.unwrap_or(UNCLASSIFIED)).or_insert(0) += cost;
    }

    /// Charges the local work since the task's previous operation (the segment ending at
    /// `site`, whose end the host's cycle counter read as `end_ticks`), and counts the
    /// operation.
    pub(crate) fn enter(&mut self, id: u32, site: u32, end_ticks: u64) {
        self.events += 1;
        let from = self.tasks[id as usize].last_site;
        let key = (u64::from(from) << 32) | u64::from(site);
        let cost = if let Some(measured) = &mut self.measured {
            let t = &self.tasks[id as usize];
            let raw = t.seg_start.map_or(0.0, |s| end_ticks.saturating_sub(s) as f64 * self.ns_per_tick);
            let mut host_ns = (raw - self.segment_overhead_ns).max(0.0);
            let e = measured.entry(key).or_insert((0.0, 0));
            if e.1 >= 16 && host_ns > 50_000.0 && host_ns > 50.0 * e.0 / e.1 as f64 {
                host_ns = e.0 / e.1 as f64;
                self.clipped_segments += 1;
            }
            e.0 += host_ns;
            e.1 += 1;
            ps(host_ns * self.m.speed_factor)
        } else {
            let (c, found) = match self.seg_cache.get(&key) {
                Some(&v) => v,
                None => {
                    let name =
                        format!("{} -> {}", self.site_names[from as usize], self.site_names[site as usize]);
                    // A key whose lines moved since the table was made falls back to the mean
                    // of the segments between the same two files, then to the median.
                    let v = match self.table.segments.get(&name) {
                        Some(s) => (ps(s.ns * self.m.speed_factor), SegmentSource::Exact),
                        None => match self.file_pairs.get(&file_pair(&name)) {
                            Some(&ns) => (ps(ns * self.m.speed_factor), SegmentSource::FilePair),
                            None => (self.default_segment_ps, SegmentSource::Default),
                        },
                    };
                    self.seg_cache.insert(key, v);
                    v
                }
            };
            match found {
                SegmentSource::Exact => self.segments_from_table += 1,
                SegmentSource::FilePair => self.segments_by_file_pair += 1,
                SegmentSource::Default => {
                    self.segments_at_default += 1;
                    if self.tasks[id as usize].region_depth == 0 {
                        self.sources.untimed += c;
                    }
                }
            }
            c
        };
        // Inside a PostgreSQL cost region the region's own count stands for this code.
        let cost = if self.tasks[id as usize].region_depth > 0 {
            self.sources.replaced += cost;
            0
        } else {
            self.sources.own += cost;
            cost
        };
        self.charge(id, cost);
        self.tasks[id as usize].ops += 1;
        self.tasks[id as usize].last_site = site;
    }

    /// The running task enters region `name`: returns whether it is charged (`--costs
    /// postgres` and the table has it).
    pub(crate) fn region_enter(&mut self, id: u32, name: &'static str) -> bool {
        let Some(rates) = &self.pg_rates else { return false };
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let known = *self.region_cache.entry(key).or_insert_with(|| rates.get(name).copied());
        if known.is_none() {
            self.sources.unknown_regions.insert(name);
            return false;
        }
        self.tasks[id as usize].region_depth += 1;
        true
    }

    /// The running task leaves region `name` (accepted by [`Exec::region_enter`]) after
    /// `items` items: charges PostgreSQL's count for it.
    pub(crate) fn region_exit(&mut self, id: u32, name: &'static str, items: u64) {
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let Some(Some((fixed, per))) = self.region_cache.get(&key).copied() else { return };
        let t = &mut self.tasks[id as usize];
        t.region_depth = t.region_depth.saturating_sub(1);
        let cost = ((fixed + per.saturating_mul(items)) as f64 * self.pg_rate_scale).round() as u64;
        self.sources.postgres += cost;
        let e = self.regions.entry(name).or_insert((0, 0));
        e.0 += 1;
        e.1 += cost;
        self.charge(id, cost);
    }

    /// Charges region `name`'s count now, replacing nothing ([`crate::task::region_charge`]).
    pub(crate) fn region_charge(&mut self, id: u32, name: &'static str) {
        let Some(rates) = &self.pg_rates else { return };
        let key = name.as_ptr() as u64 ^ ((name.len() as u64) << 48);
        let known = *self.region_cache.entry(key).or_insert_with(|| rates.get(name).copied());
        let Some((fixed, _)) = known else {
            self.sources.unknown_regions.insert(name);
            return;
        };
        let cost = (fixed as f64 * self.pg_rate_scale).round() as u64;
        self.sources.postgres += cost;
        let e = self.regions.entry(name).or_insert((0, 0));
        e.0 += 1;
        e.1 += cost;
        self.charge(id, cost);
    }

    /// Charges `cost` ps of modelled work that is no code of the lock stack ([`crate::task::compute`]).
    pub(crate) fn charge_modelled(&mut self, id: u32, cost: u64) {
        self.sources.modelled += cost;
        self.charge(id, cost);
    }

    /// True when another event comes before the running task's clock, so it must wait its
    /// turn in the heap.
    pub(crate) fn must_yield(&self, id: u32) -> bool {
        match self.heap.peek() {
            None => false,
            Some(Reverse(ev)) => (ev.time(), ev.task()) < (self.tasks[id as usize].clock, id),
        }
    }

    /// Queues the running task to resume at its clock.
    pub(crate) fn push_resume(&mut self, id: u32) {
        let time = self.tasks[id as usize].clock;
        self.heap.push(Reverse(Ev::new(time, id, EV_RESUME, 0)));
    }

    /// Queues a timer for task `id` at `time`, valid while its park generation is unchanged.
    pub(crate) fn push_timer(&mut self, id: u32, time: u64) {
        let generation = self.tasks[id as usize].generation;
        self.heap.push(Reverse(Ev::new(time, id, EV_TIMER, generation)));
    }

    /// After an operation that did not block: preempts the task when its slice is used and
    /// another task waits for a hardware thread. Returns whether it was preempted.
    pub(crate) fn maybe_preempt(&mut self, id: u32) -> bool {
        let t = &self.tasks[id as usize];
        if self.ready.is_empty() || t.clock - t.slice_start < self.m.time_slice {
            return false;
        }
        self.preemptions += 1;
        self.requeue(id);
        true
    }

    /// Gives the task's hardware thread to the head of the run queue and queues the task
    /// behind it (a preemption or a yield with waiters).
    pub(crate) fn requeue(&mut self, id: u32) {
        let now = self.tasks[id as usize].clock;
        self.release_hw(id, now);
        let t = &mut self.tasks[id as usize];
        t.state = State::Ready;
        t.since = now;
        self.ready.push_back(id);
    }

    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Puts task `id` on hardware thread `hw` at time `at` (plus a context switch when `switch`
    /// and the thread last ran another task).
    fn dispatch(&mut self, id: u32, hw: u32, mut at: u64, switch: bool) {
        let last = self.hw_last_task[hw as usize];
        if last != id && last != NONE {
            self.context_switches += 1;
            if switch {
                at += self.m.context_switch;
            }
        }
        self.hw_last_task[hw as usize] = id;
        self.hw_task[hw as usize] = id;
        self.running += 1;
        self.max_running = self.max_running.max(self.running);
        let t = &mut self.tasks[id as usize];
        t.hw = hw;
        t.state = State::Running;
        t.clock = t.clock.max(at);
        t.slice_start = t.clock;
        self.push_resume(id);
    }

    /// Frees task `id`'s hardware thread at time `at`; the head of the run queue takes it.
    pub(crate) fn release_hw(&mut self, id: u32, at: u64) {
        let hw = self.tasks[id as usize].hw;
        debug_assert_ne!(hw, NONE);
        let t = &mut self.tasks[id as usize];
        t.hw = NONE;
        t.last_hw = hw;
        self.hw_task[hw as usize] = NONE;
        self.running -= 1;
        if let Some(next) = self.ready.pop_front() {
            let n = &mut self.tasks[next as usize];
            n.runnable_ps += at.saturating_sub(n.since);
            self.dispatch(next, hw, at, true);
        }
    }

    /// Task `id` becomes runnable at `at`: on a free hardware thread (its last one if free,
    /// else the first free in the scheduler's order) or at the back of the run queue.
    pub(crate) fn make_ready(&mut self, id: u32, at: u64) {
        let last = self.tasks[id as usize].last_hw;
        let hw = if last != NONE && self.hw_task[last as usize] == NONE {
            Some(last)
        } else {
            self.m.hw_order.iter().copied().find(|&h| self.hw_task[h as usize] == NONE)
        };
        match hw {
            Some(h) => self.dispatch(id, h, at, false),
            None => {
                let t = &mut self.tasks[id as usize];
                t.state = State::Ready;
                t.since = at;
                self.ready.push_back(id);
            }
        }
    }

    /// Books the time task `id` spent blocked (since `since`) until `at`, by what it did.
    pub(crate) fn end_block(&mut self, id: u32, at: u64) {
        let t = &mut self.tasks[id as usize];
        let d = at.saturating_sub(t.since);
        match t.state {
            State::Parked => *t.waiting_ps.entry(t.wait_class.unwrap_or(UNCLASSIFIED)).or_insert(0) += d,
            // A sleep under a wait class is a wait of that class (a spinlock's back-off sleep is
            // `Timeout:SpinDelay`, a modelled fsync `IO:WALSync`), not idle sleeping.
            State::Sleeping => match t.wait_class {
                Some(c) => *t.waiting_ps.entry(c).or_insert(0) += d,
                None => t.sleeping_ps += d,
            },
            State::Joining(_) => t.joining_ps += d,
            _ => {}
        }
    }

    /// Blocks the running task `id` in `state` at its clock, freeing its hardware thread.
    pub(crate) fn block(&mut self, id: u32, state: State, site: &'static Location<'static>) {
        let now = self.tasks[id as usize].clock;
        let t = &mut self.tasks[id as usize];
        t.state = state;
        t.since = now;
        t.wait_site = Some(site);
        t.generation = t.generation.wrapping_add(1);
        self.release_hw(id, now);
    }

    /// Wakes a parked task at `at` (an unpark: `result` true; a time-out: false).
    /// The wake latency counts as part of the wait.
    pub(crate) fn wake(&mut self, id: u32, at: u64, result: bool) {
        let when = at + self.m.wake_latency;
        self.end_block(id, when);
        let t = &mut self.tasks[id as usize];
        t.generation = t.generation.wrapping_add(1);
        t.park_result = result;
        t.wait_site = None;
        self.make_ready(id, when);
    }

    /// Creates a task record, runnable at `at`.
    pub(crate) fn new_task(&mut self, name: String, at: u64, f: Box<dyn FnOnce()>) -> u32 {
        let id = self.tasks.len() as u32;
        self.tasks.push(Task {
            name,
            clock: at,
            state: State::Ready,
            hw: NONE,
            last_hw: NONE,
            last_site: SITE_START,
            slice_start: at,
            token: false,
            generation: 0,
            park_result: false,
            wait_site: None,
            wait_class: None,
            since: at,
            outcome: None,
            joined: false,
            joiners: Vec::new(),
            locals: TaskLocals::default(),
            yielder: std::ptr::null(),
            seg_start: None,
            ops: 0,
            region_depth: 0,
            running_ps: 0,
            spinning_ps: BTreeMap::new(),
            waiting_ps: BTreeMap::new(),
            sleeping_ps: 0,
            joining_ps: 0,
            runnable_ps: 0,
            panicked: false,
        });
        self.spawned.push((id, f));
        self.make_ready(id, at);
        id
    }

    /// The task ends (its exit operation ran at its clock): frees its hardware thread, wakes
    /// its joiners after the futex latency.
    pub(crate) fn finish(&mut self, id: u32, outcome: Result<(), Payload>) {
        let now = self.tasks[id as usize].clock;
        let t = &mut self.tasks[id as usize];
        t.panicked = outcome.is_err();
        t.outcome = Some(outcome);
        let joiners = std::mem::take(&mut t.joiners);
        self.release_hw(id, now);
        self.tasks[id as usize].state = State::Finished;
        for j in joiners {
            let when = now + self.m.wake_latency;
            self.end_block(j, when);
            self.make_ready(j, when);
        }
        if id == 0 {
            self.main_done = true;
            self.end_time = now;
        }
    }

    fn stats(&self, top: usize, mode: &str) -> SimStats {
        let mut lines: Vec<(&u64, &crate::machine::Line)> = self.lines.map.iter().collect();
        lines.sort_by_key(|(_, l)| (Reverse(l.transfers), l.first_touch));
        let line_stats = |line: u64, l: &crate::machine::Line| LineStats {
            name: self.line_names.get(&line).cloned().unwrap_or_else(|| format!("line #{}", l.first_touch)),
            addr: line << crate::machine::LINE_SHIFT,
            transfers: l.transfers,
            invalidations: l.invalidations,
            memory_fills: l.memory_fills,
            refills: l.refills,
            llc_fills: l.llc_fills,
            accesses: l.accesses,
        };
        let hot_lines = lines
            .iter()
            .take(top)
            .filter(|(_, l)| l.transfers > 0)
            .map(|&(&line, l)| line_stats(line, l))
            .collect();
        let mut missed: Vec<(&u64, &crate::machine::Line)> =
            self.lines.map.iter().filter(|(_, l)| l.transfers + l.memory_fills + l.llc_fills > 0).collect();
        missed.sort_by_key(|(_, l)| l.first_touch);
        let missed_lines = missed.iter().map(|&(&line, l)| line_stats(line, l)).collect();
        let caches = self.lines.caches.as_ref().zip(self.profile_caches.as_ref()).map(|(c, p)| CacheStats {
            private_kib: p.private_kib,
            private_ways: p.private_ways,
            llc_kib: p.llc_kib,
            llc_ways: p.llc_ways,
            private_evictions: c.private_evictions,
            llc_evictions: c.llc_evictions,
            back_invalidations: c.back_invalidations,
        });
        let ns = |p: u64| (p as f64 / PS_PER_NS).round() as u64;
        let tasks = self
            .tasks
            .iter()
            .enumerate()
            .map(|(i, t)| TaskStats {
                id: i as u32,
                name: t.name.clone(),
                ops: t.ops,
                running_ns: ns(t.running_ps),
                spinning_ns: t.spinning_ps.iter().map(|(k, v)| (k.to_string(), ns(*v))).collect(),
                waiting_ns: t.waiting_ps.iter().map(|(k, v)| (k.to_string(), ns(*v))).collect(),
                sleeping_ns: ns(t.sleeping_ps),
                joining_ns: ns(t.joining_ps),
                runnable_ns: ns(t.runnable_ps),
                finished: t.state == State::Finished,
                panicked: t.panicked,
            })
            .collect();
        let mut stats = SimStats {
            machine: self.m.name.clone(),
            clock_mode: mode.to_string(),
            virtual_ns: ns(self.end_time),
            virtual_seconds: self.end_time as f64 / 1e12,
            events: self.events,
            context_switches: self.context_switches,
            preemptions: self.preemptions,
            parks: self.parks,
            wakes: self.wakes,
            max_running: self.max_running,
            caches,
            misses_by_structure: BTreeMap::new(),
            missed_lines,
            lines_touched: self.lines.map.len() as u64,
            transfers: self.lines.map.values().map(|l| l.transfers).sum(),
            segments_from_table: self.segments_from_table,
            segments_at_default: self.segments_at_default,
            segments_by_file_pair: self.segments_by_file_pair,
            time_sources: TimeSources {
                costs: if self.pg_rates.is_some() { "postgres" } else { "own" }.to_string(),
                own_code_ns: ns(self.sources.own),
                untimed_ns: ns(self.sources.untimed),
                replaced_own_ns: ns(self.sources.replaced),
                postgres_ns: ns(self.sources.postgres),
                modelled_ns: ns(self.sources.modelled),
                regions: self
                    .regions
                    .iter()
                    .map(|(k, &(calls, p))| (k.to_string(), RegionStats { calls, ns: ns(p) }))
                    .collect(),
                unknown_regions: self.sources.unknown_regions.iter().map(|s| s.to_string()).collect(),
                postgres_ipc: self.pg_rates.is_some().then(|| self.profile_ipc / self.pg_rate_scale),
            },
            hot_lines,
            tasks,
        };
        stats.group_misses(|_| None);
        stats
    }

    fn deadlock(&self) -> SimError {
        let at = self.tasks.iter().filter(|t| t.state != State::Finished).map(|t| t.since).max().unwrap_or(0);
        let tasks = self
            .tasks
            .iter()
            .enumerate()
            .filter(|(_, t)| t.state != State::Finished)
            .map(|(i, t)| BlockedTask {
                id: TaskId(i as u32),
                name: t.name.clone(),
                state: match t.state {
                    State::Parked => "parked".to_string(),
                    State::Sleeping => "sleeping".to_string(),
                    State::Joining(j) => format!("joining task {j}"),
                    State::Ready | State::Running => "runnable".to_string(),
                    State::Finished => unreachable!("filtered"),
                },
                site: t
                    .wait_site
                    .map_or_else(|| "?".to_string(), |l| format!("{}:{}:{}", l.file(), l.line(), l.column())),
                class: t.wait_class.map(str::to_string),
                since_ns: (t.since as f64 / PS_PER_NS).round() as u64,
            })
            .collect();
        SimError::Deadlock { at_ns: (at as f64 / PS_PER_NS).round() as u64, tasks }
    }

    fn segment_table(&self) -> SegmentTable {
        let mut out = SegmentTable::default();
        if let Some(measured) = &self.measured {
            for (&key, &(sum, n)) in measured {
                let (from, to) = ((key >> 32) as usize, (key & 0xffff_ffff) as usize);
                let name = format!("{} -> {}", self.site_names[from], self.site_names[to]);
                let e = out.segments.entry(name).or_insert(SegmentCost { ns: 0.0, samples: 0 });
                let total = e.ns * e.samples as f64 + sum;
                e.samples += n;
                e.ns = if e.samples == 0 { 0.0 } else { total / e.samples as f64 };
            }
        }
        out
    }
}

type Coro = Coroutine<(), (), (), DefaultStack>;

/// A message from a panic payload.
pub(crate) fn panic_message(p: &Payload) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_string()
    }
}

impl Simulation {
    /// A simulation of `profile` with the default configuration (deterministic clock with an
    /// empty segment table).
    pub fn new(profile: MachineProfile) -> Simulation {
        Simulation { profile, config: SimConfig::default(), caches: std::sync::atomic::AtomicBool::new(true) }
    }

    /// Whether the runs that start from now on give the caches the profile's capacities
    /// (`[caches]`; the default) or none (`false`: a line stays in a core's cache until another
    /// core's write takes it, the model without capacity). Without a `[caches]` table in the
    /// profile the caches have no capacity either way. `--set sim.caches=off` calls it.
    pub fn set_caches(&self, on: bool) {
        self.caches.store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether the next run models cache capacities: [`Simulation::set_caches`] on and the
    /// profile has a `[caches]` table.
    pub fn caches(&self) -> bool {
        self.caches.load(std::sync::atomic::Ordering::Relaxed) && self.profile.caches.is_some()
    }

    /// Replaces the configuration.
    pub fn with_config(mut self, config: SimConfig) -> Simulation {
        self.config = config;
        self
    }

    /// The profile.
    pub fn profile(&self) -> &MachineProfile {
        &self.profile
    }

    /// Runs `main` as task 0 (named `main`) until it returns, with every task it spawns, in
    /// virtual time. Tasks still unfinished when `main` returns are abandoned (their stacks
    /// unwound, their operations turned into no-ops), as a process's threads end with `main`.
    ///
    /// # Errors
    /// [`SimError::Deadlock`] when no task can run and no timer is pending before `main`
    /// returns; [`SimError::MainPanicked`] when `main` panics; [`SimError::Nested`] when called
    /// from a simulated task; [`SimError::Stack`] when a stack cannot be mapped.
    pub fn run<F: FnOnce() + 'static>(&self, main: F) -> Result<SimReport, SimError> {
        if !CURRENT.with(Cell::get).is_null() {
            return Err(SimError::Nested);
        }
        let host_start = Instant::now();
        let exec = Box::new(RefCell::new(Exec::new(&self.profile, &self.config, self.caches())));
        let exec_ptr: *const RefCell<Exec> = &*exec;
        CURRENT.with(|c| c.set(exec_ptr));
        let _guard = CurrentGuard;
        exec.borrow_mut().new_task("main".to_string(), 0, Box::new(main));
        let mut coros: Vec<Option<Coro>> = Vec::new();
        // Declared after `coros`, so dropped before it: if the loop below panics, the
        // coroutines are unwound with operations already turned into no-ops.
        let teardown = TeardownGuard(&exec);
        let result = loop {
            self.start_spawned(&exec, &mut coros)?;
            let ev = {
                let mut ex = exec.borrow_mut();
                if ex.main_done {
                    break Ok(());
                }
                match ex.heap.pop() {
                    Some(Reverse(ev)) => ev,
                    None => break Err(ex.deadlock()),
                }
            };
            let id = ev.task();
            if ev.kind() == EV_TIMER {
                let mut ex = exec.borrow_mut();
                let t = &ex.tasks[id as usize];
                if t.generation & 0x7fff_ffff == ev.generation() {
                    match t.state {
                        State::Parked => ex.wake(id, ev.time(), false),
                        State::Sleeping => {
                            let when = ev.time() + ex.m.wake_latency;
                            ex.end_block(id, when);
                            let t = &mut ex.tasks[id as usize];
                            t.generation = t.generation.wrapping_add(1);
                            t.wait_site = None;
                            ex.make_ready(id, when);
                        }
                        _ => {}
                    }
                }
                continue;
            }
            {
                let mut ex = exec.borrow_mut();
                let t = &ex.tasks[id as usize];
                debug_assert!(t.state == State::Running && t.clock == ev.time(), "stale resume event");
                ex.current = id;
                ex.in_task = true;
            }
            let coro = coros[id as usize].as_mut().expect("a running task has a coroutine");
            let r = coro.resume(());
            exec.borrow_mut().in_task = false;
            if let CoroutineResult::Return(()) = r {
                coros[id as usize] = None;
            }
        };
        // Tear down: abandoned tasks unwind with their operations turned into no-ops.
        exec.borrow_mut().teardown = true;
        for (i, c) in coros.iter_mut().enumerate() {
            if let Some(c) = c.as_mut() {
                {
                    let mut ex = exec.borrow_mut();
                    ex.current = i as u32;
                    ex.in_task = true;
                }
                c.force_unwind();
                exec.borrow_mut().in_task = false;
            }
        }
        drop(teardown);
        drop(coros);
        let host_seconds = host_start.elapsed().as_secs_f64();
        let mut ex = exec.borrow_mut();
        for t in &mut ex.tasks {
            t.locals.clear();
        }
        result?;
        if let Some(Err(p)) = &ex.tasks[0].outcome {
            return Err(SimError::MainPanicked(panic_message(p)));
        }
        let mode = if ex.measured.is_some() { "measured" } else { "deterministic" };
        let stats = ex.stats(self.config.top_lines, mode);
        let events = ex.events;
        Ok(SimReport {
            stats,
            host: HostStats {
                host_seconds,
                events_per_second: if host_seconds > 0.0 { events as f64 / host_seconds } else { 0.0 },
                clipped_segments: ex.clipped_segments,
                segment_overhead_ns: if ex.measured.is_some() { ex.segment_overhead_ns } else { 0.0 },
            },
            segments: ex.segment_table(),
        })
    }

    /// Runs `main` in measured mode and returns the segment table it filled: the calibration
    /// pass of the deterministic mode.
    ///
    /// # Errors
    /// As [`Simulation::run`].
    pub fn calibrate<F: FnOnce() + 'static>(&self, main: F) -> Result<SegmentTable, SimError> {
        let sim = self.clone().with_config(SimConfig { clock: ClockMode::Measured, ..self.config.clone() });
        Ok(sim.run(main)?.segments)
    }

    /// Creates the coroutines of tasks spawned since the last call.
    fn start_spawned(&self, exec: &RefCell<Exec>, coros: &mut Vec<Option<Coro>>) -> Result<(), SimError> {
        let spawned = std::mem::take(&mut exec.borrow_mut().spawned);
        for (id, f) in spawned {
            let stack =
                DefaultStack::new(self.config.stack_size).map_err(|e| SimError::Stack(e.to_string()))?;
            let coro = Coro::with_stack(stack, move |y: &Yielder<(), ()>, ()| task_body(id, y, f));
            debug_assert_eq!(coros.len(), id as usize);
            coros.push(Some(coro));
        }
        Ok(())
    }
}

/// A task's whole life inside its coroutine: run the closure, catch its panic, drop its
/// task-locals (their destructors may perform operations), then the exit operation.
fn task_body(id: u32, y: &Yielder<(), ()>, f: Box<dyn FnOnce()>) {
    {
        let exec = crate::task::exec();
        let mut ex = exec.borrow_mut();
        let t = &mut ex.tasks[id as usize];
        t.yielder = y;
        if ex.measured.is_some() {
            ex.tasks[id as usize].seg_start = Some(crate::hostclock::ticks());
        }
    }
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(f));
    let locals = std::mem::take(&mut crate::task::exec().borrow_mut().tasks[id as usize].locals);
    // A panicking destructor of a task-local is dropped like std drops a panicking TLS value
    // would not be: it is caught so that the task still ends.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(locals)));
    crate::task::exit(outcome);
}

/// A duration from virtual picoseconds.
pub(crate) fn duration_ps(p: u64) -> Duration {
    Duration::from_nanos(p / 1000) + Duration::from_nanos(u64::from(p % 1000 >= 500))
}

/// Virtual picoseconds from a duration (saturating).
pub(crate) fn ps_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2000).saturating_mul(1000)
}
