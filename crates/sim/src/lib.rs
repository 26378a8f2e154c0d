//! `lockstack-sim`: a simulated many-core machine on which the lock stack's own code runs in
//! virtual time.
//!
//! Each task (a backend, a worker) is a stackful coroutine ([`corosensei`]) on one host
//! thread, with its own virtual clock. At every synchronization operation (an atomic, a fence,
//! a `touch` of shared data, a spin hint, a park or unpark, a clock read, a sleep, a spawn or
//! join: the functions of [`task`]) the task stops, and the scheduler resumes the runnable
//! task with the smallest clock (a binary heap; ties go to the lower task id). Shared memory
//! therefore changes in virtual-time order: a conservative discrete-event simulation.
//!
//! The machine model ([`MachineProfile`], a TOML file) prices each operation: a 64-byte
//! line's coherence state (shared readers or one exclusive owner) decides whether an access
//! hits or pulls the line from another core, and a line is handed over one transfer at a time,
//! so cores queue on a hot lock word. Tasks occupy hardware threads; more runnable tasks than
//! threads are time-sliced; parked tasks free their thread and wake after the futex latency.
//!
//! Why corosensei and not shuttle: shuttle runs each test many times under randomized
//! schedulers and owns the primitives (its own `Mutex`, atomics, `thread`), with no notion of
//! time or cost; we need one long run in virtual-time order whose scheduling decisions come
//! from a cost model, and every primitive is the lock stack's own code calling [`task`]. A bare
//! stackful coroutine switch (two per operation at most) is all the executor needs, and
//! corosensei gives exactly that, with panics and forced unwinding handled.
//!
//! See docs/sim.md for the model, the built-in profiles with their citations, and what the
//! model leaves out.

mod account;
mod cache;
pub mod calibrate;
mod coherence;
pub mod constants;
mod exec;
#[cfg(feature = "sim")]
pub mod facade;
mod hostclock;
pub mod machine;
pub mod pgcosts;
pub mod profile;
mod sched;
mod segments;
mod state;
pub mod stats;
pub mod task;
#[cfg(feature = "sim")]
pub mod timer;
mod units;

pub use constants::ConstantError;
pub use exec::{BlockedTask, SimError, Simulation};
pub use machine::Access;
pub use pgcosts::{PgCostError, PgCostFile, PgCostRates};
pub use profile::{
    Arbitration, CacheSizes, ClientCosts, Costs, InvalidProfile, MAX_PROFILE_BYTES, MachineProfile,
    ProfileError, RemoteCost, Topology,
};
pub use segments::{MAX_SEGMENT_TABLE_BYTES, SegmentCost, SegmentTable};
pub use state::{ClockMode, SimConfig, TaskId};
pub use stats::{
    CacheStats, HostStats, LineStats, RegionStats, SimReport, SimStats, StructureMisses, TaskStats,
    TimeSources, structure_of,
};
