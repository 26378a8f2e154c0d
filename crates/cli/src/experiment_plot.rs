//! `lockstack experiment plot DIR [--out OUT]`: redraws the plots of the runs whose `NAME.json`
//! files are in DIR (`NAME.svg`, and `NAME-time.svg` when the points carry time splits), and
//! writes `wait-colours.svg`, the legend every time plot shares, without running anything.
//! No locks.

use std::path::{Path, PathBuf};

use lockstack_workloads::experiments::output::{self, load};

use crate::Failure;

/// Runs `experiment plot`: `dir` is DIR, `out` is `--out` (default DIR); `only_plot` says that
/// nothing but DIR and `--out` was given (the caller, which owns the arguments, checks).
///
/// # Errors
/// No DIR, an option other than `--out`, a DIR without any `NAME.json`, or a file that cannot
/// be read back: exit 1 naming it. A plot that cannot be written: exit 1 naming the file.
pub(crate) fn run(only_plot: bool, dir: Option<&Path>, out: Option<&Path>) -> Result<(), Failure> {
    let Some(dir) = dir else {
        return Err(Failure::input("experiment plot needs DIR, a directory holding NAME.json files of runs"));
    };
    if !only_plot {
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
