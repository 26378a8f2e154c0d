//! `lockstack pgbench`: pgbench's options and report over the lockstack engine.

use clap::Args;
use lockstack_common::backend::WaitSampler;
use lockstack_engine::datadir;
use lockstack_engine::engine::Engine;
use lockstack_engine::engine::{EngineConfig, EngineError};
use lockstack_workloads::input::{one_line, read_limited};
use lockstack_workloads::pgbench::runner::{self, Check, PgbenchConfig, PgbenchResult, Progress, RunOptions};
use lockstack_workloads::pgbench::script::{Builtin, MAX_SCRIPT_BYTES, Script, parse_script};
use lockstack_workloads::report::REPORT_SECTIONS;
use lockstack_workloads::settings::{self, RunConfig};

use crate::Failure;

/// Arguments of `lockstack pgbench` (pgbench 15's names where they exist).
#[derive(Args, Debug)]
pub(crate) struct PgbenchArgs {
    /// Print help (`--help` only: `-h` is pgbench's host option).
    #[arg(long = "help", action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// pgbench's `-h HOST`: refused with a message, since lockstack runs the engine in-process
    /// and has no server to connect to (clap would otherwise print the help and exit 0).
    #[arg(short = 'h', long = "host", value_name = "HOST", hide = true)]
    host: Option<String>,
    /// Initialize only: create and load the tables (into --data-dir, or in memory to time the
    /// load) and stop.
    #[arg(short = 'i', long = "initialize")]
    initialize: bool,
    /// Keep relations, CLOG and WAL in files under DIR: -i creates and loads it; a run opens
    /// it (scale from the control file) and shuts it down cleanly at the end.
    #[arg(long = "data-dir", value_name = "DIR")]
    data_dir: Option<std::path::PathBuf>,
    /// Open a --data-dir that a failed consistency check marked damaged, to look at what the
    /// failed run left; the mark stays until -i reinitializes the directory.
    #[arg(long = "open-damaged")]
    open_damaged: bool,
    /// Also check that the account balance total is unchanged (transfer scripts).
    #[arg(long = "check-total")]
    check_total: bool,
    /// Scale factor.
    #[arg(short = 's', long = "scale", default_value_t = 1)]
    scale: i64,
    /// Heap fillfactor for the tables (10-100).
    #[arg(short = 'F', long = "fillfactor", default_value_t = 100)]
    fillfactor: i64,
    /// Number of concurrent clients.
    #[arg(short = 'c', long = "client", default_value_t = 1)]
    clients: i64,
    /// Number of threads (capped at the number of clients; each client runs on its own
    /// thread, see docs).
    #[arg(short = 'j', long = "jobs", default_value_t = 1)]
    jobs: i64,
    /// Duration of the run in whole seconds, 1 to 3600 (under --machine, virtual seconds, which
    /// may be a fraction from 0.001).
    #[arg(short = 'T', long = "time", value_name = "SECONDS", allow_negative_numbers = true)]
    time: Option<String>,
    /// Transactions per client (default 10 when -T is not given).
    #[arg(short = 't', long = "transactions")]
    transactions: Option<i64>,
    /// The select-only built-in (-b select-only).
    #[arg(short = 'S', long = "select-only")]
    select_only: bool,
    /// The simple-update built-in (-b simple-update).
    #[arg(short = 'N', long = "skip-some-updates")]
    skip_some_updates: bool,
    /// Built-in script NAME[@WEIGHT] (tpcb-like, simple-update, select-only; prefixes allowed).
    #[arg(short = 'b', long = "builtin")]
    builtin: Vec<String>,
    /// Script file FILE[@WEIGHT] (`-` reads it from standard input).
    #[arg(short = 'f', long = "file")]
    file: Vec<String>,
    /// Query mode: simple, extended or prepared (the default). Statements always run as
    /// prepared plans here; the mode is recorded in the report and, under --machine with
    /// PostgreSQL's costs, selects PostgreSQL's measured cost of each statement (simple and
    /// extended parse and plan every statement).
    #[arg(short = 'M', long = "protocol")]
    protocol: Option<String>,
    /// Progress report every SEC seconds (stderr).
    #[arg(short = 'P', long = "progress")]
    progress: Option<i64>,
    /// Per-statement latencies.
    #[arg(short = 'r', long = "report-per-command")]
    report_per_command: bool,
    /// Seed of the clients' random generators: an unsigned integer, `time` (the current time,
    /// pgbench's default) or `rand` (from the operating system). The default here is 0, so that
    /// two runs with the same options draw the same keys.
    #[arg(long = "random-seed", value_parser = parse_seed)]
    random_seed: Option<u64>,
    /// Do not vacuum before the run (accepted for compatibility: the engine has no VACUUM; an
    /// in-memory run starts from a fresh load, a --data-dir run from the directory as the last
    /// run left it).
    #[arg(short = 'n', long = "no-vacuum")]
    no_vacuum: bool,
    /// Release preset: pg91, pg92, pg96, pg14, pg17.
    #[arg(long, default_value = "pg17")]
    pub(crate) preset: String,
    /// Override one design choice of the preset: crate.knob=value (repeatable; `--set help`
    /// lists every knob).
    #[arg(long = "set", value_name = "CRATE.KNOB=VALUE")]
    set: Vec<String>,
    /// Wait-event sampling rate in Hz (0 = off): 100 natively; under --machine 10000 per
    /// virtual second (a simulated run lasts milliseconds of virtual time, and 100 Hz would
    /// take a handful of rounds).
    #[arg(long)]
    wait_sampling_hz: Option<u32>,
    /// Write the whole result as JSON to this file; every counter of the run is under
    /// `lock_stack.counters` by path (`wal.flushes`, `lmgr.waits`, `lwlock.ProcArray.ex_acquire`;
    /// docs/engine.md lists the sections).
    #[arg(long, value_name = "FILE")]
    json: Option<std::path::PathBuf>,
}

/// `-T/--time` in seconds: a whole number from 1 to 3600, as pgbench 15 reads it (an int of at
/// least 1); under `--machine`, where -T is virtual seconds and short runs are the rule, also a
/// fraction, from 0.001 s.
fn time_arg(raw: &str) -> Result<std::time::Duration, Failure> {
    time_arg_for(raw, crate::sim_cmd::simulated())
}

/// [`time_arg`] with `simulated` given.
fn time_arg_for(raw: &str, simulated: bool) -> Result<std::time::Duration, Failure> {
    let secs = raw.trim_matches(|c: char| c.is_ascii_whitespace()).parse::<f64>().unwrap_or(f64::NAN);
    let ok = if simulated {
        secs.is_finite() && (0.001..=3600.0).contains(&secs)
    } else {
        secs.is_finite() && secs.fract() == 0.0 && (1.0..=3600.0).contains(&secs)
    };
    if !ok {
        return Err(Failure::input(if simulated {
            format!(
                "-T/--time must be from 0.001 to 3600 virtual seconds under --machine, got '{}'",
                one_line(raw)
            )
        } else {
            format!("-T/--time must be a whole number of seconds from 1 to 3600, got '{}'", one_line(raw))
        }));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// pgbench 15 refuses run options with `-i`: "some of the specified options cannot be used in
/// initialization (-i) mode". The same here, naming them; `--json` too, as `-i` has no result
/// to write.
/// `-M`'s value, `prepared` when not given.
fn protocol(args: &PgbenchArgs) -> &str {
    args.protocol.as_deref().unwrap_or("prepared")
}

fn init_only_options(args: &PgbenchArgs) -> Result<(), Failure> {
    let mut bad = Vec::new();
    let mut flag = |on: bool, name: &str| {
        if on {
            bad.push(name.to_string());
        }
    };
    flag(args.clients != 1, "-c");
    flag(args.jobs != 1, "-j");
    flag(args.time.is_some(), "-T");
    flag(args.transactions.is_some(), "-t");
    flag(args.select_only, "-S");
    flag(args.skip_some_updates, "-N");
    flag(!args.builtin.is_empty(), "-b");
    flag(!args.file.is_empty(), "-f");
    flag(args.progress.is_some(), "-P");
    flag(args.report_per_command, "-r");
    flag(args.check_total, "--check-total");
    flag(args.json.is_some(), "--json");
    flag(args.protocol.is_some(), "-M");
    flag(args.random_seed.is_some(), "--random-seed");
    flag(args.open_damaged, "--open-damaged");
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Failure::input(format!(
            "some of the specified options cannot be used in initialization (-i) mode: {}",
            bad.join(" ")
        )))
    }
}

/// A run that stopped with an error: a script's own error (an undefined variable, an overflow
/// in `\set`, a transaction left open) is bad input, exit 1; anything else exit 2.
fn run_failure(e: EngineError) -> Failure {
    match e {
        EngineError::Usage(m) => Failure::input(m),
        e => Failure::run(e.to_string()),
    }
}

/// `--random-seed` as pgbench 15 takes it (`set_random_seed`): `time`, `rand` or an unsigned
/// decimal integer.
fn parse_seed(s: &str) -> Result<u64, String> {
    match s {
        "time" => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)),
        "rand" => {
            let mut b = [0u8; 8];
            std::fs::File::open("/dev/urandom")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut b))
                .map_err(|e| format!("cannot read a random seed from /dev/urandom: {e}"))?;
            Ok(u64::from_le_bytes(b))
        }
        _ => s.parse().map_err(|_| {
            format!(
                "unrecognized random seed option \"{s}\": expecting an unsigned integer, \"time\" or \"rand\""
            )
        }),
    }
}

/// pgbench 15's limit on `-b` and `-f` scripts (`MAX_SCRIPTS`).
const MAX_SCRIPTS: usize = 128;

fn split_weight(spec: &str, what: &str) -> Result<(String, u32), Failure> {
    match spec.rsplit_once('@') {
        Some((name, w)) => {
            // pgbench 15 (`parseScriptWeight`): an integer in 0..=INT_MAX; a zero weight keeps
            // the script loaded but never picked.
            let n: i64 =
                w.parse().map_err(|_| Failure::input(format!("invalid weight specification: \"{spec}\"")))?;
            let w = u32::try_from(n).ok().filter(|&n| n <= i32::MAX as u32).ok_or_else(|| {
                Failure::input(format!("weight specification \"{w}\" is out of range (0 .. {})", i32::MAX))
            })?;
            Ok((name.to_string(), w))
        }
        None if spec.is_empty() => Err(Failure::input(format!("empty {what} name"))),
        None => Ok((spec.to_string(), 1)),
    }
}

pub(crate) fn run(args: PgbenchArgs) -> Result<(), Failure> {
    if args.set.iter().any(|s| s == "help") {
        print_knobs();
        return Ok(());
    }
    crate::sim_cmd::refuse_sim_knobs_natively(&args.set)?;
    if !(1..=1000).contains(&args.clients) {
        return Err(Failure::input(format!("invalid number of clients: \"{}\" (1 to 1000)", args.clients)));
    }
    if args.jobs < 1 {
        return Err(Failure::input(format!("invalid number of threads: \"{}\"", args.jobs)));
    }
    // In range now.
    let clients = args.clients as usize;
    let jobs = usize::try_from(args.jobs).unwrap_or(usize::MAX);
    if !(1..=100_000).contains(&args.scale) {
        return Err(Failure::input(format!("invalid scaling factor: \"{}\"", args.scale)));
    }
    if !(10..=100).contains(&args.fillfactor) {
        return Err(Failure::input(format!("invalid fillfactor: \"{}\"", args.fillfactor)));
    }
    if let Some(p) = args.progress
        && !(1..=3600).contains(&p)
    {
        return Err(Failure::input(format!(
            "invalid thread progress delay: \"{p}\" (-P/--progress must be 1..=3600 seconds)"
        )));
    }
    let wait_sampling_hz = args.wait_sampling_hz.unwrap_or(if crate::sim_cmd::simulated() {
        SIMULATED_WAIT_SAMPLING_HZ
    } else {
        NATIVE_WAIT_SAMPLING_HZ
    });
    if wait_sampling_hz > WaitSampler::MAX_HZ {
        return Err(Failure::input(format!(
            "--wait-sampling-hz must be at most {}, got {wait_sampling_hz}",
            WaitSampler::MAX_HZ,
        )));
    }
    if args.initialize {
        init_only_options(&args)?;
    }
    if args.open_damaged && args.data_dir.is_none() {
        return Err(Failure::input("--open-damaged applies only with --data-dir DIR"));
    }
    if !["simple", "extended", "prepared"].contains(&protocol(&args)) {
        return Err(Failure::input(format!("invalid query mode (-M): \"{}\"", protocol(&args))));
    }
    if args.time.is_some() && args.transactions.is_some() {
        return Err(Failure::input(
            "specify either a number of transactions (-t) or a duration (-T), not both",
        ));
    }
    if let Some(h) = &args.host {
        return Err(Failure::input(format!(
            "-h {h}: lockstack pgbench runs its engine in this process and connects to no server"
        )));
    }
    let duration = args.time.as_deref().map(time_arg).transpose()?;
    // pgbench 15 reads -t as an int: 1..=2147483647.
    if let Some(t) = args.transactions
        && !(1..=i64::from(i32::MAX)).contains(&t)
    {
        return Err(Failure::input(format!("invalid number of transactions: \"{t}\"")));
    }
    let mut scripts: Vec<Script> = Vec::new();
    let mut builtins = args.builtin.clone();
    if args.select_only {
        builtins.push("select-only".into());
    }
    if args.skip_some_updates {
        builtins.push("simple-update".into());
    }
    // The resolved names of the built-ins asked for (prefixes expanded).
    let mut builtin_names: Vec<&'static str> = Vec::new();
    for b in &builtins {
        let (name, w) = split_weight(b, "builtin")?;
        let builtin = Builtin::find(&name).map_err(Failure::input)?;
        builtin_names.push(builtin.name);
        let mut s = builtin.script();
        s.weight = w;
        scripts.push(s);
    }
    for f in &args.file {
        let (path, w) = split_weight(f, "file")?;
        // `-f -` reads the script from standard input, as pgbench's process_file does; at most
        // MAX_SCRIPT_BYTES either way (`-f /dev/zero` is refused, not buffered without end).
        let bytes = if path == "-" {
            read_limited(std::io::stdin(), MAX_SCRIPT_BYTES, "standard input")
                .map_err(|e| Failure::input(format!("could not read the script from {e}")))?
        } else {
            let f = std::fs::File::open(&path)
                .map_err(|e| Failure::input(format!("could not open file \"{}\": {e}", one_line(&path))))?;
            read_limited(f, MAX_SCRIPT_BYTES, &path).map_err(Failure::input)?
        };
        let text = lockstack_workloads::input::text(bytes, &path).map_err(Failure::input)?;
        let mut s = parse_script(&path, &text).map_err(|e| Failure::input(e.to_string()))?;
        s.weight = w;
        scripts.push(s);
    }
    if scripts.is_empty() {
        scripts.push(Builtin::find("tpcb-like").map_err(Failure::input)?.script());
    }
    if scripts.len() > MAX_SCRIPTS {
        return Err(Failure::input(format!("at most {MAX_SCRIPTS} SQL scripts are allowed")));
    }
    if scripts.iter().all(|s| s.weight == 0) {
        return Err(Failure::input("total script weight must not be zero"));
    }
    if args.check_total {
        // The two updating built-ins add to accounts without a matching subtraction, so the
        // total cannot stay unchanged: refuse now rather than fail the check after the run.
        let updating = if builtins.is_empty() && args.file.is_empty() {
            Some("tpcb-like")
        } else {
            builtin_names.iter().copied().find(|n| *n != "select-only")
        };
        if let Some(n) = updating {
            return Err(Failure::input(format!(
                "--check-total: the built-in {n} script changes the account total; it is meant for transfer scripts (-f)"
            )));
        }
    }
    let scale = match (&args.data_dir, args.initialize) {
        (Some(dir), false) => {
            let control = datadir::read_control(dir).map_err(|e| Failure::input(e.to_string()))?;
            datadir::check_control(dir, &control).map_err(|e| Failure::input(e.to_string()))?;
            if args.scale != 1 && args.scale != control.scale {
                errln!("scale option ignored, using the data directory's scale {}", control.scale);
            }
            if args.fillfactor != 100 {
                errln!("fillfactor option ignored: it applies when the tables are loaded (-i)");
            }
            control.scale
        }
        _ => args.scale,
    };
    let nbuffers =
        settings::pool_buffers(scale, settings::PGBENCH_BUFFER_HEADROOM).map_err(Failure::input)?;
    settings::check_memory(scale).map_err(Failure::input)?;
    let mut run =
        RunConfig::new(EngineConfig::preset(&args.preset, clients + 1, nbuffers).map_err(Failure::input)?);
    // Under --machine, the profile's WAL flush first, so that the caller's --set overrides it.
    crate::sim_cmd::pgbench_defaults(&mut run, true);
    settings::apply_all(&mut run, &args.set).map_err(Failure::input)?;
    // The resolved configuration (preset, then --set), not the arguments' spelling.
    crate::sim_cmd::refuse(lockstack_engine::simcheck::unsupported_under_simulation(&run.engine))?;
    crate::sim_cmd::pgbench_defaults(&mut run, false);
    let RunConfig { engine, sim } = run;
    if let (Some(dir), true) = (&args.data_dir, args.initialize)
        && dir.exists()
        && !dir.is_dir()
    {
        return Err(Failure::input(format!("--data-dir {}: not a directory", dir.display())));
    }
    crate::prepare_json(args.json.as_deref())?;
    if args.data_dir.is_some() {
        stop_cleanly_on_signals()?;
    }
    let threads = jobs.min(clients);
    let cfg = PgbenchConfig {
        scale,
        fillfactor: args.fillfactor as u8, // 10..=100, checked above
        clients,
        threads,
        duration,
        transactions: if duration.is_none() { Some(args.transactions.unwrap_or(10) as u64) } else { None },
        scripts,
        progress: args.progress.map(|p| std::time::Duration::from_secs(p as u64)),
        seed: args.random_seed.unwrap_or(0),
        wait_sampling_hz,
        engine,
        sim,
        // Checked above to be one of the three.
        protocol: lockstack_workloads::pgbench::runner::QueryMode::parse(protocol(&args)).unwrap_or_default(),
    };
    if args.initialize {
        let t0 = lockstack_common::sync::Instant::now();
        let place = match &args.data_dir {
            Some(dir) => {
                datadir::initialize(cfg.engine.clone(), dir, cfg.scale, cfg.fillfactor)
                    .map_err(run_failure)?;
                format!("files in {}", dir.display())
            }
            None => {
                Engine::new(cfg.engine.clone(), cfg.scale, cfg.fillfactor)
                    .map_err(|e| Failure::run(e.to_string()))?;
                "in memory".to_string()
            }
        };
        outln!("done in {:.2} s (scale {}, {place}).", t0.elapsed().as_secs_f64(), cfg.scale);
        return interrupted_or_ok();
    }
    let progress = |p: &Progress| {
        // A closed stderr drops the line (errln! never panics): the run goes on to its end
        // and, with --data-dir, its clean shutdown.
        errln!(
            "progress: {:.1} s, {:.1} tps, lat {:.3} ms stddev {:.3}, {} failed",
            p.at,
            p.tps,
            p.lat_ms,
            p.stddev_ms,
            p.failed
        );
    };
    let opts = RunOptions { per_command_latencies: args.report_per_command };
    let check_total = |res: &mut PgbenchResult| {
        if args.check_total {
            let (before, after) = res
                .balance_sums
                .iter()
                .find(|(t, _, _)| t == "pgbench_accounts")
                .map(|(_, b, a)| (*b, *a))
                .unwrap_or_default();
            res.checks.push(Check {
                name: "--check-total: account balance total unchanged".into(),
                ok: before == after,
                detail: format!("{before} -> {after}"),
            });
        }
    };
    let res = match &args.data_dir {
        None => {
            let mut res = runner::run_with(&cfg, opts, &progress).map_err(run_failure)?;
            check_total(&mut res);
            res
        }
        Some(dir) => {
            let t0 = lockstack_common::sync::Instant::now();
            let options = datadir::OpenOptions { open_damaged: args.open_damaged };
            let (engine, control) = datadir::open_with(cfg.engine.clone(), dir, options, |s| s)
                .map_err(|e| Failure::input(e.to_string()))?;
            if let Some(why) = &control.damaged {
                errln!(
                    "warning: data directory \"{}\" is marked damaged ({why}); it stays marked until -i",
                    dir.display()
                );
            }
            let mut res = runner::run_on_with(&engine, t0.elapsed().as_secs_f64(), &cfg, opts, &progress);
            if let Ok(r) = &mut res {
                check_total(r);
            }
            // A failed consistency check marks the directory damaged: the next open refuses it
            // with the reason, instead of starting from data the check found inconsistent.
            let failed = res
                .as_ref()
                .ok()
                .and_then(|r| r.checks.iter().find(|c| !c.ok))
                .map(|c| format!("{} ({})", c.name, c.detail));
            // Shut down even after a failed run, so the directory stays usable.
            let down = datadir::shutdown_checked(&engine, &control, failed.as_deref());
            let res = res.map_err(run_failure)?;
            down.map_err(|e| Failure::run(format!("shutdown of \"{}\" failed: {e}", dir.display())))?;
            res
        }
    };
    print_report(&args, &cfg, &res);
    if args.json.is_some() {
        crate::write_json(args.json.as_deref(), &json_document(&args, &cfg, &res)?)?;
    }
    if let Some(c) = res.checks.iter().find(|c| !c.ok) {
        let marked = match &args.data_dir {
            Some(dir) => {
                format!("; data directory \"{}\" marked damaged (reinitialize it with -i)", dir.display())
            }
            None => String::new(),
        };
        return Err(Failure::run(format!("consistency check failed: {} ({}){marked}", c.name, c.detail)));
    }
    interrupted_or_ok()
}

/// With `--data-dir`, SIGINT, SIGTERM and SIGHUP (Ctrl-C, `kill`, `timeout`) do not kill the
/// process, which would leave the directory "in production" and, without crash recovery,
/// unusable: the first one stops the run as if `-T` had expired (or lets `-i` finish its
/// load), so that the report is printed and the directory shut down cleanly; a second one
/// exits at once.
fn stop_cleanly_on_signals() -> Result<(), Failure> {
    static SEEN: lockstack_common::sync::AtomicBool = lockstack_common::sync::AtomicBool::new(false);
    ctrlc::set_handler(|| {
        if SEEN.swap(true, lockstack_common::sync::Ordering::Relaxed) {
            errln!("lockstack: interrupted again: exiting now; the data directory was not shut down");
            std::process::exit(130);
        }
        runner::interrupt();
        errln!(
            "lockstack: interrupted: finishing the current step and shutting the data directory down \
             (interrupt again to quit at once, leaving it unusable)"
        );
    })
    .map_err(|e| Failure::input(format!("--data-dir: cannot install the signal handler: {e}")))
}

/// Exit code 130 (as a shell reports SIGINT) once a signal stopped the command early, after the
/// data directory was shut down.
fn interrupted_or_ok() -> Result<(), Failure> {
    if runner::interrupted() {
        return Err(Failure {
            message: "interrupted: stopped early; the data directory was shut down cleanly".into(),
            code: 130,
        });
    }
    Ok(())
}

/// The `--json` document: the run's configuration under `"config"` (what was run, so a file
/// says how it was made), then every field of the result.
fn json_document(
    args: &PgbenchArgs,
    cfg: &PgbenchConfig,
    res: &PgbenchResult,
) -> Result<serde_json::Value, Failure> {
    let mut doc = serde_json::to_value(res).map_err(|e| Failure::run(format!("encoding JSON: {e}")))?;
    let scripts: Vec<serde_json::Value> =
        cfg.scripts.iter().map(|s| serde_json::json!({ "name": s.name, "weight": s.weight })).collect();
    let config = serde_json::json!({
        "scale": cfg.scale,
        "fillfactor": cfg.fillfactor,
        "clients": cfg.clients,
        "threads": cfg.threads,
        "duration_s": cfg.duration.map(|d| d.as_secs_f64()),
        "transactions_per_client": cfg.transactions,
        "scripts": scripts,
        "preset": args.preset,
        "set": args.set,
        "protocol": protocol(args),
        "random_seed": cfg.seed,
        "wait_sampling_hz": cfg.wait_sampling_hz,
        "per_command_latencies": args.report_per_command,
        "data_dir": args.data_dir.as_ref().map(|d| d.display().to_string()),
        "tps": res.transactions as f64 / res.elapsed_s,
    });
    if let Some(map) = doc.as_object_mut() {
        map.insert("config".into(), config);
    }
    Ok(doc)
}

/// `--wait-sampling-hz` when not given, natively: pg_wait_sampling's default period, 10 ms.
const NATIVE_WAIT_SAMPLING_HZ: u32 = 100;

/// `--wait-sampling-hz` when not given, under `--machine`: per virtual second, so that a run of
/// a few virtual milliseconds still takes tens of rounds.
const SIMULATED_WAIT_SAMPLING_HZ: u32 = 10_000;

fn print_report(args: &PgbenchArgs, cfg: &PgbenchConfig, r: &PgbenchResult) {
    let ttype = if cfg.scripts.len() == 1 { cfg.scripts[0].name.clone() } else { "multiple scripts".into() };
    outln!("transaction type: {ttype}");
    outln!("scaling factor: {}", cfg.scale);
    outln!("query mode: {}", protocol(args));
    outln!("number of clients: {}", cfg.clients);
    // pgbench multiplexes clients over -j threads; here every client is a thread of its own
    // (docs/workloads.md), so say both.
    if crate::sim_cmd::simulated() {
        // Under --machine there are no host threads to speak of: each client and its backend
        // are one task of the simulated machine.
        outln!(
            "number of threads: {} (simulated: each client and its backend are one task, {} tasks)",
            cfg.threads,
            cfg.clients
        );
    } else {
        outln!(
            "number of threads: {} (each client runs on its own thread here: {} busy)",
            cfg.threads,
            cfg.clients
        );
    }
    outln!("maximum number of tries: 1");
    match (cfg.duration, cfg.transactions) {
        (Some(d), _) => {
            outln!("duration: {} s", d.as_secs_f64());
            outln!("number of transactions actually processed: {}", r.transactions);
        }
        (None, Some(t)) => {
            outln!("number of transactions per client: {t}");
            outln!(
                "number of transactions actually processed: {}/{}",
                r.transactions,
                t * cfg.clients as u64
            );
        }
        (None, None) => {}
    }
    let all = (r.transactions + r.failed).max(1);
    outln!("number of failed transactions: {} ({:.3}%)", r.failed, 100.0 * r.failed as f64 / all as f64);
    outln!("latency average = {:.3} ms", r.latency_avg_ms);
    if args.progress.is_some() || args.report_per_command {
        outln!("latency stddev = {:.3} ms", r.latency_stddev_ms);
    }
    outln!("initial connection time = 0.000 ms");
    outln!("tps = {:.6} (without initial connection time)", r.transactions as f64 / r.elapsed_s);
    for (i, s) in r.scripts.iter().enumerate() {
        if r.scripts.len() > 1 {
            // In u64: up to 128 weights of up to i32::MAX each.
            let tw: u64 = r.scripts.iter().map(|s| u64::from(s.weight)).sum();
            outln!("SQL script {}: {}", i + 1, s.name);
            outln!(
                " - weight: {} (targets {:.1}% of total)",
                s.weight,
                100.0 * f64::from(s.weight) / tw as f64
            );
            outln!(
                " - {} transactions ({:.1}% of total, tps = {:.6})",
                s.transactions,
                100.0 * s.transactions as f64 / r.transactions.max(1) as f64,
                s.transactions as f64 / r.elapsed_s
            );
        }
        if args.report_per_command {
            let prefix = if r.scripts.len() > 1 { " - " } else { "" };
            outln!("{prefix}statement latencies in milliseconds and failures:");
            for (c, t) in s.commands.iter().zip(&s.texts) {
                let ms =
                    if c.count > 0 { c.total_ns.unwrap_or(0) as f64 / c.count as f64 / 1e6 } else { 0.0 };
                outln!("   {ms:>11.3}  {:>10}  {t}", c.failures);
            }
        }
    }
    outln!();
    let place = match &args.data_dir {
        Some(dir) => format!("tables opened from {} in {:.2} s", dir.display(), r.load_s),
        None => format!("tables loaded in memory in {:.2} s", r.load_s),
    };
    let ls = &r.lock_stack;
    let preset = if args.set.is_empty() {
        args.preset.clone()
    } else {
        format!("{} with --set {}", args.preset, args.set.join(" --set "))
    };
    outln!(
        "-- lock stack ({preset}; {place}; counters over the {} transactions of the run) --",
        ls.transactions
    );
    outln!("{}", crate::sim_cmd::machine_note(cfg.clients).line());
    outln!("LWLock tranche       shared acq  exclusive acq     sleeps   wait ms   per txn (sh/ex)");
    let tx = ls.transactions.max(1) as f64;
    for (t, s) in &ls.counters.lwlocks.tranches {
        let (sh, ex) = (s.sh_acquire, s.ex_acquire);
        if sh + ex == 0 {
            continue;
        }
        outln!(
            "{:<18} {sh:>12} {ex:>14} {:>10} {:>9.1}   {:.2}/{:.2}",
            t.name(),
            s.block,
            s.wait_ns as f64 / 1e6,
            sh as f64 / tx,
            ex as f64 / tx
        );
    }
    for (i, section) in REPORT_SECTIONS.iter().enumerate() {
        if i == 0 {
            outln!("{:<32} {:>12} {:>10}", section.title, "total", "per txn");
        } else {
            outln!("{}", section.title);
        }
        for (label, path) in section.lines {
            let n = ls.count(path);
            let label = if *path == "wal.flushes" { flushes_label(args, cfg) } else { label.to_string() };
            outln!("  {label:<30} {n:>12} {:>10.2}", ls.per_txn(n));
            if *path == "lmgr.main_acquisitions_total" {
                print_partitions(&ls.counters.lmgr.main_acquisitions);
            }
        }
    }
    if r.wait_samples > 0 {
        let clock = if crate::sim_cmd::simulated() { " of virtual time" } else { "" };
        outln!(
            "wait-event profile ({} samples of the connected backends, {} rounds at {} Hz{clock} from before the clients connect to after they disconnect; {} samples of clients idle at the start and end gates left out; spinning publishes no wait event: it counts as no wait event; sampling error up to +/-{:.1} points, two binomial standard errors):",
            r.wait_samples,
            r.wait_rounds,
            cfg.wait_sampling_hz,
            r.wait_idle_samples,
            100.0 / (r.wait_samples as f64).sqrt()
        );
        const SHOWN: usize = 8;
        let pct = |n: u64| 100.0 * n as f64 / r.wait_samples as f64;
        for (e, n) in r.wait_events.iter().take(SHOWN) {
            outln!("  {e:<28} {:>5.1}%", pct(*n));
        }
        let others: u64 = r.wait_events.iter().skip(SHOWN).map(|(_, n)| n).sum();
        if others > 0 {
            outln!("  {:<28} {:>5.1}%", "(other wait events)", pct(others));
        }
        let waiting: u64 = r.wait_events.iter().map(|(_, n)| n).sum();
        let running = r.wait_samples.saturating_sub(waiting);
        outln!("  {:<28} {:>5.1}%", "(no wait event)", pct(running));
    }
    match &r.fidelity_builtin {
        Some(b) => {
            let caveat = if ["pg14", "pg17"].contains(&args.preset.as_str()) {
                String::new()
            } else {
                format!("; PostgreSQL 15 corresponds to --preset pg14 or pg17, not {}", args.preset)
            };
            outln!(
                "fidelity vs PostgreSQL 15 ({b}, per transaction; PostgreSQL 15.18 counted with gdb, docs/fidelity.md{caveat}):"
            );
        }
        None => {
            outln!("fidelity vs PostgreSQL 15 (per transaction; no reference: not one built-in script):")
        }
    }
    outln!("  {:<26} {:>9} {:>9} {:>8}", "call", "ours", "PG 15", "diff");
    for f in &r.fidelity {
        let pg = f.pg15_per_txn.map(|p| format!("{p:.2}")).unwrap_or_else(|| "-".into());
        let diff = f.diff().map(|d| format!("{d:+.2}")).unwrap_or_else(|| "-".into());
        let flag = if f.diff().is_some_and(|d| d.abs() > 1.0) { " *" } else { "" };
        let note = if f.modelled { String::new() } else { format!("  ({})", f.note) };
        outln!("  {:<26} {:>9.2} {pg:>9} {diff:>8}{flag}{note}", f.call, f.ours_per_txn);
    }
    if r.fidelity.iter().any(|f| f.diff().is_some_and(|d| d.abs() > 1.0)) {
        outln!("  * differs by more than 1 per transaction: docs/fidelity.md explains why");
    }
    outln!("consistency checks:");
    for c in &r.checks {
        outln!("  {:<4} {} ({})", if c.ok { "ok" } else { "FAIL" }, c.name, c.detail);
    }
}

/// The WAL section's flushes row, saying what a flush was in this run: the host's `fdatasync`
/// (`--data-dir`), a modelled fsync of the configured time (`--set wal.flush=modelled:US`, or
/// the profile's under `--machine`), or none (an in-memory WAL is never flushed).
fn flushes_label(args: &PgbenchArgs, cfg: &PgbenchConfig) -> String {
    if args.data_dir.is_some() {
        return "flushes (fdatasync)".to_string();
    }
    match &cfg.engine.wal.sink {
        lockstack_xlog::WalSink::Files { .. } => "flushes (fdatasync)".to_string(),
        lockstack_xlog::WalSink::Modelled { flush_delay } => {
            format!("flushes (modelled, {} us each)", flush_delay.as_nanos() as f64 / 1000.0)
        }
        lockstack_xlog::WalSink::Memory => "flushes (none: WAL in memory)".to_string(),
    }
}

/// The busiest partitions' main-table acquisitions, `partition:count` for the first 16
/// partitions that counted any.
fn print_partitions(per_partition: &[u64]) {
    let parts: Vec<String> =
        per_partition.iter().enumerate().filter(|(_, n)| **n > 0).map(|(i, n)| format!("{i}:{n}")).collect();
    if !parts.is_empty() {
        const SHOWN: usize = 16;
        let more = parts.len().saturating_sub(SHOWN);
        let tail = if more > 0 { format!(" (+{more} more)") } else { String::new() };
        let shown = parts.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(" ");
        outln!("    by partition (partition:count) {shown}{tail}");
    }
}

/// `--set help`: every knob with its values and meaning.
pub(crate) fn print_knobs() {
    outln!("--set crate.knob=value overrides (applied in order, after --preset):");
    for k in settings::knobs() {
        outln!("  {:<36} {:<42} {} (default {})", k.key, k.values, k.doc, k.default);
    }
}

#[cfg(test)]
mod tests {
    use super::time_arg_for;

    #[test]
    fn time_is_whole_seconds_natively_and_a_fraction_only_under_machine() {
        for (ok, secs) in [("1", 1.0), ("2", 2.0), ("3600", 3600.0), ("60.0", 60.0)] {
            assert_eq!(time_arg_for(ok, false).map_err(|e| e.message).unwrap().as_secs_f64(), secs);
        }
        for bad in ["4.9e-324", "0.5", "1.5", "0", "-1", "3601", "NaN", "inf", "x", "1\u{2028}"] {
            let e = time_arg_for(bad, false).unwrap_err();
            assert!(
                e.message.starts_with("-T/--time must be a whole number of seconds from 1 to 3600, got '"),
                "{bad}"
            );
            assert_eq!(e.message.lines().count(), 1);
            assert_eq!(e.code, 1);
        }
        assert!(time_arg_for("4.9e-324", false).unwrap_err().message.ends_with("got '4.9e-324'"));
        assert_eq!(time_arg_for("0.5", true).map_err(|e| e.message).unwrap().as_millis(), 500);
        assert_eq!(time_arg_for("0.001", true).map_err(|e| e.message).unwrap().as_millis(), 1);
        for bad in ["4.9e-324", "0.0009", "0", "3600.5", "NaN"] {
            assert!(
                time_arg_for(bad, true).unwrap_err().message.contains("from 0.001 to 3600 virtual seconds")
            );
        }
    }
}
