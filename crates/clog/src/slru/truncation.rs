//! SLRU truncation: emptying the buffers of pages before a cutoff and removing whole segments
//! from storage (`SimpleLruTruncate`, `SlruMayDeleteSegment`, `SlruScanDirectory`), guarded by
//! the latest page against apparent wraparound.
//!
//! Locks touched: each bank lock exclusively while its buffers are emptied, then every bank lock
//! at once (in bank order) around the removal of one segment; slots' I/O locks through the
//! writes and waits of `buffers.rs` and `storage.rs`; the storage's mutexes.

use std::collections::BTreeSet;
use std::fs;
use std::io;

use super::{
    BankGuard, SLRU_PAGES_PER_SEGMENT, Slru, SlruError, SlruPageStatus, Store, TruncateOutcome,
    parse_segment_file_name, segment_file_name,
};
use crate::sync::Ordering;

/// What [`Slru::delete_segment_checked`] did with one segment.
pub(super) enum SegmentDeletion {
    /// The segment was removed from storage.
    Removed,
    /// The segment holds the latest page now, or may not go for another reason.
    Kept,
    /// The latest page precedes the cutoff: stop truncating.
    Wraparound,
}

impl Slru {
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
    #[cfg(test)]
    pub(super) fn run_truncate_hook(&self) {
        let hook = self.truncate_hook.lock().take();
        if let Some(mut h) = hook {
            h(self);
            *self.truncate_hook.lock() = Some(h);
        }
    }
    /// True if the latest page precedes `cutoff` (the "apparent wraparound" check).
    pub(super) fn latest_precedes(&self, cutoff: u32) -> bool {
        self.latest_page().is_some_and(|l| (self.page_precedes)(l, cutoff))
    }
    /// `SlruMayDeleteSegment`: segment `seg` may go only if its first and its last page both
    /// precede `cutoff` (a segment holding the cutoff, or the wraparound point, stays).
    pub(super) fn may_delete_segment(&self, seg: u32, cutoff: u32) -> bool {
        let first = seg.wrapping_mul(SLRU_PAGES_PER_SEGMENT);
        let last = first.wrapping_add(SLRU_PAGES_PER_SEGMENT - 1);
        (self.page_precedes)(first, cutoff) && (self.page_precedes)(last, cutoff)
    }
    /// Removes segment `seg` from storage, with every bank lock held exclusively (taken in
    /// bank order; nothing else holds two bank locks): re-checks the latest page, empties the
    /// segment's clean buffers (a buffer with I/O in progress is waited out with the locks
    /// released, then everything is checked again), and only then removes the file. Dirty
    /// buffers of the segment are dropped unwritten: every page of it precedes the cutoff.
    pub(super) fn delete_segment_checked(&self, seg: u32, cutoff: u32) -> Result<SegmentDeletion, SlruError> {
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
    pub(super) fn remove_segment(&self, seg: u32) -> Result<(), SlruError> {
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
