//! Builds the simulating `lockstack` next to the ordinary one (for `--machine`).
//!
//! The simulated machine needs the sync facade's hook compiled in (`lockstack-common/sim`),
//! which costs the production build a quarter of an uncontended LWLock acquisition, so the
//! ordinary binary is built without it and this script builds a second one with it: a nested
//! `cargo build -p lockstack-cli --features sim --bin lockstack` (the outer build's profile)
//! into `<outer target dir>/sim`, its own target dir, so it never waits on the outer build's
//! lock. The ordinary binary re-runs that one (`LOCKSTACK_SIM_BIN`, set here) when given
//! `--machine`; the user never rebuilds with a flag. A second binary target or package with
//! the `sim` feature would not do: Cargo unifies a package's features over everything one
//! invocation builds, so it would compile the hook into the ordinary binary too (see
//! docs/ARCHITECTURE.md, "Where the std, loom and simulation backends are chosen").
//!
//! Skipped (no simulating binary; `--machine` then says how to build one): inside the nested
//! build itself (`LOCKSTACK_SIM_NESTED`), under clippy (`RUSTC_WORKSPACE_WRAPPER`), under
//! `--cfg loom`, and when `LOCKSTACK_NO_SIM_BUILD=1`.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn main() {
    for var in ["LOCKSTACK_SIM_NESTED", "LOCKSTACK_NO_SIM_BUILD", "RUSTC_WORKSPACE_WRAPPER"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest.ancestors().nth(2).expect("crates/cli sits two levels below the workspace");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // OUT_DIR is <target>[/<triple>]/<profile>/build/<pkg>-<hash>/out.
    let Some(target) = out_dir.ancestors().nth(4) else {
        println!("cargo:warning=lockstack: unexpected OUT_DIR {}; no simulating binary", out_dir.display());
        return;
    };
    let sim_target = target.join("sim");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let bin = sim_target.join(if release { "release" } else { "debug" }).join("lockstack");
    println!("cargo:rustc-env=LOCKSTACK_SIM_BIN={}", bin.display());

    if env::var_os("LOCKSTACK_SIM_NESTED").is_some()
        || env::var_os("RUSTC_WORKSPACE_WRAPPER").is_some()
        || env::var_os("CARGO_CFG_LOOM").is_some()
        || env::var("LOCKSTACK_NO_SIM_BUILD").is_ok_and(|v| v == "1")
    {
        return;
    }
    // Any source of the workspace's crates, or its manifest and lock file, rebuilds it.
    for p in [workspace.join("crates"), workspace.join("Cargo.toml"), workspace.join("Cargo.lock")] {
        println!("cargo:rerun-if-changed={}", p.display());
    }
    build_nested(workspace, &sim_target, release);
}

fn build_nested(workspace: &Path, sim_target: &Path, release: bool) {
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace)
        .args(["build", "--locked", "-p", "lockstack-cli", "--features", "sim", "--bin", "lockstack"])
        .env("CARGO_TARGET_DIR", sim_target)
        .env("LOCKSTACK_SIM_NESTED", "1")
        // The outer build's stdout is its protocol with cargo: the nested one's goes to stderr.
        .stdout(Stdio::from(std::io::stderr()))
        .stderr(Stdio::inherit());
    if release {
        cmd.arg("--release");
    }
    match cmd.status() {
        Ok(s) if s.success() => {}
        Ok(s) => println!(
            "cargo:warning=lockstack: building the simulating binary failed ({s}); --machine will not work until it builds"
        ),
        Err(e) => println!("cargo:warning=lockstack: could not run cargo for the simulating binary: {e}"),
    }
}
