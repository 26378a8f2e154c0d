//! A reader-biased LWLock: BRAVO (Dice & Kogan, "BRAVO: Biased Locking for Reader-Writer
//! Locks", USENIX ATC 2019) on top of [`AtomicLwLock`], the idea of the 2025 ReadBiasedLWLock
//! proposal for ProcArrayLock on pgsql-hackers.
//!
//! While the bias is on, a shared locker does not touch the lock word at all: it increments one
//! of [`READER_SLOTS`] cache-line-padded counters (chosen per thread) and re-checks the bias. An
//! exclusive locker takes the underlying lock, turns the bias off and waits for every slot to
//! drain ("revocation"). A shared locker that goes through the underlying lock turns the bias
//! back on once an inhibition period has passed: BRAVO's rule, `N` times the last revocation's
//! cost (N = 9), so that a write-heavy lock stays unbiased.
//!
//! Memory order: the reader increments its slot, issues a `SeqCst` fence, then checks the bias;
//! the writer clears the bias, issues a `SeqCst` fence, then scans the slots. Of two `SeqCst`
//! fences one comes first, so at least one side sees the other's store (Dekker's argument in
//! the fence form, which the C++/Rust memory model and loom both guarantee; plain `SeqCst`
//! loads and stores on different variables would not be enough under loom's model).

use lockstack_common::sync::Ordering;

use crossbeam_utils::CachePadded;
use lockstack_common::TrancheId;

use crate::atomic::AtomicLwLock;
use crate::lock::{LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
use crate::spin::SpinDelay;
use crate::stats::with_tranche;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, fence};

/// Number of reader slots per lock (16 × 128 bytes).
pub const READER_SLOTS: usize = 16;

/// BRAVO's inhibition multiplier: after a revocation that took `t`, stay unbiased for `9 t`.
pub const INHIBIT_MULTIPLIER: u64 = 9;

/// The reader-biased LWLock (see the module documentation). About 2.1 KiB.
pub struct ReadBiasedLwLock {
    inner: AtomicLwLock,
    bias: CachePadded<AtomicBool>,
    /// Monotonic nanoseconds before which the bias must not be re-enabled.
    inhibit_until_ns: AtomicU64,
    slots: [CachePadded<AtomicU32>; READER_SLOTS],
}

fn now_ns() -> u64 {
    #[cfg(not(loom))]
    {
        lockstack_common::sync::time::monotonic().as_nanos() as u64
    }
    #[cfg(loom)]
    {
        0
    }
}

// Per thread (per task under a simulation); under loom the slot is always 0 (see `next_slot`).
crate::sync::thread_local! {
    static MY_SLOT: std::cell::Cell<u16> = const { std::cell::Cell::new(u16::MAX) };
}

/// Threads take slots round-robin, so up to `READER_SLOTS` threads never share one.
#[cfg(not(loom))]
fn next_slot() -> u16 {
    // Plain: a once-per-thread round-robin ticket, not part of the lock protocol.
    static NEXT: lockstack_common::sync::atomic::plain::AtomicU32 =
        lockstack_common::sync::atomic::plain::AtomicU32::new(0);
    (NEXT.fetch_add(1, Ordering::Relaxed) as usize % READER_SLOTS) as u16
}

/// Under loom every model run must be deterministic, so a process-wide counter is out: all
/// threads share slot 0 (sharing a slot is legal; it only costs contention).
#[cfg(loom)]
fn next_slot() -> u16 {
    0
}

fn my_slot() -> u16 {
    MY_SLOT.with(|s| {
        if s.get() == u16::MAX {
            s.set(next_slot());
        }
        s.get()
    })
}

impl ReadBiasedLwLock {
    /// Is the reader bias on now (a hint)?
    pub fn is_biased(&self) -> bool {
        self.bias.load(Ordering::Relaxed)
    }

    /// Fast path: a reader slot, if the bias is on and stays on.
    #[inline]
    fn try_fast_shared(&self) -> Option<LwLockHeld> {
        if !self.bias.load(Ordering::Relaxed) {
            return None;
        }
        let s = my_slot();
        let slot = &self.slots[s as usize];
        slot.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // Acquire: pairs with the Release store that re-enabled the bias, which a shared holder
        // of the underlying lock made after the last writer released it.
        if self.bias.load(Ordering::Acquire) {
            with_tranche(self.inner.tranche(), |c| c.sh_acquire.incr());
            return Some(LwLockHeld { mode: LwLockMode::Shared, slot: s, waited: false });
        }
        // Revoked between our two loads: back out, the writer may be waiting for this slot.
        slot.fetch_sub(1, Ordering::Release);
        None
    }

    /// After a shared acquisition of the underlying lock: re-enable the bias if allowed.
    fn maybe_rebias(&self) {
        if !self.bias.load(Ordering::Relaxed) && now_ns() >= self.inhibit_until_ns.load(Ordering::Relaxed) {
            self.bias.store(true, Ordering::Release);
        }
    }

    /// With the underlying lock held exclusively: turn the bias off and wait for fast readers
    /// to leave. With `wait == false`, give up (returning false) if any is present.
    fn revoke(&self, wait: bool) -> bool {
        if !self.bias.load(Ordering::Relaxed) {
            return true;
        }
        let start = now_ns();
        self.bias.store(false, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        let mut delay = SpinDelay::new();
        for slot in &self.slots {
            // Acquire: pairs with the readers' Release decrements, so their reads finish
            // before our writes start.
            while slot.load(Ordering::Acquire) != 0 {
                if !wait {
                    return false;
                }
                delay.spin();
            }
        }
        let cost = now_ns().saturating_sub(start);
        self.inhibit_until_ns
            .store(now_ns().saturating_add(cost.saturating_mul(INHIBIT_MULTIPLIER)), Ordering::Relaxed);
        with_tranche(self.inner.tranche(), |c| {
            c.bias_revoke.incr();
            c.spin_delay.add(u64::from(delay.delays()));
        });
        true
    }
}

#[cfg(not(loom))]
impl ReadBiasedLwLock {
    /// A free lock, built at compile time (for `static`s and `lock_api`'s `INIT`).
    pub const fn new_const(tranche: TrancheId, instance: u32) -> ReadBiasedLwLock {
        ReadBiasedLwLock {
            inner: AtomicLwLock::new_const(tranche, instance),
            bias: CachePadded::new(AtomicBool::new(true)),
            inhibit_until_ns: AtomicU64::new(0),
            slots: [const { CachePadded::new(AtomicU32::new(0)) }; READER_SLOTS],
        }
    }
}

impl LwLockImpl for ReadBiasedLwLock {
    fn with_id(tranche: TrancheId, instance: u32) -> ReadBiasedLwLock {
        ReadBiasedLwLock {
            inner: AtomicLwLock::with_id(tranche, instance),
            bias: CachePadded::new(AtomicBool::new(true)),
            inhibit_until_ns: AtomicU64::new(0),
            slots: std::array::from_fn(|_| CachePadded::new(AtomicU32::new(0))),
        }
    }

    fn acquire(&self, mode: LwLockMode) -> LwLockHeld {
        match mode {
            LwLockMode::Shared => {
                if let Some(h) = self.try_fast_shared() {
                    return h;
                }
                let h = self.inner.acquire(LwLockMode::Shared);
                self.maybe_rebias();
                h
            }
            LwLockMode::Exclusive => {
                let h = self.inner.acquire(LwLockMode::Exclusive);
                self.revoke(true);
                h
            }
        }
    }

    fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        match mode {
            LwLockMode::Shared => {
                if let Some(h) = self.try_fast_shared() {
                    return Some(h);
                }
                let h = self.inner.conditional_acquire(LwLockMode::Shared)?;
                self.maybe_rebias();
                Some(h)
            }
            LwLockMode::Exclusive => {
                let h = self.inner.conditional_acquire(LwLockMode::Exclusive)?;
                if self.revoke(false) {
                    Some(h)
                } else {
                    // Fast readers are inside; the bias is now off, so a retry will succeed
                    // once they leave.
                    self.inner.release(h);
                    with_tranche(self.inner.tranche(), |c| c.cond_fail.incr());
                    None
                }
            }
        }
    }

    fn acquire_or_wait(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        match mode {
            LwLockMode::Shared => {
                if let Some(h) = self.try_fast_shared() {
                    return Some(h);
                }
                let h = self.inner.acquire_or_wait(LwLockMode::Shared)?;
                self.maybe_rebias();
                Some(h)
            }
            LwLockMode::Exclusive => {
                let h = self.inner.acquire_or_wait(LwLockMode::Exclusive)?;
                self.revoke(true);
                Some(h)
            }
        }
    }

    fn release(&self, held: LwLockHeld) {
        if held.slot != LwLockHeld::NO_SLOT {
            let old = self.slots[held.slot as usize].fetch_sub(1, Ordering::Release);
            assert!(old > 0, "reader slot {} of a ReadBiasedLwLock was not held", held.slot);
        } else {
            self.inner.release(held);
        }
    }

    fn wait_for_var(&self, var: &LwLockVar, oldval: u64) -> VarWait {
        // Only exclusive holders publish variables, and they hold the underlying lock.
        self.inner.wait_for_var(var, oldval)
    }

    fn update_var(&self, held: &LwLockHeld, var: &LwLockVar, val: u64) {
        self.inner.update_var(held, var, val)
    }

    fn release_clear_var(&self, held: LwLockHeld, var: &LwLockVar, val: u64) {
        self.inner.release_clear_var(held, var, val)
    }

    fn is_locked(&self) -> bool {
        self.inner.is_locked() || self.slots.iter().any(|s| s.load(Ordering::Relaxed) != 0)
    }

    fn is_locked_exclusive(&self) -> bool {
        self.inner.is_locked_exclusive()
    }

    fn tranche(&self) -> TrancheId {
        self.inner.tranche()
    }

    fn instance(&self) -> u32 {
        self.inner.instance()
    }
}
