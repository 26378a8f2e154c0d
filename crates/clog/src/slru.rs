//! A generic simple-LRU page cache (SLRU): PostgreSQL's `src/backend/access/transam/slru.c`.
//!
//! An [`Slru`] caches fixed 8 KiB pages of a log addressed by page number (CLOG, pg_subtrans,
//! multixact, ...) in a small, fixed set of buffers. Each buffer ("slot") has a status
//! ([`SlruPageStatus`]), a dirty flag, the number of the page it holds, an LRU count, and its own
//! I/O lock: a backend reading or writing a page holds that lock exclusively while it does the
//! I/O *without* the bank lock, and other backends that need the page wait by taking the I/O
//! lock in shared mode (PostgreSQL 9.2-13's `buffer_locks`; their waits show as
//! `LWLock:XactBuffer` / `LWLock:SubtransBuffer`).
//!
//! Two lock layouts are chosen at run time ([`SlruLocking`]):
//!
//! * [`SlruLocking::ControlLock`]: one lock for the whole cache (9.2's `CLogControlLock`,
//!   `XactSLRULock` in 13-16); every victim search scans all buffers.
//! * [`SlruLocking::Banks`]: buffers split into banks of [`SLRU_BANK_SIZE`] (16), each with its
//!   own lock and LRU clock; a page lives only in bank `page % banks` (PostgreSQL 17).
//!
//! Storage is in memory or in 32-page segment files named by 4+ hex digits, as in `pg_xact`
//! ([`SlruStorage`]). Counters per backend follow `pg_stat_slru` (13+): see [`SlruStats`].
//!
//! Page contents are arrays of `AtomicU64` accessed with relaxed loads and stores: a page may be
//! copied out for writing while another backend sets bits in it under the exclusive bank lock
//! (exactly what PostgreSQL does, and the reason the page is re-dirtied), and atomics make that
//! race well defined without any `unsafe`.
//!
//! This file holds the cache's shape: its configuration, errors and counters, the slots and
//! banks, the page views and the constructor (locks touched: none beyond creating them, and the
//! bank locks' names). The work on it is in `slru/`: `buffers.rs` (finding, reading and
//! replacing pages; bank and I/O locks), `storage.rs` (page I/O and flushing) and
//! `truncation.rs` (removing old pages and segments).

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::fs;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::{StatsRegistry, TrancheId};
use lockstack_lwlock::{LwLock, LwLockKind, LwRwLock, LwRwLockExt, LwRwLockWriteGuard};

use crate::sync::{AtomicBool, AtomicU8, AtomicU32, Mutex, Ordering, PlainU64 as AtomicU64};
use lockstack_common::sync::hook::{self, Access, touch_slice, touch_val};

mod buffers;
mod storage;
mod truncation;

/// Size of one SLRU page in bytes (`BLCKSZ`, 8192).
pub const SLRU_PAGE_SIZE: usize = 8192;
/// Pages per segment file (`SLRU_PAGES_PER_SEGMENT`, 32): a CLOG segment is 256 KiB.
pub const SLRU_PAGES_PER_SEGMENT: u32 = 32;
/// Buffers per bank in [`SlruLocking::Banks`] (`SLRU_BANK_SIZE`, PostgreSQL 17).
pub const SLRU_BANK_SIZE: usize = 16;
/// 64-bit words per page.
pub const SLRU_PAGE_WORDS: usize = SLRU_PAGE_SIZE / 8;

/// "No page": the latest-page sentinel before any page was created.
const NO_PAGE: u32 = u32::MAX;
/// How many SLRU instances one thread keeps counter handles for (older ones are dropped from
/// the thread's cache; their counts stay in the instance's registry).
const LOCAL_STATS_CACHE: usize = 16;

/// The state of one buffer (`SlruPageStatus` in `slru.h`, all releases).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SlruPageStatus {
    /// Holds no page.
    Empty = 0,
    /// A backend is reading the page in; others wait on the buffer's I/O lock.
    ReadInProgress = 1,
    /// Holds a valid copy of the page.
    Valid = 2,
    /// Valid, and a backend is writing it out; it may still be read and (for synchronous
    /// commits) modified, which re-dirties it.
    WriteInProgress = 3,
}

impl SlruPageStatus {
    fn from_u8(v: u8) -> SlruPageStatus {
        match v {
            1 => SlruPageStatus::ReadInProgress,
            2 => SlruPageStatus::Valid,
            3 => SlruPageStatus::WriteInProgress,
            _ => SlruPageStatus::Empty,
        }
    }
}

/// Which lock protects which buffers: chosen at run time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum SlruLocking {
    /// One control lock for all buffers; victim search scans all of them (`CLogControlLock`,
    /// PostgreSQL 9.2-16).
    #[default]
    ControlLock,
    /// Banks of [`SLRU_BANK_SIZE`] buffers, each with its own lock; page `p` lives in bank
    /// `p % banks` (PostgreSQL 17's `bank_locks`). Requires a buffer count that is a positive
    /// multiple of 16.
    Banks,
}

impl SlruLocking {
    /// `control` or `banks`, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            SlruLocking::ControlLock => "control",
            SlruLocking::Banks => "banks",
        }
    }
}

impl fmt::Display for SlruLocking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where pages live when they are not in a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum SlruStorage {
    /// A map from page number to 8 KiB image, in this process (lost when the `Slru` is dropped).
    #[default]
    Memory,
    /// Segment files of 32 pages (256 KiB) in `path`, named by the segment number in upper-case
    /// hex with at least 4 digits (`0000`, `001F`, as `SlruFileName` names them). With `fsync`,
    /// [`Slru::flush`] calls `fsync` on every segment written since the previous flush
    /// (PostgreSQL's `do_fsync`); ordinary evictions never sync.
    Directory {
        /// The directory (created if missing), e.g. `.../pg_xact`.
        path: PathBuf,
        /// Sync written segments at [`Slru::flush`].
        fsync: bool,
    },
}

/// Called with a page's highest group LSN before that page is written (CLOG's
/// `XLogFlush(max_lsn)` in `SlruPhysicalWritePage`), so that a caller with a WAL can keep the
/// WAL-before-data rule for asynchronous commits.
pub type WalFlushHook = Arc<dyn Fn(u64) + Send + Sync>;

/// Construction parameters of an [`Slru`] (`SimpleLruInit` arguments plus the variant knobs).
#[derive(Clone)]
pub struct SlruConfig {
    /// Name in errors and statistics (`Xact`, `Subtrans`, as `pg_stat_slru.name`).
    pub name: &'static str,
    /// Number of 8 KiB page buffers (PostgreSQL: 8 up to 9.1, up to 32 in 9.2-9.5, up to 128 in
    /// 9.6-16, a multiple of 16 in 17). At least 2; a positive multiple of 16 with banks.
    pub buffers: usize,
    /// Control lock or banks.
    pub locking: SlruLocking,
    /// LWLock implementation of the control/bank locks and the per-buffer I/O locks.
    pub lwlock_kind: LwLockKind,
    /// Memory or segment files.
    pub storage: SlruStorage,
    /// Tranche of the control lock (e.g. [`TrancheId::XACT_SLRU`]).
    pub control_tranche: TrancheId,
    /// Tranche of the bank locks (e.g. [`TrancheId::XACT_SLRU_BANK`]).
    pub bank_tranche: TrancheId,
    /// Tranche of the per-buffer I/O locks (e.g. [`TrancheId::XACT_BUFFER`]).
    pub buffer_tranche: TrancheId,
    /// LSN groups kept per buffer (1024 for CLOG: one per 32 xids; 0 for other SLRUs). They are
    /// memory-only and reset to 0 whenever a page is read in or zeroed (as in PostgreSQL).
    pub lsn_groups_per_page: usize,
    /// Circular "page a is older than page b" (the `PagePrecedes` callback), used for LRU
    /// tie-breaks and truncation.
    pub page_precedes: fn(u32, u32) -> bool,
    /// When true, a page found neither in a buffer nor in storage reads as zeros (as if it had
    /// been zeroed by `ExtendCLOG`); when false, reading it fails with
    /// [`SlruError::PageNotFound`] (PostgreSQL's "could not access status of transaction").
    pub zero_missing: bool,
    /// Optional WAL flush before a page write (see [`WalFlushHook`]).
    pub wal_flush: Option<WalFlushHook>,
}

impl fmt::Debug for SlruConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlruConfig")
            .field("name", &self.name)
            .field("buffers", &self.buffers)
            .field("locking", &self.locking)
            .field("lwlock_kind", &self.lwlock_kind)
            .field("storage", &self.storage)
            .field("lsn_groups_per_page", &self.lsn_groups_per_page)
            .field("zero_missing", &self.zero_missing)
            .field("wal_flush", &self.wal_flush.is_some())
            .finish()
    }
}

/// What went wrong in an SLRU operation. I/O errors name the file.
#[derive(Debug)]
pub enum SlruError {
    /// An operating-system error on a segment file or the directory.
    Io {
        /// SLRU name.
        slru: &'static str,
        /// What was being done: `open`, `read`, `write`, `fsync`, `remove`, `create directory`,
        /// `list directory`.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The page concerned, if any.
        page: Option<u32>,
        /// The underlying error.
        source: io::Error,
    },
    /// A segment file ended in the middle of a page.
    ShortRead {
        /// SLRU name.
        slru: &'static str,
        /// The segment file.
        path: PathBuf,
        /// The page.
        page: u32,
        /// Bytes that could be read (less than 8192).
        bytes: usize,
    },
    /// The page exists neither in a buffer nor in storage, and `zero_missing` is off.
    PageNotFound {
        /// SLRU name.
        slru: &'static str,
        /// The page.
        page: u32,
    },
    /// Every buffer of the page's bank holds the latest page or is busy forever; only possible
    /// with a bank of one buffer, which the configuration check rejects.
    NoFreeBuffer {
        /// SLRU name.
        slru: &'static str,
        /// The page that needed a buffer.
        page: u32,
    },
    /// The configuration cannot be built (buffer count, banks).
    InvalidConfig {
        /// SLRU name.
        slru: &'static str,
        /// Why.
        reason: String,
    },
}

impl fmt::Display for SlruError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlruError::Io { slru, op, path, page, source } => {
                write!(f, "SLRU {slru}: could not {op} \"{}\"", path.display())?;
                if let Some(p) = page {
                    write!(f, " (page {p})")?;
                }
                write!(f, ": {source}")
            }
            SlruError::ShortRead { slru, path, page, bytes } => write!(
                f,
                "SLRU {slru}: could not read page {page} from \"{}\": read only {bytes} of {SLRU_PAGE_SIZE} bytes",
                path.display()
            ),
            SlruError::PageNotFound { slru, page } => {
                write!(
                    f,
                    "SLRU {slru}: page {page} does not exist (its segment file is missing or too short)"
                )
            }
            SlruError::NoFreeBuffer { slru, page } => {
                write!(f, "SLRU {slru}: no buffer can be evicted for page {page}")
            }
            SlruError::InvalidConfig { slru, reason } => {
                write!(f, "SLRU {slru}: invalid configuration: {reason}")
            }
        }
    }
}

impl std::error::Error for SlruError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SlruError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result of [`Slru::truncate`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TruncateOutcome {
    /// Buffers of pages before the cutoff were emptied and these segments (numbers, ascending)
    /// were removed from storage.
    Truncated {
        /// Removed segment numbers.
        removed_segments: Vec<u32>,
    },
    /// The latest page precedes the cutoff (PostgreSQL: "apparent wraparound"); nothing was
    /// done.
    ApparentWraparound,
}

/// The unit tests' truncation hook (see `Slru::truncate_hook`).
#[cfg(test)]
type TruncateHook = Box<dyn FnMut(&Slru) + Send>;

lockstack_common::counters! {
    /// Sums of one SLRU's counters over every backend (`pg_stat_slru`, PostgreSQL 13+), read
    /// by name through [`lockstack_common::Counters`].
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
    pub struct SlruStats {
        /// Page look-ups satisfied by a buffer (`blks_hit`).
        pub hits: u64,
        /// Page look-ups that had to read storage (`blks_read`), including reads of missing pages
        /// that returned zeros.
        pub reads: u64,
        /// Pages written to storage (`blks_written`).
        pub writes: u64,
        /// Valid pages dropped from a buffer to make room for another page.
        pub evictions: u64,
        /// Pages created by zeroing (`blks_zeroed`).
        pub zeroed: u64,
        /// Calls to [`Slru::flush`] (`flushes`).
        pub flushes: u64,
        /// Calls to [`Slru::truncate`] that truncated (`truncates`).
        pub truncates: u64,
    }
    per_backend: #[derive(Default, Debug)] struct SlruCounters(pub(self));
}

crate::sync::thread_local! {
    static LOCAL_STATS: RefCell<Vec<(u64, lockstack_common::StatsBlock<SlruCounters>)>> = const { RefCell::new(Vec::new()) };
}

static NEXT_SLRU_ID: AtomicU64 = AtomicU64::new(1);

/// One buffer: metadata, I/O lock, page image and (CLOG) group LSNs.
struct Slot {
    status: AtomicU8,
    dirty: AtomicBool,
    page_number: AtomicU32,
    lru_count: AtomicU32,
    io_lock: LwLock,
    words: Box<[AtomicU64]>,
    group_lsn: Box<[AtomicU64]>,
}

impl Slot {
    fn status(&self) -> SlruPageStatus {
        SlruPageStatus::from_u8(self.status.load(Ordering::Relaxed))
    }
    fn set_status(&self, s: SlruPageStatus) {
        self.status.store(s as u8, Ordering::Relaxed);
    }
    fn page(&self) -> u32 {
        self.page_number.load(Ordering::Relaxed)
    }
    fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::Relaxed)
    }
    fn zero_contents(&self) {
        touch_slice(&self.words, Access::Write);
        for w in self.words.iter() {
            w.store(0, Ordering::Relaxed);
        }
        self.zero_lsns();
    }
    fn zero_lsns(&self) {
        touch_slice(&self.group_lsn, Access::Write);
        for l in self.group_lsn.iter() {
            l.store(0, Ordering::Relaxed);
        }
    }
    fn copy_out(&self, out: &mut [u8]) {
        touch_slice(&self.words, Access::Read);
        for (w, chunk) in self.words.iter().zip(out.chunks_exact_mut(8)) {
            chunk.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
    }
    fn copy_in(&self, bytes: &[u8]) {
        touch_slice(&self.words, Access::Write);
        for (w, chunk) in self.words.iter().zip(bytes.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w.store(u64::from_le_bytes(b), Ordering::Relaxed);
        }
    }
}

/// A read-only view of a resident page, valid while the bank lock is held (shared or
/// exclusive). Words are little-endian 64-bit slices of the 8 KiB image, so byte `b` of the
/// page is bits `8*(b%8)..` of word `b/8`, matching the on-disk byte layout.
pub struct PageRef<'a> {
    slot: &'a Slot,
}

impl PageRef<'_> {
    /// The page number.
    pub fn page_number(&self) -> u32 {
        self.slot.page()
    }

    /// Word `i` of the page.
    ///
    /// # Panics
    /// If `i >= SLRU_PAGE_WORDS` (1024).
    pub fn word(&self, i: usize) -> u64 {
        touch_val(&self.slot.words[i], Access::Read);
        self.slot.words[i].load(Ordering::Relaxed)
    }

    /// Group LSN `g` of the buffer (0 = invalid / unknown).
    ///
    /// # Panics
    /// If `g` is not below the configured `lsn_groups_per_page`.
    pub fn group_lsn(&self, g: usize) -> u64 {
        touch_val(&self.slot.group_lsn[g], Access::Read);
        self.slot.group_lsn[g].load(Ordering::Relaxed)
    }
}

/// A writable view of a resident page, handed out only while the bank lock is held
/// exclusively; the page is marked dirty afterwards.
pub struct PageMut<'a> {
    slot: &'a Slot,
}

impl PageMut<'_> {
    /// The page number.
    pub fn page_number(&self) -> u32 {
        self.slot.page()
    }

    /// Word `i` of the page (see [`PageRef::word`]).
    ///
    /// # Panics
    /// If `i >= SLRU_PAGE_WORDS` (1024).
    pub fn word(&self, i: usize) -> u64 {
        touch_val(&self.slot.words[i], Access::Read);
        self.slot.words[i].load(Ordering::Relaxed)
    }

    /// Replaces word `i` of the page.
    ///
    /// # Panics
    /// If `i >= SLRU_PAGE_WORDS` (1024).
    pub fn set_word(&self, i: usize, v: u64) {
        touch_val(&self.slot.words[i], Access::Write);
        self.slot.words[i].store(v, Ordering::Relaxed);
    }

    /// Group LSN `g` of the buffer.
    ///
    /// # Panics
    /// If `g` is not below the configured `lsn_groups_per_page`.
    pub fn group_lsn(&self, g: usize) -> u64 {
        touch_val(&self.slot.group_lsn[g], Access::Read);
        self.slot.group_lsn[g].load(Ordering::Relaxed)
    }

    /// Raises group LSN `g` to `lsn` if that is higher (`TransactionIdSetStatusBit`'s LSN
    /// step).
    ///
    /// # Panics
    /// If `g` is not below the configured `lsn_groups_per_page`.
    pub fn raise_group_lsn(&self, g: usize, lsn: u64) {
        let cell = &self.slot.group_lsn[g];
        touch_val(cell, Access::Read);
        if cell.load(Ordering::Relaxed) < lsn {
            touch_val(cell, Access::Write);
            cell.store(lsn, Ordering::Relaxed);
        }
    }
}

/// A bank (the whole cache, with a control lock) and its lock and LRU clock.
///
/// The lock guards `()`: what it protects is the status, page number and contents of the
/// bank's slots, which stay atomics in [`Slru::slots`] because diagnostics
/// ([`Slru::resident_pages`]) and the I/O wait read them without it. The guard
/// ([`BankGuard`]) is the proof that the bank lock is held, handed to every helper that needs
/// it; `lock_api`'s `unlocked` releases and retakes it around I/O.
struct Bank {
    lock: LwRwLock<()>,
    cur_lru_count: AtomicU32,
}

/// An exclusive hold of one bank lock.
type BankGuard<'a> = LwRwLockWriteGuard<'a, ()>;

/// Where pages are kept outside the buffers.
enum Store {
    Memory(Mutex<HashMap<u32, Box<[u8]>>>),
    Dir { path: PathBuf, fsync: bool, touched: Mutex<BTreeSet<u32>> },
}

/// The segment file name of `segment`: upper-case hex, at least 4 digits (`SlruFileName`).
pub fn segment_file_name(segment: u32) -> String {
    format!("{segment:04X}")
}

/// Parses a segment file name made by [`segment_file_name`] (4 to 6 hex digits).
pub fn parse_segment_file_name(name: &str) -> Option<u32> {
    if !(4..=6).contains(&name.len()) || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(name, 16).ok()
}

/// A simple-LRU page cache (see the module documentation).
///
/// Shape: `buffers` slots of 8 KiB each (plus `8 * lsn_groups_per_page` bytes of group LSNs),
/// grouped into one bank (control lock) or `buffers / 16` banks. All methods take `&self` and
/// are safe to call from many threads.
pub struct Slru {
    name: &'static str,
    id: u64,
    slots: Box<[Slot]>,
    banks: Box<[CachePadded<Bank>]>,
    bank_size: usize,
    locking: SlruLocking,
    store: Store,
    page_precedes: fn(u32, u32) -> bool,
    zero_missing: bool,
    lsn_groups_per_page: usize,
    latest_page: AtomicU32,
    wal_flush: Option<WalFlushHook>,
    stats: StatsRegistry<SlruCounters>,
    /// Test hook run by [`Slru::truncate`] between emptying the buffers and removing segments,
    /// with no lock held: a forced interleaving point for the unit tests.
    #[cfg(test)]
    truncate_hook: Mutex<Option<TruncateHook>>,
}

impl fmt::Debug for Slru {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slru")
            .field("name", &self.name)
            .field("buffers", &self.slots.len())
            .field("locking", &self.locking)
            .field("banks", &self.banks.len())
            .finish()
    }
}

impl Slru {
    /// Builds the cache (`SimpleLruInit`): every buffer empty; for directory storage, creates
    /// the directory if it does not exist.
    ///
    /// # Errors
    /// [`SlruError::InvalidConfig`] if `buffers < 2`, or with banks if `buffers` is not a
    /// positive multiple of 16; [`SlruError::Io`] if the directory cannot be created.
    pub fn new(config: SlruConfig) -> Result<Slru, SlruError> {
        let name = config.name;
        let n = config.buffers;
        if n < 2 {
            return Err(SlruError::InvalidConfig {
                slru: name,
                reason: format!("need at least 2 buffers, got {n}"),
            });
        }
        if n > u32::MAX as usize / 2 {
            return Err(SlruError::InvalidConfig { slru: name, reason: format!("too many buffers: {n}") });
        }
        let (nbanks, bank_size, tranche) = match config.locking {
            SlruLocking::ControlLock => (1, n, config.control_tranche),
            SlruLocking::Banks => {
                if !n.is_multiple_of(SLRU_BANK_SIZE) {
                    return Err(SlruError::InvalidConfig {
                        slru: name,
                        reason: format!(
                            "with banks the buffer count must be a multiple of {SLRU_BANK_SIZE}, got {n}"
                        ),
                    });
                }
                (n / SLRU_BANK_SIZE, SLRU_BANK_SIZE, config.bank_tranche)
            }
        };
        let store = match &config.storage {
            SlruStorage::Memory => Store::Memory(Mutex::new(HashMap::new())),
            SlruStorage::Directory { path, fsync } => {
                fs::create_dir_all(path).map_err(|e| SlruError::Io {
                    slru: name,
                    op: "create directory",
                    path: path.clone(),
                    page: None,
                    source: e,
                })?;
                Store::Dir { path: path.clone(), fsync: *fsync, touched: Mutex::new(BTreeSet::new()) }
            }
        };
        let slots = (0..n)
            .map(|i| Slot {
                status: AtomicU8::new(SlruPageStatus::Empty as u8),
                dirty: AtomicBool::new(false),
                page_number: AtomicU32::new(NO_PAGE),
                lru_count: AtomicU32::new(0),
                io_lock: LwLock::new(config.lwlock_kind, config.buffer_tranche, i as u32),
                words: (0..SLRU_PAGE_WORDS).map(|_| AtomicU64::new(0)).collect(),
                group_lsn: (0..config.lsn_groups_per_page).map(|_| AtomicU64::new(0)).collect(),
            })
            .collect();
        let banks = (0..nbanks)
            .map(|b| {
                CachePadded::new(Bank {
                    lock: LwLock::new(config.lwlock_kind, tranche, b as u32).with_data(()),
                    cur_lru_count: AtomicU32::new(0),
                })
            })
            .collect();
        let slru = Slru {
            name,
            id: NEXT_SLRU_ID.fetch_add(1, Ordering::Relaxed),
            slots,
            banks,
            bank_size,
            locking: config.locking,
            store,
            page_precedes: config.page_precedes,
            zero_missing: config.zero_missing,
            lsn_groups_per_page: config.lsn_groups_per_page,
            latest_page: AtomicU32::new(NO_PAGE),
            wal_flush: config.wal_flush,
            stats: StatsRegistry::new(),
            #[cfg(test)]
            truncate_hook: Mutex::new(None),
        };
        slru.name_lines();
        Ok(slru)
    }

    /// Names the hot lines for a simulation's statistics (see `hook::name_line`): each bank
    /// lock (`"XactSLRUBank 0"`, or the control lock by its tranche name, `"XactSLRU"`), and each buffer's
    /// line of metadata and I/O lock (`"Xact slot 3"`). The slot and bank arrays are
    /// boxed, so moving the `Slru` afterwards keeps these addresses.
    fn name_lines(&self) {
        for bank in self.banks.iter() {
            let t = bank.lock.tranche().name();
            match self.locking {
                SlruLocking::Banks => bank.lock.name_line(),
                SlruLocking::ControlLock => bank.lock.name_line_as(|| t.to_string()),
            }
        }
        // A slot's metadata and I/O lock share a line (slots are not padded, so neighbours may
        // too): the line takes the slot's name.
        for (i, slot) in self.slots.iter().enumerate() {
            slot.io_lock.name_line_as(|| format!("{} slot {i}", self.name));
            hook::name_line(&slot.status as *const AtomicU8 as *const u8, || {
                format!("{} slot {i}", self.name)
            });
        }
    }

    /// The SLRU's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Number of page buffers.
    pub fn buffers(&self) -> usize {
        self.slots.len()
    }

    /// The lock layout.
    pub fn locking(&self) -> SlruLocking {
        self.locking
    }

    /// Number of banks (1 with a control lock).
    pub fn bank_count(&self) -> usize {
        self.banks.len()
    }

    /// Group LSNs per buffer (0 if none).
    pub fn lsn_groups_per_page(&self) -> usize {
        self.lsn_groups_per_page
    }

    /// The bank that page `page` lives in (`SlotGetBankNumber`: `page % banks`; always 0 with a
    /// control lock).
    #[inline]
    pub fn bank_of(&self, page: u32) -> usize {
        match self.locking {
            SlruLocking::ControlLock => 0,
            SlruLocking::Banks => page as usize % self.banks.len(),
        }
    }

    /// The lock guarding page `page` (`SimpleLruGetBankLock`, 17; the control lock before).
    #[inline]
    pub fn bank_lock_for(&self, page: u32) -> &LwLock {
        // SAFETY: the bank lock protects `()`, so no reference to protected data exists for a
        // raw acquisition or release to invalidate; the slots it orders are atomics.
        unsafe { self.banks[self.bank_of(page)].lock.raw() }
    }

    /// The newest page known (zeroed by [`zero_page`](Self::zero_page), set by
    /// [`set_latest_page`](Self::set_latest_page), or the newest page modified); `None` before
    /// any. Its buffer is never chosen as an eviction victim, and its segment is never removed
    /// by [`truncate`](Self::truncate).
    pub fn latest_page(&self) -> Option<u32> {
        match self.latest_page.load(Ordering::Relaxed) {
            NO_PAGE => None,
            p => Some(p),
        }
    }

    /// Sets the latest page (what `StartupCLOG` / `TrimCLOG` do from the next xid).
    pub fn set_latest_page(&self, page: u32) {
        self.latest_page.store(page, Ordering::Relaxed);
    }

    /// Counters summed over every backend that used this SLRU.
    pub fn stats(&self) -> SlruStats {
        let mut s = SlruStats::default();
        self.stats.for_each(|c| s.add_backend(c));
        s
    }

    /// Zeroes every counter (meant for quiescent points between runs).
    pub fn reset_stats(&self) {
        self.stats.for_each(SlruCounters::reset);
    }

    /// Snapshot of the buffers, for diagnostics and tests: `(page, status, dirty)` of every
    /// non-empty buffer, in buffer order. Reads without locks, so it may be slightly stale.
    pub fn resident_pages(&self) -> Vec<(u32, SlruPageStatus, bool)> {
        self.slots
            .iter()
            .filter(|s| s.status() != SlruPageStatus::Empty)
            .map(|s| (s.page(), s.status(), s.is_dirty()))
            .collect()
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;

#[cfg(test)]
mod tests;
