//! The atomics the fast-path protocol shares between backends, and the cell type for data an
//! LWLock protects, from `std` normally and from `loom` under `--cfg loom` (so that
//! `tests/loom_fastpath.rs` can explore their interleavings and check every access to
//! LWLock-protected data for a data race).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};

/// Data protected by an LWLock and nothing else, as PostgreSQL's shared memory is: the
/// fast-path slots under a backend's `fpInfoLock`, a partition's hash tables under its
/// `LockManager` LWLock. The cell does no locking of its own; every access is `unsafe` and its
/// caller must hold the protecting LWLock (shared for [`with`](Self::with), exclusive for
/// [`with_mut`](Self::with_mut)). Under loom the accesses are tracked, so a missing
/// happens-before edge between two of them fails the model.
pub(crate) struct LwLockCell<T> {
    #[cfg(not(loom))]
    inner: std::cell::UnsafeCell<T>,
    #[cfg(loom)]
    inner: loom::cell::UnsafeCell<T>,
}

impl<T> LwLockCell<T> {
    pub(crate) fn new(v: T) -> LwLockCell<T> {
        LwLockCell {
            #[cfg(not(loom))]
            inner: std::cell::UnsafeCell::new(v),
            #[cfg(loom)]
            inner: loom::cell::UnsafeCell::new(v),
        }
    }

    /// Runs `f` on a shared reference to the contents.
    ///
    /// # Safety
    /// The caller holds the protecting LWLock in shared or exclusive mode for the whole call,
    /// so no [`with_mut`](Self::with_mut) can run at the same time.
    #[inline]
    pub(crate) unsafe fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        #[cfg(not(loom))]
        {
            // SAFETY: the caller holds the protecting LWLock (see this function's contract), so
            // nobody holds it exclusively and no mutable reference exists during `f`.
            f(unsafe { &*self.inner.get() })
        }
        #[cfg(loom)]
        {
            // SAFETY: as above; loom additionally checks the claim.
            self.inner.with(|p| f(unsafe { &*p }))
        }
    }

    /// Runs `f` on a mutable reference to the contents.
    ///
    /// # Safety
    /// The caller holds the protecting LWLock exclusively for the whole call and does not call
    /// [`with`](Self::with) or `with_mut` on the same cell from inside `f`.
    #[inline]
    pub(crate) unsafe fn with_mut<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        {
            // SAFETY: the caller holds the protecting LWLock exclusively (see this function's
            // contract), so this is the only reference to the contents during `f`.
            f(unsafe { &mut *self.inner.get() })
        }
        #[cfg(loom)]
        {
            // SAFETY: as above; loom additionally checks the claim.
            self.inner.with_mut(|p| f(unsafe { &mut *p }))
        }
    }
}
