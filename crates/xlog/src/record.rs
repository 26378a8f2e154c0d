//! The on-disk shapes: record header and page headers, little-endian.
//!
//! Record header, 24 bytes, followed by the payload; the record then occupies
//! `maxalign(total_len)` bytes of WAL (PostgreSQL's `XLogRecord`, 9.5+ field order,
//! `src/include/access/xlogrecord.h`):
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | `total_len`: header + payload, bytes |
//! | 4..8 | `xid` |
//! | 8..16 | `prev`: start of the previous record |
//! | 16 | `info` |
//! | 17 | `rmid`: resource manager |
//! | 18..20 | zero |
//! | 20..24 | `crc`: CRC-32C of the payload, then of header bytes 0..20 |
//!
//! Page header, 24 bytes (40 on the first page of a segment), as `XLogPageHeaderData` /
//! `XLogLongPageHeaderData` (`src/include/access/xlog_internal.h`): magic (2), info flags (2),
//! timeline (4), page address (8), `rem_len` (4, the bytes of a record continued from the
//! previous page), padding (4); the long form adds system id (8), segment size (4) and page
//! size (4).

use crate::ptr::{SHORT_PAGE_HEADER, WAL_SEG_SIZE, XLOG_BLCKSZ, page_header_size};

/// Size of the record header in bytes (`SizeOfXLogRecord`, 24).
pub const RECORD_HEADER_SIZE: usize = 24;
/// Largest payload [`crate::WalBackend::insert`] accepts, in bytes (64 MiB; PostgreSQL's limit
/// is about 1 GiB, `XLogRecordMaxSize`).
pub const MAX_RECORD_PAYLOAD: usize = 64 * 1024 * 1024;
/// lockstack's page magic number (PostgreSQL's `XLOG_PAGE_MAGIC` changes with every release
/// whose format changes; ours is our own, so no PostgreSQL tool will mistake our files).
pub(crate) const PAGE_MAGIC: u16 = 0x4C53;
/// Page flag: the page starts with the rest of a record begun on an earlier page
/// (`XLP_FIRST_IS_CONTRECORD`).
pub(crate) const XLP_FIRST_IS_CONTRECORD: u16 = 0x0001;
/// Page flag: the page has the long header (`XLP_LONG_HEADER`).
pub(crate) const XLP_LONG_HEADER: u16 = 0x0002;
/// Timeline written in every page header (lockstack has one timeline).
pub(crate) const TIMELINE: u32 = 1;
/// System identifier written in long page headers.
pub(crate) const SYSTEM_ID: u64 = 0x6C6F_636B_7374_6B21;

/// The header fields of one record.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub(crate) total_len: u32,
    pub(crate) xid: u32,
    pub(crate) prev: u64,
    pub(crate) info: u8,
    pub(crate) rmid: u8,
    pub(crate) crc: u32,
}

impl RecordHeader {
    /// The 20 bytes covered by the CRC (everything before the CRC field).
    pub(crate) fn crc_bytes(&self) -> [u8; 20] {
        let mut b = [0u8; 20];
        b[0..4].copy_from_slice(&self.total_len.to_le_bytes());
        b[4..8].copy_from_slice(&self.xid.to_le_bytes());
        b[8..16].copy_from_slice(&self.prev.to_le_bytes());
        b[16] = self.info;
        b[17] = self.rmid;
        b
    }

    /// The header as its three little-endian words.
    pub(crate) fn to_words(self) -> [u64; 3] {
        let w0 = u64::from(self.total_len) | (u64::from(self.xid) << 32);
        let w2 = u64::from(self.info) | (u64::from(self.rmid) << 8) | (u64::from(self.crc) << 32);
        [w0, self.prev, w2]
    }

    /// Parses 24 header bytes.
    pub(crate) fn parse(b: &[u8; RECORD_HEADER_SIZE]) -> RecordHeader {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut prev = [0u8; 8];
        prev.copy_from_slice(&b[8..16]);
        RecordHeader {
            total_len: u32_at(0),
            xid: u32_at(4),
            prev: u64::from_le_bytes(prev),
            info: b[16],
            rmid: b[17],
            crc: u32_at(20),
        }
    }

    /// CRC-32C of `payload` followed by the header's first 20 bytes.
    pub(crate) fn compute_crc(&self, payload_crc: u32) -> u32 {
        crc32c::crc32c_append(payload_crc, &self.crc_bytes())
    }
}

/// The words of a freshly initialised page header (flags: long header at a segment start,
/// nothing else; `rem_len` 0). Returns the words and how many there are (3 or 5).
pub(crate) fn page_header_words(page_start: u64) -> ([u64; 5], usize) {
    let long = page_start.is_multiple_of(WAL_SEG_SIZE);
    let info = if long { XLP_LONG_HEADER } else { 0 };
    let w0 = u64::from(PAGE_MAGIC) | (u64::from(info) << 16) | (u64::from(TIMELINE) << 32);
    let mut w = [w0, page_start, 0, 0, 0];
    if long {
        w[3] = SYSTEM_ID;
        w[4] = (WAL_SEG_SIZE & 0xFFFF_FFFF) | (XLOG_BLCKSZ << 32);
        (w, 5)
    } else {
        (w, 3)
    }
}

/// Word 0 of a page header whose page begins with a continued record.
pub(crate) fn contrecord_word0(page_start: u64) -> u64 {
    let long = page_start.is_multiple_of(WAL_SEG_SIZE);
    let info = XLP_FIRST_IS_CONTRECORD | if long { XLP_LONG_HEADER } else { 0 };
    u64::from(PAGE_MAGIC) | (u64::from(info) << 16) | (u64::from(TIMELINE) << 32)
}

/// A parsed page header.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageHeader {
    pub(crate) magic: u16,
    pub(crate) info: u16,
    pub(crate) tli: u32,
    pub(crate) pageaddr: u64,
    pub(crate) rem_len: u32,
}

impl PageHeader {
    /// Parses the header at the start of `page` (at least 24 bytes).
    pub(crate) fn parse(page: &[u8]) -> PageHeader {
        debug_assert!(page.len() >= SHORT_PAGE_HEADER as usize);
        let mut addr = [0u8; 8];
        addr.copy_from_slice(&page[8..16]);
        PageHeader {
            magic: u16::from_le_bytes([page[0], page[1]]),
            info: u16::from_le_bytes([page[2], page[3]]),
            tli: u32::from_le_bytes([page[4], page[5], page[6], page[7]]),
            pageaddr: u64::from_le_bytes(addr),
            rem_len: u32::from_le_bytes([page[16], page[17], page[18], page[19]]),
        }
    }

    /// Checks magic, timeline, address and the long-header flag against the page's position.
    ///
    /// # Errors
    /// The first mismatch, as a [`PageHeaderError`].
    pub(crate) fn check(&self, page_start: u64) -> Result<(), PageHeaderError> {
        if self.magic != PAGE_MAGIC {
            return Err(PageHeaderError::BadMagic(self.magic));
        }
        if self.tli != TIMELINE {
            return Err(PageHeaderError::UnexpectedTimeline(self.tli));
        }
        if self.pageaddr != page_start {
            return Err(PageHeaderError::WrongAddress { found: self.pageaddr, expected: page_start });
        }
        let want_long = page_header_size(page_start) != SHORT_PAGE_HEADER;
        if (self.info & XLP_LONG_HEADER != 0) != want_long {
            return Err(PageHeaderError::LongHeaderFlag);
        }
        Ok(())
    }
}

/// Why a WAL page header does not belong at its position (the reader's
/// [`crate::StopReason::BadPageHeader`]); displays as one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageHeaderError {
    /// The magic number is not lockstack's page magic (the one found).
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    /// The timeline is not lockstack's single timeline (the one found).
    #[error("unexpected timeline {0}")]
    UnexpectedTimeline(u32),
    /// The page's stated address differs from where it was read, bytes from the start of WAL.
    #[error("page address {found:#x} instead of {expected:#x}")]
    WrongAddress {
        /// The address in the header.
        found: u64,
        /// The page's position.
        expected: u64,
    },
    /// The long-header flag is set on a page that is not a segment's first, or clear on one
    /// that is.
    #[error("long-header flag does not match the page position")]
    LongHeaderFlag,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_words_and_bytes_agree() {
        let h = RecordHeader {
            total_len: 124,
            xid: 77,
            prev: 0x12_3456_789A,
            info: 0x10,
            rmid: 10,
            crc: 0xDEAD_BEEF,
        };
        let words = h.to_words();
        let mut bytes = [0u8; 24];
        for (i, w) in words.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        assert_eq!(RecordHeader::parse(&bytes), h);
        assert_eq!(&bytes[..20], &h.crc_bytes());
    }

    #[test]
    fn page_headers_parse_back() {
        for (start, n) in [(0u64, 5usize), (8192, 3), (WAL_SEG_SIZE, 5)] {
            let (w, len) = page_header_words(start);
            assert_eq!(len, n);
            let mut bytes = vec![0u8; 40];
            for (i, x) in w.iter().enumerate() {
                bytes[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            let h = PageHeader::parse(&bytes);
            assert_eq!(h.check(start), Ok(()));
            assert!(h.check(start + 2 * 8192).is_err());
            assert_eq!(h.info & XLP_FIRST_IS_CONTRECORD, 0);
            let c = contrecord_word0(start);
            assert_eq!(c & 0xFFFF, u64::from(PAGE_MAGIC));
            assert_eq!((c >> 16) as u16 & XLP_FIRST_IS_CONTRECORD, XLP_FIRST_IS_CONTRECORD);
        }
    }
}
