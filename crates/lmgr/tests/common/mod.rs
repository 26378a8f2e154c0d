//! Helpers shared by the lmgr integration tests.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockstack_lmgr::{BackendId, Lmgr, LmgrConfig, LockTag, Oid};

/// A lock manager with `backends` backends and otherwise default settings.
pub(crate) fn lmgr_with(backends: usize, f: impl FnOnce(&mut LmgrConfig)) -> Arc<Lmgr> {
    let mut cfg = LmgrConfig { max_backends: backends, ..LmgrConfig::default() };
    f(&mut cfg);
    Lmgr::new(cfg).unwrap()
}

/// Relation `n` of the test database.
pub(crate) fn rel(lmgr: &Lmgr, n: u32) -> LockTag {
    LockTag::relation(lmgr.database(), Oid(16384 + n))
}

/// Waits (by polling the lock manager's state, never by guessing a duration) until `cond`
/// holds; panics after 60 s so that a broken build fails instead of hanging.
pub(crate) fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Waits until backend `b` is queued on a lock.
pub(crate) fn wait_queued(lmgr: &Lmgr, b: u32) {
    wait_until(&format!("backend {b} waits"), || lmgr.waiting_for(BackendId(b)).is_some());
}

/// Asserts the invariants and that nothing is left anywhere.
pub(crate) fn assert_empty(lmgr: &Lmgr) {
    lmgr.check_invariants().unwrap();
    assert_eq!(lmgr.main_table_len(), 0, "main table not empty: {:?}", lmgr.lock_status());
    assert_eq!(lmgr.fast_path_len(), 0, "fast-path slots not empty");
    assert_eq!(lmgr.strong_lock_total(), 0, "strong-lock counters not zero");
}
