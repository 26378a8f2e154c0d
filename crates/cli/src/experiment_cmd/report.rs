//! What `experiment` prints: `list`, `show NAME`, `NAME --help`, the seed-style tables of a
//! result (throughput, counters, USL fits, the seed's figures). Locks: none.

use super::*;

/// `experiment NAME --help`: what the experiment reruns (the thread it comes from, its
/// workloads, variants and defaults), printed before clap's help for the options. Called by
/// `main` when clap stops at `--help` after `experiment`; `args` are the arguments after
/// `experiment`, and the first that names an experiment is the one described (none: nothing
/// is printed).
pub(crate) fn print_experiment_help(args: &[String]) {
    let Some(e) = args.iter().find_map(|a| experiments::find(a).ok()) else { return };
    outln!("experiment {}: {}", e.name, e.title);
    outln!("thread:   \"{}\"", e.thread.title);
    outln!("authors:  {}", e.thread.authors);
    outln!("date:     {}", e.thread.date);
    outln!("seed:     {} (the thread's figures, transcribed: docs/experiments.md)", e.seed);
    let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
    outln!("workloads: {}", workloads.join(", "));
    outln!("variants (baseline first):");
    for v in e.variants {
        outln!("  {:<20} {}", v.name, v.about);
    }
    let clients: Vec<String> = e.clients.iter().map(usize::to_string).collect();
    outln!(
        "defaults: preset {}, clients {}, {} run(s) x {} s per point",
        e.preset,
        clients.join(","),
        e.runs,
        e.duration_s
    );
    outln!();
}

/// `experiment show NAME`: the seed thread, its machines and published points (each with the
/// series it comes from), the stored calibrations (crates/workloads/calibrations.toml), and the
/// commands that reproduce each figure.
///
/// # Errors
/// No NAME, or an unknown one: one line listing the valid names, exit code 1.
pub(super) fn show(args: &ExperimentArgs) -> Result<(), Failure> {
    let names: Vec<&str> = experiments::all().iter().map(|e| e.name).collect();
    let Some(name) = args.dir.as_ref().map(|d| d.to_string_lossy().into_owned()) else {
        return Err(Failure::input(format!("experiment show needs NAME (valid: {})", names.join(", "))));
    };
    let e = experiments::find(&name).map_err(Failure::input)?;
    for line in show_text(e) {
        outln!("{line}");
    }
    Ok(())
}

/// The lines `experiment show` prints for `e`.
pub(super) fn show_text(e: &Experiment) -> Vec<String> {
    let mut out = Vec::new();
    let tps = |v: f64| format!("{v:.0}");
    out.push(format!("experiment {}: {}", e.name, e.title));
    out.push(format!("thread:   \"{}\"", e.thread.title));
    out.push(format!("authors:  {}", e.thread.authors));
    out.push(format!("date:     {}", e.thread.date));
    out.push(format!("seed:     {} (the thread's figures, transcribed: docs/experiments.md)", e.seed));
    out.push(format!("context:  {}", e.published_context));
    let variants: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
    let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
    out.push(format!(
        "variants: {} (baseline first); workloads: {}",
        variants.join(", "),
        workloads.join(", ")
    ));
    out.push(String::new());
    out.push("machines (simulated profiles the thread's figures come from):".to_string());
    if e.machines.is_empty() {
        out.push("  none: the thread gives no machine a profile stands for".to_string());
    }
    for m in e.machines {
        let clients: Vec<String> = m.clients.iter().map(usize::to_string).collect();
        let series = if m.series.is_empty() {
            "none (the thread's notes only)".to_string()
        } else {
            m.series.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
        };
        out.push(format!(
            "  {}: series {series}; clients {}; {} virtual s per point, scale {}",
            m.profile,
            clients.join(","),
            m.duration_s,
            m.scale
        ));
    }
    out.push(String::new());
    out.push(format!(
        "published points ({}; source: the thread above, series as it names them):",
        e.published.len()
    ));
    if e.published.is_empty() {
        out.push("  none: the thread gives no throughput figures".to_string());
    }
    let mut series: Vec<&str> = Vec::new();
    for p in e.published {
        if !series.contains(&p.series) {
            series.push(p.series);
        }
    }
    for sr in series {
        let machine = e.machines.iter().find(|m| m.series.contains(&sr)).map_or("no profile", |m| m.profile);
        out.push(format!("  {sr} (on {machine}):"));
        for p in e.published.iter().filter(|p| p.series == sr) {
            let range = match (p.low, p.high) {
                (Some(l), Some(h)) => format!(" (runs {}..{})", tps(l), tps(h)),
                _ => String::new(),
            };
            out.push(format!(
                "    {:<14} {:<20} {:>4} clients  {:>9} tps{range}",
                p.workload,
                p.variant,
                p.clients,
                tps(p.tps)
            ));
        }
    }
    for n in e.published_notes {
        out.push(format!("  note: {n}"));
    }
    out.push(String::new());
    out.push("stored calibrations (crates/workloads/calibrations.toml; --costs postgres):".to_string());
    let cals: Vec<&experiments::Calibrated> = e.calibrations().collect();
    if cals.is_empty() {
        out.push("  none: every simulated point is predicted from the profile's postgres_ipc".to_string());
    }
    for c in cals {
        out.push(format!("  {}", c.line()));
    }
    let home = experiments::user_dir::dir()
        .map(|d| d.join(experiments::user_dir::CALIBRATIONS).display().to_string())
        .unwrap_or_else(|e| e.to_string());
    match e.user_calibrations() {
        Ok(cals) if cals.is_empty() => out.push(format!("your calibrations ({home}): none")),
        Ok(cals) => {
            out.push(format!("your calibrations ({home}; used before the built-in ones):"));
            for c in cals {
                out.push(format!("  {}", c.line()));
            }
        }
        Err(err) => out.push(format!("your calibrations: {err}")),
    }
    out.push(String::new());
    out.push("to reproduce (each command writes its figures to its --out):".to_string());
    let mut step = |what: String, command: String| {
        out.push(format!("  {what}:"));
        out.push(format!("    {command}"));
    };
    let name = e.name;
    step(
        format!("on this host: {name}.svg, {name}.csv and the tables"),
        format!("lockstack experiment {name} --out out/experiments/{name}"),
    );
    for m in e.machines {
        let p = m.profile;
        step(
            format!(
                "on the simulated {p}: {name}.svg, {name}-time.svg and the tables (what `just validation` runs)"
            ),
            format!("lockstack experiment {name} --machine {p} --jobs 2 --out out/validation/{name}-{p}"),
        );
        if e.calibrations().any(|c| c.machine == p) {
            step(
                format!("the stored calibration on {p} (refits it and stores it in your calibrations)"),
                format!("lockstack experiment {name} --machine {p} --calibrate"),
            );
        }
    }
    step(
        "your own figures next to the curves (a CSV of variant,clients,tps[,machine,workload])".to_string(),
        format!("lockstack experiment {name} --measured mine.csv --out out/experiments/{name}"),
    );
    step(
        "a calibration to your own baseline figure, on your profile (`lockstack machine new mybox`)"
            .to_string(),
        format!("lockstack experiment {name} --machine mybox --calibrate --measured mine.csv"),
    );
    if !e.machines.is_empty() {
        step(
            "docs/sim-validation.md, from every seed's sweep in out/validation".to_string(),
            "lockstack experiment validation out/validation".to_string(),
        );
    }
    out
}

pub(super) fn print_knobs() {
    outln!("--set crate.knob=value overrides (applied to every variant, after the experiment's own list):");
    for k in settings::knobs() {
        let only = if k.key == VM_CHECK_KEY { " (vm-pin only; its variants set it)" } else { "" };
        outln!("  {:<36} {:<42} {}{only}", k.key, k.values, k.doc);
    }
}

pub(super) fn print_list() {
    outln!(
        "{:<13} {:<26} {:>6} {:>10}  what (variants; workloads)",
        "experiment",
        "seed",
        "points",
        "measure s"
    );
    for e in experiments::all() {
        let variants: Vec<&str> = e.variants.iter().map(|v| v.name).collect();
        let workloads: Vec<&str> = e.workloads.iter().map(|w| w.name).collect();
        outln!(
            "{:<13} {:<26} {:>6} {:>10.1}  {} ({}; {})",
            e.name,
            e.seed,
            e.default_points(),
            e.default_points() as f64 * e.duration_s,
            e.title,
            variants.join(" vs "),
            workloads.join(", ")
        );
    }
    outln!("defaults: the clients, seconds per point and runs of each experiment (`--help` for overrides).");
}

/// A counter value with a precision that suits its size.
pub(super) fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.1e}")
    }
}

/// Prints rows of cells as a table with right-aligned columns (the first left-aligned), the
/// header underlined.
pub(super) fn print_table(header: &[String], rows: &[Vec<String>]) {
    let n = header.len();
    let width: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter().map(|r| r.get(i).map_or(0, String::len)).chain([header[i].len()]).max().unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(
                |(i, c)| {
                    if i == 0 { format!("{c:<w$}", w = width[i]) } else { format!("{c:>w$}", w = width[i]) }
                },
            )
            .collect();
        outln!("  {}", parts.join(" | "));
    };
    line(header);
    outln!("  {}", width.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-+-"));
    for r in rows {
        line(r);
    }
}

pub(super) fn tps_cell(median: f64, min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(lo), Some(hi)) if lo < hi => format!("{median:.0} [{lo:.0}..{hi:.0}]"),
        _ => format!("{median:.0}"),
    }
}

pub(super) fn gain_cell(g: Option<f64>) -> String {
    g.map_or("-".into(), |g| format!("{g:+.1}%"))
}

pub(super) fn print_report(r: &ExperimentResult, wall_s: f64) {
    let plan = &r.plan;
    let e: &Experiment = plan.experiment;
    outln!("experiment {}: {}", e.name, e.title);
    outln!("thread: {} (seed {}; its figures: docs/experiments.md)", e.thread.line(), e.seed);
    let clients: Vec<String> = plan.clients.iter().map(usize::to_string).collect();
    outln!(
        "preset {}, scale {}, clients {}, {} run(s) x {:.2} s per point, {} points in {:.1} s",
        plan.preset,
        plan.scale,
        clients.join(","),
        plan.runs,
        plan.duration_s,
        r.points.len(),
        wall_s
    );
    if let Some(m) = &plan.machine {
        if plan.calibrated.is_empty() {
            outln!(
                "simulated on {m}, not calibrated (PostgreSQL's costs at the profile's postgres_ipc, or --costs own): every point is predicted"
            );
        }
        for c in &plan.calibrated {
            outln!("calibrated to: {}", c.line());
        }
        if !plan.calibrated.is_empty() {
            let lines: Vec<String> =
                plan.calibrated.iter().map(|c| format!("calibrated to: {}", c.line())).collect();
            crate::sim_cmd::note_calibration(lines.join("; "));
        }
    }
    outln!("variants (assignments applied after the preset, in order; the first is the baseline):");
    let wname = e.variants.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for (v, (_, set)) in e.variants.iter().zip(&r.variant_sets) {
        outln!("  {:<wname$}  {}", v.name, set.join(" "));
        outln!("  {:<wname$}  {}", "", v.about);
    }
    let base = e.baseline().name;
    for w in &plan.workloads {
        outln!();
        outln!(
            "{} ({}): {}, median [min..max] of {} run(s); gain % = median vs {base}",
            w.name,
            w.about,
            w.unit,
            plan.runs
        );
        let mut header = vec![driver::clients_name(w).to_string(), base.to_string()];
        for v in &e.variants[1..] {
            header.push(v.name.to_string());
            header.push("gain %".into());
        }
        let fitted = plan.calibrated.iter().find(|k| k.workload == w.name).map(|k| k.clients as usize);
        let mut rows = Vec::new();
        for &c in &plan.clients {
            // The baseline's cell at the calibrated client count is the one fitted point.
            let mut row = vec![if fitted == Some(c) { format!("{c} (fitted)") } else { c.to_string() }];
            for (i, v) in e.variants.iter().enumerate() {
                match r.row(w.name, v.name, c) {
                    Some(s) => {
                        row.push(tps_cell(s.median, Some(s.min), Some(s.max)));
                        if i > 0 {
                            row.push(gain_cell(s.gain_pct));
                        }
                    }
                    None => row.extend(std::iter::repeat_n("-".to_string(), if i > 0 { 2 } else { 1 })),
                }
            }
            rows.push(row);
        }
        print_table(&header, &rows);
        if let Some(c) = fitted {
            outln!(
                "(fitted): {base} at {c} client{} is the point sim.postgres_ipc was fitted to; every other cell is predicted",
                if c == 1 { "" } else { "s" }
            );
        }

        outln!();
        outln!("{}: key counters per variant (median of runs)", w.name);
        let op = driver::op_name(w);
        let mut header = vec!["variant".to_string(), driver::clients_name(w).to_string()];
        header.extend(e.counters.iter().map(|c| format!("{}{}", c.label, c.per.suffix(op))));
        let mut rows = Vec::new();
        for v in e.variants {
            for &c in &plan.clients {
                if let Some(s) = r.row(w.name, v.name, c) {
                    let mut row = vec![v.name.to_string(), c.to_string()];
                    row.extend(s.counters.iter().map(|x| num(*x)));
                    rows.push(row);
                }
            }
        }
        print_table(&header, &rows);
    }
    print_usl(r);
    print_published(r);
    outln!();
    outln!("{}", r.machine.line());
    if r.simulated.is_some() {
        outln!("machine: {}", output::machine_title(r));
    }
    if let Some(c) = &r.calibrated_to {
        outln!("calibrated to: {c}");
    }
}

/// The Universal Scalability Law fits (Gunther, "Guerrilla Capacity Planning", 2007).
pub(super) fn print_usl(r: &ExperimentResult) {
    outln!();
    outln!(
        "USL fit per curve, X(N) = lambda N / (1 + alpha (N-1) + beta N (N-1)), least squares on the medians \
         (Gunther, \"Guerrilla Capacity Planning\", 2007); N* = sqrt((1-alpha)/beta), the peak:"
    );
    let header: Vec<String> =
        ["workload", "variant", "lambda", "alpha", "beta", "N*", "X(N*)", "R^2"].map(String::from).to_vec();
    let rows: Vec<Vec<String>> = r
        .usl
        .iter()
        .map(|u| {
            let mut row = vec![u.workload.clone(), u.variant.clone()];
            match (&u.fit, &u.no_fit) {
                (Some(f), _) => row.extend([
                    format!("{:.0}", f.lambda),
                    format!("{:.4}", f.alpha),
                    format!("{:.2e}", f.beta),
                    f.peak_clients.map_or("none".into(), |n| format!("{n:.1}")),
                    f.peak_throughput.map_or("-".into(), |x| format!("{x:.0}")),
                    format!("{:.3}", f.r_squared),
                ]),
                (None, reason) => {
                    row.push(reason.clone().unwrap_or_else(|| "no fit".into()));
                    row.extend(std::iter::repeat_n(String::new(), 5));
                }
            }
            row
        })
        .collect();
    print_table(&header, &rows);
}

pub(super) fn print_published(r: &ExperimentResult) {
    let plan = &r.plan;
    let e = plan.experiment;
    let published: Vec<_> =
        r.published().into_iter().filter(|p| plan.workloads.iter().any(|w| w.name == p.workload)).collect();
    outln!();
    outln!("the seed's published figures ({}): {}", e.seed, e.published_context);
    if !r.measured.is_empty() {
        outln!("  with your own (--measured), in the series that say \"measured\"");
    }
    if published.is_empty() && e.published_notes.is_empty() {
        outln!("  (none for these workloads)");
    }
    if !published.is_empty() {
        let variants: Vec<&str> =
            e.variants.iter().map(|v| v.name).filter(|n| published.iter().any(|p| p.variant == *n)).collect();
        let base = e.baseline().name;
        let mut header = vec!["workload".to_string(), "series".to_string(), "clients".to_string()];
        for v in &variants {
            header.push(format!("{v} tps"));
            if *v != base {
                header.push("gain %".into());
            }
        }
        let mut keys: Vec<(&str, &str, u32)> = Vec::new();
        for p in &published {
            let k = (p.workload, p.series, p.clients);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let mut rows = Vec::new();
        for (w, s, c) in keys {
            let find = |v: &str| {
                published
                    .iter()
                    .find(|p| p.workload == w && p.series == s && p.clients == c && p.variant == v)
            };
            let base_tps = find(base).map(|p| p.tps);
            let mut row = vec![w.to_string(), s.to_string(), c.to_string()];
            for v in &variants {
                let p = find(v);
                row.push(p.map_or("-".into(), |p| tps_cell(p.tps, p.low, p.high)));
                if *v != base {
                    let g = match (p, base_tps) {
                        (Some(p), Some(b)) if b > 0.0 => Some((p.tps / b - 1.0) * 100.0),
                        _ => None,
                    };
                    row.push(gain_cell(g));
                }
            }
            rows.push(row);
        }
        print_table(&header, &rows);
    }
    for n in e.published_notes {
        outln!("  * {n}");
    }
}
