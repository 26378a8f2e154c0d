//! WAL insertion and flush: one `WALInsertLock` (9.2) against 1, 8 and 32 insertion locks
//! (9.4+), at 2 and 16 threads, with 50-, 200- and 2000-byte records (memory sink, 512 WAL
//! buffers); the one-thread 100-byte case behind the 5 M records/s target; and synchronous
//! commits with a modelled 50 µs flush at 1, 4 and 16 threads, where group commit lets one
//! flush serve many commits.
//!
//! Throughput is reported both as records (or commits) per second and as WAL bytes per second
//! (record header and alignment included). 16 threads on a 2-core machine measure the
//! scheduler as much as the locks; the `lockstack wal` counters say which.
//!
//! Run: `cargo bench -p lockstack-benches --bench xlog`.

use std::hint::black_box;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main, measurement::WallTime,
};
use lockstack_common::TransactionId;
use lockstack_xlog::ptr::maxalign;
use lockstack_xlog::{InsertMode, Record, Wal, WalBackend, WalConfig, WalSink};

/// Runs `op` `iters` times on each backend, one thread per backend, all released together;
/// returns the wall time until the last one finishes.
fn run_backends(backends: &mut [WalBackend], iters: u64, op: impl Fn(&mut WalBackend) + Sync) -> Duration {
    let barrier = Barrier::new(backends.len() + 1);
    std::thread::scope(|s| {
        for b in backends.iter_mut() {
            let (barrier, op) = (&barrier, &op);
            s.spawn(move || {
                barrier.wait();
                for _ in 0..iters {
                    op(b);
                }
            });
        }
        barrier.wait();
        Instant::now()
    })
    .elapsed()
}

fn wal(mode: InsertMode, sink: WalSink) -> Arc<Wal> {
    Wal::open(WalConfig { insert_mode: mode, sink, ..WalConfig::default() }).expect("valid WAL settings")
}

fn configure(g: &mut BenchmarkGroup<'_, WallTime>) {
    g.warm_up_time(Duration::from_millis(300));
    g.measurement_time(Duration::from_secs(1));
    g.sample_size(10);
}

fn throughput(records: u64, payload: usize) -> Throughput {
    Throughput::ElementsAndBytes { elements: records, bytes: records * maxalign(24 + payload as u64) }
}

const MODES: [InsertMode; 4] = [
    InsertMode::SingleLock,
    InsertMode::InsertionLocks(1),
    InsertMode::InsertionLocks(8),
    InsertMode::InsertionLocks(32),
];

fn insert_one_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal_insert_1thread_100B");
    configure(&mut g);
    g.throughput(throughput(1, 100));
    let data = vec![7u8; 100];
    for mode in MODES {
        let w = wal(mode, WalSink::Memory);
        let mut b = w.attach_auxiliary();
        let rec = Record { rmid: 10, info: 0, xid: TransactionId(1000), data: &data };
        g.bench_function(mode.to_string(), |bench| bench.iter(|| black_box(b.insert(&rec).expect("insert"))));
    }
    g.finish();
}

fn insert_contended(c: &mut Criterion) {
    for threads in [2usize, 16] {
        for size in [50usize, 200, 2000] {
            let mut g = c.benchmark_group(format!("wal_insert_{threads}threads_{size}B"));
            configure(&mut g);
            g.throughput(throughput(threads as u64, size));
            let data = vec![7u8; size];
            for mode in MODES {
                let w = wal(mode, WalSink::Memory);
                let mut backends: Vec<WalBackend> = (0..threads).map(|_| w.attach_auxiliary()).collect();
                let rec = Record { rmid: 10, info: 0, xid: TransactionId(1000), data: &data };
                g.bench_function(mode.to_string(), |bench| {
                    bench.iter_custom(|iters| {
                        run_backends(&mut backends, iters, |b| {
                            black_box(b.insert(&rec).expect("insert"));
                        })
                    })
                });
            }
            g.finish();
        }
    }
}

fn flush_group_commit(c: &mut Criterion) {
    let mut g = c.benchmark_group("wal_commit_flush50us_100B");
    configure(&mut g);
    let data = vec![7u8; 100];
    for threads in [1usize, 4, 16] {
        g.throughput(throughput(threads as u64, 100));
        let w =
            wal(InsertMode::InsertionLocks(8), WalSink::Modelled { flush_delay: Duration::from_micros(50) });
        let mut backends: Vec<WalBackend> = (0..threads).map(|_| w.attach_auxiliary()).collect();
        let rec = Record { rmid: 1, info: 0, xid: TransactionId(1000), data: &data };
        g.bench_function(format!("{threads}threads"), |bench| {
            bench.iter_custom(|iters| {
                run_backends(&mut backends, iters, |b| {
                    let end = b.insert(&rec).expect("insert");
                    b.commit(end).expect("commit");
                })
            })
        });
        let st = w.stats();
        eprintln!(
            "  {threads} threads: {} commits needed a flush, {} flushes, {} served by another backend's flush",
            st.flush_requests, st.flushes, st.flushed_by_others
        );
    }
    g.finish();
}

criterion_group!(benches, insert_one_thread, insert_contended, flush_group_commit);
criterion_main!(benches);
