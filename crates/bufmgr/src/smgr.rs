//! Storage managers: where pages live when they are not in the buffer pool.
//!
//! PostgreSQL's `smgr.c` dispatches to `md.c` (magnetic disk: one file per relation fork, split
//! into 1 GiB segments, read and written with `pread`/`pwrite`, `smgrnblocks` from the file
//! size). lockstack has two implementations of [`Smgr`]: [`MemorySmgr`] (the default; pages in
//! RAM, for experiments about locking rather than I/O, optionally over a read-only backing
//! store whose blocks it reads until it writes them) and [`FileSmgr`] (one unsegmented file
//! per relation fork in a data directory, named like PostgreSQL's: `16384`, `16384_fsm`,
//! `16384_vm`).
//!
//! Every call is for whole [`BLCKSZ`] pages. Callers serialise extensions of one relation fork
//! (the buffer pool does, with its relation extension locks); reads and writes of existing
//! blocks may run concurrently.

use std::collections::HashMap;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::sync::{AtomicU32, Mutex, Ordering, RwLock};
use lockstack_common::{BlockNumber, Oid, WaitEvent, WaitEventScope};

use crate::page::BLCKSZ;
use crate::tag::ForkNumber;

/// What a storage manager call was doing when it failed.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SmgrOp {
    /// Opening or creating the file.
    Open,
    /// Reading a block.
    Read,
    /// Writing an existing block.
    Write,
    /// Appending a block.
    Extend,
    /// `fsync`.
    Sync,
    /// Finding the size.
    Size,
}

impl SmgrOp {
    fn verb(self) -> &'static str {
        match self {
            SmgrOp::Open => "open",
            SmgrOp::Read => "read",
            SmgrOp::Write => "write",
            SmgrOp::Extend => "extend",
            SmgrOp::Sync => "fsync",
            SmgrOp::Size => "get the size of",
        }
    }
}

/// A storage manager failure, naming the relation fork, the block and (for [`FileSmgr`]) the
/// file, in the style of PostgreSQL's `md.c` messages ("could not read block 7 in file
/// \"base/16384_vm\": ...").
#[derive(Debug)]
pub struct SmgrError {
    /// The operation.
    pub op: SmgrOp,
    /// The relation.
    pub rel: Oid,
    /// The fork.
    pub fork: ForkNumber,
    /// The block, when the operation was about one.
    pub block: Option<BlockNumber>,
    /// The file, for [`FileSmgr`].
    pub path: Option<PathBuf>,
    /// The underlying error (for [`MemorySmgr`], a synthesised `InvalidInput` / `UnexpectedEof`).
    pub source: io::Error,
}

impl fmt::Display for SmgrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not {}", self.op.verb())?;
        if let Some(b) = self.block {
            write!(f, " block {b} in")?;
        }
        match &self.path {
            Some(p) => write!(f, " file \"{}\"", p.display())?,
            None => write!(f, " relation {} fork {} (memory)", self.rel, self.fork)?,
        }
        write!(f, ": {}", self.source)
    }
}

impl std::error::Error for SmgrError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// The storage manager interface the buffer pool uses (PostgreSQL's `f_smgr` table).
pub trait Smgr: Send + Sync + fmt::Debug {
    /// Number of blocks in the fork (`smgrnblocks`); 0 if it does not exist yet.
    ///
    /// # Errors
    /// I/O errors finding the size.
    fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, SmgrError>;

    /// Reads block `block` into `buf` (`smgrread`).
    ///
    /// # Errors
    /// I/O errors, or `UnexpectedEof` when the block is at or beyond the end of the fork.
    fn read(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &mut [u8]) -> Result<(), SmgrError>;

    /// Overwrites existing block `block` with `buf` (`smgrwrite`).
    ///
    /// # Errors
    /// I/O errors, or `InvalidInput` when the block does not exist yet.
    fn write(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError>;

    /// Appends block `block`, which must equal [`nblocks`](Self::nblocks), with contents `buf`
    /// (`smgrextend`); creates the fork on first use. The caller serialises extensions of a fork.
    ///
    /// # Errors
    /// I/O errors, or `InvalidInput` when `block` is not the current size.
    fn extend(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError>;

    /// Makes the fork's writes durable (`smgrimmedsync`); a no-op for memory.
    ///
    /// # Errors
    /// I/O errors from `fsync`.
    fn sync(&self, rel: Oid, fork: ForkNumber) -> Result<(), SmgrError>;
}

mod memory;
pub use memory::{MEMORY_SMGR_WAIT_CLASS, MemorySmgr};

#[derive(Debug)]
struct OpenFork {
    file: File,
    path: PathBuf,
    nblocks: AtomicU32,
}

/// One file per relation fork in a data directory, 8 KiB blocks, `pread`/`pwrite` (PostgreSQL's
/// `md.c` without 1 GiB segments). The file size is read once when a fork is opened and then
/// tracked in memory (like `smgr_cached_nblocks`, 14+), so [`Smgr::nblocks`] costs no system
/// call.
///
/// With `fsync_writes` every write and extension is followed by `fdatasync` (a stand-in for the
/// checkpointer's fsync requests; it makes each eviction of a dirty page pay a sync). Without
/// it, durability needs [`Smgr::sync`].
///
/// With checksums on ([`with_checksums`](Self::with_checksums), PostgreSQL's
/// `data_checksums`), every page written gets [`crate::page::relation_checksum`] in
/// `pd_checksum` (computed on a copy, as `PageSetChecksumCopy` does, so the caller's buffer is
/// not changed) and every page read is checked against it
/// ([`crate::page::verify_relation_checksum`]); a mismatch fails the read with an error naming
/// the file and the block. The checksum covers the relation and fork as well as the block, so
/// a file that holds another relation's or fork's pages fails its first read. Only files
/// whose every page was written this way may be read with checksums on.
///
/// Only regular files are used: a fork whose path is anything else (a FIFO, a directory, a
/// device) is refused when it is opened, never read or written.
#[derive(Debug)]
pub struct FileSmgr {
    dir: PathBuf,
    fsync_writes: bool,
    checksums: bool,
    read_only: bool,
    open: RwLock<HashMap<(Oid, ForkNumber), Arc<OpenFork>>>,
    create: Mutex<()>,
}

impl FileSmgr {
    /// A storage manager over the existing directory `dir`.
    ///
    /// # Errors
    /// When `dir` does not exist or is not a directory (`op` = [`SmgrOp::Open`]).
    pub fn new(dir: impl AsRef<Path>, fsync_writes: bool) -> Result<FileSmgr, SmgrError> {
        let dir = dir.as_ref().to_path_buf();
        match std::fs::metadata(&dir) {
            Ok(m) if m.is_dir() => Ok(FileSmgr {
                dir,
                fsync_writes,
                checksums: false,
                read_only: false,
                open: RwLock::default(),
                create: Mutex::new(()),
            }),
            Ok(_) => Err(SmgrError {
                op: SmgrOp::Open,
                rel: Oid::INVALID,
                fork: ForkNumber::Main,
                block: None,
                path: Some(dir),
                source: io::Error::new(io::ErrorKind::InvalidInput, "not a directory"),
            }),
            Err(e) => Err(SmgrError {
                op: SmgrOp::Open,
                rel: Oid::INVALID,
                fork: ForkNumber::Main,
                block: None,
                path: Some(dir),
                source: e,
            }),
        }
    }

    /// Turns page checksums on or off (off by default); see the type's docs.
    #[must_use]
    pub fn with_checksums(mut self, on: bool) -> FileSmgr {
        self.checksums = on;
        self
    }

    /// Opens files for reading only: writes, extensions and syncs fail with
    /// `PermissionDenied`, and the directory may be read-only (a load image several runs
    /// read at once).
    #[must_use]
    pub fn read_only(mut self) -> FileSmgr {
        self.read_only = true;
        self
    }

    /// Refuses `op` on a read-only store.
    fn check_writable(
        &self,
        op: SmgrOp,
        rel: Oid,
        fork: ForkNumber,
        block: Option<BlockNumber>,
    ) -> Result<(), SmgrError> {
        if self.read_only {
            return Err(self.err(
                op,
                rel,
                fork,
                block,
                io::Error::new(io::ErrorKind::PermissionDenied, "the store was opened read-only"),
            ));
        }
        Ok(())
    }

    /// Whether page checksums are written and verified.
    pub fn checksums(&self) -> bool {
        self.checksums
    }

    /// The data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file holding `fork` of `rel` (`relpath`): `<dir>/<rel>` for the main fork,
    /// `<dir>/<rel>_fsm` and `<dir>/<rel>_vm` for the others.
    pub fn path(&self, rel: Oid, fork: ForkNumber) -> PathBuf {
        match fork {
            ForkNumber::Main => self.dir.join(rel.0.to_string()),
            other => self.dir.join(format!("{}_{}", rel.0, other.name())),
        }
    }

    fn err(
        &self,
        op: SmgrOp,
        rel: Oid,
        fork: ForkNumber,
        block: Option<BlockNumber>,
        e: io::Error,
    ) -> SmgrError {
        SmgrError { op, rel, fork, block, path: Some(self.path(rel, fork)), source: e }
    }

    /// The open fork, opening (and with `create`, creating) its file on first use; `None` if
    /// the file does not exist and `create` is false.
    fn get(&self, rel: Oid, fork: ForkNumber, create: bool) -> Result<Option<Arc<OpenFork>>, SmgrError> {
        if let Some(f) = self.open.read().get(&(rel, fork)) {
            return Ok(Some(Arc::clone(f)));
        }
        let _g = self.create.lock();
        if let Some(f) = self.open.read().get(&(rel, fork)) {
            return Ok(Some(Arc::clone(f)));
        }
        let path = self.path(rel, fork);
        let writable = !self.read_only;
        let file = match OpenOptions::new()
            .read(true)
            .write(writable)
            .create(create && writable)
            .truncate(false)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => return Err(self.err(SmgrOp::Open, rel, fork, None, e)),
        };
        let meta = file.metadata().map_err(|e| self.err(SmgrOp::Size, rel, fork, None, e))?;
        if !meta.is_file() {
            return Err(self.err(
                SmgrOp::Open,
                rel,
                fork,
                None,
                io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        let len = meta.len();
        if !len.is_multiple_of(BLCKSZ as u64) {
            // Every extension writes a whole block, so a partial one means the file was cut
            // short (or written by something else).
            return Err(self.err(
                SmgrOp::Size,
                rel,
                fork,
                None,
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "file is truncated or damaged: {len} bytes is not a whole number of {BLCKSZ}-byte blocks"
                    ),
                ),
            ));
        }
        let of = Arc::new(OpenFork { file, path, nblocks: AtomicU32::new((len / BLCKSZ as u64) as u32) });
        self.open.write().insert((rel, fork), Arc::clone(&of));
        Ok(Some(of))
    }

    /// `buf`, or with checksums on a copy of it in `copy` with `pd_checksum` set for `block`
    /// of `fork` of `rel` ([`crate::page::relation_checksum`]).
    fn with_checksum<'a>(
        &self,
        buf: &'a [u8],
        rel: Oid,
        fork: ForkNumber,
        block: BlockNumber,
        copy: &'a mut [u8; BLCKSZ],
    ) -> &'a [u8] {
        if !self.checksums || buf.len() != BLCKSZ {
            return buf;
        }
        copy.copy_from_slice(buf);
        crate::page::set_relation_checksum(copy, rel, fork, block.0);
        copy
    }

    fn maybe_sync(&self, f: &OpenFork, rel: Oid, fork: ForkNumber) -> Result<(), SmgrError> {
        if self.fsync_writes {
            let _w = WaitEventScope::new(WaitEvent::DATA_FILE_SYNC);
            f.file.sync_data().map_err(|e| self.err(SmgrOp::Sync, rel, fork, None, e))?;
        }
        Ok(())
    }
}

#[cfg(unix)]
fn pread(f: &File, buf: &mut [u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
}

#[cfg(unix)]
fn pwrite(f: &File, buf: &[u8], at: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, buf, at)
}

#[cfg(windows)]
fn pread(f: &File, mut buf: &mut [u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_read(f, buf, at)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf = &mut buf[n..];
        at += n as u64;
    }
    Ok(())
}

#[cfg(windows)]
fn pwrite(f: &File, mut buf: &[u8], mut at: u64) -> io::Result<()> {
    while !buf.is_empty() {
        let n = std::os::windows::fs::FileExt::seek_write(f, buf, at)?;
        buf = &buf[n..];
        at += n as u64;
    }
    Ok(())
}

impl Smgr for FileSmgr {
    fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, SmgrError> {
        Ok(self.get(rel, fork, false)?.map(|f| f.nblocks.load(Ordering::Acquire)).unwrap_or(0))
    }

    fn read(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &mut [u8]) -> Result<(), SmgrError> {
        let eof = |n: u32| {
            self.err(
                SmgrOp::Read,
                rel,
                fork,
                Some(block),
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("block beyond end of file ({n} blocks)"),
                ),
            )
        };
        let f = self.get(rel, fork, false)?.ok_or_else(|| eof(0))?;
        let n = f.nblocks.load(Ordering::Acquire);
        if block.0 >= n {
            return Err(eof(n));
        }
        {
            let _w = WaitEventScope::new(WaitEvent::DATA_FILE_READ);
            pread(&f.file, buf, u64::from(block.0) * BLCKSZ as u64)
                .map_err(|e| self.err(SmgrOp::Read, rel, fork, Some(block), e))?;
        }
        if self.checksums {
            crate::page::verify_relation_checksum(buf, rel, fork, block.0).map_err(|m| {
                self.err(SmgrOp::Read, rel, fork, Some(block), io::Error::new(io::ErrorKind::InvalidData, m))
            })?;
        }
        Ok(())
    }

    fn write(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        self.check_writable(SmgrOp::Write, rel, fork, Some(block))?;
        let missing = || {
            self.err(
                SmgrOp::Write,
                rel,
                fork,
                Some(block),
                io::Error::new(io::ErrorKind::InvalidInput, "block does not exist"),
            )
        };
        let f = self.get(rel, fork, false)?.ok_or_else(missing)?;
        if block.0 >= f.nblocks.load(Ordering::Acquire) {
            return Err(missing());
        }
        let mut copy = [0u8; BLCKSZ];
        let buf = self.with_checksum(buf, rel, fork, block, &mut copy);
        {
            let _w = WaitEventScope::new(WaitEvent::DATA_FILE_WRITE);
            pwrite(&f.file, buf, u64::from(block.0) * BLCKSZ as u64)
                .map_err(|e| self.err(SmgrOp::Write, rel, fork, Some(block), e))?;
        }
        self.maybe_sync(&f, rel, fork)
    }

    fn extend(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        self.check_writable(SmgrOp::Extend, rel, fork, Some(block))?;
        let f = self.get(rel, fork, true)?.expect("a get with create set always yields the file");
        let n = f.nblocks.load(Ordering::Acquire);
        if block.0 != n {
            return Err(self.err(
                SmgrOp::Extend,
                rel,
                fork,
                Some(block),
                io::Error::new(io::ErrorKind::InvalidInput, format!("file has {n} blocks")),
            ));
        }
        let mut copy = [0u8; BLCKSZ];
        let buf = self.with_checksum(buf, rel, fork, block, &mut copy);
        {
            let _w = WaitEventScope::new(WaitEvent::DATA_FILE_EXTEND);
            pwrite(&f.file, buf, u64::from(block.0) * BLCKSZ as u64)
                .map_err(|e| self.err(SmgrOp::Extend, rel, fork, Some(block), e))?;
        }
        f.nblocks.store(n + 1, Ordering::Release);
        self.maybe_sync(&f, rel, fork)
    }

    fn sync(&self, rel: Oid, fork: ForkNumber) -> Result<(), SmgrError> {
        self.check_writable(SmgrOp::Sync, rel, fork, None)?;
        if let Some(f) = self.get(rel, fork, false)? {
            let _w = WaitEventScope::new(WaitEvent::DATA_FILE_SYNC);
            f.file.sync_all().map_err(|e| self.err(SmgrOp::Sync, rel, fork, None, e))?;
            debug_assert!(f.path == self.path(rel, fork));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exercise(s: &dyn Smgr) {
        let rel = Oid(16384);
        assert_eq!(s.nblocks(rel, ForkNumber::Main).unwrap(), 0);
        let mut buf = vec![0u8; BLCKSZ];
        assert_eq!(
            s.read(rel, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap_err().source.kind(),
            io::ErrorKind::UnexpectedEof
        );
        for b in 0..3u32 {
            s.extend(rel, ForkNumber::Main, BlockNumber(b), &vec![b as u8 + 1; BLCKSZ]).unwrap();
        }
        assert!(s.extend(rel, ForkNumber::Main, BlockNumber(7), &buf).is_err());
        assert_eq!(s.nblocks(rel, ForkNumber::Main).unwrap(), 3);
        assert_eq!(s.nblocks(rel, ForkNumber::VisibilityMap).unwrap(), 0);
        s.write(rel, ForkNumber::Main, BlockNumber(1), &vec![9u8; BLCKSZ]).unwrap();
        assert!(s.write(rel, ForkNumber::Main, BlockNumber(3), &buf).is_err());
        s.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 9));
        s.read(rel, ForkNumber::Main, BlockNumber(2), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 3));
        s.sync(rel, ForkNumber::Main).unwrap();
    }

    #[test]
    fn memory_smgr_behaves() {
        exercise(&MemorySmgr::new());
    }

    #[test]
    fn file_smgr_behaves_and_names_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileSmgr::new(dir.path(), true).unwrap();
        exercise(&s);
        assert!(dir.path().join("16384").exists());
        assert_eq!(s.path(Oid(5), ForkNumber::VisibilityMap), dir.path().join("5_vm"));
        // A second manager over the same directory sees the size from the file.
        let s2 = FileSmgr::new(dir.path(), false).unwrap();
        assert_eq!(s2.nblocks(Oid(16384), ForkNumber::Main).unwrap(), 3);
        let err = FileSmgr::new(dir.path().join("nope"), false).unwrap_err();
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[test]
    fn a_read_only_store_reads_and_refuses_every_change() {
        let dir = tempfile::tempdir().unwrap();
        let rel = Oid(16384);
        FileSmgr::new(dir.path(), false)
            .unwrap()
            .extend(rel, ForkNumber::Main, BlockNumber(0), &[3u8; BLCKSZ])
            .unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap().read_only();
        let mut buf = vec![0u8; BLCKSZ];
        s.read(rel, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 3));
        for e in [
            s.write(rel, ForkNumber::Main, BlockNumber(0), &buf).unwrap_err(),
            s.extend(rel, ForkNumber::Main, BlockNumber(1), &buf).unwrap_err(),
            s.sync(rel, ForkNumber::Main).unwrap_err(),
        ] {
            assert_eq!(e.source.kind(), io::ErrorKind::PermissionDenied, "{e}");
        }
        assert_eq!(std::fs::metadata(dir.path().join("16384")).unwrap().len(), BLCKSZ as u64);
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap();
        let mut buf = vec![0u8; BLCKSZ];
        let e = s.read(Oid(42), ForkNumber::VisibilityMap, BlockNumber(3), &mut buf).unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("could not read block 3 in file"), "{msg}");
        assert!(msg.contains("42_vm"), "{msg}");
    }

    #[test]
    fn checksums_are_written_and_a_flipped_bit_names_file_and_block() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap().with_checksums(true);
        let mut page = vec![0u8; BLCKSZ];
        crate::page::init(&mut page, 0);
        let rel = Oid(16384);
        s.extend(rel, ForkNumber::Main, BlockNumber(0), &vec![0u8; BLCKSZ]).unwrap();
        s.extend(rel, ForkNumber::Main, BlockNumber(1), &page).unwrap();
        s.write(rel, ForkNumber::Main, BlockNumber(0), &page).unwrap();
        assert_eq!(crate::page::stored_checksum(&page), 0, "the caller's buffer is not changed");
        let mut buf = vec![0u8; BLCKSZ];
        for b in 0..2 {
            s.read(rel, ForkNumber::Main, BlockNumber(b), &mut buf).unwrap();
            let want = crate::page::relation_checksum(&buf, rel, ForkNumber::Main, b);
            assert_eq!(crate::page::stored_checksum(&buf), want);
        }
        // The same bytes at another block number, or in another relation or fork, do not
        // pass: all three are mixed in.
        let c = |rel: u32, fork, b| crate::page::relation_checksum(&buf, Oid(rel), fork, b);
        assert_ne!(c(16384, ForkNumber::Main, 0), c(16384, ForkNumber::Main, 1));
        assert_ne!(c(16384, ForkNumber::Main, 1), c(16385, ForkNumber::Main, 1));
        assert_ne!(c(16384, ForkNumber::Main, 1), c(16384, ForkNumber::VisibilityMap, 1));
        drop(s);
        let path = dir.path().join("16384");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[BLCKSZ + 4000] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap().with_checksums(true);
        s.read(rel, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        let msg = s.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap_err().to_string();
        assert!(msg.starts_with("could not read block 1 in file"), "{msg}");
        assert!(msg.contains("16384\"") && msg.contains("page verification failed"), "{msg}");
        // Without checksums the flip goes unnoticed here (the page layout checks are the pool's).
        let s = FileSmgr::new(dir.path(), false).unwrap();
        s.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap();
    }

    #[test]
    fn a_file_copied_over_another_relation_or_fork_fails_its_checksums() {
        let dir = tempfile::tempdir().unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap().with_checksums(true);
        let mut page = vec![0u8; BLCKSZ];
        crate::page::init(&mut page, 0);
        for rel in [Oid(16384), Oid(16385)] {
            s.extend(rel, ForkNumber::Main, BlockNumber(0), &page).unwrap();
            s.extend(rel, ForkNumber::VisibilityMap, BlockNumber(0), &page).unwrap();
        }
        drop(s);
        // Byte for byte the same pages, except for the checksum that names where each belongs.
        std::fs::copy(dir.path().join("16384"), dir.path().join("16385")).unwrap();
        std::fs::copy(dir.path().join("16384"), dir.path().join("16384_vm")).unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap().with_checksums(true);
        let mut buf = vec![0u8; BLCKSZ];
        s.read(Oid(16384), ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        for (rel, fork, name) in
            [(Oid(16385), ForkNumber::Main, "16385\""), (Oid(16384), ForkNumber::VisibilityMap, "16384_vm\"")]
        {
            let msg = s.read(rel, fork, BlockNumber(0), &mut buf).unwrap_err().to_string();
            assert!(msg.contains(name) && msg.contains("page verification failed"), "{msg}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_in_place_of_a_fork_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("16384");
        let ok = std::process::Command::new("mkfifo").arg(&path).status().is_ok_and(|s| s.success());
        assert!(ok, "mkfifo");
        let s = FileSmgr::new(dir.path(), false).unwrap();
        let msg = s.nblocks(Oid(16384), ForkNumber::Main).unwrap_err().to_string();
        assert!(msg.contains("16384\"") && msg.contains("not a regular file"), "{msg}");
    }

    #[test]
    fn a_partial_last_block_is_reported_as_truncation() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("16384"), vec![0u8; 8000]).unwrap();
        let s = FileSmgr::new(dir.path(), false).unwrap();
        let msg = s.nblocks(Oid(16384), ForkNumber::Main).unwrap_err().to_string();
        assert!(msg.contains("\"") && msg.contains("16384") && msg.contains("truncated"), "{msg}");
    }
}
