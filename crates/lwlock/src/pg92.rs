//! The PostgreSQL 9.2 LWLock: a spinlock protecting the exclusive flag, the shared count, the
//! `releaseOK` flag and a FIFO wait queue (`src/backend/storage/lmgr/lwlock.c`, 9.2-9.4).
//!
//! Every acquisition, shared ones included, takes the per-lock spinlock: on many cores that
//! spinlock is the bottleneck this design is remembered for (the 9.5 rewrite's motivation).
//! Because the check and the queueing happen under the same spinlock, there is no lost-wake-up
//! race and no self-dequeue. The `wait_for_var` / `update_var` pair follows 9.4, where the
//! variable is read and written under the spinlock.

use lockstack_common::sync::Ordering;

use lockstack_common::{TrancheId, WaitEvent, WaitEventScope};

use crate::interface::{LwLockHeld, LwLockImpl, LwLockMode, LwLockVar, VarWait};
use crate::spin::{SpinLock, spin_rounds, spin_then_attempt};
use crate::stats::{check_tranche, record_instance, with_tranche};
use crate::sync::{AtomicBool, AtomicU8, AtomicU32, Instant};
use crate::waiter::{WaitList, WaitMode, Waiter, WakeList, with_waiter};

/// The 9.2 LWLock. Every field but `mutex` is read and written only while `mutex` is held (the
/// atomics are relaxed; the spinlock orders them).
pub struct Pg92LwLock {
    mutex: SpinLock,
    release_ok: AtomicBool,
    exclusive: AtomicU8,
    shared: AtomicU32,
    tranche: TrancheId,
    instance: u32,
    waiters: WaitList,
}

// SAFETY: all fields are atomics or ids; the waiter pointers in `waiters` are followed only under
// `mutex`, while their owners are blocked (the lifetime invariant of `waiter.rs`).
unsafe impl Send for Pg92LwLock {}
// SAFETY: as above.
unsafe impl Sync for Pg92LwLock {}

impl Pg92LwLock {
    /// The address of the lock's spinlock word (the line a simulation names; see
    /// [`LwLock::name_line`](crate::LwLock::name_line)).
    pub fn word_addr(&self) -> *const u8 {
        &self.mutex as *const SpinLock as *const u8
    }

    fn lock_mutex(&self, spins: &mut u64) {
        *spins += u64::from(self.mutex.lock());
    }

    /// Under the mutex: take the lock in `mode` if it is free for that mode.
    fn try_take(&self, mode: LwLockMode) -> bool {
        let excl = self.exclusive.load(Ordering::Relaxed);
        let shared = self.shared.load(Ordering::Relaxed);
        match mode {
            LwLockMode::Exclusive if excl == 0 && shared == 0 => {
                self.exclusive.store(1, Ordering::Relaxed);
                true
            }
            LwLockMode::Shared if excl == 0 => {
                self.shared.store(shared + 1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// Under the mutex: queue `w` and drop the mutex, then sleep until woken.
    fn queue_and_sleep(&self, w: &Waiter, mode: WaitMode, at_head: bool) -> u64 {
        w.prepare(mode);
        // SAFETY: mutex held; `w` is ours, alive for this call, and on no list.
        unsafe {
            if at_head {
                self.waiters.push_head(w.ptr());
            } else {
                self.waiters.push_tail(w.ptr());
            }
        }
        self.mutex.unlock();
        let _scope = WaitEventScope::new(WaitEvent::lwlock(self.tranche));
        let start = Instant::now();
        w.sleep();
        start.elapsed().as_nanos() as u64
    }

    fn record_slow(&self, blocks: u64, spins: u64, wait_ns: u64) {
        if blocks == 0 && spins == 0 {
            return;
        }
        with_tranche(self.tranche, |c| {
            c.block.add(blocks);
            c.spin_delay.add(spins);
            c.wait_ns.add(wait_ns);
        });
        record_instance(self.tranche, self.instance, blocks, spins, wait_ns);
    }

    fn count_acquire(&self, mode: LwLockMode) {
        with_tranche(self.tranche, |c| match mode {
            LwLockMode::Shared => c.sh_acquire.incr(),
            LwLockMode::Exclusive => c.ex_acquire.incr(),
        });
    }

    /// Number of queued waiters (for tests and diagnostics).
    pub fn queued_waiters(&self) -> usize {
        self.mutex.lock();
        let mut n = 0;
        let mut cur = self.waiters.first();
        while !cur.is_null() {
            n += 1;
            // SAFETY: mutex held; `cur` is on this list.
            cur = unsafe { WaitList::next_of(cur) };
        }
        self.mutex.unlock();
        n
    }
}

#[cfg(not(loom))]
impl Pg92LwLock {
    /// A free lock, built at compile time (for `static`s and `lock_api`'s `INIT`).
    ///
    /// # Panics
    /// If `tranche` is out of range (`>= TrancheId::MAX`).
    pub const fn new_const(tranche: TrancheId, instance: u32) -> Pg92LwLock {
        check_tranche(tranche);
        Pg92LwLock {
            mutex: SpinLock::new(),
            release_ok: AtomicBool::new(true),
            exclusive: AtomicU8::new(0),
            shared: AtomicU32::new(0),
            tranche,
            instance,
            waiters: WaitList::new(),
        }
    }
}

impl LwLockImpl for Pg92LwLock {
    fn with_id(tranche: TrancheId, instance: u32) -> Pg92LwLock {
        check_tranche(tranche);
        Pg92LwLock {
            mutex: SpinLock::new(),
            release_ok: AtomicBool::new(true),
            exclusive: AtomicU8::new(0),
            shared: AtomicU32::new(0),
            tranche,
            instance,
            waiters: WaitList::new(),
        }
    }

    fn acquire(&self, mode: LwLockMode) -> LwLockHeld {
        self.count_acquire(mode);
        let wait_mode = match mode {
            LwLockMode::Shared => WaitMode::Shared,
            LwLockMode::Exclusive => WaitMode::Exclusive,
        };
        let (mut blocks, mut spins, mut ns) = (0u64, 0u64, 0u64);
        let mut retry = false;
        let mut may_spin = spin_rounds() > 0;
        loop {
            self.lock_mutex(&mut spins);
            if retry {
                // We were woken and have now run: allow the next wake-up.
                self.release_ok.store(true, Ordering::Relaxed);
            }
            if self.try_take(mode) {
                self.mutex.unlock();
                break;
            }
            if may_spin {
                // Optional pre-sleep spin (see `set_spin_rounds`): read the counts without the
                // spinlock, retry under it when they look free. With 0 rounds this branch is
                // never taken and the loop is exactly 9.2's.
                may_spin = false;
                self.mutex.unlock();
                let looks_free = || {
                    self.exclusive.load(Ordering::Relaxed) == 0
                        && (mode == LwLockMode::Shared || self.shared.load(Ordering::Relaxed) == 0)
                };
                let try_take = || {
                    let mut s = 0;
                    self.lock_mutex(&mut s);
                    let ok = self.try_take(mode);
                    self.mutex.unlock();
                    ok
                };
                if spin_then_attempt(self.tranche.name(), looks_free, try_take) {
                    break;
                }
                continue;
            }
            blocks += 1;
            ns += with_waiter(|w| self.queue_and_sleep(w, wait_mode, false));
            retry = true;
        }
        self.record_slow(blocks, spins, ns);
        LwLockHeld::new(mode, blocks > 0)
    }

    fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        let mut spins = 0;
        self.lock_mutex(&mut spins);
        let ok = self.try_take(mode);
        self.mutex.unlock();
        self.record_slow(0, spins, 0);
        if ok {
            self.count_acquire(mode);
            Some(LwLockHeld::new(mode, false))
        } else {
            with_tranche(self.tranche, |c| c.cond_fail.incr());
            None
        }
    }

    fn acquire_or_wait(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        let mut spins = 0;
        self.lock_mutex(&mut spins);
        if self.try_take(mode) {
            self.mutex.unlock();
            self.record_slow(0, spins, 0);
            self.count_acquire(mode);
            return Some(LwLockHeld::new(mode, false));
        }
        let ns = with_waiter(|w| self.queue_and_sleep(w, WaitMode::WaitUntilFree, false));
        self.record_slow(1, spins, ns);
        None
    }

    fn release(&self, held: LwLockHeld) {
        let mut spins = 0;
        self.lock_mutex(&mut spins);
        match held.mode {
            LwLockMode::Exclusive => {
                let ok = self.exclusive.load(Ordering::Relaxed) == 1;
                if !ok {
                    self.mutex.unlock();
                }
                assert!(ok, "lock {}/{} is not held in Exclusive mode", self.tranche, self.instance);
                self.exclusive.store(0, Ordering::Relaxed);
            }
            LwLockMode::Shared => {
                let n = self.shared.load(Ordering::Relaxed);
                if n == 0 {
                    self.mutex.unlock();
                }
                assert!(n > 0, "lock {}/{} is not held in Shared mode", self.tranche, self.instance);
                self.shared.store(n - 1, Ordering::Relaxed);
            }
        }
        let mut wake = WakeList::new();
        if !self.waiters.is_empty()
            && self.exclusive.load(Ordering::Relaxed) == 0
            && self.shared.load(Ordering::Relaxed) == 0
            && self.release_ok.load(Ordering::Relaxed)
        {
            // 9.2's rule: skip over leading wait-until-free waiters; if the next one wants
            // exclusive, wake up to and including it; otherwise wake the run of non-exclusive
            // waiters up to the first exclusive one. Detach that prefix.
            let mut release_ok = true;
            let mut last = self.waiters.first();
            // SAFETY: mutex held; every pointer followed below is on this list, and the
            // prefix we detach becomes ours to wake.
            unsafe {
                while WaitList::mode_of(last) == WaitMode::WaitUntilFree && !WaitList::next_of(last).is_null()
                {
                    last = WaitList::next_of(last);
                }
                if WaitList::mode_of(last) != WaitMode::Exclusive {
                    loop {
                        let next = WaitList::next_of(last);
                        if next.is_null() || WaitList::mode_of(next) == WaitMode::Exclusive {
                            break;
                        }
                        if WaitList::mode_of(last) != WaitMode::WaitUntilFree {
                            release_ok = false;
                        }
                        last = next;
                    }
                }
                if WaitList::mode_of(last) != WaitMode::WaitUntilFree {
                    release_ok = false;
                }
                loop {
                    let w = self.waiters.first();
                    self.waiters.remove(w);
                    wake.push(w);
                    if w == last {
                        break;
                    }
                }
            }
            self.release_ok.store(release_ok, Ordering::Relaxed);
        }
        self.mutex.unlock();
        wake.wake_all();
        self.record_slow(0, spins, 0);
    }

    fn wait_for_var(&self, var: &LwLockVar, oldval: u64) -> VarWait {
        let (mut blocks, mut spins, mut ns) = (0u64, 0u64, 0u64);
        let result = loop {
            self.lock_mutex(&mut spins);
            if self.exclusive.load(Ordering::Relaxed) == 0 {
                self.mutex.unlock();
                break VarWait::Free;
            }
            let value = var.0.load(Ordering::Relaxed);
            if value != oldval {
                self.mutex.unlock();
                break VarWait::Changed(value);
            }
            blocks += 1;
            ns += with_waiter(|w| self.queue_and_sleep(w, WaitMode::WaitUntilFree, true));
        };
        self.record_slow(blocks, spins, ns);
        result
    }

    fn update_var(&self, held: &LwLockHeld, var: &LwLockVar, val: u64) {
        let mut spins = 0;
        self.lock_mutex(&mut spins);
        let ok = held.mode == LwLockMode::Exclusive && self.exclusive.load(Ordering::Relaxed) == 1;
        if !ok {
            self.mutex.unlock();
        }
        assert!(ok, "update_var needs the lock held exclusively");
        var.0.store(val, Ordering::Relaxed);
        let mut wake = WakeList::new();
        loop {
            let w = self.waiters.first();
            // SAFETY: mutex held; `w` is on this list.
            if w.is_null() || unsafe { WaitList::mode_of(w) } != WaitMode::WaitUntilFree {
                break;
            }
            // SAFETY: mutex held; `w` is on this list and becomes ours to wake.
            unsafe {
                self.waiters.remove(w);
                wake.push(w);
            }
        }
        self.mutex.unlock();
        wake.wake_all();
        self.record_slow(0, spins, 0);
    }

    fn release_clear_var(&self, held: LwLockHeld, var: &LwLockVar, val: u64) {
        let mut spins = 0;
        self.lock_mutex(&mut spins);
        var.0.store(val, Ordering::Relaxed);
        self.mutex.unlock();
        self.record_slow(0, spins, 0);
        self.release(held);
    }

    fn is_locked(&self) -> bool {
        self.exclusive.load(Ordering::Relaxed) != 0 || self.shared.load(Ordering::Relaxed) != 0
    }

    fn is_locked_exclusive(&self) -> bool {
        self.exclusive.load(Ordering::Relaxed) != 0
    }

    fn tranche(&self) -> TrancheId {
        self.tranche
    }

    fn instance(&self) -> u32 {
        self.instance
    }
}
