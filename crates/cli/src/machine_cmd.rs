//! `lockstack machine list|show|calibrate|sweep|layout|validate`: the simulated machines' profiles (crate
//! `lockstack-sim`).

use clap::{Args, Subcommand};
use lockstack_sim::MachineProfile;
use lockstack_sim::profile::BUILTIN;

use crate::Failure;

/// Arguments of `lockstack machine`.
#[derive(Args, Debug)]
pub(crate) struct MachineArgs {
    #[command(subcommand)]
    action: MachineAction,
}

#[derive(Subcommand, Debug)]
enum MachineAction {
    /// List the built-in machine profiles: name, topology, description.
    List,
    /// Write a commented template profile NAME into the user directory (machines/NAME.toml,
    /// found by `--machine NAME`): every constant with what it is and whether to measure or
    /// cite it; --from-host fills the topology and caches from this machine. Never overwrites.
    New(crate::machine_new::NewArgs),
    /// Print a profile as TOML: a built-in name (with its citation comments) or a FILE.
    Show {
        /// A built-in profile's name (see `lockstack machine list`) or a profile file.
        profile: String,
    },
    /// Measure this host's line ping-pong, atomic, fence, pause, memory and futex costs with
    /// real threads (about two seconds per repeat), --repeats times, print each figure's
    /// min / median / max over the repeats, and write the medians as a `host` profile; no
    /// profile is written when a figure's repeats disagree by more than --max-spread.
    Calibrate {
        /// Write the profile to this file instead of stdout (the spread table then goes to
        /// stdout; without --out it goes to stderr).
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
        /// How many times to measure every figure (2 to 100); the profile takes the median.
        #[arg(long, default_value_t = 3, value_name = "N", allow_negative_numbers = true)]
        repeats: i64,
        /// The largest max/min ratio of a figure's repeats for the profile to be written (at
        /// least 1). A figure over it whose repeats also differ by more than 1 ns is unstable:
        /// the command names it and exits with code 2 without writing a profile.
        /// A figure over 1.5 that a larger value accepts is written marked noisy and assumed.
        #[arg(
            long,
            default_value_t = lockstack_sim::calibrate::DEFAULT_MAX_SPREAD,
            value_name = "RATIO",
            allow_negative_numbers = true
        )]
        max_spread: f64,
    },
    /// The deterministic clock's calibration pass: time the lock stack's code between every two
    /// synchronization operations natively on this host, at 1 client or thread, over the
    /// workloads the simulated machine runs (pgbench's built-ins under each release preset, every
    /// seed experiment's variants, the micro-benchmarks), and write the merged segment table
    /// (JSON). The table built into the simulating binary is crates/sim/segments/builtin.json,
    /// made by this command; `--sim-segments FILE` replays another one.
    Segments {
        /// Write the table here.
        #[arg(long, value_name = "FILE")]
        out: std::path::PathBuf,
        /// Seconds per pgbench run, whole (the experiments and micro-benchmarks run a fraction
        /// of it).
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
    },
    /// Run pgbench -S on simulated machines for every profile, preset and client count (one
    /// child run per point) and write DIR/sweep.csv, DIR/sweep.svg and a table.
    Sweep(crate::machine_sweep::SweepArgs),
    /// The layout experiment of the simulated caches: pgbench -S under three layouts (PGPROC
    /// scanned in place, the dense PGXACT array, packed buffer descriptors), with the caches'
    /// capacities on and off, and the private-cache misses per transaction by structure (one
    /// child run each); writes DIR/layout.csv and a table.
    Layout(crate::machine_layout::LayoutArgs),
    /// Run classic microbenchmarks on a simulated machine (line latencies by distance, a
    /// shared counter's fetch_add throughput, test-and-set, test-and-test-and-set, ticket and
    /// MCS locks from 1 thread to all) and print them next to published figures for the
    /// processor family, each with its source.
    Validate {
        /// A built-in profile's name (see `lockstack machine list`) or a profile file.
        profile: String,
        /// One JSON object per line per measurement: name, simulated, unit, published, source.
        #[arg(long)]
        json: bool,
    },
}

/// The runs of `machine segments`: each is `lockstack ARGS --time-segments FILE`.
fn segment_runs(seconds: f64) -> Vec<Vec<String>> {
    let t = format!("{seconds}");
    let short = format!("{}", (seconds / 4.0).max(0.05));
    let mut runs: Vec<Vec<String>> = Vec::new();
    for preset in ["pg91", "pg92", "pg96", "pg14", "pg17"] {
        for script in [None, Some("-N"), Some("-S")] {
            let mut a: Vec<String> = ["pgbench", "-s", "10", "-c", "1", "-T", &t, "--preset", preset]
                .iter()
                .map(|s| s.to_string())
                .collect();
            a.extend(script.map(str::to_string));
            runs.push(a);
        }
    }
    for e in lockstack_workloads::experiments::all() {
        runs.push(
            ["experiment", e.name, "--clients", "1", "--runs", "1", "--duration", &short]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
    }
    for micro in [
        vec!["lwlock", "--impl", "pg92,atomic,read-biased", "--threads", "1"],
        vec!["locks", "--threads", "1"],
        vec!["buffers", "--threads", "1"],
        vec!["snapshot", "--threads", "1"],
        vec!["wal", "--threads", "1"],
    ] {
        let mut a: Vec<String> = micro.iter().map(|s| s.to_string()).collect();
        a.extend(["--duration".to_string(), short.clone()]);
        runs.push(a);
    }
    runs
}

/// `machine segments`: runs [`segment_runs`] as child processes of this binary, each into its
/// own table, and merges them (sample-weighted means).
fn time_segments(out: &std::path::Path, seconds: f64) -> Result<(), Failure> {
    // Each pgbench run is a native `-T seconds`: whole seconds, as pgbench takes them.
    if !(seconds.is_finite() && seconds.fract() == 0.0 && (1.0..=3600.0).contains(&seconds)) {
        return Err(Failure::input(format!(
            "--seconds must be a whole number of seconds from 1 to 3600 (pgbench's -T), got {seconds}"
        )));
    }
    if out.is_dir() {
        return Err(Failure::input(format!("--out {}: is a directory", out.display())));
    }
    let exe = crate::child::this_binary("locating this binary")?;
    let dir = std::env::temp_dir().join(format!("lockstack-segments-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| Failure::output(format!("{}: {e}", dir.display())))?;
    let mut merged = lockstack_sim::SegmentTable::default();
    let runs = segment_runs(seconds);
    let mut progress = crate::progress::Progress::new("machine segments", runs.len());
    for (i, args) in runs.iter().enumerate() {
        let file = dir.join(format!("{i}.json"));
        let mut cmd = crate::child::command(&exe);
        cmd.args(args).arg("--time-segments").arg(&file);
        if args[0] == "experiment" {
            cmd.arg("--out").arg(dir.join(format!("exp-{i}")));
        }
        progress.println(format!(
            "machine segments: [{}/{}] lockstack {}",
            i + 1,
            runs.len(),
            args.join(" ")
        ));
        let o = cmd.output().map_err(|e| Failure::run(format!("running {}: {e}", exe.display())))?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            return Err(Failure::run(format!(
                "machine segments: `lockstack {}` failed: {}",
                args.join(" "),
                crate::child::last_line(&err)
            )));
        }
        let text = lockstack_common::input::read_text_file(&file, lockstack_sim::MAX_SEGMENT_TABLE_BYTES)
            .map_err(Failure::run)?;
        let t: lockstack_sim::SegmentTable =
            serde_json::from_str(&text).map_err(|e| Failure::run(format!("{}: {e}", file.display())))?;
        merged.merge(&t);
        progress.inc();
    }
    progress.finish();
    let _ = std::fs::remove_dir_all(&dir);
    let text = serde_json::to_string_pretty(&merged)
        .map_err(|e| Failure::run(format!("encoding the segment table: {e}")))?;
    std::fs::write(out, text + "\n").map_err(|e| Failure::output(format!("--out {}: {e}", out.display())))?;
    let samples: u64 = merged.segments.values().map(|c| c.samples).sum();
    outln!(
        "{} segments ({} samples, mean {:.1} ns) from {} runs written to {}",
        merged.segments.len(),
        samples,
        merged.mean_ns(),
        runs.len(),
        out.display()
    );
    Ok(())
}

pub(crate) fn run(args: MachineArgs) -> Result<(), Failure> {
    match args.action {
        MachineAction::Sweep(sweep) => crate::machine_sweep::run(sweep),
        MachineAction::New(new) => crate::machine_new::run(new),
        MachineAction::Layout(layout) => crate::machine_layout::run(layout),
        MachineAction::Validate { profile, json } => crate::machine_validate::run(&profile, json),
        MachineAction::List => {
            for (name, _) in BUILTIN {
                let p = MachineProfile::builtin(name)
                    .ok_or_else(|| Failure::run(format!("built-in profile {name} is missing")))?;
                let t = &p.topology;
                outln!(
                    "{name:<12} {:>3} hw threads ({} x {} cores x {} SMT, {} NUMA nodes)  {}",
                    p.hw_threads(),
                    t.sockets,
                    t.cores_per_socket,
                    t.threads_per_core,
                    t.numa_nodes,
                    p.description
                );
            }
            Ok(())
        }
        MachineAction::Show { profile } => {
            if let Some(text) = MachineProfile::builtin_source(&profile) {
                out!("{text}");
                return Ok(());
            }
            // Read once (bounded), checked, and shown as written, comments included; a user
            // profile by name is its file in the user directory.
            let file = lockstack_workloads::experiments::user_dir::profile_path(&profile)
                .map_or_else(|| profile.clone(), |p| p.to_string_lossy().into_owned());
            let text = MachineProfile::read_file(&file).map_err(|e| Failure::input(e.to_string()))?;
            MachineProfile::from_toml(&text, &profile).map_err(|e| Failure::input(e.to_string()))?;
            out!("{text}");
            Ok(())
        }
        MachineAction::Calibrate { out, repeats, max_spread } => calibrate(out, repeats, max_spread),
        MachineAction::Segments { out, seconds } => time_segments(&out, seconds),
    }
}

/// `machine calibrate`: measures the host `repeats` times, prints each figure's spread, and
/// writes the medians as a profile unless a figure is unstable (exit code 2, naming it).
fn calibrate(out: Option<std::path::PathBuf>, repeats: i64, max_spread: f64) -> Result<(), Failure> {
    if let Some(path) = &out
        && path.is_dir()
    {
        return Err(Failure::input(format!("--out {}: is a directory", path.display())));
    }
    if !(2..=100).contains(&repeats) {
        return Err(Failure::input(format!(
            "--repeats {repeats}: must be 2 to 100 (the spread of one measurement says nothing)"
        )));
    }
    if !max_spread.is_finite() || max_spread < 1.0 {
        return Err(Failure::input(format!(
            "--max-spread {max_spread}: must be a number of at least 1 (the largest max/min of a figure's repeats)"
        )));
    }
    let r = lockstack_sim::calibrate::measure_repeated(repeats as usize);
    let mut table = format!(
        "{:<24} {:>12} {:>12} {:>12} {:>8}\n",
        format!("figure ({repeats} repeats)"),
        "min ns",
        "median ns",
        "max ns",
        "max/min"
    );
    let unstable = r.unstable(max_spread);
    for (key, s) in &r.spreads {
        let flag = if unstable.iter().any(|(k, _)| k == key) { "  unstable" } else { "" };
        table.push_str(&format!(
            "{key:<24} {:>12.1} {:>12.1} {:>12.1} {:>8.2}{flag}\n",
            s.min,
            s.median,
            s.max,
            s.ratio()
        ));
    }
    // The profile goes to stdout without --out: the table then goes to stderr.
    if out.is_some() {
        out!("{table}");
    } else {
        eprint!("{table}");
    }
    if !unstable.is_empty() {
        return Err(Failure::run(lockstack_sim::calibrate::unstable_message(
            repeats as usize,
            max_spread,
            &unstable,
        )));
    }
    let text = lockstack_sim::calibrate::host_profile_toml_repeated(&r, max_spread);
    MachineProfile::from_toml(&text, "calibrated host")
        .map_err(|e| Failure::run(format!("the measured profile is not valid: {e}")))?;
    match out {
        Some(path) => std::fs::write(&path, &text)
            .map_err(|e| Failure::output(format!("--out {}: {e}", path.display())))?,
        None => out!("{text}"),
    }
    Ok(())
}
