//! The receive side every backend offers: a frame handle and what the device says about it.
//!
//! [`RxDriver`] is what the smoltcp adapter ([`phy::LroDevice`](crate::phy::LroDevice)) and any
//! other poll loop need from a backend: the next received frame, still in the driver's buffer,
//! as a handle the coalescer can hold ([`lro_core::Engine`]'s frame type: it lends its bytes
//! and gives its buffer back when dropped), with its [`RxMeta`]. The embedded ring implements it
//! for `&RxRing` ([`RxFrame`] handles); the AF_XDP socket (feature `xdp`) for its receive half,
//! with UMEM frame handles. Transmission is the stack's business: the adapter transmits through
//! any smoltcp device, and the AF_XDP transmit half is one.

use lro_core::RxMeta;

use crate::{RxDescriptorFormat, RxFrame, RxRing};

/// A receive queue that hands out frames in its own buffers.
///
/// ```
/// use drivers_myri::{BufferLayout, RxDriver, RxRing, RxRingStorage};
///
/// let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
/// let mut buffers = [0u8; 4 * 2048];
/// let ring = RxRing::new(&mut storage, &mut buffers, BufferLayout::slots(2048))?;
/// let mut driver = &ring;
/// // Nothing received yet: an empty queue is not an error. (`RxRing::receive`, the inherent
/// // method, takes no time; the trait's takes the arrival time for the metadata.)
/// assert!(RxDriver::receive(&mut driver, 0).is_none());
/// # Ok::<(), drivers_myri::LayoutError>(())
/// ```
pub trait RxDriver {
    /// The frame handle: lends the frame's bytes (writable, so the coalescer can rewrite
    /// headers in place) and gives the buffer back to the driver when dropped.
    type Frame: AsRef<[u8]> + AsMut<[u8]>;

    /// The next received frame and its metadata, with the arrival time `now` on the caller's
    /// clock (the unit the coalescer's timeouts use). `None` when nothing is waiting.
    fn receive(&mut self, now: u64) -> Option<(Self::Frame, RxMeta)>;
}

impl<D: RxDriver + ?Sized> RxDriver for &mut D {
    type Frame = D::Frame;

    #[inline]
    fn receive(&mut self, now: u64) -> Option<(Self::Frame, RxMeta)> {
        (**self).receive(now)
    }
}

/// The embedded ring: frames in their DMA buffers, metadata from the descriptor.
impl<'r, T: RxDescriptorFormat> RxDriver for &'r RxRing<'r, T> {
    type Frame = RxFrame<'r, T>;

    #[inline]
    fn receive(&mut self, now: u64) -> Option<(Self::Frame, RxMeta)> {
        let frame = RxRing::receive(self)?;
        let meta = frame.meta(now);
        Some((frame, meta))
    }
}
