//! The buffer pool reports its plain shared data to a simulation: a block read in
//! writes its page and a mapping bucket, a hit reads the bucket, and descriptors, mapping
//! partitions and strategy words carry their names.

use super::*;
use crate::config::BufferPoolConfig;
use crate::table::BufTable;
use lockstack_common::sync::hook::Access;
use lockstack_common::sync::hook::{Counting, Simulation, install, line_name};

fn bucket_touches(c: &Counting, access: Access) -> usize {
    c.touches()
        .iter()
        .filter(|t| {
            !t.atomic && t.access == access && t.file.ends_with("bufmgr/src/buckets.rs") && t.len == 64
        })
        .count()
}

#[test]
fn a_read_in_writes_the_page_and_a_bucket_and_a_hit_reads_the_bucket() {
    for cfg in [BufferPoolConfig::pg92(64), BufferPoolConfig::pg96(64)] {
        let pool = BufferPool::in_memory(cfg).unwrap();
        let bb = pool.attach_auxiliary();
        let c = Arc::new(Counting::with_log());
        let g = install(Simulation::new(Box::new(c.clone())));
        let (buf, blk) = bb.extend(Oid(16384), ForkNumber::Main).unwrap();
        drop(g);
        let page = pool.page_ptr(buf.id()) as usize;
        assert!(c.touched(page, BLCKSZ, Access::Write), "the new page is written");
        assert!(bucket_touches(&c, Access::Write) >= 1, "the mapping entry is written");
        bb.release(buf);
        let c = Arc::new(Counting::with_log());
        let g = install(Simulation::new(Box::new(c.clone())));
        let again = bb.read_block(Oid(16384), blk).unwrap();
        drop(g);
        assert_eq!(again.id(), buf.id(), "a hit");
        assert!(bucket_touches(&c, Access::Read) >= 1, "the look-up reads its bucket");
        assert_eq!(bucket_touches(&c, Access::Write), 0, "and writes none");
        assert!(!c.touched(page, 1, Access::Write), "a hit does not write the page");
        bb.release(again);
    }
}

#[test]
fn descriptors_partitions_and_strategy_are_named() {
    let pool = BufferPool::in_memory(BufferPoolConfig::pg92(64)).unwrap();
    for i in [0usize, 17, 63] {
        let d = &pool.descs[i];
        assert_eq!(line_name(d.state_addr() as usize), Some(format!("buffer {i} state")));
        assert_eq!(line_name(d.io_lock.word_addr() as usize), Some(format!("BufferIO {i}")));
    }
    let BufTable::Partitioned { parts, .. } = &pool.table else { panic!("pg92 is partitioned") };
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(line_name(p.lock.word_addr() as usize), Some(format!("BufferMapping {i}")));
    }
}
