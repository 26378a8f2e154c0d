//! Heavyweight tuple locks in row updates (`heap_acquire_tuplock` before `XactLockTableWait`,
//! `src/backend/access/heap/heapam.c`): waiters for one row queue on the row version's tuple
//! lock, and only the first of them sleeps on the holder's transaction lock.
//!
//! Blocking is decided from the lock manager's wait state ([`Lmgr::waiting_for`] and
//! [`Lmgr::lock_status`], the `pg_locks` view), polled with a generous bound; nothing here
//! depends on how fast the machine is.

mod common;

use std::sync::Arc;

use common::{Step, poll, session_threads};
use lockstack_common::BackendId;
use lockstack_engine::engine::{Engine, EngineConfig, EngineError};
use lockstack_engine::session::LockClauseStrength;
use lockstack_engine::tables::TableId;
use lockstack_lmgr::{Lmgr, LockError, LockMode, LockTag, LockTagKind};

/// What each of `backends` waits for now (None: not waiting on a heavyweight lock).
fn waits(lmgr: &Lmgr, backends: &[BackendId]) -> Vec<Option<(LockTag, LockMode)>> {
    backends.iter().map(|b| lmgr.waiting_for(*b)).collect()
}

/// The granted main-table locks of kind `kind` held by `b`.
fn held(lmgr: &Lmgr, b: BackendId, kind: LockTagKind) -> Vec<(LockTag, LockMode)> {
    lmgr.lock_status()
        .into_iter()
        .filter(|r| r.granted && r.backend == b && r.tag.kind == kind)
        .map(|r| (r.tag, r.mode))
        .collect()
}

/// Session A updates the branch row and stays open; three more sessions update the same row
/// and block. Exactly one of them sleeps on A's transaction lock while holding the row
/// version's tuple lock (ExclusiveLock: a non-key UPDATE is `LockTupleNoKeyExclusive`); the
/// other two queue on that tuple lock. After A commits, all three go through one at a time and
/// no update is lost; no tuple lock is left anywhere.
///
/// Without tuple locks all three slept on A's transaction lock (and were all woken by its
/// commit to race for the new version).
#[test]
fn waiters_for_one_row_queue_on_its_tuple_lock_behind_one_xid_waiter() {
    let e = Engine::new(EngineConfig::new(5, 4096), 1, 100).unwrap();
    let mut a = e.session(BackendId(0)).unwrap();
    a.begin();
    assert!(a.update_add(TableId::Branches, 1, 1, 1).unwrap());
    let a_xid = held(&e.lmgr, BackendId(0), LockTagKind::Transaction);
    assert_eq!(a_xid.len(), 1, "A holds its own xid lock: {a_xid:?}");
    let a_xid = a_xid[0].0;
    let waiters = [BackendId(1), BackendId(2), BackendId(3)];
    // What the lock manager shows while all three wait; checked after A has committed, so that
    // a failed check cannot leave the updaters blocked forever.
    let (w, locks) = std::thread::scope(|s| {
        for b in waiters {
            let e = Arc::clone(&e);
            s.spawn(move || {
                let mut se = e.session(b).unwrap();
                assert!(se.update_add(TableId::Branches, 1, 1, 10).unwrap(), "the row was updated");
            });
        }
        poll("all three updaters wait on a heavyweight lock", || {
            waits(&e.lmgr, &waiters).iter().all(Option::is_some)
        });
        let w: Vec<(LockTag, LockMode)> = waits(&e.lmgr, &waiters).into_iter().map(Option::unwrap).collect();
        let locks = e.lmgr.lock_status();
        a.commit().unwrap();
        // The three updaters finish when the scope ends (it joins them).
        (w, locks)
    });
    let on_xid: Vec<usize> = (0..3).filter(|&i| w[i].0.kind == LockTagKind::Transaction).collect();
    let on_tuple: Vec<usize> = (0..3).filter(|&i| w[i].0.kind == LockTagKind::Tuple).collect();
    assert_eq!(on_xid.len(), 1, "exactly one waiter sleeps on a transaction lock: {w:?}");
    assert_eq!(on_tuple.len(), 2, "the other two queue on the tuple lock: {w:?}");
    assert_eq!(w[on_xid[0]], (a_xid, LockMode::Share), "it waits for A's xid (XactLockTableWait)");
    // The xid waiter holds the tuple lock the others wait for, in ExclusiveLock, in the main
    // table (tuple locks are never fast-path eligible).
    let tuple_locks: Vec<_> =
        locks.iter().filter(|r| r.granted && r.tag.kind == LockTagKind::Tuple).collect();
    assert_eq!(tuple_locks.len(), 1, "{tuple_locks:?}");
    let t = tuple_locks[0];
    assert_eq!(t.backend, waiters[on_xid[0]], "held by the xid waiter");
    assert_eq!(t.mode, LockMode::Exclusive, "LockTupleNoKeyExclusive maps to ExclusiveLock");
    assert!(!t.fast_path);
    assert_eq!(t.tag.field2, TableId::Branches.heap_oid().0);
    for &i in &on_tuple {
        assert_eq!(w[i], (t.tag, LockMode::Exclusive), "queued on the same row version");
    }
    let mut r = e.session(BackendId(4)).unwrap();
    let row = r.select(TableId::Branches, 1, LockClauseStrength::None).unwrap().unwrap();
    assert_eq!(row, vec![1, 1 + 3 * 10], "all four updates applied, none lost");
    let b = r.table_sums(TableId::Branches).unwrap();
    assert_eq!((b.rows, b.balance, b.duplicate_keys.len()), (1, 31, 0));
    assert!(
        e.lmgr.lock_status().iter().all(|r| r.tag.kind != LockTagKind::Tuple),
        "no tuple lock left behind"
    );
    assert_eq!(e.lmgr.main_table_len(), 0, "nothing left in the main lock table");
    e.lmgr.check_invariants().unwrap();
}

/// A row lock taken by `SELECT ... FOR UPDATE` makes a FOR UPDATE waiter queue on the tuple
/// lock in AccessExclusiveLock (`LockTupleExclusive`), and `FOR SHARE` waiters take RowShareLock
/// (`LockTupleShare`), which does not conflict with itself: two share waiters both hold the
/// tuple lock and both sleep on the xid.
#[test]
fn row_lock_strengths_map_to_the_tuple_lock_modes_of_tuple_lock_extra_info() {
    let e = Engine::new(EngineConfig::new(4, 4096), 1, 100).unwrap();
    let mut a = e.session(BackendId(0)).unwrap();
    a.begin();
    assert!(a.update_add(TableId::Tellers, 3, 2, 1).unwrap());
    let cases: [(LockClauseStrength, &[u32], LockMode); 2] = [
        (LockClauseStrength::ForUpdate, &[1], LockMode::AccessExclusive),
        (LockClauseStrength::ForShare, &[1, 2], LockMode::RowShare),
    ];
    for (clause, ids, mode) in cases {
        let bs: Vec<BackendId> = ids.iter().map(|&i| BackendId(i)).collect();
        let seen = std::thread::scope(|s| {
            for &b in &bs {
                let e = Arc::clone(&e);
                s.spawn(move || {
                    let mut se = e.session(b).unwrap();
                    se.begin();
                    assert!(se.select(TableId::Tellers, 3, clause).unwrap().is_some());
                    se.commit().unwrap();
                });
            }
            poll("the row lockers wait", || waits(&e.lmgr, &bs).iter().all(Option::is_some));
            let seen: Vec<_> = bs
                .iter()
                .map(|b| (e.lmgr.waiting_for(*b).unwrap().0.kind, held(&e.lmgr, *b, LockTagKind::Tuple)))
                .collect();
            // Checked after the commit, so that a failed check leaves nobody blocked.
            a.commit().unwrap();
            seen
        });
        for (kind, t) in seen {
            assert_eq!(kind, LockTagKind::Transaction, "{clause:?}");
            assert_eq!(t.len(), 1, "{clause:?}: {t:?}");
            assert_eq!(t[0].1, mode, "{clause:?}");
        }
        assert!(e.lmgr.lock_status().iter().all(|r| r.tag.kind != LockTagKind::Tuple));
        a.begin();
        assert!(a.update_add(TableId::Tellers, 3, 2, 1).unwrap());
    }
    a.rollback().unwrap();
    e.lmgr.check_invariants().unwrap();
}

/// A deadlock whose cycle runs through a tuple lock is detected and reported:
/// S1 updates teller 1, S2 teller 2; S3 updates teller 1 (holds its tuple lock, sleeps on S1's
/// xid); S2 updates teller 1 (queues on the tuple lock held by S3); S1 updates teller 2 (takes
/// that version's tuple lock and sleeps on S2's xid). S1 -> S2 -> S3 -> S1. S1 runs the detector
/// first (short deadlock_timeout), gets "deadlock detected", and its failed statement leaves
/// no tuple lock behind. After S1 rolls back, S3 and then S2 update teller 1.
#[test]
fn a_deadlock_through_a_tuple_lock_is_detected_and_leaves_nothing_held() {
    let e = Engine::new(EngineConfig::new(4, 4096), 1, 100).unwrap();
    std::thread::scope(|s| {
        // Per session: a channel of steps to run; each step's result comes back on `done_rx`.
        // Only S1 runs the detector within the test; the others would only after an hour.
        let (steps, done_rx) = session_threads(s, &e, 1..=3, 1);
        let run = |i: u32, f: Step| steps[i as usize - 1].send(f).unwrap();
        let upd = |key: i64| -> Step {
            Box::new(move |se| {
                assert!(se.update_add(TableId::Tellers, key, 2, 1)?);
                Ok(())
            })
        };
        let begin_upd = |key: i64| -> Step {
            Box::new(move |se| {
                se.begin();
                assert!(se.update_add(TableId::Tellers, key, 2, 1)?);
                Ok(())
            })
        };
        run(1, begin_upd(1));
        assert!(matches!(done_rx.recv().unwrap(), (1, Ok(()))));
        run(2, begin_upd(2));
        assert!(matches!(done_rx.recv().unwrap(), (2, Ok(()))));
        run(3, begin_upd(1));
        poll("S3 sleeps on S1's xid", || {
            e.lmgr.waiting_for(BackendId(3)).is_some_and(|w| w.0.kind == LockTagKind::Transaction)
        });
        run(2, upd(1));
        poll("S2 waits", || e.lmgr.waiting_for(BackendId(2)).is_some());
        let (tag, mode) = e.lmgr.waiting_for(BackendId(2)).unwrap();
        assert_eq!(
            (tag.kind, mode),
            (LockTagKind::Tuple, LockMode::Exclusive),
            "S2 queues on the tuple lock"
        );
        assert_eq!(held(&e.lmgr, BackendId(3), LockTagKind::Tuple), vec![(tag, LockMode::Exclusive)]);
        let deadlocks_before = e.lmgr.stats().deadlocks;
        run(1, upd(2));
        let (who, r) = done_rx.recv().unwrap();
        assert_eq!(who, 1, "S1, the only one to run the detector, is the victim");
        match r {
            Err(EngineError::Lock(LockError::Deadlock { detail })) => {
                assert!(detail.contains("tuple"), "the cycle goes through the tuple lock: {detail}");
            }
            other => panic!("expected a deadlock error, got {other:?}"),
        }
        assert_eq!(e.lmgr.stats().deadlocks, deadlocks_before + 1);
        assert!(
            held(&e.lmgr, BackendId(1), LockTagKind::Tuple).is_empty(),
            "the failed update released its tuple lock"
        );
        assert!(e.lmgr.waiting_for(BackendId(1)).is_none());
        e.lmgr.check_invariants().unwrap();
        // S2 and S3 are still blocked; S1's rollback lets S3 through, then S2.
        assert!(e.lmgr.waiting_for(BackendId(2)).is_some() && e.lmgr.waiting_for(BackendId(3)).is_some());
        run(1, Box::new(|se| se.rollback()));
        assert!(matches!(done_rx.recv().unwrap(), (1, Ok(()))));
        assert!(matches!(done_rx.recv().unwrap(), (3, Ok(()))), "S3 updated teller 1 after S1's rollback");
        run(3, Box::new(|se| se.commit()));
        let mut got = vec![done_rx.recv().unwrap(), done_rx.recv().unwrap()];
        got.sort_by_key(|(i, _)| *i);
        assert!(matches!(got.as_slice(), [(2, Ok(())), (3, Ok(()))]), "{got:?}");
        run(2, Box::new(|se| se.commit()));
        assert!(matches!(done_rx.recv().unwrap(), (2, Ok(()))));
        drop(steps);
    });
    let mut r = e.session(BackendId(0)).unwrap();
    let t1 = r.select(TableId::Tellers, 1, LockClauseStrength::None).unwrap().unwrap();
    let t2 = r.select(TableId::Tellers, 2, LockClauseStrength::None).unwrap().unwrap();
    assert_eq!((t1[2], t2[2]), (2, 1), "teller 1: S3 and S2; teller 2: S2; S1's updates rolled back");
    assert_eq!(e.lmgr.main_table_len(), 0);
    e.lmgr.check_invariants().unwrap();
}

/// `FOR KEY SHARE` and `FOR NO KEY UPDATE` on pgbench's tables (the clauses of a pgbench
/// script's `SELECT`): two transactions' `FOR KEY SHARE` of one account share it (the second
/// neither waits nor takes a tuple lock, even under NOWAIT, and a MultiXact of both holds the
/// row, so that a `FOR UPDATE NOWAIT` then fails), while a second `FOR NO KEY UPDATE` waits:
/// it takes the version's tuple lock in ExclusiveLock and sleeps on the first one's xid until
/// that commits.
#[test]
fn key_share_lockers_share_a_row_and_no_key_update_lockers_queue() {
    use lockstack_engine::session::WaitPolicy;
    let e = Engine::new(EngineConfig::new(3, 4096), 1, 100).unwrap();
    let mut a = e.session(BackendId(0)).unwrap();
    let mut b = e.session(BackendId(1)).unwrap();
    let mut c = e.session(BackendId(2)).unwrap();
    a.begin();
    b.begin();
    assert!(a.select(TableId::Accounts, 9, LockClauseStrength::ForKeyShare).unwrap().is_some());
    let waits0 = e.lmgr.stats().waits;
    assert_eq!(e.multixact.created(), 0, "a single locker needs no multi");
    let row = b.select_with(TableId::Accounts, 9, LockClauseStrength::ForKeyShare, WaitPolicy::Error);
    assert!(row.unwrap().is_some(), "B's FOR KEY SHARE beside A's took the row without waiting");
    assert_eq!(e.multixact.created(), 1, "one MultiXact of A and B holds the row");
    assert!(e.lmgr.lock_status().iter().all(|r| r.tag.kind != LockTagKind::Tuple), "no tuple lock");
    // FOR NO KEY UPDATE is compatible with FOR KEY SHARE, FOR UPDATE is not.
    assert!(
        c.select_with(TableId::Accounts, 9, LockClauseStrength::ForNoKeyUpdate, WaitPolicy::Error)
            .unwrap()
            .is_some()
    );
    c.rollback().unwrap();
    let r = c.select_with(TableId::Accounts, 9, LockClauseStrength::ForUpdate, WaitPolicy::Error);
    assert!(matches!(&r, Err(EngineError::Sql(m)) if m.contains("could not obtain lock on row")), "{r:?}");
    c.rollback().unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
    assert_eq!(e.lmgr.stats().waits, waits0, "nobody waited on a heavyweight lock");
    // B runs on its own thread below.
    drop(b);

    a.begin();
    assert!(a.select(TableId::Accounts, 9, LockClauseStrength::ForNoKeyUpdate).unwrap().is_some());
    let a_xid = held(&e.lmgr, BackendId(0), LockTagKind::Transaction)[0].0;
    let (w, tuple) = std::thread::scope(|s| {
        let e2 = Arc::clone(&e);
        s.spawn(move || {
            let mut b = e2.session(BackendId(1)).unwrap();
            b.begin();
            assert!(b.select(TableId::Accounts, 9, LockClauseStrength::ForNoKeyUpdate).unwrap().is_some());
            b.commit().unwrap();
        });
        poll("B's FOR NO KEY UPDATE waits", || e.lmgr.waiting_for(BackendId(1)).is_some());
        let w = e.lmgr.waiting_for(BackendId(1));
        let tuple = held(&e.lmgr, BackendId(1), LockTagKind::Tuple);
        a.commit().unwrap();
        (w, tuple)
    });
    assert_eq!(w, Some((a_xid, LockMode::Share)), "B sleeps on A's xid (XactLockTableWait)");
    assert_eq!(tuple.len(), 1, "{tuple:?}");
    assert_eq!(tuple[0].1, LockMode::Exclusive, "LockTupleNoKeyExclusive's tuple lock mode");
    assert_eq!(e.lmgr.stats().waits, waits0 + 1, "exactly B's one wait");
    e.lmgr.check_invariants().unwrap();
}
