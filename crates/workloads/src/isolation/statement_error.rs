//! [`StatementError`]: why a connection's statement failed at run time, as the server's
//! primary message (`ERROR:  ...` without the severity). Touches no locks.

use lockstack_engine::usertable::CoerceError;
use lockstack_lmgr::LockError;

/// Why a statement failed when a connection ran it; displays as PostgreSQL's primary message
/// for the same failure (the isolation tester prints it after `ERROR:  `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StatementError {
    /// An error the engine raised (its primary message: the engine's errors are of many
    /// shapes, from SQL refusals to buffer and WAL failures).
    #[error("{0}")]
    Engine(String),
    /// A heavyweight lock request failed (deadlock, lock timeout, NOWAIT).
    #[error("{}", .0.message())]
    Lock(LockError),
    /// A lock wait bounded by `statement_timeout` ran out.
    #[error("canceling statement due to statement timeout")]
    StatementTimeout,
    /// A command that needs a transaction block ran outside one (the command, e.g.
    /// `LOCK TABLE`, `SAVEPOINT`).
    #[error("{0} can only be used in transaction blocks")]
    OutsideBlock(&'static str),
    /// `LOCK TABLE ... NOWAIT` found the relation locked (the relation, as named).
    #[error("could not obtain lock on relation \"{0}\"")]
    RelationNotAvailable(String),
    /// `ROLLBACK TO` after the error that rolled the whole transaction back (the savepoint).
    #[error("savepoint \"{0}\" does not exist")]
    NoSavepoint(String),
    /// A command the runner cannot undo at `ROLLBACK TO`, inside a subtransaction (the
    /// command, e.g. `SET`).
    #[error("unsupported: {0} inside a subtransaction (ROLLBACK TO would not undo it)")]
    InSubtransaction(&'static str),
    /// A column the table does not have, named as a target.
    #[error("column \"{column}\" of relation \"{table}\" does not exist")]
    NoColumnOfRelation {
        /// The column.
        column: String,
        /// The table.
        table: String,
    },
    /// A column the table does not have, named in an expression (the column).
    #[error("column \"{0}\" does not exist")]
    NoColumn(String),
    /// An `INSERT` row with more values than target columns.
    #[error("INSERT has more expressions than target columns")]
    TooManyExpressions,
    /// `SET c = text_column + n` (the text column).
    #[error("operator does not exist: text + integer (column \"{0}\")")]
    TextPlusInteger(String),
    /// `WHERE c = NULL`, which is never true.
    #[error("unsupported: comparison with NULL in WHERE (always null)")]
    NullComparison,
    /// A value that does not fit its column.
    #[error(transparent)]
    Coerce(#[from] CoerceError),
    /// A `SET` value that is not a duration.
    #[error("invalid value for parameter \"{parameter}\": \"{value}\"")]
    InvalidValue {
        /// The parameter.
        parameter: &'static str,
        /// The value, as given.
        value: String,
    },
    /// A `SET` duration outside 0 .. 2147483647 ms.
    #[error("{value} is outside the valid range for parameter \"{parameter}\" (0 .. 2147483647)")]
    OutOfRange {
        /// The parameter.
        parameter: &'static str,
        /// The value, as given.
        value: String,
    },
    /// `SET deadlock_timeout = 0`.
    #[error("0 ms is outside the valid range for parameter \"deadlock_timeout\" (1 ms .. 2147483647 ms)")]
    ZeroDeadlockTimeout,
}
