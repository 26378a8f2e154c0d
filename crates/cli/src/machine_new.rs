//! `lockstack machine new NAME [--from PROFILE] [--from-host] [--out FILE]`: writes a
//! commented template profile, every constant with a comment saying what it is and whether to
//! measure or cite it, into the user directory (`machines/NAME.toml`, found by `--machine
//! NAME`) or FILE. Locks: none.
//!
//! The values start as PROFILE's (default `host`), each marked "assumed" and listed in
//! `assumed` until measured or cited; `--from-host` reads the topology and cache sizes of the
//! running machine from /sys/devices/system/cpu and /sys/devices/system/node.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use lockstack_sim::MachineProfile;
use lockstack_workloads::experiments::user_dir;

use crate::Failure;

/// Arguments of `lockstack machine new`.
#[derive(Args, Debug)]
pub(crate) struct NewArgs {
    /// The new profile's name (letters, digits, `-`, `_`): `--machine NAME` finds it.
    name: String,
    /// The profile whose values the template starts from (a built-in, a user profile or a
    /// file); default: host.
    #[arg(long, value_name = "PROFILE")]
    from: Option<String>,
    /// Fill the topology (sockets, cores, SMT, NUMA nodes and distances) and the cache sizes
    /// from this machine (/sys/devices/system/cpu, /sys/devices/system/node).
    #[arg(long)]
    from_host: bool,
    /// Write here instead of the user directory's machines/NAME.toml.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// How most of `[costs]` is measured.
const CALIBRATE: &str = "measure: lockstack machine calibrate";

/// `(key, what, how)` rows of [`ABOUT`], one line each: `key: what, how;`.
macro_rules! about {
    ($($key:literal: $what:literal, $how:expr;)*) => {
        &[$(($key, $what, $how)),*]
    };
}

/// What each constant is, and how to get it: (key, what, how).
const ABOUT: &[(&str, &str, &str)] = about! {
    "topology.sockets": "sockets (packages)", "cite: lscpu or the vendor's sheet";
    "topology.cores_per_socket": "physical cores per socket", "cite: lscpu";
    "topology.threads_per_core": "hardware threads per core (SMT)", "cite: lscpu";
    "topology.cores_per_llc": "cores sharing one last-level cache", "cite: /sys/.../cache/index3/shared_cpu_list";
    "topology.numa_nodes": "NUMA nodes", "cite: numactl --hardware";
    "topology.numa_distances": "the SLIT distance matrix, one row per node", "cite: numactl --hardware";
    "costs.l1_hit_ns": "a load of a line this core holds, ns", CALIBRATE;
    "costs.smt_sibling_ns": "a line handed to the SMT sibling, ns", "measure or cite (a paper's figure)";
    "costs.same_llc_ns": "a line handed over within one last-level cache, ns", CALIBRATE;
    "costs.same_node_ns": "a line handed over within one NUMA node, ns", "measure or cite";
    "costs.remote": "line transfer and memory per NUMA distance, ns", "cite: a paper's or vendor's figures";
    "costs.memory_ns": "a load from local memory, ns", CALIBRATE;
    "costs.atomic_rmw_ns": "an uncontended atomic read-modify-write, ns", CALIBRATE;
    "costs.owner_grace_ns": "how long a fetched line stays before another core may take it, ns",
        "assume (no direct measurement)";
    "costs.fence_ns": "a full fence, ns", CALIBRATE;
    "costs.pause_ns": "one spin-loop pause, ns", CALIBRATE;
    "costs.clock_read_ns": "reading the clock, ns", CALIBRATE;
    "costs.syscall_ns": "a system call, ns", CALIBRATE;
    "costs.futex_wait_ns": "the sleeper's cost of a futex wait, ns", "measure or assume";
    "costs.futex_wake_ns": "the waker's cost of a futex wake, ns", CALIBRATE;
    "costs.futex_wake_latency_ns": "from a wake to the sleeper running, ns", CALIBRATE;
    "costs.context_switch_ns": "a context switch, ns", "cite or assume";
    "costs.time_slice_ns": "the scheduler's time slice, ns", "cite: the kernel's setting";
    "costs.speed_factor": "this code's local work on that core against this host's", "measure: the same run on both";
    "costs.clock_ghz": "the core clock, GHz", "cite: /proc/cpuinfo or the vendor's sheet";
    "costs.postgres_ipc": "instructions per cycle PostgreSQL's code retires",
        "fit: lockstack experiment NAME --machine THIS --calibrate --measured FILE.csv";
    "caches.private_kib": "one core's private cache (L2), KiB", "cite: lscpu";
    "caches.private_ways": "its ways", "cite: /sys/.../cache/index2/ways_of_associativity";
    "caches.llc_kib": "one last-level cache, KiB", "cite: lscpu";
    "caches.llc_ways": "its ways", "cite: /sys/.../cache/index3/ways_of_associativity";
    "caches.llc_hit_ns": "a hit in the last-level cache, ns", "measure or cite";
    "pgbench.client_cpu_us": "pgbench's own CPU per statement, us", "measure: pgbench's client time on the machine";
    "pgbench.client_rtt_us": "a client-server round trip per statement, us", "measure: ping-pong over the socket";
    "pgbench.wal_flush_us": "one WAL flush (fsync), us", "measure: pg_test_fsync";
};

/// Why `machine new` could not read the host or its base profile; each message is one line
/// naming the file or the `--from` profile.
#[derive(Debug, thiserror::Error)]
enum NewError {
    /// A /sys file of the host's topology could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The `--from` profile's text is not TOML.
    #[error("--from {from}: {source}")]
    BaseProfile {
        /// The `--from` argument.
        from: String,
        /// The parser's error.
        source: Box<toml::de::Error>,
    },
}

/// The topology and caches of this machine, as TOML values by key, each with where it was
/// read.
fn host_topology() -> Result<Vec<(String, toml::Value, String)>, NewError> {
    let cpu = Path::new("/sys/devices/system/cpu");
    let read = |p: &Path| -> Result<String, NewError> {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .map_err(|source| NewError::Read { path: p.to_path_buf(), source })
    };
    let list_len = |s: &str| -> usize {
        s.split(',')
            .filter(|r| !r.is_empty())
            .map(|r| match r.split_once('-') {
                Some((a, b)) => b.parse::<usize>().unwrap_or(0).saturating_sub(a.parse().unwrap_or(0)) + 1,
                None => 1,
            })
            .sum()
    };
    let online = list_len(&read(&cpu.join("online"))?);
    let mut packages = BTreeSet::new();
    for i in 0..online {
        let p = cpu.join(format!("cpu{i}/topology/physical_package_id"));
        if let Ok(id) = read(&p) {
            packages.insert(id);
        }
    }
    let sockets = packages.len().max(1);
    let smt = list_len(&read(&cpu.join("cpu0/topology/thread_siblings_list"))?).max(1);
    let cores_per_socket = (online / sockets / smt).max(1);
    let mut out: Vec<(String, toml::Value, String)> = Vec::new();
    let int = |v: usize| toml::Value::Integer(v as i64);
    let src = "read from /sys/devices/system/cpu".to_string();
    out.push(("topology.sockets".into(), int(sockets), format!("{src} (physical_package_id)")));
    out.push((
        "topology.cores_per_socket".into(),
        int(cores_per_socket),
        format!("{src} (online / sockets / SMT)"),
    ));
    out.push(("topology.threads_per_core".into(), int(smt), format!("{src} (thread_siblings_list)")));
    let llc = cpu.join("cpu0/cache/index3");
    let cores_per_llc = match read(&llc.join("shared_cpu_list")) {
        Ok(l) => (list_len(&l) / smt).clamp(1, cores_per_socket),
        Err(_) => cores_per_socket,
    };
    out.push((
        "topology.cores_per_llc".into(),
        int(cores_per_llc),
        format!("{src} (index3/shared_cpu_list)"),
    ));
    let node = Path::new("/sys/devices/system/node");
    let mut nodes: Vec<usize> = std::fs::read_dir(node)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("node")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    nodes.sort_unstable();
    let mut distances = Vec::new();
    for n in &nodes {
        let row = read(&node.join(format!("node{n}/distance")))?;
        let row: Vec<toml::Value> =
            row.split_whitespace().filter_map(|d| d.parse::<i64>().ok()).map(toml::Value::Integer).collect();
        distances.push(toml::Value::Array(row));
    }
    if nodes.is_empty() {
        distances.push(toml::Value::Array(vec![toml::Value::Integer(10)]));
    }
    let nsrc = "read from /sys/devices/system/node".to_string();
    out.push(("topology.numa_nodes".into(), int(nodes.len().max(1)), nsrc.clone()));
    out.push((
        "topology.numa_distances".into(),
        toml::Value::Array(distances),
        format!("{nsrc} (nodeN/distance)"),
    ));
    let kib = |s: &str| s.trim_end_matches('K').parse::<usize>().ok();
    for (index, size, ways) in [
        ("index2", "caches.private_kib", "caches.private_ways"),
        ("index3", "caches.llc_kib", "caches.llc_ways"),
    ] {
        let dir = cpu.join("cpu0/cache").join(index);
        if let (Some(k), Some(w)) = (
            read(&dir.join("size")).ok().as_deref().and_then(kib),
            read(&dir.join("ways_of_associativity")).ok().and_then(|w| w.parse::<usize>().ok()),
        ) {
            out.push((size.into(), int(k), format!("{src} ({index}/size)")));
            out.push((ways.into(), int(w), format!("{src} ({index}/ways_of_associativity)")));
        }
    }
    Ok(out)
}

/// The LLC hit time a template gets when the host gives cache sizes and the base profile has
/// none: about 40 cycles at the base's clock (a typical L3 hit), marked assumed.
fn assumed_llc_hit(base: &MachineProfile, base_text: &str) -> Option<(String, toml::Value, String)> {
    let doc: toml::Table = toml::from_str(base_text).ok()?;
    if doc.get("caches").is_some() {
        return None;
    }
    let ghz = base.constant("costs.clock_ghz").filter(|g| *g > 0.0).unwrap_or(2.0);
    let ns = (40.0 / ghz * 10.0).round() / 10.0;
    Some((
        "caches.llc_hit_ns".into(),
        toml::Value::Float(ns),
        "assumed: about 40 cycles at costs.clock_ghz, a typical last-level-cache hit".into(),
    ))
}

/// The base profile when `--from` is not given.
const DEFAULT_FROM: &str = "host";

/// The command line as the user typed it (the options given, none added): the template's
/// header echoes it.
fn typed_command(args: &NewArgs) -> String {
    let mut c = format!("lockstack machine new {}", args.name);
    if let Some(from) = &args.from {
        let _ = write!(c, " --from {from}");
    }
    if args.from_host {
        c.push_str(" --from-host");
    }
    if let Some(out) = &args.out {
        let _ = write!(c, " --out {}", out.display());
    }
    c
}

/// This machine's CPU model ("model name" of /proc/cpuinfo), if it can be read.
fn host_cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find_map(|l| {
            l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, m)| m.trim().to_string())
        })
        .filter(|m| !m.is_empty())
}

/// The template's text. `command` is the command line echoed in its header; `host_cpu` is
/// this machine's CPU model when `--from-host` read its topology (the header then says which
/// constants still describe the base profile's machine instead).
fn template(
    name: &str,
    base: &MachineProfile,
    base_text: &str,
    from: &str,
    command: &str,
    host: &[(String, toml::Value, String)],
    host_cpu: Option<&str>,
) -> Result<String, NewError> {
    let doc: toml::Table = toml::from_str(base_text)
        .map_err(|e| NewError::BaseProfile { from: from.to_string(), source: Box::new(e) })?;
    let mut assumed: Vec<String> = Vec::new();
    // A key of the base profile still holding an assumed value goes on the `assumed` list once.
    let mut assume = |full: &str| {
        if base.constant_key(full).is_ok() && !assumed.iter().any(|a| a == full) {
            assumed.push(full.to_string());
        }
    };
    let mut sections = String::new();
    for section in ["topology", "costs", "caches", "pgbench"] {
        let mut keys: Vec<(String, toml::Value)> = doc
            .get(section)
            .and_then(|v| v.as_table())
            .map(|t| t.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        // Keys the host gives that the base lacks (its caches) join the section.
        for (k, v, _) in host {
            if let Some(short) = k.strip_prefix(&format!("{section}."))
                && !keys.iter().any(|(kk, _)| kk == short)
            {
                keys.push((short.to_string(), v.clone()));
            }
        }
        if keys.is_empty() {
            continue;
        }
        let _ = writeln!(sections, "\n[{section}]");
        for (k, v) in keys {
            let full = format!("{section}.{k}");
            let (what, how) = ABOUT
                .iter()
                .find(|(key, _, _)| *key == full)
                .map_or(("see docs/sim.md", "measure or cite"), |(_, w, h)| (*w, *h));
            let (value, comment) = match host.iter().find(|(hk, _, _)| *hk == full) {
                Some((_, hv, src)) if src.starts_with("assumed") => {
                    assume(&full);
                    (hv.clone(), format!("{src}; {what}; {how}"))
                }
                Some((_, hv, src)) => (hv.clone(), format!("{src}: {what}")),
                None => {
                    assume(&full);
                    (v, format!("assumed: copied from profile {from} ({}); {what}; {how}", base.description))
                }
            };
            let _ = writeln!(sections, "{k} = {value}  # {comment}");
        }
    }
    let mut text = String::new();
    let _ = writeln!(text, "# Machine profile {name}, written by `{command}`.");
    if !host.is_empty() {
        let cpu = host_cpu.unwrap_or("CPU model not readable from /proc/cpuinfo");
        let _ = writeln!(text, "# --from-host read this machine's topology and caches from /sys ({cpu}).");
        let _ = writeln!(
            text,
            "# Every other constant is copied from profile {from}, which describes the machine it was made for:"
        );
        let _ = writeln!(text, "# {}.", base.description);
        let _ = writeln!(
            text,
            "# Each is marked assumed: run `lockstack machine calibrate --out FILE` on this machine"
        );
        let _ = writeln!(text, "# to measure most of [costs] here, and copy its figures in.");
    }
    let _ = writeln!(
        text,
        "# Every constant has a comment: what it is, and whether to measure it on the machine"
    );
    let _ = writeln!(
        text,
        "# (`lockstack machine calibrate` measures most of [costs]) or cite it (lscpu, a vendor's"
    );
    let _ = writeln!(
        text,
        "# sheet, a paper). A comment opening with \"assumed\" is still {from}'s value: replace it,"
    );
    let _ = writeln!(
        text,
        "# write the source in its comment and drop its key from `assumed` (`lockstack experiment"
    );
    let _ = writeln!(text, "# NAME --machine {name} --sensitivity` perturbs the keys left there).");
    let _ = writeln!(text, "name = {}", toml::Value::String(name.to_string()));
    let _ = writeln!(
        text,
        "description = {}",
        toml::Value::String(format!(
            "{name}: describe the machine (template from {from}: {})",
            base.description
        ))
    );
    let _ = writeln!(text, "assumed = [");
    for a in &assumed {
        let _ = writeln!(text, "    {},", toml::Value::String(a.clone()));
    }
    let _ = writeln!(text, "]");
    text.push_str(&sections);
    Ok(text)
}

/// `machine new`: writes the template, refusing to overwrite.
pub(crate) fn run(args: NewArgs) -> Result<(), Failure> {
    if args.name.is_empty() || !args.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(Failure::input(format!(
            "machine new {:?}: a name is letters, digits, '-' and '_'",
            args.name
        )));
    }
    if MachineProfile::builtin(&args.name).is_some() {
        return Err(Failure::input(format!(
            "machine new {}: a built-in profile has that name (`--machine {}` would find it first); choose another",
            args.name, args.name
        )));
    }
    let from = args.from.as_deref().unwrap_or(DEFAULT_FROM);
    let base = crate::sim_cmd::resolve_profile(from).map_err(|e| Failure::input(format!("--from: {e}")))?;
    let base_text = match MachineProfile::builtin_source(from) {
        Some(t) => t.to_string(),
        None => {
            let file = user_dir::profile_path(from).unwrap_or_else(|| PathBuf::from(from));
            MachineProfile::read_file(&file.to_string_lossy())
                .map_err(|e| Failure::input(format!("--from: {e}")))?
        }
    };
    let mut host = if args.from_host {
        host_topology().map_err(|e| Failure::input(format!("--from-host: {e}")))?
    } else {
        Vec::new()
    };
    if host.iter().any(|(k, _, _)| k == "caches.llc_kib") {
        host.extend(assumed_llc_hit(&base, &base_text));
    }
    let host_cpu = if args.from_host { host_cpu_model() } else { None };
    let text =
        template(&args.name, &base, &base_text, from, &typed_command(&args), &host, host_cpu.as_deref())
            .map_err(|e| Failure::input(e.to_string()))?;
    MachineProfile::from_toml(&text, &args.name).map_err(|e| {
        Failure::run(format!(
            "machine new {}: the template is not a valid profile ({e}); give --from another profile",
            args.name
        ))
    })?;
    let path = match args.out {
        Some(p) => p,
        None => user_dir::dir()
            .map_err(Failure::input)?
            .join(user_dir::MACHINES)
            .join(format!("{}.toml", args.name)),
    };
    if path.exists() {
        return Err(Failure::input(format!(
            "{}: exists; machine new does not overwrite (delete it or give --out)",
            path.display()
        )));
    }
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(d).map_err(|e| Failure::output(format!("{}: {e}", d.display())))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| Failure::output(format!("{}: {e}", path.display())))?;
    std::io::Write::write_all(&mut f, text.as_bytes())
        .map_err(|e| Failure::output(format!("{}: {e}", path.display())))?;
    outln!(
        "wrote {} (from {}{}); edit its assumed values, then run with --machine {}",
        path.display(),
        from,
        if args.from_host {
            "; topology and caches from this host, costs assumed until `lockstack machine calibrate` measures them here"
        } else {
            ""
        },
        args.name
    );
    Ok(())
}
