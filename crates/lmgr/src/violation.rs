//! The lock table's broken invariants ([`TableViolation`], [`LockViolation`]): what
//! [`crate::Lmgr::check_invariants`] found wrong, as one line. The checks run under every
//! partition lock and fpInfoLock; these types touch no lock.

use lockstack_common::BackendId;

use crate::mode::LockMode;
use crate::tag::LockTag;

/// A LOCK object whose counts, masks, PROCLOCK list or wait queue disagree with each other
/// (the checks of `lock.c`'s `LOCK_PRINT`-style sanity, as the tests need them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LockViolation {
    /// The LOCK stayed in the table with no request left on it.
    #[error("lock object with no requests left in the table")]
    NoRequests,
    /// The LOCK lists a backend that has no PROCLOCK on it.
    #[error("backend {0} is listed but has no PROCLOCK")]
    ListedWithoutProcLock(BackendId),
    /// A PROCLOCK holds nothing and its backend is not waiting.
    #[error("backend {0} has an empty PROCLOCK and is not waiting")]
    EmptyProcLock(BackendId),
    /// A waiter the LOCK does not list.
    #[error("waiter {0} has no PROCLOCK")]
    WaiterWithoutProcLock(BackendId),
    /// A waiter that already holds the mode it waits for.
    #[error("waiter {backend} already holds {mode}")]
    WaiterAlreadyHolds {
        /// The waiter.
        backend: BackendId,
        /// The mode.
        mode: LockMode,
    },
    /// The LOCK lists a backend twice.
    #[error("duplicate PROCLOCK")]
    DuplicateProcLock,
    /// `granted[mode]` differs from the number of PROCLOCKs holding `mode`.
    #[error("granted[{mode}] = {granted} but {holders} holders")]
    GrantedCount {
        /// The mode.
        mode: LockMode,
        /// The LOCK's count.
        granted: u32,
        /// PROCLOCKs holding it.
        holders: u32,
    },
    /// `requested[mode]` differs from granted plus queued requests of `mode`.
    #[error("requested[{mode}] = {requested} but granted {granted} + waiting {waiting}")]
    RequestedCount {
        /// The mode.
        mode: LockMode,
        /// The LOCK's count.
        requested: u32,
        /// The LOCK's granted count.
        granted: u32,
        /// Waiters for it.
        waiting: u32,
    },
    /// `grantMask`'s bit for the mode disagrees with its granted count.
    #[error("grantMask bit of {0} disagrees with granted count")]
    GrantMask(LockMode),
    /// `waitMask`'s bit for the mode disagrees with the wait queue.
    #[error("waitMask bit of {0} disagrees with the wait queue")]
    WaitMask(LockMode),
    /// `nGranted` or `nRequested` is not the sum of the per-mode counts.
    #[error("nGranted/nRequested disagree with the per-mode counts")]
    Totals,
}

/// The first broken invariant of the shared lock table, its wait queues or the fast-path
/// slots; [`crate::Lmgr::check_invariants`] reports it as an
/// [`lockstack_common::InvariantViolation`] with this text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TableViolation {
    /// A LOCK object is inconsistent (the lock, then what is wrong).
    #[error("{tag}: {source}")]
    Lock {
        /// The lock.
        tag: LockTag,
        /// What is wrong with it.
        source: LockViolation,
    },
    /// A partition holds PROCLOCKs no LOCK lists.
    #[error("{in_table} PROCLOCKs in the table but {listed} listed by their LOCKs")]
    UnlistedProcLocks {
        /// PROCLOCKs in the partition.
        in_table: usize,
        /// PROCLOCKs its LOCKs list.
        listed: usize,
    },
    /// A LOCK sits in a partition other than the one its hash code picks.
    #[error("{tag} is in partition {partition}, not its own")]
    WrongPartition {
        /// The lock.
        tag: LockTag,
        /// The partition it was found in.
        partition: usize,
    },
    /// A backend is in two wait queues.
    #[error("backend {0} is queued on two locks")]
    QueuedTwice(BackendId),
    /// A backend is in a wait queue its own wait state does not name.
    #[error("backend {backend} is queued on {tag} but does not know it")]
    QueueUnknown {
        /// The backend.
        backend: BackendId,
        /// The lock whose queue holds it.
        tag: LockTag,
    },
    /// A backend's wait state says it waits, but no queue holds it.
    #[error("backend {0} thinks it waits but is in no queue")]
    WaitsInNoQueue(BackendId),
    /// A fast-path relation lock coexists with a granted strong lock on the relation.
    #[error("backend {backend} holds {modes:?} on {tag} in fast path while a strong lock is granted")]
    FastPathUnderStrong {
        /// The backend.
        backend: BackendId,
        /// Its fast-path modes on the relation.
        modes: Vec<LockMode>,
        /// The relation's lock.
        tag: LockTag,
    },
    /// A backend's fast-path VXID lock names a transaction it has finished.
    #[error("backend {0} holds a fast-path VXID lock of a finished transaction")]
    StaleVxidLock(BackendId),
}
