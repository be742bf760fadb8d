//! The encapsulation hook: how a tunnel protocol plugs into the engine from outside lro-core.
//!
//! A tunnelled frame is a stack: link layer, an *outer* IPv4/IPv6 header, an encapsulation
//! header (GRE, say), then the *inner* packet (IPv4/IPv6, or an Ethernet frame for
//! transparent Ethernet bridging) carrying TCP. The engine parses and checks the outer IP header
//! itself, with the same code and rules as a plain one (TTL, TOS, DF, ID progression, never a
//! fragment: Linux applies `inet_gro_receive`/`inet_gro_flush` to both layers), and asks the
//! encapsulation, through this trait, only what it alone knows:
//!
//! - [`Encap::parse`]: the header's length, what it carries, its part of the flow identity,
//!   whether it has a checksum over itself and its payload, and whether this frame may merge
//!   at all (GRE: not with the sequence flag);
//! - [`Encap::may_merge`]: whether two frames' headers may merge beyond their identity;
//! - [`Encap::fix`]: rewrite the header of a coalesced segment, or of one frame that
//!   software segmentation cut from it ([`crate::gso::resegment_with`]), given the length and
//!   the sum of what follows it (so a checksum is rewritten without reading payload).
//!
//! The engine takes the encapsulation as a type parameter ([`Engine<F, C,
//! E>`](crate::Engine)); the default [`NoEncap`] has `ENABLED = false`, so every tunnel branch
//! compiles away and a plain engine pays nothing for the hook. `lro-gre` implements it for GRE.
//!
//! # Example: a toy encapsulation
//! An 8-byte header (2 bytes inner EtherType, 2 flag bytes, a 4-byte key) under IP protocol
//! 253 (reserved for experiments, RFC 3692):
//!
//! ```
//! use lro_core::encap::{Encap, EncapFix, EncapHeader, Inner};
//! use lro_core::PassReason;
//!
//! struct Toy;
//! impl Encap for Toy {
//!     const IP_PROTOCOL: u8 = 253;
//!     const MAX_HEADER_LEN: usize = 8;
//!     const NAME: &'static str = "toy";
//!     type Tunnel = lro_core::encap::TunnelKey;
//!
//!     fn parse(b: &[u8]) -> Result<EncapHeader, PassReason> {
//!         let h = b.get(..8).ok_or(PassReason::Malformed)?;
//!         let inner = match u16::from_be_bytes([h[0], h[1]]) {
//!             0x0800 => Inner::Ipv4,
//!             0x86dd => Inner::Ipv6,
//!             _ => return Err(PassReason::NotTcp),
//!         };
//!         let key = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
//!         let mut header = EncapHeader::new(8, inner, u64::from(key));
//!         if h[2] != 0 {
//!             header.mergeable = Err(PassReason::Encap); // flag byte set: never merged
//!         }
//!         Ok(header)
//!     }
//!
//!     fn fix(_header: &mut [u8], _fix: &EncapFix) {} // no length or checksum field
//! }
//! # let _ = Toy::parse(&[0x08, 0, 0, 0, 0, 0, 0, 1]).unwrap();
//! ```

use crate::stats::PassReason;

/// What follows an encapsulation header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inner {
    /// An IPv4 packet.
    Ipv4,
    /// An IPv6 packet.
    Ipv6,
    /// An Ethernet frame (transparent Ethernet bridging, EtherType 0x6558: gretap, NVGRE),
    /// with at most one VLAN tag, carrying IPv4 or IPv6.
    Ethernet,
}

/// What [`Encap::parse`] says about a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EncapHeader {
    /// Length of the header in bytes (a multiple of 2, so the sums of what follows add as
    /// they are; the engine passes a frame measured otherwise alone as
    /// [`PassReason::Malformed`]).
    pub len: usize,
    /// What follows the header.
    pub inner: Inner,
    /// The header's part of the flow identity: two frames are one flow only when these are
    /// equal (and the outer addresses, the inner flow...). GRE: flags, protocol and key.
    pub id: u64,
    /// The header carries a 16-bit ones'-complement checksum at this byte offset, over itself
    /// and everything after it to the end of the outer datagram, without a pseudo header (GRE
    /// with the C flag). The engine verifies it before merging (from a CHECKSUM_COMPLETE sum
    /// without reading payload, else in software, or trusts
    /// [`RxChecksum::Verified`](crate::RxChecksum::Verified)), never merges a frame whose checksum is
    /// wrong, and has [`Encap::fix`] rewrite it. Every other byte of the header must be equal
    /// in frames that merge (header prediction compares them).
    pub checksum: Option<usize>,
    /// `Err(reason)` when this frame must never be merged (it passes alone, in order, counted
    /// under `reason`): GRE with the sequence flag.
    pub mergeable: Result<(), PassReason>,
}

impl EncapHeader {
    /// A mergeable header of `len` bytes carrying `inner`, with identity `id` and no checksum.
    pub const fn new(len: usize, inner: Inner, id: u64) -> Self {
        Self {
            len,
            inner,
            id,
            checksum: None,
            mergeable: Ok(()),
        }
    }
}

/// What [`Encap::fix`] is told about the bytes after the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct EncapFix {
    /// Bytes after the header, to the end of the outer datagram (every inner header already
    /// rewritten).
    pub payload_len: usize,
    /// Their ones'-complement sum, folded; `None` when the header has no checksum over them
    /// ([`EncapHeader::checksum`] is `None`), or when the output carries a partial TCP checksum
    /// ([`OutChecksum::Partial`](crate::OutChecksum::Partial)) and no sum was kept.
    pub payload_sum: Option<u16>,
}

/// A tunnel protocol the engine can coalesce through. See the [module documentation](self).
pub trait Encap: 'static {
    /// Whether the engine looks for this encapsulation at all. Only [`NoEncap`] says `false`.
    const ENABLED: bool = true;
    /// The outer IP protocol number that announces the encapsulation (GRE: 47).
    const IP_PROTOCOL: u8;
    /// The longest header [`Encap::parse`] accepts.
    const MAX_HEADER_LEN: usize;
    /// A short name for reports (`"gre"`).
    const NAME: &'static str;
    /// The tunnel part of the flow key the engine stores: [`TunnelKey`] for a real
    /// encapsulation, [`NoTunnel`] (zero bytes) for [`NoEncap`].
    type Tunnel: TunnelSlot;

    /// Parses the header at the start of `bytes` (the outer IP payload, up to the end of the
    /// outer datagram).
    ///
    /// # Errors
    /// The reason the frame is passed alone: [`PassReason::Malformed`] for a truncated header,
    /// [`PassReason::NotTcp`] for an inner protocol the engine cannot coalesce,
    /// [`PassReason::Encap`] for a header the encapsulation never merges. Never panic.
    fn parse(bytes: &[u8]) -> Result<EncapHeader, PassReason>;

    /// Whether a frame whose header is `frame` may join a segment whose head's header is `held`
    /// (both as [`Encap::parse`] measured them, with equal [`EncapHeader::id`]). The default
    /// says yes.
    ///
    /// Two headers equal in every byte but the checksum field ([`EncapHeader::checksum`]) must
    /// be allowed to merge: header prediction, which has compared exactly those bytes with the
    /// head's, does not ask.
    fn may_merge(held: &[u8], frame: &[u8]) -> bool {
        let _ = (held, frame);
        true
    }

    /// Rewrites the fields of the header (`header`, exactly the bytes [`Encap::parse`]
    /// measured) that depend on what follows it: lengths, a checksum.
    fn fix(header: &mut [u8], fix: &EncapFix);
}

/// No encapsulation: the default of [`Engine`](crate::Engine). Its `ENABLED` is `false`, so the
/// parser never looks past an IP header for a tunnel and no tunnel state is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NoEncap;

impl Encap for NoEncap {
    const ENABLED: bool = false;
    const IP_PROTOCOL: u8 = 0;
    const MAX_HEADER_LEN: usize = 0;
    const NAME: &'static str = "none";
    type Tunnel = NoTunnel;

    fn parse(_bytes: &[u8]) -> Result<EncapHeader, PassReason> {
        Err(PassReason::NotTcp)
    }

    fn fix(_header: &mut [u8], _fix: &EncapFix) {}
}

/// The tunnel part of a flow's identity: the outer IP header's addresses and what else must be
/// equal in it, the encapsulation's identity, and for an inner Ethernet frame its link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TunnelKey {
    /// Outer source address as a big-endian number (IPv4 in the top 32 bits).
    pub outer_src: u128,
    /// Outer destination address, same layout.
    pub outer_dst: u128,
    /// Outer IP version (4 or 6) in bits 31..28, outer IPv6 flow label in bits 19..0.
    pub outer_tags: u32,
    /// [`EncapHeader::id`].
    pub encap_id: u64,
    /// For an inner Ethernet frame: destination MAC (bits 127..80), source MAC (79..32) and
    /// its VLAN tag `TPID << 16 | TCI` (31..0); zero otherwise.
    pub inner_link: u128,
}

impl TunnelKey {
    /// Outer IP version: 4 or 6.
    pub const fn outer_version(&self) -> u8 {
        (self.outer_tags >> 28) as u8
    }

    /// Outer source address.
    pub fn outer_src_addr(&self) -> core::net::IpAddr {
        crate::flow::addr_of(self.outer_src, self.outer_version())
    }

    /// Outer destination address.
    pub fn outer_dst_addr(&self) -> core::net::IpAddr {
        crate::flow::addr_of(self.outer_dst, self.outer_version())
    }
}

/// Where the engine keeps the tunnel part of a flow key: [`TunnelKey`], or [`NoTunnel`] for an
/// engine without encapsulation. Implemented by those two types only.
pub trait TunnelSlot: Copy + Eq + Default + core::fmt::Debug + 'static + sealed::Sealed {
    /// Whether the slot stores anything (false for [`NoTunnel`]).
    #[doc(hidden)]
    const PRESENT: bool;
    /// The empty slot.
    #[doc(hidden)]
    const EMPTY: Self;
    /// Stores a tunnel identity (nothing for [`NoTunnel`]).
    fn from_key(key: &TunnelKey) -> Self;
    /// The stored identity, if this slot stores one (`None` for the empty slot of a flow that
    /// came through no tunnel).
    fn key(&self) -> Option<&TunnelKey>;
    /// Words to mix into the flow-key hash: every bit of the identity.
    #[doc(hidden)]
    fn words(&self) -> [u64; 8];
}

/// The tunnel slot of an engine without encapsulation: no bytes, equal to itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NoTunnel;

impl TunnelSlot for NoTunnel {
    const PRESENT: bool = false;
    const EMPTY: Self = NoTunnel;

    #[inline(always)]
    fn from_key(_key: &TunnelKey) -> Self {
        NoTunnel
    }

    #[inline(always)]
    fn key(&self) -> Option<&TunnelKey> {
        None
    }

    #[inline(always)]
    fn words(&self) -> [u64; 8] {
        [0; 8]
    }
}

impl TunnelSlot for TunnelKey {
    const PRESENT: bool = true;
    const EMPTY: Self = TunnelKey {
        outer_src: 0,
        outer_dst: 0,
        outer_tags: 0,
        encap_id: 0,
        inner_link: 0,
    };

    #[inline(always)]
    fn from_key(key: &TunnelKey) -> Self {
        *key
    }

    #[inline(always)]
    fn key(&self) -> Option<&TunnelKey> {
        // The empty slot is a flow that came through no tunnel: a real key always carries the
        // outer IP version in `outer_tags`.
        (self.outer_tags != 0).then_some(self)
    }

    #[inline(always)]
    fn words(&self) -> [u64; 8] {
        let w = |x: u128| [(x >> 64) as u64, x as u64];
        let [a, b] = w(self.outer_src);
        let [c, d] = w(self.outer_dst);
        let [e, f] = w(self.inner_link);
        [a, b, c, d, u64::from(self.outer_tags), self.encap_id, e, f]
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for super::NoTunnel {}
    impl Sealed for super::TunnelKey {}
}
