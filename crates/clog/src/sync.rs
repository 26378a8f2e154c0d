//! The crate's only door to the atomics that the loom model checks.
//!
//! Buffer metadata (status, dirty flag, page number, LRU counts, the latest page) goes through
//! this facade, so that `--cfg loom` swaps it for loom's model-checked atomics. Page contents
//! and group LSNs deliberately stay `std` atomics even under loom: they are only written under
//! an exclusive bank lock (which loom does model), and 1024 loom objects per page would exceed
//! what a loom model can track.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU32};
