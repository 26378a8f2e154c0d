//! The two plots of an experiment run, drawn with plotters' SVG backend: throughput against
//! clients with the seed's published points and the USL fits ([`render_svg`]), and, under
//! `--machine`, where the simulated backends' virtual time went ([`render_time_svg`]).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{TimeShares, time_shares};
use crate::experiments::driver::ExperimentResult;

/// Line colours, one per series (matplotlib's "tab10", readable on white): the variants of
/// the experiments' plots and the presets of `lockstack machine sweep`.
pub const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
];

/// Colours of the LWLock tranches in the time plot, in order of share (tab10's and tab20's
/// remaining hues; the fixed categories have their own).
const TRANCHE_COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(255, 152, 150),
    RGBColor(174, 199, 232),
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

/// Pixel size of one workload's chart (the legend goes below it).
const PANEL: (u32, u32) = (620, 420);
/// Height of one legend row, pixels.
const LEGEND_ROW: u32 = 20;
/// Height of the header (title lines), pixels.
const HEADER: u32 = 56;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// The machine, as titles say it: `simulated opteron-24 (24 cores, 48 hardware threads)` or
/// `this host, 2 cores`.
pub fn machine_title(r: &ExperimentResult) -> String {
    match &r.simulated {
        Some(m) => format!("simulated {} ({} cores, {} hardware threads)", m.profile, m.cores, m.hw_threads),
        None => format!("this host, {} cores", r.machine.cores),
    }
}

/// Draws the header: the title, and below it the machine and (when present) the calibration.
fn header(area: &Area<'_>, title: &str, r: &ExperimentResult) -> Result<(), String> {
    let mut second = machine_title(r);
    if let Some(c) = &r.calibrated_to {
        second.push_str(&format!("; calibrated to: {c}"));
    }
    let width = f64::from(area.dim_in_pixel().0);
    let title_size = fitting_size(title, 20.0, width);
    area.draw(&Text::new(
        title.to_string(),
        (12, 8),
        ("sans-serif", title_size).into_font().style(FontStyle::Bold),
    ))
    .map_err(err)?;
    area.draw(&Text::new(second, (12, 32), ("sans-serif", 15))).map_err(err)?;
    Ok(())
}

/// The font size (at most `size`) at which `text` fits in `width` pixels with a 12-pixel
/// margin each side: a long experiment name on a one-panel plot would otherwise run past the
/// right edge. Estimates a glyph at half the nominal size (plotters' SVG text at 0.8 of the
/// requested size, sans-serif glyphs about 0.62 em wide).
fn fitting_size(text: &str, size: f64, width: f64) -> f64 {
    let estimate = text.chars().count() as f64 * size * 0.5;
    let room = (width - 24.0).max(1.0);
    if estimate > room { size * room / estimate } else { size }
}

/// One legend entry's symbol.
enum Mark {
    /// A line with a dot (a measured or simulated series).
    Line(RGBColor),
    /// A dashed line (a fit).
    Dashed(RGBColor),
    /// A filled triangle (published, series 0, 2, ...).
    Triangle(RGBColor),
    /// A cross (published, series 1, 3, ...).
    Cross(RGBColor),
    /// A filled box (a stacked share).
    Box(RGBColor),
    /// A pale box with a bar (a sensitivity band).
    Band(RGBColor),
}

/// Draws legend entries in columns of `per_column` rows, each column `col_w` pixels wide.
fn legend(area: &Area<'_>, entries: &[(Mark, String)], per_column: usize, col_w: i32) -> Result<(), String> {
    let font = ("sans-serif", 14).into_font();
    for (i, (mark, label)) in entries.iter().enumerate() {
        let x = 14 + (i / per_column) as i32 * col_w;
        let y = 6 + (i % per_column) as i32 * LEGEND_ROW as i32;
        let mid = y + 8;
        match *mark {
            Mark::Line(c) => {
                area.draw(&PathElement::new(vec![(x, mid), (x + 24, mid)], c.stroke_width(2)))
                    .map_err(err)?;
                area.draw(&Circle::new((x + 12, mid), 3, c.filled())).map_err(err)?;
            }
            Mark::Dashed(c) => {
                for k in 0..3 {
                    area.draw(&PathElement::new(
                        vec![(x + 9 * k, mid), (x + 9 * k + 5, mid)],
                        c.stroke_width(1),
                    ))
                    .map_err(err)?;
                }
            }
            Mark::Triangle(c) => {
                area.draw(&TriangleMarker::new((x + 12, mid), 6, c.filled())).map_err(err)?
            }
            Mark::Cross(c) => area.draw(&Cross::new((x + 12, mid), 5, c.stroke_width(2))).map_err(err)?,
            Mark::Band(c) => {
                area.draw(&Rectangle::new([(x, mid - 6), (x + 24, mid + 6)], c.mix(0.18).filled()))
                    .map_err(err)?;
                area.draw(&PathElement::new(
                    vec![(x + 12, mid - 6), (x + 12, mid + 6)],
                    c.mix(0.6).stroke_width(2),
                ))
                .map_err(err)?;
            }
            Mark::Box(c) => {
                area.draw(&Rectangle::new([(x, mid - 6), (x + 24, mid + 6)], c.filled())).map_err(err)?;
                area.draw(&Rectangle::new([(x, mid - 6), (x + 24, mid + 6)], BLACK.stroke_width(1)))
                    .map_err(err)?;
            }
        }
        area.draw(&Text::new(label.clone(), (x + 32, y), font.clone())).map_err(err)?;
    }
    Ok(())
}

/// Renders the throughput plot as SVG text. Above the panels, a title naming the experiment,
/// the machine and (when present) what it was calibrated to. One panel per workload: clients on
/// the x axis, throughput on the y axis from 0; per variant (one colour each) a line
/// through the median of the runs with a bar from the lowest to the highest run, the USL fit
/// as a dashed line over the measured client counts, and the seed's published figures for that variant as markers of the same
/// colour (one marker shape per published series, with the thread's low-high range when it
/// gave one). Clients are on a base-2 logarithmic axis, so that a few measured counts and the
/// seed's counts up to 80 both stay readable. Below each panel, a legend saying which is which.
/// A `--sensitivity` result also draws, per variant, the band of its median over the perturbed
/// sweeps: a pale area between the lowest and highest median (over two or more client counts)
/// and a wide pale whisker at each count.
///
/// # Errors
/// A drawing error from plotters, as text.
pub fn render_svg(r: &ExperimentResult) -> Result<String, String> {
    let e = r.plan.experiment;
    let panels = r.plan.workloads.len().max(1);
    let kind = if r.simulated.is_some() { "simulated" } else { "measured" };
    // Legend rows: one per variant (line), one per published series, one for the fits.
    let all_published = r.published();
    let series_of = |w: &str| -> Vec<&'static str> {
        let mut v: Vec<&'static str> = Vec::new();
        for p in all_published.iter().filter(|p| p.workload == w) {
            if !v.contains(&p.series) {
                v.push(p.series);
            }
        }
        v
    };
    let band_row = usize::from(r.sensitivity.is_some());
    let legend_rows = r
        .plan
        .workloads
        .iter()
        .map(|w| e.variants.len() + series_of(w.name).len() + 1 + band_row)
        .max()
        .unwrap_or(1);
    let height = HEADER + PANEL.1 + legend_rows as u32 * LEGEND_ROW + 16;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (PANEL.0 * panels as u32, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(HEADER);
        header(&top, &format!("{}: throughput against clients ({kind} and published)", e.name), r)?;
        let areas = body.split_evenly((1, panels));
        for (w, area) in r.plan.workloads.iter().zip(areas.iter()) {
            let (chart_area, legend_area) = area.split_vertically(PANEL.1);
            let rows: Vec<_> = r.summary.iter().filter(|s| s.workload == w.name).collect();
            let published: Vec<_> = all_published.iter().filter(|p| p.workload == w.name).collect();
            let series = series_of(w.name);
            let ymax = rows
                .iter()
                .map(|s| s.max)
                .chain(published.iter().map(|p| p.high.unwrap_or(p.tps).max(p.tps)))
                .chain(
                    r.sensitivity
                        .iter()
                        .flat_map(|s| s.tps.iter().filter(|t| t.workload == w.name).map(|t| t.hi)),
                )
                .fold(0.0f64, f64::max)
                .max(1.0)
                * 1.1;
            let xmax_clients = r
                .plan
                .clients
                .iter()
                .map(|&c| c as f64)
                .chain(published.iter().map(|p| f64::from(p.clients)))
                .fold(1.0f64, f64::max);
            let xmax = xmax_clients * 1.3;
            let measured_max = r.plan.clients.iter().copied().max().unwrap_or(1) as f64;
            let mut chart = ChartBuilder::on(&chart_area)
                .caption(format!("{} ({}): {}", w.name, w.about, w.unit), ("sans-serif", 17))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(64)
                .build_cartesian_2d((0.8..xmax).log_scale().base(2.0), 0.0..ymax)
                .map_err(err)?;
            chart
                .configure_mesh()
                .x_desc("clients (log scale)")
                .y_desc(w.unit)
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| short(*y))
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 14))
                .draw()
                .map_err(err)?;
            let mut entries: Vec<(Mark, String)> = Vec::new();
            for (vi, v) in e.variants.iter().enumerate() {
                let color = COLORS[vi % COLORS.len()];
                let pts: Vec<(f64, f64, f64, f64)> = r
                    .plan
                    .clients
                    .iter()
                    .filter_map(|&c| r.row(w.name, v.name, c).map(|s| (c as f64, s.min, s.median, s.max)))
                    .collect();
                if let Some(sens) = &r.sensitivity {
                    let band: Vec<(f64, f64, f64, f64)> = r
                        .plan
                        .clients
                        .iter()
                        .filter_map(|&c| {
                            sens.tps_band(w.name, v.name, c).map(|t| (c as f64, t.lo, t.base, t.hi))
                        })
                        .collect();
                    if band.len() > 1 {
                        let outline: Vec<(f64, f64)> = band
                            .iter()
                            .map(|b| (b.0, b.3))
                            .chain(band.iter().rev().map(|b| (b.0, b.1)))
                            .collect();
                        chart
                            .draw_series(std::iter::once(Polygon::new(outline, color.mix(0.15).filled())))
                            .map_err(err)?;
                    }
                    chart
                        .draw_series(band.iter().map(|b| {
                            ErrorBar::new_vertical(b.0, b.1, b.2, b.3, color.mix(0.6).stroke_width(3), 14)
                        }))
                        .map_err(err)?;
                }
                if !pts.is_empty() {
                    chart
                        .draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.2)), color.stroke_width(2)))
                        .map_err(err)?;
                    chart
                        .draw_series(pts.iter().map(|p| ErrorBar::new_vertical(p.0, p.1, p.2, p.3, color, 8)))
                        .map_err(err)?;
                    chart
                        .draw_series(pts.iter().map(|p| Circle::new((p.0, p.2), 3, color.filled())))
                        .map_err(err)?;
                    entries.push((Mark::Line(color), format!("{}: {kind}", v.name)));
                }
                if let Some(f) =
                    r.usl.iter().find(|u| u.workload == w.name && u.variant == v.name).and_then(|u| u.fit)
                {
                    // Over the measured client counts only: the fit describes those.
                    let curve: Vec<(f64, f64)> = (0..=120)
                        .map(|i| measured_max.powf(f64::from(i) / 120.0))
                        .map(|n| (n, f.throughput(n)))
                        .filter(|p| p.1 <= ymax)
                        .collect();
                    chart
                        .draw_series(DashedLineSeries::new(curve, 6, 4, color.stroke_width(1)))
                        .map_err(err)?;
                }
                for (si, s) in series.iter().enumerate() {
                    let mut pub_pts: Vec<_> =
                        published.iter().filter(|p| p.variant == v.name && p.series == *s).collect();
                    pub_pts.sort_by_key(|p| p.clients);
                    if pub_pts.is_empty() {
                        continue;
                    }
                    let xy: Vec<(f64, f64)> = pub_pts.iter().map(|p| (f64::from(p.clients), p.tps)).collect();
                    if xy.len() > 1 {
                        chart
                            .draw_series(DashedLineSeries::new(
                                xy.clone(),
                                2,
                                3,
                                color.mix(0.6).stroke_width(1),
                            ))
                            .map_err(err)?;
                    }
                    chart
                        .draw_series(pub_pts.iter().filter_map(|p| match (p.low, p.high) {
                            (Some(lo), Some(hi)) => {
                                Some(ErrorBar::new_vertical(f64::from(p.clients), lo, p.tps, hi, color, 6))
                            }
                            _ => None,
                        }))
                        .map_err(err)?;
                    if si % 2 == 0 {
                        chart
                            .draw_series(xy.iter().map(|&p| TriangleMarker::new(p, 7, color.filled())))
                            .map_err(err)?;
                    } else {
                        chart
                            .draw_series(xy.iter().map(|&p| Cross::new(p, 6, color.stroke_width(2))))
                            .map_err(err)?;
                    }
                }
            }
            for (si, s) in series.iter().enumerate() {
                let mark = if si % 2 == 0 { Mark::Triangle(BLACK) } else { Mark::Cross(BLACK) };
                let whose =
                    if crate::experiments::measured::is_measured_series(s) { "yours" } else { "published" };
                entries.push((mark, format!("{whose} ({s}), in each variant's colour")));
            }
            entries.push((
                Mark::Dashed(BLACK),
                format!("USL fit to the {kind} medians (measured range), in each variant's colour"),
            ));
            if let Some(sens) = &r.sensitivity {
                entries.push((
                    Mark::Band(BLACK),
                    format!(
                        "median's band over {} perturbations (each assumed constant x0.5, x2), in each variant's colour",
                        sens.perturbations.len()
                    ),
                ));
            }
            legend(&legend_area, &entries, legend_rows, PANEL.0 as i32)?;
        }
        root.present().map_err(err)?;
    }
    Ok(text)
}

/// The colour of a time category.
fn category_color(name: &str, tranche_index: &mut usize) -> RGBColor {
    match name {
        "running" => RGBColor(44, 160, 44),
        "runnable (no core)" => RGBColor(127, 127, 127),
        "sleep" => RGBColor(158, 218, 229),
        "Lock:* (heavyweight)" => RGBColor(140, 86, 75),
        "IO:WALSync" => RGBColor(148, 103, 189),
        "Timeout:SpinDelay" => RGBColor(219, 219, 141),
        "other" => RGBColor(220, 220, 220),
        _ => {
            let c = TRANCHE_COLORS[*tranche_index % TRANCHE_COLORS.len()];
            *tranche_index += 1;
            c
        }
    }
}

/// Pixel size of one (workload, variant) panel of the time plot.
const TIME_PANEL: (u32, u32) = (440, 340);
/// Width of the legend column to the right of the time plot's panels.
const TIME_LEGEND_W: u32 = 300;

/// Renders "where the time went" as SVG text, or `None` when no point carries a time split (a
/// native run). A panel per (workload, variant), workloads in rows and variants in columns;
/// in each, one stacked bar per client count of the shares of the simulated backends' virtual
/// time ([`time_shares`]: running, each LWLock tranche's waits, heavyweight locks, WAL flush,
/// sleep, runnable without a core, other), summing to 1. The legend is on the right.
///
/// # Errors
/// A drawing error from plotters, as text.
pub fn render_time_svg(r: &ExperimentResult) -> Result<Option<String>, String> {
    let Some(t) = time_shares(r) else {
        return Ok(None);
    };
    Ok(Some(draw_time(r, &t)?))
}

fn draw_time(r: &ExperimentResult, t: &TimeShares) -> Result<String, String> {
    let e = r.plan.experiment;
    let (cols, rows) = (e.variants.len().max(1), r.plan.workloads.len().max(1));
    let legend_h = t.categories.len() as u32 * LEGEND_ROW + 40;
    let height = HEADER + (rows as u32 * TIME_PANEL.1).max(legend_h);
    let mut tranche = 0;
    let colors: Vec<RGBColor> = t.categories.iter().map(|c| category_color(c, &mut tranche)).collect();
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (cols as u32 * TIME_PANEL.0 + TIME_LEGEND_W, height))
            .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(HEADER);
        header(&top, &format!("{}: where the simulated backends' virtual time went", e.name), r)?;
        let (grid, legend_area) = body.split_horizontally(cols as u32 * TIME_PANEL.0);
        let (grid, _) = grid.split_vertically(rows as u32 * TIME_PANEL.1);
        let panels = grid.split_evenly((rows, cols));
        let clients = &r.plan.clients;
        let n = clients.len();
        for (wi, w) in r.plan.workloads.iter().enumerate() {
            for (vi, v) in e.variants.iter().enumerate() {
                let area = &panels[wi * cols + vi];
                let mut chart = ChartBuilder::on(area)
                    .caption(format!("{} / {}", w.name, v.name), ("sans-serif", 16))
                    .margin(10)
                    .x_label_area_size(36)
                    .y_label_area_size(52)
                    .build_cartesian_2d(-0.6..n as f64 - 0.4, 0.0..1.0)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .light_line_style(WHITE)
                    .y_labels(11)
                    .x_labels(0)
                    .x_desc("clients")
                    .y_desc("share of virtual time")
                    .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
                    .label_style(("sans-serif", 13))
                    .axis_desc_style(("sans-serif", 13))
                    .draw()
                    .map_err(err)?;
                // Client counts under the bars (the axis is continuous; the bars are categories).
                let base = area.get_base_pixel();
                for (ci, &c) in clients.iter().enumerate() {
                    let (px, py) = chart.backend_coord(&(ci as f64, 0.0));
                    let style =
                        ("sans-serif", 13).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
                    area.draw(&Text::new(c.to_string(), (px - base.0, py - base.1 + 6), style))
                        .map_err(err)?;
                }
                for (ci, &c) in clients.iter().enumerate() {
                    let Some(row) =
                        t.rows.iter().find(|x| x.workload == w.name && x.variant == v.name && x.clients == c)
                    else {
                        continue;
                    };
                    let x = ci as f64;
                    let mut y0 = 0.0;
                    for (k, &share) in row.shares.iter().enumerate() {
                        if share <= 0.0 {
                            continue;
                        }
                        let y1 = (y0 + share).min(1.0);
                        chart
                            .draw_series(std::iter::once(Rectangle::new(
                                [(x - 0.35, y0), (x + 0.35, y1)],
                                colors[k].filled(),
                            )))
                            .map_err(err)?;
                        y0 = y1;
                    }
                }
            }
        }
        let entries: Vec<(Mark, String)> =
            t.categories.iter().zip(&colors).rev().map(|(c, &col)| (Mark::Box(col), c.clone())).collect();
        legend_area
            .draw(&Text::new("top of the bars first:".to_string(), (14, 14), ("sans-serif", 14)))
            .map_err(err)?;
        let (_, below) = legend_area.split_vertically(34);
        legend(&below, &entries, entries.len().max(1), TIME_LEGEND_W as i32)?;
        root.present().map_err(err)?;
    }
    Ok(text)
}
