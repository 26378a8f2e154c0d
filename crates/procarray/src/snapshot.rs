//! MVCC snapshots and the "is this xid still running for me?" test.

use lockstack_common::TransactionId;

/// An MVCC snapshot: which xids count as still running (`SnapshotData` in
/// `src/include/utils/snapshot.h`, the fields `GetSnapshotData` fills).
///
/// * Every xid that precedes `xmin` had finished when the snapshot was taken.
/// * Every xid at or after `xmax` (= `latest_completed_xid` + 1 then) counts as running.
/// * In between, the xids in `xip` (top-level) and `subxip` (subtransactions) were running;
///   the others had finished.
/// * If `suboverflowed`, some running backend had more than 64 subtransactions, `subxip` is
///   incomplete, and a subxid must first be mapped to its top-level xid through pg_subtrans.
///
/// The taking backend's own xids are never listed (PostgreSQL checks them separately with
/// `TransactionIdIsCurrentTransactionId`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// All xids before this one had finished.
    pub xmin: TransactionId,
    /// This xid and all later ones count as running.
    pub xmax: TransactionId,
    /// Running top-level xids in `[xmin, xmax)`, in ProcArray order (not sorted).
    pub xip: Vec<TransactionId>,
    /// Running subtransaction xids (complete only if `!suboverflowed`), not sorted.
    pub subxip: Vec<TransactionId>,
    /// Some running backend's subxid cache had overflowed.
    pub suboverflowed: bool,
    /// `Dense` layout: the completion counter the snapshot was computed at (0: not cacheable);
    /// PostgreSQL 14's `snapXactCompletionCount`.
    pub xact_completion_count: u64,
}

impl Snapshot {
    /// An empty snapshot with room for `max_backends` top-level xids (PostgreSQL mallocs
    /// `xip` for `maxProcs` entries on first use); `subxip` grows on demand.
    pub fn with_capacity(max_backends: usize) -> Snapshot {
        Snapshot { xip: Vec::with_capacity(max_backends), ..Default::default() }
    }
}

/// Parent look-up in pg_subtrans (`SubTransGetTopmostTransaction`, `subtrans.c`).
///
/// `lockstack_clog::SubTrans` implements it on the SLRU; tests use an in-memory map.
pub trait SubTransLookup {
    /// Why a look-up failed (I/O on pg_subtrans segment files, for the SLRU-backed one).
    type Error;
    /// The topmost ancestor of `xid`: follow parent links until an xid with no recorded
    /// parent. A top-level xid (or one never recorded) returns itself.
    ///
    /// # Errors
    /// Whatever the store reports (for `lockstack_clog::SubTrans`, a page read failure).
    fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error>;
}

/// pg_subtrans on the SLRU (`lockstack_clog::SubTrans`), the store the engine uses.
impl SubTransLookup for lockstack_clog::SubTrans {
    type Error = lockstack_clog::SubTransError;
    fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error> {
        lockstack_clog::SubTrans::get_topmost_parent(self, xid)
    }
}

/// `XidInMVCCSnapshot` (`snapmgr.c`, 8.3+): true if `xid` must be treated as still running by
/// `snapshot` (its changes invisible), false if it had finished when the snapshot was taken (the
/// caller then consults CLOG for commit or abort).
///
/// Special xids (invalid, bootstrap, frozen) precede every normal xid and return false. If the
/// snapshot overflowed, subxids are mapped to their topmost parent with `subtrans` first, so a
/// transaction's subtransactions stay invisible exactly as long as the transaction does, also
/// after it commits. Costs one pass over `subxip` and/or `xip` (both unsorted, as in PG).
///
/// # Errors
/// Only from `subtrans`, which is consulted only when the snapshot overflowed.
pub fn xid_in_mvcc_snapshot<S: SubTransLookup>(
    xid: TransactionId,
    snapshot: &Snapshot,
    subtrans: &S,
) -> Result<bool, S::Error> {
    if xid.precedes(snapshot.xmin) {
        return Ok(false);
    }
    if xid.follows_or_equals(snapshot.xmax) {
        return Ok(true);
    }
    let top = if snapshot.suboverflowed {
        let top = subtrans.get_topmost_parent(xid)?;
        // A parent that finished before the snapshot's xmin is finished for us too.
        if top.precedes(snapshot.xmin) {
            return Ok(false);
        }
        top
    } else {
        if snapshot.subxip.contains(&xid) {
            return Ok(true);
        }
        xid
    };
    Ok(snapshot.xip.contains(&top))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Map(HashMap<u32, u32>);
    impl SubTransLookup for Map {
        type Error = std::convert::Infallible;
        fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error> {
            let mut x = xid.0;
            while let Some(&p) = self.0.get(&x) {
                x = p;
            }
            Ok(TransactionId(x))
        }
    }

    fn snap(xmin: u32, xmax: u32, xip: &[u32], subxip: &[u32], over: bool) -> Snapshot {
        Snapshot {
            xmin: TransactionId(xmin),
            xmax: TransactionId(xmax),
            xip: xip.iter().map(|&x| TransactionId(x)).collect(),
            subxip: subxip.iter().map(|&x| TransactionId(x)).collect(),
            suboverflowed: over,
            xact_completion_count: 0,
        }
    }

    #[test]
    fn bounds_and_lists() {
        let st = Map(HashMap::new());
        let s = snap(10, 20, &[10, 15], &[16], false);
        assert!(!xid_in_mvcc_snapshot(TransactionId(9), &s, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(TransactionId(10), &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId(11), &s, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(TransactionId(16), &s, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(TransactionId(20), &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId::FROZEN, &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId::INVALID, &s, &st).unwrap());
    }

    #[test]
    fn overflowed_snapshots_use_the_parent() {
        let st = Map(HashMap::from([(17, 15), (18, 17), (12, 5)]));
        let s = snap(10, 20, &[15], &[], true);
        assert!(xid_in_mvcc_snapshot(TransactionId(18), &s, &st).unwrap(), "grandchild of a running xact");
        assert!(!xid_in_mvcc_snapshot(TransactionId(12), &s, &st).unwrap(), "child of a finished old xact");
        assert!(!xid_in_mvcc_snapshot(TransactionId(13), &s, &st).unwrap());
    }

    #[test]
    fn works_across_the_wrap() {
        let st = Map(HashMap::new());
        let s = snap(u32::MAX - 1, 5, &[u32::MAX - 1, 3], &[], false);
        assert!(xid_in_mvcc_snapshot(TransactionId(u32::MAX - 1), &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId(u32::MAX), &s, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(TransactionId(3), &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId(4), &s, &st).unwrap());
        assert!(xid_in_mvcc_snapshot(TransactionId(5), &s, &st).unwrap());
        assert!(!xid_in_mvcc_snapshot(TransactionId(u32::MAX - 2), &s, &st).unwrap());
    }
}
