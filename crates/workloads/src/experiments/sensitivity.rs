//! `experiment NAME --machine P --sensitivity`: how far each simulated effect moves when one
//! assumed constant of the machine profile is halved or doubled.
//!
//! The sweep is run once as planned (the *base*) and once per perturbation: one constant of the
//! profile's `assumed` list at [`FACTORS`] times its value, every other constant unchanged. For
//! each effect (a variant's throughput over the baseline's at one client count, as
//! [`validation::effects`] defines them) this module reports the base ratio and its band, the
//! lowest and highest ratio over the base and every perturbation, and the constant whose
//! perturbations move it furthest; for each (workload, variant) curve the band of its peak (the
//! client count of the largest median throughput); and for each point the band of the median
//! throughput, which the throughput plot draws. Nothing is refitted: a stored calibration of
//! `sim.postgres_ipc` stays at its stored value under every perturbation.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::Experiment;
use super::validation::{self, Medians, Sweep};

/// The factors each constant is multiplied by, one perturbed sweep each.
pub const FACTORS: [f64; 2] = [0.5, 2.0];

/// One perturbed sweep: constant `key` at `factor` times its profile value `base`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Perturbation {
    /// The constant, `section.key` (`costs.owner_grace_ns`).
    pub key: String,
    /// The multiplier (one of [`FACTORS`]).
    pub factor: f64,
    /// The profile's value (after any `--machine-set`), in the constant's unit.
    pub base: f64,
    /// `base * factor`.
    pub value: f64,
}

impl Perturbation {
    /// The perturbations of `constants` (`(key, profile value)`): each at every factor of
    /// [`FACTORS`], in the order given.
    pub fn all(constants: &[(String, f64)]) -> Vec<Perturbation> {
        constants
            .iter()
            .flat_map(|(k, v)| {
                FACTORS.iter().map(move |&f| Perturbation {
                    key: k.clone(),
                    factor: f,
                    base: *v,
                    value: v * f,
                })
            })
            .collect()
    }

    /// `owner_grace_ns x0.5`: the key's last part and the factor.
    pub fn label(&self) -> String {
        let short = self.key.rsplit_once('.').map_or(self.key.as_str(), |(_, k)| k);
        format!("{short} x{}", self.factor)
    }

    /// The `--machine-set` entry that runs it (`costs.owner_grace_ns=10`).
    pub fn machine_set(&self) -> String {
        format!("{}={}", self.key, self.value)
    }
}

/// One effect's band.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EffectBand {
    /// Workload.
    pub workload: String,
    /// The published series (or the "no difference" note).
    pub series: String,
    /// The variant.
    pub variant: String,
    /// The baseline variant.
    pub baseline: String,
    /// Clients.
    pub clients: usize,
    /// The published ratio (1.0 for a seed that measured no difference).
    pub published: f64,
    /// The simulated ratio with the profile as it is.
    pub base: f64,
    /// The lowest ratio over the base and every perturbation.
    pub lo: f64,
    /// The perturbation that gave `lo` (`base` when none went lower).
    pub lo_by: String,
    /// The highest ratio over the base and every perturbation.
    pub hi: f64,
    /// The perturbation that gave `hi` (`base` when none went higher).
    pub hi_by: String,
    /// The constant whose perturbations moved the ratio furthest from `base` (`-` when none
    /// moved it).
    pub most_sensitive: String,
    /// That constant's largest move, `|ratio - base|`.
    pub most_sensitive_shift: f64,
}

/// One curve's peak band.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeakBand {
    /// Workload.
    pub workload: String,
    /// Variant.
    pub variant: String,
    /// The client count of the largest median with the profile as it is.
    pub base: usize,
    /// The fewest clients any perturbation peaks at (the base included).
    pub lo: usize,
    /// The most clients any perturbation peaks at (the base included).
    pub hi: usize,
    /// The perturbations whose peak differs from `base`, by label.
    pub moved_by: Vec<String>,
}

/// One point's median throughput band.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TpsBand {
    /// Workload.
    pub workload: String,
    /// Variant.
    pub variant: String,
    /// Clients.
    pub clients: usize,
    /// The median with the profile as it is, operations per (virtual) second.
    pub base: f64,
    /// The lowest median over the base and every perturbation.
    pub lo: f64,
    /// The highest median over the base and every perturbation.
    pub hi: f64,
}

/// The whole analysis of one sensitivity run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sensitivity {
    /// The machine profile.
    pub machine: String,
    /// The perturbations run, in order.
    pub perturbations: Vec<Perturbation>,
    /// Constants asked for but not perturbed, each with the reason
    /// (`costs.postgres_ipc: calibrated for every workload`).
    pub held: Vec<String>,
    /// Every effect the base sweep ran, in [`validation::effects`] order.
    pub effects: Vec<EffectBand>,
    /// Every (workload, variant) curve's peak.
    pub peaks: Vec<PeakBand>,
    /// Every point's median throughput.
    pub tps: Vec<TpsBand>,
}

fn sweep(e: &'static Experiment, machine: &str, medians: &Medians) -> Sweep {
    Sweep {
        experiment: e,
        machine: machine.to_string(),
        medians: medians.clone(),
        ranges: validation::Ranges::new(),
        calibrated_to: None,
        costs: String::new(),
        command: String::new(),
    }
}

impl Sensitivity {
    /// The analysis of `base` (the sweep's medians with the profile as it is) and `runs` (each
    /// perturbation's medians) of experiment `e` on `machine`; `held` as
    /// [`Sensitivity::held`].
    pub fn analyse(
        e: &'static Experiment,
        machine: &str,
        base: &Medians,
        runs: &[(Perturbation, Medians)],
        held: Vec<String>,
    ) -> Sensitivity {
        let base_effects = validation::effects(&sweep(e, machine, base));
        let run_effects: Vec<Vec<validation::Effect>> =
            runs.iter().map(|(_, m)| validation::effects(&sweep(e, machine, m))).collect();
        let mut effects = Vec::new();
        for b in &base_effects {
            let Some(b_ratio) = b.simulated else { continue };
            let mut band = EffectBand {
                workload: b.workload.clone(),
                series: b.series.clone(),
                variant: b.variant.clone(),
                baseline: b.baseline.clone(),
                clients: b.clients,
                published: b.published,
                base: b_ratio,
                lo: b_ratio,
                lo_by: "base".to_string(),
                hi: b_ratio,
                hi_by: "base".to_string(),
                most_sensitive: "-".to_string(),
                most_sensitive_shift: 0.0,
            };
            for ((p, _), effs) in runs.iter().zip(&run_effects) {
                let same = |x: &&validation::Effect| {
                    x.workload == b.workload
                        && x.series == b.series
                        && x.variant == b.variant
                        && x.clients == b.clients
                };
                let Some(r) = effs.iter().find(same).and_then(|x| x.simulated) else { continue };
                if r < band.lo {
                    band.lo = r;
                    band.lo_by = p.label();
                }
                if r > band.hi {
                    band.hi = r;
                    band.hi_by = p.label();
                }
                let shift = (r - b_ratio).abs();
                if shift > band.most_sensitive_shift {
                    band.most_sensitive_shift = shift;
                    band.most_sensitive = p.key.clone();
                }
            }
            effects.push(band);
        }
        let mut tps = Vec::new();
        for ((w, v, c), &m) in base {
            let (mut lo, mut hi) = (m, m);
            for (_, med) in runs {
                if let Some(&x) = med.get(&(w.clone(), v.clone(), *c)) {
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
            tps.push(TpsBand { workload: w.clone(), variant: v.clone(), clients: *c, base: m, lo, hi });
        }
        let mut curves: Vec<(String, String)> = base.keys().map(|(w, v, _)| (w.clone(), v.clone())).collect();
        curves.dedup();
        let peak_of = |m: &Medians, w: &str, v: &str| {
            validation::peak(
                m.iter().filter(|((mw, mv, _), _)| mw == w && mv == v).map(|((_, _, c), t)| (*c, *t)),
            )
        };
        let mut peaks = Vec::new();
        for (w, v) in curves {
            let Some(bp) = peak_of(base, &w, &v) else { continue };
            let mut band = PeakBand {
                workload: w.clone(),
                variant: v.clone(),
                base: bp,
                lo: bp,
                hi: bp,
                moved_by: Vec::new(),
            };
            for (p, m) in runs {
                let Some(pp) = peak_of(m, &w, &v) else { continue };
                band.lo = band.lo.min(pp);
                band.hi = band.hi.max(pp);
                if pp != bp {
                    band.moved_by.push(p.label());
                }
            }
            peaks.push(band);
        }
        Sensitivity {
            machine: machine.to_string(),
            perturbations: runs.iter().map(|(p, _)| p.clone()).collect(),
            held,
            effects,
            peaks,
            tps,
        }
    }

    /// The band of the median of (`workload`, `variant`, `clients`), when it was run.
    pub fn tps_band(&self, workload: &str, variant: &str, clients: usize) -> Option<&TpsBand> {
        self.tps.iter().find(|t| t.workload == workload && t.variant == variant && t.clients == clients)
    }

    /// The effects' bands as CSV: a header and one row per effect (`kind=effect`), then one
    /// per curve's peak (`kind=peak`; ratio columns hold client counts).
    pub fn csv(&self) -> String {
        let mut s = String::from(
            "kind,workload,series,variant,baseline,clients,published,base,lo,lo_by,hi,hi_by,most_sensitive,most_sensitive_shift\n",
        );
        let q = |x: &str| {
            if x.contains([',', '"', '\n']) {
                format!("\"{}\"", x.replace('"', "\"\""))
            } else {
                x.to_string()
            }
        };
        for e in &self.effects {
            let _ = writeln!(
                s,
                "effect,{},{},{},{},{},{:.4},{:.4},{:.4},{},{:.4},{},{},{:.4}",
                q(&e.workload),
                q(&e.series),
                q(&e.variant),
                q(&e.baseline),
                e.clients,
                e.published,
                e.base,
                e.lo,
                q(&e.lo_by),
                e.hi,
                q(&e.hi_by),
                q(&e.most_sensitive),
                e.most_sensitive_shift
            );
        }
        for p in &self.peaks {
            let _ = writeln!(
                s,
                "peak,{},,{},,,,{},{},,{},,{},",
                q(&p.workload),
                q(&p.variant),
                p.base,
                p.lo,
                p.hi,
                q(&p.moved_by.join("; "))
            );
        }
        s
    }

    /// Writes [`Sensitivity::csv`] to `path`.
    ///
    /// # Errors
    /// A [`WriteCsvError`]: the path and the I/O error, one line.
    pub fn write_csv(&self, path: &Path) -> Result<(), WriteCsvError> {
        std::fs::write(path, self.csv()).map_err(|source| WriteCsvError { path: path.to_path_buf(), source })
    }
}

/// Writing [`Sensitivity::csv`] failed; displays as `PATH: I/O error`.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct WriteCsvError {
    /// The file.
    pub path: std::path::PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::find;

    fn medians(e: &Experiment, scale: &dyn Fn(&str, usize) -> f64) -> Medians {
        let mut m = Medians::new();
        for &c in &[1usize, 24, 36] {
            for v in e.variants {
                m.insert(
                    ("select-only".to_string(), v.name.to_string(), c),
                    1000.0 * c as f64 * scale(v.name, c),
                );
            }
        }
        m
    }

    #[test]
    fn bands_name_the_perturbation_that_moved_each_ratio() {
        let e = find("fastpath").unwrap();
        let base_variant = e.baseline().name;
        let base = medians(e, &|_, _| 1.0);
        let ps =
            Perturbation::all(&[("costs.owner_grace_ns".into(), 20.0), ("costs.atomic_rmw_ns".into(), 9.5)]);
        assert_eq!(ps.len(), 4);
        assert_eq!(ps[1].value, 40.0);
        assert_eq!(ps[1].machine_set(), "costs.owner_grace_ns=40");
        // owner_grace x2 halves the baseline at 36 clients (every variant's ratio doubles and the
        // baseline now peaks at 24); the others change nothing.
        let runs: Vec<(Perturbation, Medians)> = ps
            .iter()
            .map(|p| {
                let halve = p.key == "costs.owner_grace_ns" && p.factor == 2.0;
                let m = medians(e, &|v, c| if halve && c == 36 && v == base_variant { 0.5 } else { 1.0 });
                (p.clone(), m)
            })
            .collect();
        let s = Sensitivity::analyse(e, "opteron-24", &base, &runs, vec![]);
        // Every published effect of fastpath on opteron-24 is at 36 clients.
        assert!(!s.effects.is_empty());
        for b in &s.effects {
            assert_eq!(b.clients, 36);
            assert_eq!((b.base, b.lo, b.hi), (1.0, 1.0, 2.0));
            assert_eq!(b.hi_by, "owner_grace_ns x2");
            assert_eq!(b.lo_by, "base");
            assert_eq!(b.most_sensitive, "costs.owner_grace_ns");
        }
        let p = s.peaks.iter().find(|p| p.variant == base_variant).unwrap();
        assert_eq!((p.base, p.lo, p.hi), (36, 24, 36));
        assert_eq!(p.moved_by, vec!["owner_grace_ns x2".to_string()]);
        let t = s.tps_band("select-only", base_variant, 36).unwrap();
        assert_eq!((t.lo, t.hi), (18000.0, 36000.0));
        assert_eq!(s.tps.len(), 3 * e.variants.len());
        let csv = s.csv();
        assert_eq!(csv.lines().count(), 1 + s.effects.len() + s.peaks.len());
        assert!(csv.lines().skip(1).all(|l| l.starts_with("effect,") || l.starts_with("peak,")));
    }
}
