//! The only door to the atomics of the insertion protocol ([`crate::insertion`]), so that
//! `--cfg loom` can swap them for loom's model-checked ones (the lwlock crate does the same for
//! its own; the locks themselves come from `lockstack_lwlock`, which follows the same flag).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::AtomicU64;

#[cfg(loom)]
pub(crate) use loom::sync::atomic::AtomicU64;
