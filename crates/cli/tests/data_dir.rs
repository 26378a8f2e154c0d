//! `lockstack pgbench --data-dir` over directories that are damaged, swapped or marked by a
//! failed check: one line on stderr and exit code 1 at open (exit code 2 for the run whose
//! check failed), and the directory as it was; `--load-from` runs on a copy of one.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run lockstack")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `args` expecting exit code 1 and one stderr line containing every one of `want`.
fn refused(args: &[&str], want: &[&str]) -> String {
    let o = lockstack(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "{args:?}: want {w:?} in: {err}");
    }
    err
}

fn ok(args: &[&str]) -> Output {
    let o = lockstack(args);
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    o
}

fn init(dir: &Path) -> String {
    let d = dir.to_str().unwrap().to_string();
    ok(&["pgbench", "-i", "-s", "1", "--data-dir", &d]);
    d
}

#[test]
fn a_failed_consistency_check_marks_the_directory_until_reinitialized() {
    let tmp = tempfile::tempdir().unwrap();
    let d = init(&tmp.path().join("d"));
    // A script that is not a transfer: --check-total fails, exit code 2.
    let script = tmp.path().join("inc.sql");
    fs::write(&script, "\\set aid random(1, 100000)\nUPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;\n")
        .unwrap();
    let s = script.to_str().unwrap();
    let o = lockstack(&["pgbench", "-f", s, "--check-total", "-t", "5", "--data-dir", &d]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("consistency check failed: --check-total") && err.contains("marked damaged"),
        "{err}"
    );
    // The next run is refused with the reason, every time.
    for _ in 0..2 {
        refused(
            &["pgbench", "-t", "5", "--data-dir", &d],
            &["is marked damaged", "--check-total", "-i", "--open-damaged"],
        );
    }
    // --open-damaged opens it (a warning line says so), and the mark stays.
    let o = ok(&["pgbench", "-t", "5", "--data-dir", &d, "--open-damaged"]);
    assert!(stderr(&o).contains("is marked damaged"), "{}", stderr(&o));
    refused(&["pgbench", "-t", "5", "--data-dir", &d], &["is marked damaged"]);
    // The flag is refused where it means nothing.
    refused(&["pgbench", "-t", "5", "--open-damaged"], &["--open-damaged applies only with --data-dir"]);
    refused(&["pgbench", "-i", "--data-dir", &d, "--open-damaged"], &["--open-damaged"]);
    // -i clears it.
    ok(&["pgbench", "-i", "-s", "1", "--data-dir", &d]);
    ok(&["pgbench", "-t", "5", "--data-dir", &d]);
}

#[test]
fn damage_is_refused_at_open_naming_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    let d = init(&dir);
    ok(&["pgbench", "-c", "2", "-t", "20", "--data-dir", &d]);
    let control = dir.join("lockstack.control");
    let clean = fs::read_to_string(&control).unwrap();
    // One bit of a key in the control file.
    fs::write(&control, clean.replacen("\"data_checksums\"", "\"data_checksumr\"", 1)).unwrap();
    refused(
        &["pgbench", "-t", "5", "--data-dir", &d],
        &["invalid control file", "unknown field `data_checksumr`"],
    );
    fs::write(&control, &clean).unwrap();
    // A visibility-map file of 8195 bytes: refused at open, not found at shutdown.
    let vms: Vec<_> = fs::read_dir(dir.join("base"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_vm"))
        .collect();
    assert!(!vms.is_empty());
    let vm = &vms[0];
    let mut bytes = fs::read(vm).unwrap();
    let len = bytes.len();
    bytes.extend_from_slice(b"abc");
    fs::write(vm, &bytes).unwrap();
    refused(&["pgbench", "-t", "5", "--data-dir", &d], &[&*vm.to_string_lossy(), "not a whole number"]);
    assert_eq!(fs::read_to_string(&control).unwrap(), clean, "a refused open changed the control file");
    bytes.truncate(len);
    fs::write(vm, &bytes).unwrap();
    ok(&["pgbench", "-t", "5", "--data-dir", &d]);
    // pgbench_tellers' and pgbench_branches' indexes swapped: named at open, where the run
    // used to start and fail its balance check at the end.
    let (a, b) = (dir.join("base/16387"), dir.join("base/16389"));
    let (ab, bb) = (fs::read(&a).unwrap(), fs::read(&b).unwrap());
    fs::write(&a, &bb).unwrap();
    fs::write(&b, &ab).unwrap();
    refused(&["pgbench", "-t", "5", "--data-dir", &d], &["holds the pages of pgbench_", "_pkey", "swapped"]);
    fs::write(&a, &ab).unwrap();
    fs::write(&b, &bb).unwrap();
    ok(&["pgbench", "-t", "5", "--data-dir", &d]);
}

#[test]
fn load_from_runs_on_a_copy_and_leaves_the_directory_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let d = init(&tmp.path().join("image"));
    let files = |d: &str| -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = ["base", "pg_xact", "pg_wal"]
            .iter()
            .flat_map(|sub| fs::read_dir(Path::new(d).join(sub)).unwrap().flatten())
            .map(|e| (e.path().display().to_string(), fs::read(e.path()).unwrap()))
            .collect();
        v.push(("control".into(), fs::read(Path::new(d).join("lockstack.control")).unwrap()));
        v.sort();
        v
    };
    let before = files(&d);
    // The tpcb-like default updates every table and inserts history: all of it in memory.
    let o = ok(&["pgbench", "-c", "2", "-t", "20", "--load-from", &d]);
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(report.contains(&format!("tables copied into memory from {d}")), "{report}");
    assert!(report.contains("number of transactions actually processed: 40"), "{report}");
    assert!(files(&d) == before, "the run changed the directory");
    // Other places the tables could come from are refused with it.
    refused(&["pgbench", "-t", "5", "--load-from", &d, "--data-dir", &d], &["--load-from", "--data-dir"]);
    refused(&["pgbench", "-i", "--load-from", &d], &["--load-from"]);
    // A directory a run has changed is refused, naming it and what to do.
    ok(&["pgbench", "-t", "5", "--data-dir", &d]);
    refused(&["pgbench", "-t", "5", "--load-from", &d], &[&d, "has been changed since -i", "-i"]);
    refused(&["pgbench", "-t", "5", "--load-from", "/nonexistent/image"], &["/nonexistent/image"]);
}
