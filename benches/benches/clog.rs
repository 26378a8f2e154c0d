//! CLOG benchmarks: `get_status` on a resident page (hit) and through a pool too small for the
//! pages read (miss), `set_tree_status` on a resident page, each with the 9.2-16 control lock
//! and with PostgreSQL 17's banks; plus two-thread runs of the same (hit reads, group vs
//! locked commits).
//!
//! `cargo bench -p lockstack-benches --bench clog`

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstack_benches::run_threads;
use lockstack_clog::{CLOG_XACTS_PER_PAGE, Clog, ClogConfig, SlruLocking, XidStatus};
use lockstack_common::{BackendId, TransactionId};

const LOCKINGS: [SlruLocking; 2] = [SlruLocking::ControlLock, SlruLocking::Banks];

fn clog(buffers: usize, locking: SlruLocking, group_update: bool) -> Clog {
    Clog::new(ClogConfig { buffers, locking, group_update, ..ClogConfig::default() }).expect("clog")
}

fn get_status(c: &mut Criterion) {
    let mut g = c.benchmark_group("clog/get_status");
    g.throughput(Throughput::Elements(1));
    for locking in LOCKINGS {
        // Hit: 128 buffers, one resident page.
        let cl = clog(128, locking, true);
        cl.set_tree_status(TransactionId(1000), &[], XidStatus::Committed, 0).unwrap();
        let mut i = 0u32;
        g.bench_function(BenchmarkId::new("hit", locking), |b| {
            b.iter(|| {
                i = (i + 97) % CLOG_XACTS_PER_PAGE;
                black_box(cl.get_status(TransactionId(i)).unwrap())
            })
        });
        // Miss: 32 buffers (control: one bank of 32; banks: two of 16), 128 pages in turn, so
        // every look-up reads a page and evicts a clean one.
        let cl = clog(32, locking, true);
        let mut p = 0u32;
        g.bench_function(BenchmarkId::new("miss", locking), |b| {
            b.iter(|| {
                p = (p + 1) % 128;
                black_box(cl.get_status(TransactionId(p * CLOG_XACTS_PER_PAGE + 5)).unwrap())
            })
        });
    }
    g.finish();
}

fn set_status(c: &mut Criterion) {
    let mut g = c.benchmark_group("clog/set_tree_status");
    g.throughput(Throughput::Elements(1));
    for locking in LOCKINGS {
        for group in [false, true] {
            let cl = clog(128, locking, group);
            cl.extend(TransactionId::FIRST_NORMAL).unwrap();
            let mut i = 0u32;
            let name = if group { "group" } else { "locked" };
            g.bench_function(BenchmarkId::new(name, locking), |b| {
                b.iter(|| {
                    // Re-committing a committed xid is allowed, so the page can be reused.
                    i = (i + 1) % (CLOG_XACTS_PER_PAGE - 3);
                    cl.set_tree_status_as(
                        Some(BackendId(0)),
                        TransactionId(i + 3),
                        &[],
                        XidStatus::Committed,
                        0,
                    )
                    .unwrap()
                })
            });
        }
    }
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("clog/2threads");
    g.throughput(Throughput::Elements(2));
    for locking in LOCKINGS {
        // Two readers, resident pages 0 and 1 (one bank each with banks).
        let cl = clog(32, locking, true);
        cl.extend(TransactionId::FIRST_NORMAL).unwrap();
        cl.extend(TransactionId(CLOG_XACTS_PER_PAGE)).unwrap();
        g.bench_function(BenchmarkId::new("get_status_hit", locking), |b| {
            b.iter_custom(|iters| {
                run_threads(2, iters, |t, i| {
                    let xid = t as u32 * CLOG_XACTS_PER_PAGE + (i as u32 * 7) % 30_000 + 3;
                    black_box(cl.get_status(TransactionId(xid)).unwrap());
                })
            })
        });
        // Two committers on one page: the group update against taking the lock each time.
        for group in [false, true] {
            let cl = clog(32, locking, group);
            cl.extend(TransactionId::FIRST_NORMAL).unwrap();
            let name = if group { "set_status_group" } else { "set_status_locked" };
            g.bench_function(BenchmarkId::new(name, locking), |b| {
                b.iter_custom(|iters| {
                    run_threads(2, iters, |t, i| {
                        let xid = 3 + t as u32 + 2 * ((i as u32) % 16_000);
                        cl.set_tree_status_as(
                            Some(BackendId(t as u32)),
                            TransactionId(xid),
                            &[],
                            XidStatus::Committed,
                            0,
                        )
                        .unwrap();
                    })
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1));
    targets = get_status, set_status, two_threads
}
criterion_main!(benches);
