//! The page's layout and header: sizes and flag bits, line pointers ([`ItemId`]), `PageInit`,
//! the header fields (LSN, flags, `pd_lower`/`pd_upper`/`pd_special`, prune xid) and the
//! errors of page checks. Every other part of the page module builds on it.
//!
//! Locks touched: none; callers hold the buffer's content lock (shared to read, exclusive to
//! write).

use lockstack_common::sync::hook::{Access, touch};

/// Page size in bytes (`BLCKSZ`, PostgreSQL's default build).
pub const BLCKSZ: usize = 8192;
/// Size of the page header in bytes (`SizeOfPageHeaderData`).
pub const SIZE_OF_PAGE_HEADER: usize = 24;
/// Size of one line pointer in bytes (`sizeof(ItemIdData)`).
pub const SIZE_OF_ITEM_ID: usize = 4;
/// Tuple alignment in bytes (`MAXALIGN` on 64-bit machines).
pub const MAXIMUM_ALIGNOF: usize = 8;
/// The page layout version stored in `pd_pagesize_version` (`PG_PAGE_LAYOUT_VERSION`, 8.3+).
pub const PG_PAGE_LAYOUT_VERSION: u16 = 4;

/// `pd_flags`: there are unused line pointers before `pd_lower` (`PD_HAS_FREE_LINES`).
pub const PD_HAS_FREE_LINES: u16 = 0x0001;
/// `pd_flags`: not enough free space for a new tuple (`PD_PAGE_FULL`).
pub const PD_PAGE_FULL: u16 = 0x0002;
/// `pd_flags`: every tuple on the page is visible to everyone (`PD_ALL_VISIBLE`, 8.4+); kept in
/// sync with the visibility-map bit ([`crate::vm`]).
pub const PD_ALL_VISIBLE: u16 = 0x0004;
/// Every `pd_flags` bit a valid page may have (`PD_VALID_FLAG_BITS`).
pub const PD_VALID_FLAG_BITS: u16 = 0x0007;

/// A 1-based line pointer number (`OffsetNumber`).
pub type OffsetNumber = u16;
/// The first valid offset number (`FirstOffsetNumber`).
pub const FIRST_OFFSET_NUMBER: OffsetNumber = 1;

/// Rounds `len` up to [`MAXIMUM_ALIGNOF`] (`MAXALIGN`).
#[inline]
pub const fn maxalign(len: usize) -> usize {
    (len + MAXIMUM_ALIGNOF - 1) & !(MAXIMUM_ALIGNOF - 1)
}

/// The state of a line pointer (`lp_flags`, `itemid.h`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum LpFlags {
    /// `LP_UNUSED`: free for reuse; `lp_len` is 0.
    Unused = 0,
    /// `LP_NORMAL`: points at a tuple of `lp_len` bytes at `lp_off`.
    Normal = 1,
    /// `LP_REDIRECT`: HOT redirect; `lp_off` is the offset number of the chain's next member.
    Redirect = 2,
    /// `LP_DEAD`: dead, may or may not still have storage.
    Dead = 3,
}

/// One line pointer (`ItemIdData`): where a tuple lives on the page.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct ItemId {
    /// Byte offset of the tuple from the page start (or, for a redirect, the target offset
    /// number); 15 bits.
    pub off: u16,
    /// The state.
    pub flags: LpFlags,
    /// Tuple length in bytes (unaligned); 15 bits.
    pub len: u16,
}

impl ItemId {
    /// An unused line pointer.
    pub const UNUSED: ItemId = ItemId { off: 0, flags: LpFlags::Unused, len: 0 };

    pub(super) fn pack(self) -> u32 {
        u32::from(self.off & 0x7FFF) | ((self.flags as u32) << 15) | (u32::from(self.len & 0x7FFF) << 17)
    }

    #[inline]
    pub(super) fn unpack(v: u32) -> ItemId {
        let flags = match (v >> 15) & 3 {
            0 => LpFlags::Unused,
            1 => LpFlags::Normal,
            2 => LpFlags::Redirect,
            _ => LpFlags::Dead,
        };
        ItemId { off: (v & 0x7FFF) as u16, flags, len: ((v >> 17) & 0x7FFF) as u16 }
    }

    /// True if the line pointer has tuple storage (`ItemIdHasStorage`): `lp_len` > 0.
    pub fn has_storage(self) -> bool {
        self.len != 0
    }
}

#[inline]
pub(super) fn check(page: &[u8]) {
    assert_eq!(page.len(), BLCKSZ, "a page is {BLCKSZ} bytes, got {}", page.len());
}

#[inline]
pub(super) fn get_u16(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

#[inline]
pub(super) fn put_u16(page: &mut [u8], at: usize, v: u16) {
    page[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

/// Formats an empty page with `special_size` bytes (rounded up to 8) of special space
/// (`PageInit`): everything zeroed, `pd_lower` after the header, `pd_upper` = `pd_special` =
/// start of the special space.
///
/// # Panics
/// If the page is not [`BLCKSZ`] bytes or the special space leaves no room for items.
pub fn init(page: &mut [u8], special_size: usize) {
    check(page);
    let special = maxalign(special_size);
    assert!(special <= BLCKSZ - SIZE_OF_PAGE_HEADER - 64, "special space of {special} bytes is too large");
    page.fill(0);
    put_u16(page, 12, SIZE_OF_PAGE_HEADER as u16);
    put_u16(page, 14, (BLCKSZ - special) as u16);
    put_u16(page, 16, (BLCKSZ - special) as u16);
    put_u16(page, 18, (BLCKSZ as u16) | PG_PAGE_LAYOUT_VERSION);
}

/// A caller's check of a page read from storage, run by the buffer pool after [`verify`](crate::page::verify)
/// passed, new pages included (the engine checks heap tuple and B-tree item shapes, and
/// refuses a zero page in an index);
/// `Err` carries the reason. Install it with [`crate::BufferPool::set_page_verifier`].
pub type PageVerifier =
    std::sync::Arc<dyn Fn(crate::tag::BufferTag, &[u8]) -> Result<(), crate::error::HookError> + Send + Sync>;

/// Why a page failed [`verify`](crate::page::verify) or [`verify_checksum`](crate::page::verify_checksum) (the messages name the bad field, as
/// `PageIsVerified`'s do).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageError {
    /// The buffer is not [`BLCKSZ`] bytes long.
    WrongSize(usize),
    /// `pd_upper` is 0 (a new page) but some byte is not zero.
    NewPageNotZero,
    /// `pd_flags` has bits outside the known ones.
    UnknownFlags(u16),
    /// Not `SIZE_OF_PAGE_HEADER <= pd_lower <= pd_upper <= pd_special <= BLCKSZ`.
    BoundsOutOfOrder {
        /// `pd_lower`.
        lower: usize,
        /// `pd_upper`.
        upper: usize,
        /// `pd_special`.
        special: usize,
    },
    /// `pd_special` is not [`MAXIMUM_ALIGNOF`]-aligned.
    SpecialUnaligned(usize),
    /// `pd_pagesize_version` is not `BLCKSZ | PG_PAGE_LAYOUT_VERSION`.
    BadPageSizeVersion(u16),
    /// A line pointer's storage is outside the tuple space, unaligned, or of the wrong shape
    /// for its flags.
    LinePointerOutOfRange {
        /// The offset number (1-based).
        off: u16,
        /// Its flags.
        flags: LpFlags,
        /// `lp_off`.
        offset: u16,
        /// `lp_len`.
        len: u16,
    },
    /// A line pointer's storage overlaps another item's.
    LinePointerOverlap {
        /// The offset number (1-based).
        off: u16,
        /// `lp_off`.
        offset: u16,
    },
    /// `pd_checksum` does not match the page's contents and block number.
    ChecksumMismatch {
        /// The checksum computed from the page.
        calculated: u16,
        /// The checksum stored in it.
        stored: u16,
    },
}

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PageError::WrongSize(n) => write!(f, "page is {n} bytes, not {BLCKSZ}"),
            PageError::NewPageNotZero => f.write_str("pd_upper is 0 but the page is not all zeros"),
            PageError::UnknownFlags(flags) => write!(f, "pd_flags {flags:#06x} has unknown bits"),
            PageError::BoundsOutOfOrder { lower, upper, special } => {
                write!(f, "pd_lower {lower}, pd_upper {upper}, pd_special {special} are not in order")
            }
            PageError::SpecialUnaligned(spec) => write!(f, "pd_special {spec} is not aligned"),
            PageError::BadPageSizeVersion(sv) => {
                write!(f, "pd_pagesize_version {sv:#06x} is not {BLCKSZ} bytes, layout version 4")
            }
            PageError::LinePointerOutOfRange { off, flags, offset, len } => {
                write!(f, "line pointer {off} ({flags:?}, offset {offset}, length {len}) is out of range")
            }
            PageError::LinePointerOverlap { off, offset } => {
                write!(f, "line pointer {off} (offset {offset}) overlaps another item")
            }
            PageError::ChecksumMismatch { calculated, stored } => {
                write!(f, "page verification failed, calculated checksum {calculated} but expected {stored}")
            }
        }
    }
}

impl std::error::Error for PageError {}

/// True for a never-initialised (all-zero header) page (`PageIsNew`: `pd_upper` is 0).
#[inline]
pub fn is_new(page: &[u8]) -> bool {
    check(page);
    get_u16(page, 14) == 0
}

/// The page LSN (`PageGetLSN`): the WAL position just after the last record that changed the
/// page. The buffer manager flushes WAL up to it before writing the page.
#[inline]
pub fn lsn(page: &[u8]) -> u64 {
    check(page);
    u64::from_le_bytes(page[0..8].try_into().expect("an 8-byte range of a page converts to [u8; 8]"))
}

/// Sets the page LSN (`PageSetLSN`).
pub fn set_lsn(page: &mut [u8], lsn: u64) {
    check(page);
    page[0..8].copy_from_slice(&lsn.to_le_bytes());
    touch(page.as_ptr(), 8, Access::Write);
}

/// `pd_flags`.
#[inline]
pub fn flags(page: &[u8]) -> u16 {
    check(page);
    get_u16(page, 10)
}

/// Replaces `pd_flags`.
pub fn set_flags(page: &mut [u8], flags: u16) {
    check(page);
    put_u16(page, 10, flags);
    touch(page[10..].as_ptr(), 2, Access::Write);
}

/// True if [`PD_ALL_VISIBLE`] is set (`PageIsAllVisible`).
#[inline]
pub fn is_all_visible(page: &[u8]) -> bool {
    flags(page) & PD_ALL_VISIBLE != 0
}

/// Sets [`PD_ALL_VISIBLE`] (`PageSetAllVisible`). Use [`crate::vm::VisibilityMap::set`], which
/// also sets the map bit, unless you know what you are doing.
pub fn set_all_visible(page: &mut [u8]) {
    let f = flags(page);
    set_flags(page, f | PD_ALL_VISIBLE);
}

/// Clears [`PD_ALL_VISIBLE`] (`PageClearAllVisible`).
pub fn clear_all_visible(page: &mut [u8]) {
    let f = flags(page);
    set_flags(page, f & !PD_ALL_VISIBLE);
}

/// `pd_lower`: end of the line pointer array, in bytes from the page start.
#[inline]
pub fn lower(page: &[u8]) -> usize {
    check(page);
    get_u16(page, 12) as usize
}

/// `pd_upper`: start of tuple space, in bytes from the page start.
#[inline]
pub fn upper(page: &[u8]) -> usize {
    check(page);
    get_u16(page, 14) as usize
}

/// `pd_special`: start of the special space, in bytes from the page start.
#[inline]
pub fn special_offset(page: &[u8]) -> usize {
    check(page);
    get_u16(page, 16) as usize
}

/// The special space (`PageGetSpecialPointer`).
#[inline]
pub fn special(page: &[u8]) -> &[u8] {
    let s = special_offset(page);
    &page[s..]
}

/// The special space, writable.
#[inline]
pub fn special_mut(page: &mut [u8]) -> &mut [u8] {
    let s = special_offset(page);
    &mut page[s..]
}

/// `pd_prune_xid`: oldest xid that may have left prunable tuples (0 = none), 8.3+.
#[inline]
pub fn prune_xid(page: &[u8]) -> u32 {
    check(page);
    u32::from_le_bytes(page[20..24].try_into().expect("a 4-byte range of a page converts to [u8; 4]"))
}

/// Sets `pd_prune_xid`.
pub fn set_prune_xid(page: &mut [u8], xid: u32) {
    check(page);
    page[20..24].copy_from_slice(&xid.to_le_bytes());
    touch(page[20..].as_ptr(), 4, Access::Write);
}
