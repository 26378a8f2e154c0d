//! The machine model: hardware threads, cores, last-level caches and NUMA nodes, and the
//! coherence state of every 64-byte line the simulated code touches.
//!
//! Time is kept in picoseconds (`u64`) inside the model so that sub-nanosecond costs add up
//! exactly; the public API speaks [`std::time::Duration`].

use std::collections::VecDeque;

use crate::cache::{Caches, Lookup};
use crate::profile::MachineProfile;
pub(crate) use crate::units::{LineMap, PS_PER_NS, ps};

/// log2 of the coherence unit: 64-byte lines (x86, and the unit the seeds' padding assumes;
/// POWER8's 128-byte line is not modelled, see docs/sim.md).
pub const LINE_SHIFT: u32 = 6;

/// How an operation uses a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load: the line may be shared with other cores.
    Read,
    /// A store: the line is taken exclusive, other copies are invalidated.
    Write,
    /// A locked read-modify-write (CAS, fetch_add, swap): exclusive, plus the RMW's own cost,
    /// and the line stays busy until the RMW completes.
    Rmw,
}

/// The costs of a profile in picoseconds, and the topology as lookup tables.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    pub(crate) name: String,
    threads_per_core: u32,
    /// Per core: its LLC group and NUMA node.
    core_llc: Vec<u32>,
    cores_per_llc: u32,
    core_node: Vec<u32>,
    /// `node_transfer[a * nodes + b]`: a line between cores on nodes a and b (a != b).
    node_transfer: Vec<u64>,
    /// `node_memory[a * nodes + b]`: a core on node a loading memory homed on node b.
    node_memory: Vec<u64>,
    /// The same for a line's first touch in the run (a cold miss): `node_memory`, or an L1
    /// hit when [`Machine::no_cold_misses`] turned cold misses off.
    cold_memory: Vec<u64>,
    nodes: usize,
    /// Hardware threads in the order the scheduler hands them out: one thread per core first,
    /// spread over sockets, then the second SMT threads, and so on.
    pub(crate) hw_order: Vec<u32>,
    pub(crate) l1: u64,
    smt: u64,
    same_llc: u64,
    same_node: u64,
    pub(crate) rmw: u64,
    /// How long a core keeps a line it received by a read miss before a queued request from
    /// another core takes it (`costs.owner_grace_ns`).
    pub(crate) grace: u64,
    /// `Some(bound)` under nearest-first arbitration (`costs.arbitration_bound` hand-offs),
    /// `None` under FIFO.
    pub(crate) arbitration_bound: Option<u32>,
    pub(crate) fence: u64,
    pub(crate) pause: u64,
    pub(crate) clock_read: u64,
    pub(crate) syscall: u64,
    pub(crate) futex_wait: u64,
    pub(crate) futex_wake: u64,
    pub(crate) wake_latency: u64,
    pub(crate) context_switch: u64,
    pub(crate) time_slice: u64,
    pub(crate) speed_factor: f64,
}

impl Machine {
    /// Builds the lookup tables of a validated profile.
    pub(crate) fn new(p: &MachineProfile) -> Machine {
        let t = &p.topology;
        let c = &p.costs;
        let cores = p.cores();
        let per_node = cores / t.numa_nodes;
        let nodes = t.numa_nodes as usize;
        let core_llc = (0..cores).map(|k| k / t.cores_per_llc).collect();
        let core_node = (0..cores).map(|k| k / per_node).collect();
        let mut node_transfer = vec![0; nodes * nodes];
        let mut node_memory = vec![ps(c.memory_ns); nodes * nodes];
        for a in 0..nodes {
            for b in 0..nodes {
                if a != b {
                    let d = t.numa_distances[a][b];
                    let r = c.remote.iter().find(|r| r.distance == d).expect(
                        "validate() refuses a profile with a NUMA distance that has no costs.remote entry",
                    );
                    node_transfer[a * nodes + b] = ps(r.transfer_ns);
                    node_memory[a * nodes + b] = ps(r.memory_ns);
                }
            }
        }
        let mut hw_order = Vec::with_capacity(p.hw_threads() as usize);
        for smt in 0..t.threads_per_core {
            for k in 0..t.cores_per_socket {
                for s in 0..t.sockets {
                    let core = s * t.cores_per_socket + k;
                    hw_order.push(core * t.threads_per_core + smt);
                }
            }
        }
        Machine {
            name: p.name.clone(),
            threads_per_core: t.threads_per_core,
            core_llc,
            cores_per_llc: t.cores_per_llc,
            core_node,
            node_transfer,
            cold_memory: node_memory.clone(),
            node_memory,
            nodes,
            hw_order,
            l1: ps(c.l1_hit_ns),
            smt: ps(c.smt_sibling_ns),
            same_llc: ps(c.same_llc_ns),
            same_node: ps(c.same_node_ns),
            rmw: ps(c.atomic_rmw_ns),
            grace: ps(c.owner_grace_ns),
            arbitration_bound: match c.arbitration {
                crate::profile::Arbitration::Fifo => None,
                crate::profile::Arbitration::NearestFirst => Some(c.arbitration_bound.floor() as u32),
            },
            fence: ps(c.fence_ns),
            pause: ps(c.pause_ns),
            clock_read: ps(c.clock_read_ns),
            syscall: ps(c.syscall_ns),
            futex_wait: ps(c.futex_wait_ns),
            futex_wake: ps(c.futex_wake_ns),
            wake_latency: ps(c.futex_wake_latency_ns),
            context_switch: ps(c.context_switch_ns),
            time_slice: ps(c.time_slice_ns),
            speed_factor: c.speed_factor,
        }
    }

    /// The core of hardware thread `hw`.
    pub(crate) fn core_of(&self, hw: u32) -> u32 {
        hw / self.threads_per_core
    }

    /// A line handed from core `from` to core `to` (`from != to`), in ps.
    pub(crate) fn transfer(&self, from: u32, to: u32) -> u64 {
        let (nf, nt) = (self.core_node[from as usize], self.core_node[to as usize]);
        if nf != nt {
            self.node_transfer[nf as usize * self.nodes + nt as usize]
        } else if self.core_llc[from as usize] == self.core_llc[to as usize] {
            self.same_llc
        } else {
            self.same_node
        }
    }

    /// Prices a line's first fill from memory as an L1 hit ([`crate::SimConfig::cold_misses`]
    /// off). A line fetched again from memory after the caches evicted it (a capacity miss)
    /// still costs the memory access.
    pub(crate) fn no_cold_misses(&mut self) {
        let l1 = self.l1;
        self.cold_memory.iter_mut().for_each(|c| *c = l1);
    }

    /// A load by core `core` of memory homed on node `home`, in ps: `cold` for the line's first
    /// touch in the run.
    fn memory(&self, core: u32, home: u32, cold: bool) -> u64 {
        let i = self.core_node[core as usize] as usize * self.nodes + home as usize;
        if cold { self.cold_memory[i] } else { self.node_memory[i] }
    }

    /// The LLC group of core `core`.
    pub(crate) fn llc_of(&self, core: u32) -> u32 {
        self.core_llc[core as usize]
    }

    /// A line copied to core `core` from the last-level cache of group `group` (another
    /// group's: priced as a transfer from that group's first core), in ps.
    fn llc_copy(&self, group: u32, core: u32) -> u64 {
        self.transfer(group * self.cores_per_llc, core)
    }
}

/// A set of cores, one bit each ([`crate::profile::MAX_CORES`] bits).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct CoreSet([u64; 4]);

impl CoreSet {
    fn insert(&mut self, c: u32) {
        self.0[(c >> 6) as usize] |= 1 << (c & 63);
    }
    fn remove(&mut self, c: u32) {
        self.0[(c >> 6) as usize] &= !(1 << (c & 63));
    }
    fn contains(&self, c: u32) -> bool {
        self.0[(c >> 6) as usize] & (1 << (c & 63)) != 0
    }
    fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }
    fn only(&self, c: u32) -> bool {
        let mut me = CoreSet::default();
        me.insert(c);
        *self == me
    }
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().enumerate().flat_map(|(w, &bits)| {
            let mut b = bits;
            std::iter::from_fn(move || {
                if b == 0 {
                    return None;
                }
                let i = b.trailing_zeros();
                b &= b - 1;
                Some(w as u32 * 64 + i)
            })
        })
    }
}

const NO_CORE: u32 = u32::MAX;

/// The coherence state of one line.
#[derive(Debug, Clone)]
pub(crate) struct Line {
    /// The core holding it modified/exclusive, or `NO_CORE`.
    owner: u32,
    /// Cores holding a shared copy (empty while there is an owner).
    sharers: CoreSet,
    /// The hardware thread that wrote it last.
    last_writer_hw: u32,
    /// No transfer of this line starts before this time (ps): one hand-off at a time.
    busy_until: u64,
    /// The core that received the line by its last read miss, and until when (ps) it keeps
    /// the line against queued requests of other cores (its grace window; ended early by
    /// that core's own write or RMW of the line).
    grace_core: u32,
    grace_until: u64,
    /// Tasks whose miss waits for the line, in arrival order: the head has a resume event at
    /// the time the line is free for it, the others wait for it to be served.
    pub(crate) waiters: VecDeque<u32>,
    /// Hand-offs in a row that went to a nearer waiter while the oldest one waited (reset
    /// when the oldest is served): the bound of nearest-first arbitration.
    bypassed: u32,
    /// The NUMA node whose memory holds it (the node of the first core to touch it).
    home: u32,
    /// Order of first touch in this run (names unnamed lines deterministically).
    pub(crate) first_touch: u64,
    /// Core-to-core hand-offs of the line's data.
    pub(crate) transfers: u64,
    /// Writes that had to invalidate other cores' shared copies.
    pub(crate) invalidations: u64,
    /// Fills from memory (the first touch's, and refills).
    pub(crate) memory_fills: u64,
    /// Fills from memory of a line touched before: the caches had evicted it (capacity).
    pub(crate) refills: u64,
    /// Fills from a last-level cache (this core's group's or another's) after the line left
    /// every private cache.
    pub(crate) llc_fills: u64,
    /// The LLC groups whose cache holds the line (empty without capacity-limited caches).
    llc: CoreSet,
    /// Accesses of every kind.
    pub(crate) accesses: u64,
}

/// The result of [`Lines::try_access`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    /// Served: the access completes at this time (ps), and the caller performs it now;
    /// `true` when the task was the head of the line's queue and left it.
    Done(u64, bool),
    /// The task is the head of the line's queue and must retry at this time (ps).
    RetryAt(u64),
    /// The task waits behind the queue's head; it is resumed when it becomes the head.
    Queued,
}

/// Every line touched so far, and the caches' tags when they have a capacity.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    pub(crate) map: LineMap<Line>,
    /// The capacity-limited caches (`None`: no capacity, nothing is ever evicted).
    pub(crate) caches: Option<Caches>,
}

impl Line {
    /// Whether core `core` holds the line in the state `access` needs (no transfer).
    fn hit(&self, core: u32, access: Access) -> bool {
        match access {
            Access::Read => self.owner == core || self.sharers.contains(core),
            Access::Write | Access::Rmw => self.owner == core || self.sharers.only(core),
        }
    }

    /// Whether `access` is a read of a line held only in shared state (some core has a copy,
    /// none owns it): served by a sharer without serializing behind other readers.
    fn shared_read(&self, access: Access) -> bool {
        access == Access::Read && self.owner == NO_CORE && !self.sharers.is_empty()
    }

    /// The earliest time (ps) a transfer to core `core` may start: after the transfer in
    /// flight, and after another core's grace window.
    pub(crate) fn free_for(&self, core: u32) -> u64 {
        if self.grace_core != core && self.grace_core != NO_CORE {
            self.busy_until.max(self.grace_until)
        } else {
            self.busy_until
        }
    }
}

impl Lines {
    /// An access by task `task` on hardware thread `hw` that may have to wait for the line:
    /// the coherence protocol's order, with the real memory operation performed when the
    /// access is served (not when it was issued), so that a load returns the value the line
    /// holds when it arrives.
    ///
    /// An access by the core in its grace window is served at once (after a transfer in
    /// flight); so is a hit when no other task waits for the line. A miss is served at once
    /// only when no other task waits and the line is free for this core; otherwise the task
    /// joins the line's queue:
    /// the head retries at the time the line becomes free, the others wait to become head.
    /// On a read miss the receiving core gets `costs.owner_grace_ns` before a queued
    /// request of another core takes the line, so that a load followed by a CAS (a
    /// compare-and-swap loop) can complete as on hardware, where a just-filled line is not
    /// snooped away before the next instruction uses it.
    pub(crate) fn try_access(
        &mut self,
        m: &Machine,
        hw: u32,
        line: u64,
        access: Access,
        t: u64,
        task: u32,
    ) -> Served {
        let core = m.core_of(hw);
        if let Some(l) = self.map.get_mut(&line) {
            let in_grace = l.grace_core == core && t < l.grace_until;
            if !in_grace {
                let head = l.waiters.front().copied();
                // Behind a queue even a hit waits: the queued request snoops the line away.
                if head.is_some_and(|h| h != task) {
                    if !l.waiters.contains(&task) {
                        l.waiters.push_back(task);
                    }
                    return Served::Queued;
                }
                if !l.hit(core, access) {
                    // Every miss waits out another core's grace window (a read during it would
                    // see the value the window's CAS is about to replace); a read of a shared
                    // line then overlaps other readers (it does not extend `busy_until`).
                    let free = l.free_for(core);
                    if t < free {
                        if head.is_none() {
                            l.waiters.push_back(task);
                        }
                        return Served::RetryAt(free);
                    }
                }
            }
            // The head served (in its grace window, or once the line is free) leaves the queue.
            if l.waiters.front() == Some(&task) {
                l.waiters.pop_front();
                return Served::Done(self.access(m, hw, line, access, t), true);
            }
        }
        Served::Done(self.access(m, hw, line, access, t), false)
    }

    /// The task at the head of `line`'s queue and the earliest time it may be served (after
    /// the transfer in flight; a request that must also wait out another core's grace window
    /// finds that out when it retries), if any task waits.
    pub(crate) fn head(&self, line: u64) -> Option<(u32, u64)> {
        let l = self.map.get(&line)?;
        let &task = l.waiters.front()?;
        Some((task, l.busy_until))
    }

    /// Nearest-first arbitration (a no-op under FIFO): before the next head of `line`'s queue
    /// is resumed, moves the waiter nearest to core `from` (the core just served; distance is
    /// the profile's transfer cost, 0 for the same core, ties to the earlier arrival) to the
    /// head, unless the oldest waiter was passed over `arbitration_bound` times in a row
    /// already: then the oldest is served. `core_of` gives a waiter's core (`None`: treated
    /// as farthest). Called when no waiter has a resume event (the head has just left).
    pub(crate) fn arbitrate(
        &mut self,
        m: &Machine,
        line: u64,
        from: u32,
        core_of: impl Fn(u32) -> Option<u32>,
    ) {
        let Some(bound) = m.arbitration_bound else { return };
        let Some(l) = self.map.get_mut(&line) else { return };
        if l.waiters.len() < 2 || l.bypassed >= bound {
            l.bypassed = 0;
            return;
        }
        let dist = |w: u32| match core_of(w) {
            Some(c) if c == from => 0,
            Some(c) => m.transfer(from, c),
            None => u64::MAX,
        };
        let best = l.waiters.iter().enumerate().min_by_key(|&(i, &w)| (dist(w), i)).map_or(0, |(i, _)| i);
        if best == 0 {
            l.bypassed = 0;
        } else if let Some(w) = l.waiters.remove(best) {
            l.waiters.push_front(w);
            l.bypassed += 1;
        }
    }

    /// Charges an access of `access` kind by hardware thread `hw` to line `line`, issued at
    /// time `t` (ps); returns the time the access completes. Updates the coherence state.
    ///
    /// A hit costs `l1` (or the SMT-sibling cost when the other thread of the core wrote the
    /// line last). A miss fetches the line from its owner, the nearest sharer or memory; a
    /// write also invalidates every other copy and pays for the farthest one. A miss starts no
    /// earlier than the line's previous transfer ended (`busy_until`), so cores queue on a hot
    /// line; an RMW keeps the line busy until it completes.
    pub(crate) fn access(&mut self, m: &Machine, hw: u32, line: u64, access: Access, t: u64) -> u64 {
        let core = m.core_of(hw);
        let group = m.llc_of(core);
        // The private cache first (unless the L1 filter holds the line): its victim (another
        // line) loses this core's copy.
        if let Some(c) = self.caches.as_mut()
            && c.l1[core as usize].access(line, line) != Lookup::Hit
        {
            let key = c.key(line);
            if let Lookup::Miss(Some(v)) = c.private[core as usize].access(line, key) {
                c.l1[core as usize].remove(v, v);
                if let Some(vl) = self.map.get_mut(&v) {
                    if vl.owner == core {
                        // A modified line is written back to the LLC, which holds it.
                        vl.owner = NO_CORE;
                        c.private_evictions += 1;
                    } else if vl.sharers.contains(core) {
                        vl.sharers.remove(core);
                        c.private_evictions += 1;
                    }
                }
            }
        }
        let caches = self.caches.as_ref();
        let next = self.map.len() as u64;
        let l = self.map.entry(line).or_insert_with(|| Line {
            owner: NO_CORE,
            sharers: CoreSet::default(),
            last_writer_hw: u32::MAX,
            busy_until: 0,
            grace_core: NO_CORE,
            grace_until: 0,
            waiters: VecDeque::new(),
            bypassed: 0,
            home: m.core_node[core as usize],
            first_touch: next,
            transfers: 0,
            invalidations: 0,
            memory_fills: 0,
            refills: 0,
            llc_fills: 0,
            llc: CoreSet::default(),
            accesses: 0,
        });
        let cold = l.accesses == 0;
        let held = l.owner == core || l.sharers.contains(core);
        l.accesses += 1;
        let local = if l.last_writer_hw != hw
            && l.last_writer_hw != u32::MAX
            && m.core_of(l.last_writer_hw) == core
        {
            m.smt
        } else {
            m.l1
        };
        let start = t.max(l.busy_until);
        let done = match access {
            Access::Read => {
                if l.owner == core || l.sharers.contains(core) {
                    start + local
                } else {
                    let shared = l.shared_read(access);
                    let cost = if l.owner != NO_CORE {
                        l.transfers += 1;
                        let c = m.transfer(l.owner, core);
                        l.sharers.insert(l.owner);
                        l.owner = NO_CORE;
                        c
                    } else if shared {
                        l.transfers += 1;
                        l.sharers.iter().map(|s| m.transfer(s, core)).min().unwrap_or(0)
                    } else {
                        l.fill(m, caches, core, group, cold)
                    };
                    l.sharers.insert(core);
                    let done = start + cost;
                    // Readers of a shared line are served side by side; taking the line from
                    // its owner or from memory is one hand-off that others queue behind.
                    if !shared {
                        l.busy_until = done;
                    }
                    // A read that took the line from its owner or from memory opens the
                    // reader's grace window; a copy from a sharer takes nothing away and opens
                    // none (its readers overlap).
                    if !shared {
                        l.grace_core = core;
                        l.grace_until = done + m.grace;
                    }
                    done
                }
            }
            Access::Write | Access::Rmw => {
                let cost = if l.owner == core {
                    local
                } else if l.owner != NO_CORE {
                    l.transfers += 1;
                    m.transfer(l.owner, core)
                } else if l.sharers.only(core) {
                    // An upgrade from shared to exclusive with no other copy.
                    local
                } else if !l.sharers.is_empty() {
                    let held = l.sharers.contains(core);
                    let far = l
                        .sharers
                        .iter()
                        .filter(|&s| s != core)
                        .map(|s| m.transfer(s, core))
                        .max()
                        .unwrap_or(0);
                    l.invalidations += 1;
                    if !held {
                        l.transfers += 1;
                    }
                    far
                } else {
                    l.fill(m, caches, core, group, cold)
                };
                let missed = l.owner != core && !l.sharers.only(core);
                l.owner = core;
                l.sharers = CoreSet::default();
                l.last_writer_hw = hw;
                let mut done = start + cost;
                if access == Access::Rmw {
                    done += m.rmw;
                }
                if missed || access == Access::Rmw {
                    l.busy_until = done;
                }
                // A write ends any grace window: the owner's, once it has written (a load's
                // CAS done), or another core's, whose copy this write took.
                l.grace_core = NO_CORE;
                l.grace_until = 0;
                done
            }
        };
        if self.caches.is_some() {
            // The line is in this core's group's LLC now; a write leaves it in no other LLC.
            if access == Access::Read {
                l.llc.insert(group);
            } else {
                l.llc = CoreSet::default();
                l.llc.insert(group);
            }
            if !held {
                self.fill_llc(m, group, line);
            }
        }
        done
    }

    /// Inserts `line` into the LLC of `group` (a miss of one of its cores' private caches);
    /// the line it evicts, if that LLC held it, leaves it and every private cache of the group
    /// (an inclusive LLC back-invalidates).
    fn fill_llc(&mut self, m: &Machine, group: u32, line: u64) {
        let Some(c) = self.caches.as_mut() else { return };
        let key = c.key(line);
        let Lookup::Miss(Some(v)) = c.llc[group as usize].access(line, key) else { return };
        let Some(vl) = self.map.get_mut(&v) else { return };
        if !vl.llc.contains(group) {
            return;
        }
        vl.llc.remove(group);
        c.llc_evictions += 1;
        if vl.owner != NO_CORE && m.llc_of(vl.owner) == group {
            vl.owner = NO_CORE;
            c.back_invalidations += 1;
        }
        let in_group: Vec<u32> = vl.sharers.iter().filter(|&s| m.llc_of(s) == group).collect();
        for s in in_group {
            vl.sharers.remove(s);
            c.back_invalidations += 1;
        }
    }
}

impl Line {
    /// The cost (ps) of a fill of a line no core holds, by core `core` of LLC group `group`:
    /// the first touch (`cold`) and a line evicted from every cache cost memory, a line still
    /// in this group's LLC an LLC hit, a line in another group's LLC a transfer from there.
    fn fill(&mut self, m: &Machine, caches: Option<&Caches>, core: u32, group: u32, cold: bool) -> u64 {
        if let Some(c) = caches
            && !cold
        {
            if self.llc.contains(group) {
                self.llc_fills += 1;
                return c.llc_hit;
            }
            if let Some(cost) = self.llc.iter().map(|g| m.llc_copy(g, core)).min() {
                self.llc_fills += 1;
                return cost;
            }
            self.refills += 1;
        }
        self.memory_fills += 1;
        m.memory(core, self.home, cold)
    }
}
