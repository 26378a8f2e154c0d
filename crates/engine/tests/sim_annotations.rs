//! The engine's plain shared data reaches a simulation: a heap update writes the
//! old version's header and the new version's bytes in the shared page, a later read reads
//! exactly those bytes, and an index descent reads B-tree pages.

use std::sync::Arc;

use lockstack_common::BackendId;
use lockstack_common::sync::hook::{self, Access, Counting, Simulation, Touched};
use lockstack_engine::engine::{Engine, EngineConfig};
use lockstack_engine::heap::tuple::HEAP_TUPLE_HEADER_SIZE;
use lockstack_engine::session::LockClauseStrength;
use lockstack_engine::tables::TableId;

fn logged<R>(f: impl FnOnce() -> R) -> (R, Vec<Touched>) {
    let c = Arc::new(Counting::with_log());
    let g = hook::install(Simulation::new(Box::new(c.clone())));
    let r = f();
    drop(g);
    (r, c.touches().into_iter().filter(|t| !t.atomic).collect())
}

/// The touches of `access` made from `file` (a path suffix), or from any file under `file` when
/// it names a directory (ends with `/`).
fn from<'a>(t: &'a [Touched], file: &'a str, access: Access) -> impl Iterator<Item = &'a Touched> + 'a {
    let placed = move |f: &str| if file.ends_with('/') { f.contains(file) } else { f.ends_with(file) };
    t.iter().filter(move |x| placed(x.file) && x.access == access)
}

#[test]
fn a_heap_update_writes_the_tuples_a_read_then_reads() {
    for preset in ["pg92", "pg17"] {
        let e = Engine::new(EngineConfig::preset(preset, 2, 256).unwrap(), 1, 100).unwrap();
        let mut s = e.session(BackendId(0)).unwrap();
        s.begin();
        let (updated, up) = logged(|| s.update_add(TableId::Branches, 1, 1, 5).unwrap());
        assert!(updated);
        s.commit().unwrap();
        // The old version: xmax, cmax and infomask stamped (bytes 4..26 of its header).
        assert!(
            from(&up, "heap/tuple.rs", Access::Write).any(|t| t.len == 22),
            "{preset}: old version's xmax"
        );
        // The new version: its bytes placed in the page.
        let placed: Vec<_> = from(&up, "bufmgr/src/page/", Access::Write)
            .filter(|t| t.len >= HEAP_TUPLE_HEADER_SIZE)
            .collect();
        assert!(!placed.is_empty(), "{preset}: the new version is written into the page");
        // A later read of the row reads a header that the update wrote.
        s.begin();
        let (row, rd) = logged(|| s.select(TableId::Branches, 1, LockClauseStrength::None).unwrap());
        s.commit().unwrap();
        assert!(row.is_some());
        let headers: Vec<_> =
            from(&rd, "heap/tuple.rs", Access::Read).filter(|t| t.len == HEAP_TUPLE_HEADER_SIZE).collect();
        assert!(
            headers
                .iter()
                .any(|h| placed.iter().any(|p| p.addr <= h.addr && h.addr + h.len <= p.addr + p.len)),
            "{preset}: the read reads the new version's header where the update wrote it"
        );
        // The look-up went through the index: B-tree special space and items were read.
        assert!(
            from(&rd, "engine/src/btree/nbtpage.rs", Access::Read).any(|t| t.len == 24),
            "{preset}: B-tree opaque data"
        );
        assert!(
            from(&rd, "bufmgr/src/page/", Access::Read).count() >= 2,
            "{preset}: line pointers and items"
        );
    }
}
