//! Bad input gets one line on stderr naming the input and exit code 1 (never a panic, a hang
//! or exit code 2, which is kept for failed consistency checks); a closed stdout never panics;
//! `--json` is written whole or not at all.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run lockstack")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `args`, expecting exit code 1 and exactly one stderr line containing `want`.
fn bad(args: &[&str], want: &str) {
    let o = lockstack(args);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: want {want:?} in: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

#[test]
fn bad_flags_are_one_line_and_exit_1() {
    for (args, want) in [
        // A1: validated before anything starts (it used to panic in the sampler and hang).
        (
            &["pgbench", "--wait-sampling-hz", "100001", "-t", "1"][..],
            "--wait-sampling-hz must be at most 100000",
        ),
        // B13
        (&["pgbench", "-P", "0", "-t", "1"], "invalid thread progress delay: \"0\""),
        // C15: name the flag, exit 1 (was exit 2 from the engine).
        (&["pgbench", "--set", "lmgr.fast_path=1000", "-t", "1"], "--set lmgr.fast_path"),
        (&["pgbench", "--set", "clog.buffers=17", "-t", "1"], "--set clog.buffers=17: "),
        (&["pgbench", "--set", "clog.buffers=1", "-t", "1"], "--set clog.buffers (valid: 2..=65536)"),
        (
            &["pgbench", "-s", "946", "-t", "1"],
            "-s 946: buffer pool would need 2097584 buffers (max 2097152)",
        ),
        (&["experiment", "fastpath", "-s", "100000"], "-s 100000: buffer pool would need"),
        // C16: the missing argument is named.
        (&["isolation"], "<FILE.spec>"),
        (&["experiment"], "<NAME>"),
        // C17
        (&["pgbench", "-T", "0"], "-T/--time must be a whole number of seconds from 1 to 3600, got '0'"),
        (
            &["pgbench", "-T", "4.9e-324"],
            "-T/--time must be a whole number of seconds from 1 to 3600, got '4.9e-324'",
        ),
        (&["pgbench", "-T", "1.5"], "-T/--time must be a whole number of seconds from 1 to 3600, got '1.5'"),
        (&["pgbench", "-T", "NaN"], "-T/--time must be a whole number of seconds"),
        // C18: negative numbers reach the range checks.
        (&["pgbench", "-c", "-1", "-t", "1"], "invalid number of clients: \"-1\""),
        (&["pgbench", "-t", "-3"], "invalid number of transactions: \"-3\""),
        (&["pgbench", "-t", "2147483648"], "invalid number of transactions: \"2147483648\""),
        (
            &["pgbench", "-t", "1", "-h", "localhost"],
            "-h localhost: lockstack pgbench runs its engine in this process",
        ),
        (&["lwlock", "--shared-ratio", "-0.1"], "--shared-ratio"),
        // C21: flags, not field names.
        (&["snapshot", "--threads", "0"], "--threads must be at least 1"),
        (&["snapshot", "--backends", "100000000"], "--backends must be"),
        (&["wal", "--wal-buffers", "1"], "--wal-buffers must be"),
        // D24: run-only options with -i.
        (&["pgbench", "-i", "-c", "2", "-T", "1"], "cannot be used in initialization (-i) mode: -c -T"),
        (
            &["pgbench", "-i", "-M", "simple", "--random-seed", "5"],
            "cannot be used in initialization (-i) mode: -M --random-seed",
        ),
        // clap's errors point at the subcommand's help.
        (&["pgbench", "--bogus"], "unexpected argument '--bogus' found (see 'lockstack pgbench --help')"),
        (&["bogus"], "(see 'lockstack --help')"),
        // pgbench 15's weight rules: 0..=INT_MAX each, a non-zero total.
        (
            &["pgbench", "-b", "select-only@-1", "-t", "1"],
            "weight specification \"-1\" is out of range (0 .. 2147483647)",
        ),
        (&["pgbench", "-b", "select-only@2147483648", "-t", "1"], "is out of range (0 .. 2147483647)"),
        (
            &["pgbench", "-b", "select-only@0", "-b", "tpcb@0", "-t", "1"],
            "total script weight must not be zero",
        ),
        // D26: options that would be ignored.
        (&["snapshot", "--fixed", "10", "--threads", "2"], "--fixed"),
        (&["buffers", "--scenario", "hot-pin", "--vm-check", "always-vm"], "--vm-check"),
        // The micro commands read the knob registry: --preset, --set, their flags as aliases.
        (
            &["locks", "--set", "wal.buffers=8"],
            "--set wal.buffers: lockstack locks does not use this knob (it reads: ",
        ),
        (
            &["locks", "--vxid", "eager", "--set", "lmgr.vxid=eager"],
            "--vxid and --set lmgr.vxid both set lmgr.vxid",
        ),
        (
            &["locks", "--set", "lmgr.vxid=sometimes"],
            "invalid value \"sometimes\" for --set lmgr.vxid (valid: eager|on-demand)",
        ),
        (&["locks", "--set", "lmgr.fast_path=4"], "more groups are unsupported here"),
        (&["locks", "--partitions", "3"], "--partitions must be a power of two 1..=1024, got \"3\""),
        (&["wal", "--set", "nosuch.knob=1"], "unknown --set key \"nosuch.knob\" (valid: lwlock.kind, "),
        (&["wal", "--set", "wal.buffers"], "expected crate.knob=value"),
        (&["snapshot", "--preset", "pg10"], "unknown preset \"pg10\" (valid: pg91, pg92, pg96, pg14, pg17)"),
        (
            &["snapshot", "--set", "procarray.layout=fat"],
            "--set procarray.layout (valid: pgproc|pgxact|pgxact-padded|dense)",
        ),
        (&["buffers", "--scenario", "hot-pin", "--set", "vm.check=always-vm"], "--set vm.check applies to"),
        (
            &["buffers", "--header", "all", "--set", "bufmgr.header=atomic"],
            "--header and --set bufmgr.header both set",
        ),
        (&["lwlock", "--impl", "all", "--set", "lwlock.kind=pg92"], "--impl and --set lwlock.kind both set"),
        (&["lwlock", "--set", "lwlock.kind=fast"], "--set lwlock.kind (valid: pg92|atomic|read-biased)"),
        // A flag with a fixed set of values lists them on the one line.
        (
            &["pgbench", "--costs", "foo", "-t", "1"],
            "invalid value 'foo' for '--costs <WHOSE>'; valid values: postgres, own",
        ),
        (&["pgbench", "--sim-clock", "exact", "-t", "1"], "valid values: deterministic, measured"),
        // The simulated machine's knobs change nothing natively: refused, not ignored.
        (
            &["pgbench", "--set", "sim.client_cpu_us=5", "-t", "1"],
            "--set sim.client_cpu_us=5: sim.* knobs apply only under --machine PROFILE",
        ),
        (
            &["experiment", "vm-pin", "--set", "sim.postgres_ipc=0.5", "--smoke"],
            "--set sim.postgres_ipc=0.5: sim.* knobs apply only under --machine PROFILE",
        ),
    ] {
        bad(args, want);
    }
}

/// A spread sweep's flags and point files: `--point` with `--jobs` or without `--out`, a K
/// outside the plan, `--jobs` natively, and `experiment merge` of a missing, empty, foreign,
/// damaged, incomplete or mixed directory: each one line and exit 1, nothing half-written.
#[test]
fn spread_sweep_input_is_one_line_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (out, empty, foreign, pts) = (p("out"), p("empty"), p("foreign"), p("points"));
    std::fs::create_dir(&empty).unwrap();
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(Path::new(&foreign).join("vm-pin.csv"), "workload\n").unwrap();
    let vm =
        ["experiment", "vm-pin", "--workload", "scan", "--clients", "1", "--runs", "1", "--duration", "0.01"];
    let with = |extra: &[&str]| -> Vec<String> { vm.iter().chain(extra).map(|s| s.to_string()).collect() };
    for (args, want) in [
        (
            with(&["--point", "0", "--jobs", "2", "--out", &out]),
            "--point K runs one point in this process: not with --jobs",
        ),
        (with(&["--point", "0"]), "--point 0 needs --out DIR (where vm-pin-point-0.json goes)"),
        (with(&["--point", "3", "--out", &out]), "--point 3: the plan has 3 points (0..=2)"),
        (with(&["--point", "-1", "--out", &out]), "--point -1: the plan has 3 points"),
        (with(&["--jobs", "2", "--out", &out]), "--jobs 2 needs --machine PROFILE"),
        (with(&["--jobs", "0", "--out", &out]), "--jobs must be at least 1, got 0"),
        (with(&["--list-points", "--point", "1"]), "--list-points prints the plan and exits"),
        (vec!["experiment".into(), "merge".into()], "experiment merge needs DIR"),
        (
            vec!["experiment".into(), "vm-pin".into(), empty.clone()],
            "only 'experiment show NAME', 'experiment merge DIR' and 'experiment validation DIR' take a second argument",
        ),
        (vec!["experiment".into(), "validation".into()], "experiment validation needs DIR"),
        (
            vec!["experiment".into(), "validation".into(), empty.clone()],
            "no subdirectory holds an experiment's result",
        ),
        (vec!["experiment".into(), "validation".into(), p("nowhere")], "nowhere"),
        (vec!["experiment".into(), "merge".into(), p("nowhere")], "nowhere: No such file"),
        (vec!["experiment".into(), "merge".into(), empty.clone()], "no point files"),
        (vec!["experiment".into(), "merge".into(), foreign.clone()], "no point files"),
        (
            vec!["experiment".into(), "merge".into(), empty.clone(), "--clients".into(), "1".into()],
            "--clients is not accepted",
        ),
    ] {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        bad(&a, want);
    }
    assert!(!Path::new(&out).exists(), "a refused run created --out");

    // One real point file, then copies of it made incomplete, damaged and foreign.
    let o = lockstack(&with(&["--point", "1", "--out", &pts]).iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merge = ["experiment", "merge", pts.as_str()];
    bad(&merge, "2 of 3 points missing: 0, 2");
    let file = Path::new(&pts).join("vm-pin-point-1.json");
    let good = std::fs::read_to_string(&file).unwrap();
    let other = Path::new(&pts).join("vm-pin-point-0.json");
    std::fs::write(&other, &good[..good.len() / 2]).unwrap();
    bad(&merge, "vm-pin-point-0.json: not a point file: ");
    std::fs::write(&other, good.replace("\"seed\": 0", "\"seed\": 9")).unwrap();
    bad(&merge, "come from different plans: seed (9 vs 0)");
    std::fs::write(&other, &good).unwrap();
    bad(&merge, "point 1 is present twice: ");
    std::fs::write(&other, good.replace("\"index\": 1", "\"index\": 0")).unwrap();
    bad(&merge, "point 0 is run 0 scan c=1 always-vm, but the plan's point 0 is run 0 scan c=1 page-flag");
    // Nothing was merged into the directory.
    assert!(!Path::new(&pts).join("vm-pin.json").exists());
}

#[test]
fn micro_commands_take_presets_and_knobs() {
    let dir = tempfile::tempdir().unwrap();
    let json = |name: &str, args: &[&str]| -> serde_json::Value {
        let path = dir.path().join(name);
        let mut all = args.to_vec();
        all.extend(["--json", path.to_str().unwrap()]);
        let o = lockstack(&all);
        assert_eq!(o.status.code(), Some(0), "{all:?}: {}", text(&o.stderr));
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    };
    // pg91: no fast path, eager VXID locks; a flag still overrides the preset.
    let v = json("l.json", &["locks", "--preset", "pg91", "--duration", "0.05"]);
    assert_eq!((&v["config"]["fast_path"], &v["config"]["vxid"]), (&false.into(), &"eager".into()));
    let v = json(
        "l2.json",
        &[
            "locks",
            "--preset",
            "pg91",
            "--vxid",
            "on-demand",
            "--set",
            "lmgr.partitions=4",
            "--duration",
            "0.05",
        ],
    );
    assert_eq!((&v["config"]["vxid"], &v["config"]["partitions"]), (&"on-demand".into(), &4.into()));
    // One layout and end of transaction from the preset instead of all four layouts.
    let v = json("s.json", &["snapshot", "--preset", "pg96", "--fixed", "10", "--backends", "20"]);
    assert_eq!(v["end_xact"], "group-clear");
    let layouts: Vec<&str> =
        v["rows"].as_array().unwrap().iter().map(|r| r["layout"].as_str().unwrap()).collect();
    assert_eq!(layouts, ["pgxact"]);
    let v = json(
        "s2.json",
        &["snapshot", "--set", "procarray.layout=dense", "--fixed", "10", "--backends", "20"],
    );
    assert_eq!((v["rows"].as_array().unwrap().len(), &v["end_xact"]), (1, &"exclusive".into()));
}

#[test]
fn a_client_aborting_inside_a_transaction_releases_its_row_and_ends_the_run() {
    // Client 0 divides by zero while it holds branch 1's row lock; the others queue on that row.
    // The aborted client must roll back (or they would wait forever) and the run fail with
    // exit 2, as pgbench 15's aborted clients make it.
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("abort.sql");
    std::fs::write(
        &f,
        "BEGIN;\nUPDATE pgbench_branches SET bbalance = bbalance + 1 WHERE bid = 1;\n\\set x 1 / :client_id\nEND;\n",
    )
    .unwrap();
    let o = lockstack(&["pgbench", "-s", "1", "-c", "4", "-j", "2", "-t", "50", "-f", f.to_str().unwrap()]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("client 0 aborted: ") && err.contains("abort.sql:3: \\set x: division by zero"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_zero_weight_script_is_loaded_but_never_picked() {
    let o = lockstack(&[
        "pgbench",
        "-s",
        "1",
        "-b",
        "select-only@0",
        "-b",
        "simple-update@3",
        "-c",
        "2",
        "-t",
        "25",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("number of transactions actually processed: 50/50"), "{out}");
    let part =
        |name: &str| out.split(name).nth(1).unwrap_or_else(|| panic!("no {name} section: {out}")).to_string();
    assert!(part("<builtin: select only>").contains(" - 0 transactions"), "{out}");
    assert!(part("<builtin: simple update>").contains(" - 50 transactions"), "{out}");
    // Weights at pgbench's maximum add up without overflowing the targets.
    let o = lockstack(&[
        "pgbench",
        "-s",
        "1",
        "-b",
        "select-only@2147483647",
        "-b",
        "tpcb@2147483647",
        "-t",
        "4",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert_eq!(out.matches("(targets 50.0% of total)").count(), 2, "{out}");
}

#[test]
fn bad_scripts_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    // C20: the file opens; its contents are not text.
    std::fs::write(p("garbage.sql"), b"\xff\xfe\\set a 1\n").unwrap();
    bad(&["pgbench", "-f", &p("garbage.sql"), "-t", "1"], "garbage.sql: not valid UTF-8");
    // A5: deep or long expressions are refused with file:line, not a stack overflow.
    let deep = format!("\\set a {}1{}\n", "(".repeat(20_000), ")".repeat(20_000));
    std::fs::write(p("deep.sql"), deep).unwrap();
    bad(
        &["pgbench", "-f", &p("deep.sql"), "-t", "1"],
        "deep.sql:1: \\set a: expression is too deeply nested",
    );
    let sum = format!("\n\\set a {}\n", vec!["1"; 20_000].join(" + "));
    std::fs::write(p("sum.sql"), sum).unwrap();
    bad(&["pgbench", "-f", &p("sum.sql"), "-t", "1"], "sum.sql:2: \\set a: expression is too deeply nested");
    let negs = format!("\\set a {}1\n", "-".repeat(20_000));
    std::fs::write(p("negs.sql"), negs).unwrap();
    bad(
        &["pgbench", "-f", &p("negs.sql"), "-t", "1"],
        "negs.sql:1: \\set a: expression is too deeply nested",
    );
    // C19: a runtime error says where.
    std::fs::write(
        p("unkvar.sql"),
        "SELECT abalance FROM pgbench_accounts WHERE aid = 1;\n\\set a :nosuch + 1\n",
    )
    .unwrap();
    // As in pgbench 15, the script parsed, so the client aborts and the run fails (exit 2).
    let o = lockstack(&["pgbench", "-f", &p("unkvar.sql"), "-t", "1"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("client 0 aborted: ")
            && err.contains("unkvar.sql:2: \\set a: undefined variable \"nosuch\""),
        "{err}"
    );
}

/// A7: a failed run leaves an existing --json file alone; -i refuses --json; a good run writes
/// complete JSON with its configuration (E34) and leaves no temporary file behind.
#[test]
fn json_is_whole_or_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let keep = dir.path().join("keep.json");
    std::fs::write(&keep, "{\"old\":1}\n").unwrap();
    let script = dir.path().join("unkvar.sql");
    std::fs::write(&script, "SELECT abalance FROM pgbench_accounts WHERE aid = :nosuch;\n").unwrap();
    let o =
        lockstack(&["pgbench", "-t", "3", "-f", script.to_str().unwrap(), "--json", keep.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert_eq!(std::fs::read_to_string(&keep).unwrap(), "{\"old\":1}\n");

    let y = dir.path().join("y.json");
    bad(
        &["pgbench", "-i", "--json", y.to_str().unwrap()],
        "cannot be used in initialization (-i) mode: --json",
    );
    assert!(!y.exists());

    let o = lockstack(&[
        "pgbench",
        "-c",
        "2",
        "-t",
        "5",
        "--set",
        "lmgr.partitions=16",
        "--json",
        keep.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&keep).unwrap()).unwrap();
    assert_eq!(v["transactions"], 10);
    let c = &v["config"];
    assert_eq!((c["scale"].as_i64(), c["clients"].as_u64()), (Some(1), Some(2)), "{c}");
    assert_eq!(c["preset"], "pg17");
    assert_eq!(c["set"][0], "lmgr.partitions=16");
    assert_eq!(c["scripts"][0]["name"], "<builtin: TPC-B (sort of)>");
    assert!(c["tps"].as_f64().unwrap() > 0.0);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
}

/// Runs `args` with stdout a pipe whose reading end is already closed.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run lockstack");
    drop(child.stdout.take());
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    Output { status, stdout: Vec::new(), stderr: err.into_bytes() }
}

/// A6: a closed stdout (`| head`, `| true`) is not a panic; a --data-dir run still shuts its
/// directory down cleanly, so the next run opens it.
#[test]
fn closed_stdout_is_not_a_panic() {
    for args in [&["pgbench", "--set", "help"][..], &["experiment", "list"], &["pgbench", "-t", "20"]] {
        let o = with_closed_stdout(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("panicked"), "{args:?}: {}", text(&o.stderr));
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let d = d.to_str().unwrap();
    let o = lockstack(&["pgbench", "-i", "-s", "1", "--data-dir", d]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = with_closed_stdout(&["pgbench", "-c", "2", "-t", "50", "--data-dir", d]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // D25: -F without -i is ignored, and says so.
    let o = lockstack(&["pgbench", "-S", "-t", "10", "-F", "50", "--check-total", "--data-dir", d]);
    assert!(o.status.success(), "the directory was not shut down cleanly: {}", text(&o.stderr));
    assert!(text(&o.stderr).contains("fillfactor option ignored"), "{}", text(&o.stderr));
    assert!(Path::new(d).join("base").exists());
}

/// E36: no colour codes in a log that is not a terminal.
#[test]
fn no_ansi_colours_when_stderr_is_not_a_terminal() {
    let o = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["pgbench", "-t", "1"])
        .env("RUST_LOG", "debug")
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = text(&o.stderr);
    assert!(err.lines().count() > 1, "expected some log lines: {err}");
    assert!(!err.contains('\u{1b}'), "{err}");
}

#[test]
fn a_stuck_isolation_step_prints_what_ran_before_its_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("stuck.spec");
    // s2's lock waits for s1's, and no later step of s1 ever releases it.
    std::fs::write(
        &spec,
        "setup { CREATE TABLE t (id int); }\n\
         session s1\nstep b1 { BEGIN; }\nstep a1 { LOCK TABLE t IN ACCESS EXCLUSIVE MODE; }\n\
         session s2\nstep b2 { BEGIN; }\nstep a2 { LOCK TABLE t IN ACCESS EXCLUSIVE MODE; }\nstep c2 { COMMIT; }\n\
         permutation b1 a1 b2 a2 c2\n",
    )
    .unwrap();
    let o = lockstack(&["isolation", spec.to_str().unwrap(), "--step-timeout", "0.2"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(out.contains("starting permutation: b1 a1 b2 a2 c2"), "{out}");
    assert!(out.contains("step a2: LOCK TABLE t IN ACCESS EXCLUSIVE MODE; <waiting ...>"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stuck.spec: step a2 timed out after 0."), "{err}");
}

/// Ctrl-C or `kill` (SIGINT, SIGTERM) on a --data-dir run stops it early and shuts the
/// directory down cleanly (exit code 130), so the next run opens it; `--json` through a symlink
/// replaces the target and keeps the link; a report that cannot be written is exit code 1.
#[test]
fn signals_json_symlinks_and_output_errors() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("data");
    let d = d.to_str().unwrap();
    let o = lockstack(&["pgbench", "-i", "-s", "1", "--data-dir", d]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for sig in ["-INT", "-TERM"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lockstack"))
            .args(["pgbench", "-c", "2", "-T", "600", "-P", "1", "--wait-sampling-hz", "0", "--data-dir", d])
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run lockstack");
        // The first progress line means the run (and its signal handler) is under way.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.starts_with("progress:") {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "the run ended before its first progress line");
        }
        let pid = child.id().to_string();
        assert!(Command::new("kill").args([sig, pid.as_str()]).status().unwrap().success());
        let mut rest = String::new();
        err.read_to_string(&mut rest).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{sig}: {rest}");
        assert!(rest.contains("shut down cleanly"), "{sig}: {rest}");
        let o = lockstack(&["pgbench", "-S", "-t", "10", "--data-dir", d]);
        assert!(o.status.success(), "{sig}: the directory was not shut down cleanly: {}", text(&o.stderr));
    }
    let target = dir.path().join("result.json");
    let link = dir.path().join("link.json");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = lockstack(&["pgbench", "-t", "2", "--json", link.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link was replaced");
    assert!(std::fs::read_to_string(&target).unwrap().contains("balance_sums"));
    if Path::new("/dev/full").exists() {
        let o = Command::new(env!("CARGO_BIN_EXE_lockstack"))
            .args(["pgbench", "-t", "2"])
            .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
            .output()
            .unwrap();
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("could not write the output"), "{err}");
    }
}

/// `-f -` reads the script from standard input, as pgbench does.
#[test]
fn a_script_can_come_from_standard_input() {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["pgbench", "-f", "-", "-t", "3", "--wait-sampling-hz", "0"])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run lockstack");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"\\set a random(1, 10)\nSELECT abalance FROM pgbench_accounts WHERE aid = :a;\n")
        .expect("write the script");
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("number of transactions actually processed: 3/3"),
        "{}",
        text(&o.stdout)
    );
}

/// Parser defects from the command line: a multi-byte character after `(`
/// (was a panic, exit 101), endless inputs (were read until memory ran out), a flag value with
/// a newline (was two lines on stderr), and an isolation level the engine does not implement
/// (ran as READ COMMITTED): each is one line naming the input, exit code 1.
#[test]
fn parser_defects_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    std::fs::write(p("e.sql"), "\\set x (\u{e9}\n").unwrap();
    bad(&["pgbench", "-f", &p("e.sql"), "-t", "1"], "e.sql:1: \\set x: unexpected character '\u{e9}'");
    bad(&["pgbench", "-f", "/dev/zero", "-t", "1"], "/dev/zero: larger than 1048576 bytes");
    bad(&["isolation", "/dev/zero"], "/dev/zero: larger than 4194304 bytes");
    std::fs::write(p("ok.spec"), "session s\nstep a { SELECT pg_advisory_lock(1); }\n").unwrap();
    bad(&["isolation", "--fast-path", "on\nx", &p("ok.spec")], "got 'on\\nx'");
    bad(
        &["isolation", "--preset", "pg10", &p("ok.spec")],
        "unknown preset \"pg10\" (valid: pg91, pg92, pg96, pg14, pg17)",
    );
    bad(&["isolation", "--set", "lmgr.nowait_queue_jump=maybe", &p("ok.spec")], "lmgr.nowait_queue_jump");
    bad(
        &["isolation", "--set", "lmgr.partitions=4", &p("ok.spec")],
        "lockstack isolation does not use this knob",
    );
    bad(&["pgbench", "-f", &p("no\nsuch.sql"), "-t", "1"], "no\\nsuch.sql");
    std::fs::write(p("rr.sql"), "\\set aid 1\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nEND;\n").unwrap();
    bad(
        &["pgbench", "-f", &p("rr.sql"), "-t", "1"],
        "rr.sql:2: unsupported: ISOLATION LEVEL REPEATABLE READ",
    );
    std::fs::write(p("rr.spec"), "session s\nstep a { BEGIN ISOLATION LEVEL SERIALIZABLE; }\n").unwrap();
    bad(
        &["isolation", &p("rr.spec")],
        "rr.spec:2: session s, step a: unsupported: ISOLATION LEVEL SERIALIZABLE",
    );
}

/// A global teardown blocked by a transaction a session left open printed
/// nothing and ignored --step-timeout; it now prints as it goes and stops at the timeout.
#[test]
fn a_blocked_teardown_prints_what_ran_and_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("t.spec");
    std::fs::write(
        &spec,
        "setup { CREATE TABLE t (id int); }\nteardown { DROP TABLE t; }\n\
         session s1\nstep b1 { BEGIN; LOCK TABLE t IN SHARE MODE; }\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["isolation", spec.to_str().unwrap(), "--step-timeout", "0.3"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the blocked teardown hung the run");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().unwrap();
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(out.contains("step b1: BEGIN; LOCK TABLE t IN SHARE MODE;"), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("t.spec: setup or teardown on the control connection timed out after 0.300 s"),
        "{err}"
    );
}

/// Runs `args` with the address space limited to `kib` KiB (`ulimit -v`), so that a reader
/// that buffers an endless input, or a plan built whole in memory, fails instead of growing.
#[cfg(target_os = "linux")]
fn lockstack_limited(kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_lockstack"))
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run lockstack under sh")
}

/// Every file a user names is read through a bound, devices and symlinks to them included:
/// under a 400 MB address-space limit each is one line naming the file, exit code 1 (they
/// were read whole: 1 GB and "out of memory", or an abort).
#[cfg(target_os = "linux")]
#[test]
fn endless_input_files_are_refused_within_a_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let check = |args: &[&str], want: &str| {
        let o = lockstack_limited(400_000, args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in: {err}");
    };
    check(&["machine", "show", "/dev/zero"], "machine profile \"/dev/zero\": larger than 1048576 bytes");
    let spec = d.join("ok.spec");
    std::fs::write(&spec, "session s\nstep a { SELECT pg_advisory_lock(1); }\n").unwrap();
    check(
        &["isolation", spec.to_str().unwrap(), "--expected", "/dev/zero"],
        "/dev/zero: larger than 16777216 bytes",
    );
    // An expected directory whose NAME.out is a link to an endless device.
    let exp = d.join("expected");
    std::fs::create_dir(&exp).unwrap();
    std::os::unix::fs::symlink("/dev/zero", exp.join("ok.out")).unwrap();
    check(&["isolation", spec.to_str().unwrap(), "--expected", exp.to_str().unwrap()], "ok.out: larger than");
    // A point file that is a link to /dev/zero.
    let points = d.join("points");
    std::fs::create_dir(&points).unwrap();
    std::os::unix::fs::symlink("/dev/zero", points.join("fastpath-point-0.json")).unwrap();
    check(
        &["experiment", "merge", points.to_str().unwrap()],
        "fastpath-point-0.json: larger than 67108864 bytes",
    );
}

/// A spec without permutation lines runs every interleaving of its sessions' steps: three
/// sessions of seven steps are 399,072,960 permutations, which were built in memory before the
/// first ran (3 GB, then an abort). They are made one at a time now: under a 400 MB limit the
/// count is printed, the first permutation runs, and the second stops the run (its setup
/// creates a table the first left behind, having no teardown) with one line and exit code 2.
#[cfg(target_os = "linux")]
#[test]
fn a_spec_of_many_permutations_runs_in_constant_memory() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("many.spec");
    let mut body = String::from("setup { CREATE TABLE t (id int); }\n");
    for s in ["a", "b", "c"] {
        body.push_str(&format!("session {s}\n"));
        for i in 1..=7 {
            body.push_str(&format!("step {s}{i} {{ RESET lock_timeout; }}\n"));
        }
    }
    std::fs::write(&spec, body).unwrap();
    let o = lockstack_limited(400_000, &["isolation", spec.to_str().unwrap()]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].ends_with(
            "many.spec: 399,072,960 permutations (every interleaving of 3 sessions' steps (7 + 7 + 7))"
        ),
        "{err}"
    );
    assert!(lines[1].contains("many.spec: setup failed: ERROR:  relation \"t\" already exists"), "{err}");
    assert_eq!(out.matches("starting permutation:").count(), 2, "{out}");
    assert!(
        out.contains(
            "starting permutation: a1 a2 a3 a4 a5 a6 a7 b1 b2 b3 b4 b5 b6 b7 c1 c2 c3 c4 c5 c6 c7\n"
        )
    );
    assert_eq!(out.matches("step ").count(), 21, "{out}");

    // A dry run lists the permutations one per line as it makes them; listed permutations
    // print no count.
    let small = dir.path().join("small.spec");
    std::fs::write(&small, "session a\nstep a1 { }\nstep a2 { }\nsession b\nstep b1 { }\n").unwrap();
    let o = lockstack_limited(400_000, &["isolation", "-n", small.to_str().unwrap()]);
    assert!(o.status.success());
    assert_eq!(
        text(&o.stdout),
        "permutation \"a1\" \"a2\" \"b1\"\npermutation \"a1\" \"b1\" \"a2\"\npermutation \"b1\" \"a1\" \"a2\"\n"
    );
    assert!(
        text(&o.stderr)
            .ends_with("small.spec: 3 permutations (every interleaving of 2 sessions' steps (2 + 1))\n")
    );
    std::fs::write(&small, "session a\nstep a1 { }\nsession b\nstep b1 { }\npermutation b1 a1\n").unwrap();
    let o = lockstack(&["isolation", "-n", small.to_str().unwrap()]);
    assert_eq!(text(&o.stdout), "permutation \"b1\" \"a1\"\n");
    assert_eq!(text(&o.stderr), "");
}

/// Input quoted in an error line keeps it one line: a raw U+2028 LINE SEPARATOR, U+2029, NEL
/// (U+0085) or a bidirectional override from a file name or flag value is written as an escape.
#[test]
fn separators_in_quoted_input_are_escaped() {
    let o = lockstack(&["pgbench", "-f", "no\u{2028}such\u{85}file\u{202e}.sql", "-t", "1"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("no\\u{2028}such\\u{85}file\\u{202e}.sql"), "{err}");
    assert!(!err.contains(['\u{2028}', '\u{85}', '\u{202e}']), "{err}");
    let o = lockstack(&["pgbench", "-T", "1\u{2029}2"]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("got '1\\u{2029}2'"), "{err}");
    assert!(!err.contains('\u{2029}'), "{err}");
}
