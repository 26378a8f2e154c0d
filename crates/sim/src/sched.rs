//! The scheduler: hardware threads, the run queue, preemption, blocking and waking, in
//! virtual time (the event heap). Methods of the executor's state ([`crate::state::Exec`]);
//! no lock.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::panic::Location;

use crate::state::{
    EV_RESUME, EV_TIMER, Ev, Exec, NONE, Payload, SITE_START, State, Task, TaskLocals, UNCLASSIFIED,
};

impl Exec {
    /// True when another event comes before the running task's clock, so it must wait its
    /// turn in the heap.
    pub(crate) fn must_yield(&self, id: u32) -> bool {
        match self.heap.peek() {
            None => false,
            Some(Reverse(ev)) => (ev.time(), ev.task()) < (self.tasks[id as usize].clock, id),
        }
    }

    /// Queues the running task to resume at its clock.
    pub(crate) fn push_resume(&mut self, id: u32) {
        let time = self.tasks[id as usize].clock;
        self.heap.push(Reverse(Ev::new(time, id, EV_RESUME, 0)));
    }

    /// Queues a timer for task `id` at `time`, valid while its park generation is unchanged.
    pub(crate) fn push_timer(&mut self, id: u32, time: u64) {
        let generation = self.tasks[id as usize].generation;
        self.heap.push(Reverse(Ev::new(time, id, EV_TIMER, generation)));
    }

    /// After an operation that did not block: preempts the task when its slice is used and
    /// another task waits for a hardware thread. Returns whether it was preempted.
    pub(crate) fn maybe_preempt(&mut self, id: u32) -> bool {
        let t = &self.tasks[id as usize];
        if self.ready.is_empty() || t.clock - t.slice_start < self.m.time_slice {
            return false;
        }
        self.preemptions += 1;
        self.requeue(id);
        true
    }

    /// Gives the task's hardware thread to the head of the run queue and queues the task
    /// behind it (a preemption or a yield with waiters).
    pub(crate) fn requeue(&mut self, id: u32) {
        let now = self.tasks[id as usize].clock;
        self.release_hw(id, now);
        let t = &mut self.tasks[id as usize];
        t.state = State::Ready;
        t.since = now;
        self.ready.push_back(id);
    }

    pub(crate) fn ready_is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// Puts task `id` on hardware thread `hw` at time `at` (plus a context switch when `switch`
    /// and the thread last ran another task).
    fn dispatch(&mut self, id: u32, hw: u32, mut at: u64, switch: bool) {
        let last = self.hw_last_task[hw as usize];
        if last != id && last != NONE {
            self.context_switches += 1;
            if switch {
                at += self.m.context_switch;
            }
        }
        self.hw_last_task[hw as usize] = id;
        self.hw_task[hw as usize] = id;
        self.running += 1;
        self.max_running = self.max_running.max(self.running);
        let t = &mut self.tasks[id as usize];
        t.hw = hw;
        t.state = State::Running;
        t.clock = t.clock.max(at);
        t.slice_start = t.clock;
        self.push_resume(id);
    }

    /// Frees task `id`'s hardware thread at time `at`; the head of the run queue takes it.
    pub(crate) fn release_hw(&mut self, id: u32, at: u64) {
        let hw = self.tasks[id as usize].hw;
        debug_assert_ne!(hw, NONE);
        let t = &mut self.tasks[id as usize];
        t.hw = NONE;
        t.last_hw = hw;
        self.hw_task[hw as usize] = NONE;
        self.running -= 1;
        if let Some(next) = self.ready.pop_front() {
            let n = &mut self.tasks[next as usize];
            n.runnable_ps += at.saturating_sub(n.since);
            self.dispatch(next, hw, at, true);
        }
    }

    /// Task `id` becomes runnable at `at`: on a free hardware thread (its last one if free,
    /// else the first free in the scheduler's order) or at the back of the run queue.
    pub(crate) fn make_ready(&mut self, id: u32, at: u64) {
        let last = self.tasks[id as usize].last_hw;
        let hw = if last != NONE && self.hw_task[last as usize] == NONE {
            Some(last)
        } else {
            self.m.hw_order.iter().copied().find(|&h| self.hw_task[h as usize] == NONE)
        };
        match hw {
            Some(h) => self.dispatch(id, h, at, false),
            None => {
                let t = &mut self.tasks[id as usize];
                t.state = State::Ready;
                t.since = at;
                self.ready.push_back(id);
            }
        }
    }

    /// Books the time task `id` spent blocked (since `since`) until `at`, by what it did.
    pub(crate) fn end_block(&mut self, id: u32, at: u64) {
        let t = &mut self.tasks[id as usize];
        let d = at.saturating_sub(t.since);
        match t.state {
            State::Parked => *t.waiting_ps.entry(t.wait_class.unwrap_or(UNCLASSIFIED)).or_insert(0) += d,
            // A sleep under a wait class is a wait of that class (a spinlock's back-off sleep is
            // `Timeout:SpinDelay`, a modelled fsync `IO:WALSync`), not idle sleeping.
            State::Sleeping => match t.wait_class {
                Some(c) => *t.waiting_ps.entry(c).or_insert(0) += d,
                None => t.sleeping_ps += d,
            },
            State::Joining(_) => t.joining_ps += d,
            _ => {}
        }
    }

    /// Blocks the running task `id` in `state` at its clock, freeing its hardware thread.
    pub(crate) fn block(&mut self, id: u32, state: State, site: &'static Location<'static>) {
        let now = self.tasks[id as usize].clock;
        let t = &mut self.tasks[id as usize];
        t.state = state;
        t.since = now;
        t.wait_site = Some(site);
        t.generation = t.generation.wrapping_add(1);
        self.release_hw(id, now);
    }

    /// Wakes a parked task at `at` (an unpark: `result` true; a time-out: false).
    /// The wake latency counts as part of the wait.
    pub(crate) fn wake(&mut self, id: u32, at: u64, result: bool) {
        let when = at + self.m.wake_latency;
        self.end_block(id, when);
        let t = &mut self.tasks[id as usize];
        t.generation = t.generation.wrapping_add(1);
        t.park_result = result;
        t.wait_site = None;
        self.make_ready(id, when);
    }

    /// Creates a task record, runnable at `at`.
    pub(crate) fn new_task(&mut self, name: String, at: u64, f: Box<dyn FnOnce()>) -> u32 {
        let id = self.tasks.len() as u32;
        self.tasks.push(Task {
            name,
            clock: at,
            state: State::Ready,
            hw: NONE,
            last_hw: NONE,
            last_site: SITE_START,
            slice_start: at,
            token: false,
            generation: 0,
            park_result: false,
            wait_site: None,
            wait_class: None,
            since: at,
            outcome: None,
            joined: false,
            joiners: Vec::new(),
            locals: TaskLocals::default(),
            yielder: std::ptr::null(),
            seg_start: None,
            ops: 0,
            region_depth: 0,
            running_ps: 0,
            spinning_ps: BTreeMap::new(),
            waiting_ps: BTreeMap::new(),
            sleeping_ps: 0,
            joining_ps: 0,
            runnable_ps: 0,
            panicked: false,
        });
        self.spawned.push((id, f));
        self.make_ready(id, at);
        id
    }

    /// The task ends (its exit operation ran at its clock): frees its hardware thread, wakes
    /// its joiners after the futex latency.
    pub(crate) fn finish(&mut self, id: u32, outcome: Result<(), Payload>) {
        let now = self.tasks[id as usize].clock;
        let t = &mut self.tasks[id as usize];
        t.panicked = outcome.is_err();
        t.outcome = Some(outcome);
        let joiners = std::mem::take(&mut t.joiners);
        self.release_hw(id, now);
        self.tasks[id as usize].state = State::Finished;
        for j in joiners {
            let when = now + self.m.wake_latency;
            self.end_block(j, when);
            self.make_ready(j, when);
        }
        if id == 0 {
            self.main_done = true;
            self.end_time = now;
        }
    }
}
