//! WAL insertion locks and space reservation: the part of the 9.4 design that decides who may
//! write what (`WALInsertLockAcquire`, `ReserveXLogInsertLocation`,
//! `WALInsertLockUpdateInsertingAt`, `WALInsertLockRelease` and `WaitXLogInsertionsToFinish`
//! in `src/backend/access/transam/xlog.c`, 9.4+).
//!
//! The protocol in four rules:
//!
//! 1. An inserter takes one insertion lock exclusively, then reserves its bytes: under a
//!    spinlock it moves the reservation counter forward by the record's aligned size and takes
//!    the previous start as its back-link. Reservation order is log order.
//! 2. While it holds the lock, its *advertised position* (`insertingAt`) says "everything of
//!    mine before this position is copied". It starts as 0 ("unknown: wait for me") and only
//!    grows: an inserter advertises before any step that may block.
//! 3. Releasing resets the position to 0 and frees the lock: the whole record is copied.
//! 4. Someone who wants to write WAL up to `upto` first reads the reservation end, then, for
//!    each lock, waits until it is free or advertises at least `upto`; the smallest
//!    advertised position still held (or the reservation end) is how far all insertions are
//!    finished.
//!
//! In [`InsertMode::SingleLock`] (9.2/9.3) there is one lock, reservation happens under it
//! without the spinlock, and nobody ever waits on the advertised position.
//!
//! [`InsertionLocks`] is public so that the protocol can be reused and model-checked alone
//! (`tests/loom_insert.rs`); [`crate::Wal`] is the usual way to use it.

use crossbeam_utils::CachePadded;
use lockstack_common::TrancheId;
use lockstack_lwlock::{
    LwLock, LwLockHeld, LwLockImpl, LwLockKind, LwLockMode, LwLockVar, SpinLock, VarWait,
};

use crate::config::{InsertMode, WalError};
use crate::ptr::{XLogRecPtr, bytepos_to_end_recptr};
use crate::sync::{AtomicU64, Ordering};

/// One insertion lock and its advertised position, alone on a 128-byte line
/// (`WALInsertLockPadded`).
struct Slot {
    lock: LwLock,
    inserting_at: LwLockVar,
}

/// The reservation counters (`insertpos_lck`, `CurrBytePos`, `PrevBytePos`), in usable bytes.
struct Reserve {
    lck: SpinLock,
    cur: AtomicU64,
    prev: AtomicU64,
}

/// A held insertion lock: which one, and what its holder advertised last.
#[must_use = "an insertion lock stays held until it is passed to InsertionLocks::release"]
#[derive(Debug)]
pub struct InsertionHold {
    index: usize,
    held: LwLockHeld,
    advertised: u64,
}

impl InsertionHold {
    /// Index of the lock held (0..n).
    pub fn index(&self) -> usize {
        self.index
    }

    /// True if taking the lock had to sleep.
    pub fn waited(&self) -> bool {
        self.held.waited()
    }
}

/// Space reserved for one record, in usable-byte positions (see [`crate::ptr`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// First usable byte of the record.
    pub start: u64,
    /// First usable byte after it (start + aligned size).
    pub end: u64,
    /// Start of the previous record (its back-link; equal to `start` for the very first
    /// record, which has none).
    pub prev: u64,
}

/// The insertion locks and the reservation counter of one WAL.
pub struct InsertionLocks {
    mode: InsertMode,
    reserve: CachePadded<Reserve>,
    slots: Box<[CachePadded<Slot>]>,
}

impl std::fmt::Debug for InsertionLocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InsertionLocks").field("mode", &self.mode).field("locks", &self.slots.len()).finish()
    }
}

impl InsertionLocks {
    /// Locks for `mode`, built on LWLocks of `kind` in tranche `WALInsert` (instance = index).
    ///
    /// # Errors
    /// [`WalError::Config`] if the mode's lock count is not 1..=128.
    pub fn new(mode: InsertMode, kind: LwLockKind) -> Result<InsertionLocks, WalError> {
        mode.validate()?;
        let slots = (0..mode.locks())
            .map(|i| {
                CachePadded::new(Slot {
                    lock: LwLock::new(kind, TrancheId::WAL_INSERT, i as u32),
                    inserting_at: LwLockVar::new(0),
                })
            })
            .collect();
        let reserve = CachePadded::new(Reserve {
            lck: SpinLock::new(),
            cur: AtomicU64::new(0),
            prev: AtomicU64::new(0),
        });
        Ok(InsertionLocks { mode, reserve, slots })
    }

    /// Names the hot lines for a simulation (see `hook::name_line`): each insertion lock
    /// (`"WALInsert 2"`, its `insertingAt` on the same padded line) and the reservation
    /// counters (`"WAL insert position"`: `insertpos_lck`, `CurrBytePos`, `PrevBytePos`).
    /// Called once the locks are at their final address.
    pub fn name_lines(&self) {
        for s in self.slots.iter() {
            s.lock.name_line();
        }
        lockstack_common::sync::hook::name_line(&*self.reserve as *const Reserve as *const u8, || {
            "WAL insert position".to_string()
        });
    }

    /// The addresses of each insertion lock's word and of the reservation counters (what
    /// [`name_lines`](Self::name_lines) names), for the simulation tests.
    #[cfg(test)]
    pub(crate) fn line_addrs(&self) -> (Vec<usize>, usize) {
        let locks = self.slots.iter().map(|s| s.lock.word_addr() as usize).collect();
        (locks, &*self.reserve as *const Reserve as usize)
    }

    /// The mode.
    pub fn mode(&self) -> InsertMode {
        self.mode
    }

    /// Number of locks.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false (there is at least one lock); for clippy's `len` convention.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Takes lock `preferred % n` exclusively, sleeping if needed. The caller picks the lock
    /// (PostgreSQL: the backend's `lockToTry`, moved on by one after every wait).
    pub fn acquire(&self, preferred: usize) -> InsertionHold {
        let index = preferred % self.slots.len();
        let held = self.slots[index].lock.acquire(LwLockMode::Exclusive);
        InsertionHold { index, held, advertised: 0 }
    }

    /// Takes lock `index % n` only if that needs no wait (`LWLockConditionalAcquire`; 9.2's
    /// flush uses it on `WALInsertLock` to extend its write to the current insert position).
    pub fn try_acquire(&self, index: usize) -> Option<InsertionHold> {
        let index = index % self.slots.len();
        let held = self.slots[index].lock.conditional_acquire(LwLockMode::Exclusive)?;
        Some(InsertionHold { index, held, advertised: 0 })
    }

    /// Reserves `size` usable bytes (already MAXALIGNed by the caller) for the holder of
    /// `hold`: under the spinlock for insertion locks, under the lock itself for the single
    /// lock.
    #[inline]
    pub fn reserve(&self, hold: &InsertionHold, size: u64) -> Reservation {
        debug_assert!(hold.index < self.slots.len());
        let r = &*self.reserve;
        let single = self.mode == InsertMode::SingleLock;
        if !single {
            r.lck.lock();
        }
        let cost = lockstack_common::sync::hook::pg_region("xlog.insert_reserve");
        let start = r.cur.load(Ordering::Relaxed);
        let prev = r.prev.load(Ordering::Relaxed);
        r.cur.store(start + size, Ordering::Relaxed);
        r.prev.store(start, Ordering::Relaxed);
        drop(cost);
        if !single {
            r.lck.unlock();
        }
        Reservation { start, end: start + size, prev }
    }

    /// Advertises that the holder has copied everything before `at` (`LWLockUpdateVar` on
    /// `insertingAt`), waking writers waiting for it. No-op in single-lock mode.
    ///
    /// # Panics
    /// If `at` is below what this hold advertised before (the position never goes back).
    pub fn advertise(&self, hold: &mut InsertionHold, at: XLogRecPtr) {
        if self.mode == InsertMode::SingleLock {
            return;
        }
        assert!(at.0 >= hold.advertised, "advertised position went back from {:#x} to {at}", hold.advertised);
        hold.advertised = at.0;
        let s = &self.slots[hold.index];
        s.lock.update_var(&hold.held, &s.inserting_at, at.0);
    }

    /// Releases the lock and resets its advertised position to 0 (`LWLockReleaseClearVar`).
    /// A holder that never advertised left the position at 0 (every release clears it), so
    /// it releases plainly and skips the wait-list lock that clearing takes.
    pub fn release(&self, hold: InsertionHold) {
        let s = &self.slots[hold.index];
        if hold.advertised == 0 {
            s.lock.release(hold.held);
        } else {
            s.lock.release_clear_var(hold.held, &s.inserting_at, 0);
        }
    }

    /// End of everything reserved so far, in usable bytes (`CurrBytePos`).
    pub fn reserved_bytepos(&self) -> u64 {
        let r = &*self.reserve;
        if self.mode == InsertMode::SingleLock {
            return r.cur.load(Ordering::Acquire);
        }
        r.lck.lock();
        let v = r.cur.load(Ordering::Relaxed);
        r.lck.unlock();
        v
    }

    /// Sets the reservation counters, in usable bytes (see [`crate::ptr`]): `cur` is where
    /// the next record goes, `prev` the start of the record before it (equal to `cur` for
    /// none). [`crate::Wal::open`] uses it to start a log at
    /// [`crate::WalConfig::start_segment`]. Only before any insertion.
    pub fn set_start(&self, cur: u64, prev: u64) {
        self.reserve.cur.store(cur, Ordering::Release);
        self.reserve.prev.store(prev, Ordering::Release);
    }

    /// The advertised position of lock `i` (0 = free or not advertised), for diagnostics and
    /// tests: it may change at once.
    ///
    /// # Panics
    /// If `i` is not below [`len`](Self::len).
    pub fn inserting_at(&self, i: usize) -> u64 {
        self.slots[i].inserting_at.load()
    }

    /// Waits until every insertion into WAL before `upto` is copied, and returns how far all
    /// insertions are finished, which is at least `upto` unless `upto` lies beyond the end of
    /// reserved WAL, in which case it is clamped to that end (`WaitXLogInsertionsToFinish`).
    ///
    /// Must not be called while holding `WALWriteLock` unless every insertion up to `upto` is
    /// known to be finished: an inserter we would wait for may need that lock.
    ///
    /// In single-lock mode there is nothing to wait for without taking the lock; callers use
    /// their own knowledge of finished insertions instead, and this returns the reserved end.
    pub fn wait_for_insertions(&self, upto: XLogRecPtr) -> XLogRecPtr {
        let reserved = bytepos_to_end_recptr(self.reserved_bytepos());
        if self.mode == InsertMode::SingleLock {
            return reserved;
        }
        let upto = upto.min(reserved);
        let mut finished = reserved;
        for s in self.slots.iter() {
            let mut seen = 0u64;
            loop {
                match s.lock.wait_for_var(&s.inserting_at, seen) {
                    VarWait::Free => {
                        seen = 0;
                        break;
                    }
                    VarWait::Changed(v) => {
                        seen = v;
                        if v >= upto.0 {
                            break;
                        }
                    }
                }
            }
            if seen != 0 && seen < finished.0 {
                finished = XLogRecPtr(seen);
            }
        }
        finished
    }
}
