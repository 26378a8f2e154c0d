//! Backends and their published wait events.
//!
//! In PostgreSQL every backend has a `PGPROC` whose `wait_event_info` word it sets before it
//! sleeps and clears after (`pgstat_report_wait_start/end`, 9.6+); `pg_stat_activity` and
//! pg_wait_sampling read those words without any lock. [`BackendStatusArray`] is that array of
//! words, one cache line per backend, and [`WaitSampler`] is a pg_wait_sampling-style thread that
//! reads them at a fixed rate and builds a [`WaitEventProfile`].
//!
//! A thread becomes a backend by [`BackendStatusArray::attach`]; while attached, every
//! [`WaitEventScope`] (which the lock crates open around each sleep) publishes into its slot.
//! Threads that are not attached publish nowhere, at the cost of one thread-local read.
//!
//! [`BackendRegistry`] is the set of backend ids a subsystem with one handle per id (the buffer
//! pool, the WAL) has handed out; its one mutex is the only lock this module takes.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::ids::BackendId;
use crate::sync::thread::JoinHandle;
use crate::sync::{AtomicBool, AtomicU32, Ordering};
use crate::wait_event::WaitEvent;

/// Handle numbers of auxiliary processes (PostgreSQL's checkpointer, startup process, WAL
/// writer, or a loader thread) start here, `2^31`: the subsystems that hand out handles
/// without a backend slot (`BufferPool::attach_auxiliary`, `Wal::attach_auxiliary`) number
/// them from it, and their `attach(id)` refuses ids at or above it.
pub const AUXILIARY_BACKEND_BASE: u32 = 1 << 31;

/// Why a subsystem refused to attach a backend: the error of every `attach(id)` in the
/// workspace (`Lmgr::attach`, `ProcArray::attach`, `BufferPool::attach`, `Wal::attach`), the
/// counterpart of `InitProcess` finding no free `PGPROC` (`proc.c`) or a slot in use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachError {
    /// The id is not below the subsystem's number of backend slots.
    OutOfRange {
        /// The id asked for.
        id: BackendId,
        /// The number of slots (`max_backends`); ids run from 0 to this minus 1.
        max_backends: usize,
    },
    /// A handle for this id is still alive (one handle per backend and subsystem).
    AlreadyAttached {
        /// The id asked for.
        id: BackendId,
        /// The subsystem, as its error messages name it ("ProcArray", "lock manager", ...).
        subsystem: &'static str,
    },
}

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachError::OutOfRange { id, max_backends } => {
                write!(f, "backend id {id} out of range 0..{max_backends}")
            }
            AttachError::AlreadyAttached { id, subsystem } => {
                write!(f, "backend {id} is already attached to the {subsystem}")
            }
        }
    }
}

impl std::error::Error for AttachError {}

/// A broken invariant found by a subsystem's `check_invariants` (`Lmgr`, `BufferPool`): a
/// diagnostic for tests and `--check` runs, naming the object and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvariantViolation(pub String);

impl std::fmt::Display for InvariantViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvariantViolation {}

/// Why [`WaitSampler::try_spawn`] (or [`WaitSampler::validate_hz`]) refused.
#[derive(Debug)]
pub enum WaitSamplerError {
    /// The rate is 0 or above [`WaitSampler::MAX_HZ`].
    BadRate(u32),
    /// The sampler thread could not be spawned.
    Spawn(std::io::Error),
}

impl std::fmt::Display for WaitSamplerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitSamplerError::BadRate(hz) => {
                write!(f, "sampling rate must be 1..={} Hz, got {hz}", WaitSampler::MAX_HZ)
            }
            WaitSamplerError::Spawn(e) => write!(f, "spawning the wait-event sampler thread: {e}"),
        }
    }
}

impl std::error::Error for WaitSamplerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WaitSamplerError::Spawn(e) => Some(e),
            WaitSamplerError::BadRate(_) => None,
        }
    }
}

/// One backend's published wait event: a single `u32`, written by its backend with relaxed
/// stores and read by samplers with relaxed loads. A slot no backend is attached to holds
/// [`DETACHED`] (from [`BackendStatusArray::new`] until [`BackendStatusArray::attach`], and
/// again once its guard drops), which reads as "not waiting" ([`WaitEventSlot::get`]) but lets
/// a sampler leave unused slots out ([`BackendStatusArray::sample_attached_into`]) without a
/// store of its own: attaching and detaching store into the same word as before.
#[derive(Debug)]
pub struct WaitEventSlot {
    event: AtomicU32,
}

/// The raw word of a slot no backend is attached to: a wait-event class no event has, so it
/// unpacks as [`WaitEvent::NONE`].
const DETACHED: u32 = 0xFF00_0000;

impl WaitEventSlot {
    /// Publishes `event` (use [`WaitEvent::NONE`] to clear).
    #[inline]
    pub fn set(&self, event: WaitEvent) {
        self.event.store(event.to_raw(), Ordering::Relaxed);
    }

    /// The currently published event ([`WaitEvent::NONE`] for a slot no backend is attached
    /// to).
    #[inline]
    pub fn get(&self) -> WaitEvent {
        WaitEvent::from_raw(self.event.load(Ordering::Relaxed))
    }

    /// Whether a backend is attached to the slot (between [`BackendStatusArray::attach`] and
    /// the drop of its guard).
    #[inline]
    pub fn is_attached(&self) -> bool {
        self.event.load(Ordering::Relaxed) != DETACHED
    }

    /// The published event if a backend is attached, one load: `None` for a detached slot.
    #[inline]
    fn get_attached(&self) -> Option<WaitEvent> {
        let raw = self.event.load(Ordering::Relaxed);
        (raw != DETACHED).then(|| WaitEvent::from_raw(raw))
    }
}

/// The shared array of wait-event slots, one per backend (`max_backends` entries, each on its
/// own 128-byte line so that publishing never false-shares with a neighbour).
#[derive(Debug)]
pub struct BackendStatusArray {
    slots: Box<[CachePadded<WaitEventSlot>]>,
}

crate::thread_local! {
    static CURRENT: RefCell<Option<(Arc<BackendStatusArray>, BackendId)>> =
        const { RefCell::new(None) };
}

impl BackendStatusArray {
    /// An array for `max_backends` backends, all publishing "not waiting".
    pub fn new(max_backends: usize) -> Arc<BackendStatusArray> {
        let slots: Box<[CachePadded<WaitEventSlot>]> = (0..max_backends)
            .map(|_| CachePadded::new(WaitEventSlot { event: AtomicU32::new(DETACHED) }))
            .collect();
        // For a simulation's hottest-lines table: each slot is a padded line of its own.
        crate::sync::hook::name_elements(&slots, "BackendStatus wait_event_info");
        Arc::new(BackendStatusArray { slots })
    }

    /// Number of backend slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when the array has no slots.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The slot of backend `id`.
    ///
    /// # Panics
    /// If `id` is not below [`len`](Self::len).
    pub fn slot(&self, id: BackendId) -> &WaitEventSlot {
        &self.slots[id.index()]
    }

    /// Makes the calling thread backend `id`: until the returned guard is dropped, wait events
    /// this thread reports are published in slot `id`.
    ///
    /// # Panics
    /// If `id` is out of range, or if the thread is already attached (a thread is one backend).
    pub fn attach(self: &Arc<Self>, id: BackendId) -> AttachedBackend {
        assert!(id.index() < self.len(), "backend id {id} out of range 0..{}", self.len());
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            assert!(c.is_none(), "thread is already attached as a backend");
            *c = Some((Arc::clone(self), id));
        });
        self.slot(id).set(WaitEvent::NONE);
        AttachedBackend { _not_send: std::marker::PhantomData }
    }

    /// Adds one sample of every backend's slot to `profile`.
    pub fn sample_into(&self, profile: &mut WaitEventProfile) {
        for s in self.slots.iter() {
            profile.record(s.get());
        }
    }

    /// Adds one sample of every slot a backend is attached to to `profile`; unused slots
    /// (before a backend connects, after it disconnects) are left out rather than counted as
    /// "not waiting".
    pub fn sample_attached_into(&self, profile: &mut WaitEventProfile) {
        for s in self.slots.iter() {
            if let Some(e) = s.get_attached() {
                profile.record(e);
            }
        }
    }
}

/// Guard returned by [`BackendStatusArray::attach`]; detaches the thread when dropped.
#[derive(Debug)]
pub struct AttachedBackend {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Drop for AttachedBackend {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| {
            if let Some((arr, id)) = c.borrow_mut().take() {
                arr.slot(id).event.store(DETACHED, Ordering::Relaxed);
            }
        });
    }
}

/// The backend id of the calling thread, if it is attached.
pub fn current_backend() -> Option<BackendId> {
    CURRENT.try_with(|c| c.borrow().as_ref().map(|(_, id)| *id)).ok().flatten()
}

fn publish(event: WaitEvent) -> WaitEvent {
    CURRENT
        .try_with(|c| {
            c.borrow().as_ref().map(|(arr, id)| {
                let slot = arr.slot(*id);
                let prev = slot.get();
                slot.set(event);
                prev
            })
        })
        .ok()
        .flatten()
        .unwrap_or(WaitEvent::NONE)
}

/// Publishes `event` for the calling backend while the scope lives, then restores what was
/// published before (PostgreSQL's `pgstat_report_wait_start` / `_end` pair).
///
/// Costs one thread-local read and, for attached threads, two relaxed stores; open it only
/// around a sleep, never on a lock's fast path.
#[derive(Debug)]
pub struct WaitEventScope {
    prev: WaitEvent,
}

impl WaitEventScope {
    /// Starts waiting on `event`.
    #[inline]
    pub fn new(event: WaitEvent) -> WaitEventScope {
        crate::sync::hook::wait_event(event.to_raw());
        WaitEventScope { prev: publish(event) }
    }
}

impl Drop for WaitEventScope {
    #[inline]
    fn drop(&mut self) {
        crate::sync::hook::wait_event(self.prev.to_raw());
        publish(self.prev);
    }
}

/// A histogram of sampled wait events, as pg_wait_sampling's `pg_wait_sampling_profile`.
///
/// Each sample of each backend adds one to the count of the event it was publishing, to
/// [`not_waiting`](Self::not_waiting) (running, or spinning: spinning publishes no event), or,
/// for a backend idle waiting for its client (`Client:*`, [`WaitEvent::CLIENT_READ`]), to
/// [`idle`](Self::idle), which the shares leave out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WaitEventProfile {
    /// Samples per wait event (never a `Client:*` event).
    pub counts: BTreeMap<WaitEvent, u64>,
    /// Samples that found the backend not waiting.
    pub not_waiting: u64,
    /// Samples that found the backend idle, waiting for its client (`Client:*`): not counted
    /// in [`total`](Self::total).
    pub idle: u64,
    /// Sampling rounds taken (each reads every slot once).
    pub rounds: u64,
}

impl WaitEventProfile {
    /// Counts one backend-sample of `event`.
    pub fn record(&mut self, event: WaitEvent) {
        if event.is_none() {
            self.not_waiting += 1;
        } else if event.event_type() == Some(crate::wait_event::WaitEventType::Client) {
            self.idle += 1;
        } else {
            *self.counts.entry(event).or_insert(0) += 1;
        }
    }

    /// Backend-samples recorded waiting or not, the idle ones ([`idle`](Self::idle)) left
    /// out: the denominator of the profile's shares.
    pub fn total(&self) -> u64 {
        self.not_waiting + self.counts.values().sum::<u64>()
    }

    /// Events sorted by descending sample count.
    pub fn sorted(&self) -> Vec<(WaitEvent, u64)> {
        let mut v: Vec<_> = self.counts.iter().map(|(e, n)| (*e, *n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Adds another profile's samples to this one.
    pub fn merge(&mut self, other: &WaitEventProfile) {
        for (e, n) in &other.counts {
            *self.counts.entry(*e).or_insert(0) += n;
        }
        self.not_waiting += other.not_waiting;
        self.idle += other.idle;
        self.rounds += other.rounds;
    }
}

/// The name of the [`WaitSampler`]'s thread: a monitor, not a backend (a simulated machine's
/// report leaves it out of the backends' time).
pub const WAIT_SAMPLER_THREAD: &str = "wait-sampler";

/// The name of a workload's WAL writer thread (`Wal::writer_loop`): a background process,
/// not a backend (a simulated machine's report books its time apart from the backends').
pub const WAL_WRITER_THREAD: &str = "wal-writer";

/// A background thread that samples a [`BackendStatusArray`] `hz` times per second.
#[derive(Debug)]
pub struct WaitSampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<WaitEventProfile>,
}

impl WaitSampler {
    /// The highest sampling rate [`WaitSampler::try_spawn`] accepts, Hz.
    pub const MAX_HZ: u32 = 100_000;

    /// Checks a sampling rate before anything is started: `Ok` for 1..=[`WaitSampler::MAX_HZ`].
    ///
    /// # Errors
    /// [`WaitSamplerError::BadRate`] (its message names no flag) for 0 or a rate above the
    /// maximum.
    pub fn validate_hz(hz: u32) -> Result<(), WaitSamplerError> {
        if (1..=Self::MAX_HZ).contains(&hz) { Ok(()) } else { Err(WaitSamplerError::BadRate(hz)) }
    }

    /// Starts sampling `array` at `hz` rounds per second.
    ///
    /// # Panics
    /// If `hz` is 0 or above 100 000, or the thread cannot be spawned; [`WaitSampler::try_spawn`]
    /// returns those as errors.
    pub fn spawn(array: Arc<BackendStatusArray>, hz: u32) -> WaitSampler {
        Self::try_spawn(array, hz).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`WaitSampler::spawn`] that never panics.
    ///
    /// # Errors
    /// The rate is outside 1..=[`WaitSampler::MAX_HZ`] ([`WaitSampler::validate_hz`]), or the
    /// sampler thread could not be spawned.
    pub fn try_spawn(array: Arc<BackendStatusArray>, hz: u32) -> Result<WaitSampler, WaitSamplerError> {
        Self::spawn_sampling(array, hz, false)
    }

    /// [`WaitSampler::try_spawn`] that samples only the slots a backend is attached to
    /// ([`BackendStatusArray::sample_attached_into`]): started before the backends connect and
    /// stopped after they disconnect, its profile covers each backend's whole life, as the
    /// simulated machine's per-task time does.
    ///
    /// # Errors
    /// As [`WaitSampler::try_spawn`].
    pub fn try_spawn_attached(
        array: Arc<BackendStatusArray>,
        hz: u32,
    ) -> Result<WaitSampler, WaitSamplerError> {
        Self::spawn_sampling(array, hz, true)
    }

    fn spawn_sampling(
        array: Arc<BackendStatusArray>,
        hz: u32,
        attached_only: bool,
    ) -> Result<WaitSampler, WaitSamplerError> {
        Self::validate_hz(hz)?;
        let stop = Arc::new(AtomicBool::new(false));
        let period = Duration::from_nanos(1_000_000_000 / u64::from(hz));
        let stop2 = Arc::clone(&stop);
        let handle = crate::sync::thread::Builder::new()
            .name(WAIT_SAMPLER_THREAD.into())
            .spawn(move || {
                let mut profile = WaitEventProfile::default();
                while !stop2.load(Ordering::Relaxed) {
                    if attached_only {
                        array.sample_attached_into(&mut profile);
                    } else {
                        array.sample_into(&mut profile);
                    }
                    profile.rounds += 1;
                    crate::sync::sleep(period);
                }
                profile
            })
            .map_err(WaitSamplerError::Spawn)?;
        Ok(WaitSampler { stop, handle })
    }

    /// Stops the sampler and returns its profile.
    pub fn stop(self) -> WaitEventProfile {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// The backend ids attached to one subsystem that hands out one handle per id (the buffer
/// pool, the WAL): [`BackendRegistry::claim`] when a handle is made, [`BackendRegistry::release`]
/// when it drops. Its set sits behind a mutex held only to insert or remove one id, under the
/// wait class [`BACKEND_REGISTRY_CLASS`](crate::sync::hook::BACKEND_REGISTRY_CLASS)
/// (`ProcStructLock`, which guards PostgreSQL's free `PGPROC` lists in `proc.c`).
///
/// It is the bare set (no name) so that it takes the room of the set it replaced: the
/// subsystems' structs, whose field order Rust chooses, keep their cache-line layout.
pub struct BackendRegistry {
    attached: crate::sync::Mutex<std::collections::HashSet<u32>>,
}

impl BackendRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        BackendRegistry { attached: crate::sync::Mutex::new(std::collections::HashSet::new()) }
    }

    /// Records `id` as attached to `subsystem` (as [`AttachError::AlreadyAttached`] names it:
    /// "buffer pool", "WAL").
    ///
    /// # Errors
    /// [`AttachError::OutOfRange`] if `id` is not below [`AUXILIARY_BACKEND_BASE`],
    /// [`AttachError::AlreadyAttached`] while `id` is attached.
    pub fn claim(&self, id: BackendId, subsystem: &'static str) -> Result<(), AttachError> {
        if id.0 >= AUXILIARY_BACKEND_BASE {
            return Err(AttachError::OutOfRange { id, max_backends: AUXILIARY_BACKEND_BASE as usize });
        }
        let class = crate::sync::hook::wait_class(crate::sync::hook::BACKEND_REGISTRY_CLASS);
        let inserted = self.attached.lock().insert(id.0);
        drop(class);
        if !inserted {
            return Err(AttachError::AlreadyAttached { id, subsystem });
        }
        Ok(())
    }

    /// Frees `id` (its handle dropped). An auxiliary handle number (at or above
    /// [`AUXILIARY_BACKEND_BASE`]) was never claimed: nothing to do.
    pub fn release(&self, id: u32) {
        if id < AUXILIARY_BACKEND_BASE {
            let _class = crate::sync::hook::wait_class(crate::sync::hook::BACKEND_REGISTRY_CLASS);
            self.attached.lock().remove(&id);
        }
    }
}

impl Default for BackendRegistry {
    fn default() -> Self {
        BackendRegistry::new()
    }
}

impl std::fmt::Debug for BackendRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendRegistry").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tranche::TrancheId;

    #[test]
    fn the_registry_refuses_a_second_claim_and_ids_out_of_range_until_released() {
        let r = BackendRegistry::new();
        r.claim(BackendId(3), "WAL").unwrap();
        assert_eq!(
            r.claim(BackendId(3), "WAL").unwrap_err(),
            AttachError::AlreadyAttached { id: BackendId(3), subsystem: "WAL" }
        );
        assert_eq!(
            r.claim(BackendId(AUXILIARY_BACKEND_BASE), "WAL").unwrap_err(),
            AttachError::OutOfRange { id: BackendId(AUXILIARY_BACKEND_BASE), max_backends: 1 << 31 }
        );
        r.release(AUXILIARY_BACKEND_BASE);
        r.release(3);
        r.claim(BackendId(3), "WAL").unwrap();
        r.claim(BackendId(4), "WAL").unwrap();
    }

    #[test]
    fn scopes_publish_and_restore() {
        let arr = BackendStatusArray::new(4);
        let arr2 = Arc::clone(&arr);
        std::thread::spawn(move || {
            let _b = arr2.attach(BackendId(2));
            assert_eq!(current_backend(), Some(BackendId(2)));
            {
                let _w = WaitEventScope::new(WaitEvent::lwlock(TrancheId::PROC_ARRAY));
                assert_eq!(arr2.slot(BackendId(2)).get().to_string(), "LWLock:ProcArray");
                {
                    let _inner = WaitEventScope::new(WaitEvent::WAL_SYNC);
                    assert_eq!(arr2.slot(BackendId(2)).get(), WaitEvent::WAL_SYNC);
                }
                assert_eq!(arr2.slot(BackendId(2)).get().to_string(), "LWLock:ProcArray");
            }
            assert!(arr2.slot(BackendId(2)).get().is_none());
        })
        .join()
        .unwrap();
        assert_eq!(current_backend(), None);
        // Unattached threads publish nowhere.
        let _w = WaitEventScope::new(WaitEvent::BUFFER_PIN);
        let mut p = WaitEventProfile::default();
        arr.sample_into(&mut p);
        assert_eq!(p.not_waiting, 4);
        assert!(p.counts.is_empty());
    }

    #[test]
    fn attached_sampling_skips_unused_slots_and_leaves_idle_out() {
        let arr = BackendStatusArray::new(4);
        let arr2 = Arc::clone(&arr);
        let mut p = WaitEventProfile::default();
        std::thread::spawn(move || {
            let _b = arr2.attach(BackendId(1));
            assert!(arr2.slot(BackendId(1)).is_attached());
            let _w = WaitEventScope::new(WaitEvent::lwlock(TrancheId::PROC_ARRAY));
            let mut q = WaitEventProfile::default();
            arr2.sample_attached_into(&mut q);
            q
        })
        .join()
        .map(|q| p.merge(&q))
        .unwrap();
        // One attached slot, waiting on ProcArray; the three unused slots are not samples.
        assert_eq!(p.total(), 1);
        assert_eq!(p.counts.get(&WaitEvent::lwlock(TrancheId::PROC_ARRAY)).copied(), Some(1));
        assert!(!arr.slot(BackendId(1)).is_attached(), "detached when the guard dropped");
        let mut q = WaitEventProfile::default();
        arr.sample_attached_into(&mut q);
        assert_eq!((q.total(), q.idle), (0, 0));
        // A backend idle for its client is counted apart, out of the shares' denominator.
        arr.slot(BackendId(0)).set(WaitEvent::CLIENT_READ);
        arr.sample_into(&mut q);
        assert_eq!((q.idle, q.not_waiting, q.total()), (1, 3, 3));
        assert!(q.counts.is_empty());
    }

    #[test]
    fn sampler_sees_a_published_wait() {
        let arr = BackendStatusArray::new(2);
        arr.slot(BackendId(1)).set(WaitEvent::lock(0));
        let s = WaitSampler::spawn(Arc::clone(&arr), 1000);
        std::thread::sleep(Duration::from_millis(30));
        let p = s.stop();
        assert!(p.rounds >= 1);
        assert_eq!(p.counts.get(&WaitEvent::lock(0)).copied(), Some(p.rounds));
        assert_eq!(p.not_waiting, p.rounds);
        assert_eq!(p.total(), 2 * p.rounds);
    }

    #[test]
    fn bad_sampling_rates_are_errors_not_panics() {
        let arr = BackendStatusArray::new(1);
        for hz in [0, WaitSampler::MAX_HZ + 1, u32::MAX] {
            assert!(WaitSampler::validate_hz(hz).is_err());
            let e = WaitSampler::try_spawn(Arc::clone(&arr), hz).unwrap_err();
            assert!(matches!(e, WaitSamplerError::BadRate(r) if r == hz), "{e}");
            assert!(e.to_string().contains(&hz.to_string()), "{e}");
        }
        assert!(WaitSampler::validate_hz(WaitSampler::MAX_HZ).is_ok());
        WaitSampler::try_spawn(arr, WaitSampler::MAX_HZ).unwrap().stop();
    }
}
