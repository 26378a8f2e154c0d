//! PostgreSQL's lightweight locks (LWLocks), three ways, plus the group-combining protocols
//! built on them.
//!
//! An LWLock is a reader-writer lock for shared-memory structures held for a few hundred
//! nanoseconds at most: no deadlock detection, no timeout, not fair. This crate rebuilds it as
//! PostgreSQL has had it over the years, so that one program can compare the designs:
//!
//! | type | design | source |
//! |---|---|---|
//! | [`Pg92LwLock`] | spinlock around counts, `releaseOK` and a FIFO queue | `lwlock.c`, 9.2-9.4 |
//! | [`AtomicLwLock`] | one atomic state word, two-phase queueing, O(1) self-dequeue | `lwlock.c`, 9.5 + 16 |
//! | [`ReadBiasedLwLock`] | per-slot reader counters with bias revocation | BRAVO (2019); ReadBiasedLWLock proposal (2025) |
//!
//! All three implement [`LwLockImpl`]; [`LwLock`] picks one at run time. Each supports the
//! PostgreSQL-specific calls: [`LwLockImpl::acquire_or_wait`] (WAL flush group commit) and
//! [`LwLockImpl::wait_for_var`] / [`LwLockImpl::update_var`] (WAL insertion progress).
//! [`RawLwLock`] plugs any of them into `lock_api`, so `lockstack_lwlock::RwLock<T>` is an
//! ordinary typed lock; [`LwLock`] itself is a `lock_api::RawRwLock` too, so data protected by
//! a run-time LWLock lives in an [`LwRwLock<T>`] and is reached only through its guards.
//!
//! [`GroupCombiner`] (9.6 group XID clearing, 11 group CLOG update) and [`FlexLock`] (the 2011
//! proposal) let one backend perform other backends' short exclusive operations.
//!
//! Waiting always parks the thread (through `parking_lot_core`, or loom's model under
//! `--cfg loom`); spinning is bounded and backs off to yields and short sleeps. Each blocking
//! wait publishes the backend's wait event (`LWLock:<tranche>`), and every lock counts
//! acquisitions, blocks, spin delays and wait time per backend and tranche in [`stats`]
//! (PostgreSQL's `LWLOCK_STATS`), without a shared write on the uncontended path.

mod atomic;
mod group;
mod interface;
mod lock;
mod pg92;
#[cfg(not(loom))]
mod raw;
mod read_biased;
mod spin;
pub mod stats;
mod sync;
mod waiter;

pub use atomic::AtomicLwLock;
pub use group::{FlexLock, FlexRole, GroupCombiner, GroupRole};
pub use interface::{LwLockGuard, LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
pub use lock::{KNOBS, LwLock, LwLockKind, LwRwLock, LwRwLockExt, LwRwLockReadGuard, LwRwLockWriteGuard};
pub use lockstack_common::TrancheId;
pub use pg92::Pg92LwLock;
#[cfg(not(loom))]
pub use raw::{ConstLwLock, Pg92RwLock, RawLwLock, ReadBiasedRwLock, RwLock};
pub use read_biased::{INHIBIT_MULTIPLIER, READER_SLOTS, ReadBiasedLwLock};
pub use spin::{
    DEFAULT_SPIN_ROUNDS, SLockDelay, SpinDelay, SpinLock, SpinSchedule, UnknownSpinSchedule, set_spin_rounds,
    set_spin_schedule, set_spins_per_delay, spin_rounds, spin_schedule, spins_per_delay,
};
