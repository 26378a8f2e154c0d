//! A reader-biased LWLock: BRAVO (Dice & Kogan, "BRAVO: Biased Locking for Reader-Writer
//! Locks", USENIX ATC 2019) on top of [`AtomicLwLock`], the idea of the 2025 ReadBiasedLWLock
//! proposal for ProcArrayLock on pgsql-hackers.
//!
//! While the bias is on, a shared locker does not touch the lock word at all: it increments one
//! of [`READER_SLOTS`] cache-line-padded counters (chosen per thread) and re-checks the bias. A
//! shared locker that finds the bias off takes the underlying lock in shared mode, and turns the
//! bias back on once an inhibition period has passed and no writer is revoking: BRAVO's rule,
//! `N` times the last revocation's cost (N = 9), so that a write-heavy lock stays unbiased.
//!
//! An exclusive locker revokes the bias *before* it asks for the underlying lock: it turns the
//! bias off and waits for every slot to drain while holding nothing, then takes the underlying
//! lock exclusively. So while the lock is only held shared (by slot readers, or by readers of
//! the underlying lock), a new or nested shared request is granted at once whatever waits, as
//! with every LWLock (`lwlock.c` never queues a shared request behind a waiting exclusive one):
//! a reader holding a slot can take the lock again in shared mode without deadlocking against
//! the revoking writer. (The 2019 paper's writer takes the underlying lock first and revokes
//! under it; a nested or new reader then waits behind the writer, who waits for the reader's
//! slot.)
//!
//! The bias and its history are one 64-bit word, `epoch`: odd while the bias is on; a revocation
//! moves it from odd to the next even value, a re-bias from even to the next odd one, so it only
//! grows. A writer remembers the even value `v` its revocation drained the slots for, and once
//! it holds the underlying lock exclusively, checks that the word is still `v`: if a shared
//! holder of the underlying lock re-enabled the bias between the drain and that moment, readers
//! may have entered slots since, so the writer releases and revokes again (rare: re-biasing
//! waits while `revokers` is non-zero). While the writer holds the lock exclusively nobody can
//! re-bias, because only a shared holder of the underlying lock does. A writer that finds the
//! bias off and the slots already drained for the current value (`drained`) skips the
//! revocation, so a write-mostly lock costs one extra load per exclusive acquisition.
//!
//! Memory order: the reader increments its slot, issues a `SeqCst` fence, then checks the bias;
//! the writer moves the word to `v` with a read-modify-write, issues a `SeqCst` fence, then scans
//! the slots. Of two `SeqCst` fences one comes first, so either the writer's scan sees the
//! reader's increment or the reader's check sees `v` (or later) and backs out (Dekker's argument
//! in the fence form, which the C++/Rust memory model and loom both guarantee; plain `SeqCst`
//! loads and stores on different variables would not be enough under loom's model). The
//! revocation is a read-modify-write even when the bias is already off, so that the argument
//! covers writers that did not turn it off themselves.

use lockstack_common::sync::Ordering;

use crossbeam_utils::CachePadded;
use lockstack_common::TrancheId;

use crate::atomic::AtomicLwLock;
use crate::interface::{LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
use crate::spin::SpinDelay;
use crate::stats::with_tranche;
use crate::sync::{AtomicU32, AtomicU64, fence};

/// Number of reader slots per lock (16 × 128 bytes).
pub const READER_SLOTS: usize = 16;

/// BRAVO's inhibition multiplier: after a revocation that took `t`, stay unbiased for `9 t`.
pub const INHIBIT_MULTIPLIER: u64 = 9;

/// The reader-biased LWLock (see the module documentation). About 2.2 KiB.
pub struct ReadBiasedLwLock {
    inner: AtomicLwLock,
    /// The bias word: odd while the bias is on; only grows (see the module documentation).
    epoch: CachePadded<AtomicU64>,
    /// The even `epoch` value for which some writer last saw every slot empty.
    drained: AtomicU64,
    /// Writers between the start of their revocation and their exclusive hold of `inner`;
    /// while non-zero, shared lockers do not re-enable the bias.
    revokers: AtomicU32,
    /// Monotonic nanoseconds before which the bias must not be re-enabled.
    inhibit_until_ns: AtomicU64,
    slots: [CachePadded<AtomicU32>; READER_SLOTS],
}

/// How an exclusive request waits for the underlying lock.
#[derive(Copy, Clone, PartialEq, Eq)]
enum ExclusiveWait {
    /// `LWLockAcquire`.
    Block,
    /// `LWLockAcquireOrWait`: if the lock is busy, wait for it to be released and give up.
    OrWait,
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
    /// The address of the underlying lock's state word (the line a simulation names; see
    /// [`LwLock::name_line`](crate::LwLock::name_line)).
    pub fn word_addr(&self) -> *const u8 {
        self.inner.word_addr()
    }

    /// The address of the bias word (`epoch`, on a line of its own).
    pub fn bias_addr(&self) -> *const u8 {
        &*self.epoch as *const AtomicU64 as *const u8
    }

    /// Is the reader bias on now (a hint)?
    pub fn is_biased(&self) -> bool {
        self.epoch.load(Ordering::Relaxed) & 1 == 1
    }

    /// Fast path: a reader slot, if the bias is on and stays on.
    #[inline]
    fn try_fast_shared(&self) -> Option<LwLockHeld> {
        if self.epoch.load(Ordering::Relaxed) & 1 == 0 {
            return None;
        }
        let s = my_slot();
        let slot = &self.slots[s as usize];
        slot.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        // Acquire: pairs with the Release compare-exchange that re-enabled the bias, which a
        // shared holder of the underlying lock made after the last writer released it.
        if self.epoch.load(Ordering::Acquire) & 1 == 1 {
            with_tranche(self.inner.tranche(), |c| c.sh_acquire.incr());
            return Some(LwLockHeld { mode: LwLockMode::Shared, slot: s, waited: false });
        }
        // Revoked between our two loads: back out, the writer may be waiting for this slot.
        slot.fetch_sub(1, Ordering::Release);
        None
    }

    /// After a shared acquisition of the underlying lock (and only then: holding it shared is
    /// what keeps exclusive holders out, see the module documentation): re-enable the bias if
    /// the inhibition period is over and no writer is revoking.
    fn maybe_rebias(&self) {
        let e = self.epoch.load(Ordering::Relaxed);
        if e & 1 == 0
            && self.revokers.load(Ordering::Relaxed) == 0
            && now_ns() >= self.inhibit_until_ns.load(Ordering::Relaxed)
        {
            // Release: pairs with the fast readers' Acquire check. Losing the race to another
            // re-bias or a revocation is fine either way.
            let _ = self.epoch.compare_exchange(e, e + 1, Ordering::Release, Ordering::Relaxed);
        }
    }

    /// Turns the bias off (or confirms it is off) and waits for the reader slots to drain.
    /// Returns the even epoch the slots were drained for and whether it had to wait; with
    /// `wait == false`, `None` if a reader is present (the bias stays off).
    fn revoke(&self, wait: bool) -> Option<(u64, bool)> {
        let start = now_ns();
        // A read-modify-write even when the bias is already off (see the module documentation).
        let mut e = self.epoch.load(Ordering::Relaxed);
        let v = loop {
            let v = e + (e & 1);
            match self.epoch.compare_exchange(e, v, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => break v,
                Err(now) => e = now,
            }
        };
        let turned_off = e & 1 == 1;
        fence(Ordering::SeqCst);
        let mut delay = SpinDelay::new();
        let mut waited = false;
        // Set at the first wait: a simulated machine books the drain under the tranche.
        let mut class = None;
        for slot in &self.slots {
            // Acquire: pairs with the readers' Release decrements, so their reads finish
            // before our writes start.
            while slot.load(Ordering::Acquire) != 0 {
                if !wait {
                    return None;
                }
                waited = true;
                if class.is_none() {
                    class = Some(lockstack_common::sync::hook::wait_class(self.inner.tranche().name()));
                }
                delay.spin();
            }
        }
        drop(class);
        self.drained.store(v, Ordering::Release);
        if turned_off {
            let cost = now_ns().saturating_sub(start);
            self.inhibit_until_ns
                .store(now_ns().saturating_add(cost.saturating_mul(INHIBIT_MULTIPLIER)), Ordering::Relaxed);
            with_tranche(self.inner.tranche(), |c| c.bias_revoke.incr());
        }
        with_tranche(self.inner.tranche(), |c| c.spin_delay.add(u64::from(delay.delays())));
        Some((v, waited))
    }

    /// The even epoch for which the slots are known to be empty, if the bias is off and some
    /// writer drained them since it went off (so a new writer need not revoke).
    fn already_drained(&self) -> Option<u64> {
        let e = self.epoch.load(Ordering::Acquire);
        (e & 1 == 0 && self.drained.load(Ordering::Acquire) == e).then_some(e)
    }

    /// An exclusive acquisition: revoke and drain without holding anything, then take the
    /// underlying lock exclusively and check that nobody re-enabled the bias in between.
    fn acquire_exclusive(&self, how: ExclusiveWait) -> Option<LwLockHeld> {
        let mut registered = false;
        let mut drain_waited = false;
        let out = loop {
            let epoch = match self.already_drained() {
                Some(e) => e,
                None => {
                    if !registered {
                        self.revokers.fetch_add(1, Ordering::SeqCst);
                        registered = true;
                    }
                    let (v, waited) = self.revoke(true).expect("a waiting revocation always drains");
                    drain_waited |= waited;
                    if waited && how == ExclusiveWait::OrWait {
                        // The lock was held (shared) and has been released: LWLockAcquireOrWait's
                        // "waited" outcome.
                        break None;
                    }
                    v
                }
            };
            let held = match how {
                ExclusiveWait::Block => self.inner.acquire(LwLockMode::Exclusive),
                ExclusiveWait::OrWait => match self.inner.acquire_or_wait(LwLockMode::Exclusive) {
                    Some(h) => h,
                    None => break None,
                },
            };
            // Nobody re-biases while we hold `inner` exclusively; if nobody did since our
            // drain, no reader can be in a slot.
            if self.epoch.load(Ordering::Acquire) == epoch {
                break Some(held);
            }
            self.inner.release(held);
            // That hold was not an acquisition for LWLOCK_STATS: take back its count (the
            // counter wraps, so adding -1 as a u64 subtracts one).
            with_tranche(self.inner.tranche(), |c| c.ex_acquire.add(1u64.wrapping_neg()));
        };
        if registered {
            self.revokers.fetch_sub(1, Ordering::Release);
        }
        out.map(|mut h| {
            h.waited |= drain_waited;
            h
        })
    }
}

#[cfg(not(loom))]
impl ReadBiasedLwLock {
    /// A free lock, built at compile time (for `static`s and `lock_api`'s `INIT`).
    pub const fn new_const(tranche: TrancheId, instance: u32) -> ReadBiasedLwLock {
        ReadBiasedLwLock {
            inner: AtomicLwLock::new_const(tranche, instance),
            epoch: CachePadded::new(AtomicU64::new(1)),
            drained: AtomicU64::new(0),
            revokers: AtomicU32::new(0),
            inhibit_until_ns: AtomicU64::new(0),
            slots: [const { CachePadded::new(AtomicU32::new(0)) }; READER_SLOTS],
        }
    }
}

impl LwLockImpl for ReadBiasedLwLock {
    fn with_id(tranche: TrancheId, instance: u32) -> ReadBiasedLwLock {
        ReadBiasedLwLock {
            inner: AtomicLwLock::with_id(tranche, instance),
            epoch: CachePadded::new(AtomicU64::new(1)),
            drained: AtomicU64::new(0),
            revokers: AtomicU32::new(0),
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
                self.acquire_exclusive(ExclusiveWait::Block).expect("a blocking acquisition always succeeds")
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
                // Holding `inner` exclusively, nobody can re-bias, and revoking without waiting
                // cannot block anyone.
                if self.already_drained().is_some() || self.revoke(false).is_some() {
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
            LwLockMode::Exclusive => self.acquire_exclusive(ExclusiveWait::OrWait),
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
