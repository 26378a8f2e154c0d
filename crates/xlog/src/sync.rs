//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`, for the insertion protocol's model in
//! `tests/loom_insert.rs`) or a simulation; the locks themselves come from `lockstack_lwlock`,
//! which uses the same facade.

pub(crate) use lockstack_common::sync::{
    AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering, sleep, thread,
};
