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
        let mut v: Vec<(u32, u32)> = (0..REFCOUNT_ARRAY_ENTRIES)
            .filter(|&i| self.ids[i].get() != FREE)
            .map(|i| (self.ids[i].get(), self.counts[i].get()))
            .collect();
        v.extend(self.overflow.borrow().iter().map(|(k, c)| (*k, *c)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
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
