//! The checks [`super::open`] makes before anything is written, beyond the control file's own
//! fields: pg_xact's length, page CRCs and unassigned xids; every relation file's size, pages
//! and identity; the relations against the control file's scale and next xid; the tables'
//! visible rows and balance sums against the last shutdown's.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use lockstack_bufmgr::{BufferError, BufferTag, FileSmgr, ForkNumber, Smgr};
use lockstack_clog::{
    CLOG_XACTS_PER_BYTE, CLOG_XACTS_PER_PAGE, SLRU_PAGE_SIZE, SLRU_PAGES_PER_SEGMENT, clog_page,
    segment_file_name,
};
use lockstack_common::{BlockNumber, Oid, TransactionId};

use super::control::{Balances, CONTROL_FILE, ControlFile, TableTotals};
use super::files::{io, regular_or_missing, usage};
use crate::engine::Engine;
use crate::error::EngineError;

use crate::tables::TableId;

/// Checks that pg_xact holds the status of every transaction that may be looked up: xids from
/// `FirstNormalTransactionId` (nothing is ever truncated or frozen away here) up to
/// `next_xid - 1`, i.e. every segment file up to that xid's page exists and is long enough.
/// PostgreSQL finds this out only when a lookup fails ("could not access status of
/// transaction"); checking at open refuses the directory before a run reads wrong visibility.
///
/// # Errors
/// [`EngineError::Usage`] "pg_xact is missing or truncated: ..." naming the segment file, or
/// naming a segment that is not a regular file.
pub fn check_pg_xact(dir: &Path, next_xid: TransactionId) -> Result<(), EngineError> {
    if next_xid.0 <= TransactionId::FIRST_NORMAL.0 {
        return Ok(());
    }
    let last_xid = next_xid.0 - 1;
    let last_page = clog_page(TransactionId(last_xid));
    let last_segment = last_page / SLRU_PAGES_PER_SEGMENT;
    for seg in clog_page(TransactionId::FIRST_NORMAL) / SLRU_PAGES_PER_SEGMENT..=last_segment {
        let pages =
            if seg == last_segment { last_page % SLRU_PAGES_PER_SEGMENT + 1 } else { SLRU_PAGES_PER_SEGMENT };
        let need = u64::from(pages) * SLRU_PAGE_SIZE as u64;
        let path = dir.join("pg_xact").join(segment_file_name(seg));
        regular_or_missing(&path)?;
        let have = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(usage(format!(
                    "pg_xact is missing or truncated: segment file \"{}\" does not exist; \
                     transactions up to {last_xid} need it",
                    path.display()
                )));
            }
            Err(e) => return Err(io(&path, "could not stat", e)),
        };
        if have < need {
            return Err(usage(format!(
                "pg_xact is missing or truncated: segment file \"{}\" has {have} bytes, \
                 transactions up to {last_xid} need {need}",
                path.display()
            )));
        }
    }
    Ok(())
}

/// CRC-32C of the pg_xact pages from page 0 to the page of `next_xid - 1`, read from the files
/// (see [`ControlFile::clog_page_crcs`]); empty when no normal xid was assigned.
pub(super) fn pg_xact_crcs(dir: &Path, next_xid: TransactionId) -> Result<Vec<u32>, EngineError> {
    if next_xid.0 <= TransactionId::FIRST_NORMAL.0 {
        return Ok(Vec::new());
    }
    let last_page = clog_page(TransactionId(next_xid.0 - 1));
    let mut out = Vec::with_capacity(last_page as usize + 1);
    for seg in 0..=last_page / SLRU_PAGES_PER_SEGMENT {
        let path = dir.join("pg_xact").join(segment_file_name(seg));
        let bytes = fs::read(&path).map_err(|e| io(&path, "could not read", e))?;
        let first = seg * SLRU_PAGES_PER_SEGMENT;
        for page in first..=last_page.min(first + SLRU_PAGES_PER_SEGMENT - 1) {
            let at = (page - first) as usize * SLRU_PAGE_SIZE;
            let p = bytes.get(at..at + SLRU_PAGE_SIZE).ok_or_else(|| {
                usage(format!(
                    "pg_xact is missing or truncated: segment file \"{}\" has {} bytes, page {page} needs {}",
                    path.display(),
                    bytes.len(),
                    at + SLRU_PAGE_SIZE
                ))
            })?;
            out.push(crc32c::crc32c(p));
        }
    }
    Ok(out)
}

/// With `data_checksums` on, checks every pg_xact page up to the page of `next_xid - 1`
/// against the CRC-32C the last shutdown recorded ([`ControlFile::clog_page_crcs`]): a
/// flipped status bit would otherwise make a committed transaction's rows vanish, or an
/// aborted one's appear, without a word.
///
/// # Errors
/// [`EngineError::Usage`] naming the segment file and the page (or the control file, when
/// its list does not cover `next_xid`).
pub fn check_pg_xact_checksums(dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    if !c.data_checksums {
        return Ok(());
    }
    let have = pg_xact_crcs(dir, TransactionId(c.next_xid))?;
    if have.len() != c.clog_page_crcs.len() {
        return Err(usage(format!(
            "control file \"{}\": clog_page_crcs has {} entries, next_xid {} needs {}",
            dir.join(CONTROL_FILE).display(),
            c.clog_page_crcs.len(),
            c.next_xid,
            have.len()
        )));
    }
    if let Some(page) = (0..have.len()).find(|&p| have[p] != c.clog_page_crcs[p]) {
        let seg = page as u32 / SLRU_PAGES_PER_SEGMENT;
        return Err(usage(format!(
            "pg_xact page {page} (page {} of segment file \"{}\") is damaged: calculated CRC-32C {:#010x} but the \
             last shutdown recorded {:#010x}",
            page as u32 % SLRU_PAGES_PER_SEGMENT,
            dir.join("pg_xact").join(segment_file_name(seg)).display(),
            have[page],
            c.clog_page_crcs[page]
        )));
    }
    Ok(())
}

/// A session on the highest backend id nobody uses (every client has ended when the
/// directory's totals are taken).
pub(super) fn free_session(engine: &Arc<Engine>) -> Result<crate::session::Session, EngineError> {
    let mut last = None;
    for id in (0..engine.cfg.max_backends).rev() {
        match engine.session(lockstack_common::BackendId(id as u32)) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| usage("no backend to take the table totals with".into())))
}

/// Every pgbench table's visible rows and balance sum, as a new snapshot sees them.
///
/// # Errors
/// Buffer, storage and engine errors of the scans.
pub(super) fn table_totals(engine: &Arc<Engine>) -> Result<Balances, EngineError> {
    let mut s = free_session(engine)?;
    let mut get = |t: TableId| -> Result<TableTotals, EngineError> {
        let x = s.table_sums(t)?;
        Ok(TableTotals { rows: x.rows, balance: x.balance })
    };
    Ok(Balances {
        accounts: get(TableId::Accounts)?,
        tellers: get(TableId::Tellers)?,
        branches: get(TableId::Branches)?,
        history: get(TableId::History)?,
    })
}

/// The tables' totals against the [`Balances`] the last shutdown recorded (skipped for a
/// control file without them).
pub(super) fn check_balances(engine: &Arc<Engine>, dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let Some(want) = c.balances else { return Ok(()) };
    let have = table_totals(engine)?;
    for ((t, h), (_, w)) in have.entries().into_iter().zip(want.entries()) {
        if h != w {
            return Err(usage(format!(
                "data directory \"{}\" lost or changed data: {} (file \"{}\") has {} rows with balance sum {}, the \
                 last shutdown left {} rows with sum {} (a damaged, truncated or removed relation file, or damaged \
                 pg_xact); reinitialize it with -i",
                dir.display(),
                t.name(),
                dir.join("base").join(t.heap_oid().0.to_string()).display(),
                h.rows,
                h.balance,
                w.rows,
                w.balance
            )));
        }
    }
    Ok(())
}

/// No transaction at or after `next_xid` has a status yet: garbage there would fail a later
/// commit ("transaction N is aborted, cannot become committed") without naming the file.
/// Checked after the relations, whose xids say whether `next_xid` itself is too low.
///
/// # Errors
/// [`EngineError::Usage`] naming the pg_xact segment file.
pub(super) fn check_pg_xact_unassigned(dir: &Path, next_xid: TransactionId) -> Result<(), EngineError> {
    let (page, xpb) = (clog_page(next_xid), CLOG_XACTS_PER_BYTE);
    let path = dir.join("pg_xact").join(segment_file_name(page / SLRU_PAGES_PER_SEGMENT));
    if fs::metadata(&path).is_ok_and(|m| m.is_file()) {
        let bytes = fs::read(&path).map_err(|e| io(&path, "could not read", e))?;
        let at = (page % SLRU_PAGES_PER_SEGMENT) as usize * SLRU_PAGE_SIZE
            + (next_xid.0 % CLOG_XACTS_PER_PAGE / xpb) as usize;
        let first = bytes.get(at).map_or(0, |b| b >> (2 * (next_xid.0 % xpb)));
        if first != 0 || bytes.get(at + 1..).is_some_and(|rest| rest.iter().any(|b| *b != 0)) {
            return Err(usage(format!(
                "pg_xact segment file \"{}\" is damaged: it holds statuses for transactions at or after \
                 next_xid {} that were never assigned",
                path.display(),
                next_xid.0
            )));
        }
    }
    Ok(())
}

/// The control file's scale and `next_xid` against the relations: pgbench_branches' highest
/// `bid` and pgbench_tellers' highest `tid` (over every row version; rows are never deleted)
/// are the scale's, pgbench_accounts has at least the pages 100000 x scale rows fill at the
/// densest (61 rows of 128 bytes per page), and no row version carries an xid at or after
/// `next_xid`.
pub(super) fn check_relations(engine: &Arc<Engine>, dir: &Path, c: &ControlFile) -> Result<(), EngineError> {
    let field =
        |what: String| usage(format!("control file \"{}\": {what}", dir.join(CONTROL_FILE).display()));
    let bb = engine.pool.attach_auxiliary();
    let next = TransactionId(c.next_xid);
    for t in [TableId::Branches, TableId::Tellers] {
        let (max_key, future) = crate::tables::max_key_and_future_xid(&bb, t, next)?;
        if max_key != t.rows(c.scale) {
            return Err(field(format!(
                "scale {} does not match the data: {} has keys up to {max_key}, scale {} has {}",
                c.scale,
                t.name(),
                c.scale,
                t.rows(c.scale)
            )));
        }
        if let Some(x) = future {
            return Err(field(format!(
                "next_xid {} is not above transaction {x}, found in {}",
                c.next_xid,
                t.name()
            )));
        }
    }
    let accounts = bb.pool().nblocks(TableId::Accounts.heap_oid(), ForkNumber::Main)?;
    let rows_per_page = ((lockstack_bufmgr::page::BLCKSZ - lockstack_bufmgr::page::SIZE_OF_PAGE_HEADER)
        / (128 + lockstack_bufmgr::page::SIZE_OF_ITEM_ID)) as i64;
    let need = (TableId::Accounts.rows(c.scale) + rows_per_page - 1) / rows_per_page;
    if i64::from(accounts) < need {
        return Err(field(format!(
            "scale {} does not match the data: pgbench_accounts has {accounts} pages, scale {} needs at least {need}",
            c.scale, c.scale
        )));
    }
    Ok(())
}

/// The relation forks a data directory may hold in `base/`, with their names for messages:
/// every table's heap and visibility map, and every index.
pub(super) fn relation_forks() -> Vec<(Oid, ForkNumber, String)> {
    let mut v = Vec::new();
    for t in TableId::ALL {
        v.push((t.heap_oid(), ForkNumber::Main, t.name().to_string()));
        v.push((t.heap_oid(), ForkNumber::VisibilityMap, format!("{}'s visibility map", t.name())));
        if let Some(i) = t.index_oid() {
            v.push((i, ForkNumber::Main, format!("{}_pkey", t.name())));
        }
    }
    v
}

/// Checks every relation file in `base/` before the engine is built and anything is written,
/// so that damage found only when a page is first read (by the run, or by the shutdown
/// checkpoint, which then could not shut the directory down) is refused at open instead:
///
/// * `base/` holds only the relation forks lockstack writes for its tables
///   ([`relation_forks`]): an unknown file is refused, as nothing would ever read it;
/// * each file's size is a whole number of blocks;
/// * each page passes, as a read through the buffer pool would check it, its checksum (with
///   `checksums`; it names relation, fork and block, so a file swapped with another
///   relation's or copied over it fails, and the message then names whose pages it holds),
///   `lockstack_bufmgr::page::verify`, and the engine's page check (tuple shapes, B-tree
///   pages, and an index metapage naming its own index).
///
/// A missing file is left to the checks that follow (the tables' totals name it).
///
/// # Errors
/// One line naming the file, and the block when a page fails.
pub(super) fn check_relation_files(dir: &Path, checksums: bool) -> Result<(), EngineError> {
    let base = dir.join("base");
    let forks = relation_forks();
    let smgr = match FileSmgr::new(&base, false) {
        Ok(s) => s.with_checksums(checksums),
        // No base/ at all: the relations' own checks say what is missing.
        Err(_) if !base.exists() => return Ok(()),
        Err(e) => return Err(BufferError::from(e).into()),
    };
    let entries = fs::read_dir(&base).map_err(|e| io(&base, "could not read directory", e))?;
    for e in entries {
        let e = e.map_err(|e| io(&base, "could not read directory", e))?;
        let name = e.file_name();
        let ours = forks.iter().any(|(rel, fork, _)| smgr.path(*rel, *fork).file_name() == Some(&name));
        if !ours {
            return Err(usage(format!(
                "unexpected file \"{}\" in data directory \"{}\": it is none of the relation files lockstack \
                 writes; move it away (or reinitialize the directory with -i)",
                e.path().display(),
                dir.display()
            )));
        }
    }
    let mut buf = vec![0u8; lockstack_bufmgr::page::BLCKSZ];
    for (rel, fork, _) in &forks {
        let (rel, fork) = (*rel, *fork);
        if !smgr.path(rel, fork).exists() {
            continue;
        }
        let nblocks = smgr.nblocks(rel, fork).map_err(BufferError::from)?;
        for b in 0..nblocks {
            if let Err(e) = smgr.read(rel, fork, BlockNumber(b), &mut buf) {
                if e.source.kind() == std::io::ErrorKind::InvalidData
                    && let Some(msg) = whose_page(&smgr, &forks, rel, fork, b)
                {
                    return Err(usage(msg));
                }
                return Err(BufferError::from(e).into());
            }
            let tag = BufferTag { rel, fork, block: BlockNumber(b) };
            lockstack_bufmgr::page::verify(&buf)
                .map_err(|e| e.to_string())
                .and_then(|()| crate::tables::verify_page(tag, &buf).map_err(|e| e.to_string()))
                .map_err(|reason| BufferError::InvalidPage { tag, reason })?;
        }
    }
    Ok(())
}

/// After block `block` of `fork` of `rel` failed its checksum: whether the page carries the
/// checksum of the same block of another relation fork of the directory, i.e. the file holds
/// that fork's pages; the message saying so.
fn whose_page(
    smgr: &FileSmgr,
    forks: &[(Oid, ForkNumber, String)],
    rel: Oid,
    fork: ForkNumber,
    block: u32,
) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let path = smgr.path(rel, fork);
    let mut page = vec![0u8; lockstack_bufmgr::page::BLCKSZ];
    let mut f = fs::File::open(&path).ok()?;
    f.seek(SeekFrom::Start(u64::from(block) * lockstack_bufmgr::page::BLCKSZ as u64)).ok()?;
    f.read_exact(&mut page).ok()?;
    let name = |r: Oid, f: ForkNumber| forks.iter().find(|x| x.0 == r && x.1 == f).map(|x| x.2.clone());
    let (owner, owner_fork, owner_name) = forks.iter().find(|(r, f, _)| {
        (*r, *f) != (rel, fork)
            && lockstack_bufmgr::page::verify_relation_checksum(&page, *r, *f, block).is_ok()
    })?;
    Some(format!(
        "file \"{}\" holds the pages of {owner_name} (file \"{}\"), not of {}: relation files were swapped or \
         copied over each other (block {block} carries the other relation's checksum); put them back or \
         reinitialize the directory with -i",
        path.display(),
        smgr.path(*owner, *owner_fork).display(),
        name(rel, fork)?
    ))
}
