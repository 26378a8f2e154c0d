//! LWLock tranche ids and names.
//!
//! A tranche is a named group of LWLocks (all 128 buffer-mapping partition locks form the
//! `BufferMapping` tranche); the tranche name is what `pg_stat_activity.wait_event` shows while a
//! backend waits for one of its locks. The design follows PostgreSQL 9.4+ `lwlock.c`
//! (`LWLockRegisterTranche`, `BuiltinTrancheIds`) with the names PostgreSQL 15 uses.
//!
//! Built-in tranches have fixed ids below [`TrancheId::FIRST_REGISTERED`]; a crate that needs its
//! own group registers a name once with [`TrancheId::register`].

use std::fmt;
use std::sync::OnceLock;

use crate::sync::host::RwLock;

/// Identifier of a tranche: a dense index below [`TrancheId::MAX`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TrancheId(pub u16);

macro_rules! builtin_tranches {
    ($($(#[$doc:meta])* $konst:ident = $id:literal, $name:literal;)*) => {
        impl TrancheId {
            $($(#[$doc])* pub const $konst: TrancheId = TrancheId($id);)*
        }
        const BUILTIN_NAMES: &[(u16, &str)] = &[$(($id, $name)),*];
    };
}

builtin_tranches! {
    /// Locks created without a tranche (PostgreSQL prints such ids as "extension").
    UNNAMED = 0, "extension";
    /// `XidGenLock`: serialises xid assignment (`GetNewTransactionId`).
    XID_GEN = 1, "XidGen";
    /// `ProcArrayLock`: snapshots (shared) against transaction end (exclusive).
    PROC_ARRAY = 2, "ProcArray";
    /// `WALWriteLock`: one backend writes and flushes WAL at a time.
    WAL_WRITE = 3, "WALWrite";
    /// `XactSLRULock` (`CLogControlLock` before 13): the CLOG SLRU control lock.
    XACT_SLRU = 4, "XactSLRU";
    /// `SubtransSLRULock` (`SubtransControlLock` before 13).
    SUBTRANS_SLRU = 5, "SubtransSLRU";
    /// `OldSnapshotTimeMapLock` (9.6-16): the old_snapshot_threshold time map.
    OLD_SNAPSHOT_TIME_MAP = 6, "OldSnapshotTimeMap";
    /// `MultiXactGenLock`.
    MULTI_XACT_GEN = 7, "MultiXactGen";
    /// `WALBufMappingLock` (9.4-17): advancing the WAL buffer ring.
    WAL_BUF_MAPPING = 8, "WALBufMapping";
    /// `BufFreelistLock` (until 9.4) / the buffer strategy lock: free list and clock sweep.
    BUF_FREELIST = 9, "BufFreelist";
    /// `ControlFileLock`.
    CONTROL_FILE = 10, "ControlFile";
    /// `OidGenLock`.
    OID_GEN = 11, "OidGen";
    /// Per-buffer content locks.
    BUFFER_CONTENT = 32, "BufferContent";
    /// Per-buffer I/O locks (9.6-14; a condition variable "BufferIO" in 15+).
    BUFFER_IO = 33, "BufferIO";
    /// Buffer mapping table partitions (16 until 9.4, 128 from 9.5).
    BUFFER_MAPPING = 34, "BufferMapping";
    /// Heavyweight lock table partitions (16).
    LOCK_MANAGER = 35, "LockManager";
    /// Per-backend fast-path lock slots (`fpInfoLock`, 9.2+).
    LOCK_FAST_PATH = 36, "LockFastPath";
    /// WAL insertion locks (9.4+), or the single `WALInsertLock` of 9.2/9.3.
    WAL_INSERT = 37, "WALInsert";
    /// CLOG page buffers (per-buffer I/O locks of the Xact SLRU).
    XACT_BUFFER = 38, "XactBuffer";
    /// pg_subtrans page buffers.
    SUBTRANS_BUFFER = 39, "SubtransBuffer";
    /// Per-bank locks of the SLRU banks of PostgreSQL 17 (`XactSLRU` bank locks).
    XACT_SLRU_BANK = 40, "XactSLRUBank";
    /// Predicate lock manager partitions.
    PREDICATE_LOCK_MANAGER = 41, "PredicateLockManager";
}

/// Names of tranches registered at run time, index = id - FIRST_REGISTERED.
fn registry() -> &'static RwLock<Vec<&'static str>> {
    static REG: OnceLock<RwLock<Vec<&'static str>>> = OnceLock::new();
    REG.get_or_init(|| RwLock::new(Vec::new()))
}

impl TrancheId {
    /// Number of tranche ids; per-tranche counter arrays have this many entries.
    pub const MAX: usize = 128;
    /// First id handed out by [`TrancheId::register`].
    pub const FIRST_REGISTERED: u16 = 64;

    /// Registers a tranche name and returns its id; registering the same name again returns the
    /// same id (PostgreSQL's `LWLockNewTrancheId` + `LWLockRegisterTranche`, and the built-ins
    /// when `name` is one of theirs).
    ///
    /// # Panics
    /// When more than `MAX - FIRST_REGISTERED` (64) distinct names have been registered: tranches
    /// are meant to be few and long-lived, and every backend keeps a counter row per id.
    pub fn register(name: &'static str) -> TrancheId {
        if let Some(&(id, _)) = BUILTIN_NAMES.iter().find(|(_, n)| *n == name) {
            return TrancheId(id);
        }
        let mut reg = registry().write();
        if let Some(pos) = reg.iter().position(|n| *n == name) {
            return TrancheId(Self::FIRST_REGISTERED + pos as u16);
        }
        let id = Self::FIRST_REGISTERED as usize + reg.len();
        assert!(id < Self::MAX, "too many LWLock tranches registered (at most 64): {name}");
        reg.push(name);
        TrancheId(id as u16)
    }

    /// The tranche's name; unknown ids print as "extension", as PostgreSQL does.
    pub fn name(self) -> &'static str {
        if let Some(&(_, n)) = BUILTIN_NAMES.iter().find(|(id, _)| *id == self.0) {
            return n;
        }
        if self.0 >= Self::FIRST_REGISTERED {
            let reg = registry().read();
            if let Some(n) = reg.get((self.0 - Self::FIRST_REGISTERED) as usize) {
                return n;
            }
        }
        "extension"
    }

    /// The id as an index into per-tranche arrays (`< TrancheId::MAX`).
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// Every tranche id that currently has a name (built-in and registered).
    pub fn all_named() -> Vec<TrancheId> {
        let mut v: Vec<TrancheId> = BUILTIN_NAMES.iter().map(|&(id, _)| TrancheId(id)).collect();
        let n = registry().read().len();
        v.extend((0..n).map(|i| TrancheId(Self::FIRST_REGISTERED + i as u16)));
        v
    }
}

impl fmt::Display for TrancheId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_are_postgres_names() {
        assert_eq!(TrancheId::PROC_ARRAY.name(), "ProcArray");
        assert_eq!(TrancheId::WAL_INSERT.name(), "WALInsert");
        assert_eq!(TrancheId::register("LockManager"), TrancheId::LOCK_MANAGER);
        assert_eq!(TrancheId(63).name(), "extension");
    }

    #[test]
    fn registration_is_idempotent() {
        let a = TrancheId::register("test-tranche-a");
        let b = TrancheId::register("test-tranche-a");
        assert_eq!(a, b);
        assert!(a.0 >= TrancheId::FIRST_REGISTERED);
        assert_eq!(a.name(), "test-tranche-a");
        assert!(TrancheId::all_named().contains(&a));
    }

    #[test]
    fn builtin_ids_are_unique_and_in_range() {
        let mut ids: Vec<u16> = BUILTIN_NAMES.iter().map(|(i, _)| *i).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), BUILTIN_NAMES.len());
        assert!(ids.iter().all(|&i| i < TrancheId::FIRST_REGISTERED));
    }
}
