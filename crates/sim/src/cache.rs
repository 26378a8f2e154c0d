//! Capacity-limited caches: a set-associative LRU tag store per core (its private cache) and
//! per last-level-cache group, over the 64-byte line numbers the simulated code touches.
//!
//! The tag stores only decide *which* line a fill evicts; whether a core holds a line is the
//! coherence state's ([`crate::machine::Lines`]), which the machine updates for each
//! eviction. A tag may outlive the copy it stood for (another core's write invalidated it):
//! it then occupies its way until it ages out, as an invalid way would, and finding it again
//! only refreshes its place. A line's set is its number modulo the number of sets (the
//! addresses are the host's virtual ones; real caches index physical addresses, and Intel's
//! LLC hashes them over slices: neither is modelled).

/// One set-associative cache's tags with LRU replacement. Each set keeps its ways in
/// most-recently-used-first order; a tag is the line number plus one (0: an empty way).
#[derive(Debug, Clone)]
pub(crate) struct SetLru {
    ways: usize,
    sets: u64,
    /// `sets - 1` when `sets` is a power of two (a mask replaces the division), else 0.
    mask: u64,
    tags: Vec<u64>,
}

/// What [`SetLru::access`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The line's tag was there (now the most recently used of its set).
    Hit,
    /// It was not: it is now the most recently used of its set, and the least recently used
    /// line of the set, if the set was full, was evicted.
    Miss(Option<u64>),
}

impl SetLru {
    /// A cache of `lines` lines in sets of `ways` (`ways` divides `lines`, both at least 1: the
    /// profile's validation checks it). The tag array is zeroed memory, so the pages of sets
    /// never used are never touched.
    pub(crate) fn new(lines: u64, ways: u32) -> SetLru {
        let ways = ways.max(1) as usize;
        let sets = (lines / ways as u64).max(1);
        let mask = if sets.is_power_of_two() { sets - 1 } else { 0 };
        SetLru { ways, sets, mask, tags: vec![0; sets as usize * ways] }
    }

    #[inline]
    fn set(&self, key: u64) -> std::ops::Range<usize> {
        let index = if self.mask != 0 || self.sets == 1 { key & self.mask } else { key % self.sets };
        let base = index as usize * self.ways;
        base..base + self.ways
    }

    /// Uses `line`, in the set `key` selects (`key` modulo the sets: the line's physical
    /// line number, [`Caches::key`]): a hit moves it to the front of its set; a miss inserts it
    /// there and pushes out the set's last line when the set is full.
    #[inline]
    pub(crate) fn access(&mut self, line: u64, key: u64) -> Lookup {
        let tag = line + 1;
        let range = self.set(key);
        let set = &mut self.tags[range];
        if set[0] == tag {
            return Lookup::Hit;
        }
        match set.iter().position(|&t| t == tag) {
            Some(i) => {
                set[..=i].rotate_right(1);
                Lookup::Hit
            }
            None => {
                let last = set[self.ways - 1];
                set.rotate_right(1);
                set[0] = tag;
                Lookup::Miss(last.checked_sub(1))
            }
        }
    }

    /// Whether `line`'s tag is in the set `key` selects (no change to the LRU order).
    #[cfg(test)]
    pub(crate) fn contains(&self, line: u64, key: u64) -> bool {
        self.tags[self.set(key)].contains(&(line + 1))
    }

    /// Drops `line`'s tag from the set `key` selects, if it is there (the way becomes empty).
    pub(crate) fn remove(&mut self, line: u64, key: u64) {
        let range = self.set(key);
        if let Some(t) = self.tags[range].iter_mut().find(|t| **t == line + 1) {
            *t = 0;
        }
    }
}

/// Lines of each core's L1 filter ([`Caches::l1`]): 512 in 64 sets of 8 ways, a 32 KiB 8-way L1
/// data cache indexed by the address bits inside a 4 KiB page (assumed: the L1d of every
/// built-in profile's processor but POWER8's 64 KiB).
pub(crate) const L1_LINES: u64 = 512;

/// Ways of the L1 filter.
const L1_WAYS: u32 = 8;

/// Every cache of the machine: one private [`SetLru`] per core and one per LLC group, plus the
/// counts the statistics report.
#[derive(Debug, Clone)]
pub(crate) struct Caches {
    /// Per core, an L1 filter of [`L1_LINES`] lines indexed by the line's place in its 4 KiB
    /// page (the bits a virtually indexed L1 uses, which do not change from run to run): a
    /// line found here has its private-cache tag present, and the access does not refresh the
    /// private cache's LRU order, as an L1 hit does not reach the L2 on hardware; the private
    /// cache removes a line it evicts from the filter, so the filter stays inside it. It
    /// decides no hit or miss (the coherence state does) and saves the private cache's
    /// look-up on the common path.
    pub(crate) l1: Vec<SetLru>,
    /// Each 4 KiB page's colour: the order in which the run first touched it. The private caches
    /// and LLCs index a line by its *physical* line number, colour x 64 + its place in the page
    /// ([`Caches::key`]), as a physically indexed cache does with pages the kernel hands out in
    /// order. Indexing by the virtual address would make the sets, and so the evictions, depend
    /// on where address-space randomisation put each mapping, and repeated runs would differ.
    pages: crate::units::LineMap<u64>,
    /// The page [`Caches::key`] looked up last and its colour (+1; 0: none), which saves the
    /// map look-up for consecutive lines of one page.
    last_page: (u64, u64),
    pub(crate) private: Vec<SetLru>,
    pub(crate) llc: Vec<SetLru>,
    /// An LLC hit, ps.
    pub(crate) llc_hit: u64,
    /// Lines pushed out of a private cache while the core still held them.
    pub(crate) private_evictions: u64,
    /// Lines pushed out of an LLC while it held them.
    pub(crate) llc_evictions: u64,
    /// Copies of cores taken away by an LLC eviction (inclusion).
    pub(crate) back_invalidations: u64,
}

impl Caches {
    /// The caches of `cores` cores in groups of `cores_per_llc`, sized by `sizes`.
    pub(crate) fn new(sizes: &crate::profile::CacheSizes, cores: u32, cores_per_llc: u32) -> Caches {
        let groups = cores / cores_per_llc.max(1);
        Caches {
            l1: (0..cores).map(|_| SetLru::new(L1_LINES, L1_WAYS)).collect(),
            pages: crate::units::LineMap::default(),
            last_page: (0, 0),
            private: (0..cores).map(|_| SetLru::new(sizes.private_lines(), sizes.private_ways)).collect(),
            llc: (0..groups).map(|_| SetLru::new(sizes.llc_lines(), sizes.llc_ways)).collect(),
            llc_hit: crate::units::ps(sizes.llc_hit_ns),
            private_evictions: 0,
            llc_evictions: 0,
            back_invalidations: 0,
        }
    }
}

impl Caches {
    /// The physical line number `line` is indexed by: its page's colour (given at the page's
    /// first touch, in order) times 64, plus its place in the page.
    pub(crate) fn key(&mut self, line: u64) -> u64 {
        let page = line >> 6;
        if self.last_page.1 != 0 && self.last_page.0 == page {
            return (self.last_page.1 - 1) << 6 | (line & 63);
        }
        let next = self.pages.len() as u64;
        let colour = *self.pages.entry(page).or_insert(next);
        self.last_page = (page, colour + 1);
        colour << 6 | (line & 63)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recently_used_way_of_a_set() {
        // One set of 4 ways.
        let mut c = SetLru::new(4, 4);
        for l in [10, 11, 12, 13] {
            assert_eq!(c.access(l, l), Lookup::Miss(None));
        }
        // 10 is the oldest; using it makes 11 the oldest.
        assert_eq!(c.access(10, 10), Lookup::Hit);
        assert_eq!(c.access(14, 14), Lookup::Miss(Some(11)));
        assert!(!c.contains(11, 11));
        assert_eq!(c.access(15, 15), Lookup::Miss(Some(12)));
        assert_eq!(c.access(16, 16), Lookup::Miss(Some(13)));
        assert_eq!(c.access(17, 17), Lookup::Miss(Some(10)));
        for l in [14, 15, 16, 17] {
            assert!(c.contains(l, l), "{l}");
        }
    }

    #[test]
    fn lines_map_to_sets_by_their_number() {
        // 4 sets of 2 ways: lines 0, 4, 8 share set 0; line 1 is in set 1 and never evicted by them.
        let mut c = SetLru::new(8, 2);
        assert_eq!(c.access(1, 1), Lookup::Miss(None));
        assert_eq!(c.access(0, 0), Lookup::Miss(None));
        assert_eq!(c.access(4, 4), Lookup::Miss(None));
        assert_eq!(c.access(8, 8), Lookup::Miss(Some(0)));
        assert_eq!(c.access(1, 1), Lookup::Hit);
    }

    #[test]
    fn a_working_set_that_fits_never_misses_again() {
        let mut c = SetLru::new(64, 8);
        for l in 0..64 {
            assert_eq!(c.access(l, l), Lookup::Miss(None));
        }
        for _ in 0..3 {
            for l in 0..64 {
                assert_eq!(c.access(l, l), Lookup::Hit, "{l}");
            }
        }
        // One line more than a set holds, cycled: LRU misses on every access.
        let mut c = SetLru::new(64, 8);
        let lines: Vec<u64> = (0..9).map(|k| k * 8).collect();
        for _ in 0..3 {
            for &l in &lines {
                assert!(matches!(c.access(l, l), Lookup::Miss(_)), "{l}");
            }
        }
    }
}
