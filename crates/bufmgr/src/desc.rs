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

use lockstack_common::TrancheId;
use lockstack_lwlock::{LwLock, LwLockKind};

use crate::slock::{SLock, SpinDelayStatus};
use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Latch, Ordering};
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
///
/// Coherence cost of one pin+unpin pair of a buffer whose cache line another core wrote last
/// (the hot-buffer case), counting line transfers and ownership upgrades:
///
/// | kind | pin | unpin | per pair |
/// |---|---|---|---|
/// | `Spinlock` | `xchg` (1), then the state word and the unlock in the owned line | same (1) | 2, more when the other core's `TAS` steals the line inside the critical section |
/// | `Atomic` | load (1) + CAS (1 upgrade) | load (1) + CAS (1) | 4, plus retries when the other core slips in between |
/// | `AtomicSub` | load (1) + CAS (1) | `fetch_sub` (1) | 3 |
/// | `AtomicAdd` | `fetch_add` (1) | `fetch_sub` (1) | 2, no retries, no waits unless `BM_LOCKED` is set |
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum HeaderKind {
    /// A spinlock per header around every pin, unpin and flag change (PostgreSQL 9.2-9.5,
    /// `buf_hdr_lock` taken with `LockBufHdr` = `S_LOCK`, see the `slock` module).
    Spinlock,
    /// One atomic state word: pins and unpins are read-then-CAS loops that wait while
    /// `BM_LOCKED` is set; the header lock (`BM_LOCKED`, `LockBufHdr`) is taken only for
    /// multi-field changes and released with a plain store of the whole word (PostgreSQL
    /// 9.6-18, `PinBuffer` / `UnpinBuffer` / `UnlockBufHdr`). The default.
    #[default]
    Atomic,
    /// The 9.6 state word with PostgreSQL 19's unpin: an unpin is one `fetch_sub` that may
    /// run while another backend holds `BM_LOCKED`, so the lock holder releases by applying
    /// its changes as a delta (`UnlockBufHdr` = `fetch_sub(BM_LOCKED)`, `UnlockBufHdrExt`),
    /// never by storing a whole word. Pins stay read-then-CAS loops that never add a pin to a
    /// locked header. Follows the PostgreSQL 19 development branch: commits "bufmgr: Allow
    /// some buffer state modifications while holding header lock" and 5310fac6e0f "bufmgr: Use
    /// atomic sub for unpinning buffers" (2025).
    AtomicSub,
    /// [`AtomicSub`](Self::AtomicSub) with pins by `fetch_add` too (no PostgreSQL release
    /// does this): a pin adds one and only then looks at the old word; if `BM_LOCKED` was set
    /// it takes its pin back with `fetch_sub` (allowed under the header lock, as any unpin),
    /// waits for the unlock and retries. A header-lock holder can therefore see a pin that is
    /// about to be taken back: its refcount checks (victim refcount 0, re-tag and cleanup
    /// refcount 1) can only fail spuriously, never pass wrongly, and the delta release keeps
    /// the count exact. The usage count, which must stay capped at 5, is raised by a separate
    /// CAS only when below the cap.
    AtomicAdd,
}

impl HeaderKind {
    /// The two designs seed 004 compares (9.2 and 9.6), in report order.
    pub const ALL: [HeaderKind; 2] = [HeaderKind::Spinlock, HeaderKind::Atomic];

    /// Every design, in report order: the two of [`ALL`](Self::ALL), then the later ones.
    pub const EVERY: [HeaderKind; 4] =
        [HeaderKind::Spinlock, HeaderKind::Atomic, HeaderKind::AtomicSub, HeaderKind::AtomicAdd];

    /// Name on command lines and in reports: `spinlock`, `atomic`, `atomic-sub`, `atomic-add`.
    pub fn name(self) -> &'static str {
        match self {
            HeaderKind::Spinlock => "spinlock",
            HeaderKind::Atomic => "atomic",
            HeaderKind::AtomicSub => "atomic-sub",
            HeaderKind::AtomicAdd => "atomic-add",
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
    /// Parses `spinlock` (also `pg92`), `atomic` (also `pg96`), `atomic-sub` (also `pg19`) or
    /// `atomic-add`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "spinlock" | "pg92" => Ok(HeaderKind::Spinlock),
            "atomic" | "pg96" => Ok(HeaderKind::Atomic),
            "atomic-sub" | "pg19" => Ok(HeaderKind::AtomicSub),
            "atomic-add" => Ok(HeaderKind::AtomicAdd),
            _ => Err(format!(
                "unknown buffer header kind '{s}' (valid: spinlock, atomic, atomic-sub, atomic-add)"
            )),
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
    /// Sleeps of the `s_lock` back-off while waiting (PostgreSQL's `spindelay`).
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
    hdr_lock: SLock,
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
            hdr_lock: SLock::new(),
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

    /// The address of the state word (the descriptor's first line, which a simulation names
    /// `"buffer <id> state"`).
    pub(crate) fn state_addr(&self) -> *const u8 {
        &self.state as *const AtomicU32 as *const u8
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
    ///
    /// With [`HeaderKind::AtomicSub`] and [`HeaderKind::AtomicAdd`] the refcount may still go
    /// down while the lock is held (unpins, and `AtomicAdd`'s taken-back pins), never up for
    /// good: a refcount of 0 or 1 (the caller's own pin) seen here stays exact.
    #[inline]
    pub(crate) fn lock_header(&self, kind: HeaderKind) -> (u32, HeaderCost) {
        match kind {
            HeaderKind::Spinlock => {
                let (contended, delays) = self.hdr_lock.lock();
                (self.state.load(Ordering::Relaxed), HeaderCost { contended, delays })
            }
            HeaderKind::Atomic | HeaderKind::AtomicSub | HeaderKind::AtomicAdd => {
                // 9.6's LockBufHdr: an atomic OR of the lock bit per try, s_lock back-off.
                let mut cost = HeaderCost::default();
                let mut delay = SpinDelayStatus::new();
                loop {
                    let old = self.state.fetch_or(BM_LOCKED, Ordering::Acquire);
                    if old & BM_LOCKED == 0 {
                        cost.delays = delay.finish();
                        return (old, cost);
                    }
                    cost.contended = true;
                    delay.perform();
                }
            }
        }
    }

    /// Releases the header lock taken by [`lock_header`](Self::lock_header), which returned
    /// `locked`, leaving the word at `new` (`UnlockBufHdr`); `new` must not contain
    /// `BM_LOCKED`. Returns the word as left.
    ///
    /// `Spinlock` and `Atomic` store `new` whole (nothing else changes a locked header).
    /// `AtomicSub` and `AtomicAdd` add `new - locked` instead (PostgreSQL 19's
    /// `UnlockBufHdrExt`; `UnlockBufHdr` when nothing changed), so that unpins done meanwhile
    /// are kept: the caller's changes are applied as a delta on top of them.
    #[inline]
    pub(crate) fn unlock_header(&self, kind: HeaderKind, locked: u32, new: u32) -> u32 {
        debug_assert_eq!(new & BM_LOCKED, 0);
        debug_assert_eq!(locked & BM_LOCKED, 0);
        match kind {
            HeaderKind::Spinlock => {
                self.state.store(new, Ordering::Relaxed);
                self.hdr_lock.unlock();
                new
            }
            HeaderKind::Atomic => {
                self.state.store(new, Ordering::Release);
                new
            }
            HeaderKind::AtomicSub | HeaderKind::AtomicAdd => {
                // The word is `locked | BM_LOCKED` minus k unpins (plus pins about to be taken
                // back); adding this delta leaves `new` minus the same, with BM_LOCKED clear.
                // The refcount field cannot borrow: `new` keeps every pin `locked` counted.
                let delta = new.wrapping_sub(locked).wrapping_sub(BM_LOCKED);
                self.state.fetch_add(delta, Ordering::Release).wrapping_add(delta)
            }
        }
    }

    /// Waits until `BM_LOCKED` is clear (`WaitBufHdrUnlocked`, with its own `s_lock` back-off);
    /// returns that state and the number of sleeps.
    #[cold]
    fn wait_unlocked(&self) -> (u32, u32) {
        let mut delay = SpinDelayStatus::new();
        loop {
            let s = self.state.load(Ordering::Relaxed);
            if s & BM_LOCKED == 0 {
                return (s, delay.finish());
            }
            delay.perform();
        }
    }

    /// Runs `f` on the state word atomically with respect to the header lock: under the spinlock
    /// (9.2), or as a CAS loop that never changes a locked word (9.6+). `f` returns the new
    /// word, or `None` to leave it unchanged. Returns (old word, cost).
    #[inline]
    pub(crate) fn update_state(&self, kind: HeaderKind, f: impl Fn(u32) -> Option<u32>) -> (u32, HeaderCost) {
        match kind {
            HeaderKind::Spinlock => {
                let (old, cost) = self.lock_header(kind);
                let new = f(old).unwrap_or(old);
                self.unlock_header(kind, old, new);
                (old, cost)
            }
            HeaderKind::Atomic | HeaderKind::AtomicSub | HeaderKind::AtomicAdd => {
                let old = self.state.load(Ordering::Relaxed);
                self.cas_loop(old, f)
            }
        }
    }

    /// The 9.6 CAS loop from a first guess `old` of the word: waits while `BM_LOCKED` is set
    /// (`WaitBufHdrUnlocked`), and retries from the value a failed CAS returns.
    #[inline]
    fn cas_loop(&self, mut old: u32, f: impl Fn(u32) -> Option<u32>) -> (u32, HeaderCost) {
        let mut cost = HeaderCost::default();
        loop {
            if old & BM_LOCKED != 0 {
                cost.contended = true;
                let (s, delays) = self.wait_unlocked();
                cost.delays += delays;
                old = s;
            }
            let Some(new) = f(old) else { return (old, cost) };
            match self.state.compare_exchange(old, new, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return (old, cost),
                Err(cur) => {
                    cost.contended = true;
                    old = cur;
                }
            }
        }
    }

    /// Adds one shared pin and bumps the usage count (capped at [`BM_MAX_USAGE_COUNT`])
    /// (`PinBuffer`, default strategy). Returns the state before the pin.
    #[inline]
    pub(crate) fn pin(&self, kind: HeaderKind) -> (u32, HeaderCost) {
        let bump = |s: u32| {
            let mut n = s + BUF_REFCOUNT_ONE;
            if (s & BUF_USAGECOUNT_MASK) < BM_MAX_USAGE_COUNT << BUF_USAGECOUNT_SHIFT {
                n += BUF_USAGECOUNT_ONE;
            }
            Some(n)
        };
        match kind {
            HeaderKind::Spinlock | HeaderKind::Atomic | HeaderKind::AtomicSub => {
                self.update_state(kind, bump)
            }
            HeaderKind::AtomicAdd => self.pin_add(),
        }
    }

    /// [`HeaderKind::AtomicAdd`]'s pin: `fetch_add`, taken back while `BM_LOCKED` is set.
    #[inline]
    fn pin_add(&self) -> (u32, HeaderCost) {
        let mut cost = HeaderCost::default();
        loop {
            let old = self.state.fetch_add(BUF_REFCOUNT_ONE, Ordering::AcqRel);
            debug_assert!(old & BUF_REFCOUNT_MASK < BUF_REFCOUNT_MASK, "refcount overflow");
            if old & BM_LOCKED == 0 {
                if old & BUF_USAGECOUNT_MASK < BM_MAX_USAGE_COUNT << BUF_USAGECOUNT_SHIFT {
                    // Rare on a hot buffer (its usage count sits at the cap). A CAS, as the
                    // cap must hold; it waits out a header lock like any 9.6 flag change.
                    let (_, c) = self.cas_loop(old + BUF_REFCOUNT_ONE, |s| {
                        (s & BUF_USAGECOUNT_MASK < BM_MAX_USAGE_COUNT << BUF_USAGECOUNT_SHIFT)
                            .then_some(s + BUF_USAGECOUNT_ONE)
                    });
                    cost.delays += c.delays;
                }
                return (old, cost);
            }
            // A header-lock holder may be judging the refcount: take the pin back (an unpin,
            // which may run under the lock), wait for the unlock, try again.
            cost.contended = true;
            cost.delays += self.unpin_sub(HeaderKind::AtomicAdd).delays;
            cost.delays += self.wait_unlocked().1;
        }
    }

    /// `AtomicSub` / `AtomicAdd` unpin: one `fetch_sub`, then the waiter check.
    #[inline]
    fn unpin_sub(&self, kind: HeaderKind) -> HeaderCost {
        let old = self.state.fetch_sub(BUF_REFCOUNT_ONE, Ordering::Release);
        debug_assert!(old & BUF_REFCOUNT_MASK > 0, "unpin of an unpinned buffer");
        if old & BM_PIN_COUNT_WAITER != 0 { self.wake_pin_count_waiter(kind) } else { HeaderCost::default() }
    }

    /// `WakePinCountWaiter`: under the header lock, if the cleanup-lock waiter's pin is the
    /// only one left, clears `BM_PIN_COUNT_WAITER` and wakes it.
    #[cold]
    fn wake_pin_count_waiter(&self, kind: HeaderKind) -> HeaderCost {
        let (s, cost) = self.lock_header(kind);
        if s & BM_PIN_COUNT_WAITER != 0 && s & BUF_REFCOUNT_MASK == 1 {
            self.unlock_header(kind, s, s & !BM_PIN_COUNT_WAITER);
            self.pin_latch.set();
        } else {
            self.unlock_header(kind, s, s);
        }
        cost
    }

    /// Drops one shared pin (`UnpinBuffer`); when that leaves only the cleanup-lock waiter's own
    /// pin, clears `BM_PIN_COUNT_WAITER` and wakes the waiter (`WakePinCountWaiter`).
    #[inline]
    pub(crate) fn unpin(&self, kind: HeaderKind) -> HeaderCost {
        match kind {
            HeaderKind::Spinlock => {
                let (s, cost) = self.lock_header(kind);
                debug_assert!(s & BUF_REFCOUNT_MASK > 0, "unpin of an unpinned buffer");
                let n = s - BUF_REFCOUNT_ONE;
                if n & BM_PIN_COUNT_WAITER != 0 && n & BUF_REFCOUNT_MASK == 1 {
                    self.unlock_header(kind, s, n & !BM_PIN_COUNT_WAITER);
                    self.pin_latch.set();
                } else {
                    self.unlock_header(kind, s, n);
                }
                cost
            }
            HeaderKind::Atomic => {
                let (old, mut cost) = self.update_state(kind, |s| {
                    debug_assert!(s & BUF_REFCOUNT_MASK > 0, "unpin of an unpinned buffer");
                    Some(s - BUF_REFCOUNT_ONE)
                });
                if old & BM_PIN_COUNT_WAITER != 0 {
                    cost.delays += self.wake_pin_count_waiter(kind).delays;
                }
                cost
            }
            HeaderKind::AtomicSub | HeaderKind::AtomicAdd => self.unpin_sub(kind),
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
