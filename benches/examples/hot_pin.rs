//! Threads pinning and unpinning one hot buffer, per header design: the development probe for
//! the `bufmgr/hot_pin_2t` benchmark (run it under `valgrind --tool=callgrind` with one thread
//! to count instructions per pin+unpin pair, or with two threads for a rough timing).
//!
//! `cargo run --release -p lockstack-benches --example hot_pin -- HEADER MODE THREADS PAIRS [ROUNDS]`
//!
//! * HEADER: `spinlock`, `atomic` (or any name `HeaderKind` parses);
//! * MODE: `pin` (`read_recent`: the header only) or `read` (`read_block`: mapping look-up too);
//! * THREADS: worker threads, each with its own backend; PAIRS: pin+unpin pairs per thread;
//! * ROUNDS: repetitions (default 1); each prints one line, the best is printed last.

use lockstack_bufmgr::{
    BufferPool, BufferPoolConfig, ForkNumber, HeaderKind, LwLockKind, MappingKind, VictimKind,
};
use lockstack_common::Oid;

const REL: Oid = Oid(16384);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: hot_pin HEADER pin|read THREADS PAIRS [ROUNDS]";
    let header: HeaderKind = args.first().expect(usage).parse().expect("header");
    let lookup = match args.get(1).map(String::as_str) {
        Some("pin") => false,
        Some("read") => true,
        _ => panic!("{usage}"),
    };
    let threads: usize = args.get(2).expect(usage).parse().expect("threads");
    let pairs: u64 = args.get(3).expect(usage).parse().expect("pairs");
    let rounds: usize = args.get(4).map_or(1, |s| s.parse().expect("rounds"));
    let lwlock = if header == HeaderKind::Spinlock { LwLockKind::Pg92 } else { LwLockKind::Atomic };
    let cfg = BufferPoolConfig {
        nbuffers: 64,
        header,
        mapping: MappingKind::PARTITIONS_128,
        victim: VictimKind::AtomicClock,
        lwlock_kind: lwlock,
        ..BufferPoolConfig::default()
    };
    let pool = BufferPool::in_memory(cfg).expect("pool");
    {
        let bb = pool.attach_auxiliary();
        let (b, _) = bb.extend(REL, ForkNumber::Main).expect("extend");
        bb.release(b);
    }
    let mut best = 0.0f64;
    for _ in 0..rounds {
        pool.reset_stats();
        let elapsed = lockstack_benches::hot_pin(&pool, REL, threads, pairs, lookup);
        let rate = (threads as u64 * pairs) as f64 / elapsed.as_secs_f64();
        best = best.max(rate);
        let st = pool.stats();
        println!(
            "{header} {} {threads}t: {:.2} M pairs/s ({:.1} ns/pair/thread), pin waits {}, spin delays {}",
            if lookup { "read" } else { "pin" },
            rate / 1e6,
            elapsed.as_nanos() as f64 / pairs as f64,
            st.pin_waits,
            st.pin_spin_delays
        );
    }
    println!("best {header}: {:.2} M pairs/s", best / 1e6);
    pool.check_invariants().expect("invariants");
}
