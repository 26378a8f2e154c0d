//! The WAL buffer ring: mapping a WAL page to its buffer and initialising a buffer for a new
//! page once its old contents are written (`GetXLogBuffer`, `AdvanceXLInsertBuffer`).
//!
//! Locks touched: `WALBufMappingLock` exclusive to replace a page (9.4+), released while
//! `WALWriteLock` is taken exclusively to write out the old page; the inserter's own insertion
//! lock stays held throughout.

use crate::sync::Ordering;
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{Inserter, Wal};
use crate::config::InsertMode;
use crate::ptr::{WORDS_PER_PAGE, XLOG_BLCKSZ, XLogRecPtr, page_header_size};
use crate::record::page_header_words;
use crate::stats::WalCounters;

impl Wal {
    #[inline]
    pub(super) fn slot_of(&self, page_start: u64) -> usize {
        ((page_start / XLOG_BLCKSZ) % self.nbuf as u64) as usize
    }
    /// The buffer slot holding the page of `ptr`, initialising it (and writing out the page it
    /// replaces) if needed (`GetXLogBuffer`). Before anything that may block, the inserter
    /// advertises its progress.
    #[inline]
    pub(super) fn get_buffer(&self, ptr: u64, me: &mut Inserter<'_>) -> usize {
        let page_start = ptr - ptr % XLOG_BLCKSZ;
        let end = page_start + XLOG_BLCKSZ;
        let slot = self.slot_of(page_start);
        if self.xlblocks[slot].load(Ordering::Acquire) == end {
            return slot;
        }
        // Everything before `ptr` is ours and copied, or finished by earlier inserters. Just past
        // a header, advertise the page start: nobody may write out a page whose header we are
        // about to see initialised.
        let progress = if ptr - page_start <= page_header_size(page_start) { page_start } else { ptr };
        self.ins.advertise(me.hold, XLogRecPtr(progress));
        self.advance_insert_buffer(ptr, progress, me.counters);
        let now = self.xlblocks[slot].load(Ordering::Acquire);
        assert_eq!(now, end, "WAL buffer for {} not found after initialising it", XLogRecPtr(ptr));
        slot
    }
    /// Initialises buffer pages up to the one containing `upto`, writing out old pages that
    /// are in the way (`AdvanceXLInsertBuffer`). `own_progress` is the caller's advertised
    /// position.
    pub(super) fn advance_insert_buffer(&self, upto: u64, own_progress: u64, counters: &WalCounters) {
        let use_mapping = self.cfg.insert_mode != InsertMode::SingleLock;
        let mut mapping = use_mapping.then(|| self.mapping_lock.acquire(LwLockMode::Exclusive));
        loop {
            let init = self.initialized_upto.load(Ordering::Relaxed);
            if upto < init {
                break;
            }
            let slot = self.slot_of(init);
            let old_end = self.xlblocks[slot].load(Ordering::Relaxed);
            if old_end > self.write_result.load(Ordering::Acquire) {
                // The slot's old page is not written yet: write it, without the mapping lock,
                // after the insertions into it are finished.
                self.write_rqst.fetch_max(old_end, Ordering::AcqRel);
                if let Some(h) = mapping.take() {
                    self.mapping_lock.release(h);
                }
                let finished = self.finished_insertions(XLogRecPtr(old_end), Some(own_progress));
                debug_assert!(finished.0 >= old_end, "insertions before {old_end:#x} unfinished: {finished}");
                let w = self.write_lock.acquire(LwLockMode::Exclusive);
                if old_end > self.write_result.load(Ordering::Acquire) {
                    if let Err(e) = self.xlog_write(old_end, None, counters) {
                        self.poison(&e);
                    }
                    counters.buffers_full.incr();
                }
                self.write_lock.release(w);
                if use_mapping {
                    mapping = Some(self.mapping_lock.acquire(LwLockMode::Exclusive));
                }
                continue;
            }
            self.init_page(slot, init);
            self.initialized_upto.store(init + XLOG_BLCKSZ, Ordering::Relaxed);
        }
        if let Some(h) = mapping {
            self.mapping_lock.release(h);
        }
    }
    /// Zeroes buffer `slot` and gives it the header of the page at `page_start`. The slot is
    /// marked invalid first, so nobody takes a half-initialised page for a valid one.
    pub(super) fn init_page(&self, slot: usize, page_start: u64) {
        self.xlblocks[slot].store(0, Ordering::Release);
        let (hdr, n) = page_header_words(page_start);
        let base = slot * WORDS_PER_PAGE;
        for (i, w) in self.pages[base..base + WORDS_PER_PAGE].iter().enumerate() {
            w.store(if i < n { hdr[i] } else { 0 }, Ordering::Relaxed);
        }
        self.xlblocks[slot].store(page_start + XLOG_BLCKSZ, Ordering::Release);
    }
}
