//! The backend-local lock table: PostgreSQL's `LOCALLOCK` hash (`lock.c`, keyed by
//! `LOCALLOCKTAG` = lock tag + mode), with its per-owner acquisition counts.
//!
//! PostgreSQL keeps it in a dynahash table (initial size 16) and, as here, hashes twice: the
//! local table's own hash of the 20-byte `LOCALLOCKTAG` on every search, and
//! `LockTagHashCode` of the tag (partition, strong-lock counter) once when an entry is created,
//! stored in the entry (`LOCALLOCK.hashcode`) for the release. Here the table is a small
//! open-addressing table (linear probing, backward-shift deletion, no tombstones) whose key is
//! the tag and mode packed in two machine words, hashed with two multiplications (a dynahash
//! search hashes the key with `hash_bytes`, then walks a bucket chain). Nothing is allocated
//! on the acquire or release path except when the table doubles (load factor above 3/4), as
//! dynahash expands.

use crate::mode::LockMode;
use crate::tag::{LockTag, LockTagKind};

/// One entry's counts (`LOCALLOCK`: `nLocks` split by owner, `holdsStrongLockCount`,
/// `hashcode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LocalLock {
    /// Acquisitions owned by the session.
    pub(crate) session: u32,
    /// Acquisitions owned by the current transaction.
    pub(crate) xact: u32,
    /// This entry bumped a strong-lock counter (`holdsStrongLockCount`).
    pub(crate) strong: bool,
    /// `LockTag::hash_code` of the tag (`LOCALLOCK.hashcode`), kept for the release.
    pub(crate) hash: u32,
}

/// A (tag, mode) key (`LOCALLOCKTAG`) packed in two words.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LocalKey {
    k0: u64,
    k1: u64,
}

impl LocalKey {
    /// The key of `mode` on `tag`.
    #[inline]
    pub(crate) fn new(tag: &LockTag, mode: LockMode) -> LocalKey {
        let k0 = u64::from(tag.field1) | (u64::from(tag.field2) << 32);
        let k1 = u64::from(tag.field3)
            | (u64::from(tag.field4) << 32)
            | ((tag.kind as u64) << 48)
            | ((mode as u64) << 56);
        LocalKey { k0, k1 }
    }
}

/// A slot: empty when `k1` is 0 (a real key has a mode, 1..=8, in its top byte).
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    k0: u64,
    k1: u64,
    lock: LocalLock,
}

impl Slot {
    #[inline]
    fn is_empty(&self) -> bool {
        self.k1 == 0
    }

    fn tag_and_mode(&self) -> (LockTag, LockMode) {
        let kind = LockTagKind::from_u8((self.k1 >> 48) as u8)
            .expect("a local key is built from a real tag (LocalKey::new), so its kind byte is valid");
        let tag = LockTag {
            field1: self.k0 as u32,
            field2: (self.k0 >> 32) as u32,
            field3: self.k1 as u32,
            field4: (self.k1 >> 32) as u16,
            kind,
        };
        let mode = LockMode::from_number((self.k1 >> 56) as usize)
            .expect("a local key is built from a real mode (LocalKey::new), so its mode byte is 1..=8");
        (tag, mode)
    }
}

/// Initial capacity (PostgreSQL creates the LOCALLOCK hash with 16 entries).
const INITIAL_CAPACITY: usize = 16;

/// The home slot of a key: the high half of a multiplicative hash of both words (every key
/// bit reaches the high half through the multiplications).
#[inline]
fn home(k0: u64, k1: u64, mask: usize) -> usize {
    let h = (k0.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ k1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (h >> 32) as usize & mask
}

/// The local lock table of one backend (see the module docs).
#[derive(Debug)]
pub(crate) struct LocalTable {
    slots: Box<[Slot]>,
    /// `slots.len() - 1` (the length is a power of two).
    mask: usize,
    len: usize,
    /// The table doubles before `len` would exceed this (3/4 of the slots).
    max_len: usize,
    /// Survivors of [`retain`](Self::retain), reused to rebuild the table without allocating.
    scratch: Vec<Slot>,
}

impl Default for LocalTable {
    fn default() -> Self {
        LocalTable {
            slots: vec![Slot::default(); INITIAL_CAPACITY].into_boxed_slice(),
            mask: INITIAL_CAPACITY - 1,
            len: 0,
            max_len: INITIAL_CAPACITY / 4 * 3,
            scratch: Vec::new(),
        }
    }
}

impl LocalTable {
    /// Number of (tag, mode) entries.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn mask(&self) -> usize {
        self.mask
    }

    /// The entry of `key`, or the empty slot where it would go (`Err`). The table must have
    /// room for one more entry ([`reserve_one`](Self::reserve_one)) if the `Err` slot is to be
    /// filled with [`insert_at`](Self::insert_at).
    #[inline]
    pub(crate) fn find(&self, key: &LocalKey) -> Result<usize, usize> {
        let mask = self.mask();
        let mut i = home(key.k0, key.k1, mask);
        loop {
            let s = &self.slots[i];
            if s.k0 == key.k0 && s.k1 == key.k1 {
                return Ok(i);
            }
            if s.is_empty() {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Makes room for one more entry, doubling the table when it would be more than 3/4 full.
    /// Slot indexes found before a call are invalid after it.
    #[inline]
    pub(crate) fn reserve_one(&mut self) {
        if self.len == self.max_len {
            self.grow();
        }
    }

    #[cold]
    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); n].into_boxed_slice());
        self.mask = n - 1;
        self.max_len = n / 4 * 3;
        for s in old.iter().filter(|s| !s.is_empty()) {
            self.place(*s);
        }
    }

    /// Puts `s` (whose key is not in the table) into its first free slot.
    fn place(&mut self, s: Slot) {
        let mask = self.mask();
        let mut i = home(s.k0, s.k1, mask);
        while !self.slots[i].is_empty() {
            i = (i + 1) & mask;
        }
        self.slots[i] = s;
    }

    /// Fills the empty slot `at` that [`find`](Self::find) returned for `key` (no other
    /// change to the table in between).
    #[inline]
    pub(crate) fn insert_at(&mut self, at: usize, key: &LocalKey, lock: LocalLock) {
        debug_assert!(self.slots[at].is_empty());
        debug_assert!(self.len < self.max_len, "reserve_one first");
        self.slots[at] = Slot { k0: key.k0, k1: key.k1, lock };
        self.len += 1;
    }

    /// The counts of the entry at `at` (an `Ok` of [`find`](Self::find)).
    #[inline]
    pub(crate) fn get_mut(&mut self, at: usize) -> &mut LocalLock {
        &mut self.slots[at].lock
    }

    /// The counts of `key`'s entry, if any.
    pub(crate) fn get(&self, key: &LocalKey) -> Option<&LocalLock> {
        self.find(key).ok().map(|i| &self.slots[i].lock)
    }

    /// Removes the entry at `at` (an `Ok` of [`find`](Self::find)) and returns its counts;
    /// the entries after it in its probe run move back so that no tombstone is left.
    #[inline]
    pub(crate) fn remove_at(&mut self, at: usize) -> LocalLock {
        let mask = self.mask();
        let removed = self.slots[at].lock;
        self.len -= 1;
        let mut hole = at;
        let mut j = at;
        loop {
            j = (j + 1) & mask;
            let (k0, k1) = (self.slots[j].k0, self.slots[j].k1);
            if k1 == 0 {
                break;
            }
            // Slot j may fill the hole unless its home lies cyclically in (hole, j].
            let h = home(k0, k1, mask);
            let stays = if hole <= j { hole < h && h <= j } else { hole < h || h <= j };
            if !stays {
                self.slots[hole] = self.slots[j];
                hole = j;
            }
        }
        // Emptiness is `k1 == 0` alone; the rest of the slot is dead.
        self.slots[hole].k1 = 0;
        removed
    }

    /// Every entry as (tag, mode, counts), in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (LockTag, LockMode, &LocalLock)> {
        self.slots.iter().filter(|s| !s.is_empty()).map(|s| {
            let (t, m) = s.tag_and_mode();
            (t, m, &s.lock)
        })
    }

    /// Keeps the entries for which `f` returns true (`f` may change their counts) and removes
    /// the others, as `LockReleaseAll`'s walk over the LOCALLOCK table does. Does nothing (and
    /// calls nothing) on an empty table.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(LockTag, LockMode, &mut LocalLock) -> bool) {
        if self.len == 0 {
            return;
        }
        let mut removed = 0;
        for s in self.slots.iter_mut().filter(|s| !s.is_empty()) {
            let (t, m) = s.tag_and_mode();
            if !f(t, m, &mut s.lock) {
                *s = Slot::default();
                removed += 1;
            }
        }
        if removed == 0 {
            return;
        }
        self.len -= removed;
        if self.len == 0 {
            // Everything went (the usual end of a transaction): no probe runs left to repair.
            return;
        }
        // Removing entries left holes in probe runs: rebuild from the survivors.
        let mut keep = std::mem::take(&mut self.scratch);
        keep.clear();
        for s in self.slots.iter_mut().filter(|s| !s.is_empty()) {
            keep.push(std::mem::take(s));
        }
        for s in keep.drain(..) {
            self.place(s);
        }
        self.scratch = keep;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use lockstack_common::{
        BackendId, BlockNumber, LocalTransactionId, Oid, TransactionId, VirtualTransactionId,
    };
    use std::collections::HashMap;

    fn check(t: &LocalTable, model: &HashMap<(LockTag, LockMode), LocalLock>) {
        assert_eq!(t.len(), model.len());
        for (&(tag, mode), l) in model {
            assert_eq!(t.get(&LocalKey::new(&tag, mode)), Some(l), "{tag} {mode:?}");
        }
        let mut seen: Vec<_> = t.iter().map(|(tag, m, l)| ((tag, m), *l)).collect();
        seen.sort_by_key(|((t, m), _)| (t.kind, t.field1, t.field2, t.field3, t.field4, *m));
        let mut want: Vec<_> = model.iter().map(|(k, l)| (*k, *l)).collect();
        want.sort_by_key(|((t, m), _)| (t.kind, t.field1, t.field2, t.field3, t.field4, *m));
        assert_eq!(seen, want);
    }

    /// Every kind of tag, every mode and extreme field values come back out of a key intact.
    #[test]
    fn keys_round_trip_every_kind_and_mode() {
        let vxid = VirtualTransactionId { backend_id: BackendId(u32::MAX), local_xid: LocalTransactionId(7) };
        let tags = [
            LockTag::relation(Oid(u32::MAX), Oid(u32::MAX)),
            LockTag::tuple(Oid(5), Oid(16384), BlockNumber(u32::MAX), u16::MAX),
            LockTag::transaction(TransactionId(740)),
            LockTag::virtual_transaction(vxid),
            LockTag::object(Oid(5), Oid(1259), Oid(42), 3),
            LockTag::advisory_int8(Oid(5), -1),
            LockTag::advisory_int4(Oid(5), -1, i32::MIN),
        ];
        let mut t = LocalTable::default();
        for tag in tags {
            for mode in LockMode::ALL {
                let key = LocalKey::new(&tag, mode);
                t.reserve_one();
                let at = t.find(&key).expect_err("new key");
                t.insert_at(at, &key, LocalLock { session: 1, ..Default::default() });
                assert_eq!(t.slots[at].tag_and_mode(), (tag, mode));
            }
        }
        assert_eq!(t.len(), tags.len() * 8);
        assert_eq!(t.iter().count(), tags.len() * 8);
    }

    /// Inserts, count changes, removals and retains against a `HashMap`, at loads up to 3/4 (so
    /// that probe runs form, wrap around the end, and backward shifts move entries; the test
    /// checks that displaced entries were seen).
    #[test]
    fn matches_a_hash_map_under_collisions_and_growth() {
        let mut t = LocalTable::default();
        let mut model: HashMap<(LockTag, LockMode), LocalLock> = HashMap::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let (mut inserts, mut removes, mut displaced) = (0, 0, 0);
        for step in 0..40_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let tag = match x % 3 {
                0 => LockTag::relation(Oid(5), Oid(16384 + (x >> 8) as u32 % 40)),
                1 => LockTag::transaction(TransactionId(700 + (x >> 8) as u32 % 20)),
                _ => LockTag::advisory_int8(Oid(5), ((x >> 8) % 10) as i64),
            };
            let mode = LockMode::ALL[((x >> 20) % 8) as usize];
            let hash = tag.hash_code();
            let key = LocalKey::new(&tag, mode);
            if !(x >> 30).is_multiple_of(3) {
                t.reserve_one();
                match t.find(&key) {
                    Ok(i) => t.get_mut(i).xact += 1,
                    Err(i) => {
                        let l = LocalLock { session: 0, xact: 1, strong: false, hash };
                        t.insert_at(i, &key, l);
                        inserts += 1;
                    }
                }
                model.entry((tag, mode)).or_insert(LocalLock { hash, ..Default::default() }).xact += 1;
            } else if let Ok(i) = t.find(&key) {
                let removed = t.remove_at(i);
                assert_eq!(Some(removed), model.remove(&(tag, mode)));
                removes += 1;
            } else {
                assert!(!model.contains_key(&(tag, mode)));
            }
            if step % 997 == 0 {
                // Release-all: drop entries with an even count, keep the rest.
                t.retain(|_, _, l| l.xact % 2 == 1);
                model.retain(|_, l| l.xact % 2 == 1);
            }
            if step % 101 == 0 {
                check(&t, &model);
                let mask = t.mask();
                displaced += t
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(i, s)| !s.is_empty() && home(s.k0, s.k1, mask) != *i)
                    .count();
            }
        }
        check(&t, &model);
        assert!(inserts > 1000 && removes > 1000 && displaced > 100, "{inserts} {removes} {displaced}");
        assert!(t.slots.len() > INITIAL_CAPACITY);
    }
}
