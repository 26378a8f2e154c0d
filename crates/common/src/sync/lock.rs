//! Mutex, reader-writer lock, condition variable and a one-shot latch.
//!
//! [`Mutex`] and [`RwLock`] are `lock_api` types over this module's raw locks, so their API is
//! `parking_lot`'s (`lock()` returns the guard). In production the raw locks are
//! `parking_lot`'s own, plus one predicted branch on the simulation flag; under a simulation a
//! contended lock parks its task on the lock's address (through [`super::park`]). Under
//! `--cfg loom` the module `lock_loom` gives the same names over loom's own types.
//!
//! [`Condvar`] is the futex-style condition variable (a sequence word that `notify_*` bumps and
//! a keyed park on it), so that it works with this module's guards under every backend.

use lock_api::RawMutex as _;

use super::time::WaitTimeoutResult;

use super::atomic::{AtomicU32, Ordering};
use super::time::{Duration, Instant};

use super::hook::{self, Access};

/// A mutual-exclusion lock with `parking_lot`'s API.
pub type Mutex<T> = lock_api::Mutex<RawMutex, T>;
/// The guard of a [`Mutex`].
pub type MutexGuard<'a, T> = lock_api::MutexGuard<'a, RawMutex, T>;
/// A reader-writer lock with `parking_lot`'s API.
pub type RwLock<T> = lock_api::RwLock<RawRwLock, T>;
/// A shared guard of a [`RwLock`].
pub type RwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, RawRwLock, T>;
/// An exclusive guard of a [`RwLock`].
pub type RwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, RawRwLock, T>;

/// The raw mutex behind [`Mutex`]: `parking_lot::RawMutex`, plus the simulation path.
pub struct RawMutex {
    inner: parking_lot::RawMutex,
}

type PlGuard = <parking_lot::RawMutex as lock_api::RawMutex>::Guard;

// SAFETY: every path acquires `inner` (parking_lot's mutex, which provides mutual exclusion
// with acquire/release semantics) before returning its guard, and `unlock` releases it with
// the guard it was given; the simulated path only adds parking on the address while locked.
unsafe impl lock_api::RawMutex for RawMutex {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawMutex = RawMutex { inner: <parking_lot::RawMutex as lock_api::RawMutex>::INIT };
    type Guard = PlGuard;

    #[inline]
    fn lock(&self) -> PlGuard {
        if let Some(g) = hook::with_current(|s| self.lock_simulated(s)) {
            return g;
        }
        self.inner.lock()
    }

    #[inline]
    fn try_lock(&self) -> Option<PlGuard> {
        hook::atomic(self as *const Self as usize, 1, Access::Rmw);
        self.inner.try_lock()
    }

    #[inline]
    unsafe fn unlock(&self, guard: PlGuard) {
        hook::atomic(self as *const Self as usize, 1, Access::Rmw);
        // SAFETY: the caller passes the guard of this mutex's current acquisition.
        unsafe { self.inner.unlock(guard) };
        if hook::with_current(|_| ()).is_some() {
            super::park::unpark_one(self as *const Self as usize);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }
}

impl RawMutex {
    #[cold]
    fn lock_simulated(&self, s: &hook::Simulation) -> PlGuard {
        let key = self as *const Self as usize;
        loop {
            s.backend().atomic(key, 1, Access::Rmw, std::panic::Location::caller());
            if let Some(g) = self.inner.try_lock() {
                return g;
            }
            hook::park_keyed(s, key, &|| self.inner.is_locked(), None);
        }
    }
}

/// The raw lock behind [`RwLock`]: `parking_lot::RawRwLock`, plus the simulation path.
pub struct RawRwLock {
    inner: parking_lot::RawRwLock,
}

type PlShared = <parking_lot::RawRwLock as lock_api::RawRwLock>::SharedGuard;
type PlExclusive = <parking_lot::RawRwLock as lock_api::RawRwLock>::ExclusiveGuard;

// SAFETY: every acquisition goes through `inner` (parking_lot's reader-writer lock) and every
// release hands `inner` the guard of that acquisition.
unsafe impl lock_api::RawRwLock for RawRwLock {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: RawRwLock = RawRwLock { inner: <parking_lot::RawRwLock as lock_api::RawRwLock>::INIT };
    type SharedGuard = PlShared;
    type ExclusiveGuard = PlExclusive;

    #[inline]
    fn lock_shared(&self) -> PlShared {
        if let Some(g) = hook::with_current(|s| {
            self.wait_simulated(s, || self.inner.try_lock_shared(), || self.inner.is_locked_exclusive())
        }) {
            return g;
        }
        self.inner.lock_shared()
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<PlShared> {
        hook::atomic(self as *const Self as usize, 4, Access::Rmw);
        self.inner.try_lock_shared()
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: PlShared) {
        hook::atomic(self as *const Self as usize, 4, Access::Rmw);
        // SAFETY: the caller passes the guard of one of this lock's shared acquisitions.
        unsafe { self.inner.unlock_shared(guard) };
        self.wake_simulated();
    }

    #[inline]
    fn lock_exclusive(&self) -> PlExclusive {
        if let Some(g) = hook::with_current(|s| {
            self.wait_simulated(s, || self.inner.try_lock_exclusive(), || self.inner.is_locked())
        }) {
            return g;
        }
        self.inner.lock_exclusive()
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<PlExclusive> {
        hook::atomic(self as *const Self as usize, 4, Access::Rmw);
        self.inner.try_lock_exclusive()
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: PlExclusive) {
        hook::atomic(self as *const Self as usize, 4, Access::Rmw);
        // SAFETY: the caller passes the guard of this lock's exclusive acquisition.
        unsafe { self.inner.unlock_exclusive(guard) };
        self.wake_simulated();
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.inner.is_locked_exclusive()
    }
}

impl RawRwLock {
    #[cold]
    fn wait_simulated<G>(
        &self,
        s: &hook::Simulation,
        try_: impl Fn() -> Option<G>,
        busy: impl Fn() -> bool,
    ) -> G {
        let key = self as *const Self as usize;
        loop {
            s.backend().atomic(key, 4, Access::Rmw, std::panic::Location::caller());
            if let Some(g) = try_() {
                return g;
            }
            hook::park_keyed(s, key, &busy, None);
        }
    }

    #[inline]
    fn wake_simulated(&self) {
        if hook::with_current(|_| ()).is_some() {
            super::park::unpark_all(self as *const Self as usize);
        }
    }
}

/// A condition variable for [`Mutex`] guards, with `parking_lot`'s API. Wake-ups may be
/// spurious: callers re-check their predicate in a loop (every caller in the workspace does).
///
/// Each `notify_*` bumps a sequence word and unparks on the condvar's address; `wait` reads
/// the word while it still holds the mutex, unlocks, and parks while the word is unchanged, so
/// a notify between the unlock and the park is not lost.
#[derive(Debug, Default)]
pub struct Condvar {
    seq: AtomicU32,
}

impl Condvar {
    /// A new condition variable.
    pub const fn new() -> Condvar {
        Condvar { seq: AtomicU32::new(0) }
    }

    fn key(&self) -> usize {
        self as *const Self as usize
    }

    fn wait_inner<T>(&self, guard: &mut MutexGuard<'_, T>, deadline: Option<Instant>) -> WaitTimeoutResult {
        let seen = self.seq.load(Ordering::Relaxed);
        let cleared = MutexGuard::unlocked(guard, || {
            super::park::park_while_until(self.key(), || self.seq.load(Ordering::Relaxed) == seen, deadline)
        });
        WaitTimeoutResult::new(!cleared)
    }

    /// Unlocks, sleeps until notified (or spuriously), relocks.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        self.wait_inner(guard, None);
    }

    /// As [`wait`](Self::wait), giving up at `deadline`.
    pub fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, deadline: Instant) -> WaitTimeoutResult {
        self.wait_inner(guard, Some(deadline))
    }

    /// As [`wait`](Self::wait), giving up after `timeout`.
    pub fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> WaitTimeoutResult {
        let deadline = Instant::now().checked_add(timeout);
        self.wait_inner(guard, deadline)
    }

    /// Wakes one waiter; returns whether one was woken.
    pub fn notify_one(&self) -> bool {
        self.seq.fetch_add(1, Ordering::Release);
        super::park::unpark_one(self.key())
    }

    /// Wakes every waiter; returns how many.
    pub fn notify_all(&self) -> usize {
        self.seq.fetch_add(1, Ordering::Release);
        super::park::unpark_all(self.key())
    }
}

impl std::fmt::Debug for RawMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawMutex")
    }
}

impl std::fmt::Debug for RawRwLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawRwLock")
    }
}
