//! Sampling another heap layout for a simulated run. The simulated machine maps every
//! address to a 64-byte line, so which objects share a line (and with it false sharing and
//! the lines' transfers) depends on where the allocator put them, which depends on every
//! allocation before them: a run is deterministic for one process history and moves with
//! another (docs/sim.md, "Layout"). [`pad`] shifts what the calling thread allocates next by a
//! chosen amount, so that several runs of one point sample several layouts and their spread
//! can be measured instead of assumed. Takes no lock.

/// Bytes per unit of shift: the allocator's alignment on 64-bit targets (glibc's and Rust's
/// `System` allocator align small blocks to 16 bytes).
pub const SHIFT_UNIT: usize = 16;

/// Largest accepted shift, in units: 4,096 x 16 bytes = 64 KiB, below glibc's default 128 KiB
/// threshold above which a block is mapped on its own (and shifts nothing).
pub const MAX_SHIFT: usize = 4096;

/// Allocates `shift` x [`SHIFT_UNIT`] bytes on the calling thread's heap and returns them: the
/// caller keeps the block alive while the run it should shift allocates, so that the blocks
/// allocated after it land that much further on (the allocator's headers round the step: a
/// shift of 1 moves later blocks by 32 bytes on glibc, 2 by 48). `shift` 0 allocates nothing
/// and leaves the layout as it is.
///
/// # Panics
/// If `shift` is above [`MAX_SHIFT`] (callers check their input against it).
pub fn pad(shift: usize) -> Vec<u8> {
    assert!(shift <= MAX_SHIFT, "layout shift {shift} is above {MAX_SHIFT}");
    let block = vec![0u8; shift * SHIFT_UNIT];
    std::hint::black_box(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shift_allocates_its_size_and_zero_allocates_nothing() {
        assert_eq!(pad(0).capacity(), 0);
        assert_eq!(pad(3).len(), 3 * SHIFT_UNIT);
        assert_eq!(pad(MAX_SHIFT).len(), 64 << 10);
    }
}
