//! What a simulated task is doing, as its report groups it: wait classes ([`wait_class`],
//! [`HarnessWait`]), PostgreSQL-cost regions ([`pg_region`], [`pg_charge`]) and measured
//! phases ([`measured_phase`]). Takes the phase gate (a host reader-writer lock) only.

// Under loom the facade does not dispatch to a backend, so most of this module is unused there.
#![cfg_attr(loom, allow(dead_code))]

use std::panic::Location;
use std::sync::atomic::Ordering;

use super::seam::{ENABLED, EVER_INSTALLED, installed_here, with_current, with_current_slow};

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
    run(&mut || {
        out = Some((f.take().expect("f is taken once: a phase runner runs the phase exactly once"))())
    });
    out.expect("a phase runner runs the phase exactly once before it returns")
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
