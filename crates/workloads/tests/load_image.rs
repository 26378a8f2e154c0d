//! `datadir::load_image` (`pgbench --load-from`): a data directory fresh from `-i` used as the
//! tables' starting point of in-memory runs. The runs see the loaded tables, every page starts
//! in shared buffers, the directory's files are never changed, readers lock writers out, and a
//! directory that is not a fresh, cleanly shut down load is refused with one line naming it.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use lockstack_engine::datadir;
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::tables::TableId;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig};
use lockstack_workloads::pgbench::script::Builtin;

fn engine_cfg() -> EngineConfig {
    EngineConfig::preset("pg17", 3, 4096).unwrap()
}

fn tpcb(transactions: u64) -> PgbenchConfig {
    let tpcb = vec![Builtin::find("tpcb-like").unwrap().script()];
    PgbenchConfig { seed: 5, ..PgbenchConfig::new(tpcb, 2, transactions, engine_cfg()) }
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.strip_prefix(dir).unwrap().display().to_string(), fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn runs_start_from_the_image_in_shared_buffers_and_never_change_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("image");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let before = snapshot(&dir);
    for round in 0..2 {
        let image = datadir::load_image(engine_cfg(), &dir).unwrap();
        let (engine, control) = (&image.engine, &image.control);
        assert_eq!(control.scale, 1);
        // Every page of the tables was read into shared buffers before the run.
        let pages: u64 = TableId::ALL
            .iter()
            .flat_map(|t| std::iter::once(t.heap_oid()).chain(t.index_oid()))
            .map(|rel| {
                u64::from(engine.pool.smgr().nblocks(rel, lockstack_bufmgr::ForkNumber::Main).unwrap())
            })
            .sum();
        let reads_before = engine.pool.stats().reads;
        assert!(reads_before >= pages, "round {round}: {reads_before} reads for {pages} pages");
        let r = runner::run_on(engine, 0.0, &tpcb(30), &|_| {}).unwrap();
        assert_eq!(r.transactions, 60, "round {round}");
        for c in &r.checks {
            assert!(c.ok, "round {round}: {} ({})", c.name, c.detail);
        }
        // Each round starts from the load: no history from the round before.
        let mut s = engine.session(lockstack_common::BackendId(0)).unwrap();
        assert_eq!(s.table_sums(TableId::History).unwrap().rows, 60, "round {round}");
        assert_eq!(s.table_sums(TableId::Accounts).unwrap().rows, 100_000, "round {round}");
    }
    assert!(snapshot(&dir) == before, "a run changed the image's files");
}

#[test]
fn a_directory_that_is_not_a_fresh_clean_load_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let one_line = |e: lockstack_engine::engine::EngineError, want: &[&str]| {
        let m = e.to_string();
        assert_eq!(m.lines().count(), 1, "{m}");
        for w in want {
            assert!(m.contains(w), "want {w:?} in: {m}");
        }
    };
    // A missing visibility map: named.
    let vm = dir.join("base").join(format!("{}_vm", TableId::Accounts.heap_oid().0));
    let saved = fs::read(&vm).unwrap();
    fs::remove_file(&vm).unwrap();
    one_line(datadir::load_image(engine_cfg(), &dir).unwrap_err(), &["lacks relation file", "_vm", "-i"]);
    fs::write(&vm, saved).unwrap();
    // A file in base/ that is none of the relations: named, as an open names it.
    let junk = dir.join("base").join("junk");
    fs::write(&junk, b"x").unwrap();
    one_line(datadir::load_image(engine_cfg(), &dir).unwrap_err(), &["unexpected file", "junk"]);
    fs::remove_file(&junk).unwrap();
    // A damaged page: named by its block, as an open names it.
    let heap = dir.join("base").join(TableId::Branches.heap_oid().0.to_string());
    let mut bytes = fs::read(&heap).unwrap();
    bytes[100] ^= 0xff;
    fs::write(&heap, &bytes).unwrap();
    one_line(datadir::load_image(engine_cfg(), &dir).unwrap_err(), &["block 0"]);
    bytes[100] ^= 0xff;
    fs::write(&heap, &bytes).unwrap();
    datadir::load_image(engine_cfg(), &dir).unwrap();
    // Read by a run from the image: no writer may open it meanwhile; two readers may.
    let a = datadir::load_image(engine_cfg(), &dir).unwrap();
    let b = datadir::load_image(engine_cfg(), &dir).unwrap();
    one_line(datadir::open(engine_cfg(), &dir).unwrap_err(), &["is in use", "--load-from"]);
    drop((a, b));
    // In use (opened, not shut down), then changed by a run: refused.
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    one_line(
        datadir::load_image(engine_cfg(), &dir).unwrap_err(),
        &["is in use by process", "--load-from reads only"],
    );
    runner::run_on(&engine, 0.0, &tpcb(5), &|_| {}).unwrap();
    datadir::shutdown(&engine, &control).unwrap();
    drop(engine);
    one_line(
        datadir::load_image(engine_cfg(), &dir).unwrap_err(),
        &["has been changed since -i", "reinitialize it with -i"],
    );
    // Not a data directory at all.
    one_line(datadir::load_image(engine_cfg(), tmp.path()).unwrap_err(), &[]);
}
