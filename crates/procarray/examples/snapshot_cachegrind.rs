//! Takes a fixed number of snapshots on one thread, for `valgrind --tool=cachegrind`:
//!
//! ```text
//! cargo build --release -p lockstack-procarray --example snapshot_cachegrind
//! valgrind --tool=cachegrind --cache-sim=yes \
//!     target/release/examples/snapshot_cachegrind <layout> <backends> <running> <snapshots>
//! ```
//!
//! Run it twice with different `<snapshots>` and divide the difference in D1 misses by the
//! difference in snapshots: that removes the set-up's misses.

use lockstack_procarray::workload::{SnapshotWorkloadConfig, run_snapshot_workload};
use lockstack_procarray::{Layout, Layout::Dense};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!(
            "usage: {} <pgproc|pgxact|pgxact-padded|dense|dense-reused> <backends> <running> <snapshots>",
            args[0]
        );
        std::process::exit(2);
    }
    let (layout, reuse) = match args[1].as_str() {
        "dense-reused" => (Dense, true),
        s => match s.parse::<Layout>() {
            Ok(l) => (l, false),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(2);
            }
        },
    };
    let num = |i: usize| -> usize {
        args[i].parse().unwrap_or_else(|_| {
            eprintln!("argument {i} must be a number, got '{}'", args[i]);
            std::process::exit(2)
        })
    };
    let mut cfg = SnapshotWorkloadConfig::new(layout, num(2), num(3));
    cfg.procarray.snapshot_reuse = reuse;
    cfg.fixed_snapshots = Some(num(4) as u64);
    match run_snapshot_workload(&cfg) {
        Ok(r) => println!(
            "{} backends={} running={} snapshots={} xip={} ns/snapshot={:.1}",
            args[1], cfg.backends, cfg.running_xids, r.snapshots, r.xip_len, r.ns_per_snapshot
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
