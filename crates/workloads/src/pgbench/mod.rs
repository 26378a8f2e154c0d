//! pgbench: its script language, built-in scripts, and (with the engine) its runner.

pub mod expr;
pub mod runner;
pub mod script;
