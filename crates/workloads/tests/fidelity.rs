//! Fidelity counters: the lock-stack calls per transaction that the engine
//! makes deterministically for each built-in at one client, under the presets that stand for
//! PostgreSQL 14-17. Counts only, never durations.
//!
//! One test function in its own test binary: the LWLock counters are process-wide, so nothing
//! else may run LWLocks while a run is measured.

use lockstack_engine::engine::{Engine, EngineConfig};
use lockstack_engine::tables::TableId;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig, PgbenchResult};
use lockstack_workloads::pgbench::script::Builtin;
use lockstack_workloads::report::FidelityRow;

const TXNS: u64 = 60;

fn config(script: &str, preset: &str) -> PgbenchConfig {
    let engine = EngineConfig::preset(preset, 2, 8192).unwrap();
    PgbenchConfig {
        seed: 3,
        ..PgbenchConfig::new(vec![Builtin::find(script).unwrap().script()], 1, TXNS, engine)
    }
}

/// The total of fidelity row `call`.
fn row<'a>(r: &'a PgbenchResult, call: &str) -> &'a FidelityRow {
    r.fidelity.iter().find(|f| f.call == call).unwrap_or_else(|| panic!("no fidelity row {call}"))
}

/// Asserts that `call` was made exactly `per_txn` times per transaction.
fn exactly(r: &PgbenchResult, what: &str, call: &str, per_txn: u64) {
    assert_eq!(row(r, call).ours, per_txn * TXNS, "{what}: {call} should be {per_txn}/txn");
}

/// What every writing built-in does once per transaction, whatever its statements: one xid
/// (XidGen), its lock in and out of the main table, one group-clear attempt on ProcArrayLock,
/// one group CLOG update attempt, and one `MultiXactIdSetOldestMember` (MultiXactGenLock shared
/// at the first update; PostgreSQL 15 takes it 1.00 time per -N and tpcb-like transaction).
fn one_xid_per_transaction(r: &PgbenchResult, what: &str) {
    exactly(r, what, "MultiXactGen SHARED", 1);
    exactly(r, what, "XidGen EXCL", 1);
    exactly(r, what, "LockManager EXCL", 2);
    exactly(r, what, "ProcArray EXCL (cond.)", 1);
    // The run's first xid is the first of a CLOG page, which it zeroes under the exclusive lock.
    let x = row(r, "XactSLRU EXCL (cond.)").ours;
    assert!((TXNS..=TXNS + 1).contains(&x), "{what}: XactSLRU EXCL {x}, want {TXNS} (+1 page zeroing)");
    assert_eq!(r.lock_stack.count("lmgr.main_acquisitions_total"), TXNS, "{what}: only the xid lock");
    assert_eq!(r.lock_stack.count("procarray.xids_assigned"), TXNS, "{what}");
}

/// Checks the rows common to every script: no failures, the transaction count, fast-path lock
/// traffic between PostgreSQL 15's shape (one LockReleaseAll acquisition for all fast-path
/// locks) and one release per lock, ProcArray shared at least once per snapshot, no lock waits.
fn common(r: &PgbenchResult, what: &str, grants_per_txn: u64, builtin: &str) {
    assert_eq!(r.transactions, TXNS, "{what}");
    assert_eq!(r.failed, 0, "{what}");
    assert_eq!(r.lock_stack.transactions, TXNS, "{what}");
    assert_eq!(r.fidelity_builtin.as_deref(), Some(builtin), "{what}");
    assert!(r.fidelity.iter().all(|f| f.pg15_per_txn.is_some()), "{what}: every row has PG's value");
    let c = |path: &str| r.lock_stack.count(path);
    assert_eq!(c("lmgr.fast_path_grants"), grants_per_txn * TXNS, "{what}: relation locks, all fast path");
    let hw = &r.lock_stack.counters.lmgr;
    assert_eq!(
        c("lmgr.spills") + c("lmgr.transfers") + c("lmgr.waits") + c("lmgr.deadlocks"),
        0,
        "{what}: {hw:?}"
    );
    // Lock requests: one per relation (and index) a statement uses, plus the xid lock.
    let fp = row(r, "LockFastPath EXCL").ours;
    let (lo, hi) = ((grants_per_txn + 3) * TXNS, (2 * grants_per_txn + 2) * TXNS);
    assert!((lo..=hi).contains(&fp), "{what}: LockFastPath EXCL {fp} outside {lo}..={hi}");
    let snaps = row(r, "GetSnapshotData").ours;
    assert!(row(r, "ProcArray SHARED").ours >= snaps, "{what}: a snapshot takes ProcArrayLock shared");
    assert!(row(r, "MultiXactGen SHARED").modelled);
    // No row is share-locked by two transactions: no multi is created (MultiXactGen EXCL).
    assert_eq!(c("lwlock.MultiXactGen.ex_acquire"), 0, "{what}: MultiXactGen EXCL");
    assert_eq!(c("buffers.reads") + c("buffers.evictions"), 0, "{what}: all in the pool");
    for c in &r.checks {
        assert!(c.ok, "{what}: {} ({})", c.name, c.detail);
    }
}

#[test]
fn builtins_make_the_same_lock_stack_calls_per_transaction_every_time() {
    for preset in ["pg14", "pg17"] {
        // select-only, on an engine whose accounts index depth we know.
        let cfg = config("select-only", preset);
        let engine = Engine::new(cfg.engine.clone(), cfg.scale, cfg.fillfactor).unwrap();
        let height = {
            let bb = engine.pool.attach_auxiliary();
            u64::from(engine.table(TableId::Accounts).index.as_ref().unwrap().height(&bb).unwrap())
        };
        let r = runner::run_on(&engine, 0.0, &cfg, &|_| {}).unwrap();
        let what = format!("select-only --preset {preset}");
        common(&r, &what, 2, "select-only");
        // AccessShareLock on pgbench_accounts and its primary key, both in fast-path slots.
        exactly(&r, &what, "LockAcquireExtended", 2);
        exactly(&r, &what, "LockManager EXCL", 0);
        // One snapshot, for the SELECT.
        exactly(&r, &what, "GetSnapshotData", 1);
        exactly(&r, &what, "ProcArray SHARED", 1);
        for call in [
            "ProcArray EXCL (cond.)",
            "XidGen EXCL",
            "XactSLRU EXCL (cond.)",
            "XactSLRU SHARED",
            "WALInsert EXCL",
            "BufferContent EXCL",
            "MultiXactGen SHARED",
        ] {
            exactly(&r, &what, call, 0);
        }
        // Root to leaf (height + 1 pages), then the heap page: each looked up once and
        // share-locked once.
        exactly(&r, &what, "BufferMapping SHARED", height + 2);
        exactly(&r, &what, "BufferContent SHARED", height + 2);
        assert_eq!(r.lock_stack.count("wal.records"), 0, "{what}");
        assert_eq!(r.lock_stack.count("procarray.end_readonly"), TXNS, "{what}");

        // simple-update: UPDATE accounts, SELECT accounts, INSERT history.
        let r = runner::run(&config("simple-update", preset), &|_| {}).unwrap();
        let what = format!("simple-update --preset {preset}");
        common(&r, &what, 5, "simple-update");
        one_xid_per_transaction(&r, &what);
        // RowExclusiveLock on accounts and its key, AccessShareLock on both, RowExclusiveLock
        // on history (5 fast-path grants), and the xid lock.
        exactly(&r, &what, "LockAcquireExtended", 6);
        // One snapshot per statement; none for BEGIN and END.
        exactly(&r, &what, "GetSnapshotData", 3);
        // Heap update, history insert, commit: one WAL record and one insertion lock each.
        exactly(&r, &what, "WALInsert EXCL", 3);
        assert_eq!(r.lock_stack.count("wal.records"), 3 * TXNS, "{what}");

        // tpcb-like: three updates, one select, one insert.
        let r = runner::run(&config("tpcb-like", preset), &|_| {}).unwrap();
        let what = format!("tpcb-like --preset {preset}");
        common(&r, &what, 9, "tpcb-like");
        one_xid_per_transaction(&r, &what);
        exactly(&r, &what, "LockAcquireExtended", 10);
        exactly(&r, &what, "GetSnapshotData", 5);
        exactly(&r, &what, "WALInsert EXCL", 5);
        assert_eq!(r.lock_stack.count("wal.records"), 5 * TXNS, "{what}");
    }
}
