//! `lockstack machine list|show`: the built-in profiles are listed and shown, and a bad name
//! is one line on stderr with exit code 1. (`calibrate` runs real threads for seconds and is
//! exercised by hand; its output format is checked by `lockstack-sim`'s profile parser.)

use std::process::{Command, Output};

fn lockstack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstack")).args(args).output().expect("run lockstack")
}

#[test]
fn list_names_every_builtin_profile() {
    let o = lockstack(&["machine", "list"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    for name in ["host", "opteron-24", "xeon-32", "itanium-32", "power8-192", "xeon-12", "epyc-2s"] {
        assert!(out.lines().any(|l| l.starts_with(name)), "{name} missing from:\n{out}");
    }
    assert!(out.contains("192 hw threads (24 x 1 cores x 8 SMT, 4 NUMA nodes)"), "{out}");
}

#[test]
fn show_prints_a_builtin_with_its_citations_and_a_file_as_is() {
    let o = lockstack(&["machine", "show", "opteron-24"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("SOSP 2013") && out.contains("same_llc_ns = 38.6"), "{out}");
    let path = std::env::temp_dir().join(format!("lockstack-machine-{}.toml", std::process::id()));
    std::fs::write(&path, out.replace("name = \"opteron-24\"", "name = \"mine\"")).unwrap();
    let o = lockstack(&["machine", "show", path.to_str().unwrap()]);
    assert!(o.status.success());
    assert!(String::from_utf8(o.stdout).unwrap().contains("name = \"mine\""));
    std::fs::write(&path, "name = \"broken\"\n").unwrap();
    let o = lockstack(&["machine", "show", path.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    std::fs::remove_file(&path).unwrap();
}

#[test]
fn an_unknown_profile_is_one_line_and_exit_code_1() {
    let o = lockstack(&["machine", "show", "cray-1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cray-1") && err.contains("xeon-32"), "{err}");
}
