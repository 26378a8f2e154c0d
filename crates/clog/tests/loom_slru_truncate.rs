//! loom model of an SLRU truncation racing the creation of a new segment:
//! `Slru::truncate` re-checks the latest page before removing each segment, with every bank
//! lock held exclusively, so a segment that another backend creates and writes out while the
//! truncation runs is never removed, whatever the interleaving. The cutoff is stale: the new
//! page lies half the page space after it, so the new segment's pages all precede it.
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-clog --release --test loom_slru_truncate`.
#![cfg(loom)]

use lockstack_clog::{Slru, SlruConfig, SlruLocking, SlruStorage, TruncateOutcome};
use lockstack_common::TrancheId;
use lockstack_lwlock::LwLockKind;
use loom::sync::Arc;

/// Circular order over 4096 pages: half the space is 2048 pages.
fn precedes_4096(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) & 0xFFF) >= 0x800
}

fn model(locking: SlruLocking) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(move || {
        let slru = Arc::new(
            Slru::new(SlruConfig {
                name: "Test",
                buffers: if locking == SlruLocking::Banks { 16 } else { 4 },
                locking,
                lwlock_kind: LwLockKind::Atomic,
                storage: SlruStorage::Memory,
                control_tranche: TrancheId::XACT_SLRU,
                bank_tranche: TrancheId::XACT_SLRU_BANK,
                buffer_tranche: TrancheId::XACT_BUFFER,
                lsn_groups_per_page: 0,
                page_precedes: precedes_4096,
                zero_missing: false,
                wal_flush: None,
            })
            .unwrap(),
        );
        // Segments 0 and 1 in storage; the latest page 2111 is 2047 pages after the cutoff 64.
        slru.zero_page(0).unwrap();
        slru.zero_page(33).unwrap();
        slru.zero_page(2111).unwrap();
        slru.flush().unwrap();
        let extender = {
            let slru = Arc::clone(&slru);
            loom::thread::spawn(move || {
                slru.zero_page(2112).unwrap();
                slru.flush().unwrap();
            })
        };
        let r = slru.truncate(64).unwrap();
        extender.join().unwrap();
        let segs = slru.segments().unwrap();
        assert!(segs.contains(&66), "the new segment was removed: {r:?}, {segs:?}");
        assert!(segs.contains(&65), "the latest page's segment was removed: {r:?}, {segs:?}");
        if let TruncateOutcome::Truncated { removed_segments } = &r {
            assert!(removed_segments.iter().all(|&s| s < 2), "{r:?}");
        }
    });
}

#[test]
fn truncation_races_a_new_segment_control_lock() {
    model(SlruLocking::ControlLock);
}

#[test]
fn truncation_races_a_new_segment_banks() {
    model(SlruLocking::Banks);
}
