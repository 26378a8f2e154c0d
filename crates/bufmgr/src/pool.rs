//! The shared buffer pool ([`BufferPool`]), the per-backend handle that pins through it
//! ([`BackendBuffers`]) and content-lock guards with page access ([`ContentGuard`]).
//!
//! The read path is PostgreSQL's `ReadBuffer_common` → `BufferAlloc` → `StrategyGetBuffer` /
//! `StartBufferIO` (`bufmgr.c`, `freelist.c`), with the locking rules of
//! `src/backend/storage/buffer/README`: a buffer found in the mapping table is pinned before
//! the partition lock is released; a victim is re-tagged only with refcount 1 (our own pin)
//! under both mapping partitions; a dirty victim is written under a *conditional* shared content
//! lock; WAL is flushed up to the page LSN before the page is written.

use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering, RwLock};
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::hook::{self, Access};
use lockstack_common::{
    AUXILIARY_BACKEND_BASE, AttachError, BackendId, BlockNumber, InvariantViolation, Oid, StatsRegistry,
    WaitEvent, WaitEventScope,
};
use lockstack_lwlock::{LwLockHeld, LwLockImpl, LwLockKind, LwLockMode};

use crate::arena::PageArena;
use crate::desc::{
    BM_DIRTY, BM_IO_ERROR, BM_IO_IN_PROGRESS, BM_JUST_DIRTIED, BM_LOCKED, BM_MAX_USAGE_COUNT,
    BM_PIN_COUNT_WAITER, BM_TAG_VALID, BM_VALID, BUF_REFCOUNT_MASK, BUF_USAGECOUNT_ONE, BufferDesc,
    HeaderCost, HeaderKind,
};
use crate::desc_array::{DescArray, DescPadding};
use crate::freelist::{Strategy, Victim, VictimKind};
use crate::page::{self, BLCKSZ, PageVerifier};
use crate::private_ref::{HeldLocks, PrivateRefCount};
use crate::smgr::{MemorySmgr, Smgr, SmgrError};
use crate::stats::{BackendCounters, BufferStats};
use crate::table::{BufTable, MappingKind};
use crate::tag::{BufferTag, ForkNumber, HashedTag};

/// Largest pool accepted by [`BufferPoolConfig::validate`]: 2^21 buffers (16 GiB).
pub const MAX_BUFFERS: usize = 1 << 21;

/// Number of relation-extension locks; a relation fork uses the one its tag hash picks.
const EXTENSION_LOCKS: usize = 16;

static ZERO_PAGE: [u8; BLCKSZ] = [0; BLCKSZ];

/// Errors of the buffer manager.
#[derive(Debug)]
pub enum BufferError {
    /// Every buffer is pinned, so none can be replaced (PostgreSQL's `ERROR: no unpinned
    /// buffers available`). Raised by the victim search after the clock hand passed every
    /// buffer pinned and [`crate::ALL_PINNED_RECHECKS`] scans of every buffer found them pinned
    /// too; the pool never waits for a pin to go away.
    NoUnpinnedBuffers,
    /// A read of a block at or past the end of its fork.
    BeyondEof {
        /// The page asked for.
        tag: BufferTag,
        /// The fork's size in blocks.
        nblocks: u32,
    },
    /// The storage manager failed (the message names the file).
    Io(SmgrError),
    /// The WAL-before-data hook failed to flush WAL up to a page's LSN; the page was not
    /// written and stays dirty.
    WalFlush {
        /// The LSN that had to be flushed.
        lsn: u64,
        /// The hook's message.
        message: String,
    },
    /// A cleanup lock was requested by a backend holding the buffer pinned other than exactly
    /// once (PostgreSQL: "incorrect local pin count").
    IncorrectLocalPinCount {
        /// The buffer.
        buffer: Buffer,
        /// This backend's pin count.
        count: u32,
    },
    /// Another backend already waits for this buffer's pin count to drop (PostgreSQL:
    /// "multiple backends attempting to wait for pincount 1"; one waiter per buffer).
    MultiplePinWaiters {
        /// The buffer.
        buffer: Buffer,
    },
    /// A bad [`BufferPoolConfig`].
    Config(String),
    /// A page read from storage failed verification ([`crate::page::verify`], then the
    /// pool's page verifier, see [`BufferPool::set_page_verifier`]): PostgreSQL's `ERROR:
    /// invalid page in block 5 of relation base/16384/16385` from `ReadBuffer`. The buffer is
    /// left invalid, so the next read tries the file again.
    InvalidPage {
        /// The page.
        tag: BufferTag,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for BufferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufferError::NoUnpinnedBuffers => f.write_str("no unpinned buffers available"),
            BufferError::BeyondEof { tag, nblocks } => {
                write!(f, "could not read {tag}: beyond the end of the fork ({nblocks} blocks)")
            }
            BufferError::Io(e) => write!(f, "{e}"),
            BufferError::WalFlush { lsn, message } => {
                write!(f, "could not flush WAL up to {lsn:#X} before writing a page: {message}")
            }
            BufferError::IncorrectLocalPinCount { buffer, count } => {
                write!(f, "incorrect local pin count: {count} on buffer {}", buffer.id())
            }
            BufferError::MultiplePinWaiters { buffer } => {
                write!(f, "multiple backends attempting to wait for pincount 1 on buffer {}", buffer.id())
            }
            BufferError::Config(m) => f.write_str(m),
            BufferError::InvalidPage { tag, reason } => {
                write!(f, "invalid page in block {} of relation base/{}", tag.block, tag.rel)?;
                if tag.fork != ForkNumber::Main {
                    write!(f, "_{}", tag.fork.name())?;
                }
                write!(f, ": {reason}")
            }
        }
    }
}

impl std::error::Error for BufferError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BufferError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<SmgrError> for BufferError {
    fn from(e: SmgrError) -> Self {
        BufferError::Io(e)
    }
}

/// The "flush WAL up to this LSN" callback the pool calls before writing a dirty page whose LSN
/// is beyond what it has already had flushed (`XLogFlush` in `FlushBuffer`).
pub type WalFlushHook = Arc<dyn Fn(u64) -> Result<(), HookError> + Send + Sync>;

/// What a [`WalFlushHook`] or a [`PageVerifier`] returns on failure: the caller's own error
/// (the engine's WAL or table error), kept as its message in [`BufferError`].
pub type HookError = Box<dyn std::error::Error + Send + Sync>;

/// A pool's shape and the variant of each mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPoolConfig {
    /// Number of buffers (`shared_buffers` / 8 KiB), 1..=[`MAX_BUFFERS`].
    pub nbuffers: usize,
    /// Header locking: spinlock (9.2) or atomic state word (9.6).
    pub header: HeaderKind,
    /// Mapping table: partitions (16 or 128) or dashmap.
    pub mapping: MappingKind,
    /// Victim selection: free-list lock (9.2) or atomic clock hand (9.5).
    pub victim: VictimKind,
    /// LWLock implementation of the mapping partitions, content locks, I/O locks and the 9.2
    /// free-list lock.
    pub lwlock_kind: LwLockKind,
    /// The descriptor array's layout: packed (9.4) or padded to whole cache lines (9.5+).
    pub desc_padding: DescPadding,
}

/// The buffer manager's knobs (`lockstack_common::knob`), over [`BufferPoolConfig`]; the
/// defaults are [`BufferPoolConfig::default`]'s.
pub const KNOBS: &[lockstack_common::Knob<BufferPoolConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{in_range, parsed};
    &[
        Knob {
            key: "bufmgr.nbuffers",
            values: "16..=2097152",
            doc: "shared_buffers, in 8 KiB pages",
            default: "1024",
            apply: |c, v| {
                c.nbuffers = in_range(v, 16usize, MAX_BUFFERS)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.header",
            values: "spinlock|atomic|atomic-sub|atomic-add",
            doc: "buffer header: spinlock (9.2), atomic state word (9.6), fetch_sub unpin (19), fetch_add pins too",
            default: "atomic",
            apply: |c, v| {
                c.header = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.mapping",
            values: "partitions-N|dashmap",
            doc: "buffer mapping table: N partitions (16 in 9.2, 128 in 9.5) or dashmap",
            default: "partitions-128",
            apply: |c, v| {
                c.mapping = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.desc_padding",
            values: "none|line",
            doc: "buffer descriptor array: packed (9.4, neighbours share cache lines) or each descriptor padded to whole 64-byte lines (9.5's BufferDescPadded)",
            default: "line",
            apply: |c, v| {
                c.desc_padding = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.victim",
            values: "freelist-lock|atomic-clock",
            doc: "victim search: BufFreelistLock (9.2) or atomic clock hand (9.5)",
            default: "atomic-clock",
            apply: |c, v| {
                c.victim = parsed(v)?;
                Some(())
            },
        },
    ]
};

impl Default for BufferPoolConfig {
    /// 1024 buffers (8 MiB), PostgreSQL 9.6+ mechanisms.
    fn default() -> Self {
        BufferPoolConfig::pg96(1024)
    }
}

impl BufferPoolConfig {
    /// PostgreSQL 9.2's mechanisms: header spinlock, 16 partitions, `BufFreelistLock`, 9.2
    /// LWLocks.
    pub fn pg92(nbuffers: usize) -> BufferPoolConfig {
        BufferPoolConfig {
            nbuffers,
            header: HeaderKind::Spinlock,
            mapping: MappingKind::PARTITIONS_16,
            victim: VictimKind::FreelistLock,
            lwlock_kind: LwLockKind::Pg92,
            desc_padding: DescPadding::Line,
        }
    }

    /// PostgreSQL 9.6+'s mechanisms: atomic state word, 128 partitions, atomic clock hand,
    /// atomic LWLocks.
    pub fn pg96(nbuffers: usize) -> BufferPoolConfig {
        BufferPoolConfig {
            nbuffers,
            header: HeaderKind::Atomic,
            mapping: MappingKind::PARTITIONS_128,
            victim: VictimKind::AtomicClock,
            lwlock_kind: LwLockKind::Atomic,
            desc_padding: DescPadding::Line,
        }
    }

    /// Checks ranges.
    ///
    /// # Errors
    /// [`BufferError::Config`] naming the bad setting.
    pub fn validate(&self) -> Result<(), BufferError> {
        if self.nbuffers == 0 || self.nbuffers > MAX_BUFFERS {
            return Err(BufferError::Config(format!(
                "nbuffers must be 1..={MAX_BUFFERS}, got {}",
                self.nbuffers
            )));
        }
        self.mapping.validate()
    }
}

/// A pinned shared buffer, as PostgreSQL's `Buffer`: a plain copyable number that stays
/// meaningful while the backend that got it keeps its pin. Release it with
/// [`BackendBuffers::release`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(u32);

impl Buffer {
    /// The buffer's index in the pool, from 0 (`buf_id`; PostgreSQL's `Buffer` is this + 1).
    pub fn id(self) -> u32 {
        self.0
    }
}

// Page bytes (in `PageArena`) are accessed only (a) under the buffer's content lock (shared for
// `&[u8]`, exclusive for `&mut [u8]`, see `ContentGuard`), (b) by the one backend doing a read into
// a not-yet-valid buffer under `BM_IO_IN_PROGRESS` (nobody else touches a page before `BM_VALID`),
// or (c) with atomic byte operations by the visibility-map functions (see `vm.rs`).

/// The shared buffer pool: descriptors, pages, mapping table, victim strategy, storage manager
/// and the per-backend statistics registry. Create it with [`BufferPool::new`] and give every
/// backend (thread) its own [`BackendBuffers`] from [`BufferPool::attach`].
pub struct BufferPool {
    cfg: BufferPoolConfig,
    descs: DescArray,
    pages: PageArena,
    table: BufTable,
    strategy: Strategy,
    smgr: Arc<dyn Smgr>,
    wal_flush: RwLock<Option<WalFlushHook>>,
    page_verifier: RwLock<Option<PageVerifier>>,
    flushed_lsn: AtomicU64,
    extension_locks: Box<[CachePadded<Mutex<()>>]>,
    stats: StatsRegistry<BackendCounters>,
    /// Ids of the live handles made by [`BufferPool::attach`].
    attached: Mutex<HashSet<u32>>,
    /// Handles made by [`BufferPool::attach_auxiliary`] so far.
    next_auxiliary: AtomicU32,
}

impl fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPool").field("config", &self.cfg).field("smgr", &self.smgr).finish()
    }
}

impl BufferPool {
    /// A pool of `cfg.nbuffers` empty buffers over `smgr` (all on the free list).
    ///
    /// # Errors
    /// [`BufferError::Config`] for a bad configuration.
    pub fn new(cfg: BufferPoolConfig, smgr: Arc<dyn Smgr>) -> Result<Arc<BufferPool>, BufferError> {
        cfg.validate()?;
        let n = cfg.nbuffers;
        let descs = DescArray::new(n, cfg.desc_padding, |i| BufferDesc::new(i as u32, cfg.lwlock_kind));
        let pages = PageArena::new(n)
            .map_err(|e| BufferError::Config(format!("cannot map {n} buffers of {BLCKSZ} bytes: {e}")))?;
        let strategy = Strategy::new(cfg.victim, n as u32, cfg.lwlock_kind);
        for i in 0..n {
            strategy.free_buffer(&descs, i as u32);
        }
        let pool = Arc::new(BufferPool {
            table: BufTable::new(cfg.mapping, n, cfg.lwlock_kind),
            cfg,
            descs,
            pages,
            strategy,
            smgr,
            wal_flush: RwLock::new(None),
            page_verifier: RwLock::new(None),
            flushed_lsn: AtomicU64::new(0),
            extension_locks: (0..EXTENSION_LOCKS).map(|_| CachePadded::new(Mutex::new(()))).collect(),
            stats: StatsRegistry::new(),
            attached: Mutex::new(HashSet::new()),
            next_auxiliary: AtomicU32::new(0),
        });
        pool.name_lines();
        Ok(pool)
    }

    /// Names the hot lines for a simulation's statistics (see `hook::name_line`): each
    /// descriptor's first line (state word, header lock, tag, content lock: `"buffer 17
    /// state"`) and I/O lock (`"BufferIO 17"`), the mapping partitions' locks and the
    /// strategy's shared words; the pages as one range, each line by its buffer and offset
    /// (`"buffer 17 page +0"`).
    fn name_lines(&self) {
        for (i, d) in self.descs.iter().enumerate() {
            d.io_lock.name_line();
            hook::name_line(d.state_addr(), || format!("buffer {i} state"));
        }
        self.table.name_lines();
        self.strategy.name_lines();
        // The pages, lazily: `buffer 17 page +0` is page 17's header line (pd_lsn, pd_lower, ...).
        if !self.descs.is_empty() {
            let first = self.pages.page(0).get() as *const u8;
            hook::name_range(first, self.descs.len() * BLCKSZ, |off| {
                format!("buffer {} page +{}", off / BLCKSZ, off % BLCKSZ)
            });
        }
    }

    /// A pool over a fresh [`MemorySmgr`].
    ///
    /// # Errors
    /// [`BufferError::Config`] for a bad configuration.
    pub fn in_memory(cfg: BufferPoolConfig) -> Result<Arc<BufferPool>, BufferError> {
        BufferPool::new(cfg, Arc::new(MemorySmgr::new()))
    }

    /// The distance between two buffer descriptors in their array, bytes
    /// ([`BufferPoolConfig::desc_padding`]).
    pub fn desc_stride(&self) -> usize {
        self.descs.stride()
    }

    /// The configuration.
    pub fn config(&self) -> &BufferPoolConfig {
        &self.cfg
    }

    /// Number of buffers.
    pub fn nbuffers(&self) -> usize {
        self.descs.len()
    }

    /// The storage manager.
    pub fn smgr(&self) -> &Arc<dyn Smgr> {
        &self.smgr
    }

    /// Size of a relation fork in blocks (`RelationGetNumberOfBlocksInFork`).
    ///
    /// # Errors
    /// Storage manager errors.
    pub fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, BufferError> {
        Ok(self.smgr.nblocks(rel, fork)?)
    }

    /// Installs (or replaces) the WAL-before-data hook. Without one, dirty pages are written
    /// without flushing anything first.
    pub fn set_wal_flush_hook(&self, hook: WalFlushHook) {
        *self.wal_flush.write() = Some(hook);
    }

    /// Installs (or replaces) a check run on every page read from storage after
    /// [`crate::page::verify`]; a page it rejects fails the read with
    /// [`BufferError::InvalidPage`]. It is called for new (all-zero) pages too, which
    /// [`crate::page::verify`] accepts: whether a relation may hold one is the verifier's call
    /// (a heap may, as PostgreSQL treats a new page as empty; a B-tree may not, as
    /// `_bt_checkpage` reports "index contains unexpected zero page").
    pub fn set_page_verifier(&self, verifier: PageVerifier) {
        *self.page_verifier.write() = Some(verifier);
    }

    /// `PageIsVerified` on a page just read: [`crate::page::verify`], then the verifier.
    fn verify_read(&self, tag: BufferTag, p: &[u8]) -> Result<(), BufferError> {
        let r = crate::page::verify(p).map_err(|e| e.to_string()).and_then(|()| {
            match &*self.page_verifier.read() {
                Some(v) => v(tag, p).map_err(|e| e.to_string()),
                None => Ok(()),
            }
        });
        r.map_err(|reason| BufferError::InvalidPage { tag, reason })
    }

    /// Tells the pool that WAL is durable up to `lsn`, so pages with older LSNs are written
    /// without calling the hook.
    pub fn note_wal_flushed(&self, lsn: u64) {
        self.flushed_lsn.fetch_max(lsn, Ordering::AcqRel);
    }

    /// Attaches backend `id`: a handle with its private refcounts and counters, whose id names
    /// it as a cleanup-lock waiter (`wait_backend_pgprocno`, 17). One per thread; it is `Send`
    /// but not `Sync`. Dropping it releases its pins and frees `id`.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below [`AUXILIARY_BACKEND_BASE`],
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<BackendBuffers, AttachError> {
        if id.0 >= AUXILIARY_BACKEND_BASE {
            return Err(AttachError::OutOfRange { id, max_backends: AUXILIARY_BACKEND_BASE as usize });
        }
        let class =
            lockstack_common::sync::hook::wait_class(lockstack_common::sync::hook::BACKEND_REGISTRY_CLASS);
        let inserted = self.attached.lock().insert(id.0);
        drop(class);
        if !inserted {
            return Err(AttachError::AlreadyAttached { id, subsystem: "buffer pool" });
        }
        Ok(self.handle(id.0))
    }

    /// A handle for an auxiliary process (PostgreSQL's checkpointer, startup process, or a
    /// loader thread): like [`attach`](Self::attach), numbered from [`AUXILIARY_BACKEND_BASE`]
    /// in creation order instead of by a backend id (the numbers repeat after `2^31 - 1`
    /// handles). Never fails.
    pub fn attach_auxiliary(self: &Arc<Self>) -> BackendBuffers {
        let n = self.next_auxiliary.fetch_add(1, Ordering::Relaxed) % (u32::MAX - AUXILIARY_BACKEND_BASE);
        self.handle(AUXILIARY_BACKEND_BASE + n)
    }

    fn handle(self: &Arc<Self>, id: u32) -> BackendBuffers {
        BackendBuffers {
            pool: Arc::clone(self),
            id,
            refs: PrivateRefCount::default(),
            locked: HeldLocks::default(),
            counters: self.stats.register(),
            _not_sync: PhantomData,
        }
    }

    /// Descriptor `buf_id` (for diagnostics: state and tag snapshots).
    ///
    /// # Panics
    /// If `buf_id` is not below [`nbuffers`](Self::nbuffers).
    pub fn descriptor(&self, buf_id: u32) -> &BufferDesc {
        &self.descs[buf_id as usize]
    }

    /// Counters summed over every backend that ever used this pool.
    pub fn stats(&self) -> BufferStats {
        let mut s = BufferStats::default();
        self.stats.for_each(|b| s.add(&b.snapshot()));
        s
    }

    /// Zeroes every backend's counters; call it only while no backend is working.
    pub fn reset_stats(&self) {
        self.stats.for_each(|b| b.reset());
    }

    /// Victim requests so far (`numBufferAllocs`) and full passes of the clock hand
    /// (`completePasses`).
    pub fn strategy_counts(&self) -> (u64, u32) {
        (self.strategy.allocs(), self.strategy.complete_passes())
    }

    /// Writes every dirty valid buffer (a checkpoint's `BufferSync`) and fsyncs the forks
    /// written; returns the number of pages written.
    ///
    /// # Errors
    /// The first storage or WAL-hook error; buffers not yet written stay dirty.
    pub fn flush_all(self: &Arc<Self>) -> Result<usize, BufferError> {
        let bb = self.attach_auxiliary();
        let kind = self.cfg.header;
        let mut written = 0;
        let mut forks = Vec::new();
        for (i, d) in self.descs.iter().enumerate() {
            let (s, _) = d.lock_header(kind);
            if s & (BM_VALID | BM_DIRTY) != (BM_VALID | BM_DIRTY) {
                d.unlock_header(kind, s, s);
                continue;
            }
            // `PinBuffer_Locked`: pin while the header is held, so the buffer cannot be
            // re-tagged between the check and the pin.
            d.unlock_header(kind, s, s + 1);
            bb.refs.incr(i as u32);
            let tag = d.raw_tag();
            let held = d.content_lock.acquire(LwLockMode::Shared);
            let r = bb.flush_locked(i as u32);
            d.content_lock.release(held);
            bb.unpin(i as u32);
            if r? {
                written += 1;
                if !forks.contains(&(tag.rel, tag.fork)) {
                    forks.push((tag.rel, tag.fork));
                }
            }
        }
        for (rel, fork) in forks {
            self.smgr.sync(rel, fork)?;
        }
        Ok(written)
    }

    /// Checks the pool's invariants; meant for quiescent points (no backend working, none
    /// holding pins). Reports every violation found:
    /// every refcount is 0; no header is locked, in I/O or waited on; usage counts are at most
    /// 5; no content or I/O lock is held; the mapping table and the tags agree both ways (each
    /// entry points at a buffer with that tag and `BM_TAG_VALID`, each tagged buffer has exactly
    /// one entry); the free list has no duplicates.
    ///
    /// # Errors
    /// An [`InvariantViolation`] listing the violations, one per line.
    pub fn check_invariants(&self) -> Result<(), InvariantViolation> {
        let mut errs = Vec::new();
        let mut tagged = 0usize;
        for d in self.descs.iter() {
            let w = d.load_state();
            let s = crate::desc::BufferState::from_word(w);
            let id = d.buf_id();
            if s.refcount != 0 {
                errs.push(format!("buffer {id}: refcount {} (expected 0)", s.refcount));
            }
            if w & (BM_LOCKED | BM_IO_IN_PROGRESS | BM_PIN_COUNT_WAITER) != 0 {
                errs.push(format!("buffer {id}: header locked, I/O in progress or pin waiter left: {s:?}"));
            }
            if s.usage_count > BM_MAX_USAGE_COUNT {
                errs.push(format!("buffer {id}: usage count {}", s.usage_count));
            }
            if d.content_lock.is_locked() || d.io_lock.is_locked() {
                errs.push(format!("buffer {id}: content or I/O lock still held"));
            }
            if s.valid && !s.tag_valid {
                errs.push(format!("buffer {id}: valid without a tag"));
            }
            if s.tag_valid {
                tagged += 1;
            }
        }
        let entries = self.table.entries();
        let mut seen = vec![false; self.descs.len()];
        for (tag, id) in &entries {
            let d = &self.descs[*id as usize];
            if seen[*id as usize] {
                errs.push(format!("buffer {id} mapped twice"));
            }
            seen[*id as usize] = true;
            if d.load_state() & BM_TAG_VALID == 0 || d.raw_tag() != *tag {
                errs.push(format!("mapping {tag} -> buffer {id}, whose tag is {:?}", d.tag()));
            }
        }
        if entries.len() != tagged {
            errs.push(format!("{} mapping entries but {tagged} buffers with valid tags", entries.len()));
        }
        let free = self.strategy.free_list(&self.descs);
        let mut fseen = vec![false; self.descs.len()];
        for id in free {
            if std::mem::replace(&mut fseen[id as usize], true) {
                errs.push(format!("buffer {id} twice on the free list"));
                break;
            }
        }
        if errs.is_empty() { Ok(()) } else { Err(InvariantViolation(errs.join("\n"))) }
    }

    /// Flushes WAL up to `lsn` through the hook if that is beyond what was flushed.
    fn wal_before_data(&self, lsn: u64, counters: &BackendCounters) -> Result<(), BufferError> {
        if lsn <= self.flushed_lsn.load(Ordering::Acquire) {
            return Ok(());
        }
        let hook = self.wal_flush.read().clone();
        if let Some(h) = hook {
            counters.wal_flushes.incr();
            h(lsn).map_err(|e| BufferError::WalFlush { lsn, message: e.to_string() })?;
        }
        self.flushed_lsn.fetch_max(lsn, Ordering::AcqRel);
        Ok(())
    }

    /// If the page memory got transparent huge pages (`madvise(MADV_HUGEPAGE)` accepted; Linux
    /// only), as PostgreSQL's `huge_pages = try` would. The pool works either way; huge pages
    /// only save TLB misses on page accesses.
    pub fn huge_pages(&self) -> bool {
        self.pages.huge_pages()
    }

    /// Raw pointer to page `id`'s first byte (for the visibility map's atomic byte accesses).
    #[inline]
    pub(crate) fn page_ptr(&self, id: u32) -> *mut u8 {
        self.pages.page(id).get().cast::<u8>()
    }

    /// Page `id` as a slice.
    ///
    /// # Safety
    /// The caller holds the buffer's content lock (either mode), or otherwise knows that no
    /// backend writes the page for the lifetime of the slice.
    #[inline]
    unsafe fn page(&self, id: u32) -> &[u8] {
        // SAFETY: per this function's contract there is no concurrent writer.
        unsafe { &*self.pages.page(id).get() }
    }

    /// Page `id` as a mutable slice.
    ///
    /// # Safety
    /// The caller has exclusive access to the page's bytes for the slice's lifetime: it holds
    /// the content lock exclusively, or it is the backend reading the page in (`BM_IO_IN_PROGRESS`
    /// set by it, `BM_VALID` clear).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    unsafe fn page_mut(&self, id: u32) -> &mut [u8] {
        // SAFETY: per this function's contract nobody else reads or writes the page.
        unsafe { &mut *self.pages.page(id).get() }
    }
}

/// Prefetches the cache lines of bytes `start..end` from `base`. Kept out of line so that a
/// whole-page prefetch stays a short loop instead of being unrolled into a kilobyte of
/// prefetch instructions at every call site (the hot path's code must fit the L1i cache).
#[inline(never)]
fn prefetch_lines(base: *const u8, start: usize, end: usize) {
    const LINE: usize = 64;
    let mut off = start & !(LINE - 1);
    while off + 4 * LINE <= end {
        prefetch_line(base.wrapping_add(off));
        prefetch_line(base.wrapping_add(off + LINE));
        prefetch_line(base.wrapping_add(off + 2 * LINE));
        prefetch_line(base.wrapping_add(off + 3 * LINE));
        off += 4 * LINE;
    }
    while off < end {
        prefetch_line(base.wrapping_add(off));
        off += LINE;
    }
}

/// Hints the CPU to bring the cache line at `p` into its caches.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache hierarchy: it never faults, whatever the
    // address, and has no effect the program can observe, so it cannot race with writers of
    // the line. SSE (which provides it) is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// How a read fills a buffer that does not hold the page yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum ReadMode {
    /// Read it from the storage manager (`RBM_NORMAL`).
    Normal,
    /// Zero it: the block was just added by an extension (`RBM_ZERO`).
    Zero,
}

/// One backend's view of the pool: its private refcounts, the content locks it holds and its
/// counters (PostgreSQL keeps these in backend-local memory: `PrivateRefCountArray`,
/// `held_lwlocks`, `pgBufferUsage`). Every buffer operation goes through it.
///
/// It is `Send` (a backend may move to another thread between operations) but not `Sync`.
/// Dropping it releases every pin it still holds.
pub struct BackendBuffers {
    pool: Arc<BufferPool>,
    id: u32,
    refs: PrivateRefCount,
    locked: HeldLocks,
    counters: lockstack_common::StatsBlock<BackendCounters>,
    _not_sync: PhantomData<Cell<()>>,
}

impl fmt::Debug for BackendBuffers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendBuffers").field("id", &self.id).field("pins", &self.refs.all()).finish()
    }
}

impl Drop for BackendBuffers {
    fn drop(&mut self) {
        self.release_all();
        if self.id < AUXILIARY_BACKEND_BASE {
            let _class = lockstack_common::sync::hook::wait_class(
                lockstack_common::sync::hook::BACKEND_REGISTRY_CLASS,
            );
            self.pool.attached.lock().remove(&self.id);
        }
    }
}

impl BackendBuffers {
    /// The pool.
    pub fn pool(&self) -> &Arc<BufferPool> {
        &self.pool
    }

    /// This handle's number: the backend id given to [`BufferPool::attach`], or
    /// [`AUXILIARY_BACKEND_BASE`] and up for an auxiliary handle (unique among live handles
    /// within the pool; it names the cleanup-lock waiter).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// This backend's counters.
    pub fn stats(&self) -> BufferStats {
        self.counters.snapshot()
    }

    #[inline]
    fn kind(&self) -> HeaderKind {
        self.pool.cfg.header
    }

    #[inline]
    fn count_cost(&self, cost: HeaderCost, is_vm: impl FnOnce() -> bool) {
        if cost.contended {
            self.counters.pin_waits.incr();
            if is_vm() {
                self.counters.vm_pin_waits.incr();
            }
        }
        if cost.delays > 0 {
            self.counters.pin_spin_delays.add(u64::from(cost.delays));
        }
    }

    /// Pins buffer `id` (`PinBuffer`): only the first pin by this backend touches the header.
    #[inline]
    fn pin(&self, id: u32, is_vm: bool) {
        let _cost = lockstack_common::sync::hook::pg_region("bufmgr.pin");
        if self.refs.incr(id) == 1 {
            let (_, cost) = self.pool.descs[id as usize].pin(self.kind());
            self.count_cost(cost, || is_vm);
        }
    }

    /// Drops one pin of `id` (`UnpinBuffer`): only the last one touches the header.
    ///
    /// # Panics
    /// If this backend does not pin `id`, or still holds its content lock at the last unpin.
    #[inline]
    fn unpin(&self, id: u32) {
        let _cost = lockstack_common::sync::hook::pg_region("bufmgr.unpin");
        if self.refs.decr(id) == 0 {
            assert!(
                !self.locked.contains(id),
                "buffer {id} released while this backend holds its content lock"
            );
            let d = &self.pool.descs[id as usize];
            let cost = d.unpin(self.kind());
            // The tag is read only when counting a contended unpin; it may have changed by then
            // (we no longer pin), which at worst misfiles one count.
            self.count_cost(cost, || d.raw_tag().fork == ForkNumber::VisibilityMap);
        }
    }

    #[inline]
    fn check_pinned(&self, buf: Buffer) -> u32 {
        let c = self.refs.get(buf.0);
        assert!(c > 0, "buffer {} is not pinned by this backend", buf.0);
        c
    }

    /// Reads a page into the pool if needed and returns it pinned (`ReadBuffer` /
    /// `ReadBufferExtended` with `RBM_NORMAL`). The page is not locked: take a content lock with
    /// [`lock`](Self::lock) before looking at it.
    ///
    /// # Errors
    /// [`BufferError::BeyondEof`] for a block the fork does not have;
    /// [`BufferError::NoUnpinnedBuffers`] when a victim is needed and every buffer is pinned;
    /// [`BufferError::Io`] / [`BufferError::WalFlush`] from reading the page or writing a dirty
    /// victim.
    pub fn read_buffer(&self, tag: BufferTag) -> Result<Buffer, BufferError> {
        self.read_impl(tag, ReadMode::Normal)
    }

    /// [`read_buffer`](Self::read_buffer) of a main-fork block.
    ///
    /// # Errors
    /// As [`read_buffer`](Self::read_buffer).
    #[inline]
    pub fn read_block(&self, rel: Oid, block: BlockNumber) -> Result<Buffer, BufferError> {
        self.read_impl(BufferTag::new(rel, ForkNumber::Main, block), ReadMode::Normal)
    }

    /// Releases `buf` and returns a pin on `tag`, skipping the look-up when `buf` already holds
    /// that page (`ReleaseAndReadBuffer`): a scan that stays on the same page touches no shared
    /// state.
    ///
    /// # Errors
    /// As [`read_buffer`](Self::read_buffer) (`buf` is released in every case).
    ///
    /// # Panics
    /// If `buf` is not pinned by this backend.
    pub fn release_and_read(&self, buf: Buffer, tag: BufferTag) -> Result<Buffer, BufferError> {
        self.check_pinned(buf);
        if self.pool.descs[buf.0 as usize].raw_tag() == tag {
            return Ok(buf);
        }
        self.unpin(buf.0);
        self.read_buffer(tag)
    }

    /// Pins `recent` if it still holds `tag` and is valid, without a mapping look-up
    /// (`ReadRecentBuffer`, PostgreSQL 14): for callers that remember where a hot page was (a
    /// B-tree root, the VM page). The tag is checked after pinning, when it can no longer
    /// change. Returns `None` (and holds no pin) if the buffer now holds another page; then use
    /// [`read_buffer`](Self::read_buffer).
    pub fn read_recent(&self, tag: BufferTag, recent: Buffer) -> Option<Buffer> {
        let d = self.pool.descs.get(recent.0 as usize)?;
        let is_vm = tag.fork == ForkNumber::VisibilityMap;
        self.pin(recent.0, is_vm);
        if d.load_state() & BM_VALID != 0 && d.raw_tag() == tag {
            self.counters.hits.incr();
            Some(recent)
        } else {
            self.unpin(recent.0);
            None
        }
    }

    /// Adds one more pin to a buffer this backend already pins (`IncrBufferRefCount`); touches
    /// no shared state. Each pin needs its own [`release`](Self::release).
    ///
    /// # Panics
    /// If `buf` is not pinned by this backend.
    pub fn incr_ref(&self, buf: Buffer) {
        self.check_pinned(buf);
        self.refs.incr(buf.0);
    }

    /// Drops one pin (`ReleaseBuffer`).
    ///
    /// # Panics
    /// If `buf` is not pinned by this backend, or this is its last pin and the backend still
    /// holds the buffer's content lock (drop the [`ContentGuard`] first).
    #[inline]
    pub fn release(&self, buf: Buffer) {
        self.unpin(buf.0);
    }

    /// Starts loading bytes `range` of `buf`'s page into the CPU caches, without waiting
    /// (a prefetch hint, as PostgreSQL's `pg_prefetch_mem`): for a caller about to search the
    /// page, so that the cache misses of the search overlap instead of following one another.
    /// Reads nothing and changes nothing, so it needs neither the content lock nor the pin;
    /// a range beyond the page is cut at its end.
    ///
    /// # Panics
    /// If `buf` is not a buffer of this pool.
    #[inline]
    pub fn prefetch(&self, buf: Buffer, range: std::ops::Range<usize>) {
        prefetch_lines(self.pool.page_ptr(buf.0), range.start, range.end.min(BLCKSZ));
    }

    /// This backend's pin count of `buf` (0 if not pinned).
    pub fn pin_count(&self, buf: Buffer) -> u32 {
        self.refs.get(buf.0)
    }

    /// Number of distinct buffers this backend pins.
    pub fn pinned_buffers(&self) -> usize {
        self.refs.all().len()
    }

    /// Drops every pin this backend holds (end of transaction, `AtEOXact_Buffers`).
    ///
    /// # Panics
    /// If a content lock is still held (a live [`ContentGuard`] borrows the handle, so this
    /// can only happen through `std::mem::forget`).
    pub fn release_all(&self) {
        // The array slots first, without collecting them: unpinning an array entry only ever
        // empties its own slot. At a transaction end there is usually nothing left.
        for i in 0..crate::private_ref::REFCOUNT_ARRAY_ENTRIES {
            if let Some((id, count)) = self.refs.array_entry(i) {
                for _ in 0..count {
                    self.unpin(id);
                }
            }
        }
        for (id, count) in self.refs.overflow_entries() {
            for _ in 0..count {
                self.unpin(id);
            }
        }
    }

    /// The page `buf` holds (`BufferGetTag`).
    ///
    /// # Panics
    /// If `buf` is not pinned by this backend.
    pub fn tag(&self, buf: Buffer) -> BufferTag {
        self.check_pinned(buf);
        self.pool.descs[buf.0 as usize].raw_tag()
    }

    /// Adds a zeroed block at the end of a relation fork and returns it pinned with its number
    /// (`ReadBuffer(P_NEW)` / `ExtendBufferedRel`). Extensions of one fork are serialised by a
    /// relation extension lock (a waiter publishes `Lock:extend`). Lock the buffer exclusively
    /// and [`page::init`] it before use.
    ///
    /// # Errors
    /// Storage manager errors, and the errors of [`read_buffer`](Self::read_buffer).
    pub fn extend(&self, rel: Oid, fork: ForkNumber) -> Result<(Buffer, BlockNumber), BufferError> {
        let slot = BufferTag::new(rel, fork, BlockNumber(0)).hash_code() as usize % EXTENSION_LOCKS;
        let lock = &self.pool.extension_locks[slot];
        let _g = match lock.try_lock() {
            Some(g) => g,
            None => {
                let _w = WaitEventScope::new(WaitEvent::lock(1));
                lock.lock()
            }
        };
        let n = self.pool.smgr.nblocks(rel, fork)?;
        self.pool.smgr.extend(rel, fork, BlockNumber(n), &ZERO_PAGE)?;
        let buf = self.read_impl(BufferTag::new(rel, fork, BlockNumber(n)), ReadMode::Zero)?;
        Ok((buf, BlockNumber(n)))
    }

    fn read_impl(&self, tag: BufferTag, mode: ReadMode) -> Result<Buffer, BufferError> {
        let pool = &*self.pool;
        let h = HashedTag::new(tag);
        let is_vm = tag.fork == ForkNumber::VisibilityMap;
        loop {
            let id = match pool.table.lookup_pin(&h, |id| {
                self.pin(id, is_vm);
                id
            }) {
                Some(id) => id,
                None => {
                    if mode == ReadMode::Normal {
                        let n = pool.smgr.nblocks(tag.rel, tag.fork)?;
                        if tag.block.0 >= n {
                            return Err(BufferError::BeyondEof { tag, nblocks: n });
                        }
                    }
                    self.buffer_alloc(&h, is_vm)?
                }
            };
            let d = &pool.descs[id as usize];
            if pool.table.validates() && d.raw_tag() != tag {
                // dashmap: the entry was being re-pointed when we pinned; look again.
                self.unpin(id);
                continue;
            }
            if d.load_state() & BM_VALID != 0 {
                self.counters.hits.incr();
                return Ok(Buffer(id));
            }
            let Some(held) = self.start_io(id, true) else {
                self.counters.hits.incr();
                return Ok(Buffer(id));
            };
            let r = match mode {
                ReadMode::Normal => {
                    // SAFETY: we set BM_IO_IN_PROGRESS on a buffer that is not BM_VALID; every
                    // other backend pinning it waits on the I/O lock before touching the page,
                    // and content locks are only taken on valid buffers.
                    let p = unsafe { pool.page_mut(id) };
                    hook::touch(p.as_ptr(), p.len(), Access::Write);
                    match pool.smgr.read(tag.rel, tag.fork, tag.block, p) {
                        Ok(()) => pool.verify_read(tag, p),
                        Err(e) => Err(BufferError::from(e)),
                    }
                }
                ReadMode::Zero => {
                    // SAFETY: as above.
                    unsafe { pool.page_mut(id) }.fill(0);
                    hook::touch(pool.page_ptr(id), BLCKSZ, Access::Write);
                    Ok(())
                }
            };
            match r {
                Ok(()) => {
                    self.terminate_io(id, held, false, BM_VALID);
                    match mode {
                        ReadMode::Normal => self.counters.reads.incr(),
                        ReadMode::Zero => self.counters.extends.incr(),
                    }
                    return Ok(Buffer(id));
                }
                Err(e) => {
                    self.terminate_io(id, held, false, BM_IO_ERROR);
                    self.unpin(id);
                    return Err(e);
                }
            }
        }
    }

    /// Finds a buffer for `h` that is not in the table (`BufferAlloc` after a miss): picks a
    /// victim, writes it if dirty, re-tags it under both mapping partitions. Returns a pinned
    /// buffer with tag `h` (not necessarily valid), which may be one another backend loaded
    /// meanwhile.
    fn buffer_alloc(&self, h: &HashedTag, is_vm: bool) -> Result<u32, BufferError> {
        let pool = &*self.pool;
        let kind = self.kind();
        loop {
            let (vid, state) = match pool.strategy.get_victim(&pool.descs, kind) {
                Victim::Pinned { id, state } => (id, state),
                Victim::AllPinned => return Err(BufferError::NoUnpinnedBuffers),
            };
            let c = self.refs.incr(vid);
            debug_assert_eq!(c, 1, "a victim had refcount 0, so we cannot have pinned it");
            let d = &pool.descs[vid as usize];
            if state & BM_DIRTY != 0 {
                // Conditional: waiting here can deadlock (two B-tree splits, see bufmgr.c).
                match d.content_lock.conditional_acquire(LwLockMode::Shared) {
                    Some(held) => {
                        let r = self.flush_locked(vid);
                        d.content_lock.release(held);
                        if let Err(e) = r {
                            self.unpin(vid);
                            return Err(e);
                        }
                    }
                    None => {
                        self.unpin(vid);
                        continue;
                    }
                }
            }
            let old = (state & BM_TAG_VALID != 0).then(|| HashedTag::new(d.raw_tag()));
            enum Outcome {
                Retagged,
                Existing(u32),
                Retry,
            }
            let outcome =
                pool.table.retag(old.as_ref(), h, |ctx| match ctx.insert(h, vid, |e| self.pin(e, is_vm)) {
                    Err(e) => Outcome::Existing(e),
                    Ok(()) => {
                        let (s, _) = d.lock_header(kind);
                        if s & BUF_REFCOUNT_MASK == 1 && s & BM_DIRTY == 0 {
                            d.set_tag(h.tag);
                            let keep = s & (BUF_REFCOUNT_MASK | BM_PIN_COUNT_WAITER);
                            d.unlock_header(kind, s, keep | BM_TAG_VALID | BUF_USAGECOUNT_ONE);
                            if let Some(o) = &old {
                                ctx.delete(o, vid);
                            }
                            Outcome::Retagged
                        } else {
                            // Pinned or dirtied by someone else meanwhile: give it up.
                            d.unlock_header(kind, s, s);
                            ctx.delete(h, vid);
                            Outcome::Retry
                        }
                    }
                });
            match outcome {
                Outcome::Retagged => {
                    if old.is_some() {
                        self.counters.evictions.incr();
                    }
                    return Ok(vid);
                }
                Outcome::Existing(e) => {
                    self.unpin(vid);
                    return Ok(e);
                }
                Outcome::Retry => self.unpin(vid),
            }
        }
    }

    /// `StartBufferIO`: returns the held I/O lock if this backend must do the I/O, `None` if it
    /// is already done (input: page valid; output: page clean).
    fn start_io(&self, id: u32, for_input: bool) -> Option<LwLockHeld> {
        let d = &self.pool.descs[id as usize];
        let kind = self.kind();
        let held = d.io_lock.acquire(LwLockMode::Exclusive);
        if held.waited() {
            self.counters.io_waits.incr();
        }
        // Whoever held the I/O lock before us finished (terminate_io clears
        // BM_IO_IN_PROGRESS before releasing it), so the flag is clear here.
        let (s, _) = d.lock_header(kind);
        debug_assert_eq!(s & BM_IO_IN_PROGRESS, 0);
        let done = if for_input { s & BM_VALID != 0 } else { s & BM_DIRTY == 0 };
        if done {
            d.unlock_header(kind, s, s);
            d.io_lock.release(held);
            return None;
        }
        let mut n = s | BM_IO_IN_PROGRESS;
        if !for_input {
            n &= !BM_JUST_DIRTIED;
        }
        d.unlock_header(kind, s, n);
        Some(held)
    }

    /// `TerminateBufferIO`: clears `BM_IO_IN_PROGRESS` (and `BM_DIRTY` after a write, unless
    /// re-dirtied meanwhile), sets `set_bits`, releases the I/O lock.
    fn terminate_io(&self, id: u32, held: LwLockHeld, clear_dirty: bool, set_bits: u32) {
        let d = &self.pool.descs[id as usize];
        let kind = self.kind();
        let (s, _) = d.lock_header(kind);
        let mut n = s & !(BM_IO_IN_PROGRESS | BM_IO_ERROR);
        if clear_dirty && s & BM_JUST_DIRTIED == 0 {
            n &= !BM_DIRTY;
        }
        d.unlock_header(kind, s, n | set_bits);
        d.io_lock.release(held);
    }

    /// `FlushBuffer`: writes buffer `id` if dirty, flushing WAL up to its LSN first. The caller
    /// pins it and holds its content lock (either mode). Returns true if a write happened.
    fn flush_locked(&self, id: u32) -> Result<bool, BufferError> {
        let Some(held) = self.start_io(id, false) else { return Ok(false) };
        let pool = &*self.pool;
        let tag = pool.descs[id as usize].raw_tag();
        // SAFETY: the caller holds the content lock, so nobody has the page mutably.
        let page = unsafe { pool.page(id) };
        hook::touch(page.as_ptr(), page.len(), Access::Read);
        let r = pool
            .wal_before_data(page::lsn(page), &self.counters)
            .and_then(|()| pool.smgr.write(tag.rel, tag.fork, tag.block, page).map_err(BufferError::from));
        match r {
            Ok(()) => {
                self.terminate_io(id, held, true, 0);
                self.counters.writes.incr();
                Ok(true)
            }
            Err(e) => {
                self.terminate_io(id, held, false, BM_IO_ERROR);
                Err(e)
            }
        }
    }

    #[inline]
    fn note_locked(&self, id: u32) {
        assert!(!self.locked.contains(id), "buffer {id} is already locked by this backend (self-deadlock)");
        self.locked.push(id);
    }

    /// Forgets content lock `id` taken by [`note_locked`](Self::note_locked).
    #[inline]
    fn note_unlocked(&self, id: u32) {
        self.locked.remove(id);
    }

    /// Takes `buf`'s content lock (`LockBuffer`) and returns a guard giving access to the page;
    /// dropping the guard unlocks (`LockBuffer(BUFFER_LOCK_UNLOCK)`).
    ///
    /// # Panics
    /// If `buf` is not pinned by this backend, or this backend already holds its content lock
    /// (that would wait for itself forever).
    #[inline]
    pub fn lock(&self, buf: Buffer, mode: LwLockMode) -> ContentGuard<'_> {
        self.check_pinned(buf);
        self.note_locked(buf.0);
        let held = self.pool.descs[buf.0 as usize].content_lock.acquire(mode);
        ContentGuard { bb: self, id: buf.0, held: Some(held) }
    }

    /// [`lock`](Self::lock) without waiting (`ConditionalLockBuffer`); `None` if the lock is
    /// busy.
    ///
    /// # Panics
    /// As [`lock`](Self::lock).
    pub fn conditional_lock(&self, buf: Buffer, mode: LwLockMode) -> Option<ContentGuard<'_>> {
        self.check_pinned(buf);
        self.note_locked(buf.0);
        match self.pool.descs[buf.0 as usize].content_lock.conditional_acquire(mode) {
            Some(held) => Some(ContentGuard { bb: self, id: buf.0, held: Some(held) }),
            None => {
                self.note_unlocked(buf.0);
                None
            }
        }
    }

    /// Takes a cleanup lock (`LockBufferForCleanup`): the content lock exclusively, at a moment
    /// when no other backend pins the buffer. While other pins exist it sets
    /// `BM_PIN_COUNT_WAITER`, releases the content lock and sleeps (publishing the
    /// `BufferPin:BufferPin` wait event) until the last other unpin wakes it, then retries.
    ///
    /// # Errors
    /// [`BufferError::IncorrectLocalPinCount`] unless this backend pins `buf` exactly once;
    /// [`BufferError::MultiplePinWaiters`] if another backend already waits on this buffer.
    ///
    /// # Panics
    /// As [`lock`](Self::lock).
    pub fn lock_for_cleanup(&self, buf: Buffer) -> Result<ContentGuard<'_>, BufferError> {
        let count = self.refs.get(buf.0);
        if count != 1 {
            return Err(BufferError::IncorrectLocalPinCount { buffer: buf, count });
        }
        let d = &self.pool.descs[buf.0 as usize];
        let kind = self.kind();
        loop {
            let g = self.lock(buf, LwLockMode::Exclusive);
            let (s, _) = d.lock_header(kind);
            if s & BUF_REFCOUNT_MASK == 1 {
                d.unlock_header(kind, s, s);
                return Ok(g);
            }
            if s & BM_PIN_COUNT_WAITER != 0 {
                d.unlock_header(kind, s, s);
                drop(g);
                return Err(BufferError::MultiplePinWaiters { buffer: buf });
            }
            d.wait_backend.store(self.id, Ordering::Relaxed);
            let after = d.unlock_header(kind, s, s | BM_PIN_COUNT_WAITER);
            drop(g);
            // With the atomic-sub/add headers the other pins may all have gone while we held
            // the header lock; their unpins did not see the flag, so nobody will wake us.
            if after & BUF_REFCOUNT_MASK > 1 {
                self.counters.cleanup_waits.incr();
                let _w = WaitEventScope::new(WaitEvent::BUFFER_PIN);
                d.pin_latch.wait();
            }
            // A wake-up does not prove the flag was cleared for us; clear it if it is still
            // ours, so the next round does not see itself as a second waiter.
            let (s, _) = d.lock_header(kind);
            if s & BM_PIN_COUNT_WAITER != 0 && d.wait_backend.load(Ordering::Relaxed) == self.id {
                d.unlock_header(kind, s, s & !BM_PIN_COUNT_WAITER);
            } else {
                d.unlock_header(kind, s, s);
            }
        }
    }

    /// [`lock_for_cleanup`](Self::lock_for_cleanup) without waiting
    /// (`ConditionalLockBufferForCleanup`, what opportunistic pruning uses): `None` if this
    /// backend does not pin `buf` exactly once, the content lock is busy, or another backend
    /// pins the buffer.
    ///
    /// # Panics
    /// As [`lock`](Self::lock).
    pub fn conditional_lock_for_cleanup(&self, buf: Buffer) -> Option<ContentGuard<'_>> {
        if self.refs.get(buf.0) != 1 {
            return None;
        }
        let g = self.conditional_lock(buf, LwLockMode::Exclusive)?;
        let d = &self.pool.descs[buf.0 as usize];
        let (s, _) = d.lock_header(self.kind());
        d.unlock_header(self.kind(), s, s);
        (s & BUF_REFCOUNT_MASK == 1).then_some(g)
    }

    /// Pins the visibility-map page at `tag` if present, for [`crate::vm`]; `Ok(None)` if the
    /// fork is shorter.
    pub(crate) fn read_if_exists(&self, tag: BufferTag) -> Result<Option<Buffer>, BufferError> {
        match self.read_impl(tag, ReadMode::Normal) {
            Ok(b) => Ok(Some(b)),
            Err(BufferError::BeyondEof { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    pub(crate) fn counters(&self) -> &BackendCounters {
        &self.counters
    }
}

/// A held content lock on a pinned buffer, with access to its page (`BufferGetPage` under
/// `LockBuffer`). Dropping it releases the lock; the pin stays.
///
/// Shared mode gives [`page`](Self::page); exclusive mode also gives
/// [`page_mut`](Self::page_mut) and [`mark_dirty`](Self::mark_dirty).
pub struct ContentGuard<'a> {
    bb: &'a BackendBuffers,
    id: u32,
    held: Option<LwLockHeld>,
}

impl fmt::Debug for ContentGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContentGuard").field("buffer", &self.id).field("mode", &self.mode()).finish()
    }
}

impl Drop for ContentGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(h) = self.held.take() {
            self.bb.note_unlocked(self.id);
            self.bb.pool.descs[self.id as usize].content_lock.release(h);
        }
    }
}

impl<'a> ContentGuard<'a> {
    /// The buffer.
    pub fn buffer(&self) -> Buffer {
        Buffer(self.id)
    }

    /// The page's identity.
    pub fn tag(&self) -> BufferTag {
        self.bb.pool.descs[self.id as usize].raw_tag()
    }

    /// The lock mode held.
    pub fn mode(&self) -> LwLockMode {
        self.held.as_ref().map(|h| h.mode()).unwrap_or(LwLockMode::Shared)
    }

    /// The page, [`BLCKSZ`] bytes (see [`crate::page`] for its layout).
    #[inline]
    pub fn page(&self) -> &[u8] {
        // SAFETY: this guard holds the content lock (shared or exclusive) until it is dropped,
        // and the slice borrows the guard, so no backend writes the page while it lives.
        unsafe { self.bb.pool.page(self.id) }
    }

    /// The page, writable.
    ///
    /// # Panics
    /// If the lock is held in shared mode. Do not use it on visibility-map pages (their bits are
    /// read with only a pin; change them through [`crate::vm`]).
    #[inline]
    pub fn page_mut(&mut self) -> &mut [u8] {
        assert_eq!(self.mode(), LwLockMode::Exclusive, "page_mut needs the exclusive content lock");
        // SAFETY: this guard holds the content lock exclusively until it is dropped, and the
        // slice mutably borrows the guard: nobody else can read or write the page meanwhile.
        unsafe { self.bb.pool.page_mut(self.id) }
    }

    /// Marks the buffer dirty (`MarkBufferDirty`): it will be written before being evicted.
    ///
    /// # Panics
    /// If the lock is held in shared mode (use [`mark_dirty_hint`](Self::mark_dirty_hint)).
    pub fn mark_dirty(&self) {
        assert_eq!(self.mode(), LwLockMode::Exclusive, "mark_dirty needs the exclusive content lock");
        self.set_dirty();
    }

    /// Marks the buffer dirty under a shared lock, for changes that need no WAL (hint bits)
    /// (`MarkBufferDirtyHint`, without checksums).
    pub fn mark_dirty_hint(&self) {
        self.set_dirty();
    }

    fn set_dirty(&self) {
        let d = &self.bb.pool.descs[self.id as usize];
        let both = BM_DIRTY | BM_JUST_DIRTIED;
        if d.load_state() & both == both {
            return;
        }
        let (_, cost) = d.update_state(self.bb.kind(), |s| Some(s | both));
        self.bb.count_cost(cost, || false);
    }

    /// Writes the page now if it is dirty (`FlushOneBuffer`), flushing WAL up to its LSN first.
    /// Returns true if it wrote.
    ///
    /// # Errors
    /// Storage manager or WAL hook errors; the buffer then stays dirty.
    pub fn flush(&self) -> Result<bool, BufferError> {
        self.bb.flush_locked(self.id)
    }

    /// Releases the lock (same as dropping the guard).
    pub fn unlock(self) {}

    /// The backend the guard belongs to.
    pub(crate) fn backend(&self) -> &'a BackendBuffers {
        self.bb
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;
