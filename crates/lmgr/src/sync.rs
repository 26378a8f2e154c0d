//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`, so that `tests/loom_fastpath.rs` explores the
//! fast-path protocol and checks every access to LWLock-protected data) or a simulation.

pub(crate) use lockstack_common::sync::{AtomicU32, LwLockCell, Ordering};
