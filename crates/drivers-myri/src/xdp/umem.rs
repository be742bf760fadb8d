//! UMEM frame handles and the frame accounting.

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;

use std::fmt;

use super::sys::RxChunk;

/// A received frame, still in its UMEM chunk: the coalescer's frame type for the AF_XDP
/// backend (`AsRef<[u8]> + AsMut<[u8]>`, so it goes into an [`lro_core::Engine`] as it is,
/// copy-free).
///
/// The handle owns the chunk. Dropping it, on any thread, gives the chunk back: the socket's
/// receive half collects it and posts it to the fill ring at its next receive or
/// [`refill`](super::XskRx::refill). It is `Send + 'static` (it keeps the UMEM mapping alive),
/// so with the `bytes` feature it can become the owner of a [`bytes::Bytes`]
/// (`Bytes::from(frame)`, no copy), whose last clone's drop returns the chunk.
pub struct UmemFrame {
    chunk: RxChunk,
}

impl UmemFrame {
    pub(crate) fn new(chunk: RxChunk) -> Self {
        Self { chunk }
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.chunk.len() as usize
    }

    /// True for a zero-length frame (the kernel never delivers one).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.chunk.len() == 0
    }

    /// The frame's address in the UMEM (chunk start plus the kernel's headroom offset).
    pub fn addr(&self) -> u64 {
        self.chunk.addr()
    }

    /// The index of the UMEM chunk the frame sits in.
    pub fn chunk(&self) -> u32 {
        self.chunk.idx()
    }
}

impl AsRef<[u8]> for UmemFrame {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        self.chunk.bytes()
    }
}

impl AsMut<[u8]> for UmemFrame {
    #[inline]
    fn as_mut(&mut self) -> &mut [u8] {
        self.chunk.bytes_mut()
    }
}

impl std::ops::Deref for UmemFrame {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.chunk.bytes()
    }
}

impl std::ops::DerefMut for UmemFrame {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.chunk.bytes_mut()
    }
}

impl fmt::Debug for UmemFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UmemFrame")
            .field("chunk", &self.chunk.idx())
            .field("addr", &self.chunk.addr())
            .field("len", &self.chunk.len())
            .finish()
    }
}

/// A UMEM frame as the owner of a `Bytes`, without copying; the frame goes back to the fill
/// ring when the last clone of the `Bytes` is dropped.
#[cfg(feature = "bytes")]
#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
impl From<UmemFrame> for bytes::Bytes {
    fn from(frame: UmemFrame) -> Self {
        bytes::Bytes::from_owner(frame)
    }
}

/// Where the receive chunks of a socket's UMEM are, and the handle counters that must agree
/// with it.
///
/// `fill_ring` and `rx_ring` are read from the kernel's ring indices: exact only while no
/// traffic arrives, and the kernel publishes its fill-ring consumption lazily (it may have
/// taken entries it still shows as pending), so they are reported, not summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameAccount {
    /// Receive chunks of the UMEM.
    pub total: u32,
    /// Posted to the kernel and not received back: in the fill ring, in the kernel's cache,
    /// or in the RX ring not yet read.
    pub kernel: u32,
    /// Fill-ring entries the kernel has not (visibly) consumed.
    pub fill_ring: u32,
    /// RX-ring descriptors not yet read.
    pub rx_ring: u32,
    /// Owned by frame handles: read from the RX ring and not dropped (in the socket's batch,
    /// the coalescer, the stack, a `Bytes`).
    pub held: u32,
    /// Handles dropped, chunks not yet collected by the socket.
    pub returned: u32,
    /// Collected, waiting for room in the fill ring.
    pub free: u32,
    /// Chunks taken from the RX ring as handles, ever.
    pub claimed: u64,
    /// Handles dropped, ever.
    pub dropped: u64,
}

impl FrameAccount {
    /// Conservation: every receive chunk is in exactly one place
    /// (`kernel + held + returned + free == total`), and the handle counters agree with the
    /// chunk states (`claimed - dropped == held`).
    pub fn is_conserved(&self) -> bool {
        self.kernel + self.held + self.returned + self.free == self.total
            && self.claimed.checked_sub(self.dropped) == Some(u64::from(self.held))
    }
}

impl fmt::Display for FrameAccount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} UMEM frames: {} with the kernel (fill ring {}, RX ring {}) + {} held + {} returned + {} free; {} handles out, {} back",
            self.total,
            self.kernel,
            self.fill_ring,
            self.rx_ring,
            self.held,
            self.returned,
            self.free,
            self.claimed,
            self.dropped
        )
    }
}

/// Where the transmit chunks of a socket's UMEM are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxAccount {
    /// Transmit chunks of the UMEM.
    pub total: u32,
    /// Ready for the next frame.
    pub free: u32,
    /// In the TX ring or sent and not yet completed.
    pub in_flight: u32,
}

impl TxAccount {
    /// Every transmit chunk is free or in flight.
    pub fn is_conserved(&self) -> bool {
        self.free + self.in_flight == self.total
    }
}
