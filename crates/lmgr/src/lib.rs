//! PostgreSQL's heavyweight lock manager (`src/backend/storage/lmgr/lock.c`, `proc.c`,
//! `deadlock.c`), rebuilt so that its 2011 scalability work can be measured again.
//!
//! * [`LockMode`] and [`CONFLICT_TABLE`]: the eight modes and their conflicts.
//! * [`LockTag`]: relation, tuple, transaction id, virtual transaction id, object, advisory.
//! * [`Lmgr`]: the shared table, split into N partitions (16 since 8.2), each a hash table
//!   under an `LwLock` of tranche `LockManager`; per-backend wait state; wait queues with
//!   PostgreSQL's ordering rules; the deadlock detector with soft-deadlock queue rearrangement;
//!   `get_lock_conflicts`, `blocking_backends` (`pg_blocking_pids`), `lock_status`
//!   (`pg_locks`), counters and [`Lmgr::check_invariants`].
//! * [`Backend`]: one thread's handle: local lock table with session and transaction owners,
//!   fast-path relation locks (9.2's 16 slots or 18's groups), VXID locks eager (9.1) or on
//!   demand (9.2), NOWAIT, `lock_timeout`, `deadlock_timeout`, transaction-id locks.
//! * [`FastPathArea`]: the fast-path slots and 1024 strong-lock counters on their own, so that
//!   the loom model can drive the transfer protocol directly.
//!
//! ```
//! use lockstack_common::{BackendId, Oid};
//! use lockstack_lmgr::{LockMode, Lmgr, LmgrConfig, LockError, LockOptions, LockTag};
//!
//! let lmgr = Lmgr::new(LmgrConfig::default()).unwrap();
//! let mut a = lmgr.attach(BackendId(0)).unwrap();
//! let mut b = lmgr.attach(BackendId(1)).unwrap();
//! a.start_transaction();
//! b.start_transaction();
//! a.lock_relation(Oid(16384), LockMode::AccessShare).unwrap(); // fast path
//! let t = LockTag::relation(lmgr.database(), Oid(16384));
//! let nowait = LockOptions { session: false, dont_wait: true };
//! assert!(matches!(b.lock(t, LockMode::AccessExclusive, nowait), Err(LockError::NotAvailable { .. })));
//! assert_eq!(b.get_lock_conflicts(t, LockMode::AccessExclusive), vec![a.vxid().unwrap()]);
//! a.end_transaction();
//! b.lock(t, LockMode::AccessExclusive, nowait).unwrap();
//! b.end_transaction();
//! lmgr.check_invariants().unwrap();
//! assert_eq!(lmgr.main_table_len(), 0);
//! ```

mod config;
mod deadlock;
mod error;
pub mod fastpath;
mod lmgr;
mod local;
mod mode;
mod stats;
mod sync;
mod table;
mod tag;
mod violation;

pub use config::{
    FP_MAX_GROUPS, FP_SLOTS_PER_GROUP, FastPath, KNOBS, LmgrConfig, LmgrConfigError, STRONG_LOCK_PARTITIONS,
    VxidLocks,
};
pub use error::LockError;
pub use fastpath::{FastPathArea, FastPathGrant};
pub use lmgr::{Backend, Lmgr, LockAcquireResult, LockOptions, LockStatusRow, XactLockMark};
pub use lockstack_common::{
    AttachError, BackendId, InvariantViolation, LocalTransactionId, Oid, TransactionId, VirtualTransactionId,
};
pub use mode::{CONFLICT_TABLE, LockMask, LockMode};
pub use stats::LmgrStats;
pub use tag::{LockMethod, LockTag, LockTagKind, TagBuildHasher, TagHasher};
