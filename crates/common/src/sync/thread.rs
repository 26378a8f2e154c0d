//! Threads: [`spawn`], [`Builder`], [`scope`], [`yield_now`], [`current_id`], [`spin_hint`] and
//! [`sleep`](super::time::sleep). `std::thread` in production, loom's under `--cfg loom` (where
//! [`scope`] does not exist: loom has no scoped threads), and the backend's tasks under a
//! simulation (a spawned task that lands on another host thread gets the same simulation
//! installed there first).

#[cfg(not(loom))]
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
#[cfg(not(loom))]
use std::sync::Arc;

#[cfg(not(loom))]
use std::marker::PhantomData;

#[cfg(not(loom))]
use super::hook::{self, Simulation, TaskId};

/// `std::thread::Result`: a join's outcome.
pub use std::thread::Result;
/// `std::thread::available_parallelism`: a host fact, not a synchronization point.
pub use std::thread::available_parallelism;

/// Busy-wait hint inside spin loops (`pause`; a yield point under loom).
#[inline]
#[track_caller]
pub fn spin_hint() {
    #[cfg(not(loom))]
    {
        if hook::with_current(|s| s.backend().spin_hint(std::panic::Location::caller())).is_none() {
            std::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the CPU away (after spinning did not help).
#[inline]
#[track_caller]
pub fn yield_now() {
    #[cfg(not(loom))]
    {
        if hook::with_current(|s| s.backend().yield_now(std::panic::Location::caller())).is_none() {
            std::thread::yield_now();
        }
    }
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Who is running: a host thread, or a simulated task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ThreadId {
    /// A host (or loom) thread.
    Host(std::thread::ThreadId),
    /// A simulated task, numbered by its backend.
    Task(u64),
    /// A loom thread (`--cfg loom`).
    #[cfg(loom)]
    Loom(loom::thread::ThreadId),
}

/// The calling thread's (or task's) id.
pub fn current_id() -> ThreadId {
    #[cfg(not(loom))]
    {
        if let Some(t) = hook::with_current(|s| s.backend().current_task()) {
            return ThreadId::Task(t);
        }
        ThreadId::Host(std::thread::current().id())
    }
    #[cfg(loom)]
    ThreadId::Loom(loom::thread::current().id())
}

/// Where a spawned thread's result lands.
#[cfg(not(loom))]
type Slot<T> = Arc<std::sync::Mutex<Option<Result<T>>>>;

#[cfg(not(loom))]
fn take_slot<T>(slot: &Slot<T>) -> Result<T> {
    slot.lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
        .unwrap_or_else(|| Err(Box::new("thread result missing")))
}

/// An owned permission to join a thread (`std::thread::JoinHandle`).
#[derive(Debug)]
pub struct JoinHandle<T>(JoinKind<T>);

#[derive(Debug)]
enum JoinKind<T> {
    #[cfg(not(loom))]
    Host(std::thread::JoinHandle<T>),
    #[cfg(loom)]
    Loom(loom::thread::JoinHandle<T>),
    #[cfg(not(loom))]
    Task { sim: Arc<Simulation>, task: TaskId, slot: Slot<T> },
}

impl<T> JoinHandle<T> {
    /// Waits for the thread to finish; `Err` carries its panic payload.
    pub fn join(self) -> Result<T> {
        match self.0 {
            #[cfg(not(loom))]
            JoinKind::Host(h) => h.join(),
            #[cfg(loom)]
            JoinKind::Loom(h) => h.join(),
            #[cfg(not(loom))]
            JoinKind::Task { sim, task, slot } => {
                sim.backend().join(task)?;
                take_slot(&slot)
            }
        }
    }

    /// Whether the thread has finished (its result is ready). Loom cannot tell: `false`.
    pub fn is_finished(&self) -> bool {
        match &self.0 {
            #[cfg(not(loom))]
            JoinKind::Host(h) => h.is_finished(),
            #[cfg(loom)]
            JoinKind::Loom(_) => false,
            #[cfg(not(loom))]
            JoinKind::Task { slot, .. } => slot.lock().unwrap_or_else(|e| e.into_inner()).is_some(),
        }
    }

    /// The thread's id.
    pub fn thread_id(&self) -> ThreadId {
        match &self.0 {
            #[cfg(not(loom))]
            JoinKind::Host(h) => ThreadId::Host(h.thread().id()),
            #[cfg(loom)]
            JoinKind::Loom(h) => ThreadId::Loom(h.thread().id()),
            #[cfg(not(loom))]
            JoinKind::Task { task, .. } => ThreadId::Task(*task),
        }
    }
}

/// Thread factory with a name (`std::thread::Builder`).
#[derive(Debug, Default)]
pub struct Builder {
    name: Option<String>,
}

impl Builder {
    /// A builder with no name.
    pub fn new() -> Builder {
        Builder { name: None }
    }

    /// Names the thread.
    pub fn name(mut self, name: String) -> Builder {
        self.name = Some(name);
        self
    }

    /// Spawns `f`. Errors: the OS could not create the thread.
    pub fn spawn<F, T>(self, f: F) -> std::io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        #[cfg(not(loom))]
        {
            if let Some(sim) = hook::current_arc() {
                let slot: Slot<T> = Arc::new(std::sync::Mutex::new(None));
                let s2 = slot.clone();
                let task = spawn_task(
                    &sim,
                    self.name,
                    Box::new(move || {
                        let r = catch_unwind(AssertUnwindSafe(f));
                        *s2.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
                    }),
                );
                return Ok(JoinHandle(JoinKind::Task { sim, task, slot }));
            }
            let mut b = std::thread::Builder::new();
            if let Some(n) = self.name {
                b = b.name(n);
            }
            b.spawn(f).map(|h| JoinHandle(JoinKind::Host(h)))
        }
        #[cfg(loom)]
        {
            let mut b = loom::thread::Builder::new();
            if let Some(n) = self.name {
                b = b.name(n);
            }
            b.spawn(f).map(|h| JoinHandle(JoinKind::Loom(h)))
        }
    }
}

/// Spawns `f` on a new thread (or task). Panics if the OS cannot create a thread, as
/// `std::thread::spawn` does.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new()
        .spawn(f)
        .expect("the OS spawns the thread (std::thread::spawn panics the same way when it cannot)")
}

/// Starts `f` as a task of `sim`, installing `sim` in it if the backend runs it on another
/// host thread.
#[cfg(not(loom))]
fn spawn_task(sim: &Arc<Simulation>, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId {
    let sim2 = sim.clone();
    sim.backend().spawn(
        name,
        Box::new(move || {
            let _guard = (!hook::installed_here()).then(|| hook::install_inner(sim2));
            f()
        }),
    )
}

/// Shared by a scope and its threads.
#[cfg(not(loom))]
#[derive(Debug)]
struct ScopeData {
    /// Host threads still running.
    running: std::sync::atomic::AtomicUsize,
    /// A thread panicked and nobody joined it to see.
    unjoined_panics: std::sync::atomic::AtomicUsize,
    main: std::thread::Thread,
    /// Simulated tasks not joined yet.
    tasks: std::sync::Mutex<Vec<(TaskId, Arc<std::sync::atomic::AtomicBool>)>>,
}

/// A scope for threads that borrow from the caller's stack (`std::thread::Scope`); every thread
/// is joined before [`scope`] returns.
#[cfg(not(loom))]
#[derive(Debug)]
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    sim: Option<Arc<Simulation>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// A permission to join a scoped thread (`std::thread::ScopedJoinHandle`).
#[cfg(not(loom))]
#[derive(Debug)]
pub struct ScopedJoinHandle<'scope, T> {
    kind: ScopedKind,
    slot: Slot<T>,
    data: Arc<ScopeData>,
    _scope: PhantomData<&'scope ()>,
}

#[cfg(not(loom))]
#[derive(Debug)]
enum ScopedKind {
    Host(std::thread::JoinHandle<()>),
    Task { sim: Arc<Simulation>, task: TaskId, joined: Arc<std::sync::atomic::AtomicBool> },
}

/// Runs `f` with a [`Scope`] whose threads may borrow anything that outlives the call; joins
/// them all before returning, and panics if one of them panicked and was not joined.
#[cfg(not(loom))]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    use std::sync::atomic::Ordering::{Acquire, Relaxed};
    let s = Scope {
        data: Arc::new(ScopeData {
            running: std::sync::atomic::AtomicUsize::new(0),
            unjoined_panics: std::sync::atomic::AtomicUsize::new(0),
            main: std::thread::current(),
            tasks: std::sync::Mutex::new(Vec::new()),
        }),
        sim: hook::current_arc(),
        _scope: PhantomData,
        _env: PhantomData,
    };
    let r = catch_unwind(AssertUnwindSafe(|| f(&s)));
    // Join everything, including threads spawned by threads while we wait.
    loop {
        let next = s.data.tasks.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match next {
            Some((task, joined)) => {
                if !joined.swap(true, Relaxed)
                    && let Some(sim) = &s.sim
                {
                    let _ = sim.backend().join(task);
                }
            }
            None if s.data.running.load(Acquire) == 0 => break,
            None => std::thread::park(),
        }
    }
    match r {
        Err(p) => resume_unwind(p),
        Ok(_) if s.data.unjoined_panics.load(Relaxed) > 0 => panic!("a scoped thread panicked"),
        Ok(v) => v,
    }
}

/// [`scope`] as a workload's measured phase ([`hook::measured_phase`]): on the simulated
/// machine when a simulating binary runs with `--machine`, else exactly [`scope`].
#[cfg(not(loom))]
pub fn measured_scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    hook::measured_phase(|| scope(f))
}

#[cfg(not(loom))]
impl<'scope> Scope<'scope, '_> {
    /// Spawns a thread (or task) that may borrow for `'scope`. Panics if the OS cannot create
    /// a thread.
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.spawn_maybe_named(None, f)
    }

    /// [`Scope::spawn`] with a name: the thread's, or on a simulated machine the task's (its
    /// per-task statistics carry it, so a report can tell a background task such as the WAL
    /// writer from the backends). Panics if the OS cannot create a thread.
    pub fn spawn_named<F, T>(&'scope self, name: &str, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        self.spawn_maybe_named(Some(name.to_string()), f)
    }

    fn spawn_maybe_named<F, T>(&'scope self, name: Option<String>, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        use std::sync::atomic::Ordering::{Relaxed, Release};
        let slot: Slot<T> = Arc::new(std::sync::Mutex::new(None));
        let s2 = slot.clone();
        let data = self.data.clone();
        let body = move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            if r.is_err() {
                data.unjoined_panics.fetch_add(1, Relaxed);
            }
            *s2.lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            data
        };
        if let Some(sim) = &self.sim {
            let joined = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let boxed: Box<dyn FnOnce() + Send + 'scope> = Box::new(move || drop(body()));
            // SAFETY: `scope` joins every task it started (the `tasks` list) before it returns,
            // so nothing the closure borrows for 'scope is gone while it runs.
            let boxed: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(boxed) };
            let task = spawn_task(sim, name, boxed);
            self.data.tasks.lock().unwrap_or_else(|e| e.into_inner()).push((task, joined.clone()));
            return ScopedJoinHandle {
                kind: ScopedKind::Task { sim: sim.clone(), task, joined },
                slot,
                data: self.data.clone(),
                _scope: PhantomData,
            };
        }
        self.data.running.fetch_add(1, Relaxed);
        let wrapped = move || {
            let data = body();
            let main = data.main.clone();
            if data.running.fetch_sub(1, Release) == 1 {
                main.unpark();
            }
        };
        let mut builder = std::thread::Builder::new();
        if let Some(n) = name {
            builder = builder.name(n);
        }
        // SAFETY: `scope` does not return before `running` is back to zero, which this thread
        // decrements as its very last access to anything it borrows, so borrows for 'scope
        // outlive the thread's use of them (the pattern of std's own scoped threads).
        let h = unsafe { builder.spawn_unchecked(wrapped) }.unwrap_or_else(|e| {
            self.data.running.fetch_sub(1, Relaxed);
            panic!("failed to spawn thread: {e}")
        });
        ScopedJoinHandle { kind: ScopedKind::Host(h), slot, data: self.data.clone(), _scope: PhantomData }
    }
}

#[cfg(not(loom))]
impl<T> ScopedJoinHandle<'_, T> {
    /// Whether the thread has finished (its result is ready).
    pub fn is_finished(&self) -> bool {
        self.slot.lock().unwrap_or_else(|e| e.into_inner()).is_some()
    }

    /// Waits for the thread to finish; `Err` carries its panic payload (and the scope then does
    /// not panic for it).
    pub fn join(self) -> Result<T> {
        match self.kind {
            ScopedKind::Host(h) => {
                let _ = h.join();
            }
            ScopedKind::Task { sim, task, joined } => {
                if !joined.swap(true, std::sync::atomic::Ordering::Relaxed) {
                    let _ = sim.backend().join(task);
                }
            }
        }
        let r = take_slot(&self.slot);
        if r.is_err() {
            self.data.unjoined_panics.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        r
    }
}
