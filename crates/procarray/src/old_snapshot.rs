//! old_snapshot_threshold's time → xmin map (PostgreSQL 9.6-16, `snapmgr.c`:
//! `OldSnapshotControlData`, `GetSnapshotCurrentTimestamp`, `MaintainOldSnapshotTimeMapping`),
//! with the three ways of protecting it that seed 001's thread went through, and an injectable
//! clock so that tests decide what time it is.
//!
//! Time is in microseconds (PostgreSQL's `TimestampTz`); the map has one bucket per minute,
//! `threshold + 10` buckets, each holding the newest xmin of a snapshot taken in that minute.

use std::sync::Arc;

use crate::sync::{AtomicI64, Mutex, Ordering};
use lockstack_common::sync::hook::{Access, touch_val};
use lockstack_common::{TrancheId, TransactionId};
use lockstack_lwlock::{LwLock, LwLockKind, LwRwLock, LwRwLockExt};

use crate::config::{OldSnapshotThreshold, TimeMapMaintenance};

/// Microseconds in a minute (`USECS_PER_MINUTE`).
pub const USECS_PER_MINUTE: i64 = 60_000_000;

/// Extra buckets beyond the threshold (`OLD_SNAPSHOT_PADDING_ENTRIES`).
pub const OLD_SNAPSHOT_PADDING_ENTRIES: usize = 10;

/// A source of "now" in microseconds since an arbitrary epoch. Must be callable from any
/// backend; it need not be monotonic ([`OldSnapshotTimeMap`] makes it so).
pub trait Clock: Send + Sync {
    /// The current time in microseconds.
    fn now_us(&self) -> i64;
}

/// The wall clock: microseconds since the Unix epoch (`GetCurrentTimestamp`, shifted epoch),
/// through the sync facade's [`system_now_us`](lockstack_common::sync::time::system_now_us):
/// under a simulation it is virtual (the simulation's start plus virtual time), so
/// old_snapshot_threshold runs in virtual minutes there.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> i64 {
        lockstack_common::sync::time::system_now_us()
    }
}

/// A clock that only moves when told to (for tests and simulations).
#[derive(Debug, Default)]
pub struct VirtualClock {
    now_us: AtomicI64,
}

impl VirtualClock {
    /// A clock reading `start_us` microseconds.
    pub fn new(start_us: i64) -> VirtualClock {
        VirtualClock { now_us: AtomicI64::new(start_us) }
    }

    /// Sets the time to `us` microseconds (it may go backwards; the map ignores that).
    pub fn set_us(&self, us: i64) {
        self.now_us.store(us, Ordering::SeqCst);
    }

    /// Moves the time forward by `us` microseconds.
    pub fn advance_us(&self, us: i64) {
        self.now_us.fetch_add(us, Ordering::SeqCst);
    }

    /// Moves the time forward by `secs` seconds.
    pub fn advance_secs(&self, secs: i64) {
        self.advance_us(secs * 1_000_000);
    }
}

impl Clock for VirtualClock {
    fn now_us(&self) -> i64 {
        self.now_us.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_us(&self) -> i64 {
        (**self).now_us()
    }
}

/// `ts` rounded up to the next whole minute (a timestamp already on a boundary stays).
fn align_up_to_minute(ts: i64) -> i64 {
    let r = ts.rem_euclid(USECS_PER_MINUTE);
    if r == 0 { ts } else { ts - r + USECS_PER_MINUTE }
}

struct Latest {
    latest_xmin: TransactionId,
    next_map_update: i64,
}

struct MapData {
    head_offset: usize,
    head_timestamp: i64,
    count_used: usize,
    xid_by_minute: Vec<TransactionId>,
}

/// The shared old-snapshot state: the monotonic snapshot clock, the newest xmin seen, and the
/// minute → xmin ring protected by `OldSnapshotTimeMapLock` (an [`LwLock`] of tranche
/// `OldSnapshotTimeMap`).
///
/// The two spinlocks of PostgreSQL (`mutex_current`, `mutex_latest_xmin`) are modelled with
/// the sync facade's mutexes; the map's data lives in the LWLock's guards (an [`LwRwLock`]), so
/// it is reached only with the LWLock held, and the LWLock is what the statistics see.
pub struct OldSnapshotTimeMap {
    threshold: OldSnapshotThreshold,
    maintenance: TimeMapMaintenance,
    clock: Arc<dyn Clock>,
    current_timestamp: Mutex<i64>,
    latest: Mutex<Latest>,
    /// Buckets in the map (0 when the feature is off): fixed at construction, read unlocked.
    entries: usize,
    map: LwRwLock<MapData>,
}

impl std::fmt::Debug for OldSnapshotTimeMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OldSnapshotTimeMap")
            .field("threshold", &self.threshold)
            .field("maintenance", &self.maintenance)
            .finish_non_exhaustive()
    }
}

impl OldSnapshotTimeMap {
    /// A map for `threshold` with `threshold + 10` buckets (none when off or 0), maintained as
    /// `maintenance` says, reading time from `clock`.
    pub fn new(
        threshold: OldSnapshotThreshold,
        maintenance: TimeMapMaintenance,
        clock: Arc<dyn Clock>,
        kind: LwLockKind,
    ) -> OldSnapshotTimeMap {
        let entries = match threshold {
            OldSnapshotThreshold::Minutes(m) if m > 0 => m as usize + OLD_SNAPSHOT_PADDING_ENTRIES,
            _ => 0,
        };
        OldSnapshotTimeMap {
            threshold,
            maintenance,
            clock,
            current_timestamp: Mutex::new(i64::MIN),
            latest: Mutex::new(Latest { latest_xmin: TransactionId::INVALID, next_map_update: i64::MIN }),
            entries,
            map: LwLock::new(kind, TrancheId::OLD_SNAPSHOT_TIME_MAP, 0).with_data(MapData {
                head_offset: 0,
                head_timestamp: 0,
                count_used: 0,
                xid_by_minute: vec![TransactionId::INVALID; entries],
            }),
        }
    }

    /// Names the line of `OldSnapshotTimeMapLock` for a simulation (see `hook::name_line`);
    /// called once the map is at its final address.
    pub(crate) fn name_lines(&self) {
        self.map.name_line_as(|| "OldSnapshotTimeMapLock".to_string());
    }

    /// The address of `OldSnapshotTimeMapLock`'s word.
    pub(crate) fn lock_addr(&self) -> *const u8 {
        self.map.word_addr()
    }

    /// The configured threshold.
    pub fn threshold(&self) -> OldSnapshotThreshold {
        self.threshold
    }

    /// True when the feature is on (snapshots must record their time and maintain the map).
    pub fn enabled(&self) -> bool {
        self.threshold != OldSnapshotThreshold::Off
    }

    /// `GetSnapshotCurrentTimestamp`: the clock's time, but never earlier than a value returned
    /// before (microseconds).
    pub fn current_timestamp(&self) -> i64 {
        let now = self.clock.now_us();
        let mut cur = self.current_timestamp.lock();
        if now > *cur {
            *cur = now;
        }
        *cur
    }

    /// The newest xmin any snapshot reported (`latest_xmin`), invalid before the first.
    pub fn latest_xmin(&self) -> TransactionId {
        self.latest.lock().latest_xmin
    }

    /// `MaintainOldSnapshotTimeMapping(whenTaken, xmin)`: records that a snapshot with `xmin`
    /// was taken at `when_taken_us`. Returns true if it took `OldSnapshotTimeMapLock`
    /// exclusive (what seed 001 is about); false if the spinlock-protected check sufficed or
    /// the feature is off.
    pub fn maintain(&self, when_taken_us: i64, xmin: TransactionId) -> bool {
        if !self.enabled() {
            return false;
        }
        let ts = align_up_to_minute(when_taken_us);
        let (new_minute, xmin_advanced) = {
            let mut l = self.latest.lock();
            let new_minute = ts > l.next_map_update;
            if new_minute {
                l.next_map_update = ts;
            }
            let adv = xmin.is_normal() && (!l.latest_xmin.is_valid() || xmin.follows(l.latest_xmin));
            if adv {
                l.latest_xmin = xmin;
            }
            (new_minute, adv)
        };
        let needed = match self.maintenance {
            TimeMapMaintenance::EveryCall => true,
            TimeMapMaintenance::XminAdvanced => new_minute || xmin_advanced,
            TimeMapMaintenance::MinuteBoundary => new_minute,
        };
        if !needed || self.threshold == OldSnapshotThreshold::Minutes(0) || !xmin.is_normal() {
            return false;
        }
        self.map.write().insert(ts, xmin);
        true
    }

    /// The map's contents (`pg_old_snapshot_time_mapping()`, contrib/old_snapshot 14): the
    /// minute of the oldest bucket (microseconds) and the xmin of each bucket, oldest first.
    /// Takes the map lock shared.
    pub fn entries(&self) -> (i64, Vec<TransactionId>) {
        let m = self.map.read();
        let n = m.xid_by_minute.len();
        let v = (0..m.count_used).map(|i| m.xid_by_minute[(m.head_offset + i) % n]).collect();
        (m.head_timestamp, v)
    }

    /// The xmin recorded for the minute that contains `ts_us` (rounded up to its boundary), or
    /// `None` if the map does not cover it (or the feature is off). Takes the map lock shared;
    /// the lookup `TransactionIdLimitedForOldSnapshots` does for `now - threshold`.
    pub fn xmin_at(&self, ts_us: i64) -> Option<TransactionId> {
        if self.entries == 0 {
            return None;
        }
        let ts = align_up_to_minute(ts_us);
        self.map.read().lookup(ts)
    }
}

impl MapData {
    fn newest_timestamp(&self) -> i64 {
        self.head_timestamp + (self.count_used as i64 - 1) * USECS_PER_MINUTE
    }

    fn lookup(&self, ts: i64) -> Option<TransactionId> {
        if self.count_used == 0 || ts < self.head_timestamp || ts > self.newest_timestamp() {
            return None;
        }
        let k = ((ts - self.head_timestamp) / USECS_PER_MINUTE) as usize;
        touch_val(&self.xid_by_minute[(self.head_offset + k) % self.xid_by_minute.len()], Access::Read);
        Some(self.xid_by_minute[(self.head_offset + k) % self.xid_by_minute.len()])
    }

    /// Records `xmin` in the bucket of minute `ts` (already aligned). The head is always the
    /// oldest bucket (the consistent reading PostgreSQL adopted in 14, commit 55b7e2f4).
    fn insert(&mut self, ts: i64, xmin: TransactionId) {
        let n = self.xid_by_minute.len();
        if n == 0 {
            return;
        }
        if self.count_used == 0 {
            self.reset(ts, xmin);
        } else if ts < self.head_timestamp {
            // Older than anything the map still covers: nothing to record.
        } else if ts <= self.newest_timestamp() {
            let k = ((ts - self.head_timestamp) / USECS_PER_MINUTE) as usize;
            let slot = &mut self.xid_by_minute[(self.head_offset + k) % n];
            touch_val(slot, Access::Write);
            if xmin.follows(*slot) {
                *slot = xmin;
            }
        } else {
            let advance = ((ts - self.newest_timestamp()) / USECS_PER_MINUTE) as usize;
            if advance >= n {
                self.reset(ts, xmin);
                return;
            }
            for _ in 0..advance {
                if self.count_used == n {
                    // Full: the oldest bucket becomes the newest.
                    let old_head = self.head_offset;
                    self.head_offset = (self.head_offset + 1) % n;
                    self.head_timestamp += USECS_PER_MINUTE;
                    self.xid_by_minute[old_head] = xmin;
                    touch_val(&self.xid_by_minute[old_head], Access::Write);
                } else {
                    let slot = (self.head_offset + self.count_used) % n;
                    self.count_used += 1;
                    self.xid_by_minute[slot] = xmin;
                    touch_val(&self.xid_by_minute[slot], Access::Write);
                }
            }
        }
    }

    fn reset(&mut self, ts: i64, xmin: TransactionId) {
        self.head_offset = 0;
        self.head_timestamp = ts;
        self.count_used = 1;
        self.xid_by_minute[0] = xmin;
        touch_val(&self.xid_by_minute[0], Access::Write);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn map(th: u32, m: TimeMapMaintenance) -> (Arc<VirtualClock>, OldSnapshotTimeMap) {
        let clock = Arc::new(VirtualClock::new(10 * USECS_PER_MINUTE));
        let map =
            OldSnapshotTimeMap::new(OldSnapshotThreshold::Minutes(th), m, clock.clone(), LwLockKind::Atomic);
        (clock, map)
    }

    #[test]
    fn timestamps_never_go_backwards() {
        let (clock, m) = map(1, TimeMapMaintenance::XminAdvanced);
        let a = m.current_timestamp();
        clock.set_us(0);
        assert_eq!(m.current_timestamp(), a);
        clock.set_us(a + 5);
        assert_eq!(m.current_timestamp(), a + 5);
    }

    #[test]
    fn exclusive_lock_counts_per_variant() {
        // Same xmin, 100 snapshots within one minute: 9.6 beta takes the lock every time; the
        // seed-001 fix and the shipped code only once (first snapshot of the minute).
        for (variant, expect) in [
            (TimeMapMaintenance::EveryCall, 100),
            (TimeMapMaintenance::XminAdvanced, 1),
            (TimeMapMaintenance::MinuteBoundary, 1),
        ] {
            let (clock, m) = map(5, variant);
            let mut n = 0;
            for _ in 0..100 {
                clock.advance_us(1000);
                if m.maintain(m.current_timestamp(), TransactionId(100)) {
                    n += 1;
                }
            }
            assert_eq!(n, expect, "{variant:?}");
        }
        // Advancing xmin within the minute: the seed-001 patch locks on each advance, the shipped
        // code does not.
        for (variant, expect) in
            [(TimeMapMaintenance::XminAdvanced, 10), (TimeMapMaintenance::MinuteBoundary, 1)]
        {
            let (clock, m) = map(5, variant);
            let mut n = 0;
            for i in 0..10 {
                clock.advance_us(1000);
                if m.maintain(m.current_timestamp(), TransactionId(100 + i)) {
                    n += 1;
                }
            }
            assert_eq!(n, expect, "{variant:?}");
            assert_eq!(m.latest_xmin(), TransactionId(109));
        }
    }

    #[test]
    fn ring_advances_and_wraps() {
        let (clock, m) = map(1, TimeMapMaintenance::EveryCall); // 11 buckets
        let t0 = m.current_timestamp();
        assert!(m.maintain(t0, TransactionId(100)));
        let (head, v) = m.entries();
        assert_eq!(head, align_up_to_minute(t0));
        assert_eq!(v, vec![TransactionId(100)]);
        // Three minutes later: four buckets, the gap filled with the new xmin.
        clock.advance_secs(180);
        m.maintain(m.current_timestamp(), TransactionId(200));
        let (_, v) = m.entries();
        assert_eq!(v, vec![TransactionId(100), TransactionId(200), TransactionId(200), TransactionId(200)]);
        // An older xmin in the current bucket does not lower it; a newer one raises it.
        m.maintain(m.current_timestamp(), TransactionId(150));
        m.maintain(m.current_timestamp(), TransactionId(250));
        assert_eq!(m.entries().1.last(), Some(&TransactionId(250)));
        assert_eq!(m.xmin_at(t0), Some(TransactionId(100)));
        // Fill past capacity: the oldest buckets drop off, the head stays the oldest.
        for i in 0..10 {
            clock.advance_secs(60);
            m.maintain(m.current_timestamp(), TransactionId(300 + i));
        }
        let (head, v) = m.entries();
        assert_eq!(v.len(), 11);
        assert_eq!(*v.last().unwrap(), TransactionId(309));
        assert_eq!(head, align_up_to_minute(m.current_timestamp()) - 10 * USECS_PER_MINUTE);
        assert_eq!(m.xmin_at(t0), None);
        // A jump longer than the map resets it.
        clock.advance_secs(3600);
        m.maintain(m.current_timestamp(), TransactionId(999));
        assert_eq!(m.entries().1, vec![TransactionId(999)]);
    }

    #[test]
    fn off_and_zero_take_no_lock() {
        let clock: Arc<dyn Clock> = Arc::new(VirtualClock::new(0));
        let off = OldSnapshotTimeMap::new(
            OldSnapshotThreshold::Off,
            TimeMapMaintenance::EveryCall,
            clock.clone(),
            LwLockKind::Atomic,
        );
        assert!(!off.maintain(1, TransactionId(5)));
        let zero = OldSnapshotTimeMap::new(
            OldSnapshotThreshold::Minutes(0),
            TimeMapMaintenance::EveryCall,
            clock,
            LwLockKind::Atomic,
        );
        assert!(!zero.maintain(1, TransactionId(5)));
        assert_eq!(zero.latest_xmin(), TransactionId(5));
        assert_eq!(zero.xmin_at(1), None);
    }
}
