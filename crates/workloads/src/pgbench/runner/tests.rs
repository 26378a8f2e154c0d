use super::*;
use crate::pgbench::script::Builtin;
use lockstack_engine::session::LockClauseStrength;

fn cfg(script: &str, clients: usize, preset: &str) -> PgbenchConfig {
    PgbenchConfig {
        seed: 7,
        ..PgbenchConfig::new(
            vec![Builtin::find(script).unwrap().script()],
            clients,
            150,
            EngineConfig::preset(preset, clients + 1, 8192).unwrap(),
        )
    }
}

/// Every built-in at several client counts and presets: every transaction commits (or
/// fails by deadlock, counted), and the invariants hold.
#[test]
fn builtins_keep_pgbench_invariants() {
    for (script, clients, preset) in [
        ("tpcb-like", 1, "pg91"),
        ("tpcb-like", 4, "pg17"),
        ("simple-update", 3, "pg92"),
        ("select-only", 2, "pg14"),
        ("tpcb-like", 8, "pg96"),
    ] {
        let c = cfg(script, clients, preset);
        let r = run(&c, &|_| {}).unwrap();
        assert_eq!(r.transactions + r.failed, 150 * clients as u64, "{script} {clients} {preset}");
        assert!(!r.checks.is_empty());
        for ch in &r.checks {
            assert!(ch.ok, "{script} {clients} {preset}: {} ({})", ch.name, ch.detail);
        }
        let texts = &r.scripts[0].texts;
        assert!(texts[0].starts_with("\\set aid random(1, 100000 * :scale)"), "{texts:?}");
    }
}

fn custom(text: &str, clients: usize, transactions: u64) -> PgbenchConfig {
    PgbenchConfig {
        transactions: Some(transactions),
        scripts: vec![crate::pgbench::script::parse_script("t.sql", text).unwrap()],
        ..cfg("select-only", clients, "pg17")
    }
}

/// Variables resolved to slots keep pgbench's meaning: `\set` from other variables and
/// the built-in `:scale` / `:client_id`, `:var` in SQL and in `\sleep`, per client.
#[test]
fn custom_script_variables_resolve_to_slots() {
    let text = "\\set a 3\n\\set b :a * 2 + :client_id + :scale - 1\n\\sleep :a us\n\
                SELECT abalance FROM pgbench_accounts WHERE aid = :b;\n\
                UPDATE pgbench_accounts SET abalance = abalance + :a * 10 WHERE aid = :b;\n";
    let r = run(&custom(text, 2, 5), &|_| {}).unwrap();
    assert_eq!(r.transactions, 10);
    for ch in &r.checks {
        assert!(ch.ok, "{} ({})", ch.name, ch.detail);
    }
    // Clients 0 and 1 update aids 6 and 7 by 30, five times each.
    let (_, before, after) = r.balance_sums.iter().find(|(t, _, _)| t == "pgbench_accounts").unwrap();
    assert_eq!(after - before, 2 * 5 * 30);
    let engine = Engine::new(cfg("select-only", 1, "pg17").engine, 1, 100).unwrap();
    let r = run_on(&engine, 0.0, &custom(text, 1, 4), &|_| {}).unwrap();
    let mut s = engine.session(BackendId(0)).unwrap();
    let row = |s: &mut Session, aid| {
        s.select(Table::Accounts.rel(), aid, LockClauseStrength::None).unwrap().unwrap()
    };
    assert_eq!(row(&mut s, 6)[2], 4 * 30, "{:?}", r.checks);
    assert_eq!(row(&mut s, 7)[2], 0);
}

/// An unset variable is pgbench's error, whether an expression or SQL reads it.
#[test]
fn undefined_variables_are_errors() {
    for text in [
        "\\set a :nope + 1\nSELECT abalance FROM pgbench_accounts WHERE aid = 1;\n",
        "SELECT abalance FROM pgbench_accounts WHERE aid = :nope;\n",
    ] {
        let e = run(&custom(text, 1, 1), &|_| {}).unwrap_err();
        assert!(matches!(e, EngineError::ClientAborted(_)), "{text}: {e:?}");
        let e = e.to_string();
        assert!(e.contains("undefined variable \"nope\""), "{text}: {e}");
        // Who, and where: the client, the script and the line of the failing command.
        assert!(e.starts_with("client 0 aborted: t.sql:1: "), "{text}: {e}");
    }
}

/// A non-integral key matches no row (PostgreSQL compares `aid = 1.5` as numeric); an
/// integral double still finds its row.
#[test]
fn a_fractional_key_matches_nothing() {
    let text = "\\set a 1.5\n\\set b 2.0\n\
                UPDATE pgbench_accounts SET abalance = abalance + 7 WHERE aid = :a;\n\
                UPDATE pgbench_accounts SET abalance = abalance + 5 WHERE aid = :b;\n";
    let r = run(&custom(text, 1, 3), &|_| {}).unwrap();
    assert_eq!(r.transactions, 3);
    let (_, before, after) = r.balance_sums.iter().find(|(t, _, _)| t == "pgbench_accounts").unwrap();
    assert_eq!(after - before, 3 * 5);
}

/// A bad wait-sampling rate is refused before any client starts (no panic, no hang).
#[test]
fn bad_wait_sampling_rate_is_an_error_before_the_run() {
    let c = PgbenchConfig { wait_sampling_hz: 100_001, ..cfg("select-only", 2, "pg17") };
    let e = run(&c, &|_| {}).unwrap_err().to_string();
    assert!(e.contains("--wait-sampling-hz"), "{e}");
}

/// The live-row check compares with the nominal row counts (100000, 10, 1 per scale).
#[test]
fn live_row_check_uses_the_nominal_row_counts() {
    let r = run(&cfg("select-only", 1, "pg17"), &|_| {}).unwrap();
    let c = r.checks.iter().find(|c| c.name.starts_with("pgbench_accounts")).unwrap();
    assert!(c.detail.starts_with("100000 live rows (expected 100000)"), "{}", c.detail);
    let lost = [(99_993, 0, 0), (10, 0, 0), (1, 0, 0), (0, 0, 0)];
    let checks = consistency_checks(&cfg("select-only", 1, "pg17"), &lost, &lost);
    assert!(!checks[0].ok, "{}", checks[0].detail);
    assert!(checks[1].ok && checks[2].ok);
}

/// `-r` times every command; without it commands are counted but not timed.
#[test]
fn per_command_latencies_only_with_r() {
    let c = cfg("select-only", 1, "pg17");
    let timed = run_with(&c, RunOptions { per_command_latencies: true }, &|_| {}).unwrap();
    let plain = run(&c, &|_| {}).unwrap();
    for (r, want_time) in [(&timed, true), (&plain, false)] {
        let cmds = &r.scripts[0].commands;
        assert_eq!(cmds.len(), 2);
        assert!(cmds.iter().all(|c| c.count == 150 && c.failures == 0), "{cmds:?}");
        // The SELECT takes well over a nanosecond.
        assert_eq!(cmds[1].total_ns.is_some_and(|t| t > 0), want_time, "{cmds:?}");
        assert!(r.latency_avg_ms > 0.0);
    }
}
