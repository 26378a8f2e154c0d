//! Filling and emptying buffers for a backend: the read-in path (`ReadBuffer_common`), victim
//! replacement (`BufferAlloc`), the I/O-in-progress protocol (`StartBufferIO` /
//! `TerminateBufferIO`) and writing a dirty page out (`FlushBuffer`). Takes the mapping
//! partition locks, buffer header locks, I/O locks, a victim's content lock (conditionally,
//! shared) and, in 9.2's strategy, `BufFreelistLock`.

use lockstack_common::sync::hook::{self, Access};
use lockstack_lwlock::{LwLockHeld, LwLockImpl, LwLockMode};

use crate::buffer::Buffer;
use crate::desc::{
    BM_DIRTY, BM_IO_ERROR, BM_IO_IN_PROGRESS, BM_JUST_DIRTIED, BM_PIN_COUNT_WAITER, BM_TAG_VALID, BM_VALID,
    BUF_REFCOUNT_MASK, BUF_USAGECOUNT_ONE,
};
use crate::error::BufferError;
use crate::freelist::Victim;
use crate::page::{self, BLCKSZ};
use crate::tag::{BufferTag, ForkNumber, HashedTag};

use crate::backend::BackendBuffers;
use crate::pool::ReadMode;

impl BackendBuffers {
    pub(crate) fn read_impl(&self, tag: BufferTag, mode: ReadMode) -> Result<Buffer, BufferError> {
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
    pub(crate) fn buffer_alloc(&self, h: &HashedTag, is_vm: bool) -> Result<u32, BufferError> {
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
    pub(crate) fn start_io(&self, id: u32, for_input: bool) -> Option<LwLockHeld> {
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
    pub(crate) fn terminate_io(&self, id: u32, held: LwLockHeld, clear_dirty: bool, set_bits: u32) {
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
    pub(crate) fn flush_locked(&self, id: u32) -> Result<bool, BufferError> {
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
}
