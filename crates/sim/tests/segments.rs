//! Segment costs: the native timing pass (`lockstack_sim::timer`) keys segments exactly as the
//! simulation does and counts every one of them, on every thread; a deterministic run charges
//! a table's segments and counts the ones the table lacks; the measured clock charges a
//! segment the host interrupted its key's mean; cold misses can be left to the host.
#![cfg(feature = "sim")]

use lockstack_common::sync::{self, AtomicU64, Ordering, hook};
use lockstack_sim::{
    ClockMode, MachineProfile, SegmentCost, SegmentTable, SimConfig, Simulation, facade, timer,
};

/// `n` rounds of a load then a touch, each at its own line of this function.
fn rounds(n: usize, word: &AtomicU64, data: &[u64; 8]) {
    for _ in 0..n {
        std::hint::black_box(word.load(Ordering::Relaxed));
        hook::touch_val(data, hook::Access::Read);
    }
}

#[test]
fn the_native_pass_counts_every_segment_of_every_thread_under_the_simulations_keys() {
    let word = AtomicU64::new(0);
    let data = [0u64; 8];
    let mut phase = || {
        rounds(100, &word, &data);
        let hs: Vec<_> = (0..2)
            .map(|_| {
                sync::thread::spawn(|| {
                    let (w, d) = (AtomicU64::new(0), [0u64; 8]);
                    rounds(50, &w, &d);
                })
            })
            .collect();
        for h in hs {
            h.join().expect("worker");
        }
    };
    let native = timer::time_phase(&mut phase);
    // The same phase under the simulator, measured: the keys must be the same strings.
    let sim = Simulation::new(MachineProfile::builtin("xeon-12").expect("profile"))
        .with_config(SimConfig { clock: ClockMode::Measured, ..SimConfig::default() });
    let simulated = facade::calibrate_phase(&sim, &mut phase).expect("simulation");
    // Keys without the column (a closure's inlined copy may differ by column), and without a
    // task's exit, which only the simulation sees.
    let keys = |t: &SegmentTable| {
        let mut v: Vec<String> = t
            .segments
            .keys()
            .filter(|k| !k.contains("<exit>"))
            .map(|k| {
                k.split(" -> ")
                    .map(|s| s.rsplit_once(':').map_or(s, |x| x.0))
                    .collect::<Vec<_>>()
                    .join(" -> ")
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    assert_eq!(keys(&native), keys(&simulated), "the two passes name segments alike");
    // Inside the loops: 100 + 50 + 50 load -> touch and 99 + 49 + 49 touch -> load segments.
    let in_loops: u64 = native
        .segments
        .iter()
        .filter(|(k, _)| k.matches("segments.rs").count() == 2)
        .map(|(_, c)| c.samples)
        .sum();
    assert_eq!(in_loops, 200 + 197, "{native:?}");
    assert!(native.segments.values().all(|c| c.ns.is_finite() && c.ns >= 0.0));
}

#[test]
fn a_deterministic_run_charges_the_table_and_counts_what_it_lacks() {
    let word = AtomicU64::new(0);
    let data = [0u64; 8];
    let mut phase = || rounds(10, &word, &data);
    let measured = timer::time_phase(&mut phase);
    // Keep only the touch -> load segment, at 1000 ns.
    let mut table = SegmentTable::default();
    let key = measured
        .segments
        .keys()
        .find(|k| {
            k.matches("segments.rs").count() == 2 && {
                let (a, b) = k.split_once(" -> ").expect("key");
                a.rsplit(':').nth(1) > b.rsplit(':').nth(1)
            }
        })
        .expect("a touch -> load key")
        .clone();
    table.segments.insert(key, SegmentCost { ns: 1000.0, samples: 9 });
    let sim = Simulation::new(MachineProfile::builtin("host").expect("profile")).with_config(SimConfig {
        clock: ClockMode::Deterministic(table),
        default_segment_ns: 0.0,
        ..SimConfig::default()
    });
    let r = facade::run_phase(&sim, &mut phase).expect("simulation");
    assert_eq!(r.stats.segments_from_table, 9, "the 9 touch -> load segments");
    // The 10 load -> touch segments are between the same two files (this one): the table's
    // mean for that file pair stands in for their own key.
    assert_eq!(r.stats.segments_by_file_pair, 10, "the 10 load -> touch segments");
    assert!(r.stats.segments_at_default >= 2, "the first and the exit");
    // 19 segments of 1000 ns each (speed factor 1 on `host`), plus operations of a few ns.
    assert!(r.stats.virtual_ns >= 19000 && r.stats.virtual_ns < 19000 + 2000, "{}", r.stats.virtual_ns);
}

#[test]
fn a_segment_the_host_interrupted_is_charged_its_keys_mean() {
    let sim = Simulation::new(MachineProfile::builtin("host").expect("profile"))
        .with_config(SimConfig { clock: ClockMode::Measured, ..SimConfig::default() });
    let r = facade::run(&sim, || {
        let word = AtomicU64::new(0);
        for i in 0..64 {
            if i == 40 {
                // 2 ms of host time in one segment: far above 50 us and 50 times the mean.
                let t = std::time::Instant::now();
                while t.elapsed() < std::time::Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
            }
            std::hint::black_box(word.load(Ordering::Relaxed));
        }
    })
    .expect("simulation");
    assert!(r.host.clipped_segments >= 1);
    assert!(r.stats.virtual_ns < 1_000_000, "the 2 ms stall was not charged: {} ns", r.stats.virtual_ns);
}

#[test]
fn cold_misses_cost_memory_only_when_asked() {
    let run = |cold: bool| {
        let sim = Simulation::new(MachineProfile::builtin("xeon-32").expect("profile"))
            .with_config(SimConfig { cold_misses: cold, default_segment_ns: 0.0, ..SimConfig::default() });
        facade::run(&sim, || {
            let words: Vec<AtomicU64> = (0..64).map(|_| AtomicU64::new(0)).collect();
            for w in words.iter().step_by(8) {
                std::hint::black_box(w.load(Ordering::Relaxed));
            }
        })
        .expect("simulation")
        .stats
        .virtual_ns
    };
    let (with, without) = (run(true), run(false));
    // 8 lines from memory at xeon-32's memory latency (over 100 ns each) against 8 L1 hits.
    assert!(with > without + 800, "{with} vs {without}");
}
