//! loom models of the LWLock protocols. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p lockstack-lwlock --release --test loom_lwlock`
//! (see `.ci/run`). A lost wake-up shows up as loom's "deadlock" failure; a broken exclusion as
//! a failed assertion.
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use lockstack_common::{TrancheId, WaitEvent};
use lockstack_lwlock::{
    AtomicLwLock, FlexLock, GroupCombiner, LwLock, LwLockImpl, LwLockKind, LwLockMode, LwLockVar,
    LwRwLockWriteGuard, Pg92LwLock, ReadBiasedLwLock, VarWait,
};

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    // Spinlock and wait-list-bit loops yield to loom on every turn; give them room.
    b.max_branches = 20_000;
    b.check(f);
}

/// Increment with a separate load and store: only correct under mutual exclusion.
fn bump(c: &AtomicUsize) {
    let v = c.load(Ordering::Relaxed);
    c.store(v + 1, Ordering::Relaxed);
}

fn exclusive_no_lost_wakeup<L: LwLockImpl + 'static>(make: fn() -> L, others: usize) {
    model(move || {
        let lock = Arc::new(make());
        let n = Arc::new(AtomicUsize::new(0));
        let ts: Vec<_> = (0..others)
            .map(|_| {
                let (lock, n) = (lock.clone(), n.clone());
                thread::spawn(move || {
                    let h = lock.acquire(LwLockMode::Exclusive);
                    bump(&n);
                    lock.release(h);
                })
            })
            .collect();
        let h = lock.acquire(LwLockMode::Exclusive);
        bump(&n);
        lock.release(h);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(n.load(Ordering::Relaxed), others + 1);
        assert!(!lock.is_locked());
    });
}

#[test]
fn atomic_acquire_release_no_lost_wakeup() {
    exclusive_no_lost_wakeup(|| AtomicLwLock::with_id(TrancheId::UNNAMED, 0), 2);
}

/// Two lockers only: the 9.2 spinlock's spin loops make three-thread schedules explode.
#[test]
fn pg92_acquire_release_no_lost_wakeup() {
    exclusive_no_lost_wakeup(|| Pg92LwLock::with_id(TrancheId::UNNAMED, 0), 1);
}

/// A shared and an exclusive locker against a holder: readers never overlap the writer.
fn shared_exclusive_mix<L: LwLockImpl + 'static>(make: fn() -> L) {
    model(move || {
        let lock = Arc::new(make());
        let writing = Arc::new(AtomicUsize::new(0));
        let (l2, w2) = (lock.clone(), writing.clone());
        let reader = thread::spawn(move || {
            let h = l2.acquire(LwLockMode::Shared);
            assert_eq!(w2.load(Ordering::Relaxed), 0, "reader overlapped a writer");
            l2.release(h);
        });
        let h = lock.acquire(LwLockMode::Exclusive);
        writing.store(1, Ordering::Relaxed);
        writing.store(0, Ordering::Relaxed);
        lock.release(h);
        reader.join().unwrap();
        assert!(!lock.is_locked());
    });
}

#[test]
fn atomic_shared_exclusive() {
    shared_exclusive_mix(|| AtomicLwLock::with_id(TrancheId::UNNAMED, 1));
}

#[test]
fn pg92_shared_exclusive() {
    shared_exclusive_mix(|| Pg92LwLock::with_id(TrancheId::UNNAMED, 1));
}

#[test]
fn read_biased_revoke() {
    shared_exclusive_mix(|| ReadBiasedLwLock::with_id(TrancheId::UNNAMED, 2));
}

/// The self-dequeue race: the waiter queues, the holder releases and detaches it
/// (PENDING_WAKEUP) while the waiter's phase-3 retry finds the lock free and dequeues itself.
/// The waiter must absorb the pending wake-up and leave the lock consistent.
#[test]
fn atomic_self_dequeue_race() {
    model(|| {
        let lock = Arc::new(AtomicLwLock::with_id(TrancheId::UNNAMED, 3));
        let held = lock.acquire(LwLockMode::Exclusive);
        let l2 = lock.clone();
        let waiter = thread::spawn(move || {
            let h = l2.acquire(LwLockMode::Exclusive);
            l2.release(h);
            // Must be able to wait again: a stale wake-up must not confuse a later wait.
            let h = l2.acquire(LwLockMode::Shared);
            l2.release(h);
        });
        lock.release(held);
        let h = lock.acquire(LwLockMode::Exclusive);
        lock.release(h);
        waiter.join().unwrap();
        assert!(!lock.is_locked());
        assert_eq!(lock.queued_waiters(), 0);
    });
}

/// wait_for_var against update_var and release_clear_var: the waiter always finishes, and
/// only ever sees published values: 7, or the cleared value 0 that release_clear_var stores
/// just before releasing (PostgreSQL's WAL code treats that as "keep waiting", as we do).
fn var_wait<L: LwLockImpl + 'static>(make: fn() -> L) {
    model(move || {
        let lock = Arc::new(make());
        let var = Arc::new(LwLockVar::new(0));
        let held = lock.acquire(LwLockMode::Exclusive);
        let (l2, v2) = (lock.clone(), var.clone());
        let waiter = thread::spawn(move || {
            let mut old = 0;
            loop {
                match l2.wait_for_var(&v2, old) {
                    VarWait::Free => return,
                    VarWait::Changed(n) => {
                        assert!(n == 7 || n == 0, "saw a value nobody published: {n}");
                        assert_ne!(n, old, "Changed must report a different value");
                        old = n;
                    }
                }
            }
        });
        lock.update_var(&held, &var, 7);
        lock.release_clear_var(held, &var, 0);
        waiter.join().unwrap();
    });
}

#[test]
fn atomic_wait_for_var() {
    var_wait(|| AtomicLwLock::with_id(TrancheId::WAL_INSERT, 0));
}

#[test]
fn pg92_wait_for_var() {
    var_wait(|| Pg92LwLock::with_id(TrancheId::WAL_INSERT, 0));
}

/// Group combining: every request runs exactly once, under the lock, and every follower wakes.
#[test]
fn group_combining_each_request_once() {
    model(|| {
        let lock = Arc::new(AtomicLwLock::with_id(TrancheId::PROC_ARRAY, 0));
        let group = Arc::new(GroupCombiner::<usize>::new(3, WaitEvent::PROC_ARRAY_GROUP_UPDATE));
        let done = Arc::new(AtomicUsize::new(0));
        let run = |me: usize, lock: &AtomicLwLock, group: &GroupCombiner<usize>, done: &AtomicUsize| {
            let (r, _) = group.run(me, lock, me, |r| {
                assert!(lock.is_locked_exclusive());
                bump(done);
                *r += 100;
            });
            assert_eq!(r, me + 100, "request not run exactly once");
        };
        let ts: Vec<_> = (1..3)
            .map(|me| {
                let (lock, group, done) = (lock.clone(), group.clone(), done.clone());
                thread::spawn(move || run(me, &lock, &group, &done))
            })
            .collect();
        // Hold the lock for a moment so that others must group up.
        let h = lock.acquire(LwLockMode::Exclusive);
        lock.release(h);
        run(0, &lock, &group, &done);
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(done.load(Ordering::Relaxed), 3);
        assert!(!lock.is_locked());
    });
}

/// FlexLock: a request queued while a reader holds the lock is run by a releaser, exactly once.
#[test]
fn flexlock_request_run_by_releaser() {
    model(|| {
        let flex = Arc::new(FlexLock::<usize, AtomicLwLock>::new(
            AtomicLwLock::with_id(TrancheId::PROC_ARRAY, 1),
            2,
        ));
        let done = Arc::new(AtomicUsize::new(0));
        let (f2, d2) = (flex.clone(), done.clone());
        let ender = thread::spawn(move || {
            let (r, _) = f2.run(1, 5, |r| {
                bump(&d2);
                *r = 0;
            });
            assert_eq!(r, 0);
        });
        let h = flex.acquire(LwLockMode::Shared);
        let d3 = done.clone();
        flex.release(h, |r| {
            bump(&d3);
            *r = 0;
        });
        ender.join().unwrap();
        assert_eq!(done.load(Ordering::Relaxed), 1);
        assert!(!flex.lock().is_locked());
    });
}

/// The run-time `LwLock` as `lock_api`'s raw lock (`LwRwLock`, built with `with_data`): guarded
/// read-modify-writes of two threads never interleave, also when one of them releases and
/// retakes its write guard with `unlocked` in between (the SLRU's I/O pattern), and a reader
/// sees whole updates.
fn lw_rwlock_guards(kind: LwLockKind) {
    model(move || {
        let lock = Arc::new(LwLock::new(kind, TrancheId::UNNAMED, 0).with_data(AtomicUsize::new(0)));
        let l2 = lock.clone();
        let t = thread::spawn(move || {
            let mut g = l2.write();
            bump(&g);
            LwRwLockWriteGuard::unlocked(&mut g, || {});
            bump(&g);
        });
        bump(&lock.write());
        let seen = lock.read().load(Ordering::Relaxed);
        assert!(seen <= 3);
        t.join().unwrap();
        assert_eq!(lock.read().load(Ordering::Relaxed), 3);
    });
}

#[test]
fn lw_rwlock_guards_atomic() {
    lw_rwlock_guards(LwLockKind::Atomic);
}

#[test]
fn lw_rwlock_guards_pg92() {
    lw_rwlock_guards(LwLockKind::Pg92);
}
