//! "Let one backend do everybody's work": group combining on top of an LWLock.
//!
//! Two protocols share the member slots below (one per backend, like the group fields of
//! `PGPROC`, indexed by the caller's backend number):
//!
//! * [`GroupCombiner`]: PostgreSQL 9.6's `ProcArrayGroupClearXid` (`procarray.c`) and 11's
//!   `TransactionGroupUpdateXidStatus` (`clog.c`). A backend that must run a short operation
//!   under the lock in exclusive mode first tries a conditional acquire; if the lock is busy it
//!   pushes its request on an atomic list. The backend that pushed onto an empty list is the
//!   leader: it takes the lock once, detaches the whole list with one atomic exchange, runs
//!   every request, releases, and wakes the others, who slept until their request was done.
//!   [`GroupCombiner::run_keyed`] adds the CLOG rule: refuse to join a group whose head has a
//!   different key (page), so the caller takes the lock itself.
//! * [`FlexLock`]: the 2011 FlexLock idea from the "testing ProcArrayLock patches" thread: a
//!   backend ending its transaction does not wait for ProcArrayLock at all. If the lock is busy
//!   it queues its request, and whoever releases the lock last performs the queued requests
//!   under an exclusive hold before anyone else can take it.
//!
//! Both keep PostgreSQL's guarantee that matters for snapshots: a request only ever runs while
//! the lock is held exclusively.

use lockstack_common::sync::Ordering;

use crossbeam_utils::CachePadded;
use lockstack_common::{WaitEvent, WaitEventScope};

use crate::interface::{LwLockHeld, LwLockImpl, LwLockMode};
use crate::stats::with_tranche;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Mutex, ParkHandle, Unparker, fence, park_while};

const INVALID: u32 = u32::MAX;

struct SlotData<R> {
    request: Option<R>,
    handle: Option<ParkHandle>,
}

/// One member's group fields (`procArrayGroupMember`, `procArrayGroupNext`, ... of `PGPROC`).
struct Member<R> {
    next: AtomicU32,
    pending: AtomicBool,
    key: AtomicU64,
    data: Mutex<SlotData<R>>,
}

impl<R> Member<R> {
    fn new() -> Member<R> {
        Member {
            next: AtomicU32::new(INVALID),
            pending: AtomicBool::new(false),
            key: AtomicU64::new(0),
            data: Mutex::new(SlotData { request: None, handle: None }),
        }
    }

    fn park_key(&self) -> usize {
        &self.pending as *const AtomicBool as usize
    }

    /// Fills the slot before it is published on a list.
    fn publish(&self, request: R, key: u64) {
        assert!(!self.pending.load(Ordering::Relaxed), "group member slot used by two callers at once");
        {
            let mut d = self.data.lock();
            d.request = Some(request);
            d.handle = Some(ParkHandle::current());
        }
        self.key.store(key, Ordering::Relaxed);
        self.pending.store(true, Ordering::Relaxed);
    }

    fn take_request(&self) -> R {
        self.data.lock().request.take().expect(
            "the caller published its request into its own slot above; only the caller takes it, once",
        )
    }

    fn sleep_until_done(&self, event: WaitEvent) {
        let _scope = WaitEventScope::new(event);
        park_while(self.park_key(), || self.pending.load(Ordering::Acquire));
    }

    /// Marks the request done and wakes its owner; the slot may be reused at once after.
    fn finish(&self) {
        let unparker: Option<Unparker> =
            self.data.lock().handle.as_ref().map(|h| h.unparker(self.park_key()));
        self.pending.store(false, Ordering::Release);
        if let Some(u) = unparker {
            u.unpark();
        }
    }
}

fn new_members<R>(n: usize) -> Box<[CachePadded<Member<R>>]> {
    assert!(n > 0 && n < INVALID as usize, "member count must be 1..2^32-1, got {n}");
    (0..n).map(|_| CachePadded::new(Member::new())).collect()
}

/// Runs the requests of a detached list; returns how many.
fn apply_list<R>(members: &[CachePadded<Member<R>>], first: u32, apply: &mut impl FnMut(&mut R)) -> usize {
    let mut n = 0;
    let mut cur = first;
    while cur != INVALID {
        let m = &members[cur as usize];
        apply(
            m.data
                .lock()
                .request
                .as_mut()
                .expect("a listed member's request was set by publish before it joined the list"),
        );
        cur = m.next.load(Ordering::Relaxed);
        n += 1;
    }
    n
}

/// Wakes every member of a detached list except `me`.
fn finish_list<R>(members: &[CachePadded<Member<R>>], first: u32, me: Option<u32>) {
    let mut cur = first;
    while cur != INVALID {
        let m = &members[cur as usize];
        let next = m.next.load(Ordering::Relaxed);
        m.next.store(INVALID, Ordering::Relaxed);
        if Some(cur) == me {
            m.pending.store(false, Ordering::Relaxed);
        } else {
            m.finish();
        }
        cur = next;
    }
}

/// How a [`GroupCombiner`] request was performed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum GroupRole {
    /// The lock was free: the caller took it conditionally and ran its own request.
    Alone,
    /// The caller led a group of `members` requests (its own included).
    Leader {
        /// Requests run under the one exclusive acquisition.
        members: usize,
    },
    /// Another backend ran the request.
    Follower,
}

/// The 9.6/11 leader-runs-the-group protocol (see the module documentation).
///
/// `R` is the request: whatever the operation needs (an xid and its latest subxid, a CLOG page
/// and status). Every caller of one combiner must pass the same operation as `apply`, because a
/// leader runs its own `apply` on the followers' requests.
pub struct GroupCombiner<R> {
    head: CachePadded<AtomicU32>,
    members: Box<[CachePadded<Member<R>>]>,
    wait_event: WaitEvent,
}

// SAFETY: requests move between threads (a leader runs followers' requests), hence `R: Send`;
// every shared field is an atomic or a mutex.
unsafe impl<R: Send> Sync for GroupCombiner<R> {}
// SAFETY: as above.
unsafe impl<R: Send> Send for GroupCombiner<R> {}

impl<R: Send> GroupCombiner<R> {
    /// A combiner for members `0..max_members`; followers publish `wait_event` while they sleep
    /// (`IPC:ProcArrayGroupUpdate` or `IPC:XactGroupUpdate`).
    ///
    /// # Panics
    /// If `max_members` is 0 or does not fit in 32 bits.
    pub fn new(max_members: usize, wait_event: WaitEvent) -> GroupCombiner<R> {
        GroupCombiner {
            head: CachePadded::new(AtomicU32::new(INVALID)),
            members: new_members(max_members),
            wait_event,
        }
    }

    /// Runs `apply(&mut request)` while `lock` is held exclusively, by this thread or by a group
    /// leader, and returns the request (changed by `apply`) with the role this caller played.
    ///
    /// `member` identifies the caller (its backend number); two concurrent calls must not share
    /// one.
    ///
    /// # Panics
    /// If `member >= max_members`, or if the member slot is already in use.
    pub fn run<L: LwLockImpl>(
        &self,
        member: usize,
        lock: &L,
        request: R,
        mut apply: impl FnMut(&mut R),
    ) -> (R, GroupRole) {
        match self.run_inner(member, None, lock, request, &mut apply) {
            Ok(r) => r,
            Err(_) => unreachable!("unkeyed groups never refuse"),
        }
    }

    /// Like [`run`](Self::run), but refuses to join a pending group whose first member has a
    /// different `key` (PostgreSQL 11's CLOG group: one page per group). On refusal the request
    /// comes back as `Err` and the caller should take the lock itself.
    ///
    /// # Panics
    /// As [`run`](Self::run).
    pub fn run_keyed<L: LwLockImpl>(
        &self,
        member: usize,
        key: u64,
        lock: &L,
        request: R,
        mut apply: impl FnMut(&mut R),
    ) -> Result<(R, GroupRole), R> {
        self.run_inner(member, Some(key), lock, request, &mut apply)
    }

    fn run_inner<L: LwLockImpl>(
        &self,
        member: usize,
        key: Option<u64>,
        lock: &L,
        mut request: R,
        apply: &mut impl FnMut(&mut R),
    ) -> Result<(R, GroupRole), R> {
        if let Some(h) = lock.conditional_acquire(LwLockMode::Exclusive) {
            apply(&mut request);
            lock.release(h);
            return Ok((request, GroupRole::Alone));
        }
        let me = &self.members[member];
        me.publish(request, key.unwrap_or(0));
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if let Some(k) = key {
                // Reading another member's key races with its reuse; like PostgreSQL we accept
                // that a group may occasionally mix keys: it is still correct, only slower.
                if head != INVALID && self.members[head as usize].key.load(Ordering::Relaxed) != k {
                    me.pending.store(false, Ordering::Relaxed);
                    return Err(me.take_request());
                }
            }
            me.next.store(head, Ordering::Relaxed);
            match self.head.compare_exchange_weak(head, member as u32, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(cur) => head = cur,
            }
        }
        if head != INVALID {
            // Follower: the leader runs our request and wakes us.
            me.sleep_until_done(self.wait_event);
            with_tranche(lock.tranche(), |c| c.group_follower.incr());
            return Ok((me.take_request(), GroupRole::Follower));
        }
        // Leader: everything pushed until our exchange below is ours to run.
        let held = lock.acquire(LwLockMode::Exclusive);
        let first = self.head.swap(INVALID, Ordering::AcqRel);
        let n = apply_list(&self.members, first, apply);
        lock.release(held);
        finish_list(&self.members, first, Some(member as u32));
        with_tranche(lock.tranche(), |c| c.group_leader.incr());
        Ok((me.take_request(), GroupRole::Leader { members: n }))
    }
}

/// How a [`FlexLock`] request was performed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FlexRole {
    /// The lock was free: the caller took it and ran its request.
    Direct,
    /// The request was queued and run by a backend releasing the lock (possibly the caller
    /// itself, if the lock became free right after it queued).
    Queued,
}

/// The 2011 FlexLock: an LWLock whose releasers run queued exclusive-mode requests (see the
/// module documentation).
///
/// Every release of the lock must go through [`FlexLock::release`] with the same `apply`
/// operation that [`FlexLock::run`] callers pass; a release that bypasses it could leave a
/// queued request waiting until the next release.
pub struct FlexLock<R, L: LwLockImpl> {
    lock: L,
    pending: CachePadded<AtomicU32>,
    members: Box<[CachePadded<Member<R>>]>,
}

// SAFETY: queued requests are run by other threads, hence `R: Send`; all shared state is atomics,
// mutexes, and the lock itself (which is Sync).
unsafe impl<R: Send, L: LwLockImpl> Sync for FlexLock<R, L> {}
// SAFETY: as above.
unsafe impl<R: Send, L: LwLockImpl> Send for FlexLock<R, L> {}

impl<R: Send, L: LwLockImpl> FlexLock<R, L> {
    /// Wraps `lock` for members `0..max_members`.
    ///
    /// # Panics
    /// If `max_members` is 0 or does not fit in 32 bits.
    pub fn new(lock: L, max_members: usize) -> FlexLock<R, L> {
        FlexLock {
            lock,
            pending: CachePadded::new(AtomicU32::new(INVALID)),
            members: new_members(max_members),
        }
    }

    /// The underlying lock (for `is_locked` and statistics; acquire through [`FlexLock::acquire`]).
    pub fn lock(&self) -> &L {
        &self.lock
    }

    /// Acquires the lock in `mode`, as [`LwLockImpl::acquire`].
    pub fn acquire(&self, mode: LwLockMode) -> LwLockHeld {
        self.lock.acquire(mode)
    }

    /// Acquires the lock in `mode` if that needs no wait.
    pub fn conditional_acquire(&self, mode: LwLockMode) -> Option<LwLockHeld> {
        self.lock.conditional_acquire(mode)
    }

    /// Releases a hold and performs queued requests: an exclusive holder runs them before it
    /// lets go; any releaser then re-checks, and if requests are queued and the lock is free,
    /// takes it exclusively and runs them.
    pub fn release(&self, held: LwLockHeld, mut apply: impl FnMut(&mut R)) {
        self.release_inner(held, &mut apply)
    }

    fn release_inner(&self, held: LwLockHeld, apply: &mut impl FnMut(&mut R)) {
        if held.mode == LwLockMode::Exclusive {
            self.drain_and_release(held, apply);
        } else {
            self.lock.release(held);
        }
        // Pairs with the fence in `run`: either the queuer sees our release (and takes the lock
        // itself), or we see its request here.
        fence(Ordering::SeqCst);
        while self.pending.load(Ordering::SeqCst) != INVALID {
            match self.lock.conditional_acquire(LwLockMode::Exclusive) {
                // Someone holds it; they will look at the queue when they release.
                None => return,
                Some(h) => {
                    self.drain_and_release(h, apply);
                    fence(Ordering::SeqCst);
                }
            }
        }
    }

    fn drain_and_release(&self, held: LwLockHeld, apply: &mut impl FnMut(&mut R)) {
        let first = self.pending.swap(INVALID, Ordering::AcqRel);
        let n = apply_list(&self.members, first, apply);
        self.lock.release(held);
        finish_list(&self.members, first, None);
        if n > 0 {
            with_tranche(self.lock.tranche(), |c| c.group_leader.incr());
        }
    }

    /// Runs `apply(&mut request)` under an exclusive hold of the lock: directly if the lock is
    /// free, otherwise by queueing it for the releasing holder and sleeping until it is done.
    ///
    /// # Panics
    /// If `member >= max_members`, or if the member slot is already in use.
    pub fn run(&self, member: usize, mut request: R, mut apply: impl FnMut(&mut R)) -> (R, FlexRole) {
        if let Some(h) = self.lock.conditional_acquire(LwLockMode::Exclusive) {
            apply(&mut request);
            self.release_inner(h, &mut apply);
            return (request, FlexRole::Direct);
        }
        let me = &self.members[member];
        me.publish(request, 0);
        let mut head = self.pending.load(Ordering::Relaxed);
        loop {
            me.next.store(head, Ordering::Relaxed);
            match self.pending.compare_exchange_weak(head, member as u32, Ordering::SeqCst, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(cur) => head = cur,
            }
        }
        fence(Ordering::SeqCst);
        // The holder may have released before it could see our request: look again.
        if let Some(h) = self.lock.conditional_acquire(LwLockMode::Exclusive) {
            self.release_inner(h, &mut apply);
        }
        me.sleep_until_done(WaitEvent::FLEX_LOCK_QUEUE);
        with_tranche(self.lock.tranche(), |c| c.group_follower.incr());
        (me.take_request(), FlexRole::Queued)
    }
}
