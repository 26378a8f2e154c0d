//! The ranges of a throughput panel, and the published points left above them. A panel with
//! `--sensitivity` bands is drawn to the run's own ranges, so that the bands stay readable when
//! the seed's machine published figures several times the model's, at many more client counts:
//! x spans the run's client counts (published points at other counts are not drawn); y spans
//! the run's own points, min-max bars and bands, with the published points within 1.25 times
//! their highest, padded by a tenth of that span (from 0 when the low end is within 30% of the
//! high end's value of 0); the published points above are drawn in a strip at the top of the
//! chart, each with its value. Any other panel is drawn from 0 to 1.1 times everything it
//! draws. No locks: pure functions of the panel.

use super::figure::{Kind, Panel, Pt, Series, drawn};
use super::palette::Style;

/// Height of one row of the top strip (one clipped point's symbol and value), pixels.
pub const CLIP_ROW: f64 = 16.0;

/// Pixels between the strip's last row and the clip edge below it.
const STRIP_PAD: f64 = 10.0;

/// A published point above the clip edge: drawn in row `row` (0 at the top) of the strip, at
/// its own x, with its value written beside it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clipped {
    /// The series' style (its colour, marker and dash).
    pub style: Style,
    /// Clients.
    pub x: f64,
    /// The published value.
    pub y: f64,
    /// Its row among the clipped points of the same x, highest value first.
    pub row: usize,
}

/// The y axis of a panel: from `bottom` to `top`; lines, bars and markers stop at `edge`, and
/// the published points above it are `clipped`.
#[derive(Clone, Debug, PartialEq)]
pub struct YRange {
    /// The axis' bottom: 0, or on a panel drawn to the run's own ranges the low end of its data.
    pub bottom: f64,
    /// The axis' top.
    pub top: f64,
    /// Where drawn data stops: `top` when nothing is clipped.
    pub edge: f64,
    /// The published points above `edge`, drawn in the strip between `edge` and `top`.
    pub clipped: Vec<Clipped>,
}

/// A point's highest and lowest drawn value: its median and its min-max bar.
fn hi(q: &Pt) -> f64 {
    q.hi.unwrap_or(q.y).max(q.y)
}
fn lo(q: &Pt) -> f64 {
    q.lo.unwrap_or(q.y).min(q.y)
}

/// Whether `p` is drawn to the run's own ranges: it has bands.
pub fn own_range(p: &Panel) -> bool {
    !p.bands.is_empty()
}

/// The run's own series of `p`: every drawn one but the published ones.
fn own_series(p: &Panel) -> impl Iterator<Item = &Series> {
    p.series.iter().filter(|s| drawn(p, s) && s.kind != Kind::Published)
}

/// The published series drawn on `p`.
fn published(p: &Panel) -> impl Iterator<Item = &Series> {
    p.series.iter().filter(|s| drawn(p, s) && s.kind == Kind::Published)
}

/// The client range of the run's own data on `p` (its series and bands), `None` without any.
fn own_x(p: &Panel) -> Option<(f64, f64)> {
    own_series(p)
        .flat_map(|s| s.points.iter().map(|q| q.x))
        .chain(p.bands.iter().flat_map(|b| b.points.iter().map(|q| q.0)))
        .fold(None, |r, x| Some(r.map_or((x, x), |(a, b): (f64, f64)| (a.min(x), b.max(x)))))
}

/// Whether a published point at `x` clients is drawn on `p`: on a panel drawn to the run's own
/// ranges, only within its client range; on any other, always.
pub fn in_x(p: &Panel, x: f64) -> bool {
    match own_x(p) {
        Some((a, b)) if own_range(p) => (a..=b).contains(&x),
        _ => true,
    }
}

/// The lowest and highest value of the run's own data on `p`: its series' points and bars and
/// its bands.
pub fn own_bounds(p: &Panel) -> (f64, f64) {
    let (mut l, mut h) = (f64::INFINITY, 0.0f64);
    for q in own_series(p).flat_map(|s| s.points.iter()) {
        (l, h) = (l.min(lo(q)), h.max(hi(q)));
    }
    for q in p.bands.iter().flat_map(|b| b.points.iter()) {
        (l, h) = (l.min(q.1), h.max(q.3));
    }
    (l.min(h), h)
}

/// The y axis of a panel drawn to the run's own ranges, without the strip: its bottom and the
/// clip edge.
fn own_frame(p: &Panel) -> (f64, f64) {
    let (mut l, own_h) = own_bounds(p);
    let mut h = own_h;
    for q in published(p).flat_map(|s| s.points.iter()).filter(|q| in_x(p, q.x) && q.y <= own_h * 1.25) {
        (l, h) = (l.min(lo(q)), h.max(hi(q).min(own_h * 1.25)));
    }
    let pad = 0.1 * (h - l);
    if l - pad < 0.3 * h { (0.0, h * 1.1) } else { (l - pad, h + pad) }
}

/// The published points of `p` above its clip edge, in strip rows: only on a panel drawn to the
/// run's own ranges, among the points [`in_x`].
pub fn clipped(p: &Panel) -> Vec<Clipped> {
    if !own_range(p) || own_bounds(p).1 <= 0.0 {
        return Vec::new();
    }
    let edge = own_frame(p).1;
    let mut out: Vec<Clipped> = published(p)
        .flat_map(|s| s.points.iter().map(move |q| (s.style, q)))
        .filter(|(_, q)| q.y > edge && in_x(p, q.x))
        .map(|(style, q)| Clipped { style, x: q.x, y: q.y, row: 0 })
        .collect();
    out.sort_by(|a, b| a.x.total_cmp(&b.x).then(b.y.total_cmp(&a.y)));
    for i in 1..out.len() {
        if out[i].x == out[i - 1].x {
            out[i].row = out[i - 1].row + 1;
        }
    }
    out
}

/// The y axis of panel `p` whose chart plots `plot_h` pixels high: from 0 to 1.1 times the
/// highest value drawn; on a panel drawn to the run's own ranges, its frame (module docs), with
/// the top as far above the clip edge as the strip's rows need (at most half the chart).
pub fn y_range(p: &Panel, plot_h: f64) -> YRange {
    if !own_range(p) || own_bounds(p).1 <= 0.0 {
        let all = p
            .series
            .iter()
            .filter(|s| drawn(p, s))
            .flat_map(|s| s.points.iter())
            .map(hi)
            .chain(p.bands.iter().flat_map(|b| b.points.iter().map(|q| q.3)))
            .fold(0.0, f64::max)
            .max(1.0);
        return YRange { bottom: 0.0, top: all * 1.1, edge: all * 1.1, clipped: Vec::new() };
    }
    let (bottom, edge) = own_frame(p);
    let clipped = clipped(p);
    let rows = clipped.iter().map(|c| c.row + 1).max().unwrap_or(0) as f64;
    let strip = if rows > 0.0 { (rows * CLIP_ROW + STRIP_PAD).min(plot_h / 2.0) } else { 0.0 };
    let top = bottom + (edge - bottom) * plot_h / (plot_h - strip).max(1.0);
    YRange { bottom, top, edge, clipped }
}

/// The parts of the polyline `xy` at or below `edge`: a segment crossing it is cut where it
/// crosses (linearly in the plotted coordinates), a segment wholly above is dropped.
pub fn below(xy: &[(f64, f64)], edge: f64) -> Vec<Vec<(f64, f64)>> {
    let mut parts: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    let cross = |a: (f64, f64), b: (f64, f64)| (a.0 + (b.0 - a.0) * (edge - a.1) / (b.1 - a.1), edge);
    for (i, &q) in xy.iter().enumerate() {
        let prev = i.checked_sub(1).map(|j| xy[j]);
        match (prev, q.1 <= edge) {
            (None, true) => cur.push(q),
            (None, false) => {}
            (Some(a), true) => {
                if a.1 > edge {
                    cur.push(cross(a, q));
                }
                cur.push(q);
            }
            (Some(a), false) => {
                if a.1 <= edge {
                    cur.push(cross(a, q));
                    parts.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        parts.push(cur);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::super::figure::{Band, Pt};
    use super::super::palette::series_style;
    use super::*;

    fn series(kind: Kind, vi: usize, pts: &[(f64, f64)]) -> Series {
        Series {
            label: format!("{vi} {kind:?}"),
            machine: "m".into(),
            kind,
            style: series_style(vi),
            points: pts.iter().map(|&(x, y)| Pt { x, y, lo: Some(y * 0.9), hi: Some(y * 1.05) }).collect(),
        }
    }

    fn panel(bands: bool) -> Panel {
        let measured = Kind::Predicted { calibrated: true };
        Panel {
            title: "t".into(),
            machine: "m".into(),
            x_name: "clients".into(),
            y_desc: "tps".into(),
            series: vec![
                series(measured, 0, &[(32.0, 2000.0), (80.0, 1800.0)]),
                series(measured, 1, &[(32.0, 2100.0), (80.0, 1700.0)]),
                series(Kind::Published, 0, &[(8.0, 1500.0), (32.0, 10_500.0), (80.0, 7600.0)]),
                series(Kind::Published, 1, &[(32.0, 14_400.0), (80.0, 12_000.0)]),
            ],
            bands: if bands {
                vec![Band {
                    label: "b".into(),
                    colour: series_style(0).colour,
                    dash: None,
                    points: vec![(32.0, 1500.0, 2000.0, 2600.0), (80.0, 1400.0, 1800.0, 2300.0)],
                }]
            } else {
                Vec::new()
            },
            curves: Vec::new(),
            notes: Vec::new(),
        }
    }

    #[test]
    fn a_band_panel_keeps_the_runs_points_and_bands_in_range_and_clips_the_published() {
        let p = panel(true);
        let r = y_range(&p, 340.0);
        assert_eq!(own_bounds(&p), (1400.0, 2600.0));
        // Every point, bar and band of the run lies between the bottom and the clip edge, the
        // edge below the top; the low end is far from 0, so the axis does not start there.
        for q in p.series.iter().filter(|s| s.kind != Kind::Published).flat_map(|s| s.points.iter()) {
            assert!(q.lo.unwrap() >= r.bottom && q.hi.unwrap() <= r.edge, "{q:?} {r:?}");
        }
        assert!(p.bands[0].points.iter().all(|q| q.1 >= r.bottom && q.3 <= r.edge));
        assert!(r.bottom > 0.0 && r.edge < r.top && r.top < 2.0 * r.edge);
        // The published point outside the run's client range is not drawn; each one above the
        // edge is listed once, in rows per x, highest first.
        assert!(!in_x(&p, 8.0) && in_x(&p, 32.0) && in_x(&p, 80.0));
        let ys: Vec<(f64, f64, usize)> = r.clipped.iter().map(|c| (c.x, c.y, c.row)).collect();
        assert_eq!(
            ys,
            vec![(32.0, 14_400.0, 0), (32.0, 10_500.0, 1), (80.0, 12_000.0, 0), (80.0, 7600.0, 1)]
        );
        // The strip has room for its two rows above the edge.
        let strip_px = 340.0 * (r.top - r.edge) / (r.top - r.bottom);
        assert!(strip_px >= 2.0 * CLIP_ROW, "{strip_px}");
    }

    #[test]
    fn without_bands_or_a_large_excess_everything_is_in_range() {
        let p = panel(false);
        let r = y_range(&p, 340.0);
        assert!(r.clipped.is_empty() && r.bottom == 0.0 && r.top == r.edge && r.top >= 14_400.0 * 1.05);
        assert!(in_x(&p, 8.0));
        // A published point within 1.25 times the run's highest is drawn in range.
        let mut p = panel(true);
        p.series.truncate(3);
        p.series[2].points = vec![Pt { x: 32.0, y: 3000.0, lo: None, hi: None }];
        let r = y_range(&p, 340.0);
        assert!(r.clipped.is_empty() && r.edge >= 3000.0 && r.bottom <= 1400.0, "{r:?}");
    }

    #[test]
    fn lines_are_cut_at_the_edge() {
        let parts = below(&[(0.0, 1.0), (1.0, 3.0), (2.0, 3.0), (3.0, 1.0), (4.0, 0.5)], 2.0);
        assert_eq!(parts, vec![vec![(0.0, 1.0), (0.5, 2.0)], vec![(2.5, 2.0), (3.0, 1.0), (4.0, 0.5)]]);
        assert!(below(&[(0.0, 3.0), (1.0, 4.0)], 2.0).is_empty());
        assert_eq!(below(&[(0.0, 1.0)], 2.0), vec![vec![(0.0, 1.0)]]);
    }
}
