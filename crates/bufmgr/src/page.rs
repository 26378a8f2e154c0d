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
//!
//! The module is split by concept: `page/layout.rs` (sizes, line pointers, `PageInit`, header
//! fields, errors), `page/items.rs` (line pointers and items), `page/verify.rs` (checking a page
//! read from storage) and `page/checksum.rs`. This file only re-exports them. Locks touched:
//! none; callers hold the buffer's content lock.

mod checksum;
mod items;
mod layout;
mod verify;

pub use checksum::{
    checksum, relation_checksum, set_checksum, set_relation_checksum, stored_checksum, verify_checksum,
    verify_relation_checksum,
};
pub use items::{
    add_item, free_space, get_item, get_item_mut, item_data, item_id, max_offset_number,
    repair_fragmentation, set_item_id,
};
pub use layout::{
    BLCKSZ, FIRST_OFFSET_NUMBER, ItemId, LpFlags, MAXIMUM_ALIGNOF, OffsetNumber, PD_ALL_VISIBLE,
    PD_HAS_FREE_LINES, PD_PAGE_FULL, PD_VALID_FLAG_BITS, PG_PAGE_LAYOUT_VERSION, PageError, PageVerifier,
    SIZE_OF_ITEM_ID, SIZE_OF_PAGE_HEADER, clear_all_visible, flags, init, is_all_visible, is_new, lower, lsn,
    maxalign, prune_xid, set_all_visible, set_flags, set_lsn, set_prune_xid, special, special_mut,
    special_offset, upper,
};
pub use verify::verify;

#[cfg(test)]
mod tests;
