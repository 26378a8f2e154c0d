//! Deterministic checks of the reader-biased LWLock's revocation against shared requests.
//!
//! A reader holds the lock through a reader slot, a writer starts revoking the bias (seen through
//! `is_biased`), and then shared requests, nested in the slot holder and from another thread,
//! must be granted at once: the lock is only held shared, and no LWLock queues a shared request
//! behind a waiting exclusive one (`lwlock.c`; the `LwLockImpl` contract).
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use lockstack_lwlock::{LwLockImpl, LwLockMode, ReadBiasedLwLock, TrancheId};

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..20_000 {
        if cond() {
            return;
        }
        thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting until {what}");
}

/// Starts a writer against `lock` (held shared through a slot by the caller) and waits until it
/// has turned the bias off. Returns the writer's thread and its "got the lock" flag.
fn start_revoking_writer(lock: &Arc<ReadBiasedLwLock>) -> (thread::JoinHandle<()>, Arc<AtomicBool>) {
    let got = Arc::new(AtomicBool::new(false));
    let (l, g) = (lock.clone(), got.clone());
    let writer = thread::spawn(move || {
        let h = l.acquire(LwLockMode::Exclusive);
        assert!(l.is_locked_exclusive());
        g.store(true, Ordering::SeqCst);
        l.release(h);
    });
    wait_until("the writer revoked the bias", || !lock.is_biased());
    (writer, got)
}

#[test]
fn nested_shared_request_passes_a_revoking_writer() {
    let lock = Arc::new(ReadBiasedLwLock::with_id(TrancheId::UNNAMED, 0));
    assert!(lock.is_biased(), "a new lock starts biased");
    let first = lock.acquire(LwLockMode::Shared);
    let (writer, got) = start_revoking_writer(&lock);
    // The slot holder asks again (PostgreSQL code paths that take ProcArrayLock shared while
    // already holding it shared do this): granted without waiting, then also by a blocking call.
    let nested = lock
        .conditional_acquire(LwLockMode::Shared)
        .expect("a nested shared request must be granted while the lock is only held shared");
    let nested2 = lock.acquire(LwLockMode::Shared);
    assert!(!got.load(Ordering::SeqCst), "the writer got in while readers hold the lock");
    lock.release(nested2);
    lock.release(nested);
    assert!(!got.load(Ordering::SeqCst), "the writer got in while a reader holds a slot");
    lock.release(first);
    writer.join().unwrap();
    assert!(got.load(Ordering::SeqCst));
    assert!(!lock.is_locked());
}

#[test]
fn new_shared_request_passes_a_revoking_writer() {
    let lock = Arc::new(ReadBiasedLwLock::with_id(TrancheId::UNNAMED, 1));
    let first = lock.acquire(LwLockMode::Shared);
    let (writer, got) = start_revoking_writer(&lock);
    let l = lock.clone();
    let other = thread::spawn(move || {
        let Some(h) = l.conditional_acquire(LwLockMode::Shared) else {
            return false;
        };
        l.release(h);
        // And a blocking request from the same backend.
        let h = l.acquire(LwLockMode::Shared);
        l.release(h);
        true
    });
    assert!(other.join().unwrap(), "a new shared request must not queue behind a revoking writer");
    assert!(!got.load(Ordering::SeqCst), "the writer got in while a reader holds a slot");
    lock.release(first);
    writer.join().unwrap();
    assert!(got.load(Ordering::SeqCst));
    assert!(!lock.is_locked());
}

/// After the writer, readers go through the underlying lock and turn the bias back on (the
/// inhibition period of a cheap revocation is short); the next writer revokes again.
#[test]
fn bias_returns_and_is_revoked_again() {
    let lock = ReadBiasedLwLock::with_id(TrancheId::UNNAMED, 2);
    let h = lock.acquire(LwLockMode::Exclusive);
    assert!(!lock.is_biased());
    assert!(lock.conditional_acquire(LwLockMode::Shared).is_none(), "shared while held exclusively");
    lock.release(h);
    wait_until("a reader re-enabled the bias", || {
        let h = lock.acquire(LwLockMode::Shared);
        lock.release(h);
        lock.is_biased()
    });
    let r = lock.acquire(LwLockMode::Shared);
    assert!(lock.conditional_acquire(LwLockMode::Exclusive).is_none(), "exclusive over a slot reader");
    assert!(!lock.is_biased(), "a failed conditional exclusive request leaves the bias off");
    lock.release(r);
    let h = lock.conditional_acquire(LwLockMode::Exclusive).expect("free once the reader left");
    lock.release(h);
    assert!(!lock.is_locked());
}

/// Two writers and two readers (each taking the lock twice, nested) on real threads: writers
/// revoke concurrently, readers re-enable the bias in between, and exclusion holds throughout.
#[test]
fn writers_and_nested_readers_keep_exclusion() {
    const ROUNDS: usize = 20_000;
    let lock = Arc::new(ReadBiasedLwLock::with_id(TrancheId::UNNAMED, 3));
    // Two counters that writers keep equal; a reader seeing them differ overlapped a writer.
    let pair = Arc::new((std::sync::atomic::AtomicU64::new(0), std::sync::atomic::AtomicU64::new(0)));
    let mut ts = Vec::new();
    for _ in 0..2 {
        let (l, p) = (lock.clone(), pair.clone());
        ts.push(thread::spawn(move || {
            for _ in 0..ROUNDS {
                let h = l.acquire(LwLockMode::Exclusive);
                let a = p.0.load(Ordering::Relaxed);
                p.0.store(a + 1, Ordering::Relaxed);
                p.1.store(a + 1, Ordering::Relaxed);
                l.release(h);
            }
        }));
    }
    for _ in 0..2 {
        let (l, p) = (lock.clone(), pair.clone());
        ts.push(thread::spawn(move || {
            for _ in 0..ROUNDS {
                let outer = l.acquire(LwLockMode::Shared);
                let a = p.0.load(Ordering::Relaxed);
                let inner = l.acquire(LwLockMode::Shared);
                let b = p.1.load(Ordering::Relaxed);
                assert_eq!(a, b, "a reader overlapped a writer");
                l.release(inner);
                l.release(outer);
            }
        }));
    }
    for t in ts {
        t.join().unwrap();
    }
    assert_eq!(pair.0.load(Ordering::Relaxed), 2 * ROUNDS as u64);
    assert!(!lock.is_locked());
}
