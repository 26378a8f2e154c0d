//! `lockstack`: run contention experiments on PostgreSQL's lock stack rebuilt in Rust.
//!
//! This binary only parses arguments, calls `lockstack-engine`, and formats the results; every
//! workload lives in the engine crate.

/// `println!` that never panics: output to a closed pipe (`lockstack ... | head`) is dropped
/// and the command runs on to its end (a `--data-dir` run still shuts its directory down,
/// `--json` is still written); see [`write_out`].
macro_rules! outln {
    () => {
        $crate::write_out(format_args!(""), true)
    };
    ($($t:tt)*) => {
        $crate::write_out(format_args!($($t)*), true)
    };
}

/// `print!` that never panics (see [`outln!`]).
macro_rules! out {
    ($($t:tt)*) => {
        $crate::write_out(format_args!($($t)*), false)
    };
}

/// `eprintln!` that never panics: a closed stderr drops the line.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

mod buffers_cmd;
mod child;
mod clients_arg;
mod experiment_cmd;
mod experiment_plot;
mod isolation_cmd;
mod knob_args;
mod locks_cmd;
mod lwlock_cmd;
mod machine_cmd;
mod machine_layout;
mod machine_new;
mod machine_sweep;
mod machine_validate;
mod pgbench_cmd;
mod progress;
mod sim_cmd;
mod snapshot_cmd;
mod wal_cmd;

use lockstack_common::sync::{AtomicBool, Ordering};
use std::io::Write as _;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// Set once a write to stdout failed: later output is dropped.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// The first stdout write error other than a closed pipe (a full disk, an I/O error), reported
/// at exit.
static STDOUT_ERROR: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Writes `args` (and a newline when `newline`) to stdout. A failed write marks stdout closed
/// instead of panicking as `println!` does, and the command runs on to its end. A closed pipe
/// (EPIPE when the reader went away, as with `| head`) is not an error: the command exits with
/// its own status, quietly, like tools that ignore SIGPIPE (ripgrep). Any other error (a full
/// disk) is remembered and ends the command with exit code 1 (see [`note_stdout_error`]).
pub(crate) fn write_out(args: std::fmt::Arguments<'_>, newline: bool) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let r = out.write_fmt(args).and_then(|()| if newline { out.write_all(b"\n") } else { Ok(()) });
    if let Err(e) = r {
        note_stdout_error(&e);
    }
}

/// Marks stdout closed after a failed write or flush and keeps the first error that is not a
/// closed pipe.
fn note_stdout_error(e: &std::io::Error) {
    STDOUT_CLOSED.store(true, Ordering::Relaxed);
    if e.kind() != std::io::ErrorKind::BrokenPipe {
        let _ = STDOUT_ERROR.set(e.to_string());
    }
}

/// PostgreSQL's lock stack, rebuilt as Rust crates, under contention you can measure.
#[derive(Parser, Debug)]
#[command(name = "lockstack", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    sim: sim_cmd::SimArgs,
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
    /// Run isolation-tester specs (PostgreSQL's format) over the engine: table, advisory and row locks.
    Isolation(isolation_cmd::IsolationArgs),
    /// pgbench's workloads (-S, -N, tpcb-like, custom scripts) through the whole lock stack, on the lockstack transaction engine.
    #[command(disable_help_flag = true)]
    Pgbench(pgbench_cmd::PgbenchArgs),
    /// The five seed experiments, one command each (`experiment list` names them): tables,
    /// counters, the seed's figures, CSV/JSON/SVG.
    Experiment(experiment_cmd::ExperimentArgs),
    /// The simulated machines' profiles: `machine list`, `machine show NAME|FILE`,
    /// `machine calibrate [--out FILE] [--repeats N]` (measure this host), `machine sweep --out DIR` (pgbench
    /// -S on every profile, preset and client count), `machine validate PROFILE [--json]`
    /// (microbenchmarks next to published figures).
    Machine(machine_cmd::MachineArgs),
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

    /// A failure after the run started (one of its checks failed): exit 2.
    pub(crate) fn run(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 2 }
    }

    /// The result could not be written (`--json`, the report on stdout): exit 1.
    pub(crate) fn output(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }
}

/// `message` (a library's validation error) with its configuration field names replaced by
/// the command-line flags that set them: `pairs` is (field, flag), e.g.
/// `("snapshot_threads", "--threads")`.
pub(crate) fn name_flags(message: &str, pairs: &[(&str, &str)]) -> String {
    let mut m = message.to_string();
    for (field, flag) in pairs {
        m = m.replace(field, flag);
    }
    m
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

/// How a `--json` result reaches its file.
enum JsonDest {
    /// Written into a temporary file next to this regular file (or where it will be) and
    /// renamed over it: the file is either the previous result or the whole new one.
    Replace(std::path::PathBuf),
    /// Written straight through the given path: a device (`/dev/stdout`), a FIFO or socket, or
    /// a symlink whose target does not exist yet (created through the link). Renaming over such
    /// a path would replace the device node or the link itself.
    Direct(std::path::PathBuf),
}

/// Where the `--json` result for `path` goes. A symlink to a regular file is followed, so the
/// target is replaced and the link kept.
fn json_dest(path: &std::path::Path) -> std::io::Result<JsonDest> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(JsonDest::Replace(std::fs::canonicalize(path)?)),
        Ok(_) => Ok(JsonDest::Direct(path.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if path.symlink_metadata().is_ok() {
                Ok(JsonDest::Direct(path.to_path_buf()))
            } else {
                Ok(JsonDest::Replace(path.to_path_buf()))
            }
        }
        Err(e) => Err(e),
    }
}

/// The temporary file a `--json` result is written to before it is renamed over `path`: in the
/// same directory (so the rename is atomic), hidden, and named after the process.
fn json_temp(path: &std::path::Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

/// Checks before the run that the `--json` file can be written, so that an unwritable path
/// fails at once rather than after minutes of measuring: creates (and removes) the temporary
/// file [`write_json`] will use next to a regular file. An existing file is not touched, so a
/// run that fails keeps the previous result; a device or FIFO is not opened before the end.
pub(crate) fn prepare_json(path: Option<&std::path::Path>) -> Result<(), Failure> {
    if let Some(path) = path {
        let bad = |e: &dyn std::fmt::Display| Failure::input(format!("--json {}: {e}", path.display()));
        if path.is_dir() {
            return Err(bad(&"is a directory"));
        }
        if let JsonDest::Replace(file) = json_dest(path).map_err(|e| bad(&e))? {
            let tmp = json_temp(&file);
            std::fs::File::create(&tmp).map_err(|e| bad(&e))?;
            let _ = std::fs::remove_file(&tmp);
        }
    }
    Ok(())
}

/// Writes `value` as pretty JSON to the `--json` file, if one was given (see [`JsonDest`]).
///
/// # Errors
/// Exit code 1 with the file and the OS error when it cannot be written.
pub(crate) fn write_json<T: serde::Serialize>(
    path: Option<&std::path::Path>,
    value: &T,
) -> Result<(), Failure> {
    if let Some(path) = path {
        let text =
            serde_json::to_string_pretty(value).map_err(|e| Failure::run(format!("encoding JSON: {e}")))?;
        let bad = |e: std::io::Error| Failure::output(format!("--json {}: {e}", path.display()));
        match json_dest(path).map_err(bad)? {
            JsonDest::Direct(p) => std::fs::write(p, text + "\n").map_err(bad)?,
            JsonDest::Replace(file) => {
                let tmp = json_temp(&file);
                let written = std::fs::write(&tmp, text + "\n").and_then(|()| std::fs::rename(&tmp, &file));
                if let Err(e) = written {
                    let _ = std::fs::remove_file(&tmp);
                    return Err(bad(e));
                }
            }
        }
    }
    Ok(())
}

/// clap's error as one line: its first line, with what follows a trailing colon (the missing
/// arguments of "the following required arguments were not provided:") joined onto it.
fn clap_error_line(text: &str) -> String {
    // An invalid value of a flag with a fixed set (`--costs foo`): the values clap lists on a
    // line of their own go on the one line.
    let possible = text
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("[possible values: ").and_then(|v| v.strip_suffix(']')));
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("invalid arguments");
    let first = first.strip_prefix("error: ").unwrap_or(first);
    if let Some(values) = possible {
        return format!("{first}; valid values: {values}");
    }
    if let Some(head) = first.strip_suffix(':') {
        let named: Vec<&str> = lines.take_while(|l| !l.starts_with("Usage:")).collect();
        if !named.is_empty() {
            return format!("{head}: {}", named.join(", "));
        }
    }
    first.to_string()
}

/// `--machine`: the ordinary binary re-runs the simulating one (and returns only on failure);
/// the simulating one sets the simulation up. Returns whether the command runs simulated.
fn start_simulation(
    sim: &sim_cmd::SimArgs,
    name: &str,
    args: &[String],
    costs: (sim_cmd::SimCosts, Option<String>),
) -> Result<bool, Failure> {
    sim_cmd::check_flags(sim, name)?;
    if sim.time_segments.is_some() {
        #[cfg(not(feature = "sim"))]
        return Err(sim_cmd::reexec());
        #[cfg(feature = "sim")]
        {
            sim_cmd::setup_timing()?;
            return Ok(false);
        }
    }
    if sim.machine.is_none() {
        return Ok(false);
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (args, costs);
        Err(sim_cmd::reexec())
    }
    #[cfg(feature = "sim")]
    {
        let _ = args;
        sim_cmd::setup(sim, costs.0, costs.1.as_deref())?;
        Ok(true)
    }
}

/// The simulated machine's section after a simulated command's report.
fn finish_simulation(sim: &sim_cmd::SimArgs, name: &str, args: &[String]) -> Result<(), Failure> {
    #[cfg(feature = "sim")]
    {
        if let Some(path) = &sim.time_segments {
            return sim_cmd::finish_timing(path);
        }
        sim_cmd::finish(sim, name, args)
    }
    #[cfg(not(feature = "sim"))]
    {
        let _ = (sim, name, args);
        Ok(())
    }
}

fn main() -> ExitCode {
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        // Colour codes only for a terminal (not in a redirected log).
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        // Spans (the engine's transaction phases) print when they close, with their time.
        .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
        .with_writer(std::io::stderr)
        .init();
    // Negative numbers are values, so `-c -1` reaches the range check that names the flag
    // instead of clap's "unexpected argument '-1'".
    let command = Cli::command().mut_subcommands(|sc| sc.mut_args(|a| a.allow_negative_numbers(true)));
    let parsed = command.try_get_matches().and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(c) => c,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            {
                if e.kind() == ErrorKind::DisplayHelp {
                    // `experiment NAME --help` names the thread NAME reruns, then the options.
                    let args: Vec<String> = std::env::args().skip(1).collect();
                    if args.first().is_some_and(|a| a == "experiment") {
                        experiment_cmd::print_experiment_help(&args[1..]);
                        let _ = std::io::stdout().flush();
                    }
                }
                let _ = e.print();
                return if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    ExitCode::from(1)
                } else {
                    ExitCode::SUCCESS
                };
            }
            // Point at the subcommand's help when the error is in its arguments.
            let sub = std::env::args()
                .nth(1)
                .filter(|a| Cli::command().get_subcommands().any(|s| s.get_name() == a.as_str()))
                .map(|s| format!(" {s}"))
                .unwrap_or_default();
            errln!(
                "lockstack: {} (see 'lockstack{sub} --help')",
                lockstack_workloads::input::one_line(&clap_error_line(&e.to_string()))
            );
            return ExitCode::from(1);
        }
    };
    if let Some(home) = &cli.sim.home {
        lockstack_workloads::experiments::user_dir::set(home.clone());
    }
    let name = match &cli.command {
        Command::Lwlock(_) => "lwlock",
        Command::Snapshot(_) => "snapshot",
        Command::Wal(_) => "wal",
        Command::Buffers(_) => "buffers",
        Command::Locks(_) => "locks",
        Command::Isolation(_) => "isolation",
        Command::Pgbench(_) => "pgbench",
        Command::Experiment(_) => "experiment",
        Command::Machine(_) => "machine",
    };
    let raw_args: Vec<String> = std::env::args().skip(1).collect();
    // Whose costs a simulated run carries by default, and the release whose PostgreSQL counts
    // apply: PostgreSQL's for the workloads that model PostgreSQL, the crates' own for the
    // micro-benchmarks of one crate.
    let costs = match &cli.command {
        Command::Pgbench(a) => (sim_cmd::SimCosts::Postgres, Some(a.preset.clone())),
        Command::Experiment(a) => (
            sim_cmd::SimCosts::Postgres,
            lockstack_workloads::experiments::find(&a.name).ok().map(|e| e.preset.to_string()),
        ),
        _ => (sim_cmd::SimCosts::Own, None),
    };
    let simulated = match start_simulation(&cli.sim, name, &raw_args, costs) {
        Ok(s) => s,
        Err(f) => {
            errln!("lockstack: {}", lockstack_workloads::input::one_line(&f.message));
            return ExitCode::from(f.code);
        }
    };
    // pgbench, buffers and experiment hand their measured phases over themselves (after
    // loading); the others are one measured phase from the start.
    use lockstack_common::sync::hook::measured_phase as phase;
    let sim_args = cli.sim.clone();
    let command = cli.command;
    // `--sim-layout-shift N`: the command's allocations start N x 16 bytes further on (kept
    // for the command's life); an experiment's points shift their own runs instead.
    let layout_shift =
        if simulated && !matches!(command, Command::Experiment(_)) { sim_args.sim_layout_shift } else { 0 };
    let dispatch = move || {
        let _pad = lockstack_workloads::layout::pad(layout_shift);
        match command {
            Command::Lwlock(args) => phase(|| lwlock_cmd::run(args)),
            Command::Snapshot(args) => phase(|| snapshot_cmd::run(args)),
            Command::Wal(args) => phase(|| wal_cmd::run(args)),
            Command::Buffers(args) => buffers_cmd::run(args),
            Command::Locks(args) => phase(|| locks_cmd::run(args)),
            Command::Isolation(args) => phase(|| isolation_cmd::run(args)),
            Command::Pgbench(args) => pgbench_cmd::run(args),
            Command::Experiment(args) => experiment_cmd::run(args, &sim_args),
            Command::Machine(args) => machine_cmd::run(args),
        }
    };
    // Simulated, the command runs on a thread of its own: the simulated machine maps every
    // address to a 64-byte line, and the main thread's stack starts at a randomized 16-byte
    // offset (ASLR), so which of its variables share a line would change from run to run; a
    // spawned thread's stack is a fresh page-aligned mapping, the same in every run.
    let result = if simulated {
        std::thread::Builder::new()
            .name("lockstack".into())
            .stack_size(8 << 20)
            .spawn(dispatch)
            .map_err(|e| Failure::run(format!("starting the simulated command's thread: {e}")))
            .and_then(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
    } else {
        dispatch()
    };
    let result = match result {
        Ok(()) if simulated || cli.sim.time_segments.is_some() => {
            finish_simulation(&cli.sim, name, &raw_args)
        }
        r => r,
    };
    if !STDOUT_CLOSED.load(Ordering::Relaxed)
        && let Err(e) = std::io::stdout().flush()
    {
        note_stdout_error(&e);
    }
    let result = match (result, STDOUT_ERROR.get()) {
        (Ok(()), Some(e)) => Err(Failure::output(format!("could not write the output: {e}"))),
        (r, _) => r,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            // One line whatever the message quotes (a flag value or file name with a newline).
            errln!("lockstack: {}", lockstack_workloads::input::one_line(&f.message));
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Valid command lines the flag fuzz target mutates.
    const SEEDS: [&[&str]; 4] = [
        &["lockstack", "pgbench", "-c", "4", "-j", "2", "-T", "2", "-b", "select-only@3", "--preset", "pg15"],
        &[
            "lockstack",
            "isolation",
            "a.spec",
            "--fast-path",
            "off",
            "--vxid",
            "eager",
            "--step-timeout",
            "0.5",
        ],
        &["lockstack", "pgbench", "-i", "-s", "2", "--data-dir", "d", "--set", "clog.buffers=64"],
        &["lockstack", "experiment", "fastpath", "-s", "1"],
    ];

    /// The flag fuzz target: mutated command lines (a byte or a multi-byte or
    /// control character inserted or replaced in one argument, an argument dropped or doubled)
    /// never panic clap's parsing, and every error the command prints is one line.
    #[test]
    fn mutated_flags_never_panic_and_errors_are_one_line() {
        let parse = |args: &[String]| {
            Cli::command()
                .mut_subcommands(|sc| sc.mut_args(|a| a.allow_negative_numbers(true)))
                .try_get_matches_from(args)
                .and_then(|m| Cli::from_arg_matches(&m))
        };
        for seed in SEEDS {
            let args: Vec<String> = seed.iter().map(|s| s.to_string()).collect();
            assert!(parse(&args).is_ok(), "{seed:?}");
        }
        let spice = ["é", "\n", "\r", "-", "=", "@", "0", "😀", ""];
        let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
        let cfg = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
        proptest!(cfg, |(seed in 0..SEEDS.len(), arg in 1usize..16, at in 0usize..16, kind in 0u8..4, s in 0..9usize)| {
            let mut args: Vec<String> = SEEDS[seed].iter().map(|s| s.to_string()).collect();
            let arg = arg % args.len();
            match kind {
                0 => {
                    let a = &mut args[arg];
                    let at = a.char_indices().map(|(i, _)| i).nth(at).unwrap_or(a.len());
                    a.insert_str(at, spice[s]);
                }
                1 => args[arg] = spice[s].to_string(),
                2 if arg > 0 => {
                    args.remove(arg);
                }
                _ => {
                    let dup = args[arg].clone();
                    args.insert(arg, dup);
                }
            }
            if let Err(e) = parse(&args) {
                let line = lockstack_workloads::input::one_line(&clap_error_line(&e.to_string()));
                prop_assert!(!line.contains('\n') && !line.contains('\r'), "{line:?}");
            }
        });
    }
}
