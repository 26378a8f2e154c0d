//! `lockstack machine list|show`: the built-in profiles are listed and shown, and a bad name
//! is one line on stderr with exit code 1. (`calibrate` runs real threads for seconds and is
//! exercised by hand; its output format is checked by `lockstack-sim`'s profile parser.)
//!
//! `--machine`: every workload command runs its measured phase on a simulated
//! machine and prints the "simulated machine" section; a simulated pgbench run repeats line
//! for line; a bad profile and a variant the model cannot see are one line and exit code 1.

use std::process::{Command, Output};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack")).args(args).output().expect("run lockstack")
}

#[test]
fn list_names_every_builtin_profile() {
    let o = lockstack(&["machine", "list"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    for name in ["host", "opteron-24", "xeon-32", "itanium-32", "power8-192", "xeon-12", "epyc-2s"] {
        assert!(out.lines().any(|l| l.starts_with(name)), "{name} missing from:\n{out}");
    }
    assert!(out.contains("192 hw threads (24 x 1 cores x 8 SMT, 4 NUMA nodes)"), "{out}");
}

#[test]
fn show_prints_a_builtin_with_its_citations_and_a_file_as_is() {
    let o = lockstack(&["machine", "show", "opteron-24"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("SOSP 2013") && out.contains("same_llc_ns = 38.6"), "{out}");
    let path = std::env::temp_dir().join(format!("lockstack-machine-{}.toml", std::process::id()));
    std::fs::write(&path, out.replace("name = \"opteron-24\"", "name = \"mine\"")).unwrap();
    let o = lockstack(&["machine", "show", path.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8(o.stdout).unwrap().contains("name = \"mine\""));
    std::fs::write(&path, "name = \"broken\"\n").unwrap();
    let o = lockstack(&["machine", "show", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn an_unknown_profile_is_one_line_and_exit_code_1() {
    let o = lockstack(&["machine", "show", "cray-1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cray-1") && err.contains("xeon-32"), "{err}");
}

/// A profile argument that is a path (a '/' or a .toml name) is a file only: a missing one is
/// said as a missing file, with no user-profile name made from it.
#[test]
fn a_missing_profile_file_is_said_as_a_file() {
    let o = lockstack(&["machine", "show", "/nonexistent/x.toml"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("machine profile file /nonexistent/x.toml: cannot be read"), "{err}");
    assert!(!err.contains(".toml.toml") && !err.contains("built-in"), "{err}");
}

/// `machine calibrate`'s --repeats and --max-spread are checked before anything is measured:
/// one line naming the flag, exit code 1. (The measurement itself, its spread and the refusal
/// of an unstable figure are checked by `lockstack-sim`'s calibrate unit tests: a real
/// calibration's figures depend on the host's load.)
#[test]
fn calibrate_refuses_bad_repeats_and_spread_in_one_line() {
    for (args, flag) in [
        (&["machine", "calibrate", "--repeats", "1"][..], "--repeats 1"),
        (&["machine", "calibrate", "--repeats", "0"][..], "--repeats 0"),
        (&["machine", "calibrate", "--repeats", "101"][..], "--repeats 101"),
        (&["machine", "calibrate", "--max-spread", "0.9"][..], "--max-spread 0.9"),
        (&["machine", "calibrate", "--max-spread", "-2"][..], "--max-spread -2"),
    ] {
        let o = lockstack(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// Runs `lockstack args`, expecting exit code 1 and one line on stderr that contains each of
/// `want`; returns that line.
fn refused(args: &[&str], want: &[&str]) -> String {
    let o = lockstack(args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(1), "lockstack {args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "lockstack {args:?}: {err}");
    for w in want {
        assert!(err.contains(w), "lockstack {args:?}: want {w:?} in: {err}");
    }
    err
}

/// Runs `lockstack args`, expecting success, and returns stdout.
fn ok(args: &[&str]) -> String {
    let o = lockstack(args);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "lockstack {args:?}: {:?}\n{err}\n{out}", o.status);
    out.into_owned()
}

/// The lines that do not depend on the host's speed (host seconds, events per host second,
/// the native load time).
fn stable_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| !l.contains("host second") && !l.contains("load") && !l.contains("initial connection"))
        .collect()
}

#[test]
fn simulated_pgbench_repeats_line_for_line() {
    let args = ["pgbench", "-S", "-c", "8", "-t", "100", "--machine", "xeon-32"];
    let (a, b) = (ok(&args), ok(&args));
    assert!(
        a.contains("simulated machine: xeon-32 (32 cores, 32 hardware threads), deterministic clock"),
        "{a}"
    );
    assert!(a.contains("per virtual second"), "{a}");
    assert!(a.contains("hottest cache lines"), "{a}");
    assert_eq!(stable_lines(&a), stable_lines(&b), "two simulated runs differ");
}

/// More clients than hardware threads (time slicing, a run queue) and many tasks finishing
/// and first waiting at different times: three identical runs give the same report, line for
/// line. The allocator's placement of objects made during the phase (a task's LWLock waiter)
/// decides which of them share a simulated cache line, so the order of allocations and frees
/// must not depend on anything but the simulation (it once depended on hash maps' random
/// seeds, and these runs differed by a few line transfers).
#[test]
fn simulated_pgbench_repeats_at_any_client_count() {
    for (profile, clients, preset) in
        [("xeon-32", "65", "pg17"), ("xeon-32", "128", "pg92"), ("power8-192", "192", "pg17")]
    {
        let args = ["pgbench", "-S", "-c", clients, "-t", "2", "--preset", preset, "--machine", profile];
        let runs = [ok(&args), ok(&args), ok(&args)];
        assert!(runs[0].contains(&format!("number of clients: {clients}")), "{}", runs[0]);
        assert!(runs[0].contains("line transfers"), "{}", runs[0]);
        for r in &runs[1..] {
            assert_eq!(stable_lines(&runs[0]), stable_lines(r), "{profile}, {clients} clients: runs differ");
        }
    }
}

/// 9.2's spinlocks (the LWLock mutex of `ProcArrayLock`, the buffer header lock) contended by
/// 64 clients under PostgreSQL's `s_lock` wait: the waiters sleep, and the sleeps are booked
/// under `Timeout:SpinDelay` in the report and the JSON (parked or asleep, not only the
/// spinning), and the wait-event sampler sees the event. (That none of it is booked as plain
/// sleeping is checked task by task in crates/sim/tests/spin_delay.rs.)
#[test]
fn simulated_spinlock_sleeps_are_timeout_spin_delay() {
    let json = std::env::temp_dir().join(format!("lockstack-sim-spindelay-{}.json", std::process::id()));
    let args = [
        "pgbench",
        "-S",
        "-c",
        "64",
        "-t",
        "16",
        "--preset",
        "pg92",
        "--machine",
        "xeon-32",
        "--wait-sampling-hz",
        "10000",
        "--json",
        json.to_str().unwrap(),
    ];
    let out = ok(&args);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Timeout:SpinDelay") && l.contains("parked or asleep"));
    assert!(line.is_some(), "{out}");
    let sampled = out
        .lines()
        .skip_while(|l| !l.starts_with("wait-event profile"))
        .take_while(|l| !l.starts_with("fidelity"));
    assert!(
        sampled.clone().any(|l| l.contains("Timeout:SpinDelay")),
        "the sampler never saw a spin delay:\n{out}"
    );
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    let waits = doc["simulated_machine"]["waits"].as_array().unwrap();
    let spin = waits.iter().find(|w| w["class"] == "Timeout:SpinDelay").expect("a Timeout:SpinDelay wait");
    assert!(spin["share"].as_f64().unwrap() > 0.0, "{spin}");
    assert!(
        spin["waiting_ms"].as_f64().unwrap() > 0.0,
        "the spinlocks' sleeps are not booked under the class: {spin}"
    );
}

/// The wait-event profile (a sampler task reading the backends' published events in virtual
/// time) and the section's per-class "parked or asleep" shares of the backends' time read the
/// same states over the same window, so they agree within 2 points per wait class and for "no
/// wait event" (1 minus every parked share: running, spinning, sleeping). Contended runs:
/// TPC-B-like row locks and WAL flushes, the same with `synchronous_commit` off (the WAL
/// writer's waits stay out of both), and 9.2's spinlocks (`Timeout:SpinDelay`, spinning
/// published as no event). Each run is long enough that the report's own sampling error (two
/// binomial standard errors) is inside the band.
#[test]
fn simulated_wait_profile_agrees_with_the_section_per_class() {
    let json = std::env::temp_dir().join(format!("lockstack-sim-agree-{}.json", std::process::id()));
    let runs: [&[&str]; 3] = [
        &["-c", "16", "-t", "40"],
        &["-c", "16", "-t", "40", "--set", "wal.synchronous_commit=off"],
        // 64 transactions a client: at 16 the sampler's own error (+/-2.5 points, as the
        // report says) was wider than the band, and the two readings were 2.7 points apart.
        &["-S", "-c", "64", "-t", "64", "--preset", "pg92"],
    ];
    for run in runs {
        let mut args = vec!["pgbench", "--machine", "xeon-32", "--json", json.to_str().unwrap()];
        args.extend_from_slice(run);
        let out = ok(&args);
        if !run.contains(&"-S") {
            // The WAL section says what a flush was: xeon-32's modelled fsync.
            assert!(
                out.lines().any(|l| l.starts_with("  flushes (modelled, 200 us each)")),
                "{run:?}\n{out}"
            );
        }
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        // The band means something only where the sampler's stated error is inside it.
        let stated: f64 = out
            .split("sampling error up to +/-")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{run:?}: no stated sampling error\n{out}"));
        assert!(
            stated < 2.0,
            "{run:?}: sampling error +/-{stated} points, wider than the 2-point band\n{out}"
        );
        let samples = doc["wait_samples"].as_u64().unwrap();
        assert!(samples >= 1000, "{run:?}: only {samples} samples (the default rate under --machine)\n{out}");
        let mut sampled: std::collections::BTreeMap<String, f64> = doc["wait_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e[0].as_str().unwrap().to_string(), e[1].as_f64().unwrap() / samples as f64))
            .collect();
        let mut parked: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
        for w in doc["simulated_machine"]["waits"].as_array().unwrap() {
            let class = w["class"].as_str().unwrap();
            // The section names an LWLock tranche alone; the profile as `LWLock:<tranche>`.
            let event = if class.contains(':') { class.to_string() } else { format!("LWLock:{class}") };
            parked.insert(event, w["parked_share"].as_f64().unwrap());
        }
        assert!(
            parked.values().any(|&p| p > 0.10),
            "{run:?}: not a contended run, nothing waited a tenth of the time\n{out}"
        );
        assert!(!sampled.contains_key("Activity:WalWriterMain"), "{run:?}: the WAL writer was sampled");
        assert!(!parked.contains_key("Activity:WalWriterMain"), "{run:?}: the WAL writer among the backends");
        let no_event = 1.0 - sampled.values().sum::<f64>();
        let not_parked = 1.0 - parked.values().sum::<f64>();
        sampled.insert("(no wait event)".into(), no_event);
        parked.insert("(no wait event)".into(), not_parked);
        let classes: std::collections::BTreeSet<&String> = sampled.keys().chain(parked.keys()).collect();
        for c in classes {
            let (s, p) = (sampled.get(c).copied().unwrap_or(0.0), parked.get(c).copied().unwrap_or(0.0));
            assert!(
                (s - p).abs() <= 0.02,
                "{run:?}: {c}: sampled {:.2}% against parked or asleep {:.2}% of the backends' time\n{out}",
                s * 100.0,
                p * 100.0
            );
        }
    }
    let _ = std::fs::remove_file(&json);
}

/// Natively the WAL section's flushes row says what a flush was too: none for the in-memory
/// WAL (the default), a modelled fsync of the time `--set wal.flush` gives.
#[test]
fn the_flushes_row_says_what_a_flush_was() {
    for (set, label) in [
        ("wal.flush=memory", "  flushes (none: WAL in memory)"),
        ("wal.flush=modelled:50", "  flushes (modelled, 50 us each)"),
    ] {
        let out = ok(&["pgbench", "-c", "1", "-t", "2", "--set", set]);
        assert!(out.lines().any(|l| l.starts_with(label)), "{set}: {label:?} missing\n{out}");
    }
}

/// The "hottest cache lines" rows of a report.
fn hot_lines(out: &str) -> Vec<&str> {
    out.lines()
        .skip_while(|l| !l.contains("hottest cache lines"))
        .skip(1)
        .take_while(|l| l.starts_with("    "))
        .collect()
}

/// The harness's own waits (start and end gates) are booked under `Harness:*` classes, shown
/// on a line of their own and left out of the lock-wait shares, text and JSON; no wait is left
/// unclassified (every park and spin of the lock stack names its class); and every one of the
/// ten hottest lines carries a name. Select-only and TPC-B-like (row locks, WAL, the
/// free-page lists, LWLock queues) on 8 clients.
#[test]
fn simulated_pgbench_names_its_waits_and_hot_lines() {
    let json = std::env::temp_dir().join(format!("lockstack-sim-waits-{}.json", std::process::id()));
    for script in ["-S", "-N", "--builtin=tpcb-like"] {
        let out = ok(&[
            "pgbench",
            "-s",
            "1",
            script,
            "-c",
            "8",
            "-t",
            "40",
            "--machine",
            "xeon-32",
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(!out.contains("unclassified"), "pgbench {script}: an unclassified wait:\n{out}");
        let harness = out.lines().find(|l| l.contains("harness waits")).unwrap_or_else(|| panic!("{out}"));
        assert!(harness.contains("Harness:start") && harness.contains("Harness:end"), "{harness}");
        let section = &out[out.find("waiting, share").expect("the waits table")..];
        let shares = &section[..section.find("harness waits").unwrap()];
        assert!(
            !shares.contains("Harness:"),
            "pgbench {script}: harness waits among the lock waits:\n{shares}"
        );
        let lines = hot_lines(&out);
        assert_eq!(lines.len(), 10, "{out}");
        for l in lines {
            assert!(
                !l.trim_start().starts_with("line #"),
                "pgbench {script}: an unnamed hot line: {l}\n{out}"
            );
        }
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let sim = &doc["simulated_machine"];
        for w in sim["waits"].as_array().expect("waits") {
            let class = w["class"].as_str().unwrap();
            assert!(!class.starts_with("Harness:") && class != "unclassified", "{class} in {sim}");
        }
        let harness: Vec<&str> = sim["harness_waits"]
            .as_array()
            .expect("harness_waits")
            .iter()
            .map(|w| w["class"].as_str().unwrap())
            .collect();
        assert!(harness.contains(&"Harness:start") && harness.contains(&"Harness:end"), "{harness:?}");
    }
    let _ = std::fs::remove_file(&json);
}

/// `--machine` refuses a variant whose synchronization is a dependency's from the resolved
/// configuration: the value may come from a flag, its `--set` knob or a flag alias, and a
/// supported value given the same ways runs. (No release preset selects dashmap or a
/// baseline lock, so a preset cannot reach the refusal; `--preset` with a supported value runs.)
#[test]
fn refusals_come_from_the_resolved_configuration() {
    for args in [
        &["buffers", "--mapping", "dashmap", "--threads", "2", "--duration", "0.001", "--machine", "xeon-32"]
            [..],
        &[
            "buffers",
            "--set",
            "bufmgr.mapping=dashmap",
            "--threads",
            "2",
            "--duration",
            "0.001",
            "--machine",
            "xeon-32",
        ],
        &["pgbench", "-s", "1", "-S", "-t", "5", "--set", "bufmgr.mapping=dashmap", "--machine", "xeon-32"],
        &["experiment", "vm-pin", "--smoke", "--set", "bufmgr.mapping=dashmap", "--machine", "xeon-12"],
        &["lwlock", "--impl", "atomic,std", "--threads", "2", "--duration", "0.001", "--machine", "xeon-32"],
        &["lwlock", "--impl", "all", "--threads", "2", "--duration", "0.001", "--machine", "xeon-32"],
    ] {
        refused(args, &["--machine: ", "invisible to the simulated machine"]);
    }
    for args in [
        &[
            "buffers",
            "--mapping",
            "partitions-16",
            "--threads",
            "2",
            "--duration",
            "0.001",
            "--machine",
            "xeon-32",
        ][..],
        &[
            "buffers",
            "--set",
            "bufmgr.mapping=partitions-128",
            "--threads",
            "2",
            "--duration",
            "0.001",
            "--machine",
            "xeon-32",
        ],
        &["pgbench", "-s", "1", "-S", "-t", "5", "--preset", "pg92", "--machine", "xeon-32"],
        // The lock list from the knob, not from --impl (whose default, all, would be refused).
        &[
            "lwlock",
            "--set",
            "lwlock.kind=pg92",
            "--threads",
            "2",
            "--duration",
            "0.001",
            "--machine",
            "xeon-32",
        ],
        &["lwlock", "--preset", "pg17", "--threads", "2", "--duration", "0.001", "--machine", "xeon-32"],
    ] {
        ok(args);
    }
}

#[test]
fn machine_works_on_every_workload_command() {
    let spec =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../workloads/tests/isolation/specs/simple-deadlock.spec");
    let json = std::env::temp_dir().join(format!("lockstack-sim-{}.json", std::process::id()));
    let runs: [&[&str]; 8] = [
        &["pgbench", "-c", "2", "-t", "20", "--machine", "opteron-24"],
        &["lwlock", "--impl", "atomic,pg92", "--threads", "4", "--duration", "0.002", "--machine", "xeon-32"],
        &["locks", "--threads", "4", "--duration", "0.002", "--machine", "xeon-32"],
        &[
            "buffers",
            "--scenario",
            "hot-pin",
            "--threads",
            "4",
            "--duration",
            "0.002",
            "--machine",
            "xeon-12",
        ],
        &["snapshot", "--backends", "50", "--running", "4", "--duration", "0.002", "--machine", "xeon-32"],
        &["wal", "--threads", "4", "--duration", "0.002", "--machine", "xeon-32"],
        &["isolation", spec, "--machine", "xeon-32"],
        &["experiment", "vm-pin", "--smoke", "--out", json.to_str().unwrap(), "--machine", "xeon-12"],
    ];
    for args in runs {
        let out = ok(args);
        assert!(out.contains("\nsimulated machine: "), "lockstack {args:?} printed no section:\n{out}");
        assert!(out.contains("virtual seconds: "), "{out}");
        if args[0] == "experiment" {
            // Under --machine the experiment writes and checks the where-time-went plot.
            assert!(out.contains("vm-pin-time.svg (where the simulated backends' time went)"), "{out}");
            assert!(out.contains("smoke check: ok") && !out.contains(" 0 timed points"), "{out}");
            assert!(out.contains("machine: simulated xeon-12 ("), "{out}");
        }
    }
    let _ = std::fs::remove_dir_all(&json);
    let out = ok(&[
        "lwlock",
        "--impl",
        "atomic",
        "--threads",
        "2",
        "--duration",
        "0.001",
        "--machine",
        "xeon-32",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("simulated machine"));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["simulated_machine"]["profile"], "xeon-32", "{doc}");
    let _ = std::fs::remove_file(&json);
}

#[test]
fn bad_machine_input_is_one_line_and_exit_code_1() {
    for args in [
        &["pgbench", "-S", "-t", "5", "--machine", "cray-1"][..],
        &["lwlock", "--impl", "parking_lot", "--machine", "xeon-32"],
        &["lwlock", "--machine", "xeon-32"],
        &["buffers", "--mapping", "dashmap", "--machine", "xeon-32"],
        &["pgbench", "-S", "-t", "5", "--set", "bufmgr.mapping=dashmap", "--machine", "xeon-32"],
        &["machine", "list", "--machine", "xeon-32"],
        &["lwlock", "--sim-clock", "measured"],
    ] {
        refused(args, &[]);
    }
}

/// `--machine FILE` and `--sim-segments FILE` read their files through a bound: an endless
/// device is one line naming it and exit code 1 under a 400 MB address-space limit (they were
/// read whole until memory ran out). A pgbench run's `-T` under `--machine` is virtual seconds
/// and may be a fraction, from 0.001.
#[cfg(target_os = "linux")]
#[test]
fn endless_profile_and_segment_files_are_refused_within_a_memory_limit() {
    for (args, want) in [
        (
            &["pgbench", "-S", "-t", "5", "--machine", "/dev/zero"][..],
            "machine profile \"/dev/zero\": larger than 1048576 bytes",
        ),
        (
            &["pgbench", "-S", "-t", "5", "--machine", "host", "--sim-segments", "/dev/zero"],
            "--sim-segments /dev/zero: larger than 16777216 bytes",
        ),
        (
            &["pgbench", "-S", "-T", "0.0001", "--machine", "host"],
            "from 0.001 to 3600 virtual seconds under --machine, got '0.0001'",
        ),
    ] {
        let o = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 400000 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_lockstack"))
            .args(args)
            .output()
            .expect("run lockstack under sh");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "lockstack {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "lockstack {args:?}: {err}");
        assert!(err.contains(want), "lockstack {args:?}: want {want:?} in: {err}");
    }
}

/// `--costs postgres` (pgbench's default under `--machine`) charges PostgreSQL's measured counts
/// for the regions the lock stack marks, and the report says so; the segments the segment table
/// does not know carry under 1% of the tasks' virtual time (the table cannot silently go stale
/// under a built-in workload); `--costs own` charges none of PostgreSQL's counts and gives a
/// different (faster: the engine's own statements are shorter than PostgreSQL's) run.
#[test]
fn simulated_pgbench_states_its_costs_and_untimed_share() {
    let dir = std::env::temp_dir();
    let mut shares = Vec::new();
    for (costs, script) in [("postgres", "-S"), ("postgres", "-N"), ("own", "-S")] {
        let json = dir.join(format!("lockstack-sim-costs-{costs}{script}-{}.json", std::process::id()));
        let out = ok(&[
            "pgbench",
            script,
            "-c",
            "8",
            "-t",
            "20",
            "--machine",
            "xeon-32",
            "--costs",
            costs,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(out.lines().any(|l| l.trim_start().starts_with(&format!("costs: {costs}"))), "{out}");
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        std::fs::remove_file(&json).unwrap();
        let s = &doc["simulated_machine"];
        let untimed = s["untimed_share"].as_f64().unwrap();
        assert!(
            untimed < 0.01,
            "{costs} {script}: untimed segments carry {:.2}% of the time",
            untimed * 100.0
        );
        let ts = &s["time_sources"];
        let pg = ts["postgres_ns"].as_u64().unwrap();
        if costs == "postgres" {
            assert!(pg > 0, "{ts}");
            assert!(ts["regions"].get("statement.select_pk").is_some(), "{ts}");
            assert!(ts["unknown_regions"].as_array().unwrap().is_empty(), "every region has a figure: {ts}");
        } else {
            assert_eq!(pg, 0, "{ts}");
        }
        shares.push((costs, script, doc["elapsed_s"].as_f64().unwrap()));
    }
    assert_ne!(shares[0].2, shares[2].2, "--costs own and postgres gave the same run: {shares:?}");
}

/// A simulated pgbench report states its ground: the profile and where its figures come from,
/// the cost mode, the calibration, the client and server costs in use (and whose they are), in
/// the text and in the `--json` document alike; and it prints no native-only line.
#[test]
fn simulated_pgbench_states_its_ground() {
    let json = std::env::temp_dir().join(format!("lockstack-sim-ground-{}.json", std::process::id()));
    let out = ok(&[
        "pgbench",
        "-S",
        "-c",
        "4",
        "-t",
        "10",
        "--machine",
        "xeon-32",
        "--json",
        json.to_str().unwrap(),
    ]);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    assert!(!out.contains("each client runs on its own thread here"), "a native-only line: {out}");
    assert!(
        out.contains("number of threads: 1 (simulated: each client and its backend are one task, 4 tasks)"),
        "{out}"
    );
    let line = |prefix: &str| {
        out.lines()
            .map(str::trim_start)
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line: {out}"))
            .to_string()
    };
    assert!(out.contains("simulated machine: xeon-32 "), "{out}");
    let profile = line("profile: ");
    assert!(
        profile.contains("Nehalem-EX") && profile.contains(" cited, ") && profile.contains(" assumed"),
        "{profile}"
    );
    assert!(line("costs: ").starts_with("costs: postgres: "), "{out}");
    assert_eq!(
        line("calibration: "),
        "calibration: not calibrated (the profile's postgres_ipc 0.8, assumed)"
    );
    assert_eq!(
        line("client and server costs: "),
        "client and server costs: client CPU 10 us per statement (the profile's, assumed), round trip 20 us (the profile's, assumed), WAL flush modelled fsync 200 us (the profile's, assumed)"
    );
    let g = &doc["simulated_machine"]["ground"];
    assert!(g["description"].as_str().unwrap().contains("Nehalem-EX"), "{g}");
    assert_eq!(g["calibration"], "not calibrated (the profile's postgres_ipc 0.8, assumed)", "{g}");
    assert_eq!(g["client_cpu_us"].as_f64(), Some(10.0), "{g}");
    assert_eq!(g["client_rtt_us"].as_f64(), Some(20.0), "{g}");
    assert_eq!(g["wal_flush"], "modelled fsync 200 us", "{g}");
    assert_eq!(g["provenance"]["postgres_ipc"], "assumed", "{g}");
    assert_eq!(g["provenance"]["clock_ghz"], "cited", "{g}");

    // What --set gives is named as the run's, not the profile's.
    let out = ok(&[
        "pgbench",
        "-S",
        "-c",
        "4",
        "-t",
        "10",
        "--machine",
        "xeon-32",
        "--set",
        "sim.client_cpu_us=5",
        "--set",
        "sim.postgres_ipc=0.5",
    ]);
    assert!(out.contains("calibration: not calibrated (--set sim.postgres_ipc 0.5)"), "{out}");
    assert!(out.contains("client CPU 5 us per statement (set for this run, not the profile's)"), "{out}");
    assert!(out.contains("; sim.postgres_ipc 0.5 (--set)"), "{out}");
}

/// `machine validate xeon-32 --json`: one JSON object per line, names in the scheme, a shared
/// counter slower with all threads than with one, and a Modified line's load slower the
/// farther it comes from.
#[test]
fn validate_prints_one_json_object_per_measurement() {
    let o = lockstack(&["machine", "validate", "xeon-32", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let mut faa = Vec::new();
    let mut load = Vec::new();
    for line in out.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let name = v["name"].as_str().unwrap().to_string();
        let sim = v["simulated"].as_f64().unwrap();
        assert!(sim > 0.0, "{line}");
        assert_eq!(v["published"].is_null(), v["source"].is_null(), "{line}");
        let (kind, rest) = name.rsplit_once('-').unwrap();
        if let Some(d) = name.strip_prefix("load-modified-").or(name.strip_prefix("cas-modified-")) {
            assert!(["smt", "same-die", "same-socket", "hop1", "hop2"].contains(&d), "{name}");
            assert_eq!(v["unit"], "ns", "{line}");
            if name.starts_with("load") {
                load.push(sim);
            }
        } else {
            assert!(
                ["faa-counter", "tas-lock", "ttas-lock", "ticket-lock", "mcs-lock"].contains(&kind),
                "{name}"
            );
            let n: u32 = rest.strip_prefix('t').unwrap().parse().unwrap();
            assert!(n == 32 || n.is_power_of_two() && n < 32, "{name}");
            assert_eq!(v["unit"], "Mops/s", "{line}");
            if kind == "faa-counter" {
                faa.push(sim);
            }
        }
    }
    // xeon-32: same die, then one hop (every remote node is one hop away).
    assert_eq!(load.len(), 2, "{out}");
    assert!(load.windows(2).all(|w| w[0] < w[1]), "load-modified by distance: {load:?}");
    assert_eq!(faa.len(), 6, "{out}");
    assert!(faa[0] > *faa.last().unwrap(), "faa-counter t1 vs t32: {faa:?}");
    // The X5550 comparison names its source.
    assert!(out.contains(r#""name":"faa-counter-t1","published":132.0"#), "{out}");
}

#[test]
fn validate_an_unknown_profile_is_one_line_and_exit_code_1() {
    let o = lockstack(&["machine", "validate", "cray-1"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8(o.stderr).unwrap().lines().count(), 1);
}

#[test]
fn pgbench_applies_a_stored_calibration_and_names_it() {
    let out =
        ok(&["pgbench", "-S", "-c", "1", "-t", "20", "--machine", "xeon-32", "--calibration", "pgxact"]);
    assert!(
        out.contains("from pgxact's calibration: select-only on xeon-32: Haas, 32 cores, -S at 1 client"),
        "{out}"
    );
    // This run's settings are not the fit's: the line says which differ.
    assert!(out.contains("this run differs from the fit's settings in -M prepared (fit: simple)"), "{out}");
    // Under the fit's own settings it says so.
    let fit = ok(&[
        "pgbench",
        "-S",
        "-c",
        "1",
        "-t",
        "20",
        "-M",
        "simple",
        "-s",
        "10",
        "--preset",
        "pg92",
        "--set",
        "wal.synchronous_commit=off",
        "--set",
        "procarray.layout=pgproc",
        "--set",
        "procarray.global_xmin=every-snapshot",
        "--machine",
        "xeon-32",
        "--calibration",
        "pgxact",
    ]);
    assert!(fit.contains("this run has the fit's settings (--calibration pgxact)"), "{fit}");
    let ipc = lockstack_workloads::experiments::find("pgxact")
        .unwrap()
        .calibration("xeon-32", "select-only")
        .unwrap()
        .postgres_ipc;
    assert!(out.contains(&format!("PostgreSQL's counts charged at IPC {ipc:.3}")), "{out}");
    // Without it the run says it is not calibrated.
    let out = ok(&["pgbench", "-S", "-c", "1", "-t", "20", "--machine", "xeon-32"]);
    assert!(out.contains("calibration: not calibrated"), "{out}");
    for (args, needle) in [
        (&["pgbench", "-S", "-t", "5", "--calibration", "pgxact"][..], "only under --machine"),
        (
            &["pgbench", "-N", "-t", "5", "--machine", "xeon-32", "--calibration", "pgxact"],
            "no stored calibration for simple-update on xeon-32",
        ),
        (
            &["pgbench", "-S", "-t", "5", "--machine", "xeon-32", "--calibration", "nosuch"],
            "unknown experiment",
        ),
        (
            &[
                "pgbench",
                "-S",
                "-t",
                "5",
                "--machine",
                "xeon-32",
                "--costs",
                "own",
                "--calibration",
                "pgxact",
            ],
            "--costs own",
        ),
        (&["pgbench", "-i", "--machine", "xeon-32", "--calibration", "pgxact"], "--calibration"),
        (
            &["pgbench", "-S", "-N", "-t", "5", "--machine", "xeon-32", "--calibration", "pgxact"],
            "one built-in script",
        ),
        (
            &[
                "pgbench",
                "-S",
                "-t",
                "5",
                "--machine",
                "xeon-32",
                "--calibration",
                "pgxact",
                "--set",
                "sim.postgres_ipc=0.3",
            ],
            "not both",
        ),
    ] {
        refused(args, &[needle]);
    }
}

#[test]
fn a_layout_shift_of_zero_changes_nothing_and_a_shift_is_stated() {
    let base = ["pgbench", "-S", "-c", "4", "-t", "50", "--machine", "xeon-32"];
    let a = ok(&base);
    assert!(a.contains("heap layout: as this process placed it"), "{a}");
    let zero: Vec<&str> = base.iter().copied().chain(["--sim-layout-shift", "0"]).collect();
    assert_eq!(stable_lines(&a), stable_lines(&ok(&zero)));
    let three: Vec<&str> = base.iter().copied().chain(["--sim-layout-shift", "3"]).collect();
    let c = ok(&three);
    assert!(c.contains("heap layout: shifted by 3 x 16 bytes (--sim-layout-shift 3)"), "{c}");
    for (args, needle) in [
        (&["pgbench", "-S", "-t", "2", "--sim-layout-shift", "3"][..], "need --machine"),
        (&["pgbench", "-S", "-t", "2", "--machine", "xeon-32", "--sim-layout-shift", "4097"], "at most 4096"),
    ] {
        refused(args, &[needle]);
    }
}
