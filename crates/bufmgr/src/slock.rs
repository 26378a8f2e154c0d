//! PostgreSQL's spinlock (`slock_t`, `S_LOCK` / `S_UNLOCK`, `src/include/storage/s_lock.h`)
//! and its back-off (`s_lock` / `perform_spin_delay` / `finish_spin_delay`,
//! `src/backend/storage/lmgr/s_lock.c`), for the buffer header lock of every design.
//!
//! The x86_64 shape of PostgreSQL 9.2 (unchanged in later releases apart from the 9.6 split of
//! the loop into `perform_spin_delay` / `finish_spin_delay`):
//!
//! * `S_LOCK` tries one `TAS` (`lock; xchgb`, an unconditional exchange) and calls `s_lock`
//!   only if it failed;
//! * `s_lock` retries with `TAS_SPIN`, a plain read first and the exchange only when the lock
//!   looks free, with one `SPIN_DELAY` (`rep; nop`, i.e. `pause`) per try;
//! * every `spins_per_delay` tries it sleeps (`pg_usleep`), 1 ms the first time, then a random
//!   1-2× longer each time up to 1 s, wrapping back to 1 ms; after 1000 sleeps it declares the
//!   spinlock stuck (a `PANIC` in PostgreSQL, a panic here);
//! * `spins_per_delay` is the backend's own estimate, starting at 100: +100 (up to 1000) after
//!   each contended acquisition that did not sleep, -1 (down to 10) after one that did.
//!   PostgreSQL seeds a new backend from a shared average of exiting backends; here every
//!   thread starts at the default, as the first backends of a fresh cluster do.
//!
//! The number of sleeps is what PostgreSQL reports as `spindelay` and what the pool counts as
//! spin delays. Under loom a wait step is one yield and never sleeps, so that models stay
//! small.

use std::cell::Cell;

use crate::sync::{AtomicBool, Ordering, spin_hint, thread_local};

/// `DEFAULT_SPINS_PER_DELAY`.
const DEFAULT_SPINS_PER_DELAY: u32 = 100;
/// `MIN_SPINS_PER_DELAY`.
const MIN_SPINS_PER_DELAY: u32 = 10;
/// `MAX_SPINS_PER_DELAY`.
const MAX_SPINS_PER_DELAY: u32 = 1000;
/// `NUM_DELAYS`: sleeps before the spinlock is declared stuck.
const NUM_DELAYS: u32 = 1000;
/// `MIN_DELAY_USEC`: the first sleep, 1 ms.
const MIN_DELAY_USEC: u32 = 1000;
/// `MAX_DELAY_USEC`: the longest sleep, 1 s.
const MAX_DELAY_USEC: u32 = 1_000_000;

thread_local! {
    /// This backend's `spins_per_delay`.
    static SPINS_PER_DELAY: Cell<u32> = const { Cell::new(DEFAULT_SPINS_PER_DELAY) };
    /// State of this backend's `random()` for the sleep growth (xorshift32, never 0).
    static RANDOM: Cell<u32> = const { Cell::new(0x9E37_79B9) };
}

/// A random fraction in `[0, 1)` (PostgreSQL: `random() / MAX_RANDOM_VALUE`).
fn random_fraction() -> f64 {
    RANDOM.with(|r| {
        let mut x = r.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        r.set(x);
        f64::from(x) / (f64::from(u32::MAX) + 1.0)
    })
}

/// One spin loop's back-off state (`SpinDelayStatus`, `init_local_spin_delay`).
#[derive(Debug, Default)]
pub(crate) struct SpinDelayStatus {
    spins: u32,
    delays: u32,
    cur_delay: u32,
}

impl SpinDelayStatus {
    /// Fresh state (`init_local_spin_delay`).
    pub(crate) fn new() -> SpinDelayStatus {
        SpinDelayStatus::default()
    }

    /// One wait step (`perform_spin_delay`): a `pause`, and every `spins_per_delay` steps a
    /// sleep of growing length.
    ///
    /// # Panics
    /// After [`NUM_DELAYS`] sleeps in one wait ("stuck spinlock", PostgreSQL's `s_lock_stuck`).
    #[inline]
    pub(crate) fn perform(&mut self) {
        // A simulated machine books the step as PostgreSQL names a spinlock's wait.
        let _class = lockstack_common::sync::hook::wait_class(lockstack_common::sync::hook::SPIN_DELAY_CLASS);
        spin_hint();
        if cfg!(loom) {
            // One yield per step keeps models small; loom has no time to sleep for.
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
        assert!(self.delays <= NUM_DELAYS, "stuck spinlock detected (more than {NUM_DELAYS} sleeps)");
        if self.cur_delay == 0 {
            self.cur_delay = MIN_DELAY_USEC;
        }
        lockstack_common::sync::sleep(std::time::Duration::from_micros(u64::from(self.cur_delay)));
        // Grow by a random fraction between 1x and 2x; wrap back to the minimum past the maximum.
        self.cur_delay += (f64::from(self.cur_delay) * random_fraction() + 0.5) as u32;
        if self.cur_delay > MAX_DELAY_USEC {
            self.cur_delay = MIN_DELAY_USEC;
        }
        self.spins = 0;
    }

    /// Ends the wait (`finish_spin_delay`): adapts this backend's `spins_per_delay` and returns
    /// the number of sleeps.
    #[inline]
    pub(crate) fn finish(self) -> u32 {
        SPINS_PER_DELAY.with(|s| {
            let v = s.get();
            if self.cur_delay == 0 {
                // Never slept: probably a multiprocessor, spin longer next time.
                s.set((v + 100).min(MAX_SPINS_PER_DELAY));
            } else {
                s.set(v.saturating_sub(1).max(MIN_SPINS_PER_DELAY));
            }
        });
        self.delays
    }
}

/// A test-and-set spinlock (`slock_t` on x86_64: one byte, `lock; xchgb`).
#[derive(Debug)]
pub(crate) struct SLock {
    locked: AtomicBool,
}

impl SLock {
    /// An unlocked spinlock (`S_INIT_LOCK`).
    pub(crate) fn new() -> SLock {
        SLock { locked: AtomicBool::new(false) }
    }

    /// `TAS`: one atomic exchange; true if the lock was already held.
    ///
    /// Under loom a compare-and-swap instead: an exchange that fails stores `true` over `true`,
    /// which changes nothing a program can see, but loom then lets the spinner re-read its own
    /// store for ever.
    #[inline]
    fn tas(&self) -> bool {
        #[cfg(not(loom))]
        return self.locked.swap(true, Ordering::Acquire);
        #[cfg(loom)]
        return self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err();
    }

    /// `TAS_SPIN` (x86_64): a plain read, and the exchange only if the lock looks free.
    #[inline]
    fn tas_spin(&self) -> bool {
        self.locked.load(Ordering::Relaxed) || self.tas()
    }

    /// Takes the lock (`S_LOCK`: `TAS`, then `s_lock` if that failed). Returns
    /// `(contended, sleeps)`: whether the first `TAS` failed, and how many times the wait slept.
    ///
    /// # Panics
    /// If the wait sleeps more than 1000 times ("stuck spinlock").
    #[inline]
    pub(crate) fn lock(&self) -> (bool, u32) {
        if !self.tas() {
            return (false, 0);
        }
        (true, self.s_lock())
    }

    /// The contended path (`s_lock`).
    #[cold]
    fn s_lock(&self) -> u32 {
        let mut delay = SpinDelayStatus::new();
        while self.tas_spin() {
            delay.perform();
        }
        delay.finish()
    }

    /// Releases the lock (`S_UNLOCK`: a release store of 0).
    #[inline]
    pub(crate) fn unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `spins_per_delay` climbs by 100 per contended acquisition without sleeps, capped at
    /// 1000, and drops by 1 per acquisition that slept, floored at 10.
    #[test]
    fn spins_per_delay_adapts_like_s_lock() {
        std::thread::spawn(|| {
            assert_eq!(SPINS_PER_DELAY.with(Cell::get), 100);
            for want in [200, 300, 400, 500, 600, 700, 800, 900, 1000, 1000] {
                assert_eq!(SpinDelayStatus::new().finish(), 0);
                assert_eq!(SPINS_PER_DELAY.with(Cell::get), want);
            }
            SPINS_PER_DELAY.with(|s| s.set(11));
            for want in [10, 10] {
                let d = SpinDelayStatus { spins: 0, delays: 1, cur_delay: MIN_DELAY_USEC };
                assert_eq!(d.finish(), 1);
                assert_eq!(SPINS_PER_DELAY.with(Cell::get), want);
            }
        })
        .join()
        .unwrap();
    }

    /// The first sleep comes after `spins_per_delay` pauses and lasts 1 ms; later ones grow by
    /// 1-2x and wrap back to 1 ms past 1 s.
    #[test]
    fn sleeps_start_at_one_ms_and_grow() {
        std::thread::spawn(|| {
            SPINS_PER_DELAY.with(|s| s.set(10));
            let mut d = SpinDelayStatus::new();
            for _ in 0..9 {
                d.perform();
            }
            assert_eq!((d.delays, d.cur_delay), (0, 0));
            d.perform();
            assert_eq!(d.delays, 1);
            assert!((MIN_DELAY_USEC..=2 * MIN_DELAY_USEC).contains(&d.cur_delay), "{d:?}");
            let mut prev = d.cur_delay;
            for _ in 0..200 {
                d.delay();
                assert!(
                    d.cur_delay == MIN_DELAY_USEC || (d.cur_delay >= prev && d.cur_delay <= 2 * prev + 1),
                    "{prev} -> {}",
                    d.cur_delay
                );
                prev = d.cur_delay;
                if prev > 100_000 {
                    break;
                }
            }
        })
        .join()
        .unwrap();
    }

    /// Mutual exclusion: two threads adding under the lock lose no increment, and the first
    /// `TAS` reports contention only when the lock was held.
    #[test]
    fn excludes() {
        let l = std::sync::Arc::new(SLock::new());
        let n = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        assert_eq!(l.lock(), (false, 0));
        assert!(l.tas());
        l.unlock();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (l, n) = (l.clone(), n.clone());
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        l.lock();
                        // Non-atomic read-modify-write: lost updates show up without the lock.
                        let v = n.load(Ordering::Relaxed);
                        n.store(v + 1, Ordering::Relaxed);
                        l.unlock();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(n.load(Ordering::Relaxed), 40_000);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;

    /// Two threads incrementing a plain counter under the lock lose nothing.
    #[test]
    fn slock_excludes_under_loom() {
        let mut b = loom::model::Builder::new();
        // The spin loop yields to loom on every turn; give it room.
        b.max_branches = 20_000;
        b.check(|| {
            let l = loom::sync::Arc::new(SLock::new());
            let n = loom::sync::Arc::new(loom::sync::atomic::AtomicU32::new(0));
            let (l2, n2) = (l.clone(), n.clone());
            let t = loom::thread::spawn(move || {
                l2.lock();
                let v = n2.load(Ordering::Relaxed);
                n2.store(v + 1, Ordering::Relaxed);
                l2.unlock();
            });
            l.lock();
            let v = n.load(Ordering::Relaxed);
            n.store(v + 1, Ordering::Relaxed);
            l.unlock();
            t.join().unwrap();
            assert_eq!(n.load(Ordering::Relaxed), 2);
        });
    }
}
