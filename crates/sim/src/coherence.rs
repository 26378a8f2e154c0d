//! The coherence hand-off seen from the executor: an access to a line that may have to wait
//! for it (the line's queue of waiters, [`crate::machine::Lines::try_access`]), and which waiter
//! the line goes to next: arrival order (`fifo`) or the nearest waiter with a bound on how
//! often the oldest is passed over (`nearest-first`). Methods of the executor's state; no lock.

use crate::machine::{Access, LINE_SHIFT, Served};
use crate::state::{After, Exec, NONE};

impl Exec {
    /// Charges an access to every line of `[addr, addr + len)`. One line: through the line's
    /// queue ([`crate::machine::Lines::try_access`]), answering [`After::Retry`] while the
    /// task waits for it. Several lines (a page, a tuple): issued one L1 cycle apart (misses
    /// overlap), each served after its line's transfer in flight without queueing, and the
    /// clock advances to the last completion.
    pub(crate) fn access_range(&mut self, id: u32, addr: usize, len: usize, access: Access) -> After {
        let len = len.max(1);
        let first = (addr as u64) >> LINE_SHIFT;
        let last = (addr as u64).saturating_add(len as u64 - 1) >> LINE_SHIFT;
        let t = &self.tasks[id as usize];
        let (hw, start) = (t.hw, t.clock);
        if first == last {
            return match self.lines.try_access(&self.m, hw, first, access, start, id) {
                Served::Done(done, left_queue) => {
                    self.charge(id, done - start);
                    if left_queue {
                        self.resume_line_head(first, hw);
                    }
                    After::Continue
                }
                Served::RetryAt(at) => {
                    self.charge(id, at - start);
                    self.push_resume(id);
                    After::Retry
                }
                Served::Queued => After::Retry,
            };
        }
        let mut done = start;
        for (i, line) in (first..=last).enumerate() {
            let issue = start + i as u64 * self.m.l1;
            done = done.max(self.lines.access(&self.m, hw, line, access, issue));
        }
        self.charge(id, done - start);
        After::Continue
    }

    /// Gives the head of `line`'s queue (if a task waits) a resume event at the time the line
    /// is free for it; the time until then is charged to it as a stall.
    ///
    /// Under `costs.arbitration = "nearest-first"` the head is first chosen among the waiters
    /// ([`crate::machine::Lines::arbitrate`]): the one nearest to `from_hw`'s core, the core the
    /// line was just handed to.
    fn resume_line_head(&mut self, line: u64, from_hw: u32) {
        if self.m.arbitration_bound.is_some() {
            let from = self.m.core_of(from_hw);
            let tasks = &self.tasks;
            let m = &self.m;
            self.lines.arbitrate(m, line, from, |w| {
                let hw = tasks[w as usize].hw;
                (hw != NONE).then(|| m.core_of(hw))
            });
        }
        if let Some((task, free)) = self.lines.head(line) {
            let clock = self.tasks[task as usize].clock;
            let at = free.max(clock);
            self.charge(task, at - clock);
            self.push_resume(task);
        }
    }
}
