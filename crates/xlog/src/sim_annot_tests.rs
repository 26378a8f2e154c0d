//! A WAL insert reports the record's bytes in the WAL buffers to a simulation: the
//! buffer words are facade atomics, so the copy shows as eight-byte atomic writes that
//! together cover the record; and the insertion locks and insert position carry their names.

use super::*;
use crate::config::InsertMode;
use crate::ptr::maxalign;
use crate::record::RECORD_HEADER_SIZE;
use lockstack_common::sync::hook::{Access, Counting, Simulation, install, line_name};

#[test]
fn an_insert_writes_the_record_bytes_in_the_wal_buffer() {
    for mode in [InsertMode::SingleLock, InsertMode::InsertionLocks(8)] {
        let wal = Wal::open(WalConfig { insert_mode: mode, ..WalConfig::default() }).unwrap();
        let mut b = wal.attach_auxiliary();
        let data = [7u8; 100];
        let rec = Record { rmid: 10, info: 0, xid: TransactionId(5), data: &data };
        let c = Arc::new(Counting::with_log());
        let g = install(Simulation::new(Box::new(c.clone())));
        let end = b.insert(&rec).unwrap();
        drop(g);
        let start = b.last_record_start().0;
        let len = maxalign((RECORD_HEADER_SIZE + data.len()) as u64);
        assert_eq!(start / XLOG_BLCKSZ, (start + len - 1) / XLOG_BLCKSZ, "the record fits on its page");
        assert!(end.0 >= start + len);
        let page_start = start - start % XLOG_BLCKSZ;
        let word = wal.slot_of(page_start) * WORDS_PER_PAGE + ((start - page_start) / 8) as usize;
        let at = &wal.pages[word] as *const AtomicU64 as usize;
        assert!(c.covered(at, len as usize, Access::Write), "{mode:?}: the record's {len} bytes are written");
        assert!(!c.covered(at, len as usize + 8, Access::Write), "{mode:?}: and nothing past them");
    }
}

#[test]
fn insertion_locks_and_positions_are_named() {
    let wal =
        Wal::open(WalConfig { insert_mode: InsertMode::InsertionLocks(8), ..WalConfig::default() }).unwrap();
    let (locks, r) = wal.ins.line_addrs();
    assert_eq!(locks.len(), 8);
    for (i, w) in locks.into_iter().enumerate() {
        assert_eq!(line_name(w), Some(format!("WALInsert {i}")));
    }
    assert_eq!(line_name(r).as_deref(), Some("WAL insert position"));
    let w = line_name(wal.write_lock.word_addr() as usize).expect("WALWriteLock's line is named");
    assert!(w.starts_with("WALWriteLock"), "{w}");
}
