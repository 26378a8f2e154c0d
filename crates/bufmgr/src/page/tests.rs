//! Unit tests of the page layout: init, items, fragmentation, verification and checksums.

use super::layout::put_u16;
use super::*;

fn new_page(special: usize) -> Vec<u8> {
    let mut p = vec![0u8; BLCKSZ];
    init(&mut p, special);
    p
}

#[test]
fn verify_accepts_valid_and_new_pages_and_rejects_damage() {
    let mut p = new_page(16);
    for i in 0..20u8 {
        add_item(&mut p, &[i; 40], None).unwrap();
    }
    assert_eq!(verify(&p), Ok(()));
    assert_eq!(verify(&[0u8; BLCKSZ]), Ok(()));
    // Pruning's results: a redirect (its offset is a line pointer number), dead and
    // unused line pointers without storage.
    let mut pruned = p.clone();
    set_item_id(&mut pruned, 3, ItemId { off: 17, flags: LpFlags::Redirect, len: 0 });
    set_item_id(&mut pruned, 7, ItemId { off: 0, flags: LpFlags::Dead, len: 0 });
    set_item_id(&mut pruned, 9, ItemId::UNUSED);
    assert_eq!(verify(&pruned), Ok(()));
    repair_fragmentation(&mut pruned);
    assert_eq!(verify(&pruned), Ok(()));
    let mut bad = p.clone();
    put_u16(&mut bad, 14, 20); // pd_upper below pd_lower
    assert!(verify(&bad).unwrap_err().to_string().contains("not in order"));
    let mut bad = p.clone();
    put_u16(&mut bad, 10, 0x80);
    assert!(verify(&bad).unwrap_err().to_string().contains("pd_flags"));
    let mut bad = p.clone();
    put_u16(&mut bad, 16, BLCKSZ as u16 - 12);
    assert!(verify(&bad).is_err());
    let mut bad = p.clone();
    bad[18] ^= 1;
    assert!(verify(&bad).unwrap_err().to_string().contains("pd_pagesize_version"));
    let mut bad = p.clone();
    let at = SIZE_OF_PAGE_HEADER + 4 * 4;
    bad[at..at + 4]
        .copy_from_slice(&ItemId { off: 8190, flags: LpFlags::Normal, len: 100 }.pack().to_le_bytes());
    assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5"));
    let mut bad = p.clone();
    bad[at..at + 4]
        .copy_from_slice(&ItemId { off: 99, flags: LpFlags::Redirect, len: 0 }.pack().to_le_bytes());
    assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5"));
    let mut bad = p.clone();
    let four = item_id(&p, 4);
    bad[at..at + 4].copy_from_slice(&ItemId { off: four.off + 8, ..four }.pack().to_le_bytes());
    assert!(verify(&bad).unwrap_err().to_string().contains("line pointer 5 (offset"), "overlap");
    let mut bad = vec![0u8; BLCKSZ];
    bad[4000] = 1;
    assert!(verify(&bad).unwrap_err().to_string().contains("not all zeros"));
}

/// Pseudo-random bytes, and valid pages with random bytes at many offsets: verification
/// never panics, and every accessor is safe on a page that passes it.
#[test]
fn verify_never_panics_and_verified_pages_are_safe() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut base = new_page(24);
    let mut i = 0u8;
    while add_item(&mut base, &[i; 56], None).is_some() {
        i = i.wrapping_add(1);
    }
    let mut passed = 0;
    for round in 0..4000 {
        let mut p = if round % 4 == 0 {
            (0..BLCKSZ).map(|_| next() as u8).collect::<Vec<u8>>()
        } else {
            let mut p = base.clone();
            let at = (next() as usize) % (BLCKSZ - 8);
            let n = 1 + (next() as usize) % 8;
            for b in &mut p[at..at + n] {
                *b = next() as u8;
            }
            p
        };
        if verify(&p).is_err() {
            continue;
        }
        passed += 1;
        let max = max_offset_number(&p);
        for off in 0..=max + 1 {
            let _ = get_item(&p, off);
            if off >= 1 && off <= max {
                let _ = item_id(&p, off);
                let _ = item_data(&p, off);
            }
        }
        let _ = (special(&p).len(), free_space(&p), lsn(&p), prune_xid(&p));
        if !is_new(&p) {
            let _ = add_item(&mut p, &[1; 30], None);
            repair_fragmentation(&mut p);
        }
    }
    assert!(passed > 1000, "most single-field damage leaves a valid page: {passed}");
}

#[test]
fn init_sets_header() {
    let p = new_page(16);
    assert!(!is_new(&p));
    assert_eq!(lower(&p), 24);
    assert_eq!(upper(&p), BLCKSZ - 16);
    assert_eq!(special(&p).len(), 16);
    assert_eq!(max_offset_number(&p), 0);
    assert_eq!(free_space(&p), BLCKSZ - 16 - 24 - 4);
    assert!(is_new(&[0u8; BLCKSZ]));
}

#[test]
fn add_get_and_fill() {
    let mut p = new_page(0);
    let mut n = 0u16;
    while let Some(off) = add_item(&mut p, &[n as u8; 61], None) {
        n += 1;
        assert_eq!(off, n);
    }
    // 61 bytes align to 64, plus a 4-byte line pointer: (8192 - 24) / 68 = 120 items.
    assert_eq!(n, 120);
    for o in 1..=n {
        assert_eq!(get_item(&p, o).unwrap(), &[(o - 1) as u8; 61][..]);
    }
    assert!(get_item(&p, n + 1).is_none());
    assert!(free_space(&p) < 64);
}

#[test]
fn lsn_flags_and_all_visible() {
    let mut p = new_page(0);
    set_lsn(&mut p, 0x1234_5678_9ABC);
    assert_eq!(lsn(&p), 0x1234_5678_9ABC);
    assert!(!is_all_visible(&p));
    set_all_visible(&mut p);
    assert!(is_all_visible(&p));
    assert_eq!(flags(&p), PD_ALL_VISIBLE);
    clear_all_visible(&mut p);
    assert_eq!(flags(&p), 0);
    set_prune_xid(&mut p, 77);
    assert_eq!(prune_xid(&p), 77);
}

#[test]
fn repair_keeps_live_items_and_reuses_unused() {
    let mut p = new_page(8);
    for i in 0..10u8 {
        add_item(&mut p, &[i; 100], None).unwrap();
    }
    let before = free_space(&p);
    set_item_id(&mut p, 3, ItemId::UNUSED);
    let id = item_id(&p, 5);
    set_item_id(&mut p, 5, ItemId { flags: LpFlags::Dead, ..id });
    let after = repair_fragmentation(&mut p);
    assert_eq!(after, before + 2 * 104);
    for o in [1u16, 2, 4, 6, 7, 8, 9, 10] {
        assert_eq!(get_item(&p, o).unwrap(), &[(o - 1) as u8; 100][..], "item {o}");
    }
    assert!(get_item(&p, 3).is_none() && get_item(&p, 5).is_none());
    assert_eq!(flags(&p) & PD_HAS_FREE_LINES, PD_HAS_FREE_LINES);
    assert_eq!(add_item(&mut p, b"reuse", None), Some(3));
    assert_eq!(add_item(&mut p, b"x", Some(5)), None, "5 is dead, not unused");
    assert_eq!(add_item(&mut p, b"end", Some(11)), Some(11));
}
