//! Checking a page read from storage (`PageIsVerified`, `PageHeaderIsValid`): the header's
//! bounds and every line pointer, so that a page that passes is safe to every other function.
//!
//! Locks touched: none; the buffer manager runs it on a page it is reading in (`BM_IO_IN_PROGRESS`
//! set), before anyone else can see the page.

use super::items::{item_id, max_offset_number};
use super::layout::{
    BLCKSZ, ItemId, LpFlags, MAXIMUM_ALIGNOF, PD_VALID_FLAG_BITS, PG_PAGE_LAYOUT_VERSION, PageError,
    SIZE_OF_PAGE_HEADER, get_u16, lower, maxalign, special_offset, upper,
};

/// Checks a page just read from storage (PostgreSQL's `PageIsVerified` and `PageHeaderIsValid`,
/// `bufpage.c`), all but the checksum: [`FileSmgr`](crate::FileSmgr) with checksums on checks
/// `pd_checksum` ([`verify_checksum`](crate::page::verify_checksum)) as it reads the page, before this runs.
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
