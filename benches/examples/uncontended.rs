//! Uncontended lock+unlock in a loop, for instruction counting under
//! `valgrind --tool=callgrind` (deterministic, unlike wall-clock time on a busy machine).
//!
//! Usage: `uncontended LOCK MODE N` with LOCK one of pg92, atomic, read-biased, parking_lot,
//! std and MODE shared or exclusive. Run it for two values of N and divide the difference in
//! instructions by the difference in N to get instructions per lock+unlock without start-up
//! costs (docs/lwlock.md has the script).

use std::hint::black_box;
use std::process::ExitCode;

use lockstack_lwlock::{AtomicLwLock, LwLockImpl, LwLockMode, Pg92LwLock, ReadBiasedLwLock, TrancheId};

fn lw<L: LwLockImpl>(l: L, mode: LwLockMode, n: u64) {
    for _ in 0..n {
        let h = l.acquire(mode);
        black_box(&h);
        l.release(h);
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: uncontended pg92|atomic|read-biased|parking_lot|std shared|exclusive N");
        return ExitCode::from(1);
    }
    let Ok(n) = args[3].parse::<u64>() else {
        eprintln!("uncontended: N must be a whole number, got '{}'", args[3]);
        return ExitCode::from(1);
    };
    let mode = match args[2].as_str() {
        "shared" => LwLockMode::Shared,
        "exclusive" => LwLockMode::Exclusive,
        m => {
            eprintln!("uncontended: unknown mode '{m}' (shared, exclusive)");
            return ExitCode::from(1);
        }
    };
    let t = TrancheId::register("uncontended");
    match args[1].as_str() {
        "pg92" => lw(Pg92LwLock::with_id(t, 0), mode, n),
        "atomic" => lw(AtomicLwLock::with_id(t, 0), mode, n),
        "read-biased" => lw(ReadBiasedLwLock::with_id(t, 0), mode, n),
        "parking_lot" => {
            let l = parking_lot::RwLock::new(0u64);
            for _ in 0..n {
                if mode == LwLockMode::Shared {
                    black_box(*l.read());
                } else {
                    *l.write() += 1;
                }
            }
        }
        "std" => {
            let l = std::sync::RwLock::new(0u64);
            for _ in 0..n {
                if mode == LwLockMode::Shared {
                    black_box(*l.read().unwrap());
                } else {
                    *l.write().unwrap() += 1;
                }
            }
        }
        other => {
            eprintln!("uncontended: unknown lock '{other}'");
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
