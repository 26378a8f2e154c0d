//! Flushing: durability per sink, group commit accounting, asynchronous commit with the WAL
//! writer, and the flush-vs-eviction deadlock scenario.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;
use lockstack_common::{BackendId, BackendStatusArray, TrancheId, WaitEvent};
use lockstack_xlog::{InsertMode, SegmentDir, Wal, WalConfig, WalReader, WalSink, XLogRecPtr};

/// Runs `f` on a thread and fails the test if it has not finished after `limit` (a hang is
/// a deadlock; the limit is generous, never a performance assertion).
fn within<T: Send + 'static>(limit: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("{what}: no progress for {limit:?} (deadlock?)"))
}

/// Polls `cond` until it holds or `limit` passes; returns whether it held.
fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    cond()
}

/// `write_limit` (a full disk, injected): the first write that would end past the limit fails
/// with ENOSPC naming the segment file; the WAL is poisoned and every later call says so,
/// with the first failure's message; what was flushed before the limit is readable.
#[test]
fn a_write_past_the_write_limit_fails_like_a_full_disk() {
    let dir = tempfile::tempdir().unwrap();
    let limit = 64 * 1024;
    let cfg = WalConfig {
        wal_buffers: 8,
        sink: WalSink::Files { dir: dir.path().to_path_buf() },
        write_limit: Some(limit),
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let mut b = wal.attach_auxiliary();
    let data = vec![7u8; 1000];
    let mut committed = 0u64;
    let err = loop {
        let end = match b.insert(&record(0, &data)) {
            Ok(end) => end,
            Err(e) => break e,
        };
        match b.commit(end) {
            Ok(()) => committed += 1,
            Err(e) => break e,
        }
        assert!(committed < 1000, "the limit never stopped a write");
    };
    let msg = err.to_string();
    let seg = dir.path().join("000000010000000000000000");
    assert!(msg.starts_with(&format!("could not write {}: ", seg.display())), "{msg}");
    assert!(msg.contains("os error 28"), "{msg}");
    assert!(wal.flushed_upto().0 <= limit, "nothing past the limit was flushed");
    assert!(committed > 10, "writes below the limit went through ({committed})");
    let again = b.insert(&record(0, &data)).unwrap_err().to_string();
    assert!(again.starts_with("WAL is unusable after an earlier failure: could not write"), "{again}");
    let got = read_all(WalReader::new(SegmentDir::new(dir.path()), Wal::first_record()));
    assert!(got.len() as u64 >= committed, "{} records read, {committed} committed", got.len());
    // A memory sink counts the bytes it would write, and fails the same way, naming the
    // segment (it has no file).
    let mem = Wal::open(WalConfig { write_limit: Some(limit), ..WalConfig::default() }).unwrap();
    let mut b = mem.attach_auxiliary();
    let err = (0..1000)
        .find_map(|_| b.insert(&record(0, &data)).and_then(|end| b.commit(end)).err())
        .expect("the limit stops a memory sink too")
        .to_string();
    assert_eq!(err, "could not write 000000010000000000000000: No space left on device (os error 28)");
}

#[test]
fn a_flush_to_files_is_on_disk_when_it_returns() {
    for mode in [InsertMode::SingleLock, InsertMode::InsertionLocks(8)] {
        let dir = tempfile::tempdir().unwrap();
        let cfg = WalConfig {
            insert_mode: mode,
            wal_buffers: 8,
            sink: WalSink::Files { dir: dir.path().to_path_buf() },
            ..WalConfig::default()
        };
        let wal = Wal::open(cfg).unwrap();
        let mut b = wal.attach_auxiliary();
        let mut inserted = std::collections::HashMap::new();
        for seq in 0..60u32 {
            let len = length(0, seq, 8, 9000);
            let data = payload(0, seq, len);
            let end = b.insert(&record(0, &data)).unwrap();
            inserted.insert((0, seq), (end, len));
            b.commit(end).unwrap();
            assert!(wal.flushed_upto() >= end);
            // Reread the files from scratch: the committed record must be there, and be last.
            let got = read_all(WalReader::new(SegmentDir::new(dir.path()), Wal::first_record()));
            assert_eq!(got.len() as u32, seq + 1, "{mode}: record {seq} not in the files after commit");
            assert_eq!(got.last().unwrap().end, end);
        }
        let got = read_all(WalReader::new(SegmentDir::new(dir.path()), Wal::first_record()));
        check_exact(&got, &inserted);
        assert_eq!(b.stats().flushes, 60, "{mode}: one fsync per commit from a single backend");
    }
}

#[test]
fn a_modelled_flush_returns_after_the_flush_and_counts_it() {
    let cfg = WalConfig {
        sink: WalSink::Modelled { flush_delay: Duration::from_millis(1) },
        keep_in_memory: true,
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let mut b = wal.attach_auxiliary();
    for seq in 0..20 {
        let data = payload(0, seq, 300);
        let end = b.insert(&record(0, &data)).unwrap();
        let before = b.stats().flushes;
        b.flush(end).unwrap();
        assert!(wal.flushed_upto() >= end && wal.written_upto() >= end);
        assert_eq!(b.stats().flushes, before + 1);
        // Already flushed: no new request, no new flush.
        b.flush(end).unwrap();
        assert_eq!(b.stats().flushes, before + 1);
    }
    assert_eq!(b.stats().flush_requests, 20);
}

/// Every flush request ends in the backend's own flush or in someone else's (group commit),
/// whatever the interleaving; and a follower that arrives while the leader flushes does no
/// flush of its own.
#[test]
fn group_commit_accounting_and_a_follower() {
    let cfg = WalConfig {
        insert_mode: InsertMode::InsertionLocks(4),
        sink: WalSink::Modelled { flush_delay: Duration::from_micros(300) },
        keep_in_memory: true,
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let inserted = insert_concurrently(&wal, 4, 200, 50, 400);
    let st = wal.stats();
    assert_eq!(st.flush_requests, st.flushes + st.flushed_by_others, "{st:?}");
    wal.attach_auxiliary().flush_all().unwrap();
    check_exact(&read_all(wal.reader(Wal::first_record()).unwrap()), &inserted);

    // Scripted: B inserts, A inserts after B and starts a slow flush covering both; B's flush
    // is then either satisfied while waiting for WALWriteLock or finds its record flushed.
    let cfg = WalConfig {
        sink: WalSink::Modelled { flush_delay: Duration::from_millis(30) },
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let (mut a, mut b) = (wal.attach_auxiliary(), wal.attach_auxiliary());
    let b_end = b.insert(&record(1, &payload(1, 0, 100))).unwrap();
    let a_end = a.insert(&record(0, &payload(0, 0, 100))).unwrap();
    assert!(a_end > b_end);
    std::thread::scope(|s| {
        s.spawn(|| a.commit(a_end).unwrap());
        s.spawn(|| {
            wait_until(Duration::from_secs(5), || wal.stats().flush_requests > 0);
            b.commit(b_end).unwrap();
        });
    });
    assert!(wal.flushed_upto() >= a_end);
    assert_eq!(a.stats().flushes + b.stats().flushes, 1, "one flush serves both commits");
    assert_eq!(b.stats().flushes, 0);
}

#[test]
fn asynchronous_commit_returns_at_once_and_the_wal_writer_flushes() {
    let cfg = WalConfig {
        synchronous_commit: false,
        wal_writer_delay: Duration::from_millis(5),
        sink: WalSink::Modelled { flush_delay: Duration::ZERO },
        keep_in_memory: true,
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let mut b = wal.attach_auxiliary();
    let mut last = XLogRecPtr::INVALID;
    for seq in 0..50 {
        last = b.insert(&record(0, &payload(0, seq, 200))).unwrap();
        b.commit(last).unwrap();
    }
    assert_eq!(b.stats().flush_requests, 0, "an asynchronous commit flushed");
    assert_eq!(b.stats().async_commits, 50);
    assert!(
        wait_until(Duration::from_secs(30), || wal.flushed_upto() >= last),
        "the WAL writer never flushed"
    );
    assert!(wal.stats().flushes >= 1);
    // Stopping is clean and idempotent; the WAL keeps working synchronously through flush().
    wal.stop_wal_writer();
    wal.stop_wal_writer();
    let end = b.insert(&record(0, &payload(0, 50, 10))).unwrap();
    b.flush(end).unwrap();
    assert_eq!(wal.shutdown().unwrap(), end);
    assert_eq!(read_all(wal.reader(Wal::first_record()).unwrap()).len(), 51);
    // Dropping a WAL whose writer still runs stops the writer too.
    let wal2 = Wal::open(WalConfig { synchronous_commit: false, ..WalConfig::default() }).unwrap();
    within(Duration::from_secs(60), "dropping a WAL with its writer", move || drop(wal2));
}

/// The scenario of `WaitXLogInsertionsToFinish`'s warning, with three threads and a ring of
/// four pages:
///
/// * A flushes and, as group leader, sleeps `commit_delay` while holding `WALWriteLock`;
/// * B inserts a five-page record, so it must recycle a buffer whose page is unwritten, and
///   waits for `WALWriteLock` while holding its insertion lock;
/// * C inserts a small record behind B's and flushes it, which waits for B's insertion.
///
/// A, after its sleep, looks for finished insertions again while holding `WALWriteLock`: that
/// must not wait for B (B advertised its progress before blocking). Everyone must finish, and
/// the WAL must read back whole. The scenario is retried until the test has observed B
/// blocked on `WALWriteLock` while A was still in its delay.
#[test]
fn flush_leader_and_evicting_inserter_do_not_deadlock() {
    for mode in [InsertMode::InsertionLocks(8), InsertMode::SingleLock] {
        let mut exercised = 0;
        for _attempt in 0..10 {
            if within(Duration::from_secs(120), "three-thread flush/evict scenario", move || scenario(mode)) {
                exercised += 1;
                if exercised == 2 {
                    break;
                }
            }
        }
        assert!(exercised >= 1, "{mode}: never saw the evicting inserter blocked during commit_delay");
    }
}

/// One run of the scenario; true if B was seen blocked on WALWriteLock during A's delay.
fn scenario(mode: InsertMode) -> bool {
    let cfg = WalConfig {
        insert_mode: mode,
        wal_buffers: 4,
        sink: WalSink::Modelled { flush_delay: Duration::ZERO },
        keep_in_memory: true,
        commit_delay_us: 100_000,
        commit_siblings: 0,
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg).unwrap();
    let status = BackendStatusArray::new(3);
    let (mut a, mut b, mut c) = (wal.attach_auxiliary(), wal.attach_auxiliary(), wal.attach_auxiliary());
    let waiting_for_write = WaitEvent::lwlock(TrancheId::WAL_WRITE);
    let mut inserted = std::collections::HashMap::new();
    let mut observed = false;
    std::thread::scope(|s| {
        let st = Arc::clone(&status);
        let ta = s.spawn(move || {
            let _me = st.attach(BackendId(0));
            let data = payload(0, 0, 100);
            let end = a.insert(&record(0, &data)).unwrap();
            a.flush(end).unwrap();
            ((0, 0), (end, 100))
        });
        let in_delay = wait_until(Duration::from_secs(10), || {
            status.slot(BackendId(0)).get() == WaitEvent::COMMIT_DELAY
        });
        let st = Arc::clone(&status);
        let tb = s.spawn(move || {
            let _me = st.attach(BackendId(1));
            let len = 5 * 8192;
            let data = payload(1, 0, len);
            let end = b.insert(&record(1, &data)).unwrap();
            b.flush(end).unwrap();
            ((1, 0), (end, len))
        });
        let b_blocked = in_delay
            && wait_until(Duration::from_secs(10), || {
                status.slot(BackendId(1)).get() == waiting_for_write || ta.is_finished()
            })
            && status.slot(BackendId(1)).get() == waiting_for_write;
        let st = Arc::clone(&status);
        let tc = s.spawn(move || {
            let _me = st.attach(BackendId(2));
            let data = payload(2, 0, 64);
            let end = c.insert(&record(2, &data)).unwrap();
            c.flush(end).unwrap();
            ((2, 0), (end, 64))
        });
        // Still in the delay once C is under way: the scenario really overlapped.
        if b_blocked {
            std::thread::sleep(Duration::from_millis(2));
            observed = status.slot(BackendId(0)).get() == WaitEvent::COMMIT_DELAY;
        }
        for t in [ta, tb, tc] {
            let (k, v) = t.join().expect("scenario thread panicked");
            inserted.insert(k, v);
        }
    });
    let end = wal.attach_auxiliary().flush_all().unwrap();
    assert_eq!(end, wal.insert_position());
    check_exact(&read_all(wal.reader(Wal::first_record()).unwrap()), &inserted);
    observed
}
