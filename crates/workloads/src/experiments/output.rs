//! Files of an experiment run, and the checks CI's smoke mode runs on them.
//!
//! [`write_all`] writes four files named after the experiment into one directory:
//!
//! | file | contents |
//! |---|---|
//! | `NAME.json` | the whole [`ExperimentResult`] (plan, variants' assignments, every point, summary) |
//! | `NAME.csv` | the summary: one row per (workload, variant, clients) with min / median / max throughput, gain % and the counters |
//! | `NAME-runs.csv` | one row per measured point |
//! | `NAME.svg` | throughput against clients, one panel per workload, one line per variant through the medians, min-max bars |
//!
//! [`verify`] re-reads them with serde_json, the csv reader and a structural look at the SVG.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use serde::Serialize;

use super::driver::ExperimentResult;

/// Paths of the files [`write_all`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct Written {
    /// `NAME.json`.
    pub json: PathBuf,
    /// `NAME.csv` (summary).
    pub csv: PathBuf,
    /// `NAME-runs.csv` (every point).
    pub runs_csv: PathBuf,
    /// `NAME.svg`.
    pub svg: PathBuf,
}

impl Written {
    /// The paths [`write_all`] uses for experiment `name` in `dir`.
    pub fn paths(dir: &Path, name: &str) -> Written {
        Written {
            json: dir.join(format!("{name}.json")),
            csv: dir.join(format!("{name}.csv")),
            runs_csv: dir.join(format!("{name}-runs.csv")),
            svg: dir.join(format!("{name}.svg")),
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

/// Line colours, one per variant (the first four of matplotlib's "tab10", readable on white).
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

/// `y` with a k / M suffix, for axis labels.
fn short(y: f64) -> String {
    if y.abs() >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y.abs() >= 1e4 {
        format!("{:.0}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

/// Pixel size of one workload's panel.
const PANEL: (u32, u32) = (560, 400);

/// Renders the plot as SVG text: one panel per workload, clients evenly spaced on the x axis
/// (labelled with the client counts), throughput on the y axis from 0, one coloured line per
/// variant through the medians, and a bar from the lowest to the highest run at each point.
///
/// # Errors
/// A drawing error from plotters, as text.
pub fn render_svg(r: &ExperimentResult) -> Result<String, String> {
    let e = r.plan.experiment;
    let panels = r.plan.workloads.len().max(1);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (PANEL.0 * panels as u32, PANEL.1)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let areas = root.split_evenly((1, panels));
        let clients = &r.plan.clients;
        let n = clients.len() as i32;
        for (w, area) in r.plan.workloads.iter().zip(areas.iter()) {
            let rows: Vec<_> = r.summary.iter().filter(|s| s.workload == w.name).collect();
            let top = rows.iter().map(|s| s.max).fold(0.0f64, f64::max).max(1.0) * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{}: {} ({})", e.name, w.name, w.unit), ("sans-serif", 18))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(64)
                .build_cartesian_2d(-1..n, 0.0..top)
                .map_err(|e| e.to_string())?;
            let label = |x: &i32| {
                usize::try_from(*x).ok().and_then(|i| clients.get(i)).map_or(String::new(), |c| c.to_string())
            };
            chart
                .configure_mesh()
                .x_labels((n + 2) as usize)
                .x_label_formatter(&label)
                .x_desc("clients")
                .y_desc(w.unit)
                .y_label_formatter(&|y| short(*y))
                .draw()
                .map_err(|e| e.to_string())?;
            for (vi, v) in e.variants.iter().enumerate() {
                let color = COLORS[vi % COLORS.len()];
                let pts: Vec<(i32, f64, f64, f64)> = clients
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &c)| {
                        r.row(w.name, v.name, c).map(|s| (i as i32, s.min, s.median, s.max))
                    })
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                chart
                    .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.2)), color.stroke_width(2)))
                    .map_err(|e| e.to_string())?
                    .label(v.name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
                chart
                    .draw_series(pts.iter().map(|p| ErrorBar::new_vertical(p.0, p.1, p.2, p.3, color, 8)))
                    .map_err(|e| e.to_string())?;
                chart
                    .draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), 3, color.filled())))
                    .map_err(|e| e.to_string())?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(|e| e.to_string())?;
        }
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(text)
}

/// Writes `NAME.json`, `NAME.csv`, `NAME-runs.csv` and `NAME.svg` into `dir` (created if
/// missing).
///
/// # Errors
/// The path and the I/O, encoding or drawing error, on one line.
pub fn write_all(r: &ExperimentResult, dir: &Path) -> Result<Written, String> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let paths = Written::paths(dir, r.plan.experiment.name);
    let json = serde_json::to_string_pretty(r).map_err(|e| format!("encoding JSON: {e}"))?;
    std::fs::write(&paths.json, json + "\n").map_err(|e| io_err(&paths.json, e))?;
    write_summary_csv(r, &paths.csv)?;
    write_runs_csv(r, &paths.runs_csv)?;
    let svg = render_svg(r)?;
    std::fs::write(&paths.svg, svg).map_err(|e| io_err(&paths.svg, e))?;
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
/// same row counts, with a finite, non-negative throughput in every row; the SVG is one
/// `<svg ...>...</svg>` document with at least one line and every variant's name in its legend.
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
    if let Some(missing) = variants.iter().find(|v| !body.contains(&format!(">\n{v}\n</text>"))) {
        return Err(format!("{}: variant {missing} missing from the legend", p.svg.display()));
    }
    Ok(Verified { points: expected_points, summary_rows: expected_rows, svg_lines })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::driver::{self, Options, Plan};
    use crate::experiments::find;

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
}
