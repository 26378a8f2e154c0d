//! SLRU storage I/O: writing a dirty slot out (`SlruInternalWritePage`), the physical read and
//! write of one page in memory or in a segment file (`SlruPhysicalReadPage`,
//! `SlruPhysicalWritePage`), flushing every dirty page and syncing the touched segments.
//!
//! Locks touched: a slot's I/O lock (exclusive for the write, with the bank lock released), the
//! bank locks one at a time while flushing, and the storage's own mutexes (the in-memory page
//! map, the set of segments written since the last sync).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use lockstack_common::{WaitEvent, WaitEventScope};
use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{
    BankGuard, SLRU_PAGE_SIZE, SLRU_PAGES_PER_SEGMENT, Slot, Slru, SlruError, SlruPageStatus, Store,
    segment_file_name,
};
use crate::sync::Ordering;

impl Slru {
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
    /// `SlruInternalWritePage`: writes slot `i` if it is valid and dirty. Requires the bank lock
    /// held exclusively; may release and retake it.
    pub(super) fn write_slot(&self, g: &mut BankGuard<'_>, i: usize) -> Result<(), SlruError> {
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
    pub(super) fn segment_path(dir: &Path, page: u32) -> PathBuf {
        dir.join(segment_file_name(page / SLRU_PAGES_PER_SEGMENT))
    }
    /// `SlruPhysicalReadPage`: fills slot `s` with page `page` from storage.
    pub(super) fn physical_read(&self, s: &Slot, page: u32) -> Result<(), SlruError> {
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
    pub(super) fn physical_write(&self, s: &Slot, page: u32) -> Result<(), SlruError> {
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
    pub(super) fn sync_store(&self) -> Result<(), SlruError> {
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
}
