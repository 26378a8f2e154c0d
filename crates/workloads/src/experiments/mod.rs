//! The five seed experiments (`lockstack experiment NAME`): each seed thread (a pgsql-hackers
//! thread, named by [`Thread`]; its published figures are transcribed in [`catalog`] and
//! `docs/experiments.md`) measured one change to PostgreSQL's lock stack; an [`Experiment`] names the
//! workloads that thread ran, the designs it compared (as `--set crate.knob=value` lists applied
//! on top of a release preset, baseline first), the counters that carry the thread's signal and
//! the figures the thread itself published.
//!
//! * [`catalog`]: the five definitions (`pgxact`, `old-snapshot`, `flexlock`, `fastpath`,
//!   `vm-pin`).
//! * [`driver`]: resolves a definition and the caller's options into a [`driver::Plan`], runs
//!   every (run, workload, clients, variant) point on a fresh engine or buffer pool, and
//!   summarises min / median / max throughput and the key counters per transaction.
//! * [`output`]: CSV, JSON and SVG files of a result, and the checks the CLI's smoke mode runs
//!   on them.
//! * [`points`]: one file per point (`--point K`) and their merge into the result a
//!   single-process run produces (`experiment merge DIR`, `--jobs N`).
//! * [`output`]: CSV, JSON and SVG files of a result (throughput against clients with the
//!   seed's published points; under `--machine`, where the simulated backends' time went), and
//!   the checks the CLI's smoke mode runs on them.
//! * [`usl`]: Gunther's Universal Scalability Law fitted to each throughput curve.
//! * [`measured`]: the user's own figures (`--measured FILE.csv`), overlaid as one more series
//!   and usable as the calibration figure.
//!
//! Like the rest of this crate, nothing here prints: the CLI formats the tables.

pub mod calibrate;
pub mod catalog;
pub mod driver;
mod error;
mod limits;
pub mod measured;
pub mod output;
pub mod points;
pub mod sensitivity;
pub mod user_dir;
pub mod usl;
pub mod validation;

use serde::Serialize;

pub use error::{CalibrationsError, NoUserDir, PointsError, UnknownExperiment};

use crate::micro::buffers::BufferScenario;

/// What one workload of an experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum WorkloadKind {
    /// A pgbench built-in script (`tpcb-like`, `simple-update` = `-N`, `select-only` = `-S`) on a
    /// freshly loaded engine ([`crate::pgbench::runner::run`]); throughput is committed
    /// transactions per second.
    Pgbench {
        /// The built-in's name as [`crate::pgbench::script::Builtin::find`] takes it.
        builtin: &'static str,
    },
    /// One scenario of the buffer-pin micro-experiment ([`crate::micro::buffers::run`]);
    /// "clients" are its worker threads and throughput is operations per second (pages
    /// scanned, or deletes).
    Buffers {
        /// `scan` or `vm-delete`.
        scenario: BufferScenario,
    },
}

/// One workload of an experiment.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Workload {
    /// Short name used in tables, files and `--workload` (`select-only`, `scan`).
    pub name: &'static str,
    /// How the seed ran it, in our words (`pgbench -S`).
    pub about: &'static str,
    /// What runs.
    pub kind: WorkloadKind,
    /// Unit of the throughput column: `tps` or `ops/s`.
    pub unit: &'static str,
}

/// One design compared by an experiment: the assignments that select it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Variant {
    /// Column name (`master`, `pgxact`, `flexlock`).
    pub name: &'static str,
    /// What it stands for in the seed thread (patch, release).
    pub about: &'static str,
    /// `crate.knob=value` assignments applied after the preset, the experiment's common
    /// assignments and the caller's `--set` list, through the knob registry
    /// [`crate::settings::KNOBS`] (`vm-pin`'s variants set [`VM_CHECK_KEY`]).
    pub set: &'static [&'static str],
}

pub use limits::VM_CHECK_KEY;

/// How a raw counter is normalised for the counter table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Per {
    /// Divided by the operations (transactions) of the run.
    Op,
    /// Divided by the operations, times 1000 (for rare events such as sleeps).
    KiloOp,
    /// A nanosecond counter (`wait_ns`) in microseconds, divided by the operations.
    UsPerOp,
    /// Per 300 s of run time (raw / elapsed s * 300), as seed 003 counts lock traffic.
    Per5Min,
    /// Per lock-manager partition and per 300 s of run time: seed 003 counts partition-lock
    /// traffic "in a five minute period" (raw / `lmgr.partitions` / elapsed s * 300).
    PartitionPer5Min,
}

impl Per {
    /// The suffix the tables print after a counter's label,
    /// for a workload whose operations are called `op` (`txn` or `op`): `/txn`, `/ktxn`,
    /// `/5min`, `/partition/5min`.
    pub fn suffix(self, op: &str) -> String {
        match self {
            Per::Op | Per::UsPerOp => format!("/{op}"),
            Per::KiloOp => format!("/k{op}"),
            Per::Per5Min => "/5min".into(),
            Per::PartitionPer5Min => "/partition/5min".into(),
        }
    }
}

/// A counter the experiment reports next to throughput.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Counter {
    /// Column label (`ProcArray ex`).
    pub label: &'static str,
    /// The path of the raw counter it reads (see [`driver::Point::counters`]:
    /// `lwlock.ProcArray.ex_acquire`, `lwlock.LockManager.acquisitions`, `buffers.vm_pins`,
    /// ...). Missing raw counters read as 0; a test checks that every key names a counter.
    pub key: &'static str,
    /// Normalisation.
    pub per: Per,
}

/// One throughput figure a seed thread published, transcribed from the seed text (the file
/// named by [`Experiment::seed`]).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Published {
    /// Our workload it corresponds to.
    pub workload: &'static str,
    /// Which series of the thread (author, machine, protocol, table kind).
    pub series: &'static str,
    /// Clients (`-c`).
    pub clients: u32,
    /// Our variant it corresponds to.
    pub variant: &'static str,
    /// Lowest run, when the thread gave it.
    pub low: Option<f64>,
    /// The figure the thread reports (a median, or a single run; tps).
    pub tps: f64,
    /// Highest run, when the thread gave it.
    pub high: Option<f64>,
}

/// The pgsql-hackers thread a seed file holds, as `experiment NAME --help`, the report and
/// `docs/experiments.md` name it.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Thread {
    /// The thread's subject line.
    pub title: &'static str,
    /// Who wrote the messages whose figures the experiment quotes (and who else took part).
    pub authors: &'static str,
    /// When: ISO dates, a range for several messages; says so where the seed file has no date.
    pub date: &'static str,
}

impl Thread {
    /// One line: `"TITLE", AUTHORS, DATE`.
    pub fn line(&self) -> String {
        format!("\"{}\", {}, {}", self.title, self.authors, self.date)
    }
}

/// One seed experiment.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Experiment {
    /// Command-line name (`pgxact`).
    pub name: &'static str,
    /// The project's seed file it reruns (`000_79bd89a301fe24a6.txt`; the seed files are not
    /// part of the repository: [`Experiment::thread`] names the thread they hold).
    pub seed: &'static str,
    /// The mailing-list thread the seed file holds: title, authors, date.
    pub thread: Thread,
    /// One line: what the seed measured.
    pub title: &'static str,
    /// Release preset the variants start from unless `--preset` says otherwise.
    pub preset: &'static str,
    /// pgbench's `-M` for the pgbench workloads, as the seed's headline figures ran: which of
    /// PostgreSQL's measured statement costs apply under `--machine --costs postgres`.
    pub protocol: crate::pgbench::runner::QueryMode,
    /// Assignments applied to every variant (before the caller's `--set` list), to match the
    /// seed's configuration (`wal.synchronous_commit=off`).
    pub common: &'static [&'static str],
    /// Workloads, in table order.
    pub workloads: &'static [Workload],
    /// Designs compared; the first is the baseline the gain % is relative to.
    pub variants: &'static [Variant],
    /// Counters shown per variant.
    pub counters: &'static [Counter],
    /// Default client counts (worker threads for `vm-pin`).
    pub clients: &'static [usize],
    /// Default seconds per point.
    pub duration_s: f64,
    /// Default runs per point.
    pub runs: usize,
    /// Where the seed's figures come from (machine, run length, scale), in our words.
    pub published_context: &'static str,
    /// The seed's throughput figures for configurations we run.
    pub published: &'static [Published],
    /// Other figures the seed gives (counters, percentages), with the numbers as the seed
    /// states them.
    pub published_notes: &'static [&'static str],
    /// The simulated machines the seed's figures come from (`--machine` profiles), with the
    /// client counts the thread ran on each.
    pub machines: &'static [SeedMachine],
}

/// A machine a seed thread measured on, as a simulated profile.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SeedMachine {
    /// The built-in profile (`lockstack machine list`).
    pub profile: &'static str,
    /// The published series ([`Published::series`]) measured on it.
    pub series: &'static [&'static str],
    /// The client counts the thread ran there: the default `--clients` under `--machine`
    /// with this profile.
    pub clients: &'static [usize],
    /// The default `--duration` under `--machine` with this profile, virtual seconds per point:
    /// chosen so that the default sweep (these clients, every variant and workload, the
    /// default runs) finishes in under 5 minutes on a 2-core host with `--jobs 2`
    /// (docs/experiments.md gives each sweep's time).
    pub duration_s: f64,
    /// The default `--scale` under `--machine` with this profile (the seeds ran at 100 or
    /// more; loading that for every point would not fit the time above).
    pub scale: i64,
}

/// One stored calibration, a row of crates/workloads/calibrations.toml: on `machine`, with
/// PostgreSQL's costs (`--costs postgres`), the baseline variant of `workload` at `clients`
/// (at most a third of the machine's cores) simulated to the published `tps` of `series` with
/// PostgreSQL's code retiring `postgres_ipc` instructions per cycle: the one fitted parameter.
/// Everything else in a run (every other client count, every other variant) is prediction.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Calibrated {
    /// The experiment.
    pub experiment: &'static str,
    /// The profile.
    pub machine: &'static str,
    /// Our workload.
    pub workload: &'static str,
    /// The published series the figure comes from.
    pub series: &'static str,
    /// The figure's client count (1 where the thread gives one).
    pub clients: u32,
    /// The figure (tps).
    pub tps: f64,
    /// The fitted `sim.postgres_ipc`.
    pub postgres_ipc: f64,
}

impl Calibrated {
    /// One line: what the run was calibrated to.
    pub fn line(&self) -> String {
        format!(
            "{} on {}: {} at {} client{} = {:.0} tps (fitted sim.postgres_ipc = {:.3})",
            self.workload,
            self.machine,
            self.series,
            self.clients,
            if self.clients == 1 { "" } else { "s" },
            self.tps,
            self.postgres_ipc
        )
    }
}

impl Experiment {
    /// The baseline variant (the first).
    ///
    /// # Panics
    /// Never for the catalog's experiments, which all have variants (a unit test checks it).
    pub fn baseline(&self) -> &Variant {
        &self.variants[0]
    }

    /// The workload called `name`.
    pub fn workload(&self, name: &str) -> Option<&Workload> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// The seed's machine entry for profile `name`, if the thread measured there.
    pub fn machine(&self, name: &str) -> Option<&SeedMachine> {
        self.machines.iter().find(|m| m.profile == name)
    }

    /// The stored calibration of `workload` on `machine`: the user's
    /// ([`user_dir::calibrations`]) when there is one, else the built-in one
    /// (crates/workloads/calibrations.toml). A user file that does not parse counts as empty
    /// here: [`driver::Plan::new`] refuses to run with it.
    pub fn calibration(&self, machine: &str, workload: &str) -> Option<&'static Calibrated> {
        let key =
            |c: &&Calibrated| c.experiment == self.name && c.machine == machine && c.workload == workload;
        user_dir::calibrations()
            .unwrap_or_default()
            .iter()
            .find(key)
            .or_else(|| calibrations().iter().find(key))
    }

    /// Every built-in stored calibration of this experiment.
    pub fn calibrations(&self) -> impl Iterator<Item = &'static Calibrated> {
        calibrations().iter().filter(move |c| c.experiment == self.name)
    }

    /// Every calibration of this experiment in the user's directory.
    ///
    /// # Errors
    /// The user's file does not parse (one line naming it).
    pub fn user_calibrations(&self) -> Result<Vec<&'static Calibrated>, &'static CalibrationsError> {
        Ok(user_dir::calibrations()?.iter().filter(|c| c.experiment == self.name).collect())
    }

    /// Points one run of the defaults measures: workloads x clients x variants x runs.
    pub fn default_points(&self) -> usize {
        self.workloads.len() * self.clients.len() * self.variants.len() * self.runs
    }
}

/// Every experiment, in `lockstack experiment list` order (by seed).
pub fn all() -> &'static [Experiment] {
    catalog::EXPERIMENTS
}

/// The experiment called `name`.
///
/// # Errors
/// An unknown name: a one-line message listing the valid ones.
pub fn find(name: &str) -> Result<&'static Experiment, UnknownExperiment> {
    all().iter().find(|e| e.name == name).ok_or_else(|| {
        let names: Vec<&str> = all().iter().map(|e| e.name).collect();
        UnknownExperiment { name: name.to_string(), valid: names.join(", ") }
    })
}

/// The stored calibrations: crates/workloads/calibrations.toml, embedded at build time.
///
/// # Panics
/// If the embedded file does not parse (a test parses it).
pub fn calibrations() -> &'static [Calibrated] {
    static ALL: std::sync::OnceLock<Vec<Calibrated>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        parse_calibrations(include_str!("../../calibrations.toml"))
            .expect("the built-in calibrations.toml parses (a test reads it)")
    })
}

/// A row of calibrations.toml as written.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct CalibrationRow {
    experiment: String,
    machine: String,
    workload: String,
    series: String,
    clients: u32,
    tps: f64,
    postgres_ipc: f64,
}

/// Parses a calibrations file (`[[calibration]]` rows); the strings are leaked, once per
/// process.
pub(crate) fn parse_calibrations(text: &str) -> Result<Vec<Calibrated>, toml::de::Error> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        #[serde(default)]
        calibration: Vec<CalibrationRow>,
    }
    let f: File = toml::from_str(text)?;
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    Ok(f.calibration
        .into_iter()
        .map(|r| Calibrated {
            experiment: leak(r.experiment),
            machine: leak(r.machine),
            workload: leak(r.workload),
            series: leak(r.series),
            clients: r.clients,
            tps: r.tps,
            postgres_ipc: r.postgres_ipc,
        })
        .collect())
}

impl Calibrated {
    /// The row as calibrations.toml holds it.
    pub fn toml(&self) -> String {
        format!(
            "[[calibration]]\nexperiment = {:?}\nmachine = {:?}\nworkload = {:?}\nseries = {:?}\nclients = {}\ntps = {:?}\npostgres_ipc = {:?}\n",
            self.experiment,
            self.machine,
            self.workload,
            self.series,
            self.clients,
            self.tps,
            self.postgres_ipc
        )
    }
}
