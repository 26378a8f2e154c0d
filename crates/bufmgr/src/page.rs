//! The 8 KiB slotted page layout, shared with the engine's heap and B-tree pages.
//!
//! The layout is PostgreSQL's (`src/include/storage/bufpage.h`, `itemid.h`, page layout
//! version 4, 8.3+): a 24-byte header, an array of 4-byte line pointers growing up from the
//! header, tuples growing down from `pd_upper`, and an optional "special space" at the end
//! (B-tree pages keep their sibling links there).
//!
//! ```text
//! 0      8        10       12       14       16         18            20         24
//! | lsn  | checksum| flags  | lower  | upper  | special  | size+version | prune_xid | line pointers ...
//! ... free space ... | tuples (8-byte aligned) | special space |  8192
//! ```
//!
//! Integers are stored little-endian; a line pointer packs `lp_off` (bits 0-14), `lp_flags`
//! (bits 15-16) and `lp_len` (bits 17-31) into one `u32`, as the C bit-fields are laid out by
//! GCC on little-endian machines. Offset numbers are 1-based (`FirstOffsetNumber` = 1).
//!
//! The functions take page slices, which must be exactly [`BLCKSZ`] bytes long (they panic
//! otherwise); get them from [`crate::ContentGuard::page`] / [`crate::ContentGuard::page_mut`]
//! under the buffer's content lock.

use lockstack_common::Oid;
use lockstack_common::sync::hook::{Access, touch};

use crate::tag::ForkNumber;

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

    fn pack(self) -> u32 {
        u32::from(self.off & 0x7FFF) | ((self.flags as u32) << 15) | (u32::from(self.len & 0x7FFF) << 17)
    }

    #[inline]
    fn unpack(v: u32) -> ItemId {
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
fn check(page: &[u8]) {
    assert_eq!(page.len(), BLCKSZ, "a page is {BLCKSZ} bytes, got {}", page.len());
}

#[inline]
fn get_u16(page: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([page[at], page[at + 1]])
}

#[inline]
fn put_u16(page: &mut [u8], at: usize, v: u16) {
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

/// Checks a page just read from storage (PostgreSQL's `PageIsVerified` and `PageHeaderIsValid`,
/// `bufpage.c`), all but the checksum: [`FileSmgr`](crate::FileSmgr) with checksums on checks
/// `pd_checksum` ([`verify_checksum`]) as it reads the page, before this runs.
///
/// An all-zero page is valid (a new page, as left by an extension). Otherwise the header must
/// be sane: no unknown `pd_flags` bits, `SIZE_OF_PAGE_HEADER <= pd_lower <= pd_upper <=
/// pd_special <= BLCKSZ`, `pd_special` [`MAXIMUM_ALIGNOF`]-aligned, and
/// `pd_pagesize_version` = `BLCKSZ | PG_PAGE_LAYOUT_VERSION`. Going further than
/// PostgreSQL (which checks line pointers only when it uses them), every line pointer up to
/// [`max_offset_number`] is checked too: storage of normal, dead and unused items lies inside
/// `pd_upper..pd_special` at an aligned offset without overlapping another item's, a normal
/// item has storage, and a redirect has none and names an offset in range. A page that passes can be given to every function of this module without
/// a panic or an out-of-bounds access, whatever its bytes.
///
/// # Errors
/// A [`PageError`] naming the bad field.
pub fn verify(page: &[u8]) -> Result<(), PageError> {
    if page.len() != BLCKSZ {
        return Err(PageError::WrongSize(page.len()));
    }
    let (flags, low, up, spec) = (get_u16(page, 10), lower(page), upper(page), special_offset(page));
    if up == 0 {
        return if page.iter().all(|&b| b == 0) { Ok(()) } else { Err(PageError::NewPageNotZero) };
    }
    if flags & !PD_VALID_FLAG_BITS != 0 {
        return Err(PageError::UnknownFlags(flags));
    }
    if !(SIZE_OF_PAGE_HEADER <= low && low <= up && up <= spec && spec <= BLCKSZ) {
        return Err(PageError::BoundsOutOfOrder { lower: low, upper: up, special: spec });
    }
    if spec != maxalign(spec) {
        return Err(PageError::SpecialUnaligned(spec));
    }
    let sv = get_u16(page, 18);
    if sv != (BLCKSZ as u16) | PG_PAGE_LAYOUT_VERSION {
        return Err(PageError::BadPageSizeVersion(sv));
    }
    let max = max_offset_number(page);
    // One bit per aligned 8-byte chunk of the page: which chunks item storage covers.
    let mut used = [0u64; BLCKSZ / MAXIMUM_ALIGNOF / 64];
    for off in 1..=max {
        let id = item_id(page, off);
        let in_tuple_space = |id: ItemId| {
            id.off as usize >= up
                && id.off as usize + id.len as usize <= spec
                && (id.off as usize).is_multiple_of(MAXIMUM_ALIGNOF)
        };
        let ok = match id.flags {
            LpFlags::Normal => id.len > 0 && in_tuple_space(id),
            LpFlags::Dead | LpFlags::Unused => id.len == 0 || in_tuple_space(id),
            LpFlags::Redirect => id.len == 0 && id.off >= 1 && id.off <= max,
        };
        if !ok {
            return Err(PageError::LinePointerOutOfRange {
                off,
                flags: id.flags,
                offset: id.off,
                len: id.len,
            });
        }
        if id.len == 0 {
            continue;
        }
        // Storage must not overlap (`PageRepairFragmentation`'s "corrupted line pointer"
        // check): with aligned starts, the aligned lengths then fit in pd_upper..pd_special.
        let (start, end) = (
            id.off as usize / MAXIMUM_ALIGNOF,
            maxalign(id.off as usize + id.len as usize) / MAXIMUM_ALIGNOF,
        );
        let mut c = start;
        while c < end {
            let w = c / 64;
            let hi = end.min((w + 1) * 64);
            let mask = (u64::MAX >> (64 - (hi - c))) << (c % 64);
            if used[w] & mask != 0 {
                return Err(PageError::LinePointerOverlap { off, offset: id.off });
            }
            used[w] |= mask;
            c = hi;
        }
    }
    Ok(())
}

/// A caller's check of a page read from storage, run by the buffer pool after [`verify`]
/// passed, new pages included (the engine checks heap tuple and B-tree item shapes, and
/// refuses a zero page in an index);
/// `Err` carries the reason. Install it with [`crate::BufferPool::set_page_verifier`].
pub type PageVerifier =
    std::sync::Arc<dyn Fn(crate::BufferTag, &[u8]) -> Result<(), crate::HookError> + Send + Sync>;

/// Why a page failed [`verify`] or [`verify_checksum`] (the messages name the bad field, as
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
    u64::from_le_bytes(page[0..8].try_into().expect("8 bytes"))
}

/// The stored page checksum (`pd_checksum`, bytes 8..10); 0 on a page never written with
/// checksums on.
pub fn stored_checksum(page: &[u8]) -> u16 {
    check(page);
    get_u16(page, 8)
}

/// The checksum of `page` as block `block` of its fork (`pg_checksum_page`,
/// `src/include/storage/checksum_impl.h`, 9.3+): 16 bits, never 0, computed with
/// `pd_checksum` taken as zero and the block number mixed in, so that a page written at the
/// wrong offset (or swapped with another) fails too.
///
/// A departure from PostgreSQL: the hash is CRC-32C (the `crc32c` crate, the polynomial
/// PostgreSQL's WAL records use) over the page and then the block number's 4 little-endian
/// bytes, folded to 16 bits, instead of PostgreSQL's 32-lane FNV-1a variant; like
/// PostgreSQL's it is reduced modulo 65535 plus one so that 0 means "no checksum".
pub fn checksum(page: &[u8], block: u32) -> u16 {
    check(page);
    let mut crc = crc32c::crc32c(&page[..8]);
    crc = crc32c::crc32c_append(crc, &[0, 0]);
    crc = crc32c::crc32c_append(crc, &page[10..]);
    crc = crc32c::crc32c_append(crc, &block.to_le_bytes());
    ((crc ^ (crc >> 16)) % 65535) as u16 + 1
}

/// Stores [`checksum`]`(page, block)` in `pd_checksum` (`PageSetChecksumInplace`); a new
/// (all-zero) page is left as it is, as PostgreSQL leaves it.
pub fn set_checksum(page: &mut [u8], block: u32) {
    if is_new(page) {
        return;
    }
    let c = checksum(page, block);
    put_u16(page, 8, c);
}

/// Checks `pd_checksum` of a page read as block `block` (the checksum part of
/// `PageIsVerified`): a new page (`pd_upper` 0) passes (its other bytes are checked by
/// [`verify`]), any other must carry [`checksum`]`(page, block)`.
///
/// # Errors
/// [`PageError::ChecksumMismatch`], whose message is PostgreSQL's, "page verification failed,
/// calculated checksum C but expected E".
pub fn verify_checksum(page: &[u8], block: u32) -> Result<(), PageError> {
    if is_new(page) {
        return Ok(());
    }
    let (have, want) = (stored_checksum(page), checksum(page, block));
    if have == want { Ok(()) } else { Err(PageError::ChecksumMismatch { calculated: want, stored: have }) }
}

/// The checksum of `page` as block `block` of fork `fork` of relation `rel`: [`checksum`]
/// with the relation's number (4 little-endian bytes) and the fork number (1 byte) hashed in
/// after the block number. [`crate::FileSmgr`] writes and verifies this one, so that a file
/// swapped with another relation's or fork's, or copied over it, fails at its first page.
///
/// A departure from PostgreSQL, whose `pg_checksum_page` mixes in the block number only (so
/// that `CREATE DATABASE` can copy relation files byte for byte); lockstack never copies a
/// relation file, and its relation files carry no other record of which relation they hold.
pub fn relation_checksum(page: &[u8], rel: Oid, fork: ForkNumber, block: u32) -> u16 {
    check(page);
    let mut crc = crc32c::crc32c(&page[..8]);
    crc = crc32c::crc32c_append(crc, &[0, 0]);
    crc = crc32c::crc32c_append(crc, &page[10..]);
    crc = crc32c::crc32c_append(crc, &block.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &rel.0.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &[fork as u8]);
    ((crc ^ (crc >> 16)) % 65535) as u16 + 1
}

/// Stores [`relation_checksum`] in `pd_checksum`; a new (all-zero) page is left as it is.
pub fn set_relation_checksum(page: &mut [u8], rel: Oid, fork: ForkNumber, block: u32) {
    if is_new(page) {
        return;
    }
    let c = relation_checksum(page, rel, fork, block);
    put_u16(page, 8, c);
}

/// [`verify_checksum`] against [`relation_checksum`]: a new page passes, any other must carry
/// the checksum of its relation, fork and block.
///
/// # Errors
/// [`PageError::ChecksumMismatch`], as [`verify_checksum`].
pub fn verify_relation_checksum(
    page: &[u8],
    rel: Oid,
    fork: ForkNumber,
    block: u32,
) -> Result<(), PageError> {
    if is_new(page) {
        return Ok(());
    }
    let (have, want) = (stored_checksum(page), relation_checksum(page, rel, fork, block));
    if have == want { Ok(()) } else { Err(PageError::ChecksumMismatch { calculated: want, stored: have }) }
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
    u32::from_le_bytes(page[20..24].try_into().expect("4 bytes"))
}

/// Sets `pd_prune_xid`.
pub fn set_prune_xid(page: &mut [u8], xid: u32) {
    check(page);
    page[20..24].copy_from_slice(&xid.to_le_bytes());
    touch(page[20..].as_ptr(), 4, Access::Write);
}

/// Number of line pointers (`PageGetMaxOffsetNumber`); 0 for an empty or new page.
#[inline]
pub fn max_offset_number(page: &[u8]) -> OffsetNumber {
    let l = lower(page);
    touch(page[12..].as_ptr(), 2, Access::Read);
    if l <= SIZE_OF_PAGE_HEADER { 0 } else { ((l - SIZE_OF_PAGE_HEADER) / SIZE_OF_ITEM_ID) as OffsetNumber }
}

/// The line pointer `off` (1-based).
///
/// # Panics
/// If `off` is 0 or above [`max_offset_number`].
#[inline]
pub fn item_id(page: &[u8], off: OffsetNumber) -> ItemId {
    assert!(off >= 1 && off <= max_offset_number(page), "offset number {off} out of range");
    let at = SIZE_OF_PAGE_HEADER + (off as usize - 1) * SIZE_OF_ITEM_ID;
    touch(page[at..].as_ptr(), SIZE_OF_ITEM_ID, Access::Read);
    ItemId::unpack(u32::from_le_bytes(page[at..at + 4].try_into().expect("4 bytes")))
}

/// Overwrites the line pointer `off` (for marking items dead, unused or redirected).
///
/// # Panics
/// If `off` is out of range, or a normal item's storage lies outside the tuple space.
pub fn set_item_id(page: &mut [u8], off: OffsetNumber, id: ItemId) {
    assert!(off >= 1 && off <= max_offset_number(page), "offset number {off} out of range");
    if id.flags == LpFlags::Normal {
        assert!(
            id.off as usize >= upper(page) && id.off as usize + id.len as usize <= special_offset(page),
            "item storage {}..+{} outside the tuple space",
            id.off,
            id.len
        );
    }
    let at = SIZE_OF_PAGE_HEADER + (off as usize - 1) * SIZE_OF_ITEM_ID;
    page[at..at + 4].copy_from_slice(&id.pack().to_le_bytes());
    touch(page[at..].as_ptr(), SIZE_OF_ITEM_ID, Access::Write);
}

/// Free bytes for one more tuple, after reserving a new line pointer (`PageGetFreeSpace`);
/// 0 when even the line pointer does not fit.
#[inline]
pub fn free_space(page: &[u8]) -> usize {
    (upper(page) - lower(page)).saturating_sub(SIZE_OF_ITEM_ID)
}

/// Adds `item` to the page (`PageAddItem` without overwrite): at offset `at` if given (which must
/// be an unused line pointer or one past the end), else in the first unused line pointer when
/// [`PD_HAS_FREE_LINES`] is set, else at a new one at the end. The tuple is stored at a
/// [`MAXIMUM_ALIGNOF`]-aligned offset.
///
/// Returns the offset number used, or `None` if the page lacks room (or `at` is not usable).
///
/// # Panics
/// If the page is not [`BLCKSZ`] bytes or has not been initialised ([`is_new`]), or `item` is
/// longer than 32767 bytes.
pub fn add_item(page: &mut [u8], item: &[u8], at: Option<OffsetNumber>) -> Option<OffsetNumber> {
    assert!(!is_new(page), "add_item on an uninitialised page");
    assert!(item.len() <= 0x7FFF, "an item is at most 32767 bytes, got {}", item.len());
    let max = max_offset_number(page);
    let off = match at {
        Some(o) => {
            if o == 0 || o > max + 1 || (o <= max && item_id(page, o).flags != LpFlags::Unused) {
                return None;
            }
            o
        }
        None => {
            let mut found = None;
            if flags(page) & PD_HAS_FREE_LINES != 0 {
                found = (1..=max).find(|&o| {
                    let id = item_id(page, o);
                    id.flags == LpFlags::Unused && !id.has_storage()
                });
                if found.is_none() {
                    // The hint was stale (`PageAddItem` clears it the same way).
                    let f = flags(page);
                    set_flags(page, f & !PD_HAS_FREE_LINES);
                }
            }
            found.unwrap_or(max + 1)
        }
    };
    let new_lower = if off > max { lower(page) + SIZE_OF_ITEM_ID } else { lower(page) };
    let aligned = maxalign(item.len());
    let up = upper(page);
    if aligned > up || up - aligned < new_lower {
        return None;
    }
    let new_upper = up - aligned;
    page[new_upper..new_upper + item.len()].copy_from_slice(item);
    page[new_upper + item.len()..up].fill(0);
    touch(page[new_upper..].as_ptr(), up - new_upper, Access::Write);
    put_u16(page, 12, new_lower as u16);
    put_u16(page, 14, new_upper as u16);
    touch(page[12..].as_ptr(), 4, Access::Write);
    set_item_id(page, off, ItemId { off: new_upper as u16, flags: LpFlags::Normal, len: item.len() as u16 });
    Some(off)
}

/// The tuple at `off` (`PageGetItem`), or `None` if the offset is out of range or the line
/// pointer is not [`LpFlags::Normal`].
#[inline]
pub fn get_item(page: &[u8], off: OffsetNumber) -> Option<&[u8]> {
    if off == 0 || off > max_offset_number(page) {
        return None;
    }
    let id = item_id(page, off);
    (id.flags == LpFlags::Normal).then(|| &page[id.off as usize..id.off as usize + id.len as usize])
}

/// The bytes line pointer `off` points at (`PageGetItem(page, PageGetItemId(page, off))`),
/// without [`get_item`]'s checks of `off` against [`max_offset_number`] and of the line
/// pointer's flags: for callers that already know `off` names a normal item, such as a binary
/// search over `1..=max_offset_number` of a B-tree page, whose items are all normal. Memory
/// safe whatever `off` is (a bad one yields some bytes of the page, or a panic if the line
/// pointer it reads points outside the page).
///
/// # Panics
/// If `off` is 0.
#[inline]
pub fn item_data(page: &[u8], off: OffsetNumber) -> &[u8] {
    let at = SIZE_OF_PAGE_HEADER + (off as usize - 1) * SIZE_OF_ITEM_ID;
    let lp = u32::from_le_bytes(page[at..at + SIZE_OF_ITEM_ID].try_into().expect("4 bytes"));
    touch(page[at..].as_ptr(), SIZE_OF_ITEM_ID, Access::Read);
    let start = (lp & 0x7FFF) as usize;
    let len = ((lp >> 17) & 0x7FFF) as usize;
    touch(page[start..].as_ptr(), len, Access::Read);
    &page[start..start + len]
}

/// The tuple at `off`, writable (same rules as [`get_item`]).
#[inline]
pub fn get_item_mut(page: &mut [u8], off: OffsetNumber) -> Option<&mut [u8]> {
    if off == 0 || off > max_offset_number(page) {
        return None;
    }
    let id = item_id(page, off);
    if id.flags != LpFlags::Normal {
        return None;
    }
    Some(&mut page[id.off as usize..id.off as usize + id.len as usize])
}

/// Compacts tuple storage (`PageRepairFragmentation`, the last step of pruning): normal items
/// are moved together at the end of the tuple space, keeping their offset numbers; dead and
/// unused line pointers lose their storage; [`PD_HAS_FREE_LINES`] is set when an unused line
/// pointer remains. Returns the free space afterwards ([`free_space`]).
pub fn repair_fragmentation(page: &mut [u8]) -> usize {
    let max = max_offset_number(page);
    let mut items: Vec<(OffsetNumber, ItemId)> = Vec::with_capacity(max as usize);
    let mut has_unused = false;
    for o in 1..=max {
        let id = item_id(page, o);
        match id.flags {
            LpFlags::Normal => items.push((o, id)),
            LpFlags::Unused => {
                has_unused = true;
                set_item_id(page, o, ItemId::UNUSED);
            }
            LpFlags::Dead => set_item_id(page, o, ItemId { off: 0, flags: LpFlags::Dead, len: 0 }),
            LpFlags::Redirect => {}
        }
    }
    // Move the highest-placed tuples first so a move never overwrites a tuple not yet moved.
    items.sort_by_key(|x| std::cmp::Reverse(x.1.off));
    let mut up = special_offset(page);
    for (o, id) in items {
        let aligned = maxalign(id.len as usize);
        up -= aligned;
        page.copy_within(id.off as usize..id.off as usize + id.len as usize, up);
        let at = SIZE_OF_PAGE_HEADER + (o as usize - 1) * SIZE_OF_ITEM_ID;
        page[at..at + 4].copy_from_slice(&ItemId { off: up as u16, ..id }.pack().to_le_bytes());
    }
    let low = lower(page);
    page[low..up].fill(0);
    put_u16(page, 14, up as u16);
    let f = flags(page);
    set_flags(page, if has_unused { f | PD_HAS_FREE_LINES } else { f & !PD_HAS_FREE_LINES });
    free_space(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_page(special: usize) -> Vec<u8> {
        let mut p = vec![0u8; BLCKSZ];
        init(&mut p, special);
        p
    }

    #[test]
    fn verify_accepts_valid_and_new_pages_and_rejects_damage() {
        let mut p = new_page(16);
        for i in 0..20u8 {
            add_item(&mut p, &[i; 40], None).unwrap();
        }
        assert_eq!(verify(&p), Ok(()));
        assert_eq!(verify(&[0u8; BLCKSZ]), Ok(()));
        // Pruning's results: a redirect (its offset is a line pointer number), dead and
        // unused line pointers without storage.
        let mut pruned = p.clone();
        set_item_id(&mut pruned, 3, ItemId { off: 17, flags: LpFlags::Redirect, len: 0 });
        set_item_id(&mut pruned, 7, ItemId { off: 0, flags: LpFlags::Dead, len: 0 });
        set_item_id(&mut pruned, 9, ItemId::UNUSED);
        assert_eq!(verify(&pruned), Ok(()));
        repair_fragmentation(&mut pruned);
        assert_eq!(verify(&pruned), Ok(()));
        let mut bad = p.clone();
        put_u16(&mut bad, 14, 20); // pd_upper below pd_lower
        assert!(verify(&bad).unwrap_err().to_string().contains("not in order"));
        let mut bad = p.clone();
        put_u16(&mut bad, 10, 0x80);
        assert!(verify(&bad).unwrap_err().to_string().contains("pd_flags"));
        let mut bad = p.clone();
        put_u16(&mut bad, 16, BLCKSZ as u16 - 12);
        assert!(verify(&bad).is_err());
        let mut bad = p.clone();
        bad[18] ^= 1;
        assert!(verify(&bad).unwrap_err().to_string().contains("pd_pagesize_version"));
        let mut bad = p.clone();
        let at = SIZE_OF_PAGE_HEADER + 4 * 4;
        bad[at..at + 4]
            .copy_from_slice(&ItemId { off: 8190, flags: LpFlags::Normal, len: 100 }.pack().to_le_bytes());
        assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5"));
        let mut bad = p.clone();
        bad[at..at + 4]
            .copy_from_slice(&ItemId { off: 99, flags: LpFlags::Redirect, len: 0 }.pack().to_le_bytes());
        assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5"));
        let mut bad = p.clone();
        let four = item_id(&p, 4);
        bad[at..at + 4].copy_from_slice(&ItemId { off: four.off + 8, ..four }.pack().to_le_bytes());
        assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5 (offset"), "overlap");
        let mut bad = vec![0u8; BLCKSZ];
        bad[4000] = 1;
        assert!(verify(&bad).unwrap_err().to_string().contains("not all zeros"));
    }

    /// Pseudo-random bytes, and valid pages with random bytes at many offsets: verification
    /// never panics, and every accessor is safe on a page that passes it.
    #[test]
    fn verify_never_panics_and_verified_pages_are_safe() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut base = new_page(24);
        let mut i = 0u8;
        while add_item(&mut base, &[i; 56], None).is_some() {
            i = i.wrapping_add(1);
        }
        let mut passed = 0;
        for round in 0..4000 {
            let mut p = if round % 4 == 0 {
                (0..BLCKSZ).map(|_| next() as u8).collect::<Vec<u8>>()
            } else {
                let mut p = base.clone();
                let at = (next() as usize) % (BLCKSZ - 8);
                let n = 1 + (next() as usize) % 8;
                for b in &mut p[at..at + n] {
                    *b = next() as u8;
                }
                p
            };
            if verify(&p).is_err() {
                continue;
            }
            passed += 1;
            let max = max_offset_number(&p);
            for off in 0..=max + 1 {
                let _ = get_item(&p, off);
                if off >= 1 && off <= max {
                    let _ = item_id(&p, off);
                    let _ = item_data(&p, off);
                }
            }
            let _ = (special(&p).len(), free_space(&p), lsn(&p), prune_xid(&p));
            if !is_new(&p) {
                let _ = add_item(&mut p, &[1; 30], None);
                repair_fragmentation(&mut p);
            }
        }
        assert!(passed > 1000, "most single-field damage leaves a valid page: {passed}");
    }

    #[test]
    fn init_sets_header() {
        let p = new_page(16);
        assert!(!is_new(&p));
        assert_eq!(lower(&p), 24);
        assert_eq!(upper(&p), BLCKSZ - 16);
        assert_eq!(special(&p).len(), 16);
        assert_eq!(max_offset_number(&p), 0);
        assert_eq!(free_space(&p), BLCKSZ - 16 - 24 - 4);
        assert!(is_new(&[0u8; BLCKSZ]));
    }

    #[test]
    fn add_get_and_fill() {
        let mut p = new_page(0);
        let mut n = 0u16;
        while let Some(off) = add_item(&mut p, &[n as u8; 61], None) {
            n += 1;
            assert_eq!(off, n);
        }
        // 61 bytes align to 64, plus a 4-byte line pointer: (8192 - 24) / 68 = 120 items.
        assert_eq!(n, 120);
        for o in 1..=n {
            assert_eq!(get_item(&p, o).unwrap(), &[(o - 1) as u8; 61][..]);
        }
        assert!(get_item(&p, n + 1).is_none());
        assert!(free_space(&p) < 64);
    }

    #[test]
    fn lsn_flags_and_all_visible() {
        let mut p = new_page(0);
        set_lsn(&mut p, 0x1234_5678_9ABC);
        assert_eq!(lsn(&p), 0x1234_5678_9ABC);
        assert!(!is_all_visible(&p));
        set_all_visible(&mut p);
        assert!(is_all_visible(&p));
        assert_eq!(flags(&p), PD_ALL_VISIBLE);
        clear_all_visible(&mut p);
        assert_eq!(flags(&p), 0);
        set_prune_xid(&mut p, 77);
        assert_eq!(prune_xid(&p), 77);
    }

    #[test]
    fn repair_keeps_live_items_and_reuses_unused() {
        let mut p = new_page(8);
        for i in 0..10u8 {
            add_item(&mut p, &[i; 100], None).unwrap();
        }
        let before = free_space(&p);
        set_item_id(&mut p, 3, ItemId::UNUSED);
        let id = item_id(&p, 5);
        set_item_id(&mut p, 5, ItemId { flags: LpFlags::Dead, ..id });
        let after = repair_fragmentation(&mut p);
        assert_eq!(after, before + 2 * 104);
        for o in [1u16, 2, 4, 6, 7, 8, 9, 10] {
            assert_eq!(get_item(&p, o).unwrap(), &[(o - 1) as u8; 100][..], "item {o}");
        }
        assert!(get_item(&p, 3).is_none() && get_item(&p, 5).is_none());
        assert_eq!(flags(&p) & PD_HAS_FREE_LINES, PD_HAS_FREE_LINES);
        assert_eq!(add_item(&mut p, b"reuse", None), Some(3));
        assert_eq!(add_item(&mut p, b"x", Some(5)), None, "5 is dead, not unused");
        assert_eq!(add_item(&mut p, b"end", Some(11)), Some(11));
    }
}
