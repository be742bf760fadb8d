#![no_std]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The crate docs link modules of optional features; without them those links cannot resolve
// (`.ci/run` builds the docs with every feature, warnings as errors, where they must).
#![cfg_attr(
    not(all(feature = "smoltcp", feature = "test-utils")),
    allow(rustdoc::broken_intra_doc_links)
)]
//! `drivers-myri`: the receive side of an Ethernet NIC feeding [`lro_core`], in the style of
//! Myri10GE's in-driver LRO: an embedded MAC ring with no allocator and no `std`, and AF_XDP
//! sockets on Linux (feature `xdp`).
//!
//! - [`RxRing`]: DMA receive descriptors and buffer memory, both caller-provided (a `static` on
//!   a microcontroller). The ownership handoff uses volatile accesses with `fence(Release)`
//!   before a descriptor goes to the device and `fence(Acquire)` after one comes back. The ring
//!   is generic over the MAC's descriptor layout ([`RxDescriptorFormat`]): the model MAC's
//!   [`RxDescriptor`] (an OWN bit, length, CHECKSUM_COMPLETE sum, RSS hash; the default) or
//!   NXP ENET's legacy buffer descriptor ([`enet::EnetRxDescriptor`]).
//! - [`enet`]: a polled driver for NXP's ENET (i.MX RT, i.MX 6/7/8, Kinetis): bring-up, the
//!   receive doorbell, a transmit ring, and (feature `smoltcp`) a transmit-only smoltcp device.
//!   `scripts/firmware-mac-e2e.sh` runs it under QEMU (`mcimx6ul-evk`) behind a TAP device.
//! - [`RxFrame`]: a received frame, still in its ring buffer. The handle owns its buffer and
//!   borrows the ring, so the borrow checker enforces DMA ownership; dropping it (for example
//!   when the coalescer's segment has been consumed) gives the buffer back. Frames go into an
//!   [`lro_core::Engine`] as they are: copy-free on the way in.
//! - Page frags ([`BufferLayout::page_frags`]): several frames share one large page, reposted
//!   only when all of its frames have come back (a reference count per page, no allocator).
//! - [`RxDriver`]: what every backend offers (a frame handle and its [`lro_core::RxMeta`]);
//!   `&RxRing` implements it, and so does the AF_XDP socket's receive half.
//! - [`phy::LroDevice`] (feature `smoltcp`): a smoltcp device that coalesces between any
//!   [`RxDriver`] and smoltcp's `Interface` with the `Lro` policy.
//! - `xdp` (feature `xdp`, Linux, `std`): AF_XDP sockets, UMEM frames handed to the coalescer
//!   without copying, the XDP redirect program built in-process and attached through a BPF
//!   link that the kernel detaches when the process exits.
//! - `bytes` (feature `bytes`): a segment's frames as `bytes::Bytes` without copying.
//! - [`sim::SimMac`] (feature `test-utils`): the device side of a ring, for host tests.
//!
//! # Example
//! ```
//! use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
//! use lro_core::{Config, Engine, Segment, Sink, Sizes};
//!
//! struct Stack(usize);
//! impl<F: AsRef<[u8]>> Sink<F> for Stack {
//!     fn segment(&mut self, segment: Segment<'_, F>) {
//!         self.0 += 1; // the frames go back to the ring when `segment` drops
//!     }
//! }
//!
//! let mut storage: RxRingStorage<16, 32> = RxRingStorage::new();
//! let mut memory = [0u8; 32 * 2048];
//! let ring = RxRing::new(&mut storage, &mut memory, BufferLayout::slots(2048))?;
//! let mut engine: Engine<_, Sizes<8, 16>> = Engine::new(Config::lro());
//! let mut stack = Stack(0);
//! // The poll loop: frames stay in their ring buffers while the engine holds them.
//! while let Some(frame) = ring.receive() {
//!     let meta = frame.meta(0);
//!     engine.push(frame, &meta, &mut stack);
//! }
//! engine.flush_all(&mut stack);
//! assert_eq!(ring.outstanding(), 0);
//! # Ok::<(), drivers_myri::LayoutError>(())
//! ```
//!
//! # Unsafe
//! The ring's is in two private modules: `desc` (volatile descriptor accesses and the DMA
//! buffer memory, handed out as unique fragment tokens) and `sys` (volatile register accesses of
//! a MAC's register block). The AF_XDP backend's is in `xdp::sys`: `bpf(2)` (the map, the
//! program and its link), the UMEM mapping and the ownership states of its chunks. Every block
//! states its `SAFETY`.

#[cfg(feature = "bytes")]
extern crate alloc;
#[cfg(feature = "std")]
extern crate std;

mod desc;
mod driver;
pub mod enet;
mod ring;
mod sys;

#[cfg(feature = "bytes")]
#[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
pub mod bytes;
#[cfg(all(feature = "xdp", target_os = "linux"))]
#[cfg_attr(docsrs, doc(cfg(all(feature = "xdp", target_os = "linux"))))]
pub mod xdp;

#[cfg(feature = "smoltcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "smoltcp")))]
pub mod phy;
#[cfg(feature = "test-utils")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-utils")))]
pub mod sim;

/// Frames shared by the unit tests.
#[cfg(all(test, feature = "test-utils"))]
mod test_frames {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use lro_core::testing::{FrameSpec, TCP_ACK};

    /// An Ethernet/IPv4/TCP frame of `payload` bytes at `seq`, payload bytes numbered by
    /// sequence number.
    pub(crate) fn tcp(seq: u32, payload: usize) -> Vec<u8> {
        tcp_from(40000, TCP_ACK, seq, payload)
    }

    /// [`tcp`] from port `sport`, with the TCP flags `flags`.
    pub(crate) fn tcp_from(sport: u16, flags: u8, seq: u32, payload: usize) -> Vec<u8> {
        let data: Vec<u8> = (0..payload).map(|i| (seq as usize + i) as u8).collect();
        let spec = FrameSpec::ipv4_tcp(sport, 5201)
            .seq(seq)
            .ack(1)
            .flags(flags)
            .payload(&data);
        let mut buf = vec![0u8; spec.len()];
        spec.write(&mut buf).unwrap();
        buf
    }
}

pub use desc::{bits, RxDescriptor, RxDescriptorFormat};
pub use driver::RxDriver;
pub use ring::{
    BufferLayout, LayoutError, RingStats, RxFrame, RxRing, RxRingStorage, MAX_FRAG_SIZE,
    MIN_FRAG_SIZE,
};

/// The smoltcp crate this adapter is built against (with `std`, its TAP device
/// `smoltcp::phy::TunTapInterface`).
#[cfg(feature = "smoltcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "smoltcp")))]
pub use smoltcp;

// The README's examples, compiled and run with the doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
