//! Wall-clock time of `get_snapshot_data` per layout, made robust against a shared, busy machine.
//!
//! ```text
//! cargo run --release -p lockstack-procarray --example snapshot_timing -- warm [backends] [running] [rounds]
//! cargo run --release -p lockstack-procarray --example snapshot_timing -- cold [backends] [running] [snapshots] [sweep_mib]
//! ```
//!
//! Both modes use the criterion bench's set-up (`benches/benches/procarray.rs`): `backends`
//! members (default 1000), backend 0 taking the snapshots, `running` of the others (default 10)
//! holding xids spread through the array, one commit after them so that xmax covers them; every
//! timed step is one snapshot plus the read-only end of transaction that clears xmin. `dense`
//! computes every snapshot (reuse off), `dense-reused` serves them from the cache.
//!
//! * `warm`: back-to-back snapshots. Each round times 400 batches of 50 snapshots per layout,
//!   layouts interleaved batch by batch; prints the fastest batch, the 10th percentile and the
//!   median of all batches, in nanoseconds per snapshot, and the median over batch rounds of
//!   "pgproc's batch time / this layout's batch time" (the speed-up the targets name). Preemption by other processes only ever adds time, so the low
//!   percentiles are far steadier than a mean or median when the load average exceeds the core
//!   count. Everything stays in L1/L2 here.
//! * `cold`: before every snapshot the thread writes one word per cache line of a `sweep_mib`
//!   MiB buffer (default 16, larger than L2), standing in for the query work a backend does
//!   between two snapshots; only the snapshot is timed (one `Instant` pair each, 20-40 ns of
//!   timer overhead included). Prints the 10th percentile and median of `snapshots` (default
//!   2000) samples per layout.

use std::hint::black_box;
use std::time::Instant;

use lockstack_common::BackendId;
use lockstack_procarray::{Backend, Layout, ProcArray, ProcArrayConfig};

const CASES: [(Layout, bool, &str); 5] = [
    (Layout::Pgproc, false, "pgproc"),
    (Layout::Pgxact, false, "pgxact"),
    (Layout::PgxactPadded, false, "pgxact-padded"),
    (Layout::Dense, false, "dense"),
    (Layout::Dense, true, "dense-reused"),
];

/// The criterion bench's ProcArray: returns the snapshot taker and the other members (which
/// must stay alive: dropping a `Backend` leaves the ProcArray).
fn setup(layout: Layout, reuse: bool, n: usize, running: usize) -> (Backend, Vec<Backend>) {
    let mut cfg = ProcArrayConfig::new(n);
    cfg.layout = layout;
    cfg.snapshot_reuse = reuse;
    let pa = ProcArray::new(cfg).unwrap_or_else(|e| fail(&e.to_string()));
    let mut others: Vec<Backend> =
        (1..n).map(|i| pa.attach(BackendId(i as u32)).unwrap_or_else(|e| fail(&e.to_string()))).collect();
    if let Some(step) = others.len().checked_div(running) {
        for k in 0..running {
            others[k * step].assign_xid();
        }
    }
    let mut me = pa.attach(BackendId(0)).unwrap_or_else(|e| fail(&e.to_string()));
    me.assign_xid();
    me.end_transaction();
    me.get_snapshot_data();
    me.end_transaction();
    (me, others)
}

fn fail(msg: &str) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

/// The `q`-quantile (0.0..=1.0) of sorted samples.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q) as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: usize| -> usize {
        args.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| fail(&format!("argument {i} must be a number, got '{s}'")))
        })
    };
    let mode = args.get(1).map_or("warm", String::as_str);
    let (n, running) = (arg(2, 1000), arg(3, 10));
    if n < running + 2 {
        fail("backends must be at least running + 2");
    }
    match mode {
        "warm" => {
            let rounds = arg(4, 5).max(1);
            let mut takers: Vec<_> = CASES.iter().map(|&(l, r, _)| setup(l, r, n, running)).collect();
            let mut batches: Vec<Vec<f64>> = vec![Vec::new(); CASES.len()];
            for _ in 0..rounds * 400 {
                // Layouts interleaved batch by batch, so that a burst of load from other
                // processes hits all of them alike.
                for ((me, _others), out) in takers.iter_mut().zip(&mut batches) {
                    let t0 = Instant::now();
                    for _ in 0..50 {
                        black_box(me.get_snapshot_data());
                        me.end_transaction();
                    }
                    out.push(t0.elapsed().as_nanos() as f64 / 50.0);
                }
            }
            // Per batch round, how many times faster than pgproc each layout was; the median of
            // those ratios is steadier than a ratio of two separately taken percentiles.
            let ratios: Vec<Vec<f64>> = batches
                .iter()
                .map(|b| {
                    let mut r: Vec<f64> = batches[0].iter().zip(b).map(|(p, x)| p / x).collect();
                    r.sort_by(f64::total_cmp);
                    r
                })
                .collect();
            for (((_, _, name), b), r) in CASES.iter().zip(&mut batches).zip(&ratios) {
                b.sort_by(f64::total_cmp);
                println!(
                    "warm {name} backends={n} running={running} min_ns={:.1} p10_ns={:.1} median_ns={:.1} \
                     vs_pgproc_median={:.2}x",
                    b[0],
                    quantile(b, 0.1),
                    quantile(b, 0.5),
                    quantile(r, 0.5)
                );
            }
        }
        "cold" => {
            let (snapshots, sweep_mib) = (arg(4, 2000).max(1), arg(5, 16));
            let mut sweep = vec![0u64; sweep_mib << 17];
            for (layout, reuse, name) in CASES {
                let (mut me, _others) = setup(layout, reuse, n, running);
                let mut ns = Vec::with_capacity(snapshots);
                for _ in 0..snapshots {
                    for w in sweep.iter_mut().step_by(8) {
                        *w = w.wrapping_add(1);
                    }
                    black_box(&mut sweep);
                    let t0 = Instant::now();
                    black_box(me.get_snapshot_data());
                    me.end_transaction();
                    ns.push(t0.elapsed().as_nanos() as f64);
                }
                ns.sort_by(f64::total_cmp);
                println!(
                    "cold {name} backends={n} running={running} sweep={sweep_mib}MiB p10_ns={:.0} median_ns={:.0}",
                    quantile(&ns, 0.1),
                    quantile(&ns, 0.5)
                );
            }
        }
        _ => fail("usage: snapshot_timing warm|cold [backends] [running] [rounds | snapshots sweep_mib]"),
    }
}
