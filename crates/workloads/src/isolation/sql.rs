//! The SQL the isolation runner understands: transaction control, `LOCK TABLE`, the two lock
//! timeouts, the advisory-lock functions, and on the engine's user tables
//! (`lockstack_engine::usertable`) `CREATE TABLE` (int4/int8/serial/text columns, `PRIMARY
//! KEY`, `NOT NULL`, `DEFAULT` constants; `REFERENCES` is accepted and no foreign-key check is
//! run), `DROP TABLE`, `INSERT ... VALUES` of literal rows and `SELECT` with a row-locking
//! clause. Everything else is rejected before anything runs.

use lockstack_engine::session::{RowLockStrength, WaitPolicy};
use lockstack_engine::usertable::{ColumnDef, ColumnType, TableDef, Value};
use lockstack_lmgr::LockMode;

/// An advisory-lock function (`src/backend/utils/adt/lockfuncs.c`, 8.2+; `_xact` 9.1+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdvisoryFn {
    /// `pg_advisory_lock` (wait), `pg_try_advisory_lock` (try) or `pg_advisory_unlock`.
    pub op: AdvisoryOp,
    /// Transaction-level (`_xact_`) rather than session-level.
    pub xact: bool,
    /// `_shared` (ShareLock) rather than exclusive (ExclusiveLock).
    pub shared: bool,
}

/// What an advisory function does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvisoryOp {
    /// Wait for the lock; returns void.
    Lock,
    /// Take it if free; returns boolean.
    Try,
    /// Release one hold; returns boolean (false and a WARNING if not held).
    Unlock,
}

impl AdvisoryFn {
    /// The lock mode it takes or releases.
    pub fn mode(self) -> LockMode {
        if self.shared { LockMode::Share } else { LockMode::Exclusive }
    }
}

/// The key of an advisory lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvisoryKey {
    /// One bigint.
    Int8(i64),
    /// Two ints.
    Int4(i32, i32),
}

/// A function call in a `SELECT` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// One of the advisory lock functions with its key.
    Advisory(AdvisoryFn, AdvisoryKey),
    /// `pg_advisory_unlock_all()`.
    UnlockAll,
}

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
/// newer version of a row it waited for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// `col = const`.
    Eq(String, Value),
    /// `f(...) IS NOT NULL` (always true once the call returns).
    CallNotNull(Call),
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

#[derive(Debug, Clone, PartialEq)]
enum T {
    Word(String),
    Quoted(String),
    Str(String),
    Num(String),
    P(char),
}

fn tokens(sql: &str) -> Result<Vec<T>, String> {
    let c: Vec<char> = sql.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '-' && c.get(i + 1) == Some(&'-') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch.is_ascii_alphabetic() || ch == '_' {
            let s: String =
                c[i..].iter().take_while(|x| x.is_ascii_alphanumeric() || **x == '_' || **x == '$').collect();
            i += s.chars().count();
            out.push(T::Word(s.to_ascii_lowercase()));
        } else if ch.is_ascii_digit() {
            let s: String = c[i..].iter().take_while(|x| x.is_ascii_digit()).collect();
            i += s.len();
            out.push(T::Num(s));
        } else if ch == '\'' || ch == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match c.get(i) {
                    None => return Err(format!("unterminated quoted string starting with {ch}")),
                    Some(&q) if q == ch && c.get(i + 1) == Some(&ch) => {
                        s.push(ch);
                        i += 2;
                    }
                    Some(&q) if q == ch => {
                        i += 1;
                        break;
                    }
                    Some(&x) => {
                        s.push(x);
                        i += 1;
                    }
                }
            }
            out.push(if ch == '\'' { T::Str(s) } else { T::Quoted(s) });
        } else if "(),;=-:*+".contains(ch) {
            out.push(T::P(ch));
            i += 1;
        } else if (ch == '<' && c.get(i + 1) == Some(&'>')) || (ch == '!' && c.get(i + 1) == Some(&'=')) {
            // Both spellings of "not equal".
            out.push(T::P('!'));
            i += 2;
        } else {
            return Err(format!("unexpected character '{ch}'"));
        }
    }
    Ok(out)
}

/// Splits a step's SQL into statements at top-level semicolons (outside quotes and comments);
/// empty statements are dropped.
pub fn split_statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        match quote {
            Some(q) => {
                cur.push(ch);
                if ch == q {
                    quote = None;
                }
            }
            None => match ch {
                '\'' | '"' => {
                    quote = Some(ch);
                    cur.push(ch);
                }
                '-' if chars.peek() == Some(&'-') => {
                    for x in chars.by_ref() {
                        if x == '\n' {
                            cur.push('\n');
                            break;
                        }
                    }
                }
                ';' => {
                    if !cur.trim().is_empty() {
                        out.push(cur.trim().to_string());
                    }
                    cur.clear();
                }
                _ => cur.push(ch),
            },
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur.trim().to_string());
    }
    out
}

struct P {
    t: Vec<T>,
    i: usize,
}

impl P {
    fn word(&self) -> Option<&str> {
        match self.t.get(self.i) {
            Some(T::Word(w)) => Some(w),
            _ => None,
        }
    }
    fn eat(&mut self, w: &str) -> bool {
        if self.word() == Some(w) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn eat_p(&mut self, c: char) -> bool {
        if self.t.get(self.i) == Some(&T::P(c)) {
            self.i += 1;
            true
        } else {
            false
        }
    }
    fn done(&self) -> bool {
        self.i >= self.t.len()
    }
    fn name(&mut self) -> Result<String, String> {
        match self.t.get(self.i).cloned() {
            Some(T::Word(w)) => {
                self.i += 1;
                Ok(w)
            }
            Some(T::Quoted(q)) => {
                self.i += 1;
                Ok(q)
            }
            _ => Err("expected a table name".into()),
        }
    }
    fn names(&mut self) -> Result<Vec<String>, String> {
        let mut v = vec![self.name()?];
        while self.eat_p(',') {
            v.push(self.name()?);
        }
        Ok(v)
    }
    fn int(&mut self) -> Result<i64, String> {
        let neg = self.eat_p('-');
        match self.t.get(self.i).cloned() {
            Some(T::Num(n)) => {
                self.i += 1;
                // Parse with the sign so that i64::MIN (whose magnitude is no i64) is accepted.
                let text = if neg { format!("-{n}") } else { n.clone() };
                text.parse().map_err(|_| format!("integer out of range: {text}"))
            }
            _ => Err("expected an integer argument".into()),
        }
    }
}

/// A literal: an integer (optionally negative), a quoted string, or NULL.
fn literal(p: &mut P) -> Result<Value, String> {
    if p.eat("null") {
        return Ok(Value::Null);
    }
    if let Some(T::Str(s)) = p.t.get(p.i).cloned() {
        p.i += 1;
        return Ok(Value::Text(s));
    }
    p.int().map(Value::Int).map_err(|_| "expected a constant (integer, 'string' or NULL)".to_string())
}

/// One column definition or table constraint of `CREATE TABLE`, added to `def`.
fn column_def(p: &mut P, def: &mut TableDef) -> Result<(), String> {
    if p.eat("primary") {
        if !p.eat("key") || !p.eat_p('(') {
            return Err("expected PRIMARY KEY (column)".into());
        }
        let c = p.name()?;
        if !p.eat_p(')') {
            return Err("unsupported: a primary key of more than one column".into());
        }
        let k = def.column(&c).ok_or_else(|| format!("column \"{c}\" named in key does not exist"))?;
        if def.primary_key.replace(k).is_some() {
            return Err(format!("multiple primary keys for table \"{}\" are not allowed", def.name));
        }
        def.columns[k].not_null = true;
        return Ok(());
    }
    if p.eat("foreign") {
        // Accepted without a foreign-key check (the runner does not model RI triggers).
        if !p.eat("key") || !p.eat_p('(') {
            return Err("expected FOREIGN KEY (column)".into());
        }
        let c = p.name()?;
        def.column(&c)
            .ok_or_else(|| format!("column \"{c}\" referenced in foreign key constraint does not exist"))?;
        if !p.eat_p(')') || !p.eat("references") {
            return Err("unsupported: a foreign key of more than one column".into());
        }
        p.name()?;
        if p.eat_p('(') {
            p.name()?;
            if !p.eat_p(')') {
                return Err("expected ) after REFERENCES table (column".into());
            }
        }
        return Ok(());
    }
    let name = p.name()?;
    let tname = p.word().ok_or_else(|| format!("expected a type for column \"{name}\""))?.to_string();
    p.i += 1;
    let (ty, serial) = match tname.as_str() {
        "int" | "integer" | "int4" => (ColumnType::Int4, false),
        "int8" | "bigint" => (ColumnType::Int8, false),
        "serial" | "serial4" => (ColumnType::Int4, true),
        "bigserial" | "serial8" => (ColumnType::Int8, true),
        "text" => (ColumnType::Text, false),
        "numeric" | "decimal" if p.t.get(p.i) != Some(&T::P('(')) => (ColumnType::Numeric, false),
        _ => {
            return Err(format!(
                "unsupported: column type \"{tname}\" (int4, int8, serial, bigserial, text, numeric without \
                 precision)"
            ));
        }
    };
    let mut c = ColumnDef { name, ty, default: None, serial, not_null: serial };
    loop {
        if p.eat("primary") {
            if !p.eat("key") {
                return Err("expected KEY after PRIMARY".into());
            }
            if def.primary_key.replace(def.columns.len()).is_some() {
                return Err(format!("multiple primary keys for table \"{}\" are not allowed", def.name));
            }
            c.not_null = true;
        } else if p.eat("not") {
            if !p.eat("null") {
                return Err("expected NULL after NOT".into());
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
                    return Err("expected ) after REFERENCES table (column".into());
                }
            }
        } else {
            break;
        }
    }
    def.columns.push(c);
    Ok(())
}

fn parse_create(p: &mut P) -> Result<TableDef, String> {
    let name = p.name()?;
    if !p.eat_p('(') {
        return Err("expected ( after CREATE TABLE name".into());
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
            return Err("unsupported: column constraint or option in CREATE TABLE (expected , or ))".into());
        }
    }
    Ok(def)
}

fn parse_insert(p: &mut P) -> Result<Insert, String> {
    if !p.eat("into") {
        return Err("expected INTO after INSERT".into());
    }
    let table = p.name()?;
    let columns = if p.eat_p('(') {
        let c = p.names()?;
        if !p.eat_p(')') {
            return Err("expected ) after the column list".into());
        }
        Some(c)
    } else {
        None
    };
    if !p.eat("values") {
        return Err("unsupported: INSERT without VALUES".into());
    }
    let mut rows = Vec::new();
    loop {
        if !p.eat_p('(') {
            return Err("expected ( before a row of VALUES".into());
        }
        let mut row = Vec::new();
        loop {
            row.push(if p.eat("default") { None } else { Some(literal(p)?) });
            if p.eat_p(')') {
                break;
            }
            if !p.eat_p(',') {
                return Err("unsupported: VALUES other than constants".into());
            }
        }
        rows.push(row);
        if !p.eat_p(',') {
            break;
        }
    }
    Ok(Insert { table, columns, rows })
}

/// A WHERE clause ([`Cond`]).
fn cond(p: &mut P) -> Result<Cond, String> {
    if matches!(p.t.get(p.i + 1), Some(T::P('('))) {
        let call = parse_call(p)?;
        if !(p.eat("is") && p.eat("not") && p.eat("null")) {
            return Err("unsupported: a function in WHERE other than f(...) IS NOT NULL".into());
        }
        return Ok(Cond::CallNotNull(call));
    }
    let c = p.name()?;
    if !p.eat_p('=') {
        return Err("unsupported: WHERE other than column = constant".into());
    }
    let v = literal(p)?;
    if p.word() == Some("and") || p.word() == Some("or") {
        return Err("unsupported: AND / OR in WHERE".into());
    }
    Ok(Cond::Eq(c, v))
}

fn parse_update(p: &mut P) -> Result<Update, String> {
    let table = p.name()?;
    if !p.eat("set") {
        return Err("expected SET".into());
    }
    let mut set = Vec::new();
    loop {
        let c = p.name()?;
        if !p.eat_p('=') {
            return Err("expected = in SET".into());
        }
        let e = if p.eat("default") {
            Expr::Default
        } else if matches!(p.t.get(p.i), Some(T::Word(w)) if w != "null") {
            let src = p.name()?;
            let delta = if p.eat_p('+') {
                p.int()?
            } else if p.eat_p('-') {
                p.int()?.checked_neg().ok_or("integer out of range")?
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
fn parse_query(p: &mut P) -> Result<Query, String> {
    let columns = if p.eat_p('*') { None } else { Some(p.names()?) };
    if !p.eat("from") {
        return Err("expected FROM".into());
    }
    let table = p.name()?;
    let mut q = Query { table, columns, filter: None, order_by: None, limit: None, lock: None };
    if p.eat("where") {
        q.filter = Some(cond(p)?);
    }
    loop {
        if p.eat("order") {
            if !p.eat("by") {
                return Err("expected BY after ORDER".into());
            }
            let c = p.name()?;
            let desc = p.eat("desc");
            if !desc {
                p.eat("asc");
            }
            q.order_by = Some((c, desc));
        } else if p.eat("limit") {
            let n = p.int()?;
            q.limit = Some(u64::try_from(n).map_err(|_| "LIMIT must not be negative".to_string())?);
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
                return Err("expected UPDATE, NO KEY UPDATE, SHARE or KEY SHARE after FOR".into());
            };
            if p.eat("of") {
                return Err("unsupported: FOR ... OF".into());
            }
            let wait = if p.eat("nowait") {
                WaitPolicy::Error
            } else if p.eat("skip") {
                if !p.eat("locked") {
                    return Err("expected LOCKED after SKIP".into());
                }
                WaitPolicy::Skip
            } else {
                WaitPolicy::Block
            };
            if q.lock.replace((strength, wait)).is_some() {
                return Err("unsupported: more than one locking clause".into());
            }
        } else {
            return Ok(q);
        }
    }
}

/// A call of an advisory-lock function: `name(args)`.
fn parse_call(p: &mut P) -> Result<Call, String> {
    let f = p.word().ok_or("expected a function name")?.to_string();
    p.i += 1;
    let mut call = parse_advisory(&f).ok_or_else(|| format!("unsupported function \"{f}\""))?;
    if !p.eat_p('(') {
        return Err(format!("expected ( after {f}"));
    }
    let mut args = Vec::new();
    if !p.eat_p(')') {
        loop {
            args.push(p.int()?);
            if p.eat_p(')') {
                break;
            }
            if !p.eat_p(',') {
                return Err(format!("expected , or ) in arguments of {f}"));
            }
        }
    }
    match &mut call {
        Call::UnlockAll if !args.is_empty() => return Err(format!("{f}() takes no arguments")),
        Call::UnlockAll => {}
        Call::Advisory(_, key) => {
            *key = match args[..] {
                [k] => AdvisoryKey::Int8(k),
                [a, b] => AdvisoryKey::Int4(
                    i32::try_from(a).map_err(|_| format!("integer out of range: {a}"))?,
                    i32::try_from(b).map_err(|_| format!("integer out of range: {b}"))?,
                ),
                _ => return Err(format!("{f} takes one bigint or two int arguments")),
            }
        }
    }
    Ok(call)
}

fn parse_mode(p: &mut P) -> Result<LockMode, String> {
    let mut words = Vec::new();
    while let Some(w) = p.word() {
        if w == "mode" {
            break;
        }
        words.push(w.to_string());
        p.i += 1;
    }
    if !p.eat("mode") {
        return Err("expected IN <lockmode> MODE".into());
    }
    let text = words.join(" ");
    text.parse::<LockMode>().map_err(|_| format!("unknown lock mode \"{}\"", text.to_uppercase()))
}

fn parse_advisory(name: &str) -> Option<Call> {
    if name == "pg_advisory_unlock_all" {
        return Some(Call::UnlockAll);
    }
    let rest = name.strip_prefix("pg_")?;
    let (op, rest) = if let Some(r) = rest.strip_prefix("try_advisory_") {
        (AdvisoryOp::Try, r)
    } else if let Some(r) = rest.strip_prefix("advisory_unlock") {
        (AdvisoryOp::Unlock, r)
    } else if let Some(r) = rest.strip_prefix("advisory_") {
        (AdvisoryOp::Lock, r)
    } else {
        return None;
    };
    let (xact, rest) = match rest.strip_prefix("xact_") {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let rest = if op == AdvisoryOp::Unlock { rest } else { rest.strip_prefix("lock")? };
    let shared = match rest {
        "" => false,
        "_shared" => true,
        _ => return None,
    };
    if op == AdvisoryOp::Unlock && xact {
        return None;
    }
    Some(Call::Advisory(AdvisoryFn { op, xact, shared }, AdvisoryKey::Int8(0)))
}

/// The transaction modes of `BEGIN` / `START TRANSACTION` (`xact.c`, PostgreSQL 15):
/// `ISOLATION LEVEL READ COMMITTED` (and `READ UNCOMMITTED`, which PostgreSQL runs as READ
/// COMMITTED), `ISOLATION LEVEL REPEATABLE READ`, `READ WRITE`, `[NOT] DEFERRABLE` (which has
/// no effect unless the transaction is SERIALIZABLE and READ ONLY), separated by blanks or
/// commas; returns whether the level is REPEATABLE READ. SERIALIZABLE (predicate locks) and
/// READ ONLY change what a transaction may do, which the runner does not implement: they are
/// refused, never run as another level.
fn transaction_modes(p: &mut P) -> Result<bool, String> {
    let mut first = true;
    let mut repeatable_read = false;
    loop {
        if !first {
            p.eat_p(',');
        }
        first = false;
        if p.eat("isolation") {
            if !p.eat("level") {
                return Err("expected LEVEL after ISOLATION".into());
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
                return Err(
                    "unsupported: ISOLATION LEVEL SERIALIZABLE (READ COMMITTED and REPEATABLE READ are \
                     implemented)"
                        .into(),
                );
            }
            return Err("expected an isolation level after ISOLATION LEVEL".into());
        } else if p.eat("read") {
            if p.eat("write") {
                continue;
            }
            if p.eat("only") {
                return Err("unsupported: READ ONLY transactions".into());
            }
            return Err("expected READ WRITE or READ ONLY".into());
        } else if p.eat("not") {
            if !p.eat("deferrable") {
                return Err("expected DEFERRABLE after NOT".into());
            }
        } else if !p.eat("deferrable") {
            return Ok(repeatable_read);
        }
    }
}

/// Parses one statement (no trailing semicolon).
///
/// # Errors
/// A one-line description of what is not supported or malformed.
pub fn parse_statement(sql: &str) -> Result<Statement, String> {
    // Messages quote the statement on one line, whatever its line breaks.
    let sql = &sql.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut p = P { t: tokens(sql).map_err(|e| format!("unsupported SQL ({e}): {sql}"))?, i: 0 };
    let first = p.word().ok_or_else(|| format!("unsupported SQL: {sql}"))?.to_string();
    p.i += 1;
    let st = match first.as_str() {
        "begin" | "start" => {
            if first == "start" && !p.eat("transaction") {
                return Err(format!("unsupported SQL: {sql}"));
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
                Statement::RollbackTo(p.name().map_err(|_| format!("expected a savepoint name: {sql}"))?)
            } else {
                Statement::Rollback
            }
        }
        "savepoint" => {
            Statement::Savepoint(p.name().map_err(|_| format!("expected a savepoint name: {sql}"))?)
        }
        "release" => {
            p.eat("savepoint");
            Statement::Release(p.name().map_err(|_| format!("expected a savepoint name: {sql}"))?)
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
                    return Err(format!("unsupported: SET LOCAL (use SET): {sql}"));
                }
                if p.eat("transaction") || (p.eat("session") && p.word() == Some("characteristics")) {
                    return Err(format!(
                        "unsupported: SET TRANSACTION / SET SESSION CHARACTERISTICS (only the default \
                         READ COMMITTED transactions are implemented): {sql}"
                    ));
                }
            }
            let name = p.word().ok_or_else(|| format!("unsupported SQL: {sql}"))?.to_string();
            p.i += 1;
            let guc = match name.as_str() {
                "deadlock_timeout" => Guc::DeadlockTimeout,
                "lock_timeout" => Guc::LockTimeout,
                "statement_timeout" => Guc::StatementTimeout,
                _ => {
                    return Err(format!(
                        "unsupported parameter \"{name}\" (supported: deadlock_timeout, lock_timeout, \
                         statement_timeout)"
                    ));
                }
            };
            let value = if first == "reset" {
                None
            } else {
                if !(p.eat_p('=') || p.eat("to")) {
                    return Err(format!("expected = or TO after SET {name}"));
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
                    _ => return Err(format!("expected a value for {name}")),
                }
            };
            Statement::Set { guc, value }
        }
        "insert" => Statement::Insert(parse_insert(&mut p).map_err(|e| format!("{e} in: {sql}"))?),
        "update" => Statement::Update(parse_update(&mut p).map_err(|e| format!("{e} in: {sql}"))?),
        "delete" => {
            if !p.eat("from") {
                return Err(format!("unsupported SQL: {sql}"));
            }
            let table = p.name()?;
            let filter =
                if p.eat("where") { Some(cond(&mut p).map_err(|e| format!("{e} in: {sql}"))?) } else { None };
            Statement::Delete { table, filter }
        }
        "select" if p.t.get(p.i) == Some(&T::P('*')) || p.t.iter().any(|t| *t == T::Word("from".into())) => {
            Statement::Query(parse_query(&mut p).map_err(|e| format!("{e} in: {sql}"))?)
        }
        "select" if p.word() == Some("current_setting") => {
            p.i += 1;
            let name = match (p.eat_p('('), p.t.get(p.i).cloned()) {
                (true, Some(T::Str(n))) => {
                    p.i += 1;
                    n.to_ascii_lowercase()
                }
                _ => return Err(format!("expected current_setting('name'): {sql}")),
            };
            if !p.eat_p(')') {
                return Err(format!("expected ) after current_setting('name': {sql}"));
            }
            if !matches!(name.as_str(), "default_transaction_isolation" | "transaction_isolation") {
                return Err(format!(
                    "unsupported: current_setting('{name}') (default_transaction_isolation, \
                     transaction_isolation): {sql}"
                ));
            }
            let compare = if p.eat_p('=') || p.eat_p('!') {
                let eq = p.t.get(p.i - 1) == Some(&T::P('='));
                match p.t.get(p.i).cloned() {
                    Some(T::Str(v)) => {
                        p.i += 1;
                        Some((eq, v))
                    }
                    _ => {
                        return Err(format!(
                            "unsupported: a comparison of current_setting with a non-string: {sql}"
                        ));
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
                let f = p.word().ok_or_else(|| format!("unsupported SQL: {sql}"))?.to_string();
                let call = parse_call(&mut p).map_err(|e| {
                    if e.starts_with("unsupported function") { format!("{e} in: {sql}") } else { e }
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
                return Err(format!("unsupported SQL: {sql}"));
            }
            Statement::CreateTable(parse_create(&mut p).map_err(|e| format!("{e} in: {sql}"))?)
        }
        "drop" => {
            if !p.eat("table") {
                return Err(format!("unsupported SQL: {sql}"));
            }
            let if_exists = p.eat("if") && p.eat("exists");
            Statement::DropTable { tables: p.names()?, if_exists }
        }
        _ => return Err(format!("unsupported SQL: {sql}")),
    };
    if !p.done() {
        return Err(format!("unsupported SQL (unexpected text at the end): {sql}"));
    }
    Ok(st)
}

/// Parses a whole block into statements.
///
/// # Errors
/// The first statement's error.
pub fn parse_block(sql: &str) -> Result<Vec<Statement>, String> {
    split_statements(sql).iter().map(|s| parse_statement(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_supported_statements() {
        assert_eq!(
            parse_block("BEGIN; SET deadlock_timeout = '100s'; LOCK TABLE a, \"B\" IN SHARE ROW EXCLUSIVE MODE NOWAIT;")
                .unwrap(),
            vec![
                Statement::Begin { repeatable_read: false },
                Statement::Set { guc: Guc::DeadlockTimeout, value: Some("100s".into()) },
                Statement::Lock { tables: vec!["a".into(), "B".into()], mode: LockMode::ShareRowExclusive, nowait: true },
            ]
        );
        assert_eq!(
            parse_statement("LOCK a1").unwrap(),
            Statement::Lock { tables: vec!["a1".into()], mode: LockMode::AccessExclusive, nowait: false }
        );
        assert_eq!(
            parse_statement("set lock_timeout to 10").unwrap(),
            Statement::Set { guc: Guc::LockTimeout, value: Some("10".into()) }
        );
        assert_eq!(
            parse_statement("RESET lock_timeout").unwrap(),
            Statement::Set { guc: Guc::LockTimeout, value: None }
        );
        let Statement::Select(c) =
            parse_statement("SELECT pg_try_advisory_xact_lock_shared(1, -2), pg_advisory_unlock(5)").unwrap()
        else {
            panic!()
        };
        assert_eq!(c[0].0, "pg_try_advisory_xact_lock_shared");
        assert_eq!(
            c[0].1,
            Call::Advisory(
                AdvisoryFn { op: AdvisoryOp::Try, xact: true, shared: true },
                AdvisoryKey::Int4(1, -2)
            )
        );
        assert_eq!(
            c[1].1,
            Call::Advisory(
                AdvisoryFn { op: AdvisoryOp::Unlock, xact: false, shared: false },
                AdvisoryKey::Int8(5)
            )
        );
        let Statement::CreateTable(d) = parse_statement(
            "CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL DEFAULT 'a', r int REFERENCES p)",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(d.primary_key, Some(0));
        assert_eq!(d.columns[1].default, Some(Value::Text("a".into())));
        assert!(d.columns[1].not_null && !d.columns[2].not_null);
        assert_eq!(
            parse_statement("INSERT INTO t VALUES (1, 'x'), (-2, DEFAULT)").unwrap(),
            Statement::Insert(Insert {
                table: "t".into(),
                columns: None,
                rows: vec![
                    vec![Some(Value::Int(1)), Some(Value::Text("x".into()))],
                    vec![Some(Value::Int(-2)), None]
                ],
            })
        );
        assert_eq!(
            parse_statement("SELECT * FROM q ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1").unwrap(),
            Statement::Query(Query {
                table: "q".into(),
                columns: None,
                filter: None,
                order_by: Some(("id".into(), false)),
                limit: Some(1),
                lock: Some((RowLockStrength::Update, WaitPolicy::Skip)),
            })
        );
        let Statement::Query(q) =
            parse_statement("select a, b from t where a = 3 for no key update nowait").unwrap()
        else {
            panic!()
        };
        assert_eq!(q.filter, Some(Cond::Eq("a".into(), Value::Int(3))));
        assert_eq!(
            parse_statement(
                "UPDATE t SET v = v + 1, w = DEFAULT WHERE pg_advisory_lock_shared(7) IS NOT NULL"
            )
            .unwrap(),
            Statement::Update(Update {
                table: "t".into(),
                set: vec![("v".into(), Expr::Column("v".into(), 1)), ("w".into(), Expr::Default)],
                filter: Some(Cond::CallNotNull(Call::Advisory(
                    AdvisoryFn { op: AdvisoryOp::Lock, xact: false, shared: true },
                    AdvisoryKey::Int8(7)
                ))),
            })
        );
        assert_eq!(
            parse_statement("DELETE FROM t WHERE k = 'a'").unwrap(),
            Statement::Delete {
                table: "t".into(),
                filter: Some(Cond::Eq("k".into(), Value::Text("a".into())))
            }
        );
        assert_eq!(q.lock, Some((RowLockStrength::NoKeyUpdate, WaitPolicy::Error)));
        for bad in [
            "SELECT * FROM t WHERE a > 1",
            "SELECT * FROM t WHERE a = 1 AND b = 2",
            "UPDATE t SET a = b * 2",
            "SELECT * FROM t FOR UPDATE OF t",
            "CREATE TABLE t (a float)",
            "CREATE TABLE t (a int UNIQUE)",
            "INSERT INTO t SELECT 1",
        ] {
            assert!(parse_statement(bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_statement("drop table if exists a, b").unwrap(),
            Statement::DropTable { tables: vec!["a".into(), "b".into()], if_exists: true }
        );
    }

    #[test]
    fn bigint_keys_cover_the_whole_range() {
        for (text, key) in [("-9223372036854775808", i64::MIN), ("9223372036854775807", i64::MAX), ("-1", -1)]
        {
            let Statement::Select(c) = parse_statement(&format!("SELECT pg_advisory_lock({text})")).unwrap()
            else {
                panic!()
            };
            assert_eq!(
                c[0].1,
                Call::Advisory(
                    AdvisoryFn { op: AdvisoryOp::Lock, xact: false, shared: false },
                    AdvisoryKey::Int8(key)
                )
            );
        }
        let e = parse_statement("SELECT pg_advisory_lock(-9223372036854775809)").unwrap_err();
        assert_eq!(e, "integer out of range: -9223372036854775809");
    }

    /// Isolation levels other than READ COMMITTED, READ ONLY, SET LOCAL and
    /// SET TRANSACTION were accepted and run as plain READ COMMITTED statements; they are
    /// refused as unsupported, and what PostgreSQL itself runs as READ COMMITTED is accepted.
    #[test]
    fn unimplemented_transaction_modes_are_refused() {
        for ok in [
            "BEGIN",
            "begin transaction isolation level read committed",
            "START TRANSACTION ISOLATION LEVEL READ UNCOMMITTED, READ WRITE",
            "BEGIN WORK READ WRITE NOT DEFERRABLE",
            "BEGIN ISOLATION LEVEL READ COMMITTED DEFERRABLE",
        ] {
            assert_eq!(parse_statement(ok), Ok(Statement::Begin { repeatable_read: false }), "{ok}");
        }
        for rr in [
            "BEGIN ISOLATION LEVEL REPEATABLE READ",
            "start transaction read write, isolation level repeatable read",
        ] {
            assert_eq!(parse_statement(rr), Ok(Statement::Begin { repeatable_read: true }), "{rr}");
        }
        for (bad, want) in [
            ("begin isolation level serializable", "unsupported: ISOLATION LEVEL SERIALIZABLE"),
            ("START TRANSACTION READ WRITE, ISOLATION LEVEL SERIALIZABLE", "unsupported: ISOLATION LEVEL"),
            ("BEGIN READ ONLY", "unsupported: READ ONLY"),
            ("BEGIN ISOLATION LEVEL", "expected an isolation level"),
            ("BEGIN FOO", "unexpected text at the end"),
            ("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", "unsupported: SET TRANSACTION"),
            (
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                "unsupported: SET TRANSACTION",
            ),
            ("SET LOCAL lock_timeout = 10", "unsupported: SET LOCAL"),
            ("LOCK TABLE ONLY t", "unexpected text at the end"),
            ("DROP TABLE t CASCADE", "unexpected text at the end"),
        ] {
            let e = parse_statement(bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
        let e = parse_block("BEGIN\n  ISOLATION LEVEL\n  SERIALIZABLE;").unwrap_err();
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn parses_savepoint_statements() {
        assert_eq!(
            parse_block("SAVEPOINT Sp1; ROLLBACK TO sp1; ROLLBACK WORK TO SAVEPOINT \"Sp1\"; RELEASE sp1; RELEASE SAVEPOINT sp1")
                .unwrap(),
            vec![
                Statement::Savepoint("sp1".into()),
                Statement::RollbackTo("sp1".into()),
                Statement::RollbackTo("Sp1".into()),
                Statement::Release("sp1".into()),
                Statement::Release("sp1".into()),
            ]
        );
        assert_eq!(parse_statement("ROLLBACK").unwrap(), Statement::Rollback);
        for bad in ["SAVEPOINT", "RELEASE", "ROLLBACK TO", "ABORT TO sp", "SAVEPOINT a b"] {
            assert!(parse_statement(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rejects_the_rest() {
        assert!(parse_statement("MERGE INTO t USING u ON true").unwrap_err().contains("unsupported SQL"));
        assert!(parse_statement("SELECT now()").unwrap_err().contains("unsupported function"));
        assert!(parse_statement("SET work_mem = 1").unwrap_err().contains("unsupported parameter"));
        assert!(parse_statement("LOCK t IN FOO MODE").unwrap_err().contains("unknown lock mode"));
        assert!(parse_statement("SELECT pg_advisory_lock(1, 2, 3)").is_err());
        assert_eq!(
            parse_statement("SET lock_timeout = -1").unwrap(),
            Statement::Set { guc: Guc::LockTimeout, value: Some("-1".into()) },
            "a negative value parses; the range check happens when the step runs"
        );
    }
}
