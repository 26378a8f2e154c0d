//! The heap tuple format and page-level heap operations: insert, HOT chain search, HOT
//! update bookkeeping, and pruning (`src/backend/access/heap/heapam.c`, `pruneheap.c`,
//! `src/include/access/htup_details.h`; HOT since 8.3).
//!
//! A tuple is a 32-byte header followed by `natts` little-endian `i64` columns and a filler:
//!
//! ```text
//! 0 xmin | 4 xmax | 8 cmin | 12 cmax | 16 ctid.block | 20 ctid.offset | 22 infomask2 | 24 infomask
//! | 26 natts | 28 (pad) | 32 columns ... | filler
//! ```
//!
//! PostgreSQL's header is 23 bytes with a combo command id; ours keeps `cmin` and `cmax` apart
//! (see `visibility`) and is MAXALIGNed to 32, and the filler makes a pgbench row as long as
//! PostgreSQL's (128 bytes for accounts, so 61 fit on a page at fillfactor 100, as in PG).

use lockstack_bufmgr::page::{self, LpFlags, OffsetNumber};
use lockstack_common::TransactionId;
use lockstack_common::sync::hook::{Access, touch};

use super::visibility::{
    TupleXactInfo, XMAX_COMMITTED, XMAX_INVALID, XMAX_IS_MULTI, XMAX_LOCK_ONLY, XMIN_COMMITTED, XMIN_INVALID,
};
use crate::btree::Tid;
use crate::multixact::MultiXactId;

/// Bytes of the tuple header.
pub const HEAP_TUPLE_HEADER_SIZE: usize = 32;
/// `HEAP_HOT_UPDATED` (infomask2): this version was updated by a HOT update.
pub const HEAP_HOT_UPDATED: u16 = 0x4000;
/// `HEAP_ONLY_TUPLE` (infomask2): no index entry points at this version.
pub const HEAP_ONLY_TUPLE: u16 = 0x8000;

/// A decoded tuple header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct TupleHeader {
    /// Transaction fields (xmin, xmax, cmin, cmax, infomask).
    pub xact: TupleXactInfo,
    /// The newer version's TID after an update (or this tuple's own TID).
    pub ctid: Tid,
    /// `t_infomask2` flags (HOT bits).
    pub infomask2: u16,
    /// Number of integer columns.
    pub natts: u16,
}

fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("a 4-byte range converts to [u8; 4]"))
}

fn rd_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("a 2-byte range converts to [u8; 2]"))
}

/// Builds a tuple: header for an insert by `xmin` at command `cmin`, the columns, and
/// `filler` zero bytes.
pub fn form_tuple(xmin: TransactionId, cmin: u32, cols: &[i64], filler: usize, infomask2: u16) -> Vec<u8> {
    let mut t = vec![0u8; HEAP_TUPLE_HEADER_SIZE + cols.len() * 8 + filler];
    t[0..4].copy_from_slice(&xmin.0.to_le_bytes());
    t[8..12].copy_from_slice(&cmin.to_le_bytes());
    t[22..24].copy_from_slice(&infomask2.to_le_bytes());
    t[24..26].copy_from_slice(&XMAX_INVALID.to_le_bytes());
    t[26..28].copy_from_slice(&(cols.len() as u16).to_le_bytes());
    for (i, c) in cols.iter().enumerate() {
        let at = HEAP_TUPLE_HEADER_SIZE + i * 8;
        t[at..at + 8].copy_from_slice(&c.to_le_bytes());
    }
    t
}

/// Decodes a tuple's header.
///
/// # Panics
/// If `t` is shorter than the header.
pub fn header(t: &[u8]) -> TupleHeader {
    touch(t.as_ptr(), HEAP_TUPLE_HEADER_SIZE, Access::Read);
    TupleHeader {
        xact: TupleXactInfo {
            xmin: TransactionId(rd_u32(t, 0)),
            xmax: TransactionId(rd_u32(t, 4)),
            cmin: rd_u32(t, 8),
            cmax: rd_u32(t, 12),
            infomask: rd_u16(t, 24),
        },
        ctid: Tid { block: rd_u32(t, 16), offset: rd_u16(t, 20) },
        infomask2: rd_u16(t, 22),
        natts: rd_u16(t, 26),
    }
}

/// Column `i` of a tuple.
///
/// # Panics
/// If the tuple has fewer than `i + 1` columns.
pub fn column(t: &[u8], i: usize) -> i64 {
    assert!(i < usize::from(rd_u16(t, 26)), "column {i} out of range");
    let at = HEAP_TUPLE_HEADER_SIZE + i * 8;
    touch(t[at..].as_ptr(), 8, Access::Read);
    i64::from_le_bytes(t[at..at + 8].try_into().expect("an 8-byte range converts to [u8; 8]"))
}

/// Every column of a tuple.
pub fn columns(t: &[u8]) -> Vec<i64> {
    (0..usize::from(rd_u16(t, 26))).map(|i| column(t, i)).collect()
}

/// Most integer columns a [`Row`] holds (pgbench's widest table, history, has 5).
pub const MAX_ROW_COLUMNS: usize = 8;

/// A tuple's integer columns copied out of its page, held inline so that returning a row
/// allocates nothing (the executor's result slot; PostgreSQL builds it in a per-tuple memory
/// context that is reset, not freed, between rows). Derefs to the columns as a slice.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct Row {
    len: u8,
    cols: [i64; MAX_ROW_COLUMNS],
}

impl Row {
    /// The columns as a vector.
    pub fn to_vec(&self) -> Vec<i64> {
        self[..].to_vec()
    }
}

impl std::ops::Deref for Row {
    type Target = [i64];
    fn deref(&self) -> &[i64] {
        &self.cols[..usize::from(self.len)]
    }
}

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq<[i64]> for Row {
    fn eq(&self, other: &[i64]) -> bool {
        **self == *other
    }
}

impl PartialEq<Vec<i64>> for Row {
    fn eq(&self, other: &Vec<i64>) -> bool {
        **self == other[..]
    }
}

/// Every column of a tuple, inline ([`columns`] without the allocation).
///
/// # Panics
/// If the tuple has more than [`MAX_ROW_COLUMNS`] columns.
pub fn row(t: &[u8]) -> Row {
    let n = usize::from(rd_u16(t, 26));
    assert!(n <= MAX_ROW_COLUMNS, "a row holds at most {MAX_ROW_COLUMNS} columns, the tuple has {n}");
    let mut r = Row { len: n as u8, cols: [0; MAX_ROW_COLUMNS] };
    touch(t[HEAP_TUPLE_HEADER_SIZE..].as_ptr(), n * 8, Access::Read);
    for (i, c) in r.cols[..n].iter_mut().enumerate() {
        let at = HEAP_TUPLE_HEADER_SIZE + i * 8;
        *c = i64::from_le_bytes(t[at..at + 8].try_into().expect("an 8-byte range converts to [u8; 8]"));
    }
    r
}

/// Sets the tuple's own TID as its ctid (done right after placing it on a page).
pub fn set_ctid(t: &mut [u8], ctid: Tid) {
    t[16..20].copy_from_slice(&ctid.block.to_le_bytes());
    t[20..22].copy_from_slice(&ctid.offset.to_le_bytes());
    touch(t[16..].as_ptr(), 6, Access::Write);
}

/// ORs hint bits into `t_infomask`.
pub fn set_hint_bits(t: &mut [u8], bits: u16) {
    let m = rd_u16(t, 24) | bits;
    t[24..26].copy_from_slice(&m.to_le_bytes());
    touch(t[24..].as_ptr(), 2, Access::Write);
}

/// Stamps `xmax`: the tuple is deleted/updated (or, with `lock_only`, row-locked) by `xmax`
/// at command `cmax`. Clears the xmax hint bits of any earlier, aborted or lock-only xmax
/// (single or multi).
pub fn set_xmax(t: &mut [u8], xmax: TransactionId, cmax: u32, lock_bits: Option<u16>) {
    t[4..8].copy_from_slice(&xmax.0.to_le_bytes());
    t[12..16].copy_from_slice(&cmax.to_le_bytes());
    let mut m = rd_u16(t, 24) & !(XMAX_INVALID | XMAX_COMMITTED | XMAX_LOCK_ONLY | XMAX_IS_MULTI | 0x0050);
    if let Some(bits) = lock_bits {
        m |= XMAX_LOCK_ONLY | bits;
    }
    t[24..26].copy_from_slice(&m.to_le_bytes());
    touch(t[4..].as_ptr(), 22, Access::Write);
}

/// Stamps a lock-only MultiXact as xmax (`HEAP_XMAX_IS_MULTI | HEAP_XMAX_LOCK_ONLY` plus the
/// strength bits `lock_bits`, as `compute_new_xmax_infomask` sets them for a multi of share
/// lockers, heapam.c 9.3+) at command `cmax`; clears earlier xmax hint bits. The engine makes
/// no multi with an updater member, so a multi xmax is always lock-only.
pub fn set_xmax_multi(t: &mut [u8], multi: MultiXactId, cmax: u32, lock_bits: u16) {
    set_xmax(t, TransactionId(multi.0), cmax, Some(lock_bits));
    set_hint_bits(t, XMAX_IS_MULTI);
}

/// Sets or clears `HEAP_KEYS_UPDATED` in `t_infomask2` (the xmax deletes the row, changes a
/// key column, or locks it `FOR UPDATE`; htup_details.h 9.3+). [`set_xmax`] leaves it alone, so
/// a caller that stamps a new xmax sets it to what that xmax means.
pub fn set_keys_updated(t: &mut [u8], on: bool) {
    let bit = super::visibility::HEAP_KEYS_UPDATED;
    let m2 = if on { rd_u16(t, 22) | bit } else { rd_u16(t, 22) & !bit };
    t[22..24].copy_from_slice(&m2.to_le_bytes());
    touch(t[22..].as_ptr(), 2, Access::Write);
}

/// Marks the old version of a HOT update: `HEAP_HOT_UPDATED`, and the new version's TID.
pub fn set_hot_updated(t: &mut [u8], new: Tid) {
    set_ctid(t, new);
    let m2 = rd_u16(t, 22) | HEAP_HOT_UPDATED;
    t[22..24].copy_from_slice(&m2.to_le_bytes());
    touch(t[22..].as_ptr(), 2, Access::Write);
}

/// Clears `HEAP_HOT_UPDATED`: the version's successor is not on its page (a non-HOT update),
/// whatever an earlier, aborted HOT update had left there (`HeapTupleClearHotUpdated` in
/// `heap_update`).
pub fn clear_hot_updated(t: &mut [u8]) {
    let m2 = rd_u16(t, 22) & !HEAP_HOT_UPDATED;
    t[22..24].copy_from_slice(&m2.to_le_bytes());
    touch(t[22..].as_ptr(), 2, Access::Write);
}

/// Where a HOT chain goes after a member with header `h`: the next member's offset and the
/// xid that member must have been inserted by (this member's xmax); `None` at the chain's end.
fn chain_next(h: &TupleHeader) -> Option<(OffsetNumber, TransactionId)> {
    (h.infomask2 & HEAP_HOT_UPDATED != 0).then_some((h.ctid.offset, h.xact.xmax))
}

/// Whether `t`, reached from a member whose xmax is `prior_xmax`, really continues that chain:
/// a heap-only version inserted by `prior_xmax`. A line pointer reached through a stale link
/// (the successor of an aborted update, pruned and its slot reused) fails this, and the walk
/// ends there, as `heap_hot_search_buffer` and `heap_prune_chain` end on a mismatched xmin.
fn continues_chain(t: &[u8], prior_xmax: Option<TransactionId>) -> bool {
    let h = header(t);
    prior_xmax.is_none_or(|x| h.infomask2 & HEAP_ONLY_TUPLE != 0 && h.xact.xmin == x)
}

/// Reads a tuple on a page by offset (`None` for unused, dead or redirect line pointers).
pub fn tuple_at(p: &[u8], off: OffsetNumber) -> Option<&[u8]> {
    page::get_item(p, off)
}

/// True if every version reachable from `root` is dead to all snapshots (the `all_dead` result
/// of `heap_hot_search_buffer`, which lets an index scan kill the entry pointing at `root`).
/// A root whose line pointer is dead or unused counts as all dead.
pub fn chain_all_dead(p: &[u8], root: OffsetNumber, oracle: &dyn PruneOracle) -> bool {
    let mut off = root;
    let mut prior: Option<TransactionId> = None;
    for _ in 0..512 {
        if off == 0 || off > page::max_offset_number(p) {
            return true;
        }
        let id = page::item_id(p, off);
        match id.flags {
            LpFlags::Redirect => {
                off = id.off;
                continue;
            }
            LpFlags::Normal => {}
            _ => return true,
        }
        let t = page::get_item(p, off).expect("the line pointer was matched as LP_NORMAL above");
        if !continues_chain(t, prior) {
            return true;
        }
        if !dead_to_all(t, oracle) {
            return false;
        }
        match chain_next(&header(t)) {
            Some((next, x)) => (off, prior) = (next, Some(x)),
            None => return true,
        }
    }
    false
}

/// Follows a HOT chain from its root line pointer `root` (`heap_hot_search_buffer`), calling
/// `visible` on each member until it returns true; returns that member's offset. Redirect line
/// pointers (left by pruning) are followed; the chain ends at a member that was not
/// HOT-updated.
pub fn hot_search(
    p: &[u8],
    root: OffsetNumber,
    mut visible: impl FnMut(OffsetNumber, &[u8]) -> bool,
) -> Option<OffsetNumber> {
    let mut off = root;
    let mut prior: Option<TransactionId> = None;
    let mut steps = 0;
    loop {
        steps += 1;
        if off == 0 || off > page::max_offset_number(p) || steps > 512 {
            return None;
        }
        let id = page::item_id(p, off);
        match id.flags {
            LpFlags::Redirect => {
                off = id.off;
                continue;
            }
            LpFlags::Normal => {}
            _ => return None,
        }
        let t = page::get_item(p, off)?;
        if !continues_chain(t, prior) {
            return None;
        }
        if visible(off, t) {
            return Some(off);
        }
        (off, prior) = chain_next(&header(t)).map(|(o, x)| (o, Some(x)))?;
    }
}

/// How pruning decides that a version is dead to everyone.
pub trait PruneOracle {
    /// Did `xid` commit?
    fn committed(&self, xid: TransactionId) -> bool;
    /// Did `xid` abort (or crash)?
    fn aborted(&self, xid: TransactionId) -> bool;
    /// The oldest xmin of any running snapshot: a version deleted by a transaction that
    /// committed before this is invisible to every snapshot.
    fn oldest_xmin(&self) -> TransactionId;
}

/// True if no snapshot can see this version: its inserter aborted, or its deleter committed
/// before `oracle.oldest_xmin()` (`HeapTupleSatisfiesVacuum` == `HEAPTUPLE_DEAD`).
pub fn dead_to_all(t: &[u8], o: &dyn PruneOracle) -> bool {
    let h = header(t).xact;
    if h.infomask & XMIN_INVALID != 0 && h.infomask & XMIN_COMMITTED == 0 {
        return true;
    }
    if h.infomask & XMIN_COMMITTED == 0 && h.xmin.is_normal() && o.aborted(h.xmin) {
        return true;
    }
    if !h.xmax.is_valid() || h.infomask & (XMAX_INVALID | XMAX_LOCK_ONLY) != 0 {
        return false;
    }
    (h.infomask & XMAX_COMMITTED != 0 || o.committed(h.xmax)) && h.xmax.precedes(o.oldest_xmin())
}

/// Prunes HOT chains on a page (`heap_page_prune`): every chain's leading run of versions
/// dead to all snapshots is removed; the root line pointer becomes a redirect to the first
/// surviving member (or dead if none survives), removed heap-only members become unused, and
/// tuple storage is compacted. Index entries keep pointing at the roots, which stay valid.
/// Returns the number of versions removed.
pub fn prune_page(p: &mut [u8], oracle: &dyn PruneOracle) -> usize {
    let n = page::max_offset_number(p);
    // Roots: normal tuples that are not heap-only, and redirects.
    let mut removed = 0;
    for root in 1..=n {
        let id = page::item_id(p, root);
        let start = match id.flags {
            LpFlags::Redirect => id.off,
            LpFlags::Normal => {
                let t = page::get_item(p, root).expect("the line pointer was matched as LP_NORMAL above");
                if header(t).infomask2 & HEAP_ONLY_TUPLE != 0 {
                    continue;
                }
                root
            }
            _ => continue,
        };
        // Walk the chain, collecting the dead prefix.
        let mut chain = Vec::new();
        let mut off = start;
        let mut prior: Option<TransactionId> = None;
        let mut survivor = None;
        while off != 0 && off <= n && chain.len() < 512 {
            let oid = page::item_id(p, off);
            if oid.flags != LpFlags::Normal {
                break;
            }
            let t = page::get_item(p, off).expect("the line pointer was checked to be LP_NORMAL above");
            if !continues_chain(t, prior) {
                break;
            }
            if !dead_to_all(t, oracle) {
                survivor = Some(off);
                break;
            }
            chain.push(off);
            match chain_next(&header(t)) {
                Some((next, x)) => (off, prior) = (next, Some(x)),
                None => break,
            }
        }
        if chain.is_empty() {
            continue;
        }
        for &dead in &chain {
            removed += 1;
            if dead != root {
                page::set_item_id(p, dead, page::ItemId { off: 0, flags: LpFlags::Unused, len: 0 });
            }
        }
        let root_id = match survivor {
            Some(s) if s != root => page::ItemId { off: s, flags: LpFlags::Redirect, len: 0 },
            Some(_) => continue,
            None => page::ItemId { off: 0, flags: LpFlags::Dead, len: 0 },
        };
        page::set_item_id(p, root, root_id);
    }
    // Heap-only versions no chain reaches any more, left by aborted updates: dead to all and
    // with no successor, so nothing can need them (`heap_prune_chain` marks such a tuple
    // unused when it comes to it as a would-be root).
    for off in 1..=n {
        if page::item_id(p, off).flags != LpFlags::Normal {
            continue;
        }
        let t = page::get_item(p, off).expect("the line pointer was checked to be LP_NORMAL above");
        let h = header(t);
        if h.infomask2 & HEAP_ONLY_TUPLE != 0 && h.infomask2 & HEAP_HOT_UPDATED == 0 && dead_to_all(t, oracle)
        {
            page::set_item_id(p, off, page::ItemId { off: 0, flags: LpFlags::Unused, len: 0 });
            removed += 1;
        }
    }
    if removed > 0 {
        page::repair_fragmentation(p);
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heap::visibility::XMAX_EXCL_LOCK;
    use lockstack_bufmgr::page::BLCKSZ;

    struct Oracle {
        committed: Vec<u32>,
        aborted: Vec<u32>,
        oldest: u32,
    }

    impl PruneOracle for Oracle {
        fn committed(&self, x: TransactionId) -> bool {
            self.committed.contains(&x.0)
        }
        fn aborted(&self, x: TransactionId) -> bool {
            self.aborted.contains(&x.0)
        }
        fn oldest_xmin(&self) -> TransactionId {
            TransactionId(self.oldest)
        }
    }

    fn new_page() -> Vec<u8> {
        let mut p = vec![0u8; BLCKSZ];
        page::init(&mut p, 0);
        p
    }

    #[test]
    fn tuple_round_trip_and_row_size() {
        let t = form_tuple(TransactionId(7), 2, &[1, 2, -3], 72, 0);
        assert_eq!(t.len(), 128);
        let h = header(&t);
        assert_eq!(h.xact.xmin, TransactionId(7));
        assert_eq!(h.xact.cmin, 2);
        assert_eq!(h.xact.infomask, XMAX_INVALID);
        assert_eq!(columns(&t), vec![1, 2, -3]);
        assert_eq!(row(&t), vec![1, 2, -3]);
        assert_eq!(row(&t).to_vec(), columns(&t));
        assert_eq!(format!("{:?}", row(&t)), "[1, 2, -3]");
        let mut p = new_page();
        let mut n = 0;
        while page::add_item(&mut p, &t, None).is_some() {
            n += 1;
        }
        assert_eq!(n, 61, "a pgbench_accounts row: 61 per page, as in PostgreSQL");
    }

    #[test]
    fn a_multi_xmax_is_lock_only_and_cleared_by_a_later_xmax() {
        use crate::heap::visibility::XMAX_SHR_LOCK;
        let mut t = form_tuple(TransactionId(5), 0, &[1, 2], 0, 0);
        set_xmax_multi(&mut t, MultiXactId(7), 2, XMAX_SHR_LOCK);
        let h = header(&t).xact;
        assert_eq!(h.xmax, TransactionId(7));
        let bits = XMAX_IS_MULTI | XMAX_LOCK_ONLY | XMAX_SHR_LOCK;
        assert_eq!(h.infomask & (bits | XMAX_INVALID), bits);
        set_xmax(&mut t, TransactionId(9), 3, None);
        assert_eq!(header(&t).xact.infomask & (bits | XMAX_INVALID), 0);
    }

    #[test]
    fn xmax_and_hot_flags() {
        let mut t = form_tuple(TransactionId(7), 0, &[1], 0, 0);
        set_xmax(&mut t, TransactionId(9), 3, Some(XMAX_EXCL_LOCK));
        let h = header(&t);
        assert_eq!(h.xact.xmax, TransactionId(9));
        assert_eq!(h.xact.infomask & (XMAX_LOCK_ONLY | XMAX_INVALID), XMAX_LOCK_ONLY);
        set_xmax(&mut t, TransactionId(10), 4, None);
        assert_eq!(header(&t).xact.infomask & (XMAX_LOCK_ONLY | XMAX_EXCL_LOCK), 0);
        set_hot_updated(&mut t, Tid { block: 3, offset: 5 });
        assert_eq!(header(&t).ctid, Tid { block: 3, offset: 5 });
        assert_ne!(header(&t).infomask2 & HEAP_HOT_UPDATED, 0);
    }

    /// A chain v1 -> v2 -> v3 -> v4 where v1, v2 were replaced by transactions that committed
    /// before every snapshot: pruning leaves a redirect from the root to v3, frees v2, keeps v3
    /// and v4 reachable through the root, and search still finds the right version.
    #[test]
    fn prune_redirects_root_and_frees_dead_members() {
        let mut p = new_page();
        let mut offs = Vec::new();
        for (i, xmin) in [10u32, 11, 12, 13].into_iter().enumerate() {
            let flags2 = if i == 0 { 0 } else { HEAP_ONLY_TUPLE };
            let mut t = form_tuple(TransactionId(xmin), 0, &[i as i64], 72, flags2);
            t[24..26].copy_from_slice(&(XMAX_INVALID | XMIN_COMMITTED).to_le_bytes());
            let off = page::add_item(&mut p, &t, None).unwrap();
            offs.push(off);
        }
        for i in 0..3 {
            let next = offs[i + 1];
            let t = page::get_item_mut(&mut p, offs[i]).unwrap();
            set_xmax(t, TransactionId(11 + i as u32), 0, None);
            set_hot_updated(t, Tid { block: 0, offset: next });
        }
        let free_before = page::free_space(&p);
        let o = Oracle { committed: vec![10, 11, 12, 13], aborted: vec![], oldest: 13 };
        assert_eq!(prune_page(&mut p, &o), 2, "v1 (xmax 11) and v2 (xmax 12) are dead to all");
        assert_eq!(page::item_id(&p, offs[0]).flags, LpFlags::Redirect);
        assert_eq!(page::item_id(&p, offs[1]).flags, LpFlags::Unused);
        assert!(page::free_space(&p) > free_before);
        let newest = hot_search(&p, offs[0], |_, t| {
            !header(t).xact.xmax.is_valid() || header(t).xact.infomask & XMAX_INVALID != 0
        });
        assert_eq!(newest, Some(offs[3]));
        let v3 = hot_search(&p, offs[0], |_, t| columns(t)[0] == 2);
        assert_eq!(v3, Some(offs[2]));
        // Nothing more to prune until the horizon moves.
        assert_eq!(prune_page(&mut p, &o), 0);
        let o2 = Oracle { committed: vec![10, 11, 12, 13], aborted: vec![], oldest: 20 };
        assert_eq!(prune_page(&mut p, &o2), 1, "v3 (xmax 13) is now dead to all");
        assert_eq!(hot_search(&p, offs[0], |_, _| true), Some(offs[3]));
    }

    #[test]
    fn aborted_inserts_are_pruned_and_live_rows_are_kept() {
        let mut p = new_page();
        let live = page::add_item(&mut p, &form_tuple(TransactionId(5), 0, &[1], 0, 0), None).unwrap();
        let aborted = page::add_item(&mut p, &form_tuple(TransactionId(6), 0, &[2], 0, 0), None).unwrap();
        let o = Oracle { committed: vec![5], aborted: vec![6], oldest: 100 };
        assert_eq!(prune_page(&mut p, &o), 1);
        assert_eq!(page::item_id(&p, aborted).flags, LpFlags::Dead);
        assert_eq!(page::item_id(&p, live).flags, LpFlags::Normal);
    }

    /// A row's root keeps `HEAP_HOT_UPDATED` and a link from an aborted HOT update, and the
    /// link now names another row's tuple (as a stale flag after a non-HOT update would):
    /// neither search nor pruning follows it, because that tuple was not inserted by the
    /// root's xmax. The aborted version, reachable from no chain, is freed.
    #[test]
    fn a_stale_link_is_not_followed_and_aborted_orphans_are_freed() {
        let mut p = new_page();
        let committed = |xmin: u32, key: i64, flags2: u16| {
            let mut t = form_tuple(TransactionId(xmin), 0, &[key], 72, flags2);
            t[24..26].copy_from_slice(&(XMAX_INVALID | XMIN_COMMITTED).to_le_bytes());
            t
        };
        let v1 = page::add_item(&mut p, &committed(5, 1, 0), None).unwrap();
        let other = page::add_item(&mut p, &committed(5, 2, 0), None).unwrap();
        let v2 = page::add_item(&mut p, &form_tuple(TransactionId(6), 0, &[1], 72, HEAP_ONLY_TUPLE), None)
            .unwrap();
        {
            let t = page::get_item_mut(&mut p, v1).unwrap();
            set_xmax(t, TransactionId(6), 0, None);
            set_hot_updated(t, Tid { block: 0, offset: v2 });
            // xid 6 aborted; xid 7 then replaced the row elsewhere, leaving the flag set and
            // the link's offset naming the other row's tuple.
            set_xmax(t, TransactionId(7), 0, None);
            set_ctid(t, Tid { block: 9, offset: other });
        }
        let o = Oracle { committed: vec![5, 7], aborted: vec![6], oldest: 100 };
        assert_eq!(hot_search(&p, v1, |_, t| columns(t)[0] == 2), None, "followed the stale link");
        assert_eq!(prune_page(&mut p, &o), 2, "the root's dead version and the aborted orphan");
        assert_eq!(page::item_id(&p, v1).flags, LpFlags::Dead, "the root must not redirect to another row");
        assert_eq!(page::item_id(&p, v2).flags, LpFlags::Unused);
        assert_eq!(page::item_id(&p, other).flags, LpFlags::Normal);
        assert_eq!(hot_search(&p, other, |_, _| true), Some(other));
        let mut t = committed(5, 3, 0);
        set_hot_updated(&mut t, Tid { block: 0, offset: 4 });
        clear_hot_updated(&mut t);
        assert_eq!(header(&t).infomask2 & HEAP_HOT_UPDATED, 0);
    }
}
