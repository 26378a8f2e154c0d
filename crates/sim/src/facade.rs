//! The sync facade's simulation backend: [`FacadeBackend`] implements
//! `lockstack_common::sync::hook::SimBackend` on top of [`crate::task`], so that the lock
//! stack's own code (every atomic, park, clock read, spawn of `lockstack_common::sync`) runs on
//! the simulated machine. Behind the crate feature `sim`, which turns on
//! `lockstack-common/sim` (the production binary is built without it: see docs/sim.md).
//!
//! [`run`] is the entry point: it installs the backend on the host thread for the length of a
//! [`Simulation::run`], so the closure and every task it spawns through the facade are
//! simulated tasks. [`run_phase`] does the same for a workload's measured phase, handed over by
//! `lockstack_common::sync::hook::measured_phase`.
//!
//! Wait classes: `lockstack_common::backend::WaitEventScope` (opened by the LWLock, lock
//! manager, buffer and WAL wait paths) reports each wait event to the backend, which books the
//! task's parked and spinning time under it ([`class_name`]): an LWLock's tranche name
//! (`LockManager`, `BufferMapping`), else `Type:event` (`Lock:transactionid`, `IO:WALSync`).
//! Waits that publish no wait event name their class through `hook::wait_class` (a spinlock's
//! `Timeout:SpinDelay`, the harness's `Harness:start`), which sets the task's class directly.

use std::any::Any;
use std::collections::HashMap;
use std::time::Duration;

use lockstack_common::WaitEvent;
use lockstack_common::sync::hook::{self, Access as HookAccess, Site, TaskId as HookTaskId};
use lockstack_common::wait_event::WaitEventType;

use crate::exec::{SimError, Simulation, TaskId};
use crate::machine::Access;
use crate::stats::SimReport;
use crate::task;

/// The facade's simulation backend: every method forwards to the running task's operation in
/// [`crate::task`]. Stateless; task ids are the executor's (`TaskId.0`).
#[derive(Debug, Default, Clone, Copy)]
pub struct FacadeBackend;

fn access(a: HookAccess) -> Access {
    match a {
        HookAccess::Read => Access::Read,
        HookAccess::Write => Access::Write,
        HookAccess::Rmw => Access::Rmw,
    }
}

/// The wait class a raw wait event is booked under: the tranche name for `LWLock:*` events
/// (`LockManager`), `Type:event` for the others (`Lock:transactionid`, `IO:WALSync`); `None`
/// for "not waiting". Interned: the set of events is small and fixed, so each name is leaked
/// once.
pub fn class_name(raw: u32) -> Option<&'static str> {
    static NAMES: std::sync::Mutex<Option<HashMap<u32, &'static str>>> = std::sync::Mutex::new(None);
    let ev = WaitEvent::from_raw(raw);
    let ty = ev.event_type()?;
    if ty == WaitEventType::LwLock {
        return Some(ev.name());
    }
    // A host lock with no facade operation inside (see `task`'s module docs).
    let mut names = NAMES.lock().unwrap_or_else(|e| e.into_inner());
    let map = names.get_or_insert_with(HashMap::new);
    Some(map.entry(raw).or_insert_with(|| Box::leak(format!("{}:{}", ty.name(), ev.name()).into_boxed_str())))
}

impl hook::SimBackend for FacadeBackend {
    fn atomic(&self, addr: usize, size: usize, a: HookAccess, site: Site) {
        task::atomic(addr, size, access(a), site);
    }

    fn fence(&self, site: Site) {
        task::fence(site);
    }

    fn touch(&self, addr: usize, len: usize, a: HookAccess, site: Site) {
        task::touch(addr, len, access(a), site);
    }

    fn spin_hint(&self, site: Site) {
        task::spin_hint(site);
    }

    fn yield_now(&self, site: Site) {
        task::yield_now(site);
    }

    fn current_task(&self) -> HookTaskId {
        u64::from(task::current_task().0)
    }

    fn park(&self, deadline: Option<Duration>) -> bool {
        // The facade's deadline is a `now()` value; the task's is relative to its clock.
        task::park_at(deadline.map(|d| d.saturating_sub(task::clock())), op_sites().park)
    }

    fn unpark(&self, t: HookTaskId) {
        task::unpark_at(TaskId(t as u32), op_sites().unpark);
    }

    fn now(&self) -> Duration {
        task::now_at(op_sites().now)
    }

    fn sleep(&self, d: Duration) {
        task::sleep_at(d, op_sites().sleep);
    }

    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> HookTaskId {
        let name = name.unwrap_or_else(|| "thread".to_string());
        u64::from(task::spawn_at(&name, f, op_sites().spawn).0)
    }

    fn join(&self, t: HookTaskId) -> std::thread::Result<()> {
        task::join_at(TaskId(t as u32), op_sites().join)
    }

    fn task_local(&self, key: usize, init: &mut dyn FnMut() -> Box<dyn Any>) -> *const dyn Any {
        // The value is the boxed `dyn Any` itself; the box's contents do not move while the
        // task lives (`task::with_local` keeps it in a map of boxes until the task ends).
        task::with_local::<Box<dyn Any>, _>(key, init, |b| &**b as *const dyn Any)
    }

    fn name_line(&self, addr: usize, name: &str) {
        task::name_line(addr, name);
    }

    fn wait_event(&self, event: u32) {
        task::set_wait_class(class_name(event));
    }

    fn compute(&self, d: Duration, site: Site) {
        task::compute(d, site);
    }

    fn wait_class(&self, class: Option<&'static str>) -> Option<&'static str> {
        task::set_wait_class(class)
    }

    fn region_enter(&self, name: &'static str, site: Site) -> bool {
        task::region_enter(name, site);
        true
    }

    fn region_exit(&self, name: &'static str, items: u64, site: Site) {
        task::region_exit(name, items, site)
    }

    fn set_postgres_ipc(&self, ipc: f64) {
        task::set_postgres_ipc(ipc);
    }

    fn region_charge(&self, name: &'static str, site: Site) {
        task::region_charge(name, site);
    }
}

/// The call sites the facade's operations that carry no caller's site (park, unpark, clock
/// read, sleep, join, spawn) are booked at: fixed locations in this file, shared by
/// [`FacadeBackend`] and [`SegmentTimer`] so that both name a segment the same way.
pub(crate) struct OpSites {
    pub(crate) park: Site,
    pub(crate) unpark: Site,
    pub(crate) now: Site,
    pub(crate) sleep: Site,
    pub(crate) join: Site,
    pub(crate) spawn: Site,
}

#[track_caller]
fn here() -> Site {
    std::panic::Location::caller()
}

pub(crate) fn op_sites() -> &'static OpSites {
    static SITES: std::sync::OnceLock<OpSites> = std::sync::OnceLock::new();
    // One `here()` per line: a site is a source line.
    SITES.get_or_init(|| {
        let park = here();
        let unpark = here();
        let now = here();
        let sleep = here();
        let join = here();
        let spawn = here();
        OpSites { park, unpark, now, sleep, join, spawn }
    })
}

/// Runs `main` on `sim` with the facade's backend installed on this host thread, so that
/// every facade operation of `main` and of the tasks it spawns is simulated.
///
/// # Errors
/// As [`Simulation::run`]: [`SimError::Deadlock`] when every task waits on the facade (a lock,
/// a park, a join) and no timer is pending, ...
pub fn run<F: FnOnce() + 'static>(sim: &Simulation, main: F) -> Result<SimReport, SimError> {
    let _guard = hook::install(hook::Simulation::new(Box::new(FacadeBackend)));
    let mut report = sim.run(main)?;
    name_from_registry(&mut report);
    Ok(report)
}

/// Names the hot lines the run itself did not name from the facade's process-global registry
/// (`hook::line_name`): the lock stack names its lines when its structures are built, which is
/// before a simulation runs (tables are loaded natively).
fn name_from_registry(report: &mut SimReport) {
    for l in &mut report.stats.hot_lines {
        if l.name.starts_with("line #")
            && let Some(name) = hook::line_name(l.addr as usize)
        {
            l.name = name;
        }
    }
    // Misses by structure: a line the run did not name takes the registry's name.
    for l in &mut report.stats.missed_lines {
        if l.name.starts_with("line #")
            && let Some(name) = hook::line_name(l.addr as usize)
        {
            l.name = name;
        }
    }
    report.stats.group_misses(|_| None);
}

/// [`run`] in measured mode, returning the segment table it filled (the calibration pass of
/// the deterministic mode, [`Simulation::calibrate`]).
///
/// # Errors
/// As [`run`].
pub fn calibrate<F: FnOnce() + 'static>(sim: &Simulation, main: F) -> Result<crate::SegmentTable, SimError> {
    let _guard = hook::install(hook::Simulation::new(Box::new(FacadeBackend)));
    sim.calibrate(main)
}

/// Runs `phase`, which borrows from the caller's stack, as the main task of `sim` (with
/// [`run`]): the body of a `hook::PhaseRunner`.
///
/// # Errors
/// As [`run`].
pub fn run_phase(sim: &Simulation, phase: &mut dyn FnMut()) -> Result<SimReport, SimError> {
    let p: *mut (dyn FnMut() + '_) = phase;
    // SAFETY: `Simulation::run` returns only after its main task has returned or been unwound
    // (teardown force-unwinds every coroutine before `run` returns, also on a deadlock), so the
    // closure is never called, and the pointer never used, after this function returns; the
    // lifetime is erased only to satisfy `run`'s `'static` bound.
    let p: *mut (dyn FnMut() + 'static) = unsafe { std::mem::transmute(p) };
    struct Ptr(*mut (dyn FnMut() + 'static));
    let ptr = Ptr(p);
    run(sim, move || {
        let ptr = ptr;
        // SAFETY: see above; the main task is the only user of the pointer, once.
        unsafe { (*ptr.0)() }
    })
}

/// [`run_phase`] in measured mode ([`calibrate`]).
///
/// # Errors
/// As [`run`].
pub fn calibrate_phase(sim: &Simulation, phase: &mut dyn FnMut()) -> Result<crate::SegmentTable, SimError> {
    let p: *mut (dyn FnMut() + '_) = phase;
    // SAFETY: as in `run_phase`.
    let p: *mut (dyn FnMut() + 'static) = unsafe { std::mem::transmute(p) };
    struct Ptr(*mut (dyn FnMut() + 'static));
    let ptr = Ptr(p);
    calibrate(sim, move || {
        let ptr = ptr;
        // SAFETY: as in `run_phase`.
        unsafe { (*ptr.0)() }
    })
}

/// The host ns that measuring a segment adds to it: the mean measured cost of an empty
/// segment between two facade operations (an atomic load right after another), through the
/// whole path a real operation takes (the facade's hook, this backend, the executor, the two
/// cycle-counter reads). Measured once per process: the median over 9 short measured runs of
/// 4,096 back-to-back loads on `profile`; [`crate::SimConfig::segment_overhead_ns`] subtracts
/// it from every measured segment so that an empty one costs about 0.
pub fn segment_overhead_ns(profile: &crate::MachineProfile) -> f64 {
    static OVERHEAD: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *OVERHEAD.get_or_init(|| {
        let sim = Simulation::new(profile.clone()).with_config(crate::SimConfig {
            clock: crate::ClockMode::Measured,
            ..crate::SimConfig::default()
        });
        let mut means: Vec<f64> = (0..9)
            .filter_map(|_| {
                let table = calibrate(&sim, || {
                    let word = lockstack_common::sync::atomic::AtomicU64::new(0);
                    for _ in 0..4096 {
                        std::hint::black_box(word.load(lockstack_common::sync::atomic::Ordering::Relaxed));
                    }
                })
                .ok()?;
                // The loop's own segment (site -> same site) is the one with the most samples.
                table.segments.values().max_by_key(|c| c.samples).map(|c| c.ns)
            })
            .collect();
        means.sort_by(f64::total_cmp);
        means.get(means.len() / 2).copied().unwrap_or(0.0)
    })
}
