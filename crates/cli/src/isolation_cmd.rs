//! `lockstack isolation`: run isolation specs over the lock manager and print, or compare
//! with expected output as PostgreSQL's `pg_isolation_regress` does.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use lockstack_workloads::isolation::{self, Comparison, FastPath, IsolationConfig, LmgrConfig, VxidLocks};

use crate::Failure;

/// Arguments of `lockstack isolation`.
#[derive(Args, Debug)]
pub(crate) struct IsolationArgs {
    /// Spec files to run (PostgreSQL isolation tester syntax; the SQL docs/workloads.md lists).
    #[arg(required = true, value_name = "FILE.spec")]
    specs: Vec<PathBuf>,
    /// Expected output: a file (one spec) or a directory holding NAME.out (and NAME_1.out ...).
    /// Without it the output is printed.
    #[arg(long, value_name = "FILE|DIR")]
    expected: Option<PathBuf>,
    /// Fast-path relation locks: on or off.
    #[arg(long, default_value = "on")]
    fast_path: String,
    /// VXID locks: eager or on-demand.
    #[arg(long, default_value = "on-demand")]
    vxid: String,
    /// Seconds a step may run before the spec fails.
    #[arg(long, default_value_t = 60.0)]
    step_timeout: f64,
    /// Only print the permutations that would run (isolationtester -n).
    #[arg(short = 'n', long)]
    dry_run: bool,
}

pub(crate) fn run(args: IsolationArgs) -> Result<(), Failure> {
    let fast_path = match args.fast_path.as_str() {
        "on" => FastPath::PG92,
        "off" => FastPath::Off,
        other => return Err(Failure::input(format!("--fast-path must be on or off, got '{other}'"))),
    };
    let vxid: VxidLocks = args.vxid.parse().map_err(|e| Failure::input(format!("--vxid: {e}")))?;
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
        lmgr: LmgrConfig { fast_path, vxid, ..LmgrConfig::default() },
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
                isolation::read_expected(&isolation::expected_candidates(path, exp))
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
