//! Per-backend buffer counters (PostgreSQL's `pgBufferUsage` and `pg_stat_io` figures plus the
//! contention counts seed 004 asks for), summed on demand over every backend of a pool.

use lockstack_common::LocalCounter;
use serde::Serialize;

/// One backend's counters; only its own backend adds to them.
#[derive(Default, Debug)]
pub(crate) struct BackendCounters {
    pub(crate) hits: LocalCounter,
    pub(crate) reads: LocalCounter,
    pub(crate) extends: LocalCounter,
    pub(crate) evictions: LocalCounter,
    pub(crate) writes: LocalCounter,
    pub(crate) wal_flushes: LocalCounter,
    pub(crate) pin_waits: LocalCounter,
    pub(crate) pin_spin_delays: LocalCounter,
    pub(crate) io_waits: LocalCounter,
    pub(crate) cleanup_waits: LocalCounter,
    pub(crate) vm_pins: LocalCounter,
    pub(crate) vm_pin_waits: LocalCounter,
}

impl BackendCounters {
    pub(crate) fn snapshot(&self) -> BufferStats {
        BufferStats {
            hits: self.hits.get(),
            reads: self.reads.get(),
            extends: self.extends.get(),
            evictions: self.evictions.get(),
            writes: self.writes.get(),
            wal_flushes: self.wal_flushes.get(),
            pin_waits: self.pin_waits.get(),
            pin_spin_delays: self.pin_spin_delays.get(),
            io_waits: self.io_waits.get(),
            cleanup_waits: self.cleanup_waits.get(),
            vm_pins: self.vm_pins.get(),
            vm_pin_waits: self.vm_pin_waits.get(),
        }
    }

    pub(crate) fn reset(&self) {
        for c in [
            &self.hits,
            &self.reads,
            &self.extends,
            &self.evictions,
            &self.writes,
            &self.wal_flushes,
            &self.pin_waits,
            &self.pin_spin_delays,
            &self.io_waits,
            &self.cleanup_waits,
            &self.vm_pins,
            &self.vm_pin_waits,
        ] {
            c.reset();
        }
    }
}

/// Buffer counters of one backend or summed over a pool ([`crate::BufferPool::stats`],
/// [`crate::BackendBuffers::stats`]). All are event counts.
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

impl BufferStats {
    /// Adds `o` to `self`, field by field.
    pub fn add(&mut self, o: &BufferStats) {
        self.hits += o.hits;
        self.reads += o.reads;
        self.extends += o.extends;
        self.evictions += o.evictions;
        self.writes += o.writes;
        self.wal_flushes += o.wal_flushes;
        self.pin_waits += o.pin_waits;
        self.pin_spin_delays += o.pin_spin_delays;
        self.io_waits += o.io_waits;
        self.cleanup_waits += o.cleanup_waits;
        self.vm_pins += o.vm_pins;
        self.vm_pin_waits += o.vm_pin_waits;
    }

    /// `self - earlier`, field by field (saturating), for the counts of one run.
    pub fn since(&self, e: &BufferStats) -> BufferStats {
        BufferStats {
            hits: self.hits.saturating_sub(e.hits),
            reads: self.reads.saturating_sub(e.reads),
            extends: self.extends.saturating_sub(e.extends),
            evictions: self.evictions.saturating_sub(e.evictions),
            writes: self.writes.saturating_sub(e.writes),
            wal_flushes: self.wal_flushes.saturating_sub(e.wal_flushes),
            pin_waits: self.pin_waits.saturating_sub(e.pin_waits),
            pin_spin_delays: self.pin_spin_delays.saturating_sub(e.pin_spin_delays),
            io_waits: self.io_waits.saturating_sub(e.io_waits),
            cleanup_waits: self.cleanup_waits.saturating_sub(e.cleanup_waits),
            vm_pins: self.vm_pins.saturating_sub(e.vm_pins),
            vm_pin_waits: self.vm_pin_waits.saturating_sub(e.vm_pin_waits),
        }
    }
}
