//! Per-backend buffer counters (PostgreSQL's `pgBufferUsage` and `pg_stat_io` figures plus the
//! contention counts seed 004 asks for), summed on demand over every backend of a pool.

use serde::Serialize;

lockstack_common::counters! {
    /// Buffer counters of one backend or summed over a pool ([`crate::BufferPool::stats`],
    /// [`crate::BackendBuffers::stats`]), read by name through [`lockstack_common::Counters`].
    /// All are event counts.
    #[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
    pub struct BufferStats {
        /// Look-ups that found the page valid in the pool (`shared_blks_hit`).
        pub hits: u64,
        /// Pages read from the storage manager (`shared_blks_read`).
        pub reads: u64,
        /// Pages added by extending a relation fork.
        pub extends: u64,
        /// Victim buffers that held another page (`pg_stat_io` evictions).
        pub evictions: u64,
        /// Dirty pages written (by eviction, `flush` or `flush_all`) (`shared_blks_written`).
        pub writes: u64,
        /// Calls of the WAL-before-data hook.
        pub wal_flushes: u64,
        /// Pins and unpins that did not get the buffer header at the first attempt: header
        /// spinlock busy (9.2 variant), or `BM_LOCKED` seen / CAS lost (9.6 variant). Seed 004's
        /// "buffer pin contention".
        pub pin_waits: u64,
        /// Sleeps while waiting for a busy buffer header (the `s_lock` back-off's `spindelay`: one
        /// per `spins_per_delay` fruitless tries, each 1 ms or more).
        pub pin_spin_delays: u64,
        /// Waits for another backend's read or write of the same buffer.
        pub io_waits: u64,
        /// Sleeps in `lock_for_cleanup` waiting for the pin count to drop to 1 (`BufferPin` waits).
        pub cleanup_waits: u64,
        /// Visibility-map page pins taken by the [`crate::vm`] functions (not counting re-use of a
        /// pin the caller kept).
        pub vm_pins: u64,
        /// The subset of `pin_waits` that were on visibility-map pages.
        pub vm_pin_waits: u64,
    }
    per_backend: #[derive(Default, Debug)] pub(crate) struct BackendCounters(pub(crate));
}

impl BackendCounters {
    /// This backend's counters now.
    pub(crate) fn snapshot(&self) -> BufferStats {
        let mut s = BufferStats::default();
        s.add_backend(self);
        s
    }
}
