//! ProcArray benchmarks (seed 000 and PostgreSQL 14's snapshot work):
//!
//! * `get_snapshot_data/<layout>/<backends>/<pct>`: one snapshot (plus the read-only end of
//!   transaction that clears xmin) with `backends` members of which `pct`% hold an xid. For
//!   `dense` the snapshot is computed every time (reuse off); `dense-reused` measures the
//!   cached path (nothing commits, so every snapshot is reused).
//! * `end_xact/<strategy>`: assign an xid and end the transaction, 2 threads at once, with 100
//!   idle members; reports total transactions per second.
//!
//! Run: `cargo bench -p lockstack-benches --bench procarray`.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstack_common::BackendId;
use lockstack_procarray::{Backend, EndXactStrategy, Layout, ProcArray, ProcArrayConfig};

/// A ProcArray with `n` members (backend 0 is the snapshot taker), `running` of the others
/// holding xids spread through the array, and one commit after them so xmax covers them.
fn setup(layout: Layout, reuse: bool, n: usize, running: usize) -> (Arc<ProcArray>, Backend, Vec<Backend>) {
    let mut cfg = ProcArrayConfig::new(n);
    cfg.layout = layout;
    cfg.snapshot_reuse = reuse;
    let pa = ProcArray::new(cfg).expect("valid config");
    let mut others: Vec<Backend> =
        (1..n).map(|i| pa.attach(BackendId(i as u32)).expect("free slot")).collect();
    let step = others.len() / running.max(1);
    for k in 0..running {
        others[k * step].assign_xid();
    }
    let mut me = pa.attach(BackendId(0)).expect("free slot");
    me.assign_xid();
    me.end_transaction();
    me.get_snapshot_data();
    me.end_transaction();
    (pa, me, others)
}

fn snapshots(c: &mut Criterion) {
    let mut g = c.benchmark_group("get_snapshot_data");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(30);
    g.throughput(Throughput::Elements(1));
    for &n in &[100usize, 1000, 5000] {
        for &pct in &[1usize, 10] {
            let running = n * pct / 100;
            let cases = [
                (Layout::Pgproc, false, "pgproc"),
                (Layout::Pgxact, false, "pgxact"),
                (Layout::PgxactPadded, false, "pgxact-padded"),
                (Layout::Dense, false, "dense"),
                (Layout::Dense, true, "dense-reused"),
            ];
            for (layout, reuse, name) in cases {
                let (_pa, mut me, _others) = setup(layout, reuse, n, running);
                assert_eq!(me.get_snapshot_data().xip.len(), running);
                me.end_transaction();
                g.bench_with_input(BenchmarkId::new(name, format!("{n}/{pct}%")), &(), |b, _| {
                    b.iter(|| {
                        black_box(me.get_snapshot_data());
                        me.end_transaction();
                    })
                });
            }
        }
    }
    // The 9.1 loop (subxid header of every backend, general comparisons) for the record.
    let mut cfg91 = |n: usize, running: usize| {
        let mut cfg = ProcArrayConfig::pg91(n);
        cfg.lwlock_kind = Default::default();
        let pa = ProcArray::new(cfg).expect("valid config");
        let mut others: Vec<Backend> =
            (1..n).map(|i| pa.attach(BackendId(i as u32)).expect("slot")).collect();
        let step = others.len() / running.max(1);
        for k in 0..running {
            others[k * step].assign_xid();
        }
        let mut me = pa.attach(BackendId(0)).expect("slot");
        me.assign_xid();
        me.end_transaction();
        g.bench_function(BenchmarkId::new("pgproc-9.1-loop", format!("{n}/1%")), |b| {
            b.iter(|| {
                black_box(me.get_snapshot_data());
                me.end_transaction();
            })
        });
        drop(others);
    };
    cfg91(1000, 10);
    g.finish();
}

fn end_xact(c: &mut Criterion) {
    let mut g = c.benchmark_group("end_xact");
    g.warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(2));
    g.sample_size(20);
    g.throughput(Throughput::Elements(2));
    for strategy in EndXactStrategy::ALL {
        let mut cfg = ProcArrayConfig::new(102);
        cfg.end_xact = strategy;
        let pa = ProcArray::new(cfg).expect("valid config");
        let _idle: Vec<Backend> = (2..102).map(|i| pa.attach(BackendId(i)).expect("slot")).collect();
        g.bench_function(BenchmarkId::new(strategy.name(), "2 threads"), |b| {
            b.iter_custom(|iters| {
                let barrier = Barrier::new(3);
                std::thread::scope(|s| {
                    for t in 0..2u32 {
                        let pa = &pa;
                        let barrier = &barrier;
                        s.spawn(move || {
                            let mut me = pa.attach(BackendId(t)).expect("slot");
                            barrier.wait();
                            for _ in 0..iters {
                                me.assign_xid();
                                black_box(me.end_transaction());
                            }
                            barrier.wait();
                            me.detach();
                        });
                    }
                    barrier.wait();
                    let t0 = Instant::now();
                    barrier.wait();
                    t0.elapsed()
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, snapshots, end_xact);
criterion_main!(benches);
