use super::*;
use crate::experiments::driver::{self, Options, Plan};
use crate::experiments::{all, find};
use palette::{COLORS, hex, wait_colour};
use std::collections::BTreeMap;

#[test]
fn files_round_trip_and_damage_is_caught() {
    let e = find("vm-pin").unwrap();
    let plan = Plan::new(
        e,
        &Options { clients: Some(vec![1, 2]), duration_s: Some(0.02), runs: Some(2), ..Options::default() },
    )
    .unwrap();
    let r = driver::run(&plan, &mut |_| {}).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let w = write_all(&r, dir.path()).unwrap();
    let names: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
    let (points, rows) = (plan.points(), 2 * 2 * 3);
    let v = verify(dir.path(), e.name, &names, points, rows).unwrap();
    assert_eq!(v.summary_rows, rows);
    assert!(v.svg_lines >= names.len() * 2, "{v:?}");
    // Two client counts: every curve is "no fit", and a native run has no time plot.
    assert_eq!(v.usl_rows, 2 * 3);
    assert!(
        r.usl.iter().all(|u| u.fit.is_none() && u.no_fit.as_deref().is_some_and(|s| s.contains("no fit")))
    );
    assert_eq!((v.timed_points, w.time_svg.is_none()), (0, true));
    assert!(!dir.path().join("vm-pin-time.svg").exists());
    // Wrong expectations, a truncated SVG and a broken CSV row are each reported.
    assert!(verify(dir.path(), e.name, &names, points + 1, rows).is_err());
    let missing = verify(dir.path(), e.name, &["no-such-variant"], points, rows).unwrap_err();
    assert!(
        matches!(missing, OutputError::Invalid { .. }) && missing.to_string().contains("legend"),
        "{missing}"
    );
    let svg = std::fs::read_to_string(&w.svg).unwrap();
    // vm-pin's x axis counts its workers, as the driver names them.
    assert!(svg.contains("vm-pin: throughput against workers") && svg.contains("workers (log2 scale"));
    assert!(!svg.contains("clients (log2 scale"));
    std::fs::write(&w.svg, &svg[..svg.len() / 2]).unwrap();
    assert!(verify(dir.path(), e.name, &names, points, rows).unwrap_err().to_string().contains("svg"));
    std::fs::write(&w.svg, svg).unwrap();
    let mut csv = std::fs::read_to_string(&w.csv).unwrap();
    csv.push_str("scan,x,1\n");
    std::fs::write(&w.csv, csv).unwrap();
    assert!(verify(dir.path(), e.name, &names, points, rows).is_err());
}

/// A result of experiment `name` built by hand (no run): the given client counts, two runs,
/// and, on simulated `profile`, every point with a time split as the simulating CLI collects
/// it. The waits change their order with the variant, so that a colour given by rank would
/// differ between the panels.
fn synthetic(name: &str, profile: Option<&str>, clients: &[usize]) -> ExperimentResult {
    let e = find(name).unwrap();
    let opts = Options {
        clients: Some(clients.to_vec()),
        runs: Some(2),
        machine: profile.map(str::to_string),
        ..Options::default()
    };
    let plan = Plan::new(e, &opts).unwrap();
    let mut points = Vec::new();
    for run in 0..2 {
        for w in &plan.workloads {
            for &c in clients {
                for (vi, v) in e.variants.iter().enumerate() {
                    let n = c as f64;
                    let tp =
                        5000.0 * n / (1.0 + 0.02 * (vi as f64 + 1.0) * (n - 1.0) + 0.0005 * n * (n - 1.0));
                    let k = vi as u64 + 1;
                    let waits = BTreeMap::from([
                        ("LockManager".to_string(), 400 * c as u64 / k),
                        ("ProcArray".to_string(), 100 * c as u64 * k),
                        ("BufferContent".to_string(), 1),
                        ("Lock:relation".to_string(), 50),
                        ("IO:WALSync".to_string(), 30),
                        ("unclassified".to_string(), 20),
                        ("Timeout:PgSleep".to_string(), 10),
                        ("Timeout:SpinDelay".to_string(), 60 * k),
                        ("ProcStructLock".to_string(), 5),
                    ]);
                    points.push(driver::Point {
                        workload: w.name.into(),
                        variant: v.name.into(),
                        clients: c,
                        run,
                        ops: tp as u64,
                        failed: 0,
                        elapsed_s: 1.0,
                        load_s: 0.0,
                        throughput: tp * if run == 0 { 1.01 } else { 0.99 },
                        counters: BTreeMap::new(),
                        ok: true,
                        error: None,
                        time: profile.map(|_| driver::TimeSplit {
                            tasks: c,
                            running_ns: 5000,
                            waits_ns: waits,
                            sleeping_ns: 40,
                            joining_ns: 5,
                            runnable_ns: 70 * c as u64,
                        }),
                    });
                }
            }
        }
    }
    let summary = driver::summarise(&plan, &points);
    ExperimentResult {
        usl: driver::fit_usl(&plan, &summary),
        summary,
        counter_labels: vec![String::new(); e.counters.len()],
        variant_sets: Vec::new(),
        machine: crate::report::MachineNote { cores: 48, threads: 36, oversubscribed: false },
        simulated: profile.map(|p| driver::SimulatedMachine { profile: p.into(), cores: 24, hw_threads: 24 }),
        calibrated_to: profile.map(|_| "a test figure".to_string()),
        plan,
        points,
        sensitivity: None,
        measured: Vec::new(),
    }
}

/// Per `<text>` of `svg` whose text satisfies `want`, the text and the colour of the nearest
/// element before it that carries one (`attr`: `fill` for a legend box, `stroke` for a line),
/// ignoring black and `none`.
fn colours_before(svg: &str, attr: &str, want: impl Fn(&str) -> bool) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is XML");
    let mut last = String::new();
    let mut out = Vec::new();
    for n in doc.descendants().filter(|n| n.is_element()) {
        if n.has_tag_name("text") {
            let t = n.text().unwrap_or("").trim().to_string();
            if want(&t) {
                out.push((t, last.clone()));
            }
        } else if let Some(c) = n.attribute(attr).filter(|c| *c != "none" && *c != "#000000") {
            last = c.to_uppercase();
        }
    }
    out
}

#[test]
fn time_shares_name_every_wait_class_and_sum_to_one() {
    let r = synthetic("fastpath", Some("opteron-24"), &[1, 12, 24, 36]);
    let t = time_shares(&r).unwrap();
    assert_eq!(t.rows.len(), r.summary.len());
    assert_eq!(t.categories[0], "running");
    // Every class is named as PostgreSQL names it; nothing is folded into sleep or other.
    for c in [
        "LWLock:LockManager",
        "LWLock:ProcArray",
        "LWLock:BufferContent",
        "Lock:relation",
        "IO:WALSync",
        "Timeout:SpinDelay",
        "Timeout:PgSleep",
        "ProcStructLock",
        "no wait event",
        "sleep",
        "joining",
        "runnable (no core)",
    ] {
        assert!(t.categories.iter().any(|x| x == c), "{c}: {:?}", t.categories);
    }
    assert!(!t.categories.iter().any(|x| x == "other"), "{:?}", t.categories);
    let spin = t.categories.iter().position(|x| x == "Timeout:SpinDelay").unwrap();
    assert!(t.rows.iter().all(|r| r.shares[spin] > 0.0));
    // The stacking order is the table's, whatever the shares.
    let ranks: Vec<usize> = t.categories.iter().map(|c| palette::wait_rank(c)).collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{:?}", t.categories);
    for row in &t.rows {
        let sum: f64 = row.shares.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{row:?}");
    }
    assert!(time_shares(&synthetic("fastpath", None, &[1, 12])).is_none());
}

#[test]
fn every_experiments_legends_take_their_colours_from_the_fixed_table() {
    for e in all() {
        let profile = e.machines.first().map_or("xeon-32", |m| m.profile);
        let r = synthetic(e.name, Some(profile), &[1, 4, 16]);
        // The time plot: each legend box has its class's colour from the table.
        let time = render_time_svg(&r).unwrap().unwrap();
        let t = time_shares(&r).unwrap();
        let boxes = colours_before(&time, "fill", |s| t.categories.iter().any(|c| c == s));
        assert_eq!(boxes.len(), t.categories.len(), "{}: {boxes:?}", e.name);
        for (label, colour) in &boxes {
            assert_eq!(*colour, hex(wait_colour(label)), "{}: {label}", e.name);
        }
        // The throughput plot: each variant's legend line has the variant's colour.
        let svg = render_svg(&r).unwrap();
        for (vi, v) in e.variants.iter().enumerate() {
            let prefix = format!("{}: predicted", v.name);
            let lines = colours_before(&svg, "stroke", |s| s.starts_with(&prefix));
            assert_eq!(lines.len(), r.plan.workloads.len(), "{}: {prefix}: {lines:?}", e.name);
            assert!(lines.iter().all(|(_, c)| *c == hex(COLORS[vi % COLORS.len()])), "{}: {lines:?}", e.name);
        }
    }
}

#[test]
fn published_points_appear_only_on_their_own_machines_panel() {
    // pgxact's thread has Haas's figures from xeon-32 and Deolasee's from itanium-32.
    let texts = |svg: &str| -> Vec<String> {
        let doc = roxmltree::Document::parse(svg).unwrap();
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text())
            .map(|t| t.trim().to_string())
            .collect()
    };
    let on = |profile: &str| texts(&render_svg(&synthetic("pgxact", Some(profile), &[1, 8, 32])).unwrap());
    let xeon = on("xeon-32");
    assert!(xeon.iter().any(|t| t.starts_with("pgproc: published, Haas")), "{xeon:?}");
    assert!(!xeon.iter().any(|t| t.contains("published, Deolasee")), "{xeon:?}");
    let itanium = on("itanium-32");
    assert!(itanium.iter().any(|t| t.starts_with("pgproc: published, Deolasee")), "{itanium:?}");
    assert!(!itanium.iter().any(|t| t.contains("published, Haas")), "{itanium:?}");
    // Natively, or on a machine of no published series, none is drawn and a note says why.
    let native = texts(&render_svg(&synthetic("pgxact", None, &[1, 8])).unwrap());
    assert!(!native.iter().any(|t| t.contains(": published,")), "{native:?}");
    assert!(native.iter().any(|t| t.starts_with("Not drawn: the published figures")), "{native:?}");
    // The renderer itself refuses a published series of another machine than its panel's.
    let style = palette::Style { colour: plotters::style::RGBColor(1, 2, 3), ..palette::series_style(0) };
    let series = |machine: &str| svg::Series {
        label: format!("published on {machine}"),
        machine: machine.into(),
        kind: svg::Kind::Published,
        style,
        points: vec![svg::Pt { x: 4.0, y: 10.0, lo: None, hi: None }],
    };
    let fig = svg::Figure {
        title: "t".into(),
        subtitle: Vec::new(),
        panels: vec![svg::Panel {
            title: "A".into(),
            machine: "A".into(),
            x_name: "clients".into(),
            y_desc: "tps".into(),
            series: vec![series("B")],
            bands: Vec::new(),
            curves: Vec::new(),
            notes: Vec::new(),
        }],
        columns: 1,
        panel_size: (400, 300),
    };
    let out = svg::render(&fig).unwrap();
    assert!(!out.contains("#010203") && !out.contains("published on B"));
    let mut fig = fig;
    fig.panels[0].series = vec![series("A")];
    let out = svg::render(&fig).unwrap();
    assert!(out.contains("#010203") && out.contains("published on A"));
}

#[test]
fn plots_carry_the_machine_the_fits_and_the_calibration() {
    let dir = tempfile::tempdir().unwrap();
    let e = find("fastpath").unwrap();
    let names: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
    let (points, rows) = (2 * 4 * 3, 4 * 3);
    let r = synthetic("fastpath", Some("opteron-24"), &[1, 12, 24, 36]);
    // The synthetic curves are USL curves (with 1% noise): every fit recovers a peak near
    // sqrt(1 / 0.0005) = 44.7 clients.
    for u in &r.usl {
        let f = u.fit.unwrap_or_else(|| panic!("{u:?}"));
        assert!(f.r_squared > 0.99 && (35.0..55.0).contains(&f.peak_clients.unwrap()), "{u:?}");
    }
    let w = write_all(&r, dir.path()).unwrap();
    let v = verify(dir.path(), e.name, &names, points, rows).unwrap();
    assert_eq!((v.usl_rows, v.timed_points), (3, points));
    let svg = std::fs::read_to_string(&w.svg).unwrap();
    assert!(svg.contains("simulated opteron-24 (24 cores, 24 hardware threads)"));
    assert!(svg.contains("calibrated to: a test figure"));
    // Four client counts: the fits are in the CSV, not drawn, and a note says so.
    assert!(svg.contains("No USL curve drawn for no-fastpath (4)") && !svg.contains("USL fit over"));
    assert!(svg.contains("no-fastpath: predicted, uncalibrated") && svg.contains("uncalibrated prediction"));
    assert!(svg.contains("no-fastpath: published, Haas, 24 cores"));
    let time = std::fs::read_to_string(w.time_svg.as_ref().unwrap()).unwrap();
    for label in ["select-only / fast-rel", "LWLock:LockManager", "IO:WALSync", "runnable (no core)"] {
        assert!(time.contains(label), "{label}");
    }
    // Enough client counts draw the fits, with their parameters; a calibration is ringed.
    let mut many = synthetic("fastpath", Some("opteron-24"), &[1, 2, 4, 8, 12, 16, 24, 36]);
    let cal = crate::experiments::Calibrated {
        experiment: "fastpath",
        machine: "opteron-24",
        workload: "select-only",
        series: e.published[0].series,
        clients: 1,
        tps: 5000.0,
        postgres_ipc: 0.3,
    };
    many.plan.calibrated = vec![cal];
    let svg = render_svg(&many).unwrap();
    assert!(svg.contains("no-fastpath: USL fit over 8 client counts: lambda"), "USL legend");
    assert!(svg.contains("fitted: no-fastpath at 1 client(s)") && svg.contains("no-fastpath: predicted\n"));
    // A tampered time split is caught.
    let json = std::fs::read_to_string(&w.json).unwrap();
    std::fs::write(&w.json, json.replacen("\"tasks\": 1,", "\"tasks\": 0,", 1)).unwrap();
    assert!(verify(dir.path(), e.name, &names, points, rows).unwrap_err().to_string().contains("time split"));
    // A native run over the same directory removes the stale time plot.
    let native = synthetic("fastpath", None, &[1, 12, 24, 36]);
    let w = write_all(&native, dir.path()).unwrap();
    assert!(w.time_svg.is_none() && !dir.path().join("fastpath-time.svg").exists());
    let v = verify(dir.path(), e.name, &names, points, rows).unwrap();
    assert_eq!(v.timed_points, 0);
    let svg = std::fs::read_to_string(&w.svg).unwrap();
    assert!(svg.contains("this host, 48 cores") && !svg.contains("calibrated to"));
    assert!(svg.contains("fast-rel: measured on this host"));
    // A time plot without time splits is caught.
    std::fs::write(dir.path().join("fastpath-time.svg"), "<svg></svg>").unwrap();
    assert!(
        verify(dir.path(), e.name, &names, points, rows)
            .unwrap_err()
            .to_string()
            .contains("no point has a time split")
    );
}

#[test]
fn a_written_result_reads_back_and_redraws_the_same_plots() {
    let dir = tempfile::tempdir().unwrap();
    let mut r = synthetic("pgxact", Some("xeon-32"), &[1, 8, 32]);
    r.plan.calibrated =
        find("pgxact").unwrap().calibrations().filter(|c| c.machine == "xeon-32").copied().collect();
    // The user's --measured figures are in the file and drawn again ("yours").
    r.measured = vec![crate::experiments::Published {
        workload: "select-only",
        series: "measured (mine.csv)",
        clients: 8,
        variant: "pgproc",
        low: None,
        tps: 5000.0,
        high: None,
    }];
    let w = write_all(&r, dir.path()).unwrap();
    assert_eq!(load::results_in(dir.path()).unwrap(), vec![w.json.clone()]);
    let back = load::read_result(&w.json).unwrap();
    assert_eq!(back.summary.len(), r.summary.len());
    assert_eq!(back.plan.calibrated, r.plan.calibrated);
    assert_eq!(back.measured.len(), 1);
    assert!(render_svg(&back).unwrap().contains("yours, measured (mine.csv)"));
    assert_eq!(render_svg(&back).unwrap(), render_svg(&r).unwrap());
    assert_eq!(render_time_svg(&back).unwrap(), render_time_svg(&r).unwrap());
    // A file that is no result is one error naming it.
    std::fs::write(&w.json, "{}").unwrap();
    let e = load::read_result(&w.json).unwrap_err().to_string();
    assert!(e.starts_with(&w.json.display().to_string()), "{e}");
}

#[test]
fn titles_and_legend_lines_are_wrapped_to_the_plot() {
    let long = "old_snapshot_threshold (9.6): OldSnapshotTimeMapLock taken by every snapshot, and the fix, \
                with a word longer than any line: ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGHIJKLMNOPQRSTUVWXYZ";
    for (size, width) in [(19.0, 300.0), (13.0, 200.0), (14.0, 696.0)] {
        let lines = svg::wrap(long, size, width);
        assert!(lines.len() > 1, "{lines:?}");
        for l in &lines {
            assert!(svg::text_width(l, size) <= width, "{l:?} is wider than {width} at {size}");
        }
        // Nothing is lost: the words come back in order.
        assert_eq!(lines.join(" ").replace("- ", "").replace("-", ""), long.replace("-", ""));
    }
    // Every title, subtitle and legend line of a plot fits its width.
    let mut r = synthetic("old-snapshot", Some("power8-192"), &[1, 32, 64]);
    r.calibrated_to =
        Some(find("pgxact").unwrap().calibrations().map(|c| c.line()).collect::<Vec<_>>().join("; "));
    let fig = throughput::figure(&r, &[]);
    let width = f64::from(fig.panel_size.0) - 24.0;
    for l in svg::wrap(&fig.title, 19.0, width) {
        assert!(svg::text_width(&l, 19.0) <= width, "{l}");
    }
    let subtitle: Vec<String> = fig.subtitle.iter().flat_map(|s| svg::wrap(s, 14.0, width)).collect();
    assert!(subtitle.len() > fig.subtitle.len(), "the calibration line is long enough to wrap: {subtitle:?}");
    for l in &subtitle {
        assert!(svg::text_width(l, 14.0) <= width, "{l}");
    }
}

#[test]
fn balanced_wrapping_keeps_the_line_count_and_evens_the_lines() {
    let sub =
        "FlexLock (2011): ending transactions without taking ProcArrayLock yourself, synchronous commit on";
    for (size, width) in [(14.0, 696.0), (13.0, 300.0), (19.0, 500.0)] {
        let greedy = svg::wrap(sub, size, width);
        let even = svg::wrap_balanced(sub, size, width);
        assert_eq!(even.len(), greedy.len(), "{even:?}");
        assert_eq!(even.join(" "), sub);
        let len = |l: &String| l.chars().count();
        assert!(even.iter().map(len).max() <= greedy.iter().map(len).max());
        assert!(even.iter().map(len).min() >= greedy.iter().map(len).min(), "{even:?} vs {greedy:?}");
    }
    // The subtitle's last line is no longer a word or two.
    let even = svg::wrap_balanced(sub, 14.0, 696.0);
    assert!(even.last().unwrap().split(' ').count() > 2, "{even:?}");
    // A line that fits stays one line.
    assert_eq!(svg::wrap_balanced("short", 14.0, 696.0), vec!["short".to_string()]);
}

/// A panel of one measured series and one published series, each of a non-circle marker with
/// min-max bars, and one band.
fn barred_panel() -> svg::Panel {
    let pt = |x: f64, y: f64| svg::Pt { x, y, lo: Some(y * 0.8), hi: Some(y * 1.2) };
    let series = |kind: svg::Kind, i: usize| svg::Series {
        label: format!("{kind:?}"),
        machine: "m".into(),
        kind,
        style: palette::series_style(i),
        points: vec![pt(2.0, 100.0), pt(4.0, 150.0)],
    };
    svg::Panel {
        title: "bars".into(),
        machine: "m".into(),
        x_name: "workers".into(),
        y_desc: "ops/s".into(),
        series: vec![series(svg::Kind::Measured, 1), series(svg::Kind::Published, 2)],
        bands: vec![svg::Band {
            label: "band".into(),
            colour: COLORS[1],
            dash: Some((10, 5)),
            points: vec![(2.0, 70.0, 100.0, 130.0), (4.0, 120.0, 150.0, 170.0)],
        }],
        curves: Vec::new(),
        notes: Vec::new(),
    }
}

#[test]
fn error_bars_and_band_whiskers_add_no_marker_of_their_own() {
    let fig = |panel| svg::Figure {
        title: "t".into(),
        subtitle: Vec::new(),
        panels: vec![panel],
        columns: 1,
        panel_size: (500, 320),
    };
    let with = svg::render(&fig(barred_panel())).unwrap();
    let mut bare = barred_panel();
    for s in &mut bare.series {
        for q in &mut s.points {
            (q.lo, q.hi) = (None, None);
        }
    }
    let without = svg::render(&fig(bare)).unwrap();
    // Squares and triangles only: no circle anywhere, bars or not.
    assert_eq!(with.matches("<circle").count(), 0, "{with}");
    // The bars add lines only: the markers (polygons, rects) are the same with and without.
    for tag in ["<polygon", "<rect", "<circle"] {
        assert_eq!(with.matches(tag).count(), without.matches(tag).count(), "{tag}");
    }
    assert!(with.matches("<polyline").count() > without.matches("<polyline").count());
    // The x axis says what the panel counts.
    assert!(with.contains("workers (log2 scale"));
}
