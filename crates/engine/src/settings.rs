//! `--set crate.knob=value`: run-time overrides of one design choice on top of a preset, read
//! from the knob registry [`KNOBS`] (each crate's `lockstack_common::knob::Knob` list plus the
//! engine's own), which the presets ([`PRESET_SETTINGS`], built by [`EngineConfig::preset`]),
//! the micro commands ([`CommandKnobs`]) and docs/engine.md's table read. The layers above
//! compose it with their own knobs (the workloads' `settings::KNOBS` adds the simulated
//! machine's `sim.*`), and `--set`, `--set help` and the experiments read that composition.
//!
//! Every knob names the crate it belongs to and the field it sets, with PostgreSQL's GUC name
//! where one exists (`clog.buffers` is `transaction_buffers` in 17, `bufmgr.nbuffers` is
//! `shared_buffers` in 8 KiB pages, `wal.synchronous_commit` is `synchronous_commit`). Overrides
//! apply in the order given, after the preset; `lwlock.kind` sets the LWLock implementation of
//! every crate at once, so give it before any crate-specific override that should survive it.
//!
//! Errors are one line: an unknown key lists every valid key, a bad value names the key and lists
//! the values it accepts.

use std::time::Duration;

use lockstack_bufmgr::BufferPoolConfig;
use lockstack_clog::{ClogConfig, SlruLocking, SubTransConfig};
use lockstack_common::knob::{Knob, KnobError, KnobInfo, Nested, Registry, in_range, parsed};
use lockstack_lmgr::LmgrConfig;
use lockstack_lwlock::LwLockKind;
use lockstack_procarray::ProcArrayConfig;
use lockstack_xlog::{WalConfig, WalSink};

use crate::config::{EngineConfig, PRESET_SETTINGS, PRESETS};

mod error;
pub use error::{ConfigCheckError, SettingsError};

impl SettingsError {
    fn unknown_preset(name: &str) -> SettingsError {
        SettingsError::UnknownPreset { name: name.to_string(), valid: PRESETS.join(", ") }
    }
}

static LWLOCK: Nested<EngineConfig, LwLockKind> =
    Nested { knobs: lockstack_lwlock::KNOBS, get: |c| c.lwlock_kind, put: EngineConfig::set_lwlock_kind };
static PROCARRAY: Nested<EngineConfig, ProcArrayConfig> =
    Nested { knobs: lockstack_procarray::KNOBS, get: |c| c.procarray, put: |c, p| c.procarray = p };
static CLOG: Nested<EngineConfig, ClogConfig> =
    Nested { knobs: lockstack_clog::CLOG_KNOBS, get: |c| c.clog.clone(), put: |c, x| c.clog = x };
static SUBTRANS: Nested<EngineConfig, SubTransConfig> =
    Nested { knobs: lockstack_clog::SUBTRANS_KNOBS, get: |c| c.subtrans.clone(), put: |c, x| c.subtrans = x };
static LMGR: Nested<EngineConfig, LmgrConfig> =
    Nested { knobs: lockstack_lmgr::KNOBS, get: |c| c.lmgr, put: |c, x| c.lmgr = x };
static BUFMGR: Nested<EngineConfig, BufferPoolConfig> =
    Nested { knobs: lockstack_bufmgr::KNOBS, get: |c| c.bufmgr.clone(), put: |c, x| c.bufmgr = x };
static WAL: Nested<EngineConfig, WalConfig> =
    Nested { knobs: lockstack_xlog::KNOBS, get: |c| c.wal.clone(), put: |c, x| c.wal = x };

/// The engine's own knobs: the WAL's flush cost outside `--data-dir`, the B-tree page search,
/// the buffer workloads' visibility check and the process-wide LWLock spin settings.
pub const ENGINE_KNOBS: &[Knob<EngineConfig>] = &[
    Knob {
        key: "wal.flush",
        values: "memory|modelled:0..=1000000 (us)",
        doc: "WAL flush cost when not in --data-dir: none, or a modelled fsync of that many us",
        default: "memory",
        apply: |c, v| {
            c.wal.sink = match v.split_once(':') {
                None if v == "memory" => WalSink::Memory,
                Some(("modelled", us)) => {
                    WalSink::Modelled { flush_delay: Duration::from_micros(in_range(us, 0u64, 1_000_000)?) }
                }
                _ => return None,
            };
            Some(())
        },
    },
    Knob {
        key: "engine.btree_search",
        values: "interpolation|binary",
        doc: "B-tree page search: interpolation from the parent's key range, or _bt_binsrch's bisection",
        default: "interpolation",
        apply: |c, v| {
            c.btree_search = parsed(v)?;
            Some(())
        },
    },
    Knob {
        key: "vm.check",
        values: "page-flag-first|always-vm|always-vm-keep-pin",
        doc: "all-visible test of the buffer workloads (lockstack buffers, vm-pin): PD_ALL_VISIBLE first (9.2), always the VM page, VM page kept pinned (seed 004's patches 1-3)",
        default: "page-flag-first",
        apply: |c, v| {
            c.vm_check = parsed(v)?;
            Some(())
        },
    },
    Knob {
        key: "lwlock.spin_rounds",
        values: "default|0..=64",
        doc: "LWLock pre-sleep spin rounds, process-wide (0: PostgreSQL's, queue at once; default: 10 natively, 0 under --machine)",
        default: "default",
        apply: |c, v| {
            c.lwlock_spin_rounds = if v == "default" { None } else { Some(in_range(v, 0u32, 64)?) };
            Some(())
        },
    },
    Knob {
        key: "lwlock.spin_schedule",
        values: "default|lockstack|postgres",
        doc: "how spin loops wait after their busy-waits: yields then short sleeps, or s_lock.c's wait (`spins_per_delay` pauses, 100 adapted within 10..1000, then sleeps from 1 ms growing by a random 1-2x, booked as `Timeout:SpinDelay`) (default: lockstack natively, postgres under --machine)",
        default: "default",
        apply: |c, v| {
            c.lwlock_spin_schedule = if v == "default" { None } else { Some(parsed(v)?) };
            Some(())
        },
    },
];

/// Every knob `--set` accepts: each crate's list ([`lockstack_lwlock::KNOBS`],
/// [`lockstack_procarray::KNOBS`], [`lockstack_clog::CLOG_KNOBS`] and
/// [`lockstack_clog::SUBTRANS_KNOBS`], [`lockstack_lmgr::KNOBS`], [`lockstack_bufmgr::KNOBS`],
/// [`lockstack_xlog::KNOBS`]) with where its config lives in [`EngineConfig`], then
/// [`ENGINE_KNOBS`], in the order `lockstack pgbench --set help` lists them. `lwlock.kind`
/// sets every crate's LWLock implementation ([`EngineConfig::set_lwlock_kind`]).
pub static KNOBS: Registry<EngineConfig> =
    Registry { lists: &[&LWLOCK, &PROCARRAY, &CLOG, &SUBTRANS, &LMGR, &BUFMGR, &WAL, &ENGINE_KNOBS] };

/// Every knob, in listing order.
pub fn knobs() -> Vec<KnobInfo> {
    KNOBS.infos()
}

/// Applies one `crate.knob=value` assignment to `cfg`.
///
/// # Errors
/// A one-line message when the text has no `=`, the key is unknown (listing every valid key) or
/// the value is not one the knob accepts (listing those). `cfg` is unchanged on error.
pub fn apply_set(cfg: &mut EngineConfig, assignment: &str) -> Result<(), SettingsError> {
    Ok(KNOBS.assign(cfg, assignment)?)
}

impl EngineConfig {
    /// The designs of one PostgreSQL release, for `max_backends` backends and `nbuffers`
    /// buffers: [`EngineConfig::new`] with the preset's knob assignments ([`PRESET_SETTINGS`])
    /// applied through the knob registry.
    ///
    /// | preset | LWLock | ProcArray | lock manager | buffers | WAL | CLOG |
    /// |---|---|---|---|---|---|---|
    /// | pg91 | 9.2 spinlock | hot fields in PGPROC, exclusive end | no fast path, eager VXID locks | header spinlock, 16 partitions, free-list lock | one WALInsertLock | control lock |
    /// | pg92 | 9.2 spinlock | PGXACT, exclusive end | fast path (16 slots), on-demand VXID | as pg91 | one WALInsertLock | control lock |
    /// | pg96 | atomic | PGXACT, group XID clear | as pg92 | atomic header, 128 partitions, atomic clock | 8 insertion locks | control lock |
    /// | pg14 | atomic | dense arrays + snapshot reuse, group clear | as pg92 | as pg96 | 8 insertion locks | control lock + group update |
    /// | pg17 | atomic | as pg14 | as pg92, NOWAIT may jump the queue | as pg96 | 8 insertion locks | banks + group update |
    ///
    /// # Errors
    /// An unknown name, with the list of valid ones.
    pub fn preset(name: &str, max_backends: usize, nbuffers: usize) -> Result<EngineConfig, SettingsError> {
        let settings =
            EngineConfig::preset_settings(name).ok_or_else(|| SettingsError::unknown_preset(name))?;
        let mut c = EngineConfig::new(max_backends, nbuffers);
        for (key, value) in settings {
            KNOBS.set(&mut c, key, value).map_err(|source| SettingsError::Preset {
                prefix: "preset",
                name: name.to_string(),
                source,
            })?;
        }
        Ok(c)
    }
}

/// The engine's rows of docs/engine.md's knob table ("Presets and knobs"): key, values,
/// default, what it selects. The document's table is the registry that `--set` reads, which
/// composes this one first and adds the knobs of the layers above (a test in each crate keeps
/// the document equal to its part).
pub fn knob_table() -> String {
    lockstack_common::knob::markdown_table(&knobs())
}

/// The preset table of docs/engine.md: each preset's assignments ([`PRESET_SETTINGS`]).
pub fn preset_table() -> String {
    let mut t = String::from("| preset | settings |\n|---|---|\n");
    for (name, settings) in PRESET_SETTINGS {
        let s: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        t += &format!("| {name} | `{}` |\n", s.join(" "));
    }
    t
}

/// What a command that runs one subsystem (`lockstack lwlock|locks|buffers|snapshot|wal`)
/// takes from the knob registry: the keys it reads and its own defaults for them, which
/// `--preset` and then its flags and `--set` override.
#[derive(Clone, Copy, Debug)]
pub struct CommandKnobs {
    /// The command, for errors (`lockstack locks`).
    pub command: &'static str,
    /// The knobs it reads; `--set` of any other knob is refused, a preset's others skipped.
    pub reads: &'static [&'static str],
    /// Its defaults (applied first, in [`KNOBS`] spelling).
    pub defaults: &'static [(&'static str, &'static str)],
}

/// A flag of a command that is an alias of a knob (`lockstack locks --vxid` is `lmgr.vxid`).
#[derive(Clone, Copy, Debug)]
pub struct FlagAlias<'a> {
    /// The flag, for errors (`--vxid`).
    pub flag: &'a str,
    /// The knob.
    pub key: &'static str,
    /// Whether the command line gave the flag.
    pub given: bool,
    /// The value to assign, in the knob's spelling; `None` for a flag the command applies
    /// itself (a list of designs to compare), which is only checked for a clash.
    pub value: Option<&'a str>,
}

/// A command's configuration after its defaults, `--preset`, flags and `--set`.
#[derive(Clone, Debug)]
pub struct CommandConfig {
    /// The resulting configuration (only the command's knobs mean anything).
    pub cfg: EngineConfig,
    /// Knobs the preset, a flag or `--set` assigned (not only the command's defaults).
    pub assigned: Vec<&'static str>,
}

impl CommandConfig {
    /// Whether the preset, a flag or `--set` assigned knob `key`.
    pub fn assigned(&self, key: &str) -> bool {
        self.assigned.contains(&key)
    }
}

impl CommandKnobs {
    /// Applies, in order, the command's defaults, the preset's assignments to the knobs it reads
    /// (a preset says nothing about the others), the flags given, and `--set`.
    ///
    /// # Errors
    /// One line: an unknown preset; a flag's value the knob refuses (naming the flag and the
    /// accepted values); an unknown `--set` key (listing every key); a `--set` of a knob the
    /// command does not read (listing those it reads); a bad `--set` value; a flag and a
    /// `--set` of the same knob (refused rather than one silently winning).
    pub fn resolve(
        &self,
        preset: Option<&str>,
        flags: &[FlagAlias<'_>],
        sets: &[String],
    ) -> Result<CommandConfig, SettingsError> {
        let (cfg, assigned) = self.resolve_in(&KNOBS, EngineConfig::new(1, 1024), preset, flags, sets)?;
        Ok(CommandConfig { cfg, assigned })
    }

    /// [`CommandKnobs::resolve`] through `registry`, a composition of [`KNOBS`] with the knobs
    /// of a layer above (whose keys `--set` must know, so that an unknown key lists them and a
    /// command refuses them by name), starting from `base`; returns the configuration and the
    /// knobs the preset, a flag or `--set` assigned.
    ///
    /// # Errors
    /// As [`CommandKnobs::resolve`].
    pub fn resolve_in<R>(
        &self,
        registry: &Registry<R>,
        base: R,
        preset: Option<&str>,
        flags: &[FlagAlias<'_>],
        sets: &[String],
    ) -> Result<(R, Vec<&'static str>), SettingsError> {
        let mut cfg = base;
        let mut assigned = Vec::new();
        for (k, v) in self.defaults {
            registry
                .set(&mut cfg, k, v)
                .map_err(|source| SettingsError::CommandDefault { command: self.command, source })?;
        }
        if let Some(name) = preset {
            let settings =
                EngineConfig::preset_settings(name).ok_or_else(|| SettingsError::unknown_preset(name))?;
            for (k, v) in settings.iter().filter(|(k, _)| self.reads.contains(k)) {
                registry.set(&mut cfg, k, v).map_err(|source| SettingsError::Preset {
                    prefix: "--preset",
                    name: name.to_string(),
                    source,
                })?;
                assigned.push(*k);
            }
        }
        for f in flags.iter().filter(|f| f.given) {
            if let Some(v) = f.value {
                registry.set(&mut cfg, f.key, v).map_err(|e| match e {
                    KnobError::BadValue { accepted, .. } => SettingsError::BadFlag {
                        flag: f.flag.to_string(),
                        accepted,
                        value: v.to_string(),
                        key: f.key,
                    },
                    other => SettingsError::Knob(other),
                })?;
            }
            assigned.push(f.key);
        }
        for a in sets {
            let key = lockstack_common::knob::key_of(a);
            if registry.info(key).is_some() && a.contains('=') && !self.reads.contains(&key) {
                return Err(SettingsError::NotRead {
                    key: key.to_string(),
                    command: self.command,
                    reads: self.reads.join(", "),
                });
            }
            if let Some(f) = flags.iter().find(|f| f.given && f.key == key) {
                return Err(SettingsError::FlagAndSet { flag: f.flag.to_string(), key: key.to_string() });
            }
            registry.assign(&mut cfg, a)?;
            if let Some(k) = self.reads.iter().find(|k| **k == key) {
                assigned.push(k);
            }
        }
        Ok((cfg, assigned))
    }
}

/// Applies every assignment in order (see [`apply_set`]), then checks the resulting
/// configuration as the engine will ([`validate`]), so that a combination the engine would
/// refuse (`clog.buffers=20` with banks) fails here, as bad input, naming the assignment.
///
/// # Errors
/// The first failing assignment's message (`cfg` keeps the assignments before it), or
/// [`validate`]'s.
pub fn apply_all<S: AsRef<str>>(cfg: &mut EngineConfig, assignments: &[S]) -> Result<(), SettingsError> {
    assignments.iter().try_for_each(|a| apply_set(cfg, a.as_ref()))?;
    validate(cfg, assignments)
}

/// Checks `cfg` the way `Engine::new` will (each subsystem's own
/// range checks, and the SLRU buffer rules of `SimpleLruInit`: at least 2 buffers, a multiple
/// of 16 with banks), without building anything.
///
/// # Errors
/// One line naming what is wrong: `--set KEY=VALUE: reason` for the last of `assignments`
/// that set a knob of the failing subsystem (`lwlock.kind` excepted), otherwise
/// `engine configuration: reason` (a preset's own value).
pub fn validate<S: AsRef<str>>(cfg: &EngineConfig, assignments: &[S]) -> Result<(), SettingsError> {
    let slru = |name: &'static str, buffers: usize, locking: SlruLocking| -> Result<(), ConfigCheckError> {
        if !(2..=65536).contains(&buffers) {
            return Err(ConfigCheckError::SlruBufferCount { name, buffers });
        }
        let bank = lockstack_clog::SLRU_BANK_SIZE;
        if locking == SlruLocking::Banks && !buffers.is_multiple_of(bank) {
            return Err(ConfigCheckError::SlruBankMultiple { name, bank, buffers });
        }
        Ok(())
    };
    let checks: [(&str, Result<(), ConfigCheckError>); 6] = [
        ("clog.", slru("CLOG", cfg.clog.buffers, cfg.clog.locking)),
        ("subtrans.", slru("pg_subtrans", cfg.subtrans.buffers, cfg.subtrans.locking)),
        ("lmgr.", cfg.lmgr.validate().map_err(Into::into)),
        ("bufmgr.", cfg.bufmgr.validate().map_err(Into::into)),
        ("wal.", cfg.wal.validate().map_err(Into::into)),
        ("procarray.", cfg.procarray.validate().map_err(Into::into)),
    ];
    for (prefix, r) in checks {
        if let Err(reason) = r {
            let culprit = assignments.iter().map(AsRef::as_ref).rev().find(|a| a.trim().starts_with(prefix));
            return Err(match culprit {
                Some(a) => SettingsError::Invalid { assignment: a.trim().to_string(), reason },
                None => SettingsError::InvalidConfiguration { reason },
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
pub fn pool_buffers(scale: i64, headroom: usize) -> Result<usize, SettingsError> {
    let n = usize::try_from(scale)
        .ok()
        .filter(|&s| s > 0)
        .and_then(|s| s.checked_mul(BUFFERS_PER_SCALE))
        .and_then(|n| n.checked_add(headroom))
        .ok_or(SettingsError::BadScale { scale })?;
    if n > lockstack_bufmgr::MAX_BUFFERS {
        return Err(SettingsError::PoolTooLarge { scale, need: n, max: lockstack_bufmgr::MAX_BUFFERS });
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
pub fn check_memory(scale: i64) -> Result<(), SettingsError> {
    let Some(avail) = mem_available() else { return Ok(()) };
    let need = u64::try_from(scale).unwrap_or(0).saturating_mul(BYTES_PER_SCALE);
    if need > avail {
        return Err(SettingsError::OutOfMemory { scale, need_mib: need >> 20, avail_mib: avail >> 20 });
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
    use lockstack_lmgr::{FastPath, VxidLocks};
    use lockstack_procarray::Layout;

    fn cfg() -> EngineConfig {
        EngineConfig::preset("pg17", 4, 1024).unwrap()
    }

    /// Today's presets as they were built before the knob registry (the tuples of
    /// `EngineConfig::preset` in commit a1529de), kept as the oracle the registry's preset lists
    /// must reproduce field for field.
    fn preset_oracle(name: &str, max_backends: usize, nbuffers: usize) -> EngineConfig {
        use lockstack_bufmgr::BufferPoolConfig as B;
        use lockstack_procarray::ProcArrayConfig;
        use lockstack_xlog::InsertMode;
        let mut c = EngineConfig::new(max_backends, nbuffers);
        let (kind, pa, fast, vxid, buf, ins, clog_lock, group) = match name {
            "pg91" => (
                LwLockKind::Pg92,
                ProcArrayConfig::pg91(max_backends),
                FastPath::Off,
                VxidLocks::Eager,
                B::pg92(nbuffers),
                InsertMode::SingleLock,
                SlruLocking::ControlLock,
                false,
            ),
            "pg92" => (
                LwLockKind::Pg92,
                ProcArrayConfig::pg92(max_backends),
                FastPath::PG92,
                VxidLocks::OnDemand,
                B::pg92(nbuffers),
                InsertMode::SingleLock,
                SlruLocking::ControlLock,
                false,
            ),
            "pg96" => (
                LwLockKind::Atomic,
                ProcArrayConfig::pg96(max_backends),
                FastPath::PG92,
                VxidLocks::OnDemand,
                B::pg96(nbuffers),
                InsertMode::InsertionLocks(8),
                SlruLocking::ControlLock,
                false,
            ),
            "pg14" | "pg17" => (
                LwLockKind::Atomic,
                ProcArrayConfig::pg14(max_backends),
                FastPath::PG92,
                VxidLocks::OnDemand,
                B::pg96(nbuffers),
                InsertMode::InsertionLocks(8),
                if name == "pg17" { SlruLocking::Banks } else { SlruLocking::ControlLock },
                true,
            ),
            other => panic!("no oracle for {other}"),
        };
        c.lwlock_kind = kind;
        c.procarray = ProcArrayConfig { lwlock_kind: kind, ..pa };
        c.lmgr.fast_path = fast;
        c.lmgr.vxid = vxid;
        c.lmgr.lwlock_kind = kind;
        c.lmgr.nowait_queue_jump = name == "pg17";
        c.bufmgr = B { lwlock_kind: kind, ..buf };
        c.wal.insert_mode = ins;
        c.wal.lwlock_kind = kind;
        c.clog.locking = clog_lock;
        c.clog.group_update = group;
        c.clog.lwlock_kind = kind;
        c.subtrans.lwlock_kind = kind;
        c
    }

    #[test]
    fn each_preset_yields_exactly_the_release_config() {
        for name in PRESETS {
            for (backends, nbuffers) in [(1, 16), (5, 1024), (101, 18_584)] {
                let got = EngineConfig::preset(name, backends, nbuffers).unwrap();
                let want = preset_oracle(name, backends, nbuffers);
                assert_eq!(format!("{got:#?}"), format!("{want:#?}"), "preset {name}");
            }
        }
        let e = EngineConfig::preset("pg10", 4, 1024).unwrap_err().to_string();
        assert!(e.contains("\"pg10\"") && e.contains("pg91, pg92, pg96, pg14, pg17"), "{e}");
    }

    #[test]
    fn each_knob_declares_its_crate_default_and_the_docs_table_matches() {
        let base = EngineConfig::new(4, 1024);
        let mut keys = Vec::new();
        for k in knobs() {
            assert!(!keys.contains(&k.key), "{} declared twice", k.key);
            keys.push(k.key);
            let mut c = base.clone();
            KNOBS.set(&mut c, k.key, k.default).unwrap_or_else(|e| panic!("default of {}: {e}", k.key));
            assert_eq!(format!("{c:?}"), format!("{base:?}"), "{}={} is not the default", k.key, k.default);
        }
        let doc =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/engine.md")).unwrap();
        for (what, table) in [("knob", knob_table()), ("preset", preset_table())] {
            assert!(
                doc.contains(&table),
                "docs/engine.md's {what} table differs from the registry; its head must be:\n{table}"
            );
        }
        for (name, settings) in PRESET_SETTINGS {
            assert!(PRESETS.contains(&name));
            for (k, _) in settings {
                assert!(keys.contains(k), "preset {name}: {k}");
            }
        }
        assert_eq!(PRESET_SETTINGS.len(), PRESETS.len());
    }

    #[test]
    fn commands_take_their_knobs_from_preset_flags_and_set() {
        const LOCKS: CommandKnobs = CommandKnobs {
            command: "lockstack locks",
            reads: &["lmgr.fast_path", "lmgr.vxid", "lmgr.partitions"],
            defaults: &[("lmgr.vxid", "on-demand")],
        };
        let flag = |given, value| FlagAlias { flag: "--vxid", key: "lmgr.vxid", given, value };
        let r = LOCKS.resolve(Some("pg91"), &[flag(false, None)], &[]).unwrap();
        assert_eq!((r.cfg.lmgr.fast_path, r.cfg.lmgr.vxid), (FastPath::Off, VxidLocks::Eager));
        assert!(r.assigned("lmgr.vxid") && !r.assigned("lmgr.partitions"));
        assert_eq!(
            r.cfg.bufmgr.header,
            EngineConfig::new(1, 1024).bufmgr.header,
            "pg91's other knobs skipped"
        );
        let r = LOCKS.resolve(Some("pg91"), &[flag(true, Some("on-demand"))], &["lmgr.partitions=4".into()]);
        let r = r.unwrap();
        assert_eq!((r.cfg.lmgr.vxid, r.cfg.lmgr.partitions), (VxidLocks::OnDemand, 4));
        for (preset, flags, sets, want) in [
            (
                None,
                vec![flag(true, Some("x"))],
                vec![],
                "--vxid must be eager|on-demand, got \"x\" (knob lmgr.vxid)",
            ),
            (
                None,
                vec![flag(true, Some("eager"))],
                vec!["lmgr.vxid=eager"],
                "--vxid and --set lmgr.vxid both set",
            ),
            (
                None,
                vec![],
                vec!["wal.buffers=8"],
                "--set wal.buffers: lockstack locks does not use this knob",
            ),
            (None, vec![], vec!["nosuch=1"], "unknown --set key \"nosuch\""),
            (None, vec![], vec!["lmgr.partitions=3"], "invalid value \"3\" for --set lmgr.partitions"),
            (Some("pg10"), vec![], vec![], "unknown preset \"pg10\""),
        ] {
            let sets: Vec<String> = sets.into_iter().map(String::from).collect();
            let e = LOCKS.resolve(preset, &flags, &sets).unwrap_err().to_string();
            assert!(e.contains(want) && !e.contains('\n'), "want {want:?}: {e}");
        }
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
            let e = apply_all(&mut c, sets).unwrap_err().to_string();
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
            apply_all(&mut c, &["lmgr.deadlock_timeout=0"])
                .unwrap_err()
                .to_string()
                .contains("(valid: 1..=3600000 (ms))")
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
        let e = pool_buffers(946, PGBENCH_BUFFER_HEADROOM).unwrap_err().to_string();
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
            "lmgr.nowait_queue_jump" => "on",
            "bufmgr.header" => "spinlock",
            "bufmgr.mapping" => "dashmap",
            "bufmgr.victim" => "freelist-lock",
            "bufmgr.desc_padding" => "none",
            "sim.caches" => "off",
            "wal.insert" => "single",
            "wal.flush" => "modelled:50",
            "engine.btree_search" => "binary",
            "vm.check" => "always-vm",
            "lwlock.spin_schedule" => "postgres",
            k if k.ends_with("reuse") || k.ends_with("update") || k.ends_with("commit") => "off",
            k if k.contains("skip") || k.contains("compare") => "off",
            _ => "64",
        };
        for k in knobs() {
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
        assert_eq!(c.lmgr.lwlock_kind, LwLockKind::Pg92);
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
            let e = apply_set(&mut c, bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains("valid"), "{bad}: {e}");
        }
        assert_eq!(before, format!("{c:?}"));
        let e = apply_set(&mut c, "nosuch.knob=1").unwrap_err().to_string();
        for k in knobs() {
            assert!(e.contains(k.key), "unknown-key error lists {}", k.key);
        }
    }
}
