//! The PostgreSQL 9.5+ LWLock: one atomic state word, two-phase queueing, and (16+) O(1)
//! self-dequeue (`src/backend/storage/lmgr/lwlock.c`, PostgreSQL 16).
//!
//! State word layout (32 bits), as in PostgreSQL:
//!
//! | bits | meaning |
//! |---|---|
//! | 0..=23 | number of shared holders |
//! | 24 | held exclusively |
//! | 28 | `LOCKED`: the wait list is being changed (replaces 9.5's separate spinlock) |
//! | 29 | `RELEASE_OK`: a releaser may wake waiters (cleared while a woken batch has not run) |
//! | 30 | `HAS_WAITERS`: the wait list may be non-empty |
//!
//! Acquisition is a CAS loop on the word; a backend that fails queues itself (phase 2), then
//! tries once more (phase 3) before sleeping, so that a release between its first attempt and
//! its queueing cannot be missed. A woken waiter retries rather than being handed the lock.

use lockstack_common::sync::Ordering;
use lockstack_common::sync::hook;

use lockstack_common::{TrancheId, WaitEvent, WaitEventScope};

use crate::interface::{LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
use crate::spin::{SpinDelay, spin_then_attempt};
use crate::stats::{check_tranche, record_instance, with_tranche};
use crate::sync::{AtomicU32, Instant};
use crate::waiter::{
    NOT_WAITING, PENDING_WAKEUP, WAITING, WaitList, WaitMode, Waiter, WakeList, with_waiter,
};

const VAL_EXCLUSIVE: u32 = 1 << 24;
const SHARED_MASK: u32 = VAL_EXCLUSIVE - 1;
const LOCK_MASK: u32 = SHARED_MASK | VAL_EXCLUSIVE;
const FLAG_LOCKED: u32 = 1 << 28;
const FLAG_RELEASE_OK: u32 = 1 << 29;
const FLAG_HAS_WAITERS: u32 = 1 << 30;

/// The 9.5+ LWLock (see the module documentation). 32 bytes.
pub struct AtomicLwLock {
    state: AtomicU32,
    tranche: TrancheId,
    instance: u32,
    waiters: WaitList,
}

// The wait list holds raw pointers to waiters of other threads; every access to it happens under
// the LOCKED bit and follows the lifetime invariant of `waiter.rs`.
// SAFETY: all fields are atomics or plain ids; the pointers in `waiters` are only followed under
// the list lock, while their owners are blocked.
unsafe impl Send for AtomicLwLock {}
// SAFETY: as above; shared access is the whole point of the type and is synchronised by `state`.
unsafe impl Sync for AtomicLwLock {}

/// Outcome of a time-stamped sleep, for statistics.
struct Slept {
    ns: u64,
}

impl AtomicLwLock {
    /// The address of the lock's state word (the line a simulation names; see
    /// [`LwLock::name_line`](crate::LwLock::name_line)).
    pub fn word_addr(&self) -> *const u8 {
        &self.state as *const AtomicU32 as *const u8
    }

    /// Attempts the lock once (`LWLockAttemptLock`); true if acquired.
    #[inline]
    fn attempt_lock(&self, mode: LwLockMode) -> bool {
        // An exclusive locker can only succeed on an idle lock (just RELEASE_OK set): try that
        // first, saving the load before the CAS. Shared lockers often find other readers in,
        // where such a guess fails and costs an extra cache-line transfer, so they load first.
        let mut old = if mode == LwLockMode::Exclusive {
            let idle = FLAG_RELEASE_OK;
            match self.state.compare_exchange_weak(
                idle,
                idle + VAL_EXCLUSIVE,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(cur) => cur,
            }
        } else {
            self.state.load(Ordering::Relaxed)
        };
        loop {
            let desired = match mode {
                LwLockMode::Exclusive => {
                    if old & LOCK_MASK != 0 {
                        return false;
                    }
                    old + VAL_EXCLUSIVE
                }
                LwLockMode::Shared => {
                    if old & VAL_EXCLUSIVE != 0 {
                        return false;
                    }
                    old + 1
                }
            };
            match self.state.compare_exchange_weak(old, desired, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(cur) => old = cur,
            }
        }
    }

    /// Takes the wait-list lock (the `LOCKED` bit), spinning read-only while it is busy.
    /// Returns the number of spin delays.
    fn wait_list_lock(&self) -> u32 {
        let mut delay = SpinDelay::new();
        loop {
            let old = self.state.fetch_or(FLAG_LOCKED, Ordering::Acquire);
            if old & FLAG_LOCKED == 0 {
                return delay.delays();
            }
            // The wait-list lock is the LWLock's own: a simulated machine books it under the
            // tranche (PostgreSQL publishes no wait event for it).
            let _class = hook::wait_class(self.tranche.name());
            while self.state.load(Ordering::Relaxed) & FLAG_LOCKED != 0 {
                delay.spin();
            }
        }
    }

    fn wait_list_unlock(&self) {
        let old = self.state.fetch_and(!FLAG_LOCKED, Ordering::Release);
        debug_assert!(old & FLAG_LOCKED != 0);
    }

    /// Phase 2: put `w` on the wait list in `mode` (`LWLockQueueSelf`). Wait-until-free waiters
    /// go to the head, the others to the tail.
    fn queue_self(&self, w: &Waiter, mode: WaitMode) -> u32 {
        let spins = self.wait_list_lock();
        self.state.fetch_or(FLAG_HAS_WAITERS, Ordering::Relaxed);
        w.prepare(mode);
        // SAFETY: we hold the list lock and `w` (ours, alive for the whole call) is on no list
        // (`prepare` asserted it was not waiting).
        unsafe {
            if mode == WaitMode::WaitUntilFree {
                self.waiters.push_head(w.ptr());
            } else {
                self.waiters.push_tail(w.ptr());
            }
        }
        self.wait_list_unlock();
        spins
    }

    /// Takes `w` back off the wait list after phase 3 found the lock free (`LWLockDequeueSelf`,
    /// with 16's O(1) removal). If a waker got there first, consume its wake-up.
    fn dequeue_self(&self, w: &Waiter) -> u32 {
        let spins = self.wait_list_lock();
        let on_list = w.state.load(Ordering::Relaxed) == WAITING;
        if on_list {
            // SAFETY: list lock held; WAITING (read under that lock) means `w` is on this list.
            unsafe { self.waiters.remove(w.ptr()) };
        }
        if self.waiters.is_empty() {
            self.state.fetch_and(!FLAG_HAS_WAITERS, Ordering::Relaxed);
        }
        self.wait_list_unlock();
        if on_list {
            w.state.store(NOT_WAITING, Ordering::Relaxed);
        } else {
            // A releaser detached us and will wake us; it also cleared RELEASE_OK on our
            // behalf. Restore it, and absorb the wake-up so it cannot hit a later wait. A wait
            // for this lock's releaser: a simulated machine books it under the tranche
            // (PostgreSQL's `LWLockDequeueSelf` absorbs it without a wait event, as this does).
            self.state.fetch_or(FLAG_RELEASE_OK, Ordering::Relaxed);
            let _class = hook::wait_class(self.tranche.name());
            w.sleep();
            with_tranche(self.tranche, |c| c.dequeue_self.incr());
        }
        spins
    }

    /// Sleeps until woken, publishing the wait event and timing the sleep.
    fn sleep(&self, w: &Waiter) -> Slept {
        let _scope = WaitEventScope::new(WaitEvent::lwlock(self.tranche));
        let start = Instant::now();
        w.sleep();
        Slept { ns: start.elapsed().as_nanos() as u64 }
    }

    /// Wakes waiters after a release left the lock free (`LWLockWakeup`): every wait-until-free
    /// waiter at the front, then either one exclusive waiter or all shared waiters (shared ones
    /// behind a queued exclusive one included).
    fn wakeup(&self) -> u32 {
        let mut wake = WakeList::new();
        let mut new_release_ok = true;
        let mut woke_somebody = false;
        let spins = self.wait_list_lock();
        let mut cur = self.waiters.first();
        while !cur.is_null() {
            // SAFETY: list lock held and `cur` is on this list.
            let next = unsafe { WaitList::next_of(cur) };
            // SAFETY: as above.
            let mode = unsafe { WaitList::mode_of(cur) };
            if woke_somebody && mode == WaitMode::Exclusive {
                cur = next;
                continue;
            }
            // SAFETY: list lock held; `cur` is on this list. After removal it is ours to wake:
            // PENDING_WAKEUP tells its owner (in dequeue_self) that it is no longer listed.
            unsafe {
                self.waiters.remove(cur);
                (*cur).state.store(PENDING_WAKEUP, Ordering::Relaxed);
                wake.push(cur);
            }
            if mode != WaitMode::WaitUntilFree {
                new_release_ok = false;
                woke_somebody = true;
            }
            if mode == WaitMode::Exclusive {
                break;
            }
            cur = next;
        }
        let empty = self.waiters.is_empty();
        // Update the flags and drop the list lock in one step.
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            let mut desired = old & !FLAG_LOCKED;
            if new_release_ok {
                desired |= FLAG_RELEASE_OK;
            } else {
                desired &= !FLAG_RELEASE_OK;
            }
            if empty {
                desired &= !FLAG_HAS_WAITERS;
            }
            match self.state.compare_exchange_weak(old, desired, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(cur) => old = cur,
            }
        }
        wake.wake_all();
        spins
    }

    /// Does `var` still hold `oldval` while the lock is held exclusively?
    /// (`LWLockConflictsWithVar`): `None` = must wait, `Some(result)` = done.
    fn conflicts_with_var(&self, var: &LwLockVar, oldval: u64, spins: &mut u64) -> Option<VarWait> {
        if self.state.load(Ordering::Acquire) & VAL_EXCLUSIVE == 0 {
            return Some(VarWait::Free);
        }
        *spins += u64::from(self.wait_list_lock());
        let value = var.0.load(Ordering::Relaxed);
        self.wait_list_unlock();
        if value != oldval { Some(VarWait::Changed(value)) } else { None }
    }

    fn record_slow(&self, blocks: u64, spins: u64, wait_ns: u64) {
        if blocks == 0 && spins == 0 {
            return;
        }
        with_tranche(self.tranche, |c| {
            c.block.add(blocks);
            c.spin_delay.add(spins);
            c.wait_ns.add(wait_ns);
        });
        record_instance(self.tranche, self.instance, blocks, spins, wait_ns);
    }

    #[cold]
    fn acquire_slow(&self, mode: LwLockMode) -> bool {
        let wait_mode = match mode {
            LwLockMode::Shared => WaitMode::Shared,
            LwLockMode::Exclusive => WaitMode::Exclusive,
        };
        let free_mask = match mode {
            LwLockMode::Shared => VAL_EXCLUSIVE,
            LwLockMode::Exclusive => LOCK_MASK,
        };
        if spin_then_attempt(
            self.tranche.name(),
            || self.state.load(Ordering::Relaxed) & free_mask == 0,
            || self.attempt_lock(mode),
        ) {
            return false;
        }
        let (mut blocks, mut spins, mut ns) = (0u64, 0u64, 0u64);
        with_waiter(|w| {
            loop {
                if self.attempt_lock(mode) {
                    break;
                }
                spins += u64::from(self.queue_self(w, wait_mode));
                if self.attempt_lock(mode) {
                    spins += u64::from(self.dequeue_self(w));
                    break;
                }
                blocks += 1;
                ns += self.sleep(w).ns;
                // We have run: further wake-ups are allowed again.
                self.state.fetch_or(FLAG_RELEASE_OK, Ordering::Relaxed);
            }
        });
        self.record_slow(blocks, spins, ns);
        blocks > 0
    }

    /// The rest of `LWLockRelease` after the state word's decrement (`old` is the value before
    /// it): panic if the lock was not held in `mode`, and wake waiters if the release left the
    /// lock free with `HAS_WAITERS` and `RELEASE_OK` set.
    #[cold]
    #[inline(never)]
    fn release_slow(&self, mode: LwLockMode, old: u32) {
        let (sub, held_ok) = match mode {
            LwLockMode::Exclusive => (VAL_EXCLUSIVE, old & VAL_EXCLUSIVE != 0),
            LwLockMode::Shared => (1, old & SHARED_MASK != 0),
        };
        assert!(held_ok, "lock {}/{} is not held in {:?} mode", self.tranche, self.instance, mode);
        let new = old - sub;
        if new & (FLAG_HAS_WAITERS | FLAG_RELEASE_OK) == (FLAG_HAS_WAITERS | FLAG_RELEASE_OK)
            && new & LOCK_MASK == 0
        {
            let spins = self.wakeup();
            self.record_slow(0, u64::from(spins), 0);
        }
    }

    /// Number of waiters currently queued (walks the list under its lock; for tests and
    /// diagnostics).
    pub fn queued_waiters(&self) -> usize {
        self.wait_list_lock();
        let mut n = 0;
        let mut cur = self.waiters.first();
        while !cur.is_null() {
            n += 1;
            // SAFETY: list lock held; `cur` is on this list.
            cur = unsafe { WaitList::next_of(cur) };
        }
        self.wait_list_unlock();
        n
    }
}

#[cfg(not(loom))]
impl AtomicLwLock {
    /// A free lock, built at compile time (for `static`s and `lock_api`'s `INIT`).
    ///
    /// # Panics
    /// If `tranche` is out of range (`>= TrancheId::MAX`).
    pub const fn new_const(tranche: TrancheId, instance: u32) -> AtomicLwLock {
        check_tranche(tranche);
        AtomicLwLock { state: AtomicU32::new(FLAG_RELEASE_OK), tranche, instance, waiters: WaitList::new() }
    }
}

impl LwLockImpl for AtomicLwLock {
    fn with_id(tranche: TrancheId, instance: u32) -> AtomicLwLock {
        check_tranche(tranche);
        AtomicLwLock { state: AtomicU32::new(FLAG_RELEASE_OK), tranche, instance, waiters: WaitList::new() }
    }

    #[inline]
    fn acquire(&self, mode: LwLockMode) -> LwLockHeld {
        let waited = if self.attempt_lock(mode) { false } else { self.acquire_slow(mode) };
        // Counted once the lock is held (the totals are the same as counting on entry, as
        // LWLOCK_STATS does): the state word's cache line is ours then, so reading the tranche
        // id next to it is a hit. Counting first made a contended acquisition pull the line in
        // shared state for that read, and then again, exclusive, for the CAS.
        with_tranche(self.tranche, |c| match mode {
            LwLockMode::Shared => c.sh_acquire.incr(),
            LwLockMode::Exclusive => c.ex_acquire.incr(),
        });
        LwLockHeld::new(mode, waited)
    }

    #[inline]
    fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        let ok = self.attempt_lock(mode);
        with_tranche(self.tranche, |c| match (ok, mode) {
            (false, _) => c.cond_fail.incr(),
            (true, LwLockMode::Shared) => c.sh_acquire.incr(),
            (true, LwLockMode::Exclusive) => c.ex_acquire.incr(),
        });
        ok.then(|| LwLockHeld::new(mode, false))
    }

    fn acquire_or_wait(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        let count = |c: &crate::stats::TrancheCounters| match mode {
            LwLockMode::Shared => c.sh_acquire.incr(),
            LwLockMode::Exclusive => c.ex_acquire.incr(),
        };
        if self.attempt_lock(mode) {
            with_tranche(self.tranche, count);
            return Some(LwLockHeld::new(mode, false));
        }
        let (mut spins, mut ns) = (0u64, 0u64);
        let got = with_waiter(|w| {
            spins += u64::from(self.queue_self(w, WaitMode::WaitUntilFree));
            if self.attempt_lock(mode) {
                // Got it after all; we must leave the queue, or waiters we block could be
                // stranded.
                spins += u64::from(self.dequeue_self(w));
                return true;
            }
            ns = self.sleep(w).ns;
            false
        });
        if got {
            with_tranche(self.tranche, count);
            self.record_slow(0, spins, 0);
            Some(LwLockHeld::new(mode, false))
        } else {
            self.record_slow(1, spins, ns);
            None
        }
    }

    #[inline]
    fn release(&self, held: LwLockHeld) {
        let sub = match held.mode {
            LwLockMode::Exclusive => VAL_EXCLUSIVE,
            LwLockMode::Shared => 1,
        };
        let old = self.state.fetch_sub(sub, Ordering::Release);
        // Fast path, one test: we held the lock in this mode and nobody was queued. Everything
        // else (waiters to wake, or a release of a lock not held) is decided in `release_slow`.
        let fast = match held.mode {
            LwLockMode::Exclusive => old & (FLAG_HAS_WAITERS | VAL_EXCLUSIVE) == VAL_EXCLUSIVE,
            // `old & (HAS_WAITERS | SHARED_MASK)` in 1..=SHARED_MASK: a shared count of at least
            // one (ours) and no HAS_WAITERS.
            LwLockMode::Shared => (old & (FLAG_HAS_WAITERS | SHARED_MASK)).wrapping_sub(1) < SHARED_MASK,
        };
        if !fast {
            self.release_slow(held.mode, old);
        }
    }

    fn wait_for_var(&self, var: &LwLockVar, oldval: u64) -> VarWait {
        let (mut blocks, mut spins, mut ns) = (0u64, 0u64, 0u64);
        let result = with_waiter(|w| {
            loop {
                if let Some(r) = self.conflicts_with_var(var, oldval, &mut spins) {
                    return r;
                }
                spins += u64::from(self.queue_self(w, WaitMode::WaitUntilFree));
                // Make sure the next release wakes us even if a woken batch is still pending.
                self.state.fetch_or(FLAG_RELEASE_OK, Ordering::Relaxed);
                if let Some(r) = self.conflicts_with_var(var, oldval, &mut spins) {
                    spins += u64::from(self.dequeue_self(w));
                    return r;
                }
                blocks += 1;
                ns += self.sleep(w).ns;
            }
        });
        self.record_slow(blocks, spins, ns);
        result
    }

    fn update_var(&self, held: &LwLockHeld, var: &LwLockVar, val: u64) {
        assert!(
            held.mode == LwLockMode::Exclusive && self.is_locked_exclusive(),
            "update_var needs the lock held exclusively"
        );
        let mut wake = WakeList::new();
        let spins = self.wait_list_lock();
        var.0.store(val, Ordering::Relaxed);
        // Wake the leading run of wait-until-free waiters; they are always a prefix.
        let mut cur = self.waiters.first();
        while !cur.is_null() {
            // SAFETY: list lock held and `cur` is on this list.
            let next = unsafe { WaitList::next_of(cur) };
            // SAFETY: as above.
            if unsafe { WaitList::mode_of(cur) } != WaitMode::WaitUntilFree {
                break;
            }
            // SAFETY: list lock held and `cur` is on this list; once removed and marked
            // PENDING_WAKEUP it is ours to wake.
            unsafe {
                self.waiters.remove(cur);
                (*cur).state.store(PENDING_WAKEUP, Ordering::Relaxed);
                wake.push(cur);
            }
            cur = next;
        }
        self.wait_list_unlock();
        wake.wake_all();
        self.record_slow(0, u64::from(spins), 0);
    }

    fn release_clear_var(&self, held: LwLockHeld, var: &LwLockVar, val: u64) {
        let spins = self.wait_list_lock();
        var.0.store(val, Ordering::Relaxed);
        self.wait_list_unlock();
        self.record_slow(0, u64::from(spins), 0);
        self.release(held);
    }

    fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) & LOCK_MASK != 0
    }

    fn is_locked_exclusive(&self) -> bool {
        self.state.load(Ordering::Relaxed) & VAL_EXCLUSIVE != 0
    }

    fn tranche(&self) -> TrancheId {
        self.tranche
    }

    fn instance(&self) -> u32 {
        self.instance
    }
}
