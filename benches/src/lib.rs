//! Shared helpers for the workspace's criterion benchmarks.
//!
//! Criterion times one routine per sample; contended benchmarks need several threads doing the
//! work together. [`run_threads`] is the `iter_custom` body for that: it starts `threads`
//! threads, releases them together with a barrier, lets each run `iters` operations, and returns
//! the wall time from release until the last thread finishes. With
//! `Throughput::Elements(threads)` criterion then reports total operations per second.

use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Runs `op(thread_index, iteration)` `iters` times on each of `threads` threads, all started
/// together, and returns the elapsed wall time.
///
/// # Panics
/// If `threads` is 0 or a thread panics.
pub fn run_threads<F>(threads: usize, iters: u64, op: F) -> Duration
where
    F: Fn(usize, u64) + Sync,
{
    assert!(threads > 0, "at least one thread");
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, op) = (&barrier, &op);
            s.spawn(move || {
                barrier.wait();
                for i in 0..iters {
                    op(t, i);
                }
            });
        }
        barrier.wait();
        let start = Instant::now();
        // Scope end joins every thread.
        start
    })
    .elapsed()
}
