//! The experiments' typed errors: [`UnknownExperiment`] ([`super::find`]),
//! [`CalibrationsError`] (the user's calibrations file, [`super::user_dir`]),
//! [`PointsError`] (point files, [`super::points`]), and the driver's [`PlanError`] (options a
//! plan refuses) and [`PointError`] (a point that could not be measured). Each displays as the one line the command
//! prints. No locks.

use std::path::PathBuf;

use lockstack_common::KnobError;
use lockstack_common::input::NamedReadError;
use lockstack_engine::error::EngineError;
use lockstack_engine::settings::SettingsError;

use super::limits::{ENV, FORMAT, MAX_CLIENTS, MAX_DURATION_S, MAX_RUNS, VM_CHECK_KEY};
use crate::micro::BenchError;
use crate::pgbench::script::BuiltinError;

/// [`super::find`] was given a name no experiment has.
#[derive(Debug, thiserror::Error)]
#[error("unknown experiment \"{name}\" (valid: {valid})")]
pub struct UnknownExperiment {
    /// The name given.
    pub name: String,
    /// Every experiment's name, comma-separated.
    pub valid: String,
}

impl From<UnknownExperiment> for String {
    fn from(e: UnknownExperiment) -> String {
        e.to_string()
    }
}

/// [`super::user_dir::dir`] found none of `--home`, `$LOCKSTACK_HOME`, `$XDG_CONFIG_HOME` and
/// `$HOME` set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no user directory: give --home DIR or set {} (HOME is not set either)", ENV)]
pub struct NoUserDir;

/// For callers that carry errors as text: the message, as displayed.
impl From<NoUserDir> for String {
    fn from(e: NoUserDir) -> String {
        e.to_string()
    }
}

/// Why the user's calibrations file could not be read or stored.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationsError {
    /// None of `--home`, `$LOCKSTACK_HOME`, `$XDG_CONFIG_HOME` and `$HOME` is set.
    #[error(transparent)]
    NoUserDir(#[from] NoUserDir),
    /// The file exists but cannot be read (or is too large).
    #[error(transparent)]
    Read(#[from] NamedReadError),
    /// The file does not parse as `[[calibration]]` rows; `message` is the parser's, on one
    /// line with its line and column.
    #[error("{}: not a calibrations file: {message} (fix or delete it)", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// The TOML parser's message, trimmed.
        message: String,
    },
    /// A row's value is outside what a run accepts (the bounds of the knob it becomes).
    #[error("{}: [[calibration]] row {row} ({key}): {field} = {value} is out of range (valid: {valid}; fix or delete the row)", path.display())]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// The row, 1-based, in file order.
        row: usize,
        /// The row's experiment, machine and workload (`pgxact, xeon-32, select-only`).
        key: String,
        /// The field (`postgres_ipc`, `tps`, `clients`).
        field: &'static str,
        /// The value as read.
        value: f64,
        /// The accepted values.
        valid: &'static str,
    },
    /// The user's directory cannot be created.
    #[error("{}: cannot create the user directory: {source} (give --home DIR)", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Writing the file (or its temporary, renamed into place) failed.
    #[error("{}: {source} (give --home DIR elsewhere)", path.display())]
    Write {
        /// The file written or renamed.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

impl From<CalibrationsError> for String {
    fn from(e: CalibrationsError) -> String {
        e.to_string()
    }
}

impl From<&CalibrationsError> for String {
    fn from(e: &CalibrationsError) -> String {
        e.to_string()
    }
}

/// Why a point file could not be written, or a directory of them not merged.
#[derive(Debug, thiserror::Error)]
pub enum PointsError {
    /// Measuring the point failed.
    #[error(transparent)]
    Run(PointError),
    /// The point file's plan names no experiment.
    #[error(transparent)]
    UnknownExperiment(#[from] UnknownExperiment),
    /// The point file's options are refused by [`super::driver::Plan::new`].
    #[error(transparent)]
    Plan(PlanError),
    /// The options of a point file do not resolve to themselves (an edited file).
    #[error("the options of experiment {experiment} do not resolve to themselves")]
    NotSelfResolving {
        /// The experiment.
        experiment: String,
    },
    /// A point file cannot be encoded as JSON.
    #[error("encoding the point file: {0}")]
    Encode(serde_json::Error),
    /// An I/O error on a file or directory.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The directory holds no `NAME-point-K.json` file.
    #[error("{}: no point files (NAME-point-K.json, written by --point K --out DIR)", dir.display())]
    NoPointFiles {
        /// The directory.
        dir: PathBuf,
    },
    /// A point file cannot be read (or is too large).
    #[error(transparent)]
    Read(#[from] NamedReadError),
    /// A file does not parse as a point file.
    #[error("{}: not a point file: {source}", path.display())]
    NotAPointFile {
        /// The file.
        path: PathBuf,
        /// The JSON parser's error.
        source: serde_json::Error,
    },
    /// A point file of another format.
    #[error("{}: format \"{format}\", expected \"{}\"", path.display(), FORMAT)]
    Format {
        /// The file.
        path: PathBuf,
        /// The format it states.
        format: String,
    },
    /// Two files come from different plans; `difference` is the first field that differs,
    /// as `name (A vs B)`.
    #[error("{} and {} come from different plans: {difference}", first.display(), other.display())]
    DifferentPlans {
        /// The first file.
        first: PathBuf,
        /// The file that differs.
        other: PathBuf,
        /// The first differing field.
        difference: String,
    },
    /// Two files come from different runs: their context differs at `key` (`a` and `b` are
    /// the values, quoted, or `none`).
    #[error("{} and {} come from different runs: {key} ({a} vs {b})", first.display(), other.display())]
    DifferentRuns {
        /// The first file.
        first: PathBuf,
        /// The file that differs.
        other: PathBuf,
        /// The context key.
        key: String,
        /// The first file's value.
        a: String,
        /// The other file's value.
        b: String,
    },
    /// The plan of the first file is refused; `message` is why.
    #[error("{}: {message}", path.display())]
    FilePlan {
        /// The first file.
        path: PathBuf,
        /// Why its plan is refused.
        message: Box<PointsError>,
    },
    /// A point's index or count does not fit the plan.
    #[error("{}: point {index} of {total}, but the plan has {points} points", path.display())]
    OutOfPlan {
        /// The file.
        path: PathBuf,
        /// Its index.
        index: usize,
        /// Its point count.
        total: usize,
        /// The plan's point count.
        points: usize,
    },
    /// A point's run, workload, clients or variant differ from the plan's point at its index;
    /// `got` and `want` are each `run R WORKLOAD c=N VARIANT`.
    #[error("{}: point {index} is {got}, but the plan's point {plan_index} is {want}", path.display())]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// Its index.
        index: usize,
        /// The plan's point's index.
        plan_index: usize,
        /// What the file holds.
        got: String,
        /// What the plan has there.
        want: String,
    },
    /// Two files hold the same point.
    #[error("point {index} is present twice: {} and {}", first.display(), second.display())]
    Twice {
        /// The index.
        index: usize,
        /// The first file.
        first: PathBuf,
        /// The second.
        second: PathBuf,
    },
    /// Points are missing; `shown` lists the first few indexes (with `, ...` when more).
    #[error("{}: {missing} of {points} points missing: {shown}", dir.display())]
    Missing {
        /// The directory.
        dir: PathBuf,
        /// How many are missing.
        missing: usize,
        /// The plan's point count.
        points: usize,
        /// The first indexes, comma-separated.
        shown: String,
    },
}

impl From<PointsError> for String {
    fn from(e: PointsError) -> String {
        e.to_string()
    }
}

/// Why [`super::driver::Plan::new`] (or a plan's configuration of a variant) refused the options.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// `--clients` with an empty list.
    #[error("--clients: no client count given")]
    NoClients,
    /// A client count of 0 or above [`MAX_CLIENTS`] (the count).
    #[error("--clients: each count must be 1..={MAX_CLIENTS}, got {0}")]
    ClientCount(usize),
    /// A duration that is not a positive number of at most [`MAX_DURATION_S`] s (seconds).
    #[error("--duration must be above 0 and at most {MAX_DURATION_S} seconds, got {0}")]
    Duration(f64),
    /// Runs outside 1..=[`MAX_RUNS`] (the count).
    #[error("--runs must be 1..={MAX_RUNS}, got {0}")]
    Runs(usize),
    /// A scale outside the experiment's range.
    #[error("--scale must be 1..={max} for {experiment}, got {scale}")]
    Scale {
        /// The largest scale the experiment takes.
        max: i64,
        /// The experiment.
        experiment: &'static str,
        /// The scale given.
        scale: i64,
    },
    /// A preset, pool size, memory check or `--set` assignment the settings refuse.
    #[error(transparent)]
    Settings(#[from] SettingsError),
    /// A workload the experiment does not have; `valid` lists its workloads, comma-separated.
    #[error("unknown workload \"{name}\" for {experiment} (valid: {valid})")]
    UnknownWorkload {
        /// The name given.
        name: String,
        /// The experiment.
        experiment: &'static str,
        /// Its workloads.
        valid: String,
    },
    /// `--workload` with an empty list.
    #[error("--workload: no workload given")]
    NoWorkload,
    /// `--set` of a knob the experiment's variants set (it would erase the comparison).
    #[error("--set {key}: the {experiment} experiment varies this knob itself (its variants set it)")]
    VariedKnob {
        /// The knob.
        key: String,
        /// The experiment.
        experiment: &'static str,
    },
    /// `--set` of the visibility-check knob outside `vm-pin` (the knob).
    #[error("--set {0}: only vm-pin has a visibility-check knob")]
    VmCheckKnob(String),
    /// `--set` of a knob `vm-pin`'s buffer pool does not read; `accepted` lists those it does.
    #[error("--set {key}: vm-pin builds a buffer pool only; it accepts {accepted}")]
    VmPinKnob {
        /// The knob.
        key: String,
        /// The knobs it accepts, comma-separated.
        accepted: String,
    },
    /// A `vm-pin` variant that assigns no visibility check (the variant).
    #[error("variant {0}: no {VM_CHECK_KEY} assignment")]
    NoVmCheck(&'static str),
    /// The user's calibrations file, needed on a seed's machine, cannot be read.
    #[error("{0}")]
    Calibrations(&'static CalibrationsError),
    /// The buffer scenario's configuration is refused.
    #[error(transparent)]
    Buffers(#[from] BenchError),
}

/// For callers that carry errors as text: the message, as displayed.
impl From<PlanError> for String {
    fn from(e: PlanError) -> String {
        e.to_string()
    }
}

/// Why a point of a plan could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum PointError {
    /// The plan's configuration of the point is refused.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The calibrated `sim.postgres_ipc` could not be set.
    #[error(transparent)]
    Knob(#[from] KnobError),
    /// The workload names no built-in pgbench script.
    #[error(transparent)]
    Builtin(#[from] BuiltinError),
    /// The pgbench run failed (an engine error other than a failed transaction).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The buffer scenario failed.
    #[error(transparent)]
    Buffers(#[from] BenchError),
    /// The buffer scenario finished without its result row.
    #[error("the buffer experiment returned no row")]
    NoBufferRow,
}

/// For callers that carry errors as text: the message, as displayed.
impl From<PointError> for String {
    fn from(e: PointError) -> String {
        e.to_string()
    }
}
