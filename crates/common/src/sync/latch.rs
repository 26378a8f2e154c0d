//! The one-shot latch ([`Latch`]), over the facade's mutex and condition variable (the only
//! locks it takes).

use super::lock::{Condvar, Mutex};

/// A one-shot wake-up flag with sleep, PostgreSQL's process latch as `ProcWaitForSignal` /
/// `ProcSendSignal` use it (`src/backend/storage/lmgr/proc.c`, PostgreSQL 9.x-15).
///
/// [`set`](Self::set) before [`wait`](Self::wait) is not lost: the flag stays set and the next
/// wait returns at once, consuming it.
#[derive(Debug, Default)]
pub struct Latch {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Latch {
    /// A latch that is not set.
    pub fn new() -> Latch {
        Latch { set: Mutex::new(false), cv: Condvar::new() }
    }

    /// Sets the flag and wakes the sleeper, if any.
    pub fn set(&self) {
        *self.set.lock() = true;
        self.cv.notify_all();
    }

    /// Sleeps until the flag is set, then clears it.
    pub fn wait(&self) {
        let mut g = self.set.lock();
        while !*g {
            self.cv.wait(&mut g);
        }
        *g = false;
    }
}
