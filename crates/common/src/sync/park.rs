//! Parking a thread on a key until a condition clears: `parking_lot_core`'s address-keyed
//! queues in production, loom's `park`/`unpark` under `--cfg loom`, and the installed
//! backend's tasks under a simulation.
//!
//! The protocol (PostgreSQL's `PGSemaphoreLock` / `PGSemaphoreUnlock` pair): the waiter
//! publishes that it waits (a flag in its own memory), then calls [`park_while`] with the flag's
//! address as the key; the waker takes the waiter's [`Unparker`] *before* it clears the flag
//! (after that store the waiter may return and its memory be gone), clears it, then calls
//! [`Unparker::unpark`]. The condition is re-checked under the key's queue lock, so a wake-up
//! cannot slip between the check and the sleep.

#[cfg(not(loom))]
use super::hook;
use super::time::Instant;

/// Who to wake: captured *before* the waiter's flag is cleared (see the module docs).
#[derive(Debug)]
pub struct Unparker {
    key: usize,
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl Unparker {
    /// Wakes the thread parked on this key (or makes its next park return at once).
    #[inline]
    pub fn unpark(self) {
        #[cfg(not(loom))]
        unpark_one(self.key);
        #[cfg(loom)]
        {
            let _ = self.key;
            self.thread.unpark();
        }
    }
}

/// The identity of a thread that may park: under loom its thread handle; nothing otherwise
/// (the key names the sleeper).
#[derive(Debug)]
pub struct ParkHandle {
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl ParkHandle {
    /// The calling thread's handle.
    #[inline]
    pub fn current() -> ParkHandle {
        ParkHandle {
            #[cfg(loom)]
            thread: loom::thread::current(),
        }
    }

    /// An unparker for this thread parked on `key`.
    #[inline]
    pub fn unparker(&self, key: usize) -> Unparker {
        Unparker {
            key,
            #[cfg(loom)]
            thread: self.thread.clone(),
        }
    }
}

/// Parks the calling thread on `key` for as long as `still_waiting()` holds. Returns only when
/// it does not: spurious wake-ups are absorbed here.
///
/// `still_waiting` runs under the key's queue lock (parking_lot's bucket lock): it must only
/// load atomics, and must not panic or park.
pub fn park_while(key: usize, still_waiting: impl Fn() -> bool) {
    park_while_until(key, still_waiting, None);
}

/// As [`park_while`], but gives up at `deadline`: returns `true` when `still_waiting()` cleared,
/// `false` when the deadline passed first. Under loom there is no clock: the deadline is
/// ignored and the call waits for the condition.
pub fn park_while_until(key: usize, still_waiting: impl Fn() -> bool, deadline: Option<Instant>) -> bool {
    #[cfg(not(loom))]
    {
        if let Some(r) = hook::with_current(|s| {
            let d = deadline.map(|d| d.virtual_since_start());
            hook::park_keyed(s, key, &still_waiting, d)
        }) {
            return r;
        }
        let std_deadline = deadline.map(|d| d.std());
        while still_waiting() {
            // SAFETY: `validate` runs under parking_lot's bucket lock and, by this function's
            // contract, only loads atomics and cannot panic or call into parking_lot; the other
            // callbacks are empty. A waker clears the condition before `unpark_one(key)`, which
            // takes the same bucket lock, so a wake-up cannot slip between check and sleep.
            let r = unsafe {
                parking_lot_core::park(
                    key,
                    &still_waiting,
                    || {},
                    |_, _| {},
                    parking_lot_core::DEFAULT_PARK_TOKEN,
                    std_deadline,
                )
            };
            if matches!(r, parking_lot_core::ParkResult::TimedOut) {
                return !still_waiting();
            }
        }
        true
    }
    #[cfg(loom)]
    {
        let _ = (key, deadline);
        while still_waiting() {
            loom::thread::park();
        }
        true
    }
}

/// Wakes one thread parked on `key` (production and simulation; under loom wake-ups go
/// through [`Unparker`]). Returns whether one was woken.
#[cfg(not(loom))]
#[inline]
pub fn unpark_one(key: usize) -> bool {
    if let Some(n) = hook::with_current(|s| hook::unpark_keyed(s, key, false)) {
        return n > 0;
    }
    // SAFETY: `unpark_one` only hashes the key and walks parking_lot's own queue; the key need
    // not point to live memory, and the callback neither panics nor calls into parking_lot.
    let r = unsafe { parking_lot_core::unpark_one(key, |_| parking_lot_core::DEFAULT_UNPARK_TOKEN) };
    r.unparked_threads > 0
}

/// Wakes every thread parked on `key`; returns how many.
#[cfg(not(loom))]
#[inline]
pub fn unpark_all(key: usize) -> usize {
    if let Some(n) = hook::with_current(|s| hook::unpark_keyed(s, key, true)) {
        return n;
    }
    // SAFETY: as for `unpark_one`: parking_lot only uses the key as a hash-table key.
    unsafe { parking_lot_core::unpark_all(key, parking_lot_core::DEFAULT_UNPARK_TOKEN) }
}
