//! The workspace's one door to concurrency: atomics, fences, thread-locals, parking, spin
//! hints, yields, threads, mutexes, condition variables and the clock. Every lockstack crate,
//! the engine, the pgbench runner and the micro workloads use only this module (a test,
//! `tests/facade_only.rs`, fails on a direct use elsewhere), as tokio's `loom` module and
//! crossbeam-utils' `primitive` module do for theirs.
//!
//! # Backends
//! * **std** (production): `std::sync::atomic`, `parking_lot` (mutex, rwlock),
//!   `parking_lot_core` (keyed parking), `std::thread`, `std::time`.
//! * **loom** (`RUSTFLAGS="--cfg loom"`): each item maps to loom's, so a crate's loom models
//!   explore every interleaving of the same code. Loom has no clock: `sleep` is a yield, timed
//!   waits do not time out, and [`thread::scope`] does not exist.
//! * **simulation** (a third backend, not in this crate): a [`hook::SimBackend`] installed
//!   with [`hook::install`] sees every operation with its address and call site and may run
//!   it in virtual time. The crates need no change to be simulated.
//!
//! # Cost in production
//! Each operation first loads a process-global `AtomicBool` ("a simulation was ever
//! installed", `Relaxed`) and branches on it, predicted not taken; the slow path is out of
//! line. Atomic wrappers are `#[repr(transparent)]` and `#[inline]`, so a `load` is the
//! original `mov` plus that load and branch. Measured with `lockstack pgbench -S` and the
//! lwlock micro-benchmark before and after (docs/common.md).
//!
//! # What stays outside (and why)
//! * [`atomic::plain`]: std atomics, declared as such, for owner-only per-backend counters (one
//!   writer, read only when summed: not synchronization), padding fields that give `PgProc`
//!   PostgreSQL's size, and CLOG page words that only change under an exclusive bank lock
//!   (loom cannot track 1024 objects per page; a simulation charges them through
//!   [`hook::touch`] at the lock).
//! * `crossbeam_utils::CachePadded`: a layout, not an operation.
//! * The LWLock micro-benchmark's `parking_lot::RwLock` and `std::sync::RwLock` baselines:
//!   they are the things measured against, so they must be the real ones.
//! * `std::time::SystemTime` for wall-clock stamps (pgbench's `:now`-style seeds, the
//!   old-snapshot map's minutes): calendar time, not a clock the locks wait on.
//! * Dependencies' own synchronization (dashmap's shard locks): invisible to the model; the
//!   simulated machine must refuse those variants.

pub mod atomic;
pub mod cell;
pub mod hook;
mod latch;
pub mod local;
#[cfg(not(loom))]
mod lock;
#[cfg(loom)]
#[path = "lock_loom.rs"]
mod lock;
pub mod park;
pub mod thread;
pub mod time;

pub use atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicPtr, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize,
    Ordering, fence,
};
pub use cell::{LwLockCell, UnsafeCell};
pub use latch::Latch;
pub use local::{AccessError, LocalKey};
pub use lock::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(loom))]
pub use lock::{RawMutex, RawRwLock};
pub use park::{ParkHandle, Unparker, park_while, park_while_until};
pub use thread::{spin_hint, yield_now};
pub use time::{Duration, Instant, WaitTimeoutResult, sleep};

/// Host-level locks that are never modelled (not loom's, not simulation points): for
/// process-wide registries that live in `static`s (stats blocks, tranche names), locked briefly
/// with no facade operation inside, so that a simulation running on one host thread can never
/// block on one. Anything a backend waits on uses [`Mutex`] / [`RwLock`] instead.
pub mod host {
    pub use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
}
