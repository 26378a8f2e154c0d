//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`) or an installed simulation.

pub(crate) use lockstack_common::sync::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Instant, Mutex, ParkHandle, Unparker, fence,
    park_while, spin_hint, yield_now,
};
pub(crate) use lockstack_common::thread_local;
