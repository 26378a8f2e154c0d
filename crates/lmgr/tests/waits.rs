//! Deterministic tests of waiting: queue ordering, wake-ups, deadlocks (early, hard, soft),
//! NOWAIT, lock_timeout, VXID and xid waits. Threads only block on locks; the main thread
//! observes the lock manager's state (who is queued) instead of sleeping for a guessed time.

mod common;

use std::thread;
use std::time::Duration;

use common::{assert_empty, lmgr_with, rel, wait_queued};
use lockstack_lmgr::{
    BackendId, FastPath, LockError, LockMode, LockMode::*, LockOptions, LockTag, TransactionId, VxidLocks,
};

const NEVER: Duration = Duration::from_secs(3600);
const NOWAIT: LockOptions = LockOptions { session: false, dont_wait: true };

#[test]
fn waiter_is_woken_by_release_and_conflicting_requests_queue_in_order() {
    let lmgr = lmgr_with(4, |_| {});
    let r = rel(&lmgr, 1);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    a.start_transaction();
    a.lock(r, AccessExclusive, LockOptions::XACT).unwrap();
    let l2 = lmgr.clone();
    let t1 = thread::spawn(move || {
        let mut b = l2.attach(BackendId(1)).unwrap();
        b.set_deadlock_timeout(NEVER);
        b.start_transaction();
        b.lock(r, Exclusive, LockOptions::XACT).unwrap();
        // Still holding Exclusive: the RowShare waiter (2) must still be waiting.
        assert!(l2.waiting_for(BackendId(2)).is_some());
        b.end_transaction();
    });
    wait_queued(&lmgr, 1);
    let l3 = lmgr.clone();
    let t2 = thread::spawn(move || {
        let mut c = l3.attach(BackendId(2)).unwrap();
        c.set_deadlock_timeout(NEVER);
        c.start_transaction();
        c.lock(r, RowShare, LockOptions::XACT).unwrap();
        c.end_transaction();
    });
    wait_queued(&lmgr, 2);
    assert_eq!(lmgr.blocking_backends(BackendId(1)), vec![BackendId(0)]);
    let mut blockers = lmgr.blocking_backends(BackendId(2));
    blockers.sort();
    assert_eq!(blockers, vec![BackendId(0), BackendId(1)], "hard blocker 0, soft blocker 1");
    lmgr.check_invariants().unwrap();
    a.end_transaction();
    t1.join().unwrap();
    t2.join().unwrap();
    drop(a);
    assert_empty(&lmgr);
    assert_eq!(lmgr.stats().waits, 2);
}

/// A holds AccessShare and B waits for AccessExclusive. A's Share request conflicts with that
/// waiter, which waits for A: waiting, it goes ahead of it and, conflicting with nothing
/// granted, is granted at once in every release. With NOWAIT it is granted so only with
/// `nowait_queue_jump` (17+); 9.x-16 fail it as "could not obtain lock" before looking at the
/// queue.
fn holder_of_a_conflicting_lock_jumps_the_queue(nowait_queue_jump: bool, nowait: bool) {
    let lmgr = lmgr_with(3, |c| {
        c.fast_path = FastPath::Off;
        c.nowait_queue_jump = nowait_queue_jump;
    });
    let r = rel(&lmgr, 2);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    a.start_transaction();
    a.lock(r, AccessShare, LockOptions::XACT).unwrap();
    let l2 = lmgr.clone();
    let t = thread::spawn(move || {
        let mut b = l2.attach(BackendId(1)).unwrap();
        b.set_deadlock_timeout(NEVER);
        b.start_transaction();
        b.lock(r, AccessExclusive, LockOptions::XACT).unwrap();
        b.end_transaction();
    });
    wait_queued(&lmgr, 1);
    let waits_before = lmgr.stats().waits;
    let got = a.lock(r, Share, if nowait { NOWAIT } else { LockOptions::XACT });
    if nowait && !nowait_queue_jump {
        let e = got.unwrap_err();
        assert!(matches!(e, LockError::NotAvailable { .. }), "{e:?}");
        assert!(e.message().starts_with("could not obtain lock on relation"), "{}", e.message());
        assert!(lmgr.lock_status().iter().all(|row| !(row.backend == BackendId(0) && row.mode == Share)));
    } else {
        got.unwrap();
        assert!(
            lmgr.lock_status()
                .iter()
                .any(|row| row.backend == BackendId(0) && row.mode == Share && row.granted)
        );
    }
    assert_eq!(lmgr.stats().waits, waits_before, "A never waited");
    assert!(lmgr.waiting_for(BackendId(1)).is_some(), "B still waits");
    // Someone without a lock there cannot jump: NOWAIT fails in every release.
    let mut c = lmgr.attach(BackendId(2)).unwrap();
    c.start_transaction();
    assert!(matches!(c.lock(r, AccessShare, NOWAIT), Err(LockError::NotAvailable { .. })));
    lmgr.check_invariants().unwrap();
    a.end_transaction();
    t.join().unwrap();
    c.end_transaction();
    drop((a, c));
    assert_empty(&lmgr);
}

#[test]
fn nowait_jumps_the_queue_with_nowait_queue_jump() {
    holder_of_a_conflicting_lock_jumps_the_queue(true, true);
}

#[test]
fn nowait_does_not_jump_the_queue_without_nowait_queue_jump() {
    holder_of_a_conflicting_lock_jumps_the_queue(false, true);
}

#[test]
fn a_waiting_request_jumps_the_queue_in_every_release() {
    holder_of_a_conflicting_lock_jumps_the_queue(false, false);
    holder_of_a_conflicting_lock_jumps_the_queue(true, false);
}

/// A waiter publishes its deadlock check as its next timer, then its lock_timeout once the
/// check has run; a grant withdraws it.
#[test]
fn a_waiters_timers_are_published_until_handled() {
    let lmgr = lmgr_with(2, |_| {});
    let r = rel(&lmgr, 9);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    a.start_transaction();
    a.lock(r, AccessExclusive, LockOptions::XACT).unwrap();
    assert_eq!(lmgr.earliest_lock_timer(), None);
    let before = lockstack_common::sync::Instant::now();
    let l2 = lmgr.clone();
    let t = thread::spawn(move || {
        let mut b = l2.attach(BackendId(1)).unwrap();
        b.set_deadlock_timeout(Duration::from_millis(20));
        b.set_lock_timeout(Some(NEVER));
        b.start_transaction();
        b.lock(r, AccessShare, LockOptions::XACT).unwrap();
        b.end_transaction();
    });
    wait_queued(&lmgr, 1);
    let first = lmgr.earliest_lock_timer().expect("the deadlock check is due");
    assert!(first >= before && first.duration_since(before) < Duration::from_secs(60), "{first:?}");
    // After the check (no deadlock), the lock_timeout is what is left.
    common::wait_until("the deadlock check ran", || lmgr.earliest_lock_timer() != Some(first));
    let next = lmgr.earliest_lock_timer().expect("the lock timeout is due");
    assert!(next.duration_since(before) > Duration::from_secs(600), "{next:?}");
    assert_eq!(lmgr.stats().deadlock_checks, 1);
    a.end_transaction();
    t.join().unwrap();
    assert_eq!(lmgr.earliest_lock_timer(), None, "the grant withdrew it");
    drop(a);
    assert_empty(&lmgr);
}

#[test]
fn early_deadlock_at_queue_insertion() {
    // deadlock-simple: both hold AccessShare; 0 waits for AccessExclusive; 1 asks the same.
    let lmgr = lmgr_with(2, |_| {});
    let r = rel(&lmgr, 3);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    let mut b = lmgr.attach(BackendId(1)).unwrap();
    a.start_transaction();
    b.start_transaction();
    a.lock(r, AccessShare, LockOptions::XACT).unwrap();
    b.lock(r, AccessShare, LockOptions::XACT).unwrap();
    let l2 = lmgr.clone();
    let t = thread::spawn(move || {
        a.set_deadlock_timeout(NEVER);
        a.lock(r, AccessExclusive, LockOptions::XACT).unwrap();
        a.end_transaction();
        drop(a);
        l2.check_invariants().unwrap();
    });
    wait_queued(&lmgr, 0);
    b.set_deadlock_timeout(NEVER);
    let err = b.lock(r, AccessExclusive, LockOptions::XACT).unwrap_err();
    match &err {
        LockError::Deadlock { detail } => {
            assert!(detail.contains("Backend 1 waits for AccessExclusiveLock"), "{detail}");
            assert!(detail.contains("blocked by backend 0"), "{detail}");
        }
        e => panic!("expected deadlock, got {e:?}"),
    }
    assert_eq!(err.message(), "deadlock detected");
    // Only backend 0 ever slept: the deadlock was found without waiting.
    assert_eq!(lmgr.stats().waits, 1);
    assert_eq!(lmgr.stats().deadlocks, 1);
    lmgr.check_invariants().unwrap();
    assert_eq!(b.local_count(r, AccessShare), 1, "locks held before the error stay held");
    b.end_transaction();
    t.join().unwrap();
    drop(b);
    assert_empty(&lmgr);
}

/// `n` backends, each holding relation i and then requesting relation i+1 (mod n); only the
/// last has a short deadlock_timeout, so it is the one that detects and fails.
fn ring_deadlock(n: u32) {
    let lmgr = lmgr_with(n as usize, |_| {});
    let mut last = lmgr.attach(BackendId(n - 1)).unwrap();
    last.set_deadlock_timeout(Duration::from_millis(5));
    last.start_transaction();
    last.lock(rel(&lmgr, n - 1), AccessExclusive, LockOptions::XACT).unwrap();
    let mut handles = Vec::new();
    for i in 0..n - 1 {
        let l = lmgr.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        handles.push((
            thread::spawn(move || {
                let mut b = l.attach(BackendId(i)).unwrap();
                b.set_deadlock_timeout(NEVER);
                b.start_transaction();
                b.lock(rel(&l, i), AccessExclusive, LockOptions::XACT).unwrap();
                ready_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                let r = b.lock(rel(&l, i + 1), AccessExclusive, LockOptions::XACT);
                b.end_transaction();
                r.is_ok()
            }),
            go_tx,
        ));
        ready_rx.recv().unwrap();
    }
    for (i, (_, go)) in handles.iter().enumerate() {
        go.send(()).unwrap();
        wait_queued(&lmgr, i as u32);
    }
    let err = last.lock(rel(&lmgr, 0), AccessExclusive, LockOptions::XACT).unwrap_err();
    let LockError::Deadlock { detail } = err else { panic!("expected deadlock") };
    assert_eq!(detail.lines().count(), n as usize, "{detail}");
    assert!(detail.starts_with(&format!("Backend {} waits for AccessExclusiveLock", n - 1)), "{detail}");
    lmgr.check_invariants().unwrap();
    let s = lmgr.stats();
    assert_eq!((s.deadlocks, s.soft_deadlocks), (1, 0));
    last.end_transaction();
    for (h, _) in handles {
        assert!(h.join().unwrap(), "only the detecting backend fails");
    }
    drop(last);
    assert_empty(&lmgr);
}

#[test]
fn two_way_deadlock() {
    ring_deadlock(2);
}

#[test]
fn three_way_deadlock() {
    ring_deadlock(3);
}

#[test]
fn soft_deadlock_is_resolved_by_rearranging_the_queue() {
    // deadlock-soft: d1 (0) and d2 (1) hold AccessShare on a1 and a2; e1 (2) waits for
    // AccessExclusive on a2, e2 (3) on a1; then d1 asks AccessShare on a2 (queued behind e1: a
    // soft edge) and d2 on a1 (behind e2). The cycle d2 -soft-> e2 -hard-> d1 -soft-> e1
    // -hard-> d2 is found by d2 (the only short deadlock_timeout) and broken by moving d1 ahead
    // of e1 on a2, where it is granted. Every backend commits as soon as it is granted.
    let lmgr = lmgr_with(4, |_| {});
    let (a1, a2) = (rel(&lmgr, 1), rel(&lmgr, 2));
    let spawn = |id: u32, first: Option<LockTag>, wait_on: LockTag, mode: LockMode, dt: Duration| {
        let l = lmgr.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let h = thread::spawn(move || {
            let mut b = l.attach(BackendId(id)).unwrap();
            b.set_deadlock_timeout(dt);
            b.start_transaction();
            if let Some(f) = first {
                b.lock(f, AccessShare, LockOptions::XACT).unwrap();
            }
            ready_tx.send(()).unwrap();
            go_rx.recv().unwrap();
            let r = b.lock(wait_on, mode, LockOptions::XACT);
            b.end_transaction();
            r.is_ok()
        });
        ready_rx.recv().unwrap();
        (h, go_tx)
    };
    let (d1, go_d1) = spawn(0, Some(a1), a2, AccessShare, NEVER);
    let (d2, go_d2) = spawn(1, Some(a2), a1, AccessShare, Duration::from_millis(5));
    let (e1, go_e1) = spawn(2, None, a2, AccessExclusive, NEVER);
    go_e1.send(()).unwrap();
    wait_queued(&lmgr, 2);
    let (e2, go_e2) = spawn(3, None, a1, AccessExclusive, NEVER);
    go_e2.send(()).unwrap();
    wait_queued(&lmgr, 3);
    go_d1.send(()).unwrap();
    wait_queued(&lmgr, 0);
    lmgr.check_invariants().unwrap();
    go_d2.send(()).unwrap();
    for h in [d1, d2, e1, e2] {
        assert!(h.join().unwrap(), "no backend fails");
    }
    let s = lmgr.stats();
    assert_eq!((s.soft_deadlocks, s.deadlocks), (1, 0));
    assert_empty(&lmgr);
}

#[test]
fn nowait_and_lock_timeout_leave_no_trace_and_wake_soft_blocked_waiters() {
    let lmgr = lmgr_with(3, |_| {});
    let r = rel(&lmgr, 5);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    a.start_transaction();
    a.lock(r, AccessShare, LockOptions::XACT).unwrap();
    let l2 = lmgr.clone();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let tb = thread::spawn(move || {
        let mut b = l2.attach(BackendId(1)).unwrap();
        b.set_deadlock_timeout(NEVER);
        b.start_transaction();
        // Wait for the test to queue C behind us before our timeout starts to matter.
        go_rx.recv().unwrap();
        b.set_lock_timeout(Some(Duration::from_millis(50)));
        let e = b.lock(r, AccessExclusive, LockOptions::XACT).unwrap_err();
        assert!(matches!(e, LockError::LockTimeout { .. }), "{e:?}");
        assert_eq!(e.message(), "canceling statement due to lock timeout");
        b.end_transaction();
    });
    let l3 = lmgr.clone();
    let tc = thread::spawn(move || {
        let mut c = l3.attach(BackendId(2)).unwrap();
        c.set_deadlock_timeout(NEVER);
        c.start_transaction();
        wait_queued(&l3, 1);
        // Queued behind B's AccessExclusive although compatible with A's AccessShare.
        c.lock(r, RowExclusive, LockOptions::XACT).unwrap();
        c.end_transaction();
    });
    go_tx.send(()).unwrap();
    // C can only finish once B's timeout has removed B from the queue and woken C.
    tc.join().unwrap();
    tb.join().unwrap();
    let s = lmgr.stats();
    assert_eq!(s.lock_timeouts, 1);
    lmgr.check_invariants().unwrap();
    // NOWAIT: immediate error, nothing left behind.
    let mut d = lmgr.attach(BackendId(1)).unwrap();
    d.start_transaction();
    let e = d.lock(r, AccessExclusive, NOWAIT).unwrap_err();
    assert!(matches!(e, LockError::NotAvailable { .. }));
    assert!(e.message().starts_with("could not obtain lock on relation"));
    lmgr.check_invariants().unwrap();
    d.end_transaction();
    a.end_transaction();
    drop((a, d));
    assert_empty(&lmgr);
}

fn vxid_wait_and_wake(mode: VxidLocks) {
    let lmgr = lmgr_with(2, |c| c.vxid = mode);
    let mut holder = lmgr.attach(BackendId(0)).unwrap();
    let v = holder.start_transaction();
    let main_before = lmgr.main_table_len();
    assert_eq!(main_before, usize::from(mode == VxidLocks::Eager), "eager VXID locks live in the main table");
    let l2 = lmgr.clone();
    let t = thread::spawn(move || {
        let mut w = l2.attach(BackendId(1)).unwrap();
        w.set_deadlock_timeout(NEVER);
        w.start_transaction();
        assert!(!w.virtual_xact_lock(v, false).unwrap(), "still running");
        assert!(w.virtual_xact_lock(v, true).unwrap());
        w.end_transaction();
        // After the end, the VXID is gone: no wait.
        assert!(w.virtual_xact_lock(v, true).unwrap());
        assert!(w.virtual_xact_lock(v, false).unwrap());
    });
    wait_queued(&lmgr, 1);
    // The waiter materialised the lock (on demand) and queued on it; in eager mode the main
    // table also has the waiter's own VXID lock.
    assert_eq!(lmgr.main_table_len(), if mode == VxidLocks::Eager { 2 } else { 1 });
    assert_eq!(lmgr.waiting_for(BackendId(1)).unwrap().0, LockTag::virtual_transaction(v));
    assert_eq!(lmgr.blocking_backends(BackendId(1)), vec![BackendId(0)]);
    lmgr.check_invariants().unwrap();
    holder.end_transaction();
    t.join().unwrap();
    let s = lmgr.stats();
    assert_eq!(s.vxid_materialised, u64::from(mode == VxidLocks::OnDemand));
    assert_eq!(s.waits, 1);
    drop(holder);
    assert_empty(&lmgr);
}

#[test]
fn vxid_on_demand_wait_and_wake() {
    vxid_wait_and_wake(VxidLocks::OnDemand);
}

#[test]
fn vxid_eager_wait_and_wake() {
    vxid_wait_and_wake(VxidLocks::Eager);
}

#[test]
fn vxid_on_demand_costs_no_main_table_traffic() {
    for (mode, expected) in [(VxidLocks::OnDemand, 0), (VxidLocks::Eager, 10)] {
        let lmgr = lmgr_with(1, |c| c.vxid = mode);
        let mut b = lmgr.attach(BackendId(0)).unwrap();
        for _ in 0..10 {
            b.start_transaction();
            b.lock_relation(lockstack_lmgr::Oid(16384), AccessShare).unwrap();
            b.end_transaction();
        }
        let s = lmgr.stats();
        assert_eq!(s.fast_path_grants, 10);
        // Eager: one main-table insertion per transaction; on demand: none.
        assert_eq!(s.main_acquisitions_total(), expected, "{mode}");
        drop(b);
        assert_empty(&lmgr);
    }
}

#[test]
fn xid_lock_row_wait() {
    let lmgr = lmgr_with(2, |_| {});
    let mut updater = lmgr.attach(BackendId(0)).unwrap();
    updater.start_transaction();
    let xid = TransactionId(1000);
    updater.xact_lock_table_insert(xid).unwrap();
    let l2 = lmgr.clone();
    let t = thread::spawn(move || {
        let mut w = l2.attach(BackendId(1)).unwrap();
        w.set_deadlock_timeout(NEVER);
        w.start_transaction();
        assert!(!w.conditional_xact_lock_table_wait(xid));
        w.xact_lock_table_wait(xid).unwrap();
        w.end_transaction();
    });
    wait_queued(&lmgr, 1);
    assert_eq!(lmgr.waiting_for(BackendId(1)).unwrap(), (LockTag::transaction(xid), Share));
    updater.end_transaction();
    t.join().unwrap();
    drop(updater);
    assert_empty(&lmgr);
}

#[test]
fn concurrent_random_locking_leaves_a_clean_table() {
    // Threads lock random relations in random modes, sometimes deadlocking; every error must
    // leave the table consistent and, at the end, empty.
    let lmgr = lmgr_with(4, |c| c.partitions = 4);
    let handles: Vec<_> = (0..4u32)
        .map(|i| {
            let l = lmgr.clone();
            thread::spawn(move || {
                let mut b = l.attach(BackendId(i)).unwrap();
                b.set_deadlock_timeout(Duration::from_millis(2));
                let mut x: u64 = 0x9E37_79B9 ^ (u64::from(i) * 7919);
                let mut next = || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let (mut ok, mut failed) = (0u32, 0u32);
                for _ in 0..150 {
                    b.start_transaction();
                    let mut good = true;
                    for _ in 0..3 {
                        let r = rel(&l, (next() % 4) as u32);
                        let m = LockMode::ALL[(next() % 8) as usize];
                        if b.lock(r, m, LockOptions::XACT).is_err() {
                            good = false;
                            break;
                        }
                    }
                    b.end_transaction();
                    if good { ok += 1 } else { failed += 1 }
                }
                (ok, failed)
            })
        })
        .collect();
    let (mut total, mut ok_total) = (0, 0);
    for h in handles {
        let (ok, failed) = h.join().unwrap();
        total += ok + failed;
        ok_total += ok;
    }
    assert_eq!(total, 600);
    assert_empty(&lmgr);
    // Every failed transaction failed on a deadlock (nothing else can fail here).
    assert_eq!(lmgr.stats().deadlocks, u64::from(600 - ok_total));
}
