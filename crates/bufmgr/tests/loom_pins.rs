//! loom models of the buffer pin protocol as `BufferPool` runs it, with loom's atomics in the
//! state word, the header spinlock, the LWLocks and the cleanup waiter's latch.
//!
//! * A cleanup-lock waiter against a concurrent pin/unpin: whatever the interleaving, the last
//!   other unpin wakes the waiter (a lost wake-up leaves it asleep, which loom reports as a
//!   deadlock), for both header designs.
//! * The 9.6 CAS loop against a header-lock holder: a pin/unpin that overwrote, or was
//!   overwritten by, the plain store that releases `BM_LOCKED` would leave a wrong refcount or
//!   lose the dirty flag.
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-bufmgr --release --test loom_pins`.
#![cfg(loom)]

use std::sync::Arc;

use lockstack_bufmgr::{
    BufferPool, BufferPoolConfig, ForkNumber, HeaderKind, LwLockKind, LwLockMode, MappingKind, VictimKind,
};
use lockstack_common::{BlockNumber, Oid};

const REL: Oid = Oid(16384);

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b
}

fn config(header: HeaderKind) -> BufferPoolConfig {
    BufferPoolConfig {
        nbuffers: 2,
        header,
        mapping: MappingKind::Partitioned { partitions: 1 },
        victim: VictimKind::AtomicClock,
        lwlock: LwLockKind::Atomic,
    }
}

/// A pool with block 0 of `REL` resident and valid, nothing pinned.
fn pool_with_one_page(header: HeaderKind) -> Arc<BufferPool> {
    let pool = BufferPool::in_memory(config(header)).unwrap();
    let bb = pool.backend();
    let (b, _) = bb.extend(REL, ForkNumber::Main).unwrap();
    bb.release(b);
    pool
}

fn cleanup_waiter_is_woken(header: HeaderKind) {
    builder().check(move || {
        let pool = pool_with_one_page(header);
        let waiter = pool.backend();
        let pinner = pool.backend();
        let mine = waiter.read_block(REL, BlockNumber(0)).unwrap();
        // The other backend's pin is taken before the spawn, so that the interesting races
        // (its unpin against the waiter's flag setting) need a single preemption.
        let theirs = pinner.read_block(REL, BlockNumber(0)).unwrap();
        let t = loom::thread::spawn(move || {
            pinner.release(theirs);
            let b = pinner.read_block(REL, BlockNumber(0)).unwrap();
            assert_eq!(pinner.tag(b).block, BlockNumber(0));
            pinner.release(b);
            pinner
        });
        let g = waiter.lock_for_cleanup(mine).unwrap();
        drop(g);
        let pinner = t.join().unwrap();
        drop(pinner);
        waiter.release(mine);
        drop(waiter);
        pool.check_invariants().unwrap();
    });
}

#[test]
fn cleanup_waiter_is_woken_atomic_header() {
    cleanup_waiter_is_woken(HeaderKind::Atomic);
}

#[test]
fn cleanup_waiter_is_woken_spinlock_header() {
    cleanup_waiter_is_woken(HeaderKind::Spinlock);
}

#[test]
fn cas_pin_does_not_lose_header_updates() {
    builder().check(|| {
        let pool = pool_with_one_page(HeaderKind::Atomic);
        let holder = pool.backend();
        let pinner = pool.backend();
        let mine = holder.read_block(REL, BlockNumber(0)).unwrap();
        let theirs = pinner.read_block(REL, BlockNumber(0)).unwrap();
        let t = loom::thread::spawn(move || {
            pinner.release(theirs);
            let b = pinner.read_block(REL, BlockNumber(0)).unwrap();
            pinner.release(b);
            pinner
        });
        // Takes BM_LOCKED to read the refcount and releases it with a plain store; then a CAS
        // flag update under an exclusive content lock.
        if let Some(g) = holder.conditional_lock_for_cleanup(mine) {
            g.mark_dirty();
        } else {
            let g = holder.lock(mine, LwLockMode::Exclusive);
            g.mark_dirty();
        }
        drop(t.join().unwrap());
        let s = pool.descriptor(mine.id()).state();
        assert_eq!(s.refcount, 1, "{s:?}");
        assert!(s.dirty && s.valid && s.tag_valid, "{s:?}");
        assert!(!s.locked && !s.pin_count_waiter, "{s:?}");
        assert!(s.usage_count >= 3 && s.usage_count <= 5, "{s:?}");
        holder.release(mine);
        drop(holder);
        pool.check_invariants().unwrap();
    });
}
