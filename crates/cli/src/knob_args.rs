//! The arguments every command that runs one subsystem (`lockstack lwlock|locks|buffers|
//! snapshot|wal`) takes, flattened into each command's own (`#[command(flatten)]`): the
//! preset and `--set` knobs it reads, and `--json`; and the run-and-report tail and report
//! heading those commands share. Locks: none.

use std::path::PathBuf;

use clap::Args;
use lockstack_engine::settings::{CommandConfig, CommandKnobs, FlagAlias};
use lockstack_workloads::report::MachineNote;

use crate::Failure;

/// `--preset`, `--set` and `--json` of a command that runs one subsystem.
#[derive(Args, Debug)]
pub(crate) struct KnobArgs {
    /// Release preset to take this command's knobs from: pg91, pg92, pg96, pg14, pg17 (its
    /// other knobs do not apply here).
    #[arg(long)]
    pub(crate) preset: Option<String>,
    /// Set one knob this command reads: crate.knob=value (repeatable; `lockstack pgbench --set
    /// help` lists every knob). A flag and a --set of the same knob are refused.
    #[arg(long = "set", value_name = "KNOB=VALUE")]
    pub(crate) set: Vec<String>,
    /// Also write the report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
}

impl KnobArgs {
    /// The command's configuration: its defaults, then `--preset`'s assignments to the knobs
    /// it reads, the `flags` given, then `--set`
    /// (`lockstack_workloads::settings::resolve_command`).
    ///
    /// # Errors
    /// Bad input, one line: an unknown preset, a flag's value its knob refuses, an unknown
    /// `--set` key, a knob the command does not read, a bad value, a flag and a `--set` of the
    /// same knob.
    pub(crate) fn resolve(
        &self,
        knobs: &CommandKnobs,
        flags: &[FlagAlias<'_>],
    ) -> Result<CommandConfig, Failure> {
        lockstack_workloads::settings::resolve_command(knobs, self.preset.as_deref(), flags, &self.set)
            .map_err(Failure::input)
    }

    /// The tail every such command shares: checks that the `--json` file can be written
    /// ([`crate::prepare_json`]), runs the measurement, prints its text report, writes the
    /// report to `--json` ([`crate::write_json`]), and last asks `broken` whether the run's own
    /// checks failed.
    ///
    /// # Errors
    /// An unwritable `--json` file (before the run, exit 2; after it, exit 1), `run`'s own
    /// error, or `broken`'s message (exit 2) when the report fails its checks.
    pub(crate) fn run_and_report<R: serde::Serialize>(
        &self,
        run: impl FnOnce() -> Result<R, Failure>,
        print: impl FnOnce(&R),
        broken: impl FnOnce(&R) -> Option<String>,
    ) -> Result<(), Failure> {
        crate::prepare_json(self.json.as_deref())?;
        let report = run()?;
        print(&report);
        crate::write_json(self.json.as_deref(), &report)?;
        match broken(&report) {
            Some(message) => Err(Failure::run(message)),
            None => Ok(()),
        }
    }
}

/// The opening lines of such a command's text report: `title` (what ran, with its settings),
/// the machine line ([`MachineNote::line`]: cores, threads, oversubscription) and a blank line.
pub(crate) fn print_heading(title: std::fmt::Arguments<'_>, machine: &MachineNote) {
    outln!("{title}");
    outln!("{}", machine.line());
    outln!();
}

/// `--fast-path on|off` and `--vxid MODE` as the `lmgr.fast_path` and `lmgr.vxid` knobs they
/// stand for (`on` is 9.2's one group of 16 slots), for the commands that take both
/// (`lockstack locks`, `lockstack isolation`).
///
/// # Errors
/// A `--fast-path` value other than `on` or `off`, in one line.
pub(crate) fn lmgr_flag_aliases<'a>(
    fast_path: Option<&'a str>,
    vxid: Option<&'a str>,
) -> Result<[FlagAlias<'a>; 2], Failure> {
    let fast_path_value = match fast_path {
        None | Some("on") => "1",
        Some("off") => "off",
        Some(other) => return Err(Failure::input(format!("--fast-path must be on or off, got '{other}'"))),
    };
    Ok([
        FlagAlias {
            flag: "--fast-path",
            key: "lmgr.fast_path",
            given: fast_path.is_some(),
            value: Some(fast_path_value),
        },
        FlagAlias { flag: "--vxid", key: "lmgr.vxid", given: vxid.is_some(), value: vxid },
    ])
}
