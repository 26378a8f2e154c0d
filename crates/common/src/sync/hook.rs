//! The seam for a third backend: a simulated machine that runs every backend as a task in
//! virtual time (for `--machine`).
//!
//! A [`SimBackend`] is installed on a host thread with [`install`]; from then on every facade
//! operation made on that thread (and on the tasks it spawns through the facade) is reported to
//! it before it runs: atomics and fences with their address, size and call site, plain shared
//! data through [`touch`], spin hints, yields, parks, clock reads, sleeps, spawns and joins,
//! and the facade's thread-locals become per task.
//!
//! Cost: nothing unless the `sim` cargo feature of `lockstack-common` is on (the test
//! builds turn it on through dev-dependencies; a simulating binary turns it on in its own
//! build): without it every check is a constant `false` and the facade compiles to exactly the
//! std operations. With it, each operation loads one process-global `AtomicBool` ("a
//! simulation was ever installed", `Relaxed`) and branches on it, predicted not taken, with the
//! slow path out of line (`#[cold]`); only when the flag is set does it read a const-initialised
//! thread-local pointer to the installed [`Simulation`]. That check measured as a third to half
//! of an uncontended LWLock acquire-release (`lockstack lwlock --impl atomic`, callgrind
//! instructions), hence the feature. Under `--cfg loom` none of this exists: loom is the
//! backend.
//!
//! Blocking with a key ([`crate::sync::park`]), mutexes and condition variables reduce to the
//! backend's task [`park`](SimBackend::park) and [`unpark`](SimBackend::unpark): the facade keeps
//! the per-key wait queues itself, in the [`Simulation`], so a backend only schedules tasks.

// Under loom the facade does not dispatch to a backend, so most of this module is unused there.
#![cfg_attr(loom, allow(dead_code))]

use std::any::Any;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, VecDeque};
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
    backend: Box<dyn SimBackend>,
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
const ENABLED: bool = cfg!(feature = "sim");

/// Set once, when the first simulation is installed, and never cleared.
static EVER_INSTALLED: AtomicBool = AtomicBool::new(false);

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
fn with_current_slow<R>(f: impl FnOnce(&Simulation) -> R) -> Option<R> {
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
fn atomic_slow(addr: usize, size: usize, access: Access, site: Site) {
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
fn touch_slow(addr: usize, len: usize, access: Access, site: Site) {
    with_current_slow(|s| s.backend.touch(addr, len, access, site));
}

/// Bytes per cache line as the registry of [`name_line`] keys them (the simulated machine's
/// line size: an address's line is `addr >> 6`).
pub const LINE_BYTES: usize = 64;

/// At most this many lines carry a name in the registry of [`name_line`]; naming one more line
/// evicts the oldest-named line's name (counted by [`line_names_dropped`]), so that the
/// structures made last (the ones a simulation runs on) keep theirs. Names are for lock words,
/// state words and hot counters (a few per buffer at most), never per tuple or per page entry.
pub const LINE_NAMES_MAX: usize = 1 << 18;

/// The process-global registry of line names: line index (`addr >> 6`) to name, the lines in
/// the order they were first named (for eviction at the bound), and the count of names
/// evicted. A host lock: taken briefly, with no facade operation inside.
#[cfg(feature = "sim")]
struct LineNames {
    names: HashMap<usize, String>,
    order: VecDeque<usize>,
    dropped: u64,
    /// Named ranges ([`name_range`]): first byte, length, namer of an offset.
    ranges: Vec<NamedRange>,
}

/// A range [`name_range`] named: first byte, length, namer of a line's offset.
#[cfg(feature = "sim")]
type NamedRange = (usize, usize, fn(usize) -> String);

#[cfg(feature = "sim")]
fn line_names() -> &'static crate::sync::host::Mutex<LineNames> {
    static NAMES: std::sync::OnceLock<crate::sync::host::Mutex<LineNames>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        crate::sync::host::Mutex::new(LineNames {
            names: HashMap::new(),
            order: VecDeque::new(),
            dropped: 0,
            ranges: Vec::new(),
        })
    })
}

/// Names the 64-byte cache line holding `addr` for a simulation's statistics (its
/// hottest-lines table: `"LockManager 3"`, `"buffer 17 state"`).
///
/// With the `sim` feature the name is recorded in a process-global registry whether or
/// not a simulation is installed (the lock stack's shared structures are made before the
/// simulated clients run), where [`line_name`] finds it, and it is also forwarded to the
/// simulation installed on this thread, if any. A later name for the same line replaces the
/// earlier one; past [`LINE_NAMES_MAX`] lines, the oldest-named line loses its name. Without the
/// feature this compiles to nothing and `name` is never called.
#[inline(always)]
pub fn name_line<F: FnOnce() -> String>(addr: *const u8, name: F) {
    #[cfg(feature = "sim")]
    name_line_slow(addr as usize, name());
    #[cfg(not(feature = "sim"))]
    {
        let _ = (addr, name);
    }
}

#[cfg(feature = "sim")]
#[cold]
#[inline(never)]
fn name_line_slow(addr: usize, name: String) {
    {
        let mut reg = line_names().lock();
        let line = addr / LINE_BYTES;
        if reg.names.insert(line, name.clone()).is_none() {
            reg.order.push_back(line);
            if reg.order.len() > LINE_NAMES_MAX
                && let Some(old) = reg.order.pop_front()
            {
                reg.names.remove(&old);
                reg.dropped += 1;
            }
        }
    }
    if EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.name_line(addr, &name));
    }
}

/// Names the lines a structure's fields sit on: each line holding one or more of `fields`
/// (a field's name and address) is named `"<what> <field> + <field>"`, in the order given,
/// through [`name_line`] (for structures whose fields are neither padded nor an array: the
/// line layout is the compiler's, so the names follow it). Nothing without the `sim`
/// feature.
pub fn name_fields(what: &str, fields: &[(&str, *const u8)]) {
    #[cfg(feature = "sim")]
    {
        let mut lines: Vec<(usize, Vec<&str>)> = Vec::new();
        for &(name, addr) in fields {
            let line = addr as usize / LINE_BYTES;
            match lines.iter_mut().find(|(l, _)| *l == line) {
                Some((_, names)) => {
                    if !names.contains(&name) {
                        names.push(name);
                    }
                }
                None => lines.push((line, vec![name])),
            }
        }
        for (line, names) in lines {
            name_line((line * LINE_BYTES) as *const u8, || format!("{what} {}", names.join(" + ")));
        }
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (what, fields);
    }
}

/// Names the lines of an array's elements as `"<what> <i>"`, or `"<what> <i>-<j>"` for a line
/// that holds elements `i..=j` (twelve-byte `PgXact`s share lines, padded ones do not), through
/// [`name_line`]. Nothing without the `sim` feature.
pub fn name_elements<T>(s: &[T], what: &str) {
    #[cfg(feature = "sim")]
    {
        let addr = |k: usize| s.as_ptr() as usize + k * size_of::<T>();
        let mut i = 0;
        while i < s.len() {
            let line = addr(i) / LINE_BYTES;
            let mut j = i;
            while j + 1 < s.len() && addr(j + 1) / LINE_BYTES == line {
                j += 1;
            }
            name_line(addr(i) as *const u8, || {
                if i == j { format!("{what} {i}") } else { format!("{what} {i}-{j}") }
            });
            i = j + 1;
        }
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (s, what);
    }
}

/// The name [`name_line`] last gave the 64-byte line holding `addr` (any address in the line),
/// or `None` (never named, evicted at the bound, or the `sim` feature is off). For a
/// simulation backend's or a report's hottest-lines table.
pub fn line_name(addr: usize) -> Option<String> {
    #[cfg(feature = "sim")]
    {
        let reg = line_names().lock();
        if let Some(n) = reg.names.get(&(addr / LINE_BYTES)) {
            return Some(n.clone());
        }
        // The most recently named range holding the line's first byte.
        let line = addr / LINE_BYTES * LINE_BYTES;
        reg.ranges.iter().rev().find(|(a, len, _)| line >= *a && line < a + len).map(|(a, _, f)| f(line - a))
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = addr;
        None
    }
}

/// Names every line of `[addr, addr + len)` that [`name_line`] did not name, lazily: `namer`
/// gets the line's offset from `addr` and returns its name (`"buffer 17 page +0"` for a page
/// header). For large arrays of structures nobody names one by one (the buffer pool's pages):
/// one registration, no per-line string. A later range wins where two overlap. Without the
/// `sim` feature it does nothing.
pub fn name_range(addr: *const u8, len: usize, namer: fn(usize) -> String) {
    #[cfg(feature = "sim")]
    line_names().lock().ranges.push((addr as usize, len, namer));
    #[cfg(not(feature = "sim"))]
    {
        let _ = (addr, len, namer);
    }
}

/// How many names [`name_line`] evicted because the registry held [`LINE_NAMES_MAX`] lines
/// (zero without the `sim` feature).
pub fn line_names_dropped() -> u64 {
    #[cfg(feature = "sim")]
    {
        line_names().lock().dropped
    }
    #[cfg(not(feature = "sim"))]
    {
        0
    }
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

/// The prefix of the wait classes of the harness's own waits ([`HarnessWait`]): a simulated
/// machine's report leaves classes with it out of the lock stack's wait shares.
pub const HARNESS_CLASS_PREFIX: &str = "Harness:";

/// The wait class of spinning on a spinlock (`s_lock`'s loop, the buffer header lock):
/// PostgreSQL's wait event for a spinlock's back-off sleep (`WAIT_EVENT_SPIN_DELAY`, 14+).
pub const SPIN_DELAY_CLASS: &str = "Timeout:SpinDelay";

/// The wait class of a backend entering or leaving a shared structure's registry of attached
/// backends (the buffer pool's, the WAL's), at backend start and exit: PostgreSQL's
/// counterpart is `ProcStructLock`, the spinlock `InitProcess` and `ProcKill` take.
pub const BACKEND_REGISTRY_CLASS: &str = "ProcStructLock";

/// A wait of the benchmark harness itself, not of the lock stack: what a thread waits for
/// outside the measured work. Booked under `Harness:<what>` ([`harness_wait`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HarnessWait {
    /// A client or worker waits for the measured phase to start (a start gate).
    Start,
    /// A client waits, done, for the measured phase to end (the end gate).
    End,
    /// A session thread waits for its driver's next command (isolation's sessions between
    /// steps; PostgreSQL's `Client:ClientRead`).
    Idle,
}

impl HarnessWait {
    /// The wait class: `Harness:start`, `Harness:end`, `Harness:idle`.
    pub const fn class(self) -> &'static str {
        match self {
            HarnessWait::Start => "Harness:start",
            HarnessWait::End => "Harness:end",
            HarnessWait::Idle => "Harness:idle",
        }
    }
}

/// While it lives, the running simulated task's parked and spinning time is booked under a
/// class of the caller's choosing ([`wait_class`]); dropping it restores the previous class.
/// Outside a simulation it does nothing.
#[must_use = "the wait class lasts while the scope lives"]
pub struct WaitClassScope {
    /// The class replaced, when one was set (a simulation was running).
    prev: Option<Option<&'static str>>,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for WaitClassScope {
    #[inline]
    fn drop(&mut self) {
        if let Some(prev) = self.prev {
            with_current(|s| s.backend.wait_class(prev));
        }
    }
}

/// Books the running simulated task's waits (parks) and spins under `class` until the scope
/// drops: for waits that publish no wait event of their own (a spinlock's spinning, an
/// LWLock's absorbed wake-up, the harness's gates), so that a simulated machine's report names
/// them rather than leaving them unclassified. Nothing is published to the backend's wait-event
/// slot (the native wait-event profile is unchanged), and nothing at all happens outside a
/// simulation (one predicted branch with the `sim` feature, nothing without it).
#[inline]
pub fn wait_class(class: &'static str) -> WaitClassScope {
    let prev = if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.wait_class(Some(class)))
    } else {
        None
    };
    WaitClassScope { prev, _not_send: std::marker::PhantomData }
}

/// [`wait_class`] for a wait of the harness itself: `Harness:start`, `Harness:end`, ... (see
/// [`HarnessWait`]).
#[inline]
pub fn harness_wait(what: HarnessWait) -> WaitClassScope {
    wait_class(what.class())
}

/// While it lives, the running simulated task is inside the PostgreSQL cost region `name`
/// ([`pg_region`]); dropping it ends the region. Outside a simulation, or when the simulation
/// has no PostgreSQL cost for `name`, it does nothing.
#[must_use = "the region lasts while the scope lives"]
pub struct PgRegionScope {
    /// The region's name, when the simulation charges it (it has a cost for it).
    name: Option<&'static str>,
    /// How many items the region handled ([`PgRegionScope::add_items`]).
    items: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl PgRegionScope {
    /// Counts `n` more items (PGPROC entries scanned, WAL bytes copied) for the region's
    /// per-item cost. Cheap (an add) whether or not a simulation runs.
    #[inline]
    pub fn add_items(&mut self, n: u64) {
        self.items = self.items.saturating_add(n);
    }
}

impl Drop for PgRegionScope {
    #[inline]
    #[track_caller]
    fn drop(&mut self) {
        if let Some(name) = self.name {
            let site = Location::caller();
            with_current(|s| s.backend.region_exit(name, self.items, site));
        }
    }
}

/// Opens the PostgreSQL cost region `name` (`"lmgr.lock_acquire.main"`,
/// `"procarray.get_snapshot_data"`, ...: the names of crates/sim/costs/pg15.toml) for the
/// running simulated task, until the returned scope drops. Under `--costs postgres` the
/// simulated machine charges no time for this crate's own code inside the region and, when it
/// ends, charges PostgreSQL's instructions for it (a fixed count plus a count per item, at the
/// profile's instruction rate), so that the serial work under each lock is PostgreSQL's
/// length rather than this crate's. Regions nest (a statement's region holds the lock
/// manager's); each charges its own count, which excludes its inner regions'. Put a region
/// that stands for work under a lock inside that lock's hold, so that its cost is serial.
/// Nothing happens outside a simulation (one predicted branch with the `sim` feature,
/// nothing without it).
#[inline]
#[track_caller]
pub fn pg_region(name: &'static str) -> PgRegionScope {
    let name = if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        let site = Location::caller();
        with_current_slow(|s| s.backend.region_enter(name, site)).unwrap_or(false).then_some(name)
    } else {
        None
    };
    PgRegionScope { name, items: 0, _not_send: std::marker::PhantomData }
}

/// Charges PostgreSQL's count for region `name` at once, under `--costs postgres`, without
/// replacing any of this code's own time (one operation, not a scope): for short paths whose
/// count must fall before a shared-memory operation rather than after it, as
/// `LWLockAcquire`'s own instructions come before it takes the lock. Nothing happens outside a
/// simulation.
#[inline]
#[track_caller]
pub fn pg_charge(name: &'static str) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        let site = Location::caller();
        with_current_slow(|s| s.backend.region_charge(name, site));
    }
}

/// Sets the instructions per cycle at which the running simulation charges PostgreSQL's counts
/// for the regions of [`pg_region`] (a calibrated `sim.postgres_ipc`; the profile gives the
/// default). It applies to every task of the simulation from the next region on. Nothing
/// happens outside a simulation.
pub fn set_postgres_ipc(ipc: f64) {
    if ENABLED && EVER_INSTALLED.load(Ordering::Relaxed) {
        with_current_slow(|s| s.backend.set_postgres_ipc(ipc));
    }
}

/// Runs a workload's measured phase (a closure) in a simulation: what a simulating binary
/// registers with [`set_phase_runner`]. It must call the closure exactly once, on the calling
/// host thread, and return only after the closure returned (or was unwound).
pub type PhaseRunner = fn(&mut dyn FnMut());

/// The registered phase runner (set once per process, by a simulating binary's `--machine`).
static PHASE_RUNNER: std::sync::OnceLock<PhaseRunner> = std::sync::OnceLock::new();

/// Registers the runner that [`measured_phase`] hands workloads' measured phases to (for
/// `--machine`: the phase runs on the simulated machine while set-up ran natively). Exists
/// only with the `sim` feature.
///
/// # Errors
/// A runner was registered before (the one that is kept).
#[cfg(feature = "sim")]
pub fn set_phase_runner(runner: PhaseRunner) -> Result<(), PhaseRunner> {
    PHASE_RUNNER.set(runner)
}

/// Runs `f`, a workload's measured phase (its clients, workers or sessions, its timer and
/// progress reports): on the simulated machine when a simulating binary registered a runner
/// ([`set_phase_runner`]) and no simulation runs on this thread yet, else directly. Without
/// the `sim` feature it is `f()`.
pub fn measured_phase<R>(f: impl FnOnce() -> R) -> R {
    if !ENABLED || installed_here() {
        return f();
    }
    let Some(run) = PHASE_RUNNER.get() else {
        return f();
    };
    // No native background work (a WAL writer thread) runs while the phase is simulated: it
    // would touch the simulated tasks' shared state from outside the simulation.
    let _phase = PHASE_GATE.write().unwrap_or_else(|e| e.into_inner());
    let mut f = Some(f);
    let mut out = None;
    run(&mut || out = Some((f.take().expect("the phase runs once"))()));
    out.expect("the phase runner ran the phase")
}

/// Held for writing while [`measured_phase`] runs a phase in a simulation, for reading by
/// [`outside_simulated_phases`].
static PHASE_GATE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Runs `f`, a native background thread's unit of work (the WAL writer's flush), when no
/// measured phase is being simulated: it waits for a running one to end, and a phase waits for
/// `f` to return before it starts. Native background threads were started during set-up and
/// are no tasks of the simulation, so their work must not interleave with it; a simulated
/// phase runs such work as a task of its own instead (`Wal::writer_loop`). Without a
/// simulating binary (no phase runner) it is `f()`.
pub fn outside_simulated_phases<R>(f: impl FnOnce() -> R) -> R {
    if !ENABLED || PHASE_RUNNER.get().is_none() {
        return f();
    }
    let _gate = PHASE_GATE.read().unwrap_or_else(|e| e.into_inner());
    f()
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

/// What [`Counting`] counts: one slot per kind of facade operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// An atomic load.
    AtomicRead,
    /// An atomic store.
    AtomicWrite,
    /// An atomic read-modify-write (including lock words).
    AtomicRmw,
    /// A fence.
    Fence,
    /// A [`touch`] of plain shared data.
    Touch,
    /// A spin hint.
    SpinHint,
    /// A yield.
    Yield,
    /// A park.
    Park,
    /// An unpark.
    Unpark,
    /// A clock read.
    Now,
    /// A sleep.
    Sleep,
    /// A spawn.
    Spawn,
    /// A join.
    Join,
    /// A thread-local access.
    TaskLocal,
}

impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 14] = [
        Op::AtomicRead,
        Op::AtomicWrite,
        Op::AtomicRmw,
        Op::Fence,
        Op::Touch,
        Op::SpinHint,
        Op::Yield,
        Op::Park,
        Op::Unpark,
        Op::Now,
        Op::Sleep,
        Op::Spawn,
        Op::Join,
        Op::TaskLocal,
    ];
}

/// One [`touch`] (or atomic access) as [`Counting::with_log`] records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touched {
    /// An atomic access (`false`: a [`touch`] of plain data).
    pub atomic: bool,
    /// First byte's address.
    pub addr: usize,
    /// Bytes.
    pub len: usize,
    /// Read or write.
    pub access: Access,
    /// The caller's source file (as `Location::file` gives it).
    pub file: &'static str,
    /// The caller's source line.
    pub line: u32,
}

/// A task's unpark token for [`Counting`]: set by `unpark`, consumed by `park`.
type Token = (std::sync::Mutex<bool>, std::sync::Condvar);

/// A backend that runs every operation natively on host threads (one per task) and counts the
/// operations by kind and by call site: the proof, in tests, that every facade operation of a
/// piece of code reaches the hook. Its clock is host time since the backend was made.
pub struct Counting {
    counts: [std::sync::atomic::AtomicU64; 14],
    sites: std::sync::Mutex<HashMap<(Op, &'static str, u32), u64>>,
    next_task: std::sync::atomic::AtomicU64,
    tokens: std::sync::Mutex<HashMap<TaskId, Arc<Token>>>,
    handles: std::sync::Mutex<HashMap<TaskId, std::thread::JoinHandle<()>>>,
    start: std::time::Instant,
    /// Every touch, in order, when made with [`Counting::with_log`].
    log: Option<std::sync::Mutex<Vec<Touched>>>,
    /// Every name forwarded through [`SimBackend::name_line`], in order.
    named: std::sync::Mutex<Vec<(usize, String)>>,
}

std::thread_local! {
    /// The [`Counting`] task id of this host thread (0: not assigned yet).
    static COUNTING_TASK: Cell<TaskId> = const { Cell::new(0) };
    /// The [`Counting`] backend's thread-locals of this host thread.
    static COUNTING_LOCALS: std::cell::RefCell<HashMap<usize, Box<dyn Any>>> = std::cell::RefCell::new(HashMap::new());
}

impl Default for Counting {
    fn default() -> Counting {
        Counting::new()
    }
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting").field("counts", &self.counts).finish()
    }
}

impl Counting {
    /// A backend with every count at zero.
    pub fn new() -> Counting {
        Counting {
            counts: Default::default(),
            sites: std::sync::Mutex::new(HashMap::new()),
            next_task: std::sync::atomic::AtomicU64::new(1),
            tokens: std::sync::Mutex::new(HashMap::new()),
            handles: std::sync::Mutex::new(HashMap::new()),
            start: std::time::Instant::now(),
            log: None,
            named: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A backend that also keeps every [`touch`] with its address, length, access and call
    /// site (for tests that check which bytes an operation reports; memory grows with each
    /// touch, so only for short runs).
    pub fn with_log() -> Counting {
        Counting { log: Some(std::sync::Mutex::new(Vec::new())), ..Counting::new() }
    }

    /// The touches (and atomic accesses) recorded so far, oldest first (empty unless made with [`Counting::with_log`]).
    pub fn touches(&self) -> Vec<Touched> {
        match &self.log {
            Some(l) => l.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Vec::new(),
        }
    }

    /// Forgets the recorded touches (the counts stay).
    pub fn clear_touches(&self) {
        if let Some(l) = &self.log {
            l.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Whether one recorded [`touch`] (not an atomic) with `access` covers every byte of
    /// `addr..addr + len`.
    pub fn touched(&self, addr: usize, len: usize, access: Access) -> bool {
        self.touches()
            .iter()
            .any(|t| !t.atomic && t.access == access && t.addr <= addr && addr + len <= t.addr + t.len)
    }

    /// Whether the recorded touches and atomic accesses with `access`, together, cover every
    /// byte of `addr..addr + len` (a record copied in as eight-byte atomic words).
    pub fn covered(&self, addr: usize, len: usize, access: Access) -> bool {
        let mut r: Vec<(usize, usize)> =
            self.touches().iter().filter(|t| t.access == access).map(|t| (t.addr, t.addr + t.len)).collect();
        r.sort_unstable();
        let (mut at, end) = (addr, addr + len);
        for (a, b) in r {
            if a <= at && b > at {
                at = b;
            }
            if at >= end {
                return true;
            }
        }
        at >= end
    }

    /// The names forwarded to this backend through [`SimBackend::name_line`], oldest first.
    pub fn named(&self) -> Vec<(usize, String)> {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many operations of kind `op` ran so far.
    pub fn count(&self, op: Op) -> u64 {
        self.counts[op as usize].load(Ordering::Relaxed)
    }

    /// How many operations of kind `op` were called from `file` (a path suffix), any line.
    pub fn count_in(&self, op: Op, file: &str) -> u64 {
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        sites.iter().filter(|((o, f, _), _)| *o == op && f.ends_with(file)).map(|(_, n)| *n).sum()
    }

    fn bump(&self, op: Op, site: Option<Site>) {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        if let Some(s) = site {
            *self
                .sites
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((op, s.file(), s.line()))
                .or_insert(0) += 1;
        }
    }

    fn task(&self) -> TaskId {
        COUNTING_TASK.with(|t| {
            if t.get() == 0 {
                t.set(self.next_task.fetch_add(1, Ordering::Relaxed));
            }
            t.get()
        })
    }

    fn token(&self, task: TaskId) -> Arc<Token> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).entry(task).or_default().clone()
    }
}

impl SimBackend for Counting {
    fn atomic(&self, addr: usize, size: usize, access: Access, site: Site) {
        let op = match access {
            Access::Read => Op::AtomicRead,
            Access::Write => Op::AtomicWrite,
            Access::Rmw => Op::AtomicRmw,
        };
        self.bump(op, Some(site));
        if let Some(l) = &self.log {
            let t = Touched { atomic: true, addr, len: size, access, file: site.file(), line: site.line() };
            l.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
    }

    fn fence(&self, site: Site) {
        self.bump(Op::Fence, Some(site));
    }

    fn touch(&self, addr: usize, len: usize, access: Access, site: Site) {
        self.bump(Op::Touch, Some(site));
        if let Some(l) = &self.log {
            let t = Touched { atomic: false, addr, len, access, file: site.file(), line: site.line() };
            l.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
    }

    fn name_line(&self, addr: usize, name: &str) {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).push((addr, name.to_string()));
    }

    fn spin_hint(&self, site: Site) {
        self.bump(Op::SpinHint, Some(site));
        std::hint::spin_loop();
    }

    fn yield_now(&self, site: Site) {
        self.bump(Op::Yield, Some(site));
        std::thread::yield_now();
    }

    fn current_task(&self) -> TaskId {
        self.task()
    }

    fn park(&self, deadline: Option<Duration>) -> bool {
        self.bump(Op::Park, None);
        let tok = self.token(self.task());
        let mut set = tok.0.lock().unwrap_or_else(|e| e.into_inner());
        while !*set {
            match deadline {
                None => set = tok.1.wait(set).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_sub(self.start.elapsed());
                    if left.is_zero() {
                        return false;
                    }
                    set = tok.1.wait_timeout(set, left).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
        *set = false;
        true
    }

    fn unpark(&self, task: TaskId) {
        self.bump(Op::Unpark, None);
        let tok = self.token(task);
        *tok.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        tok.1.notify_all();
    }

    fn now(&self) -> Duration {
        self.bump(Op::Now, None);
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) {
        self.bump(Op::Sleep, None);
        std::thread::sleep(d);
    }

    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId {
        self.bump(Op::Spawn, None);
        let id = self.next_task.fetch_add(1, Ordering::Relaxed);
        let mut b = std::thread::Builder::new();
        if let Some(n) = name {
            b = b.name(n);
        }
        let h = b
            .spawn(move || {
                COUNTING_TASK.with(|t| t.set(id));
                f()
            })
            .expect("spawning a counted thread");
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).insert(id, h);
        id
    }

    fn join(&self, task: TaskId) -> std::thread::Result<()> {
        self.bump(Op::Join, None);
        let h = self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&task);
        match h {
            Some(h) => h.join(),
            None => Ok(()),
        }
    }

    fn task_local(&self, key: usize, init: &mut dyn FnMut() -> Box<dyn Any>) -> *const dyn Any {
        self.bump(Op::TaskLocal, None);
        // `init` may itself use thread-locals, so the map is not borrowed while it runs.
        if let Some(p) = COUNTING_LOCALS.with(|m| m.borrow().get(&key).map(|b| &**b as *const dyn Any)) {
            return p;
        }
        let v = init();
        COUNTING_LOCALS.with(|m| &**m.borrow_mut().entry(key).or_insert(v) as *const dyn Any)
    }
}
