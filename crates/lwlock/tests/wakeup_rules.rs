//! Deterministic checks of who is woken on release, per implementation.
//!
//! Waiters are queued one at a time (each thread is started only after the previous one is
//! seen on the wait list), so the queue order is known; then the holder releases and we watch
//! which waiters got the lock and how many stay queued.
#![cfg(not(loom))]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use lockstack_lwlock::{AtomicLwLock, LwLockImpl, LwLockMode, LwLockVar, Pg92LwLock, TrancheId, VarWait};

/// Something that can report its wait-list length.
trait Queued: LwLockImpl + 'static {
    fn queued(&self) -> usize;
}
impl Queued for AtomicLwLock {
    fn queued(&self) -> usize {
        self.queued_waiters()
    }
}
impl Queued for Pg92LwLock {
    fn queued(&self) -> usize {
        self.queued_waiters()
    }
}

fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..20_000 {
        if cond() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("timed out waiting until {what}");
}

struct Waiters<L: Queued> {
    lock: Arc<L>,
    /// Bit i set once waiter i holds the lock.
    holding: Arc<AtomicUsize>,
    /// Per-waiter permission to release (bit i).
    may_release: Arc<AtomicUsize>,
    handles: Vec<JoinHandle<()>>,
}

impl<L: Queued> Waiters<L> {
    fn new(lock: L) -> Self {
        Waiters {
            lock: Arc::new(lock),
            holding: Arc::new(AtomicUsize::new(0)),
            may_release: Arc::new(AtomicUsize::new(0)),
            handles: Vec::new(),
        }
    }

    /// Starts waiter number `i` in `mode` and waits until it is on the queue.
    fn enqueue(&mut self, i: usize, mode: LwLockMode) {
        let before = self.lock.queued();
        let (lock, holding, may) =
            (Arc::clone(&self.lock), Arc::clone(&self.holding), Arc::clone(&self.may_release));
        self.handles.push(std::thread::spawn(move || {
            let h = lock.acquire(mode);
            holding.fetch_or(1 << i, Ordering::SeqCst);
            while may.load(Ordering::SeqCst) & (1 << i) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            holding.fetch_and(!(1 << i), Ordering::SeqCst);
            lock.release(h);
        }));
        let lock = Arc::clone(&self.lock);
        wait_until("the waiter is queued", move || lock.queued() == before + 1);
    }

    fn holding(&self) -> usize {
        self.holding.load(Ordering::SeqCst)
    }

    fn allow(&self, i: usize) {
        self.may_release.fetch_or(1 << i, Ordering::SeqCst);
    }

    fn finish(self) {
        self.may_release.store(usize::MAX, Ordering::SeqCst);
        for h in self.handles {
            h.join().unwrap();
        }
        assert!(!self.lock.is_locked());
        assert_eq!(self.lock.queued(), 0);
    }
}

/// 9.5+: shared waiters behind a queued exclusive waiter are woken too; the exclusive stays.
#[test]
fn atomic_release_wakes_all_shared_and_skips_exclusive() {
    let mut w = Waiters::new(AtomicLwLock::with_id(TrancheId::UNNAMED, 1));
    let holder = w.lock.acquire(LwLockMode::Exclusive);
    w.enqueue(0, LwLockMode::Shared);
    w.enqueue(1, LwLockMode::Exclusive);
    w.enqueue(2, LwLockMode::Shared);
    w.lock.release(holder);
    wait_until("both shared waiters hold the lock", || w.holding() == 0b101);
    assert_eq!(w.lock.queued(), 1, "the exclusive waiter stays queued");
    w.allow(0);
    w.allow(2);
    wait_until("the exclusive waiter holds the lock", || w.holding() == 0b010);
    w.finish();
}

/// 9.5+: an exclusive waiter at the head is woken alone.
#[test]
fn atomic_release_wakes_one_exclusive_at_head() {
    let mut w = Waiters::new(AtomicLwLock::with_id(TrancheId::UNNAMED, 2));
    let holder = w.lock.acquire(LwLockMode::Exclusive);
    w.enqueue(0, LwLockMode::Exclusive);
    w.enqueue(1, LwLockMode::Shared);
    w.enqueue(2, LwLockMode::Exclusive);
    w.lock.release(holder);
    wait_until("the first exclusive waiter holds the lock", || w.holding() == 0b001);
    assert_eq!(w.lock.queued(), 2);
    w.allow(0);
    // Next release wakes the shared waiter and skips exclusive waiter 2.
    wait_until("the shared waiter holds the lock", || w.holding() == 0b010);
    assert_eq!(w.lock.queued(), 1);
    w.finish();
}

/// 9.2: only the run of shared waiters before the first exclusive one is woken.
#[test]
fn pg92_release_wakes_shared_prefix_only() {
    let mut w = Waiters::new(Pg92LwLock::with_id(TrancheId::UNNAMED, 3));
    let holder = w.lock.acquire(LwLockMode::Exclusive);
    w.enqueue(0, LwLockMode::Shared);
    w.enqueue(1, LwLockMode::Exclusive);
    w.enqueue(2, LwLockMode::Shared);
    w.lock.release(holder);
    wait_until("the first shared waiter holds the lock", || w.holding() == 0b001);
    assert_eq!(w.lock.queued(), 2, "9.2 does not wake shared waiters behind an exclusive one");
    w.allow(0);
    wait_until("the exclusive waiter holds the lock", || w.holding() == 0b010);
    assert_eq!(w.lock.queued(), 1);
    w.allow(1);
    wait_until("the last shared waiter holds the lock", || w.holding() == 0b100);
    w.finish();
}

/// Both designs: while a woken batch has not run (RELEASE_OK off), further releases wake
/// nobody new; and a lock with many queued waiters drains completely.
fn many_waiters<L: Queued>(lock: L, n: usize, mode_of: impl Fn(usize) -> LwLockMode) {
    let lock = Arc::new(lock);
    let done = Arc::new(AtomicUsize::new(0));
    let holder = lock.acquire(LwLockMode::Exclusive);
    let mut handles = Vec::new();
    for i in 0..n {
        let (l, d) = (Arc::clone(&lock), Arc::clone(&done));
        let mode = mode_of(i);
        handles.push(std::thread::spawn(move || {
            let h = l.acquire(mode);
            d.fetch_add(1, Ordering::SeqCst);
            l.release(h);
        }));
    }
    {
        let l = Arc::clone(&lock);
        wait_until("all waiters are queued", move || l.queued() == n);
    }
    assert_eq!(done.load(Ordering::SeqCst), 0);
    lock.release(holder);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), n);
    assert_eq!(lock.queued(), 0);
    assert!(!lock.is_locked());
}

#[test]
fn atomic_300_exclusive_waiters() {
    many_waiters(AtomicLwLock::with_id(TrancheId::UNNAMED, 4), 300, |_| LwLockMode::Exclusive);
}

#[test]
fn atomic_300_mixed_waiters() {
    many_waiters(AtomicLwLock::with_id(TrancheId::UNNAMED, 5), 300, |i| {
        if i % 3 == 0 { LwLockMode::Exclusive } else { LwLockMode::Shared }
    });
}

#[test]
fn pg92_300_mixed_waiters() {
    many_waiters(Pg92LwLock::with_id(TrancheId::UNNAMED, 6), 300, |i| {
        if i % 3 == 0 { LwLockMode::Exclusive } else { LwLockMode::Shared }
    });
}

/// acquire_or_wait: a waiter is woken when the lock frees and returns without it.
fn acquire_or_wait_returns_without_lock<L: Queued>(lock: L) {
    let lock = Arc::new(lock);
    let holder = lock.acquire(LwLockMode::Exclusive);
    let l = Arc::clone(&lock);
    let t = std::thread::spawn(move || l.acquire_or_wait(LwLockMode::Exclusive).is_some());
    {
        let l = Arc::clone(&lock);
        wait_until("the waiter is queued", move || l.queued() == 1);
    }
    lock.release(holder);
    assert!(!t.join().unwrap(), "a waiter that slept must not get the lock");
    assert!(!lock.is_locked());
    // Free lock: acquired at once.
    let h = lock.acquire_or_wait(LwLockMode::Exclusive).expect("free lock is acquired");
    assert!(lock.is_locked_exclusive());
    lock.release(h);
}

#[test]
fn atomic_acquire_or_wait() {
    acquire_or_wait_returns_without_lock(AtomicLwLock::with_id(TrancheId::WAL_WRITE, 0));
}

#[test]
fn pg92_acquire_or_wait() {
    acquire_or_wait_returns_without_lock(Pg92LwLock::with_id(TrancheId::WAL_WRITE, 1));
}

/// wait_for_var: sees each published value change, then Free on release_clear_var.
fn wait_for_var_follows_progress<L: Queued>(lock: L) {
    let lock = Arc::new(lock);
    let var = Arc::new(LwLockVar::new(0));
    let holder = lock.acquire(LwLockMode::Exclusive);
    let (l, v) = (Arc::clone(&lock), Arc::clone(&var));
    let t = std::thread::spawn(move || {
        let mut seen = vec![];
        let mut old = 0;
        loop {
            match l.wait_for_var(&v, old) {
                VarWait::Free => return seen,
                VarWait::Changed(n) => {
                    assert!(n > old, "published position went backwards: {old} -> {n}");
                    seen.push(n);
                    old = n;
                }
            }
        }
    });
    for pos in 1..=50u64 {
        lock.update_var(&holder, &var, pos * 10);
        if pos % 10 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    lock.release_clear_var(holder, &var, 0);
    let seen = t.join().unwrap();
    assert!(seen.windows(2).all(|w| w[0] < w[1]));
    assert!(seen.iter().all(|v| v % 10 == 0 && *v <= 500));
    // Shared holders do not block wait_for_var.
    let h = lock.acquire(LwLockMode::Shared);
    assert_eq!(lock.wait_for_var(&var, 0), VarWait::Free);
    lock.release(h);
}

#[test]
fn atomic_wait_for_var() {
    wait_for_var_follows_progress(AtomicLwLock::with_id(TrancheId::WAL_INSERT, 0));
}

#[test]
fn pg92_wait_for_var() {
    wait_for_var_follows_progress(Pg92LwLock::with_id(TrancheId::WAL_INSERT, 1));
}

#[test]
#[should_panic(expected = "is not held")]
fn releasing_an_unheld_mode_panics() {
    let a = AtomicLwLock::with_id(TrancheId::UNNAMED, 9);
    let b = AtomicLwLock::with_id(TrancheId::UNNAMED, 10);
    let h = a.acquire(LwLockMode::Exclusive);
    b.release(h);
}

#[test]
#[should_panic(expected = "is not held")]
fn releasing_a_shared_hold_of_a_free_lock_panics() {
    let a = AtomicLwLock::with_id(TrancheId::UNNAMED, 11);
    let b = AtomicLwLock::with_id(TrancheId::UNNAMED, 12);
    let h = a.acquire(LwLockMode::Shared);
    b.release(h);
}

#[test]
#[should_panic(expected = "is not held")]
fn releasing_a_shared_hold_of_an_exclusively_held_lock_panics() {
    let a = AtomicLwLock::with_id(TrancheId::UNNAMED, 13);
    let b = AtomicLwLock::with_id(TrancheId::UNNAMED, 14);
    let _held = a.acquire(LwLockMode::Exclusive);
    let h = b.acquire(LwLockMode::Shared);
    a.release(h);
}

#[test]
#[should_panic(expected = "tranche id out of range")]
fn atomic_lock_with_an_out_of_range_tranche_panics() {
    let _ = AtomicLwLock::with_id(TrancheId(TrancheId::MAX as u16), 0);
}

#[test]
#[should_panic(expected = "tranche id out of range")]
fn pg92_lock_with_an_out_of_range_tranche_panics() {
    let _ = Pg92LwLock::with_id(TrancheId(u16::MAX), 0);
}

/// A backend blocked on an LWLock publishes `LWLock:<tranche>` in its wait-event slot, and
/// clears it once it has the lock.
fn waiter_publishes_wait_event<L: Queued>(lock: L) {
    use lockstack_common::{BackendId, BackendStatusArray};
    let lock = Arc::new(lock);
    let backends = BackendStatusArray::new(2);
    let holder = lock.acquire(LwLockMode::Exclusive);
    let (l, b) = (Arc::clone(&lock), Arc::clone(&backends));
    let t = std::thread::spawn(move || {
        let _me = b.attach(BackendId(1));
        let h = l.acquire(LwLockMode::Shared);
        let while_holding = b.slot(BackendId(1)).get();
        l.release(h);
        while_holding
    });
    {
        let l = Arc::clone(&lock);
        wait_until("the waiter is queued", move || l.queued() == 1);
    }
    // The waiter publishes just before it parks, after it is queued.
    let slot = || backends.slot(BackendId(1)).get().to_string();
    wait_until("the wait event is published", || slot() == "LWLock:ProcArray");
    assert!(backends.slot(BackendId(0)).get().is_none());
    lock.release(holder);
    assert!(t.join().unwrap().is_none(), "wait event still set after the lock was granted");
}

#[test]
fn atomic_waiter_publishes_wait_event() {
    waiter_publishes_wait_event(AtomicLwLock::with_id(TrancheId::PROC_ARRAY, 50));
}

#[test]
fn pg92_waiter_publishes_wait_event() {
    waiter_publishes_wait_event(Pg92LwLock::with_id(TrancheId::PROC_ARRAY, 51));
}
