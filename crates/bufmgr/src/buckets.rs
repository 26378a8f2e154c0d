//! The storage of the partitioned buffer mapping table: an open-addressing hash table of
//! 64-byte buckets, each bucket owned by one partition.
//!
//! PostgreSQL's `buf_table.c` keeps the mapping in a shared `dynahash` table: a directory of
//! bucket segments, each bucket a chain of separately allocated elements, so a look-up follows
//! two or three pointers, each a likely cache miss when the pool is large and the access
//! random. The partitioning (which partition lock protects an entry) is what the lock stack is
//! about; how the entries of a partition are stored is not, so lockstack stores them to cost one
//! cache line per look-up:
//!
//! * The table is one array of [`BUCKET_SLOTS`]-entry buckets, each exactly one 64-byte cache
//!   line, sized at creation for the most entries the pool can hold at once (every buffer, plus
//!   one in-flight re-tag per partition) at an average of at most 2.5 entries per bucket.
//! * An entry's home bucket is `hash & (buckets - 1)`. Its partition is `hash & (partitions -
//!   1)`; as both counts are powers of two and there are at least as many buckets as
//!   partitions, the home bucket's index has the same low bits, so every bucket belongs to
//!   exactly one partition, and holding that partition's lock covers it.
//! * A full home bucket overflows to the partition's next bucket (`+ partitions`, wrapping), and
//!   each bucket counts the entries that passed it (F14's "outbound overflow" count), so a
//!   look-up stops at the first bucket with none: with the default sizing almost every look-up
//!   reads its home bucket only. When a partition's buckets are all full (only possible with
//!   tiny pools and unlucky hashing), entries go to the partition's spill list.
//!
//! Not thread-safe by itself: [`crate::table::BufTable`] calls it with the owning partition's
//! LWLock held (shared to read, exclusive to change), and documents why that suffices.

use std::cell::UnsafeCell;

use lockstack_common::sync::hook::{Access, touch_slice, touch_val};

use crate::tag::{BufferTag, ForkNumber, HashedTag};

/// Entries per bucket: five 12-byte entries and a 4-byte overflow count fill a cache line.
pub(crate) const BUCKET_SLOTS: usize = 5;

/// The `fork_id` of an empty slot (no fork is numbered 255).
const EMPTY: u32 = u32::MAX;

/// Buffer ids must fit below the fork's bits in `fork_id`.
const ID_BITS: u32 = 24;

/// One cache line: up to [`BUCKET_SLOTS`] entries. Slot `i` maps the tag (`rel_block[i]`:
/// relation in the high 32 bits, block in the low; `fork_id[i] >> 24`: fork) to the buffer id
/// `fork_id[i] & 0xFF_FFFF`, or is empty (`fork_id[i] == EMPTY`).
#[repr(C, align(64))]
struct Bucket {
    rel_block: [u64; BUCKET_SLOTS],
    fork_id: [u32; BUCKET_SLOTS],
    /// Entries stored beyond this bucket whose probe passed it.
    overflow: u32,
}

impl Bucket {
    const fn empty() -> Bucket {
        Bucket { rel_block: [0; BUCKET_SLOTS], fork_id: [EMPTY; BUCKET_SLOTS], overflow: 0 }
    }

    #[inline]
    fn find(&self, rel_block: u64, fork: u32) -> Option<usize> {
        // An empty slot's fork bits (255) match no fork.
        (0..BUCKET_SLOTS).find(|&i| self.rel_block[i] == rel_block && self.fork_id[i] >> ID_BITS == fork)
    }

    fn free_slot(&self) -> Option<usize> {
        self.fork_id.iter().position(|&f| f == EMPTY)
    }
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);
const _: () = assert!(crate::buffer::MAX_BUFFERS <= 1 << ID_BITS);

#[inline]
fn key_of(tag: &BufferTag) -> (u64, u32) {
    ((u64::from(tag.rel.0) << 32) | u64::from(tag.block.0), tag.fork as u32)
}

/// A partition's spill list: entries that found every bucket of the partition full.
type Spill = Vec<(HashedTag, u32)>;

/// The bucket array and the per-partition spill lists. See the module documentation.
pub(crate) struct BucketTable {
    buckets: Box<[UnsafeCell<Bucket>]>,
    /// Per partition: its spill list.
    spill: Box<[UnsafeCell<Spill>]>,
    bucket_mask: u32,
    partitions: u32,
}

// SAFETY: every access to the cells goes through `BucketTable`'s unsafe methods, whose contract
// is that the caller holds the owning partition's lock (shared for `get` and `entries_of`,
// exclusive for `insert` and `remove`); a bucket and a spill list belong to exactly one
// partition, so that lock serialises writers against every other access to them, like a
// `RwLock` per partition.
unsafe impl Sync for BucketTable {}

impl BucketTable {
    /// A table for up to `capacity` entries spread over `partitions` partitions (a power of
    /// two).
    ///
    /// # Panics
    /// If `partitions` is not a power of two.
    pub(crate) fn new(partitions: usize, capacity: usize) -> BucketTable {
        assert!(partitions.is_power_of_two(), "partitions must be a power of two");
        // At most 2.5 entries per bucket on average: overflow stays rare (Poisson(2.5) puts
        // more than five keys in one bucket about 4% of the time; the usual load is lower).
        let want = (capacity * 2).div_ceil(BUCKET_SLOTS).max(1);
        let n = want.next_power_of_two().max(partitions);
        BucketTable {
            buckets: (0..n).map(|_| UnsafeCell::new(Bucket::empty())).collect(),
            spill: (0..partitions).map(|_| UnsafeCell::new(Vec::new())).collect(),
            bucket_mask: n as u32 - 1,
            partitions: partitions as u32,
        }
    }

    /// Buckets per partition: the length of a full probe.
    #[inline]
    fn chain_len(&self) -> u32 {
        (self.bucket_mask + 1) / self.partitions
    }

    /// The `k`-th bucket of `hash`'s probe (0 = its home).
    #[inline]
    fn bucket_index(&self, hash: u32, k: u32) -> usize {
        (hash.wrapping_add(k.wrapping_mul(self.partitions)) & self.bucket_mask) as usize
    }

    /// Starts loading `h`'s home bucket into the CPU caches (a prefetch hint, which reads
    /// nothing the program sees and so needs no lock): called before taking the partition lock,
    /// so that the miss on the bucket overlaps the one on the lock instead of following it.
    #[inline]
    pub(crate) fn prefetch_home(&self, h: &HashedTag) {
        crate::prefetch::prefetch_line(
            self.buckets[self.bucket_index(h.hash, 0)].get().cast_const().cast::<u8>(),
        );
    }

    /// The buffer `h` maps to.
    ///
    /// # Safety
    /// The caller holds `h`'s partition lock, shared or exclusive.
    #[inline]
    pub(crate) unsafe fn get(&self, h: &HashedTag) -> Option<u32> {
        let (rb, fork) = key_of(&h.tag);
        for k in 0..self.chain_len() {
            // SAFETY: bucket `k` of `h`'s probe belongs to `h`'s partition, whose lock the
            // caller holds; writers hold it exclusively, so nobody writes it meanwhile.
            let b = unsafe { &*self.buckets[self.bucket_index(h.hash, k)].get() };
            touch_val(b, Access::Read);
            if let Some(i) = b.find(rb, fork) {
                return Some(b.fork_id[i] & ((1 << ID_BITS) - 1));
            }
            if b.overflow == 0 {
                return None;
            }
        }
        // SAFETY: the spill list of `h`'s partition, under that partition's lock as above.
        let spill = unsafe { &*self.spill[(h.hash & (self.partitions - 1)) as usize].get() };
        touch_slice(spill, Access::Read);
        spill.iter().find(|(t, _)| t.tag == h.tag).map(|&(_, id)| id)
    }

    /// Adds `h → id`; `h` must not be present.
    ///
    /// # Safety
    /// The caller holds `h`'s partition lock exclusively.
    pub(crate) unsafe fn insert(&self, h: &HashedTag, id: u32) {
        debug_assert!(id < 1 << ID_BITS);
        let (rb, fork) = key_of(&h.tag);
        for k in 0..self.chain_len() {
            // SAFETY: the caller holds this bucket's partition exclusively (see `get`), so this
            // is the only reference to it.
            let b = unsafe { &mut *self.buckets[self.bucket_index(h.hash, k)].get() };
            touch_val(b, Access::Write);
            if let Some(i) = b.free_slot() {
                b.rel_block[i] = rb;
                b.fork_id[i] = (fork << ID_BITS) | id;
                return;
            }
            b.overflow += 1;
        }
        // SAFETY: as above, for the partition's spill list.
        let spill = unsafe { &mut *self.spill[(h.hash & (self.partitions - 1)) as usize].get() };
        spill.push((*h, id));
        touch_slice(&spill[spill.len() - 1..], Access::Write);
    }

    /// Removes `h` if it maps to `id`; true if it did.
    ///
    /// # Safety
    /// The caller holds `h`'s partition lock exclusively.
    pub(crate) unsafe fn remove(&self, h: &HashedTag, id: u32) -> bool {
        let (rb, fork) = key_of(&h.tag);
        let chain = self.chain_len();
        let mut at = None;
        for k in 0..chain {
            // SAFETY: exclusive partition lock, as in `insert`.
            let b = unsafe { &mut *self.buckets[self.bucket_index(h.hash, k)].get() };
            touch_val(b, Access::Write);
            if let Some(i) = b.find(rb, fork) {
                if b.fork_id[i] & ((1 << ID_BITS) - 1) != id {
                    return false;
                }
                b.fork_id[i] = EMPTY;
                at = Some(k);
                break;
            }
            if b.overflow == 0 {
                return false;
            }
        }
        if at.is_none() {
            // SAFETY: exclusive partition lock, for its spill list.
            let spill = unsafe { &mut *self.spill[(h.hash & (self.partitions - 1)) as usize].get() };
            touch_slice(spill, Access::Write);
            let Some(pos) = spill.iter().position(|(t, i)| t.tag == h.tag && *i == id) else {
                return false;
            };
            spill.swap_remove(pos);
        }
        // The entry passed the buckets before it: they no longer carry it.
        for k in 0..at.unwrap_or(chain) {
            // SAFETY: exclusive partition lock, as above.
            let b = unsafe { &mut *self.buckets[self.bucket_index(h.hash, k)].get() };
            touch_val(b, Access::Write);
            b.overflow -= 1;
        }
        true
    }

    /// Every entry of partition `p`.
    ///
    /// # Safety
    /// The caller holds partition `p`'s lock, shared or exclusive.
    pub(crate) unsafe fn entries_of(&self, p: usize) -> Vec<(BufferTag, u32)> {
        let mut v = Vec::new();
        for k in 0..self.chain_len() {
            // SAFETY: bucket `p + k * partitions` belongs to partition `p`, locked by the caller.
            let b = unsafe { &*self.buckets[self.bucket_index(p as u32, k)].get() };
            touch_val(b, Access::Read);
            for i in 0..BUCKET_SLOTS {
                let f = b.fork_id[i];
                if f != EMPTY {
                    let fork = ForkNumber::from_u8((f >> ID_BITS) as u8).unwrap_or(ForkNumber::Main);
                    let tag = BufferTag::new(
                        lockstack_common::Oid((b.rel_block[i] >> 32) as u32),
                        fork,
                        lockstack_common::BlockNumber(b.rel_block[i] as u32),
                    );
                    v.push((tag, f & ((1 << ID_BITS) - 1)));
                }
            }
        }
        // SAFETY: partition `p`'s spill list, under its lock.
        v.extend(unsafe { &*self.spill[p].get() }.iter().map(|(t, id)| (t.tag, *id)));
        v
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lockstack_common::{BlockNumber, Oid};
    use std::collections::HashMap;

    fn ht(rel: u32, fork: ForkNumber, block: u32) -> HashedTag {
        HashedTag::new(BufferTag::new(Oid(rel), fork, BlockNumber(block)))
    }

    /// Random inserts and removes against a `HashMap`, on tables small enough that chains
    /// overflow and partitions spill.
    #[test]
    fn matches_a_hash_map_through_overflow_and_spill() {
        use rand::{RngExt, SeedableRng};
        for (partitions, capacity) in [(1, 4), (4, 8), (16, 40), (128, 300), (2, 1000)] {
            let t = BucketTable::new(partitions, capacity);
            let mut oracle: HashMap<BufferTag, u32> = HashMap::new();
            let mut rng = rand::rngs::StdRng::seed_from_u64(partitions as u64 * 7 + capacity as u64);
            let mut spilled = false;
            for step in 0..20_000u32 {
                let fork = ForkNumber::ALL[rng.random_range(0..3)];
                let h = ht(16384 + rng.random_range(0..3), fork, rng.random_range(0..(capacity as u32 * 2)));
                // SAFETY: single-threaded test: nobody else touches the table.
                unsafe {
                    match oracle.get(&h.tag).copied() {
                        Some(id) => {
                            assert_eq!(t.get(&h), Some(id));
                            if rng.random_bool(0.5) {
                                assert!(!t.remove(&h, id + 1), "removing with the wrong id must fail");
                                assert!(t.remove(&h, id));
                                oracle.remove(&h.tag);
                                assert_eq!(t.get(&h), None);
                            }
                        }
                        None => {
                            assert_eq!(t.get(&h), None);
                            assert!(!t.remove(&h, 0));
                            // Beyond the sizing too: the table must stay exact (it spills).
                            if oracle.len() < capacity * 3 {
                                let id = step % (1 << 21);
                                t.insert(&h, id);
                                oracle.insert(h.tag, id);
                                assert_eq!(t.get(&h), Some(id));
                            }
                        }
                    }
                    spilled |= (0..partitions).any(|p| !(*t.spill[p].get()).is_empty());
                }
            }
            let mut all: Vec<(BufferTag, u32)> =
                // SAFETY: as above.
                (0..partitions).flat_map(|p| unsafe { t.entries_of(p) }).collect();
            all.sort();
            let mut want: Vec<(BufferTag, u32)> = oracle.into_iter().collect();
            want.sort();
            assert_eq!(all, want, "partitions {partitions} capacity {capacity}");
            if partitions == 1 {
                assert!(spilled, "the one-bucket table must have spilled");
            }
            // Emptied, the table has no overflow left and no spill.
            for (tag, id) in all {
                // SAFETY: as above.
                assert!(unsafe { t.remove(&HashedTag::new(tag), id) });
            }
            for b in t.buckets.iter() {
                // SAFETY: as above.
                let b = unsafe { &*b.get() };
                assert_eq!(b.overflow, 0);
                assert!(b.fork_id.iter().all(|&f| f == EMPTY));
            }
            // SAFETY: as above.
            assert!((0..partitions).all(|p| unsafe { (*t.spill[p].get()).is_empty() }));
        }
    }

    #[test]
    fn every_bucket_belongs_to_its_hash_partition() {
        let t = BucketTable::new(128, 10_000);
        for b in 0..50_000u32 {
            let h = ht(16384, ForkNumber::Main, b);
            for k in 0..t.chain_len() {
                assert_eq!(t.bucket_index(h.hash, k) as u32 & 127, h.hash & 127);
            }
        }
    }
}
