//! Helpers shared by the integration tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;

use lockstack_common::TransactionId;
use lockstack_xlog::{DecodedRecord, PageSource, Record, Wal, WalReader, XLogRecPtr};

/// Payload identifying (thread, seq), `len` bytes long (at least 8), filled with a pattern
/// derived from both so that any misplaced byte changes it.
pub fn payload(thread: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len.max(8));
    v.extend_from_slice(&thread.to_le_bytes());
    v.extend_from_slice(&seq.to_le_bytes());
    let mut x = (u64::from(thread) << 32 | u64::from(seq)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while v.len() < len.max(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(x as u8);
    }
    v
}

/// A deterministic length in `min..max` for (thread, seq).
pub fn length(thread: u32, seq: u32, min: usize, max: usize) -> usize {
    let h = (u64::from(thread) * 1_000_003 + u64::from(seq)).wrapping_mul(0x2545_F491_4F6C_DD1D);
    min + (h >> 33) as usize % (max - min)
}

/// A record of thread `t`, number `seq`.
pub fn record(t: u32, data: &[u8]) -> Record<'_> {
    Record { rmid: 10, info: (t % 16) as u8, xid: TransactionId(1000 + t), data }
}

/// Reads every record from the start of `wal`, checking back-links from the beginning.
pub fn read_all<S: PageSource>(mut reader: WalReader<S>) -> Vec<DecodedRecord> {
    let mut out = Vec::new();
    while let Some(r) = reader.next_record().expect("I/O error while reading WAL") {
        out.push(r);
    }
    let end = reader.end().expect("reader stopped without a reason");
    assert!(end.reason.is_clean_end(), "reader stopped at {} with {:?}", end.at, end.reason);
    out
}

/// Checks that `records` are exactly the inserted set: every (thread, seq) once, with the
/// payload and end position the inserter saw, each thread's records in its own order, and
/// positions strictly increasing with every back-link pointing at the previous record.
pub fn check_exact(records: &[DecodedRecord], inserted: &Inserted) {
    assert_eq!(records.len(), inserted.len(), "reader returned a different number of records");
    let mut last_seq: HashMap<u32, u32> = HashMap::new();
    let mut prev = XLogRecPtr::INVALID;
    for r in records {
        assert!(r.start > prev, "records out of order at {}", r.start);
        assert_eq!(r.prev, prev, "bad back-link at {}", r.start);
        prev = r.start;
        let t = u32::from_le_bytes(r.data[0..4].try_into().unwrap());
        let s = u32::from_le_bytes(r.data[4..8].try_into().unwrap());
        let (end, len) =
            inserted.get(&(t, s)).unwrap_or_else(|| panic!("record ({t}, {s}) was never inserted"));
        assert_eq!(r.end, *end, "end position of ({t}, {s})");
        assert_eq!(r.data, payload(t, s, *len), "payload of ({t}, {s})");
        assert_eq!(r.xid, TransactionId(1000 + t));
        if let Some(&ls) = last_seq.get(&t) {
            assert!(s > ls, "thread {t}: record {s} after {ls}");
        }
        last_seq.insert(t, s);
    }
}

/// What was inserted: (thread, seq) -> (end position, payload length).
pub type Inserted = HashMap<(u32, u32), (XLogRecPtr, usize)>;

/// Inserts `per_thread` records from each of `threads` threads, returns what was inserted.
pub fn insert_concurrently(
    wal: &std::sync::Arc<Wal>,
    threads: u32,
    per_thread: u32,
    min_len: usize,
    max_len: usize,
) -> Inserted {
    let results: Vec<Inserted> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let mut b = wal.attach_auxiliary();
                s.spawn(move || {
                    let mut v = Inserted::new();
                    for seq in 0..per_thread {
                        let len = length(t, seq, min_len, max_len);
                        let data = payload(t, seq, len);
                        let end = b.insert(&record(t, &data)).expect("insert");
                        if seq % 7 == 0 {
                            b.commit(end).expect("commit");
                        }
                        v.insert((t, seq), (end, len));
                    }
                    v
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("inserter panicked")).collect()
    });
    results.into_iter().flatten().collect()
}
