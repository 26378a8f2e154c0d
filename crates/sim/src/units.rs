//! Units and keys every part of the machine model shares: picoseconds (the executor's clock
//! unit) and hash maps keyed by cache-line numbers or addresses. No locks: plain values owned by
//! the one host thread that runs a simulation.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Picoseconds per nanosecond.
pub(crate) const PS_PER_NS: f64 = 1000.0;

/// Converts a cost in ns to picoseconds.
pub(crate) fn ps(ns: f64) -> u64 {
    (ns * PS_PER_NS).round() as u64
}

/// A multiplicative hasher for line numbers (the standard SipHash would dominate the model's
/// cost per operation).
#[derive(Default)]
pub(crate) struct LineHasher(u64);

impl Hasher for LineHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// Hash maps keyed by line numbers or addresses.
pub(crate) type LineMap<V> = HashMap<u64, V, BuildHasherDefault<LineHasher>>;
