//! Concurrent `INSERT INTO pgbench_history` in single-statement transactions: every committed
//! row stays in the table and visible.
//!
//! Counts only: nothing here depends on how fast the machine is.

use std::sync::Arc;

use lockstack_common::BackendId;
use lockstack_engine::engine::{Engine, EngineConfig};
use lockstack_engine::tables::TableId;

/// Sixteen backends insert history rows as fast as they can, 96,000 transactions a round. A
/// history page holds about a hundred rows, so the shared insert target moves to a new page
/// every few inserts per backend, and each round crosses about three CLOG pages.
///
/// Two races lost committed rows here (both hit only when a backend is preempted in a short
/// window, so one run of this test catches either with a probability of a few percent; the
/// deterministic tests are `engine::tests::a_new_history_page_is_initialised_once_by_whoever_locks_it_first`
/// and `engine::tests::a_commit_on_a_new_clog_page_survives_the_late_extension_by_the_page_first_xid`):
/// * the backend that extended history published the new block as the target before
///   initialising it, and initialised it even if other backends had put rows there already;
/// * the backend holding the first xid of a CLOG page zeroed the page after its xid was
///   published, possibly after the next xid's transaction had committed on it.
#[test]
fn concurrent_history_inserts_lose_no_row() {
    let clients = 16u32;
    let per_client = 6000i64;
    let rounds = 5;
    for round in 0..rounds {
        let e = Engine::new(EngineConfig::new(clients as usize + 1, 4096), 1, 100).unwrap();
        std::thread::scope(|s| {
            for c in 0..clients {
                let e = Arc::clone(&e);
                s.spawn(move || {
                    let mut se = e.session(BackendId(c)).unwrap();
                    for i in 0..per_client {
                        // Implicit single-statement transactions: each insert commits.
                        se.insert_history([1, 1, i, 1 + i64::from(c), 0]).unwrap();
                    }
                });
            }
        });
        let mut r = e.session(BackendId(clients)).unwrap();
        let h = r.table_sums(TableId::History).unwrap();
        let rows = u64::from(clients) * per_client as u64;
        let delta: i64 = (0..i64::from(clients)).map(|c| (1 + c) * per_client).sum();
        assert_eq!((h.rows, h.balance), (rows, delta), "round {round}: every committed history row is kept");
    }
}
