//! `--data-dir`: relations, CLOG and WAL in files, a control file, clean shutdown and reopen.
//!
//! Layout of a data directory (PostgreSQL's names where they exist):
//!
//! | path | holds |
//! |---|---|
//! | `lockstack.control` | the control file (JSON with a CRC-32C, every key required): scale, fillfactor, next xid, end of WAL, state, `data_checksums`, pg_xact page CRCs, the tables' totals, the damaged mark; stands for `global/pg_control` |
//! | `lockstack.pid` | the lock file: pid of the process using the directory, locked while it is open ([`lock`]); stands for `postmaster.pid` |
//! | `base/` | relation files, one per fork (`<oid>`, `<oid>_vm`), written by [`FileSmgr`], every page with a checksum that names its relation, fork and block |
//! | `pg_xact/` | CLOG segment files (32 pages of 8 KiB each) |
//! | `pg_wal/` | WAL segment files (16 MiB each) |
//!
//! pg_subtrans stays in memory: PostgreSQL zeroes it at every start-up, since no transaction
//! survives a restart.
//!
//! [`shutdown`] is a shutdown checkpoint (PostgreSQL `CreateCheckPoint` with
//! `CHECKPOINT_IS_SHUTDOWN`): the tables' totals taken ([`Balances`]), WAL flushed, every dirty
//! buffer written and synced, CLOG written and its pages' CRCs taken, then the control file
//! replaced atomically with state "shut down"; if any step fails, the control file keeps state
//! "in production" and the error ([`ControlFile::last_failure`]). [`open`] accepts only a
//! cleanly shut down directory (there is no crash recovery: replaying WAL into pages is not
//! built) that no other process holds and that passes its checks, all made before anything is
//! written: the control file's CRC-32C, keys and fields, and its damaged mark (a failed
//! end-of-run consistency check, refused until `-i` unless [`OpenOptions::open_damaged`]);
//! pg_xact's length and page CRCs; every file and directory a run writes is writable and a
//! regular file or directory (never a FIFO, which would block); every relation file's size
//! and every page of it (checksum, which names the relation and fork, so a swapped file is
//! refused naming whose pages it holds; layout; tuple and B-tree shapes; an index metapage
//! naming its own index); relations against the control file; the tables' visible rows and
//! balance sums equal to the last shutdown's. It then
//! marks the directory "in production", and continues the xid counter and the WAL after what
//! the control file records, the WAL in the next segment so that every new record's LSN is
//! above every page LSN already on disk.
//!
//! Damage is therefore an error naming the file (and block or page) at the next open, never a
//! run that reports success over lost data; and a failure after open (an I/O error mid-run or
//! at shutdown) either still ends in a clean shutdown (the run's failed transaction stays
//! invisible) or leaves a directory whose next open names the failed write and says to
//! reinitialize it.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockstack_bufmgr::{FileSmgr, ForkNumber, Smgr};
use lockstack_clog::SlruStorage;
use lockstack_common::TransactionId;
use lockstack_xlog::{Wal, WalSink};

use crate::engine::{Engine, EngineConfig, EngineError, TableSource};
use checks::{
    check_balances, check_pg_xact_unassigned, check_relation_files, check_relations, pg_xact_crcs,
    table_totals,
};
use files::{io, usage};

use crate::tables::TableId;

mod checks;
mod control;
pub(crate) mod files;
mod image;

pub use checks::{check_pg_xact, check_pg_xact_checksums};
pub use control::{
    Balances, CONTROL_FILE, CONTROL_VERSION, ClusterState, ControlFile, MIN_FILLFACTOR, TableTotals,
    check_control, read_control, write_control,
};
pub use files::{DirLock, LOCK_FILE, check_writable, lock, lock_shared};
pub use image::{LoadedImage, load_image};

/// `cfg` with CLOG and WAL in `dir` (relations go through the [`FileSmgr`] the caller builds).
fn file_config(mut cfg: EngineConfig, dir: &Path) -> EngineConfig {
    cfg.clog.storage = SlruStorage::Directory { path: dir.join("pg_xact"), fsync: false };
    // A page that should be in pg_xact and is not is an error, not "in progress" (PostgreSQL
    // never reads a missing CLOG page as zeros); new pages are zeroed by `Clog::extend`.
    cfg.clog.zero_missing = false;
    cfg.wal.sink = WalSink::Files { dir: dir.join("pg_wal") };
    cfg
}

fn smgr(dir: &Path, checksums: bool) -> Result<Arc<FileSmgr>, EngineError> {
    let base = dir.join("base");
    fs::create_dir_all(&base).map_err(|e| io(&base, "could not create directory", e))?;
    let s = FileSmgr::new(&base, false).map_err(lockstack_bufmgr::BufferError::from)?;
    Ok(Arc::new(s.with_checksums(checksums)))
}

/// pgbench -i over files: creates `dir` (or empties a lockstack data directory found there, as
/// `pgbench -i` drops and recreates its tables, or what an interrupted `-i` left there: only
/// `base`, `pg_xact`, `pg_wal` and lock or temporary control files, no control file), loads the
/// tables at `scale` and `fillfactor`, and shuts down cleanly.
///
/// The directory is locked ([`lock`]) from before anything in it is removed until the load
/// has been shut down.
///
/// # Errors
/// `scale` below 1 or `fillfactor` outside 10..=100; `dir` exists, is not empty and is not a
/// lockstack data directory; `dir` is in use ([`lock`]); I/O and engine errors.
pub fn initialize(
    cfg: EngineConfig,
    dir: &Path,
    scale: i64,
    fillfactor: u8,
) -> Result<ControlFile, EngineError> {
    if !(MIN_FILLFACTOR..=100).contains(&fillfactor) {
        return Err(usage(format!("fillfactor must be {MIN_FILLFACTOR}..=100, got {fillfactor}")));
    }
    if scale < 1 {
        return Err(usage(format!("scale must be at least 1, got {scale}")));
    }
    let lock = if dir.exists() {
        let entries = fs::read_dir(dir).map_err(|e| io(dir, "could not read directory", e))?;
        // Without a control file, only what an interrupted -i leaves behind may be there (the
        // load writes the control file last); anything else is somebody's data.
        let tmp_control = format!("{CONTROL_FILE}.tmp");
        let ours = |name: &std::ffi::OsStr| {
            name.to_str().is_some_and(|n| [LOCK_FILE, "base", "pg_xact", "pg_wal", &tmp_control].contains(&n))
        };
        let foreign = entries.flatten().any(|e| !ours(&e.file_name()));
        if foreign && !dir.join(CONTROL_FILE).exists() {
            return Err(usage(format!(
                "directory \"{}\" exists, is not empty and is not a lockstack data directory",
                dir.display()
            )));
        }
        let lock = lock(dir)?;
        // Nothing goes unless lockstack wrote it: every entry of the three subdirectories must
        // be a plain file named as lockstack names its files.
        for sub in ["base", "pg_xact", "pg_wal"] {
            check_only_ours(&dir.join(sub), sub)?;
        }
        let _ = fs::remove_file(dir.join(&tmp_control));
        // The control file goes first, and durably: a re-initialisation cut short (a second
        // Ctrl-C, a kill, a full disk) must leave a directory that says it is unusable (no
        // control file: "run -i"), never an old "shut down" control file over new or missing
        // relation files.
        let control = dir.join(CONTROL_FILE);
        match fs::remove_file(&control) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&control, "could not remove", e)),
        }
        fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, "could not sync directory", e))?;
        for sub in ["base", "pg_xact", "pg_wal"] {
            let p = dir.join(sub);
            if p.exists() {
                fs::remove_dir_all(&p).map_err(|e| io(&p, "could not remove", e))?;
            }
        }
        lock
    } else {
        fs::create_dir_all(dir).map_err(|e| io(dir, "could not create directory", e))?;
        lock(dir)?
    };
    let cfg = file_config(cfg, dir);
    let engine = Engine::build(cfg, smgr(dir, true)?, TableSource::Load { scale, fillfactor }, Some(lock))?;
    shutdown_with(&engine, scale, fillfactor, true, None)
}

/// Whether `name` is one of the files lockstack writes in subdirectory `sub` of a data
/// directory: relation forks in `base` (`16384`, `16384_fsm`, `16384_vm`), CLOG segments in
/// `pg_xact` and WAL segments in `pg_wal` (as their crates name them).
fn is_our_file(sub: &str, name: &str) -> bool {
    match sub {
        "base" => {
            let oid = name.strip_suffix("_fsm").or_else(|| name.strip_suffix("_vm")).unwrap_or(name);
            !oid.is_empty() && oid.bytes().all(|b| b.is_ascii_digit())
        }
        "pg_xact" => lockstack_clog::parse_segment_file_name(name).is_some(),
        "pg_wal" => lockstack_xlog::parse_segment_file_name(name).is_some(),
        _ => false,
    }
}

/// Refuses (naming the entry) if `path`, a subdirectory `sub` of a data directory, holds
/// anything but plain files lockstack writes there; a missing `path` passes.
fn check_only_ours(path: &Path, sub: &str) -> Result<(), EngineError> {
    let entries = match fs::read_dir(path) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(path, "could not read directory", e)),
    };
    for e in entries {
        let e = e.map_err(|e| io(path, "could not read directory", e))?;
        let plain = e.file_type().is_ok_and(|t| t.is_file());
        let ours = e.file_name().to_str().is_some_and(|n| is_our_file(sub, n));
        if !(plain && ours) {
            return Err(usage(format!(
                "-i will not remove \"{}\": lockstack did not write it (move it away, or use another directory)",
                e.path().display()
            )));
        }
    }
    Ok(())
}

/// Opens a cleanly shut down data directory; returns the engine and the control file it read.
/// The control file is rewritten as "in production" before this returns, so a run that dies
/// before [`shutdown`] leaves a directory that [`open`] refuses.
///
/// The directory stays locked ([`lock`]) until the engine is dropped. Before anything is
/// changed, the directory is checked: the control file's CRC-32C and keys ([`read_control`]),
/// that it is not marked damaged ([`ControlFile::damaged`]; see [`open_with`] to open it
/// anyway), its fields ([`check_control`]), every relation file whole (size, then every page's
/// checksum, layout and shape), pg_xact
/// against `next_xid` ([`check_pg_xact`]) and against the page checksums of the last shutdown
/// ([`check_pg_xact_checksums`]), that every file and directory the run will write is a
/// writable regular file or directory ([`check_writable`]), every relation page read while
/// opening (each verified as it is read: its checksum when `data_checksums` is on, then
/// `lockstack_bufmgr::page::verify`), the scale and `next_xid` against the rows of
/// pgbench_branches and pgbench_tellers, and every table's visible rows and balance sum
/// against the [`Balances`] of the last shutdown.
///
/// # Errors
/// Another process uses the directory; no or invalid control file, or one that is not a
/// regular file, fails its CRC-32C, lacks a key, has an unknown one or is of another version;
/// a directory marked damaged; a file in `base/` that lockstack does not write; a relation
/// file holding another relation's pages (swapped or copied); a control file field that is
/// out of range or does not match the relations;
/// pg_xact missing, truncated or failing a page checksum; a file or directory the run writes
/// that is read-only or not a regular file or directory; an invalid, truncated or checksum-failing
/// relation page; table totals that differ from the last shutdown's; a directory not shut down
/// cleanly (no crash recovery here; the message repeats why the last shutdown failed when it
/// did); I/O and engine errors. Each is one line naming the directory, file, block or field.
pub fn open(cfg: EngineConfig, dir: &Path) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    open_with(cfg, dir, OpenOptions::default(), |s| s)
}

/// How [`open_with`] treats a directory that passes its checks but is marked damaged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpenOptions {
    /// Open a directory whose control file records a failed consistency check
    /// ([`ControlFile::damaged`]) instead of refusing it (the CLI's `--open-damaged`): to look
    /// at what the failed run left. The mark stays: the next shutdown writes it again, and only
    /// `-i` ([`initialize`]) clears it.
    pub open_damaged: bool,
}

/// [`open`] with the relation storage manager wrapped by `wrap` before the engine is built
/// over it: the hook for fault injection (a wrapper that fails a chosen write, as a full disk
/// or an I/O error would) and for I/O accounting. `wrap` gets the directory's [`FileSmgr`]
/// (page checksums set as the control file says) and returns what the buffer pool uses.
///
/// # Errors
/// As [`open`].
pub fn open_wrapped(
    cfg: EngineConfig,
    dir: &Path,
    wrap: impl FnOnce(Arc<FileSmgr>) -> Arc<dyn Smgr>,
) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    open_with(cfg, dir, OpenOptions::default(), wrap)
}

/// [`open_wrapped`] with [`OpenOptions`].
///
/// # Errors
/// As [`open`]; a directory marked damaged ([`ControlFile::damaged`]) unless
/// [`OpenOptions::open_damaged`].
pub fn open_with(
    mut cfg: EngineConfig,
    dir: &Path,
    opts: OpenOptions,
    wrap: impl FnOnce(Arc<FileSmgr>) -> Arc<dyn Smgr>,
) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    if !dir.join(CONTROL_FILE).exists() {
        // No lock file is created in a directory that is not a data directory.
        read_control(dir)?;
    }
    let lock = lock(dir)?;
    let mut control = read_control(dir)?;
    if control.state != ClusterState::ShutDown {
        let why = match &control.last_failure {
            Some(f) => format!("its last shutdown failed: {f}; fix that cause, then"),
            None => "a run crashed, was killed or failed to write it; crash recovery is not implemented, so"
                .into(),
        };
        return Err(usage(format!(
            "data directory \"{}\" was not shut down cleanly ({why} reinitialize it with -i, as its files may be \
             inconsistent and crash recovery is not implemented)",
            dir.display()
        )));
    }
    if let Some(why) = &control.damaged
        && !opts.open_damaged
    {
        return Err(usage(format!(
            "data directory \"{}\" is marked damaged: a run's consistency check failed: {why}; reinitialize it \
             with -i (or open it anyway with --open-damaged)",
            dir.display()
        )));
    }
    check_control(dir, &control)?;
    check_pg_xact(dir, TransactionId(control.next_xid))?;
    check_pg_xact_checksums(dir, &control)?;
    check_writable(dir)?;
    check_relation_files(dir, control.data_checksums)?;
    cfg.procarray.first_xid = TransactionId(control.next_xid);
    cfg.wal.start_segment = control.next_wal_segment;
    let cfg = file_config(cfg, dir);
    let engine = Engine::build(cfg, wrap(smgr(dir, control.data_checksums)?), TableSource::Open, Some(lock))?;
    engine.multixact.start_at(crate::multixact::MultiXactId(control.next_multixact));
    check_relations(&engine, dir, &control)?;
    check_pg_xact_unassigned(dir, TransactionId(control.next_xid))?;
    check_balances(&engine, dir, &control)?;
    let read = control.clone();
    control.state = ClusterState::InProduction;
    control.last_failure = None;
    write_control(dir, &control)?;
    Ok((engine, read))
}

/// A shutdown checkpoint of an engine opened with [`open`]: call it after every session has
/// ended (also after a failed run: what a failed client left uncommitted stays invisible).
/// The control file it writes records the tables' [`Balances`] and, with `data_checksums`,
/// the pg_xact page CRCs, both taken here, for the next [`open`] to check.
///
/// When it fails, the control file is left "in production" with the error in
/// [`ControlFile::last_failure`] (if the control file can still be written), so that the next
/// [`open`] says why the directory was not shut down.
///
/// # Errors
/// The engine is in memory; I/O errors of the WAL, the buffer pool or the CLOG; errors of the
/// scans that take the totals.
pub fn shutdown(engine: &Arc<Engine>, control: &ControlFile) -> Result<ControlFile, EngineError> {
    shutdown_checked(engine, control, None)
}

/// [`shutdown`] after a run whose end-of-run consistency checks ran: `failed_check` is the
/// first failed check (its name and figures), which the control file then records as
/// [`ControlFile::damaged`], so that the next [`open`] refuses the directory with that reason
/// until it is reinitialized. A mark the directory already had (opened with
/// [`OpenOptions::open_damaged`]) is kept when `failed_check` is `None`.
///
/// # Errors
/// As [`shutdown`].
pub fn shutdown_checked(
    engine: &Arc<Engine>,
    control: &ControlFile,
    failed_check: Option<&str>,
) -> Result<ControlFile, EngineError> {
    let damaged = failed_check.map(|f| f.replace(['\n', '\r'], " ")).or_else(|| control.damaged.clone());
    match shutdown_with(engine, control.scale, control.fillfactor, control.data_checksums, damaged.clone()) {
        Ok(c) => Ok(c),
        Err(e) => {
            if let Some(dir) = engine.data_dir() {
                // Best effort (the control file may be what cannot be written): leave the
                // reason where the next open reports it.
                let failed = ControlFile {
                    state: ClusterState::InProduction,
                    last_failure: Some(e.to_string().replace(['\n', '\r'], " ")),
                    damaged,
                    ..control.clone()
                };
                let _ = write_control(dir, &failed);
            }
            Err(e)
        }
    }
}

fn shutdown_with(
    engine: &Arc<Engine>,
    scale: i64,
    fillfactor: u8,
    data_checksums: bool,
    damaged: Option<String>,
) -> Result<ControlFile, EngineError> {
    let dir: PathBuf =
        engine.data_dir().ok_or_else(|| usage("shutdown of an in-memory engine".into()))?.to_path_buf();
    // First, so that pages the scans dirty (hint bits) are written below.
    let balances = table_totals(engine)?;
    let end = engine.wal.attach_auxiliary().flush_all()?;
    engine.pool.flush_all()?;
    for t in TableId::ALL {
        for rel in std::iter::once(t.heap_oid()).chain(t.index_oid()) {
            for fork in [ForkNumber::Main, ForkNumber::VisibilityMap] {
                engine.pool.smgr().sync(rel, fork).map_err(lockstack_bufmgr::BufferError::from)?;
            }
        }
    }
    engine.clog.flush()?;
    let next_xid = engine.procarray.next_xid();
    let clog_page_crcs = if data_checksums { pg_xact_crcs(&dir, next_xid)? } else { Vec::new() };
    let control = ControlFile {
        version: CONTROL_VERSION,
        scale,
        fillfactor,
        next_xid: next_xid.0,
        end_of_wal: end.0,
        next_wal_segment: Wal::start_segment_after(end),
        next_multixact: engine.multixact.next_id().0,
        state: ClusterState::ShutDown,
        data_checksums,
        clog_page_crcs,
        balances: Some(balances),
        last_failure: None,
        damaged,
    };
    write_control(&dir, &control)?;
    Ok(control)
}
