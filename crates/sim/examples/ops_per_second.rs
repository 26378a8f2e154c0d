//! How many simulated operations per host second the executor and the machine model sustain
//! with 64 tasks on the `xeon-32` profile (time-sliced: 64 tasks on 32 hardware threads).
//!
//! Each task loops over: a read of a shared line (a lock word that is mostly read), an RMW on
//! its own padded line (a private counter), an RMW on one of 8 shared lines (a partitioned
//! lock), and a `touch` of 128 bytes of shared data (a 64-byte-aligned array, so that its
//! lines do not depend on where the allocator puts it). Run with
//! `cargo run --release -p lockstack-sim --example ops_per_second [OPS_PER_TASK] [caches|no-caches]`
//! (`no-caches`: the profile's cache capacities off).

use std::panic::Location;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use lockstack_sim::{Access, MachineProfile, Simulation, TaskId, task};

#[repr(align(64))]
#[derive(Default)]
struct Padded(AtomicU64);
/// Shared data on whole lines.
#[repr(align(64))]
struct Al([u8; 1024]);

fn main() {
    let per_task: u64 = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 20_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("ops_per_second: OPS_PER_TASK must be a positive integer");
            std::process::exit(1);
        }
    };
    let caches = match std::env::args().nth(2).as_deref() {
        None | Some("caches") => true,
        Some("no-caches") => false,
        Some(_) => {
            eprintln!("ops_per_second: the second argument is caches or no-caches");
            std::process::exit(1);
        }
    };
    let tasks = 64usize;
    let profile = MachineProfile::builtin("xeon-32").expect("built-in");
    let sim = Simulation::new(profile);
    sim.set_caches(caches);
    let report = sim
        .run(move || {
            let shared = Arc::new(Padded::default());
            let parts: Arc<Vec<Padded>> = Arc::new((0..8).map(|_| Padded::default()).collect());
            let own: Arc<Vec<Padded>> = Arc::new((0..tasks).map(|_| Padded::default()).collect());
            let data = Arc::new(Al([0u8; 1024]));
            let hs: Vec<TaskId> = (0..tasks)
                .map(|i| {
                    let (shared, parts, own, data) =
                        (Arc::clone(&shared), Arc::clone(&parts), Arc::clone(&own), Arc::clone(&data));
                    task::spawn(
                        "worker",
                        Box::new(move || {
                            let site = Location::caller();
                            for k in 0..per_task / 4 {
                                task::atomic(&shared.0 as *const AtomicU64 as usize, 8, Access::Read, site);
                                shared.0.load(Ordering::Acquire);
                                task::atomic(&own[i].0 as *const AtomicU64 as usize, 8, Access::Rmw, site);
                                own[i].0.fetch_add(1, Ordering::AcqRel);
                                let p = &parts[(i + k as usize) % 8].0;
                                task::atomic(p as *const AtomicU64 as usize, 8, Access::Rmw, site);
                                p.fetch_add(1, Ordering::AcqRel);
                                let off = (k as usize * 128) % 1024;
                                task::touch(data.0.as_ptr() as usize + off, 128, Access::Read, site);
                            }
                        }),
                    )
                })
                .collect();
            for h in hs {
                task::join(h).expect("worker");
            }
        })
        .expect("simulation");
    let s = &report.stats;
    println!(
        "{} tasks on {}: {} operations in {:.3} host s = {:.2} M operations/s; {:.3} virtual ms; {} preemptions; {} line transfers",
        tasks,
        s.machine,
        s.events,
        report.host.host_seconds,
        report.host.events_per_second / 1e6,
        s.virtual_seconds * 1e3,
        s.preemptions,
        s.transfers
    );
    if let Some(c) = &s.caches {
        println!(
            "caches: {} KiB private, {} KiB LLC; {} private and {} LLC evictions",
            c.private_kib, c.llc_kib, c.private_evictions, c.llc_evictions
        );
    } else {
        println!("caches: no capacity");
    }
}
