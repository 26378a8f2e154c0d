//! loom model of the fast-path protocol: a strong locker's counter bump and transfer racing a
//! weak locker's fast-path grant must never leave both granted, i.e. a weak lock granted in a
//! fast-path slot is always seen (and moved into the main table) by the transfer.
//!
//! Run: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-lmgr --release --test loom_fastpath`.

#![cfg(loom)]

use lockstack_common::BackendId;
use lockstack_lmgr::{FastPathArea, FastPathGrant, LockMode};
use lockstack_lwlock::LwLockKind;
use loom::sync::Arc;
use loom::thread;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(f);
}

#[test]
fn strong_transfer_never_misses_a_weak_fast_path_grant() {
    model(|| {
        const REL: u32 = 16384;
        const HASH: u32 = 3;
        let fp = Arc::new(FastPathArea::new(2, 1, 4, LwLockKind::Atomic));
        let weak = {
            let fp = Arc::clone(&fp);
            thread::spawn(move || fp.try_grant(BackendId(0), REL, LockMode::AccessShare, HASH))
        };
        let strong = {
            let fp = Arc::clone(&fp);
            thread::spawn(move || {
                fp.begin_strong(HASH);
                let mut moved = Vec::new();
                fp.transfer(REL, |b, m| moved.push((b, m)));
                moved
            })
        };
        let weak = weak.join().unwrap();
        let moved = strong.join().unwrap();
        match weak {
            FastPathGrant::Granted { .. } => {
                // The strong locker must have seen and moved it: otherwise it would find no
                // conflict in the main table and both would be granted.
                assert_eq!(moved, vec![(BackendId(0), LockMode::AccessShare)]);
            }
            FastPathGrant::StrongLockHeld => assert!(moved.is_empty()),
            FastPathGrant::SlotsFull => panic!("one lock cannot fill 16 slots"),
        }
        assert!(fp.entries(BackendId(0)).is_empty(), "no weak lock left behind a strong one");
        assert_eq!(fp.strong_total(), 1);
    });
}
