//! PostgreSQL's shared buffer manager rebuilt as a library: buffer descriptors with pins and
//! usage counts, the buffer mapping table, victim selection, content and cleanup locks, a
//! storage manager, the slotted page layout and the visibility map.
//!
//! Each mechanism comes in the designs PostgreSQL has shipped, chosen per pool at run time
//! ([`BufferPoolConfig`]), so that one program can rerun the 2012-2016 buffer-pin contention
//! experiments (seed 004):
//!
//! | mechanism | old | new |
//! |---|---|---|
//! | header ([`HeaderKind`]) | spinlock per header (9.2) | one atomic state word with CAS (9.6); `fetch_sub` unpins (PostgreSQL 19 development); `fetch_add` pins (ours) |
//! | mapping ([`MappingKind`]) | 16 LWLock partitions (9.2) | 128 partitions (9.5); or a `DashMap` |
//! | descriptor array ([`DescPadding`]) | packed (9.4) | padded to whole cache lines (9.5) |
//! | victims ([`VictimKind`]) | free list + clock under `BufFreelistLock` (9.2) | atomic clock hand (9.5) |
//! | visibility checks ([`vm::VmCheck`]) | `PD_ALL_VISIBLE` first | always the VM page (the 2012 proposal) |
//!
//! Using it:
//!
//! ```
//! use lockstack_bufmgr::{BufferPool, BufferPoolConfig, ForkNumber, LwLockMode, page};
//! use lockstack_common::{BackendId, Oid};
//!
//! let pool = BufferPool::in_memory(BufferPoolConfig::default()).unwrap();
//! let bb = pool.attach(BackendId(0)).unwrap(); // one per thread: private refcounts and counters
//! let rel = Oid(16384);
//!
//! // Add a page, format it, put a tuple on it.
//! let (buf, blk) = bb.extend(rel, ForkNumber::Main).unwrap();
//! {
//!     let mut g = bb.lock(buf, LwLockMode::Exclusive);
//!     page::init(g.page_mut(), 0);
//!     page::add_item(g.page_mut(), b"hello", None).unwrap();
//!     g.mark_dirty();
//! } // guard dropped: content lock released, pin kept
//! bb.release(buf);
//!
//! // Read it back.
//! let buf = bb.read_block(rel, blk).unwrap();
//! let g = bb.lock(buf, LwLockMode::Shared);
//! assert_eq!(page::get_item(g.page(), 1).unwrap(), b"hello");
//! drop(g);
//! bb.release(buf);
//! pool.check_invariants().unwrap();
//! ```
//!
//! Rules (PostgreSQL's `src/backend/storage/buffer/README`): pin before touching a buffer; take
//! the content lock shared to read the page and exclusive to change it; a backend never holds
//! two content locks on one buffer; physically removing tuples needs a cleanup lock
//! ([`BackendBuffers::lock_for_cleanup`]). Pins are never waited for by normal operations;
//! when every buffer is pinned a read fails with [`BufferError::NoUnpinnedBuffers`], after
//! the clock hand and then [`ALL_PINNED_RECHECKS`] scans of every buffer found none unpinned.

mod arena;
mod backend;
mod buckets;
mod buffer;
mod bufio;
mod config;
mod desc;
mod desc_array;
mod error;
mod freelist;
pub mod page;
mod pool;
mod prefetch;
mod private_ref;
mod slock;
pub mod smgr;
mod stats;
mod sync;
mod table;
mod tag;
pub mod vm;

pub use backend::{BackendBuffers, ContentGuard};
pub use buffer::{Buffer, MAX_BUFFERS};
pub use config::{BufferPoolConfig, KNOBS};
pub use desc::{BM_MAX_USAGE_COUNT, BufferDesc, BufferState, HeaderKind};
pub use desc_array::{DESC_LINE, DescPadding, UnknownDescPadding};
pub use error::{BufferError, HookError};
pub use freelist::{ALL_PINNED_RECHECKS, VictimKind};
pub use lockstack_common::{AUXILIARY_BACKEND_BASE, AttachError};
pub use lockstack_lwlock::{LwLockKind, LwLockMode};
pub use pool::{BufferPool, WalFlushHook};
pub use smgr::{FileSmgr, MemorySmgr, Smgr, SmgrError};
pub use stats::BufferStats;
pub use table::MappingKind;
pub use tag::{BufferTag, ForkNumber};
