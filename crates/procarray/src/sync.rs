//! The crate's only door to the atomics that concurrent protocols touch, so that `--cfg loom`
//! can swap them for loom's model-checked versions (the same facade as `lockstack_lwlock`).
//!
//! Only the fields that take part in a protocol go through here: published xids, xmins, the
//! subxid cache and its count, ProcArray membership, `latest_completed_xid`, `next_xid` and the
//! completion counter. The many fields of [`crate::PgProc`] that exist only to give the struct
//! PostgreSQL's size use `std` atomics directly, so that a loom model does not track hundreds
//! of objects it never needs.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, fence};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, fence};
