//! Per-backend private reference counts (`PrivateRefCount`, `bufmgr.c`, 9.5+ shape): how many
//! times this backend has pinned each buffer. Only a backend's first pin of a buffer changes the
//! shared refcount, and only its last unpin; every pin in between touches this backend's memory
//! alone.
//!
//! Eight entries in an array searched linearly (one cache line of `(buffer, count)` pairs, like
//! `REFCOUNT_ARRAY_ENTRIES`), plus an overflow hash map; when the array is full a clock picks an
//! entry to move to the map, so recently used buffers stay in the array.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

/// Entries in the array part (`REFCOUNT_ARRAY_ENTRIES`).
pub(crate) const REFCOUNT_ARRAY_ENTRIES: usize = 8;
const FREE: u32 = u32::MAX;

#[derive(Debug)]
pub(crate) struct PrivateRefCount {
    ids: [Cell<u32>; REFCOUNT_ARRAY_ENTRIES],
    counts: [Cell<u32>; REFCOUNT_ARRAY_ENTRIES],
    overflow: RefCell<HashMap<u32, u32>>,
    overflowed: Cell<usize>,
    clock: Cell<usize>,
}

impl Default for PrivateRefCount {
    fn default() -> Self {
        PrivateRefCount {
            ids: std::array::from_fn(|_| Cell::new(FREE)),
            counts: std::array::from_fn(|_| Cell::new(0)),
            overflow: RefCell::new(HashMap::new()),
            overflowed: Cell::new(0),
            clock: Cell::new(0),
        }
    }
}

impl PrivateRefCount {
    #[inline]
    fn slot(&self, id: u32) -> Option<usize> {
        self.ids.iter().position(|c| c.get() == id)
    }

    /// This backend's pin count of buffer `id` (`GetPrivateRefCount`).
    #[inline]
    pub(crate) fn get(&self, id: u32) -> u32 {
        if let Some(i) = self.slot(id) {
            return self.counts[i].get();
        }
        if self.overflowed.get() > 0 {
            return self.overflow.borrow().get(&id).copied().unwrap_or(0);
        }
        0
    }

    /// Adds one pin of `id`; returns the new count (1 = first pin: the caller must pin the
    /// shared header).
    #[inline]
    pub(crate) fn incr(&self, id: u32) -> u32 {
        if let Some(i) = self.slot(id) {
            let c = self.counts[i].get() + 1;
            self.counts[i].set(c);
            return c;
        }
        if self.overflowed.get() > 0 {
            let mut map = self.overflow.borrow_mut();
            if let Some(c) = map.get_mut(&id) {
                *c += 1;
                return *c;
            }
        }
        let i = match self.slot(FREE) {
            Some(i) => i,
            None => {
                // Array full: move the clock's victim to the overflow map.
                let i = self.clock.get();
                self.clock.set((i + 1) % REFCOUNT_ARRAY_ENTRIES);
                self.overflow.borrow_mut().insert(self.ids[i].get(), self.counts[i].get());
                self.overflowed.set(self.overflowed.get() + 1);
                i
            }
        };
        self.ids[i].set(id);
        self.counts[i].set(1);
        1
    }

    /// Removes one pin of `id`; returns the new count (0 = last pin: the caller must unpin the
    /// shared header).
    ///
    /// # Panics
    /// If this backend does not hold a pin on `id`.
    #[inline]
    pub(crate) fn decr(&self, id: u32) -> u32 {
        if let Some(i) = self.slot(id) {
            let c = self.counts[i].get() - 1;
            self.counts[i].set(c);
            if c == 0 {
                self.ids[i].set(FREE);
            }
            return c;
        }
        let mut map = self.overflow.borrow_mut();
        let c = map.get_mut(&id).unwrap_or_else(|| panic!("buffer {id} is not pinned by this backend"));
        *c -= 1;
        let c = *c;
        if c == 0 {
            map.remove(&id);
            self.overflowed.set(self.overflowed.get() - 1);
        }
        c
    }

    /// Every `(buffer id, count)` held.
    pub(crate) fn all(&self) -> Vec<(u32, u32)> {
        let mut v: Vec<(u32, u32)> =
            (0..REFCOUNT_ARRAY_ENTRIES).filter_map(|i| self.array_entry(i)).collect();
        v.extend(self.overflow_entries());
        v
    }

    /// The `(buffer id, count)` in array slot `i` (`0..REFCOUNT_ARRAY_ENTRIES`), if in use.
    #[inline]
    pub(crate) fn array_entry(&self, i: usize) -> Option<(u32, u32)> {
        let id = self.ids[i].get();
        (id != FREE).then(|| (id, self.counts[i].get()))
    }

    /// The `(buffer id, count)` entries that overflowed the array (usually none; then this
    /// does not allocate).
    pub(crate) fn overflow_entries(&self) -> Vec<(u32, u32)> {
        if self.overflowed.get() == 0 {
            return Vec::new();
        }
        self.overflow.borrow().iter().map(|(k, c)| (*k, *c)).collect()
    }
}

/// Content locks held inline before spilling to the vector (PostgreSQL's `held_lwlocks` is a
/// fixed array of `MAX_SIMUL_LWLOCKS`; a backend rarely holds more than two buffer locks).
const HELD_INLINE: usize = 8;

/// The buffers whose content lock this backend holds (`held_lwlocks` for buffer locks): to
/// refuse taking one twice (a self-deadlock) and releasing a pin while locked. Releases search
/// from the end, where the most recent usually is, as `LWLockRelease` does.
#[derive(Debug)]
pub(crate) struct HeldLocks {
    ids: [Cell<u32>; HELD_INLINE],
    len: Cell<usize>,
    more: RefCell<Vec<u32>>,
}

impl Default for HeldLocks {
    fn default() -> Self {
        HeldLocks {
            ids: std::array::from_fn(|_| Cell::new(FREE)),
            len: Cell::new(0),
            more: RefCell::new(Vec::new()),
        }
    }
}

impl HeldLocks {
    /// True if `id` is held.
    #[inline(always)]
    pub(crate) fn contains(&self, id: u32) -> bool {
        // Usually nothing is held (a pin is taken or dropped between locks).
        let n = self.len.get();
        n != 0 && self.contains_among(id, n)
    }

    fn contains_among(&self, id: u32, n: usize) -> bool {
        self.ids[..n.min(HELD_INLINE)].iter().any(|c| c.get() == id)
            || (n > HELD_INLINE && self.more.borrow().contains(&id))
    }

    /// Records `id` as held.
    #[inline]
    pub(crate) fn push(&self, id: u32) {
        let n = self.len.get();
        if n < HELD_INLINE {
            self.ids[n].set(id);
        } else {
            self.more.borrow_mut().push(id);
        }
        self.len.set(n + 1);
    }

    /// Forgets `id`; no-op if it is not held.
    #[inline]
    pub(crate) fn remove(&self, id: u32) {
        let n = self.len.get();
        if n > HELD_INLINE {
            let mut more = self.more.borrow_mut();
            if let Some(i) = more.iter().rposition(|&x| x == id) {
                more.swap_remove(i);
            } else if let Some(i) = self.ids.iter().rposition(|c| c.get() == id) {
                // Keep the inline part full: refill the gap with a spilled entry.
                self.ids[i].set(more.pop().expect(
                    "n > HELD_INLINE, so the entries beyond the inline part are spilled into `more`",
                ));
            } else {
                return;
            }
            self.len.set(n - 1);
            return;
        }
        // Usually the last one taken (locks are mostly released in reverse order).
        if let Some(i) = self.ids[..n].iter().rposition(|c| c.get() == id) {
            self.ids[i].set(self.ids[n - 1].get());
            self.len.set(n - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a plain vector: pushes and removes in any order keep the same membership,
        /// through spilling past the inline part and back.
        #[test]
        fn held_locks_match_a_vec(ops in proptest::collection::vec((0u32..24, any::<bool>()), 1..300)) {
            let h = HeldLocks::default();
            let mut oracle: Vec<u32> = Vec::new();
            for (id, push) in ops {
                if push && !oracle.contains(&id) {
                    h.push(id);
                    oracle.push(id);
                } else if let Some(i) = oracle.iter().rposition(|&x| x == id) {
                    h.remove(id);
                    oracle.remove(i);
                }
                for k in 0..24 {
                    prop_assert_eq!(h.contains(k), oracle.contains(&k));
                }
            }
        }

        /// Against a plain map: any sequence of pins and unpins gives the same counts, through
        /// array overflow and back.
        #[test]
        fn matches_a_map(ops in proptest::collection::vec((0u32..20, any::<bool>()), 1..400)) {
            let p = PrivateRefCount::default();
            let mut oracle: HashMap<u32, u32> = HashMap::new();
            for (id, pin) in ops {
                let cur = oracle.get(&id).copied().unwrap_or(0);
                if pin || cur == 0 {
                    prop_assert_eq!(p.incr(id), cur + 1);
                    oracle.insert(id, cur + 1);
                } else {
                    prop_assert_eq!(p.decr(id), cur - 1);
                    if cur == 1 { oracle.remove(&id); } else { oracle.insert(id, cur - 1); }
                }
                for k in 0..20 {
                    prop_assert_eq!(p.get(k), oracle.get(&k).copied().unwrap_or(0));
                }
            }
            let mut all = p.all();
            all.sort_unstable();
            let mut want: Vec<_> = oracle.into_iter().collect();
            want.sort_unstable();
            prop_assert_eq!(all, want);
        }
    }
}
