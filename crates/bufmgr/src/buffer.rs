//! A shared buffer's number ([`Buffer`]) and the largest pool ([`MAX_BUFFERS`]): the ids the
//! mapping table, the configuration and the pool pass around. Touches no lock.

/// Largest pool accepted by [`BufferPoolConfig::validate`]: 2^21 buffers (16 GiB).
pub const MAX_BUFFERS: usize = 1 << 21;

/// meaningful while the backend that got it keeps its pin. Release it with
/// [`BackendBuffers::release`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Buffer(pub(crate) u32);

impl Buffer {
    /// The buffer's index in the pool, from 0 (`buf_id`; PostgreSQL's `Buffer` is this + 1).
    pub fn id(self) -> u32 {
        self.0
    }
}
