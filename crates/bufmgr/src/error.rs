//! The buffer manager's errors ([`BufferError`]) and the error type its callbacks return
//! ([`HookError`]). Touches no lock.

use crate::buffer::Buffer;
use crate::smgr::SmgrError;
use crate::tag::{BufferTag, ForkNumber};

/// Errors of the buffer manager.
#[derive(Debug, thiserror::Error)]
pub enum BufferError {
    /// Every buffer is pinned, so none can be replaced (PostgreSQL's `ERROR: no unpinned
    /// buffers available`). Raised by the victim search after the clock hand passed every
    /// buffer pinned and `ALL_PINNED_RECHECKS` (freelist.rs) scans of every buffer found them pinned
    /// too; the pool never waits for a pin to go away.
    #[error("no unpinned buffers available")]
    NoUnpinnedBuffers,
    /// A read of a block at or past the end of its fork.
    #[error("could not read {tag}: beyond the end of the fork ({nblocks} blocks)")]
    BeyondEof {
        /// The page asked for.
        tag: BufferTag,
        /// The fork's size in blocks.
        nblocks: u32,
    },
    /// The storage manager failed (the message names the file).
    #[error("{0}")]
    Io(#[from] SmgrError),
    /// The WAL-before-data hook failed to flush WAL up to a page's LSN; the page was not
    /// written and stays dirty.
    #[error("could not flush WAL up to {lsn:#X} before writing a page: {message}")]
    WalFlush {
        /// The LSN that had to be flushed.
        lsn: u64,
        /// The hook's message.
        message: String,
    },
    /// A cleanup lock was requested by a backend holding the buffer pinned other than exactly
    /// once (PostgreSQL: "incorrect local pin count").
    #[error("incorrect local pin count: {count} on buffer {}", buffer.id())]
    IncorrectLocalPinCount {
        /// The buffer.
        buffer: Buffer,
        /// This backend's pin count.
        count: u32,
    },
    /// Another backend already waits for this buffer's pin count to drop (PostgreSQL:
    /// "multiple backends attempting to wait for pincount 1"; one waiter per buffer).
    #[error("multiple backends attempting to wait for pincount 1 on buffer {}", buffer.id())]
    MultiplePinWaiters {
        /// The buffer.
        buffer: Buffer,
    },
    /// A bad [`crate::config::BufferPoolConfig`].
    #[error("{0}")]
    Config(String),
    /// A page read from storage failed verification ([`crate::page::verify`], then the
    /// pool's page verifier, see `BufferPool::set_page_verifier`): PostgreSQL's `ERROR:
    /// invalid page in block 5 of relation base/16384/16385` from `ReadBuffer`. The buffer is
    /// left invalid, so the next read tries the file again.
    #[error("invalid page in block {} of relation base/{}{}: {reason}", tag.block, tag.rel, fork_suffix(*tag))]
    InvalidPage {
        /// The page.
        tag: BufferTag,
        /// What is wrong with it.
        reason: String,
    },
}

/// `_vm`, `_fsm`, ... after a relation's file name for a fork other than the main one (as
/// PostgreSQL's `relpath`), empty for the main fork.
fn fork_suffix(tag: BufferTag) -> String {
    if tag.fork == ForkNumber::Main { String::new() } else { format!("_{}", tag.fork.name()) }
}

/// What a `WalFlushHook` (pool.rs) or a [`crate::page::PageVerifier`] returns on failure: the
/// caller's own error (the engine's WAL or table error), kept as its message in [`BufferError`].
pub type HookError = Box<dyn std::error::Error + Send + Sync>;
