//! The host's cycle counter, for the measured clock: what a segment of local work between two
//! operations took on this host.
//!
//! On x86-64 it reads the time-stamp counter (`rdtsc`: invariant and constant-rate on every
//! x86-64 CPU of the last fifteen years, a few ns per read, against about 20 ns for
//! `clock_gettime` through the vDSO here), converted to ns by a factor measured once per process
//! against `Instant` over 20 ms. Elsewhere it reads `Instant` (ns since a process-wide base).
//! Source: Intel SDM vol. 3, 18.17 "Time-Stamp Counter" (invariant TSC).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A raw reading of the host's counter (ticks; see [`ns_per_tick`]).
#[inline(always)]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no preconditions; it reads a counter and touches no memory.
        #[allow(unused_unsafe)]
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        u64::try_from(base().elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// Host ns per tick of [`ticks`]: 1.0 where ticks are `Instant` ns; on x86-64 measured once per
/// process (ticks elapsed against `Instant` over a 20 ms busy wait).
pub(crate) fn ns_per_tick() -> f64 {
    static NS_PER_TICK: OnceLock<f64> = OnceLock::new();
    *NS_PER_TICK.get_or_init(|| {
        if cfg!(not(target_arch = "x86_64")) {
            return 1.0;
        }
        let (i0, t0) = (Instant::now(), ticks());
        while i0.elapsed() < Duration::from_millis(20) {
            std::hint::spin_loop();
        }
        let (ns, t1) = (i0.elapsed().as_nanos() as f64, ticks());
        let dt = t1.saturating_sub(t0);
        if dt == 0 { 1.0 } else { ns / dt as f64 }
    })
}
