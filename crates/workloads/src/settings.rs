//! `--set crate.knob=value` for everything the workloads run: the engine's registry
//! (`lockstack_engine::settings::KNOBS`, every subsystem crate's knobs and the engine's own)
//! composed with the simulated machine's `sim.*` knobs ([`crate::sim_knobs`]), over a
//! [`RunConfig`]. `lockstack pgbench --set`, `--set help`, the experiments, the micro commands
//! and docs/engine.md's knob table read this one list.
//!
//! The engine's helpers that do not depend on the knob list (the pool size, the memory check,
//! the engine configuration check) are re-exported, so that a caller needs this module only.
//!
//! Errors are one line: an unknown key lists every valid key, a bad value names the key and
//! lists the values it accepts.

use lockstack_common::knob::{KnobInfo, Nested, Part, Registry};
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::settings::{CommandConfig, CommandKnobs, FlagAlias};

use crate::sim_knobs::{self, SimKnobs};

pub use lockstack_engine::settings::{
    BUFFERS_PER_SCALE, BYTES_PER_SCALE, PGBENCH_BUFFER_HEADROOM, SettingsError, check_memory, pool_buffers,
    validate,
};

/// What one run is configured with: the engine's configuration and the simulated machine's
/// knobs, which the engine never reads.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// The engine's configuration (preset and overrides).
    pub engine: EngineConfig,
    /// The `sim.*` knobs (under `--machine` only).
    pub sim: SimKnobs,
}

impl RunConfig {
    /// `engine` with every `sim.*` knob at its default.
    pub fn new(engine: EngineConfig) -> RunConfig {
        RunConfig { engine, sim: SimKnobs::default() }
    }
}

static ENGINE: Part<RunConfig, EngineConfig> =
    Part { registry: &lockstack_engine::settings::KNOBS, part: |r| &mut r.engine };
static SIM: Nested<RunConfig, SimKnobs> =
    Nested { knobs: sim_knobs::KNOBS, get: |r| r.sim, put: |r, s| r.sim = s };

/// Every knob `--set` accepts, in the order `lockstack pgbench --set help` lists them: the
/// engine's registry, then [`sim_knobs::KNOBS`].
pub static KNOBS: Registry<RunConfig> = Registry { lists: &[&ENGINE, &SIM] };

/// Every knob, in listing order.
pub fn knobs() -> Vec<KnobInfo> {
    KNOBS.infos()
}

/// docs/engine.md's knob table ("Presets and knobs"): key, values, default, what it selects,
/// for every knob of [`KNOBS`]; a test keeps the document equal to it.
pub fn knob_table() -> String {
    lockstack_common::knob::markdown_table(&knobs())
}

/// Applies one `crate.knob=value` assignment to `cfg`.
///
/// # Errors
/// A one-line message when the text has no `=`, the key is unknown (listing every valid key) or
/// the value is not one the knob accepts (listing those). `cfg` is unchanged on error.
pub fn apply_set(cfg: &mut RunConfig, assignment: &str) -> Result<(), SettingsError> {
    Ok(KNOBS.assign(cfg, assignment)?)
}

/// Applies every assignment in order (see [`apply_set`]), then checks the engine's resulting
/// configuration as the engine will ([`validate`]), so that a combination the engine would
/// refuse (`clog.buffers=20` with banks) fails here, as bad input, naming the assignment.
///
/// # Errors
/// The first failing assignment's message (`cfg` keeps the assignments before it), or
/// [`validate`]'s.
pub fn apply_all<S: AsRef<str>>(cfg: &mut RunConfig, assignments: &[S]) -> Result<(), SettingsError> {
    assignments.iter().try_for_each(|a| apply_set(cfg, a.as_ref()))?;
    validate(&cfg.engine, assignments)
}

/// A command that runs one subsystem (`lockstack lwlock|locks|buffers|snapshot|wal`): its
/// defaults, `preset`'s assignments to the knobs it reads, the `flags` given and `sets`
/// ([`CommandKnobs::resolve`]), through [`KNOBS`], so that a `--set` of any knob, `sim.*`
/// included, is refused or accepted as `lockstack pgbench` would know it.
///
/// # Errors
/// As [`CommandKnobs::resolve`]: one line.
pub fn resolve_command(
    command: &CommandKnobs,
    preset: Option<&str>,
    flags: &[FlagAlias<'_>],
    sets: &[String],
) -> Result<CommandConfig, SettingsError> {
    let base = RunConfig::new(EngineConfig::new(1, 1024));
    let (run, assigned) = command.resolve_in(&KNOBS, base, preset, flags, sets)?;
    Ok(CommandConfig { cfg: run.engine, assigned })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sim_knob_declares_its_default_and_the_docs_table_matches() {
        let base = RunConfig::new(EngineConfig::new(4, 1024));
        let mut keys = Vec::new();
        for k in knobs() {
            assert!(!keys.contains(&k.key), "{} declared twice", k.key);
            keys.push(k.key);
            let mut c = base.clone();
            KNOBS.set(&mut c, k.key, k.default).unwrap_or_else(|e| panic!("default of {}: {e}", k.key));
            assert_eq!(format!("{c:?}"), format!("{base:?}"), "{}={} is not the default", k.key, k.default);
        }
        let engine_keys: Vec<_> = lockstack_engine::settings::knobs().iter().map(|k| k.key).collect();
        assert_eq!(keys[..engine_keys.len()], engine_keys[..], "the engine's knobs first, in its order");
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/engine.md")).unwrap();
        let table = knob_table();
        assert!(
            doc.contains(&table),
            "docs/engine.md's knob table differs from the registry; replace it with:\n{table}"
        );
    }

    #[test]
    fn sim_knobs_set_the_run_and_leave_the_engine_alone() {
        let mut c = RunConfig::new(EngineConfig::new(4, 1024));
        let engine = format!("{:?}", c.engine);
        apply_all(
            &mut c,
            &[
                "sim.postgres_ipc=0.5",
                "sim.client_cpu_us=3",
                "sim.client_rtt_us=profile",
                "sim.statement_cpu_us=0.5",
            ],
        )
        .unwrap();
        assert_eq!(c.sim.postgres_ipc, Some(0.5));
        assert_eq!(c.sim.client_cpu, Some(std::time::Duration::from_micros(3)));
        assert_eq!(
            (c.sim.client_rtt, c.sim.statement_cpu),
            (None, Some(std::time::Duration::from_nanos(500)))
        );
        assert_eq!(format!("{:?}", c.engine), engine);
        for (bad, want) in [
            (
                "sim.postgres_ipc=0",
                "invalid value \"0\" for --set sim.postgres_ipc (valid: profile or 0.01..=10",
            ),
            ("sim.client_cpu_us=x", "invalid value \"x\" for --set sim.client_cpu_us"),
            ("nosuch=1", "sim.postgres_ipc"),
        ] {
            let e = apply_set(&mut c, bad).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "{bad}: {e}");
        }
        const LOCKS: CommandKnobs =
            CommandKnobs { command: "lockstack locks", reads: &["lmgr.vxid"], defaults: &[] };
        let e = resolve_command(&LOCKS, None, &[], &["sim.postgres_ipc=1".into()]).unwrap_err().to_string();
        assert!(e.starts_with("--set sim.postgres_ipc: lockstack locks does not use this knob"), "{e}");
    }
}
