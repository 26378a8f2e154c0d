//! The WAL: buffers, insertion, write, flush with group commit, and the WAL writer.
//!
//! Sources, all `src/backend/access/transam/xlog.c`: `XLogInsertRecord` and
//! `CopyXLogRecordToWAL` (insertion, 9.4+; `XLogInsert` for 9.2/9.3), `GetXLogBuffer` and
//! `AdvanceXLInsertBuffer` (the buffer ring), `XLogWrite`, `XLogFlush` (group commit),
//! `XLogBackgroundFlush` (WAL writer), and `RecordTransactionCommit` in `xact.c` (synchronous
//! or asynchronous commit).
//!
//! This file holds the shared [`Wal`] (open, attach, accessors, reading back, shutdown and the
//! WAL writer thread's loop) and the [`WalBackend`] handle (locks touched here: the sink's and
//! the writer control block's mutexes; the LWLocks are only created and named). The work is in
//! `wal/`: `insert.rs` (inserting a record), `buffers.rs` (the buffer ring) and `flush.rs`
//! (write, flush and group commit).

use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::sync::thread::{self, JoinHandle};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Condvar, Mutex, Ordering};
use crossbeam_utils::CachePadded;
use lockstack_common::{
    AUXILIARY_BACKEND_BASE, AttachError, BackendId, BackendRegistry, StatsRegistry, TrancheId, TransactionId,
    WaitEvent, WaitEventScope,
};
use lockstack_lwlock::LwLock;

use crate::config::{WalConfig, WalError, WalSink};
use crate::insertion::{InsertionHold, InsertionLocks};
use crate::ptr::{
    WORDS_PER_PAGE, XLOG_BLCKSZ, XLogRecPtr, bytepos_to_end_recptr, bytepos_to_recptr, recptr_to_bytepos,
};
use crate::reader::{MemoryImage, PageSource, SegmentDir, WalReader};
use crate::sink::{Sink, segment_file_name, wal_files_in};

mod buffers;
mod flush;
mod insert;
use crate::stats::{WalCounters, WalStats};

/// One record to insert: who wrote it and its payload (the 9.5+ `XLogBeginInsert` /
/// `XLogRegisterData` / `XLogInsert(rmid, info)` sequence, reduced to one call).
#[derive(Copy, Clone, Debug)]
pub struct Record<'a> {
    /// Resource manager id (`RmgrId`: 0 XLOG, 1 Transaction, 10 Heap, 11 Btree, ...).
    pub rmid: u8,
    /// Record-type bits for the resource manager (`xl_info`).
    pub info: u8,
    /// Transaction that wrote the record ([`TransactionId::INVALID`] for none).
    pub xid: TransactionId,
    /// Payload bytes (at most [`MAX_RECORD_PAYLOAD`](crate::MAX_RECORD_PAYLOAD)).
    pub data: &'a [u8],
}

/// Control block of the WAL writer thread.
struct WriterCtl {
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A write-ahead log in memory and (optionally) on disk, shared by many backends.
///
/// Build one with [`Wal::open`]; every thread that inserts or flushes takes a
/// [`WalBackend`] handle from [`Wal::backend`]. Dropping the last `Arc` stops the WAL writer
/// thread (if any); call [`Wal::shutdown`] first to flush what is left.
pub struct Wal {
    cfg: WalConfig,
    ins: InsertionLocks,
    nbuf: usize,
    /// The WAL buffers: `nbuf` pages of 1024 words. Words, not bytes: every record and page
    /// header covers whole 8-byte words, so concurrent inserters never share a word, and a
    /// writer reading a page that an inserter is still filling reads stale words, never torn
    /// memory.
    pages: Box<[AtomicU64]>,
    /// Per buffer slot, the end position of the page it holds (0 = none yet) (`xlblocks`).
    xlblocks: Box<[AtomicU64]>,
    /// `WALBufMappingLock` (insertion-locks mode): serialises page initialisation.
    mapping_lock: LwLock,
    /// Start of the first page not yet initialised (`InitializedUpTo`); changed under the
    /// mapping lock (or the single insert lock).
    initialized_upto: AtomicU64,
    /// Single-lock mode: end of the last completed insertion (everything before it is copied).
    inserted_upto: CachePadded<AtomicU64>,
    /// `WALWriteLock`.
    write_lock: LwLock,
    /// `LogwrtRqst.Write`: ends of records that completed a page, which someone should write.
    write_rqst: CachePadded<AtomicU64>,
    /// `LogwrtResult.Write` and `.Flush` (atomics as in 17+; changed under `WALWriteLock`).
    write_result: AtomicU64,
    flush_result: AtomicU64,
    /// `asyncXactLSN`: newest asynchronous commit.
    async_xact_lsn: AtomicU64,
    sink: Mutex<Sink>,
    poisoned: AtomicBool,
    poison_msg: Mutex<Option<String>>,
    /// Backends currently inside a transaction (for `commit_siblings`).
    in_xact: AtomicUsize,
    /// Ids of the live handles made by [`Wal::attach`].
    attached: BackendRegistry,
    /// Handles made by [`Wal::attach_auxiliary`] so far.
    next_auxiliary: AtomicUsize,
    stats: StatsRegistry<WalCounters>,
    writer_ctl: Arc<WriterCtl>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("insert_mode", &self.cfg.insert_mode)
            .field("wal_buffers", &self.nbuf)
            .field("inserted", &self.insert_position())
            .field("written", &self.written_upto())
            .field("flushed", &self.flushed_upto())
            .finish()
    }
}

/// Where a caller of the buffer code stands: an inserter holding a lock (with its progress),
/// or someone who holds none.
struct Inserter<'a> {
    hold: &'a mut InsertionHold,
    counters: &'a WalCounters,
}

impl Wal {
    /// Builds a WAL with `cfg` and, if `synchronous_commit` is off, starts its WAL writer
    /// thread. The log starts empty at the first byte of segment
    /// [`WalConfig::start_segment`], `P = start_segment * WAL_SEG_SIZE` bytes: the insert
    /// position is the usable-byte position of `P` (`XLogRecPtrToBytePos`, as `StartupXLOG`
    /// sets `CurrBytePos` in PostgreSQL 9.4+), so the first record goes to `P + 40`, after the
    /// segment's long page header (`0/28` for segment 0); written and flushed positions start
    /// at `P`, and the page at `P` is initialised in the WAL buffers.
    ///
    /// # Errors
    /// [`WalError::Config`] for an out-of-range setting, or a file sink directory that
    /// already holds a segment file numbered at or above `start_segment` (or a 24-hex-digit
    /// name this crate does not write, such as another timeline's); files of lower segments
    /// are left alone. [`WalError::Io`] if the directory cannot be created or read, or the
    /// WAL writer thread cannot be started.
    pub fn open(cfg: WalConfig) -> Result<Arc<Wal>, WalError> {
        cfg.validate()?;
        let start = cfg.start_position();
        if let WalSink::Files { dir } = &cfg.sink
            && dir.exists()
        {
            for (name, segno) in wal_files_in(dir)? {
                if segno.is_none_or(|n| n >= cfg.start_segment) {
                    return Err(WalError::Config(format!(
                        "{} already holds WAL segment file {name}, not below start segment {} ({}); \
                         start after it or use an empty directory",
                        dir.display(),
                        cfg.start_segment,
                        segment_file_name(cfg.start_segment)
                    )));
                }
            }
        }
        let sink = Sink::new(&cfg.sink, cfg.keep_in_memory, start.0, cfg.write_limit)?;
        let nbuf = cfg.wal_buffers;
        let start_bytepos = recptr_to_bytepos(start);
        let ins = InsertionLocks::new(cfg.insert_mode, cfg.lwlock_kind)?;
        // No record before the first: the first record's back-link is invalid.
        ins.set_start(start_bytepos, start_bytepos);
        let wal = Arc::new(Wal {
            ins,
            nbuf,
            pages: (0..nbuf * WORDS_PER_PAGE).map(|_| AtomicU64::new(0)).collect(),
            xlblocks: (0..nbuf).map(|_| AtomicU64::new(0)).collect(),
            mapping_lock: LwLock::new(cfg.lwlock_kind, TrancheId::WAL_BUF_MAPPING, 0),
            initialized_upto: AtomicU64::new(start.0),
            inserted_upto: CachePadded::new(AtomicU64::new(bytepos_to_end_recptr(start_bytepos).0)),
            write_lock: LwLock::new(cfg.lwlock_kind, TrancheId::WAL_WRITE, 0),
            write_rqst: CachePadded::new(AtomicU64::new(start.0)),
            write_result: AtomicU64::new(start.0),
            flush_result: AtomicU64::new(start.0),
            async_xact_lsn: AtomicU64::new(start.0),
            sink: Mutex::new(sink),
            poisoned: AtomicBool::new(false),
            poison_msg: Mutex::new(None),
            in_xact: AtomicUsize::new(0),
            attached: BackendRegistry::new(),
            next_auxiliary: AtomicUsize::new(0),
            stats: StatsRegistry::new(),
            writer_ctl: Arc::new(WriterCtl { stop: Mutex::new(false), wake: Condvar::new() }),
            writer: Mutex::new(None),
            cfg,
        });
        wal.name_lines();
        // The first page is in the buffers from the start, as `StartupXLOG` sets up the page
        // holding the end of WAL, so that writing an empty log writes a valid page.
        wal.init_page(wal.slot_of(start.0), start.0);
        wal.initialized_upto.store(start.0 + XLOG_BLCKSZ, Ordering::Relaxed);
        if !wal.cfg.synchronous_commit {
            let weak = Arc::downgrade(&wal);
            let ctl = Arc::clone(&wal.writer_ctl);
            let counters = wal.stats.register();
            let delay = wal.cfg.wal_writer_delay;
            let handle = thread::Builder::new()
                .name("wal-writer".into())
                .spawn(move || wal_writer_main(weak, ctl, counters, delay))
                .map_err(|e| WalError::io("wal-writer thread", "spawn", e))?;
            *wal.writer.lock() = Some(handle);
        }
        Ok(wal)
    }

    /// Names the hot lines for a simulation's statistics (see `hook::name_line`): the
    /// insertion locks and the insert position, `WALWriteLock`, `WALBufMappingLock`, the
    /// write request and result words and the buffer slots' `xlblocks`. The WAL buffer words
    /// themselves are facade atomics: a simulation sees each 8-byte word copied in.
    fn name_lines(&self) {
        use lockstack_common::sync::hook::{LINE_BYTES, name_elements, name_line};
        self.ins.name_lines();
        // The unpadded words of `Wal` may share a line with a lock: name the words first, so
        // that a shared line is named after the lock, with the words it carries.
        let result = &self.write_result as *const AtomicU64 as usize;
        let with_result = |lock: &LwLock, name: &str| {
            let same = lock.word_addr() as usize / LINE_BYTES == result / LINE_BYTES;
            if same { format!("{name} + LogwrtResult") } else { name.to_string() }
        };
        name_line(&self.flush_result as *const AtomicU64 as *const u8, || {
            "WAL LogwrtResult.Flush".to_string()
        });
        name_line(result as *const u8, || "WAL LogwrtResult".to_string());
        self.write_lock.name_line_as(|| with_result(&self.write_lock, "WALWriteLock"));
        self.mapping_lock.name_line_as(|| with_result(&self.mapping_lock, "WALBufMappingLock"));
        name_line(&*self.inserted_upto as *const AtomicU64 as *const u8, || "WAL insertedUpTo".to_string());
        name_line(&*self.write_rqst as *const AtomicU64 as *const u8, || "WAL LogwrtRqst.Write".to_string());
        name_elements(&self.xlblocks, "WAL xlblocks");
    }

    /// Attaches backend `id` (a thread): its id picks its first insertion lock
    /// (`lockToTry = MyProcNumber % n`, 9.4+). Dropping the handle frees `id`.
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below [`AUXILIARY_BACKEND_BASE`],
    /// [`AttachError::AlreadyAttached`] while another handle of `id` is alive.
    pub fn attach(self: &Arc<Self>, id: BackendId) -> Result<WalBackend, AttachError> {
        self.attached.claim(id, "WAL")?;
        Ok(self.handle(id.0 as usize))
    }

    /// A handle for an auxiliary process (checkpointer, startup process, a loader thread),
    /// numbered from [`AUXILIARY_BACKEND_BASE`] in creation order (repeating after `2^31 - 1`
    /// handles) instead of by a backend id. Never fails.
    pub fn attach_auxiliary(self: &Arc<Self>) -> WalBackend {
        let n = self.next_auxiliary.fetch_add(1, Ordering::Relaxed)
            % (u32::MAX - AUXILIARY_BACKEND_BASE) as usize;
        self.handle(AUXILIARY_BACKEND_BASE as usize + n)
    }

    fn handle(self: &Arc<Self>, id: usize) -> WalBackend {
        WalBackend {
            wal: Arc::clone(self),
            id,
            lock_to_try: id % self.ins.len(),
            counters: self.stats.register(),
            scratch: Vec::new(),
            last_start: XLogRecPtr::INVALID,
            in_xact: false,
        }
    }

    /// The settings.
    pub fn config(&self) -> &WalConfig {
        &self.cfg
    }

    /// End of all WAL reserved so far (`GetXLogInsertRecPtr`): some of it may still be being
    /// copied. When no backend is inserting, this is the end of WAL: the end position of the
    /// last record inserted (what [`WalBackend::insert`] returned for it), or, before the
    /// first record, the log's start (`0/28` for segment 0, else the first byte of
    /// [`WalConfig::start_segment`]). [`Wal::shutdown`] flushes up to it and returns it.
    pub fn insert_position(&self) -> XLogRecPtr {
        bytepos_to_end_recptr(self.ins.reserved_bytepos())
    }

    /// How far WAL has been handed to the sink (`LogwrtResult.Write`).
    pub fn written_upto(&self) -> XLogRecPtr {
        XLogRecPtr(self.write_result.load(Ordering::Acquire))
    }

    /// How far WAL is durable in the sink's sense (`LogwrtResult.Flush`, `GetFlushRecPtr`).
    pub fn flushed_upto(&self) -> XLogRecPtr {
        XLogRecPtr(self.flush_result.load(Ordering::Acquire))
    }

    /// The advertised position of insertion lock `i` (0 when free or not yet advertised); for
    /// diagnostics and tests.
    ///
    /// # Panics
    /// If `i` is not below [`insertion_locks`](Self::insertion_locks).
    pub fn inserting_at(&self, i: usize) -> XLogRecPtr {
        XLogRecPtr(self.ins.inserting_at(i))
    }

    /// Number of insertion locks (1 in single-lock mode).
    pub fn insertion_locks(&self) -> usize {
        self.ins.len()
    }

    /// Every backend's counters summed (the WAL writer's included). Readable while backends
    /// run; then at most a few increments behind.
    pub fn stats(&self) -> WalStats {
        let mut s = WalStats::default();
        self.stats.for_each(|c| s.add_backend(c));
        s
    }

    /// A reader over the WAL written so far, starting at record `start` (use
    /// [`Wal::start_of_wal`] for the beginning of this log). It sees what has been written (not
    /// necessarily flushed); flush first to read everything inserted.
    ///
    /// # Errors
    /// [`WalError::NotReadable`] for a modelled or memory sink without `keep_in_memory`.
    pub fn reader(&self, start: XLogRecPtr) -> Result<WalReader<Box<dyn PageSource + Send>>, WalError> {
        let sink = self.sink.lock();
        let source: Box<dyn PageSource + Send> = if let Some(dir) = sink.dir() {
            Box::new(SegmentDir::new(dir))
        } else if let Some((at, img)) = sink.image_upto(self.write_result.load(Ordering::Acquire)) {
            Box::new(MemoryImage::starting_at(XLogRecPtr(at), img))
        } else {
            return Err(WalError::NotReadable);
        };
        Ok(WalReader::new(source, start))
    }

    /// A copy of the WAL written so far, for a modelled or memory sink with `keep_in_memory`
    /// (`None` otherwise): for saving it, or damaging it in tests. The image starts at the
    /// first byte of [`WalConfig::start_segment`] ([`MemoryImage::start`]).
    pub fn memory_image(&self) -> Option<MemoryImage> {
        let upto = self.write_result.load(Ordering::Acquire);
        self.sink.lock().image_upto(upto).map(|(at, img)| MemoryImage::starting_at(XLogRecPtr(at), img))
    }

    /// Position of the first record of a WAL opened with [`WalConfig::start_segment`] 0
    /// (`0/28`, after the first page's long header). See [`start_of_wal`](Self::start_of_wal)
    /// for any start segment.
    pub fn first_record() -> XLogRecPtr {
        bytepos_to_recptr(0)
    }

    /// Position of the first record of this log: `start_segment * WAL_SEG_SIZE + 40` bytes
    /// (after the long header of the segment's first page), whether or not it has been
    /// inserted yet. Every record this WAL inserts starts at or after it.
    pub fn start_of_wal(&self) -> XLogRecPtr {
        bytepos_to_recptr(recptr_to_bytepos(self.cfg.start_position()))
    }

    /// The [`WalConfig::start_segment`] to reopen with after a log that ended at `end_of_wal`
    /// (the value [`Wal::shutdown`] or [`WalBackend::flush_all`] returned): the segment after
    /// the one holding `end_of_wal`, `end_of_wal.segment() + 1`.
    ///
    /// Every position of the old log, and so every page LSN stamped from it, is at most
    /// `end_of_wal`, which is below the new log's first record end, so WAL-before-data
    /// ordering holds across the restart. When `end_of_wal` is exactly a segment boundary
    /// this skips one (never created) segment, so that a reader of the old log finds a
    /// missing segment where it looks for the next record, a clean end.
    ///
    /// # Panics
    /// If `end_of_wal` is in the last segment a `u64` position can address (unreachable).
    pub fn start_segment_after(end_of_wal: XLogRecPtr) -> u64 {
        end_of_wal
            .segment()
            .checked_add(1)
            .expect("a segment number is at most u64::MAX / WAL_SEG_SIZE, so adding 1 cannot overflow")
    }

    /// Stops the WAL writer (if running) and flushes every insertion finished so far. Call it
    /// when no backend is inserting; afterwards the WAL still works (commits then flush
    /// synchronously only if `synchronous_commit` is on).
    ///
    /// Returns the flushed position, which is then the end of WAL
    /// ([`insert_position`](Self::insert_position)); pass it to
    /// [`Wal::start_segment_after`] to reopen the log after it.
    ///
    /// # Errors
    /// The flush's error (the WAL is then poisoned), or [`WalError::Poisoned`] after an
    /// earlier failure.
    pub fn shutdown(&self) -> Result<XLogRecPtr, WalError> {
        self.stop_wal_writer();
        let counters = self.stats.register();
        let end = self.finished_insertions(self.insert_position(), None);
        self.flush_upto(end, &counters, None)?;
        Ok(self.flushed_upto())
    }

    /// Stops the WAL writer thread and waits for it; a no-op when there is none. Commits made
    /// with `synchronous_commit` off are no longer flushed in the background afterwards.
    pub fn stop_wal_writer(&self) {
        *self.writer_ctl.stop.lock() = true;
        self.writer_ctl.wake.notify_all();
        let handle = self.writer.lock().take();
        if let Some(h) = handle
            && h.thread_id() != thread::current_id()
        {
            // The writer only returns; a panic in it was already reported on stderr.
            let _ = h.join();
        }
    }

    fn poison(&self, e: &WalError) {
        let mut m = self.poison_msg.lock();
        if m.is_none() {
            *m = Some(e.to_string());
        }
        self.poisoned.store(true, Ordering::Release);
    }

    fn check_poison(&self) -> Result<(), WalError> {
        if self.poisoned.load(Ordering::Acquire) {
            let m = self.poison_msg.lock().clone().unwrap_or_default();
            return Err(WalError::Poisoned(m));
        }
        Ok(())
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        self.stop_wal_writer();
    }
}

/// The WAL writer's loop: sleep `delay` (or until stopped), flush, repeat. It holds only a
/// weak reference, so it never keeps the WAL alive.
fn wal_writer_main(
    weak: Weak<Wal>,
    ctl: Arc<WriterCtl>,
    counters: lockstack_common::StatsBlock<WalCounters>,
    delay: Duration,
) {
    loop {
        {
            let mut stop = ctl.stop.lock();
            if !*stop {
                let _scope = WaitEventScope::new(WaitEvent::WAL_WRITER_MAIN);
                ctl.wake.wait_for(&mut stop, delay);
            }
            if *stop {
                return;
            }
        }
        let Some(wal) = weak.upgrade() else { return };
        // An error poisons the WAL; backends see it on their next call. Not while a measured
        // phase runs on the simulated machine: there the phase's own writer task flushes
        // (`Wal::writer_loop`), and this native thread waits for the phase to end.
        let _ = lockstack_common::sync::hook::outside_simulated_phases(|| wal.background_flush(&counters));
    }
}

/// One backend's handle on a [`Wal`]: inserts records and flushes, and owns the backend's
/// counters and scratch space. Not `Sync`: one thread uses it at a time.
pub struct WalBackend {
    wal: Arc<Wal>,
    id: usize,
    lock_to_try: usize,
    counters: lockstack_common::StatsBlock<WalCounters>,
    scratch: Vec<u64>,
    last_start: XLogRecPtr,
    in_xact: bool,
}

impl std::fmt::Debug for WalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalBackend").field("id", &self.id).field("last_start", &self.last_start).finish()
    }
}

impl WalBackend {
    /// The backend's number (0-based, in creation order).
    pub fn id(&self) -> usize {
        self.id
    }

    /// The WAL this handle writes to.
    pub fn wal(&self) -> &Arc<Wal> {
        &self.wal
    }

    /// Start of the last record this backend inserted (`ProcLastRecPtr`).
    pub fn last_record_start(&self) -> XLogRecPtr {
        self.last_start
    }

    /// This backend's counters.
    pub fn stats(&self) -> WalStats {
        let mut s = WalStats::default();
        s.add_backend(&self.counters);
        s
    }
}

impl Drop for WalBackend {
    fn drop(&mut self) {
        self.end_xact();
        // Handle numbers come from a `u32` (a backend id or an auxiliary number).
        self.wal.attached.release(self.id as u32);
    }
}

#[cfg(all(test, not(loom)))]
#[path = "sim_annot_tests.rs"]
mod sim_annot_tests;
