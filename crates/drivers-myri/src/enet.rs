//! A driver for NXP's ENET Ethernet MAC (i.MX RT 10xx, i.MX 6/7/8, Kinetis K6x), polled, with
//! the receive side on the crate's [`RxRing`] and the transmit side on a ring of fixed
//! buffers.
//!
//! The receive ring is an `RxRing<'_, EnetRxDescriptor>`: the MAC writes frames into the ring's
//! fragments by DMA, the ring hands them out as [`RxFrame`](crate::RxFrame)s that go into the
//! coalescer as they are, and re-arms descriptors as frames come back. ENET stops receiving
//! when it meets a descriptor that is not empty (it clears `RDAR`); [`Enet::poll_rx`] writes
//! `RDAR` again (counting the restarts in [`EnetStats::rx_restarts`]; [`Enet::kick_rx`] is the
//! same without counting), so call it after each poll, once returned frames have re-armed
//! descriptors.
//!
//! With the feature `smoltcp`, [`Enet`] is a transmit-only smoltcp device, to wrap in
//! [`phy::LroDevice`](crate::phy::LroDevice) together with the ring.
//!
//! ```no_run
//! # #[cfg(feature = "imx6ul")] {
//! use drivers_myri::enet::{Enet, EnetRegs, EnetRxDescriptor, EnetTxStorage, TX_BUFFER_SIZE};
//! use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
//!
//! #[repr(align(64))]
//! struct Buffers([u8; 96 * 1536]);
//! let mut storage: RxRingStorage<32, 96, EnetRxDescriptor> = RxRingStorage::new();
//! let mut rx_mem = Buffers([0; 96 * 1536]);
//! let ring = RxRing::new(&mut storage, &mut rx_mem.0, BufferLayout::slots(1536)).unwrap();
//! let mut tx_storage: EnetTxStorage<8> = EnetTxStorage::new();
//! let mut tx_mem = Buffers([0; 96 * 1536]);
//! let regs = EnetRegs::take_imx6ul_enet1().unwrap();
//! // SAFETY: `enet` is dropped (at the end of this scope) before the memory it borrows.
//! let mut enet = unsafe {
//!     Enet::new(regs, &ring, &mut tx_storage, &mut tx_mem.0[..8 * TX_BUFFER_SIZE],
//!         [0x02, 0, 0, 0, 0, 2])
//! }
//! .unwrap();
//! while let Some(frame) = ring.receive() {
//!     // ... into the coalescer ...
//! #   drop(frame);
//! }
//! enet.poll_rx();
//! # }
//! ```
//!
//! Not covered: the PHY (MDIO management, link and speed negotiation are board matters; QEMU's
//! PHY is always up), interrupts (the driver polls), checksum offload (legacy descriptors
//! carry no checksum: the coalescer verifies in software), and data caches (buffers are
//! assumed coherent: the MMU or MPU must map them uncached, or the caller cleans and
//! invalidates around the handoff).

use core::fmt;

pub use crate::desc::enet::{bits, EnetRxDescriptor, EnetTxDescriptor};
use crate::desc::enet::{TxDescRing, TxLayoutError};
use crate::sys::enet::reg;
pub use crate::sys::enet::EnetRegs;
use crate::RxRing;

/// Bytes of one transmit buffer: a full Ethernet frame (1514 bytes and 4 of VLAN tag), rounded
/// up to the 16-byte alignment ENET wants.
pub const TX_BUFFER_SIZE: usize = 1536;

/// Largest frame the MAC accepts (`RCR[MAX_FL]`): 1518 bytes with FCS, 4 more for a VLAN tag.
pub const MAX_FRAME_LEN: u32 = 1522;

/// ECR bits.
mod ecr {
    pub(super) const RESET: u32 = 1 << 0;
    pub(super) const ETHEREN: u32 = 1 << 1;
    /// Descriptors in little-endian byte order.
    pub(super) const DBSWP: u32 = 1 << 8;
}

/// RCR bits.
mod rcr {
    pub(super) const MII_MODE: u32 = 1 << 2;
    pub(super) const RMII_MODE: u32 = 1 << 8;
    pub(super) const MAX_FL_SHIFT: u32 = 16;
}

/// Transmit descriptors of a MAC, in caller memory (a `static` on a microcontroller), starting
/// on a 64-byte boundary as `TDSR` wants.
#[repr(C, align(64))]
pub struct EnetTxStorage<const N: usize> {
    descriptors: [EnetTxDescriptor; N],
}

impl<const N: usize> EnetTxStorage<N> {
    /// `N` descriptors owned by the CPU.
    pub const fn new() -> Self {
        Self {
            descriptors: [const { EnetTxDescriptor::new() }; N],
        }
    }
}

impl<const N: usize> Default for EnetTxStorage<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// Why the MAC could not be brought up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EnetError {
    /// A descriptor ring or buffer memory lies above 4 GiB: ENET's DMA addresses are 32 bits.
    AddressRange,
    /// The transmit memory holds fewer than one [`TX_BUFFER_SIZE`] buffer per descriptor, or
    /// is not 16-byte aligned, or there are no transmit descriptors.
    TxMemory,
    /// The receive ring has already reaped descriptors (the MAC starts at the ring's first
    /// descriptor, so it needs a ring that has not received yet), or another MAC writes into
    /// it.
    RingInUse,
}

impl fmt::Display for EnetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::AddressRange => "descriptor or buffer memory above 4 GiB (ENET DMA is 32-bit)",
            Self::TxMemory => {
                "transmit memory: one 16-byte aligned 1536-byte buffer per descriptor needed"
            }
            Self::RingInUse => {
                "the receive ring has already received, or another MAC uses it: the MAC needs a new ring"
            }
        })
    }
}

impl core::error::Error for EnetError {}

/// Transmit counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EnetStats {
    /// Frames queued to the MAC.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames smoltcp built that were not sent because they were larger than a transmit
    /// buffer (smoltcp's transmit token cannot fail, so such a frame is built in a scratch
    /// buffer and dropped). [`Enet::transmit`] refuses them instead, and a full ring, without
    /// counting: it returns `None`.
    pub tx_dropped: u64,
    /// `RDAR` writes that restarted reception (the MAC had run out of empty descriptors), by
    /// [`Enet::poll_rx`] ([`Enet::kick_rx`] does not count).
    pub rx_restarts: u64,
}

/// One ENET, up and running: reception into an [`RxRing`], transmission from its own ring.
///
/// Borrows the receive ring and the transmit memory for as long as it lives, and disables
/// the MAC when dropped, so the MAC never writes into memory that has gone back to its owner.
pub struct Enet<'a> {
    regs: EnetRegs,
    tx: TxDescRing<'a>,
    rx: &'a RxRing<'a, EnetRxDescriptor>,
    mac: [u8; 6],
    stats: EnetStats,
}

impl<'a> Enet<'a> {
    /// Resets the MAC and brings it up: full duplex, MII/RMII, frames up to
    /// [`MAX_FRAME_LEN`] bytes, the FCS forwarded into the buffer (the ring strips it),
    /// station address `mac`, receive ring `rx` (its fragment size as `MRBR`), transmit ring
    /// over `tx_storage` and `tx_memory` (one [`TX_BUFFER_SIZE`] buffer per descriptor),
    /// no interrupts. Then enables it and starts reception.
    ///
    /// # Errors
    /// [`EnetError`] when memory is out of the MAC's reach or too small, or the ring has
    /// already received frames or another `Enet` writes into it; the MAC is left untouched
    /// then.
    ///
    /// # Safety
    /// The returned `Enet` must be dropped, not leaked (`mem::forget`, a reference cycle),
    /// before the borrows of `rx`, `tx_storage` and `tx_memory` end: its `Drop` is what stops
    /// the MAC's DMA into that memory. A program whose `Enet` lives until reset (a `main` that
    /// never returns) meets this.
    pub unsafe fn new<const N: usize>(
        regs: EnetRegs,
        rx: &'a RxRing<'a, EnetRxDescriptor>,
        tx_storage: &'a mut EnetTxStorage<N>,
        tx_memory: &'a mut [u8],
        mac: [u8; 6],
    ) -> Result<Self, EnetError> {
        let used = rx.stats();
        if used.frames + used.errors != 0 {
            return Err(EnetError::RingInUse);
        }
        let below_4g = |end: usize| u32::try_from(end).is_ok();
        let rdsr = rx.descriptors().as_ptr().addr();
        let (_, rx_end) = rx.buffer_span();
        let tdsr = tx_storage.descriptors.as_ptr().addr();
        let tx_end = tx_memory.as_ptr().addr() + tx_memory.len();
        if !(below_4g(rdsr + size_of_val(rx.descriptors()))
            && below_4g(rx_end)
            && below_4g(tdsr + size_of::<EnetTxStorage<N>>())
            && below_4g(tx_end))
        {
            return Err(EnetError::AddressRange);
        }
        let tx = TxDescRing::new(&tx_storage.descriptors, tx_memory, TX_BUFFER_SIZE).map_err(
            |e| match e {
                TxLayoutError::BufferSize | TxLayoutError::TooLittleMemory => EnetError::TxMemory,
                TxLayoutError::Misaligned => EnetError::TxMemory,
            },
        )?;
        // Last of the checks: nothing to undo after it.
        if !rx.attach() {
            return Err(EnetError::RingInUse);
        }

        regs.write(reg::ECR, ecr::RESET);
        regs.write(reg::EIMR, 0);
        regs.write(reg::EIR, u32::MAX);
        regs.write(
            reg::RCR,
            MAX_FRAME_LEN << rcr::MAX_FL_SHIFT | rcr::MII_MODE | rcr::RMII_MODE,
        );
        regs.write(reg::TCR, 1 << 2); // FDEN: full duplex
        regs.write(reg::TFWR, 1 << 8); // STRFWD: store and forward
        let [a, b, c, d, e, f] = mac;
        regs.write(reg::PALR, u32::from_be_bytes([a, b, c, d]));
        regs.write(reg::PAUR, u32::from_be_bytes([e, f, 0x88, 0x08]));
        regs.write(reg::MRBR, (rx.layout().frag_size & 0x3ff0) as u32);
        regs.write(reg::RDSR, rdsr as u32);
        regs.write(reg::TDSR, tx.hw().as_ptr().addr() as u32);
        regs.write(reg::ECR, ecr::ETHEREN | ecr::DBSWP);
        let enet = Self {
            regs,
            tx,
            rx,
            mac,
            stats: EnetStats::default(),
        };
        enet.kick_rx();
        Ok(enet)
    }

    /// Tells the MAC that empty descriptors are available (`RDAR`). Reception stops when the
    /// MAC meets a descriptor the driver has not re-armed; call this (or [`Enet::poll_rx`],
    /// which counts the restarts) after each poll. Returns whether reception had stopped.
    pub fn kick_rx(&self) -> bool {
        let stopped = self.regs.read(reg::RDAR) == 0;
        self.regs.write(reg::RDAR, 1 << 24);
        stopped
    }

    /// Like [`Enet::kick_rx`], counting restarts in [`EnetStats::rx_restarts`].
    pub fn poll_rx(&mut self) {
        if self.kick_rx() {
            self.stats.rx_restarts += 1;
        }
    }

    /// The station address.
    pub fn mac_address(&self) -> [u8; 6] {
        self.mac
    }

    /// The counters.
    pub fn stats(&self) -> EnetStats {
        self.stats
    }

    /// Whether a frame can be queued now (the next transmit descriptor is the CPU's).
    pub fn can_transmit(&self) -> bool {
        self.tx.has_room()
    }

    /// Queues a frame of `len` bytes written by `f` and starts transmission (`TDAR`).
    /// `None`, without calling `f`, when the transmit ring is full or `len` exceeds
    /// [`TX_BUFFER_SIZE`].
    pub fn transmit<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        let r = self.tx.send(len, f)?;
        self.regs.write(reg::TDAR, 1 << 24);
        self.stats.tx_frames += 1;
        self.stats.tx_bytes += len as u64;
        Some(r)
    }
}

impl Drop for Enet<'_> {
    /// Disables the MAC: no more DMA into the rings; the receive ring may then go to
    /// another MAC.
    fn drop(&mut self) {
        self.regs.write(reg::ECR, 0);
        self.rx.detach();
    }
}

impl fmt::Debug for Enet<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enet")
            .field("mac", &self.mac)
            .field("tx_buffer", &self.tx.buf_size())
            .field("stats", &self.stats)
            .finish()
    }
}

#[cfg(feature = "smoltcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "smoltcp")))]
mod smoltcp_device {
    use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
    use smoltcp::time::Instant;

    use super::{Enet, TX_BUFFER_SIZE};

    /// The receive token of a transmit-only device: never created.
    #[derive(Debug)]
    pub enum NoReceive {}

    impl RxToken for NoReceive {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, _f: F) -> R {
            match self {}
        }
    }

    /// A transmit descriptor the token was handed out for.
    ///
    /// A frame longer than [`TX_BUFFER_SIZE`] (above the MTU the device advertises, which
    /// smoltcp never exceeds) is not sent: it is counted in
    /// [`EnetStats::tx_dropped`](super::EnetStats::tx_dropped), and the closure gets a scratch
    /// buffer of `TX_BUFFER_SIZE` bytes, shorter than the `len` it asked for (no allocator
    /// here to make a longer one).
    #[derive(Debug)]
    pub struct EnetTxToken<'t, 'a> {
        enet: &'t mut Enet<'a>,
    }

    impl TxToken for EnetTxToken<'_, '_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            // `transmit` handed this token out only with the next descriptor free, and the
            // token borrows the MAC uniquely, so the send fails only for a frame larger than a
            // buffer (smoltcp stays within the MTU below). smoltcp's contract is that `consume`
            // cannot fail: such a frame is built in a scratch buffer and counted as dropped.
            let mut f = Some(f);
            if let Some(r) = self
                .enet
                .transmit(len, |buf| (f.take().expect("called once"))(buf))
            {
                return r;
            }
            self.enet.stats.tx_dropped += 1;
            let mut scratch = [0u8; TX_BUFFER_SIZE];
            let n = len.min(TX_BUFFER_SIZE);
            (f.take().expect("not called"))(&mut scratch[..n])
        }
    }

    /// Transmit only: frames are received through the [`RxRing`](crate::RxRing), and
    /// [`LroDevice`](crate::phy::LroDevice) takes this device for its transmit side.
    impl<'a> Device for Enet<'a> {
        type RxToken<'t>
            = NoReceive
        where
            Self: 't;
        type TxToken<'t>
            = EnetTxToken<'t, 'a>
        where
            Self: 't;

        fn receive(&mut self, _timestamp: Instant) -> Option<(NoReceive, EnetTxToken<'_, 'a>)> {
            None
        }

        fn transmit(&mut self, _timestamp: Instant) -> Option<EnetTxToken<'_, 'a>> {
            self.can_transmit().then_some(EnetTxToken { enet: self })
        }

        fn capabilities(&self) -> DeviceCapabilities {
            let mut caps = DeviceCapabilities::default();
            caps.medium = Medium::Ethernet;
            // An Ethernet frame without FCS: 1500 bytes of IP.
            caps.max_transmission_unit = 1514;
            caps
        }
    }
}

#[cfg(feature = "smoltcp")]
pub use smoltcp_device::{EnetTxToken, NoReceive};
