//! A full disk during a `--data-dir` run, injected with
//! `--set wal.write_limit` (no tmpfs needed): with two clients, as with one, the run ends with
//! one stderr line naming the `pg_wal` file and exit code 2, also under `-T`. It used to hang:
//! the failing client kept its transaction open and the other waited on its xid forever.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `lockstack args`, killing it (and failing the test) if it has not ended after two
/// minutes: a bound against a hang, not a timing.
fn lockstack(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lockstack");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!("{args:?} never ended: {}", String::from_utf8_lossy(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

fn init(dir: &Path) {
    let d = dir.to_str().unwrap();
    let o = lockstack(&["pgbench", "-i", "-s", "1", "--data-dir", d]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_full_disk_ends_a_run_with_one_line_naming_the_wal_file_and_exit_2() {
    for (clients, run) in [("2", ["-t", "300"]), ("1", ["-t", "300"]), ("2", ["-T", "600"])] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        init(&dir);
        let d = dir.to_str().unwrap();
        let args =
            ["pgbench", "-c", clients, run[0], run[1], "--data-dir", d, "--set", "wal.write_limit=49152"];
        let o = lockstack(&args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        let wal = dir.join("pg_wal");
        assert!(
            err.contains(&format!("could not write {}/0000000100000000", wal.display())),
            "{args:?}: {err}"
        );
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
}
