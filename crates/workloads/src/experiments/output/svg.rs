//! The one SVG renderer of the tree: a [`Figure`] of panels of throughput against clients, each
//! holding any number of [`Series`] (predicted, measured, published, fitted), bands and curves,
//! drawn with plotters' SVG backend. The experiments' throughput plots and `lockstack machine
//! sweep`'s `sweep.svg` are both built as a `Figure`; the time plot ([`super::time`]) shares
//! its header, legend and wrapping. No locks: pure functions of their input.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::clip;
use super::error::OutputError;
pub use super::figure::{Band, Curve, Figure, Kind, Panel, Pt, Series, drawn};
use super::palette::{Marker, Style};

/// `y` with a k / M suffix and as many decimals as ticks `step` apart need to differ (at least
/// [`short`]'s), for axis labels.
pub fn tick_label(y: f64, step: f64) -> String {
    let (unit, suffix, least) = match y.abs() {
        a if a >= 1e6 => (1e6, "M", 1),
        a if a >= 1e4 => (1e3, "k", 0),
        _ => (1.0, "", 0),
    };
    let need = if step > 0.0 { (unit / step).log10().ceil().max(0.0) as usize } else { 0 };
    format!("{:.*}{suffix}", need.clamp(least, 3), y / unit)
}

/// `y` with a k / M suffix, for axis labels.
pub fn short(y: f64) -> String {
    if y.abs() >= 1e6 {
        format!("{:.1}M", y / 1e6)
    } else if y.abs() >= 1e4 {
        format!("{:.0}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

pub(super) fn err(e: impl std::fmt::Display) -> OutputError {
    OutputError::Draw(e.to_string())
}

pub(super) type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Estimated width of `text` at font size `size`, pixels: plotters writes the SVG font size
/// as given and a sans-serif glyph averages about 0.55 em.
pub fn text_width(text: &str, size: f64) -> f64 {
    text.chars().count() as f64 * size * 0.55
}

/// `text` broken at spaces into lines that fit `width` pixels at font size `size` (a word
/// longer than a line is cut with a trailing `-`).
pub fn wrap(text: &str, size: f64, width: f64) -> Vec<String> {
    let max = ((width / (size * 0.55)).floor() as usize).max(8);
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let mut word = word.to_string();
        while word.chars().count() > max {
            if !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            let head: String = word.chars().take(max - 1).collect();
            lines.push(format!("{head}-"));
            word = word.chars().skip(max - 1).collect();
        }
        if cur.is_empty() {
            cur = word;
        } else if cur.chars().count() + 1 + word.chars().count() <= max {
            cur.push(' ');
            cur.push_str(&word);
        } else {
            lines.push(std::mem::replace(&mut cur, word));
        }
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// [`wrap`] with lines as even as the same number of lines allows: the width is narrowed one
/// character at a time while the text still takes as many lines and no word has to be cut, so
/// that a last line is not left with a word or two.
pub fn wrap_balanced(text: &str, size: f64, width: f64) -> Vec<String> {
    let mut best = wrap(text, size, width);
    let longest_word = text.split(' ').map(|w| w.chars().count()).max().unwrap_or(0).max(8);
    let step = size * 0.55;
    let mut w = width - step;
    while best.len() > 1 && (w / step).floor() as usize >= longest_word {
        let next = wrap(text, size, w);
        if next.len() != best.len() {
            break;
        }
        best = next;
        w -= step;
    }
    best
}

/// Sizes of the header's text: title font, subtitle font, line heights, pixels.
const TITLE_FONT: f64 = 19.0;
const SUB_FONT: f64 = 14.0;
const TITLE_LINE: u32 = 24;
const SUB_LINE: u32 = 18;

/// The header's lines (title lines, then subtitle lines) wrapped to `width`.
pub(super) fn header_lines(title: &str, subtitle: &[String], width: u32) -> (Vec<String>, Vec<String>) {
    let w = f64::from(width) - 24.0;
    let t = wrap_balanced(title, TITLE_FONT, w);
    let s = subtitle.iter().flat_map(|l| wrap_balanced(l, SUB_FONT, w)).collect();
    (t, s)
}

/// The header's height for those lines, pixels.
pub(super) fn header_height(lines: &(Vec<String>, Vec<String>)) -> u32 {
    12 + lines.0.len() as u32 * TITLE_LINE + lines.1.len() as u32 * SUB_LINE + 6
}

/// Draws the header lines.
pub(super) fn draw_header(area: &Area<'_>, lines: &(Vec<String>, Vec<String>)) -> Result<(), OutputError> {
    let mut y = 10;
    for l in &lines.0 {
        let font = ("sans-serif", TITLE_FONT).into_font().style(FontStyle::Bold);
        area.draw(&Text::new(l.clone(), (12, y), font)).map_err(err)?;
        y += TITLE_LINE as i32;
    }
    for l in &lines.1 {
        area.draw(&Text::new(l.clone(), (12, y), ("sans-serif", SUB_FONT))).map_err(err)?;
        y += SUB_LINE as i32;
    }
    Ok(())
}

/// One legend entry's symbol.
#[derive(Clone, Copy, Debug)]
pub(super) enum Mark {
    /// A series: its line (dashes) and marker, drawn as its kind draws it.
    Series(Kind, Style),
    /// A filled box (a stacked share).
    Box(RGBColor),
    /// A pale box with a bar, its top and bottom edges in the dash (a band).
    Band(RGBColor, Option<(u32, u32)>),
    /// A thin dashed line (a fit).
    Curve(RGBColor),
    /// No symbol: a note (not indented), or in [`legend_rows`] the continuation of an entry
    /// above (indented).
    Note,
}

/// Height of one legend row, pixels, and its font size.
pub(super) const LEGEND_ROW: u32 = 18;
const LEGEND_FONT: f64 = 13.0;

/// Legend rows: each entry's label wrapped to `width` (the first line beside its symbol).
/// A continuation line of an entry with a symbol: no symbol of its own, text indented as the
/// first line's.
pub(super) fn legend_rows(entries: &[(Mark, String)], width: u32) -> Vec<(Option<Mark>, String)> {
    let mut rows = Vec::new();
    for (m, label) in entries {
        let note = matches!(m, Mark::Note);
        let indent = if note { 14.0 } else { 46.0 };
        for (i, l) in wrap(label, LEGEND_FONT, f64::from(width) - indent - 8.0).into_iter().enumerate() {
            let mark = match (i, note) {
                (_, true) => None,
                (0, false) => Some(*m),
                (_, false) => Some(Mark::Note),
            };
            rows.push((mark, l));
        }
    }
    rows
}

/// Runs `$body` with `$el` bound to a marker of `$shape` at `$at` (a data or pixel point),
/// `$r` pixels in radius, in `$colour`, filled or outlined: one element type per shape, so the
/// body is written once for all of them.
macro_rules! with_marker {
    ($shape:expr, $at:expr, $r:expr, $colour:expr, $filled:expr, |$el:ident| $body:expr) => {{
        let (r, c, filled): (i32, RGBColor, bool) = ($r, $colour, $filled);
        let style = if filled { c.filled() } else { c.stroke_width(2) };
        let at = EmptyElement::at($at);
        let q = r + 1;
        match $shape {
            Marker::Circle => {
                let $el = at + Circle::new((0, 0), r, style);
                $body
            }
            Marker::Square => {
                let $el = at + Rectangle::new([(-r, -r), (r, r)], style);
                $body
            }
            Marker::Triangle if filled => {
                let $el = at + Polygon::new(vec![(-q, r), (q, r), (0, -q)], style);
                $body
            }
            Marker::Triangle => {
                let $el = at + PathElement::new(vec![(-q, r), (q, r), (0, -q), (-q, r)], style);
                $body
            }
            Marker::TriangleDown if filled => {
                let $el = at + Polygon::new(vec![(-q, -r), (q, -r), (0, q)], style);
                $body
            }
            Marker::TriangleDown => {
                let $el = at + PathElement::new(vec![(-q, -r), (q, -r), (0, q), (-q, -r)], style);
                $body
            }
            Marker::Diamond if filled => {
                let $el = at + Polygon::new(vec![(0, -q), (q, 0), (0, q), (-q, 0)], style);
                $body
            }
            Marker::Diamond => {
                let $el = at + PathElement::new(vec![(0, -q), (q, 0), (0, q), (-q, 0), (0, -q)], style);
                $body
            }
            Marker::Cross => {
                let $el = at + Cross::new((0, 0), r, c.stroke_width(2));
                $body
            }
        }
    }};
}

/// Opacity of a band's area: pale enough that two overlapping bands show both edges.
const BAND_FILL: f64 = 0.08;
/// Opacity of a band's whiskers.
const BAND_WHISKER: f64 = 0.55;

/// Draws a horizontal line from `xs.0` to `xs.1` at pixel row `y` of `area`, in `dash`
/// (`(dash, gap)` pixels; `None`: solid).
fn dashed_row(
    area: &Area<'_>,
    xs: (i32, i32),
    y: i32,
    dash: Option<(u32, u32)>,
    style: ShapeStyle,
) -> Result<(), OutputError> {
    let Some((d, g)) = dash else {
        return area.draw(&PathElement::new(vec![(xs.0, y), (xs.1, y)], style)).map_err(err);
    };
    let mut a = xs.0;
    while a < xs.1 {
        let b = (a + d as i32).min(xs.1);
        area.draw(&PathElement::new(vec![(a, y), (b, y)], style)).map_err(err)?;
        a = b + g as i32;
    }
    Ok(())
}

/// Draws a min-max bar on `area` in pixels: a vertical line at `x` from `ys.0` to `ys.1` and a
/// cap `cap` pixels wide at each end. Lines only: the point's own marker is its series'.
pub(super) fn whisker(
    area: &Area<'_>,
    x: i32,
    ys: (i32, i32),
    cap: i32,
    style: ShapeStyle,
) -> Result<(), OutputError> {
    let h = cap / 2;
    area.draw(&PathElement::new(vec![(x, ys.0), (x, ys.1)], style)).map_err(err)?;
    for y in [ys.0, ys.1] {
        area.draw(&PathElement::new(vec![(x - h, y), (x + h, y)], style)).map_err(err)?;
    }
    Ok(())
}

/// Draws a series' legend symbol on `area` from `xs.0` to `xs.1` at pixel row `mid`: its line
/// (dashes) with its marker in the middle, as its kind draws them on the chart.
fn series_symbol(
    area: &Area<'_>,
    kind: Kind,
    st: Style,
    xs: (i32, i32),
    mid: i32,
) -> Result<(), OutputError> {
    let line = match kind {
        Kind::Published => Some(st.colour.mix(0.6).stroke_width(1)),
        Kind::Fitted => None,
        _ => Some(st.colour.stroke_width(2)),
    };
    if let Some(ls) = line {
        let dash = if kind == Kind::Published { Some(st.dash.unwrap_or((2, 3))) } else { st.dash };
        dashed_row(area, xs, mid, dash, ls)?;
    }
    let at = ((xs.0 + xs.1) / 2, mid);
    match kind {
        Kind::Fitted => area.draw(&Circle::new(at, 8, BLACK.stroke_width(2))).map_err(err)?,
        Kind::Published => {
            with_marker!(st.marker, at, 5, st.colour, false, |m| area.draw(&m).map_err(err)?)
        }
        _ => with_marker!(st.marker, at, 4, st.colour, true, |m| area.draw(&m).map_err(err)?),
    }
    Ok(())
}

/// Draws legend rows at (`x0`, `y0`) of `area`.
pub(super) fn draw_legend(
    area: &Area<'_>,
    rows: &[(Option<Mark>, String)],
    x0: i32,
    y0: i32,
) -> Result<(), OutputError> {
    let font = ("sans-serif", LEGEND_FONT).into_font();
    for (i, (mark, label)) in rows.iter().enumerate() {
        let y = y0 + i as i32 * LEGEND_ROW as i32;
        let mid = y + 8;
        let x = x0;
        match *mark {
            None => {}
            Some(Mark::Note) => {}
            Some(Mark::Series(kind, st)) => series_symbol(area, kind, st, (x, x + 36), mid)?,
            Some(Mark::Curve(c)) => {
                for k in 0..4 {
                    area.draw(&PathElement::new(
                        vec![(x + 10 * k, mid), (x + 10 * k + 5, mid)],
                        c.stroke_width(1),
                    ))
                    .map_err(err)?;
                }
            }
            Some(Mark::Band(c, dash)) => {
                area.draw(&Rectangle::new([(x, mid - 6), (x + 36, mid + 6)], c.mix(BAND_FILL).filled()))
                    .map_err(err)?;
                for y in [mid - 6, mid + 6] {
                    dashed_row(area, (x, x + 36), y, dash, c.stroke_width(1))?;
                }
                whisker(area, x + 18, (mid + 6, mid - 6), 8, c.mix(BAND_WHISKER).stroke_width(2))?;
            }
            Some(Mark::Box(c)) => {
                area.draw(&Rectangle::new([(x, mid - 6), (x + 36, mid + 6)], c.filled())).map_err(err)?;
                area.draw(&Rectangle::new([(x, mid - 6), (x + 36, mid + 6)], BLACK.stroke_width(1)))
                    .map_err(err)?;
            }
        }
        // A symbol's label, or its continuation (`Mark::Note`), is indented; a note is not.
        let tx = if mark.is_some() { x + 46 } else { x };
        area.draw(&Text::new(label.clone(), (tx, y), font.clone())).map_err(err)?;
    }
    Ok(())
}

/// The client counts labelled under the x axis: every x of the panel's drawn series from the
/// smallest up, skipping one closer than `gap` pixels to the last kept, and the largest always
/// (dropping kept ones too close to it). `px` maps clients to pixels.
pub fn client_ticks(xs: &[f64], px: impl Fn(f64) -> f64, gap: f64) -> Vec<f64> {
    let mut xs: Vec<f64> = xs.to_vec();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let Some(&last) = xs.last() else { return Vec::new() };
    let mut kept: Vec<f64> = Vec::new();
    for &x in &xs {
        if kept.last().is_none_or(|&k| px(x) - px(k) >= gap) {
            kept.push(x);
        }
    }
    if kept.last() != Some(&last) {
        kept.retain(|&k| px(last) - px(k) >= gap);
        kept.push(last);
    }
    kept
}

/// The entries of a panel's legend: one per distinct series label, band, curve, then notes.
fn panel_entries(p: &Panel) -> Vec<(Mark, String)> {
    let mut entries: Vec<(Mark, String)> = Vec::new();
    for s in p.series.iter().filter(|s| drawn(p, s)) {
        if !entries.iter().any(|(_, l)| *l == s.label) {
            entries.push((Mark::Series(s.kind, s.style), s.label.clone()));
        }
    }
    for b in &p.bands {
        if !entries.iter().any(|(_, l)| *l == b.label) {
            entries.push((Mark::Band(b.colour, b.dash), b.label.clone()));
        }
    }
    for c in &p.curves {
        if !entries.iter().any(|(_, l)| *l == c.label) {
            entries.push((Mark::Curve(c.colour), c.label.clone()));
        }
    }
    entries.extend(p.notes.iter().map(|n| (Mark::Note, n.clone())));
    if clip::own_range(p) {
        let mut parts: Vec<String> = Vec::new();
        let bottom = clip::y_range(p, 100.0).bottom;
        if bottom > 0.0 {
            parts.push(format!("the y axis starts at {}, not 0", short(bottom)));
        }
        if !clip::clipped(p).is_empty() {
            parts.push(
                "the published points far above are drawn over the grey line at the top, with their values"
                    .into(),
            );
        }
        let published = p.series.iter().filter(|s| drawn(p, s) && s.kind == Kind::Published);
        if published.flat_map(|s| s.points.iter()).any(|q| !clip::in_x(p, q.x)) {
            parts.push(format!(
                "published points at other {} counts are not drawn",
                p.x_name.trim_end_matches('s')
            ));
        }
        if !parts.is_empty() {
            entries.push((
                Mark::Note,
                format!("The axes follow this run's points and bands: {}.", parts.join("; ")),
            ));
        }
    }
    entries
}

/// Renders `fig` as SVG text: the header (title and subtitle, wrapped to the width), then the
/// panels in rows. In each panel, y from 0 to 1.1 times the highest value drawn (a panel with
/// bands is drawn to the run's own ranges instead, the published points far above in a strip
/// at the top: [`clip`]), x the panel's [`Panel::x_name`] on a log2 axis labelled at the
/// series' counts (those closer than 30 pixels to a labelled one are skipped); bands, then
/// curves, then per series its line, min-max bars (lines only) and markers as [`Kind`] says;
/// an uncalibrated prediction writes "uncalibrated" in the chart's corner. Below each chart,
/// its legend (one entry per series label, band and curve) and notes.
///
/// # Errors
/// A drawing error from plotters ([`OutputError::Draw`]).
pub fn render(fig: &Figure) -> Result<String, OutputError> {
    let cols = fig.columns.clamp(1, fig.panels.len().max(1));
    let rows_n = fig.panels.len().max(1).div_ceil(cols);
    let (pw, ph) = fig.panel_size;
    let width = pw * cols as u32;
    let head = header_lines(&fig.title, &fig.subtitle, width);
    let head_h = header_height(&head);
    let legends: Vec<Vec<(Option<Mark>, String)>> =
        fig.panels.iter().map(|p| legend_rows(&panel_entries(p), pw - 20)).collect();
    let legend_h = legends.iter().map(Vec::len).max().unwrap_or(0) as u32 * LEGEND_ROW + 12;
    let cell_h = ph + legend_h;
    let mut text = String::new();
    {
        let root =
            SVGBackend::with_string(&mut text, (width, head_h + cell_h * rows_n as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, body) = root.split_vertically(head_h);
        draw_header(&top, &head)?;
        let cells = body.split_evenly((rows_n, cols));
        for ((p, legend), cell) in fig.panels.iter().zip(&legends).zip(cells.iter()) {
            let (chart_area, legend_area) = cell.split_vertically(ph);
            draw_panel(&chart_area, p, pw)?;
            draw_legend(&legend_area, legend, 14, 4)?;
        }
        root.present().map_err(err)?;
    }
    Ok(text)
}

fn draw_panel(area: &Area<'_>, p: &Panel, pw: u32) -> Result<(), OutputError> {
    let series: Vec<&Series> = p.series.iter().filter(|s| drawn(p, s)).collect();
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|s| {
            s.points.iter().filter(|q| s.kind != Kind::Published || clip::in_x(p, q.x)).map(|q| q.x)
        })
        .chain(p.bands.iter().flat_map(|b| b.points.iter().map(|q| q.0)))
        .filter(|x| *x >= 1.0)
        .collect();
    let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = xs.iter().copied().fold(0.0f64, f64::max);
    let (lo, hi) = if xs.is_empty() { (1.0, 2.0) } else { (lo, hi) };
    let pad = 0.25 + 0.05 * (hi.log2() - lo.log2());
    let (x0, x1) = (lo.log2() - pad, hi.log2() + pad);
    let title_lines = wrap_balanced(&p.title, 16.0, f64::from(pw) - 30.0);
    let (title_area, plot_area) = area.split_vertically(8 + 20 * title_lines.len() as u32);
    for (i, l) in title_lines.iter().enumerate() {
        let style = ("sans-serif", 16)
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        title_area.draw(&Text::new(l.clone(), (pw as i32 / 2, 6 + 20 * i as i32), style)).map_err(err)?;
    }
    // The chart plots the area less its margins (10 pixels a side) and the x labels (44).
    let yr = clip::y_range(p, f64::from(plot_area.dim_in_pixel().1) - 20.0 - 44.0);
    let (ymin, ymax, edge) = (yr.bottom, yr.top, yr.edge);
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(10)
        .margin_right(18)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x0..x1, ymin..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(232, 232, 232))
        .x_desc(format!("{} (log2 scale; labels at the counts run)", p.x_name))
        .y_desc(p.y_desc.as_str())
        // No value is labelled in the strip above the clip edge: its points are not on the axis.
        .y_label_formatter(&|y| if *y > edge { String::new() } else { tick_label(*y, (ymax - ymin) / 8.0) })
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 13))
        .draw()
        .map_err(err)?;
    let l2 = |x: f64| x.max(1e-9).log2();
    let base = plot_area.get_base_pixel();
    let map = chart.as_coord_spec().clone();
    // A data point's pixel in `plot_area`.
    let at = |x: f64, y: f64| {
        let (a, b) = map.translate(&(l2(x), y));
        (a - base.0, b - base.1)
    };
    for t in client_ticks(&xs, |x| f64::from(at(x, 0.0).0), 30.0) {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(l2(t), ymin), (l2(t), ymax)],
                RGBColor(225, 225, 225).stroke_width(1),
            )))
            .map_err(err)?;
        let (x, y) = at(t, ymin);
        let style = ("sans-serif", 13).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        plot_area.draw(&Text::new(format!("{t:.0}"), (x, y + 5), style)).map_err(err)?;
    }
    let nb = p.bands.len() as i32;
    for (bi, b) in p.bands.iter().enumerate() {
        let pts: Vec<(f64, f64, f64, f64)> = b.points.iter().map(|q| (l2(q.0), q.1, q.2, q.3)).collect();
        if pts.len() > 1 {
            let outline: Vec<(f64, f64)> =
                pts.iter().map(|q| (q.0, q.3)).chain(pts.iter().rev().map(|q| (q.0, q.1))).collect();
            chart
                .draw_series(std::iter::once(Polygon::new(outline, b.colour.mix(BAND_FILL).filled())))
                .map_err(err)?;
            for edge_of in [|q: &(f64, f64, f64, f64)| (q.0, q.1), |q: &(f64, f64, f64, f64)| (q.0, q.3)] {
                let line: Vec<(f64, f64)> = pts.iter().map(edge_of).collect();
                let style = b.colour.stroke_width(1);
                match b.dash {
                    None => chart.draw_series(LineSeries::new(line, style)).map_err(err)?,
                    Some((d, g)) => {
                        chart.draw_series(DashedLineSeries::new(line, d, g, style)).map_err(err)?
                    }
                };
            }
        }
        // Whiskers of bands at the same x side by side, 6 pixels apart, so each stays visible.
        let shift = 6 * (2 * bi as i32 - (nb - 1)) / 2;
        for q in &b.points {
            let (x, top) = at(q.0, q.3);
            whisker(
                &plot_area,
                x + shift,
                (at(q.0, q.1).1, top),
                12,
                b.colour.mix(BAND_WHISKER).stroke_width(3),
            )?;
        }
    }
    for c in &p.curves {
        let pts: Vec<(f64, f64)> =
            c.points.iter().filter(|q| (ymin..=ymax).contains(&q.1)).map(|q| (l2(q.0), q.1)).collect();
        chart.draw_series(DashedLineSeries::new(pts, 5, 4, c.colour.stroke_width(1))).map_err(err)?;
    }
    // The min-max bars of a series, stopping at the clip edge.
    let bars = |pts: &[Pt], cap: i32, style: ShapeStyle| -> Result<(), OutputError> {
        for q in pts {
            if let (Some(lo), Some(hi)) = (q.lo, q.hi)
                && lo < edge
            {
                let ys = (at(q.x, lo.max(ymin)).1, at(q.x, hi.min(edge)).1);
                whisker(&plot_area, at(q.x, ymin).0, ys, cap, style)?;
            }
        }
        Ok(())
    };
    let order = |k: Kind| match k {
        Kind::Published => 0,
        Kind::Predicted { .. } | Kind::Measured => 1,
        Kind::Fitted => 2,
    };
    let mut sorted = series.clone();
    sorted.sort_by_key(|s| order(s.kind));
    for s in sorted {
        let mut pts: Vec<Pt> =
            s.points.iter().filter(|q| s.kind != Kind::Published || clip::in_x(p, q.x)).copied().collect();
        pts.sort_by(|a, b| a.x.total_cmp(&b.x));
        let xy: Vec<(f64, f64)> = pts.iter().map(|q| (l2(q.x), q.y)).collect();
        let st = s.style;
        match s.kind {
            Kind::Fitted => {
                chart
                    .draw_series(
                        xy.iter()
                            .map(|&q| EmptyElement::at(q) + Circle::new((0, 0), 9, BLACK.stroke_width(2))),
                    )
                    .map_err(err)?;
            }
            Kind::Published => {
                let (d, g) = st.dash.unwrap_or((2, 3));
                for part in clip::below(&xy, edge).into_iter().filter(|l| l.len() > 1) {
                    chart
                        .draw_series(DashedLineSeries::new(part, d, g, st.colour.mix(0.6).stroke_width(1)))
                        .map_err(err)?;
                }
                bars(&pts, 6, st.colour.mix(0.7).stroke_width(1))?;
                for &q in xy.iter().filter(|q| q.1 <= edge) {
                    with_marker!(st.marker, q, 6, st.colour, false, |m| {
                        chart.draw_series(std::iter::once(m)).map_err(err)?;
                    });
                }
            }
            Kind::Predicted { .. } | Kind::Measured => {
                match st.dash {
                    None => chart
                        .draw_series(LineSeries::new(xy.clone(), st.colour.stroke_width(2)))
                        .map_err(err)?,
                    Some((d, g)) => chart
                        .draw_series(DashedLineSeries::new(xy.clone(), d, g, st.colour.stroke_width(2)))
                        .map_err(err)?,
                };
                bars(&pts, 8, st.colour.stroke_width(1))?;
                for &q in &xy {
                    with_marker!(st.marker, q, 4, st.colour, true, |m| {
                        chart.draw_series(std::iter::once(m)).map_err(err)?;
                    });
                }
            }
        }
    }
    if !yr.clipped.is_empty() {
        // The clip edge, and above it each clipped point's hollow marker and value.
        let (left, right) = (at(x0.exp2(), edge), at(x1.exp2(), edge));
        plot_area
            .draw(&PathElement::new(vec![left, (right.0, left.1)], RGBColor(160, 160, 160).stroke_width(1)))
            .map_err(err)?;
        let top = at(1.0, ymax).1;
        let font = ("sans-serif", 12).into_font();
        for c in &yr.clipped {
            // The series' legend symbol, so that two series of one variant stay apart by dash.
            let (x, y) = (at(c.x, 0.0).0, top + 9 + (clip::CLIP_ROW as i32) * c.row as i32);
            series_symbol(&plot_area, Kind::Published, c.style, (x - 14, x + 14), y)?;
            let label = format!("\u{2191} {}", clipped_value(c.y));
            let style = font.clone().color(&c.style.colour).pos(Pos::new(HPos::Left, VPos::Center));
            plot_area.draw(&Text::new(label, (x + 17, y), style)).map_err(err)?;
        }
    }
    if series.iter().any(|s| s.kind == Kind::Predicted { calibrated: false }) {
        let (x, y) = at(x0.exp2(), ymax);
        let style = ("sans-serif", 13).into_font().color(&RGBColor(120, 120, 120));
        let y = if yr.clipped.is_empty() { y + 6 } else { at(1.0, edge).1 + 4 };
        plot_area.draw(&Text::new("uncalibrated prediction".to_string(), (x + 8, y), style)).map_err(err)?;
    }
    Ok(())
}

/// A clipped point's value as written beside it: three significant figures with a k / M suffix.
fn clipped_value(y: f64) -> String {
    if y >= 1e6 {
        format!("{:.2}M", y / 1e6)
    } else if y >= 1e4 {
        format!("{:.1}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}
