//! Per-backend ProcArray counters (written only by their backend, summed on demand), in the
//! spirit of PostgreSQL's `XIDCACHE_DEBUG` counters in `procarray.c`.

lockstack_common::counters! {
    /// Sums of [`BackendProcStats`] over every backend of one ProcArray (counts of events),
    /// read by name through [`lockstack_common::Counters`]: the fields, then the derived
    /// `end_with_xid` and `get_snapshot_data`.
    #[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
    pub struct ProcArrayStats {
        /// Snapshots computed by scanning the ProcArray.
        pub snapshots_taken: u64,
        /// `Dense` snapshots reused because no xid-bearing transaction had ended.
        pub snapshots_reused: u64,
        /// Top-level xids assigned.
        pub xids_assigned: u64,
        /// Subtransaction xids assigned.
        pub subxids_assigned: u64,
        /// Subtransaction xids that did not fit in the 64-entry cache (overflow flag set).
        pub subxid_overflows: u64,
        /// Transactions without an xid ended (no ProcArrayLock).
        pub end_readonly: u64,
        /// `Exclusive` ends (own exclusive acquisition).
        pub end_exclusive: u64,
        /// `FlexLock` ends that found the lock free.
        pub end_flex_direct: u64,
        /// `FlexLock` ends performed by a releasing holder.
        pub end_flex_queued: u64,
        /// `GroupClear` ends that got the lock with the conditional acquire.
        pub end_group_alone: u64,
        /// `GroupClear` ends whose caller led a group.
        pub end_group_leader: u64,
        /// Requests cleared by led groups, the leader's own included.
        pub end_group_led_members: u64,
        /// `GroupClear` ends performed by another backend's group.
        pub end_group_follower: u64,
        /// Subtransaction aborts that removed xids from the cache (exclusive lock).
        pub subxact_aborts: u64,
        /// Times `MaintainOldSnapshotTimeMapping` took `OldSnapshotTimeMapLock` exclusive.
        pub time_map_exclusive: u64,
        /// Full scans computing the global xmin horizon outside a snapshot (lazy mode).
        pub horizon_scans: u64,
    }
    per_backend: #[derive(Debug, Default)] pub struct BackendProcStats(pub);
    derived: { end_with_xid, get_snapshot_data }
}

impl ProcArrayStats {
    /// Ends of transactions that had an xid, over all strategies and roles.
    pub fn end_with_xid(&self) -> u64 {
        self.end_exclusive
            + self.end_flex_direct
            + self.end_flex_queued
            + self.end_group_alone
            + self.end_group_leader
            + self.end_group_follower
    }

    /// `GetSnapshotData` calls: snapshots computed plus snapshots reused (PostgreSQL 14+ reuses
    /// inside `GetSnapshotData`, after taking ProcArrayLock, so both are calls).
    pub fn get_snapshot_data(&self) -> u64 {
        self.snapshots_taken + self.snapshots_reused
    }
}
