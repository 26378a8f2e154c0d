//! The user's own data: `experiment NAME --measured FILE.csv` (tabled and drawn as one more
//! series, redrawn by `experiment plot`; a malformed file is one line naming file, line and
//! field; rows no panel draws are said), the user directory and its calibrations
//! (`--home`, `LOCKSTACK_HOME`) and `machine new`, and progress lines with stderr in a file.

use std::process::{Command, Output, Stdio};

fn lockstack(home: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .env("LOCKSTACK_HOME", home)
        .output()
        .expect("run lockstack")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A smoke run with `--measured` tables the user's rows under "measured (FILE)", draws them
/// in the SVG's legend as "yours", and (stderr redirected to a file, not a terminal) leaves
/// plain progress lines in that file, the last point's among them.
#[test]
fn measured_rows_are_tabled_and_drawn_and_progress_reaches_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("mine.csv");
    std::fs::write(
        &csv,
        "# my laptop\nvariant,clients,tps,machine\nno-fastpath,1,12345,\nfast-rel,2,23456,\nfast-rel,4,1,nosuchbox\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let err_path = dir.path().join("stderr.txt");
    let status = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["experiment", "fastpath", "--smoke", "--measured", csv.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .env("LOCKSTACK_HOME", dir.path())
        .env_remove("LOCKSTACK_NO_PROGRESS")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .output()
        .expect("run lockstack");
    let stdout = text(&status.stdout);
    let stderr = std::fs::read_to_string(&err_path).unwrap();
    assert!(status.status.success(), "{stderr}\n{stdout}");
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains("measured (mine.csv)")).collect();
    assert_eq!(rows.len(), 2, "{stdout}");
    assert!(rows[0].contains("12345") && rows[1].contains("23456"), "{rows:?}");
    let svg = std::fs::read_to_string(out.join("fastpath.svg")).unwrap();
    assert!(svg.contains(": yours, measured (mine.csv)"), "legend lacks the user's series");
    // The row of another machine is said, not silently dropped.
    assert!(
        stderr.contains(&format!(
            "--measured {}: 1 row not drawn: machine \"nosuchbox\" is not this run's machine (a native run, no --machine)",
            csv.display()
        )),
        "{stderr}"
    );
    // `experiment plot` redraws the user's series from fastpath.json.
    let redrawn = dir.path().join("redrawn");
    let o = lockstack(
        dir.path(),
        &["experiment", "plot", out.to_str().unwrap(), "--out", redrawn.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let svg = std::fs::read_to_string(redrawn.join("fastpath.svg")).unwrap();
    assert!(svg.contains(": yours, measured (mine.csv)"), "the redraw lacks the user's series");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("experiment fastpath: point ")).collect();
    assert!(!lines.is_empty(), "{stderr}");
    assert!(lines.last().unwrap().starts_with("experiment fastpath: point 6 of 6 done, "), "{stderr}");
}

/// A malformed measured file fails before any point runs: one line naming the file, the line
/// and the field, exit code 1.
#[test]
fn a_malformed_measured_file_names_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "variant,clients,tps\nno-fastpath,1,100\nfast-rel,many,200\n").unwrap();
    let o =
        lockstack(dir.path(), &["experiment", "fastpath", "--smoke", "--measured", csv.to_str().unwrap()]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("--measured {}: line 3: field clients: \"many\"", csv.display())),
        "{stderr}"
    );
}

/// A stored calibration out of the knob's range fails a `--machine` run before any point:
/// one line naming the file, the row and the field, exit code 1.
#[test]
fn an_out_of_range_calibration_is_refused_when_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("calibrations.toml"),
        "[[calibration]]\nexperiment = \"pgxact\"\nmachine = \"xeon-32\"\nworkload = \"select-only\"\nseries = \"x\"\nclients = 1\ntps = 100.0\npostgres_ipc = 99.0\n",
    )
    .unwrap();
    let o = lockstack(dir.path(), &["experiment", "pgxact", "--machine", "xeon-32", "--list-points"]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("calibrations.toml: [[calibration]] row 1 (pgxact, xeon-32, select-only): postgres_ipc = 99 is out of range"),
        "{stderr}"
    );
}

/// `machine new` writes a template into the user directory that `machine show NAME` finds,
/// every constant commented, and refuses to overwrite it.
#[test]
fn machine_new_writes_a_commented_template_once() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let o = lockstack(&home, &["machine", "new", "mybox", "--from", "xeon-32"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let path = home.join("machines").join("mybox.toml");
    let body = std::fs::read_to_string(&path).unwrap();
    assert!(body.contains("name = \"mybox\""), "{body}");
    for line in body.lines().filter(|l| l.contains(" = ") && !l.starts_with('#') && !l.starts_with("name")) {
        if line.starts_with("description") || line.starts_with("assumed") {
            continue;
        }
        assert!(line.contains("  # "), "uncommented constant: {line}");
    }
    let o = lockstack(&home, &["machine", "show", "mybox"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), body);
    let o = lockstack(&home, &["machine", "new", "mybox"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("exists; machine new does not overwrite"), "{}", text(&o.stderr));
    // --home overrides LOCKSTACK_HOME.
    let other = dir.path().join("other");
    let o = lockstack(&home, &["machine", "new", "mybox", "--home", other.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(other.join("machines").join("mybox.toml").is_file());
    let o = lockstack(&home, &["machine", "new", "xeon-32"]);
    assert_eq!(o.status.code(), Some(1));
}

/// `machine new --from-host` echoes the command as typed, and every constant it did not read
/// from this machine names the profile it was copied from and that profile's machine, is on
/// the `assumed` list, and the header says to run `machine calibrate` here.
#[test]
fn machine_new_from_host_says_where_each_copied_cost_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mybox.toml");
    let o =
        lockstack(dir.path(), &["machine", "new", "mybox", "--from-host", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("lockstack machine calibrate"), "{}", text(&o.stdout));
    let body = std::fs::read_to_string(&out).unwrap();
    let first = body.lines().next().unwrap();
    assert_eq!(
        first,
        format!(
            "# Machine profile mybox, written by `lockstack machine new mybox --from-host --out {}`.",
            out.display()
        )
    );
    assert!(!body.contains("--from host"), "{body}");
    assert!(body.contains("run `lockstack machine calibrate --out FILE` on this machine"), "{body}");
    let host = "copied from profile host (the machine lockstack machine calibrate ran on (AMD EPYC";
    let line = body.lines().find(|l| l.starts_with("futex_wake_ns = ")).expect("futex_wake_ns");
    assert!(line.contains(&format!("# assumed: {host}")), "{line}");
    assert!(line.contains("measure: lockstack machine calibrate"), "{line}");
    assert!(body.contains("    \"costs.futex_wake_ns\",\n"), "not on the assumed list: {body}");
    // The topology was read here, not copied: not assumed, and its comment names /sys.
    let line = body.lines().find(|l| l.starts_with("sockets = ")).expect("sockets");
    assert!(line.contains("/sys/devices/system/cpu") && !line.contains("assumed"), "{line}");
    assert!(!body.contains("\"topology.sockets\""), "{body}");
    let o = lockstack(dir.path(), &["machine", "show", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));

    // With --from, the header echoes it and omits --from-host.
    let out = dir.path().join("other.toml");
    let o = lockstack(
        dir.path(),
        &["machine", "new", "other", "--from", "xeon-32", "--out", out.to_str().unwrap()],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let body = std::fs::read_to_string(&out).unwrap();
    assert!(body.starts_with(
        "# Machine profile other, written by `lockstack machine new other --from xeon-32 --out "
    ));
    assert!(!body.contains("--from-host"), "{body}");
}

/// `machine list` describes the built-in `host` profile by the machine it was measured on and
/// when, not as "this host".
#[test]
fn the_host_profile_is_described_by_its_machine_not_as_this_host() {
    let dir = tempfile::tempdir().unwrap();
    let o = lockstack(dir.path(), &["machine", "list"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let line = out.lines().find(|l| l.starts_with("host")).expect("host listed");
    assert!(!line.contains("this host"), "{line}");
    assert!(line.contains("AMD EPYC") && line.contains("measured 2026-12-02"), "{line}");
}
