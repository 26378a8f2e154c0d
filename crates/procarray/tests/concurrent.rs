//! Committer threads against snapshot takers, for every layout and strategy. Every snapshot
//! must be consistent: xip inside [xmin, xmax) without duplicates, xmin and xmax never moving
//! back for one taker, no xid that had committed before the snapshot began counted as running,
//! and every xid still running after the snapshot ended counted as running. Iteration counts,
//! not durations, bound the test.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use common::SyncSubTrans;
use lockstack_common::{BackendId, TransactionId};
use lockstack_procarray::{EndXactStrategy, Layout, ProcArray, ProcArrayConfig, xid_in_mvcc_snapshot};

const COMMITTERS: usize = 2;
const TAKERS: usize = 2;
const IDLE: usize = 22;
const XACTS: usize = 1500;
const SNAPSHOTS: usize = 1500;

fn run(layout: Layout, strategy: EndXactStrategy) {
    let mut cfg = ProcArrayConfig::new(COMMITTERS + TAKERS + IDLE);
    cfg.layout = layout;
    cfg.end_xact = strategy;
    let pa = ProcArray::new(cfg).unwrap();
    let subtrans = Arc::new(SyncSubTrans::default());
    // Per committer: the xid it is running (0 = none), and the last xid/subxid it finished.
    let running: Arc<Vec<AtomicU32>> = Arc::new((0..COMMITTERS).map(|_| AtomicU32::new(0)).collect());
    let done: Arc<Vec<AtomicU32>> = Arc::new((0..2 * COMMITTERS).map(|_| AtomicU32::new(0)).collect());
    // Idle members, two of them holding an xid for the whole run: ids 4 and 17, so that with
    // 26 members the dense loop sees an all-idle chunk (ids 8-15) between busy ones.
    let mut idle: Vec<_> =
        (0..IDLE).map(|i| pa.attach(BackendId((COMMITTERS + TAKERS + i) as u32)).unwrap()).collect();
    let long_running: Vec<TransactionId> = idle.iter_mut().step_by(13).map(|b| b.assign_xid()).collect();

    let mut threads = Vec::new();
    for c in 0..COMMITTERS {
        let pa = Arc::clone(&pa);
        let st = Arc::clone(&subtrans);
        let running = Arc::clone(&running);
        let done = Arc::clone(&done);
        threads.push(std::thread::spawn(move || {
            let mut b = pa.attach(BackendId(c as u32)).unwrap();
            for i in 0..XACTS {
                let x = b.assign_xid();
                running[c].store(x.0, Ordering::SeqCst);
                let nsub = if i % 50 == 0 { 70 } else { i % 3 };
                let mut last_sub = TransactionId::INVALID;
                for _ in 0..nsub {
                    last_sub = b.assign_subxid();
                    st.set_parent(last_sub, x);
                }
                running[c].store(0, Ordering::SeqCst);
                b.end_transaction();
                done[2 * c].store(x.0, Ordering::SeqCst);
                done[2 * c + 1].store(last_sub.0, Ordering::SeqCst);
            }
        }));
    }
    let mut takers = Vec::new();
    for t in 0..TAKERS {
        let pa = Arc::clone(&pa);
        let st = Arc::clone(&subtrans);
        let running = Arc::clone(&running);
        let done = Arc::clone(&done);
        let long_running = long_running.clone();
        takers.push(std::thread::spawn(move || {
            let mut b = pa.attach(BackendId((COMMITTERS + t) as u32)).unwrap();
            let mut prev: Option<(TransactionId, TransactionId)> = None;
            for _ in 0..SNAPSHOTS {
                let finished: Vec<u32> = done.iter().map(|d| d.load(Ordering::SeqCst)).collect();
                let snap = b.get_snapshot_data().clone();
                let still: Vec<u32> = running.iter().map(|r| r.load(Ordering::SeqCst)).collect();
                assert!(snap.xmin.precedes_or_equals(snap.xmax));
                for (i, x) in snap.xip.iter().enumerate() {
                    assert!(x.follows_or_equals(snap.xmin) && x.precedes(snap.xmax), "{x} outside {snap:?}");
                    assert!(!snap.xip[..i].contains(x), "duplicate {x}");
                }
                if let Some((pxmin, pxmax)) = prev {
                    assert!(pxmin.precedes_or_equals(snap.xmin), "xmin went back: {pxmin} -> {}", snap.xmin);
                    assert!(pxmax.precedes_or_equals(snap.xmax), "xmax went back: {pxmax} -> {}", snap.xmax);
                }
                prev = Some((snap.xmin, snap.xmax));
                for &f in finished.iter().filter(|&&f| f != 0) {
                    assert!(
                        !xid_in_mvcc_snapshot(TransactionId(f), &snap, &*st).unwrap(),
                        "{f} finished before the snapshot but counts as running: {snap:?}"
                    );
                }
                for &r in still.iter().filter(|&&r| r != 0) {
                    assert!(
                        xid_in_mvcc_snapshot(TransactionId(r), &snap, &*st).unwrap(),
                        "{r} still running after the snapshot but counts as finished: {snap:?}"
                    );
                }
                for &l in &long_running {
                    assert!(xid_in_mvcc_snapshot(l, &snap, &*st).unwrap());
                }
                b.end_transaction();
            }
        }));
    }
    for t in threads.into_iter().chain(takers) {
        t.join().unwrap();
    }
    let s = pa.stats();
    assert_eq!(s.xids_assigned, (COMMITTERS * XACTS + long_running.len()) as u64);
    assert_eq!(s.end_with_xid(), (COMMITTERS * XACTS) as u64, "{layout}/{strategy}: every end counted once");
    assert_eq!(s.snapshots_taken + s.snapshots_reused, (TAKERS * SNAPSHOTS) as u64);
    match strategy {
        EndXactStrategy::Exclusive => assert_eq!(s.end_exclusive, (COMMITTERS * XACTS) as u64),
        EndXactStrategy::FlexLock => {
            assert_eq!(s.end_flex_direct + s.end_flex_queued, (COMMITTERS * XACTS) as u64)
        }
        EndXactStrategy::GroupClear => {
            // Every request cleared exactly once: by its owner alone, or inside a led group.
            assert_eq!(s.end_group_alone + s.end_group_led_members, (COMMITTERS * XACTS) as u64);
            assert_eq!(s.end_group_leader + s.end_group_follower, s.end_group_led_members);
        }
    }
    // Nothing of the committers is left in the ProcArray.
    drop(idle);
    let mut r = pa.attach(BackendId(0)).unwrap();
    let snap = r.get_snapshot_data();
    assert!(snap.xip.is_empty() && snap.subxip.is_empty() && !snap.suboverflowed, "{snap:?}");
    assert_eq!(snap.xmin, snap.xmax);
}

#[test]
fn concurrent_snapshots_are_consistent_pgproc() {
    for s in EndXactStrategy::ALL {
        run(Layout::Pgproc, s);
    }
}

#[test]
fn concurrent_snapshots_are_consistent_pgxact() {
    for s in EndXactStrategy::ALL {
        run(Layout::Pgxact, s);
    }
}

#[test]
fn concurrent_snapshots_are_consistent_pgxact_padded() {
    for s in EndXactStrategy::ALL {
        run(Layout::PgxactPadded, s);
    }
}

#[test]
fn concurrent_snapshots_are_consistent_dense() {
    for s in EndXactStrategy::ALL {
        run(Layout::Dense, s);
    }
}
