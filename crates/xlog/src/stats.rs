//! Per-backend WAL counters, summed on demand (the model of `pg_stat_wal`, 14+, kept per
//! backend like PostgreSQL's pending counters so that counting adds no shared write).

lockstack_common::counters! {
    /// WAL counters of one backend, or summed over all of them ([`crate::Wal::stats`]); read
    /// by name through [`lockstack_common::Counters`] (the names are the fields').
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
    per_backend: #[derive(Default, Debug)] pub(crate) struct WalCounters(pub(crate));
}
