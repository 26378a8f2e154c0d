//! The executor's state, shared by the scheduler ([`crate::sched`]), the coherence hand-off
//! ([`crate::coherence`]), the accounting ([`crate::account`]), the run loop ([`crate::exec`])
//! and the operations ([`crate::task`]): the tasks, the event heap, the machine and its lines.
//! Everything lives on the one host thread that runs the simulation, in a `RefCell` reached
//! through [`CURRENT`]; no lock.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt;
use std::panic::Location;
use std::time::Duration;

use corosensei::Yielder;
use serde::{Deserialize, Serialize};

use crate::cache::Caches;
use crate::machine::{LineMap, Lines, Machine, ps};
use crate::profile::MachineProfile;
use crate::segments::{SegmentSource, SegmentTable, file_pair_means};

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

pub(crate) const NONE: u32 = u32::MAX;
/// Reserved site ids: a task's first and last segment boundaries.
pub(crate) const SITE_START: u32 = 0;
pub(crate) const SITE_EXIT: u32 = 1;

pub(crate) const EV_RESUME: u8 = 0;
pub(crate) const EV_TIMER: u8 = 1;

/// An event: resume a task that holds a hardware thread, or a timer (sleep or timed park)
/// expiring. Packed in one `u128` so that the heap compares one integer: time (64 bits), then
/// task id (32), then kind (1), then the park generation (31). Ties go to the lower task id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Ev(u128);

impl Ev {
    pub(crate) fn new(time: u64, task: u32, kind: u8, generation: u32) -> Ev {
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
    pub(crate) fn kind(self) -> u8 {
        ((self.0 >> 31) & 1) as u8
    }
    pub(crate) fn generation(self) -> u32 {
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

pub(crate) type Payload = Box<dyn Any + Send + 'static>;

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
    pub(crate) last_hw: u32,
    pub(crate) last_site: u32,
    pub(crate) slice_start: u64,
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
    pub(crate) running_ps: u64,
    pub(crate) spinning_ps: BTreeMap<&'static str, u64>,
    pub(crate) waiting_ps: BTreeMap<&'static str, u64>,
    pub(crate) sleeping_ps: u64,
    pub(crate) joining_ps: u64,
    pub(crate) runnable_ps: u64,
    pub(crate) panicked: bool,
}

/// The class time is booked under when a task waits or spins without naming one.
pub(crate) const UNCLASSIFIED: &str = "unclassified";

/// Where the tasks' virtual time came from, ps (see [`TimeSources`]).
#[derive(Default)]
pub(crate) struct SourcesPs {
    pub(crate) own: u64,
    pub(crate) untimed: u64,
    pub(crate) replaced: u64,
    pub(crate) postgres: u64,
    pub(crate) modelled: u64,
    pub(crate) unknown_regions: std::collections::BTreeSet<&'static str>,
}

pub(crate) struct Exec {
    pub(crate) m: Machine,
    /// The profile's cache sizes, when the caches have a capacity in this run.
    pub(crate) profile_caches: Option<crate::profile::CacheSizes>,
    pub(crate) lines: Lines,
    pub(crate) line_names: LineMap<String>,
    pub(crate) tasks: Vec<Task>,
    pub(crate) heap: BinaryHeap<Reverse<Ev>>,
    pub(crate) ready: VecDeque<u32>,
    pub(crate) hw_task: Vec<u32>,
    pub(crate) hw_last_task: Vec<u32>,
    pub(crate) running: u32,
    pub(crate) max_running: u32,
    pub(crate) current: u32,
    pub(crate) in_task: bool,
    pub(crate) teardown: bool,
    pub(crate) events: u64,
    pub(crate) context_switches: u64,
    pub(crate) preemptions: u64,
    pub(crate) parks: u64,
    pub(crate) wakes: u64,
    pub(crate) spawned: Vec<(u32, Box<dyn FnOnce()>)>,
    pub(crate) site_ids: LineMap<u32>,
    pub(crate) site_names: Vec<String>,
    /// Segment key to (cost in ps, whether the table had it).
    pub(crate) seg_cache: LineMap<(u64, SegmentSource)>,
    /// Deterministic clock: segments charged from the table, and at the default cost.
    pub(crate) segments_from_table: u64,
    pub(crate) segments_at_default: u64,
    pub(crate) segments_by_file_pair: u64,
    pub(crate) measured: Option<LineMap<(f64, u64)>>,
    /// Host ns per cycle-counter tick, and the per-segment overhead subtracted (measured mode).
    pub(crate) ns_per_tick: f64,
    pub(crate) segment_overhead_ns: f64,
    pub(crate) clipped_segments: u64,
    /// Region name to (ps per call, ps per item), under `--costs postgres`.
    pub(crate) pg_rates: Option<BTreeMap<String, (u64, u64)>>,
    /// The profile's `postgres_ipc`, and what the region rates are multiplied by (the profile's
    /// over a calibrated one: [`crate::task::set_postgres_ipc`]).
    pub(crate) profile_ipc: f64,
    pub(crate) pg_rate_scale: f64,
    /// [`Exec::pg_rates`] by the address of the region's name (the hook passes `&'static str`s).
    pub(crate) region_cache: LineMap<Option<(u64, u64)>>,
    /// Where virtual time came from ([`TimeSources`]), ps.
    pub(crate) sources: SourcesPs,
    /// Per region: (calls, ps charged).
    pub(crate) regions: BTreeMap<&'static str, (u64, u64)>,
    pub(crate) table: SegmentTable,
    /// The table's sample-weighted mean per pair of files ([`file_pair`]).
    pub(crate) file_pairs: BTreeMap<String, f64>,
    pub(crate) default_segment_ps: u64,
    pub(crate) seed: u64,
    pub(crate) main_done: bool,
    pub(crate) end_time: u64,
}

thread_local! {
    /// The simulation running on this host thread, while [`Simulation::run`] runs.
    pub(crate) static CURRENT: Cell<*const RefCell<Exec>> = const { Cell::new(std::ptr::null()) };
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
    pub(crate) fn new(profile: &MachineProfile, config: &SimConfig, caches: bool) -> Exec {
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
}

/// The running simulation's executor.
pub(crate) fn exec() -> &'static RefCell<Exec> {
    let p = CURRENT.with(|c| c.get());
    assert!(!p.is_null(), "lockstack_sim::task: called outside a simulation");
    // SAFETY: `CURRENT` is non-null only while `Simulation::run` runs on this thread, and
    // points into the `Box<RefCell<Exec>>` that `run` owns and keeps alive until after it
    // resets `CURRENT` (its `CurrentGuard` drops before the box). No caller keeps the
    // reference past the operation it is called in, and the `'static` never escapes this
    // crate.
    unsafe { &*p }
}

/// A duration from virtual picoseconds.
pub(crate) fn duration_ps(p: u64) -> Duration {
    Duration::from_nanos(p / 1000) + Duration::from_nanos(u64::from(p % 1000 >= 500))
}

/// Virtual picoseconds from a duration (saturating).
pub(crate) fn ps_of(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / 2000).saturating_mul(1000)
}
