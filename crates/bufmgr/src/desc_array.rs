//! The array of buffer descriptors (`BufferDescriptors`, `buf_init.c`) with a run-time stride:
//! packed (`sizeof(BufferDesc)` apart, as PostgreSQL did up to 9.4, so one descriptor's hot
//! words can share a cache line with its neighbour's) or padded to whole 64-byte lines (9.5's
//! `BufferDescPadded`, commit "Align buffer descriptors to cache line boundaries", 2015).

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::fmt;
use std::ptr::NonNull;
use std::str::FromStr;

use crate::desc::BufferDesc;

/// The cache-line size the padding rounds to and the array is aligned to, bytes.
pub const DESC_LINE: usize = 64;

/// How buffer descriptors are laid out in their array (`bufmgr.desc_padding`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum DescPadding {
    /// Packed: each descriptor `size_of::<BufferDesc>()` bytes after the previous one
    /// (PostgreSQL 9.4 and earlier), so descriptors straddle lines.
    None,
    /// Each descriptor starts a 64-byte line and its stride is its size rounded up to whole
    /// lines (PostgreSQL 9.5+, `BUFFERDESC_PAD_TO_SIZE`). The default: with this crate's
    /// 120-byte descriptor it is the 128-byte stride the pool always had.
    #[default]
    Line,
}

impl DescPadding {
    /// Name on command lines and in reports: `none` or `line`.
    pub fn name(self) -> &'static str {
        match self {
            DescPadding::None => "none",
            DescPadding::Line => "line",
        }
    }

    /// The distance between two descriptors, bytes.
    pub fn stride(self) -> usize {
        match self {
            DescPadding::None => size_of::<BufferDesc>(),
            DescPadding::Line => size_of::<BufferDesc>().next_multiple_of(DESC_LINE),
        }
    }
}

impl fmt::Display for DescPadding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DescPadding {
    type Err = UnknownDescPadding;
    /// Parses `none` (also `pg94`) or `line` (also `64`, `pg95`).
    fn from_str(s: &str) -> Result<Self, UnknownDescPadding> {
        match s {
            "none" | "pg94" => Ok(DescPadding::None),
            "line" | "64" | "pg95" => Ok(DescPadding::Line),
            _ => Err(UnknownDescPadding(s.to_string())),
        }
    }
}

/// A [`DescPadding`] name other than those [`DescPadding::from_str`] accepts (the name given).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown buffer descriptor padding '{0}' (valid: none, line)")]
pub struct UnknownDescPadding(pub String);

/// `len` descriptors, `padding.stride()` bytes apart, from a 64-byte-aligned base.
pub(crate) struct DescArray {
    base: NonNull<u8>,
    len: usize,
    stride: usize,
    layout: Layout,
}

// SAFETY: the array owns its descriptors as a `Box<[BufferDesc]>` would; `BufferDesc` is
// `Send` and `Sync` (checked below), and the array hands out only shared references.
unsafe impl Send for DescArray {}
// SAFETY: see `Send`.
unsafe impl Sync for DescArray {}

const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<BufferDesc>();
};

impl DescArray {
    /// `len` descriptors made by `make(i)`, laid out by `padding`. Aborts (as `Box` does) when
    /// the memory cannot be allocated; if `make` panics, the descriptors made so far and the
    /// memory are leaked, never dropped uninitialised.
    pub(crate) fn new(len: usize, padding: DescPadding, make: impl Fn(usize) -> BufferDesc) -> DescArray {
        let stride = padding.stride();
        debug_assert!(stride.is_multiple_of(align_of::<BufferDesc>()));
        let size = stride
            .checked_mul(len.max(1))
            .expect("the array size fits a usize: the pool holds at most MAX_BUFFERS descriptors");
        let layout = Layout::from_size_align(size, DESC_LINE)
            .expect("DESC_LINE is a power of two and the size was checked for overflow");
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc(layout) };
        let Some(base) = NonNull::new(raw) else { handle_alloc_error(layout) };
        for i in 0..len {
            // SAFETY: `i * stride + size_of::<BufferDesc>() <= size`, the base is 64-aligned and
            // the stride a multiple of `BufferDesc`'s alignment, so the slot is in bounds,
            // aligned and unused (each slot is written once).
            unsafe { base.as_ptr().add(i * stride).cast::<BufferDesc>().write(make(i)) };
        }
        DescArray { base, len, stride, layout }
    }

    /// Number of descriptors.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The distance between two descriptors, bytes.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// Descriptor `i`, if `i < len`.
    pub(crate) fn get(&self, i: usize) -> Option<&BufferDesc> {
        // SAFETY: `i < len`: slot `i` was initialised by `new` and lives as long as `self`.
        (i < self.len).then(|| unsafe { &*self.base.as_ptr().add(i * self.stride).cast::<BufferDesc>() })
    }

    /// Every descriptor, in order.
    pub(crate) fn iter(&self) -> impl ExactSizeIterator<Item = &BufferDesc> + '_ {
        (0..self.len).map(move |i| &self[i])
    }
}

impl std::ops::Index<usize> for DescArray {
    type Output = BufferDesc;
    fn index(&self, i: usize) -> &BufferDesc {
        match self.get(i) {
            Some(d) => d,
            None => panic!("buffer descriptor {i} out of range (the pool has {})", self.len),
        }
    }
}

impl Drop for DescArray {
    fn drop(&mut self) {
        for i in 0..self.len {
            // SAFETY: slot `i` was initialised by `new` and is dropped once, here.
            unsafe { std::ptr::drop_in_place(self.base.as_ptr().add(i * self.stride).cast::<BufferDesc>()) };
        }
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.base.as_ptr(), self.layout) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstack_lwlock::LwLockKind;

    #[test]
    fn padding_sets_the_stride_and_line_padding_starts_each_descriptor_on_a_line() {
        for (padding, stride) in [
            (DescPadding::None, size_of::<BufferDesc>()),
            (DescPadding::Line, size_of::<BufferDesc>().next_multiple_of(64)),
        ] {
            let a = DescArray::new(8, padding, |i| BufferDesc::new(i as u32, LwLockKind::Atomic));
            assert_eq!(a.stride(), stride);
            assert_eq!(a.len(), 8);
            let addr = |i: usize| &a[i] as *const BufferDesc as usize;
            assert_eq!(addr(0) % 64, 0, "the array starts a line");
            for i in 1..8 {
                assert_eq!(addr(i) - addr(i - 1), stride);
                if padding == DescPadding::Line {
                    assert_eq!(addr(i) % 64, 0);
                }
            }
            assert!(a.iter().enumerate().all(|(i, d)| d.buf_id() == i as u32));
            assert!(a.get(8).is_none());
        }
        // The packed descriptor is not a multiple of 64 bytes here, so packing makes neighbours
        // share lines: the experiment's premise.
        assert_ne!(size_of::<BufferDesc>() % 64, 0);
        assert_eq!("none".parse::<DescPadding>(), Ok(DescPadding::None));
        assert_eq!("64".parse::<DescPadding>(), Ok(DescPadding::Line));
        assert!("32".parse::<DescPadding>().unwrap_err().to_string().contains("valid: none, line"));
    }
}
