#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
// The crate docs link modules of optional features; without them those links cannot resolve
// (`.ci/run` builds the docs with every feature, warnings as errors, where they must).
#![cfg_attr(
    not(all(feature = "smoltcp", feature = "test-utils")),
    allow(rustdoc::broken_intra_doc_links)
)]
//! `drivers-ipoib`: the receive side of IP over InfiniBand feeding [`lro_core`].
//!
//! No coalescing library handles IPoIB (FreeBSD's LRO parser is Ethernet-only; DPDK's GRO and
//! VPP have none). This crate brings what an IPoIB receive path needs, `no_std` and without an
//! allocator (all memory is the caller's):
//!
//! - [`wire`]: the framing. The 4-byte encapsulation header (RFC 4391 §6), the 20-byte IPoIB
//!   hardware address, and the capture form `LINKTYPE_IPOIB` (242) with its 40-byte GRH area,
//!   parse and build, bounds-checked, never panicking. [`Mode`]: datagram mode (2044- or
//!   4092-byte MTU, 40 bytes of GRH space in each receive buffer) and connected mode (up to
//!   65520).
//! - [`RxQueue`]: large receive buffers posted to the HCA's receive queue, and **copybreak**
//!   (seed 002, Linux's "IPoIB: Copy small received SKBs in connected mode"): a frame of at
//!   most 256 bytes (configurable) is copied into a right-sized buffer from a small pool and
//!   its large buffer reposted at once, so small messages never starve the receive queue;
//!   larger frames go up in their buffer and are replaced from the large pool. Every buffer is
//!   accounted for, on teardown too ([`Accounting`]).
//! - [`poll()`]: one NAPI-style poll from the queue into any lro-core coalescer. lro-core
//!   parses IPoIB itself ([`lro_core::LinkKind::Ipoib`]): both policies, header prediction,
//!   IPv4 and IPv6, the first frame's encapsulation header kept in front of the segment.
//! - [`sim`]: a deterministic model of a connected-mode receiver (sender rate, receive-queue
//!   depth, pools, the stack's consume rate, RNR retries and timer, connection resets losing
//!   the messages in flight), fed with per-frame costs measured from this crate's code, that
//!   reproduces the seed's experiment (`examples/copybreak_sim.rs`).
//! - [`hca::SimHca`] (feature `test-utils`): the device side of the queue.
//! - [`phy`] (feature `smoltcp`): smoltcp (`Medium::Ip`) over the queue, copybreak and the
//!   coalescer.
//! - `report` (feature `std`): the simulation's table and SVG plot, measured costs read from
//!   criterion's output.
//!
//! # Example
//! (The simulated HCA, `hca::SimHca`, needs the feature `test-utils`.)
//!
//! ```
//! use drivers_ipoib::hca::SimHca;
//! use drivers_ipoib::{poll, Mode, QueueConfig, RxQueue, RxQueueStorage};
//! use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};
//!
//! /// Counts segments and their bytes, as a stack would take them.
//! #[derive(Default)]
//! struct Stack {
//!     segments: usize,
//!     bytes: usize,
//! }
//! impl<F: AsRef<[u8]>> Sink<F> for Stack {
//!     fn segment(&mut self, segment: Segment<'_, F>) {
//!         self.segments += 1;
//!         self.bytes += segment.len();
//!     } // the frames' buffers go back to the queue here
//! }
//!
//! /// An IPv4/TCP packet 198.18.0.1:40000 -> 198.18.0.2:5201 with 1000 payload bytes.
//! fn tcp(seq: u32, id: u16) -> Vec<u8> {
//!     let mut p = vec![0u8; 20 + 20 + 1000];
//!     p[0] = 0x45;
//!     p[2..4].copy_from_slice(&1040u16.to_be_bytes());
//!     p[4..6].copy_from_slice(&id.to_be_bytes());
//!     p[8] = 64;
//!     p[9] = 6;
//!     p[12..20].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
//!     p[20..24].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
//!     p[24..28].copy_from_slice(&seq.to_be_bytes());
//!     p[32] = 0x50;
//!     p[33] = 0x10; // ACK
//!     p[34] = 0x02;
//!     p
//! }
//!
//! // Memory: 16 large buffers (2K datagram mode), 16 small ones, the bookkeeping.
//! let mode = Mode::DATAGRAM_2K;
//! let storage: RxQueueStorage<'_, 16, 16> = RxQueueStorage::new();
//! let mut large = vec![0u8; 16 * mode.rx_buffer_len()];
//! let mut small = vec![0u8; 16 * 256];
//! let queue = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 8))?;
//! let mut hca = SimHca::new(&queue);
//! for k in 0..3 {
//!     hca.deliver_ip(&tcp(1 + 1000 * k, k as u16))?;
//! }
//!
//! let mut engine: Engine<_, Sizes<8, 16>> = Engine::new(Config::lro());
//! let mut stack = Stack::default();
//! // The HCA verified the checksums (datagram-mode receive offload).
//! let meta = RxMeta::ipoib(0).with_checksum(RxChecksum::Verified);
//! poll::poll(&queue, &mut engine, &mut stack, &meta, 64);
//! assert_eq!((stack.segments, stack.bytes), (1, 4 + 40 + 3000));
//! assert_eq!(engine.stats().predicted, 2); // header prediction covers IPoIB
//! assert_eq!(queue.posted(), 8); // every buffer went back
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Features
//! - `test-utils`: [`hca::SimHca`].
//! - `smoltcp`: [`phy`], over drivers-myri's `LroDevice`.
//! - `std`: the simulation's report (table, SVG) and cost files; smoltcp's TUN device.

#[cfg(feature = "std")]
extern crate std;

#[cfg(feature = "test-utils")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-utils")))]
pub mod hca;
pub mod mode;
pub mod poll;
pub mod queue;
pub mod sim;
pub mod wire;

#[cfg(feature = "smoltcp")]
#[cfg_attr(docsrs, doc(cfg(feature = "smoltcp")))]
pub mod phy;
#[cfg(feature = "std")]
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub mod report;

pub use mode::{IbMtu, Mode};
pub use poll::{poll, PollStats};
pub use queue::{
    Accounting, LayoutError, QueueConfig, QueueStats, Refused, Replacement, RxBuf, RxError,
    RxQueue, RxQueueStorage, COPYBREAK_DEFAULT,
};

// The README's examples, compiled and run with the doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
