//! Unit tests of the lock manager's shared and backend paths.

use super::*;

use crate::config::VxidLocks;
use lockstack_common::sync::Instant;
use lockstack_lwlock::LwLockImpl;

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting until {what}");
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn queued(lock: &LwLock) -> usize {
    match lock {
        LwLock::Atomic(l) => l.queued_waiters(),
        _ => unreachable!("the test configures atomic LWLocks"),
    }
}

/// What backend 2 does against backend 1 while the check runs.
#[derive(Copy, Clone)]
enum Race {
    /// `virtual_xact_lock` on backend 1's VXID (materialises it under backend 1's
    /// fpInfoLock and then the VXID's partition lock).
    VirtualXactLock,
    /// AccessExclusiveLock on a relation backend 1 holds AccessShareLock on in fast path
    /// (the transfer takes backend 1's fpInfoLock and then the relation's partition lock).
    StrongLockTransfer,
}

/// `check_invariants` holding the partition locks must never wait for a
/// fast-path lock that another backend holds while it waits for a partition lock.
///
/// Forced interleaving: the test holds backend 0's wait-state mutex, which the check takes
/// (with every partition lock held) before it looks at backend 1's fast-path state. Once
/// the check holds every partition lock, backend 2 starts `race` against backend 1, which
/// takes backend 1's fpInfoLock and then a partition lock; then the test lets the check go
/// on. With fpInfoLock taken after the partition locks, the check and backend 2 now wait
/// for each other.
fn check_invariants_against(race: Race) {
    let cfg = LmgrConfig {
        max_backends: 3,
        vxid: VxidLocks::OnDemand,
        lwlock_kind: lockstack_lwlock::LwLockKind::Atomic,
        ..LmgrConfig::default()
    };
    let lmgr = Lmgr::new(cfg).unwrap();
    let mut holder = lmgr.attach(BackendId(1)).unwrap();
    let vxid = holder.start_transaction();
    let rel = LockTag::relation(lmgr.database(), Oid(16384));
    holder.lock(rel, LockMode::AccessShare, LockOptions::XACT).unwrap();
    assert_eq!(lmgr.fast_path_len(), 1, "the AccessShareLock is held in fast path");
    let mut waiter = lmgr.attach(BackendId(2)).unwrap();
    let fp_lock = lmgr.fp.info_lock(BackendId(1));
    let contended = match race {
        Race::VirtualXactLock => LockTag::virtual_transaction(vxid),
        Race::StrongLockTransfer => rel,
    };
    // SAFETY: the raw lock is only read (its queue length), never acquired or released.
    let partition = unsafe { lmgr.partitions[lmgr.partition_of(contended.hash_code())].raw() };

    let gate = lmgr.procs[0].wait.lock();
    let checked = Arc::new(AtomicBool::new(false));
    let checker = {
        let (lmgr, checked) = (Arc::clone(&lmgr), Arc::clone(&checked));
        std::thread::spawn(move || {
            let r = lmgr.check_invariants();
            checked.store(true, Ordering::SeqCst);
            r
        })
    };
    wait_until("the check holds every partition lock", || {
        lmgr.partitions.iter().all(|p| p.is_locked_exclusive())
    });
    let racer = std::thread::spawn(move || {
        let r = match race {
            Race::VirtualXactLock => waiter.virtual_xact_lock(vxid, true).map(|ended| assert!(ended)),
            Race::StrongLockTransfer => {
                waiter.lock(rel, LockMode::AccessExclusive, LockOptions::XACT).map(|_| ())
            }
        };
        waiter.end_transaction();
        r
    });
    // Either backend 2 holds backend 1's fpInfoLock (and will wait for the partition
    // lock), or it waits for an fpInfoLock (the check holds them all; the transfer visits
    // backends from 0 on).
    wait_until("backend 2 reached backend 1's fpInfoLock", || {
        fp_lock.is_locked_exclusive() || (0..3).any(|b| queued(lmgr.fp.info_lock(BackendId(b))) > 0)
    });
    drop(gate);
    let start = Instant::now();
    let deadlocked = loop {
        if checked.load(Ordering::SeqCst) {
            break false;
        }
        if fp_lock.is_locked_exclusive() && queued(fp_lock) > 0 && queued(partition) > 0 {
            break true;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for the check");
        std::thread::sleep(Duration::from_micros(200));
    };
    if deadlocked {
        // Dropping the holder would end its transaction, which needs the fpInfoLock that the
        // deadlocked backend 2 holds: leave it (and the stuck threads) behind.
        std::mem::forget(holder);
        panic!(
            "check_invariants waits for backend 1's fpInfoLock, held by backend 2, which \
             waits for a partition lock the check holds"
        );
    }
    checker.join().unwrap().unwrap();
    // Backend 2 now waits for backend 1 in the main table.
    wait_until("backend 2 waits for backend 1", || lmgr.waiting_for(BackendId(2)).is_some());
    lmgr.check_invariants().unwrap();
    holder.end_transaction();
    racer.join().unwrap().unwrap();
    lmgr.check_invariants().unwrap();
    assert_eq!(lmgr.main_table_len(), 0);
    assert_eq!(lmgr.fast_path_len(), 0);
    assert_eq!(lmgr.strong_lock_total(), 0);
}

#[test]
fn check_invariants_does_not_deadlock_with_virtual_xact_lock() {
    check_invariants_against(Race::VirtualXactLock);
}

#[test]
fn check_invariants_does_not_deadlock_with_strong_lock_transfer() {
    check_invariants_against(Race::StrongLockTransfer);
}
