//! A backend that fails ends its transaction before it stops: a WAL write
//! error (a full disk, injected with `WalConfig::write_limit`, no tmpfs needed) in a statement,
//! in a commit or in a rollback releases the failing transaction's locks and wakes its waiters,
//! and a pgbench run with several clients ends with one line naming the WAL file.
//!
//! Every wait here is bounded (a hang fails the test instead of hanging it): sessions that may
//! block run on detached threads, and the main thread gives up after [`BOUND`].

use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use lockstack_common::BackendId;
use lockstack_engine::datadir;
use lockstack_engine::engine::{Engine, EngineConfig, EngineError};
use lockstack_engine::session::Session;
use lockstack_engine::tables::TableId;
use lockstack_lmgr::LockTagKind;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig};
use lockstack_workloads::pgbench::script::Builtin;
use lockstack_xlog::WalError;

/// How long anything may take before the test calls it a hang (a bound, not a timing).
const BOUND: Duration = Duration::from_secs(60);

/// WAL bytes a run may write after the directory is opened: enough for the open and a few
/// dozen transactions, far less than 2 x 300 tpcb-like transactions need.
const LIMIT: u64 = 48 * 1024;

fn engine_cfg(clients: usize, preset: &str) -> EngineConfig {
    EngineConfig::preset(preset, clients + 1, 4096).unwrap()
}

/// A loaded directory in `tmp`, opened with WAL writes limited to [`LIMIT`] bytes.
fn open_full_disk(tmp: &Path, clients: usize, preset: &str) -> Arc<Engine> {
    let dir = tmp.join("d");
    datadir::initialize(engine_cfg(clients, preset), &dir, 1, 100).unwrap();
    let mut cfg = engine_cfg(clients, preset);
    cfg.wal.write_limit = Some(LIMIT);
    datadir::open(cfg, &dir).unwrap().0
}

/// Polls `cond` until it holds; false after [`BOUND`].
fn poll(mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > BOUND {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// Runs implicit single-statement transactions on `s` (history inserts, each committed and
/// flushed) until one fails: the disk is full from then on. Returns that error.
fn fill_the_disk(s: &mut Session) -> EngineError {
    for i in 0..100_000 {
        if let Err(e) = s.insert_history([1, 1, 1, i, 0]) {
            assert!(!s.in_transaction(), "the failed statement's transaction ended");
            return e;
        }
    }
    panic!("the WAL write limit was never reached");
}

/// The granted locks of backend `b` (main table and fast path, as `pg_locks` shows them).
fn held(e: &Engine, b: u32) -> Vec<String> {
    let rows = e.lmgr.lock_status().into_iter();
    rows.filter(|r| r.granted && r.backend == BackendId(b))
        .map(|r| format!("{:?} {:?}", r.tag, r.mode))
        .collect()
}

fn is_full_disk(e: &EngineError) -> bool {
    let m = e.to_string();
    m.contains("pg_wal/00000001") && m.contains("No space left on device") && !m.contains('\n')
}

/// The failing transaction holds a row lock another backend waits for: when its commit (or,
/// on the other path, its rollback) fails for the full disk, it still ends, so the waiter
/// wakes, and no lock is left behind. Before the fix the failed commit left the transaction
/// open with its xid lock held, and the waiter slept forever (`xact_lock_table_wait`).
#[test]
fn a_failed_commit_or_rollback_ends_the_transaction_and_wakes_its_waiter() {
    for (preset, end_by_commit) in [("pg17", true), ("pg96", false)] {
        let tmp = tempfile::tempdir().unwrap();
        let e = open_full_disk(tmp.path(), 3, preset);
        let mut holder = e.session(BackendId(0)).unwrap();
        holder.begin();
        assert!(holder.update_add(TableId::Branches, 1, 1, 5).unwrap());
        // The waiter, on its own thread: it queues behind the holder's xid.
        let (tx, rx) = channel();
        let ew = Arc::clone(&e);
        std::thread::spawn(move || {
            let mut w = ew.session(BackendId(1)).unwrap();
            w.begin();
            let r = w.update_add(TableId::Branches, 1, 1, 7);
            let ended = w.rollback();
            let _ = tx.send((r, ended, w.in_transaction()));
        });
        let queued =
            poll(|| e.lmgr.waiting_for(BackendId(1)).is_some_and(|w| w.0.kind == LockTagKind::Transaction));
        assert!(queued, "{preset}: the waiter never queued on the holder's xid");
        // Another backend fills the disk; its own failed transaction ended.
        let mut filler = e.session(BackendId(2)).unwrap();
        assert!(is_full_disk(&fill_the_disk(&mut filler)), "{preset}");
        // The holder ends: the commit or the rollback fails (the WAL is poisoned), and ends it.
        let r = if end_by_commit { holder.commit() } else { holder.rollback() };
        let err = r.expect_err("the WAL is full");
        assert!(matches!(err, EngineError::Wal(WalError::Poisoned(_))), "{preset}: {err}");
        assert!(is_full_disk(&err), "{preset}: the error repeats the first failure: {err}");
        assert!(!holder.in_transaction(), "{preset}: the failed end still ended the transaction");
        let (r, ended, open) = match rx.recv_timeout(BOUND) {
            Ok(x) => x,
            Err(RecvTimeoutError::Timeout) => {
                panic!("{preset}: the waiter still waits for the failed transaction")
            }
            Err(e) => panic!("{preset}: waiter thread: {e}"),
        };
        // The waiter woke and found the row free (the holder aborted); its own write then
        // failed on the full disk, and its rollback ended its transaction too.
        assert!(r.as_ref().is_err_and(is_full_disk), "{preset}: {r:?}");
        assert!(ended.is_err() && !open, "{preset}: {ended:?}");
        assert_eq!(e.lmgr.waiting_for(BackendId(1)), None);
        e.lmgr.check_invariants().unwrap();
        for b in 0..3 {
            let held = held(&e, b);
            assert!(held.is_empty(), "{preset}: backend {b} still holds {held:?}");
        }
    }
}

/// `pgbench -c 2 -t 300` on a disk that fills up during the run ends, with the WAL write
/// error naming the segment file in one line (the report's exit code 2), whatever client hit
/// it; so does a `-T` run. Before the fix the failing client's transaction stayed open and
/// the other client waited on its xid forever (the run hung, and `-T` could not stop it).
#[test]
fn a_full_disk_ends_a_two_client_run_with_one_line_naming_the_wal_file() {
    for (preset, duration) in [("pg17", None), ("pg96", None), ("pg14", Some(Duration::from_secs(600)))] {
        let tmp = tempfile::tempdir().unwrap();
        let e = open_full_disk(tmp.path(), 2, preset);
        let cfg = PgbenchConfig {
            scale: 1,
            fillfactor: 100,
            clients: 2,
            threads: 2,
            duration,
            transactions: if duration.is_none() { Some(300) } else { None },
            scripts: vec![Builtin::find("tpcb-like").unwrap().script()],
            progress: None,
            seed: 5,
            wait_sampling_hz: 0,
            engine: engine_cfg(2, preset),
            sim: Default::default(),
            protocol: Default::default(),
        };
        let (tx, rx) = channel();
        let er = Arc::clone(&e);
        std::thread::spawn(move || {
            let _ = tx.send(runner::run_on(&er, 0.0, &cfg, &|_| {}).map(|r| r.transactions));
        });
        let r = match rx.recv_timeout(BOUND) {
            Ok(r) => r,
            Err(_) => panic!("{preset} {duration:?}: the run never ended after the disk filled up"),
        };
        let err = r.expect_err("the disk fills up during the run");
        assert!(matches!(err, EngineError::Wal(WalError::Io { .. })), "{preset}: the first failure: {err}");
        assert!(is_full_disk(&err), "{preset}: {err}");
        assert!(err.to_string().starts_with("could not write "), "{preset}: {err}");
        e.lmgr.check_invariants().unwrap();
        for b in 0..2 {
            let held = held(&e, b);
            assert!(held.is_empty(), "{preset}: backend {b} still holds {held:?}");
        }
    }
}
