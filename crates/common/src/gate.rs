//! A start gate for benchmark threads: the workers count themselves in and wait for one flag,
//! which the timing thread sets without waiting for anyone.
//!
//! `std::sync::Barrier` wakes every waiter at once, and each must then take the barrier's mutex
//! again, one after another. With hundreds of threads on two cores the workers released first
//! run their loops while every later hand-over waits for the next thread to be scheduled:
//! `lockstack locks --threads 200 --duration 0.3` once spent 41 s there before its timing
//! thread got the mutex back, and `lockstack snapshot --threads 200` ran 99 s for four 0.3 s
//! rows. This has no PostgreSQL counterpart (pgbench starts its clients with a plain barrier
//! too, but runs far fewer threads than connections); it only keeps the harness out of what it
//! measures.

use crate::sync::{AtomicBool, AtomicUsize, Ordering, yield_now};

/// A start gate (see the module documentation). Workers call [`StartGate::arrive_and_wait`];
/// the timing thread calls [`StartGate::wait_arrived`] (or [`StartGate::open_when_arrived`]),
/// reads whatever it needs before the start, then [`StartGate::open`]. Waits spin on
/// `yield_now`, so a waiting thread gives its core to the others but stays runnable: use it
/// for the short wait before a measurement, not for long idle periods.
#[derive(Debug)]
pub struct StartGate {
    arrived: AtomicUsize,
    open: AtomicBool,
}

impl Default for StartGate {
    fn default() -> StartGate {
        StartGate::new()
    }
}

impl StartGate {
    /// A closed gate that nobody has reached.
    pub fn new() -> StartGate {
        StartGate { arrived: AtomicUsize::new(0), open: AtomicBool::new(false) }
    }

    /// A worker: counts itself in, then waits until the gate is open. Everything the timing
    /// thread did before [`open`](Self::open) happens-before this returns.
    pub fn arrive_and_wait(&self) {
        self.arrived.fetch_add(1, Ordering::AcqRel);
        // A wait of the harness, not of the lock stack under test (a simulated machine's report
        // leaves it out of the lock waits).
        let _class = crate::sync::hook::harness_wait(crate::sync::hook::HarnessWait::Start);
        while !self.open.load(Ordering::Acquire) {
            yield_now();
        }
    }

    /// Workers counted in so far.
    pub fn arrived(&self) -> usize {
        self.arrived.load(Ordering::Acquire)
    }

    /// The timing thread: waits until `workers` workers have arrived, or until `gave_up`
    /// returns true (say, when a worker's thread has finished: one that failed before arriving
    /// must not hold the timing thread here forever). Returns whether all arrived. Everything
    /// a worker did before arriving happens-before a true return.
    pub fn wait_arrived(&self, workers: usize, gave_up: impl Fn() -> bool) -> bool {
        loop {
            if self.arrived() >= workers {
                return true;
            }
            if gave_up() {
                return false;
            }
            yield_now();
        }
    }

    /// Opens the gate: every waiting and later worker goes on.
    pub fn open(&self) {
        self.open.store(true, Ordering::Release);
    }

    /// [`wait_arrived`](Self::wait_arrived), then [`open`](Self::open) whatever it returned.
    pub fn open_when_arrived(&self, workers: usize, gave_up: impl Fn() -> bool) {
        self.wait_arrived(workers, gave_up);
        self.open();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
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
                        let arrived = gate.arrived();
                        passed.fetch_add(1, Ordering::AcqRel);
                        arrived
                    })
                })
                .collect();
            gate.open_when_arrived(workers, || handles.iter().any(|h| h.is_finished()));
            for h in handles {
                assert_eq!(h.join().unwrap(), workers, "a worker passed before everyone had arrived");
            }
        });
        assert_eq!(passed.load(Ordering::Acquire), workers);
    }

    /// A worker that ends before reaching the gate (a failed set-up) does not hold the timing
    /// thread there forever, and the others still go on.
    #[test]
    fn a_worker_that_never_arrives_does_not_hold_the_gate_shut() {
        let gate = StartGate::new();
        std::thread::scope(|s| {
            let handles = [s.spawn(|| gate.arrive_and_wait()), s.spawn(|| ())];
            assert!(!gate.wait_arrived(2, || handles[1].is_finished()));
            gate.open();
            for h in handles {
                h.join().unwrap();
            }
        });
        assert_eq!(gate.arrived(), 1);
    }
}
