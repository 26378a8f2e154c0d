//! Micro-experiments that exercise one subsystem crate at a time.

pub mod buffers;
pub mod locks;
pub mod lwlock;
pub mod wal;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Lets a micro-benchmark's workers start together while its timing thread goes on at once.
///
/// `std::sync::Barrier` wakes every waiter, and each must then take the barrier's mutex again,
/// one after another. With hundreds of threads on two cores the workers released first run
/// their loops while each later hand-over waits for the next thread to be scheduled: `lockstack
/// locks --threads 200 --duration 0.3` once spent 41 s there before the timing thread got the
/// mutex back (and 56 s at 256 threads). Here a worker counts itself in and then waits,
/// yielding the CPU, for one flag, which the timing thread sets without waiting for anyone.
pub(crate) struct StartGate {
    arrived: AtomicUsize,
    open: AtomicBool,
}

impl StartGate {
    /// A closed gate nobody has reached.
    pub(crate) const fn new() -> StartGate {
        StartGate { arrived: AtomicUsize::new(0), open: AtomicBool::new(false) }
    }

    /// A worker: counts itself in, then waits until the gate opens.
    pub(crate) fn arrive_and_wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        while !self.open.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// The timing thread: waits until `workers` workers have arrived, or until `gave_up` says
    /// one of them ended before arriving (a worker that failed must not hold the rest at the
    /// gate forever), then opens the gate.
    pub(crate) fn open_when_arrived(&self, workers: usize, gave_up: impl Fn() -> bool) {
        while self.arrived.load(Ordering::Acquire) < workers && !gave_up() {
            std::thread::yield_now();
        }
        self.open.store(true, Ordering::Release);
    }
}

/// The interval a micro-benchmark's workers ran in, from the first one's start to the last
/// one's end, given each worker's (start, end); `fallback` when there is none. With many more
/// threads than cores the workers that leave the start barrier first may run long before the
/// timing thread is scheduled again, so its own clock would miss part of the counted work.
fn workers_interval(spans: impl Iterator<Item = (Instant, Instant)>, fallback: Duration) -> Duration {
    spans
        .fold(None, |acc: Option<(Instant, Instant)>, (a, b)| {
            Some(acc.map_or((a, b), |(lo, hi)| (lo.min(a), hi.max(b))))
        })
        .map_or(fallback, |(lo, hi)| hi - lo)
}

/// `lockstack snapshot`: snapshot takers against committers per ProcArray layout; the workload
/// lives with the crate it measures (`lockstack_procarray::workload`).
pub use lockstack_procarray::workload as snapshot;

#[cfg(test)]
mod gate_tests {
    use super::StartGate;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Nobody passes the gate before every worker has arrived, and then all do.
    #[test]
    fn the_gate_opens_only_when_every_worker_has_arrived() {
        let gate = StartGate::new();
        let passed = AtomicUsize::new(0);
        let workers = 24;
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        gate.arrive_and_wait();
                        // Every worker must already have counted itself in.
                        let arrived = gate.arrived.load(Ordering::Acquire);
                        passed.fetch_add(1, Ordering::AcqRel);
                        arrived
                    })
                })
                .collect();
            gate.open_when_arrived(workers, || handles.iter().any(|h| h.is_finished()));
            for h in handles {
                assert_eq!(h.join().unwrap(), workers);
            }
        });
        assert_eq!(passed.load(Ordering::Acquire), workers);
    }

    /// A worker that ends before reaching the gate (a failed set-up) does not hold the others
    /// there forever.
    #[test]
    fn a_worker_that_never_arrives_does_not_hold_the_gate_shut() {
        let gate = StartGate::new();
        std::thread::scope(|s| {
            let handles = [s.spawn(|| gate.arrive_and_wait()), s.spawn(|| ())];
            gate.open_when_arrived(2, || handles.iter().any(|h| h.is_finished()));
            for h in handles {
                h.join().unwrap();
            }
        });
        assert_eq!(gate.arrived.load(Ordering::Acquire), 1);
    }
}
