//! The crate's names for the workspace's one sync facade (`lockstack_common::sync`), which
//! maps each of them to std, loom (`--cfg loom`) or a simulation.
//!
//! Only the fields that take part in a protocol go through the modelled types: published xids,
//! xmins, the subxid cache and its count, ProcArray membership, `latest_completed_xid`,
//! `next_xid` and the completion counter. The many fields of [`crate::PgProc`] that exist only
//! to give the struct PostgreSQL's size, and the per-slot attach flags, are `plain` std atomics,
//! so that a loom model does not track hundreds of objects it never needs.

pub(crate) use lockstack_common::sync::atomic::plain;
pub(crate) use lockstack_common::sync::{
    AtomicBool, AtomicI64, AtomicU8, AtomicU32, AtomicU64, Instant, Mutex, Ordering, fence, sleep, thread,
};
