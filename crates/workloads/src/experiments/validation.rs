//! docs/sim-validation.md: each seed's published effects next to the simulated machine's
//! predictions, from the result files of the seeds' default sweeps (`lockstack experiment NAME
//! --machine P --out DIR`), written by `lockstack experiment validation DIR...`.
//!
//! An *effect* is a variant's throughput over the baseline's at one client count, on one of
//! the seed's machines, minus one: `ratio - 1` (+58% for a ratio of 1.58). Effects are compared,
//! not ratios, so that a ratio near 1 is not passed for free.
//!
//! Each side's effect has a *band* within which it is "no difference": the published side's is
//! [`NOISE_BAND`] (the seeds publish single figures without a spread: an assumed run-to-run
//! noise); the simulated side's is the wider of [`NOISE_BAND`] and twice the simulated
//! effect's error, the runs' spread (half the range of the variant's runs over its median plus
//! the same of the baseline's, times the ratio; zero for a single run). An effect outside its
//! band has a direction, up or down. A simulated effect *meets* the published one when both are
//! "no difference", or both have the same direction and differ by at most the wider of
//! [`TARGET`] times the published effect and the simulated band. A published effect with a
//! direction that lies inside the simulated band while the simulated effect is "no
//! difference" is *inconclusive* (the runs' spread cannot tell it from none), and does not
//! meet. A seed that reports "no difference" without figures (vm-pin) is a published effect
//! of 0. Whether each point was
//! fitted (the one calibrated baseline point) or predicted is stated per sweep.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Experiment, Published};

/// How far a simulated effect may be from the published one, as a share of the published
/// effect (0.25: a published +40% is met by +30% to +50%).
pub const TARGET: f64 = 0.25;

/// The band around no effect within which a published effect is "no difference", and the
/// least band of a simulated one: 3 points of throughput (an assumption: the seeds give no
/// spread for their figures, and repeated pgbench runs on one machine differ by a few percent).
pub const NOISE_BAND: f64 = 0.03;

/// One simulated sweep's throughput medians: `(workload, variant, clients)` to tps.
pub type Medians = BTreeMap<(String, String, usize), f64>;

/// One simulated sweep's run spread: `(workload, variant, clients)` to the smallest and
/// largest tps of its runs and their number (a point absent here counts as one run).
pub type Ranges = BTreeMap<(String, String, usize), RunRange>;

/// The runs of one point: smallest and largest throughput (tps) and how many runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunRange {
    /// The smallest throughput of the runs, tps.
    pub min: f64,
    /// The largest throughput of the runs, tps.
    pub max: f64,
    /// Runs.
    pub runs: u64,
}

/// One sweep's result, as the validation reads it.
#[derive(Clone, Debug)]
pub struct Sweep {
    /// The experiment.
    pub experiment: &'static Experiment,
    /// The machine profile it ran on.
    pub machine: String,
    /// Throughput medians.
    pub medians: Medians,
    /// The runs' spread per point (empty: every point one run, no spread known).
    pub ranges: Ranges,
    /// The calibration line the run printed (`None`: not calibrated).
    pub calibrated_to: Option<String>,
    /// Whose costs it carried (`postgres` or `own`).
    pub costs: String,
    /// The command that ran it (its plan: clients, runs, duration, `--set`s, costs).
    pub command: String,
}

/// One effect, published and simulated.
#[derive(Clone, Debug, PartialEq)]
pub struct Effect {
    /// Workload.
    pub workload: String,
    /// The published series.
    pub series: String,
    /// Variant over baseline.
    pub variant: String,
    /// The baseline variant.
    pub baseline: String,
    /// Clients.
    pub clients: usize,
    /// The published ratio (1.0 for "no difference").
    pub published: f64,
    /// The simulated ratio, when the sweep ran this point.
    pub simulated: Option<f64>,
    /// The simulated effect's error from the runs' spread (on the ratio, so on the effect):
    /// `ratio * (half range / median of the variant + the same of the baseline)`; 0 with
    /// single runs.
    pub simulated_error: f64,
    /// The seed says "no difference" rather than giving figures.
    pub no_difference: bool,
}

/// The direction of an effect against its band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Above the band: the variant is faster.
    Up,
    /// Below the band: the variant is slower.
    Down,
    /// Within the band: no difference.
    None,
}

impl Direction {
    fn of(effect: f64, band: f64) -> Direction {
        if effect > band {
            Direction::Up
        } else if effect < -band {
            Direction::Down
        } else {
            Direction::None
        }
    }
}

impl Effect {
    /// The published effect, `published - 1` (0 for "no difference").
    pub fn published_effect(&self) -> f64 {
        self.published - 1.0
    }

    /// The simulated effect, `simulated - 1`, when the sweep ran the point.
    pub fn simulated_effect(&self) -> Option<f64> {
        self.simulated.map(|s| s - 1.0)
    }

    /// The simulated effect's band: the wider of [`NOISE_BAND`] and twice its error.
    pub fn simulated_band(&self) -> f64 {
        NOISE_BAND.max(2.0 * self.simulated_error)
    }

    /// The published effect's direction against [`NOISE_BAND`].
    pub fn published_direction(&self) -> Direction {
        Direction::of(self.published_effect(), NOISE_BAND)
    }

    /// The simulated effect's direction against [`Effect::simulated_band`].
    pub fn simulated_direction(&self) -> Option<Direction> {
        self.simulated_effect().map(|e| Direction::of(e, self.simulated_band()))
    }

    /// How far the simulated effect may be from the published one when both have a direction:
    /// the wider of [`TARGET`] times the published effect and the simulated band.
    pub fn tolerance(&self) -> f64 {
        (TARGET * self.published_effect().abs()).max(self.simulated_band())
    }

    /// `simulated effect - published effect`, in effect units (0.05: 5 points more).
    pub fn effect_difference(&self) -> Option<f64> {
        self.simulated_effect().map(|s| s - self.published_effect())
    }

    /// Whether the simulated effect meets the published one (see the module docs); `None`
    /// when the sweep did not run the point.
    pub fn meets(&self) -> Option<bool> {
        let sim = self.simulated_direction()?;
        let published = self.published_direction();
        Some(match published {
            Direction::None => sim == Direction::None,
            d => sim == d && self.effect_difference().is_some_and(|x| x.abs() <= self.tolerance()),
        })
    }

    /// Why the effect meets or not, in a few words; `None` when the sweep did not run it.
    pub fn verdict(&self) -> Option<&'static str> {
        let sim = self.simulated_direction()?;
        Some(match (self.published_direction(), sim, self.meets()?) {
            (Direction::None, Direction::None, _) => "yes: no difference on both",
            (Direction::None, _, _) => "no: a difference where none was published",
            (_, Direction::None, _) if self.published_effect().abs() <= self.simulated_band() => {
                "no: inconclusive, the simulated band covers the published effect"
            }
            (_, Direction::None, _) => "no: no difference simulated",
            (_, _, true) => "yes: same direction, within tolerance",
            (p, s, false) if p != s => "no: opposite direction",
            _ => "no: same direction, outside tolerance",
        })
    }
}

/// The effects of `sweep`: every published (variant, baseline) pair at a client count of one
/// of the seed's series on that machine, and for a seed that published "no difference" only
/// (vm-pin), every variant against the baseline at every client count the sweep ran.
pub fn effects(sweep: &Sweep) -> Vec<Effect> {
    // A point's relative half range: (max - min) / 2 / median of its runs; 0 for one run.
    let half_range = |key: &(String, String, usize)| -> f64 {
        match (sweep.ranges.get(key), sweep.medians.get(key)) {
            (Some(r), Some(&m)) if r.runs > 1 && m > 0.0 => (r.max - r.min).max(0.0) / 2.0 / m,
            _ => 0.0,
        }
    };
    let error = |ratio: f64, w: &str, v: &str, b: &str, c: usize| -> f64 {
        let key = |x: &str| (w.to_string(), x.to_string(), c);
        ratio * (half_range(&key(v)) + half_range(&key(b)))
    };
    let e = sweep.experiment;
    let base = e.baseline().name;
    let mut out = Vec::new();
    let Some(m) = e.machine(&sweep.machine) else { return out };
    let on_machine = |p: &&Published| m.series.contains(&p.series);
    for p in e.published.iter().filter(on_machine).filter(|p| p.variant != base) {
        let Some(b) =
            e.published.iter().find(|q| q.series == p.series && q.variant == base && q.clients == p.clients)
        else {
            continue;
        };
        let sim = |v: &str| sweep.medians.get(&(p.workload.to_string(), v.to_string(), p.clients as usize));
        let simulated = match (sim(p.variant), sim(base)) {
            (Some(v), Some(b)) if *b > 0.0 => Some(v / b),
            _ => None,
        };
        out.push(Effect {
            workload: p.workload.to_string(),
            series: p.series.to_string(),
            variant: p.variant.to_string(),
            baseline: base.to_string(),
            clients: p.clients as usize,
            published: p.tps / b.tps,
            simulated_error: simulated
                .map_or(0.0, |r| error(r, p.workload, p.variant, base, p.clients as usize)),
            simulated,
            no_difference: false,
        });
    }
    if e.published.is_empty() {
        for ((w, v, c), tps) in &sweep.medians {
            if v == base {
                continue;
            }
            let Some(b) = sweep.medians.get(&(w.clone(), base.to_string(), *c)) else { continue };
            out.push(Effect {
                workload: w.clone(),
                series: "the thread's notes: no measurable difference".to_string(),
                variant: v.clone(),
                baseline: base.to_string(),
                clients: *c,
                published: 1.0,
                simulated_error: if *b > 0.0 { error(tps / b, w, v, base, *c) } else { 0.0 },
                simulated: (*b > 0.0).then(|| tps / b),
                no_difference: true,
            });
        }
    }
    out
}

/// The client count at which a curve peaks (the largest tps; ties to the fewer clients).
pub fn peak(points: impl IntoIterator<Item = (usize, f64)>) -> Option<usize> {
    points
        .into_iter()
        .fold(None, |best: Option<(usize, f64)>, (c, t)| match best {
            Some((_, bt)) if bt >= t => best,
            _ => Some((c, t)),
        })
        .map(|(c, _)| c)
}

/// An effect in percent with its sign (`+58.0%`).
fn pct(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// The markdown of docs/sim-validation.md for `sweeps`; `command` is what regenerates it.
pub fn render(sweeps: &[Sweep], command: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# The simulated machine against the seeds' published figures\n");
    let _ = writeln!(
        s,
        "Generated by `{command}` from one sweep of each seed on its machine (each sweep's command is in the table below; `just validation` runs the default ones); do not edit by hand. Each *effect* is a variant's throughput over the baseline's at one client count, minus one (+58% for a ratio of 1.58): effects are compared, not ratios. A published effect within +/-{band:.0}% is \"no difference\" (the seeds give no spread for their figures; {band:.0}% is an assumed run-to-run noise); a simulated effect is \"no difference\" within the wider of +/-{band:.0}% and twice its error, the runs' spread (half the range of the variant's runs over their median plus the same of the baseline's, times the ratio; the column gives that error). An effect **meets** the published one when both are \"no difference\", or both go the same way and differ by at most the tolerance: the wider of {target:.0}% of the published effect and the simulated band; a published effect inside the simulated band of a simulated \"no difference\" is inconclusive (the runs' spread cannot tell it from none) and does not meet. The only fitted parameter is each calibrated workload's `sim.postgres_ipc`, fitted to the baseline's published point at the fewest clients (never above a third of the cores, never a fix variant); every effect below is a prediction. Each run samples its own heap layout as well as its own keys (run r of a point allocates r x 16 bytes more before the run, `--sim-layout-shift`), so the error covers the layout's effect as far as the runs sample it (three runs: three layouts); it leaves out what another segment table does (a regenerated table is one), and a verdict near its threshold can flip between builds (docs/sim.md, \"Layout\").\n",
        band = NOISE_BAND * 100.0,
        target = TARGET * 100.0,
    );
    let _ = writeln!(s, "## Sweeps\n");
    let _ = writeln!(s, "| experiment | machine | command | costs | calibration |");
    let _ = writeln!(s, "| --- | --- | --- | --- | --- |");
    for sw in sweeps {
        let calibration = match (&sw.calibrated_to, sw.costs.as_str()) {
            (Some(c), _) => c.clone(),
            (None, "own") => "none (--costs own: this code's own costs)".to_string(),
            (None, _) if sw.command.contains("sim.postgres_ipc=") => {
                "not calibrated: sim.postgres_ipc as the command sets it".to_string()
            }
            (None, _) => "not calibrated: every point predicted from the profile's postgres_ipc".to_string(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | `{}` | {} | {} |",
            sw.experiment.name,
            sw.machine,
            sw.command,
            if sw.costs.is_empty() { "-" } else { &sw.costs },
            calibration
        );
    }
    let mut all = Vec::new();
    let _ = writeln!(s, "\n## Effects\n");
    let _ = writeln!(
        s,
        "| experiment | machine | workload | series | variant / baseline | clients | published effect | simulated effect +/- error | difference | tolerance | meets |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for sw in sweeps {
        for ef in effects(sw) {
            let published = if ef.no_difference {
                "no difference (0)".to_string()
            } else if ef.published_direction() == Direction::None {
                format!("{} (no difference)", pct(ef.published_effect()))
            } else {
                pct(ef.published_effect())
            };
            let simulated = match ef.simulated_effect() {
                None => "not run".to_string(),
                Some(e) => {
                    let none = if ef.simulated_direction() == Some(Direction::None) {
                        " (no difference)"
                    } else {
                        ""
                    };
                    format!("{} +/- {:.1}%{none}", pct(e), ef.simulated_error * 100.0)
                }
            };
            let (difference, tolerance) = match (ef.effect_difference(), ef.published_direction()) {
                (None, _) => ("-".to_string(), "-".to_string()),
                (Some(_), Direction::None) => {
                    ("-".to_string(), format!("band +/-{:.1}%", ef.simulated_band() * 100.0))
                }
                (Some(d), _) => {
                    (format!("{:+.1} points", d * 100.0), format!("+/-{:.1} points", ef.tolerance() * 100.0))
                }
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} / {} | {} | {published} | {simulated} | {difference} | {tolerance} | {} |",
                sw.experiment.name,
                sw.machine,
                ef.workload,
                ef.series,
                ef.variant,
                ef.baseline,
                ef.clients,
                ef.verdict().unwrap_or("-"),
            );
            all.push(ef);
        }
    }
    let met = all.iter().filter(|e| e.meets() == Some(true)).count();
    let judged: Vec<&Effect> = all.iter().filter(|e| e.meets().is_some()).collect();
    let count = |v: &str| judged.iter().filter(|e| e.verdict() == Some(v)).count();
    let _ = writeln!(
        s,
        "\n{met} of {} effects meet the published one; {} go the opposite way; {} show no difference where the seed measured one; {} are inconclusive (the runs' spread covers the published effect); {} show a difference where the seed published none; {} go the same way outside the tolerance.\n",
        judged.len(),
        count("no: opposite direction"),
        count("no: no difference simulated"),
        count("no: inconclusive, the simulated band covers the published effect"),
        count("no: a difference where none was published"),
        count("no: same direction, outside tolerance"),
    );
    let _ = writeln!(s, "## Peaks of the baseline curves\n");
    let _ = writeln!(
        s,
        "| experiment | machine | workload | series | published peak (clients) | simulated peak (clients, of those run) |"
    );
    let _ = writeln!(s, "| --- | --- | --- | --- | --- | --- |");
    for sw in sweeps {
        let e = sw.experiment;
        let base = e.baseline().name;
        let Some(m) = e.machine(&sw.machine) else { continue };
        for series in m.series {
            let mut workloads: Vec<&str> =
                e.published.iter().filter(|p| p.series == *series).map(|p| p.workload).collect();
            workloads.dedup();
            for w in workloads {
                let pubs = e
                    .published
                    .iter()
                    .filter(|p| p.series == *series && p.workload == w && p.variant == base)
                    .map(|p| (p.clients as usize, p.tps));
                let sims = sw
                    .medians
                    .iter()
                    .filter(|((ww, v, _), _)| ww == w && v == base)
                    .map(|((_, _, c), t)| (*c, *t));
                let show = |p: Option<usize>| p.map_or_else(|| "-".to_string(), |c| c.to_string());
                let _ = writeln!(
                    s,
                    "| {} | {} | {w} | {series} | {} | {} |",
                    e.name,
                    sw.machine,
                    show(peak(pubs)),
                    show(peak(sims))
                );
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ef(published: f64, simulated: f64) -> Effect {
        Effect {
            workload: "w".into(),
            series: "s".into(),
            variant: "v".into(),
            baseline: "b".into(),
            clients: 32,
            published,
            simulated: Some(simulated),
            simulated_error: 0.0,
            no_difference: false,
        }
    }

    #[test]
    fn effects_not_ratios_are_compared() {
        // A ratio of 1.04 is 4% of a ratio of 1.58, but its effect (+4%) is far from +58%.
        assert_eq!(ef(1.58, 1.04).meets(), Some(false));
        assert_eq!(ef(1.58, 1.04).verdict(), Some("no: same direction, outside tolerance"));
        // +58% is met from +43.5% to +72.5% (25% of the effect).
        assert_eq!(ef(1.58, 1.44).meets(), Some(true));
        assert_eq!(ef(1.58, 1.43).meets(), Some(false));
        assert_eq!(ef(1.58, 1.72).meets(), Some(true));
        assert_eq!(ef(1.58, 1.73).meets(), Some(false));
        // The opposite direction never meets.
        assert_eq!(ef(1.10, 0.95).verdict(), Some("no: opposite direction"));
        // A published +10% against a simulated +1%: no difference simulated.
        assert_eq!(ef(1.10, 1.01).verdict(), Some("no: no difference simulated"));
        // The same with a 6% error: the simulated band (12%) covers +10%, inconclusive.
        let mut wide = ef(1.10, 1.01);
        wide.simulated_error = 0.06;
        assert_eq!(wide.verdict(), Some("no: inconclusive, the simulated band covers the published effect"));
        assert_eq!(wide.meets(), Some(false));
        // A small published effect is judged against the band, not 25% of itself: +6% against
        // +8.5% differs by 2.5 points, within the 3-point band.
        assert_eq!(ef(1.06, 1.085).meets(), Some(true));
        assert_eq!(ef(1.06, 1.095).meets(), Some(false));
        assert!((ef(2.0, 1.5).effect_difference().unwrap() + 0.5).abs() < 1e-12);
    }

    #[test]
    fn no_difference_holds_only_within_the_stated_band() {
        // Published -0.6% is within the band: no difference; a simulated +2.9% is too.
        assert_eq!(ef(0.994, 1.029).verdict(), Some("yes: no difference on both"));
        // A simulated +3.5% is a difference where none was published.
        assert_eq!(ef(0.994, 1.035).verdict(), Some("no: a difference where none was published"));
        let mut e = ef(1.0, 1.04);
        e.no_difference = true;
        assert_eq!(e.meets(), Some(false));
        e.simulated = Some(0.975);
        assert_eq!(e.meets(), Some(true));
        // The runs' spread widens the simulated band: +4% with a 2.5% error is no difference.
        e.simulated = Some(1.04);
        e.simulated_error = 0.025;
        assert!((e.simulated_band() - 0.05).abs() < 1e-12);
        assert_eq!(e.meets(), Some(true));
    }

    #[test]
    fn the_error_comes_from_the_runs_spread() {
        let e = crate::experiments::find("pgxact").unwrap();
        let key = |v: &str| ("tpcb-like".to_string(), v.to_string(), 80usize);
        let mut medians = Medians::new();
        medians.insert(key("pgproc"), 1000.0);
        medians.insert(key("pgxact"), 1500.0);
        let mut ranges = Ranges::new();
        // Half ranges 2% and 1%: the ratio 1.5's error is 1.5 x 3% = 4.5 points.
        ranges.insert(key("pgproc"), RunRange { min: 980.0, max: 1020.0, runs: 3 });
        ranges.insert(key("pgxact"), RunRange { min: 1485.0, max: 1515.0, runs: 3 });
        let mut sw = Sweep {
            experiment: e,
            machine: "xeon-32".into(),
            medians,
            ranges,
            calibrated_to: None,
            costs: String::new(),
            command: String::new(),
        };
        let row = |sw: &Sweep| {
            effects(sw)
                .into_iter()
                .find(|f| f.variant == "pgxact" && f.clients == 80 && f.simulated.is_some())
                .unwrap()
        };
        assert!((row(&sw).simulated_error - 0.045).abs() < 1e-9, "{}", row(&sw).simulated_error);
        // One run has no spread.
        for r in sw.ranges.values_mut() {
            r.runs = 1;
        }
        assert_eq!(row(&sw).simulated_error, 0.0);
    }

    #[test]
    fn peaks_take_the_largest_and_ties_the_fewer_clients() {
        assert_eq!(peak([(1, 1.0), (8, 5.0), (32, 5.0), (80, 2.0)]), Some(8));
        assert_eq!(peak(std::iter::empty()), None);
    }

    #[test]
    fn effects_pair_published_points_with_the_sweep() {
        let e = crate::experiments::find("pgxact").unwrap();
        let mut medians = Medians::new();
        medians.insert(("tpcb-like".into(), "pgproc".into(), 80), 1000.0);
        medians.insert(("tpcb-like".into(), "pgxact".into(), 80), 1500.0);
        let sw = Sweep {
            experiment: e,
            machine: "xeon-32".into(),
            medians,
            ranges: Ranges::new(),
            calibrated_to: None,
            costs: String::new(),
            command: String::new(),
        };
        let fx = effects(&sw);
        let row = fx
            .iter()
            .find(|f| f.workload == "tpcb-like" && f.variant == "pgxact" && f.clients == 80)
            .unwrap();
        assert!((row.simulated.unwrap() - 1.5).abs() < 1e-12);
        assert!((row.published - 1.58).abs() < 0.01, "{}", row.published);
        assert!(fx.iter().any(|f| f.simulated.is_none()), "points the sweep did not run are listed as such");
    }
}
