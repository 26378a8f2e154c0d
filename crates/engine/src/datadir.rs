//! `--data-dir`: relations, CLOG and WAL in files, a control file, clean shutdown and reopen.
//!
//! Layout of a data directory (PostgreSQL's names where they exist):
//!
//! | path | holds |
//! |---|---|
//! | `lockstack.control` | the control file (JSON): scale, fillfactor, next xid, end of WAL, state; stands for `global/pg_control` |
//! | `base/` | relation files, one per fork (`<oid>`, `<oid>_vm`), written by [`FileSmgr`] |
//! | `pg_xact/` | CLOG segment files (32 pages of 8 KiB each) |
//! | `pg_wal/` | WAL segment files (16 MiB each) |
//!
//! pg_subtrans stays in memory: PostgreSQL zeroes it at every start-up, since no transaction
//! survives a restart.
//!
//! [`shutdown`] is a shutdown checkpoint (PostgreSQL `CreateCheckPoint` with
//! `CHECKPOINT_IS_SHUTDOWN`): WAL flushed, every dirty buffer written and synced, CLOG written,
//! then the control file replaced atomically with state "shut down". [`open`] accepts only a
//! cleanly shut down directory (there is no crash recovery: replaying WAL into pages is not
//! built), marks it "in production", and continues the xid counter and the WAL after what the
//! control file records, the WAL in the next segment so that every new record's LSN is above
//! every page LSN already on disk.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockstack_bufmgr::{FileSmgr, ForkNumber};
use lockstack_clog::SlruStorage;
use lockstack_common::TransactionId;
use lockstack_xlog::{Wal, WalSink};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineConfig, EngineError, TableSource};
use crate::pgbench::script::Table;

/// The control file's name inside a data directory.
pub const CONTROL_FILE: &str = "lockstack.control";

/// Version of the control file's format this build reads and writes.
pub const CONTROL_VERSION: u32 = 1;

/// The cluster state recorded in the control file (PostgreSQL's `DBState`, two of its values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterState {
    /// Cleanly shut down: every page, CLOG page and WAL byte is on disk.
    ShutDown,
    /// Open (or crashed while open): files may lag the WAL.
    InProduction,
}

/// The control file: what a restart needs that the relation files do not say.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlFile {
    /// Format version ([`CONTROL_VERSION`]).
    pub version: u32,
    /// pgbench scale factor the tables were loaded at.
    pub scale: i64,
    /// Heap fillfactor of the load, percent.
    pub fillfactor: u8,
    /// Next transaction id to assign (`nextXid` of the shutdown checkpoint).
    pub next_xid: u32,
    /// End of WAL at shutdown (byte LSN).
    pub end_of_wal: u64,
    /// Segment the next start writes WAL into (the one after `end_of_wal`'s).
    pub next_wal_segment: u64,
    /// State.
    pub state: ClusterState,
}

fn usage(msg: String) -> EngineError {
    EngineError::Usage(msg)
}

fn io(dir: &Path, what: &str, e: std::io::Error) -> EngineError {
    usage(format!("{what} \"{}\": {e}", dir.display()))
}

/// Reads `dir`'s control file.
///
/// # Errors
/// [`EngineError::Usage`] naming the file when it is missing, unreadable, not valid JSON or of
/// another version.
pub fn read_control(dir: &Path) -> Result<ControlFile, EngineError> {
    let path = dir.join(CONTROL_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(usage(format!(
                "\"{}\" is not a lockstack data directory (no {CONTROL_FILE}); initialize it with -i --data-dir",
                dir.display()
            )));
        }
        Err(e) => return Err(io(&path, "could not read", e)),
    };
    let c: ControlFile = serde_json::from_str(&text)
        .map_err(|e| usage(format!("invalid control file \"{}\": {e}", path.display())))?;
    if c.version != CONTROL_VERSION {
        return Err(usage(format!(
            "control file \"{}\" has version {}, this build reads {CONTROL_VERSION}",
            path.display(),
            c.version
        )));
    }
    Ok(c)
}

/// Replaces `dir`'s control file atomically: write a temporary file, sync it, rename, sync the
/// directory.
///
/// # Errors
/// I/O errors, naming the path.
pub fn write_control(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let tmp = dir.join(format!("{CONTROL_FILE}.tmp"));
    let text = serde_json::to_string_pretty(c).map_err(|e| usage(format!("control file: {e}")))?;
    let mut f = fs::File::create(&tmp).map_err(|e| io(&tmp, "could not create", e))?;
    f.write_all(text.as_bytes()).map_err(|e| io(&tmp, "could not write", e))?;
    f.sync_all().map_err(|e| io(&tmp, "could not sync", e))?;
    fs::rename(&tmp, dir.join(CONTROL_FILE))
        .map_err(|e| io(dir, "could not rename the control file in", e))?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, "could not sync", e))
}

/// `cfg` with CLOG and WAL in `dir` (relations go through the [`FileSmgr`] the caller builds).
fn file_config(mut cfg: EngineConfig, dir: &Path) -> EngineConfig {
    cfg.clog.storage = SlruStorage::Directory { path: dir.join("pg_xact"), fsync: false };
    cfg.wal.sink = WalSink::Files { dir: dir.join("pg_wal") };
    cfg
}

fn smgr(dir: &Path) -> Result<Arc<FileSmgr>, EngineError> {
    let base = dir.join("base");
    fs::create_dir_all(&base).map_err(|e| io(&base, "could not create directory", e))?;
    Ok(Arc::new(FileSmgr::new(&base, false).map_err(lockstack_bufmgr::BufferError::from)?))
}

/// pgbench -i over files: creates `dir` (or empties a lockstack data directory found there, as
/// `pgbench -i` drops and recreates its tables), loads the tables at `scale` and `fillfactor`,
/// and shuts down cleanly.
///
/// # Errors
/// `dir` exists, is not empty and is not a lockstack data directory; I/O and engine errors.
pub fn initialize(
    cfg: EngineConfig,
    dir: &Path,
    scale: i64,
    fillfactor: u8,
) -> Result<ControlFile, EngineError> {
    if dir.exists() {
        let mut entries = fs::read_dir(dir).map_err(|e| io(dir, "could not read directory", e))?;
        let non_empty = entries.next().is_some();
        if non_empty && !dir.join(CONTROL_FILE).exists() {
            return Err(usage(format!(
                "directory \"{}\" exists, is not empty and is not a lockstack data directory",
                dir.display()
            )));
        }
        for sub in ["base", "pg_xact", "pg_wal"] {
            let p = dir.join(sub);
            if p.exists() {
                fs::remove_dir_all(&p).map_err(|e| io(&p, "could not remove", e))?;
            }
        }
    }
    fs::create_dir_all(dir).map_err(|e| io(dir, "could not create directory", e))?;
    let cfg = file_config(cfg, dir);
    let engine = Engine::build(cfg, smgr(dir)?, TableSource::Load { scale, fillfactor }, Some(dir.into()))?;
    shutdown_with(&engine, scale, fillfactor)
}

/// Opens a cleanly shut down data directory; returns the engine and the control file it read.
/// The control file is rewritten as "in production" before this returns, so a run that dies
/// before [`shutdown`] leaves a directory that [`open`] refuses.
///
/// # Errors
/// No or invalid control file; a directory not shut down cleanly (no crash recovery here);
/// I/O and engine errors.
pub fn open(mut cfg: EngineConfig, dir: &Path) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    let mut control = read_control(dir)?;
    if control.state != ClusterState::ShutDown {
        return Err(usage(format!(
            "data directory \"{}\" was not shut down cleanly and crash recovery is not implemented; \
             reinitialize it with -i",
            dir.display()
        )));
    }
    cfg.procarray.first_xid = TransactionId(control.next_xid);
    cfg.wal.start_segment = control.next_wal_segment;
    let cfg = file_config(cfg, dir);
    let engine = Engine::build(cfg, smgr(dir)?, TableSource::Open, Some(dir.into()))?;
    let read = control.clone();
    control.state = ClusterState::InProduction;
    write_control(dir, &control)?;
    Ok((engine, read))
}

/// A shutdown checkpoint of an engine opened with [`open`] or built by [`initialize`]: call it
/// after every session has ended.
///
/// # Errors
/// The engine is in memory; I/O errors of the WAL, the buffer pool or the CLOG.
pub fn shutdown(engine: &Arc<Engine>, control: &ControlFile) -> Result<ControlFile, EngineError> {
    shutdown_with(engine, control.scale, control.fillfactor)
}

fn shutdown_with(engine: &Arc<Engine>, scale: i64, fillfactor: u8) -> Result<ControlFile, EngineError> {
    let dir: PathBuf =
        engine.data_dir().ok_or_else(|| usage("shutdown of an in-memory engine".into()))?.to_path_buf();
    let end = engine.wal.backend().flush_all()?;
    engine.pool.flush_all()?;
    for t in Table::ALL {
        for rel in std::iter::once(t.heap_oid()).chain(t.index_oid()) {
            for fork in [ForkNumber::Main, ForkNumber::VisibilityMap] {
                engine.pool.smgr().sync(rel, fork).map_err(lockstack_bufmgr::BufferError::from)?;
            }
        }
    }
    engine.clog.flush()?;
    let control = ControlFile {
        version: CONTROL_VERSION,
        scale,
        fillfactor,
        next_xid: engine.procarray.next_xid().0,
        end_of_wal: end.0,
        next_wal_segment: Wal::start_segment_after(end),
        state: ClusterState::ShutDown,
    };
    write_control(&dir, &control)?;
    Ok(control)
}
