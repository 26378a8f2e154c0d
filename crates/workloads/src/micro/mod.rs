//! Micro-experiments that exercise one subsystem crate at a time.

pub mod buffers;
mod error;
pub mod locks;
pub mod lwlock;
pub mod wal;

pub use error::BenchError;

use std::time::Duration;

use lockstack_common::sync::Instant;

/// The interval a micro-benchmark's workers ran in, from the first one's start to the last
/// one's end, given each worker's (start, end); `fallback` when there is none. With many more
/// threads than cores the workers that leave the start barrier first may run long before the
/// timing thread is scheduled again, so its own clock would miss part of the counted work.
fn workers_interval(spans: impl Iterator<Item = (Instant, Instant)>, fallback: Duration) -> Duration {
    spans
        .fold(None, |acc: Option<(Instant, Instant)>, (a, b)| {
            Some(acc.map_or((a, b), |(lo, hi)| (lo.min(a), hi.max(b))))
        })
        .map_or(fallback, |(lo, hi)| hi - lo)
}

/// `lockstack snapshot`: snapshot takers against committers per ProcArray layout; the workload
/// lives with the crate it measures (`lockstack_procarray::workload`).
pub use lockstack_procarray::workload as snapshot;
