//! LWLock implementations against parking_lot and std: uncontended shared and exclusive
//! lock+unlock, 2 threads 90% shared / 10% exclusive, 2 threads exclusive only, and 16 threads
//! (oversubscribed on a 2-core machine: that case measures parking, not cache traffic).
//!
//! Run: `cargo bench -p lockstack-benches --bench lwlock`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};
use lockstack_benches::run_threads;
use lockstack_lwlock::{AtomicLwLock, LwLockImpl, LwLockMode, Pg92LwLock, ReadBiasedLwLock, TrancheId};

/// The operations a benchmark needs from a lock.
trait BenchLock: Sync {
    fn shared(&self);
    fn exclusive(&self);
}

struct Lw<L>(L);

impl<L: LwLockImpl> BenchLock for Lw<L> {
    #[inline]
    fn shared(&self) {
        let h = self.0.acquire(LwLockMode::Shared);
        black_box(&h);
        self.0.release(h);
    }
    #[inline]
    fn exclusive(&self) {
        let h = self.0.acquire(LwLockMode::Exclusive);
        black_box(&h);
        self.0.release(h);
    }
}

impl BenchLock for parking_lot::RwLock<u64> {
    #[inline]
    fn shared(&self) {
        black_box(*self.read());
    }
    #[inline]
    fn exclusive(&self) {
        *self.write() += 1;
    }
}

impl BenchLock for std::sync::RwLock<u64> {
    #[inline]
    fn shared(&self) {
        black_box(*self.read().unwrap());
    }
    #[inline]
    fn exclusive(&self) {
        *self.write().unwrap() += 1;
    }
}

fn locks() -> Vec<(&'static str, Box<dyn BenchLock>)> {
    let t = TrancheId::register("bench");
    vec![
        ("pg92", Box::new(Lw(Pg92LwLock::with_id(t, 0)))),
        ("atomic", Box::new(Lw(AtomicLwLock::with_id(t, 1)))),
        ("read-biased", Box::new(Lw(ReadBiasedLwLock::with_id(t, 2)))),
        ("parking_lot", Box::new(parking_lot::RwLock::new(0u64))),
        ("std", Box::new(std::sync::RwLock::new(0u64))),
    ]
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended_shared");
    configure(&mut g);
    g.throughput(Throughput::Elements(1));
    for (name, lock) in locks() {
        g.bench_function(name, |b| b.iter(|| lock.shared()));
    }
    g.finish();
    let mut g = c.benchmark_group("uncontended_exclusive");
    configure(&mut g);
    g.throughput(Throughput::Elements(1));
    for (name, lock) in locks() {
        g.bench_function(name, |b| b.iter(|| lock.exclusive()));
    }
    g.finish();
}

fn contended(c: &mut Criterion, group: &str, threads: usize, exclusive_every: u64) {
    let mut g = c.benchmark_group(group);
    configure(&mut g);
    g.sample_size(20);
    g.throughput(Throughput::Elements(threads as u64));
    for (name, lock) in locks() {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                run_threads(threads, iters, |t, i| {
                    if (i + t as u64).is_multiple_of(exclusive_every) {
                        lock.exclusive();
                    } else {
                        lock.shared();
                    }
                })
            })
        });
    }
    g.finish();
}

fn two_threads_90_10(c: &mut Criterion) {
    contended(c, "2_threads_90_shared", 2, 10);
}

fn two_threads_exclusive(c: &mut Criterion) {
    contended(c, "2_threads_exclusive", 2, 1);
}

fn sixteen_threads(c: &mut Criterion) {
    contended(c, "16_threads_90_shared_oversubscribed", 16, 10);
}

criterion_group!(benches, uncontended, two_threads_90_10, two_threads_exclusive, sixteen_threads);
criterion_main!(benches);
