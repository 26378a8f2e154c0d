//! The expression tree: values ([`Value`]: 64-bit integers and doubles), operators
//! ([`BinOp`]), functions ([`Func`]), expressions ([`Expr`]) and the bounds of the random
//! functions' parameters.

use std::fmt;

use super::error::ExprError;

/// A value: pgbench evaluates to a 64-bit integer, a double, or a boolean.
#[derive(Copy, Clone, Debug, PartialEq)]
pub enum Value {
    /// A 64-bit integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A boolean (comparisons, `AND`/`OR`/`NOT`).
    Bool(bool),
}

impl Value {
    /// The value as an integer (doubles are truncated toward zero, booleans are 0/1), as
    /// pgbench's `coerceToInt`.
    ///
    /// # Errors
    /// [`ExprError::DoubleToIntOverflow`]: a double outside the 64-bit range, or NaN.
    pub fn to_int(self) -> Result<i64, ExprError> {
        match self {
            Value::Int(i) => Ok(i),
            Value::Bool(b) => Ok(i64::from(b)),
            Value::Double(d) => {
                if d.is_nan() || d < i64::MIN as f64 || d >= i64::MAX as f64 {
                    Err(ExprError::DoubleToIntOverflow(d))
                } else {
                    Ok(d as i64)
                }
            }
        }
    }

    /// The value as a double.
    pub fn as_double(self) -> f64 {
        match self {
            Value::Int(i) => i as f64,
            Value::Double(d) => d,
            Value::Bool(b) => f64::from(u8::from(b)),
        }
    }

    pub(super) fn as_bool(self) -> bool {
        match self {
            Value::Bool(b) => b,
            Value::Int(i) => i != 0,
            Value::Double(d) => d != 0.0,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{d}"),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// Binary operators.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (integer division truncates toward zero)
    Div,
    /// `%`
    Mod,
    /// `=`
    Eq,
    /// `<>` or `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `&`
    BitAnd,
    /// `|`
    BitOr,
    /// `#` (xor)
    BitXor,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
}

/// The built-in functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Func {
    /// `abs(x)`
    Abs,
    /// `double(x)`
    Double,
    /// `exp(x)`
    Exp,
    /// `greatest(a, ...)`
    Greatest,
    /// `int(x)`
    Int,
    /// `least(a, ...)`
    Least,
    /// `ln(x)`
    Ln,
    /// `mod(a, b)`
    Mod,
    /// `pi()`
    Pi,
    /// `pow(a, b)` / `power(a, b)`
    Pow,
    /// `sqrt(x)`
    Sqrt,
    /// `random(lb, ub)`: uniform integer in `[lb, ub]`.
    Random,
    /// `random_exponential(lb, ub, parameter)`.
    RandomExponential,
    /// `random_gaussian(lb, ub, parameter)`.
    RandomGaussian,
    /// `random_zipfian(lb, ub, parameter)`.
    RandomZipfian,
}

impl Func {
    pub(super) fn lookup(name: &str) -> Option<(Func, usize, Option<usize>)> {
        // (function, min args, max args; None = variadic)
        Some(match name.to_ascii_lowercase().as_str() {
            "abs" => (Func::Abs, 1, Some(1)),
            "double" => (Func::Double, 1, Some(1)),
            "exp" => (Func::Exp, 1, Some(1)),
            "greatest" => (Func::Greatest, 1, None),
            "int" => (Func::Int, 1, Some(1)),
            "least" => (Func::Least, 1, None),
            "ln" => (Func::Ln, 1, Some(1)),
            "mod" => (Func::Mod, 2, Some(2)),
            "pi" => (Func::Pi, 0, Some(0)),
            "pow" | "power" => (Func::Pow, 2, Some(2)),
            "sqrt" => (Func::Sqrt, 1, Some(1)),
            "random" => (Func::Random, 2, Some(2)),
            "random_exponential" => (Func::RandomExponential, 3, Some(3)),
            "random_gaussian" => (Func::RandomGaussian, 3, Some(3)),
            "random_zipfian" => (Func::RandomZipfian, 3, Some(3)),
            _ => return None,
        })
    }
}

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A constant.
    Const(Value),
    /// `:name`.
    Var(String),
    /// `:name` resolved to index `.0` of a client's variable table ([`Expr::resolve`]; the
    /// parser never produces it). pgbench 15 looks variables up by name (a binary search of
    /// the client's sorted array); a slot index gives the same value without the search.
    Slot(usize, Box<str>),
    /// Unary minus.
    Neg(Box<Expr>),
    /// `NOT x`.
    Not(Box<Expr>),
    /// `~x` (bitwise not).
    BitNot(Box<Expr>),
    /// `a op b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `f(args)`.
    Call(Func, Vec<Expr>),
}
