//! `--set crate.knob=value`: run-time overrides of one design choice on top of a preset.
//!
//! Every knob names the crate it belongs to and the field it sets, with PostgreSQL's GUC name
//! where one exists (`clog.buffers` is `transaction_buffers` in 17, `bufmgr.nbuffers` is
//! `shared_buffers` in 8 KiB pages, `wal.synchronous_commit` is `synchronous_commit`). Overrides
//! apply in the order given, after the preset; `lwlock.kind` sets the LWLock implementation of
//! every crate at once, so give it before any crate-specific override that should survive it.
//!
//! Errors are one line: an unknown key lists every valid key, a bad value names the key and lists
//! the values it accepts.

use std::str::FromStr;
use std::time::Duration;

use lockstack_bufmgr::{HeaderKind, MappingKind, VictimKind};
use lockstack_clog::SlruLocking;
use lockstack_lmgr::{FastPath, VxidLocks};
use lockstack_lwlock::LwLockKind;
use lockstack_procarray::{
    EndXactStrategy, GlobalXminMode, Layout, OldSnapshotThreshold, TimeMapMaintenance,
};
use lockstack_xlog::{InsertMode, WalSink};

use crate::engine::EngineConfig;

/// One overridable knob: its key, the values it accepts (for help and errors) and what it sets.
#[derive(Clone, Copy, Debug)]
pub struct Knob {
    /// `crate.knob`, as given to `--set`.
    pub key: &'static str,
    /// The values accepted, in words (`pgproc|pgxact|pgxact-padded|dense`, `1..=1024`).
    pub values: &'static str,
    /// What the knob selects, with the PostgreSQL name or release it stands for.
    pub about: &'static str,
}

/// Every knob `--set` accepts, in the order `lockstack pgbench --set help` lists them.
pub const KNOBS: &[Knob] = &[
    Knob {
        key: "lwlock.kind",
        values: "pg92|atomic|read-biased",
        about: "LWLock implementation of every crate (9.2 spinlock, 9.5+ atomic word, BRAVO reader-biased)",
    },
    Knob {
        key: "procarray.layout",
        values: "pgproc|pgxact|pgxact-padded|dense",
        about: "hot transaction fields: in PGPROC (9.1), PGXACT (9.2), padded PGXACT, dense arrays (14)",
    },
    Knob {
        key: "procarray.end_xact",
        values: "exclusive|flexlock|group-clear",
        about: "ProcArrayEndTransaction: exclusive lock, FlexLock (2011 patch), group XID clear (9.6)",
    },
    Knob {
        key: "procarray.global_xmin",
        values: "every-snapshot|lazy",
        about: "global xmin horizon on every snapshot, or lazily (the recentglobalxmin patch)",
    },
    Knob {
        key: "procarray.skip_subxids_without_xid",
        values: "on|off",
        about: "skip subxid caches of backends without an xid (9.2)",
    },
    Knob {
        key: "procarray.fast_xid_compare",
        values: "on|off",
        about: "compare normal xids with plain integer arithmetic (9.2)",
    },
    Knob {
        key: "procarray.snapshot_reuse",
        values: "on|off",
        about: "reuse the last snapshot while no xid-bearing transaction ended (14)",
    },
    Knob {
        key: "procarray.old_snapshot_threshold",
        values: "off|MINUTES",
        about: "old_snapshot_threshold (9.6-16), in minutes",
    },
    Knob {
        key: "procarray.time_map",
        values: "every-call|xmin-advanced|minute-boundary",
        about: "OldSnapshotTimeMap maintenance: 9.6 beta, seed 001's fix, 9.6 release",
    },
    Knob {
        key: "clog.buffers",
        values: "2..=65536 (multiple of 16 with banks)",
        about: "CLOG SLRU buffers (NUM_CLOG_BUFFERS; transaction_buffers in 17)",
    },
    Knob {
        key: "clog.locking",
        values: "control-lock|banks",
        about: "one SLRU control lock (9.2) or banks of 16 buffers with a lock each (17)",
    },
    Knob { key: "clog.group_update", values: "on|off", about: "group CLOG status update (11)" },
    Knob {
        key: "subtrans.buffers",
        values: "2..=65536 (multiple of 16 with banks)",
        about: "pg_subtrans SLRU buffers",
    },
    Knob { key: "subtrans.locking", values: "control-lock|banks", about: "pg_subtrans SLRU locking" },
    Knob {
        key: "lmgr.partitions",
        values: "power of two 1..=1024",
        about: "lock manager partitions (NUM_LOCK_PARTITIONS, 16 in PostgreSQL)",
    },
    Knob {
        key: "lmgr.fast_path",
        values: "off|power of two 1..=1024",
        about: "fast-path relation locks: off (9.1), GROUPS groups of 16 slots (1 = 9.2, more = 18)",
    },
    Knob {
        key: "lmgr.vxid",
        values: "eager|on-demand",
        about: "VXID locks taken at BEGIN (9.1) or on demand (9.2)",
    },
    Knob {
        key: "lmgr.deadlock_timeout",
        values: "1..=3600000 (ms)",
        about: "deadlock_timeout: wait before running the deadlock detector (PostgreSQL: 1000 ms)",
    },
    Knob {
        key: "lmgr.lock_timeout",
        values: "0..=3600000 (ms)",
        about: "lock_timeout: give up a heavyweight lock wait after this long (0 = never, the default)",
    },
    Knob { key: "bufmgr.nbuffers", values: "16..=2097152", about: "shared_buffers, in 8 KiB pages" },
    Knob {
        key: "bufmgr.header",
        values: "spinlock|atomic",
        about: "buffer header: spinlock (9.2) or atomic state word (9.6)",
    },
    Knob {
        key: "bufmgr.mapping",
        values: "partitions-N|dashmap",
        about: "buffer mapping table: N partitions (16 in 9.2, 128 in 9.5) or dashmap",
    },
    Knob {
        key: "bufmgr.victim",
        values: "freelist-lock|atomic-clock",
        about: "victim search: BufFreelistLock (9.2) or atomic clock hand (9.5)",
    },
    Knob {
        key: "wal.insert",
        values: "single|locks:N",
        about: "one WALInsertLock (9.2) or N insertion locks (9.4, N = 8)",
    },
    Knob {
        key: "wal.buffers",
        values: "4..=65536",
        about: "wal_buffers, in 8 KiB pages (PostgreSQL's minimum is 4)",
    },
    Knob { key: "wal.synchronous_commit", values: "on|off", about: "synchronous_commit" },
    Knob { key: "wal.commit_delay", values: "0..=100000 (us)", about: "commit_delay, in us" },
    Knob { key: "wal.commit_siblings", values: "0..=1000", about: "commit_siblings" },
    Knob {
        key: "wal.flush",
        values: "memory|modelled:0..=1000000 (us)",
        about: "WAL flush cost when not in --data-dir: none, or a modelled fsync of that many us",
    },
    Knob {
        key: "wal.writer_delay",
        values: "1..=10000 (ms)",
        about: "wal_writer_delay, in ms (synchronous_commit off)",
    },
    Knob {
        key: "wal.write_limit",
        values: "0..=1099511627776 (bytes)",
        about: "fault injection: WAL writes past this many bytes of log fail with ENOSPC, as on a full disk (0: no limit)",
    },
    Knob {
        key: "engine.btree_search",
        values: "interpolation|binary",
        about: "B-tree page search: interpolation from the parent's key range, or _bt_binsrch's bisection",
    },
];

fn valid_keys() -> String {
    KNOBS.iter().map(|k| k.key).collect::<Vec<_>>().join(", ")
}

fn bool_value(key: &str, v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(format!("invalid value \"{v}\" for --set {key} (valid: on, off)")),
    }
}

fn number<T: FromStr + PartialOrd + std::fmt::Display>(
    key: &str,
    v: &str,
    lo: T,
    hi: T,
) -> Result<T, String> {
    match v.parse::<T>() {
        Ok(n) if n >= lo && n <= hi => Ok(n),
        _ => Err(format!("invalid value \"{v}\" for --set {key} (valid: {lo}..={hi})")),
    }
}

fn parsed<T: FromStr>(key: &str, v: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse::<T>().map_err(|e| format!("invalid value \"{v}\" for --set {key}: {e}"))
}

/// Applies one `crate.knob=value` assignment to `cfg`.
///
/// # Errors
/// A one-line message when the text has no `=`, the key is unknown (listing every valid key) or
/// the value is not one the knob accepts (listing those). `cfg` is unchanged on error.
pub fn apply_set(cfg: &mut EngineConfig, assignment: &str) -> Result<(), String> {
    let Some((key, value)) = assignment.split_once('=') else {
        return Err(format!(
            "invalid --set \"{assignment}\": expected crate.knob=value (keys: {})",
            valid_keys()
        ));
    };
    let (key, v) = (key.trim(), value.trim());
    let mut c = cfg.clone();
    match key {
        "lwlock.kind" => {
            let k: LwLockKind = parsed(key, v)?;
            c.lwlock_kind = k;
            c.procarray.lwlock_kind = k;
            c.lmgr.lwlock = k;
            c.bufmgr.lwlock = k;
            c.wal.lwlock_kind = k;
            c.clog.lwlock_kind = k;
            c.subtrans.lwlock_kind = k;
        }
        "procarray.layout" => c.procarray.layout = parsed::<Layout>(key, v)?,
        "procarray.end_xact" => c.procarray.end_xact = parsed::<EndXactStrategy>(key, v)?,
        "procarray.global_xmin" => c.procarray.global_xmin = parsed::<GlobalXminMode>(key, v)?,
        "procarray.skip_subxids_without_xid" => c.procarray.skip_subxids_without_xid = bool_value(key, v)?,
        "procarray.fast_xid_compare" => c.procarray.fast_xid_compare = bool_value(key, v)?,
        "procarray.snapshot_reuse" => c.procarray.snapshot_reuse = bool_value(key, v)?,
        "procarray.old_snapshot_threshold" => {
            c.procarray.old_snapshot_threshold = parsed::<OldSnapshotThreshold>(key, v)?
        }
        "procarray.time_map" => c.procarray.time_map = parsed::<TimeMapMaintenance>(key, v)?,
        "clog.buffers" => c.clog.buffers = number(key, v, 2usize, 65536)?,
        "clog.locking" => c.clog.locking = slru_locking(key, v)?,
        "clog.group_update" => c.clog.group_update = bool_value(key, v)?,
        "subtrans.buffers" => c.subtrans.buffers = number(key, v, 2usize, 65536)?,
        "subtrans.locking" => c.subtrans.locking = slru_locking(key, v)?,
        "lmgr.partitions" => {
            let n = number(key, v, 1usize, 1024)?;
            if !n.is_power_of_two() {
                return Err(format!(
                    "invalid value \"{v}\" for --set {key} (valid: a power of two 1..=1024)"
                ));
            }
            c.lmgr.partitions = n;
        }
        "lmgr.fast_path" => {
            c.lmgr.fast_path = if v.eq_ignore_ascii_case("off") {
                FastPath::Off
            } else {
                let groups = number(key, v, 1usize, 1024)?;
                if !groups.is_power_of_two() {
                    return Err(format!(
                        "invalid value \"{v}\" for --set {key} (valid: off or a power of two 1..=1024)"
                    ));
                }
                FastPath::Groups { groups }
            }
        }
        "lmgr.vxid" => c.lmgr.vxid = parsed::<VxidLocks>(key, v)?,
        "lmgr.deadlock_timeout" => {
            c.lmgr.deadlock_timeout = std::time::Duration::from_millis(number(key, v, 1u64, 3_600_000)?);
        }
        "lmgr.lock_timeout" => {
            let ms = number(key, v, 0u64, 3_600_000)?;
            c.lmgr.lock_timeout = (ms > 0).then(|| std::time::Duration::from_millis(ms));
        }
        "bufmgr.nbuffers" => c.bufmgr.nbuffers = number(key, v, 16usize, lockstack_bufmgr::MAX_BUFFERS)?,
        "bufmgr.header" => c.bufmgr.header = parsed::<HeaderKind>(key, v)?,
        "bufmgr.mapping" => c.bufmgr.mapping = parsed::<MappingKind>(key, v)?,
        "bufmgr.victim" => c.bufmgr.victim = parsed::<VictimKind>(key, v)?,
        "wal.insert" => c.wal.insert_mode = parsed::<InsertMode>(key, v)?,
        "wal.buffers" => c.wal.wal_buffers = number(key, v, 4usize, 65536)?,
        "wal.synchronous_commit" => c.wal.synchronous_commit = bool_value(key, v)?,
        "wal.commit_delay" => c.wal.commit_delay_us = number(key, v, 0u64, 100_000)?,
        "wal.commit_siblings" => c.wal.commit_siblings = number(key, v, 0usize, 1000)?,
        "wal.flush" => {
            c.wal.sink = match v.split_once(':') {
                None if v == "memory" => WalSink::Memory,
                Some(("modelled", us)) => WalSink::Modelled {
                    flush_delay: Duration::from_micros(number(key, us, 0u64, 1_000_000)?),
                },
                _ => {
                    return Err(format!(
                        "invalid value \"{v}\" for --set {key} (valid: memory, modelled:MICROSECONDS)"
                    ));
                }
            }
        }
        "wal.writer_delay" => {
            c.wal.wal_writer_delay = Duration::from_millis(number(key, v, 1u64, 10_000)?);
        }
        "wal.write_limit" => {
            let n = number(key, v, 0u64, 1 << 40)?;
            c.wal.write_limit = (n > 0).then_some(n);
        }
        "engine.btree_search" => c.btree_search = parsed::<crate::btree::Search>(key, v)?,
        _ => return Err(format!("unknown --set key \"{key}\" (valid: {})", valid_keys())),
    }
    *cfg = c;
    Ok(())
}

fn slru_locking(key: &str, v: &str) -> Result<SlruLocking, String> {
    match v {
        "control-lock" | "pg92" => Ok(SlruLocking::ControlLock),
        "banks" | "pg17" => Ok(SlruLocking::Banks),
        _ => Err(format!("invalid value \"{v}\" for --set {key} (valid: control-lock, banks)")),
    }
}

/// Applies every assignment in order (see [`apply_set`]), then checks the resulting
/// configuration as the engine will ([`validate`]), so that a combination the engine would
/// refuse (`clog.buffers=20` with banks) fails here, as bad input, naming the assignment.
///
/// # Errors
/// The first failing assignment's message (`cfg` keeps the assignments before it), or
/// [`validate`]'s.
pub fn apply_all<S: AsRef<str>>(cfg: &mut EngineConfig, assignments: &[S]) -> Result<(), String> {
    assignments.iter().try_for_each(|a| apply_set(cfg, a.as_ref()))?;
    validate(cfg, assignments)
}

/// Checks `cfg` the way [`Engine::new`](crate::engine::Engine::new) will (each subsystem's own
/// range checks, and the SLRU buffer rules of `SimpleLruInit`: at least 2 buffers, a multiple
/// of 16 with banks), without building anything.
///
/// # Errors
/// One line naming what is wrong: `--set KEY=VALUE: reason` for the last of `assignments`
/// that set a knob of the failing subsystem (`lwlock.kind` excepted), otherwise
/// `engine configuration: reason` (a preset's own value).
pub fn validate<S: AsRef<str>>(cfg: &EngineConfig, assignments: &[S]) -> Result<(), String> {
    let slru = |name: &str, buffers: usize, locking: SlruLocking| -> Result<(), String> {
        if !(2..=65536).contains(&buffers) {
            return Err(format!("{name} buffers must be 2..=65536, got {buffers}"));
        }
        if locking == SlruLocking::Banks && !buffers.is_multiple_of(lockstack_clog::SLRU_BANK_SIZE) {
            return Err(format!(
                "{name} buffers must be a multiple of {} with banks (locking=banks), got {buffers}",
                lockstack_clog::SLRU_BANK_SIZE
            ));
        }
        Ok(())
    };
    let checks: [(&str, Result<(), String>); 6] = [
        ("clog.", slru("CLOG", cfg.clog.buffers, cfg.clog.locking)),
        ("subtrans.", slru("pg_subtrans", cfg.subtrans.buffers, cfg.subtrans.locking)),
        ("lmgr.", cfg.lmgr.validate()),
        ("bufmgr.", cfg.bufmgr.validate().map_err(|e| e.to_string())),
        ("wal.", cfg.wal.validate().map_err(|e| e.to_string())),
        ("procarray.", cfg.procarray.validate().map_err(|e| e.to_string())),
    ];
    for (prefix, r) in checks {
        if let Err(reason) = r {
            let culprit = assignments.iter().map(AsRef::as_ref).rev().find(|a| a.trim().starts_with(prefix));
            return Err(match culprit {
                Some(a) => format!("--set {}: {reason}", a.trim()),
                None => format!("engine configuration: {reason}"),
            });
        }
    }
    Ok(())
}

/// Buffers per unit of pgbench scale: the four tables and their indexes take about 2200 8 KiB
/// pages per scale unit when loaded (docs/engine.md).
pub const BUFFERS_PER_SCALE: usize = 2200;

/// Buffers `lockstack pgbench` adds beyond the loaded tables (128 MiB) for the rows a run adds
/// (history rows, new versions). The experiments use a smaller headroom
/// (`lockstack_workloads::experiments::driver::BUFFER_HEADROOM`, 8192): their points are short and load a
/// fresh engine each, so the load time of a smaller pool matters more than eviction-free long
/// runs.
pub const PGBENCH_BUFFER_HEADROOM: usize = 16_384;

/// The buffer pool size, in 8 KiB pages, for pgbench tables at `scale` plus `headroom` pages:
/// [`BUFFERS_PER_SCALE`] x scale + headroom. `lockstack pgbench` passes
/// [`PGBENCH_BUFFER_HEADROOM`], the experiments their own headroom; both size the pool here.
///
/// # Errors
/// One line naming `-s` when the pool would exceed [`lockstack_bufmgr::MAX_BUFFERS`] (or the
/// scale is not positive).
pub fn pool_buffers(scale: i64, headroom: usize) -> Result<usize, String> {
    let n = usize::try_from(scale)
        .ok()
        .filter(|&s| s > 0)
        .and_then(|s| s.checked_mul(BUFFERS_PER_SCALE))
        .and_then(|n| n.checked_add(headroom))
        .ok_or_else(|| format!("-s {scale}: invalid scaling factor"))?;
    if n > lockstack_bufmgr::MAX_BUFFERS {
        return Err(format!(
            "-s {scale}: buffer pool would need {n} buffers (max {})",
            lockstack_bufmgr::MAX_BUFFERS
        ));
    }
    Ok(n)
}

/// Approximate memory a pgbench load at `scale` takes in memory (docs/engine.md: about 36 MiB
/// per unit of scale: buffers, heap and index pages, WAL), in bytes.
pub const BYTES_PER_SCALE: u64 = 36 << 20;

/// Refuses a `scale` whose load would not fit in the memory available now: `MemAvailable` of
/// `/proc/meminfo` when that file exists (Linux), otherwise no check.
///
/// # Errors
/// One line naming `-s`, the estimate and the available memory.
pub fn check_memory(scale: i64) -> Result<(), String> {
    let Some(avail) = mem_available() else { return Ok(()) };
    let need = u64::try_from(scale).unwrap_or(0).saturating_mul(BYTES_PER_SCALE);
    if need > avail {
        return Err(format!(
            "-s {scale}: the tables would need about {} MiB in memory, but only {} MiB are available",
            need >> 20,
            avail >> 20
        ));
    }
    Ok(())
}

/// `MemAvailable` from `/proc/meminfo`, bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> EngineConfig {
        EngineConfig::preset("pg17", 4, 1024).unwrap()
    }

    #[test]
    fn combinations_the_engine_refuses_are_refused_naming_the_assignment() {
        for (sets, want) in [
            (&["lmgr.fast_path=1000"][..], "--set lmgr.fast_path (valid: off or a power of two"),
            (&["clog.buffers=1"][..], "\"1\" for --set clog.buffers (valid: 2..=65536)"),
            (&["clog.buffers=17"][..], "--set clog.buffers=17: CLOG buffers must be a multiple of 16"),
            (&["clog.locking=banks", "clog.buffers=20"][..], "--set clog.buffers=20"),
            (
                &["subtrans.buffers=24", "subtrans.locking=banks"][..],
                "--set subtrans.locking=banks: pg_subtrans buffers must be a multiple",
            ),
            (&["bufmgr.nbuffers=2097153"][..], "--set bufmgr.nbuffers"),
            (&["wal.buffers=70000"][..], "--set wal.buffers"),
        ] {
            let mut c = cfg();
            let e = apply_all(&mut c, sets).unwrap_err();
            assert!(e.contains(want), "{sets:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
        // Order does not matter for the final check: control-lock allows any count >= 2.
        let mut c = cfg();
        apply_all(&mut c, &["clog.buffers=17", "clog.locking=control-lock"]).unwrap();
        apply_all(&mut c, &["clog.buffers=2"]).unwrap();
        // Whatever apply_all accepts, the engine builds.
        crate::engine::Engine::new(c, 1, 100).unwrap();
    }

    #[test]
    fn lock_timeouts_reach_every_session() {
        let mut c = cfg();
        assert!(
            apply_all(&mut c, &["lmgr.deadlock_timeout=0"]).unwrap_err().contains("(valid: 1..=3600000)")
        );
        apply_all(&mut c, &["lmgr.deadlock_timeout=25", "lmgr.lock_timeout=7"]).unwrap();
        let e = crate::engine::Engine::new(c.clone(), 1, 100).unwrap();
        let s = e.session(lockstack_common::BackendId(0)).unwrap();
        assert_eq!(
            s.lock_timeouts(),
            (std::time::Duration::from_millis(25), Some(std::time::Duration::from_millis(7)))
        );
        apply_all(&mut c, &["lmgr.lock_timeout=0"]).unwrap();
        assert_eq!(c.lmgr.lock_timeout, None, "0 waits forever, as in PostgreSQL");
    }

    #[test]
    fn pool_size_is_shared_and_bounded() {
        assert_eq!(pool_buffers(1, PGBENCH_BUFFER_HEADROOM).unwrap(), 2200 + 16_384);
        assert_eq!(pool_buffers(945, PGBENCH_BUFFER_HEADROOM).unwrap(), 945 * 2200 + 16_384);
        let e = pool_buffers(946, PGBENCH_BUFFER_HEADROOM).unwrap_err();
        assert_eq!(e, "-s 946: buffer pool would need 2097584 buffers (max 2097152)");
        assert!(pool_buffers(0, 0).is_err() && pool_buffers(-3, 0).is_err());
        assert!(pool_buffers(i64::MAX, 1).is_err());
        assert!(check_memory(100_000).is_err() || mem_available().is_none());
        check_memory(1).unwrap();
    }

    #[test]
    fn every_listed_knob_is_accepted_with_a_sample_value() {
        let sample = |k: &str| match k {
            "lwlock.kind" => "pg92",
            "procarray.layout" => "pgproc",
            "procarray.end_xact" => "flexlock",
            "procarray.global_xmin" => "lazy",
            "procarray.old_snapshot_threshold" => "1",
            "procarray.time_map" => "every-call",
            "clog.locking" | "subtrans.locking" => "banks",
            "lmgr.fast_path" => "off",
            "lmgr.vxid" => "eager",
            "bufmgr.header" => "spinlock",
            "bufmgr.mapping" => "dashmap",
            "bufmgr.victim" => "freelist-lock",
            "wal.insert" => "single",
            "wal.flush" => "modelled:50",
            "engine.btree_search" => "binary",
            k if k.ends_with("reuse") || k.ends_with("update") || k.ends_with("commit") => "off",
            k if k.contains("skip") || k.contains("compare") => "off",
            _ => "64",
        };
        for k in KNOBS {
            let mut c = cfg();
            apply_set(&mut c, &format!("{}={}", k.key, sample(k.key))).unwrap_or_else(|e| panic!("{e}"));
        }
    }

    #[test]
    fn overrides_change_the_named_field_only() {
        let mut c = cfg();
        apply_all(&mut c, &["procarray.layout=pgproc", "lmgr.fast_path=off", "clog.buffers=32"]).unwrap();
        assert_eq!(c.procarray.layout, Layout::Pgproc);
        assert_eq!(c.lmgr.fast_path, FastPath::Off);
        assert_eq!(c.clog.buffers, 32);
        assert_eq!(c.procarray.end_xact, cfg().procarray.end_xact);
        apply_set(&mut c, "lwlock.kind=pg92").unwrap();
        assert_eq!(c.lmgr.lwlock, LwLockKind::Pg92);
        assert_eq!(c.wal.lwlock_kind, LwLockKind::Pg92);
        assert_eq!(c.clog.lwlock_kind, LwLockKind::Pg92);
    }

    #[test]
    fn bad_input_is_one_line_and_leaves_the_config_alone() {
        let mut c = cfg();
        let before = format!("{c:?}");
        for bad in [
            "procarray.layout",
            "nosuch.knob=1",
            "procarray.layout=fat",
            "lmgr.partitions=3",
            "clog.buffers=0",
            "wal.flush=disk",
            "wal.synchronous_commit=maybe",
        ] {
            let e = apply_set(&mut c, bad).unwrap_err();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains("valid"), "{bad}: {e}");
        }
        assert_eq!(before, format!("{c:?}"));
        let e = apply_set(&mut c, "nosuch.knob=1").unwrap_err();
        for k in KNOBS {
            assert!(e.contains(k.key), "unknown-key error lists {}", k.key);
        }
    }
}
