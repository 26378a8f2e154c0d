//! Heavyweight lock manager: AccessShareLock lock+unlock through a fast-path slot against the
//! main table on one thread; two threads locking the same relation with and without fast
//! path; two threads on different relations with 1, 16 and 128 main-table partitions.
//!
//! Run: `cargo bench -p lockstack-benches --bench lmgr`.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use lockstack_common::{BackendId, Oid};
use lockstack_lmgr::{FastPath, Lmgr, LmgrConfig, LockMode};

fn lmgr(fast_path: FastPath, partitions: usize, backends: usize) -> Arc<Lmgr> {
    Lmgr::new(LmgrConfig { max_backends: backends, partitions, fast_path, ..LmgrConfig::default() })
        .expect("valid config")
}

/// `threads` backends each doing `iters` lock+unlock pairs on relation `rel(thread)`, started
/// together; returns the wall time.
fn run(l: &Arc<Lmgr>, threads: usize, iters: u64, rel: impl Fn(usize) -> u32 + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, rel, l) = (&barrier, &rel, l);
            s.spawn(move || {
                let mut b = l.attach(BackendId(t as u32)).expect("backend");
                b.start_transaction();
                let r = Oid(rel(t));
                barrier.wait();
                for _ in 0..iters {
                    black_box(b.lock_relation(r, LockMode::AccessShare).expect("no conflict"));
                    b.unlock_relation(r, LockMode::AccessShare);
                }
                b.end_transaction();
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("lmgr/lock_unlock_1thread");
    g.throughput(Throughput::Elements(1));
    for (name, fp) in [("fast_path", FastPath::PG92), ("main_table", FastPath::Off)] {
        let l = lmgr(fp, 16, 1);
        let mut b = l.attach(BackendId(0)).expect("backend");
        b.start_transaction();
        g.bench_function(name, |bench| {
            bench.iter(|| {
                black_box(b.lock_relation(Oid(16384), LockMode::AccessShare).expect("free"));
                b.unlock_relation(Oid(16384), LockMode::AccessShare);
            })
        });
        b.end_transaction();
    }
    g.finish();
}

fn two_threads_same_relation(c: &mut Criterion) {
    let mut g = c.benchmark_group("lmgr/2threads_same_relation");
    g.throughput(Throughput::Elements(2));
    for (name, fp) in [("fast_path", FastPath::PG92), ("main_table", FastPath::Off)] {
        let l = lmgr(fp, 16, 2);
        g.bench_function(name, |bench| bench.iter_custom(|iters| run(&l, 2, iters, |_| 16384)));
    }
    g.finish();
}

fn partitions(c: &mut Criterion) {
    let mut g = c.benchmark_group("lmgr/2threads_main_table_partitions");
    g.throughput(Throughput::Elements(2));
    for parts in [1usize, 16, 128] {
        let l = lmgr(FastPath::Off, parts, 2);
        g.bench_function(format!("{parts}"), |bench| {
            bench.iter_custom(|iters| run(&l, 2, iters, |t| 16384 + t as u32))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(2)).warm_up_time(Duration::from_millis(500));
    targets = single_thread, two_threads_same_relation, partitions
}
criterion_main!(benches);
