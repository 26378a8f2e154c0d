//! Victim selection (`freelist.c`): a free list of never-used buffers, then the clock sweep
//! ("GCLOCK": a hand walks the buffers, decrementing usage counts, and takes the first unpinned
//! buffer whose count is 0).
//!
//! * [`VictimKind::FreelistLock`] (9.2-9.4): everything, including advancing the hand, under one
//!   `BufFreelistLock` LWLock taken exclusively for every allocation.
//! * [`VictimKind::AtomicClock`] (9.5+): the hand is an atomic counter advanced by `fetch_add`
//!   (`ClockSweepTick`); the free list is popped under the `buffer_strategy_lock` spinlock, which
//!   is released before any buffer header is examined.

use std::fmt;
use std::str::FromStr;

use crossbeam_utils::CachePadded;
use lockstack_common::TrancheId;
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode, SpinLock};

use crate::desc::{
    BUF_REFCOUNT_MASK, BUF_REFCOUNT_ONE, BUF_USAGECOUNT_MASK, BUF_USAGECOUNT_ONE, BufferDesc,
    FREENEXT_END_OF_LIST, FREENEXT_NOT_IN_LIST, HeaderKind,
};
use crate::desc_array::DescArray;
use crate::sync::{AtomicI32, AtomicU32, AtomicU64, Ordering, yield_now};

/// Scans of every buffer a victim search makes, after the clock hand has passed `nbuffers`
/// pinned buffers in a row, before it reports every buffer pinned (see `Strategy::recheck`).
/// One under loom, whose model checks explore every interleaving of each scan.
#[cfg(not(loom))]
pub const ALL_PINNED_RECHECKS: u32 = 8;
/// Scans of every buffer a victim search makes before it reports every buffer pinned: one
/// under loom (see the non-loom definition).
#[cfg(loom)]
pub const ALL_PINNED_RECHECKS: u32 = 1;

/// How victims are chosen: chosen once per pool.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum VictimKind {
    /// Free list and clock hand under one `BufFreelistLock` LWLock (PostgreSQL 9.2-9.4).
    FreelistLock,
    /// Atomic clock hand, free list under a spinlock (PostgreSQL 9.5+). The default.
    #[default]
    AtomicClock,
}

impl VictimKind {
    /// Both kinds, in report order.
    pub const ALL: [VictimKind; 2] = [VictimKind::FreelistLock, VictimKind::AtomicClock];

    /// Name on command lines and in reports: `freelist-lock`, `atomic-clock`.
    pub fn name(self) -> &'static str {
        match self {
            VictimKind::FreelistLock => "freelist-lock",
            VictimKind::AtomicClock => "atomic-clock",
        }
    }
}

impl fmt::Display for VictimKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VictimKind {
    type Err = String;
    /// Parses `freelist-lock` (also `pg92`) or `atomic-clock` (also `pg95`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "freelist-lock" | "pg92" => Ok(VictimKind::FreelistLock),
            "atomic-clock" | "pg95" => Ok(VictimKind::AtomicClock),
            _ => Err(format!("unknown victim strategy '{s}' (valid: freelist-lock, atomic-clock)")),
        }
    }
}

/// The shared strategy state (`BufferStrategyControl`).
pub(crate) struct Strategy {
    kind: VictimKind,
    nbuffers: u32,
    /// `BufFreelistLock` (9.2 variant).
    freelist_lock: LwLock,
    /// `buffer_strategy_lock` (9.5 variant).
    strategy_lock: SpinLock,
    /// Head and tail of the free list (under the lock of the variant).
    first_free: CachePadded<AtomicI32>,
    last_free: AtomicI32,
    /// The clock hand. 9.2: in `0..nbuffers`, changed under `freelist_lock`. 9.5: only
    /// increases, taken modulo `nbuffers`, folded back by whoever wraps it.
    next_victim: CachePadded<AtomicU32>,
    complete_passes: AtomicU32,
    /// Allocations (`numBufferAllocs`); plain `std` atomic, not part of any protocol.
    num_allocs: AtomicU64,
}

impl fmt::Debug for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Strategy({})", self.kind)
    }
}

/// A victim's outcome.
pub(crate) enum Victim {
    /// Buffer `id`, pinned (shared refcount + 1, usage unchanged: `PinBuffer_Locked`); `state`
    /// is the word as it was under the header lock, before the pin.
    Pinned { id: u32, state: u32 },
    /// Every buffer is pinned.
    AllPinned,
}

impl Strategy {
    pub(crate) fn new(kind: VictimKind, nbuffers: u32, lwlock: LwLockKind) -> Strategy {
        Strategy {
            kind,
            nbuffers,
            freelist_lock: LwLock::new(lwlock, TrancheId::BUF_FREELIST, 0),
            strategy_lock: SpinLock::new(),
            first_free: CachePadded::new(AtomicI32::new(FREENEXT_END_OF_LIST)),
            last_free: AtomicI32::new(FREENEXT_END_OF_LIST),
            next_victim: CachePadded::new(AtomicU32::new(0)),
            complete_passes: AtomicU32::new(0),
            num_allocs: AtomicU64::new(0),
        }
    }

    /// Names the strategy's shared words for a simulation (`BufFreelistLock`, the free-list
    /// head, the clock hand); called once the strategy is at its final address.
    pub(crate) fn name_lines(&self) {
        use lockstack_common::sync::hook::name_line;
        self.freelist_lock.name_line_as(|| "BufFreelistLock".to_string());
        name_line(&*self.first_free as *const AtomicI32 as *const u8, || {
            "StrategyControl firstFreeBuffer".to_string()
        });
        name_line(&*self.next_victim as *const AtomicU32 as *const u8, || {
            "StrategyControl nextVictimBuffer".to_string()
        });
    }

    /// Victim requests served so far (`numBufferAllocs`, summed since creation).
    pub(crate) fn allocs(&self) -> u64 {
        self.num_allocs.load(Ordering::Relaxed)
    }

    /// Full passes of the clock hand so far (`completePasses`).
    pub(crate) fn complete_passes(&self) -> u32 {
        self.complete_passes.load(Ordering::Relaxed)
    }

    fn with_list_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        match self.kind {
            VictimKind::FreelistLock => {
                let h = self.freelist_lock.acquire(LwLockMode::Exclusive);
                let r = f();
                self.freelist_lock.release(h);
                r
            }
            VictimKind::AtomicClock => {
                self.strategy_lock.lock();
                let r = f();
                self.strategy_lock.unlock();
                r
            }
        }
    }

    /// Appends buffer `id` to the free list (`StrategyFreeBuffer`) unless it is on it.
    pub(crate) fn free_buffer(&self, descs: &DescArray, id: u32) {
        self.with_list_lock(|| self.push_locked(descs, id));
    }

    fn push_locked(&self, descs: &DescArray, id: u32) {
        let d = &descs[id as usize];
        if d.free_next.load(Ordering::Relaxed) != FREENEXT_NOT_IN_LIST {
            return;
        }
        d.free_next.store(FREENEXT_END_OF_LIST, Ordering::Relaxed);
        let last = self.last_free.load(Ordering::Relaxed);
        if last < 0 {
            self.first_free.store(id as i32, Ordering::Relaxed);
        } else {
            descs[last as usize].free_next.store(id as i32, Ordering::Relaxed);
        }
        self.last_free.store(id as i32, Ordering::Relaxed);
    }

    fn pop_locked(&self, descs: &DescArray) -> Option<u32> {
        let first = self.first_free.load(Ordering::Relaxed);
        if first < 0 {
            return None;
        }
        let d = &descs[first as usize];
        let next = d.free_next.load(Ordering::Relaxed);
        self.first_free.store(next, Ordering::Relaxed);
        if next < 0 {
            self.last_free.store(FREENEXT_END_OF_LIST, Ordering::Relaxed);
        }
        d.free_next.store(FREENEXT_NOT_IN_LIST, Ordering::Relaxed);
        Some(first as u32)
    }

    /// Length of the free list (for invariant checks; the caller makes sure nothing changes it).
    pub(crate) fn free_list(&self, descs: &DescArray) -> Vec<u32> {
        self.with_list_lock(|| {
            let mut v = Vec::new();
            let mut cur = self.first_free.load(Ordering::Relaxed);
            while cur >= 0 && v.len() <= descs.len() {
                v.push(cur as u32);
                cur = descs[cur as usize].free_next.load(Ordering::Relaxed);
            }
            v
        })
    }

    /// Header check of a candidate: with the header locked, takes it if unpinned with usage 0
    /// (pinning it); with `sweep`, decrements a positive usage count. Returns
    /// `(Some(state) if taken, was_pinned, decremented)`.
    #[inline]
    fn try_take(d: &BufferDesc, header: HeaderKind, sweep: bool) -> (Option<u32>, bool, bool) {
        let (s, _) = d.lock_header(header);
        if s & BUF_REFCOUNT_MASK != 0 {
            d.unlock_header(header, s, s);
            return (None, true, false);
        }
        if s & BUF_USAGECOUNT_MASK == 0 {
            d.unlock_header(header, s, s + BUF_REFCOUNT_ONE);
            return (Some(s), false, false);
        }
        if sweep {
            d.unlock_header(header, s, s - BUF_USAGECOUNT_ONE);
            return (None, false, true);
        }
        d.unlock_header(header, s, s);
        (None, false, false)
    }

    /// The 9.5 clock tick (`ClockSweepTick`): the hand's next position, folding the counter
    /// back into `0..nbuffers` when this call wrapped it.
    #[inline]
    fn tick(&self) -> u32 {
        let n = self.nbuffers;
        let raw = self.next_victim.fetch_add(1, Ordering::AcqRel);
        let victim = raw % n;
        if raw >= n && victim == 0 {
            // We wrapped: fold the counter back so it cannot overflow, counting the pass
            // under the strategy lock as 9.5 does (so `completePasses` and the hand agree).
            let mut expected = raw + 1;
            self.strategy_lock.lock();
            loop {
                match self.next_victim.compare_exchange(
                    expected,
                    expected % n,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        self.complete_passes.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(cur) => expected = cur,
                }
            }
            self.strategy_lock.unlock();
        }
        victim
    }

    /// Chooses and pins a victim (`StrategyGetBuffer`): never sleeps on a buffer. When the
    /// hand has passed `nbuffers` pinned buffers in a row without finding one it could
    /// decrement (where PostgreSQL raises "no unpinned buffers available"), it does not give
    /// up yet: it reports [`Victim::AllPinned`] only after [`ALL_PINNED_RECHECKS`] further
    /// scans ([`Self::recheck`]) also found every buffer pinned.
    pub(crate) fn get_victim(&self, descs: &DescArray, header: HeaderKind) -> Victim {
        self.num_allocs.fetch_add(1, Ordering::Relaxed);
        match self.sweep(descs, header) {
            Victim::AllPinned => self.recheck(descs, header),
            found => found,
        }
    }

    /// The bounded retry before [`Victim::AllPinned`]: up to [`ALL_PINNED_RECHECKS`] scans of
    /// every buffer in index order, each after yielding the CPU, taking the first unpinned
    /// buffer with usage count 0 and decrementing unpinned ones (a scan that met an unpinned
    /// buffer does not count against the bound: the next one takes it unless it is pinned
    /// again meanwhile).
    ///
    /// The hand's run of `nbuffers` pinned buffers does not show that every buffer was pinned
    /// at one instant: the backends that take victims pin the buffers at the hand, just ahead
    /// of the ticks a concurrent search gets, so with `k` backends each holding one brief pin
    /// in a pool of `k` buffers the hand can see `k` pinned buffers in a row while one is
    /// always free. A scan of its own, not by the shared hand, after giving the CPU to the
    /// holders, does not follow those pins around the clock. Made outside the free-list lock
    /// (9.2 variant), which the sweep released: the header lock is what takes a buffer.
    fn recheck(&self, descs: &DescArray, header: HeaderKind) -> Victim {
        let mut fruitless = 0;
        while fruitless < ALL_PINNED_RECHECKS {
            yield_now();
            let mut saw_unpinned = false;
            for id in 0..self.nbuffers {
                match Self::try_take(&descs[id as usize], header, true) {
                    (Some(state), _, _) => return Victim::Pinned { id, state },
                    (None, false, _) => saw_unpinned = true,
                    (None, true, _) => {}
                }
            }
            if !saw_unpinned {
                fruitless += 1;
            }
        }
        Victim::AllPinned
    }

    /// The clock sweep proper: the free list, then the hand until it finds a victim or has
    /// passed `nbuffers` pinned buffers in a row ([`Victim::AllPinned`]).
    fn sweep(&self, descs: &DescArray, header: HeaderKind) -> Victim {
        let n = self.nbuffers;
        match self.kind {
            VictimKind::FreelistLock => {
                let held = self.freelist_lock.acquire(LwLockMode::Exclusive);
                let r = 'found: {
                    while let Some(id) = self.pop_locked(descs) {
                        if let (Some(state), _, _) = Self::try_take(&descs[id as usize], header, false) {
                            break 'found Victim::Pinned { id, state };
                        }
                    }
                    let mut trycounter = n;
                    loop {
                        let id = self.next_victim.load(Ordering::Relaxed);
                        let next = if id + 1 >= n {
                            self.complete_passes.fetch_add(1, Ordering::Relaxed);
                            0
                        } else {
                            id + 1
                        };
                        self.next_victim.store(next, Ordering::Relaxed);
                        match Self::try_take(&descs[id as usize], header, true) {
                            (Some(state), _, _) => break 'found Victim::Pinned { id, state },
                            (None, _, true) => trycounter = n,
                            (None, true, _) => {
                                trycounter -= 1;
                                if trycounter == 0 {
                                    break 'found Victim::AllPinned;
                                }
                            }
                            (None, false, false) => {}
                        }
                    }
                };
                self.freelist_lock.release(held);
                r
            }
            VictimKind::AtomicClock => {
                // Unlocked peek first, as 9.5 does: most of the time the list is empty.
                while self.first_free.load(Ordering::Relaxed) >= 0 {
                    let Some(id) = self.with_list_lock(|| self.pop_locked(descs)) else { break };
                    if let (Some(state), _, _) = Self::try_take(&descs[id as usize], header, false) {
                        return Victim::Pinned { id, state };
                    }
                }
                let mut trycounter = n;
                loop {
                    let id = self.tick();
                    match Self::try_take(&descs[id as usize], header, true) {
                        (Some(state), _, _) => return Victim::Pinned { id, state },
                        (None, _, true) => trycounter = n,
                        (None, true, _) => {
                            trycounter -= 1;
                            if trycounter == 0 {
                                return Victim::AllPinned;
                            }
                        }
                        (None, false, false) => {}
                    }
                }
            }
        }
    }
}
