//! Unit tests of the isolation runner's SQL parser (`sql.rs`).

use super::*;

#[test]
fn parses_the_supported_statements() {
    assert_eq!(
        parse_block(
            "BEGIN; SET deadlock_timeout = '100s'; LOCK TABLE a, \"B\" IN SHARE ROW EXCLUSIVE MODE NOWAIT;"
        )
        .unwrap(),
        vec![
            Statement::Begin { repeatable_read: false },
            Statement::Set { guc: Guc::DeadlockTimeout, value: Some("100s".into()) },
            Statement::Lock {
                tables: vec!["a".into(), "B".into()],
                mode: LockMode::ShareRowExclusive,
                nowait: true
            },
        ]
    );
    assert_eq!(
        parse_statement("LOCK a1").unwrap(),
        Statement::Lock { tables: vec!["a1".into()], mode: LockMode::AccessExclusive, nowait: false }
    );
    assert_eq!(
        parse_statement("set lock_timeout to 10").unwrap(),
        Statement::Set { guc: Guc::LockTimeout, value: Some("10".into()) }
    );
    assert_eq!(
        parse_statement("RESET lock_timeout").unwrap(),
        Statement::Set { guc: Guc::LockTimeout, value: None }
    );
    let Statement::Select(c) =
        parse_statement("SELECT pg_try_advisory_xact_lock_shared(1, -2), pg_advisory_unlock(5)").unwrap()
    else {
        panic!()
    };
    assert_eq!(c[0].0, "pg_try_advisory_xact_lock_shared");
    assert_eq!(
        c[0].1,
        Call::Advisory(
            AdvisoryFn { op: AdvisoryOp::Try, xact: true, shared: true },
            AdvisoryKey::Int4(1, -2)
        )
    );
    assert_eq!(
        c[1].1,
        Call::Advisory(
            AdvisoryFn { op: AdvisoryOp::Unlock, xact: false, shared: false },
            AdvisoryKey::Int8(5)
        )
    );
    let Statement::CreateTable(d) = parse_statement(
        "CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL DEFAULT 'a', r int REFERENCES p)",
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(d.primary_key, Some(0));
    assert_eq!(d.columns[1].default, Some(Value::Text("a".into())));
    assert!(d.columns[1].not_null && !d.columns[2].not_null);
    assert_eq!(
        parse_statement("INSERT INTO t VALUES (1, 'x'), (-2, DEFAULT)").unwrap(),
        Statement::Insert(Insert {
            table: "t".into(),
            columns: None,
            rows: vec![
                vec![Some(Value::Int(1)), Some(Value::Text("x".into()))],
                vec![Some(Value::Int(-2)), None]
            ],
        })
    );
    assert_eq!(
        parse_statement("SELECT * FROM q ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1").unwrap(),
        Statement::Query(Query {
            table: "q".into(),
            columns: None,
            filter: None,
            order_by: Some(("id".into(), false)),
            limit: Some(1),
            lock: Some((RowLockStrength::Update, WaitPolicy::Skip)),
        })
    );
    let Statement::Query(q) =
        parse_statement("select a, b from t where a = 3 for no key update nowait").unwrap()
    else {
        panic!()
    };
    assert_eq!(q.filter, Some(Cond::Eq("a".into(), Value::Int(3))));
    assert_eq!(
        parse_statement("UPDATE t SET v = v + 1, w = DEFAULT WHERE pg_advisory_lock_shared(7) IS NOT NULL")
            .unwrap(),
        Statement::Update(Update {
            table: "t".into(),
            set: vec![("v".into(), Expr::Column("v".into(), 1)), ("w".into(), Expr::Default)],
            filter: Some(Cond::CallNotNull(Call::Advisory(
                AdvisoryFn { op: AdvisoryOp::Lock, xact: false, shared: true },
                AdvisoryKey::Int8(7)
            ))),
        })
    );
    assert_eq!(
        parse_statement("DELETE FROM t WHERE k = 'a'").unwrap(),
        Statement::Delete { table: "t".into(), filter: Some(Cond::Eq("k".into(), Value::Text("a".into()))) }
    );
    assert_eq!(q.lock, Some((RowLockStrength::NoKeyUpdate, WaitPolicy::Error)));
    let Statement::Query(q) = parse_statement(
        "SELECT * FROM foo WHERE pg_advisory_xact_lock(0) IS NOT NULL AND key = 1 AND v = 'x' FOR KEY SHARE",
    )
    .unwrap() else {
        panic!()
    };
    assert_eq!(
        q.filter,
        Some(Cond::And(vec![
            Cond::CallNotNull(Call::Advisory(
                AdvisoryFn { op: AdvisoryOp::Lock, xact: true, shared: false },
                AdvisoryKey::Int8(0)
            )),
            Cond::Eq("key".into(), Value::Int(1)),
            Cond::Eq("v".into(), Value::Text("x".into())),
        ]))
    );
    assert_eq!(q.lock, Some((RowLockStrength::KeyShare, WaitPolicy::Block)));
    for bad in [
        "SELECT * FROM t WHERE a > 1",
        "SELECT * FROM t WHERE a = 1 OR b = 2",
        "SELECT * FROM t WHERE a = 1 AND",
        "UPDATE t SET a = b * 2",
        "SELECT * FROM t FOR UPDATE OF t",
        "CREATE TABLE t (a float)",
        "CREATE TABLE t (a int UNIQUE)",
        "INSERT INTO t SELECT 1",
    ] {
        assert!(parse_statement(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_statement("drop table if exists a, b").unwrap(),
        Statement::DropTable { tables: vec!["a".into(), "b".into()], if_exists: true }
    );
}

#[test]
fn bigint_keys_cover_the_whole_range() {
    for (text, key) in [("-9223372036854775808", i64::MIN), ("9223372036854775807", i64::MAX), ("-1", -1)] {
        let Statement::Select(c) = parse_statement(&format!("SELECT pg_advisory_lock({text})")).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            c[0].1,
            Call::Advisory(
                AdvisoryFn { op: AdvisoryOp::Lock, xact: false, shared: false },
                AdvisoryKey::Int8(key)
            )
        );
    }
    let e = parse_statement("SELECT pg_advisory_lock(-9223372036854775809)").unwrap_err().to_string();
    assert_eq!(e, "integer out of range: -9223372036854775809");
}

/// Isolation levels other than READ COMMITTED, READ ONLY, SET LOCAL and
/// SET TRANSACTION were accepted and run as plain READ COMMITTED statements; they are
/// refused as unsupported, and what PostgreSQL itself runs as READ COMMITTED is accepted.
#[test]
fn unimplemented_transaction_modes_are_refused() {
    for ok in [
        "BEGIN",
        "begin transaction isolation level read committed",
        "START TRANSACTION ISOLATION LEVEL READ UNCOMMITTED, READ WRITE",
        "BEGIN WORK READ WRITE NOT DEFERRABLE",
        "BEGIN ISOLATION LEVEL READ COMMITTED DEFERRABLE",
    ] {
        assert_eq!(parse_statement(ok), Ok(Statement::Begin { repeatable_read: false }), "{ok}");
    }
    for rr in [
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "start transaction read write, isolation level repeatable read",
    ] {
        assert_eq!(parse_statement(rr), Ok(Statement::Begin { repeatable_read: true }), "{rr}");
    }
    for (bad, want) in [
        ("begin isolation level serializable", "unsupported: ISOLATION LEVEL SERIALIZABLE"),
        ("START TRANSACTION READ WRITE, ISOLATION LEVEL SERIALIZABLE", "unsupported: ISOLATION LEVEL"),
        ("BEGIN READ ONLY", "unsupported: READ ONLY"),
        ("BEGIN ISOLATION LEVEL", "expected an isolation level"),
        ("BEGIN FOO", "unexpected text at the end"),
        ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "unsupported: SET TRANSACTION"),
        (
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            "unsupported: SET TRANSACTION",
        ),
        ("SET LOCAL lock_timeout = 10", "unsupported: SET LOCAL"),
        ("LOCK TABLE ONLY t", "unexpected text at the end"),
        ("DROP TABLE t CASCADE", "unexpected text at the end"),
    ] {
        let e = parse_statement(bad).unwrap_err().to_string();
        assert!(e.contains(want), "{bad}: {e}");
    }
    let e = parse_block("BEGIN\n  ISOLATION LEVEL\n  SERIALIZABLE;").unwrap_err().to_string();
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn parses_savepoint_statements() {
    assert_eq!(
        parse_block("SAVEPOINT Sp1; ROLLBACK TO sp1; ROLLBACK WORK TO SAVEPOINT \"Sp1\"; RELEASE sp1; RELEASE SAVEPOINT sp1")
            .unwrap(),
        vec![
            Statement::Savepoint("sp1".into()),
            Statement::RollbackTo("sp1".into()),
            Statement::RollbackTo("Sp1".into()),
            Statement::Release("sp1".into()),
            Statement::Release("sp1".into()),
        ]
    );
    assert_eq!(parse_statement("ROLLBACK").unwrap(), Statement::Rollback);
    for bad in ["SAVEPOINT", "RELEASE", "ROLLBACK TO", "ABORT TO sp", "SAVEPOINT a b"] {
        assert!(parse_statement(bad).is_err(), "{bad}");
    }
}

#[test]
fn rejects_the_rest() {
    assert!(
        parse_statement("MERGE INTO t USING u ON true").unwrap_err().to_string().contains("unsupported SQL")
    );
    assert!(parse_statement("SELECT now()").unwrap_err().to_string().contains("unsupported function"));
    assert!(parse_statement("SET work_mem = 1").unwrap_err().to_string().contains("unsupported parameter"));
    assert!(parse_statement("LOCK t IN FOO MODE").unwrap_err().to_string().contains("unknown lock mode"));
    assert!(parse_statement("SELECT pg_advisory_lock(1, 2, 3)").is_err());
    assert_eq!(
        parse_statement("SET lock_timeout = -1").unwrap(),
        Statement::Set { guc: Guc::LockTimeout, value: Some("-1".into()) },
        "a negative value parses; the range check happens when the step runs"
    );
}
