//! Writing and flushing WAL: `XLogWrite`, `XLogFlush` with group commit (9.2's
//! `LWLockAcquireOrWait`), `XLogBackgroundFlush` for the WAL writer, and a backend's flush,
//! commit (synchronous or asynchronous) and end of transaction.
//!
//! Locks touched: `WALWriteLock` exclusive (taken with acquire-or-wait, so that a backend whose
//! WAL was flushed meanwhile need not take it); the insertion locks, waited on for finished
//! insertions (`WaitXLogInsertionsToFinish`); the sink's mutex for the write itself.

use std::time::Duration;

use crate::sync::{AtomicBool, Ordering};
use lockstack_common::{WaitEvent, WaitEventScope};
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{Wal, WalBackend};
use crate::config::{InsertMode, WalError};
use crate::ptr::{WORDS_PER_PAGE, XLOG_BLCKSZ, XLogRecPtr};
use crate::stats::WalCounters;

impl Wal {
    /// How far every insertion is finished, for someone wanting to write up to `upto`.
    /// `own` is the caller's own progress when it is the single-lock inserter.
    pub(super) fn finished_insertions(&self, upto: XLogRecPtr, own: Option<u64>) -> XLogRecPtr {
        match self.cfg.insert_mode {
            InsertMode::InsertionLocks(_) => self.ins.wait_for_insertions(upto),
            InsertMode::SingleLock => match own {
                Some(p) => XLogRecPtr(p),
                None => XLogRecPtr(self.inserted_upto.load(Ordering::Acquire)),
            },
        }
    }
    /// Writes WAL up to `write_upto` and, if asked, flushes up to `flush_upto` (`XLogWrite`).
    /// The caller holds `WALWriteLock` and every insertion before `write_upto` is finished.
    /// Whole pages are written; a partial last page is rewritten by the next write.
    pub(super) fn xlog_write(
        &self,
        write_upto: u64,
        flush_upto: Option<u64>,
        counters: &WalCounters,
    ) -> Result<(), WalError> {
        let mut sink = self.sink.lock();
        let written = self.write_result.load(Ordering::Relaxed);
        if write_upto > written {
            let first = written - written % XLOG_BLCKSZ;
            let last = write_upto.div_ceil(XLOG_BLCKSZ) * XLOG_BLCKSZ;
            let npages = (last - first) / XLOG_BLCKSZ;
            let mut result = sink.check_space(last);
            if result.is_ok() && sink.stores() {
                let mut p = first;
                while p < last && result.is_ok() {
                    let slot = self.slot_of(p);
                    let held = self.xlblocks[slot].load(Ordering::Acquire);
                    assert_eq!(held, p + XLOG_BLCKSZ, "WAL page {} is not in its buffer", XLogRecPtr(p));
                    let base = slot * WORDS_PER_PAGE;
                    let words =
                        self.pages[base..base + WORDS_PER_PAGE].iter().map(|w| w.load(Ordering::Relaxed));
                    result = sink.add_page(p, words);
                    p += XLOG_BLCKSZ;
                }
                if result.is_ok() {
                    result = sink.write_pending();
                }
            }
            counters.writes.incr();
            counters.pages_written.add(npages);
            // Even a failed write moves the write position on (the WAL is poisoned by the
            // caller), so that inserters waiting for buffers do not retry it forever.
            self.write_result.store(write_upto, Ordering::Release);
            result?;
        }
        if let Some(f) = flush_upto {
            let f = f.min(self.write_result.load(Ordering::Relaxed));
            if f > self.flush_result.load(Ordering::Relaxed) {
                if sink.flush()? {
                    counters.flushes.incr();
                }
                self.flush_result.store(f, Ordering::Release);
            }
        }
        Ok(())
    }
    /// `XLogFlush`: returns once WAL up to `record` is flushed, by this backend or another.
    pub(super) fn flush_upto(
        &self,
        record: XLogRecPtr,
        counters: &WalCounters,
        me: Option<bool>,
    ) -> Result<(), WalError> {
        self.check_poison()?;
        if record.0 <= self.flush_result.load(Ordering::Acquire) {
            return Ok(());
        }
        let end = self.insert_position();
        if record > end {
            return Err(WalError::FlushBeyondEnd { requested: record, end });
        }
        counters.flush_requests.incr();
        let _cost = lockstack_common::sync::hook::pg_region("xlog.flush_bookkeeping");
        loop {
            if record.0 <= self.flush_result.load(Ordering::Acquire) {
                counters.flushed_by_others.incr();
                break;
            }
            let rqst = XLogRecPtr(record.0.max(self.write_rqst.load(Ordering::Acquire)));
            // Only fully copied WAL may be written; wait for it *before* taking WALWriteLock.
            let mut insertpos = match self.cfg.insert_mode {
                InsertMode::InsertionLocks(_) => self.ins.wait_for_insertions(rqst),
                // 9.2: the request covers only finished records.
                InsertMode::SingleLock => rqst,
            };
            let Some(w) = self.write_lock.acquire_or_wait(LwLockMode::Exclusive) else {
                // Someone else held it and has probably flushed our record; look again.
                continue;
            };
            if record.0 <= self.flush_result.load(Ordering::Acquire) {
                self.write_lock.release(w);
                counters.flushed_by_others.incr();
                break;
            }
            let flush_enabled = self.sink.lock().flush_enabled();
            if self.cfg.commit_delay_us > 0
                && flush_enabled
                && self.other_backends_in_xact(me) >= self.cfg.commit_siblings
            {
                {
                    let _scope = WaitEventScope::new(WaitEvent::COMMIT_DELAY);
                    crate::sync::sleep(Duration::from_micros(self.cfg.commit_delay_us));
                }
                counters.commit_delays.incr();
                if let InsertMode::InsertionLocks(_) = self.cfg.insert_mode {
                    // Everything up to insertpos is finished, so this cannot wait on anyone
                    // who needs WALWriteLock; it only moves insertpos forward.
                    insertpos = self.ins.wait_for_insertions(insertpos);
                }
            }
            let (write_to, flush_to) = match self.cfg.insert_mode {
                InsertMode::InsertionLocks(_) => (insertpos, insertpos),
                InsertMode::SingleLock => match self.ins.try_acquire(0) {
                    // 9.2's piggyback: with WALInsertLock free, everything inserted is finished.
                    Some(h) => {
                        let all = XLogRecPtr(self.inserted_upto.load(Ordering::Acquire));
                        self.ins.release(h);
                        (all.max(insertpos), all.max(insertpos))
                    }
                    None => (insertpos, record),
                },
            };
            let r = self.xlog_write(write_to.0, Some(flush_to.0), counters);
            self.write_lock.release(w);
            if let Err(e) = r {
                self.poison(&e);
                return Err(e);
            }
            break;
        }
        self.check_poison()
    }
    /// Backends in a transaction other than the caller (`MinimumActiveBackends`' count).
    pub(super) fn other_backends_in_xact(&self, caller_in_xact: Option<bool>) -> usize {
        let all = self.in_xact.load(Ordering::Relaxed);
        all.saturating_sub(usize::from(caller_in_xact.unwrap_or(false)))
    }
    /// One round of the WAL writer (`XLogBackgroundFlush`): flush up to the newest
    /// asynchronous commit and every completed page.
    /// The WAL writer's loop on the calling thread (`synchronous_commit = off`): sleep
    /// `wal_writer_delay`, flush what asynchronous commits left, until `stop` is set (checked
    /// after each sleep). A simulated measured phase runs it as one of its tasks, since the
    /// native writer thread started with the WAL sits such phases out
    /// ([`lockstack_common::sync::hook::outside_simulated_phases`]). With `synchronous_commit
    /// = on` it returns at once. Source: PostgreSQL's `walwriter.c` (`WalWriterMain`, 8.3+).
    ///
    /// # Errors
    /// The first flush error (it also poisons the WAL).
    pub fn writer_loop(&self, stop: &AtomicBool) -> Result<(), WalError> {
        if self.cfg.synchronous_commit {
            return Ok(());
        }
        let counters = self.stats.register();
        loop {
            {
                let _scope = WaitEventScope::new(WaitEvent::WAL_WRITER_MAIN);
                crate::sync::sleep(self.cfg.wal_writer_delay);
            }
            if stop.load(Ordering::Acquire) {
                return Ok(());
            }
            self.background_flush(&counters)?;
        }
    }
    pub(super) fn background_flush(&self, counters: &WalCounters) -> Result<(), WalError> {
        let target = self.async_xact_lsn.load(Ordering::Acquire).max(self.write_rqst.load(Ordering::Acquire));
        if target > self.flush_result.load(Ordering::Acquire) {
            self.flush_upto(XLogRecPtr(target), counters, None)?;
        }
        Ok(())
    }
}

impl WalBackend {
    /// Returns once WAL up to `upto` is flushed (`XLogFlush`): written and, for a file sink,
    /// `fdatasync`ed, or for a modelled sink, past a modelled flush. If another backend holds
    /// `WALWriteLock`, this one waits for it to be released and looks again (group commit):
    /// usually the holder's flush covered `upto` too.
    ///
    /// # Errors
    /// [`WalError::FlushBeyondEnd`] if `upto` is past the end of inserted WAL;
    /// [`WalError::Io`] if the write or flush failed (the WAL is then poisoned);
    /// [`WalError::Poisoned`] after an earlier failure.
    pub fn flush(&mut self, upto: XLogRecPtr) -> Result<(), WalError> {
        self.wal.flush_upto(upto, &self.counters, Some(self.in_xact))
    }
    /// Ends the backend's transaction whose commit record ends at `commit_end`
    /// (`RecordTransactionCommit`): with `synchronous_commit` on, flushes it; with it off,
    /// notes it for the WAL writer and returns at once (the commit may be lost in a crash for
    /// up to three `wal_writer_delay`s).
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub fn commit(&mut self, commit_end: XLogRecPtr) -> Result<(), WalError> {
        let r = if self.wal.cfg.synchronous_commit {
            self.flush(commit_end)
        } else {
            self.wal.async_xact_lsn.fetch_max(commit_end.0, Ordering::AcqRel);
            self.counters.async_commits.incr();
            self.wal.check_poison()
        };
        self.end_xact();
        r
    }
    /// Flushes every insertion finished so far (by any backend) and returns how far that is:
    /// with no other backend inserting, the end of WAL.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub fn flush_all(&mut self) -> Result<XLogRecPtr, WalError> {
        let end = self.wal.finished_insertions(self.wal.insert_position(), None);
        self.flush(end)?;
        Ok(end)
    }
    pub(super) fn end_xact(&mut self) {
        if self.in_xact {
            self.in_xact = false;
            self.wal.in_xact.fetch_sub(1, Ordering::Relaxed);
        }
    }
}
