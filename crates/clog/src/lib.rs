//! PostgreSQL's SLRU page cache and the two transaction logs built on it: the commit log
//! (CLOG, `pg_xact`) and pg_subtrans.
//!
//! * [`Slru`] (`src/backend/access/transam/slru.c`): N 8 KiB page buffers with status, dirty
//!   flag, LRU counts and a per-buffer I/O lock; either one control lock for all buffers (9.2's
//!   `CLogControlLock`) or PostgreSQL 17's banks of 16 buffers, each with its own lock
//!   ([`SlruLocking`]); a read-only fast path under a shared lock; write-out, flush and
//!   truncation; pages in memory or in 32-page segment files ([`SlruStorage`]); per-backend
//!   counters as in `pg_stat_slru` ([`SlruStats`]).
//! * [`Clog`] (`clog.c`): two status bits per xid ([`XidStatus`]), set-tree-status in the
//!   order that keeps a committing tree atomic for readers, get-status with the async-commit
//!   group LSN, and PostgreSQL 11's group status update on
//!   [`lockstack_lwlock::GroupCombiner`].
//! * [`SubTrans`] (`subtrans.c`): the parent xid of every subtransaction, and the walk to the
//!   top-level transaction.
//!
//! Page numbers are `u32` (a CLOG page holds 32768 xids, a pg_subtrans page 2048), LSNs are
//! `u64` byte positions in the WAL with 0 meaning "invalid" (`InvalidXLogRecPtr`).
//!
//! ```
//! use lockstack_clog::{Clog, ClogConfig, XidStatus};
//! use lockstack_common::TransactionId;
//!
//! let clog = Clog::new(ClogConfig::default()).unwrap();
//! let (top, sub) = (TransactionId(1000), TransactionId(1001));
//! clog.set_tree_status(top, &[sub], XidStatus::Committed, 0).unwrap();
//! assert_eq!(clog.get_status(sub).unwrap().0, XidStatus::Committed);
//! assert_eq!(clog.get_status(TransactionId(1002)).unwrap().0, XidStatus::InProgress);
//! ```

mod clog;
mod slru;
mod subtrans;
mod sync;

pub use clog::{
    CLOG_BITS_PER_XACT, CLOG_KNOBS, CLOG_LSNS_PER_PAGE, CLOG_XACTS_PER_BYTE, CLOG_XACTS_PER_LSN_GROUP,
    CLOG_XACTS_PER_PAGE, Clog, ClogConfig, ClogError, ClogUpdatePath, THRESHOLD_SUBTRANS_CLOG_OPT, XidStatus,
    clog_page, clog_page_precedes,
};
pub use slru::{
    PageMut, PageRef, SLRU_BANK_SIZE, SLRU_PAGE_SIZE, SLRU_PAGE_WORDS, SLRU_PAGES_PER_SEGMENT, Slru,
    SlruConfig, SlruError, SlruLocking, SlruPageStatus, SlruStats, SlruStorage, TruncateOutcome,
    WalFlushHook, parse_segment_file_name, segment_file_name,
};
pub use subtrans::{
    MAX_SUBTRANS_CHAIN, SUBTRANS_KNOBS, SUBTRANS_XACTS_PER_PAGE, SubTrans, SubTransConfig, SubTransError,
    subtrans_page, subtrans_page_precedes,
};
