//! loom model of `MemorySmgr` over a backing store (a load image): a block read while another
//! thread writes it for the first time is either the backing store's bytes or the new bytes,
//! never a mix, and the backing store is never written. The read decides between the two
//! sources and copies under the fork's read lock; a first write replaces the block under its
//! write lock. Reading the backing store after dropping the lock would let the write land in
//! between, which is harmless only because the backing store does not change: the model pins
//! the stronger property the code has.
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target-loom cargo test -p
//! lockstack-bufmgr --release --test loom_smgr`.
#![cfg(loom)]

use std::sync::Arc;

use lockstack_bufmgr::ForkNumber;
use lockstack_bufmgr::page::BLCKSZ;
use lockstack_bufmgr::smgr::{MemorySmgr, Smgr};
use lockstack_common::{BlockNumber, Oid};

const REL: Oid = Oid(16384);

#[test]
fn a_read_racing_a_first_write_sees_one_whole_page() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(2);
    b.check(|| {
        let base = Arc::new(MemorySmgr::new());
        base.extend(REL, ForkNumber::Main, BlockNumber(0), &[1u8; BLCKSZ]).unwrap();
        let s = Arc::new(MemorySmgr::backed_by(base.clone(), &[(REL, ForkNumber::Main)]).unwrap());
        let w = {
            let s = Arc::clone(&s);
            loom::thread::spawn(move || {
                s.write(REL, ForkNumber::Main, BlockNumber(0), &[2u8; BLCKSZ]).unwrap()
            })
        };
        let mut buf = vec![0u8; BLCKSZ];
        s.read(REL, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == buf[0]) && (buf[0] == 1 || buf[0] == 2), "a mixed page");
        w.join().unwrap();
        s.read(REL, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 2));
        base.read(REL, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&x| x == 1), "the backing store was written");
    });
}
