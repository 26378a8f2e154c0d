//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`) or a simulation.
//!
//! Buffer metadata (status, dirty flag, page number, LRU counts, the latest page) goes through
//! it. Page words and group LSNs are `plain` std atomics even under loom: they are only written
//! under an exclusive bank lock (which loom does model), and 1024 loom objects per page would
//! exceed what a loom model can track.

pub(crate) use lockstack_common::sync::atomic::plain::AtomicU64 as PlainU64;
pub(crate) use lockstack_common::sync::{AtomicBool, AtomicU8, AtomicU32, Mutex, Ordering};
pub(crate) use lockstack_common::thread_local;
