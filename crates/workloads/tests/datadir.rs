//! `--data-dir`: create and load, run, shut down cleanly, reopen; refusals of unusable
//! directories.

use std::fs;

use lockstack_engine::datadir::{self, CONTROL_FILE, ClusterState};
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::tables::TableId;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig};
use lockstack_workloads::pgbench::script::Builtin;

fn engine_cfg() -> EngineConfig {
    EngineConfig::preset("pg17", 3, 4096).unwrap()
}

fn pgbench(transactions: u64) -> PgbenchConfig {
    let tpcb = vec![Builtin::find("tpcb-like").unwrap().script()];
    PgbenchConfig { seed: 3, ..PgbenchConfig::new(tpcb, 2, transactions, engine_cfg()) }
}

#[test]
fn initialize_run_shutdown_reopen_keeps_every_change() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let c0 = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c0.state, ClusterState::ShutDown);
    assert!(dir.join("base").read_dir().unwrap().count() >= 7, "heap, index and VM files");
    assert!(dir.join("pg_wal").read_dir().unwrap().count() >= 1);

    // Two runs, each on a reopened directory; the second sees the first's history.
    let mut history_rows = 0;
    let mut last = c0.clone();
    for round in 0..2 {
        let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
        assert_eq!(control, last, "round {round}: open reads what shutdown wrote");
        assert_eq!(datadir::read_control(&dir).unwrap().state, ClusterState::InProduction);
        let r = runner::run_on(&engine, 0.0, &pgbench(40), &|_| {}).unwrap();
        assert_eq!(r.transactions, 80);
        for c in &r.checks {
            assert!(c.ok, "round {round}: {} ({})", c.name, c.detail);
        }
        {
            let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
            let h = s.table_sums(TableId::History).unwrap();
            assert_eq!(h.rows, history_rows + 80, "round {round}");
            history_rows = h.rows;
        }
        let c = datadir::shutdown(&engine, &control).unwrap();
        assert!(c.next_xid >= last.next_xid + 80, "xids continue: {} -> {}", last.next_xid, c.next_xid);
        assert!(c.end_of_wal > last.end_of_wal);
        assert!(c.next_wal_segment > last.next_wal_segment);
        last = c;
    }
    // After the last shutdown, a fresh open sees the balances the runs left, consistent with
    // the history they wrote.
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
    let hist = s.table_sums(TableId::History).unwrap();
    assert_eq!(hist.rows, 160);
    for t in [TableId::Accounts, TableId::Tellers, TableId::Branches] {
        let sums = s.table_sums(t).unwrap();
        assert_eq!(sums.balance, hist.balance, "{t:?} balance = history delta sum after reopen");
        assert!(sums.duplicate_keys.is_empty());
    }
    drop(s);
    datadir::shutdown(&engine, &control).unwrap();
}

#[test]
fn unusable_directories_are_refused_with_a_message() {
    let tmp = tempfile::tempdir().unwrap();
    // Not initialised.
    let e = datadir::open(engine_cfg(), tmp.path()).unwrap_err().to_string();
    assert!(e.contains("not a lockstack data directory"), "{e}");
    // A foreign non-empty directory is not wiped by -i.
    fs::write(tmp.path().join("precious.txt"), "keep me").unwrap();
    let e = datadir::initialize(engine_cfg(), tmp.path(), 1, 100).unwrap_err().to_string();
    assert!(e.contains("not a lockstack data directory"), "{e}");
    assert!(tmp.path().join("precious.txt").exists());
    // What an interrupted -i leaves (no control file yet) is cleared by the next -i; one
    // foreign file among it is not.
    let half = tmp.path().join("half");
    for sub in ["base", "pg_wal", "pg_xact"] {
        fs::create_dir_all(half.join(sub)).unwrap();
    }
    fs::write(half.join("base").join("16384"), "partial").unwrap();
    fs::write(half.join(datadir::LOCK_FILE), "").unwrap();
    fs::write(half.join("notes.txt"), "mine").unwrap();
    let e = datadir::initialize(engine_cfg(), &half, 1, 100).unwrap_err().to_string();
    assert!(e.contains("not a lockstack data directory"), "{e}");
    fs::remove_file(half.join("notes.txt")).unwrap();
    // Nor is anything inside the three subdirectories that lockstack did not write, with or
    // without a control file: it is refused and kept.
    for (extra, is_dir) in [
        ("base/notes.txt", false),
        ("pg_wal/README", false),
        ("base/mine", true),
        ("pg_xact/00AB.bak", false),
    ] {
        let p = half.join(extra);
        if is_dir {
            fs::create_dir_all(&p).unwrap();
        } else {
            fs::write(&p, "keep me").unwrap();
        }
        let e = datadir::initialize(engine_cfg(), &half, 1, 100).unwrap_err().to_string();
        assert!(e.contains("-i will not remove") && e.contains(extra.split('/').nth(1).unwrap()), "{e}");
        assert!(p.exists(), "{extra} was removed");
        if is_dir { fs::remove_dir(&p).unwrap() } else { fs::remove_file(&p).unwrap() }
    }
    datadir::initialize(engine_cfg(), &half, 1, 100).unwrap();
    fs::write(half.join("base").join("notes.txt"), "keep me").unwrap();
    let e = datadir::initialize(engine_cfg(), &half, 1, 100).unwrap_err().to_string();
    assert!(e.contains("-i will not remove"), "a shut-down directory protects them too: {e}");
    assert!(half.join("base").join("notes.txt").exists());
    fs::remove_file(half.join("base").join("notes.txt")).unwrap();
    datadir::initialize(engine_cfg(), &half, 1, 100).unwrap();
    drop(datadir::open(engine_cfg(), &half).unwrap());
    // Opened and never shut down: refused (no crash recovery).
    let dir = tmp.path().join("c");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let (engine, _) = datadir::open(engine_cfg(), &dir).unwrap();
    drop(engine);
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("not shut down cleanly"), "{e}");
    // A corrupt control file names itself.
    fs::write(dir.join(CONTROL_FILE), "{ nope").unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("invalid control file"), "{e}");
    // -i over an existing cluster re-creates it.
    let c = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c.state, ClusterState::ShutDown);
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    datadir::shutdown(&engine, &control).unwrap();
}

/// A loaded scale-1 directory in a temporary directory.
fn loaded() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    (tmp, dir)
}

/// A run of `n` tpcb-like transactions per client on the directory, shut down cleanly.
fn run_and_shut_down(dir: &std::path::Path, n: u64) -> datadir::ControlFile {
    let (engine, control) = datadir::open(engine_cfg(), dir).unwrap();
    runner::run_on(&engine, 0.0, &pgbench(n), &|_| {}).unwrap();
    datadir::shutdown(&engine, &control).unwrap()
}

#[test]
fn a_directory_in_use_is_refused_naming_the_holder() {
    let (_tmp, dir) = loaded();
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let pid = std::process::id();
    assert_eq!(fs::read_to_string(dir.join(datadir::LOCK_FILE)).unwrap().trim(), pid.to_string());
    let in_use = format!(
        "data directory \"{}\" is in use by process {pid} (or by runs reading it with --load-from)",
        dir.display()
    );
    // A second open and a re-initialisation while the first is open.
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert_eq!(e, in_use, "no advice about unclean shutdowns");
    let e = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap_err().to_string();
    assert_eq!(e, in_use);
    // The first user's work is intact.
    let r = runner::run_on(&engine, 0.0, &pgbench(10), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    datadir::shutdown(&engine, &control).unwrap();
    // Still held until the engine is dropped, then free.
    assert!(datadir::open(engine_cfg(), &dir).unwrap_err().to_string().contains("is in use"));
    drop(engine);
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
    assert_eq!(s.table_sums(TableId::History).unwrap().rows, 20);
    drop(s);
    datadir::shutdown(&engine, &control).unwrap();
    drop(engine);
    // -i holds the lock while it loads, and releases it.
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let _held = datadir::lock(&dir).unwrap();
    assert!(datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap_err().to_string().contains("is in use"));
}

const BLOCK: usize = 8192;

/// Changes block `block` of `file` (a main fork, named by its relation number) with `f` and
/// gives it a valid checksum again, as a writer that produced a bad page would: what the page
/// checks behind the checksum must catch.
fn patch_block(file: &std::path::Path, block: usize, f: impl FnOnce(&mut [u8])) {
    let rel = lockstack_common::Oid(file.file_name().unwrap().to_str().unwrap().parse().unwrap());
    let mut bytes = fs::read(file).unwrap();
    let page = &mut bytes[block * BLOCK..(block + 1) * BLOCK];
    f(page);
    lockstack_bufmgr::page::set_relation_checksum(
        page,
        rel,
        lockstack_bufmgr::ForkNumber::Main,
        block as u32,
    );
    fs::write(file, bytes).unwrap();
}

fn xorshift(seed: u64) -> impl FnMut() -> u8 {
    let mut x = seed | 1;
    move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 24) as u8
    }
}

/// Opens `dir` and reads every table through its heap and (for block `key_block`'s keys)
/// through its index; returns the first error. Never shuts down: nothing is written back.
fn read_everything(dir: &std::path::Path, keys: std::ops::Range<i64>) -> Result<(), String> {
    let (engine, _) = datadir::open(engine_cfg(), dir).map_err(|e| e.to_string())?;
    let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
    for t in [TableId::Branches, TableId::Tellers, TableId::History, TableId::Accounts] {
        s.table_sums(t).map_err(|e| e.to_string())?;
    }
    for k in keys {
        s.begin();
        let r = s.select(TableId::Accounts, k, lockstack_engine::session::LockClauseStrength::None);
        s.rollback().map_err(|e| e.to_string())?;
        r.map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn a_corrupted_page_is_an_error_naming_block_and_relation_never_a_panic() {
    let (_tmp, dir) = loaded();
    let control = fs::read(dir.join(CONTROL_FILE)).unwrap();
    let heap = dir.join("base").join(TableId::Accounts.heap_oid().0.to_string());
    let index = dir.join("base").join(TableId::Accounts.index_oid().unwrap().0.to_string());
    let heap_clean = fs::read(&heap).unwrap();
    let index_clean = fs::read(&index).unwrap();
    // Block 5 holds aids 306..=366 (61 rows per page).
    let keys = 300..370;
    let restore = || {
        fs::write(&heap, &heap_clean).unwrap();
        fs::write(&index, &index_clean).unwrap();
        fs::write(dir.join(CONTROL_FILE), &control).unwrap();
    };
    assert_eq!(read_everything(&dir, keys.clone()), Ok(()));
    restore();

    // A whole block of random bytes, in the heap and in the index.
    let mut rnd = xorshift(7);
    patch_block(&heap, 5, |b| b.iter_mut().for_each(|x| *x = rnd()));
    let e = read_everything(&dir, keys.clone()).unwrap_err();
    assert!(e.starts_with("invalid page in block 5 of relation base/16384:"), "{e}");
    restore();
    patch_block(&index, 1, |b| b.iter_mut().for_each(|x| *x = rnd()));
    let e = read_everything(&dir, 1..100_001).unwrap_err();
    assert!(e.starts_with("invalid page in block 1 of relation base/16385:"), "{e}");
    restore();
    // A zeroed index block (what a load cut short can leave): an error, not a panic; a zeroed
    // heap block reads as an empty page, as in PostgreSQL.
    patch_block(&index, 1, |b| b.fill(0));
    let r = std::panic::catch_unwind(|| read_everything(&dir, 1..100_001));
    let e = r.unwrap_or_else(|_| panic!("a zero index page caused a panic")).unwrap_err();
    assert!(e.contains("unexpected zero page"), "{e}");
    restore();

    // Header fields: each damage is caught by verification.
    for (at, bytes) in
        [(10, [0xFF, 0xFF]), (12, [0x10, 0x00]), (14, [0xFF, 0x7F]), (16, [0x01, 0x20]), (18, [0, 0])]
    {
        patch_block(&heap, 5, |b| b[at..at + 2].copy_from_slice(&bytes));
        let e = read_everything(&dir, keys.clone()).unwrap_err();
        assert!(e.starts_with("invalid page in block 5 of relation base/16384"), "offset {at}: {e}");
        restore();
    }
    // Garbage at many offsets (line pointers, tuple headers, columns, free space): an error or
    // a successful read, never a panic. Line pointers and tuple headers are always caught.
    let mut caught = 0;
    for at in (24..BLOCK - 8).step_by(197).chain([24, 28, 32, 200, 280]) {
        let mut rnd = xorshift(at as u64);
        patch_block(&heap, 5, |b| b[at..at + 8].iter_mut().for_each(|x| *x = rnd()));
        let r = std::panic::catch_unwind(|| read_everything(&dir, keys.clone()));
        let r = r.unwrap_or_else(|_| panic!("garbage at offset {at} caused a panic"));
        if let Err(e) = r {
            // A changed balance column passes the page checks and is caught by the totals.
            let totals = e.contains("lost or changed data: pgbench_accounts");
            assert!(e.contains("block 5") || e.contains("out of range") || totals, "offset {at}: {e}");
            caught += 1;
        }
        restore();
    }
    assert!(caught > 0);
    assert_eq!(read_everything(&dir, keys), Ok(()), "the clean page reads again");
}

#[test]
fn a_truncated_relation_file_says_so() {
    let (_tmp, dir) = loaded();
    let heap = dir.join("base").join(TableId::Accounts.heap_oid().0.to_string());
    let clean = fs::read(&heap).unwrap();
    fs::OpenOptions::new().write(true).open(&heap).unwrap().set_len(8000).unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("16384") && e.contains("truncated"), "{e}");
    assert!(!e.contains("does not exist"), "{e}");
    // Cut at a block boundary: the scale check notices the missing pages.
    fs::write(&heap, &clean[..8192 * 100]).unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.contains("pgbench_accounts has 100 pages"), "{e}");
}

#[test]
fn missing_or_truncated_pg_xact_is_refused() {
    let (tmp, dir) = loaded();
    let c = run_and_shut_down(&dir, 40);
    assert!(c.next_xid > 80);
    let seg = dir.join("pg_xact").join("0000");
    let clean = fs::read(&seg).unwrap();
    fs::OpenOptions::new().write(true).open(&seg).unwrap().set_len(100).unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.starts_with("pg_xact is missing or truncated:") && e.contains("0000"), "{e}");
    fs::remove_dir_all(dir.join("pg_xact")).unwrap();
    let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
    assert!(e.starts_with("pg_xact is missing or truncated:") && e.contains("does not exist"), "{e}");
    fs::create_dir(dir.join("pg_xact")).unwrap();
    fs::write(&seg, &clean).unwrap();
    run_and_shut_down(&dir, 5);
    drop(tmp);
}

/// Status bits for transactions not yet assigned (garbage in pg_xact past
/// next_xid) are refused at open naming the segment file; they used to fail the run's first
/// commits with "transaction N is aborted, cannot become committed", naming nothing.
#[test]
fn garbage_after_next_xid_in_pg_xact_is_refused_naming_the_file() {
    let (_tmp, dir) = loaded();
    let c = run_and_shut_down(&dir, 10);
    let seg = dir.join("pg_xact").join("0000");
    let clean = fs::read(&seg).unwrap();
    for offset in [0u32, 1, 3, 4, 500] {
        let xid = c.next_xid + offset;
        let mut bytes = clean.clone();
        let at = (xid / 4) as usize;
        if bytes.len() <= at {
            bytes.resize(8192, 0);
        }
        bytes[at] |= 2 << (2 * (xid % 4)); // ABORTED
        fs::write(&seg, &bytes).unwrap();
        let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
        // The page CRCs of the last shutdown (datadir_damage.rs) catch it first when they cover
        // the page; the check of unassigned statuses catches it past them. Either names the file.
        assert!(
            e.contains("pg_xact")
                && e.contains("segment file")
                && e.contains("0000")
                && e.contains("damaged"),
            "{e}"
        );
    }
    fs::write(&seg, &clean).unwrap();
    run_and_shut_down(&dir, 5);
}

#[test]
fn control_file_fields_are_checked_against_the_data() {
    let (_tmp, dir) = loaded();
    let good = run_and_shut_down(&dir, 20);
    let cases: Vec<(datadir::ControlFile, &str)> = vec![
        (datadir::ControlFile { scale: 5, ..good.clone() }, "scale 5 does not match the data"),
        (datadir::ControlFile { scale: 0, ..good.clone() }, "scale must be at least 1, got 0"),
        (datadir::ControlFile { fillfactor: 5, ..good.clone() }, "fillfactor must be 10..=100, got 5"),
        (datadir::ControlFile { fillfactor: 101, ..good.clone() }, "fillfactor must be 10..=100, got 101"),
        (datadir::ControlFile { next_xid: 1, ..good.clone() }, "next_xid must be at least 3, got 1"),
        (datadir::ControlFile { next_xid: 10, ..good.clone() }, "next_xid 10 is not above transaction"),
        (datadir::ControlFile { next_wal_segment: 0, ..good.clone() }, "next_wal_segment 0 is not after"),
        // Out of range for the WAL: once an error that named no file.
        (
            datadir::ControlFile { next_wal_segment: u64::MAX, ..good.clone() },
            "next_wal_segment must be at most",
        ),
    ];
    for (c, want) in cases {
        datadir::write_control(&dir, &c).unwrap();
        let e = datadir::open(engine_cfg(), &dir).unwrap_err().to_string();
        assert!(e.starts_with("control file \"") && e.contains(want), "want {want:?}, got {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    datadir::write_control(&dir, &good).unwrap();
    run_and_shut_down(&dir, 5);
    // -i checks its arguments the same way.
    let e = datadir::initialize(engine_cfg(), &dir, 1, 5).unwrap_err().to_string();
    assert!(e.contains("fillfactor must be 10..=100"), "{e}");
}

/// A re-initialisation cut short (here the engine cannot be built) leaves no control file, so
/// the directory says it needs `-i` instead of claiming a clean shutdown over missing files;
/// a later `-i` then succeeds.
#[test]
fn an_interrupted_reinitialisation_leaves_no_control_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert!(dir.join(CONTROL_FILE).exists());
    let mut bad = engine_cfg();
    bad.lmgr.partitions = 3;
    assert!(datadir::initialize(bad, &dir, 1, 100).is_err());
    assert!(!dir.join(CONTROL_FILE).exists(), "the old control file survived a failed -i");
    let e = match datadir::open(engine_cfg(), &dir) {
        Ok(_) => panic!("opened a half-initialised directory"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("initialize it with -i"), "{e}");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    datadir::shutdown(&engine, &control).unwrap();
}

/// MultiXact ids go on where the last run stopped: the shutdown records the next one and a
/// reopened directory hands out no id a row's xmax may still carry.
#[test]
fn multixact_ids_continue_across_a_restart() {
    use lockstack_engine::session::LockClauseStrength;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("cluster");
    let c0 = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c0.next_multixact, 1);
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    {
        let mut a = engine.session(lockstack_common::BackendId(0)).unwrap();
        let mut b = engine.session(lockstack_common::BackendId(1)).unwrap();
        for key in 1..=3 {
            a.begin();
            b.begin();
            a.select(TableId::Tellers, key, LockClauseStrength::ForShare).unwrap().unwrap();
            b.select(TableId::Tellers, key, LockClauseStrength::ForShare).unwrap().unwrap();
            a.commit().unwrap();
            b.commit().unwrap();
        }
    }
    assert_eq!(engine.multixact.created(), 3, "two share lockers per row make one multi each");
    let c1 = datadir::shutdown(&engine, &control).unwrap();
    assert_eq!(c1.next_multixact, 4);
    drop(engine);
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    assert_eq!(engine.multixact.next_id().0, 4, "the id sequence restarted");
    datadir::shutdown(&engine, &control).unwrap();
}
