//! `--data-dir`: relations, CLOG and WAL in files, a control file, clean shutdown and reopen.
//!
//! Layout of a data directory (PostgreSQL's names where they exist):
//!
//! | path | holds |
//! |---|---|
//! | `lockstack.control` | the control file (JSON): scale, fillfactor, next xid, end of WAL, state, `data_checksums`, pg_xact page CRCs, the tables' totals; stands for `global/pg_control` |
//! | `lockstack.pid` | the lock file: pid of the process using the directory, locked while it is open ([`lock`]); stands for `postmaster.pid` |
//! | `base/` | relation files, one per fork (`<oid>`, `<oid>_vm`), written by [`FileSmgr`], every page with a checksum |
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
//! written: control file fields; pg_xact's length and page CRCs; every file and directory a
//! run writes is writable and a regular file or directory (never a FIFO, which would block);
//! relations against the control file; the tables' visible rows and balance sums equal to the
//! last shutdown's (every relation page read is verified: checksum, then layout). It then
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
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockstack_bufmgr::{FileSmgr, ForkNumber, Smgr};
use lockstack_clog::{
    CLOG_XACTS_PER_BYTE, CLOG_XACTS_PER_PAGE, SLRU_PAGE_SIZE, SLRU_PAGES_PER_SEGMENT, SlruStorage, clog_page,
    segment_file_name,
};
use lockstack_common::TransactionId;
use lockstack_xlog::{Wal, WalSink};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineConfig, EngineError, TableSource};
use crate::tables::TableId;

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
    /// Whether relation pages carry checksums (PostgreSQL's `data_checksums`, on by default
    /// since 18): every page is written with one and verified when it is read
    /// ([`FileSmgr::with_checksums`]). Every directory this build loads has them; false (pages
    /// not checked) in files written before checksums existed.
    #[serde(default)]
    pub data_checksums: bool,
    /// CRC-32C of every pg_xact page from page 0 to the page of `next_xid - 1`, in page order,
    /// taken from the files at shutdown and checked at [`open`] (SLRU pages have no header to
    /// hold a checksum, so the control file keeps them). Empty (not checked) when
    /// `data_checksums` is off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clog_page_crcs: Vec<u32>,
    /// The pgbench tables' visible rows and balance sums at shutdown, checked at [`open`]
    /// against the data; `None` (not checked) in files written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balances: Option<Balances>,
    /// Why the last shutdown failed (the error, naming the file), kept with state "in
    /// production" so that [`open`] can say what went wrong; `None` after a clean shutdown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure: Option<String>,
}

/// Visible rows and the sum of the balance column (`delta` for pgbench_history) of one table,
/// as `Session::table_sums` counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableTotals {
    /// Visible rows.
    pub rows: u64,
    /// Sum of the balance column.
    pub balance: i64,
}

/// The four pgbench tables' [`TableTotals`] at a shutdown checkpoint.
///
/// A departure from the wording ("each balance sum equal to the history sum"): that
/// equation holds only while every run was tpcb-like (simple-update moves accounts alone, a
/// `-f` script anything), so instead the totals a clean shutdown recorded must be what the
/// next [`open`] finds, whatever the scripts were. Each run checks its own changes against
/// these (the runner's consistency checks), so the chain from the load (zero balances, no
/// history) to the latest shutdown is checked link by link: a lost history page or a flipped
/// transaction status between two runs changes some table's totals and is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Balances {
    /// pgbench_accounts.
    pub accounts: TableTotals,
    /// pgbench_tellers.
    pub tellers: TableTotals,
    /// pgbench_branches.
    pub branches: TableTotals,
    /// pgbench_history.
    pub history: TableTotals,
}

impl Balances {
    fn entries(&self) -> [(TableId, TableTotals); 4] {
        [
            (TableId::Accounts, self.accounts),
            (TableId::Tellers, self.tellers),
            (TableId::Branches, self.branches),
            (TableId::History, self.history),
        ]
    }
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
/// it (the pid read from the file; "by another process" if it cannot be read); a lock file that
/// is not a regular file ([`regular_or_missing`]); an I/O error naming the file.
pub fn lock(dir: &Path) -> Result<DirLock, EngineError> {
    let path = dir.join(LOCK_FILE);
    regular_or_missing(&path)?;
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

/// What a file that is not a regular file is, for messages.
fn kind_of(t: fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() { "a directory" } else { "not a regular file" }
}

/// Refuses `path` if it exists and is not a regular file (following symbolic links): opening
/// a FIFO blocks, and a directory or device is nothing lockstack wrote. A missing `path`
/// passes.
///
/// # Errors
/// [`EngineError::Usage`] "\"path\" is a FIFO, not a regular file: remove it ...".
fn regular_or_missing(path: &Path) -> Result<(), EngineError> {
    match fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(usage(format!(
            "\"{}\" is {}, not a regular file: remove it (or restore the file lockstack wrote there)",
            path.display(),
            kind_of(m.file_type())
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io(path, "could not stat", e)),
    }
}

/// Refuses `path` (a file or directory a run will write, or create files in) unless it can be
/// written: its permissions must have a write bit (checked explicitly, since for root, as in
/// CI, the kernel ignores them and the write would only fail on another machine or user), and
/// a regular file must open for writing.
fn writable(path: &Path, meta: &fs::Metadata) -> Result<(), EngineError> {
    if meta.permissions().readonly() {
        return Err(usage(format!(
            "\"{}\" is read-only, and a run writes {}: make it writable (chmod u+w) and run again",
            path.display(),
            if meta.is_dir() { "files in it" } else { "it" }
        )));
    }
    if meta.is_file() {
        fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| io(path, "could not open for writing", e))?;
    }
    Ok(())
}

/// Checks, before a run changes anything, every file and directory the run may write: the
/// data directory (the control file is replaced in it) and `base`, `pg_xact` and `pg_wal`
/// (new files are created in them) must be writable directories, and every entry of those
/// three a writable regular file ([`writable`], [`regular_or_missing`]). A failure that
/// would otherwise come mid-run or at shutdown, with the directory already marked in
/// production, is one line at open that names the file and leaves the directory as it was.
///
/// # Errors
/// [`EngineError::Usage`] naming the first file or directory that fails.
pub fn check_writable(dir: &Path) -> Result<(), EngineError> {
    let meta = |p: &Path| fs::metadata(p).map_err(|e| io(p, "could not stat", e));
    writable(dir, &meta(dir)?)?;
    for sub in ["base", "pg_xact", "pg_wal"] {
        let path = dir.join(sub);
        let m = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io(&path, "could not stat", e)),
        };
        if !m.is_dir() {
            return Err(usage(format!(
                "\"{}\" is {}, not a directory: remove it (or restore the directory lockstack wrote there)",
                path.display(),
                kind_of(m.file_type())
            )));
        }
        writable(&path, &m)?;
        for e in fs::read_dir(&path).map_err(|e| io(&path, "could not read directory", e))? {
            let p = e.map_err(|e| io(&path, "could not read directory", e))?.path();
            regular_or_missing(&p)?;
            writable(&p, &meta(&p)?)?;
        }
    }
    Ok(())
}

fn io(dir: &Path, what: &str, e: std::io::Error) -> EngineError {
    usage(format!("{what} \"{}\": {e}", dir.display()))
}

/// Reads `dir`'s control file.
///
/// # Errors
/// [`EngineError::Usage`] naming the file when it is missing, not a regular file, unreadable,
/// not valid JSON or of another version.
pub fn read_control(dir: &Path) -> Result<ControlFile, EngineError> {
    let path = dir.join(CONTROL_FILE);
    // Reading a FIFO would wait for a writer forever.
    regular_or_missing(&path)?;
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

/// Replaces `dir`'s control file atomically: write a new temporary file (removing whatever had
/// its name), sync it, rename, sync the directory.
///
/// # Errors
/// I/O errors, naming the path.
pub fn write_control(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let tmp = dir.join(format!("{CONTROL_FILE}.tmp"));
    let text = serde_json::to_string_pretty(c).map_err(|e| usage(format!("control file: {e}")))?;
    // Whatever a crash (or anyone) left under the temporary name goes first: opening a FIFO
    // there for writing would block forever.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&tmp, "could not remove", e)),
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io(&tmp, "could not create", e))?;
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
    shutdown_with(&engine, scale, fillfactor, true)
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
/// regular file; a control file field that is out of range or does not match the relations;
/// pg_xact missing, truncated or failing a page checksum; a file or directory the run writes
/// that is read-only or not a regular file or directory; an invalid, truncated or checksum-failing
/// relation page; table totals that differ from the last shutdown's; a directory not shut down
/// cleanly (no crash recovery here; the message repeats why the last shutdown failed when it
/// did); I/O and engine errors. Each is one line naming the directory, file, block or field.
pub fn open(cfg: EngineConfig, dir: &Path) -> Result<(Arc<Engine>, ControlFile), EngineError> {
    open_wrapped(cfg, dir, |s| s)
}

/// [`open`] with the relation storage manager wrapped by `wrap` before the engine is built
/// over it: the hook for fault injection (a wrapper that fails a chosen write, as a full disk
/// or an I/O error would) and for I/O accounting. `wrap` gets the directory's [`FileSmgr`]
/// (page checksums set as the control file says) and returns what the buffer pool uses.
///
/// # Errors
/// As [`open`].
pub fn open_wrapped(
    mut cfg: EngineConfig,
    dir: &Path,
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
    check_control(dir, &control)?;
    check_pg_xact(dir, TransactionId(control.next_xid))?;
    check_pg_xact_checksums(dir, &control)?;
    check_writable(dir)?;
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
/// [`EngineError::Usage`] "pg_xact is missing or truncated: ..." naming the segment file, or
/// naming a segment that is not a regular file.
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
        regular_or_missing(&path)?;
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

/// CRC-32C of the pg_xact pages from page 0 to the page of `next_xid - 1`, read from the files
/// (see [`ControlFile::clog_page_crcs`]); empty when no normal xid was assigned.
fn pg_xact_crcs(dir: &Path, next_xid: TransactionId) -> Result<Vec<u32>, EngineError> {
    if next_xid.0 <= TransactionId::FIRST_NORMAL.0 {
        return Ok(Vec::new());
    }
    let last_page = clog_page(TransactionId(next_xid.0 - 1));
    let mut out = Vec::with_capacity(last_page as usize + 1);
    for seg in 0..=last_page / SLRU_PAGES_PER_SEGMENT {
        let path = dir.join("pg_xact").join(segment_file_name(seg));
        let bytes = fs::read(&path).map_err(|e| io(&path, "could not read", e))?;
        let first = seg * SLRU_PAGES_PER_SEGMENT;
        for page in first..=last_page.min(first + SLRU_PAGES_PER_SEGMENT - 1) {
            let at = (page - first) as usize * SLRU_PAGE_SIZE;
            let p = bytes.get(at..at + SLRU_PAGE_SIZE).ok_or_else(|| {
                usage(format!(
                    "pg_xact is missing or truncated: segment file \"{}\" has {} bytes, page {page} needs {}",
                    path.display(),
                    bytes.len(),
                    at + SLRU_PAGE_SIZE
                ))
            })?;
            out.push(crc32c::crc32c(p));
        }
    }
    Ok(out)
}

/// With `data_checksums` on, checks every pg_xact page up to the page of `next_xid - 1`
/// against the CRC-32C the last shutdown recorded ([`ControlFile::clog_page_crcs`]): a
/// flipped status bit would otherwise make a committed transaction's rows vanish, or an
/// aborted one's appear, without a word.
///
/// # Errors
/// [`EngineError::Usage`] naming the segment file and the page (or the control file, when
/// its list does not cover `next_xid`).
pub fn check_pg_xact_checksums(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    if !c.data_checksums {
        return Ok(());
    }
    let have = pg_xact_crcs(dir, TransactionId(c.next_xid))?;
    if have.len() != c.clog_page_crcs.len() {
        return Err(usage(format!(
            "control file \"{}\": clog_page_crcs has {} entries, next_xid {} needs {}",
            dir.join(CONTROL_FILE).display(),
            c.clog_page_crcs.len(),
            c.next_xid,
            have.len()
        )));
    }
    if let Some(page) = (0..have.len()).find(|&p| have[p] != c.clog_page_crcs[p]) {
        let seg = page as u32 / SLRU_PAGES_PER_SEGMENT;
        return Err(usage(format!(
            "pg_xact page {page} (page {} of segment file \"{}\") is damaged: calculated CRC-32C {:#010x} but the \
             last shutdown recorded {:#010x}",
            page as u32 % SLRU_PAGES_PER_SEGMENT,
            dir.join("pg_xact").join(segment_file_name(seg)).display(),
            have[page],
            c.clog_page_crcs[page]
        )));
    }
    Ok(())
}

/// A session on the highest backend id nobody uses (every client has ended when the
/// directory's totals are taken).
fn free_session(engine: &Arc<Engine>) -> Result<crate::session::Session, EngineError> {
    let mut last = None;
    for id in (0..engine.cfg.max_backends).rev() {
        match engine.session(lockstack_common::BackendId(id as u32)) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| usage("no backend to take the table totals with".into())))
}

/// Every pgbench table's visible rows and balance sum, as a new snapshot sees them.
///
/// # Errors
/// Buffer, storage and engine errors of the scans.
fn table_totals(engine: &Arc<Engine>) -> Result<Balances, EngineError> {
    let mut s = free_session(engine)?;
    let mut get = |t: TableId| -> Result<TableTotals, EngineError> {
        let x = s.table_sums(t)?;
        Ok(TableTotals { rows: x.rows, balance: x.balance })
    };
    Ok(Balances {
        accounts: get(TableId::Accounts)?,
        tellers: get(TableId::Tellers)?,
        branches: get(TableId::Branches)?,
        history: get(TableId::History)?,
    })
}

/// The tables' totals against the [`Balances`] the last shutdown recorded (skipped for a
/// control file without them).
fn check_balances(engine: &Arc<Engine>, dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let Some(want) = c.balances else { return Ok(()) };
    let have = table_totals(engine)?;
    for ((t, h), (_, w)) in have.entries().into_iter().zip(want.entries()) {
        if h != w {
            return Err(usage(format!(
                "data directory \"{}\" lost or changed data: {} (file \"{}\") has {} rows with balance sum {}, the \
                 last shutdown left {} rows with sum {} (a damaged, truncated or removed relation file, or damaged \
                 pg_xact); reinitialize it with -i",
                dir.display(),
                t.name(),
                dir.join("base").join(t.heap_oid().0.to_string()).display(),
                h.rows,
                h.balance,
                w.rows,
                w.balance
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
    for t in [TableId::Branches, TableId::Tellers] {
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
    let accounts = bb.pool().nblocks(TableId::Accounts.heap_oid(), ForkNumber::Main)?;
    let rows_per_page = ((lockstack_bufmgr::page::BLCKSZ - lockstack_bufmgr::page::SIZE_OF_PAGE_HEADER)
        / (128 + lockstack_bufmgr::page::SIZE_OF_ITEM_ID)) as i64;
    let need = (TableId::Accounts.rows(c.scale) + rows_per_page - 1) / rows_per_page;
    if i64::from(accounts) < need {
        return Err(field(format!(
            "scale {} does not match the data: pgbench_accounts has {accounts} pages, scale {} needs at least {need}",
            c.scale, c.scale
        )));
    }
    Ok(())
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
    match shutdown_with(engine, control.scale, control.fillfactor, control.data_checksums) {
        Ok(c) => Ok(c),
        Err(e) => {
            if let Some(dir) = engine.data_dir() {
                // Best effort (the control file may be what cannot be written): leave the
                // reason where the next open reports it.
                let failed = ControlFile {
                    state: ClusterState::InProduction,
                    last_failure: Some(e.to_string().replace(['\n', '\r'], " ")),
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
) -> Result<ControlFile, EngineError> {
    let dir: PathBuf =
        engine.data_dir().ok_or_else(|| usage("shutdown of an in-memory engine".into()))?.to_path_buf();
    // First, so that pages the scans dirty (hint bits) are written below.
    let balances = table_totals(engine)?;
    let end = engine.wal.backend().flush_all()?;
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
    };
    write_control(&dir, &control)?;
    Ok(control)
}
