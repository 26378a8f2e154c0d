//! `sweep.svg` of `lockstack machine sweep`: one panel per profile, tps against clients, one
//! predicted line per preset and, with `--measured FILE.csv`, the user's own figures as dotted
//! lines in the preset's colour. Drawn by the experiments' renderer; takes no lock.

use lockstack_workloads::experiments::measured::Measured;
use lockstack_workloads::experiments::output::OutputError;
use lockstack_workloads::experiments::output::palette::{Style, series_style};
use lockstack_workloads::experiments::output::svg::{self as plot, Figure, Kind, Panel, Pt, Series};

use super::Plan;
use super::point::PointResult;

/// The user's figures for `profile`'s panel: one [`Kind::Measured`] series per (preset, series
/// name) among the rows without a machine and those naming `profile`, in the preset's colour
/// and marker with a dotted line, labelled "PRESET: yours, SERIES".
fn measured_series(plan: &Plan, measured: &Measured, profile: &str) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for m in measured.on(Some(profile)) {
        let vi = plan.presets.iter().position(|p| *p == m.variant).unwrap_or(0);
        let label = format!("{}: yours, {}", m.variant, measured.series(m.machine.as_deref()));
        let pt = Pt { x: f64::from(m.clients), y: m.tps, lo: None, hi: None };
        match out.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push(pt),
            None => out.push(Series {
                label,
                machine: profile.to_string(),
                kind: Kind::Measured,
                style: Style { dash: Some((1, 3)), ..series_style(vi) },
                points: vec![pt],
            }),
        }
    }
    for s in &mut out {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    out
}

/// `sweep.svg`'s text: a title, then one panel per profile (up to three a row) with tps per
/// virtual second from 0 on the y axis and clients on a log2 x axis, one predicted series per
/// preset (colour, marker and dash by the preset's position), then the user's measured series
/// that apply to the panel, its legend below each panel.
///
/// # Errors
/// A drawing error from plotters ([`OutputError`]).
pub(super) fn render_svg(
    plan: &Plan,
    results: &[PointResult],
    measured: Option<&Measured>,
) -> Result<String, OutputError> {
    let panels = plan
        .profiles
        .iter()
        .map(|(profile, _)| {
            let mut series: Vec<Series> = plan
                .presets
                .iter()
                .enumerate()
                .map(|(i, preset)| Series {
                    label: format!("{preset}: predicted, uncalibrated"),
                    machine: profile.clone(),
                    kind: Kind::Predicted { calibrated: false },
                    style: series_style(i),
                    points: results
                        .iter()
                        .filter(|r| r.point.profile == *profile && r.point.preset == *preset)
                        .map(|r| Pt { x: r.point.clients as f64, y: r.tps, lo: None, hi: None })
                        .collect(),
                })
                .filter(|s| !s.points.is_empty())
                .collect();
            if let Some(m) = measured {
                series.extend(measured_series(plan, m, profile));
            }
            Panel {
                title: profile.clone(),
                machine: profile.clone(),
                x_name: "clients".into(),
                y_desc: "tps".into(),
                series,
                bands: Vec::new(),
                curves: Vec::new(),
                notes: Vec::new(),
            }
        })
        .collect();
    let mut subtitle =
        vec!["uncalibrated: every point predicted from the profile's assumed costs".to_string()];
    if let Some(m) = measured {
        subtitle.push(format!("dotted lines \"yours\": measured figures from {}", m.path.display()));
    }
    let fig = Figure {
        title: format!(
            "lockstack pgbench {} -s {} on simulated machines: tps per virtual second ({} transactions a point)",
            plan.script.label(),
            plan.scale,
            plan.transactions
        ),
        subtitle,
        panels,
        columns: 3,
        panel_size: (440, 330),
    };
    plot::render(&fig)
}
