//! SLRU buffer management: finding a page in its bank's slots, reading it in on a miss, choosing
//! and writing out a victim (`SimpleLruReadPage`, `SimpleLruReadPage_ReadOnly`,
//! `SimpleLruZeroPage`, `SlruSelectLRUPage`, `SimpleLruWaitIO`), and the LRU clock.
//!
//! Locks touched: the page's bank lock (shared for a resident read, exclusive otherwise; released
//! and retaken around I/O) and a slot's I/O lock (exclusive while reading it in, shared to wait
//! for another backend's I/O).

use std::ops::Range;

use lockstack_lwlock::{LwLockImpl, LwLockMode};

use super::{
    BankGuard, LOCAL_STATS, LOCAL_STATS_CACHE, NO_PAGE, PageMut, PageRef, Slru, SlruCounters, SlruError,
    SlruPageStatus,
};
use crate::sync::Ordering;

impl Slru {
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
    pub(super) fn bank_range(&self, bank: usize) -> Range<usize> {
        bank * self.bank_size..(bank + 1) * self.bank_size
    }
    /// Runs `f` on the calling thread's counters for this SLRU.
    pub(super) fn count(&self, f: impl FnOnce(&SlruCounters)) {
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
    pub(super) fn recently_used(&self, bank: usize, i: usize) {
        let b = &self.banks[bank];
        let s = &self.slots[i];
        let cur = b.cur_lru_count.load(Ordering::Relaxed);
        if s.lru_count.load(Ordering::Relaxed) != cur {
            let next = cur.wrapping_add(1);
            b.cur_lru_count.store(next, Ordering::Relaxed);
            s.lru_count.store(next, Ordering::Relaxed);
        }
    }
    /// Moves the latest page forward to `page` if `page` is newer.
    pub(super) fn advance_latest(&self, page: u32) {
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
    pub(super) fn wait_io(&self, g: &mut BankGuard<'_>, i: usize) {
        let s = &self.slots[i];
        BankGuard::unlocked(g, || {
            let h = s.io_lock.acquire(LwLockMode::Shared);
            s.io_lock.release(h);
        });
    }
    /// `SlruSelectLRUPage`: the slot holding `page`, or an empty slot, or a clean victim.
    /// Requires the bank lock held exclusively; may release and retake it.
    pub(super) fn select_slot(
        &self,
        g: &mut BankGuard<'_>,
        bank: usize,
        page: u32,
    ) -> Result<usize, SlruError> {
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
    pub(super) fn read_page_locked(
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
}
