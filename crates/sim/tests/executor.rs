//! The executor's checks: virtual-time order, determinism, deadlock reports, time slicing,
//! park/unpark, sleep and timed park, task-locals, join.

mod common;

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Padded, cas, exact, fetch_add, load, profile};
use lockstack_sim::{ClockMode, SimConfig, SimError, Simulation, TaskId, task};

#[test]
fn tasks_run_in_virtual_time_order() {
    let log: Arc<Mutex<Vec<(Duration, u32)>>> = Arc::default();
    let l = Arc::clone(&log);
    let report = exact(profile(1, 4, 1, 1e6))
        .run(move || {
            let hs: Vec<TaskId> = (0..4u32)
                .map(|i| {
                    let l = Arc::clone(&l);
                    task::spawn(
                        &format!("w{i}"),
                        Box::new(move || {
                            for k in 0..50u64 {
                                // Different, uneven amounts of local work per task.
                                task::compute(
                                    Duration::from_nanos(7 + 13 * u64::from(i) + (k % 5) * 3),
                                    Location::caller(),
                                );
                                let t = task::now();
                                l.lock().unwrap().push((t, i));
                            }
                        }),
                    )
                })
                .collect();
            for h in hs {
                task::join(h).unwrap();
            }
        })
        .unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 200);
    assert!(log.windows(2).all(|w| w[0].0 <= w[1].0), "operations out of virtual-time order: {log:?}");
    // The tasks interleave (a run-to-completion executor would log them one after another).
    let switches = log.windows(2).filter(|w| w[0].1 != w[1].1).count();
    assert!(switches > 20, "only {switches} switches between tasks");
    assert_eq!(report.stats.tasks.len(), 5);
}

/// A mixed workload: a CAS spinlock with parking, counters, sleeps, on 2 sockets.
fn mixed(sim: &Simulation) -> lockstack_sim::SimReport {
    sim.run(|| {
        let lock = Arc::new(Padded::default());
        let counter = Arc::new(Padded::default());
        let waiters = Arc::new(Mutex::new(Vec::<TaskId>::new()));
        task::name_line(&lock.0 as *const AtomicU64 as usize, "test spinlock");
        let hs: Vec<TaskId> = (0..8)
            .map(|i| {
                let (lock, counter, waiters) =
                    (Arc::clone(&lock), Arc::clone(&counter), Arc::clone(&waiters));
                task::spawn(
                    &format!("backend {i}"),
                    Box::new(move || {
                        for k in 0..40 {
                            let mut spins = 0;
                            let _g = task::wait_class("test spinlock");
                            while !cas(&lock.0, 0, 1) {
                                spins += 1;
                                if spins < 4 {
                                    task::spin_hint(Location::caller());
                                } else {
                                    waiters.lock().unwrap().push(task::current_task());
                                    task::park(Some(Duration::from_micros(50)));
                                }
                            }
                            drop(_g);
                            fetch_add(&counter.0);
                            lock.0.store(0, Ordering::SeqCst);
                            task::atomic(
                                &lock.0 as *const AtomicU64 as usize,
                                8,
                                lockstack_sim::Access::Write,
                                Location::caller(),
                            );
                            let w: Vec<TaskId> = waiters.lock().unwrap().drain(..).collect();
                            for t in w {
                                task::unpark(t);
                            }
                            if k % 10 == 0 {
                                task::sleep(Duration::from_micros(3));
                            }
                        }
                    }),
                )
            })
            .collect();
        for h in hs {
            task::join(h).unwrap();
        }
        assert_eq!(load(&counter.0), 320);
    })
    .unwrap()
}

#[test]
fn deterministic_mode_repeats_byte_for_byte() {
    let sim = Simulation::new(profile(2, 2, 2, 20_000.0));
    let a = serde_json::to_string(&mixed(&sim).stats).unwrap();
    let b = serde_json::to_string(&mixed(&sim).stats).unwrap();
    assert_eq!(a, b);
    assert!(a.contains("test spinlock"), "the named line is reported: {a}");
    // With a calibrated table (a measured pass), the deterministic mode still repeats.
    let table = sim.calibrate(|| {
        mixed_inner();
    });
    let table = table.unwrap();
    assert!(!table.segments.is_empty());
    let det =
        sim.clone().with_config(SimConfig { clock: ClockMode::Deterministic(table), ..SimConfig::default() });
    let c = serde_json::to_string(&mixed(&det).stats).unwrap();
    let d = serde_json::to_string(&mixed(&det).stats).unwrap();
    assert_eq!(c, d);
}

/// A small workload for the calibration pass.
fn mixed_inner() {
    let c = Arc::new(Padded::default());
    let hs: Vec<TaskId> = (0..4)
        .map(|_| {
            let c = Arc::clone(&c);
            task::spawn(
                "w",
                Box::new(move || {
                    for _ in 0..20 {
                        fetch_add(&c.0);
                    }
                }),
            )
        })
        .collect();
    for h in hs {
        task::join(h).unwrap();
    }
}

#[test]
fn a_task_blocked_forever_is_reported_as_a_deadlock() {
    let err = exact(profile(1, 2, 1, 1e6))
        .run(|| {
            let h = task::spawn(
                "stuck",
                Box::new(|| {
                    let _g = task::wait_class("LWLock:test");
                    task::park(None);
                }),
            );
            task::join(h).unwrap();
        })
        .unwrap_err();
    let SimError::Deadlock { tasks, .. } = &err else { panic!("expected a deadlock, got {err}") };
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].state, "joining task 1");
    assert_eq!(tasks[1].state, "parked");
    assert_eq!(tasks[1].class.as_deref(), Some("LWLock:test"));
    assert!(tasks[1].site.contains("executor.rs"), "the wait site names the caller: {}", tasks[1].site);
    let msg = err.to_string();
    assert!(msg.contains("\"stuck\": parked"), "{msg}");
}

#[test]
fn time_slicing_with_more_tasks_than_hardware_threads() {
    let ends: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let e = Arc::clone(&ends);
    let report = exact(profile(1, 2, 1, 1_000_000.0))
        .run(move || {
            let hs: Vec<TaskId> = (0..4)
                .map(|_| {
                    let e = Arc::clone(&e);
                    task::spawn(
                        "cpu",
                        Box::new(move || {
                            for _ in 0..20 {
                                task::compute(Duration::from_micros(500), Location::caller());
                            }
                            let t = task::now();
                            e.lock().unwrap().push(t);
                        }),
                    )
                })
                .collect();
            for h in hs {
                task::join(h).unwrap();
            }
        })
        .unwrap();
    let s = &report.stats;
    assert_eq!(s.max_running, 2, "never more running tasks than hardware threads");
    assert!(s.preemptions >= 10, "preemptions: {}", s.preemptions);
    for t in &s.tasks[1..] {
        assert!(t.runnable_ns > 1_000_000, "{} waited {} ns for a core", t.name, t.runnable_ns);
        assert_eq!(t.running_ns, 10_000_000);
    }
    // 40 ms of work on 2 threads: everyone ends near 20 ms, none at 10 ms as without slicing.
    let ends = ends.lock().unwrap();
    assert!(
        ends.iter().all(|&t| t >= Duration::from_millis(17) && t <= Duration::from_millis(23)),
        "{ends:?}"
    );
}

#[test]
fn park_unpark_pays_the_futex_latency_and_keeps_the_token() {
    let seen: Arc<Mutex<Vec<(Duration, bool)>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    exact(profile(1, 4, 1, 1e7))
        .run(move || {
            let s3 = Arc::clone(&s2);
            let w = task::spawn(
                "waiter",
                Box::new(move || {
                    let r = task::park(None);
                    let t = task::now();
                    s3.lock().unwrap().push((t, r));
                }),
            );
            task::sleep(Duration::from_millis(1));
            let t0 = task::now();
            s2.lock().unwrap().push((t0, true));
            task::unpark(w);
            task::join(w).unwrap();
            // An unpark before the park is not lost.
            let s4 = Arc::clone(&s2);
            let w2 = task::spawn(
                "early",
                Box::new(move || {
                    task::sleep(Duration::from_millis(1));
                    let before = task::now();
                    let r = task::park(None);
                    let d = task::now() - before;
                    s4.lock().unwrap().push((d, r));
                }),
            );
            task::unpark(w2);
            task::join(w2).unwrap();
        })
        .unwrap();
    let seen = seen.lock().unwrap();
    let (t0, _) = seen[0];
    let (tw, r) = seen[1];
    assert!(r, "park returns true when unparked");
    // The waker pays futex_wake (200 ns), the wakee runs futex_wake_latency (5 us) later.
    assert_eq!(tw - t0, Duration::from_nanos(5_200));
    let (d, r) = seen[2];
    assert!(r);
    assert_eq!(d, Duration::from_nanos(10), "a pending token is consumed at the cost of one RMW");
}

#[test]
fn sleep_and_timed_park_run_in_virtual_time() {
    let seen: Arc<Mutex<Vec<(Duration, bool)>>> = Arc::default();
    let s2 = Arc::clone(&seen);
    let report = exact(profile(1, 2, 1, 1e7))
        .run(move || {
            let t0 = task::now();
            task::sleep(Duration::from_secs(5));
            let t1 = task::now();
            s2.lock().unwrap().push((t1 - t0, true));
            let r = task::park(Some(Duration::from_secs(2)));
            let d = task::now() - t1;
            s2.lock().unwrap().push((d, r));
        })
        .unwrap();
    let seen = seen.lock().unwrap();
    // syscall 100 ns + 5 s + wake latency 5 us.
    assert_eq!(seen[0].0, Duration::from_secs(5) + Duration::from_nanos(5_100));
    // futex wait 100 ns + 2 s + wake latency 5 us; false: timed out.
    assert_eq!(seen[1], (Duration::from_secs(2) + Duration::from_nanos(5_100), false));
    assert!(report.stats.virtual_seconds > 7.0);
    assert_eq!(report.stats.tasks[0].sleeping_ns, 5_000_005_000);
    assert_eq!(report.stats.tasks[0].waiting_ns["unclassified"], 2_000_005_000);
}

#[test]
fn task_locals_are_per_task_and_dropped_inside_the_task() {
    struct Probe(Arc<AtomicU64>);
    impl Drop for Probe {
        fn drop(&mut self) {
            if task::is_simulated() {
                // An operation in a task-local's destructor runs as part of the task.
                fetch_add(&self.0);
            }
        }
    }
    let drops = Arc::new(AtomicU64::new(0));
    let d2 = Arc::clone(&drops);
    exact(profile(1, 2, 1, 1e7))
        .run(move || {
            let hs: Vec<TaskId> = (0..3u64)
                .map(|i| {
                    let d = Arc::clone(&d2);
                    task::spawn(
                        "l",
                        Box::new(move || {
                            for _ in 0..=i {
                                task::with_local(
                                    7,
                                    || (Probe(Arc::clone(&d)), std::cell::Cell::new(0u64)),
                                    |(_, c)| c.set(c.get() + 1),
                                );
                            }
                            let n = task::with_local(
                                7,
                                || (Probe(Arc::clone(&d)), std::cell::Cell::new(0u64)),
                                |(_, c)| c.get(),
                            );
                            assert_eq!(n, i + 1, "each task has its own value");
                        }),
                    )
                })
                .collect();
            for h in hs {
                task::join(h).unwrap();
            }
        })
        .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

#[test]
fn join_returns_the_panic_and_a_panicking_main_is_an_error() {
    let report = exact(profile(1, 2, 1, 1e7)).run(|| {
        let h = task::spawn("boom", Box::new(|| panic!("task exploded")));
        let e = task::join(h).unwrap_err();
        assert_eq!(e.downcast_ref::<&str>(), Some(&"task exploded"));
    });
    let report = report.unwrap();
    assert!(report.stats.tasks[1].panicked);
    let err = exact(profile(1, 2, 1, 1e7)).run(|| panic!("main exploded")).unwrap_err();
    assert!(matches!(&err, SimError::MainPanicked(m) if m == "main exploded"), "{err}");
}

#[test]
fn abandoned_tasks_are_torn_down_when_main_returns() {
    let report = exact(profile(1, 2, 1, 1e7))
        .run(|| {
            task::spawn(
                "forever",
                Box::new(|| {
                    loop {
                        task::park(None);
                    }
                }),
            );
            task::sleep(Duration::from_millis(1));
        })
        .unwrap();
    assert!(!report.stats.tasks[1].finished);
    assert!(report.stats.tasks[0].finished);
}

/// The call site of this line, as a `&'static Location`.
#[track_caller]
fn here() -> &'static Location<'static> {
    Location::caller()
}

fn key(a: &Location<'_>, b: &Location<'_>) -> String {
    format!("{}:{}:{} -> {}:{}:{}", a.file(), a.line(), a.column(), b.file(), b.line(), b.column())
}

#[test]
fn an_operation_after_long_local_work_waits_for_earlier_operations() {
    // Task A computes 1 us, then runs a 3 us segment (from the table) before its RMW: the RMW
    // starts at 4 us. Task B computes 2 us and does its RMW at once: it starts at 2 us. B's
    // RMW must take effect first, although A is resumed first (at 1 us).
    let (a1, a2, b1, b2) = (here(), here(), here(), here());
    let mut table = lockstack_sim::SegmentTable::default();
    table.segments.insert(key(a1, a2), lockstack_sim::SegmentCost { ns: 3000.0, samples: 1 });
    // B's segment is in the table at 0 (a key the table lacked would cost the mean of its
    // file pair, which A's segment shares).
    table.segments.insert(key(b1, b2), lockstack_sim::SegmentCost { ns: 0.0, samples: 1 });
    let sim = Simulation::new(profile(1, 4, 1, 1e7)).with_config(SimConfig {
        clock: ClockMode::Deterministic(table),
        default_segment_ns: 0.0,
        ..SimConfig::default()
    });
    let got: Arc<Mutex<Vec<(&'static str, u64)>>> = Arc::default();
    let g = Arc::clone(&got);
    sim.run(move || {
        let x = Arc::new(Padded::default());
        let spawn = |name: &'static str,
                     d_ns: u64,
                     s1: &'static Location<'static>,
                     s2: &'static Location<'static>| {
            let (x, g) = (Arc::clone(&x), Arc::clone(&g));
            task::spawn(
                name,
                Box::new(move || {
                    common::sleep_until(Duration::from_millis(1));
                    task::compute(Duration::from_nanos(d_ns), s1);
                    task::atomic(&x.0 as *const AtomicU64 as usize, 8, lockstack_sim::Access::Rmw, s2);
                    let old = x.0.fetch_add(1, Ordering::SeqCst);
                    g.lock().unwrap().push((name, old));
                }),
            )
        };
        let a = spawn("A", 1_000, a1, a2);
        let b = spawn("B", 2_000, b1, b2);
        task::join(a).unwrap();
        task::join(b).unwrap();
    })
    .unwrap();
    let mut got = got.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, vec![("A", 1), ("B", 0)], "B's earlier RMW takes effect first");
}
