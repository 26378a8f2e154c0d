//! The expression language's limits: the random functions' parameter bounds (pgbench's) and
//! how deep and long an expression may be (ours). Below the parser, the evaluator and their
//! error type, which all name them. No locks.

/// pgbench's limits for the random functions (`pgbench.c`): gaussian parameter at least 2.0,
/// zipfian parameter in [1.001, 1000].
pub const MIN_GAUSSIAN_PARAM: f64 = 2.0;

/// Smallest zipfian parameter pgbench accepts.
pub const MIN_ZIPFIAN_PARAM: f64 = 1.001;

/// Largest zipfian parameter pgbench accepts.
pub const MAX_ZIPFIAN_PARAM: f64 = 1000.0;

/// The deepest expression tree [`super::parse()`] accepts (nested parentheses, unary operators, calls,
/// and operator chains such as a sum of many terms all count). Parsing, folding, evaluating and
/// dropping an expression recurse once per level; at this depth each takes under 1 MiB of stack
/// even in an unoptimised build (measured: a 256-level parse and evaluation fit in 1 MiB there,
/// in well under 512 KiB optimised), so they stay inside a client thread's default 2 MiB.
/// pgbench's bison parser allows deeper nesting (`YYMAXDEPTH`, 10000 states) but pgbench
/// scripts use a handful of levels.
pub const MAX_EXPR_DEPTH: usize = 256;

/// The longest expression text [`super::parse()`] accepts, bytes.
pub const MAX_EXPR_LEN: usize = 100_000;
