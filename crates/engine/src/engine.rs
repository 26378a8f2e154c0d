//! The engine: one [`Engine`], the model of PostgreSQL's shared memory (ProcArray, CLOG,
//! pg_subtrans, the lock manager, the buffer pool, WAL, MultiXacts and the tables), built from
//! an [`EngineConfig`]. Backends attach to it with `Engine::session` and run statements as a
//! `crate::session::Session`; [`EngineConfig`] with its presets (`crate::config`) and
//! [`EngineError`] (`crate::error`) are re-exported here, the path callers have always used.

use lockstack_common::sync::AtomicU32;
use std::sync::Arc;

use lockstack_bufmgr::{BufferPool, MemorySmgr, Smgr};
use lockstack_clog::{Clog, SLRU_PAGES_PER_SEGMENT, SUBTRANS_XACTS_PER_PAGE, SubTrans, TruncateOutcome};
use lockstack_common::{BackendStatusArray, TransactionId};
use lockstack_lmgr::Lmgr;
use lockstack_procarray::ProcArray;
use lockstack_xlog::Wal;

use crate::multixact::MultiXactStore;
use crate::tables::{self, TableId, TableRel};

pub use crate::config::{EngineConfig, PRESET_SETTINGS, PRESETS};
pub use crate::error::EngineError;

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
        let m = &self.free_pages
            [TableId::ALL.iter().position(|x| *x == t).expect("TableId::ALL lists every table")];
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
        self.tables
            .iter()
            .find(|r| r.table == t)
            .expect("an engine built by Engine::new has pgbench's tables (Engine::without_tables has none)")
    }
}
