//! Run-time choice of the lock manager's variants.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use lockstack_common::Oid;
use lockstack_lwlock::LwLockKind;

/// Slots per fast-path group (`FP_LOCK_SLOTS_PER_GROUP`, 18; the whole array in 9.2-17).
pub const FP_SLOTS_PER_GROUP: usize = 16;
/// Most groups a backend may have (`FP_LOCK_GROUPS_PER_BACKEND_MAX`, 18).
pub const FP_MAX_GROUPS: usize = 1024;
/// Strong-lock counters (`FAST_PATH_STRONG_LOCK_HASH_PARTITIONS`, 9.2+).
pub const STRONG_LOCK_PARTITIONS: usize = 1024;

/// Fast-path relation locks (`lock.c`, 9.2+).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum FastPath {
    /// Every lock goes through the main table (9.1 and earlier).
    Off,
    /// `groups` groups of 16 slots per backend; relation `r` uses group
    /// `(r * 49157) mod groups` (18). `groups: 1` is 9.2-17's single array of 16 slots.
    Groups {
        /// Groups per backend: a power of two in `1..=1024`.
        groups: usize,
    },
}

impl FastPath {
    /// 9.2-17: one array of 16 slots.
    pub const PG92: FastPath = FastPath::Groups { groups: 1 };
    /// 18 with the default `max_locks_per_transaction = 64`: 4 groups (64 slots).
    pub const PG18: FastPath = FastPath::Groups { groups: 4 };

    /// Groups per backend (0 when off).
    pub fn groups(self) -> usize {
        match self {
            FastPath::Off => 0,
            FastPath::Groups { groups } => groups,
        }
    }
}

impl fmt::Display for FastPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FastPath::Off => f.write_str("off"),
            FastPath::Groups { groups: 1 } => f.write_str("on (16 slots)"),
            FastPath::Groups { groups } => write!(f, "on ({groups} groups of 16)"),
        }
    }
}

/// How transactions lock their own virtual transaction id.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum VxidLocks {
    /// 9.1: every transaction inserts ExclusiveLock on its VXID into the main table at start
    /// and removes it at end (two partition-lock round trips per transaction).
    Eager,
    /// 9.2+: the VXID lock lives in the backend's fast-path area and is materialised in the main
    /// table only by a backend that wants to wait for it (`VirtualXactLock`).
    #[default]
    OnDemand,
}

impl VxidLocks {
    /// `eager` or `on-demand`.
    pub fn name(self) -> &'static str {
        match self {
            VxidLocks::Eager => "eager",
            VxidLocks::OnDemand => "on-demand",
        }
    }
}

impl fmt::Display for VxidLocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VxidLocks {
    type Err = String;

    /// Parses `eager` or `on-demand` (also `ondemand`, `lazy`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "eager" => Ok(VxidLocks::Eager),
            "on-demand" | "ondemand" | "lazy" => Ok(VxidLocks::OnDemand),
            _ => Err(format!("unknown VXID lock mode '{s}' (valid: eager, on-demand)")),
        }
    }
}

/// Configuration of an [`crate::Lmgr`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct LmgrConfig {
    /// Backends (threads) that may attach: `0..max_backends`.
    pub max_backends: usize,
    /// Main lock table partitions (`NUM_LOCK_PARTITIONS`, 16 in 8.2-18): a power of two in
    /// `1..=1024`.
    pub partitions: usize,
    /// Fast-path relation locks.
    pub fast_path: FastPath,
    /// VXID lock variant.
    pub vxid: VxidLocks,
    /// LWLock implementation of the partition and fast-path locks.
    pub lwlock_kind: LwLockKind,
    /// The database every backend is connected to (`MyDatabaseId`); relations of database 0
    /// (shared catalogs) never use fast path.
    pub database: Oid,
    /// `deadlock_timeout` of every new backend (PostgreSQL's GUC, default 1 s): how long a
    /// waiter sleeps before it runs the deadlock detector. A backend can change its own with
    /// `Backend::set_deadlock_timeout`. At least 1 ms (PostgreSQL's minimum).
    pub deadlock_timeout: Duration,
    /// `lock_timeout` of every new backend (9.3+; `None`, PostgreSQL's 0, waits forever);
    /// `Backend::set_lock_timeout` changes a backend's own.
    pub lock_timeout: Option<Duration>,
    /// Whether a NOWAIT request (`LockOptions::dont_wait`) that conflicts may still be granted
    /// by going ahead of queued waiters that wait for a lock the requester already holds
    /// (PostgreSQL 17+, `ProcSleep` decides the queue jump before it honours `dontWait`:
    /// "Allow a no-wait lock acquisition to succeed in more cases", March 2024). Off is
    /// 9.x-16: `LockAcquireExtended` fails a conflicting NOWAIT request before `ProcSleep`
    /// is reached, so it never jumps the queue. A request that does not wait is unaffected.
    pub nowait_queue_jump: bool,
}

impl Default for LmgrConfig {
    /// PostgreSQL 9.2-16: 16 partitions, 16 fast-path slots, on-demand VXID locks, 64 backends,
    /// database 5, `deadlock_timeout` 1 s, no `lock_timeout`, no NOWAIT queue jump (17 differs
    /// only in that: the `pg17` preset sets `lmgr.nowait_queue_jump`).
    fn default() -> Self {
        LmgrConfig {
            max_backends: 64,
            partitions: 16,
            fast_path: FastPath::PG92,
            vxid: VxidLocks::OnDemand,
            lwlock_kind: LwLockKind::default(),
            database: Oid(5),
            deadlock_timeout: Duration::from_secs(1),
            lock_timeout: None,
            nowait_queue_jump: false,
        }
    }
}

impl LmgrConfig {
    /// Checks the ranges documented on each field.
    ///
    /// # Errors
    /// The first bad field, as an [`LmgrConfigError`] whose message names it.
    pub fn validate(&self) -> Result<(), LmgrConfigError> {
        if self.max_backends == 0 || self.max_backends > 65_536 {
            return Err(LmgrConfigError::MaxBackends(self.max_backends));
        }
        if !self.partitions.is_power_of_two() || self.partitions > 1024 {
            return Err(LmgrConfigError::Partitions(self.partitions));
        }
        if let FastPath::Groups { groups } = self.fast_path
            && (!groups.is_power_of_two() || groups > FP_MAX_GROUPS)
        {
            return Err(LmgrConfigError::FastPathGroups(groups));
        }
        if !self.database.is_valid() {
            return Err(LmgrConfigError::InvalidDatabase);
        }
        if self.deadlock_timeout < Duration::from_millis(1) {
            return Err(LmgrConfigError::DeadlockTimeout(self.deadlock_timeout));
        }
        Ok(())
    }
}

/// The lock manager's knobs (`lockstack_common::knob`), over [`LmgrConfig`]; the defaults are
/// [`LmgrConfig::default`]'s.
pub const KNOBS: &[lockstack_common::Knob<LmgrConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{in_range, on_off, parsed};
    &[
        Knob {
            key: "lmgr.partitions",
            values: "a power of two 1..=1024",
            doc: "lock manager partitions (NUM_LOCK_PARTITIONS, 16 in PostgreSQL)",
            default: "16",
            apply: |c, v| {
                c.partitions = in_range(v, 1usize, 1024).filter(|n| n.is_power_of_two())?;
                Some(())
            },
        },
        Knob {
            key: "lmgr.fast_path",
            values: "off or a power of two 1..=1024",
            doc: "fast-path relation locks: off (9.1), GROUPS groups of 16 slots (1 = 9.2, more = 18)",
            default: "1",
            apply: |c, v| {
                c.fast_path = if v.eq_ignore_ascii_case("off") {
                    FastPath::Off
                } else {
                    let groups = in_range(v, 1usize, FP_MAX_GROUPS).filter(|n| n.is_power_of_two())?;
                    FastPath::Groups { groups }
                };
                Some(())
            },
        },
        Knob {
            key: "lmgr.vxid",
            values: "eager|on-demand",
            doc: "VXID locks taken at BEGIN (9.1) or on demand (9.2)",
            default: "on-demand",
            apply: |c, v| {
                c.vxid = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "lmgr.deadlock_timeout",
            values: "1..=3600000 (ms)",
            doc: "deadlock_timeout: wait before running the deadlock detector (PostgreSQL: 1000 ms)",
            default: "1000",
            apply: |c, v| {
                c.deadlock_timeout = Duration::from_millis(in_range(v, 1u64, 3_600_000)?);
                Some(())
            },
        },
        Knob {
            key: "lmgr.lock_timeout",
            values: "0..=3600000 (ms)",
            doc: "lock_timeout: give up a heavyweight lock wait after this long (0 = never, the default)",
            default: "0",
            apply: |c, v| {
                let ms = in_range(v, 0u64, 3_600_000)?;
                c.lock_timeout = (ms > 0).then(|| Duration::from_millis(ms));
                Some(())
            },
        },
        Knob {
            key: "lmgr.nowait_queue_jump",
            values: "on|off",
            doc: "a NOWAIT request may be granted by going ahead of waiters that wait for a lock it holds (17+: on; 9.x-16: off)",
            default: "off",
            apply: |c, v| {
                c.nowait_queue_jump = on_off(v)?;
                Some(())
            },
        },
    ]
};
/// A field of [`LmgrConfig`] outside its documented range (from [`LmgrConfig::validate`] and
/// [`crate::Lmgr::new`]); the message names the field and the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LmgrConfigError {
    /// `max_backends` is not in `1..=65536`.
    MaxBackends(usize),
    /// `partitions` is not a power of two in `1..=1024`.
    Partitions(usize),
    /// The fast-path group count is not a power of two in `1..=1024`.
    FastPathGroups(usize),
    /// `database` is the invalid oid 0.
    InvalidDatabase,
    /// `deadlock_timeout` is below 1 ms.
    DeadlockTimeout(Duration),
}

impl fmt::Display for LmgrConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LmgrConfigError::MaxBackends(n) => write!(f, "max_backends must be 1..=65536, got {n}"),
            LmgrConfigError::Partitions(n) => {
                write!(f, "partitions must be a power of two in 1..=1024, got {n}")
            }
            LmgrConfigError::FastPathGroups(g) => {
                write!(f, "fast-path groups must be a power of two in 1..=1024, got {g}")
            }
            LmgrConfigError::InvalidDatabase => f.write_str("database must be a valid oid"),
            LmgrConfigError::DeadlockTimeout(d) => {
                write!(f, "deadlock_timeout must be at least 1 ms, got {d:?}")
            }
        }
    }
}

impl std::error::Error for LmgrConfigError {}
