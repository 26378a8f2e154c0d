//! The seam for a third backend: a simulated machine that runs every backend as a task in
//! virtual time (for `--machine`).
//!
//! A [`SimBackend`] is installed on a host thread with [`install`]; from then on every facade
//! operation made on that thread (and on the tasks it spawns through the facade) is reported to
//! it before it runs: atomics and fences with their address, size and call site, plain shared
//! data through [`touch`], spin hints, yields, parks, clock reads, sleeps, spawns and joins,
//! and the facade's thread-locals become per task.
//!
//! Cost: nothing unless the `sim` cargo feature of `lockstack-common` is on (the test
//! builds turn it on through dev-dependencies; a simulating binary turns it on in its own
//! build): without it every check is a constant `false` and the facade compiles to exactly the
//! std operations. With it, each operation loads one process-global `AtomicBool` ("a
//! simulation was ever installed", `Relaxed`) and branches on it, predicted not taken, with the
//! slow path out of line (`#[cold]`); only when the flag is set does it read a const-initialised
//! thread-local pointer to the installed [`Simulation`]. That check measured as a third to half
//! of an uncontended LWLock acquire-release (`lockstack lwlock --impl atomic`, callgrind
//! instructions), hence the feature. Under `--cfg loom` none of this exists: loom is the
//! backend.
//!
//! Blocking with a key ([`crate::sync::park`]), mutexes and condition variables reduce to the
//! backend's task [`park`](SimBackend::park) and [`unpark`](SimBackend::unpark): the facade keeps
//! the per-key wait queues itself, in the [`Simulation`], so a backend only schedules tasks.
//!
//! The seam ([`seam`]'s trait and dispatch), line names, wait classes and regions, and the
//! counting backend for tests each have a file of their own; this module hands their names on.

mod classes;
mod counting;
mod names;
mod seam;

pub use classes::*;
pub use counting::*;
pub use names::*;
pub use seam::*;
