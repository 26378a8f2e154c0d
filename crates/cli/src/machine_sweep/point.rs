//! One point of `lockstack machine sweep` and its result, read back from the `--json` file its
//! child wrote: the figures the sweep's CSV, table and plot show, and [`PointError`] when the
//! file cannot give them. Takes no lock.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One point of the sweep.
#[derive(Debug, Clone)]
pub(super) struct Point {
    /// The profile's name (the CSV's and the plot's).
    pub(super) profile: String,
    /// The release preset.
    pub(super) preset: String,
    /// pgbench's -c (and -j).
    pub(super) clients: usize,
    /// pgbench's -t: transactions per client.
    pub(super) per_client: u64,
}

impl Point {
    /// The point's file stem in `DIR/points/`.
    pub(super) fn stem(&self) -> String {
        format!("{}-{}-c{}", self.profile, self.preset, self.clients)
    }

    /// How error messages and the progress bar name the point.
    pub(super) fn label(&self) -> String {
        format!("{} {} -c {}", self.profile, self.preset, self.clients)
    }
}

/// What one point's `--json` says (pgbench's result and its `simulated_machine` section).
#[derive(Debug, Clone)]
pub(super) struct PointResult {
    pub(super) point: Point,
    /// Transactions processed.
    pub(super) transactions: u64,
    /// Transactions per virtual second (pgbench's tps without initial connection time).
    pub(super) tps: f64,
    /// Virtual seconds the simulated machine ran (all measured phases).
    pub(super) virtual_s: f64,
    /// Host seconds the simulation took (not deterministic).
    pub(super) host_s: f64,
    /// Simulated events.
    pub(super) events: u64,
    /// Core-to-core cache-line transfers.
    pub(super) transfers: u64,
    /// The wait class with the largest share of the tasks' virtual time, "unclassified"
    /// (pgbench's start and stop gates, joins) left out; "none" when nothing waited.
    pub(super) top_wait: String,
    /// Its share, 0 to 1.
    pub(super) top_wait_share: f64,
    /// The "unclassified" share, 0 to 1.
    pub(super) unclassified_share: f64,
    /// The line with the most core-to-core transfers ("none" if no line moved).
    pub(super) hot_line: String,
    /// Its transfers.
    pub(super) hot_line_transfers: u64,
}

/// Why a finished point's `--json` file gives no result; each names the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PointError {
    /// The file cannot be read.
    #[error("reading {}: {source}", path.display())]
    Read {
        /// The point's `--json` file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not JSON.
    #[error("parsing {}: {source}", path.display())]
    Parse {
        /// The point's `--json` file.
        path: PathBuf,
        /// The parser's error.
        source: serde_json::Error,
    },
    /// The document has no `simulated_machine` object (the child ran natively).
    #[error("{}: no simulated_machine section", path.display())]
    NoSimulatedMachine {
        /// The point's `--json` file.
        path: PathBuf,
    },
    /// A number the sweep needs is missing or not a number.
    #[error("{}: no number \"{key}\"", path.display())]
    NoNumber {
        /// The point's `--json` file.
        path: PathBuf,
        /// The key.
        key: &'static str,
    },
    /// `elapsed_s` is not positive, so no tps can be had.
    #[error("{}: elapsed_s is {elapsed}", path.display())]
    Elapsed {
        /// The point's `--json` file.
        path: PathBuf,
        /// The value found.
        elapsed: f64,
    },
}

/// Reads a finished point's `--json`.
///
/// # Errors
/// A [`PointError`] naming `json`.
pub(super) fn read_result(point: &Point, json: &Path) -> Result<PointResult, PointError> {
    let path = || json.to_path_buf();
    let text = std::fs::read_to_string(json).map_err(|source| PointError::Read { path: path(), source })?;
    let v: Value =
        serde_json::from_str(&text).map_err(|source| PointError::Parse { path: path(), source })?;
    let num = |v: &Value, key: &'static str| {
        v.get(key).and_then(Value::as_f64).ok_or_else(|| PointError::NoNumber { path: path(), key })
    };
    let sim = v
        .get("simulated_machine")
        .filter(|s| s.is_object())
        .ok_or_else(|| PointError::NoSimulatedMachine { path: path() })?;
    let transactions = num(&v, "transactions")?;
    let elapsed = num(&v, "elapsed_s")?;
    if elapsed <= 0.0 {
        return Err(PointError::Elapsed { path: path(), elapsed });
    }
    let waits = sim.get("waits").and_then(|w| w.as_array()).cloned().unwrap_or_default();
    let share_of = |w: &Value| w.get("share").and_then(Value::as_f64).unwrap_or(0.0);
    let class_of = |w: &Value| w.get("class").and_then(|c| c.as_str()).unwrap_or("").to_string();
    let unclassified = waits.iter().filter(|w| class_of(w) == "unclassified").map(share_of).sum();
    let top = waits
        .iter()
        .filter(|w| class_of(w) != "unclassified" && share_of(w) > 0.0)
        .max_by(|a, b| share_of(a).total_cmp(&share_of(b)));
    let hot = sim
        .get("hot_lines")
        .and_then(|h| h.as_array())
        .and_then(|h| h.iter().max_by_key(|l| l.get("transfers").and_then(Value::as_u64).unwrap_or(0)));
    let hot_transfers = hot.and_then(|l| l.get("transfers")).and_then(Value::as_u64).unwrap_or(0);
    Ok(PointResult {
        point: point.clone(),
        transactions: transactions as u64,
        tps: transactions / elapsed,
        virtual_s: num(sim, "virtual_seconds")?,
        host_s: num(sim, "host_seconds")?,
        events: num(sim, "events")? as u64,
        transfers: num(sim, "transfers")? as u64,
        top_wait: top.map_or_else(|| "none".to_string(), class_of),
        top_wait_share: top.map_or(0.0, share_of),
        unclassified_share: unclassified,
        hot_line: match hot {
            Some(l) if hot_transfers > 0 => l.get("name").and_then(|n| n.as_str()).unwrap_or("?").to_string(),
            _ => "none".to_string(),
        },
        hot_line_transfers: hot_transfers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point() -> Point {
        Point { profile: "host".into(), preset: "pg17".into(), clients: 2, per_client: 5 }
    }

    /// Writes `text` as a point's JSON and reads it back.
    fn read(text: &str) -> Result<PointResult, PointError> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.json");
        std::fs::write(&p, text).unwrap();
        read_result(&point(), &p)
    }

    #[test]
    fn a_result_is_read_and_each_fault_names_the_file() {
        let good = r#"{"transactions": 10, "elapsed_s": 0.5, "simulated_machine": {
            "virtual_seconds": 0.5, "host_seconds": 1.0, "events": 7, "transfers": 3,
            "waits": [{"class": "unclassified", "share": 0.25}, {"class": "LockManager", "share": 0.5}],
            "hot_lines": [{"name": "a", "transfers": 1}, {"name": "b", "transfers": 2}]}}"#;
        let r = read(good).map_err(|e| e.to_string()).unwrap();
        assert_eq!((r.transactions, r.tps, r.events, r.transfers), (10, 20.0, 7, 3));
        assert_eq!((r.top_wait.as_str(), r.top_wait_share, r.unclassified_share), ("LockManager", 0.5, 0.25));
        assert_eq!((r.hot_line.as_str(), r.hot_line_transfers), ("b", 2));
        for (text, says) in [
            ("{", "parsing "),
            (r#"{"transactions": 1, "elapsed_s": 1}"#, "no simulated_machine section"),
            (r#"{"elapsed_s": 1, "simulated_machine": {}}"#, "no number \"transactions\""),
            (r#"{"transactions": 1, "elapsed_s": 0, "simulated_machine": {}}"#, "elapsed_s is 0"),
        ] {
            let e = read(text).unwrap_err().to_string();
            assert!(e.contains("p.json") && e.contains(says), "{text}: {e}");
        }
        let missing = read_result(&point(), Path::new("/nonexistent/p.json")).unwrap_err();
        assert!(matches!(missing, PointError::Read { .. }), "{missing}");
        assert!(missing.to_string().starts_with("reading /nonexistent/p.json: "), "{missing}");
    }
}
