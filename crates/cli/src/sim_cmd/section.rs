//! The "simulated machine" section a `--machine` run prints after its report (and adds to
//! `--json`): built from the process's phase tallies. Locks: none.

use super::*;

/// The "simulated machine" section.
#[derive(Serialize)]
pub(crate) struct Section {
    profile: String,
    cores: u32,
    hw_threads: u32,
    clock: String,
    phases: usize,
    virtual_seconds: f64,
    host_seconds: f64,
    events: u64,
    events_per_host_second: f64,
    /// Measured clock: host ns subtracted from each segment as the measurement's own cost.
    segment_overhead_ns: f64,
    /// Measured clock: segments the host interrupted, charged their call-site pair's mean.
    clipped_segments: u64,
    /// Deterministic clock: where segment costs come from.
    segment_costs: String,
    /// Deterministic clock: segments charged from the table, and at its median.
    segments_from_table: u64,
    segments_at_default: u64,
    /// Deterministic clock: segments charged the mean of the table's segments between the
    /// same two files (their call sites moved since the table was made).
    segments_by_file_pair: u64,
    /// Whose costs local work carried.
    costs: String,
    /// The profile's sources, the calibration and the client and server costs in use.
    ground: Ground,
    /// Where the tasks' virtual time came from.
    time_sources: Sources,
    /// The segments the table did not know, as a share of the tasks' virtual time.
    untimed_share: f64,
    transfers: u64,
    tasks: usize,
    /// Of `tasks`, the backends: every task but the background ones (the wait sampler, the
    /// WAL writer), whose time the shares are of.
    backend_tasks: usize,
    /// The backends' virtual time the shares are of (the harness's own waits left out), ms.
    backend_ms: f64,
    /// Per wait class of the lock stack (LWLock tranche, `Lock:<tag kind>`, ...): share of
    /// the backends' virtual time (the harness's own waits left out of both).
    waits: Vec<ClassShare>,
    /// The background tasks' waits per class (the WAL writer's sleeps and flushes), ms: not
    /// in the backends' time, nor in a wait-event sampler's profile.
    background_waits: Vec<(String, f64)>,
    /// The harness's own waits (`Harness:start`, `Harness:end`, ...: start and end gates,
    /// sessions idle between steps), which are not lock waits, with their share of the same
    /// time as `waits`.
    harness_waits: Vec<ClassShare>,
    hot_lines: Vec<HotLine>,
    /// The caches' capacities and the phases' evictions summed; `None` without capacity.
    caches: Option<CacheTally>,
    /// Private-cache misses per data structure, summed over the phases.
    pub(crate) misses_by_structure: BTreeMap<String, MissTally>,
}

/// The section of `t`: its phases added up, wait classes by share, the ten hottest lines.
pub(crate) fn section(t: &SimTally) -> Section {
    let (mut waits, mut spins): (BTreeMap<String, u64>, BTreeMap<String, u64>) = Default::default();
    let mut lines: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    let mut worker_ns = 0u64;
    let (mut tasks, mut background_tasks) = (0, 0);
    let mut background: BTreeMap<String, u64> = BTreeMap::new();
    for r in &t.phases {
        tasks += r.tasks;
        background_tasks += r.background_tasks;
        worker_ns += r.worker_ns;
        for (c, v) in &r.background_ns {
            *background.entry(c.clone()).or_default() += v;
        }
        for (c, v) in &r.waiting_ns {
            *waits.entry(c.clone()).or_default() += v;
        }
        for (c, v) in &r.spinning_ns {
            *spins.entry(c.clone()).or_default() += v;
        }
        for l in &r.hot_lines {
            let e = lines.entry(l.name.clone()).or_default();
            e.0 += l.transfers;
            e.1 += l.invalidations;
            e.2 += l.accesses;
        }
    }
    // The backends' time without the harness's own waits (its start and end gates).
    let harness = |c: &str| c.starts_with(lockstack_common::sync::hook::HARNESS_CLASS_PREFIX);
    let harness_ns: u64 = waits.iter().chain(spins.iter()).filter(|(c, _)| harness(c)).map(|(_, v)| v).sum();
    let worker_ns = worker_ns.saturating_sub(harness_ns);
    let mut classes: Vec<String> = waits.keys().chain(spins.keys()).cloned().collect();
    classes.sort();
    classes.dedup();
    let mut waits: Vec<ClassShare> = classes
        .into_iter()
        .map(|c| {
            let (w, s) = (waits.get(&c).copied().unwrap_or(0), spins.get(&c).copied().unwrap_or(0));
            let of = |ns: u64| if worker_ns == 0 { 0.0 } else { ns as f64 / worker_ns as f64 };
            ClassShare {
                share: of(w + s),
                parked_share: of(w),
                spinning_share: of(s),
                waiting_ms: w as f64 / 1e6,
                spinning_ms: s as f64 / 1e6,
                class: c,
            }
        })
        .collect();
    waits.sort_by(|a, b| b.share.total_cmp(&a.share).then_with(|| a.class.cmp(&b.class)));
    let (harness_waits, waits): (Vec<ClassShare>, Vec<ClassShare>) =
        waits.into_iter().partition(|w| harness(&w.class));
    let mut hot: Vec<HotLine> = lines
        .into_iter()
        .map(|(name, (transfers, invalidations, accesses))| HotLine {
            name,
            transfers,
            invalidations,
            accesses,
        })
        .collect();
    hot.sort_by(|a, b| b.transfers.cmp(&a.transfers).then_with(|| a.name.cmp(&b.name)));
    hot.truncate(10);
    let host_seconds: f64 = t.phases.iter().map(|r| r.host_seconds).sum();
    let events: u64 = t.phases.iter().map(|r| r.events).sum();
    let mut sources = Sources::default();
    for r in &t.phases {
        sources.add(&r.sources);
    }
    let untimed_share = if worker_ns == 0 { 0.0 } else { sources.untimed_ns as f64 / worker_ns as f64 };
    let mut caches: Option<CacheTally> = None;
    let mut misses_by_structure: BTreeMap<String, MissTally> = BTreeMap::new();
    for r in &t.phases {
        if let Some(c) = &r.caches {
            let e = caches.get_or_insert_with(|| CacheTally {
                private_evictions: 0,
                llc_evictions: 0,
                back_invalidations: 0,
                ..c.clone()
            });
            e.private_evictions += c.private_evictions;
            e.llc_evictions += c.llc_evictions;
            e.back_invalidations += c.back_invalidations;
        }
        for (k, m) in &r.misses {
            misses_by_structure.entry(k.clone()).or_default().add(m);
        }
    }
    Section {
        caches,
        misses_by_structure,
        profile: t.profile.clone(),
        cores: t.cores,
        hw_threads: t.hw_threads,
        clock: t.phases.first().map_or_else(String::new, |r| r.clock.clone()),
        phases: t.phases.len(),
        virtual_seconds: t.phases.iter().map(|r| r.virtual_seconds).sum(),
        host_seconds,
        events,
        events_per_host_second: if host_seconds > 0.0 { events as f64 / host_seconds } else { 0.0 },
        segment_overhead_ns: t.phases.first().map_or(0.0, |r| r.segment_overhead_ns),
        clipped_segments: t.phases.iter().map(|r| r.clipped_segments).sum(),
        segment_costs: t.segment_costs.clone(),
        segments_from_table: t.phases.iter().map(|r| r.segments_from_table).sum(),
        segments_at_default: t.phases.iter().map(|r| r.segments_at_default).sum(),
        segments_by_file_pair: t.phases.iter().map(|r| r.segments_by_file_pair).sum(),
        costs: t.costs.clone(),
        ground: t.ground.clone(),
        time_sources: sources,
        untimed_share,
        transfers: t.phases.iter().map(|r| r.transfers).sum(),
        tasks,
        backend_tasks: tasks.saturating_sub(background_tasks),
        backend_ms: worker_ns as f64 / 1e6,
        waits,
        background_waits: background.into_iter().map(|(c, ns)| (c, ns as f64 / 1e6)).collect(),
        harness_waits,
        hot_lines: hot,
    }
}

/// Prints the "simulated machine" section after `command`'s report.
pub(crate) fn print_section(command: &str, s: &Section) {
    outln!();
    outln!(
        "simulated machine: {} ({} cores, {} hardware threads), {} clock",
        s.profile,
        s.cores,
        s.hw_threads,
        s.clock
    );
    if command == "pgbench" {
        outln!("  tps and latencies above are per virtual second of the simulated machine");
    }
    print_ground(s);
    outln!("  measured phases: {}, simulated tasks: {}", s.phases, s.tasks);
    outln!("  virtual seconds: {:.6}", s.virtual_seconds);
    outln!("  host seconds: {:.3}", s.host_seconds);
    outln!("  simulated events: {} ({:.0} per host second)", s.events, s.events_per_host_second);
    if s.clock == "deterministic" {
        let n = s.segments_from_table + s.segments_at_default + s.segments_by_file_pair;
        let share = |k: u64| if n == 0 { 0.0 } else { 100.0 * k as f64 / n as f64 };
        outln!(
            "  segment costs: {}; {:.1}% of segments found in it, {:.1}% by their two files (their lines moved), {:.1}% at its median",
            s.segment_costs,
            share(s.segments_from_table),
            share(s.segments_by_file_pair),
            share(s.segments_at_default)
        );
    }
    if !s.costs.is_empty() {
        outln!("  costs: {}", s.costs);
        let ms = |ns: u64| ns as f64 / 1e6;
        let ts = &s.time_sources;
        outln!(
            "  local work charged: PostgreSQL's counts {:.3} ms ({} regions), this code's own {:.3} ms (of which untimed {:.3} ms, {:.2}% of the tasks' time), modelled client and statement work {:.3} ms; this code's own {:.3} ms inside regions replaced by PostgreSQL's counts",
            ms(ts.postgres_ns),
            ts.regions.len(),
            ms(ts.own_code_ns),
            ms(ts.untimed_ns),
            s.untimed_share * 100.0,
            ms(ts.modelled_ns),
            ms(ts.replaced_own_ns)
        );
        if !ts.postgres_ipc.is_empty() {
            let list: Vec<String> = ts.postgres_ipc.iter().map(|i| format!("{i:.3}")).collect();
            outln!(
                "  PostgreSQL's counts charged at IPC {} (the rate the costs line names is the profile's; a calibrated or --set sim.postgres_ipc replaces it)",
                list.join(", ")
            );
        }
        if !ts.unknown_regions.is_empty() {
            outln!(
                "  regions without a PostgreSQL figure (charged as own code): {}",
                ts.unknown_regions.join(", ")
            );
        }
    }
    if s.clock == "measured" {
        outln!(
            "  measured segments: {:.1} host ns of measuring subtracted from each, {} interrupted by the host charged their mean",
            s.segment_overhead_ns,
            s.clipped_segments
        );
    }
    outln!("  line transfers: {}", s.transfers);
    outln!(
        "  waiting, share of the {} backends' virtual time ({:.3} ms: every task but the main one, the wait sampler and the WAL writer, each from its start to its end, the harness's gates left out):",
        s.backend_tasks,
        s.backend_ms
    );
    outln!(
        "    per LWLock tranche (LWLock:<tranche> in a wait-event profile), heavyweight lock class, other wait event; parked or asleep is the time the backend publishes the wait event (what a wait-event sampler counts), spinning publishes none (a sampler counts it as no wait event)"
    );
    if s.waits.is_empty() {
        outln!("    (no waits)");
    }
    for w in &s.waits {
        outln!(
            "    {:<28} {:>7.3}%  parked or asleep {:.3}% ({:.3} ms), spinning {:.3}% ({:.3} ms)",
            w.class,
            w.share * 100.0,
            w.parked_share * 100.0,
            w.waiting_ms,
            w.spinning_share * 100.0,
            w.spinning_ms
        );
    }
    if !s.background_waits.is_empty() {
        let list: Vec<String> = s.background_waits.iter().map(|(c, ms)| format!("{c} {ms:.3} ms")).collect();
        outln!(
            "  background tasks' waits (the WAL writer's; not in the backends' time above, nor in a wait-event profile): {}",
            list.join(", ")
        );
    }
    if !s.harness_waits.is_empty() {
        let list: Vec<String> = s
            .harness_waits
            .iter()
            .map(|w| format!("{} {:.3} ms", w.class, w.waiting_ms + w.spinning_ms))
            .collect();
        outln!(
            "  harness waits (start/end gates, idle sessions; not lock waits, left out above): {}",
            list.join(", ")
        );
    }
    outln!("  hottest cache lines (by core-to-core transfers):");
    if s.hot_lines.is_empty() {
        outln!("    (no line moved between cores)");
    }
    for l in &s.hot_lines {
        outln!(
            "    {:<40} {:>10} transfers {:>10} invalidations {:>10} accesses",
            l.name,
            l.transfers,
            l.invalidations,
            l.accesses
        );
    }
    match &s.caches {
        Some(c) => outln!(
            "  caches: {} KiB private per core ({}-way), {} KiB last-level ({}-way, inclusive), LRU; {} private and {} LLC evictions, {} private copies back-invalidated",
            c.private_kib,
            c.private_ways,
            c.llc_kib,
            c.llc_ways,
            c.private_evictions,
            c.llc_evictions,
            c.back_invalidations
        ),
        None => outln!(
            "  caches: no capacity (the profile has no [caches], or --set sim.caches=off): lines leave a cache only when another core takes them"
        ),
    }
    let mut top: Vec<(&String, &MissTally)> = s.misses_by_structure.iter().collect();
    top.sort_by(|a, b| b.1.misses().cmp(&a.1.misses()).then_with(|| a.0.cmp(b.0)));
    outln!("  private-cache misses by structure (top 10; capacity: from the LLC or refilled from memory):");
    for (name, m) in top.into_iter().take(10) {
        outln!(
            "    {:<40} {:>10} misses {:>10} capacity {:>10} transfers {:>10} accesses",
            name,
            m.misses(),
            m.capacity(),
            m.transfers,
            m.accesses
        );
    }
}

/// The section's ground lines: the profile's sources, the calibration, the costs in use.
fn print_ground(s: &Section) {
    let g = &s.ground;
    let prov = |k: &str| {
        if g.overridden.iter().any(|o| o == k) {
            "set for this run, not the profile's".to_string()
        } else {
            format!("the profile's, {}", g.provenance.get(k).map_or("assumed (default)", String::as_str))
        }
    };
    outln!(
        "  profile: {}; its figures: {} cited, {} assumed (`lockstack machine show {}`)",
        g.description,
        g.cited,
        g.assumed,
        s.profile
    );
    outln!("  calibration: {}", g.calibration);
    let shift = match g.layout_shift {
        0 => "as this process placed it".to_string(),
        n => format!("shifted by {n} x 16 bytes (--sim-layout-shift {n})"),
    };
    outln!(
        "  heap layout: {shift}; the figures move with it (docs/sim.md, \"Layout\"), --sim-layout-shift N samples another and an experiment's run r adds r"
    );
    let us = |v: Option<f64>| v.map_or_else(|| "not charged".to_string(), |v| format!("{v} us"));
    let ipc = match g.postgres_ipc_set {
        Some(v) if g.calibration.contains("(--calibration ") => {
            format!("; sim.postgres_ipc {v} (--calibration)")
        }
        Some(v) => format!("; sim.postgres_ipc {v} (--set)"),
        None => String::new(),
    };
    if g.wal_flush.is_empty() && g.client_cpu_us.is_none() {
        outln!("  client and server costs: none modelled (no client side: a micro-benchmark){ipc}");
        return;
    }
    outln!(
        "  client and server costs: client CPU {} per statement ({}), round trip {} ({}), WAL flush {} ({}){ipc}",
        us(g.client_cpu_us),
        prov("client_cpu_us"),
        us(g.client_rtt_us),
        prov("client_rtt_us"),
        g.wal_flush,
        prov("wal_flush_us"),
    );
}

/// Adds the section to the `--json` document the command wrote, as `simulated_machine`.
pub(crate) fn add_to_json(path: &std::path::Path, s: &Section) -> Result<(), Failure> {
    if !path.is_file() {
        // A device or FIFO was written once; it cannot be amended.
        return Ok(());
    }
    let bad = |e: &dyn std::fmt::Display| Failure::output(format!("--json {}: {e}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| bad(&e))?;
    let mut doc: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&e))?;
    let value = serde_json::to_value(s).map_err(|e| bad(&e))?;
    match &mut doc {
        serde_json::Value::Object(m) => {
            m.insert("simulated_machine".to_string(), value);
        }
        other => {
            let inner = std::mem::take(other);
            *other = serde_json::json!({ "result": inner, "simulated_machine": value });
        }
    }
    crate::write_json(Some(path), &doc)
}
