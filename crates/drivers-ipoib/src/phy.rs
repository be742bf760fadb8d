//! smoltcp over IPoIB (feature `smoltcp`): the receive queue, copybreak and the coalescer in
//! front of smoltcp's `Interface` with `Medium::Ip`.
//!
//! smoltcp has no IPoIB medium; an IPoIB packet is an IP packet behind a 4-byte header, so it
//! runs with `Medium::Ip`: [`IpoibDevice`] hands smoltcp each received segment without the
//! encapsulation header, and transmits through any device that takes IP packets (a TUN device
//! in the tests; a real driver would put the header and the destination's address in front).
//!
//! The coalescing itself is drivers-myri's [`LroDevice`] (Lro policy, a segment handed over
//! from its buffers or copied once into a staging buffer, every buffer back to its owner as
//! soon as smoltcp has the bytes) over [`IpoibDriver`], this crate's receive queue seen as a
//! [`RxDriver`]. Only IPv4 and IPv6 packets go up; others (ARP over IPoIB) are counted and their
//! buffers recycled, as they are not for a `Medium::Ip` stack.

use drivers_myri::phy::LroDevice;
use drivers_myri::RxDriver;
use lro_core::{Capacity, RxChecksum, RxMeta};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, PacketMeta, RxToken};
use smoltcp::time::Instant;

use crate::queue::{RxBuf, RxQueue};
use crate::wire::encap;

/// Counters of [`IpoibDriver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct DriverStats {
    /// IP frames handed to the coalescer.
    pub frames: u64,
    /// Frames that were not IPv4/IPv6, recycled.
    pub not_ip: u64,
    /// Completions the queue could not pass up (length errors, runts, drops).
    pub errors: u64,
}

/// The receive queue as a [`RxDriver`]: IP frames with [`RxMeta::ipoib`] metadata and the
/// checksum state the HCA reports.
#[derive(Debug)]
pub struct IpoibDriver<'q, 'a> {
    queue: &'q RxQueue<'a>,
    checksum: RxChecksum,
    stats: DriverStats,
}

impl<'q, 'a> IpoibDriver<'q, 'a> {
    /// Frames from `queue`; nothing verified by the HCA (lro-core checks TCP checksums in
    /// software; connected mode offers no receive checksum offload).
    pub fn new(queue: &'q RxQueue<'a>) -> Self {
        Self {
            queue,
            checksum: RxChecksum::None,
            stats: DriverStats::default(),
        }
    }

    /// The same with another checksum state for every frame (an HCA with receive checksum
    /// offload in datagram mode reports [`RxChecksum::Verified`]).
    pub fn with_checksum(mut self, checksum: RxChecksum) -> Self {
        self.checksum = checksum;
        self
    }

    /// The queue.
    pub fn queue(&self) -> &'q RxQueue<'a> {
        self.queue
    }

    /// The counters.
    pub fn stats(&self) -> DriverStats {
        self.stats
    }
}

impl<'q, 'a> RxDriver for IpoibDriver<'q, 'a> {
    type Frame = RxBuf<'q, 'a>;

    fn receive(&mut self, now: u64) -> Option<(Self::Frame, RxMeta)> {
        loop {
            match self.queue.receive()? {
                Ok(frame) if frame.ether_type().is_ip() => {
                    self.stats.frames += 1;
                    let meta = RxMeta::ipoib(now).with_checksum(self.checksum);
                    return Some((frame, meta));
                }
                Ok(_) => self.stats.not_ip += 1,
                Err(_) => self.stats.errors += 1,
            }
        }
    }
}

/// A device whose received frames start with the IPoIB encapsulation header, presented to
/// smoltcp as `Medium::Ip` (the header is skipped); transmission passes through.
///
/// Built over an [`LroDevice`] by [`IpoibDevice::new`]: the IPoIB receive path with copybreak
/// and coalescing in front of smoltcp.
///
/// (The example needs the features `smoltcp`, `std` and `test-utils`, and `smoltcp` and
/// `drivers-myri` as dependencies of its own.)
///
/// ```
/// use drivers_ipoib::hca::SimHca;
/// use drivers_ipoib::phy::IpoibDevice;
/// use drivers_ipoib::{Mode, QueueConfig, RxQueue, RxQueueStorage};
/// use smoltcp::phy::{Device, Loopback, Medium, RxToken};
/// use smoltcp::time::Instant;
///
/// let storage: RxQueueStorage<'_, 8, 8> = RxQueueStorage::new();
/// let mode = Mode::DATAGRAM_2K;
/// let mut large = vec![0u8; 8 * mode.rx_buffer_len()];
/// let mut small = vec![0u8; 8 * 256];
/// let queue = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 4))?;
/// let mut hca = SimHca::new(&queue);
/// let mut staging = vec![0u8; drivers_myri::phy::STAGING_LEN];
/// let mut dev = IpoibDevice::new(&queue, Loopback::new(Medium::Ip), &mut staging);
/// let udp = [0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// hca.deliver_ip(&udp)?;
/// let (rx, _tx) = dev.receive(Instant::from_millis(0)).expect("a packet");
/// assert_eq!(rx.consume(|ip| ip.to_vec()), udp); // without the IPoIB header
/// assert_eq!(dev.capabilities().medium, Medium::Ip);
/// // The IPoIB mode's MTU, not the loopback's 65535.
/// assert_eq!(dev.capabilities().max_transmission_unit, mode.mtu());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct IpoibDevice<D> {
    inner: D,
    /// The IPoIB mode's MTU, when known: the capabilities advertise at most this.
    mtu: Option<usize>,
}

impl<D> IpoibDevice<D> {
    /// Wraps a device whose received frames start with the encapsulation header; its
    /// capabilities are the device's (so its MTU should be the IPoIB mode's,
    /// [`Mode::mtu`](crate::Mode::mtu)).
    pub fn wrap(inner: D) -> Self {
        Self { inner, mtu: None }
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The wrapped device, mutably.
    pub fn inner_mut(&mut self) -> &mut D {
        &mut self.inner
    }

    /// The wrapped device back.
    pub fn into_inner(self) -> D {
        self.inner
    }
}

impl<'s, 'q, 'a, T: Device> IpoibDevice<LroDevice<'s, IpoibDriver<'q, 'a>, T>> {
    /// smoltcp over `queue` through the coalescer (drivers-myri's [`LroDevice`], `Lro` policy,
    /// segments copied into `staging` when coalesced; at least
    /// [`drivers_myri::phy::STAGING_LEN`] bytes for 64 KB segments), transmitting through `tx`.
    /// The capabilities advertise at most the queue's IPoIB MTU ([`Mode::mtu`](crate::Mode::mtu)),
    /// whatever `tx` allows.
    pub fn new(queue: &'q RxQueue<'a>, tx: T, staging: &'s mut [u8]) -> Self {
        Self {
            inner: LroDevice::new(IpoibDriver::new(queue), tx, staging),
            mtu: Some(queue.config().mode.mtu()),
        }
    }
}

impl<'s, 'q, 'a, T: Device, C: Capacity, const Q: usize>
    IpoibDevice<LroDevice<'s, IpoibDriver<'q, 'a>, T, C, Q>>
{
    /// The adapter underneath (coalescing on/off, its counters, the engine's).
    pub fn lro(&self) -> &LroDevice<'s, IpoibDriver<'q, 'a>, T, C, Q> {
        &self.inner
    }

    /// The adapter underneath, mutably.
    pub fn lro_mut(&mut self) -> &mut LroDevice<'s, IpoibDriver<'q, 'a>, T, C, Q> {
        &mut self.inner
    }
}

/// A received packet without its encapsulation header.
pub struct IpRxToken<R>(R);

impl<R: RxToken> RxToken for IpRxToken<R> {
    fn consume<T, F: FnOnce(&[u8]) -> T>(self, f: F) -> T {
        // Every frame has the header: the queue passes up nothing shorter (a runt is an
        // error there), and LroDevice keeps it in front of each segment.
        self.0
            .consume(|frame| f(frame.get(encap::HEADER_LEN..).unwrap_or(&[])))
    }

    fn meta(&self) -> PacketMeta {
        self.0.meta()
    }
}

impl<D: Device> Device for IpoibDevice<D> {
    type RxToken<'t>
        = IpRxToken<D::RxToken<'t>>
    where
        Self: 't;
    type TxToken<'t>
        = D::TxToken<'t>
    where
        Self: 't;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (rx, tx) = self.inner.receive(timestamp)?;
        Some((IpRxToken(rx), tx))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        self.inner.transmit(timestamp)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = self.inner.capabilities();
        caps.medium = Medium::Ip;
        if let Some(mtu) = self.mtu {
            caps.max_transmission_unit = caps.max_transmission_unit.min(mtu);
        }
        caps
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;

    use lro_core::LinkKind;
    use smoltcp::phy::Loopback;

    use super::*;
    use crate::hca::SimHca;
    use crate::queue::{QueueConfig, RxQueueStorage};
    use crate::Mode;

    /// An IPv4 header without payload (the queue does not look past the EtherType).
    const IP: [u8; 20] = [
        0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];

    /// Runs `f` on a datagram-mode queue of 8 buffers.
    fn with_queue<R>(f: impl FnOnce(&RxQueue<'_>) -> R) -> R {
        let storage: RxQueueStorage<'_, 8, 8> = RxQueueStorage::new();
        let mode = Mode::DATAGRAM_2K;
        let mut large = vec![0u8; 8 * mode.rx_buffer_len()];
        let mut small = vec![0u8; 8 * 256];
        let queue =
            RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 4)).unwrap();
        f(&queue)
    }

    #[test]
    fn the_driver_passes_ip_up_and_counts_what_it_does_not() {
        with_queue(|queue| {
            let mut hca = SimHca::new(queue);
            // ARP (not IP), a runt (shorter than the encapsulation header), then an IP packet.
            hca.deliver(&[0x08, 0x06, 0, 0, 0, 1]).unwrap();
            hca.deliver(&[0x08, 0x00]).unwrap();
            hca.deliver_ip(&IP).unwrap();
            let mut driver = IpoibDriver::new(queue).with_checksum(RxChecksum::Verified);
            let (frame, meta) = driver.receive(7).expect("the IP packet");
            assert_eq!(&frame.as_ref()[encap::HEADER_LEN..], &IP);
            assert_eq!(
                (meta.link, meta.checksum, meta.time),
                (LinkKind::Ipoib, RxChecksum::Verified, 7)
            );
            drop(frame);
            assert!(driver.receive(8).is_none());
            assert_eq!(
                driver.stats(),
                DriverStats {
                    frames: 1,
                    not_ip: 1,
                    errors: 1
                }
            );
        })
    }

    /// Loopback with a smaller MTU than any IPoIB mode's.
    struct SmallMtu(Loopback);

    impl Device for SmallMtu {
        type RxToken<'t> = <Loopback as Device>::RxToken<'t>;
        type TxToken<'t> = <Loopback as Device>::TxToken<'t>;

        fn receive(&mut self, t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
            self.0.receive(t)
        }

        fn transmit(&mut self, t: Instant) -> Option<Self::TxToken<'_>> {
            self.0.transmit(t)
        }

        fn capabilities(&self) -> DeviceCapabilities {
            let mut caps = self.0.capabilities();
            caps.max_transmission_unit = 1280;
            caps
        }
    }

    #[test]
    fn capabilities_advertise_the_smaller_of_the_two_mtus() {
        with_queue(|queue| {
            let mut staging = vec![0u8; drivers_myri::phy::STAGING_LEN];
            // An Ethernet device to transmit through: the IPoIB device is IP all the same.
            let tx = SmallMtu(Loopback::new(Medium::Ethernet));
            let dev = IpoibDevice::new(queue, tx, &mut staging);
            assert_eq!(dev.capabilities().max_transmission_unit, 1280);
            assert_eq!(dev.capabilities().medium, Medium::Ip);
        })
    }
}
