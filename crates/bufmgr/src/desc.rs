//! Buffer descriptors (`BufferDesc`, `src/include/storage/buf_internals.h`) and the two ways
//! of guarding their header: a per-buffer spinlock around the fields (9.2-9.5) or one atomic
//! state word changed by compare-and-swap, with a lock bit for the rare multi-field updates
//! (9.6+, `PinBuffer` / `UnpinBuffer` / `LockBufHdr` in `bufmgr.c`).
//!
//! Both variants keep the fields packed in the 9.6 layout of [`BufferDesc`]'s state word
//! (refcount in bits 0-17, usage count in bits 18-21, flags above); the 9.2 variant simply never
//! touches the word without holding the spinlock, as 9.2 never touched `refcount`, `usage_count`
//! or `flags` without `buf_hdr_lock`.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::Ordering;

use lockstack_common::TrancheId;
use lockstack_lwlock::{LwLock, LwLockKind, SpinDelay, SpinLock};

use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Latch, spin_hint};
use crate::tag::BufferTag;

/// One pin in the refcount field (`BUF_REFCOUNT_ONE`).
pub(crate) const BUF_REFCOUNT_ONE: u32 = 1;
/// The refcount bits (`BUF_REFCOUNT_MASK`, 18 bits: up to 262 143 pins).
pub(crate) const BUF_REFCOUNT_MASK: u32 = (1 << 18) - 1;
/// One unit of usage count (`BUF_USAGECOUNT_ONE`).
pub(crate) const BUF_USAGECOUNT_ONE: u32 = 1 << 18;
/// The usage-count bits (`BUF_USAGECOUNT_MASK`).
pub(crate) const BUF_USAGECOUNT_MASK: u32 = 0xF << 18;
/// Shift of the usage count (`BUF_USAGECOUNT_SHIFT`).
pub(crate) const BUF_USAGECOUNT_SHIFT: u32 = 18;
/// Highest usage count (`BM_MAX_USAGE_COUNT`, 5 in every release).
pub const BM_MAX_USAGE_COUNT: u32 = 5;

/// The header lock bit of the 9.6 state word (`BM_LOCKED`).
pub(crate) const BM_LOCKED: u32 = 1 << 22;
/// The page differs from its on-disk copy (`BM_DIRTY`).
pub(crate) const BM_DIRTY: u32 = 1 << 23;
/// The page contents are valid (`BM_VALID`).
pub(crate) const BM_VALID: u32 = 1 << 24;
/// The tag is valid: a mapping-table entry points here (`BM_TAG_VALID`).
pub(crate) const BM_TAG_VALID: u32 = 1 << 25;
/// A read or write is under way (`BM_IO_IN_PROGRESS`).
pub(crate) const BM_IO_IN_PROGRESS: u32 = 1 << 26;
/// The last I/O failed (`BM_IO_ERROR`).
pub(crate) const BM_IO_ERROR: u32 = 1 << 27;
/// Dirtied again while being written (`BM_JUST_DIRTIED`): the write must not clear `BM_DIRTY`.
pub(crate) const BM_JUST_DIRTIED: u32 = 1 << 28;
/// A backend waits for the pin count to drop to 1 (`BM_PIN_COUNT_WAITER`).
pub(crate) const BM_PIN_COUNT_WAITER: u32 = 1 << 29;

/// How buffer headers are locked: chosen once per pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum HeaderKind {
    /// A spinlock per header around every pin, unpin and flag change (PostgreSQL 9.2-9.5,
    /// `buf_hdr_lock`).
    Spinlock,
    /// One atomic state word: pins and unpins are CAS loops, the lock bit `BM_LOCKED` is taken
    /// only for multi-field changes (PostgreSQL 9.6+). The default.
    #[default]
    Atomic,
}

impl HeaderKind {
    /// Both kinds, in report order.
    pub const ALL: [HeaderKind; 2] = [HeaderKind::Spinlock, HeaderKind::Atomic];

    /// Name on command lines and in reports: `spinlock`, `atomic`.
    pub fn name(self) -> &'static str {
        match self {
            HeaderKind::Spinlock => "spinlock",
            HeaderKind::Atomic => "atomic",
        }
    }
}

impl fmt::Display for HeaderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for HeaderKind {
    type Err = String;
    /// Parses `spinlock` (also `pg92`) or `atomic` (also `pg96`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "spinlock" | "pg92" => Ok(HeaderKind::Spinlock),
            "atomic" | "pg96" => Ok(HeaderKind::Atomic),
            _ => Err(format!("unknown buffer header kind '{s}' (valid: spinlock, atomic)")),
        }
    }
}

/// A snapshot of a header, read without the header lock (a hint, as `pg_buffercache` shows).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BufferState {
    /// Shared pin count (every backend's first pin counts once).
    pub refcount: u32,
    /// Clock-sweep usage count, 0..=5.
    pub usage_count: u32,
    /// `BM_DIRTY`.
    pub dirty: bool,
    /// `BM_VALID`.
    pub valid: bool,
    /// `BM_TAG_VALID`.
    pub tag_valid: bool,
    /// `BM_IO_IN_PROGRESS`.
    pub io_in_progress: bool,
    /// `BM_IO_ERROR`.
    pub io_error: bool,
    /// `BM_JUST_DIRTIED`.
    pub just_dirtied: bool,
    /// `BM_PIN_COUNT_WAITER`.
    pub pin_count_waiter: bool,
    /// `BM_LOCKED` (atomic variant only).
    pub locked: bool,
}

impl BufferState {
    pub(crate) fn from_word(w: u32) -> BufferState {
        BufferState {
            refcount: w & BUF_REFCOUNT_MASK,
            usage_count: (w & BUF_USAGECOUNT_MASK) >> BUF_USAGECOUNT_SHIFT,
            dirty: w & BM_DIRTY != 0,
            valid: w & BM_VALID != 0,
            tag_valid: w & BM_TAG_VALID != 0,
            io_in_progress: w & BM_IO_IN_PROGRESS != 0,
            io_error: w & BM_IO_ERROR != 0,
            just_dirtied: w & BM_JUST_DIRTIED != 0,
            pin_count_waiter: w & BM_PIN_COUNT_WAITER != 0,
            locked: w & BM_LOCKED != 0,
        }
    }
}

/// What a pin or unpin cost.
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct HeaderCost {
    /// The first attempt did not succeed (spinlock busy, `BM_LOCKED` seen, or CAS lost).
    pub(crate) contended: bool,
    /// Spin delays (yields or sleeps) spent waiting.
    pub(crate) delays: u32,
}

/// A shared buffer's descriptor (`BufferDesc`): tag, state word, header spinlock (9.2
/// variant), free-list link, the waiting cleanup-lock backend, and the content and I/O locks.
///
/// Readers outside the buffer manager only get snapshots ([`BufferDesc::state`],
/// [`BufferDesc::tag`]) through [`crate::BufferPool::descriptor`].
///
/// Laid out in order (`repr(C)`) so that what a buffer hit touches (the state word and header
/// spinlock for the pin, the tag, the content lock) shares the first 64-byte cache line, as
/// PostgreSQL pads `BufferDesc` to one line; the rarely used fields follow.
#[repr(C)]
pub struct BufferDesc {
    state: AtomicU32,
    hdr_lock: SpinLock,
    tag_rel: AtomicU32,
    buf_id: u32,
    tag_fork_block: AtomicU64,
    /// The content lock (`content_lock`, tranche `BufferContent`).
    pub(crate) content_lock: LwLock,
    /// Backend handle number of the cleanup-lock waiter (`wait_backend_pid`); valid while
    /// `BM_PIN_COUNT_WAITER` is set. Written under the header lock.
    pub(crate) wait_backend: AtomicU32,
    /// Next buffer on the free list, -1 = end, -2 = not on the list (`freeNext`); changed only
    /// under the free-list lock.
    pub(crate) free_next: AtomicI32,
    /// The I/O lock (`io_in_progress_lock`, tranche `BufferIO`): held exclusively by the backend
    /// doing a read or write; others wait by taking it shared.
    pub(crate) io_lock: LwLock,
    /// Where the cleanup-lock waiter sleeps (its `ProcWaitForSignal`).
    pub(crate) pin_latch: Latch,
}

impl fmt::Debug for BufferDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferDesc")
            .field("buf_id", &self.buf_id)
            .field("tag", &self.tag())
            .field("state", &self.state())
            .finish()
    }
}

/// `free_next` value: end of the free list (`FREENEXT_END_OF_LIST`).
pub(crate) const FREENEXT_END_OF_LIST: i32 = -1;
/// `free_next` value: not on the free list (`FREENEXT_NOT_IN_LIST`).
pub(crate) const FREENEXT_NOT_IN_LIST: i32 = -2;

impl BufferDesc {
    pub(crate) fn new(buf_id: u32, lwlock: LwLockKind) -> BufferDesc {
        BufferDesc {
            state: AtomicU32::new(0),
            hdr_lock: SpinLock::new(),
            tag_rel: AtomicU32::new(0),
            tag_fork_block: AtomicU64::new(u64::from(u32::MAX)),
            buf_id,
            wait_backend: AtomicU32::new(u32::MAX),
            free_next: AtomicI32::new(FREENEXT_NOT_IN_LIST),
            content_lock: LwLock::new(lwlock, TrancheId::BUFFER_CONTENT, buf_id),
            io_lock: LwLock::new(lwlock, TrancheId::BUFFER_IO, buf_id),
            pin_latch: Latch::new(),
        }
    }

    /// The buffer's index in the pool, from 0 (`buf_id`).
    pub fn buf_id(&self) -> u32 {
        self.buf_id
    }

    /// A lock-free snapshot of the state word.
    pub fn state(&self) -> BufferState {
        BufferState::from_word(self.state.load(Ordering::Relaxed))
    }

    /// The tag, if `BM_TAG_VALID` is set. Stable only while the caller holds a pin on the
    /// buffer; otherwise a hint.
    pub fn tag(&self) -> Option<BufferTag> {
        if self.state.load(Ordering::Acquire) & BM_TAG_VALID == 0 {
            return None;
        }
        Some(self.raw_tag())
    }

    /// The tag fields, whatever `BM_TAG_VALID` says.
    #[inline]
    pub(crate) fn raw_tag(&self) -> BufferTag {
        BufferTag::from_parts(
            self.tag_rel.load(Ordering::Relaxed),
            self.tag_fork_block.load(Ordering::Relaxed),
        )
    }

    /// Stores a new tag; the caller holds the header lock, with refcount 1 (its own pin).
    pub(crate) fn set_tag(&self, tag: BufferTag) {
        self.tag_rel.store(tag.rel.0, Ordering::Relaxed);
        self.tag_fork_block.store(tag.fork_block(), Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn load_state(&self) -> u32 {
        self.state.load(Ordering::Acquire)
    }

    /// Takes the header lock (`LockBufHdr`) and returns the state word without the lock bit.
    #[inline]
    pub(crate) fn lock_header(&self, kind: HeaderKind) -> (u32, HeaderCost) {
        match kind {
            HeaderKind::Spinlock => {
                let mut cost = HeaderCost::default();
                if !self.hdr_lock.try_lock() {
                    cost.contended = true;
                    cost.delays = self.hdr_lock.lock();
                }
                (self.state.load(Ordering::Relaxed), cost)
            }
            HeaderKind::Atomic => {
                let mut cost = HeaderCost::default();
                let mut delay = SpinDelay::new();
                loop {
                    let old = self.state.fetch_or(BM_LOCKED, Ordering::Acquire);
                    if old & BM_LOCKED == 0 {
                        cost.delays = delay.delays();
                        return (old, cost);
                    }
                    cost.contended = true;
                    while self.state.load(Ordering::Relaxed) & BM_LOCKED != 0 {
                        delay.spin();
                    }
                }
            }
        }
    }

    /// Releases the header lock, storing `new` (`UnlockBufHdr`); `new` must not contain
    /// `BM_LOCKED`.
    #[inline]
    pub(crate) fn unlock_header(&self, kind: HeaderKind, new: u32) {
        debug_assert_eq!(new & BM_LOCKED, 0);
        match kind {
            HeaderKind::Spinlock => {
                self.state.store(new, Ordering::Relaxed);
                self.hdr_lock.unlock();
            }
            HeaderKind::Atomic => self.state.store(new, Ordering::Release),
        }
    }

    /// Waits until `BM_LOCKED` is clear and returns that state (`WaitBufHdrUnlocked`).
    #[inline]
    fn wait_unlocked(&self, delays: &mut SpinDelay) -> u32 {
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & BM_LOCKED == 0 {
                return s;
            }
            if delays.delays() == 0 {
                spin_hint();
            }
            delays.spin();
        }
    }

    /// Runs `f` on the state word atomically with respect to the header lock: under the spinlock
    /// (9.2), or as a CAS loop that never overwrites a locked word (9.6). `f` returns the new
    /// word, or `None` to leave it unchanged. Returns (old word, cost).
    #[inline]
    pub(crate) fn update_state(&self, kind: HeaderKind, f: impl Fn(u32) -> Option<u32>) -> (u32, HeaderCost) {
        match kind {
            HeaderKind::Spinlock => {
                let (old, cost) = self.lock_header(kind);
                let new = f(old).unwrap_or(old);
                self.unlock_header(kind, new);
                (old, cost)
            }
            HeaderKind::Atomic => {
                let mut cost = HeaderCost::default();
                let mut delay = SpinDelay::new();
                let mut old = self.state.load(Ordering::Relaxed);
                loop {
                    if old & BM_LOCKED != 0 {
                        cost.contended = true;
                        old = self.wait_unlocked(&mut delay);
                    }
                    let Some(new) = f(old) else {
                        cost.delays = delay.delays();
                        return (old, cost);
                    };
                    match self.state.compare_exchange(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                        Ok(_) => {
                            cost.delays = delay.delays();
                            return (old, cost);
                        }
                        Err(cur) => {
                            cost.contended = true;
                            old = cur;
                        }
                    }
                }
            }
        }
    }

    /// Adds one shared pin and bumps the usage count (capped at [`BM_MAX_USAGE_COUNT`])
    /// (`PinBuffer`, default strategy). Returns the state before the pin.
    #[inline]
    pub(crate) fn pin(&self, kind: HeaderKind) -> (u32, HeaderCost) {
        self.update_state(kind, |s| {
            let mut n = s + BUF_REFCOUNT_ONE;
            if (s & BUF_USAGECOUNT_MASK) < BM_MAX_USAGE_COUNT << BUF_USAGECOUNT_SHIFT {
                n += BUF_USAGECOUNT_ONE;
            }
            Some(n)
        })
    }

    /// Drops one shared pin (`UnpinBuffer`); when that leaves only the cleanup-lock waiter's own
    /// pin, clears `BM_PIN_COUNT_WAITER` and wakes the waiter (`WakePinCountWaiter`).
    #[inline]
    pub(crate) fn unpin(&self, kind: HeaderKind) -> HeaderCost {
        match kind {
            HeaderKind::Spinlock => {
                let (s, cost) = self.lock_header(kind);
                debug_assert!(s & BUF_REFCOUNT_MASK > 0, "unpin of an unpinned buffer");
                let s = s - BUF_REFCOUNT_ONE;
                if s & BM_PIN_COUNT_WAITER != 0 && s & BUF_REFCOUNT_MASK == 1 {
                    self.unlock_header(kind, s & !BM_PIN_COUNT_WAITER);
                    self.pin_latch.set();
                } else {
                    self.unlock_header(kind, s);
                }
                cost
            }
            HeaderKind::Atomic => {
                let (old, mut cost) = self.update_state(kind, |s| {
                    debug_assert!(s & BUF_REFCOUNT_MASK > 0, "unpin of an unpinned buffer");
                    Some(s - BUF_REFCOUNT_ONE)
                });
                if old & BM_PIN_COUNT_WAITER != 0 {
                    let (s, c2) = self.lock_header(kind);
                    cost.delays += c2.delays;
                    if s & BM_PIN_COUNT_WAITER != 0 && s & BUF_REFCOUNT_MASK == 1 {
                        self.unlock_header(kind, s & !BM_PIN_COUNT_WAITER);
                        self.pin_latch.set();
                    } else {
                        self.unlock_header(kind, s);
                    }
                }
                cost
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod layout_tests {
    use super::BufferDesc;
    use std::mem::{offset_of, size_of};

    /// A hit pins (state word, or header spinlock plus state word), locks the content lock and
    /// may compare the tag: all of that sits in the descriptor's first cache line.
    #[test]
    fn hit_path_fields_share_the_first_cache_line() {
        let end_of = |off: usize, size: usize| off + size;
        assert!(end_of(offset_of!(BufferDesc, state), 4) <= 64);
        assert!(end_of(offset_of!(BufferDesc, hdr_lock), 1) <= 64);
        assert!(end_of(offset_of!(BufferDesc, tag_fork_block), 8) <= 64);
        let cl = end_of(offset_of!(BufferDesc, content_lock), size_of::<lockstack_lwlock::LwLock>());
        assert!(cl <= 64, "the content lock ends at byte {cl}");
    }
}
