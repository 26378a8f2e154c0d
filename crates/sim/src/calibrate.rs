//! `lockstack machine calibrate`: measure this host's line ping-pong, atomic, fence, pause,
//! memory and futex costs with real threads, and write them as a `host` profile.
//!
//! Each figure is the minimum over many short rounds of a loop: on a loaded machine (other
//! processes taking the cores) a round in which a thread was descheduled is slow, and the
//! fastest round is the one that measured the hardware (the whole calibration takes about two
//! seconds). Figures that cannot be measured without pinning threads to cores or
//! reading kernel tunables (the context switch, the time slice) are written as assumptions.

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
    h.join().expect("ping-pong thread");
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
        let theirs = h.join().expect("contended fetch_add thread");
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
    h.join().expect("park thread");
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

/// Renders a measurement as a `host` profile (TOML with a comment beside each number: what
/// measured it, or "assumed").
pub fn host_profile_toml(c: &HostCosts) -> String {
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
    format!(
        r#"# The machine `lockstack machine calibrate` ran on, measured with real threads.
# CPU: {cpu}; {hw} hardware threads seen (std::thread::available_parallelism), modelled as one
# socket of {hw} cores sharing one last-level cache and one NUMA node (assumed: the topology
# is not read from sysfs).
{load}
name = "host"
description = "this host as measured by lockstack machine calibrate ({cpu}, {hw} threads)"

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
    )
}
