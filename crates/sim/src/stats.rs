//! What a simulation run reports: deterministic statistics (virtual time, operations, line
//! transfers, per-task time split) and the host's timing, kept apart so that two runs of the
//! same inputs in deterministic mode serialize [`SimStats`] byte for byte.

use std::collections::BTreeMap;

use serde::Serialize;

/// The result of [`crate::Simulation::run`]: the deterministic statistics and the host timing.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    /// Everything that depends only on the inputs (in deterministic mode).
    pub stats: SimStats,
    /// Host wall-clock figures, which differ run to run.
    pub host: HostStats,
    /// In measured mode, the segment costs the run observed (the calibration of the
    /// deterministic mode); empty in deterministic mode.
    #[serde(skip)]
    pub segments: crate::segments::SegmentTable,
}

/// Host-side timing of one run.
#[derive(Debug, Clone, Serialize)]
pub struct HostStats {
    /// Host wall-clock seconds the run took.
    pub host_seconds: f64,
    /// Simulated operations (facade calls that reached the scheduler) per host second.
    pub events_per_second: f64,
    /// Measured clock only: segments the host interrupted, charged their call-site pair's
    /// mean instead of their host time (see [`crate::ClockMode::Measured`]); 0 otherwise.
    pub clipped_segments: u64,
    /// Measured clock only: the host ns subtracted from each segment as the measurement's own
    /// cost ([`crate::SimConfig::segment_overhead_ns`]).
    pub segment_overhead_ns: f64,
}

/// Deterministic statistics of one run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SimStats {
    /// The machine profile's name.
    pub machine: String,
    /// `"deterministic"` or `"measured"`.
    pub clock_mode: String,
    /// Virtual time from the start to the main task's end, ns.
    pub virtual_ns: u64,
    /// The same in seconds.
    pub virtual_seconds: f64,
    /// Simulated operations (atomics, fences, touches, spins, parks, ...).
    pub events: u64,
    /// Context switches (a task dispatched on a hardware thread another task left).
    pub context_switches: u64,
    /// Preemptions at the end of a time slice.
    pub preemptions: u64,
    /// Parks that went to sleep (not those that consumed a pending unpark).
    pub parks: u64,
    /// Unparks that woke a sleeping task.
    pub wakes: u64,
    /// The most tasks that ran at once (never above the hardware threads).
    pub max_running: u32,
    /// Distinct 64-byte lines touched.
    pub lines_touched: u64,
    /// Core-to-core line hand-offs, all lines.
    pub transfers: u64,
    /// Deterministic clock: segments whose cost came from the segment table.
    pub segments_from_table: u64,
    /// Deterministic clock: segments the table did not know, charged
    /// [`crate::SimConfig::default_segment_ns`].
    pub segments_at_default: u64,
    /// Deterministic clock: segments whose call sites the table lacks but whose two files it
    /// has, charged the mean of its segments between those files (code moved within a file
    /// since the table was made).
    pub segments_by_file_pair: u64,
    /// Where the tasks' virtual time came from: the lock stack's own code, PostgreSQL's
    /// counts, modelled work; the rest is the machine's operations and waits.
    pub time_sources: TimeSources,
    /// The hottest lines by hand-offs (at most [`crate::SimConfig::top_lines`]), hottest first.
    pub hot_lines: Vec<LineStats>,
    /// The caches' capacities and evictions; `None` when the caches have no capacity (no
    /// `[caches]` in the profile, or [`crate::Simulation::set_caches`] off).
    pub caches: Option<CacheStats>,
    /// Misses of the cores' private caches per data structure: each line's name (as
    /// `hot_lines` names it) with every run of digits replaced by `#` (`buffer # state`,
    /// `PGPROC # xid + xmin`), `unnamed` for lines nobody named. Filled for every run, with or
    /// without capacity.
    pub misses_by_structure: BTreeMap<String, StructureMisses>,
    /// Every line that missed at least once, in order of first touch (addresses change run to
    /// run, so not serialized): the input of [`SimStats::group_misses`].
    #[serde(skip)]
    pub missed_lines: Vec<LineStats>,
    /// One entry per task, in task-id order.
    pub tasks: Vec<TaskStats>,
}

/// One line's traffic.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LineStats {
    /// The name given with [`crate::task::name_line`], or `line #k` (the k-th line touched).
    pub name: String,
    /// The line's address (`addr & !63`); not serialized, since it changes run to run.
    #[serde(skip)]
    pub addr: u64,
    /// Core-to-core hand-offs of its data.
    pub transfers: u64,
    /// Writes that invalidated shared copies.
    pub invalidations: u64,
    /// Fills from memory (first touches and refills).
    pub memory_fills: u64,
    /// Fills from memory of a line the caches had evicted (capacity misses to memory).
    pub refills: u64,
    /// Fills from a last-level cache after the line had left every private cache.
    pub llc_fills: u64,
    /// Accesses of every kind.
    pub accesses: u64,
}

/// The caches of a run with capacity-limited caches.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CacheStats {
    /// One core's private cache, KiB, and its ways.
    pub private_kib: u32,
    /// See `private_kib`.
    pub private_ways: u32,
    /// One last-level cache, KiB, and its ways.
    pub llc_kib: u32,
    /// See `llc_kib`.
    pub llc_ways: u32,
    /// Lines pushed out of a private cache while its core held them.
    pub private_evictions: u64,
    /// Lines pushed out of a last-level cache while it held them.
    pub llc_evictions: u64,
    /// Private copies taken away by those LLC evictions (the LLC is inclusive).
    pub back_invalidations: u64,
}

/// The private-cache misses of one data structure's lines (summed over its lines).
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct StructureMisses {
    /// Lines of the structure that missed at least once.
    pub lines: u64,
    /// Accesses of every kind to them.
    pub accesses: u64,
    /// Misses served by another core (a transfer: coherence misses).
    pub transfers: u64,
    /// Misses served by a last-level cache (the line had left the private caches: capacity).
    pub llc_fills: u64,
    /// Misses served by memory: first touches and refills.
    pub memory_fills: u64,
    /// The part of `memory_fills` that were refills of an evicted line (capacity).
    pub refills: u64,
}

impl StructureMisses {
    /// All misses: transfers, LLC fills and memory fills.
    pub fn misses(&self) -> u64 {
        self.transfers + self.llc_fills + self.memory_fills
    }

    /// The misses the caches' capacity caused: LLC fills and refills from memory.
    pub fn capacity_misses(&self) -> u64 {
        self.llc_fills + self.refills
    }
}

/// The structure a line's name belongs to: every run of ASCII digits replaced by `#`, and a
/// range `#-#` folded to `#` (`buffer 17 page +128` is `buffer # page +#`, `PgXact 0-4` is
/// `PgXact #`); `line #k` (no name) is `unnamed`.
pub fn structure_of(name: &str) -> String {
    if name.starts_with("line #") {
        return "unnamed".to_string();
    }
    let mut out = String::with_capacity(name.len());
    let mut in_digits = false;
    for ch in name.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(ch);
        }
    }
    out.replace("#-#", "#")
}

impl SimStats {
    /// Groups [`SimStats::missed_lines`] by structure ([`structure_of`] of each line's name:
    /// `name(addr)` where it gives one, else the name the run gave it) into
    /// [`SimStats::misses_by_structure`].
    pub fn group_misses(&mut self, name: impl Fn(u64) -> Option<String>) {
        let mut by: BTreeMap<String, StructureMisses> = BTreeMap::new();
        for l in &self.missed_lines {
            let key = structure_of(&name(l.addr).unwrap_or_else(|| l.name.clone()));
            let e = by.entry(key).or_default();
            e.lines += 1;
            e.accesses += l.accesses;
            e.transfers += l.transfers;
            e.llc_fills += l.llc_fills;
            e.memory_fills += l.memory_fills;
            e.refills += l.refills;
        }
        self.misses_by_structure = by;
    }
}

/// How one task spent its virtual time, ns.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct TaskStats {
    /// The task's id.
    pub id: u32,
    /// The name given at spawn.
    pub name: String,
    /// Simulated operations this task performed.
    pub ops: u64,
    /// Running outside any wait class: local work and operations.
    pub running_ns: u64,
    /// Running inside a wait class (spinning, retrying), per class.
    pub spinning_ns: BTreeMap<String, u64>,
    /// Parked (asleep in a futex), per wait class (`unclassified` when none was set), and
    /// asleep in [`crate::task::sleep`] under a wait class (a spinlock's back-off sleep under
    /// `Timeout:SpinDelay`, a modelled fsync under `IO:WALSync`).
    pub waiting_ns: BTreeMap<String, u64>,
    /// Asleep in [`crate::task::sleep`] outside any wait class (a client's round trip).
    pub sleeping_ns: u64,
    /// Waiting in [`crate::task::join`].
    pub joining_ns: u64,
    /// Runnable but without a hardware thread (time-sliced out, or waiting for one to free).
    pub runnable_ns: u64,
    /// The task finished (false: abandoned when the main task ended).
    pub finished: bool,
    /// The task ended with a panic.
    pub panicked: bool,
}

/// Where virtual time came from, summed over every task, ns. What is not here is the
/// machine's own operations (line transfers, atomics, fences, pauses, system calls) and waits.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct TimeSources {
    /// `"postgres"` (PostgreSQL's counts charged for the regions the code marks) or `"own"`.
    pub costs: String,
    /// The lock stack's own code outside every charged region (segment costs).
    pub own_code_ns: u64,
    /// The part of `own_code_ns` from segments the segment table did not know (charged its
    /// median): time nothing measured.
    pub untimed_ns: u64,
    /// The lock stack's own code inside charged regions, not charged (PostgreSQL's count
    /// stood for it).
    pub replaced_own_ns: u64,
    /// PostgreSQL's counts charged for regions.
    pub postgres_ns: u64,
    /// Modelled work that is no code here (a pgbench client's CPU, a statement's work
    /// charged with `hook::compute`).
    pub modelled_ns: u64,
    /// Per charged region: calls and time.
    pub regions: BTreeMap<String, RegionStats>,
    /// Regions the code entered that the cost table has no figure for (charged as own code).
    pub unknown_regions: Vec<String>,
    /// Under `--costs postgres`: the instructions per cycle PostgreSQL's counts were charged
    /// at when the run ended (the profile's `postgres_ipc`, or a calibrated or `--set`
    /// `sim.postgres_ipc`); `None` under `--costs own`.
    pub postgres_ipc: Option<f64>,
}

/// One PostgreSQL cost region's charges in a run.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct RegionStats {
    /// Times the region ended.
    pub calls: u64,
    /// Virtual time charged, ns.
    pub ns: u64,
}
