//! The write and flush end of the WAL: segment files, a memory image, or nothing.
//!
//! Only the holder of `WALWriteLock` calls into a [`Sink`], so its state needs no lock of its
//! own beyond the uncontended mutex that lets `Wal` be `Sync`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockstack_common::{WaitEvent, WaitEventScope};

use crate::config::{WalError, WalSink};
use crate::ptr::{WAL_SEG_SIZE, XLOG_BLCKSZ};
use crate::record::TIMELINE;

/// The file name of segment `segno` (`XLogFileName`: timeline, then the segment number split
/// in two 32-bit hex halves of 256 segments each for 16 MiB segments).
pub fn segment_file_name(segno: u64) -> String {
    let per_id = 0x1_0000_0000u64 / WAL_SEG_SIZE;
    format!("{:08X}{:08X}{:08X}", TIMELINE, segno / per_id, segno % per_id)
}

/// The segment number named by `name`, if it is a segment file name this crate writes
/// (24 upper-case hex digits: timeline 1, then the two halves of [`segment_file_name`]);
/// `None` for any other name.
pub fn parse_segment_file_name(name: &str) -> Option<u64> {
    let per_id = 0x1_0000_0000u64 / WAL_SEG_SIZE;
    if name.len() != 24 || !name.bytes().all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)) {
        return None;
    }
    let field = |i: usize| u64::from_str_radix(&name[i * 8..i * 8 + 8], 16).ok();
    let (tli, hi, lo) = (field(0)?, field(1)?, field(2)?);
    if tli != u64::from(TIMELINE) || lo >= per_id {
        return None;
    }
    Some(hi * per_id + lo)
}

/// The names in `dir` that look like WAL segment files (24 hex digits, any case), each with
/// its segment number when it is one this crate writes ([`parse_segment_file_name`]).
pub(crate) fn wal_files_in(dir: &Path) -> Result<Vec<(String, Option<u64>)>, WalError> {
    let rd = std::fs::read_dir(dir).map_err(|e| WalError::io(dir, "read directory", e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| WalError::io(dir, "read directory", e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.len() == 24 && name.chars().all(|c| c.is_ascii_hexdigit()) {
            out.push((name.to_string(), parse_segment_file_name(&name)));
        }
    }
    Ok(out)
}

/// One open segment file.
struct OpenSegment {
    segno: u64,
    file: File,
    path: PathBuf,
}

enum SinkKind {
    Files { dir: PathBuf, open: Option<OpenSegment> },
    Modelled { flush_delay: Duration },
    Memory,
}

/// Sink state, owned by whoever holds `WALWriteLock`.
pub(crate) struct Sink {
    kind: SinkKind,
    /// Copy of written WAL (when kept); byte `i` is position `image_start + i`.
    image: Option<Vec<u8>>,
    /// Position of the image's first byte: the first byte of the log's first segment.
    image_start: u64,
    /// Contiguous bytes waiting to be written, starting at `pending_start`.
    pending: Vec<u8>,
    pending_start: u64,
    /// [`crate::WalConfig::write_limit`]: writes ending more than this many bytes past
    /// `image_start` fail with `ENOSPC` ([`Sink::check_space`]).
    write_limit: Option<u64>,
}

impl Sink {
    /// A sink for a log whose first page starts at byte position `start` (a segment start).
    /// With `write_limit`, a write ending more than that many bytes past `start` fails with
    /// `ENOSPC` (fault injection: a full disk).
    pub(crate) fn new(
        sink: &WalSink,
        keep_in_memory: bool,
        start: u64,
        write_limit: Option<u64>,
    ) -> Result<Sink, WalError> {
        let kind = match sink {
            WalSink::Files { dir } => {
                std::fs::create_dir_all(dir).map_err(|e| WalError::io(dir, "create directory", e))?;
                SinkKind::Files { dir: dir.clone(), open: None }
            }
            WalSink::Modelled { flush_delay } => SinkKind::Modelled { flush_delay: *flush_delay },
            WalSink::Memory => SinkKind::Memory,
        };
        let image = match (&kind, keep_in_memory) {
            (SinkKind::Files { .. }, _) | (_, false) => None,
            _ => Some(Vec::new()),
        };
        Ok(Sink {
            kind,
            image,
            image_start: start,
            pending: Vec::with_capacity(64 * 1024),
            pending_start: start,
            write_limit,
        })
    }

    /// Fails if writing up to byte position `end` would take the log past its
    /// [`crate::WalConfig::write_limit`]: `ENOSPC`, as `write(2)` reports a full file system,
    /// naming the segment that holds the first byte past the limit.
    pub(crate) fn check_space(&self, end: u64) -> Result<(), WalError> {
        match self.write_limit {
            Some(limit) if end.saturating_sub(self.image_start) > limit => {
                let name = segment_file_name((self.image_start + limit) / WAL_SEG_SIZE);
                let path = match &self.kind {
                    SinkKind::Files { dir, .. } => dir.join(name),
                    _ => PathBuf::from(name),
                };
                Err(WalError::io(path, "write", std::io::Error::from_raw_os_error(28)))
            }
            _ => Ok(()),
        }
    }

    /// True if `flush` costs something (files or modelled): PostgreSQL's `enableFsync`.
    pub(crate) fn flush_enabled(&self) -> bool {
        !matches!(self.kind, SinkKind::Memory)
    }

    /// A snapshot of the memory image through the page containing `upto` (pages are
    /// written whole), if one is kept, with the position of its first byte.
    pub(crate) fn image_upto(&self, upto: u64) -> Option<(u64, Vec<u8>)> {
        let end = upto.div_ceil(XLOG_BLCKSZ) * XLOG_BLCKSZ;
        let len = end.saturating_sub(self.image_start) as usize;
        self.image.as_ref().map(|img| (self.image_start, img[..len.min(img.len())].to_vec()))
    }

    /// The segment directory, for a file sink.
    pub(crate) fn dir(&self) -> Option<&Path> {
        match &self.kind {
            SinkKind::Files { dir, .. } => Some(dir),
            _ => None,
        }
    }

    /// True if written bytes go anywhere (so pages need to be gathered).
    pub(crate) fn stores(&self) -> bool {
        matches!(self.kind, SinkKind::Files { .. }) || self.image.is_some()
    }

    /// Appends one whole page (`XLOG_BLCKSZ` bytes) at position `page_start` to the pending
    /// run; writes the run first if it is not contiguous or crosses into another segment.
    pub(crate) fn add_page(
        &mut self,
        page_start: u64,
        words: impl Iterator<Item = u64>,
    ) -> Result<(), WalError> {
        let contiguous = self.pending_start + self.pending.len() as u64 == page_start;
        let same_seg = self.pending_start / WAL_SEG_SIZE == page_start / WAL_SEG_SIZE;
        if !self.pending.is_empty() && (!contiguous || !same_seg) {
            self.write_pending()?;
        }
        if self.pending.is_empty() {
            self.pending_start = page_start;
        }
        for w in words {
            self.pending.extend_from_slice(&w.to_le_bytes());
        }
        debug_assert_eq!(self.pending.len() as u64 % XLOG_BLCKSZ, 0);
        Ok(())
    }

    /// Writes the pending run (`write` into its segment file and/or the memory image). A
    /// segment that the WAL moves past is synced when the next one is opened.
    pub(crate) fn write_pending(&mut self) -> Result<(), WalError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let start = self.pending_start;
        let end = start + self.pending.len() as u64;
        if let Some(img) = &mut self.image {
            let (s, e) = ((start - self.image_start) as usize, (end - self.image_start) as usize);
            if img.len() < e {
                img.resize(e, 0);
            }
            img[s..e].copy_from_slice(&self.pending);
        }
        if let SinkKind::Files { dir, open } = &mut self.kind {
            let _scope = WaitEventScope::new(WaitEvent::WAL_WRITE);
            let segno = start / WAL_SEG_SIZE;
            let seg = open_segment(dir, open, segno)?;
            seg.file
                .seek(SeekFrom::Start(start % WAL_SEG_SIZE))
                .and_then(|_| seg.file.write_all(&self.pending))
                .map_err(|e| WalError::io(&seg.path, "write", e))?;
        }
        self.pending.clear();
        Ok(())
    }

    /// Makes everything written durable: `fdatasync` of the open segment, or the modelled
    /// sleep, or nothing. Returns true if a flush was issued.
    pub(crate) fn flush(&mut self) -> Result<bool, WalError> {
        match &mut self.kind {
            SinkKind::Files { open, .. } => {
                if let Some(seg) = open {
                    let _scope = WaitEventScope::new(WaitEvent::WAL_SYNC);
                    seg.file.sync_data().map_err(|e| WalError::io(&seg.path, "fsync", e))?;
                }
                Ok(true)
            }
            SinkKind::Modelled { flush_delay } => {
                if !flush_delay.is_zero() {
                    let _scope = WaitEventScope::new(WaitEvent::WAL_SYNC);
                    crate::sync::sleep(*flush_delay);
                }
                Ok(true)
            }
            SinkKind::Memory => Ok(false),
        }
    }
}

/// Opens (creating and sizing it if needed) the segment `segno`, reusing the open one.
fn open_segment<'a>(
    dir: &Path,
    open: &'a mut Option<OpenSegment>,
    segno: u64,
) -> Result<&'a mut OpenSegment, WalError> {
    if open.as_ref().is_some_and(|s| s.segno != segno) {
        // Moving on: make the old segment durable before forgetting it, as PostgreSQL does
        // when it finishes a segment.
        if let Some(old) = open.take() {
            old.file.sync_data().map_err(|e| WalError::io(&old.path, "fsync", e))?;
        }
    }
    if open.is_none() {
        let path = dir.join(segment_file_name(segno));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| WalError::io(&path, "open", e))?;
        let len = file.metadata().map_err(|e| WalError::io(&path, "stat", e))?.len();
        if len < WAL_SEG_SIZE {
            file.set_len(WAL_SEG_SIZE).map_err(|e| WalError::io(&path, "extend", e))?;
        }
        *open = Some(OpenSegment { segno, file, path });
    }
    Ok(open.as_mut().expect("*open holds this segment: it already did, or it was opened just above"))
}

/// Reads one page of a segment directory; `Ok(None)` if the segment file does not exist or is
/// too short.
pub(crate) fn read_page_from_dir(
    dir: &Path,
    cache: &mut Option<(u64, File, PathBuf)>,
    page_start: u64,
    buf: &mut [u8],
) -> Result<bool, WalError> {
    let segno = page_start / WAL_SEG_SIZE;
    if cache.as_ref().is_none_or(|c| c.0 != segno) {
        let path = dir.join(segment_file_name(segno));
        match File::open(&path) {
            Ok(f) => *cache = Some((segno, f, path)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                *cache = None;
                return Ok(false);
            }
            Err(e) => return Err(WalError::io(&path, "open", e)),
        }
    }
    let (_, f, path) =
        cache.as_mut().expect("the cache holds this segment: it already did, or it was opened just above");
    f.seek(SeekFrom::Start(page_start % WAL_SEG_SIZE))
        .map_err(|e| WalError::io(path.as_path(), "seek", e))?;
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => return Ok(false),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(WalError::io(path.as_path(), "read", e)),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_follow_postgres() {
        assert_eq!(segment_file_name(0), "000000010000000000000000");
        assert_eq!(segment_file_name(1), "000000010000000000000001");
        assert_eq!(segment_file_name(256), "000000010000000100000000");
        for segno in [0, 1, 255, 256, 257, 0x1234_5678, 1 << 32] {
            assert_eq!(parse_segment_file_name(&segment_file_name(segno)), Some(segno));
        }
        for bad in [
            "00000001000000000000000",   // 23 digits
            "0000000100000000000000000", // 25 digits
            "000000020000000000000000",  // timeline 2
            "000000010000000000000100",  // low half past 255
            "00000001000000000000000a",  // lower case
            "00000001000000000000000G",
        ] {
            assert_eq!(parse_segment_file_name(bad), None, "{bad}");
        }
    }
}
