//! The operations of the running task: what the sync facade's simulation backend calls.
//!
//! Every function here acts on the task that is running on this host thread inside
//! [`crate::Simulation::run`]. An operation first charges the local work since the task's
//! previous operation (the segment between the two call sites), then waits until no other
//! task's event comes earlier in virtual time, then applies its cost (a line transfer, a
//! futex sleep, ...). The caller performs the real memory operation after the call returns,
//! so operations take effect in the order of their start times, and accesses to one line in
//! the order the coherence model serializes them.
//!
//! Code between two operations runs on the host with nothing else interleaved: a host lock
//! (a `std::sync::Mutex`) held across an operation blocks the one host thread when another
//! task asks for it. Shared state goes through the facade, or is released before the next
//! operation.
//!
//! Called outside a simulation they panic (the facade only routes here while one runs). While
//! a simulation is being torn down (its main task returned, or it deadlocked), they return at
//! once without effect, so that abandoned tasks can unwind.

use std::any::Any;
use std::panic::Location;
use std::time::Duration;

pub use crate::machine::Access;
use crate::machine::LINE_SHIFT;
pub use crate::state::TaskId;
pub(crate) use crate::state::exec;
use crate::state::{After, CURRENT, Exec, NONE, SITE_EXIT, State, duration_ps, ps_of};

/// True while a simulated task runs on this host thread (the facade's check for "use the
/// simulation backend").
pub fn is_simulated() -> bool {
    let p = CURRENT.with(|c| c.get());
    // SAFETY: as in `exec`: a non-null pointer is the live executor of this thread's run.
    !p.is_null() && unsafe { (*p).borrow().in_task }
}

/// Suspends the running task's coroutine until the scheduler resumes it.
fn suspend(ex: std::cell::RefMut<'_, Exec>) {
    let y = ex.tasks[ex.current as usize].yielder;
    drop(ex);
    // SAFETY: `y` is the `Yielder` of the coroutine of the current task, stored by its
    // `task_body` from the reference corosensei passes it; that reference lives as long as the
    // coroutine's body runs. Operations run only inside the current task's coroutine (the
    // scheduler sets `current` before it resumes one), so we are on that coroutine's stack and
    // its body is running. No `RefCell` borrow is held across the switch.
    unsafe { (*y).suspend(()) };
}

/// The driver of every operation: charge the segment ending at `site`, wait for the task's
/// turn, apply `f` (again each time it answers [`After::Retry`]), then preempt if the slice is
/// used. Returns `None` in teardown (the operation did nothing).
fn op(site: &'static Location<'static>, mut f: impl FnMut(&mut Exec, u32) -> After) -> Option<()> {
    let end_ticks = crate::hostclock::ticks();
    let cell = exec();
    let mut ex = cell.borrow_mut();
    if ex.teardown {
        return None;
    }
    assert!(ex.in_task, "lockstack_sim::task: an operation outside a simulated task");
    let id = ex.current;
    let s = ex.site(site);
    ex.enter(id, s, end_ticks);
    if ex.must_yield(id) {
        ex.push_resume(id);
        suspend(ex);
        ex = cell.borrow_mut();
        if ex.teardown {
            return None;
        }
    }
    // The caller performs the real memory operation as soon as this returns, in the order
    // operations are applied: an access that must wait for its line (a miss queued behind
    // others, or behind a transfer in flight) is applied when it is served, so each sees the
    // effects of those applied before it, as the coherence order says. The task does not wait
    // for its completion time here: its clock is ahead, and its next operation waits for its
    // turn before it touches shared memory again.
    loop {
        let suspended = match f(&mut ex, id) {
            After::Block => true,
            After::Continue => ex.maybe_preempt(id),
            After::Retry => {
                suspend(ex);
                ex = cell.borrow_mut();
                if ex.teardown {
                    return None;
                }
                continue;
            }
        };
        if suspended {
            suspend(ex);
            ex = cell.borrow_mut();
        }
        break;
    }
    if ex.measured_mode() {
        ex.tasks[id as usize].seg_start = Some(crate::hostclock::ticks());
    }
    Some(())
}

impl Exec {
    fn measured_mode(&self) -> bool {
        self.tasks[self.current as usize].seg_start.is_some()
    }
}

/// Charges and orders an atomic operation of `size` bytes at `addr` (the real atomic is
/// performed by the caller when this returns). `site` is the facade caller's location.
/// Costs: a hit, or the line's transfer from its owner/sharers/memory queued behind the
/// line's previous transfer; [`Access::Rmw`] adds the profile's `atomic_rmw_ns`.
pub fn atomic(addr: usize, size: usize, access: Access, site: &'static Location<'static>) {
    op(site, |ex, id| ex.access_range(id, addr, size, access));
}

/// Charges a full fence (`costs.fence_ns`).
pub fn fence(site: &'static Location<'static>) {
    op(site, |ex, id| {
        let c = ex.m.fence;
        ex.charge(id, c);
        After::Continue
    });
}

/// Charges plain shared data read or written under a lock: every 64-byte line of
/// `[addr, addr + len)` moves to this core as [`atomic`] would move it (misses overlap).
pub fn touch(addr: usize, len: usize, access: Access, site: &'static Location<'static>) {
    op(site, |ex, id| ex.access_range(id, addr, len, access));
}

/// Charges one spin-wait hint (`costs.pause_ns`), booked as spinning under the task's wait
/// class (or `unclassified`).
pub fn spin_hint(site: &'static Location<'static>) {
    op(site, |ex, id| {
        let c = ex.m.pause;
        ex.charge_spin(id, c);
        After::Continue
    });
}

/// Charges `d` of local computation on the task's core (a modelled cost that is not host
/// code: a client's think time, a statement's CPU), not scaled by the speed factor.
pub fn compute(d: Duration, site: &'static Location<'static>) {
    op(site, |ex, id| {
        ex.charge_modelled(id, ps_of(d));
        After::Continue
    });
}

/// Enters the PostgreSQL cost region `name` (see `hook::pg_region`): ends the segment before
/// it (charged as usual), and when the run charges PostgreSQL's costs and has a figure for
/// `name`, the code inside is not charged and [`region_exit`] charges PostgreSQL's count.
/// Both ends are segment boundaries in every mode (as in the native timing pass), so that the
/// segment table's keys do not depend on the cost mode.
pub fn region_enter(name: &'static str, site: &'static Location<'static>) {
    op(site, |ex, id| {
        ex.region_enter(id, name);
        After::Continue
    });
}

/// Charges PostgreSQL's count for region `name` now, replacing nothing (see
/// `hook::pg_charge`); a segment boundary in every mode.
pub fn region_charge(name: &'static str, site: &'static Location<'static>) {
    op(site, |ex, id| {
        ex.region_charge(id, name);
        After::Continue
    });
}

/// Charges PostgreSQL's counts at `ipc` instructions per cycle from now on (instead of the
/// profile's `postgres_ipc`), for every task. No operation: no time passes.
pub fn set_postgres_ipc(ipc: f64) {
    let mut ex = exec().borrow_mut();
    if ipc.is_finite() && ipc > 0.0 {
        ex.pg_rate_scale = ex.profile_ipc / ipc;
    }
}

/// Leaves the region `name` that [`region_enter`] accepted, after `items` items: charges
/// PostgreSQL's count for it on the task's core.
pub fn region_exit(name: &'static str, items: u64, site: &'static Location<'static>) {
    op(site, |ex, id| {
        ex.region_exit(id, name, items);
        After::Continue
    });
}

/// `sched_yield`: costs a system call; when another task waits for a hardware thread, this
/// one gives its thread up and queues behind it.
pub fn yield_now(site: &'static Location<'static>) {
    op(site, |ex, id| {
        let c = ex.m.syscall;
        ex.charge(id, c);
        if ex.ready_is_empty() {
            After::Continue
        } else {
            ex.requeue(id);
            After::Block
        }
    });
}

/// The running task.
pub fn current_task() -> TaskId {
    TaskId(exec().borrow().current)
}

/// Parks the running task until [`unpark`]ed or until `deadline` (virtual time from now)
/// passes, with `std::thread::park`'s token semantics: an unpark that came before is not
/// lost (it is consumed and park returns true at once). Returns true when unparked, false on
/// time-out. A sleeping task frees its hardware thread after `costs.futex_wait_ns`; it runs
/// again `costs.futex_wake_latency_ns` after the unpark or the time-out. The wait is booked
/// under the task's wait class, and a deadlock report names this call's caller.
#[track_caller]
pub fn park(deadline: Option<Duration>) -> bool {
    park_at(deadline, Location::caller())
}

/// [`park`] booked at `site` (a backend whose callers' sites are not its own).
pub fn park_at(deadline: Option<Duration>, site: &'static Location<'static>) -> bool {
    let mut consumed = false;
    let r = op(site, |ex, id| {
        let t = &mut ex.tasks[id as usize];
        if t.token {
            t.token = false;
            consumed = true;
            let c = ex.m.rmw;
            ex.charge(id, c);
            return After::Continue;
        }
        let c = ex.m.futex_wait;
        ex.charge(id, c);
        ex.parks += 1;
        ex.block(id, State::Parked, site);
        if let Some(d) = deadline {
            let at = ex.tasks[id as usize].clock.saturating_add(ps_of(d));
            ex.push_timer(id, at);
        }
        After::Block
    });
    if r.is_none() {
        return false;
    }
    consumed || exec().borrow().tasks[exec().borrow().current as usize].park_result
}

/// Unparks `task`: a parked task wakes (the waker pays `costs.futex_wake_ns`, the wakee runs
/// `futex_wake_latency_ns` later); otherwise its token is set for its next park.
///
/// # Panics
/// When `task` is no task of this simulation.
#[track_caller]
pub fn unpark(task: TaskId) {
    unpark_at(task, Location::caller())
}

/// [`unpark`] booked at `site` (a backend whose callers' sites are not its own).
pub fn unpark_at(task: TaskId, site: &'static Location<'static>) {
    op(site, |ex, id| {
        assert!((task.0 as usize) < ex.tasks.len(), "unpark of {task}, which does not exist");
        match ex.tasks[task.0 as usize].state {
            State::Parked => {
                let c = ex.m.futex_wake;
                ex.charge(id, c);
                ex.wakes += 1;
                let at = ex.tasks[id as usize].clock;
                ex.wake(task.0, at, true);
            }
            State::Finished => {
                let c = ex.m.rmw;
                ex.charge(id, c);
            }
            _ => {
                ex.tasks[task.0 as usize].token = true;
                let c = ex.m.rmw;
                ex.charge(id, c);
            }
        }
        After::Continue
    });
}

/// Virtual time since the simulation started, as the running task sees it (its clock, after
/// the local work so far and `costs.clock_read_ns`).
#[track_caller]
pub fn now() -> Duration {
    now_at(Location::caller())
}

/// [`now`] booked at `site` (a backend whose callers' sites are not its own).
pub fn now_at(site: &'static Location<'static>) -> Duration {
    op(site, |ex, id| {
        let c = ex.m.clock_read;
        ex.charge(id, c);
        After::Continue
    });
    let ex = exec().borrow();
    duration_ps(ex.tasks[ex.current as usize].clock)
}

/// Sleeps `d` of virtual time: frees the hardware thread, runs again `futex_wake_latency_ns`
/// after the timer expires. The time is booked under the task's wait class when one is set
/// (a spinlock's back-off sleep is a wait of `Timeout:SpinDelay`), else as sleeping.
#[track_caller]
pub fn sleep(d: Duration) {
    sleep_at(d, Location::caller())
}

/// [`sleep`] booked at `site` (a backend whose callers' sites are not its own).
pub fn sleep_at(d: Duration, site: &'static Location<'static>) {
    op(site, |ex, id| {
        let c = ex.m.syscall;
        ex.charge(id, c);
        ex.block(id, State::Sleeping, site);
        let at = ex.tasks[id as usize].clock.saturating_add(ps_of(d));
        ex.push_timer(id, at);
        After::Block
    });
}

/// Spawns a task named `name` running `f`; it becomes runnable `futex_wake_latency_ns` after
/// the spawner's clock (which pays `futex_wake_ns`, a `clone` being of that order: assumed).
#[track_caller]
pub fn spawn(name: &str, f: Box<dyn FnOnce() + Send + 'static>) -> TaskId {
    spawn_at(name, f, Location::caller())
}

/// [`spawn`] booked at `site` (a backend whose callers' sites are not its own).
pub fn spawn_at(
    name: &str,
    f: Box<dyn FnOnce() + Send + 'static>,
    site: &'static Location<'static>,
) -> TaskId {
    let mut new = None;
    let mut f = Some(f);
    op(site, |ex, id| {
        let c = ex.m.futex_wake;
        ex.charge(id, c);
        let at = ex.tasks[id as usize].clock + ex.m.wake_latency;
        let body = f.take().expect("spawn's operation is applied once");
        new = Some(ex.new_task(name.to_string(), at, body));
        After::Continue
    });
    TaskId(new.unwrap_or(NONE))
}

/// Waits for `task` to finish; returns its panic payload if it panicked. The joiner frees its
/// hardware thread and runs `futex_wake_latency_ns` after the task ends.
///
/// # Errors
/// The task's panic payload; a string payload when `task` is the running task, does not
/// exist, was joined before, or the simulation is being torn down.
#[track_caller]
pub fn join(task: TaskId) -> Result<(), Box<dyn Any + Send + 'static>> {
    join_at(task, Location::caller())
}

/// [`join`] booked at `site` (a backend whose callers' sites are not its own).
pub fn join_at(task: TaskId, site: &'static Location<'static>) -> Result<(), Box<dyn Any + Send + 'static>> {
    let mut early: Option<&'static str> = None;
    let r = op(site, |ex, id| {
        let Some(t) = ex.tasks.get(task.0 as usize) else {
            early = Some("join of a task that does not exist");
            return After::Continue;
        };
        if task.0 == id {
            early = Some("a task cannot join itself");
            return After::Continue;
        }
        if t.joined {
            early = Some("the task was joined before");
            return After::Continue;
        }
        if t.state == State::Finished {
            return After::Continue;
        }
        ex.tasks[task.0 as usize].joiners.push(id);
        ex.block(id, State::Joining(task.0), site);
        After::Block
    });
    if r.is_none() {
        return Err(Box::new("the simulation is being torn down"));
    }
    if let Some(msg) = early {
        return Err(Box::new(msg));
    }
    let mut ex = exec().borrow_mut();
    let t = &mut ex.tasks[task.0 as usize];
    t.joined = true;
    t.outcome.take().unwrap_or(Ok(()))
}

/// The task's exit operation (the end of the task body in [`crate::exec`]).
pub(crate) fn exit(outcome: Result<(), Box<dyn Any + Send + 'static>>) {
    let mut outcome = Some(outcome);
    let end_ticks = crate::hostclock::ticks();
    let cell = exec();
    let mut ex = cell.borrow_mut();
    if ex.teardown {
        return;
    }
    let id = ex.current;
    ex.enter(id, SITE_EXIT, end_ticks);
    if ex.must_yield(id) {
        ex.push_resume(id);
        suspend(ex);
        ex = cell.borrow_mut();
        if ex.teardown {
            return;
        }
    }
    ex.finish(id, outcome.take().expect("outcome was set at the top of exit and is taken only here"));
}

/// Runs `f` with the running task's local value for `key` (the facade's `thread_local!`
/// under simulation: one value per task, created by `init` on first use, dropped when the
/// task ends, inside the task).
///
/// # Panics
/// When `key` was used by this task with another type.
pub fn with_local<T: 'static, R>(key: usize, init: impl FnOnce() -> T, f: impl FnOnce(&T) -> R) -> R {
    let cell = exec();
    let present = {
        let ex = cell.borrow();
        ex.tasks[ex.current as usize].locals.get(key).is_some()
    };
    if !present {
        let v = init();
        let mut ex = cell.borrow_mut();
        let cur = ex.current as usize;
        ex.tasks[cur].locals.insert_if_absent(key, Box::new(v));
    }
    let ptr: *const T = {
        let ex = cell.borrow();
        let b = ex.tasks[ex.current as usize]
            .locals
            .get(key)
            .expect("the value for this key was inserted above if it was absent");
        b.downcast_ref::<T>().expect("a key's value was made by its own init, so it has the key's type")
            as *const T
    };
    // SAFETY: the value is boxed, so it does not move when the list grows; it is removed only
    // after the task's closure returned (`task_body`) or when the run ends, and `f` runs
    // within the task's closure, on this task, before either. Only shared references to it
    // are handed out.
    f(unsafe { &*ptr })
}

/// Names the line holding `addr` in the statistics (`"ProcArrayLock word"`); a later name
/// replaces an earlier one.
pub fn name_line(addr: usize, name: &str) {
    let mut ex = exec().borrow_mut();
    ex.line_names.insert((addr as u64) >> LINE_SHIFT, name.to_string());
}

/// The run's seed mixed with the running task's id (SplitMix64), for workloads that want a
/// per-task deterministic random stream.
pub fn seed() -> u64 {
    let ex = exec().borrow();
    let mut z = ex.seed ^ (u64::from(ex.current).wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Books the running task's spinning and parked time under `class` (an LWLock tranche, a
/// heavyweight lock class) until the guard drops; guards nest.
pub fn wait_class(class: &'static str) -> WaitClassGuard {
    let mut ex = exec().borrow_mut();
    let cur = ex.current as usize;
    let prev = ex.tasks[cur].wait_class.replace(class);
    WaitClassGuard { prev, _not_send: std::marker::PhantomData }
}

/// Restores the previous wait class when dropped (see [`wait_class`]).
#[must_use = "the wait class lasts while the guard lives"]
pub struct WaitClassGuard {
    prev: Option<&'static str>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for WaitClassGuard {
    fn drop(&mut self) {
        let p = CURRENT.with(|c| c.get());
        if p.is_null() {
            return;
        }
        let mut ex = exec().borrow_mut();
        let cur = ex.current as usize;
        if cur < ex.tasks.len() {
            ex.tasks[cur].wait_class = self.prev;
        }
    }
}

/// The running task's virtual clock, without charging a clock read (for a backend that turns
/// an absolute deadline into a relative one).
pub fn clock() -> Duration {
    let ex = exec().borrow();
    duration_ps(ex.tasks[ex.current as usize].clock)
}

/// Sets the class the running task's waits and spins are booked under (`None`: none), and
/// returns the previous one: [`wait_class`] without a guard, for a backend whose callers
/// report the start and end of a wait separately (the facade's wait events).
pub fn set_wait_class(class: Option<&'static str>) -> Option<&'static str> {
    let mut ex = exec().borrow_mut();
    let cur = ex.current as usize;
    std::mem::replace(&mut ex.tasks[cur].wait_class, class)
}
