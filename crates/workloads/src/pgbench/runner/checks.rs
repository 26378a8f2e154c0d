//! The consistency checks after a run: the pgbench tables' row counts, one live version per
//! key, and the balance invariants of the built-in scripts. Reads the tables through a
//! session (its snapshot and buffer share locks); takes no lock of its own.

use lockstack_engine::engine::EngineError;
use lockstack_engine::session::Session;

use super::{Check, PgbenchConfig};
use crate::pgbench::script::Table;

/// The order of [`sums`]'s entries: the three balance tables as the checks name them, then history.
pub(super) const SUM_ORDER: [Table; 4] = [Table::Accounts, Table::Tellers, Table::Branches, Table::History];

pub(super) fn sums(s: &mut Session) -> Result<[(u64, i64, usize); 4], EngineError> {
    let mut out = [(0, 0, 0); 4];
    for (i, t) in SUM_ORDER.into_iter().enumerate() {
        let x = s.table_sums(t.rel())?;
        out[i] = (x.rows, x.balance, x.duplicate_keys.len());
    }
    Ok(out)
}

pub(super) fn consistency_checks(
    cfg: &PgbenchConfig,
    before: &[(u64, i64, usize); 4],
    after: &[(u64, i64, usize); 4],
) -> Vec<Check> {
    let mut checks = Vec::new();
    let names = ["pgbench_accounts", "pgbench_tellers", "pgbench_branches"];
    // pgbench's row counts per unit of scale (naccounts, ntellers, nbranches in pgbench.c):
    // scripts here never insert into or delete from these tables, so a run must end with
    // exactly the loaded rows, whatever the directory held before it (a directory that lost
    // rows fails here rather than being compared with itself).
    let per_scale = [100_000u64, 10, 1];
    for i in 0..3 {
        let expected = per_scale[i] * cfg.scale.max(0) as u64;
        let ok = after[i].2 == 0 && after[i].0 == expected;
        checks.push(Check {
            name: format!("{}: exactly one live version per key", names[i]),
            ok,
            detail: format!(
                "{} live rows (expected {expected}), {} keys with more than one",
                after[i].0, after[i].2
            ),
        });
    }
    let d = |i: usize| after[i].1 - before[i].1;
    let hist = d(3);
    let kinds: Vec<&str> = cfg.scripts.iter().map(|s| s.name.as_str()).collect();
    let only = |n: &str| kinds.iter().all(|k| *k == n);
    if only("<builtin: TPC-B (sort of)>") {
        for (i, name) in names.iter().enumerate() {
            checks.push(Check {
                name: format!("tpcb-like: {name} balance change = history delta sum"),
                ok: d(i) == hist,
                detail: format!("{} vs {hist}", d(i)),
            });
        }
    } else if only("<builtin: simple update>") {
        checks.push(Check {
            name: "simple-update: account balance change = history delta sum".into(),
            ok: d(0) == hist,
            detail: format!("{} vs {hist}", d(0)),
        });
    } else if only("<builtin: select only>") {
        let same = (0..4).all(|i| before[i] == after[i]);
        checks.push(Check {
            name: "select-only: nothing changed".into(),
            ok: same,
            detail: format!("{before:?} -> {after:?}"),
        });
    }
    checks
}
