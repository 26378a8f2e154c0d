//! The fast path seen from the lock manager: whether a request may use a backend's fast-path
//! slots (`EligibleForRelationFastPath`, `ConflictsWithRelationFastPath`) and the attempt itself
//! (`FastPathGrantRelationLock`); the slots are in `crate::fastpath`.
//!
//! Locks touched: the backend's own `fpInfoLock` (through `FastPathArea`) and a read of the
//! strong-lock counter of the tag's partition; no partition lock.

use super::{Backend, Lmgr};
use crate::config::FastPath;
use crate::fastpath::FastPathGrant;
use crate::mode::LockMode;
use crate::tag::{LockTag, LockTagKind};

impl Lmgr {
    pub(super) fn fast_path_enabled(&self) -> bool {
        self.cfg.fast_path != FastPath::Off
    }
    /// `EligibleForRelationFastPath`.
    #[inline]
    pub(super) fn eligible_for_fast_path(&self, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path_enabled()
            && tag.kind == LockTagKind::Relation
            && tag.field1 == self.cfg.database.0
            && mode.is_weak()
    }
    /// `ConflictsWithRelationFastPath`.
    #[inline]
    pub(super) fn conflicts_with_fast_path(&self, tag: &LockTag, mode: LockMode) -> bool {
        self.fast_path_enabled() && tag.kind == LockTagKind::Relation && tag.field1 != 0 && mode.is_strong()
    }
}

impl Backend {
    /// The fast-path attempt of `LockAcquireExtended` for an eligible request: true if granted
    /// in a slot; false (a spill, counted) if the group is full or a strong lock is pending.
    #[inline]
    pub(super) fn try_fast_path(&mut self, relid: u32, mode: LockMode, hash: u32) -> bool {
        let lmgr = &*self.lmgr;
        let g = lmgr.fp.group_of(relid);
        if self.fp_used[g] == u16::MAX {
            self.counters.spills_full.incr();
            return false;
        }
        match lmgr.fp.try_grant(self.id, relid, mode, hash) {
            FastPathGrant::Granted { used } => {
                self.fp_used[g] = used;
                self.counters.fast_path_grants.incr();
                true
            }
            FastPathGrant::StrongLockHeld => {
                self.counters.spills_strong.incr();
                false
            }
            FastPathGrant::SlotsFull => {
                self.fp_used[g] = u16::MAX;
                self.counters.spills_full.incr();
                false
            }
        }
    }
}
