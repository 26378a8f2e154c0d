//! Shared vocabulary of the lockstack workspace: identifiers, wait events, and the per-backend
//! statistics plumbing that every subsystem crate reports through.
//!
//! The crate models three pieces of PostgreSQL that are not locks themselves but that every
//! lock needs:
//!
//! * [`ids`]: `TransactionId` with the modulo-2^32 ordering of `src/backend/access/transam/
//!   transam.c` (`TransactionIdPrecedes`), `VirtualTransactionId` (`src/include/storage/lock.h`),
//!   `BackendId`, `Oid` and `BlockNumber`.
//! * [`wait_event`] and [`tranche`]: the `wait_event_type:wait_event` pairs that
//!   `pg_stat_activity` shows (`src/backend/utils/activity/wait_event.c`, PostgreSQL 9.6+), and
//!   the LWLock tranche names (`src/backend/storage/lmgr/lwlock.c`, 9.4+).
//! * [`backend`] and [`stats`]: one wait-event slot per backend that a sampler can read without
//!   locks (the `PGPROC.wait_event_info` word), and counters written only by their own backend
//!   and summed on demand (the model of `LWLOCK_STATS` and `pg_stat_*` backend-local counters).
//! * [`gate`]: a start gate for benchmark threads, which unlike `std::sync::Barrier` does not
//!   hand a mutex from thread to thread as hundreds of them start.
//! * [`input`]: reading a user's input file through a size bound (devices and FIFOs
//!   included), and quoting input on one line in messages; every crate's file readers use it.
//!
//! Nothing here takes a lock on a hot path: publishing a wait event is one relaxed store, and
//! bumping a counter is a relaxed load and store on a cache line only its owner writes.

pub mod backend;
pub mod gate;
pub mod ids;
pub mod input;
pub mod knob;
pub mod stats;
pub mod sync;
pub mod tranche;
pub mod wait_event;

pub use backend::{
    AUXILIARY_BACKEND_BASE, AttachError, AttachedBackend, BackendRegistry, BackendStatusArray,
    InvariantViolation, WaitEventScope, WaitSamplerError,
};
pub use gate::StartGate;
pub use ids::{BackendId, BlockNumber, LocalTransactionId, Oid, TransactionId, VirtualTransactionId};
pub use knob::{Knob, KnobError, KnobInfo, KnobList, Nested, Registry};
pub use stats::{Counters, LocalCounter, StatsBlock, StatsRegistry};
pub use tranche::TrancheId;
pub use wait_event::{WaitEvent, WaitEventType};
