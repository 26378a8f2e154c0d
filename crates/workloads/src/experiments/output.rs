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
//! | `NAME.svg` | throughput against clients (workers for `vm-pin`), one panel per workload ([`throughput::figure`]): per variant (one colour, marker and dash each) the medians with min-max bars, the calibration point ringed, the seed's published points of this machine only as hollow markers, `--sensitivity` bands edged in the variant's dash (a panel with bands drawn to the run's own ranges, [`clip`]), USL curves only where enough client counts determine them; the machine and calibration in the title |
//! | `NAME-time.svg` | under `--machine` only: per (workload, variant), stacked bars per client count of where the simulated backends' virtual time went ([`time_shares`]), one fixed colour per wait class ([`palette`]) |
//!
//! Every plot of the tree is drawn by one renderer ([`svg`]), `lockstack machine sweep`'s too.
//!
//! [`verify`] re-reads them with serde_json, the csv reader and a structural look at the SVGs.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::driver::{ExperimentResult, TimeSplit};

pub mod clip;
mod error;
pub mod figure;
pub mod load;
pub mod palette;
pub mod svg;
pub mod throughput;
mod time;

pub use error::OutputError;
pub use palette::COLORS;
pub use throughput::{MIN_USL_CLIENTS, machine_title, render_svg};
pub use time::{TimeRow, TimeShares, category_of, render_legend_svg, render_time_svg, time_shares};

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

fn write_summary_csv(r: &ExperimentResult, path: &Path) -> Result<(), OutputError> {
    let mut w = csv::Writer::from_path(path).map_err(|e| OutputError::file(path, e))?;
    let mut header: Vec<String> = SUMMARY_COLUMNS.iter().map(|s| s.to_string()).collect();
    header.extend(r.counter_labels.iter().cloned());
    w.write_record(&header).map_err(|e| OutputError::file(path, e))?;
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
        w.write_record(&rec).map_err(|e| OutputError::file(path, e))?;
    }
    w.flush().map_err(|e| OutputError::file(path, e))
}

fn write_runs_csv(r: &ExperimentResult, path: &Path) -> Result<(), OutputError> {
    let mut w = csv::Writer::from_path(path).map_err(|e| OutputError::file(path, e))?;
    w.write_record(RUNS_COLUMNS).map_err(|e| OutputError::file(path, e))?;
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
        .map_err(|e| OutputError::file(path, e))?;
    }
    w.flush().map_err(|e| OutputError::file(path, e))
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

fn write_usl_csv(r: &ExperimentResult, path: &Path) -> Result<(), OutputError> {
    let mut w = csv::Writer::from_path(path).map_err(|e| OutputError::file(path, e))?;
    w.write_record(USL_COLUMNS).map_err(|e| OutputError::file(path, e))?;
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
        .map_err(|e| OutputError::file(path, e))?;
    }
    w.flush().map_err(|e| OutputError::file(path, e))
}

/// Writes `NAME.json`, `NAME.csv`, `NAME-runs.csv`, `NAME-usl.csv`, `NAME.svg` and, when the
/// points carry time splits (under `--machine`), `NAME-time.svg` into `dir` (created if
/// missing). A native run removes a `NAME-time.svg` an earlier run left there, so that the
/// directory holds no plot of other points.
///
/// # Errors
/// The path and the I/O, encoding or drawing error, on one line.
pub fn write_all(r: &ExperimentResult, dir: &Path) -> Result<Written, OutputError> {
    std::fs::create_dir_all(dir).map_err(|e| OutputError::file(dir, e))?;
    let mut paths = Written::paths(dir, r.plan.experiment.name);
    let json = serde_json::to_string_pretty(r).map_err(|e| OutputError::Encode(e.to_string()))?;
    std::fs::write(&paths.json, json + "\n").map_err(|e| OutputError::file(&paths.json, e))?;
    write_summary_csv(r, &paths.csv)?;
    write_runs_csv(r, &paths.runs_csv)?;
    write_usl_csv(r, &paths.usl_csv)?;
    let svg = render_svg(r)?;
    std::fs::write(&paths.svg, svg).map_err(|e| OutputError::file(&paths.svg, e))?;
    let time_path = paths
        .time_svg
        .take()
        .expect("Written::paths always names the time plot; only this function takes it");
    match render_time_svg(r)? {
        Some(svg) => {
            std::fs::write(&time_path, svg).map_err(|e| OutputError::file(&time_path, e))?;
            paths.time_svg = Some(time_path);
        }
        None => match std::fs::remove_file(&time_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(OutputError::file(&time_path, e)),
        },
    }
    let sens_path = paths
        .sensitivity_csv
        .take()
        .expect("Written::paths always names the sensitivity table; only this function takes it");
    match &r.sensitivity {
        Some(s) => {
            s.write_csv(&sens_path).map_err(OutputError::Sensitivity)?;
            paths.sensitivity_csv = Some(sens_path);
        }
        None => match std::fs::remove_file(&sens_path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(OutputError::file(&sens_path, e)),
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

fn csv_rows(path: &Path, min_columns: usize) -> Result<usize, OutputError> {
    let mut rd = csv::Reader::from_path(path).map_err(|e| OutputError::file(path, e))?;
    let header = rd.headers().map_err(|e| OutputError::file(path, e))?.clone();
    if header.len() < min_columns {
        return Err(OutputError::invalid(
            path,
            format!("{} columns, expected at least {min_columns}", header.len()),
        ));
    }
    let tp = header
        .iter()
        .position(|h| h == "median" || h == "throughput")
        .ok_or_else(|| OutputError::invalid(path, "no throughput column"))?;
    let mut n = 0;
    for rec in rd.records() {
        let rec = rec.map_err(|e| OutputError::file(path, e))?;
        let v: f64 = rec.get(tp).and_then(|s| s.parse().ok()).ok_or_else(|| {
            OutputError::invalid(path, format!("row {}: throughput is not a number", n + 1))
        })?;
        if !v.is_finite() || v < 0.0 {
            return Err(OutputError::invalid(path, format!("row {}: throughput {v}", n + 1)));
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
) -> Result<Verified, OutputError> {
    let p = Written::paths(dir, name);
    let text = std::fs::read_to_string(&p.json).map_err(|e| OutputError::file(&p.json, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| OutputError::file(&p.json, e))?;
    let len = |k: &str| v.get(k).and_then(|x| x.as_array()).map(Vec::len);
    if len("points") != Some(expected_points) || len("summary") != Some(expected_rows) {
        return Err(OutputError::invalid(
            &p.json,
            format!(
                "{:?} points and {:?} summary rows, expected {expected_points} and {expected_rows}",
                len("points"),
                len("summary")
            ),
        ));
    }
    let rows = csv_rows(&p.csv, SUMMARY_COLUMNS.len())?;
    if rows != expected_rows {
        return Err(OutputError::invalid(&p.csv, format!("{rows} rows, expected {expected_rows}")));
    }
    let runs = csv_rows(&p.runs_csv, RUNS_COLUMNS.len())?;
    if runs != expected_points {
        return Err(OutputError::invalid(&p.runs_csv, format!("{runs} rows, expected {expected_points}")));
    }
    let svg = std::fs::read_to_string(&p.svg).map_err(|e| OutputError::file(&p.svg, e))?;
    let body = svg.trim();
    if !body.starts_with("<svg") || !body.ends_with("</svg>") || body.matches("<svg").count() != 1 {
        return Err(OutputError::invalid(&p.svg, "not a single <svg>...</svg> document"));
    }
    let svg_lines = body.matches("<polyline").count();
    if svg_lines == 0 {
        return Err(OutputError::invalid(&p.svg, "no line drawn"));
    }
    if let Some(missing) = variants.iter().find(|v| !body.contains(&format!(">\n{v}: "))) {
        return Err(OutputError::invalid(&p.svg, format!("variant {missing} missing from the legend")));
    }
    let usl_rows = verify_usl(&p.usl_csv, &v)?;
    let timed_points = verify_time(&p, &v)?;
    Ok(Verified { points: expected_points, summary_rows: expected_rows, svg_lines, usl_rows, timed_points })
}

/// `NAME-usl.csv` against the JSON file's `usl` array: the same number of rows, and in each
/// either a fit (finite, non-negative `lambda`, `alpha`, `beta`) or a reason.
fn verify_usl(path: &Path, json: &serde_json::Value) -> Result<usize, OutputError> {
    let fits = json.get("usl").and_then(|u| u.as_array()).map_or(0, Vec::len);
    let mut rd = csv::Reader::from_path(path).map_err(|e| OutputError::file(path, e))?;
    let header = rd.headers().map_err(|e| OutputError::file(path, e))?.clone();
    if header.iter().ne(USL_COLUMNS) {
        return Err(OutputError::invalid(path, format!("header is not {}", USL_COLUMNS.join(","))));
    }
    let mut n = 0;
    for rec in rd.records() {
        let rec = rec.map_err(|e| OutputError::file(path, e))?;
        n += 1;
        let num = |i: usize| rec.get(i).and_then(|s| s.parse::<f64>().ok());
        let fitted = (3..6).map(num).all(|v| v.is_some_and(|v| v.is_finite() && v >= 0.0));
        let reason = rec.get(9).is_some_and(|s| !s.is_empty());
        if fitted == reason {
            return Err(OutputError::invalid(
                path,
                format!("row {n}: needs either a fit or a reason, not both or neither"),
            ));
        }
    }
    if n != fits {
        return Err(OutputError::invalid(path, format!("{n} rows, expected {fits} (the JSON file's fits)")));
    }
    Ok(n)
}

/// The time plot against the points' time splits in the JSON file; returns the points with a
/// split.
fn verify_time(p: &Written, json: &serde_json::Value) -> Result<usize, OutputError> {
    let time = p.time_svg.as_ref().expect("Written::paths always names the time plot");
    let points = json.get("points").and_then(|x| x.as_array()).map_or(&[][..], Vec::as_slice);
    let mut timed = 0;
    for (i, pt) in points.iter().enumerate() {
        let Some(t) = pt.get("time").filter(|t| !t.is_null()) else { continue };
        let t: TimeSplit = serde_json::from_value(t.clone())
            .map_err(|e| OutputError::invalid(&p.json, format!("point {}: time: {e}", i + 1)))?;
        if t.tasks == 0 || t.total_ns() == 0 {
            return Err(OutputError::invalid(
                &p.json,
                format!("point {}: a time split without tasks or time", i + 1),
            ));
        }
        timed += 1;
    }
    if timed == 0 {
        if time.exists() {
            return Err(OutputError::invalid(time, "present, but no point has a time split"));
        }
        return Ok(0);
    }
    let svg = std::fs::read_to_string(time).map_err(|e| OutputError::file(time, e))?;
    let body = svg.trim();
    if !body.starts_with("<svg") || !body.ends_with("</svg>") || body.matches("<svg").count() != 1 {
        return Err(OutputError::invalid(time, "not a single <svg>...</svg> document"));
    }
    if body.matches("<rect").count() < 2 || !body.contains(">\nrunning\n</text>") {
        return Err(OutputError::invalid(time, "no bars, or no legend"));
    }
    Ok(timed)
}

#[cfg(test)]
mod tests;
