//! Helpers shared by the integration tests that drive several sessions at once
//! (`tuple_locks.rs`, `multixact.rs`): polling for a state, and one thread per session running
//! the steps it is sent.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::Scope;
use std::time::{Duration, Instant};

use lockstack_common::BackendId;
use lockstack_engine::engine::{Engine, EngineError};
use lockstack_engine::session::Session;

/// How long a poll may take before the test gives up (a bound against hangs, not a timing).
pub(crate) const POLL_BOUND: Duration = Duration::from_secs(120);

/// Polls until `cond` holds, panicking with `what` after [`POLL_BOUND`].
pub(crate) fn poll(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < POLL_BOUND, "gave up waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One step a session thread runs.
pub(crate) type Step = Box<dyn FnOnce(&mut Session) -> Result<(), EngineError> + Send>;

/// A step's result, with the backend that ran it.
pub(crate) type Done = (u32, Result<(), EngineError>);

/// Starts, in `scope`, one thread per backend of `ids`, each with its own session, running the
/// steps sent on its channel (returned in the order of `ids`) and reporting each result as
/// (backend, result) on the returned receiver. Only `detector` runs the deadlock detector
/// within a test (a 20 ms deadlock_timeout; the others' is an hour).
pub(crate) fn session_threads<'scope>(
    scope: &'scope Scope<'scope, '_>,
    engine: &Arc<Engine>,
    ids: impl IntoIterator<Item = u32>,
    detector: u32,
) -> (Vec<Sender<Step>>, Receiver<Done>) {
    let (done_tx, done_rx) = channel::<Done>();
    let mut steps = Vec::new();
    for i in ids {
        let (tx, rx) = channel::<Step>();
        steps.push(tx);
        let e = Arc::clone(engine);
        let done = done_tx.clone();
        scope.spawn(move || {
            let mut se = e.session(BackendId(i)).unwrap();
            se.set_deadlock_timeout(if i == detector {
                Duration::from_millis(20)
            } else {
                Duration::from_secs(3600)
            });
            for step in rx {
                let r = step(&mut se);
                done.send((i, r)).unwrap();
            }
        });
    }
    (steps, done_rx)
}
