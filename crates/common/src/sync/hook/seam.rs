//! The seam itself: the [`SimBackend`] trait, the installed [`Simulation`] and the dispatch of
//! every facade operation (atomics, fences, touches, compute, waits, keyed parks) to it. Takes
//! no lock of the lock stack; the per-key wait queues sit behind a host mutex of the simulation.

// Under loom the facade does not dispatch to a backend, so most of this module is unused there.
#![cfg_attr(loom, allow(dead_code))]

use std::any::Any;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Which way an operation touches memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load, or reading plain data.
    Read,
    /// A store, or writing plain data.
    Write,
    /// A read-modify-write (swap, compare-exchange, fetch-op), or a lock word taken.
    Rmw,
}

/// A task (a simulated thread) as its backend numbers it.
pub type TaskId = u64;

/// Where a facade operation was called from (the crate's source line, through
/// `#[track_caller]`; for mutex and condition-variable operations, the facade's own line,
/// because `lock_api` does not forward the caller).
pub type Site = &'static Location<'static>;

/// A backend that runs the facade's operations in its own world (virtual time).
///
/// Every method is called on the host thread that runs the current task, before the
/// operation it reports takes effect; a backend may switch to another task inside any of them
/// (that is how a conservative discrete-event simulation orders shared-memory operations in
/// virtual time). Methods must not call back into the facade's hooked operations.
pub trait SimBackend: Send + Sync {
    /// An atomic access of `size` bytes at `addr`.
    fn atomic(&self, addr: usize, size: usize, access: Access, site: Site);
    /// A memory fence.
    fn fence(&self, site: Site);
    /// A plain (non-atomic) access to `len` bytes of shared data at `addr`, made under a lock
    /// (lock-table entries, CLOG pages, buffer tags, ...). See [`touch`].
    fn touch(&self, addr: usize, len: usize, access: Access, site: Site);
    /// A busy-wait hint inside a spin loop (`pause`).
    fn spin_hint(&self, site: Site);
    /// The task gives its core away.
    fn yield_now(&self, site: Site);
    /// The id of the running task.
    fn current_task(&self) -> TaskId;
    /// Blocks the running task until [`unpark`](Self::unpark) names it or, with a deadline,
    /// until the virtual clock passes it (a deadline is a [`now`](Self::now) value). Returns
    /// `true` when unparked, `false` on time-out. An unpark that arrives before the park is kept
    /// as a token and makes the next park return at once (`std::thread::park` semantics).
    fn park(&self, deadline: Option<Duration>) -> bool;
    /// Wakes `task` (or leaves it a token).
    fn unpark(&self, task: TaskId);
    /// The running task's clock: virtual time since the simulation began.
    fn now(&self) -> Duration;
    /// Puts the running task to sleep for `d` of virtual time.
    fn sleep(&self, d: Duration);
    /// Starts `f` as a new task and returns its id. If the task runs on another host thread,
    /// the facade's wrapper installs the same [`Simulation`] there first.
    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId;
    /// Waits for `task` to finish; `Err` carries its panic payload.
    fn join(&self, task: TaskId) -> std::thread::Result<()>;
    /// The running task's value of the thread-local `key` (a stable address), created with
    /// `init` on first use. The pointer must stay valid until the task ends.
    fn task_local(&self, key: usize, init: &mut dyn FnMut() -> Box<dyn Any>) -> *const dyn Any;
    /// Names the 64-byte line holding `addr` in the backend's statistics ("LockMgrLock 3
    /// word", "buffer 17 state"), as `perf c2c` would name a data address. No cost; the default
    /// ignores it.
    fn name_line(&self, _addr: usize, _name: &str) {}
    /// The running task starts (or, with [`WaitEvent::NONE`](crate::WaitEvent::NONE)'s 0, ends)
    /// waiting on wait event `event` (a [`WaitEvent::to_raw`](crate::WaitEvent::to_raw) value),
    /// as [`WaitEventScope`](crate::backend::WaitEventScope) publishes it: a backend may book
    /// the task's waits under it. No cost; the default ignores it.
    fn wait_event(&self, _event: u32) {}
    /// `d` of modelled local work (not host code) on the running task's core: see [`compute`].
    /// The default does nothing.
    fn compute(&self, _d: Duration, _site: Site) {}
    /// Books the running task's waits and spins from now on under `class` (`None`: no class),
    /// and returns the class it replaces: see [`wait_class`]. No cost; the default books
    /// nothing and returns `None`.
    fn wait_class(&self, _class: Option<&'static str>) -> Option<&'static str> {
        None
    }
    /// The running task enters the PostgreSQL cost region `name` at `site` ([`pg_region`]);
    /// returns whether the backend charges it (then [`region_exit`](Self::region_exit) follows
    /// when the region ends). The default charges nothing and returns `false`.
    fn region_enter(&self, _name: &'static str, _site: Site) -> bool {
        false
    }
    /// The running task leaves the region `name` that [`region_enter`](Self::region_enter)
    /// accepted, having handled `items` items. The default does nothing.
    fn region_exit(&self, _name: &'static str, _items: u64, _site: Site) {}
    /// Sets the instructions per cycle PostgreSQL's counts are charged at ([`set_postgres_ipc`]).
    /// The default does nothing.
    fn set_postgres_ipc(&self, _ipc: f64) {}
    /// Charges region `name`'s count now ([`pg_charge`]). The default does nothing.
    fn region_charge(&self, _name: &'static str, _site: Site) {}
}

/// A shared backend is a backend (so a test can keep a handle to read it while it runs).
impl<B: SimBackend + ?Sized> SimBackend for Arc<B> {
    fn atomic(&self, addr: usize, size: usize, access: Access, site: Site) {
        (**self).atomic(addr, size, access, site)
    }
    fn fence(&self, site: Site) {
        (**self).fence(site)
    }
    fn touch(&self, addr: usize, len: usize, access: Access, site: Site) {
        (**self).touch(addr, len, access, site)
    }
    fn spin_hint(&self, site: Site) {
        (**self).spin_hint(site)
    }
    fn yield_now(&self, site: Site) {
        (**self).yield_now(site)
    }
    fn current_task(&self) -> TaskId {
        (**self).current_task()
    }
    fn park(&self, deadline: Option<Duration>) -> bool {
        (**self).park(deadline)
    }
    fn unpark(&self, task: TaskId) {
        (**self).unpark(task)
    }
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn sleep(&self, d: Duration) {
        (**self).sleep(d)
    }
    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId {
        (**self).spawn(name, f)
    }
    fn join(&self, task: TaskId) -> std::thread::Result<()> {
        (**self).join(task)
    }
    fn task_local(&self, key: usize, init: &mut dyn FnMut() -> Box<dyn Any>) -> *const dyn Any {
        (**self).task_local(key, init)
    }
    fn name_line(&self, addr: usize, name: &str) {
        (**self).name_line(addr, name)
    }
    fn wait_event(&self, event: u32) {
        (**self).wait_event(event)
    }
    fn compute(&self, d: Duration, site: Site) {
        (**self).compute(d, site)
    }
    fn wait_class(&self, class: Option<&'static str>) -> Option<&'static str> {
        (**self).wait_class(class)
    }
    fn region_enter(&self, name: &'static str, site: Site) -> bool {
        (**self).region_enter(name, site)
    }
    fn region_exit(&self, name: &'static str, items: u64, site: Site) {
        (**self).region_exit(name, items, site)
    }
    fn set_postgres_ipc(&self, ipc: f64) {
        (**self).set_postgres_ipc(ipc)
    }
    fn region_charge(&self, name: &'static str, site: Site) {
        (**self).region_charge(name, site)
    }
}

/// An installed backend and the facade's per-key wait queues for its tasks.
pub struct Simulation {
    pub(super) backend: Box<dyn SimBackend>,
    /// The wall-clock time virtual time zero stands for ([`crate::sync::time::system_now`]).
    wall_start: std::time::SystemTime,
    /// Tasks parked on a key, oldest first. A host mutex: a simulation runs on one host thread,
    /// so it is never contended there (a test backend on real threads may contend it). An
    /// ordered map, not a hash map: a hash map's random seed decided when its table grew, and
    /// so where later allocations (a task's LWLock waiter) landed and which of them shared a
    /// simulated cache line, run to run.
    queues: std::sync::Mutex<BTreeMap<usize, VecDeque<TaskId>>>,
}

impl Simulation {
    /// Wraps a backend, ready to [`install`]; virtual time zero stands for the wall-clock
    /// time now (see [`Simulation::new_at`]).
    pub fn new(backend: Box<dyn SimBackend>) -> Arc<Simulation> {
        Simulation::new_at(backend, std::time::SystemTime::now())
    }

    /// Wraps a backend whose virtual time zero stands for the wall-clock time `wall_start`
    /// (a fixed value makes [`crate::sync::time::system_now`] reproducible from run to run).
    pub fn new_at(backend: Box<dyn SimBackend>, wall_start: std::time::SystemTime) -> Arc<Simulation> {
        Arc::new(Simulation { backend, wall_start, queues: std::sync::Mutex::new(BTreeMap::new()) })
    }

    /// The wall-clock time virtual time zero stands for.
    pub fn wall_start(&self) -> std::time::SystemTime {
        self.wall_start
    }

    /// The backend.
    pub fn backend(&self) -> &dyn SimBackend {
        &*self.backend
    }

    fn queues(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, VecDeque<TaskId>>> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Simulation")
    }
}

/// Whether the dispatch is compiled in (the `sim` feature). Without it every check below
/// is a constant `false` and the facade compiles to exactly the std operations.
pub(super) const ENABLED: bool = cfg!(feature = "sim");

/// Set once, when the first simulation is installed, and never cleared.
pub(super) static EVER_INSTALLED: AtomicBool = AtomicBool::new(false);

std::thread_local! {
    /// The simulation installed on this host thread (null if none). Raw: the install guard
    /// keeps the `Arc` alive for as long as the pointer is set.
    static CURRENT: Cell<*const Simulation> = const { Cell::new(std::ptr::null()) };
}

/// Restores the previous installation when dropped. Not `Send`: it belongs to its host thread.
#[derive(Debug)]
pub struct InstallGuard {
    prev: *const Simulation,
    /// Keeps the simulation alive while CURRENT points to it.
    #[cfg_attr(not(feature = "sim"), allow(dead_code))]
    sim: Arc<Simulation>,
}

/// Installs `sim` on the calling host thread until the guard drops; nests (the previous one
/// comes back). Exists only with the `sim` feature, which compiles the dispatch in.
#[cfg(feature = "sim")]
pub fn install(sim: Arc<Simulation>) -> InstallGuard {
    install_inner(sim)
}

/// [`install`], for the facade's own use (a spawned task re-installs its simulation).
pub(crate) fn install_inner(sim: Arc<Simulation>) -> InstallGuard {
    EVER_INSTALLED.store(true, Ordering::SeqCst);
    let prev = CURRENT.with(|c| c.replace(Arc::as_ptr(&sim)));
    InstallGuard { prev, sim }
}

#[cfg(feature = "sim")]
impl InstallGuard {
    /// The installed simulation.
    pub fn simulation(&self) -> &Arc<Simulation> {
        &self.sim
    }
}

impl Drop for InstallGuard {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(self.prev));
    }
}

/// Runs `f` with the simulation installed on this host thread, if any. The fast path is one
/// relaxed load of a global flag.
#[inline(always)]
pub(crate) fn with_current<R>(f: impl FnOnce(&Simulation) -> R) -> Option<R> {
    if !ENABLED || !EVER_INSTALLED.load(Ordering::Relaxed) {
        return None;
    }
    with_current_slow(f)
}

#[cold]
pub(super) fn with_current_slow<R>(f: impl FnOnce(&Simulation) -> R) -> Option<R> {
    let p = CURRENT.try_with(|c| c.get()).unwrap_or(std::ptr::null());
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null CURRENT was set by `install` from an `Arc` that its guard keeps alive
    // until it resets CURRENT on this same thread; the reference does not outlive this call.
    Some(f(unsafe { &*p }))
}

/// The simulation installed on this host thread, as an owning handle (for spawned tasks that
/// may run on other host threads).
pub(crate) fn current_arc() -> Option<Arc<Simulation>> {
    with_current(|s| {
        // SAFETY: `s` points into an `Arc<Simulation>` (see `install`) that is alive now; the
        // count goes up before a second `Arc` is made from the same pointer.
        unsafe {
            Arc::increment_strong_count(s as *const Simulation);
            Arc::from_raw(s as *const Simulation)
        }
    })
}

/// True when this host thread has a simulation installed.
pub(crate) fn installed_here() -> bool {
    with_current(|_| ()).is_some()
}

/// Runs `f` with the hooks of this thread switched off, so that the facade operations inside
/// it run natively (used for the wake-up check of a keyed park, which must not be a switch
/// point while the wait queues are held).
pub(crate) fn suppressed<R>(f: impl FnOnce() -> R) -> R {
    if !ENABLED || !EVER_INSTALLED.load(Ordering::Relaxed) {
        return f();
    }
    struct Restore(*const Simulation);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _r = Restore(CURRENT.with(|c| c.replace(std::ptr::null())));
    f()
}

/// Reports an atomic access; `#[inline(always)]` so the caller's site is the crate's line.
#[inline(always)]
#[track_caller]
pub(crate) fn atomic(addr: usize, size: usize, access: Access) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        atomic_slow(addr, size, access, Location::caller());
    }
}

#[cold]
#[inline(never)]
pub(super) fn atomic_slow(addr: usize, size: usize, access: Access, site: Site) {
    with_current_slow(|s| s.backend.atomic(addr, size, access, site));
}

/// Reports a fence.
#[inline(always)]
#[track_caller]
pub(crate) fn fence(site: Site) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.fence(site));
    }
}

/// Annotates a plain access to `len` bytes of shared data at `addr` that the caller reads or
/// writes under a lock (not an atomic): the simulated machine charges the cache-line
/// transfers. In production and under loom it compiles to one predicted branch.
#[inline(always)]
#[track_caller]
pub fn touch(addr: *const u8, len: usize, access: Access) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        touch_slow(addr as usize, len, access, Location::caller());
    }
}

/// [`touch`] of the bytes of one value (`size_of::<T>()` at `v`): a lock-table entry, a
/// buffer tag, a page header. The heap data the value points to is not included.
#[inline(always)]
#[track_caller]
pub fn touch_val<T>(v: &T, access: Access) {
    touch(v as *const T as *const u8, size_of::<T>(), access);
}

/// [`touch`] of the elements of a slice (`size_of_val(s)` bytes; nothing when it is empty): a
/// wait queue's entries, a page's line pointers, a run of XID array slots.
#[inline(always)]
#[track_caller]
pub fn touch_slice<T>(s: &[T], access: Access) {
    if !s.is_empty() {
        touch(s.as_ptr() as *const u8, size_of_val(s), access);
    }
}

#[cold]
#[inline(never)]
pub(super) fn touch_slow(addr: usize, len: usize, access: Access, site: Site) {
    with_current_slow(|s| s.backend.touch(addr, len, access, site));
}

/// True while a simulation is installed on this host thread (the running code is a simulated
/// task). Constant `false` without the `sim` feature.
#[inline]
pub fn simulated() -> bool {
    installed_here()
}

/// Charges `d` of modelled local work (a pgbench client's own CPU per statement) on the
/// simulated core of the running task; nothing at all outside a simulation (it does not spin).
#[inline]
#[track_caller]
pub fn compute(d: Duration) {
    let site = Location::caller();
    with_current(|s| s.backend.compute(d, site));
}

/// Reports that the running task starts waiting on the raw wait event `event` (0: it stops),
/// for [`SimBackend::wait_event`]. One predicted branch in production.
#[inline(always)]
pub(crate) fn wait_event(event: u32) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.wait_event(event));
    }
}

/// Parks the running task on `key` while `still_waiting()` holds (checked with the key's queue
/// held and the hooks off, as `parking_lot_core` checks under its bucket lock), until
/// `deadline` (a virtual [`SimBackend::now`] value). Returns `false` on time-out.
pub(crate) fn park_keyed(
    sim: &Simulation,
    key: usize,
    still_waiting: &dyn Fn() -> bool,
    deadline: Option<Duration>,
) -> bool {
    let me = sim.backend.current_task();
    loop {
        {
            let mut q = sim.queues();
            if !suppressed(still_waiting) {
                return true;
            }
            q.entry(key).or_default().push_back(me);
        }
        let woken = sim.backend.park(deadline);
        let mut q = sim.queues();
        if let Some(v) = q.get_mut(&key) {
            v.retain(|t| *t != me);
            if v.is_empty() {
                q.remove(&key);
            }
        }
        drop(q);
        if !woken && suppressed(still_waiting) {
            return false;
        }
    }
}

/// Wakes the oldest task parked on `key` (`all`: every one). Returns how many were woken.
pub(crate) fn unpark_keyed(sim: &Simulation, key: usize, all: bool) -> usize {
    let tasks: Vec<TaskId> = {
        let mut q = sim.queues();
        match q.get_mut(&key) {
            None => Vec::new(),
            Some(v) => {
                let out: Vec<TaskId> =
                    if all { v.drain(..).collect() } else { v.pop_front().into_iter().collect() };
                if v.is_empty() {
                    q.remove(&key);
                }
                out
            }
        }
    };
    for &t in &tasks {
        sim.backend.unpark(t);
    }
    tasks.len()
}
