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

use lockstack_bufmgr::page::{self, BLCKSZ};
use lockstack_bufmgr::{BackendBuffers, Buffer, BufferError, ContentGuard, ForkNumber};
use lockstack_common::{BlockNumber, Oid, TrancheId};
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};

mod nbtpage;
mod nbtsearch;

use nbtpage::*;
pub(crate) use nbtpage::{BtreePageError, verify_page};
pub use nbtpage::{PAGE_OPAQUE_SIZE, Tid};
pub use nbtsearch::Search;
use nbtsearch::*;

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
        s[META_REL].copy_from_slice(&rel.0.to_le_bytes());
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
        let magic = u32::from_le_bytes(s[0..4].try_into().expect("a 4-byte range converts to [u8; 4]"));
        let root = u32::from_le_bytes(s[4..8].try_into().expect("a 4-byte range converts to [u8; 4]"));
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
                page::add_item(p, &it.encode(leaf), None)
                    .expect("the page held these items and one more, so they fit it once re-initialised");
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
                page::add_item(rp, &x.encode(leaf), None)
                    .expect("each half of a full page's items fits an empty page");
            }
            rg.mark_dirty();
        }
        let was_root = o.flags & F_ROOT != 0;
        {
            let p = g.page_mut();
            init_page(p, Opaque { level: o.level, flags: o.flags & !F_ROOT, right: rblk.0, high: Some(sep) });
            for x in left {
                page::add_item(p, &x.encode(leaf), None)
                    .expect("each half of a full page's items fits an empty page");
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
            page::add_item(p, &first.encode(false), None)
                .expect("an empty page holds a root's two downlinks");
            page::add_item(p, &Item { child: right, ..downlink }.encode(false), None)
                .expect("an empty page holds a root's two downlinks");
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
mod tests;
