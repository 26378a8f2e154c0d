//! Measuring a plan: each point on a fresh engine (pgbench built-ins) or buffer pool (the
//! buffer scenarios), the min / median / max summary and the USL fits of a finished sweep.
//! Locks: whatever the workload's run takes; none of its own.

use super::*;

/// The unit of a workload's operations in counter labels: `txn` for pgbench, `op` otherwise.
pub fn op_name(w: &Workload) -> &'static str {
    match w.kind {
        WorkloadKind::Pgbench { .. } => "txn",
        WorkloadKind::Buffers { .. } => "op",
    }
}

/// What a workload's client count counts, as plots label their axis: `clients` for pgbench
/// (its sessions), `workers` for the buffer scenarios (their worker threads).
pub fn clients_name(w: &Workload) -> &'static str {
    match w.kind {
        WorkloadKind::Pgbench { .. } => "clients",
        WorkloadKind::Buffers { .. } => "workers",
    }
}

fn run_pgbench(
    plan: &Plan,
    builtin: &str,
    variant: &Variant,
    clients: usize,
    run: usize,
) -> Result<Point, PointError> {
    let (mut run_cfg, _) = plan.run_config(variant, clients)?;
    if let Some(s) = &plan.simulation {
        // The machine's storage flushes the WAL, unless the caller's own --set chose a sink.
        let own_flush = plan.set.iter().any(|a| key_of(a) == "wal.flush");
        (s.engine_defaults)(&mut run_cfg, !own_flush);
    }
    let is_this = |c: &&crate::experiments::Calibrated| {
        plan.experiment
            .workload(c.workload)
            .is_some_and(|w| matches!(w.kind, WorkloadKind::Pgbench { builtin: b } if b == builtin))
    };
    if let Some(c) = plan.calibrated.iter().find(is_this) {
        settings::KNOBS.set(&mut run_cfg, POSTGRES_IPC_KEY, &format!("{}", c.postgres_ipc))?;
    }
    let RunConfig { engine, sim } = run_cfg;
    let cfg = PgbenchConfig {
        scale: plan.scale,
        fillfactor: 100,
        clients,
        threads: clients,
        duration: Some(Duration::from_secs_f64(plan.duration_s)),
        transactions: None,
        scripts: vec![Builtin::find(builtin)?.script()],
        progress: None,
        seed: plan.seed.wrapping_add(run as u64),
        wait_sampling_hz: 0,
        engine,
        sim,
        protocol: plan.experiment.protocol,
    };
    let r = runner::run(&cfg, &|_| {})?;
    let counters = crate::report::counters_by_name(&r.lock_stack.counters);
    let bad = r.checks.iter().find(|c| !c.ok);
    Ok(Point {
        workload: String::new(),
        variant: variant.name.into(),
        clients,
        run,
        ops: r.transactions,
        failed: r.failed,
        elapsed_s: r.elapsed_s,
        load_s: r.load_s,
        throughput: r.transactions as f64 / r.elapsed_s.max(1e-9),
        counters,
        ok: bad.is_none(),
        error: bad.map(|c| format!("{} ({})", c.name, c.detail)),
        time: None,
    })
}

fn run_buffers(
    plan: &Plan,
    scenario: BufferScenario,
    variant: &Variant,
    clients: usize,
    run: usize,
) -> Result<Point, PointError> {
    let (mut run_cfg, _) = plan.run_config(variant, clients)?;
    if let Some(s) = &plan.simulation {
        (s.engine_defaults)(&mut run_cfg, false);
    }
    run_cfg.engine.apply_spin_settings();
    let cfg = plan.buffers_config(scenario, variant, clients)?;
    let rep = buffers::run(&cfg)?;
    let row = rep.rows.into_iter().next().ok_or(PointError::NoBufferRow)?;
    let b = &row.buffers;
    let mut counters = BTreeMap::new();
    b.visit(&mut |n, v| {
        counters.insert(format!("buffers.{n}"), v);
    });
    let l = &row.lwlocks;
    for (k, v) in [
        ("lwlock.BufferMapping.acquisitions", l.mapping_acquire),
        ("lwlock.BufferMapping.block", l.mapping_block),
        ("lwlock.BufferContent.acquisitions", l.content_acquire),
        ("lwlock.BufferContent.block", l.content_block),
        ("lwlock.BufFreelist.acquisitions", l.freelist_acquire),
    ] {
        counters.insert(k.into(), v);
    }
    let elapsed_s =
        if row.ops > 0 && row.ops_per_sec > 0.0 { row.ops as f64 / row.ops_per_sec } else { plan.duration_s };
    Ok(Point {
        workload: String::new(),
        variant: variant.name.into(),
        clients,
        run,
        ops: row.ops,
        failed: 0,
        elapsed_s,
        load_s: 0.0,
        throughput: row.ops_per_sec,
        counters,
        ok: row.invariant_ok,
        error: row.error,
        time: None,
    })
}

/// The median of `v` (mean of the middle two for an even length); 0 for an empty slice.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// Summarises `points` per (workload, variant, clients) in plan order.
pub fn summarise(plan: &Plan, points: &[Point]) -> Vec<SummaryRow> {
    let e = plan.experiment;
    let mut rows = Vec::new();
    for w in &plan.workloads {
        for &c in &plan.clients {
            let mut base_median = None;
            for v in e.variants {
                let pts: Vec<&Point> = points
                    .iter()
                    .filter(|p| p.workload == w.name && p.variant == v.name && p.clients == c)
                    .collect();
                if pts.is_empty() {
                    continue;
                }
                let tp: Vec<f64> = pts.iter().map(|p| p.throughput).collect();
                let med = median(&tp);
                let gain_pct = match base_median {
                    None => {
                        base_median = Some(med);
                        None
                    }
                    Some(b) if b > 0.0 => Some((med / b - 1.0) * 100.0),
                    Some(_) => None,
                };
                let counters = e
                    .counters
                    .iter()
                    .map(|k| median(&pts.iter().map(|p| p.normalised(k)).collect::<Vec<_>>()))
                    .collect();
                rows.push(SummaryRow {
                    workload: w.name.into(),
                    variant: v.name.into(),
                    clients: c,
                    runs: pts.len(),
                    min: tp.iter().copied().fold(f64::INFINITY, f64::min),
                    median: med,
                    max: tp.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    gain_pct,
                    counters,
                });
            }
        }
    }
    rows
}

/// Measures one point of `plan` on a fresh engine (pgbench workloads) or buffer pool
/// (`vm-pin`), on a thread of its own.
///
/// The thread matters under `--machine`: the simulated machine maps every address to a
/// 64-byte line, so which stack variables share a line is part of its input. The main
/// thread's stack starts below the process's arguments and environment, so its layout (and a
/// simulated point's figures) would shift with their length; a spawned thread's stack is a
/// fresh mapping, the same in every process, so a point measured by `--point K` in a child
/// process equals the same point measured in a single-process sweep.
///
/// # Errors
/// A configuration the engine or buffer pool refuses, or an engine error other than a failed
/// transaction (those are counted in [`Point::failed`]). A failed consistency check is not an
/// error: it marks the point (`ok = false`).
pub fn run_point(plan: &Plan, spec: &PointSpec) -> Result<Point, PointError> {
    let simulation = plan.simulation.as_ref();
    let phases_seen = simulation.map_or(0, |s| (s.phase_times)().len());
    let measure = || {
        let (v, clients, run) = (spec.variant, spec.clients, spec.run);
        // Simulated, run `r` samples the layout shifted by `r` more (kept until the point ends).
        let _pad = simulation
            .map(|s| crate::layout::pad((s.layout_shift + run).min(crate::layout::MAX_SHIFT)))
            .unwrap_or_default();
        let mut p = match spec.workload.kind {
            WorkloadKind::Pgbench { builtin } => run_pgbench(plan, builtin, v, clients, run)?,
            WorkloadKind::Buffers { scenario } => run_buffers(plan, scenario, v, clients, run)?,
        };
        p.workload = spec.workload.name.into();
        Ok::<Point, PointError>(p)
    };
    let mut p: Point = lockstack_common::sync::thread::scope(|s| match s.spawn(measure).join() {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    })?;
    if let Some(s) = simulation {
        p.time = phase_split(&(s.phase_times)(), phases_seen);
    }
    Ok(p)
}

/// The time split of the phases `times` lists past the first `seen`, summed (`None` when the
/// point ran no simulated phase).
fn phase_split(times: &[TimeSplit], seen: usize) -> Option<TimeSplit> {
    let new = times.get(seen..).filter(|t| !t.is_empty())?;
    let mut sum = TimeSplit::default();
    for t in new {
        sum.add(t);
    }
    Some(sum)
}

/// Builds the result of `plan` from its measured `points` (in plan order, one per
/// [`Plan::point_specs`] entry) and the machine note of the run: the summary, the counter
/// labels and the variants' assignment lists. [`run`] and the merge of per-point files
/// ([`super::points::merge`]) both end here, so their results cannot differ.
pub fn assemble(plan: &Plan, points: Vec<Point>, machine: MachineNote) -> ExperimentResult {
    let e = plan.experiment;
    let counter_labels = e
        .counters
        .iter()
        .map(|c| {
            let op = plan.workloads.first().map_or("op", |w| op_name(w));
            format!("{}{}", c.label, c.per.suffix(op))
        })
        .collect();
    let summary = summarise(plan, &points);
    let calibrated_to = (!plan.calibrated.is_empty())
        .then(|| plan.calibrated.iter().map(|c| c.line()).collect::<Vec<_>>().join("; "));
    ExperimentResult {
        usl: fit_usl(plan, &summary),
        summary,
        counter_labels,
        variant_sets: e.variants.iter().map(|v| (v.name.to_string(), plan.assignments(v))).collect(),
        machine,
        simulated: plan.simulation.as_ref().map(|s| s.machine.clone()),
        calibrated_to,
        plan: plan.clone(),
        points,
        sensitivity: None,
        measured: Vec::new(),
    }
}

/// Runs every point of `plan` in this process ([`run_point`] for each of
/// [`Plan::point_specs`], then [`assemble`] with this host's [`MachineNote`] at the largest
/// client count), calling `on_step` before and after each.
///
/// # Errors
/// As [`run_point`]; the first error ends the run.
pub fn run(plan: &Plan, on_step: &mut dyn FnMut(&Step<'_>)) -> Result<ExperimentResult, PointError> {
    let specs = plan.point_specs();
    let total = specs.len();
    let mut points = Vec::with_capacity(total);
    for spec in &specs {
        let mut step = Step {
            done: points.len(),
            total,
            workload: spec.workload.name,
            variant: spec.variant.name,
            clients: spec.clients,
            run: spec.run,
            finished: None,
        };
        on_step(&step);
        let p = run_point(plan, spec)?;
        step.done += 1;
        step.finished = Some(&p);
        on_step(&step);
        points.push(p);
    }
    let threads = plan.clients.iter().copied().max().unwrap_or(1);
    let machine = match &plan.simulation {
        Some(s) => {
            let hw = s.machine.hw_threads as usize;
            MachineNote { cores: hw, threads, oversubscribed: threads > hw }
        }
        None => MachineNote::for_threads(threads),
    };
    Ok(assemble(plan, points, machine))
}
