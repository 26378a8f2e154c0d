//! Buffer manager benchmarks: the hit path (look-up + pin + unpin) per header design and per
//! mapping table on one thread; two threads pinning one hot buffer, per header design (9.2
//! header spinlock, 9.6 atomic state word, and the later `atomic-sub` / `atomic-add` state
//! words); and misses through a small pool (clock sweep under eviction pressure) per victim
//! strategy.
//!
//! `cargo bench -p lockstack-benches --bench bufmgr`; the two-thread target alone:
//! `cargo bench -p lockstack-benches --bench bufmgr -- hot_pin_2t`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstack_benches::hot_pin;
use lockstack_bufmgr::{
    BufferPool, BufferPoolConfig, ForkNumber, HeaderKind, LwLockKind, LwLockMode, MappingKind, VictimKind,
    page,
};
use lockstack_common::{BlockNumber, Oid};

const REL: Oid = Oid(16384);

fn pool(
    nbuffers: usize,
    header: HeaderKind,
    mapping: MappingKind,
    victim: VictimKind,
    blocks: u32,
) -> Arc<BufferPool> {
    let lwlock = if header == HeaderKind::Spinlock { LwLockKind::Pg92 } else { LwLockKind::Atomic };
    let p = BufferPool::in_memory(BufferPoolConfig {
        nbuffers,
        header,
        mapping,
        victim,
        lwlock_kind: lwlock,
        ..BufferPoolConfig::default()
    })
    .expect("pool");
    let bb = p.attach_auxiliary();
    for _ in 0..blocks {
        let (b, _) = bb.extend(REL, ForkNumber::Main).expect("extend");
        let mut g = bb.lock(b, LwLockMode::Exclusive);
        page::init(g.page_mut(), 0);
        g.mark_dirty();
        drop(g);
        bb.release(b);
    }
    p.flush_all().expect("flush");
    p
}

fn hit(c: &mut Criterion) {
    let mut g = c.benchmark_group("bufmgr/hit");
    g.throughput(Throughput::Elements(1));
    for header in HeaderKind::EVERY {
        let p = pool(1024, header, MappingKind::PARTITIONS_128, VictimKind::AtomicClock, 256);
        let bb = p.attach_auxiliary();
        let mut i = 0u32;
        g.bench_function(BenchmarkId::new("header", header), |b| {
            b.iter(|| {
                i = (i + 97) % 256;
                let buf = bb.read_block(REL, BlockNumber(i)).expect("hit");
                bb.release(black_box(buf));
            })
        });
    }
    for mapping in [MappingKind::PARTITIONS_16, MappingKind::PARTITIONS_128, MappingKind::DashMap] {
        let p = pool(2048, HeaderKind::Atomic, mapping, VictimKind::AtomicClock, 1024);
        let bb = p.attach_auxiliary();
        let mut i = 0u32;
        g.bench_function(BenchmarkId::new("mapping", mapping), |b| {
            b.iter(|| {
                i = (i + 97) % 1024;
                let buf = bb.read_block(REL, BlockNumber(i)).expect("hit");
                bb.release(black_box(buf));
            })
        });
    }
    g.finish();
}

/// Two threads, one buffer: `pin/<header>` is the header alone (`read_recent` + release), the
/// comparison of the "atomic pins at least 1.5x the header spinlock" target; `read/<header>` adds the
/// mapping look-up under the partition LWLock (9.2 LWLocks for the spinlock header, 9.5+
/// atomic LWLocks for the others), as `lockstack buffers --scenario hot-pin` does.
/// Throughput counts pin+unpin pairs of both threads.
fn hot_pin_2t(c: &mut Criterion) {
    let mut g = c.benchmark_group("bufmgr/hot_pin_2t");
    // One iteration is one pair on each thread.
    g.throughput(Throughput::Elements(2));
    for header in HeaderKind::EVERY {
        let p = pool(64, header, MappingKind::PARTITIONS_128, VictimKind::AtomicClock, 1);
        g.bench_function(BenchmarkId::new("pin", header), |b| {
            b.iter_custom(|iters| hot_pin(&p, REL, 2, iters, false))
        });
        g.bench_function(BenchmarkId::new("read", header), |b| {
            b.iter_custom(|iters| hot_pin(&p, REL, 2, iters, true))
        });
    }
    g.finish();
}

fn clock_sweep(c: &mut Criterion) {
    let mut g = c.benchmark_group("bufmgr/clock_sweep");
    g.throughput(Throughput::Elements(1));
    for victim in VictimKind::ALL {
        // 64 buffers, 256 clean blocks read in turn: every read evicts.
        let header =
            if victim == VictimKind::FreelistLock { HeaderKind::Spinlock } else { HeaderKind::Atomic };
        let p = pool(64, header, MappingKind::PARTITIONS_128, victim, 256);
        let bb = p.attach_auxiliary();
        let mut i = 0u32;
        g.bench_function(BenchmarkId::new("miss", victim), |b| {
            b.iter(|| {
                i = (i + 1) % 256;
                let buf = bb.read_block(REL, BlockNumber(i)).expect("miss");
                bb.release(black_box(buf));
            })
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = hit, hot_pin_2t, clock_sweep }
criterion_main!(benches);
