//! The data directory's files as files: its lock file ([`lock`], [`DirLock`]), the checks that
//! every path a run writes is a writable regular file or directory (never a FIFO, which would
//! block), and the one-line errors naming a file.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::EngineError;

/// The lock file's name inside a data directory (PostgreSQL's `postmaster.pid`): it holds the
/// process id of the process using the directory, which keeps an exclusive advisory lock on
/// it (`flock`) for as long as the directory is open. The kernel drops the lock when the
/// process exits, so a crash leaves no stale lock; the file itself stays.
pub const LOCK_FILE: &str = "lockstack.pid";

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
            return Err(usage(format!(
                "data directory \"{}\" is in use by {holder} (or by runs reading it with --load-from)",
                dir.display()
            )));
        }
        Err(fs::TryLockError::Error(e)) => return Err(io(&path, "could not lock", e)),
    }
    f.set_len(0)
        .and_then(|()| f.write_all(format!("{}\n", std::process::id()).as_bytes()))
        .map_err(|e| io(&path, "could not write", e))?;
    Ok(DirLock { path: dir.to_path_buf(), _file: f })
}

/// Takes `dir`'s lock shared, for a process that only reads the directory (a load image,
/// [`super::load_image`]): any number of readers hold it at once, and while one does, [`lock`]
/// (an open for a run, `-i`) fails, as a reader fails while a writer holds it. The lock file is
/// opened for reading only, so a read-only directory can be read; one without a lock file
/// (copied without it) is read without a lock, `Ok(None)`, since nothing opened it for writing
/// since.
///
/// # Errors
/// [`EngineError::Usage`] "data directory "d" is in use by process N" when a writer holds it;
/// a lock file that is not a regular file; an I/O error naming the file.
pub fn lock_shared(dir: &Path) -> Result<Option<DirLock>, EngineError> {
    let path = dir.join(LOCK_FILE);
    regular_or_missing(&path)?;
    let mut f = match fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, "could not open lock file", e)),
    };
    match f.try_lock_shared() {
        Ok(()) => Ok(Some(DirLock { path: dir.to_path_buf(), _file: f })),
        Err(fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let holder = match f.read_to_string(&mut text).ok().and_then(|_| text.trim().parse::<u32>().ok())
            {
                Some(pid) => format!("process {pid}"),
                None => "another process".to_string(),
            };
            Err(usage(format!(
                "data directory \"{}\" is in use by {holder}, which may change it; --load-from reads only a \
                 directory no run or -i has open",
                dir.display()
            )))
        }
        Err(fs::TryLockError::Error(e)) => Err(io(&path, "could not lock", e)),
    }
}

pub(super) fn usage(msg: String) -> EngineError {
    EngineError::Usage(msg)
}

/// What a file that is not a regular file is, for messages.
pub(super) fn kind_of(t: fs::FileType) -> &'static str {
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
pub(super) fn regular_or_missing(path: &Path) -> Result<(), EngineError> {
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
pub(super) fn writable(path: &Path, meta: &fs::Metadata) -> Result<(), EngineError> {
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

pub(super) fn io(dir: &Path, what: &str, e: std::io::Error) -> EngineError {
    usage(format!("{what} \"{}\": {e}", dir.display()))
}
