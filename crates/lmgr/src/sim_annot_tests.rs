//! The lock table reports its plain shared data to a simulation: an acquire through
//! the main table touches the LOCK and PROCLOCK entries it changes, a queued request touches
//! its wait-queue entry, and the partition LWLocks carry their names.

use super::*;
use crate::table::{LockEntry, ProcLockEntry, ProcLockTag};
use lockstack_common::sync::Instant;
use lockstack_common::sync::hook::{self, Access, Counting, Simulation};

#[test]
fn a_main_table_acquire_touches_its_lock_and_proclock_entries() {
    let lmgr = Lmgr::new(LmgrConfig::default()).unwrap();
    let mut b = lmgr.attach(BackendId(0)).unwrap();
    let tag = LockTag::advisory_int8(lmgr.database(), 42);
    let mode = LockMode::Exclusive;
    let c = Arc::new(Counting::with_log());
    let g = hook::install(Simulation::new(Box::new(c.clone())));
    b.lock(tag, mode, LockOptions::default()).unwrap();
    drop(g);
    let p = lmgr.partition_of(tag.hash_code());
    let (lock_at, proclock_at) = lmgr.with_partition_shared(p, |t| {
        let e = t.locks.get(&tag).expect("the LOCK exists while held");
        let pl = t.proclocks.get(&ProcLockTag { tag, backend: BackendId(0) }).expect("and its PROCLOCK");
        (e as *const LockEntry as usize, pl as *const ProcLockEntry as usize)
    });
    assert!(c.touched(lock_at, size_of::<LockEntry>(), Access::Write), "the LOCK entry is written");
    assert!(c.touched(proclock_at, size_of::<ProcLockEntry>(), Access::Write), "the PROCLOCK is written");
    assert!(
        c.touches().iter().filter(|t| !t.atomic).all(|t| t.file.ends_with("lmgr/src/table.rs")),
        "only the lock table reports plain data on this path"
    );
    b.release_all(true);
}

#[test]
fn a_queued_request_writes_its_wait_queue_entry() {
    let lmgr = Lmgr::new(LmgrConfig::default()).unwrap();
    let mut holder = lmgr.attach(BackendId(0)).unwrap();
    let mut waiter = lmgr.attach(BackendId(1)).unwrap();
    let tag = LockTag::advisory_int8(lmgr.database(), 7);
    holder.lock(tag, LockMode::Exclusive, LockOptions::default()).unwrap();
    let p = lmgr.partition_of(tag.hash_code());
    let c = Arc::new(Counting::with_log());
    let _g = hook::install(Simulation::new(Box::new(c.clone())));
    lockstack_common::sync::thread::scope(|s| {
        s.spawn(move || {
            waiter.lock(tag, LockMode::Exclusive, LockOptions::default()).unwrap();
            waiter.release_all(true);
        });
        // Once queued, the entry's address is fixed until the holder releases.
        let start = Instant::now();
        let at = loop {
            let q = lmgr.with_partition_shared(p, |t| {
                t.locks.get(&tag).and_then(|e| e.wait_queue.front().map(|w| w as *const _ as usize))
            });
            if let Some(a) = q {
                break a;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "the waiter never queued");
            lockstack_common::sync::yield_now();
        };
        assert!(
            c.touched(at, size_of::<crate::table::Waiter>(), Access::Write),
            "the queue entry is written"
        );
        holder.release_all(true);
    });
}

#[test]
fn partition_and_fast_path_locks_are_named() {
    let lmgr = Lmgr::new(LmgrConfig::default()).unwrap();
    for (i, p) in lmgr.partitions.iter().enumerate() {
        assert_eq!(hook::line_name(p.word_addr() as usize), Some(format!("LockManager {i}")));
    }
    let fp = lmgr.fp.info_lock(BackendId(0));
    assert_eq!(hook::line_name(fp.word_addr() as usize).as_deref(), Some("LockFastPath 0"));
}
