//! `lockstack`: run contention experiments on PostgreSQL's lock stack rebuilt in Rust.
//!
//! This binary only parses arguments, calls `lockstack-engine`, and formats the results; every
//! workload lives in the engine crate.

mod buffers_cmd;
mod experiment_cmd;
mod isolation_cmd;
mod locks_cmd;
mod lwlock_cmd;
mod pgbench_cmd;
mod snapshot_cmd;
mod wal_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// PostgreSQL's lock stack, rebuilt as Rust crates, under contention you can measure.
#[derive(Parser, Debug)]
#[command(name = "lockstack", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reader/writer contention on each LWLock implementation and on parking_lot/std RwLock.
    Lwlock(lwlock_cmd::LwLockArgs),
    /// GetSnapshotData against committers, per ProcArray layout (PGPROC, PGXACT, padded, dense).
    Snapshot(snapshot_cmd::SnapshotArgs),
    /// WAL insertion: one WALInsertLock (9.2) against N insertion locks (9.4+), with group commit.
    Wal(wal_cmd::WalArgs),
    /// Buffer pin contention and the visibility map (seed 004): hot-pin, scan, vm-delete.
    Buffers(buffers_cmd::BuffersArgs),
    /// Fast-path relation locks and on-demand VXID locks (seed 003): lock-manager traffic.
    Locks(locks_cmd::LocksArgs),
    /// Run isolation-tester specs (PostgreSQL's format) over the heavyweight lock manager.
    Isolation(isolation_cmd::IsolationArgs),
    /// pgbench's workloads on the lockstack transaction engine (work in progress: see docs).
    Pgbench(pgbench_cmd::PgbenchArgs),
    /// The five seed experiments, one command each (`experiment list` names them): tables,
    /// counters, the seed's figures, CSV/JSON/SVG.
    Experiment(experiment_cmd::ExperimentArgs),
}

/// A failure to report: one line on stderr, and the exit code.
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) code: u8,
}

impl Failure {
    /// Bad input: exit code 1.
    pub(crate) fn input(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }

    /// A failure after the run started (a check failed, output could not be written): exit 2.
    pub(crate) fn run(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 2 }
    }
}

/// `--duration` in seconds: above 0 and at most an hour.
pub(crate) fn duration_arg(secs: f64) -> Result<std::time::Duration, Failure> {
    if !secs.is_finite() || secs <= 0.0 || secs > 3600.0 {
        return Err(Failure::input(format!(
            "--duration must be above 0 and at most 3600 seconds, got {secs}"
        )));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Creates the `--json` file before the run, so that an unwritable path fails at once rather
/// than after minutes of measuring.
pub(crate) fn prepare_json(path: Option<&std::path::Path>) -> Result<(), Failure> {
    if let Some(path) = path {
        std::fs::File::create(path).map_err(|e| Failure::input(format!("--json {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Writes `value` as pretty JSON to the `--json` file, if one was given.
pub(crate) fn write_json<T: serde::Serialize>(
    path: Option<&std::path::Path>,
    value: &T,
) -> Result<(), Failure> {
    if let Some(path) = path {
        let text =
            serde_json::to_string_pretty(value).map_err(|e| Failure::run(format!("encoding JSON: {e}")))?;
        std::fs::write(path, text + "\n")
            .map_err(|e| Failure::run(format!("--json {}: {e}", path.display())))?;
    }
    Ok(())
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        // Spans (the engine's transaction phases) print when they close, with their time.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .init();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                };
            }
            let text = e.to_string();
            let first = text.lines().next().unwrap_or("invalid arguments").trim();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            eprintln!("lockstack: {first} (see 'lockstack --help')");
            return ExitCode::from(1);
        }
    };
    let result = match cli.command {
        Command::Lwlock(args) => lwlock_cmd::run(args),
        Command::Snapshot(args) => snapshot_cmd::run(args),
        Command::Wal(args) => wal_cmd::run(args),
        Command::Buffers(args) => buffers_cmd::run(args),
        Command::Locks(args) => locks_cmd::run(args),
        Command::Isolation(args) => isolation_cmd::run(args),
        Command::Pgbench(args) => pgbench_cmd::run(args),
        Command::Experiment(args) => experiment_cmd::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("lockstack: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
