//! Shared helpers for the workspace's criterion benchmarks.
//!
//! Criterion times one routine per sample; contended benchmarks need several threads doing the
//! work together. [`run_threads`] is the `iter_custom` body for that: it starts `threads`
//! threads, releases them together with a barrier, lets each run `iters` operations, and returns
//! the wall time from release until the last thread finishes. With
//! `Throughput::Elements(threads)` criterion then reports total operations per second.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use lockstack_bufmgr::{BufferPool, BufferTag};
use lockstack_common::{BlockNumber, Oid};
use lockstack_lwlock::{Pg92RwLock, ReadBiasedRwLock, RwLock};

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

/// The two operations the LWLock benchmarks (`benches/lwlock.rs`, `examples/lwlock_ratio.rs`)
/// time on every lock, behind one `&dyn BenchLock` so that each row pays the same call.
///
/// Every row is a typed reader-writer lock over a `u64` and runs the same body: a shared hold
/// reads the value, an exclusive hold increments it. The LWLocks take part through
/// `lock_api::RwLock<RawLwLock<_>, u64>` (the crate's `RwLock`, `Pg92RwLock`,
/// `ReadBiasedRwLock`), so their guards know the mode statically, exactly like parking_lot's
/// and std's guards do.
pub trait BenchLock: Sync {
    /// Takes the lock shared, reads the value, releases.
    fn shared(&self);
    /// Takes the lock exclusive, increments the value, releases.
    fn exclusive(&self);
}

macro_rules! bench_lock_api {
    ($($t:ty),*) => {$(
        impl BenchLock for $t {
            #[inline]
            fn shared(&self) {
                black_box(*self.read());
            }
            #[inline]
            fn exclusive(&self) {
                *self.write() += 1;
            }
        }
    )*};
}

bench_lock_api!(Pg92RwLock<u64>, RwLock<u64>, ReadBiasedRwLock<u64>, parking_lot::RwLock<u64>);

impl BenchLock for std::sync::RwLock<u64> {
    #[inline]
    fn shared(&self) {
        black_box(*self.read().expect("bench lock is never poisoned"));
    }
    #[inline]
    fn exclusive(&self) {
        *self.write().expect("bench lock is never poisoned") += 1;
    }
}

/// A lock at the start of a 4 KiB page of its own. Every row is wrapped, so that where the
/// allocator happens to put a lock cannot favour any row: with locks placed by the allocator
/// (or only cache-line aligned), an A/A comparison of two identical `atomic` locks
/// (`lwlock_ratio` with `LWLOCK_RATIO_AA=1`) read 1.10x in some runs and 1.00x in others for
/// exclusive lock+unlock; with every lock at the same offset within its page it reads 1.00x
/// every time (4 KiB aliasing between the lock's and other recently stored addresses is the
/// likely cause).
#[repr(align(4096))]
pub struct Aligned<L>(pub L);

impl<L: BenchLock> BenchLock for Aligned<L> {
    #[inline]
    fn shared(&self) {
        self.0.shared();
    }
    #[inline]
    fn exclusive(&self) {
        self.0.exclusive();
    }
}

/// The hot-pin workload of `bufmgr/hot_pin_2t` and `examples/hot_pin.rs` (seed 004's "many
/// backends pin one buffer"): `threads` threads, each with its own backend, each doing `pairs`
/// pin+unpin pairs of block 0 of `rel`, with the mapping look-up (`read_block`) or without it
/// (`read_recent`: the buffer header only). Returns the wall time from the common start.
///
/// # Panics
/// If block 0 of `rel` is not resident in `pool` (create it first) or a thread panics.
pub fn hot_pin(pool: &Arc<BufferPool>, rel: Oid, threads: usize, pairs: u64, lookup: bool) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            let (pool, barrier) = (Arc::clone(pool), &barrier);
            s.spawn(move || {
                let bb = pool.attach_auxiliary();
                let recent = bb.read_block(rel, BlockNumber(0)).expect("block 0 is resident");
                bb.release(recent);
                barrier.wait();
                for _ in 0..pairs {
                    let b = if lookup {
                        bb.read_block(rel, BlockNumber(0)).expect("block 0 is resident")
                    } else {
                        bb.read_recent(BufferTag::main(rel, 0), recent).expect("block 0 is resident")
                    };
                    bb.release(b);
                }
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}
