//! Random interleavings of begin / assign xid / subxact / subxact abort / commit / abort /
//! reconnect / lazy VACUUM / snapshot across simulated backends, driven from one thread. Every snapshot's
//! answer for every xid must equal a brute-force oracle built from the event history, when the
//! snapshot is taken and again at the end (after everything committed), for every layout,
//! strategy and loop knob, starting at ordinary xids and just below 2^31 and 2^32.
//!
//! The four active backends sit `spread` ids apart among up to 25 idle members (random per
//! case), so that the snapshot loops' multi-member steps (the PGXACT loop's unrolled groups,
//! the dense loop's all-idle chunks) run over idle and busy groups alike, not just their tails.

mod common;

use std::collections::HashMap;

use common::MemSubTrans;
use lockstack_common::{BackendId, TransactionId};
use lockstack_procarray::{
    Backend, EndXactRole, EndXactStrategy, GlobalXminMode, Layout, PROC_IN_VACUUM, ProcArray,
    ProcArrayConfig, Snapshot, xid_in_mvcc_snapshot,
};
use proptest::prelude::*;

const BACKENDS: usize = 4;

#[derive(Clone, Debug)]
enum Op {
    Begin(usize),
    AssignXid(usize),
    Subxacts(usize, u8),
    AbortLastSubxact(usize),
    End(usize),
    Snapshot(usize),
    ResetXmin(usize),
    Reconnect(usize),
    /// Lazy VACUUM starts in this backend's transaction (`PROC_IN_VACUUM`; skipped if it has
    /// an xid, as lazy VACUUM never holds one).
    Vacuum(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let b = 0..BACKENDS;
    prop_oneof![
        1 => b.clone().prop_map(Op::Begin),
        4 => b.clone().prop_map(Op::AssignXid),
        2 => (b.clone(), 1u8..4).prop_map(|(b, n)| Op::Subxacts(b, n)),
        1 => (b.clone(), 60u8..70).prop_map(|(b, n)| Op::Subxacts(b, n)),
        1 => b.clone().prop_map(Op::AbortLastSubxact),
        4 => b.clone().prop_map(Op::End),
        5 => b.clone().prop_map(Op::Snapshot),
        1 => b.clone().prop_map(Op::ResetXmin),
        1 => b.clone().prop_map(Op::Reconnect),
        1 => b.prop_map(Op::Vacuum),
    ]
}

#[derive(Clone, Debug)]
struct XidInfo {
    /// Event index at which the xid stopped running (top-level end), if it has.
    completed_at: Option<usize>,
    /// Event index of the subtransaction abort that removed it, if any.
    aborted_at: Option<usize>,
}

struct Taken {
    at: usize,
    snap: Snapshot,
    own: Vec<TransactionId>,
}

struct Model {
    first: TransactionId,
    info: HashMap<u32, XidInfo>,
    /// Per backend: (top xid, live subxids).
    running: Vec<(TransactionId, Vec<TransactionId>)>,
    /// Per backend: advertised xmin (what the code should have published).
    xmin: Vec<TransactionId>,
    /// Per backend: `PROC_IN_VACUUM` is set (its xmin is then ignored by the horizon).
    vacuum: Vec<bool>,
    /// Per backend: its subxid cache overflowed in this transaction. Sticky until the top-level
    /// transaction ends, as PostgreSQL's `subxidStatus.overflowed`: aborting subtransactions
    /// removes their xids from the cache but never clears the flag.
    overflowed: Vec<bool>,
    assigned: u64,
}

impl Model {
    /// Expected `xid_in_mvcc_snapshot` answer for `xid` in a snapshot taken at event `at`, or
    /// `None` when the answer is not determined (own xids; subxids aborted before `at`).
    fn expected(&self, xid: TransactionId, at: usize, own: &[TransactionId]) -> Option<bool> {
        if own.contains(&xid) {
            return None;
        }
        match self.info.get(&xid.0) {
            // The xid just before the first one: finished long ago.
            None if xid == self.first.prev() => Some(false),
            // Never assigned (yet): a future xid counts as running.
            None => Some(true),
            Some(i) => {
                if matches!(i.aborted_at, Some(a) if a < at) {
                    return None;
                }
                Some(!matches!(i.completed_at, Some(c) if c < at))
            }
        }
    }

    fn every_xid(&self) -> Vec<TransactionId> {
        let mut v = Vec::new();
        let mut x = self.first;
        for _ in 0..self.assigned + 3 {
            v.push(x);
            x = x.next();
        }
        // A few xids before the first one: long finished.
        v.push(self.first.prev());
        v
    }
}

fn older(a: TransactionId, b: TransactionId) -> TransactionId {
    if b.is_normal() && b.precedes(a) { b } else { a }
}

fn check(model: &Model, t: &Taken, subtrans: &MemSubTrans, when: &str) -> Result<(), TestCaseError> {
    let s = &t.snap;
    prop_assert!(s.xmin.precedes_or_equals(s.xmax), "{when}: xmin {} > xmax {}", s.xmin, s.xmax);
    for x in &s.xip {
        prop_assert!(x.follows_or_equals(s.xmin) && x.precedes(s.xmax), "{when}: {x} outside [xmin, xmax)");
    }
    // Subxids are not filtered by xmax (PostgreSQL keeps the lock hold short), but they follow
    // their parent, which is at or after xmin.
    for x in &s.subxip {
        prop_assert!(x.follows(s.xmin), "{when}: subxid {x} before xmin");
    }
    // The taker's own xids are never listed (PostgreSQL checks them separately).
    for o in &t.own {
        prop_assert!(!s.xip.contains(o) && !s.subxip.contains(o), "{when}: own xid {o} listed: {s:?}");
    }
    for xid in model.every_xid() {
        if let Some(exp) = model.expected(xid, t.at, &t.own) {
            let got = xid_in_mvcc_snapshot(xid, s, subtrans).unwrap();
            prop_assert_eq!(got, exp, "{}: xid {} in snapshot taken at event {}: {:?}", when, xid, t.at, s);
        }
    }
    Ok(())
}

/// Where the active backends sit among idle members: active backend `b` has id `b * spread`,
/// and ids up to `(BACKENDS - 1) * spread + tail` are members.
#[derive(Copy, Clone, Debug)]
struct Placement {
    spread: usize,
    tail: usize,
}

impl Placement {
    fn id(self, b: usize) -> BackendId {
        BackendId((b * self.spread) as u32)
    }
    fn members(self) -> usize {
        (BACKENDS - 1) * self.spread + 1 + self.tail
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    layout: Layout,
    strategy: EndXactStrategy,
    lazy: bool,
    knobs91: bool,
    first: u32,
    place: Placement,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut cfg = ProcArrayConfig::new(place.members());
    cfg.layout = layout;
    cfg.end_xact = strategy;
    cfg.global_xmin = if lazy { GlobalXminMode::Lazy } else { GlobalXminMode::EverySnapshot };
    cfg.skip_subxids_without_xid = !knobs91;
    cfg.fast_xid_compare = !knobs91;
    cfg.first_xid = TransactionId(first);
    let pa = ProcArray::new(cfg).unwrap();
    let subtrans = MemSubTrans::default();
    let mut backends: Vec<Option<Backend>> =
        (0..BACKENDS).map(|b| Some(pa.attach(place.id(b)).unwrap())).collect();
    let _idle: Vec<Backend> = (0..place.members())
        .filter(|&i| i % place.spread != 0 || i / place.spread >= BACKENDS)
        .map(|i| pa.attach(BackendId(i as u32)).unwrap())
        .collect();
    let mut model = Model {
        first: TransactionId(first),
        info: HashMap::new(),
        running: vec![(TransactionId::INVALID, Vec::new()); BACKENDS],
        xmin: vec![TransactionId::INVALID; BACKENDS],
        vacuum: vec![false; BACKENDS],
        overflowed: vec![false; BACKENDS],
        assigned: 0,
    };
    let mut taken: Vec<Taken> = Vec::new();

    for (at, op) in ops.iter().enumerate() {
        match *op {
            Op::Begin(b) => {
                backends[b].as_mut().unwrap().start_transaction();
            }
            Op::AssignXid(b) | Op::Subxacts(b, _) if model.vacuum[b] => {}
            Op::AssignXid(b) => {
                let be = backends[b].as_mut().unwrap();
                let had = be.xid();
                let x = be.assign_xid();
                if !had.is_valid() {
                    prop_assert_eq!(x, pa.next_xid().prev());
                    model.info.insert(x.0, XidInfo { completed_at: None, aborted_at: None });
                    model.running[b].0 = x;
                    model.assigned += 1;
                }
            }
            Op::Subxacts(b, n) => {
                for _ in 0..n {
                    let be = backends[b].as_mut().unwrap();
                    let had = be.xid();
                    let s = be.assign_subxid();
                    let top = be.xid();
                    subtrans.set_parent(s, top);
                    if !had.is_valid() {
                        model.info.insert(top.0, XidInfo { completed_at: None, aborted_at: None });
                        model.running[b].0 = top;
                        model.assigned += 1;
                    }
                    model.info.insert(s.0, XidInfo { completed_at: None, aborted_at: None });
                    model.running[b].1.push(s);
                    model.assigned += 1;
                }
                let be = backends[b].as_ref().unwrap();
                model.overflowed[b] |= model.running[b].1.len() > 64;
                prop_assert_eq!(be.subxids_overflowed(), model.overflowed[b]);
            }
            Op::AbortLastSubxact(b) => {
                if let Some(s) = model.running[b].1.pop() {
                    backends[b].as_mut().unwrap().abort_subxids(&[s]).unwrap();
                    model.info.get_mut(&s.0).unwrap().aborted_at = Some(at);
                }
            }
            Op::End(b) => {
                let out = backends[b].as_mut().unwrap().end_transaction();
                let (top, subs) = std::mem::take(&mut model.running[b]);
                model.running[b].0 = TransactionId::INVALID;
                model.overflowed[b] = false;
                prop_assert_eq!(out.xid, top);
                if top.is_valid() {
                    prop_assert!(matches!(
                        out.role,
                        EndXactRole::Exclusive | EndXactRole::FlexDirect | EndXactRole::GroupAlone
                    ));
                    for x in std::iter::once(top).chain(subs) {
                        model.info.get_mut(&x.0).unwrap().completed_at = Some(at);
                    }
                } else {
                    prop_assert_eq!(out.role, EndXactRole::ReadOnly);
                }
                model.xmin[b] = TransactionId::INVALID;
                model.vacuum[b] = false;
                prop_assert_eq!(backends[b].as_ref().unwrap().vacuum_flags(), 0);
            }
            Op::Vacuum(b) => {
                if !model.running[b].0.is_valid() {
                    backends[b].as_mut().unwrap().set_vacuum_flags(PROC_IN_VACUUM).unwrap();
                    model.vacuum[b] = true;
                }
            }
            Op::ResetXmin(b) => {
                backends[b].as_mut().unwrap().reset_xmin();
                model.xmin[b] = TransactionId::INVALID;
            }
            Op::Reconnect(b) => {
                let (top, subs) = std::mem::take(&mut model.running[b]);
                model.running[b].0 = TransactionId::INVALID;
                model.overflowed[b] = false;
                if top.is_valid() {
                    for x in std::iter::once(top).chain(subs) {
                        model.info.get_mut(&x.0).unwrap().completed_at = Some(at);
                    }
                }
                model.xmin[b] = TransactionId::INVALID;
                model.vacuum[b] = false;
                backends[b].take().unwrap().detach();
                backends[b] = Some(pa.attach(place.id(b)).unwrap());
                let members = pa.members();
                prop_assert!(members.windows(2).all(|w| w[0] < w[1]), "ProcArray order {:?}", members);
                prop_assert_eq!(members.len(), place.members());
            }
            Op::Snapshot(b) => {
                let be = backends[b].as_mut().unwrap();
                let snap = be.get_snapshot_data().clone();
                if !model.xmin[b].is_valid() {
                    model.xmin[b] = snap.xmin;
                }
                let own: Vec<TransactionId> = std::iter::once(model.running[b].0)
                    .chain(model.running[b].1.iter().copied())
                    .filter(|x| x.is_valid())
                    .collect();
                let t = Taken { at, snap, own };
                check(&model, &t, &subtrans, "at once")?;
                // The global xmin horizon, against brute force: the oldest of xmax, this
                // snapshot's xmin, every advertised xmin and every running top-level xid, except
                // those of backends in lazy VACUUM.
                let mut horizon = older(t.snap.xmax, t.snap.xmin);
                for i in (0..BACKENDS).filter(|&i| !model.vacuum[i]) {
                    horizon = older(horizon, model.xmin[i]);
                    horizon = older(horizon, model.running[i].0);
                }
                let got = backends[b].as_mut().unwrap().recent_global_xmin();
                prop_assert_eq!(got, horizon, "recent_global_xmin");
                taken.push(t);
            }
        }
    }
    // End everything, then re-check every snapshot: answers must not change when the
    // transactions they saw as running commit (overflowed ones go through pg_subtrans).
    let n_ops = ops.len();
    for (b, be) in backends.iter_mut().enumerate() {
        let (top, subs) = std::mem::take(&mut model.running[b]);
        be.as_mut().unwrap().end_transaction();
        if top.is_valid() {
            for x in std::iter::once(top).chain(subs) {
                model.info.get_mut(&x.0).unwrap().completed_at = Some(n_ops);
            }
        }
    }
    for t in &taken {
        check(&model, t, &subtrans, "after all ended")?;
    }
    let stats = pa.stats();
    prop_assert_eq!(stats.snapshots_taken + stats.snapshots_reused, taken.len() as u64);
    if layout != Layout::Dense {
        prop_assert_eq!(stats.snapshots_reused, 0);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn snapshots_match_the_oracle(
        ops in prop::collection::vec(op(), 1..60),
        first in prop_oneof![Just(3u32), Just((1u32 << 31) - 40), Just(u32::MAX - 40), 3u32..],
        lazy in any::<bool>(),
        knobs91 in any::<bool>(),
        spread in 1usize..8,
        tail in 0usize..5,
    ) {
        let place = Placement { spread, tail };
        for layout in Layout::ALL {
            for strategy in EndXactStrategy::ALL {
                run(layout, strategy, lazy, knobs91, first, place, &ops)?;
            }
        }
    }
}
