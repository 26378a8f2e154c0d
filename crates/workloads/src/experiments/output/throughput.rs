//! The throughput plot of an experiment run (`NAME.svg`): the run's result turned into a
//! [`Figure`] of one panel per workload, drawn by the shared renderer ([`super::svg`]). No
//! locks: pure functions of the result.

use super::error::OutputError;
use super::palette::{Marker, Style, series_style};
use super::svg::{self, Band, Curve, Figure, Kind, Panel, Pt, Series};
use crate::experiments::driver::{ExperimentResult, clients_name};
use plotters::style::BLACK;

/// Distinct client counts a USL curve needs before the plot draws it: the fit's 3 parameters
/// (lambda, alpha, beta) plus 5, so that the curve's shape is determined by the points rather
/// than by the model (three points always fit exactly, inventing a hump). A curve with fewer is
/// kept in `NAME-usl.csv` and named in a note, not drawn.
pub const MIN_USL_CLIENTS: usize = 3 + 5;

/// The dashes of the thin line joining a published series' points, one per series of the
/// thread on a panel (the first dotted).
const PUBLISHED_DASHES: [(u32, u32); 3] = [(2, 3), (9, 3), (4, 6)];

/// Pixel size of one workload's chart in the throughput plot (its legend goes below): one
/// panel a row, so the plot stays readable at the 880-pixel width a Markdown page shows.
pub const PANEL: (u32, u32) = (720, 430);

/// The machine, as titles say it: `simulated opteron-24 (24 cores, 48 hardware threads)` or
/// `this host, 2 cores`.
pub fn machine_title(r: &ExperimentResult) -> String {
    match &r.simulated {
        Some(m) => format!("simulated {} ({} cores, {} hardware threads)", m.profile, m.cores, m.hw_threads),
        None => format!("this host, {} cores", r.machine.cores),
    }
}

/// What the run's x axis counts: its workloads' [`clients_name`] (`workers` for `vm-pin`),
/// `clients` when they differ.
pub fn x_name(r: &ExperimentResult) -> &'static str {
    let mut names = r.plan.workloads.iter().map(|w| clients_name(w));
    let first = names.next().unwrap_or("clients");
    if names.all(|n| n == first) { first } else { "clients" }
}

/// The machine a result's panels are for: the simulated profile's name, or `this host`.
pub fn panel_machine(r: &ExperimentResult) -> String {
    r.simulated.as_ref().map_or_else(|| "this host".to_string(), |m| m.profile.clone())
}

/// The profile a published series was measured on: the seed machine listing it, or `None`
/// when the catalog ties it to no profile.
fn series_machine(r: &ExperimentResult, series: &str) -> Option<&'static str> {
    r.plan.experiment.machines.iter().find(|m| m.series.contains(&series)).map(|m| m.profile)
}

/// The throughput plot as a [`Figure`]: per workload a panel with, per variant (colour, marker
/// and dash by its index), the medians with min-max bars ([`Kind::Predicted`] under
/// `--machine`, calibrated or not; [`Kind::Measured`] natively), the seed's published points of
/// this machine ([`Kind::Published`], one series per thread series and variant, in the
/// variant's style), the calibration point ([`Kind::Fitted`]), the `--sensitivity` bands, and
/// the USL fits of curves with at least [`MIN_USL_CLIENTS`] client counts (their parameters in
/// the legend); notes say which published series are not drawn (another machine's), which fits
/// are not, and where the published figures come from. `extra` adds series to the panel of the
/// named workload (a user's measured curve); one for a workload the plan lacks is not drawn.
pub fn figure(r: &ExperimentResult, extra: &[(String, Series)]) -> Figure {
    let e = r.plan.experiment;
    let machine = panel_machine(r);
    let mut panels = Vec::new();
    for w in &r.plan.workloads {
        let cal = r.plan.calibrated.iter().find(|c| c.workload == w.name);
        let kind = match r.simulated {
            Some(_) => Kind::Predicted { calibrated: cal.is_some() },
            None => Kind::Measured,
        };
        let what = match kind {
            Kind::Predicted { calibrated: true } => "predicted".to_string(),
            Kind::Predicted { calibrated: false } => "predicted, uncalibrated".to_string(),
            _ => format!("measured on {machine}"),
        };
        let x_name = clients_name(w);
        // `client`, `worker`: as in "client counts".
        let x_one = x_name.trim_end_matches('s');
        let mut p = Panel {
            title: format!("{} ({})", w.name, w.unit),
            machine: machine.clone(),
            x_name: x_name.to_string(),
            y_desc: w.unit.to_string(),
            series: Vec::new(),
            bands: Vec::new(),
            curves: Vec::new(),
            notes: Vec::new(),
        };
        let mut not_fitted: Vec<String> = Vec::new();
        for (vi, v) in e.variants.iter().enumerate() {
            let style = series_style(vi);
            let points: Vec<Pt> = r
                .plan
                .clients
                .iter()
                .filter_map(|&c| r.row(w.name, v.name, c))
                .map(|s| Pt { x: s.clients as f64, y: s.median, lo: Some(s.min), hi: Some(s.max) })
                .collect();
            if !points.is_empty() {
                p.series.push(Series {
                    label: format!("{}: {what}", v.name),
                    machine: machine.clone(),
                    kind,
                    style,
                    points,
                });
            }
            if let Some(sens) = &r.sensitivity {
                let band: Vec<(f64, f64, f64, f64)> = r
                    .plan
                    .clients
                    .iter()
                    .filter_map(|&c| sens.tps_band(w.name, v.name, c).map(|t| (c as f64, t.lo, t.base, t.hi)))
                    .collect();
                if !band.is_empty() {
                    p.bands.push(Band {
                        label: format!(
                            "{}: the median's band over {} perturbations (one assumed constant x0.5 or x2 each)",
                            v.name,
                            sens.perturbations.len()
                        ),
                        colour: style.colour,
                        dash: style.dash,
                        points: band,
                    });
                }
            }
            if let Some(u) = r.usl.iter().find(|u| u.workload == w.name && u.variant == v.name) {
                match u.fit {
                    Some(f) if u.clients.len() >= MIN_USL_CLIENTS => {
                        let (lo, hi) = (u.clients[0] as f64, u.clients[u.clients.len() - 1] as f64);
                        let points = (0..=120)
                            .map(|i| lo * (hi / lo).powf(f64::from(i) / 120.0))
                            .map(|n| (n, f.throughput(n)))
                            .collect();
                        let peak = f
                            .peak_clients
                            .map_or("no peak".to_string(), |c| format!("peak at {c:.0} {x_name}"));
                        p.curves.push(Curve {
                            label: format!(
                                "{}: USL fit over {} {x_one} counts: lambda {}, alpha {:.3e}, beta {:.3e}, {peak}, R2 {:.3}",
                                v.name,
                                u.clients.len(),
                                svg::short(f.lambda),
                                f.alpha,
                                f.beta,
                                f.r_squared
                            ),
                            colour: style.colour,
                            points,
                        });
                    }
                    _ => not_fitted.push(format!("{} ({})", v.name, u.clients.len())),
                }
            }
        }
        if !not_fitted.is_empty() {
            p.notes.push(format!(
                "No USL curve drawn for {}: the number of {x_one} counts in brackets is below {MIN_USL_CLIENTS} (the fit's 3 parameters + 5); fits or reasons are in {}-usl.csv.",
                not_fitted.join(", "),
                e.name
            ));
        }
        if let Some(c) = cal {
            let base = e.baseline().name;
            match r.row(w.name, base, c.clients as usize) {
                Some(s) => p.series.push(Series {
                    label: format!(
                        "fitted: {base} at {} client(s), set to {}'s {} tps by fitting postgres_ipc = {:.3}; every other point is predicted",
                        c.clients,
                        c.series,
                        svg::short(c.tps),
                        c.postgres_ipc
                    ),
                    machine: machine.clone(),
                    kind: Kind::Fitted,
                    style: Style { colour: BLACK, marker: Marker::Circle, dash: None },
                    points: vec![Pt { x: c.clients as f64, y: s.median, lo: None, hi: None }],
                }),
                None => p.notes.push(format!(
                    "Calibrated at {} client(s) ({}), a count this run did not include.",
                    c.clients, c.series
                )),
            }
        }
        let mut series: Vec<&str> = Vec::new();
        for q in e.published.iter().filter(|q| q.workload == w.name) {
            if !series.contains(&q.series) {
                series.push(q.series);
            }
        }
        let mut elsewhere: Vec<String> = Vec::new();
        for (si, s) in series.iter().enumerate() {
            let on = series_machine(r, s);
            if on != Some(machine.as_str()) {
                elsewhere.push(format!("{s} (on {})", on.unwrap_or("a machine no profile models")));
                continue;
            }
            for (vi, v) in e.variants.iter().enumerate() {
                let points: Vec<Pt> = e
                    .published
                    .iter()
                    .filter(|q| q.workload == w.name && q.series == *s && q.variant == v.name)
                    .map(|q| Pt { x: f64::from(q.clients), y: q.tps, lo: q.low, hi: q.high })
                    .collect();
                if !points.is_empty() {
                    p.series.push(Series {
                        label: format!("{}: published, {s}", v.name),
                        machine: machine.clone(),
                        kind: Kind::Published,
                        // The thread's series of one variant differ by their line's dashes.
                        style: Style {
                            dash: Some(PUBLISHED_DASHES[si % PUBLISHED_DASHES.len()]),
                            ..series_style(vi)
                        },
                        points,
                    });
                }
            }
        }
        if series.len() > elsewhere.len() {
            p.notes.push(format!("Published (hollow markers): {}.", e.thread.line()));
        }
        if !elsewhere.is_empty() {
            p.notes.push(format!(
                "Not drawn: the published figures of {}, measured on another machine than this panel's.",
                elsewhere.join("; ")
            ));
        }
        for (_, s) in extra.iter().filter(|(wl, _)| wl == w.name) {
            p.series.push(s.clone());
        }
        panels.push(p);
    }
    let mut subtitle = vec![e.title.to_string(), machine_title(r)];
    match (&r.calibrated_to, &r.simulated) {
        (Some(c), _) => subtitle.push(format!("calibrated to: {c}")),
        (None, Some(_)) => subtitle.push(
            "uncalibrated: every point is predicted from the profile's assumed costs (no stored calibration applied)"
                .to_string(),
        ),
        (None, None) => {}
    }
    Figure {
        title: format!("{}: throughput against {}", e.name, x_name(r)),
        subtitle,
        panels,
        columns: 1,
        panel_size: PANEL,
    }
}

/// The user's own curve (`--measured FILE.csv`, [`ExperimentResult::measured`]) as extra series
/// for [`figure`]: one [`Kind::Measured`] series per (workload, series, variant), in the
/// variant's colour and marker with a dotted line, labelled "VARIANT: yours, SERIES", on this
/// run's panel (the file's rows were already filtered to this run's machine when read).
pub fn measured_series(r: &ExperimentResult) -> Vec<(String, Series)> {
    let e = r.plan.experiment;
    let machine = panel_machine(r);
    let mut out: Vec<(String, Series)> = Vec::new();
    for m in &r.measured {
        let vi = e.variants.iter().position(|v| v.name == m.variant).unwrap_or(0);
        let label = format!("{}: yours, {}", m.variant, m.series);
        let pt = Pt { x: f64::from(m.clients), y: m.tps, lo: m.low, hi: m.high };
        match out.iter_mut().find(|(w, s)| w == m.workload && s.label == label) {
            Some((_, s)) => s.points.push(pt),
            None => out.push((
                m.workload.to_string(),
                Series {
                    label,
                    machine: machine.clone(),
                    kind: Kind::Measured,
                    style: Style { dash: Some((1, 3)), ..series_style(vi) },
                    points: vec![pt],
                },
            )),
        }
    }
    for (_, s) in &mut out {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    out
}

/// Renders the throughput plot ([`figure`] with the user's measured series, if any) as SVG text.
///
/// # Errors
/// A drawing error from plotters ([`OutputError::Draw`]).
pub fn render_svg(r: &ExperimentResult) -> Result<String, OutputError> {
    svg::render(&figure(r, &measured_series(r)))
}
