//! Micro-experiments that exercise one subsystem crate at a time.

pub mod buffers;
pub mod locks;
pub mod lwlock;
pub mod wal;

/// `lockstack snapshot`: snapshot takers against committers per ProcArray layout; the workload
/// lives with the crate it measures (`lockstack_procarray::workload`).
pub use lockstack_procarray::workload as snapshot;
