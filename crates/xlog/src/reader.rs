//! Reading WAL back: walks records from a position, checks page headers, continuation
//! headers, CRCs and back-links, and stops cleanly at the first record that is not valid
//! (`XLogReadRecord` / `XLogReaderValidatePageHeader` / `ValidXLogRecordHeader` /
//! `ValidXLogRecord` in `src/backend/access/transam/xlogreader.c`, 9.5+).
//!
//! The end of WAL is found exactly as recovery finds it: a record whose length is zero (an
//! unwritten part of a zeroed page), a page that is missing or was never written, or a record
//! that fails a check (torn by a crash in the middle of a write). Each stop is a
//! [`ReadEnd`]; only I/O failures are errors.

use std::fs::File;
use std::path::{Path, PathBuf};

use lockstack_common::TransactionId;

use crate::config::WalError;
use crate::ptr::{XLOG_BLCKSZ, XLogRecPtr, maxalign, page_header_size};
use crate::record::{
    MAX_RECORD_PAYLOAD, PageHeader, PageHeaderError, RECORD_HEADER_SIZE, RecordHeader,
    XLP_FIRST_IS_CONTRECORD,
};
use crate::sink::{read_page_from_dir, wal_files_in};

/// Where a reader gets pages from.
pub trait PageSource {
    /// Fills `buf` (exactly [`XLOG_BLCKSZ`] bytes) with the page starting at `page_start`;
    /// returns `Ok(false)` if there is no such page (end of the available WAL).
    ///
    /// # Errors
    /// [`WalError::Io`] when reading fails.
    fn read_page(&mut self, page_start: XLogRecPtr, buf: &mut [u8]) -> Result<bool, WalError>;
}

impl<S: PageSource + ?Sized> PageSource for Box<S> {
    fn read_page(&mut self, page_start: XLogRecPtr, buf: &mut [u8]) -> Result<bool, WalError> {
        (**self).read_page(page_start, buf)
    }
}

/// Pages from the segment files of a directory (`pg_wal`).
#[derive(Debug)]
pub struct SegmentDir {
    dir: PathBuf,
    cache: Option<(u64, File, PathBuf)>,
}

impl SegmentDir {
    /// Reads the segments in `dir` (opened lazily, one at a time).
    pub fn new(dir: &Path) -> SegmentDir {
        SegmentDir { dir: dir.to_path_buf(), cache: None }
    }

    /// The numbers of the segment files in the directory, ascending (names this crate writes,
    /// [`crate::segment_file_name`]; other files are ignored). An empty or missing directory
    /// has none.
    ///
    /// A log opened with [`crate::WalConfig::start_segment`] `s` begins at position
    /// `s * WAL_SEG_SIZE`; to read one that starts at the first segment present, pass
    /// `XLogRecPtr(first * WAL_SEG_SIZE)` to [`WalReader::new`]. One log never continues
    /// into the next one started after it (the old log's tail is zeros, so a reader stops
    /// there): read each from its own start.
    ///
    /// Every position ever written lies at or below `(last + 1) * WAL_SEG_SIZE`, so `last + 1`
    /// keeps new positions above old ones even when the end of WAL is unknown (after a
    /// crash). When the end is known, prefer [`crate::Wal::start_segment_after`]: if the old
    /// log ended exactly at a segment boundary, `last + 1` would put the new log's first
    /// record where a reader of the old log looks for its next one.
    ///
    /// # Errors
    /// [`WalError::Io`] if the directory exists but cannot be listed.
    pub fn segments(&self) -> Result<Vec<u64>, WalError> {
        if !self.dir.exists() {
            return Ok(Vec::new());
        }
        let mut segs: Vec<u64> = wal_files_in(&self.dir)?.into_iter().filter_map(|(_, s)| s).collect();
        segs.sort_unstable();
        Ok(segs)
    }
}

impl PageSource for SegmentDir {
    fn read_page(&mut self, page_start: XLogRecPtr, buf: &mut [u8]) -> Result<bool, WalError> {
        read_page_from_dir(&self.dir, &mut self.cache, page_start.0, buf)
    }
}

/// Pages from a byte image of the log (byte `i` = position [`start`](Self::start) `+ i`).
#[derive(Debug, Clone)]
pub struct MemoryImage {
    start: u64,
    bytes: Vec<u8>,
}

impl MemoryImage {
    /// An image of the log from position 0; pages beyond its end do not exist.
    pub fn new(bytes: Vec<u8>) -> MemoryImage {
        MemoryImage { start: 0, bytes }
    }

    /// An image whose first byte is position `start` (a log opened with
    /// [`crate::WalConfig::start_segment`] > 0 keeps no bytes below its first segment); pages
    /// before `start` or beyond the end do not exist.
    ///
    /// # Panics
    /// If `start` is not a multiple of [`XLOG_BLCKSZ`] (8192 bytes).
    pub fn starting_at(start: XLogRecPtr, bytes: Vec<u8>) -> MemoryImage {
        assert_eq!(start.page_offset(), 0, "memory image must start at a page boundary, not {start}");
        MemoryImage { start: start.0, bytes }
    }

    /// Position of the image's first byte.
    pub fn start(&self) -> XLogRecPtr {
        XLogRecPtr(self.start)
    }

    /// The bytes (to damage them in tests, or to save them); byte `i` is position
    /// [`start`](Self::start) `+ i`.
    pub fn bytes_mut(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }
}

impl PageSource for MemoryImage {
    fn read_page(&mut self, page_start: XLogRecPtr, buf: &mut [u8]) -> Result<bool, WalError> {
        let Some(s) = page_start.0.checked_sub(self.start) else { return Ok(false) };
        let s = s as usize;
        let e = s + XLOG_BLCKSZ as usize;
        if e > self.bytes.len() {
            return Ok(false);
        }
        buf.copy_from_slice(&self.bytes[s..e]);
        Ok(true)
    }
}

/// A record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRecord {
    /// Where the record starts.
    pub start: XLogRecPtr,
    /// Where the next record starts (or the page start before it): the end position
    /// [`crate::WalBackend::insert`] returned.
    pub end: XLogRecPtr,
    /// `xl_xid`.
    pub xid: TransactionId,
    /// `xl_prev`: start of the previous record (invalid for the first record of the log).
    pub prev: XLogRecPtr,
    /// `xl_rmid`.
    pub rmid: u8,
    /// `xl_info`.
    pub info: u8,
    /// The payload.
    pub data: Vec<u8>,
}

/// Why a reader stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A zero length where a record should start, or a page never written: the normal end.
    EndOfWal,
    /// The source has no page there.
    MissingPage,
    /// A page header is wrong (magic, timeline, address, flags).
    BadPageHeader(PageHeaderError),
    /// A page that should continue the record does not (flag or remaining length wrong), or
    /// one that should start a record continues another.
    BadContinuation(String),
    /// The length field is impossible.
    BadLength(u32),
    /// `xl_prev` is not the start of the record read before it.
    BadPrevLink {
        /// The previous record's start.
        expected: XLogRecPtr,
        /// What the record says.
        found: XLogRecPtr,
    },
    /// The CRC does not match the contents.
    BadCrc {
        /// Stored CRC.
        stored: u32,
        /// CRC of what was read.
        computed: u32,
    },
}

impl StopReason {
    /// True for the normal ends ([`StopReason::EndOfWal`], [`StopReason::MissingPage`]);
    /// false when a record or page failed a check (a torn or corrupt record).
    pub fn is_clean_end(&self) -> bool {
        matches!(self, StopReason::EndOfWal | StopReason::MissingPage)
    }
}

/// Where and why a reader stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadEnd {
    /// The start of the record that could not be read.
    pub at: XLogRecPtr,
    /// Why.
    pub reason: StopReason,
}

/// Walks records forward from a start position (see the module documentation).
#[derive(Debug)]
pub struct WalReader<S: PageSource> {
    source: S,
    next: u64,
    expected_prev: Option<XLogRecPtr>,
    page: Vec<u8>,
    loaded: Option<u64>,
    end: Option<ReadEnd>,
}

impl<S: PageSource> WalReader<S> {
    /// A reader whose first record starts at `start`. `start` may also be the first byte of a
    /// page, such as a segment start (`segno * WAL_SEG_SIZE`, the start of a log opened with
    /// [`crate::WalConfig::start_segment`]): the first record is then the one right after
    /// that page's header. The first record's back-link is not checked unless
    /// [`expect_prev`](Self::expect_prev) is called.
    pub fn new(source: S, start: XLogRecPtr) -> WalReader<S> {
        WalReader {
            source,
            next: start.0,
            expected_prev: None,
            page: vec![0; XLOG_BLCKSZ as usize],
            loaded: None,
            end: None,
        }
    }

    /// Checks that the first record's back-link is `prev` (use [`XLogRecPtr::INVALID`] when
    /// starting at the beginning of the log).
    pub fn expect_prev(mut self, prev: XLogRecPtr) -> WalReader<S> {
        self.expected_prev = Some(prev);
        self
    }

    /// Why and where reading stopped, once [`next_record`](Self::next_record) returned
    /// `Ok(None)`.
    pub fn end(&self) -> Option<&ReadEnd> {
        self.end.as_ref()
    }

    /// Where the next record would start.
    pub fn position(&self) -> XLogRecPtr {
        XLogRecPtr(self.next)
    }

    /// Loads and checks the page at `page_start`; `Err(reason)` if it is missing or bad.
    fn load(&mut self, page_start: u64) -> Result<Result<PageHeader, StopReason>, WalError> {
        if self.loaded != Some(page_start) {
            self.loaded = None;
            if !self.source.read_page(XLogRecPtr(page_start), &mut self.page)? {
                return Ok(Err(StopReason::MissingPage));
            }
            self.loaded = Some(page_start);
        }
        let h = PageHeader::parse(&self.page);
        if h.magic == 0 && h.pageaddr == 0 {
            return Ok(Err(StopReason::EndOfWal));
        }
        Ok(h.check(page_start).map(|()| h).map_err(StopReason::BadPageHeader))
    }

    /// Reads the bytes of the record starting at `start`; returns them and the position just
    /// after the last one.
    fn read_bytes(&mut self, start: u64) -> Result<Result<(Vec<u8>, u64), StopReason>, WalError> {
        let mut out: Vec<u8> = Vec::with_capacity(RECORD_HEADER_SIZE);
        let mut need = RECORD_HEADER_SIZE;
        let mut total: Option<u32> = None;
        let mut pos = start;
        loop {
            let page = pos - pos % XLOG_BLCKSZ;
            if let Err(r) = self.load(page)? {
                return Ok(Err(r));
            }
            let off = (pos - page) as usize;
            let take = (XLOG_BLCKSZ as usize - off).min(need - out.len());
            out.extend_from_slice(&self.page[off..off + take]);
            pos += take as u64;
            if total.is_none() && out.len() >= 4 {
                let t = u32::from_le_bytes([out[0], out[1], out[2], out[3]]);
                if t == 0 {
                    return Ok(Err(StopReason::EndOfWal));
                }
                if (t as usize) < RECORD_HEADER_SIZE || t as usize > RECORD_HEADER_SIZE + MAX_RECORD_PAYLOAD {
                    return Ok(Err(StopReason::BadLength(t)));
                }
                total = Some(t);
                need = t as usize;
            }
            if out.len() == need {
                return Ok(Ok((out, pos)));
            }
            if !pos.is_multiple_of(XLOG_BLCKSZ) {
                continue;
            }
            // Continue on the next page, which must say it continues this record.
            let h = match self.load(pos)? {
                Ok(h) => h,
                Err(StopReason::EndOfWal | StopReason::MissingPage) => {
                    return Ok(Err(StopReason::BadContinuation(
                        "record continues onto a page not written".into(),
                    )));
                }
                Err(r) => return Ok(Err(r)),
            };
            let remaining = need - out.len();
            if h.info & XLP_FIRST_IS_CONTRECORD == 0 || h.rem_len as usize != remaining {
                return Ok(Err(StopReason::BadContinuation(format!(
                    "page {} has flags {:#x} and {} remaining bytes, expected a continuation of {remaining}",
                    XLogRecPtr(pos),
                    h.info,
                    h.rem_len
                ))));
            }
            pos += page_header_size(pos);
        }
    }

    /// The next record, or `Ok(None)` at the end of valid WAL (see [`end`](Self::end)).
    ///
    /// # Errors
    /// [`WalError::Io`] if the source fails.
    pub fn next_record(&mut self) -> Result<Option<DecodedRecord>, WalError> {
        if self.end.is_some() {
            return Ok(None);
        }
        let mut start = self.next;
        let page = start - start % XLOG_BLCKSZ;
        let hsz = page_header_size(page);
        if start - page <= hsz {
            // A record starting right after a page header: the page must not begin with the
            // rest of another record.
            start = page + hsz;
            match self.load(page)? {
                Err(r) => return Ok(self.stop(start, r)),
                Ok(h) if h.info & XLP_FIRST_IS_CONTRECORD != 0 => {
                    let r = StopReason::BadContinuation("record start inside a continued record".into());
                    return Ok(self.stop(start, r));
                }
                Ok(_) => {}
            }
        }
        let (bytes, after) = match self.read_bytes(start)? {
            Ok(v) => v,
            Err(r) => return Ok(self.stop(start, r)),
        };
        let mut hb = [0u8; RECORD_HEADER_SIZE];
        hb.copy_from_slice(&bytes[..RECORD_HEADER_SIZE]);
        let hdr = RecordHeader::parse(&hb);
        let payload = &bytes[RECORD_HEADER_SIZE..];
        if let Some(expected) = self.expected_prev
            && hdr.prev != expected.0
        {
            return Ok(self.stop(start, StopReason::BadPrevLink { expected, found: XLogRecPtr(hdr.prev) }));
        }
        let computed = hdr.compute_crc(crc32c::crc32c(payload));
        if computed != hdr.crc {
            return Ok(self.stop(start, StopReason::BadCrc { stored: hdr.crc, computed }));
        }
        let end = maxalign(after);
        self.next = end;
        self.expected_prev = Some(XLogRecPtr(start));
        Ok(Some(DecodedRecord {
            start: XLogRecPtr(start),
            end: XLogRecPtr(end),
            xid: TransactionId(hdr.xid),
            prev: XLogRecPtr(hdr.prev),
            rmid: hdr.rmid,
            info: hdr.info,
            data: payload.to_vec(),
        }))
    }

    fn stop(&mut self, at: u64, reason: StopReason) -> Option<DecodedRecord> {
        self.end = Some(ReadEnd { at: XLogRecPtr(at), reason });
        None
    }
}

impl<S: PageSource> Iterator for WalReader<S> {
    type Item = Result<DecodedRecord, WalError>;

    /// [`next_record`](WalReader::next_record) as an iterator; after an I/O error it ends.
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_record() {
            Ok(Some(r)) => Some(Ok(r)),
            Ok(None) => None,
            Err(e) => {
                self.end = Some(ReadEnd { at: XLogRecPtr(self.next), reason: StopReason::MissingPage });
                Some(Err(e))
            }
        }
    }
}
