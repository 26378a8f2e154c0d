//! Concurrent insertion in every variant, read back exactly; advertised positions; torn and
//! corrupt records.
#![cfg(not(loom))]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::*;
use lockstack_lwlock::LwLockKind;
use lockstack_xlog::{InsertMode, StopReason, Wal, WalConfig, WalReader, WalSink, XLOG_BLCKSZ, XLogRecPtr};

fn memory_cfg(mode: InsertMode, buffers: usize) -> WalConfig {
    WalConfig { insert_mode: mode, wal_buffers: buffers, keep_in_memory: true, ..WalConfig::default() }
}

fn run_variant(cfg: WalConfig, threads: u32, per_thread: u32, min_len: usize, max_len: usize) {
    let label = format!("{} / {:?}", cfg.insert_mode, cfg.lwlock_kind);
    let wal = Wal::open(cfg).unwrap();
    let inserted = insert_concurrently(&wal, threads, per_thread, min_len, max_len);
    let mut b = wal.attach_auxiliary();
    let end = b.flush_all().unwrap();
    assert_eq!(end, wal.insert_position(), "{label}: not every insertion finished");
    assert!(wal.flushed_upto() >= end);
    let records = read_all(wal.reader(Wal::first_record()).unwrap().expect_prev(XLogRecPtr::INVALID));
    check_exact(&records, &inserted);
    let last = records.last().unwrap();
    assert_eq!(last.end, end, "{label}: last record does not end at the insert position");
    let st = wal.stats();
    assert_eq!(st.records, u64::from(threads * per_thread), "{label}: records counter");
    let bytes: u64 = records.iter().map(|r| (24 + r.data.len() as u64).div_ceil(8) * 8).sum();
    assert_eq!(st.bytes, bytes, "{label}: bytes counter");
}

#[test]
fn every_variant_reads_back_exactly_what_was_inserted() {
    let modes = [
        InsertMode::SingleLock,
        InsertMode::InsertionLocks(1),
        InsertMode::InsertionLocks(3),
        InsertMode::InsertionLocks(8),
        InsertMode::InsertionLocks(128),
    ];
    for mode in modes {
        // A small ring forces buffer recycling (writes under WALWriteLock from inserters);
        // records up to ~2.5 pages cross page boundaries and carry continuation headers.
        run_variant(memory_cfg(mode, 4), 4, 300, 8, 20_000);
        run_variant(memory_cfg(mode, 64), 3, 2000, 8, 300);
    }
}

#[test]
fn every_lwlock_implementation_works_under_the_wal() {
    for kind in LwLockKind::ALL {
        let cfg = WalConfig { lwlock_kind: kind, ..memory_cfg(InsertMode::InsertionLocks(2), 4) };
        run_variant(cfg, 3, 300, 8, 12_000);
    }
}

#[test]
fn segment_files_read_back_exactly_and_cross_segments() {
    let dir = tempfile::tempdir().unwrap();
    let wal_dir = dir.path().join("pg_wal");
    let cfg = WalConfig {
        insert_mode: InsertMode::InsertionLocks(4),
        wal_buffers: 16,
        sink: WalSink::Files { dir: wal_dir.clone() },
        ..WalConfig::default()
    };
    let wal = Wal::open(cfg.clone()).unwrap();
    // ~18 MiB: crosses into the second segment, whose first page has a long header.
    let inserted = insert_concurrently(&wal, 2, 600, 8_000, 23_000);
    wal.attach_auxiliary().flush_all().unwrap();
    assert!(wal.insert_position().segment() >= 1);
    assert!(wal_dir.join(lockstack_xlog::segment_file_name(1)).exists());
    // Read with a fresh reader on the files (not through the WAL object).
    let reader = WalReader::new(lockstack_xlog::SegmentDir::new(&wal_dir), Wal::first_record());
    check_exact(&read_all(reader), &inserted);
    // A second WAL may not start over existing segments.
    drop(wal);
    assert!(matches!(Wal::open(cfg), Err(lockstack_xlog::WalError::Config(_))));
}

/// While inserters run over a tiny ring, a sampler watches every lock's advertised position:
/// on one lock, non-zero values never decrease (a later holder reserves later, and a holder
/// only advertises forward), and a writer never sees a position beyond what is reserved.
#[test]
fn advertised_positions_never_go_backwards() {
    for n in [1usize, 2, 4] {
        let wal = Wal::open(memory_cfg(InsertMode::InsertionLocks(n), 4)).unwrap();
        let stop = AtomicBool::new(false);
        let (observed, inserted) = std::thread::scope(|s| {
            let sampler = s.spawn(|| {
                let mut last = vec![0u64; n];
                let mut observed = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for (i, l) in last.iter_mut().enumerate() {
                        let v = wal.inserting_at(i).0;
                        if v != 0 {
                            observed += 1;
                            assert!(v >= *l, "lock {i}: advertised {v:#x} after {:#x}", *l);
                            assert!(v <= wal.insert_position().0, "lock {i}: advertised past reserved end");
                            assert_eq!(v % 8, 0);
                            *l = v;
                        }
                    }
                }
                observed
            });
            let inserted = insert_concurrently(&wal, 3, 400, 2_000, 20_000);
            stop.store(true, Ordering::Relaxed);
            (sampler.join().unwrap(), inserted)
        });
        let _ = observed;
        wal.attach_auxiliary().flush_all().unwrap();
        check_exact(&read_all(wal.reader(Wal::first_record()).unwrap()), &inserted);
        for i in 0..n {
            assert_eq!(wal.inserting_at(i), XLogRecPtr::INVALID, "lock {i} still advertises after the run");
        }
    }
}

fn small_wal_with_records(count: u32, len: usize) -> (Arc<Wal>, Vec<XLogRecPtr>) {
    let wal = Wal::open(memory_cfg(InsertMode::InsertionLocks(8), 16)).unwrap();
    let mut b = wal.attach_auxiliary();
    let mut starts = Vec::new();
    for seq in 0..count {
        let data = payload(0, seq, len);
        let end = b.insert(&record(0, &data)).unwrap();
        starts.push(b.last_record_start());
        b.commit(end).unwrap();
    }
    (wal, starts)
}

#[test]
fn a_damaged_payload_stops_the_reader_at_that_record() {
    let (wal, starts) = small_wal_with_records(40, 1000);
    // Records that lie on one page, so that the damaged byte is payload, not a page header.
    let on_one_page: Vec<usize> =
        (0..starts.len()).filter(|&i| starts[i].page_offset() + 1024 <= XLOG_BLCKSZ).collect();
    let picks = [on_one_page[0], on_one_page[on_one_page.len() / 2], *on_one_page.last().unwrap()];
    for victim in picks {
        let mut img = wal.memory_image().unwrap();
        let at = starts[victim].0 as usize + 24 + 500;
        img.bytes_mut()[at] ^= 0x40;
        let mut r = WalReader::new(img, Wal::first_record());
        let mut n = 0;
        while r.next_record().unwrap().is_some() {
            n += 1;
        }
        assert_eq!(n, victim, "records before the damaged one");
        let end = r.end().unwrap();
        assert_eq!(end.at, starts[victim]);
        assert!(matches!(end.reason, StopReason::BadCrc { .. }), "{:?}", end.reason);
        assert!(!end.reason.is_clean_end());
    }
}

#[test]
fn a_torn_multi_page_record_is_detected() {
    // 5000-byte records: many of them cross a page boundary.
    let (wal, starts) = small_wal_with_records(30, 5000);
    let img = wal.memory_image().unwrap();
    let crossing = (1..starts.len())
        .find(|&i| starts[i].page_start() != XLogRecPtr(starts[i].0 + 5024).page_start())
        .unwrap();
    let next_page = starts[crossing].page_start().0 + XLOG_BLCKSZ;

    // 1. Crash before the continuation page was written: zero it.
    let mut torn = img.clone();
    torn.bytes_mut()[next_page as usize..(next_page + XLOG_BLCKSZ) as usize].fill(0);
    let mut r = WalReader::new(torn, Wal::first_record());
    let n = std::iter::from_fn(|| r.next_record().unwrap()).count();
    assert_eq!(n, crossing);
    assert_eq!(r.end().unwrap().at, starts[crossing]);
    assert!(matches!(r.end().unwrap().reason, StopReason::BadContinuation(_)));

    // 2. The continuation page is there but is an older page (wrong address).
    let mut stale = img.clone();
    let addr = (next_page as usize) + 8;
    stale.bytes_mut()[addr..addr + 8].copy_from_slice(&(next_page - 8 * XLOG_BLCKSZ).to_le_bytes());
    let mut r = WalReader::new(stale, Wal::first_record());
    let n = std::iter::from_fn(|| r.next_record().unwrap()).count();
    assert_eq!(n, crossing);
    assert!(matches!(r.end().unwrap().reason, StopReason::BadPageHeader(_)));

    // 3. The image ends in the middle of the record.
    let mut short = img.clone();
    short.bytes_mut().truncate(next_page as usize);
    let mut r = WalReader::new(short, Wal::first_record());
    let n = std::iter::from_fn(|| r.next_record().unwrap()).count();
    assert_eq!(n, crossing);
    assert!(matches!(r.end().unwrap().reason, StopReason::BadContinuation(_)));

    // 4. Undamaged: everything, then a clean end.
    let mut r = WalReader::new(img, Wal::first_record());
    assert_eq!(std::iter::from_fn(|| r.next_record().unwrap()).count(), starts.len());
    assert_eq!(r.end().unwrap().reason, StopReason::EndOfWal);
}

#[test]
fn a_wrong_back_link_is_detected_even_with_a_valid_crc() {
    let (wal, starts) = small_wal_with_records(10, 100);
    let mut img = wal.memory_image().unwrap();
    // Point record 5's back-link at record 3 and fix its CRC, as a stale record from an
    // earlier pass over the same position would look.
    let s = starts[5].0 as usize;
    let bytes = img.bytes_mut();
    bytes[s + 8..s + 16].copy_from_slice(&starts[3].0.to_le_bytes());
    let total = u32::from_le_bytes(bytes[s..s + 4].try_into().unwrap()) as usize;
    let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[s + 24..s + total]), &bytes[s..s + 20]);
    bytes[s + 20..s + 24].copy_from_slice(&crc.to_le_bytes());
    let mut r = WalReader::new(img, Wal::first_record());
    assert_eq!(std::iter::from_fn(|| r.next_record().unwrap()).count(), 5);
    assert_eq!(r.end().unwrap().reason, StopReason::BadPrevLink { expected: starts[4], found: starts[3] });
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    assert!(Wal::open(WalConfig { wal_buffers: 1, ..WalConfig::default() }).is_err());
    assert!(
        Wal::open(WalConfig { insert_mode: InsertMode::InsertionLocks(200), ..WalConfig::default() })
            .is_err()
    );
    let wal = Wal::open(WalConfig::default()).unwrap();
    let mut b = wal.attach_auxiliary();
    let big = vec![0u8; lockstack_xlog::MAX_RECORD_PAYLOAD + 1];
    assert!(matches!(b.insert(&record(0, &big)), Err(lockstack_xlog::WalError::RecordTooLarge { .. })));
    assert_eq!(wal.insert_position(), XLogRecPtr(40), "a rejected record reserved space");
    assert!(matches!(b.flush(XLogRecPtr(1 << 30)), Err(lockstack_xlog::WalError::FlushBeyondEnd { .. })));
    assert!(matches!(wal.reader(Wal::first_record()), Err(lockstack_xlog::WalError::NotReadable)));
    // A file sink whose directory cannot be created.
    let f = tempfile::NamedTempFile::new().unwrap();
    let err =
        Wal::open(WalConfig { sink: WalSink::Files { dir: f.path().join("x") }, ..WalConfig::default() })
            .unwrap_err();
    assert!(err.to_string().contains(&f.path().display().to_string()), "{err}");
}

/// `attach(id)` refuses a second live handle of one id and ids in the auxiliary range, with
/// typed errors, and frees the id when the handle is dropped.
#[test]
fn attach_is_one_handle_per_backend_id() {
    use lockstack_common::BackendId;
    use lockstack_xlog::{AUXILIARY_BACKEND_BASE, AttachError};
    let wal = Wal::open(memory_cfg(InsertMode::InsertionLocks(8), 8)).unwrap();
    let a = wal.attach(BackendId(5)).unwrap();
    let e = wal.attach(BackendId(5)).unwrap_err();
    assert_eq!(e, AttachError::AlreadyAttached { id: BackendId(5), subsystem: "WAL" });
    assert!(matches!(wal.attach(BackendId(AUXILIARY_BACKEND_BASE)), Err(AttachError::OutOfRange { .. })));
    let _aux = (wal.attach_auxiliary(), wal.attach_auxiliary());
    drop(a);
    wal.attach(BackendId(5)).unwrap();
}
