//! The shared buffer pool ([`BufferPool`]): descriptors, pages, mapping table, victim strategy
//! and storage manager, shared by every backend. Backends use it through
//! [`crate::backend::BackendBuffers`]; this file holds what they share and the pool-wide
//! operations (flushing every buffer, invariant checks). Takes the buffer header locks and
//! content locks (in `flush_all` and `check_invariants`) and the attach registry's mutex.
//!
//! The read path is PostgreSQL's `ReadBuffer_common` → `BufferAlloc` → `StrategyGetBuffer` /
//! `StartBufferIO` (`bufmgr.c`, `freelist.c`), with the locking rules of
//! `src/backend/storage/buffer/README`: a buffer found in the mapping table is pinned before
//! the partition lock is released; a victim is re-tagged only with refcount 1 (our own pin)
//! under both mapping partitions; a dirty victim is written under a *conditional* shared content
//! lock; WAL is flushed up to the page LSN before the page is written.

use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering, RwLock};
use std::fmt;
use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::hook::{self};
use lockstack_common::{BackendRegistry, InvariantViolation, Oid, StatsRegistry};
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use crate::arena::PageArena;
use crate::config::BufferPoolConfig;
use crate::desc::{
    BM_DIRTY, BM_IO_IN_PROGRESS, BM_LOCKED, BM_MAX_USAGE_COUNT, BM_PIN_COUNT_WAITER, BM_TAG_VALID, BM_VALID,
    BufferDesc,
};
use crate::desc_array::DescArray;
use crate::error::{BufferError, HookError};
use crate::freelist::Strategy;
use crate::page::{BLCKSZ, PageVerifier};
use crate::smgr::{MemorySmgr, Smgr};
use crate::stats::{BackendCounters, BufferStats};
use crate::table::BufTable;
use crate::tag::{BufferTag, ForkNumber};

/// Number of relation-extension locks; a relation fork uses the one its tag hash picks.
pub(crate) const EXTENSION_LOCKS: usize = 16;

pub(crate) static ZERO_PAGE: [u8; BLCKSZ] = [0; BLCKSZ];

/// The "flush WAL up to this LSN" callback the pool calls before writing a dirty page whose LSN
/// is beyond what it has already had flushed (`XLogFlush` in `FlushBuffer`).
pub type WalFlushHook = Arc<dyn Fn(u64) -> Result<(), HookError> + Send + Sync>;

// `&[u8]`, exclusive for `&mut [u8]`, see `ContentGuard`), (b) by the one backend doing a read into
// a not-yet-valid buffer under `BM_IO_IN_PROGRESS` (nobody else touches a page before `BM_VALID`),
// or (c) with atomic byte operations by the visibility-map functions (see `vm.rs`).

/// The shared buffer pool: descriptors, pages, mapping table, victim strategy, storage manager
/// and the per-backend statistics registry. Create it with [`BufferPool::new`] and give every
/// backend (thread) its own [`BackendBuffers`] from [`BufferPool::attach`].
pub struct BufferPool {
    pub(crate) cfg: BufferPoolConfig,
    pub(crate) descs: DescArray,
    pub(crate) pages: PageArena,
    pub(crate) table: BufTable,
    pub(crate) strategy: Strategy,
    pub(crate) smgr: Arc<dyn Smgr>,
    pub(crate) wal_flush: RwLock<Option<WalFlushHook>>,
    pub(crate) page_verifier: RwLock<Option<PageVerifier>>,
    pub(crate) flushed_lsn: AtomicU64,
    pub(crate) extension_locks: Box<[CachePadded<Mutex<()>>]>,
    pub(crate) stats: StatsRegistry<BackendCounters>,
    /// Ids of the live handles made by [`BufferPool::attach`].
    pub(crate) attached: BackendRegistry,
    /// Handles made by [`BufferPool::attach_auxiliary`] so far.
    pub(crate) next_auxiliary: AtomicU32,
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
            attached: BackendRegistry::new(),
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
    pub(crate) fn verify_read(&self, tag: BufferTag, p: &[u8]) -> Result<(), BufferError> {
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
    pub(crate) fn wal_before_data(&self, lsn: u64, counters: &BackendCounters) -> Result<(), BufferError> {
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
    pub(crate) unsafe fn page(&self, id: u32) -> &[u8] {
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
    pub(crate) unsafe fn page_mut(&self, id: u32) -> &mut [u8] {
        // SAFETY: per this function's contract nobody else reads or writes the page.
        unsafe { &mut *self.pages.page(id).get() }
    }
}

/// How a read fills a buffer that does not hold the page yet.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum ReadMode {
    /// Read it from the storage manager (`RBM_NORMAL`).
    Normal,
    /// Zero it: the block was just added by an extension (`RBM_ZERO`).
    Zero,
}
