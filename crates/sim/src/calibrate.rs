//! `lockstack machine calibrate`: measure this host's line ping-pong, atomic, fence, pause,
//! memory and futex costs with real threads, and write them as a `host` profile.
//!
//! Each figure is the minimum over many short rounds of a loop: on a loaded machine (other
//! processes taking the cores) a round in which a thread was descheduled is slow, and the
//! fastest round is the one that measured the hardware (one measurement takes about two
//! seconds). Figures that cannot be measured without pinning threads to cores or
//! reading kernel tunables (the context switch, the time slice) are written as assumptions.
//!
//! The whole measurement is repeated ([`measure_repeated`]): the profile takes each figure's
//! median over the repeats, and [`Spread`] (min, median, max) shows how far they disagree. A
//! figure whose max/min exceeds a threshold (and differs by more than
//! [`SPREAD_FLOOR_NS`]) is unstable, and `lockstack machine calibrate` then writes no profile.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering, fence};
use std::time::Instant;

/// One measured figure, ns.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// The fastest round's ns per operation.
    pub ns: f64,
}

/// The figures a calibration measured, ns.
#[derive(Debug, Clone)]
pub struct HostCosts {
    /// Hardware threads (`available_parallelism`).
    pub hw_threads: u32,
    /// The CPU model from /proc/cpuinfo, or "unknown".
    pub cpu: String,
    /// The 1-minute load average before measuring (/proc/loadavg), if readable.
    pub load_average: Option<f64>,
    /// A load of a line this core holds.
    pub l1_hit: Measured,
    /// A contended line handed between two threads: wall time per `fetch_add` of two threads
    /// on one line (the rate the model's one-transfer-at-a-time serialization charges);
    /// `None` on one core.
    pub transfer: Option<Measured>,
    /// Half a two-thread store/load ping-pong round trip on one line (a dependent hand-off's
    /// latency, written as a comment); `None` on one core.
    pub ping_pong: Option<Measured>,
    /// An uncontended `fetch_add` minus a load.
    pub atomic_rmw: Measured,
    /// `fence(SeqCst)`.
    pub fence: Measured,
    /// `spin_loop()`.
    pub pause: Measured,
    /// A dependent load chasing pointers through 64 MiB.
    pub memory: Measured,
    /// `Instant::now()`.
    pub clock_read: Measured,
    /// `thread::yield_now()` (a system call).
    pub syscall: Measured,
    /// `Thread::unpark` of a parked thread (the waker's cost).
    pub futex_wake: Measured,
    /// From an unpark to the parked thread running (half a park/unpark round trip).
    pub wake_latency: Measured,
}

#[repr(align(128))]
struct Padded(AtomicU64);

fn fastest(v: Vec<f64>) -> Measured {
    Measured { ns: v.into_iter().fold(f64::INFINITY, f64::min) }
}

/// Times `iters` calls of `f`, `rounds` times; ns per call.
fn per_op(rounds: usize, iters: u64, mut f: impl FnMut(u64)) -> Measured {
    let mut v = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        v.push(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    fastest(v)
}

/// Round trips in one timed chunk of the two-thread loops: short, so that some chunks run
/// while both threads are on a core even on a loaded host (the fastest chunk is kept).
const CHUNK: u64 = 50;

/// A line handed between two spinning threads: the fastest chunk's ns per hand-off (two per
/// round trip).
fn ping_pong(chunks: u64) -> f64 {
    let iters = chunks * CHUNK;
    let line = Arc::new(Padded(AtomicU64::new(0)));
    let other = Arc::clone(&line);
    let h = std::thread::spawn(move || {
        for i in 0..iters {
            while other.0.load(Ordering::Acquire) != 2 * i + 1 {
                std::hint::spin_loop();
            }
            other.0.store(2 * i + 2, Ordering::Release);
        }
    });
    let mut best = f64::INFINITY;
    for c in 0..chunks {
        let t = Instant::now();
        for i in c * CHUNK..(c + 1) * CHUNK {
            line.0.store(2 * i + 1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
        }
        best = best.min(t.elapsed().as_nanos() as f64 / (2 * CHUNK) as f64);
    }
    h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    best
}

/// Two threads doing `fetch_add` on one line, `ops` each, `rounds` times: the fastest wall ns
/// per operation (both threads' operations counted) among the rounds in which the two really
/// ran side by side, i.e. the line changed hands at least once per 8 operations (each thread
/// counts the results that were not its own previous one plus 1). On a loaded host a round in
/// which one thread ran alone is uncontended and is not kept; `None` if no round qualified.
fn contended_rmw(rounds: usize, ops: u64) -> Option<f64> {
    let mut best: Option<f64> = None;
    for _ in 0..rounds {
        let line = Arc::new(Padded(AtomicU64::new(0)));
        let ready = Arc::new(AtomicU64::new(0));
        let run = move |line: &Padded| {
            let mut last = u64::MAX;
            let mut handoffs = 0u64;
            for _ in 0..ops {
                let v = line.0.fetch_add(1, Ordering::AcqRel);
                if v != last.wrapping_add(1) {
                    handoffs += 1;
                }
                last = v;
            }
            handoffs
        };
        let (l2, r2) = (Arc::clone(&line), Arc::clone(&ready));
        let h = std::thread::spawn(move || {
            r2.fetch_add(1, Ordering::AcqRel);
            while r2.load(Ordering::Acquire) < 2 {
                std::hint::spin_loop();
            }
            run(&l2)
        });
        ready.fetch_add(1, Ordering::AcqRel);
        while ready.load(Ordering::Acquire) < 2 {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        let mine = run(&line);
        let theirs = h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let ns = t.elapsed().as_nanos() as f64 / (2 * ops) as f64;
        if (mine + theirs) * 8 >= 2 * ops {
            best = Some(best.map_or(ns, |b: f64| b.min(ns)));
        }
    }
    best
}

/// Two threads waking each other with park/unpark: the fastest chunk's ns from an unpark to
/// the other thread running (half a round trip), and the fastest chunk's mean cost of the
/// waker's `unpark` call.
fn park_pong(chunks: u64) -> (f64, f64) {
    let iters = chunks * CHUNK;
    let flag = Arc::new(AtomicU64::new(0));
    let main = std::thread::current();
    let f2 = Arc::clone(&flag);
    let ready = Arc::new(AtomicBool::new(false));
    let r2 = Arc::clone(&ready);
    let h = std::thread::spawn(move || {
        r2.store(true, Ordering::Release);
        for i in 0..iters {
            while f2.load(Ordering::Acquire) != 2 * i + 1 {
                std::thread::park();
            }
            f2.store(2 * i + 2, Ordering::Release);
            main.unpark();
        }
    });
    while !ready.load(Ordering::Acquire) {
        std::hint::spin_loop();
    }
    let peer = h.thread().clone();
    let (mut best_lat, mut best_wake) = (f64::INFINITY, f64::INFINITY);
    for c in 0..chunks {
        let mut wake_ns = 0.0;
        let t = Instant::now();
        for i in c * CHUNK..(c + 1) * CHUNK {
            flag.store(2 * i + 1, Ordering::Release);
            let w = Instant::now();
            peer.unpark();
            wake_ns += w.elapsed().as_nanos() as f64;
            while flag.load(Ordering::Acquire) != 2 * i + 2 {
                std::thread::park();
            }
        }
        best_lat = best_lat.min(t.elapsed().as_nanos() as f64 / (2 * CHUNK) as f64);
        best_wake = best_wake.min(wake_ns / CHUNK as f64);
    }
    h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    (best_lat, best_wake)
}

fn pointer_chase() -> Measured {
    // A random cycle through 64 MiB of 64-byte slots (8 u64 each), one hop per slot.
    let slots = (64 << 20) / 64;
    let mut order: Vec<usize> = (0..slots).collect();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for i in (1..slots).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    let mut next = vec![0usize; slots * 8];
    for w in 0..slots {
        next[order[w] * 8] = order[(w + 1) % slots] * 8;
    }
    let mut p = 0usize;
    per_op(10, 200_000, |_| {
        p = next[p];
        black_box(p);
    })
}

/// The first core's clock from /proc/cpuinfo (`cpu MHz`), GHz.
fn cpu_ghz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let mhz: f64 = text.lines().find(|l| l.starts_with("cpu MHz"))?.split(':').nth(1)?.trim().parse().ok()?;
    (mhz.is_finite() && mhz > 0.0).then_some(mhz / 1000.0)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string())
}

/// Measures this host (about two seconds with two or more hardware threads).
pub fn measure() -> HostCosts {
    let load_average = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|f| f.parse().ok()));
    let hw_threads = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let local = Padded(AtomicU64::new(0));
    let l1_hit = per_op(20, 500_000, |_| {
        black_box(local.0.load(Ordering::Relaxed));
    });
    let rmw = per_op(20, 500_000, |_| {
        black_box(local.0.fetch_add(1, Ordering::AcqRel));
    });
    // A store between fences keeps the compiler from merging them; its cost is taken off.
    let store = per_op(20, 500_000, |i| local.0.store(i, Ordering::Relaxed));
    let fenced = per_op(20, 200_000, |i| {
        local.0.store(i, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    });
    let fence_m = Measured { ns: (fenced.ns - store.ns).max(0.0) };
    let pause = per_op(20, 200_000, |_| std::hint::spin_loop());
    let clock_read = per_op(20, 100_000, |_| {
        black_box(Instant::now());
    });
    let syscall = per_op(20, 20_000, |_| std::thread::yield_now());
    let transfer = if hw_threads >= 2 { contended_rmw(20, 200_000).map(|ns| Measured { ns }) } else { None };
    let ping_pong = (hw_threads >= 2).then(|| Measured { ns: ping_pong(400) });
    let (lat, wake) = park_pong(100);
    HostCosts {
        hw_threads,
        cpu: cpu_model(),
        load_average,
        l1_hit,
        transfer,
        ping_pong,
        atomic_rmw: Measured { ns: (rmw.ns - l1_hit.ns).max(0.0) },
        fence: fence_m,
        pause,
        memory: pointer_chase(),
        clock_read,
        syscall,
        futex_wake: Measured { ns: wake },
        wake_latency: Measured { ns: lat },
    }
}

/// Two repeats of a figure closer than this (ns) never make it unstable, whatever their ratio:
/// the figures computed as a difference of two loops (`atomic_rmw_ns`, `fence_ns`) can be a
/// fraction of a nanosecond, where a ratio means nothing.
pub const SPREAD_FLOOR_NS: f64 = 1.0;

/// The default largest max/min of a figure's repeats (`machine calibrate --max-spread`). A
/// figure over it that a larger `--max-spread` accepts is written as noisy and assumed
/// ([`host_profile_toml_repeated`]).
pub const DEFAULT_MAX_SPREAD: f64 = 1.5;

/// The one-line refusal of a calibration whose `unstable` figures (from
/// [`Repeated::unstable`] at `max_spread`) disagree over `repeats` repeats: each figure's
/// spread and min / median / max, the limit, and the `--max-spread` that would accept them.
pub fn unstable_message(repeats: usize, max_spread: f64, unstable: &[(&'static str, Spread)]) -> String {
    let names: Vec<String> = unstable
        .iter()
        .map(|(k, s)| {
            format!(
                "{k} spread {:.1}x over {repeats} repeats (min / median / max {:.1} / {:.1} / {:.1} ns)",
                s.ratio(),
                s.min,
                s.median,
                s.max
            )
        })
        .collect();
    let worst = unstable.iter().map(|(_, s)| s.ratio()).fold(1.0, f64::max);
    let accept = if worst.is_finite() {
        format!(
            ", or pass --max-spread {} to accept it, marked noisy and assumed in the profile",
            worst.ceil()
        )
    } else {
        " (a figure measured 0 ns in one repeat: no --max-spread accepts it)".to_string()
    };
    format!(
        "{} exceeds --max-spread {max_spread}; no profile written: rerun on an idle machine or with more --repeats{accept}",
        names.join(", ")
    )
}

/// One figure over the repeats of a calibration, ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// The smallest repeat.
    pub min: f64,
    /// The median repeat (of an even count, the mean of the two middle ones): the figure the
    /// profile takes.
    pub median: f64,
    /// The largest repeat.
    pub max: f64,
}

impl Spread {
    /// The spread of `v` (at least one value).
    ///
    /// # Panics
    /// If `v` is empty.
    pub fn of(v: &[f64]) -> Spread {
        assert!(!v.is_empty(), "a spread of no values");
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Spread { min: v[0], median, max: v[n - 1] }
    }

    /// max / min (infinite when min is 0 and max is not; 1 when both are 0).
    pub fn ratio(&self) -> f64 {
        if self.max == self.min { 1.0 } else { self.max / self.min }
    }

    /// Whether the repeats disagree: max/min above `max_ratio` and max - min above
    /// [`SPREAD_FLOOR_NS`].
    pub fn unstable(&self, max_ratio: f64) -> bool {
        self.ratio() > max_ratio && self.max - self.min > SPREAD_FLOOR_NS
    }
}

/// The profile keys of the measured figures, in the profile's order, and each one's value in
/// a measurement (`None`: not measured on this host, as the transfer on one core).
pub fn figures(c: &HostCosts) -> Vec<(&'static str, Option<f64>)> {
    vec![
        ("l1_hit_ns", Some(c.l1_hit.ns)),
        ("same_llc_ns", c.transfer.map(|m| m.ns)),
        ("ping_pong_ns", c.ping_pong.map(|m| m.ns)),
        ("memory_ns", Some(c.memory.ns)),
        ("atomic_rmw_ns", Some(c.atomic_rmw.ns)),
        ("fence_ns", Some(c.fence.ns)),
        ("pause_ns", Some(c.pause.ns)),
        ("clock_read_ns", Some(c.clock_read.ns)),
        ("syscall_ns", Some(c.syscall.ns)),
        ("futex_wake_ns", Some(c.futex_wake.ns)),
        ("futex_wake_latency_ns", Some(c.wake_latency.ns)),
    ]
}

/// A calibration repeated: every measurement, and per figure its spread over them.
#[derive(Debug, Clone)]
pub struct Repeated {
    /// Each repeat's measurement, in the order taken.
    pub runs: Vec<HostCosts>,
    /// Per figure ([`figures`]' keys and order), its spread over the repeats that measured it;
    /// a figure no repeat measured is left out.
    pub spreads: Vec<(&'static str, Spread)>,
}

impl Repeated {
    /// The figures whose repeats disagree by more than `max_ratio` ([`Spread::unstable`]).
    pub fn unstable(&self, max_ratio: f64) -> Vec<(&'static str, Spread)> {
        self.spreads.iter().filter(|(_, s)| s.unstable(max_ratio)).copied().collect()
    }

    /// The measurement the profile is written from: each figure's median over the repeats
    /// (the transfer and ping-pong only if every repeat measured them), the CPU and thread
    /// count of the first repeat and the highest load average seen.
    pub fn median(&self) -> HostCosts {
        let first = &self.runs[0];
        let med =
            |key: &str| self.spreads.iter().find(|(k, _)| *k == key).map(|(_, s)| Measured { ns: s.median });
        let all =
            |key: &str| self.runs.iter().all(|r| figures(r).iter().any(|(k, v)| *k == key && v.is_some()));
        let must = |key: &str| {
            med(key).expect("figures gives every HostCosts a value for this key, so spreads has it")
        };
        HostCosts {
            hw_threads: first.hw_threads,
            cpu: first.cpu.clone(),
            load_average: self.runs.iter().filter_map(|r| r.load_average).reduce(f64::max),
            l1_hit: must("l1_hit_ns"),
            transfer: if all("same_llc_ns") { med("same_llc_ns") } else { None },
            ping_pong: if all("ping_pong_ns") { med("ping_pong_ns") } else { None },
            atomic_rmw: must("atomic_rmw_ns"),
            fence: must("fence_ns"),
            pause: must("pause_ns"),
            memory: must("memory_ns"),
            clock_read: must("clock_read_ns"),
            syscall: must("syscall_ns"),
            futex_wake: must("futex_wake_ns"),
            wake_latency: must("futex_wake_latency_ns"),
        }
    }
}

/// The spreads of `runs` (see [`Repeated::spreads`]).
pub fn spreads(runs: &[HostCosts]) -> Vec<(&'static str, Spread)> {
    let Some(first) = runs.first() else { return Vec::new() };
    figures(first)
        .iter()
        .filter_map(|&(key, _)| {
            let v: Vec<f64> = runs
                .iter()
                .filter_map(|r| figures(r).into_iter().find(|(k, _)| *k == key).and_then(|(_, v)| v))
                .collect();
            (!v.is_empty()).then(|| (key, Spread::of(&v)))
        })
        .collect()
}

/// Measures this host `repeats` times ([`measure`], about two seconds each) and returns every
/// measurement with each figure's spread.
///
/// # Panics
/// If `repeats` is 0.
pub fn measure_repeated(repeats: usize) -> Repeated {
    assert!(repeats > 0, "a calibration needs at least one measurement");
    let runs: Vec<HostCosts> = (0..repeats).map(|_| measure()).collect();
    Repeated { spreads: spreads(&runs), runs }
}

/// Renders a measurement as a `host` profile (TOML with a comment beside each number: what
/// measured it, or "assumed").
pub fn host_profile_toml(c: &HostCosts) -> String {
    with_assumed_list(&host_profile_body(c))
}

/// [`host_profile_toml`] before its `assumed` list is inserted.
fn host_profile_body(c: &HostCosts) -> String {
    let transfer = c.transfer.map_or(40.0, |m| m.ns);
    let transfer_note = match c.ping_pong {
        Some(p) if c.transfer.is_some() => format!(
            "measured: wall time per fetch_add of two threads on one 64-byte line (fastest of 20 rounds), the rate a contended line is handed over; a dependent hand-off (half a store/load ping-pong round trip) measured {:.1} ns",
            p.ns
        ),
        Some(p) => format!(
            "assumed: no round of two threads' fetch_add on one line ran side by side (a loaded host); half a store/load ping-pong round trip measured {:.1} ns",
            p.ns
        ),
        None => "assumed (one hardware thread: no hand-off possible)".to_string(),
    };
    let r = |x: f64| (x * 10.0).round() / 10.0;
    let load = match c.load_average {
        Some(l) if l > f64::from(c.hw_threads) / 2.0 => format!(
            "# Load average {l:.1} on {} hardware threads when measured: other processes shared the cores,\n# so the cross-thread figures (line transfer, futex) are upper bounds; recalibrate on an idle host.\n",
            c.hw_threads
        ),
        Some(l) => format!("# Load average {l:.1} when measured.\n"),
        None => String::new(),
    };
    let text = format!(
        r#"# The machine `lockstack machine calibrate` ran on, measured with real threads.
# CPU: {cpu}; {hw} hardware threads seen (std::thread::available_parallelism), modelled as one
# socket of {hw} cores sharing one last-level cache and one NUMA node (assumed: the topology
# is not read from sysfs).
{load}
name = "host"
description = "the machine lockstack machine calibrate ran on ({cpu}, {hw} threads, measured {date})"

[topology]
sockets = 1
cores_per_socket = {hw}
threads_per_core = 1
cores_per_llc = {hw}
numa_nodes = 1
numa_distances = [[10]]

[costs]
l1_hit_ns = {l1}  # measured: a relaxed load of a line this core holds
smt_sibling_ns = {l1}  # assumed equal to an L1 hit (no SMT siblings modelled here)
same_llc_ns = {xfer}  # {transfer_note}
same_node_ns = {xfer}  # as same_llc_ns (one last-level cache)
remote = []  # one NUMA node
memory_ns = {mem}  # measured: a dependent load chasing a random cycle through 64 MiB
atomic_rmw_ns = {rmw}  # measured: an uncontended fetch_add(AcqRel) minus a load
owner_grace_ns = 10.0  # assumed: a few dozen cycles for the instruction waiting on a fill to use it
arbitration = "fifo"  # assumed: arrival order (docs/sim.md, "Arbitration")
arbitration_bound = 4  # assumed: unused under fifo
fence_ns = {fence}  # measured: a relaxed store plus fence(SeqCst), minus the store
pause_ns = {pause}  # measured: std::hint::spin_loop()
clock_read_ns = {clock}  # measured: Instant::now()
syscall_ns = {sys}  # measured: std::thread::yield_now() (sched_yield)
futex_wait_ns = {sys}  # assumed equal to a system call (the sleeper's cost before its core is free)
futex_wake_ns = {wake}  # measured: Thread::unpark of a parked thread (FUTEX_WAKE)
futex_wake_latency_ns = {lat}  # measured: half a two-thread park/unpark round trip (fastest chunk of 50)
context_switch_ns = 2000.0  # assumed: 1-5 us is the usual range on Linux x86
time_slice_ns = 3000000.0  # assumed: 3 ms, Linux's default base slice order
speed_factor = 1.0  # the host itself
clock_ghz = {ghz}  # {ghz_note}
postgres_ipc = 1.0  # assumed: see docs/sim.md, "Instruction rate"
"#,
        ghz = r(cpu_ghz().unwrap_or(3.0)),
        ghz_note = if cpu_ghz().is_some() {
            "read: \"cpu MHz\" of /proc/cpuinfo"
        } else {
            "assumed: /proc/cpuinfo gives no clock"
        },
        cpu = c.cpu,
        hw = c.hw_threads,
        date = utc_date(std::time::SystemTime::now()),
        load = load,
        l1 = r(c.l1_hit.ns),
        xfer = r(transfer),
        transfer_note = transfer_note,
        mem = r(c.memory.ns),
        rmw = r(c.atomic_rmw.ns),
        fence = r(c.fence.ns),
        pause = r(c.pause.ns),
        clock = r(c.clock_read.ns),
        sys = r(c.syscall.ns),
        wake = r(c.futex_wake.ns),
        lat = r(c.wake_latency.ns),
    );
    text
}

/// The UTC calendar date of `t` as YYYY-MM-DD (days since 1970 to a proleptic Gregorian date;
/// the epoch itself for a time before it).
fn utc_date(t: std::time::SystemTime) -> String {
    let days = t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Shift the epoch to 0000-03-01 so that a leap day ends each 4-, 100- and 400-year cycle.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// `text` with its `assumed = [...]` list inserted after the description line: the constants
/// whose comment opens with "assumed", and the `[pgbench]` ones it leaves at their defaults
/// ([`crate::constants::assumed_by_comment`]). `text` as it is when it is no valid profile.
fn with_assumed_list(text: &str) -> String {
    let Ok(p) = crate::MachineProfile::from_toml(text, "host") else {
        return text.to_string();
    };
    let keys = crate::constants::assumed_by_comment(&p, text);
    let mut list = String::from(
        "# The constants whose comment below opens with \"assumed\" (or, for [pgbench], that are absent:\n# the defaults are assumed); `lockstack experiment --sensitivity` perturbs these.\nassumed = [\n",
    );
    for k in keys {
        list.push_str(&format!("    \"{k}\",\n"));
    }
    list.push_str("]\n");
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("description = ") {
            out.push_str(&list);
        }
    }
    out
}

/// Renders a repeated calibration as a `host` profile: each figure the median over the repeats
/// ([`Repeated::median`]), with a comment block giving every figure's min / median / max. A
/// figure whose repeats disagree by more than [`DEFAULT_MAX_SPREAD`] (the caller accepted it
/// with `max_spread`) is noisy: its comment opens "assumed (noisy: ...)", so it is on the
/// profile's `assumed` list and `--sensitivity` perturbs it.
pub fn host_profile_toml_repeated(r: &Repeated, max_spread: f64) -> String {
    let mut head = format!(
        "# Each measured figure below is the median of {} measurements (each the fastest of its rounds);\n# min / median / max over them, ns:\n",
        r.runs.len()
    );
    for (key, s) in &r.spreads {
        head.push_str(&format!(
            "#   {key:<22} {:>10.1} {:>10.1} {:>10.1}  (max/min {:.2})\n",
            s.min,
            s.median,
            s.max,
            s.ratio()
        ));
    }
    let noisy = r.unstable(DEFAULT_MAX_SPREAD);
    let mut body = String::new();
    for line in host_profile_body(&r.median()).lines() {
        let hit = noisy.iter().find(|(k, _)| line.starts_with(&format!("{k} = ")));
        match (hit, line.split_once("  # measured")) {
            (Some((_, s)), Some((code, rest))) => body.push_str(&format!(
                "{code}  # assumed (noisy: max/min {:.1} over {} repeats, over the default {DEFAULT_MAX_SPREAD}, accepted with --max-spread {max_spread}); measured{rest}",
                s.ratio(),
                r.runs.len()
            )),
            _ => body.push_str(line),
        }
        body.push('\n');
    }
    if !noisy.is_empty() {
        let keys: Vec<&str> = noisy.iter().map(|(k, _)| *k).collect();
        head.push_str(&format!(
            "# Noisy (max/min over {DEFAULT_MAX_SPREAD}, accepted with --max-spread {max_spread}), so assumed: {}; recalibrate on an idle machine.\n",
            keys.join(", ")
        ));
    }
    head + &with_assumed_list(&body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs(scale: f64) -> HostCosts {
        let m = |ns: f64| Measured { ns: ns * scale };
        HostCosts {
            hw_threads: 2,
            cpu: "test".into(),
            load_average: Some(0.5 * scale),
            l1_hit: m(1.0),
            transfer: Some(m(40.0)),
            ping_pong: Some(m(60.0)),
            atomic_rmw: m(0.2),
            fence: m(0.1),
            pause: m(10.0),
            memory: m(90.0),
            clock_read: m(20.0),
            syscall: m(100.0),
            futex_wake: m(1000.0),
            wake_latency: m(5000.0),
        }
    }

    /// min / median / max over the repeats, the median of an even count the mean of the middle
    /// two.
    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Spread { min: 1.0, median: 2.0, max: 3.0 });
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]), Spread { min: 1.0, median: 2.5, max: 4.0 });
        assert_eq!(Spread::of(&[0.0, 0.0]).ratio(), 1.0);
    }

    /// Repeats that agree are stable; one figure 100x apart is named; a sub-nanosecond figure
    /// that doubles is not (below the floor).
    #[test]
    fn unstable_figures_are_named() {
        let runs = vec![costs(1.0), costs(1.1), costs(1.2)];
        let r = Repeated { spreads: spreads(&runs), runs };
        assert!(r.unstable(1.5).is_empty(), "{:?}", r.unstable(1.5));
        assert_eq!(r.median().futex_wake.ns, 1100.0);

        let mut noisy = vec![costs(1.0), costs(1.0), costs(1.0)];
        noisy[1].wake_latency.ns = 500_000.0;
        noisy[2].fence.ns = 0.3;
        let r = Repeated { spreads: spreads(&noisy), runs: noisy };
        let bad: Vec<&str> = r.unstable(1.5).iter().map(|(k, _)| *k).collect();
        assert_eq!(bad, ["futex_wake_latency_ns"]);
        assert_eq!(r.median().wake_latency.ns, 5000.0, "the median ignores one outlier");
    }

    /// The repeated profile parses as a profile and carries the spread comment for each figure.
    #[test]
    fn repeated_profile_parses_and_shows_the_spread() {
        let runs = vec![costs(1.0), costs(1.2), costs(1.1)];
        let r = Repeated { spreads: spreads(&runs), runs };
        let text = host_profile_toml_repeated(&r, DEFAULT_MAX_SPREAD);
        assert!(text.contains("median of 3 measurements"), "{text}");
        for (key, _) in figures(&r.runs[0]) {
            assert!(text.lines().any(|l| l.starts_with("#   ") && l.contains(key)), "{key}: {text}");
        }
        let p = crate::MachineProfile::from_toml(&text, "test").expect("the profile parses");
        assert_eq!(p.costs.futex_wake_ns, 1100.0);
        // Its assumed list is its "assumed" comments and the defaulted client costs.
        let mut listed = p.assumed.clone();
        listed.sort();
        let mut commented = crate::constants::assumed_by_comment(&p, &text);
        commented.sort();
        assert_eq!(listed, commented);
        assert!(
            listed.contains(&"costs.owner_grace_ns".to_string())
                && listed.contains(&"pgbench.wal_flush_us".to_string())
        );
        assert!(!listed.contains(&"costs.fence_ns".to_string()), "measured, not assumed: {listed:?}");
    }

    /// A refused calibration names the figure, its spread, the repeats and the limit, and the
    /// --max-spread that accepts it; accepted, the figure is written noisy and assumed while
    /// the quiet figures stay measured.
    #[test]
    fn a_noisy_figure_is_refused_by_name_and_accepted_as_assumed() {
        let mut runs = vec![costs(1.0), costs(1.0)];
        runs[1].futex_wake.ns = 14_200.0;
        let r = Repeated { spreads: spreads(&runs), runs };
        let bad = r.unstable(3.0);
        let msg = unstable_message(2, 3.0, &bad);
        assert!(
            msg.starts_with("futex_wake_ns spread 14.2x over 2 repeats")
                && msg.contains("exceeds --max-spread 3;")
                && msg.contains("rerun on an idle machine")
                && msg.contains("--max-spread 15 to accept it, marked noisy"),
            "{msg}"
        );
        assert_eq!(msg.lines().count(), 1, "{msg}");
        assert!(r.unstable(15.0).is_empty(), "the suggested --max-spread accepts it");
        let text = host_profile_toml_repeated(&r, 15.0);
        let line = text.lines().find(|l| l.starts_with("futex_wake_ns = ")).expect("futex_wake_ns line");
        assert!(line.contains("# assumed (noisy: max/min 14.2 over 2 repeats"), "{line}");
        assert!(line.contains("accepted with --max-spread 15"), "{line}");
        let p = crate::MachineProfile::from_toml(&text, "test").expect("the profile parses");
        assert!(p.assumed.contains(&"costs.futex_wake_ns".to_string()), "{:?}", p.assumed);
        assert!(!p.assumed.contains(&"costs.fence_ns".to_string()), "{:?}", p.assumed);
        assert!(text.contains(
            "# Noisy (max/min over 1.5, accepted with --max-spread 15), so assumed: futex_wake_ns"
        ));
        // A figure measured 0 ns in one repeat has no finite spread to accept.
        let zero = [("pause_ns", Spread { min: 0.0, median: 5.0, max: 10.0 })];
        assert!(unstable_message(2, 1.5, &zero).contains("no --max-spread accepts it"));
    }

    /// The profile's measurement date is the UTC calendar date, leap days included.
    #[test]
    fn utc_date_is_the_calendar_date() {
        let at = |s: u64| utc_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(1_709_208_000), "2024-02-29");
        assert_eq!(at(1_796_256_000 - 1), "2026-12-02");
        assert_eq!(at(1_796_256_000), "2026-12-03");
    }
}
