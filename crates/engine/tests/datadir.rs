//! `--data-dir`: create and load, run, shut down cleanly, reopen; refusals of unusable
//! directories.

use std::fs;

use lockstack_engine::datadir::{self, CONTROL_FILE, ClusterState};
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::pgbench::runner::{self, PgbenchConfig};
use lockstack_engine::pgbench::script::{Builtin, Table};

fn engine_cfg() -> EngineConfig {
    EngineConfig::preset("pg17", 3, 4096).unwrap()
}

fn pgbench(transactions: u64) -> PgbenchConfig {
    PgbenchConfig {
        scale: 1,
        fillfactor: 100,
        clients: 2,
        threads: 2,
        duration: None,
        transactions: Some(transactions),
        scripts: vec![Builtin::find("tpcb-like").unwrap().script()],
        progress: None,
        seed: 3,
        wait_sampling_hz: 0,
        engine: engine_cfg(),
    }
}

#[test]
fn initialize_run_shutdown_reopen_keeps_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let c0 = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c0.state, ClusterState::ShutDown);
    assert!(dir.join("base").read_dir().unwrap().count() >= 7, "heap, index and VM files");
    assert!(dir.join("pg_wal").read_dir().unwrap().count() >= 1);

    // Two runs, each on a reopened directory; the second sees the first's history.
    let mut history_rows = 0;
    let mut last = c0.clone();
    for round in 0..2 {
        let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
        assert_eq!(control, last, "round {round}: open reads what shutdown wrote");
        assert_eq!(datadir::read_control(&dir).unwrap().state, ClusterState::InProduction);
        let r = runner::run_on(&engine, 0.0, &pgbench(40), &|_| {}).unwrap();
        assert_eq!(r.transactions, 80);
        for c in &r.checks {
            assert!(c.ok, "round {round}: {} ({})", c.name, c.detail);
        }
        {
            let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
            let h = s.table_sums(Table::History).unwrap();
            assert_eq!(h.rows, history_rows + 80, "round {round}");
            history_rows = h.rows;
        }
        let c = datadir::shutdown(&engine, &control).unwrap();
        assert!(c.next_xid >= last.next_xid + 80, "xids continue: {} -> {}", last.next_xid, c.next_xid);
        assert!(c.end_of_wal > last.end_of_wal);
        assert!(c.next_wal_segment > last.next_wal_segment);
        last = c;
    }
    // After the last shutdown, a fresh open sees the balances the runs left, consistent with
    // the history they wrote.
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
    let hist = s.table_sums(Table::History).unwrap();
    assert_eq!(hist.rows, 160);
    for t in [Table::Accounts, Table::Tellers, Table::Branches] {
        let sums = s.table_sums(t).unwrap();
        assert_eq!(sums.balance, hist.balance, "{t:?} balance = history delta sum after reopen");
        assert!(sums.duplicate_keys.is_empty());
    }
    drop(s);
    datadir::shutdown(&engine, &control).unwrap();
}

#[test]
fn unusable_directories_are_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    // Not initialised.
    let e = datadir::open(engine_cfg(), tmp.path()).unwrap_err().to_string();
    assert!(e.contains("not a lockstack data directory"), "{e}");
    // A foreign non-empty directory is not wiped by -i.
    fs::write(tmp.path().join("precious.txt"), "keep me").unwrap();
    let e = datadir::initialize(engine_cfg(), tmp.path(), 1, 100).unwrap_err().to_string();
    assert!(e.contains("not a lockstack data directory"), "{e}");
    assert!(tmp.path().join("precious.txt").exists());
    // Opened and never shut down: refused (no crash recovery).
    let dir = tmp.path().join("c");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let (engine, _) = datadir::open(engine_cfg(), &dir).unwrap();
    drop(engine);
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("not shut down cleanly"), "{e}");
    // A corrupt control file names itself.
    fs::write(dir.join(CONTROL_FILE), "{ nope").unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("invalid control file"), "{e}");
    // -i over an existing cluster re-creates it.
    let c = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c.state, ClusterState::ShutDown);
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    datadir::shutdown(&engine, &control).unwrap();
}
