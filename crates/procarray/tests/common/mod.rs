//! Helpers shared by the integration tests: an in-memory pg_subtrans.

#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Mutex;

use lockstack_common::TransactionId;
use lockstack_procarray::SubTransLookup;

/// pg_subtrans as a map from subxid to parent, single-threaded.
#[derive(Default)]
pub(crate) struct MemSubTrans(pub RefCell<HashMap<u32, u32>>);

impl MemSubTrans {
    pub(crate) fn set_parent(&self, xid: TransactionId, parent: TransactionId) {
        self.0.borrow_mut().insert(xid.0, parent.0);
    }
}

impl SubTransLookup for MemSubTrans {
    type Error = std::convert::Infallible;
    fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error> {
        let m = self.0.borrow();
        let mut x = xid.0;
        while let Some(&p) = m.get(&x) {
            x = p;
        }
        Ok(TransactionId(x))
    }
}

/// pg_subtrans for concurrent tests.
#[derive(Default)]
pub(crate) struct SyncSubTrans(pub Mutex<HashMap<u32, u32>>);

impl SyncSubTrans {
    pub(crate) fn set_parent(&self, xid: TransactionId, parent: TransactionId) {
        self.0.lock().unwrap().insert(xid.0, parent.0);
    }
}

impl SubTransLookup for SyncSubTrans {
    type Error = std::convert::Infallible;
    fn get_topmost_parent(&self, xid: TransactionId) -> Result<TransactionId, Self::Error> {
        let m = self.0.lock().unwrap();
        let mut x = xid.0;
        while let Some(&p) = m.get(&x) {
            x = p;
        }
        Ok(TransactionId(x))
    }
}
