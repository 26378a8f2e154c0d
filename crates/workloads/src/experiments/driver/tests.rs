use super::*;
use crate::experiments::find;

fn opts() -> Options {
    Options { clients: Some(vec![2, 1]), duration_s: Some(0.03), runs: Some(2), ..Options::default() }
}

#[test]
fn bad_options_are_rejected_with_one_line() {
    let e = find("pgxact").unwrap();
    let cases: Vec<(Options, &str)> = vec![
        (Options { clients: Some(vec![]), ..opts() }, "--clients"),
        (Options { clients: Some(vec![0]), ..opts() }, "--clients"),
        (Options { duration_s: Some(-1.0), ..opts() }, "--duration"),
        (Options { duration_s: Some(f64::NAN), ..opts() }, "--duration"),
        (Options { runs: Some(0), ..opts() }, "--runs"),
        (Options { scale: Some(0), ..opts() }, "--scale"),
        (Options { preset: Some("pg10".into()), ..opts() }, "preset"),
        (Options { set: vec!["nosuch.knob=1".into()], ..opts() }, "nosuch.knob"),
        (Options { set: vec!["procarray.layout=dense".into()], ..opts() }, "varies"),
        (Options { set: vec!["vm.check=always-vm".into()], ..opts() }, "vm.check"),
        (Options { workloads: Some(vec!["nope".into()]), ..opts() }, "workload"),
    ];
    for (o, want) in cases {
        let err = Plan::new(e, &o).unwrap_err().to_string();
        assert!(err.contains(want) && !err.contains('\n'), "{want}: {err}");
    }
    let vm = find("vm-pin").unwrap();
    let err = Plan::new(vm, &Options { set: vec!["procarray.layout=dense".into()], ..opts() })
        .unwrap_err()
        .to_string();
    assert!(err.contains("bufmgr.header"), "{err}");
    assert!(Plan::new(vm, &Options { set: vec!["bufmgr.header=atomic".into()], ..opts() }).is_ok());
}

#[test]
fn plan_sorts_clients_and_applies_sets_in_order() {
    let e = find("flexlock").unwrap();
    let p = Plan::new(e, &Options { set: vec!["wal.synchronous_commit=off".into()], ..opts() }).unwrap();
    assert_eq!(p.clients, [1, 2]);
    // 2 runs x 2 workloads x 2 client counts x 3 variants.
    assert_eq!(p.points(), 2 * 2 * 2 * 3);
    let a = p.assignments(&e.variants[1]);
    assert_eq!(a.last().map(String::as_str), Some("procarray.end_xact=flexlock"));
    let (cfg, check) = p.config(&e.variants[1], 2).unwrap();
    assert!(check.is_none());
    // The caller's --set comes after the experiment's common list.
    assert!(!cfg.wal.synchronous_commit);
    assert_eq!(cfg.procarray.end_xact, lockstack_procarray::EndXactStrategy::FlexLock);
}

#[test]
fn median_and_summary() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    assert_eq!(median(&[]), 0.0);
    let e = find("vm-pin").unwrap();
    let plan = Plan::new(e, &Options { clients: Some(vec![1]), runs: Some(3), ..opts() }).unwrap();
    let mk = |w: &str, v: &str, run: usize, t: f64| Point {
        workload: w.into(),
        variant: v.into(),
        clients: 1,
        run,
        ops: 100,
        failed: 0,
        elapsed_s: 1.0,
        load_s: 0.0,
        throughput: t,
        counters: BTreeMap::from([("buffers.vm_pins".to_string(), 50 * (run as u64 + 1))]),
        ok: true,
        error: None,
        time: None,
    };
    let mut pts = Vec::new();
    for (i, t) in [100.0, 300.0, 200.0].into_iter().enumerate() {
        pts.push(mk("scan", "page-flag", i, t));
        pts.push(mk("scan", "always-vm", i, t * 0.9));
    }
    let rows = summarise(&plan, &pts);
    assert_eq!(rows.len(), 2, "two variants ran");
    assert_eq!((rows[0].min, rows[0].median, rows[0].max), (100.0, 200.0, 300.0));
    assert_eq!(rows[0].gain_pct, None);
    let g = rows[1].gain_pct.unwrap();
    assert!((g + 10.0).abs() < 1e-9, "{g}");
    // vm pins per op: 0.5, 1.0, 1.5 -> median 1.0.
    assert_eq!(rows[1].counters[0], 1.0);
}

#[test]
fn every_experiment_runs_a_tiny_plan() {
    for e in crate::experiments::all() {
        let plan = Plan::new(
            e,
            &Options { clients: Some(vec![2]), duration_s: Some(0.02), runs: Some(1), ..Options::default() },
        )
        .unwrap();
        let mut starts = 0;
        let mut ends = 0;
        let r = run(&plan, &mut |s| {
            if s.finished.is_some() {
                ends += 1;
                assert_eq!(s.done, ends);
            } else {
                starts += 1;
            }
            assert_eq!(s.total, plan.points());
        })
        .unwrap();
        assert_eq!((starts, ends), (plan.points(), plan.points()), "{}", e.name);
        assert_eq!(r.points.len(), plan.points());
        assert_eq!(r.summary.len(), plan.workloads.len() * e.variants.len());
        assert!(r.all_ok(), "{}: {:?}", e.name, r.points.iter().find(|p| !p.ok));
        // Every counter the catalog names is one the runs produce (LWLock tranches appear
        // only once used; `report`'s tests check that their paths name counters).
        for c in e.counters {
            let tranche = c.key.starts_with("lwlock.");
            assert!(
                tranche || r.points.iter().all(|p| p.counters.contains_key(c.key)),
                "{}: no raw counter {}",
                e.name,
                c.key
            );
        }
        for row in &r.summary {
            assert_eq!(row.counters.len(), e.counters.len());
            assert!(row.min <= row.median && row.median <= row.max);
        }
    }
}

lockstack_common::thread_local! {
    /// The fake simulation's phases: each call of `fake_phases` reports one phase more.
    static PHASES: std::cell::RefCell<Vec<TimeSplit>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A stand-in for the simulating CLI's bridge: every call finds one more phase (as if each
/// point ran exactly one measured phase), whose running time is its number.
fn fake_phases() -> Vec<TimeSplit> {
    PHASES.with(|p| {
        let mut p = p.borrow_mut();
        let k = p.len() as u64;
        p.push(TimeSplit {
            tasks: 2,
            running_ns: k,
            waits_ns: BTreeMap::from([("LockManager".to_string(), 10)]),
            ..TimeSplit::default()
        });
        p.clone()
    })
}

#[test]
fn each_point_takes_the_time_split_of_its_own_phases() {
    let e = find("vm-pin").unwrap();
    let sim = Simulation {
        machine: SimulatedMachine { profile: "test-machine".into(), cores: 4, hw_threads: 8 },
        phase_times: fake_phases,
        engine_defaults: |_, _| {},
        postgres_ipc: None,
        layout_shift: 0,
    };
    let o = Options { clients: Some(vec![1, 16]), runs: Some(1), simulation: Some(sim), ..opts() };
    let plan = Plan::new(e, &o).unwrap();
    let r = run(&plan, &mut |_| {}).unwrap();
    // Each point looks before and after it runs, and the fake adds a phase per look: point i
    // sees phases up to 2i before, and takes phase 2i + 1 only.
    for (i, p) in r.points.iter().enumerate() {
        let t = p.time.as_ref().unwrap();
        let k = 2 * i as u64 + 1;
        assert_eq!((t.tasks, t.running_ns, t.total_ns()), (2, k, k + 10), "{p:?}");
    }
    assert_eq!(r.simulated.as_ref().map(|m| m.profile.as_str()), Some("test-machine"));
    // The machine note counts the simulated hardware threads: 16 clients on 8 oversubscribe.
    assert_eq!((r.machine.cores, r.machine.oversubscribed), (8, true));
    // Natively no point has a split.
    let native = run(
        &Plan::new(e, &Options { clients: Some(vec![1]), runs: Some(1), ..opts() }).unwrap(),
        &mut |_| {},
    );
    assert!(native.unwrap().points.iter().all(|p| p.time.is_none()));
}
