//! The facade backend (`lockstack_sim::facade`): the lock stack's own LWLock and the facade's
//! parking, mutexes and threads run on the simulated machine, finish, repeat byte for byte,
//! book their waits under the wait event's class, and a facade deadlock is an error, not a
//! hang.
#![cfg(feature = "sim")]

use std::sync::Arc;

use crossbeam_utils::CachePadded;
use lockstack_common::sync::{self, AtomicBool, AtomicU64, Ordering};
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode, TrancheId};
use lockstack_sim::{MachineProfile, SimError, SimReport, Simulation, facade};

fn xeon() -> Simulation {
    Simulation::new(MachineProfile::builtin("xeon-32").expect("built-in profile"))
}

/// 8 tasks on 8 simulated cores take one LWLock exclusively 300 times each and count under it.
fn lwlock_contention(kind: LwLockKind) -> SimReport {
    facade::run(&xeon(), move || {
        let lock = Arc::new(CachePadded::new(LwLock::new(kind, TrancheId::LOCK_MANAGER, 0)));
        let count = Arc::new(CachePadded::new(AtomicU64::new(0)));
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (lock, count) = (Arc::clone(&lock), Arc::clone(&count));
                sync::thread::spawn(move || {
                    for _ in 0..300 {
                        let held = lock.acquire(LwLockMode::Exclusive);
                        // A read-modify-write split in two: lost updates would show a race.
                        let v = count.load(Ordering::Relaxed);
                        count.store(v + 1, Ordering::Relaxed);
                        lock.release(held);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("worker");
        }
        assert_eq!(count.load(Ordering::Relaxed), 2400);
    })
    .expect("the simulation completes")
}

/// The stats of one contention run, printed by this test binary run as a child process (two
/// runs in one process may place the allocations differently: see docs/sim.md).
#[test]
fn child_prints_lwlock_stats() {
    if std::env::var_os("FACADE_CHILD").is_some() {
        let r = lwlock_contention(LwLockKind::Atomic);
        println!("STATS {}", serde_json::to_string(&r.stats).unwrap());
    }
}

fn child_stats() -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_prints_lwlock_stats", "--nocapture", "--test-threads=1"])
        .env("FACADE_CHILD", "1")
        .output()
        .expect("the test binary runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .find_map(|l| l.split_once("STATS "))
        .map(|(_, j)| j.to_string())
        .unwrap_or_else(|| panic!("no stats: {text}"))
}

#[test]
fn lwlock_under_contention_finishes_and_repeats() {
    let a = lwlock_contention(LwLockKind::Atomic);
    assert_eq!(child_stats(), child_stats(), "two runs differ");
    assert_eq!(a.stats.tasks.len(), 9);
    assert!(a.stats.tasks.iter().all(|t| t.finished && !t.panicked));
    assert!(a.stats.max_running >= 8, "8 workers on 32 cores ran {} at once", a.stats.max_running);
    assert!(a.stats.transfers > 2400, "the lock word and the counter move between cores");
    // The workers that parked did so under the LWLock's tranche (its wait event).
    let parked_in_tranche: u64 = a.stats.tasks.iter().filter_map(|t| t.waiting_ns.get("LockManager")).sum();
    let parked_other: u64 = a.stats.tasks[1..]
        .iter()
        .flat_map(|t| t.waiting_ns.iter())
        .filter(|(k, _)| k.as_str() != "LockManager")
        .map(|(_, v)| *v)
        .sum();
    assert!(a.stats.parks > 0, "contention on 8 cores parks some waiters");
    assert!(parked_in_tranche > 0, "no wait booked under LockManager: {:?}", a.stats.tasks[1]);
    assert_eq!(parked_other, 0, "worker waits outside the tranche");
}

#[test]
fn pg92_lwlock_under_contention_finishes() {
    let r = lwlock_contention(LwLockKind::Pg92);
    assert!(r.stats.tasks.iter().all(|t| t.finished));
}

/// Two tasks hand a turn back and forth 200 times through the facade's keyed parking.
fn ping_pong() -> SimReport {
    facade::run(&xeon(), || {
        let turn = Arc::new(CachePadded::new(AtomicU64::new(0)));
        let key = |t: &Arc<CachePadded<AtomicU64>>| Arc::as_ptr(t) as usize;
        let hs: Vec<_> = (0..2u64)
            .map(|me| {
                let turn = Arc::clone(&turn);
                sync::thread::spawn(move || {
                    for round in 0..100u64 {
                        let mine = round * 2 + me;
                        sync::park_while(key(&turn), || turn.load(Ordering::Acquire) != mine);
                        turn.store(mine + 1, Ordering::Release);
                        sync::park::unpark_all(key(&turn));
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("player");
        }
        assert_eq!(turn.load(Ordering::Relaxed), 200);
    })
    .expect("the simulation completes")
}

#[test]
fn parking_ping_pong_finishes_and_repeats() {
    let a = ping_pong();
    let b = ping_pong();
    assert_eq!(serde_json::to_string(&a.stats).unwrap(), serde_json::to_string(&b.stats).unwrap());
    assert!(a.stats.wakes >= 100, "the players wake each other: {} wakes", a.stats.wakes);
    // Each hand-off pays at least a futex wake latency of virtual time.
    assert!(a.stats.virtual_ns > 100 * 1_000, "{} ns", a.stats.virtual_ns);
}

#[test]
fn facade_deadlock_is_reported() {
    let r = facade::run(&xeon(), || {
        let m = Arc::new(sync::Mutex::new(()));
        let _held = m.lock();
        let m2 = Arc::clone(&m);
        let h = sync::thread::Builder::new()
            .name("blocked".into())
            .spawn(move || {
                let _g = m2.lock();
            })
            .unwrap();
        let _ = h.join();
    });
    match r {
        Err(SimError::Deadlock { tasks, .. }) => {
            assert_eq!(tasks.len(), 2, "{tasks:?}");
            assert!(tasks.iter().any(|t| t.name == "blocked" && t.state == "parked"), "{tasks:?}");
            assert!(tasks.iter().any(|t| t.state == "joining task 1"), "{tasks:?}");
        }
        other => panic!("expected a deadlock, got {other:?}"),
    }
}

#[test]
fn measured_phase_borrows_and_runs_in_virtual_time() {
    let sim = xeon();
    let flag = AtomicBool::new(false);
    let mut elapsed = std::time::Duration::ZERO;
    let report = facade::run_phase(&sim, &mut || {
        let t0 = sync::Instant::now();
        sync::sleep(std::time::Duration::from_secs(5));
        flag.store(true, Ordering::Relaxed);
        elapsed = t0.elapsed();
    })
    .expect("the phase runs");
    assert!(flag.load(Ordering::Relaxed));
    assert!(elapsed >= std::time::Duration::from_secs(5));
    assert!(report.stats.virtual_seconds >= 5.0);
    assert!(report.host.host_seconds < 5.0, "virtual sleep took {} host s", report.host.host_seconds);
}

#[test]
fn class_names() {
    use lockstack_common::WaitEvent;
    assert_eq!(facade::class_name(WaitEvent::lwlock(TrancheId::LOCK_MANAGER).to_raw()), Some("LockManager"));
    assert_eq!(facade::class_name(WaitEvent::lock(5).to_raw()), Some("Lock:transactionid"));
    assert_eq!(facade::class_name(WaitEvent::WAL_SYNC.to_raw()), Some("IO:WALSync"));
    assert_eq!(facade::class_name(0), None);
}

/// `hook::wait_class` books a task's parks under the class it names (nested scopes restore the
/// outer one), and a park outside any class is `unclassified`: the mechanism the lock stack's
/// spinlocks, absorbed wake-ups and the harness's gates use.
#[test]
fn wait_class_scopes_book_parks_and_restore() {
    use lockstack_common::sync::hook;
    let report = facade::run(&xeon(), || {
        let m = Arc::new(sync::Mutex::new(0u32));
        let holder = {
            let m = Arc::clone(&m);
            sync::thread::spawn(move || {
                let mut g = m.lock();
                // Hold the mutex for 1 ms of virtual time: the other task parks on it.
                sync::sleep(std::time::Duration::from_millis(1));
                *g += 1;
            })
        };
        let waiter = {
            let m = Arc::clone(&m);
            sync::thread::Builder::new()
                .name("waiter".into())
                .spawn(move || {
                    sync::sleep(std::time::Duration::from_micros(100));
                    let _outer = hook::wait_class("Test:outer");
                    {
                        let _inner = hook::harness_wait(hook::HarnessWait::Start);
                        *m.lock() += 1;
                    }
                    // A timed park under the restored outer class.
                    let deadline = sync::Instant::now() + std::time::Duration::from_micros(50);
                    sync::park::park_while_until(0x10, || true, Some(deadline));
                    drop(_outer);
                    let deadline = sync::Instant::now() + std::time::Duration::from_micros(50);
                    sync::park::park_while_until(0x10, || true, Some(deadline));
                })
                .expect("spawn")
        };
        holder.join().expect("holder");
        waiter.join().expect("waiter");
        assert_eq!(*m.lock(), 2);
    })
    .expect("the simulation completes");
    let w = report.stats.tasks.iter().find(|t| t.name == "waiter").expect("the waiter's stats");
    assert_eq!(hook::HarnessWait::Start.class(), "Harness:start");
    assert!(w.waiting_ns.get("Harness:start").is_some_and(|&ns| ns > 0), "{:?}", w.waiting_ns);
    assert!(w.waiting_ns.get("Test:outer").is_some_and(|&ns| ns >= 50_000), "{:?}", w.waiting_ns);
    assert!(w.waiting_ns.get("unclassified").is_some_and(|&ns| ns >= 50_000), "{:?}", w.waiting_ns);
    assert_eq!(w.waiting_ns.len(), 3, "{:?}", w.waiting_ns);
}
