//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`, for `tests/loom_pins.rs`) or a simulation.
//!
//! Buffer header state, tags, the clock hand, the allocation counter and the pin-count
//! waiter's latch go through here. Page bytes stay plain memory: content locks (LWLocks, which
//! loom does model) protect them.

pub(crate) use lockstack_common::sync::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, Latch, Mutex, Ordering, RwLock, yield_now,
};
