//! The permutation runner: PostgreSQL 14+'s `run_permutation`, `try_complete_step(s)` and
//! `step_has_blocker` (`isolationtester.c`), with session threads instead of libpq
//! connections (the control connection too, so that a setup or teardown that blocks is bounded
//! by the step timeout) and the lock manager's own waiting state instead of the `pg_locks`
//! query. Output goes to the caller as it is produced (before every wait), as the tester
//! prints it, so a run that hangs has shown what led to the hang.
//!
//! Time as the tester spends it. PostgreSQL's tester decides that a busy step waits only after
//! a 10 ms `select` on its connection has timed out ([`POLL`]): every "still waiting" verdict
//! costs 10 ms, during which the server goes on, and a deadlock check or `lock_timeout` that
//! falls due in that time has acted before the verdict (in hard-deadlock.spec, the victim's
//! 10 ms check fires while the tester polls the first waiter, so the step it unblocks is
//! reported completed before the victim's error). The runner does not sleep those 10 ms: it
//! keeps the instant the tester's polls would have reached ([`Runner::poll_clock`], 10 ms
//! further per verdict) and, before each verdict, lets every lock-manager timer due by then
//! fire and its consequences settle ([`Runner::settle`]). The same events come before the
//! same verdicts, without the tester's 10 ms per poll (a thousand queued sessions would take
//! it 5,000 s).

use lockstack_common::sync::thread::JoinHandle;
use std::sync::Arc;
use std::time::Duration;

use lockstack_common::sync::Instant;

use lockstack_common::sync::{Condvar, Mutex};
use lockstack_engine::engine::Engine;
use lockstack_lmgr::{BackendId, Lmgr};

use super::conn::{Conn, QueryResult};
use super::spec::Blocker;
use super::sql::Statement;
use super::{IsolationConfig, IsolationError, LoadedSpec};

struct Shared {
    state: Mutex<Option<QueryResult>>,
    busy: Mutex<bool>,
    cv: Condvar,
}

/// A session thread's queue of work (`None`: exit), through the facade (a host channel would
/// block the one host thread of a simulated machine).
#[derive(Default)]
struct Mailbox {
    q: Mutex<std::collections::VecDeque<Option<Vec<Statement>>>>,
    cv: Condvar,
}

impl Mailbox {
    fn send(&self, m: Option<Vec<Statement>>) {
        self.q.lock().push_back(m);
        self.cv.notify_one();
    }

    fn recv(&self) -> Option<Vec<Statement>> {
        // Between steps a session waits for the tester, not for the lock stack.
        let _class =
            lockstack_common::sync::hook::harness_wait(lockstack_common::sync::hook::HarnessWait::Idle);
        let mut q = self.q.lock();
        loop {
            if let Some(m) = q.pop_front() {
                return m;
            }
            self.cv.wait(&mut q);
        }
    }
}

struct SessionThread {
    name: String,
    backend: BackendId,
    tx: Arc<Mailbox>,
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl SessionThread {
    /// Starts the thread of session `name` (backend `id`): it attaches its engine session
    /// itself (a session publishes its wait events from the thread that attached it), then
    /// runs the queries it is sent. Returns once the session is attached.
    ///
    /// # Errors
    /// The engine refused the session (one line).
    fn spawn(name: &str, engine: &Arc<Engine>, id: BackendId) -> Result<SessionThread, IsolationError> {
        let shared = Arc::new(Shared { state: Mutex::new(None), busy: Mutex::new(true), cv: Condvar::new() });
        let tx = Arc::new(Mailbox::default());
        let rx = Arc::clone(&tx);
        let sh = Arc::clone(&shared);
        let engine = Arc::clone(engine);
        let handle = lockstack_common::sync::thread::Builder::new()
            .name(format!("isolation-{name}"))
            .spawn(move || {
                let done = |r: QueryResult| {
                    *sh.state.lock() = Some(r);
                    let mut busy = sh.busy.lock();
                    *busy = false;
                    sh.cv.notify_all();
                };
                let mut conn = match engine.session(id) {
                    Ok(s) => {
                        done(QueryResult::default());
                        Conn::new(s)
                    }
                    Err(e) => {
                        done(QueryResult { error: Some(e.to_string()), ..QueryResult::default() });
                        return;
                    }
                };
                while let Some(stmts) = rx.recv() {
                    let r = conn.exec(&stmts);
                    done(r);
                }
            })
            .map_err(|e| IsolationError(format!("cannot start the thread of session {name}: {e}")))?;
        let t = SessionThread { name: name.to_string(), backend: id, tx, shared, handle: Some(handle) };
        while !t.wait(Duration::from_millis(50)) {}
        if let Some(e) = t.take().error {
            return Err(IsolationError(format!("session {name}: {e}")));
        }
        Ok(t)
    }

    fn launch(&self, stmts: Vec<Statement>) {
        *self.shared.busy.lock() = true;
        self.tx.send(Some(stmts));
    }

    fn done(&self) -> bool {
        !*self.shared.busy.lock()
    }

    /// Waits up to `t` for the running query to finish.
    fn wait(&self, t: Duration) -> bool {
        let mut busy = self.shared.busy.lock();
        if *busy {
            let _ = self.shared.cv.wait_for(&mut busy, t);
        }
        !*busy
    }

    fn take(&self) -> QueryResult {
        self.shared.state.lock().take().unwrap_or_default()
    }
}

impl Drop for SessionThread {
    /// Tells the thread to exit and joins it, unless it is still running a query (a step or
    /// teardown that timed out, stuck on a lock): that thread is left to end on its own when
    /// its query does, rather than hanging the caller.
    fn drop(&mut self) {
        self.tx.send(None);
        if let Some(h) = self.handle.take()
            && self.done()
        {
            let _ = h.join();
        }
    }
}

const NONBLOCK: u8 = 1;
const RETRY: u8 = 2;

/// How long PostgreSQL's tester waits on a busy step's connection before it asks whether the
/// step waits for a lock (`try_complete_step`'s `select` timeout, 10 ms in 9.1-18): the time
/// one "still waiting" verdict costs it.
pub(super) const POLL: Duration = Duration::from_millis(10);

struct PStep {
    name: String,
    session: usize,
    sql: String,
    stmts: Vec<Statement>,
    blockers: Vec<Blocker>,
}

pub(super) struct Runner<'a> {
    spec: &'a LoadedSpec,
    cfg: &'a IsolationConfig,
    lmgr: Arc<Lmgr>,
    control: SessionThread,
    sessions: Vec<SessionThread>,
    active: Vec<Option<usize>>,
    /// What was printed since the last [`Runner::flush`] (at most one permutation's output:
    /// flushed output is not kept, so a run of many permutations holds none of it).
    pub(super) out: String,
    emit: &'a mut dyn FnMut(&str),
    /// The first [`MAX_WARNINGS`] warnings (teardown failures).
    pub(super) warnings: Vec<String>,
    /// Warnings past [`MAX_WARNINGS`], counted only.
    pub(super) more_warnings: u64,
    /// The instant PostgreSQL's tester would have reached by its verdicts so far: each
    /// "still waiting" verdict moves it [`POLL`] past the later of itself and now.
    poll_clock: Instant,
}

/// Buffers of the engine a run builds (8 KiB pages): the specs' tables are a few pages each.
const ENGINE_BUFFERS: usize = 1024;

/// The most warnings a run keeps; a teardown that fails in each of millions of permutations
/// is counted past these, not kept.
pub(super) const MAX_WARNINGS: usize = 100;

fn print_result(out: &mut String, session: &str, r: &QueryResult, sets: bool) {
    for n in &r.notices {
        out.push_str(&format!("{session}: {n}\n"));
    }
    if sets {
        for s in r.sets.iter().flatten() {
            s.render(out);
        }
    }
}

impl<'a> Runner<'a> {
    /// A runner whose output is passed to `emit` as it is produced.
    pub(super) fn new(
        spec: &'a LoadedSpec,
        cfg: &'a IsolationConfig,
        emit: &'a mut dyn FnMut(&str),
    ) -> Result<Runner<'a>, IsolationError> {
        let n = spec.spec.sessions.len() + 1;
        let mut ecfg = lockstack_engine::engine::EngineConfig::new(n, ENGINE_BUFFERS);
        ecfg.lmgr = cfg.lmgr;
        ecfg.lmgr.max_backends = n;
        ecfg.procarray = lockstack_procarray::ProcArrayConfig::new(n);
        ecfg.clog.max_backends = n;
        let engine = Engine::without_tables(ecfg).map_err(|e| IsolationError(e.to_string()))?;
        let lmgr = Arc::clone(&engine.lmgr);
        let control = SessionThread::spawn("control connection", &engine, BackendId(0))?;
        let mut sessions = Vec::new();
        for (i, s) in spec.spec.sessions.iter().enumerate() {
            sessions.push(SessionThread::spawn(&s.name, &engine, BackendId(i as u32 + 1))?);
        }
        let n = sessions.len();
        Ok(Runner {
            spec,
            cfg,
            lmgr,
            control,
            sessions,
            active: vec![None; n],
            out: String::new(),
            emit,
            warnings: Vec::new(),
            more_warnings: 0,
            poll_clock: Instant::now(),
        })
    }

    pub(super) fn lmgr(&self) -> &Arc<Lmgr> {
        &self.lmgr
    }

    /// Passes what was printed since the last call to the caller, and forgets it.
    pub(super) fn flush(&mut self) {
        if !self.out.is_empty() {
            (self.emit)(&self.out);
            self.out.clear();
        }
    }

    /// Keeps a warning, or counts it past [`MAX_WARNINGS`].
    fn warn(&mut self, w: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w);
        } else {
            self.more_warnings += 1;
        }
    }

    /// Runs a setup or teardown block on session `i` (`None`: the control connection) and
    /// waits for it, at most the step timeout.
    fn session_exec(&mut self, i: Option<usize>, stmts: &[Statement]) -> Result<QueryResult, IsolationError> {
        self.flush();
        let s = match i {
            Some(i) => &self.sessions[i],
            None => &self.control,
        };
        s.launch(stmts.to_vec());
        let start = Instant::now();
        while !s.wait(Duration::from_millis(5)) {
            if start.elapsed() > self.cfg.step_timeout {
                let what = match i {
                    Some(_) => format!("setup or teardown of session {}", s.name),
                    None => "setup or teardown on the control connection".to_string(),
                };
                return Err(IsolationError(format!(
                    "{}: {what} timed out after {:.3} s",
                    self.spec.spec.file,
                    self.cfg.step_timeout.as_secs_f64()
                )));
            }
        }
        Ok(s.take())
    }

    /// Prints only the last result, as `PQexec` returns only that.
    fn print_exec(&mut self, who: &str, r: &QueryResult) {
        print_result(&mut self.out, who, r, false);
        if r.error.is_none()
            && let Some(Some(set)) = r.sets.last()
        {
            set.render(&mut self.out);
        }
    }

    pub(super) fn run_permutation(&mut self, names: &[(String, Vec<Blocker>)]) -> Result<(), IsolationError> {
        let spec = &self.spec.spec;
        let file = spec.file.clone();
        let steps: Vec<PStep> = names
            .iter()
            .map(|(n, b)| {
                let (session, step) = spec.step(n).expect("permutation steps were validated");
                PStep {
                    name: n.clone(),
                    session,
                    sql: step.sql.sql.clone(),
                    stmts: self.spec.steps[n].clone(),
                    blockers: b.clone(),
                }
            })
            .collect();
        self.out.push_str("\nstarting permutation:");
        for s in &steps {
            self.out.push(' ');
            self.out.push_str(&s.name);
        }
        self.out.push('\n');
        for (i, _) in spec.setup.iter().enumerate() {
            let r = self.session_exec(None, &self.spec.setup[i])?;
            if let Some(e) = &r.error {
                return Err(IsolationError(format!("{file}: setup failed: ERROR:  {e}")));
            }
            self.print_exec("control connection", &r);
        }
        for i in 0..spec.sessions.len() {
            if let Some(stmts) = self.spec.session_setup[i].clone() {
                let r = self.session_exec(Some(i), &stmts)?;
                if let Some(e) = &r.error {
                    return Err(IsolationError(format!(
                        "{file}: setup of session {} failed: ERROR:  {e}",
                        spec.sessions[i].name
                    )));
                }
                let name = spec.sessions[i].name.clone();
                self.print_exec(&name, &r);
            }
        }
        let mut waiting: Vec<usize> = Vec::new();
        for i in 0..steps.len() {
            let sess = steps[i].session;
            if self.active[sess].is_some() {
                let start = Instant::now();
                while let Some(old) = self.active[sess] {
                    if !self.try_complete_step(&steps, old, RETRY)? {
                        waiting.retain(|w| *w != old);
                    }
                    self.try_complete_steps(&steps, &mut waiting, NONBLOCK | RETRY)?;
                    if self.active[sess].is_some() && start.elapsed() > 2 * self.cfg.step_timeout {
                        return Err(IsolationError(format!(
                            "{file}: step {} timed out after {:.3} s",
                            steps[old].name,
                            start.elapsed().as_secs_f64()
                        )));
                    }
                }
            }
            self.sessions[sess].launch(steps[i].stmts.clone());
            self.active[sess] = Some(i);
            let mustwait = self.try_complete_step(&steps, i, NONBLOCK)?;
            if steps[i].blockers.contains(&Blocker::Once) {
                // Reported waiting without a look; by the tester's next verdict (10 ms on) it
                // has reached its wait or finished, and its timers run from there.
                self.settle_session(sess, &steps[i].name)?;
            }
            self.try_complete_steps(&steps, &mut waiting, NONBLOCK | RETRY)?;
            if mustwait {
                waiting.push(i);
            }
        }
        self.try_complete_steps(&steps, &mut waiting, RETRY)?;
        if !waiting.is_empty() {
            return Err(IsolationError(format!(
                "{file}: failed to complete permutation due to mutually-blocking steps"
            )));
        }
        for i in 0..spec.sessions.len() {
            if let Some(stmts) = self.spec.session_teardown[i].clone() {
                let r = self.session_exec(Some(i), &stmts)?;
                let name = spec.sessions[i].name.clone();
                if let Some(e) = &r.error {
                    self.warn(format!("teardown of session {name} failed: ERROR:  {e}"));
                }
                self.print_exec(&name, &r);
            }
        }
        if let Some(stmts) = self.spec.teardown.clone() {
            let r = self.session_exec(None, &stmts)?;
            if let Some(e) = &r.error {
                self.warn(format!("teardown failed: ERROR:  {e}"));
            }
            self.print_exec("control connection", &r);
        }
        self.flush();
        Ok(())
    }

    fn try_complete_steps(
        &mut self,
        steps: &[PStep],
        waiting: &mut Vec<usize>,
        flags: u8,
    ) -> Result<(), IsolationError> {
        loop {
            let old = waiting.len();
            let mut have_blocker = false;
            let mut w = 0;
            while w < waiting.len() {
                if self.try_complete_step(steps, waiting[w], flags)? {
                    if !steps[waiting[w]].blockers.is_empty() {
                        have_blocker = true;
                    }
                    w += 1;
                } else {
                    waiting.remove(w);
                }
            }
            if !(have_blocker && waiting.len() < old) {
                return Ok(());
            }
        }
    }

    /// Waits until session `sess` has finished its query or is queued on a lock (never
    /// longer than the step timeout; `step` names it in the error).
    fn settle_session(&mut self, sess: usize, step: &str) -> Result<(), IsolationError> {
        let start = Instant::now();
        loop {
            let s = &self.sessions[sess];
            if s.done() || self.lmgr.waiting_for(s.backend).is_some() {
                return Ok(());
            }
            if start.elapsed() > self.cfg.step_timeout {
                return Err(self.timed_out(step));
            }
            s.wait(Duration::from_micros(100));
        }
    }

    fn timed_out(&self, step: &str) -> IsolationError {
        IsolationError(format!(
            "{}: step {step} timed out after {:.3} s",
            self.spec.spec.file,
            self.cfg.step_timeout.as_secs_f64()
        ))
    }

    /// Lets every lock-manager timer due by `horizon` (a deadlock check, a `lock_timeout`)
    /// fire, and what it set off settle: the victim's error, the wake-ups of those it
    /// released, each active session finished or queued again. Returns once no timer is due by
    /// `horizon` and, if one fired, every active session is finished or queued on a lock; an
    /// error after the step timeout (`step` names the step being decided).
    fn settle(&mut self, horizon: Instant, step: &str) -> Result<(), IsolationError> {
        let start = Instant::now();
        let mut fired = false;
        loop {
            if start.elapsed() > self.cfg.step_timeout {
                return Err(self.timed_out(step));
            }
            if self.lmgr.earliest_lock_timer().is_some_and(|t| t <= horizon) {
                fired = true;
                lockstack_common::sync::sleep(Duration::from_micros(100));
                continue;
            }
            if !fired {
                return Ok(());
            }
            let busy = self.active.iter().enumerate().find(|(i, a)| {
                let s = &self.sessions[*i];
                a.is_some() && !s.done() && self.lmgr.waiting_for(s.backend).is_none()
            });
            match busy {
                Some((i, _)) => {
                    self.sessions[i].wait(Duration::from_micros(100));
                }
                None => return Ok(()),
            }
        }
    }

    fn step_has_blocker(&self, steps: &[PStep], i: usize) -> bool {
        steps[i].blockers.iter().any(|b| match b {
            Blocker::Once => false,
            Blocker::OtherStep(name) => {
                let Some((sess, _)) = self.spec.spec.step(name) else { return false };
                self.active[sess].is_some_and(|a| steps[a].name == *name)
            }
        })
    }

    /// True if the step is (still) waiting; false once its completion has been printed.
    fn try_complete_step(&mut self, steps: &[PStep], i: usize, flags: u8) -> Result<bool, IsolationError> {
        let st = &steps[i];
        if flags & RETRY == 0 && st.blockers.contains(&Blocker::Once) {
            self.out.push_str(&format!("step {}: {} <waiting ...>\n", st.name, st.sql));
            return Ok(true);
        }
        let start = Instant::now();
        let mut flushed = false;
        loop {
            let s = &self.sessions[st.session];
            if s.done() {
                break;
            }
            // Queued on a lock: `pg_isolation_test_session_is_blocked`. The lock manager marks a
            // backend waiting only while it is in a wait queue, where something it conflicts
            // with always holds or precedes it; asking for the blockers themselves
            // (`blocking_backends`) costs a walk of the queue, and with thousands of sessions
            // queued on one lock the runner asks for every waiting step at every launch.
            if flags & NONBLOCK != 0 && self.lmgr.waiting_for(s.backend).is_some() {
                // The tester's verdict comes after its 10 ms poll: what the lock manager's
                // timers do by then comes first (module docs).
                self.poll_clock = self.poll_clock.max(Instant::now()) + POLL;
                self.settle(self.poll_clock, &st.name)?;
                let s = &self.sessions[st.session];
                if s.done() || self.lmgr.waiting_for(s.backend).is_none() {
                    continue;
                }
                if flags & RETRY == 0 {
                    self.out.push_str(&format!("step {}: {} <waiting ...>\n", st.name, st.sql));
                }
                return Ok(true);
            }
            if start.elapsed() > self.cfg.step_timeout {
                return Err(IsolationError(format!(
                    "{}: step {} timed out after {:.3} s",
                    self.spec.spec.file,
                    st.name,
                    self.cfg.step_timeout.as_secs_f64()
                )));
            }
            if !flushed {
                // About to wait: show what ran so far (`flush`, on the fields `s` leaves free).
                flushed = true;
                if !self.out.is_empty() {
                    (self.emit)(&self.out);
                    self.out.clear();
                }
            }
            s.wait(Duration::from_micros(200));
        }
        if self.step_has_blocker(steps, i) {
            if flags & RETRY == 0 {
                self.out.push_str(&format!("step {}: {} <waiting ...>\n", st.name, st.sql));
            }
            return Ok(true);
        }
        let s = &self.sessions[st.session];
        let r = s.take();
        for n in &r.notices {
            self.out.push_str(&format!("{}: {n}\n", s.name));
        }
        if flags & RETRY != 0 {
            self.out.push_str(&format!("step {}: <... completed>\n", st.name));
        } else {
            self.out.push_str(&format!("step {}: {}\n", st.name, st.sql));
        }
        for set in r.sets.iter().flatten() {
            set.render(&mut self.out);
        }
        if let Some(e) = &r.error {
            self.out.push_str(&format!("ERROR:  {e}\n"));
        }
        self.active[st.session] = None;
        Ok(false)
    }
}
