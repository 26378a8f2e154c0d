//! `lockstack machine validate PROFILE`: classic microbenchmarks run on the simulated machine
//! (line latencies by distance, a shared counter's throughput, four spinlocks), printed next to
//! published figures for the processor family where one can be cited.
//!
//! Tasks cannot be pinned, but the executor places them deterministically: the main task takes
//! the first hardware thread of the scheduler's order, and each task spawned while every
//! earlier one is still running takes the next one. Every benchmark runs one task per
//! position of that order up to the ones it needs (the main task is position 0), all busy
//! (modelled computation, which keeps the thread) until a common start time, so a task's
//! position decides its hardware thread.

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lockstack_sim::{Access, MachineProfile, SimConfig, Simulation, task};

use crate::Failure;

/// When every benchmark task starts (virtual time): well after all spawns (a spawn costs a
/// few microseconds on the slowest profile).
const START: Duration = Duration::from_millis(1);
/// Acquisitions (or fetch_adds) per throughput run, shared among the threads.
const TOTAL_OPS: usize = 2000;
/// Rounds of a latency measurement (the mean is printed).
const ROUNDS: u32 = 8;

/// X5550 source text: perfbook's table of operation costs.
const PERFBOOK_OVERHEADS: &str = "McKenney, perfbook (github paulmckrcu/perfbook, cpu/overheads.tex): 2-socket Xeon X5550 2.8 GHz (Nehalem-EP; same family, not the same part)";
/// X5550 source text: perfbook's shared-counter atomic increments.
const PERFBOOK_COUNTER: &str = "McKenney, perfbook (github paulmckrcu/perfbook), shared-counter atomic_inc throughput computed from its raw data: 2-socket Xeon X5550 (Nehalem-EP; same family, not the same part)";

/// One measurement: its name, the simulated value and the published one with its source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Measurement {
    /// `load-modified-D`, `cas-modified-D`, `faa-counter-tN`, `LOCK-lock-tN`.
    pub(crate) name: String,
    /// The simulated machine's figure.
    pub(crate) simulated: f64,
    /// `ns` or `Mops/s`.
    pub(crate) unit: &'static str,
    /// The published figure for the processor family, with its source.
    pub(crate) published: Option<(f64, &'static str)>,
}

/// Westmere-EX source text: ccbench's example output, the DGT13 machine's own processor.
const CCBENCH_README: &str = "Trigonakis, ccbench (github trigonak/ccbench, README.md, the example output): LOAD_FROM_MODIFIED between OS cores 1 and 2, 111.5 cycles; the Xeon E7-8867L (Westmere-EX, 2.13 GHz) of DGT13, inferred from the README's load/full fence setting, which it gives for that Xeon, and tudordavid/libslock include/platform_defs.h, which puts cores 1-10 on socket 0";

/// A published figure for `name` on the processor family of profile `profile`.
fn published(profile: &str, name: &str) -> Option<(f64, &'static str)> {
    if profile == "xeon-32" && name == "load-modified-same-die" {
        return Some((52.3, CCBENCH_README));
    }
    if profile != "xeon-32" && profile != "xeon-12" {
        return None;
    }
    let v = match name {
        "load-modified-same-die" => (31.2, PERFBOOK_OVERHEADS),
        "cas-modified-same-die" => (31.2, PERFBOOK_OVERHEADS),
        "load-modified-hop1" => (92.4, PERFBOOK_OVERHEADS),
        "cas-modified-hop1" => (95.9, PERFBOOK_OVERHEADS),
        "faa-counter-t1" => (132.0, PERFBOOK_COUNTER),
        "faa-counter-t2" => (80.0, PERFBOOK_COUNTER),
        "faa-counter-t4" => (56.0, PERFBOOK_COUNTER),
        "faa-counter-t8" => (42.0, PERFBOOK_COUNTER),
        "faa-counter-t16" => (42.0, PERFBOOK_COUNTER),
        _ => return None,
    };
    Some(v)
}

#[track_caller]
fn load(a: &AtomicU64) -> u64 {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Read, Location::caller());
    a.load(Ordering::SeqCst)
}

#[track_caller]
fn store(a: &AtomicU64, v: u64) {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Write, Location::caller());
    a.store(v, Ordering::SeqCst)
}

#[track_caller]
fn swap(a: &AtomicU64, v: u64) -> u64 {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Rmw, Location::caller());
    a.swap(v, Ordering::SeqCst)
}

#[track_caller]
fn fetch_add(a: &AtomicU64) -> u64 {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Rmw, Location::caller());
    a.fetch_add(1, Ordering::SeqCst)
}

#[track_caller]
fn cas(a: &AtomicU64, old: u64, new: u64) -> bool {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Rmw, Location::caller());
    a.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst).is_ok()
}

#[track_caller]
fn pause() {
    task::spin_hint(Location::caller());
}

/// Busy (modelled computation, keeping the hardware thread) until virtual time `t`.
fn busy_until(t: Duration) {
    let now = task::clock();
    if t > now {
        task::compute(t - now, Location::caller());
    }
}

/// One word per 64-byte line.
#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);

/// The scheduler's order of hardware threads (as the executor builds it): one thread per core
/// spread over the sockets, then the second SMT threads.
fn hw_order(p: &MachineProfile) -> Vec<u32> {
    let t = &p.topology;
    let mut v = Vec::new();
    for smt in 0..t.threads_per_core {
        for k in 0..t.cores_per_socket {
            for s in 0..t.sockets {
                v.push((s * t.cores_per_socket + k) * t.threads_per_core + smt);
            }
        }
    }
    v
}

/// Runs `work(position)` on one task per position `0..=last` of the scheduler's order (the
/// main task is position 0), each started at [`START`].
fn run_positions(
    p: &MachineProfile,
    last: usize,
    work: Arc<dyn Fn(usize) + Send + Sync>,
) -> Result<(), Failure> {
    let sim =
        Simulation::new(p.clone()).with_config(SimConfig { default_segment_ns: 0.0, ..SimConfig::default() });
    sim.run(move || {
        let hs: Vec<_> = (1..=last)
            .map(|pos| {
                let w = Arc::clone(&work);
                task::spawn(
                    &format!("position {pos}"),
                    Box::new(move || {
                        busy_until(START);
                        w(pos);
                    }),
                )
            })
            .collect();
        busy_until(START);
        work(0);
        for h in hs {
            if let Err(panic) = task::join(h) {
                std::panic::resume_unwind(panic);
            }
        }
    })
    .map_err(|e| Failure::run(format!("machine validate: simulation failed: {e:?}")))?;
    Ok(())
}

/// The distances the profile has: (name, hardware thread a, hardware thread b).
fn distance_pairs(p: &MachineProfile) -> Vec<(String, u32, u32)> {
    let t = &p.topology;
    let cores = p.cores();
    let tpc = t.threads_per_core;
    let per_node = cores / t.numa_nodes;
    let node = |c: u32| c / per_node;
    let llc = |c: u32| c / t.cores_per_llc;
    let mut out = Vec::new();
    if tpc >= 2 {
        out.push(("smt".to_string(), 0, 1));
    }
    let find = |pred: &dyn Fn(u32, u32) -> bool| -> Option<(u32, u32)> {
        (0..cores).flat_map(|a| (a + 1..cores).map(move |b| (a, b))).find(|&(a, b)| pred(a, b))
    };
    if let Some((a, b)) = find(&|a, b| llc(a) == llc(b)) {
        out.push(("same-die".to_string(), a * tpc, b * tpc));
    }
    if let Some((a, b)) = find(&|a, b| node(a) == node(b) && llc(a) != llc(b)) {
        out.push(("same-socket".to_string(), a * tpc, b * tpc));
    }
    let mut remote: Vec<u32> = t.numa_distances.iter().flatten().copied().filter(|&d| d > 10).collect();
    remote.sort_unstable();
    remote.dedup();
    for (i, d) in remote.iter().take(2).enumerate() {
        let dist = |a: u32, b: u32| t.numa_distances[node(a) as usize][node(b) as usize];
        if let Some((a, b)) = find(&|a, b| dist(a, b) == *d) {
            out.push((format!("hop{}", i + 1), a * tpc, b * tpc));
        }
    }
    out
}

/// The mean latency (ns) of a load (`access` Read) or CAS (Rmw) by hardware thread `b` of a
/// line hardware thread `a` has just modified.
fn modified_latency(p: &MachineProfile, a: u32, b: u32, access: Access) -> Result<f64, Failure> {
    let order = hw_order(p);
    let pos = |h: u32| {
        order
            .iter()
            .position(|&x| x == h)
            .expect("distance_pairs picks hardware threads of the profile, and hw_order lists all of them")
    };
    let (pa, pb) = (pos(a), pos(b));
    let line = Arc::new(Padded::default());
    let total = Arc::new(Mutex::new(Duration::ZERO));
    let (l, tot) = (Arc::clone(&line), Arc::clone(&total));
    let round = Duration::from_micros(10);
    run_positions(
        p,
        pa.max(pb),
        Arc::new(move |pos| {
            for r in 0..ROUNDS {
                let at = START + round * r;
                if pos == pa {
                    busy_until(at);
                    fetch_add(&l.0);
                } else if pos == pb {
                    busy_until(at + round / 2);
                    let t0 = task::clock();
                    match access {
                        Access::Rmw => {
                            let v = l.0.load(Ordering::SeqCst);
                            cas(&l.0, v, v + 1);
                        }
                        _ => {
                            load(&l.0);
                        }
                    }
                    *tot.lock().unwrap() += task::clock() - t0;
                }
            }
        }),
    )?;
    let t = *total.lock().unwrap();
    Ok(t.as_secs_f64() * 1e9 / ROUNDS as f64)
}

/// A lock under test: acquire and release around an empty critical section by the task at
/// `me` (its index among the threads).
trait SpinLock: Send + Sync {
    fn acquire(&self, me: usize);
    fn release(&self, me: usize);
}

/// Test-and-set: swap 1 until the old value is 0.
#[derive(Default)]
struct Tas(Padded);
impl SpinLock for Tas {
    fn acquire(&self, _: usize) {
        while swap(&self.0.0, 1) != 0 {
            pause();
        }
    }
    fn release(&self, _: usize) {
        store(&self.0.0, 0);
    }
}

/// Test-and-test-and-set: read until free, then swap.
#[derive(Default)]
struct Ttas(Padded);
impl SpinLock for Ttas {
    fn acquire(&self, _: usize) {
        loop {
            while load(&self.0.0) != 0 {
                pause();
            }
            if swap(&self.0.0, 1) == 0 {
                return;
            }
        }
    }
    fn release(&self, _: usize) {
        store(&self.0.0, 0);
    }
}

/// Ticket lock: next ticket and now-serving on one line.
#[repr(align(64))]
#[derive(Default)]
struct Ticket {
    next: AtomicU64,
    serving: AtomicU64,
}
impl SpinLock for Ticket {
    fn acquire(&self, _: usize) {
        let me = fetch_add(&self.next);
        while load(&self.serving) != me {
            pause();
        }
    }
    fn release(&self, _: usize) {
        let s = self.serving.load(Ordering::SeqCst);
        store(&self.serving, s + 1);
    }
}

/// One MCS queue node per thread, on its own line.
#[repr(align(64))]
#[derive(Default)]
struct McsNode {
    locked: AtomicU64,
    next: AtomicU64,
}

/// MCS lock: `tail` holds the last waiter's index + 1 (0: free); each waiter spins on its own
/// node.
struct Mcs {
    tail: Padded,
    nodes: Vec<McsNode>,
}
impl SpinLock for Mcs {
    fn acquire(&self, me: usize) {
        let n = &self.nodes[me];
        store(&n.next, 0);
        store(&n.locked, 1);
        let pred = swap(&self.tail.0, me as u64 + 1);
        if pred != 0 {
            store(&self.nodes[pred as usize - 1].next, me as u64 + 1);
            while load(&n.locked) != 0 {
                pause();
            }
        }
    }
    fn release(&self, me: usize) {
        let n = &self.nodes[me];
        let mut next = load(&n.next);
        if next == 0 {
            if cas(&self.tail.0, me as u64 + 1, 0) {
                return;
            }
            while {
                next = load(&n.next);
                next == 0
            } {
                pause();
            }
        }
        store(&self.nodes[next as usize - 1].locked, 0);
    }
}

/// Million operations per second of `n` threads (positions `0..n`) each running `op(position)`
/// `k` times from [`START`].
fn throughput(p: &MachineProfile, n: usize, op: Arc<dyn Fn(usize) + Send + Sync>) -> Result<f64, Failure> {
    let k = (TOTAL_OPS / n).max(5);
    let end = Arc::new(Mutex::new(Duration::ZERO));
    let e = Arc::clone(&end);
    run_positions(
        p,
        n - 1,
        Arc::new(move |pos| {
            for _ in 0..k {
                op(pos);
            }
            let t = task::clock();
            let mut g = e.lock().unwrap();
            *g = (*g).max(t);
        }),
    )?;
    let span = end.lock().unwrap().saturating_sub(START).as_secs_f64();
    Ok((n * k) as f64 / span / 1e6)
}

/// The thread counts measured: 1, 2, 4, ... and all hardware threads.
fn thread_counts(p: &MachineProfile) -> Vec<usize> {
    let all = p.hw_threads() as usize;
    let mut v: Vec<usize> =
        std::iter::successors(Some(1usize), |n| Some(n * 2)).take_while(|&n| n < all).collect();
    v.push(all);
    v
}

/// Every measurement of `machine validate` on profile `p`.
pub(crate) fn measure(p: &MachineProfile) -> Result<Vec<Measurement>, Failure> {
    let mut out = Vec::new();
    let mut push = |name: String, simulated: f64, unit: &'static str| {
        let published = published(&p.name, &name);
        out.push(Measurement { name, simulated, unit, published });
    };
    for (d, a, b) in distance_pairs(p) {
        push(format!("load-modified-{d}"), modified_latency(p, a, b, Access::Read)?, "ns");
    }
    for (d, a, b) in distance_pairs(p) {
        push(format!("cas-modified-{d}"), modified_latency(p, a, b, Access::Rmw)?, "ns");
    }
    let counts = thread_counts(p);
    for &n in &counts {
        let c = Arc::new(Padded::default());
        push(
            format!("faa-counter-t{n}"),
            throughput(
                p,
                n,
                Arc::new(move |_| {
                    fetch_add(&c.0);
                }),
            )?,
            "Mops/s",
        );
    }
    type Make = fn(usize) -> Arc<dyn SpinLock>;
    let locks: [(&str, Make); 4] = [
        ("tas", |_| Arc::new(Tas::default())),
        ("ttas", |_| Arc::new(Ttas::default())),
        ("ticket", |_| Arc::new(Ticket::default())),
        ("mcs", |n| {
            Arc::new(Mcs { tail: Padded::default(), nodes: (0..n).map(|_| McsNode::default()).collect() })
        }),
    ];
    for (lock, make) in locks {
        for &n in &counts {
            let l = make(n);
            let v = throughput(
                p,
                n,
                Arc::new(move |me| {
                    l.acquire(me);
                    l.release(me);
                }),
            )?;
            push(format!("{lock}-lock-t{n}"), v, "Mops/s");
        }
    }
    Ok(out)
}

/// `machine validate PROFILE [--json]`.
pub(crate) fn run(profile: &str, json: bool) -> Result<(), Failure> {
    let p = MachineProfile::resolve(profile).map_err(|e| Failure::input(e.to_string()))?;
    let ms = measure(&p)?;
    if json {
        for m in &ms {
            let v = serde_json::json!({
                "name": m.name,
                "simulated": (m.simulated * 100.0).round() / 100.0,
                "unit": m.unit,
                "published": m.published.map(|(v, _)| v),
                "source": m.published.map(|(_, s)| s),
            });
            outln!("{v}");
        }
        return Ok(());
    }
    outln!(
        "{:<26} | {:>10} | {:<6} | {:>9} | {:>7} | source",
        "name",
        "simulated",
        "unit",
        "published",
        "error"
    );
    for m in &ms {
        let (pubv, err, src) = match m.published {
            Some((v, s)) => (format!("{v:.1}"), format!("{:+.0}%", (m.simulated - v) / v * 100.0), s),
            None => ("-".to_string(), "-".to_string(), "no published figure found"),
        };
        outln!("{:<26} | {:>10.1} | {:<6} | {:>9} | {:>7} | {src}", m.name, m.simulated, m.unit, pubv, err);
    }
    Ok(())
}
