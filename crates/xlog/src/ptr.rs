//! WAL positions, page and segment geometry, and the "usable byte position" arithmetic.
//!
//! A WAL position ([`XLogRecPtr`]) is a byte offset into one endless log, cut into 16 MiB
//! segments of 8 KiB pages. Every page starts with a header: the first page of a segment with a
//! long one ([`LONG_PAGE_HEADER`] = 40 bytes), the others with a short one
//! ([`SHORT_PAGE_HEADER`] = 24 bytes), the sizes PostgreSQL has on 64-bit machines
//! (`SizeOfXLogLongPHD` / `SizeOfXLogShortPHD`, `src/include/access/xlog_internal.h`).
//!
//! Since 9.4 PostgreSQL reserves space for a record by bumping a counter of *usable* bytes, the
//! bytes that are not page headers, so that reservation is one addition under a spinlock and
//! the conversion to a real position happens outside it (`XLogBytePosToRecPtr`,
//! `XLogBytePosToEndRecPtr`, `XLogRecPtrToBytePos` in `src/backend/access/transam/xlog.c`).
//! [`bytepos_to_recptr`], [`bytepos_to_end_recptr`] and [`recptr_to_bytepos`] are that mapping.

use std::fmt;

/// Size of a WAL page in bytes (`XLOG_BLCKSZ`, 8192 in every release).
pub const XLOG_BLCKSZ: u64 = 8192;
/// Size of a WAL segment in bytes (16 MiB, PostgreSQL's default; compile-time through 10).
pub const WAL_SEG_SIZE: u64 = 16 * 1024 * 1024;
/// Size of the header of a page that does not start a segment, in bytes (`SizeOfXLogShortPHD`
/// after MAXALIGN on 64-bit machines).
pub const SHORT_PAGE_HEADER: u64 = 24;
/// Size of the header of the first page of a segment, in bytes (`SizeOfXLogLongPHD`).
pub const LONG_PAGE_HEADER: u64 = 40;
/// Alignment of record starts and of reserved sizes, in bytes (`MAXALIGN` on 64-bit machines).
pub const MAXALIGN: u64 = 8;
/// Payload bytes in a page with a short header.
pub const USABLE_BYTES_IN_PAGE: u64 = XLOG_BLCKSZ - SHORT_PAGE_HEADER;
/// Payload bytes in a segment (every page's payload, minus the long header's extra 16 bytes).
pub const USABLE_BYTES_IN_SEGMENT: u64 =
    (WAL_SEG_SIZE / XLOG_BLCKSZ) * USABLE_BYTES_IN_PAGE - (LONG_PAGE_HEADER - SHORT_PAGE_HEADER);
/// 64-bit words in a WAL page (the WAL buffers store pages as words).
pub const WORDS_PER_PAGE: usize = (XLOG_BLCKSZ / 8) as usize;

/// A WAL position: a byte offset into the log (`XLogRecPtr`, a `uint64` since 9.3; two 32-bit
/// halves before).
///
/// `XLogRecPtr(0)` is [`XLogRecPtr::INVALID`]; no record starts there, because the first
/// page's long header occupies bytes 0..40. Positions print as PostgreSQL prints them,
/// `%X/%X` of the high and low 32 bits (`0/28`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct XLogRecPtr(pub u64);

impl XLogRecPtr {
    /// `InvalidXLogRecPtr` (0).
    pub const INVALID: XLogRecPtr = XLogRecPtr(0);

    /// True unless this is [`XLogRecPtr::INVALID`].
    #[inline]
    pub fn is_valid(self) -> bool {
        self.0 != 0
    }

    /// Start of the page containing this position.
    #[inline]
    pub fn page_start(self) -> XLogRecPtr {
        XLogRecPtr(self.0 - self.0 % XLOG_BLCKSZ)
    }

    /// Offset within its page, in bytes (0..8192).
    #[inline]
    pub fn page_offset(self) -> u64 {
        self.0 % XLOG_BLCKSZ
    }

    /// Number of the segment containing this position (`XLByteToSeg`).
    #[inline]
    pub fn segment(self) -> u64 {
        self.0 / WAL_SEG_SIZE
    }

    /// Offset within its segment, in bytes (`XLogSegmentOffset`).
    #[inline]
    pub fn segment_offset(self) -> u64 {
        self.0 % WAL_SEG_SIZE
    }
}

impl fmt::Display for XLogRecPtr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:X}/{:X}", self.0 >> 32, self.0 as u32)
    }
}

/// Size of the header of the page starting at `page_start` (long at a segment start).
#[inline]
pub fn page_header_size(page_start: u64) -> u64 {
    if page_start.is_multiple_of(WAL_SEG_SIZE) { LONG_PAGE_HEADER } else { SHORT_PAGE_HEADER }
}

/// Rounds `n` up to a multiple of [`MAXALIGN`].
#[inline]
pub fn maxalign(n: u64) -> u64 {
    n.div_ceil(MAXALIGN) * MAXALIGN
}

/// The position of usable byte `pos`: where a record reserved at `pos` starts.
///
/// A position that falls exactly at a page boundary maps past that page's header, because a
/// record cannot start inside a header.
#[inline]
pub fn bytepos_to_recptr(pos: u64) -> XLogRecPtr {
    let seg = pos / USABLE_BYTES_IN_SEGMENT;
    let left = pos % USABLE_BYTES_IN_SEGMENT;
    let first_payload = XLOG_BLCKSZ - LONG_PAGE_HEADER;
    let off = if left < first_payload {
        left + LONG_PAGE_HEADER
    } else {
        let rest = left - first_payload;
        let pages = rest / USABLE_BYTES_IN_PAGE + 1;
        pages * XLOG_BLCKSZ + rest % USABLE_BYTES_IN_PAGE + SHORT_PAGE_HEADER
    };
    XLogRecPtr(seg * WAL_SEG_SIZE + off)
}

/// Like [`bytepos_to_recptr`], but a position exactly at a page boundary maps to the page's
/// start: the form used for the *end* of a record, which is where writing and flushing stop.
#[inline]
pub fn bytepos_to_end_recptr(pos: u64) -> XLogRecPtr {
    let seg = pos / USABLE_BYTES_IN_SEGMENT;
    let left = pos % USABLE_BYTES_IN_SEGMENT;
    let first_payload = XLOG_BLCKSZ - LONG_PAGE_HEADER;
    let off = if left == 0 && seg > 0 {
        0
    } else if left <= first_payload {
        if left == first_payload { XLOG_BLCKSZ } else { left + LONG_PAGE_HEADER }
    } else {
        let rest = left - first_payload;
        let pages = rest / USABLE_BYTES_IN_PAGE + 1;
        let in_page = rest % USABLE_BYTES_IN_PAGE;
        if in_page == 0 { pages * XLOG_BLCKSZ } else { pages * XLOG_BLCKSZ + in_page + SHORT_PAGE_HEADER }
    };
    XLogRecPtr(seg * WAL_SEG_SIZE + off)
}

/// The usable byte position of `ptr`, the inverse of both conversions above. A position
/// inside or at the start of a page header maps to the first usable byte after it.
#[inline]
pub fn recptr_to_bytepos(ptr: XLogRecPtr) -> u64 {
    let seg = ptr.segment();
    let off = ptr.segment_offset();
    let page = off / XLOG_BLCKSZ;
    let in_page = off % XLOG_BLCKSZ;
    let base = seg * USABLE_BYTES_IN_SEGMENT;
    if page == 0 {
        base + in_page.max(LONG_PAGE_HEADER) - LONG_PAGE_HEADER
    } else {
        base + (XLOG_BLCKSZ - LONG_PAGE_HEADER)
            + (page - 1) * USABLE_BYTES_IN_PAGE
            + in_page.max(SHORT_PAGE_HEADER)
            - SHORT_PAGE_HEADER
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn first_record_starts_after_the_long_header() {
        assert_eq!(bytepos_to_recptr(0), XLogRecPtr(40));
        assert_eq!(bytepos_to_recptr(8152), XLogRecPtr(8192 + 24));
        assert_eq!(bytepos_to_end_recptr(8152), XLogRecPtr(8192));
        assert_eq!(bytepos_to_end_recptr(8152 + 8168), XLogRecPtr(2 * 8192));
        assert_eq!(bytepos_to_recptr(USABLE_BYTES_IN_SEGMENT), XLogRecPtr(WAL_SEG_SIZE + 40));
        assert_eq!(bytepos_to_end_recptr(USABLE_BYTES_IN_SEGMENT), XLogRecPtr(WAL_SEG_SIZE));
        assert_eq!(bytepos_to_end_recptr(0), XLogRecPtr(40));
        assert_eq!(XLogRecPtr(0x1_0000_0028).to_string(), "1/28");
    }

    proptest! {
        #[test]
        fn conversions_round_trip(pos in 0u64..(1u64 << 40)) {
            let start = bytepos_to_recptr(pos);
            prop_assert_eq!(recptr_to_bytepos(start), pos);
            let end = bytepos_to_end_recptr(pos);
            prop_assert_eq!(recptr_to_bytepos(end), pos);
            // A start is never inside a header; an end is either a start or a page start.
            prop_assert!(start.page_offset() >= page_header_size(start.page_start().0));
            prop_assert!(end == start || (end.page_offset() == 0 && start.0 - end.0 == page_header_size(end.0)));
        }

        #[test]
        fn conversions_are_monotone(a in 0u64..(1u64 << 36), d in 1u64..100_000) {
            prop_assert!(bytepos_to_recptr(a) < bytepos_to_recptr(a + d));
            prop_assert!(bytepos_to_end_recptr(a) < bytepos_to_end_recptr(a + d));
            prop_assert_eq!(bytepos_to_recptr(a + d).0 - bytepos_to_recptr(a).0 >= d, true);
        }
    }
}
