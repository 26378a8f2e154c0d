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

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::{StatsRegistry, TrancheId, WaitEvent, WaitEventScope};
use lockstack_lwlock::{
    LwLock, LwLockImpl, LwLockKind, LwLockMode, LwRwLock, LwRwLockExt, LwRwLockWriteGuard,
};

use crate::sync::{AtomicBool, AtomicU8, AtomicU32, Mutex, Ordering, PlainU64 as AtomicU64};
use lockstack_common::sync::hook::{self, Access, touch_slice, touch_val};

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

/// What [`Slru::delete_segment_checked`] did with one segment.
enum SegmentDeletion {
    /// The segment was removed from storage.
    Removed,
    /// The segment holds the latest page now, or may not go for another reason.
    Kept,
    /// The latest page precedes the cutoff: stop truncating.
    Wraparound,
}

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

    /// Reads page `page` and runs `f` on it while the page's bank lock is held
    /// (`SimpleLruReadPage_ReadOnly`): first under a *shared* lock, which suffices when the
    /// page is resident (valid or being written); otherwise the lock is retaken exclusively and
    /// the page is read in, possibly evicting (and first writing) the least recently used page
    /// of the bank.
    ///
    /// # Errors
    /// I/O errors reading the page or writing a victim; [`SlruError::PageNotFound`] for a
    /// missing page when `zero_missing` is off.
    pub fn read_page<R>(&self, page: u32, f: impl FnOnce(PageRef<'_>) -> R) -> Result<R, SlruError> {
        let bank = self.bank_of(page);
        let g = self.banks[bank].lock.read();
        for i in self.bank_range(bank) {
            let s = &self.slots[i];
            if s.page() == page
                && matches!(s.status(), SlruPageStatus::Valid | SlruPageStatus::WriteInProgress)
            {
                // The LRU update races with other shared holders; a lost update only makes a
                // later victim choice slightly worse (as in PostgreSQL).
                self.recently_used(bank, i);
                self.count(|c| c.hits.incr());
                return Ok(f(PageRef { slot: s }));
            }
        }
        drop(g);
        let mut g = self.banks[bank].lock.write();
        let i = self.read_page_locked(&mut g, bank, page, true)?;
        Ok(f(PageRef { slot: &self.slots[i] }))
    }

    /// Reads page `page` under its bank lock held exclusively, runs `f` on it, and marks it
    /// dirty (`SimpleLruReadPage` followed by a modification). With `write_ok` false, waits for
    /// an in-progress write of the page to finish first (CLOG does so for asynchronous commits,
    /// so that a status bit never reaches storage before its WAL).
    ///
    /// # Errors
    /// As [`read_page`](Self::read_page).
    pub fn modify_page<R>(
        &self,
        page: u32,
        write_ok: bool,
        f: impl FnOnce(PageMut<'_>) -> R,
    ) -> Result<R, SlruError> {
        let bank = self.bank_of(page);
        let mut g = self.banks[bank].lock.write();
        let i = self.read_page_locked(&mut g, bank, page, write_ok)?;
        let s = &self.slots[i];
        let r = f(PageMut { slot: s });
        s.dirty.store(true, Ordering::Relaxed);
        self.advance_latest(page);
        Ok(r)
    }

    /// Like [`modify_page`](Self::modify_page), for a caller that already holds bank `bank`'s
    /// lock exclusively (a group leader): runs `f` only if the page is resident and usable
    /// without I/O or waiting; returns `None` otherwise. Never releases the lock.
    pub(crate) fn modify_resident_locked<R>(
        &self,
        bank: usize,
        page: u32,
        write_ok: bool,
        f: impl FnOnce(PageMut<'_>) -> R,
    ) -> Option<R> {
        if self.bank_of(page) != bank {
            return None;
        }
        for i in self.bank_range(bank) {
            let s = &self.slots[i];
            if s.page() != page {
                continue;
            }
            let usable = match s.status() {
                SlruPageStatus::Valid => true,
                SlruPageStatus::WriteInProgress => write_ok,
                _ => false,
            };
            if !usable {
                return None;
            }
            let r = f(PageMut { slot: s });
            s.dirty.store(true, Ordering::Relaxed);
            self.recently_used(bank, i);
            self.advance_latest(page);
            self.count(|c| c.hits.incr());
            return Some(r);
        }
        None
    }

    /// Creates page `page` as all zeros in a buffer, dirty, and makes it the latest page
    /// (`SimpleLruZeroPage`, used by `ExtendCLOG` when the first xid of a page is assigned).
    ///
    /// # Errors
    /// I/O errors writing an evicted dirty page.
    pub fn zero_page(&self, page: u32) -> Result<(), SlruError> {
        let bank = self.bank_of(page);
        let mut g = self.banks[bank].lock.write();
        let i = loop {
            let i = self.select_slot(&mut g, bank, page)?;
            let s = &self.slots[i];
            if s.page() == page
                && matches!(s.status(), SlruPageStatus::ReadInProgress | SlruPageStatus::WriteInProgress)
            {
                self.wait_io(&mut g, i);
                continue;
            }
            break i;
        };
        let s = &self.slots[i];
        if s.status() == SlruPageStatus::Valid && s.page() != page {
            self.count(|c| c.evictions.incr());
        }
        s.page_number.store(page, Ordering::Relaxed);
        s.zero_contents();
        s.set_status(SlruPageStatus::Valid);
        s.dirty.store(true, Ordering::Relaxed);
        self.recently_used(bank, i);
        self.latest_page.store(page, Ordering::Relaxed);
        self.count(|c| c.zeroed.incr());
        Ok(())
    }

    /// Writes every dirty page and, with `fsync`, syncs the segment files written since the
    /// previous flush (`SimpleLruFlush` / `SimpleLruWriteAll`, run at checkpoints and
    /// shutdown). Pages stay resident.
    ///
    /// # Errors
    /// The first write or sync error; pages that failed stay dirty.
    pub fn flush(&self) -> Result<(), SlruError> {
        for bank in 0..self.banks.len() {
            let mut g = self.banks[bank].lock.write();
            for i in self.bank_range(bank) {
                self.write_slot(&mut g, i)?;
            }
        }
        self.sync_store()?;
        self.count(|c| c.flushes.incr());
        Ok(())
    }

    /// Removes what precedes `cutoff_page`, the oldest page still needed (`SimpleLruTruncate`,
    /// PostgreSQL 13+ form): buffers of older pages are emptied (dirty ones written first,
    /// in-progress I/O waited out), then every segment whose first *and* last pages precede
    /// the cutoff is removed from storage (`SlruMayDeleteSegment`). The cutoff is compared as
    /// given, never rounded to a segment boundary, so a segment that holds the cutoff page or
    /// straddles the wraparound point stays.
    ///
    /// The latest page guards it all ("apparent wraparound"): if it precedes the cutoff,
    /// nothing more is done. It is checked under the bank lock each time buffer scanning
    /// (re)starts, and again before each segment is removed while *every* bank lock is held
    /// exclusively, so that no page of that segment can be created, modified, read or written
    /// meanwhile; the latest page's segment is never removed (see "Locking rules" in
    /// `docs/clog.md`).
    ///
    /// # Errors
    /// I/O errors writing a page, listing the directory or removing a file.
    ///
    /// Returns [`TruncateOutcome::ApparentWraparound`] also when the latest page moves past
    /// the cutoff while segments are being removed; segments removed before that are not
    /// listed then.
    pub fn truncate(&self, cutoff_page: u32) -> Result<TruncateOutcome, SlruError> {
        let cutoff = cutoff_page;
        for bank in 0..self.banks.len() {
            let mut g = self.banks[bank].lock.write();
            'restart: loop {
                if self.latest_precedes(cutoff) {
                    return Ok(TruncateOutcome::ApparentWraparound);
                }
                for i in self.bank_range(bank) {
                    let s = &self.slots[i];
                    let st = s.status();
                    if st == SlruPageStatus::Empty || !(self.page_precedes)(s.page(), cutoff) {
                        continue;
                    }
                    if st == SlruPageStatus::Valid && !s.is_dirty() {
                        s.set_status(SlruPageStatus::Empty);
                        continue;
                    }
                    if st == SlruPageStatus::Valid {
                        self.write_slot(&mut g, i)?;
                    } else {
                        self.wait_io(&mut g, i);
                    }
                    continue 'restart;
                }
                break;
            }
        }
        #[cfg(test)]
        self.run_truncate_hook();
        let mut removed = Vec::new();
        for seg in self.segments()? {
            if !self.may_delete_segment(seg, cutoff) {
                continue;
            }
            match self.delete_segment_checked(seg, cutoff)? {
                SegmentDeletion::Removed => removed.push(seg),
                SegmentDeletion::Kept => {}
                SegmentDeletion::Wraparound => return Ok(TruncateOutcome::ApparentWraparound),
            }
        }
        self.count(|c| c.truncates.incr());
        Ok(TruncateOutcome::Truncated { removed_segments: removed })
    }

    /// Segment numbers present in storage, ascending (a directory scan, like
    /// `SlruScanDirectory`; names that are not 4-6 hex digits are ignored).
    ///
    /// # Errors
    /// [`SlruError::Io`] if the directory cannot be listed.
    pub fn segments(&self) -> Result<Vec<u32>, SlruError> {
        match &self.store {
            Store::Memory(m) => {
                let set: BTreeSet<u32> = m.lock().keys().map(|p| p / SLRU_PAGES_PER_SEGMENT).collect();
                Ok(set.into_iter().collect())
            }
            Store::Dir { path, .. } => {
                let err = |e| SlruError::Io {
                    slru: self.name,
                    op: "list directory",
                    path: path.clone(),
                    page: None,
                    source: e,
                };
                let mut v = Vec::new();
                for entry in fs::read_dir(path).map_err(err)? {
                    let entry = entry.map_err(err)?;
                    if let Some(seg) = entry.file_name().to_str().and_then(parse_segment_file_name) {
                        v.push(seg);
                    }
                }
                v.sort_unstable();
                Ok(v)
            }
        }
    }

    // ---- internals -------------------------------------------------------------------------

    #[cfg(test)]
    fn run_truncate_hook(&self) {
        let hook = self.truncate_hook.lock().take();
        if let Some(mut h) = hook {
            h(self);
            *self.truncate_hook.lock() = Some(h);
        }
    }

    fn bank_range(&self, bank: usize) -> Range<usize> {
        bank * self.bank_size..(bank + 1) * self.bank_size
    }

    /// Runs `f` on the calling thread's counters for this SLRU.
    fn count(&self, f: impl FnOnce(&SlruCounters)) {
        let _ = LOCAL_STATS.try_with(|l| {
            let mut l = l.borrow_mut();
            if let Some((_, c)) = l.iter().rev().find(|(id, _)| *id == self.id) {
                f(c);
                return;
            }
            let c = self.stats.register();
            f(&c);
            if l.len() >= LOCAL_STATS_CACHE {
                l.remove(0);
            }
            l.push((self.id, c));
        });
    }

    /// `SlruRecentlyUsed`: makes slot `i` the most recently used of its bank.
    fn recently_used(&self, bank: usize, i: usize) {
        let b = &self.banks[bank];
        let s = &self.slots[i];
        let cur = b.cur_lru_count.load(Ordering::Relaxed);
        if s.lru_count.load(Ordering::Relaxed) != cur {
            let next = cur.wrapping_add(1);
            b.cur_lru_count.store(next, Ordering::Relaxed);
            s.lru_count.store(next, Ordering::Relaxed);
        }
    }

    /// True if the latest page precedes `cutoff` (the "apparent wraparound" check).
    fn latest_precedes(&self, cutoff: u32) -> bool {
        self.latest_page().is_some_and(|l| (self.page_precedes)(l, cutoff))
    }

    /// `SlruMayDeleteSegment`: segment `seg` may go only if its first and its last page both
    /// precede `cutoff` (a segment holding the cutoff, or the wraparound point, stays).
    fn may_delete_segment(&self, seg: u32, cutoff: u32) -> bool {
        let first = seg.wrapping_mul(SLRU_PAGES_PER_SEGMENT);
        let last = first.wrapping_add(SLRU_PAGES_PER_SEGMENT - 1);
        (self.page_precedes)(first, cutoff) && (self.page_precedes)(last, cutoff)
    }

    /// Removes segment `seg` from storage, with every bank lock held exclusively (taken in
    /// bank order; nothing else holds two bank locks): re-checks the latest page, empties the
    /// segment's clean buffers (a buffer with I/O in progress is waited out with the locks
    /// released, then everything is checked again), and only then removes the file. Dirty
    /// buffers of the segment are dropped unwritten: every page of it precedes the cutoff.
    fn delete_segment_checked(&self, seg: u32, cutoff: u32) -> Result<SegmentDeletion, SlruError> {
        loop {
            let guards: Vec<BankGuard<'_>> = self.banks.iter().map(|b| b.lock.write()).collect();
            if let Some(latest) = self.latest_page() {
                if (self.page_precedes)(latest, cutoff) {
                    return Ok(SegmentDeletion::Wraparound);
                }
                if latest / SLRU_PAGES_PER_SEGMENT == seg || !self.may_delete_segment(seg, cutoff) {
                    return Ok(SegmentDeletion::Kept);
                }
            }
            let mut busy = None;
            for (i, s) in self.slots.iter().enumerate() {
                let st = s.status();
                if st == SlruPageStatus::Empty || s.page() / SLRU_PAGES_PER_SEGMENT != seg {
                    continue;
                }
                if st == SlruPageStatus::Valid {
                    s.dirty.store(false, Ordering::Relaxed);
                    s.set_status(SlruPageStatus::Empty);
                } else {
                    busy = Some(i);
                    break;
                }
            }
            let Some(i) = busy else {
                self.remove_segment(seg)?;
                return Ok(SegmentDeletion::Removed);
            };
            drop(guards);
            let bank = i / self.bank_size;
            let mut g = self.banks[bank].lock.write();
            let s = &self.slots[i];
            if s.page() / SLRU_PAGES_PER_SEGMENT == seg
                && matches!(s.status(), SlruPageStatus::ReadInProgress | SlruPageStatus::WriteInProgress)
            {
                self.wait_io(&mut g, i);
            }
        }
    }

    /// Moves the latest page forward to `page` if `page` is newer.
    fn advance_latest(&self, page: u32) {
        let mut cur = self.latest_page.load(Ordering::Relaxed);
        while cur != page && (cur == NO_PAGE || (self.page_precedes)(cur, page)) {
            match self.latest_page.compare_exchange(cur, page, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }

    /// `SimpleLruWaitIO`: waits until the I/O on slot `i` is over, with the bank lock released
    /// meanwhile; returns holding it exclusively again. The caller must re-examine the slot.
    fn wait_io(&self, g: &mut BankGuard<'_>, i: usize) {
        let s = &self.slots[i];
        BankGuard::unlocked(g, || {
            let h = s.io_lock.acquire(LwLockMode::Shared);
            s.io_lock.release(h);
        });
    }

    /// `SlruSelectLRUPage`: the slot holding `page`, or an empty slot, or a clean victim.
    /// Requires the bank lock held exclusively; may release and retake it.
    fn select_slot(&self, g: &mut BankGuard<'_>, bank: usize, page: u32) -> Result<usize, SlruError> {
        loop {
            for i in self.bank_range(bank) {
                let s = &self.slots[i];
                if s.page() == page && s.status() != SlruPageStatus::Empty {
                    return Ok(i);
                }
            }
            let cur = self.banks[bank].cur_lru_count.fetch_add(1, Ordering::Relaxed);
            let latest = self.latest_page.load(Ordering::Relaxed);
            // (slot, age, page) of the oldest valid slot and of the oldest slot with I/O.
            let mut best_valid: Option<(usize, i32, u32)> = None;
            let mut best_busy: Option<(usize, i32, u32)> = None;
            for i in self.bank_range(bank) {
                let s = &self.slots[i];
                let st = s.status();
                if st == SlruPageStatus::Empty {
                    return Ok(i);
                }
                let mut age = cur.wrapping_sub(s.lru_count.load(Ordering::Relaxed)) as i32;
                if age < 0 {
                    // A racy update under a shared lock left a count from the future.
                    s.lru_count.store(cur, Ordering::Relaxed);
                    age = 0;
                }
                let p = s.page();
                if p == latest {
                    continue;
                }
                let better = |best: &Option<(usize, i32, u32)>| match best {
                    None => true,
                    Some((_, a, bp)) => age > *a || (age == *a && (self.page_precedes)(p, *bp)),
                };
                let slot = if st == SlruPageStatus::Valid { &mut best_valid } else { &mut best_busy };
                if better(slot) {
                    *slot = Some((i, age, p));
                }
            }
            match (best_valid, best_busy) {
                (Some((i, ..)), _) => {
                    if !self.slots[i].is_dirty() {
                        return Ok(i);
                    }
                    self.write_slot(g, i)?;
                }
                (None, Some((i, ..))) => self.wait_io(g, i),
                (None, None) => return Err(SlruError::NoFreeBuffer { slru: self.name, page }),
            }
        }
    }

    /// `SimpleLruReadPage`: makes `page` resident and valid, returns its slot. Requires the bank
    /// lock held exclusively; may release and retake it around I/O.
    fn read_page_locked(
        &self,
        g: &mut BankGuard<'_>,
        bank: usize,
        page: u32,
        write_ok: bool,
    ) -> Result<usize, SlruError> {
        loop {
            let i = self.select_slot(g, bank, page)?;
            let s = &self.slots[i];
            let st = s.status();
            if s.page() == page && st != SlruPageStatus::Empty {
                if st == SlruPageStatus::ReadInProgress
                    || (st == SlruPageStatus::WriteInProgress && !write_ok)
                {
                    self.wait_io(g, i);
                    continue;
                }
                self.recently_used(bank, i);
                self.count(|c| c.hits.incr());
                return Ok(i);
            }
            if st == SlruPageStatus::Valid {
                self.count(|c| c.evictions.incr());
            }
            s.page_number.store(page, Ordering::Relaxed);
            s.set_status(SlruPageStatus::ReadInProgress);
            s.dirty.store(false, Ordering::Relaxed);
            let io = s.io_lock.acquire(LwLockMode::Exclusive);
            let r = BankGuard::unlocked(g, || {
                let r = self.physical_read(s, page);
                s.zero_lsns();
                r
            });
            s.set_status(if r.is_ok() { SlruPageStatus::Valid } else { SlruPageStatus::Empty });
            s.io_lock.release(io);
            r?;
            self.recently_used(bank, i);
            self.count(|c| c.reads.incr());
            return Ok(i);
        }
    }

    /// `SlruInternalWritePage`: writes slot `i` if it is valid and dirty. Requires the bank lock
    /// held exclusively; may release and retake it.
    fn write_slot(&self, g: &mut BankGuard<'_>, i: usize) -> Result<(), SlruError> {
        let s = &self.slots[i];
        let page = s.page();
        while s.status() == SlruPageStatus::WriteInProgress && s.page() == page {
            self.wait_io(g, i);
        }
        if !s.is_dirty() || s.status() != SlruPageStatus::Valid || s.page() != page {
            return Ok(());
        }
        s.set_status(SlruPageStatus::WriteInProgress);
        // Cleared before the copy: a modification during the write re-dirties the page.
        s.dirty.store(false, Ordering::Relaxed);
        let io = s.io_lock.acquire(LwLockMode::Exclusive);
        let r = BankGuard::unlocked(g, || self.physical_write(s, page));
        if r.is_err() {
            s.dirty.store(true, Ordering::Relaxed);
        }
        s.set_status(SlruPageStatus::Valid);
        s.io_lock.release(io);
        if r.is_ok() {
            self.count(|c| c.writes.incr());
        }
        r
    }

    fn segment_path(dir: &Path, page: u32) -> PathBuf {
        dir.join(segment_file_name(page / SLRU_PAGES_PER_SEGMENT))
    }

    /// `SlruPhysicalReadPage`: fills slot `s` with page `page` from storage.
    fn physical_read(&self, s: &Slot, page: u32) -> Result<(), SlruError> {
        let _w = WaitEventScope::new(WaitEvent::SLRU_READ);
        let found = match &self.store {
            Store::Memory(m) => match m.lock().get(&page) {
                Some(img) => {
                    s.copy_in(img);
                    true
                }
                None => false,
            },
            Store::Dir { path: dir, .. } => {
                let path = Self::segment_path(dir, page);
                let io = |op, e| SlruError::Io {
                    slru: self.name,
                    op,
                    path: path.clone(),
                    page: Some(page),
                    source: e,
                };
                match File::open(&path) {
                    Err(e) if e.kind() == io::ErrorKind::NotFound => false,
                    Err(e) => return Err(io("open", e)),
                    Ok(mut f) => {
                        let off = u64::from(page % SLRU_PAGES_PER_SEGMENT) * SLRU_PAGE_SIZE as u64;
                        f.seek(SeekFrom::Start(off)).map_err(|e| io("read", e))?;
                        let mut buf = vec![0u8; SLRU_PAGE_SIZE];
                        let mut got = 0;
                        while got < SLRU_PAGE_SIZE {
                            match f.read(&mut buf[got..]) {
                                Ok(0) => break,
                                Ok(n) => got += n,
                                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                                Err(e) => return Err(io("read", e)),
                            }
                        }
                        match got {
                            0 => false,
                            SLRU_PAGE_SIZE => {
                                s.copy_in(&buf);
                                true
                            }
                            n => {
                                return Err(SlruError::ShortRead { slru: self.name, path, page, bytes: n });
                            }
                        }
                    }
                }
            }
        };
        if !found {
            if !self.zero_missing {
                return Err(SlruError::PageNotFound { slru: self.name, page });
            }
            for w in s.words.iter() {
                w.store(0, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// `SlruPhysicalWritePage`: writes slot `s` (holding `page`) to storage, after the WAL
    /// flush hook for its highest group LSN.
    fn physical_write(&self, s: &Slot, page: u32) -> Result<(), SlruError> {
        if let Some(hook) = &self.wal_flush {
            let max = s.group_lsn.iter().map(|l| l.load(Ordering::Relaxed)).max().unwrap_or(0);
            if max != 0 {
                hook(max);
            }
        }
        let mut buf = vec![0u8; SLRU_PAGE_SIZE];
        s.copy_out(&mut buf);
        let _w = WaitEventScope::new(WaitEvent::SLRU_WRITE);
        match &self.store {
            Store::Memory(m) => {
                m.lock().insert(page, buf.into_boxed_slice());
                Ok(())
            }
            Store::Dir { path: dir, touched, .. } => {
                let path = Self::segment_path(dir, page);
                let io = |op, e| SlruError::Io {
                    slru: self.name,
                    op,
                    path: path.clone(),
                    page: Some(page),
                    source: e,
                };
                let mut f = OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .open(&path)
                    .map_err(|e| io("open", e))?;
                let off = u64::from(page % SLRU_PAGES_PER_SEGMENT) * SLRU_PAGE_SIZE as u64;
                f.seek(SeekFrom::Start(off)).map_err(|e| io("write", e))?;
                f.write_all(&buf).map_err(|e| io("write", e))?;
                touched.lock().insert(page / SLRU_PAGES_PER_SEGMENT);
                Ok(())
            }
        }
    }

    /// Syncs the segments written since the last flush (directory storage with `fsync`).
    fn sync_store(&self) -> Result<(), SlruError> {
        let Store::Dir { path: dir, fsync, touched } = &self.store else {
            return Ok(());
        };
        let segs = std::mem::take(&mut *touched.lock());
        if !*fsync {
            return Ok(());
        }
        let _w = WaitEventScope::new(WaitEvent::SLRU_SYNC);
        for (n, &seg) in segs.iter().enumerate() {
            let path = dir.join(segment_file_name(seg));
            let r = File::open(&path).and_then(|f| f.sync_all());
            match r {
                Ok(()) => {}
                // Truncated away since it was written: nothing to sync.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Keep the unsynced ones for the next flush.
                    touched.lock().extend(segs.iter().skip(n).copied());
                    return Err(SlruError::Io { slru: self.name, op: "fsync", path, page: None, source: e });
                }
            }
        }
        Ok(())
    }

    fn remove_segment(&self, seg: u32) -> Result<(), SlruError> {
        match &self.store {
            Store::Memory(m) => {
                m.lock().retain(|p, _| p / SLRU_PAGES_PER_SEGMENT != seg);
                Ok(())
            }
            Store::Dir { path: dir, touched, .. } => {
                let path = dir.join(segment_file_name(seg));
                touched.lock().remove(&seg);
                match fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                    Err(e) => {
                        Err(SlruError::Io { slru: self.name, op: "remove", path, page: None, source: e })
                    }
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_precedes(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) as i32) < 0
    }

    fn config(buffers: usize, locking: SlruLocking) -> SlruConfig {
        SlruConfig {
            name: "Test",
            buffers,
            locking,
            lwlock_kind: LwLockKind::Atomic,
            storage: SlruStorage::Memory,
            control_tranche: TrancheId::XACT_SLRU,
            bank_tranche: TrancheId::XACT_SLRU_BANK,
            buffer_tranche: TrancheId::XACT_BUFFER,
            lsn_groups_per_page: 4,
            page_precedes: plain_precedes,
            zero_missing: true,
            wal_flush: None,
        }
    }

    #[test]
    fn segment_names_are_postgres_hex() {
        assert_eq!(segment_file_name(0), "0000");
        assert_eq!(segment_file_name(0x1f), "001F");
        assert_eq!(segment_file_name(0x12345), "12345");
        assert_eq!(parse_segment_file_name("001F"), Some(0x1f));
        assert_eq!(parse_segment_file_name("1F"), None);
        assert_eq!(parse_segment_file_name("00G0"), None);
        assert_eq!(parse_segment_file_name("1234567"), None);
    }

    #[test]
    fn config_is_checked() {
        assert!(matches!(
            Slru::new(config(1, SlruLocking::ControlLock)),
            Err(SlruError::InvalidConfig { .. })
        ));
        assert!(matches!(Slru::new(config(24, SlruLocking::Banks)), Err(SlruError::InvalidConfig { .. })));
        let s = Slru::new(config(48, SlruLocking::Banks)).unwrap();
        assert_eq!(s.bank_count(), 3);
        assert_eq!(s.bank_of(7), 1);
        let s = Slru::new(config(8, SlruLocking::ControlLock)).unwrap();
        assert_eq!(s.bank_count(), 1);
        assert_eq!(s.bank_of(7), 0);
    }

    #[test]
    fn page_words_are_little_endian_bytes() {
        let s = Slru::new(config(2, SlruLocking::ControlLock)).unwrap();
        s.modify_page(3, true, |p| p.set_word(1, 0x0807_0605_0403_0201)).unwrap();
        let slot = s.slots.iter().find(|x| x.page() == 3).unwrap();
        let mut out = vec![0u8; SLRU_PAGE_SIZE];
        slot.copy_out(&mut out);
        assert_eq!(&out[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert!(out[..8].iter().all(|&b| b == 0));
    }

    #[test]
    fn latest_page_is_never_the_victim() {
        let s = Slru::new(config(2, SlruLocking::ControlLock)).unwrap();
        s.zero_page(10).unwrap();
        // Page 10 is the oldest by LRU but the latest page: pages 1..6 cycle through the
        // other buffer.
        for p in 1..6 {
            s.read_page(p, |_| ()).unwrap();
        }
        let resident: Vec<u32> = s.resident_pages().iter().map(|r| r.0).collect();
        assert!(resident.contains(&10), "latest page evicted: {resident:?}");
        assert_eq!(s.stats().zeroed, 1);
        assert_eq!(s.stats().reads, 5);
        assert_eq!(s.stats().evictions, 4);
    }

    #[test]
    fn wal_flush_hook_sees_the_highest_group_lsn_before_the_write() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        let mut cfg = config(2, SlruLocking::ControlLock);
        cfg.wal_flush = Some(Arc::new(move |lsn| seen2.lock().push(lsn)));
        let s = Slru::new(cfg).unwrap();
        s.modify_page(0, true, |p| {
            p.raise_group_lsn(1, 500);
            p.raise_group_lsn(1, 300);
            p.raise_group_lsn(2, 700);
        })
        .unwrap();
        s.read_page(0, |p| assert_eq!((p.group_lsn(1), p.group_lsn(2)), (500, 700))).unwrap();
        s.flush().unwrap();
        assert_eq!(*seen.lock(), vec![700]);
        // Group LSNs are memory-only: re-reading the page resets them. (Page 0 is the latest
        // page, which is never evicted, until the latest page moves on.)
        s.set_latest_page(100);
        s.read_page(1, |_| ()).unwrap();
        s.read_page(2, |_| ()).unwrap();
        s.read_page(0, |p| assert_eq!(p.group_lsn(2), 0)).unwrap();
    }

    #[test]
    fn missing_pages_error_when_not_zeroing() {
        let mut cfg = config(2, SlruLocking::ControlLock);
        cfg.zero_missing = false;
        let s = Slru::new(cfg).unwrap();
        let e = s.read_page(5, |_| ()).unwrap_err();
        assert!(matches!(e, SlruError::PageNotFound { page: 5, .. }), "{e}");
        // The failed read left no half-valid buffer behind.
        assert!(s.resident_pages().is_empty());
        s.zero_page(5).unwrap();
        assert_eq!(s.read_page(5, |p| p.word(0)).unwrap(), 0);
    }

    /// A circular order over 4096 pages (half the space is 2048 pages, 64 segments), so that
    /// tests can put the latest page and the cutoff near the wraparound horizon cheaply.
    fn precedes_4096(a: u32, b: u32) -> bool {
        (a.wrapping_sub(b) & 0xFFF) >= 0x800
    }

    fn config_4096(locking: SlruLocking) -> SlruConfig {
        let mut cfg = config(32, locking);
        cfg.page_precedes = precedes_4096;
        cfg.zero_missing = false;
        cfg
    }

    /// A segment created and written while a truncation runs is never
    /// removed by it. The truncation passes its latest-page check, writes out an old dirty
    /// page, and meanwhile (the hook) another backend zeroes and flushes the first page of a
    /// new segment, which with this cutoff precedes it (a stale cutoff, half the page space
    /// behind the new page).
    #[test]
    fn truncation_never_removes_a_segment_created_while_it_runs() {
        for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
            let s = Slru::new(config_4096(locking)).unwrap();
            for p in [0, 33] {
                s.zero_page(p).unwrap();
                s.modify_page(p, true, |pg| pg.set_word(0, u64::from(p) + 1)).unwrap();
            }
            s.flush().unwrap();
            // Page 33 is dirty again, so the truncation has a write to do.
            s.modify_page(33, true, |pg| pg.set_word(1, 7)).unwrap();
            // The latest page, 2047 pages after the cutoff 64: a legal span.
            s.zero_page(2111).unwrap();
            *s.truncate_hook.lock() = Some(Box::new(|s: &Slru| {
                // Another backend extends the log into segment 66 and writes the page out.
                s.zero_page(2112).unwrap();
                s.modify_page(2112, true, |pg| pg.set_word(0, 2113)).unwrap();
                s.flush().unwrap();
            }));
            let r = s.truncate(64).unwrap();
            assert!(s.segments().unwrap().contains(&66), "{locking}: the new segment was removed ({r:?})");
            // The new latest page precedes the cutoff: nothing may be removed.
            assert_eq!(r, TruncateOutcome::ApparentWraparound, "{locking}");
            assert_eq!(s.segments().unwrap(), vec![0, 1, 65, 66], "{locking}");
            // The new page reads back from storage once it is no longer resident.
            for p in 2113..2113 + 64 {
                s.zero_page(p).unwrap();
            }
            assert!(s.resident_pages().iter().all(|r| r.0 != 2112), "{locking}: still resident");
            assert_eq!(s.read_page(2112, |pg| pg.word(0)).unwrap(), 2113, "{locking}");
        }
    }

    /// The cutoff is not rounded down to its segment before the
    /// wraparound check. A span of 2047 pages from the cutoff 70 to the latest page is legal;
    /// rounding the cutoff to 64 made it look like wraparound.
    #[test]
    fn truncation_accepts_a_legal_span_to_an_unaligned_cutoff() {
        for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
            let s = Slru::new(config_4096(locking)).unwrap();
            for p in [40, 70, 2117] {
                s.zero_page(p).unwrap();
            }
            s.flush().unwrap();
            let r = s.truncate(70).unwrap();
            assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![1] }, "{locking}");
            assert_eq!(s.segments().unwrap(), vec![2, 66], "{locking}");
        }
    }

    /// A segment is removed only if its first and its last page precede
    /// the unrounded cutoff (`SlruMayDeleteSegment`): segment 66 stays, although every page of
    /// it precedes 64, the cutoff rounded down.
    #[test]
    fn truncation_compares_segments_with_the_unrounded_cutoff() {
        for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
            let s = Slru::new(config_4096(locking)).unwrap();
            for p in [40, 70, 2112, 2111] {
                s.zero_page(p).unwrap();
            }
            s.flush().unwrap();
            assert_eq!(s.latest_page(), Some(2111));
            let r = s.truncate(70).unwrap();
            // Segment 66 (pages 2112..2144): its first page is 2042 pages after the cutoff.
            assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![1] }, "{locking}");
            assert_eq!(s.segments().unwrap(), vec![2, 65, 66], "{locking}");
        }
    }
}
