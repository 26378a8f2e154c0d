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

/// A set of named event counters: the one way every subsystem's statistics are read by name.
///
/// Each subsystem's stats struct (`WalStats`, `BufferStats`, `ProcArrayStats`, the LWLock
/// tranche sums, ...) implements it, and so does the engine's `StackCounters`, which prefixes
/// each subsystem's names with its section (`wal.flushes`, `lwlock.ProcArray.ex_acquire`). The
/// report, `--json`, the experiments and the fidelity table all read counters through it, so a
/// counter added to a struct shows up everywhere under its field name.
///
/// Names are the struct's field names (snake case), plus derived counters the struct documents
/// (sums such as `end_with_xid`); a collection of blocks names its counters `Block.field`
/// (LWLock tranches: `ProcArray.sh_acquire`). Values are event counts unless the field says
/// otherwise (`bytes`, `wait_ns`).
pub trait Counters {
    /// Calls `f(name, value)` for every counter, always in the same order.
    fn visit(&self, f: &mut dyn FnMut(&str, u64));

    /// The counter called `name`, `None` when there is no such counter (or, in a collection,
    /// no such block right now: an LWLock tranche without traffic).
    fn get(&self, name: &str) -> Option<u64> {
        let mut out = None;
        self.visit(&mut |n, v| {
            if out.is_none() && n == name {
                out = Some(v);
            }
        });
        out
    }
}

/// Defines a struct of `u64` counters and implements [`Counters`] for it from the one field
/// list, with `since` (`self - earlier`, saturating) and `add` (field by field), so that a
/// counter cannot be added to the struct and forgotten in its difference or its report.
///
/// ```
/// lockstack_common::counters! {
///     /// Two counters.
///     #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
///     pub struct Pair {
///         /// Hits.
///         pub hits: u64,
///         /// Misses.
///         pub misses: u64,
///     }
///     // Optional: one backend's block of `LocalCounter`s with the same fields, its
///     // attributes, visibility, and the visibility of its fields and methods.
///     per_backend: #[derive(Default, Debug)] pub struct PairCounters(pub);
///     // Optional: counters computed by methods of the same name.
///     derived: { lookups }
/// }
/// impl Pair {
///     /// Hits plus misses.
///     pub fn lookups(&self) -> u64 { self.hits + self.misses }
/// }
/// use lockstack_common::Counters;
/// let b = PairCounters::default();
/// b.hits.incr();
/// let mut p = Pair::default();
/// p.add_backend(&b);
/// assert_eq!(p.get("lookups"), Some(1));
/// assert_eq!(p.since(&p).hits, 0);
/// ```
#[macro_export]
macro_rules! counters {
    (@struct [$(#[$sattr:meta])* $svis:vis struct $S:ident]
        { $( $(#[$fattr:meta])* $fvis:vis $f:ident : u64 ),* $(,)? } [$($d:ident),*]) => {
        $(#[$sattr])*
        $svis struct $S {
            $( $(#[$fattr])* $fvis $f: u64, )*
        }

        impl $crate::stats::Counters for $S {
            fn visit(&self, f: &mut dyn FnMut(&str, u64)) {
                $( f(stringify!($f), self.$f); )*
                $( f(stringify!($d), self.$d()); )*
            }
        }

        impl $S {
            /// `self - earlier`, counter by counter (saturating): the counts of the phase
            /// between two readings.
            #[must_use]
            $svis fn since(&self, earlier: &$S) -> $S {
                $S { $( $f: self.$f.saturating_sub(earlier.$f), )* }
            }

            /// Adds `other` to `self`, counter by counter.
            $svis fn add(&mut self, other: &$S) {
                $( self.$f += other.$f; )*
            }
        }
    };
    (@block $S:ident [$(#[$battr:meta])* $bvis:vis struct $B:ident($bfvis:vis)]
        { $( $(#[$fattr:meta])* $fvis:vis $f:ident : u64 ),* $(,)? }) => {
        $(#[$battr])*
        #[doc = concat!("One backend's block of the counters of [`", stringify!($S), "`], with the same names; written only by its backend.")]
        $bvis struct $B {
            $( $(#[$fattr])* $bfvis $f: $crate::stats::LocalCounter, )*
        }

        impl $crate::stats::Counters for $B {
            fn visit(&self, f: &mut dyn FnMut(&str, u64)) {
                $( f(stringify!($f), self.$f.get()); )*
            }
        }

        impl $B {
            /// Zeroes every counter (between runs: an increment racing with it may survive).
            #[allow(dead_code)]
            $bfvis fn reset(&self) {
                $( self.$f.reset(); )*
            }
        }

        impl $S {
            /// Adds one backend's block to these sums.
            $bfvis fn add_backend(&mut self, b: &$B) {
                $( self.$f += b.$f.get(); )*
            }
        }
    };
    (
        $(#[$sattr:meta])*
        $svis:vis struct $S:ident $body:tt
        $(per_backend: $(#[$battr:meta])* $bvis:vis struct $B:ident($bfvis:vis);)?
        $(derived: { $( $d:ident ),* $(,)? })?
    ) => {
        $crate::counters!(@struct [$(#[$sattr])* $svis struct $S] $body [$($($d),*)?]);
        $( $crate::counters!(@block $S [$(#[$battr])* $bvis struct $B($bfvis)] $body); )?
    };
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

    crate::counters! {
        /// Test counters.
        #[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
        struct Pair {
            /// First.
            a: u64,
            /// Second.
            b: u64,
        }
        per_backend: #[derive(Default, Debug)] struct PairBlock(pub(self));
        derived: { total }
    }

    impl Pair {
        fn total(&self) -> u64 {
            self.a + self.b
        }
    }

    /// The macro's struct visits its fields in order, then its derived counters; `since`,
    /// `add`, `add_backend` and `reset` cover every field.
    #[test]
    fn counters_macro_names_every_field() {
        let mut names = Vec::new();
        let p = Pair { a: 5, b: 7 };
        p.visit(&mut |n, v| names.push((n.to_string(), v)));
        assert_eq!(names, [("a".to_string(), 5), ("b".to_string(), 7), ("total".to_string(), 12)]);
        assert_eq!(p.get("b"), Some(7));
        assert_eq!(p.get("c"), None);
        assert_eq!(p.since(&Pair { a: 2, b: 9 }), Pair { a: 3, b: 0 });
        let mut q = p;
        q.add(&p);
        assert_eq!(q, Pair { a: 10, b: 14 });
        let blk = PairBlock::default();
        blk.a.add(3);
        blk.b.incr();
        assert_eq!(blk.get("a"), Some(3));
        let mut s = Pair::default();
        s.add_backend(&blk);
        assert_eq!(s, Pair { a: 3, b: 1 });
        blk.reset();
        assert_eq!((blk.a.get(), blk.b.get()), (0, 0));
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
