//! `lockstack buffers`: seed 004's buffer-pin experiments on the buffer pool, each variant in one
//! run.
//!
//! * `hot-pin`: every thread pins and unpins the same page (a B-tree root, the VM page) as fast
//!   as it can: the cost of maintaining the shared pin count, per header design (9.2 spinlock vs
//!   9.6 atomic state word).
//! * `scan`: every thread scans the whole table, page by page, checking whether each page is
//!   all-visible the way the [`VmCheck`] variant says (page flag, or the VM page pinned per page,
//!   or kept pinned). Jeff Davis's first test (concurrent scans of one table).
//! * `vm-delete`: thread `t` repeatedly "deletes" every tuple of heap page `t`, following the
//!   heap-modification protocol of its [`VmCheck`] variant; the pages are disjoint, so the only
//!   shared page is the VM page. His second test (`DELETE ... WHERE ctid BETWEEN (N,0) AND
//!   (N,256)`).
//!
//! Every row builds a fresh pool, loads the table with every page all-visible (page flag and VM
//! bit), runs for the configured time and then checks the pool's invariants and the table's
//! contents (scan: tuple counts seen; vm-delete: every tuple of a thread's page carries that
//! thread's delete count; a lost update or a torn page fails the row).

use super::error::{BenchError, check_threads_and_duration};
use lockstack_common::sync::{AtomicBool, Ordering};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use lockstack_common::sync::Instant;

use lockstack_bufmgr::vm::{VISIBILITYMAP_ALL_VISIBLE, VisibilityMap, VmBuffer, VmCheck};
use lockstack_bufmgr::{
    BackendBuffers, BufferPool, BufferPoolConfig, BufferStats, ForkNumber, HeaderKind, LwLockKind,
    LwLockMode, MappingKind, VictimKind, page,
};
use lockstack_common::{BackendId, BlockNumber, Oid};
use lockstack_lwlock::{TrancheId, stats};
use serde::Serialize;

use crate::report::MachineNote;

/// The variant enums a caller needs to fill a [`BuffersConfig`], re-exported so the CLI need not
/// depend on the buffer manager crate.
pub use lockstack_bufmgr::{
    HeaderKind as Header, MappingKind as Mapping, VictimKind as Victim, vm::VmCheck as Check,
};

/// The relation the workload builds.
const REL: Oid = Oid(16384);
/// Tuples per heap page and their size in bytes (about pgbench_accounts' 97-byte rows).
const TUPLES_PER_PAGE: u16 = 60;
const TUPLE_LEN: usize = 100;

/// Which experiment.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferScenario {
    /// Every thread pins and unpins one hot page.
    HotPin,
    /// Concurrent full scans of one table.
    Scan,
    /// Per-thread deletes on disjoint pages sharing one VM page.
    VmDelete,
}

impl BufferScenario {
    /// Name on the command line: `hot-pin`, `scan`, `vm-delete`.
    pub fn name(self) -> &'static str {
        match self {
            BufferScenario::HotPin => "hot-pin",
            BufferScenario::Scan => "scan",
            BufferScenario::VmDelete => "vm-delete",
        }
    }
}

impl fmt::Display for BufferScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BufferScenario {
    type Err = String;
    /// Parses `hot-pin`, `scan` or `vm-delete`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hot-pin" => Ok(BufferScenario::HotPin),
            "scan" => Ok(BufferScenario::Scan),
            "vm-delete" => Ok(BufferScenario::VmDelete),
            _ => Err(format!("unknown scenario '{s}' (valid: hot-pin, scan, vm-delete)")),
        }
    }
}

/// Parameters of one `lockstack buffers` run.
#[derive(Clone, Debug)]
pub struct BuffersConfig {
    /// The experiment.
    pub scenario: BufferScenario,
    /// Header designs to compare (one row each, times `vm_checks` for scan and vm-delete).
    pub headers: Vec<HeaderKind>,
    /// Visibility-check variants to compare (scan and vm-delete; ignored by hot-pin).
    pub vm_checks: Vec<VmCheck>,
    /// Mapping table of every row.
    pub mapping: MappingKind,
    /// Victim selection of every row.
    pub victim: VictimKind,
    /// Worker threads per row.
    pub threads: usize,
    /// Measured time per row.
    pub duration: Duration,
    /// Heap pages in the table (vm-delete needs at least one per thread).
    pub table_pages: u32,
    /// Buffers in the pool (smaller than the table + VM pages makes scans evict).
    pub pool_buffers: usize,
    /// vm-delete: every this many deletes a thread marks its page all-visible again, as VACUUM
    /// would (0 = never, the seed's setting).
    pub vacuum_every: u32,
}

impl BuffersConfig {
    /// Checks ranges.
    ///
    /// # Errors
    /// A one-line message naming the bad parameter.
    pub fn validate(&self) -> Result<(), BenchError> {
        check_threads_and_duration(self.threads, self.duration)?;
        if self.headers.is_empty() {
            return Err(BenchError::Config("--header: no header design given".into()));
        }
        if self.scenario != BufferScenario::HotPin && self.vm_checks.is_empty() {
            return Err(BenchError::Config("--vm-check: no visibility-check variant given".into()));
        }
        if self.table_pages == 0 || self.table_pages > 1 << 20 {
            return Err(BenchError::Config(format!(
                "--table-pages must be 1..=1048576, got {}",
                self.table_pages
            )));
        }
        if self.scenario == BufferScenario::VmDelete && (self.table_pages as usize) < self.threads {
            return Err(BenchError::Config(format!(
                "--table-pages ({}) must be at least --threads ({}) for vm-delete: each thread owns a page",
                self.table_pages, self.threads
            )));
        }
        // Each worker holds at most 2 pins at a time (heap page + VM page).
        let min = (2 * self.threads + 8).max(16);
        if self.pool_buffers < min || self.pool_buffers > lockstack_bufmgr::MAX_BUFFERS {
            return Err(BenchError::Config(format!(
                "--pool-buffers must be {min}..={} for {} threads, got {}",
                lockstack_bufmgr::MAX_BUFFERS,
                self.threads,
                self.pool_buffers
            )));
        }
        self.mapping.validate().map_err(|e| BenchError::Config(format!("--mapping: {e}")))
    }

    fn rows(&self) -> Vec<(HeaderKind, Option<VmCheck>)> {
        let mut v = Vec::new();
        for &h in &self.headers {
            if self.scenario == BufferScenario::HotPin {
                v.push((h, None));
            } else {
                v.extend(self.vm_checks.iter().map(|&c| (h, Some(c))));
            }
        }
        v
    }
}

/// The parameters as the report prints them.
#[derive(Clone, Debug, Serialize)]
pub struct BuffersConfigEcho {
    /// Scenario name.
    pub scenario: BufferScenario,
    /// Mapping table name.
    pub mapping: String,
    /// Victim strategy name.
    pub victim: String,
    /// Worker threads.
    pub threads: usize,
    /// Seconds per row.
    pub duration_s: f64,
    /// Heap pages.
    pub table_pages: u32,
    /// Pool buffers.
    pub pool_buffers: usize,
    /// VACUUM period of vm-delete (0 = never).
    pub vacuum_every: u32,
}

/// LWLock figures of one row for the buffer tranches (sleeps and acquisitions).
#[derive(Clone, Debug, Default, Serialize)]
pub struct BufferLwLockCounts {
    /// `BufferMapping` acquisitions.
    pub mapping_acquire: u64,
    /// `BufferMapping` sleeps.
    pub mapping_block: u64,
    /// `BufferContent` acquisitions.
    pub content_acquire: u64,
    /// `BufferContent` sleeps.
    pub content_block: u64,
    /// `BufFreelist` acquisitions (9.2 victim strategy only).
    pub freelist_acquire: u64,
}

/// One row: a header design and (scan, vm-delete) a visibility-check variant.
#[derive(Clone, Debug, Serialize)]
pub struct BuffersRow {
    /// `spinlock` or `atomic`.
    pub header: String,
    /// The visibility-check variant (None for hot-pin).
    pub vm_check: Option<String>,
    /// Operations: pin+unpin pairs (hot-pin), pages scanned (scan), deletes (vm-delete).
    pub ops: u64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Buffer counters of the run (pins that waited, VM pins, hits, ...).
    pub buffers: BufferStats,
    /// LWLock counters of the buffer tranches.
    pub lwlocks: BufferLwLockCounts,
    /// Invariants and contents checked after the run.
    pub invariant_ok: bool,
    /// What failed, if anything.
    pub error: Option<String>,
}

impl BuffersRow {
    /// Pins that waited per 1000 operations.
    pub fn pin_waits_per_kop(&self) -> f64 {
        1000.0 * self.buffers.pin_waits as f64 / self.ops.max(1) as f64
    }
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct BuffersReport {
    /// The parameters.
    pub config: BuffersConfigEcho,
    /// Cores and oversubscription.
    pub machine: MachineNote,
    /// One row per variant.
    pub rows: Vec<BuffersRow>,
}

fn tuple(thread_tag: u32) -> [u8; TUPLE_LEN] {
    let mut t = [0u8; TUPLE_LEN];
    t[0..4].copy_from_slice(&thread_tag.to_le_bytes());
    t
}

/// Builds the table: `pages` heap pages of `TUPLES_PER_PAGE` tuples, all-visible in page flag
/// and VM.
fn load(bb: &BackendBuffers, pages: u32) -> Result<(), BenchError> {
    let vm = VisibilityMap::new(REL);
    let mut vmbuf = VmBuffer::new();
    for p in 0..pages {
        vm.pin(bb, p, &mut vmbuf)?;
        let (buf, blk) = bb.extend(REL, ForkNumber::Main)?;
        let mut g = bb.lock(buf, LwLockMode::Exclusive);
        page::init(g.page_mut(), 0);
        for _ in 0..TUPLES_PER_PAGE {
            page::add_item(g.page_mut(), &tuple(blk.0), None)
                .ok_or_else(|| BenchError::Check("page full while loading".into()))?;
        }
        g.mark_dirty();
        vm.set(&mut g, &vmbuf, VISIBILITYMAP_ALL_VISIBLE, 0);
        drop(g);
        bb.release(buf);
    }
    vmbuf.release(bb);
    Ok(())
}

struct Worker<'a> {
    bb: BackendBuffers,
    vm: VisibilityMap,
    check: Option<VmCheck>,
    cfg: &'a BuffersConfig,
    t: usize,
}

impl Worker<'_> {
    /// One batch of operations; returns how many, or a message on a failed check.
    fn batch(&mut self, vmbuf: &mut VmBuffer, deletes: &mut u64) -> Result<u64, BenchError> {
        let bb = &self.bb;
        match self.cfg.scenario {
            BufferScenario::HotPin => {
                for _ in 0..64 {
                    let b = bb.read_block(REL, BlockNumber(0))?;
                    bb.release(b);
                }
                Ok(64)
            }
            BufferScenario::Scan => {
                let check = self
                    .check
                    .expect("rows() pairs every scan row with a visibility check (validate requires one)");
                let n = self.cfg.table_pages;
                // Threads start at different pages so that not all of them walk in lockstep.
                let start = (self.t as u32).wrapping_mul(n / self.cfg.threads.max(1) as u32) % n;
                let batch = n.min(64);
                for i in 0..batch {
                    let blk = (start + i + (*deletes as u32)) % n;
                    let b = bb.read_block(REL, BlockNumber(blk))?;
                    let g = bb.lock(b, LwLockMode::Shared);
                    let visible = self.vm.is_all_visible(&g, vmbuf, check)?;
                    // A sequential scan returns every tuple of the page, all-visible or not
                    // (PostgreSQL's heapgettup_pagemode skips only the visibility test on an
                    // all-visible page): read each tuple's header word.
                    let max = page::max_offset_number(g.page());
                    let mut seen = 0u16;
                    let mut words = 0u64;
                    for o in 1..=max {
                        if let Some(t) = page::get_item(g.page(), o).filter(|t| t.len() == TUPLE_LEN) {
                            seen += 1;
                            words = words.wrapping_add(u64::from_le_bytes(
                                t[..8].try_into().expect("an 8-byte range converts to [u8; 8]"),
                            ));
                        }
                    }
                    std::hint::black_box(words);
                    drop(g);
                    bb.release(b);
                    if seen != TUPLES_PER_PAGE || !visible {
                        return Err(BenchError::Check(format!(
                            "page {blk}: saw {seen} tuples, all-visible {visible}"
                        )));
                    }
                }
                *deletes += u64::from(batch);
                Ok(u64::from(batch))
            }
            BufferScenario::VmDelete => {
                let check = self.check.expect(
                    "rows() pairs every vm-delete row with a visibility check (validate requires one)",
                );
                let blk = self.t as u32;
                for _ in 0..16 {
                    let b = bb.read_block(REL, BlockNumber(blk))?;
                    let mut g = self.vm.lock_heap_for_update(bb, b, vmbuf, check)?;
                    self.vm.clear_for_update(&mut g, vmbuf, check);
                    *deletes += 1;
                    let stamp = *deletes;
                    let p = g.page_mut();
                    for o in 1..=page::max_offset_number(p) {
                        let t = page::get_item_mut(p, o)
                            .ok_or_else(|| BenchError::Check("missing tuple".into()))?;
                        // "xmax": the delete count, at bytes 4..12.
                        t[4..12].copy_from_slice(&stamp.to_le_bytes());
                    }
                    g.mark_dirty();
                    if self.cfg.vacuum_every > 0 && stamp.is_multiple_of(u64::from(self.cfg.vacuum_every)) {
                        drop(g);
                        self.vm.pin(bb, blk, vmbuf)?;
                        let mut g = bb.lock(b, LwLockMode::Exclusive);
                        self.vm.set(&mut g, vmbuf, VISIBILITYMAP_ALL_VISIBLE, 0);
                    } else {
                        drop(g);
                    }
                    self.vm.end_operation(bb, vmbuf, check);
                    bb.release(b);
                }
                Ok(16)
            }
        }
    }
}

fn lwlock_counts(d: &stats::LwLockStatsSnapshot) -> BufferLwLockCounts {
    let m = d.tranche(TrancheId::BUFFER_MAPPING);
    let c = d.tranche(TrancheId::BUFFER_CONTENT);
    let f = d.tranche(TrancheId::BUF_FREELIST);
    BufferLwLockCounts {
        mapping_acquire: m.acquisitions(),
        mapping_block: m.block,
        content_acquire: c.acquisitions(),
        content_block: c.block,
        freelist_acquire: f.acquisitions(),
    }
}

/// After a vm-delete row: every tuple of thread `t`'s page carries the thread's delete count.
fn check_deletes(bb: &BackendBuffers, counts: &[u64]) -> Result<(), BenchError> {
    for (t, &n) in counts.iter().enumerate() {
        let b = bb.read_block(REL, BlockNumber(t as u32))?;
        let g = bb.lock(b, LwLockMode::Shared);
        for o in 1..=page::max_offset_number(g.page()) {
            let it = page::get_item(g.page(), o).ok_or_else(|| BenchError::Check("missing tuple".into()))?;
            let got = u64::from_le_bytes(it[4..12].try_into().expect("an 8-byte range converts to [u8; 8]"));
            if got != n
                || u32::from_le_bytes(it[0..4].try_into().expect("a 4-byte range converts to [u8; 4]"))
                    != t as u32
            {
                return Err(BenchError::Check(format!(
                    "page {t} tuple {o}: delete count {got}, expected {n}"
                )));
            }
        }
        drop(g);
        bb.release(b);
    }
    Ok(())
}

fn run_row(
    cfg: &BuffersConfig,
    header: HeaderKind,
    check: Option<VmCheck>,
) -> Result<BuffersRow, BenchError> {
    let lwlock = if header == HeaderKind::Spinlock { LwLockKind::Pg92 } else { LwLockKind::Atomic };
    let pcfg = BufferPoolConfig {
        nbuffers: cfg.pool_buffers,
        header,
        mapping: cfg.mapping,
        victim: cfg.victim,
        lwlock_kind: lwlock,
        desc_padding: lockstack_bufmgr::DescPadding::default(),
    };
    let pool = BufferPool::in_memory(pcfg)?;
    let pages = if cfg.scenario == BufferScenario::HotPin { 1 } else { cfg.table_pages };
    load(&pool.attach_auxiliary(), pages)?;
    pool.reset_stats();
    let before = stats::snapshot();
    let stop = AtomicBool::new(false);
    let gate = lockstack_common::StartGate::new();
    let mut elapsed = Duration::ZERO;
    let results: Vec<Result<(u64, u64), BenchError>> = lockstack_common::sync::thread::measured_scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                let (pool, stop, gate) = (Arc::clone(&pool), &stop, &gate);
                s.spawn(move || {
                    let bb = pool.attach(BackendId(t as u32))?;
                    let mut w = Worker { bb, vm: VisibilityMap::new(REL), check, cfg, t };
                    let mut vmbuf = VmBuffer::new();
                    let (mut ops, mut deletes) = (0u64, 0u64);
                    gate.arrive_and_wait();
                    let first = Instant::now();
                    let mut r = Ok(());
                    while !stop.load(Ordering::Relaxed) {
                        match w.batch(&mut vmbuf, &mut deletes) {
                            Ok(n) => ops += n,
                            Err(e) => {
                                r = Err(e);
                                stop.store(true, Ordering::Relaxed);
                                break;
                            }
                        }
                    }
                    let last = Instant::now();
                    vmbuf.release(&w.bb);
                    r.map(|()| (ops, deletes, first, last))
                })
            })
            .collect();
        gate.open_when_arrived(cfg.threads, || handles.iter().any(|h| h.is_finished()));
        let start = Instant::now();
        lockstack_common::sync::sleep(cfg.duration);
        stop.store(true, Ordering::Relaxed);
        let r: Vec<Result<(u64, u64, Instant, Instant), BenchError>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(BenchError::Check("worker panicked".into()))))
            .collect();
        elapsed = super::workers_interval(
            r.iter().filter_map(|x| x.as_ref().ok()).map(|x| (x.2, x.3)),
            start.elapsed(),
        );
        r.into_iter().map(|x| x.map(|(o, d, _, _)| (o, d))).collect()
    });
    let lw = lwlock_counts(&stats::snapshot().since(&before));
    let buffers = pool.stats();
    let mut error = None;
    let mut ops = 0;
    let mut deletes = Vec::new();
    for r in results {
        match r {
            Ok((o, d)) => {
                ops += o;
                deletes.push(d);
            }
            Err(e) => error = error.or(Some(e.to_string())),
        }
    }
    if error.is_none() && cfg.scenario == BufferScenario::VmDelete {
        error = check_deletes(&pool.attach_auxiliary(), &deletes).err().map(|e| e.to_string());
    }
    if error.is_none() {
        error = pool.check_invariants().err().map(|e| e.to_string());
    }
    Ok(BuffersRow {
        header: header.name().into(),
        vm_check: check.map(|c| c.name().into()),
        ops,
        ops_per_sec: ops as f64 / elapsed.as_secs_f64(),
        buffers,
        lwlocks: lw,
        invariant_ok: error.is_none(),
        error,
    })
}

/// Runs every row and returns the report.
///
/// # Errors
/// The message of [`BuffersConfig::validate`], or a pool set-up failure.
pub fn run(cfg: &BuffersConfig) -> Result<BuffersReport, BenchError> {
    cfg.validate()?;
    let mut rows = Vec::new();
    for (h, c) in cfg.rows() {
        rows.push(run_row(cfg, h, c)?);
    }
    Ok(BuffersReport {
        config: BuffersConfigEcho {
            scenario: cfg.scenario,
            mapping: cfg.mapping.name(),
            victim: cfg.victim.name().into(),
            threads: cfg.threads,
            duration_s: cfg.duration.as_secs_f64(),
            table_pages: cfg.table_pages,
            pool_buffers: cfg.pool_buffers,
            vacuum_every: cfg.vacuum_every,
        },
        machine: MachineNote::for_threads(cfg.threads),
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(scenario: BufferScenario) -> BuffersConfig {
        BuffersConfig {
            scenario,
            headers: HeaderKind::ALL.to_vec(),
            vm_checks: VmCheck::ALL.to_vec(),
            mapping: MappingKind::default(),
            victim: VictimKind::default(),
            threads: 3,
            duration: Duration::from_millis(40),
            table_pages: 64,
            pool_buffers: 256,
            vacuum_every: 0,
        }
    }

    #[test]
    fn every_scenario_runs_clean_with_the_expected_vm_pins() {
        let rep = run(&cfg(BufferScenario::HotPin)).unwrap();
        assert_eq!(rep.rows.len(), 2);
        for r in &rep.rows {
            assert!(r.invariant_ok, "{:?}", r.error);
            assert!(r.ops > 0);
            // Each pin is a hit on the one page.
            assert_eq!(r.buffers.hits, r.ops, "{}", r.header);
            assert_eq!(r.buffers.vm_pins, 0);
        }
        for scenario in [BufferScenario::Scan, BufferScenario::VmDelete] {
            let mut c = cfg(scenario);
            c.vacuum_every = if scenario == BufferScenario::VmDelete { 5 } else { 0 };
            let rep = run(&c).unwrap();
            assert_eq!(rep.rows.len(), 6);
            for r in &rep.rows {
                assert!(r.invariant_ok, "{scenario} {:?}: {:?}", r.vm_check, r.error);
                assert!(r.ops > 0);
                let vm = r.vm_check.as_deref().unwrap();
                if scenario == BufferScenario::Scan {
                    match vm {
                        "page-flag-first" => assert_eq!(r.buffers.vm_pins, 0),
                        // The naive variant pins the VM page once per page scanned.
                        "always-vm" => assert_eq!(r.buffers.vm_pins, r.ops),
                        _ => assert!(r.buffers.vm_pins <= c.threads as u64),
                    }
                } else if vm == "always-vm" {
                    // At least one VM pin per delete.
                    assert!(r.buffers.vm_pins >= r.ops, "{:?}", r.buffers);
                }
            }
        }
    }

    #[test]
    fn bad_parameters_are_rejected() {
        let mut c = cfg(BufferScenario::VmDelete);
        c.table_pages = 2;
        assert!(run(&c).unwrap_err().to_string().contains("--table-pages"));
        c.table_pages = 64;
        c.pool_buffers = 4;
        assert!(run(&c).unwrap_err().to_string().contains("--pool-buffers"));
        c.pool_buffers = 256;
        c.threads = 0;
        assert!(run(&c).unwrap_err().to_string().contains("--threads"));
        assert!("bogus".parse::<BufferScenario>().is_err());
    }
}
