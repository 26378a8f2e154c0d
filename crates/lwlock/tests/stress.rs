//! Threads × iterations with counter invariants, for every implementation and mode, through
//! both the token API and `lock_api`.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lockstack_common::WaitEvent;
use lockstack_lwlock::{
    FlexLock, FlexRole, GroupCombiner, GroupRole, LwLock, LwLockImpl, LwLockKind, LwLockMode, LwRwLockExt,
    LwRwLockWriteGuard, Pg92RwLock, ReadBiasedRwLock, RwLock, TrancheId, stats,
};

const THREADS: usize = 6;
const ITERS: u64 = 3_000;

/// Two fields that writers keep equal; a reader that sees them differ saw a torn write.
#[derive(Default)]
struct Pair {
    a: u64,
    b: u64,
}

fn lock_api_stress<R: lock_api::RawRwLock + Send + Sync + 'static>(lock: Arc<lock_api::RwLock<R, Pair>>)
where
    R::SharedGuard: Send,
    R::ExclusiveGuard: Send,
{
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let lock = Arc::clone(&lock);
            std::thread::spawn(move || {
                for i in 0..ITERS {
                    if (i + t as u64).is_multiple_of(4) {
                        let mut g = lock.write();
                        g.a += 1;
                        std::hint::black_box(&mut *g);
                        g.b += 1;
                    } else {
                        let g = lock.read();
                        assert_eq!(g.a, g.b, "reader saw a half-done write");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let g = lock.read();
    let writes: u64 =
        (0..THREADS as u64).map(|t| (0..ITERS).filter(|i| (i + t) % 4 == 0).count() as u64).sum();
    assert_eq!(g.a, writes);
    assert_eq!(g.b, writes);
}

#[test]
fn lock_api_atomic() {
    lock_api_stress(Arc::new(RwLock::new(Pair::default())));
}

#[test]
fn lock_api_pg92() {
    lock_api_stress(Arc::new(Pg92RwLock::new(Pair::default())));
}

#[test]
fn lock_api_read_biased() {
    lock_api_stress(Arc::new(ReadBiasedRwLock::new(Pair::default())));
}

/// The run-time `LwLock` as `lock_api`'s raw lock, for every kind.
#[test]
fn lock_api_runtime_kind() {
    for kind in LwLockKind::ALL {
        lock_api_stress(Arc::new(LwLock::new(kind, TrancheId::UNNAMED, 0).with_data(Pair::default())));
    }
}

/// An `LwRwLock` keeps the LWLOCK_STATS counters and the lock's identity, and its guards'
/// `unlocked` really releases the lock for the closure.
#[test]
fn lw_rwlock_counts_and_unlocks() {
    let t = TrancheId::register("lw-rwlock-test");
    for kind in LwLockKind::ALL {
        let lock = LwLock::new(kind, t, 5).with_data(0u64);
        assert_eq!((lock.kind(), lock.tranche(), lock.instance()), (kind, t, 5));
        let before = stats::snapshot().tranche(t);
        {
            let (mut g, waited) = lock.write_waited();
            assert!(!waited, "{kind}: uncontended");
            *g += 1;
            assert!(lock.try_read().is_none(), "{kind}: held exclusively");
            LwRwLockWriteGuard::unlocked(&mut g, || {
                assert!(!lock.is_locked(), "{kind}: released inside unlocked()");
                *lock.write() += 1;
            });
            *g += 1;
        }
        let (r, waited) = lock.read_waited();
        assert!(!waited);
        assert_eq!(*r, 3);
        assert!(lock.try_write().is_none(), "{kind}: held shared");
        drop(r);
        let after = stats::snapshot().tranche(t);
        // write_waited, write inside unlocked, the retake after it; read_waited.
        assert_eq!(after.ex_acquire - before.ex_acquire, 3, "{kind}");
        assert_eq!(after.sh_acquire - before.sh_acquire, 1, "{kind}");
        assert_eq!(after.cond_fail - before.cond_fail, 2, "{kind}");
    }
}

/// Token API on the run-time enum: exclusive increments with a non-atomic read-modify-write
/// (a lost update shows mutual exclusion broke), shared readers, conditional and
/// acquire-or-wait calls.
fn enum_stress(kind: LwLockKind) {
    let lock = Arc::new(LwLock::new(kind, TrancheId::register("stress-test"), kind as u32));
    let counter = Arc::new(AtomicU64::new(0));
    let readers_inside = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, counter, inside) =
                (Arc::clone(&lock), Arc::clone(&counter), Arc::clone(&readers_inside));
            std::thread::spawn(move || {
                let mut mine = 0u64;
                for i in 0..ITERS {
                    match (i + t as u64) % 5 {
                        0 | 1 => {
                            let h = lock.acquire(LwLockMode::Exclusive);
                            assert_eq!(
                                inside.load(Ordering::SeqCst),
                                0,
                                "reader inside during exclusive hold"
                            );
                            let v = counter.load(Ordering::Relaxed);
                            std::hint::spin_loop();
                            counter.store(v + 1, Ordering::Relaxed);
                            mine += 1;
                            lock.release(h);
                        }
                        2 => {
                            if let Some(h) = lock.conditional_acquire(LwLockMode::Exclusive) {
                                let v = counter.load(Ordering::Relaxed);
                                counter.store(v + 1, Ordering::Relaxed);
                                mine += 1;
                                lock.release(h);
                            }
                        }
                        3 => {
                            if let Some(h) = lock.acquire_or_wait(LwLockMode::Exclusive) {
                                let v = counter.load(Ordering::Relaxed);
                                counter.store(v + 1, Ordering::Relaxed);
                                mine += 1;
                                lock.release(h);
                            }
                        }
                        _ => {
                            let h = lock.acquire(LwLockMode::Shared);
                            inside.fetch_add(1, Ordering::SeqCst);
                            std::hint::black_box(counter.load(Ordering::Relaxed));
                            inside.fetch_sub(1, Ordering::SeqCst);
                            lock.release(h);
                        }
                    }
                }
                mine
            })
        })
        .collect();
    let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(counter.load(Ordering::Relaxed), total, "{kind}: lost update");
    assert!(total >= 2 * ITERS * THREADS as u64 / 5, "{kind}: blocking exclusive acquisitions missing");
    assert!(!lock.is_locked());
}

#[test]
fn enum_pg92() {
    enum_stress(LwLockKind::Pg92);
}

#[test]
fn enum_atomic() {
    enum_stress(LwLockKind::Atomic);
}

#[test]
fn enum_read_biased() {
    enum_stress(LwLockKind::ReadBiased);
}

/// Group combining: every request runs exactly once, under an exclusive hold.
fn group_stress(kind: LwLockKind) {
    let lock = Arc::new(LwLock::new(kind, TrancheId::PROC_ARRAY, 100 + kind as u32));
    let group = Arc::new(GroupCombiner::<u64>::new(THREADS, WaitEvent::PROC_ARRAY_GROUP_UPDATE));
    let sum = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, group, sum) = (Arc::clone(&lock), Arc::clone(&group), Arc::clone(&sum));
            std::thread::spawn(move || {
                let mut roles = [0u64; 3];
                for i in 0..ITERS {
                    let req = (t as u64) * ITERS + i;
                    let (back, role) = group.run(t, &*lock, req, |r| {
                        assert!(lock.is_locked_exclusive());
                        let v = sum.load(Ordering::Relaxed);
                        sum.store(v + *r, Ordering::Relaxed);
                        *r = u64::MAX - *r;
                    });
                    assert_eq!(back, u64::MAX - req, "request not run, or run twice");
                    roles[match role {
                        GroupRole::Alone => 0,
                        GroupRole::Leader { members } => {
                            assert!(members >= 1);
                            1
                        }
                        GroupRole::Follower => 2,
                    }] += 1;
                }
                roles
            })
        })
        .collect();
    for h in handles {
        let roles = h.join().unwrap();
        assert_eq!(roles.iter().sum::<u64>(), ITERS);
    }
    let n = THREADS as u64 * ITERS;
    assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2);
}

#[test]
fn group_combining_atomic() {
    group_stress(LwLockKind::Atomic);
}

#[test]
fn group_combining_pg92() {
    group_stress(LwLockKind::Pg92);
}

/// The keyed variant refuses to join a group of another key, and still runs every request once.
#[test]
fn keyed_group_refuses_other_keys() {
    let lock = Arc::new(LwLock::new(LwLockKind::Atomic, TrancheId::XACT_SLRU, 0));
    let group = Arc::new(GroupCombiner::<(u64, u64)>::new(THREADS, WaitEvent::XACT_GROUP_UPDATE));
    let per_key = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (lock, group, per_key) = (Arc::clone(&lock), Arc::clone(&group), Arc::clone(&per_key));
            std::thread::spawn(move || {
                let key = (t % 2) as u64;
                let mut refused = 0;
                for _ in 0..ITERS {
                    let bump = |r: &mut (u64, u64)| {
                        let c = &per_key[r.0 as usize];
                        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                        r.1 += 1;
                    };
                    match group.run_keyed(t, key, &*lock, (key, 0), bump) {
                        Ok((r, _)) => assert_eq!(r.1, 1),
                        Err(mut r) => {
                            refused += 1;
                            let h = lock.acquire(LwLockMode::Exclusive);
                            bump(&mut r);
                            lock.release(h);
                        }
                    }
                }
                refused
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let each = (THREADS as u64 / 2) * ITERS;
    assert_eq!(per_key[0].load(Ordering::Relaxed), each);
    assert_eq!(per_key[1].load(Ordering::Relaxed), each);
}

/// FlexLock: ending "transactions" queue while snapshot takers hold the lock shared; every
/// request runs exactly once under an exclusive hold, and readers never see a half-done one.
fn flex_stress(kind: LwLockKind) {
    let flex = Arc::new(FlexLock::<u64, LwLock>::new(
        LwLock::new(kind, TrancheId::PROC_ARRAY, 200 + kind as u32),
        THREADS,
    ));
    let pair = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (flex, pair) = (Arc::clone(&flex), Arc::clone(&pair));
            std::thread::spawn(move || {
                let apply = |r: &mut u64| {
                    assert!(flex.lock().is_locked_exclusive());
                    pair.0.store(pair.0.load(Ordering::Relaxed) + *r, Ordering::Relaxed);
                    pair.1.store(pair.1.load(Ordering::Relaxed) + *r, Ordering::Relaxed);
                    *r = 0;
                };
                let mut queued = 0;
                for i in 0..ITERS {
                    if (i + t as u64).is_multiple_of(2) {
                        let (r, role) = flex.run(t, 1 + i % 7, apply);
                        assert_eq!(r, 0, "request not run");
                        if role == FlexRole::Queued {
                            queued += 1;
                        }
                    } else {
                        let h = flex.acquire(LwLockMode::Shared);
                        assert_eq!(pair.0.load(Ordering::Relaxed), pair.1.load(Ordering::Relaxed));
                        flex.release(h, apply);
                    }
                }
                queued
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let expected: u64 = (0..THREADS as u64)
        .map(|t| (0..ITERS).filter(|i| (i + t) % 2 == 0).map(|i| 1 + i % 7).sum::<u64>())
        .sum();
    assert_eq!(pair.0.load(Ordering::Relaxed), expected);
    assert_eq!(pair.1.load(Ordering::Relaxed), expected);
    assert!(!flex.lock().is_locked());
}

#[test]
fn flexlock_atomic() {
    flex_stress(LwLockKind::Atomic);
}

#[test]
fn flexlock_pg92() {
    flex_stress(LwLockKind::Pg92);
}

#[test]
fn flexlock_read_biased() {
    flex_stress(LwLockKind::ReadBiased);
}

/// LWLOCK_STATS counts acquisitions per tranche exactly on the uncontended path.
#[test]
fn stats_count_acquisitions() {
    let t = TrancheId::register("stats-count-test");
    for kind in LwLockKind::ALL {
        let lock = LwLock::new(kind, t, 0);
        let before = stats::snapshot().tranche(t);
        for _ in 0..10 {
            let h = lock.acquire(LwLockMode::Shared);
            lock.release(h);
        }
        for _ in 0..7 {
            let h = lock.acquire(LwLockMode::Exclusive);
            assert!(lock.conditional_acquire(LwLockMode::Exclusive).is_none());
            lock.release(h);
        }
        let after = stats::snapshot().tranche(t);
        assert_eq!(after.sh_acquire - before.sh_acquire, 10, "{kind}");
        assert_eq!(after.ex_acquire - before.ex_acquire, 7, "{kind}");
        assert_eq!(after.cond_fail - before.cond_fail, 7, "{kind}");
        assert_eq!(after.block, before.block, "{kind}: nobody blocked");
    }
}
