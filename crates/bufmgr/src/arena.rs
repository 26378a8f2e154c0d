//! The memory behind the pool's pages: one anonymous mapping, asked for transparent huge pages.
//!
//! PostgreSQL puts shared buffers in its main shared-memory segment and, with the default
//! `huge_pages = try` (9.4+, `src/backend/port/sysv_shmem.c`, `CreateAnonymousSegment`), maps it
//! with 2 MiB pages when the system allows, falling back to normal pages otherwise. A scale-10
//! pgbench pool is ~300 MiB: on 4 KiB pages nearly every B-tree or heap page a transaction
//! touches costs a TLB miss, which on 2 MiB pages it does not. We do the same thing with
//! `madvise(MADV_HUGEPAGE)` (Linux's transparent huge pages; honoured when THP is `always` or
//! `madvise`) on a 2 MiB-aligned anonymous mapping. The mapping is zero-filled by the kernel and
//! faulted in on first touch, so an unused part of a large pool costs no memory.

use crate::page::BLCKSZ;
use std::cell::UnsafeCell;

/// Huge-page size the mapping is aligned to, bytes (x86-64 and arm64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// `n` zero-filled pages of [`BLCKSZ`] bytes in one anonymous mapping, aligned to 2 MiB and
/// advised to use transparent huge pages. Pages are handed out as raw pointers; the pool's
/// content locks decide who may read or write them (see `BufferPool`).
pub(crate) struct PageArena {
    /// Keeps the mapping alive; never accessed after construction except to unmap on drop.
    _map: memmap2::MmapMut,
    /// First page, 2 MiB-aligned, inside `_map`.
    base: *mut UnsafeCell<[u8; BLCKSZ]>,
    /// Pages.
    n: usize,
    /// If the kernel accepted the huge-page advice.
    huge: bool,
}

// SAFETY: the arena only hands out raw pointers to page bytes; all synchronisation of the bytes
// is the pool's (content locks, BM_IO_IN_PROGRESS, atomic VM byte operations). The mapping itself
// is created once and unmapped only on drop, when no pointer into it can be in use.
unsafe impl Send for PageArena {}
// SAFETY: as above: shared access only yields raw pointers, never references.
unsafe impl Sync for PageArena {}

impl PageArena {
    /// Maps `n` pages (`n * 8192` bytes plus up to 2 MiB of alignment slack).
    ///
    /// # Errors
    /// The OS error if the anonymous mapping fails (address space or overcommit limits).
    pub(crate) fn new(n: usize) -> std::io::Result<PageArena> {
        let bytes = n.checked_mul(BLCKSZ).ok_or_else(|| std::io::Error::other("pool size overflows"))?;
        let mut map = memmap2::MmapOptions::new().len(bytes.max(1) + HUGE_PAGE).map_anon()?;
        let huge = Self::advise_huge(&map);
        let start = map.as_mut_ptr();
        let offset = (start as usize).next_multiple_of(HUGE_PAGE) - start as usize;
        // `map` is never read or written again (it only unmaps on drop), so every access to the
        // bytes goes through this pointer.
        let base = start.wrapping_add(offset).cast::<UnsafeCell<[u8; BLCKSZ]>>();
        Ok(PageArena { _map: map, base, n, huge })
    }

    #[cfg(target_os = "linux")]
    fn advise_huge(map: &memmap2::MmapMut) -> bool {
        map.advise(memmap2::Advice::HugePage).is_ok()
    }

    #[cfg(not(target_os = "linux"))]
    fn advise_huge(_map: &memmap2::MmapMut) -> bool {
        false
    }

    /// Page `id`'s cell.
    ///
    /// # Panics
    /// If `id >= n` (a pool bug).
    #[inline]
    pub(crate) fn page(&self, id: u32) -> &UnsafeCell<[u8; BLCKSZ]> {
        assert!((id as usize) < self.n, "page {id} outside an arena of {} pages", self.n);
        // SAFETY: `base` is 2 MiB-aligned (so 8 KiB-aligned) inside a live mapping of at least
        // `n * BLCKSZ` bytes past it, and `id < n`; an `UnsafeCell` reference permits the
        // concurrent raw accesses the pool synchronises itself.
        unsafe { &*self.base.add(id as usize) }
    }

    /// If the kernel accepted `MADV_HUGEPAGE` for the mapping (always false off Linux).
    pub(crate) fn huge_pages(&self) -> bool {
        self.huge
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn pages_are_zeroed_aligned_and_distinct() {
        let a = PageArena::new(300).unwrap();
        for id in [0u32, 1, 150, 299] {
            let p = a.page(id).get();
            assert_eq!(p as usize % BLCKSZ, 0);
            // SAFETY: no other access to this fresh arena.
            let bytes = unsafe { &mut *p };
            assert!(bytes.iter().all(|&b| b == 0));
            bytes[0] = id as u8 + 1;
            bytes[BLCKSZ - 1] = id as u8 + 2;
        }
        for id in [0u32, 1, 150, 299] {
            // SAFETY: as above.
            let bytes = unsafe { &*a.page(id).get() };
            assert_eq!((bytes[0], bytes[BLCKSZ - 1]), (id as u8 + 1, id as u8 + 2));
        }
        assert_eq!(a.page(1).get() as usize - a.page(0).get() as usize, BLCKSZ);
    }

    #[test]
    #[should_panic(expected = "outside an arena")]
    fn page_past_the_end_panics() {
        let a = PageArena::new(2).unwrap();
        let _ = a.page(2);
    }
}
