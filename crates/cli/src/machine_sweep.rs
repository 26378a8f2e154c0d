//! `lockstack machine sweep`: a pgbench workload (a built-in script, select-only `-S` by
//! default, or a script file: `--script`) on simulated machines, every (profile, preset,
//! clients) point one child run of this binary
//! (`lockstack pgbench --load-from image -b NAME ... --machine PROFILE --preset PRESET --json
//! FILE`, every point starting from one load of the tables, [`image`]), collected into
//! `DIR/sweep.csv`, a table on stdout and `DIR/sweep.svg` (one panel per profile, tps against
//! clients on a log2 axis, one line per preset). docs/sim.md, "Sweeps", describes the columns.
//!
//! The points run as child processes (through [`crate::child`]) rather than in this process
//! because a simulated run takes over its process's sync facade (crates/sim) and the simulating
//! binary is a separate build (crates/cli/build.rs); a child also keeps one point's failure from
//! taking the others down. A point's result is read back by [`point`]; `sweep.svg` is drawn by
//! [`plot`], with the user's own figures (`--measured FILE.csv`) when given. Takes no lock.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Child;

use clap::Args;
use lockstack_common::sync::{Duration, Instant, sleep};
use lockstack_sim::profile::BUILTIN;
use lockstack_workloads::experiments::measured::Measured;

use crate::Failure;
use crate::child;

mod image;
mod plot;
mod point;

use point::{Point, PointResult, read_result};

/// Arguments of `lockstack machine sweep`.
#[derive(Args, Debug)]
pub(crate) struct SweepArgs {
    /// Machine profiles, comma-separated: built-in names (`lockstack machine list`) or profile
    /// files, or `all` for every built-in profile.
    #[arg(long, default_value = "all", value_name = "all|NAME,...")]
    profiles: String,
    /// Release presets of the lock stack, comma-separated (pg91, pg92, pg96, pg14, pg17).
    #[arg(long, default_value = "pg91,pg92,pg17", value_name = "PRESET,...")]
    presets: String,
    /// Client counts, comma-separated, each 1 to 1000 (pgbench's -c; -j is the same).
    #[arg(long, default_value = "1,2,4,8,16,32,64,128", value_name = "N,...")]
    clients: String,
    /// Transactions per point in total, split evenly over the clients: each client runs
    /// ceil(N / clients) (pgbench's -t), so every point does about the same work.
    #[arg(long, default_value_t = 8192, allow_negative_numbers = true, value_name = "N")]
    transactions: i64,
    /// pgbench scale factor (-s): 100,000 pgbench_accounts rows per unit, loaded natively once
    /// (into a load image in DIR/points/) and copied by each point before its measured phase.
    #[arg(short = 's', long, default_value_t = 1, allow_negative_numbers = true)]
    scale: i64,
    /// Points run at once (child processes); each simulated run uses one host thread.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true)]
    jobs: i64,
    /// Directory for sweep.csv, sweep.svg and points/ (each point's report and --json);
    /// created if missing.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// The workload: a pgbench built-in script's name (select-only, simple-update,
    /// tpcb-like; `lockstack pgbench --help`) or a script FILE (pgbench's -f).
    #[arg(long, default_value = "select-only", value_name = "NAME|FILE")]
    script: String,
    /// Your own measurements, drawn in sweep.svg as dotted lines next to the predicted ones: a
    /// CSV file with a header, the format of `experiment --measured` (variant, clients, tps
    /// required; machine, workload optional; lines starting with # are comments), where
    /// `variant` is one of --presets, `machine` one of --profiles (a row without one is drawn
    /// on every panel) and `workload` the --script's name.
    #[arg(long, value_name = "FILE.csv")]
    measured: Option<PathBuf>,
    /// Keep the load image (`DIR/points/image`, the tables at --scale that every point starts
    /// from) after the sweep, so that a point's command in `DIR/points/` can be run again as
    /// it is; by default it is removed at the end.
    #[arg(long)]
    keep_image: bool,
}

/// What each point runs: pgbench's arguments that choose the script.
#[derive(Debug, Clone)]
enum Script {
    /// A built-in script, by its full name (`-b NAME`).
    Builtin(String),
    /// A script file (`-f FILE`).
    File(PathBuf),
}

impl Script {
    /// A built-in's name, else an existing file.
    fn parse(s: &str) -> Result<Script, Failure> {
        let path = Path::new(s);
        if path.is_file() {
            return Ok(Script::File(path.to_path_buf()));
        }
        match lockstack_workloads::pgbench::script::Builtin::find(s) {
            Ok(b) => Ok(Script::Builtin(b.name.to_string())),
            Err(e) => {
                Err(Failure::input(format!("--script {s:?}: neither a script file nor a built-in ({e})")))
            }
        }
    }

    /// pgbench's arguments for it.
    fn args(&self) -> Vec<std::ffi::OsString> {
        match self {
            Script::Builtin(n) => vec!["-b".into(), n.into()],
            Script::File(p) => vec!["-f".into(), absolute(p).into_os_string()],
        }
    }

    /// How titles name it (`-b select-only`, `-f FILE`).
    fn label(&self) -> String {
        match self {
            Script::Builtin(n) => format!("-b {n}"),
            Script::File(p) => format!("-f {}", p.display()),
        }
    }

    /// The name a `--measured` file's `workload` column gives it: the built-in's full name or
    /// the file as given.
    fn name(&self) -> String {
        match self {
            Script::Builtin(n) => n.clone(),
            Script::File(p) => p.display().to_string(),
        }
    }
}

/// The sweep's points, validated.
#[derive(Debug)]
struct Plan {
    profiles: Vec<(String, String)>,
    presets: Vec<String>,
    clients: Vec<usize>,
    transactions: u64,
    scale: u64,
    jobs: usize,
    script: Script,
}

/// Splits a comma-separated list, refusing empty items and duplicates.
fn list<'a>(flag: &str, s: &'a str) -> Result<Vec<&'a str>, Failure> {
    let mut items: Vec<&str> = Vec::new();
    for item in s.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(Failure::input(format!("{flag}: empty item in \"{s}\"")));
        }
        if items.contains(&item) {
            return Err(Failure::input(format!("{flag}: \"{item}\" is given twice in \"{s}\"")));
        }
        items.push(item);
    }
    Ok(items)
}

/// `--profiles`: (name for the CSV and the plot, argument for `--machine`).
fn parse_profiles(s: &str) -> Result<Vec<(String, String)>, Failure> {
    if s.trim() == "all" {
        return Ok(BUILTIN.iter().map(|(n, _)| (n.to_string(), n.to_string())).collect());
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for item in list("--profiles", s)? {
        let p =
            crate::sim_cmd::resolve_profile(item).map_err(|e| Failure::input(format!("--profiles: {e}")))?;
        if out.iter().any(|(n, _)| *n == p.name) {
            return Err(Failure::input(format!("--profiles: two profiles are named \"{}\"", p.name)));
        }
        out.push((p.name, item.to_string()));
    }
    Ok(out)
}

/// `--presets`: names from [`lockstack_engine::engine::PRESETS`].
fn parse_presets(s: &str) -> Result<Vec<String>, Failure> {
    let valid = lockstack_engine::engine::PRESETS;
    list("--presets", s)?
        .into_iter()
        .map(|p| {
            if valid.contains(&p) {
                Ok(p.to_string())
            } else {
                Err(Failure::input(format!(
                    "--presets: unknown preset \"{p}\" (valid: {})",
                    valid.join(", ")
                )))
            }
        })
        .collect()
}

/// A count flag that must be at least 1.
fn positive(flag: &str, v: i64) -> Result<u64, Failure> {
    u64::try_from(v)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| Failure::input(format!("{flag} must be at least 1, got {v}")))
}

impl Plan {
    fn new(args: &SweepArgs) -> Result<Plan, Failure> {
        let jobs = positive("--jobs", args.jobs)?;
        if jobs > 64 {
            return Err(Failure::input(format!("--jobs must be at most 64, got {jobs}")));
        }
        let scale = positive("--scale", args.scale)?;
        if scale > 1000 {
            return Err(Failure::input(format!("--scale must be at most 1000, got {scale}")));
        }
        Ok(Plan {
            profiles: parse_profiles(&args.profiles)?,
            presets: parse_presets(&args.presets)?,
            clients: crate::clients_arg::parse_clients(&args.clients)?,
            transactions: positive("--transactions", args.transactions)?,
            scale,
            jobs: jobs as usize,
            script: Script::parse(&args.script)?,
        })
    }

    /// Every point, profile-major, then preset, then clients.
    fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for (profile, _) in &self.profiles {
            for preset in &self.presets {
                for &clients in &self.clients {
                    out.push(Point {
                        profile: profile.clone(),
                        preset: preset.clone(),
                        clients,
                        per_client: self.transactions.div_ceil(clients as u64),
                    });
                }
            }
        }
        out
    }

    /// The `--machine` argument of a profile name.
    fn machine_arg<'a>(&'a self, profile: &'a str) -> &'a str {
        self.profiles.iter().find(|(n, _)| n == profile).map_or(profile, |(_, a)| a.as_str())
    }
}

/// Set by the first SIGINT, SIGTERM or SIGHUP: the sweep stops its children and ends.
static STOP: lockstack_common::sync::AtomicBool = lockstack_common::sync::AtomicBool::new(false);

/// Whether a signal asked the sweep to stop.
fn stopped() -> bool {
    STOP.load(lockstack_common::sync::Ordering::Relaxed)
}

/// The failure an interrupted sweep ends with (exit code 130, as a shell reports SIGINT).
fn interrupted() -> Failure {
    Failure {
        message: "interrupted: the running points were stopped; no CSV or SVG was written".into(),
        code: 130,
    }
}

/// A running point.
struct Running {
    point: Point,
    child: Child,
    json: PathBuf,
    err: PathBuf,
}

/// `p` made absolute against this process's working directory (the children run in
/// `DIR/points/`), unchanged if that fails.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// Starts one point: this binary, `pgbench -s S --load-from image -b NAME|-f FILE -c C -j C -t T
/// --machine P --preset X --json STEM.json`, run in `dir` (`DIR/points/`, where the load image
/// is), its stdout (the report) in `STEM.txt`, its stderr in `STEM.err` (removed after a success
/// if empty).
///
/// The child's arguments name its files relative to `dir`, so they are the same whatever `--out`
/// is: a simulated run's figures depend on where the process's earlier allocations put its
/// heap, and an argument a few bytes longer moved them (the same point gave 192,285 and 196,689
/// tps in two sweeps that differed only in the length of `--out`). Files the user named
/// (`--script`, a profile file, `--home`) are passed as absolute paths.
fn start(exe: &Path, plan: &Plan, point: &Point, dir: &Path) -> Result<Running, Failure> {
    let stem = point.stem();
    let json_name = format!("{stem}.json");
    let json = dir.join(&json_name);
    let txt = dir.join(format!("{stem}.txt"));
    let err = dir.join(format!("{stem}.err"));
    let _ = std::fs::remove_file(&json);
    let file = |p: &Path| {
        std::fs::File::create(p).map_err(|e| Failure::output(format!("--out: {}: {e}", p.display())))
    };
    let c = point.clients.to_string();
    let mut cmd = child::command(exe);
    cmd.current_dir(dir);
    // The user directory, where the children find user profiles.
    if let Some(home) = lockstack_workloads::experiments::user_dir::overridden() {
        cmd.arg("--home").arg(absolute(home));
    }
    let machine = plan.machine_arg(&point.profile);
    let machine = if Path::new(machine).is_file() {
        absolute(Path::new(machine)).into_os_string()
    } else {
        machine.into()
    };
    let child = cmd
        .args(["pgbench", "-s", &plan.scale.to_string(), "--load-from", image::IMAGE_DIR])
        .args(plan.script.args())
        .args(["-c", &c, "-j", &c])
        .args(["-t", &point.per_client.to_string(), "--machine"])
        .arg(machine)
        .args(["--preset", &point.preset, "--json", &json_name])
        .stdout(file(&txt)?)
        .stderr(file(&err)?)
        .spawn()
        .map_err(|e| {
            Failure::run(format!("point {}: could not start {}: {e}", point.label(), exe.display()))
        })?;
    Ok(Running { point: point.clone(), child, json, err })
}

/// Runs every point, `plan.jobs` at a time. On the first failure the running children are
/// killed and the failure names the point (exit 2).
fn run_points(plan: &Plan, exe: &Path, dir: &Path) -> Result<Vec<PointResult>, Failure> {
    let points = plan.points();
    let mut progress = crate::progress::Progress::new("machine sweep", points.len());
    let mut queue = points.iter();
    let mut running: Vec<Running> = Vec::new();
    let mut results: Vec<PointResult> = Vec::new();
    let outcome = loop {
        if stopped() {
            break Err(interrupted());
        }
        let mut not_started = None;
        while not_started.is_none()
            && running.len() < plan.jobs
            && let Some(p) = queue.next()
        {
            match start(exe, plan, p, dir) {
                Ok(r) => running.push(r),
                Err(f) => not_started = Some(f),
            }
            progress.set_message(p.label());
        }
        if let Some(f) = not_started {
            break Err(f);
        }
        if running.is_empty() {
            break Ok(());
        }
        let mut finished = None;
        for (i, r) in running.iter_mut().enumerate() {
            match r.child.try_wait() {
                Ok(Some(status)) => {
                    finished = Some((i, Ok(status)));
                    break;
                }
                Ok(None) => {}
                Err(e) => {
                    finished = Some((i, Err(e)));
                    break;
                }
            }
        }
        let Some((i, status)) = finished else {
            sleep(Duration::from_millis(10));
            continue;
        };
        let r = running.swap_remove(i);
        let label = r.point.label();
        let status = match status {
            Ok(s) => s,
            Err(e) => break Err(Failure::run(format!("point {label}: waiting for the child: {e}"))),
        };
        if !status.success() {
            let code =
                status.code().map_or_else(|| "killed by a signal".to_string(), |c| format!("exit code {c}"));
            break Err(Failure::run(format!(
                "point {label} failed ({code}): {}",
                child::last_line_of(&r.err)
            )));
        }
        // A successful child's stderr is kept only when it said something.
        if std::fs::metadata(&r.err).is_ok_and(|m| m.len() == 0) {
            let _ = std::fs::remove_file(&r.err);
        }
        match read_result(&r.point, &r.json) {
            Ok(res) => results.push(res),
            Err(e) => break Err(Failure::run(format!("point {label}: {e}"))),
        }
        progress.inc();
    };
    progress.finish();
    if let Err(f) = outcome {
        for mut r in running {
            let _ = r.child.kill();
            let _ = r.child.wait();
            // A stopped point's report is cut short: its files go, the finished points' stay.
            for f in [r.json.with_extension("txt"), r.json.clone(), r.err.clone()] {
                let _ = std::fs::remove_file(f);
            }
        }
        return Err(f);
    }
    // Points finish out of order; the CSV and the table are in plan order.
    results.sort_by_key(|r| points.iter().position(|p| p.stem() == r.point.stem()));
    Ok(results)
}

/// The CSV's header. Every column but the last (`host_s`) repeats from run to run.
const CSV_HEADER: &str = "profile,preset,clients,transactions,tps,virtual_s,events,transfers,top_wait,\
top_wait_share,unclassified_share,hot_line,hot_line_transfers,host_s";

/// A CSV field, quoted when it holds a comma or a quote.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// A share as written: float error's tiny negatives (and -0.0) are 0, so no `-0.0000`.
fn share(x: f64) -> f64 {
    if x <= 0.0 { 0.0 } else { x }
}

/// `sweep.csv`'s text.
fn csv_text(results: &[PointResult]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in results {
        let _ = writeln!(
            s,
            "{},{},{},{},{:.1},{:.6},{},{},{},{:.4},{:.4},{},{},{:.3}",
            field(&r.point.profile),
            r.point.preset,
            r.point.clients,
            r.transactions,
            r.tps,
            r.virtual_s,
            r.events,
            r.transfers,
            field(&r.top_wait),
            share(r.top_wait_share),
            share(r.unclassified_share),
            field(&r.hot_line),
            r.hot_line_transfers,
            r.host_s
        );
    }
    s
}

/// `y` with a k / M suffix.
fn short(y: f64) -> String {
    if y.abs() >= 1e6 {
        format!("{:.2}M", y / 1e6)
    } else if y.abs() >= 1e4 {
        format!("{:.0}k", y / 1e3)
    } else if y.abs() >= 1e3 {
        format!("{:.1}k", y / 1e3)
    } else {
        format!("{y:.0}")
    }
}

/// The table on stdout: tps per (profile, preset) row and client column, then the top wait
/// class at the largest client count.
fn table(plan: &Plan, results: &[PointResult]) -> String {
    let mut s = String::new();
    let _ = write!(s, "{:<12} {:<6}", "profile", "preset");
    for c in &plan.clients {
        let _ = write!(s, " {:>8}", format!("c={c}"));
    }
    let cmax = plan.clients.last().copied().unwrap_or(1);
    let _ = writeln!(s, "  top wait at c={cmax}");
    for (profile, _) in &plan.profiles {
        for preset in &plan.presets {
            let _ = write!(s, "{profile:<12} {preset:<6}");
            let row = |c: usize| {
                results.iter().find(|r| {
                    r.point.profile == *profile && r.point.preset == *preset && r.point.clients == c
                })
            };
            for &c in &plan.clients {
                let _ = write!(s, " {:>8}", row(c).map_or("-".to_string(), |r| short(r.tps)));
            }
            match row(cmax) {
                Some(r) if r.top_wait != "none" => {
                    let _ = writeln!(s, "  {} {:.1}%", r.top_wait, r.top_wait_share * 100.0);
                }
                _ => {
                    let _ = writeln!(s, "  none");
                }
            }
        }
    }
    s
}

/// The user's `--measured` file, checked against the sweep: `variant` one of its presets,
/// `workload` its script's name.
fn read_measured(plan: &Plan, path: &Path) -> Result<Measured, Failure> {
    let presets: Vec<&str> = plan.presets.iter().map(String::as_str).collect();
    let script = plan.script.name();
    Measured::read_for(path, "machine sweep", &presets, &[script.as_str()])
        .map_err(|e| Failure::input(e.to_string()))
}

/// Runs `lockstack machine sweep`.
///
/// # Errors
/// Bad input (an unknown profile or preset, a bad client list, `--out` that is a file, a
/// `--measured` file that cannot be used, named with its line and field): exit 1.
/// A point whose child fails, or whose `--json` is unreadable: exit 2, naming the point. A file
/// that cannot be written: exit 1.
pub(crate) fn run(args: SweepArgs) -> Result<(), Failure> {
    let plan = Plan::new(&args)?;
    let measured = args.measured.as_deref().map(|p| read_measured(&plan, p)).transpose()?;
    let out = &args.out;
    if out.exists() && !out.is_dir() {
        return Err(Failure::input(format!("--out {}: is not a directory", out.display())));
    }
    let points_dir = out.join("points");
    std::fs::create_dir_all(&points_dir)
        .map_err(|e| Failure::input(format!("--out {}: {e}", out.display())))?;
    // A signal stops the children and removes the load image instead of leaving both behind
    // (the children get a terminal's SIGINT themselves; `kill` of this process reaches only it).
    ctrlc::set_handler(|| STOP.store(true, lockstack_common::sync::Ordering::Relaxed))
        .map_err(|e| Failure::input(format!("machine sweep: cannot install the signal handler: {e}")))?;
    let t0 = Instant::now();
    let exe = child::this_binary("cannot find this binary to run the points")?;
    let image = image::load(&exe, plan.scale, &points_dir)?;
    let results = run_points(&plan, &exe, &points_dir);
    if !args.keep_image {
        image.remove();
    }
    let results = results?;
    let wall = t0.elapsed().as_secs_f64();
    out!("{}", table(&plan, &results));
    let csv = out.join("sweep.csv");
    std::fs::write(&csv, csv_text(&results))
        .map_err(|e| Failure::output(format!("{}: {e}", csv.display())))?;
    let svg_text = plot::render_svg(&plan, &results, measured.as_ref())
        .map_err(|e| Failure::run(format!("drawing sweep.svg: {e}")))?;
    let svg = out.join("sweep.svg");
    std::fs::write(&svg, svg_text).map_err(|e| Failure::output(format!("{}: {e}", svg.display())))?;
    outln!(
        "{} points in {wall:.1} host seconds (--jobs {}); wrote {}, {} and {}",
        results.len(),
        plan.jobs,
        csv.display(),
        svg.display(),
        points_dir.display()
    );
    let kept = if args.keep_image {
        format!("kept in {} (remove it when done)", image.path.display())
    } else {
        "removed at the end (--keep-image keeps it)".to_string()
    };
    outln!(
        "the tables (scale {}) were loaded once, in {:.1} host seconds, into a {:.1} MB load image every point \
         started from; {kept}",
        plan.scale,
        image.load_s,
        image.bytes as f64 / 1e6
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_checked() {
        assert!(parse_presets("pg92,pg17").is_ok());
        assert!(parse_presets("pg93").unwrap_err().message.contains("pg91"));
        assert!(parse_profiles("host,cray-1").unwrap_err().message.contains("cray-1"));
        assert_eq!(parse_profiles("all").map_err(|f| f.message).unwrap().len(), BUILTIN.len());
    }

    #[test]
    fn transactions_are_split_over_the_clients() {
        let plan = Plan {
            profiles: vec![("host".into(), "host".into())],
            presets: vec!["pg92".into()],
            clients: vec![1, 3, 128],
            transactions: 1000,
            scale: 1,
            jobs: 1,
            script: Script::Builtin("select-only".into()),
        };
        let t: Vec<u64> = plan.points().iter().map(|p| p.per_client).collect();
        assert_eq!(t, vec![1000, 334, 8]);
    }

    #[test]
    fn scripts_are_built_ins_by_name_or_files() {
        let s = Script::parse("tpcb").map_err(|f| f.message).unwrap();
        assert_eq!(s.label(), "-b tpcb-like");
        let f = tempfile::NamedTempFile::new().unwrap();
        let s = Script::parse(f.path().to_str().unwrap()).map_err(|f| f.message).unwrap();
        assert_eq!(s.args()[0], "-f");
        let e = Script::parse("no-such-script").unwrap_err();
        assert!(
            e.message.starts_with("--script \"no-such-script\": neither a script file nor a built-in"),
            "{}",
            e.message
        );
    }

    #[test]
    fn shares_from_float_error_are_written_as_zero() {
        assert_eq!(format!("{:.4}", share(-0.0)), "0.0000");
        assert_eq!(format!("{:.4}", share(-1e-12)), "0.0000");
        assert_eq!(format!("{:.4}", share(0.25)), "0.2500");
    }

    #[test]
    fn csv_fields_with_commas_are_quoted() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(field("buffer 12 state"), "buffer 12 state");
    }
}
