//! loom model of WAL insertion progress against waiting for insertions to finish
//! (`WALInsertLockUpdateInsertingAt` vs `WaitXLogInsertionsToFinish`, 9.4+). Run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p lockstack-xlog
//! --release --test loom_insert`.
//!
//! Inserters copy "records" (one 8-byte word per unit) into a shared array under their
//! insertion locks, one of them advertising its progress half-way; a writer asks how far
//! insertions are finished. Every unit before the answer must be copied, and the answer must
//! cover what was reserved when it asked. A lost wake-up shows up as loom's deadlock report.
//! Two threads per model (three made the state space too large for CI).
#![cfg(loom)]

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;

use lockstack_lwlock::LwLockKind;
use lockstack_xlog::ptr::{bytepos_to_end_recptr, bytepos_to_recptr, recptr_to_bytepos};
use lockstack_xlog::{InsertMode, InsertionLocks};

const UNITS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.max_branches = 50_000;
    b.check(f);
}

/// Takes lock `lock`, reserves `units` words, copies them, advertising after the first one if
/// `advertise`, and releases.
fn insert(locks: &InsertionLocks, data: &[AtomicU64], lock: usize, units: u64, advertise: bool) {
    let mut hold = locks.acquire(lock);
    let r = locks.reserve(&hold, units * 8);
    for u in 0..units {
        data[(r.start / 8 + u) as usize].store(1, Ordering::Relaxed);
        if advertise && u == 0 {
            locks.advertise(&mut hold, bytepos_to_recptr(r.start + 8));
        }
    }
    locks.release(hold);
}

/// Checks what a writer sees: every unit before the finished position is copied.
fn check_writer(locks: &InsertionLocks, data: &[AtomicU64]) {
    let reserved = bytepos_to_end_recptr(locks.reserved_bytepos());
    let finished = locks.wait_for_insertions(reserved);
    assert!(finished >= reserved, "finished {finished} short of the reserved end {reserved}");
    let upto = recptr_to_bytepos(finished) / 8;
    for (u, d) in data.iter().enumerate().take(upto as usize) {
        assert_eq!(d.load(Ordering::Relaxed), 1, "unit {u} before {finished} not copied");
    }
}

fn setup() -> (Arc<InsertionLocks>, Arc<Vec<AtomicU64>>) {
    let locks = Arc::new(InsertionLocks::new(InsertMode::InsertionLocks(2), LwLockKind::Atomic).unwrap());
    let data: Arc<Vec<AtomicU64>> = Arc::new((0..UNITS).map(|_| AtomicU64::new(0)).collect());
    (locks, data)
}

/// One inserter that advertises half-way against a writer: the writer may stop at the
/// advertised position or wait for the release, never read past unfinished data, and never
/// sleep forever.
#[test]
fn writer_against_an_advertising_inserter() {
    model(|| {
        let (locks, data) = setup();
        let (l1, d1) = (locks.clone(), data.clone());
        let t1 = thread::spawn(move || insert(&l1, &d1, 0, 2, true));
        check_writer(&locks, &data);
        t1.join().unwrap();
        let all = bytepos_to_end_recptr(locks.reserved_bytepos());
        assert_eq!(locks.wait_for_insertions(all), all);
        assert_eq!(locks.inserting_at(0), 0);
    });
}

/// Two inserters on different locks; the second then acts as the writer: it must wait for
/// the first if the first reserved earlier and has not finished.
#[test]
fn inserter_on_another_lock_then_writer() {
    model(|| {
        let (locks, data) = setup();
        let (l1, d1) = (locks.clone(), data.clone());
        let t1 = thread::spawn(move || insert(&l1, &d1, 0, 1, false));
        insert(&locks, &data, 1, 1, false);
        check_writer(&locks, &data);
        t1.join().unwrap();
        check_writer(&locks, &data);
        assert_eq!(bytepos_to_end_recptr(locks.reserved_bytepos()), bytepos_to_end_recptr(16));
    });
}
