//! A B-tree index whose pages live in the buffer pool: PostgreSQL's nbtree design
//! (`src/backend/access/nbtree/`, README; Lehman & Yao, "Efficient Locking for Concurrent
//! Operations on B-Trees", 1981) reduced to what the engine needs: unique 64-bit keys with
//! duplicates allowed across versions, a bulk build at load time, look-ups, and inserts with
//! page splits.
//!
//! Layout: block 0 is the metapage (root block and level); every other page is a slotted page
//! (`lockstack_bufmgr::page`) whose special space holds [`PAGE_OPAQUE_SIZE`] bytes: level, flags,
//! right sibling and the high key. Items are ordered by (key, tie) where the tie is the heap TID,
//! so every entry is unique (PostgreSQL 12's heap-TID tiebreaker). Leaf items are
//! (key, heap TID); internal items are (separator key, tie, child block), and the first item
//! of an internal page stands for minus infinity.
//!
//! Concurrency is Lehman & Yao's: a reader holds at most one page lock, releases a page before
//! reading its child, and moves right while its target is at or beyond a page's high key, which
//! is how it copes with a split that happened in between. Structural changes (splits and the
//! downlink inserts they cause) are serialised by one LWLock per index; a plain insert into a
//! leaf with room needs only that leaf's exclusive content lock. Looking up a key pins and
//! share-locks the root, so under pgbench the root is the hottest buffer in the pool, as in
//! PostgreSQL.

use lockstack_common::sync::{AtomicU32, Ordering};

use lockstack_bufmgr::page::{self, BLCKSZ, OffsetNumber};
use lockstack_bufmgr::{BackendBuffers, Buffer, BufferError, ContentGuard, ForkNumber};
use lockstack_common::{BlockNumber, Oid, TrancheId};
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};

/// A heap tuple identifier (`ItemPointerData`): block and 1-based line pointer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tid {
    /// Heap block.
    pub block: u32,
    /// Line pointer (1-based).
    pub offset: u16,
}

impl Tid {
    fn tie(self) -> u64 {
        (u64::from(self.block) << 16) | u64::from(self.offset)
    }

    fn from_tie(t: u64) -> Tid {
        Tid { block: (t >> 16) as u32, offset: (t & 0xFFFF) as u16 }
    }
}

/// Bytes of B-tree special space: level u16, flags u16, right link u32, high key i64 + tie u64.
pub const PAGE_OPAQUE_SIZE: usize = 24;
const LEAF_ITEM: usize = 16;
/// Most items a leaf can hold: its usable space over an item and its line pointer.
const LEAF_ITEMS_MAX: usize =
    (BLCKSZ - page::SIZE_OF_PAGE_HEADER - PAGE_OPAQUE_SIZE) / (LEAF_ITEM + page::SIZE_OF_ITEM_ID);
const INTERNAL_ITEM: usize = 24;
const F_LEAF: u16 = 1;
const F_ROOT: u16 = 2;
const F_HAS_HIGH_KEY: u16 = 4;
const NO_RIGHT: u32 = u32::MAX;
const META_BLOCK: u32 = 0;
const META_MAGIC: u32 = 0x0005_3162; // nbtree's magic number

#[derive(Copy, Clone, Debug)]
struct Opaque {
    level: u16,
    flags: u16,
    right: u32,
    high: Option<(i64, u64)>,
}

fn opaque(p: &[u8]) -> Opaque {
    let s = page::special(p);
    let flags = u16::from_le_bytes([s[2], s[3]]);
    Opaque {
        level: u16::from_le_bytes([s[0], s[1]]),
        flags,
        right: u32::from_le_bytes(s[4..8].try_into().expect("4 bytes")),
        high: (flags & F_HAS_HIGH_KEY != 0).then(|| {
            (
                i64::from_le_bytes(s[8..16].try_into().expect("8 bytes")),
                u64::from_le_bytes(s[16..24].try_into().expect("8 bytes")),
            )
        }),
    }
}

fn set_opaque(p: &mut [u8], o: Opaque) {
    let s = page::special_mut(p);
    let flags = if o.high.is_some() { o.flags | F_HAS_HIGH_KEY } else { o.flags & !F_HAS_HIGH_KEY };
    s[0..2].copy_from_slice(&o.level.to_le_bytes());
    s[2..4].copy_from_slice(&flags.to_le_bytes());
    s[4..8].copy_from_slice(&o.right.to_le_bytes());
    let (k, t) = o.high.unwrap_or((0, 0));
    s[8..16].copy_from_slice(&k.to_le_bytes());
    s[16..24].copy_from_slice(&t.to_le_bytes());
}

/// One decoded item.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Item {
    key: i64,
    tie: u64,
    child: u32,
}

impl Item {
    fn pos(&self) -> (i64, u64) {
        (self.key, self.tie)
    }

    fn encode(&self, leaf: bool) -> Vec<u8> {
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

fn item_at(p: &[u8], off: OffsetNumber) -> Item {
    let b = page::get_item(p, off).expect("B-tree items are always normal");
    Item {
        key: i64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
        tie: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        child: if b.len() >= INTERNAL_ITEM {
            u32::from_le_bytes(b[16..20].try_into().expect("4 bytes"))
        } else {
            0
        },
    }
}

#[inline]
fn nitems(p: &[u8]) -> OffsetNumber {
    page::max_offset_number(p)
}

/// The (key, tie) of item `off`, which must be in `1..=nitems(p)`: read straight through its
/// line pointer, as `_bt_compare` does (every B-tree item is normal and at least
/// [`LEAF_ITEM`] bytes long).
#[inline]
fn pos_at(p: &[u8], off: OffsetNumber) -> (i64, u64) {
    let b = page::item_data(p, off);
    (
        i64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
        u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
    )
}

/// First offset whose item is >= `target` (n+1 if none).
fn lower_bound(p: &[u8], target: (i64, u64)) -> OffsetNumber {
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

/// What a page's parent says of the keys on it: every key is at least `low` (the downlink's
/// separator) and below `high` (the next separator), when the parent had one. A page that
/// split after the parent was read holds a prefix of that range, so the range can be wide but
/// never excludes a key the page holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyRange {
    low: Option<i64>,
    high: Option<i64>,
}

impl KeyRange {
    /// Nothing known (the root, or a page reached by a right-link).
    const UNKNOWN: KeyRange = KeyRange { low: None, high: None };
}

/// How a page is searched for a key.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub enum Search {
    /// Bisection over the line pointers (`_bt_binsrch`, PostgreSQL `nbtsearch.c`): about
    /// log2(items) probes, each a line pointer and the item it points to.
    Binary,
    /// Interpolation from the key range the parent gives (Graefe, "B-tree indexes,
    /// interpolation search, and skew", DaMoN 2006): a first probe where the key would sit if
    /// keys were spread evenly over the range, then a galloping (exponential) search from
    /// there, then bisection of what is left. Dense keys such as pgbench's are found in two
    /// probes; the galloping bounds the worst case at about twice bisection's probes. Used
    /// only where the range is known; otherwise the page is bisected.
    #[default]
    Interpolation,
}

impl std::str::FromStr for Search {
    type Err = String;

    /// Parses `interpolation` or `binary`.
    fn from_str(s: &str) -> Result<Search, String> {
        match s {
            "interpolation" => Ok(Search::Interpolation),
            "binary" => Ok(Search::Binary),
            _ => Err(format!("unknown B-tree page search '{s}' (valid: interpolation, binary)")),
        }
    }
}

impl std::fmt::Display for Search {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Search::Interpolation => "interpolation",
            Search::Binary => "binary",
        })
    }
}

/// The first offset in `lo..hi` for which `below` is false (`hi` if none), where `below` is
/// true on a prefix of the range: bisection, or galloping out from `guess` first.
#[inline]
fn partition_point(lo: u16, hi: u16, guess: Option<u16>, below: impl Fn(u16) -> bool) -> u16 {
    let (mut lo, mut hi) = (lo, hi);
    if let Some(g) = guess
        && lo < hi
    {
        // Invariant from here on: every offset below `lo` is below, none from `hi` on is.
        let g = g.clamp(lo, hi - 1);
        let mut step = 1u16;
        if below(g) {
            lo = g + 1;
            while lo < hi {
                let j = lo.saturating_add(step - 1).min(hi - 1);
                if below(j) {
                    lo = j + 1;
                    step = step.saturating_mul(2);
                } else {
                    hi = j;
                    break;
                }
            }
        } else {
            hi = g;
            while lo < hi {
                let j = hi.saturating_sub(step).max(lo);
                if below(j) {
                    lo = j + 1;
                    break;
                }
                hi = j;
                step = step.saturating_mul(2);
            }
        }
    }
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Where `key` would sit among `slots` evenly spread slots covering `range`, as an offset from
/// `first`: None when the range is not fully known or `key` lies outside it.
#[inline]
fn interpolate(range: KeyRange, key: i64, first: u16, slots: u16) -> Option<u16> {
    let (low, high) = (range.low?, range.high?);
    if key < low || key >= high {
        return None;
    }
    let span = i128::from(high) - i128::from(low);
    let at = (i128::from(key) - i128::from(low)) * i128::from(slots) / span;
    Some(first.saturating_add(u16::try_from(at).unwrap_or(u16::MAX)))
}

/// First offset whose item is >= `target` (n+1 if none), searched as `search` says with the
/// page's key range `range`.
#[inline]
fn lower_bound_within(p: &[u8], target: (i64, u64), range: KeyRange, search: Search) -> OffsetNumber {
    let n = nitems(p);
    let guess = match search {
        Search::Binary => None,
        Search::Interpolation => interpolate(range, target.0, 1, n),
    };
    partition_point(1, n + 1, guess, |off| pos_at(p, off) < target)
}

/// The child to descend into for `target` on an internal page (the last item <= target, with
/// the first item counting as minus infinity), searched as `search` says with the page's key
/// range `range`; also returns the child's key range.
#[inline]
fn find_child_within(p: &[u8], target: (i64, u64), range: KeyRange, search: Search) -> (u32, KeyRange) {
    let n = nitems(p);
    // Item 1 stands for the range's low end: the answer is the first item above the target.
    let guess = match search {
        Search::Binary => None,
        Search::Interpolation => interpolate(range, target.0, 2, n),
    };
    let at = partition_point(2, n + 1, guess, |off| pos_at(p, off) <= target);
    let b = page::item_data(p, at - 1);
    let child = u32::from_le_bytes(b[16..20].try_into().expect("internal items hold a child block"));
    let low = if at > 2 { Some(pos_at(p, at - 1).0) } else { range.low };
    let high = if at <= n { Some(pos_at(p, at).0) } else { range.high };
    (child, KeyRange { low, high })
}

fn must_move_right(o: &Opaque, target: (i64, u64)) -> bool {
    o.high.is_some_and(|h| target >= h)
}

/// Inserts `item` so that line pointers stay sorted; false if the page is full.
fn insert_sorted(p: &mut [u8], item: &Item, leaf: bool) -> bool {
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

fn init_page(p: &mut [u8], o: Opaque) {
    page::init(p, PAGE_OPAQUE_SIZE);
    set_opaque(p, o);
}

/// Checks the shape of index block `block` just read from its file (after
/// `lockstack_bufmgr::page::verify` passed): the metapage's special space, and on other pages
/// the opaque data's size, leaf flag against level, and every item normal and of its level's
/// length, at least one on an internal page. This is what the code reading index pages relies on
/// to be free of out-of-range accesses (PostgreSQL's `_bt_checkpage`, extended to the items).
///
/// # Errors
/// A one-line reason.
pub(crate) fn verify_page(block: u32, p: &[u8]) -> Result<(), String> {
    let special = BLCKSZ - page::special_offset(p);
    if block == META_BLOCK {
        return if special == 16 {
            Ok(())
        } else {
            Err(format!("B-tree metapage has {special} bytes of special space, not 16"))
        };
    }
    if special != PAGE_OPAQUE_SIZE {
        return Err(format!("B-tree page has {special} bytes of special space, not {PAGE_OPAQUE_SIZE}"));
    }
    let o = opaque(p);
    let leaf = o.flags & F_LEAF != 0;
    if leaf != (o.level == 0) {
        return Err(format!("B-tree page at level {} has leaf flag {leaf}", o.level));
    }
    if !leaf && nitems(p) == 0 {
        return Err("internal B-tree page has no items".into());
    }
    let want = if leaf { LEAF_ITEM } else { INTERNAL_ITEM };
    for off in 1..=nitems(p) {
        match page::get_item(p, off) {
            Some(b) if b.len() == want => {}
            _ => return Err(format!("B-tree item {off} is not a normal item of {want} bytes")),
        }
    }
    Ok(())
}

/// Errors of index operations.
#[derive(Debug)]
pub enum BTreeError {
    /// The buffer pool failed (I/O, or no unpinned buffer available).
    Buffer(BufferError),
    /// The structure check found a broken invariant (message says which).
    Corrupt(String),
}

impl std::fmt::Display for BTreeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BTreeError::Buffer(e) => write!(f, "{e}"),
            BTreeError::Corrupt(m) => write!(f, "index corrupt: {m}"),
        }
    }
}

impl std::error::Error for BTreeError {}

impl From<BufferError> for BTreeError {
    fn from(e: BufferError) -> Self {
        BTreeError::Buffer(e)
    }
}

/// A B-tree on relation `rel` in a buffer pool (see the module documentation).
pub struct BTree {
    rel: Oid,
    root: AtomicU32,
    split_lock: LwLock,
    search: Search,
}

impl std::fmt::Debug for BTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BTree")
            .field("rel", &self.rel)
            .field("root", &self.root.load(Ordering::Relaxed))
            .finish()
    }
}

/// Pins `block` and returns it with its content lock.
fn lock_block<'a>(
    bb: &'a BackendBuffers,
    rel: Oid,
    block: u32,
    mode: LwLockMode,
) -> Result<(Buffer, ContentGuard<'a>), BufferError> {
    let buf = bb.read_block(rel, BlockNumber(block))?;
    Ok((buf, bb.lock(buf, mode)))
}

impl BTree {
    /// Builds an index on `rel` (an empty relation) from `entries` sorted by key then TID,
    /// filling leaf pages to `fillfactor` percent (PostgreSQL's default for B-trees is 90).
    ///
    /// # Errors
    /// Buffer pool errors; [`BTreeError::Corrupt`] if `entries` are not sorted.
    ///
    /// # Panics
    /// If `fillfactor` is not 10..=100.
    pub fn build(
        bb: &BackendBuffers,
        rel: Oid,
        entries: impl IntoIterator<Item = (i64, Tid)>,
        fillfactor: u8,
        lwlock_kind: LwLockKind,
    ) -> Result<BTree, BTreeError> {
        assert!((10..=100).contains(&fillfactor), "fillfactor must be 10..=100");
        let (meta_buf, meta_block) = bb.extend(rel, ForkNumber::Main)?;
        assert_eq!(meta_block.0, META_BLOCK, "index relation must be empty");
        let usable = BLCKSZ - page::SIZE_OF_PAGE_HEADER - PAGE_OPAQUE_SIZE;
        let limit = usable * usize::from(fillfactor) / 100;
        // Level 0 from the entries, then each level from the first items of the one below.
        let mut level_items: Vec<Item> = Vec::new();
        let mut last: Option<(i64, u64)> = None;
        for (key, tid) in entries {
            let it = Item { key, tie: tid.tie(), child: 0 };
            if last.is_some_and(|l| l >= it.pos()) {
                return Err(BTreeError::Corrupt(format!("build input not sorted at key {key}")));
            }
            last = Some(it.pos());
            level_items.push(it);
        }
        let mut level = 0u16;
        let root = loop {
            let leaf = level == 0;
            let item_size =
                page::maxalign(if leaf { LEAF_ITEM } else { INTERNAL_ITEM }) + page::SIZE_OF_ITEM_ID;
            let per_page = (limit / item_size).max(2);
            let chunks: Vec<&[Item]> =
                if level_items.is_empty() { vec![&[][..]] } else { level_items.chunks(per_page).collect() };
            let mut blocks = Vec::with_capacity(chunks.len());
            for _ in &chunks {
                let (buf, blk) = bb.extend(rel, ForkNumber::Main)?;
                bb.release(buf);
                blocks.push(blk.0);
            }
            let mut next_level = Vec::with_capacity(chunks.len());
            for (i, chunk) in chunks.iter().enumerate() {
                let (buf, mut g) = lock_block(bb, rel, blocks[i], LwLockMode::Exclusive)?;
                let p = g.page_mut();
                let high = chunks.get(i + 1).map(|c| c[0].pos());
                let mut flags = if leaf { F_LEAF } else { 0 };
                if chunks.len() == 1 {
                    flags |= F_ROOT;
                }
                let right = if i + 1 < blocks.len() { blocks[i + 1] } else { NO_RIGHT };
                init_page(p, Opaque { level, flags, right, high });
                for it in chunk.iter() {
                    let ok = page::add_item(p, &it.encode(leaf), None).is_some();
                    debug_assert!(ok, "build sized pages to fit");
                }
                g.mark_dirty();
                drop(g);
                bb.release(buf);
                let first = chunk.first().map(|c| c.pos()).unwrap_or((i64::MIN, 0));
                next_level.push(Item { key: first.0, tie: first.1, child: blocks[i] });
            }
            if blocks.len() == 1 {
                break blocks[0];
            }
            level_items = next_level;
            level += 1;
        };
        let mut g = bb.lock(meta_buf, LwLockMode::Exclusive);
        let p = g.page_mut();
        page::init(p, 16);
        let s = page::special_mut(p);
        s[0..4].copy_from_slice(&META_MAGIC.to_le_bytes());
        s[4..8].copy_from_slice(&root.to_le_bytes());
        s[8..10].copy_from_slice(&level.to_le_bytes());
        g.mark_dirty();
        drop(g);
        bb.release(meta_buf);
        Ok(BTree {
            rel,
            root: AtomicU32::new(root),
            split_lock: LwLock::new(lwlock_kind, TrancheId::register("BtreeSplit"), rel.0),
            search: Search::default(),
        })
    }

    /// Opens an existing index from its metapage (block 0), as `_bt_getroot` reads `btm_root`
    /// (PostgreSQL `src/backend/access/nbtree/nbtpage.c`).
    ///
    /// # Errors
    /// Buffer pool errors; [`BTreeError::Corrupt`] when block 0 is not a metapage.
    pub fn open(bb: &BackendBuffers, rel: Oid, lwlock_kind: LwLockKind) -> Result<BTree, BTreeError> {
        let (buf, g) = lock_block(bb, rel, META_BLOCK, LwLockMode::Shared)?;
        let s = page::special(g.page());
        let magic = u32::from_le_bytes(s[0..4].try_into().expect("4 bytes"));
        let root = u32::from_le_bytes(s[4..8].try_into().expect("4 bytes"));
        drop(g);
        bb.release(buf);
        if magic != META_MAGIC {
            return Err(BTreeError::Corrupt(format!("index {rel}: block 0 is not a B-tree metapage")));
        }
        Ok(BTree {
            rel,
            root: AtomicU32::new(root),
            split_lock: LwLock::new(lwlock_kind, TrancheId::register("BtreeSplit"), rel.0),
            search: Search::default(),
        })
    }

    /// Sets how pages are searched (default [`Search::Interpolation`]): the internal pages of
    /// every descent, and the leaf of a look-up (an insert places its item by bisection).
    #[must_use]
    pub fn with_search(mut self, search: Search) -> BTree {
        self.search = search;
        self
    }

    /// How pages are searched.
    pub fn search(&self) -> Search {
        self.search
    }

    /// The index relation.
    pub fn rel(&self) -> Oid {
        self.rel
    }

    /// Levels above the leaves (0 = the root is a leaf).
    ///
    /// # Errors
    /// Buffer pool errors.
    pub fn height(&self, bb: &BackendBuffers) -> Result<u16, BufferError> {
        let (buf, g) = lock_block(bb, self.rel, self.root_block(), LwLockMode::Shared)?;
        let level = opaque(g.page()).level;
        drop(g);
        bb.release(buf);
        Ok(level)
    }

    /// The current root block.
    pub fn root_block(&self) -> u32 {
        self.root.load(Ordering::Acquire)
    }

    /// Descends to the leaf that may hold `target`; returns it pinned and locked in `mode`,
    /// with the key range its parent gave it. With `stack`, pushes the internal blocks visited
    /// on it (for downlink inserts after a split); look-ups pass `None` and allocate nothing.
    fn descend<'a>(
        &self,
        bb: &'a BackendBuffers,
        target: (i64, u64),
        leaf_mode: LwLockMode,
        mut stack: Option<&mut Vec<u32>>,
    ) -> Result<(Buffer, ContentGuard<'a>, KeyRange), BufferError> {
        let mut blk = self.root_block();
        let mut range = KeyRange::UNKNOWN;
        let mut to_leaf = false;
        let mut steps = 0;
        loop {
            self.check_steps(bb, &mut steps, blk)?;
            let buf = bb.read_block(self.rel, BlockNumber(blk))?;
            if to_leaf {
                // A leaf is seldom in cache (the upper levels are).
                match (self.search, range.low, range.high) {
                    (Search::Interpolation, Some(low), Some(high)) => {
                        // The search reads the header, the special space and a line or two
                        // around its first probe: start loading those. Where the first probe's
                        // line pointer is depends on the item count, still on its way in the
                        // header; guess it as one item per key of the range (at most a full
                        // leaf). A wrong guess costs one wasted line.
                        bb.prefetch(buf, 0..1);
                        bb.prefetch(buf, BLCKSZ - 1..BLCKSZ);
                        let n_guess =
                            u16::try_from(high.abs_diff(low).min(LEAF_ITEMS_MAX as u64)).unwrap_or(1);
                        if let Some(g) = interpolate(range, target.0, 1, n_guess) {
                            let lp = page::SIZE_OF_PAGE_HEADER + usize::from(g - 1) * page::SIZE_OF_ITEM_ID;
                            bb.prefetch(buf, lp..lp + 1);
                        }
                    }
                    // Bisection reads lines all over the page: start loading all of it, so
                    // that its misses overlap rather than follow one another.
                    _ => bb.prefetch(buf, 0..BLCKSZ),
                }
            }
            let g = bb.lock(buf, LwLockMode::Shared);
            let o = opaque(g.page());
            if must_move_right(&o, target) {
                drop(g);
                bb.release(buf);
                blk = o.right;
                range = KeyRange { low: o.high.map(|h| h.0), high: None };
                continue;
            }
            to_leaf = o.level == 1;
            if o.flags & F_LEAF != 0 {
                if leaf_mode == LwLockMode::Shared {
                    return Ok((buf, g, range));
                }
                drop(g);
                let (buf, g, moved) = self.move_right_locked(bb, buf, target)?;
                return Ok((buf, g, if moved { KeyRange::UNKNOWN } else { range }));
            }
            let (child, child_range) = find_child_within(g.page(), target, range, self.search);
            drop(g);
            bb.release(buf);
            if let Some(s) = stack.as_deref_mut() {
                s.push(blk);
            }
            blk = child;
            range = child_range;
        }
    }

    /// Locks `buf` exclusively and moves right until `target` belongs on the page; true in
    /// the third place if it moved.
    fn move_right_locked<'a>(
        &self,
        bb: &'a BackendBuffers,
        mut buf: Buffer,
        target: (i64, u64),
    ) -> Result<(Buffer, ContentGuard<'a>, bool), BufferError> {
        let (mut steps, mut blk) = (0, u32::MAX);
        let mut moved = false;
        loop {
            self.check_steps(bb, &mut steps, blk)?;
            let g = bb.lock(buf, LwLockMode::Exclusive);
            let o = opaque(g.page());
            if !must_move_right(&o, target) {
                return Ok((buf, g, moved));
            }
            drop(g);
            bb.release(buf);
            blk = o.right;
            moved = true;
            buf = bb.read_block(self.rel, BlockNumber(blk))?;
        }
    }

    /// Appends every heap TID indexed under `key` to `out`, in TID order.
    ///
    /// # Errors
    /// Buffer pool errors.
    pub fn lookup(&self, bb: &BackendBuffers, key: i64, out: &mut Vec<Tid>) -> Result<(), BufferError> {
        let (mut buf, mut g, range) = self.descend(bb, (key, 0), LwLockMode::Shared, None)?;
        let mut off = lower_bound_within(g.page(), (key, 0), range, self.search);
        let (mut steps, mut blk) = (0, u32::MAX);
        loop {
            self.check_steps(bb, &mut steps, blk)?;
            let n = nitems(g.page());
            while off <= n {
                let (k, tie) = pos_at(g.page(), off);
                if k != key {
                    drop(g);
                    bb.release(buf);
                    return Ok(());
                }
                out.push(Tid::from_tie(tie));
                off += 1;
            }
            // Ran off the page: equal keys may continue on the right sibling.
            let o = opaque(g.page());
            drop(g);
            bb.release(buf);
            match o.high {
                Some((hk, _)) if hk == key && o.right != NO_RIGHT => {
                    blk = o.right;
                    buf = bb.read_block(self.rel, BlockNumber(blk))?;
                    g = bb.lock(buf, LwLockMode::Shared);
                    off = 1;
                }
                _ => return Ok(()),
            }
        }
    }

    /// Counts one more page visited by a walk (descent or right-links); a walk that visits
    /// more pages than the index has is going round a cycle that only a damaged file can
    /// hold, and fails with [`BufferError::InvalidPage`] instead of looping forever.
    fn check_steps(&self, bb: &BackendBuffers, steps: &mut u32, blk: u32) -> Result<(), BufferError> {
        *steps += 1;
        if *steps > 64 && *steps > bb.pool().nblocks(self.rel, ForkNumber::Main)? {
            return Err(BufferError::InvalidPage {
                tag: lockstack_bufmgr::BufferTag::new(self.rel, ForkNumber::Main, BlockNumber(blk)),
                reason: format!(
                    "a B-tree walk visited {steps} pages, more than the index has (a cycle of links)"
                ),
            });
        }
        Ok(())
    }

    /// Removes the entry (`key`, `tid`) if present (the effect of `_bt_killitems` followed by
    /// the page's next simple deletion); returns whether it was there. The page is rewritten
    /// without the item, keeping its links and high key.
    ///
    /// # Errors
    /// Buffer pool errors.
    pub fn delete(&self, bb: &BackendBuffers, key: i64, tid: Tid) -> Result<bool, BufferError> {
        let target = (key, tid.tie());
        let (buf, mut g, _) = self.descend(bb, target, LwLockMode::Exclusive, None)?;
        let p = g.page_mut();
        let o = opaque(p);
        let leaf = o.flags & F_LEAF != 0;
        let pos = lower_bound(p, target);
        let found = pos <= nitems(p) && item_at(p, pos).pos() == target;
        if found {
            let items: Vec<Item> = (1..=nitems(p)).filter(|&i| i != pos).map(|i| item_at(p, i)).collect();
            init_page(p, o);
            for it in &items {
                page::add_item(p, &it.encode(leaf), None).expect("fewer items than before");
            }
            g.mark_dirty();
        }
        drop(g);
        bb.release(buf);
        Ok(found)
    }

    /// Adds the entry (`key`, `tid`) (`_bt_doinsert`), splitting pages as needed.
    ///
    /// # Errors
    /// Buffer pool errors (including running out of unpinned buffers).
    pub fn insert(&self, bb: &BackendBuffers, key: i64, tid: Tid) -> Result<(), BufferError> {
        let item = Item { key, tie: tid.tie(), child: 0 };
        {
            let (buf, mut g, _) = self.descend(bb, item.pos(), LwLockMode::Exclusive, None)?;
            let inserted = insert_sorted(g.page_mut(), &item, true);
            if inserted {
                g.mark_dirty();
            }
            drop(g);
            bb.release(buf);
            if inserted {
                return Ok(());
            }
        }
        // The leaf is full: split under the index's structure lock, then retry from the top.
        let held = self.split_lock.acquire(LwLockMode::Exclusive);
        let r = self.insert_with_split(bb, item);
        self.split_lock.release(held);
        r
    }

    fn insert_with_split(&self, bb: &BackendBuffers, item: Item) -> Result<(), BufferError> {
        let mut stack = Vec::new();
        let (buf, mut g, _) = self.descend(bb, item.pos(), LwLockMode::Exclusive, Some(&mut stack))?;
        if insert_sorted(g.page_mut(), &item, true) {
            g.mark_dirty();
            drop(g);
            bb.release(buf);
            return Ok(());
        }
        let mut pending = Some((buf, g, item));
        while let Some((buf, g, it)) = pending.take() {
            let (sep, right_blk, was_root, level) = self.split(bb, g, it)?;
            let downlink = Item { key: sep.0, tie: sep.1, child: right_blk };
            if was_root {
                self.new_root(bb, buf_block(bb, buf), right_blk, downlink, level + 1)?;
                bb.release(buf);
                return Ok(());
            }
            bb.release(buf);
            let parent = stack.pop().unwrap_or_else(|| self.root_block());
            let pbuf = bb.read_block(self.rel, BlockNumber(parent))?;
            let (pbuf, mut pg, _) = self.move_right_locked(bb, pbuf, downlink.pos())?;
            if insert_sorted(pg.page_mut(), &downlink, false) {
                pg.mark_dirty();
                drop(pg);
                bb.release(pbuf);
                return Ok(());
            }
            pending = Some((pbuf, pg, downlink));
        }
        Ok(())
    }

    /// Splits the locked, full page `buf` while inserting `it`; returns the separator (the right
    /// page's first item), the new right block, whether the page was the root, and its level.
    /// The page stays pinned by the caller; its lock is released here.
    fn split(
        &self,
        bb: &BackendBuffers,
        mut g: ContentGuard<'_>,
        it: Item,
    ) -> Result<((i64, u64), u32, bool, u16), BufferError> {
        let o = opaque(g.page());
        let leaf = o.flags & F_LEAF != 0;
        let mut items: Vec<Item> = (1..=nitems(g.page())).map(|i| item_at(g.page(), i)).collect();
        let pos = items.partition_point(|x| x.pos() < it.pos());
        items.insert(pos, it);
        let mid = items.len() / 2;
        let (left, right) = items.split_at(mid);
        let sep = right[0].pos();
        let (rbuf, rblk) = bb.extend(self.rel, ForkNumber::Main)?;
        {
            let mut rg = bb.lock(rbuf, LwLockMode::Exclusive);
            let rp = rg.page_mut();
            init_page(
                rp,
                Opaque { level: o.level, flags: if leaf { F_LEAF } else { 0 }, right: o.right, high: o.high },
            );
            for x in right {
                page::add_item(rp, &x.encode(leaf), None).expect("half a page fits");
            }
            rg.mark_dirty();
        }
        let was_root = o.flags & F_ROOT != 0;
        {
            let p = g.page_mut();
            init_page(p, Opaque { level: o.level, flags: o.flags & !F_ROOT, right: rblk.0, high: Some(sep) });
            for x in left {
                page::add_item(p, &x.encode(leaf), None).expect("half a page fits");
            }
            g.mark_dirty();
        }
        drop(g);
        bb.release(rbuf);
        Ok((sep, rblk.0, was_root, o.level))
    }

    fn new_root(
        &self,
        bb: &BackendBuffers,
        left: u32,
        right: u32,
        downlink: Item,
        level: u16,
    ) -> Result<(), BufferError> {
        let (nbuf, nblk) = bb.extend(self.rel, ForkNumber::Main)?;
        {
            let mut g = bb.lock(nbuf, LwLockMode::Exclusive);
            let p = g.page_mut();
            init_page(p, Opaque { level, flags: F_ROOT, right: NO_RIGHT, high: None });
            let first = Item { key: i64::MIN, tie: 0, child: left };
            page::add_item(p, &first.encode(false), None).expect("empty page");
            page::add_item(p, &Item { child: right, ..downlink }.encode(false), None).expect("empty page");
            g.mark_dirty();
        }
        bb.release(nbuf);
        let (mbuf, mut mg) = lock_block(bb, self.rel, META_BLOCK, LwLockMode::Exclusive)?;
        let s = page::special_mut(mg.page_mut());
        s[4..8].copy_from_slice(&nblk.0.to_le_bytes());
        s[8..10].copy_from_slice(&level.to_le_bytes());
        mg.mark_dirty();
        drop(mg);
        bb.release(mbuf);
        self.root.store(nblk.0, Ordering::Release);
        Ok(())
    }

    /// Walks every level left to right and checks the invariants: items sorted, every item
    /// below its page's high key, each high key equal to the right sibling's first item, and
    /// leaf items in strictly increasing order across the whole level. Returns the number of
    /// leaf entries. Meant for tests and `--check`; takes share locks one page at a time, so
    /// run it when no inserts are in flight.
    ///
    /// # Errors
    /// [`BTreeError::Corrupt`] naming the first broken invariant; buffer errors.
    pub fn check(&self, bb: &BackendBuffers) -> Result<u64, BTreeError> {
        let corrupt = |m: String| Err(BTreeError::Corrupt(m));
        // Find the leftmost page of each level by following first children from the root.
        let mut first_of_level = self.root_block();
        let mut leaf_entries = 0u64;
        loop {
            let mut blk = first_of_level;
            let mut prev_last: Option<(i64, u64)> = None;
            let mut next_first = None;
            let mut leaf = false;
            while blk != NO_RIGHT {
                let (buf, g) = lock_block(bb, self.rel, blk, LwLockMode::Shared)?;
                let p = g.page();
                let o = opaque(p);
                leaf = o.flags & F_LEAF != 0;
                let n = nitems(p);
                for i in 1..=n {
                    let it = item_at(p, i);
                    let is_minus_inf = !leaf && i == 1;
                    if !is_minus_inf {
                        if prev_last.is_some_and(|l| l >= it.pos()) {
                            return corrupt(format!("block {blk}: item {i} out of order"));
                        }
                        prev_last = Some(it.pos());
                    }
                    if o.high.is_some_and(|h| it.pos() >= h) {
                        return corrupt(format!("block {blk}: item {i} at or above the high key"));
                    }
                    if leaf {
                        leaf_entries += 1;
                    }
                }
                if next_first.is_none() && !leaf && n >= 1 {
                    next_first = Some(item_at(p, 1).child);
                }
                if o.right != NO_RIGHT && o.high.is_none() {
                    return corrupt(format!("block {blk}: has a right sibling but no high key"));
                }
                let right = o.right;
                let high = o.high;
                drop(g);
                bb.release(buf);
                if right != NO_RIGHT {
                    let (rbuf, rg) = lock_block(bb, self.rel, right, LwLockMode::Shared)?;
                    let rp = rg.page();
                    let rleaf = opaque(rp).flags & F_LEAF != 0;
                    if nitems(rp) >= 1 && rleaf && Some(item_at(rp, 1).pos()) != high {
                        return corrupt(format!(
                            "block {blk}: high key differs from block {right}'s first item"
                        ));
                    }
                    drop(rg);
                    bb.release(rbuf);
                }
                blk = right;
            }
            if leaf {
                return Ok(leaf_entries);
            }
            match next_first {
                Some(c) => first_of_level = c,
                None => return corrupt("internal level without items".into()),
            }
        }
    }
}

fn buf_block(bb: &BackendBuffers, buf: Buffer) -> u32 {
    bb.tag(buf).block.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_bufmgr::{BufferPool, BufferPoolConfig};
    use std::sync::Arc;

    fn pool(nbuffers: usize) -> Arc<BufferPool> {
        BufferPool::in_memory(BufferPoolConfig::pg96(nbuffers)).unwrap()
    }

    /// A damaged right link that leads back up the tree makes the walks fail rather than
    /// loop forever; pages read from a file can hold any links.
    #[test]
    fn a_cycle_of_links_is_an_error_not_a_hang() {
        let p = pool(128);
        let bb = p.backend();
        let t = BTree::build(
            &bb,
            Oid(20000),
            (1..=20_000i64).map(|k| (k, Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 })),
            90,
            LwLockKind::Atomic,
        )
        .unwrap();
        let (buf, g, _) = t.descend(&bb, (5000, 0), LwLockMode::Shared, None).unwrap();
        drop(g);
        let mut g = bb.lock(buf, LwLockMode::Exclusive);
        let o = opaque(g.page());
        set_opaque(g.page_mut(), Opaque { right: t.root_block(), high: Some((1, 0)), ..o });
        g.mark_dirty();
        drop(g);
        bb.release(buf);
        let e = t.lookup(&bb, 5000, &mut Vec::new()).unwrap_err().to_string();
        assert!(e.contains("a cycle of links"), "{e}");
        let e = t.delete(&bb, 5000, Tid { block: 81, offset: 60 }).unwrap_err().to_string();
        assert!(e.contains("a cycle of links"), "{e}");
    }

    #[test]
    fn build_then_lookup_every_key() {
        let p = pool(64);
        let bb = p.backend();
        let n = 20_000i64;
        let t = BTree::build(
            &bb,
            Oid(20000),
            (1..=n).map(|k| (k, Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 })),
            90,
            LwLockKind::Atomic,
        )
        .unwrap();
        assert_eq!(t.check(&bb).unwrap(), n as u64);
        let mut out = Vec::new();
        for k in (1..=n).step_by(7) {
            out.clear();
            t.lookup(&bb, k, &mut out).unwrap();
            assert_eq!(out, vec![Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 }], "key {k}");
        }
        out.clear();
        t.lookup(&bb, n + 1, &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(bb.pinned_buffers(), 0);
        p.check_invariants().unwrap();
    }

    #[test]
    fn empty_and_tiny_indexes() {
        let p = pool(16);
        let bb = p.backend();
        let t = BTree::build(&bb, Oid(20001), std::iter::empty(), 90, LwLockKind::Atomic).unwrap();
        assert_eq!(t.check(&bb).unwrap(), 0);
        let mut out = Vec::new();
        t.lookup(&bb, 5, &mut out).unwrap();
        assert!(out.is_empty());
        t.insert(&bb, 5, Tid { block: 1, offset: 1 }).unwrap();
        t.lookup(&bb, 5, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        let unsorted = BTree::build(
            &bb,
            Oid(20002),
            vec![(2, Tid { block: 0, offset: 1 }), (1, Tid { block: 0, offset: 2 })],
            90,
            LwLockKind::Atomic,
        );
        assert!(matches!(unsorted, Err(BTreeError::Corrupt(_))));
    }

    #[test]
    fn delete_removes_exactly_one_entry() {
        let p = pool(64);
        let bb = p.backend();
        let t = BTree::build(
            &bb,
            Oid(20005),
            (1..=5000).map(|k| (k, Tid { block: 1, offset: 1 })),
            90,
            LwLockKind::Atomic,
        )
        .unwrap();
        t.insert(&bb, 77, Tid { block: 9, offset: 3 }).unwrap();
        assert!(t.delete(&bb, 77, Tid { block: 1, offset: 1 }).unwrap());
        assert!(!t.delete(&bb, 77, Tid { block: 1, offset: 1 }).unwrap(), "already gone");
        let mut out = Vec::new();
        t.lookup(&bb, 77, &mut out).unwrap();
        assert_eq!(out, vec![Tid { block: 9, offset: 3 }]);
        assert_eq!(t.check(&bb).unwrap(), 5000);
        assert_eq!(bb.pinned_buffers(), 0);
    }

    /// Enough inserts to split leaves, internal pages and the root (height 1 -> 3).
    #[test]
    fn root_splits_keep_every_entry_reachable() {
        let p = pool(128);
        let bb = p.backend();
        let t = BTree::build(&bb, Oid(20004), [(0, Tid { block: 0, offset: 1 })], 90, LwLockKind::Atomic)
            .unwrap();
        assert_eq!(t.height(&bb).unwrap(), 0);
        let n = 150_000i64;
        // Descending keys: every insert goes to the leftmost leaf, the worst case for splits.
        for k in (1..=n).rev() {
            t.insert(&bb, k, Tid { block: k as u32, offset: 2 }).unwrap();
        }
        assert!(t.height(&bb).unwrap() >= 2, "the root split at least twice");
        assert_eq!(t.check(&bb).unwrap(), n as u64 + 1);
        let mut out = Vec::new();
        for k in (0..=n).step_by(997) {
            out.clear();
            t.lookup(&bb, k, &mut out).unwrap();
            assert_eq!(out.len(), 1, "key {k}");
        }
        assert_eq!(bb.pinned_buffers(), 0);
    }

    /// Writers add new versions of keys (forcing leaf, internal and root splits) while readers
    /// keep looking keys up; every reader always finds every version that was inserted before
    /// its look-up started, and the final structure checks out.
    #[test]
    fn concurrent_inserts_split_without_losing_entries() {
        let p = pool(256);
        let keys = 3_000i64;
        let t = {
            let bb = p.backend();
            Arc::new(
                BTree::build(
                    &bb,
                    Oid(20003),
                    (1..=keys).map(|k| (k, Tid { block: 0, offset: 1 })),
                    100,
                    LwLockKind::Atomic,
                )
                .unwrap(),
            )
        };
        let root_before = t.root_block();
        let nblocks_before = p.nblocks(Oid(20003), ForkNumber::Main).unwrap();
        let writers = 2;
        let per_writer = 6_000u32;
        let done = Arc::new(std::sync::atomic::AtomicU32::new(0));
        std::thread::scope(|s| {
            for w in 0..writers {
                let (p, t) = (Arc::clone(&p), Arc::clone(&t));
                s.spawn(move || {
                    let bb = p.backend();
                    for i in 0..per_writer {
                        let k = 1 + i64::from(i) % keys;
                        t.insert(&bb, k, Tid { block: 1 + w * per_writer + i, offset: 1 }).unwrap();
                    }
                    assert_eq!(bb.pinned_buffers(), 0);
                });
            }
            let (p, t, done) = (Arc::clone(&p), Arc::clone(&t), Arc::clone(&done));
            s.spawn(move || {
                let bb = p.backend();
                let mut out = Vec::new();
                let mut k = 1;
                while done.load(std::sync::atomic::Ordering::Relaxed) < 1 {
                    out.clear();
                    t.lookup(&bb, k, &mut out).unwrap();
                    assert!(out.contains(&Tid { block: 0, offset: 1 }), "original entry of key {k} lost");
                    assert!(out.windows(2).all(|w| w[0] < w[1]), "entries of key {k} out of order");
                    k = k % keys + 1;
                    if k == 1 {
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
            });
        });
        let bb = p.backend();
        let total = keys as u64 + u64::from(writers * per_writer);
        assert_eq!(t.check(&bb).unwrap(), total);
        assert_eq!(t.root_block(), root_before, "too small to split the root");
        assert!(p.nblocks(Oid(20003), ForkNumber::Main).unwrap() > nblocks_before + 20, "leaves split");
        let mut out = Vec::new();
        t.lookup(&bb, 1, &mut out).unwrap();
        let expected = 1
            + (0..writers)
                .map(|_| (0..per_writer).filter(|i| i64::from(*i) % keys == 0).count())
                .sum::<usize>();
        assert_eq!(out.len(), expected);
        p.check_invariants().unwrap();
    }

    /// From any first guess, in range or not, the galloping search returns what bisection
    /// returns, for every length and every split point.
    #[test]
    fn partition_point_agrees_with_bisection_from_any_guess() {
        for n in 0u16..40 {
            for split in 0..=n {
                let below = |off: u16| off < 1 + split;
                let want = 1 + split;
                assert_eq!(partition_point(1, n + 1, None, below), want);
                for g in 0..n + 4 {
                    assert_eq!(
                        partition_point(1, n + 1, Some(g), below),
                        want,
                        "n {n} split {split} guess {g}"
                    );
                }
                assert_eq!(partition_point(1, n + 1, Some(u16::MAX), below), want);
            }
        }
    }

    /// Keys spread evenly over the parent's range (pgbench's) are found in at most two probes
    /// of the page; bisection needs about log2(items).
    #[test]
    fn dense_keys_take_at_most_two_probes() {
        let n = 367u16;
        let low = 1_000_000i64;
        let range = KeyRange { low: Some(low), high: Some(low + i64::from(n)) };
        for t in low..low + i64::from(n) {
            let probes = std::cell::Cell::new(0);
            let below = |off: u16| {
                probes.set(probes.get() + 1);
                low + i64::from(off) - 1 < t
            };
            let got = partition_point(1, n + 1, interpolate(range, t, 1, n), below);
            assert_eq!(i64::from(got), t - low + 1);
            assert!(probes.get() <= 2, "key {t}: {} probes", probes.get());
        }
        assert_eq!(interpolate(range, low - 1, 1, n), None, "below the range");
        assert_eq!(interpolate(range, low + i64::from(n), 1, n), None, "at the range's end");
        assert_eq!(interpolate(KeyRange { low: Some(low), high: None }, low, 1, n), None);
    }

    /// Skewed keys (cubes, a dense cluster, negatives) and extra versions of some keys: both
    /// searches find exactly what an ordered map holds, for present and absent keys.
    #[test]
    fn both_searches_agree_with_an_oracle_under_skew() {
        let p = pool(256);
        let bb = p.backend();
        let mut keys: Vec<i64> = (-300..300i64).map(|i| i * i * i).collect();
        keys.extend(5_000_000..5_004_000);
        keys.sort_unstable();
        keys.dedup();
        let tid =
            |k: i64, v: u32| Tid { block: (k.rem_euclid(10_007)) as u32 + v, offset: 1 + (v % 7) as u16 };
        let t = BTree::build(&bb, Oid(20006), keys.iter().map(|&k| (k, tid(k, 0))), 90, LwLockKind::Atomic)
            .unwrap();
        let mut oracle: std::collections::BTreeMap<i64, Vec<Tid>> =
            keys.iter().map(|&k| (k, vec![tid(k, 0)])).collect();
        for (i, &k) in keys.iter().enumerate().filter(|(i, _)| i % 5 == 0) {
            for v in 1..=(i % 3 + 1) as u32 {
                t.insert(&bb, k, tid(k, v * 20_000)).unwrap();
                oracle.get_mut(&k).unwrap().push(tid(k, v * 20_000));
            }
        }
        oracle.values_mut().for_each(|v| v.sort_unstable());
        assert!(t.height(&bb).unwrap() >= 1);
        let probes: Vec<i64> =
            keys.iter().flat_map(|&k| [k - 1, k, k + 1]).chain([i64::MIN, i64::MAX]).collect();
        let mut out = Vec::new();
        for search in [Search::Interpolation, Search::Binary] {
            let t = BTree { search, ..BTree::open(&bb, Oid(20006), LwLockKind::Atomic).unwrap() };
            for &k in &probes {
                out.clear();
                t.lookup(&bb, k, &mut out).unwrap();
                assert_eq!(out, oracle.get(&k).cloned().unwrap_or_default(), "{search} search, key {k}");
            }
        }
        assert_eq!(bb.pinned_buffers(), 0);
    }
}
