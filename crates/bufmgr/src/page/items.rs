//! Line pointers and items: reading and setting line pointers, free space, adding an item
//! (`PageAddItem`), reading items through their line pointer and compacting the page
//! (`PageRepairFragmentation`).
//!
//! Locks touched: none; callers hold the buffer's content lock (exclusive for every change).

use lockstack_common::sync::hook::{Access, touch};

use super::layout::{
    ItemId, LpFlags, OffsetNumber, PD_HAS_FREE_LINES, SIZE_OF_ITEM_ID, SIZE_OF_PAGE_HEADER, flags, is_new,
    lower, maxalign, put_u16, set_flags, special_offset, upper,
};

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
    ItemId::unpack(u32::from_le_bytes(
        page[at..at + 4].try_into().expect("a 4-byte range of a page converts to [u8; 4]"),
    ))
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
/// [`MAXIMUM_ALIGNOF`](crate::page::MAXIMUM_ALIGNOF)-aligned offset.
///
/// Returns the offset number used, or `None` if the page lacks room (or `at` is not usable).
///
/// # Panics
/// If the page is not [`BLCKSZ`](crate::page::BLCKSZ) bytes or has not been initialised ([`is_new`]), or `item` is
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
    let lp = u32::from_le_bytes(
        page[at..at + SIZE_OF_ITEM_ID].try_into().expect("a 4-byte range of a page converts to [u8; 4]"),
    );
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
