//! `--data-dir`: relations, CLOG and WAL in files, a control file, clean shutdown and reopen.
//!
//! Layout of a data directory (PostgreSQL's names where they exist):
//!
//! | path | holds |
//! |---|---|
//! | `lockstack.control` | the control file (JSON): scale, fillfactor, next xid, end of WAL, state; stands for `global/pg_control` |
//! | `lockstack.pid` | the lock file: pid of the process using the directory, locked while it is open ([`lock`]); stands for `postmaster.pid` |
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
//! built) that no other process holds and that passes its checks (control file fields, pg_xact,
//! relations against the control file; every relation page is verified when read), marks it
//! "in production", and continues the xid counter and the WAL after what the
//! control file records, the WAL in the next segment so that every new record's LSN is above
//! every page LSN already on disk.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockstack_bufmgr::{FileSmgr, ForkNumber};
use lockstack_clog::{
    CLOG_XACTS_PER_BYTE, CLOG_XACTS_PER_PAGE, SLRU_PAGE_SIZE, SLRU_PAGES_PER_SEGMENT, SlruStorage, clog_page,
    segment_file_name,
};
use lockstack_common::TransactionId;
use lockstack_xlog::{Wal, WalSink};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineConfig, EngineError, TableSource};
use crate::pgbench::script::Table;

/// The control file's name inside a data directory.
pub const CONTROL_FILE: &str = "lockstack.control";

/// The lock file's name inside a data directory (PostgreSQL's `postmaster.pid`): it holds the
/// process id of the process using the directory, which keeps an exclusive advisory lock on
/// it (`flock`) for as long as the directory is open. The kernel drops the lock when the
/// process exits, so a crash leaves no stale lock; the file itself stays.
pub const LOCK_FILE: &str = "lockstack.pid";

/// Lowest fillfactor a load accepts, percent (pgbench's `-F` range is 10..=100).
pub const MIN_FILLFACTOR: u8 = 10;

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
    /// Next MultiXactId to assign (`nextMulti` of the shutdown checkpoint), so that the multis
    /// a run left in row xmaxes are never handed out again; 1 in files written before
    /// MultiXacts existed.
    #[serde(default = "first_multixact")]
    pub next_multixact: u32,
    /// State.
    pub state: ClusterState,
}

fn first_multixact() -> u32 {
    crate::multixact::MultiXactId::FIRST.0
}

/// A data directory's lock (see [`LOCK_FILE`]), held by an [`Engine`] built over the directory
/// and released when it is dropped.
#[derive(Debug)]
pub struct DirLock {
    path: PathBuf,
    _file: fs::File,
}

impl DirLock {
    /// The locked data directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Takes `dir`'s lock: creates [`LOCK_FILE`] if needed, locks it exclusively without waiting
/// (`File::try_lock`, `flock(LOCK_EX | LOCK_NB)` on Unix), and writes this process's id into
/// it. Two opens in one process conflict too (each has its own open file description).
///
/// # Errors
/// [`EngineError::Usage`] "data directory "d" is in use by process N" when another holder has
/// it (the pid read from the file; "by another process" if it cannot be read), or an I/O error
/// naming the file.
pub fn lock(dir: &Path) -> Result<DirLock, EngineError> {
    let path = dir.join(LOCK_FILE);
    let mut f = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| io(&path, "could not open lock file", e))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let holder = match f.read_to_string(&mut text).ok().and_then(|_| text.trim().parse::<u32>().ok())
            {
                Some(pid) => format!("process {pid}"),
                None => "another process".to_string(),
            };
            return Err(usage(format!("data directory \"{}\" is in use by {holder}", dir.display())));
        }
        Err(fs::TryLockError::Error(e)) => return Err(io(&path, "could not lock", e)),
    }
    f.set_len(0)
        .and_then(|()| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(|e| io(&path, "could not write", e))?;
    Ok(DirLock { path: dir.to_path_buf(), _file: f })
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
    // A page that should be in pg_xact and is not is an error, not "in progress" (PostgreSQL
    // never reads a missing CLOG page as zeros); new pages are zeroed by `Clog::extend`.
    cfg.clog.zero_missing = false;
    cfg.wal.sink = WalSink::Files { dir: dir.join("pg_wal") };
    cfg
}

fn smgr(dir: &Path) -> Result<Arc<FileSmgr>, EngineError> {
    let base = dir.join("base");
    fs::create_dir_all(&base).map_err(|e| io(&base, "could not create directory", e))?;
    Ok(Arc::new(FileSmgr::new(&base, false).map_err(lockstack_bufmgr::BufferError::from)?))
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
    let engine = Engine::build(cfg, smgr(dir)?, TableSource::Load { scale, fillfactor }, Some(lock))?;
    shutdown_with(&engine, scale, fillfactor)
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
/// changed, the directory is checked: the control file's fields ([`check_control`]), pg_xact
/// against `next_xid` ([`check_pg_xact`]), every relation page read while opening (each
/// verified as it is read, see `lockstack_bufmgr::page::verify`), and the scale and `next_xid`
/// against the rows of pgbench_branches and pgbench_tellers.
///
/// # Errors
/// Another process uses the directory; no or invalid control file; a control file field that
/// is out of range or does not match the relations; pg_xact missing or truncated; an invalid
/// or truncated relation file; a directory not shut down cleanly (no crash recovery here); I/O
/// and engine errors. Each is one line naming the directory, file or field.
pub fn open(mut cfg: EngineConfig, dir: &Path) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    if !dir.join(CONTROL_FILE).exists() {
        // No lock file is created in a directory that is not a data directory.
        read_control(dir)?;
    }
    let lock = lock(dir)?;
    let mut control = read_control(dir)?;
    if control.state != ClusterState::ShutDown {
        return Err(usage(format!(
            "data directory \"{}\" was not shut down cleanly (a run crashed, was killed or failed to write it) and crash \
             recovery is not implemented; reinitialize it with -i",
            dir.display()
        )));
    }
    check_control(dir, &control)?;
    check_pg_xact(dir, TransactionId(control.next_xid))?;
    cfg.procarray.first_xid = TransactionId(control.next_xid);
    cfg.wal.start_segment = control.next_wal_segment;
    let cfg = file_config(cfg, dir);
    let engine = Engine::build(cfg, smgr(dir)?, TableSource::Open, Some(lock))?;
    engine.multixact.start_at(crate::multixact::MultiXactId(control.next_multixact));
    check_relations(&engine, dir, &control)?;
    check_pg_xact_unassigned(dir, TransactionId(control.next_xid))?;
    let read = control.clone();
    control.state = ClusterState::InProduction;
    write_control(dir, &control)?;
    Ok((engine, read))
}

/// Range checks of a control file's fields (before the relations are looked at): scale at
/// least 1, fillfactor 10..=100, `next_xid` normal, the next WAL segment after the end of WAL.
///
/// # Errors
/// [`EngineError::Usage`] naming the file and the field.
pub fn check_control(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let bad = |field: &str, why: String| {
        Err(usage(format!("control file \"{}\": {field} {why}", dir.join(CONTROL_FILE).display())))
    };
    if c.scale < 1 {
        return bad("scale", format!("must be at least 1, got {}", c.scale));
    }
    if !(MIN_FILLFACTOR..=100).contains(&c.fillfactor) {
        return bad("fillfactor", format!("must be {MIN_FILLFACTOR}..=100, got {}", c.fillfactor));
    }
    if !TransactionId(c.next_xid).is_normal() {
        return bad(
            "next_xid",
            format!("must be at least {}, got {}", TransactionId::FIRST_NORMAL.0, c.next_xid),
        );
    }
    if c.next_wal_segment > lockstack_xlog::WalConfig::MAX_START_SEGMENT {
        return bad(
            "next_wal_segment",
            format!(
                "must be at most {}, got {}",
                lockstack_xlog::WalConfig::MAX_START_SEGMENT,
                c.next_wal_segment
            ),
        );
    }
    if c.next_wal_segment < Wal::start_segment_after(lockstack_xlog::XLogRecPtr(c.end_of_wal)) {
        return bad(
            "next_wal_segment",
            format!("{} is not after end_of_wal {:#X}", c.next_wal_segment, c.end_of_wal),
        );
    }
    Ok(())
}

/// Checks that pg_xact holds the status of every transaction that may be looked up: xids from
/// `FirstNormalTransactionId` (nothing is ever truncated or frozen away here) up to
/// `next_xid - 1`, i.e. every segment file up to that xid's page exists and is long enough.
/// PostgreSQL finds this out only when a lookup fails ("could not access status of
/// transaction"); checking at open refuses the directory before a run reads wrong visibility.
///
/// # Errors
/// [`EngineError::Usage`] "pg_xact is missing or truncated: ..." naming the segment file.
pub fn check_pg_xact(dir: &Path, next_xid: TransactionId) -> Result<(), EngineError> {
    if next_xid.0 <= TransactionId::FIRST_NORMAL.0 {
        return Ok(());
    }
    let last_xid = next_xid.0 - 1;
    let last_page = clog_page(TransactionId(last_xid));
    let last_segment = last_page / SLRU_PAGES_PER_SEGMENT;
    for seg in clog_page(TransactionId::FIRST_NORMAL) / SLRU_PAGES_PER_SEGMENT..=last_segment {
        let pages =
            if seg == last_segment { last_page % SLRU_PAGES_PER_SEGMENT + 1 } else { SLRU_PAGES_PER_SEGMENT };
        let need = u64::from(pages) * SLRU_PAGE_SIZE as u64;
        let path = dir.join("pg_xact").join(segment_file_name(seg));
        let have = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(usage(format!(
                    "pg_xact is missing or truncated: segment file \"{}\" does not exist; \
                     transactions up to {last_xid} need it",
                    path.display()
                )));
            }
            Err(e) => return Err(io(&path, "could not stat", e)),
        };
        if have < need {
            return Err(usage(format!(
                "pg_xact is missing or truncated: segment file \"{}\" has {have} bytes, \
                 transactions up to {last_xid} need {need}",
                path.display()
            )));
        }
    }
    Ok(())
}

/// No transaction at or after `next_xid` has a status yet: garbage there would fail a later
/// commit ("transaction N is aborted, cannot become committed") without naming the file.
/// Checked after the relations, whose xids say whether `next_xid` itself is too low.
///
/// # Errors
/// [`EngineError::Usage`] naming the pg_xact segment file.
fn check_pg_xact_unassigned(dir: &Path, next_xid: TransactionId) -> Result<(), EngineError> {
    let (page, xpb) = (clog_page(next_xid), CLOG_XACTS_PER_BYTE);
    let path = dir.join("pg_xact").join(segment_file_name(page / SLRU_PAGES_PER_SEGMENT));
    if fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        let bytes = fs::read(&path).map_err(|e| io(&path, "could not read", e))?;
        let at = (page % SLRU_PAGES_PER_SEGMENT) as usize * SLRU_PAGE_SIZE
            + (next_xid.0 % CLOG_XACTS_PER_PAGE / xpb) as usize;
        let first = bytes.get(at).map_or(0, |b| b >> (2 * (next_xid.0 % xpb)));
        if first != 0 || bytes.get(at + 1..).is_some_and(|rest| rest.iter().any(|b| *b != 0)) {
            return Err(usage(format!(
                "pg_xact segment file \"{}\" is damaged: it holds statuses for transactions at or after \
                 next_xid {} that were never assigned",
                path.display(),
                next_xid.0
            )));
        }
    }
    Ok(())
}

/// The control file's scale and `next_xid` against the relations: pgbench_branches' highest
/// `bid` and pgbench_tellers' highest `tid` (over every row version; rows are never deleted)
/// are the scale's, pgbench_accounts has at least the pages 100000 x scale rows fill at the
/// densest (61 rows of 128 bytes per page), and no row version carries an xid at or after
/// `next_xid`.
fn check_relations(engine: &Arc<Engine>, dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let field =
        |what: String| usage(format!("control file \"{}\": {what}", dir.join(CONTROL_FILE).display()));
    let bb = engine.pool.backend();
    let next = TransactionId(c.next_xid);
    for t in [Table::Branches, Table::Tellers] {
        let (max_key, future) = crate::tables::max_key_and_future_xid(&bb, t, next)?;
        if max_key != t.rows(c.scale) {
            return Err(field(format!(
                "scale {} does not match the data: {} has keys up to {max_key}, scale {} has {}",
                c.scale,
                t.name(),
                c.scale,
                t.rows(c.scale)
            )));
        }
        if let Some(x) = future {
            return Err(field(format!(
                "next_xid {} is not above transaction {x}, found in {}",
                c.next_xid,
                t.name()
            )));
        }
    }
    let accounts = bb.pool().nblocks(Table::Accounts.heap_oid(), ForkNumber::Main)?;
    let rows_per_page = ((lockstack_bufmgr::page::BLCKSZ - lockstack_bufmgr::page::SIZE_OF_PAGE_HEADER)
        / (128 + lockstack_bufmgr::page::SIZE_OF_ITEM_ID)) as i64;
    let need = (Table::Accounts.rows(c.scale) + rows_per_page - 1) / rows_per_page;
    if i64::from(accounts) < need {
        return Err(field(format!(
            "scale {} does not match the data: pgbench_accounts has {accounts} pages, scale {} needs at least {need}",
            c.scale, c.scale
        )));
    }
    Ok(())
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
        next_multixact: engine.multixact.next_id().0,
        state: ClusterState::ShutDown,
    };
    write_control(&dir, &control)?;
    Ok(control)
}
