//! Loom model of the start gate: under every interleaving, no worker passes the gate before
//! all have arrived, the timing thread's writes before `open` are seen by every worker, and
//! the workers' writes before arriving are seen by the timing thread.
//!
//! `RUSTFLAGS="--cfg loom" cargo test --release -p lockstack-common --test loom_gate`

#![cfg(loom)]

use lockstack_common::StartGate;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};

/// One worker beside the timing thread: with two, both spinning, the model's state space is
/// too large to explore in CI's time.
const WORKERS: usize = 1;

#[test]
fn workers_pass_only_after_all_arrived_and_see_the_timing_threads_writes() {
    // Both sides spin (yielding) until the other moves, so the model needs more branches than
    // loom's default allows.
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 10_000;
    builder.check(|| {
        let gate = Arc::new(StartGate::new());
        let before_open = Arc::new(AtomicUsize::new(0));
        let before_arrive = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..WORKERS)
            .map(|_| {
                let (gate, before_open, before_arrive) =
                    (Arc::clone(&gate), Arc::clone(&before_open), Arc::clone(&before_arrive));
                loom::thread::spawn(move || {
                    before_arrive.fetch_add(1, Ordering::Relaxed);
                    gate.arrive_and_wait();
                    assert_eq!(gate.arrived(), WORKERS, "passed before every worker arrived");
                    assert_eq!(
                        before_open.load(Ordering::Relaxed),
                        1,
                        "the timing thread's write is not visible"
                    );
                })
            })
            .collect();
        assert!(gate.wait_arrived(WORKERS, || false));
        assert_eq!(before_arrive.load(Ordering::Relaxed), WORKERS, "a worker's write is not visible");
        before_open.store(1, Ordering::Relaxed);
        gate.open();
        for w in workers {
            w.join().unwrap();
        }
    });
}
