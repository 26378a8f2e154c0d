//! pgbench scripts: the three built-ins and custom files in pgbench's script language.
//!
//! A script is a list of commands, one per line for meta-commands (`\set`, `\sleep`) and
//! `;`-terminated SQL otherwise, as `src/bin/pgbench/pgbench.c` (`ParseScript`, PostgreSQL 15)
//! reads them. SQL is parsed with the sqlparser crate and must be one of the statements the
//! engine runs against pgbench's tables by key:
//!
//! * `BEGIN` / `START TRANSACTION`, `END` / `COMMIT`, `ROLLBACK` / `ABORT`;
//! * `SELECT col[, col] FROM t WHERE key = expr [FOR UPDATE | FOR NO KEY UPDATE | FOR SHARE |
//!   FOR KEY SHARE [OF t] [NOWAIT | SKIP LOCKED]]` (one locking clause; the four strengths of
//!   PostgreSQL 9.3+);
//! * `UPDATE t SET col = col + expr WHERE key = expr` (or `col - expr`);
//! * `INSERT INTO pgbench_history (cols) VALUES (...)`.
//!
//! `:name` in SQL is replaced by the variable's value when the command runs (pgbench's simple
//! query mode does this textually; we bind the value, which gives the same result). Anything
//! else is an error `FILE:LINE: unsupported statement: ...`.

use sqlparser::ast::{self, SetExpr, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use lockstack_engine::session::{LockClauseStrength, WaitPolicy};
use lockstack_engine::tables::TableId;

use super::expr::{self, Expr};

mod error;
pub use error::{BuiltinError, ScriptError, ScriptErrorKind};

/// pgbench's four tables, as its scripts name them; each maps onto a relation of the
/// engine's catalog ([`Table::rel`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// `pgbench_accounts` (aid, bid, abalance, filler).
    Accounts,
    /// `pgbench_tellers` (tid, bid, tbalance, filler).
    Tellers,
    /// `pgbench_branches` (bid, bbalance, filler).
    Branches,
    /// `pgbench_history` (tid, bid, aid, delta, mtime, filler).
    History,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 4] = [Table::Branches, Table::Tellers, Table::Accounts, Table::History];

    /// The engine relation this table is stored as.
    pub fn rel(self) -> TableId {
        match self {
            Table::Accounts => TableId::Accounts,
            Table::Tellers => TableId::Tellers,
            Table::Branches => TableId::Branches,
            Table::History => TableId::History,
        }
    }

    /// The SQL name (the relation's name).
    pub fn name(self) -> &'static str {
        self.rel().name()
    }

    /// Looks a table up by SQL name (case-insensitive).
    pub fn from_name(s: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name().eq_ignore_ascii_case(s))
    }

    /// The key column (`None` for history, which has no key).
    pub fn key_column(self) -> Option<&'static str> {
        self.rel().key_column()
    }

    /// Integer columns, in storage order.
    pub fn int_columns(self) -> &'static [&'static str] {
        self.rel().int_columns()
    }

    /// Index of an integer column, if it exists.
    pub fn column_index(self, col: &str) -> Option<usize> {
        self.int_columns().iter().position(|c| c.eq_ignore_ascii_case(col))
    }
}

/// A value in a SQL statement: constants, bound variables, `CURRENT_TIMESTAMP`, and integer
/// arithmetic on them.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlValue {
    /// An integer literal.
    Const(i64),
    /// `:name`.
    Var(String),
    /// `CURRENT_TIMESTAMP` / `now()`: microseconds since the Unix epoch at execution.
    Now,
    /// `-x`.
    Neg(Box<SqlValue>),
    /// `a + b`, `a - b`, `a * b`.
    Arith(char, Box<SqlValue>, Box<SqlValue>),
}

/// One SQL command the engine can run.
#[derive(Clone, Debug, PartialEq)]
pub enum SqlCommand {
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `END` / `COMMIT`.
    Commit,
    /// `ROLLBACK` / `ABORT`.
    Rollback,
    /// `SELECT cols FROM table WHERE key = key_value [lock]`.
    Select {
        /// The table (not history).
        table: Table,
        /// Column indexes into [`Table::int_columns`].
        columns: Vec<usize>,
        /// The key looked up.
        key: SqlValue,
        /// `FOR UPDATE` / `FOR SHARE`.
        lock: LockClauseStrength,
        /// `NOWAIT` (`Error`), `SKIP LOCKED` (`Skip`) or neither (`Block`).
        wait: WaitPolicy,
    },
    /// `UPDATE table SET column = column + delta WHERE key = key_value`.
    Update {
        /// The table (not history).
        table: Table,
        /// Column index into [`Table::int_columns`] (never the key).
        column: usize,
        /// Added to the column (a `-` in the statement is folded into a negation).
        delta: SqlValue,
        /// The key updated.
        key: SqlValue,
    },
    /// `INSERT INTO pgbench_history (...) VALUES (...)`: the value of each history column, in
    /// [`Table::History`]'s column order (`None` = NULL).
    InsertHistory {
        /// tid, bid, aid, delta, mtime.
        values: [Option<SqlValue>; 5],
    },
}

/// The argument of `\sleep`.
#[derive(Clone, Debug, PartialEq)]
pub enum SleepArg {
    /// A literal count.
    Const(i64),
    /// `:var`.
    Var(String),
}

/// One script command.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `\set var expr`.
    Set {
        /// Variable name (without the colon).
        var: String,
        /// The expression.
        expr: Expr,
    },
    /// `\sleep n [us|ms|s]`.
    Sleep {
        /// How many units.
        amount: SleepArg,
        /// Microseconds per unit.
        unit_us: u64,
    },
    /// A SQL statement.
    Sql {
        /// The statement text as written (for `-r` reports).
        text: String,
        /// What it does.
        cmd: SqlCommand,
    },
}

/// A parsed script.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// `<builtin: ...>` or the file name.
    pub name: String,
    /// Commands with their 1-based line numbers.
    pub commands: Vec<(usize, Command)>,
    /// Relative weight for `-b NAME@W` / `-f FILE@W` (default 1).
    pub weight: u32,
    /// Each command's text as written (meta-commands without the backslash's line breaks),
    /// parallel to `commands`, for `-r` reports.
    pub texts: Vec<String>,
}

/// A built-in script: name, description and text exactly as `pgbench --show-script=NAME`
/// prints it (PostgreSQL 15).
#[derive(Copy, Clone, Debug)]
pub struct Builtin {
    /// `tpcb-like`, `simple-update` or `select-only`.
    pub name: &'static str,
    /// `TPC-B (sort of)`, ...
    pub description: &'static str,
    /// The script text.
    pub text: &'static str,
}

/// The first seven lines that tpcb-like and simple-update share (pgbench's `builtin_script`
/// texts): the four `\set`s, `BEGIN`, the accounts update and its read-back.
macro_rules! update_accounts_prefix {
    () => {
        "\\set aid random(1, 100000 * :scale)\n\
         \\set bid random(1, 1 * :scale)\n\
         \\set tid random(1, 10 * :scale)\n\
         \\set delta random(-5000, 5000)\n\
         BEGIN;\n\
         UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;\n\
         SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n"
    };
}

/// pgbench's built-in scripts.
pub const BUILTINS: [Builtin; 3] = [
    Builtin {
        name: "tpcb-like",
        description: "TPC-B (sort of)",
        text: concat!(
            update_accounts_prefix!(),
            "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;\n\
               UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;\n\
               INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n\
               END;\n"
        ),
    },
    Builtin {
        name: "simple-update",
        description: "simple update",
        text: concat!(
            update_accounts_prefix!(),
            "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);\n\
               END;\n"
        ),
    },
    Builtin {
        name: "select-only",
        description: "select only",
        text: "\\set aid random(1, 100000 * :scale)\n\
               SELECT abalance FROM pgbench_accounts WHERE aid = :aid;\n",
    },
];

impl Builtin {
    /// Finds a built-in by name or unique prefix, as pgbench's `-b` does.
    ///
    /// # Errors
    /// [`BuiltinError`]: unknown (with the list of valid names) or ambiguous names.
    pub fn find(name: &str) -> Result<Builtin, BuiltinError> {
        if let Some(b) = BUILTINS.iter().find(|b| b.name == name) {
            return Ok(*b);
        }
        let matches: Vec<&Builtin> = BUILTINS.iter().filter(|b| b.name.starts_with(name)).collect();
        match matches.as_slice() {
            [one] => Ok(**one),
            [] => Err(BuiltinError::NotFound(name.to_string())),
            _ => Err(BuiltinError::Ambiguous { count: matches.len(), prefix: name.to_string() }),
        }
    }

    /// What `--show-script` prints: a header comment and the text.
    pub fn show(&self) -> String {
        format!("-- {}: <builtin: {}>\n{}", self.name, self.description, self.text)
    }

    /// The parsed script, named `<builtin: description>`.
    pub fn script(&self) -> Script {
        parse_script(&format!("<builtin: {}>", self.description), self.text)
            .expect("the built-in scripts parse (the script tests parse them)")
    }
}

/// The largest script text [`parse_script`] accepts, bytes (1 MiB). pgbench itself reads a
/// script file whatever its size; a bound keeps `-f /dev/zero` from filling memory, and the
/// largest realistic script is a few kilobytes.
pub const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// Parses a script's text; `file` names it in errors.
///
/// # Errors
/// The first problem, as `FILE:LINE: message` (one line: control characters of the input are
/// escaped); a text above [`MAX_SCRIPT_BYTES`] is refused at line 1.
pub fn parse_script(file: &str, text: &str) -> Result<Script, ScriptError> {
    let file = &crate::input::one_line(file);
    let err = |line: usize, kind: ScriptErrorKind| ScriptError { file: file.to_string(), line, kind };
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(err(1, ScriptErrorKind::TooLarge));
    }
    let mut commands = Vec::new();
    let mut texts = Vec::new();
    let mut sql = String::new();
    let mut sql_line = 0;
    for (idx, raw) in text.lines().enumerate() {
        let line_no = idx + 1;
        let line = raw.trim();
        if sql.is_empty() {
            if line.is_empty() || line.starts_with("--") {
                continue;
            }
            if let Some(meta) = line.strip_prefix('\\') {
                commands.push((line_no, parse_meta(meta).map_err(|m| err(line_no, m))?));
                texts.push(line.to_string());
                continue;
            }
            sql_line = line_no;
        }
        // Accumulate SQL until a `;` outside quotes ends a statement.
        let code = strip_sql_comment(raw);
        for piece in split_statements(code, &mut sql) {
            let cmd = parse_sql(&piece).map_err(|m| err(sql_line, m))?;
            texts.push(format!("{};", piece.trim()));
            commands.push((sql_line, Command::Sql { text: piece.trim().to_string(), cmd }));
            sql_line = line_no;
        }
    }
    if !sql.trim().is_empty() {
        let piece = std::mem::take(&mut sql);
        let cmd = parse_sql(&piece).map_err(|m| err(sql_line, m))?;
        texts.push(format!("{};", piece.trim()));
        commands.push((sql_line, Command::Sql { text: piece.trim().to_string(), cmd }));
    }
    if commands.is_empty() {
        return Err(err(1, ScriptErrorKind::Empty));
    }
    Ok(Script { name: file.to_string(), commands, weight: 1, texts })
}

/// Drops a trailing `-- comment` that is outside quotes.
fn strip_sql_comment(line: &str) -> &str {
    let b = line.as_bytes();
    let mut in_quote = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\'' => in_quote = !in_quote,
            b'-' if !in_quote && i + 1 < b.len() && b[i + 1] == b'-' => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// Appends `code` (plus a newline) to `buf`; returns each statement completed by a `;`.
fn split_statements(code: &str, buf: &mut String) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_quote = buf.matches('\'').count() % 2 == 1;
    for c in code.chars() {
        if c == '\'' {
            in_quote = !in_quote;
        }
        if c == ';' && !in_quote {
            if !buf.trim().is_empty() {
                out.push(std::mem::take(buf));
            } else {
                buf.clear();
            }
            continue;
        }
        buf.push(c);
    }
    if !buf.is_empty() {
        buf.push('\n');
    }
    out
}

fn parse_meta(meta: &str) -> Result<Command, ScriptErrorKind> {
    let mut words = meta.split_whitespace();
    let name = words.next().unwrap_or("");
    match name.to_ascii_lowercase().as_str() {
        "set" => {
            let var = words.next().ok_or(ScriptErrorKind::MissingArgument("set"))?;
            if !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ScriptErrorKind::InvalidVariableName(var.to_string()));
            }
            // The expression is what follows the variable name: skip the command word and the
            // name as words (searching for the name's text would find `s` inside "set").
            let after_name = meta.trim_start()[name.len()..].trim_start();
            let rest = after_name[var.len()..].trim();
            let expr = expr::parse(rest)
                .map_err(|error| ScriptErrorKind::SetExpression { var: var.to_string(), error })?;
            Ok(Command::Set { var: var.to_string(), expr })
        }
        "sleep" => {
            let arg = words.next().ok_or(ScriptErrorKind::MissingArgument("sleep"))?;
            let unit = words.next().unwrap_or("s");
            if words.next().is_some() {
                return Err(ScriptErrorKind::TooManySleepArguments);
            }
            let unit_us = match unit.to_ascii_lowercase().as_str() {
                "us" => 1,
                "ms" => 1_000,
                "s" => 1_000_000,
                other => return Err(ScriptErrorKind::UnrecognizedTimeUnit(other.to_string())),
            };
            let amount = if let Some(v) = arg.strip_prefix(':') {
                SleepArg::Var(v.to_string())
            } else {
                SleepArg::Const(arg.parse().map_err(|_| ScriptErrorKind::InvalidSleepTime(arg.to_string()))?)
            };
            Ok(Command::Sleep { amount, unit_us })
        }
        _ => Err(ScriptErrorKind::UnsupportedMetaCommand(meta.to_string())),
    }
}

/// Replaces `:name` (not `::`) outside quotes with `$k`; returns the text and the names.
fn bind_variables(sql: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(sql.len());
    let mut names: Vec<String> = Vec::new();
    let chars: Vec<char> = sql.chars().collect();
    let mut i = 0;
    let mut in_quote = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            in_quote = !in_quote;
        }
        if !in_quote && c == ':' {
            if i + 1 < chars.len() && chars[i + 1] == ':' {
                out.push_str("::");
                i += 2;
                continue;
            }
            let start = i + 1;
            let mut j = start;
            while j < chars.len() && (chars[j].is_ascii_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            if j > start {
                let name: String = chars[start..j].iter().collect();
                let k = match names.iter().position(|n| *n == name) {
                    Some(k) => k,
                    None => {
                        names.push(name);
                        names.len() - 1
                    }
                };
                out.push_str(&format!("${}", k + 1));
                i = j;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    (out, names)
}

/// `sql`'s words, single-spaced, as errors quote a statement.
fn words_of(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn unsupported(sql: &str) -> ScriptErrorKind {
    ScriptErrorKind::UnsupportedStatement(words_of(sql))
}

fn parse_sql(sql: &str) -> Result<SqlCommand, ScriptErrorKind> {
    let trimmed = sql.trim();
    let upper = trimmed.to_ascii_uppercase();
    // sqlparser's PostgreSQL dialect does not know ABORT; PostgreSQL treats it as ROLLBACK.
    if upper == "ABORT" || upper == "ABORT TRANSACTION" || upper == "ABORT WORK" {
        return Ok(SqlCommand::Rollback);
    }
    let (plain, key_strength) = key_lock_clause(trimmed).ok_or_else(|| unsupported(trimmed))?;
    let (bound, names) = bind_variables(&plain);
    let stmts = Parser::parse_sql(&PostgreSqlDialect {}, &bound).map_err(|_| unsupported(trimmed))?;
    let [stmt] = stmts.as_slice() else { return Err(unsupported(trimmed)) };
    if let Some(mut clause) = unsupported_clause(stmt) {
        // The clause as written, not as sqlparser read it.
        match key_strength {
            Some(LockClauseStrength::ForNoKeyUpdate) => {
                clause = clause.replacen("FOR UPDATE", "FOR NO KEY UPDATE", 1)
            }
            Some(_) => clause = clause.replacen("FOR SHARE", "FOR KEY SHARE", 1),
            None => {}
        }
        return Err(ScriptErrorKind::UnsupportedClause { clause, sql: words_of(trimmed) });
    }
    let mut cmd = convert(stmt, &names).ok_or_else(|| unsupported(trimmed))?;
    if let (Some(k), SqlCommand::Select { lock, .. }) = (key_strength, &mut cmd) {
        *lock = k;
    }
    Ok(cmd)
}

/// sqlparser reads `FOR UPDATE` and `FOR SHARE` but not PostgreSQL's `FOR NO KEY UPDATE` and
/// `FOR KEY SHARE` (9.3+): `sql` with such a clause's `NO KEY` or `KEY` taken out (so that it
/// parses as the clause of the same exclusivity), and the strength it stands for; `sql`
/// itself and `None` without one. Words inside quotes are not read. `None` overall for more
/// than one such clause (a statement runs one locking clause).
fn key_lock_clause(sql: &str) -> Option<(String, Option<LockClauseStrength>)> {
    // Words outside quotes: (byte start, upper-cased word).
    let mut words: Vec<(usize, String)> = Vec::new();
    let mut quote: Option<char> = None;
    let mut start: Option<usize> = None;
    for (i, c) in sql.char_indices().chain(std::iter::once((sql.len(), ' '))) {
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' {
            start.get_or_insert(i);
            continue;
        }
        if let Some(b) = start.take() {
            words.push((b, sql[b..i].to_ascii_uppercase()));
        }
        if c == '\'' || c == '"' {
            quote = Some(c);
        }
    }
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        if w.1 != "FOR" {
            continue;
        }
        let next: Vec<&str> = words[i + 1..].iter().take(3).map(|x| x.1.as_str()).collect();
        let clause = match next.as_slice() {
            ["NO", "KEY", "UPDATE", ..] => {
                (words[i + 1].0, words[i + 3].0, LockClauseStrength::ForNoKeyUpdate)
            }
            ["KEY", "SHARE", ..] => (words[i + 1].0, words[i + 2].0, LockClauseStrength::ForKeyShare),
            _ => continue,
        };
        if found.replace(clause).is_some() {
            return None;
        }
    }
    Some(match found {
        Some((from, to, strength)) => (format!("{}{}", &sql[..from], &sql[to..]), Some(strength)),
        None => (sql.to_string(), None),
    })
}

/// A clause of an otherwise supported statement that changes what it does and that the engine
/// does not implement: refused by name, never parsed and dropped. Isolation levels other than
/// READ COMMITTED (PostgreSQL runs READ UNCOMMITTED as READ COMMITTED) and READ ONLY
/// transactions (`xact.c`), `AND CHAIN`, `SET TRANSACTION`, and a row-lock clause whose `OF`
/// names a relation the query does not read (PostgreSQL's error for it).
fn unsupported_clause(stmt: &Statement) -> Option<String> {
    use ast::{TransactionAccessMode as A, TransactionIsolationLevel as L, TransactionMode as M};
    match stmt {
        Statement::StartTransaction { modes, .. } => modes.iter().find_map(|m| match m {
            M::IsolationLevel(L::ReadCommitted | L::ReadUncommitted) | M::AccessMode(A::ReadWrite) => None,
            M::IsolationLevel(l) => Some(format!("ISOLATION LEVEL {l} (only READ COMMITTED is implemented)")),
            M::AccessMode(a) => Some(format!("{a} transactions")),
        }),
        Statement::Set(ast::Set::SetTransaction { .. }) => {
            Some("SET TRANSACTION (only the default READ COMMITTED transactions are implemented)".into())
        }
        Statement::Commit { chain: true, .. } | Statement::Rollback { chain: true, .. } => {
            Some("AND CHAIN".into())
        }
        Statement::Query(q) => {
            let SetExpr::Select(sel) = q.body.as_ref() else { return None };
            let from: Vec<String> =
                sel.from.iter().map(|f| f.relation.to_string().to_ascii_lowercase()).collect();
            q.locks.iter().find_map(|l| {
                let of = l.of.as_ref()?.to_string().to_ascii_lowercase();
                (!from.contains(&of)).then(|| {
                    format!("relation \"{of}\" in FOR {} clause not found in FROM clause", l.lock_type)
                })
            })
        }
        _ => None,
    }
}

fn value(e: &ast::Expr, names: &[String]) -> Option<SqlValue> {
    use ast::{BinaryOperator as B, Expr as E, UnaryOperator as U, Value as V};
    Some(match e {
        E::Value(v) => match &v.value {
            V::Number(n, _) => SqlValue::Const(n.parse().ok()?),
            V::Placeholder(p) => {
                let k: usize = p.strip_prefix('$')?.parse().ok()?;
                SqlValue::Var(names.get(k.checked_sub(1)?)?.clone())
            }
            _ => return None,
        },
        E::Nested(inner) => value(inner, names)?,
        E::UnaryOp { op: U::Minus, expr } => SqlValue::Neg(Box::new(value(expr, names)?)),
        E::UnaryOp { op: U::Plus, expr } => value(expr, names)?,
        E::BinaryOp { left, op, right } => {
            let c = match op {
                B::Plus => '+',
                B::Minus => '-',
                B::Multiply => '*',
                _ => return None,
            };
            SqlValue::Arith(c, Box::new(value(left, names)?), Box::new(value(right, names)?))
        }
        E::Function(f) => {
            let n = f.name.to_string().to_ascii_lowercase();
            if (n == "current_timestamp" || n == "now") && f.to_string().len() <= n.len() + 2 {
                SqlValue::Now
            } else {
                return None;
            }
        }
        E::Identifier(i) if i.value.eq_ignore_ascii_case("current_timestamp") => SqlValue::Now,
        _ => return None,
    })
}

/// `key = value` (either order) on `table`'s key column.
fn key_predicate(sel: Option<&ast::Expr>, table: Table, names: &[String]) -> Option<SqlValue> {
    let ast::Expr::BinaryOp { left, op: ast::BinaryOperator::Eq, right } = sel? else { return None };
    let key = table.key_column()?;
    let is_key = |e: &ast::Expr| matches!(e, ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case(key));
    if is_key(left) {
        value(right, names)
    } else if is_key(right) {
        value(left, names)
    } else {
        None
    }
}

fn normalize(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ").to_ascii_lowercase()
}

fn convert(stmt: &Statement, names: &[String]) -> Option<SqlCommand> {
    match stmt {
        // Transaction modes were checked by `unsupported_clause`; a BEGIN block with statements
        // or a modifier (other dialects' syntax) is not a transaction start.
        Statement::StartTransaction {
            modifier: None,
            statements,
            exception: None,
            has_end_keyword: false,
            ..
        } if statements.is_empty() => Some(SqlCommand::Begin),
        Statement::Commit { chain: false, modifier: None, .. } => Some(SqlCommand::Commit),
        Statement::Rollback { savepoint: None, chain: false } => Some(SqlCommand::Rollback),
        Statement::Query(q) => {
            let SetExpr::Select(sel) = q.body.as_ref() else { return None };
            let [from] = sel.from.as_slice() else { return None };
            if !from.joins.is_empty() {
                return None;
            }
            let table = Table::from_name(&from.relation.to_string())?;
            table.key_column()?;
            let mut columns = Vec::new();
            for item in &sel.projection {
                match item {
                    ast::SelectItem::UnnamedExpr(ast::Expr::Identifier(i)) => {
                        columns.push(table.column_index(&i.value)?)
                    }
                    _ => return None,
                }
            }
            let key = key_predicate(sel.selection.as_ref(), table, names)?;
            // `OF` names the query's one table (checked by `unsupported_clause`), so it locks
            // what the clause without it would.
            let (lock, wait) = match q.locks.as_slice() {
                [] => (LockClauseStrength::None, WaitPolicy::Block),
                [l] => (
                    match l.lock_type {
                        ast::LockType::Update => LockClauseStrength::ForUpdate,
                        ast::LockType::Share => LockClauseStrength::ForShare,
                    },
                    match l.nonblock {
                        None => WaitPolicy::Block,
                        Some(ast::NonBlock::Nowait) => WaitPolicy::Error,
                        Some(ast::NonBlock::SkipLocked) => WaitPolicy::Skip,
                    },
                ),
                _ => return None,
            };
            // Nothing else may be present (GROUP BY, ORDER BY, LIMIT, DISTINCT, ...): the
            // statement must print back as exactly the parts we understood.
            let mut canon = format!(
                "select {} from {} where {}",
                sel.projection.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "),
                from.relation,
                sel.selection.as_ref()?,
            );
            // The lock clause's fields were all read above.
            for l in &q.locks {
                canon.push_str(&format!(" {l}"));
            }
            (normalize(&canon) == normalize(&q.to_string())).then_some(SqlCommand::Select {
                table,
                columns,
                key,
                lock,
                wait,
            })
        }
        Statement::Update(u) => {
            if !u.table.joins.is_empty() || u.from.is_some() || u.returning.is_some() {
                return None;
            }
            let table = Table::from_name(&u.table.relation.to_string())?;
            let key_col = table.key_column()?;
            let [a] = u.assignments.as_slice() else { return None };
            let col = a.target.to_string();
            if col.eq_ignore_ascii_case(key_col) {
                return None;
            }
            let column = table.column_index(&col)?;
            let ast::Expr::BinaryOp { left, op, right } = &a.value else { return None };
            if !matches!(left.as_ref(), ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case(&col)) {
                return None;
            }
            let d = value(right, names)?;
            let delta = match op {
                ast::BinaryOperator::Plus => d,
                ast::BinaryOperator::Minus => SqlValue::Neg(Box::new(d)),
                _ => return None,
            };
            let key = key_predicate(u.selection.as_ref(), table, names)?;
            let canon = format!("update {} set {} where {}", u.table, a, u.selection.as_ref()?);
            (normalize(&canon) == normalize(&stmt.to_string())).then_some(SqlCommand::Update {
                table,
                column,
                delta,
                key,
            })
        }
        Statement::Insert(ins) => {
            if Table::from_name(&ins.table.to_string())? != Table::History {
                return None;
            }
            let src = ins.source.as_ref()?;
            let SetExpr::Values(vals) = src.body.as_ref() else { return None };
            let [row] = vals.rows.as_slice() else { return None };
            let cols: Vec<String> = ins.columns.iter().map(|c| c.to_string()).collect();
            let cols: Vec<String> = if cols.is_empty() {
                Table::History.int_columns().iter().map(|s| s.to_string()).collect()
            } else {
                cols
            };
            let row_exprs: Vec<&ast::Expr> = row.iter().collect();
            if row_exprs.len() != cols.len() {
                return None;
            }
            let mut values: [Option<SqlValue>; 5] = Default::default();
            for (c, e) in cols.iter().zip(&row_exprs) {
                let idx = Table::History.column_index(c)?;
                if values[idx].is_some() {
                    return None;
                }
                values[idx] = Some(value(e, names)?);
            }
            // Nothing else may be present (ON CONFLICT, RETURNING, an alias, OVERRIDING ...):
            // the statement must print back as exactly the parts we understood.
            let listed = if ins.columns.is_empty() {
                String::new()
            } else {
                format!("({}) ", ins.columns.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", "))
            };
            let canon = format!(
                "insert into {} {listed}values ({})",
                ins.table,
                row_exprs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", ")
            );
            (normalize(&canon) == normalize(&stmt.to_string()))
                .then_some(SqlCommand::InsertHistory { values })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
