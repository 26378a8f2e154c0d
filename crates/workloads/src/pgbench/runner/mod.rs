//! Runs pgbench scripts on the engine: clients, transactions, latencies, progress lines, the
//! lock-stack counters of the run, and the consistency checks afterwards.
//!
//! Each client is a backend on its own thread (pgbench multiplexes clients over `-j` threads
//! with asynchronous connections; our clients execute in-process and block on locks, so they
//! need a thread each; `-j` is recorded for the report). A transaction is one pass through a
//! script chosen by weight; a deadlock or lock-timeout error fails the transaction (pgbench 15
//! with `--max-tries=1`), which is rolled back and counted.

use lockstack_common::sync::hook::{self, HarnessWait};
use lockstack_common::sync::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockstack_common::sync::Instant;

use lockstack_common::backend::{WaitEventProfile, WaitSampler};
use lockstack_common::{BackendId, WaitEvent};
use rand::RngExt;
use serde::Serialize;

use super::expr::{self, Value};
use super::script::{BUILTINS, Script, Table};
use crate::report::{self, LockStackReport, StackCounters};
use crate::sim_knobs::SimKnobs;
use lockstack_engine::engine::{Engine, EngineConfig, EngineError};
use lockstack_engine::session::Session;

mod checks;
mod program;
mod result;

use checks::{SUM_ORDER, consistency_checks, sums};
pub use result::{Check, CommandStats, PgbenchResult, Progress, ScriptResult};

use program::{ClientVars, Op, Program, SLOT_CLIENT_ID, SLOT_SCALE, run_command};

/// Parameters of a run.
#[derive(Clone, Debug)]
pub struct PgbenchConfig {
    /// Scale factor (`-s`).
    pub scale: i64,
    /// Heap fillfactor (`-F`).
    pub fillfactor: u8,
    /// Clients (`-c`).
    pub clients: usize,
    /// Threads as given (`-j`, capped at `-c`); reported only.
    pub threads: usize,
    /// `-T`: run for this long.
    pub duration: Option<Duration>,
    /// `-t`: transactions per client.
    pub transactions: Option<u64>,
    /// Scripts with their weights (pgbench's `-b`/`-f NAME@W`): each picked with probability
    /// weight / total; a weight of 0 is never picked. The total must not be 0.
    pub scripts: Vec<Script>,
    /// `-P`: progress interval.
    pub progress: Option<Duration>,
    /// `--random-seed`.
    pub seed: u64,
    /// Wait-event sampling rate (0 = off).
    pub wait_sampling_hz: u32,
    /// The engine's configuration (preset and overrides).
    pub engine: EngineConfig,
    /// Under `--machine` only: the simulated machine's costs per statement (`--set sim.*`),
    /// charged in virtual time around each statement.
    pub sim: SimKnobs,
    /// pgbench's `-M` (default prepared): under `--machine --costs postgres`, which of
    /// PostgreSQL's statement costs apply.
    pub protocol: QueryMode,
}

impl PgbenchConfig {
    /// A `-t` run: `clients` clients (and as many threads) each running `transactions`
    /// transactions of `scripts` at scale 1, fillfactor 100, seed 0, without progress reports
    /// or wait-event sampling, on an engine configured as `engine`. Change the other fields
    /// with struct update syntax (`PgbenchConfig { seed: 7, ..PgbenchConfig::new(..) }`).
    pub fn new(
        scripts: Vec<Script>,
        clients: usize,
        transactions: u64,
        engine: EngineConfig,
    ) -> PgbenchConfig {
        PgbenchConfig {
            scale: 1,
            fillfactor: 100,
            clients,
            threads: clients,
            duration: None,
            transactions: Some(transactions),
            scripts,
            progress: None,
            seed: 0,
            wait_sampling_hz: 0,
            engine,
            sim: SimKnobs::default(),
            protocol: QueryMode::Prepared,
        }
    }
}

/// How a run measures, beyond [`PgbenchConfig`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// `-r`: time every command (two clock reads per command). Without it a transaction
    /// reads the clock once (its end, which is also the next transaction's start) and
    /// [`CommandStats::total_ns`] stays `None`; counts and failures are kept either way.
    pub per_command_latencies: bool,
}

/// Set by [`interrupt`]: every run in progress stops as if its `-T` had expired.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Asks every run in progress in this process to stop early: its clients finish the
/// transaction they are in, then the run ends normally (report, consistency checks), so that a
/// caller can still shut a data directory down cleanly. Meant for a SIGINT/SIGTERM handler; a
/// run that starts afterwards stops at once. Async-signal-safe (one atomic store).
pub fn interrupt() {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// Whether [`interrupt`] was called.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

struct Shared {
    stop: AtomicBool,
    /// Clients that have attached their backend (or failed to).
    connected: AtomicUsize,
    /// Start of the measured phase.
    go: Gate,
    /// Clients done with their transactions.
    finished: AtomicUsize,
    /// End of the measured phase: clients may disconnect.
    release: Gate,
    /// When the last client finished, ns after the start.
    last_end_ns: AtomicU64,
}

impl Shared {
    /// Names the lines of the run's shared state for a simulation's hottest-lines table
    /// (`hook::name_fields`): `pgbench stop` (read by every client once per transaction),
    /// and the start/end gates and counters the main thread polls, as the layout places them.
    fn name_lines(&self) {
        fn p<T>(r: &T) -> *const u8 {
            r as *const T as *const u8
        }
        hook::name_fields(
            "pgbench",
            &[
                ("stop", p(&self.stop)),
                ("connected", p(&self.connected)),
                ("go", p(&self.go.open)),
                ("go", p(&self.go.lock)),
                ("go", p(&self.go.cv)),
                ("finished", p(&self.finished)),
                ("release", p(&self.release.open)),
                ("release", p(&self.release.lock)),
                ("release", p(&self.release.cv)),
                ("last_end_ns", p(&self.last_end_ns)),
            ],
        );
    }
}

/// One client's running totals for `-P` progress lines: written (plain stores, no
/// read-modify-write) only by its client and only when progress lines are asked for, read by
/// the main thread; a cache line of its own, so clients never write a shared line per
/// transaction.
#[repr(align(128))]
#[derive(Default)]
struct ClientProgress {
    tx: AtomicU64,
    failed: AtomicU64,
    lat_sum_ns: AtomicU64,
    /// Sum of squared latencies, ns², as `f64` bits.
    lat_sq_ns: AtomicU64,
}

/// One client's totals, merged after the run.
struct ClientOut {
    per_script: Vec<(u64, u64, Vec<CommandStats>)>,
    /// Latency sum and sum of squares (ns, ns²) over committed transactions.
    lat_sum_ns: f64,
    lat_sq_ns: f64,
}

/// Under `--machine` only: the client's own work, the server's work PostgreSQL does and this
/// engine does not, and the round trip to the backend for one statement (`--set
/// sim.client_cpu_us`, `sim.statement_cpu_us`, `sim.client_rtt_us`), in virtual time.
#[inline]
fn sim_statement(c: &SimKnobs) {
    if lockstack_common::sync::hook::simulated() {
        if let Some(ipc) = c.postgres_ipc {
            lockstack_common::sync::hook::set_postgres_ipc(ipc);
        }
        let cpu = c.client_cpu.unwrap_or_default() + c.statement_cpu.unwrap_or_default();
        if !cpu.is_zero() {
            lockstack_common::sync::hook::compute(cpu);
        }
        if let Some(rtt) = c.client_rtt.filter(|d| !d.is_zero()) {
            lockstack_common::sync::sleep(rtt);
        }
    }
}

/// The PostgreSQL cost region of a command's statement (`hook::pg_region`): the server's work
/// for it (protocol, executor; with the simple protocol also parse, analysis and planning)
/// outside the lock stack's own regions, as crates/sim/costs/pg15.toml measures it for each
/// protocol. `None` for meta-commands. The extended protocol without prepared statements
/// parses and plans every statement, so it is charged as the simple one.
fn statement_region(op: &Op, protocol: QueryMode) -> Option<&'static str> {
    let simple = protocol != QueryMode::Prepared;
    Some(match (op, simple) {
        (Op::Set { .. } | Op::Sleep { .. }, _) => return None,
        (Op::Begin, false) => "statement.begin",
        (Op::Begin, true) => "statement.begin.simple",
        (Op::Commit | Op::Rollback, false) => "statement.commit",
        (Op::Commit | Op::Rollback, true) => "statement.commit.simple",
        (Op::Select { .. }, false) => "statement.select_pk",
        (Op::Select { .. }, true) => "statement.select_pk.simple",
        (Op::Update { table: Table::Accounts, .. }, false) => "statement.update_pk",
        (Op::Update { table: Table::Accounts, .. }, true) => "statement.update_pk.simple",
        (Op::Update { .. }, false) => "statement.update_pk.small_table",
        (Op::Update { .. }, true) => "statement.update_pk.small_table.simple",
        (Op::InsertHistory { .. }, false) => "statement.insert_history",
        (Op::InsertHistory { .. }, true) => "statement.insert_history.simple",
    })
}

/// pgbench's `-M` query mode. Statements always run as prepared plans here; under
/// `--machine --costs postgres` the mode selects which of PostgreSQL's measured statement costs
/// a statement is charged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueryMode {
    /// `-M simple`: each statement sent as text, parsed and planned every time.
    Simple,
    /// `-M extended`: unnamed statements, parsed and planned every time.
    Extended,
    /// `-M prepared` (this runner's default): parsed and planned once per client.
    #[default]
    Prepared,
}

impl QueryMode {
    /// The mode named `s` (`simple`, `extended`, `prepared`).
    pub fn parse(s: &str) -> Option<QueryMode> {
        match s {
            "simple" => Some(QueryMode::Simple),
            "extended" => Some(QueryMode::Extended),
            "prepared" => Some(QueryMode::Prepared),
            _ => None,
        }
    }
}

/// Which built-in a run's scripts all are (`select-only`, `simple-update`, `tpcb-like`), if
/// they are one built-in (a single script, or several copies of the same one).
pub fn sole_builtin(scripts: &[Script]) -> Option<&'static str> {
    let first = scripts.first()?;
    let b = BUILTINS.iter().find(|b| first.name == format!("<builtin: {}>", b.description))?;
    scripts.iter().all(|s| s.name == first.name).then_some(b.name)
}

/// A one-way gate the clients wait at (the start and the end of the measured phase). Waiters
/// sleep on a condition variable: with hundreds of clients, polling waiters would starve the
/// main thread that is still starting the others (a 1000-client run took over a minute to
/// start that way).
#[derive(Default)]
struct Gate {
    open: AtomicBool,
    lock: lockstack_common::sync::Mutex<()>,
    cv: lockstack_common::sync::Condvar,
}

impl Gate {
    /// Opens the gate and wakes every waiter; later `wait`s return at once.
    fn open(&self) {
        let _g = self.lock.lock();
        self.open.store(true, Ordering::Release);
        self.cv.notify_all();
    }

    /// Returns once the gate is open. `what` is the harness wait a simulated machine books it
    /// under (the start or the end of the measured phase: not a wait of the lock stack).
    fn wait(&self, what: HarnessWait) {
        if self.open.load(Ordering::Acquire) {
            return;
        }
        let _class = hook::harness_wait(what);
        let mut g = self.lock.lock();
        while !self.open.load(Ordering::Acquire) {
            self.cv.wait(&mut g);
        }
    }
}

/// A usage error of command `ci` of `script` (an undefined variable, an overflow in `\set`)
/// prefixed with where it happened, `file:line: ` as the script parser reports syntax errors
/// (pgbench 15 names the client and the script's command number). Other errors are left as
/// they are.
#[cold]
fn located(e: EngineError, script: &Script, ci: usize) -> EngineError {
    match e {
        EngineError::Usage(m) => {
            let line = script.commands.get(ci).map_or(0, |(l, _)| *l);
            EngineError::Usage(format!("{}:{line}: {m}", script.name))
        }
        e => e,
    }
}

/// One client's transactions, from the start signal to the end of its share (`-t`) or the stop
/// signal (`-T`).
///
/// Per transaction the runner touches no shared cache line but the (read-only) stop flag: its
/// totals are local, published for `-P` in the client's own [`ClientProgress`] line. The clock
/// is read once per transaction (as pgbench does: the end of one transaction is the start of
/// the next), twice more per command with `-r`.
#[allow(clippy::too_many_arguments)]
fn client_loop(
    cfg: &PgbenchConfig,
    prog: &Program,
    opts: RunOptions,
    shared: &Shared,
    progress: &ClientProgress,
    s: &mut Session,
    c: usize,
    start: Instant,
) -> Result<ClientOut, EngineError> {
    let total_weight: u64 = cfg.scripts.iter().map(|s| u64::from(s.weight)).sum();
    let mut rng = expr::client_rng(cfg.seed, c as u64);
    let mut vars = ClientVars { names: &prog.names, values: vec![None; prog.names.len()] };
    vars.values[SLOT_SCALE] = Some(Value::Int(cfg.scale));
    vars.values[SLOT_CLIENT_ID] = Some(Value::Int(c as i64));
    let mut per_script: Vec<(u64, u64, Vec<CommandStats>)> =
        cfg.scripts.iter().map(|sc| (0, 0, vec![CommandStats::default(); sc.commands.len()])).collect();
    let publish = cfg.progress.is_some();
    let (mut done, mut failed, mut lat_sum_ns, mut lat_sq_ns) = (0u64, 0u64, 0f64, 0f64);
    let mut n = 0u64;
    let mut tx_start = Instant::now();
    loop {
        if shared.stop.load(Ordering::Relaxed) || cfg.transactions.is_some_and(|t| n >= t) {
            break;
        }
        n += 1;
        let si = if cfg.scripts.len() == 1 {
            0
        } else {
            // `run_on_with` refused a zero total, so some script is picked.
            let mut pick = rng.random_range(0..total_weight);
            cfg.scripts
                .iter()
                .position(|sc| {
                    if pick < u64::from(sc.weight) {
                        true
                    } else {
                        pick -= u64::from(sc.weight);
                        false
                    }
                })
                .unwrap_or(0)
        };
        let script = &cfg.scripts[si];
        let mut ok = true;
        for (ci, op) in prog.scripts[si].iter().enumerate() {
            if !matches!(op, Op::Set { .. } | Op::Sleep { .. }) {
                sim_statement(&cfg.sim);
            }
            // Under --costs postgres the statement's own work is PostgreSQL's count for it.
            let cost = statement_region(op, cfg.protocol).map(lockstack_common::sync::hook::pg_region);
            let r = if opts.per_command_latencies {
                let c0 = Instant::now();
                let r = run_command(s, op, &mut vars, &mut rng, &shared.stop)
                    .map_err(|e| located(e, script, ci))?;
                *per_script[si].2[ci].total_ns.get_or_insert(0) += c0.elapsed().as_nanos() as u64;
                r
            } else {
                run_command(s, op, &mut vars, &mut rng, &shared.stop).map_err(|e| located(e, script, ci))?
            };
            drop(cost);
            if matches!(op, Op::Select { .. }) && !s.in_transaction() {
                // A statement outside a transaction block commits by itself (its commit's
                // regions ran inside the statement's); PostgreSQL's count for that commit.
                lockstack_common::sync::hook::pg_charge("statement.commit.read_only");
            }
            let st = &mut per_script[si].2[ci];
            st.count += 1;
            if !r {
                st.failures += 1;
                ok = false;
                break;
            }
        }
        if ok && s.in_transaction() {
            s.rollback()?;
            return Err(EngineError::Usage(format!(
                "{}: end of script reached with a transaction block open",
                script.name
            )));
        }
        let now = Instant::now();
        // Through u64: a u128-to-float conversion is a libcall.
        let ns = now.duration_since(tx_start).as_nanos() as u64 as f64;
        tx_start = now;
        if ok {
            per_script[si].0 += 1;
            done += 1;
            lat_sum_ns += ns;
            lat_sq_ns += ns * ns;
        } else {
            per_script[si].1 += 1;
            failed += 1;
        }
        if publish {
            progress.tx.store(done, Ordering::Relaxed);
            progress.failed.store(failed, Ordering::Relaxed);
            progress.lat_sum_ns.store(lat_sum_ns as u64, Ordering::Relaxed);
            progress.lat_sq_ns.store(lat_sq_ns.to_bits(), Ordering::Relaxed);
        }
    }
    shared.last_end_ns.fetch_max(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    Ok(ClientOut { per_script, lat_sum_ns, lat_sq_ns })
}

/// Loads the tables and runs the benchmark; `on_progress` receives `-P` lines.
///
/// The measured phase starts once every client has connected (attached its backend) and ends
/// when the last one has finished its transactions, before any disconnects: the lock-stack
/// counters ([`PgbenchResult::lwlocks`], [`PgbenchResult::lock_stack`],
/// [`PgbenchResult::fidelity`]) and the elapsed time cover the transactions only, as pgbench
/// excludes its initial connection time.
///
/// # Errors
/// Engine errors other than deadlocks and lock timeouts (which fail single transactions);
/// usage errors (no script with a non-zero weight); [`EngineError::ClientAborted`] when a
/// client's script fails while it runs (an undefined variable, division by zero, the script
/// ending inside a transaction block). A client that fails rolls its transaction back at once
/// and stops the run, so that no other client waits on its locks.
pub fn run(
    cfg: &PgbenchConfig,
    on_progress: &(dyn Fn(&Progress) + Sync),
) -> Result<PgbenchResult, EngineError> {
    run_with(cfg, RunOptions::default(), on_progress)
}

/// [`run`] with [`RunOptions`] (`-r`).
///
/// # Errors
/// As [`run`].
pub fn run_with(
    cfg: &PgbenchConfig,
    opts: RunOptions,
    on_progress: &(dyn Fn(&Progress) + Sync),
) -> Result<PgbenchResult, EngineError> {
    let t0 = Instant::now();
    let engine = Engine::new(cfg.engine.clone(), cfg.scale, cfg.fillfactor)?;
    run_on_with(&engine, t0.elapsed().as_secs_f64(), cfg, opts, on_progress)
}

/// Runs the benchmark on an engine already loaded or opened (`--data-dir`), reporting `load_s`
/// as its load time; otherwise as [`run`]. The engine needs `cfg.clients + 1` backend slots
/// (one for the consistency checks' scans).
///
/// # Errors
/// As [`run`].
pub fn run_on(
    engine: &Arc<Engine>,
    load_s: f64,
    cfg: &PgbenchConfig,
    on_progress: &(dyn Fn(&Progress) + Sync),
) -> Result<PgbenchResult, EngineError> {
    run_on_with(engine, load_s, cfg, RunOptions::default(), on_progress)
}

/// [`run_on`] with [`RunOptions`] (`-r`).
///
/// # Errors
/// As [`run`].
pub fn run_on_with(
    engine: &Arc<Engine>,
    load_s: f64,
    cfg: &PgbenchConfig,
    opts: RunOptions,
    on_progress: &(dyn Fn(&Progress) + Sync),
) -> Result<PgbenchResult, EngineError> {
    if cfg.wait_sampling_hz > 0 {
        // Before any client starts: a bad rate must not stop the run half-way.
        WaitSampler::validate_hz(cfg.wait_sampling_hz)
            .map_err(|e| EngineError::Usage(format!("--wait-sampling-hz: {e}")))?;
    }
    if cfg.scripts.iter().all(|s| s.weight == 0) {
        // pgbench checks this before connecting; an empty list has a zero total too.
        return Err(EngineError::Usage("total script weight must not be zero".into()));
    }
    let prog = Program::new(&cfg.scripts, cfg.scale);
    let before = {
        let mut s = engine.session(BackendId(cfg.clients as u32))?;
        sums(&mut s)?
    };
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        connected: AtomicUsize::new(0),
        go: Gate::default(),
        finished: AtomicUsize::new(0),
        release: Gate::default(),
        last_end_ns: AtomicU64::new(0),
    });
    shared.name_lines();
    let mut counters_before = StackCounters::default();
    let mut counters_after = StackCounters::default();
    let mut profile = WaitEventProfile::default();
    let mut sampler_error: Option<String> = None;
    let start_cell: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let progress: Vec<ClientProgress> = (0..cfg.clients).map(|_| ClientProgress::default()).collect();
    let (prog, progress) = (&prog, &progress);
    let writer_stop = lockstack_common::sync::AtomicBool::new(false);
    let outs: Vec<Result<ClientOut, EngineError>> = lockstack_common::sync::thread::measured_scope(|sc| {
        // On the simulated machine the WAL writer (synchronous_commit off) is a task of the
        // phase; its native thread waits for the phase to end.
        let writer = lockstack_common::sync::hook::simulated().then(|| {
            let (wal, stop) = (Arc::clone(&engine.wal), &writer_stop);
            sc.spawn_named(lockstack_common::backend::WAL_WRITER_THREAD, move || wal.writer_loop(stop))
        });
        // The sampler starts before the clients connect and stops after they disconnect, and
        // samples only the slots a backend is attached to: its window is each backend's whole
        // life, the window of a simulated machine's per-task time. A client waiting at the
        // start or end gate publishes `Client:ClientRead` (idle), which the profile leaves out
        // as that time leaves out the gates.
        let sampler = if cfg.wait_sampling_hz > 0 {
            match WaitSampler::try_spawn_attached(Arc::clone(&engine.backends), cfg.wait_sampling_hz) {
                Ok(s) => Some(s),
                Err(e) => {
                    // Let the clients start and stop at once, so every thread ends and the
                    // error is returned rather than hanging.
                    sampler_error = Some(e.to_string());
                    shared.stop.store(true, Ordering::Relaxed);
                    None
                }
            }
        } else {
            None
        };
        let handles: Vec<_> = (0..cfg.clients)
            .map(|c| {
                let (engine, shared, start_cell) = (Arc::clone(engine), Arc::clone(&shared), &start_cell);
                sc.spawn(move || -> Result<ClientOut, EngineError> {
                    let session = engine.session(BackendId(c as u32));
                    shared.connected.fetch_add(1, Ordering::AcqRel);
                    // Published only for a sampler: without one the run's operations stay
                    // exactly those of a run without sampling (a simulated run's schedule
                    // follows every store).
                    let idle = |e: WaitEvent| {
                        let slot = engine.backends.slot(BackendId(c as u32));
                        if cfg.wait_sampling_hz > 0 && slot.is_attached() {
                            slot.set(e);
                        }
                    };
                    idle(WaitEvent::CLIENT_READ);
                    shared.go.wait(HarnessWait::Start);
                    idle(WaitEvent::NONE);
                    let start = *start_cell.get().expect(
                        "the main thread sets start_cell before it opens the go gate this client waited on",
                    );
                    let out = session.map(|mut s| {
                        let mut r = client_loop(cfg, prog, opts, &shared, &progress[c], &mut s, c, start);
                        if let Err(e) = r {
                            // Give back what the failed transaction holds (its row and tuple
                            // locks, its xid) at once, or the clients waiting on them would wait
                            // until the end, which they would never reach; then stop the run.
                            // The rollback ends the transaction even when it fails itself (a
                            // full disk, a poisoned WAL): its error adds nothing to `e`.
                            if s.in_transaction() {
                                let _ = s.rollback();
                            }
                            debug_assert!(!s.in_transaction());
                            shared.stop.store(true, Ordering::Relaxed);
                            r = Err(match e {
                                EngineError::Usage(m) => {
                                    EngineError::ClientAborted(format!("client {c} aborted: {m}"))
                                }
                                e => e,
                            });
                        }
                        (r, s)
                    });
                    // Disconnect only after the counters of the measured phase are read.
                    shared.finished.fetch_add(1, Ordering::AcqRel);
                    idle(WaitEvent::CLIENT_READ);
                    shared.release.wait(HarnessWait::End);
                    idle(WaitEvent::NONE);
                    out.and_then(|(r, _session)| r)
                })
            })
            .collect();
        // Clients that ended without reporting (a panic) count as done for every wait below.
        let lost = || handles.iter().filter(|h| h.is_finished()).count();
        while shared.connected.load(Ordering::Acquire) + lost() < cfg.clients {
            lockstack_common::sync::sleep(Duration::from_micros(200));
        }
        counters_before = StackCounters::take(engine);
        let start = *start_cell.get_or_init(Instant::now);
        shared.go.open();
        // The main thread stops -T runs and prints -P lines.
        let tick = cfg.progress.unwrap_or(Duration::from_millis(50)).min(Duration::from_millis(50));
        let mut next_progress = cfg.progress.map(|p| start + p);
        let mut last = (0u64, 0u64, 0u64, 0f64, start);
        while shared.finished.load(Ordering::Acquire) + lost() < cfg.clients {
            lockstack_common::sync::sleep(tick.min(Duration::from_millis(2)));
            let now = Instant::now();
            if cfg.duration.is_some_and(|d| now - start >= d) || interrupted() {
                shared.stop.store(true, Ordering::Relaxed);
            }
            if let (Some(at), Some(p)) = (next_progress, cfg.progress)
                && now >= at
            {
                let (mut tx, mut f, mut sum, mut sq) = (0u64, 0u64, 0u64, 0f64);
                for p in progress {
                    tx += p.tx.load(Ordering::Relaxed);
                    f += p.failed.load(Ordering::Relaxed);
                    sum += p.lat_sum_ns.load(Ordering::Relaxed);
                    sq += f64::from_bits(p.lat_sq_ns.load(Ordering::Relaxed));
                }
                let (dt, dsum, dsq) = (tx - last.0, sum - last.2, sq - last.3);
                let secs = (now - last.4).as_secs_f64();
                let mean = if dt > 0 { dsum as f64 / dt as f64 } else { 0.0 };
                let var = if dt > 0 { (dsq / dt as f64 - mean * mean).max(0.0) } else { 0.0 };
                on_progress(&Progress {
                    at: (now - start).as_secs_f64(),
                    tps: dt as f64 / secs,
                    lat_ms: mean / 1e6,
                    stddev_ms: var.sqrt() / 1e6,
                    failed: f - last.1,
                });
                last = (tx, f, sum, sq, now);
                next_progress = Some(at + p);
            }
        }
        counters_after = StackCounters::take(engine);
        shared.release.open();
        writer_stop.store(true, Ordering::Release);
        let mut outs: Vec<Result<ClientOut, EngineError>> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(EngineError::Usage("a client thread panicked".into()))))
            .collect();
        profile = sampler.map(WaitSampler::stop).unwrap_or_default();
        if let Some(w) = writer {
            match w.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => outs.push(Err(e.into())),
                Err(_) => outs.push(Err(EngineError::Usage("the WAL writer task panicked".into()))),
            }
        }
        outs
    });
    if let Some(e) = sampler_error {
        return Err(EngineError::Usage(e));
    }
    let elapsed_s = (shared.last_end_ns.load(Ordering::Relaxed) as f64 / 1e9).max(1e-9);
    let delta = counters_after.since(&counters_before);
    let (mut lat_sum_ns, mut lat_sq_ns) = (0f64, 0f64);
    let mut scripts: Vec<ScriptResult> = cfg
        .scripts
        .iter()
        .map(|s| ScriptResult {
            name: s.name.clone(),
            weight: s.weight,
            transactions: 0,
            failed: 0,
            commands: vec![CommandStats::default(); s.commands.len()],
            texts: s.texts.clone(),
        })
        .collect();
    // A failed run reports the failure that started it: after a WAL write error the other
    // clients fail with "WAL is unusable after an earlier failure" (which repeats it).
    let mut outs = outs;
    let consequence = |e: &EngineError| matches!(e, EngineError::Wal(lockstack_xlog::WalError::Poisoned(_)));
    if let Some(i) = outs
        .iter()
        .position(|o| o.as_ref().is_err_and(|e| !consequence(e)))
        .or_else(|| outs.iter().position(Result::is_err))
        && let Err(e) = outs.swap_remove(i)
    {
        return Err(e);
    }
    for o in outs {
        let o = o?;
        lat_sum_ns += o.lat_sum_ns;
        lat_sq_ns += o.lat_sq_ns;
        for (i, (tx, f, cmds)) in o.per_script.into_iter().enumerate() {
            scripts[i].transactions += tx;
            scripts[i].failed += f;
            for (a, b) in scripts[i].commands.iter_mut().zip(cmds) {
                a.count += b.count;
                if let Some(t) = b.total_ns {
                    *a.total_ns.get_or_insert(0) += t;
                }
                a.failures += b.failures;
            }
        }
    }
    let after = {
        let mut s = engine.session(BackendId(cfg.clients as u32))?;
        sums(&mut s)?
    };
    let checks = consistency_checks(cfg, &before, &after);
    let transactions: u64 = scripts.iter().map(|s| s.transactions).sum();
    let failed: u64 = scripts.iter().map(|s| s.failed).sum();
    let builtin = sole_builtin(&cfg.scripts);
    // pgbench's SimpleStats: mean and (population) standard deviation from the sums.
    let n = transactions.max(1) as f64;
    let mean_ns = lat_sum_ns / n;
    let stddev_ns = (lat_sq_ns / n - mean_ns * mean_ns).max(0.0).sqrt();
    Ok(PgbenchResult {
        load_s,
        elapsed_s,
        transactions,
        failed,
        latency_avg_ms: mean_ns / 1e6,
        latency_stddev_ms: stddev_ns / 1e6,
        scripts,
        checks,
        balance_sums: SUM_ORDER
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), before[i].1, after[i].1))
            .collect(),
        wait_events: profile.sorted().into_iter().map(|(e, n)| (e.to_string(), n)).collect(),
        wait_samples: profile.total(),
        wait_idle_samples: profile.idle,
        wait_rounds: profile.rounds,
        fidelity: report::fidelity(&delta, transactions + failed, builtin),
        fidelity_builtin: builtin.map(str::to_string),
        lock_stack: LockStackReport::new(delta, transactions + failed),
    })
}

#[cfg(test)]
mod tests;
