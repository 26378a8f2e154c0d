//! Every crate's `src/` reaches atomics, threads, thread-locals, parking, locks and the clock
//! only through `lockstack_common::sync` (the door a simulated machine swaps them through).
//! A direct use outside `crates/common/src/sync/` fails this test unless the allow-list below
//! names the file, the use and the reason. Test modules (`#[cfg(test)] mod tests`, inline or in
//! a `tests.rs` of their own that the parent declares `#[cfg(test)] mod tests;`) and comments
//! are not checked.

use std::path::{Path, PathBuf};

/// What may not appear, and what to use instead.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::sync::atomic", "lockstack_common::sync::{AtomicU32, ...} (or sync::atomic::plain, with a reason)"),
    ("parking_lot::", "lockstack_common::sync::{Mutex, RwLock, Condvar, park_while}"),
    ("parking_lot_core::", "lockstack_common::sync::park"),
    ("use parking_lot", "lockstack_common::sync::{Mutex, RwLock, Condvar}"),
    ("std::thread::", "lockstack_common::sync::thread"),
    ("use std::thread", "lockstack_common::sync::thread"),
    ("std::time::Instant", "lockstack_common::sync::Instant"),
    ("SystemTime::now", "lockstack_common::sync::time::system_now (virtual under a simulation)"),
    ("std::thread_local!", "lockstack_common::thread_local!"),
    ("std::hint::spin_loop", "lockstack_common::sync::spin_hint"),
    ("std::sync::Mutex", "lockstack_common::sync::Mutex"),
    ("std::sync::RwLock", "lockstack_common::sync::RwLock"),
    ("std::sync::Condvar", "lockstack_common::sync::Condvar"),
    ("std::sync::Barrier", "lockstack_common::StartGate"),
    ("loom::", "lockstack_common::sync (it maps to loom under --cfg loom)"),
];

/// (file suffix, forbidden pattern, reason).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "cli/src/machine_validate.rs",
        "std::sync::atomic",
        "the hardware microbenchmarks drive the simulator's task operations by hand (each `task::atomic` reports the access, then the real atomic runs); the facade would report every access a second time",
    ),
    (
        "cli/src/main.rs",
        "std::thread::",
        "a simulated command's host thread, spawned before any simulation is installed: a real OS thread, whose fresh page-aligned stack keeps which variables share a cache line the same from run to run",
    ),
    (
        "workloads/src/micro/lwlock.rs",
        "parking_lot::",
        "the parking_lot RwLock baseline is the thing measured against, so it must be the real one",
    ),
    (
        "workloads/src/micro/lwlock.rs",
        "std::sync::RwLock",
        "the std RwLock baseline is the thing measured against, so it must be the real one",
    ),
    (
        "workloads/src/pgbench/runner/program.rs",
        "SystemTime::now",
        "pgbench's now() value stored in history rows is calendar data, not a clock the locks use",
    ),
    (
        "cli/src/pgbench_cmd/args.rs",
        "SystemTime::now",
        "--random-seed time seeds from the calendar, as pgbench does",
    ),
];

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display())) {
        let p = e.expect("directory entry").path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The file's code without test modules and comments.
fn checked_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate().peekable();
    // Brace depth inside a skipped test module (0: not in one).
    let mut skip_depth: i64 = 0;
    while let Some((i, line)) = lines.next() {
        let t = line.trim_start();
        if skip_depth > 0 {
            skip_depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
            continue;
        }
        if (t.starts_with("#[cfg(test)]") || t.starts_with("#[cfg(all(test"))
            && let Some((_, next)) = lines.peek()
            && next.trim_start().starts_with("mod ")
            && next.contains('{')
        {
            let (_, next) = lines.next().expect("peeked");
            skip_depth = next.matches('{').count() as i64 - next.matches('}').count() as i64;
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        let code = match line.find("//") {
            Some(k) if !line[..k].contains('"') => &line[..k],
            _ => line,
        };
        out.push((i + 1, code.to_string()));
    }
    out
}

#[test]
fn crates_use_only_the_sync_facade() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for c in std::fs::read_dir(&crates).expect("crates/") {
        let src = c.expect("crate dir").path().join("src");
        if src.is_dir() {
            rs_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "found only {} source files under {}", files.len(), crates.display());
    let mut bad = Vec::new();
    for f in &files {
        let shown = f.strip_prefix(&crates).unwrap_or(f).to_string_lossy().replace('\\', "/");
        // The facade itself, and the simulator behind it: the simulator runs on the host thread
        // and measures the host (`lockstack machine calibrate`), so it must use the real std.
        if shown.starts_with("common/src/sync/") || shown.starts_with("sim/src/") {
            continue;
        }
        // A test module in a file of its own, declared `#[cfg(test)] mod tests;` (or a `cfg` naming
        // `test` with more) by its parent
        // (`dir/mod.rs`, or `dir.rs` beside the directory).
        let declared_by = |parent: std::path::PathBuf| {
            std::fs::read_to_string(parent).is_ok_and(|m| {
                let lines: Vec<&str> = m.lines().map(str::trim).collect();
                lines
                    .windows(2)
                    .any(|w| w[0].starts_with("#[cfg(") && w[0].contains("test") && w[1] == "mod tests;")
            })
        };
        if f.file_name().is_some_and(|n| n == "tests.rs")
            && (declared_by(f.with_file_name("mod.rs"))
                || f.parent().is_some_and(|d| declared_by(d.with_extension("rs"))))
        {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("source file");
        for (n, code) in checked_lines(&text) {
            for (pat, instead) in FORBIDDEN {
                if code.contains(pat) && !ALLOWED.iter().any(|(file, p, _)| shown.ends_with(file) && p == pat)
                {
                    bad.push(format!("{shown}:{n}: `{pat}` (use {instead}): {}", code.trim()));
                }
            }
            // A bare `thread_local!` is std's unless the file imports the facade's.
            if code.contains("thread_local!")
                && !code.contains("sync::thread_local!")
                && !code.contains("lockstack_common::thread_local!")
                && !code.contains("crate::thread_local!")
                && !text.contains("use lockstack_common::thread_local;")
                && !text.contains("thread_local};")
                && !text.contains(", thread_local,")
            {
                bad.push(format!(
                    "{shown}:{n}: a bare `thread_local!` is std's (use lockstack_common::thread_local!)"
                ));
            }
        }
    }
    assert!(bad.is_empty(), "direct uses outside the sync facade:\n{}", bad.join("\n"));
}

#[test]
fn the_check_catches_a_direct_use() {
    let src = "use std::sync::atomic::AtomicU32;\n// std::thread::spawn in a comment\nfn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() {\n        std::thread::yield_now();\n    }\n}\nfn h() { std::time::Instant::now(); }\n";
    let lines = checked_lines(src);
    assert!(lines.iter().any(|(_, l)| l.contains("std::sync::atomic")));
    assert!(!lines.iter().any(|(_, l)| l.contains("std::thread")), "comments and test modules are skipped");
    assert!(
        lines.iter().any(|(_, l)| l.contains("std::time::Instant")),
        "code after a test module is checked"
    );
}
