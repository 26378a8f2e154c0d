//! Per-backend statistics plumbing: counters written only by their own backend and summed on
//! demand by anyone.
//!
//! This is the model of PostgreSQL's backend-local `LWLOCK_STATS` hash (`lwlock.c`, 9.4+) and
//! of the `PgStat_*` pending counters: the hot path touches only memory its own backend owns, so
//! counting adds no shared write and no cache-line ping-pong. Unlike PostgreSQL's, our counters
//! are readable while the run is going (for progress lines), because each is an atomic that only
//! its owner stores to.

use crate::sync::atomic::plain::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::sync::host::Mutex;
use crossbeam_utils::CachePadded;

/// A 64-bit event counter with one writer (its backend) and any number of readers.
///
/// [`add`](Self::add) is a relaxed load plus a relaxed store, not a read-modify-write: it is
/// correct only when a single thread adds to the counter, which is the contract of every
/// per-backend stats block. Readers see a value that is at most a few increments stale.
#[derive(Default, Debug)]
pub struct LocalCounter(AtomicU64);

impl LocalCounter {
    /// A zero counter (usable in `const` and `static` items).
    pub const fn new() -> LocalCounter {
        LocalCounter(AtomicU64::new(0))
    }

    /// Adds `n`; only the owning backend may call this (see the type's contract).
    #[inline]
    pub fn add(&self, n: u64) {
        let v = self.0.load(Ordering::Relaxed);
        self.0.store(v.wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds one; only the owning backend may call this.
    #[inline]
    pub fn incr(&self) {
        self.add(1);
    }

    /// The current value.
    #[inline]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Sets the counter to zero. Meant for quiescent points (between runs); an increment racing
    /// with a reset may be lost.
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// A registry of per-backend stats blocks of type `T`, for summing on demand.
///
/// Each backend (thread) calls [`register`](Self::register) once and keeps the returned `Arc`;
/// a reporter calls [`for_each`](Self::for_each) at any time to read every block, including
/// those of backends that have exited (their counts stay in the totals). Registration takes a
/// mutex; reading the counters never does. A registry never drops a block it handed out, so a
/// block lives at least as long as the registry (for a `static` registry: the process).
///
/// Each block sits on its own cache lines ([`StatsBlock`]): blocks registered one after another
/// from one thread would otherwise be neighbours in memory, and two backends counting into
/// neighbouring blocks would bounce a line between their cores at every increment (as
/// PostgreSQL's per-backend counters, kept in each backend's own memory, never do).
pub struct StatsRegistry<T> {
    blocks: Mutex<Vec<StatsBlock<T>>>,
}

/// A backend's handle to its stats block: shared with the registry, padded to whole 128-byte
/// lines. Dereferences to `T`.
pub type StatsBlock<T> = Arc<CachePadded<T>>;

impl<T> StatsRegistry<T> {
    /// An empty registry (usable in `static` items).
    pub const fn new() -> StatsRegistry<T> {
        StatsRegistry { blocks: Mutex::new(Vec::new()) }
    }

    /// Adds a block and returns a handle to it.
    pub fn register_with(&self, block: T) -> StatsBlock<T> {
        let a = Arc::new(CachePadded::new(block));
        self.blocks.lock().push(Arc::clone(&a));
        a
    }

    /// Calls `f` on every registered block, in registration order.
    pub fn for_each(&self, mut f: impl FnMut(&T)) {
        let blocks = self.blocks.lock().clone();
        for b in &blocks {
            f(b);
        }
    }

    /// Number of registered blocks (backends that ever counted something).
    pub fn len(&self) -> usize {
        self.blocks.lock().len()
    }

    /// True when no block has been registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Default> StatsRegistry<T> {
    /// Adds a default (zero) block and returns a handle to it.
    pub fn register(&self) -> StatsBlock<T> {
        self.register_with(T::default())
    }
}

impl<T> Default for StatsRegistry<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Block {
        a: LocalCounter,
    }

    /// Blocks registered one after another from one thread never share a 128-byte line.
    #[test]
    fn blocks_do_not_share_lines() {
        let reg: StatsRegistry<Block> = StatsRegistry::new();
        let blocks: Vec<_> = (0..8).map(|_| reg.register()).collect();
        let mut lines: Vec<usize> = Vec::new();
        for b in &blocks {
            let start = &b.a as *const LocalCounter as usize;
            assert_eq!(start % 128, 0, "block at {start:#x} is not line-aligned");
            let end = start + std::mem::size_of::<CachePadded<Block>>() - 1;
            for line in [start / 128, end / 128] {
                assert!(!lines.contains(&line), "two blocks share line {line:#x}");
            }
            lines.extend((start / 128..=end / 128).collect::<Vec<_>>());
        }
    }

    #[test]
    fn per_thread_blocks_sum_to_the_total() {
        let reg: Arc<StatsRegistry<Block>> = Arc::new(StatsRegistry::new());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let reg = Arc::clone(&reg);
                std::thread::spawn(move || {
                    let b = reg.register();
                    for _ in 0..10_000 {
                        b.a.incr();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut total = 0;
        reg.for_each(|b| total += b.a.get());
        assert_eq!(total, 40_000);
        assert_eq!(reg.len(), 4);
        reg.for_each(|b| b.a.reset());
        let mut after = 0;
        reg.for_each(|b| after += b.a.get());
        assert_eq!(after, 0);
    }
}
