//! The five seed experiments. Every published figure below is transcribed from the seed file the
//! experiment names (its [`Thread`] says which mailing-list thread); the seeds' machines, run lengths and scale
//! factors are in `published_context`. Defaults (clients, seconds, runs) are sized so that each
//! experiment finishes in under a minute on a 2-core machine; `docs/experiments.md` has the
//! figures we measured with them.

use super::{Counter, Experiment, Per, Published, SeedMachine, Thread, Variant, Workload, WorkloadKind};
use crate::micro::buffers::BufferScenario;
use crate::pgbench::runner::QueryMode;

const TPCB: Workload = Workload {
    name: "tpcb-like",
    about: "pgbench's default script (TPC-B sort of)",
    kind: WorkloadKind::Pgbench { builtin: "tpcb-like" },
    unit: "tps",
};
const SIMPLE_UPDATE: Workload = Workload {
    name: "simple-update",
    about: "pgbench -N (no teller/branch updates)",
    kind: WorkloadKind::Pgbench { builtin: "simple-update" },
    unit: "tps",
};
const SELECT_ONLY: Workload = Workload {
    name: "select-only",
    about: "pgbench -S (one primary-key look-up per transaction)",
    kind: WorkloadKind::Pgbench { builtin: "select-only" },
    unit: "tps",
};

const fn c(label: &'static str, key: &'static str, per: Per) -> Counter {
    Counter { label, key, per }
}

const fn p(
    workload: &'static str,
    series: &'static str,
    clients: u32,
    variant: &'static str,
    low: Option<f64>,
    tps: f64,
    high: Option<f64>,
) -> Published {
    Published { workload, series, clients, variant, low, tps, high }
}

const HAAS_S: &str = "Haas, 32 cores, -S";
const HAAS_W: &str = "Haas, 32 cores, write test";
const PAVAN_N: &str = "Deolasee, 32 cores, -N";
const PAVAN_B: &str = "Deolasee, 32 cores, default script";

/// Seed 000: moving the hot PGPROC fields into a dense PGXACT array (9.2), and computing
/// RecentGlobalXmin lazily.
const PGXACT: Experiment = Experiment {
    name: "pgxact",
    seed: "000_79bd89a301fe24a6.txt",
    thread: Thread {
        title: "Storing hot members of PGPROC out of the band",
        authors: "Pavan Deolasee (the patch, -N and default-script figures), Robert Haas (-S and write-test figures), Heikki Linnakangas (8-core box), with Simon Riggs, Bruce Momjian, Jim Nasby",
        date: "2011-11-03 to 2011-12-17",
    },
    title: "PGXACT (9.2): the hot PGPROC fields in a dense array, and the lazy RecentGlobalXmin patch",
    preset: "pg92",
    protocol: QueryMode::Simple,
    common: &["wal.synchronous_commit=off"],
    workloads: &[SIMPLE_UPDATE, SELECT_ONLY, TPCB],
    variants: &[
        Variant {
            name: "pgproc",
            about: "master before the patch: xid/xmin inside the fat PGPROC (9.1)",
            set: &["procarray.layout=pgproc", "procarray.global_xmin=every-snapshot"],
        },
        Variant {
            name: "pgxact",
            about: "pgxact-v2.patch: a dense PGXACT array (committed for 9.2)",
            set: &["procarray.layout=pgxact", "procarray.global_xmin=every-snapshot"],
        },
        Variant {
            name: "pgxact+rgx",
            about: "pgxact-v2 + recentglobalxmin.patch: horizon computed only when asked for",
            set: &["procarray.layout=pgxact", "procarray.global_xmin=lazy"],
        },
        Variant {
            name: "dense",
            about: "PostgreSQL 14's dense xid arrays with snapshot reuse",
            set: &["procarray.layout=dense", "procarray.snapshot_reuse=on"],
        },
    ],
    counters: &[
        c("snapshots", "procarray.get_snapshot_data", Per::Op),
        c("reused", "procarray.snapshots_reused", Per::Op),
        c("ProcArray sh", "lwlock.ProcArray.sh_acquire", Per::Op),
        c("ProcArray ex", "lwlock.ProcArray.ex_acquire", Per::Op),
        c("ProcArray blk", "lwlock.ProcArray.block", Per::KiloOp),
        c("ProcArray wait us", "lwlock.ProcArray.wait_ns", Per::UsPerOp),
        c("WALInsert blk", "lwlock.WALInsert.block", Per::KiloOp),
    ],
    clients: &[1, 2, 4],
    duration_s: 0.1,
    runs: 3,
    published_context: "scale 100, 5-minute runs; Haas: Nate Boley's 32-core box, 7 runs each \
        (low / median / high), the write test with synchronous_commit off on permanent tables (the \
        thread does not name its script; we compare it with tpcb-like); Deolasee: a 32-core IA \
        HP-UX box, one figure per point",
    published: &[
        p("simple-update", PAVAN_N, 1, "pgproc", None, 1098.488663, None),
        p("simple-update", PAVAN_N, 1, "pgxact", None, 1059.830369, None),
        p("simple-update", PAVAN_N, 4, "pgproc", None, 3569.481435, None),
        p("simple-update", PAVAN_N, 4, "pgxact", None, 3663.898254, None),
        p("simple-update", PAVAN_N, 32, "pgproc", None, 11627.059228, None),
        p("simple-update", PAVAN_N, 32, "pgxact", None, 16419.864056, None),
        p("simple-update", PAVAN_N, 48, "pgproc", None, 11044.501244, None),
        p("simple-update", PAVAN_N, 48, "pgxact", None, 15825.132582, None),
        p("simple-update", PAVAN_N, 64, "pgproc", None, 10432.206525, None),
        p("simple-update", PAVAN_N, 64, "pgxact", None, 15408.50304, None),
        p("simple-update", PAVAN_N, 80, "pgproc", None, 10210.57835, None),
        p("simple-update", PAVAN_N, 80, "pgxact", None, 15170.614435, None),
        p("select-only", HAAS_S, 1, "pgproc", Some(4312.806032), 4343.971972, Some(4395.870212)),
        p("select-only", HAAS_S, 1, "pgxact", Some(4391.273988), 4408.283875, Some(4448.315804)),
        p("select-only", HAAS_S, 1, "pgxact+rgx", Some(4328.697157), 4360.581749, Some(4399.763953)),
        p("select-only", HAAS_S, 8, "pgproc", Some(33295.56753), 33356.682726, Some(33639.368929)),
        p("select-only", HAAS_S, 8, "pgxact", Some(33719.004950), 33927.195872, Some(34106.679176)),
        p("select-only", HAAS_S, 8, "pgxact+rgx", Some(33565.708794), 33694.140297, Some(33795.072927)),
        p("select-only", HAAS_S, 32, "pgproc", Some(210514.460228), 213168.532917, Some(214169.174032)),
        p("select-only", HAAS_S, 32, "pgxact", Some(216230.082361), 221678.274469, Some(231465.732256)),
        p("select-only", HAAS_S, 32, "pgxact+rgx", Some(212202.985015), 219390.075074, Some(223353.421472)),
        p("select-only", HAAS_S, 80, "pgproc", Some(208139.915780), 209867.352113, Some(214868.151835)),
        p("select-only", HAAS_S, 80, "pgxact", Some(217003.716877), 218360.946541, Some(222095.321825)),
        p("select-only", HAAS_S, 80, "pgxact+rgx", Some(219390.617005), 220912.168056, Some(221779.348531)),
        p("tpcb-like", PAVAN_B, 1, "pgproc", None, 743.0, None),
        p("tpcb-like", PAVAN_B, 1, "pgxact", None, 771.0, None),
        p("tpcb-like", PAVAN_B, 4, "pgproc", None, 1821.0, None),
        p("tpcb-like", PAVAN_B, 4, "pgxact", None, 2315.0, None),
        p("tpcb-like", PAVAN_B, 32, "pgproc", None, 8011.0, None),
        p("tpcb-like", PAVAN_B, 32, "pgxact", None, 9166.0, None),
        p("tpcb-like", PAVAN_B, 48, "pgproc", None, 7282.0, None),
        p("tpcb-like", PAVAN_B, 48, "pgxact", None, 8959.0, None),
        p("tpcb-like", PAVAN_B, 64, "pgproc", None, 6742.0, None),
        p("tpcb-like", PAVAN_B, 64, "pgxact", None, 8937.0, None),
        p("tpcb-like", PAVAN_B, 80, "pgproc", None, 6316.0, None),
        p("tpcb-like", PAVAN_B, 80, "pgxact", None, 8664.0, None),
        p("tpcb-like", HAAS_W, 1, "pgproc", Some(625.502929), 628.442284, Some(677.451660)),
        p("tpcb-like", HAAS_W, 1, "pgxact", Some(636.755782), 640.083573, Some(645.273888)),
        p("tpcb-like", HAAS_W, 1, "pgxact+rgx", Some(633.320412), 636.898945, Some(637.886099)),
        p("tpcb-like", HAAS_W, 8, "pgproc", Some(4497.012143), 4624.844801, Some(4849.233268)),
        p("tpcb-like", HAAS_W, 8, "pgxact", Some(4561.914897), 4625.443111, Some(4776.095552)),
        p("tpcb-like", HAAS_W, 8, "pgxact+rgx", Some(4469.742226), 4789.249847, Some(4824.033794)),
        p("tpcb-like", HAAS_W, 32, "pgproc", Some(10468.362239), 10511.425102, Some(10531.069684)),
        p("tpcb-like", HAAS_W, 32, "pgxact", Some(12821.732396), 14500.067726, Some(14546.538281)),
        p("tpcb-like", HAAS_W, 32, "pgxact+rgx", Some(14907.122746), 15129.665408, Some(15186.743199)),
        p("tpcb-like", HAAS_W, 80, "pgproc", Some(7601.067552), 7612.898321, Some(7631.487355)),
        p("tpcb-like", HAAS_W, 80, "pgxact", Some(11712.895410), 12004.807309, Some(12512.078569)),
        p("tpcb-like", HAAS_W, 80, "pgxact+rgx", Some(15186.695057), 15810.452158, Some(16166.272699)),
    ],
    published_notes: &[
        "Linnakangas, 8-core x64 box: no measurable pgbench difference with the patch, with or \
         without -N / -S",
    ],
    machines: &[
        SeedMachine {
            profile: "xeon-32",
            series: &[HAAS_S, HAAS_W],
            clients: &[1, 8, 32, 80],
            duration_s: 0.2,
            scale: 10,
        },
        SeedMachine {
            profile: "itanium-32",
            series: &[PAVAN_N, PAVAN_B],
            clients: &[1, 4, 32, 48, 64, 80],
            duration_s: 0.1,
            scale: 10,
        },
    ],
};

const AMIT: &str = "Kapila, 192-thread POWER8, -S -M prepared";

/// Seed 001: old_snapshot_threshold's time map, taken exclusive by every snapshot in 9.6 beta,
/// and Amit Kapila's fix.
const OLD_SNAPSHOT: Experiment = Experiment {
    name: "old-snapshot",
    seed: "001_44f4b4948cf44296.txt",
    thread: Thread {
        title: "Re: pgsql: Avoid extra locks in GetSnapshotData if old_snapshot_threshold < 0",
        authors: "Amit Kapila (figures and patch), replying to Kevin Grittner, Andres Freund, Noah Misch",
        date: "April 2016 (a reply to a message of 2016-04-19)",
    },
    title: "old_snapshot_threshold (9.6): OldSnapshotTimeMapLock taken by every snapshot, and the fix",
    preset: "pg96",
    protocol: QueryMode::Prepared,
    common: &[],
    workloads: &[SELECT_ONLY],
    variants: &[
        Variant {
            name: "ost=off",
            about: "old_snapshot_threshold = -1: the time map is never touched",
            set: &["procarray.old_snapshot_threshold=off"],
        },
        Variant {
            name: "ost=1",
            about: "threshold 1 minute, 9.6 beta: every snapshot takes OldSnapshotTimeMapLock exclusive",
            set: &["procarray.old_snapshot_threshold=1", "procarray.time_map=every-call"],
        },
        Variant {
            name: "ost=1+fix",
            about: "threshold 1 minute with the seed's patch: exclusive only if xmin advanced or a new minute began",
            set: &["procarray.old_snapshot_threshold=1", "procarray.time_map=xmin-advanced"],
        },
    ],
    counters: &[
        c("OldSnapshotTimeMap ex", "lwlock.OldSnapshotTimeMap.ex_acquire", Per::Op),
        c("OldSnapshotTimeMap blk", "lwlock.OldSnapshotTimeMap.block", Per::KiloOp),
        c("OldSnapshotTimeMap wait us", "lwlock.OldSnapshotTimeMap.wait_ns", Per::UsPerOp),
        c("ProcArray sh", "lwlock.ProcArray.sh_acquire", Per::Op),
    ],
    clients: &[1, 2, 32, 64],
    duration_s: 0.6,
    runs: 3,
    published_context: "Amit Kapila, IBM POWER8 (ppc64le), 24 sockets x 8 threads = 192 CPUs, \
        median of 3 five-minute runs of pgbench -S -M prepared",
    published: &[
        p("select-only", AMIT, 32, "ost=off", None, 354077.0, None),
        p("select-only", AMIT, 64, "ost=off", None, 552063.0, None),
        p("select-only", AMIT, 32, "ost=1", None, 92809.0, None),
        p("select-only", AMIT, 64, "ost=1", None, 55847.0, None),
        p("select-only", AMIT, 32, "ost=1+fix", None, 319759.0, None),
        p("select-only", AMIT, 64, "ost=1+fix", None, 191741.0, None),
    ],
    published_notes: &[],
    machines: &[SeedMachine {
        profile: "power8-192",
        series: &[AMIT],
        clients: &[1, 32, 64],
        duration_s: 0.3,
        scale: 1,
    }],
};

const KEVIN_P: &str = "Grittner, 32 cores, -M prepared";
const KEVIN_S: &str = "Grittner, 32 cores, -M simple";

/// Seed 002: ProcArrayLock at end of transaction, exclusive (9.2) vs the FlexLock patch vs
/// group XID clearing (9.6).
const FLEXLOCK: Experiment = Experiment {
    name: "flexlock",
    seed: "002_a3358cf57700f1f3.txt",
    thread: Thread {
        title: "Re: testing ProcArrayLock patches",
        authors: "Kevin Grittner (figures), replying to Robert Haas (the FlexLock patch)",
        date: "November 2011 (the seed file has no date)",
    },
    title: "FlexLock (2011): ending transactions without taking ProcArrayLock yourself, synchronous commit on",
    preset: "pg92",
    protocol: QueryMode::Simple,
    common: &["wal.synchronous_commit=on", "wal.flush=modelled:100"],
    workloads: &[TPCB, SIMPLE_UPDATE],
    variants: &[
        Variant {
            name: "exclusive",
            about: "master: each committer takes ProcArrayLock exclusive",
            set: &["procarray.end_xact=exclusive"],
        },
        Variant {
            name: "flexlock",
            about: "the FlexLock patch: a busy lock's holder clears queued requests",
            set: &["procarray.end_xact=flexlock"],
        },
        Variant {
            name: "group-clear",
            about: "9.6's group XID clearing (the successor that shipped)",
            set: &["procarray.end_xact=group-clear"],
        },
    ],
    counters: &[
        c("ProcArray ex", "lwlock.ProcArray.ex_acquire", Per::Op),
        c("ProcArray blk", "lwlock.ProcArray.block", Per::KiloOp),
        c("ProcArray wait us", "lwlock.ProcArray.wait_ns", Per::UsPerOp),
        c("WALInsert acq", "lwlock.WALInsert.acquisitions", Per::Op),
        c("WALInsert blk", "lwlock.WALInsert.block", Per::KiloOp),
        c("WALInsert wait us", "lwlock.WALInsert.wait_ns", Per::UsPerOp),
        c("WALWrite blk", "lwlock.WALWrite.block", Per::KiloOp),
        c("WAL flushes", "wal.flushes", Per::Op),
        c("group clears led by others", "procarray.end_group_follower", Per::Op),
        c("row-lock waits", "lmgr.waits", Per::KiloOp),
    ],
    clients: &[1, 4, 16],
    duration_s: 0.3,
    runs: 3,
    published_context: "Kevin Grittner, a 32-core box, synchronous_commit on, pg_xlog on its own \
        RAID 10 with a battery-backed controller, median of 5 runs (script not named: pgbench's \
        default read/write one); our WAL flush is modelled as 100 us",
    published: &[
        p("tpcb-like", KEVIN_P, 1, "exclusive", None, 1629.265970, None),
        p("tpcb-like", KEVIN_P, 1, "flexlock", None, 1619.024905, None),
        p("tpcb-like", KEVIN_P, 2, "exclusive", None, 3164.061963, None),
        p("tpcb-like", KEVIN_P, 2, "flexlock", None, 3137.469377, None),
        p("tpcb-like", KEVIN_P, 4, "exclusive", None, 6114.787505, None),
        p("tpcb-like", KEVIN_P, 4, "flexlock", None, 6061.750200, None),
        p("tpcb-like", KEVIN_P, 8, "exclusive", None, 11884.534375, None),
        p("tpcb-like", KEVIN_P, 8, "flexlock", None, 11870.670086, None),
        p("tpcb-like", KEVIN_P, 16, "exclusive", None, 20575.737107, None),
        p("tpcb-like", KEVIN_P, 16, "flexlock", None, 20437.648809, None),
        p("tpcb-like", KEVIN_P, 32, "exclusive", None, 27664.381103, None),
        p("tpcb-like", KEVIN_P, 32, "flexlock", None, 28046.846479, None),
        p("tpcb-like", KEVIN_P, 64, "exclusive", None, 26764.294547, None),
        p("tpcb-like", KEVIN_P, 64, "flexlock", None, 26631.589294, None),
        p("tpcb-like", KEVIN_P, 80, "exclusive", None, 27716.198263, None),
        p("tpcb-like", KEVIN_P, 80, "flexlock", None, 28393.642871, None),
        p("tpcb-like", KEVIN_P, 96, "exclusive", None, 26616.076293, None),
        p("tpcb-like", KEVIN_P, 96, "flexlock", None, 28055.921427, None),
        p("tpcb-like", KEVIN_P, 128, "exclusive", None, 23282.912620, None),
        p("tpcb-like", KEVIN_P, 128, "flexlock", None, 23072.766829, None),
        p("tpcb-like", KEVIN_S, 1, "exclusive", None, 1092.269228, None),
        p("tpcb-like", KEVIN_S, 1, "flexlock", None, 1090.511552, None),
        p("tpcb-like", KEVIN_S, 2, "exclusive", None, 2171.867100, None),
        p("tpcb-like", KEVIN_S, 2, "flexlock", None, 2158.609189, None),
        p("tpcb-like", KEVIN_S, 4, "exclusive", None, 4278.541453, None),
        p("tpcb-like", KEVIN_S, 4, "flexlock", None, 4269.921594, None),
        p("tpcb-like", KEVIN_S, 8, "exclusive", None, 8472.257182, None),
        p("tpcb-like", KEVIN_S, 8, "flexlock", None, 8476.150588, None),
        p("tpcb-like", KEVIN_S, 16, "exclusive", None, 15905.074160, None),
        p("tpcb-like", KEVIN_S, 16, "flexlock", None, 15937.372689, None),
        p("tpcb-like", KEVIN_S, 32, "exclusive", None, 22331.817413, None),
        p("tpcb-like", KEVIN_S, 32, "flexlock", None, 22861.258757, None),
        p("tpcb-like", KEVIN_S, 64, "exclusive", None, 26388.391614, None),
        p("tpcb-like", KEVIN_S, 64, "flexlock", None, 26529.152361, None),
        p("tpcb-like", KEVIN_S, 80, "exclusive", None, 25617.651194, None),
        p("tpcb-like", KEVIN_S, 80, "flexlock", None, 26560.541237, None),
        p("tpcb-like", KEVIN_S, 96, "exclusive", None, 24105.455175, None),
        p("tpcb-like", KEVIN_S, 96, "flexlock", None, 26569.244384, None),
        p("tpcb-like", KEVIN_S, 128, "exclusive", None, 21467.530210, None),
        p("tpcb-like", KEVIN_S, 128, "flexlock", None, 25883.023093, None),
    ],
    published_notes: &[],
    machines: &[SeedMachine {
        profile: "xeon-32",
        series: &[KEVIN_S, KEVIN_P],
        clients: &[1, 2, 4, 8, 16, 32, 64, 80, 96, 128],
        duration_s: 0.15,
        scale: 10,
    }],
};

const HAAS_36: &str = "Haas, 24 cores, -c 36 -j 36 -n -S";

/// Seed 003: fast-path relation locks and on-demand VXID locks (9.2).
const FASTPATH: Experiment = Experiment {
    name: "fastpath",
    seed: "003_02dc97ba9458119c.txt",
    thread: Thread {
        title: "Re: reducing the overhead of frequent table locks - now, with WIP patch",
        authors: "Robert Haas (patches and figures), replying to Simon Riggs",
        date: "June 2011 (a reply to a message of 2011-06-07)",
    },
    title: "fast-path relation locks and on-demand VXID locks (9.2): lock-manager partition traffic",
    preset: "pg92",
    protocol: QueryMode::Simple,
    common: &[],
    workloads: &[SELECT_ONLY],
    variants: &[
        Variant {
            name: "no-fastpath",
            about: "9.1: every relation lock and the VXID lock go through the partitioned table",
            set: &["lmgr.fast_path=off", "lmgr.vxid=eager"],
        },
        Variant {
            name: "fast-rel",
            about: "fast-path relation locks alone (16 per-backend slots)",
            set: &["lmgr.fast_path=1", "lmgr.vxid=eager"],
        },
        Variant {
            name: "fast-rel+vxid",
            about: "fast-path relation locks plus VXID locks created on demand (9.2)",
            set: &["lmgr.fast_path=1", "lmgr.vxid=on-demand"],
        },
    ],
    counters: &[
        c("LockManager acq", "lwlock.LockManager.acquisitions", Per::PartitionPer5Min),
        c("LockManager blk", "lwlock.LockManager.block", Per::PartitionPer5Min),
        c("busiest partition locks", "lmgr.main_acquisitions_max", Per::Per5Min),
        c("fast-path grants", "lmgr.fast_path_grants", Per::Op),
        c("main-table locks", "lmgr.main_acquisitions_total", Per::Op),
        c("LockFastPath acq", "lwlock.LockFastPath.acquisitions", Per::Op),
        c("BufferMapping sh", "lwlock.BufferMapping.sh_acquire", Per::Op),
        c("BufferMapping blk", "lwlock.BufferMapping.block", Per::KiloOp),
        c("BufFreelist acq", "lwlock.BufFreelist.acquisitions", Per::Op),
        c("BufFreelist blk", "lwlock.BufFreelist.block", Per::KiloOp),
    ],
    clients: &[1, 2, 4, 8],
    duration_s: 0.6,
    runs: 3,
    published_context: "Robert Haas, Nate Boley's 24-core box, pgbench -c 36 -j 36 -n -S -T 300 \
        (approximate figures, as the thread gives them)",
    published: &[
        p("select-only", HAAS_36, 36, "no-fastpath", None, 36000.0, None),
        p("select-only", HAAS_36, 36, "fast-rel", None, 129000.0, None),
        p("select-only", HAAS_36, 36, "fast-rel+vxid", None, 138000.0, None),
    ],
    published_notes: &[
        "lock-manager partition traffic: hundreds of thousands of requests per partition lock in a \
         five-minute period without the patches, a few hundred with both",
        "fast-path relation locks alone raised contention from VXID traffic about 12x",
        "remaining contention with both patches: free-list locks (~13% blocked) and buffer-mapping \
         locks (roughly 800k shared and 12000 exclusive acquisitions, 850 blocks; one lock ~5x \
         hotter than the rest)",
    ],
    machines: &[SeedMachine {
        profile: "opteron-24",
        series: &[HAAS_36],
        clients: &[1, 8, 24, 36],
        duration_s: 0.4,
        scale: 1,
    }],
};

/// Seed 004: checking the visibility map instead of PD_ALL_VISIBLE, and the VM page's pin.
const VM_PIN: Experiment = Experiment {
    name: "vm-pin",
    seed: "004_b4fb31a2995d4cc2.txt",
    thread: Thread {
        title: "Do we need so many hint bits?",
        authors: "Jeff Davis (figures and patches), replying to Merlin Moncure",
        date: "November 2012 (a reply to a message of 2012-11-26; the seed file omits the subject, named here from the pgsql-hackers archive)",
    },
    title: "buffer pins on the visibility-map page: PD_ALL_VISIBLE first vs always reading the VM",
    preset: "pg92",
    protocol: QueryMode::Prepared,
    common: &[],
    workloads: &[
        Workload {
            name: "scan",
            about: "every worker scans the whole table (2048 pages x --scale), checking all-visible per page",
            kind: WorkloadKind::Buffers { scenario: BufferScenario::Scan },
            unit: "pages/s",
        },
        Workload {
            name: "vm-delete",
            about: "worker N deletes every tuple of heap page N; pages are disjoint, the VM page is shared",
            kind: WorkloadKind::Buffers { scenario: BufferScenario::VmDelete },
            unit: "deletes/s",
        },
    ],
    variants: &[
        Variant {
            name: "page-flag",
            about: "patch #1 (master): test PD_ALL_VISIBLE on the heap page, touch the VM only if needed",
            set: &["vm.check=page-flag-first"],
        },
        Variant {
            name: "always-vm",
            about: "patch #2: pin, read and unpin the VM page every time",
            set: &["vm.check=always-vm"],
        },
        Variant {
            name: "always-vm-keep-pin",
            about: "patch #3: always read the VM page, but keep it pinned between pages",
            set: &["vm.check=always-vm-keep-pin"],
        },
    ],
    counters: &[
        c("vm pins", "buffers.vm_pins", Per::Op),
        c("vm pin waits", "buffers.vm_pin_waits", Per::KiloOp),
        c("pin waits", "buffers.pin_waits", Per::KiloOp),
        c("pin spin delays", "buffers.pin_spin_delays", Per::KiloOp),
        c("BufferContent blk", "lwlock.BufferContent.block", Per::KiloOp),
    ],
    clients: &[1, 2, 4, 8],
    duration_s: 0.4,
    runs: 3,
    published_context: "Jeff Davis, a 12-core box (24 hyperthreads), 1 to 64 connections; a scan \
        of a ~400 MB table and per-worker deletes on a ~2 MB table (no tps figures published)",
    published: &[],
    published_notes: &[
        "scan: maybe a 3-4% loss from patch #1 to patch #2 at higher concurrency, hard to \
         reproduce; no difference between #1 and #3",
        "vm-delete: no difference between #1 and #2",
    ],
    machines: &[SeedMachine {
        profile: "xeon-12",
        series: &[],
        clients: &[1, 4, 12, 24, 64],
        duration_s: 0.03,
        scale: 1,
    }],
};

/// The catalog, by seed number.
pub(crate) const EXPERIMENTS: &[Experiment] = &[PGXACT, OLD_SNAPSHOT, FLEXLOCK, FASTPATH, VM_PIN];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::VM_CHECK_KEY;
    use lockstack_engine::engine::EngineConfig;
    use lockstack_engine::settings;

    #[test]
    fn every_definition_is_consistent() {
        let mut names = Vec::new();
        for e in EXPERIMENTS {
            assert!(!names.contains(&e.name), "duplicate {}", e.name);
            names.push(e.name);
            assert!(e.variants.len() >= 2, "{}: a baseline and at least one variant", e.name);
            assert!(!e.workloads.is_empty() && !e.counters.is_empty() && !e.clients.is_empty());
            assert!(e.runs >= 1 && e.duration_s > 0.0);
            // The defaults stay under a minute of measuring, whatever the load time adds.
            let secs = e.default_points() as f64 * e.duration_s;
            assert!(secs <= 45.0, "{}: {secs} s of measuring by default", e.name);
            for v in e.variants {
                let mut cfg = EngineConfig::preset(e.preset, 4, 1024).unwrap();
                settings::apply_all(&mut cfg, e.common).unwrap();
                for s in v.set {
                    settings::apply_set(&mut cfg, s).unwrap_or_else(|m| panic!("{}: {m}", e.name));
                }
                // vm-pin's variants each select a visibility check; no other experiment may.
                let checks = v.set.iter().filter(|s| s.starts_with(VM_CHECK_KEY)).count();
                assert_eq!(checks, usize::from(e.name == "vm-pin"), "{}: {}", e.name, v.name);
                let names: Vec<&str> = e.variants.iter().map(|x| x.name).collect();
                assert_eq!(names.iter().filter(|n| **n == v.name).count(), 1);
            }
            for p in e.published {
                assert!(e.workload(p.workload).is_some(), "{}: {}", e.name, p.workload);
                assert!(e.variants.iter().any(|v| v.name == p.variant), "{}: {}", e.name, p.variant);
                assert!(p.tps > 0.0);
                if let (Some(lo), Some(hi)) = (p.low, p.high) {
                    assert!(lo <= p.tps && p.tps <= hi, "{}: {p:?}", e.name);
                }
            }
        }
        assert_eq!(names, ["pgxact", "old-snapshot", "flexlock", "fastpath", "vm-pin"]);
    }
}
