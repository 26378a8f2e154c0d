//! [`MemorySmgr`]: relation forks as vectors of 8 KiB blocks in memory, optionally over a
//! read-only backing store (a data directory used as a load image) whose blocks are read
//! through until they are first written. Locks: one reader-writer lock for the map of forks
//! and one per fork for its blocks, never both held at once except while a fork is created.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use crate::sync::RwLock;
use lockstack_common::{BlockNumber, Oid};

use super::{Smgr, SmgrError, SmgrOp};
use crate::page::BLCKSZ;
use crate::tag::ForkNumber;

/// One block of a fork held in memory.
#[derive(Debug)]
enum MemBlock {
    /// Every byte zero, never written since it was appended (what every extension appends:
    /// `mdextend`'s zero-filled page): held as a sparse file holds a hole, without memory.
    Zero,
    /// The block's bytes, [`BLCKSZ`] of them.
    Data(Box<[u8]>),
    /// Not written yet: the same block of the backing store holds its bytes.
    Backing,
}

type MemFork = Arc<RwLock<Vec<MemBlock>>>;

/// Pages in memory: a vector of 8 KiB blocks per relation fork, a block appended as zeros
/// taking no memory until it is written. The default storage.
///
/// Built with [`MemorySmgr::backed_by`], it starts as a copy of another store's forks without
/// copying them: a block is read from the backing store until it is first written, and is held
/// here from then on, so the backing store is only ever read (copy-on-write, as an overlay
/// file system treats a read-only lower layer).
#[derive(Debug, Default)]
pub struct MemorySmgr {
    forks: RwLock<HashMap<(Oid, ForkNumber), MemFork>>,
    backing: Option<Arc<dyn Smgr>>,
}

impl MemorySmgr {
    /// An empty store.
    pub fn new() -> MemorySmgr {
        MemorySmgr::default()
    }

    /// A store whose forks `forks` start as `backing`'s, at their current sizes, every block
    /// read from `backing` until it is first written here. `backing` is never written, and
    /// must not change while this store is in use (a data directory nobody runs on).
    ///
    /// # Errors
    /// `backing`'s errors finding a fork's size.
    pub fn backed_by(backing: Arc<dyn Smgr>, forks: &[(Oid, ForkNumber)]) -> Result<MemorySmgr, SmgrError> {
        let mut map = HashMap::new();
        for &(rel, fork) in forks {
            let n = backing.nblocks(rel, fork)?;
            if n > 0 {
                let blocks = std::iter::repeat_with(|| MemBlock::Backing).take(n as usize).collect();
                map.insert((rel, fork), Arc::new(RwLock::new(blocks)));
            }
        }
        Ok(MemorySmgr { forks: RwLock::new(map), backing: Some(backing) })
    }

    fn fork(&self, rel: Oid, fork: ForkNumber) -> Option<MemFork> {
        self.forks.read().get(&(rel, fork)).cloned()
    }

    fn backing_read(
        &self,
        rel: Oid,
        fork: ForkNumber,
        block: BlockNumber,
        buf: &mut [u8],
    ) -> Result<(), SmgrError> {
        match &self.backing {
            Some(b) => b.read(rel, fork, block, buf),
            // Only `backed_by` makes `Backing` blocks, and it sets `backing`.
            None => Err(mem_err(
                SmgrOp::Read,
                rel,
                fork,
                block,
                io::ErrorKind::NotFound,
                "the block is in a backing store this store does not have".into(),
            )),
        }
    }
}

fn mem_err(
    op: SmgrOp,
    rel: Oid,
    fork: ForkNumber,
    block: BlockNumber,
    kind: io::ErrorKind,
    msg: String,
) -> SmgrError {
    SmgrError { op, rel, fork, block: Some(block), path: None, source: io::Error::new(kind, msg) }
}

/// Whether every byte of `buf` is zero: an OR over 8-byte words without an early exit, which
/// the compiler vectorizes (a byte loop that stops at the first non-zero byte does not, and cost
/// the scale-100 load a third more user time).
fn all_zero(buf: &[u8]) -> bool {
    let words = buf.chunks_exact(8);
    let tail = words.remainder().iter().fold(0u8, |a, &b| a | b);
    words.fold(0u64, |a, w| a | u64::from_ne_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]])) == 0
        && tail == 0
}

/// The wait class a simulated machine books waits on [`MemorySmgr`]'s own locks under: its
/// per-relation block lists stand in for files, and a backend that waits on one waits for a
/// relation being extended (PostgreSQL 15's wait event `IO:DataFileExtend`, in
/// src/backend/utils/activity/wait_event.c).
pub const MEMORY_SMGR_WAIT_CLASS: &str = "IO:DataFileExtend";

impl Smgr for MemorySmgr {
    fn nblocks(&self, rel: Oid, fork: ForkNumber) -> Result<u32, SmgrError> {
        let _class = lockstack_common::sync::hook::wait_class(MEMORY_SMGR_WAIT_CLASS);
        Ok(self.fork(rel, fork).map(|f| f.read().len() as u32).unwrap_or(0))
    }

    fn read(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &mut [u8]) -> Result<(), SmgrError> {
        let _class = lockstack_common::sync::hook::wait_class(MEMORY_SMGR_WAIT_CLASS);
        let f = self.fork(rel, fork);
        let blocks = f.as_ref().map(|f| f.read());
        match blocks.as_ref().and_then(|b| b.get(block.0 as usize)) {
            Some(MemBlock::Data(p)) => {
                buf.copy_from_slice(p);
                Ok(())
            }
            Some(MemBlock::Zero) => {
                buf.fill(0);
                Ok(())
            }
            // Under the fork's read lock, so that a write of this block cannot land between
            // the check and the read (the writer takes the fork's write lock).
            Some(MemBlock::Backing) => self.backing_read(rel, fork, block, buf),
            None => Err(mem_err(
                SmgrOp::Read,
                rel,
                fork,
                block,
                io::ErrorKind::UnexpectedEof,
                format!("block beyond end of fork ({} blocks)", blocks.map(|b| b.len()).unwrap_or(0)),
            )),
        }
    }

    fn write(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        let _class = lockstack_common::sync::hook::wait_class(MEMORY_SMGR_WAIT_CLASS);
        let f = self.fork(rel, fork);
        let mut blocks = f.as_ref().map(|f| f.write());
        match blocks.as_mut().and_then(|b| b.get_mut(block.0 as usize)) {
            Some(MemBlock::Data(p)) => {
                p.copy_from_slice(buf);
                Ok(())
            }
            Some(b) => {
                *b = MemBlock::Data(buf.into());
                Ok(())
            }
            None => Err(mem_err(
                SmgrOp::Write,
                rel,
                fork,
                block,
                io::ErrorKind::InvalidInput,
                "block does not exist".into(),
            )),
        }
    }

    fn extend(&self, rel: Oid, fork: ForkNumber, block: BlockNumber, buf: &[u8]) -> Result<(), SmgrError> {
        let _class = lockstack_common::sync::hook::wait_class(MEMORY_SMGR_WAIT_CLASS);
        let f = match self.fork(rel, fork) {
            Some(f) => f,
            None => Arc::clone(self.forks.write().entry((rel, fork)).or_default()),
        };
        let mut blocks = f.write();
        if block.0 as usize != blocks.len() {
            return Err(mem_err(
                SmgrOp::Extend,
                rel,
                fork,
                block,
                io::ErrorKind::InvalidInput,
                format!("fork has {} blocks", blocks.len()),
            ));
        }
        debug_assert_eq!(buf.len(), BLCKSZ);
        blocks.push(if all_zero(buf) { MemBlock::Zero } else { MemBlock::Data(buf.into()) });
        Ok(())
    }

    fn sync(&self, _rel: Oid, _fork: ForkNumber) -> Result<(), SmgrError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_blocks_read_as_zeros_and_take_data_when_written() {
        let s = MemorySmgr::new();
        let rel = Oid(7);
        s.extend(rel, ForkNumber::Main, BlockNumber(0), &[0u8; BLCKSZ]).unwrap();
        let mut buf = [1u8; BLCKSZ];
        s.read(rel, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 0));
        s.write(rel, ForkNumber::Main, BlockNumber(0), &[5u8; BLCKSZ]).unwrap();
        s.read(rel, ForkNumber::Main, BlockNumber(0), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 5));
        let mut last = [0u8; BLCKSZ];
        last[BLCKSZ - 1] = 1;
        assert!(!all_zero(&last));
        assert!(all_zero(&[0u8; 13]));
        assert!(!all_zero(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]));
    }

    #[test]
    fn a_backed_store_reads_through_and_never_writes_its_backing() {
        let base = Arc::new(MemorySmgr::new());
        let rel = Oid(9);
        for b in 0..3u32 {
            base.extend(rel, ForkNumber::Main, BlockNumber(b), &[b as u8 + 1; BLCKSZ]).unwrap();
        }
        let s =
            MemorySmgr::backed_by(base.clone(), &[(rel, ForkNumber::Main), (rel, ForkNumber::VisibilityMap)])
                .unwrap();
        assert_eq!(s.nblocks(rel, ForkNumber::Main).unwrap(), 3);
        assert_eq!(s.nblocks(rel, ForkNumber::VisibilityMap).unwrap(), 0);
        let mut buf = [0u8; BLCKSZ];
        s.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 2));
        s.write(rel, ForkNumber::Main, BlockNumber(1), &[9u8; BLCKSZ]).unwrap();
        s.extend(rel, ForkNumber::Main, BlockNumber(3), &[4u8; BLCKSZ]).unwrap();
        s.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 9));
        s.read(rel, ForkNumber::Main, BlockNumber(3), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 4));
        // The backing store is unchanged: same size, block 1 as it was.
        assert_eq!(base.nblocks(rel, ForkNumber::Main).unwrap(), 3);
        base.read(rel, ForkNumber::Main, BlockNumber(1), &mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 2));
    }
}
