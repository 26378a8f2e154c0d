//! Gunther's Universal Scalability Law fitted to an experiment's throughput curves.
//!
//! The law (N. J. Gunther, *Guerrilla Capacity Planning*, Springer 2007, ch. 4-5) models the
//! throughput of N clients as
//!
//! ```text
//! X(N) = lambda N / (1 + alpha (N - 1) + beta N (N - 1))
//! ```
//!
//! with `lambda` the throughput of one client without contention, `alpha` the contention
//! (serialisation: the share of the work that queues on a shared resource) and `beta` the
//! coherency delay (pairwise exchange of shared data, which makes throughput fall past the peak
//! `N* = sqrt((1 - alpha) / beta)`).
//!
//! [`fit`] finds `lambda, alpha, beta >= 0` by nonlinear least squares on absolute throughput.
//! For fixed `(alpha, beta)` the best `lambda` has a closed form (the model is linear in it), so
//! the search runs over `(alpha, beta)` only: a coarse logarithmic grid, then a compass search
//! (halving steps, bounded at 0) from the best grid point. The experiment driver fits every
//! (workload, variant) of an experiment's summary with it (its `fit_usl`), into [`UslRow`]s.

use serde::{Deserialize, Serialize};

/// Fewest distinct client counts [`fit`] accepts: three parameters need three points.
pub const MIN_POINTS: usize = 3;

/// Largest `alpha` searched: 10 (throughput at 2 clients a sixth of one client's; beyond it
/// the curve is flat at 1/alpha of lambda and alpha and beta cannot be told apart).
pub const MAX_ALPHA: f64 = 10.0;

/// Largest `beta` searched.
pub const MAX_BETA: f64 = 10.0;

/// The fitted parameters of one curve.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct UslFit {
    /// Throughput of one client without contention (the curve's unit: tps or ops/s).
    pub lambda: f64,
    /// Contention coefficient (dimensionless, >= 0).
    pub alpha: f64,
    /// Coherency coefficient (dimensionless, >= 0).
    pub beta: f64,
    /// Clients at peak throughput, `sqrt((1 - alpha) / beta)`; `None` when `beta = 0` (the
    /// curve never turns down). 1 when `alpha >= 1` (throughput never exceeds one client's).
    pub peak_clients: Option<f64>,
    /// Modelled throughput at the peak (`None` with `peak_clients`).
    pub peak_throughput: Option<f64>,
    /// Coefficient of determination of the fit on the points (1 = exact; may be negative for a
    /// fit worse than the mean).
    pub r_squared: f64,
}

impl UslFit {
    /// The model's throughput at `n` clients.
    pub fn throughput(&self, n: f64) -> f64 {
        model(self.lambda, self.alpha, self.beta, n)
    }
}

/// Why a curve has no fit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoFit {
    /// Fewer than [`MIN_POINTS`] distinct client counts.
    TooFewPoints(usize),
    /// A throughput that is zero, negative or not finite, at this client count.
    BadThroughput(usize),
}

impl std::fmt::Display for NoFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoFit::TooFewPoints(n) => write!(f, "no fit: {n} client count(s), need {MIN_POINTS}"),
            NoFit::BadThroughput(c) => write!(f, "no fit: no positive throughput at {c} clients"),
        }
    }
}

fn model(lambda: f64, alpha: f64, beta: f64, n: f64) -> f64 {
    lambda * n / (1.0 + alpha * (n - 1.0) + beta * n * (n - 1.0))
}

/// The least-squares `lambda` for fixed `(alpha, beta)` and the residual sum of squares.
fn best_lambda(points: &[(f64, f64)], alpha: f64, beta: f64) -> (f64, f64) {
    let (mut gx, mut gg) = (0.0, 0.0);
    for &(n, x) in points {
        let g = model(1.0, alpha, beta, n);
        gx += g * x;
        gg += g * g;
    }
    let lambda = if gg > 0.0 { (gx / gg).max(0.0) } else { 0.0 };
    let sse = points.iter().map(|&(n, x)| (x - model(lambda, alpha, beta, n)).powi(2)).sum();
    (lambda, sse)
}

/// Fits the law to `(clients, throughput)` points (any order; a client count given twice
/// keeps its first throughput).
///
/// # Errors
/// [`NoFit::TooFewPoints`] for fewer than [`MIN_POINTS`] distinct client counts (or a client
/// count of 0), [`NoFit::BadThroughput`] for a throughput that is not a positive finite number.
pub fn fit(points: &[(usize, f64)]) -> Result<UslFit, NoFit> {
    let mut pts: Vec<(f64, f64)> = Vec::new();
    for &(c, x) in points {
        if c == 0 {
            continue;
        }
        if !x.is_finite() || x <= 0.0 {
            return Err(NoFit::BadThroughput(c));
        }
        if !pts.iter().any(|p| p.0 == c as f64) {
            pts.push((c as f64, x));
        }
    }
    if pts.len() < MIN_POINTS {
        return Err(NoFit::TooFewPoints(pts.len()));
    }
    let sse = |a: f64, b: f64| best_lambda(&pts, a, b).1;
    // Coarse grid: 0 and decades from 1e-6 (alpha) / 1e-9 (beta), four steps per decade.
    let axis = |lo: f64, hi: f64| -> Vec<f64> {
        let mut v = vec![0.0];
        let (l0, l1) = (lo.log10(), hi.log10());
        let steps = ((l1 - l0) * 4.0).round() as i32;
        v.extend((0..=steps).map(|i| 10f64.powf(l0 + (l1 - l0) * f64::from(i) / f64::from(steps))));
        v
    };
    let (alphas, betas) = (axis(1e-6, MAX_ALPHA), axis(1e-9, MAX_BETA));
    let (mut a, mut b, mut best) = (0.0, 0.0, f64::INFINITY);
    for &ga in &alphas {
        for &gb in &betas {
            let s = sse(ga, gb);
            if s < best {
                (a, b, best) = (ga, gb, s);
            }
        }
    }
    // Compass search: steps relative to the point (with a floor), halved when no move helps.
    let (mut sa, mut sb) = ((a * 0.5).max(1e-4), (b * 0.5).max(1e-6));
    for _ in 0..20_000 {
        let mut moved = false;
        for (da, db) in
            [(sa, 0.0), (-sa, 0.0), (0.0, sb), (0.0, -sb), (sa, sb), (-sa, -sb), (sa, -sb), (-sa, sb)]
        {
            let (na, nb) = ((a + da).clamp(0.0, MAX_ALPHA), (b + db).clamp(0.0, MAX_BETA));
            let s = sse(na, nb);
            if s < best {
                (a, b, best, moved) = (na, nb, s, true);
                break;
            }
        }
        if !moved {
            sa *= 0.5;
            sb *= 0.5;
            if sa < 1e-13 && sb < 1e-15 {
                break;
            }
        }
    }
    let (lambda, sse) = best_lambda(&pts, a, b);
    let mean = pts.iter().map(|p| p.1).sum::<f64>() / pts.len() as f64;
    let sst: f64 = pts.iter().map(|p| (p.1 - mean).powi(2)).sum();
    let r_squared = if sst > 0.0 {
        1.0 - sse / sst
    } else if sse == 0.0 {
        1.0
    } else {
        0.0
    };
    let peak_clients = (b > 0.0).then(|| if a >= 1.0 { 1.0 } else { ((1.0 - a) / b).sqrt().max(1.0) });
    Ok(UslFit {
        lambda,
        alpha: a,
        beta: b,
        peak_clients,
        peak_throughput: peak_clients.map(|n| model(lambda, a, b, n)),
        r_squared,
    })
}

/// The fit of one (workload, variant) curve, or why there is none.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct UslRow {
    /// Workload name.
    pub workload: String,
    /// Variant name.
    pub variant: String,
    /// Client counts fitted (those with a summary row).
    pub clients: Vec<usize>,
    /// The fit, when there is one.
    pub fit: Option<UslFit>,
    /// Why there is no fit (`None` when there is one).
    pub no_fit: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-12)
    }

    #[test]
    fn recovers_known_parameters() {
        for &(lambda, alpha, beta) in
            &[(1000.0, 0.05, 0.001), (4400.0, 0.02, 0.0002), (250_000.0, 0.3, 0.0), (800.0, 0.0, 0.01)]
        {
            let pts: Vec<(usize, f64)> =
                [1, 2, 4, 8, 16, 32, 64].iter().map(|&n| (n, model(lambda, alpha, beta, n as f64))).collect();
            let f = fit(&pts).unwrap();
            assert!(close(f.lambda, lambda, 1e-4), "lambda {f:?}");
            assert!((f.alpha - alpha).abs() < 1e-5, "alpha {f:?}");
            assert!((f.beta - beta).abs() < 1e-7, "beta {f:?}");
            assert!(f.r_squared > 0.999_999, "{f:?}");
            match f.peak_clients {
                Some(n) => assert!(close(n, ((1.0 - alpha) / beta).sqrt(), 1e-3), "{f:?}"),
                None => assert_eq!(beta, 0.0),
            }
        }
    }

    #[test]
    fn noisy_points_fit_near_the_truth() {
        // +-2% alternating noise on a curve that peaks at sqrt(0.9 / 0.002) = 21.2 clients.
        let pts: Vec<(usize, f64)> = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]
            .iter()
            .enumerate()
            .map(|(i, &n)| (n, model(500.0, 0.1, 0.002, n as f64) * if i % 2 == 0 { 1.02 } else { 0.98 }))
            .collect();
        let f = fit(&pts).unwrap();
        assert!(close(f.lambda, 500.0, 0.05), "{f:?}");
        assert!((f.alpha - 0.1).abs() < 0.03, "{f:?}");
        assert!((f.beta - 0.002).abs() < 0.0005, "{f:?}");
        let peak = f.peak_clients.unwrap();
        assert!((18.0..25.0).contains(&peak), "{f:?}");
        // The least-squares optimum beats the true parameters on these points.
        let sse = |l: f64, a: f64, b: f64| {
            pts.iter().map(|&(n, x)| (x - model(l, a, b, n as f64)).powi(2)).sum::<f64>()
        };
        assert!(sse(f.lambda, f.alpha, f.beta) <= sse(500.0, 0.1, 0.002) * (1.0 + 1e-9));
    }

    #[test]
    fn linear_scaling_has_no_peak() {
        let pts: Vec<(usize, f64)> = [1, 2, 4, 8].iter().map(|&n| (n, 100.0 * n as f64)).collect();
        let f = fit(&pts).unwrap();
        assert_eq!((f.alpha, f.beta, f.peak_clients), (0.0, 0.0, None));
        assert!(close(f.lambda, 100.0, 1e-9));
    }

    #[test]
    fn degenerate_inputs_give_no_fit() {
        assert_eq!(fit(&[(1, 10.0), (2, 19.0)]), Err(NoFit::TooFewPoints(2)));
        assert_eq!(fit(&[(1, 10.0), (1, 11.0), (2, 19.0)]), Err(NoFit::TooFewPoints(2)));
        assert_eq!(fit(&[]), Err(NoFit::TooFewPoints(0)));
        assert_eq!(fit(&[(1, 10.0), (2, 0.0), (4, 30.0)]), Err(NoFit::BadThroughput(2)));
        assert_eq!(fit(&[(1, 10.0), (2, f64::NAN), (4, 30.0)]), Err(NoFit::BadThroughput(2)));
        assert!(NoFit::TooFewPoints(2).to_string().starts_with("no fit"));
    }
}
