//! `lockstack experiment plot DIR [--out OUT]`: redraws the plots of the runs whose `NAME.json`
//! files are in DIR (`NAME.svg`, and `NAME-time.svg` when the points carry time splits), and
//! writes `wait-colours.svg`, the legend every time plot shares, without running anything.
//! No locks.

use std::path::{Path, PathBuf};

use clap::Parser;
use lockstack_workloads::experiments::output::{self, load};

use crate::Failure;
use crate::experiment_cmd::ExperimentArgs;
use crate::sim_cmd::SimArgs;

/// `experiment plot`'s own arguments, parsed again to see whether anything else was given.
#[derive(Parser, Debug)]
struct OnlyPlot {
    #[command(flatten)]
    args: ExperimentArgs,
}

/// The arguments that `experiment plot DIR [--out OUT]` alone would give.
fn plain(dir: &Path, out: Option<&Path>) -> Option<String> {
    let mut argv: Vec<std::ffi::OsString> = vec!["plot".into(), "plot".into(), dir.into()];
    if let Some(o) = out {
        argv.push("--out".into());
        argv.push(o.into());
    }
    OnlyPlot::try_parse_from(argv).ok().map(|p| format!("{:?}", p.args))
}

/// Runs `experiment plot`: `dir` is DIR, `out` is `--out` (default DIR).
///
/// # Errors
/// No DIR, an option other than `--out`, a DIR without any `NAME.json`, or a file that cannot
/// be read back: exit 1 naming it. A plot that cannot be written: exit 1 naming the file.
pub(crate) fn run(
    args: &ExperimentArgs,
    dir: Option<&Path>,
    out: Option<&Path>,
    sim: &SimArgs,
) -> Result<(), Failure> {
    let Some(dir) = dir else {
        return Err(Failure::input("experiment plot needs DIR, a directory holding NAME.json files of runs"));
    };
    if plain(dir, out).as_deref() != Some(format!("{args:?}").as_str())
        || sim.machine.is_some()
        || !sim.machine_set.is_empty()
    {
        return Err(Failure::input(
            "experiment plot takes DIR and --out only: the plan and machine come from NAME.json",
        ));
    }
    let out: PathBuf = out.map_or_else(|| dir.to_path_buf(), Path::to_path_buf);
    let results = load::results_in(dir).map_err(Failure::input)?;
    if results.is_empty() {
        return Err(Failure::input(format!(
            "{}: no NAME.json of an experiment (pgxact.json, fastpath.json, ...)",
            dir.display()
        )));
    }
    std::fs::create_dir_all(&out).map_err(|e| Failure::output(format!("--out {}: {e}", out.display())))?;
    let write = |path: PathBuf, text: String| -> Result<(), Failure> {
        std::fs::write(&path, text).map_err(|e| Failure::output(format!("{}: {e}", path.display())))?;
        outln!("wrote {}", path.display());
        Ok(())
    };
    for json in results {
        let r = load::read_result(&json).map_err(Failure::input)?;
        let name = r.plan.experiment.name;
        write(out.join(format!("{name}.svg")), output::render_svg(&r).map_err(Failure::run)?)?;
        if let Some(svg) = output::render_time_svg(&r).map_err(Failure::run)? {
            write(out.join(format!("{name}-time.svg")), svg)?;
        }
    }
    write(out.join("wait-colours.svg"), output::render_legend_svg().map_err(Failure::run)?)
}
