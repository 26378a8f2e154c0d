//! The WAL micro-benchmark's lock counts. Its own test binary: LWLock counters are per tranche
//! for the whole process, so no other test may take WAL locks while this one counts them.

use std::time::Duration;

use lockstack_workloads::micro::wal::{WalBenchConfig, run};
use lockstack_xlog::InsertMode;

#[test]
fn both_designs_keep_the_invariant_and_count_their_locks() {
    for mode in [InsertMode::SingleLock, InsertMode::InsertionLocks(8)] {
        let mut cfg = WalBenchConfig::new(mode, 3, 100, Duration::from_millis(60));
        cfg.wal_buffers = 8;
        cfg.commit_every = 50;
        cfg.flush_delay_us = Some(0);
        let rep = run(&cfg).unwrap();
        assert!(rep.invariant_ok, "{mode}: invariant");
        assert!(rep.records > 0 && rep.commits > 0);
        assert_eq!(rep.wal.records, rep.records);
        // Every insertion takes exactly one WALInsert lock; 9.2 flushes may also
        // conditionally take it, so it is at least the record count.
        assert!(rep.wal_insert.acquisitions >= rep.records, "{mode}: {:?}", rep.wal_insert);
        assert!(rep.wal_write.acquisitions >= rep.wal.writes.min(1));
        assert_eq!(rep.wal.flush_requests, rep.wal.flushes + rep.wal.flushed_by_others);
        if mode == InsertMode::SingleLock {
            assert_eq!(rep.wal_buf_mapping.acquisitions, 0);
        } else {
            assert_eq!(rep.wal_insert.acquisitions, rep.records);
            assert!(rep.wal_buf_mapping.acquisitions > 0);
        }
    }
}
