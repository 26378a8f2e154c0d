//! CLOG behaviour: status round trips, trees across pages, persistence in segment files,
//! truncation, eviction of dirty pages, and a concurrent stress through a small buffer pool.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use lockstack_clog::{
    CLOG_XACTS_PER_PAGE, Clog, ClogConfig, ClogError, ClogUpdatePath, SLRU_PAGE_SIZE, SlruLocking,
    SlruStorage, TruncateOutcome, XidStatus, clog_page_precedes, segment_file_name,
};
use lockstack_common::{BackendId, TransactionId};
use lockstack_lwlock::LwLockKind;
use proptest::prelude::*;

const PAGE: u32 = CLOG_XACTS_PER_PAGE;

fn x(n: u32) -> TransactionId {
    TransactionId(n)
}

fn status(clog: &Clog, xid: u32) -> XidStatus {
    clog.get_status(x(xid)).unwrap().0
}

fn memory(buffers: usize, locking: SlruLocking) -> Clog {
    Clog::new(ClogConfig { buffers, locking, ..ClogConfig::default() }).unwrap()
}

/// A tiny deterministic generator (xorshift64*), so that tests need no extra dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn status_round_trip_with_subtransactions() {
    let clog = memory(8, SlruLocking::ControlLock);
    assert_eq!(status(&clog, 100), XidStatus::InProgress);
    clog.set_tree_status(x(100), &[x(101), x(103)], XidStatus::Committed, 0).unwrap();
    clog.set_tree_status(x(102), &[x(104)], XidStatus::Aborted, 0).unwrap();
    clog.set_tree_status(x(105), &[], XidStatus::Committed, 0).unwrap();
    let expect = [
        (99, XidStatus::InProgress),
        (100, XidStatus::Committed),
        (101, XidStatus::Committed),
        (102, XidStatus::Aborted),
        (103, XidStatus::Committed),
        (104, XidStatus::Aborted),
        (105, XidStatus::Committed),
        (106, XidStatus::InProgress),
    ];
    for (xid, st) in expect {
        assert_eq!(status(&clog, xid), st, "xid {xid}");
    }
    // Replaying the same outcome is allowed; reversing it is not, and changes nothing.
    clog.set_tree_status(x(100), &[x(101)], XidStatus::Committed, 0).unwrap();
    let e = clog.set_tree_status(x(100), &[], XidStatus::Aborted, 0).unwrap_err();
    assert!(
        matches!(e, ClogError::InvalidTransition { from: XidStatus::Committed, to: XidStatus::Aborted, .. }),
        "{e}"
    );
    let e = clog.set_tree_status(x(106), &[x(102)], XidStatus::Committed, 0).unwrap_err();
    assert!(matches!(e, ClogError::InvalidTransition { xid, .. } if xid == x(102)), "{e}");
    assert_eq!(status(&clog, 106), XidStatus::InProgress, "a refused tree must change nothing on its page");
    assert!(matches!(
        clog.set_tree_status(x(107), &[], XidStatus::SubCommitted, 0),
        Err(ClogError::InvalidStatus { .. })
    ));
    assert!(matches!(
        clog.set_tree_status(x(107), &[], XidStatus::InProgress, 0),
        Err(ClogError::InvalidStatus { .. })
    ));
}

#[test]
fn every_bit_position_in_a_word_is_independent() {
    let clog = memory(4, SlruLocking::ControlLock);
    // 64 consecutive xids cover two 64-bit words, every 2-bit position of each.
    let base = 5 * PAGE - 32;
    let pick = |i: u32| match i % 3 {
        0 => XidStatus::Committed,
        1 => XidStatus::Aborted,
        _ => XidStatus::InProgress,
    };
    for i in 0..64 {
        let st = pick(i);
        if st != XidStatus::InProgress {
            clog.set_tree_status(x(base + i), &[], st, 0).unwrap();
        }
    }
    for i in 0..64 {
        assert_eq!(status(&clog, base + i), pick(i), "xid {}", base + i);
    }
}

#[test]
fn trees_across_page_boundaries() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let clog = memory(32, locking);
        // Top xid on the last slot of page 0, subxids on pages 1 and 2, unsorted.
        let top = PAGE - 1;
        let subs = [x(2 * PAGE + 7), x(PAGE), x(PAGE - 2), x(PAGE + 1)];
        clog.set_tree_status(x(top), &subs, XidStatus::Committed, 0).unwrap();
        for s in subs {
            assert_eq!(clog.get_status(s).unwrap().0, XidStatus::Committed, "{s} ({locking})");
        }
        assert_eq!(status(&clog, top), XidStatus::Committed);
        assert_eq!(status(&clog, PAGE + 2), XidStatus::InProgress);
        // An aborted tree across pages.
        let subs = [x(3 * PAGE), x(3 * PAGE + 1)];
        clog.set_tree_status(x(3 * PAGE - 1), &subs, XidStatus::Aborted, 0).unwrap();
        for s in subs {
            assert_eq!(clog.get_status(s).unwrap().0, XidStatus::Aborted);
        }
        // The last xid of the 32-bit space and page 0 after wraparound.
        clog.set_tree_status(x(u32::MAX), &[], XidStatus::Committed, 0).unwrap();
        assert_eq!(status(&clog, u32::MAX), XidStatus::Committed);
        assert_eq!(status(&clog, u32::MAX - 1), XidStatus::InProgress);
    }
}

#[test]
fn a_refused_multi_page_commit_leaves_other_pages_sub_committed() {
    let clog = memory(8, SlruLocking::ControlLock);
    clog.set_tree_status(x(10), &[], XidStatus::Aborted, 0).unwrap();
    // Committing the aborted xid 10 with a subxid on page 1: the subxid is sub-committed first,
    // then the top page refuses. Readers see the subxid as sub-committed (they would consult
    // pg_subtrans and find its parent aborted), never as committed.
    let e = clog.set_tree_status(x(10), &[x(PAGE + 10)], XidStatus::Committed, 0).unwrap_err();
    assert!(matches!(e, ClogError::InvalidTransition { from: XidStatus::Aborted, .. }), "{e}");
    assert_eq!(status(&clog, PAGE + 10), XidStatus::SubCommitted);
    // A sub-committed xid may still be aborted (what recovery does after a crash mid-commit)
    // or committed, but not put back in progress.
    clog.set_tree_status(x(PAGE + 10), &[], XidStatus::Aborted, 0).unwrap();
    assert_eq!(status(&clog, PAGE + 10), XidStatus::Aborted);
    // Sub-committing a committed xid is a no-op: a retried commit keeps it committed.
    clog.set_tree_status(x(20), &[x(PAGE + 20)], XidStatus::Committed, 0).unwrap();
    clog.set_tree_status(x(20), &[x(PAGE + 20)], XidStatus::Committed, 0).unwrap();
    assert_eq!(status(&clog, PAGE + 20), XidStatus::Committed);
}

#[test]
fn async_commit_lsn_groups() {
    let clog = memory(8, SlruLocking::ControlLock);
    // xids 64..96 form one LSN group, 96..128 the next.
    clog.set_tree_status(x(64), &[], XidStatus::Committed, 500).unwrap();
    clog.set_tree_status(x(70), &[], XidStatus::Committed, 300).unwrap();
    clog.set_tree_status(x(95), &[], XidStatus::Committed, 0).unwrap();
    clog.set_tree_status(x(96), &[], XidStatus::Committed, 900).unwrap();
    assert_eq!(clog.get_status(x(64)).unwrap(), (XidStatus::Committed, 500));
    assert_eq!(clog.get_status(x(70)).unwrap(), (XidStatus::Committed, 500), "group keeps its max LSN");
    assert_eq!(clog.get_status(x(95)).unwrap(), (XidStatus::Committed, 500));
    assert_eq!(clog.get_status(x(80)).unwrap(), (XidStatus::InProgress, 500));
    assert_eq!(clog.get_status(x(96)).unwrap(), (XidStatus::Committed, 900));
    assert_eq!(clog.get_status(x(63)).unwrap(), (XidStatus::InProgress, 0), "xids 32..64 have no LSN");
}

#[test]
fn status_survives_closing_and_reopening_segment_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg_xact");
    let cfg = || ClogConfig {
        buffers: 4,
        storage: SlruStorage::Directory { path: path.clone(), fsync: true },
        zero_missing: true,
        ..ClogConfig::default()
    };
    // Pages 0, 31 (segment 0), 32 (segment 1) and 70 (segment 2).
    let xids = [5, 31 * PAGE + 9, 32 * PAGE, 70 * PAGE + PAGE - 1];
    {
        let clog = Clog::new(cfg()).unwrap();
        for (i, &xid) in xids.iter().enumerate() {
            let st = if i % 2 == 0 { XidStatus::Committed } else { XidStatus::Aborted };
            clog.set_tree_status(x(xid), &[], st, 0).unwrap();
        }
        clog.set_tree_status(x(6), &[x(32 * PAGE + 1)], XidStatus::Committed, 0).unwrap();
        clog.flush().unwrap();
        assert_eq!(clog.slru().segments().unwrap(), vec![0, 1, 2]);
    }
    for seg in 0..3 {
        let meta = std::fs::metadata(path.join(segment_file_name(seg))).unwrap();
        assert_eq!(meta.len() % SLRU_PAGE_SIZE as u64, 0, "segment {seg} is whole pages");
    }
    // Reopen with a strict configuration: the pages must come from the files.
    let clog = Clog::new(ClogConfig { zero_missing: false, ..cfg() }).unwrap();
    for (i, &xid) in xids.iter().enumerate() {
        let st = if i % 2 == 0 { XidStatus::Committed } else { XidStatus::Aborted };
        assert_eq!(status(&clog, xid), st, "xid {xid}");
    }
    assert_eq!(status(&clog, 6), XidStatus::Committed);
    assert_eq!(status(&clog, 32 * PAGE + 1), XidStatus::Committed);
    assert_eq!(status(&clog, 7), XidStatus::InProgress);
    assert_eq!(clog.stats().reads, 4, "pages 0, 31, 32 and 70 read once each");
    // Group LSNs are not persistent.
    assert_eq!(clog.get_status(x(5)).unwrap().1, 0);
    // A page never written is an error in strict mode.
    let e = clog.get_status(x(200 * PAGE)).unwrap_err();
    assert!(e.to_string().contains("does not exist"), "{e}");
}

/// A strict CLOG over files reports a missing or short segment as an error naming the
/// transaction (PostgreSQL's "could not access status of transaction"), never as zeros
/// ("in progress").
#[test]
fn missing_or_truncated_segments_are_errors_in_strict_mode() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg_xact");
    let cfg = |zero_missing| ClogConfig {
        buffers: 4,
        storage: SlruStorage::Directory { path: path.clone(), fsync: false },
        zero_missing,
        ..ClogConfig::default()
    };
    {
        let clog = Clog::new(cfg(true)).unwrap();
        for p in 0..3 {
            clog.set_tree_status(x(p * PAGE + 5), &[], XidStatus::Committed, 0).unwrap();
        }
        clog.flush().unwrap();
    }
    let seg = path.join(segment_file_name(0));
    // Cut inside page 2, then before it: a short read, then a page past the end.
    for len in [2 * SLRU_PAGE_SIZE as u64 + 100, 2 * SLRU_PAGE_SIZE as u64] {
        std::fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(len).unwrap();
        let clog = Clog::new(cfg(false)).unwrap();
        assert_eq!(status(&clog, 5), XidStatus::Committed);
        let e = clog.get_status(x(2 * PAGE + 5)).unwrap_err().to_string();
        assert!(e.starts_with(&format!("could not access status of transaction {}", 2 * PAGE + 5)), "{e}");
    }
    std::fs::remove_file(&seg).unwrap();
    let clog = Clog::new(cfg(false)).unwrap();
    let e = clog.get_status(x(5)).unwrap_err().to_string();
    assert!(e.contains("could not access status of transaction 5"), "{e}");
}

#[test]
fn io_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg_xact");
    let clog = Clog::new(ClogConfig {
        buffers: 2,
        storage: SlruStorage::Directory { path: path.clone(), fsync: false },
        ..ClogConfig::default()
    })
    .unwrap();
    clog.set_tree_status(x(5), &[], XidStatus::Committed, 0).unwrap();
    // A directory where segment 0000 should be: opening it for writing fails.
    std::fs::create_dir(path.join("0000")).unwrap();
    let e = clog.flush().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("0000") && msg.contains("page 0"), "{msg}");
    // The failed write left the page dirty and valid: its status is still readable.
    assert_eq!(status(&clog, 5), XidStatus::Committed);
    assert!(clog.slru().resident_pages().iter().any(|&(p, _, dirty)| p == 0 && dirty));
    // Reading a page from the unreadable "segment" fails and names it too.
    let e = clog.get_status(x(3 * PAGE)).unwrap_err();
    assert!(e.to_string().contains("0000") && e.to_string().contains("page 3"), "{e}");
}

#[test]
fn truncation_never_removes_the_newest_segment() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pg_xact");
    let clog = Clog::new(ClogConfig {
        buffers: 4,
        storage: SlruStorage::Directory { path: path.clone(), fsync: false },
        ..ClogConfig::default()
    })
    .unwrap();
    // Segments 0..=4, one page each, newest page 4*32+3.
    for seg in 0..5u32 {
        let xid = (seg * 32 + 3) * PAGE + 11;
        clog.extend(x((seg * 32 + 3) * PAGE)).unwrap();
        clog.set_tree_status(x(xid), &[], XidStatus::Committed, 0).unwrap();
    }
    clog.flush().unwrap();
    assert_eq!(clog.slru().segments().unwrap(), vec![0, 1, 2, 3, 4]);
    assert_eq!(clog.slru().latest_page(), Some(4 * 32 + 3));

    // A cutoff beyond the newest page looks like wraparound: nothing is removed.
    let r = clog.truncate(x(9 * 32 * PAGE)).unwrap();
    assert_eq!(r, TruncateOutcome::ApparentWraparound);
    assert_eq!(clog.slru().segments().unwrap().len(), 5);

    // Cutoff inside segment 2: segments 0 and 1 go.
    let r = clog.truncate(x((2 * 32 + 5) * PAGE)).unwrap();
    assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![0, 1] });
    assert_eq!(clog.slru().segments().unwrap(), vec![2, 3, 4]);
    assert!(!path.join("0000").exists() && path.join("0004").exists());

    // Cutoff on the newest page itself: everything older goes, the newest segment stays.
    let r = clog.truncate(x((4 * 32 + 3) * PAGE + 11)).unwrap();
    assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![2, 3] });
    assert_eq!(clog.slru().segments().unwrap(), vec![4]);
    assert_eq!(status(&clog, (4 * 32 + 3) * PAGE + 11), XidStatus::Committed);
    // Truncated pages left no buffer behind, and their xids are refused, not answered.
    assert!(clog.slru().resident_pages().iter().all(|&(p, ..)| p >= 4 * 32));
    let e = clog.get_status(x(3 * PAGE + 11)).unwrap_err();
    assert!(matches!(e, ClogError::Truncated { oldest, .. } if oldest == x((4 * 32 + 3) * PAGE + 11)), "{e}");
    assert_eq!(clog.stats().truncates, 2);
}

#[test]
fn truncation_protects_the_latest_page_even_when_the_cutoff_is_later_in_its_segment() {
    let clog = memory(4, SlruLocking::ControlLock);
    clog.extend(x(40 * PAGE)).unwrap(); // segment 1
    clog.set_tree_status(x(40 * PAGE + 1), &[], XidStatus::Committed, 0).unwrap();
    clog.flush().unwrap();
    // Cutoff page 41 is in the same segment but after the latest page: the cutoff is not
    // rounded down to page 32, so this is apparent wraparound (PostgreSQL 13+).
    let r = clog.truncate(x(41 * PAGE)).unwrap();
    assert_eq!(r, TruncateOutcome::ApparentWraparound);
    assert_eq!(clog.slru().segments().unwrap(), vec![1]);
    // A cutoff on the latest page keeps its segment.
    let r = clog.truncate(x(40 * PAGE + 1)).unwrap();
    assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![] });
    assert_eq!(clog.slru().segments().unwrap(), vec![1]);
}

/// A reader that checked an xid against a bound of its own, then lost the
/// race to a truncation, must not get an answer for the truncated xid: before the CLOG kept
/// its own bound, the read returned IN PROGRESS for a committed xid (missing pages read as
/// zeros) or failed with "page 0 does not exist". The interleaving is forced by running the
/// truncation between the caller's check and the read.
#[test]
fn a_status_read_that_loses_the_race_to_truncation_is_refused() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        for zero_missing in [true, false] {
            let clog = Clog::new(ClogConfig { buffers: 16, locking, zero_missing, ..ClogConfig::default() })
                .unwrap();
            let committed = x(5 * PAGE + 7);
            for page in [0, 5, 40] {
                clog.extend(x(page * PAGE)).unwrap();
            }
            clog.set_tree_status(committed, &[], XidStatus::Committed, 0).unwrap();
            clog.flush().unwrap();
            assert_eq!(clog.oldest_clog_xid(), None);
            // The caller's own bound admits the xid ...
            let callers_bound = x(3);
            assert!(!committed.precedes(callers_bound));
            // ... then the oldest xid advances and the CLOG is truncated ...
            let oldest = x(40 * PAGE);
            let r = clog.truncate(oldest).unwrap();
            assert_eq!(r, TruncateOutcome::Truncated { removed_segments: vec![0] }, "{locking}");
            // ... and the read happens.
            let what = format!("{locking}, zero_missing {zero_missing}");
            match clog.get_status(committed) {
                Err(ClogError::Truncated { xid, oldest: o }) => {
                    assert_eq!((xid, o), (committed, oldest), "{what}")
                }
                other => panic!("{what}: a truncated xid was answered: {other:?}"),
            }
            assert_eq!(clog.oldest_clog_xid(), Some(oldest));
            assert_eq!(status(&clog, 40 * PAGE + 1), XidStatus::InProgress, "{what}");
            // The bound never moves backwards.
            clog.truncate(x(30 * PAGE)).unwrap();
            assert_eq!(clog.oldest_clog_xid(), Some(oldest));
        }
    }
}

#[test]
fn clog_page_order_is_circular() {
    assert!(clog_page_precedes(0, 1));
    assert!(!clog_page_precedes(1, 0));
    assert!(!clog_page_precedes(5, 5));
    // 131072 pages cover the xid space; page 131071 is just before page 0 after wraparound.
    assert!(clog_page_precedes(131_071, 0));
    assert!(clog_page_precedes(100_000, 10));
    assert!(!clog_page_precedes(10, 100_000));
}

#[test]
fn lru_eviction_writes_dirty_pages_and_reads_them_back() {
    for locking in [SlruLocking::ControlLock, SlruLocking::Banks] {
        let buffers = if locking == SlruLocking::Banks { 16 } else { 8 };
        let clog = memory(buffers, locking);
        // 40 pages, each dirtied once, through `buffers` buffers.
        for p in 0..40u32 {
            clog.set_tree_status(x(p * PAGE + p), &[], XidStatus::Committed, 0).unwrap();
        }
        let s = clog.stats();
        assert_eq!(s.reads, 40, "{locking}: each page was missed once");
        assert_eq!(s.evictions, 40 - buffers as u64, "{locking}");
        assert_eq!(s.writes, s.evictions, "{locking}: every evicted page was dirty and written first");
        for p in 0..40u32 {
            assert_eq!(status(&clog, p * PAGE + p), XidStatus::Committed, "{locking}: page {p}");
            assert_eq!(status(&clog, p * PAGE + p + 1), XidStatus::InProgress, "{locking}: page {p}");
        }
        let s2 = clog.stats();
        assert_eq!(s2.hits + s2.reads - s.hits - s.reads, 80, "{locking}: 80 look-ups");
        assert!(s2.reads - s.reads >= 40 - buffers as u64, "{locking}: evicted pages were read back");
        let resident = clog.slru().resident_pages();
        assert!(resident.len() <= buffers);
        assert!(resident.iter().any(|&(p, ..)| p == 39), "the latest page stays resident");
    }
}

#[test]
fn group_update_reports_its_path_and_falls_back_for_non_resident_pages() {
    let clog = memory(8, SlruLocking::ControlLock);
    // Page 0 not resident yet: the group path (alone) cannot do I/O, so the caller locks.
    let p = clog.set_tree_status_as(Some(BackendId(0)), x(10), &[], XidStatus::Committed, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::Locked);
    // Now resident: the uncontended group path takes the lock conditionally.
    let p = clog.set_tree_status_as(Some(BackendId(0)), x(11), &[x(12)], XidStatus::Committed, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::GroupAlone);
    // Too many subxids, an unattached caller, or a backend out of range: never the group.
    let subs: Vec<TransactionId> = (20..26).map(x).collect();
    let p = clog.set_tree_status_as(Some(BackendId(0)), x(19), &subs, XidStatus::Committed, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::Locked);
    let p = clog.set_tree_status(x(30), &[], XidStatus::Committed, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::Locked);
    let p = clog.set_tree_status_as(Some(BackendId(100_000)), x(31), &[], XidStatus::Aborted, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::Locked);
    // An invalid transition through the group path is reported, not applied.
    let e = clog.set_tree_status_as(Some(BackendId(1)), x(11), &[], XidStatus::Aborted, 0).unwrap_err();
    assert!(matches!(e, ClogError::InvalidTransition { .. }), "{e}");
    assert_eq!(status(&clog, 11), XidStatus::Committed);
    // Group update off.
    let off = Clog::new(ClogConfig { group_update: false, ..ClogConfig::default() }).unwrap();
    off.extend(x(3)).unwrap();
    let p = off.set_tree_status_as(Some(BackendId(0)), x(10), &[], XidStatus::Committed, 0).unwrap();
    assert_eq!(p, ClogUpdatePath::Locked);
}

/// What one stress thread does with one of its xids.
#[derive(Clone, Copy)]
enum Plan {
    Commit,
    Abort,
    /// Commit as a tree with this many subxids (the next xids owned by the same thread).
    CommitTree(u32),
}

/// Many threads commit/abort their own xids (some as trees spanning pages) and read everyone's
/// through a pool much smaller than the pages touched; readers check that a tree is never
/// seen half committed, and that statuses never go backwards. At the end every xid has its
/// planned status.
fn stress(locking: SlruLocking, buffers: usize, group_update: bool, kind: LwLockKind) {
    const THREADS: u32 = 4;
    const PAGES: u32 = 48;
    const PER_THREAD: u32 = 600;
    let clog = Arc::new(
        Clog::new(ClogConfig { buffers, locking, group_update, lwlock_kind: kind, ..ClogConfig::default() })
            .unwrap(),
    );
    // Xid k of thread t: spread over PAGES pages, interleaved between threads so that
    // neighbouring xids (and pages) are shared.
    let xid_of = |t: u32, k: u32| -> u32 {
        let slot = k * THREADS + t;
        let page = slot % PAGES;
        page * PAGE + 3 + slot / PAGES
    };
    let mut expected: HashMap<u32, XidStatus> = HashMap::new();
    let mut plans: Vec<Vec<(u32, Vec<u32>, Plan)>> = Vec::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for t in 0..THREADS {
        let mut v = Vec::new();
        let mut k = 0;
        while k < PER_THREAD {
            let plan = match rng.below(10) {
                0..=4 => Plan::Commit,
                5..=6 => Plan::Abort,
                _ => Plan::CommitTree(1 + rng.below(3) as u32),
            };
            let nsub = if let Plan::CommitTree(n) = plan { n.min(PER_THREAD - k - 1) } else { 0 };
            let top = xid_of(t, k);
            let subs: Vec<u32> = (1..=nsub).map(|i| xid_of(t, k + i)).collect();
            let st = if matches!(plan, Plan::Abort) { XidStatus::Aborted } else { XidStatus::Committed };
            expected.insert(top, st);
            for &s in &subs {
                expected.insert(s, st);
            }
            v.push((top, subs, plan));
            k += 1 + nsub;
        }
        plans.push(v);
    }
    // Trees for the readers' atomicity check: (top, subs).
    let trees: Arc<Vec<(u32, Vec<u32>)>> =
        Arc::new(plans.iter().flatten().filter(|p| !p.1.is_empty()).map(|p| (p.0, p.1.clone())).collect());
    let done = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::new();
    for (t, plan) in plans.into_iter().enumerate() {
        let clog = Arc::clone(&clog);
        let trees = Arc::clone(&trees);
        handles.push(std::thread::spawn(move || {
            let mut rng = Rng(0xDEAD_BEEF ^ ((t as u64 + 1) * 0x1234_5678_9ABC));
            for (i, (top, subs, plan)) in plan.iter().enumerate() {
                let st = if matches!(plan, Plan::Abort) { XidStatus::Aborted } else { XidStatus::Committed };
                let subs_x: Vec<TransactionId> = subs.iter().map(|&s| x(s)).collect();
                clog.set_tree_status_as(Some(BackendId(t as u32)), x(*top), &subs_x, st, 0).unwrap();
                // Every few updates, check a random tree the way a reader would.
                if i % 3 == 0 && !trees.is_empty() {
                    let (tt, ts) = &trees[rng.below(trees.len() as u64) as usize];
                    check_tree(&clog, *tt, ts);
                }
            }
        }));
    }
    // One pure reader checking trees while the writers run.
    let reader = {
        let (clog, trees, done) = (Arc::clone(&clog), Arc::clone(&trees), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut rng = Rng(42);
            let mut checks = 0u64;
            while !done.load(Ordering::Relaxed) || checks < 100 {
                let (tt, ts) = &trees[rng.below(trees.len() as u64) as usize];
                check_tree(&clog, *tt, ts);
                checks += 1;
            }
            checks
        })
    };
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() >= 100);
    for (&xid, &st) in &expected {
        assert_eq!(status(&clog, xid), st, "xid {xid} ({locking}, {buffers} buffers, group {group_update})");
    }
    // Xids nobody touched stay in progress.
    assert_eq!(status(&clog, 2), XidStatus::InProgress);
    let s = clog.stats();
    assert!(s.evictions > 0 && s.writes > 0, "the pool must have been too small: {s:?}");
}

/// A committing tree is atomic for a reader that looks at the top xid first: once the top is
/// committed, no subxid may still be in progress. Looking at a subxid first: once a subxid on
/// another page is committed, the top must be committed.
fn check_tree(clog: &Clog, top: u32, subs: &[u32]) {
    let t = status(clog, top);
    for &s in subs {
        let st = status(clog, s);
        match t {
            XidStatus::Committed => assert!(
                matches!(st, XidStatus::Committed | XidStatus::SubCommitted),
                "top {top} committed but subxid {s} is {st}"
            ),
            XidStatus::Aborted => {}
            _ => {}
        }
        if st == XidStatus::Committed {
            let t2 = status(clog, top);
            assert_eq!(t2, XidStatus::Committed, "subxid {s} committed before its top {top}");
        }
    }
}

#[test]
fn stress_control_lock_with_group_update() {
    stress(SlruLocking::ControlLock, 8, true, LwLockKind::Atomic);
}

#[test]
fn stress_banks_with_group_update() {
    stress(SlruLocking::Banks, 32, true, LwLockKind::Atomic);
}

#[test]
fn stress_control_lock_without_group_update_pg92_lock() {
    stress(SlruLocking::ControlLock, 8, false, LwLockKind::Pg92);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random commits/aborts of random trees over 12 pages through 4 buffers agree with a
    /// map-based oracle; refused transitions change nothing.
    #[test]
    fn random_trees_match_an_oracle(
        ops in proptest::collection::vec(
            (0u32..12 * 64, proptest::collection::vec(0u32..12 * 64, 0..4), any::<bool>()),
            1..60,
        ),
        banks in any::<bool>(),
    ) {
        let (locking, buffers) = if banks { (SlruLocking::Banks, 16) } else { (SlruLocking::ControlLock, 4) };
        let clog = memory(buffers, locking);
        // 64 candidate xids per page, spread over the page.
        let to_xid = |i: u32| (i / 64) * PAGE + (i % 64) * 511 + 3;
        let mut oracle: HashMap<u32, XidStatus> = HashMap::new();
        for (top, subs, commit) in ops {
            let st = if commit { XidStatus::Committed } else { XidStatus::Aborted };
            let top = to_xid(top);
            let mut subs: Vec<u32> = subs.into_iter().map(to_xid).filter(|&s| s != top).collect();
            subs.sort_unstable();
            subs.dedup();
            let all: Vec<u32> = std::iter::once(top).chain(subs.iter().copied()).collect();
            let ok = all.iter().all(|xid| match oracle.get(xid) {
                None => true,
                Some(cur) => *cur == st,
            });
            let subs_x: Vec<TransactionId> = subs.iter().map(|&s| x(s)).collect();
            let r = clog.set_tree_status_as(Some(BackendId(0)), x(top), &subs_x, st, 0);
            let pages: std::collections::BTreeSet<u32> = all.iter().map(|a| a / PAGE).collect();
            if ok {
                prop_assert!(r.is_ok(), "{:?}", r);
                for a in all {
                    oracle.insert(a, st);
                }
            } else {
                prop_assert!(r.is_err());
                // A single-page tree is refused as a whole.
                if pages.len() == 1 {
                    for a in &all {
                        let want = oracle.get(a).copied().unwrap_or(XidStatus::InProgress);
                        prop_assert_eq!(status(&clog, *a), want);
                    }
                } else {
                    // Multi-page: pages may have been partly updated before the refusal;
                    // resynchronise the oracle with what the CLOG now says.
                    for a in &all {
                        match status(&clog, *a) {
                            XidStatus::InProgress | XidStatus::SubCommitted => {}
                            s => { oracle.insert(*a, s); }
                        }
                    }
                }
            }
        }
        for i in 0..12 * 64 {
            let xid = to_xid(i);
            let got = status(&clog, xid);
            match oracle.get(&xid) {
                Some(want) => prop_assert_eq!(got, *want, "xid {}", xid),
                None => prop_assert!(matches!(got, XidStatus::InProgress | XidStatus::SubCommitted), "xid {} is {}", xid, got),
            }
        }
    }
}
