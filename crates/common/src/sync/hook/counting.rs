//! [`Counting`]: a [`SimBackend`] that runs nothing in virtual time and only counts the facade
//! operations by kind and call site, for tests that check what the lock stack reports. Takes
//! its own host mutex around the counts.

// Under loom the facade does not dispatch to a backend, so most of this module is unused there.
#![cfg_attr(loom, allow(dead_code))]

use std::any::Any;
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::seam::{Access, SimBackend, Site, TaskId};

/// What [`Counting`] counts: one slot per kind of facade operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// An atomic load.
    AtomicRead,
    /// An atomic store.
    AtomicWrite,
    /// An atomic read-modify-write (including lock words).
    AtomicRmw,
    /// A fence.
    Fence,
    /// A [`touch`] of plain shared data.
    Touch,
    /// A spin hint.
    SpinHint,
    /// A yield.
    Yield,
    /// A park.
    Park,
    /// An unpark.
    Unpark,
    /// A clock read.
    Now,
    /// A sleep.
    Sleep,
    /// A spawn.
    Spawn,
    /// A join.
    Join,
    /// A thread-local access.
    TaskLocal,
}

impl Op {
    /// Every kind, in declaration order.
    pub const ALL: [Op; 14] = [
        Op::AtomicRead,
        Op::AtomicWrite,
        Op::AtomicRmw,
        Op::Fence,
        Op::Touch,
        Op::SpinHint,
        Op::Yield,
        Op::Park,
        Op::Unpark,
        Op::Now,
        Op::Sleep,
        Op::Spawn,
        Op::Join,
        Op::TaskLocal,
    ];
}

/// One [`touch`] (or atomic access) as [`Counting::with_log`] records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Touched {
    /// An atomic access (`false`: a [`touch`] of plain data).
    pub atomic: bool,
    /// First byte's address.
    pub addr: usize,
    /// Bytes.
    pub len: usize,
    /// Read or write.
    pub access: Access,
    /// The caller's source file (as `Location::file` gives it).
    pub file: &'static str,
    /// The caller's source line.
    pub line: u32,
}

/// A task's unpark token for [`Counting`]: set by `unpark`, consumed by `park`.
type Token = (std::sync::Mutex<bool>, std::sync::Condvar);

/// A backend that runs every operation natively on host threads (one per task) and counts the
/// operations by kind and by call site: the proof, in tests, that every facade operation of a
/// piece of code reaches the hook. Its clock is host time since the backend was made.
pub struct Counting {
    counts: [std::sync::atomic::AtomicU64; 14],
    sites: std::sync::Mutex<HashMap<(Op, &'static str, u32), u64>>,
    next_task: std::sync::atomic::AtomicU64,
    tokens: std::sync::Mutex<HashMap<TaskId, Arc<Token>>>,
    handles: std::sync::Mutex<HashMap<TaskId, std::thread::JoinHandle<()>>>,
    start: std::time::Instant,
    /// Every touch, in order, when made with [`Counting::with_log`].
    log: Option<std::sync::Mutex<Vec<Touched>>>,
    /// Every name forwarded through [`SimBackend::name_line`], in order.
    named: std::sync::Mutex<Vec<(usize, String)>>,
}

std::thread_local! {
    /// The [`Counting`] task id of this host thread (0: not assigned yet).
    static COUNTING_TASK: Cell<TaskId> = const { Cell::new(0) };
    /// The [`Counting`] backend's thread-locals of this host thread.
    static COUNTING_LOCALS: std::cell::RefCell<HashMap<usize, Box<dyn Any>>> = std::cell::RefCell::new(HashMap::new());
}

impl Default for Counting {
    fn default() -> Counting {
        Counting::new()
    }
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting").field("counts", &self.counts).finish()
    }
}

impl Counting {
    /// A backend with every count at zero.
    pub fn new() -> Counting {
        Counting {
            counts: Default::default(),
            sites: std::sync::Mutex::new(HashMap::new()),
            next_task: std::sync::atomic::AtomicU64::new(1),
            tokens: std::sync::Mutex::new(HashMap::new()),
            handles: std::sync::Mutex::new(HashMap::new()),
            start: std::time::Instant::now(),
            log: None,
            named: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// A backend that also keeps every [`touch`] with its address, length, access and call
    /// site (for tests that check which bytes an operation reports; memory grows with each
    /// touch, so only for short runs).
    pub fn with_log() -> Counting {
        Counting { log: Some(std::sync::Mutex::new(Vec::new())), ..Counting::new() }
    }

    /// The touches (and atomic accesses) recorded so far, oldest first (empty unless made with [`Counting::with_log`]).
    pub fn touches(&self) -> Vec<Touched> {
        match &self.log {
            Some(l) => l.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            None => Vec::new(),
        }
    }

    /// Forgets the recorded touches (the counts stay).
    pub fn clear_touches(&self) {
        if let Some(l) = &self.log {
            l.lock().unwrap_or_else(|e| e.into_inner()).clear();
        }
    }

    /// Whether one recorded [`touch`] (not an atomic) with `access` covers every byte of
    /// `addr..addr + len`.
    pub fn touched(&self, addr: usize, len: usize, access: Access) -> bool {
        self.touches()
            .iter()
            .any(|t| !t.atomic && t.access == access && t.addr <= addr && addr + len <= t.addr + t.len)
    }

    /// Whether the recorded touches and atomic accesses with `access`, together, cover every
    /// byte of `addr..addr + len` (a record copied in as eight-byte atomic words).
    pub fn covered(&self, addr: usize, len: usize, access: Access) -> bool {
        let mut r: Vec<(usize, usize)> =
            self.touches().iter().filter(|t| t.access == access).map(|t| (t.addr, t.addr + t.len)).collect();
        r.sort_unstable();
        let (mut at, end) = (addr, addr + len);
        for (a, b) in r {
            if a <= at && b > at {
                at = b;
            }
            if at >= end {
                return true;
            }
        }
        at >= end
    }

    /// The names forwarded to this backend through [`SimBackend::name_line`], oldest first.
    pub fn named(&self) -> Vec<(usize, String)> {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many operations of kind `op` ran so far.
    pub fn count(&self, op: Op) -> u64 {
        self.counts[op as usize].load(Ordering::Relaxed)
    }

    /// How many operations of kind `op` were called from `file` (a path suffix), any line.
    pub fn count_in(&self, op: Op, file: &str) -> u64 {
        let sites = self.sites.lock().unwrap_or_else(|e| e.into_inner());
        sites.iter().filter(|((o, f, _), _)| *o == op && f.ends_with(file)).map(|(_, n)| *n).sum()
    }

    fn bump(&self, op: Op, site: Option<Site>) {
        self.counts[op as usize].fetch_add(1, Ordering::Relaxed);
        if let Some(s) = site {
            *self
                .sites
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry((op, s.file(), s.line()))
                .or_insert(0) += 1;
        }
    }

    fn task(&self) -> TaskId {
        COUNTING_TASK.with(|t| {
            if t.get() == 0 {
                t.set(self.next_task.fetch_add(1, Ordering::Relaxed));
            }
            t.get()
        })
    }

    fn token(&self, task: TaskId) -> Arc<Token> {
        self.tokens.lock().unwrap_or_else(|e| e.into_inner()).entry(task).or_default().clone()
    }
}

impl SimBackend for Counting {
    fn atomic(&self, addr: usize, size: usize, access: Access, site: Site) {
        let op = match access {
            Access::Read => Op::AtomicRead,
            Access::Write => Op::AtomicWrite,
            Access::Rmw => Op::AtomicRmw,
        };
        self.bump(op, Some(site));
        if let Some(l) = &self.log {
            let t = Touched { atomic: true, addr, len: size, access, file: site.file(), line: site.line() };
            l.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
    }

    fn fence(&self, site: Site) {
        self.bump(Op::Fence, Some(site));
    }

    fn touch(&self, addr: usize, len: usize, access: Access, site: Site) {
        self.bump(Op::Touch, Some(site));
        if let Some(l) = &self.log {
            let t = Touched { atomic: false, addr, len, access, file: site.file(), line: site.line() };
            l.lock().unwrap_or_else(|e| e.into_inner()).push(t);
        }
    }

    fn name_line(&self, addr: usize, name: &str) {
        self.named.lock().unwrap_or_else(|e| e.into_inner()).push((addr, name.to_string()));
    }

    fn spin_hint(&self, site: Site) {
        self.bump(Op::SpinHint, Some(site));
        std::hint::spin_loop();
    }

    fn yield_now(&self, site: Site) {
        self.bump(Op::Yield, Some(site));
        std::thread::yield_now();
    }

    fn current_task(&self) -> TaskId {
        self.task()
    }

    fn park(&self, deadline: Option<Duration>) -> bool {
        self.bump(Op::Park, None);
        let tok = self.token(self.task());
        let mut set = tok.0.lock().unwrap_or_else(|e| e.into_inner());
        while !*set {
            match deadline {
                None => set = tok.1.wait(set).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let left = d.saturating_sub(self.start.elapsed());
                    if left.is_zero() {
                        return false;
                    }
                    set = tok.1.wait_timeout(set, left).unwrap_or_else(|e| e.into_inner()).0;
                }
            }
        }
        *set = false;
        true
    }

    fn unpark(&self, task: TaskId) {
        self.bump(Op::Unpark, None);
        let tok = self.token(task);
        *tok.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        tok.1.notify_all();
    }

    fn now(&self) -> Duration {
        self.bump(Op::Now, None);
        self.start.elapsed()
    }

    fn sleep(&self, d: Duration) {
        self.bump(Op::Sleep, None);
        std::thread::sleep(d);
    }

    fn spawn(&self, name: Option<String>, f: Box<dyn FnOnce() + Send>) -> TaskId {
        self.bump(Op::Spawn, None);
        let id = self.next_task.fetch_add(1, Ordering::Relaxed);
        let mut b = std::thread::Builder::new();
        if let Some(n) = name {
            b = b.name(n);
        }
        let h = b
            .spawn(move || {
                COUNTING_TASK.with(|t| t.set(id));
                f()
            })
            .expect("the OS spawns the counted thread (as std::thread::spawn, which panics when it cannot)");
        self.handles.lock().unwrap_or_else(|e| e.into_inner()).insert(id, h);
        id
    }

    fn join(&self, task: TaskId) -> std::thread::Result<()> {
        self.bump(Op::Join, None);
        let h = self.handles.lock().unwrap_or_else(|e| e.into_inner()).remove(&task);
        match h {
            Some(h) => h.join(),
            None => Ok(()),
        }
    }

    fn task_local(&self, key: usize, init: &mut dyn FnMut() -> Box<dyn Any>) -> *const dyn Any {
        self.bump(Op::TaskLocal, None);
        // `init` may itself use thread-locals, so the map is not borrowed while it runs.
        if let Some(p) = COUNTING_LOCALS.with(|m| m.borrow().get(&key).map(|b| &**b as *const dyn Any)) {
            return p;
        }
        let v = init();
        COUNTING_LOCALS.with(|m| &**m.borrow_mut().entry(key).or_insert(v) as *const dyn Any)
    }
}
