//! The lock functions the isolation runner's SQL calls: PostgreSQL's advisory-lock functions
//! (`pg_[try_]advisory[_xact]_lock[_shared]`, `pg_advisory_unlock[_shared]`,
//! `pg_advisory_unlock_all`) with their keys, and the lock-mode names of `LOCK TABLE ... IN
//! mode MODE`. Parsing only: the heavyweight locks they name are taken by `conn.rs`.

use lockstack_lmgr::LockMode;

use super::lexer::P;
use crate::isolation::SqlError;

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

/// A call of an advisory-lock function: `name(args)`.
pub(super) fn parse_call(p: &mut P) -> Result<Call, SqlError> {
    let f = p.word().ok_or(SqlError::Expected("a function name"))?.to_string();
    p.i += 1;
    let mut call = parse_advisory(&f).ok_or_else(|| SqlError::UnsupportedFunction(f.clone()))?;
    if !p.eat_p('(') {
        return Err(SqlError::ExpectedOpenParen(f));
    }
    let mut args = Vec::new();
    if !p.eat_p(')') {
        loop {
            args.push(p.int()?);
            if p.eat_p(')') {
                break;
            }
            if !p.eat_p(',') {
                return Err(SqlError::ExpectedCommaOrParen(f));
            }
        }
    }
    match &mut call {
        Call::UnlockAll if !args.is_empty() => return Err(SqlError::TakesNoArguments(f)),
        Call::UnlockAll => {}
        Call::Advisory(_, key) => {
            *key = match args[..] {
                [k] => AdvisoryKey::Int8(k),
                [a, b] => AdvisoryKey::Int4(
                    i32::try_from(a).map_err(|_| SqlError::IntegerOutOfRange(a.to_string()))?,
                    i32::try_from(b).map_err(|_| SqlError::IntegerOutOfRange(b.to_string()))?,
                ),
                _ => return Err(SqlError::AdvisoryArguments(f)),
            }
        }
    }
    Ok(call)
}

pub(super) fn parse_mode(p: &mut P) -> Result<LockMode, SqlError> {
    let mut words = Vec::new();
    while let Some(w) = p.word() {
        if w == "mode" {
            break;
        }
        words.push(w.to_string());
        p.i += 1;
    }
    if !p.eat("mode") {
        return Err(SqlError::Expected("IN <lockmode> MODE"));
    }
    let text = words.join(" ");
    text.parse::<LockMode>().map_err(|_| SqlError::UnknownLockMode(text.to_uppercase()))
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
