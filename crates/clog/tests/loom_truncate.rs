//! loom model of a CLOG status read racing a truncation: `Clog::get_status`
//! checks the oldest kept xid before and after reading the page, and `Clog::truncate`
//! advances that bound before it empties a buffer or removes a segment, under the bank lock
//! the read also takes. In every interleaving the read of a committed xid returns either
//! "committed" or `ClogError::Truncated`, never "in progress" (a page already removed reads
//! as zeros) or a missing page.
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-clog --release --test loom_truncate`.
#![cfg(loom)]

use lockstack_clog::{CLOG_XACTS_PER_PAGE, Clog, ClogConfig, ClogError, SlruLocking, XidStatus};
use lockstack_common::TransactionId;
use loom::sync::Arc;

fn model(locking: SlruLocking, zero_missing: bool) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let buffers = if locking == SlruLocking::Banks { 16 } else { 2 };
        let clog = Arc::new(
            Clog::new(ClogConfig {
                buffers,
                locking,
                zero_missing,
                group_update: false,
                ..ClogConfig::default()
            })
            .unwrap(),
        );
        let committed = TransactionId(7);
        let oldest = TransactionId(40 * CLOG_XACTS_PER_PAGE);
        clog.extend(TransactionId(3)).unwrap();
        clog.set_tree_status(committed, &[], XidStatus::Committed, 0).unwrap();
        clog.extend(oldest).unwrap();
        clog.flush().unwrap();
        let truncater = {
            let clog = Arc::clone(&clog);
            loom::thread::spawn(move || clog.truncate(oldest).unwrap())
        };
        match clog.get_status(committed) {
            Ok((XidStatus::Committed, _)) => {}
            Err(ClogError::Truncated { xid, .. }) => assert_eq!(xid, committed),
            other => panic!("a status read racing truncation answered {other:?}"),
        }
        truncater.join().unwrap();
        assert!(matches!(clog.get_status(committed), Err(ClogError::Truncated { .. })));
    });
}

#[test]
fn status_read_races_truncation_control_lock_zeroing() {
    model(SlruLocking::ControlLock, true);
}

#[test]
fn status_read_races_truncation_control_lock_strict() {
    model(SlruLocking::ControlLock, false);
}

#[test]
fn status_read_races_truncation_banks() {
    model(SlruLocking::Banks, true);
}
