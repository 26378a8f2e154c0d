//! Helpers shared by the simulator's tests: a profile with round costs, and atomics that
//! report to the simulation the way the sync facade will.

#![allow(dead_code, unreachable_pub)]

use std::panic::Location;
use std::sync::atomic::{AtomicU64, Ordering};

use lockstack_sim::{Access, MachineProfile, SimConfig, Simulation, task};

/// A machine of `sockets` x `cores` cores with `smt` threads each, one NUMA node per socket,
/// round costs: L1 1 ns, same socket 50 ns, cross socket 150 ns, memory 100 ns, RMW 10 ns,
/// futex wait 100 ns, wake 200 ns, wake latency 5 us, context switch 1 us, slice `slice_ns`,
/// no owner grace window.
pub fn profile(sockets: u32, cores: u32, smt: u32, slice_ns: f64) -> MachineProfile {
    profile_with_grace(sockets, cores, smt, slice_ns, 0.0)
}

/// [`profile`] with an owner grace window of `grace_ns`.
pub fn profile_with_grace(
    sockets: u32,
    cores: u32,
    smt: u32,
    slice_ns: f64,
    grace_ns: f64,
) -> MachineProfile {
    let dist: Vec<String> = (0..sockets)
        .map(|i| {
            format!(
                "[{}]",
                (0..sockets).map(|j| if i == j { "10" } else { "20" }).collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    let text = format!(
        r#"
name = "test"
description = "round numbers for tests"
[topology]
sockets = {sockets}
cores_per_socket = {cores}
threads_per_core = {smt}
cores_per_llc = {cores}
numa_nodes = {sockets}
numa_distances = [{dist}]
[costs]
l1_hit_ns = 1.0
smt_sibling_ns = 5.0
same_llc_ns = 50.0
same_node_ns = 50.0
remote = [{{ distance = 20, transfer_ns = 150.0, memory_ns = 200.0 }}]
memory_ns = 100.0
atomic_rmw_ns = 10.0
owner_grace_ns = {grace_ns}
fence_ns = 5.0
pause_ns = 5.0
clock_read_ns = 0.0
syscall_ns = 100.0
futex_wait_ns = 100.0
futex_wake_ns = 200.0
futex_wake_latency_ns = 5000.0
context_switch_ns = 1000.0
time_slice_ns = {slice_ns}
speed_factor = 1.0
clock_ghz = 1.0
postgres_ipc = 1.0
"#,
        dist = dist.join(", ")
    );
    MachineProfile::from_toml(&text, "test").expect("test profile")
}

/// A simulation of `p` in deterministic mode where local work between operations is free, so
/// that virtual times are sums of the profile's costs.
pub fn exact(p: MachineProfile) -> Simulation {
    Simulation::new(p).with_config(SimConfig { default_segment_ns: 0.0, ..SimConfig::default() })
}

/// A 64-byte-aligned counter: one per line.
#[repr(align(64))]
#[derive(Default)]
pub struct Padded(pub AtomicU64);

/// `fetch_add(1)` reported to the simulation as an RMW of the counter's line.
#[track_caller]
pub fn fetch_add(a: &AtomicU64) -> u64 {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Rmw, Location::caller());
    a.fetch_add(1, Ordering::SeqCst)
}

/// A load reported to the simulation.
#[track_caller]
pub fn load(a: &AtomicU64) -> u64 {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Read, Location::caller());
    a.load(Ordering::SeqCst)
}

/// A compare-and-swap reported to the simulation.
#[track_caller]
pub fn cas(a: &AtomicU64, old: u64, new: u64) -> bool {
    task::atomic(a as *const AtomicU64 as usize, 8, Access::Rmw, Location::caller());
    a.compare_exchange(old, new, Ordering::SeqCst, Ordering::SeqCst).is_ok()
}

/// Sleeps until virtual time `t` (so that tasks start an experiment together).
pub fn sleep_until(t: std::time::Duration) {
    let now = task::now();
    task::sleep(t.saturating_sub(now));
}
