//! One backend's handle on the pool ([`BackendBuffers`]): attaching, pinning, reading in,
//! victim replacement, extension, cleanup locks and flushing, and the content-lock guards it
//! hands out ([`ContentGuard`]). Takes the mapping partition locks, buffer header locks,
//! content locks, I/O locks, the relation-extension locks and (9.2) `BufFreelistLock`.

use crate::sync::Ordering;
use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use lockstack_common::{
    AUXILIARY_BACKEND_BASE, AttachError, BackendId, BlockNumber, Oid, WaitEvent, WaitEventScope,
};
use lockstack_lwlock::{LwLockHeld, LwLockImpl, LwLockMode};

use crate::buffer::Buffer;
use crate::desc::{
    BM_DIRTY, BM_JUST_DIRTIED, BM_PIN_COUNT_WAITER, BM_VALID, BUF_REFCOUNT_MASK, HeaderCost, HeaderKind,
};
use crate::error::BufferError;
use crate::page::BLCKSZ;
use crate::pool::{EXTENSION_LOCKS, ZERO_PAGE};
use crate::prefetch::prefetch_lines;
use crate::private_ref::{HeldLocks, PrivateRefCount};
use crate::stats::{BackendCounters, BufferStats};
use crate::tag::{BufferTag, ForkNumber};

use crate::pool::{BufferPool, ReadMode};

impl BufferPool {
    /// Attaches backend `id`: a handle with its private refcounts and counters, whose id names
    /// it as a cleanup-lock waiter (`wait_backend_pgprocno`, 17). One per thread; it is `Send`
    /// but not `Sync`. Dropping it releases its pins and frees `id`.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below [`AUXILIARY_BACKEND_BASE`],
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<BackendBuffers, AttachError> {
        self.attached.claim(id, "buffer pool")?;
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
}

/// One backend's view of the pool: its private refcounts, the content locks it holds and its
/// counters (PostgreSQL keeps these in backend-local memory: `PrivateRefCountArray`,
/// `held_lwlocks`, `pgBufferUsage`). Every buffer operation goes through it.
///
/// It is `Send` (a backend may move to another thread between operations) but not `Sync`.
/// Dropping it releases every pin it still holds.
pub struct BackendBuffers {
    pub(crate) pool: Arc<BufferPool>,
    pub(crate) id: u32,
    pub(crate) refs: PrivateRefCount,
    pub(crate) locked: HeldLocks,
    pub(crate) counters: lockstack_common::StatsBlock<BackendCounters>,
    pub(crate) _not_sync: PhantomData<Cell<()>>,
}

impl fmt::Debug for BackendBuffers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BackendBuffers").field("id", &self.id).field("pins", &self.refs.all()).finish()
    }
}

impl Drop for BackendBuffers {
    fn drop(&mut self) {
        self.release_all();
        self.pool.attached.release(self.id);
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
    pub(crate) fn kind(&self) -> HeaderKind {
        self.pool.cfg.header
    }

    #[inline]
    pub(crate) fn count_cost(&self, cost: HeaderCost, is_vm: impl FnOnce() -> bool) {
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
    pub(crate) fn pin(&self, id: u32, is_vm: bool) {
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
    pub(crate) fn unpin(&self, id: u32) {
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
    pub(crate) fn check_pinned(&self, buf: Buffer) -> u32 {
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

    pub(crate) fn note_locked(&self, id: u32) {
        assert!(!self.locked.contains(id), "buffer {id} is already locked by this backend (self-deadlock)");
        self.locked.push(id);
    }

    /// Forgets content lock `id` taken by [`note_locked`](Self::note_locked).
    #[inline]
    pub(crate) fn note_unlocked(&self, id: u32) {
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
