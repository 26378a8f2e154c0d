//! B-tree look-up benchmarks: one key looked up in pgbench_accounts' primary key at scale 10
//! (1,000,000 dense keys, root + internal + leaf), per page search (`--set
//! engine.btree_search`): PostgreSQL's bisection (`_bt_binsrch`, with the whole leaf
//! prefetched) against interpolation from the parent's key range (Graefe, DaMoN 2006). Keys are
//! drawn at random, so most leaves are not in the CPU caches, as in `pgbench -S`; each look-up
//! pins and share-locks the three levels, as the engine's does.
//!
//! `cargo bench -p lockstack-benches --bench btree`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use lockstack_bufmgr::{BufferPool, BufferPoolConfig, LwLockKind};
use lockstack_common::Oid;
use lockstack_engine::btree::{BTree, Search, Tid};

/// pgbench_accounts' rows at scale 10.
const KEYS: i64 = 1_000_000;

fn lookup(c: &mut Criterion) {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(8192)).expect("pool");
    let bb = pool.attach_auxiliary();
    let tid = |k: i64| Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 };
    let built = BTree::build(&bb, Oid(16397), (1..=KEYS).map(|k| (k, tid(k))), 90, LwLockKind::Atomic)
        .expect("build");
    let mut g = c.benchmark_group("btree/lookup");
    g.throughput(Throughput::Elements(1));
    let mut tree = Some(built);
    for search in [Search::Binary, Search::Interpolation] {
        let t = tree.take().expect("tree").with_search(search);
        let mut out = Vec::with_capacity(4);
        // xorshift64: a cheap, fixed sequence of keys spread over the whole index.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        g.bench_function(BenchmarkId::new("search", search), |b| {
            b.iter(|| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let key = 1 + (x % KEYS as u64) as i64;
                out.clear();
                t.lookup(&bb, key, &mut out).expect("lookup");
                assert_eq!(out.len(), 1);
                black_box(&out);
            })
        });
        tree = Some(t);
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3)).warm_up_time(Duration::from_secs(1));
    targets = lookup
}
criterion_main!(benches);
