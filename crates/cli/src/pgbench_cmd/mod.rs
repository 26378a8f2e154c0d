//! `lockstack pgbench`: checks the options, builds the run's configuration, runs it over the
//! lockstack engine and hands the result to [`report`]; the command line is [`args`]. Takes no
//! lock itself (the engine's backends do).

use lockstack_common::backend::WaitSampler;
use lockstack_engine::datadir;
use lockstack_engine::engine::Engine;
use lockstack_engine::engine::{EngineConfig, EngineError};
use lockstack_workloads::experiments::driver::MAX_CLIENTS;
use lockstack_workloads::input::{one_line, read_limited};
use lockstack_workloads::pgbench::runner::{self, Check, PgbenchConfig, PgbenchResult, Progress, RunOptions};
use lockstack_workloads::pgbench::script::{Builtin, MAX_SCRIPT_BYTES, Script, parse_script};
use lockstack_workloads::settings::{self, RunConfig};

use crate::Failure;

mod args;
mod report;

pub(crate) use args::PgbenchArgs;
use args::protocol;
use report::{json_document, print_report};

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
    flag(args.calibration.is_some(), "--calibration");
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
    if !(1..=MAX_CLIENTS as i64).contains(&args.clients) {
        return Err(Failure::input(format!(
            "invalid number of clients: \"{}\" (1 to {MAX_CLIENTS})",
            args.clients
        )));
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
    let scale = match (args.data_dir.as_ref().or(args.load_from.as_ref()), args.initialize) {
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
    let mut set = args.set.clone();
    if let Some(name) = &args.calibration {
        set.push(calibration_setting(name, &args, &builtin_names)?);
    }
    settings::apply_all(&mut run, &set).map_err(Failure::input)?;
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
    let res = match (&args.data_dir, &args.load_from) {
        (None, None) => {
            let mut res = runner::run_with(&cfg, opts, &progress).map_err(run_failure)?;
            check_total(&mut res);
            res
        }
        (None, Some(dir)) => {
            let t0 = lockstack_common::sync::Instant::now();
            // Held until the run ends: the image stays locked against writers while its pages
            // may still be read.
            let image =
                datadir::load_image(cfg.engine.clone(), dir).map_err(|e| Failure::input(e.to_string()))?;
            let mut res =
                runner::run_on_with(&image.engine, t0.elapsed().as_secs_f64(), &cfg, opts, &progress)
                    .map_err(run_failure)?;
            check_total(&mut res);
            res
        }
        (Some(dir), _) => {
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

/// `--calibration EXPERIMENT`: the `--set sim.postgres_ipc=X` of `EXPERIMENT`'s stored
/// calibration for the simulated machine and the run's one built-in script (the user's
/// calibrations first, then the built-in ones), noted for the report's `calibration:` line
/// with the settings the fit was made under that this run does not share (the fitted rate
/// applies to this run; the fitted point is reproduced only under the fit's settings); a
/// warning line on stderr names them too.
///
/// # Errors
/// Not simulating; `--costs own`; a profile given as a file; an unknown experiment; not
/// exactly one built-in script and no `-f`; `--set sim.postgres_ipc` given too; no stored
/// calibration for that machine and script (the message lists the experiment's calibrations).
fn calibration_setting(name: &str, args: &PgbenchArgs, builtins: &[&'static str]) -> Result<String, Failure> {
    use lockstack_workloads::experiments;
    let Some(target) = crate::sim_cmd::calibration_target() else {
        return Err(Failure::input("--calibration applies only under --machine PROFILE"));
    };
    if !target.postgres_costs {
        return Err(Failure::input(
            "--calibration rates PostgreSQL's costs (--costs postgres, pgbench's default); --costs own has no postgres_ipc to calibrate",
        ));
    }
    if !target.named {
        return Err(Failure::input(format!(
            "--calibration needs --machine NAME (a built-in profile or one in the user directory): calibrations are \
             stored per profile name, and a profile file named {:?} may not hold the figures they were fitted with",
            target.profile
        )));
    }
    let machine = target.profile;
    let e = experiments::find(name).map_err(|e| Failure::input(format!("--calibration: {e}")))?;
    let workload = match (builtins, args.file.is_empty()) {
        ([one], true) => *one,
        ([], true) => "tpcb-like",
        _ => {
            return Err(Failure::input(
                "--calibration: a stored calibration is for one built-in script; give one -b, -S or -N and no -f",
            ));
        }
    };
    if args.set.iter().any(|s| s.split('=').next().is_some_and(|k| k.trim() == "sim.postgres_ipc")) {
        return Err(Failure::input(
            "--calibration sets sim.postgres_ipc; give it or --set sim.postgres_ipc, not both",
        ));
    }
    let Some(c) = e.calibration(&machine, workload) else {
        let mut have: Vec<String> = e
            .calibrations()
            .chain(e.user_calibrations().unwrap_or_default())
            .map(|c| format!("{} on {}", c.workload, c.machine))
            .collect();
        have.dedup();
        let have = if have.is_empty() { "none".to_string() } else { have.join(", ") };
        return Err(Failure::input(format!(
            "--calibration {name}: no stored calibration for {workload} on {machine} (it has: {have}); `lockstack experiment {name} --machine {machine} --calibrate` fits one"
        )));
    };
    // The settings of the fit (the experiment's, with its baseline variant) this run lacks.
    let mut differs: Vec<String> = Vec::new();
    let fit_protocol = match e.protocol {
        lockstack_workloads::pgbench::runner::QueryMode::Simple => "simple",
        lockstack_workloads::pgbench::runner::QueryMode::Extended => "extended",
        lockstack_workloads::pgbench::runner::QueryMode::Prepared => "prepared",
    };
    if protocol(args) != fit_protocol {
        differs.push(format!("-M {} (fit: {fit_protocol})", protocol(args)));
    }
    if args.preset != e.preset {
        differs.push(format!("--preset {} (fit: {})", args.preset, e.preset));
    }
    if let Some(m) = e.machine(&machine)
        && args.scale != m.scale
        && args.load_from.is_none()
        && args.data_dir.is_none()
    {
        differs.push(format!("-s {} (fit: {})", args.scale, m.scale));
    }
    for s in e.common.iter().chain(e.baseline().set) {
        if !args.set.iter().any(|a| a.replace(' ', "") == s.replace(' ', "")) {
            differs.push(format!("no --set {s}"));
        }
    }
    let fit = format!("sim.postgres_ipc = {:.3} from {name}'s calibration: {}", c.postgres_ipc, c.line());
    let note = if differs.is_empty() {
        format!("{fit}; this run has the fit's settings (--calibration {name})")
    } else {
        errln!(
            "warning: --calibration {name} was fitted under other settings than this run's ({}); its figures are \
             predictions at the fitted rate, not the fitted point",
            differs.join(", ")
        );
        format!(
            "{fit}; this run differs from the fit's settings in {}, so its figures are predictions at that rate, not \
             the fitted point (--calibration {name})",
            differs.join(", ")
        )
    };
    crate::sim_cmd::note_calibration(note);
    Ok(format!("sim.postgres_ipc={}", c.postgres_ipc))
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

/// `--wait-sampling-hz` when not given, natively: pg_wait_sampling's default period, 10 ms.
const NATIVE_WAIT_SAMPLING_HZ: u32 = 100;

/// `--wait-sampling-hz` when not given, under `--machine`: per virtual second, so that a run of
/// a few virtual milliseconds still takes tens of rounds.
const SIMULATED_WAIT_SAMPLING_HZ: u32 = 10_000;

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
