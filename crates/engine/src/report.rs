//! Facts every report states next to its figures.

use serde::Serialize;

/// The machine a run was measured on, and whether its thread count oversubscribes it.
#[derive(Debug, Clone, Serialize)]
pub struct MachineNote {
    /// Logical CPUs available to this process.
    pub cores: usize,
    /// Busy threads the run used.
    pub threads: usize,
    /// True when `threads > cores`: the run then measures the OS scheduler (time slices,
    /// preempted lock holders) rather than cache-line contention, and the per-operation
    /// counters (blocks, spin delays per 1000 operations) are the figures that keep their meaning.
    pub oversubscribed: bool,
}

impl MachineNote {
    /// Describes a run with `threads` busy threads on this machine.
    pub fn for_threads(threads: usize) -> MachineNote {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        MachineNote { cores, threads, oversubscribed: threads > cores }
    }

    /// One line for a text report.
    pub fn line(&self) -> String {
        if self.oversubscribed {
            format!(
                "note: {} busy threads on {} cores: this run measures the scheduler (preempted \
                 holders, time slices), not cache-line contention; compare the per-operation \
                 counters, which keep their meaning at any thread count",
                self.threads, self.cores
            )
        } else {
            format!("machine: {} busy threads on {} cores", self.threads, self.cores)
        }
    }
}
