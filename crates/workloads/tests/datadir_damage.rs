//! Damaged and faulty data directories: lost files, flipped bits, read-only files, FIFOs,
//! and writes that fail mid-run or at shutdown. Each must end in one line naming the file
//! (and the block or page), never a run that reports success, and a failure after open must
//! leave a directory that opens again or says what to repair.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lockstack_bufmgr::smgr::SmgrOp;
use lockstack_bufmgr::{FileSmgr, ForkNumber, Smgr, SmgrError};
use lockstack_common::{BlockNumber, Oid};
use lockstack_engine::datadir::{self, CONTROL_FILE, ClusterState};
use lockstack_engine::engine::EngineConfig;
use lockstack_engine::tables::TableId;
use lockstack_workloads::pgbench::runner::{self, PgbenchConfig};
use lockstack_workloads::pgbench::script::Builtin;

fn engine_cfg(nbuffers: usize) -> EngineConfig {
    EngineConfig::preset("pg17", 3, nbuffers).unwrap()
}

fn pgbench(clients: usize, transactions: u64, nbuffers: usize) -> PgbenchConfig {
    PgbenchConfig {
        seed: 5,
        ..PgbenchConfig::new(
            vec![Builtin::find("tpcb-like").unwrap().script()],
            clients,
            transactions,
            engine_cfg(nbuffers),
        )
    }
}

/// A scale-1 directory after one run of 2 x 30 tpcb-like transactions, shut down cleanly.
fn used() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    datadir::initialize(engine_cfg(4096), &dir, 1, 100).unwrap();
    let (engine, control) = datadir::open(engine_cfg(4096), &dir).unwrap();
    let r = runner::run_on(&engine, 0.0, &pgbench(2, 30, 4096), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    let c = datadir::shutdown(&engine, &control).unwrap();
    assert!(c.data_checksums && !c.clog_page_crcs.is_empty() && c.balances.unwrap().history.rows == 60);
    (tmp, dir)
}

fn heap_file(dir: &Path, t: TableId) -> PathBuf {
    dir.join("base").join(t.heap_oid().0.to_string())
}

/// The error of opening `dir`, which must fail; it must be one line.
fn open_err(dir: &Path) -> String {
    match datadir::open(engine_cfg(4096), dir) {
        Ok(_) => panic!("{} opened", dir.display()),
        Err(e) => {
            let e = e.to_string();
            assert!(!e.contains('\n'), "more than one line: {e}");
            e
        }
    }
}

/// Opens, runs a few transactions and shuts down: the directory is usable.
fn usable(dir: &Path) {
    let (engine, control) = datadir::open(engine_cfg(4096), dir).unwrap();
    let r = runner::run_on(&engine, 0.0, &pgbench(2, 5, 4096), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    datadir::shutdown(&engine, &control).unwrap();
}

/// `truncate -s 0` or `rm` of pgbench_history's file: the run used to start (and pass every
/// check, which compare only what the run changed).
#[test]
fn a_truncated_or_removed_history_file_is_refused() {
    let (_tmp, dir) = used();
    let hist = heap_file(&dir, TableId::History);
    let clean = fs::read(&hist).unwrap();
    fs::OpenOptions::new().write(true).open(&hist).unwrap().set_len(0).unwrap();
    let e = open_err(&dir);
    assert!(
        e.contains("lost or changed data: pgbench_history") && e.contains(&*hist.to_string_lossy()),
        "{e}"
    );
    assert!(e.contains("has 0 rows") && e.contains("left 60 rows"), "{e}");
    fs::remove_file(&hist).unwrap();
    let e = open_err(&dir);
    assert!(e.contains("lost or changed data: pgbench_history"), "{e}");
    // Refusals change nothing: with the file back, the directory opens.
    fs::write(&hist, clean).unwrap();
    usable(&dir);
}

/// One flipped bit anywhere in a heap page is an error naming the file and the block.
#[test]
fn a_flipped_bit_in_a_relation_page_names_file_and_block() {
    let (_tmp, dir) = used();
    for (t, block, byte) in [
        (TableId::Accounts, 7usize, 3000usize),
        (TableId::Tellers, 0, 8100),
        (TableId::History, 0, 30),
        (TableId::Branches, 0, 100),
    ] {
        let f = heap_file(&dir, t);
        let clean = fs::read(&f).unwrap();
        let mut bytes = clean.clone();
        bytes[block * 8192 + byte] ^= 0x04;
        fs::write(&f, &bytes).unwrap();
        let e = open_err(&dir);
        let want =
            format!("could not read block {block} in file \"{}\": page verification failed", f.display());
        assert!(e.starts_with(&want), "{t:?}: want {want:?}, got {e}");
        fs::write(&f, clean).unwrap();
    }
    // Index pages and visibility-map pages, which the open's scans of the tables do not read,
    // are checked at open too, before anything is written: the refusal names the file and
    // block, and the directory stays as it was.
    let index = dir.join("base").join(TableId::Accounts.index_oid().unwrap().0.to_string());
    let vm = dir.join("base").join(format!("{}_vm", TableId::Accounts.heap_oid().0));
    for (f, block) in [(&index, 3usize), (&vm, 0)] {
        let clean = fs::read(f).unwrap();
        let control = fs::read(dir.join(CONTROL_FILE)).unwrap();
        let mut bytes = clean.clone();
        bytes[block * 8192 + 5000] ^= 0x01;
        fs::write(f, &bytes).unwrap();
        let e = open_err(&dir);
        let want =
            format!("could not read block {block} in file \"{}\": page verification failed", f.display());
        assert!(e.starts_with(&want), "want {want:?}, got {e}");
        assert_eq!(fs::read(f).unwrap(), bytes, "a damaged page was written back");
        assert_eq!(
            fs::read(dir.join(CONTROL_FILE)).unwrap(),
            control,
            "the refusal changed the control file"
        );
        fs::write(f, clean).unwrap();
    }
    usable(&dir);
}

/// Every single-bit flip tried in the used part of pg_xact (status bits of committed
/// transactions and of never-assigned ones) is refused, naming the segment file and page.
#[test]
fn clog_bit_flips_are_refused_naming_the_page() {
    let (_tmp, dir) = used();
    let next_xid = datadir::read_control(&dir).unwrap().next_xid as usize;
    let seg = dir.join("pg_xact").join("0000");
    let clean = fs::read(&seg).unwrap();
    // Xid x's two status bits are bits 2*(x % 4) of byte x / 4.
    for (xid, bit) in
        [(3usize, 0u8), (4, 1), (10, 0), (11, 1), (next_xid - 1, 0), (next_xid - 1, 1), (next_xid + 5, 0)]
    {
        let mut bytes = clean.clone();
        bytes[xid / 4] ^= 1 << (2 * (xid % 4) as u8 + bit);
        fs::write(&seg, &bytes).unwrap();
        let e = open_err(&dir);
        let want = format!("pg_xact page 0 (page 0 of segment file \"{}\") is damaged", seg.display());
        assert!(e.starts_with(&want), "xid {xid} bit {bit}: {e}");
    }
    fs::write(&seg, clean).unwrap();
    usable(&dir);
}

/// Read-only files and directories a run writes, and non-regular files, are refused at open
/// (checked explicitly: tests run as root, for whom the kernel ignores the mode), and the
/// directory opens once the cause is fixed.
#[cfg(unix)]
#[test]
fn unwritable_and_non_regular_files_are_refused_at_open() {
    use std::os::unix::fs::PermissionsExt;
    let (_tmp, dir) = used();
    let vm = dir.join("base").join(format!("{}_vm", TableId::Accounts.heap_oid().0));
    assert!(vm.exists());
    for (path, mode) in [
        (vm.clone(), 0o444),
        (dir.join("pg_xact").join("0000"), 0o444),
        (dir.join("pg_wal"), 0o555),
        (dir.join("base"), 0o555),
    ] {
        let old = fs::metadata(&path).unwrap().permissions().mode();
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
        let e = open_err(&dir);
        assert!(e.starts_with(&format!("\"{}\" is read-only", path.display())), "{e}");
        fs::set_permissions(&path, fs::Permissions::from_mode(old)).unwrap();
        assert_eq!(datadir::read_control(&dir).unwrap().state, ClusterState::ShutDown);
    }
    usable(&dir);
    // FIFOs in place of the control file, the lock file, a relation fork, a CLOG segment and
    // the temporary control file: refused (or, for the temporary file, replaced), never opened
    // (a FIFO blocks its reader), each within a bounded time.
    let mkfifo = |p: &Path| assert!(std::process::Command::new("mkfifo").arg(p).status().unwrap().success());
    for name in [CONTROL_FILE, datadir::LOCK_FILE, "base/16386", "pg_xact/0000"] {
        let path = dir.join(name);
        let saved = fs::read(&path).ok();
        if path.exists() {
            fs::remove_file(&path).unwrap();
        }
        mkfifo(&path);
        let d = dir.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            tx.send(datadir::open(engine_cfg(4096), &d).map(|_| ()).map_err(|e| e.to_string()))
        });
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("{name}: open blocked"));
        let e = r.expect_err(name);
        assert!(
            e.starts_with(&format!("\"{}\" is a FIFO, not a regular file", path.display())),
            "{name}: {e}"
        );
        fs::remove_file(&path).unwrap();
        if let Some(bytes) = saved {
            fs::write(&path, bytes).unwrap();
        }
    }
    mkfifo(&dir.join(format!("{CONTROL_FILE}.tmp")));
    usable(&dir);
}

/// A storage manager over the directory's files that fails writes (and extensions) of
/// relation `rel` (any relation if `None`) while `remaining` is above zero, as a full disk or
/// an I/O error would.
#[derive(Debug)]
struct Faulty {
    inner: Arc<FileSmgr>,
    rel: Option<Oid>,
    remaining: AtomicU64,
    failed: AtomicU64,
}

impl Faulty {
    fn fail(&self, op: SmgrOp, rel: Oid, fork: ForkNumber, block: BlockNumber) -> Result<(), SmgrError> {
        if self.rel.is_some_and(|r| r != rel)
            || self.remaining.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err()
        {
            return Ok(());
        }
        self.failed.fetch_add(1, Ordering::SeqCst);
        Err(SmgrError {
            op,
            rel,
            fork,
            block: Some(block),
            path: Some(self.inner.path(rel, fork)),
            source: io::Error::other("injected write error"),
        })
    }
}

impl Smgr for Faulty {
    fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, SmgrError> {
        self.inner.nblocks(rel, fork)
    }
    fn read(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &mut [u8]) -> Result<(), SmgrError> {
        self.inner.read(rel, fork, block, buf)
    }
    fn write(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        self.fail(SmgrOp::Write, rel, fork, block)?;
        self.inner.write(rel, fork, block, buf)
    }
    fn extend(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        self.fail(SmgrOp::Extend, rel, fork, block)?;
        self.inner.extend(rel, fork, block, buf)
    }
    fn sync(&self, rel: Oid, fork: ForkNumber) -> Result<(), SmgrError> {
        self.inner.sync(rel, fork)
    }
}

fn open_faulty(
    dir: &Path,
    nbuffers: usize,
    rel: Option<Oid>,
    failures: u64,
) -> (Arc<lockstack_engine::engine::Engine>, datadir::ControlFile, Arc<Faulty>) {
    let mut faulty = None;
    let (engine, control) = datadir::open_wrapped(engine_cfg(nbuffers), dir, |inner| {
        let f =
            Arc::new(Faulty { inner, rel, remaining: AtomicU64::new(failures), failed: AtomicU64::new(0) });
        faulty = Some(Arc::clone(&f));
        f
    })
    .unwrap();
    (engine, control, faulty.unwrap())
}

/// A write that fails mid-run (an eviction from a small pool): the run fails, the shutdown
/// after it writes everything, and the next run opens the directory and finds every total
/// as the shutdown left it.
#[test]
fn a_write_failing_mid_run_leaves_a_directory_that_opens() {
    let (_tmp, dir) = used();
    let (engine, control, faulty) = open_faulty(&dir, 64, None, 1);
    let r = runner::run_on(&engine, 0.0, &pgbench(1, 400, 64), &|_| {});
    assert_eq!(faulty.failed.load(Ordering::SeqCst), 1, "no write was tried mid-run");
    let Err(e) = r else { panic!("the run did not report the failed write") };
    let e = e.to_string();
    assert!(e.contains("injected write error") && e.contains("base/"), "{e}");
    let c = datadir::shutdown(&engine, &control).unwrap();
    drop(engine);
    assert_eq!(c.state, ClusterState::ShutDown);
    usable(&dir);
}

/// A write that fails at shutdown, and keeps failing: the directory is left "in production"
/// with the reason, and the next open says what failed and what to do.
#[test]
fn a_write_failing_at_shutdown_is_reported_by_the_next_open() {
    let (_tmp, dir) = used();
    let accounts = TableId::Accounts.heap_oid();
    let (engine, control, faulty) = open_faulty(&dir, 4096, Some(accounts), u64::MAX);
    let r = runner::run_on(&engine, 0.0, &pgbench(2, 20, 4096), &|_| {}).unwrap();
    assert!(r.checks.iter().all(|c| c.ok));
    assert_eq!(faulty.failed.load(Ordering::SeqCst), 0, "the pool is large enough for no eviction");
    let e = datadir::shutdown(&engine, &control).unwrap_err().to_string();
    drop(engine);
    let file = dir.join("base").join(accounts.0.to_string());
    assert!(e.contains(&format!("in file \"{}\": injected write error", file.display())), "{e}");
    let e = open_err(&dir);
    assert!(e.contains("not shut down cleanly (its last shutdown failed: could not write block"), "{e}");
    assert!(e.contains(&*file.to_string_lossy()) && e.contains("reinitialize it with -i"), "{e}");
    datadir::initialize(engine_cfg(4096), &dir, 1, 100).unwrap();
    usable(&dir);
}
