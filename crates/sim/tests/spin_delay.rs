//! PostgreSQL's spinlock wait (`s_lock.c`, `lockstack_lwlock::SLockDelay`) on the simulated
//! machine: a waiter that runs out of `spins_per_delay` sleeps, and its sleeps are booked as
//! the wait event `Timeout:SpinDelay`, never as plain sleeping. A test binary of its own: the
//! spin schedule it sets is process-wide.
#![cfg(feature = "sim")]

use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::{self, AtomicU64, Ordering, hook};
use lockstack_lwlock::{SpinLock, SpinSchedule, set_spin_schedule};
use lockstack_sim::{MachineProfile, SimReport, Simulation, facade};

/// 8 tasks take one spinlock 20 times each and hold it for 50 µs of modelled work, long past
/// a waiter's 100 to 1000 pauses: waiters sleep. Returns the report and the sleeps the lock
/// reported.
fn contended_spinlock() -> (SimReport, u64) {
    let sim = Simulation::new(MachineProfile::builtin("xeon-32").expect("built-in profile"));
    let delays = Arc::new(CachePadded::new(AtomicU64::new(0)));
    let d2 = Arc::clone(&delays);
    let report = facade::run(&sim, move || {
        let lock = Arc::new(CachePadded::new(SpinLock::new()));
        let count = Arc::new(CachePadded::new(AtomicU64::new(0)));
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (lock, count, delays) = (Arc::clone(&lock), Arc::clone(&count), Arc::clone(&d2));
                sync::thread::spawn(move || {
                    for _ in 0..20 {
                        let slept = lock.lock();
                        delays.fetch_add(u64::from(slept), Ordering::Relaxed);
                        let v = count.load(Ordering::Relaxed);
                        hook::compute(Duration::from_micros(50));
                        count.store(v + 1, Ordering::Relaxed);
                        lock.unlock();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("worker");
        }
        assert_eq!(count.load(Ordering::Relaxed), 160, "a lost update under the spinlock");
    })
    .expect("the simulation completes");
    let delays = delays.load(Ordering::Relaxed);
    (report, delays)
}

#[test]
fn spinlock_sleeps_are_booked_as_spin_delay_not_sleeping() {
    set_spin_schedule(SpinSchedule::Postgres);
    let (r, delays) = contended_spinlock();
    set_spin_schedule(SpinSchedule::Lockstack);
    let workers = &r.stats.tasks[1..];
    assert_eq!(workers.len(), 8);
    assert!(delays > 0, "no waiter slept: the test does not exercise the back-off");
    let class = hook::SPIN_DELAY_CLASS;
    let asleep: u64 = workers.iter().filter_map(|t| t.waiting_ns.get(class)).sum();
    let spinning: u64 = workers.iter().filter_map(|t| t.spinning_ns.get(class)).sum();
    let sleeping: u64 = workers.iter().map(|t| t.sleeping_ns).sum();
    // Every sleep lasts at least s_lock.c's 1 ms, and all of it is booked under the class.
    assert!(asleep >= delays * 1_000_000, "{delays} sleeps booked as only {asleep} ns of {class}");
    assert!(spinning > 0, "the pauses before each sleep are spinning under {class}");
    assert_eq!(sleeping, 0, "spin-delay sleeps booked as sleeping");
    let other: Vec<&String> = workers
        .iter()
        .flat_map(|t| t.waiting_ns.keys().chain(t.spinning_ns.keys()))
        .filter(|c| c.as_str() != class)
        .collect();
    assert!(other.is_empty(), "waits outside {class}: {other:?}");
}
