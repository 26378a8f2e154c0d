//! One backend taking and releasing AccessShareLock on one relation in a loop, through the
//! fast path or the main lock table, for instruction counting under
//! `valgrind --tool=callgrind` (deterministic, unlike wall-clock time on a busy machine).
//!
//! Usage: `lmgr_roundtrip fast-path|main-table N`. Run it for two values of N and divide the
//! difference in instructions by the difference in N to get instructions per lock+unlock
//! without start-up costs (docs/lmgr.md has the script).

use std::hint::black_box;
use std::process::ExitCode;

use lockstack_common::{BackendId, Oid};
use lockstack_lmgr::{FastPath, Lmgr, LmgrConfig, LockMode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: lmgr_roundtrip fast-path|main-table N");
        return ExitCode::from(1);
    }
    let fast_path = match args[1].as_str() {
        "fast-path" => FastPath::PG92,
        "main-table" => FastPath::Off,
        other => {
            eprintln!("lmgr_roundtrip: unknown path '{other}' (fast-path, main-table)");
            return ExitCode::from(1);
        }
    };
    let Ok(n) = args[2].parse::<u64>() else {
        eprintln!("lmgr_roundtrip: N must be a whole number, got '{}'", args[2]);
        return ExitCode::from(1);
    };
    let cfg = LmgrConfig { max_backends: 1, partitions: 16, fast_path, ..LmgrConfig::default() };
    let lmgr = match Lmgr::new(cfg) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lmgr_roundtrip: {e}");
            return ExitCode::from(1);
        }
    };
    let mut b = match lmgr.attach(BackendId(0)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("lmgr_roundtrip: {e}");
            return ExitCode::from(1);
        }
    };
    b.start_transaction();
    let rel = Oid(16384);
    for _ in 0..n {
        if let Err(e) = black_box(b.lock_relation(rel, LockMode::AccessShare)) {
            eprintln!("lmgr_roundtrip: {e}");
            return ExitCode::from(1);
        }
        b.unlock_relation(rel, LockMode::AccessShare);
    }
    b.end_transaction();
    ExitCode::SUCCESS
}
