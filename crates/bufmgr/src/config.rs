//! A pool's shape and mechanisms ([`BufferPoolConfig`]) and the buffer manager's knobs
//! ([`KNOBS`]). Touches no lock: it is read once when the pool is made.

use lockstack_lwlock::LwLockKind;

use crate::buffer::MAX_BUFFERS;
use crate::desc::HeaderKind;
use crate::desc_array::DescPadding;
use crate::error::BufferError;
use crate::freelist::VictimKind;
use crate::table::MappingKind;

/// A pool's shape and the variant of each mechanism.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPoolConfig {
    /// Number of buffers (`shared_buffers` / 8 KiB), 1..=[`MAX_BUFFERS`].
    pub nbuffers: usize,
    /// Header locking: spinlock (9.2) or atomic state word (9.6).
    pub header: HeaderKind,
    /// Mapping table: partitions (16 or 128) or dashmap.
    pub mapping: MappingKind,
    /// Victim selection: free-list lock (9.2) or atomic clock hand (9.5).
    pub victim: VictimKind,
    /// LWLock implementation of the mapping partitions, content locks, I/O locks and the 9.2
    /// free-list lock.
    pub lwlock_kind: LwLockKind,
    /// The descriptor array's layout: packed (9.4) or padded to whole cache lines (9.5+).
    pub desc_padding: DescPadding,
}

/// The buffer manager's knobs (`lockstack_common::knob`), over [`BufferPoolConfig`]; the
/// defaults are [`BufferPoolConfig::default`]'s.
pub const KNOBS: &[lockstack_common::Knob<BufferPoolConfig>] = {
    use lockstack_common::Knob;
    use lockstack_common::knob::{in_range, parsed};
    &[
        Knob {
            key: "bufmgr.nbuffers",
            values: "16..=2097152",
            doc: "shared_buffers, in 8 KiB pages",
            default: "1024",
            apply: |c, v| {
                c.nbuffers = in_range(v, 16usize, MAX_BUFFERS)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.header",
            values: "spinlock|atomic|atomic-sub|atomic-add",
            doc: "buffer header: spinlock (9.2), atomic state word (9.6), fetch_sub unpin (19), fetch_add pins too",
            default: "atomic",
            apply: |c, v| {
                c.header = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.mapping",
            values: "partitions-N|dashmap",
            doc: "buffer mapping table: N partitions (16 in 9.2, 128 in 9.5) or dashmap",
            default: "partitions-128",
            apply: |c, v| {
                c.mapping = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.desc_padding",
            values: "none|line",
            doc: "buffer descriptor array: packed (9.4, neighbours share cache lines) or each descriptor padded to whole 64-byte lines (9.5's BufferDescPadded)",
            default: "line",
            apply: |c, v| {
                c.desc_padding = parsed(v)?;
                Some(())
            },
        },
        Knob {
            key: "bufmgr.victim",
            values: "freelist-lock|atomic-clock",
            doc: "victim search: BufFreelistLock (9.2) or atomic clock hand (9.5)",
            default: "atomic-clock",
            apply: |c, v| {
                c.victim = parsed(v)?;
                Some(())
            },
        },
    ]
};

impl Default for BufferPoolConfig {
    /// 1024 buffers (8 MiB), PostgreSQL 9.6+ mechanisms.
    fn default() -> Self {
        BufferPoolConfig::pg96(1024)
    }
}

impl BufferPoolConfig {
    /// PostgreSQL 9.2's mechanisms: header spinlock, 16 partitions, `BufFreelistLock`, 9.2
    /// LWLocks.
    pub fn pg92(nbuffers: usize) -> BufferPoolConfig {
        BufferPoolConfig {
            nbuffers,
            header: HeaderKind::Spinlock,
            mapping: MappingKind::PARTITIONS_16,
            victim: VictimKind::FreelistLock,
            lwlock_kind: LwLockKind::Pg92,
            desc_padding: DescPadding::Line,
        }
    }

    /// PostgreSQL 9.6+'s mechanisms: atomic state word, 128 partitions, atomic clock hand,
    /// atomic LWLocks.
    pub fn pg96(nbuffers: usize) -> BufferPoolConfig {
        BufferPoolConfig {
            nbuffers,
            header: HeaderKind::Atomic,
            mapping: MappingKind::PARTITIONS_128,
            victim: VictimKind::AtomicClock,
            lwlock_kind: LwLockKind::Atomic,
            desc_padding: DescPadding::Line,
        }
    }

    /// Checks ranges.
    ///
    /// # Errors
    /// [`BufferError::Config`] naming the bad setting.
    pub fn validate(&self) -> Result<(), BufferError> {
        if self.nbuffers == 0 || self.nbuffers > MAX_BUFFERS {
            return Err(BufferError::Config(format!(
                "nbuffers must be 1..={MAX_BUFFERS}, got {}",
                self.nbuffers
            )));
        }
        self.mapping.validate()
    }
}
