//! Visibility map against a plain bitmap oracle: random set / clear / test sequences, through
//! the low-level bit calls over two VM pages and through the heap-page calls that keep
//! `PD_ALL_VISIBLE` in sync; and seed 004's protocols per [`VmCheck`] variant, counted.
#![cfg(not(loom))]

use std::collections::HashMap;

use lockstack_bufmgr::vm::{
    HEAPBLOCKS_PER_PAGE, VISIBILITYMAP_ALL_FROZEN, VISIBILITYMAP_ALL_VISIBLE, VISIBILITYMAP_VALID_BITS,
    VisibilityMap, VmBuffer, VmCheck, heapblk_to_mapblock, heapblk_to_mapbyte, heapblk_to_offset,
};
use lockstack_bufmgr::{BackendBuffers, BufferPool, BufferPoolConfig, ForkNumber, LwLockMode, page};
use lockstack_common::{BlockNumber, Oid};
use proptest::prelude::*;

const REL: Oid = Oid(16390);

fn heap(bb: &BackendBuffers, n: u32) {
    for _ in 0..n {
        let (b, _) = bb.extend(REL, ForkNumber::Main).unwrap();
        let mut g = bb.lock(b, LwLockMode::Exclusive);
        page::init(g.page_mut(), 0);
        g.mark_dirty();
        drop(g);
        bb.release(b);
    }
}

#[test]
fn addressing_matches_postgres() {
    assert_eq!(HEAPBLOCKS_PER_PAGE, 32_672);
    assert_eq!((heapblk_to_mapblock(0), heapblk_to_mapbyte(0), heapblk_to_offset(0)), (0, 0, 0));
    assert_eq!((heapblk_to_mapblock(5), heapblk_to_mapbyte(5), heapblk_to_offset(5)), (0, 1, 2));
    assert_eq!(heapblk_to_mapblock(32_671), 0);
    assert_eq!(heapblk_to_mapbyte(32_671), 8167);
    assert_eq!((heapblk_to_mapblock(32_672), heapblk_to_mapbyte(32_672)), (1, 0));
}

#[derive(Debug, Clone)]
enum Op {
    Set(u32, u8),
    Clear(u32, u8),
    Test(u32),
}

fn op(max_blk: u32) -> impl Strategy<Value = Op> {
    let flags = prop_oneof![
        Just(VISIBILITYMAP_ALL_VISIBLE),
        Just(VISIBILITYMAP_ALL_FROZEN),
        Just(VISIBILITYMAP_VALID_BITS)
    ];
    prop_oneof![
        (0..max_blk, flags.clone()).prop_map(|(b, f)| Op::Set(b, f)),
        (0..max_blk, flags).prop_map(|(b, f)| Op::Clear(b, f)),
        (0..max_blk).prop_map(Op::Test),
    ]
}

/// The oracle's rules: all-frozen implies all-visible; clearing all-visible clears both.
fn oracle_set(m: &mut HashMap<u32, u8>, b: u32, f: u8) -> bool {
    let old = m.get(&b).copied().unwrap_or(0);
    let new = old | f | VISIBILITYMAP_ALL_VISIBLE;
    m.insert(b, new);
    new != old
}

fn oracle_clear(m: &mut HashMap<u32, u8>, b: u32, f: u8) -> bool {
    let f = if f & VISIBILITYMAP_ALL_VISIBLE != 0 { VISIBILITYMAP_VALID_BITS } else { f };
    let old = m.get(&b).copied().unwrap_or(0);
    m.insert(b, old & !f);
    old & f != 0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Low-level bits over heap blocks spanning two VM pages (block numbers near the page
    /// boundary are common), against a map. Every test result and the final counts must agree.
    #[test]
    fn bits_match_a_bitmap(ops in proptest::collection::vec(op(2 * 64), 1..120), spread in any::<bool>()) {
        let pool = BufferPool::in_memory(BufferPoolConfig::pg96(8)).unwrap();
        let bb = pool.attach_auxiliary();
        let vm = VisibilityMap::new(REL);
        // Map 0..128 onto blocks around the page boundary (or dense at the start).
        let blk = |i: u32| if spread { HEAPBLOCKS_PER_PAGE - 64 + i } else { i };
        let mut oracle = HashMap::new();
        let mut vmbuf = VmBuffer::new();
        for o in ops {
            match o {
                Op::Set(i, f) => {
                    vm.pin(&bb, blk(i), &mut vmbuf).unwrap();
                    prop_assert_eq!(vm.set_bits(&bb, blk(i), &vmbuf, f, 0), oracle_set(&mut oracle, i, f));
                }
                Op::Clear(i, f) => {
                    vm.pin(&bb, blk(i), &mut vmbuf).unwrap();
                    prop_assert_eq!(vm.clear_bits(&bb, blk(i), &vmbuf, f), oracle_clear(&mut oracle, i, f));
                }
                Op::Test(i) => {
                    prop_assert_eq!(vm.get_status(&bb, blk(i), &mut vmbuf).unwrap(), oracle.get(&i).copied().unwrap_or(0));
                }
            }
        }
        for i in 0..128 {
            prop_assert_eq!(vm.get_status(&bb, blk(i), &mut vmbuf).unwrap(), oracle.get(&i).copied().unwrap_or(0), "block {}", i);
        }
        vmbuf.release(&bb);
        let (v, f) = vm.count(&bb).unwrap();
        prop_assert_eq!(v, oracle.values().filter(|&&x| x & VISIBILITYMAP_ALL_VISIBLE != 0).count() as u64);
        prop_assert_eq!(f, oracle.values().filter(|&&x| x & VISIBILITYMAP_ALL_FROZEN != 0).count() as u64);
        drop(bb);
        pool.check_invariants().unwrap();
    }

    /// Through heap pages: the page flag must equal the all-visible bit after every operation,
    /// in a pool small enough that heap and VM pages are evicted and read back.
    #[test]
    fn page_flag_stays_in_sync(ops in proptest::collection::vec(op(24), 1..80)) {
        let pool = BufferPool::in_memory(BufferPoolConfig::pg92(6)).unwrap();
        let bb = pool.attach_auxiliary();
        heap(&bb, 24);
        let vm = VisibilityMap::new(REL);
        let mut oracle = HashMap::new();
        let mut vmbuf = VmBuffer::new();
        for o in ops {
            let b = match o { Op::Set(b, _) | Op::Clear(b, _) | Op::Test(b) => b };
            vm.pin(&bb, b, &mut vmbuf).unwrap();
            let hb = bb.read_block(REL, BlockNumber(b)).unwrap();
            let mut g = bb.lock(hb, LwLockMode::Exclusive);
            match o {
                Op::Set(_, f) => prop_assert_eq!(vm.set(&mut g, &vmbuf, f, 99), oracle_set(&mut oracle, b, f)),
                Op::Clear(_, f) => prop_assert_eq!(vm.clear(&mut g, &vmbuf, f), oracle_clear(&mut oracle, b, f)),
                Op::Test(_) => {}
            }
            let bits = oracle.get(&b).copied().unwrap_or(0);
            prop_assert_eq!(page::is_all_visible(g.page()), bits & VISIBILITYMAP_ALL_VISIBLE != 0);
            drop(g);
            bb.release(hb);
            prop_assert_eq!(vm.get_status(&bb, b, &mut vmbuf).unwrap(), bits);
        }
        vmbuf.release(&bb);
        drop(bb);
        pool.check_invariants().unwrap();
    }
}

/// Seed 004's delete protocol per variant: after the first delete has cleared the page's
/// all-visible state, `PageFlagFirst` never touches the VM page again, `AlwaysVm` pins it for
/// every delete, and `AlwaysVmKeepPin` pins it once.
#[test]
fn vm_pins_per_variant() {
    for check in VmCheck::ALL {
        let pool = BufferPool::in_memory(BufferPoolConfig::pg96(32)).unwrap();
        let bb = pool.attach_auxiliary();
        heap(&bb, 4);
        let vm = VisibilityMap::new(REL);
        let mut vmbuf = VmBuffer::new();
        for b in 0..4 {
            vm.pin(&bb, b, &mut vmbuf).unwrap();
            let hb = bb.read_block(REL, BlockNumber(b)).unwrap();
            let mut g = bb.lock(hb, LwLockMode::Exclusive);
            assert!(vm.set(&mut g, &vmbuf, VISIBILITYMAP_ALL_VISIBLE, 0));
            drop(g);
            bb.release(hb);
        }
        vmbuf.release(&bb);
        let before = bb.stats();
        let mut cleared = 0;
        for _ in 0..10 {
            let hb = bb.read_block(REL, BlockNumber(2)).unwrap();
            let mut g = vm.lock_heap_for_update(&bb, hb, &mut vmbuf, check).unwrap();
            if vm.clear_for_update(&mut g, &vmbuf, check) {
                cleared += 1;
            }
            g.mark_dirty();
            drop(g);
            vm.end_operation(&bb, &mut vmbuf, check);
            bb.release(hb);
        }
        assert_eq!(cleared, 1, "{check}");
        let pins = bb.stats().since(&before).vm_pins;
        let want = match check {
            VmCheck::PageFlagFirst => 1,
            VmCheck::AlwaysVm => 10,
            VmCheck::AlwaysVmKeepPin => 1,
        };
        assert_eq!(pins, want, "{check}");
        // Scans: the flag variant never pins, the naive one once per page.
        let before = bb.stats();
        for b in 0..4 {
            let hb = bb.read_block(REL, BlockNumber(b)).unwrap();
            let g = bb.lock(hb, LwLockMode::Shared);
            assert_eq!(vm.is_all_visible(&g, &mut vmbuf, check).unwrap(), b != 2, "{check} block {b}");
            drop(g);
            bb.release(hb);
        }
        let pins = bb.stats().since(&before).vm_pins;
        let want = match check {
            VmCheck::PageFlagFirst => 0,
            VmCheck::AlwaysVm => 4,
            VmCheck::AlwaysVmKeepPin => u64::from(vmbuf.buffer().is_none()),
        };
        assert_eq!(pins, want, "{check}");
        vmbuf.release(&bb);
        drop(bb);
        pool.check_invariants().unwrap();
    }
}

#[test]
fn missing_vm_page_reads_as_not_set() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(8)).unwrap();
    let bb = pool.attach_auxiliary();
    let vm = VisibilityMap::new(REL);
    let mut vmbuf = VmBuffer::new();
    assert_eq!(vm.get_status(&bb, 100_000, &mut vmbuf).unwrap(), 0);
    assert!(vmbuf.buffer().is_none());
    assert_eq!(pool.nblocks(REL, ForkNumber::VisibilityMap).unwrap(), 0, "a read must not extend the map");
    vm.pin(&bb, 2 * HEAPBLOCKS_PER_PAGE, &mut vmbuf).unwrap();
    assert_eq!(pool.nblocks(REL, ForkNumber::VisibilityMap).unwrap(), 3);
    vmbuf.release(&bb);
}
