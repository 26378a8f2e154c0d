//! `lockstack machine layout`: the layout experiment of the simulated caches. pgbench's
//! select-only workload on simulated machines under three layouts (PGPROC scanned in place as
//! 9.1 did, the dense PGXACT array of 9.2, and the latter with packed buffer descriptors as
//! before 9.5), each with the caches' capacities on and off (`--set sim.caches`), and the
//! private-cache misses per transaction by data structure. Every run is one child of this
//! binary (`lockstack pgbench -S ... --machine P --set ... --json FILE`), as `machine sweep`'s
//! points are, run one after another. docs/sim.md, "Caches", shows its output.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use lockstack_sim::MachineProfile;
use lockstack_workloads::experiments::driver::MAX_CLIENTS;

use crate::Failure;

/// Arguments of `lockstack machine layout`.
#[derive(Args, Debug)]
pub(crate) struct LayoutArgs {
    /// Machine profiles, comma-separated: built-in names or profile files.
    #[arg(long, default_value = "xeon-32,opteron-24", value_name = "NAME,...")]
    profiles: String,
    /// The release preset the layouts are set on (pg96: the PGXACT array and the atomic buffer
    /// header, the era when both layouts changed).
    #[arg(long, default_value = "pg96")]
    preset: String,
    /// pgbench clients (-c and -j), 1 to 1000.
    #[arg(short = 'c', long, default_value_t = 32, allow_negative_numbers = true)]
    clients: i64,
    /// Transactions per run in total, split over the clients (each runs ceil(N / clients)).
    #[arg(long, default_value_t = 16000, allow_negative_numbers = true, value_name = "N")]
    transactions: i64,
    /// pgbench scale factor (-s), loaded natively by each run.
    #[arg(short = 's', long, default_value_t = 1, allow_negative_numbers = true)]
    scale: i64,
    /// Directory for layout.csv and runs/ (each run's report and --json); created if missing.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// The layouts compared: a name and the `--set` assignments that make it.
const LAYOUTS: &[(&str, &[&str])] = &[
    ("pgproc", &["procarray.layout=pgproc", "bufmgr.desc_padding=line"]),
    ("pgxact", &["procarray.layout=pgxact", "bufmgr.desc_padding=line"]),
    ("pgxact+packed-desc", &["procarray.layout=pgxact", "bufmgr.desc_padding=none"]),
];

/// The structure groups the table shows, by the prefix of the structure's name (docs/sim.md,
/// "Named lines"): the snapshot scan's data and the buffer descriptors.
const GROUPS: &[(&str, &[&str])] = &[
    ("procarray", &["PGPROC ", "PgXact", "ProcGlobal ", "ProcArray "]),
    ("buffer descriptors", &["buffer # state", "BufferIO "]),
];

/// Per structure: (misses, capacity misses, transfers) in a run.
type Misses = BTreeMap<String, (u64, u64, u64)>;

/// One run's misses per transaction.
#[derive(Debug, Clone)]
struct RunResult {
    profile: String,
    layout: &'static str,
    caches: bool,
    tps: f64,
    transactions: f64,
    /// Per structure: (misses, capacity misses, transfers).
    by_structure: Misses,
}

impl RunResult {
    /// (misses, capacity misses) per transaction of the structures whose names start with one
    /// of `prefixes` (all of them for an empty list).
    fn per_txn(&self, prefixes: &[&str]) -> (f64, f64) {
        let (mut m, mut c) = (0, 0);
        for (name, &(misses, capacity, _)) in &self.by_structure {
            if prefixes.is_empty() || prefixes.iter().any(|p| name.starts_with(p)) {
                m += misses;
                c += capacity;
            }
        }
        (m as f64 / self.transactions, c as f64 / self.transactions)
    }
}

fn positive(flag: &str, v: i64, max: i64) -> Result<u64, Failure> {
    if v < 1 || v > max {
        return Err(Failure::input(format!("{flag} {v}: must be 1 to {max}")));
    }
    Ok(v as u64)
}

/// Why a run's `--json` could not be read.
#[derive(Debug, thiserror::Error)]
enum RunJsonError {
    /// The file cannot be read.
    #[error("reading {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    /// The file is not JSON.
    #[error("parsing {}: {source}", path.display())]
    Parse { path: PathBuf, source: serde_json::Error },
    /// A top-level number is missing.
    #[error("{}: no \"{key}\"", path.display())]
    NoField { path: PathBuf, key: &'static str },
    /// The run measured no transactions.
    #[error("{}: no transactions ran", path.display())]
    NoTransactions { path: PathBuf },
    /// The simulated machine's misses are missing.
    #[error("{}: no simulated_machine.misses_by_structure", path.display())]
    NoMisses { path: PathBuf },
}

/// Reads a run's `--json`: tps and the section's misses by structure.
fn read_run(json: &Path) -> Result<(f64, f64, Misses), RunJsonError> {
    let path = || json.to_path_buf();
    let text = std::fs::read_to_string(json).map_err(|source| RunJsonError::Read { path: path(), source })?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|source| RunJsonError::Parse { path: path(), source })?;
    let num = |key: &'static str| {
        v.get(key)
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| RunJsonError::NoField { path: path(), key })
    };
    let (transactions, elapsed) = (num("transactions")?, num("elapsed_s")?);
    if transactions <= 0.0 || elapsed <= 0.0 {
        return Err(RunJsonError::NoTransactions { path: path() });
    }
    let misses = v
        .get("simulated_machine")
        .and_then(|s| s.get("misses_by_structure"))
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| RunJsonError::NoMisses { path: path() })?;
    let get = |m: &serde_json::Value, k: &str| m.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
    let by = misses
        .iter()
        .map(|(name, m)| {
            let all = get(m, "transfers") + get(m, "llc_fills") + get(m, "memory_fills");
            (name.clone(), (all, get(m, "llc_fills") + get(m, "refills"), get(m, "transfers")))
        })
        .collect();
    Ok((transactions / elapsed, transactions, by))
}

/// Runs one (profile, layout, caches) point as a child and reads its result.
#[allow(clippy::too_many_arguments)]
fn run_one(
    exe: &Path,
    args: &LayoutArgs,
    profile: &str,
    layout: &'static str,
    sets: &[&str],
    caches: bool,
    per_client: u64,
    dir: &Path,
) -> Result<RunResult, Failure> {
    let stem = format!(
        "{}-{layout}-caches-{}",
        Path::new(profile).file_stem().and_then(|s| s.to_str()).unwrap_or("profile"),
        if caches { "on" } else { "off" }
    );
    let (json, txt, err) =
        (dir.join(format!("{stem}.json")), dir.join(format!("{stem}.txt")), dir.join(format!("{stem}.err")));
    let _ = std::fs::remove_file(&json);
    let file = |p: &Path| {
        std::fs::File::create(p).map_err(|e| Failure::output(format!("--out: {}: {e}", p.display())))
    };
    let c = args.clients.to_string();
    let mut cmd = crate::child::command(exe);
    cmd.args(["pgbench", "-s", &args.scale.to_string(), "-S", "-c", &c, "-j", &c]).args([
        "-t",
        &per_client.to_string(),
        "--machine",
        profile,
        "--preset",
        &args.preset,
    ]);
    for s in sets {
        cmd.args(["--set", s]);
    }
    cmd.args(["--set", if caches { "sim.caches=on" } else { "sim.caches=off" }]);
    let status = cmd
        .arg("--json")
        .arg(&json)
        .stdout(file(&txt)?)
        .stderr(file(&err)?)
        .status()
        .map_err(|e| Failure::run(format!("{stem}: could not start {}: {e}", exe.display())))?;
    if !status.success() {
        return Err(Failure::run(format!("run {stem} failed: {}", crate::child::last_line_of(&err))));
    }
    if std::fs::metadata(&err).is_ok_and(|m| m.len() == 0) {
        let _ = std::fs::remove_file(&err);
    }
    let (tps, transactions, by_structure) =
        read_run(&json).map_err(|e| Failure::run(format!("run {stem}: {e}")))?;
    Ok(RunResult { profile: profile.to_string(), layout, caches, tps, transactions, by_structure })
}

/// The table: one row per run, misses per transaction in all and per group, capacity misses in
/// parentheses.
fn table(results: &[RunResult]) -> String {
    let mut t = String::new();
    let _ = write!(
        t,
        "{:<12} {:<20} {:<6} {:>10} {:>18}",
        "profile", "layout", "caches", "tps", "all structures"
    );
    for (g, _) in GROUPS {
        let _ = write!(t, " {:>22}", g);
    }
    t.push('\n');
    for r in results {
        let cell = |(m, c): (f64, f64)| format!("{m:.2} ({c:.2})");
        let _ = write!(
            t,
            "{:<12} {:<20} {:<6} {:>10.0} {:>18}",
            r.profile,
            r.layout,
            if r.caches { "on" } else { "off" },
            r.tps,
            cell(r.per_txn(&[]))
        );
        for (_, prefixes) in GROUPS {
            let _ = write!(t, " {:>22}", cell(r.per_txn(prefixes)));
        }
        t.push('\n');
    }
    t
}

/// The CSV: one row per run and structure.
fn csv_text(results: &[RunResult]) -> String {
    let mut t = String::from(
        "profile,layout,caches,tps,structure,misses_per_txn,capacity_misses_per_txn,transfers_per_txn\n",
    );
    for r in results {
        for (name, &(m, c, x)) in &r.by_structure {
            let n = if name.contains([',', '"']) {
                format!("\"{}\"", name.replace('"', "\"\""))
            } else {
                name.clone()
            };
            let _ = writeln!(
                t,
                "{},{},{},{:.0},{n},{:.4},{:.4},{:.4}",
                r.profile,
                r.layout,
                if r.caches { "on" } else { "off" },
                r.tps,
                m as f64 / r.transactions,
                c as f64 / r.transactions,
                x as f64 / r.transactions
            );
        }
    }
    t
}

/// Runs the experiment.
///
/// # Errors
/// Bad input (an unknown profile, a count out of range, `--out` that is a file): exit 1. A run
/// that fails or leaves no readable `--json`: exit 2, naming it. A file that cannot be written:
/// exit 1.
pub(crate) fn run(args: LayoutArgs) -> Result<(), Failure> {
    let clients = positive("--clients", args.clients, MAX_CLIENTS as i64)?;
    let transactions = positive("--transactions", args.transactions, 100_000_000)?;
    positive("--scale", args.scale, 10_000)?;
    let profiles: Vec<&str> = args.profiles.split(',').map(str::trim).collect();
    for p in &profiles {
        MachineProfile::resolve(p).map_err(|e| Failure::input(format!("--profiles: {e}")))?;
    }
    lockstack_engine::engine::EngineConfig::preset(&args.preset, 1, 16)
        .map_err(|e| Failure::input(format!("--preset: {e}")))?;
    if args.out.exists() && !args.out.is_dir() {
        return Err(Failure::input(format!("--out {}: is not a directory", args.out.display())));
    }
    let dir = args.out.join("runs");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::input(format!("--out {}: {e}", args.out.display())))?;
    let exe = crate::child::this_binary("cannot find this binary to run the points")?;
    let per_client = transactions.div_ceil(clients);
    let mut results = Vec::new();
    for p in &profiles {
        for &(layout, sets) in LAYOUTS {
            for caches in [true, false] {
                results.push(run_one(&exe, &args, p, layout, sets, caches, per_client, &dir)?);
            }
        }
    }
    outln!(
        "pgbench -S -s {} -c {clients} -t {per_client} --preset {}: private-cache misses per transaction (capacity misses in parentheses: from the LLC or refilled from memory)",
        args.scale,
        args.preset
    );
    out!("{}", table(&results));
    let csv = args.out.join("layout.csv");
    std::fs::write(&csv, csv_text(&results))
        .map_err(|e| Failure::output(format!("{}: {e}", csv.display())))?;
    outln!("wrote {} and {}", csv.display(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_sum_their_structures_per_transaction() {
        let r = RunResult {
            profile: "p".into(),
            layout: "pgproc",
            caches: true,
            tps: 1.0,
            transactions: 10.0,
            by_structure: [
                ("PGPROC # xid + xmin".to_string(), (40, 10, 30)),
                ("PgXact #".to_string(), (20, 0, 20)),
                ("buffer # state".to_string(), (5, 5, 0)),
            ]
            .into_iter()
            .collect(),
        };
        assert_eq!(r.per_txn(GROUPS[0].1), (6.0, 1.0));
        assert_eq!(r.per_txn(GROUPS[1].1), (0.5, 0.5));
        assert_eq!(r.per_txn(&[]), (6.5, 1.5));
        let csv = csv_text(&[r]);
        assert!(
            csv.lines().nth(1).unwrap().starts_with("p,pgproc,on,1,PGPROC # xid + xmin,4.0000,1.0000,3.0000"),
            "{csv}"
        );
    }
}
