//! loom model of ending transactions through group XID clearing (9.6 `ProcArrayGroupClearXid`)
//! while a snapshot holds ProcArrayLock shared: every request is performed exactly once, every
//! follower is woken (loom reports a deadlock otherwise), and the ProcArray ends consistent.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p lockstack-procarray --release --test loom_group_clear`

#![cfg(loom)]

use lockstack_common::{BackendId, TransactionId};
use lockstack_procarray::{EndXactRole, EndXactStrategy, Layout, ProcArray, ProcArrayConfig};

fn model(strategy: EndXactStrategy) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let mut cfg = ProcArrayConfig::new(3);
        cfg.layout = Layout::Pgxact;
        cfg.end_xact = strategy;
        let pa = ProcArray::new(cfg).unwrap();
        let mut w0 = pa.attach(BackendId(0)).unwrap();
        let mut w1 = pa.attach(BackendId(1)).unwrap();
        let mut r = pa.attach(BackendId(2)).unwrap();
        let x0 = w0.assign_xid();
        let x1 = w1.assign_xid();
        let count0 = pa.xact_completion_count();

        let t0 = loom::thread::spawn(move || {
            let out = w0.end_transaction();
            (w0, out)
        });
        let t1 = loom::thread::spawn(move || {
            let out = w1.end_transaction();
            (w1, out)
        });
        // The reader holds ProcArrayLock shared meanwhile, so the ends may have to queue.
        let snap = r.get_snapshot_data().clone();
        let (w0, o0) = t0.join().unwrap();
        let (w1, o1) = t1.join().unwrap();

        // Each request was performed exactly once.
        assert_eq!(pa.xact_completion_count(), count0 + 2);
        let s = pa.stats();
        assert_eq!(s.end_with_xid(), 2);
        match strategy {
            EndXactStrategy::GroupClear => {
                assert_eq!(s.end_group_alone + s.end_group_led_members, 2);
                assert_eq!(s.end_group_leader + s.end_group_follower, s.end_group_led_members);
            }
            EndXactStrategy::FlexLock => assert_eq!(s.end_flex_direct + s.end_flex_queued, 2),
            EndXactStrategy::Exclusive => assert_eq!(s.end_exclusive, 2),
        }
        for o in [o0, o1] {
            assert_ne!(o.role, EndXactRole::ReadOnly);
        }
        let newest = if x1.follows(x0) { x1 } else { x0 };
        assert_eq!(pa.latest_completed_xid(), newest);
        // The snapshot is one consistent state: it lists only our xids, below xmax, and the
        // xid that set its xmax (latest_completed_xid then) is one it sees as finished.
        let finished = |x: TransactionId| x.precedes(snap.xmax) && !snap.xip.contains(&x);
        assert!(snap.xip.iter().all(|x| (*x == x0 || *x == x1) && x.precedes(snap.xmax)), "{snap:?}");
        let last = snap.xmax.prev();
        assert!(last == x0.prev() || ((last == x0 || last == x1) && finished(last)), "{snap:?}");
        // Nothing is left running.
        let after = r.get_snapshot_data();
        assert!(after.xip.is_empty(), "{after:?}");
        assert_eq!(after.xmax, newest.next());
        drop((w0, w1, r));
    });
}

#[test]
fn group_clear_every_request_once_every_follower_woken() {
    model(EndXactStrategy::GroupClear);
}

#[test]
fn flexlock_every_request_once_every_waiter_woken() {
    model(EndXactStrategy::FlexLock);
}
