//! pg_subtrans: parents, topmost parents across pages, bad input, persistence, concurrency.

use std::sync::Arc;

use lockstack_clog::{
    SUBTRANS_XACTS_PER_PAGE, SlruLocking, SlruStorage, SubTrans, SubTransConfig, SubTransError,
};
use lockstack_common::TransactionId;

const PAGE: u32 = SUBTRANS_XACTS_PER_PAGE;

fn x(n: u32) -> TransactionId {
    TransactionId(n)
}

#[test]
fn parents_and_topmost_parent_across_pages() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let st = SubTrans::new(SubTransConfig { buffers: 16, locking, ..SubTransConfig::default() }).unwrap();
        // Chain 100 <- 101 <- PAGE+5 <- 3*PAGE+1 (each on a different page), and 102 <- 100.
        st.set_parent(x(101), x(100)).unwrap();
        st.set_parent(x(PAGE + 5), x(101)).unwrap();
        st.set_parent(x(3 * PAGE + 1), x(PAGE + 5)).unwrap();
        st.set_parent(x(102), x(100)).unwrap();
        // Neighbouring entries in one 64-bit word are independent.
        st.set_parent(x(103), x(99)).unwrap();
        assert_eq!(st.get_parent(x(101)).unwrap(), x(100));
        assert_eq!(st.get_parent(x(102)).unwrap(), x(100));
        assert_eq!(st.get_parent(x(103)).unwrap(), x(99));
        assert_eq!(st.get_parent(x(100)).unwrap(), TransactionId::INVALID);
        assert_eq!(st.get_topmost_parent(x(3 * PAGE + 1)).unwrap(), x(100), "{locking}");
        assert_eq!(st.get_topmost_parent(x(PAGE + 5)).unwrap(), x(100));
        assert_eq!(st.get_topmost_parent(x(100)).unwrap(), x(100));
        assert_eq!(st.get_topmost_parent(x(7)).unwrap(), x(7));
        // Special xids have no parent.
        assert_eq!(st.get_parent(TransactionId::FROZEN).unwrap(), TransactionId::INVALID);
        // Setting the same parent again is fine; a different one is refused.
        st.set_parent(x(101), x(100)).unwrap();
        let e = st.set_parent(x(101), x(50)).unwrap_err();
        assert!(matches!(e, SubTransError::ParentAlreadySet { .. }), "{e}");
        assert_eq!(st.get_parent(x(101)).unwrap(), x(100));
    }
}

#[test]
fn bad_parents_are_errors_not_panics() {
    let st = SubTrans::new(SubTransConfig::default()).unwrap();
    for (xid, parent) in [(10, 10), (10, 11), (10, 0), (1, 0), (10, 2)] {
        let e = st.set_parent(x(xid), x(parent)).unwrap_err();
        assert!(matches!(e, SubTransError::InvalidParent { .. }), "{xid} <- {parent}: {e}");
    }
    // Across wraparound a parent just before 2^32 precedes a child just after 0.
    st.set_parent(x(5), x(u32::MAX - 3)).unwrap();
    assert_eq!(st.get_topmost_parent(x(5)).unwrap(), x(u32::MAX - 3));
    // Config errors.
    assert!(
        SubTrans::new(SubTransConfig {
            buffers: 20,
            locking: SlruLocking::Banks,
            ..SubTransConfig::default()
        })
        .is_err()
    );
}

#[test]
fn parents_survive_reopen_and_truncation_keeps_the_newest_segment() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = || SubTransConfig {
        buffers: 4,
        storage: SlruStorage::Directory { path: dir.path().join("pg_subtrans"), fsync: false },
        ..SubTransConfig::default()
    };
    {
        let st = SubTrans::new(cfg()).unwrap();
        for i in 0..10u32 {
            // One child per page, pages 0, 40, 80, ... (segments 0, 1, 2, ...).
            let child = i * 40 * PAGE + 10;
            st.extend(x(i * 40 * PAGE)).unwrap();
            st.set_parent(x(child), x(child - 1)).unwrap();
        }
        st.flush().unwrap();
    }
    let st = SubTrans::new(cfg()).unwrap();
    for i in 0..10u32 {
        let child = i * 40 * PAGE + 10;
        assert_eq!(st.get_parent(x(child)).unwrap(), x(child - 1));
    }
    let segs = st.slru().segments().unwrap();
    assert_eq!(segs.len(), 10);
    // A reopened SubTrans knows no latest page until told (StartupSUBTRANS does).
    st.slru().set_latest_page(9 * 40);
    st.truncate(x(9 * 40 * PAGE + 10)).unwrap();
    assert_eq!(st.slru().segments().unwrap(), vec![*segs.last().unwrap()]);
    assert_eq!(st.get_parent(x(9 * 40 * PAGE + 10)).unwrap(), x(9 * 40 * PAGE + 9));
}

#[test]
fn concurrent_parents_through_a_small_pool() {
    let st = Arc::new(SubTrans::new(SubTransConfig { buffers: 4, ..SubTransConfig::default() }).unwrap());
    const THREADS: u32 = 4;
    const CHAINS: u32 = 300;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let st = Arc::clone(&st);
            std::thread::spawn(move || {
                for c in 0..CHAINS {
                    // Chain of 3 over 3 pages, interleaved with other threads' chains.
                    let top = (c * THREADS + t) * 3 + 10;
                    let a = top + 16 * PAGE;
                    let b = a + 16 * PAGE;
                    st.set_parent(x(a), x(top)).unwrap();
                    st.set_parent(x(b), x(a)).unwrap();
                    assert_eq!(st.get_topmost_parent(x(b)).unwrap(), x(top));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    for t in 0..THREADS {
        for c in 0..CHAINS {
            let top = (c * THREADS + t) * 3 + 10;
            assert_eq!(st.get_topmost_parent(x(top + 32 * PAGE)).unwrap(), x(top));
        }
    }
    assert!(st.stats().evictions > 0);
}
