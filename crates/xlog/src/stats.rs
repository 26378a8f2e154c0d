//! Per-backend WAL counters, summed on demand (the model of `pg_stat_wal`, 14+, kept per
//! backend like PostgreSQL's pending counters so that counting adds no shared write).

use lockstack_common::LocalCounter;

/// One backend's counters; written only by that backend.
#[derive(Default, Debug)]
pub(crate) struct WalCounters {
    pub(crate) records: LocalCounter,
    pub(crate) bytes: LocalCounter,
    pub(crate) insert_lock_waits: LocalCounter,
    pub(crate) flush_requests: LocalCounter,
    pub(crate) flushes: LocalCounter,
    pub(crate) flushed_by_others: LocalCounter,
    pub(crate) writes: LocalCounter,
    pub(crate) pages_written: LocalCounter,
    pub(crate) buffers_full: LocalCounter,
    pub(crate) commit_delays: LocalCounter,
    pub(crate) async_commits: LocalCounter,
}

/// WAL counters of one backend, or summed over all of them ([`crate::Wal::stats`]).
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalStats {
    /// Records inserted.
    pub records: u64,
    /// Bytes of WAL those records occupy (headers and alignment included, page headers not).
    pub bytes: u64,
    /// Insertions whose insertion lock (or `WALInsertLock`) had to be waited for.
    pub insert_lock_waits: u64,
    /// Calls of `flush` / synchronous `commit` that found their position not yet flushed.
    pub flush_requests: u64,
    /// Flushes issued by this backend (`fdatasync` calls, or modelled flush delays).
    pub flushes: u64,
    /// Flush requests that another backend's flush covered (group commit followers): every
    /// flush request ends either here or in one of this backend's own writes.
    pub flushed_by_others: u64,
    /// Write calls (`XLogWrite` that wrote at least one page).
    pub writes: u64,
    /// Pages handed to the sink (a partial page rewritten later counts again).
    pub pages_written: u64,
    /// Writes forced because an inserter needed a WAL buffer whose page was not yet written
    /// (`wal_buffers_full` of `pg_stat_wal`).
    pub buffers_full: u64,
    /// `commit_delay` sleeps taken by flush leaders.
    pub commit_delays: u64,
    /// Commits that did not flush (`synchronous_commit = off`).
    pub async_commits: u64,
}

impl WalStats {
    pub(crate) fn add(&mut self, c: &WalCounters) {
        self.records += c.records.get();
        self.bytes += c.bytes.get();
        self.insert_lock_waits += c.insert_lock_waits.get();
        self.flush_requests += c.flush_requests.get();
        self.flushes += c.flushes.get();
        self.flushed_by_others += c.flushed_by_others.get();
        self.writes += c.writes.get();
        self.pages_written += c.pages_written.get();
        self.buffers_full += c.buffers_full.get();
        self.commit_delays += c.commit_delays.get();
        self.async_commits += c.async_commits.get();
    }

    /// `self - earlier`, counter by counter.
    pub fn since(&self, earlier: &WalStats) -> WalStats {
        WalStats {
            records: self.records.saturating_sub(earlier.records),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            insert_lock_waits: self.insert_lock_waits.saturating_sub(earlier.insert_lock_waits),
            flush_requests: self.flush_requests.saturating_sub(earlier.flush_requests),
            flushes: self.flushes.saturating_sub(earlier.flushes),
            flushed_by_others: self.flushed_by_others.saturating_sub(earlier.flushed_by_others),
            writes: self.writes.saturating_sub(earlier.writes),
            pages_written: self.pages_written.saturating_sub(earlier.pages_written),
            buffers_full: self.buffers_full.saturating_sub(earlier.buffers_full),
            commit_delays: self.commit_delays.saturating_sub(earlier.commit_delays),
            async_commits: self.async_commits.saturating_sub(earlier.async_commits),
        }
    }
}
