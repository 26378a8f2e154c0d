//! The eight heavyweight lock modes and PostgreSQL's conflict table
//! (`src/include/storage/lockdefs.h` and `LockConflicts[]` in `src/backend/storage/lmgr/lock.c`;
//! unchanged from 8.2 to 18).

use std::fmt;
use std::str::FromStr;

/// A set of lock modes: bit `m` is mode number `m` (PostgreSQL's `LOCKMASK`, `LOCKBIT_ON(m)`).
pub type LockMask = u16;

/// A heavyweight lock mode (`LOCKMODE`, 1..=8; 0 is `NoLock` and has no variant).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum LockMode {
    /// `AccessShareLock` (1): SELECT.
    AccessShare = 1,
    /// `RowShareLock` (2): SELECT FOR UPDATE/SHARE.
    RowShare = 2,
    /// `RowExclusiveLock` (3): INSERT, UPDATE, DELETE.
    RowExclusive = 3,
    /// `ShareUpdateExclusiveLock` (4): VACUUM, ANALYZE, CREATE INDEX CONCURRENTLY.
    ShareUpdateExclusive = 4,
    /// `ShareLock` (5): CREATE INDEX; waiting for another transaction's xid or vxid.
    Share = 5,
    /// `ShareRowExclusiveLock` (6): CREATE TRIGGER, some ALTER TABLE.
    ShareRowExclusive = 6,
    /// `ExclusiveLock` (7): REFRESH MATERIALIZED VIEW CONCURRENTLY; own xid and vxid locks.
    Exclusive = 7,
    /// `AccessExclusiveLock` (8): DROP, TRUNCATE, most ALTER TABLE, `LOCK TABLE` by default.
    AccessExclusive = 8,
}

/// `LockConflicts[]`: for each mode number (index 0 = `NoLock`), the mask of modes it conflicts
/// with. The table is symmetric.
pub const CONFLICT_TABLE: [LockMask; 9] = {
    const fn b(m: u8) -> LockMask {
        1 << m
    }
    [
        0,
        b(8),
        b(7) | b(8),
        b(5) | b(6) | b(7) | b(8),
        b(4) | b(5) | b(6) | b(7) | b(8),
        b(3) | b(4) | b(6) | b(7) | b(8),
        b(3) | b(4) | b(5) | b(6) | b(7) | b(8),
        b(2) | b(3) | b(4) | b(5) | b(6) | b(7) | b(8),
        b(1) | b(2) | b(3) | b(4) | b(5) | b(6) | b(7) | b(8),
    ]
};

impl LockMode {
    /// Every mode, weakest first.
    pub const ALL: [LockMode; 8] = [
        LockMode::AccessShare,
        LockMode::RowShare,
        LockMode::RowExclusive,
        LockMode::ShareUpdateExclusive,
        LockMode::Share,
        LockMode::ShareRowExclusive,
        LockMode::Exclusive,
        LockMode::AccessExclusive,
    ];

    /// The mode number, 1..=8.
    #[inline]
    pub const fn number(self) -> usize {
        self as usize
    }

    /// The mode with number `n` (1..=8), if any.
    pub fn from_number(n: usize) -> Option<LockMode> {
        Self::ALL.get(n.wrapping_sub(1)).copied()
    }

    /// `LOCKBIT_ON(mode)`.
    #[inline]
    pub const fn bit(self) -> LockMask {
        1 << (self as u8)
    }

    /// The modes this one conflicts with (`conflictTab[mode]`).
    #[inline]
    pub const fn conflict_mask(self) -> LockMask {
        CONFLICT_TABLE[self as usize]
    }

    /// True when a holder of `self` and a holder of `other` (two different backends) conflict.
    #[inline]
    pub const fn conflicts_with(self, other: LockMode) -> bool {
        self.conflict_mask() & other.bit() != 0
    }

    /// True for the modes that may use a fast-path slot: AccessShare, RowShare, RowExclusive
    /// (`mode < ShareUpdateExclusiveLock`, `EligibleForRelationFastPath` in `lock.c`, 9.2+).
    #[inline]
    pub const fn is_weak(self) -> bool {
        (self as u8) < (LockMode::ShareUpdateExclusive as u8)
    }

    /// True for the modes that disable and transfer fast-path locks: Share and stronger
    /// (`mode > ShareUpdateExclusiveLock`, `ConflictsWithRelationFastPath`, 9.2+).
    #[inline]
    pub const fn is_strong(self) -> bool {
        (self as u8) > (LockMode::ShareUpdateExclusive as u8)
    }

    /// PostgreSQL's name, as `pg_locks.mode` shows it (`AccessShareLock`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            LockMode::AccessShare => "AccessShareLock",
            LockMode::RowShare => "RowShareLock",
            LockMode::RowExclusive => "RowExclusiveLock",
            LockMode::ShareUpdateExclusive => "ShareUpdateExclusiveLock",
            LockMode::Share => "ShareLock",
            LockMode::ShareRowExclusive => "ShareRowExclusiveLock",
            LockMode::Exclusive => "ExclusiveLock",
            LockMode::AccessExclusive => "AccessExclusiveLock",
        }
    }

    /// The SQL spelling used by `LOCK TABLE ... IN <mode> MODE` (`ACCESS SHARE`, ...).
    pub const fn sql_name(self) -> &'static str {
        match self {
            LockMode::AccessShare => "ACCESS SHARE",
            LockMode::RowShare => "ROW SHARE",
            LockMode::RowExclusive => "ROW EXCLUSIVE",
            LockMode::ShareUpdateExclusive => "SHARE UPDATE EXCLUSIVE",
            LockMode::Share => "SHARE",
            LockMode::ShareRowExclusive => "SHARE ROW EXCLUSIVE",
            LockMode::Exclusive => "EXCLUSIVE",
            LockMode::AccessExclusive => "ACCESS EXCLUSIVE",
        }
    }

    /// The modes in `mask`, weakest first.
    pub fn modes_in(mask: LockMask) -> impl Iterator<Item = LockMode> {
        Self::ALL.into_iter().filter(move |m| mask & m.bit() != 0)
    }
}

impl fmt::Display for LockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for LockMode {
    type Err = String;

    /// Parses PostgreSQL's name (`AccessShareLock`, case-insensitive, the `Lock` suffix
    /// optional) or the SQL spelling (`access share`, any case and spacing).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm: String = s.chars().filter(|c| !c.is_whitespace() && *c != '_').collect::<String>();
        let norm = norm.to_ascii_lowercase();
        let norm = norm.strip_suffix("lock").unwrap_or(&norm);
        LockMode::ALL
            .into_iter()
            .find(|m| m.sql_name().replace(' ', "").to_ascii_lowercase() == norm)
            .ok_or_else(|| format!("unknown lock mode '{s}'"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_postgres_masks_and_is_symmetric() {
        assert_eq!(CONFLICT_TABLE[1..], [0x100, 0x180, 0x1E0, 0x1F0, 0x1D8, 0x1F8, 0x1FC, 0x1FE]);
        for a in LockMode::ALL {
            for b in LockMode::ALL {
                assert_eq!(a.conflicts_with(b), b.conflicts_with(a), "{a} vs {b}");
            }
        }
        let self_conflicting: Vec<_> = LockMode::ALL.into_iter().filter(|m| m.conflicts_with(*m)).collect();
        assert_eq!(
            self_conflicting,
            [
                LockMode::ShareUpdateExclusive,
                LockMode::ShareRowExclusive,
                LockMode::Exclusive,
                LockMode::AccessExclusive
            ]
        );
    }

    #[test]
    fn weak_and_strong_partition_the_modes_except_sux() {
        for m in LockMode::ALL {
            assert!(!(m.is_weak() && m.is_strong()));
            if m.is_weak() {
                // Weak modes never conflict with each other.
                for w in LockMode::ALL.into_iter().filter(|w| w.is_weak()) {
                    assert!(!m.conflicts_with(w));
                }
            }
        }
        assert!(!LockMode::ShareUpdateExclusive.is_weak() && !LockMode::ShareUpdateExclusive.is_strong());
    }

    #[test]
    fn parses_both_spellings() {
        assert_eq!("AccessExclusiveLock".parse::<LockMode>(), Ok(LockMode::AccessExclusive));
        assert_eq!("share row exclusive".parse::<LockMode>(), Ok(LockMode::ShareRowExclusive));
        assert_eq!("SHARE".parse::<LockMode>(), Ok(LockMode::Share));
        assert!("sharelocks".parse::<LockMode>().is_err());
        for m in LockMode::ALL {
            assert_eq!(LockMode::from_number(m.number()), Some(m));
        }
        assert_eq!(LockMode::from_number(0), None);
    }
}
