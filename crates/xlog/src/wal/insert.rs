//! Inserting a record: reserving its space and copying it into the WAL buffers
//! (`XLogInsertRecord`, `CopyXLogRecordToWAL`; 9.2/9.3's `XLogInsert` under one lock).
//!
//! Locks touched: one WAL insertion lock (`WALInsertLock` before 9.4, one of `WALInsert <i>`
//! from 9.4), with the insert position's spinlock to reserve space; the buffer ring's locks
//! through `buffers.rs`.

use crate::sync::Ordering;

use super::{Inserter, Record, Wal, WalBackend};
use crate::config::{InsertMode, WalError};
use crate::ptr::{
    WORDS_PER_PAGE, XLOG_BLCKSZ, XLogRecPtr, bytepos_to_end_recptr, bytepos_to_recptr, maxalign,
    page_header_size,
};
use crate::record::{MAX_RECORD_PAYLOAD, RECORD_HEADER_SIZE, RecordHeader, contrecord_word0};

impl Wal {
    /// Copies a record (header already final) into the buffers, starting at `start`
    /// (`CopyXLogRecordToWAL`).
    pub(super) fn copy_record(
        &self,
        words: &[u64],
        start: XLogRecPtr,
        total_len: u64,
        me: &mut Inserter<'_>,
    ) {
        let mut ptr = start.0;
        let mut rest = words;
        let mut copied = 0u64;
        loop {
            let slot = self.get_buffer(ptr, me);
            let page_start = ptr - ptr % XLOG_BLCKSZ;
            let off = ((ptr - page_start) / 8) as usize;
            let n = (WORDS_PER_PAGE - off).min(rest.len());
            let base = slot * WORDS_PER_PAGE + off;
            for (dst, src) in self.pages[base..base + n].iter().zip(&rest[..n]) {
                dst.store(*src, Ordering::Relaxed);
            }
            rest = &rest[n..];
            copied += n as u64 * 8;
            if rest.is_empty() {
                break;
            }
            // The record goes on: mark the next page as starting with its remainder. Only this
            // inserter writes these two header words of that page.
            let next = page_start + XLOG_BLCKSZ;
            let slot = self.get_buffer(next, me);
            let base = slot * WORDS_PER_PAGE;
            self.pages[base].store(contrecord_word0(next), Ordering::Relaxed);
            self.pages[base + 2].store(total_len - copied, Ordering::Relaxed);
            ptr = next + page_header_size(next);
        }
    }
}

impl WalBackend {
    /// Inserts `rec` and returns the position just past it (its *end*, which callers stamp on
    /// data pages and pass to [`flush`](Self::flush)). The backend counts as "in a
    /// transaction" (for `commit_siblings`) from its first insert until its next
    /// [`commit`](Self::commit).
    ///
    /// With [`InsertMode::SingleLock`] the lock is held for reservation and copy; with
    /// [`InsertMode::InsertionLocks`] reservation takes the spinlock and the copy runs under
    /// one insertion lock, in parallel with other inserters. Either way the caller may block on
    /// `WALWriteLock` if a WAL buffer must be recycled first.
    ///
    /// # Errors
    /// [`WalError::RecordTooLarge`] (nothing inserted); [`WalError::Poisoned`] if a write
    /// failed (now or earlier; the record was inserted but cannot be made durable).
    pub fn insert(&mut self, rec: &Record<'_>) -> Result<XLogRecPtr, WalError> {
        if rec.data.len() > MAX_RECORD_PAYLOAD {
            return Err(WalError::RecordTooLarge { size: rec.data.len() });
        }
        let wal = &*self.wal;
        let total_len = (RECORD_HEADER_SIZE + rec.data.len()) as u64;
        let size = maxalign(total_len);
        let payload_crc = crc32c::crc32c(rec.data);
        // Assemble the words outside any lock: three header words, then the payload.
        let nwords = (size / 8) as usize;
        self.scratch.clear();
        self.scratch.resize(nwords, 0);
        let (chunks, tail) = rec.data.as_chunks::<8>();
        for (dst, c) in self.scratch[3..].iter_mut().zip(chunks) {
            *dst = u64::from_le_bytes(*c);
        }
        if !tail.is_empty() {
            let mut last = [0u8; 8];
            last[..tail.len()].copy_from_slice(tail);
            self.scratch[3 + chunks.len()] = u64::from_le_bytes(last);
        }

        let mut hold = wal.ins.acquire(self.lock_to_try);
        if hold.waited() {
            self.counters.insert_lock_waits.incr();
            self.lock_to_try = (hold.index() + 1) % wal.ins.len();
        }
        let res = wal.ins.reserve(&hold, size);
        let start = bytepos_to_recptr(res.start);
        let end = bytepos_to_end_recptr(res.end);
        let prev = if res.prev == res.start { XLogRecPtr::INVALID } else { bytepos_to_recptr(res.prev) };
        let mut hdr = RecordHeader {
            total_len: total_len as u32,
            xid: rec.xid.0,
            prev: prev.0,
            info: rec.info,
            rmid: rec.rmid,
            crc: 0,
        };
        hdr.crc = hdr.compute_crc(payload_crc);
        self.scratch[..3].copy_from_slice(&hdr.to_words());
        let mut cost = lockstack_common::sync::hook::pg_region("xlog.insert_copy");
        cost.add_items(size);
        wal.copy_record(
            &self.scratch,
            start,
            total_len,
            &mut Inserter { hold: &mut hold, counters: &self.counters },
        );
        drop(cost);
        if wal.cfg.insert_mode == InsertMode::SingleLock {
            wal.inserted_upto.store(end.0, Ordering::Release);
        }
        wal.ins.release(hold);
        if start.0 / XLOG_BLCKSZ != end.0 / XLOG_BLCKSZ {
            wal.write_rqst.fetch_max(end.0, Ordering::AcqRel);
        }
        self.counters.records.incr();
        self.counters.bytes.add(size);
        self.last_start = start;
        if !self.in_xact {
            self.in_xact = true;
            wal.in_xact.fetch_add(1, Ordering::Relaxed);
        }
        wal.check_poison()?;
        Ok(end)
    }
}
