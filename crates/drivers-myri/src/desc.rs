//! Receive descriptors and DMA buffer memory: the crate's only `unsafe` code.
//!
//! Three things live here because each needs memory the device writes behind the compiler's back:
//! - [`RxDescriptor`]: the hardware descriptor layout, accessed only with volatile reads and
//!   writes.
//! - `DmaPool`: the caller's buffer memory cut into pages and fixed-size fragments, handed out
//!   as unique, unforgeable `Frag` tokens with a reference count per page (Myri10GE's page
//!   frags: a page is carved again only when every fragment of it has come back).
//! - `DescRing`: the ownership handoff. A token given to the device is parked inside this
//!   module next to its descriptor, so no CPU reference to a buffer exists while the device owns
//!   it; it comes back only once the device has cleared the OWN bit.
//!
//! # Invariants
//! 1. A `Frag` token exists at most once per fragment (created only by `DmaPool::alloc` for a
//!    fragment of a page whose previous tokens have all been returned; never cloned).
//! 2. A fragment is accessed by the CPU only through its token (`DmaPool::bytes`,
//!    `DmaPool::bytes_mut`), so a shared or unique borrow of the token is a shared or unique
//!    borrow of the fragment.
//! 3. A fragment is written by the device only while its token is parked in a descriptor's slot
//!    with the OWN bit set, through the address and size the driver wrote into that descriptor.
//!
//! # Ordering
//! Before setting OWN the driver issues `fence(Release)` so the buffer address and size (and, on
//! a real MAC, any cache maintenance) are visible before the device may act on them; after
//! reading a descriptor whose OWN bit is clear it issues `fence(Acquire)` so the frame length,
//! status and buffer contents are read after the ownership check (the rule embassy and stm32-eth
//! follow). The simulated device mirrors it: Acquire after seeing OWN, Release before clearing
//! it.

use core::cell::{Cell, UnsafeCell};
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{compiler_fence, fence, Ordering};

/// Bits of the status word (word 0) of a receive descriptor.
///
/// The layout is this crate's model MAC (close to the Synopsys/STM32 "enhanced" RDES0 and to
/// Myri10GE's receive-done slot, which reports a length and a CHECKSUM_COMPLETE sum): words are
/// in the CPU's byte order, as on a little-endian microcontroller.
pub mod bits {
    /// Owned by the device: set by the driver to give the descriptor to the MAC, cleared by the
    /// MAC when it has written a frame.
    pub const OWN: u32 = 1 << 31;
    /// Error summary: the frame is bad (CRC, overrun, or longer than the buffer) and must be
    /// dropped.
    pub const ES: u32 = 1 << 30;
    /// First descriptor of a frame.
    pub const FS: u32 = 1 << 29;
    /// Last descriptor of a frame. A frame with both `FS` and `LS` fits in one buffer; this
    /// driver drops frames that span descriptors (configure buffers of at least the MTU).
    pub const LS: u32 = 1 << 28;
    /// Checksum valid: the checksum word holds the ones'-complement sum of every byte after the
    /// 14-byte Ethernet header (Linux CHECKSUM_COMPLETE, what Myri10GE firmware reports).
    pub const CSV: u32 = 1 << 27;
    /// RSS hash valid: the hash word holds the NIC's receive-side-scaling hash.
    pub const RHV: u32 = 1 << 26;
    /// VLAN tag stripped: the upper half of the checksum word holds the TCI.
    pub const VLV: u32 = 1 << 25;
    /// RSS hash type shift (`RHT_MASK`): 0 opaque, 1 IPv4, 2 TCP/IPv4, 3 IPv6, 4 TCP/IPv6.
    pub const RHT_SHIFT: u32 = 20;
    /// RSS hash type mask (after shifting by `RHT_SHIFT`).
    pub const RHT_MASK: u32 = 0x7;
    /// Frame length mask: bytes the MAC wrote into the buffer (FCS stripped).
    pub const FL_MASK: u32 = 0xffff;
    /// Buffer size mask of the control word (word 1), written by the driver.
    pub const RBS_MASK: u32 = 0xffff;
}

/// Word indices inside a descriptor.
mod word {
    /// Status: OWN, flags, frame length (device writes; driver sets OWN).
    pub(super) const STATUS: usize = 0;
    /// Control: buffer size (driver writes).
    pub(super) const CONTROL: usize = 1;
    /// Buffer address, low 32 bits (driver writes).
    pub(super) const ADDR_LO: usize = 2;
    /// Buffer address, high 32 bits (driver writes; zero on a 32-bit MCU).
    pub(super) const ADDR_HI: usize = 3;
    /// CHECKSUM_COMPLETE sum (low half) and stripped VLAN TCI (high half) (device writes).
    pub(super) const CSUM_VLAN: usize = 4;
    /// RSS hash (device writes).
    pub(super) const HASH: usize = 5;
}

/// One receive descriptor as the MAC sees it: eight 32-bit words, 32-byte aligned, in memory the
/// device reads and writes by DMA. All accesses are volatile.
///
/// Descriptors live in caller-provided memory (see [`RxRingStorage`](crate::RxRingStorage));
/// the driver is the only code that writes them, through the ring.
#[repr(C, align(32))]
pub struct RxDescriptor {
    words: [UnsafeCell<u32>; 8],
}

impl RxDescriptor {
    /// A descriptor owned by the CPU, with no buffer.
    pub const fn new() -> Self {
        Self {
            words: [const { UnsafeCell::new(0) }; 8],
        }
    }

    #[inline(always)]
    fn read(&self, w: usize) -> u32 {
        // SAFETY: the pointer comes from an `UnsafeCell` inside `self`, so it is valid, aligned
        // and may be accessed while `self` is shared; no reference to the word is ever created,
        // only volatile accesses, because the device may write it at any time.
        unsafe { self.words[w].get().read_volatile() }
    }

    #[inline(always)]
    fn write(&self, w: usize, value: u32) {
        // SAFETY: as in `read`: a valid, aligned word inside `self`, written through the
        // `UnsafeCell` pointer with a volatile store and never referenced.
        unsafe { self.words[w].get().write_volatile(value) }
    }

    /// The status word (word 0): [`bits::OWN`], flags and the frame length.
    #[inline]
    pub fn status(&self) -> u32 {
        self.read(word::STATUS)
    }

    /// Whether the device owns the descriptor (the OWN bit).
    #[inline]
    pub fn is_owned_by_device(&self) -> bool {
        self.status() & bits::OWN != 0
    }

    /// The buffer address the driver programmed (zero when none).
    #[inline]
    pub fn buffer_addr(&self) -> u64 {
        (u64::from(self.read(word::ADDR_HI)) << 32) | u64::from(self.read(word::ADDR_LO))
    }

    /// The buffer size the driver programmed.
    #[inline]
    pub fn buffer_size(&self) -> usize {
        (self.read(word::CONTROL) & bits::RBS_MASK) as usize
    }
}

impl Default for RxDescriptor {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for RxDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxDescriptor")
            .field("status", &format_args!("{:#010x}", self.status()))
            .field("buffer_addr", &format_args!("{:#x}", self.buffer_addr()))
            .field("buffer_size", &self.buffer_size())
            .finish()
    }
}

/// What the device reported in a descriptor it returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Completion {
    /// The status word (OWN clear).
    pub(crate) status: u32,
    /// Checksum (low half) and VLAN TCI (high half).
    pub(crate) csum_vlan: u32,
    /// RSS hash.
    pub(crate) hash: u32,
}

/// The right to access one fragment of a [`DmaPool`]: unique, not `Clone`, created only by
/// [`DmaPool::alloc`]. Holds the fragment's address.
#[derive(Debug)]
pub(crate) struct Frag {
    ptr: NonNull<u8>,
}

/// Page not being carved.
const NO_PAGE: u16 = u16::MAX;

/// Buffer memory cut into `pages` pages of `page_size` bytes, each cut into fragments of
/// `frag_size` bytes, with a count of outstanding tokens per page.
pub(crate) struct DmaPool<'a> {
    base: NonNull<u8>,
    len: usize,
    page_size: usize,
    frag_size: usize,
    frags_per_page: u16,
    pages: u16,
    /// Outstanding tokens (posted to the device or held as frames) per page.
    refs: &'a [Cell<u16>],
    /// The page being carved (`NO_PAGE`: none) and its next fragment.
    carve_page: Cell<u16>,
    carve_next: Cell<u16>,
    /// Where the search for a free page starts (next fit).
    cursor: Cell<u16>,
    /// Pages started (carving began on a page all of whose fragments had come back).
    pages_started: Cell<u64>,
    _mem: PhantomData<&'a mut [u8]>,
}

impl<'a> DmaPool<'a> {
    /// Takes `mem` for the pool's lifetime. The caller (the ring) has checked the geometry:
    /// `page_size * pages <= mem.len()`, `frag_size * frags_per_page <= page_size`,
    /// `refs.len() >= pages`, `pages < NO_PAGE`.
    pub(crate) fn new(
        mem: &'a mut [u8],
        page_size: usize,
        frag_size: usize,
        pages: u16,
        refs: &'a [Cell<u16>],
    ) -> Self {
        let frags_per_page = (page_size / frag_size) as u16;
        assert!(
            frag_size > 0
                && frags_per_page > 0
                && pages < NO_PAGE
                && refs.len() >= usize::from(pages)
                && page_size * usize::from(pages) <= mem.len()
        );
        for r in refs {
            r.set(0);
        }
        Self {
            base: NonNull::from(&mut *mem).cast(),
            len: page_size * usize::from(pages),
            page_size,
            frag_size,
            frags_per_page,
            pages,
            refs,
            carve_page: Cell::new(NO_PAGE),
            carve_next: Cell::new(0),
            cursor: Cell::new(0),
            pages_started: Cell::new(0),
            _mem: PhantomData,
        }
    }

    /// Fragment size in bytes.
    pub(crate) fn frag_size(&self) -> usize {
        self.frag_size
    }

    /// Fragments in the pool.
    pub(crate) fn frags(&self) -> usize {
        usize::from(self.pages) * usize::from(self.frags_per_page)
    }

    /// Pages carving started on.
    pub(crate) fn pages_started(&self) -> u64 {
        self.pages_started.get()
    }

    /// Outstanding tokens of page `page`.
    pub(crate) fn page_refs(&self, page: usize) -> u16 {
        self.refs.get(page).map_or(0, Cell::get)
    }

    /// Pages in the pool.
    pub(crate) fn pages(&self) -> usize {
        usize::from(self.pages)
    }

    /// The page and the offset in the pool of a token of this pool.
    ///
    /// # Panics
    /// If `frag` is not a fragment of this pool (a crate bug).
    #[inline]
    fn locate(&self, frag: &Frag) -> (usize, usize) {
        let offset = (frag.ptr.as_ptr() as usize).wrapping_sub(self.base.as_ptr() as usize);
        assert!(offset < self.len && (offset % self.page_size).is_multiple_of(self.frag_size));
        (offset / self.page_size, offset)
    }

    /// The page a token belongs to.
    pub(crate) fn page_of(&self, frag: &Frag) -> usize {
        self.locate(frag).0
    }

    /// A fresh fragment: the next of the page being carved, or the first of the next page all
    /// of whose fragments have come back. `None` when every page is in use.
    pub(crate) fn alloc(&self) -> Option<Frag> {
        let mut page = self.carve_page.get();
        if page == NO_PAGE {
            // Next fit from the cursor: pages come back roughly in the order they were carved.
            let start = self.cursor.get();
            let found = (0..self.pages)
                .map(|i| ((u32::from(start) + u32::from(i)) % u32::from(self.pages)) as u16)
                .find(|&p| self.refs[usize::from(p)].get() == 0)?;
            page = found;
            self.carve_page.set(page);
            self.carve_next.set(0);
            self.cursor
                .set(((u32::from(page) + 1) % u32::from(self.pages)) as u16);
            self.pages_started.set(self.pages_started.get() + 1);
        }
        let index = self.carve_next.get();
        if index + 1 == self.frags_per_page {
            // Last fragment: the page can be carved again once all its tokens are back.
            self.carve_page.set(NO_PAGE);
        } else {
            self.carve_next.set(index + 1);
        }
        let r = &self.refs[usize::from(page)];
        r.set(r.get() + 1);
        let offset = usize::from(page) * self.page_size + usize::from(index) * self.frag_size;
        // Invariant 1: this fragment's previous token (if any) was returned, because its page's
        // count was zero when carving began and fragments of a page are handed out once per
        // carving.
        Some(Frag {
            ptr: NonNull::new(self.base.as_ptr().wrapping_add(offset))?,
        })
    }

    /// Returns a token; its page becomes free when its count reaches zero (and it is not being
    /// carved).
    pub(crate) fn free(&self, frag: Frag) {
        let (page, _) = self.locate(&frag);
        let r = &self.refs[page];
        r.set(r.get() - 1);
    }

    /// The fragment's bytes.
    #[inline]
    pub(crate) fn bytes<'s>(&'s self, frag: &'s Frag) -> &'s [u8] {
        let (_, offset) = self.locate(frag);
        debug_assert!(offset + self.frag_size <= self.len);
        // SAFETY: `frag` is a fragment of this pool (checked by `locate`), so `frag_size` bytes
        // from its address lie inside the memory the pool borrows for 'a, which outlives 's.
        // Invariants 1-2: the token is unique and borrowed shared for 's, so nothing writes the
        // fragment for 's (a unique access needs `&mut Frag`, the device needs the token parked
        // in a descriptor). The memory is initialised (it came from a `&mut [u8]`).
        unsafe { core::slice::from_raw_parts(frag.ptr.as_ptr(), self.frag_size) }
    }

    /// The fragment's bytes, writable.
    #[inline]
    pub(crate) fn bytes_mut<'s>(&'s self, frag: &'s mut Frag) -> &'s mut [u8] {
        let (_, offset) = self.locate(frag);
        debug_assert!(offset + self.frag_size <= self.len);
        // SAFETY: in bounds and valid for 's as in `bytes`; the token is borrowed uniquely for
        // 's and is the only way to reach the fragment (invariants 1-3), so this is the only
        // reference to these bytes for 's. Fragments of one pool never overlap.
        unsafe { core::slice::from_raw_parts_mut(frag.ptr.as_ptr(), self.frag_size) }
    }
}

/// A token parked with the device, reachable only from this module.
#[derive(Default)]
pub(crate) struct Slot(Cell<Option<Frag>>);

impl Slot {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        Self(Cell::new(None))
    }
}

/// The descriptors and their parked tokens: the ownership handoff between driver and device.
pub(crate) struct DescRing<'a> {
    hw: &'a [RxDescriptor],
    slots: &'a [Slot],
    /// The pool's fragment size (the most the device may write into a parked buffer).
    #[cfg_attr(not(feature = "test-utils"), allow(dead_code))]
    frag_size: usize,
}

impl<'a> DescRing<'a> {
    /// Takes every descriptor back from the device (OWN cleared, no buffer) and empties the
    /// slots. `hw` and `slots` have the same length.
    pub(crate) fn new(hw: &'a [RxDescriptor], slots: &'a [Slot], frag_size: usize) -> Self {
        assert_eq!(hw.len(), slots.len());
        for (d, s) in hw.iter().zip(slots) {
            d.write(word::STATUS, 0);
            // Tokens of a previous ring over this storage (forgotten rather than dropped)
            // point into memory this ring does not own: discard them.
            s.0.set(None);
        }
        compiler_fence(Ordering::SeqCst);
        Self {
            hw,
            slots,
            frag_size,
        }
    }

    /// The hardware descriptors (for programming the MAC's ring base address).
    pub(crate) fn hw(&self) -> &'a [RxDescriptor] {
        self.hw
    }

    /// Programs descriptor `i` with `frag` (from `pool`) and gives it to the device.
    ///
    /// # Panics
    /// If `i` is out of range or the descriptor already holds a buffer (a crate bug).
    pub(crate) fn post(&self, i: usize, frag: Frag, pool: &DmaPool<'_>) {
        let d = &self.hw[i];
        let slot = &self.slots[i];
        let previous = slot.0.take();
        assert!(previous.is_none() && !d.is_owned_by_device());
        let addr = frag.ptr.as_ptr().addr() as u64;
        d.write(word::ADDR_LO, addr as u32);
        d.write(word::ADDR_HI, (addr >> 32) as u32);
        d.write(word::CONTROL, pool.frag_size() as u32 & bits::RBS_MASK);
        d.write(word::CSUM_VLAN, 0);
        d.write(word::HASH, 0);
        slot.0.set(Some(frag));
        // Release: the address, size and the CPU's last accesses to the buffer happen before
        // the device can see OWN (stm32-eth `set_owned`, embassy "fence before tail pointer").
        fence(Ordering::Release);
        d.write(word::STATUS, bits::OWN);
    }

    /// If the device has returned descriptor `i` (OWN clear and a buffer parked), takes the
    /// token back with what the device reported.
    pub(crate) fn reap(&self, i: usize) -> Option<(Frag, Completion)> {
        let d = &self.hw[i];
        let status = d.status();
        if status & bits::OWN != 0 {
            return None;
        }
        // Acquire: the length, status words and frame bytes are read after OWN was seen clear.
        fence(Ordering::Acquire);
        let frag = self.slots[i].0.take()?;
        let done = Completion {
            status,
            csum_vlan: d.read(word::CSUM_VLAN),
            hash: d.read(word::HASH),
        };
        Some((frag, done))
    }

    /// Takes descriptor `i` back from the device without a frame (teardown) and returns its
    /// token. The caller has stopped the device (a real MAC) before.
    pub(crate) fn reclaim(&self, i: usize) -> Option<Frag> {
        self.hw[i].write(word::STATUS, 0);
        fence(Ordering::Acquire);
        self.slots[i].0.take()
    }
}

/// What the device side writes for one frame (the simulator's view of a completion).
#[cfg(feature = "test-utils")]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DeviceWrite {
    /// Extra status flags (`ES`, `CSV`, `RHV`, `VLV`, hash type); `FS`, `LS` and the length
    /// are added.
    pub(crate) flags: u32,
    /// Checksum (low half) and VLAN TCI (high half).
    pub(crate) csum_vlan: u32,
    /// RSS hash.
    pub(crate) hash: u32,
}

/// Why the device could not take a frame.
#[cfg(feature = "test-utils")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceRefused {
    /// The descriptor is not owned by the device (ring full / starved).
    NotOwned,
    /// The descriptor's buffer is not the one the driver parked (a driver bug).
    BadDescriptor,
}

#[cfg(feature = "test-utils")]
impl DescRing<'_> {
    /// Plays the MAC for descriptor `i`: if the device owns it, writes `frame` into its buffer
    /// by "DMA" (truncated to the buffer, with [`bits::ES`] set, when longer), then the status
    /// words, and gives it back to the CPU. Returns the bytes written.
    pub(crate) fn device_write(
        &self,
        i: usize,
        frame: &[u8],
        mut w: DeviceWrite,
    ) -> Result<usize, DeviceRefused> {
        let d = &self.hw[i];
        if d.status() & bits::OWN == 0 {
            return Err(DeviceRefused::NotOwned);
        }
        // Acquire: the buffer address and size are read after OWN was seen set.
        fence(Ordering::Acquire);
        let size = d.buffer_size();
        let n = frame.len().min(size).min(bits::FL_MASK as usize);
        if n < frame.len() {
            w.flags |= bits::ES;
        }
        // A real MAC writes to the address in the descriptor. The simulator checks that the
        // driver programmed the address of the fragment parked in slot `i`, then writes through
        // that token's pointer (which carries the memory's provenance).
        let addr = d.buffer_addr();
        let parked = self.slots[i].0.take();
        let dst = parked
            .as_ref()
            .filter(|f| f.ptr.as_ptr().addr() as u64 == addr && size <= self.frag_size)
            .map(|f| f.ptr.as_ptr());
        self.slots[i].0.set(parked);
        let Some(dst) = dst else {
            return Err(DeviceRefused::BadDescriptor);
        };
        // SAFETY: `dst` is the fragment whose token `post` parked in slot `i` (checked above
        // against the descriptor's address), and the device owns descriptor `i` (OWN set,
        // read before the Acquire fence): by invariant 3 no CPU reference to that fragment
        // exists while its token is parked. The ring that owns the pool, and so the memory,
        // outlives `self`. `n <= size <= frag_size` keeps the copy inside the fragment, and
        // `frame` is a distinct shared borrow, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(frame.as_ptr(), dst, n) };
        d.write(word::CSUM_VLAN, w.csum_vlan);
        d.write(word::HASH, w.hash);
        // Release: the frame bytes and the other words are visible before OWN clears.
        fence(Ordering::Release);
        d.write(
            word::STATUS,
            (w.flags & !bits::OWN & !bits::FL_MASK) | bits::FS | bits::LS | n as u32,
        );
        Ok(n)
    }
}
