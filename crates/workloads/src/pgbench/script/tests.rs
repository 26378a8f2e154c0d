use super::*;

#[test]
fn builtins_parse_into_the_expected_commands() {
    let tpcb = Builtin::find("tpcb-like").unwrap().script();
    assert_eq!(tpcb.name, "<builtin: TPC-B (sort of)>");
    let sql: Vec<&SqlCommand> = tpcb
        .commands
        .iter()
        .filter_map(|(_, c)| if let Command::Sql { cmd, .. } = c { Some(cmd) } else { None })
        .collect();
    assert_eq!(sql.len(), 7);
    assert_eq!(sql[0], &SqlCommand::Begin);
    assert_eq!(
        sql[1],
        &SqlCommand::Update {
            table: Table::Accounts,
            column: 2,
            delta: SqlValue::Var("delta".into()),
            key: SqlValue::Var("aid".into())
        }
    );
    assert_eq!(
        sql[2],
        &SqlCommand::Select {
            table: Table::Accounts,
            columns: vec![2],
            key: SqlValue::Var("aid".into()),
            lock: LockClauseStrength::None,
            wait: WaitPolicy::Block
        }
    );
    assert!(matches!(sql[5], SqlCommand::InsertHistory { values } if values[4] == Some(SqlValue::Now)));
    assert_eq!(sql[6], &SqlCommand::Commit);
    assert_eq!(Builtin::find("simple-update").unwrap().script().commands.len(), 9);
    assert_eq!(Builtin::find("select").unwrap().script().commands.len(), 2);
    assert!(Builtin::find("nope").is_err());
    assert!(Builtin::find("s").unwrap_err().to_string().contains("ambiguous"));
}

/// Our built-ins print exactly what PostgreSQL's pgbench prints, checked against the real
/// binary when one is installed (its output is read at test time, never stored here).
#[test]
fn show_script_matches_real_pgbench_when_installed() {
    let Ok(out) = std::process::Command::new("pgbench").arg("--show-script=tpcb-like").output() else {
        eprintln!("pgbench not installed; comparing the parsed form only");
        return;
    };
    for b in BUILTINS {
        let out =
            std::process::Command::new("pgbench").arg(format!("--show-script={}", b.name)).output().unwrap();
        let theirs = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(theirs.trim_end(), b.show().trim_end(), "{}", b.name);
        // And the text runs through our parser unchanged.
        parse_script("show-script", &theirs).unwrap();
    }
    drop(out);
}

#[test]
fn custom_scripts_and_errors() {
    let s = parse_script(
        "t.sql",
        "-- comment\n\\set a random_zipfian(1, 100, 1.5)\n\\sleep 2 ms\nSELECT abalance, bid\n  FROM pgbench_accounts WHERE :a = aid FOR UPDATE;\nUPDATE pgbench_tellers SET tbalance = tbalance - :a WHERE tid = 3; COMMIT;\nABORT;\n",
    )
    .unwrap();
    assert_eq!(s.commands.len(), 6);
    assert_eq!(s.commands[2].0, 4, "a statement reports the line it starts on");
    assert!(
        matches!(&s.commands[2].1, Command::Sql { cmd: SqlCommand::Select { columns, lock: LockClauseStrength::ForUpdate, .. }, .. } if columns == &vec![2, 1])
    );
    assert!(matches!(
        &s.commands[3].1,
        Command::Sql { cmd: SqlCommand::Update { delta: SqlValue::Neg(_), .. }, .. }
    ));
    assert!(matches!(&s.commands[5].1, Command::Sql { cmd: SqlCommand::Rollback, .. }));
    for (bad, what) in [
        ("DELETE FROM pgbench_accounts WHERE aid = 1;", "1: unsupported statement: DELETE"),
        ("SELECT * FROM pgbench_accounts WHERE aid = 1;", "unsupported statement"),
        ("SELECT abalance FROM pgbench_accounts WHERE aid = 1 ORDER BY aid;", "unsupported"),
        ("SELECT abalance FROM pgbench_accounts WHERE bid = 1;", "unsupported"),
        ("UPDATE pgbench_accounts SET aid = aid + 1 WHERE aid = 1;", "unsupported"),
        ("UPDATE pgbench_accounts SET abalance = 5 WHERE aid = 1;", "unsupported"),
        ("SELECT 1;\n\\shell ls", "unsupported"),
        ("\n\n\\setshell x echo", "3: unsupported statement: \\setshell"),
        ("\\set x 1 +", "\\set x"),
        ("\\sleep 1 hours", "time unit"),
        ("", "empty command list"),
    ] {
        let e = parse_script("bad.sql", bad).unwrap_err().to_string();
        assert!(e.starts_with("bad.sql:"), "{e}");
        assert!(e.contains(what), "{bad:?} gave {e}");
    }
}

/// BEGIN's isolation levels and READ ONLY, AND CHAIN, SET TRANSACTION, FOR ... OF another
/// table, two locking clauses and INSERT's ON CONFLICT / RETURNING are refused,
/// naming the file and line, never run as something else; what PostgreSQL runs as READ
/// COMMITTED is accepted.
#[test]
fn clauses_that_would_be_dropped_are_refused() {
    for ok in [
        "BEGIN ISOLATION LEVEL READ COMMITTED;",
        "START TRANSACTION ISOLATION LEVEL READ UNCOMMITTED, READ WRITE;",
        "BEGIN TRANSACTION;",
        "COMMIT WORK;",
        "ROLLBACK;",
    ] {
        let s = parse_script("ok.sql", ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert_eq!(s.commands.len(), 1, "{ok}");
    }
    for (bad, want) in [
        ("BEGIN ISOLATION LEVEL REPEATABLE READ;", "unsupported: ISOLATION LEVEL REPEATABLE READ"),
        ("BEGIN ISOLATION LEVEL SERIALIZABLE;", "unsupported: ISOLATION LEVEL SERIALIZABLE"),
        ("START TRANSACTION READ ONLY;", "unsupported: READ ONLY transactions"),
        ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;", "unsupported: SET TRANSACTION"),
        ("SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE;", "unsupported"),
        ("COMMIT AND CHAIN;", "unsupported: AND CHAIN"),
        ("ROLLBACK AND CHAIN;", "unsupported: AND CHAIN"),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1 FOR UPDATE OF pgbench_tellers;",
            "unsupported: relation \"pgbench_tellers\" in FOR UPDATE clause not found in FROM clause",
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1 FOR KEY SHARE FOR NO KEY UPDATE;",
            "unsupported statement",
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1 FOR SHARE FOR UPDATE;",
            "unsupported statement",
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = 1 FOR NO KEY UPDATE OF pgbench_tellers;",
            "unsupported: relation \"pgbench_tellers\" in FOR NO KEY UPDATE clause not found in FROM clause",
        ),
        ("INSERT INTO pgbench_history (tid) VALUES (1) ON CONFLICT DO NOTHING;", "unsupported statement"),
        ("INSERT INTO pgbench_history (tid) VALUES (1) RETURNING tid;", "unsupported statement"),
    ] {
        let text = format!("\\set x 1\n{bad}\n");
        let e = parse_script("rr.sql", &text).unwrap_err().to_string();
        assert!(e.starts_with("rr.sql:2: ") && e.contains(want), "{bad}: {e}");
    }
}

/// A variable may be named like a piece of the command word (`s`, `e`, `set`...): the
/// expression is what follows the name, not what follows its first occurrence.
#[test]
fn set_variables_named_like_parts_of_set() {
    for name in ["s", "e", "t", "se", "et", "set", "SET"] {
        let text =
            format!("\\set {name} 5 + 1\nSELECT abalance FROM pgbench_accounts WHERE aid = :{name};\n");
        let sc = parse_script("v.sql", &text).unwrap_or_else(|e| panic!("{name}: {e}"));
        match &sc.commands[0].1 {
            Command::Set { var, expr } => {
                assert_eq!(var, name);
                assert_eq!(format!("{expr:?}"), format!("{:?}", expr::parse("5 + 1").unwrap()), "{name}");
            }
            c => panic!("{name}: {c:?}"),
        }
    }
}

/// The row-lock clauses pgbench's tables run: the four strengths, with OF their own table and
/// NOWAIT or SKIP LOCKED, each read into its strength and wait policy.
#[test]
fn row_lock_clauses_are_read() {
    for (sql, want_lock, want_wait) in [
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = :a FOR UPDATE",
            LockClauseStrength::ForUpdate,
            WaitPolicy::Block,
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = :a FOR SHARE NOWAIT",
            LockClauseStrength::ForShare,
            WaitPolicy::Error,
        ),
        (
            "select abalance from pgbench_accounts where aid = :a for update of pgbench_accounts skip locked",
            LockClauseStrength::ForUpdate,
            WaitPolicy::Skip,
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = :a FOR NO KEY UPDATE",
            LockClauseStrength::ForNoKeyUpdate,
            WaitPolicy::Block,
        ),
        (
            "select abalance from pgbench_accounts where aid = :a for  key\tshare of pgbench_accounts nowait",
            LockClauseStrength::ForKeyShare,
            WaitPolicy::Error,
        ),
        (
            "SELECT abalance FROM pgbench_accounts WHERE aid = :a FOR KEY SHARE SKIP LOCKED",
            LockClauseStrength::ForKeyShare,
            WaitPolicy::Skip,
        ),
    ] {
        let s = parse_script("lock.sql", &format!("\\set a 1\n{sql};\n"))
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        match &s.commands[1].1 {
            Command::Sql { cmd: SqlCommand::Select { lock, wait, .. }, .. } => {
                assert_eq!((*lock, *wait), (want_lock, want_wait), "{sql}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
}
