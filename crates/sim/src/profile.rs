//! Machine profiles: the topology and the costs of one simulated machine, read from TOML.
//!
//! A profile is a TOML document (see `crates/sim/profiles/*.toml` for the built-in ones, each
//! number with its citation or the word "assumed" in a comment beside it). Built-in profiles are
//! embedded in the binary with `include_str!`; [`MachineProfile::resolve`] takes a built-in name
//! or a path to a FILE. Every cost is in nanoseconds of the simulated machine.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// The most physical cores a profile may have (the coherence model keeps one bit per core).
pub const MAX_CORES: u32 = 256;

/// The most hardware threads a profile may have.
pub const MAX_HW_THREADS: u32 = 1024;

/// The largest profile file [`MachineProfile::resolve`] reads, bytes (1 MiB). A profile is a
/// few kilobytes; the largest possible one (a 256 x 256 NUMA distance matrix) is about 400 KB.
/// The bound keeps `--machine /dev/zero` from filling memory.
pub const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// One simulated machine: its name, a one-line description, its topology and its costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineProfile {
    /// The profile's name (`opteron-24`), as `lockstack machine list` shows it.
    pub name: String,
    /// One line: which machine this models and where its figures come from.
    pub description: String,
    /// The constants whose figures are assumed rather than cited, as `section.key`
    /// (`costs.owner_grace_ns`, `pgbench.wal_flush_us`; see [`crate::constants`]): the ones
    /// `lockstack experiment --sensitivity` perturbs. Each must be a constant of the profile;
    /// the built-in profiles list exactly the figures whose comment opens with "assumed"
    /// (a test checks it). Optional: empty by default.
    #[serde(default)]
    pub assumed: Vec<String>,
    /// Sockets, cores, SMT threads, last-level-cache groups and NUMA nodes.
    pub topology: Topology,
    /// Latencies and rates, in nanoseconds of the simulated machine.
    pub costs: Costs,
    /// pgbench's client side and the WAL device (`[pgbench]`, optional: the defaults are
    /// assumed figures).
    #[serde(default)]
    pub pgbench: ClientCosts,
    /// The caches' capacities (`[caches]`, optional): without it a line stays in a core's
    /// cache until another core's write takes it (no capacity, nothing is evicted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caches: Option<CacheSizes>,
}

/// The capacity of the simulated caches: one private cache per core (its last private level,
/// the L2: the L1 inside it is not modelled separately) and one last-level cache per group of
/// `topology.cores_per_llc` cores, each set-associative with LRU replacement. The LLC is
/// modelled as inclusive of its cores' private caches (an eviction from it takes the line from
/// them too); see docs/sim.md, "Caches". Sizes in KiB, as the processor's documentation gives
/// them (each cited in the profile).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheSizes {
    /// One core's private cache (L2), KiB.
    pub private_kib: u32,
    /// Its associativity (ways per set).
    pub private_ways: u32,
    /// One last-level cache (shared by `topology.cores_per_llc` cores), KiB.
    pub llc_kib: u32,
    /// Its associativity (ways per set).
    pub llc_ways: u32,
    /// A load that misses the core's private cache and hits the last-level cache (the line
    /// held by no other core in a state that needs a transfer), ns.
    pub llc_hit_ns: f64,
}

/// The most 64-byte lines all simulated caches of one profile may hold together (2^26: 512
/// MiB of tags), so that a profile cannot make the model allocate without bound.
pub const MAX_CACHE_LINES: u64 = 1 << 26;

impl CacheSizes {
    /// Lines of one private cache.
    pub fn private_lines(&self) -> u64 {
        u64::from(self.private_kib) * 1024 / 64
    }

    /// Lines of one last-level cache.
    pub fn llc_lines(&self) -> u64 {
        u64::from(self.llc_kib) * 1024 / 64
    }

    /// Checks the sizes against the topology (`cores`, `cores_per_llc`).
    fn validate(&self, cores: u32, cores_per_llc: u32) -> Result<(), InvalidProfile> {
        for (what, lines, ways) in
            [("private", self.private_lines(), self.private_ways), ("llc", self.llc_lines(), self.llc_ways)]
        {
            if lines == 0 || ways == 0 {
                return Err(format!("caches.{what}_kib and caches.{what}_ways must be at least 1").into());
            }
            if !lines.is_multiple_of(u64::from(ways)) {
                return Err(format!(
                    "caches.{what}_ways {ways} does not divide the cache's {lines} lines of 64 bytes"
                )
                .into());
            }
        }
        if self.llc_lines() < self.private_lines() * u64::from(cores_per_llc) {
            return Err(format!(
                "caches.llc_kib {} is smaller than its {cores_per_llc} cores' private caches ({} KiB each); the model's LLC is inclusive",
                self.llc_kib, self.private_kib
            ).into());
        }
        let total = self.private_lines() * u64::from(cores)
            + self.llc_lines() * u64::from(cores / cores_per_llc.max(1));
        if total > MAX_CACHE_LINES {
            return Err(format!(
                "the caches hold {total} lines in all; at most {MAX_CACHE_LINES} are supported"
            )
            .into());
        }
        let v = self.llc_hit_ns;
        if !v.is_finite() || !(0.0..=1e9).contains(&v) {
            return Err(
                format!("caches.llc_hit_ns is {v}; it must be a finite number of ns in 0..1e9").into()
            );
        }
        Ok(())
    }
}

/// What `lockstack pgbench --machine` charges outside the lock stack: the client's own work
/// and its round trip per statement, and a WAL flush on the machine's storage, in
/// microseconds (`--set sim.client_cpu_us`, `sim.client_rtt_us` override the first two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientCosts {
    /// The pgbench client's own CPU per statement (building it, libpq), charged on the
    /// simulated core (default 10 us: assumed).
    pub client_cpu_us: f64,
    /// The client-backend round trip per statement over a local socket, slept (default 20 us:
    /// assumed).
    pub client_rtt_us: f64,
    /// One WAL flush (`fdatasync`) on the machine's storage, slept by the flushing backend
    /// (default 200 us: assumed, a battery-backed RAID cache).
    pub wal_flush_us: f64,
}

impl Default for ClientCosts {
    fn default() -> Self {
        ClientCosts { client_cpu_us: 10.0, client_rtt_us: 20.0, wal_flush_us: 200.0 }
    }
}

/// The shape of the machine. Cores are numbered socket-major (core `c` is on socket
/// `c / cores_per_socket`); hardware thread `h` is SMT thread `h % threads_per_core` of core
/// `h / threads_per_core`; NUMA node `n` holds the cores `n * k .. (n + 1) * k` with
/// `k = cores / numa_nodes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    /// Sockets (packages), at least 1.
    pub sockets: u32,
    /// Physical cores per socket, at least 1.
    pub cores_per_socket: u32,
    /// Hardware (SMT) threads per core, at least 1.
    pub threads_per_core: u32,
    /// Cores that share one last-level cache (an Intel socket, an AMD CCX); divides the number
    /// of cores. A line moves between two such cores at `costs.same_llc_ns`.
    pub cores_per_llc: u32,
    /// NUMA nodes; divides the number of cores.
    pub numa_nodes: u32,
    /// The NUMA distance matrix (ACPI SLIT values as `numactl --hardware` prints them):
    /// `numa_nodes` rows of `numa_nodes` entries, 10 on the diagonal, larger off it. Each
    /// off-diagonal value must have an entry in `costs.remote`.
    pub numa_distances: Vec<Vec<u32>>,
}

/// The cost of one NUMA distance: a cache line handed between cores that far apart, and a
/// memory access to a node that far away.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteCost {
    /// The SLIT distance this entry prices (> 10).
    pub distance: u32,
    /// A line handed from a core on one node to a core on the other, ns.
    pub transfer_ns: f64,
    /// A load from the other node's memory, ns.
    pub memory_ns: f64,
}

/// Costs of the simulated machine, in nanoseconds (dimensionless for `speed_factor`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Costs {
    /// An access to a line this core already holds in the needed state.
    pub l1_hit_ns: f64,
    /// An access to a line last written by the other SMT thread of the same core.
    pub smt_sibling_ns: f64,
    /// A line handed between two cores that share a last-level cache.
    pub same_llc_ns: f64,
    /// A line handed between two cores on one NUMA node but different last-level caches.
    pub same_node_ns: f64,
    /// Line hand-offs and memory loads between NUMA nodes, one entry per SLIT distance used.
    pub remote: Vec<RemoteCost>,
    /// A load from local memory (a line no core holds).
    pub memory_ns: f64,
    /// What a locked read-modify-write (CAS, fetch_add, swap) adds once the line is held
    /// exclusively.
    pub atomic_rmw_ns: f64,
    /// How long a core keeps a line it received by a read miss before a queued request of
    /// another core takes it: the window in which a load's compare-and-swap finds the line
    /// still held (hardware answers a snoop only after the instructions waiting for the
    /// fill have used it). Without it every CAS loop under contention fails until the queue
    /// drains. Assumed in every built-in profile; see docs/sim.md.
    pub owner_grace_ns: f64,
    /// Which waiter a contended line is handed to next when several cores queue for it
    /// (default `fifo`, arrival order). See [`Arbitration`].
    #[serde(default)]
    pub arbitration: Arbitration,
    /// Under `arbitration = "nearest-first"`: how many hand-offs in a row the oldest waiter of
    /// a line may be passed over for nearer ones before it is served (its wait is bounded:
    /// a waiter k-th in arrival order is served within k x (bound + 1) hand-offs). Read as a
    /// whole number (the fraction is dropped); unused under `fifo`. Default 4.
    #[serde(default = "default_arbitration_bound")]
    pub arbitration_bound: f64,
    /// A full fence (`mfence`, `sync`).
    pub fence_ns: f64,
    /// One spin-wait hint (`pause`, `or 27,27,27`).
    pub pause_ns: f64,
    /// A clock read (`clock_gettime` through the vDSO).
    pub clock_read_ns: f64,
    /// A cheap system call (`sched_yield` on an idle core).
    pub syscall_ns: f64,
    /// What a thread pays to go to sleep in `futex(FUTEX_WAIT)` before its core is free.
    pub futex_wait_ns: f64,
    /// What the waker pays for `futex(FUTEX_WAKE)` of a sleeping thread.
    pub futex_wake_ns: f64,
    /// From a wake (or a timer's expiry) to the woken thread running on an idle core.
    pub futex_wake_latency_ns: f64,
    /// A context switch between two runnable threads on one hardware thread.
    pub context_switch_ns: f64,
    /// The scheduler's time slice: a thread that ran this long is preempted at its next
    /// operation when another runnable thread waits for a hardware thread.
    pub time_slice_ns: f64,
    /// How much slower the simulated core runs local code than this host (2.0 = half as fast);
    /// multiplies measured and calibrated segment times.
    pub speed_factor: f64,
    /// The core's clock, GHz (the processor's specification, cited in the profile).
    pub clock_ghz: f64,
    /// Instructions per cycle one hardware thread retires on PostgreSQL's backend code
    /// (an OLTP workload: cache and branch misses keep it well below the core's peak). With
    /// `clock_ghz` it gives the rate at which `--costs postgres` charges PostgreSQL's
    /// instruction counts ([`Costs::instructions_per_ns`]); cited or "assumed" in the profile.
    pub postgres_ipc: f64,
}

/// The default of [`Costs::arbitration_bound`].
fn default_arbitration_bound() -> f64 {
    4.0
}

/// How the coherence fabric picks the next owner of a line several cores wait for
/// (`costs.arbitration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arbitration {
    /// In the order the requests arrived (a fair directory or home agent).
    #[default]
    Fifo,
    /// The waiter nearest (by the profile's transfer cost, ties to the earlier arrival) to the
    /// core that just received the line, so a line tends to stay within a die or socket, the
    /// NUMA unfairness hierarchical locks exploit; bounded by [`Costs::arbitration_bound`].
    NearestFirst,
}

impl Costs {
    /// The rate `--costs postgres` charges PostgreSQL's instruction counts at: `clock_ghz x
    /// postgres_ipc` instructions per nanosecond.
    pub fn instructions_per_ns(&self) -> f64 {
        self.clock_ghz * self.postgres_ipc
    }
}

/// Why a parsed profile is inconsistent: one line naming the field (`costs.memory_ns is -1; it
/// must be ...`), as [`MachineProfile::validate`] finds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidProfile {
    /// What is wrong, naming the field.
    pub message: String,
}

impl From<String> for InvalidProfile {
    fn from(message: String) -> Self {
        InvalidProfile { message }
    }
}

impl From<&str> for InvalidProfile {
    fn from(message: &str) -> Self {
        InvalidProfile { message: message.to_string() }
    }
}

/// Why a profile could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileError {
    /// A file was found but not read whole: larger than [`MAX_PROFILE_BYTES`] or not UTF-8.
    Unreadable {
        /// The path given.
        spec: String,
        /// What is wrong (`larger than 1048576 bytes, the most accepted`).
        message: String,
    },
    /// The name is no built-in profile and no readable file.
    Unknown {
        /// The name or path given.
        spec: String,
        /// Why it could not be read as a file (the I/O error).
        reason: String,
    },
    /// The TOML did not parse into a profile.
    Parse {
        /// The built-in name or file path.
        source: String,
        /// The parser's message.
        message: String,
    },
    /// The profile parsed but is inconsistent (a zero count, a bad distance matrix, ...).
    Invalid {
        /// The built-in name or file path.
        source: String,
        /// What is wrong.
        message: String,
    },
}

/// Whether a `--machine` argument names a file rather than a profile: it holds a '/' or ends
/// in `.toml`.
pub fn looks_like_path(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".toml")
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileError::Unreadable { spec, message } => write!(f, "machine profile {spec:?}: {message}"),
            // A path (a '/' or a .toml name) is a file the user meant: say only that it is missing.
            ProfileError::Unknown { spec, reason } if looks_like_path(spec) => {
                write!(f, "machine profile file {spec}: cannot be read ({reason})")
            }
            ProfileError::Unknown { spec, reason } => write!(
                f,
                "machine profile {spec:?}: no built-in profile of that name ({}) and no readable file ({reason})",
                BUILTIN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ),
            ProfileError::Parse { source, message } => {
                // The parser's message on one line: its first line and its explanation, without
                // the quoted source snippet.
                let parts: Vec<&str> = message
                    .lines()
                    .map(str::trim)
                    .filter(|l| {
                        !l.is_empty() && !l.starts_with('|') && !l.starts_with(|c: char| c.is_ascii_digit())
                    })
                    .collect();
                write!(f, "machine profile {source}: {}", parts.join(": "))
            }
            ProfileError::Invalid { source, message } => {
                write!(f, "machine profile {source}: {message}")
            }
        }
    }
}

impl std::error::Error for ProfileError {}

/// The built-in profiles: (name, TOML source), in the order `lockstack machine list` shows them.
pub const BUILTIN: &[(&str, &str)] = &[
    ("host", include_str!("../profiles/host.toml")),
    ("opteron-24", include_str!("../profiles/opteron-24.toml")),
    ("xeon-32", include_str!("../profiles/xeon-32.toml")),
    ("itanium-32", include_str!("../profiles/itanium-32.toml")),
    ("power8-192", include_str!("../profiles/power8-192.toml")),
    ("xeon-12", include_str!("../profiles/xeon-12.toml")),
    ("epyc-2s", include_str!("../profiles/epyc-2s.toml")),
];

impl MachineProfile {
    /// Parses and validates a profile from TOML text; `source` names it in errors.
    ///
    /// # Errors
    /// [`ProfileError::Parse`] for TOML that is not a profile (an unknown key included),
    /// [`ProfileError::Invalid`] for an inconsistent one (see [`MachineProfile::validate`]).
    pub fn from_toml(text: &str, source: &str) -> Result<Self, ProfileError> {
        let p: MachineProfile = toml::from_str(text)
            .map_err(|e| ProfileError::Parse { source: source.to_string(), message: e.to_string() })?;
        p.validate().map_err(|e| ProfileError::Invalid { source: source.to_string(), message: e.message })?;
        Ok(p)
    }

    /// The built-in profile `name`, or `None` when there is none of that name.
    pub fn builtin(name: &str) -> Option<Self> {
        let (_, text) = BUILTIN.iter().find(|(n, _)| *n == name)?;
        // The built-in files are checked by this crate's tests, so this cannot fail.
        Some(
            Self::from_toml(text, name)
                .expect("the built-in profiles are valid (this crate's tests load each)"),
        )
    }

    /// The TOML source of the built-in profile `name` (with its citation comments).
    pub fn builtin_source(name: &str) -> Option<&'static str> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// A built-in profile by name, or else a profile read from the file at `spec`.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`] when `spec` is neither; [`ProfileError::Unreadable`] for a
    /// file larger than [`MAX_PROFILE_BYTES`] or not UTF-8; parse and validation errors of the
    /// file otherwise.
    pub fn resolve(spec: &str) -> Result<Self, ProfileError> {
        if let Some(p) = Self::builtin(spec) {
            return Ok(p);
        }
        Self::from_toml(&Self::read_file(spec)?, spec)
    }

    /// The text of the profile file at `spec` (read through [`MAX_PROFILE_BYTES`]; a device or
    /// FIFO is bounded too), unparsed.
    ///
    /// # Errors
    /// [`ProfileError::Unknown`] when it cannot be opened or read, [`ProfileError::Unreadable`]
    /// when it is larger than [`MAX_PROFILE_BYTES`] or not UTF-8.
    pub fn read_file(spec: &str) -> Result<String, ProfileError> {
        use lockstack_common::input::{ReadError, read_text_bounded};
        read_text_bounded(Path::new(spec), MAX_PROFILE_BYTES).map_err(|e| match e {
            ReadError::Io(e) => ProfileError::Unknown { spec: spec.to_string(), reason: e.to_string() },
            e => ProfileError::Unreadable { spec: spec.to_string(), message: e.to_string() },
        })
    }

    /// Renders the profile as TOML (without comments).
    pub fn to_toml(&self) -> String {
        toml::to_string(self)
            .expect("a profile serializes: its fields are strings, numbers and tables of them")
    }

    /// Physical cores (`sockets * cores_per_socket`).
    pub fn cores(&self) -> u32 {
        self.topology.sockets * self.topology.cores_per_socket
    }

    /// Hardware threads (`cores * threads_per_core`).
    pub fn hw_threads(&self) -> u32 {
        self.cores() * self.topology.threads_per_core
    }

    /// Checks the counts, the distance matrix and the costs.
    ///
    /// # Errors
    /// A one-line description of the first inconsistency found.
    pub fn validate(&self) -> Result<(), InvalidProfile> {
        let t = &self.topology;
        for (what, v) in [
            ("topology.sockets", t.sockets),
            ("topology.cores_per_socket", t.cores_per_socket),
            ("topology.threads_per_core", t.threads_per_core),
            ("topology.cores_per_llc", t.cores_per_llc),
            ("topology.numa_nodes", t.numa_nodes),
        ] {
            if v == 0 {
                return Err(format!("{what} must be at least 1").into());
            }
        }
        let cores = t.sockets.checked_mul(t.cores_per_socket).ok_or("too many cores")?;
        if cores > MAX_CORES {
            return Err(format!("{cores} cores; at most {MAX_CORES} are supported").into());
        }
        let hw = cores.checked_mul(t.threads_per_core).ok_or("too many hardware threads")?;
        if hw > MAX_HW_THREADS {
            return Err(format!("{hw} hardware threads; at most {MAX_HW_THREADS} are supported").into());
        }
        if !cores.is_multiple_of(t.cores_per_llc) {
            return Err(
                format!("topology.cores_per_llc {} does not divide {cores} cores", t.cores_per_llc).into()
            );
        }
        if !cores.is_multiple_of(t.numa_nodes) {
            return Err(format!("topology.numa_nodes {} does not divide {cores} cores", t.numa_nodes).into());
        }
        let n = t.numa_nodes as usize;
        if t.numa_distances.len() != n || t.numa_distances.iter().any(|r| r.len() != n) {
            return Err(format!("topology.numa_distances must be {n} rows of {n} entries").into());
        }
        for (i, row) in t.numa_distances.iter().enumerate() {
            for (j, &d) in row.iter().enumerate() {
                if i == j && d != 10 {
                    return Err(
                        format!("topology.numa_distances[{i}][{i}] is {d}; the diagonal is 10").into()
                    );
                }
                if i != j {
                    if d <= 10 {
                        return Err(format!(
                            "topology.numa_distances[{i}][{j}] is {d}; off the diagonal it exceeds 10"
                        )
                        .into());
                    }
                    if !self.costs.remote.iter().any(|r| r.distance == d) {
                        return Err(format!("NUMA distance {d} has no entry in costs.remote").into());
                    }
                }
            }
        }
        let c = &self.costs;
        let mut named = vec![
            ("l1_hit_ns", c.l1_hit_ns),
            ("smt_sibling_ns", c.smt_sibling_ns),
            ("same_llc_ns", c.same_llc_ns),
            ("same_node_ns", c.same_node_ns),
            ("memory_ns", c.memory_ns),
            ("atomic_rmw_ns", c.atomic_rmw_ns),
            ("owner_grace_ns", c.owner_grace_ns),
            ("arbitration_bound", c.arbitration_bound),
            ("fence_ns", c.fence_ns),
            ("pause_ns", c.pause_ns),
            ("clock_read_ns", c.clock_read_ns),
            ("syscall_ns", c.syscall_ns),
            ("futex_wait_ns", c.futex_wait_ns),
            ("futex_wake_ns", c.futex_wake_ns),
            ("futex_wake_latency_ns", c.futex_wake_latency_ns),
            ("context_switch_ns", c.context_switch_ns),
        ];
        for r in &c.remote {
            named.push(("remote.transfer_ns", r.transfer_ns));
            named.push(("remote.memory_ns", r.memory_ns));
        }
        for (what, v) in named {
            if !v.is_finite() || !(0.0..=1e9).contains(&v) {
                return Err(format!("costs.{what} is {v}; it must be a finite number of ns in 0..1e9").into());
            }
        }
        for (what, v) in [
            ("time_slice_ns", c.time_slice_ns),
            ("speed_factor", c.speed_factor),
            ("clock_ghz", c.clock_ghz),
            ("postgres_ipc", c.postgres_ipc),
        ] {
            if (what == "clock_ghz" || what == "postgres_ipc") && v > 10.0 {
                return Err(format!("costs.{what} is {v}; it must be at most 10").into());
            }
            if !v.is_finite() || v <= 0.0 || v > 1e10 {
                return Err(format!("costs.{what} is {v}; it must be a finite positive number").into());
            }
        }
        let p = &self.pgbench;
        for (what, v) in [
            ("client_cpu_us", p.client_cpu_us),
            ("client_rtt_us", p.client_rtt_us),
            ("wal_flush_us", p.wal_flush_us),
        ] {
            if !v.is_finite() || !(0.0..=1e6).contains(&v) {
                return Err(
                    format!("pgbench.{what} is {v}; it must be a finite number of us in 0..1e6").into()
                );
            }
        }
        if let Some(c) = &self.caches {
            c.validate(cores, t.cores_per_llc)?;
        }
        Ok(self.validate_assumed()?)
    }
}
