//! The lockstack workloads: what runs on top of the engine's access layer
//! (`lockstack_engine`: heap, B-tree, sessions and statements, MultiXacts, tables, the data
//! directory, settings) and is what the `lockstack` command calls.
//!
//! pgbench ([`pgbench`]: its script language, built-in scripts and runner), the isolation-spec
//! runner ([`isolation`]), the per-crate micro-experiments ([`micro`]), the seed experiments
//! ([`experiments`]) and the report they all print ([`report`]); the knobs they are configured
//! with ([`settings`]: the engine's and the simulated machine's, [`sim_knobs`]). Each follows one pattern: a
//! plain config struct in, a serialisable result out, no printing (the CLI formats). The engine
//! knows nothing of these: pgbench maps its four tables onto the engine's catalog
//! (`lockstack_engine::tables::TableId`).

pub mod experiments;
pub mod input;
pub mod isolation;
pub mod layout;
pub mod micro;
pub mod pgbench;
pub mod report;
pub mod settings;
pub mod sim_knobs;
