//! The lock stack reaches an installed simulation backend only through the sync facade: an
//! LWLock acquire/release and a whole micro-benchmark run (threads, start gate, clock, sleeps,
//! lock traffic) under a counting backend report each kind of operation, from the crates'
//! own source lines.

use std::sync::Arc;
use std::time::Duration;

use lockstack_common::TrancheId;
use lockstack_common::sync::hook::{self, Counting, Op, Simulation};
use lockstack_lwlock::{LwLock, LwLockKind};
use lockstack_workloads::micro::lwlock::{LockUnderTest, LwLockBenchConfig, run};

fn install() -> (hook::InstallGuard, Arc<Counting>) {
    let c = Arc::new(Counting::new());
    (hook::install(Simulation::new(Box::new(c.clone()))), c)
}

#[test]
fn an_lwlock_acquire_and_release_go_through_the_hook() {
    for kind in LwLockKind::ALL {
        let (_g, c) = install();
        let lock = LwLock::new(kind, TrancheId::PROC_ARRAY, 0);
        drop(lock.exclusive());
        drop(lock.shared());
        let file = match kind {
            LwLockKind::Pg92 => "lwlock/src/pg92.rs",
            LwLockKind::Atomic => "lwlock/src/atomic.rs",
            LwLockKind::ReadBiased => "lwlock/src/read_biased.rs",
        };
        let rmw = c.count_in(Op::AtomicRmw, file);
        let loads = c.count_in(Op::AtomicRead, file);
        assert!(rmw + loads >= 2, "{}: {rmw} RMWs and {loads} loads reached the hook", kind.name());
    }
}

#[test]
fn contended_lwlocks_park_and_count_through_the_hook() {
    let (_g, c) = install();
    let lock = LwLock::new(LwLockKind::Atomic, TrancheId::PROC_ARRAY, 0);
    let n = lockstack_common::sync::AtomicU64::new(0);
    lockstack_common::sync::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..2000 {
                    let _x = lock.exclusive();
                    let v = n.load(lockstack_common::sync::Ordering::Relaxed);
                    n.store(v + 1, lockstack_common::sync::Ordering::Relaxed);
                }
            });
        }
    });
    assert_eq!(n.load(lockstack_common::sync::Ordering::Relaxed), 4000, "no update lost");
    assert_eq!(c.count(Op::Spawn), 2);
    assert_eq!(c.count(Op::Join), 2);
    assert!(c.count_in(Op::AtomicRmw, "lwlock/src/atomic.rs") >= 8000, "every acquire and release is an RMW");
    // The waiter record is a per-task thread-local (taken on the first slow path, if any) and
    // every park the lock made was matched by a wake-up.
    assert!(c.count(Op::Unpark) >= c.count(Op::Park) / 2);
}

#[test]
fn a_micro_benchmark_run_goes_through_the_hook() {
    let (_g, c) = install();
    let cfg = LwLockBenchConfig {
        locks: vec![LockUnderTest::Atomic],
        threads: 2,
        duration: Duration::from_millis(20),
        shared_ratio: 0.5,
        hold_ns: 0,
        seed: 1,
        wait_sampling_hz: 0,
        spin_rounds: 0,
    };
    let report = run(&cfg).expect("the run works under the counting backend");
    assert_eq!(report.rows.len(), 1);
    assert!(c.count(Op::Spawn) >= 2, "workers are spawned through the facade");
    assert!(c.count(Op::Join) >= 2);
    assert!(c.count(Op::Sleep) >= 1, "the timing thread sleeps through the facade");
    assert!(c.count(Op::Now) >= 2, "the clock is read through the facade");
    assert!(c.count(Op::Yield) >= 1, "the start gate yields through the facade");
    assert!(c.count_in(Op::AtomicRmw, "lwlock/src/atomic.rs") > 0);
    assert!(c.count_in(Op::AtomicRead, "micro/lwlock.rs") > 0, "the stop flag is a facade atomic");
    assert!(c.count(Op::TaskLocal) > 0, "LWLock stats go through facade thread-locals");
}
