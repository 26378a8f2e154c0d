//! The lockstack engine: the access layer that wires the subsystem crates into a small
//! transaction engine. Heap tuples and their visibility ([`heap`]), the B-tree ([`btree`]),
//! MultiXacts ([`multixact`]), pgbench's tables in the buffer pool ([`tables`]), user tables
//! ([`usertable`]), the engine with its
//! sessions and statements ([`engine`], [`session`], [`error`]), the data directory ([`datadir`]), its
//! configuration ([`config`]) and the settings ([`settings`]).
//!
//! It knows no workload: pgbench, the isolation runner and the experiments live in
//! `lockstack-workloads` on top of it.

pub mod btree;
pub mod config;
pub mod datadir;
pub mod engine;
pub mod error;
pub mod heap;
pub mod multixact;
pub mod session;
pub mod settings;
pub mod simcheck;
pub mod tables;
pub mod usertable;
