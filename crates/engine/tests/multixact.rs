//! MultiXacts (`src/backend/access/transam/multixact.c`, `heap_lock_tuple` and `heap_update`
//! in `src/backend/access/heap/heapam.c`, 9.3+): `SELECT ... FOR SHARE` lockers of one row share
//! it through a multi in its xmax, writers wait for every running member, and share lockers
//! that all upgrade deadlock.
//!
//! Blocking is read from the lock manager's wait state ([`Lmgr::waiting_for`]), polled with a
//! generous bound; a `lock_timeout` on every session bounds any wait the code gets wrong, so a
//! wrong engine fails these tests instead of hanging them. Nothing depends on the machine's
//! speed.

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use common::{Step, poll, session_threads};
use lockstack_common::BackendId;
use lockstack_engine::engine::{Engine, EngineConfig, EngineError};
use lockstack_engine::session::{LockClauseStrength, Session};
use lockstack_engine::tables::TableId;
use lockstack_lmgr::{Lmgr, LockError, LockMode, LockTag, LockTagKind};

/// An engine of `backends` sessions whose lock waits end in a lock_timeout error after a
/// minute: a wait the engine should not make fails the test instead of hanging it.
fn engine(backends: usize) -> Arc<Engine> {
    let mut cfg = EngineConfig::new(backends, 4096);
    cfg.lmgr.lock_timeout = Some(Duration::from_secs(60));
    Engine::new(cfg, 1, 100).unwrap()
}

/// `b`'s own transaction lock (it must hold exactly one).
fn xid_lock(lmgr: &Lmgr, b: BackendId) -> LockTag {
    let held: Vec<LockTag> = lmgr
        .lock_status()
        .into_iter()
        .filter(|r| r.granted && r.backend == b && r.tag.kind == LockTagKind::Transaction)
        .map(|r| r.tag)
        .collect();
    assert_eq!(held.len(), 1, "{b} holds its xid lock: {held:?}");
    held[0]
}

fn share(s: &mut Session, key: i64) -> Result<Option<Vec<i64>>, EngineError> {
    Ok(s.select(TableId::Tellers, key, LockClauseStrength::ForShare)?.map(|r| r.to_vec()))
}

fn read(s: &mut Session, key: i64) -> Vec<i64> {
    s.select(TableId::Tellers, key, LockClauseStrength::None)
        .unwrap()
        .expect("the row stays visible")
        .to_vec()
}

/// A and B share-lock teller 3 and both get it at once (no heavyweight wait, one multi); the
/// row stays visible to readers. C's UPDATE of the row then waits for A (holding the row
/// version's tuple lock), and once A commits, for B (MultiXactIdWait waits for each member);
/// after B commits it updates the row.
#[test]
fn share_lockers_share_a_row_and_an_updater_waits_for_every_member() {
    let e = engine(4);
    let (ba, bb, bc) = (BackendId(0), BackendId(1), BackendId(2));
    let mut a = e.session(ba).unwrap();
    let mut b = e.session(bb).unwrap();
    let mut r = e.session(BackendId(3)).unwrap();
    let before = read(&mut r, 3);
    let waits0 = e.lmgr.stats().waits;
    a.begin();
    b.begin();
    assert_eq!(share(&mut a, 3).unwrap(), Some(before.clone()));
    assert_eq!(e.multixact.created(), 0, "a single locker needs no multi");
    // With one locker per row, B would sleep on A's xid here (and fail by lock_timeout).
    assert_eq!(share(&mut b, 3).unwrap(), Some(before.clone()), "B shares the row with A");
    assert_eq!(e.lmgr.stats().waits, waits0, "neither share locker waited");
    assert_eq!(e.multixact.created(), 1, "A and B hold the row through one multi");
    // Locking it again changes nothing.
    assert_eq!(share(&mut a, 3).unwrap(), Some(before.clone()));
    assert_eq!(share(&mut b, 3).unwrap(), Some(before.clone()));
    assert_eq!(e.multixact.created(), 1, "members already holding the row add no multi");
    assert_eq!(read(&mut r, 3), before, "a lock-only multi hides nothing");
    let (xa, xb) = (xid_lock(&e.lmgr, ba), xid_lock(&e.lmgr, bb));

    let (w1, w2) = std::thread::scope(|s| {
        let ec = Arc::clone(&e);
        let updater = s.spawn(move || {
            let mut c = ec.session(bc).unwrap();
            c.update_add(TableId::Tellers, 3, 2, 5)
        });
        poll("C waits", || e.lmgr.waiting_for(bc).is_some());
        let w1 = e.lmgr.waiting_for(bc);
        let seen_before = read(&mut r, 3);
        a.commit().unwrap();
        poll("C waits for B", || e.lmgr.waiting_for(bc).is_some_and(|w| w.0 == xb));
        let w2 = (e.lmgr.waiting_for(bc), updater.is_finished(), read(&mut r, 3), seen_before);
        b.commit().unwrap();
        assert!(updater.join().unwrap().unwrap(), "C updated the row");
        (w1, w2)
    });
    assert_eq!(w1, Some((xa, LockMode::Share)), "C first sleeps on A's xid (the first member)");
    let (w2, finished, seen_after_a, seen_before_a) = w2;
    assert_eq!(w2, Some((xb, LockMode::Share)), "after A ends, C sleeps on B's xid");
    assert!(!finished, "C did not update while B still held the row");
    assert_eq!((seen_before_a, seen_after_a), (before.clone(), before.clone()), "row visible throughout");
    let after = read(&mut r, 3);
    assert_eq!(after[2], before[2] + 5);
    let sums = r.table_sums(TableId::Tellers).unwrap();
    assert!(sums.duplicate_keys.is_empty());
    assert_eq!(e.lmgr.main_table_len(), 0, "nothing left in the main lock table");
    e.lmgr.check_invariants().unwrap();
}

/// A and B share-lock teller 5, then both update it. A's UPDATE takes the tuple lock and sleeps
/// on B's xid; B's UPDATE queues on that tuple lock: a cycle, which B's deadlock detector (short
/// deadlock_timeout) reports as "deadlock detected", as in PostgreSQL. After B rolls back, A's
/// update goes through, exactly once.
#[test]
fn share_lockers_that_both_update_deadlock_and_one_is_told() {
    let e = engine(3);
    let mut r = e.session(BackendId(2)).unwrap();
    let before = read(&mut r, 5);
    std::thread::scope(|s| {
        // Only B runs the detector within the test.
        let (steps, done_rx) = session_threads(s, &e, 0..2, 1);
        let run = |i: u32, f: Step| steps[i as usize].send(f).unwrap();
        for i in 0..2 {
            run(
                i,
                Box::new(|se| {
                    se.begin();
                    assert!(share(se, 5)?.is_some());
                    Ok(())
                }),
            );
            let (who, res) = done_rx.recv().unwrap();
            assert_eq!(who, i);
            res.unwrap();
        }
        assert_eq!(e.multixact.created(), 1);
        let upd: fn() -> Step = || {
            Box::new(|se| {
                assert!(se.update_add(TableId::Tellers, 5, 2, 7)?);
                Ok(())
            })
        };
        run(0, upd());
        poll("A waits for B", || e.lmgr.waiting_for(BackendId(0)).is_some());
        let a_wait = e.lmgr.waiting_for(BackendId(0)).unwrap();
        run(1, upd());
        let (who, res) = done_rx.recv().unwrap();
        assert_eq!(who, 1, "B's statement ends first (A is still waiting)");
        assert!(matches!(res, Err(EngineError::Lock(LockError::Deadlock { .. }))), "{res:?}");
        assert_eq!(a_wait.0.kind, LockTagKind::Transaction, "A slept on B's xid: {a_wait:?}");
        assert_eq!(read(&mut r, 5), before, "still visible, unchanged");
        run(1, Box::new(|se| se.rollback()));
        let (who, res) = done_rx.recv().unwrap();
        // A's update and B's rollback finish in either order.
        let mut results = vec![(who, res), done_rx.recv().unwrap()];
        results.sort_by_key(|x| x.0);
        for (_, res) in results {
            res.unwrap();
        }
        run(0, Box::new(|se| se.commit()));
        let (who, res) = done_rx.recv().unwrap();
        assert_eq!(who, 0);
        res.unwrap();
        drop(steps);
    });
    assert_eq!(e.lmgr.stats().deadlocks, 1);
    let after = read(&mut r, 5);
    assert_eq!(after[2], before[2] + 7, "A's update applied once, B's not at all");
    assert_eq!(e.lmgr.main_table_len(), 0, "nothing left in the main lock table");
    e.lmgr.check_invariants().unwrap();
}

/// Three sessions share-lock one row over and over, in rotating order, and commit in rotating
/// order: two multis a round (the second and third locker each make one), and the store keeps
/// only the multis some running transaction may belong to, however long it runs.
#[test]
fn a_long_run_of_share_lockers_keeps_the_multixact_store_bounded() {
    const ROUNDS: u64 = 400;
    let e = engine(4);
    let mut ss: Vec<Session> = (0..3).map(|i| e.session(BackendId(i)).unwrap()).collect();
    let mut r = e.session(BackendId(3)).unwrap();
    let before = read(&mut r, 7);
    let waits0 = e.lmgr.stats().waits;
    let mut most = 0;
    for round in 0..ROUNDS as usize {
        for k in 0..3 {
            let s = &mut ss[(round + k) % 3];
            s.begin();
            assert_eq!(share(s, 7).unwrap(), Some(before.clone()));
        }
        most = most.max(e.multixact.retained());
        for k in 0..3 {
            ss[(round + 2 * k + 1) % 3].commit().unwrap();
        }
        assert_eq!(read(&mut r, 7), before);
    }
    assert_eq!(e.multixact.created(), 2 * ROUNDS, "two multis a round");
    assert_eq!(e.lmgr.stats().waits, waits0, "no share locker ever waited");
    assert!(most <= 2, "at most the current round's multis are kept, kept {most}");
    // Once everyone has ended, the next multi drops all earlier ones.
    for s in ss.iter_mut().take(2) {
        s.begin();
        share(s, 7).unwrap();
    }
    assert_eq!(e.multixact.retained(), 1);
    for s in ss.iter_mut().take(2) {
        s.commit().unwrap();
    }
    // And an updater is not held up by the ended lockers' multi.
    let waits1 = e.lmgr.stats().waits;
    assert!(r.update_add(TableId::Tellers, 7, 2, 1).unwrap());
    assert_eq!(e.lmgr.stats().waits, waits1);
    e.lmgr.check_invariants().unwrap();
}

/// A share locker that upgrades to FOR UPDATE while the other member runs waits for it (on the
/// other member's xid, without the tuple lock: `heap_lock_tuple`'s `skip_tuple_lock` for a
/// transaction that already holds the row, since a waiter queued on the tuple lock may be
/// waiting for it), and gets the row once that member ends.
#[test]
fn for_update_by_a_share_locker_waits_for_the_other_member() {
    let e = engine(3);
    let (ba, bb) = (BackendId(0), BackendId(1));
    let mut r = e.session(BackendId(2)).unwrap();
    let before = read(&mut r, 9);
    std::thread::scope(|s| {
        // Made inside the scope, so that a failed assertion drops the senders and the
        // threads waiting on them end (the scope joins them) instead of hanging the test.
        let (a_go, a_rx) = mpsc::channel::<()>();
        let (b_go, b_rx) = mpsc::channel::<()>();
        let (locked_tx, locked_rx) = mpsc::channel::<()>();
        let (ea, eb) = (Arc::clone(&e), Arc::clone(&e));
        let la = locked_tx.clone();
        let a = s.spawn(move || {
            let mut a = ea.session(ba).unwrap();
            a.begin();
            assert!(share(&mut a, 9).unwrap().is_some());
            la.send(()).unwrap();
            a_rx.recv().unwrap();
            let row =
                a.select(TableId::Tellers, 9, LockClauseStrength::ForUpdate).unwrap().map(|r| r.to_vec());
            a.commit().unwrap();
            row
        });
        locked_rx.recv().unwrap();
        let b = s.spawn(move || {
            let mut b = eb.session(bb).unwrap();
            b.begin();
            assert!(share(&mut b, 9).unwrap().is_some());
            locked_tx.send(()).unwrap();
            b_rx.recv().unwrap();
            b.commit().unwrap();
        });
        locked_rx.recv().unwrap();
        assert_eq!(e.multixact.created(), 1, "A and B share the row");
        let xb = xid_lock(&e.lmgr, bb);
        a_go.send(()).unwrap();
        poll("A's FOR UPDATE waits", || e.lmgr.waiting_for(ba).is_some());
        let w = e.lmgr.waiting_for(ba);
        let tuple_locks: Vec<_> = e
            .lmgr
            .lock_status()
            .into_iter()
            .filter(|r| r.granted && r.tag.kind == LockTagKind::Tuple)
            .map(|r| (r.backend, r.mode))
            .collect();
        let finished = a.is_finished();
        b_go.send(()).unwrap();
        b.join().unwrap();
        let row = a.join().unwrap();
        assert_eq!(w, Some((xb, LockMode::Share)), "A sleeps on B's xid");
        assert_eq!(tuple_locks, vec![], "an upgrade takes no tuple lock");
        assert!(!finished);
        assert_eq!(row, Some(before.clone()));
    });
    assert_eq!(read(&mut r, 9), before);
    assert_eq!(e.lmgr.main_table_len(), 0);
    e.lmgr.check_invariants().unwrap();
}
