//! pg_subtrans stays bounded: every assigned xid zeroes its pg_subtrans
//! entry, so every 2048 xids leave an 8 KiB page behind unless the log is truncated below the
//! oldest running xid, as PostgreSQL does at every checkpoint (`TruncateSUBTRANS`). The test
//! counts the segments kept, never time.

use lockstack_common::BackendId;
use lockstack_engine::engine::{Engine, EngineConfig};
use lockstack_engine::tables::TableId;

/// Xids per pg_subtrans segment (2048 per page, 32 pages).
const SEGMENT_XIDS: u32 = 2048 * 32;

#[test]
fn pg_subtrans_keeps_only_the_segments_of_running_xids() {
    let e = Engine::new(EngineConfig::new(2, 1024), 1, 100).unwrap();
    let mut s = e.session(BackendId(0)).unwrap();
    let mut old = e.session(BackendId(1)).unwrap();
    // A transaction that stays open across the first segment boundary holds truncation back.
    old.begin();
    assert!(old.update_add(TableId::Tellers, 1, 2, 1).unwrap());
    let mut most = 0;
    let mut last_xid = 0;
    for i in 0..5 * SEGMENT_XIDS {
        // An aborted insert: the cheapest transaction that is assigned an xid.
        s.begin();
        s.insert_history([1, 1, 1, i64::from(i), 0]).unwrap();
        s.rollback().unwrap();
        if i == SEGMENT_XIDS + SEGMENT_XIDS / 2 {
            // The old transaction's segment (0) was kept so far.
            assert_eq!(
                e.subtrans.slru().segments().unwrap().first(),
                Some(&0),
                "a running xid's segment went"
            );
            old.commit().unwrap();
        }
        if i % 1024 == 0 {
            most = most.max(e.subtrans.slru().segments().unwrap().len());
        }
        last_xid = i;
    }
    let kept = e.subtrans.slru().segments().unwrap();
    // From the oldest running xid's segment to the newest one, plus the one being filled; the
    // newest pages are still in buffers (32 of them), not in the store.
    assert!(kept.len() <= 2, "pg_subtrans keeps {kept:?} after {last_xid} transactions");
    assert!(most <= 3, "pg_subtrans kept up to {most} segments at once");
}
