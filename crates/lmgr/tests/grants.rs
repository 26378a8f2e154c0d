//! Property test: every grant decision of the lock manager (NOWAIT requests, so nobody ever
//! queues) against an oracle that knows only the conflict table and who holds what; plus the
//! fast-path bookkeeping (spills, transfers, conflicts seen through fast path).

mod common;

use std::collections::{BTreeSet, HashMap};

use common::{assert_empty, lmgr_with};
use lockstack_lmgr::{
    Backend, BackendId, FastPath, LockAcquireResult, LockError, LockMode, LockOptions, LockTag, LockTagKind,
    Oid,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Lock { b: usize, rel: usize, mode: usize, session: bool },
    Unlock { b: usize, rel: usize, mode: usize, session: bool },
    EndXact { b: usize },
    ReleaseAll { b: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 0..4usize, 0..8usize, prop::bool::weighted(0.2))
            .prop_map(|(b, rel, mode, session)| Op::Lock { b, rel, mode, session }),
        3 => (0..3usize, 0..4usize, 0..8usize, prop::bool::weighted(0.2))
            .prop_map(|(b, rel, mode, session)| Op::Unlock { b, rel, mode, session }),
        1 => (0..3usize).prop_map(|b| Op::EndXact { b }),
        1 => (0..3usize).prop_map(|b| Op::ReleaseAll { b }),
    ]
}

/// Per backend: (tag, mode) → (session count, transaction count).
type Held = HashMap<(LockTag, LockMode), (u32, u32)>;

fn tags(db: Oid) -> [LockTag; 4] {
    [
        LockTag::relation(db, Oid(16384)),
        LockTag::relation(db, Oid(16385)),
        // A shared catalog (database 0): never fast path.
        LockTag::relation(Oid(0), Oid(1262)),
        LockTag::advisory_int8(db, 42),
    ]
}

fn run(ops: &[Op], fast_path: FastPath, partitions: usize) -> Result<(), TestCaseError> {
    let lmgr = lmgr_with(3, |c| {
        c.fast_path = fast_path;
        c.partitions = partitions;
    });
    let tags = tags(lmgr.database());
    let mut bs: Vec<Backend> = (0..3).map(|i| lmgr.attach(BackendId(i)).unwrap()).collect();
    for b in &mut bs {
        b.start_transaction();
    }
    let mut held: Vec<Held> = vec![Held::new(); 3];
    for op in ops {
        match *op {
            Op::Lock { b, rel, mode, session } => {
                let (tag, mode) = (tags[rel], LockMode::ALL[mode]);
                let already = held[b].get(&(tag, mode)).is_some_and(|(s, x)| s + x > 0);
                let conflict = (0..3).any(|o| {
                    o != b
                        && held[o]
                            .iter()
                            .any(|((t, m), (s, x))| *t == tag && s + x > 0 && m.conflicts_with(mode))
                });
                let got = bs[b].lock(tag, mode, LockOptions { session, dont_wait: true });
                if already {
                    prop_assert_eq!(got, Ok(LockAcquireResult::AlreadyHeld));
                } else if conflict {
                    prop_assert_eq!(got, Err(LockError::NotAvailable { tag, mode }));
                } else {
                    prop_assert_eq!(got, Ok(LockAcquireResult::Acquired));
                }
                if already || !conflict {
                    let e = held[b].entry((tag, mode)).or_default();
                    if session { e.0 += 1 } else { e.1 += 1 }
                }
            }
            Op::Unlock { b, rel, mode, session } => {
                let (tag, mode) = (tags[rel], LockMode::ALL[mode]);
                let e = held[b].entry((tag, mode)).or_default();
                let owned = if session { &mut e.0 } else { &mut e.1 };
                let expect = *owned > 0;
                if expect {
                    *owned -= 1;
                }
                prop_assert_eq!(bs[b].unlock(tag, mode, session), expect);
            }
            Op::EndXact { b } => {
                bs[b].end_transaction();
                bs[b].start_transaction();
                for v in held[b].values_mut() {
                    v.1 = 0;
                }
            }
            Op::ReleaseAll { b } => {
                bs[b].release_all(true);
                held[b].clear();
            }
        }
        held.iter_mut().for_each(|h| h.retain(|_, (s, x)| *s + *x > 0));
        if let Err(e) = lmgr.check_invariants() {
            return Err(TestCaseError::fail(format!("after {op:?}: {e}")));
        }
        for (b, h) in held.iter().enumerate() {
            for ((t, m), (s, x)) in h {
                prop_assert_eq!(bs[b].local_count(*t, *m), s + x);
            }
        }
        // get_lock_conflicts from backend 0 for every tag and mode equals the oracle.
        for tag in tags {
            for mode in LockMode::ALL {
                let got: BTreeSet<u32> =
                    bs[0].get_lock_conflicts(tag, mode).iter().map(|v| v.backend_id.0).collect();
                let want: BTreeSet<u32> = (1..3)
                    .filter(|&o| held[o].keys().any(|(t, m)| *t == tag && m.conflicts_with(mode)))
                    .map(|o| o as u32)
                    .collect();
                prop_assert_eq!(got, want, "conflicts for {} on {}", mode, tag);
            }
        }
    }
    drop(bs);
    assert_empty(&lmgr);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn grants_match_the_conflict_table_fast_path_16(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops, FastPath::PG92, 16)?;
    }

    #[test]
    fn grants_match_the_conflict_table_no_fast_path(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops, FastPath::Off, 1)?;
    }

    #[test]
    fn grants_match_the_conflict_table_groups(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops, FastPath::Groups { groups: 4 }, 128)?;
    }
}

#[test]
fn full_slots_spill_and_strong_locks_transfer() {
    let lmgr = lmgr_with(2, |_| {});
    let db = lmgr.database();
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    let mut b = lmgr.attach(BackendId(1)).unwrap();
    a.start_transaction();
    let vb = b.start_transaction();
    for r in 0..17 {
        a.lock_relation(Oid(20000 + r), LockMode::AccessShare).unwrap();
    }
    let s = lmgr.stats();
    assert_eq!((s.fast_path_grants, s.spills_full, s.main_acquisitions_total()), (16, 1, 1));
    b.lock_relation(Oid(20000), LockMode::RowExclusive).unwrap();
    b.lock_relation(Oid(20000), LockMode::AccessShare).unwrap();
    assert_eq!(lmgr.fast_path_len(), 18);
    // A's strong lock moves B's two fast-path entries, and its own, into the main table, and
    // waits for nobody but B.
    assert_eq!(a.get_lock_conflicts(LockTag::relation(db, Oid(20000)), LockMode::Share), vec![vb]);
    assert!(!a.conditional_lock(LockTag::relation(db, Oid(20000)), LockMode::Share, false).unwrap());
    let s = lmgr.stats();
    assert_eq!(s.transfers, 3);
    assert_eq!(s.not_available, 1);
    assert_eq!(lmgr.strong_lock_total(), 0, "a failed strong request gives its counter back");
    lmgr.check_invariants().unwrap();
    b.end_transaction();
    a.lock(LockTag::relation(db, Oid(20000)), LockMode::Share, LockOptions::XACT).unwrap();
    assert_eq!(lmgr.strong_lock_total(), 1);
    // While the strong lock is held, weak requests on that relation spill.
    b.start_transaction();
    assert!(!b.conditional_lock(LockTag::relation(db, Oid(20000)), LockMode::RowExclusive, false).unwrap());
    b.lock_relation(Oid(20000), LockMode::AccessShare).unwrap();
    assert_eq!(lmgr.stats().spills_strong, 2);
    lmgr.check_invariants().unwrap();
    a.end_transaction();
    b.end_transaction();
    drop((a, b));
    assert_empty(&lmgr);
}

#[test]
fn session_locks_survive_transaction_end() {
    let lmgr = lmgr_with(2, |_| {});
    let t = LockTag::advisory_int8(lmgr.database(), 7);
    let mut a = lmgr.attach(BackendId(0)).unwrap();
    a.start_transaction();
    a.lock(t, LockMode::Exclusive, LockOptions::SESSION).unwrap();
    a.lock(t, LockMode::Exclusive, LockOptions::XACT).unwrap();
    a.end_transaction();
    assert_eq!(a.local_count(t, LockMode::Exclusive), 1);
    assert!(!a.unlock(t, LockMode::Exclusive, false), "no transaction-owned count left");
    assert_eq!(lmgr.main_table_len(), 1);
    assert!(a.unlock(t, LockMode::Exclusive, true));
    drop(a);
    assert_empty(&lmgr);
}

/// The local lock table of one backend against a model of PostgreSQL's LOCALLOCK counts, over
/// enough distinct (tag, mode) pairs to make the table grow several times: re-acquisitions
/// only bump the owner's count (`AlreadyHeld`), unlocks of an owner with no count fail, the
/// shared state follows the first acquisition and the last release, and a transaction's end
/// keeps exactly the session-owned entries.
#[test]
fn local_table_counts_follow_the_owners_over_many_locks() {
    for fast_path in [FastPath::PG92, FastPath::Off] {
        let lmgr = lmgr_with(1, |c| c.fast_path = fast_path);
        let db = lmgr.database();
        let mut a = lmgr.attach(BackendId(0)).unwrap();
        // (session, xact) counts per (tag, mode).
        let mut model: HashMap<(LockTag, LockMode), (u32, u32)> = HashMap::new();
        let weak = [LockMode::AccessShare, LockMode::RowShare, LockMode::RowExclusive];
        let mut x: u64 = 0x853C_49E6_748F_EA9B;
        for round in 0..6 {
            a.start_transaction();
            for _ in 0..600 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = (x >> 8) as u32 % 200;
                let tag = match x % 4 {
                    0 | 1 => LockTag::relation(db, Oid(30_000 + n)),
                    2 => LockTag::advisory_int8(db, i64::from(n)),
                    _ => LockTag::object(db, Oid(1259), Oid(n), 0),
                };
                let mode = weak[((x >> 20) % 3) as usize];
                let session = (x >> 24).is_multiple_of(4);
                let e = model.entry((tag, mode)).or_default();
                if !(x >> 28).is_multiple_of(3) {
                    let r = a.lock(tag, mode, LockOptions { session, dont_wait: true }).unwrap();
                    let want = if e.0 + e.1 == 0 {
                        LockAcquireResult::Acquired
                    } else {
                        LockAcquireResult::AlreadyHeld
                    };
                    assert_eq!(r, want, "{tag} {mode:?}");
                    if session {
                        e.0 += 1;
                    } else {
                        e.1 += 1;
                    }
                } else {
                    let owned = if session { &mut e.0 } else { &mut e.1 };
                    assert_eq!(a.unlock(tag, mode, session), *owned > 0, "{tag} {mode:?}");
                    *owned = owned.saturating_sub(1);
                }
                assert_eq!(a.local_count(tag, mode), e.0 + e.1);
            }
            model.retain(|_, c| c.0 + c.1 > 0);
            assert_eq!(a.local_len(), model.len(), "round {round}");
            for (&(tag, mode), c) in &model {
                assert_eq!(a.local_count(tag, mode), c.0 + c.1);
            }
            // Every held (tag, mode) is in the shared state once: a fast-path slot or the table.
            let rows = lmgr.lock_status();
            let rows: Vec<_> =
                rows.iter().filter(|r| r.tag.kind != LockTagKind::VirtualTransaction).collect();
            assert_eq!(rows.len(), model.len(), "round {round}");
            assert!(rows.iter().all(|r| r.granted && model.contains_key(&(r.tag, r.mode))));
            lmgr.check_invariants().unwrap();
            a.end_transaction();
            for c in model.values_mut() {
                c.1 = 0;
            }
            model.retain(|_, c| c.0 > 0);
            assert_eq!(a.local_len(), model.len(), "round {round}: only session locks survive");
            let rows = lmgr.lock_status();
            assert_eq!(
                rows.iter().filter(|r| r.tag.kind != LockTagKind::VirtualTransaction).count(),
                model.len()
            );
        }
        assert!(model.len() > 20, "enough session locks to exercise the table: {}", model.len());
        a.release_all(true);
        assert_eq!(a.local_len(), 0);
        drop(a);
        assert_empty(&lmgr);
        if fast_path == FastPath::PG92 {
            let s = lmgr.stats();
            assert!(s.fast_path_grants > 0 && s.spills_full > 0, "both paths were used: {s:?}");
        }
    }
}

/// `attach` refuses an id out of range and a second live handle, with typed errors, and lets
/// the id attach again once its handle is dropped; a bad configuration is a typed error too.
#[test]
fn attach_errors_are_typed() {
    use lockstack_lmgr::{AttachError, Lmgr, LmgrConfig, LmgrConfigError};
    let lmgr = lmgr_with(2, |_| {});
    assert_eq!(
        lmgr.attach(BackendId(2)).unwrap_err(),
        AttachError::OutOfRange { id: BackendId(2), max_backends: 2 }
    );
    let a = lmgr.attach(BackendId(1)).unwrap();
    let e = lmgr.attach(BackendId(1)).unwrap_err();
    assert_eq!(e, AttachError::AlreadyAttached { id: BackendId(1), subsystem: "lock manager" });
    assert_eq!(e.to_string(), "backend 1 is already attached to the lock manager");
    drop(a);
    lmgr.attach(BackendId(1)).unwrap();
    let e = Lmgr::new(LmgrConfig { partitions: 3, ..LmgrConfig::default() }).unwrap_err();
    assert_eq!(e, LmgrConfigError::Partitions(3));
    assert_eq!(e.to_string(), "partitions must be a power of two in 1..=1024, got 3");
}
