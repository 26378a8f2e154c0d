//! Page checksums (`pd_checksum`, 9.3+ `data_checksums`): computing, storing and checking
//! them, with the block number, or the relation, fork and block, mixed in.
//!
//! Locks touched: none; the storage manager checksums a private copy of the page it writes, and
//! checks the bytes it has just read.

use lockstack_common::Oid;

use crate::tag::ForkNumber;

use super::layout::{PageError, check, get_u16, is_new, put_u16};

/// The stored page checksum (`pd_checksum`, bytes 8..10); 0 on a page never written with
/// checksums on.
pub fn stored_checksum(page: &[u8]) -> u16 {
    check(page);
    get_u16(page, 8)
}

/// The checksum of `page` as block `block` of its fork (`pg_checksum_page`,
/// `src/include/storage/checksum_impl.h`, 9.3+): 16 bits, never 0, computed with
/// `pd_checksum` taken as zero and the block number mixed in, so that a page written at the
/// wrong offset (or swapped with another) fails too.
///
/// A departure from PostgreSQL: the hash is CRC-32C (the `crc32c` crate, the polynomial
/// PostgreSQL's WAL records use) over the page and then the block number's 4 little-endian
/// bytes, folded to 16 bits, instead of PostgreSQL's 32-lane FNV-1a variant; like
/// PostgreSQL's it is reduced modulo 65535 plus one so that 0 means "no checksum".
pub fn checksum(page: &[u8], block: u32) -> u16 {
    check(page);
    let mut crc = crc32c::crc32c(&page[..8]);
    crc = crc32c::crc32c_append(crc, &[0, 0]);
    crc = crc32c::crc32c_append(crc, &page[10..]);
    crc = crc32c::crc32c_append(crc, &block.to_le_bytes());
    ((crc ^ (crc >> 16)) % 65535) as u16 + 1
}

/// Stores [`checksum`]`(page, block)` in `pd_checksum` (`PageSetChecksumInplace`); a new
/// (all-zero) page is left as it is, as PostgreSQL leaves it.
pub fn set_checksum(page: &mut [u8], block: u32) {
    if is_new(page) {
        return;
    }
    let c = checksum(page, block);
    put_u16(page, 8, c);
}

/// Checks `pd_checksum` of a page read as block `block` (the checksum part of
/// `PageIsVerified`): a new page (`pd_upper` 0) passes (its other bytes are checked by
/// [`verify`](crate::page::verify)), any other must carry [`checksum`]`(page, block)`.
///
/// # Errors
/// [`PageError::ChecksumMismatch`], whose message is PostgreSQL's, "page verification failed,
/// calculated checksum C but expected E".
pub fn verify_checksum(page: &[u8], block: u32) -> Result<(), PageError> {
    if is_new(page) {
        return Ok(());
    }
    let (have, want) = (stored_checksum(page), checksum(page, block));
    if have == want { Ok(()) } else { Err(PageError::ChecksumMismatch { calculated: want, stored: have }) }
}

/// The checksum of `page` as block `block` of fork `fork` of relation `rel`: [`checksum`]
/// with the relation's number (4 little-endian bytes) and the fork number (1 byte) hashed in
/// after the block number. [`crate::FileSmgr`] writes and verifies this one, so that a file
/// swapped with another relation's or fork's, or copied over it, fails at its first page.
///
/// A departure from PostgreSQL, whose `pg_checksum_page` mixes in the block number only (so
/// that `CREATE DATABASE` can copy relation files byte for byte); lockstack never copies a
/// relation file, and its relation files carry no other record of which relation they hold.
pub fn relation_checksum(page: &[u8], rel: Oid, fork: ForkNumber, block: u32) -> u16 {
    check(page);
    let mut crc = crc32c::crc32c(&page[..8]);
    crc = crc32c::crc32c_append(crc, &[0, 0]);
    crc = crc32c::crc32c_append(crc, &page[10..]);
    crc = crc32c::crc32c_append(crc, &block.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &rel.0.to_le_bytes());
    crc = crc32c::crc32c_append(crc, &[fork as u8]);
    ((crc ^ (crc >> 16)) % 65535) as u16 + 1
}

/// Stores [`relation_checksum`] in `pd_checksum`; a new (all-zero) page is left as it is.
pub fn set_relation_checksum(page: &mut [u8], rel: Oid, fork: ForkNumber, block: u32) {
    if is_new(page) {
        return;
    }
    let c = relation_checksum(page, rel, fork, block);
    put_u16(page, 8, c);
}

/// [`verify_checksum`] against [`relation_checksum`]: a new page passes, any other must carry
/// the checksum of its relation, fork and block.
///
/// # Errors
/// [`PageError::ChecksumMismatch`], as [`verify_checksum`].
pub fn verify_relation_checksum(
    page: &[u8],
    rel: Oid,
    fork: ForkNumber,
    block: u32,
) -> Result<(), PageError> {
    if is_new(page) {
        return Ok(());
    }
    let (have, want) = (stored_checksum(page), relation_checksum(page, rel, fork, block));
    if have == want { Ok(()) } else { Err(PageError::ChecksumMismatch { calculated: want, stored: have }) }
}
