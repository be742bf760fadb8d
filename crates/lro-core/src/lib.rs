#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! `lro-core`: TCP receive coalescing (LRO/GRO) with no allocator and no `std`.
//!
//! A driver's poll loop hands each received frame to a [`Coalescer`] with its [`RxMeta`] (what
//! the NIC said: checksum state, RSS hash, stripped VLAN tag, arrival time). Consecutive TCP
//! segments of a flow are merged into one large segment, so the stack above pays its
//! per-packet cost once per 64 KB instead of once per 1.5 KB; under [`Policy::Lro`] runs of pure
//! ACKs collapse into the newest one, so a sender pays once per ACK burst. At the end of the
//! poll, [`Coalesce::flush_all`] delivers everything held.
//!
//! The engine never allocates and never copies payload: a delivered [`Segment`] is the first
//! frame with its headers rewritten in place followed by the payload ranges of the others
//! (scatter-gather), with [`Segment::copy_to`] for stacks that want one contiguous frame. Every
//! frame comes back exactly once, inside a segment or through [`Sink::release`], so the owner
//! can recycle its buffers.
//!
//! # Example
//!
//! ```
//! use lro_core::{Coalesce, Coalescer, Config, RxChecksum, RxMeta, Segment, Sink};
//!
//! /// Collects segments as contiguous frames, as a stack without scatter-gather would.
//! #[derive(Default)]
//! struct Stack {
//!     frames: Vec<Vec<u8>>,
//! }
//!
//! impl Sink<Vec<u8>> for Stack {
//!     fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
//!         let mut frame = vec![0; segment.len()];
//!         segment.copy_to(&mut frame).expect("sized to fit");
//!         self.frames.push(frame);
//!     }
//! }
//!
//! // Three back-to-back 1000-byte segments of one flow, as a NIC would receive them.
//! # fn tcp_frame(seq: u32, ip_id: u16) -> Vec<u8> {
//! #     let mut f = vec![0u8; 14 + 20 + 20 + 1000];
//! #     f[12] = 0x08; // IPv4
//! #     f[14] = 0x45;
//! #     f[16..18].copy_from_slice(&1040u16.to_be_bytes());
//! #     f[18..20].copy_from_slice(&ip_id.to_be_bytes());
//! #     f[22] = 64;
//! #     f[23] = 6;
//! #     f[26..34].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
//! #     f[34..38].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
//! #     f[38..42].copy_from_slice(&seq.to_be_bytes());
//! #     f[46] = 0x50;
//! #     f[47] = 0x10; // ACK
//! #     f[48] = 0x02;
//! #     let c = !lro_core::csum::sum(&f[14..34]);
//! #     f[24..26].copy_from_slice(&c.to_be_bytes());
//! #     f
//! # }
//! let frames = [tcp_frame(1, 7), tcp_frame(1001, 8), tcp_frame(2001, 9)];
//!
//! // A flow table of 8 entries, at most 16 frames per segment; all memory is inside the value.
//! let mut engine: Coalescer<Vec<u8>, 8, 16> = Coalescer::new(Config::lro());
//! let mut stack = Stack::default();
//! // The NIC verified the checksums (CHECKSUM_UNNECESSARY).
//! let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
//! for frame in frames {
//!     engine.push(frame, &meta, &mut stack);
//! }
//! engine.flush_all(&mut stack); // end of the poll
//!
//! assert_eq!(stack.frames.len(), 1);
//! assert_eq!(stack.frames[0].len(), 14 + 20 + 20 + 3000);
//! assert_eq!(engine.stats().frames_merged, 2);
//! // The second and third frame matched the first one's headers: header prediction appended
//! // them without the parser and the flow lookup.
//! assert_eq!(engine.stats().predicted, 2);
//! assert!(engine.stats().is_conserved());
//! ```
//!
//! # Policies
//! - [`Policy::Gro`] follows Linux GRO exactly (`net/ipv4/tcp_offload.c`, `net/ipv4/af_inet.c`,
//!   `net/ipv6/ip6_offload.c`): only what [`gso::resegment`] turns back into the exact original
//!   frames. For forwarding.
//! - [`Policy::Lro`] is for an endpoint: it also absorbs pure ACKs whose ACK number advances
//!   (FreeBSD `tcp_lro_condense`, Myri10GE's inet_lro patch), merges data whose ACK number
//!   advances and aligned timestamps whose TSval does not go backwards. Duplicate ACKs, SACK,
//!   SYN/RST/URG and ECN changes are never merged.
//!
//! # Header prediction
//! Van Jacobson's TCP fast path, applied to coalescing ([`Config::header_prediction`], on by
//! default): the engine keeps the first 64 header bytes of the segment the previous data frame
//! started or joined, and a frame equal to them in every byte that must not change (masked
//! compare: addresses, ports, MACs, IP and TCP fields, option layout) and continuing the
//! sequence is appended, or starts the flow's next segment, without the parser, the flow
//! lookup and the general checks. It covers untagged Ethernet/IPv4/TCP with hardware-verified
//! checksums, the common case of a NIC queue behind TSO senders; every other frame takes the
//! general path, and a property test requires both paths to give identical output.
//!
//! # Invariants
//! Proven by property tests (`tests/props.rs`): conservation (every frame back exactly once),
//! per-flow order, per-flow payload bytes, flow isolation whatever the hashes, no checksum
//! laundering, valid output, the never-merged list, and `Gro` reversibility.
//!
//! # Modules
//! - [`wire`]: the bounds-checked header parser ([`wire::parse`] never panics).
//! - [`csum`]: ones'-complement arithmetic used to combine checksums without re-reading payload.
//! - [`gso`]: software segmentation, the inverse of the coalescer.
//! - [`rss`]: the Toeplitz hash and the FreeBSD-style RSS-sorting batch wrapper.
//! - [`stats`]: verdicts, reasons and 64-bit counters.

pub mod csum;
pub mod gso;
pub mod meta;
pub mod rss;
pub mod stats;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
pub mod tx;
pub mod wire;

mod coalesce;
mod flow;

pub use coalesce::{
    BufferTooSmall, Cause, Coalesce, Coalescer, Config, OutChecksum, Policy, Segment, SegmentInfo,
    Sink,
};
pub use meta::{LinkKind, RssHash, RssType, RxChecksum, RxMeta};
pub use stats::{FlushReason, PassReason, Stats, Verdict};
