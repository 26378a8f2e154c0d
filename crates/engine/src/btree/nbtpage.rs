//! The B-tree's pages: the heap TID its leaves point to ([`Tid`]), the special space
//! (`BTPageOpaqueData`: level, flags, right link, high key), leaf and internal items ordered by
//! (key, heap TID), the metapage's constants, the in-page operations (lower bound, sorted
//! insert, init) and the check of a page read from disk.

use lockstack_bufmgr::page::{self, BLCKSZ, OffsetNumber};
use lockstack_common::sync::hook::{Access, touch};

/// A heap tuple identifier (`ItemPointerData`): block and 1-based line pointer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    /// Heap block.
    pub block: u32,
    /// Line pointer (1-based).
    pub offset: u16,
}

impl Tid {
    /// The TID as 6 little-endian bytes (block, then offset): the payload of the heap's
    /// row-lock and update WAL records.
    pub fn to_bytes(self) -> [u8; 6] {
        let mut b = [0u8; 6];
        b[0..4].copy_from_slice(&self.block.to_le_bytes());
        b[4..6].copy_from_slice(&self.offset.to_le_bytes());
        b
    }

    pub(super) fn tie(self) -> u64 {
        (u64::from(self.block) << 16) | u64::from(self.offset)
    }

    pub(super) fn from_tie(t: u64) -> Tid {
        Tid { block: (t >> 16) as u32, offset: (t & 0xFFFF) as u16 }
    }
}

/// Bytes of B-tree special space: level u16, flags u16, right link u32, high key i64 + tie u64.
pub const PAGE_OPAQUE_SIZE: usize = 24;

pub(super) const LEAF_ITEM: usize = 16;

/// Most items a leaf can hold: its usable space over an item and its line pointer.
pub(super) const LEAF_ITEMS_MAX: usize =
    (BLCKSZ - page::SIZE_OF_PAGE_HEADER - PAGE_OPAQUE_SIZE) / (LEAF_ITEM + page::SIZE_OF_ITEM_ID);

pub(super) const INTERNAL_ITEM: usize = 24;

pub(super) const F_LEAF: u16 = 1;

pub(super) const F_ROOT: u16 = 2;

pub(super) const F_HAS_HIGH_KEY: u16 = 4;

pub(super) const NO_RIGHT: u32 = u32::MAX;

pub(super) const META_BLOCK: u32 = 0;

pub(super) const META_MAGIC: u32 = 0x0005_3162; // nbtree's magic number

/// Where the metapage's special space keeps the index's own relation number (bytes 12..16):
/// magic (0..4), root (4..8) and level (8..10) are PostgreSQL's `BTMetaPageData` fields; the
/// relation number is lockstack's, so that an index file names the index it holds.
pub(super) const META_REL: std::ops::Range<usize> = 12..16;

#[derive(Copy, Clone, Debug)]
pub(super) struct Opaque {
    pub(super) level: u16,
    pub(super) flags: u16,
    pub(super) right: u32,
    pub(super) high: Option<(i64, u64)>,
}

pub(super) fn opaque(p: &[u8]) -> Opaque {
    let s = page::special(p);
    touch(s.as_ptr(), PAGE_OPAQUE_SIZE.min(s.len()), Access::Read);
    let flags = u16::from_le_bytes([s[2], s[3]]);
    Opaque {
        level: u16::from_le_bytes([s[0], s[1]]),
        flags,
        right: u32::from_le_bytes(s[4..8].try_into().expect("a 4-byte range converts to [u8; 4]")),
        high: (flags & F_HAS_HIGH_KEY != 0).then(|| {
            (
                i64::from_le_bytes(s[8..16].try_into().expect("an 8-byte range converts to [u8; 8]")),
                u64::from_le_bytes(s[16..24].try_into().expect("an 8-byte range converts to [u8; 8]")),
            )
        }),
    }
}

pub(super) fn set_opaque(p: &mut [u8], o: Opaque) {
    let s = page::special_mut(p);
    let flags = if o.high.is_some() { o.flags | F_HAS_HIGH_KEY } else { o.flags & !F_HAS_HIGH_KEY };
    s[0..2].copy_from_slice(&o.level.to_le_bytes());
    s[2..4].copy_from_slice(&flags.to_le_bytes());
    s[4..8].copy_from_slice(&o.right.to_le_bytes());
    let (k, t) = o.high.unwrap_or((0, 0));
    s[8..16].copy_from_slice(&k.to_le_bytes());
    s[16..24].copy_from_slice(&t.to_le_bytes());
    touch(s.as_ptr(), 24, Access::Write);
}

/// One decoded item.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) key: i64,
    pub(super) tie: u64,
    pub(super) child: u32,
}

impl Item {
    pub(super) fn pos(&self) -> (i64, u64) {
        (self.key, self.tie)
    }

    pub(super) fn encode(&self, leaf: bool) -> Vec<u8> {
        let mut v = Vec::with_capacity(INTERNAL_ITEM);
        v.extend_from_slice(&self.key.to_le_bytes());
        v.extend_from_slice(&self.tie.to_le_bytes());
        if !leaf {
            v.extend_from_slice(&self.child.to_le_bytes());
            v.extend_from_slice(&0u32.to_le_bytes());
        }
        v
    }
}

pub(super) fn item_at(p: &[u8], off: OffsetNumber) -> Item {
    let b = page::get_item(p, off).expect("every item of a B-tree page is LP_NORMAL (the B-tree never marks one otherwise, and verify_page checks pages read from disk)");
    touch(b.as_ptr(), b.len(), Access::Read);
    Item {
        key: i64::from_le_bytes(b[0..8].try_into().expect("an 8-byte range converts to [u8; 8]")),
        tie: u64::from_le_bytes(b[8..16].try_into().expect("an 8-byte range converts to [u8; 8]")),
        child: if b.len() >= INTERNAL_ITEM {
            u32::from_le_bytes(b[16..20].try_into().expect("a 4-byte range converts to [u8; 4]"))
        } else {
            0
        },
    }
}

#[inline]
pub(super) fn nitems(p: &[u8]) -> OffsetNumber {
    page::max_offset_number(p)
}

/// The (key, tie) of item `off`, which must be in `1..=nitems(p)`: read straight through its
/// line pointer, as `_bt_compare` does (every B-tree item is normal and at least
/// [`LEAF_ITEM`] bytes long).
#[inline]
pub(super) fn pos_at(p: &[u8], off: OffsetNumber) -> (i64, u64) {
    let b = page::item_data(p, off);
    (
        i64::from_le_bytes(b[0..8].try_into().expect("an 8-byte range converts to [u8; 8]")),
        u64::from_le_bytes(b[8..16].try_into().expect("an 8-byte range converts to [u8; 8]")),
    )
}

/// First offset whose item is >= `target` (n+1 if none).
pub(super) fn lower_bound(p: &[u8], target: (i64, u64)) -> OffsetNumber {
    let (mut lo, mut hi) = (1u16, nitems(p) + 1);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pos_at(p, mid) < target {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

pub(super) fn must_move_right(o: &Opaque, target: (i64, u64)) -> bool {
    o.high.is_some_and(|h| target >= h)
}

/// Inserts `item` so that line pointers stay sorted; false if the page is full.
pub(super) fn insert_sorted(p: &mut [u8], item: &Item, leaf: bool) -> bool {
    let bytes = item.encode(leaf);
    let pos = lower_bound(p, item.pos());
    let Some(new_off) = page::add_item(p, &bytes, None) else { return false };
    let new_id = page::item_id(p, new_off);
    let mut i = new_off;
    while i > pos {
        let prev = page::item_id(p, i - 1);
        page::set_item_id(p, i, prev);
        i -= 1;
    }
    page::set_item_id(p, pos, new_id);
    true
}

pub(super) fn init_page(p: &mut [u8], o: Opaque) {
    page::init(p, PAGE_OPAQUE_SIZE);
    set_opaque(p, o);
}

/// Checks the shape of block `block` of index `rel` just read from its file (after
/// `lockstack_bufmgr::page::verify` passed): the metapage's special space and the relation it
/// names (which must be `rel`: a file swapped with another index's fails here), and on other pages
/// the opaque data's size, leaf flag against level, and every item normal and of its level's
/// length, at least one on an internal page. This is what the code reading index pages relies on
/// to be free of out-of-range accesses (PostgreSQL's `_bt_checkpage`, extended to the items).
///
/// # Errors
/// A one-line reason.
pub(crate) fn verify_page(rel: u32, block: u32, p: &[u8]) -> Result<(), BtreePageError> {
    let special = BLCKSZ - page::special_offset(p);
    if block == META_BLOCK {
        if special != 16 {
            return Err(BtreePageError::MetaSpecial { special });
        }
        let s = page::special(p);
        let owner = u32::from_le_bytes(s[META_REL].try_into().expect("a 4-byte range converts to [u8; 4]"));
        return if owner == rel { Ok(()) } else { Err(BtreePageError::OtherRelation { owner, rel }) };
    }
    if special != PAGE_OPAQUE_SIZE {
        return Err(BtreePageError::Special { special });
    }
    let o = opaque(p);
    let leaf = o.flags & F_LEAF != 0;
    if leaf != (o.level == 0) {
        return Err(BtreePageError::LeafFlag { level: o.level, leaf });
    }
    if !leaf && nitems(p) == 0 {
        return Err(BtreePageError::EmptyInternal);
    }
    let want = if leaf { LEAF_ITEM } else { INTERNAL_ITEM };
    for off in 1..=nitems(p) {
        match page::get_item(p, off) {
            Some(b) if b.len() == want => {}
            _ => return Err(BtreePageError::BadItem { off, want }),
        }
    }
    Ok(())
}

/// Why [`verify_page`] refused a B-tree page (a damaged or swapped file).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BtreePageError {
    /// The metapage's special space is not 16 bytes.
    #[error("B-tree metapage has {special} bytes of special space, not 16")]
    MetaSpecial {
        /// Its size, bytes.
        special: usize,
    },
    /// The metapage names another relation (a file swapped with another index's).
    #[error("the file holds the B-tree of relation {owner}, not of relation {rel}")]
    OtherRelation {
        /// The relation the metapage names.
        owner: u32,
        /// The relation expected.
        rel: u32,
    },
    /// A page's special space is not the opaque data's size.
    #[error("B-tree page has {special} bytes of special space, not {PAGE_OPAQUE_SIZE}")]
    Special {
        /// Its size, bytes.
        special: usize,
    },
    /// The leaf flag disagrees with the level (leaves are level 0).
    #[error("B-tree page at level {level} has leaf flag {leaf}")]
    LeafFlag {
        /// The page's level.
        level: u16,
        /// Its leaf flag.
        leaf: bool,
    },
    /// An internal page without items.
    #[error("internal B-tree page has no items")]
    EmptyInternal,
    /// An item that is not normal or not of its level's length.
    #[error("B-tree item {off} is not a normal item of {want} bytes")]
    BadItem {
        /// Its offset number.
        off: u16,
        /// The length its level's items have, bytes.
        want: usize,
    },
}
