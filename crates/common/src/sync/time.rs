//! The clock: [`Instant`], [`now`] and [`sleep`], and the result of a timed wait ([`WaitTimeoutResult`]). Host time (`std::time::Instant`) in
//! production and under loom (loom has no clock); the backend's virtual time under a simulation.

use std::ops::{Add, AddAssign, Sub};
pub use std::time::Duration;

#[cfg(not(loom))]
use super::hook;

/// A point in time: a host instant, or a virtual time since the simulation began. Instants of
/// the two kinds never meet in one computation unless a simulation is installed or removed
/// between two readings; if they do, differences saturate to zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Instant(Kind);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(loom, allow(dead_code))]
enum Kind {
    Host(std::time::Instant),
    Virtual(Duration),
}

impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Instant) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Instant {
    fn cmp(&self, other: &Instant) -> std::cmp::Ordering {
        match (self.0, other.0) {
            (Kind::Host(a), Kind::Host(b)) => a.cmp(&b),
            (Kind::Virtual(a), Kind::Virtual(b)) => a.cmp(&b),
            (Kind::Host(_), Kind::Virtual(_)) => std::cmp::Ordering::Less,
            (Kind::Virtual(_), Kind::Host(_)) => std::cmp::Ordering::Greater,
        }
    }
}

impl Instant {
    /// The current time (host `Instant::now()`, or the running task's virtual clock).
    #[inline]
    #[track_caller]
    pub fn now() -> Instant {
        #[cfg(not(loom))]
        if let Some(d) = hook::with_current(|s| s.backend().now()) {
            return Instant(Kind::Virtual(d));
        }
        Instant(Kind::Host(std::time::Instant::now()))
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    #[inline]
    pub fn saturating_duration_since(&self, earlier: Instant) -> Duration {
        match (self.0, earlier.0) {
            (Kind::Host(a), Kind::Host(b)) => a.saturating_duration_since(b),
            (Kind::Virtual(a), Kind::Virtual(b)) => a.saturating_sub(b),
            _ => Duration::ZERO,
        }
    }

    /// Time from `earlier` to `self` (saturating, as `std` does since Rust 1.60).
    #[inline]
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }

    /// Time from `earlier` to `self`, `None` if `earlier` is later.
    #[inline]
    pub fn checked_duration_since(&self, earlier: Instant) -> Option<Duration> {
        match (self.0, earlier.0) {
            (Kind::Host(a), Kind::Host(b)) => a.checked_duration_since(b),
            (Kind::Virtual(a), Kind::Virtual(b)) => a.checked_sub(b),
            _ => None,
        }
    }

    /// Time since `self`.
    #[inline]
    #[track_caller]
    pub fn elapsed(&self) -> Duration {
        Instant::now().saturating_duration_since(*self)
    }

    /// `self + d`, `None` on overflow.
    #[inline]
    pub fn checked_add(&self, d: Duration) -> Option<Instant> {
        Some(Instant(match self.0 {
            Kind::Host(a) => Kind::Host(a.checked_add(d)?),
            Kind::Virtual(a) => Kind::Virtual(a.checked_add(d)?),
        }))
    }

    /// `self - d`, `None` on underflow.
    #[inline]
    pub fn checked_sub(&self, d: Duration) -> Option<Instant> {
        Some(Instant(match self.0 {
            Kind::Host(a) => Kind::Host(a.checked_sub(d)?),
            Kind::Virtual(a) => Kind::Virtual(a.checked_sub(d)?),
        }))
    }

    /// The virtual time since the simulation began (zero for a host instant).
    #[cfg(not(loom))]
    pub(crate) fn virtual_since_start(&self) -> Duration {
        match self.0 {
            Kind::Virtual(d) => d,
            Kind::Host(_) => Duration::ZERO,
        }
    }

    /// The host instant (for a virtual one, the host's now: it only bounds a native park).
    #[cfg(not(loom))]
    pub(crate) fn std(&self) -> std::time::Instant {
        match self.0 {
            Kind::Host(a) => a,
            Kind::Virtual(_) => std::time::Instant::now(),
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.checked_add(d)
            .expect("Instant + Duration stays representable (std's Instant panics the same way on overflow)")
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        self.checked_sub(d)
            .expect("Instant - Duration stays representable (std's Instant panics the same way on overflow)")
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

/// The current time; [`Instant::now`].
#[inline]
#[track_caller]
pub fn now() -> Instant {
    Instant::now()
}

/// Sleeps the calling thread (or task, in virtual time) for `d`. Under loom, a yield.
#[inline]
pub fn sleep(d: Duration) {
    #[cfg(not(loom))]
    {
        if hook::with_current(|s| s.backend().sleep(d)).is_none() {
            std::thread::sleep(d);
        }
    }
    #[cfg(loom)]
    {
        let _ = d;
        loom::thread::yield_now();
    }
}

/// Time since a fixed point: the first call in the process (host), or the simulation's start
/// (virtual). For timestamps stored in atomics as nanoseconds (the BRAVO inhibit window).
/// Zero under loom.
#[inline]
#[track_caller]
pub fn monotonic() -> Duration {
    #[cfg(not(loom))]
    {
        if let Some(d) = hook::with_current(|s| s.backend().now()) {
            return d;
        }
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(std::time::Instant::now).elapsed()
    }
    #[cfg(loom)]
    Duration::ZERO
}

/// The wall clock for lock-stack decisions that depend on calendar time (old_snapshot_threshold's
/// minutes, a commit record's timestamp): `SystemTime::now()` natively; under a simulation, the
/// wall time the simulation started at ([`hook::Simulation::wall_start`]) plus the running
/// task's virtual time, so such decisions run in virtual minutes. Under loom, the host's
/// `SystemTime::now()` (loom has no clock). The equivalent of PostgreSQL's
/// `GetCurrentTimestamp` (`src/backend/utils/adt/timestamp.c`).
#[inline]
#[track_caller]
pub fn system_now() -> std::time::SystemTime {
    #[cfg(not(loom))]
    if let Some(t) = hook::with_current(|s| s.wall_start() + s.backend().now()) {
        return t;
    }
    std::time::SystemTime::now()
}

/// [`system_now`] as microseconds since the Unix epoch (PostgreSQL's `TimestampTz` unit, with
/// the Unix epoch instead of 2000-01-01); 0 for a clock set before 1970.
#[inline]
#[track_caller]
pub fn system_now_us() -> i64 {
    system_now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0)
}

/// Whether a timed wait ended by its time-out (`parking_lot`'s `WaitTimeoutResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub(crate) fn new(timed_out: bool) -> WaitTimeoutResult {
        WaitTimeoutResult(timed_out)
    }
}

impl WaitTimeoutResult {
    /// True when the wait returned because the time-out passed.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}
