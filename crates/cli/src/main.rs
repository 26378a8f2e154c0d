//! `lockstack`: run contention experiments on PostgreSQL's lock stack rebuilt in Rust.
//!
//! This binary only parses arguments, calls `lockstack-engine`, and formats the results; every
//! workload lives in the engine crate.

mod buffers_cmd;
mod lwlock_cmd;
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
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
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
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("lockstack: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}
