//! The engine: one [`Engine`], the model of PostgreSQL's shared memory (ProcArray, CLOG,
//! pg_subtrans, the lock manager, the buffer pool, WAL, MultiXacts and the tables), built from
//! an [`EngineConfig`]. Backends attach to it with `Engine::session` and run statements as a
//! `crate::session::Session`; [`EngineError`] (`crate::error`) is re-exported here, the path
//! callers have always used.

use lockstack_common::sync::AtomicU32;
use std::sync::Arc;

use lockstack_bufmgr::{BufferPool, BufferPoolConfig, MemorySmgr, Smgr};
use lockstack_clog::{
    Clog, ClogConfig, SLRU_PAGES_PER_SEGMENT, SUBTRANS_XACTS_PER_PAGE, SubTrans, SubTransConfig,
    TruncateOutcome,
};
use lockstack_common::{BackendStatusArray, TransactionId};
use lockstack_lmgr::{Lmgr, LmgrConfig};
use lockstack_procarray::{ProcArray, ProcArrayConfig};
use lockstack_xlog::{Wal, WalConfig};

use crate::multixact::MultiXactStore;
use crate::tables::{self, TableId, TableRel};

pub use crate::error::EngineError;

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
    /// Under `--machine` only: a pgbench client's own work per statement (`--set
    /// sim.client_cpu_us`; default: the machine profile's), charged on its simulated core.
    pub sim_client_cpu: Option<std::time::Duration>,
    /// Under `--machine` only: the client-server round trip per statement (`--set
    /// sim.client_rtt_us`; default: the profile's), slept in virtual time.
    pub sim_client_rtt: Option<std::time::Duration>,
    /// Under `--machine` only: the server's work per statement that PostgreSQL does and this
    /// engine does not (parse, plan, executor, protocol), charged on the backend's simulated
    /// core (`--set sim.statement_cpu_us`; default 0). `lockstack experiment NAME --machine P
    /// --calibrate` solves it from a published 1-client figure (the calibration's one unknown).
    pub sim_statement_cpu: Option<std::time::Duration>,
    /// Under `--machine --costs postgres` only: the instructions per cycle PostgreSQL's code
    /// retires on the simulated core (`--set sim.postgres_ipc`; default: the profile's
    /// `postgres_ipc`), which sets the rate PostgreSQL's counts are charged at. `lockstack
    /// experiment NAME --machine P --calibrate` fits it to the baseline's published
    /// low-concurrency figure.
    pub sim_postgres_ipc: Option<f64>,
    /// LWLock pre-sleep spin rounds (`--set lwlock.spin_rounds`; [`lockstack_lwlock::set_spin_rounds`]);
    /// `None`: the crate's default (10) natively, PostgreSQL's 0 under `--machine`.
    pub lwlock_spin_rounds: Option<u32>,
    /// How spin loops wait once their busy-waits are spent (`--set lwlock.spin_schedule`;
    /// [`lockstack_lwlock::SpinSchedule`]); `None`: `lockstack` natively, `postgres` (s_lock.c's
    /// 1 ms sleeps) under `--machine`.
    pub lwlock_spin_schedule: Option<lockstack_lwlock::SpinSchedule>,
}

/// The shared state of a run.
pub struct Engine {
    /// The configuration it was built from.
    pub cfg: EngineConfig,
    /// ProcArray.
    pub procarray: Arc<ProcArray>,
    /// CLOG.
    pub clog: Arc<Clog>,
    /// pg_subtrans.
    pub subtrans: Arc<SubTrans>,
    /// Heavyweight lock manager.
    pub lmgr: Arc<Lmgr>,
    /// Buffer pool.
    pub pool: Arc<BufferPool>,
    /// WAL.
    pub wal: Arc<Wal>,
    /// Per-backend wait events.
    pub backends: Arc<BackendStatusArray>,
    /// MultiXacts: row locks shared by several transactions (`multixact.c`).
    pub multixact: MultiXactStore,
    pub(crate) tables: Vec<TableRel>,
    /// History's insertion target block (PostgreSQL's relcache `rd_targblock`, shared here).
    pub(crate) history_target: AtomicU32,
    /// Per table (in `TableId::ALL` order): pages whose dead versions were cut off from the
    /// index, most recent last, at most [`FREE_PAGES_MAX`]; non-HOT updates prune and fill them
    /// before extending the relation. It stands in for PostgreSQL's free space map plus the
    /// pages autovacuum would visit: without it such pages were never visited again.
    pub(crate) free_pages: [lockstack_common::sync::Mutex<Vec<u32>>; 4],
    /// Where relations, CLOG and WAL live (`None`: in memory), with the directory's lock,
    /// held as long as the engine lives.
    pub(crate) data_dir: Option<crate::datadir::files::DirLock>,
    /// The user tables ([`crate::usertable`]): created, filled and dropped by SQL front ends.
    pub users: crate::usertable::UserCatalog,
}

/// Where [`Engine::build`] gets the tables from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TableSource {
    /// Create and load them (pgbench -i).
    Load {
        /// Scale factor.
        scale: i64,
        /// Heap fillfactor, percent.
        fillfactor: u8,
    },
    /// Open existing relation files.
    Open,
    /// No pgbench tables: an engine for user tables only ([`Engine::without_tables`]).
    None,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("max_backends", &self.cfg.max_backends).finish()
    }
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
            sim_client_cpu: None,
            sim_client_rtt: None,
            sim_statement_cpu: None,
            sim_postgres_ipc: None,
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

/// Most pages a table's free-page list remembers.
pub(crate) const FREE_PAGES_MAX: usize = 64;

/// Remembered pages a non-HOT update tries before extending the relation.
pub(crate) const FREE_PAGES_TRIES: usize = 4;

/// Xids per pg_subtrans segment file (2048 per page, 32 pages): the truncation period.
pub(crate) const SUBTRANS_XACTS_PER_SEGMENT: u32 = SUBTRANS_XACTS_PER_PAGE * SLRU_PAGES_PER_SEGMENT;

/// The wait class a simulated machine books a wait for a table's free-page list under (the
/// engine's host mutex standing in for PostgreSQL's free space map, whose pages are read under
/// buffer content locks; it publishes no wait event natively).
pub const FREE_PAGES_WAIT_CLASS: &str = "FreePageList";

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

/// Each preset as the knob assignments ([`crate::settings::KNOBS`]) it applies, in order, to
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
    pub fn preset(name: &str, max_backends: usize, nbuffers: usize) -> Result<EngineConfig, String> {
        let settings = EngineConfig::preset_settings(name)
            .ok_or_else(|| format!("unknown preset \"{name}\" (valid: {})", PRESETS.join(", ")))?;
        let mut c = EngineConfig::new(max_backends, nbuffers);
        for (key, value) in settings {
            crate::settings::KNOBS.set(&mut c, key, value).map_err(|e| format!("preset {name}: {e}"))?;
        }
        Ok(c)
    }
}

impl Engine {
    /// Builds every subsystem in memory and loads pgbench's tables at `scale` with heap
    /// `fillfactor`.
    ///
    /// # Errors
    /// Any subsystem's configuration or I/O error.
    pub fn new(cfg: EngineConfig, scale: i64, fillfactor: u8) -> Result<Arc<Engine>, EngineError> {
        Engine::build(cfg, Arc::new(MemorySmgr::new()), TableSource::Load { scale, fillfactor }, None)
    }

    /// Builds every subsystem in memory with none of pgbench's tables: an engine whose only
    /// tables are the user tables SQL creates ([`crate::usertable`]); the isolation runner's.
    /// [`Engine::table`] must not be called on it.
    ///
    /// # Errors
    /// Any subsystem's configuration error.
    pub fn without_tables(cfg: EngineConfig) -> Result<Arc<Engine>, EngineError> {
        Engine::build(cfg, Arc::new(MemorySmgr::new()), TableSource::None, None)
    }

    /// Builds every subsystem over `smgr` and either loads the tables or opens them from their
    /// relation files (metapages give the index roots). With `data_dir`, the pool gets a
    /// WAL-before-data hook (PostgreSQL's `FlushBuffer` calls `XLogFlush(page LSN)`), so no page
    /// reaches its file ahead of the WAL that describes it, and a page verifier
    /// ([`tables::verify_page`]) so that a damaged page read from a file is an error.
    pub(crate) fn build(
        cfg: EngineConfig,
        smgr: Arc<dyn Smgr>,
        source: TableSource,
        data_dir: Option<crate::datadir::files::DirLock>,
    ) -> Result<Arc<Engine>, EngineError> {
        cfg.apply_spin_settings();
        let procarray = ProcArray::new(cfg.procarray).map_err(|e| EngineError::Usage(e.to_string()))?;
        let clog = Arc::new(Clog::new(cfg.clog.clone())?);
        let subtrans = Arc::new(SubTrans::new(cfg.subtrans.clone())?);
        // `ExtendCLOG` and `ExtendSUBTRANS` run inside `GetNewTransactionId`, under XidGenLock,
        // before the xid is handed out (PostgreSQL 8.0-18): xids are assigned one at a time in
        // order, so every status page is zeroed, once, before any xid on it can be published,
        // let alone commit. (Zeroing after the ProcArray had published the xid let a page's
        // first xid be overtaken by a later one that committed first, its status then wiped by
        // the late zeroing.)
        let (c, st) = (Arc::clone(&clog), Arc::clone(&subtrans));
        procarray
            .set_xid_extend_hook(Box::new(move |xid| {
                c.extend(xid)?;
                st.extend(xid)?;
                Ok(())
            }))
            .map_err(|e| EngineError::Usage(e.to_string()))?;
        let lmgr = Lmgr::new(cfg.lmgr).map_err(|e| EngineError::Usage(e.to_string()))?;
        let pool = BufferPool::new(cfg.bufmgr.clone(), smgr)?;
        let wal = Wal::open(cfg.wal.clone())?;
        if data_dir.is_some() {
            let flusher = lockstack_common::sync::Mutex::new(wal.attach_auxiliary());
            pool.set_wal_flush_hook(Arc::new(move |lsn: u64| {
                flusher.lock().flush(lockstack_xlog::XLogRecPtr(lsn)).map_err(Into::into)
            }));
            pool.set_page_verifier(Arc::new(|tag, p| tables::verify_page(tag, p).map_err(Into::into)));
        }
        let backends = BackendStatusArray::new(cfg.max_backends);
        let bb = pool.attach_auxiliary();
        let mut tables = Vec::new();
        for t in TableId::ALL {
            if matches!(source, TableSource::None) {
                break;
            }
            let mut rel = match source {
                TableSource::Load { scale, fillfactor } => {
                    tables::load_table(&bb, t, scale, fillfactor, cfg.lwlock_kind)?
                }
                TableSource::Open => tables::open_table(&bb, t, cfg.lwlock_kind)?,
                TableSource::None => unreachable!("no pgbench tables are built"),
            };
            rel.index = rel.index.map(|ix| ix.with_search(cfg.btree_search));
            tables.push(rel);
        }
        drop(bb);
        let multixact = MultiXactStore::new(cfg.lwlock_kind, cfg.max_backends);
        Ok(Arc::new(Engine {
            cfg,
            procarray,
            clog,
            subtrans,
            lmgr,
            pool,
            wal,
            backends,
            multixact,
            tables,
            history_target: AtomicU32::new(u32::MAX),
            free_pages: std::array::from_fn(|_| lockstack_common::sync::Mutex::new(Vec::new())),
            data_dir,
            users: crate::usertable::UserCatalog::default(),
        }))
    }

    /// `TruncateSUBTRANS(GetOldestTransactionIdConsideredRunning())`, as PostgreSQL's
    /// `CheckPointSUBTRANS` caller does at every checkpoint: removes the pg_subtrans segments
    /// wholly before the oldest xid any backend may still consider running (the minimum of
    /// every backend's xid and xmin, [`ProcArray::get_oldest_xmin`]). No snapshot can ask
    /// pg_subtrans about an older xid, and without this every 2048 assigned xids leave an 8 KiB
    /// page behind (about 4 bytes per writing transaction). Takes ProcArrayLock shared, then
    /// the pg_subtrans locks; call it holding no lock.
    ///
    /// # Errors
    /// pg_subtrans I/O errors (file storage only).
    pub fn truncate_subtrans(&self) -> Result<TruncateOutcome, EngineError> {
        let oldest = self.procarray.get_oldest_xmin();
        Ok(self.subtrans.truncate(oldest)?)
    }

    /// Runs [`truncate_subtrans`](Self::truncate_subtrans) when `ended_xid` (the xid of a
    /// transaction that has just ended, or invalid) is the first xid of a pg_subtrans segment:
    /// once per 65536 xids (32 pages of 2048), standing in for the checkpointer that the
    /// engine does not have. pg_subtrans then keeps at most the segments from the oldest
    /// running xid's to the newest, plus one.
    pub(crate) fn truncate_subtrans_if_due(&self, ended_xid: TransactionId) -> Result<(), EngineError> {
        if ended_xid.is_normal() && ended_xid.0.is_multiple_of(SUBTRANS_XACTS_PER_SEGMENT) {
            self.truncate_subtrans()?;
        }
        Ok(())
    }

    /// The data directory the engine's files live in (`None` in memory).
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        self.data_dir.as_ref().map(|l| l.path())
    }

    /// Locks `t`'s list of pages worth revisiting (the engine's stand-in for the free space
    /// map). A simulated machine books a wait for the lock under [`FREE_PAGES_WAIT_CLASS`].
    pub(crate) fn free_pages(&self, t: TableId) -> lockstack_common::sync::MutexGuard<'_, Vec<u32>> {
        let m = &self.free_pages[TableId::ALL.iter().position(|x| *x == t).expect("known table")];
        let _class = lockstack_common::sync::hook::wait_class(FREE_PAGES_WAIT_CLASS);
        m.lock()
    }

    /// Remembers `block` of `t` as worth revisiting (dead versions, or room after a prune).
    pub(crate) fn note_free_page(&self, t: TableId, block: u32) {
        let mut l = self.free_pages(t);
        if !l.contains(&block) {
            if l.len() == FREE_PAGES_MAX {
                l.remove(0);
            }
            l.push(block);
        }
    }

    /// The table's relation data.
    ///
    /// # Panics
    /// On an engine built by [`Engine::without_tables`].
    pub fn table(&self, t: TableId) -> &TableRel {
        self.tables.iter().find(|r| r.table == t).expect("pgbench's tables exist in this engine")
    }
}
