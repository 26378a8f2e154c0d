//! The isolation runner's SQL error ([`SqlError`]): why a step's SQL was refused before
//! anything ran, as one line. Touches no locks.

/// Why the SQL of a spec's block could not be parsed, or lies outside the subset the runner
/// executes (`sql.rs`). Displays as one line (the statement is quoted single-spaced).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// A token other than the one the grammar needs here (what was expected, e.g.
    /// `INTO after INSERT`).
    #[error("expected {0}")]
    Expected(&'static str),
    /// A construct of valid SQL that the runner does not implement (what it is, and what is).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// A statement the runner does not know at all (the statement).
    #[error("unsupported SQL: {0}")]
    UnsupportedSql(String),
    /// A statement whose text could not be split into tokens.
    #[error("unsupported SQL ({error}): {sql}")]
    Lexical {
        /// The scanner's complaint.
        error: Box<SqlError>,
        /// The statement.
        sql: String,
    },
    /// A statement with text left over after what the runner understood (the statement).
    #[error("unsupported SQL (unexpected text at the end): {0}")]
    TrailingText(String),
    /// An error inside a statement, followed by the statement it is in.
    #[error("{error} in: {sql}")]
    InStatement {
        /// What is wrong.
        error: Box<SqlError>,
        /// The statement.
        sql: String,
    },
    /// A quoted string with no closing quote (the quote character).
    #[error("unterminated quoted string starting with {0}")]
    UnterminatedQuote(char),
    /// A character the scanner does not know.
    #[error("unexpected character '{0}'")]
    UnexpectedCharacter(char),
    /// An integer constant that does not fit its type (the constant as written).
    #[error("integer out of range: {0}")]
    IntegerOutOfRange(String),
    /// The negation of an integer constant does not fit 64 bits.
    #[error("integer out of range")]
    NegatedIntegerOutOfRange,
    /// `LIMIT` with a negative count.
    #[error("LIMIT must not be negative")]
    NegativeLimit,
    /// A key constraint naming a column the table does not have.
    #[error("column \"{0}\" named in key does not exist")]
    KeyColumnMissing(String),
    /// A foreign key naming a column the table does not have.
    #[error("column \"{0}\" referenced in foreign key constraint does not exist")]
    ForeignKeyColumnMissing(String),
    /// A second primary key for the named table.
    #[error("multiple primary keys for table \"{0}\" are not allowed")]
    MultiplePrimaryKeys(String),
    /// A column definition without its type (the column).
    #[error("expected a type for column \"{0}\"")]
    ExpectedColumnType(String),
    /// A column type outside int4, int8, serial, bigserial, text and numeric (the type).
    #[error(
        "unsupported: column type \"{0}\" (int4, int8, serial, bigserial, text, numeric without precision)"
    )]
    UnsupportedColumnType(String),
    /// A savepoint command without its name (the statement).
    #[error("expected a savepoint name: {0}")]
    ExpectedSavepointName(String),
    /// `SET LOCAL` (the statement).
    #[error("unsupported: SET LOCAL (use SET): {0}")]
    SetLocal(String),
    /// `SET TRANSACTION` or `SET SESSION CHARACTERISTICS` (the statement).
    #[error(
        "unsupported: SET TRANSACTION / SET SESSION CHARACTERISTICS (only the default READ COMMITTED \
         transactions are implemented): {0}"
    )]
    SetTransaction(String),
    /// `SET` or `RESET` of a parameter other than the three lock timeouts (the parameter).
    #[error("unsupported parameter \"{0}\" (supported: deadlock_timeout, lock_timeout, statement_timeout)")]
    UnsupportedParameter(String),
    /// `SET name` not followed by `=` or `TO` (the parameter).
    #[error("expected = or TO after SET {0}")]
    ExpectedSetSeparator(String),
    /// `SET name =` not followed by a value (the parameter).
    #[error("expected a value for {0}")]
    ExpectedSetValue(String),
    /// `SELECT current_setting` without `('name'` (the statement).
    #[error("expected current_setting('name'): {0}")]
    ExpectedSettingName(String),
    /// `SELECT current_setting('name'` without `)` (the statement).
    #[error("expected ) after current_setting('name': {0}")]
    ExpectedSettingClose(String),
    /// `current_setting` of a parameter the runner does not report.
    #[error(
        "unsupported: current_setting('{name}') (default_transaction_isolation, transaction_isolation): {sql}"
    )]
    UnsupportedSetting {
        /// The parameter, lower case.
        name: String,
        /// The statement.
        sql: String,
    },
    /// `current_setting(...)` compared with something other than a string (the statement).
    #[error("unsupported: a comparison of current_setting with a non-string: {0}")]
    NonStringSettingComparison(String),
    /// A function other than the advisory-lock functions (the function).
    #[error("unsupported function \"{0}\"")]
    UnsupportedFunction(String),
    /// A function name not followed by `(` (the function).
    #[error("expected ( after {0}")]
    ExpectedOpenParen(String),
    /// A function's argument not followed by `,` or `)` (the function).
    #[error("expected , or ) in arguments of {0}")]
    ExpectedCommaOrParen(String),
    /// `pg_advisory_unlock_all` with arguments (the function).
    #[error("{0}() takes no arguments")]
    TakesNoArguments(String),
    /// An advisory-lock function with neither one nor two arguments (the function).
    #[error("{0} takes one bigint or two int arguments")]
    AdvisoryArguments(String),
    /// `LOCK ... IN mode MODE` with an unknown mode (the mode, upper case).
    #[error("unknown lock mode \"{0}\"")]
    UnknownLockMode(String),
}

impl SqlError {
    /// This error followed by ` in: SQL`, the statement it is in.
    pub(crate) fn in_statement(self, sql: &str) -> SqlError {
        SqlError::InStatement { error: Box::new(self), sql: sql.to_string() }
    }
}

/// For callers that carry errors as text: the message, as displayed.
impl From<SqlError> for String {
    fn from(e: SqlError) -> String {
        e.to_string()
    }
}
