//! Deterministic scenarios: the 64/65-subxid boundary, overflowed snapshots across commit,
//! wraparound at 2^31 and 2^32, ProcArray order, snapshot reuse, old_snapshot_threshold
//! through `get_snapshot_data`, and error paths.

mod common;

use std::sync::Arc;

use common::MemSubTrans;
use lockstack_common::{BackendId, TransactionId};
use lockstack_procarray::{
    AttachError, EndXactStrategy, Layout, OldSnapshotThreshold, PGPROC_MAX_CACHED_SUBXIDS,
    PROC_IN_LOGICAL_DECODING, PROC_IN_VACUUM, ProcArray, ProcArrayConfig, ProcArrayError, TimeMapMaintenance,
    USECS_PER_MINUTE, VirtualClock, xid_in_mvcc_snapshot,
};

fn cfg(layout: Layout, n: usize) -> ProcArrayConfig {
    let mut c = ProcArrayConfig::new(n);
    c.layout = layout;
    c
}

#[test]
fn subxid_cache_boundary_64_vs_65() {
    for layout in Layout::ALL {
        let pa = ProcArray::new(cfg(layout, 3)).unwrap();
        let st = MemSubTrans::default();
        let mut w = pa.attach(BackendId(0)).unwrap();
        let mut r = pa.attach(BackendId(1)).unwrap();
        let top = w.assign_xid();
        let mut subs = Vec::new();
        for _ in 0..PGPROC_MAX_CACHED_SUBXIDS {
            let s = w.assign_subxid();
            st.set_parent(s, top);
            subs.push(s);
        }
        // An unrelated transaction commits so that xmax moves past every subxid.
        let mut other = pa.attach(BackendId(2)).unwrap();
        other.assign_xid();
        other.end_transaction();
        let snap = r.get_snapshot_data().clone();
        assert!(!snap.suboverflowed, "{layout}: 64 subxids fit");
        assert_eq!(snap.subxip.len(), 64, "{layout}");
        assert_eq!(snap.xip, vec![top]);
        for s in &subs {
            assert!(xid_in_mvcc_snapshot(*s, &snap, &st).unwrap(), "{layout}: subxid {s}");
        }
        // The 65th overflows the cache.
        let s65 = w.assign_subxid();
        st.set_parent(s65, top);
        assert!(w.subxids_overflowed());
        other.assign_xid();
        other.end_transaction();
        let snap = r.get_snapshot_data().clone();
        assert!(snap.suboverflowed, "{layout}: 65 subxids overflow");
        assert!(s65.precedes(snap.xmax));
        assert!(
            xid_in_mvcc_snapshot(s65, &snap, &st).unwrap(),
            "{layout}: overflowed subxid found through subtrans"
        );
        assert_eq!(pa.stats().subxid_overflows, 1);
        w.end_transaction();
    }
}

#[test]
fn overflowed_snapshot_keeps_rows_invisible_after_commit() {
    for layout in Layout::ALL {
        for strategy in EndXactStrategy::ALL {
            let mut c = cfg(layout, 3);
            c.end_xact = strategy;
            let pa = ProcArray::new(c).unwrap();
            let st = MemSubTrans::default();
            let mut w = pa.attach(BackendId(0)).unwrap();
            let mut r = pa.attach(BackendId(1)).unwrap();
            let top = w.assign_xid();
            let mut subs = Vec::new();
            for _ in 0..70 {
                let s = w.assign_subxid();
                st.set_parent(s, top);
                subs.push(s);
            }
            let mut other = pa.attach(BackendId(2)).unwrap();
            other.assign_xid();
            other.end_transaction();
            let old = r.get_snapshot_data().clone();
            assert!(old.suboverflowed);
            w.end_transaction(); // commit
            for x in std::iter::once(top).chain(subs.iter().copied()) {
                assert!(
                    xid_in_mvcc_snapshot(x, &old, &st).unwrap(),
                    "{layout}/{strategy}: {x} visible too early"
                );
            }
            let new = r.get_snapshot_data().clone();
            assert!(!new.suboverflowed);
            for x in std::iter::once(top).chain(subs.iter().copied()) {
                assert!(
                    !xid_in_mvcc_snapshot(x, &new, &st).unwrap(),
                    "{layout}/{strategy}: {x} still running"
                );
            }
        }
    }
}

#[test]
fn wraparound_at_2_pow_31_and_2_pow_32() {
    for first in [(1u32 << 31) - 3, u32::MAX - 2] {
        for layout in Layout::ALL {
            let mut c = cfg(layout, 4);
            c.first_xid = TransactionId(first);
            let pa = ProcArray::new(c).unwrap();
            let st = MemSubTrans::default();
            let mut a = pa.attach(BackendId(0)).unwrap();
            let mut b = pa.attach(BackendId(1)).unwrap();
            let mut r = pa.attach(BackendId(2)).unwrap();
            let xa = a.assign_xid();
            assert_eq!(xa, TransactionId(first));
            // Hand out xids across the boundary.
            let mut xs = Vec::new();
            for _ in 0..6 {
                let x = b.assign_xid();
                xs.push(x);
                b.end_transaction();
            }
            assert!(xs.iter().all(|x| x.is_normal()), "special xids skipped: {xs:?}");
            if first == u32::MAX - 2 {
                assert!(xs.contains(&TransactionId::FIRST_NORMAL), "wrapped to 3: {xs:?}");
            }
            let snap = r.get_snapshot_data().clone();
            assert_eq!(snap.xmin, xa, "{layout}: oldest running xid is xmin across the wrap");
            assert_eq!(snap.xmax, xs.last().unwrap().next());
            assert_eq!(snap.xip, vec![xa]);
            assert!(xid_in_mvcc_snapshot(xa, &snap, &st).unwrap());
            for x in &xs {
                assert!(!xid_in_mvcc_snapshot(*x, &snap, &st).unwrap(), "{layout}: {x} committed");
            }
            assert!(xid_in_mvcc_snapshot(pa.next_xid(), &snap, &st).unwrap());
            assert_eq!(r.recent_global_xmin(), xa);
            a.end_transaction();
        }
    }
}

#[test]
fn procarray_order_is_kept_sorted_and_dense_entries_follow() {
    for layout in Layout::ALL {
        let pa = ProcArray::new(cfg(layout, 8)).unwrap();
        let st = MemSubTrans::default();
        let mut bs: Vec<_> = [5u32, 2, 7, 0].iter().map(|&i| pa.attach(BackendId(i)).unwrap()).collect();
        assert_eq!(pa.members(), vec![BackendId(0), BackendId(2), BackendId(5), BackendId(7)]);
        for b in bs.iter_mut() {
            b.assign_xid();
            let s = b.assign_subxid();
            st.set_parent(s, b.xid());
        }
        let xid7 = bs[2].xid();
        let sub7 = bs[2].subxids()[0];
        // Remove 2 and 5: entries move down.
        let b2 = bs.remove(1);
        b2.detach();
        let b5 = bs.remove(0);
        b5.detach();
        assert_eq!(pa.members(), vec![BackendId(0), BackendId(7)]);
        let mut r = pa.attach(BackendId(3)).unwrap();
        assert_eq!(pa.members(), vec![BackendId(0), BackendId(3), BackendId(7)]);
        // Move xmax past every assigned xid.
        r.assign_xid();
        r.end_transaction();
        let snap = r.get_snapshot_data().clone();
        assert!(snap.xip.contains(&xid7), "{layout}: moved entry still visible");
        assert!(snap.subxip.contains(&sub7), "{layout}: moved subxids still visible");
        assert_eq!(snap.xip.len(), 2);
        assert_eq!(pa.num_procs(), 3);
        // Re-attaching a live slot fails; a free one works again.
        assert_eq!(
            pa.attach(BackendId(7)).unwrap_err(),
            AttachError::AlreadyAttached { id: BackendId(7), subsystem: "ProcArray" }
        );
        assert_eq!(
            pa.attach(BackendId(8)).unwrap_err(),
            AttachError::OutOfRange { id: BackendId(8), max_backends: 8 }
        );
        drop(bs);
        assert_eq!(pa.members(), vec![BackendId(3)]);
        assert!(pa.attach(BackendId(2)).is_ok());
    }
}

#[test]
fn dense_snapshots_are_reused_until_an_xid_bearing_transaction_ends() {
    let pa = ProcArray::new(ProcArrayConfig::pg14(4)).unwrap();
    let mut w = pa.attach(BackendId(0)).unwrap();
    let mut r = pa.attach(BackendId(1)).unwrap();
    let mut ro = pa.attach(BackendId(2)).unwrap();
    w.assign_xid();
    let s1 = r.get_snapshot_data().clone();
    // Read-only transactions and new xids do not invalidate.
    ro.get_snapshot_data();
    ro.end_transaction();
    let mut w2 = pa.attach(BackendId(3)).unwrap();
    let x2 = w2.assign_xid();
    let s2 = r.get_snapshot_data().clone();
    assert_eq!(s1, s2);
    assert!(x2.follows_or_equals(s2.xmax));
    assert_eq!(r.stats().snapshots_reused.get(), 1);
    // A commit does.
    let before = pa.xact_completion_count();
    w.end_transaction();
    assert_eq!(pa.xact_completion_count(), before + 1);
    let s3 = r.get_snapshot_data().clone();
    assert_ne!(s3, s2);
    assert_eq!(r.stats().snapshots_taken.get(), 2);
    // With reuse off every snapshot scans.
    let mut c = ProcArrayConfig::pg14(2);
    c.snapshot_reuse = false;
    let pa = ProcArray::new(c).unwrap();
    let mut r = pa.attach(BackendId(0)).unwrap();
    for _ in 0..3 {
        r.get_snapshot_data();
    }
    assert_eq!(r.stats().snapshots_taken.get(), 3);
    assert_eq!(r.stats().snapshots_reused.get(), 0);
}

#[test]
fn subxact_abort_removes_cached_xids() {
    for layout in Layout::ALL {
        let pa = ProcArray::new(cfg(layout, 3)).unwrap();
        let st = MemSubTrans::default();
        let mut w = pa.attach(BackendId(0)).unwrap();
        let mut r = pa.attach(BackendId(1)).unwrap();
        let top = w.assign_xid();
        let s1 = w.assign_subxid();
        let s2 = w.assign_subxid();
        st.set_parent(s1, top);
        st.set_parent(s2, top);
        w.abort_subxids(&[s1]).unwrap();
        assert_eq!(pa.latest_completed_xid(), s1);
        let snap = r.get_snapshot_data().clone();
        assert_eq!(snap.subxip, vec![s2], "{layout}");
        assert!(!xid_in_mvcc_snapshot(s1, &snap, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(s2, &snap, &st).unwrap());
        assert_eq!(w.abort_subxids(&[s1]), Err(ProcArrayError::NotMySubxid(s1)));
        assert_eq!(w.abort_subxids(&[top]), Err(ProcArrayError::NotMySubxid(top)));
        let out = w.end_transaction();
        assert_eq!(out.latest_xid, s2);
        assert_eq!(pa.latest_completed_xid(), s2);
    }
}

#[test]
fn old_snapshot_threshold_map_through_snapshots() {
    for (variant, within_minute) in [
        (TimeMapMaintenance::EveryCall, 10),
        (TimeMapMaintenance::XminAdvanced, 1),
        (TimeMapMaintenance::MinuteBoundary, 1),
    ] {
        let clock = Arc::new(VirtualClock::new(100 * USECS_PER_MINUTE + 1));
        let mut c = ProcArrayConfig::new(2);
        c.old_snapshot_threshold = OldSnapshotThreshold::Minutes(1);
        c.time_map = variant;
        let pa = ProcArray::with_clock(c, clock.clone()).unwrap();
        let mut r = pa.attach(BackendId(0)).unwrap();
        for _ in 0..10 {
            r.get_snapshot_data();
            r.end_transaction();
            clock.advance_us(1_000);
        }
        assert_eq!(r.stats().time_map_exclusive.get(), within_minute, "{variant:?}");
        clock.advance_secs(120);
        r.get_snapshot_data();
        let (_, entries) = pa.old_snapshot_map().entries();
        assert_eq!(entries.len(), 3, "{variant:?}: two new minute buckets");
        assert_eq!(pa.old_snapshot_map().latest_xmin(), r.snapshot().xmin);
    }
    // Off: no lock, no map.
    let pa = ProcArray::new(ProcArrayConfig::new(1)).unwrap();
    let mut r = pa.attach(BackendId(0)).unwrap();
    r.get_snapshot_data();
    assert_eq!(r.stats().time_map_exclusive.get(), 0);
    assert!(pa.old_snapshot_map().entries().1.is_empty());
}

#[test]
fn bad_config_is_an_error_not_a_panic() {
    let mut c = ProcArrayConfig::new(4);
    c.first_xid = TransactionId::INVALID;
    let e = ProcArray::new(c).unwrap_err();
    assert!(e.to_string().contains("first_xid"), "{e}");
    assert!(ProcArray::new(ProcArrayConfig::new(0)).unwrap_err().to_string().contains("max_backends"));
}

#[test]
fn read_only_transactions_take_no_proc_array_lock_at_end() {
    let pa = ProcArray::new(ProcArrayConfig::new(2)).unwrap();
    let mut r = pa.attach(BackendId(0)).unwrap();
    r.get_snapshot_data();
    let held = pa.proc_array_lock().exclusive();
    // Would deadlock (block forever) if the read-only end needed the lock.
    let out = r.end_transaction();
    drop(held);
    assert_eq!(out.role, lockstack_procarray::EndXactRole::ReadOnly);
    assert_eq!(r.stats().end_readonly.get(), 1);
}

/// Lazy VACUUM's flag: a vacuuming backend's xmin is left out of everyone's horizon (and a
/// logically decoding one's out of the snapshot loop's), the flags go at the end of its
/// transaction, and unknown bits are refused without changing anything.
#[test]
fn vacuum_flags_hide_the_xmin_and_clear_at_end() {
    for layout in Layout::ALL {
        for flag in [PROC_IN_VACUUM, PROC_IN_LOGICAL_DECODING] {
            let pa = ProcArray::new(cfg(layout, 3)).unwrap();
            let mut w = pa.attach(BackendId(0)).unwrap();
            let mut v = pa.attach(BackendId(1)).unwrap();
            let mut r = pa.attach(BackendId(2)).unwrap();
            w.assign_xid();
            w.end_transaction();
            v.get_snapshot_data();
            let old = v.recent_xmin();
            w.assign_xid();
            w.end_transaction();
            assert_eq!(r.get_snapshot_data().xmin, old.next(), "{layout:?}");
            assert_eq!(r.recent_global_xmin(), old, "{layout:?}: v's xmin holds the horizon");
            assert_eq!(v.set_vacuum_flags(0x80), Err(ProcArrayError::UnknownVacuumFlags(0x80)));
            assert_eq!(v.vacuum_flags(), 0);
            v.set_vacuum_flags(flag).unwrap();
            assert_eq!(v.vacuum_flags(), flag);
            // Dense reuse would keep the old horizon; end a transaction so it is recomputed.
            w.assign_xid();
            w.end_transaction();
            r.get_snapshot_data();
            let horizon = r.recent_global_xmin();
            if flag == PROC_IN_VACUUM || layout != Layout::Dense {
                // r's own advertised xmin (from its first snapshot) is now the oldest.
                assert_eq!(horizon, old.next(), "{layout:?} {flag:#x}: v's xmin is ignored");
            }
            v.end_transaction();
            assert_eq!(v.vacuum_flags(), 0);
        }
    }
}

/// The SLRU-backed pg_subtrans from lockstack-clog answers overflowed snapshots: a deep
/// subtransaction of a running transaction stays invisible, one of a finished transaction
/// that precedes xmin is visible.
#[test]
fn clog_subtrans_backs_overflowed_snapshots() {
    use lockstack_clog::{SubTrans, SubTransConfig};
    use lockstack_common::TransactionId as X;
    use lockstack_procarray::{Snapshot, xid_in_mvcc_snapshot};
    let st = SubTrans::new(SubTransConfig::default()).unwrap();
    st.extend(X(5000)).unwrap();
    // 1000 runs, with child 1001 and grandchild 1002; 900 finished, with child 901.
    st.set_parent(X(1001), X(1000)).unwrap();
    st.set_parent(X(1002), X(1001)).unwrap();
    st.set_parent(X(901), X(900)).unwrap();
    let snap = Snapshot {
        xmin: X(950),
        xmax: X(1100),
        xip: vec![X(1000)],
        subxip: vec![],
        suboverflowed: true,
        xact_completion_count: 0,
    };
    assert!(xid_in_mvcc_snapshot(X(1002), &snap, &st).unwrap(), "grandchild of a running xact");
    assert!(xid_in_mvcc_snapshot(X(1001), &snap, &st).unwrap());
    assert!(!xid_in_mvcc_snapshot(X(901), &snap, &st).unwrap(), "child of an xact before xmin");
    assert!(!xid_in_mvcc_snapshot(X(1050), &snap, &st).unwrap(), "a finished top-level xact");
}

/// The xid-extension hook (`ExtendCLOG` / `ExtendSUBTRANS` under XidGenLock) sees every xid,
/// top-level and sub, in assignment order and before it is handed out; a failure assigns
/// nothing and consumes no xid; a second hook is refused.
#[test]
fn xid_extend_hook_runs_for_every_xid_in_order_and_can_fail() {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    let pa = ProcArray::new(ProcArrayConfig::new(2)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let fail = Arc::new(AtomicBool::new(false));
    let (s, f) = (Arc::clone(&seen), Arc::clone(&fail));
    pa.set_xid_extend_hook(Box::new(move |x| {
        if f.load(Ordering::Relaxed) {
            return Err(format!("no room for xid {x}").into());
        }
        s.lock().unwrap().push(x);
        Ok(())
    }))
    .unwrap();
    assert_eq!(pa.set_xid_extend_hook(Box::new(|_| Ok(()))), Err(ProcArrayError::XidExtendHookSet));
    let mut a = pa.attach(BackendId(0)).unwrap();
    let mut b = pa.attach(BackendId(1)).unwrap();
    let x1 = a.assign_xid();
    let s1 = a.assign_subxid();
    let x2 = b.assign_xid();
    assert_eq!(*seen.lock().unwrap(), vec![x1, s1, x2]);
    fail.store(true, Ordering::Relaxed);
    a.end_transaction();
    let next = pa.next_xid();
    let err = a.try_assign_xid().unwrap_err();
    assert!(matches!(&err, ProcArrayError::XidExtend(m) if m.contains(&next.to_string())), "{err}");
    assert_eq!(a.xid(), TransactionId::INVALID);
    assert!(b.try_assign_subxid().is_err());
    assert!(b.subxids().is_empty());
    assert_eq!(pa.next_xid(), next, "a failed extension consumes no xid");
    fail.store(false, Ordering::Relaxed);
    assert_eq!(a.try_assign_xid().unwrap(), next);
    assert_eq!(seen.lock().unwrap().last(), Some(&next));
}
