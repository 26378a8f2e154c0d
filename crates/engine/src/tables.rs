//! The engine's catalog and its tables in the buffer pool: the four relations ([`TableId`]),
//! their sizes per scale factor, the load (`pgbench -i`), and full scans for the consistency
//! checks.
//!
//! The catalog is fixed: the relations are laid out as pgbench's tables (the workload the
//! engine is built to measure), with fixed OIDs, and the data directory stores them. A workload
//! names its tables in its own terms and maps them onto a [`TableId`] (pgbench's `Table` in
//! `lockstack-workloads` does); the engine's statements take the [`TableId`].
//!
//! Sizes follow `src/bin/pgbench/pgbench.c` (PostgreSQL 15): per unit of scale, 1 branch,
//! 10 tellers and 100 000 accounts; history starts empty. Rows are loaded frozen and every
//! loaded page is marked all-visible (PD_ALL_VISIBLE and its visibility-map bits), as
//! `COPY ... FREEZE` followed by `VACUUM` leaves them after `pgbench -i`; each table with a key
//! gets its B-tree primary key, built at the index fillfactor PostgreSQL uses (90).

use lockstack_bufmgr::page::{self, LpFlags};
use lockstack_bufmgr::vm::{VisibilityMap, VmBuffer};
use lockstack_bufmgr::{BackendBuffers, BufferError, ForkNumber, LwLockMode};
use lockstack_common::{BlockNumber, Oid, TransactionId};
use lockstack_lwlock::LwLockKind;

use crate::btree::{BTree, BTreeError, Tid};
use crate::heap::tuple::{self, HEAP_TUPLE_HEADER_SIZE};
use crate::heap::visibility::{XMAX_INVALID, XMIN_FROZEN};

/// Accounts per unit of scale (`naccounts`).
pub const ACCOUNTS_PER_SCALE: i64 = 100_000;
/// Tellers per unit of scale (`ntellers`).
pub const TELLERS_PER_SCALE: i64 = 10;
/// Branches per unit of scale (`nbranches`).
pub const BRANCHES_PER_SCALE: i64 = 1;
/// B-tree fillfactor at build (`BTREE_DEFAULT_FILLFACTOR`).
pub const INDEX_FILLFACTOR: u8 = 90;

/// A relation of the engine's catalog, by which every statement, load and scan addresses it.
///
/// The declaration order fixes the OIDs ([`TableId::heap_oid`]), which the data directory's
/// relation files are named by: never reorder.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum TableId {
    /// `pgbench_accounts` (aid, bid, abalance, filler).
    Accounts,
    /// `pgbench_tellers` (tid, bid, tbalance, filler).
    Tellers,
    /// `pgbench_branches` (bid, bbalance, filler).
    Branches,
    /// `pgbench_history` (tid, bid, aid, delta, mtime, filler).
    History,
}

impl TableId {
    /// Every relation, in the order the engine creates, checks and reports them.
    pub const ALL: [TableId; 4] = [TableId::Branches, TableId::Tellers, TableId::Accounts, TableId::History];

    /// The relation's name (`relname`), as error messages and the data directory's checks
    /// print it.
    pub fn name(self) -> &'static str {
        match self {
            TableId::Accounts => "pgbench_accounts",
            TableId::Tellers => "pgbench_tellers",
            TableId::Branches => "pgbench_branches",
            TableId::History => "pgbench_history",
        }
    }

    /// The key column, always column 0 (`None` for history, which has no key).
    pub fn key_column(self) -> Option<&'static str> {
        match self {
            TableId::Accounts => Some("aid"),
            TableId::Tellers => Some("tid"),
            TableId::Branches => Some("bid"),
            TableId::History => None,
        }
    }

    /// Integer columns, in storage order (the filler follows them).
    pub fn int_columns(self) -> &'static [&'static str] {
        match self {
            TableId::Accounts => &["aid", "bid", "abalance"],
            TableId::Tellers => &["tid", "bid", "tbalance"],
            TableId::Branches => &["bid", "bbalance"],
            TableId::History => &["tid", "bid", "aid", "delta", "mtime"],
        }
    }

    /// The heap relation's OID (fixed: the catalog is these four tables).
    pub fn heap_oid(self) -> Oid {
        Oid(16384 + 2 * self as u32)
    }

    /// The primary key index's OID (`None` for history).
    pub fn index_oid(self) -> Option<Oid> {
        self.key_column().map(|_| Oid(16385 + 2 * self as u32))
    }

    /// Filler bytes after the integer columns, so that a row takes as many bytes as in
    /// PostgreSQL (accounts, tellers, branches: 128 bytes with the header; history: 72).
    pub fn filler(self) -> usize {
        let used = HEAP_TUPLE_HEADER_SIZE + 8 * self.int_columns().len();
        match self {
            TableId::History => 72 - used,
            _ => 128 - used,
        }
    }

    /// Rows at scale `s` right after the load.
    pub fn rows(self, scale: i64) -> i64 {
        match self {
            TableId::Accounts => ACCOUNTS_PER_SCALE * scale,
            TableId::Tellers => TELLERS_PER_SCALE * scale,
            TableId::Branches => BRANCHES_PER_SCALE * scale,
            TableId::History => 0,
        }
    }

    /// The loaded row with key `k` (1-based): key, branch, balance 0.
    fn initial_row(self, k: i64) -> Vec<i64> {
        match self {
            TableId::Accounts => vec![k, (k - 1) / ACCOUNTS_PER_SCALE + 1, 0],
            TableId::Tellers => vec![k, (k - 1) / TELLERS_PER_SCALE + 1, 0],
            TableId::Branches => vec![k, 0],
            TableId::History => unreachable!("history is not loaded"),
        }
    }

    /// Index of the balance column (`abalance`, `tbalance`, `bbalance`; `delta` for history).
    pub fn balance_column(self) -> usize {
        match self {
            TableId::Accounts | TableId::Tellers => 2,
            TableId::Branches => 1,
            TableId::History => 3,
        }
    }
}

/// A table in the pool: its heap relation and, except for history, its primary key.
#[derive(Debug)]
pub struct TableRel {
    /// Which relation of the catalog.
    pub table: TableId,
    /// The primary key (`None` for history).
    pub index: Option<BTree>,
    /// Its visibility map.
    pub vm: VisibilityMap,
}

/// Errors of the load and the scans.
#[derive(Debug)]
pub enum TableError {
    /// Buffer pool failure.
    Buffer(BufferError),
    /// Index failure.
    Index(BTreeError),
    /// A table to open has no relation file (the data directory was not initialised with -i).
    Missing(TableId),
    /// A row's contents are impossible (a damaged page that still passed verification).
    Corrupt(CorruptRow),
}

impl std::fmt::Display for TableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TableError::Buffer(e) => write!(f, "{e}"),
            TableError::Index(e) => write!(f, "{e}"),
            TableError::Corrupt(m) => write!(f, "{m}"),
            TableError::Missing(t) => {
                write!(f, "relation \"{}\" does not exist or is empty (file base/{})", t.name(), t.heap_oid())
            }
        }
    }
}

impl std::error::Error for TableError {}

impl From<BufferError> for TableError {
    fn from(e: BufferError) -> Self {
        TableError::Buffer(e)
    }
}

impl From<BTreeError> for TableError {
    fn from(e: BTreeError) -> Self {
        TableError::Index(e)
    }
}

/// Why a row read from a heap page is impossible (a damaged page that still passed
/// verification); [`TableError::Corrupt`] carries it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CorruptRow {
    /// A tuple whose attribute count or length does not fit its user table's row layout.
    #[error("tuple of {len} bytes is not a row of \"{table}\"")]
    NotARow {
        /// The tuple's length, bytes.
        len: usize,
        /// The user table.
        table: String,
    },
    /// A pgbench row whose key is outside `1..=u32::MAX`.
    #[error("relation \"{table}\" block {block} item {item}: key {key} is out of range")]
    KeyOutOfRange {
        /// The pgbench table.
        table: &'static str,
        /// The heap block.
        block: u32,
        /// The item (offset number) in the block.
        item: u16,
        /// The key found.
        key: i64,
    },
    /// A row lock's TID that names no tuple (its line pointer is not in use).
    #[error("no tuple at ({block}, {offset}) to lock")]
    NoTupleToLock {
        /// The heap block.
        block: u32,
        /// The line pointer (offset number).
        offset: u16,
    },
}

/// Loads `table` at `scale` with heap `fillfactor` percent (pgbench's `-F`, 10..=100): frozen
/// rows, all-visible pages, then the primary key.
///
/// # Errors
/// Buffer pool and index errors.
///
/// # Panics
/// If `fillfactor` is outside 10..=100 or `scale` < 1.
pub fn load_table(
    bb: &BackendBuffers,
    table: TableId,
    scale: i64,
    fillfactor: u8,
    lwlock_kind: LwLockKind,
) -> Result<TableRel, TableError> {
    assert!((10..=100).contains(&fillfactor), "fillfactor must be 10..=100");
    assert!(scale >= 1, "scale must be at least 1");
    let rel = table.heap_oid();
    let vm = VisibilityMap::new(rel);
    let n = table.rows(scale);
    let reserve = page::BLCKSZ * (100 - usize::from(fillfactor)) / 100;
    let mut keys: Vec<(i64, Tid)> = Vec::with_capacity(n as usize);
    let mut k = 1;
    let mut vmbuf = VmBuffer::new();
    while k <= n {
        let (buf, blk) = bb.extend(rel, ForkNumber::Main)?;
        {
            let mut g = bb.lock(buf, LwLockMode::Exclusive);
            let p = g.page_mut();
            page::init(p, 0);
            while k <= n {
                let mut t =
                    tuple::form_tuple(TransactionId::FROZEN, 0, &table.initial_row(k), table.filler(), 0);
                t[24..26].copy_from_slice(&(XMIN_FROZEN | XMAX_INVALID).to_le_bytes());
                if page::free_space(p) < page::maxalign(t.len()) + reserve {
                    break;
                }
                let off = page::add_item(p, &t, None)
                    .expect("the page's free space was checked above to hold the tuple");
                let tid = Tid { block: blk.0, offset: off };
                tuple::set_ctid(
                    page::get_item_mut(p, off).expect("the item was added at off just above"),
                    tid,
                );
                keys.push((k, tid));
                k += 1;
            }
            page::set_all_visible(p);
            g.mark_dirty();
        }
        bb.release(buf);
        vm.pin(bb, blk.0, &mut vmbuf)?;
        vm.set_bits(
            bb,
            blk.0,
            &vmbuf,
            lockstack_bufmgr::vm::VISIBILITYMAP_ALL_VISIBLE | lockstack_bufmgr::vm::VISIBILITYMAP_ALL_FROZEN,
            0,
        );
    }
    vmbuf.release(bb);
    let index = match table.index_oid() {
        Some(ioid) => Some(BTree::build(bb, ioid, keys, INDEX_FILLFACTOR, lwlock_kind)?),
        None => None,
    };
    Ok(TableRel { table, index, vm })
}

/// Opens `table` from relation files written by an earlier [`load_table`] and clean shutdown:
/// the heap needs nothing in memory, the primary key's root comes from its metapage.
///
/// # Errors
/// Buffer pool errors (a missing relation file reads as an empty relation, so the heap's size
/// is checked: [`TableError::Missing`] when it has no pages).
pub fn open_table(
    bb: &BackendBuffers,
    table: TableId,
    lwlock_kind: LwLockKind,
) -> Result<TableRel, TableError> {
    let rel = table.heap_oid();
    if table != TableId::History && bb.pool().nblocks(rel, ForkNumber::Main)? == 0 {
        return Err(TableError::Missing(table));
    }
    let index = match table.index_oid() {
        Some(ioid) => Some(BTree::open(bb, ioid, lwlock_kind)?),
        None => None,
    };
    Ok(TableRel { table, index, vm: VisibilityMap::new(rel) })
}

/// The engine's check of a relation page read from a data directory, installed as the buffer
/// pool's page verifier (it runs after `lockstack_bufmgr::page::verify` passed, on pages that
/// are not new): heap pages have no special space and every normal item is a heap tuple of
/// the table's column count; index pages are checked by the B-tree. Other forks and relations
/// pass. Together with the line-pointer checks this is what lets the heap and index code read
/// any page from disk without an out-of-range access.
///
/// # Errors
/// A [`PageCheckError`], one line.
pub(crate) fn verify_page(tag: lockstack_bufmgr::BufferTag, p: &[u8]) -> Result<(), PageCheckError> {
    if tag.fork != ForkNumber::Main {
        return Ok(());
    }
    if page::is_new(p) {
        // A heap page that was extended but never written reads as empty, as in PostgreSQL;
        // the B-tree never leaves one behind (`_bt_checkpage`).
        return if TableId::ALL.iter().any(|t| t.index_oid() == Some(tag.rel)) {
            Err(PageCheckError::ZeroIndexPage)
        } else {
            Ok(())
        };
    }
    for t in TableId::ALL {
        if tag.rel == t.heap_oid() {
            if page::special_offset(p) != page::BLCKSZ {
                return Err(PageCheckError::HeapSpecialSpace);
            }
            let natts = t.int_columns().len();
            for off in 1..=page::max_offset_number(p) {
                if let Some(tup) = page::get_item(p, off) {
                    let n = tup.get(26..28).map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
                    if n != Some(natts) || tup.len() < tuple::HEAP_TUPLE_HEADER_SIZE + 8 * natts {
                        return Err(PageCheckError::NotARow { item: off, len: tup.len(), table: t.name() });
                    }
                }
            }
            return Ok(());
        }
        if Some(tag.rel) == t.index_oid() {
            return crate::btree::verify_page(tag.rel.0, tag.block.0, p).map_err(Into::into);
        }
    }
    Ok(())
}

/// Why [`verify_page`] refused a relation page read from a data directory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PageCheckError {
    /// An index page that was never initialised (the B-tree never leaves one behind).
    #[error("index contains an unexpected zero page")]
    ZeroIndexPage,
    /// A heap page with special space, which heap pages do not have.
    #[error("heap page has special space")]
    HeapSpecialSpace,
    /// A heap item that is not a tuple of the table's column count.
    #[error("tuple {item} ({len} bytes) is not a {table} row")]
    NotARow {
        /// The item's offset number.
        item: page::OffsetNumber,
        /// Its length, bytes.
        len: usize,
        /// The pgbench table.
        table: &'static str,
    },
    /// The B-tree's own check of an index page failed.
    #[error(transparent)]
    Index(#[from] crate::btree::BtreePageError),
}

/// Over every row version in `table`'s heap, live or dead: the highest key (column 0), and
/// an xmin or xmax that is normal and not before `next_xid` (the first found), which no
/// version may carry. Used to check a control file against the relations.
///
/// # Errors
/// Buffer pool errors (among them invalid pages).
pub(crate) fn max_key_and_future_xid(
    bb: &BackendBuffers,
    table: TableId,
    next_xid: TransactionId,
) -> Result<(i64, Option<TransactionId>), TableError> {
    let rel = table.heap_oid();
    let mut max_key = 0;
    let mut future = None;
    for blk in 0..bb.pool().nblocks(rel, ForkNumber::Main)? {
        let buf = bb.read_block(rel, BlockNumber(blk))?;
        let g = bb.lock(buf, LwLockMode::Shared);
        let p = g.page();
        for off in 1..=page::max_offset_number(p) {
            let Some(t) = page::get_item(p, off) else { continue };
            max_key = max_key.max(tuple::column(t, 0));
            let h = tuple::header(t).xact;
            // A multi xmax is a MultiXactId, not an xid (the control file keeps its counter).
            let xmax = if h.infomask & crate::heap::visibility::XMAX_IS_MULTI != 0 {
                TransactionId::INVALID
            } else {
                h.xmax
            };
            for x in [h.xmin, xmax] {
                if x.is_normal() && !x.precedes(next_xid) && future.is_none() {
                    future = Some(x);
                }
            }
        }
        drop(g);
        bb.release(buf);
    }
    Ok((max_key, future))
}

/// Sums of one table's live rows under a visibility test: row count and balance sum, plus the
/// number of live versions per key (to check that every key has exactly one).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct TableSums {
    /// Visible rows.
    pub rows: u64,
    /// Sum of the balance column (`delta` for history).
    pub balance: i64,
    /// Keys seen more than once (should be empty).
    pub duplicate_keys: Vec<i64>,
}

/// Scans every heap page of `table` and sums the rows that `visible(tuple)` accepts
/// (a sequential scan, share-locking one page at a time).
///
/// # Errors
/// Buffer pool errors.
pub fn scan_sums(
    bb: &BackendBuffers,
    table: TableId,
    mut visible: impl FnMut(&[u8]) -> bool,
) -> Result<TableSums, TableError> {
    let rel = table.heap_oid();
    let nblocks = bb.pool().nblocks(rel, ForkNumber::Main)?;
    let mut sums = TableSums::default();
    let mut seen: Vec<u64> = Vec::new();
    for blk in 0..nblocks {
        let buf = bb.read_block(rel, BlockNumber(blk))?;
        let g = bb.lock(buf, LwLockMode::Shared);
        let p = g.page();
        for off in 1..=page::max_offset_number(p) {
            if page::item_id(p, off).flags != LpFlags::Normal {
                continue;
            }
            let t = page::get_item(p, off).expect("the line pointer was checked to be LP_NORMAL above");
            if !visible(t) {
                continue;
            }
            sums.rows += 1;
            sums.balance += tuple::column(t, table.balance_column());
            if table.key_column().is_some() {
                let key = tuple::column(t, 0);
                if !(1..=i64::from(u32::MAX)).contains(&key) {
                    return Err(TableError::Corrupt(CorruptRow::KeyOutOfRange {
                        table: table.name(),
                        block: blk,
                        item: off,
                        key,
                    }));
                }
                let i = key as usize;
                if seen.len() <= i / 64 {
                    seen.resize(i / 64 + 1, 0);
                }
                if seen[i / 64] & (1 << (i % 64)) != 0 {
                    sums.duplicate_keys.push(key);
                }
                seen[i / 64] |= 1 << (i % 64);
            }
        }
        drop(g);
        bb.release(buf);
    }
    Ok(sums)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_bufmgr::{BufferPool, BufferPoolConfig};

    #[test]
    fn load_scale_1_and_scan() {
        let pool = BufferPool::in_memory(BufferPoolConfig::pg96(4096)).unwrap();
        let bb = pool.attach_auxiliary();
        let acc = load_table(&bb, TableId::Accounts, 1, 100, LwLockKind::Atomic).unwrap();
        assert_eq!(
            pool.nblocks(TableId::Accounts.heap_oid(), ForkNumber::Main).unwrap(),
            1640,
            "100000 rows at 61 per page"
        );
        let sums = scan_sums(&bb, TableId::Accounts, |_| true).unwrap();
        assert_eq!(sums.rows, 100_000);
        assert_eq!(sums.balance, 0);
        assert!(sums.duplicate_keys.is_empty());
        let idx = acc.index.as_ref().unwrap();
        assert_eq!(idx.check(&bb).unwrap(), 100_000);
        let mut out = Vec::new();
        idx.lookup(&bb, 77_777, &mut out).unwrap();
        let b = bb.read_block(TableId::Accounts.heap_oid(), BlockNumber(out[0].block)).unwrap();
        let g = bb.lock(b, LwLockMode::Shared);
        let t = page::get_item(g.page(), out[0].offset).unwrap();
        assert_eq!(tuple::columns(t), vec![77_777, 1, 0]);
        assert!(page::is_all_visible(g.page()));
        drop(g);
        bb.release(b);
        let tellers = load_table(&bb, TableId::Tellers, 3, 50, LwLockKind::Atomic).unwrap();
        assert!(tellers.index.is_some());
        assert_eq!(scan_sums(&bb, TableId::Tellers, |_| true).unwrap().rows, 30);
        let hist = load_table(&bb, TableId::History, 3, 100, LwLockKind::Atomic).unwrap();
        assert!(hist.index.is_none());
        assert_eq!(scan_sums(&bb, TableId::History, |_| true).unwrap().rows, 0);
        assert_eq!(bb.pinned_buffers(), 0);
        pool.check_invariants().unwrap();
    }
}
