//! PostgreSQL's write-ahead log, rebuilt for lock experiments: insertion under one
//! `WALInsertLock` (9.2/9.3) or under N insertion locks with a spinlock-protected reservation
//! (9.4+), a ring of WAL buffers, write and flush under `WALWriteLock` with group commit,
//! `commit_delay` / `commit_siblings`, synchronous or asynchronous commit with a WAL writer,
//! CRC-32C-checked records that span pages, and a reader that finds the end of valid WAL.
//!
//! ```
//! use lockstack_common::TransactionId;
//! use lockstack_xlog::{InsertMode, Record, Wal, WalConfig};
//!
//! let wal = Wal::open(WalConfig {
//!     insert_mode: InsertMode::InsertionLocks(8),
//!     keep_in_memory: true,
//!     ..WalConfig::default()
//! })?;
//! let mut backend = wal.attach(lockstack_common::BackendId(0))?;
//! let end = backend.insert(&Record { rmid: 10, info: 0, xid: TransactionId(1000), data: b"hello" })?;
//! backend.commit(end)?; // synchronous commit: flushed when this returns
//! assert!(wal.flushed_upto() >= end);
//!
//! let mut reader = wal.reader(Wal::first_record())?;
//! let rec = reader.next_record()?.expect("one record");
//! assert_eq!((rec.data.as_slice(), rec.end), (&b"hello"[..], end));
//! assert!(reader.next_record()?.is_none());
//! assert!(reader.end().unwrap().reason.is_clean_end());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Layout of the crate:
//!
//! * [`ptr`]: positions ([`XLogRecPtr`]), 8 KiB pages, 16 MiB segments, usable-byte
//!   arithmetic.
//! * [`insertion`]: the insertion locks, reservation and "wait for insertions to finish".
//! * [`Wal`] / [`WalBackend`]: buffers, insertion, write, flush, WAL writer ([`WalConfig`]).
//! * [`reader`]: [`WalReader`] over segment files or a memory image.
//!
//! Locks are `lockstack_lwlock` LWLocks in PostgreSQL's tranches (`WALInsert`, `WALWrite`,
//! `WALBufMapping`), so `lockstack_lwlock::stats` counts their traffic; waits publish
//! PostgreSQL's wait events (`LWLock:WALInsert`, `IO:WALWrite`, `IO:WALSync`,
//! `Timeout:CommitDelay`, `Activity:WalWriterMain`). [`WalStats`] adds per-backend WAL
//! counters.

mod config;
pub mod insertion;
pub mod ptr;
pub mod reader;
mod record;
mod sink;
mod stats;
mod sync;
mod wal;

pub use config::{InsertMode, KNOBS, WalConfig, WalError, WalSink};
pub use insertion::{InsertionHold, InsertionLocks, Reservation};
pub use lockstack_common::{AUXILIARY_BACKEND_BASE, AttachError};
pub use ptr::{WAL_SEG_SIZE, XLOG_BLCKSZ, XLogRecPtr};
pub use reader::{DecodedRecord, MemoryImage, PageSource, ReadEnd, SegmentDir, StopReason, WalReader};
pub use record::{MAX_RECORD_PAYLOAD, PageHeaderError, RECORD_HEADER_SIZE};
pub use sink::{parse_segment_file_name, segment_file_name};
pub use stats::WalStats;
pub use wal::{Record, Wal, WalBackend};
