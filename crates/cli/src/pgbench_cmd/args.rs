//! `lockstack pgbench`'s command line ([`PgbenchArgs`]): pgbench 15's options and this
//! tool's own. Touches no lock.

use clap::Args;

/// Arguments of `lockstack pgbench` (pgbench 15's names where they exist).
#[derive(Args, Debug)]
pub(crate) struct PgbenchArgs {
    /// Print help (`--help` only: `-h` is pgbench's host option).
    #[arg(long = "help", action = clap::ArgAction::Help)]
    pub(crate) help: Option<bool>,
    /// pgbench's `-h HOST`: refused with a message, since lockstack runs the engine in-process
    /// and has no server to connect to (clap would otherwise print the help and exit 0).
    #[arg(short = 'h', long = "host", value_name = "HOST", hide = true)]
    pub(crate) host: Option<String>,
    /// Initialize only: create and load the tables (into --data-dir, or in memory to time the
    /// load) and stop.
    #[arg(short = 'i', long = "initialize")]
    pub(crate) initialize: bool,
    /// Keep relations, CLOG and WAL in files under DIR: -i creates and loads it; a run opens
    /// it (scale from the control file) and shuts it down cleanly at the end.
    #[arg(long = "data-dir", value_name = "DIR")]
    pub(crate) data_dir: Option<std::path::PathBuf>,
    /// Instead of loading the tables, copy them into memory from DIR, a data directory fresh
    /// from `lockstack pgbench -i -s N --data-dir DIR` (no transaction run on it since), and
    /// read every page into shared buffers: the run then starts as after an in-memory load
    /// (scale from DIR's control file) and DIR is only read, by any number of runs at once.
    /// `machine sweep` loads a scale once this way.
    #[arg(long = "load-from", value_name = "DIR", conflicts_with_all = ["data_dir", "initialize", "open_damaged"])]
    pub(crate) load_from: Option<std::path::PathBuf>,
    /// Under --machine: apply the stored calibration of seed experiment EXPERIMENT (`lockstack
    /// experiment show EXPERIMENT` lists them) for this machine and the run's one built-in
    /// script, i.e. its fitted `sim.postgres_ipc`; the report names the figure it was fitted
    /// to. Without it a simulated run is predicted from the profile's `postgres_ipc`.
    #[arg(long = "calibration", value_name = "EXPERIMENT")]
    pub(crate) calibration: Option<String>,
    /// Open a --data-dir that a failed consistency check marked damaged, to look at what the
    /// failed run left; the mark stays until -i reinitializes the directory.
    #[arg(long = "open-damaged")]
    pub(crate) open_damaged: bool,
    /// Also check that the account balance total is unchanged (transfer scripts).
    #[arg(long = "check-total")]
    pub(crate) check_total: bool,
    /// Scale factor.
    #[arg(short = 's', long = "scale", default_value_t = 1)]
    pub(crate) scale: i64,
    /// Heap fillfactor for the tables (10-100).
    #[arg(short = 'F', long = "fillfactor", default_value_t = 100)]
    pub(crate) fillfactor: i64,
    /// Number of concurrent clients.
    #[arg(short = 'c', long = "client", default_value_t = 1)]
    pub(crate) clients: i64,
    /// Number of threads (capped at the number of clients; each client runs on its own
    /// thread, see docs).
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    pub(crate) jobs: i64,
    /// Duration of the run in whole seconds, 1 to 3600 (under --machine, virtual seconds, which
    /// may be a fraction from 0.001).
    #[arg(short = 'T', long = "time", value_name = "SECONDS", allow_negative_numbers = true)]
    pub(crate) time: Option<String>,
    /// Transactions per client (default 10 when -T is not given).
    #[arg(short = 't', long = "transactions")]
    pub(crate) transactions: Option<i64>,
    /// The select-only built-in (-b select-only).
    #[arg(short = 'S', long = "select-only")]
    pub(crate) select_only: bool,
    /// The simple-update built-in (-b simple-update).
    #[arg(short = 'N', long = "skip-some-updates")]
    pub(crate) skip_some_updates: bool,
    /// Built-in script NAME[@WEIGHT] (tpcb-like, simple-update, select-only; prefixes allowed).
    #[arg(short = 'b', long = "builtin")]
    pub(crate) builtin: Vec<String>,
    /// Script file FILE[@WEIGHT] (`-` reads it from standard input).
    #[arg(short = 'f', long = "file")]
    pub(crate) file: Vec<String>,
    /// Query mode: simple, extended or prepared (the default here; pgbench's own default is
    /// simple). Statements always run as prepared plans here; the mode is recorded in the
    /// report and, under --machine with PostgreSQL's costs, selects PostgreSQL's measured cost
    /// of each statement (simple and extended parse and plan every statement): to compare with
    /// a pgbench run that did not give -M, pass -M simple.
    #[arg(short = 'M', long = "protocol")]
    pub(crate) protocol: Option<String>,
    /// Progress report every SEC seconds (stderr).
    #[arg(short = 'P', long = "progress")]
    pub(crate) progress: Option<i64>,
    /// Per-statement latencies.
    #[arg(short = 'r', long = "report-per-command")]
    pub(crate) report_per_command: bool,
    /// Seed of the clients' random generators: an unsigned integer, `time` (the current time,
    /// pgbench's default) or `rand` (from the operating system). The default here is 0, so that
    /// two runs with the same options draw the same keys.
    #[arg(long = "random-seed", value_parser = parse_seed)]
    pub(crate) random_seed: Option<u64>,
    /// Do not vacuum before the run (accepted for compatibility: the engine has no VACUUM; an
    /// in-memory run starts from a fresh load, a --data-dir run from the directory as the last
    /// run left it).
    #[arg(short = 'n', long = "no-vacuum")]
    pub(crate) no_vacuum: bool,
    /// Release preset: pg91, pg92, pg96, pg14, pg17.
    #[arg(long, default_value = "pg17")]
    pub(crate) preset: String,
    /// Override one design choice of the preset: crate.knob=value (repeatable; `--set help`
    /// lists every knob).
    #[arg(long = "set", value_name = "CRATE.KNOB=VALUE")]
    pub(crate) set: Vec<String>,
    /// Wait-event sampling rate in Hz (0 = off): 100 natively; under --machine 10000 per
    /// virtual second (a simulated run lasts milliseconds of virtual time, and 100 Hz would
    /// take a handful of rounds).
    #[arg(long)]
    pub(crate) wait_sampling_hz: Option<u32>,
    /// Write the whole result as JSON to this file; every counter of the run is under
    /// `lock_stack.counters` by path (`wal.flushes`, `lmgr.waits`, `lwlock.ProcArray.ex_acquire`;
    /// docs/engine.md lists the sections).
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<std::path::PathBuf>,
}

/// `-M`'s value, `prepared` when not given.
pub(crate) fn protocol(args: &PgbenchArgs) -> &str {
    args.protocol.as_deref().unwrap_or("prepared")
}

/// Why a `--random-seed` value was refused; the messages are pgbench 15's.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SeedError {
    /// `rand`, but the system's random source could not be read.
    #[error("cannot read a random seed from /dev/urandom: {0}")]
    Urandom(std::io::Error),
    /// Neither `time`, `rand` nor an unsigned decimal integer.
    #[error("unrecognized random seed option \"{0}\": expecting an unsigned integer, \"time\" or \"rand\"")]
    Unrecognized(String),
}

/// `--random-seed` as pgbench 15 takes it (`set_random_seed`): `time`, `rand` or an unsigned
/// decimal integer.
fn parse_seed(s: &str) -> Result<u64, SeedError> {
    match s {
        "time" => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)),
        "rand" => {
            let mut b = [0u8; 8];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
                .map_err(SeedError::Urandom)?;
            Ok(u64::from_le_bytes(b))
        }
        _ => s.parse().map_err(|_| SeedError::Unrecognized(s.to_string())),
    }
}
