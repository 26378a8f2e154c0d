//! `lockstack experiment`: every experiment in smoke mode writes well-formed files and prints
//! the seed-style tables; bad input is one line on stderr and exit code 1.

use std::path::Path;
use std::process::{Command, Output};

const EXPERIMENTS: [(&str, usize, usize); 5] = [
    // (name, workloads, variants)
    ("pgxact", 3, 4),
    ("old-snapshot", 1, 3),
    ("flexlock", 2, 3),
    ("fastpath", 1, 3),
    ("vm-pin", 2, 3),
];

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack")).args(args).output().expect("run lockstack")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Lines of the throughput table that follows the header line starting `clients |` (`workers |`
/// for vm-pin), up to the
/// blank line that ends it (the separator line excluded).
fn table_rows(stdout: &str, after: usize) -> Vec<String> {
    stdout.lines().skip(after + 2).take_while(|l| !l.trim().is_empty()).map(str::to_string).collect()
}

#[test]
fn every_experiment_runs_in_smoke_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (name, workloads, variants) in EXPERIMENTS {
        let out = dir.path().join(name);
        let o = lockstack(&["experiment", name, "--smoke", "--out", out.to_str().unwrap()]);
        let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
        assert!(o.status.success(), "{name}: {stderr}\n{stdout}");
        assert!(stdout.contains("smoke check: ok"), "{name}: {stdout}");
        // Natively there is no where-time-went plot, and the listing says so; two client
        // counts are too few for a USL fit, and the table says so per curve.
        assert!(stdout.contains(&format!("not written: {name}-time.svg")), "{name}: {stdout}");
        assert!(!out.join(format!("{name}-time.svg")).exists(), "{name}");
        assert!(stdout.contains("USL fit per curve"), "{name}: {stdout}");
        assert_eq!(
            stdout.matches("no fit: 2 client count(s), need 3").count(),
            workloads * variants,
            "{name}"
        );
        let mut rd = csv::Reader::from_path(out.join(format!("{name}-usl.csv"))).unwrap();
        assert_eq!(rd.records().map(Result::unwrap).count(), workloads * variants, "{name}");

        // Smoke mode: 1 run at clients 1 and 2.
        let points = workloads * 2 * variants;
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("{name}.json"))).unwrap())
                .unwrap();
        assert_eq!(json["points"].as_array().unwrap().len(), points, "{name}");
        assert_eq!(json["summary"].as_array().unwrap().len(), points, "{name}");
        for p in json["points"].as_array().unwrap() {
            assert_eq!(p["ok"], true, "{name}: {p}");
            assert!(p["ops"].as_u64().unwrap() > 0, "{name}: a point did no work: {p}");
        }
        let mut rd = csv::Reader::from_path(out.join(format!("{name}.csv"))).unwrap();
        assert_eq!(
            rd.headers().unwrap().iter().take(3).collect::<Vec<_>>(),
            ["workload", "variant", "clients"]
        );
        assert_eq!(rd.records().map(Result::unwrap).count(), points, "{name}");
        let mut rd = csv::Reader::from_path(out.join(format!("{name}-runs.csv"))).unwrap();
        assert_eq!(rd.records().map(Result::unwrap).count(), points, "{name}");
        let svg = std::fs::read_to_string(out.join(format!("{name}.svg"))).unwrap();
        assert!(svg.trim_start().starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{name}");

        // One throughput table per workload: a header with the baseline and, per other variant,
        // its column and a gain % column; one row per client count.
        let headers: Vec<usize> = stdout
            .lines()
            .enumerate()
            .filter(|(_, l)| {
                let l = l.trim_start();
                // vm-pin's unit of concurrency is workers.
                l.starts_with("clients |") || l.starts_with("workers |")
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(headers.len(), workloads, "{name}: {stdout}");
        for &h in &headers {
            let header = stdout.lines().nth(h).unwrap();
            assert_eq!(header.split('|').count(), 1 + 1 + 2 * (variants - 1), "{name}: {header}");
            assert_eq!(header.matches("gain %").count(), variants - 1, "{name}: {header}");
            let rows = table_rows(&stdout, h);
            assert_eq!(rows.len(), 2, "{name}: {rows:?}");
            for (row, clients) in rows.iter().zip(["1", "2"]) {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                assert_eq!(cells[0], clients, "{name}: {row}");
                assert_eq!(cells.len(), 1 + 1 + 2 * (variants - 1), "{name}: {row}");
                assert!(cells[1].parse::<f64>().is_ok(), "{name}: {row}");
            }
        }
        // Counter tables: one row per variant and client count.
        let counter_headers =
            stdout.lines().enumerate().filter(|(_, l)| l.trim_start().starts_with("variant ")).count();
        assert_eq!(counter_headers, workloads, "{name}");
        assert!(stdout.contains("the seed's published figures"), "{name}");
        assert!(stdout.lines().any(|l| l.starts_with("machine: ") || l.starts_with("note: ")), "{name}");
    }
}

#[test]
fn list_names_every_experiment() {
    let o = lockstack(&["experiment", "list"]);
    assert!(o.status.success());
    let stdout = text(&o.stdout);
    for (name, ..) in EXPERIMENTS {
        assert_eq!(stdout.lines().filter(|l| l.starts_with(&format!("{name} "))).count(), 1, "{stdout}");
    }
}

/// `experiment show NAME` names the thread, every machine the seed measured on with its
/// published series, every published point's count, the stored calibrations, and the exact
/// commands that reproduce each figure; without NAME or with an unknown one it is one line
/// listing the valid names and exit code 1.
#[test]
fn show_names_the_machines_points_calibrations_and_commands() {
    let o = lockstack(&["experiment", "show", "pgxact"]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{}\n{out}", text(&o.stderr));
    assert!(out.contains("thread:") && out.contains("authors:") && out.contains("seed:"), "{out}");
    for machine in ["xeon-32", "itanium-32"] {
        assert!(out.lines().any(|l| l.starts_with(&format!("  {machine}: series "))), "{machine}:\n{out}");
        let sweep = format!(
            "lockstack experiment pgxact --machine {machine} --jobs 2 --out out/validation/pgxact-{machine}"
        );
        assert!(out.contains(&sweep), "{sweep}:\n{out}");
        assert!(
            out.contains(&format!("lockstack experiment pgxact --machine {machine} --calibrate")),
            "{out}"
        );
    }
    assert!(out.contains("lockstack experiment pgxact --out out/experiments/pgxact"), "{out}");
    assert!(out.contains("lockstack experiment validation out/validation"), "{out}");
    // The pgxact seed transcribes 48 points (xeon-32: 2 workloads x 4 clients x 3 variants;
    // itanium-32: 2 workloads x 6 clients x 2 variants); each is one line with its tps, under
    // one header per series naming its machine.
    assert!(out.contains("published points (48;"), "{out}");
    assert_eq!(out.lines().filter(|l| l.starts_with("    ") && l.contains(" clients ")).count(), 48, "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("  Haas, 32 cores, -S (on xeon-32)")).count(),
        1,
        "{out}"
    );
    // Four stored calibrations of pgxact, each one line naming its fitted parameter.
    assert_eq!(out.lines().filter(|l| l.contains("fitted sim.postgres_ipc")).count(), 4, "{out}");
    // A seed without figures or calibrations says so instead of printing nothing.
    let o = lockstack(&["experiment", "show", "vm-pin"]);
    let out = text(&o.stdout);
    assert!(o.status.success());
    assert!(
        out.contains("published points (0;") && out.contains("  none: the thread gives no throughput"),
        "{out}"
    );
    assert!(out.contains("  none: every simulated point is predicted"), "{out}");
    assert!(out.contains("lockstack experiment vm-pin --machine xeon-12 --jobs 2"), "{out}");
    for args in [&["experiment", "show", "nosuch"][..], &["experiment", "show"][..]] {
        let o = lockstack(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = text(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        for (name, _, _) in EXPERIMENTS {
            assert!(err.contains(name), "{args:?}: {name} not listed: {err}");
        }
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn bad_input_is_one_line_and_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cases: [&[&str]; 11] = [
        &["experiment", "nosuch"],
        &["experiment", "pgxact", "--clients", "1,x"],
        &["experiment", "pgxact", "--clients", "0"],
        &["experiment", "pgxact", "--clients", ""],
        &["experiment", "pgxact", "--runs", "0"],
        &["experiment", "pgxact", "--duration", "-1"],
        &["experiment", "pgxact", "--duration", "0"],
        &["experiment", "pgxact", "--set", "nosuch.knob=1"],
        &["experiment", "pgxact", "--set", "procarray.layout=dense"],
        &["experiment", "vm-pin", "--set", "lmgr.fast_path=off"],
        &["experiment", "fastpath", "--preset", "pg10"],
    ];
    for args in cases {
        let mut a = args.to_vec();
        a.extend(["--out", out]);
        let o = lockstack(&a);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("lockstack: "), "{args:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{args:?} printed a report");
    }
    // Nothing was measured, so nothing was written.
    assert_eq!(std::fs::read_dir(Path::new(out)).unwrap().count(), 0);
}

/// The files `experiment ... --out DIR` writes.
const FILES: [&str; 6] =
    ["vm-pin.csv", "vm-pin-runs.csv", "vm-pin.json", "vm-pin.svg", "vm-pin-usl.csv", "vm-pin-time.svg"];

/// The lines of the simulated machine's section that depend only on the simulation: phases
/// and tasks, virtual seconds, line transfers (not host seconds, events per host second).
fn simulated_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| {
            l.starts_with("simulated machine: ")
                || l.contains("measured phases: ")
                || l.contains("virtual seconds: ")
                || l.contains("line transfers: ")
                || l.contains("segment costs: ")
        })
        .collect()
}

/// A sweep spread over processes writes what one process writes, byte for byte: a tiny
/// `vm-pin` sweep (one workload, clients 1,2, one run) on the simulated `host` machine with the
/// deterministic clock, run in one process (`--jobs 1`), in two child processes (`--jobs 2`),
/// and point by point (`--point K` for every K of `--list-points`, then `experiment merge`).
/// All four files are compared whole: none carries host time here (the buffer workload loads
/// no tables, so `load_s` is 0, which the test checks; `elapsed_s` is virtual; the machine note
/// is the simulated machine's).
#[test]
fn spread_sweeps_equal_a_single_process_run_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let base = [
        "experiment",
        "vm-pin",
        "--machine",
        "host",
        "--duration",
        "0.02",
        "--runs",
        "1",
        "--clients",
        "1,2",
        "--workload",
        "scan",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        let o = lockstack(&a);
        assert!(o.status.success(), "{a:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let listed = run(&["--list-points"]);
    let ks: Vec<&str> = listed.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(ks, ["0", "1", "2", "3", "4", "5"], "{listed}");
    assert!(listed.starts_with("0 run=0 workload=scan clients=1 variant=page-flag\n"), "{listed}");
    assert!(!listed.contains("simulated machine"), "{listed}");

    let (one, two, pts, merged) = (d("one"), d("two"), d("points"), d("merged"));
    let single = run(&["--jobs", "1", "--out", &one]);
    let jobs = run(&["--jobs", "2", "--out", &two]);
    for k in &ks {
        let said = run(&["--point", k, "--out", &pts]);
        assert!(said.contains(&format!("vm-pin-point-{k}.json")), "{said}");
    }
    let o = lockstack(&["experiment", "merge", &pts, "--out", &merged]);
    assert!(o.status.success(), "merge: {}", text(&o.stderr));
    let merge = text(&o.stdout);
    assert!(merge.starts_with("merged 6 point files from "), "{merge}");

    let mut rd = csv::Reader::from_path(Path::new(&one).join("vm-pin-runs.csv")).unwrap();
    let load = rd.headers().unwrap().iter().position(|h| h == "load_s").unwrap();
    for r in rd.records() {
        assert_eq!(&r.unwrap()[load], "0.000000");
    }
    for f in FILES {
        let a = std::fs::read(Path::new(&one).join(f)).unwrap();
        assert_eq!(a, std::fs::read(Path::new(&two).join(f)).unwrap(), "--jobs 2: {f} differs");
        assert_eq!(a, std::fs::read(Path::new(&merged).join(f)).unwrap(), "merge: {f} differs");
    }
    // The simulated machine's section adds up the same phases, whichever way they ran.
    let want = simulated_lines(&single);
    assert_eq!(want.len(), 5, "{single}");
    assert!(want[0].starts_with("simulated machine: host"), "{single}");
    assert_eq!(simulated_lines(&jobs), want, "{jobs}");
    assert_eq!(simulated_lines(&merge), want, "{merge}");
    // --jobs cleaned its temporary directory up.
    let left: Vec<_> = std::fs::read_dir(&two).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), FILES.len(), "{left:?}");
}

/// A calibrated experiment's simulated-machine section names the calibration its header
/// names (the points run in child processes that do not know their postgres_ipc is a stored
/// calibration, so the section takes the plan's), and its time plot's shares leave the
/// background tasks out, as the section does.
#[test]
fn the_section_names_the_calibration_the_header_names() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o");
    let o = lockstack(&[
        "experiment",
        "pgxact",
        "--machine",
        "xeon-32",
        "--workload",
        "select-only",
        "--clients",
        "1",
        "--runs",
        "1",
        "--duration",
        "0.005",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stdout = text(&o.stdout);
    let header = stdout.lines().find(|l| l.starts_with("calibrated to: ")).expect("a calibrated header line");
    let section =
        stdout.lines().find(|l| l.starts_with("  calibration: ")).expect("the section's calibration line");
    assert_eq!(section, format!("  calibration: {header}"), "{stdout}");
    // The time plot's shares are of the backends' time, as the section's are: the WAL
    // writer's idle time is in neither.
    let json = std::fs::read_to_string(out.join("pgxact.json")).unwrap();
    assert!(json.contains("\"running_ns\""), "no time split in the points");
    assert!(!json.contains("Activity:WalWriterMain"), "the WAL writer's time is in a point's split");
}

/// Under `--machine` every point runs in a fresh process, so a point's figures do not depend on
/// the points run before it: `pgxact`'s four variants at 8 clients on `xeon-32` give the same
/// tps, virtual time and transactions with `--jobs 1` as with `--jobs 2`. Run one after
/// another in one process, the three variants after the first moved with the ones before them
/// (34,434 tps for pgxact against 34,325 in a fresh process).
#[test]
fn simulated_points_do_not_depend_on_the_points_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let run = |out: &str, extra: &[&str]| {
        let out = dir.path().join(out);
        let mut a = vec![
            "experiment",
            "pgxact",
            "--machine",
            "xeon-32",
            "--duration",
            "0.02",
            "--runs",
            "1",
            "--clients",
            "8",
            "--workload",
            "select-only",
            "--out",
            out.to_str().unwrap(),
        ];
        a.extend(extra);
        let o = lockstack(&a);
        assert!(o.status.success(), "{a:?}: {}", text(&o.stderr));
        // variant -> (ops, elapsed_s, throughput): everything but the host's load time.
        let mut rd = csv::Reader::from_path(out.join("pgxact-runs.csv")).unwrap();
        let h = rd.headers().unwrap().clone();
        let col = |n: &str| h.iter().position(|x| x == n).unwrap();
        let (v, ops, el, tp) = (col("variant"), col("ops"), col("elapsed_s"), col("throughput"));
        rd.records()
            .map(|r| {
                let r = r.unwrap();
                (r[v].to_string(), (r[ops].to_string(), r[el].to_string(), r[tp].to_string()))
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let one = run("one", &["--jobs", "1"]);
    let two = run("two", &["--jobs", "2"]);
    assert_eq!(one.len(), 4, "{one:?}");
    assert_eq!(one, two);
}

/// With stderr a pipe (not a terminal) progress is plain lines on stderr, `experiment NAME:
/// point K of N done, M:SS elapsed[, about M:SS left]`, the last point's always among them,
/// and nothing of it on stdout.
#[test]
fn progress_is_plain_lines_on_stderr_when_it_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fastpath");
    let o = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["experiment", "fastpath", "--smoke", "--out", out.to_str().unwrap()])
        .env_remove("LOCKSTACK_NO_PROGRESS")
        .output()
        .expect("run lockstack");
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(o.status.success(), "{stderr}\n{stdout}");
    // Smoke mode: 1 workload, 3 variants, clients 1 and 2.
    let total = 6;
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(" of ")).collect();
    assert!(!lines.is_empty(), "no progress lines: {stderr}");
    for l in &lines {
        let rest = l.strip_prefix("experiment fastpath: point ").unwrap_or_else(|| panic!("{l}"));
        let (k, rest) = rest.split_once(" of ").unwrap_or_else(|| panic!("{l}"));
        let k: usize = k.parse().unwrap_or_else(|_| panic!("{l}"));
        assert!((1..=total).contains(&k), "{l}");
        assert!(rest.starts_with(&format!("{total} done, ")), "{l}");
        assert!(rest.contains(" elapsed"), "{l}");
        assert_eq!(rest.contains(" left"), k < total, "{l}");
    }
    assert!(lines.last().unwrap().contains(&format!("point {total} of {total} done")), "{stderr}");
    assert!(!stdout.contains("point 1 of") && !stdout.contains(" elapsed"), "{stdout}");
}

/// `--sensitivity` on a tiny `vm-pin` sweep on its seed's machine (`xeon-12`, so that its
/// effects are defined, as docs/sim-validation.md's are, on the seed's machine): one base sweep and
/// one per perturbation (two constants at 0.5x and 2x: five sweeps of six points), announced
/// before it starts; the base sweep's tables are a plain run's byte for byte; the bands of the
/// four effects (two variants against the baseline at two client counts), of the three
/// curves' peaks and of the six medians are in the JSON, the CSV and the plot (a pale area per
/// variant); the temporary point files are gone.
#[test]
fn sensitivity_reruns_each_perturbation_and_writes_the_bands() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let base = [
        "experiment",
        "vm-pin",
        "--machine",
        "xeon-12",
        "--duration",
        "0.02",
        "--runs",
        "1",
        "--clients",
        "1,2",
        "--workload",
        "scan",
        "--jobs",
        "2",
    ];
    let run = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        let o = lockstack(&a);
        assert!(o.status.success(), "{a:?}: {}", text(&o.stderr));
        text(&o.stdout)
    };
    let (plain, sens) = (d("plain"), d("sens"));
    run(&["--out", &plain]);
    let said = run(&["--sensitivity", "owner_grace_ns,costs.context_switch_ns", "--out", &sens]);
    assert!(
        said.starts_with(
            "sensitivity: 2 constants x 2 factors + the base = 5 sweeps of 6 points = 30 points, 2 at once\n"
        ),
        "{said}"
    );
    assert!(said.contains("sensitivity on xeon-12: 4 perturbations (owner_grace_ns x0.5, owner_grace_ns x2, context_switch_ns x0.5, context_switch_ns x2)"), "{said}");
    for f in ["vm-pin.csv", "vm-pin-runs.csv", "vm-pin-usl.csv"] {
        let a = std::fs::read(Path::new(&plain).join(f)).unwrap();
        assert_eq!(
            a,
            std::fs::read(Path::new(&sens).join(f)).unwrap(),
            "{f}: the base sweep differs from a plain run"
        );
    }
    assert!(!Path::new(&plain).join("vm-pin-sensitivity.csv").exists());

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(Path::new(&sens).join("vm-pin.json")).unwrap())
            .unwrap();
    let s = &json["sensitivity"];
    let len = |k: &str| s[k].as_array().map_or(0, Vec::len);
    assert_eq!((len("perturbations"), len("effects"), len("peaks"), len("tps")), (4, 4, 3, 6), "{s}");
    assert_eq!(s["perturbations"][1]["key"], "costs.owner_grace_ns");
    assert_eq!(s["perturbations"][1]["factor"], 2.0);
    for e in s["effects"].as_array().unwrap() {
        let f = |k: &str| e[k].as_f64().unwrap();
        assert!(f("lo") <= f("base") && f("base") <= f("hi"), "{e}");
    }
    for t in s["tps"].as_array().unwrap() {
        let f = |k: &str| t[k].as_f64().unwrap();
        assert!(f("lo") <= f("base") && f("base") <= f("hi"), "{t}");
    }
    let csv = std::fs::read_to_string(Path::new(&sens).join("vm-pin-sensitivity.csv")).unwrap();
    let mut rd = csv::Reader::from_reader(csv.as_bytes());
    let kinds: Vec<String> = rd.records().map(|r| r.unwrap()[0].to_string()).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "effect").count(), 4, "{csv}");
    assert_eq!(kinds.iter().filter(|k| *k == "peak").count(), 3, "{csv}");
    let svg = std::fs::read_to_string(Path::new(&sens).join("vm-pin.svg")).unwrap();
    // Bands are the pale polygons (filled markers are polygons too, drawn opaque).
    assert_eq!(svg.matches("<polygon opacity=\"0.08\"").count(), 3, "one band per variant");
    assert!(svg.contains("band over 4 perturbations"));
    let plain_svg = std::fs::read_to_string(Path::new(&plain).join("vm-pin.svg")).unwrap();
    assert_eq!(plain_svg.matches("<polygon opacity=\"0.08\"").count(), 0);
    let left: Vec<_> = std::fs::read_dir(&sens).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), FILES.len() + 1, "{left:?}");
}

/// A `--sensitivity` or `--machine-set` that names no constant, a cited constant, or comes
/// without `--machine` is one line (listing the valid names where there are some) and exit 1,
/// before anything runs.
#[test]
fn sensitivity_and_machine_set_refuse_bad_constants() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (&["--machine", "host", "--sensitivity", "nosuch_ns"], "costs.owner_grace_ns"),
        (&["--machine", "host", "--sensitivity", "same_llc_ns"], "costs.owner_grace_ns"),
        (&["--sensitivity"], "--machine"),
        (&["--machine", "host", "--machine-set", "nosuch_ns=1"], "costs.same_llc_ns"),
        (&["--machine", "host", "--machine-set", "owner_grace_ns"], "KEY=VALUE"),
        (&["--machine-set", "owner_grace_ns=1"], "--machine"),
    ];
    for (extra, names) in cases {
        let mut a = vec!["experiment", "vm-pin", "--clients", "1", "--out", out];
        a.extend(extra);
        let o = lockstack(&a);
        let stderr = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{a:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{a:?}: {stderr}");
        assert!(stderr.contains(names), "{a:?}: {stderr}");
        assert!(o.stdout.is_empty(), "{a:?} printed a report");
    }
    assert_eq!(std::fs::read_dir(Path::new(out)).unwrap().count(), 0);
}
