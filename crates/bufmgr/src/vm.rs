//! The visibility map (`src/backend/access/heap/visibilitymap.c`, 8.4+; two bits per heap page
//! since 9.6): a fork of each heap relation whose pages live in the same buffer pool, with an
//! *all-visible* and an *all-frozen* bit for every heap page.
//!
//! Layout (9.6+): each VM page has a normal page header followed by [`MAPSIZE`] bytes of map,
//! four heap pages per byte, so one VM page covers [`HEAPBLOCKS_PER_PAGE`] = 32 672 heap pages
//! (255 MiB of heap). Heap block `b` lives in VM block `b / 32672`, byte
//! `(b % 32672) / 4`, bits `(b % 4) * 2` (all-visible) and `+1` (all-frozen).
//!
//! Rules kept here:
//! * the map is conservative: a set bit must be true; all-frozen is only set with all-visible;
//! * the heap page's `PD_ALL_VISIBLE` flag and the map bit change together: [`VisibilityMap::set`]
//!   sets both and [`VisibilityMap::clear`] clears both, with the heap page locked exclusively;
//! * bits are set and cleared under the VM page's exclusive content lock, but *read* with only a
//!   pin ([`VisibilityMap::get_status`]), as `visibilitymap_get_status` does. So that such reads
//!   are not data races in Rust's memory model, every access to map bytes is a relaxed atomic
//!   byte operation, and nothing in this module forms a `&mut [u8]` over a VM page. Do not
//!   modify VM pages through [`crate::ContentGuard::page_mut`].
//!
//! Seed 004 compares two ways for a heap modification or a scan to learn whether a page is
//! all-visible ([`VmCheck`]): test `PD_ALL_VISIBLE` on the heap page it already has locked and
//! touch the VM page only to clear a bit (PostgreSQL as shipped), or always consult the VM page,
//! pinning it each time (Jeff Davis's 2012 patch) or keeping it pinned across operations.

use std::fmt;
use std::str::FromStr;
// Plain: these atomics are views of page bytes (`from_ptr`), which neither loom nor a
// wrapper type can model; the page's buffer content lock orders them.
use lockstack_common::sync::atomic::plain::{AtomicU8, Ordering};

use lockstack_common::{BlockNumber, Oid};

use crate::backend::{BackendBuffers, ContentGuard};
use crate::buffer::Buffer;
use crate::error::BufferError;
use crate::page::{self, BLCKSZ, SIZE_OF_PAGE_HEADER, maxalign};
use crate::tag::{BufferTag, ForkNumber};
use lockstack_lwlock::LwLockMode;

/// Bytes of map per VM page (`MAPSIZE`): `BLCKSZ - MAXALIGN(SizeOfPageHeaderData)` = 8168.
pub const MAPSIZE: usize = BLCKSZ - maxalign(SIZE_OF_PAGE_HEADER);
/// Bits per heap page (`BITS_PER_HEAPBLOCK`, 2 from 9.6).
pub const BITS_PER_HEAPBLOCK: u32 = 2;
/// Heap pages per map byte (`HEAPBLOCKS_PER_BYTE`).
pub const HEAPBLOCKS_PER_BYTE: u32 = 8 / BITS_PER_HEAPBLOCK;
/// Heap pages per VM page (`HEAPBLOCKS_PER_PAGE`): 8168 × 4 = 32 672.
pub const HEAPBLOCKS_PER_PAGE: u32 = MAPSIZE as u32 * HEAPBLOCKS_PER_BYTE;
/// Every tuple on the heap page is visible to all transactions (`VISIBILITYMAP_ALL_VISIBLE`).
pub const VISIBILITYMAP_ALL_VISIBLE: u8 = 0x01;
/// Every tuple on the heap page is frozen (`VISIBILITYMAP_ALL_FROZEN`, 9.6+).
pub const VISIBILITYMAP_ALL_FROZEN: u8 = 0x02;
/// Both bits (`VISIBILITYMAP_VALID_BITS`).
pub const VISIBILITYMAP_VALID_BITS: u8 = 0x03;

const _: () = assert!(HEAPBLOCKS_PER_PAGE == 32_672);

/// VM block holding heap block `heap_blk`'s bits (`HEAPBLK_TO_MAPBLOCK`).
#[inline]
pub const fn heapblk_to_mapblock(heap_blk: u32) -> u32 {
    heap_blk / HEAPBLOCKS_PER_PAGE
}

/// Byte within the map area (`HEAPBLK_TO_MAPBYTE`).
#[inline]
pub const fn heapblk_to_mapbyte(heap_blk: u32) -> usize {
    ((heap_blk % HEAPBLOCKS_PER_PAGE) / HEAPBLOCKS_PER_BYTE) as usize
}

/// Bit shift within the byte (`HEAPBLK_TO_OFFSET`).
#[inline]
pub const fn heapblk_to_offset(heap_blk: u32) -> u32 {
    (heap_blk % HEAPBLOCKS_PER_BYTE) * BITS_PER_HEAPBLOCK
}

/// How a scan or a heap modification learns whether a page is all-visible (seed 004).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum VmCheck {
    /// Test `PD_ALL_VISIBLE` on the heap page (already pinned and locked); pin the VM page only
    /// when the flag says a bit must be cleared (PostgreSQL 8.4 to today).
    #[default]
    PageFlagFirst,
    /// Always read the VM bit, pinning and unpinning the VM page for every check (the naive
    /// 2012 patch, Jeff Davis's "#2").
    AlwaysVm,
    /// Always read the VM bit, but keep the VM page pinned across checks (his "#3"): with
    /// private refcounts, re-checks touch no shared state.
    AlwaysVmKeepPin,
}

impl VmCheck {
    /// Every variant, in report order.
    pub const ALL: [VmCheck; 3] = [VmCheck::PageFlagFirst, VmCheck::AlwaysVm, VmCheck::AlwaysVmKeepPin];

    /// Name on command lines and in reports: `page-flag-first`, `always-vm`,
    /// `always-vm-keep-pin`.
    pub fn name(self) -> &'static str {
        match self {
            VmCheck::PageFlagFirst => "page-flag-first",
            VmCheck::AlwaysVm => "always-vm",
            VmCheck::AlwaysVmKeepPin => "always-vm-keep-pin",
        }
    }

    /// True if the variant keeps the VM page pinned between operations.
    pub fn keeps_pin(self) -> bool {
        !matches!(self, VmCheck::AlwaysVm)
    }
}

impl fmt::Display for VmCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for VmCheck {
    type Err = String;
    /// Parses the names of [`VmCheck::name`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VmCheck::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
            format!("unknown VM check '{s}' (valid: page-flag-first, always-vm, always-vm-keep-pin)")
        })
    }
}

/// The caller's pinned VM page, kept across calls (PostgreSQL's `Buffer *vmbuf` argument).
/// Release it with [`VmBuffer::release`] before the backend ends its operation; a pin left in it
/// is released when the [`BackendBuffers`] is dropped.
#[derive(Debug, Default)]
pub struct VmBuffer {
    buf: Option<(Buffer, u32)>,
}

impl VmBuffer {
    /// No page pinned.
    pub fn new() -> VmBuffer {
        VmBuffer { buf: None }
    }

    /// The pinned VM buffer, if any.
    pub fn buffer(&self) -> Option<Buffer> {
        self.buf.map(|(b, _)| b)
    }

    /// Drops the pin, if any.
    pub fn release(&mut self, bb: &BackendBuffers) {
        if let Some((b, _)) = self.buf.take() {
            bb.release(b);
        }
    }
}

/// The visibility map of one heap relation. Stateless: the pages are in the pool, the pins in
/// the caller's [`VmBuffer`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct VisibilityMap {
    rel: Oid,
}

#[inline]
fn map_byte(bb: &BackendBuffers, vm: Buffer, heap_blk: u32) -> &AtomicU8 {
    let p = bb.pool().page_ptr(vm.id());
    // SAFETY: the offset is below BLCKSZ (header + map byte < 8192), the page memory lives as
    // long as the pool, which `bb` keeps alive, and `AtomicU8` has the alignment and size of
    // `u8`. Every concurrent access to map bytes goes through `AtomicU8` (this module never
    // forms `&mut [u8]` over a VM page), so these accesses do not race.
    unsafe { AtomicU8::from_ptr(p.add(maxalign(SIZE_OF_PAGE_HEADER) + heapblk_to_mapbyte(heap_blk))) }
}

impl VisibilityMap {
    /// The map of heap relation `rel`.
    pub fn new(rel: Oid) -> VisibilityMap {
        VisibilityMap { rel }
    }

    /// The heap relation.
    pub fn rel(&self) -> Oid {
        self.rel
    }

    fn vm_tag(&self, map_block: u32) -> BufferTag {
        BufferTag::new(self.rel, ForkNumber::VisibilityMap, BlockNumber(map_block))
    }

    /// True if `vmbuf` holds the VM page covering `heap_blk` (`visibilitymap_pin_ok`).
    pub fn pin_ok(&self, heap_blk: u32, vmbuf: &VmBuffer) -> bool {
        matches!(vmbuf.buf, Some((_, m)) if m == heapblk_to_mapblock(heap_blk))
    }

    /// Makes `vmbuf` hold a pin on the VM page covering `heap_blk`, extending the VM fork with
    /// initialised pages if it is too short (`visibilitymap_pin` + `vm_extend`). Do this before
    /// locking the heap page: it may do I/O. Counts a VM pin unless `vmbuf` already held the
    /// right page.
    ///
    /// # Errors
    /// Buffer manager errors.
    pub fn pin(&self, bb: &BackendBuffers, heap_blk: u32, vmbuf: &mut VmBuffer) -> Result<(), BufferError> {
        if self.pin_ok(heap_blk, vmbuf) {
            return Ok(());
        }
        vmbuf.release(bb);
        let m = heapblk_to_mapblock(heap_blk);
        bb.counters().vm_pins.incr();
        let buf = match bb.read_if_exists(self.vm_tag(m))? {
            Some(b) => b,
            None => {
                self.extend_to(bb, m)?;
                bb.read_buffer(self.vm_tag(m))?
            }
        };
        vmbuf.buf = Some((buf, m));
        Ok(())
    }

    /// Adds initialised VM pages until block `map_block` exists (`vm_extend`).
    fn extend_to(&self, bb: &BackendBuffers, map_block: u32) -> Result<(), BufferError> {
        let mut header = vec![0u8; BLCKSZ];
        page::init(&mut header, 0);
        while bb.pool().nblocks(self.rel, ForkNumber::VisibilityMap)? <= map_block {
            let (b, _) = bb.extend(self.rel, ForkNumber::VisibilityMap)?;
            let g = bb.lock(b, LwLockMode::Exclusive);
            // SAFETY: we hold the new page's content lock exclusively; the header bytes are
            // never read without the content lock (only map bytes are, atomically), so writing
            // them through a raw pointer races with nothing.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    header.as_ptr(),
                    bb.pool().page_ptr(b.id()),
                    SIZE_OF_PAGE_HEADER,
                );
            }
            g.mark_dirty();
            drop(g);
            bb.release(b);
        }
        Ok(())
    }

    /// The bits of `heap_blk` (`visibilitymap_get_status`): a combination of
    /// [`VISIBILITYMAP_ALL_VISIBLE`] and [`VISIBILITYMAP_ALL_FROZEN`]; 0 if the VM page does not
    /// exist. Reads with only a pin (kept in `vmbuf` for the next call); no content lock.
    ///
    /// # Errors
    /// Buffer manager errors.
    pub fn get_status(
        &self,
        bb: &BackendBuffers,
        heap_blk: u32,
        vmbuf: &mut VmBuffer,
    ) -> Result<u8, BufferError> {
        if !self.pin_ok(heap_blk, vmbuf) {
            vmbuf.release(bb);
            let m = heapblk_to_mapblock(heap_blk);
            bb.counters().vm_pins.incr();
            match bb.read_if_exists(self.vm_tag(m))? {
                Some(b) => vmbuf.buf = Some((b, m)),
                None => return Ok(0),
            }
        }
        let (b, _) = vmbuf
            .buf
            .expect("the map page is pinned: pin_ok found it in vmbuf, or it was read into vmbuf just above");
        let byte = map_byte(bb, b, heap_blk).load(Ordering::Relaxed);
        Ok((byte >> heapblk_to_offset(heap_blk)) & VISIBILITYMAP_VALID_BITS)
    }

    fn vm_of(&self, heap_blk: u32, vmbuf: &VmBuffer) -> Buffer {
        match vmbuf.buf {
            Some((b, m)) if m == heapblk_to_mapblock(heap_blk) => b,
            _ => panic!("wrong VM buffer passed for heap block {heap_blk} of relation {}", self.rel),
        }
    }

    /// Sets `flags` for `heap_blk` in the map only (the bit part of `visibilitymap_set`), under
    /// the VM page's exclusive content lock, marking it dirty and stamping it with `lsn` if
    /// non-zero. Low level: the caller keeps `PD_ALL_VISIBLE` in sync (use [`set`](Self::set)
    /// when you hold the heap page). Asking for all-frozen also sets all-visible. Returns true if
    /// a bit changed.
    ///
    /// # Panics
    /// If `vmbuf` does not hold the VM page of `heap_blk`, or `flags` has bits outside
    /// [`VISIBILITYMAP_VALID_BITS`] or none.
    pub fn set_bits(
        &self,
        bb: &BackendBuffers,
        heap_blk: u32,
        vmbuf: &VmBuffer,
        flags: u8,
        lsn: u64,
    ) -> bool {
        assert!(flags != 0 && flags & !VISIBILITYMAP_VALID_BITS == 0, "bad visibility map flags {flags:#x}");
        let flags = flags | VISIBILITYMAP_ALL_VISIBLE;
        let vm = self.vm_of(heap_blk, vmbuf);
        let shift = heapblk_to_offset(heap_blk);
        let cell = map_byte(bb, vm, heap_blk);
        if (cell.load(Ordering::Relaxed) >> shift) & flags == flags {
            return false;
        }
        let g = bb.lock(vm, LwLockMode::Exclusive);
        let old = cell.fetch_or(flags << shift, Ordering::Relaxed);
        let changed = (old >> shift) & flags != flags;
        if changed {
            if lsn != 0 {
                // SAFETY: exclusive content lock on the VM page; the LSN bytes are only read
                // under the content lock (by flushes), never with a bare pin.
                unsafe {
                    std::ptr::copy_nonoverlapping(lsn.to_le_bytes().as_ptr(), bb.pool().page_ptr(vm.id()), 8);
                }
            }
            g.mark_dirty();
        }
        changed
    }

    /// Clears `flags` for `heap_blk` in the map only (`visibilitymap_clear`), under the VM
    /// page's exclusive content lock; clearing all-visible clears all-frozen too. Low level:
    /// the caller keeps `PD_ALL_VISIBLE` in sync (use [`clear`](Self::clear) when you hold the
    /// heap page). Returns true if a bit changed.
    ///
    /// # Panics
    /// As [`set_bits`](Self::set_bits).
    pub fn clear_bits(&self, bb: &BackendBuffers, heap_blk: u32, vmbuf: &VmBuffer, flags: u8) -> bool {
        assert!(flags != 0 && flags & !VISIBILITYMAP_VALID_BITS == 0, "bad visibility map flags {flags:#x}");
        let flags = if flags & VISIBILITYMAP_ALL_VISIBLE != 0 { VISIBILITYMAP_VALID_BITS } else { flags };
        let vm = self.vm_of(heap_blk, vmbuf);
        let shift = heapblk_to_offset(heap_blk);
        let cell = map_byte(bb, vm, heap_blk);
        if (cell.load(Ordering::Relaxed) >> shift) & flags == 0 {
            return false;
        }
        let g = bb.lock(vm, LwLockMode::Exclusive);
        let old = cell.fetch_and(!(flags << shift), Ordering::Relaxed);
        let changed = (old >> shift) & flags != 0;
        if changed {
            g.mark_dirty();
        }
        changed
    }

    fn check_heap(&self, heap: &ContentGuard<'_>, vmbuf: &VmBuffer) -> (u32, Buffer) {
        let tag = heap.tag();
        assert!(
            tag.rel == self.rel && tag.fork == ForkNumber::Main,
            "heap buffer holds {tag}, not a main-fork page of {}",
            self.rel
        );
        assert_eq!(heap.mode(), LwLockMode::Exclusive, "the heap page must be locked exclusively");
        let blk = tag.block.0;
        (blk, self.vm_of(blk, vmbuf))
    }

    /// Sets `flags` for the heap page under `heap` and its `PD_ALL_VISIBLE` flag
    /// (`visibilitymap_set` plus `PageSetAllVisible`), marking both pages dirty; stamps the VM
    /// page with `lsn` when it is non-zero (the `XLOG_HEAP2_VISIBLE` record's LSN). Asking for
    /// all-frozen also sets all-visible. Returns true if a map bit changed.
    ///
    /// # Panics
    /// If `heap` is not an exclusively locked main-fork page of this relation, `vmbuf` does not
    /// hold the right VM page ([`pin`](Self::pin) it first), or `flags` has bits outside
    /// [`VISIBILITYMAP_VALID_BITS`] or none.
    pub fn set(&self, heap: &mut ContentGuard<'_>, vmbuf: &VmBuffer, flags: u8, lsn: u64) -> bool {
        assert!(flags != 0 && flags & !VISIBILITYMAP_VALID_BITS == 0, "bad visibility map flags {flags:#x}");
        let flags = flags | VISIBILITYMAP_ALL_VISIBLE;
        let (blk, _) = self.check_heap(heap, vmbuf);
        let bb = heap.backend();
        if !page::is_all_visible(heap.page()) {
            page::set_all_visible(heap.page_mut());
            heap.mark_dirty();
        }
        self.set_bits(bb, blk, vmbuf, flags, lsn)
    }

    /// Clears `flags` for the heap page under `heap` (`visibilitymap_clear`) and, when
    /// all-visible is among them, its `PD_ALL_VISIBLE` flag (all-frozen is cleared with it,
    /// since frozen implies visible). Marks what changed dirty. Returns true if a map bit
    /// changed.
    ///
    /// # Panics
    /// As [`set`](Self::set).
    pub fn clear(&self, heap: &mut ContentGuard<'_>, vmbuf: &VmBuffer, flags: u8) -> bool {
        assert!(flags != 0 && flags & !VISIBILITYMAP_VALID_BITS == 0, "bad visibility map flags {flags:#x}");
        let flags = if flags & VISIBILITYMAP_ALL_VISIBLE != 0 { VISIBILITYMAP_VALID_BITS } else { flags };
        let (blk, _) = self.check_heap(heap, vmbuf);
        let bb = heap.backend();
        if flags & VISIBILITYMAP_ALL_VISIBLE != 0 && page::is_all_visible(heap.page()) {
            page::clear_all_visible(heap.page_mut());
            heap.mark_dirty();
        }
        self.clear_bits(bb, blk, vmbuf, flags)
    }

    /// Locks heap buffer `heap` exclusively for a modification, pinning the VM page the way
    /// `check` prescribes and never doing VM I/O under the heap lock (the `heap_delete` /
    /// `heap_update` protocol):
    /// * [`VmCheck::PageFlagFirst`]: lock; if `PD_ALL_VISIBLE` is set and the VM page is not
    ///   pinned, unlock, pin it, and lock again (the flag may have been set meanwhile);
    /// * the always-VM variants: pin the VM page first, then lock.
    ///
    /// # Errors
    /// Buffer manager errors from pinning the VM page.
    ///
    /// # Panics
    /// As [`BackendBuffers::lock`].
    pub fn lock_heap_for_update<'a>(
        &self,
        bb: &'a BackendBuffers,
        heap: Buffer,
        vmbuf: &mut VmBuffer,
        check: VmCheck,
    ) -> Result<ContentGuard<'a>, BufferError> {
        let blk = bb.tag(heap).block.0;
        match check {
            VmCheck::PageFlagFirst => loop {
                let g = bb.lock(heap, LwLockMode::Exclusive);
                if !page::is_all_visible(g.page()) || self.pin_ok(blk, vmbuf) {
                    return Ok(g);
                }
                drop(g);
                self.pin(bb, blk, vmbuf)?;
            },
            VmCheck::AlwaysVm | VmCheck::AlwaysVmKeepPin => {
                self.pin(bb, blk, vmbuf)?;
                Ok(bb.lock(heap, LwLockMode::Exclusive))
            }
        }
    }

    /// The visibility step of a heap modification under the lock from
    /// [`lock_heap_for_update`](Self::lock_heap_for_update): clears the page's all-visible state
    /// if it is set. [`VmCheck::PageFlagFirst`] decides from `PD_ALL_VISIBLE` and touches the VM
    /// page only when it is set; the always-VM variants read the VM bit first. Returns true if
    /// a map bit was cleared.
    ///
    /// # Panics
    /// As [`set`](Self::set), when the VM page is needed but not in `vmbuf`.
    pub fn clear_for_update(&self, heap: &mut ContentGuard<'_>, vmbuf: &VmBuffer, check: VmCheck) -> bool {
        match check {
            VmCheck::PageFlagFirst => {
                page::is_all_visible(heap.page()) && self.clear(heap, vmbuf, VISIBILITYMAP_VALID_BITS)
            }
            VmCheck::AlwaysVm | VmCheck::AlwaysVmKeepPin => {
                let (blk, vm) = self.check_heap(heap, vmbuf);
                let bits = (map_byte(heap.backend(), vm, blk).load(Ordering::Relaxed)
                    >> heapblk_to_offset(blk))
                    & VISIBILITYMAP_VALID_BITS;
                if bits != 0 || page::is_all_visible(heap.page()) {
                    self.clear(heap, vmbuf, VISIBILITYMAP_VALID_BITS)
                } else {
                    false
                }
            }
        }
    }

    /// Ends an operation: [`VmCheck::AlwaysVm`] drops the VM pin, the other variants keep it.
    pub fn end_operation(&self, bb: &BackendBuffers, vmbuf: &mut VmBuffer, check: VmCheck) {
        if !check.keeps_pin() {
            vmbuf.release(bb);
        }
    }

    /// The scan-side check: is the heap page under `heap` (locked in either mode) all-visible?
    /// [`VmCheck::PageFlagFirst`] tests `PD_ALL_VISIBLE`; the always-VM variants read the VM bit
    /// through `vmbuf` ([`VmCheck::AlwaysVm`] releases the pin again at once).
    ///
    /// # Errors
    /// Buffer manager errors from pinning the VM page.
    pub fn is_all_visible(
        &self,
        heap: &ContentGuard<'_>,
        vmbuf: &mut VmBuffer,
        check: VmCheck,
    ) -> Result<bool, BufferError> {
        match check {
            VmCheck::PageFlagFirst => Ok(page::is_all_visible(heap.page())),
            VmCheck::AlwaysVm | VmCheck::AlwaysVmKeepPin => {
                let bb = heap.backend();
                let s = self.get_status(bb, heap.tag().block.0, vmbuf)?;
                self.end_operation(bb, vmbuf, check);
                Ok(s & VISIBILITYMAP_ALL_VISIBLE != 0)
            }
        }
    }

    /// Counts all-visible and all-frozen heap pages over the whole map (`visibilitymap_count`).
    ///
    /// # Errors
    /// Buffer manager errors.
    pub fn count(&self, bb: &BackendBuffers) -> Result<(u64, u64), BufferError> {
        let n = bb.pool().nblocks(self.rel, ForkNumber::VisibilityMap)?;
        let (mut visible, mut frozen) = (0u64, 0u64);
        for m in 0..n {
            let b = bb.read_buffer(self.vm_tag(m))?;
            let g = bb.lock(b, LwLockMode::Shared);
            for &byte in &g.page()[maxalign(SIZE_OF_PAGE_HEADER)..] {
                visible += u64::from((byte & 0x55).count_ones());
                frozen += u64::from((byte & 0xAA).count_ones());
            }
            drop(g);
            bb.release(b);
        }
        Ok((visible, frozen))
    }
}
