//! Buffer pool behaviour: hits and reads, eviction round trips through files with the
//! WAL-before-data rule, the all-pinned error, cleanup locks, private refcounts, and a
//! many-thread stress test through a pool much smaller than the table, for every combination of
//! header, mapping and victim variants.
#![cfg(not(loom))]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockstack_bufmgr::{
    BackendBuffers, BufferError, BufferPool, BufferPoolConfig, BufferTag, DESC_LINE, DescPadding, FileSmgr,
    ForkNumber, HeaderKind, KNOBS, LwLockKind, LwLockMode, MappingKind, Smgr, SmgrError, VictimKind, page,
};
use lockstack_common::{BlockNumber, Oid};

const REL: Oid = Oid(16384);

fn all_configs(nbuffers: usize) -> Vec<BufferPoolConfig> {
    let mut v = Vec::new();
    for header in HeaderKind::EVERY {
        for mapping in [MappingKind::PARTITIONS_16, MappingKind::PARTITIONS_128, MappingKind::DashMap] {
            for victim in VictimKind::ALL {
                let lwlock =
                    if header == HeaderKind::Spinlock { LwLockKind::Pg92 } else { LwLockKind::Atomic };
                // Half the pools with packed descriptors, so both layouts run every check.
                let desc_padding =
                    if mapping == MappingKind::PARTITIONS_16 { DescPadding::None } else { DescPadding::Line };
                v.push(BufferPoolConfig {
                    nbuffers,
                    header,
                    mapping,
                    victim,
                    lwlock_kind: lwlock,
                    desc_padding,
                });
            }
        }
    }
    v
}

/// Extends `rel` to `n` blocks; block `b` holds one item: `b` as 4 bytes, then a u64 counter.
fn build_table(bb: &BackendBuffers, rel: Oid, n: u32) {
    for b in 0..n {
        let (buf, blk) = bb.extend(rel, ForkNumber::Main).unwrap();
        assert_eq!(blk, BlockNumber(b));
        let mut g = bb.lock(buf, LwLockMode::Exclusive);
        page::init(g.page_mut(), 0);
        let mut item = b.to_le_bytes().to_vec();
        item.extend_from_slice(&0u64.to_le_bytes());
        assert_eq!(page::add_item(g.page_mut(), &item, None), Some(1));
        g.mark_dirty();
        drop(g);
        bb.release(buf);
    }
}

fn item_of(p: &[u8]) -> (u32, u64) {
    let it = page::get_item(p, 1).expect("item 1");
    (u32::from_le_bytes(it[0..4].try_into().unwrap()), u64::from_le_bytes(it[4..12].try_into().unwrap()))
}

#[test]
fn hits_reads_and_private_refcounts() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(16)).unwrap();
    let bb = pool.attach_auxiliary();
    build_table(&bb, REL, 3);
    let s0 = bb.stats();
    assert_eq!(s0.extends, 3);
    let b = bb.read_block(REL, BlockNumber(1)).unwrap();
    let b2 = bb.read_block(REL, BlockNumber(1)).unwrap();
    assert_eq!(b, b2);
    assert_eq!(bb.stats().since(&s0).hits, 2);
    assert_eq!(bb.stats().since(&s0).reads, 0);
    // Two private pins, one shared pin.
    assert_eq!(bb.pin_count(b), 2);
    assert_eq!(pool.descriptor(b.id()).state().refcount, 1);
    bb.incr_ref(b);
    assert_eq!(bb.pin_count(b), 3);
    assert_eq!(pool.descriptor(b.id()).state().refcount, 1, "incr_ref touched the shared header");
    // release_and_read on the same page keeps the buffer without a look-up.
    let b3 = bb.release_and_read(b, BufferTag::main(REL, 1)).unwrap();
    assert_eq!(b3, b);
    assert_eq!(bb.pin_count(b), 3);
    let other = bb.release_and_read(b, BufferTag::main(REL, 2)).unwrap();
    assert_ne!(other, b);
    assert_eq!(bb.pin_count(b), 2);
    bb.release(b);
    bb.release(b);
    // read_recent: the right page pins, a wrong tag does not.
    let r = bb.read_recent(BufferTag::main(REL, 2), other).expect("still holds block 2");
    assert_eq!(bb.pin_count(r), 2);
    bb.release(r);
    assert!(bb.read_recent(BufferTag::main(REL, 1), other).is_none());
    assert_eq!(bb.pin_count(other), 1);
    bb.release(other);
    assert!(bb.read_recent(BufferTag::main(REL, 2), other).is_some_and(|x| {
        bb.release(x);
        true
    }));
    assert_eq!(pool.descriptor(b.id()).state().refcount, 0);
    assert!(matches!(bb.read_block(REL, BlockNumber(3)), Err(BufferError::BeyondEof { nblocks: 3, .. })));
    pool.check_invariants().unwrap();
}

#[test]
fn private_refcount_overflow_and_drop_release_everything() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg92(64)).unwrap();
    {
        let bb = pool.attach_auxiliary();
        build_table(&bb, REL, 40);
        let bufs: Vec<_> = (0..40).map(|b| bb.read_block(REL, BlockNumber(b)).unwrap()).collect();
        // Pin some twice: array (8 entries) plus overflow map.
        for b in &bufs[..20] {
            bb.incr_ref(*b);
        }
        assert_eq!(bb.pinned_buffers(), 40);
        for b in &bufs {
            assert_eq!(pool.descriptor(b.id()).state().refcount, 1);
        }
        assert!(pool.check_invariants().is_err(), "pins are held: invariants must report them");
        // Dropping the backend releases them.
    }
    pool.check_invariants().unwrap();
}

#[test]
fn every_buffer_pinned_is_an_error_not_a_hang() {
    for cfg in all_configs(4) {
        let pool = BufferPool::in_memory(cfg.clone()).unwrap();
        let bb = pool.attach_auxiliary();
        build_table(&bb, REL, 6);
        let pinned: Vec<_> = (0..4).map(|b| bb.read_block(REL, BlockNumber(b)).unwrap()).collect();
        let err = bb.read_block(REL, BlockNumber(5)).unwrap_err();
        assert!(matches!(err, BufferError::NoUnpinnedBuffers), "{cfg:?}: {err}");
        assert_eq!(err.to_string(), "no unpinned buffers available");
        assert!(matches!(bb.extend(REL, ForkNumber::Main), Err(BufferError::NoUnpinnedBuffers)));
        // Another backend gets the same answer.
        let bb2 = pool.attach_auxiliary();
        assert!(matches!(bb2.read_block(REL, BlockNumber(4)), Err(BufferError::NoUnpinnedBuffers)));
        bb.release(pinned[2]);
        let b = bb2.read_block(REL, BlockNumber(5)).unwrap();
        let g = bb2.lock(b, LwLockMode::Shared);
        assert_eq!(item_of(g.page()).0, 5, "{cfg:?}");
        drop(g);
        bb2.release(b);
        for (i, p) in pinned.iter().enumerate() {
            if i != 2 {
                bb.release(*p);
            }
        }
        pool.check_invariants().unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    }
}

#[test]
fn the_padding_knob_sets_the_descriptor_stride() {
    let mut cfg = BufferPoolConfig::pg96(16);
    let knob = KNOBS.iter().find(|k| k.key == "bufmgr.desc_padding").expect("knob");
    assert_eq!(knob.default, "line");
    let line = BufferPool::in_memory(cfg.clone()).unwrap();
    assert_eq!(line.desc_stride() % DESC_LINE, 0);
    assert!((knob.apply)(&mut cfg, "none").is_some());
    assert_eq!(cfg.desc_padding, DescPadding::None);
    let packed = BufferPool::in_memory(cfg.clone()).unwrap();
    assert_eq!(packed.desc_stride(), std::mem::size_of::<lockstack_bufmgr::BufferDesc>());
    assert!(packed.desc_stride() < line.desc_stride());
    assert!((knob.apply)(&mut cfg, "32").is_none());
    packed.check_invariants().unwrap();
}

#[test]
fn bad_config_is_an_error() {
    assert!(matches!(BufferPool::in_memory(BufferPoolConfig::pg96(0)), Err(BufferError::Config(_))));
    let cfg = BufferPoolConfig {
        mapping: MappingKind::Partitioned { partitions: 12 },
        ..BufferPoolConfig::default()
    };
    let e = BufferPool::in_memory(cfg).unwrap_err();
    assert!(e.to_string().contains("power of two"), "{e}");
    assert!("partitions-12".parse::<MappingKind>().is_err());
    assert_eq!("partitions-16".parse::<MappingKind>().unwrap(), MappingKind::PARTITIONS_16);
    assert_eq!("dashmap".parse::<MappingKind>().unwrap(), MappingKind::DashMap);
    assert!("bogus".parse::<HeaderKind>().is_err());
    assert!("bogus".parse::<VictimKind>().is_err());
}

/// A storage manager that checks the WAL-before-data rule on every write: the page's LSN must
/// not be beyond what the hook has flushed.
#[derive(Debug)]
struct WalChecking {
    inner: FileSmgr,
    flushed: Arc<AtomicU64>,
    violations: AtomicU64,
    writes: AtomicU64,
}

impl Smgr for WalChecking {
    fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, SmgrError> {
        self.inner.nblocks(rel, fork)
    }
    fn read(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &mut [u8]) -> Result<(), SmgrError> {
        self.inner.read(rel, fork, block, buf)
    }
    fn write(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        if page::lsn(buf) > self.flushed.load(Ordering::SeqCst) {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write(rel, fork, block, buf)
    }
    fn extend(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        self.inner.extend(rel, fork, block, buf)
    }
    fn sync(&self, rel: Oid, fork: ForkNumber) -> Result<(), SmgrError> {
        self.inner.sync(rel, fork)
    }
}

#[test]
fn evicted_dirty_pages_round_trip_through_files_after_wal() {
    for cfg in [BufferPoolConfig::pg92(8), BufferPoolConfig::pg96(8)] {
        let dir = tempfile::tempdir().unwrap();
        let flushed = Arc::new(AtomicU64::new(0));
        let smgr = Arc::new(WalChecking {
            inner: FileSmgr::new(dir.path(), false).unwrap(),
            flushed: Arc::clone(&flushed),
            violations: AtomicU64::new(0),
            writes: AtomicU64::new(0),
        });
        let pool = BufferPool::new(cfg.clone(), smgr.clone()).unwrap();
        let hook_calls = Arc::new(Mutex::new(Vec::new()));
        {
            let (flushed, calls) = (Arc::clone(&flushed), Arc::clone(&hook_calls));
            pool.set_wal_flush_hook(Arc::new(move |lsn| {
                calls.lock().unwrap().push(lsn);
                flushed.fetch_max(lsn, Ordering::SeqCst);
                Ok(())
            }));
        }
        let bb = pool.attach_auxiliary();
        build_table(&bb, REL, 64);
        // Stamp every page with an LSN and a payload, through an 8-buffer pool: most are
        // evicted dirty.
        for round in 1..=2u64 {
            for b in 0..64u32 {
                let buf = bb.read_block(REL, BlockNumber(b)).unwrap();
                let mut g = bb.lock(buf, LwLockMode::Exclusive);
                let p = g.page_mut();
                assert_eq!(item_of(p), (b, round - 1), "{cfg:?}");
                page::get_item_mut(p, 1).unwrap()[4..12].copy_from_slice(&round.to_le_bytes());
                page::set_lsn(p, round * 1000 + u64::from(b));
                g.mark_dirty();
                drop(g);
                bb.release(buf);
            }
        }
        let st = pool.stats();
        assert!(st.evictions >= 2 * 64 - 8, "{cfg:?}: {st:?}");
        assert!(st.writes >= 2 * 64 - 8, "{cfg:?}: {st:?}");
        assert!(st.reads >= 64, "{cfg:?}: {st:?}");
        assert!(st.wal_flushes > 0 && !hook_calls.lock().unwrap().is_empty());
        // The rest go out with a checkpoint; then a fresh pool over the same files sees it all.
        let n = pool.flush_all().unwrap();
        assert!((1..=8).contains(&n), "{cfg:?}: flushed {n}");
        assert_eq!(pool.flush_all().unwrap(), 0, "nothing dirty any more");
        assert_eq!(smgr.violations.load(Ordering::SeqCst), 0, "a page was written before its WAL");
        assert_eq!(smgr.writes.load(Ordering::SeqCst), st.writes + n as u64);
        drop(bb);
        pool.check_invariants().unwrap();
        let pool2 =
            BufferPool::new(cfg.clone(), Arc::new(FileSmgr::new(dir.path(), false).unwrap())).unwrap();
        let bb2 = pool2.attach_auxiliary();
        for b in 0..64u32 {
            let buf = bb2.read_block(REL, BlockNumber(b)).unwrap();
            let g = bb2.lock(buf, LwLockMode::Shared);
            assert_eq!(item_of(g.page()), (b, 2), "{cfg:?}");
            assert_eq!(page::lsn(g.page()), 2000 + u64::from(b));
            drop(g);
            bb2.release(buf);
        }
    }
}

#[test]
fn wal_hook_failure_keeps_the_page_dirty() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(2)).unwrap();
    pool.set_wal_flush_hook(Arc::new(|lsn| Err(format!("disk full at {lsn}").into())));
    let bb = pool.attach_auxiliary();
    build_table(&bb, REL, 1);
    let buf = bb.read_block(REL, BlockNumber(0)).unwrap();
    let mut g = bb.lock(buf, LwLockMode::Exclusive);
    page::set_lsn(g.page_mut(), 77);
    g.mark_dirty();
    let e = g.flush().unwrap_err();
    assert!(e.to_string().contains("disk full at 77"), "{e}");
    assert!(pool.descriptor(buf.id()).state().dirty);
    pool.note_wal_flushed(100);
    assert!(g.flush().unwrap());
    assert!(!pool.descriptor(buf.id()).state().dirty);
    drop(g);
    bb.release(buf);
    pool.check_invariants().unwrap();
}

fn wait_until(what: &str, f: impl Fn() -> bool) {
    for _ in 0..20_000 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting for {what}");
}

#[test]
fn cleanup_lock_waits_for_other_pins() {
    for header in HeaderKind::EVERY {
        let cfg = BufferPoolConfig { header, ..BufferPoolConfig::pg96(8) };
        let pool = BufferPool::in_memory(cfg).unwrap();
        let bb = pool.attach_auxiliary();
        build_table(&bb, REL, 1);
        let mine = bb.read_block(REL, BlockNumber(0)).unwrap();
        // Conditional forms.
        bb.incr_ref(mine);
        assert!(matches!(
            bb.lock_for_cleanup(mine),
            Err(BufferError::IncorrectLocalPinCount { count: 2, .. })
        ));
        assert!(bb.conditional_lock_for_cleanup(mine).is_none());
        bb.release(mine);
        let g = bb.conditional_lock_for_cleanup(mine).expect("only our pin");
        drop(g);

        let other_pinned = AtomicBool::new(false);
        let release = AtomicBool::new(false);
        std::thread::scope(|s| {
            let pool2 = Arc::clone(&pool);
            let (other_pinned, release) = (&other_pinned, &release);
            s.spawn(move || {
                let bb2 = pool2.attach_auxiliary();
                let b = bb2.read_block(REL, BlockNumber(0)).unwrap();
                other_pinned.store(true, Ordering::SeqCst);
                while !release.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                bb2.release(b);
            });
            wait_until("the other pin", || other_pinned.load(Ordering::SeqCst));
            assert!(bb.conditional_lock_for_cleanup(mine).is_none(), "another backend pins it");
            let pool3 = Arc::clone(&pool);
            s.spawn(move || {
                let d = pool3.descriptor(0);
                wait_until("the pin-count waiter", || d.state().pin_count_waiter);
                // A second waiter is refused rather than queued.
                let bb3 = pool3.attach_auxiliary();
                let b = bb3.read_block(REL, BlockNumber(0)).unwrap();
                assert!(matches!(bb3.lock_for_cleanup(b), Err(BufferError::MultiplePinWaiters { .. })));
                bb3.release(b);
                release.store(true, Ordering::SeqCst);
            });
            let mut g = bb.lock_for_cleanup(mine).unwrap();
            let d = pool.descriptor(mine.id());
            assert_eq!(d.state().refcount, 1);
            assert!(!d.state().pin_count_waiter);
            page::set_prune_xid(g.page_mut(), 5);
            g.mark_dirty();
        });
        assert!(bb.stats().cleanup_waits >= 1, "{header}: {:?}", bb.stats());
        bb.release(mine);
        drop(bb);
        pool.check_invariants().unwrap();
    }
}

#[test]
#[should_panic(expected = "released while this backend holds its content lock")]
fn releasing_a_locked_buffer_panics() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(4)).unwrap();
    let bb = pool.attach_auxiliary();
    build_table(&bb, REL, 1);
    let b = bb.read_block(REL, BlockNumber(0)).unwrap();
    let _g = bb.lock(b, LwLockMode::Shared);
    bb.release(b);
}

/// Many threads read random blocks through a pool much smaller than the table; a fraction of
/// the reads increment the page's counter under the exclusive lock. Every page must hold its
/// own block number and exactly the increments made to it, and every refcount must return to 0.
fn stress(cfg: BufferPoolConfig, file: bool) {
    const BLOCKS: u32 = 192;
    const THREADS: usize = 4;
    const OPS: u32 = 2500;
    let dir = tempfile::tempdir().unwrap();
    let pool = if file {
        BufferPool::new(cfg.clone(), Arc::new(FileSmgr::new(dir.path(), false).unwrap())).unwrap()
    } else {
        BufferPool::in_memory(cfg.clone()).unwrap()
    };
    build_table(&pool.attach_auxiliary(), REL, BLOCKS);
    let increments: Vec<AtomicU64> = (0..BLOCKS).map(|_| AtomicU64::new(0)).collect();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (pool, increments, cfg) = (Arc::clone(&pool), &increments, &cfg);
            s.spawn(move || {
                let bb = pool.attach_auxiliary();
                let mut x = 0x9E37_79B9u32.wrapping_mul(t as u32 + 1);
                let mut held = Vec::new();
                for i in 0..OPS {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let b = x % BLOCKS;
                    let buf = loop {
                        match bb.read_block(REL, BlockNumber(b)) {
                            Ok(buf) => break buf,
                            // All 4 threads may hold 2 pins each in a 16-buffer pool: retry.
                            Err(BufferError::NoUnpinnedBuffers) => std::thread::yield_now(),
                            Err(e) => panic!("{cfg:?}: {e}"),
                        }
                    };
                    if x.is_multiple_of(5) {
                        let mut g = bb.lock(buf, LwLockMode::Exclusive);
                        let it = page::get_item_mut(g.page_mut(), 1).unwrap();
                        assert_eq!(u32::from_le_bytes(it[0..4].try_into().unwrap()), b);
                        let c = u64::from_le_bytes(it[4..12].try_into().unwrap()) + 1;
                        it[4..12].copy_from_slice(&c.to_le_bytes());
                        g.mark_dirty();
                        increments[b as usize].fetch_add(1, Ordering::Relaxed);
                    } else {
                        let g = bb.lock(buf, LwLockMode::Shared);
                        assert_eq!(item_of(g.page()).0, b, "{cfg:?}: wrong page in buffer");
                    }
                    // Keep one extra pin across an operation now and then.
                    if i.is_multiple_of(7) {
                        held.push(buf);
                    } else {
                        bb.release(buf);
                    }
                    if held.len() > 1 {
                        bb.release(held.remove(0));
                    }
                }
                for b in held {
                    bb.release(b);
                }
                assert_eq!(bb.pinned_buffers(), 0);
            });
        }
    });
    pool.check_invariants().unwrap_or_else(|e| panic!("{cfg:?}: {e}"));
    let st = pool.stats();
    assert!(st.evictions > 0 && st.reads > 0, "{cfg:?}: the pool was not under pressure: {st:?}");
    let bb = pool.attach_auxiliary();
    for b in 0..BLOCKS {
        let buf = bb.read_block(REL, BlockNumber(b)).unwrap();
        let g = bb.lock(buf, LwLockMode::Shared);
        assert_eq!(
            item_of(g.page()),
            (b, increments[b as usize].load(Ordering::Relaxed)),
            "{cfg:?}: lost update"
        );
        drop(g);
        bb.release(buf);
    }
    drop(bb);
    pool.check_invariants().unwrap();
}

#[test]
fn stress_every_variant_in_memory() {
    for cfg in all_configs(16) {
        stress(cfg, false);
    }
}

#[test]
fn stress_on_files() {
    stress(BufferPoolConfig::pg92(16), true);
    stress(BufferPoolConfig::pg96(16), true);
}

/// `attach(id)` refuses a second live handle of one id and ids in the auxiliary range, with
/// typed errors, and frees the id when the handle is dropped; auxiliary handles are numbered
/// from `AUXILIARY_BACKEND_BASE`.
#[test]
fn attach_is_one_handle_per_backend_id() {
    use lockstack_bufmgr::{AUXILIARY_BACKEND_BASE, AttachError};
    use lockstack_common::BackendId;
    let pool = BufferPool::in_memory(BufferPoolConfig::pg96(16)).unwrap();
    let a = pool.attach(BackendId(3)).unwrap();
    assert_eq!(a.id(), 3);
    let e = pool.attach(BackendId(3)).unwrap_err();
    assert_eq!(e, AttachError::AlreadyAttached { id: BackendId(3), subsystem: "buffer pool" });
    assert_eq!(e.to_string(), "backend 3 is already attached to the buffer pool");
    assert!(matches!(
        pool.attach(BackendId(AUXILIARY_BACKEND_BASE)),
        Err(AttachError::OutOfRange { max_backends, .. }) if max_backends == AUXILIARY_BACKEND_BASE as usize
    ));
    let (x, y) = (pool.attach_auxiliary(), pool.attach_auxiliary());
    assert_eq!((x.id(), y.id()), (AUXILIARY_BACKEND_BASE, AUXILIARY_BACKEND_BASE + 1));
    drop(a);
    assert_eq!(pool.attach(BackendId(3)).unwrap().id(), 3);
}

/// Eight threads, each holding at most one brief pin at a time, in a pool of eight buffers: a
/// thread asking for a victim holds no pin itself, so some buffer is unpinned at every instant
/// (apart from the moment a miss holds its victim and finds the page loaded by another), and
/// the victim search must find one. The shared clock hand alone used to give up ("no unpinned
/// buffers available") after seeing `nbuffers` buffers pinned at the moment each was ticked:
/// other backends pin the buffers just ahead of the hand as they take their own victims. Every
/// read must succeed, in every header, mapping and victim variant.
#[test]
fn eight_backends_with_one_brief_pin_each_never_run_out_of_buffers() {
    const THREADS: usize = 8;
    const BLOCKS: u32 = 64;
    const READS: u32 = 3000;
    for cfg in all_configs(THREADS) {
        let pool = BufferPool::in_memory(cfg.clone()).unwrap();
        build_table(&pool.attach_auxiliary(), REL, BLOCKS);
        let failures = AtomicU64::new(0);
        let reads = AtomicU64::new(0);
        std::thread::scope(|s| {
            for t in 0..THREADS {
                let (pool, failures, reads, cfg) = (Arc::clone(&pool), &failures, &reads, &cfg);
                s.spawn(move || {
                    let bb = pool.attach_auxiliary();
                    let mut x = 0x2545_F491u32.wrapping_mul(t as u32 + 1) | 1;
                    for _ in 0..READS {
                        x ^= x << 13;
                        x ^= x >> 17;
                        x ^= x << 5;
                        let b = x % BLOCKS;
                        match bb.read_block(REL, BlockNumber(b)) {
                            Ok(buf) => {
                                let g = bb.lock(buf, LwLockMode::Shared);
                                assert_eq!(item_of(g.page()).0, b, "{cfg:?}: wrong page in buffer");
                                drop(g);
                                // Hold the pin across a reschedule now and then, so that
                                // seven pins are often held while an eighth backend searches.
                                if x.is_multiple_of(3) {
                                    std::thread::yield_now();
                                }
                                bb.release(buf);
                                reads.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(BufferError::NoUnpinnedBuffers) => {
                                failures.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("{cfg:?}: {e}"),
                        }
                    }
                });
            }
        });
        assert_eq!(failures.load(Ordering::Relaxed), 0, "{cfg:?}: reads that found no unpinned buffer");
        assert_eq!(reads.load(Ordering::Relaxed), THREADS as u64 * u64::from(READS), "{cfg:?}");
        pool.check_invariants().unwrap();
    }
}
