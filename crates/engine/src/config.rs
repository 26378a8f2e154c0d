//! The engine's configuration: [`EngineConfig`], one config per subsystem crate plus the
//! engine's own choices, and the release presets as knob assignments ([`PRESET_SETTINGS`]).
//! Both the engine (engine.rs, which builds from it) and the knob registry (settings.rs, which
//! sets it and builds the presets) import this module; neither imports the other.

use lockstack_bufmgr::BufferPoolConfig;
use lockstack_clog::{ClogConfig, SubTransConfig};
use lockstack_lmgr::LmgrConfig;
use lockstack_procarray::ProcArrayConfig;
use lockstack_xlog::WalConfig;

/// Everything a run configures: one config per subsystem.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Backends (clients) that may attach.
    pub max_backends: usize,
    /// ProcArray layout, end-of-transaction strategy, snapshot options.
    pub procarray: ProcArrayConfig,
    /// CLOG buffers, locking, group update.
    pub clog: ClogConfig,
    /// pg_subtrans.
    pub subtrans: SubTransConfig,
    /// Lock manager partitions, fast path, VXID locks.
    pub lmgr: LmgrConfig,
    /// Buffer pool size and variants.
    pub bufmgr: BufferPoolConfig,
    /// WAL insertion, buffers, flushes, synchronous_commit.
    pub wal: WalConfig,
    /// Which LWLock implementation the engine's own locks use (B-tree split locks). Set it
    /// with [`EngineConfig::set_lwlock_kind`], which sets every subsystem's at once.
    pub lwlock_kind: lockstack_lwlock::LwLockKind,
    /// How B-tree pages are searched for a key (`--set engine.btree_search`); not part of any
    /// preset, since it changes no lock traffic, only the probes within a locked page.
    pub btree_search: crate::btree::Search,
    /// How the buffer workloads (`lockstack buffers`, experiment `vm-pin`) test a heap page's
    /// all-visible bit (`--set vm.check`; seed 004's three patches). The engine's own
    /// transactions do not consult the visibility map, so it changes nothing in pgbench runs.
    pub vm_check: lockstack_bufmgr::vm::VmCheck,
    /// LWLock pre-sleep spin rounds (`--set lwlock.spin_rounds`; [`lockstack_lwlock::set_spin_rounds`]);
    /// `None`: the crate's default (10) natively, PostgreSQL's 0 under `--machine`.
    pub lwlock_spin_rounds: Option<u32>,
    /// How spin loops wait once their busy-waits are spent (`--set lwlock.spin_schedule`;
    /// [`lockstack_lwlock::SpinSchedule`]); `None`: `lockstack` natively, `postgres` (s_lock.c's
    /// 1 ms sleeps) under `--machine`.
    pub lwlock_spin_schedule: Option<lockstack_lwlock::SpinSchedule>,
}

impl EngineConfig {
    /// Defaults for `max_backends` backends and a pool of `nbuffers` 8 KiB buffers: each
    /// subsystem's own default (PostgreSQL 14-era designs), memory storage, WAL in memory with
    /// synchronous commit.
    pub fn new(max_backends: usize, nbuffers: usize) -> EngineConfig {
        let lwlock_kind = lockstack_lwlock::LwLockKind::Atomic;
        EngineConfig {
            max_backends,
            procarray: ProcArrayConfig::new(max_backends),
            clog: ClogConfig { max_backends, ..ClogConfig::default() },
            subtrans: SubTransConfig::default(),
            lmgr: LmgrConfig { max_backends, ..LmgrConfig::default() },
            bufmgr: BufferPoolConfig::pg96(nbuffers),
            wal: WalConfig::default(),
            lwlock_kind,
            btree_search: crate::btree::Search::default(),
            vm_check: lockstack_bufmgr::vm::VmCheck::PageFlagFirst,
            lwlock_spin_rounds: None,
            lwlock_spin_schedule: None,
        }
    }

    /// Sets the process-wide spin settings ([`lockstack_lwlock::set_spin_rounds`],
    /// [`lockstack_lwlock::set_spin_schedule`]) from this config, defaults for `None`. Every
    /// engine (and each experiment's buffer run) calls it before its run, so a setting never
    /// leaks from one run into the next.
    pub fn apply_spin_settings(&self) {
        lockstack_lwlock::set_spin_rounds(
            self.lwlock_spin_rounds.unwrap_or(lockstack_lwlock::DEFAULT_SPIN_ROUNDS),
        );
        lockstack_lwlock::set_spin_schedule(self.lwlock_spin_schedule.unwrap_or_default());
    }

    /// Sets the LWLock implementation of every subsystem and of the engine's own locks: the
    /// one place `lwlock.kind` fans out to the ProcArray, lock manager, buffer pool, WAL, CLOG
    /// and pg_subtrans configs.
    pub fn set_lwlock_kind(&mut self, kind: lockstack_lwlock::LwLockKind) {
        self.lwlock_kind = kind;
        self.procarray.lwlock_kind = kind;
        self.lmgr.lwlock_kind = kind;
        self.bufmgr.lwlock_kind = kind;
        self.wal.lwlock_kind = kind;
        self.clog.lwlock_kind = kind;
        self.subtrans.lwlock_kind = kind;
    }
}

/// The release presets `--preset` accepts, oldest first.
pub const PRESETS: [&str; 5] = ["pg91", "pg92", "pg96", "pg14", "pg17"];

/// The knobs of PostgreSQL 9.6's designs, shared by the pg96, pg14 and pg17 presets.
macro_rules! pg96_designs {
    ($layout:literal, $global_xmin:literal, $group_update:literal, $clog_locking:literal $(, $more:expr)*) => {
        &[
            ("lwlock.kind", "atomic"),
            ("procarray.layout", $layout),
            ("procarray.end_xact", "group-clear"),
            ("procarray.global_xmin", $global_xmin),
            ("lmgr.fast_path", "1"),
            ("lmgr.vxid", "on-demand"),
            ("bufmgr.header", "atomic"),
            ("bufmgr.mapping", "partitions-128"),
            ("bufmgr.victim", "atomic-clock"),
            ("wal.insert", "locks:8"),
            ("clog.locking", $clog_locking),
            ("clog.group_update", $group_update),
            $($more,)*
        ]
    };
}

/// Each preset as the knob assignments (the engine's `settings::KNOBS`) it applies, in order, to
/// [`EngineConfig::new`]; a knob not named keeps its subsystem's default.
pub const PRESET_SETTINGS: [(&str, &[(&str, &str)]); 5] = [
    (
        "pg91",
        &[
            ("lwlock.kind", "pg92"),
            ("procarray.layout", "pgproc"),
            ("procarray.end_xact", "exclusive"),
            ("procarray.skip_subxids_without_xid", "off"),
            ("procarray.fast_xid_compare", "off"),
            ("lmgr.fast_path", "off"),
            ("lmgr.vxid", "eager"),
            ("bufmgr.header", "spinlock"),
            ("bufmgr.mapping", "partitions-16"),
            ("bufmgr.victim", "freelist-lock"),
            ("wal.insert", "single"),
            ("clog.locking", "control-lock"),
            ("clog.group_update", "off"),
        ],
    ),
    (
        "pg92",
        &[
            ("lwlock.kind", "pg92"),
            ("procarray.layout", "pgxact"),
            ("procarray.end_xact", "exclusive"),
            ("lmgr.fast_path", "1"),
            ("lmgr.vxid", "on-demand"),
            ("bufmgr.header", "spinlock"),
            ("bufmgr.mapping", "partitions-16"),
            ("bufmgr.victim", "freelist-lock"),
            ("wal.insert", "single"),
            ("clog.locking", "control-lock"),
            ("clog.group_update", "off"),
        ],
    ),
    ("pg96", pg96_designs!("pgxact", "every-snapshot", "off", "control-lock")),
    ("pg14", pg96_designs!("dense", "lazy", "on", "control-lock")),
    ("pg17", pg96_designs!("dense", "lazy", "on", "banks", ("lmgr.nowait_queue_jump", "on"))),
];

impl EngineConfig {
    /// The assignments of preset `name` ([`PRESET_SETTINGS`]), or `None` for an unknown name.
    pub fn preset_settings(name: &str) -> Option<&'static [(&'static str, &'static str)]> {
        PRESET_SETTINGS.iter().find(|(n, _)| *n == name).map(|(_, s)| *s)
    }
}
