//! PostgreSQL's ProcArray rebuilt for experiments: per-backend `PgProc`s, the four layouts of
//! the fields every snapshot reads, xid assignment, `get_snapshot_data`, the three ways a
//! transaction can leave the ProcArray, and old_snapshot_threshold's time map.
//!
//! | piece | PostgreSQL | here |
//! |---|---|---|
//! | `PGPROC`, `PGXACT`, dense `xids[]` | `proc.h` 9.1 / 9.2-13 / 14+ | [`PgProc`], [`PgXact`], [`Layout`] |
//! | `GetNewTransactionId` | `varsup.c` | [`Backend::assign_xid`], [`Backend::assign_subxid`] |
//! | `ProcArrayAdd` / `ProcArrayRemove` | `procarray.c` | [`ProcArray::attach`], [`Backend::detach`] |
//! | `GetSnapshotData` | `procarray.c` | [`Backend::get_snapshot_data`] → [`Snapshot`] |
//! | `XidInMVCCSnapshot` | `snapmgr.c` | [`xid_in_mvcc_snapshot`] with a [`SubTransLookup`] |
//! | `ProcArrayEndTransaction`, `ProcArrayGroupClearXid` | `procarray.c` 9.2 / 9.6 | [`Backend::end_transaction`], [`EndXactStrategy`] |
//! | `RecentGlobalXmin`, `GetOldestXmin` | `procarray.c` ≤ 13 | [`Backend::recent_global_xmin`], [`GlobalXminMode`] |
//! | `MaintainOldSnapshotTimeMapping` | `snapmgr.c` 9.6-16 | [`OldSnapshotTimeMap`], [`TimeMapMaintenance`] |
//!
//! Every design is chosen at run time from a [`ProcArrayConfig`]; the snapshot loop is
//! monomorphised per layout and knob set, so the choice costs one `match` per snapshot.
//! [`workload::run_snapshot_workload`] is the `lockstack snapshot` experiment (seed 000).
//!
//! ```
//! use lockstack_common::{BackendId, TransactionId};
//! use lockstack_procarray::{ProcArray, ProcArrayConfig, SubTransLookup, xid_in_mvcc_snapshot};
//!
//! struct NoSubxacts;
//! impl SubTransLookup for NoSubxacts {
//!     type Error = std::convert::Infallible;
//!     fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error> {
//!         Ok(xid)
//!     }
//! }
//!
//! let pa = ProcArray::new(ProcArrayConfig::pg14(8)).unwrap();
//! let mut writer = pa.attach(BackendId(0)).unwrap();
//! let mut reader = pa.attach(BackendId(1)).unwrap();
//! let x = writer.assign_xid();
//! let snap = reader.get_snapshot_data().clone();
//! writer.end_transaction(); // commit
//! assert!(xid_in_mvcc_snapshot(x, &snap, &NoSubxacts).unwrap()); // still running for the old snapshot
//! assert!(!xid_in_mvcc_snapshot(x, reader.get_snapshot_data(), &NoSubxacts).unwrap());
//! ```

mod config;
mod old_snapshot;
mod proc;
mod procarray;
mod snapshot;
mod stats;
mod sync;
pub mod workload;

pub use config::{
    ConfigError, EndXactStrategy, GlobalXminMode, KNOBS, Layout, OldSnapshotThreshold, ProcArrayConfig,
    TimeMapMaintenance,
};
pub use lockstack_common::AttachError;
pub use old_snapshot::{
    Clock, OLD_SNAPSHOT_PADDING_ENTRIES, OldSnapshotTimeMap, SystemClock, USECS_PER_MINUTE, VirtualClock,
};
pub use proc::{
    Latch, PGPROC_MAX_CACHED_SUBXIDS, PROC_IN_ANALYZE, PROC_IN_LOGICAL_DECODING, PROC_IN_VACUUM,
    PROC_IS_AUTOVACUUM, PROC_VACUUM_FOR_WRAPAROUND, PgProc, PgSemaphore, PgXact, ShmQueue, SubXidState,
};
pub use procarray::{
    Backend, EndXactOutcome, EndXactRequest, EndXactRole, ProcArray, ProcArrayError, XidExtendError,
    XidExtendHook,
};
pub use snapshot::{Snapshot, SubTransLookup, xid_in_mvcc_snapshot};
pub use stats::{BackendProcStats, ProcArrayStats};
