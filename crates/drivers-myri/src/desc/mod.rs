//! Receive descriptors and DMA buffer memory: with [`crate::sys`] the `unsafe` code of the
//! embedded side (the AF_XDP backend's is in `xdp::sys`).
//!
//! Three things live here because each needs memory the device writes behind the compiler's back:
//! - The hardware descriptor layouts, accessed only with volatile reads and writes: the model
//!   MAC's [`RxDescriptor`] (`myri`) and NXP ENET's legacy buffer descriptors (`enet`), each an
//!   [`RxDescriptorFormat`] the ring is generic over.
//! - `DmaPool`: the caller's buffer memory cut into pages and fixed-size fragments, handed out
//!   as unique, unforgeable `Frag` tokens with a reference count per page (Myri10GE's page
//!   frags: a page is carved again only when every fragment of it has come back).
//! - `DescRing`: the ownership handoff. A token given to the device is parked inside this
//!   module next to its descriptor, so no CPU reference to a buffer exists while the device owns
//!   it; it comes back only once the device has given the descriptor back.
//!
//! # Invariants
//! 1. A `Frag` token exists at most once per fragment (created only by `DmaPool::alloc` for a
//!    fragment of a page whose previous tokens have all been returned; never cloned).
//! 2. A fragment is accessed by the CPU only through its token (`DmaPool::bytes`,
//!    `DmaPool::bytes_mut`), so a shared or unique borrow of the token is a shared or unique
//!    borrow of the fragment.
//! 3. A fragment is written by the device only while its token is parked in a descriptor's slot
//!    and the descriptor is the device's, through the address (and, where the format has one,
//!    the size) the driver wrote into that descriptor.
//!
//! # Ordering
//! Before giving a descriptor to the device the driver issues `fence(Release)` so the buffer
//! address and size (and, on a MAC with caches, any cache maintenance) are visible before the
//! device may act on them; after reading a descriptor the device gave back it issues
//! `fence(Acquire)` so the frame length, status and buffer contents are read after the
//! ownership check (the rule embassy and stm32-eth follow). The simulated device mirrors it:
//! Acquire after seeing the descriptor is its own, Release before giving it back.

use core::cell::Cell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{compiler_fence, Ordering};

use lro_core::RssHash;

pub(crate) mod enet;
mod myri;

pub use myri::{bits, RxDescriptor};
#[cfg(feature = "test-utils")]
pub(crate) use myri::{DeviceRefused, DeviceWrite};

/// A MAC's receive descriptor layout, which [`RxRing`](crate::RxRing) is generic over.
///
/// Sealed: the formats are this crate's, each with the volatile accesses and the ownership
/// protocol of its device inside the crate's `desc` module:
/// - [`RxDescriptor`]: the model MAC of [`sim::SimMac`](crate::sim) (32 bytes, an OWN bit,
///   CHECKSUM_COMPLETE sum, RSS hash, stripped VLAN tag);
/// - [`enet::EnetRxDescriptor`](crate::enet::EnetRxDescriptor): the legacy buffer descriptor of
///   NXP's ENET (i.MX RT, i.MX 6/7/8, Kinetis), the MAC of `scripts/firmware-mac-e2e.sh`.
///
/// A sealed trait's methods can still be called from outside the crate through a generic
/// bound; those that program a descriptor take a token only this crate can make, so no code
/// outside it can point a descriptor at memory of its choice or take one back from a device
/// that may be writing into its buffer:
///
/// ```compile_fail
/// use drivers_myri::RxDescriptorFormat;
/// fn rearm<T: RxDescriptorFormat>(d: &T, addr: u64) {
///     d.arm(addr, 2048, false); // no token: does not compile
/// }
/// ```
pub trait RxDescriptorFormat: sealed::RawRx {}

pub(crate) mod sealed {
    use super::Completion;

    /// Made only inside `desc`: what [`RawRx::arm`] and [`RawRx::disarm`] ask for, so that
    /// only the ring (which owns the buffers it programs) can call them.
    pub struct Token(pub(in crate::desc) ());

    /// What the ring needs from a descriptor layout. Every method is a volatile access to a
    /// descriptor in DMA memory; implementations live in `desc` and state their `SAFETY`.
    pub trait RawRx: Sized + 'static {
        /// A descriptor owned by the CPU, with no buffer (the storage's initial value).
        const EMPTY: Self;
        /// Largest buffer the descriptor (or its MAC) can describe, in bytes.
        const MAX_BUFFER: usize;
        /// Alignment the MAC requires of buffer addresses and sizes.
        const BUFFER_ALIGN: usize;
        /// Bytes the device appends after the frame (an FCS it does not strip).
        const TRAILER: usize;

        /// Programs the buffer `addr`/`size` and gives the descriptor to the device, with a
        /// `fence(Release)` before the ownership bit. `wrap`: the last descriptor of the ring
        /// (formats whose device walks the ring by a wrap bit).
        fn arm(&self, addr: u64, size: usize, wrap: bool, token: Token);
        /// If the device has given the descriptor back: what it reported, read after a
        /// `fence(Acquire)`.
        fn completed(&self) -> Option<Completion>;
        /// Takes the descriptor back (no buffer, owned by the CPU), whether or not the device
        /// used it. The device is stopped, or the descriptor is outside its view.
        fn disarm(&self, wrap: bool, token: Token);
        /// Whether the device owns the descriptor.
        fn owned_by_device(&self) -> bool;
        /// The CHECKSUM_COMPLETE sum a completion reports, if the format has one.
        fn checksum(_done: &Completion) -> Option<u16> {
            None
        }
        /// The RSS hash a completion reports, if the format has one.
        fn rss(_done: &Completion) -> Option<lro_core::RssHash> {
            None
        }
        /// The VLAN TCI the device stripped, if the format reports one.
        fn vlan(_done: &Completion) -> Option<u16> {
            None
        }
    }
}

/// What the device reported in a descriptor it gave back, decoded by its format. (`pub` only
/// to appear in the sealed trait; unnameable outside the crate.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The format's status word as the device left it ([`crate::RxFrame::status`]).
    pub(crate) status: u32,
    /// Frame length in bytes, trailer (FCS) excluded.
    pub(crate) len: u16,
    /// A whole frame in one buffer with no error.
    pub(crate) good: bool,
    /// The descriptor ends a frame (`LS`, ENET's `L`): when clear, the next descriptor holds
    /// the rest of the same frame.
    pub(crate) last: bool,
    /// The descriptor starts a frame (`FS`), for formats that say so (ENET's do not: `None`).
    /// A descriptor that says it starts one is never the rest of another, even after a frame
    /// the device abandoned before its last descriptor.
    pub(crate) first: Option<bool>,
    /// Further words the format decodes (checksum, hash, VLAN tag).
    pub(crate) extra: [u32; 2],
}

/// An RSS hash type as the model MAC encodes it (`bits::RHT_*`).
pub(crate) fn rss_kind(code: u32) -> lro_core::RssType {
    use lro_core::RssType;
    match code {
        1 => RssType::Ipv4,
        2 => RssType::TcpIpv4,
        3 => RssType::Ipv6,
        4 => RssType::TcpIpv6,
        _ => RssType::Opaque,
    }
}

/// An RSS hash value and the model MAC's code of its type.
pub(crate) fn rss_hash(value: u32, code: u32) -> RssHash {
    RssHash {
        value,
        kind: rss_kind(code),
    }
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

    /// The address range of the pool's memory (start, end).
    pub(crate) fn span(&self) -> (usize, usize) {
        let start = self.base.as_ptr().addr();
        (start, start + self.len)
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
pub(crate) struct DescRing<'a, T: RxDescriptorFormat> {
    hw: &'a [T],
    slots: &'a [Slot],
    /// The pool's fragment size (the most the device may write into a parked buffer).
    #[cfg_attr(not(feature = "test-utils"), allow(dead_code))]
    frag_size: usize,
}

impl<'a, T: RxDescriptorFormat> DescRing<'a, T> {
    /// Takes every descriptor back from the device (owned by the CPU, no buffer) and empties
    /// the slots. `hw` and `slots` have the same length.
    pub(crate) fn new(hw: &'a [T], slots: &'a [Slot], frag_size: usize) -> Self {
        assert_eq!(hw.len(), slots.len());
        let last = hw.len().wrapping_sub(1);
        for (i, (d, s)) in hw.iter().zip(slots).enumerate() {
            d.disarm(i == last, sealed::Token(()));
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
    pub(crate) fn hw(&self) -> &'a [T] {
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
        assert!(previous.is_none() && !d.owned_by_device());
        let addr = frag.ptr.as_ptr().addr() as u64;
        slot.0.set(Some(frag));
        // `arm` issues the Release fence before the ownership bit.
        d.arm(
            addr,
            pool.frag_size(),
            i + 1 == self.hw.len(),
            sealed::Token(()),
        );
    }

    /// If the device has returned descriptor `i` (and a buffer is parked there), takes the
    /// token back with what the device reported.
    pub(crate) fn reap(&self, i: usize) -> Option<(Frag, Completion)> {
        // `completed` reads the rest of the descriptor after a fence(Acquire).
        let done = self.hw[i].completed()?;
        let frag = self.slots[i].0.take()?;
        Some((frag, done))
    }

    /// Takes descriptor `i` back from the device without a frame (teardown) and returns its
    /// token. The caller has stopped the device (a real MAC) before.
    pub(crate) fn reclaim(&self, i: usize) -> Option<Frag> {
        self.hw[i].disarm(i + 1 == self.hw.len(), sealed::Token(()));
        self.slots[i].0.take()
    }
}
