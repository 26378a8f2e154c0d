//! Per-backend ProcArray counters (written only by their backend, summed on demand), in the
//! spirit of PostgreSQL's `XIDCACHE_DEBUG` counters in `procarray.c`.

use lockstack_common::LocalCounter;

/// One backend's counters. Every field counts events (no units other than "times").
#[derive(Debug, Default)]
pub struct BackendProcStats {
    /// Snapshots computed by scanning the ProcArray.
    pub snapshots_taken: LocalCounter,
    /// `Dense` snapshots reused because no xid-bearing transaction had ended.
    pub snapshots_reused: LocalCounter,
    /// Top-level xids assigned.
    pub xids_assigned: LocalCounter,
    /// Subtransaction xids assigned.
    pub subxids_assigned: LocalCounter,
    /// Subtransaction xids that did not fit in the 64-entry cache (overflow flag set).
    pub subxid_overflows: LocalCounter,
    /// Transactions without an xid ended (no ProcArrayLock).
    pub end_readonly: LocalCounter,
    /// `Exclusive` ends (own exclusive acquisition).
    pub end_exclusive: LocalCounter,
    /// `FlexLock` ends that found the lock free.
    pub end_flex_direct: LocalCounter,
    /// `FlexLock` ends performed by a releasing holder.
    pub end_flex_queued: LocalCounter,
    /// `GroupClear` ends that got the lock with the conditional acquire.
    pub end_group_alone: LocalCounter,
    /// `GroupClear` ends whose caller led a group.
    pub end_group_leader: LocalCounter,
    /// Requests cleared by led groups, the leader's own included.
    pub end_group_led_members: LocalCounter,
    /// `GroupClear` ends performed by another backend's group.
    pub end_group_follower: LocalCounter,
    /// Subtransaction aborts that removed xids from the cache (exclusive lock).
    pub subxact_aborts: LocalCounter,
    /// Times `MaintainOldSnapshotTimeMapping` took `OldSnapshotTimeMapLock` exclusive.
    pub time_map_exclusive: LocalCounter,
    /// Full scans computing the global xmin horizon outside a snapshot (lazy mode).
    pub horizon_scans: LocalCounter,
}

/// Sums of [`BackendProcStats`] over every backend of one ProcArray (counts of events).
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

impl ProcArrayStats {
    pub(crate) fn add(&mut self, b: &BackendProcStats) {
        self.snapshots_taken += b.snapshots_taken.get();
        self.snapshots_reused += b.snapshots_reused.get();
        self.xids_assigned += b.xids_assigned.get();
        self.subxids_assigned += b.subxids_assigned.get();
        self.subxid_overflows += b.subxid_overflows.get();
        self.end_readonly += b.end_readonly.get();
        self.end_exclusive += b.end_exclusive.get();
        self.end_flex_direct += b.end_flex_direct.get();
        self.end_flex_queued += b.end_flex_queued.get();
        self.end_group_alone += b.end_group_alone.get();
        self.end_group_leader += b.end_group_leader.get();
        self.end_group_led_members += b.end_group_led_members.get();
        self.end_group_follower += b.end_group_follower.get();
        self.subxact_aborts += b.subxact_aborts.get();
        self.time_map_exclusive += b.time_map_exclusive.get();
        self.horizon_scans += b.horizon_scans.get();
    }

    /// Ends of transactions that had an xid, over all strategies and roles.
    pub fn end_with_xid(&self) -> u64 {
        self.end_exclusive
            + self.end_flex_direct
            + self.end_flex_queued
            + self.end_group_alone
            + self.end_group_leader
            + self.end_group_follower
    }

    /// `self - earlier`, field by field (saturating), for measuring one phase.
    pub fn since(&self, e: &ProcArrayStats) -> ProcArrayStats {
        ProcArrayStats {
            snapshots_taken: self.snapshots_taken.saturating_sub(e.snapshots_taken),
            snapshots_reused: self.snapshots_reused.saturating_sub(e.snapshots_reused),
            xids_assigned: self.xids_assigned.saturating_sub(e.xids_assigned),
            subxids_assigned: self.subxids_assigned.saturating_sub(e.subxids_assigned),
            subxid_overflows: self.subxid_overflows.saturating_sub(e.subxid_overflows),
            end_readonly: self.end_readonly.saturating_sub(e.end_readonly),
            end_exclusive: self.end_exclusive.saturating_sub(e.end_exclusive),
            end_flex_direct: self.end_flex_direct.saturating_sub(e.end_flex_direct),
            end_flex_queued: self.end_flex_queued.saturating_sub(e.end_flex_queued),
            end_group_alone: self.end_group_alone.saturating_sub(e.end_group_alone),
            end_group_leader: self.end_group_leader.saturating_sub(e.end_group_leader),
            end_group_led_members: self.end_group_led_members.saturating_sub(e.end_group_led_members),
            end_group_follower: self.end_group_follower.saturating_sub(e.end_group_follower),
            subxact_aborts: self.subxact_aborts.saturating_sub(e.subxact_aborts),
            time_map_exclusive: self.time_map_exclusive.saturating_sub(e.time_map_exclusive),
            horizon_scans: self.horizon_scans.saturating_sub(e.horizon_scans),
        }
    }
}
