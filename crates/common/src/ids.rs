//! Identifiers used by every lockstack crate.
//!
//! Transaction ids follow PostgreSQL's `src/include/access/transam.h` and
//! `src/backend/access/transam/transam.c` (all releases since 8.0): a 32-bit counter that wraps
//! around, three reserved values below [`TransactionId::FIRST_NORMAL`], and "circular" ordering
//! in which each normal xid has 2^31 xids before it and 2^31 after it.

use std::cmp::Ordering;
use std::fmt;

/// Index of a backend (one client thread) in the per-backend arrays: `0..max_backends`.
///
/// PostgreSQL's `ProcNumber` (called `BackendId`, 1-based, before 17). Ours is 0-based because it
/// indexes Rust slices directly.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BackendId(pub u32);

impl BackendId {
    /// The id as a slice index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for BackendId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A catalog object id (relation, database, ...): PostgreSQL's `Oid`, 32 bits, 0 is invalid.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Oid(pub u32);

impl Oid {
    /// `InvalidOid`.
    pub const INVALID: Oid = Oid(0);
    /// First oid handed to user objects (`FirstNormalObjectId` in `transam.h`).
    pub const FIRST_NORMAL: Oid = Oid(16384);

    /// True unless this is [`Oid::INVALID`].
    #[inline]
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }
}

impl fmt::Display for Oid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A block (page) number inside one relation fork, in units of 8 KiB pages.
///
/// PostgreSQL's `BlockNumber` (`src/include/storage/block.h`): 32 bits, with
/// [`BlockNumber::INVALID`] = 0xFFFF_FFFF.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct BlockNumber(pub u32);

impl BlockNumber {
    /// `InvalidBlockNumber`.
    pub const INVALID: BlockNumber = BlockNumber(u32::MAX);

    /// True unless this is [`BlockNumber::INVALID`].
    #[inline]
    pub fn is_valid(self) -> bool {
        self.0 != u32::MAX
    }
}

impl fmt::Display for BlockNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A 32-bit transaction id with PostgreSQL's circular comparison.
///
/// Values 0, 1 and 2 are special ([`INVALID`](Self::INVALID),
/// [`BOOTSTRAP`](Self::BOOTSTRAP), [`FROZEN`](Self::FROZEN)); they compare as ordinary unsigned
/// numbers and precede every normal xid. Two normal xids compare by the sign of their 32-bit
/// difference, so `a.precedes(b)` holds when `b` is less than 2^31 xids ahead of `a`, also across
/// the 2^32 wraparound (`TransactionIdPrecedes` in `transam.c`).
///
/// `TransactionId` deliberately does not implement `Ord`: the circular order is not transitive
/// over the whole space, so it must not be used as a sort key across more than 2^31 xids.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct TransactionId(pub u32);

impl TransactionId {
    /// `InvalidTransactionId` (0).
    pub const INVALID: TransactionId = TransactionId(0);
    /// `BootstrapTransactionId` (1): rows created by initdb.
    pub const BOOTSTRAP: TransactionId = TransactionId(1);
    /// `FrozenTransactionId` (2): rows visible to every snapshot.
    pub const FROZEN: TransactionId = TransactionId(2);
    /// `FirstNormalTransactionId` (3).
    pub const FIRST_NORMAL: TransactionId = TransactionId(3);
    /// `MaxTransactionId` (2^32 - 1).
    pub const MAX: TransactionId = TransactionId(u32::MAX);

    /// True unless this is [`TransactionId::INVALID`].
    #[inline]
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }

    /// True for xids at or above [`TransactionId::FIRST_NORMAL`].
    #[inline]
    pub fn is_normal(self) -> bool {
        self.0 >= Self::FIRST_NORMAL.0
    }

    /// Circular comparison (`TransactionIdPrecedes` & co. in one call).
    ///
    /// If either xid is special the comparison is plain unsigned; otherwise it is the sign of the
    /// wrapping 32-bit difference.
    #[inline]
    pub fn circular_cmp(self, other: TransactionId) -> Ordering {
        if !self.is_normal() || !other.is_normal() {
            return self.0.cmp(&other.0);
        }
        (self.0.wrapping_sub(other.0) as i32).cmp(&0)
    }

    /// `TransactionIdPrecedes`: `self < other` in circular order.
    #[inline]
    pub fn precedes(self, other: TransactionId) -> bool {
        self.circular_cmp(other) == Ordering::Less
    }

    /// `TransactionIdPrecedesOrEquals`.
    #[inline]
    pub fn precedes_or_equals(self, other: TransactionId) -> bool {
        self.circular_cmp(other) != Ordering::Greater
    }

    /// `TransactionIdFollows`: `self > other` in circular order.
    #[inline]
    pub fn follows(self, other: TransactionId) -> bool {
        self.circular_cmp(other) == Ordering::Greater
    }

    /// `TransactionIdFollowsOrEquals`.
    #[inline]
    pub fn follows_or_equals(self, other: TransactionId) -> bool {
        self.circular_cmp(other) != Ordering::Less
    }

    /// `TransactionIdAdvance`: the next xid, skipping the three special values after wraparound.
    #[inline]
    pub fn next(self) -> TransactionId {
        let n = self.0.wrapping_add(1);
        if n < Self::FIRST_NORMAL.0 { Self::FIRST_NORMAL } else { TransactionId(n) }
    }

    /// `TransactionIdRetreat`: the previous normal xid, skipping the special values.
    #[inline]
    pub fn prev(self) -> TransactionId {
        let p = self.0.wrapping_sub(1);
        if p < Self::FIRST_NORMAL.0 { Self::MAX } else { TransactionId(p) }
    }

    /// The older of two xids in circular order (`TransactionIdOlder`, 14+).
    #[inline]
    pub fn older(self, other: TransactionId) -> TransactionId {
        if other.is_valid() && (!self.is_valid() || other.precedes(self)) { other } else { self }
    }
}

impl fmt::Display for TransactionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A backend-local transaction counter: PostgreSQL's `LocalTransactionId` (32 bits, 0 invalid).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LocalTransactionId(pub u32);

impl LocalTransactionId {
    /// `InvalidLocalTransactionId`.
    pub const INVALID: LocalTransactionId = LocalTransactionId(0);

    /// True unless this is [`LocalTransactionId::INVALID`].
    #[inline]
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }

    /// The next local id, skipping 0 on wraparound.
    #[inline]
    pub fn next(self) -> LocalTransactionId {
        match self.0.wrapping_add(1) {
            0 => LocalTransactionId(1),
            n => LocalTransactionId(n),
        }
    }
}

/// A virtual transaction id: (backend, backend-local counter).
///
/// Every transaction has one from its start, whether or not it ever gets a real xid
/// (`VirtualTransactionId` in `src/include/storage/lock.h`, 8.3+). Displayed as PostgreSQL shows
/// it in `pg_locks.virtualxid`: `backend/local`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct VirtualTransactionId {
    /// The owning backend.
    pub backend_id: BackendId,
    /// The backend's local transaction counter at the transaction's start.
    pub local_xid: LocalTransactionId,
}

impl VirtualTransactionId {
    /// True when the local id is valid.
    #[inline]
    pub fn is_valid(self) -> bool {
        self.local_xid.is_valid()
    }
}

impl fmt::Display for VirtualTransactionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.backend_id.0, self.local_xid.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn special_xids_precede_normal_ones() {
        for special in [TransactionId::INVALID, TransactionId::BOOTSTRAP, TransactionId::FROZEN] {
            assert!(special.precedes(TransactionId::FIRST_NORMAL));
            assert!(special.precedes(TransactionId(u32::MAX)));
            assert!(TransactionId(u32::MAX).follows(special));
        }
        assert!(TransactionId::BOOTSTRAP.precedes(TransactionId::FROZEN));
    }

    #[test]
    fn wraparound_at_the_2_pow_31_boundary() {
        let a = TransactionId(100);
        // Exactly 2^31 - 1 ahead: still follows.
        let b = TransactionId(100u32.wrapping_add((1 << 31) - 1));
        assert!(a.precedes(b));
        assert!(b.follows(a));
        // 2^31 + 1 ahead wraps into the past.
        let c = TransactionId(100u32.wrapping_add((1 << 31) + 1));
        assert!(c.precedes(a));
        // Across the 2^32 wrap.
        let old = TransactionId(u32::MAX - 5);
        let new = TransactionId(10);
        assert!(old.precedes(new));
        assert!(new.follows(old));
    }

    #[test]
    fn next_skips_special_values() {
        assert_eq!(TransactionId(u32::MAX).next(), TransactionId::FIRST_NORMAL);
        assert_eq!(TransactionId::FIRST_NORMAL.prev(), TransactionId::MAX);
        assert_eq!(TransactionId(41).next(), TransactionId(42));
        assert_eq!(LocalTransactionId(u32::MAX).next(), LocalTransactionId(1));
    }

    #[test]
    fn older_ignores_invalid() {
        let a = TransactionId(10);
        assert_eq!(TransactionId::INVALID.older(a), a);
        assert_eq!(a.older(TransactionId::INVALID), a);
        assert_eq!(a.older(TransactionId(9)), TransactionId(9));
    }

    proptest! {
        #[test]
        fn circular_order_is_antisymmetric(a in 3u32.., d in 1u32..(1 << 31)) {
            let x = TransactionId(a);
            let y = TransactionId(a.wrapping_add(d));
            prop_assume!(y.is_normal());
            prop_assert!(x.precedes(y));
            prop_assert!(y.follows(x));
            prop_assert!(!y.precedes(x));
        }
    }
}
