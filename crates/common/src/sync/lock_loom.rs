//! The names of [`lock`](self)'s production module over loom's own `Mutex`, `RwLock` and
//! `Condvar` (`--cfg loom`), so that a model sees every hand-off. Same API as the production
//! types for what the workspace uses: `lock`, `try_lock`, `read`, `write`, `get_mut`,
//! `into_inner`, and `Condvar::{wait, wait_for, wait_until, notify_one, notify_all}`.

use std::ops::{Deref, DerefMut};

use super::time::WaitTimeoutResult;
use super::time::{Duration, Instant};

/// A mutual-exclusion lock (loom's), with `parking_lot`'s `lock()` that returns the guard.
#[derive(Debug, Default)]
pub struct Mutex<T>(loom::sync::Mutex<T>);

/// The guard of a [`Mutex`]; `None` only inside a condition-variable wait.
#[derive(Debug)]
pub struct MutexGuard<'a, T>(Option<loom::sync::MutexGuard<'a, T>>);

impl<T> Mutex<T> {
    /// A new mutex holding `v`.
    pub fn new(v: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(v))
    }

    /// Locks, blocking the thread.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        MutexGuard(Some(self.0.lock().unwrap_or_else(|e| e.into_inner())))
    }

    /// Locks if free.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.0.try_lock().ok().map(|g| MutexGuard(Some(g)))
    }

    /// The contents through an exclusive reference.
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Consumes the mutex and returns the contents.
    pub fn into_inner(self) -> T {
        self.0.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
            .as_deref()
            .expect("the guard is taken only inside Condvar::wait, which puts it back before returning")
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
            .as_deref_mut()
            .expect("the guard is taken only inside Condvar::wait, which puts it back before returning")
    }
}

/// A reader-writer lock (loom's).
#[derive(Debug, Default)]
pub struct RwLock<T>(loom::sync::RwLock<T>);

/// A shared guard of a [`RwLock`].
pub type RwLockReadGuard<'a, T> = loom::sync::RwLockReadGuard<'a, T>;
/// An exclusive guard of a [`RwLock`].
pub type RwLockWriteGuard<'a, T> = loom::sync::RwLockWriteGuard<'a, T>;

impl<T> RwLock<T> {
    /// A new lock holding `v`.
    pub fn new(v: T) -> RwLock<T> {
        RwLock(loom::sync::RwLock::new(v))
    }

    /// Locks shared.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks exclusive.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The contents through an exclusive reference.
    pub fn get_mut(&mut self) -> &mut T {
        self.0.get_mut().unwrap_or_else(|e| e.into_inner())
    }
}

/// A condition variable (loom's). Loom has no clock: timed waits never time out.
#[derive(Debug, Default)]
pub struct Condvar(loom::sync::Condvar);

impl Condvar {
    /// A new condition variable.
    pub fn new() -> Condvar {
        Condvar(loom::sync::Condvar::new())
    }

    /// Unlocks, sleeps until notified, relocks.
    pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
        let g = guard.0.take().expect(
            "a guard outside a wait holds its lock: only this function takes it, and it puts it back",
        );
        guard.0 = Some(self.0.wait(g).unwrap_or_else(|e| e.into_inner()));
    }

    /// As [`wait`](Self::wait) (the deadline is not modelled).
    pub fn wait_until<T>(&self, guard: &mut MutexGuard<'_, T>, deadline: Instant) -> WaitTimeoutResult {
        let _ = deadline;
        self.wait(guard);
        WaitTimeoutResult::new(false)
    }

    /// As [`wait`](Self::wait) (the time-out is not modelled).
    pub fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> WaitTimeoutResult {
        let _ = timeout;
        self.wait(guard);
        WaitTimeoutResult::new(false)
    }

    /// Wakes one waiter (loom does not say whether one was waiting: `true`).
    pub fn notify_one(&self) -> bool {
        self.0.notify_one();
        true
    }

    /// Wakes every waiter (loom does not say how many: 0).
    pub fn notify_all(&self) -> usize {
        self.0.notify_all();
        0
    }
}
