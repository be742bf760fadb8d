#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! `lro-core`: TCP receive coalescing (LRO/GRO) with no allocator and no `std`.
//!
//! A driver's poll loop hands each received frame to an [`Engine`] with its [`RxMeta`] (what
//! the NIC said: checksum state, RSS hash, stripped VLAN tag, arrival time). Consecutive TCP
//! segments of a flow are merged into one large segment, so the stack above pays its
//! per-packet cost once per 64 KB instead of once per 1.5 KB; under [`Policy::Lro`] runs of pure
//! ACKs collapse into the newest one, so a sender pays once per ACK burst. At the end of the
//! poll, [`Engine::flush_all`] delivers everything held.
//!
//! The engine never allocates and never copies payload: a delivered [`Segment`] is the first
//! frame with its headers rewritten in place followed by the payload ranges of the others
//! (scatter-gather), with [`Segment::copy_to`] for stacks that want one contiguous frame. Every
//! frame comes back exactly once, inside a segment or through [`Sink::release`], so the owner
//! can recycle its buffers.
//!
//! # Example
//!
//! Paste into a new crate that depends on `lro-core`:
//!
//! ```
//! use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink};
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
//! /// An Ethernet/IPv4/TCP frame 198.18.0.1:40000 -> 198.18.0.2:5201 with 1000 payload bytes.
//! fn tcp_frame(seq: u32, ip_id: u16) -> Vec<u8> {
//!     let mut f = vec![0u8; 14 + 20 + 20 + 1000];
//!     f[12..14].copy_from_slice(&[0x08, 0x00]); // EtherType IPv4
//!     f[14] = 0x45; // version 4, 20-byte header
//!     f[16..18].copy_from_slice(&1040u16.to_be_bytes()); // total length
//!     f[18..20].copy_from_slice(&ip_id.to_be_bytes());
//!     f[22] = 64; // TTL
//!     f[23] = 6; // TCP
//!     f[26..34].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
//!     f[34..38].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]); // ports 40000, 5201
//!     f[38..42].copy_from_slice(&seq.to_be_bytes());
//!     f[46] = 0x50; // 20-byte TCP header
//!     f[47] = 0x10; // ACK
//!     f[48] = 0x02; // window 512
//!     // The NIC verified the checksums (RxChecksum::Verified below), so none are filled in.
//!     f
//! }
//!
//! // Three back-to-back 1000-byte segments of one flow, as a NIC would receive them.
//! let frames = [tcp_frame(1, 7), tcp_frame(1001, 8), tcp_frame(2001, 9)];
//!
//! // The default sizes (64 flows, 64 frames per segment); all memory is inside the value.
//! let mut engine: Engine<Vec<u8>> = Engine::new(Config::lro());
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
//! // The second and third frame matched the first one's headers: header prediction read them
//! // without the parser and the flow lookup.
//! assert_eq!(engine.stats().predicted, 2);
//! assert!(engine.stats().is_conserved());
//! ```
//!
//! The same works over borrowed buffers (`Engine<&mut [u8]>`, see [`Engine`]) and a
//! driver's buffer handles; [`Coalescer`] is the trait every engine and wrapper implements.
//!
//! # Policies
//! - [`Policy::Gro`] follows Linux GRO exactly (`net/ipv4/tcp_offload.c`, `net/ipv4/af_inet.c`,
//!   `net/ipv6/ip6_offload.c`): only what [`gso::resegment`] turns back into the exact original
//!   frames. For forwarding.
//! - [`Policy::Lro`] is for an endpoint: it also absorbs pure ACKs whose ACK number advances
//!   or whose window opens at the same ACK number (FreeBSD `tcp_lro_condense`, Myri10GE's
//!   inet_lro patch), merges data whose ACK number advances and aligned timestamps whose TSval
//!   does not go backwards. Duplicate ACKs, SACK, SYN/RST/URG and ECN changes are never merged.
//!
//! Every rule of both is one function in one table, citing its source; the general path and
//! header prediction call the same rules.
//!
//! # Header stack and tunnels
//! A frame is parsed as a stack ([`parse`]): link (Ethernet with in-line or stripped VLAN tags,
//! IPoIB, raw IP), optionally a tunnel (outer IP and an encapsulation an [`encap::Encap`]
//! implementation describes, GRE in `lro-gre`), the inner IPv4/IPv6 header and TCP. The flow key
//! includes the tunnel part; at delivery every length and checksum of the stack is rewritten
//! without reading payload.
//!
//! # Header prediction
//! Van Jacobson's TCP fast path, applied to coalescing ([`Config::header_prediction`], on by
//! default): a cheap hash of a frame's addresses and ports names a candidate flow entry, and a
//! frame that repeats that entry's head in every byte that must not change (a masked compare
//! of whole 16-byte blocks) is read at the head's offsets without the parser and the flow
//! lookup. A delivered flow keeps its entry, template included, until a new flow needs it, so
//! its next segment starts on the fast path too. It covers every common frame: tagged and
//! untagged, IPv4 and IPv6, tunnelled, data and pure ACKs, checksums verified by the NIC, given
//! as a full-frame sum, or checked in software.
//!
//! # Where nothing merges
//! Traffic in which frames rarely find another of their flow (many request-response flows,
//! each sending a frame at a time) gets nothing from coalescing and pays for it on every
//! frame. With [`Config::adaptive_bypass`] (off by default) the engine notices a burst in which
//! (almost) nothing merged and passes the next bursts' frames through unparsed, trying again
//! after 1 to 16 bursts; every invariant below still holds.
//!
//! # Memory
//! The engine is one value sized at compile time by its [`Capacity`] ([`Sizes`]); see
//! `SIZING.md` for measured figures and a guide for small parts.
//!
//! # Invariants
//! Proven by property tests (`tests/props.rs`): conservation (every frame back exactly once),
//! per-flow order, per-flow payload bytes, flow isolation whatever the hashes, no checksum
//! laundering, valid output, the never-merged list, and `Gro` reversibility.
//!
//! # Modules
//! - [`wire`]: field tables of the headers (Ethernet, IPoIB, IPv4, IPv6, TCP).
//! - [`parse`]: the bounds-checked parser ([`parse::parse`] never panics).
//! - [`flow`]: the flow key and its seeded hash.
//! - [`encap`]: the hook a tunnel protocol implements from outside lro-core.
//! - [`csum`]: ones'-complement arithmetic used to combine checksums without re-reading payload.
//! - [`gso`]: software segmentation, the inverse of the coalescer.
//! - [`rss`]: the Toeplitz hash and the FreeBSD-style RSS-sorting batch wrapper.
//! - [`tx`]: the sender's side (seed 003): a queue of transmitted super-segments with lazy head
//!   trimming. It lives here, not in a crate of its own, because it shares the header model,
//!   the fix-up and software segmentation with the receive side, and a `no_std` stack wants both
//!   from one dependency; nothing of it is linked unless used.
//! - [`stats`]: verdicts, reasons and 64-bit counters.

pub mod csum;
pub mod encap;
pub mod flow;
pub mod gso;
pub mod meta;
pub mod parse;
pub mod rss;
pub mod stats;
#[cfg(any(test, feature = "test-utils"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-utils")))]
pub mod testing;
pub mod tx;
pub mod wire;

mod coalesce;

#[doc(hidden)]
pub use coalesce::{Arrays, Held, Parts, Store};
pub use coalesce::{
    BufferTooSmall, Capacity, Cause, Coalescer, Config, DefaultSizes, Engine, OutChecksum, Part,
    Policy, Segment, SegmentInfo, Sink, Sizes, SmallSizes,
};
pub use flow::FlowKey;
pub use meta::{LinkKind, RssHash, RssType, RxChecksum, RxMeta};
pub use stats::{Counter, FlushReason, PassReason, Stats, TunnelStats, Verdict};

// The README's examples, and those of the workspace's README (the engine's front page in the
// repository), compiled and run with the doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadmeDoctests;
