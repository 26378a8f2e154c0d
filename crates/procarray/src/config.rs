//! Run-time choices of the ProcArray: the layout of the hot per-backend fields, the
//! end-of-transaction strategy, how the global xmin horizon is computed, and
//! old_snapshot_threshold. Every knob is a value, so one binary compares the designs in one run.

use std::fmt;
use std::str::FromStr;

use lockstack_common::TransactionId;
use lockstack_lwlock::LwLockKind;

/// Where the fields that `get_snapshot_data` reads for every backend live.
///
/// | variant | PostgreSQL | what a snapshot touches per backend |
/// |---|---|---|
/// | [`Pgproc`](Layout::Pgproc) | 9.1 `PGPROC` | the xid/xmin line of a ~900-byte `PgProc`, and (9.1 loop) its subxid-cache header |
/// | [`Pgxact`](Layout::Pgxact) | 9.2-13 `PGXACT` | one 12-byte `PgXact` in a dense array indexed like `PgProc` |
/// | [`PgxactPadded`](Layout::PgxactPadded) | 2016 false-sharing experiment | one `PgXact` per 128-byte line |
/// | [`Dense`](Layout::Dense) | 14+ `ProcGlobal->xids[]` | one 4-byte xid in an array kept in ProcArray order; snapshot reuse |
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// Hot fields inside `PgProc` (PostgreSQL 9.1 and earlier, `src/include/storage/proc.h`).
    Pgproc,
    /// Dense `PgXact` array, same index as `PgProc` (9.2, Pavan Deolasee / Robert Haas, seed 000).
    #[default]
    Pgxact,
    /// `PgXact` array with each entry on its own cache line (the 2016 padding experiment).
    PgxactPadded,
    /// Separate dense xid / subxid-state / status-flag arrays in ProcArray order, xmin kept out
    /// of them, snapshots reused while no xid-bearing transaction ended (14, Andres Freund:
    /// commits 941697c3c, dc7420c2c, 623a9ba79).
    Dense,
}

impl Layout {
    /// Every layout, oldest design first (the order reports list them).
    pub const ALL: [Layout; 4] = [Layout::Pgproc, Layout::Pgxact, Layout::PgxactPadded, Layout::Dense];

    /// The name used on command lines and in reports: `pgproc`, `pgxact`, `pgxact-padded`,
    /// `dense`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Pgproc => "pgproc",
            Layout::Pgxact => "pgxact",
            Layout::PgxactPadded => "pgxact-padded",
            Layout::Dense => "dense",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Layout {
    type Err = ConfigError;

    /// Parses `pgproc` (or `pg91`), `pgxact` (`pg92`), `pgxact-padded` (`padded`) and `dense`
    /// (`pg14`). Errors name the valid spellings.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "pgproc" | "pg91" => Ok(Layout::Pgproc),
            "pgxact" | "pg92" => Ok(Layout::Pgxact),
            "pgxact-padded" | "pgxactpadded" | "padded" => Ok(Layout::PgxactPadded),
            "dense" | "pg14" => Ok(Layout::Dense),
            _ => Err(ConfigError(format!(
                "unknown ProcArray layout '{s}' (valid: pgproc, pgxact, pgxact-padded, dense)"
            ))),
        }
    }
}

/// How a transaction that has an xid leaves the ProcArray (`ProcArrayEndTransaction`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum EndXactStrategy {
    /// Take ProcArrayLock exclusive and clear the own entry (9.2-9.5).
    Exclusive,
    /// The 2011 FlexLock: if ProcArrayLock is busy, queue the request; the releasing holder
    /// clears it (Robert Haas's `flexlock` branch, seed 002's thread).
    FlexLock,
    /// Group XID clearing: conditional exclusive acquire, else join a group whose leader clears
    /// everybody under one exclusive hold (9.6, commit 0e141c0fbb, `ProcArrayGroupClearXid`).
    #[default]
    GroupClear,
}

impl EndXactStrategy {
    /// Every strategy, oldest first.
    pub const ALL: [EndXactStrategy; 3] =
        [EndXactStrategy::Exclusive, EndXactStrategy::FlexLock, EndXactStrategy::GroupClear];

    /// The name used on command lines and in reports: `exclusive`, `flexlock`, `group-clear`.
    pub fn name(self) -> &'static str {
        match self {
            EndXactStrategy::Exclusive => "exclusive",
            EndXactStrategy::FlexLock => "flexlock",
            EndXactStrategy::GroupClear => "group-clear",
        }
    }
}

impl fmt::Display for EndXactStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EndXactStrategy {
    type Err = ConfigError;

    /// Parses `exclusive`, `flexlock` (`flex`) and `group-clear` (`group`, `groupclear`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "exclusive" | "pg92" => Ok(EndXactStrategy::Exclusive),
            "flexlock" | "flex" => Ok(EndXactStrategy::FlexLock),
            "group-clear" | "groupclear" | "group" | "pg96" => Ok(EndXactStrategy::GroupClear),
            _ => Err(ConfigError(format!(
                "unknown end-of-transaction strategy '{s}' (valid: exclusive, flexlock, group-clear)"
            ))),
        }
    }
}

/// When the global xmin horizon (`RecentGlobalXmin`, the oldest xmin of any backend) is
/// computed. Seed 000 benchmarks both ways (Robert Haas, 2011-11-24 and 2011-11-25).
///
/// Applies to the `Pgproc`, `Pgxact` and `PgxactPadded` layouts; `Dense` never reads other
/// backends' xmin while building a snapshot (PostgreSQL 14, commit dc7420c2c), so for it the
/// horizon is always computed on demand, as with [`GlobalXminMode::Lazy`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum GlobalXminMode {
    /// Every snapshot reads every backend's xmin and recomputes the horizon (9.2 as committed,
    /// "pgxact-v2.patch").
    #[default]
    EverySnapshot,
    /// Snapshots skip the xmin reads; the horizon is computed by a separate ProcArray scan only
    /// when asked for, at most once per snapshot ("recentglobalxmin.patch"; 14's `GlobalVis`).
    Lazy,
}

impl GlobalXminMode {
    /// `every-snapshot` or `lazy`.
    pub fn name(self) -> &'static str {
        match self {
            GlobalXminMode::EverySnapshot => "every-snapshot",
            GlobalXminMode::Lazy => "lazy",
        }
    }
}

impl FromStr for GlobalXminMode {
    type Err = ConfigError;

    /// Parses `every-snapshot` (`every`, `eager`) or `lazy` (`recentglobalxmin`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "every-snapshot" | "every" | "eager" => Ok(GlobalXminMode::EverySnapshot),
            "lazy" | "recentglobalxmin" => Ok(GlobalXminMode::Lazy),
            _ => Err(ConfigError(format!("unknown global xmin mode '{s}' (valid: every-snapshot, lazy)"))),
        }
    }
}

/// `old_snapshot_threshold` (9.6-16): off (-1, the default), or a number of minutes (0 means
/// "immediately", PostgreSQL's testing value).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum OldSnapshotThreshold {
    /// The feature is off: snapshots take no extra lock (the first 2016 fix, commit 2201d801b).
    #[default]
    Off,
    /// Snapshots older than this many minutes may lose rows to pruning. Valid range 0..=86400
    /// (60 days), as PostgreSQL's GUC.
    Minutes(u32),
}

impl OldSnapshotThreshold {
    /// Largest accepted value in minutes (PostgreSQL: 60 days).
    pub const MAX_MINUTES: u32 = 86_400;
}

impl FromStr for OldSnapshotThreshold {
    type Err = ConfigError;

    /// Parses `off` or `-1` (off), or a number of minutes `0..=86400`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("off") || s == "-1" {
            return Ok(OldSnapshotThreshold::Off);
        }
        match s.parse::<u32>() {
            Ok(m) if m <= Self::MAX_MINUTES => Ok(OldSnapshotThreshold::Minutes(m)),
            _ => Err(ConfigError(format!(
                "invalid old_snapshot_threshold '{s}' (valid: off, -1, or 0..=86400 minutes)"
            ))),
        }
    }
}

/// How `MaintainOldSnapshotTimeMapping` (9.6 `snapmgr.c`) protects the time map when
/// old_snapshot_threshold is on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum TimeMapMaintenance {
    /// 9.6 beta: every snapshot takes `OldSnapshotTimeMapLock` exclusive (the regression of
    /// seed 001: 92 809 tps vs 354 077 with the feature off, 32 clients).
    EveryCall,
    /// Seed 001's fix (Amit Kapila, 2016-04-19): check under the spinlock first and take the
    /// exclusive lock only if xmin advanced past the newest xmin seen or a new minute began.
    #[default]
    XminAdvanced,
    /// The code 9.6 finally shipped (through 13): keep the newest xmin under the spinlock and
    /// take the exclusive lock only when a new minute bucket begins.
    MinuteBoundary,
}

impl TimeMapMaintenance {
    /// `every-call`, `xmin-advanced` or `minute-boundary`.
    pub fn name(self) -> &'static str {
        match self {
            TimeMapMaintenance::EveryCall => "every-call",
            TimeMapMaintenance::XminAdvanced => "xmin-advanced",
            TimeMapMaintenance::MinuteBoundary => "minute-boundary",
        }
    }
}

impl FromStr for TimeMapMaintenance {
    type Err = ConfigError;

    /// Parses `every-call` (`pg96beta`), `xmin-advanced` (`seed001`) or `minute-boundary`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "every-call" | "pg96beta" => Ok(TimeMapMaintenance::EveryCall),
            "xmin-advanced" | "seed001" => Ok(TimeMapMaintenance::XminAdvanced),
            "minute-boundary" | "pg96" => Ok(TimeMapMaintenance::MinuteBoundary),
            _ => Err(ConfigError(format!(
                "unknown time-map maintenance '{s}' (valid: every-call, xmin-advanced, minute-boundary)"
            ))),
        }
    }
}

/// A configuration value that cannot be used; the message says which and what is valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Everything [`crate::ProcArray::new`] needs. Build one with [`ProcArrayConfig::new`] or a
/// release preset ([`pg91`](Self::pg91), [`pg92`](Self::pg92), [`pg96`](Self::pg96),
/// [`pg14`](Self::pg14)) and override fields.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ProcArrayConfig {
    /// Number of `PgProc` slots (PostgreSQL's `MaxBackends`): backends `0..max_backends` may
    /// join. 1..=262_143 (PostgreSQL's `MAX_BACKENDS`, 2^18 - 1).
    pub max_backends: usize,
    /// Where the hot fields live.
    pub layout: Layout,
    /// How xid-bearing transactions leave the ProcArray.
    pub end_xact: EndXactStrategy,
    /// When the global xmin horizon is computed (ignored by `Dense`, see [`GlobalXminMode`]).
    pub global_xmin: GlobalXminMode,
    /// Skip the subxid cache of backends that have no xid (Heikki Linnakangas, seed 000,
    /// 2011-11-07; in 9.2). `false` reproduces 9.1, which read every backend's cache header.
    pub skip_subxids_without_xid: bool,
    /// Compare xids in the snapshot loop with plain 32-bit signed differences
    /// (`NormalTransactionIdPrecedes`, Robert Haas, seed 000, 2011-12-16; in 9.2). `false`
    /// uses the general comparison that first checks for special xids (9.1).
    pub fast_xid_compare: bool,
    /// `Dense` only: reuse the backend's previous snapshot while no xid-bearing transaction
    /// has ended (14, commit 623a9ba79). Off makes every `Dense` snapshot a full scan.
    pub snapshot_reuse: bool,
    /// old_snapshot_threshold.
    pub old_snapshot_threshold: OldSnapshotThreshold,
    /// How the old-snapshot time map is maintained when the threshold is on.
    pub time_map: TimeMapMaintenance,
    /// The LWLock implementation of ProcArrayLock, XidGenLock and OldSnapshotTimeMapLock.
    pub lwlock_kind: LwLockKind,
    /// The first xid handed out (`nextXid` at start-up); must be a normal xid (>= 3). Tests
    /// start near 2^31 or 2^32 to exercise wraparound.
    pub first_xid: TransactionId,
}

impl ProcArrayConfig {
    /// `max_backends` slots with the defaults: `Pgxact`, `GroupClear`, horizon in every
    /// snapshot, both 9.2 loop optimisations, reuse on (only `Dense` uses it), threshold off,
    /// atomic LWLocks, first xid 3.
    pub fn new(max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            max_backends,
            layout: Layout::Pgxact,
            end_xact: EndXactStrategy::GroupClear,
            global_xmin: GlobalXminMode::EverySnapshot,
            skip_subxids_without_xid: true,
            fast_xid_compare: true,
            snapshot_reuse: true,
            old_snapshot_threshold: OldSnapshotThreshold::Off,
            time_map: TimeMapMaintenance::XminAdvanced,
            lwlock_kind: LwLockKind::Atomic,
            first_xid: TransactionId::FIRST_NORMAL,
        }
    }

    /// PostgreSQL 9.1: hot fields in `PgProc`, 9.1 snapshot loop (subxid headers of every
    /// backend, general comparisons), exclusive end of transaction, 9.2-style spinlock LWLocks.
    pub fn pg91(max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            layout: Layout::Pgproc,
            end_xact: EndXactStrategy::Exclusive,
            skip_subxids_without_xid: false,
            fast_xid_compare: false,
            lwlock_kind: LwLockKind::Pg92,
            ..Self::new(max_backends)
        }
    }

    /// PostgreSQL 9.2: `PgXact`, both loop optimisations, exclusive end of transaction.
    pub fn pg92(max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            layout: Layout::Pgxact,
            end_xact: EndXactStrategy::Exclusive,
            lwlock_kind: LwLockKind::Pg92,
            ..Self::new(max_backends)
        }
    }

    /// PostgreSQL 9.6: `PgXact`, group XID clearing, atomic LWLocks.
    pub fn pg96(max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            layout: Layout::Pgxact,
            end_xact: EndXactStrategy::GroupClear,
            ..Self::new(max_backends)
        }
    }

    /// PostgreSQL 14: dense arrays, snapshot reuse, lazy horizons, group XID clearing.
    pub fn pg14(max_backends: usize) -> ProcArrayConfig {
        ProcArrayConfig {
            layout: Layout::Dense,
            end_xact: EndXactStrategy::GroupClear,
            global_xmin: GlobalXminMode::Lazy,
            ..Self::new(max_backends)
        }
    }

    /// Largest accepted `max_backends` (PostgreSQL's `MAX_BACKENDS`, 2^18 - 1).
    pub const MAX_BACKENDS: usize = (1 << 18) - 1;

    /// Checks every field; the error names the bad one and its valid range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_backends == 0 || self.max_backends > Self::MAX_BACKENDS {
            return Err(ConfigError(format!(
                "max_backends must be 1..={}, got {}",
                Self::MAX_BACKENDS,
                self.max_backends
            )));
        }
        if !self.first_xid.is_normal() {
            return Err(ConfigError(format!(
                "first_xid must be a normal xid (>= 3), got {}",
                self.first_xid
            )));
        }
        if let OldSnapshotThreshold::Minutes(m) = self.old_snapshot_threshold
            && m > OldSnapshotThreshold::MAX_MINUTES
        {
            return Err(ConfigError(format!(
                "old_snapshot_threshold must be off or 0..={} minutes, got {m}",
                OldSnapshotThreshold::MAX_MINUTES
            )));
        }
        Ok(())
    }
}

/// The ProcArray's knobs (`lockstack_common::knob`), over [`ProcArrayConfig`]; the defaults
/// are [`ProcArrayConfig::new`]'s.
pub const KNOBS: &[lockstack_common::Knob<ProcArrayConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{on_off, parsed};
    &[
        Knob {
            key: "procarray.layout",
            values: "pgproc|pgxact|pgxact-padded|dense",
            doc: "hot transaction fields: in PGPROC (9.1), PGXACT (9.2), padded PGXACT, dense arrays (14)",
            default: "pgxact",
            apply: |c, v| {
                c.layout = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.end_xact",
            values: "exclusive|flexlock|group-clear",
            doc: "ProcArrayEndTransaction: exclusive lock, FlexLock (2011 patch), group XID clear (9.6)",
            default: "group-clear",
            apply: |c, v| {
                c.end_xact = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.global_xmin",
            values: "every-snapshot|lazy",
            doc: "global xmin horizon on every snapshot, or lazily (the recentglobalxmin patch; 14's GlobalVis)",
            default: "every-snapshot",
            apply: |c, v| {
                c.global_xmin = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.skip_subxids_without_xid",
            values: "on|off",
            doc: "skip subxid caches of backends without an xid (9.2)",
            default: "on",
            apply: |c, v| {
                c.skip_subxids_without_xid = on_off(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.fast_xid_compare",
            values: "on|off",
            doc: "compare normal xids with plain integer arithmetic (9.2)",
            default: "on",
            apply: |c, v| {
                c.fast_xid_compare = on_off(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.snapshot_reuse",
            values: "on|off",
            doc: "reuse the last snapshot while no xid-bearing transaction ended (14; dense layout only)",
            default: "on",
            apply: |c, v| {
                c.snapshot_reuse = on_off(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.old_snapshot_threshold",
            values: "off|0..=86400 (minutes)",
            doc: "old_snapshot_threshold (9.6-16), in minutes",
            default: "off",
            apply: |c, v| {
                c.old_snapshot_threshold = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "procarray.time_map",
            values: "every-call|xmin-advanced|minute-boundary",
            doc: "OldSnapshotTimeMap maintenance: 9.6 beta, seed 001's fix, 9.6 release",
            default: "xmin-advanced",
            apply: |c, v| {
                c.time_map = parsed(v)?;
                Some(())
            },
        },
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for l in Layout::ALL {
            assert_eq!(l.name().parse::<Layout>().unwrap(), l);
        }
        for s in EndXactStrategy::ALL {
            assert_eq!(s.name().parse::<EndXactStrategy>().unwrap(), s);
        }
        for m in [
            TimeMapMaintenance::EveryCall,
            TimeMapMaintenance::XminAdvanced,
            TimeMapMaintenance::MinuteBoundary,
        ] {
            assert_eq!(m.name().parse::<TimeMapMaintenance>().unwrap(), m);
        }
        assert_eq!("lazy".parse::<GlobalXminMode>().unwrap(), GlobalXminMode::Lazy);
        assert!("nope".parse::<Layout>().unwrap_err().0.contains("pgxact-padded"));
        assert_eq!("off".parse::<OldSnapshotThreshold>().unwrap(), OldSnapshotThreshold::Off);
        assert_eq!("5".parse::<OldSnapshotThreshold>().unwrap(), OldSnapshotThreshold::Minutes(5));
        assert!("86401".parse::<OldSnapshotThreshold>().is_err());
    }

    #[test]
    fn validate_rejects_bad_values() {
        assert!(ProcArrayConfig::new(0).validate().is_err());
        assert!(ProcArrayConfig::new(ProcArrayConfig::MAX_BACKENDS + 1).validate().is_err());
        let mut c = ProcArrayConfig::new(4);
        assert!(c.validate().is_ok());
        c.first_xid = TransactionId::FROZEN;
        assert!(c.validate().unwrap_err().0.contains("first_xid"));
        let mut c = ProcArrayConfig::new(4);
        c.old_snapshot_threshold = OldSnapshotThreshold::Minutes(100_000);
        assert!(c.validate().is_err());
    }
}
