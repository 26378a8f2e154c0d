//! The buffer mapping table: tag → buffer id (`buf_table.c`), in two designs.
//!
//! * [`MappingKind::Partitioned`]: the hash table split into N partitions (16 in 9.2-9.4, 128
//!   from 9.5), each under its own `BufferMapping` LWLock. A look-up holds its partition shared
//!   and pins the buffer before releasing it; re-tagging a buffer holds the old and the new
//!   tag's partitions exclusive, lower-numbered first (`BufferAlloc`, `bufmgr.c`). The entries
//!   live in a [`BucketTable`] (one cache line per look-up) whose every bucket belongs to one
//!   partition.
//! * [`MappingKind::DashMap`]: a `dashmap::DashMap` (sharded `RwLock`s) to compare with. Its
//!   shard locks cannot be held across the re-tagging steps, so a look-up re-checks the buffer's
//!   tag after pinning it and retries on a mismatch (the pin freezes the tag).

use std::fmt;
use std::str::FromStr;

use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use lockstack_common::TrancheId;
use lockstack_lwlock::{LwLock, LwLockImpl, LwLockKind, LwLockMode};

use crate::buckets::BucketTable;
use crate::tag::{BufferTag, HashedTag, TagHash};

/// Which mapping table a pool uses.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MappingKind {
    /// A partitioned hash table with `partitions` LWLock-protected partitions (a power of two,
    /// 1..=1024; PostgreSQL: 16 until 9.4, 128 from 9.5).
    Partitioned {
        /// Number of partitions.
        partitions: usize,
    },
    /// A `dashmap::DashMap` with its default sharding.
    DashMap,
}

impl Default for MappingKind {
    /// 128 partitions (PostgreSQL 9.5+).
    fn default() -> Self {
        MappingKind::Partitioned { partitions: 128 }
    }
}

impl MappingKind {
    /// PostgreSQL 9.2-9.4's 16 partitions.
    pub const PARTITIONS_16: MappingKind = MappingKind::Partitioned { partitions: 16 };
    /// PostgreSQL 9.5+'s 128 partitions.
    pub const PARTITIONS_128: MappingKind = MappingKind::Partitioned { partitions: 128 };

    /// Name on command lines and in reports: `partitions-16`, `partitions-128`, `dashmap`.
    pub fn name(self) -> String {
        match self {
            MappingKind::Partitioned { partitions } => format!("partitions-{partitions}"),
            MappingKind::DashMap => "dashmap".into(),
        }
    }

    /// Checks the partition count.
    ///
    /// # Errors
    /// [`crate::error::BufferError::Config`] when the count is not a power of two in 1..=1024.
    pub fn validate(self) -> Result<(), crate::error::BufferError> {
        match self {
            MappingKind::Partitioned { partitions }
                if !(partitions.is_power_of_two() && partitions <= 1024) =>
            {
                Err(crate::error::BufferError::Config(format!(
                    "mapping partitions must be a power of two in 1..=1024, got {partitions}"
                )))
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for MappingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

impl FromStr for MappingKind {
    type Err = String;
    /// Parses `partitions-N` (or just `N`) and `dashmap`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "dashmap" {
            return Ok(MappingKind::DashMap);
        }
        let n = s.strip_prefix("partitions-").unwrap_or(s);
        let partitions: usize = n.parse().map_err(|_| {
            format!("unknown mapping table '{s}' (valid: partitions-16, partitions-128, dashmap)")
        })?;
        let k = MappingKind::Partitioned { partitions };
        k.validate().map_err(|e| e.to_string())?;
        Ok(k)
    }
}

/// One partition of the partitioned table: its `BufferMapping` LWLock. The entries live in the
/// shared [`BucketTable`], in buckets that belong to this partition.
pub(crate) struct Partition {
    pub(crate) lock: LwLock,
}

pub(crate) enum BufTable {
    Partitioned { parts: Box<[CachePadded<Partition>]>, mask: u32, buckets: BucketTable },
    Dash(DashMap<HashedTag, u32, TagHash>),
}

impl fmt::Debug for BufTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BufTable::Partitioned { parts, .. } => write!(f, "BufTable(partitions = {})", parts.len()),
            BufTable::Dash(_) => f.write_str("BufTable(dashmap)"),
        }
    }
}

impl BufTable {
    pub(crate) fn new(kind: MappingKind, nbuffers: usize, lwlock: LwLockKind) -> BufTable {
        match kind {
            MappingKind::Partitioned { partitions } => {
                // PostgreSQL sizes the table for `NBuffers + NUM_BUFFER_PARTITIONS` entries: every
                // buffer, plus one re-tag in flight per partition (the new entry goes in before
                // the old one is deleted).
                let parts = (0..partitions)
                    .map(|i| {
                        CachePadded::new(Partition {
                            lock: LwLock::new(lwlock, TrancheId::BUFFER_MAPPING, i as u32),
                        })
                    })
                    .collect();
                BufTable::Partitioned {
                    parts,
                    mask: partitions as u32 - 1,
                    buckets: BucketTable::new(partitions, nbuffers + partitions),
                }
            }
            MappingKind::DashMap => {
                BufTable::Dash(DashMap::with_capacity_and_hasher(nbuffers + nbuffers / 4, TagHash))
            }
        }
    }

    /// Names each partition's `BufferMapping` LWLock (`"BufferMapping 17"`) for a simulation.
    pub(crate) fn name_lines(&self) {
        if let BufTable::Partitioned { parts, .. } = self {
            for p in parts.iter() {
                p.lock.name_line();
            }
        }
    }

    /// True when a look-up's result must be re-checked against the buffer's tag after pinning.
    #[inline]
    pub(crate) fn validates(&self) -> bool {
        matches!(self, BufTable::Dash(_))
    }

    #[inline]
    fn partition_of(mask: u32, h: &HashedTag) -> usize {
        (h.hash & mask) as usize
    }

    /// Looks `h` up and, if found, calls `pin(id)` while the entry cannot be removed (partition
    /// lock held shared, or dashmap shard read lock) (`BufTableLookup` + `PinBuffer`).
    #[inline]
    pub(crate) fn lookup_pin<R>(&self, h: &HashedTag, pin: impl FnOnce(u32) -> R) -> Option<R> {
        match self {
            BufTable::Partitioned { parts, mask, buckets } => {
                let p = &parts[Self::partition_of(*mask, h)];
                buckets.prefetch_home(h);
                let held = p.lock.acquire(LwLockMode::Shared);
                let cost = lockstack_common::sync::hook::pg_region("bufmgr.mapping_lookup");
                // SAFETY: `h`'s partition lock is held shared.
                let found = unsafe { buckets.get(h) };
                drop(cost);
                let r = found.map(pin);
                p.lock.release(held);
                r
            }
            BufTable::Dash(m) => {
                let cost = lockstack_common::sync::hook::pg_region("bufmgr.mapping_lookup");
                let g = m.get(h);
                drop(cost);
                let g = g?;
                Some(pin(*g.value()))
            }
        }
    }

    /// Runs `f` with the mapping locked for re-tagging a buffer from `old` (if it had a valid
    /// tag) to `new`: both partitions exclusive, lower-numbered first (one lock if they are the
    /// same partition). For the dashmap table nothing is held across `f`; each operation locks
    /// its own shard.
    pub(crate) fn retag<R>(
        &self,
        old: Option<&HashedTag>,
        new: &HashedTag,
        f: impl FnOnce(&mut RetagCtx<'_>) -> R,
    ) -> R {
        match self {
            BufTable::Partitioned { parts, mask, .. } => {
                let np = Self::partition_of(*mask, new);
                let op = old.map(|o| Self::partition_of(*mask, o));
                let (first, second) = match op {
                    Some(o) if o < np => (o, Some(np)),
                    Some(o) if o > np => (np, Some(o)),
                    _ => (np, None),
                };
                let h1 = parts[first].lock.acquire(LwLockMode::Exclusive);
                let h2 = second.map(|s| parts[s].lock.acquire(LwLockMode::Exclusive));
                let mut ctx = RetagCtx { table: self, locked: [Some(first), second] };
                let r = f(&mut ctx);
                if let (Some(s), Some(h)) = (second, h2) {
                    parts[s].lock.release(h);
                }
                parts[first].lock.release(h1);
                r
            }
            BufTable::Dash(_) => {
                let mut ctx = RetagCtx { table: self, locked: [None, None] };
                f(&mut ctx)
            }
        }
    }

    /// Every (tag, buffer id) entry. Only meaningful when no backend is changing the mapping.
    pub(crate) fn entries(&self) -> Vec<(BufferTag, u32)> {
        match self {
            BufTable::Partitioned { parts, buckets, .. } => {
                let mut v = Vec::new();
                for (i, p) in parts.iter().enumerate() {
                    let held = p.lock.acquire(LwLockMode::Shared);
                    // SAFETY: partition `i`'s lock is held shared.
                    v.extend(unsafe { buckets.entries_of(i) });
                    p.lock.release(held);
                }
                v
            }
            BufTable::Dash(m) => m.iter().map(|e| (e.key().tag, *e.value())).collect(),
        }
    }
}

/// The mapping operations allowed while re-tagging ([`BufTable::retag`]).
pub(crate) struct RetagCtx<'a> {
    table: &'a BufTable,
    locked: [Option<usize>; 2],
}

impl RetagCtx<'_> {
    /// The bucket table, after checking that `h`'s partition is one `retag` locked
    /// exclusively: the caller may then use the table's exclusive operations on `h`.
    fn locked_buckets(&self, h: &HashedTag) -> &BucketTable {
        match self.table {
            BufTable::Partitioned { mask, buckets, .. } => {
                let p = BufTable::partition_of(*mask, h);
                assert!(self.locked.contains(&Some(p)), "mapping partition {p} not locked for re-tagging");
                buckets
            }
            BufTable::Dash(_) => unreachable!("dashmap has no locked partitions"),
        }
    }

    /// Inserts `h → id` unless `h` is present (`BufTableInsert`); if it is, calls
    /// `on_existing(existing_id)` while the entry is still locked (to pin it) and returns
    /// `Err(existing_id)`.
    pub(crate) fn insert(
        &mut self,
        h: &HashedTag,
        id: u32,
        on_existing: impl FnOnce(u32),
    ) -> Result<(), u32> {
        if let BufTable::Dash(m) = self.table {
            return match m.entry(*h) {
                dashmap::Entry::Occupied(o) => {
                    let e = *o.get();
                    on_existing(e);
                    Err(e)
                }
                dashmap::Entry::Vacant(v) => {
                    v.insert(id);
                    Ok(())
                }
            };
        }
        let b = self.locked_buckets(h);
        // SAFETY: `retag` holds `h`'s partition exclusively for the life of this context
        // (`locked_buckets` checked it), and `&mut self` keeps us the only user of the context.
        match unsafe { b.get(h) } {
            Some(e) => {
                on_existing(e);
                Err(e)
            }
            None => {
                // SAFETY: as above.
                unsafe { b.insert(h, id) };
                Ok(())
            }
        }
    }

    /// Removes `h` if it maps to `id` (`BufTableDelete`).
    pub(crate) fn delete(&mut self, h: &HashedTag, id: u32) {
        if let BufTable::Dash(m) = self.table {
            m.remove_if(h, |_, v| *v == id);
            return;
        }
        let b = self.locked_buckets(h);
        // SAFETY: as in `insert`: `h`'s partition is held exclusively.
        unsafe { b.remove(h, id) };
    }
}
