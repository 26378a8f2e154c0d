//! `lockstack isolation`: run isolation specs over the lock manager and print, or compare
//! with expected output as PostgreSQL's `pg_isolation_regress` does.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lockstack_engine::settings::CommandKnobs;
use lockstack_workloads::isolation::{self, Comparison, IsolationConfig};

use crate::Failure;

/// Arguments of `lockstack isolation`.
#[derive(Args, Debug)]
pub(crate) struct IsolationArgs {
    /// Spec files to run (PostgreSQL isolation tester syntax; the SQL docs/workloads.md lists).
    #[arg(required = true, value_name = "FILE.spec")]
    specs: Vec<PathBuf>,
    /// Expected output: a file (one spec) or a directory holding NAME.out (what the newest
    /// release prints), NAME_<preset>.out where an older release prints something else
    /// (nowait_pg14.out), and alternatives _1 .. _9 of either.
    /// Without it the output is printed.
    #[arg(long, value_name = "FILE|DIR")]
    expected: Option<PathBuf>,
    /// Release whose lock manager to run as: pg91, pg92, pg96, pg14, pg17 (the default; its
    /// lmgr.* knobs: fast path, VXID locks, NOWAIT queue jump).
    #[arg(long)]
    preset: Option<String>,
    /// Set one knob this command reads: lmgr.fast_path, lmgr.vxid or lmgr.nowait_queue_jump
    /// (crate.knob=value, repeatable). A flag and a --set of the same knob are refused.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    set: Vec<String>,
    /// Fast-path relation locks: on or off (default: the preset's); knob lmgr.fast_path.
    #[arg(long)]
    fast_path: Option<String>,
    /// VXID locks: eager or on-demand (default: the preset's); knob lmgr.vxid.
    #[arg(long)]
    vxid: Option<String>,
    /// Seconds a step may run before the spec fails.
    #[arg(long, default_value_t = 60.0)]
    step_timeout: f64,
    /// Only print the permutations that would run (isolationtester -n).
    #[arg(short = 'n', long)]
    dry_run: bool,
}

/// The knobs `lockstack isolation` reads; the preset (pg17 unless given) sets them all.
const KNOBS: CommandKnobs = CommandKnobs {
    command: "lockstack isolation",
    reads: &["lmgr.fast_path", "lmgr.vxid", "lmgr.nowait_queue_jump"],
    defaults: &[],
};

pub(crate) fn run(args: IsolationArgs) -> Result<(), Failure> {
    let aliases = crate::knob_args::lmgr_flag_aliases(args.fast_path.as_deref(), args.vxid.as_deref())?;
    let preset = args.preset.as_deref().unwrap_or(isolation::DEFAULT_PRESET);
    let knobs = KNOBS.resolve(Some(preset), &aliases, &args.set).map_err(Failure::input)?;
    let mut lmgr = IsolationConfig::default().lmgr;
    let chosen = &knobs.cfg.lmgr;
    (lmgr.fast_path, lmgr.vxid, lmgr.nowait_queue_jump) =
        (chosen.fast_path, chosen.vxid, chosen.nowait_queue_jump);
    if !args.step_timeout.is_finite() || args.step_timeout <= 0.0 || args.step_timeout > 86_400.0 {
        return Err(Failure::input(format!(
            "--step-timeout must be above 0 and at most 86400, got {}",
            args.step_timeout
        )));
    }
    if let Some(e) = &args.expected
        && !e.is_dir()
        && args.specs.len() != 1
    {
        return Err(Failure::input(format!(
            "--expected {}: a file needs exactly one spec (give a directory for several)",
            e.display()
        )));
    }
    let cfg = IsolationConfig {
        lmgr,
        step_timeout: Duration::from_secs_f64(args.step_timeout),
        dry_run: args.dry_run,
    };
    // Load (and check the SQL of) every spec before running any.
    let specs = args
        .specs
        .iter()
        .map(|p| isolation::load_spec(p).map(|s| (p, s)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::input(e.0))?;
    let mut failed = 0;
    for (path, spec) in &specs {
        // With --expected, the expected files are read (bounded) before the spec runs, and
        // its output is kept only up to one byte past the longest of them.
        let expected = match &args.expected {
            None => None,
            Some(exp) => Some(
                isolation::read_expected(&isolation::expected_candidates_for(path, exp, preset))
                    .map_err(|e| Failure::input(e.0))?,
            ),
        };
        if let Some(note) = isolation::permutation_note(spec) {
            errln!("{}", lockstack_workloads::input::one_line(&note));
        }
        // Without --expected the output is printed as it is produced (as PostgreSQL's tester
        // prints it), so a spec that hangs shows what led there; with it, it is compared.
        let mut keeper = expected.as_deref().map(isolation::OutputKeeper::new);
        let r = match &mut keeper {
            None => isolation::run_with(spec, &cfg, &mut |s| out!("{s}")),
            Some(k) => isolation::run_with(spec, &cfg, &mut |s| k.push(s)),
        }
        .map_err(|e| Failure { message: e.0, code: 2 })?;
        for w in &r.warnings {
            errln!("{}", lockstack_workloads::input::one_line(w));
        }
        if let Some(e) = r.aborted {
            // Show what ran before the stuck step (already shown without --expected), then
            // stop with its error.
            if let Some(k) = &keeper {
                out!("{}", k.kept());
            }
            return Err(Failure { message: e.0, code: 2 });
        }
        if let (Some(k), Some(expected)) = (&keeper, &expected) {
            match isolation::compare_output(k.kept(), k.complete(), expected) {
                Comparison::Same(_) => outln!("ok       {}", path.display()),
                Comparison::Different { expected, diff } => {
                    failed += 1;
                    outln!("FAILED   {} (differs from {})", path.display(), expected.display());
                    if !k.complete() {
                        outln!(
                            "(the output, {} bytes, is longer than every expected file; the diff shows its first {})",
                            k.total(),
                            k.kept().len()
                        );
                    }
                    out!("{diff}");
                }
            }
        }
    }
    if failed > 0 {
        return Err(Failure {
            message: format!("{failed} of {} specs differ from the expected output", specs.len()),
            code: 2,
        });
    }
    Ok(())
}
