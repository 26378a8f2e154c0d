//! `LOCKTAG`: what a heavyweight lock is on (`src/include/storage/lock.h`, 8.2-17;
//! `locktag.h` in 18).

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};

use lockstack_common::{BlockNumber, Oid, TransactionId, VirtualTransactionId};

/// The kinds of lockable object lockstack models (`LockTagType`). The discriminant is the
/// index PostgreSQL's wait events use (`WaitEvent::lock(kind)`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockTagKind {
    /// `LOCKTAG_RELATION`: a whole table or index.
    Relation = 0,
    /// `LOCKTAG_TUPLE`: one row version (block, offset) of a relation.
    Tuple = 4,
    /// `LOCKTAG_TRANSACTION`: a top-level transaction id; its owner holds it Exclusive, row
    /// waiters take it Share.
    Transaction = 5,
    /// `LOCKTAG_VIRTUALTRANSACTION` (8.3+): a virtual transaction id.
    VirtualTransaction = 6,
    /// `LOCKTAG_OBJECT`: a catalog object that is not a relation.
    Object = 8,
    /// `LOCKTAG_ADVISORY` (8.2+): `pg_advisory_lock` and friends (user lock method).
    Advisory = 10,
}

impl LockTagKind {
    /// PostgreSQL's name of the kind (`pg_locks.locktype`, wait event name).
    pub fn name(self) -> &'static str {
        match self {
            LockTagKind::Relation => "relation",
            LockTagKind::Tuple => "tuple",
            LockTagKind::Transaction => "transactionid",
            LockTagKind::VirtualTransaction => "virtualxid",
            LockTagKind::Object => "object",
            LockTagKind::Advisory => "advisory",
        }
    }

    /// The index in `LockTagType` order that `WaitEvent::lock` takes.
    pub fn wait_event_index(self) -> u8 {
        self as u8
    }

    /// The kind whose discriminant is `v` (the inverse of `kind as u8`), if any.
    pub(crate) fn from_u8(v: u8) -> Option<LockTagKind> {
        Some(match v {
            0 => LockTagKind::Relation,
            4 => LockTagKind::Tuple,
            5 => LockTagKind::Transaction,
            6 => LockTagKind::VirtualTransaction,
            8 => LockTagKind::Object,
            10 => LockTagKind::Advisory,
            _ => return None,
        })
    }
}

/// The lock method a tag belongs to (`LOCKMETHODID`): both share the conflict table; user
/// (advisory) locks are excluded from fast path and from `CHECK_DEADLOCK_RISK`-style checks.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockMethod {
    /// `DEFAULT_LOCKMETHOD` (1).
    Default,
    /// `USER_LOCKMETHOD` (2): advisory locks.
    User,
}

/// A lockable object: PostgreSQL's 16-byte `LOCKTAG` (`field1..field4`, type, method).
///
/// Build tags with the constructors ([`LockTag::relation`], [`LockTag::transaction`], ...);
/// the fields follow PostgreSQL's layout for each kind so that [`fmt::Display`] can describe
/// them as `DescribeLockTag` (`lmgr.c`) does.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LockTag {
    /// `locktag_field1` (database oid for relations, tuples, objects, advisory; xid; backend).
    pub field1: u32,
    /// `locktag_field2` (relation oid, class oid, local xid, advisory key part).
    pub field2: u32,
    /// `locktag_field3` (block number, object oid, advisory key part).
    pub field3: u32,
    /// `locktag_field4` (tuple offset, object sub-id, advisory key kind 1 or 2).
    pub field4: u16,
    /// The kind (`locktag_type`).
    pub kind: LockTagKind,
}

impl LockTag {
    /// `SET_LOCKTAG_RELATION(db, rel)`; `db` is [`Oid::INVALID`] for shared catalogs.
    pub fn relation(db: Oid, rel: Oid) -> LockTag {
        LockTag { field1: db.0, field2: rel.0, field3: 0, field4: 0, kind: LockTagKind::Relation }
    }

    /// `SET_LOCKTAG_TUPLE(db, rel, block, offset)`.
    pub fn tuple(db: Oid, rel: Oid, block: BlockNumber, offset: u16) -> LockTag {
        LockTag { field1: db.0, field2: rel.0, field3: block.0, field4: offset, kind: LockTagKind::Tuple }
    }

    /// `SET_LOCKTAG_TRANSACTION(xid)`.
    pub fn transaction(xid: TransactionId) -> LockTag {
        LockTag { field1: xid.0, field2: 0, field3: 0, field4: 0, kind: LockTagKind::Transaction }
    }

    /// `SET_LOCKTAG_VIRTUALTRANSACTION(vxid)`.
    pub fn virtual_transaction(vxid: VirtualTransactionId) -> LockTag {
        LockTag {
            field1: vxid.backend_id.0,
            field2: vxid.local_xid.0,
            field3: 0,
            field4: 0,
            kind: LockTagKind::VirtualTransaction,
        }
    }

    /// `SET_LOCKTAG_OBJECT(db, class, obj, subid)`.
    pub fn object(db: Oid, class: Oid, obj: Oid, sub_id: u16) -> LockTag {
        LockTag { field1: db.0, field2: class.0, field3: obj.0, field4: sub_id, kind: LockTagKind::Object }
    }

    /// The tag of `pg_advisory_lock(bigint key)` (`SET_LOCKTAG_INT64` in `lockfuncs.c`): the
    /// key's high and low halves, field4 = 1.
    pub fn advisory_int8(db: Oid, key: i64) -> LockTag {
        let k = key as u64;
        LockTag {
            field1: db.0,
            field2: (k >> 32) as u32,
            field3: k as u32,
            field4: 1,
            kind: LockTagKind::Advisory,
        }
    }

    /// The tag of `pg_advisory_lock(int, int)` (`SET_LOCKTAG_INT32`): field4 = 2.
    pub fn advisory_int4(db: Oid, key1: i32, key2: i32) -> LockTag {
        LockTag {
            field1: db.0,
            field2: key1 as u32,
            field3: key2 as u32,
            field4: 2,
            kind: LockTagKind::Advisory,
        }
    }

    /// The lock method of this tag: [`LockMethod::User`] for advisory locks.
    pub fn method(&self) -> LockMethod {
        if self.kind == LockTagKind::Advisory { LockMethod::User } else { LockMethod::Default }
    }

    /// `LockTagHashCode`: the 32-bit hash that picks the partition (low bits) and the
    /// strong-lock counter (mod 1024). Ours is a multiply-xorshift mix of the four fields, not
    /// PostgreSQL's `hash_any`; only its spread matters.
    #[inline]
    pub fn hash_code(&self) -> u32 {
        let a = (u64::from(self.field1) << 32) | u64::from(self.field2);
        let b = (u64::from(self.field3) << 32) | (u64::from(self.field4) << 8) | self.kind as u64;
        let mut h =
            a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b.rotate_left(29).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
        h ^= h >> 31;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 29;
        (h ^ (h >> 32)) as u32
    }
}

impl fmt::Display for LockTag {
    /// The description `DescribeLockTag` gives (`relation 16384 of database 5`, `transaction 740`,
    /// `virtual transaction 3/12`, `advisory lock [5,0,1,1]`, ...).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            LockTagKind::Relation => write!(f, "relation {} of database {}", self.field2, self.field1),
            LockTagKind::Tuple => write!(
                f,
                "tuple ({},{}) of relation {} of database {}",
                self.field3, self.field4, self.field2, self.field1
            ),
            LockTagKind::Transaction => write!(f, "transaction {}", self.field1),
            LockTagKind::VirtualTransaction => {
                write!(f, "virtual transaction {}/{}", self.field1, self.field2)
            }
            LockTagKind::Object => {
                write!(f, "object {} of class {} of database {}", self.field3, self.field2, self.field1)
            }
            LockTagKind::Advisory => {
                write!(f, "advisory lock [{},{},{},{}]", self.field1, self.field2, self.field3, self.field4)
            }
        }
    }
}

/// A small, fast hasher for the lock tables' keys (tags are already well mixed by
/// [`LockTag::hash_code`]; SipHash would dominate the fast path).
#[derive(Default, Clone, Copy, Debug)]
pub struct TagHasher(u64);

impl Hasher for TagHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        h ^ (h >> 33)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(23) ^ i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as u64);
    }
}

/// `BuildHasher` for [`TagHasher`].
pub type TagBuildHasher = BuildHasherDefault<TagHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_common::{BackendId, LocalTransactionId};

    #[test]
    fn descriptions_follow_describe_lock_tag() {
        assert_eq!(LockTag::relation(Oid(5), Oid(16384)).to_string(), "relation 16384 of database 5");
        assert_eq!(LockTag::transaction(TransactionId(740)).to_string(), "transaction 740");
        let v = VirtualTransactionId { backend_id: BackendId(3), local_xid: LocalTransactionId(12) };
        assert_eq!(LockTag::virtual_transaction(v).to_string(), "virtual transaction 3/12");
        assert_eq!(LockTag::advisory_int8(Oid(5), 1).to_string(), "advisory lock [5,0,1,1]");
        assert_eq!(LockTag::advisory_int4(Oid(5), 1, 2).to_string(), "advisory lock [5,1,2,2]");
        assert_eq!(LockTag::advisory_int8(Oid(5), 1).method(), LockMethod::User);
    }

    #[test]
    fn hash_spreads_consecutive_relations_over_partitions() {
        let mut counts = [0u32; 16];
        for rel in 16384..16384 + 1600 {
            counts[(LockTag::relation(Oid(5), Oid(rel)).hash_code() % 16) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (50..=150).contains(&c)), "{counts:?}");
    }
}
