//! The simulated machine's knobs (`--set sim.*`): what a run under `--machine` charges beyond
//! the lock stack's own work, per pgbench statement. The engine never reads them, so they live
//! here, beside the pgbench runner that charges them around each statement; the workloads'
//! registry (`crate::settings::KNOBS`) lists them after the engine's knobs, and
//! `lockstack` fills the ones left at `profile` from the machine profile.
//!
//! Natively (no simulation installed) every knob is ignored.

use std::time::Duration;

use lockstack_common::knob::{Knob, in_range};

/// The accepted `sim.postgres_ipc` (instructions per cycle), for the knob and for stored
/// calibrations alike.
pub const POSTGRES_IPC_RANGE: std::ops::RangeInclusive<f64> = 0.01..=10.0;

/// The `sim.*` settings of one run; `None` is the knob's default (`profile`: the machine
/// profile's figure, filled in by the caller that knows the profile; `0` for
/// [`SimKnobs::statement_cpu`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimKnobs {
    /// A pgbench client's own work per statement (`--set sim.client_cpu_us`; default: the
    /// profile's `[pgbench]` figure), charged on its simulated core.
    pub client_cpu: Option<Duration>,
    /// The client-server round trip per statement (`--set sim.client_rtt_us`; default: the
    /// profile's), slept in virtual time.
    pub client_rtt: Option<Duration>,
    /// The server's work per statement that PostgreSQL does and this engine does not (parse,
    /// plan, executor, protocol), charged on the backend's simulated core (`--set
    /// sim.statement_cpu_us`; default 0).
    pub statement_cpu: Option<Duration>,
    /// Under `--costs postgres` only: the instructions per cycle PostgreSQL's code retires on
    /// the simulated core (`--set sim.postgres_ipc`; default: the profile's `postgres_ipc`),
    /// which sets the rate PostgreSQL's counts are charged at. `lockstack experiment NAME
    /// --machine P --calibrate` fits it to the baseline's published low-concurrency figure.
    pub postgres_ipc: Option<f64>,
    /// Whether the simulated caches have the machine profile's capacities (`--set
    /// sim.caches=on`, the default) or none (`off`: nothing is ever evicted, the model before
    /// capacities). A profile without a `[caches]` table has none either way.
    pub caches: bool,
}

impl Default for SimKnobs {
    /// Every knob at its default: the profile's figures, no extra statement work, caches on.
    fn default() -> SimKnobs {
        SimKnobs { client_cpu: None, client_rtt: None, statement_cpu: None, postgres_ipc: None, caches: true }
    }
}

/// A `sim.*` microsecond value: `profile` (the machine profile's figure) or `0..=1000000`.
fn profile_us(v: &str) -> Option<Option<Duration>> {
    if v.eq_ignore_ascii_case("profile") {
        return Some(None);
    }
    Some(Some(Duration::from_micros(in_range(v, 0u64, 1_000_000)?)))
}

/// The `sim.*` knobs, in the order `--set help` lists them (after the engine's).
pub const KNOBS: &[Knob<SimKnobs>] = &[
    Knob {
        key: "sim.client_cpu_us",
        values: "profile or 0..=1000000 (us)",
        doc: "--machine only: a pgbench client's own work per statement, charged on its simulated core (default: the profile's [pgbench] figure)",
        default: "profile",
        apply: |c, v| {
            c.client_cpu = profile_us(v)?;
            Some(())
        },
    },
    Knob {
        key: "sim.client_rtt_us",
        values: "profile or 0..=1000000 (us)",
        doc: "--machine only: the client-server round trip per statement, slept in virtual time (default: the profile's [pgbench] figure)",
        default: "profile",
        apply: |c, v| {
            c.client_rtt = profile_us(v)?;
            Some(())
        },
    },
    Knob {
        key: "sim.statement_cpu_us",
        values: "0..=1000000 (us, fractions allowed)",
        doc: "--machine only: extra server work per statement, charged on the backend's simulated core on top of the statement's own cost (PostgreSQL's measured count under --costs postgres); nothing fits it",
        default: "0",
        apply: |c, v| {
            let us: f64 = v.trim().parse().ok().filter(|x: &f64| x.is_finite() && (0.0..=1e6).contains(x))?;
            let d = Duration::from_nanos((us * 1000.0).round() as u64);
            c.statement_cpu = (!d.is_zero()).then_some(d);
            Some(())
        },
    },
    Knob {
        key: "sim.postgres_ipc",
        values: "profile or 0.01..=10 (instructions per cycle)",
        doc: "--machine --costs postgres only: instructions per cycle of PostgreSQL's code on the simulated core, the rate its measured instruction counts are charged at (default: the profile's postgres_ipc); experiment --calibrate fits it to the baseline's published low-concurrency figure",
        default: "profile",
        apply: |c, v| {
            if v.trim() == "profile" {
                c.postgres_ipc = None;
                return Some(());
            }
            let ipc: f64 =
                v.trim().parse().ok().filter(|x: &f64| x.is_finite() && POSTGRES_IPC_RANGE.contains(x))?;
            c.postgres_ipc = Some(ipc);
            Some(())
        },
    },
    Knob {
        key: "sim.caches",
        values: "on|off",
        doc: "--machine only: the simulated caches have the profile's capacities ([caches]: a private LRU cache per core, an inclusive LLC per group; evicted lines refill from the LLC or memory) or none (nothing is ever evicted)",
        default: "on",
        apply: |c, v| {
            c.caches = match v.trim() {
                "on" => true,
                "off" => false,
                _ => return None,
            };
            Some(())
        },
    },
];
