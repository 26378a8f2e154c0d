//! pgbench's expression language (the right-hand side of `\set`), parsed and evaluated.
//!
//! Follows the grammar and semantics of `src/bin/pgbench/exprparse.y` and `evalFunc` in
//! `pgbench.c` (PostgreSQL 15): 64-bit integers and doubles, `:variables`, the operators
//! `+ - * / %`, comparisons, `AND OR NOT`, bitwise `& | # << >> ~`, `CASE`-free, and the
//! functions `abs`, `double`, `exp`, `greatest`, `int`, `least`, `ln`, `mod`, `pi`, `pow` /
//! `power`, `sqrt`, `random`, `random_exponential`, `random_gaussian`, `random_zipfian`. Integer
//! overflow and division by zero are errors, as in pgbench.

mod ast;
mod error;
mod eval;
mod limits;
mod parse;

pub use ast::{BinOp, Expr, Func, Value};
pub use error::ExprError;
pub use eval::{ClientRng, Vars, client_rng, eval};
pub use limits::{MAX_EXPR_DEPTH, MAX_EXPR_LEN, MAX_ZIPFIAN_PARAM, MIN_GAUSSIAN_PARAM, MIN_ZIPFIAN_PARAM};
pub use parse::parse;

#[cfg(test)]
mod tests;
