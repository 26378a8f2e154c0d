//! The per-thread waiter record and the intrusive wait list that LWLocks queue it on.
//!
//! PostgreSQL queues `PGPROC`s: each process has one, with `lwWaiting`, `lwWaitMode` and the
//! `lwWaitLink` list node (`proc.h`); a wait list is a doubly linked list of them, protected by
//! the lock's spinlock (9.2) or by the `LW_FLAG_LOCKED` bit of its state word (9.6+). Here each
//! thread owns one [`Waiter`] in thread-local storage, and a [`WaitList`] links waiters through
//! their `prev`/`next` fields.
//!
//! Lifetime invariant that makes the raw pointers sound: a waiter is on at most one list, and
//! while it is on a list (or detached by a waker but not yet woken) its owning thread is blocked
//! inside the lock call that queued it, so its thread-local storage is alive. The waker touches
//! the waiter for the last time when it stores `NOT_WAITING`; the unpark that follows needs only
//! the address (or, under loom, a handle cloned before that store).

use lockstack_common::sync::Ordering;

use crate::sync::{AtomicPtr, AtomicU8, ParkHandle, Unparker, park_while, thread_local};

/// Not on any wait list (`LW_WS_NOT_WAITING`).
pub(crate) const NOT_WAITING: u8 = 0;
/// On a wait list (`LW_WS_WAITING`).
pub(crate) const WAITING: u8 = 1;
/// Taken off the list by a waker that has not yet woken it (`LW_WS_PENDING_WAKEUP`, 16+).
pub(crate) const PENDING_WAKEUP: u8 = 2;

/// What a queued waiter wants (`LWLockMode` including `LW_WAIT_UNTIL_FREE`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum WaitMode {
    Exclusive = 0,
    Shared = 1,
    /// Wake me when the lock is free (or its variable changes) but do not acquire it.
    WaitUntilFree = 2,
}

impl WaitMode {
    fn from_u8(v: u8) -> WaitMode {
        match v {
            0 => WaitMode::Exclusive,
            1 => WaitMode::Shared,
            _ => WaitMode::WaitUntilFree,
        }
    }
}

/// One thread's wait record.
pub(crate) struct Waiter {
    pub(crate) state: AtomicU8,
    mode: AtomicU8,
    prev: AtomicPtr<Waiter>,
    next: AtomicPtr<Waiter>,
    handle: ParkHandle,
}

impl Waiter {
    pub(crate) fn new() -> Waiter {
        Waiter {
            state: AtomicU8::new(NOT_WAITING),
            mode: AtomicU8::new(WaitMode::Exclusive as u8),
            prev: AtomicPtr::new(std::ptr::null_mut()),
            next: AtomicPtr::new(std::ptr::null_mut()),
            handle: ParkHandle::current(),
        }
    }

    fn key(&self) -> usize {
        self as *const Waiter as usize
    }

    pub(crate) fn mode(&self) -> WaitMode {
        WaitMode::from_u8(self.mode.load(Ordering::Relaxed))
    }

    /// Marks this waiter as queued in `mode`. Caller holds the lock of the list it joins.
    pub(crate) fn prepare(&self, mode: WaitMode) {
        assert_eq!(
            self.state.load(Ordering::Relaxed),
            NOT_WAITING,
            "queueing for an LWLock while already waiting on another one"
        );
        self.mode.store(mode as u8, Ordering::Relaxed);
        self.state.store(WAITING, Ordering::Relaxed);
    }

    /// Sleeps until a waker has stored `NOT_WAITING` (absorbing spurious wake-ups).
    pub(crate) fn sleep(&self) {
        park_while(self.key(), || self.state.load(Ordering::Acquire) != NOT_WAITING);
    }

    pub(crate) fn ptr(&self) -> *mut Waiter {
        self as *const Waiter as *mut Waiter
    }
}

/// Wakes a waiter that its caller has detached from every wait list.
///
/// # Safety
/// `w` must point to a live waiter that is off all lists and whose owner is blocked waiting
/// for `NOT_WAITING` (the module's lifetime invariant). After this call `w` must not be used.
pub(crate) unsafe fn wake(w: *const Waiter) {
    // SAFETY: the caller guarantees the waiter is alive until our store below.
    let w = unsafe { &*w };
    w.next.store(std::ptr::null_mut(), Ordering::Relaxed);
    w.prev.store(std::ptr::null_mut(), Ordering::Relaxed);
    let unparker: Unparker = w.handle.unparker(w.key());
    // Release: the unlink above and everything the waker did under the lock happen-before the
    // waiter's return (PostgreSQL's write barrier before clearing lwWaiting).
    w.state.store(NOT_WAITING, Ordering::Release);
    unparker.unpark();
}

thread_local! {
    static WAITER: Waiter = Waiter::new();
}

/// Runs `f` with the calling thread's waiter (a temporary one if thread-local storage is
/// already torn down, as during thread exit).
pub(crate) fn with_waiter<R>(f: impl FnOnce(&Waiter) -> R) -> R {
    let mut f = Some(f);
    match WAITER
        .try_with(|w| (f.take().expect("f is taken once: try_with runs this closure at most once"))(w))
    {
        Ok(r) => r,
        Err(_) => {
            let w = Box::new(Waiter::new());
            (f.take().expect("f is still here: try_with failed, so it did not run the closure that takes it"))(
                &w,
            )
        }
    }
}

/// An intrusive doubly linked FIFO of waiters (PostgreSQL's `proclist`).
///
/// Every method requires the caller to hold the lock that protects this list (the 9.2 spinlock
/// or the `LOCKED` state bit) and relies on the module's lifetime invariant for the pointers it
/// follows; the links are relaxed atomics because that lock orders every access to them.
pub(crate) struct WaitList {
    head: AtomicPtr<Waiter>,
    tail: AtomicPtr<Waiter>,
}

impl WaitList {
    #[cfg(not(loom))]
    pub(crate) const fn new() -> WaitList {
        WaitList { head: AtomicPtr::new(std::ptr::null_mut()), tail: AtomicPtr::new(std::ptr::null_mut()) }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> WaitList {
        WaitList { head: AtomicPtr::new(std::ptr::null_mut()), tail: AtomicPtr::new(std::ptr::null_mut()) }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.load(Ordering::Relaxed).is_null()
    }

    pub(crate) fn first(&self) -> *mut Waiter {
        self.head.load(Ordering::Relaxed)
    }

    /// The waiter after `w` on this list.
    ///
    /// # Safety
    /// List lock held; `w` is on this list.
    pub(crate) unsafe fn next_of(w: *mut Waiter) -> *mut Waiter {
        // SAFETY: `w` is linked, hence alive (module invariant).
        unsafe { (*w).next.load(Ordering::Relaxed) }
    }

    /// The mode `w` is queued in.
    ///
    /// # Safety
    /// List lock held; `w` is on this list.
    pub(crate) unsafe fn mode_of(w: *mut Waiter) -> WaitMode {
        // SAFETY: `w` is linked, hence alive (module invariant).
        unsafe { (*w).mode() }
    }

    /// Appends `w`.
    ///
    /// # Safety
    /// List lock held; `w` is alive and on no list.
    pub(crate) unsafe fn push_tail(&self, w: *mut Waiter) {
        let tail = self.tail.load(Ordering::Relaxed);
        // SAFETY: `w` is alive (caller); `tail`, if any, is linked, hence alive.
        unsafe {
            (*w).next.store(std::ptr::null_mut(), Ordering::Relaxed);
            (*w).prev.store(tail, Ordering::Relaxed);
            if tail.is_null() {
                self.head.store(w, Ordering::Relaxed);
            } else {
                (*tail).next.store(w, Ordering::Relaxed);
            }
        }
        self.tail.store(w, Ordering::Relaxed);
    }

    /// Prepends `w`.
    ///
    /// # Safety
    /// List lock held; `w` is alive and on no list.
    pub(crate) unsafe fn push_head(&self, w: *mut Waiter) {
        let head = self.head.load(Ordering::Relaxed);
        // SAFETY: `w` is alive (caller); `head`, if any, is linked, hence alive.
        unsafe {
            (*w).prev.store(std::ptr::null_mut(), Ordering::Relaxed);
            (*w).next.store(head, Ordering::Relaxed);
            if head.is_null() {
                self.tail.store(w, Ordering::Relaxed);
            } else {
                (*head).prev.store(w, Ordering::Relaxed);
            }
        }
        self.head.store(w, Ordering::Relaxed);
    }

    /// Unlinks `w` in O(1) (the 16+ `proclist_delete` without a search).
    ///
    /// # Safety
    /// List lock held; `w` is on this list.
    pub(crate) unsafe fn remove(&self, w: *mut Waiter) {
        // SAFETY: `w` and its neighbours are linked, hence alive (module invariant).
        unsafe {
            let prev = (*w).prev.load(Ordering::Relaxed);
            let next = (*w).next.load(Ordering::Relaxed);
            if prev.is_null() {
                self.head.store(next, Ordering::Relaxed);
            } else {
                (*prev).next.store(next, Ordering::Relaxed);
            }
            if next.is_null() {
                self.tail.store(prev, Ordering::Relaxed);
            } else {
                (*next).prev.store(prev, Ordering::Relaxed);
            }
            (*w).prev.store(std::ptr::null_mut(), Ordering::Relaxed);
            (*w).next.store(std::ptr::null_mut(), Ordering::Relaxed);
        }
    }
}

/// A private singly linked list of detached waiters, woken after the list lock is released.
pub(crate) struct WakeList {
    head: *mut Waiter,
    tail: *mut Waiter,
}

impl WakeList {
    pub(crate) fn new() -> WakeList {
        WakeList { head: std::ptr::null_mut(), tail: std::ptr::null_mut() }
    }

    /// Adds a waiter already removed from its wait list.
    ///
    /// # Safety
    /// `w` is alive, off every list, and marked for wake-up by this caller.
    pub(crate) unsafe fn push(&mut self, w: *mut Waiter) {
        // SAFETY: as promised by the caller; the link fields of a detached waiter belong to the
        // waker until it wakes it.
        unsafe {
            (*w).next.store(std::ptr::null_mut(), Ordering::Relaxed);
            if self.tail.is_null() {
                self.head = w;
            } else {
                (*self.tail).next.store(w, Ordering::Relaxed);
            }
        }
        self.tail = w;
    }

    /// Wakes every waiter on the list, in order.
    pub(crate) fn wake_all(self) {
        let mut w = self.head;
        while !w.is_null() {
            // SAFETY: every pushed waiter is alive until woken (push's contract); read the link
            // before waking, since the waiter may be gone right after.
            let next = unsafe { (*w).next.load(Ordering::Relaxed) };
            // SAFETY: detached and marked by us; not used again after this call.
            unsafe { wake(w) };
            w = next;
        }
    }
}
