//! The LWLock interface every implementation meets: the two modes, the held token, the
//! published variable of `wait_for_var`, the [`LwLockImpl`] trait and the self-releasing guard.
//!
//! Locks touched: none; this module only names the contract. The implementations
//! ([`Pg92LwLock`](crate::Pg92LwLock), [`AtomicLwLock`](crate::AtomicLwLock),
//! [`ReadBiasedLwLock`](crate::ReadBiasedLwLock)) and the run-time choice among them
//! ([`LwLock`](crate::LwLock), in `lock.rs`) import it; it imports none of them.

use lockstack_common::TrancheId;

use crate::sync::AtomicU64;

/// The two ways to hold an LWLock (`LW_SHARED`, `LW_EXCLUSIVE`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LwLockMode {
    /// Any number of shared holders, no exclusive holder.
    Shared,
    /// One holder, nobody else.
    Exclusive,
}

/// Proof that the caller holds an LWLock, returned by every successful acquisition and consumed
/// by [`LwLockImpl::release`]. It records the mode (PostgreSQL keeps it in `held_lwlocks`) and,
/// for [`ReadBiasedLwLock`](crate::ReadBiasedLwLock), which reader slot was used.
///
/// Dropping it without releasing leaves the lock held forever (safe, but a bug).
#[must_use = "an LWLock stays held until this token is passed to release()"]
#[derive(Debug, PartialEq, Eq)]
pub struct LwLockHeld {
    pub(crate) mode: LwLockMode,
    pub(crate) slot: u16,
    pub(crate) waited: bool,
}

impl LwLockHeld {
    pub(crate) const NO_SLOT: u16 = u16::MAX;

    pub(crate) fn new(mode: LwLockMode, waited: bool) -> LwLockHeld {
        LwLockHeld { mode, slot: Self::NO_SLOT, waited }
    }

    /// The mode the lock is held in.
    pub fn mode(&self) -> LwLockMode {
        self.mode
    }

    /// True if the acquisition had to sleep at least once (the negation of the `bool` that
    /// PostgreSQL's `LWLockAcquire` returns).
    pub fn waited(&self) -> bool {
        self.waited
    }
}

/// Result of [`LwLockImpl::wait_for_var`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum VarWait {
    /// The lock is not held exclusively (any more): whatever it protected is finished.
    Free,
    /// The exclusive holder published a value different from the one the caller passed.
    Changed(u64),
}

/// A 64-bit value that an exclusive holder publishes for waiters of [`LwLockImpl::wait_for_var`]
/// (the `insertingAt` position of a WAL insertion lock, 9.4+).
#[derive(Debug)]
pub struct LwLockVar(pub(crate) AtomicU64);

impl LwLockVar {
    /// A variable holding `v`.
    pub fn new(v: u64) -> LwLockVar {
        LwLockVar(AtomicU64::new(v))
    }

    /// The current value (an acquire load; use it only for diagnostics, waiters must go
    /// through `wait_for_var`).
    pub fn load(&self) -> u64 {
        self.0.load(lockstack_common::sync::Ordering::Acquire)
    }
}

/// The operations every LWLock implementation provides (`src/backend/storage/lmgr/lwlock.c`).
///
/// Implementations: [`Pg92LwLock`](crate::Pg92LwLock) (9.2: spinlock-protected counts and queue),
/// [`AtomicLwLock`](crate::AtomicLwLock) (9.5+: one atomic state word; 16's O(1) self-dequeue) and
/// [`ReadBiasedLwLock`](crate::ReadBiasedLwLock) (BRAVO, 2019). None of them is fair: a woken waiter retries rather than
/// receiving the lock, and shared requests do not queue behind waiting exclusive ones, exactly
/// as in PostgreSQL.
pub trait LwLockImpl: Send + Sync {
    /// A new, free lock of `tranche`; `instance` numbers it within the tranche (for the
    /// per-lock statistics and diagnostics).
    ///
    /// # Panics
    /// If `tranche.index() >= TrancheId::MAX` (every id from `TrancheId::register` or a
    /// built-in constant is in range): the LWLOCK_STATS counters have a row per id, and the
    /// acquisition path relies on the check made here.
    fn with_id(tranche: TrancheId, instance: u32) -> Self
    where
        Self: Sized;

    /// Blocks until the lock is held in `mode` (`LWLockAcquire`). Never spins unboundedly: a
    /// backend that cannot get the lock queues itself and parks.
    fn acquire(&self, mode: LwLockMode) -> LwLockHeld;

    /// Takes the lock only if that needs no wait (`LWLockConditionalAcquire`).
    fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld>;

    /// If the lock is free, takes it in `mode`; otherwise waits until it is released and
    /// returns `None` without taking it (`LWLockAcquireOrWait`, 9.2+, used by WAL flushing so that
    /// a backend whose WAL was flushed by the holder need not take the lock at all).
    fn acquire_or_wait(&self, mode: LwLockMode) -> Option<LwLockHeld>;

    /// Releases a hold (`LWLockRelease`) and wakes waiters by the implementation's rules.
    ///
    /// # Panics
    /// If the lock is not held in `held.mode()` (PostgreSQL: "lock is not held"); this can only
    /// happen when a token is passed to a different lock than the one that issued it.
    fn release(&self, held: LwLockHeld);

    /// Waits until the lock is free, or until its exclusive holder publishes a value of `var`
    /// other than `oldval` (`LWLockWaitForVar`, 9.4+). Shared holders do not count as busy.
    fn wait_for_var(&self, var: &LwLockVar, oldval: u64) -> VarWait;

    /// Publishes `val` in `var` and wakes the `wait_for_var` waiters (`LWLockUpdateVar`).
    ///
    /// # Panics
    /// If `held` is not an exclusive hold of this lock.
    fn update_var(&self, held: &LwLockHeld, var: &LwLockVar, val: u64);

    /// Stores `val` in `var` and releases the exclusive hold (`LWLockReleaseClearVar`).
    fn release_clear_var(&self, held: LwLockHeld, var: &LwLockVar, val: u64);

    /// True if anyone holds the lock (a hint: it may change at once).
    fn is_locked(&self) -> bool;

    /// True if someone holds the lock exclusively (a hint).
    fn is_locked_exclusive(&self) -> bool;

    /// The tranche the lock belongs to.
    fn tranche(&self) -> TrancheId;

    /// The lock's number within its tranche.
    fn instance(&self) -> u32;
}

/// A held LWLock that releases itself when dropped.
#[must_use = "the lock is released as soon as the guard is dropped"]
pub struct LwLockGuard<'a, L: LwLockImpl> {
    lock: &'a L,
    held: Option<LwLockHeld>,
}

impl<'a, L: LwLockImpl> LwLockGuard<'a, L> {
    /// Wraps a hold of `lock` obtained from any acquisition call.
    pub fn new(lock: &'a L, held: LwLockHeld) -> LwLockGuard<'a, L> {
        LwLockGuard { lock, held: Some(held) }
    }

    /// The mode held.
    pub fn mode(&self) -> LwLockMode {
        self.held.as_ref().map(|h| h.mode).unwrap_or(LwLockMode::Shared)
    }
}

impl<L: LwLockImpl> Drop for LwLockGuard<'_, L> {
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            self.lock.release(h);
        }
    }
}
