//! The hot-row example scripts (crates/workloads/scripts/hot-row*.sql) under `--machine`:
//! clients queue on four accounts' row locks, and the simulated machine's wait table names
//! the heavyweight tuple lock and the transaction locks they wait on.

use std::process::Command;

#[test]
fn simulated_hot_row_names_its_row_lock_waits() {
    let scripts = concat!(env!("CARGO_MANIFEST_DIR"), "/../workloads/scripts");
    let out = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args([
            "pgbench",
            "-s",
            "1",
            "-c",
            "8",
            "-t",
            "20",
            "-f",
            &format!("{scripts}/hot-row.sql"),
            "-f",
            &format!("{scripts}/hot-row-share.sql"),
            "--machine",
            "xeon-32",
        ])
        .output()
        .expect("run lockstack");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let section =
        &stdout[stdout.find("waiting, share").unwrap_or_else(|| panic!("no waits table:\n{stdout}"))..];
    for wait in ["Lock:tuple", "Lock:transactionid"] {
        assert!(section.contains(wait), "no {wait} among the waits:\n{stdout}");
    }
}
