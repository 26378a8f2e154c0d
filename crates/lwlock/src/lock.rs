//! The run-time choice among the three LWLock implementations: [`LwLockKind`], the dispatching
//! [`LwLock`], its `lock_api` face [`LwRwLock`] with [`LwRwLockExt`], and the crate's knob.
//!
//! Locks touched: whichever LWLock implementation an [`LwLock`] wraps (it forwards each call to
//! it). The interface it forwards (modes, tokens, [`LwLockImpl`]) lives in `interface.rs`, below
//! both this module and the implementations.

use std::fmt;
use std::str::FromStr;

use lockstack_common::TrancheId;

use crate::atomic::AtomicLwLock;
use crate::interface::{LwLockGuard, LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
use crate::pg92::Pg92LwLock;
use crate::read_biased::ReadBiasedLwLock;

/// Which LWLock implementation to use; chosen at run time from configuration.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum LwLockKind {
    /// [`Pg92LwLock`].
    Pg92,
    /// [`AtomicLwLock`] (PostgreSQL 9.5+; the default).
    #[default]
    Atomic,
    /// [`ReadBiasedLwLock`].
    ReadBiased,
}

impl LwLockKind {
    /// Every kind, in the order reports list them.
    pub const ALL: [LwLockKind; 3] = [LwLockKind::Pg92, LwLockKind::Atomic, LwLockKind::ReadBiased];

    /// The name used on command lines and in reports: `pg92`, `atomic`, `read-biased`.
    pub fn name(self) -> &'static str {
        match self {
            LwLockKind::Pg92 => "pg92",
            LwLockKind::Atomic => "atomic",
            LwLockKind::ReadBiased => "read-biased",
        }
    }
}

impl fmt::Display for LwLockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LwLockKind {
    type Err = String;

    /// Parses `pg92`, `atomic` or `read-biased` (also `readbiased`, `bravo`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pg92" => Ok(LwLockKind::Pg92),
            "atomic" | "pg95" => Ok(LwLockKind::Atomic),
            "read-biased" | "readbiased" | "bravo" => Ok(LwLockKind::ReadBiased),
            _ => Err(format!("unknown LWLock implementation '{s}' (valid: pg92, atomic, read-biased)")),
        }
    }
}

/// An LWLock whose implementation is chosen at run time: the type the other lockstack crates
/// embed in their shared structures. Dispatch is one `match` per call, no `dyn`.
///
/// ```
/// use lockstack_common::TrancheId;
/// use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};
///
/// let lock = LwLock::new(LwLockKind::Atomic, TrancheId::PROC_ARRAY, 0);
/// let held = lock.acquire(LwLockMode::Shared);
/// assert!(lock.conditional_acquire(LwLockMode::Exclusive).is_none());
/// lock.release(held);
/// let held = lock.conditional_acquire(LwLockMode::Exclusive).expect("free");
/// lock.release(held);
/// ```
pub enum LwLock {
    /// The 9.2 design.
    Pg92(Pg92LwLock),
    /// The 9.5+ design.
    Atomic(AtomicLwLock),
    /// The reader-biased design (boxed: its reader slots take 2 KiB).
    ReadBiased(Box<ReadBiasedLwLock>),
}

impl fmt::Debug for LwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LwLock")
            .field("kind", &self.kind())
            .field("tranche", &self.tranche())
            .field("instance", &self.instance())
            .finish()
    }
}

macro_rules! dispatch {
    ($self:expr, $l:ident => $e:expr) => {
        match $self {
            LwLock::Pg92($l) => $e,
            LwLock::Atomic($l) => $e,
            LwLock::ReadBiased($l) => $e,
        }
    };
}

impl LwLock {
    /// A free lock of the given implementation, tranche and instance number.
    pub fn new(kind: LwLockKind, tranche: TrancheId, instance: u32) -> LwLock {
        match kind {
            LwLockKind::Pg92 => LwLock::Pg92(Pg92LwLock::with_id(tranche, instance)),
            LwLockKind::Atomic => LwLock::Atomic(AtomicLwLock::with_id(tranche, instance)),
            LwLockKind::ReadBiased => {
                LwLock::ReadBiased(Box::new(ReadBiasedLwLock::with_id(tranche, instance)))
            }
        }
    }

    /// The address of the lock's word: the state word (atomic, read-biased's underlying lock)
    /// or the spinlock (pg92).
    pub fn word_addr(&self) -> *const u8 {
        dispatch!(self, l => l.word_addr())
    }

    /// Names the line of the lock's word for a simulation's hottest-lines table as
    /// `"<tranche> <instance>"` (`"LockManager 3"`, `"BufferMapping 17"`), and a read-biased
    /// lock's bias word as `"<tranche> <instance> bias"`, through
    /// [`hook::name_line`](lockstack_common::sync::hook::name_line) (nothing without the
    /// `sim` feature). Call it once the lock is at its final address (in its table).
    pub fn name_line(&self) {
        let (t, i) = (self.tranche(), self.instance());
        self.name_line_as(|| format!("{} {i}", t.name()));
    }

    /// [`name_line`](Self::name_line) with a name of the caller's (`"ProcArrayLock"` for an
    /// individual lock); a read-biased lock's bias word gets the name plus `" bias"`.
    pub fn name_line_as(&self, name: impl Fn() -> String) {
        lockstack_common::sync::hook::name_line(self.word_addr(), &name);
        if let LwLock::ReadBiased(l) = self {
            lockstack_common::sync::hook::name_line(l.bias_addr(), || format!("{} bias", name()));
        }
    }

    /// Which implementation this is.
    pub fn kind(&self) -> LwLockKind {
        match self {
            LwLock::Pg92(_) => LwLockKind::Pg92,
            LwLock::Atomic(_) => LwLockKind::Atomic,
            LwLock::ReadBiased(_) => LwLockKind::ReadBiased,
        }
    }

    /// Acquires in shared mode and returns a guard that releases on drop.
    pub fn shared(&self) -> LwLockGuard<'_, LwLock> {
        LwLockGuard::new(self, self.acquire(LwLockMode::Shared))
    }

    /// Acquires in exclusive mode and returns a guard that releases on drop.
    pub fn exclusive(&self) -> LwLockGuard<'_, LwLock> {
        LwLockGuard::new(self, self.acquire(LwLockMode::Exclusive))
    }
}

impl LwLockImpl for LwLock {
    fn with_id(tranche: TrancheId, instance: u32) -> Self {
        LwLock::new(LwLockKind::default(), tranche, instance)
    }
    #[inline]
    fn acquire(&self, mode: LwLockMode) -> LwLockHeld {
        // Under --costs postgres: LWLockAcquire's own instructions, before the lock is taken.
        lockstack_common::sync::hook::pg_charge("lwlock.acquire");
        dispatch!(self, l => l.acquire(mode))
    }
    #[inline]
    fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        lockstack_common::sync::hook::pg_charge("lwlock.acquire");
        dispatch!(self, l => l.conditional_acquire(mode))
    }
    fn acquire_or_wait(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        lockstack_common::sync::hook::pg_charge("lwlock.acquire");
        dispatch!(self, l => l.acquire_or_wait(mode))
    }
    #[inline]
    fn release(&self, held: LwLockHeld) {
        dispatch!(self, l => l.release(held));
        // LWLockRelease's own instructions, after the lock is free.
        lockstack_common::sync::hook::pg_charge("lwlock.release");
    }
    fn wait_for_var(&self, var: &LwLockVar, oldval: u64) -> VarWait {
        dispatch!(self, l => l.wait_for_var(var, oldval))
    }
    fn update_var(&self, held: &LwLockHeld, var: &LwLockVar, val: u64) {
        dispatch!(self, l => l.update_var(held, var, val))
    }
    fn release_clear_var(&self, held: LwLockHeld, var: &LwLockVar, val: u64) {
        dispatch!(self, l => l.release_clear_var(held, var, val))
    }
    fn is_locked(&self) -> bool {
        dispatch!(self, l => l.is_locked())
    }
    fn is_locked_exclusive(&self) -> bool {
        dispatch!(self, l => l.is_locked_exclusive())
    }
    fn tranche(&self) -> TrancheId {
        dispatch!(self, l => l.tranche())
    }
    fn instance(&self) -> u32 {
        dispatch!(self, l => l.instance())
    }
}

// SAFETY: `LwLock` dispatches to one of the three implementations, each of which grants either
// any number of shared holds or one exclusive hold, with acquire ordering on success and release
// ordering on unlock (see the same argument for `RawLwLock` in raw.rs). The guard state is the
// `LwLockHeld` token of exactly one acquisition of this lock, consumed by unlock; forgetting one
// leaves the lock held, which is safe. No operation unwinds holding a new acquisition: the only
// panics are the "not held" assertions of release, which fire before anything changes.
unsafe impl lock_api::RawRwLock for LwLock {
    /// A free [`AtomicLwLock`] of the unnamed tranche, instance 0, for `lock_api::RwLock::new`
    /// and `Default`. Locks of a run-time kind or tranche are built with
    /// [`LwLock::with_data`] (`lock_api::RwLock::from_raw`) instead.
    #[cfg(not(loom))]
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = LwLock::Atomic(AtomicLwLock::new_const(TrancheId::UNNAMED, 0));
    /// loom's atomics have no `const` constructor: under `--cfg loom` an `LwRwLock` can only be
    /// built with [`LwLock::with_data`]; using `INIT` fails to compile.
    #[cfg(loom)]
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = panic!("under loom, build an LwRwLock with LwLock::with_data");
    type SharedGuard = LwLockHeld;
    type ExclusiveGuard = LwLockHeld;

    #[inline]
    fn lock_shared(&self) -> LwLockHeld {
        LwLockImpl::acquire(self, LwLockMode::Shared)
    }

    #[inline]
    fn try_lock_shared(&self) -> Option<LwLockHeld> {
        LwLockImpl::conditional_acquire(self, LwLockMode::Shared)
    }

    #[inline]
    unsafe fn unlock_shared(&self, guard: LwLockHeld) {
        LwLockImpl::release(self, guard)
    }

    #[inline]
    fn lock_exclusive(&self) -> LwLockHeld {
        LwLockImpl::acquire(self, LwLockMode::Exclusive)
    }

    #[inline]
    fn try_lock_exclusive(&self) -> Option<LwLockHeld> {
        LwLockImpl::conditional_acquire(self, LwLockMode::Exclusive)
    }

    #[inline]
    unsafe fn unlock_exclusive(&self, guard: LwLockHeld) {
        LwLockImpl::release(self, guard)
    }

    #[inline]
    fn is_locked(&self) -> bool {
        LwLockImpl::is_locked(self)
    }

    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        LwLockImpl::is_locked_exclusive(self)
    }
}

/// Data protected by a run-time [`LwLock`]: `lock_api::RwLock<LwLock, T>`. Build it with
/// [`LwLock::with_data`] (the kind and tranche are run-time values, which `lock_api`'s `const
/// INIT` cannot carry); `read()` and `write()` take the LWLock shared and exclusive, with its
/// wait events and LWLOCK_STATS counters, and return guards that give `&T` / `&mut T` and
/// release on drop. `lock_api`'s `RwLockWriteGuard::unlocked` releases and retakes the lock
/// around a wait (the SLRU's I/O).
///
/// ```
/// use lockstack_common::TrancheId;
/// use lockstack_lwlock::{LwLock, LwLockKind, LwRwLock, LwRwLockExt};
///
/// let table: LwRwLock<Vec<u32>> = LwLock::new(LwLockKind::Pg92, TrancheId::LOCK_MANAGER, 3).with_data(vec![]);
/// table.write().push(7);
/// assert_eq!(*table.read(), vec![7]);
/// let (mut g, waited) = table.write_waited();
/// assert!(!waited);
/// g.push(8);
/// drop(g);
/// assert_eq!((table.tranche(), table.instance(), table.kind()), (TrancheId::LOCK_MANAGER, 3, LwLockKind::Pg92));
/// ```
pub type LwRwLock<T> = lock_api::RwLock<LwLock, T>;
/// Shared guard of an [`LwRwLock`].
pub type LwRwLockReadGuard<'a, T> = lock_api::RwLockReadGuard<'a, LwLock, T>;
/// Exclusive guard of an [`LwRwLock`].
pub type LwRwLockWriteGuard<'a, T> = lock_api::RwLockWriteGuard<'a, LwLock, T>;

impl LwLock {
    /// This lock protecting `data` (`lock_api::RwLock::from_raw`).
    pub fn with_data<T>(self, data: T) -> LwRwLock<T> {
        lock_api::RwLock::from_raw(self, data)
    }
}

/// What an [`LwRwLock`] offers beyond `lock_api`: the acquisition's "had to sleep" flag (which
/// callers count, as PostgreSQL's lock manager counts partition-lock blocks) and the lock's
/// identity for diagnostics. The raw lock itself is not handed out: a release with a token of
/// another lock could free a lock a guard still holds.
pub trait LwRwLockExt<T: ?Sized> {
    /// `write()`, also returning true if the acquisition slept ([`LwLockHeld::waited`]).
    fn write_waited(&self) -> (LwRwLockWriteGuard<'_, T>, bool);
    /// `read()`, also returning true if the acquisition slept.
    fn read_waited(&self) -> (LwRwLockReadGuard<'_, T>, bool);
    /// The implementation of the lock.
    fn kind(&self) -> LwLockKind;
    /// The lock's tranche.
    fn tranche(&self) -> TrancheId;
    /// The lock's number within its tranche.
    fn instance(&self) -> u32;
    /// [`LwLock::name_line`] of the raw lock: names its word's line for a simulation.
    fn name_line(&self);
    /// [`LwLock::name_line_as`] of the raw lock, with the caller's name.
    fn name_line_as(&self, name: impl Fn() -> String);
    /// [`LwLock::word_addr`] of the raw lock: the address of its word.
    fn word_addr(&self) -> *const u8;
}

impl<T: ?Sized> LwRwLockExt<T> for LwRwLock<T> {
    #[inline]
    fn write_waited(&self) -> (LwRwLockWriteGuard<'_, T>, bool) {
        // SAFETY: the raw lock is only used to take one exclusive acquisition, whose token
        // goes straight into the guard, exactly as `lock_api::RwLock::write` does.
        let held = unsafe { self.raw() }.acquire(LwLockMode::Exclusive);
        let waited = held.waited();
        // SAFETY: `held` is an exclusive hold of this lock, and no other guard exists for it.
        (unsafe { self.make_write_guard_unchecked(held) }, waited)
    }

    #[inline]
    fn read_waited(&self) -> (LwRwLockReadGuard<'_, T>, bool) {
        // SAFETY: as in `write_waited`, for one shared acquisition.
        let held = unsafe { self.raw() }.acquire(LwLockMode::Shared);
        let waited = held.waited();
        // SAFETY: `held` is a shared hold of this lock, owned by no other guard.
        (unsafe { self.make_read_guard_unchecked(held) }, waited)
    }

    fn kind(&self) -> LwLockKind {
        // SAFETY: reads the lock's immutable identity; no lock operation.
        unsafe { self.raw() }.kind()
    }

    fn name_line(&self) {
        // SAFETY: as in `kind`: reads the lock's identity and address, no lock operation.
        unsafe { self.raw() }.name_line()
    }

    fn name_line_as(&self, name: impl Fn() -> String) {
        // SAFETY: as in `name_line`.
        unsafe { self.raw() }.name_line_as(name)
    }

    fn word_addr(&self) -> *const u8 {
        // SAFETY: as in `name_line`.
        unsafe { self.raw() }.word_addr()
    }

    fn tranche(&self) -> TrancheId {
        // SAFETY: as in `kind`.
        LwLockImpl::tranche(unsafe { self.raw() })
    }

    fn instance(&self) -> u32 {
        // SAFETY: as in `kind`.
        LwLockImpl::instance(unsafe { self.raw() })
    }
}

/// The lwlock crate's knob (`lockstack_common::knob`): which implementation every LWLock of a
/// run uses. A program that embeds several crates sets it in each of their configs at once.
pub const KNOBS: &[lockstack_common::Knob<LwLockKind>] = &[lockstack_common::Knob {
    key: "lwlock.kind",
    values: "pg92|atomic|read-biased",
    doc: "LWLock implementation of every crate (9.2 spinlock-protected lwlock.c, 9.5+ atomic state word, BRAVO reader-biased)",
    default: "atomic",
    apply: |k, v| {
        *k = v.parse().ok()?;
        Some(())
    },
}];
