//! The ProcArray's hot lines carry their names for a simulation, and the
//! old-snapshot map reports its ring's plain entries.

use super::*;
use crate::config::{OldSnapshotThreshold, TimeMapMaintenance};
use crate::old_snapshot::{USECS_PER_MINUTE, VirtualClock};
use lockstack_common::sync::hook::{Access, Counting, Simulation, install, line_name};
use lockstack_lwlock::LwLockKind;

#[test]
fn locks_the_xid_counter_and_members_are_named() {
    for cfg in [
        ProcArrayConfig::pg91(8),
        ProcArrayConfig::pg92(8),
        ProcArrayConfig::pg96(8),
        ProcArrayConfig::pg14(8),
    ] {
        let layout = cfg.layout;
        let pa = ProcArray::new(cfg).unwrap();
        let name = |a: *const u8| line_name(a as usize);
        assert_eq!(name(pa.proc_array_lock.lock().word_addr()).as_deref(), Some("ProcArrayLock"));
        let xg = name(pa.xid_gen_lock.word_addr()).expect("XidGenLock's line is named");
        assert!(xg.starts_with("XidGenLock"), "{xg}");
        assert_eq!(
            name(&pa.transam.next_xid as *const AtomicU32 as *const u8).as_deref(),
            Some("XidGen nextXid")
        );
        let member5 = match &pa.hot {
            Hot::Pgproc => name(&pa.procs[5].xid as *const AtomicU32 as *const u8),
            Hot::Pgxact(x) => name(&x[5] as *const PgXact as *const u8),
            Hot::PgxactPadded(x) => name(&*x[5] as *const PgXact as *const u8),
            Hot::Dense(d) => name(&d.xids[5] as *const AtomicU32 as *const u8),
        }
        .unwrap_or_else(|| panic!("{layout:?}: member 5's hot line is named"));
        let want = match layout {
            Layout::Pgproc => "PGPROC 5 xid",
            Layout::PgxactPadded => "PgXact 5",
            Layout::Pgxact => "PgXact ",
            Layout::Dense => "ProcGlobal xids ",
        };
        assert!(member5.starts_with(want), "{layout:?}: {member5}");
    }
}

#[test]
fn the_time_map_reports_its_ring_entries() {
    let clock = Arc::new(VirtualClock::new(10 * USECS_PER_MINUTE));
    let map = OldSnapshotTimeMap::new(
        OldSnapshotThreshold::Minutes(5),
        TimeMapMaintenance::EveryCall,
        clock,
        LwLockKind::Atomic,
    );
    let c = Arc::new(Counting::with_log());
    let g = install(Simulation::new(Box::new(c.clone())));
    assert!(map.maintain(10 * USECS_PER_MINUTE, TransactionId(100)));
    assert_eq!(map.xmin_at(10 * USECS_PER_MINUTE), Some(TransactionId(100)));
    drop(g);
    let ring: Vec<_> =
        c.touches().into_iter().filter(|t| !t.atomic && t.file.ends_with("old_snapshot.rs")).collect();
    assert!(ring.iter().any(|t| t.access == Access::Write && t.len == 4), "{ring:?}");
    assert!(ring.iter().any(|t| t.access == Access::Read && t.len == 4), "{ring:?}");
}
