//! One "connection": a [`Session`] of the engine (one backend: ProcArray, lock manager,
//! buffers, WAL) plus the transaction-block state machine of `xact.c` that the supported SQL
//! needs (implicit transactions, explicit blocks, the aborted state after an error, SET values
//! rolled back on abort). Tables are the engine's user tables
//! ([`lockstack_engine::usertable`]), shared by all connections of a run.

use std::time::Duration;

use lockstack_engine::error::EngineError;
use lockstack_engine::session::{RowChange, RowQuery, Session};
use lockstack_engine::usertable::{TableDef, Value, coerce};
use lockstack_lmgr::{LockError, LockOptions, LockTag, Oid};

use super::sql::{AdvisoryKey, AdvisoryOp, Call, Cond, Expr, Guc, Insert, Query, Statement, Update};
use super::statement_error::StatementError;

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
    /// An error inside a subtransaction: the innermost one was aborted; the block waits for
    /// `ROLLBACK TO` (or ends with `COMMIT` / `ROLLBACK`, which roll back).
    SubAborted,
}

/// A connection: one engine session and its transaction state.
pub(crate) struct Conn {
    session: Session,
    tx: Tx,
    /// `statement_timeout` (`None`: off). Departure: it bounds each lock wait of a statement
    /// (as the shorter of it and `lock_timeout`), not the statement's whole run time; the
    /// statements the runner supports spend their time, beyond microseconds, in lock waits.
    statement_timeout: Option<Duration>,
    /// The timeouts at the transaction's start, restored if it rolls back.
    saved: Option<Gucs>,
}

/// The connection's timeout settings: deadlock_timeout, lock_timeout, statement_timeout.
type Gucs = (Duration, Option<Duration>, Option<Duration>);

const LOCK_TIMEOUT: &str = "canceling statement due to lock timeout";

/// An engine error as the server reports it: the primary message only.
fn message(e: EngineError) -> StatementError {
    match e {
        EngineError::Lock(l) => StatementError::Lock(l),
        EngineError::Sql(m) => StatementError::Engine(m),
        other => StatementError::Engine(other.to_string()),
    }
}

const ABORTED: &str = "current transaction is aborted, commands ignored until end of transaction block";

fn parse_duration(guc: Guc, v: &str) -> Result<Option<Duration>, StatementError> {
    let bad = || StatementError::InvalidValue { parameter: guc.name(), value: v.to_string() };
    let t = v.trim();
    if let Some(rest) = t.strip_prefix('-')
        && rest.starts_with(|c: char| c.is_ascii_digit())
    {
        return Err(StatementError::OutOfRange { parameter: guc.name(), value: t.to_string() });
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
    .ok_or_else(|| StatementError::OutOfRange { parameter: guc.name(), value: v.to_string() })?;
    match guc {
        Guc::DeadlockTimeout if ms == 0 => Err(StatementError::ZeroDeadlockTimeout),
        Guc::DeadlockTimeout => Ok(Some(Duration::from_millis(ms))),
        Guc::LockTimeout | Guc::StatementTimeout => Ok((ms > 0).then(|| Duration::from_millis(ms))),
    }
}

impl Conn {
    pub(crate) fn new(session: Session) -> Conn {
        Conn { session, tx: Tx::Idle, statement_timeout: None, saved: None }
    }

    fn gucs(&mut self) -> Gucs {
        let st = self.statement_timeout;
        let b = self.session.lock_backend();
        (b.deadlock_timeout(), b.lock_timeout(), st)
    }

    fn restore(&mut self) {
        if let Some((d, l, st)) = self.saved.take() {
            let b = self.session.lock_backend();
            b.set_deadlock_timeout(d);
            b.set_lock_timeout(l);
            self.statement_timeout = st;
        }
    }

    /// Runs one statement with `statement_timeout` in force: each lock wait ends after the
    /// shorter of it and `lock_timeout`, and the message names the timer that fired (the
    /// lock timer on a tie, as PostgreSQL's `ProcessInterrupts` checks it first).
    fn run_timed(
        &mut self,
        st: &Statement,
        multi: bool,
        notices: &mut Vec<String>,
    ) -> Result<Option<ResultSet>, StatementError> {
        let lock = self.session.lock_backend().lock_timeout();
        let Some(stmt) = self.statement_timeout.filter(|s| lock.is_none_or(|l| *s < l)) else {
            return self.run_one(st, multi, notices);
        };
        self.session.lock_backend().set_lock_timeout(Some(stmt));
        let r = self.run_one(st, multi, notices);
        // A SET lock_timeout in this statement has replaced the value lent to the wait.
        if self.session.lock_backend().lock_timeout() == Some(stmt) {
            self.session.lock_backend().set_lock_timeout(lock);
        }
        match r {
            Err(m) if m.to_string() == LOCK_TIMEOUT => Err(StatementError::StatementTimeout),
            other => other,
        }
    }

    fn ensure_xact(&mut self) {
        if self.tx == Tx::Idle {
            self.saved = Some(self.gucs());
            self.session.begin();
            self.tx = Tx::Implicit;
        }
    }

    /// `AbortTransaction` after an error: locks go at once; an explicit block stays open in
    /// the aborted state until COMMIT or ROLLBACK.
    fn abort(&mut self) {
        if matches!(self.tx, Tx::Block | Tx::SubAborted) && self.session.subxact_depth() > 0 {
            // AbortSubTransaction: only the innermost subtransaction ends (its subxids
            // aborted, its locks released); the transaction and its savepoints stay.
            let _ = self.session.abort_innermost_subxact();
            self.tx = Tx::SubAborted;
            return;
        }
        // The transaction has ended whatever the rollback reports (rule: `rollback` always
        // ends it); the statement's own error is the one the client sees.
        let _ = self.session.rollback();
        self.restore();
        self.tx = if self.tx == Tx::Block { Tx::Aborted } else { Tx::Idle };
    }

    /// Runs a query string's statements in order, stopping at the first error.
    pub(crate) fn exec(&mut self, stmts: &[Statement]) -> QueryResult {
        let multi = stmts.len() > 1;
        let mut res = QueryResult::default();
        for st in stmts {
            let ends = matches!(st, Statement::Commit | Statement::Rollback | Statement::RollbackTo(_));
            if matches!(self.tx, Tx::Aborted | Tx::SubAborted) && !ends {
                res.error = Some(ABORTED.to_string());
                break;
            }
            match self.run_timed(st, multi, &mut res.notices) {
                Ok(set) => res.sets.push(set),
                Err(msg) => {
                    res.error = Some(msg.to_string());
                    self.abort();
                    break;
                }
            }
        }
        if self.tx == Tx::Implicit {
            self.saved = None;
            self.tx = Tx::Idle;
            if let Err(e) = self.session.commit() {
                res.error.get_or_insert(message(e).to_string());
            }
        }
        res
    }

    fn relation(&self, name: &str) -> Result<Oid, StatementError> {
        self.session.user_table_oid(name).map_err(message)
    }

    fn run_one(
        &mut self,
        st: &Statement,
        multi: bool,
        notices: &mut Vec<String>,
    ) -> Result<Option<ResultSet>, StatementError> {
        let db = self.session.engine().lmgr.database();
        match st {
            Statement::Begin { repeatable_read } => match self.tx {
                Tx::Block => notices.push("WARNING:  there is already a transaction in progress".into()),
                Tx::Implicit | Tx::Idle => {
                    self.ensure_xact();
                    if *repeatable_read {
                        self.session.set_repeatable_read();
                    }
                    self.tx = Tx::Block;
                }
                Tx::Aborted | Tx::SubAborted => unreachable!("checked by exec"),
            },
            Statement::Commit | Statement::Rollback => match self.tx {
                Tx::Block => {
                    self.saved_end(matches!(st, Statement::Rollback));
                    self.tx = Tx::Idle;
                    let r = if matches!(st, Statement::Rollback) {
                        self.session.rollback()
                    } else {
                        self.session.commit()
                    };
                    r.map_err(message)?;
                }
                Tx::Aborted => {
                    self.saved = None;
                    self.tx = Tx::Idle;
                }
                Tx::SubAborted => {
                    // COMMIT of a block in the aborted state rolls it back.
                    self.saved_end(true);
                    self.tx = Tx::Idle;
                    self.session.rollback().map_err(message)?;
                }
                Tx::Idle | Tx::Implicit => {
                    notices.push("WARNING:  there is no transaction in progress".into());
                }
            },
            Statement::Lock { tables, mode, nowait } => {
                if self.tx == Tx::Idle && !multi {
                    return Err(StatementError::OutsideBlock("LOCK TABLE"));
                }
                self.ensure_xact();
                for t in tables {
                    let oid = self.relation(t)?;
                    let opts = LockOptions { session: false, dont_wait: *nowait };
                    match self.session.lock_backend().lock(LockTag::relation(db, oid), *mode, opts) {
                        Ok(_) => {}
                        Err(LockError::NotAvailable { .. }) => {
                            return Err(StatementError::RelationNotAvailable(t.clone()));
                        }
                        Err(e) => return Err(StatementError::Lock(e)),
                    }
                }
            }
            Statement::Savepoint(name) => {
                if self.tx != Tx::Block {
                    return Err(StatementError::OutsideBlock("SAVEPOINT"));
                }
                self.session.savepoint(name).map_err(message)?;
            }
            Statement::RollbackTo(name) => match self.tx {
                Tx::Block | Tx::SubAborted => {
                    self.session.rollback_to_savepoint(name).map_err(message)?;
                    self.tx = Tx::Block;
                }
                // The whole transaction was rolled back by the error: no savepoint is left.
                Tx::Aborted => return Err(StatementError::NoSavepoint(name.clone())),
                Tx::Idle | Tx::Implicit => {
                    return Err(StatementError::OutsideBlock("ROLLBACK TO SAVEPOINT"));
                }
            },
            Statement::Release(name) => {
                if self.tx != Tx::Block {
                    return Err(StatementError::OutsideBlock("RELEASE SAVEPOINT"));
                }
                self.session.release_savepoint(name).map_err(message)?;
            }
            Statement::Set { .. } if self.session.subxact_depth() > 0 => {
                return Err(StatementError::InSubtransaction("SET"));
            }
            Statement::Set { guc, value } => {
                let v = match value {
                    None => match guc {
                        Guc::DeadlockTimeout => Some(Duration::from_secs(1)),
                        Guc::LockTimeout | Guc::StatementTimeout => None,
                    },
                    Some(v) => parse_duration(*guc, v)?,
                };
                if self.tx != Tx::Idle && self.saved.is_none() {
                    self.saved = Some(self.gucs());
                }
                let b = self.session.lock_backend();
                match guc {
                    Guc::DeadlockTimeout => b.set_deadlock_timeout(v.unwrap_or(Duration::from_secs(1))),
                    Guc::LockTimeout => b.set_lock_timeout(v),
                    Guc::StatementTimeout => self.statement_timeout = v,
                }
            }
            Statement::ShowSetting { name, compare } => {
                self.ensure_xact();
                let level =
                    if self.session.is_repeatable_read() { "repeatable read" } else { "read committed" };
                // The parser admits these two names only.
                let value = if name == "transaction_isolation" { level } else { "read committed" };
                let (column, v) = match compare {
                    None => ("current_setting".to_string(), value.to_string()),
                    Some((eq, text)) => {
                        let same = value == text;
                        ("?column?".to_string(), if same == *eq { "t" } else { "f" }.to_string())
                    }
                };
                return Ok(Some(ResultSet { columns: vec![column], rows: vec![vec![v]] }));
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
            Statement::CreateTable(_) | Statement::DropTable { .. } if self.session.subxact_depth() > 0 => {
                return Err(StatementError::InSubtransaction("CREATE or DROP TABLE"));
            }
            Statement::CreateTable(def) => {
                self.ensure_xact();
                self.session.create_table(def.clone()).map_err(message)?;
            }
            Statement::DropTable { tables, if_exists } => {
                self.ensure_xact();
                for t in tables {
                    self.session.drop_table(t, *if_exists).map_err(message)?;
                }
            }
            Statement::Insert(ins) => {
                self.ensure_xact();
                self.insert(ins)?;
            }
            Statement::Query(q) => {
                self.ensure_xact();
                return self.query(q, notices).map(Some);
            }
            Statement::Update(u) => {
                self.ensure_xact();
                self.update(u, db, notices)?;
            }
            Statement::Delete { table, filter } => {
                self.ensure_xact();
                let def = self.session.user_table_def(table).map_err(message)?;
                let mut f = Filter::new(&def, filter.as_ref(), db)?;
                let r = self.session.modify_rows(table, &mut |s, row| f.eval(s, row), RowChange::Delete);
                notices.append(&mut f.notices);
                r.map_err(message)?;
            }
        }
        Ok(None)
    }

    /// Forgets (commit) or restores (rollback) the SET values saved at the block's start.
    fn saved_end(&mut self, rollback: bool) {
        if rollback {
            self.restore();
        }
        self.saved = None;
    }

    fn insert(&mut self, ins: &Insert) -> Result<(), StatementError> {
        let def = self.session.user_table_def(&ins.table).map_err(message)?;
        let positions: Vec<usize> = match &ins.columns {
            None => (0..def.columns.len()).collect(),
            Some(cols) => cols
                .iter()
                .map(|c| {
                    def.column(c).ok_or_else(|| StatementError::NoColumnOfRelation {
                        column: c.clone(),
                        table: def.name.clone(),
                    })
                })
                .collect::<Result<_, _>>()?,
        };
        let mut rows = Vec::with_capacity(ins.rows.len());
        for r in &ins.rows {
            if r.len() > positions.len() {
                return Err(StatementError::TooManyExpressions);
            }
            let mut full: Vec<Option<Value>> = vec![None; def.columns.len()];
            for (v, &at) in r.iter().zip(&positions) {
                full[at] = v.clone();
            }
            rows.push(full);
        }
        self.session.insert_rows(&ins.table, rows).map_err(message)?;
        Ok(())
    }

    fn query(&mut self, q: &Query, notices: &mut Vec<String>) -> Result<ResultSet, StatementError> {
        let db = self.session.engine().lmgr.database();
        let def = self.session.user_table_def(&q.table).map_err(message)?;
        let col = |c: &str| def.column(c).ok_or_else(|| StatementError::NoColumn(c.to_string()));
        let out: Vec<usize> = match &q.columns {
            None => (0..def.columns.len()).collect(),
            Some(cs) => cs.iter().map(|c| col(c)).collect::<Result<_, _>>()?,
        };
        let mut filter = Filter::new(&def, q.filter.as_ref(), db)?;
        let rq = RowQuery {
            table: q.table.clone(),
            order_by: q.order_by.as_ref().map(|(c, d)| col(c).map(|i| (i, *d))).transpose()?,
            limit: q.limit,
            lock: q.lock,
        };
        let mut pred = |s: &mut Session, row: &[Value]| filter.eval(s, row);
        let rows = self.session.select_rows(&rq, &mut pred).map_err(message);
        notices.append(&mut filter.notices);
        let rows = rows?;
        Ok(ResultSet {
            columns: out.iter().map(|&i| def.columns[i].name.clone()).collect(),
            rows: rows.into_iter().map(|r| out.iter().map(|&i| r[i].to_text()).collect()).collect(),
        })
    }

    fn update(&mut self, u: &Update, db: Oid, notices: &mut Vec<String>) -> Result<(), StatementError> {
        let def = self.session.user_table_def(&u.table).map_err(message)?;
        let col = |c: &str| {
            def.column(c).ok_or_else(|| StatementError::NoColumnOfRelation {
                column: c.to_string(),
                table: def.name.clone(),
            })
        };
        let mut set = Vec::with_capacity(u.set.len());
        for (c, e) in &u.set {
            let e = match e {
                Expr::Column(src, d) => {
                    let i = def.column(src).ok_or_else(|| StatementError::NoColumn(src.clone()))?;
                    if *d != 0 && !def.columns[i].ty.is_integer() {
                        return Err(StatementError::TextPlusInteger(src.clone()));
                    }
                    SetExpr::Column(i, *d)
                }
                Expr::Default => SetExpr::Default,
                Expr::Const(v) => SetExpr::Const(v.clone()),
            };
            set.push((col(c)?, e));
        }
        let mut f = Filter::new(&def, u.filter.as_ref(), db)?;
        let newrow = |old: &[Value]| -> Result<Vec<Option<Value>>, EngineError> {
            let mut v: Vec<Option<Value>> = old.iter().cloned().map(Some).collect();
            for (i, e) in &set {
                v[*i] = match e {
                    SetExpr::Default => None,
                    SetExpr::Const(c) => Some(c.clone()),
                    SetExpr::Column(src, 0) => Some(old[*src].clone()),
                    SetExpr::Column(src, d) => Some(match &old[*src] {
                        Value::Int(x) => Value::Int(
                            x.checked_add(*d)
                                .ok_or_else(|| EngineError::Sql("integer out of range".into()))?,
                        ),
                        other => other.clone(),
                    }),
                };
            }
            Ok(v)
        };
        let r = self.session.modify_rows(&u.table, &mut |s, row| f.eval(s, row), RowChange::Update(&newrow));
        notices.append(&mut f.notices);
        r.map_err(message)?;
        Ok(())
    }

    fn call(&mut self, call: &Call, db: Oid, notices: &mut Vec<String>) -> Result<String, StatementError> {
        advisory_call(self.session.lock_backend(), call, db, notices)
    }
}

/// An advisory-lock function call on `b`: its result as text (void is the empty string).
fn advisory_call(
    b: &mut lockstack_lmgr::Backend,
    call: &Call,
    db: Oid,
    notices: &mut Vec<String>,
) -> Result<String, StatementError> {
    let (f, key) = match call {
        Call::UnlockAll => {
            b.release_advisory_session_locks();
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
            b.lock(tag, mode, opts).map_err(StatementError::Lock)?;
            Ok(String::new())
        }
        AdvisoryOp::Try => {
            let got = b.conditional_lock(tag, mode, !f.xact).map_err(StatementError::Lock)?;
            Ok(if got { "t" } else { "f" }.into())
        }
        AdvisoryOp::Unlock => {
            if b.unlock(tag, mode, true) {
                Ok("t".into())
            } else {
                notices.push(format!("WARNING:  you don't own a lock of type {}", mode.name()));
                Ok("f".into())
            }
        }
    }
}

/// The right-hand side of an assignment, resolved against the table.
enum SetExpr {
    /// A constant.
    Const(Value),
    /// `DEFAULT`.
    Default,
    /// Column (index) plus a constant.
    Column(usize, i64),
}

/// A WHERE clause resolved against a table: the column and its coerced constant, or an
/// advisory call made on each evaluation; the notices the calls raised.
/// A WHERE clause resolved against its table: its terms, each `column = constant` before
/// every call (PostgreSQL evaluates a comparison on the primary key as the index scan's
/// condition, so a function in the same WHERE runs only on the rows it selects; the calls
/// keep their written order), all of which a row must pass.
struct Filter {
    terms: Vec<ResolvedCond>,
    db: Oid,
    notices: Vec<String>,
}

enum ResolvedCond {
    Eq(usize, Value),
    Call(Call),
}

impl Filter {
    fn new(def: &TableDef, c: Option<&Cond>, db: Oid) -> Result<Filter, StatementError> {
        let written: &[Cond] = match c {
            None => &[],
            Some(Cond::And(terms)) => terms,
            Some(one) => std::slice::from_ref(one),
        };
        let (mut eqs, mut calls) = (Vec::new(), Vec::new());
        for t in written {
            match t {
                Cond::Eq(_, Value::Null) => return Err(StatementError::NullComparison),
                Cond::Eq(col, v) => {
                    let i = def.column(col).ok_or_else(|| StatementError::NoColumn(col.clone()))?;
                    eqs.push(ResolvedCond::Eq(i, coerce(&def.name, &def.columns[i], v.clone())?));
                }
                Cond::CallNotNull(call) => calls.push(ResolvedCond::Call(call.clone())),
                Cond::And(_) => unreachable!("the parser flattens AND into one list of terms"),
            }
        }
        eqs.append(&mut calls);
        Ok(Filter { terms: eqs, db, notices: Vec::new() })
    }

    fn eval(&mut self, s: &mut Session, row: &[Value]) -> Result<bool, EngineError> {
        for t in &self.terms {
            match t {
                ResolvedCond::Eq(i, v) => {
                    if row[*i] != *v {
                        return Ok(false);
                    }
                }
                ResolvedCond::Call(c) => {
                    advisory_call(s.lock_backend(), c, self.db, &mut self.notices)
                        .map_err(|e| EngineError::Sql(e.to_string()))?;
                }
            }
        }
        Ok(true)
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
            parse_duration(Guc::LockTimeout, "-1").unwrap_err().to_string(),
            "-1 is outside the valid range for parameter \"lock_timeout\" (0 .. 2147483647)"
        );
        assert!(parse_duration(Guc::DeadlockTimeout, "0").is_err());
        assert!(
            parse_duration(Guc::LockTimeout, "soon").unwrap_err().to_string().starts_with("invalid value")
        );
    }
}
