//! A pgbench script's errors: [`ScriptError`] (`FILE:LINE:` and what is wrong,
//! [`ScriptErrorKind`]) and [`BuiltinError`] (a `-b` name that names no built-in). Touches no
//! locks.

use super::MAX_SCRIPT_BYTES;
use crate::pgbench::expr::ExprError;

/// A script that could not be parsed: `FILE:LINE: message`, on one line (control characters
/// of the input are escaped).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {}", crate::input::one_line(&.kind.to_string()))]
pub struct ScriptError {
    /// The script's name (file name or built-in name), control characters escaped.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub kind: ScriptErrorKind,
}

/// What is wrong with a script's command (pgbench's `ParseScript` and `process_backslash_command`,
/// PostgreSQL 15, or a statement this engine does not run).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ScriptErrorKind {
    /// The text is longer than [`MAX_SCRIPT_BYTES`].
    #[error("script is larger than {max} bytes, the most accepted", max = MAX_SCRIPT_BYTES)]
    TooLarge,
    /// The script holds no command.
    #[error("empty command list for script")]
    Empty,
    /// A meta-command (`set`, `sleep`) without its argument.
    #[error("missing argument in command \"{0}\"")]
    MissingArgument(&'static str),
    /// `\set` with a variable name that is not letters, digits and `_`.
    #[error("invalid variable name: \"{0}\"")]
    InvalidVariableName(String),
    /// `\set VAR` with an expression that does not parse.
    #[error("\\set {var}: {error}")]
    SetExpression {
        /// The variable being set.
        var: String,
        /// Why the expression does not parse.
        error: ExprError,
    },
    /// `\sleep` with more than an amount and a unit.
    #[error("too many arguments in command \"sleep\"")]
    TooManySleepArguments,
    /// `\sleep` with a unit other than `us`, `ms` or `s`.
    #[error("unrecognized time unit, must be us, ms or s: \"{0}\"")]
    UnrecognizedTimeUnit(String),
    /// `\sleep` with an amount that is neither an integer nor a `:variable`.
    #[error("invalid sleep time: \"{0}\"")]
    InvalidSleepTime(String),
    /// A meta-command other than `\set` and `\sleep` (its text after the backslash).
    #[error("unsupported statement: \\{0}")]
    UnsupportedMetaCommand(String),
    /// SQL that is not one of the statements the engine runs (its words, single-spaced).
    #[error("unsupported statement: {0}")]
    UnsupportedStatement(String),
    /// A clause of an otherwise supported statement that the engine does not implement.
    #[error("unsupported: {clause}: {sql}")]
    UnsupportedClause {
        /// The clause and why it is refused.
        clause: String,
        /// The statement's words, single-spaced.
        sql: String,
    },
}

/// A name that selects no built-in script (pgbench's `-b`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuiltinError {
    /// No built-in has this name or prefix.
    #[error("no builtin script found for name \"{0}\" (available: tpcb-like, simple-update, select-only)")]
    NotFound(String),
    /// More than one built-in starts with this prefix.
    #[error("ambiguous builtin name: {count} builtin scripts found for prefix \"{prefix}\"")]
    Ambiguous {
        /// How many built-ins match.
        count: usize,
        /// The prefix given.
        prefix: String,
    },
}

/// For callers that carry errors as text: the message, as displayed.
impl From<BuiltinError> for String {
    fn from(e: BuiltinError) -> String {
        e.to_string()
    }
}
