//! Settings of a WAL ([`WalConfig`]) and the errors it reports ([`WalError`]).

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use lockstack_lwlock::LwLockKind;

use crate::ptr::{WAL_SEG_SIZE, XLogRecPtr};

/// How inserters serialise, chosen at run time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum InsertMode {
    /// PostgreSQL 9.2/9.3: one `WALInsertLock`, held while the inserter reserves space *and*
    /// copies its record into the WAL buffers (and, if a buffer must be recycled, while it
    /// writes the old page out under `WALWriteLock`). `XLogInsert` in `xlog.c`, 9.3.
    SingleLock,
    /// PostgreSQL 9.4+: space is reserved under a spinlock (`insertpos_lck`); the copy happens
    /// under one of `n` insertion locks (`NUM_XLOGINSERT_LOCKS`, 8 in PostgreSQL), whose
    /// holders advertise how far they got (`insertingAt`) so that a writer can wait for the
    /// insertions in front of the position it wants to write (`WaitXLogInsertionsToFinish`).
    /// `n` is 1 to 128.
    InsertionLocks(usize),
}

impl InsertMode {
    /// Most insertion locks accepted.
    pub const MAX_LOCKS: usize = 128;
    /// PostgreSQL's `NUM_XLOGINSERT_LOCKS`.
    pub const DEFAULT_LOCKS: usize = 8;

    /// Number of insertion locks (1 for [`InsertMode::SingleLock`]).
    pub fn locks(self) -> usize {
        match self {
            InsertMode::SingleLock => 1,
            InsertMode::InsertionLocks(n) => n,
        }
    }

    /// Checks the lock count.
    ///
    /// # Errors
    /// [`WalError::Config`] when `n` is not 1..=128.
    pub fn validate(self) -> Result<(), WalError> {
        match self {
            InsertMode::InsertionLocks(n) if !(1..=Self::MAX_LOCKS).contains(&n) => {
                Err(WalError::Config(format!("insertion locks must be 1..=128, got {n}")))
            }
            _ => Ok(()),
        }
    }
}

impl Default for InsertMode {
    /// `InsertionLocks(8)`, PostgreSQL 9.4+.
    fn default() -> Self {
        InsertMode::InsertionLocks(Self::DEFAULT_LOCKS)
    }
}

impl fmt::Display for InsertMode {
    /// `single` or `locks:N`, the command-line spelling.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertMode::SingleLock => f.write_str("single"),
            InsertMode::InsertionLocks(n) => write!(f, "locks:{n}"),
        }
    }
}

impl FromStr for InsertMode {
    type Err = WalError;

    /// Parses `single` or `locks:N` (N in 1..=128); `locks` alone means 8.
    fn from_str(s: &str) -> Result<Self, WalError> {
        let bad =
            || WalError::Config(format!("unknown insert mode '{s}' (valid: single, locks:N with N 1..=128)"));
        let m = match s {
            "single" => InsertMode::SingleLock,
            "locks" => InsertMode::default(),
            _ => {
                let n = s.strip_prefix("locks:").ok_or_else(bad)?.parse::<usize>().map_err(|_| bad())?;
                InsertMode::InsertionLocks(n)
            }
        };
        m.validate()?;
        Ok(m)
    }
}

/// Where written WAL goes, and what a flush costs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WalSink {
    /// Real: 16 MiB segment files (named as PostgreSQL names them, `000000010000000000000000`)
    /// in `dir`, created on demand; a write is a `write` into the segment, a flush is
    /// `fdatasync` (`XLogWrite` / `issue_xlog_fsync` in `xlog.c`). `dir` is created if missing.
    Files {
        /// The `pg_wal` directory.
        dir: PathBuf,
    },
    /// Modelled: writes cost nothing, every flush sleeps `flush_delay` (for experiments on a
    /// machine whose disk is not worth measuring; a laptop SSD's fsync is 50 µs-2 ms).
    Modelled {
        /// Time one flush takes.
        flush_delay: Duration,
    },
    /// Memory: writes and flushes cost nothing but their bookkeeping (PostgreSQL with
    /// `fsync = off`; `commit_delay` is skipped in this mode as PostgreSQL skips it then).
    Memory,
}

/// Settings of one WAL.
#[derive(Clone, Debug)]
pub struct WalConfig {
    /// Insertion design.
    pub insert_mode: InsertMode,
    /// Which LWLock implementation the WAL's locks use.
    pub lwlock_kind: LwLockKind,
    /// WAL buffers, in 8 KiB pages (`wal_buffers`): 4 to 65536. PostgreSQL's automatic value
    /// for 128 MB of shared buffers is 512 (4 MiB), the default here.
    pub wal_buffers: usize,
    /// Where writes go and what flushes cost.
    pub sink: WalSink,
    /// For [`WalSink::Modelled`] and [`WalSink::Memory`]: keep a copy of everything written in
    /// memory, so that [`crate::Wal::reader`] can read it back (tests, replay). It grows with
    /// the WAL; leave it off for long runs.
    pub keep_in_memory: bool,
    /// `commit_delay`: microseconds the flush leader sleeps while holding `WALWriteLock`
    /// before flushing, so that more commits join the group (0..=100000; 9.3+ placement).
    pub commit_delay_us: u64,
    /// `commit_siblings`: the leader sleeps only if at least this many *other* backends are in
    /// a transaction (0..=1000; default 5).
    pub commit_siblings: usize,
    /// `synchronous_commit`: when false, [`crate::WalBackend::commit`] does not flush; a WAL
    /// writer thread flushes every [`wal_writer_delay`](Self::wal_writer_delay).
    pub synchronous_commit: bool,
    /// `wal_writer_delay` (1 ms ..= 10 s; default 200 ms).
    pub wal_writer_delay: Duration,
    /// Segment number (16 MiB segments, [`WAL_SEG_SIZE`] bytes each) at which the log starts:
    /// the log starts at the first byte of this 16 MiB segment, as after a clean shutdown +
    /// segment switch; the engine passes the segment after the one holding the previous end
    /// of WAL ([`crate::Wal::start_segment_after`] computes it from the end that
    /// [`crate::Wal::shutdown`] returned). The first record then starts at
    /// `start_segment * WAL_SEG_SIZE + 40` bytes (after the segment's long page header), so
    /// every new position is above every position of the previous log. Default 0 (a new
    /// cluster: first record at `0/28`); at most [`WalConfig::MAX_START_SEGMENT`].
    ///
    /// With a file sink, segment files numbered below it may stay in the directory (they are
    /// never touched); one numbered at or above it makes [`crate::Wal::open`] fail. The first
    /// record of the new log has no back-link (`xl_prev` invalid).
    ///
    /// PostgreSQL (9.4+, `StartupXLOG` in `xlog.c`) sets the insert position to
    /// `XLogRecPtrToBytePos(EndOfLog)`, right after the shutdown checkpoint record; here the
    /// log restarts at a segment boundary instead, as if an `XLOG_SWITCH` had followed that
    /// record, so nothing of the old log's last page has to be read back into the buffers.
    pub start_segment: u64,
    /// Fault injection: the log may take at most this many bytes from the first byte of
    /// [`start_segment`](Self::start_segment); a write (whole pages) that would reach past
    /// them fails, writing nothing, with `ENOSPC` ("No space left on device") naming the
    /// segment file (its path with a file sink, its name with the others), as a full disk
    /// fails `XLogWrite`, and poisons the WAL like any write error. Applies to every sink
    /// (memory and modelled sinks count the bytes they would write). `None` (the default): no
    /// limit but the file system's. Lets tests fill the disk deterministically.
    pub write_limit: Option<u64>,
}

impl Default for WalConfig {
    /// 8 insertion locks, 512 buffers, memory sink, no copy kept, no commit_delay,
    /// commit_siblings 5, synchronous commit, 200 ms writer delay, log starting in segment 0,
    /// no write limit.
    fn default() -> Self {
        WalConfig {
            insert_mode: InsertMode::default(),
            lwlock_kind: LwLockKind::default(),
            wal_buffers: 512,
            sink: WalSink::Memory,
            keep_in_memory: false,
            commit_delay_us: 0,
            commit_siblings: 5,
            synchronous_commit: true,
            wal_writer_delay: Duration::from_millis(200),
            start_segment: 0,
            write_limit: None,
        }
    }
}

impl WalConfig {
    /// Largest [`start_segment`](Self::start_segment) accepted: 2^32 segments (64 PiB of WAL
    /// before it), which leaves positions far from overflowing a `u64`.
    pub const MAX_START_SEGMENT: u64 = 1 << 32;

    /// Byte position of the first byte of [`start_segment`](Self::start_segment) (the page
    /// that holds the log's first record): `start_segment * WAL_SEG_SIZE`.
    ///
    /// # Panics
    /// If `start_segment * WAL_SEG_SIZE` overflows a `u64` (only possible for a value that
    /// [`validate`](Self::validate) rejects).
    pub fn start_position(&self) -> XLogRecPtr {
        XLogRecPtr(self.start_segment.checked_mul(WAL_SEG_SIZE).expect("start_segment * WAL_SEG_SIZE fits a u64: validate() refuses start segments above MAX_START_SEGMENT"))
    }

    /// Checks every range.
    ///
    /// # Errors
    /// [`WalError::Config`] naming the setting.
    pub fn validate(&self) -> Result<(), WalError> {
        self.insert_mode.validate()?;
        if !(4..=65536).contains(&self.wal_buffers) {
            return Err(WalError::Config(format!(
                "wal_buffers must be 4..=65536 pages, got {}",
                self.wal_buffers
            )));
        }
        if self.commit_delay_us > 100_000 {
            return Err(WalError::Config(format!(
                "commit_delay must be 0..=100000 microseconds, got {}",
                self.commit_delay_us
            )));
        }
        if self.commit_siblings > 1000 {
            return Err(WalError::Config(format!(
                "commit_siblings must be 0..=1000, got {}",
                self.commit_siblings
            )));
        }
        if self.wal_writer_delay < Duration::from_millis(1) || self.wal_writer_delay > Duration::from_secs(10)
        {
            return Err(WalError::Config(format!(
                "wal_writer_delay must be 1 ms..=10 s, got {:?}",
                self.wal_writer_delay
            )));
        }
        if self.start_segment > Self::MAX_START_SEGMENT {
            return Err(WalError::Config(format!(
                "start_segment must be 0..={}, got {}",
                Self::MAX_START_SEGMENT,
                self.start_segment
            )));
        }
        if let WalSink::Modelled { flush_delay } = self.sink
            && flush_delay > Duration::from_secs(1)
        {
            return Err(WalError::Config(format!(
                "modelled flush delay must be at most 1 s, got {flush_delay:?}"
            )));
        }
        Ok(())
    }
}

/// Everything that can go wrong in this crate.
#[derive(Debug)]
pub enum WalError {
    /// A setting is out of range or unparsable, or a file sink's directory already holds a
    /// segment file at or above [`WalConfig::start_segment`].
    Config(String),
    /// An I/O call failed on `path`.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done (`open`, `write`, `fsync`, `read`, ...).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A record payload above [`crate::MAX_RECORD_PAYLOAD`].
    RecordTooLarge {
        /// Payload bytes asked for.
        size: usize,
    },
    /// A flush asked for a position past the end of the WAL inserted so far (PostgreSQL:
    /// "xlog flush request is not satisfied").
    FlushBeyondEnd {
        /// The position asked for.
        requested: XLogRecPtr,
        /// The end of inserted WAL.
        end: XLogRecPtr,
    },
    /// An earlier write or flush failed, so the WAL can no longer promise durability
    /// (PostgreSQL PANICs here); the message is the first failure's.
    Poisoned(String),
    /// The reader has no way to read this WAL (a memory sink without `keep_in_memory`).
    NotReadable,
}

impl fmt::Display for WalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WalError::Config(m) => f.write_str(m),
            WalError::Io { path, op, source } => write!(f, "could not {op} {}: {source}", path.display()),
            WalError::RecordTooLarge { size } => write!(
                f,
                "record payload of {size} bytes is above the limit of {} bytes",
                crate::record::MAX_RECORD_PAYLOAD
            ),
            WalError::FlushBeyondEnd { requested, end } => {
                write!(f, "flush request {requested} is past the end of inserted WAL {end}")
            }
            WalError::Poisoned(m) => write!(f, "WAL is unusable after an earlier failure: {m}"),
            WalError::NotReadable => {
                f.write_str("this WAL keeps no copy of written data (use a file sink or keep_in_memory)")
            }
        }
    }
}

impl std::error::Error for WalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WalError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>, op: &'static str, source: io::Error) -> WalError {
        WalError::Io { path: path.into(), op, source }
    }
}

/// The WAL's knobs (`lockstack_common::knob`), over [`WalConfig`]; the defaults are
/// [`WalConfig::default`]'s. Where the WAL goes ([`WalSink`]) is the embedding program's choice.
pub const KNOBS: &[lockstack_common::Knob<WalConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{in_range, on_off, parsed};
    &[
        Knob {
            key: "wal.insert",
            values: "single|locks:N (N 1..=128)",
            doc: "one WALInsertLock (9.2) or N insertion locks (9.4, N = 8)",
            default: "locks:8",
            apply: |c, v| {
                c.insert_mode = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "wal.buffers",
            values: "4..=65536",
            doc: "wal_buffers, in 8 KiB pages (PostgreSQL's minimum is 4)",
            default: "512",
            apply: |c, v| {
                c.wal_buffers = in_range(v, 4usize, 65536)?;
                Some(())
            },
        },
        Knob {
            key: "wal.synchronous_commit",
            values: "on|off",
            doc: "synchronous_commit (off: a WAL writer flushes)",
            default: "on",
            apply: |c, v| {
                c.synchronous_commit = on_off(v)?;
                Some(())
            },
        },
        Knob {
            key: "wal.commit_delay",
            values: "0..=100000 (us)",
            doc: "commit_delay, in us",
            default: "0",
            apply: |c, v| {
                c.commit_delay_us = in_range(v, 0u64, 100_000)?;
                Some(())
            },
        },
        Knob {
            key: "wal.commit_siblings",
            values: "0..=1000",
            doc: "commit_siblings",
            default: "5",
            apply: |c, v| {
                c.commit_siblings = in_range(v, 0usize, 1000)?;
                Some(())
            },
        },
        Knob {
            key: "wal.writer_delay",
            values: "1..=10000 (ms)",
            doc: "wal_writer_delay, in ms (synchronous_commit off)",
            default: "200",
            apply: |c, v| {
                c.wal_writer_delay = Duration::from_millis(in_range(v, 1u64, 10_000)?);
                Some(())
            },
        },
        Knob {
            key: "wal.write_limit",
            values: "0..=1099511627776 (bytes)",
            doc: "fault injection: WAL writes past this many bytes of log fail with ENOSPC, as on a full disk (0: no limit)",
            default: "0",
            apply: |c, v| {
                let n = in_range(v, 0u64, 1 << 40)?;
                c.write_limit = (n > 0).then_some(n);
                Some(())
            },
        },
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        assert_eq!("single".parse::<InsertMode>().unwrap(), InsertMode::SingleLock);
        assert_eq!("locks:32".parse::<InsertMode>().unwrap(), InsertMode::InsertionLocks(32));
        assert_eq!("locks".parse::<InsertMode>().unwrap(), InsertMode::InsertionLocks(8));
        assert_eq!(InsertMode::InsertionLocks(4).to_string(), "locks:4");
        for bad in ["locks:0", "locks:129", "locks:x", "many", ""] {
            assert!(bad.parse::<InsertMode>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn bad_settings_are_errors() {
        let ok = WalConfig::default();
        assert!(ok.validate().is_ok());
        let cases = [
            WalConfig { wal_buffers: 3, ..ok.clone() },
            WalConfig { commit_delay_us: 100_001, ..ok.clone() },
            WalConfig { commit_siblings: 1001, ..ok.clone() },
            WalConfig { wal_writer_delay: Duration::ZERO, ..ok.clone() },
            WalConfig { insert_mode: InsertMode::InsertionLocks(0), ..ok.clone() },
            WalConfig { start_segment: WalConfig::MAX_START_SEGMENT + 1, ..ok.clone() },
            WalConfig { start_segment: u64::MAX, ..ok.clone() },
        ];
        for c in cases {
            assert!(matches!(c.validate(), Err(WalError::Config(_))), "{c:?}");
        }
        let last = WalConfig { start_segment: WalConfig::MAX_START_SEGMENT, ..ok };
        assert!(last.validate().is_ok());
        assert_eq!(last.start_position(), XLogRecPtr((1 << 32) * WAL_SEG_SIZE));
    }
}
