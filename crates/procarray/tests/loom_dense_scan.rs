//! loom model of the dense (14) snapshot loop's chunk skipping while another backend assigns and
//! ends an xid: the loop tests eight `xids[]` entries for "all 0" at once and re-reads the
//! entries of a chunk that is not, so an xid stored between the two reads must not change the
//! snapshot. With 10 members the scan covers one full chunk and a two-entry tail; backends 1 and
//! 8 (one in each) hold xids throughout, a later xid has ended (so both are before `xmax`),
//! backend 3 (in the chunk) assigns and ends one during
//! the snapshot. Every snapshot must list exactly the two long-running xids: the concurrent xid
//! is never before `xmax` while it runs (it was assigned after `latest_completed_xid` was read),
//! and once it has ended it is gone from the array.
//!
//! Run with:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p lockstack-procarray --release --test loom_dense_scan`

#![cfg(loom)]

use lockstack_common::BackendId;
use lockstack_procarray::{Layout, ProcArray, ProcArrayConfig};

#[test]
fn dense_chunk_skip_sees_a_consistent_array_during_assignment() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    // Attaching ten members is many atomic operations before the interesting part starts.
    b.max_branches = 100_000;
    b.check(|| {
        let mut cfg = ProcArrayConfig::new(10);
        cfg.layout = Layout::Dense;
        cfg.snapshot_reuse = false;
        let pa = ProcArray::new(cfg).unwrap();
        let mut members: Vec<_> = (0..10).map(|i| Some(pa.attach(BackendId(i)).unwrap())).collect();
        let x1 = members[1].as_mut().unwrap().assign_xid();
        let x8 = members[8].as_mut().unwrap().assign_xid();
        // A later xid that has ended, so that xmax lies beyond x1 and x8.
        let m0 = members[0].as_mut().unwrap();
        m0.assign_xid();
        m0.end_transaction();
        let mut w = members[3].take().unwrap();
        let mut r = members[9].take().unwrap();

        let t = loom::thread::spawn(move || {
            let x = w.assign_xid();
            w.end_transaction();
            (w, x)
        });
        let snap = r.get_snapshot_data().clone();
        let (w, x3) = t.join().unwrap();

        let mut xip = snap.xip.clone();
        xip.sort_by_key(|x| x.0);
        assert_eq!(xip, vec![x1, x8], "{snap:?} (concurrent xid {x3})");
        assert_eq!(snap.xmin, x1, "{snap:?}");
        assert!(snap.subxip.is_empty() && !snap.suboverflowed, "{snap:?}");
        // Whether or not the concurrent transaction had ended, the snapshot answers for it
        // consistently with xmax: running (or not yet begun) unless it ended before.
        assert!(x3.follows_or_equals(snap.xmax) || x3.precedes(snap.xmax) && !snap.xip.contains(&x3));
        drop((w, r, members));
    });
}
