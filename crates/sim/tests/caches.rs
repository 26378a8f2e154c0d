//! Capacity-limited caches: a working set that fits the private cache hits on re-read, one that
//! does not misses to the LLC, one larger than the LLC misses to memory; an LLC eviction takes
//! the line from the private caches (inclusion); without capacity nothing is evicted; large
//! caches leave the coherence model's figures as they were; bad sizes are refused.

mod common;

use std::panic::Location;
use std::sync::Arc;

use common::{Padded, exact, fetch_add, load, profile};
use lockstack_sim::{Access, MachineProfile, SimReport, StructureMisses, TaskId, task};

/// [`profile`] with a `[caches]` table: `private_kib` (8 ways) per core, `llc_kib` (16 ways)
/// per socket, LLC hit 20 ns.
fn with_caches(sockets: u32, cores: u32, private_kib: u32, llc_kib: u32) -> MachineProfile {
    let base = profile(sockets, cores, 1, 1e9);
    let text = format!(
        "{}\n[caches]\nprivate_kib = {private_kib}\nprivate_ways = 8\nllc_kib = {llc_kib}\nllc_ways = 16\nllc_hit_ns = 20.0\n",
        base.to_toml()
    );
    MachineProfile::from_toml(&text, "test caches").expect("profile with caches")
}

/// Reads every line of a buffer of `lines` 64-byte lines (named `buf <i>`) `passes` times, in
/// order, on one core; returns the misses of the structure `buf #`.
fn sweep(p: MachineProfile, caches: bool, lines: usize, passes: usize) -> (SimReport, StructureMisses) {
    let sim = exact(p);
    sim.set_caches(caches);
    let report = sim
        .run(move || {
            let buf: Vec<Padded> = (0..lines).map(|_| Padded::default()).collect();
            for (i, b) in buf.iter().enumerate() {
                task::name_line(&b.0 as *const _ as usize, &format!("buf {i}"));
            }
            for _ in 0..passes {
                for b in &buf {
                    task::touch(&b.0 as *const _ as usize, 8, Access::Read, Location::caller());
                }
            }
        })
        .expect("run");
    let m = report.stats.misses_by_structure.get("buf #").cloned().unwrap_or_default();
    (report, m)
}

#[test]
fn a_working_set_that_fits_the_private_cache_hits_on_reread() {
    // 4 KiB private cache: 64 lines. 32 lines fit: the only misses are the first touches.
    let (r, m) = sweep(with_caches(1, 2, 4, 64), true, 32, 3);
    assert_eq!((m.lines, m.accesses), (32, 96));
    assert_eq!((m.memory_fills, m.refills, m.llc_fills, m.transfers), (32, 0, 0, 0));
    let c = r.stats.caches.expect("caches on");
    assert_eq!((c.private_evictions, c.llc_evictions), (0, 0));
}

#[test]
fn a_working_set_larger_than_the_private_cache_misses_to_the_llc_on_every_reread() {
    // 128 lines in a 64-line LRU cache, read in order: every re-read misses (LRU's worst case);
    // the 64 KiB LLC (1024 lines) holds them all.
    let (r, m) = sweep(with_caches(1, 2, 4, 64), true, 128, 3);
    assert_eq!(m.memory_fills, 128, "first touches only");
    assert_eq!(m.llc_fills, 256, "two re-reads of 128 lines, all from the LLC");
    assert_eq!((m.refills, m.transfers), (0, 0));
    let c = r.stats.caches.expect("caches on");
    assert_eq!(c.private_evictions, 128 * 3 - 64);
    assert_eq!(c.llc_evictions, 0);
}

#[test]
fn a_working_set_larger_than_the_llc_refills_from_memory() {
    // 2048 lines against a 1024-line LLC: every re-read is a refill from memory.
    let (r, m) = sweep(with_caches(1, 2, 4, 64), true, 2048, 2);
    assert_eq!(m.memory_fills, 4096);
    assert_eq!(m.refills, 2048);
    assert_eq!(m.llc_fills, 0);
    assert!(r.stats.caches.unwrap().llc_evictions >= 2048);
}

#[test]
fn without_capacity_nothing_is_evicted() {
    let (r, m) = sweep(with_caches(1, 2, 4, 64), false, 2048, 2);
    assert_eq!((m.memory_fills, m.refills, m.llc_fills), (2048, 0, 0));
    assert!(r.stats.caches.is_none());
    // A profile without `[caches]` is the same model.
    let (r2, m2) = sweep(profile(1, 2, 1, 1e9), true, 2048, 2);
    assert_eq!(m, m2);
    assert_eq!(r.stats.virtual_ns, r2.stats.virtual_ns);
}

#[test]
fn an_llc_eviction_takes_the_line_from_the_private_caches() {
    // The main task reads X; a task on the other core of the socket streams twice the LLC
    // through its own cache; X, never evicted from main's private cache, is gone from it too.
    let sim = exact(with_caches(1, 2, 4, 64));
    let report = sim
        .run(|| {
            let x = Arc::new(Padded::default());
            task::name_line(&x.0 as *const _ as usize, "X");
            load(&x.0);
            let h: TaskId = task::spawn(
                "streamer",
                Box::new(|| {
                    let buf: Vec<Padded> = (0..2048).map(|_| Padded::default()).collect();
                    for b in &buf {
                        task::touch(&b.0 as *const _ as usize, 8, Access::Read, Location::caller());
                    }
                }),
            );
            task::join(h).expect("streamer");
            load(&x.0);
        })
        .expect("run");
    let x = &report.stats.misses_by_structure["X"];
    assert_eq!((x.accesses, x.memory_fills, x.refills), (2, 2, 1), "{x:?}");
    assert!(report.stats.caches.unwrap().back_invalidations >= 1);
}

/// 8 cores each add to one shared counter and to their own padded counter, and read a shared
/// line: the figures with caches far larger than the working set equal those without capacity.
#[test]
fn large_caches_leave_the_coherence_model_as_it_was() {
    let run = |p: MachineProfile, caches: bool| {
        let sim = exact(p);
        sim.set_caches(caches);
        sim.run(|| {
            let shared = Arc::new(Padded::default());
            let own: Arc<Vec<Padded>> = Arc::new((0..8).map(|_| Padded::default()).collect());
            let hs: Vec<TaskId> = (0..8)
                .map(|i| {
                    let (shared, own) = (Arc::clone(&shared), Arc::clone(&own));
                    task::spawn(
                        "w",
                        Box::new(move || {
                            for _ in 0..50 {
                                fetch_add(&shared.0);
                                fetch_add(&own[i].0);
                                load(&shared.0);
                            }
                        }),
                    )
                })
                .collect();
            for h in hs {
                task::join(h).unwrap();
            }
        })
        .expect("run")
    };
    let on = run(with_caches(2, 4, 1024, 16384), true);
    let off = run(with_caches(2, 4, 1024, 16384), false);
    assert!(on.stats.caches.is_some() && off.stats.caches.is_none());
    assert_eq!(on.stats.virtual_ns, off.stats.virtual_ns);
    assert_eq!(on.stats.transfers, off.stats.transfers);
    assert_eq!(on.stats.misses_by_structure, off.stats.misses_by_structure);
    let c = on.stats.caches.unwrap();
    assert_eq!((c.private_evictions, c.llc_evictions), (0, 0));
}

#[test]
fn runs_with_caches_repeat_byte_for_byte() {
    let a = sweep(with_caches(2, 2, 4, 64), true, 300, 3).0;
    let b = sweep(with_caches(2, 2, 4, 64), true, 300, 3).0;
    assert_eq!(serde_json::to_string(&a.stats).unwrap(), serde_json::to_string(&b.stats).unwrap());
}

#[test]
fn bad_cache_sizes_are_refused() {
    let base = profile(1, 4, 1, 1e9).to_toml();
    let bad = |caches: &str| {
        MachineProfile::from_toml(&format!("{base}\n[caches]\n{caches}"), "x").unwrap_err().to_string()
    };
    let e = bad("private_kib = 256\nprivate_ways = 8\nllc_kib = 512\nllc_ways = 16\nllc_hit_ns = 20.0");
    assert!(e.contains("smaller than its 4 cores' private caches"), "{e}");
    let e = bad("private_kib = 4\nprivate_ways = 7\nllc_kib = 512\nllc_ways = 16\nllc_hit_ns = 20.0");
    assert!(e.contains("caches.private_ways 7 does not divide"), "{e}");
    let e = bad("private_kib = 0\nprivate_ways = 8\nllc_kib = 512\nllc_ways = 16\nllc_hit_ns = 20.0");
    assert!(e.contains("at least 1"), "{e}");
    let e = bad("private_kib = 4\nprivate_ways = 8\nllc_kib = 512\nllc_ways = 16\nllc_hit_ns = -1.0");
    assert!(e.contains("llc_hit_ns"), "{e}");
    let e = bad("private_kib = 4\nprivate_ways = 8\nllc_kib = 4194304\nllc_ways = 16\nllc_hit_ns = 1.0");
    assert!(e.contains("at most"), "{e}");
}

#[test]
fn the_seeds_profiles_cite_their_cache_sizes() {
    for name in ["xeon-32", "opteron-24"] {
        let p = MachineProfile::builtin(name).unwrap();
        assert!(p.caches.is_some(), "{name}");
        let text = MachineProfile::builtin_source(name).unwrap();
        for key in ["private_kib", "private_ways", "llc_kib", "llc_ways", "llc_hit_ns"] {
            let line = text.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{name}: {key}"));
            assert!(line.contains('#'), "{name}: uncommented figure: {line}");
        }
    }
}

#[test]
fn structures_are_names_without_their_numbers() {
    use lockstack_sim::structure_of;
    assert_eq!(structure_of("buffer 17 page +128"), "buffer # page +#");
    assert_eq!(structure_of("PgXact 0-4"), "PgXact #");
    assert_eq!(structure_of("PGPROC 12 xid + xmin"), "PGPROC # xid + xmin");
    assert_eq!(structure_of("ProcArrayLock"), "ProcArrayLock");
    assert_eq!(structure_of("line #42"), "unnamed");
}
