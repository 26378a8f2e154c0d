//! A data directory fresh from `pgbench -i` used as a load image: its relation files copied
//! into memory ([`MemorySmgr`]) and every page read into shared buffers, so that runs start
//! as after an in-memory load without generating the tables again. Many processes may read one
//! image at once; nothing in it is written and no lock is taken on it (the control file is
//! read before and after the copy, and a change in between is an error).
//!
//! PostgreSQL has no such step; the nearest are a base backup restored into a new cluster and
//! `pg_prewarm` (contrib/pg_prewarm, PostgreSQL 9.4 and later) run over every relation.

use std::path::Path;
use std::sync::Arc;

use lockstack_bufmgr::vm::HEAPBLOCKS_PER_PAGE;
use lockstack_bufmgr::{BufferTag, FileSmgr, ForkNumber, MemorySmgr, Smgr};
use lockstack_common::{BlockNumber, Oid, TransactionId};

use super::checks::{check_relations, relation_forks};
use super::control::{ClusterState, ControlFile, check_control, read_control};
use super::files::{lock_shared, usage};
use crate::engine::{Engine, EngineConfig, TableSource};
use crate::error::EngineError;
use crate::tables::TableId;

/// Builds an in-memory engine whose tables are a copy of those in `dir`, a data directory
/// that `pgbench -i` wrote and no transaction has changed since, with every page of them in
/// shared buffers. `cfg` is the run's configuration (preset, backends, buffers); its storage
/// stays in memory, so WAL, CLOG and relation writes never reach `dir`.
///
/// The directory is locked shared ([`lock_shared`]) for as long as the returned
/// [`LoadedImage`] lives, so no run or `-i` can open it for writing meanwhile, and it passes
/// the checks [`super::open`] makes of its relations before anything is used: the control file (CRC-32C, keys, fields), state "shut down", not marked damaged,
/// every relation file whole and every page's checksum and shape, the scale against
/// pgbench_branches and pgbench_tellers. It must also be fresh: `next_xid` is still the first
/// normal transaction id, so every row is the frozen row the load wrote and pg_xact holds
/// nothing a run needs. The tables' totals are not scanned here (a run takes them before it
/// starts).
///
/// Pages are read into shared buffers in the order the load wrote them (each table's heap
/// pages with its visibility map page after the first heap page it covers, then its index),
/// so that the run starts with what a load leaves there; the buffers are clean where a load
/// leaves them dirty.
///
/// # Errors
/// Every error [`super::open`] reports for a bad directory, one line naming the directory,
/// file, block or field; a directory a transaction has changed since `-i`; a control file
/// that changed while the relation files were being read (another process re-initialized or
/// ran on it); a relation fork the load writes that is missing; buffer pool errors (the
/// configuration's shared buffers must hold every page).
pub fn load_image(cfg: EngineConfig, dir: &Path) -> Result<LoadedImage, EngineError> {
    if !dir.join(super::CONTROL_FILE).exists() {
        // Names the control file (or says `dir` is no directory) before any lock is looked for.
        read_control(dir)?;
    }
    let lock = lock_shared(dir)?;
    let control = read_control(dir)?;
    if control.state != ClusterState::ShutDown {
        return Err(usage(format!(
            "data directory \"{}\" is in use or was not shut down cleanly; only a directory fresh from -i, \
             shut down, can be loaded from",
            dir.display()
        )));
    }
    if let Some(why) = &control.damaged {
        return Err(usage(format!(
            "data directory \"{}\" is marked damaged ({why}); reinitialize it with -i",
            dir.display()
        )));
    }
    check_control(dir, &control)?;
    if control.next_xid != TransactionId::FIRST_NORMAL.0 {
        return Err(usage(format!(
            "data directory \"{}\" has been changed since -i (next transaction id {}, a fresh load's is {}); \
             only a directory fresh from -i can be loaded from: reinitialize it with -i",
            dir.display(),
            control.next_xid,
            TransactionId::FIRST_NORMAL.0
        )));
    }
    let forks: Vec<(Oid, ForkNumber)> =
        relation_forks().into_iter().map(|(rel, fork, _)| (rel, fork)).collect();
    let file_name = |rel: Oid, fork: ForkNumber| match fork {
        ForkNumber::Main => rel.0.to_string(),
        other => format!("{}_{}", rel.0, other.name()),
    };
    // As an open refuses them: a file in base/ that is none of the relations is not ours.
    let base = dir.join("base");
    let entries =
        std::fs::read_dir(&base).map_err(|e| super::files::io(&base, "could not read directory", e))?;
    for e in entries.flatten() {
        let name = e.file_name();
        if !forks.iter().any(|&(rel, fork)| name.to_str() == Some(file_name(rel, fork).as_str())) {
            return Err(usage(format!(
                "unexpected file \"{}\" in data directory \"{}\": it is none of the relation files lockstack \
                 writes; move it away (or reinitialize the directory with -i)",
                e.path().display(),
                dir.display()
            )));
        }
    }
    let files = FileSmgr::new(&base, false)
        .map_err(lockstack_bufmgr::BufferError::from)?
        .read_only()
        .with_checksums(control.data_checksums);
    let mem = Arc::new(
        MemorySmgr::backed_by(Arc::new(files), &forks).map_err(lockstack_bufmgr::BufferError::from)?,
    );
    for t in TableId::ALL {
        let loaded = t != TableId::History;
        let needed =
            [(t.heap_oid(), ForkNumber::Main, loaded), (t.heap_oid(), ForkNumber::VisibilityMap, loaded)]
                .into_iter()
                .chain(t.index_oid().map(|i| (i, ForkNumber::Main, true)));
        for (rel, fork, needed) in needed {
            if needed && mem.nblocks(rel, fork).map_err(lockstack_bufmgr::BufferError::from)? == 0 {
                let file = file_name(rel, fork);
                return Err(usage(format!(
                    "data directory \"{}\" lacks relation file \"{}\" (of {}), which -i writes; reinitialize it \
                     with -i",
                    dir.display(),
                    dir.join("base").join(file).display(),
                    t.name(),
                )));
            }
        }
    }
    let engine = Engine::build(cfg, mem, TableSource::Open, None)?;
    // Every page read from the image is checked as an open checks it (after its checksum,
    // which the file store verifies): layout, then tuple and B-tree shapes.
    engine.pool.set_page_verifier(Arc::new(|tag, p| crate::tables::verify_page(tag, p).map_err(Into::into)));
    engine.multixact.start_at(crate::multixact::MultiXactId(control.next_multixact));
    check_relations(&engine, dir, &control)?;
    prewarm(&engine)?;
    if read_control(dir)? != control {
        return Err(usage(format!(
            "data directory \"{}\" changed while it was being read (another process initialized or opened it); \
             run again",
            dir.display()
        )));
    }
    Ok(LoadedImage { engine, control, _lock: lock })
}

/// An engine built by [`load_image`], with the image's control file and its shared lock: keep
/// it for as long as the engine runs, since pages the buffer pool evicts are read from the
/// image again (a pool smaller than the tables reads it throughout the run), and the lock keeps
/// any process from opening the directory for writing meanwhile.
#[derive(Debug)]
pub struct LoadedImage {
    /// The engine, its tables in memory over the image.
    pub engine: Arc<Engine>,
    /// The image's control file, as read.
    pub control: ControlFile,
    /// `None` for an image without a lock file (see [`lock_shared`]).
    _lock: Option<super::DirLock>,
}

/// Reads every page of the pgbench tables into shared buffers, in the order
/// [`crate::tables::load_table`] writes them, and unpins each at once.
fn prewarm(engine: &Engine) -> Result<(), EngineError> {
    let bb = engine.pool.attach_auxiliary();
    let smgr = engine.pool.smgr();
    let nblocks = |rel, fork| smgr.nblocks(rel, fork).map_err(lockstack_bufmgr::BufferError::from);
    let read = |rel, fork, block| -> Result<(), EngineError> {
        let buf = bb.read_buffer(BufferTag { rel, fork, block: BlockNumber(block) })?;
        bb.release(buf);
        Ok(())
    };
    for t in TableId::ALL {
        let heap = t.heap_oid();
        let vm_pages = nblocks(heap, ForkNumber::VisibilityMap)?;
        for b in 0..nblocks(heap, ForkNumber::Main)? {
            read(heap, ForkNumber::Main, b)?;
            if b % HEAPBLOCKS_PER_PAGE == 0 && b / HEAPBLOCKS_PER_PAGE < vm_pages {
                read(heap, ForkNumber::VisibilityMap, b / HEAPBLOCKS_PER_PAGE)?;
            }
        }
        if let Some(index) = t.index_oid() {
            for b in 0..nblocks(index, ForkNumber::Main)? {
                read(index, ForkNumber::Main, b)?;
            }
        }
    }
    Ok(())
}
