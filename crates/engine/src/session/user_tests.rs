//! Unit tests of user-table statements and their row locks (`user.rs`, `rowlock.rs`).

use super::*;
use crate::engine::EngineConfig;
use crate::usertable::{ColumnDef, ColumnType};
use RowLockStrength::*;

/// PostgreSQL's documented row-level conflict table (explicit-locking.html), row by row:
/// which requested strengths each held strength blocks.
#[test]
fn the_conflict_table_is_postgres_s() {
    let all = [KeyShare, Share, NoKeyUpdate, Update];
    let blocks = |held| match held {
        KeyShare => vec![Update],
        Share => vec![NoKeyUpdate, Update],
        NoKeyUpdate => vec![Share, NoKeyUpdate, Update],
        Update => all.to_vec(),
    };
    for held in all {
        for want in all {
            assert_eq!(held.conflicts_with(want), blocks(held).contains(&want), "{held:?} vs {want:?}");
            assert_eq!(held.conflicts_with(want), want.conflicts_with(held), "symmetric");
        }
        // The infomask bits decode back to the strength.
        let (bits, keys) = held.bits();
        let im2 = if keys { visibility::HEAP_KEYS_UPDATED } else { 0 };
        assert_eq!(RowLockStrength::of_xmax(bits | visibility::XMAX_LOCK_ONLY, im2), held);
        assert_eq!(RowLockStrength::of_status(held.status()), held);
    }
}

fn table(e: &Arc<Engine>) -> Session {
    let mut s = e.session(BackendId(0)).unwrap();
    let col = |name: &str, ty, not_null| ColumnDef {
        name: name.into(),
        ty,
        default: None,
        serial: false,
        not_null,
    };
    s.create_table(TableDef {
        name: "slot".into(),
        columns: vec![col("k", ColumnType::Int4, true), col("v", ColumnType::Text, false)],
        primary_key: Some(0),
    })
    .unwrap();
    let rows = (1..=3).map(|k| vec![Some(Value::Int(k)), Some(Value::Text(format!("v{k}")))]).collect();
    assert_eq!(s.insert_rows("slot", rows).unwrap(), 3);
    s
}

fn query(lock: Option<(RowLockStrength, WaitPolicy)>, limit: Option<u64>) -> RowQuery {
    RowQuery { table: "slot".into(), order_by: Some((0, false)), limit, lock }
}

fn all(_: &mut Session, _: &[Value]) -> Result<bool, EngineError> {
    Ok(true)
}

#[test]
fn nowait_fails_skip_locked_skips_and_compatible_lockers_share() {
    let e = Engine::without_tables(EngineConfig::new(3, 256)).unwrap();
    let mut a = table(&e);
    let mut b = e.session(BackendId(1)).unwrap();
    let mut c = e.session(BackendId(2)).unwrap();
    a.begin();
    let got = a.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
    assert_eq!(got, vec![vec![Value::Int(1), Value::Text("v1".into())]]);
    b.begin();
    let err = b.select_rows(&query(Some((Share, WaitPolicy::Error)), None), &mut all).unwrap_err();
    assert_eq!(err.to_string(), "could not obtain lock on row in relation \"slot\"");
    b.rollback().unwrap();
    b.begin();
    let got = b.select_rows(&query(Some((Update, WaitPolicy::Skip)), Some(1)), &mut all).unwrap();
    assert_eq!(got[0][0], Value::Int(2), "row 1 skipped");
    // KEY SHARE does not conflict with FOR NO KEY UPDATE: a MultiXact of a and c.
    c.begin();
    let before = e.multixact.created();
    let got = c.select_rows(&query(Some((KeyShare, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
    assert_eq!(got[0][0], Value::Int(1));
    assert_eq!(e.multixact.created(), before + 1);
    // ... and the multi still makes a conflicting NOWAIT request fail, on either member.
    b.rollback().unwrap();
    b.begin();
    let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
    assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
    b.rollback().unwrap();
    a.commit().unwrap();
    b.begin();
    let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
    assert!(err.to_string().starts_with("could not obtain lock on row"), "c still holds it: {err}");
    b.rollback().unwrap();
    c.commit().unwrap();
    b.begin();
    assert_eq!(b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap().len(), 1);
    b.commit().unwrap();
}

#[test]
fn keys_stay_unique_and_updates_follow_the_chain() {
    let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
    let mut a = table(&e);
    let dup = a.insert_rows("slot", vec![vec![Some(Value::Int(2)), None]]).unwrap_err();
    assert_eq!(dup.to_string(), "duplicate key value violates unique constraint \"slot_pkey\"");
    let set_v = |_: &[Value]| -> Result<Vec<Option<Value>>, EngineError> {
        Ok(vec![Some(Value::Int(2)), Some(Value::Text("new".into()))])
    };
    let mut only2 = |_: &mut Session, r: &[Value]| Ok(r[0] == Value::Int(2));
    assert_eq!(a.modify_rows("slot", &mut only2, RowChange::Update(&set_v)).unwrap(), 1);
    let mut b = e.session(BackendId(1)).unwrap();
    // A later statement sees the new version of row 2, and row 3 no more.
    let mut only3 = |_: &mut Session, r: &[Value]| Ok(r[0] == Value::Int(3));
    assert_eq!(a.modify_rows("slot", &mut only3, RowChange::Delete).unwrap(), 1);
    b.begin();
    let got = b.select_rows(&query(Some((Share, WaitPolicy::Error)), None), &mut all).unwrap();
    let keys: Vec<_> = got.iter().map(|r| r[1].clone()).collect();
    assert_eq!(keys, vec![Value::Text("v1".into()), Value::Text("new".into())]);
    b.commit().unwrap();
    assert!(a.drop_table("slot", false).is_ok());
    assert_eq!(a.drop_table("slot", false).unwrap_err().to_string(), "table \"slot\" does not exist");
    assert!(a.drop_table("slot", true).is_ok());
}

/// A row lock taken inside a savepoint carries the subxid; `ROLLBACK TO` aborts it, so
/// another session's NOWAIT request for the row then succeeds, while the lock taken before
/// the savepoint stays.
#[test]
fn rollback_to_releases_a_subtransactions_row_lock() {
    let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
    let mut a = table(&e);
    let mut b = e.session(BackendId(1)).unwrap();
    a.begin();
    a.select_rows(&query(Some((KeyShare, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
    let top = a.xid;
    a.savepoint("sp").unwrap();
    a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
    let sub = a.cur_xid();
    assert!(sub.is_valid() && sub != top, "the row lock assigned a subxid");
    assert_eq!(e.subtrans.get_parent(sub).unwrap(), top, "its parent is in pg_subtrans");
    b.begin();
    let err = b.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
    assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
    b.rollback().unwrap();
    a.rollback_to_savepoint("sp").unwrap();
    assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Aborted, _))), "the subxid aborted");
    assert_eq!(e.lmgr.waiting_for(BackendId(1)), None);
    b.begin();
    let got = b.select_rows(&query(Some((NoKeyUpdate, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
    assert_eq!(got[0][0], Value::Int(1), "the subtransaction's FOR UPDATE is gone");
    b.rollback().unwrap();
    b.begin();
    let err = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
    assert!(err.to_string().starts_with("could not obtain lock on row"), "KEY SHARE kept: {err}");
    b.rollback().unwrap();
    assert!(a.rollback_to_savepoint("nope").unwrap_err().to_string().contains("does not exist"));
    a.commit().unwrap();
    assert!(matches!(e.clog.get_status(top), Ok((XidStatus::Committed, _))));
    assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Aborted, _))), "stays aborted");
}

/// A released savepoint's row lock and subxid stay until the transaction ends, and the
/// subxid commits with the top level.
#[test]
fn a_released_subtransactions_lock_is_kept_until_commit() {
    let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
    let mut a = table(&e);
    let mut b = e.session(BackendId(1)).unwrap();
    a.begin();
    a.savepoint("outer").unwrap();
    a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
    let sub = a.cur_xid();
    a.release_savepoint("outer").unwrap();
    assert_eq!(a.subxact_depth(), 0);
    assert!(a.release_savepoint("outer").unwrap_err().to_string().contains("does not exist"));
    b.begin();
    let err = b.select_rows(&query(Some((KeyShare, WaitPolicy::Error)), Some(1)), &mut all).unwrap_err();
    assert!(err.to_string().starts_with("could not obtain lock on row"), "{err}");
    b.rollback().unwrap();
    a.commit().unwrap();
    assert!(matches!(e.clog.get_status(sub), Ok((XidStatus::Committed, _))), "committed with the top");
    b.begin();
    let got = b.select_rows(&query(Some((Update, WaitPolicy::Error)), Some(1)), &mut all).unwrap();
    assert_eq!(got[0][0], Value::Int(1));
    b.commit().unwrap();
}

/// A session blocked on a row a subtransaction locked sleeps on the subxid's lock and is
/// woken by `ROLLBACK TO`, before the locker's transaction ends.
#[test]
fn a_waiter_on_a_subxid_wakes_at_rollback_to() {
    let e = Engine::without_tables(EngineConfig::new(2, 256)).unwrap();
    let mut a = table(&e);
    a.begin();
    a.savepoint("sp").unwrap();
    a.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all).unwrap();
    let sub = a.cur_xid();
    let e2 = Arc::clone(&e);
    let waiter = lockstack_common::sync::thread::spawn(move || {
        let mut b = e2.session(BackendId(1)).unwrap();
        b.begin();
        let got = b.select_rows(&query(Some((Update, WaitPolicy::Block)), Some(1)), &mut all);
        b.commit().unwrap();
        got.map(|rows| rows[0][0].clone())
    });
    let deadline = lockstack_common::sync::Instant::now() + std::time::Duration::from_secs(10);
    while e.lmgr.waiting_for(BackendId(1)).map(|w| w.0) != Some(LockTag::transaction(sub)) {
        assert!(
            lockstack_common::sync::Instant::now() < deadline,
            "the waiter never slept on the subxid's lock"
        );
        lockstack_common::sync::sleep(std::time::Duration::from_millis(1));
    }
    a.rollback_to_savepoint("sp").unwrap();
    assert_eq!(waiter.join().unwrap().unwrap(), Value::Int(1), "woken while a's transaction runs");
    assert!(a.in_transaction());
    a.commit().unwrap();
}
