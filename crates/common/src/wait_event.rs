//! Wait events: what a backend is blocked on, in PostgreSQL's names.
//!
//! `pg_stat_activity` (9.6+) shows a `wait_event_type` and a `wait_event` for every waiting
//! backend; pg_wait_sampling builds a profile by sampling them. lockstack encodes the pair into
//! one `u32` (class in the top 8 bits, event in the low 24 bits, like PostgreSQL's
//! `wait_event_info`) so that a backend can publish it with a single relaxed store and a sampler
//! can read it without a lock (`src/include/utils/wait_event.h`, PostgreSQL 14).

use std::fmt;

use crate::tranche::TrancheId;

/// The wait event classes (`wait_event_type`) that lockstack uses, with PostgreSQL's names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum WaitEventType {
    /// An LWLock; the event is the tranche name.
    LwLock = 1,
    /// A heavyweight lock; the event is the lock tag kind (`relation`, `transactionid`, ...).
    Lock = 2,
    /// Waiting for a buffer pin count to drop (cleanup lock).
    BufferPin = 3,
    /// Waiting for another process (group members, buffer I/O done by another backend, ...).
    Ipc = 4,
    /// Waiting for I/O (WAL write and sync, data file reads, SLRU reads).
    Io = 5,
    /// Waiting for a timeout (`pg_sleep`, commit_delay).
    Timeout = 6,
    /// A background process idling in its main loop.
    Activity = 7,
    /// A backend waiting for its client (idle between commands).
    Client = 8,
}

impl WaitEventType {
    /// PostgreSQL's spelling of the class.
    pub fn name(self) -> &'static str {
        match self {
            WaitEventType::LwLock => "LWLock",
            WaitEventType::Lock => "Lock",
            WaitEventType::BufferPin => "BufferPin",
            WaitEventType::Ipc => "IPC",
            WaitEventType::Io => "IO",
            WaitEventType::Timeout => "Timeout",
            WaitEventType::Activity => "Activity",
            WaitEventType::Client => "Client",
        }
    }

    fn from_u8(v: u8) -> Option<WaitEventType> {
        Some(match v {
            1 => WaitEventType::LwLock,
            2 => WaitEventType::Lock,
            3 => WaitEventType::BufferPin,
            4 => WaitEventType::Ipc,
            5 => WaitEventType::Io,
            6 => WaitEventType::Timeout,
            7 => WaitEventType::Activity,
            8 => WaitEventType::Client,
            _ => return None,
        })
    }
}

/// Heavyweight lock tag kinds as wait-event names (`LockTagTypeNames` in `lockfuncs.c`).
const LOCK_NAMES: &[&str] = &[
    "relation",
    "extend",
    "frozenid",
    "page",
    "tuple",
    "transactionid",
    "virtualxid",
    "spectoken",
    "object",
    "userlock",
    "advisory",
];
const BUFFER_PIN_NAMES: &[&str] = &["BufferPin"];
const IPC_NAMES: &[&str] =
    &["ProcArrayGroupUpdate", "XactGroupUpdate", "BufferIO", "LockFlexQueue", "SLRUIO"];
const IO_NAMES: &[&str] = &[
    "WALWrite",
    "WALSync",
    "WALRead",
    "DataFileRead",
    "DataFileWrite",
    "DataFileExtend",
    "DataFileSync",
    "SLRURead",
    "SLRUWrite",
    "SLRUSync",
];
const TIMEOUT_NAMES: &[&str] = &["PgSleep", "CommitDelay", "SpinDelay"];
const ACTIVITY_NAMES: &[&str] = &["WalWriterMain", "CheckpointerMain"];
const CLIENT_NAMES: &[&str] = &["ClientRead"];

/// One wait event: class + event, packed into a `u32` (0 means "not waiting").
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitEvent(u32);

impl WaitEvent {
    /// Not waiting.
    pub const NONE: WaitEvent = WaitEvent(0);
    /// `BufferPin:BufferPin`: waiting for other pins to go away (cleanup lock).
    pub const BUFFER_PIN: WaitEvent = Self::pack(WaitEventType::BufferPin, 0);
    /// `IPC:ProcArrayGroupUpdate`: a group XID-clearing follower (9.6+).
    pub const PROC_ARRAY_GROUP_UPDATE: WaitEvent = Self::pack(WaitEventType::Ipc, 0);
    /// `IPC:XactGroupUpdate`: a group CLOG-update follower (11+).
    pub const XACT_GROUP_UPDATE: WaitEvent = Self::pack(WaitEventType::Ipc, 1);
    /// `IPC:BufferIO`: waiting for another backend's read or write of a buffer.
    pub const BUFFER_IO: WaitEvent = Self::pack(WaitEventType::Ipc, 2);
    /// `IPC:LockFlexQueue`: a FlexLock request waiting for the lock holder to run it (2011
    /// FlexLock design; PostgreSQL never shipped a name for it).
    pub const FLEX_LOCK_QUEUE: WaitEvent = Self::pack(WaitEventType::Ipc, 3);
    /// `IPC:SLRUIO`: waiting for another backend's I/O on an SLRU buffer.
    pub const SLRU_IO: WaitEvent = Self::pack(WaitEventType::Ipc, 4);
    /// `IO:WALWrite`.
    pub const WAL_WRITE: WaitEvent = Self::pack(WaitEventType::Io, 0);
    /// `IO:WALSync`.
    pub const WAL_SYNC: WaitEvent = Self::pack(WaitEventType::Io, 1);
    /// `IO:WALRead`.
    pub const WAL_READ: WaitEvent = Self::pack(WaitEventType::Io, 2);
    /// `IO:DataFileRead`.
    pub const DATA_FILE_READ: WaitEvent = Self::pack(WaitEventType::Io, 3);
    /// `IO:DataFileWrite`.
    pub const DATA_FILE_WRITE: WaitEvent = Self::pack(WaitEventType::Io, 4);
    /// `IO:DataFileExtend`.
    pub const DATA_FILE_EXTEND: WaitEvent = Self::pack(WaitEventType::Io, 5);
    /// `IO:DataFileSync`.
    pub const DATA_FILE_SYNC: WaitEvent = Self::pack(WaitEventType::Io, 6);
    /// `IO:SLRURead`.
    pub const SLRU_READ: WaitEvent = Self::pack(WaitEventType::Io, 7);
    /// `IO:SLRUWrite`.
    pub const SLRU_WRITE: WaitEvent = Self::pack(WaitEventType::Io, 8);
    /// `IO:SLRUSync`.
    pub const SLRU_SYNC: WaitEvent = Self::pack(WaitEventType::Io, 9);
    /// `Timeout:PgSleep` (pgbench's `\sleep`).
    pub const PG_SLEEP: WaitEvent = Self::pack(WaitEventType::Timeout, 0);
    /// `Timeout:CommitDelay`.
    pub const COMMIT_DELAY: WaitEvent = Self::pack(WaitEventType::Timeout, 1);
    /// `Timeout:SpinDelay`: a spinlock's back-off sleep (`s_lock.c`'s `perform_spin_delay`;
    /// PostgreSQL 14+'s `WAIT_EVENT_SPIN_DELAY`).
    pub const SPIN_DELAY: WaitEvent = Self::pack(WaitEventType::Timeout, 2);
    /// `Activity:WalWriterMain`.
    pub const WAL_WRITER_MAIN: WaitEvent = Self::pack(WaitEventType::Activity, 0);
    /// `Client:ClientRead`: a backend idle, waiting for its client's next command (pgbench's
    /// clients publish it while they wait at the harness's start and end gates, which are no
    /// part of the measured work: a wait-event profile leaves those samples out).
    pub const CLIENT_READ: WaitEvent = Self::pack(WaitEventType::Client, 0);

    const fn pack(class: WaitEventType, id: u32) -> WaitEvent {
        WaitEvent(((class as u32) << 24) | (id & 0x00FF_FFFF))
    }

    /// Waiting for an LWLock of `tranche` (`LWLock:<tranche name>`).
    pub const fn lwlock(tranche: TrancheId) -> WaitEvent {
        Self::pack(WaitEventType::LwLock, tranche.0 as u32)
    }

    /// Waiting for a heavyweight lock whose tag kind has index `kind` in PostgreSQL's
    /// `LockTagType` order (0 relation, 1 extend, 2 frozenid, 3 page, 4 tuple, 5 transactionid,
    /// 6 virtualxid, 7 spectoken, 8 object, 9 userlock, 10 advisory).
    ///
    /// # Panics
    /// If `kind` is not one of those indexes.
    pub const fn lock(kind: u8) -> WaitEvent {
        assert!((kind as usize) < LOCK_NAMES.len(), "unknown lock tag kind");
        Self::pack(WaitEventType::Lock, kind as u32)
    }

    /// The packed `u32` (what a [`crate::backend::WaitEventSlot`] stores).
    #[inline]
    pub const fn to_raw(self) -> u32 {
        self.0
    }

    /// Unpacks a value produced by [`WaitEvent::to_raw`]; unknown classes read as `NONE`.
    #[inline]
    pub fn from_raw(raw: u32) -> WaitEvent {
        match WaitEventType::from_u8((raw >> 24) as u8) {
            Some(_) => WaitEvent(raw),
            None => WaitEvent::NONE,
        }
    }

    /// True for [`WaitEvent::NONE`].
    #[inline]
    pub fn is_none(self) -> bool {
        self.0 == 0
    }

    /// The class, or `None` when not waiting.
    pub fn event_type(self) -> Option<WaitEventType> {
        WaitEventType::from_u8((self.0 >> 24) as u8)
    }

    /// The event name (`ProcArray`, `relation`, `WALSync`, ...); "" when not waiting.
    pub fn name(self) -> &'static str {
        let id = (self.0 & 0x00FF_FFFF) as usize;
        let table = match self.event_type() {
            None => return "",
            Some(WaitEventType::LwLock) => return TrancheId(id as u16).name(),
            Some(WaitEventType::Lock) => LOCK_NAMES,
            Some(WaitEventType::BufferPin) => BUFFER_PIN_NAMES,
            Some(WaitEventType::Ipc) => IPC_NAMES,
            Some(WaitEventType::Io) => IO_NAMES,
            Some(WaitEventType::Timeout) => TIMEOUT_NAMES,
            Some(WaitEventType::Activity) => ACTIVITY_NAMES,
            Some(WaitEventType::Client) => CLIENT_NAMES,
        };
        table.get(id).copied().unwrap_or("unknown")
    }
}

impl fmt::Display for WaitEvent {
    /// `Type:Name`, as in pg_wait_sampling's profile (`LWLock:ProcArray`, `Lock:relation`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.event_type() {
            None => f.write_str("(none)"),
            Some(t) => write!(f, "{}:{}", t.name(), self.name()),
        }
    }
}

impl fmt::Debug for WaitEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_postgres() {
        assert_eq!(WaitEvent::lwlock(TrancheId::PROC_ARRAY).to_string(), "LWLock:ProcArray");
        assert_eq!(WaitEvent::lock(0).to_string(), "Lock:relation");
        assert_eq!(WaitEvent::lock(5).to_string(), "Lock:transactionid");
        assert_eq!(WaitEvent::BUFFER_PIN.to_string(), "BufferPin:BufferPin");
        assert_eq!(WaitEvent::WAL_SYNC.to_string(), "IO:WALSync");
        assert_eq!(WaitEvent::PROC_ARRAY_GROUP_UPDATE.to_string(), "IPC:ProcArrayGroupUpdate");
        assert_eq!(WaitEvent::CLIENT_READ.to_string(), "Client:ClientRead");
        assert_eq!(WaitEvent::NONE.to_string(), "(none)");
    }

    #[test]
    fn raw_round_trip() {
        for e in [
            WaitEvent::NONE,
            WaitEvent::lwlock(TrancheId::WAL_INSERT),
            WaitEvent::lock(10),
            WaitEvent::SLRU_SYNC,
            WaitEvent::CLIENT_READ,
        ] {
            assert_eq!(WaitEvent::from_raw(e.to_raw()), e);
        }
        assert_eq!(WaitEvent::from_raw(0xFF00_0001), WaitEvent::NONE);
    }
}
