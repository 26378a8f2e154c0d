//! The commit log (CLOG, `pg_xact`, `pg_clog` before 10): two status bits per transaction id
//! on an [`Slru`] (`src/backend/access/transam/clog.c`).
//!
//! Layout (all releases): 4 xids per byte, 32768 xids per 8 KiB page, 32 pages per segment
//! file. Xid `x` lives on page `x / 32768`, in byte `(x % 32768) / 4` at bit `2 * (x % 4)`.
//! Each buffer also keeps, in memory only, one LSN per group of 32 xids: the highest commit
//! LSN of an asynchronous commit in that group (`CLOG_XACTS_PER_LSN_GROUP`).

use crate::sync::Ordering;
use std::fmt;

use lockstack_common::{BackendId, TrancheId, TransactionId, WaitEvent};
use lockstack_lwlock::{GroupCombiner, GroupRole, LwLock, LwLockImpl, LwLockKind, LwLockMode};

use crate::slru::{
    PageMut, Slru, SlruConfig, SlruError, SlruLocking, SlruStats, SlruStorage, TruncateOutcome, WalFlushHook,
};
use crate::sync::AtomicU32;

/// Status bits per xid (`CLOG_BITS_PER_XACT`).
pub const CLOG_BITS_PER_XACT: u32 = 2;
/// Xids per byte (`CLOG_XACTS_PER_BYTE`).
pub const CLOG_XACTS_PER_BYTE: u32 = 4;
/// Xids per 8 KiB page (`CLOG_XACTS_PER_PAGE` = 32768).
pub const CLOG_XACTS_PER_PAGE: u32 = 8192 * CLOG_XACTS_PER_BYTE;
/// Xids sharing one group LSN (`CLOG_XACTS_PER_LSN_GROUP`).
pub const CLOG_XACTS_PER_LSN_GROUP: u32 = 32;
/// Group LSNs per page (`CLOG_LSNS_PER_PAGE` = 1024).
pub const CLOG_LSNS_PER_PAGE: usize = (CLOG_XACTS_PER_PAGE / CLOG_XACTS_PER_LSN_GROUP) as usize;
/// Most subxids a group-update request may carry (`THRESHOLD_SUBTRANS_CLOG_OPT`, PostgreSQL 11).
pub const THRESHOLD_SUBTRANS_CLOG_OPT: usize = 5;

/// Upper bound of [`ClogConfig::max_backends`].
const MAX_GROUP_MEMBERS: usize = 1 << 20;

/// The CLOG page holding `xid` (`TransactionIdToPage`).
#[inline]
pub fn clog_page(xid: TransactionId) -> u32 {
    xid.0 / CLOG_XACTS_PER_PAGE
}

/// The circular page order of the CLOG (`CLOGPagePrecedes`, PostgreSQL 14+ form): page `a` is
/// older than page `b` when every xid of `a` precedes both the first and the last xid of `b`'s
/// page in modulo-2^32 order.
pub fn clog_page_precedes(a: u32, b: u32) -> bool {
    xid_page_precedes(a, b, CLOG_XACTS_PER_PAGE)
}

/// Circular order of pages holding `per_page` xids each, via the xids they hold (shared by CLOG
/// and pg_subtrans).
pub(crate) fn xid_page_precedes(a: u32, b: u32, per_page: u32) -> bool {
    // Offset by FirstNormalTransactionId + 1 so that no compared xid is special.
    let first_a = TransactionId(a.wrapping_mul(per_page).wrapping_add(4));
    let first_b = TransactionId(b.wrapping_mul(per_page).wrapping_add(4));
    let last_b = TransactionId(first_b.0.wrapping_add(per_page - 1));
    normal(first_a).precedes(normal(first_b)) && normal(first_a).precedes(normal(last_b))
}

/// Maps the three special values onto normal xids, so `precedes` is always circular.
fn normal(x: TransactionId) -> TransactionId {
    if x.is_normal() { x } else { TransactionId(x.0.wrapping_add(3)) }
}

/// A transaction's status in the CLOG (`XidStatus`, `clog.h`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum XidStatus {
    /// `TRANSACTION_STATUS_IN_PROGRESS` (00): running, or crashed without an abort record.
    InProgress = 0,
    /// `TRANSACTION_STATUS_COMMITTED` (01).
    Committed = 1,
    /// `TRANSACTION_STATUS_ABORTED` (10).
    Aborted = 2,
    /// `TRANSACTION_STATUS_SUB_COMMITTED` (11): a subtransaction whose parent's commit is being
    /// recorded; readers must look up the parent in pg_subtrans.
    SubCommitted = 3,
}

impl XidStatus {
    /// The status encoded by the two low bits of `bits`.
    #[inline]
    pub fn from_bits(bits: u64) -> XidStatus {
        match bits & 3 {
            0 => XidStatus::InProgress,
            1 => XidStatus::Committed,
            2 => XidStatus::Aborted,
            _ => XidStatus::SubCommitted,
        }
    }

    /// PostgreSQL's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            XidStatus::InProgress => "in progress",
            XidStatus::Committed => "committed",
            XidStatus::Aborted => "aborted",
            XidStatus::SubCommitted => "sub-committed",
        }
    }
}

impl fmt::Display for XidStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Errors of [`Clog`] operations.
#[derive(Debug)]
pub enum ClogError {
    /// Reading or writing a page failed.
    Slru(SlruError),
    /// [`Clog::get_status`] could not read the page holding `xid`'s status: PostgreSQL's
    /// `SlruReportIOError` ("could not access status of transaction"), e.g. a missing or
    /// short `pg_xact` segment when missing pages are not read as zeros.
    Access {
        /// The transaction whose status was asked for.
        xid: TransactionId,
        /// Why the page could not be read.
        source: SlruError,
    },
    /// `set_tree_status` accepts only [`XidStatus::Committed`] and [`XidStatus::Aborted`].
    InvalidStatus {
        /// The top-level xid of the request.
        xid: TransactionId,
        /// The refused status.
        status: XidStatus,
    },
    /// The change would move a status backwards (e.g. committed to aborted); PostgreSQL asserts
    /// against it in `TransactionIdSetStatusBit`. Nothing on that xid's page was changed.
    InvalidTransition {
        /// The xid whose status was refused.
        xid: TransactionId,
        /// Its current status.
        from: XidStatus,
        /// The requested status.
        to: XidStatus,
    },
    /// [`Clog::get_status`] was asked about an xid older than the oldest one the CLOG still
    /// keeps (`oldestClogXid`, advanced by [`Clog::truncate`]): its status is gone. PostgreSQL's
    /// `TransactionIdInRecentPast` reports such an xid as "no longer visible".
    Truncated {
        /// The transaction whose status was asked for.
        xid: TransactionId,
        /// The oldest xid whose status the CLOG keeps.
        oldest: TransactionId,
    },
    /// A group update ran a request other than exactly once: a broken group protocol (never
    /// expected; reported rather than hidden).
    GroupProtocol {
        /// The request's xid.
        xid: TransactionId,
        /// How many times it ran.
        applications: u32,
    },
}

impl fmt::Display for ClogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClogError::Slru(e) => write!(f, "{e}"),
            ClogError::Access { xid, source } => {
                write!(f, "could not access status of transaction {xid}: {source}")
            }
            ClogError::InvalidStatus { xid, status } => {
                write!(f, "cannot set transaction {xid} to {status}: only committed or aborted")
            }
            ClogError::InvalidTransition { xid, from, to } => {
                write!(f, "transaction {xid} is {from}, cannot become {to}")
            }
            ClogError::Truncated { xid, oldest } => write!(
                f,
                "could not access status of transaction {xid}: it precedes the oldest transaction {oldest} \
                 whose status is kept (the commit log was truncated)"
            ),
            ClogError::GroupProtocol { xid, applications } => {
                write!(f, "group CLOG update ran transaction {xid}'s request {applications} times")
            }
        }
    }
}

impl std::error::Error for ClogError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClogError::Slru(e) | ClogError::Access { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

impl From<SlruError> for ClogError {
    fn from(e: SlruError) -> Self {
        ClogError::Slru(e)
    }
}

/// Configuration of a [`Clog`].
#[derive(Clone)]
pub struct ClogConfig {
    /// Page buffers (`CLOGShmemBuffers`: 8 up to 9.1, up to 32 in 9.2, up to 128 in 9.6-16,
    /// `transaction_buffers` in 17). Default 32.
    pub buffers: usize,
    /// One `XactSLRU` control lock (default) or 17's banks of 16 buffers.
    pub locking: SlruLocking,
    /// Group status update (PostgreSQL 11+) on or off. Default on.
    pub group_update: bool,
    /// Backends that may take part in group updates (`BackendId`s `0..max_backends`). Default
    /// 128.
    pub max_backends: usize,
    /// LWLock implementation. Default [`LwLockKind::Atomic`].
    pub lwlock_kind: LwLockKind,
    /// Memory (default) or `pg_xact` segment files.
    pub storage: SlruStorage,
    /// See [`SlruConfig::zero_missing`]. Default true.
    pub zero_missing: bool,
    /// WAL flush before writing a page (see [`WalFlushHook`]). Default none.
    pub wal_flush: Option<WalFlushHook>,
}

/// How an SLRU knob (`clog.locking`, `subtrans.locking`) spells [`SlruLocking`]:
/// `control-lock` (also `pg92`) or `banks` (also `pg17`).
pub(crate) fn slru_locking_value(v: &str) -> Option<SlruLocking> {
    match v {
        "control-lock" | "pg92" => Some(SlruLocking::ControlLock),
        "banks" | "pg17" => Some(SlruLocking::Banks),
        _ => None,
    }
}

/// The CLOG's knobs (`lockstack_common::knob`), over [`ClogConfig`]; the defaults are
/// [`ClogConfig::default`]'s. The buffer count is checked against the locking when the CLOG is
/// built (a multiple of 16 with banks).
pub const CLOG_KNOBS: &[lockstack_common::Knob<ClogConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{in_range, on_off};
    &[
        Knob {
            key: "clog.buffers",
            values: "2..=65536",
            doc: "CLOG SLRU buffers (NUM_CLOG_BUFFERS; transaction_buffers in 17), a multiple of 16 with banks",
            default: "32",
            apply: |c, v| {
                c.buffers = in_range(v, 2usize, 65536)?;
                Some(())
            },
        },
        Knob {
            key: "clog.locking",
            values: "control-lock|banks",
            doc: "one SLRU control lock (9.2) or banks of 16 buffers with a lock each (17)",
            default: "control-lock",
            apply: |c, v| {
                c.locking = slru_locking_value(v)?;
                Some(())
            },
        },
        Knob {
            key: "clog.group_update",
            values: "on|off",
            doc: "group CLOG status update (11)",
            default: "on",
            apply: |c, v| {
                c.group_update = on_off(v)?;
                Some(())
            },
        },
    ]
};

impl Default for ClogConfig {
    fn default() -> Self {
        ClogConfig {
            buffers: 32,
            locking: SlruLocking::ControlLock,
            group_update: true,
            max_backends: 128,
            lwlock_kind: LwLockKind::Atomic,
            storage: SlruStorage::Memory,
            zero_missing: true,
            wal_flush: None,
        }
    }
}

impl fmt::Debug for ClogConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClogConfig")
            .field("buffers", &self.buffers)
            .field("locking", &self.locking)
            .field("group_update", &self.group_update)
            .field("max_backends", &self.max_backends)
            .field("lwlock_kind", &self.lwlock_kind)
            .field("storage", &self.storage)
            .field("zero_missing", &self.zero_missing)
            .field("wal_flush", &self.wal_flush.is_some())
            .finish()
    }
}

/// How a page's status update was performed (for statistics and tests).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ClogUpdatePath {
    /// The caller took the page's lock itself (group update off or not eligible, the group
    /// refused, or the page needed I/O).
    Locked,
    /// Group path: the lock was free and the caller took it conditionally.
    GroupAlone,
    /// Group path: the caller led a group and ran `members` requests (its own included).
    GroupLeader {
        /// Requests in the group.
        members: usize,
    },
    /// Group path: another backend ran the caller's request.
    GroupFollower,
}

/// One backend's request in a group update (`clogGroupMember*` fields of `PGPROC`).
struct GroupRequest {
    xid: TransactionId,
    subxids: [TransactionId; THRESHOLD_SUBTRANS_CLOG_OPT],
    nsubxids: usize,
    status: XidStatus,
    lsn: u64,
    page: u32,
    applications: u32,
    outcome: Option<Result<(), (TransactionId, XidStatus)>>,
}

/// PostgreSQL's commit log on an [`Slru`] (see the module documentation).
pub struct Clog {
    slru: Slru,
    group: Option<GroupCombiner<GroupRequest>>,
    group_members: usize,
    /// `XactTruncationLock` (PostgreSQL 13+): held exclusively to advance
    /// `oldest_clog_xid` and to run the truncation that follows, so that truncations are
    /// serialised and the bound never moves backwards.
    truncation_lock: LwLock,
    /// `TransamVariables->oldestClogXid` (13+): the oldest xid whose status is kept; 0
    /// (invalid) until the first truncation. Stored before any buffer or segment is touched
    /// by a truncation; see [`Clog::get_status`] for how readers use it.
    oldest_clog_xid: AtomicU32,
}

impl fmt::Debug for Clog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clog").field("slru", &self.slru).field("group_update", &self.group.is_some()).finish()
    }
}

/// May `cur` become `to`? From in-progress anything; from sub-committed to a final status;
/// the same status again (replay); sub-committing an already committed xid is a no-op.
fn transition_ok(cur: XidStatus, to: XidStatus) -> bool {
    cur == to
        || cur == XidStatus::InProgress
        || (cur == XidStatus::SubCommitted && to != XidStatus::InProgress)
        || (cur == XidStatus::Committed && to == XidStatus::SubCommitted)
}

#[inline]
fn bit_position(xid: TransactionId) -> (usize, u32) {
    let index = xid.0 % CLOG_XACTS_PER_PAGE;
    ((index / 32) as usize, (index % 32) * CLOG_BITS_PER_XACT)
}

fn read_bits(p: &PageMut<'_>, xid: TransactionId) -> XidStatus {
    let (w, shift) = bit_position(xid);
    XidStatus::from_bits(p.word(w) >> shift)
}

/// `TransactionIdSetStatusBit`: sets one xid's bits and raises its group LSN.
fn set_bits(p: &PageMut<'_>, xid: TransactionId, status: XidStatus, lsn: u64) {
    let (w, shift) = bit_position(xid);
    let word = p.word(w);
    let cur = XidStatus::from_bits(word >> shift);
    // Sub-committing something already past in-progress is a no-op (replay of a commit).
    if status == XidStatus::SubCommitted && cur != XidStatus::InProgress {
        return;
    }
    p.set_word(w, (word & !(3u64 << shift)) | ((status as u64) << shift));
    if lsn != 0 {
        // One LSN per 32 xids: the same index as the 64-bit word.
        p.raise_group_lsn(w, lsn);
    }
}

/// `TransactionIdSetPageStatusInternal`: validates, then for a commit sub-commits the subxids,
/// commits `top`, then commits the subxids, all on one page under its exclusive lock.
fn apply_on_page(
    p: &PageMut<'_>,
    top: Option<TransactionId>,
    subxids: &[TransactionId],
    status: XidStatus,
    lsn: u64,
) -> Result<(), (TransactionId, XidStatus)> {
    let _cost = lockstack_common::sync::hook::pg_region("clog.set_status");
    for &x in top.iter().chain(subxids) {
        let cur = read_bits(p, x);
        if !transition_ok(cur, status) {
            return Err((x, cur));
        }
    }
    if let Some(t) = top {
        if status == XidStatus::Committed {
            for &s in subxids {
                set_bits(p, s, XidStatus::SubCommitted, lsn);
            }
        }
        set_bits(p, t, status, lsn);
    }
    for &s in subxids {
        set_bits(p, s, status, lsn);
    }
    Ok(())
}

impl Clog {
    /// Builds a CLOG (`CLOGShmemInit`): an [`Slru`] named `Xact` with tranches `XactSLRU`
    /// (control lock), `XactSLRUBank` (banks) and `XactBuffer` (I/O locks), 1024 group LSNs
    /// per buffer, and a group-update combiner for `max_backends` members when enabled.
    ///
    /// # Errors
    /// [`SlruError::InvalidConfig`] for a bad buffer count (see [`SlruConfig::buffers`]) or more
    /// than 2^20 `max_backends`, or an
    /// I/O error creating the directory.
    pub fn new(config: ClogConfig) -> Result<Clog, ClogError> {
        if config.max_backends > MAX_GROUP_MEMBERS {
            return Err(SlruError::InvalidConfig {
                slru: "Xact",
                reason: format!("max_backends {} exceeds {MAX_GROUP_MEMBERS}", config.max_backends),
            }
            .into());
        }
        let slru = Slru::new(SlruConfig {
            name: "Xact",
            buffers: config.buffers,
            locking: config.locking,
            lwlock_kind: config.lwlock_kind,
            storage: config.storage,
            control_tranche: TrancheId::XACT_SLRU,
            bank_tranche: TrancheId::XACT_SLRU_BANK,
            buffer_tranche: TrancheId::XACT_BUFFER,
            lsn_groups_per_page: CLOG_LSNS_PER_PAGE,
            page_precedes: clog_page_precedes,
            zero_missing: config.zero_missing,
            wal_flush: config.wal_flush,
        })?;
        let group = (config.group_update && config.max_backends > 0)
            .then(|| GroupCombiner::new(config.max_backends, WaitEvent::XACT_GROUP_UPDATE));
        Ok(Clog {
            slru,
            group,
            group_members: config.max_backends,
            truncation_lock: LwLock::new(config.lwlock_kind, TrancheId::register("XactTruncation"), 0),
            oldest_clog_xid: AtomicU32::new(0),
        })
    }

    /// The underlying SLRU (for statistics, flush, diagnostics).
    pub fn slru(&self) -> &Slru {
        &self.slru
    }

    /// The SLRU counters (hits, reads, writes, evictions...) summed over all backends.
    pub fn stats(&self) -> SlruStats {
        self.slru.stats()
    }

    /// `TransactionIdGetStatus`: the status of `xid` and the group LSN of its 32-xid group (0
    /// unless an asynchronous commit in that group recorded one since the page was read in).
    /// Takes the page's lock shared when the page is resident.
    ///
    /// Never answers for a truncated xid: a normal `xid` that precedes the oldest xid the CLOG
    /// keeps ([`oldest_clog_xid`](Self::oldest_clog_xid)) is refused, checked before the page
    /// is read *and again after* (see "Locking rules" in `docs/clog.md`).
    /// [`truncate`](Self::truncate) advances the bound before it empties a buffer or removes
    /// a segment, and does both under the bank locks this read also takes; so a read that saw
    /// a page already truncated (a missing page, or zeros with [`ClogConfig::zero_missing`])
    /// sees the advanced bound on its second check. This replaces PostgreSQL's shared
    /// `XactTruncationLock` around the read (`TransactionIdInRecentPast`) without a lock on
    /// the hot path. The special xids (0-2) are not checked.
    ///
    /// # Errors
    /// [`ClogError::Truncated`] for an xid before the bound; [`ClogError::Access`] when the
    /// page cannot be read (I/O errors; a page missing from storage unless
    /// [`ClogConfig::zero_missing`]).
    pub fn get_status(&self, xid: TransactionId) -> Result<(XidStatus, u64), ClogError> {
        self.check_not_truncated(xid)?;
        let (w, shift) = bit_position(xid);
        let r = self.slru.read_page(clog_page(xid), |p| {
            let _cost = lockstack_common::sync::hook::pg_region("clog.get_status");
            (XidStatus::from_bits(p.word(w) >> shift), p.group_lsn(w))
        });
        self.check_not_truncated(xid)?;
        r.map_err(|source| ClogError::Access { xid, source })
    }

    /// The oldest xid whose status the CLOG keeps (`oldestClogXid`, PostgreSQL 13+), `None`
    /// before the first [`truncate`](Self::truncate).
    pub fn oldest_clog_xid(&self) -> Option<TransactionId> {
        match self.oldest_clog_xid.load(Ordering::Acquire) {
            0 => None,
            x => Some(TransactionId(x)),
        }
    }

    /// [`ClogError::Truncated`] if `xid` is normal and precedes the oldest kept xid.
    fn check_not_truncated(&self, xid: TransactionId) -> Result<(), ClogError> {
        match self.oldest_clog_xid() {
            Some(oldest) if xid.is_normal() && xid.precedes(oldest) => {
                Err(ClogError::Truncated { xid, oldest })
            }
            _ => Ok(()),
        }
    }

    /// `TransactionIdSetTreeStatus`: records `status` (committed or aborted) for `xid` and its
    /// subtransactions `subxids` (any order, any pages), with commit LSN `lsn` (0 for a
    /// synchronous commit or an abort; a valid LSN marks an asynchronous commit, which waits
    /// for an in-progress write of the page).
    ///
    /// Order, as PostgreSQL: if every xid is on `xid`'s page, one update under the page's
    /// exclusive lock (sub-commit subxids, commit `xid`, commit subxids), possibly through the
    /// group update; otherwise, for a commit, subxids on other pages are first set
    /// sub-committed page by page, then `xid`'s page is done, then the other pages are set to
    /// the final status. A reader therefore never sees `xid` committed while one of its subxids
    /// is still in progress, nor a subxid committed before `xid`.
    ///
    /// The calling thread's attached backend ([`lockstack_common::backend::current_backend`])
    /// is its group member; unattached threads never use the group path. See
    /// [`set_tree_status_as`](Self::set_tree_status_as).
    ///
    /// # Errors
    /// [`ClogError::InvalidStatus`] for a status other than committed/aborted,
    /// [`ClogError::InvalidTransition`] if an xid already has a conflicting final status (pages
    /// handled before the failing one keep their update), I/O errors.
    pub fn set_tree_status(
        &self,
        xid: TransactionId,
        subxids: &[TransactionId],
        status: XidStatus,
        lsn: u64,
    ) -> Result<ClogUpdatePath, ClogError> {
        let me = lockstack_common::backend::current_backend();
        self.set_tree_status_as(me, xid, subxids, status, lsn)
    }

    /// [`set_tree_status`](Self::set_tree_status) with an explicit group member: `backend`
    /// (`MyProc` in PostgreSQL) must be below `max_backends` and not used by two threads at
    /// once; `None`, or an id out of range, disables the group path for this call.
    ///
    /// # Errors
    /// As [`set_tree_status`](Self::set_tree_status).
    pub fn set_tree_status_as(
        &self,
        backend: Option<BackendId>,
        xid: TransactionId,
        subxids: &[TransactionId],
        status: XidStatus,
        lsn: u64,
    ) -> Result<ClogUpdatePath, ClogError> {
        if !matches!(status, XidStatus::Committed | XidStatus::Aborted) {
            return Err(ClogError::InvalidStatus { xid, status });
        }
        let page = clog_page(xid);
        if subxids.iter().all(|s| clog_page(*s) == page) {
            return self.set_page_status(backend, Some(xid), subxids, status, lsn, page);
        }
        let (same, others): (Vec<TransactionId>, Vec<TransactionId>) =
            subxids.iter().partition(|s| clog_page(**s) == page);
        let mut pages: Vec<u32> = others.iter().map(|s| clog_page(*s)).collect();
        pages.sort_unstable();
        pages.dedup();
        let on = |p: u32| -> Vec<TransactionId> {
            others.iter().copied().filter(|s| clog_page(*s) == p).collect()
        };
        if status == XidStatus::Committed {
            for &p in &pages {
                self.set_page_status(None, None, &on(p), XidStatus::SubCommitted, lsn, p)?;
            }
        }
        let path = self.set_page_status(None, Some(xid), &same, status, lsn, page)?;
        for &p in &pages {
            self.set_page_status(None, None, &on(p), status, lsn, p)?;
        }
        Ok(path)
    }

    /// `TransactionIdSetPageStatus`: one page's update, by the group path when eligible
    /// (member given, a top xid, at most [`THRESHOLD_SUBTRANS_CLOG_OPT`] subxids, all on this
    /// page), else under the page's lock taken by the caller.
    fn set_page_status(
        &self,
        backend: Option<BackendId>,
        top: Option<TransactionId>,
        subxids: &[TransactionId],
        status: XidStatus,
        lsn: u64,
        page: u32,
    ) -> Result<ClogUpdatePath, ClogError> {
        if let (Some(group), Some(b), Some(xid)) = (&self.group, backend, top)
            && subxids.len() <= THRESHOLD_SUBTRANS_CLOG_OPT
            && b.index() < self.max_members()
        {
            let mut req = GroupRequest {
                xid,
                subxids: [TransactionId::INVALID; THRESHOLD_SUBTRANS_CLOG_OPT],
                nsubxids: subxids.len(),
                status,
                lsn,
                page,
                applications: 0,
                outcome: None,
            };
            req.subxids[..subxids.len()].copy_from_slice(subxids);
            let bank = self.slru.bank_of(page);
            let lock = self.slru.bank_lock_for(page);
            let run = group.run_keyed(b.index(), u64::from(page), lock, req, |r| self.apply_group(bank, r));
            // `None` outcome: the page was not resident (or was being written during an
            // asynchronous commit); the leader does no I/O for others, so we do it ourselves.
            if let Ok((GroupRequest { outcome: Some(outcome), applications, .. }, role)) = run {
                if applications != 1 {
                    return Err(ClogError::GroupProtocol { xid, applications });
                }
                outcome.map_err(|(x, from)| ClogError::InvalidTransition { xid: x, from, to: status })?;
                return Ok(match role {
                    GroupRole::Alone => ClogUpdatePath::GroupAlone,
                    GroupRole::Leader { members } => ClogUpdatePath::GroupLeader { members },
                    GroupRole::Follower => ClogUpdatePath::GroupFollower,
                });
            }
        }
        self.slru
            .modify_page(page, lsn == 0, |p| apply_on_page(&p, top, subxids, status, lsn))?
            .map_err(|(x, from)| ClogError::InvalidTransition { xid: x, from, to: status })?;
        Ok(ClogUpdatePath::Locked)
    }

    /// Members the combiner accepts (it panics on others, so callers are checked here).
    fn max_members(&self) -> usize {
        if self.group.is_some() { self.group_members } else { 0 }
    }

    /// The leader's operation on one request (`TransactionGroupUpdateXidStatus`' loop body).
    /// Runs with bank `bank`'s lock held exclusively; never does I/O and never waits.
    fn apply_group(&self, bank: usize, r: &mut GroupRequest) {
        let subs = &r.subxids[..r.nsubxids];
        let (xid, status, lsn) = (r.xid, r.status, r.lsn);
        if let Some(outcome) = self.slru.modify_resident_locked(bank, r.page, lsn == 0, |p| {
            apply_on_page(&p, Some(xid), subs, status, lsn)
        }) {
            r.applications += 1;
            r.outcome = Some(outcome);
        }
    }

    /// `ExtendCLOG`: when `newest_xid` is the first xid of its page (or the first normal xid
    /// after wraparound), zeroes that page in a buffer so that it needs no read. Call it at xid
    /// assignment; other xids cost nothing.
    ///
    /// # Errors
    /// I/O errors writing an evicted page.
    pub fn extend(&self, newest_xid: TransactionId) -> Result<(), ClogError> {
        if !newest_xid.0.is_multiple_of(CLOG_XACTS_PER_PAGE) && newest_xid != TransactionId::FIRST_NORMAL {
            return Ok(());
        }
        Ok(self.slru.zero_page(clog_page(newest_xid))?)
    }

    /// `CheckPointCLOG`: writes every dirty page (and syncs, if configured).
    ///
    /// # Errors
    /// I/O errors.
    pub fn flush(&self) -> Result<(), ClogError> {
        Ok(self.slru.flush()?)
    }

    /// `TruncateCLOG` (PostgreSQL 13+ order): under `XactTruncationLock` held exclusively,
    /// first advances the oldest kept xid to `oldest_xid` (`AdvanceOldestClogXid`; it never
    /// moves backwards), then removes the segments wholly before the page holding
    /// `oldest_xid` ([`Slru::truncate`]). From the moment the bound moves,
    /// [`get_status`](Self::get_status) refuses older xids. The newest segment is never
    /// removed; if the latest page precedes `oldest_xid`'s page (apparent wraparound) the bound
    /// is not advanced and nothing is removed. A special `oldest_xid` (0-2) does not move the
    /// bound.
    ///
    /// # Errors
    /// I/O errors.
    pub fn truncate(&self, oldest_xid: TransactionId) -> Result<TruncateOutcome, ClogError> {
        let cutoff = clog_page(oldest_xid);
        let held = self.truncation_lock.acquire(LwLockMode::Exclusive);
        let r = if self.slru.latest_page().is_some_and(|l| clog_page_precedes(l, cutoff)) {
            Ok(TruncateOutcome::ApparentWraparound)
        } else {
            if oldest_xid.is_normal() && self.oldest_clog_xid().is_none_or(|cur| cur.precedes(oldest_xid)) {
                self.oldest_clog_xid.store(oldest_xid.0, Ordering::Release);
            }
            self.slru.truncate(cutoff).map_err(ClogError::from)
        };
        self.truncation_lock.release(held);
        r
    }
}
