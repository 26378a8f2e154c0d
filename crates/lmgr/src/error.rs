//! Errors of lock acquisition.

use std::fmt;

use crate::mode::LockMode;
use crate::tag::LockTag;

/// Why a lock request failed. In every case the request left no trace in the lock table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LockError {
    /// The lock was not free and the caller asked not to wait (NOWAIT, `pg_try_advisory_lock`,
    /// `LockAcquireExtended(dontWait)` returning `LOCKACQUIRE_NOT_AVAIL`).
    NotAvailable {
        /// The object.
        tag: LockTag,
        /// The mode requested.
        mode: LockMode,
    },
    /// The deadlock detector chose this backend as the victim (`DeadLockReport`, `deadlock.c`).
    Deadlock {
        /// One line per edge of the cycle: `Backend 1 waits for ShareLock on transaction 740;
        /// blocked by backend 2.`
        detail: String,
    },
    /// `lock_timeout` expired while waiting (9.3+).
    LockTimeout {
        /// The object waited for.
        tag: LockTag,
        /// The mode requested.
        mode: LockMode,
    },
}

impl LockError {
    /// PostgreSQL's primary message: "deadlock detected", "canceling statement due to lock
    /// timeout", or "could not obtain lock on \<object\>".
    pub fn message(&self) -> String {
        match self {
            LockError::NotAvailable { tag, .. } => format!("could not obtain lock on {tag}"),
            LockError::Deadlock { .. } => "deadlock detected".to_string(),
            LockError::LockTimeout { .. } => "canceling statement due to lock timeout".to_string(),
        }
    }

    /// PostgreSQL's SQLSTATE: 55P03 (lock_not_available) or 40P01 (deadlock_detected).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            LockError::Deadlock { .. } => "40P01",
            _ => "55P03",
        }
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Deadlock { detail } => write!(f, "deadlock detected ({})", detail.replace('\n', " ")),
            other => f.write_str(&other.message()),
        }
    }
}

impl std::error::Error for LockError {}
