//! From a frame to its header stack and the facts the merge rules read.
//!
//! A frame is a stack of layers, outermost first:
//!
//! 1. **link**: Ethernet II with up to two in-line VLAN tags (802.1Q, 802.1ad) and a tag the
//!    NIC stripped ([`RxMeta::vlan_stripped`]); the IPoIB encapsulation header; or nothing
//!    (raw IP). See [`LinkKind`].
//! 2. optionally a **tunnel**: an outer IPv4/IPv6 header and an encapsulation header that an
//!    [`Encap`] implementation parses (GRE in `lro-gre`), then, for transparent Ethernet
//!    bridging, an inner Ethernet header;
//! 3. the (inner) **IP** header: IPv4, or IPv6 with the Hop-by-Hop, Routing and
//!    Destination-options headers Linux's `ipv6_gro_pull_exthdrs` walks (a Routing header
//!    with segments left or a Home Address option is [`PassReason::Routed`]: the checksum
//!    covers another address);
//! 4. **TCP**.
//!
//! [`parse`] turns a frame into a [`Parsed`]: the flow key (with the tunnel's part), every
//! layer's offset and the per-frame facts of the IP and TCP headers. It accepts any byte slice
//! and never panics: every read is bounds-checked against the frame and the lengths the
//! headers claim. A frame it cannot use comes back as [`Unparsed`] with the [`PassReason`] the
//! engine counts and, when the addresses could be read, a [`FlowHint`] so the engine can flush
//! that flow's held segment first and keep the flow's order.
//!
//! [`parse_into`] is the engine's per-frame entry: the same parse, with straight-line fast
//! paths for the common shapes (Ethernet without or with one VLAN tag, IPv4 without options or
//! IPv6 without extension headers, TCP) that store each field once; a property test, the
//! truncation and corpus sweeps and the `parse` fuzz target require it to say exactly what
//! [`parse`] says.
//!
//! Hand-written rather than etherparse's `SlicedPacket`: the engine needs a handful of fields
//! at fixed offsets, and a full slicing pass costs about three times [`parse_into`]
//! (`benches/engine.rs` measures both in one run). etherparse is used in the tests as an
//! independent checker of everything emitted.

use crate::encap::{Encap, Inner, NoEncap, TunnelKey};
use crate::flow::FlowKey;
use crate::meta::{LinkKind, RxMeta};
use crate::stats::PassReason;
use crate::wire::tcp::{self, TcpOptions};
use crate::wire::{ethernet, ethertype, ipoib, ipv4, ipv6, protocol};

/// The facts of one IP header the merge rules compare (Linux `inet_gro_flush`,
/// `ipv6_gro_flush`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IpFacts {
    /// TTL or hop limit.
    pub ttl: u8,
    /// TOS or traffic class (ECN included).
    pub tos: u8,
    /// IPv4 DF bit (false for IPv6).
    pub df: bool,
    /// IPv4 identification (zero for IPv6).
    pub id: u16,
    /// IPv4 header with options (IHL > 5): such frames are never merged.
    pub options: bool,
    /// IPv6?
    pub v6: bool,
}

/// A tunnel layer: the outer IP header and the encapsulation header (see [`Encap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// The tunnel's part of the flow identity.
    pub key: TunnelKey,
    /// Offset of the outer IP header.
    pub outer_l3: u32,
    /// The outer IP header's facts.
    pub outer: IpFacts,
    /// Offset of the encapsulation header.
    pub encap: u32,
    /// Offset just past it: the inner Ethernet header (bridging) or the inner IP header.
    pub inner: u32,
    /// Offset (from the encapsulation header) of its checksum over itself and what follows
    /// ([`EncapHeader::checksum`](crate::encap::EncapHeader::checksum)).
    pub checksum: Option<u16>,
    /// `Err` when the encapsulation forbids merging this frame.
    pub mergeable: Result<(), PassReason>,
}

/// The fields of a parsed TCP frame the engine works with. Offsets are from the start of the
/// frame; for a tunnelled frame `l3` is the inner IP header's and [`Parsed::tunnel`] has the
/// outer layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Flow identity (for a tunnelled frame: outer link layer, inner IP and ports).
    pub key: FlowKey,
    /// Offset of the first IP header: the link header's length, in-line VLAN tags included.
    pub link_len: u32,
    /// Offset of the (inner) IP header.
    pub l3: u32,
    /// Offset of the TCP header.
    pub l4: u32,
    /// Offset of the TCP payload.
    pub payload: u32,
    /// TCP payload length.
    pub payload_len: u32,
    /// Offset one past the IP datagram's end (the frame may be longer: padding). For a
    /// tunnelled frame the inner and the outer datagram end here together.
    pub ip_end: u32,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP header bytes 12..16: data offset, reserved/AE bits, flags and window.
    pub flags_word: u32,
    /// The flag byte (see [`tcp::flags`]).
    pub flags: u8,
    /// Window (unscaled).
    pub window: u16,
    /// Options classification.
    pub options: TcpOptions,
    /// The (inner) IP header's facts.
    pub ip: IpFacts,
    /// The tunnel layers, when the frame arrived through an encapsulation.
    pub tunnel: Option<Tunnel>,
}

impl Parsed {
    /// All fields zero: a place for [`parse_into`] to fill.
    pub const EMPTY: Parsed = Parsed {
        key: FlowKey::EMPTY,
        link_len: 0,
        l3: 0,
        l4: 0,
        payload: 0,
        payload_len: 0,
        ip_end: 0,
        seq: 0,
        ack: 0,
        flags_word: 0,
        flags: 0,
        window: 0,
        options: TcpOptions::None,
        ip: IpFacts {
            ttl: 0,
            tos: 0,
            df: false,
            id: 0,
            options: false,
            v6: false,
        },
        tunnel: None,
    };

    /// IP version 6 (of the inner header)?
    #[inline]
    pub fn is_v6(&self) -> bool {
        self.ip.v6
    }

    /// TCP header length in bytes.
    #[inline]
    pub fn tcp_header_len(&self) -> u32 {
        self.payload - self.l4
    }

    /// Bytes after the IP datagram (Ethernet padding), given the frame length.
    #[inline]
    pub fn padding(&self, frame_len: usize) -> u32 {
        (frame_len as u32).saturating_sub(self.ip_end)
    }
}

/// What is known about a frame the engine cannot use as TCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowHint {
    /// Nothing: not IP, or IP headers unreadable.
    None,
    /// Addresses known, ports not (an IP fragment, a truncated TCP header), or ports not to be
    /// trusted for the flow (routed IPv6, [`PassReason::Routed`]).
    Addresses(FlowKey),
    /// A tunnel's outer addresses known, the inner flow not (an outer IP fragment, an
    /// unreadable inner header): the key's link identity and addresses are the outer ones.
    Tunnel(FlowKey),
}

/// A frame [`parse`] could not turn into a [`Parsed`] TCP frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unparsed {
    /// Why.
    pub reason: PassReason,
    /// What is known of its flow.
    pub hint: FlowHint,
}

impl Unparsed {
    const fn new(reason: PassReason, hint: FlowHint) -> Self {
        Self { reason, hint }
    }
}

const MALFORMED: Unparsed = Unparsed::new(PassReason::Malformed, FlowHint::None);
const NOT_IP: Unparsed = Unparsed::new(PassReason::NotIp, FlowHint::None);
const NOT_TCP: Unparsed = Unparsed::new(PassReason::NotTcp, FlowHint::None);

#[cold]
fn malformed() -> Unparsed {
    MALFORMED
}

/// Parses a frame's link, IP and TCP headers (no tunnels: [`parse_with`] for an
/// encapsulation).
///
/// # Errors
/// [`Unparsed`] for anything that is not a well-formed TCP segment over IPv4/IPv6 (see
/// [`PassReason`]). IPv4 options do not make it fail: they are reported in
/// [`IpFacts::options`] so the caller can locate the flow.
///
/// ```
/// use lro_core::{parse, RxMeta};
/// // Not even an Ethernet header: malformed, not a panic.
/// assert!(parse::parse(&[0u8; 5], &RxMeta::ethernet(0)).is_err());
/// ```
#[inline]
pub fn parse(frame: &[u8], meta: &RxMeta) -> Result<Parsed, Unparsed> {
    parse_with::<NoEncap>(frame, meta)
}

/// [`parse`] that also looks through the encapsulation `E` (the outer IP protocol
/// [`Encap::IP_PROTOCOL`]).
///
/// # Errors
/// As [`parse`], and what [`Encap::parse`] says of the encapsulation header.
#[inline]
pub fn parse_with<E: Encap>(frame: &[u8], meta: &RxMeta) -> Result<Parsed, Unparsed> {
    general::<E>(frame, meta)
}

/// [`parse_with`] into `out`, which on success holds exactly what [`parse_with`] returns; on
/// error its contents are unspecified.
///
/// Frames of the common shapes (Ethernet without a VLAN tag or with one, IPv4 without options
/// and not a fragment or IPv6 without extension headers, TCP) take a straight-line path with
/// one bounds check that stores each field once; any other frame takes the general parser.
///
/// # Errors
/// As [`parse_with`].
///
/// ```
/// use lro_core::parse::{self, Parsed};
/// use lro_core::RxMeta;
/// let mut p = Parsed::EMPTY;
/// assert!(parse::parse_into::<lro_core::encap::NoEncap>(&[0u8; 5], &RxMeta::ethernet(0), &mut p).is_err());
/// ```
#[inline(always)]
pub fn parse_into<E: Encap>(frame: &[u8], meta: &RxMeta, out: &mut Parsed) -> Result<(), Unparsed> {
    let done = match FastLink::of(frame, meta) {
        Some(FastLink::V4) => fast_v4::<0>(frame, meta, out),
        Some(FastLink::TaggedV4) => fast_v4::<1>(frame, meta, out),
        Some(FastLink::V6) => fast_v6::<0>(frame, meta, out),
        Some(FastLink::TaggedV6) => fast_v6::<1>(frame, meta, out),
        None => false,
    };
    if done {
        return Ok(());
    }
    general_into::<E>(frame, meta, out)
}

/// The link layers the fast paths cover: Ethernet with the IP header right after it or after
/// one in-line VLAN tag (802.1Q or 802.1ad).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FastLink {
    /// IPv4 after the Ethernet header.
    V4,
    /// IPv4 after one VLAN tag.
    TaggedV4,
    /// IPv6 after the Ethernet header.
    V6,
    /// IPv6 after one VLAN tag.
    TaggedV6,
}

impl FastLink {
    /// The fast-path link layer of `frame`, from its EtherTypes; `None` for any other.
    #[inline(always)]
    fn of(frame: &[u8], meta: &RxMeta) -> Option<FastLink> {
        if meta.link != LinkKind::Ethernet {
            return None;
        }
        let h = frame.first_chunk::<{ ethernet::HEADER_LEN + ethernet::vlan::LEN }>()?;
        match u16::from_be_bytes([h[12], h[13]]) {
            ethertype::IPV4 => Some(FastLink::V4),
            ethertype::IPV6 => Some(FastLink::V6),
            ethertype::VLAN | ethertype::QINQ => match u16::from_be_bytes([h[16], h[17]]) {
                ethertype::IPV4 => Some(FastLink::TaggedV4),
                ethertype::IPV6 => Some(FastLink::TaggedV6),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The general parser behind [`parse_into`]. Not inlined: `out` then lives in memory, so the
/// fast paths write their fields in place instead of through registers and a final copy.
#[inline(never)]
fn general_into<E: Encap>(frame: &[u8], meta: &RxMeta, out: &mut Parsed) -> Result<(), Unparsed> {
    *out = general::<E>(frame, meta)?;
    Ok(())
}

/// The VLAN tag the NIC stripped, in the flow key's tag slot 0.
#[inline(always)]
fn stripped_tag(meta: &RxMeta) -> u128 {
    match meta.vlan_stripped {
        Some(tci) => u128::from(u32::from(ethertype::VLAN) << 16 | u32::from(tci)) << 96,
        None => 0,
    }
}

/// MAC addresses of an Ethernet header in the flow key's layout (bits 127..32).
#[inline(always)]
fn macs(h: &[u8; 12]) -> u128 {
    u128::from(u64::from_be_bytes([
        h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
    ])) << 64
        | u128::from(u32::from_be_bytes([h[8], h[9], h[10], h[11]])) << 32
}

/// A frame of one of the fast paths' shapes: its first bytes, through the fixed TCP header, the
/// offsets of its IP and TCP headers and where its IP datagram ends (not yet checked against
/// the frame: [`Fast::tcp_len`]).
struct Fast<'a> {
    h: &'a [u8],
    l3: usize,
    l4: usize,
    ip_end: usize,
}

impl Fast<'_> {
    /// Ethernet with `TAGS` (0 or 1) in-line VLAN tags, IPv4 with IHL 5 and not a fragment,
    /// TCP; `None` for any other frame.
    #[inline(always)]
    fn v4<const TAGS: usize>(frame: &[u8]) -> Option<Fast<'_>> {
        let l3 = ethernet::HEADER_LEN + TAGS * ethernet::vlan::LEN;
        let l4 = l3 + ipv4::HEADER_LEN;
        let h = frame.get(..l4 + tcp::HEADER_LEN)?;
        let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        if h[l3] != ipv4::VER_IHL_PLAIN
            || h[l3 + ipv4::field::PROTOCOL] != protocol::TCP
            || be16(l3 + ipv4::field::FLG_OFF.start) & ipv4::NOT_DF != 0
        {
            return None;
        }
        let ip_end = l3 + usize::from(be16(l3 + ipv4::field::LENGTH.start));
        Some(Fast { h, l3, l4, ip_end })
    }

    /// Ethernet with `TAGS` (0 or 1) in-line VLAN tags, IPv6 with TCP right after the fixed
    /// header and a nonzero payload length; `None` for any other frame.
    #[inline(always)]
    fn v6<const TAGS: usize>(frame: &[u8]) -> Option<Fast<'_>> {
        let l3 = ethernet::HEADER_LEN + TAGS * ethernet::vlan::LEN;
        let l4 = l3 + ipv6::HEADER_LEN;
        let h = frame.get(..l4 + tcp::HEADER_LEN)?;
        let plen = usize::from(u16::from_be_bytes([
            h[l3 + ipv6::field::LENGTH.start],
            h[l3 + ipv6::field::LENGTH.start + 1],
        ]));
        if h[l3] >> 4 != 6 || h[l3 + ipv6::field::NXT_HDR] != protocol::TCP || plen == 0 {
            return None;
        }
        Some(Fast {
            h,
            l3,
            l4,
            ip_end: l4 + plen,
        })
    }

    /// The TCP header's length, when the datagram lies inside the frame (`frame_len` bytes) and
    /// the TCP header inside the datagram; `None` otherwise, left to the general parser to judge.
    #[inline(always)]
    fn tcp_len(&self, frame_len: usize) -> Option<usize> {
        let hlen = usize::from(self.h[self.l4 + tcp::field::DATA_OFF] >> 4) * 4;
        (self.ip_end <= frame_len && hlen >= tcp::HEADER_LEN && self.l4 + hlen <= self.ip_end)
            .then_some(hlen)
    }
}

/// The TCP part of a fast-path frame `f` into `out`: both IP versions' common part. False when
/// the lengths do not fit the frame ([`Fast::tcp_len`]).
#[inline(always)]
fn fast_tcp(out: &mut Parsed, frame: &[u8], f: &Fast<'_>) -> bool {
    let Some(hlen) = f.tcp_len(frame.len()) else {
        return false;
    };
    let (h, l3, l4, ip_end) = (f.h, f.l3, f.l4, f.ip_end);
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    out.link_len = l3 as u32;
    out.l3 = l3 as u32;
    out.l4 = l4 as u32;
    out.payload = (l4 + hlen) as u32;
    out.payload_len = (ip_end - l4 - hlen) as u32;
    out.ip_end = ip_end as u32;
    out.seq = be32(l4 + tcp::field::SEQ_NUM.start);
    out.ack = be32(l4 + tcp::field::ACK_NUM.start);
    out.flags_word = be32(l4 + tcp::field::FLAG_WORD.start);
    out.flags = h[l4 + tcp::field::FLAGS];
    out.window = be16(l4 + tcp::field::WINDOW.start);
    out.options = match hlen {
        tcp::HEADER_LEN => TcpOptions::None,
        _ => TcpOptions::classify(&frame[l4 + tcp::HEADER_LEN..l4 + hlen]),
    };
    true
}

/// The fast path for Ethernet with `TAGS` (0 or 1) in-line VLAN tags, IPv4 with IHL 5, TCP:
/// the whole of [`parse`] for that shape. Returns false (and may have written part of `out`) for
/// any frame it does not cover; those go to the general parser, which decides what they are.
#[inline(always)]
fn fast_v4<const TAGS: usize>(frame: &[u8], meta: &RxMeta, out: &mut Parsed) -> bool {
    let Some(f) = Fast::v4::<TAGS>(frame) else {
        return false;
    };
    let (h, l3, l4) = (f.h, f.l3, f.l4);
    let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let mut tags = stripped_tag(meta);
    if TAGS == 1 {
        tags |= u128::from(be32(ethernet::HEADER_LEN - 2)) << 64;
    }
    let Some(mac) = h.first_chunk::<12>() else {
        return false;
    };
    out.key = FlowKey::from_parts(
        u128::from(be32(l3 + ipv4::field::SRC.start)) << 96,
        u128::from(be32(l3 + ipv4::field::DST.start)) << 96,
        macs(mac) | u128::from(be32(l4)),
        FlowKey::pack_tags(tags, 4, LinkKind::Ethernet, 0),
    );
    out.ip = IpFacts {
        ttl: h[l3 + ipv4::field::TTL],
        tos: h[l3 + ipv4::field::TOS],
        df: be16(l3 + ipv4::field::FLG_OFF.start) & ipv4::DF != 0,
        id: be16(l3 + ipv4::field::IDENT.start),
        options: false,
        v6: false,
    };
    out.tunnel = None;
    fast_tcp(out, frame, &f)
}

/// The fast path for Ethernet with `TAGS` (0 or 1) in-line VLAN tags, IPv6 with TCP right after
/// the fixed header.
#[inline(always)]
fn fast_v6<const TAGS: usize>(frame: &[u8], meta: &RxMeta, out: &mut Parsed) -> bool {
    let Some(f) = Fast::v6::<TAGS>(frame) else {
        return false;
    };
    let (h, l3, l4) = (f.h, f.l3, f.l4);
    let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let first = be32(l3);
    let mut tags = stripped_tag(meta);
    if TAGS == 1 {
        tags |= u128::from(be32(ethernet::HEADER_LEN - 2)) << 64;
    }
    let addr = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&h[at..at + 16]);
        u128::from_be_bytes(b)
    };
    let Some(mac) = h.first_chunk::<12>() else {
        return false;
    };
    out.key = FlowKey::from_parts(
        addr(l3 + ipv6::field::SRC.start),
        addr(l3 + ipv6::field::DST.start),
        macs(mac) | u128::from(be32(l4)),
        FlowKey::pack_tags(tags, 6, LinkKind::Ethernet, ipv6::flow_label(first)),
    );
    out.ip = IpFacts {
        ttl: h[l3 + ipv6::field::HOP_LIMIT],
        tos: ipv6::traffic_class(first),
        df: false,
        id: 0,
        options: false,
        v6: true,
    };
    out.tunnel = None;
    fast_tcp(out, frame, &f)
}

/// What an RSS hash over addresses and ports reads of a TCP frame, in place: the source and
/// destination addresses (contiguous in the IP header) and the source and destination ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlowBytes<'a> {
    /// TCP over IPv4.
    V4(&'a [u8; 8], &'a [u8; 4]),
    /// TCP over IPv6.
    V6(&'a [u8; 32], &'a [u8; 4]),
}

/// The [`FlowBytes`] of a frame of the fast paths' shapes (Ethernet without or with one VLAN
/// tag, IPv4 without options and not a fragment or IPv6 without extension headers, TCP, lengths
/// that fit), which [`parse`] accepts whole; `None` for any other frame, which only [`parse`]
/// can judge. Reads no more than the fast paths' shape checks: no field is stored, no option
/// classified.
#[inline(always)]
pub(crate) fn fast_flow_bytes<'a>(frame: &'a [u8], meta: &RxMeta) -> Option<FlowBytes<'a>> {
    let (f, v6) = match FastLink::of(frame, meta)? {
        FastLink::V4 => (Fast::v4::<0>(frame)?, false),
        FastLink::TaggedV4 => (Fast::v4::<1>(frame)?, false),
        FastLink::V6 => (Fast::v6::<0>(frame)?, true),
        FastLink::TaggedV6 => (Fast::v6::<1>(frame)?, true),
    };
    f.tcp_len(frame.len())?;
    let ports = f.h.get(f.l4..)?.first_chunk()?;
    Some(if v6 {
        FlowBytes::V6(
            f.h.get(f.l3 + ipv6::field::SRC.start..)?.first_chunk()?,
            ports,
        )
    } else {
        FlowBytes::V4(
            f.h.get(f.l3 + ipv4::field::SRC.start..)?.first_chunk()?,
            ports,
        )
    })
}

/// The link layer: the offset of the first IP header, the MAC addresses (flow-key layout), the
/// VLAN tags (flow-key layout, the stripped one included) and the EtherType announced.
#[inline(always)]
fn link(frame: &[u8], meta: &RxMeta) -> Result<(usize, u128, u128, u16), Unparsed> {
    let mut tags = stripped_tag(meta);
    match meta.link {
        LinkKind::Ethernet => {
            let h = frame
                .first_chunk::<{ ethernet::HEADER_LEN }>()
                .ok_or_else(malformed)?;
            let Some(mac) = h.first_chunk::<12>() else {
                return Err(MALFORMED);
            };
            let mut et = u16::from_be_bytes([h[12], h[13]]);
            let mut off = ethernet::HEADER_LEN;
            let mut n = 0u32;
            while et == ethertype::VLAN || et == ethertype::QINQ {
                if n as usize == ethernet::MAX_TAGS {
                    return Err(NOT_IP);
                }
                let t = frame
                    .get(off..off + ethernet::vlan::LEN)
                    .ok_or_else(malformed)?;
                let tag = u32::from(et) << 16 | u32::from(u16::from_be_bytes([t[0], t[1]]));
                tags |= u128::from(tag) << (64 - 32 * n);
                et = u16::from_be_bytes([t[2], t[3]]);
                off += ethernet::vlan::LEN;
                n += 1;
            }
            Ok((off, macs(mac), tags, et))
        }
        LinkKind::Ipoib => {
            let h = frame
                .first_chunk::<{ ipoib::HEADER_LEN }>()
                .ok_or_else(malformed)?;
            // No MAC addresses; the reserved field in their place (see `FlowKey::ipoib_reserved`).
            let link = FlowKey::ipoib_link(u16::from_be_bytes([h[2], h[3]]));
            Ok((
                ipoib::HEADER_LEN,
                link,
                tags,
                u16::from_be_bytes([h[0], h[1]]),
            ))
        }
        LinkKind::RawIp => {
            let et = match frame.first().map(|b| b >> 4) {
                Some(4) => ethertype::IPV4,
                Some(6) => ethertype::IPV6,
                Some(_) => return Err(NOT_IP),
                None => return Err(MALFORMED),
            };
            Ok((0, 0, tags, et))
        }
    }
}

/// One parsed IP header: its facts, addresses (flow-key layout), flow label, the protocol of
/// what follows, where that starts and where the datagram ends.
struct IpLayer {
    facts: IpFacts,
    src: u128,
    dst: u128,
    label: u32,
    proto: u8,
    next: usize,
    end: usize,
    fragment: bool,
    /// An IPv6 Routing header with segments left or a Home Address option: the TCP
    /// pseudo-header holds the route's final destination or the sender's home address, not the
    /// header's address.
    routed: bool,
}

/// The IP header at `l3` announced by `et` (IPv4 or IPv6, else NotIp), with IPv6 extension
/// headers walked. Fragments come back with `fragment` set (the caller decides the hint).
#[inline(always)]
fn ip_layer(frame: &[u8], l3: usize, et: u16) -> Result<IpLayer, Unparsed> {
    let version = match et {
        ethertype::IPV4 => 4,
        ethertype::IPV6 => 6,
        _ => return Err(NOT_IP),
    };
    if frame.get(l3).map(|b| b >> 4) != Some(version) {
        return Err(MALFORMED);
    }
    if version == 4 {
        let ip = frame.get(l3..l3 + ipv4::HEADER_LEN).ok_or_else(malformed)?;
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ihl < ipv4::HEADER_LEN || total < ihl || l3 + total > frame.len() {
            return Err(MALFORMED);
        }
        let addr = |at: usize| {
            u128::from(u32::from_be_bytes([
                ip[at],
                ip[at + 1],
                ip[at + 2],
                ip[at + 3],
            ])) << 96
        };
        let frag = u16::from_be_bytes([ip[6], ip[7]]);
        Ok(IpLayer {
            facts: IpFacts {
                ttl: ip[ipv4::field::TTL],
                tos: ip[ipv4::field::TOS],
                df: frag & ipv4::DF != 0,
                id: u16::from_be_bytes([ip[4], ip[5]]),
                options: ihl != ipv4::HEADER_LEN,
                v6: false,
            },
            src: addr(ipv4::field::SRC.start),
            dst: addr(ipv4::field::DST.start),
            label: 0,
            proto: ip[ipv4::field::PROTOCOL],
            next: l3 + ihl,
            end: l3 + total,
            // MF, a fragment offset or the reserved bit (Linux: any frag_off bit but DF
            // flushes).
            fragment: frag & ipv4::NOT_DF != 0,
            routed: false,
        })
    } else {
        let ip = frame.get(l3..l3 + ipv6::HEADER_LEN).ok_or_else(malformed)?;
        let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
        if plen == 0 {
            // Jumbogram (RFC 2675): Linux flushes these too.
            return Err(MALFORMED);
        }
        let end = l3 + ipv6::HEADER_LEN + plen;
        if end > frame.len() {
            return Err(MALFORMED);
        }
        let addr = |at: usize| {
            let mut b = [0u8; 16];
            b.copy_from_slice(&ip[at..at + 16]);
            u128::from_be_bytes(b)
        };
        let first = u32::from_be_bytes([ip[0], ip[1], ip[2], ip[3]]);
        let mut layer = IpLayer {
            facts: IpFacts {
                ttl: ip[ipv6::field::HOP_LIMIT],
                tos: ipv6::traffic_class(first),
                df: false,
                id: 0,
                options: false,
                v6: true,
            },
            src: addr(ipv6::field::SRC.start),
            dst: addr(ipv6::field::DST.start),
            label: ipv6::flow_label(first),
            proto: ip[ipv6::field::NXT_HDR],
            next: l3 + ipv6::HEADER_LEN,
            end,
            fragment: false,
            routed: false,
        };
        // Extension headers Linux walks (`ipv6_gro_pull_exthdrs` with
        // `INET6_PROTO_GSO_EXTHDR`): Hop-by-Hop (first only), Routing, Destination options.
        let mut walked = 0;
        loop {
            match layer.proto {
                protocol::HOPOPTS if walked == 0 => {}
                protocol::ROUTING | protocol::DSTOPTS => {}
                protocol::FRAGMENT => {
                    layer.fragment = true;
                    return Ok(layer);
                }
                _ => return Ok(layer),
            }
            let off = layer.next;
            if walked == ipv6::MAX_EXT || off + 2 > end {
                return Err(MALFORMED);
            }
            let kind = layer.proto;
            layer.proto = frame[off + ipv6::ext::NXT_HDR];
            layer.next = off + (usize::from(frame[off + ipv6::ext::LEN]) + 1) * 8;
            walked += 1;
            if layer.next > end {
                return Err(MALFORMED);
            }
            // The checksum's pseudo-header holds another address than the header's: the
            // route's final destination (a Routing header with segments left; RFC 8200 section
            // 8.1) or the sender's home address (RFC 6275 section 6.3). In bounds: an extension
            // header is at least 8 bytes, and it ends within the datagram.
            layer.routed |= match kind {
                protocol::ROUTING => frame[off + ipv6::ext::SEGMENTS_LEFT] != 0,
                protocol::DSTOPTS => {
                    ipv6::has_home_address(&frame[off + ipv6::ext::OPTIONS..layer.next])
                }
                _ => false,
            };
        }
    }
}

/// The TCP header at `l4` of a datagram ending at `ip_end`, completing `p` (whose key has the
/// addresses and gets the ports).
#[inline(always)]
fn tcp_layer(frame: &[u8], l4: usize, ip_end: usize, p: &mut Parsed) -> Result<(), Unparsed> {
    // Built only on the error path: the key is 64 bytes.
    let truncated = || Unparsed::new(PassReason::Malformed, FlowHint::Addresses(p.key));
    if l4 + tcp::HEADER_LEN > ip_end {
        return Err(truncated());
    }
    let th = &frame[l4..ip_end];
    let hlen = usize::from(th[tcp::field::DATA_OFF] >> 4) * 4;
    if hlen < tcp::HEADER_LEN || hlen > th.len() {
        return Err(truncated());
    }
    p.key = p
        .key
        .with_ports(u32::from_be_bytes([th[0], th[1], th[2], th[3]]));
    p.l4 = l4 as u32;
    p.payload = (l4 + hlen) as u32;
    p.payload_len = (ip_end - l4 - hlen) as u32;
    p.ip_end = ip_end as u32;
    p.seq = u32::from_be_bytes([th[4], th[5], th[6], th[7]]);
    p.ack = u32::from_be_bytes([th[8], th[9], th[10], th[11]]);
    p.flags_word = u32::from_be_bytes([th[12], th[13], th[14], th[15]]);
    p.flags = th[tcp::field::FLAGS];
    p.window = u16::from_be_bytes([th[14], th[15]]);
    p.options = TcpOptions::classify(&th[tcp::HEADER_LEN..hlen]);
    Ok(())
}

/// The general parser: every link kind and tag count, IPv4 options, IPv6 extension headers,
/// the tunnel of `E`.
#[inline(always)]
fn general<E: Encap>(frame: &[u8], meta: &RxMeta) -> Result<Parsed, Unparsed> {
    let (l3, macs, tags, et) = link(frame, meta)?;
    let ip = ip_layer(frame, l3, et)?;
    let version = if ip.facts.v6 { 6 } else { 4 };
    let key = FlowKey::from_parts(
        ip.src,
        ip.dst,
        macs,
        FlowKey::pack_tags(tags, version, meta.link, ip.label),
    );
    if ip.facts.v6 && ip.fragment {
        // Every fragment's Fragment header names the first header of the part it cuts (RFC
        // 8200 section 4.5). GRE there: a tunnel's fragment, which must not overtake the
        // tunnel's held flows (their keys hold inner addresses). An extension header may hide
        // either: the address hint, which with an encapsulation covers the tunnels between
        // these addresses as well (`Engine::flush_for_hint`).
        let tunnel = E::ENABLED && ip.next < ip.end && frame[ip.next] == E::IP_PROTOCOL;
        let hint = if tunnel {
            FlowHint::Tunnel(key)
        } else {
            FlowHint::Addresses(key)
        };
        return Err(Unparsed::new(PassReason::Fragment, hint));
    }
    if ip.proto == protocol::TCP {
        if ip.fragment {
            return Err(Unparsed::new(
                PassReason::Fragment,
                FlowHint::Addresses(key),
            ));
        }
        if ip.routed {
            return Err(Unparsed::new(PassReason::Routed, FlowHint::Addresses(key)));
        }
        let mut p = Parsed {
            key,
            link_len: l3 as u32,
            l3: l3 as u32,
            ip: ip.facts,
            ..Parsed::EMPTY
        };
        tcp_layer(frame, ip.next, ip.end, &mut p)?;
        return Ok(p);
    }
    if E::ENABLED && ip.proto == E::IP_PROTOCOL {
        if ip.fragment {
            return Err(Unparsed::new(PassReason::Fragment, FlowHint::Tunnel(key)));
        }
        return tunnel::<E>(frame, meta, l3, macs, tags, ip, key);
    }
    Err(NOT_TCP)
}

/// The rest of a frame whose first IP header (`outer`, at `outer_l3`) carries the
/// encapsulation `E`.
#[inline(never)]
fn tunnel<E: Encap>(
    frame: &[u8],
    meta: &RxMeta,
    outer_l3: usize,
    outer_macs: u128,
    tags: u128,
    outer: IpLayer,
    outer_key: FlowKey,
) -> Result<Parsed, Unparsed> {
    let hint = FlowHint::Tunnel(outer_key);
    let unparsed = |reason| Unparsed::new(reason, hint);
    let encap_at = outer.next;
    let header = E::parse(&frame[encap_at..outer.end]).map_err(unparsed)?;
    let inner_at = encap_at + header.len;
    // The hook's answer is checked, not trusted: an odd length (the contract says even)
    // would put the inner headers where the sums of what follows no longer add.
    if header.len > E::MAX_HEADER_LEN
        || header.len % 2 != 0
        || inner_at > outer.end
        || header.checksum.is_some_and(|c| c + 2 > header.len)
    {
        return Err(unparsed(PassReason::Malformed));
    }
    // Everything inside the tunnel is read within the outer datagram: padding after it is
    // not an inner header.
    let datagram = &frame[..outer.end];
    // An inner Ethernet frame (bridging): its addresses and at most one tag are the tunnel's
    // inner link identity.
    let (l3, inner_link, et) = match header.inner {
        Inner::Ipv4 => (inner_at, 0u128, ethertype::IPV4),
        Inner::Ipv6 => (inner_at, 0, ethertype::IPV6),
        Inner::Ethernet => {
            let h = datagram
                .get(inner_at..inner_at + ethernet::HEADER_LEN)
                .ok_or(unparsed(PassReason::Malformed))?;
            let Some(mac) = h.first_chunk::<12>() else {
                return Err(unparsed(PassReason::Malformed));
            };
            let mut et = u16::from_be_bytes([h[12], h[13]]);
            let mut off = inner_at + ethernet::HEADER_LEN;
            let mut link = macs(mac);
            if et == ethertype::VLAN || et == ethertype::QINQ {
                let t = datagram
                    .get(off..off + ethernet::vlan::LEN)
                    .ok_or(unparsed(PassReason::Malformed))?;
                link |=
                    u128::from(u32::from(et) << 16 | u32::from(u16::from_be_bytes([t[0], t[1]])));
                et = u16::from_be_bytes([t[2], t[3]]);
                off += ethernet::vlan::LEN;
            }
            (off, link, et)
        }
    };
    let inner = match ip_layer(datagram, l3, et) {
        Ok(ip) => ip,
        Err(u) => return Err(unparsed(u.reason)),
    };
    let version = if inner.facts.v6 { 6 } else { 4 };
    let key = FlowKey::from_parts(
        inner.src,
        inner.dst,
        outer_macs,
        FlowKey::pack_tags(tags, version, meta.link, inner.label),
    );
    // As `general`: an IPv6 fragment whatever it cuts, an IPv4 one of TCP (another IPv4
    // protocol's fragment is that protocol's frame).
    if inner.fragment && (inner.facts.v6 || inner.proto == protocol::TCP) {
        return Err(unparsed(PassReason::Fragment));
    }
    if inner.proto != protocol::TCP {
        // A tunnel in a tunnel (Linux `gre_gro_receive`: no nested encapsulation) or UDP.
        let reason = if inner.proto == E::IP_PROTOCOL {
            PassReason::Encap
        } else {
            PassReason::NotTcp
        };
        return Err(unparsed(reason));
    }
    if inner.routed {
        return Err(unparsed(PassReason::Routed));
    }
    if inner.end != outer.end {
        // The inner datagram must fill the outer one (Linux: the inner `inet_gro_receive`
        // flushes on a length mismatch).
        return Err(unparsed(PassReason::Malformed));
    }
    let outer_version: u32 = if outer.facts.v6 { 6 } else { 4 };
    let mut p = Parsed {
        key,
        link_len: outer_l3 as u32,
        l3: l3 as u32,
        ip: inner.facts,
        tunnel: Some(Tunnel {
            key: TunnelKey {
                outer_src: outer.src,
                outer_dst: outer.dst,
                outer_tags: outer_version << 28 | outer.label,
                encap_id: header.id,
                inner_link,
            },
            outer_l3: outer_l3 as u32,
            outer: outer.facts,
            encap: encap_at as u32,
            inner: inner_at as u32,
            checksum: header.checksum.map(|c| c as u16),
            mergeable: header.mergeable,
        }),
        ..Parsed::EMPTY
    };
    tcp_layer(frame, inner.next, inner.end, &mut p).map_err(|u| Unparsed {
        reason: u.reason,
        hint,
    })?;
    Ok(p)
}

/// Reads the flow key of a frame (addresses, ports, link identity) without the rest of the
/// parse, e.g. to compute a software RSS hash. `None` when the frame is not TCP over IP or its
/// headers are unreadable.
pub fn flow_key(frame: &[u8], meta: &RxMeta) -> Option<FlowKey> {
    parse(frame, meta).ok().map(|p| p.key)
}
