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
//! The wait itself (the pauses, sleeps and the adaptation) is `lockstack_lwlock::SLockDelay`,
//! the one the LWLock spin paths use under PostgreSQL's schedule; each sleep is booked as the
//! wait event `Timeout:SpinDelay`.
//!
//! The number of sleeps is what PostgreSQL reports as `spindelay` and what the pool counts as
//! spin delays. Under loom a wait step is one yield and never sleeps, so that models stay
//! small.

use crate::sync::{AtomicBool, Ordering};

/// One spin loop's back-off state: `s_lock.c`'s wait, shared with the LWLock spin paths
/// (`lockstack_lwlock::SLockDelay`), with the spinning booked as a spinlock's wait on a
/// simulated machine.
#[derive(Debug, Default)]
pub(crate) struct SpinDelayStatus(lockstack_lwlock::SLockDelay);

impl SpinDelayStatus {
    /// Fresh state (`init_local_spin_delay`).
    pub(crate) fn new() -> SpinDelayStatus {
        SpinDelayStatus::default()
    }

    /// One wait step (`perform_spin_delay`): a `pause`, and every `spins_per_delay` steps a
    /// sleep of growing length, booked as `Timeout:SpinDelay`.
    ///
    /// # Panics
    /// After 1000 sleeps in one wait ("stuck spinlock", PostgreSQL's `s_lock_stuck`).
    #[inline]
    pub(crate) fn perform(&mut self) {
        // A simulated machine books the step as PostgreSQL names a spinlock's wait.
        let _class = lockstack_common::sync::hook::wait_class(lockstack_common::sync::hook::SPIN_DELAY_CLASS);
        self.0.perform();
    }

    /// Ends the wait (`finish_spin_delay`): adapts this backend's `spins_per_delay` and returns
    /// the number of sleeps.
    #[inline]
    pub(crate) fn finish(self) -> u32 {
        self.0.finish()
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
