//! The deadlock detector (`src/backend/storage/lmgr/deadlock.c`, 7.1+; queue rearrangement for
//! soft deadlocks as in the lmgr `README`, "Deadlock Detection").
//!
//! It runs on a [`WaitGraph`], a copy of every lock that has waiters, taken while the caller
//! holds all partition locks. A *hard* edge A→B means B holds a mode that conflicts with A's
//! request; a *soft* edge A→B means B is ahead of A in the same wait queue with a conflicting
//! request. Only cycles through the starting backend are searched. A cycle of hard edges only
//! is a deadlock; a cycle with soft edges may be broken by reordering wait queues: the
//! detector tries constraint sets "waiter before blocker" over the soft edges it finds,
//! recursively, computing each queue's order by a topological sort that keeps arrival order as
//! far as the constraints allow, until a configuration has no cycle through any backend
//! involved (`DeadLockCheckRecurse`, `TestConfiguration`, `ExpandConstraints`, `TopoSort`).

use std::collections::{HashMap, HashSet};

use lockstack_common::BackendId;

use crate::mode::LockMode;
use crate::table::{ProcLock, Waiter};
use crate::tag::LockTag;

/// One lock with waiters, as the detector sees it.
#[derive(Clone, Debug)]
pub(crate) struct GraphLock {
    pub(crate) tag: LockTag,
    pub(crate) holders: Vec<ProcLock>,
    pub(crate) queue: Vec<Waiter>,
}

/// The waits-for information of the whole lock table.
#[derive(Clone, Debug, Default)]
pub(crate) struct WaitGraph {
    pub(crate) locks: Vec<GraphLock>,
    /// Waiting backend → (index into `locks`, mode requested).
    pub(crate) waiting: HashMap<BackendId, (usize, LockMode)>,
}

impl WaitGraph {
    pub(crate) fn push(&mut self, lock: GraphLock) {
        let idx = self.locks.len();
        for w in &lock.queue {
            self.waiting.insert(w.backend, (idx, w.mode));
        }
        self.locks.push(lock);
    }
}

/// One step of a deadlock cycle: `backend` waits for `mode` on `tag`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DetailEntry {
    pub(crate) backend: BackendId,
    pub(crate) tag: LockTag,
    pub(crate) mode: LockMode,
}

/// What [`deadlock_check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// No cycle through the starting backend.
    NoDeadlock,
    /// Cycles exist only through soft edges, and these queue orders (lock index, new queue)
    /// remove them (`DS_SOFT_DEADLOCK`).
    Soft(Vec<(usize, Vec<Waiter>)>),
    /// An unresolvable cycle, starting at the checking backend (`DS_HARD_DEADLOCK`).
    Hard(Vec<DetailEntry>),
}

/// The `deadlock detected` detail: one line per edge, as `DeadLockReport` words it.
pub(crate) fn describe(details: &[DetailEntry]) -> String {
    let n = details.len();
    (0..n)
        .map(|i| {
            let d = &details[i];
            let next = &details[(i + 1) % n];
            format!(
                "Backend {} waits for {} on {}; blocked by backend {}.",
                d.backend, d.mode, d.tag, next.backend
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edge {
    waiter: BackendId,
    blocker: BackendId,
    lock: usize,
}

struct Detector<'g> {
    g: &'g WaitGraph,
    max_backends: usize,
    cur: Vec<Edge>,
    possible: Vec<Edge>,
    wait_orders: Vec<(usize, Vec<Waiter>)>,
    /// The backend a cycle search started from (`visitedProcs[0]`).
    search_start: Option<BackendId>,
    /// Every backend the current cycle search has visited (`visitedProcs`, a set here: with
    /// thousands of backends queued on one lock a linear scan per visit made each check cubic).
    visited: HashSet<BackendId>,
    /// Per lock (index into the graph), how long a prefix of its queue the current search has
    /// found all visited and none the start: a later walk of that queue starts after it, as
    /// every entry there would return at once. Without it, thousands of waiters on one lock
    /// made each check quadratic in the queue's length (each walked the queue up to itself).
    explored: HashMap<usize, usize>,
    /// Queue entries and backends examined (a work count for the tests' complexity bound).
    steps: usize,
    details: Vec<Option<DetailEntry>>,
    n_details: usize,
}

/// `DeadLockCheck(start)`. `max_backends` bounds the search as PostgreSQL's preallocated
/// workspace does (`MaxBackends` current constraints, 4 × `MaxBackends` possible ones).
pub(crate) fn deadlock_check(g: &WaitGraph, start: BackendId, max_backends: usize) -> Outcome {
    deadlock_check_counted(g, start, max_backends).0
}

/// [`deadlock_check`] and the work it did (queue entries and backends examined).
fn deadlock_check_counted(g: &WaitGraph, start: BackendId, max_backends: usize) -> (Outcome, usize) {
    let mut d = Detector {
        g,
        max_backends: max_backends.max(1),
        cur: Vec::new(),
        possible: Vec::new(),
        wait_orders: Vec::new(),
        search_start: None,
        visited: HashSet::new(),
        explored: HashMap::new(),
        steps: 0,
        details: Vec::new(),
        n_details: 0,
    };
    if d.recurse(start) {
        // Record the cycle of the unmodified configuration for the report.
        d.wait_orders.clear();
        if d.find_lock_cycle(start).is_none() {
            return (Outcome::NoDeadlock, d.steps);
        }
        let details = d.details[..d.n_details]
            .iter()
            .map(|e| e.clone().expect("the first n_details details are always filled"))
            .collect();
        return (Outcome::Hard(details), d.steps);
    }
    let steps = d.steps;
    (if d.wait_orders.is_empty() { Outcome::NoDeadlock } else { Outcome::Soft(d.wait_orders) }, steps)
}

impl Detector<'_> {
    /// `DeadLockCheckRecurse`: true when no deadlock-free configuration extends `cur`.
    fn recurse(&mut self, start: BackendId) -> bool {
        let edges = match self.test_configuration(start) {
            None => return true,
            Some(e) => e,
        };
        if edges.is_empty() {
            return false;
        }
        if self.cur.len() >= self.max_backends {
            return true;
        }
        let old = self.possible.len();
        self.possible.extend_from_slice(&edges);
        for i in 0..edges.len() {
            self.cur.push(self.possible[old + i]);
            if !self.recurse(start) {
                return false;
            }
            self.cur.pop();
        }
        self.possible.truncate(old);
        true
    }

    /// `TestConfiguration`: None for a hard deadlock (or an inconsistent constraint set),
    /// otherwise the soft edges of a remaining cycle (empty when there is none).
    fn test_configuration(&mut self, start: BackendId) -> Option<Vec<Edge>> {
        if self.possible.len() + self.max_backends > 4 * self.max_backends {
            return None;
        }
        if !self.expand_constraints() {
            return None;
        }
        let mut soft = Vec::new();
        let cur = self.cur.clone();
        for c in &cur {
            for p in [c.waiter, c.blocker] {
                if let Some(edges) = self.find_lock_cycle(p) {
                    if edges.is_empty() {
                        return None;
                    }
                    soft = edges;
                }
            }
        }
        if let Some(edges) = self.find_lock_cycle(start) {
            if edges.is_empty() {
                return None;
            }
            soft = edges;
        }
        Some(soft)
    }

    /// `ExpandConstraints`: one new queue order per lock named in `cur`, later constraints
    /// first; false if some queue cannot satisfy its constraints.
    fn expand_constraints(&mut self) -> bool {
        self.wait_orders.clear();
        for i in (0..self.cur.len()).rev() {
            let lock = self.cur[i].lock;
            if self.wait_orders.iter().any(|(l, _)| *l == lock) {
                continue;
            }
            match self.topo_sort(lock, &self.cur[..=i]) {
                Some(order) => self.wait_orders.push((lock, order)),
                None => return false,
            }
        }
        true
    }

    /// `TopoSort`: the queue of `lock` reordered so that each constraint's waiter precedes its
    /// blocker, otherwise as close to the current order as possible.
    fn topo_sort(&self, lock: usize, constraints: &[Edge]) -> Option<Vec<Waiter>> {
        let queue = &self.g.locks[lock].queue;
        let n = queue.len();
        let mut topo: Vec<Option<Waiter>> = queue.iter().copied().map(Some).collect();
        let mut before = vec![0usize; n];
        let mut after: Vec<Vec<usize>> = vec![Vec::new(); n];
        for c in constraints.iter().filter(|c| c.lock == lock) {
            let j = queue.iter().rposition(|w| w.backend == c.waiter)?;
            let k = queue.iter().rposition(|w| w.backend == c.blocker)?;
            before[j] += 1;
            after[k].push(j);
        }
        let mut out: Vec<Option<Waiter>> = vec![None; n];
        let mut last = n;
        for i in (0..n).rev() {
            while last > 0 && topo[last - 1].is_none() {
                last -= 1;
            }
            let j = (0..last).rev().find(|&j| topo[j].is_some() && before[j] == 0)?;
            out[i] = topo[j].take();
            for &p in &after[j] {
                before[p] -= 1;
            }
        }
        out.into_iter().collect()
    }

    /// `FindLockCycle`: Some(soft edges of the cycle) if a cycle through `check` exists.
    fn find_lock_cycle(&mut self, check: BackendId) -> Option<Vec<Edge>> {
        self.visited.clear();
        self.explored.clear();
        self.search_start = Some(check);
        self.n_details = 0;
        let mut soft = Vec::new();
        if self.find_recurse(check, 0, &mut soft) { Some(soft) } else { None }
    }

    fn set_detail(&mut self, depth: usize, e: DetailEntry) {
        if self.details.len() <= depth {
            self.details.resize(depth + 1, None);
        }
        self.details[depth] = Some(e);
    }

    fn find_recurse(&mut self, proc_: BackendId, depth: usize, soft: &mut Vec<Edge>) -> bool {
        self.steps += 1;
        if self.visited.contains(&proc_) {
            if self.search_start == Some(proc_) {
                // Back at the start: a cycle through it.
                self.n_details = depth;
                return true;
            }
            // A cycle not through the start: its members will find it themselves.
            return false;
        }
        self.visited.insert(proc_);
        let Some(&(lock_idx, mode)) = self.g.waiting.get(&proc_) else {
            return false;
        };
        let lock = &self.g.locks[lock_idx];
        let tag = lock.tag;
        let conflict = mode.conflict_mask();
        let detail = DetailEntry { backend: proc_, tag, mode };
        // Hard edges: holders of conflicting modes.
        let holders: Vec<BackendId> = lock
            .holders
            .iter()
            .filter(|p| p.backend != proc_ && p.hold_mask & conflict != 0)
            .map(|p| p.backend)
            .collect();
        for h in holders {
            if self.find_recurse(h, depth + 1, soft) {
                self.set_detail(depth, detail);
                return true;
            }
        }
        // Soft edges: conflicting requests ahead of us in the (possibly reordered) queue.
        // Walked by index, not cloned: the search never changes `wait_orders`, and a clone per
        // visit of a queue thousands long made each check cubic.
        let order = self.wait_orders.iter().position(|(l, _)| *l == lock_idx);
        let len = order.map_or(lock.queue.len(), |o| self.wait_orders[o].1.len());
        let mut i = self.explored.get(&lock_idx).copied().unwrap_or(0);
        while i < len {
            self.steps += 1;
            let w = match order {
                Some(o) => self.wait_orders[o].1[i],
                None => lock.queue[i],
            };
            if w.backend == proc_ {
                break;
            }
            if w.mode.bit() & conflict != 0 && self.find_recurse(w.backend, depth + 1, soft) {
                self.set_detail(depth, detail);
                soft.push(Edge { waiter: proc_, blocker: w.backend, lock: lock_idx });
                return true;
            }
            // Entries are never un-visited during one search, so a prefix all visited (and
            // without the start) stays so; extend it past this entry if it qualifies.
            let prefix = self.explored.entry(lock_idx).or_insert(0);
            if *prefix == i && self.visited.contains(&w.backend) && self.search_start != Some(w.backend) {
                *prefix = i + 1;
            }
            i += 1;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::LockMode::*;
    use lockstack_common::Oid;

    fn b(i: u32) -> BackendId {
        BackendId(i)
    }
    fn rel(i: u32) -> LockTag {
        LockTag::relation(Oid(5), Oid(16384 + i))
    }
    fn holder(i: u32, m: LockMode) -> ProcLock {
        ProcLock { backend: b(i), hold_mask: m.bit() }
    }
    fn w(i: u32, m: LockMode) -> Waiter {
        Waiter { backend: b(i), mode: m }
    }

    #[test]
    fn two_way_hard_cycle() {
        let mut g = WaitGraph::default();
        // 1 holds a1, waits for a2; 2 holds a2, waits for a1.
        g.push(GraphLock {
            tag: rel(1),
            holders: vec![holder(1, AccessExclusive), ProcLock { backend: b(2), hold_mask: 0 }],
            queue: vec![w(2, AccessExclusive)],
        });
        g.push(GraphLock {
            tag: rel(2),
            holders: vec![holder(2, AccessExclusive), ProcLock { backend: b(1), hold_mask: 0 }],
            queue: vec![w(1, AccessExclusive)],
        });
        match deadlock_check(&g, b(1), 8) {
            Outcome::Hard(d) => {
                assert_eq!(d.len(), 2);
                assert_eq!(d[0].backend, b(1));
                assert_eq!(d[1].backend, b(2));
                let text = describe(&d);
                assert_eq!(
                    text,
                    "Backend 1 waits for AccessExclusiveLock on relation 16386 of database 5; blocked by backend 2.\n\
                     Backend 2 waits for AccessExclusiveLock on relation 16385 of database 5; blocked by backend 1."
                );
            }
            o => panic!("expected a hard deadlock, got {o:?}"),
        }
    }

    /// Thousands of sessions queued on one lock. A check walks each queue
    /// entry ahead of it once, not once per entry it visits (which was quadratic per check,
    /// and with every waiter checking, cubic in all: 5,000 isolation sessions on one advisory
    /// lock did not finish in 170 s).
    #[test]
    fn a_check_behind_a_long_queue_is_linear() {
        for n in [500u32, 2000, 5000] {
            let mut g = WaitGraph::default();
            g.push(GraphLock {
                tag: rel(1),
                holders: vec![holder(0, Exclusive)],
                queue: (1..=n).map(|i| w(i, Exclusive)).collect(),
            });
            let (o, steps) = deadlock_check_counted(&g, b(n), n as usize + 1);
            assert_eq!(o, Outcome::NoDeadlock);
            assert!(steps <= 4 * n as usize, "{n} waiters: {steps} steps");
        }
    }

    #[test]
    fn no_cycle_is_no_deadlock() {
        let mut g = WaitGraph::default();
        g.push(GraphLock {
            tag: rel(1),
            holders: vec![holder(1, AccessExclusive), ProcLock { backend: b(2), hold_mask: 0 }],
            queue: vec![w(2, AccessShare)],
        });
        assert_eq!(deadlock_check(&g, b(2), 8), Outcome::NoDeadlock);
    }

    #[test]
    fn soft_edge_cycle_rearranged() {
        // Lock A is held Share by 1; 3 waits on A for RowExclusive (hard edge 3→1).
        // Lock B is held AccessShare by 3; 2 waits on B for AccessExclusive (hard edge 2→3) and
        // 1 waits on B for AccessShare behind 2 (soft edge 1→2). Cycle 1→2→3→1 has one soft
        // edge; putting 1 ahead of 2 on B breaks it (and 1 is then grantable).
        let mut g = WaitGraph::default();
        g.push(GraphLock {
            tag: rel(1),
            holders: vec![holder(1, Share), ProcLock { backend: b(3), hold_mask: 0 }],
            queue: vec![w(3, RowExclusive)],
        });
        g.push(GraphLock {
            tag: rel(2),
            holders: vec![
                holder(3, AccessShare),
                ProcLock { backend: b(2), hold_mask: 0 },
                ProcLock { backend: b(1), hold_mask: 0 },
            ],
            queue: vec![w(2, AccessExclusive), w(1, AccessShare)],
        });
        match deadlock_check(&g, b(1), 8) {
            Outcome::Soft(orders) => {
                assert_eq!(orders.len(), 1);
                assert_eq!(orders[0].0, 1);
                assert_eq!(orders[0].1, vec![w(1, AccessShare), w(2, AccessExclusive)]);
            }
            o => panic!("expected a soft deadlock, got {o:?}"),
        }
    }
}
