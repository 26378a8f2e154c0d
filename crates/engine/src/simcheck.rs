//! Which configurations the simulated machine (`--machine`) must refuse: those whose
//! synchronization lives inside a dependency and so never reaches the sync facade's
//! [`hook`](lockstack_common::sync::hook). A simulation of them would run that dependency's
//! locks natively, free of cost and outside virtual time (a task blocked on one would block the
//! whole simulated machine's host thread).
//!
//! Found by searching the workspace for synchronization outside `lockstack_common::sync`
//! (`dashmap`, `parking_lot`, `crossbeam` channels and queues, `std::sync`):
//! * `bufmgr.mapping=dashmap`: `dashmap::DashMap`'s shard `RwLock`s (its own, not the facade's).
//! * the LWLock micro-benchmark's `parking_lot` and `std` baselines, refused by
//!   `lockstack_workloads::micro::lwlock::unsupported_locks_under_simulation`.
//!
//! Everything else (crossbeam is used only for `CachePadded`, a layout) goes through the facade.

use lockstack_bufmgr::{BufferPoolConfig, MappingKind};

use crate::engine::EngineConfig;

/// Why the engine configuration `cfg` cannot be simulated, in one line naming the knob and its
/// value (`bufmgr.mapping=dashmap: ...`), or `None` when every lock it uses reports to the
/// simulation hook.
pub fn unsupported_under_simulation(cfg: &EngineConfig) -> Option<String> {
    unsupported_pool_under_simulation(&cfg.bufmgr)
}

/// [`unsupported_under_simulation`] for a buffer pool alone (`lockstack buffers`).
pub fn unsupported_pool_under_simulation(cfg: &BufferPoolConfig) -> Option<String> {
    match cfg.mapping {
        MappingKind::DashMap => Some(
            "bufmgr.mapping=dashmap: dashmap's shard locks are its own, invisible to the simulated machine \
             (use partitions-16 or partitions-128)"
                .to_string(),
        ),
        MappingKind::Partitioned { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashmap_is_refused_and_the_presets_are_not() {
        for p in ["pg91", "pg92", "pg96", "pg14", "pg17"] {
            let cfg = EngineConfig::preset(p, 4, 1024).expect("a preset");
            assert_eq!(unsupported_under_simulation(&cfg), None, "preset {p}");
        }
        let mut cfg = EngineConfig::new(4, 1024);
        assert_eq!(unsupported_under_simulation(&cfg), None);
        cfg.bufmgr.mapping = MappingKind::DashMap;
        let why = unsupported_under_simulation(&cfg).expect("dashmap is refused");
        assert!(why.starts_with("bufmgr.mapping=dashmap: "), "{why}");
        assert!(!why.contains('\n'));
        cfg.bufmgr.mapping = MappingKind::PARTITIONS_16;
        assert_eq!(unsupported_under_simulation(&cfg), None);
    }
}
