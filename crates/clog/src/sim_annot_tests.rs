//! CLOG pages report their plain words to a simulation: setting a status writes
//! the word holding the xid's status bits, reading it reads that word, and the bank and
//! buffer locks carry their names.

use super::*;
use crate::{CLOG_XACTS_PER_BYTE, CLOG_XACTS_PER_PAGE, Clog, ClogConfig, XidStatus, clog_page};
use lockstack_common::TransactionId;
use lockstack_common::sync::hook::{Access, Counting, Simulation, install, line_name};

#[test]
fn set_and_get_status_touch_the_status_word() {
    let clog = Clog::new(ClogConfig::default()).unwrap();
    let xid = TransactionId(1000);
    clog.extend(xid).unwrap();
    let c = Arc::new(Counting::with_log());
    let g = install(Simulation::new(Box::new(c.clone())));
    clog.set_tree_status_as(None, xid, &[], XidStatus::Committed, 0).unwrap();
    drop(g);
    // The word holding the xid's two status bits: byte (xid % per page) / 4, word byte / 8.
    let byte = (xid.0 % CLOG_XACTS_PER_PAGE / CLOG_XACTS_PER_BYTE) as usize;
    let at = clog
        .slru()
        .read_page(clog_page(xid), |p| &p.slot.words[byte / 8] as *const AtomicU64 as usize)
        .unwrap();
    assert!(c.touched(at, 8, Access::Write), "the status word is written");
    let c = Arc::new(Counting::with_log());
    let g = install(Simulation::new(Box::new(c.clone())));
    assert_eq!(clog.get_status(xid).unwrap().0, XidStatus::Committed);
    drop(g);
    assert!(c.touched(at, 8, Access::Read), "the status word is read");
    assert!(!c.touched(at, 8, Access::Write), "a status read writes nothing");
}

#[test]
fn bank_buffer_and_slot_lines_are_named() {
    let clog = Clog::new(ClogConfig::default()).unwrap();
    let s = clog.slru();
    let bank0 = s.banks[0].lock.word_addr() as usize;
    let name = line_name(bank0).expect("the bank lock is named");
    assert!(name == "XactSLRUBank 0" || name == "XactSLRU", "{name}");
    let io = line_name(s.slots[3].io_lock.word_addr() as usize).expect("the I/O lock's line is named");
    assert!(io.starts_with("Xact slot "), "{io}");
    assert_eq!(
        line_name(&s.slots[3].status as *const AtomicU8 as usize).as_deref(),
        Some("Xact slot 3"),
        "the slot's status line"
    );
}
