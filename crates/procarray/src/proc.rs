//! `PgProc`, `PgXact` and the small structs a `PgProc` is made of.
//!
//! `PgProc` mirrors the per-backend `PGPROC` of `src/include/storage/proc.h` (9.1-9.2, with the
//! 9.6 group-clearing and 14 dense-array fields): most of its ~900 bytes are fields that other
//! subsystems use (semaphore, latch, lock-wait state, the 16 per-partition lock lists, the
//! fast-path lock slots, the 64-entry subxid cache). This crate uses only the transaction
//! fields; the others are there so that the struct's size and cache footprint are PostgreSQL's,
//! which is the whole point of the 9.1 vs 9.2 comparison (seed 000: "the PGPROC structure is
//! quite heavy and no more than one structure may fit in a single cache line").
//!
//! Fields that take part in a concurrent protocol use [`crate::sync`] atomics (loom-checked
//! under `--cfg loom`); the footprint-only fields use `std` atomics.

use crate::sync::plain::{AtomicBool as StdBool, AtomicI32, AtomicU32 as StdU32, AtomicU64 as StdU64};

use crate::sync::{AtomicBool, AtomicU8, AtomicU32};

/// `PGPROC_MAX_CACHED_SUBXIDS`: subtransaction xids a backend publishes in its cache before it
/// sets the overflow flag (64 in every release 8.0-18, "a guessed-at value").
pub const PGPROC_MAX_CACHED_SUBXIDS: usize = 64;

/// `PROC_IS_AUTOVACUUM` vacuum/status flag (0x01).
pub const PROC_IS_AUTOVACUUM: u8 = 0x01;
/// `PROC_IN_VACUUM` (0x02): lazy VACUUM's xmin is ignored by snapshots and the horizon.
pub const PROC_IN_VACUUM: u8 = 0x02;
/// `PROC_IN_ANALYZE` (0x04, 9.2-13).
pub const PROC_IN_ANALYZE: u8 = 0x04;
/// `PROC_VACUUM_FOR_WRAPAROUND` (0x08).
pub const PROC_VACUUM_FOR_WRAPAROUND: u8 = 0x08;
/// `PROC_IN_LOGICAL_DECODING` (0x10, 9.4+): xmin handled through the replication slot.
pub const PROC_IN_LOGICAL_DECODING: u8 = 0x10;

/// Every flag above.
pub(crate) const PROC_KNOWN_FLAGS: u8 = PROC_IS_AUTOVACUUM
    | PROC_IN_VACUUM
    | PROC_IN_ANALYZE
    | PROC_VACUUM_FOR_WRAPAROUND
    | PROC_IN_LOGICAL_DECODING;

/// Flags whose holder is skipped by `get_snapshot_data` (9.4+: vacuum and logical decoding).
pub(crate) const PROC_SNAPSHOT_SKIP: u8 = PROC_IN_VACUUM | PROC_IN_LOGICAL_DECODING;

/// A shared-memory doubly linked list link (`SHM_QUEUE`: two 8-byte offsets), 16 bytes.
#[derive(Debug, Default)]
pub struct ShmQueue {
    /// Previous element (an offset in PostgreSQL; unused here).
    pub prev: StdU64,
    /// Next element.
    pub next: StdU64,
}

/// Stand-in for `PGSemaphoreData` (a POSIX `sem_t`: 32 bytes on Linux x86-64). lockstack
/// backends park through the sync facade (`lockstack_common::sync::park`) instead; the struct only keeps `PgProc`'s size.
#[derive(Debug, Default)]
pub struct PgSemaphore {
    /// The count a `sem_post` would raise.
    pub count: StdU32,
    /// Threads blocked in `sem_wait`.
    pub waiters: StdU32,
    /// The rest of `sem_t`.
    pub opaque: [StdU64; 3],
}

/// `Latch` (9.1+ `src/include/storage/latch.h`): is_set, is_shared, owner_pid, 12 bytes.
#[derive(Debug, Default)]
pub struct Latch {
    /// Set by `SetLatch`, cleared by `ResetLatch`.
    pub is_set: StdBool,
    /// True for latches in shared memory.
    pub is_shared: StdBool,
    /// Process that owns (waits on) the latch.
    pub owner_pid: AtomicI32,
    /// 14+: true while the owner might be sleeping.
    pub maybe_sleeping: StdBool,
}

/// One backend's shared state: PostgreSQL's `PGPROC`, in 9.1 field order (hot transaction
/// fields near the start, subxid cache at the end) with the later releases' additions.
///
/// Size: at least 900 bytes on 64-bit targets (`size_of::<PgProc>()`, checked by a test), so
/// consecutive `PgProc`s never share a 64-byte line and the 9.1 snapshot loop touches two lines
/// per backend (the xid/xmin line and the subxid-cache header).
///
/// Which copy of the hot fields is authoritative depends on [`crate::Layout`]: `Pgproc` uses
/// `xid`, `xmin`, `vacuum_flags`, `subxid_overflowed`, `subxid_count` here; `Pgxact` and
/// `PgxactPadded` use a [`PgXact`] and only `subxids` here; `Dense` mirrors `xid` and the subxid
/// state here and in the dense arrays, and keeps `xmin` only here (as 14 does).
#[repr(C)]
#[derive(Debug)]
pub struct PgProc {
    /// `links`: position in a free list or lock wait queue.
    pub links: ShmQueue,
    /// `sem`: what the backend sleeps on.
    pub sem: PgSemaphore,
    /// `waitStatus`: result of the last heavyweight-lock wait.
    pub wait_status: AtomicI32,
    /// `procLatch` (9.1+).
    pub proc_latch: Latch,
    /// `lxid`: local transaction id of the current top-level transaction.
    pub lxid: StdU32,
    /// `xid` (hot in 9.1; 14 mirror): the top-level xid, 0 if none.
    pub xid: AtomicU32,
    /// `xmin` (hot in 9.1; the only copy in 14): oldest xid this backend's snapshots may see as
    /// running, 0 if none.
    pub xmin: AtomicU32,
    /// `pid` (0 for a prepared-transaction dummy).
    pub pid: AtomicI32,
    /// `pgprocno`: this entry's index in the `PgProc` array (9.2+).
    pub pgprocno: u32,
    /// `backendId`.
    pub backend_id: u32,
    /// `databaseId`.
    pub database_id: StdU32,
    /// `roleId`.
    pub role_id: StdU32,
    /// `vacuumFlags` (hot in 9.1), `statusFlags` mirror in 14.
    pub vacuum_flags: AtomicU8,
    /// `inCommit` (9.1) / `delayChkpt` (9.2+).
    pub delay_chkpt: StdBool,
    /// `recoveryConflictPending`.
    pub recovery_conflict_pending: StdBool,
    /// `lwWaiting`: sleeping on an LWLock.
    pub lw_waiting: StdBool,
    /// `lwWaitMode` (`lwExclusive` before 9.4).
    pub lw_wait_mode: StdU32,
    /// `lwWaitLink`: next waiter in the LWLock's queue.
    pub lw_wait_link: StdU64,
    /// `waitLock`: heavyweight lock being waited for.
    pub wait_lock: StdU64,
    /// `waitProcLock`: the PROCLOCK of that wait.
    pub wait_proc_lock: StdU64,
    /// `waitLockMode`.
    pub wait_lock_mode: AtomicI32,
    /// `heldLocks`: bitmask of modes already held on `wait_lock`.
    pub held_locks: StdU32,
    /// `waitLSN`: sync-rep commit LSN waited for.
    pub wait_lsn: StdU64,
    /// `syncRepState`.
    pub sync_rep_state: AtomicI32,
    /// `syncRepLinks`.
    pub sync_rep_links: ShmQueue,
    /// `myProcLocks[NUM_LOCK_PARTITIONS]`: the PROCLOCKs held, one list per lock partition.
    pub my_proc_locks: [ShmQueue; 16],
    /// `backendLock` / `fpInfoLock` (9.2+): a stand-in LWLock word protecting the fast-path
    /// fields below (lmgr owns the real one).
    pub fp_info_lock: [StdU64; 4],
    /// `fpLockBits`: 3 bits per fast-path slot.
    pub fp_lock_bits: StdU64,
    /// `fpRelId[FP_LOCK_SLOTS_PER_BACKEND]`: relations locked through the fast path.
    pub fp_rel_id: [StdU32; 16],
    /// `fpVXIDLock`: the backend holds its VXID lock in the fast path.
    pub fp_vxid_lock: StdBool,
    /// `fpLocalTransactionId`.
    pub fp_local_transaction_id: StdU32,
    /// `wait_event_info` (9.6+).
    pub wait_event_info: StdU32,
    /// `waitStart` (14+): when the current heavyweight-lock wait began, microseconds.
    pub wait_start: StdU64,
    /// `tempNamespaceId` (11+).
    pub temp_namespace_id: StdU32,
    /// `isBackgroundWorker` (9.4+).
    pub is_background_worker: StdBool,
    /// `procArrayGroupMember` (9.6+; the lwlock crate's combiner keeps its own copy).
    pub proc_array_group_member: StdBool,
    /// `procArrayGroupNext`.
    pub proc_array_group_next: StdU32,
    /// `procArrayGroupMemberXid`.
    pub proc_array_group_member_xid: StdU32,
    /// `clogGroupMember` (11+).
    pub clog_group_member: StdBool,
    /// `clogGroupNext`.
    pub clog_group_next: StdU32,
    /// `clogGroupMemberXid`.
    pub clog_group_member_xid: StdU32,
    /// `clogGroupMemberXidStatus`.
    pub clog_group_member_xid_status: StdU32,
    /// `clogGroupMemberPage`.
    pub clog_group_member_page: StdU64,
    /// `clogGroupMemberLsn`.
    pub clog_group_member_lsn: StdU64,
    /// `lockGroupLeader` (9.6+, parallel query).
    pub lock_group_leader: StdU64,
    /// `lockGroupMembers`.
    pub lock_group_members: ShmQueue,
    /// `lockGroupLink`.
    pub lock_group_link: ShmQueue,
    /// `pgxactoff` (14+): this backend's index in the dense arrays while it is a member.
    pub pgxactoff: AtomicU32,
    /// `subxidStatus.overflowed` (9.1 `subxids.overflowed`; 14 mirror).
    pub subxid_overflowed: AtomicBool,
    /// `subxidStatus.count` (9.1 `subxids.nxids`; 14 mirror). Written with release ordering
    /// after the xid it counts.
    pub subxid_count: AtomicU8,
    /// `subxids.xids[PGPROC_MAX_CACHED_SUBXIDS]`: the cached subtransaction xids (every layout
    /// reads them from here).
    pub subxids: [AtomicU32; PGPROC_MAX_CACHED_SUBXIDS],
}

impl PgProc {
    /// A free `PgProc` for slot `pgprocno` (no transaction, no xmin, empty caches).
    pub fn new(pgprocno: u32) -> PgProc {
        PgProc {
            links: ShmQueue::default(),
            sem: PgSemaphore::default(),
            wait_status: AtomicI32::new(0),
            proc_latch: Latch::default(),
            lxid: StdU32::new(0),
            xid: AtomicU32::new(0),
            xmin: AtomicU32::new(0),
            pid: AtomicI32::new(0),
            pgprocno,
            backend_id: pgprocno,
            database_id: StdU32::new(0),
            role_id: StdU32::new(0),
            vacuum_flags: AtomicU8::new(0),
            delay_chkpt: StdBool::new(false),
            recovery_conflict_pending: StdBool::new(false),
            lw_waiting: StdBool::new(false),
            lw_wait_mode: StdU32::new(0),
            lw_wait_link: StdU64::new(0),
            wait_lock: StdU64::new(0),
            wait_proc_lock: StdU64::new(0),
            wait_lock_mode: AtomicI32::new(0),
            held_locks: StdU32::new(0),
            wait_lsn: StdU64::new(0),
            sync_rep_state: AtomicI32::new(0),
            sync_rep_links: ShmQueue::default(),
            my_proc_locks: Default::default(),
            fp_info_lock: Default::default(),
            fp_lock_bits: StdU64::new(0),
            fp_rel_id: Default::default(),
            fp_vxid_lock: StdBool::new(false),
            fp_local_transaction_id: StdU32::new(0),
            wait_event_info: StdU32::new(0),
            wait_start: StdU64::new(0),
            temp_namespace_id: StdU32::new(0),
            is_background_worker: StdBool::new(false),
            proc_array_group_member: StdBool::new(false),
            proc_array_group_next: StdU32::new(u32::MAX),
            proc_array_group_member_xid: StdU32::new(0),
            clog_group_member: StdBool::new(false),
            clog_group_next: StdU32::new(u32::MAX),
            clog_group_member_xid: StdU32::new(0),
            clog_group_member_xid_status: StdU32::new(0),
            clog_group_member_page: StdU64::new(0),
            clog_group_member_lsn: StdU64::new(0),
            lock_group_leader: StdU64::new(0),
            lock_group_members: ShmQueue::default(),
            lock_group_link: ShmQueue::default(),
            pgxactoff: AtomicU32::new(u32::MAX),
            subxid_overflowed: AtomicBool::new(false),
            subxid_count: AtomicU8::new(0),
            subxids: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }
}

/// The hot transaction fields of one backend, split out of `PgProc` (9.2-13 `PGXACT`, seed
/// 000): 12 bytes, so five or more share a 64-byte line.
///
/// `PgXact`s live in an array indexed by the same `pgprocno` as the `PgProc` array.
#[repr(C)]
#[derive(Debug)]
pub struct PgXact {
    /// `xid`: the top-level xid, 0 if none.
    pub xid: AtomicU32,
    /// `xmin`: oldest xid this backend's snapshots may see as running, 0 if none.
    pub xmin: AtomicU32,
    /// `vacuumFlags` (`PROC_IN_VACUUM` & co.).
    pub vacuum_flags: AtomicU8,
    /// `overflowed`: the subxid cache overflowed.
    pub overflowed: AtomicBool,
    /// `delayChkpt`.
    pub delay_chkpt: AtomicBool,
    /// `nxids`: cached subxids (0..=64). Written with release ordering after the xid it counts.
    pub nxids: AtomicU8,
}

impl PgXact {
    /// An empty entry.
    pub fn new() -> PgXact {
        PgXact {
            xid: AtomicU32::new(0),
            xmin: AtomicU32::new(0),
            vacuum_flags: AtomicU8::new(0),
            overflowed: AtomicBool::new(false),
            delay_chkpt: AtomicBool::new(false),
            nxids: AtomicU8::new(0),
        }
    }
}

impl Default for PgXact {
    fn default() -> Self {
        Self::new()
    }
}

/// One entry of 14's dense `subxidStates[]` array: the subxid count and overflow flag of the
/// backend at that ProcArray position (2 bytes).
#[derive(Debug)]
pub struct SubXidState {
    /// Cached subxids (0..=64), written with release ordering.
    pub count: AtomicU8,
    /// The backend's subxid cache overflowed.
    pub overflowed: AtomicBool,
}

impl SubXidState {
    /// An empty entry.
    pub fn new() -> SubXidState {
        SubXidState { count: AtomicU8::new(0), overflowed: AtomicBool::new(false) }
    }
}

impl Default for SubXidState {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn pgproc_is_fat_and_pgxact_is_thin() {
        let s = size_of::<PgProc>();
        assert!(s >= 900, "PgProc is {s} bytes, PostgreSQL 9.2's is ~900");
        assert_eq!(size_of::<PgXact>(), 12);
        assert_eq!(size_of::<SubXidState>(), 2);
        // 9.1 layout: xid/xmin near the start, subxid cache header far away.
        let xid = offset_of!(PgProc, xid);
        let count = offset_of!(PgProc, subxid_count);
        assert!(xid < 128, "xid at {xid}");
        assert!(count - xid > 128, "subxid header must be on another line than xid");
    }
}
