//! The experiment driver's errors: [`PlanError`] (options a plan refuses) and [`PointError`]
//! (a point that could not be measured). Each displays as the one line the command prints.
//! No locks.

use lockstack_common::KnobError;
use lockstack_engine::error::EngineError;
use lockstack_engine::settings::SettingsError;

use super::{MAX_CLIENTS, MAX_DURATION_S, MAX_RUNS, VM_CHECK_KEY};
use crate::experiments::CalibrationsError;
use crate::micro::BenchError;
use crate::pgbench::script::BuiltinError;

/// Why [`super::Plan::new`] (or a plan's configuration of a variant) refused the options.
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
