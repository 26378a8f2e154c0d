//! What the std and loom lock modules share: the timed-wait result and the one-shot latch.

use super::{Condvar, Mutex};

/// Whether a timed wait ended by its time-out (`parking_lot`'s `WaitTimeoutResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub(crate) fn new(timed_out: bool) -> WaitTimeoutResult {
        WaitTimeoutResult(timed_out)
    }
}

impl WaitTimeoutResult {
    /// True when the wait returned because the time-out passed.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

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
