use super::*;
use lockstack_bufmgr::{BufferPool, BufferPoolConfig};
use std::sync::Arc;

fn pool(nbuffers: usize) -> Arc<BufferPool> {
    BufferPool::in_memory(BufferPoolConfig::pg96(nbuffers)).unwrap()
}

/// A damaged right link that leads back up the tree makes the walks fail rather than
/// loop forever; pages read from a file can hold any links.
#[test]
fn a_cycle_of_links_is_an_error_not_a_hang() {
    let p = pool(128);
    let bb = p.attach_auxiliary();
    let t = BTree::build(
        &bb,
        Oid(20000),
        (1..=20_000i64).map(|k| (k, Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 })),
        90,
        LwLockKind::Atomic,
    )
    .unwrap();
    let (buf, g, _) = t.descend(&bb, (5000, 0), LwLockMode::Shared, None).unwrap();
    drop(g);
    let mut g = bb.lock(buf, LwLockMode::Exclusive);
    let o = opaque(g.page());
    set_opaque(g.page_mut(), Opaque { right: t.root_block(), high: Some((1, 0)), ..o });
    g.mark_dirty();
    drop(g);
    bb.release(buf);
    let e = t.lookup(&bb, 5000, &mut Vec::new()).unwrap_err().to_string();
    assert!(e.contains("a cycle of links"), "{e}");
    let e = t.delete(&bb, 5000, Tid { block: 81, offset: 60 }).unwrap_err().to_string();
    assert!(e.contains("a cycle of links"), "{e}");
}

#[test]
fn build_then_lookup_every_key() {
    let p = pool(64);
    let bb = p.attach_auxiliary();
    let n = 20_000i64;
    let t = BTree::build(
        &bb,
        Oid(20000),
        (1..=n).map(|k| (k, Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 })),
        90,
        LwLockKind::Atomic,
    )
    .unwrap();
    assert_eq!(t.check(&bb).unwrap(), n as u64);
    let mut out = Vec::new();
    for k in (1..=n).step_by(7) {
        out.clear();
        t.lookup(&bb, k, &mut out).unwrap();
        assert_eq!(out, vec![Tid { block: (k / 61) as u32, offset: (k % 61 + 1) as u16 }], "key {k}");
    }
    out.clear();
    t.lookup(&bb, n + 1, &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(bb.pinned_buffers(), 0);
    p.check_invariants().unwrap();
}

#[test]
fn empty_and_tiny_indexes() {
    let p = pool(16);
    let bb = p.attach_auxiliary();
    let t = BTree::build(&bb, Oid(20001), std::iter::empty(), 90, LwLockKind::Atomic).unwrap();
    assert_eq!(t.check(&bb).unwrap(), 0);
    let mut out = Vec::new();
    t.lookup(&bb, 5, &mut out).unwrap();
    assert!(out.is_empty());
    t.insert(&bb, 5, Tid { block: 1, offset: 1 }).unwrap();
    t.lookup(&bb, 5, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    let unsorted = BTree::build(
        &bb,
        Oid(20002),
        vec![(2, Tid { block: 0, offset: 1 }), (1, Tid { block: 0, offset: 2 })],
        90,
        LwLockKind::Atomic,
    );
    assert!(matches!(unsorted, Err(BTreeError::Corrupt(_))));
}

#[test]
fn delete_removes_exactly_one_entry() {
    let p = pool(64);
    let bb = p.attach_auxiliary();
    let t = BTree::build(
        &bb,
        Oid(20005),
        (1..=5000).map(|k| (k, Tid { block: 1, offset: 1 })),
        90,
        LwLockKind::Atomic,
    )
    .unwrap();
    t.insert(&bb, 77, Tid { block: 9, offset: 3 }).unwrap();
    assert!(t.delete(&bb, 77, Tid { block: 1, offset: 1 }).unwrap());
    assert!(!t.delete(&bb, 77, Tid { block: 1, offset: 1 }).unwrap(), "already gone");
    let mut out = Vec::new();
    t.lookup(&bb, 77, &mut out).unwrap();
    assert_eq!(out, vec![Tid { block: 9, offset: 3 }]);
    assert_eq!(t.check(&bb).unwrap(), 5000);
    assert_eq!(bb.pinned_buffers(), 0);
}

/// Enough inserts to split leaves, internal pages and the root (height 1 -> 3).
#[test]
fn root_splits_keep_every_entry_reachable() {
    let p = pool(128);
    let bb = p.attach_auxiliary();
    let t =
        BTree::build(&bb, Oid(20004), [(0, Tid { block: 0, offset: 1 })], 90, LwLockKind::Atomic).unwrap();
    assert_eq!(t.height(&bb).unwrap(), 0);
    let n = 150_000i64;
    // Descending keys: every insert goes to the leftmost leaf, the worst case for splits.
    for k in (1..=n).rev() {
        t.insert(&bb, k, Tid { block: k as u32, offset: 2 }).unwrap();
    }
    assert!(t.height(&bb).unwrap() >= 2, "the root split at least twice");
    assert_eq!(t.check(&bb).unwrap(), n as u64 + 1);
    let mut out = Vec::new();
    for k in (0..=n).step_by(997) {
        out.clear();
        t.lookup(&bb, k, &mut out).unwrap();
        assert_eq!(out.len(), 1, "key {k}");
    }
    assert_eq!(bb.pinned_buffers(), 0);
}

/// Writers add new versions of keys (forcing leaf, internal and root splits) while readers
/// keep looking keys up; every reader always finds every version that was inserted before
/// its look-up started, and the final structure checks out.
#[test]
fn concurrent_inserts_split_without_losing_entries() {
    let p = pool(256);
    let keys = 3_000i64;
    let t = {
        let bb = p.attach_auxiliary();
        Arc::new(
            BTree::build(
                &bb,
                Oid(20003),
                (1..=keys).map(|k| (k, Tid { block: 0, offset: 1 })),
                100,
                LwLockKind::Atomic,
            )
            .unwrap(),
        )
    };
    let root_before = t.root_block();
    let nblocks_before = p.nblocks(Oid(20003), ForkNumber::Main).unwrap();
    let writers = 2;
    let per_writer = 6_000u32;
    let done = Arc::new(std::sync::atomic::AtomicU32::new(0));
    std::thread::scope(|s| {
        for w in 0..writers {
            let (p, t) = (Arc::clone(&p), Arc::clone(&t));
            s.spawn(move || {
                let bb = p.attach_auxiliary();
                for i in 0..per_writer {
                    let k = 1 + i64::from(i) % keys;
                    t.insert(&bb, k, Tid { block: 1 + w * per_writer + i, offset: 1 }).unwrap();
                }
                assert_eq!(bb.pinned_buffers(), 0);
            });
        }
        let (p, t, done) = (Arc::clone(&p), Arc::clone(&t), Arc::clone(&done));
        s.spawn(move || {
            let bb = p.attach_auxiliary();
            let mut out = Vec::new();
            let mut k = 1;
            while done.load(std::sync::atomic::Ordering::Relaxed) < 1 {
                out.clear();
                t.lookup(&bb, k, &mut out).unwrap();
                assert!(out.contains(&Tid { block: 0, offset: 1 }), "original entry of key {k} lost");
                assert!(out.windows(2).all(|w| w[0] < w[1]), "entries of key {k} out of order");
                k = k % keys + 1;
                if k == 1 {
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
    });
    let bb = p.attach_auxiliary();
    let total = keys as u64 + u64::from(writers * per_writer);
    assert_eq!(t.check(&bb).unwrap(), total);
    assert_eq!(t.root_block(), root_before, "too small to split the root");
    assert!(p.nblocks(Oid(20003), ForkNumber::Main).unwrap() > nblocks_before + 20, "leaves split");
    let mut out = Vec::new();
    t.lookup(&bb, 1, &mut out).unwrap();
    let expected = 1
        + (0..writers).map(|_| (0..per_writer).filter(|i| i64::from(*i) % keys == 0).count()).sum::<usize>();
    assert_eq!(out.len(), expected);
    p.check_invariants().unwrap();
}

/// From any first guess, in range or not, the galloping search returns what bisection
/// returns, for every length and every split point.
#[test]
fn partition_point_agrees_with_bisection_from_any_guess() {
    for n in 0u16..40 {
        for split in 0..=n {
            let below = |off: u16| off < 1 + split;
            let want = 1 + split;
            assert_eq!(partition_point(1, n + 1, None, below), want);
            for g in 0..n + 4 {
                assert_eq!(partition_point(1, n + 1, Some(g), below), want, "n {n} split {split} guess {g}");
            }
            assert_eq!(partition_point(1, n + 1, Some(u16::MAX), below), want);
        }
    }
}

/// Keys spread evenly over the parent's range (pgbench's) are found in at most two probes
/// of the page; bisection needs about log2(items).
#[test]
fn dense_keys_take_at_most_two_probes() {
    let n = 367u16;
    let low = 1_000_000i64;
    let range = KeyRange { low: Some(low), high: Some(low + i64::from(n)) };
    for t in low..low + i64::from(n) {
        let probes = std::cell::Cell::new(0);
        let below = |off: u16| {
            probes.set(probes.get() + 1);
            low + i64::from(off) - 1 < t
        };
        let got = partition_point(1, n + 1, interpolate(range, t, 1, n), below);
        assert_eq!(i64::from(got), t - low + 1);
        assert!(probes.get() <= 2, "key {t}: {} probes", probes.get());
    }
    assert_eq!(interpolate(range, low - 1, 1, n), None, "below the range");
    assert_eq!(interpolate(range, low + i64::from(n), 1, n), None, "at the range's end");
    assert_eq!(interpolate(KeyRange { low: Some(low), high: None }, low, 1, n), None);
}

/// Skewed keys (cubes, a dense cluster, negatives) and extra versions of some keys: both
/// searches find exactly what an ordered map holds, for present and absent keys.
#[test]
fn both_searches_agree_with_an_oracle_under_skew() {
    let p = pool(256);
    let bb = p.attach_auxiliary();
    let mut keys: Vec<i64> = (-300..300i64).map(|i| i * i * i).collect();
    keys.extend(5_000_000..5_004_000);
    keys.sort_unstable();
    keys.dedup();
    let tid = |k: i64, v: u32| Tid { block: (k.rem_euclid(10_007)) as u32 + v, offset: 1 + (v % 7) as u16 };
    let t =
        BTree::build(&bb, Oid(20006), keys.iter().map(|&k| (k, tid(k, 0))), 90, LwLockKind::Atomic).unwrap();
    let mut oracle: std::collections::BTreeMap<i64, Vec<Tid>> =
        keys.iter().map(|&k| (k, vec![tid(k, 0)])).collect();
    for (i, &k) in keys.iter().enumerate().filter(|(i, _)| i % 5 == 0) {
        for v in 1..=(i % 3 + 1) as u32 {
            t.insert(&bb, k, tid(k, v * 20_000)).unwrap();
            oracle.get_mut(&k).unwrap().push(tid(k, v * 20_000));
        }
    }
    oracle.values_mut().for_each(|v| v.sort_unstable());
    assert!(t.height(&bb).unwrap() >= 1);
    let probes: Vec<i64> = keys.iter().flat_map(|&k| [k - 1, k, k + 1]).chain([i64::MIN, i64::MAX]).collect();
    let mut out = Vec::new();
    for search in [Search::Interpolation, Search::Binary] {
        let t = BTree { search, ..BTree::open(&bb, Oid(20006), LwLockKind::Atomic).unwrap() };
        for &k in &probes {
            out.clear();
            t.lookup(&bb, k, &mut out).unwrap();
            assert_eq!(out, oracle.get(&k).cloned().unwrap_or_default(), "{search} search, key {k}");
        }
    }
    assert_eq!(bb.pinned_buffers(), 0);
}
