//! `lockstack machine sweep`: a tiny sweep (two profiles, two presets, one and two
//! clients) writes one CSV row per point and an SVG with one line per (profile, preset); two
//! sweeps give the same CSV but for the host-seconds column; bad input is one line and exit
//! code 1; a point whose child fails is exit code 2 naming the point; a sweep's figures do not
//! depend on where `--out` is; the tables are loaded once into a load image that every point
//! starts from; `--measured FILE.csv` draws the user's figures in sweep.svg.

use std::path::Path;
use std::process::{Command, Output};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack")).args(args).output().expect("run lockstack")
}

const PROFILES: [&str; 2] = ["host", "xeon-12"];
const PRESETS: [&str; 2] = ["pg92", "pg17"];

/// The tiny sweep's arguments, writing into `out`.
fn tiny(out: &Path) -> Vec<String> {
    [
        "machine",
        "sweep",
        "--profiles",
        "host,xeon-12",
        "--presets",
        "pg92,pg17",
        "--clients",
        "2,1",
        "--transactions",
        "40",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.to_str().unwrap().to_string()])
    .collect()
}

/// Runs the tiny sweep into `out`, expecting success; returns stdout and the CSV's text.
fn run_tiny(out: &Path) -> (String, String) {
    let args = tiny(out);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = lockstack(&args);
    let (stdout, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{:?}\n{err}\n{stdout}", o.status);
    // stderr is a pipe: progress is plain lines there, the last point's always among them.
    assert!(err.lines().any(|l| l.starts_with("machine sweep: point 8 of 8 done, ")), "{err}");
    assert!(!stdout.contains(" of 8 done"), "{stdout}");
    (stdout.into_owned(), std::fs::read_to_string(out.join("sweep.csv")).expect("sweep.csv"))
}

/// Every `<text>` element's text in `doc`, trimmed.
fn texts_of<'a>(doc: &'a roxmltree::Document<'a>) -> Vec<&'a str> {
    doc.descendants().filter(|n| n.has_tag_name("text")).filter_map(|n| n.text()).map(str::trim).collect()
}

/// The CSV's rows without the last column (host seconds, which differ from run to run).
fn stable(csv: &str) -> Vec<String> {
    csv.lines().map(|l| l.rsplit_once(',').map_or(l, |(head, _)| head).to_string()).collect()
}

#[test]
fn a_tiny_sweep_writes_every_point_and_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let (a_out, a) = run_tiny(&dir.path().join("a"));

    // The CSV: one row per (profile, preset, clients), in that order, each a real run.
    let mut rdr = csv::Reader::from_reader(a.as_bytes());
    let header: Vec<String> = rdr.headers().unwrap().iter().map(str::to_string).collect();
    assert_eq!(header.first().map(String::as_str), Some("profile"));
    assert_eq!(header.last().map(String::as_str), Some("host_s"));
    let col =
        |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    let mut expected = Vec::new();
    for p in PROFILES {
        for x in PRESETS {
            for c in ["1", "2"] {
                expected.push((p, x, c));
            }
        }
    }
    let got: Vec<(&str, &str, &str)> = rows.iter().map(|r| (&r[0], &r[1], &r[2])).collect();
    assert_eq!(got, expected);
    for r in &rows {
        assert_eq!(&r[col("transactions")], "40", "{r:?}");
        let tps: f64 = r[col("tps")].parse().unwrap();
        let virtual_s: f64 = r[col("virtual_s")].parse().unwrap();
        let events: u64 = r[col("events")].parse().unwrap();
        let share: f64 = r[col("top_wait_share")].parse().unwrap();
        assert!(tps > 0.0 && virtual_s > 0.0 && events > 0, "{r:?}");
        assert!((0.0..=1.0).contains(&share), "{r:?}");
        assert!(!r[col("top_wait")].is_empty() && !r[col("hot_line")].is_empty(), "{r:?}");
    }
    // The table names every profile and preset; each point left its report and JSON.
    for p in PROFILES {
        for x in PRESETS {
            assert!(a_out.lines().any(|l| l.starts_with(p) && l.contains(x)), "{p} {x} missing:\n{a_out}");
            assert!(dir.path().join(format!("a/points/{p}-{x}-c2.json")).is_file());
        }
    }

    // The SVG parses as XML: a panel title per profile, a legend entry per preset in each
    // panel, and per preset (its colour of the shared palette) a line in each panel and in
    // each panel's legend.
    let svg = std::fs::read_to_string(dir.path().join("a/sweep.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("sweep.svg is XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let texts = texts_of(&doc);
    for name in &PROFILES {
        assert!(texts.contains(name), "{name} is not a text of the SVG: {texts:?}");
    }
    for (i, preset) in PRESETS.iter().enumerate() {
        let label = format!("{preset}: predicted, uncalibrated");
        let n = texts.iter().filter(|t| **t == label).count();
        assert_eq!(n, PROFILES.len(), "{label}: {texts:?}");
        let c = lockstack_workloads::experiments::output::COLORS[i];
        let colour = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        let lines = doc
            .descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(colour.as_str()))
            .count();
        assert!(lines >= 2 * PROFILES.len(), "{preset}: {lines} lines of {colour}");
    }

    // The tables were loaded once, into a load image the points started from, removed at the
    // end; every point's report says it copied the tables from it.
    assert!(a_out.contains("the tables (scale 1) were loaded once"), "{a_out}");
    assert!(!dir.path().join("a/points/image").exists(), "the load image was not removed");
    let report = std::fs::read_to_string(dir.path().join("a/points/host-pg92-c1.txt")).unwrap();
    assert!(report.contains("tables copied into memory from image"), "{report}");

    // Deterministic: a second sweep gives the same CSV but for host seconds, also into a
    // directory whose path is longer (the children's arguments must not carry it: a longer
    // argument moves a simulated run's heap, and with it the figures).
    let (_, b) = run_tiny(&dir.path().join("b-in-a-directory-with-a-much-longer-name").join("b"));
    assert_eq!(stable(&a), stable(&b), "two sweeps differ");
}

#[test]
fn bad_sweep_input_is_one_line_and_exit_code_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = dir.path().join("out");
    let out = out.to_str().unwrap();
    let measured = dir.path().join("mine.csv");
    std::fs::write(&measured, "variant,clients,tps\npg92,1,100\npg93,2,200\n").unwrap();
    let measured = measured.to_str().unwrap();
    let missing = dir.path().join("missing.csv");
    let missing = missing.to_str().unwrap();
    let cases: [(&[&str], &str); 10] = [
        (&["--profiles", "host,cray-1", "--out", out], "cray-1"),
        (&["--presets", "pg92,pg93", "--out", out], "pg93"),
        (&["--clients", "1,x", "--out", out], "--clients"),
        (&["--clients", "0,2", "--out", out], "--clients"),
        (&["--clients", "1,,2", "--out", out], "--clients: empty item"),
        (&["--clients", "", "--out", out], "--clients"),
        (&["--jobs", "0", "--out", out], "--jobs"),
        (&["--out", file.to_str().unwrap()], "not a directory"),
        (
            &["--presets", "pg92,pg17", "--measured", measured, "--out", out],
            "mine.csv: line 3: field variant: \"pg93\" is not a variant of machine sweep (pg92, pg17)",
        ),
        (&["--measured", missing, "--out", out], "missing.csv"),
    ];
    for (args, needle) in cases {
        let mut all = vec!["machine", "sweep"];
        all.extend_from_slice(args);
        let o = lockstack(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{all:?}: {err}");
        assert!(err.contains(needle), "{all:?}: {err}");
    }
    assert!(!dir.path().join("out").exists(), "bad input must not create --out");
}

#[test]
fn a_failing_point_is_exit_code_2_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The points' children cannot find the simulating binary, so each fails.
    let o = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["machine", "sweep", "--profiles", "xeon-12", "--presets", "pg92", "--clients", "1", "--out"])
        .arg(&out)
        .env("LOCKSTACK_SIM_BIN", dir.path().join("no-such-binary"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("point xeon-12 pg92 -c 1 failed") && err.contains("simulating binary"), "{err}");
    assert!(!out.join("sweep.csv").exists());
}

#[test]
fn measured_figures_are_drawn_on_the_panels_they_apply_to() {
    let dir = tempfile::tempdir().unwrap();
    let mine = dir.path().join("mine.csv");
    // pg17's rows apply to every panel; pg92's names another machine than the one swept.
    std::fs::write(
        &mine,
        "# measured on a real machine\nvariant,clients,tps,machine\npg17,1,20000,\npg17,2,35000,\npg92,1,9000,host\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["machine", "sweep", "--profiles", "xeon-12", "--presets", "pg92,pg17", "--clients", "1,2"])
        .args(["--transactions", "40", "--measured"])
        .arg(&mine)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(out.join("sweep.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("sweep.svg is XML");
    let texts = texts_of(&doc);
    assert!(texts.contains(&"pg17: yours, measured (mine.csv)"), "{texts:?}");
    assert!(!texts.iter().any(|t| t.starts_with("pg92: yours")), "{texts:?}");
    // The measured line is pg17's colour (the second preset's) and dotted: drawn as short
    // segments, it adds lines of that colour that pg92 (predicted only) does not have.
    let lines_of = |i: usize| {
        let c = lockstack_workloads::experiments::output::COLORS[i];
        let colour = format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        doc.descendants()
            .filter(|n| n.has_tag_name("polyline") && n.attribute("stroke") == Some(colour.as_str()))
            .count()
    };
    assert!(lines_of(1) > lines_of(0) + 2, "pg17 {} lines, pg92 {}", lines_of(1), lines_of(0));
    // The CSV holds the simulated points only.
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5, "{csv}");
}

#[test]
fn a_signal_stops_the_sweep_and_removes_its_load_image() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sweep = Command::new(env!("CARGO_BIN_EXE_lockstack"))
        .args(["machine", "sweep", "--profiles", "xeon-32", "--presets", "pg92,pg17", "--clients", "1,16,64"])
        .args(["--scale", "20", "--out"])
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The load's error file exists from after the handler is installed until the load ends.
    let started = std::time::Instant::now();
    while !out.join("points/image-load.err").exists() && !out.join("points/image").exists() {
        assert!(started.elapsed().as_secs() < 120, "the sweep never started loading");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let killed = Command::new("kill").args(["-TERM", &sweep.id().to_string()]).status().unwrap();
    assert!(killed.success());
    let o = sweep.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.lines().last().unwrap_or("").contains("interrupted"), "{err}");
    assert!(!out.join("points/image").exists(), "the load image was left behind");
    assert!(!out.join("sweep.csv").exists());
}
