//! Software prefetch of cache lines (page bytes and mapping buckets) ahead of their use.
//! Touches no lock: a prefetch is only a hint to the CPU's caches.

/// Prefetches the cache lines of bytes `start..end` from `base`. Kept out of line so that a
/// whole-page prefetch stays a short loop instead of being unrolled into a kilobyte of
/// prefetch instructions at every call site (the hot path's code must fit the L1i cache).
#[inline(never)]
pub(crate) fn prefetch_lines(base: *const u8, start: usize, end: usize) {
    const LINE: usize = 64;
    let mut off = start & !(LINE - 1);
    while off + 4 * LINE <= end {
        prefetch_line(base.wrapping_add(off));
        prefetch_line(base.wrapping_add(off + LINE));
        prefetch_line(base.wrapping_add(off + 2 * LINE));
        prefetch_line(base.wrapping_add(off + 3 * LINE));
        off += 4 * LINE;
    }
    while off < end {
        prefetch_line(base.wrapping_add(off));
        off += LINE;
    }
}

/// Hints the CPU to bring the cache line at `p` into its caches.
#[inline(always)]
pub(crate) fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `_mm_prefetch` only hints the cache hierarchy: it never faults, whatever the
    // address, and has no effect the program can observe, so it cannot race with writers of
    // the line. SSE (which provides it) is part of the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
