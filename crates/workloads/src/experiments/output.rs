//! Files of an experiment run, and the checks CI's smoke mode runs on them.
//!
//! [`write_all`] writes these files named after the experiment into one directory:
//!
//! | file | contents |
//! |---|---|
//! | `NAME.json` | the whole [`ExperimentResult`] (plan, variants' assignments, every point with its time split under `--machine`, summary, USL fits) |
//! | `NAME.csv` | the summary: one row per (workload, variant, clients) with min / median / max throughput, gain % and the counters |
//! | `NAME-runs.csv` | one row per measured point |
//! | `NAME-usl.csv` | one row per (workload, variant): the Universal Scalability Law fit ([`super::usl`]) or why there is none |
//! | `NAME.svg` | throughput against clients, one panel per workload: per variant a line through the medians with min-max bars, the USL fit dashed, the seed's published points as markers of the variant's colour; the machine (and calibration) in the title |
//! | `NAME-time.svg` | under `--machine` only: per (workload, variant), stacked bars per client count of where the simulated backends' virtual time went ([`time_shares`]) |
//!
//! [`verify`] re-reads them with serde_json, the csv reader and a structural look at the SVGs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::driver::{ExperimentResult, TimeSplit};

mod svg;

pub use svg::COLORS;

/// Paths of the files [`write_all`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Written {
    /// `NAME.json`.
    pub json: PathBuf,
    /// `NAME.csv` (summary).
    pub csv: PathBuf,
    /// `NAME-runs.csv` (every point).
    pub runs_csv: PathBuf,
    /// `NAME-usl.csv` (the USL fits).
    pub usl_csv: PathBuf,
    /// `NAME.svg` (throughput).
    pub svg: PathBuf,
    /// `NAME-time.svg` (where the time went); `None` from [`write_all`] when it was not written
    /// (no point has a time split: a native run).
    pub time_svg: Option<PathBuf>,
    /// `NAME-sensitivity.csv` (the bands of a `--sensitivity` run, see
    /// [`crate::experiments::sensitivity::Sensitivity::csv`]); `None` from [`write_all`] when
    /// the result has no sensitivity analysis (a stale file of that name is removed).
    pub sensitivity_csv: Option<PathBuf>,
}

impl Written {
    /// The paths [`write_all`] uses for experiment `name` in `dir`.
    pub fn paths(dir: &Path, name: &str) -> Written {
        Written {
            json: dir.join(format!("{name}.json")),
            csv: dir.join(format!("{name}.csv")),
            runs_csv: dir.join(format!("{name}-runs.csv")),
            usl_csv: dir.join(format!("{name}-usl.csv")),
            svg: dir.join(format!("{name}.svg")),
            time_svg: Some(dir.join(format!("{name}-time.svg"))),
            sensitivity_csv: Some(dir.join(format!("{name}-sensitivity.csv"))),
        }
    }
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> String {
    format!("{}: {e}", path.display())
}

/// Summary columns before the counters.
pub const SUMMARY_COLUMNS: [&str; 9] =
    ["workload", "variant", "clients", "runs", "unit", "min", "median", "max", "gain_pct"];
/// Columns of `NAME-runs.csv`.
pub const RUNS_COLUMNS: [&str; 11] = [
    "workload",
    "variant",
    "clients",
    "run",
    "ops",
    "failed",
    "elapsed_s",
    "load_s",
    "throughput",
    "unit",
    "ok",
];

fn unit_of(r: &ExperimentResult, workload: &str) -> &'static str {
    r.plan.experiment.workload(workload).map_or("ops/s", |w| w.unit)
}

fn write_summary_csv(r: &ExperimentResult, path: &Path) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| io_err(path, e))?;
    let mut header: Vec<String> = SUMMARY_COLUMNS.iter().map(|s| s.to_string()).collect();
    header.extend(r.counter_labels.iter().cloned());
    w.write_record(&header).map_err(|e| io_err(path, e))?;
    for row in &r.summary {
        let mut rec = vec![
            row.workload.clone(),
            row.variant.clone(),
            row.clients.to_string(),
            row.runs.to_string(),
            unit_of(r, &row.workload).to_string(),
            format!("{:.3}", row.min),
            format!("{:.3}", row.median),
            format!("{:.3}", row.max),
            row.gain_pct.map_or(String::new(), |g| format!("{g:.3}")),
        ];
        rec.extend(row.counters.iter().map(|c| format!("{c:.6}")));
        w.write_record(&rec).map_err(|e| io_err(path, e))?;
    }
    w.flush().map_err(|e| io_err(path, e))
}

fn write_runs_csv(r: &ExperimentResult, path: &Path) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| io_err(path, e))?;
    w.write_record(RUNS_COLUMNS).map_err(|e| io_err(path, e))?;
    for p in &r.points {
        w.write_record([
            p.workload.clone(),
            p.variant.clone(),
            p.clients.to_string(),
            p.run.to_string(),
            p.ops.to_string(),
            p.failed.to_string(),
            format!("{:.6}", p.elapsed_s),
            format!("{:.6}", p.load_s),
            format!("{:.3}", p.throughput),
            unit_of(r, &p.workload).to_string(),
            p.ok.to_string(),
        ])
        .map_err(|e| io_err(path, e))?;
    }
    w.flush().map_err(|e| io_err(path, e))
}

/// Summary columns of `NAME-usl.csv`.
pub const USL_COLUMNS: [&str; 10] = [
    "workload",
    "variant",
    "clients",
    "lambda",
    "alpha",
    "beta",
    "peak_clients",
    "peak_throughput",
    "r_squared",
    "no_fit",
];

fn write_usl_csv(r: &ExperimentResult, path: &Path) -> Result<(), String> {
    let mut w = csv::Writer::from_path(path).map_err(|e| io_err(path, e))?;
    w.write_record(USL_COLUMNS).map_err(|e| io_err(path, e))?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.6}"));
    for u in &r.usl {
        let clients: Vec<String> = u.clients.iter().map(usize::to_string).collect();
        let f = u.fit;
        w.write_record([
            u.workload.clone(),
            u.variant.clone(),
            clients.join(" "),
            opt(f.map(|f| f.lambda)),
            f.map_or(String::new(), |f| format!("{:.6e}", f.alpha)),
            f.map_or(String::new(), |f| format!("{:.6e}", f.beta)),
            opt(f.and_then(|f| f.peak_clients)),
            opt(f.and_then(|f| f.peak_throughput)),
            opt(f.map(|f| f.r_squared)),
            u.no_fit.clone().unwrap_or_default(),
        ])
        .map_err(|e| io_err(path, e))?;
    }
    w.flush().map_err(|e| io_err(path, e))
}

/// The shares of the time plot: its categories, bottom of the stack first, and one row of
/// shares per (workload, variant, clients) that has a time split.
#[derive(Clone, Debug, Serialize)]
pub struct TimeShares {
    /// Category names: `running`, then `LWLock:<tranche>` by decreasing largest share,
    /// `Lock:* (heavyweight)`, `IO:WALSync`, `Timeout:SpinDelay` (a spinlock's spinning and
    /// back-off sleeps), `sleep`, `runnable (no core)`, `other` (joins,
    /// waits with no wait event, other wait events, and tranches whose share never reaches
    /// [`SMALL_TRANCHE`]); only categories with some time in some row.
    pub categories: Vec<String>,
    /// One row per (workload, variant, clients), in summary order.
    pub rows: Vec<TimeRow>,
}

/// One bar of the time plot.
#[derive(Clone, Debug, Serialize)]
pub struct TimeRow {
    /// Workload name.
    pub workload: String,
    /// Variant name.
    pub variant: String,
    /// Clients.
    pub clients: usize,
    /// Share of the backends' virtual time per category (in [`TimeShares::categories`]
    /// order), the mean over the runs of each run's shares; they sum to 1.
    pub shares: Vec<f64>,
}

/// An LWLock tranche whose share stays below this (0.5%) in every bar goes to `other`, so the
/// legend stays readable.
pub const SMALL_TRANCHE: f64 = 0.005;

/// A spinlock's spinning and back-off sleeps (PostgreSQL's wait event): a category of its own.
const SPIN_DELAY: &str = lockstack_common::sync::hook::SPIN_DELAY_CLASS;

/// What [`time_shares`] books a wait class under, before small tranches are folded.
fn category_of(class: &str) -> String {
    if class == "unclassified" {
        "other".into()
    } else if class.starts_with("Lock:") {
        "Lock:* (heavyweight)".into()
    } else if class == "IO:WALSync" || class == SPIN_DELAY {
        class.into()
    } else if class.contains(':') {
        "other".into()
    } else {
        format!("LWLock:{class}")
    }
}

/// The shares the time plot draws, from the points' [`TimeSplit`]s; `None` when no point has
/// one (a native run). A point whose split has no time is left out.
pub fn time_shares(r: &ExperimentResult) -> Option<TimeShares> {
    let split_shares = |t: &TimeSplit| -> Option<BTreeMap<String, f64>> {
        let total = t.total_ns();
        if total == 0 {
            return None;
        }
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        let mut add = |k: String, ns: u64| *m.entry(k).or_default() += ns as f64 / total as f64;
        add("running".into(), t.running_ns);
        for (c, ns) in &t.waits_ns {
            add(category_of(c), *ns);
        }
        add("sleep".into(), t.sleeping_ns);
        add("runnable (no core)".into(), t.runnable_ns);
        add("other".into(), t.joining_ns);
        Some(m)
    };
    let mut rows: Vec<(String, String, usize, BTreeMap<String, f64>)> = Vec::new();
    for s in &r.summary {
        let per_run: Vec<BTreeMap<String, f64>> = r
            .points
            .iter()
            .filter(|p| p.workload == s.workload && p.variant == s.variant && p.clients == s.clients)
            .filter_map(|p| p.time.as_ref().and_then(split_shares))
            .collect();
        if per_run.is_empty() {
            continue;
        }
        let mut mean: BTreeMap<String, f64> = BTreeMap::new();
        for m in &per_run {
            for (k, v) in m {
                *mean.entry(k.clone()).or_default() += v / per_run.len() as f64;
            }
        }
        rows.push((s.workload.clone(), s.variant.clone(), s.clients, mean));
    }
    if rows.is_empty() {
        return None;
    }
    // Tranches by their largest share; the small ones fold into `other`.
    let mut tranches: Vec<(String, f64)> = Vec::new();
    for (_, _, _, m) in &rows {
        for (k, &v) in m.iter().filter(|(k, _)| k.starts_with("LWLock:")) {
            match tranches.iter_mut().find(|t| &t.0 == k) {
                Some(t) => t.1 = t.1.max(v),
                None => tranches.push((k.clone(), v)),
            }
        }
    }
    tranches.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let kept: Vec<String> = tranches.iter().filter(|t| t.1 >= SMALL_TRANCHE).map(|t| t.0.clone()).collect();
    let mut categories = vec!["running".to_string()];
    categories.extend(kept.iter().cloned());
    categories.extend(
        ["Lock:* (heavyweight)", "IO:WALSync", SPIN_DELAY, "sleep", "runnable (no core)", "other"]
            .map(String::from),
    );
    let bucket = |k: &str| -> usize {
        let k = if k.starts_with("LWLock:") && !kept.iter().any(|t| t == k) { "other" } else { k };
        categories.iter().position(|c| c == k).unwrap_or(categories.len() - 1)
    };
    let mut out: Vec<TimeRow> = rows
        .into_iter()
        .map(|(workload, variant, clients, m)| {
            let mut shares = vec![0.0; categories.len()];
            for (k, v) in &m {
                shares[bucket(k)] += v;
            }
            TimeRow { workload, variant, clients, shares }
        })
        .collect();
    // Only categories with time somewhere.
    let used: Vec<bool> = (0..categories.len()).map(|i| out.iter().any(|r| r.shares[i] > 0.0)).collect();
    let categories = categories.into_iter().zip(&used).filter(|(_, u)| **u).map(|(c, _)| c).collect();
    for r in &mut out {
        r.shares = r.shares.iter().zip(&used).filter(|(_, u)| **u).map(|(s, _)| *s).collect();
    }
    Some(TimeShares { categories, rows: out })
}

pub use svg::{machine_title, render_svg, render_time_svg};

/// Writes `NAME.json`, `NAME.csv`, `NAME-runs.csv`, `NAME-usl.csv`, `NAME.svg` and, when the
/// points carry time splits (under `--machine`), `NAME-time.svg` into `dir` (created if
/// missing). A native run removes a `NAME-time.svg` an earlier run left there, so that the
/// directory holds no plot of other points.
///
/// # Errors
/// The path and the I/O, encoding or drawing error, on one line.
pub fn write_all(r: &ExperimentResult, dir: &Path) -> Result<Written, String> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let mut paths = Written::paths(dir, r.plan.experiment.name);
    let json = serde_json::to_string_pretty(r).map_err(|e| format!("encoding JSON: {e}"))?;
    std::fs::write(&paths.json, json + "\n").map_err(|e| io_err(&paths.json, e))?;
    write_summary_csv(r, &paths.csv)?;
    write_runs_csv(r, &paths.runs_csv)?;
    write_usl_csv(r, &paths.usl_csv)?;
    let svg = render_svg(r)?;
    std::fs::write(&paths.svg, svg).map_err(|e| io_err(&paths.svg, e))?;
    let time_path = paths.time_svg.take().expect("paths names the time plot");
    match render_time_svg(r)? {
        Some(svg) => {
            std::fs::write(&time_path, svg).map_err(|e| io_err(&time_path, e))?;
            paths.time_svg = Some(time_path);
        }
        None => match std::fs::remove_file(&time_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&time_path, e)),
        },
    }
    let sens_path = paths.sensitivity_csv.take().expect("paths names the sensitivity table");
    match &r.sensitivity {
        Some(s) => {
            s.write_csv(&sens_path)?;
            paths.sensitivity_csv = Some(sens_path);
        }
        None => match std::fs::remove_file(&sens_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err(&sens_path, e)),
        },
    }
    Ok(paths)
}

/// What [`verify`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// Points in the JSON file (and rows of `NAME-runs.csv`).
    pub points: usize,
    /// Rows of `NAME.csv` (and summary entries in the JSON file).
    pub summary_rows: usize,
    /// `<polyline` elements in the SVG (one per variant and workload that has a line).
    pub svg_lines: usize,
    /// Rows of `NAME-usl.csv` (and fits in the JSON file).
    pub usl_rows: usize,
    /// Points with a time split, whose bars `NAME-time.svg` draws (0: native, no time plot).
    pub timed_points: usize,
}

fn csv_rows(path: &Path, min_columns: usize) -> Result<usize, String> {
    let mut rd = csv::Reader::from_path(path).map_err(|e| io_err(path, e))?;
    let header = rd.headers().map_err(|e| io_err(path, e))?.clone();
    if header.len() < min_columns {
        return Err(format!("{}: {} columns, expected at least {min_columns}", path.display(), header.len()));
    }
    let tp = header
        .iter()
        .position(|h| h == "median" || h == "throughput")
        .ok_or_else(|| format!("{}: no throughput column", path.display()))?;
    let mut n = 0;
    for rec in rd.records() {
        let rec = rec.map_err(|e| io_err(path, e))?;
        let v: f64 = rec
            .get(tp)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("{}: row {}: throughput is not a number", path.display(), n + 1))?;
        if !v.is_finite() || v < 0.0 {
            return Err(format!("{}: row {}: throughput {v}", path.display(), n + 1));
        }
        n += 1;
    }
    Ok(n)
}

/// Re-reads the files [`write_all`] wrote for experiment `name` in `dir` and checks they are
/// well formed and agree: the JSON parses and its `points` / `summary` arrays have
/// `expected_points` / `expected_rows` entries; both CSV files parse with their header and the
/// same row counts, with a finite, non-negative throughput in every row; `NAME-usl.csv` has a
/// row per fit in the JSON file, each with either finite non-negative parameters or a reason;
/// the SVG is one `<svg ...>...</svg>` document with at least one line and every variant's
/// name in its legend; when points carry time splits, each has tasks and time and
/// `NAME-time.svg` is one SVG document with bars and a legend, and when none does, there is no
/// `NAME-time.svg`.
///
/// # Errors
/// The first problem found, naming the file.
pub fn verify(
    dir: &Path,
    name: &str,
    variants: &[&str],
    expected_points: usize,
    expected_rows: usize,
) -> Result<Verified, String> {
    let p = Written::paths(dir, name);
    let text = std::fs::read_to_string(&p.json).map_err(|e| io_err(&p.json, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| io_err(&p.json, e))?;
    let len = |k: &str| v.get(k).and_then(|x| x.as_array()).map(Vec::len);
    if len("points") != Some(expected_points) || len("summary") != Some(expected_rows) {
        return Err(format!(
            "{}: {:?} points and {:?} summary rows, expected {expected_points} and {expected_rows}",
            p.json.display(),
            len("points"),
            len("summary")
        ));
    }
    let rows = csv_rows(&p.csv, SUMMARY_COLUMNS.len())?;
    if rows != expected_rows {
        return Err(format!("{}: {rows} rows, expected {expected_rows}", p.csv.display()));
    }
    let runs = csv_rows(&p.runs_csv, RUNS_COLUMNS.len())?;
    if runs != expected_points {
        return Err(format!("{}: {runs} rows, expected {expected_points}", p.runs_csv.display()));
    }
    let svg = std::fs::read_to_string(&p.svg).map_err(|e| io_err(&p.svg, e))?;
    let body = svg.trim();
    if !body.starts_with("<svg") || !body.ends_with("</svg>") || body.matches("<svg").count() != 1 {
        return Err(format!("{}: not a single <svg>...</svg> document", p.svg.display()));
    }
    let svg_lines = body.matches("<polyline").count();
    if svg_lines == 0 {
        return Err(format!("{}: no line drawn", p.svg.display()));
    }
    if let Some(missing) = variants.iter().find(|v| !body.contains(&format!(">\n{v}: "))) {
        return Err(format!("{}: variant {missing} missing from the legend", p.svg.display()));
    }
    let usl_rows = verify_usl(&p.usl_csv, &v)?;
    let timed_points = verify_time(&p, &v)?;
    Ok(Verified { points: expected_points, summary_rows: expected_rows, svg_lines, usl_rows, timed_points })
}

/// `NAME-usl.csv` against the JSON file's `usl` array: the same number of rows, and in each
/// either a fit (finite, non-negative `lambda`, `alpha`, `beta`) or a reason.
fn verify_usl(path: &Path, json: &serde_json::Value) -> Result<usize, String> {
    let fits = json.get("usl").and_then(|u| u.as_array()).map_or(0, Vec::len);
    let mut rd = csv::Reader::from_path(path).map_err(|e| io_err(path, e))?;
    let header = rd.headers().map_err(|e| io_err(path, e))?.clone();
    if header.iter().ne(USL_COLUMNS) {
        return Err(format!("{}: header is not {}", path.display(), USL_COLUMNS.join(",")));
    }
    let mut n = 0;
    for rec in rd.records() {
        let rec = rec.map_err(|e| io_err(path, e))?;
        n += 1;
        let num = |i: usize| rec.get(i).and_then(|s| s.parse::<f64>().ok());
        let fitted = (3..6).map(num).all(|v| v.is_some_and(|v| v.is_finite() && v >= 0.0));
        let reason = rec.get(9).is_some_and(|s| !s.is_empty());
        if fitted == reason {
            return Err(format!(
                "{}: row {n}: needs either a fit or a reason, not both or neither",
                path.display()
            ));
        }
    }
    if n != fits {
        return Err(format!("{}: {n} rows, expected {fits} (the JSON file's fits)", path.display()));
    }
    Ok(n)
}

/// The time plot against the points' time splits in the JSON file; returns the points with a
/// split.
fn verify_time(p: &Written, json: &serde_json::Value) -> Result<usize, String> {
    let time = p.time_svg.as_ref().expect("Written::paths names the time plot");
    let points = json.get("points").and_then(|x| x.as_array()).map_or(&[][..], Vec::as_slice);
    let mut timed = 0;
    for (i, pt) in points.iter().enumerate() {
        let Some(t) = pt.get("time").filter(|t| !t.is_null()) else { continue };
        let t: TimeSplit = serde_json::from_value(t.clone())
            .map_err(|e| format!("{}: point {}: time: {e}", p.json.display(), i + 1))?;
        if t.tasks == 0 || t.total_ns() == 0 {
            return Err(format!("{}: point {}: a time split without tasks or time", p.json.display(), i + 1));
        }
        timed += 1;
    }
    if timed == 0 {
        if time.exists() {
            return Err(format!("{}: present, but no point has a time split", time.display()));
        }
        return Ok(0);
    }
    let svg = std::fs::read_to_string(time).map_err(|e| io_err(time, e))?;
    let body = svg.trim();
    if !body.starts_with("<svg") || !body.ends_with("</svg>") || body.matches("<svg").count() != 1 {
        return Err(format!("{}: not a single <svg>...</svg> document", time.display()));
    }
    if body.matches("<rect").count() < 2 || !body.contains(">\nrunning\n</text>") {
        return Err(format!("{}: no bars, or no legend", time.display()));
    }
    Ok(timed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::driver::{self, Options, Plan};
    use crate::experiments::find;
    use std::collections::BTreeMap;

    #[test]
    fn files_round_trip_and_damage_is_caught() {
        let e = find("vm-pin").unwrap();
        let plan = Plan::new(
            e,
            &Options {
                clients: Some(vec![1, 2]),
                duration_s: Some(0.02),
                runs: Some(2),
                ..Options::default()
            },
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
            r.usl
                .iter()
                .all(|u| u.fit.is_none() && u.no_fit.as_deref().is_some_and(|s| s.contains("no fit")))
        );
        assert_eq!((v.timed_points, w.time_svg.is_none()), (0, true));
        assert!(!dir.path().join("vm-pin-time.svg").exists());
        // Wrong expectations, a truncated SVG and a broken CSV row are each reported.
        assert!(verify(dir.path(), e.name, &names, points + 1, rows).is_err());
        assert!(
            verify(dir.path(), e.name, &["no-such-variant"], points, rows).unwrap_err().contains("legend")
        );
        let svg = std::fs::read_to_string(&w.svg).unwrap();
        std::fs::write(&w.svg, &svg[..svg.len() / 2]).unwrap();
        assert!(verify(dir.path(), e.name, &names, points, rows).unwrap_err().contains("svg"));
        std::fs::write(&w.svg, svg).unwrap();
        let mut csv = std::fs::read_to_string(&w.csv).unwrap();
        csv.push_str("scan,x,1\n");
        std::fs::write(&w.csv, csv).unwrap();
        assert!(verify(dir.path(), e.name, &names, points, rows).is_err());
    }

    /// A fastpath result built by hand (no run): three client counts, two runs, every point
    /// with a time split as the simulating CLI collects it.
    fn synthetic(simulated: bool) -> ExperimentResult {
        let e = find("fastpath").unwrap();
        let clients = vec![1, 12, 24, 36];
        let opts = Options { clients: Some(clients.clone()), runs: Some(2), ..Options::default() };
        let plan = Plan::new(e, &opts).unwrap();
        let mut points = Vec::new();
        for run in 0..2 {
            for &c in &clients {
                for (vi, v) in e.variants.iter().enumerate() {
                    let n = c as f64;
                    let tp =
                        5000.0 * n / (1.0 + 0.02 * (vi as f64 + 1.0) * (n - 1.0) + 0.0005 * n * (n - 1.0));
                    let waits = BTreeMap::from([
                        ("LockManager".to_string(), 400 * c as u64 / (vi as u64 + 1)),
                        ("BufferMapping".to_string(), 100 * c as u64),
                        ("BufferContent".to_string(), 1),
                        ("Lock:relation".to_string(), 50),
                        ("IO:WALSync".to_string(), 30),
                        ("unclassified".to_string(), 20),
                        ("Timeout:PgSleep".to_string(), 10),
                        ("Timeout:SpinDelay".to_string(), 60),
                    ]);
                    points.push(driver::Point {
                        workload: "select-only".into(),
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
                        time: simulated.then(|| TimeSplit {
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
        let summary = driver::summarise(&plan, &points);
        ExperimentResult {
            usl: crate::experiments::driver::fit_usl(&plan, &summary),
            summary,
            counter_labels: vec![String::new(); e.counters.len()],
            variant_sets: Vec::new(),
            machine: crate::report::MachineNote { cores: 48, threads: 36, oversubscribed: false },
            simulated: simulated.then(|| driver::SimulatedMachine {
                profile: "opteron-24".into(),
                cores: 24,
                hw_threads: 24,
            }),
            calibrated_to: simulated.then(|| "a test figure".to_string()),
            plan,
            points,
            sensitivity: None,
            measured: Vec::new(),
        }
    }

    #[test]
    fn time_shares_sum_to_one_and_fold_small_tranches() {
        let r = synthetic(true);
        let t = time_shares(&r).unwrap();
        assert_eq!(t.rows.len(), r.summary.len());
        assert_eq!(t.categories[0], "running");
        for c in [
            "LWLock:LockManager",
            "LWLock:BufferMapping",
            "Lock:* (heavyweight)",
            "IO:WALSync",
            "Timeout:SpinDelay",
            "other",
        ] {
            assert!(t.categories.iter().any(|x| x == c), "{c}: {:?}", t.categories);
        }
        // A spinlock's waits are a category of their own, never folded into sleep or other.
        let spin = t.categories.iter().position(|x| x == "Timeout:SpinDelay").unwrap();
        assert!(t.rows.iter().all(|r| r.shares[spin] > 0.0));
        // BufferContent's 1 ns never reaches 0.5%: it is folded into "other".
        assert!(!t.categories.iter().any(|x| x.contains("BufferContent")), "{:?}", t.categories);
        for row in &t.rows {
            let sum: f64 = row.shares.iter().sum();
            assert!((sum - 1.0).abs() < 1e-9, "{row:?}");
        }
        assert!(time_shares(&synthetic(false)).is_none());
    }

    #[test]
    fn plots_carry_published_points_fits_and_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        let e = find("fastpath").unwrap();
        let names: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
        let (points, rows) = (2 * 4 * 3, 4 * 3);
        let r = synthetic(true);
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
        assert!(
            svg.contains(
                "simulated opteron-24 (24 cores, 24 hardware threads); calibrated to: a test figure"
            )
        );
        assert!(svg.contains("published (") && svg.contains("USL fit"), "legend");
        assert!(svg.contains("no-fastpath: simulated"));
        let time = std::fs::read_to_string(w.time_svg.as_ref().unwrap()).unwrap();
        for label in ["select-only / fast-rel", "LWLock:LockManager", "IO:WALSync", "runnable (no core)"] {
            assert!(time.contains(label), "{label}");
        }
        // A tampered time split is caught.
        let json = std::fs::read_to_string(&w.json).unwrap();
        std::fs::write(&w.json, json.replacen("\"tasks\": 1,", "\"tasks\": 0,", 1)).unwrap();
        assert!(verify(dir.path(), e.name, &names, points, rows).unwrap_err().contains("time split"));
        // A native run over the same directory removes the stale time plot.
        let native = synthetic(false);
        let w = write_all(&native, dir.path()).unwrap();
        assert!(w.time_svg.is_none() && !dir.path().join("fastpath-time.svg").exists());
        let v = verify(dir.path(), e.name, &names, points, rows).unwrap();
        assert_eq!(v.timed_points, 0);
        let svg = std::fs::read_to_string(&w.svg).unwrap();
        assert!(svg.contains("this host, 48 cores") && !svg.contains("calibrated to"));
        assert!(svg.contains("fast-rel: measured"));
        // A time plot without time splits is caught.
        std::fs::write(dir.path().join("fastpath-time.svg"), "<svg></svg>").unwrap();
        assert!(
            verify(dir.path(), e.name, &names, points, rows)
                .unwrap_err()
                .contains("no point has a time split")
        );
    }
}
