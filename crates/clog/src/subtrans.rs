//! pg_subtrans: the parent of every subtransaction xid, on an [`Slru`]
//! (`src/backend/access/transam/subtrans.c`, all releases since 8.0).
//!
//! Layout: one 4-byte parent xid per xid (0 = no parent: a top-level transaction or an xid
//! never assigned as a subtransaction), 2048 xids per 8 KiB page, little-endian. PostgreSQL
//! never reads it for xids older than `TransactionXmin` and zeroes it at startup; it is needed
//! only while a snapshot's subxid cache has overflowed.

use std::fmt;

use lockstack_common::{TrancheId, TransactionId};
use lockstack_lwlock::LwLockKind;

use crate::clog::xid_page_precedes;
use crate::slru::{Slru, SlruConfig, SlruError, SlruLocking, SlruStats, SlruStorage, TruncateOutcome};

/// Xids per pg_subtrans page (`SUBTRANS_XACTS_PER_PAGE` = 8192 / 4).
pub const SUBTRANS_XACTS_PER_PAGE: u32 = 8192 / 4;

/// Longest parent chain [`SubTrans::get_topmost_parent`] follows before reporting corruption
/// (PostgreSQL stops at `TransactionXmin` instead; nesting depth is bounded by the stack in
/// practice, far below this).
pub const MAX_SUBTRANS_CHAIN: u32 = 1 << 20;

/// The pg_subtrans page holding `xid` (`TransactionIdToPage`).
#[inline]
pub fn subtrans_page(xid: TransactionId) -> u32 {
    xid.0 / SUBTRANS_XACTS_PER_PAGE
}

/// Circular page order of pg_subtrans (`SubTransPagePrecedes`).
pub fn subtrans_page_precedes(a: u32, b: u32) -> bool {
    xid_page_precedes(a, b, SUBTRANS_XACTS_PER_PAGE)
}

#[inline]
fn entry_position(xid: TransactionId) -> (usize, u32) {
    let entry = xid.0 % SUBTRANS_XACTS_PER_PAGE;
    ((entry / 2) as usize, (entry % 2) * 32)
}

/// Errors of [`SubTrans`] operations.
#[derive(Debug)]
pub enum SubTransError {
    /// Reading or writing a page failed.
    Slru(SlruError),
    /// `set_parent` needs a normal `parent` that precedes `xid` (PostgreSQL asserts both).
    InvalidParent {
        /// The subtransaction.
        xid: TransactionId,
        /// The refused parent.
        parent: TransactionId,
    },
    /// `xid` already has a different parent (PostgreSQL asserts the entry was zero). Call
    /// [`SubTrans::extend`] at xid assignment so that pages reused after wraparound start zeroed.
    ParentAlreadySet {
        /// The subtransaction.
        xid: TransactionId,
        /// The parent already recorded.
        existing: TransactionId,
        /// The refused new parent.
        parent: TransactionId,
    },
    /// A stored parent does not precede its child, or the chain is longer than
    /// [`MAX_SUBTRANS_CHAIN`] (PostgreSQL: "pg_subtrans contains invalid entry").
    InvalidEntry {
        /// The child whose entry is bad.
        xid: TransactionId,
        /// The stored parent.
        parent: TransactionId,
    },
}

impl fmt::Display for SubTransError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubTransError::Slru(e) => write!(f, "{e}"),
            SubTransError::InvalidParent { xid, parent } => {
                write!(f, "invalid parent {parent} for subtransaction {xid}: it must be a normal, older xid")
            }
            SubTransError::ParentAlreadySet { xid, existing, parent } => {
                write!(f, "subtransaction {xid} already has parent {existing}, cannot set {parent}")
            }
            SubTransError::InvalidEntry { xid, parent } => {
                write!(f, "pg_subtrans contains invalid entry: xid {xid} points to parent xid {parent}")
            }
        }
    }
}

impl std::error::Error for SubTransError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubTransError::Slru(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SlruError> for SubTransError {
    fn from(e: SlruError) -> Self {
        SubTransError::Slru(e)
    }
}

/// Configuration of a [`SubTrans`].
#[derive(Clone, Debug)]
pub struct SubTransConfig {
    /// Page buffers (`NUM_SUBTRANS_BUFFERS`: 32 before 17, `subtransaction_buffers` in 17).
    /// Default 32.
    pub buffers: usize,
    /// Control lock (`SubtransSLRULock`, default) or banks.
    pub locking: SlruLocking,
    /// LWLock implementation. Default [`LwLockKind::Atomic`].
    pub lwlock_kind: LwLockKind,
    /// Memory (default) or `pg_subtrans` segment files.
    pub storage: SlruStorage,
}

/// pg_subtrans's knobs (`lockstack_common::knob`), over [`SubTransConfig`]; the defaults are
/// [`SubTransConfig::default`]'s.
pub const SUBTRANS_KNOBS: &[lockstack_common::Knob<SubTransConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::in_range;
    &[
        Knob {
            key: "subtrans.buffers",
            values: "2..=65536",
            doc: "pg_subtrans SLRU buffers (NUM_SUBTRANS_BUFFERS; subtransaction_buffers in 17), a multiple of 16 with banks",
            default: "32",
            apply: |c, v| {
                c.buffers = in_range(v, 2usize, 65536)?;
                Some(())
            },
        },
        Knob {
            key: "subtrans.locking",
            values: "control-lock|banks",
            doc: "pg_subtrans SLRU locking: one control lock (9.2) or banks (17)",
            default: "control-lock",
            apply: |c, v| {
                c.locking = crate::clog::slru_locking_value(v)?;
                Some(())
            },
        },
    ]
};

impl Default for SubTransConfig {
    fn default() -> Self {
        SubTransConfig {
            buffers: 32,
            locking: SlruLocking::ControlLock,
            lwlock_kind: LwLockKind::Atomic,
            storage: SlruStorage::Memory,
        }
    }
}

/// pg_subtrans on an [`Slru`] (see the module documentation).
#[derive(Debug)]
pub struct SubTrans {
    slru: Slru,
}

impl SubTrans {
    /// Builds pg_subtrans (`SUBTRANSShmemInit`): an [`Slru`] named `Subtrans` with tranches
    /// `SubtransSLRU` (control lock), `SubtransSLRUBank` (banks, registered on first use) and
    /// `SubtransBuffer` (I/O locks). Missing pages read as zeros (no parent), as PostgreSQL
    /// zeroes pg_subtrans at startup.
    ///
    /// # Errors
    /// [`SlruError::InvalidConfig`] for a bad buffer count, I/O errors creating the directory.
    pub fn new(config: SubTransConfig) -> Result<SubTrans, SubTransError> {
        let slru = Slru::new(SlruConfig {
            name: "Subtrans",
            buffers: config.buffers,
            locking: config.locking,
            lwlock_kind: config.lwlock_kind,
            storage: config.storage,
            control_tranche: TrancheId::SUBTRANS_SLRU,
            bank_tranche: TrancheId::register("SubtransSLRUBank"),
            buffer_tranche: TrancheId::SUBTRANS_BUFFER,
            lsn_groups_per_page: 0,
            page_precedes: subtrans_page_precedes,
            zero_missing: true,
            wal_flush: None,
        })?;
        Ok(SubTrans { slru })
    }

    /// The underlying SLRU.
    pub fn slru(&self) -> &Slru {
        &self.slru
    }

    /// The SLRU counters summed over all backends.
    pub fn stats(&self) -> SlruStats {
        self.slru.stats()
    }

    /// `SubTransSetParent`: records that subtransaction `xid` is a child of `parent`. Setting
    /// the same parent again is a no-op.
    ///
    /// # Errors
    /// [`SubTransError::InvalidParent`] unless `xid` and `parent` are normal and `parent`
    /// precedes `xid`; [`SubTransError::ParentAlreadySet`] if another parent is recorded; I/O
    /// errors.
    pub fn set_parent(&self, xid: TransactionId, parent: TransactionId) -> Result<(), SubTransError> {
        if !xid.is_normal() || !parent.is_normal() || !parent.precedes(xid) {
            return Err(SubTransError::InvalidParent { xid, parent });
        }
        let (w, shift) = entry_position(xid);
        self.slru.modify_page(subtrans_page(xid), true, |p| {
            let word = p.word(w);
            let existing = TransactionId((word >> shift) as u32);
            if existing == parent {
                return Ok(());
            }
            if existing.is_valid() {
                return Err(SubTransError::ParentAlreadySet { xid, existing, parent });
            }
            p.set_word(w, (word & !(0xFFFF_FFFFu64 << shift)) | (u64::from(parent.0) << shift));
            Ok(())
        })?
    }

    /// `SubTransGetParent`: the recorded parent of `xid`, or [`TransactionId::INVALID`] for a
    /// top-level (or unknown) xid and for the special xids. Takes the page's lock shared when it
    /// is resident.
    ///
    /// # Errors
    /// I/O errors.
    pub fn get_parent(&self, xid: TransactionId) -> Result<TransactionId, SubTransError> {
        if !xid.is_normal() {
            return Ok(TransactionId::INVALID);
        }
        let (w, shift) = entry_position(xid);
        Ok(self.slru.read_page(subtrans_page(xid), |p| TransactionId((p.word(w) >> shift) as u32))?)
    }

    /// `SubTransGetTopmostTransaction`: follows parents from `xid` up to the top-level
    /// transaction and returns it (`xid` itself if it has no parent).
    ///
    /// # Errors
    /// [`SubTransError::InvalidEntry`] if a parent does not precede its child or the chain is
    /// implausibly long; I/O errors.
    pub fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, SubTransError> {
        let mut cur = xid;
        for _ in 0..MAX_SUBTRANS_CHAIN {
            let parent = self.get_parent(cur)?;
            if !parent.is_valid() {
                return Ok(cur);
            }
            if !parent.precedes(cur) {
                return Err(SubTransError::InvalidEntry { xid: cur, parent });
            }
            cur = parent;
        }
        Err(SubTransError::InvalidEntry { xid: cur, parent: self.get_parent(cur)? })
    }

    /// `ExtendSUBTRANS`: when `newest_xid` is the first xid of its page (or the first normal
    /// xid after wraparound), zeroes that page. Call it at xid assignment.
    ///
    /// # Errors
    /// I/O errors writing an evicted page.
    pub fn extend(&self, newest_xid: TransactionId) -> Result<(), SubTransError> {
        if !newest_xid.0.is_multiple_of(SUBTRANS_XACTS_PER_PAGE) && newest_xid != TransactionId::FIRST_NORMAL
        {
            return Ok(());
        }
        Ok(self.slru.zero_page(subtrans_page(newest_xid))?)
    }

    /// `CheckPointSUBTRANS`: writes dirty pages (for reuse across restarts in tests; PostgreSQL
    /// needs it only to bound memory).
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> Result<(), SubTransError> {
        Ok(self.slru.flush()?)
    }

    /// `TruncateSUBTRANS`: drops the segments wholly before the one holding `oldest_xmin`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn truncate(&self, oldest_xmin: TransactionId) -> Result<TruncateOutcome, SubTransError> {
        Ok(self.slru.truncate(subtrans_page(oldest_xmin))?)
    }
}
