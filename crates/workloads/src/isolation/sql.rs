//! The SQL the isolation runner understands: transaction control, `LOCK TABLE`, the two lock
//! timeouts, the advisory-lock functions, and on the engine's user tables
//! (`lockstack_engine::usertable`) `CREATE TABLE` (int4/int8/serial/text columns, `PRIMARY
//! KEY`, `NOT NULL`, `DEFAULT` constants; `REFERENCES` is accepted and no foreign-key check is
//! run), `DROP TABLE`, `INSERT ... VALUES` of literal rows and `SELECT` with a row-locking
//! clause. Everything else is rejected before anything runs.

use lockstack_engine::session::{RowLockStrength, WaitPolicy};
use lockstack_engine::usertable::{ColumnDef, ColumnType, TableDef, Value};
use lockstack_lmgr::LockMode;

use super::SqlError;

#[path = "sql_lexer.rs"]
mod lexer;

pub use lexer::split_statements;
use lexer::{P, T, tokens};

#[path = "sql_locks.rs"]
mod locks;

pub use locks::{AdvisoryFn, AdvisoryKey, AdvisoryOp, Call};
use locks::{parse_call, parse_mode};

/// A timeout setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guc {
    /// `deadlock_timeout` (default 1 s).
    DeadlockTimeout,
    /// `lock_timeout` (default 0 = off).
    LockTimeout,
    /// `statement_timeout` (default 0 = off).
    StatementTimeout,
}

impl Guc {
    /// The parameter name.
    pub fn name(self) -> &'static str {
        match self {
            Guc::DeadlockTimeout => "deadlock_timeout",
            Guc::LockTimeout => "lock_timeout",
            Guc::StatementTimeout => "statement_timeout",
        }
    }
}

/// One parsed statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Statement {
    /// `BEGIN` / `START TRANSACTION`, READ COMMITTED or REPEATABLE READ (SERIALIZABLE and READ
    /// ONLY are refused as unsupported).
    Begin {
        /// `ISOLATION LEVEL REPEATABLE READ`: one snapshot for the whole transaction.
        repeatable_read: bool,
    },
    /// `COMMIT` / `END`.
    Commit,
    /// `ROLLBACK` / `ABORT`.
    Rollback,
    /// `SAVEPOINT name`: starts a subtransaction (the name folded to lower case unless quoted).
    Savepoint(String),
    /// `ROLLBACK [TRANSACTION | WORK] TO [SAVEPOINT] name`.
    RollbackTo(String),
    /// `RELEASE [SAVEPOINT] name`.
    Release(String),
    /// `LOCK [TABLE] names [IN mode MODE] [NOWAIT]` (default AccessExclusive).
    Lock {
        /// Relation names, folded to lower case unless quoted.
        tables: Vec<String>,
        /// The mode.
        mode: LockMode,
        /// NOWAIT.
        nowait: bool,
    },
    /// `SET name = value` (`None` value: DEFAULT) or `RESET name`.
    Set {
        /// Which parameter.
        guc: Guc,
        /// The value as written (milliseconds unless it has a unit), `None` for the default.
        value: Option<String>,
    },
    /// `SELECT f(...)[, ...]` over the advisory-lock functions.
    Select(Vec<(String, Call)>),
    /// `SELECT current_setting('name') [= | <> | != 'text']`: the setting's value, or whether
    /// it equals (`true`) or differs from (`false`) the text.
    ShowSetting {
        /// The parameter name, lower case.
        name: String,
        /// The comparison: `true` for `=`, `false` for `<>`, and the text compared with.
        compare: Option<(bool, String)>,
    },
    /// `CREATE TABLE name (...)`: the definition (a `REFERENCES` clause is accepted and not
    /// kept: no foreign-key check is run).
    CreateTable(TableDef),
    /// `INSERT INTO name [(cols)] VALUES (...), ...`.
    Insert(Insert),
    /// `SELECT * | cols FROM name ...`.
    Query(Query),
    /// `UPDATE name SET col = expr, ... [WHERE ...]`.
    Update(Update),
    /// `DELETE FROM name [WHERE ...]`.
    Delete {
        /// Table name.
        table: String,
        /// The WHERE clause.
        filter: Option<Cond>,
    },
    /// `DROP TABLE [IF EXISTS] names`.
    DropTable {
        /// Relation names.
        tables: Vec<String>,
        /// IF EXISTS.
        if_exists: bool,
    },
}

/// `INSERT INTO table [(cols)] VALUES (...), ...` of literal rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Insert {
    /// Table name.
    pub table: String,
    /// The column list, if given.
    pub columns: Option<Vec<String>>,
    /// Rows of values; `None` is `DEFAULT`.
    pub rows: Vec<Vec<Option<Value>>>,
}

/// A WHERE clause: `col = const`, or `f(...) IS NOT NULL` over an advisory-lock function,
/// which is called once per row it is evaluated on (a row-locking query re-evaluates it on a
/// newer version of a row it waited for), or a conjunction of those (`... AND ...`; `OR` is
/// unsupported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// `col = const`.
    Eq(String, Value),
    /// `f(...) IS NOT NULL` (always true once the call returns).
    CallNotNull(Call),
    /// `a AND b [AND ...]`: at least two terms, none itself an `And`, in the order written.
    And(Vec<Cond>),
}

/// The right-hand side of `SET col = ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    /// A constant.
    Const(Value),
    /// `DEFAULT`.
    Default,
    /// A column of the row, plus a constant (`col`, `col + n`, `col - n`).
    Column(String, i64),
}

/// `UPDATE table SET col = expr [, ...] [WHERE ...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Table name.
    pub table: String,
    /// The assignments.
    pub set: Vec<(String, Expr)>,
    /// The WHERE clause.
    pub filter: Option<Cond>,
}

/// `SELECT * | cols FROM table [WHERE col = const] [ORDER BY col [ASC|DESC]] [LIMIT n]
/// [FOR strength [NOWAIT | SKIP LOCKED]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Table name.
    pub table: String,
    /// Output columns (`None`: `*`).
    pub columns: Option<Vec<String>>,
    /// The WHERE clause.
    pub filter: Option<Cond>,
    /// `ORDER BY col` and whether `DESC`.
    pub order_by: Option<(String, bool)>,
    /// `LIMIT n`.
    pub limit: Option<u64>,
    /// The row-locking clause.
    pub lock: Option<(RowLockStrength, WaitPolicy)>,
}

/// A literal: an integer (optionally negative), a quoted string, or NULL.
fn literal(p: &mut P) -> Result<Value, SqlError> {
    if p.eat("null") {
        return Ok(Value::Null);
    }
    if let Some(T::Str(s)) = p.t.get(p.i).cloned() {
        p.i += 1;
        return Ok(Value::Text(s));
    }
    p.int().map(Value::Int).map_err(|_| SqlError::Expected("a constant (integer, 'string' or NULL)"))
}

/// One column definition or table constraint of `CREATE TABLE`, added to `def`.
fn column_def(p: &mut P, def: &mut TableDef) -> Result<(), SqlError> {
    if p.eat("primary") {
        if !p.eat("key") || !p.eat_p('(') {
            return Err(SqlError::Expected("PRIMARY KEY (column)"));
        }
        let c = p.name()?;
        if !p.eat_p(')') {
            return Err(SqlError::Unsupported("a primary key of more than one column"));
        }
        let k = def.column(&c).ok_or_else(|| SqlError::KeyColumnMissing(c.clone()))?;
        if def.primary_key.replace(k).is_some() {
            return Err(SqlError::MultiplePrimaryKeys(def.name.clone()));
        }
        def.columns[k].not_null = true;
        return Ok(());
    }
    if p.eat("foreign") {
        // Accepted without a foreign-key check (the runner does not model RI triggers).
        if !p.eat("key") || !p.eat_p('(') {
            return Err(SqlError::Expected("FOREIGN KEY (column)"));
        }
        let c = p.name()?;
        def.column(&c).ok_or_else(|| SqlError::ForeignKeyColumnMissing(c.clone()))?;
        if !p.eat_p(')') || !p.eat("references") {
            return Err(SqlError::Unsupported("a foreign key of more than one column"));
        }
        p.name()?;
        if p.eat_p('(') {
            p.name()?;
            if !p.eat_p(')') {
                return Err(SqlError::Expected(") after REFERENCES table (column"));
            }
        }
        return Ok(());
    }
    let name = p.name()?;
    let tname = p.word().ok_or_else(|| SqlError::ExpectedColumnType(name.clone()))?.to_string();
    p.i += 1;
    let (ty, serial) = match tname.as_str() {
        "int" | "integer" | "int4" => (ColumnType::Int4, false),
        "int8" | "bigint" => (ColumnType::Int8, false),
        "serial" | "serial4" => (ColumnType::Int4, true),
        "bigserial" | "serial8" => (ColumnType::Int8, true),
        "text" => (ColumnType::Text, false),
        "numeric" | "decimal" if p.t.get(p.i) != Some(&T::P('(')) => (ColumnType::Numeric, false),
        _ => {
            return Err(SqlError::UnsupportedColumnType(tname));
        }
    };
    let mut c = ColumnDef { name, ty, default: None, serial, not_null: serial };
    loop {
        if p.eat("primary") {
            if !p.eat("key") {
                return Err(SqlError::Expected("KEY after PRIMARY"));
            }
            if def.primary_key.replace(def.columns.len()).is_some() {
                return Err(SqlError::MultiplePrimaryKeys(def.name.clone()));
            }
            c.not_null = true;
        } else if p.eat("not") {
            if !p.eat("null") {
                return Err(SqlError::Expected("NULL after NOT"));
            }
            c.not_null = true;
        } else if p.eat("null") {
        } else if p.eat("default") {
            c.default = Some(literal(p)?);
        } else if p.eat("references") {
            // Accepted without a foreign-key check (the runner does not model RI triggers).
            p.name()?;
            if p.eat_p('(') {
                p.name()?;
                if !p.eat_p(')') {
                    return Err(SqlError::Expected(") after REFERENCES table (column"));
                }
            }
        } else {
            break;
        }
    }
    def.columns.push(c);
    Ok(())
}

fn parse_create(p: &mut P) -> Result<TableDef, SqlError> {
    let name = p.name()?;
    if !p.eat_p('(') {
        return Err(SqlError::Expected("( after CREATE TABLE name"));
    }
    let mut def = TableDef { name, columns: Vec::new(), primary_key: None };
    // A table without columns is valid SQL (PostgreSQL 9.4+).
    if p.eat_p(')') {
        return Ok(def);
    }
    loop {
        column_def(p, &mut def)?;
        if p.eat_p(')') {
            break;
        }
        if !p.eat_p(',') {
            return Err(SqlError::Unsupported(
                "column constraint or option in CREATE TABLE (expected , or ))",
            ));
        }
    }
    Ok(def)
}

fn parse_insert(p: &mut P) -> Result<Insert, SqlError> {
    if !p.eat("into") {
        return Err(SqlError::Expected("INTO after INSERT"));
    }
    let table = p.name()?;
    let columns = if p.eat_p('(') {
        let c = p.names()?;
        if !p.eat_p(')') {
            return Err(SqlError::Expected(") after the column list"));
        }
        Some(c)
    } else {
        None
    };
    if !p.eat("values") {
        return Err(SqlError::Unsupported("INSERT without VALUES"));
    }
    let mut rows = Vec::new();
    loop {
        if !p.eat_p('(') {
            return Err(SqlError::Expected("( before a row of VALUES"));
        }
        let mut row = Vec::new();
        loop {
            row.push(if p.eat("default") { None } else { Some(literal(p)?) });
            if p.eat_p(')') {
                break;
            }
            if !p.eat_p(',') {
                return Err(SqlError::Unsupported("VALUES other than constants"));
            }
        }
        rows.push(row);
        if !p.eat_p(',') {
            break;
        }
    }
    Ok(Insert { table, columns, rows })
}

/// A WHERE clause ([`Cond`]): terms joined by `AND`.
fn cond(p: &mut P) -> Result<Cond, SqlError> {
    let mut terms = vec![term(p)?];
    while p.eat("and") {
        terms.push(term(p)?);
    }
    if p.word() == Some("or") {
        return Err(SqlError::Unsupported("OR in WHERE"));
    }
    Ok(if terms.len() == 1 { terms.remove(0) } else { Cond::And(terms) })
}

/// One term of a WHERE clause: `col = const` or `f(...) IS NOT NULL`.
fn term(p: &mut P) -> Result<Cond, SqlError> {
    if matches!(p.t.get(p.i + 1), Some(T::P('('))) {
        let call = parse_call(p)?;
        if !(p.eat("is") && p.eat("not") && p.eat("null")) {
            return Err(SqlError::Unsupported("a function in WHERE other than f(...) IS NOT NULL"));
        }
        return Ok(Cond::CallNotNull(call));
    }
    let c = p.name()?;
    if !p.eat_p('=') {
        return Err(SqlError::Unsupported("WHERE other than column = constant"));
    }
    let v = literal(p)?;
    Ok(Cond::Eq(c, v))
}

fn parse_update(p: &mut P) -> Result<Update, SqlError> {
    let table = p.name()?;
    if !p.eat("set") {
        return Err(SqlError::Expected("SET"));
    }
    let mut set = Vec::new();
    loop {
        let c = p.name()?;
        if !p.eat_p('=') {
            return Err(SqlError::Expected("= in SET"));
        }
        let e = if p.eat("default") {
            Expr::Default
        } else if matches!(p.t.get(p.i), Some(T::Word(w)) if w != "null") {
            let src = p.name()?;
            let delta = if p.eat_p('+') {
                p.int()?
            } else if p.eat_p('-') {
                p.int()?.checked_neg().ok_or(SqlError::NegatedIntegerOutOfRange)?
            } else {
                0
            };
            Expr::Column(src, delta)
        } else {
            Expr::Const(literal(p)?)
        };
        set.push((c, e));
        if !p.eat_p(',') {
            break;
        }
    }
    let filter = if p.eat("where") { Some(cond(p)?) } else { None };
    Ok(Update { table, set, filter })
}

/// The rest of `SELECT` after the keyword, for a query with `FROM`.
fn parse_query(p: &mut P) -> Result<Query, SqlError> {
    let columns = if p.eat_p('*') { None } else { Some(p.names()?) };
    if !p.eat("from") {
        return Err(SqlError::Expected("FROM"));
    }
    let table = p.name()?;
    let mut q = Query { table, columns, filter: None, order_by: None, limit: None, lock: None };
    if p.eat("where") {
        q.filter = Some(cond(p)?);
    }
    loop {
        if p.eat("order") {
            if !p.eat("by") {
                return Err(SqlError::Expected("BY after ORDER"));
            }
            let c = p.name()?;
            let desc = p.eat("desc");
            if !desc {
                p.eat("asc");
            }
            q.order_by = Some((c, desc));
        } else if p.eat("limit") {
            let n = p.int()?;
            q.limit = Some(u64::try_from(n).map_err(|_| SqlError::NegativeLimit)?);
        } else if p.eat("for") {
            let strength = if p.eat("update") {
                RowLockStrength::Update
            } else if p.eat("share") {
                RowLockStrength::Share
            } else if p.eat("no") && p.eat("key") && p.eat("update") {
                RowLockStrength::NoKeyUpdate
            } else if p.eat("key") && p.eat("share") {
                RowLockStrength::KeyShare
            } else {
                return Err(SqlError::Expected("UPDATE, NO KEY UPDATE, SHARE or KEY SHARE after FOR"));
            };
            if p.eat("of") {
                return Err(SqlError::Unsupported("FOR ... OF"));
            }
            let wait = if p.eat("nowait") {
                WaitPolicy::Error
            } else if p.eat("skip") {
                if !p.eat("locked") {
                    return Err(SqlError::Expected("LOCKED after SKIP"));
                }
                WaitPolicy::Skip
            } else {
                WaitPolicy::Block
            };
            if q.lock.replace((strength, wait)).is_some() {
                return Err(SqlError::Unsupported("more than one locking clause"));
            }
        } else {
            return Ok(q);
        }
    }
}

/// The transaction modes of `BEGIN` / `START TRANSACTION` (`xact.c`, PostgreSQL 15):
/// `ISOLATION LEVEL READ COMMITTED` (and `READ UNCOMMITTED`, which PostgreSQL runs as READ
/// COMMITTED), `ISOLATION LEVEL REPEATABLE READ`, `READ WRITE`, `[NOT] DEFERRABLE` (which has
/// no effect unless the transaction is SERIALIZABLE and READ ONLY), separated by blanks or
/// commas; returns whether the level is REPEATABLE READ. SERIALIZABLE (predicate locks) and
/// READ ONLY change what a transaction may do, which the runner does not implement: they are
/// refused, never run as another level.
fn transaction_modes(p: &mut P) -> Result<bool, SqlError> {
    let mut first = true;
    let mut repeatable_read = false;
    loop {
        if !first {
            p.eat_p(',');
        }
        first = false;
        if p.eat("isolation") {
            if !p.eat("level") {
                return Err(SqlError::Expected("LEVEL after ISOLATION"));
            }
            if p.eat("read") && (p.eat("committed") || p.eat("uncommitted")) {
                repeatable_read = false;
                continue;
            }
            if p.eat("repeatable") && p.eat("read") {
                repeatable_read = true;
                continue;
            }
            if p.eat("serializable") {
                return Err(SqlError::Unsupported(
                    "ISOLATION LEVEL SERIALIZABLE (READ COMMITTED and REPEATABLE READ are implemented)",
                ));
            }
            return Err(SqlError::Expected("an isolation level after ISOLATION LEVEL"));
        } else if p.eat("read") {
            if p.eat("write") {
                continue;
            }
            if p.eat("only") {
                return Err(SqlError::Unsupported("READ ONLY transactions"));
            }
            return Err(SqlError::Expected("READ WRITE or READ ONLY"));
        } else if p.eat("not") {
            if !p.eat("deferrable") {
                return Err(SqlError::Expected("DEFERRABLE after NOT"));
            }
        } else if !p.eat("deferrable") {
            return Ok(repeatable_read);
        }
    }
}

/// Parses one statement (no trailing semicolon).
///
/// # Errors
/// A [`SqlError`]: what is not supported or malformed, displayed on one line.
pub fn parse_statement(sql: &str) -> Result<Statement, SqlError> {
    // Messages quote the statement on one line, whatever its line breaks.
    let sql = &sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut p =
        P { t: tokens(sql).map_err(|e| SqlError::Lexical { error: Box::new(e), sql: sql.clone() })?, i: 0 };
    let first = p.word().ok_or_else(|| SqlError::UnsupportedSql(sql.clone()))?.to_string();
    p.i += 1;
    let st = match first.as_str() {
        "begin" | "start" => {
            if first == "start" && !p.eat("transaction") {
                return Err(SqlError::UnsupportedSql(sql.clone()));
            }
            if first == "begin" {
                let _ = p.eat("transaction") || p.eat("work");
            }
            Statement::Begin { repeatable_read: transaction_modes(&mut p)? }
        }
        "commit" | "end" => {
            let _ = p.eat("transaction") || p.eat("work");
            Statement::Commit
        }
        "rollback" | "abort" => {
            let _ = p.eat("transaction") || p.eat("work");
            if first == "rollback" && p.eat("to") {
                p.eat("savepoint");
                Statement::RollbackTo(p.name().map_err(|_| SqlError::ExpectedSavepointName(sql.clone()))?)
            } else {
                Statement::Rollback
            }
        }
        "savepoint" => {
            Statement::Savepoint(p.name().map_err(|_| SqlError::ExpectedSavepointName(sql.clone()))?)
        }
        "release" => {
            p.eat("savepoint");
            Statement::Release(p.name().map_err(|_| SqlError::ExpectedSavepointName(sql.clone()))?)
        }
        "lock" => {
            p.eat("table");
            let tables = p.names()?;
            let mode = if p.eat("in") { parse_mode(&mut p)? } else { LockMode::AccessExclusive };
            let nowait = p.eat("nowait");
            Statement::Lock { tables, mode, nowait }
        }
        "set" | "reset" => {
            if first == "set" {
                if p.eat("local") {
                    // SET LOCAL reverts at the end of the transaction; the connection keeps
                    // one saved value per transaction for SET only.
                    return Err(SqlError::SetLocal(sql.clone()));
                }
                if p.eat("transaction") || (p.eat("session") && p.word() == Some("characteristics")) {
                    return Err(SqlError::SetTransaction(sql.clone()));
                }
            }
            let name = p.word().ok_or_else(|| SqlError::UnsupportedSql(sql.clone()))?.to_string();
            p.i += 1;
            let guc = match name.as_str() {
                "deadlock_timeout" => Guc::DeadlockTimeout,
                "lock_timeout" => Guc::LockTimeout,
                "statement_timeout" => Guc::StatementTimeout,
                _ => {
                    return Err(SqlError::UnsupportedParameter(name));
                }
            };
            let value = if first == "reset" {
                None
            } else {
                if !(p.eat_p('=') || p.eat("to")) {
                    return Err(SqlError::ExpectedSetSeparator(name));
                }
                // A negative number is valid syntax; the range check is the server's (an ERROR
                // when the step runs, not a bad spec).
                let sign = if p.eat_p('-') { "-" } else { "" };
                match p.t.get(p.i).cloned() {
                    Some(T::Word(w)) if w == "default" => {
                        p.i += 1;
                        None
                    }
                    Some(T::Str(s)) => {
                        p.i += 1;
                        Some(s)
                    }
                    Some(T::Num(n)) => {
                        p.i += 1;
                        match p.word().map(str::to_string) {
                            Some(u) => {
                                p.i += 1;
                                Some(format!("{sign}{n}{u}"))
                            }
                            None => Some(format!("{sign}{n}")),
                        }
                    }
                    _ => return Err(SqlError::ExpectedSetValue(name)),
                }
            };
            Statement::Set { guc, value }
        }
        "insert" => Statement::Insert(parse_insert(&mut p).map_err(|e| e.in_statement(sql))?),
        "update" => Statement::Update(parse_update(&mut p).map_err(|e| e.in_statement(sql))?),
        "delete" => {
            if !p.eat("from") {
                return Err(SqlError::UnsupportedSql(sql.clone()));
            }
            let table = p.name()?;
            let filter =
                if p.eat("where") { Some(cond(&mut p).map_err(|e| e.in_statement(sql))?) } else { None };
            Statement::Delete { table, filter }
        }
        "select" if p.t.get(p.i) == Some(&T::P('*')) || p.t.iter().any(|t| *t == T::Word("from".into())) => {
            Statement::Query(parse_query(&mut p).map_err(|e| e.in_statement(sql))?)
        }
        "select" if p.word() == Some("current_setting") => {
            p.i += 1;
            let name = match (p.eat_p('('), p.t.get(p.i).cloned()) {
                (true, Some(T::Str(n))) => {
                    p.i += 1;
                    n.to_ascii_lowercase()
                }
                _ => return Err(SqlError::ExpectedSettingName(sql.clone())),
            };
            if !p.eat_p(')') {
                return Err(SqlError::ExpectedSettingClose(sql.clone()));
            }
            if !matches!(name.as_str(), "default_transaction_isolation" | "transaction_isolation") {
                return Err(SqlError::UnsupportedSetting { name, sql: sql.clone() });
            }
            let compare = if p.eat_p('=') || p.eat_p('!') {
                let eq = p.t.get(p.i - 1) == Some(&T::P('='));
                match p.t.get(p.i).cloned() {
                    Some(T::Str(v)) => {
                        p.i += 1;
                        Some((eq, v))
                    }
                    _ => {
                        return Err(SqlError::NonStringSettingComparison(sql.clone()));
                    }
                }
            } else {
                None
            };
            Statement::ShowSetting { name, compare }
        }
        "select" => {
            let mut calls = Vec::new();
            loop {
                let f = p.word().ok_or_else(|| SqlError::UnsupportedSql(sql.clone()))?.to_string();
                let call = parse_call(&mut p).map_err(|e| match e {
                    SqlError::UnsupportedFunction(_) => e.in_statement(sql),
                    e => e,
                })?;
                let col = if p.eat("as") { p.name()? } else { f };
                calls.push((col, call));
                if !p.eat_p(',') {
                    break;
                }
            }
            Statement::Select(calls)
        }
        "create" => {
            if !p.eat("table") {
                return Err(SqlError::UnsupportedSql(sql.clone()));
            }
            Statement::CreateTable(parse_create(&mut p).map_err(|e| e.in_statement(sql))?)
        }
        "drop" => {
            if !p.eat("table") {
                return Err(SqlError::UnsupportedSql(sql.clone()));
            }
            let if_exists = p.eat("if") && p.eat("exists");
            Statement::DropTable { tables: p.names()?, if_exists }
        }
        _ => return Err(SqlError::UnsupportedSql(sql.clone())),
    };
    if !p.done() {
        return Err(SqlError::TrailingText(sql.clone()));
    }
    Ok(st)
}

/// Parses a whole block into statements.
///
/// # Errors
/// The first statement's error.
pub fn parse_block(sql: &str) -> Result<Vec<Statement>, SqlError> {
    split_statements(sql).iter().map(|s| parse_statement(s)).collect()
}

#[cfg(test)]
#[path = "sql_tests.rs"]
mod tests;
