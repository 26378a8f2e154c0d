//! The expression language's error ([`ExprError`]): what parsing or evaluating a `\set`
//! expression can fail on, with the message pgbench would print. Touches no locks.

use super::limits::{MAX_EXPR_DEPTH, MAX_EXPR_LEN, MAX_ZIPFIAN_PARAM, MIN_GAUSSIAN_PARAM, MIN_ZIPFIAN_PARAM};

/// Why an expression could not be parsed or evaluated (`exprscan.l`, `exprparse.y` and
/// `evalFunc` in `src/bin/pgbench`, PostgreSQL 15). Displays as one line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// A double (or NaN) outside the 64-bit integer range was coerced to an integer.
    #[error("double to int overflow for {0}")]
    DoubleToIntOverflow(f64),
    /// An integer operation overflowed 64 bits.
    #[error("bigint out of range")]
    BigintOutOfRange,
    /// A random function was given `lb > ub`; `func` is its name.
    #[error("empty range given to {func}: {lb} > {ub}")]
    EmptyRange {
        /// The random function (`random`, `random_exponential`, ...).
        func: &'static str,
        /// The lower bound given.
        lb: i64,
        /// The upper bound given.
        ub: i64,
    },
    /// `random`'s range `ub - lb` does not fit in 64 bits.
    #[error("random range is too large")]
    RandomRangeTooLarge,
    /// `random_exponential`'s parameter is not positive.
    #[error("exponential parameter must be greater than zero (got {0})")]
    ExponentialParameter(f64),
    /// `random_gaussian`'s parameter is below [`MIN_GAUSSIAN_PARAM`].
    #[error("gaussian parameter must be at least {min:.6} (got {0:.6})", min = MIN_GAUSSIAN_PARAM)]
    GaussianParameter(f64),
    /// `random_zipfian`'s parameter is outside `[MIN_ZIPFIAN_PARAM, MAX_ZIPFIAN_PARAM]`.
    #[error("zipfian parameter must be in range [{min:.3}, {max:.0}] (got {0})", min = MIN_ZIPFIAN_PARAM, max = MAX_ZIPFIAN_PARAM)]
    ZipfianParameter(f64),
    /// A `:variable` with no value.
    #[error("undefined variable \"{0}\"")]
    UndefinedVariable(String),
    /// Integer `/` or `%` by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// `ln` of zero or a negative number.
    #[error("cannot take logarithm of a non-positive number")]
    LogOfNonPositive,
    /// A double constant that overflows or underflows (the text as written).
    #[error("double constant out of range: \"{0}\"")]
    DoubleConstantOutOfRange(String),
    /// A number the scanner could not read (the text as written).
    #[error("invalid number \"{0}\"")]
    InvalidNumber(String),
    /// An integer constant outside the 64-bit range (the text as written).
    #[error("bigint out of range: \"{0}\"")]
    BigintConstantOutOfRange(String),
    /// A `:` not followed by a variable name.
    #[error("expected a variable name after ':'")]
    ExpectedVariableName,
    /// A character the scanner does not know.
    #[error("unexpected character '{}'", .0.escape_debug())]
    UnexpectedCharacter(char),
    /// The expression nests deeper than [`MAX_EXPR_DEPTH`] levels.
    #[error("expression is too deeply nested (more than {max} levels)", max = MAX_EXPR_DEPTH)]
    TooDeep,
    /// `a < b < c` and the like.
    #[error("comparison operators cannot be chained")]
    ChainedComparison,
    /// An opening parenthesis without its `)`.
    #[error("expected ')'")]
    ExpectedCloseParen,
    /// A token where an operand was expected (the token, as the scanner shows it).
    #[error("syntax error at {0}")]
    SyntaxError(String),
    /// The text ended where an operand was expected.
    #[error("unexpected end of expression")]
    UnexpectedEnd,
    /// A call of a function pgbench does not have.
    #[error("unexpected function name \"{0}\"")]
    UnknownFunction(String),
    /// A function name not followed by `(`.
    #[error("expected '(' after function name \"{0}\"")]
    ExpectedOpenParen(String),
    /// An argument list of the named function not continued by `,` or closed by `)`.
    #[error("expected ',' or ')' in call of \"{0}\"")]
    ExpectedCommaOrParen(String),
    /// A function called with the wrong number of arguments.
    #[error("wrong number of arguments ({count}) for function \"{name}\"")]
    WrongArgumentCount {
        /// How many arguments were given.
        count: usize,
        /// The function's name as written.
        name: String,
    },
    /// The text is longer than [`MAX_EXPR_LEN`] bytes (its length, bytes).
    #[error("expression is too long ({0} bytes, at most {max})", max = MAX_EXPR_LEN)]
    TooLong(usize),
    /// The text holds no tokens.
    #[error("missing expression")]
    MissingExpression,
    /// A complete expression followed by more tokens (the first, as the scanner shows it).
    #[error("unexpected {0} after expression")]
    TrailingToken(String),
}

/// For callers that carry errors as text: the message, as displayed.
impl From<ExprError> for String {
    fn from(e: ExprError) -> String {
        e.to_string()
    }
}
