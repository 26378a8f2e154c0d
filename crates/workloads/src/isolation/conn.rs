//! One "connection": a backend of the lock manager plus the transaction-block state machine of
//! `xact.c` that the supported SQL needs (implicit transactions, explicit blocks, the aborted
//! state after an error, SET values rolled back on abort) and a tiny catalog of table names.

use lockstack_common::sync::{AtomicU32, Ordering};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lockstack_common::sync::Mutex;
use lockstack_lmgr::{Backend, LockError, LockOptions, LockTag, Oid};

use super::sql::{AdvisoryKey, AdvisoryOp, Call, Guc, Statement};

/// Table names → relation oids, shared by all connections of a run.
#[derive(Debug)]
pub(crate) struct Catalog {
    map: Mutex<HashMap<String, Oid>>,
    next: AtomicU32,
}

impl Catalog {
    pub(crate) fn new() -> Catalog {
        Catalog { map: Mutex::new(HashMap::new()), next: AtomicU32::new(Oid::FIRST_NORMAL.0) }
    }
}

/// A result set: column names and rows of text values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResultSet {
    pub(crate) columns: Vec<String>,
    pub(crate) rows: Vec<Vec<String>>,
}

impl ResultSet {
    /// libpq's `PQprint` with `header`, `align` and `fieldSep = "|"`, as the isolation tester
    /// (14+) prints result sets: names, dashes joined by `+`, values left-aligned unless every
    /// value of the column is numeric, then `(N row[s])` and an empty line.
    pub(crate) fn render(&self, out: &mut String) {
        let n = self.columns.len();
        let is_num = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c));
        let widths: Vec<usize> = (0..n)
            .map(|j| self.rows.iter().map(|r| r[j].len()).chain([self.columns[j].len()]).max().unwrap_or(0))
            .collect();
        let numeric: Vec<bool> =
            (0..n).map(|j| self.rows.iter().all(|r| r[j].is_empty() || is_num(&r[j]))).collect();
        let line = |cells: Vec<String>| cells.join("|");
        out.push_str(&line((0..n).map(|j| format!("{:<w$}", self.columns[j], w = widths[j])).collect()));
        out.push('\n');
        out.push_str(&(0..n).map(|j| "-".repeat(widths[j])).collect::<Vec<_>>().join("+"));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(
                (0..n)
                    .map(|j| {
                        if numeric[j] {
                            format!("{:>w$}", r[j], w = widths[j])
                        } else {
                            format!("{:<w$}", r[j], w = widths[j])
                        }
                    })
                    .collect(),
            ));
            out.push('\n');
        }
        let k = self.rows.len();
        out.push_str(&format!("({k} row{})\n\n", if k == 1 { "" } else { "s" }));
    }
}

/// What one query string produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QueryResult {
    /// One entry per statement executed: its result set, if it returns rows.
    pub(crate) sets: Vec<Option<ResultSet>>,
    /// The error that stopped the query (`ERROR:  ...` without the severity).
    pub(crate) error: Option<String>,
    /// Notices in arrival order, formatted as libpq does (`WARNING:  ...`).
    pub(crate) notices: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tx {
    Idle,
    Implicit,
    Block,
    Aborted,
}

/// A connection: one backend and its transaction state.
pub(crate) struct Conn {
    backend: Backend,
    catalog: Arc<Catalog>,
    tx: Tx,
    saved: Option<(Duration, Option<Duration>)>,
}

const ABORTED: &str = "current transaction is aborted, commands ignored until end of transaction block";

fn parse_duration(guc: Guc, v: &str) -> Result<Option<Duration>, String> {
    let bad = || format!("invalid value for parameter \"{}\": \"{v}\"", guc.name());
    let t = v.trim();
    if let Some(rest) = t.strip_prefix('-')
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(format!(
            "{t} is outside the valid range for parameter \"{}\" (0 .. 2147483647)",
            guc.name()
        ));
    }
    let digits: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let unit = t[digits.len()..].trim();
    let ms = match unit {
        "" | "ms" => Some(n),
        "us" => Some(n / 1000),
        "s" => n.checked_mul(1000),
        "min" => n.checked_mul(60_000),
        "h" => n.checked_mul(3_600_000),
        "d" => n.checked_mul(86_400_000),
        _ => return Err(bad()),
    }
    .filter(|ms| *ms <= i32::MAX as u64)
    .ok_or_else(|| {
        format!("{v} is outside the valid range for parameter \"{}\" (0 .. 2147483647)", guc.name())
    })?;
    match guc {
        Guc::DeadlockTimeout if ms == 0 => {
            Err("0 ms is outside the valid range for parameter \"deadlock_timeout\" (1 ms .. 2147483647 ms)"
                .into())
        }
        Guc::DeadlockTimeout => Ok(Some(Duration::from_millis(ms))),
        Guc::LockTimeout => Ok((ms > 0).then(|| Duration::from_millis(ms))),
    }
}

impl Conn {
    pub(crate) fn new(backend: Backend, catalog: Arc<Catalog>) -> Conn {
        Conn { backend, catalog, tx: Tx::Idle, saved: None }
    }

    /// The backend id (for the lock manager's blocking check).
    pub(crate) fn backend_id(&self) -> lockstack_lmgr::BackendId {
        self.backend.id()
    }

    fn gucs(&self) -> (Duration, Option<Duration>) {
        (self.backend.deadlock_timeout(), self.backend.lock_timeout())
    }

    fn restore(&mut self) {
        if let Some((d, l)) = self.saved.take() {
            self.backend.set_deadlock_timeout(d);
            self.backend.set_lock_timeout(l);
        }
    }

    fn ensure_xact(&mut self) {
        if self.tx == Tx::Idle {
            self.saved = Some(self.gucs());
            self.backend.start_transaction();
            self.tx = Tx::Implicit;
        }
    }

    /// `AbortTransaction` after an error: locks go at once; an explicit block stays open in
    /// the aborted state until COMMIT or ROLLBACK.
    fn abort(&mut self) {
        self.backend.end_transaction();
        self.restore();
        self.tx = if self.tx == Tx::Block { Tx::Aborted } else { Tx::Idle };
    }

    /// Runs a query string's statements in order, stopping at the first error.
    pub(crate) fn exec(&mut self, stmts: &[Statement]) -> QueryResult {
        let multi = stmts.len() > 1;
        let mut res = QueryResult::default();
        for st in stmts {
            if self.tx == Tx::Aborted && !matches!(st, Statement::Commit | Statement::Rollback) {
                res.error = Some(ABORTED.to_string());
                break;
            }
            match self.run_one(st, multi, &mut res.notices) {
                Ok(set) => res.sets.push(set),
                Err(msg) => {
                    res.error = Some(msg);
                    self.abort();
                    break;
                }
            }
        }
        if self.tx == Tx::Implicit {
            self.backend.end_transaction();
            self.saved = None;
            self.tx = Tx::Idle;
        }
        res
    }

    fn relation(&self, name: &str) -> Option<Oid> {
        self.catalog.map.lock().get(name).copied()
    }

    fn run_one(
        &mut self,
        st: &Statement,
        multi: bool,
        notices: &mut Vec<String>,
    ) -> Result<Option<ResultSet>, String> {
        let db = self.backend.lmgr().database();
        match st {
            Statement::Begin => match self.tx {
                Tx::Block => notices.push("WARNING:  there is already a transaction in progress".into()),
                Tx::Implicit => self.tx = Tx::Block,
                Tx::Idle => {
                    self.ensure_xact();
                    self.tx = Tx::Block;
                }
                Tx::Aborted => unreachable!("checked by exec"),
            },
            Statement::Commit | Statement::Rollback => match self.tx {
                Tx::Block => {
                    self.backend.end_transaction();
                    if matches!(st, Statement::Rollback) {
                        self.restore();
                    }
                    self.saved = None;
                    self.tx = Tx::Idle;
                }
                Tx::Aborted => {
                    self.saved = None;
                    self.tx = Tx::Idle;
                }
                Tx::Idle | Tx::Implicit => {
                    notices.push("WARNING:  there is no transaction in progress".into());
                }
            },
            Statement::Lock { tables, mode, nowait } => {
                if self.tx == Tx::Idle && !multi {
                    return Err("LOCK TABLE can only be used in transaction blocks".into());
                }
                self.ensure_xact();
                for t in tables {
                    let oid = self.relation(t).ok_or_else(|| format!("relation \"{t}\" does not exist"))?;
                    let opts = LockOptions { session: false, dont_wait: *nowait };
                    match self.backend.lock(LockTag::relation(db, oid), *mode, opts) {
                        Ok(_) => {}
                        Err(LockError::NotAvailable { .. }) => {
                            return Err(format!("could not obtain lock on relation \"{t}\""));
                        }
                        Err(e) => return Err(e.message()),
                    }
                }
            }
            Statement::Set { guc, value } => {
                let v = match value {
                    None => match guc {
                        Guc::DeadlockTimeout => Some(Duration::from_secs(1)),
                        Guc::LockTimeout => None,
                    },
                    Some(v) => parse_duration(*guc, v)?,
                };
                if self.tx != Tx::Idle && self.saved.is_none() {
                    self.saved = Some(self.gucs());
                }
                match guc {
                    Guc::DeadlockTimeout => {
                        self.backend.set_deadlock_timeout(v.unwrap_or(Duration::from_secs(1)))
                    }
                    Guc::LockTimeout => self.backend.set_lock_timeout(v),
                }
            }
            Statement::Select(calls) => {
                self.ensure_xact();
                let mut row = Vec::new();
                for (_, call) in calls {
                    row.push(self.call(call, db, notices)?);
                }
                return Ok(Some(ResultSet {
                    columns: calls.iter().map(|(c, _)| c.clone()).collect(),
                    rows: vec![row],
                }));
            }
            Statement::CreateTable(name) => {
                self.ensure_xact();
                let mut map = self.catalog.map.lock();
                if map.contains_key(name) {
                    return Err(format!("relation \"{name}\" already exists"));
                }
                let oid = Oid(self.catalog.next.fetch_add(1, Ordering::Relaxed));
                map.insert(name.clone(), oid);
            }
            Statement::DropTable { tables, if_exists } => {
                self.ensure_xact();
                for t in tables {
                    let Some(oid) = self.relation(t) else {
                        if *if_exists {
                            continue;
                        }
                        return Err(format!("table \"{t}\" does not exist"));
                    };
                    self.backend
                        .lock(
                            LockTag::relation(db, oid),
                            lockstack_lmgr::LockMode::AccessExclusive,
                            LockOptions::XACT,
                        )
                        .map_err(|e| e.message())?;
                    self.catalog.map.lock().remove(t);
                }
            }
        }
        Ok(None)
    }

    fn call(&mut self, call: &Call, db: Oid, notices: &mut Vec<String>) -> Result<String, String> {
        let (f, key) = match call {
            Call::UnlockAll => {
                self.backend.release_advisory_session_locks();
                return Ok(String::new());
            }
            Call::Advisory(f, key) => (*f, *key),
        };
        let tag = match key {
            AdvisoryKey::Int8(k) => LockTag::advisory_int8(db, k),
            AdvisoryKey::Int4(a, b) => LockTag::advisory_int4(db, a, b),
        };
        let mode = f.mode();
        match f.op {
            AdvisoryOp::Lock => {
                let opts = LockOptions { session: !f.xact, dont_wait: false };
                self.backend.lock(tag, mode, opts).map_err(|e| e.message())?;
                Ok(String::new())
            }
            AdvisoryOp::Try => {
                let got = self.backend.conditional_lock(tag, mode, !f.xact).map_err(|e| e.message())?;
                Ok(if got { "t" } else { "f" }.into())
            }
            AdvisoryOp::Unlock => {
                if self.backend.unlock(tag, mode, true) {
                    Ok("t".into())
                } else {
                    notices.push(format!("WARNING:  you don't own a lock of type {}", mode.name()));
                    Ok("f".into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_the_server_rules() {
        assert_eq!(parse_duration(Guc::LockTimeout, "10").unwrap(), Some(Duration::from_millis(10)));
        assert_eq!(parse_duration(Guc::LockTimeout, "2s").unwrap(), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration(Guc::LockTimeout, "0").unwrap(), None);
        assert_eq!(
            parse_duration(Guc::LockTimeout, "-1").unwrap_err(),
            "-1 is outside the valid range for parameter \"lock_timeout\" (0 .. 2147483647)"
        );
        assert!(parse_duration(Guc::DeadlockTimeout, "0").is_err());
        assert!(parse_duration(Guc::LockTimeout, "soon").unwrap_err().starts_with("invalid value"));
    }
}
