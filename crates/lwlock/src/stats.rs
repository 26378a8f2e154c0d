//! LWLOCK_STATS: per-backend counters for every tranche, plus per-lock counters for the slow
//! path.
//!
//! PostgreSQL built with `-DLWLOCK_STATS` keeps, in each backend, a hash from (tranche, lock) to
//! `sh_acquire_count`, `ex_acquire_count`, `block_count`, `spin_delay_count` and
//! `dequeue_self_count`, and prints them at exit (`lwlock.c`, 9.4+). lockstack keeps the same
//! counts, summed per tranche on the fast path (a thread-local row of [`LocalCounter`]s, so
//! counting adds no shared write) and per lock instance on the slow path only (blocks, spin
//! delays and wait time, which is where a hot lock shows itself). [`snapshot`] sums every
//! backend's counters at any time; [`reset`] zeroes them between runs.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::OnceLock;

use lockstack_common::sync::host::Mutex;
use lockstack_common::{StatsRegistry, TrancheId};

/// One backend's rows, one per tranche id.
type TrancheRows = [TrancheCounters; TrancheId::MAX];

/// One backend's block: a row per tranche, and the per-instance slow-path map. The rows are a
/// fixed-size heap array built in place (16 KiB would not fit a loom coroutine's stack), and
/// the fast path keeps a thread-local pointer straight to them.
pub(crate) struct BackendLwLockStats {
    tranches: Box<TrancheRows>,
    instances: Mutex<BTreeMap<(u16, u32), LockInstanceStats>>,
}

impl Default for BackendLwLockStats {
    fn default() -> Self {
        let rows: Box<[TrancheCounters]> = (0..TrancheId::MAX).map(|_| TrancheCounters::default()).collect();
        BackendLwLockStats {
            tranches: rows.try_into().unwrap_or_else(|_| unreachable!("built with MAX rows")),
            instances: Mutex::new(BTreeMap::new()),
        }
    }
}

fn registry() -> &'static StatsRegistry<BackendLwLockStats> {
    static REG: OnceLock<StatsRegistry<BackendLwLockStats>> = OnceLock::new();
    REG.get_or_init(StatsRegistry::new)
}

crate::sync::thread_local! {
    /// This thread's stats block, for the slow path. A raw pointer with a const initialiser
    /// and no destructor, like `ROWS`.
    static MINE: Cell<*const BackendLwLockStats> = const { Cell::new(std::ptr::null()) };
    /// This thread's tranche rows (`MINE`'s `tranches`), so that counting on the acquire path
    /// is one thread-local load, a null test and an increment at a computed offset.
    static ROWS: Cell<*const TrancheRows> = const { Cell::new(std::ptr::null()) };
}

#[cold]
#[inline(never)]
fn register_mine() -> *const BackendLwLockStats {
    let block = registry().register();
    // The registry keeps its own `Arc` to every block for the life of the process, so the
    // pointers stay valid after this `Arc` is dropped.
    let p: *const BackendLwLockStats = &**block;
    MINE.with(|m| m.set(p));
    ROWS.with(|r| r.set(&*block.tranches));
    p
}

#[inline]
fn mine() -> &'static BackendLwLockStats {
    let mut p = MINE.with(|m| m.get());
    if p.is_null() {
        p = register_mine();
    }
    // SAFETY: `p` came from `Arc::as_ptr` on a block that the static registry holds an `Arc`
    // to; the registry never drops blocks, so the block lives as long as the process.
    unsafe { &*p }
}

#[inline]
fn rows() -> &'static TrancheRows {
    let mut p = ROWS.with(|r| r.get());
    if p.is_null() {
        // SAFETY: as in `mine`: the block (and so its boxed rows, which are never replaced)
        // lives as long as the process.
        p = unsafe { &*(*register_mine()).tranches };
    }
    // SAFETY: `p` points to the rows of a block that the static registry keeps alive for the
    // life of the process (see `mine`); the rows are never moved or replaced.
    unsafe { &*p }
}

const _: () = assert!(TrancheId::MAX.is_power_of_two(), "with_tranche masks ids with MAX - 1");

/// Panics unless `tranche` has a counter row. Every lock constructor calls it, so that
/// [`with_tranche`] can find the row of a lock's tranche without a bounds check.
///
/// # Panics
/// If `tranche.index() >= TrancheId::MAX` (an id not made by `TrancheId::register` or a
/// built-in constant).
#[inline]
pub(crate) const fn check_tranche(tranche: TrancheId) {
    assert!((tranche.0 as usize) < TrancheId::MAX, "LWLock tranche id out of range (>= TrancheId::MAX)");
}

/// Runs `f` on the calling backend's row for `tranche` (registering the backend on first use).
///
/// `tranche` must be one that [`check_tranche`] accepts (the tranche of a constructed lock);
/// the index is masked with `MAX - 1` rather than bounds-checked, which for such ids changes
/// nothing and saves a compare and branch on every acquisition.
#[inline]
pub(crate) fn with_tranche<R>(tranche: TrancheId, f: impl FnOnce(&TrancheCounters) -> R) -> R {
    debug_assert!(tranche.index() < TrancheId::MAX);
    f(&rows()[tranche.index() & (TrancheId::MAX - 1)])
}

/// Adds slow-path figures for one lock instance (called only after a sleep or spin delays).
pub(crate) fn record_instance(tranche: TrancheId, instance: u32, blocks: u64, spins: u64, wait_ns: u64) {
    let mut map = mine().instances.lock();
    let e = map.entry((tranche.0, instance)).or_default();
    e.block += blocks;
    e.spin_delay += spins;
    e.wait_ns += wait_ns;
}

lockstack_common::counters! {
    /// Sums of one tranche's counters over every backend, read by name through
    /// [`lockstack_common::Counters`]: the fields, then the derived `acquisitions`.
    #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
    pub struct TrancheStats {
        /// Shared-mode acquisitions (successful, including conditional ones).
        pub sh_acquire: u64,
        /// Exclusive-mode acquisitions (successful, including conditional ones).
        pub ex_acquire: u64,
        /// Conditional acquisitions that failed because the lock was busy.
        pub cond_fail: u64,
        /// Times a backend had to sleep on the lock (PostgreSQL's `blk`).
        pub block: u64,
        /// Spin delays (yields or sleeps) while spinning on the lock's spinlock or wait-list bit.
        pub spin_delay: u64,
        /// Nanoseconds spent asleep waiting for the lock.
        pub wait_ns: u64,
        /// Times a backend queued itself, found the lock free, and took itself off the queue.
        pub dequeue_self: u64,
        /// Group-combining rounds led (one exclusive acquisition on behalf of several requests).
        pub group_leader: u64,
        /// Requests performed by another backend's group round or FlexLock release.
        pub group_follower: u64,
        /// ReadBiased: times an exclusive locker revoked the reader bias.
        pub bias_revoke: u64,
    }
    // Aligned (and so sized) to 128 bytes, so that a row is found with one shift and the
    // counters of two tranches never share a cache line.
    per_backend: #[derive(Default, Debug)] #[repr(align(128))] pub(crate) struct TrancheCounters(pub(crate));
    derived: { acquisitions }
}

impl TrancheStats {
    /// Shared plus exclusive acquisitions.
    pub fn acquisitions(&self) -> u64 {
        self.sh_acquire + self.ex_acquire
    }

    fn is_zero(&self) -> bool {
        *self == TrancheStats::default()
    }
}

lockstack_common::counters! {
    /// Slow-path sums for one lock instance.
    #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
    pub struct LockInstanceStats {
        /// Sleeps on this lock.
        pub block: u64,
        /// Spin delays on this lock.
        pub spin_delay: u64,
        /// Nanoseconds asleep on this lock.
        pub wait_ns: u64,
    }
}

/// A point-in-time sum of every backend's LWLock counters.
#[derive(Default, Debug, Clone)]
pub struct LwLockStatsSnapshot {
    /// Per tranche, only tranches with a non-zero counter.
    pub tranches: BTreeMap<TrancheId, TrancheStats>,
    /// Per lock instance (tranche, instance number), slow-path counters only.
    pub instances: BTreeMap<(TrancheId, u32), LockInstanceStats>,
    /// Backends that have counted something since the process started.
    pub backends: usize,
}

impl LwLockStatsSnapshot {
    /// The counters of `tranche` (zeros if it saw no traffic).
    pub fn tranche(&self, tranche: TrancheId) -> TrancheStats {
        self.tranches.get(&tranche).copied().unwrap_or_default()
    }

    /// `self - earlier`, counter by counter (for measuring one phase of a run).
    pub fn since(&self, earlier: &LwLockStatsSnapshot) -> LwLockStatsSnapshot {
        let mut out = LwLockStatsSnapshot { backends: self.backends, ..Default::default() };
        for (t, s) in &self.tranches {
            let e = earlier.tranche(*t);
            let d = s.since(&e);
            if !d.is_zero() {
                out.tranches.insert(*t, d);
            }
        }
        for (k, s) in &self.instances {
            let e = earlier.instances.get(k).copied().unwrap_or_default();
            let d = s.since(&e);
            if d != LockInstanceStats::default() {
                out.instances.insert(*k, d);
            }
        }
        out
    }
}

/// The tranche counters by name, `Tranche.counter` (`ProcArray.ex_acquire`,
/// `LockManager.block`), for the tranches in [`LwLockStatsSnapshot::tranches`] in id order. The
/// per-instance slow-path counters are read from [`LwLockStatsSnapshot::instances`].
impl lockstack_common::Counters for LwLockStatsSnapshot {
    fn visit(&self, f: &mut dyn FnMut(&str, u64)) {
        for (t, s) in &self.tranches {
            let tranche = t.name();
            s.visit(&mut |n, v| f(&format!("{tranche}.{n}"), v));
        }
    }

    fn get(&self, name: &str) -> Option<u64> {
        let (tranche, counter) = name.split_once('.')?;
        let (_, s) = self.tranches.iter().find(|(t, _)| t.name() == tranche)?;
        s.get(counter)
    }
}

/// Sums every backend's counters now. Safe to call while backends run: each counter is read
/// atomically, so the result is at most a few increments behind.
pub fn snapshot() -> LwLockStatsSnapshot {
    let mut out = LwLockStatsSnapshot::default();
    registry().for_each(|b| {
        out.backends += 1;
        for (i, c) in b.tranches.iter().enumerate() {
            let mut s = out.tranches.get(&TrancheId(i as u16)).copied().unwrap_or_default();
            s.add_backend(c);
            if !s.is_zero() {
                out.tranches.insert(TrancheId(i as u16), s);
            }
        }
        for (&(t, inst), s) in b.instances.lock().iter() {
            let e = out.instances.entry((TrancheId(t), inst)).or_default();
            e.add(s);
        }
    });
    out
}

/// Zeroes every backend's counters. Call it only when no backend is running (between runs):
/// an increment racing with the reset may survive it.
pub fn reset() {
    registry().for_each(|b| {
        for c in b.tranches.iter() {
            c.reset();
        }
        b.instances.lock().clear();
    });
}
