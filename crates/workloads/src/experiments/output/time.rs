//! Where the simulated backends' virtual time went (`NAME-time.svg`): the shares per wait
//! class ([`time_shares`]) and their stacked bars ([`render_time_svg`]), each class in its one
//! colour of [`super::palette::WAIT_COLOURS`]. No locks: pure functions of the result.

use std::collections::BTreeMap;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Serialize;

use super::error::OutputError;
use super::palette::{self, JOINING, NO_WAIT_EVENT, RUNNABLE, RUNNING, SLEEP, wait_colour, wait_rank};
use super::svg::{Mark, draw_header, draw_legend, err, header_height, header_lines, legend_rows};
use super::throughput::{machine_title, x_name};
use crate::experiments::driver::{ExperimentResult, TimeSplit};

/// The shares of the time plot: its categories, bottom of the stack first, and one row of
/// shares per (workload, variant, clients) that has a time split.
#[derive(Clone, Debug, Serialize)]
pub struct TimeShares {
    /// Category names, in the stacking order of [`palette::WAIT_COLOURS`] (names it lacks
    /// after, by name): `running`, each wait class as PostgreSQL names it (`LWLock:<tranche>`,
    /// `Lock:<tag kind>`, `IO:WALSync`, `Timeout:SpinDelay`, `IPC:...`, `Activity:...`), the lock
    /// stack's own named waits (`ProcStructLock`, `FreePageList`, `Harness:start`, ...), `no
    /// wait event`, `sleep`, `joining`, `runnable (no core)`; only categories with some time
    /// in some row. Nothing is folded into another category.
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

/// The lock stack's own named waits that are no LWLock tranche: a backend registry's spinlock
/// and the engine's free-page list.
const OWN_WAITS: [&str; 2] =
    [lockstack_common::sync::hook::BACKEND_REGISTRY_CLASS, lockstack_engine::engine::FREE_PAGES_WAIT_CLASS];

/// The category a simulated wait class is booked under: `unclassified` is `no wait event`; a
/// class with a `:` is already PostgreSQL's `type:event` (or the harness's); a bare name is the
/// lock stack's own named wait when it is one of [`OWN_WAITS`] (kept as it is), and otherwise
/// an LWLock tranche, built in or registered (`LWLock:<name>`).
pub fn category_of(class: &str) -> String {
    if class == "unclassified" {
        NO_WAIT_EVENT.into()
    } else if class.contains(':') || OWN_WAITS.contains(&class) {
        class.into()
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
        add(RUNNING.into(), t.running_ns);
        for (c, ns) in &t.waits_ns {
            add(category_of(c), *ns);
        }
        add(SLEEP.into(), t.sleeping_ns);
        add(RUNNABLE.into(), t.runnable_ns);
        add(JOINING.into(), t.joining_ns);
        Some(m)
    };
    let mut rows: Vec<TimeRow> = Vec::new();
    let mut mean_of: Vec<BTreeMap<String, f64>> = Vec::new();
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
        rows.push(TimeRow {
            workload: s.workload.clone(),
            variant: s.variant.clone(),
            clients: s.clients,
            shares: Vec::new(),
        });
        mean_of.push(mean);
    }
    if rows.is_empty() {
        return None;
    }
    let mut categories: Vec<String> = Vec::new();
    for m in &mean_of {
        for (k, v) in m {
            if *v > 0.0 && !categories.contains(k) {
                categories.push(k.clone());
            }
        }
    }
    categories.sort_by(|a, b| wait_rank(a).cmp(&wait_rank(b)).then_with(|| a.cmp(b)));
    for (row, m) in rows.iter_mut().zip(&mean_of) {
        row.shares = categories.iter().map(|c| m.get(c).copied().unwrap_or(0.0)).collect();
    }
    Some(TimeShares { categories, rows })
}

/// Pixel size of one (workload, variant) panel of the time plot: narrower with more variants,
/// so that the plot stays near the 880 pixels a Markdown page shows.
fn time_panel(variants: usize) -> (u32, u32) {
    ((900 / variants.max(1) as u32).clamp(230, 300), 290)
}
/// Width of one legend column below the time plot's panels.
const LEGEND_COL: u32 = 290;

/// Renders "where the time went" as SVG text, or `None` when no point carries a time split (a
/// native run). A panel per (workload, variant), workloads in rows and variants in columns;
/// in each, one stacked bar per client count of the shares of the simulated backends' virtual
/// time ([`time_shares`]), summing to 1, each class in its fixed colour
/// ([`palette::wait_colour`]). The legend is below, top of the stack first.
///
/// # Errors
/// A drawing error from plotters ([`OutputError::Draw`]).
pub fn render_time_svg(r: &ExperimentResult) -> Result<Option<String>, OutputError> {
    let Some(t) = time_shares(r) else {
        return Ok(None);
    };
    Ok(Some(draw_time(r, &t)?))
}

fn draw_time(r: &ExperimentResult, t: &TimeShares) -> Result<String, OutputError> {
    let e = r.plan.experiment;
    let (cols, rows) = (e.variants.len().max(1), r.plan.workloads.len().max(1));
    let panel = time_panel(cols);
    let width = (cols as u32 * panel.0).max(2 * LEGEND_COL + 20);
    let head = header_lines(
        &format!("{}: where the simulated backends' virtual time went", e.name),
        &[
            machine_title(r),
            format!(
                "share of the backends' virtual time per {} count; one colour per wait class in every plot",
                x_name(r).trim_end_matches('s')
            ),
        ],
        width,
    );
    let head_h = header_height(&head);
    let entries: Vec<(Mark, String)> =
        t.categories.iter().rev().map(|c| (Mark::Box(wait_colour(c)), c.clone())).collect();
    let per_col = ((width - 20) / LEGEND_COL).max(1) as usize;
    let legend: Vec<_> = legend_rows(&entries, LEGEND_COL);
    let legend_lines = legend.len().div_ceil(per_col);
    let legend_h = 30 + legend_lines as u32 * super::svg::LEGEND_ROW + 10;
    let grid_h = rows as u32 * panel.1;
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (width, head_h + grid_h + legend_h)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(head_h);
        draw_header(&top, &head)?;
        let (grid, legend_area) = body.split_vertically(grid_h);
        let (grid, _) = grid.split_horizontally(cols as u32 * panel.0);
        let panels = grid.split_evenly((rows, cols));
        let clients = &r.plan.clients;
        let n = clients.len();
        for (wi, w) in r.plan.workloads.iter().enumerate() {
            for (vi, v) in e.variants.iter().enumerate() {
                let area = &panels[wi * cols + vi];
                let mut chart = ChartBuilder::on(area)
                    .caption(format!("{} / {}", w.name, v.name), ("sans-serif", 14))
                    .margin(8)
                    .x_label_area_size(34)
                    .y_label_area_size(46)
                    .build_cartesian_2d(-0.6..n as f64 - 0.4, 0.0..1.0)
                    .map_err(err)?;
                chart
                    .configure_mesh()
                    .disable_x_mesh()
                    .light_line_style(WHITE)
                    .y_labels(6)
                    .x_labels(0)
                    .x_desc(x_name(r))
                    .y_desc("share of virtual time")
                    .y_label_formatter(&|y| format!("{:.0}%", y * 100.0))
                    .label_style(("sans-serif", 12))
                    .axis_desc_style(("sans-serif", 12))
                    .draw()
                    .map_err(err)?;
                // Client counts under the bars (the axis is continuous; the bars are categories).
                let base = area.get_base_pixel();
                for (ci, &c) in clients.iter().enumerate() {
                    let (px, py) = chart.backend_coord(&(ci as f64, 0.0));
                    let style =
                        ("sans-serif", 12).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
                    area.draw(&Text::new(c.to_string(), (px - base.0, py - base.1 + 5), style))
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
                                wait_colour(&t.categories[k]).filled(),
                            )))
                            .map_err(err)?;
                        y0 = y1;
                    }
                }
            }
        }
        legend_area
            .draw(&Text::new(
                "top of the bars first (left column down, then the next):".to_string(),
                (14, 8),
                ("sans-serif", 14),
            ))
            .map_err(err)?;
        let (_, below) = legend_area.split_vertically(30);
        for (ci, chunk) in legend.chunks(legend_lines.max(1)).enumerate() {
            draw_legend(&below, chunk, 14 + (ci as u32 * LEGEND_COL) as i32, 0)?;
        }
        root.present().map_err(err)?;
    }
    Ok(text)
}

/// The shared legend of the time plots as SVG text: every entry of
/// [`palette::WAIT_COLOURS`] with its colour, in stacking order (top first), in columns; what
/// docs/experiments.md shows once for all plots.
///
/// # Errors
/// A drawing error from plotters ([`OutputError::Draw`]).
pub fn render_legend_svg() -> Result<String, OutputError> {
    let entries: Vec<(Mark, String)> =
        palette::WAIT_COLOURS.iter().rev().map(|(n, c)| (Mark::Box(*c), (*n).to_string())).collect();
    let cols = 3usize;
    let per_col = entries.len().div_ceil(cols);
    let width = cols as u32 * LEGEND_COL + 20;
    let head =
        header_lines("The colour of each wait class and time category, in every time plot", &[], width);
    let head_h = header_height(&head);
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(
            &mut text,
            (width, head_h + per_col as u32 * super::svg::LEGEND_ROW + 12),
        )
        .into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(head_h);
        draw_header(&top, &head)?;
        let rows = legend_rows(&entries, LEGEND_COL);
        for (ci, chunk) in rows.chunks(per_col).enumerate() {
            draw_legend(&body, chunk, 14 + (ci as u32 * LEGEND_COL) as i32, 0)?;
        }
        root.present().map_err(err)?;
    }
    Ok(text)
}
