//! Runs lockstack's own isolation specs (`tests/isolation/specs`) and compares their output
//! with `tests/isolation/expected`, as PostgreSQL's `pg_isolation_regress` does. Set
//! `LOCKSTACK_BLESS=1` to (re)write the expected files after checking a change by hand.

use std::path::{Path, PathBuf};

use lockstack_workloads::isolation::{self, Comparison, IsolationConfig};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/isolation")
}

fn run_one(name: &str) {
    run_one_as(name, isolation::DEFAULT_PRESET);
}

/// Runs spec `name` as release `preset` and compares its output with that release's expected
/// file (`NAME.out`, or `NAME_<preset>.out` where the release prints something else).
fn run_one_as(name: &str, preset: &str) {
    let spec_path = dir().join("specs").join(format!("{name}.spec"));
    let spec = isolation::load_spec(&spec_path).unwrap();
    let run = isolation::run(&spec, &IsolationConfig::for_preset(preset).unwrap()).unwrap();
    assert!(run.warnings.is_empty(), "{:?}", run.warnings);
    let expected = dir().join("expected");
    let candidates = isolation::expected_candidates_for(&spec_path, &expected, preset);
    if std::env::var_os("LOCKSTACK_BLESS").is_some() {
        std::fs::write(&candidates[0], &run.output).unwrap();
        return;
    }
    match isolation::compare(&run.output, &candidates).unwrap() {
        Comparison::Same(_) => {}
        Comparison::Different { expected, diff } => {
            panic!(
                "{name}: output differs from {}:\n{diff}\n--- full output ---\n{}",
                expected.display(),
                run.output
            )
        }
    }
}

#[test]
fn simple_deadlock() {
    run_one("simple-deadlock");
}

#[test]
fn hard_deadlock() {
    run_one("hard-deadlock");
}

#[test]
fn soft_deadlock() {
    run_one("soft-deadlock");
}

/// PostgreSQL 17+: the holder's NOWAIT request goes ahead of the waiter that waits for it and
/// is granted (nowait.out).
#[test]
fn nowait() {
    run_one("nowait");
}

/// PostgreSQL 14-16: the same request fails with "could not obtain lock" (nowait_pg14.out),
/// and so it does under every older preset.
#[test]
fn nowait_pg14() {
    for preset in ["pg14", "pg96", "pg91"] {
        run_one_as("nowait", preset);
    }
    let text = std::fs::read_to_string(dir().join("expected/nowait_pg14.out")).unwrap();
    assert!(text.contains(
        "step h_more: LOCK TABLE stock IN SHARE ROW EXCLUSIVE MODE NOWAIT;\nERROR:  could not obtain lock on relation \"stock\"\n"
    ));
    let text = std::fs::read_to_string(dir().join("expected/nowait.out")).unwrap();
    assert!(
        text.contains("step h_more: LOCK TABLE stock IN SHARE ROW EXCLUSIVE MODE NOWAIT;\nstep h_commit")
    );
}

/// Each release's expected file: `NAME_<preset>.out` for that preset and older ones until an
/// older file exists, `NAME.out` for the newest.
#[test]
fn expected_files_are_chosen_by_release() {
    let spec = dir().join("specs/nowait.spec");
    let exp = dir().join("expected");
    let name = |p: &str| {
        isolation::expected_candidates_for(&spec, &exp, p)[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(name("pg17"), "nowait.out");
    for p in ["pg14", "pg96", "pg92", "pg91"] {
        assert_eq!(name(p), "nowait_pg14.out", "{p}");
    }
    assert_eq!(name("pg10"), "nowait.out", "an unknown preset is the default's");
    let spec = dir().join("specs/advisory.spec");
    assert_eq!(
        isolation::expected_candidates_for(&spec, &exp, "pg14")[0].file_name().unwrap(),
        "advisory.out",
        "no release file: the newest's"
    );
}

/// The order of completions is the tester's: the victim's 10 ms deadlock check fires while
/// the tester polls the first waiter, so `two_next` (unblocked by the victim's abort) is
/// reported before the victim's own error, as PostgreSQL 15 prints it.
#[test]
fn hard_deadlock_reports_the_unblocked_step_before_the_victims_error() {
    let spec = isolation::load_spec(&dir().join("specs/hard-deadlock.spec")).unwrap();
    for _ in 0..3 {
        let run = isolation::run(&spec, &IsolationConfig::default()).unwrap();
        let two = run.output.find("step two_next: <... completed>").expect("two_next completes");
        let three = run.output.find("step three_next: <... completed>\nERROR:  deadlock detected").unwrap();
        assert!(two < three, "{}", run.output);
    }
}

/// The sixteen pairs of row-lock strengths, alone and with the holder's lock in a MultiXact
/// beside a FOR KEY SHARE bystander: PostgreSQL 9.3+'s conflict table.
#[test]
fn rowlock_conflicts() {
    run_one("rowlock-conflicts");
}

/// Waiters on one row queue on its tuple lock and finish in arrival order; NOWAIT and SKIP
/// LOCKED give up on a held tuple lock.
#[test]
fn rowlock_queue() {
    run_one("rowlock-queue");
}

/// A waiting locker follows the update chain to the newest version and rechecks its WHERE
/// clause there (a row updated twice, a key moved away, a row deleted, an aborted update).
#[test]
fn rowlock_chain() {
    run_one("rowlock-chain");
}

/// An upgrading holder waits without queueing on the tuple lock, so a queued FOR UPDATE
/// waiter and the upgrader do not deadlock; a non-key UPDATE shares the row with KEY SHARE.
#[test]
fn rowlock_upgrade() {
    run_one("rowlock-upgrade");
}

/// Row locks inside a savepoint carry the subxid: ROLLBACK TO gives them up and wakes their
/// waiters while the transaction runs on, RELEASE keeps them until COMMIT, and an error
/// inside the savepoint is recovered from by ROLLBACK TO.
#[test]
fn savepoint_rowlock() {
    run_one("savepoint-rowlock");
}

/// Upgrades inside nested savepoints (KEY SHARE, then SHARE, then NO KEY UPDATE) with a FOR
/// UPDATE waiter queued and a rival key-sharer asking for NO KEY UPDATE: each ROLLBACK TO
/// gives back only the locks taken after it, so the rival gets the row once only the KEY
/// SHARE is left; a late key-sharer never waits and nobody deadlocks.
#[test]
fn savepoint_upgrade_queue() {
    run_one("savepoint-upgrade-queue");
}

/// REPEATABLE READ keeps its first snapshot; a row changed since by a transaction it does not
/// see fails to lock, update or delete with "could not serialize access"; a wait for a
/// transaction that rolls back lets the change through; statement_timeout cancels a row-lock
/// wait with its own message; a text primary key refuses a duplicate.
#[test]
fn rowlock_repeatable_read() {
    run_one("rowlock-repeatable-read");
}

#[test]
fn lock_timeout() {
    run_one("lock-timeout");
}

#[test]
fn advisory() {
    run_one("advisory");
}

#[test]
fn every_shipped_spec_has_a_test() {
    let mut names: Vec<String> = std::fs::read_dir(dir().join("specs"))
        .unwrap()
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "advisory",
            "hard-deadlock",
            "lock-timeout",
            "nowait",
            "rowlock-chain",
            "rowlock-conflicts",
            "rowlock-queue",
            "rowlock-repeatable-read",
            "rowlock-upgrade",
            "savepoint-rowlock",
            "savepoint-upgrade-queue",
            "simple-deadlock",
            "soft-deadlock"
        ]
    );
}

#[test]
fn unsupported_sql_names_file_line_session_and_step() {
    let text = "session s1\nstep a { BEGIN; }\nstep b {\n  PREPARE TRANSACTION 'f';\n}\n";
    let e = isolation::load_spec_text("bad.spec", text).unwrap_err();
    assert_eq!(e.to_string(), "bad.spec:3: session s1, step b: unsupported SQL: PREPARE TRANSACTION 'f'");
    let e =
        isolation::load_spec_text("bad.spec", "setup { SELECT now(); }\nsession s step a {}").unwrap_err();
    assert!(e.to_string().starts_with("bad.spec:1: setup: unsupported function \"now\""), "{e}");
    // An unsupported type, setting or isolation level: the file, line and statement.
    let e = isolation::load_spec_text(
        "bad.spec",
        "\nsetup { CREATE TABLE t (x float); }\nsession s\nstep a { BEGIN; }\n",
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("bad.spec:2: setup: unsupported: column type \"float\""), "{e}");
    assert!(e.to_string().ends_with("in: CREATE TABLE t (x float)"), "{e}");
    let text = "session s\nstep a { SET work_mem = 10; }\nstep b { BEGIN ISOLATION LEVEL SERIALIZABLE; }";
    let e = isolation::load_spec_text("bad.spec", text).unwrap_err();
    assert!(
        e.to_string().starts_with("bad.spec:2: session s, step a: unsupported parameter \"work_mem\""),
        "{e}"
    );
    let text = "session s\nstep b { BEGIN ISOLATION LEVEL SERIALIZABLE; }";
    let e = isolation::load_spec_text("bad.spec", text).unwrap_err();
    assert!(
        e.to_string().starts_with("bad.spec:2: session s, step b: unsupported: ISOLATION LEVEL SERIALIZABLE"),
        "{e}"
    );
}

#[test]
fn invalid_permutations_fail_with_a_message_instead_of_hanging() {
    // s1 waits on s2's lock, and s2's next step is never launched before s1's: the runner
    // must give up after step_timeout with a message, not hang.
    let text = "setup { CREATE TABLE t (); }\nteardown { DROP TABLE t; }\n\
                session s1\nstep l1 { BEGIN; LOCK t; }\nstep c1 { COMMIT; }\n\
                session s2\nstep l2 { BEGIN; LOCK t; }\nstep c2 { COMMIT; }\n\
                permutation l1 l2 c2 c1\n";
    let spec = isolation::load_spec_text("inv.spec", text).unwrap();
    let cfg = IsolationConfig { step_timeout: std::time::Duration::from_millis(300), ..Default::default() };
    let run = isolation::run(&spec, &cfg).unwrap();
    let e = run.aborted.expect("the run stops at the stuck step");
    assert!(e.to_string().starts_with("inv.spec: step l2 timed out"), "{e}");
    // What ran before the stuck step is kept for printing.
    assert!(
        run.output.contains("starting permutation: l1 l2 c2 c1\nstep l1: BEGIN; LOCK t;\n"),
        "{}",
        run.output
    );
}

#[test]
fn runtime_errors_are_reported_like_postgres() {
    let text = "session s1\nstep a { LOCK nosuch; }\nstep b { BEGIN; LOCK nosuch; }\nstep c { SELECT pg_advisory_unlock(1); }\n\
                step d { COMMIT; }\nstep e { SET deadlock_timeout = 'soon'; }\n\
                permutation a b c d e d\n";
    let spec = isolation::load_spec_text("rt.spec", text).unwrap();
    let run = isolation::run(&spec, &IsolationConfig::default()).unwrap();
    assert_eq!(
        run.output,
        "Parsed test spec with 1 sessions\n\nstarting permutation: a b c d e d\n\
         step a: LOCK nosuch;\nERROR:  LOCK TABLE can only be used in transaction blocks\n\
         step b: BEGIN; LOCK nosuch;\nERROR:  relation \"nosuch\" does not exist\n\
         step c: SELECT pg_advisory_unlock(1);\nERROR:  current transaction is aborted, commands ignored until end of transaction block\n\
         step d: COMMIT;\n\
         step e: SET deadlock_timeout = 'soon';\nERROR:  invalid value for parameter \"deadlock_timeout\": \"soon\"\n\
         s1: WARNING:  there is no transaction in progress\nstep d: COMMIT;\n"
    );
}

/// A teardown that blocks on a transaction a session left open (here the
/// global teardown's DROP TABLE behind s1's lock) is bounded by the step timeout, and what ran
/// before it has already been passed to the caller. It used to block the runner for ever
/// without printing anything. (Run on a thread so that a regression fails instead of hanging.)
#[test]
fn a_blocked_teardown_times_out_and_the_output_came_first() {
    let spec = isolation::load_spec_text(
        "stuck-teardown.spec",
        "setup { CREATE TABLE t (id int); }\nteardown { DROP TABLE t; }\n\
         session s1\nstep b1 { BEGIN; LOCK TABLE t IN SHARE MODE; }\npermutation b1\n",
    )
    .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let cfg =
            IsolationConfig { step_timeout: std::time::Duration::from_millis(300), ..Default::default() };
        let mut pieces = Vec::new();
        let r = isolation::run_with(&spec, &cfg, &mut |s| pieces.push(s.to_string()));
        let _ = tx.send((r, pieces));
    });
    let (r, pieces) = rx.recv_timeout(std::time::Duration::from_secs(60)).expect("the run hung");
    let r = r.unwrap();
    let e = r.aborted.expect("the teardown cannot finish").0;
    assert!(e.contains("stuck-teardown.spec: setup or teardown on the control connection timed out"), "{e}");
    // What was passed on is not kept as well.
    assert_eq!(r.output, "");
    let output = pieces.concat();
    assert!(
        output.contains("starting permutation: b1\nstep b1: BEGIN; LOCK TABLE t IN SHARE MODE;\n"),
        "{output}"
    );
}

/// A thousand sessions queued on one lock complete in order. Finding the
/// waiting steps asked the lock manager for every waiting step's blockers at every launch (a
/// walk of the whole queue each time); it now reads the backend's wait state.
#[test]
fn a_thousand_sessions_queued_on_one_lock_complete() {
    let n = 1000;
    let mut text = String::from(
        "session h\nstep hl { SELECT pg_advisory_lock(1); }\nstep hu { SELECT pg_advisory_unlock(1); }\n",
    );
    for i in 0..n {
        text.push_str(&format!(
            "session s{i}\nsetup {{ SET deadlock_timeout = '24h'; }}\nstep st{i} {{ SELECT pg_advisory_xact_lock(1); }}\n"
        ));
    }
    text.push_str(&format!(
        "permutation hl {} hu\n",
        (0..n).map(|i| format!("st{i}")).collect::<Vec<_>>().join(" ")
    ));
    let spec = isolation::load_spec_text("many.spec", &text).unwrap();
    let r = isolation::run(&spec, &IsolationConfig::default()).unwrap();
    assert!(r.aborted.is_none(), "{:?}", r.aborted);
    assert_eq!(r.output.matches("<waiting ...>").count(), n, "every queued step was reported waiting");
    assert_eq!(r.output.matches("<... completed>").count(), n);
}
