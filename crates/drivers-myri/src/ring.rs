//! The receive ring: descriptor bookkeeping, buffer refill and the frame handle.
//!
//! The ring keeps the descriptors from `next_rx` up to `next_fill` (mod the ring size) armed:
//! owned by the device, or completed and not yet reaped. [`RxRing::receive`] reaps the next
//! completed descriptor in order and hands its buffer out as an [`RxFrame`]; the descriptor is
//! re-armed at once with a fresh fragment from the pool (Myri10GE refills from pages, not from
//! the buffers it passed up), so frames the coalescer holds do not starve the device as long
//! as the pool can still carve: with one buffer per slot, more slots than descriptors plus
//! held frames; with page frags, where a page is carved again only once all its fragments
//! (posted ones included) are back, enough pages that the held frames' pages and those of the
//! posted fragments leave one whole page free (a held frame pins its whole page).
//!
//! A frame returns its fragment when it is dropped (or [`RxFrame::recycle`]d). In page-frags
//! mode the page is carved again only when all its fragments have come back: a reference count
//! per page, in the caller's storage, with no allocator.
//!
//! Every method takes `&self` (the bookkeeping is in [`Cell`]s), so frames can borrow the ring
//! while the poll loop keeps receiving; the ring is neither `Send` nor `Sync`.

use core::cell::Cell;
use core::fmt;

use lro_core::{RssHash, RxChecksum, RxMeta};

use crate::desc::{
    bits, Completion, DescRing, DmaPool, Frag, RxDescriptor, RxDescriptorFormat, Slot,
};

/// Smallest fragment: a minimum Ethernet frame without FCS.
pub const MIN_FRAG_SIZE: usize = 60;

/// Largest fragment of the model MAC's [`RxDescriptor`]: its 16-bit buffer-size and length
/// fields. Other formats have their own limit (ENET: 16368 bytes, its `MRBR` register).
pub const MAX_FRAG_SIZE: usize = bits::RBS_MASK as usize;

/// Caller-provided bookkeeping memory of a ring with `D` descriptors of format `T` and at most
/// `P` buffer pages: the hardware descriptors (which must stay at a fixed address while the
/// ring runs, so they cannot live inside [`RxRing`]) and the per-descriptor and per-page
/// counters.
///
/// Small (one descriptor, 32 bytes for [`RxDescriptor`] and 8 for ENET's, plus a few bytes per
/// slot and page); place it in a `static` (with `static_cell` or `static mut`), on the stack,
/// or in a `Box`. The descriptor array starts on a 64-byte boundary, which every supported
/// MAC's ring base register accepts. The buffer memory is a separate `&mut [u8]`, so it can sit
/// in a DMA-capable region of its own.
#[repr(C, align(64))]
pub struct RxRingStorage<const D: usize, const P: usize, T: RxDescriptorFormat = RxDescriptor> {
    descriptors: [T; D],
    slots: [Slot; D],
    refs: [Cell<u16>; P],
}

impl<const D: usize, const P: usize, T: RxDescriptorFormat> RxRingStorage<D, P, T> {
    /// Empty storage: every descriptor owned by the CPU.
    pub const fn new() -> Self {
        Self {
            descriptors: [const { T::EMPTY }; D],
            slots: [const { Slot::new() }; D],
            refs: [const { Cell::new(0) }; P],
        }
    }

    /// The hardware descriptors (while no ring borrows the storage).
    pub fn descriptors(&self) -> &[T] {
        &self.descriptors
    }
}

impl<const D: usize, const P: usize, T: RxDescriptorFormat> Default for RxRingStorage<D, P, T> {
    fn default() -> Self {
        Self::new()
    }
}

/// How the buffer memory is cut: pages of `page_size` bytes, each split into fragments of
/// `frag_size` bytes, one frame per fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferLayout {
    /// Page size in bytes: the unit that is reposted.
    pub page_size: usize,
    /// Fragment size in bytes: the buffer given to one descriptor (at least the largest frame).
    pub frag_size: usize,
}

impl BufferLayout {
    /// One buffer per frame, reposted as soon as its frame is returned (stm32-eth style).
    pub const fn slots(buffer_size: usize) -> Self {
        Self {
            page_size: buffer_size,
            frag_size: buffer_size,
        }
    }

    /// Myri10GE's page frags: several frames share one page of `page_size` bytes, cut into
    /// `frag_size` fragments; the page is reposted when all its frames have been returned.
    pub const fn page_frags(page_size: usize, frag_size: usize) -> Self {
        Self {
            page_size,
            frag_size,
        }
    }

    /// Fragments per page.
    pub const fn frags_per_page(&self) -> usize {
        match self.page_size.checked_div(self.frag_size) {
            Some(n) => n,
            None => 0,
        }
    }
}

/// Why a ring could not be built from the given memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayoutError {
    /// The ring has no descriptors.
    NoDescriptors,
    /// The fragment size is below [`MIN_FRAG_SIZE`] or above what the descriptor format takes
    /// ([`MAX_FRAG_SIZE`] for [`RxDescriptor`]), or so small that a page holds more than 65535
    /// fragments.
    FragSize(usize),
    /// The buffer memory, the page size or the fragment size is not a multiple of the
    /// alignment the MAC requires.
    Misaligned {
        /// The alignment in bytes.
        align: usize,
    },
    /// The page is smaller than one fragment.
    PageSmallerThanFrag,
    /// The buffer memory holds no complete page.
    NoPages,
    /// The buffer memory holds more pages than the storage has counters for, or 65535 pages
    /// or more.
    TooManyPages {
        /// Pages in the buffer memory.
        pages: usize,
        /// Page counters in the storage.
        capacity: usize,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoDescriptors => f.write_str("the ring has no descriptors"),
            Self::FragSize(s) => write!(
                f,
                "fragment size {s}: below {MIN_FRAG_SIZE} bytes, above the descriptor format's largest buffer, or more than 65535 to a page"
            ),
            Self::Misaligned { align } => write!(
                f,
                "buffer memory, page size and fragment size must be multiples of {align} bytes"
            ),
            Self::PageSmallerThanFrag => f.write_str("page smaller than one fragment"),
            Self::NoPages => f.write_str("buffer memory smaller than one page"),
            Self::TooManyPages { pages, capacity } => write!(
                f,
                "{pages} pages of buffer memory but counters for {capacity}"
            ),
        }
    }
}

impl core::error::Error for LayoutError {}

/// Ring counters (64-bit, never wrapping in practice).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RingStats {
    /// Good frames handed out by [`RxRing::receive`].
    pub frames: u64,
    /// Bytes of those frames.
    pub bytes: u64,
    /// Descriptors whose contents the driver dropped: an error summary, a length that does not
    /// fit the buffer, or a piece of a frame spanning descriptors (each piece counts: a frame
    /// over k descriptors adds k).
    pub errors: u64,
    /// Frames returned to the ring (dropped or recycled handles).
    pub returned: u64,
    /// Refills that left descriptors unarmed because every page was in use (the ring starves
    /// while frames are held; the device then drops frames for lack of descriptors).
    pub starved: u64,
    /// Pages (re)posted: carving started on a page all of whose fragments had come back.
    pub pages_posted: u64,
}

/// The receive side of a MAC: descriptors in caller memory, buffers in caller memory, frames
/// handed out as [`RxFrame`] handles that give their buffer back when dropped.
///
/// ```
/// use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
///
/// let mut storage: RxRingStorage<8, 4> = RxRingStorage::new();
/// let mut buffers = [0u8; 4 * 4096];
/// // Two 2 KiB fragments per 4 KiB page: 8 fragments for 8 descriptors.
/// let ring = RxRing::new(&mut storage, &mut buffers, BufferLayout::page_frags(4096, 2048))?;
/// assert_eq!(ring.armed(), 8); // every descriptor given to the device
/// assert!(ring.receive().is_none()); // nothing received yet
/// # Ok::<(), drivers_myri::LayoutError>(())
/// ```
pub struct RxRing<'a, T: RxDescriptorFormat = RxDescriptor> {
    desc: DescRing<'a, T>,
    pool: DmaPool<'a>,
    layout: BufferLayout,
    next_rx: Cell<usize>,
    next_fill: Cell<usize>,
    /// The last descriptor reaped did not end its frame: the next one holds the rest of it.
    mid_frame: Cell<bool>,
    armed: Cell<usize>,
    outstanding: Cell<usize>,
    frames: Cell<u64>,
    bytes: Cell<u64>,
    errors: Cell<u64>,
    returned: Cell<u64>,
    starved: Cell<u64>,
    /// A MAC driver of this crate writes into the ring ([`RxRing::attach`]): a second one
    /// must not.
    attached: Cell<bool>,
}

impl<'a, T: RxDescriptorFormat> RxRing<'a, T> {
    /// A ring over `storage`'s descriptors and the pages of `buffers`, with every descriptor
    /// armed. The number of pages is `buffers.len() / layout.page_size`; to keep the device fed
    /// while frames are held, give it more fragments than descriptors.
    ///
    /// # Errors
    /// [`LayoutError`] when the geometry does not fit.
    pub fn new<const D: usize, const P: usize>(
        storage: &'a mut RxRingStorage<D, P, T>,
        buffers: &'a mut [u8],
        layout: BufferLayout,
    ) -> Result<Self, LayoutError> {
        if D == 0 {
            return Err(LayoutError::NoDescriptors);
        }
        if !(MIN_FRAG_SIZE.max(T::TRAILER + 14)..=T::MAX_BUFFER).contains(&layout.frag_size) {
            return Err(LayoutError::FragSize(layout.frag_size));
        }
        if layout.page_size < layout.frag_size {
            return Err(LayoutError::PageSmallerThanFrag);
        }
        // The pool counts a page's fragments in 16 bits.
        if layout.frags_per_page() > usize::from(u16::MAX) {
            return Err(LayoutError::FragSize(layout.frag_size));
        }
        let align = T::BUFFER_ALIGN;
        if !buffers.as_ptr().addr().is_multiple_of(align)
            || !layout.page_size.is_multiple_of(align)
            || !layout.frag_size.is_multiple_of(align)
        {
            return Err(LayoutError::Misaligned { align });
        }
        let pages = buffers.len() / layout.page_size;
        if pages == 0 {
            return Err(LayoutError::NoPages);
        }
        if pages > P || pages >= usize::from(u16::MAX) {
            return Err(LayoutError::TooManyPages { pages, capacity: P });
        }
        let storage: &'a RxRingStorage<D, P, T> = storage;
        let pool = DmaPool::new(
            buffers,
            layout.page_size,
            layout.frag_size,
            pages as u16,
            &storage.refs,
        );
        let ring = Self {
            desc: DescRing::new(&storage.descriptors, &storage.slots, layout.frag_size),
            pool,
            layout,
            next_rx: Cell::new(0),
            next_fill: Cell::new(0),
            mid_frame: Cell::new(false),
            armed: Cell::new(0),
            outstanding: Cell::new(0),
            frames: Cell::new(0),
            bytes: Cell::new(0),
            errors: Cell::new(0),
            returned: Cell::new(0),
            starved: Cell::new(0),
            attached: Cell::new(false),
        };
        ring.refill();
        Ok(ring)
    }

    /// Reaps the next frame the device completed, in ring order, and re-arms its descriptor
    /// with a fresh fragment. Bad frames (see [`RingStats::errors`]) are dropped and skipped.
    /// `None` when the device has not completed the next descriptor: an empty ring is not an
    /// error.
    pub fn receive(&self) -> Option<RxFrame<'_, T>> {
        loop {
            if self.armed.get() == 0 && self.refill() == 0 {
                return None;
            }
            let i = self.next_rx.get();
            let (frag, done) = self.desc.reap(i)?;
            self.next_rx.set((i + 1) % self.capacity());
            self.armed.set(self.armed.get() - 1);
            let len = usize::from(done.len);
            // A descriptor after one that did not end its frame holds the rest of that frame
            // (ENET's have no first-buffer bit, and QEMU's ENET gives the last one the length
            // of its own piece): never a frame of its own. Unless its format says it starts a
            // frame: the device abandoned the one before (it found no free descriptor for the
            // rest). Without that bit (ENET) the next whole frame is taken for the rest of an
            // abandoned one and dropped too.
            let continues = self.mid_frame.replace(!done.last) && done.first != Some(true);
            // A frame and the trailer the device appends (an FCS) fit the buffer.
            let good =
                done.good && !continues && (14..=self.layout.frag_size - T::TRAILER).contains(&len);
            if !good {
                self.errors.set(self.errors.get() + 1);
                self.pool.free(frag);
                self.refill();
                continue;
            }
            self.frames.set(self.frames.get() + 1);
            self.bytes.set(self.bytes.get() + len as u64);
            self.outstanding.set(self.outstanding.get() + 1);
            self.refill();
            return Some(RxFrame {
                ring: self,
                frag: Some(frag),
                len: len as u16,
                done,
            });
        }
    }

    /// Arms every unarmed descriptor it can, in ring order, with fresh fragments; returns how
    /// many it armed. Called by [`RxRing::receive`] and whenever a frame is returned; a driver
    /// for a real MAC writes the device's tail pointer or poll-demand register after it.
    pub fn refill(&self) -> usize {
        let n = self.capacity();
        let mut armed = 0;
        while self.armed.get() < n {
            let Some(frag) = self.pool.alloc() else {
                self.starved.set(self.starved.get() + 1);
                break;
            };
            let i = self.next_fill.get();
            self.desc.post(i, frag, &self.pool);
            self.next_fill.set((i + 1) % n);
            self.armed.set(self.armed.get() + 1);
            armed += 1;
        }
        armed
    }

    /// Gives a frame's fragment back and re-arms descriptors.
    fn give_back(&self, frag: Frag) {
        self.pool.free(frag);
        self.outstanding.set(self.outstanding.get() - 1);
        self.returned.set(self.returned.get() + 1);
        self.refill();
    }

    /// The hardware descriptors, for programming the MAC's ring base address and size.
    pub fn descriptors(&self) -> &'a [T] {
        self.desc.hw()
    }

    /// Marks the ring as written by a MAC (a driver of this crate, such as
    /// [`Enet`](crate::enet::Enet), as it starts its DMA into the ring); `false`, changing
    /// nothing, when another already is: two devices writing one ring's buffers would write
    /// into frames handed out.
    pub(crate) fn attach(&self) -> bool {
        !self.attached.replace(true)
    }

    /// Ends [`RxRing::attach`], once the MAC's DMA into the ring has stopped.
    pub(crate) fn detach(&self) {
        self.attached.set(false);
    }

    /// The address range of the buffer memory the device writes (start, end), for a driver
    /// to check against its DMA engine's reach.
    pub fn buffer_span(&self) -> (usize, usize) {
        self.pool.span()
    }

    /// Descriptors in the ring.
    pub fn capacity(&self) -> usize {
        self.desc.hw().len()
    }

    /// Descriptors armed: owned by the device, or completed and not yet reaped.
    pub fn armed(&self) -> usize {
        self.armed.get()
    }

    /// Frames handed out and not yet returned.
    pub fn outstanding(&self) -> usize {
        self.outstanding.get()
    }

    /// How the buffer memory is cut.
    pub fn layout(&self) -> BufferLayout {
        self.layout
    }

    /// Fragments in the buffer memory.
    pub fn fragments(&self) -> usize {
        self.pool.frags()
    }

    /// Pages in the buffer memory.
    pub fn pages(&self) -> usize {
        self.pool.pages()
    }

    /// Fragments of page `page` posted to the device or held as frames (its reference count).
    pub fn page_refs(&self, page: usize) -> u16 {
        self.pool.page_refs(page)
    }

    /// The counters.
    pub fn stats(&self) -> RingStats {
        RingStats {
            frames: self.frames.get(),
            bytes: self.bytes.get(),
            errors: self.errors.get(),
            returned: self.returned.get(),
            starved: self.starved.get(),
            pages_posted: self.pool.pages_started(),
        }
    }

    /// The descriptor handoff, for the simulated device.
    #[cfg(feature = "test-utils")]
    pub(crate) fn desc(&self) -> &DescRing<'a, T> {
        &self.desc
    }
}

impl<T: RxDescriptorFormat> Drop for RxRing<'_, T> {
    /// Takes every descriptor back from the device (OWN cleared). A driver for a real MAC stops
    /// its receive DMA before dropping the ring.
    fn drop(&mut self) {
        for i in 0..self.capacity() {
            if let Some(frag) = self.desc.reclaim(i) {
                self.pool.free(frag);
            }
        }
    }
}

impl<T: RxDescriptorFormat> fmt::Debug for RxRing<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxRing")
            .field("capacity", &self.capacity())
            .field("armed", &self.armed())
            .field("outstanding", &self.outstanding())
            .field("next_rx", &self.next_rx.get())
            .field("next_fill", &self.next_fill.get())
            .field("layout", &self.layout)
            .field("stats", &self.stats())
            .finish()
    }
}

/// A received frame, still in its ring buffer: the handle owns the fragment and gives it back
/// to the ring when dropped (or [`RxFrame::recycle`]d). Dereferences to the frame's bytes
/// (writable, so the coalescer can rewrite headers in place).
///
/// The borrow of the ring keeps the ring (and its memory) alive while the frame exists; frames
/// can be held in any order, for example inside a [`lro_core::Engine`].
pub struct RxFrame<'r, T: RxDescriptorFormat = RxDescriptor> {
    ring: &'r RxRing<'r, T>,
    frag: Option<Frag>,
    len: u16,
    done: Completion,
}

impl<'r, T: RxDescriptorFormat> RxFrame<'r, T> {
    /// Frame length in bytes (FCS stripped).
    #[inline]
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Never true: the ring drops frames shorter than an Ethernet header.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The descriptor's status word as the device left it (for [`RxDescriptor`] its word 0;
    /// for ENET's, the flags in the low half and the data length in the high half).
    pub fn status(&self) -> u32 {
        self.done.status
    }

    /// The CHECKSUM_COMPLETE sum the device reported, if any.
    pub fn hardware_checksum(&self) -> Option<u16> {
        T::checksum(&self.done)
    }

    /// The RSS hash the device reported, if any.
    pub fn rss_hash(&self) -> Option<RssHash> {
        T::rss(&self.done)
    }

    /// The VLAN TCI the device stripped, if any.
    pub fn vlan_stripped(&self) -> Option<u16> {
        T::vlan(&self.done)
    }

    /// What the descriptor says about the frame, as the coalescer's metadata, with the arrival
    /// time `time` on the caller's clock.
    pub fn meta(&self, time: u64) -> RxMeta {
        let mut meta = RxMeta::ethernet(time);
        if let Some(sum) = self.hardware_checksum() {
            meta = meta.with_checksum(RxChecksum::Complete(sum));
        }
        if let Some(rss) = self.rss_hash() {
            meta = meta.with_rss(rss);
        }
        if let Some(tci) = self.vlan_stripped() {
            meta = meta.with_vlan_stripped(tci);
        }
        meta
    }

    /// The buffer page the frame sits in.
    pub fn page(&self) -> usize {
        self.frag.as_ref().map_or(0, |f| self.ring.pool.page_of(f))
    }

    /// Gives the buffer back to the ring now (the same as dropping the frame).
    pub fn recycle(self) {}
}

impl<T: RxDescriptorFormat> AsRef<[u8]> for RxFrame<'_, T> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match &self.frag {
            Some(f) => &self.ring.pool.bytes(f)[..usize::from(self.len)],
            None => &[],
        }
    }
}

impl<T: RxDescriptorFormat> AsMut<[u8]> for RxFrame<'_, T> {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len);
        match &mut self.frag {
            Some(f) => &mut self.ring.pool.bytes_mut(f)[..len],
            None => &mut [],
        }
    }
}

impl<T: RxDescriptorFormat> core::ops::Deref for RxFrame<'_, T> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_ref()
    }
}

impl<T: RxDescriptorFormat> core::ops::DerefMut for RxFrame<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut()
    }
}

impl<T: RxDescriptorFormat> Drop for RxFrame<'_, T> {
    fn drop(&mut self) {
        if let Some(frag) = self.frag.take() {
            self.ring.give_back(frag);
        }
    }
}

impl<T: RxDescriptorFormat> fmt::Debug for RxFrame<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxFrame")
            .field("len", &self.len)
            .field("page", &self.page())
            .field("status", &format_args!("{:#010x}", self.done.status))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;

    use super::*;

    #[test]
    fn one_device_at_a_time_writes_a_ring() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut memory = vec![0u8; 4 * 2048];
        let ring = RxRing::new(&mut storage, &mut memory, BufferLayout::slots(2048)).unwrap();
        assert!(ring.attach(), "a new ring is free");
        assert!(!ring.attach(), "a second device is refused");
        ring.detach();
        assert!(ring.attach(), "free again once the first let go");
    }

    #[test]
    fn a_page_of_more_than_65535_fragments_is_a_layout_error() {
        // Fragments are counted per page in 16 bits: 65536 of them do not fit (the count
        // wrapped to zero and `RxRing::new` panicked; 65537 wrapped to one per page).
        let mut mem = vec![0u8; 64 * 65537];
        for frags in [65536, 65537] {
            let mut storage: RxRingStorage<4, 1> = RxRingStorage::new();
            let layout = BufferLayout::page_frags(64 * frags, 64);
            assert_eq!(
                RxRing::new(&mut storage, &mut mem, layout).err(),
                Some(LayoutError::FragSize(64))
            );
        }
        // 65535 fragments per page do.
        let mut storage: RxRingStorage<4, 1> = RxRingStorage::new();
        let layout = BufferLayout::page_frags(64 * 65535, 64);
        let ring = RxRing::new(&mut storage, &mut mem, layout).unwrap();
        assert_eq!(ring.fragments(), 65535);
        assert_eq!(ring.armed(), 4);
    }
}
