//! The crate's only door to the atomics and the sleep/wake-up primitive that the loom models
//! check (`tests/loom_pins.rs`), so that `--cfg loom` swaps them for loom's versions.
//!
//! Buffer header state, tags, the clock hand and the pin-count waiter's latch go through here.
//! Page contents and per-backend counters stay plain memory or `std` atomics even under loom:
//! page bytes are protected by content locks (which loom does model, inside `lockstack_lwlock`),
//! and counters have a single writer.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64};

/// Busy-wait hint inside spin loops (a real `pause`, or a loom yield point).
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// A one-shot wake-up flag with sleep, PostgreSQL's process latch as `ProcWaitForSignal` /
/// `ProcSendSignal` use it for the cleanup-lock waiter (`proc.c`).
///
/// [`set`](Self::set) before [`wait`](Self::wait) is not lost: the flag stays set and the next
/// wait returns at once, consuming it.
pub(crate) struct Latch {
    #[cfg(not(loom))]
    set: parking_lot::Mutex<bool>,
    #[cfg(not(loom))]
    cv: parking_lot::Condvar,
    #[cfg(loom)]
    set: loom::sync::Mutex<bool>,
    #[cfg(loom)]
    cv: loom::sync::Condvar,
}

impl Latch {
    pub(crate) fn new() -> Latch {
        Latch {
            #[cfg(not(loom))]
            set: parking_lot::Mutex::new(false),
            #[cfg(not(loom))]
            cv: parking_lot::Condvar::new(),
            #[cfg(loom)]
            set: loom::sync::Mutex::new(false),
            #[cfg(loom)]
            cv: loom::sync::Condvar::new(),
        }
    }

    /// Sets the flag and wakes the sleeper, if any.
    pub(crate) fn set(&self) {
        #[cfg(not(loom))]
        {
            *self.set.lock() = true;
            self.cv.notify_all();
        }
        #[cfg(loom)]
        {
            *self.set.lock().unwrap() = true;
            self.cv.notify_all();
        }
    }

    /// Sleeps until the flag is set, then clears it.
    pub(crate) fn wait(&self) {
        #[cfg(not(loom))]
        {
            let mut g = self.set.lock();
            while !*g {
                self.cv.wait(&mut g);
            }
            *g = false;
        }
        #[cfg(loom)]
        {
            let mut g = self.set.lock().unwrap();
            while !*g {
                g = self.cv.wait(g).unwrap();
            }
            *g = false;
        }
    }
}

impl std::fmt::Debug for Latch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Latch")
    }
}
