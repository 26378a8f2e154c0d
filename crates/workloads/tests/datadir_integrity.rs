//! What a data directory says about itself is checked at open: the control file's CRC and
//! keys, every relation file's size, pages and identity, and the mark a failed consistency
//! check leaves. Each refusal is one line naming the file and leaves the directory as it was.

use std::fs;
use std::path::{Path, PathBuf};

use lockstack_bufmgr::ForkNumber;
use lockstack_engine::datadir::{self, CONTROL_FILE, ClusterState, OpenOptions};
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::tables::TableId;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig};
use lockstack_workloads::pgbench::script::Builtin;

fn engine_cfg() -> EngineConfig {
    EngineConfig::preset("pg17", 3, 4096).unwrap()
}

fn pgbench(transactions: u64) -> PgbenchConfig {
    let tpcb = vec![Builtin::find("tpcb-like").unwrap().script()];
    PgbenchConfig { seed: 11, ..PgbenchConfig::new(tpcb, 2, transactions, engine_cfg()) }
}

/// A scale-1 directory after one run of 2 x 20 tpcb-like transactions, shut down cleanly.
fn used() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let r = runner::run_on(&engine, 0.0, &pgbench(20), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    datadir::shutdown(&engine, &control).unwrap();
    (tmp, dir)
}

/// The one-line error of opening `dir`, which must fail and leave the control file unchanged.
fn open_err(dir: &Path) -> String {
    let before = fs::read(dir.join(CONTROL_FILE)).unwrap();
    let e = match datadir::open(engine_cfg(), dir) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(e) => e.to_string(),
    };
    assert!(!e.contains('\n'), "more than one line: {e}");
    assert_eq!(fs::read(dir.join(CONTROL_FILE)).unwrap(), before, "a refused open changed the control file");
    e
}

/// Opens, runs a few transactions, shuts down.
fn usable(dir: &Path) {
    let (engine, control) = datadir::open(engine_cfg(), dir).unwrap();
    let r = runner::run_on(&engine, 0.0, &pgbench(5), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    datadir::shutdown(&engine, &control).unwrap();
}

fn base(dir: &Path, name: impl std::fmt::Display) -> PathBuf {
    dir.join("base").join(name.to_string())
}

fn index_oid(t: TableId) -> u32 {
    t.index_oid().unwrap().0
}

/// Every single-bit change anywhere in the control file is refused: a renamed key is unknown
/// (the renamed `"data_checksums"` used to be read as `false`, and written back so), a changed
/// value fails the CRC, broken JSON is invalid.
#[test]
fn every_one_bit_change_of_the_control_file_is_refused() {
    let (_tmp, dir) = used();
    let path = dir.join(CONTROL_FILE);
    let clean = fs::read(&path).unwrap();
    let mut refused = 0;
    {
        use std::os::unix::fs::FileExt;
        let f = fs::OpenOptions::new().write(true).open(&path).unwrap();
        for at in 0..clean.len() {
            for bit in 0..8 {
                f.write_all_at(&[clean[at] ^ (1 << bit)], at as u64).unwrap();
                match datadir::read_control(&dir) {
                    Ok(c) => panic!("byte {at} bit {bit} accepted: {c:?}"),
                    Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
                }
                refused += 1;
            }
            f.write_all_at(&clean[at..=at], at as u64).unwrap();
        }
    }
    assert_eq!(refused, clean.len() * 8);
    assert_eq!(fs::read(&path).unwrap(), clean);
    // Through open: one bit of the key's last letter flipped.
    let text = String::from_utf8(clean.clone()).unwrap();
    fs::write(&path, text.replacen("\"data_checksums\"", "\"data_checksumr\"", 1)).unwrap();
    let e = open_err(&dir);
    assert!(e.starts_with("invalid control file \"") && e.contains("unknown field `data_checksumr`"), "{e}");
    // A value changed consistently with JSON but not with the CRC.
    fs::write(&path, text.replacen("\"data_checksums\": true", "\"data_checksums\": false", 1)).unwrap();
    let e = open_err(&dir);
    assert!(e.contains("is damaged: calculated CRC-32C") && e.contains("reinitialize"), "{e}");
    fs::write(&path, &clean).unwrap();
    usable(&dir);
}

/// No key is defaulted and none is ignored; a file of the previous format (fields at the top
/// level, no CRC) says to reinitialize.
#[test]
fn missing_unknown_keys_and_old_versions_are_refused() {
    let (_tmp, dir) = used();
    let path = dir.join(CONTROL_FILE);
    let clean = fs::read(&path).unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&clean).unwrap();
    let keys: Vec<String> = doc["control"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.len(), 13, "{keys:?}");
    for k in &keys {
        let mut d = doc.clone();
        d["control"].as_object_mut().unwrap().remove(k);
        fs::write(&path, serde_json::to_string_pretty(&d).unwrap()).unwrap();
        let e = open_err(&dir);
        assert!(e.contains(&format!("missing field `{k}`")), "{k}: {e}");
    }
    for at in ["control", "", "control.balances", "control.balances.history"] {
        let mut d = doc.clone();
        let obj = at.split('.').filter(|k| !k.is_empty()).fold(&mut d, |v, k| &mut v[k]);
        obj.as_object_mut().unwrap().insert("extra".into(), 1.into());
        fs::write(&path, serde_json::to_string_pretty(&d).unwrap()).unwrap();
        let e = open_err(&dir);
        assert!(e.contains("unknown field `extra`"), "{at}: {e}");
    }
    let mut v1 = doc["control"].clone();
    v1["version"] = 1.into();
    fs::write(&path, serde_json::to_string_pretty(&v1).unwrap()).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("has version 1, this build reads version 2: reinitialize the data directory with -i"),
        "{e}"
    );
    fs::write(&path, &clean).unwrap();
    usable(&dir);
}

/// A visibility-map file of 8195 bytes used to pass open and fail the shutdown checkpoint,
/// leaving the directory "not shut down cleanly" for good. It is refused at open, before
/// anything is written, and the directory opens once the file is repaired.
#[test]
fn a_damaged_file_nobody_reads_is_refused_at_open_not_at_shutdown() {
    let (_tmp, dir) = used();
    let vm = base(&dir, format!("{}_vm", TableId::Branches.heap_oid().0));
    assert_eq!(fs::metadata(&vm).unwrap().len(), 8192);
    let mut f = fs::OpenOptions::new().append(true).open(&vm).unwrap();
    std::io::Write::write_all(&mut f, b"abc").unwrap();
    drop(f);
    let e = open_err(&dir);
    assert!(
        e.contains(&*vm.to_string_lossy())
            && e.contains("8195 bytes is not a whole number of 8192-byte blocks"),
        "{e}"
    );
    assert_eq!(datadir::read_control(&dir).unwrap().state, ClusterState::ShutDown);
    fs::OpenOptions::new().write(true).open(&vm).unwrap().set_len(8192).unwrap();
    usable(&dir);
    // A file lockstack never writes is refused, not ignored.
    let stray = base(&dir, "16384_fsm");
    fs::write(&stray, [0u8; 8192]).unwrap();
    let e = open_err(&dir);
    assert!(e.starts_with("unexpected file \"") && e.contains("16384_fsm"), "{e}");
    fs::remove_file(&stray).unwrap();
    usable(&dir);
}

/// Swapped relation files (pgbench_tellers' and pgbench_branches' indexes, as in the report
/// that found them only through a failed balance check at the end of a run; their visibility
/// maps) are refused at open, naming whose pages each file holds.
#[test]
fn swapped_relation_files_are_refused_naming_their_owner() {
    let (_tmp, dir) = used();
    let swap = |a: &Path, b: &Path| {
        let tmp = a.with_extension("swap");
        fs::rename(a, &tmp).unwrap();
        fs::rename(b, a).unwrap();
        fs::rename(&tmp, b).unwrap();
    };
    let tellers_pkey = base(&dir, index_oid(TableId::Tellers));
    let branches_pkey = base(&dir, index_oid(TableId::Branches));
    swap(&tellers_pkey, &branches_pkey);
    let e = open_err(&dir);
    assert!(e.contains("holds the pages of pgbench_") && e.contains("_pkey") && e.contains("swapped"), "{e}");
    assert!(
        e.contains(&*tellers_pkey.to_string_lossy()) && e.contains(&*branches_pkey.to_string_lossy()),
        "{e}"
    );
    swap(&tellers_pkey, &branches_pkey);
    let vm = |t: TableId| base(&dir, format!("{}_vm", t.heap_oid().0));
    swap(&vm(TableId::Tellers), &vm(TableId::Branches));
    let e = open_err(&dir);
    assert!(e.contains("visibility map") && e.contains("holds the pages of"), "{e}");
    swap(&vm(TableId::Tellers), &vm(TableId::Branches));
    usable(&dir);
}

/// An index's metapage names its index: a metapage naming another one (with a valid checksum,
/// as a writer that confused two indexes would leave it) is refused at open.
#[test]
fn a_metapage_naming_another_index_is_refused() {
    let (_tmp, dir) = used();
    let (rel, other) = (index_oid(TableId::Tellers), index_oid(TableId::Branches));
    let f = base(&dir, rel);
    let clean = fs::read(&f).unwrap();
    let mut bytes = clean.clone();
    let page = &mut bytes[..8192];
    assert_eq!(page[8192 - 4..], rel.to_le_bytes(), "the metapage's last 4 bytes name the index");
    page[8192 - 4..].copy_from_slice(&other.to_le_bytes());
    lockstack_bufmgr::page::set_relation_checksum(page, lockstack_common::Oid(rel), ForkNumber::Main, 0);
    fs::write(&f, &bytes).unwrap();
    let e = open_err(&dir);
    let want = format!(
        "invalid page in block 0 of relation base/{rel}: the file holds the B-tree of relation {other}, not of relation {rel}"
    );
    assert_eq!(e, want);
    fs::write(&f, clean).unwrap();
    usable(&dir);
}

/// A failed end-of-run consistency check marks the directory damaged: the next open refuses it
/// with the reason, `open_damaged` opens it (and the mark stays), `-i` clears it.
#[test]
fn a_failed_check_marks_the_directory_damaged_until_reinitialized() {
    let (_tmp, dir) = used();
    let (engine, control) = datadir::open(engine_cfg(), &dir).unwrap();
    let why = "tpcb-like: pgbench_tellers balance change = history delta sum (-5185 vs -9880)";
    let c = datadir::shutdown_checked(&engine, &control, Some(why)).unwrap();
    drop(engine);
    assert_eq!((c.state, c.damaged.as_deref()), (ClusterState::ShutDown, Some(why)));
    assert_eq!(datadir::read_control(&dir).unwrap(), c);
    for _ in 0..2 {
        let e = open_err(&dir);
        assert!(e.contains("is marked damaged") && e.contains(why) && e.contains("-i"), "{e}");
    }
    let opts = OpenOptions { open_damaged: true };
    let (engine, control) = datadir::open_with(engine_cfg(), &dir, opts, |s| s).unwrap();
    assert_eq!(control.damaged.as_deref(), Some(why));
    let r = runner::run_on(&engine, 0.0, &pgbench(5), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    let c = datadir::shutdown_checked(&engine, &control, None).unwrap();
    drop(engine);
    assert_eq!(c.damaged.as_deref(), Some(why), "a passing run does not clear the mark");
    assert!(open_err(&dir).contains("is marked damaged"));
    let c = datadir::initialize(engine_cfg(), &dir, 1, 100).unwrap();
    assert_eq!(c.damaged, None);
    usable(&dir);
}
