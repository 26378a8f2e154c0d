//! The atomics the fast-path protocol shares between backends, from `std` normally and from
//! `loom` under `--cfg loom` (so that `tests/loom_fastpath.rs` can explore their interleavings).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
