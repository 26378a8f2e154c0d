//! Micro-experiments that exercise one subsystem crate at a time.

pub mod lwlock;
