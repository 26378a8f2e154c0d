//! Reopening a WAL after a clean shutdown: `WalConfig::start_segment` starts the new log at a
//! segment boundary above the old end, files below it are kept, files at or above it are
//! refused, and both logs read back exactly, from files and from a memory image.
#![cfg(not(loom))]

mod common;

use std::path::Path;

use common::*;
use lockstack_xlog::ptr::{LONG_PAGE_HEADER, USABLE_BYTES_IN_SEGMENT};
use lockstack_xlog::{
    InsertMode, RECORD_HEADER_SIZE, SegmentDir, StopReason, WAL_SEG_SIZE, Wal, WalBackend, WalConfig,
    WalError, WalReader, WalSink, XLogRecPtr, segment_file_name,
};

const MODES: [InsertMode; 2] = [InsertMode::SingleLock, InsertMode::InsertionLocks(8)];

fn files_cfg(mode: InsertMode, dir: &Path, start_segment: u64) -> WalConfig {
    WalConfig {
        insert_mode: mode,
        wal_buffers: 8,
        sink: WalSink::Files { dir: dir.to_path_buf() },
        start_segment,
        ..WalConfig::default()
    }
}

/// Inserts `n` records of thread `t` from one backend (lengths `min..max`), committing every
/// fifth; returns what was inserted and the start of the first record.
fn insert_seq(b: &mut WalBackend, t: u32, n: u32, min: usize, max: usize) -> (Inserted, XLogRecPtr) {
    let mut inserted = Inserted::new();
    let mut first = XLogRecPtr::INVALID;
    for seq in 0..n {
        let len = length(t, seq, min, max);
        let end = b.insert(&record(t, &payload(t, seq, len))).unwrap();
        if seq == 0 {
            first = b.last_record_start();
        }
        if seq % 5 == 0 {
            b.commit(end).unwrap();
        }
        inserted.insert((t, seq), (end, len));
    }
    (inserted, first)
}

fn segment_start(segno: u64) -> XLogRecPtr {
    XLogRecPtr(segno * WAL_SEG_SIZE)
}

#[test]
fn a_reopened_log_continues_in_a_new_segment_above_the_old_end() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let wal_dir = dir.path().join("pg_wal");

        // First run: a bit over one segment, so that the old log spans two segment files.
        let wal = Wal::open(files_cfg(mode, &wal_dir, 0)).unwrap();
        let inserted1 = insert_concurrently(&wal, 2, 1100, 6_000, 10_000);
        let end1 = wal.shutdown().unwrap();
        assert_eq!(end1, wal.insert_position(), "{mode}: shutdown must flush to the end of WAL");
        assert_eq!(wal.flushed_upto(), end1);
        assert!(end1.segment() >= 1, "{mode}: first run too short to cross a segment");
        drop(wal);
        let old = read_all(WalReader::new(SegmentDir::new(&wal_dir), Wal::first_record()));
        check_exact(&old, &inserted1);
        assert_eq!(old.last().unwrap().end, end1);
        let old_max = old.iter().map(|r| r.end).max().unwrap();

        // Reopening over the segment that holds the old end (or any below the end) is refused.
        for s in [0, end1.segment()] {
            match Wal::open(files_cfg(mode, &wal_dir, s)) {
                Err(WalError::Config(m)) => assert!(m.contains(&segment_file_name(s)), "{m}"),
                other => panic!("{mode}: start_segment {s} over existing WAL accepted: {other:?}"),
            }
        }

        // Second run, from the segment after the old end.
        let start = Wal::start_segment_after(end1);
        assert_eq!(start, end1.segment() + 1);
        let wal = Wal::open(files_cfg(mode, &wal_dir, start)).unwrap();
        let p = segment_start(start);
        assert_eq!(wal.insert_position(), p, "{mode}: empty reopened log must end at its segment start");
        assert_eq!(wal.written_upto(), p);
        assert_eq!(wal.flushed_upto(), p);
        assert_eq!(wal.start_of_wal(), XLogRecPtr(p.0 + LONG_PAGE_HEADER));
        let mut b = wal.attach_auxiliary();
        // 300 records of up to 3 pages over an 8-page ring: buffers are recycled.
        let (inserted2, first) = insert_seq(&mut b, 7, 300, 8, 24_000);
        assert_eq!(first, XLogRecPtr(p.0 + LONG_PAGE_HEADER), "{mode}: first new record's LSN");
        let end2 = b.flush_all().unwrap();
        assert_eq!(end2, wal.insert_position());
        assert_eq!(wal.shutdown().unwrap(), end2);
        for (end, _) in inserted2.values() {
            assert!(*end > old_max, "{mode}: new end {end} not above the old log's end {old_max}");
        }

        // The new log reads back exactly from its segment start, through the WAL and fresh.
        let check_new = |records: Vec<lockstack_xlog::DecodedRecord>| {
            check_exact(&records, &inserted2);
            assert_eq!(records[0].start, XLogRecPtr(p.0 + LONG_PAGE_HEADER));
            assert_eq!(records.last().unwrap().end, end2);
            assert!(records.iter().all(|r| r.start > old_max), "{mode}: new LSN below an old one");
        };
        check_new(read_all(wal.reader(wal.start_of_wal()).unwrap().expect_prev(XLogRecPtr::INVALID)));
        check_new(read_all(WalReader::new(SegmentDir::new(&wal_dir), p).expect_prev(XLogRecPtr::INVALID)));
        drop(wal);

        // The old log's files were left alone; there is no file between the two logs.
        check_exact(&read_all(WalReader::new(SegmentDir::new(&wal_dir), Wal::first_record())), &inserted1);
        let segs = SegmentDir::new(&wal_dir).segments().unwrap();
        let want: Vec<u64> = (0..=end1.segment()).chain(start..=end2.segment()).collect();
        assert_eq!(segs, want, "{mode}: segment files present");
        // Reading from the first segment present is reading the old log.
        let from_first = WalReader::new(SegmentDir::new(&wal_dir), segment_start(segs[0]));
        assert_eq!(read_all(from_first).len(), inserted1.len());
    }
}

#[test]
fn open_refuses_segments_at_or_above_the_start_and_keeps_those_below() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join(segment_file_name(3)), b"keep me").unwrap();
    std::fs::write(d.join("README"), b"not WAL").unwrap();
    for s in [0, 2, 3] {
        assert!(
            matches!(Wal::open(files_cfg(InsertMode::default(), d, s)), Err(WalError::Config(_))),
            "start_segment {s} accepted with segment 3 present"
        );
    }
    let wal = Wal::open(files_cfg(InsertMode::default(), d, 4)).unwrap();
    let mut b = wal.attach_auxiliary();
    let (inserted, first) = insert_seq(&mut b, 1, 40, 8, 3_000);
    assert_eq!(first, XLogRecPtr(4 * WAL_SEG_SIZE + LONG_PAGE_HEADER));
    wal.shutdown().unwrap();
    check_exact(&read_all(WalReader::new(SegmentDir::new(d), segment_start(4))), &inserted);
    assert_eq!(std::fs::read(d.join(segment_file_name(3))).unwrap(), b"keep me");
    assert_eq!(SegmentDir::new(d).segments().unwrap(), vec![3, 4]);
    drop(wal);

    // A 24-hex-digit name this crate does not write (another timeline) is refused at any start.
    std::fs::write(d.join("000000020000000000000000"), b"").unwrap();
    assert!(matches!(Wal::open(files_cfg(InsertMode::default(), d, 9)), Err(WalError::Config(_))));
    assert_eq!(SegmentDir::new(d).segments().unwrap(), vec![3, 4], "foreign names are not segments");
    assert_eq!(SegmentDir::new(&d.join("missing")).segments().unwrap(), Vec::<u64>::new());
}

#[test]
fn an_empty_log_shuts_down_and_reopens() {
    for mode in MODES {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Segment 0: the end of an empty log is 0/28, and shutting down writes a valid page.
        let wal = Wal::open(files_cfg(mode, d, 0)).unwrap();
        let end = wal.shutdown().unwrap();
        assert_eq!(end, Wal::first_record());
        drop(wal);
        let mut r = WalReader::new(SegmentDir::new(d), Wal::first_record());
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(r.end().unwrap().reason, StopReason::EndOfWal, "{mode}");

        // Segment 1, nothing inserted: the end is the segment start and nothing is written.
        let s1 = Wal::start_segment_after(end);
        assert_eq!(s1, 1);
        let wal = Wal::open(files_cfg(mode, d, s1)).unwrap();
        let end = wal.shutdown().unwrap();
        assert_eq!(end, segment_start(1));
        drop(wal);
        assert_eq!(SegmentDir::new(d).segments().unwrap(), vec![0]);

        // And again: the empty log's end is a segment boundary, so one segment is skipped.
        let s2 = Wal::start_segment_after(end);
        assert_eq!(s2, 2);
        let wal = Wal::open(files_cfg(mode, d, s2)).unwrap();
        let mut b = wal.attach_auxiliary();
        let (inserted, first) = insert_seq(&mut b, 2, 5, 8, 100);
        assert_eq!(first, XLogRecPtr(2 * WAL_SEG_SIZE + LONG_PAGE_HEADER));
        wal.shutdown().unwrap();
        check_exact(&read_all(WalReader::new(SegmentDir::new(d), segment_start(2))), &inserted);
    }
}

/// A log that ends exactly at a segment boundary: the next log starts one segment later, so a
/// reader of the old log ends cleanly instead of running into the new log's first record.
#[test]
fn a_log_ending_at_a_segment_boundary_skips_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let wal = Wal::open(files_cfg(InsertMode::default(), d, 0)).unwrap();
    let mut b = wal.attach_auxiliary();
    let data = vec![0x5Au8; USABLE_BYTES_IN_SEGMENT as usize - RECORD_HEADER_SIZE];
    let end = b.insert(&record(0, &data)).unwrap();
    assert_eq!(end, segment_start(1), "one record filling segment 0 ends at its boundary");
    assert_eq!(wal.shutdown().unwrap(), end);
    drop(wal);
    let start = Wal::start_segment_after(end);
    assert_eq!(start, 2);
    let wal = Wal::open(files_cfg(InsertMode::default(), d, start)).unwrap();
    let mut b = wal.attach_auxiliary();
    let (inserted, _) = insert_seq(&mut b, 3, 10, 8, 500);
    wal.shutdown().unwrap();
    let mut r = WalReader::new(SegmentDir::new(d), Wal::first_record());
    assert_eq!(r.next_record().unwrap().unwrap().data, data);
    assert!(r.next_record().unwrap().is_none());
    let stop = r.end().unwrap();
    assert!(stop.reason.is_clean_end(), "old log ended with {:?} at {}", stop.reason, stop.at);
    check_exact(&read_all(WalReader::new(SegmentDir::new(d), segment_start(2))), &inserted);
}

#[test]
fn a_memory_log_can_start_at_a_high_segment() {
    // Segment 1000 starts at 15.6 GiB: the memory image must not hold the bytes before it.
    const START: u64 = 1000;
    for mode in MODES {
        let cfg = WalConfig {
            insert_mode: mode,
            wal_buffers: 4,
            keep_in_memory: true,
            start_segment: START,
            ..WalConfig::default()
        };
        let wal = Wal::open(cfg).unwrap();
        let p = segment_start(START);
        assert_eq!(wal.insert_position(), p);
        assert_eq!(wal.flushed_upto(), p);
        let inserted = insert_concurrently(&wal, 3, 200, 8, 20_000);
        let mut b = wal.attach_auxiliary();
        let end = b.flush_all().unwrap();
        assert_eq!(end, wal.insert_position(), "{mode}");
        assert_eq!(wal.flushed_upto(), end);
        assert!(end > p && end.segment() == START, "{mode}: end {end}");

        let records = read_all(wal.reader(wal.start_of_wal()).unwrap().expect_prev(XLogRecPtr::INVALID));
        check_exact(&records, &inserted);
        assert_eq!(records[0].start, XLogRecPtr(p.0 + LONG_PAGE_HEADER), "{mode}: first record's LSN");
        assert_eq!(records.last().unwrap().end, end);

        let mut img = wal.memory_image().unwrap();
        assert_eq!(img.start(), p);
        let len = img.bytes_mut().len() as u64;
        assert_eq!(len, (end.0 - p.0).div_ceil(8192) * 8192, "{mode}: image holds only the new log");
        // Reading from the segment start through a standalone image gives the same records.
        assert_eq!(read_all(WalReader::new(img.clone(), p)), records);
        // Below the image's start there are no pages.
        let mut r = WalReader::new(img, Wal::first_record());
        assert!(r.next_record().unwrap().is_none());
        assert_eq!(r.end().unwrap().reason, StopReason::MissingPage);
    }
}

#[test]
fn start_segment_is_validated() {
    let cfg = WalConfig { start_segment: WalConfig::MAX_START_SEGMENT + 1, ..WalConfig::default() };
    assert!(matches!(Wal::open(cfg), Err(WalError::Config(_))));
    assert_eq!(WalConfig::default().start_segment, 0);
    assert_eq!(Wal::start_segment_after(XLogRecPtr(WAL_SEG_SIZE - 8)), 1);
    assert_eq!(Wal::start_segment_after(XLogRecPtr(5 * WAL_SEG_SIZE + 1)), 6);
}
