//! `lockstack machine list|show|calibrate|sweep`: the simulated machines' profiles (crate
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
    /// Print a profile as TOML: a built-in name (with its citation comments) or a FILE.
    Show {
        /// A built-in profile's name (see `lockstack machine list`) or a profile file.
        profile: String,
    },
    /// Measure this host's line ping-pong, atomic, fence, pause, memory and futex costs with
    /// real threads (about two seconds) and write them as a `host` profile.
    Calibrate {
        /// Write the profile to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<std::path::PathBuf>,
    },
    /// Run pgbench -S on simulated machines for every profile, preset and client count (one
    /// child run per point) and write DIR/sweep.csv, DIR/sweep.svg and a table.
    Sweep(crate::machine_sweep::SweepArgs),
}

pub(crate) fn run(args: MachineArgs) -> Result<(), Failure> {
    match args.action {
        MachineAction::Sweep(sweep) => crate::machine_sweep::run(sweep),
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
            MachineProfile::resolve(&profile).map_err(|e| Failure::input(e.to_string()))?;
            let text = std::fs::read_to_string(&profile)
                .map_err(|e| Failure::input(format!("machine profile {profile}: {e}")))?;
            out!("{text}");
            Ok(())
        }
        MachineAction::Calibrate { out } => {
            if let Some(path) = &out
                && path.is_dir()
            {
                return Err(Failure::input(format!("--out {}: is a directory", path.display())));
            }
            let costs = lockstack_sim::calibrate::measure();
            let text = lockstack_sim::calibrate::host_profile_toml(&costs);
            MachineProfile::from_toml(&text, "calibrated host")
                .map_err(|e| Failure::run(format!("the measured profile is not valid: {e}")))?;
            match out {
                Some(path) => std::fs::write(&path, &text)
                    .map_err(|e| Failure::output(format!("--out {}: {e}", path.display())))?,
                None => out!("{text}"),
            }
            Ok(())
        }
    }
}
