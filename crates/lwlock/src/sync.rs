//! The crate's only door to atomics, thread-locals and thread parking, so that `--cfg loom`
//! can swap every one of them for loom's model-checked versions (the tokio / crossbeam facade
//! pattern).
//!
//! Production waits park through `parking_lot_core` keyed by the waiter's address; under loom
//! they use `loom::thread::park` and an unpark handle captured before the wake-up flag is
//! cleared, because after that store the waiter's memory may be gone.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, fence};
#[cfg(not(loom))]
pub(crate) use std::thread_local;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, fence};
#[cfg(loom)]
pub(crate) use loom::thread_local;

/// A mutex for data that the protocol already serialises (group requests), so it is never
/// contended; under loom it is loom's, so the model sees the hand-off.
pub(crate) struct Mutex<T> {
    #[cfg(not(loom))]
    inner: parking_lot::Mutex<T>,
    #[cfg(loom)]
    inner: loom::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) fn new(v: T) -> Mutex<T> {
        Mutex {
            #[cfg(not(loom))]
            inner: parking_lot::Mutex::new(v),
            #[cfg(loom)]
            inner: loom::sync::Mutex::new(v),
        }
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        #[cfg(not(loom))]
        {
            f(&mut self.inner.lock())
        }
        #[cfg(loom)]
        {
            f(&mut self.inner.lock().unwrap())
        }
    }
}

/// Busy-wait hint inside spin loops (a real `pause`, or a loom yield point).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Gives the CPU away (after spinning did not help).
#[inline]
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// Who to wake: captured *before* the waiter's flag is cleared (see the module docs).
pub(crate) struct Unparker {
    key: usize,
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl Unparker {
    /// Wakes the parked thread (or makes its next park return at once).
    pub(crate) fn unpark(self) {
        #[cfg(not(loom))]
        // SAFETY: `unpark_one` only hashes the key and walks parking_lot's own queue; the key need
        // not point to live memory, and the callback neither panics nor calls into parking_lot.
        unsafe {
            parking_lot_core::unpark_one(self.key, |_| parking_lot_core::DEFAULT_UNPARK_TOKEN);
        }
        #[cfg(loom)]
        {
            let _ = self.key;
            self.thread.unpark();
        }
    }
}

/// The identity of a thread that may park: its parking key and, under loom, its handle.
pub(crate) struct ParkHandle {
    #[cfg(loom)]
    thread: loom::thread::Thread,
}

impl ParkHandle {
    pub(crate) fn current() -> ParkHandle {
        ParkHandle {
            #[cfg(loom)]
            thread: loom::thread::current(),
        }
    }

    /// An unparker for this thread parked on `key`.
    pub(crate) fn unparker(&self, key: usize) -> Unparker {
        Unparker {
            key,
            #[cfg(loom)]
            thread: self.thread.clone(),
        }
    }
}

/// Parks the calling thread on `key` for as long as `still_waiting()` holds. Returns only when
/// it does not: spurious wake-ups are absorbed here.
pub(crate) fn park_while(key: usize, still_waiting: impl Fn() -> bool) {
    while still_waiting() {
        #[cfg(not(loom))]
        // SAFETY: `validate` runs under parking_lot's bucket lock, only loads an atomic, and
        // cannot panic or call into parking_lot; the other callbacks are empty. A waker clears
        // the condition before `unpark_one(key)`, which takes the same bucket lock, so a wake-up
        // cannot slip between the check and the sleep.
        unsafe {
            parking_lot_core::park(
                key,
                &still_waiting,
                || {},
                |_, _| {},
                parking_lot_core::DEFAULT_PARK_TOKEN,
                None,
            );
        }
        #[cfg(loom)]
        {
            let _ = key;
            loom::thread::park();
        }
    }
}
