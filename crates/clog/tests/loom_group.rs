//! loom models of the group CLOG status update (PostgreSQL 11's
//! `TransactionGroupUpdateXidStatus`) as `Clog` drives it: every request is performed exactly
//! once, by its owner or by a group leader, and every follower is woken (a follower left asleep
//! makes loom report a deadlock).
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-clog --release --test loom_group`.
#![cfg(loom)]

use lockstack_clog::{Clog, ClogConfig, ClogUpdatePath, XidStatus};
use lockstack_common::{BackendId, TransactionId};
use loom::sync::Arc;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b
}

/// Backend `i` commits `xids[i]` (backend 0 on the model's main thread, unless `holder` is
/// set: then the main thread holds the CLOG lock while the backends start, as a backend busy in
/// the CLOG would, and only releases it; backends run on spawned threads). All pages are resident before the threads start, so the
/// leader can apply every request. Returns after checking the final statuses and that the
/// group accounting adds up: the members counted by leaders are exactly the leaders plus the
/// followers.
fn run_model(xids: &'static [u32], holder: bool) {
    // Executions (over the whole exploration) in which some request was run by a leader for
    // a follower: the model must reach the group path, not only the uncontended one.
    let grouped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let grouped2 = std::sync::Arc::clone(&grouped);
    builder().check(move || {
        let clog = Arc::new(
            Clog::new(ClogConfig { buffers: 2, max_backends: xids.len(), ..ClogConfig::default() }).unwrap(),
        );
        for &xid in xids {
            clog.extend(TransactionId(xid - xid % lockstack_clog::CLOG_XACTS_PER_PAGE)).unwrap();
        }
        let first = if holder { 0 } else { 1 };
        let held = holder.then(|| clog.slru().bank_lock_for(0).exclusive());
        let handles: Vec<_> = xids[first..]
            .iter()
            .enumerate()
            .map(|(i, &xid)| {
                let clog = Arc::clone(&clog);
                loom::thread::spawn(move || {
                    clog.set_tree_status_as(
                        Some(BackendId((i + first) as u32)),
                        TransactionId(xid),
                        &[],
                        XidStatus::Committed,
                        0,
                    )
                    .unwrap()
                })
            })
            .collect();
        let mut paths = Vec::new();
        drop(held);
        if !holder {
            paths.push(
                clog.set_tree_status_as(
                    Some(BackendId(0)),
                    TransactionId(xids[0]),
                    &[],
                    XidStatus::Committed,
                    0,
                )
                .unwrap(),
            );
        }
        for h in handles {
            paths.push(h.join().unwrap());
        }
        let (mut led, mut leaders, mut followers) = (0, 0, 0);
        for p in &paths {
            match *p {
                ClogUpdatePath::GroupLeader { members } => {
                    leaders += 1;
                    led += members;
                }
                ClogUpdatePath::GroupFollower => followers += 1,
                ClogUpdatePath::GroupAlone | ClogUpdatePath::Locked => {}
            }
        }
        assert_eq!(led, leaders + followers, "each request run exactly once: {paths:?}");
        if followers > 0 {
            grouped2.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        if xids
            .iter()
            .all(|x| x / lockstack_clog::CLOG_XACTS_PER_PAGE == xids[0] / lockstack_clog::CLOG_XACTS_PER_PAGE)
        {
            assert!(
                !paths.contains(&ClogUpdatePath::Locked),
                "same page and resident: never the fallback: {paths:?}"
            );
        }
        for &xid in xids {
            assert_eq!(clog.get_status(TransactionId(xid)).unwrap().0, XidStatus::Committed, "xid {xid}");
        }
        // Neighbours untouched.
        assert_eq!(clog.get_status(TransactionId(xids[0] + 1)).unwrap().0, XidStatus::InProgress);
    });
    assert!(grouped.load(std::sync::atomic::Ordering::Relaxed) > 0, "no execution formed a group");
}

#[test]
fn two_backends_same_page_while_the_lock_is_busy() {
    run_model(&[100, 102], true);
}

#[test]
fn three_backends_same_page() {
    run_model(&[100, 102, 104], false);
}

#[test]
fn three_backends_two_pages() {
    // The third backend's page differs: it is refused by a pending group, or joins one through
    // the benign race, or finds the lock free; every way ends with each xid committed once.
    run_model(&[100, 102, 32768 + 7], false);
}
