//! MultiXacts: a set of transactions that together hold a row lock, stored in a tuple's xmax
//! when more than one transaction share-locks the row (`src/backend/access/transam/multixact.c`,
//! the 9.3+ design; `HEAP_XMAX_IS_MULTI` in `src/include/access/htup_details.h`).
//!
//! What is modelled:
//!
//! * [`MultiXactId`]s are allocated in order under `MultiXactGenLock` held exclusively
//!   (`GetNewMultiXactId`), and a multi's membership never changes once created: adding a locker
//!   makes a new multi of the old one's running members plus the newcomer (`MultiXactIdExpand`).
//! * `MultiXactIdSetOldestMember`: at a transaction's first row lock or update the backend
//!   takes `MultiXactGenLock` shared once and records the next id as its `OldestMemberMXactId`
//!   (no multi it will ever belong to is older); the slot is cleared at transaction end
//!   (`AtEOXact_MultiXact`), after the transaction has left CLOG's in-progress state.
//! * Truncation: every multi older than the oldest `OldestMemberMXactId` of any backend (or
//!   than the next id, when no backend has one) can have no running member, so its member list
//!   is dropped when the next multi is allocated, and a look-up of a dropped (or unknown) id
//!   answers "no members", which callers read as "every locker has ended". Memory thus holds
//!   at most the multis created since the oldest running locker began locking. PostgreSQL
//!   truncates `pg_multixact` at vacuum, below the oldest multi any tuple may still carry
//!   (tuples are frozen first); here no tuple needs a dropped multi's members, since a multi
//!   with no running member means the same as an ended single locker.
//!
//! Not modelled: the `pg_multixact` offsets and members SLRUs (the members live in memory
//! under a plain mutex, which stands in for `MultiXactOffsetSLRU`/`MultiXactMemberSLRU` and is
//! not counted), their WAL and persistence (a restarted engine starts again at id 1; a stale
//! multi in a tuple then at worst makes a writer wait for the running members of a new multi
//! with the same id), `MultiXactIdSetOldestVisible` (reading members returns a copy, so no
//! reader can see them truncated underneath), member wraparound and multis with an updater
//! member (the engine creates only lock-only multis).

use lockstack_common::sync::{AtomicU32, AtomicU64, Ordering};
use std::collections::VecDeque;

use lockstack_common::sync::hook::{self, Access};
use lockstack_common::{BackendId, TransactionId};
use lockstack_lwlock::{LwLock, LwLockKind, TrancheId};

/// A MultiXact's id (`MultiXactId`, a `uint32`; 0 is `InvalidMultiXactId`, ids start at 1,
/// `FirstMultiXactId`, and wrap around skipping 0).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MultiXactId(pub u32);

impl MultiXactId {
    /// `InvalidMultiXactId`.
    pub const INVALID: MultiXactId = MultiXactId(0);
    /// `FirstMultiXactId`.
    pub const FIRST: MultiXactId = MultiXactId(1);

    /// True unless invalid.
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }

    /// `MultiXactIdPrecedes`: modulo-2^32 comparison, as for xids.
    pub fn precedes(self, other: MultiXactId) -> bool {
        (self.0.wrapping_sub(other.0) as i32) < 0
    }

    /// The id after this one, skipping `InvalidMultiXactId` on wraparound.
    fn next(self) -> MultiXactId {
        let n = self.0.wrapping_add(1);
        MultiXactId(if n == 0 { 1 } else { n })
    }
}

/// A member's lock strength (`MultiXactStatus`, `src/include/access/multixact.h`, 9.3+), as
/// far as the engine creates multis: pgbench's tables only `ForShare` lockers; user tables
/// (`crate::session::RowLockStrength`) lockers of all four strengths and a non-key updater
/// (`MultiXactStatusUpdate`, a key-changing updater in a multi, cannot occur: it conflicts
/// with every locker).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MultiXactStatus {
    /// `MultiXactStatusForKeyShare` (`FOR KEY SHARE`; user tables only).
    ForKeyShare,
    /// `MultiXactStatusForShare` (`FOR SHARE`).
    ForShare,
    /// `MultiXactStatusForNoKeyUpdate` (`FOR NO KEY UPDATE`; user tables only).
    ForNoKeyUpdate,
    /// `MultiXactStatusForUpdate` (`FOR UPDATE`; in a multi only on user tables).
    ForUpdate,
    /// `MultiXactStatusNoKeyUpdate`: the member updated the row without changing its key,
    /// while others held it `FOR KEY SHARE` (user tables only). A multi has at most one
    /// updater member, and its xmax is then not lock-only.
    NoKeyUpdate,
    /// `MultiXactStatusUpdate`: the member deleted the row or changed its key while other
    /// members of its own transaction (an enclosing or earlier subtransaction) held a lock on
    /// it (user tables with savepoints only). Its xmax is not lock-only.
    Update,
}

impl MultiXactStatus {
    /// Whether the member updated the row rather than locked it (`ISUPDATE_from_mxstatus`).
    pub fn is_update(self) -> bool {
        matches!(self, MultiXactStatus::NoKeyUpdate | MultiXactStatus::Update)
    }
}

/// One member of a multi (`MultiXactMember`).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MultiXactMember {
    /// The member transaction.
    pub xid: TransactionId,
    /// Its lock strength.
    pub status: MultiXactStatus,
}

/// Member lists of the multis from `base` on, in id order (index = id - base).
struct Members {
    base: MultiXactId,
    next: MultiXactId,
    lists: VecDeque<Box<[MultiXactMember]>>,
}

/// The shared MultiXact state: the next id, its `MultiXactGenLock`, each backend's
/// `OldestMemberMXactId`, and the member lists still needed.
pub struct MultiXactStore {
    /// `MultiXactGenLock` (tranche "MultiXactGen"): shared to read the next id
    /// (`MultiXactIdSetOldestMember`), exclusive to allocate one (`GetNewMultiXactId`).
    gen_lock: LwLock,
    /// The member lists; a plain mutex standing in for the pg_multixact SLRUs' locks.
    members: lockstack_common::sync::Mutex<Members>,
    /// The next id, readable under `gen_lock` shared (written only under it exclusive).
    next: AtomicU32,
    /// `OldestMemberMXactId[backend]` (0: none).
    oldest_member: Box<[AtomicU32]>,
    /// Multis created so far.
    created: AtomicU64,
    /// The updater member of each multi that has one (never dropped: an updating multi
    /// decides its version's visibility for as long as the version exists, which
    /// PostgreSQL's pg_multixact guarantees until vacuum freezes the tuple).
    updaters: lockstack_common::sync::Mutex<std::collections::HashMap<u32, TransactionId>>,
}

impl std::fmt::Debug for MultiXactStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultiXactStore")
            .field("next", &self.next.load(Ordering::Relaxed))
            .field("retained", &self.retained())
            .finish()
    }
}

impl MultiXactStore {
    /// An empty store for `max_backends` backends whose `MultiXactGenLock` is of `kind`.
    pub fn new(kind: LwLockKind, max_backends: usize) -> MultiXactStore {
        let oldest_member: Box<[AtomicU32]> = (0..max_backends).map(|_| AtomicU32::new(0)).collect();
        // For a simulation's hottest-lines table (the boxed slice does not move with the store):
        // unpadded, as PostgreSQL's array, so one line holds sixteen backends' slots.
        lockstack_common::sync::hook::name_elements(&oldest_member, "MultiXact OldestMemberMXactId");
        MultiXactStore {
            gen_lock: LwLock::new(kind, TrancheId::MULTI_XACT_GEN, 0),
            members: lockstack_common::sync::Mutex::new(Members {
                base: MultiXactId::FIRST,
                next: MultiXactId::FIRST,
                lists: VecDeque::new(),
            }),
            next: AtomicU32::new(MultiXactId::FIRST.0),
            oldest_member,
            updaters: lockstack_common::sync::Mutex::new(std::collections::HashMap::new()),
            created: AtomicU64::new(0),
        }
    }

    /// `MultiXactIdSetOldestMember` for `backend`: if its slot is empty, reads the next id under
    /// `MultiXactGenLock` shared and records it. Callers call this before their transaction's
    /// first row lock or update (and may call it again: later calls in the same transaction
    /// take no lock).
    ///
    /// # Panics
    /// If `backend` is out of range.
    pub fn set_oldest_member(&self, backend: BackendId) {
        let slot = &self.oldest_member[backend.index()];
        if slot.load(Ordering::Relaxed) != 0 {
            return;
        }
        let _g = self.gen_lock.shared();
        // Stored while the lock is held: an allocator (exclusive) sees either no slot or this
        // value, never an id newer than one it handed out after our read.
        slot.store(self.next.load(Ordering::Acquire), Ordering::Release);
    }

    /// `AtEOXact_MultiXact` for `backend`: clears its `OldestMemberMXactId`. Call only once the
    /// transaction is no longer in progress in CLOG.
    ///
    /// # Panics
    /// If `backend` is out of range.
    pub fn at_eoxact(&self, backend: BackendId) {
        self.oldest_member[backend.index()].store(0, Ordering::Release);
    }

    /// `backend`'s `OldestMemberMXactId` (invalid if it has none).
    ///
    /// # Panics
    /// If `backend` is out of range.
    pub fn oldest_member(&self, backend: BackendId) -> MultiXactId {
        MultiXactId(self.oldest_member[backend.index()].load(Ordering::Acquire))
    }

    /// `MultiXactIdCreateFromMembers`: allocates a new id under `MultiXactGenLock` exclusive and
    /// records `members` as its immutable membership. Also drops the member lists of multis
    /// older than every backend's `OldestMemberMXactId` (see the module documentation).
    ///
    /// Continues an earlier run's id sequence at `next` (the control file's `nextMulti`), so
    /// that no multi id left in a row's xmax by that run is handed out again; the earlier
    /// run's multis read as having no members (all ended, as they are after a clean shutdown).
    /// An invalid `next` (0) starts at [`MultiXactId::FIRST`].
    ///
    /// # Panics
    /// If this store has already created a multi.
    pub fn start_at(&self, next: MultiXactId) {
        let next = if next.is_valid() { next } else { MultiXactId::FIRST };
        let _g = self.gen_lock.exclusive();
        let mut st = self.members.lock();
        assert!(
            st.lists.is_empty() && self.created.load(Ordering::Relaxed) == 0,
            "start_at after a multi was created"
        );
        st.base = next;
        st.next = next;
        self.next.store(next.0, Ordering::Release);
    }

    /// # Panics
    /// If `members` is empty.
    pub fn create(&self, members: &[MultiXactMember]) -> MultiXactId {
        assert!(!members.is_empty(), "a MultiXact has members");
        let _g = self.gen_lock.exclusive();
        let id = MultiXactId(self.next.load(Ordering::Acquire));
        self.next.store(id.next().0, Ordering::Release);
        // Oldest multi a running transaction may belong to: new slots can only be set to the
        // id after `id` or later while we hold the lock exclusively.
        let mut horizon = id;
        for s in self.oldest_member.iter() {
            let m = MultiXactId(s.load(Ordering::Acquire));
            if m.is_valid() && m.precedes(horizon) {
                horizon = m;
            }
        }
        let mut st = self.members.lock();
        debug_assert_eq!(st.next, id);
        while st.base.precedes(horizon) && !st.lists.is_empty() {
            st.lists.pop_front();
            st.base = st.base.next();
        }
        if st.lists.is_empty() {
            st.base = id;
        }
        st.lists.push_back(members.into());
        hook::touch_slice(st.lists.back().map_or(&[][..], |l| &l[..]), Access::Write);
        st.next = id.next();
        drop(st);
        if let Some(u) = members.iter().find(|m| m.status.is_update()) {
            self.updaters.lock().insert(id.0, u.xid);
        }
        self.created.fetch_add(1, Ordering::Relaxed);
        id
    }

    /// `GetMultiXactIdMembers`: a copy of `multi`'s members. Empty if the multi is invalid,
    /// was dropped (all its members had ended) or is unknown (created before a restart).
    pub fn members(&self, multi: MultiXactId) -> Vec<MultiXactMember> {
        let st = self.members.lock();
        if !multi.is_valid() || multi.precedes(st.base) || !multi.precedes(st.next) {
            return Vec::new();
        }
        let i = multi.0.wrapping_sub(st.base.0) as usize;
        hook::touch_slice(st.lists.get(i).map_or(&[][..], |l| &l[..]), Access::Read);
        st.lists.get(i).map(|l| l.to_vec()).unwrap_or_default()
    }

    /// `MultiXactIdGetUpdateXid`: the updater member of `multi`, if it has one (kept even
    /// after the member list is dropped).
    pub fn update_xid(&self, multi: MultiXactId) -> Option<TransactionId> {
        self.updaters.lock().get(&multi.0).copied()
    }

    /// Multis whose member lists are kept now (the memory in use, in lists).
    pub fn retained(&self) -> usize {
        self.members.lock().lists.len()
    }

    /// Multis created since the store was built.
    pub fn created(&self) -> u64 {
        self.created.load(Ordering::Relaxed)
    }

    /// The id the next multi will get (`nextMXact`), read without the lock.
    pub fn next_id(&self) -> MultiXactId {
        MultiXactId(self.next.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn share(x: u32) -> MultiXactMember {
        MultiXactMember { xid: TransactionId(x), status: MultiXactStatus::ForShare }
    }

    #[test]
    fn member_lists_are_reported_where_they_are_written_and_read() {
        use lockstack_common::sync::hook::{self, Access, Counting, Simulation};
        let s = MultiXactStore::new(LwLockKind::Atomic, 1);
        let c = std::sync::Arc::new(Counting::with_log());
        let g = hook::install(Simulation::new(Box::new(c.clone())));
        let m = s.create(&[share(10), share(11)]);
        assert_eq!(s.members(m).len(), 2);
        drop(g);
        let (at, len) = {
            let st = s.members.lock();
            let l = st.lists.back().expect("kept");
            (l.as_ptr() as usize, std::mem::size_of_val(&l[..]))
        };
        assert!(c.touched(at, len, Access::Write), "the members are written");
        assert!(c.touched(at, len, Access::Read), "and read back");
    }

    #[test]
    fn ids_are_allocated_in_order_and_members_are_kept_while_a_member_may_run() {
        let s = MultiXactStore::new(LwLockKind::Atomic, 2);
        s.set_oldest_member(BackendId(0));
        assert_eq!(s.oldest_member(BackendId(0)), MultiXactId(1));
        let a = s.create(&[share(10), share(11)]);
        let b = s.create(&[share(10), share(12)]);
        assert_eq!((a, b), (MultiXactId(1), MultiXactId(2)));
        assert_eq!(s.members(a), vec![share(10), share(11)]);
        assert_eq!(s.retained(), 2, "backend 0's oldest member is 1: nothing dropped");
        // Backend 0 ends; backend 1 starts locking after multi 2 was allocated.
        s.at_eoxact(BackendId(0));
        s.set_oldest_member(BackendId(1));
        assert_eq!(s.oldest_member(BackendId(1)), MultiXactId(3));
        let c = s.create(&[share(13), share(14)]);
        assert_eq!(c, MultiXactId(3));
        assert_eq!(s.retained(), 1, "multis 1 and 2 can have no running member");
        assert!(s.members(a).is_empty() && s.members(b).is_empty());
        assert_eq!(s.members(c).len(), 2);
        assert!(s.members(MultiXactId(4)).is_empty(), "not yet allocated");
        assert!(s.members(MultiXactId::INVALID).is_empty());
        assert_eq!(s.created(), 3);
    }

    #[test]
    fn oldest_member_is_set_once_per_transaction() {
        let s = MultiXactStore::new(LwLockKind::Atomic, 1);
        s.set_oldest_member(BackendId(0));
        s.create(&[share(1)]);
        s.set_oldest_member(BackendId(0));
        assert_eq!(s.oldest_member(BackendId(0)), MultiXactId(1), "kept until transaction end");
        s.at_eoxact(BackendId(0));
        assert!(!s.oldest_member(BackendId(0)).is_valid());
    }

    #[test]
    fn ids_wrap_around_skipping_invalid() {
        assert_eq!(MultiXactId(u32::MAX).next(), MultiXactId(1));
        assert!(MultiXactId(u32::MAX).precedes(MultiXactId(1)));
        assert!(!MultiXactId(1).precedes(MultiXactId(1)));
    }
}
