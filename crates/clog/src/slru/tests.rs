//! Unit tests of the SLRU: segment names, configuration checks, victim choice, the WAL flush
//! hook, missing pages and truncation races.

use super::*;

fn plain_precedes(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn config(buffers: usize, locking: SlruLocking) -> SlruConfig {
    SlruConfig {
        name: "Test",
        buffers,
        locking,
        lwlock_kind: LwLockKind::Atomic,
        storage: SlruStorage::Memory,
        control_tranche: TrancheId::XACT_SLRU,
        bank_tranche: TrancheId::XACT_SLRU_BANK,
        buffer_tranche: TrancheId::XACT_BUFFER,
        lsn_groups_per_page: 4,
        page_precedes: plain_precedes,
        zero_missing: true,
        wal_flush: None,
    }
}

#[test]
fn segment_names_are_postgres_hex() {
    assert_eq!(segment_file_name(0), "0000");
    assert_eq!(segment_file_name(0x1f), "001F");
    assert_eq!(segment_file_name(0x12345), "12345");
    assert_eq!(parse_segment_file_name("001F"), Some(0x1f));
    assert_eq!(parse_segment_file_name("1F"), None);
    assert_eq!(parse_segment_file_name("00G0"), None);
    assert_eq!(parse_segment_file_name("1234567"), None);
}

#[test]
fn config_is_checked() {
    assert!(matches!(Slru::new(config(1, SlruLocking::ControlLock)), Err(SlruError::InvalidConfig { .. })));
    assert!(matches!(Slru::new(config(24, SlruLocking::Banks)), Err(SlruError::InvalidConfig { .. })));
    let s = Slru::new(config(48, SlruLocking::Banks)).unwrap();
    assert_eq!(s.bank_count(), 3);
    assert_eq!(s.bank_of(7), 1);
    let s = Slru::new(config(8, SlruLocking::ControlLock)).unwrap();
    assert_eq!(s.bank_count(), 1);
    assert_eq!(s.bank_of(7), 0);
}

#[test]
fn page_words_are_little_endian_bytes() {
    let s = Slru::new(config(2, SlruLocking::ControlLock)).unwrap();
    s.modify_page(3, true, |p| p.set_word(1, 0x0807_0605_0403_0201)).unwrap();
    let slot = s.slots.iter().find(|x| x.page() == 3).unwrap();
    let mut out = vec![0u8; SLRU_PAGE_SIZE];
    slot.copy_out(&mut out);
    assert_eq!(&out[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(out[..8].iter().all(|&b| b == 0));
}

#[test]
fn latest_page_is_never_the_victim() {
    let s = Slru::new(config(2, SlruLocking::ControlLock)).unwrap();
    s.zero_page(10).unwrap();
    // Page 10 is the oldest by LRU but the latest page: pages 1..6 cycle through the
    // other buffer.
    for p in 1..6 {
        s.read_page(p, |_| ()).unwrap();
    }
    let resident: Vec<u32> = s.resident_pages().iter().map(|r| r.0).collect();
    assert!(resident.contains(&10), "latest page evicted: {resident:?}");
    assert_eq!(s.stats().zeroed, 1);
    assert_eq!(s.stats().reads, 5);
    assert_eq!(s.stats().evictions, 4);
}

#[test]
fn wal_flush_hook_sees_the_highest_group_lsn_before_the_write() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = Arc::clone(&seen);
    let mut cfg = config(2, SlruLocking::ControlLock);
    cfg.wal_flush = Some(Arc::new(move |lsn| seen2.lock().push(lsn)));
    let s = Slru::new(cfg).unwrap();
    s.modify_page(0, true, |p| {
        p.raise_group_lsn(1, 500);
        p.raise_group_lsn(1, 300);
        p.raise_group_lsn(2, 700);
    })
    .unwrap();
    s.read_page(0, |p| assert_eq!((p.group_lsn(1), p.group_lsn(2)), (500, 700))).unwrap();
    s.flush().unwrap();
    assert_eq!(*seen.lock(), vec![700]);
    // Group LSNs are memory-only: re-reading the page resets them. (Page 0 is the latest
    // page, which is never evicted, until the latest page moves on.)
    s.set_latest_page(100);
    s.read_page(1, |_| ()).unwrap();
    s.read_page(2, |_| ()).unwrap();
    s.read_page(0, |p| assert_eq!(p.group_lsn(2), 0)).unwrap();
}

#[test]
fn missing_pages_error_when_not_zeroing() {
    let mut cfg = config(2, SlruLocking::ControlLock);
    cfg.zero_missing = false;
    let s = Slru::new(cfg).unwrap();
    let e = s.read_page(5, |_| ()).unwrap_err();
    assert!(matches!(e, SlruError::PageNotFound { page: 5, .. }), "{e}");
    // The failed read left no half-valid buffer behind.
    assert!(s.resident_pages().is_empty());
    s.zero_page(5).unwrap();
    assert_eq!(s.read_page(5, |p| p.word(0)).unwrap(), 0);
}

/// A circular order over 4096 pages (half the space is 2048 pages, 64 segments), so that
/// tests can put the latest page and the cutoff near the wraparound horizon cheaply.
fn precedes_4096(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) & 0xFFF) >= 0x800
}

fn config_4096(locking: SlruLocking) -> SlruConfig {
    let mut cfg = config(32, locking);
    cfg.page_precedes = precedes_4096;
    cfg.zero_missing = false;
    cfg
}

/// A segment created and written while a truncation runs is never
/// removed by it. The truncation passes its latest-page check, writes out an old dirty
/// page, and meanwhile (the hook) another backend zeroes and flushes the first page of a
/// new segment, which with this cutoff precedes it (a stale cutoff, half the page space
/// behind the new page).
#[test]
fn truncation_never_removes_a_segment_created_while_it_runs() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let s = Slru::new(config_4096(locking)).unwrap();
        for p in [0, 33] {
            s.zero_page(p).unwrap();
            s.modify_page(p, true, |pg| pg.set_word(0, u64::from(p) + 1)).unwrap();
        }
        s.flush().unwrap();
        // Page 33 is dirty again, so the truncation has a write to do.
        s.modify_page(33, true, |pg| pg.set_word(1, 7)).unwrap();
        // The latest page, 2047 pages after the cutoff 64: a legal span.
        s.zero_page(2111).unwrap();
        *s.truncate_hook.lock() = Some(Box::new(|s: &Slru| {
            // Another backend extends the log into segment 66 and writes the page out.
            s.zero_page(2112).unwrap();
            s.modify_page(2112, true, |pg| pg.set_word(0, 2113)).unwrap();
            s.flush().unwrap();
        }));
        let r = s.truncate(64).unwrap();
        assert!(s.segments().unwrap().contains(&66), "{locking}: the new segment was removed ({r:?})");
        // The new latest page precedes the cutoff: nothing may be removed.
        assert_eq!(r, TruncateOutcome::ApparentWraparound, "{locking}");
        assert_eq!(s.segments().unwrap(), vec![0, 1, 65, 66], "{locking}");
        // The new page reads back from storage once it is no longer resident.
        for p in 2113..2113 + 64 {
            s.zero_page(p).unwrap();
        }
        assert!(s.resident_pages().iter().all(|r| r.0 != 2112), "{locking}: still resident");
        assert_eq!(s.read_page(2112, |pg| pg.word(0)).unwrap(), 2113, "{locking}");
    }
}

/// The cutoff is not rounded down to its segment before the
/// wraparound check. A span of 2047 pages from the cutoff 70 to the latest page is legal;
/// rounding the cutoff to 64 made it look like wraparound.
#[test]
fn truncation_accepts_a_legal_span_to_an_unaligned_cutoff() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let s = Slru::new(config_4096(locking)).unwrap();
        for p in [40, 70, 2117] {
            s.zero_page(p).unwrap();
        }
        s.flush().unwrap();
        let r = s.truncate(70).unwrap();
        assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![1] }, "{locking}");
        assert_eq!(s.segments().unwrap(), vec![2, 66], "{locking}");
    }
}

/// A segment is removed only if its first and its last page precede
/// the unrounded cutoff (`SlruMayDeleteSegment`): segment 66 stays, although every page of
/// it precedes 64, the cutoff rounded down.
#[test]
fn truncation_compares_segments_with_the_unrounded_cutoff() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let s = Slru::new(config_4096(locking)).unwrap();
        for p in [40, 70, 2112, 2111] {
            s.zero_page(p).unwrap();
        }
        s.flush().unwrap();
        assert_eq!(s.latest_page(), Some(2111));
        let r = s.truncate(70).unwrap();
        // Segment 66 (pages 2112..2144): its first page is 2042 pages after the cutoff.
        assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![1] }, "{locking}");
        assert_eq!(s.segments().unwrap(), vec![2, 65, 66], "{locking}");
    }
}
