use super::*;
use crate::engine::EngineConfig;

fn engine(backends: usize, scale: i64) -> Arc<Engine> {
    Engine::new(EngineConfig::new(backends, 8192), scale, 100).unwrap()
}

#[test]
fn an_int4_overflow_is_an_error_and_leaves_the_row_alone() {
    let e = engine(1, 1);
    let mut a = e.session(BackendId(0)).unwrap();
    a.begin();
    assert!(a.update_add(TableId::Branches, 1, 1, i64::from(i32::MAX)).unwrap());
    a.commit().unwrap();
    a.begin();
    let err = a.update_add(TableId::Branches, 1, 1, 1).unwrap_err();
    assert_eq!(err.to_string(), "integer out of range");
    a.rollback().unwrap();
    a.begin();
    assert!(matches!(a.update_add(TableId::Branches, 1, 1, i64::MAX), Err(EngineError::Usage(_))));
    a.rollback().unwrap();
    let row = a.select(TableId::Branches, 1, LockClauseStrength::None).unwrap().map(|r| r.to_vec());
    assert_eq!(row.map(|r| r[1]), Some(i64::from(i32::MAX)), "the failed updates changed nothing");
    // The row is still updatable: no pin or page lock was left behind.
    a.begin();
    assert!(a.update_add(TableId::Branches, 1, 1, -1).unwrap());
    a.commit().unwrap();
}

#[test]
fn update_is_visible_to_the_same_and_later_transactions_only_after_commit() {
    let e = engine(2, 1);
    let mut a = e.session(BackendId(0)).unwrap();
    let mut b = e.session(BackendId(1)).unwrap();
    a.begin();
    assert!(a.update_add(TableId::Accounts, 42, 2, 100).unwrap());
    assert_eq!(
        a.select(TableId::Accounts, 42, LockClauseStrength::None).unwrap().map(|r| r.to_vec()),
        Some(vec![42, 1, 100]),
        "own update visible"
    );
    assert_eq!(
        b.select(TableId::Accounts, 42, LockClauseStrength::None).unwrap().map(|r| r.to_vec()),
        Some(vec![42, 1, 0]),
        "not yet committed"
    );
    a.commit().unwrap();
    assert_eq!(
        b.select(TableId::Accounts, 42, LockClauseStrength::None).unwrap().map(|r| r.to_vec()),
        Some(vec![42, 1, 100])
    );
    a.begin();
    a.update_add(TableId::Accounts, 42, 2, 5).unwrap();
    a.rollback().unwrap();
    assert_eq!(
        b.select(TableId::Accounts, 42, LockClauseStrength::None).unwrap().map(|r| r.to_vec()),
        Some(vec![42, 1, 100]),
        "rolled back"
    );
    assert_eq!(b.select(TableId::Accounts, 100_001, LockClauseStrength::None).unwrap(), None);
    a.insert_history([1, 1, 42, 100, 0]).unwrap();
    let h = b.table_sums(TableId::History).unwrap();
    assert_eq!((h.rows, h.balance), (1, 100));
    let s = b.table_sums(TableId::Accounts).unwrap();
    assert_eq!((s.rows, s.balance), (100_000, 100));
    assert!(s.duplicate_keys.is_empty());
    e.lmgr.check_invariants().unwrap();
}

/// Two clients update the same row concurrently many times: the second waits on the first's
/// transaction lock, then applies its delta on the newest version. No update is lost and
/// every key keeps exactly one live version; dead index entries are killed and pruning
/// keeps the heap smaller than the sum of all versions.
#[test]
fn concurrent_updates_of_one_row_lose_nothing() {
    let e = engine(4, 1);
    let per = 400;
    std::thread::scope(|s| {
        for c in 0..3u32 {
            let e = Arc::clone(&e);
            s.spawn(move || {
                let mut se = e.session(BackendId(c)).unwrap();
                for _ in 0..per {
                    se.begin();
                    se.update_add(TableId::Branches, 1, 1, 1).unwrap();
                    se.update_add(TableId::Tellers, 1 + i64::from(c), 2, 1).unwrap();
                    se.commit().unwrap();
                }
            });
        }
    });
    let mut r = e.session(BackendId(3)).unwrap();
    assert_eq!(r.select(TableId::Branches, 1, LockClauseStrength::None).unwrap().unwrap(), vec![1, 3 * per]);
    let t = r.table_sums(TableId::Tellers).unwrap();
    assert_eq!(t.balance, 3 * per);
    assert!(t.duplicate_keys.is_empty(), "exactly one live version per key");
    let b = r.table_sums(TableId::Branches).unwrap();
    assert_eq!((b.rows, b.balance), (1, 3 * per));
    // With nobody running, every old version is dead to all: one more look-up kills every
    // index entry of the key whose chain is all dead (heap_hot_search_buffer's all_dead),
    // before and after the live version, as PostgreSQL's scan goes on to the key's end.
    let mut before = Vec::new();
    e.table(TableId::Branches).index.as_ref().unwrap().lookup(&r.bb, 1, &mut before).unwrap();
    let live = r.statement(|s| s.fetch_visible(TableId::Branches, 1)).unwrap().unwrap().0;
    let mut left = Vec::new();
    e.table(TableId::Branches).index.as_ref().unwrap().lookup(&r.bb, 1, &mut left).unwrap();
    // Index entries point at HOT chain roots, which share the live version's page: only the
    // live chain's entry is left.
    assert_eq!(left.len(), 1, "dead entries were killed: {before:?} -> {left:?}, live {live:?}");
    assert_eq!(left[0].block, live.block, "the live chain keeps its entry");
    let pages = e.pool.nblocks(TableId::Branches.heap_oid(), ForkNumber::Main).unwrap();
    assert!(
        pages < 3 * per as u32 * 128 / 8192,
        "pruning and page reuse kept the heap below its unpruned size ({pages} pages)"
    );
    e.lmgr.check_invariants().unwrap();
    e.pool.check_invariants().unwrap();
}

/// The index scan goes on past the visible version and kills the key's later entries whose
/// chain is dead to all, as PostgreSQL's does (`index_getnext_slot` until the key's
/// entries run out, `kill_prior_tuple`). Built single-threaded: the branch row moves to
/// block 1 (an old snapshot holds back pruning), then back to block 0 (a pin on block 1
/// stops its prune, and block 0 is on the free-page list), so the live version's entry sorts
/// before the dead entry of block 1; a scan that stopped at the live version kept that entry.
#[test]
fn the_index_scan_kills_dead_entries_after_the_visible_version() {
    let e = engine(4, 1);
    let rel = TableId::Branches.heap_oid();
    let entries = |s: &Session| {
        let mut v = Vec::new();
        e.table(TableId::Branches).index.as_ref().unwrap().lookup(&s.bb, 1, &mut v).unwrap();
        v
    };
    let mut u = e.session(BackendId(0)).unwrap();
    let mut holder = e.session(BackendId(1)).unwrap();
    let pinner = e.session(BackendId(2)).unwrap();
    let mut r = e.session(BackendId(3)).unwrap();
    let mut total = 0;
    let update = |u: &mut Session| {
        u.begin();
        assert!(u.update_add(TableId::Branches, 1, 1, 1).unwrap());
        u.commit().unwrap();
    };
    // 1. An old snapshot keeps every version; the page fills and the row moves to block 1.
    holder.begin();
    holder.select(TableId::Accounts, 1, LockClauseStrength::None).unwrap();
    while !entries(&u).iter().any(|t| t.block == 1) {
        update(&mut u);
        total += 1;
        assert!(total < 1000, "the row never left block 0");
    }
    holder.commit().unwrap();
    // 2. Block 1 pinned: its prune cannot take the cleanup lock, so once it is full the row
    // moves to block 0 (killed, pruned and remembered by the first update's look-up).
    let pin = pinner.bb.read_block(rel, BlockNumber(1)).unwrap();
    loop {
        update(&mut u);
        total += 1;
        assert!(total < 2000, "the row never came back to block 0");
        if entries(&u).first().is_some_and(|t| t.block == 0) {
            break;
        }
    }
    pinner.bb.release(pin);
    let before = entries(&r);
    assert_eq!(before.len(), 2, "the live entry on block 0 and the old one on block 1: {before:?}");
    // 3. Nobody else runs: the look-up finds the live version at the first entry and goes
    // on to kill the second.
    let live = r.statement(|s| s.fetch_visible(TableId::Branches, 1)).unwrap().unwrap();
    assert_eq!((live.0.block, live.1.to_vec()), (0, vec![1, total]));
    let after = entries(&r);
    assert_eq!(after, vec![before[0]], "the dead entry after the visible one was killed");
    e.lmgr.check_invariants().unwrap();
    e.pool.check_invariants().unwrap();
}

/// Two backends holding the same new history page, one after the other, as when a backend
/// finds the shared target on a page that its extender has not yet filled in: whoever
/// locks it first initialises it, and the other adds its row next to the first one
/// instead of initialising the page again (which wiped committed history rows and made
/// the simple-update check fail: account balance change != history delta sum).
#[test]
fn a_new_history_page_is_initialised_once_by_whoever_locks_it_first() {
    let e = engine(3, 1);
    let rel = TableId::History.heap_oid();
    let mut x = e.session(BackendId(0)).unwrap();
    let mut y = e.session(BackendId(1)).unwrap();
    // x extends the relation; before it locks the new page, y finds and fills that page.
    let (xbuf, blk) = x.bb.extend(rel, ForkNumber::Main).unwrap();
    let ybuf = y.bb.read_block(rel, blk).unwrap();
    for (s, buf, delta) in [(&mut y, ybuf, 7), (&mut x, xbuf, 5)] {
        s.begin();
        s.statement(|s| {
            let xid = s.ensure_xid()?;
            let mut tup = tuple::form_tuple(xid, s.cid, &[1, 1, 1, delta, 0], TableId::History.filler(), 0);
            assert!(s.history_add(buf, xid, &mut tup)?, "an empty page has room");
            s.bb.release(buf);
            Ok(())
        })
        .unwrap();
        s.commit().unwrap();
    }
    let mut r = e.session(BackendId(2)).unwrap();
    let h = r.table_sums(TableId::History).unwrap();
    assert_eq!((h.rows, h.balance), (2, 12), "both committed rows are on the page");
    // And the ordinary path: more inserts go to the published target, none is lost.
    for d in 0..300 {
        r.insert_history([1, 1, 1, d, 0]).unwrap();
    }
    let h = r.table_sums(TableId::History).unwrap();
    assert_eq!((h.rows, h.balance), (302, 12 + (0..300).sum::<i64>()));
    e.pool.check_invariants().unwrap();
}

/// The owner of the first xid of a CLOG page is overtaken between being assigned its xid
/// and extending CLOG: the next xid's transaction updates a row and commits first. Its
/// commit must survive the page's extension (zeroing it afterwards read the commit back as
/// "in progress": its new version was hidden and the old one live again, the rare
/// "exactly one live version per key" failures and balance mismatches of pgbench runs).
#[test]
fn commits_stay_committed_across_xid_wraparound() {
    // Start 2,500 xids before 2^32: the CLOG/SUBTRANS extension must step over the wrap
    // (to page 0, skipping the special xids) without zeroing a page holding live commits.
    let mut cfg = EngineConfig::new(2, 8192);
    cfg.procarray.first_xid = TransactionId(u32::MAX - 2_500);
    let e = Engine::new(cfg, 1, 100).unwrap();
    let mut a = e.session(BackendId(0)).unwrap();
    let mut xids = Vec::new();
    for _ in 0..5_000 {
        a.begin();
        assert!(a.update_add(TableId::Branches, 1, 1, 1).unwrap());
        xids.push(a.xid);
        a.commit().unwrap();
    }
    assert!(xids.first().unwrap().0 > u32::MAX - 2_600 && xids.last().unwrap().0 < 3_000, "wrapped");
    for x in &xids {
        assert!(matches!(e.clog.get_status(*x), Ok((XidStatus::Committed, _))), "{x:?} committed");
    }
    let mut r = e.session(BackendId(1)).unwrap();
    let b = r.table_sums(TableId::Branches).unwrap();
    assert_eq!((b.rows, b.balance, b.duplicate_keys.len()), (1, 5_000, 0));
}

/// An update races a transaction that has updated the row and committed (commit record
/// flushed, CLOG set) but not yet left the ProcArray: the window of `CommitTransaction`
/// between `RecordTransactionCommit` and `ProcArrayEndTransaction`. The update's retry
/// (`TM_Updated`) must sleep on the updater's xid lock until it has left, not take snapshot
/// after snapshot that all still show the updater running: that loop never waited, and at
/// 1,000 clients under pg96 its ProcArrayLock traffic kept the updaters' exclusive ends of
/// transaction from ever running. Counted: snapshots before the wait.
#[test]
fn a_retry_waits_for_an_updater_that_has_not_left_the_procarray() {
    for preset in ["pg96", "pg14", "pg91"] {
        let e = Engine::new(EngineConfig::preset(preset, 2, 8192).unwrap(), 1, 100).unwrap();
        let mut a = e.session(BackendId(0)).unwrap();
        a.begin();
        assert!(a.update_add(TableId::Branches, 1, 1, 5).unwrap());
        let ax = a.xid;
        // CommitTransaction as far as CLOG; A stops before ProcArrayEndTransaction.
        let rec = Record { rmid: RM_XACT, info: XLOG_XACT_COMMIT, xid: ax, data: &[0; 8] };
        let lsn = a.wal.insert(&rec).unwrap();
        a.wal.commit(lsn).unwrap();
        e.clog.set_tree_status_as(Some(a.id), ax, &[], XidStatus::Committed, lsn.0).unwrap();
        let snaps = || {
            let s = e.procarray.stats();
            s.snapshots_taken + s.snapshots_reused
        };
        let before = snaps();
        let (spun, spent, updated) = std::thread::scope(|sc| {
            let b = sc.spawn(|| {
                let mut b = e.session(BackendId(1)).unwrap();
                b.begin();
                let r = b.update_add(TableId::Branches, 1, 1, 7).unwrap();
                b.commit().unwrap();
                r
            });
            // B must come to sleep on A's xid lock; a retry that loops instead takes
            // snapshots without end (bounded here so that the test fails, not hangs).
            let spun = loop {
                let w = e.lmgr.waiting_for(BackendId(1));
                if w.is_some_and(|(tag, _)| tag == LockTag::transaction(ax)) {
                    break None;
                }
                let n = snaps() - before;
                if n > 100_000 || b.is_finished() {
                    break Some(n);
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            };
            let spent = snaps() - before;
            // A leaves the ProcArray and releases its locks: B goes on.
            a.finish();
            (spun, spent, b.join().unwrap())
        });
        assert_eq!(spun, None, "{preset}: the retry took snapshots without waiting for {ax:?}");
        // The statement's snapshot, the retry's; then the wait.
        assert!(spent <= 2, "{preset}: {spent} snapshots before the wait");
        assert!(updated, "{preset}");
        let row = a.select(TableId::Branches, 1, LockClauseStrength::None).unwrap().unwrap();
        assert_eq!(row[1], 12, "{preset}: B's update applied on A's committed version");
        e.lmgr.check_invariants().unwrap();
    }
}

#[test]
fn a_commit_on_a_new_clog_page_survives_the_late_extension_by_the_page_first_xid() {
    let boundary = TransactionId(lockstack_clog::CLOG_XACTS_PER_PAGE);
    let mut cfg = EngineConfig::new(3, 8192);
    cfg.procarray.first_xid = boundary;
    let e = Engine::new(cfg, 1, 100).unwrap();
    let mut x = e.session(BackendId(0)).unwrap();
    let mut y = e.session(BackendId(1)).unwrap();
    // x gets the page's first xid (published in the ProcArray) and is preempted before
    // its engine-side bookkeeping. (Before the extension moved under XidGenLock, the page
    // was zeroed only in that bookkeeping, after y's commit below.)
    x.begin();
    assert_eq!(x.pa.assign_xid(), boundary);
    // y gets the next xid, updates a row and commits.
    y.begin();
    assert!(y.update_add(TableId::Branches, 1, 1, 5).unwrap());
    let yxid = y.xid;
    assert_eq!(yxid, boundary.next());
    y.commit().unwrap();
    // x resumes: the rest of its xid assignment, then an update of its own.
    assert_eq!(x.ensure_xid().unwrap(), boundary);
    assert!(x.update_add(TableId::Tellers, 1, 2, 7).unwrap());
    x.commit().unwrap();
    assert!(matches!(e.clog.get_status(yxid), Ok((XidStatus::Committed, _))), "y's commit kept");
    assert!(matches!(e.clog.get_status(boundary), Ok((XidStatus::Committed, _))), "x's commit kept");
    let mut r = e.session(BackendId(2)).unwrap();
    let b = r.table_sums(TableId::Branches).unwrap();
    assert_eq!((b.rows, b.balance, b.duplicate_keys.len()), (1, 5, 0));
    let t = r.table_sums(TableId::Tellers).unwrap();
    assert_eq!((t.rows, t.balance, t.duplicate_keys.len()), (10, 7, 0));
}

/// NOWAIT and SKIP LOCKED on pgbench's tables: a row another transaction holds FOR UPDATE
/// fails NOWAIT with PostgreSQL's message and is skipped by SKIP LOCKED, in both strengths;
/// a row held FOR SHARE is shared by a FOR SHARE NOWAIT; the failed and skipped requests
/// leave no lock behind, so the row is free once the holder commits.
#[test]
fn nowait_and_skip_locked_on_pgbench_tables() {
    let e = engine(2, 1);
    let mut a = e.session(BackendId(0)).unwrap();
    let mut b = e.session(BackendId(1)).unwrap();
    a.begin();
    assert!(a.select(TableId::Accounts, 7, LockClauseStrength::ForUpdate).unwrap().is_some());
    for strength in [LockClauseStrength::ForShare, LockClauseStrength::ForUpdate] {
        b.begin();
        let err = b.select_with(TableId::Accounts, 7, strength, WaitPolicy::Error).unwrap_err();
        assert_eq!(err.to_string(), "could not obtain lock on row in relation \"pgbench_accounts\"");
        b.rollback().unwrap();
        b.begin();
        assert_eq!(b.select_with(TableId::Accounts, 7, strength, WaitPolicy::Skip).unwrap(), None);
        // Another row is not held: locked at once.
        assert!(b.select_with(TableId::Accounts, 8, strength, WaitPolicy::Error).unwrap().is_some());
        b.rollback().unwrap();
    }
    a.commit().unwrap();
    a.begin();
    assert!(a.select(TableId::Accounts, 7, LockClauseStrength::ForShare).unwrap().is_some());
    b.begin();
    assert!(
        b.select_with(TableId::Accounts, 7, LockClauseStrength::ForShare, WaitPolicy::Error)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        b.select_with(TableId::Accounts, 7, LockClauseStrength::ForUpdate, WaitPolicy::Skip).unwrap(),
        None
    );
    b.rollback().unwrap();
    a.commit().unwrap();
    b.begin();
    assert!(
        b.select_with(TableId::Accounts, 7, LockClauseStrength::ForUpdate, WaitPolicy::Error)
            .unwrap()
            .is_some()
    );
    b.commit().unwrap();
}
