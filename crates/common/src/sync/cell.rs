//! Cells for shared data a lock protects: [`UnsafeCell`] with loom's closure API (loom's own
//! under `--cfg loom`, which checks every access for a data race), and [`LwLockCell`] on top of
//! it for data an LWLock protects. Each access is reported to an installed simulation as a
//! [`touch`](super::hook::touch) of the whole value.

#[cfg(not(loom))]
use super::hook::{self, Access};

/// `std::cell::UnsafeCell` with loom's `with` / `with_mut` API.
#[derive(Debug, Default)]
pub struct UnsafeCell<T> {
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
}

impl<T> UnsafeCell<T> {
    /// A new cell (`const` in production).
    #[cfg(not(loom))]
    pub const fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell { inner: std::cell::UnsafeCell::new(v) }
    }

    /// A new cell.
    #[cfg(loom)]
    pub fn new(v: T) -> UnsafeCell<T> {
        UnsafeCell { inner: loom::cell::UnsafeCell::new(v) }
    }

    /// Runs `f` on a const pointer to the contents (a read of the whole value).
    #[inline]
    #[track_caller]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        #[cfg(not(loom))]
        {
            hook::touch(self.inner.get() as *const u8, size_of::<T>(), Access::Read);
            f(self.inner.get())
        }
        #[cfg(loom)]
        self.inner.with(f)
    }

    /// Runs `f` on a mutable pointer to the contents (a write of the whole value).
    #[inline]
    #[track_caller]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        #[cfg(not(loom))]
        {
            hook::touch(self.inner.get() as *const u8, size_of::<T>(), Access::Write);
            f(self.inner.get())
        }
        #[cfg(loom)]
        self.inner.with_mut(f)
    }

    /// The contents through an exclusive reference.
    #[cfg(not(loom))]
    pub fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }

    /// Consumes the cell.
    pub fn into_inner(self) -> T {
        self.inner.into_inner()
    }
}

/// Data protected by an LWLock and nothing else, as PostgreSQL's shared memory is (a
/// backend's fast-path slots under its `fpInfoLock`, a lock partition's hash tables under its
/// `LockManager` LWLock). The cell does no locking of its own; every access is `unsafe` and its
/// caller must hold the protecting LWLock (shared for [`with`](Self::with), exclusive for
/// [`with_mut`](Self::with_mut)). Under loom the accesses are tracked, so a missing
/// happens-before edge between two of them fails the model.
#[derive(Debug, Default)]
pub struct LwLockCell<T> {
    inner: UnsafeCell<T>,
}

impl<T> LwLockCell<T> {
    /// A new cell.
    pub fn new(v: T) -> LwLockCell<T> {
        LwLockCell { inner: UnsafeCell::new(v) }
    }

    /// Runs `f` on a shared reference to the contents.
    ///
    /// # Safety
    /// The caller holds the protecting LWLock in shared or exclusive mode for the whole call,
    /// so no [`with_mut`](Self::with_mut) can run at the same time.
    #[inline]
    #[track_caller]
    pub unsafe fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        // SAFETY: the caller holds the protecting LWLock (this function's contract), so nobody
        // holds it exclusively and no mutable reference exists during `f`.
        self.inner.with(|p| f(unsafe { &*p }))
    }

    /// Runs `f` on a mutable reference to the contents.
    ///
    /// # Safety
    /// The caller holds the protecting LWLock exclusively for the whole call and does not call
    /// [`with`](Self::with) or `with_mut` on the same cell from inside `f`.
    #[inline]
    #[track_caller]
    pub unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        // SAFETY: the caller holds the protecting LWLock exclusively (this function's contract),
        // so this is the only reference to the contents during `f`.
        self.inner.with_mut(|p| f(unsafe { &mut *p }))
    }
}
