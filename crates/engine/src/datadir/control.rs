//! The control file (`lockstack.control`, standing for `global/pg_control`): its format
//! ([`ControlFile`], JSON with a CRC-32C), reading and writing it (atomically replaced), and
//! the checks of its fields at open.
//!
//! On disk it is one JSON object with two keys, `"control"` (the [`ControlFile`]'s fields,
//! every one present: none is defaulted, and an unknown key is refused) and `"crc32c"`, the
//! CRC-32C of the `"control"` object serialized compactly (`serde_json::to_string`, fields in
//! declaration order). As PostgreSQL's `pg_control` carries a CRC of its contents that
//! `ReadControlFile` checks (`src/backend/access/transam/xlog.c`), a changed byte in a key is
//! an unknown or missing key and a changed byte in a value a CRC mismatch: either refuses the
//! directory, where a renamed `"data_checksums"` used to be read as `false` and written back so.

use std::fs;
use std::io::Write;
use std::path::Path;

use lockstack_common::TransactionId;
use lockstack_xlog::Wal;
use serde::{Deserialize, Serialize};

use super::files::{io, regular_or_missing, usage};
use crate::error::EngineError;

use crate::tables::TableId;

/// The control file's name inside a data directory.
pub const CONTROL_FILE: &str = "lockstack.control";

/// Version of the control file's format this build reads and writes. Version 2 added the
/// CRC, refuses unknown and missing keys, and goes with relation files whose page checksums
/// name their relation and fork and whose B-tree metapages name their index; a directory of
/// another version is refused with a line saying to reinitialize it with `-i`.
pub const CONTROL_VERSION: u32 = 2;

/// Lowest fillfactor a load accepts, percent (pgbench's `-F` range is 10..=100).
pub const MIN_FILLFACTOR: u8 = 10;

/// The cluster state recorded in the control file (PostgreSQL's `DBState`, two of its values).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClusterState {
    /// Cleanly shut down: every page, CLOG page and WAL byte is on disk.
    ShutDown,
    /// Open (or crashed while open): files may lag the WAL.
    InProduction,
}

/// The control file: what a restart needs that the relation files do not say. Every field is
/// required in the file (an `Option` as `null`), and no other key is accepted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlFile {
    /// Format version ([`CONTROL_VERSION`]).
    pub version: u32,
    /// pgbench scale factor the tables were loaded at.
    pub scale: i64,
    /// Heap fillfactor of the load, percent.
    pub fillfactor: u8,
    /// Next transaction id to assign (`nextXid` of the shutdown checkpoint).
    pub next_xid: u32,
    /// End of WAL at shutdown (byte LSN).
    pub end_of_wal: u64,
    /// Segment the next start writes WAL into (the one after `end_of_wal`'s).
    pub next_wal_segment: u64,
    /// Next MultiXactId to assign (`nextMulti` of the shutdown checkpoint), so that the multis
    /// a run left in row xmaxes are never handed out again.
    pub next_multixact: u32,
    /// State.
    pub state: ClusterState,
    /// Whether relation pages carry checksums (PostgreSQL's `data_checksums`, on by default since
    /// 18): every page is written with one and verified when it is read
    /// ([`FileSmgr::with_checksums`](lockstack_bufmgr::FileSmgr::with_checksums)). Every directory
    /// this build loads has them.
    pub data_checksums: bool,
    /// CRC-32C of every pg_xact page from page 0 to the page of `next_xid - 1`, in page order,
    /// taken from the files at shutdown and checked at [`open`](super::open) (SLRU pages have no
    /// header to hold a checksum, so the control file keeps them). Empty (not checked) when
    /// `data_checksums` is off.
    pub clog_page_crcs: Vec<u32>,
    /// The pgbench tables' visible rows and balance sums at shutdown, checked at
    /// [`open`](super::open) against the data; `None` (not checked) only for a control file written
    /// by hand.
    #[serde(deserialize_with = "required")]
    pub balances: Option<Balances>,
    /// Why the last shutdown failed (the error, naming the file), kept with state "in production"
    /// so that [`open`](super::open) can say what went wrong; `None` after a clean shutdown.
    #[serde(deserialize_with = "required")]
    pub last_failure: Option<String>,
    /// Why the directory is damaged: a run's end-of-run consistency check that failed (its name and
    /// figures), recorded by [`shutdown_checked`](super::shutdown_checked). [`open`](super::open)
    /// refuses a damaged directory with this reason unless told to open it anyway
    /// ([`OpenOptions::open_damaged`](super::OpenOptions::open_damaged), the CLI's
    /// `--open-damaged`); only `-i` ([`initialize`](super::initialize)) clears it. `None` while no
    /// check has failed.
    #[serde(deserialize_with = "required")]
    pub damaged: Option<String>,
}

/// Deserializes an `Option` field that must be present (`null` for `None`): serde reads a
/// missing `Option` field as `None` unless the field has its own deserializer.
fn required<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// The file as written: the [`ControlFile`] and the CRC-32C of its compact serialization.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OnDisk {
    control: ControlFile,
    crc32c: u32,
}

/// CRC-32C of `c` serialized compactly: what [`OnDisk::crc32c`] holds.
fn control_crc(c: &ControlFile) -> Result<u32, EngineError> {
    let text = serde_json::to_string(c).map_err(|e| usage(format!("control file: {e}")))?;
    Ok(crc32c::crc32c(text.as_bytes()))
}

/// Visible rows and the sum of the balance column (`delta` for pgbench_history) of one table,
/// as `Session::table_sums` counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableTotals {
    /// Visible rows.
    pub rows: u64,
    /// Sum of the balance column.
    pub balance: i64,
}

/// The four pgbench tables' [`TableTotals`] at a shutdown checkpoint.
///
/// Not "each balance sum equal to the history sum": that
/// equation holds only while every run was tpcb-like (simple-update moves accounts alone, a `-f`
/// script anything), so instead the totals a clean shutdown recorded must be what the next
/// [`open`](super::open) finds, whatever the scripts were. Each run checks its own changes against
/// these (the runner's consistency checks), so the chain from the load (zero balances, no history)
/// to the latest shutdown is checked link by link: a lost history page or a flipped transaction
/// status between two runs changes some table's totals and is refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Balances {
    /// pgbench_accounts.
    pub accounts: TableTotals,
    /// pgbench_tellers.
    pub tellers: TableTotals,
    /// pgbench_branches.
    pub branches: TableTotals,
    /// pgbench_history.
    pub history: TableTotals,
}

impl Balances {
    pub(super) fn entries(&self) -> [(TableId, TableTotals); 4] {
        [
            (TableId::Accounts, self.accounts),
            (TableId::Tellers, self.tellers),
            (TableId::Branches, self.branches),
            (TableId::History, self.history),
        ]
    }
}

/// Reads `dir`'s control file.
///
/// # Errors
/// [`EngineError::Usage`] naming the file when it is missing, not a regular file, unreadable,
/// not valid JSON, has an unknown or missing key, fails its CRC-32C or is of another version
/// (the last two saying to reinitialize with `-i`).
pub fn read_control(dir: &Path) -> Result<ControlFile, EngineError> {
    let path = dir.join(CONTROL_FILE);
    // Reading a FIFO would wait for a writer forever.
    regular_or_missing(&path)?;
    let text = match fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(usage(format!(
                "\"{}\" is not a lockstack data directory (no {CONTROL_FILE}); initialize it with -i --data-dir",
                dir.display()
            )));
        }
        Err(e) => return Err(io(&path, "could not read", e)),
    };
    let invalid = |why: String| usage(format!("invalid control file \"{}\": {why}", path.display()));
    let reinit = |v: &serde_json::Value| {
        usage(format!(
            "control file \"{}\" has version {v}, this build reads version {CONTROL_VERSION}: reinitialize the \
             data directory with -i",
            path.display()
        ))
    };
    let loose: serde_json::Value = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    // A file of version 1 has the fields at the top level and no CRC.
    if loose.get("control").is_none()
        && let Some(v) = loose.get("version")
    {
        return Err(reinit(v));
    }
    let disk: OnDisk = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
    let crc = control_crc(&disk.control)?;
    if crc != disk.crc32c {
        return Err(usage(format!(
            "control file \"{}\" is damaged: calculated CRC-32C {crc:#010x} but the file records {:#010x}; \
             reinitialize the data directory with -i",
            path.display(),
            disk.crc32c
        )));
    }
    if disk.control.version != CONTROL_VERSION {
        return Err(reinit(&disk.control.version.into()));
    }
    Ok(disk.control)
}

/// Replaces `dir`'s control file atomically: write a new temporary file (removing whatever had
/// its name) holding `c` and its CRC-32C, sync it, rename, sync the directory.
///
/// # Errors
/// I/O errors, naming the path.
pub fn write_control(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let tmp = dir.join(format!("{CONTROL_FILE}.tmp"));
    let disk = OnDisk { crc32c: control_crc(c)?, control: c.clone() };
    let mut text = serde_json::to_string_pretty(&disk).map_err(|e| usage(format!("control file: {e}")))?;
    text.push('\n');
    // Whatever a crash (or anyone) left under the temporary name goes first: opening a FIFO
    // there for writing would block forever.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(&tmp, "could not remove", e)),
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| io(&tmp, "could not create", e))?;
    f.write_all(text.as_bytes()).map_err(|e| io(&tmp, "could not write", e))?;
    f.sync_all().map_err(|e| io(&tmp, "could not sync", e))?;
    fs::rename(&tmp, dir.join(CONTROL_FILE))
        .map_err(|e| io(dir, "could not rename the control file in", e))?;
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, "could not sync", e))
}

/// Range checks of a control file's fields (before the relations are looked at): scale at
/// least 1, fillfactor 10..=100, `next_xid` normal, the next WAL segment after the end of WAL.
///
/// # Errors
/// [`EngineError::Usage`] naming the file and the field.
pub fn check_control(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let bad = |field: &str, why: String| {
        Err(usage(format!("control file \"{}\": {field} {why}", dir.join(CONTROL_FILE).display())))
    };
    if c.scale < 1 {
        return bad("scale", format!("must be at least 1, got {}", c.scale));
    }
    if !(MIN_FILLFACTOR..=100).contains(&c.fillfactor) {
        return bad("fillfactor", format!("must be {MIN_FILLFACTOR}..=100, got {}", c.fillfactor));
    }
    if !TransactionId(c.next_xid).is_normal() {
        return bad(
            "next_xid",
            format!("must be at least {}, got {}", TransactionId::FIRST_NORMAL.0, c.next_xid),
        );
    }
    if c.next_wal_segment > lockstack_xlog::WalConfig::MAX_START_SEGMENT {
        return bad(
            "next_wal_segment",
            format!(
                "must be at most {}, got {}",
                lockstack_xlog::WalConfig::MAX_START_SEGMENT,
                c.next_wal_segment
            ),
        );
    }
    if c.next_wal_segment < Wal::start_segment_after(lockstack_xlog::XLogRecPtr(c.end_of_wal)) {
        return bad(
            "next_wal_segment",
            format!("{} is not after end_of_wal {:#X}", c.next_wal_segment, c.end_of_wal),
        );
    }
    Ok(())
}
