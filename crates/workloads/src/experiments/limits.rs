//! Names and bounds that the experiments' plans, their errors, the point files and the user
//! directory share: one place below all of them, so that the error types can name them without
//! importing the modules that use them. No locks.

/// Largest client count accepted (pgbench's own limit on `-c` in our CLI).
pub const MAX_CLIENTS: usize = 1000;

/// Largest `--runs`.
pub const MAX_RUNS: usize = 100;

/// Largest `--duration`, seconds.
pub const MAX_DURATION_S: f64 = 3600.0;

/// The knob `vm-pin` varies: which visibility check the buffer workers use
/// (`page-flag-first`, `always-vm`, `always-vm-keep-pin`; seed 004's three patches), the
/// engine config's [`vm_check`](crate::engine::EngineConfig::vm_check). Only the buffer
/// workloads read it (the engine's transactions do not consult the visibility map), so the
/// other experiments refuse it.
pub const VM_CHECK_KEY: &str = "vm.check";

/// The `format` field of a point file ([`super::points`]); a file with another is refused.
pub const FORMAT: &str = "lockstack-experiment-point/1";

/// The environment variable naming the user's directory ([`super::user_dir`]).
pub const ENV: &str = "LOCKSTACK_HOME";
