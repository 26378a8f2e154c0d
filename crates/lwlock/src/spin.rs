//! Spinning with back-off, and the test-and-test-and-set spinlock built on it.
//!
//! PostgreSQL's `s_lock.c` (`perform_spin_delay`, 8.0+) spins `spins_per_delay` times, then
//! sleeps with a randomly growing delay; the number of delays is what `LWLOCK_STATS` prints as
//! `spindelay`. On a machine with fewer cores than threads a spinner mostly burns the holder's
//! time slice, so by default ours spins briefly, then yields, then sleeps for a growing interval
//! (2 µs up to 1 ms); [`SpinSchedule::Postgres`] is `s_lock.c`'s own schedule, which the
//! simulated machine uses by default. Every yield or sleep counts as one delay.

use crate::sync::{AtomicBool, spin_hint, yield_now};
use lockstack_common::sync::Ordering;
// Plain: a process-wide knob set before a run, read once per spin loop.
use lockstack_common::sync::atomic::plain::AtomicU32;

/// Default for [`set_spin_rounds`]: the schedule of parking_lot's `SpinWait` (3 rounds of
/// 2, 4, 8 pauses, then yields up to 10 rounds in all). 0 under loom, to keep models small.
pub const DEFAULT_SPIN_ROUNDS: u32 = if cfg!(loom) { 0 } else { 10 };

static SPIN_ROUNDS: AtomicU32 = AtomicU32::new(DEFAULT_SPIN_ROUNDS);

/// Sets how long a backend that finds an LWLock busy keeps retrying before it queues and
/// sleeps, in rounds: rounds 1-3 busy-wait 2, 4 and 8 pauses, later rounds yield the CPU.
/// `0` is PostgreSQL's behaviour (no spinning: queue at once). Applies to the `Pg92` and
/// `Atomic` designs (and `ReadBiased`, which sits on `Atomic`), process-wide, from the next
/// slow-path acquisition on; it never touches the uncontended path.
///
/// Why it exists: PostgreSQL backends are processes sleeping on semaphores, so every LWLock
/// implementation it ever shipped goes straight to sleep. Threads parked through a futex pay a
/// similar price, and on a machine with few cores that price dominates short critical
/// sections; Rust locks such as parking_lot spin briefly first. The knob lets a run show both.
pub fn set_spin_rounds(rounds: u32) {
    SPIN_ROUNDS.store(rounds.min(64), Ordering::Relaxed);
}

/// The current [`set_spin_rounds`] setting.
pub fn spin_rounds() -> u32 {
    SPIN_ROUNDS.load(Ordering::Relaxed)
}

/// How a spin loop ([`SpinDelay`]: the 9.2 spinlock, the wait-list bit, the reader-bias drain)
/// waits once its busy-wait budget is spent. Source: PostgreSQL's `src/backend/storage/lmgr/
/// s_lock.c` (`perform_spin_delay`, 8.0 to 17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpinSchedule {
    /// 64 busy-waits, then 16 yields, then sleeps of 2 µs doubling to 1 ms: this crate's
    /// default, kind to a machine with fewer cores than threads (a departure from PostgreSQL).
    #[default]
    Lockstack,
    /// `s_lock.c`'s: [`SpinSchedule::PG_SPINS_PER_DELAY`] busy-waits, then a sleep that
    /// starts at 1 ms and grows by half of itself each time up to 1 s, then starts over at
    /// 1 ms; the busy-waits repeat before every sleep. PostgreSQL grows the delay by a random
    /// fraction (0 to 1) of itself, whose mean this uses so that simulated runs stay
    /// deterministic, and adapts `spins_per_delay` between 10 and 1000 (not modelled).
    Postgres,
}

impl SpinSchedule {
    /// `s_lock.c`'s `DEFAULT_SPINS_PER_DELAY`.
    pub const PG_SPINS_PER_DELAY: u32 = 100;
    /// `s_lock.c`'s `MIN_DELAY_USEC` and `MAX_DELAY_USEC`, in µs.
    pub const PG_DELAY_US: (u32, u32) = (1_000, 1_000_000);
}

impl std::str::FromStr for SpinSchedule {
    type Err = String;
    fn from_str(s: &str) -> Result<SpinSchedule, String> {
        match s {
            "lockstack" => Ok(SpinSchedule::Lockstack),
            "postgres" => Ok(SpinSchedule::Postgres),
            _ => Err(format!("unknown spin schedule {s:?} (lockstack|postgres)")),
        }
    }
}

static SPIN_SCHEDULE: AtomicU32 = AtomicU32::new(0);

/// Sets the [`SpinSchedule`] of every spin loop, process-wide, from the next delay on.
pub fn set_spin_schedule(s: SpinSchedule) {
    SPIN_SCHEDULE.store(s as u32, Ordering::Relaxed);
}

/// The current [`set_spin_schedule`] setting.
pub fn spin_schedule() -> SpinSchedule {
    if SPIN_SCHEDULE.load(Ordering::Relaxed) == SpinSchedule::Postgres as u32 {
        SpinSchedule::Postgres
    } else {
        SpinSchedule::Lockstack
    }
}

/// Retries `attempt` on the [`set_spin_rounds`] schedule, calling it only when `looks_free`
/// says it might succeed; returns true once `attempt` succeeds, false when the rounds run out.
/// A simulated machine books the rounds under `class` (the lock's tranche name).
#[inline]
pub(crate) fn spin_then_attempt(
    class: &'static str,
    looks_free: impl Fn() -> bool,
    attempt: impl Fn() -> bool,
) -> bool {
    let rounds = spin_rounds();
    if rounds == 0 {
        return false;
    }
    let _class = lockstack_common::sync::hook::wait_class(class);
    for round in 0..rounds {
        if round < 3 {
            for _ in 0..(2u32 << round) {
                spin_hint();
            }
        } else {
            yield_now();
        }
        if looks_free() && attempt() {
            return true;
        }
    }
    false
}

/// Back-off state for one spin loop.
#[derive(Debug, Default)]
pub struct SpinDelay {
    spins: u32,
    delays: u32,
    /// The next sleep under [`SpinSchedule::Postgres`], µs (0: not started).
    cur_delay_us: u32,
}

impl SpinDelay {
    /// Busy-wait iterations before the first yield.
    pub const SPINS_BEFORE_YIELD: u32 = 64;
    /// Yields before sleeping starts.
    pub const YIELDS_BEFORE_SLEEP: u32 = 16;

    /// Fresh state.
    pub const fn new() -> SpinDelay {
        SpinDelay { spins: 0, delays: 0, cur_delay_us: 0 }
    }

    /// One step of waiting: spin, yield, or sleep, depending on how long we have waited.
    #[inline]
    pub fn spin(&mut self) {
        if spin_schedule() == SpinSchedule::Postgres {
            self.spin_postgres();
            return;
        }
        if self.spins < Self::SPINS_BEFORE_YIELD {
            self.spins += 1;
            spin_hint();
            return;
        }
        self.delays += 1;
        if self.delays <= Self::YIELDS_BEFORE_SLEEP || cfg!(loom) {
            yield_now();
        } else {
            #[cfg(not(loom))]
            {
                let exp = (self.delays - Self::YIELDS_BEFORE_SLEEP).min(10);
                lockstack_common::sync::sleep(std::time::Duration::from_micros(1 << exp));
            }
        }
    }

    /// One step under [`SpinSchedule::Postgres`]. Under loom a delay yields (loom has no time).
    fn spin_postgres(&mut self) {
        if self.spins < SpinSchedule::PG_SPINS_PER_DELAY {
            self.spins += 1;
            spin_hint();
            return;
        }
        self.spins = 0;
        self.delays += 1;
        let (min, max) = SpinSchedule::PG_DELAY_US;
        if self.cur_delay_us == 0 {
            self.cur_delay_us = min;
        }
        #[cfg(loom)]
        yield_now();
        #[cfg(not(loom))]
        lockstack_common::sync::sleep(std::time::Duration::from_micros(u64::from(self.cur_delay_us)));
        self.cur_delay_us += self.cur_delay_us / 2;
        if self.cur_delay_us > max {
            self.cur_delay_us = min;
        }
    }

    /// How many times this loop yielded or slept (PostgreSQL's `spindelay`).
    pub fn delays(&self) -> u32 {
        self.delays
    }
}

/// A test-and-test-and-set spinlock (PostgreSQL's `slock_t` with `s_lock`), for critical
/// sections of a few instructions: the 9.2 LWLock's `mutex` and, in bufmgr, the buffer header
/// lock of 9.2-9.5.
#[derive(Debug, Default)]
pub struct SpinLock {
    locked: AtomicBool,
}

impl SpinLock {
    /// An unlocked spinlock.
    #[cfg(not(loom))]
    pub const fn new() -> SpinLock {
        SpinLock { locked: AtomicBool::new(false) }
    }

    /// An unlocked spinlock.
    #[cfg(loom)]
    pub fn new() -> SpinLock {
        SpinLock { locked: AtomicBool::new(false) }
    }

    /// Takes the lock, spinning with back-off; returns the number of spin delays it needed.
    #[inline]
    pub fn lock(&self) -> u32 {
        if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return 0;
        }
        self.lock_slow()
    }

    #[cold]
    fn lock_slow(&self) -> u32 {
        // A simulated machine books the spinning as PostgreSQL names a spinlock's wait.
        let _class = lockstack_common::sync::hook::wait_class(lockstack_common::sync::hook::SPIN_DELAY_CLASS);
        let mut delay = SpinDelay::new();
        loop {
            while self.locked.load(Ordering::Relaxed) {
                delay.spin();
            }
            if self.locked.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return delay.delays();
            }
        }
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> bool {
        self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok()
    }

    /// Releases the lock. Calling it without holding the lock breaks mutual exclusion for
    /// whoever holds it (no memory unsafety, but wrong results), so callers pair it with `lock`.
    #[inline]
    pub fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// True while some thread holds the lock (a hint: it may change at once).
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }
}
