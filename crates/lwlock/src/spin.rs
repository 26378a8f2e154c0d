//! Spinning with back-off, and the test-and-test-and-set spinlock built on it.
//!
//! PostgreSQL's `s_lock.c` (`perform_spin_delay`, 8.0+) spins `spins_per_delay` times, then
//! sleeps with a randomly growing delay; the number of delays is what `LWLOCK_STATS` prints as
//! `spindelay`. On a machine with fewer cores than threads a spinner mostly burns the holder's
//! time slice, so by default ours spins briefly, then yields, then sleeps for a growing interval
//! (2 µs up to 1 ms); [`SpinSchedule::Postgres`] is `s_lock.c`'s own schedule, which the
//! simulated machine uses by default. Every yield or sleep counts as one delay.
//!
//! [`SLockDelay`] is `s_lock.c`'s wait itself (`SpinDelayStatus`, `perform_spin_delay`,
//! `finish_spin_delay`), shared by [`SpinDelay`] under [`SpinSchedule::Postgres`] (the LWLock
//! spin paths) and by bufmgr's buffer header lock.

use std::cell::Cell;

use crate::sync::{AtomicBool, spin_hint, thread_local, yield_now};
use lockstack_common::backend::WaitEventScope;
use lockstack_common::sync::Ordering;
use lockstack_common::sync::hook;
use lockstack_common::wait_event::WaitEvent;
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
    /// `s_lock.c`'s ([`SLockDelay`]): the backend's `spins_per_delay` busy-waits (100 at
    /// first, adapted between 10 and 1000), then a sleep that starts at 1 ms and grows by a
    /// random 1-2x each time up to 1 s, then starts over at 1 ms; the busy-waits repeat before
    /// every sleep, and the sleep is booked as the wait event `Timeout:SpinDelay`.
    Postgres,
}

impl SpinSchedule {
    /// `s_lock.c`'s `DEFAULT_SPINS_PER_DELAY`: a backend's first `spins_per_delay`.
    pub const PG_SPINS_PER_DELAY: u32 = 100;
    /// `s_lock.c`'s `MIN_SPINS_PER_DELAY` and `MAX_SPINS_PER_DELAY`: the range
    /// `spins_per_delay` adapts in.
    pub const PG_SPINS_PER_DELAY_RANGE: (u32, u32) = (10, 1_000);
    /// `s_lock.c`'s `MIN_DELAY_USEC` and `MAX_DELAY_USEC`, in µs.
    pub const PG_DELAY_US: (u32, u32) = (1_000, 1_000_000);
    /// `s_lock.c`'s `NUM_DELAYS`: sleeps in one wait before the spinlock is declared stuck.
    pub const PG_NUM_DELAYS: u32 = 1_000;
}

impl std::str::FromStr for SpinSchedule {
    type Err = UnknownSpinSchedule;
    /// Parses `lockstack` or `postgres`.
    fn from_str(s: &str) -> Result<SpinSchedule, UnknownSpinSchedule> {
        match s {
            "lockstack" => Ok(SpinSchedule::Lockstack),
            "postgres" => Ok(SpinSchedule::Postgres),
            _ => Err(UnknownSpinSchedule(s.to_string())),
        }
    }
}

/// A [`SpinSchedule`] name other than `lockstack` and `postgres` (the name given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown spin schedule {0:?} (lockstack|postgres)")]
pub struct UnknownSpinSchedule(pub String);

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

/// Back-off state for one spin loop. Under [`SpinSchedule::Postgres`] it is an [`SLockDelay`],
/// finished (the backend's `spins_per_delay` adapted) when it is dropped after spinning, as
/// PostgreSQL 9.6+'s `LWLockWaitListLock` calls `finish_spin_delay` after each wait.
#[derive(Debug, Default)]
pub struct SpinDelay {
    spins: u32,
    delays: u32,
    /// The `s_lock.c` wait under [`SpinSchedule::Postgres`].
    pg: SLockDelay,
}

impl SpinDelay {
    /// Busy-wait iterations before the first yield.
    pub const SPINS_BEFORE_YIELD: u32 = 64;
    /// Yields before sleeping starts.
    pub const YIELDS_BEFORE_SLEEP: u32 = 16;

    /// Fresh state.
    pub const fn new() -> SpinDelay {
        SpinDelay { spins: 0, delays: 0, pg: SLockDelay::new() }
    }

    /// One step of waiting: spin, yield, or sleep, depending on how long we have waited.
    #[inline]
    pub fn spin(&mut self) {
        if spin_schedule() == SpinSchedule::Postgres {
            self.pg.perform();
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

    /// How many times this loop yielded or slept (PostgreSQL's `spindelay`).
    pub fn delays(&self) -> u32 {
        self.delays + self.pg.delays()
    }
}

impl Drop for SpinDelay {
    fn drop(&mut self) {
        if self.pg.waited() {
            std::mem::take(&mut self.pg).finish();
        }
    }
}

thread_local! {
    /// This backend's `spins_per_delay` (`s_lock.c`'s static variable of each process).
    static SPINS_PER_DELAY: Cell<u32> = const { Cell::new(SpinSchedule::PG_SPINS_PER_DELAY) };
    /// This backend's random-number state for the sleeps' growth (xorshift64*; 0: not seeded).
    static RANDOM: Cell<u64> = const { Cell::new(0) };
}

/// Backends seeded so far: the next one's seed. Backends are seeded in the order they first
/// sleep, which a simulation makes deterministic.
static NEXT_SEED: lockstack_common::sync::atomic::plain::AtomicU64 =
    lockstack_common::sync::atomic::plain::AtomicU64::new(0);

/// A random fraction in `[0, 1)` from this backend's generator (PostgreSQL: `random()` until
/// 14, `pg_prng_double` from 15). Each backend has its own state, seeded once from a count of
/// the backends seeded before it (SplitMix64 of the count): no host randomness or time, so a
/// simulated run repeats exactly.
fn random_fraction() -> f64 {
    RANDOM.with(|r| {
        let mut x = r.get();
        if x == 0 {
            let mut z = NEXT_SEED.fetch_add(1, Ordering::Relaxed).wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            x = (z ^ (z >> 31)) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// The calling backend's current `spins_per_delay` (for tests and reports).
pub fn spins_per_delay() -> u32 {
    SPINS_PER_DELAY.with(Cell::get)
}

/// Sets the calling backend's `spins_per_delay`, clamped to
/// [`SpinSchedule::PG_SPINS_PER_DELAY_RANGE`] (PostgreSQL's `set_spins_per_delay`, which a
/// new backend calls with the shared estimate).
pub fn set_spins_per_delay(v: u32) {
    let (lo, hi) = SpinSchedule::PG_SPINS_PER_DELAY_RANGE;
    SPINS_PER_DELAY.with(|s| s.set(v.clamp(lo, hi)));
}

/// One wait for a spinlock as PostgreSQL's `s_lock.c` does it (`SpinDelayStatus` with
/// `init_local_spin_delay`, `perform_spin_delay` and `finish_spin_delay`, 9.6-17; the same
/// loop inside `s_lock()` itself from 8.1 to 9.5): a `pause` per try, and every
/// `spins_per_delay` tries a sleep of 1 ms growing by a random 1-2x each time, back to 1 ms
/// past 1 s; after the wait the backend's `spins_per_delay` rises by 100 (to at most 1000) if
/// it never slept, else falls by 1 (to at least 10).
///
/// Each sleep is booked as the wait event `Timeout:SpinDelay` (PostgreSQL 14+'s
/// `WAIT_EVENT_SPIN_DELAY`, which earlier releases did not report): published in the
/// backend's wait-event slot (the sampler sees it) and, on a simulated machine, the class
/// its sleep is booked under, whatever class the spinning itself is booked under.
///
/// Used by [`SpinDelay`] under [`SpinSchedule::Postgres`] (9.2's LWLock mutex, the 9.5+
/// wait-list lock, the read-biased drain) and by bufmgr's buffer header lock (9.2-9.5's
/// spinlock, 9.6+'s `LockBufHdr`). Under loom a step is one pause and never sleeps.
#[derive(Debug, Default)]
pub struct SLockDelay {
    spins: u32,
    delays: u32,
    /// The next sleep, µs (0: none yet).
    cur_delay_us: u32,
    /// Whether [`SLockDelay::perform`] ran.
    performed: bool,
}

impl SLockDelay {
    /// A fresh wait (`init_local_spin_delay`).
    pub const fn new() -> SLockDelay {
        SLockDelay { spins: 0, delays: 0, cur_delay_us: 0, performed: false }
    }

    /// One try's wait (`perform_spin_delay`): a `pause`, and every `spins_per_delay` tries a
    /// sleep.
    ///
    /// # Panics
    /// After [`SpinSchedule::PG_NUM_DELAYS`] sleeps in one wait ("stuck spinlock",
    /// PostgreSQL's `s_lock_stuck` PANIC).
    #[inline]
    pub fn perform(&mut self) {
        self.performed = true;
        spin_hint();
        if cfg!(loom) {
            return;
        }
        self.spins += 1;
        if self.spins >= SPINS_PER_DELAY.with(Cell::get) {
            self.delay();
        }
    }

    #[cold]
    fn delay(&mut self) {
        self.delays += 1;
        assert!(
            self.delays <= SpinSchedule::PG_NUM_DELAYS,
            "stuck spinlock detected (more than {} sleeps)",
            SpinSchedule::PG_NUM_DELAYS
        );
        let (min, max) = SpinSchedule::PG_DELAY_US;
        if self.cur_delay_us == 0 {
            self.cur_delay_us = min;
        }
        {
            // The class scope outlives the wait event's: the event's end restores the class
            // the backend had published (none, for a spinlock), and this one then restores the
            // class the caller's spinning is booked under.
            let _class = hook::wait_class(hook::SPIN_DELAY_CLASS);
            let _event = WaitEventScope::new(WaitEvent::SPIN_DELAY);
            #[cfg(not(loom))]
            lockstack_common::sync::sleep(std::time::Duration::from_micros(u64::from(self.cur_delay_us)));
        }
        // Grow by a random fraction of itself (1x to 2x); past the maximum, back to the minimum.
        self.cur_delay_us += (f64::from(self.cur_delay_us) * random_fraction() + 0.5) as u32;
        if self.cur_delay_us > max {
            self.cur_delay_us = min;
        }
        self.spins = 0;
    }

    /// Ends the wait (`finish_spin_delay`): adapts the backend's `spins_per_delay` and returns
    /// the number of sleeps.
    #[inline]
    pub fn finish(self) -> u32 {
        let (lo, hi) = SpinSchedule::PG_SPINS_PER_DELAY_RANGE;
        SPINS_PER_DELAY.with(|s| {
            let v = s.get();
            if self.cur_delay_us == 0 {
                // Never slept: the holder runs on another core; spin longer next time.
                s.set((v + 100).min(hi));
            } else {
                s.set(v.saturating_sub(1).max(lo));
            }
        });
        self.delays
    }

    /// Sleeps so far in this wait.
    pub fn delays(&self) -> u32 {
        self.delays
    }

    /// Whether [`SLockDelay::perform`] ran at least once.
    pub fn waited(&self) -> bool {
        self.performed
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `spins_per_delay` climbs by 100 per wait that never slept, capped at 1000, and drops by
    /// 1 per wait that slept, floored at 10.
    #[test]
    fn spins_per_delay_adapts_like_s_lock() {
        std::thread::spawn(|| {
            assert_eq!(spins_per_delay(), 100);
            for want in [200, 300, 400, 500, 600, 700, 800, 900, 1000, 1000] {
                assert_eq!(SLockDelay::new().finish(), 0);
                assert_eq!(spins_per_delay(), want);
            }
            set_spins_per_delay(11);
            for want in [10, 10] {
                let d = SLockDelay { spins: 0, delays: 1, cur_delay_us: 1_000, performed: true };
                assert_eq!(d.finish(), 1);
                assert_eq!(spins_per_delay(), want);
            }
        })
        .join()
        .unwrap();
    }

    /// The first sleep comes after `spins_per_delay` pauses and lasts 1 ms; later ones grow by
    /// 1-2x and wrap back to 1 ms past 1 s; the growth is random (not the same factor each
    /// time).
    #[test]
    fn sleeps_start_at_one_ms_and_grow_by_a_random_factor() {
        std::thread::spawn(|| {
            set_spins_per_delay(10);
            let mut d = SLockDelay::new();
            for _ in 0..9 {
                d.perform();
            }
            assert_eq!((d.delays, d.cur_delay_us), (0, 0));
            d.perform();
            assert_eq!(d.delays, 1);
            assert!((1_000..=2_000).contains(&d.cur_delay_us), "{d:?}");
            let mut prev = d.cur_delay_us;
            let mut ratios = Vec::new();
            for _ in 0..8 {
                d.cur_delay_us = prev;
                // One growth step without sleeping: what `delay` does after its sleep.
                d.cur_delay_us += (f64::from(d.cur_delay_us) * random_fraction() + 0.5) as u32;
                assert!(
                    d.cur_delay_us >= prev && d.cur_delay_us <= 2 * prev + 1,
                    "{prev} -> {}",
                    d.cur_delay_us
                );
                ratios.push(d.cur_delay_us * 1000 / prev);
                prev = d.cur_delay_us;
            }
            ratios.dedup();
            assert!(ratios.len() > 1, "the same growth every time: {ratios:?}");
        })
        .join()
        .unwrap();
    }

    /// Each backend's generator is seeded from the count of backends seeded before it: two
    /// backends draw different sequences, and no draw is outside [0, 1).
    #[test]
    fn each_backend_draws_its_own_sequence() {
        let draw = || {
            std::thread::spawn(|| (0..16).map(|_| random_fraction()).collect::<Vec<f64>>()).join().unwrap()
        };
        let (a, b) = (draw(), draw());
        assert_ne!(a, b);
        assert!(a.iter().chain(&b).all(|f| (0.0..1.0).contains(f)));
    }

    /// Under PostgreSQL's schedule a `SpinDelay` that spun adapts the backend's
    /// `spins_per_delay` when dropped (one that never spun leaves it alone).
    #[test]
    fn spin_delay_finishes_when_dropped() {
        std::thread::spawn(|| {
            set_spin_schedule(SpinSchedule::Postgres);
            assert_eq!(spins_per_delay(), 100);
            drop(SpinDelay::new());
            assert_eq!(spins_per_delay(), 100);
            let mut d = SpinDelay::new();
            d.spin();
            drop(d);
            assert_eq!(spins_per_delay(), 200);
            set_spin_schedule(SpinSchedule::Lockstack);
        })
        .join()
        .unwrap();
    }
}
