//! The lockstack integration crate: it wires the subsystem crates into workloads and
//! experiments, and is what the `lockstack` command calls.
//!
//! Today it hosts the per-crate micro-experiments ([`micro`]); the transaction engine, the
//! pgbench runner and the seed experiments build on the same pattern: a plain config struct in,
//! a serialisable result out, no printing (the CLI formats).

pub mod btree;
pub mod datadir;
pub mod engine;
pub mod experiments;
pub mod heap;
pub mod input;
pub mod isolation;
pub mod micro;
pub mod multixact;
pub mod pgbench;
pub mod report;
pub mod settings;
pub mod simcheck;
pub mod tables;
