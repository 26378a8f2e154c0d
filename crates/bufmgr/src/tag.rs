//! Buffer tags: which page of which relation fork a buffer holds.
//!
//! PostgreSQL's `BufferTag` (`src/include/storage/buf_internals.h`): the relation's file node
//! (tablespace, database, relation), a fork number and a block number. lockstack has one
//! database and no tablespaces, so the relation is a single [`Oid`].

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;

use lockstack_common::{BlockNumber, Oid};

/// A relation fork (`ForkNumber` in `src/include/common/relpath.h`, 8.4+): the main data, the
/// free space map, or the visibility map. Each fork is a separate file (`16384`, `16384_fsm`,
/// `16384_vm`) with its own block numbers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum ForkNumber {
    /// `MAIN_FORKNUM`: heap or index pages.
    Main = 0,
    /// `FSM_FORKNUM`: the free space map.
    Fsm = 1,
    /// `VISIBILITYMAP_FORKNUM`: the visibility map ([`crate::vm`]).
    VisibilityMap = 2,
}

impl ForkNumber {
    /// Every fork, in number order.
    pub const ALL: [ForkNumber; 3] = [ForkNumber::Main, ForkNumber::Fsm, ForkNumber::VisibilityMap];

    /// PostgreSQL's file-name suffix (`forkNames` in `relpath.c`): `main`, `fsm`, `vm`.
    pub fn name(self) -> &'static str {
        match self {
            ForkNumber::Main => "main",
            ForkNumber::Fsm => "fsm",
            ForkNumber::VisibilityMap => "vm",
        }
    }

    /// The fork with number `n` (0, 1, 2), if any.
    pub fn from_u8(n: u8) -> Option<ForkNumber> {
        ForkNumber::ALL.get(n as usize).copied()
    }
}

impl fmt::Display for ForkNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ForkNumber {
    type Err = String;

    /// Parses `main`, `fsm` or `vm`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ForkNumber::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| format!("unknown fork '{s}' (valid: main, fsm, vm)"))
    }
}

/// The identity of a page: relation, fork and block (`BufferTag`, `buf_internals.h`). It is the
/// key of the buffer mapping table.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferTag {
    /// The relation.
    pub rel: Oid,
    /// The fork within the relation.
    pub fork: ForkNumber,
    /// The block (8 KiB page) within the fork.
    pub block: BlockNumber,
}

impl BufferTag {
    /// The tag of block `block` of fork `fork` of `rel`.
    #[inline]
    pub const fn new(rel: Oid, fork: ForkNumber, block: BlockNumber) -> BufferTag {
        BufferTag { rel, fork, block }
    }

    /// The tag of a main-fork block.
    #[inline]
    pub const fn main(rel: Oid, block: u32) -> BufferTag {
        BufferTag { rel, fork: ForkNumber::Main, block: BlockNumber(block) }
    }

    /// A 32-bit hash of the tag (`BufTableHashCode`): it picks the mapping partition and is
    /// reused for the look-up inside the partition, so a tag is hashed once per access.
    #[inline]
    pub fn hash_code(&self) -> u32 {
        let k = (u64::from(self.rel.0) << 34) ^ (u64::from(self.fork as u8) << 32) ^ u64::from(self.block.0);
        // A 64-bit finaliser (splitmix64's), folded to 32 bits: cheap, and every input bit
        // reaches the low bits that pick the partition.
        let mut x = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        (x ^ (x >> 32)) as u32
    }

    /// Packs fork and block into one word (fork in the high 32 bits), the form the buffer
    /// descriptor stores.
    #[inline]
    pub(crate) fn fork_block(&self) -> u64 {
        (u64::from(self.fork as u8) << 32) | u64::from(self.block.0)
    }

    /// The inverse of [`fork_block`](Self::fork_block), with the relation.
    #[inline]
    pub(crate) fn from_parts(rel: u32, fork_block: u64) -> BufferTag {
        BufferTag {
            rel: Oid(rel),
            fork: ForkNumber::from_u8((fork_block >> 32) as u8).unwrap_or(ForkNumber::Main),
            block: BlockNumber(fork_block as u32),
        }
    }
}

impl fmt::Display for BufferTag {
    /// `rel 16384 fork main block 7`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rel {} fork {} block {}", self.rel, self.fork, self.block)
    }
}

/// A `Hasher` for maps keyed by [`BufferTag`] that feeds the tag's [`BufferTag::hash_code`]
/// through unchanged; used by the dashmap mapping table.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct TagHasher(u64);

impl Hasher for TagHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only reached for keys other than BufferTag (never, in this crate): a simple FNV-1a.
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Builds [`TagHasher`]s.
#[derive(Default, Clone, Copy, Debug)]
pub(crate) struct TagHash;

impl BuildHasher for TagHash {
    type Hasher = TagHasher;
    #[inline]
    fn build_hasher(&self) -> TagHasher {
        TagHasher(0)
    }
}

/// A map key that hashes as its tag's hash code (computed once, outside the lock).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct HashedTag {
    pub(crate) tag: BufferTag,
    pub(crate) hash: u32,
}

impl HashedTag {
    #[inline]
    pub(crate) fn new(tag: BufferTag) -> HashedTag {
        HashedTag { tag, hash: tag.hash_code() }
    }
}

impl std::hash::Hash for HashedTag {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Spread the 32-bit code over 64 bits for the dashmap table. Its shards' hashbrown maps
        // take a control byte from the top 7 bits and the bucket from the low bits; after a
        // plain multiply the low bits would depend on the code's low bits only. The rotation
        // gives the bucket index the product's high half, which every bit of the code reaches.
        state.write_u64(u64::from(self.hash).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_block_round_trips() {
        for fork in ForkNumber::ALL {
            let t = BufferTag::new(Oid(16384), fork, BlockNumber(123_456));
            assert_eq!(BufferTag::from_parts(t.rel.0, t.fork_block()), t);
            assert_eq!(fork.name().parse::<ForkNumber>().unwrap(), fork);
        }
        assert!("bogus".parse::<ForkNumber>().is_err());
    }

    #[test]
    fn hash_spreads_over_partitions() {
        let mut counts = [0u32; 16];
        for b in 0..16_000u32 {
            counts[(BufferTag::main(Oid(16384), b).hash_code() % 16) as usize] += 1;
        }
        // 1000 expected per partition; a broken hash piles them up.
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
    }
}
