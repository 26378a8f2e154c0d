//! The executor's run loop: tasks as stackful coroutines on one host thread, resumed in
//! virtual-time order (a conservative discrete-event simulation), on the hardware threads of a
//! [`Machine`](crate::machine::Machine). The scheduler is in [`crate::sched`], the line
//! hand-off in [`crate::coherence`], the accounting in [`crate::account`], the shared state in
//! [`crate::state`]. No lock: one host thread, the state in a `RefCell`.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::fmt;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::machine::PS_PER_NS;
use crate::profile::MachineProfile;
use crate::segments::SegmentTable;
use crate::state::{CURRENT, ClockMode, EV_TIMER, Exec, Payload, SimConfig, State};
use crate::stats::{HostStats, SimReport};

// The facade backend names the task id through this module.
pub(crate) use crate::state::TaskId;

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

impl Exec {
    /// The error of a run that ran out of events: every unfinished task and what it waits on.
    pub(crate) fn deadlock(&self) -> SimError {
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
        let exec = crate::state::exec();
        let mut ex = exec.borrow_mut();
        let t = &mut ex.tasks[id as usize];
        t.yielder = y;
        if ex.measured.is_some() {
            ex.tasks[id as usize].seg_start = Some(crate::hostclock::ticks());
        }
    }
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(f));
    let locals = std::mem::take(&mut crate::state::exec().borrow_mut().tasks[id as usize].locals);
    // A panicking destructor of a task-local is dropped like std drops a panicking TLS value
    // would not be: it is caught so that the task still ends.
    let _ = std::panic::catch_unwind(AssertUnwindSafe(move || drop(locals)));
    crate::task::exit(outcome);
}
