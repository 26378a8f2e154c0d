//! The plots' data: a [`Figure`] of [`Panel`]s, each with its [`Series`] (predicted, measured,
//! published, fitted), bands and curves, and which series a panel draws ([`drawn`]). Built by
//! the experiments' output and `machine sweep`, read by the renderer ([`super::svg`]) and the
//! band panels' ranges ([`super::clip`]). No locks: plain data.

use plotters::style::RGBColor;

use super::palette::Style;

/// What a series is, which decides how it is drawn and what its legend entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Simulated by the model: a line with filled markers. `calibrated: false` marks a curve
    /// whose machine was not fitted to any figure (every point is the profile's assumption).
    Predicted {
        /// Whether the run applied a calibration.
        calibrated: bool,
    },
    /// Measured on a real machine (this host, or a user's `--measured` file): a line with
    /// filled markers.
    Measured,
    /// A published figure (a seed thread's): hollow markers joined by a thin dotted line. Drawn
    /// only on the panel of its own machine ([`Panel::machine`]).
    Published,
    /// The point(s) a calibration fitted the model to: a black ring around the point.
    Fitted,
}

/// One point of a series: x is clients, y the throughput, with an optional low-high range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pt {
    /// Clients (at least 1).
    pub x: f64,
    /// Throughput (median), the panel's unit.
    pub y: f64,
    /// Lowest run, when known.
    pub lo: Option<f64>,
    /// Highest run, when known.
    pub hi: Option<f64>,
}

/// A named series of points on one machine.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// The machine its points come from (a profile name, `this host`, a user's label).
    pub machine: String,
    /// What it is.
    pub kind: Kind,
    /// Colour, marker, dash.
    pub style: Style,
    /// The points, any order (drawn sorted by x).
    pub points: Vec<Pt>,
}

/// A pale area between a low and a high curve, its two edges drawn in the series' colour and
/// dash, with a whisker at each x (a `--sensitivity` band): `(x, lo, mid, hi)` per point.
#[derive(Clone, Debug)]
pub struct Band {
    /// Legend text.
    pub label: String,
    /// Colour (the area drawn pale, the edges and whiskers in it).
    pub colour: RGBColor,
    /// The edges' dashes (`None`: solid), the series' own, so that overlapping bands stay apart.
    pub dash: Option<(u32, u32)>,
    /// `(clients, lo, base, hi)`.
    pub points: Vec<(f64, f64, f64, f64)>,
}

/// A thin dashed curve (a model fit): `(clients, throughput)` per point.
#[derive(Clone, Debug)]
pub struct Curve {
    /// Legend text.
    pub label: String,
    /// Colour.
    pub colour: RGBColor,
    /// The curve's points.
    pub points: Vec<(f64, f64)>,
}

/// One panel: a chart of throughput against clients on a log2 axis, with its legend and notes
/// below it.
#[derive(Clone, Debug)]
pub struct Panel {
    /// The panel's title (wrapped to the panel's width).
    pub title: String,
    /// The machine the panel is for; a [`Kind::Published`] series of another machine is not drawn.
    pub machine: String,
    /// What the x axis counts (`clients`, `workers`): its label says so.
    pub x_name: String,
    /// The y axis' description (the unit).
    pub y_desc: String,
    /// Series.
    pub series: Vec<Series>,
    /// Bands, drawn under the series.
    pub bands: Vec<Band>,
    /// Curves, drawn over the bands.
    pub curves: Vec<Curve>,
    /// Lines of text below the legend (wrapped): fits, calibration, sources.
    pub notes: Vec<String>,
}

/// A whole plot: a header and panels in rows of `columns`.
#[derive(Clone, Debug)]
pub struct Figure {
    /// The title (bold, wrapped).
    pub title: String,
    /// Lines under the title (wrapped).
    pub subtitle: Vec<String>,
    /// The panels.
    pub panels: Vec<Panel>,
    /// Panels per row (at least 1).
    pub columns: usize,
    /// Pixel size of one panel's chart (its legend and notes go below).
    pub panel_size: (u32, u32),
}

/// Whether series `s` is drawn on panel `p`: every series but a published one of another
/// machine.
pub fn drawn(p: &Panel, s: &Series) -> bool {
    s.kind != Kind::Published || s.machine == p.machine
}
