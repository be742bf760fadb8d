//! A simulated host channel adapter: the device side of an [`RxQueue`] (feature
//! `test-utils`).
//!
//! [`SimHca::deliver`] does what an HCA does with an arriving IPoIB packet: it takes the
//! oldest posted receive buffer, writes the packet there (in datagram mode after the 40 bytes
//! of GRH space, which it fills with the GRH it was given or zeros) and completes the work
//! request; a packet longer than the buffer completes with a length error. With no buffer
//! posted it refuses the packet, as a real HCA answers a connected-mode sender with an RNR NAK
//! (and drops a datagram-mode one).
//!
//! ```
//! use drivers_ipoib::hca::SimHca;
//! use drivers_ipoib::{Mode, QueueConfig, Refused, RxQueue, RxQueueStorage};
//!
//! let storage: RxQueueStorage<'_, 2, 0> = RxQueueStorage::new();
//! let mode = Mode::DATAGRAM_2K;
//! let mut large = vec![0u8; 2 * mode.rx_buffer_len()];
//! let config = QueueConfig::new(mode, 1).with_copybreak(None);
//! let queue = RxQueue::new(&storage, &mut large, &mut [], config)?;
//! let mut hca = SimHca::new(&queue);
//! hca.deliver_ip(&[0x45; 40])?; // frames the IPv4 packet as IPoIB on the way
//! assert_eq!(hca.deliver_ip(&[0x45; 40]), Err(Refused::ReceiverNotReady));
//! assert_eq!(hca.stats().rnr_naks, 1);
//! let frame = queue.receive().unwrap()?;
//! assert_eq!(&frame.as_ref()[..4], &[0x08, 0x00, 0, 0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::mode::GRH_LEN;
use crate::queue::{Refused, RxQueue};
use crate::wire::encap::{EtherType, Packet, Repr};

/// What the simulated HCA did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HcaStats {
    /// Packets placed in a buffer (length errors included).
    pub delivered: u64,
    /// Bytes of those packets.
    pub bytes: u64,
    /// Packets refused for want of a posted buffer (RNR NAKs in connected mode).
    pub rnr_naks: u64,
    /// Packets refused because the queue was torn down.
    pub refused_down: u64,
}

/// The device side of a receive queue.
#[derive(Debug)]
pub struct SimHca<'q, 'a> {
    queue: &'q RxQueue<'a>,
    grh: Option<[u8; GRH_LEN]>,
    stats: HcaStats,
}

impl<'q, 'a> SimHca<'q, 'a> {
    /// An HCA receiving into `queue`.
    pub fn new(queue: &'q RxQueue<'a>) -> Self {
        Self {
            queue,
            grh: None,
            stats: HcaStats::default(),
        }
    }

    /// The GRH written in front of every datagram-mode packet (zeros without one).
    pub fn set_grh(&mut self, grh: Option<[u8; GRH_LEN]>) {
        self.grh = grh;
    }

    /// The counters.
    pub fn stats(&self) -> HcaStats {
        self.stats
    }

    fn place(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> Result<(), Refused> {
        match self.queue.hca_place(len, self.grh.as_ref(), write) {
            Ok(()) => {
                self.stats.delivered += 1;
                self.stats.bytes += len as u64;
                Ok(())
            }
            Err(e) => {
                match e {
                    Refused::ReceiverNotReady => self.stats.rnr_naks += 1,
                    Refused::Down => self.stats.refused_down += 1,
                }
                Err(e)
            }
        }
    }

    /// Receives one IPoIB packet (encapsulation header and payload).
    ///
    /// # Errors
    /// [`Refused`] when no buffer is posted or the queue is down.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<(), Refused> {
        self.place(frame.len(), |dst| dst.copy_from_slice(frame))
    }

    /// Receives an IP packet sent over IPoIB: the encapsulation header (EtherType by the
    /// packet's version nibble; `0` for anything else) is written in front of it in the
    /// buffer, without an intermediate copy.
    ///
    /// # Errors
    /// [`Refused`] when no buffer is posted or the queue is down.
    pub fn deliver_ip(&mut self, ip: &[u8]) -> Result<(), Refused> {
        let ether_type = EtherType::for_ip_packet(ip).unwrap_or(EtherType(0));
        self.place(4 + ip.len(), |dst| {
            let mut p = Packet::new_unchecked(dst);
            Repr { ether_type }.emit(&mut p);
            p.payload_mut().copy_from_slice(ip);
        })
    }
}
