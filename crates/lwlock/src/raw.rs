//! `lock_api` integration: any lockstack LWLock as the raw lock of a typed
//! `lock_api::RwLock<RawLwLock<I>, T>` (lock_api 0.5's stateful guards carry the
//! [`LwLockHeld`] token, so even the reader-biased lock knows which slot to release).
//!
//! ```
//! use lockstack_lwlock::RwLock;
//!
//! let table = RwLock::new(vec![1, 2, 3]);
//! {
//!     let r1 = table.read();
//!     let r2 = table.read();
//!     assert_eq!(r1.len() + r2.len(), 6);
//! }
//! table.write().push(4);
//! assert_eq!(*table.read(), vec![1, 2, 3, 4]);
//! ```
//!
//! The PostgreSQL-only operations (acquire-or-wait, wait-for-variable) are not part of
//! `lock_api`; use the [`LwLockImpl`] methods on the lock itself for those.

use lockstack_common::TrancheId;

use crate::atomic::AtomicLwLock;
use crate::interface::{LwLockHeld, LwLockImpl, LwLockMode};
use crate::pg92::Pg92LwLock;
use crate::read_biased::ReadBiasedLwLock;

/// Implementations that can be built in a `const` context (needed for `lock_api`'s `INIT`).
pub trait ConstLwLock: LwLockImpl + Sized {
    /// A free lock in the unnamed tranche, instance 0.
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self;
}

impl ConstLwLock for AtomicLwLock {
    const INIT: Self = AtomicLwLock::new_const(TrancheId::UNNAMED, 0);
}

impl ConstLwLock for Pg92LwLock {
    const INIT: Self = Pg92LwLock::new_const(TrancheId::UNNAMED, 0);
}

impl ConstLwLock for ReadBiasedLwLock {
    const INIT: Self = ReadBiasedLwLock::new_const(TrancheId::UNNAMED, 0);
}

/// The raw lock type for `lock_api`; `I` picks the implementation (default: the 9.5+ one).
#[derive(Default)]
pub struct RawLwLock<I: ConstLwLock = AtomicLwLock>(pub I);

impl Default for AtomicLwLock {
    fn default() -> Self {
        Self::INIT
    }
}

impl Default for Pg92LwLock {
    fn default() -> Self {
        Self::INIT
    }
}

impl Default for ReadBiasedLwLock {
    fn default() -> Self {
        Self::INIT
    }
}

// SAFETY: every implementation grants either any number of shared holds or one exclusive hold,
// with acquire ordering on success (the CAS or spinlock acquisition) and release ordering on
// unlock (the releasing RMW or spinlock release). Guard state is the `LwLockHeld` token, which
// records the mode (and reader slot) of exactly one acquisition and is consumed by unlock.
// Forgetting a token leaves the lock held, which is safe. Moving or dropping a locked lock that
// the caller owns exclusively is safe: nobody can be queued on it. No lock operation unwinds
// while holding a new acquisition: the only panics are the "not held" assertions in release,
// which fire before anything is acquired.
unsafe impl<I: ConstLwLock> lock_api::RawRwLock for RawLwLock<I> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = RawLwLock(I::INIT);
    type SharedGuard = LwLockHeld;
    type ExclusiveGuard = LwLockHeld;

    #[inline]
    fn lock_shared(&self) -> LwLockHeld {
        self.0.acquire(LwLockMode::Shared)
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<LwLockHeld> {
        self.0.conditional_acquire(LwLockMode::Shared)
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: LwLockHeld) {
        self.0.release(guard)
    }

    #[inline]
    fn lock_exclusive(&self) -> LwLockHeld {
        self.0.acquire(LwLockMode::Exclusive)
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<LwLockHeld> {
        self.0.conditional_acquire(LwLockMode::Exclusive)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: LwLockHeld) {
        self.0.release(guard)
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.0.is_locked()
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.0.is_locked_exclusive()
    }
}

/// A typed reader-writer lock on the 9.5+ LWLock: `lock_api::RwLock<RawLwLock, T>`.
pub type RwLock<T> = lock_api::RwLock<RawLwLock<AtomicLwLock>, T>;
/// A typed reader-writer lock on the 9.2 LWLock.
pub type Pg92RwLock<T> = lock_api::RwLock<RawLwLock<Pg92LwLock>, T>;
/// A typed reader-writer lock on the reader-biased LWLock.
pub type ReadBiasedRwLock<T> = lock_api::RwLock<RawLwLock<ReadBiasedLwLock>, T>;
