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

/// Lines of the throughput table that follows the header line starting `clients |`, up to the
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
            .filter(|(_, l)| l.trim_start().starts_with("clients |"))
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
