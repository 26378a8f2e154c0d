//! Uncontended lock+unlock in a loop, for instruction counting under
//! `valgrind --tool=callgrind` (deterministic, unlike wall-clock time on a busy machine).
//!
//! Usage: `uncontended LOCK MODE N` with LOCK one of pg92, atomic, read-biased, parking_lot,
//! std, atomic-token and MODE shared or exclusive. Run it for two values of N and divide the
//! difference in instructions by the difference in N to get instructions per lock+unlock without
//! start-up costs (docs/lwlock.md has the script).
//!
//! Every lock except `atomic-token` runs the body of the criterion bench (`benches/lwlock.rs`):
//! a typed `RwLock<u64>` whose shared hold reads the value and whose exclusive hold increments
//! it (the LWLocks through `lock_api`). `atomic-token` calls `LwLockImpl::acquire`/`release` on
//! an `AtomicLwLock` directly, the way the other lockstack crates do.

use std::hint::black_box;
use std::process::ExitCode;

use lockstack_lwlock::{
    AtomicLwLock, LwLockImpl, LwLockMode, Pg92LwLock, Pg92RwLock, RawLwLock, ReadBiasedLwLock,
    ReadBiasedRwLock, RwLock, TrancheId,
};

/// The loop of one typed lock (the macro keeps the body identical for every lock type). The
/// mode test sits outside the loops, so each loop is one mode's code only.
macro_rules! typed_loop {
    ($l:expr, $mode:expr, $n:expr) => {{
        let l = $l;
        if $mode == LwLockMode::Shared {
            for _ in 0..$n {
                black_box(*l.read());
            }
        } else {
            for _ in 0..$n {
                *l.write() += 1;
            }
        }
    }};
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!(
            "usage: uncontended pg92|atomic|read-biased|parking_lot|std|atomic-token shared|exclusive N"
        );
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
        "pg92" => typed_loop!(Pg92RwLock::from_raw(RawLwLock(Pg92LwLock::with_id(t, 0)), 0u64), mode, n),
        "atomic" => typed_loop!(RwLock::from_raw(RawLwLock(AtomicLwLock::with_id(t, 0)), 0u64), mode, n),
        "read-biased" => {
            typed_loop!(ReadBiasedRwLock::from_raw(RawLwLock(ReadBiasedLwLock::with_id(t, 0)), 0u64), mode, n)
        }
        "parking_lot" => typed_loop!(parking_lot::RwLock::new(0u64), mode, n),
        "std" => {
            let l = std::sync::RwLock::new(0u64);
            if mode == LwLockMode::Shared {
                for _ in 0..n {
                    black_box(*l.read().unwrap());
                }
            } else {
                for _ in 0..n {
                    *l.write().unwrap() += 1;
                }
            }
        }
        "atomic-token" => {
            let l = AtomicLwLock::with_id(t, 0);
            if mode == LwLockMode::Shared {
                for _ in 0..n {
                    let h = l.acquire(LwLockMode::Shared);
                    l.release(h);
                }
            } else {
                for _ in 0..n {
                    let h = l.acquire(LwLockMode::Exclusive);
                    l.release(h);
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
