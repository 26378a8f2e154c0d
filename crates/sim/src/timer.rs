//! The calibration pass of the deterministic clock, run natively: [`SegmentTimer`] times every
//! segment of local work between two facade operations of the lock stack running on real host
//! threads, keyed by the two call sites exactly as the simulation keys them, and
//! [`time_phase`] turns a measured phase into the [`SegmentTable`] that
//! [`crate::ClockMode::Deterministic`] replays.
//!
//! Why natively rather than under the simulator ([`crate::ClockMode::Measured`]): between two
//! operations the simulator switches coroutines and updates its event heap and line table,
//! which evicts the simulated code's data and branch history; the segments measured there came
//! out 3-4 times longer than the same code takes natively (docs/sim.md, "Validation"). Here an
//! operation costs two cycle-counter reads and a small per-thread map update, and the
//! measurement's own cost is measured (an empty segment) and subtracted.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::panic::Location;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockstack_common::sync::hook::{self, Access, Counting, SimBackend, Site, TaskId};

use crate::facade::op_sites;
use crate::hostclock::{ns_per_tick, ticks};
use crate::segments::{SegmentCost, SegmentTable};

/// Segments timed on one host thread: `(from site, to site)` (pointers of `Location`s; 0 is a
/// thread's start) to (ticks, samples).
#[derive(Default)]
struct ThreadSegments {
    last_site: usize,
    last_ticks: u64,
    started: bool,
    map: HashMap<(usize, usize), (u64, u64), BuildHasherDefault<PairHasher>>,
    sites: HashMap<usize, Site>,
}

/// A multiply-xor hash of the two site pointers: the map is updated at every operation, and
/// SipHash would make the timer's own cost (which is subtracted, but not exactly) larger.
#[derive(Default)]
struct PairHasher(u64);

impl std::hash::Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0.rotate_left(29) ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Every thread's segments, merged when the thread ends (or the phase does, for its own).
#[allow(clippy::type_complexity)]
static COLLECTED: Mutex<Option<(HashMap<(usize, usize), (u64, u64)>, HashMap<usize, Site>)>> =
    Mutex::new(None);

impl ThreadSegments {
    fn flush(&mut self) {
        let mut all = COLLECTED.lock().unwrap_or_else(|e| e.into_inner());
        let (map, sites) = all.get_or_insert_with(Default::default);
        for (k, (t, n)) in self.map.drain() {
            let e = map.entry(k).or_insert((0, 0));
            e.0 += t;
            e.1 += n;
        }
        sites.extend(self.sites.drain());
        self.started = false;
    }
}

impl Drop for ThreadSegments {
    fn drop(&mut self) {
        self.flush();
    }
}

std::thread_local! {
    static SEGMENTS: RefCell<ThreadSegments> = RefCell::new(ThreadSegments::default());
}

/// Ends the running thread's segment at `site`.
#[inline]
fn mark(site: Site) {
    let end = ticks();
    let _ = SEGMENTS.try_with(|c| {
        let mut t = c.borrow_mut();
        let to = site as *const Location<'static> as usize;
        if t.started {
            let key = (t.last_site, to);
            let d = end.saturating_sub(t.last_ticks);
            let e = t.map.entry(key).or_insert((0, 0));
            e.0 += d;
            e.1 += 1;
        }
        t.sites.entry(to).or_insert(site);
        t.started = true;
        t.last_site = to;
    });
}

/// Starts the running thread's first segment (`<start>`, as a simulated task's).
fn begin() {
    let now = ticks();
    let _ = SEGMENTS.try_with(|c| {
        let mut t = c.borrow_mut();
        t.started = true;
        t.last_site = 0;
        t.last_ticks = now;
    });
}

/// Runs `f` (the timer's own bookkeeping of a facade call that is no operation: a task-local
/// look-up, a spawn) without counting its host time in the segment around it.
#[inline]
fn excluded<R>(f: impl FnOnce() -> R) -> R {
    let t0 = ticks();
    let r = f();
    let d = ticks().saturating_sub(t0);
    let _ = SEGMENTS.try_with(|c| {
        let mut t = c.borrow_mut();
        t.last_ticks = t.last_ticks.saturating_add(d);
    });
    r
}

/// Starts the running thread's next segment (after the operation's own native work).
#[inline]
fn restart() {
    let now = ticks();
    let _ = SEGMENTS.try_with(|c| c.borrow_mut().last_ticks = now);
}

/// A facade backend that runs every operation natively (through [`Counting`]: real threads,
/// real parking, host clock) and times the local work between operations.
pub struct SegmentTimer {
    native: Counting,
}

impl SegmentTimer {
    fn new() -> SegmentTimer {
        SegmentTimer { native: Counting::new() }
    }
}

impl SimBackend for SegmentTimer {
    fn atomic(&self, _addr: usize, _size: usize, _access: Access, site: Site) {
        mark(site);
        restart();
    }
    fn fence(&self, site: Site) {
        mark(site);
        restart();
    }
    fn touch(&self, _addr: usize, _len: usize, _access: Access, site: Site) {
        mark(site);
        restart();
    }
    fn spin_hint(&self, site: Site) {
        mark(site);
        std::hint::spin_loop();
        restart();
    }
    fn yield_now(&self, site: Site) {
        mark(site);
        std::thread::yield_now();
        restart();
    }
    fn current_task(&self) -> TaskId {
        self.native.current_task()
    }
    fn park(&self, deadline: Option<Duration>) -> bool {
        mark(op_sites().park);
        let r = self.native.park(deadline);
        restart();
        r
    }
    fn unpark(&self, task: TaskId) {
        mark(op_sites().unpark);
        self.native.unpark(task);
        restart();
    }
    fn now(&self) -> Duration {
        mark(op_sites().now);
        let d = self.native.now();
        restart();
        d
    }
    fn sleep(&self, d: Duration) {
        mark(op_sites().sleep);
        self.native.sleep(d);
        restart();
    }
    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId {
        mark(op_sites().spawn);
        // The new thread's first segment starts when it starts, as a task's does.
        let f: Box<dyn FnOnce() + Send> = Box::new(move || {
            begin();
            f()
        });
        let t = excluded(|| self.native.spawn(name, f));
        restart();
        t
    }
    fn join(&self, task: TaskId) -> std::thread::Result<()> {
        mark(op_sites().join);
        let r = self.native.join(task);
        restart();
        r
    }
    fn task_local(
        &self,
        key: usize,
        init: &mut dyn FnMut() -> Box<dyn std::any::Any>,
    ) -> *const dyn std::any::Any {
        excluded(|| self.native.task_local(key, init))
    }
    fn compute(&self, _d: Duration, site: Site) {
        // Modelled work (a client's think time): a boundary, no host time.
        mark(site);
        restart();
    }
    fn region_enter(&self, _name: &'static str, site: Site) -> bool {
        // A PostgreSQL cost region's ends are segment boundaries, as in a simulation.
        mark(site);
        restart();
        true
    }
    fn region_exit(&self, _name: &'static str, _items: u64, site: Site) {
        mark(site);
        restart();
    }
    fn region_charge(&self, _name: &'static str, site: Site) {
        mark(site);
        restart();
    }
}

/// Runs `phase` natively with a [`SegmentTimer`] installed and returns the table of its
/// segments' mean host ns, less the measurement's own cost ([`timer_overhead_ns`]).
pub fn time_phase(phase: &mut dyn FnMut()) -> SegmentTable {
    let overhead = timer_overhead_ns();
    collect(phase, overhead)
}

fn collect(phase: &mut dyn FnMut(), overhead_ns: f64) -> SegmentTable {
    *COLLECTED.lock().unwrap_or_else(|e| e.into_inner()) = None;
    {
        let _guard = hook::install(hook::Simulation::new(Box::new(Arc::new(SegmentTimer::new()))));
        SEGMENTS.with(|c| *c.borrow_mut() = ThreadSegments::default());
        begin();
        phase();
        SEGMENTS.with(|c| c.borrow_mut().flush());
    }
    let (map, sites) = COLLECTED.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
    let name = |p: usize| -> String {
        match (p, sites.get(&p)) {
            (0, _) => "<start>".to_string(),
            (_, Some(l)) => format!("{}:{}:{}", l.file(), l.line(), l.column()),
            (_, None) => "<unknown>".to_string(),
        }
    };
    // One source location can have several `Location` statics (one per inlined or
    // monomorphized copy), so segments are summed by name.
    let mut by_name: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for ((from, to), (t, n)) in map {
        let e = by_name.entry(format!("{} -> {}", name(from), name(to))).or_insert((0, 0));
        e.0 += t;
        e.1 += n;
    }
    let k = ns_per_tick();
    let mut table = SegmentTable::default();
    for (key, (t, n)) in by_name {
        let mean = (t as f64 * k / n as f64 - overhead_ns).max(0.0);
        table.segments.insert(key, SegmentCost { ns: mean, samples: n });
    }
    table
}

/// What timing adds to an empty segment: the median, over 9 passes, of the mean segment
/// between two back-to-back facade loads of one word (4,096 per pass). Measured once per
/// process.
pub fn timer_overhead_ns() -> f64 {
    static OVERHEAD: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *OVERHEAD.get_or_init(|| {
        let mut means: Vec<f64> = (0..9)
            .filter_map(|_| {
                let table = collect(
                    &mut || {
                        let word = lockstack_common::sync::atomic::AtomicU64::new(0);
                        for _ in 0..4096 {
                            std::hint::black_box(
                                word.load(lockstack_common::sync::atomic::Ordering::Relaxed),
                            );
                        }
                    },
                    0.0,
                );
                table.segments.values().max_by_key(|c| c.samples).map(|c| c.ns)
            })
            .collect();
        means.sort_by(f64::total_cmp);
        means.get(means.len() / 2).copied().unwrap_or(0.0)
    })
}
