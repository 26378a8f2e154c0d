//! pgbench scripts with `SELECT ... FOR KEY SHARE` and `SELECT ... FOR NO KEY UPDATE` on
//! pgbench_accounts: both run, and two clients' key-share locks of one account never wait on
//! each other nor take a tuple lock (whatever the interleaving: a conflict would show as a lock
//! wait or as a main-table lock beyond each transaction's xid lock). Counts only, never
//! durations. The wait of `FOR NO KEY UPDATE` behind another is checked with a fixed
//! interleaving in crates/engine/tests/tuple_locks.rs.

use lockstack_engine::engine::EngineConfig;
use lockstack_engine::session::LockClauseStrength;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig, PgbenchResult};
use lockstack_workloads::pgbench::script::{Command, SqlCommand, parse_script};

const TXNS: u64 = 40;

/// A script that locks account 1 twice in the clause `clause`, then commits.
fn script(clause: &str) -> String {
    format!(
        "\\set aid 1\nBEGIN;\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid {clause};\n\
         SELECT aid, abalance FROM pgbench_accounts WHERE aid = :aid {clause};\nEND;\n"
    )
}

/// Runs `clause`'s script with `clients` clients of [`TXNS`] transactions each, after checking
/// that its `SELECT`s were read with strength `want`.
fn run(clause: &str, want: LockClauseStrength, clients: usize) -> PgbenchResult {
    let s = parse_script("key.sql", &script(clause)).unwrap_or_else(|e| panic!("{clause}: {e}"));
    let locks: Vec<LockClauseStrength> = s
        .commands
        .iter()
        .filter_map(|(_, c)| match c {
            Command::Sql { cmd: SqlCommand::Select { lock, .. }, .. } => Some(*lock),
            _ => None,
        })
        .collect();
    assert_eq!(locks, vec![want, want], "{clause}");
    let engine = EngineConfig::new(clients + 1, 4096);
    let cfg = PgbenchConfig { seed: 5, ..PgbenchConfig::new(vec![s], clients, TXNS, engine) };
    let r = runner::run(&cfg, &|_| {}).unwrap_or_else(|e| panic!("{clause}: {e}"));
    let total = TXNS * clients as u64;
    assert_eq!((r.transactions, r.failed), (total, 0), "{clause}");
    r
}

#[test]
fn key_share_and_no_key_update_scripts_run_and_key_sharers_never_wait() {
    let r = run("FOR KEY SHARE", LockClauseStrength::ForKeyShare, 2);
    let c = |path: &str| r.lock_stack.count(path);
    assert_eq!(c("lmgr.waits"), 0, "a FOR KEY SHARE waited for another");
    assert_eq!(
        c("lmgr.main_acquisitions_total"),
        2 * TXNS,
        "each transaction's xid lock and nothing else (no tuple lock): {:?}",
        r.lock_stack.counters.lmgr
    );
    let r = run("FOR NO KEY UPDATE", LockClauseStrength::ForNoKeyUpdate, 1);
    assert_eq!(r.lock_stack.count("procarray.xids_assigned"), TXNS, "a row lock assigns an xid");
    let r = run("FOR KEY SHARE NOWAIT", LockClauseStrength::ForKeyShare, 2);
    assert_eq!(r.lock_stack.count("lmgr.waits"), 0);
}
