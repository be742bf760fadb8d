//! Wrapping frames in GRE (feature `test-utils`): for tests, fuzz targets, examples and benches.
//!
//! [`GreSpec`] describes the outer layers (link with VLAN tags or raw IP, an IPv4 or IPv6
//! header with lro-core's [`IpSpec`], options, extension headers and fragments included, a
//! GRE header with any flags, version, key, sequence number, Reserved1 and routing field) and
//! [`GreSpec::write`] puts them in front of an inner frame: its IP datagram (protocol type
//! IPv4/IPv6), or with [`GreSpec::teb`] its Ethernet frame (transparent Ethernet bridging).
//! Outer lengths, the outer IPv4 header checksum and the GRE checksum (when C is set) are
//! computed with lro-core's reference sum ([`ones_complement_sum`]), which shares no code with
//! the engine's. Nothing allocates: this compiles into `no_std` builds.
//!
//! ```
//! use lro_core::testing::{FrameSpec, TCP_ACK};
//! use lro_gre::testing::{GreSpec, InnerFrame};
//!
//! let payload = [7u8; 100];
//! let inner = FrameSpec::ipv4_tcp(40000, 5201).flags(TCP_ACK).payload(&payload);
//! let mut plain = [0u8; 256];
//! let n = inner.write(&mut plain).unwrap();
//!
//! // GRE with checksum and key, over IPv6, behind a VLAN tag.
//! let gre = GreSpec::ipv6().checksum().key(42).vlan(0x8100, 7);
//! let mut out = [0u8; 512];
//! let len = gre.write(InnerFrame::Ethernet(&plain[..n]), &mut out).unwrap();
//! // Link 18, outer IPv6 40, GRE 12, then the inner IP datagram (n minus its 14-byte link header).
//! assert_eq!(len, 18 + 40 + 12 + (n - 14));
//! ```

use core::fmt;

use lro_core::testing::{
    ones_complement_sum, Bytes, EthernetSpec, IpSpec, Ipv4Spec, Ipv6Spec, LinkSpec,
};

use crate::wire::{field, flags, Protocol, HEADER_LEN};

/// The inner frame to wrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InnerFrame<'a> {
    /// An Ethernet frame (up to two VLAN tags) carrying IPv4 or IPv6; bytes after its IP
    /// datagram (padding) are left out.
    Ethernet(&'a [u8]),
    /// An IP datagram (raw IP); bytes after it are left out.
    Ip(&'a [u8]),
}

/// Why a frame could not be wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WrapError {
    /// The output buffer is shorter than the wrapped frame.
    BufferTooSmall {
        /// Bytes the wrapped frame needs.
        needed: usize,
    },
    /// The inner frame is not IPv4 or IPv6 (or too short to tell).
    NotIp,
    /// Transparent Ethernet bridging asks for an inner Ethernet frame.
    NeedsEthernet,
    /// The outer datagram would be longer than its length field can say.
    TooLong,
}

impl fmt::Display for WrapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WrapError::BufferTooSmall { needed } => {
                write!(
                    f,
                    "buffer too small: the wrapped frame needs {needed} bytes"
                )
            }
            WrapError::NotIp => f.write_str("the inner frame is not IPv4 or IPv6"),
            WrapError::NeedsEthernet => {
                f.write_str("transparent Ethernet bridging needs an inner Ethernet frame")
            }
            WrapError::TooLong => f.write_str("the outer IP datagram would exceed 65535 bytes"),
        }
    }
}

impl core::error::Error for WrapError {}

/// The outer layers of a GRE-tunnelled frame. All fields are public; the builder methods are
/// shortcuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GreSpec {
    /// Outer link layer.
    pub link: LinkSpec,
    /// Outer IP header (its protocol/next header is written as GRE, 47).
    pub ip: IpSpec,
    /// The GRE flags-and-version word: the optional fields written are the ones these flags
    /// announce (checksum word with C or R, key with K, sequence number with S, the routing
    /// field with R).
    pub flags_version: u16,
    /// The key (with K).
    pub key: u32,
    /// The sequence number (with S).
    pub sequence: u32,
    /// Reserved1 (with C or R).
    pub reserved1: u16,
    /// The RFC 1701 routing field (with R): Source Route Entries, the null one included.
    pub routing: Bytes<32>,
    /// The protocol type; `None`: from the inner frame (IPv4, IPv6, or TEB with
    /// [`GreSpec::teb`]).
    pub protocol: Option<Protocol>,
    /// Carry the inner Ethernet frame (transparent Ethernet bridging) instead of its IP
    /// datagram.
    pub teb: bool,
    /// Get the GRE checksum wrong (with C).
    pub corrupt_checksum: bool,
}

impl Default for GreSpec {
    fn default() -> Self {
        Self::ipv4()
    }
}

impl GreSpec {
    /// Ethernet / IPv4 198.18.0.1 -> 198.18.0.2 (TTL 64, DF) / GRE without flags.
    pub fn ipv4() -> Self {
        Self {
            link: LinkSpec::Ethernet(EthernetSpec::default()),
            ip: IpSpec::V4(Ipv4Spec {
                src: [198, 18, 0, 1],
                dst: [198, 18, 0, 2],
                ..Ipv4Spec::default()
            }),
            flags_version: 0,
            key: 0,
            sequence: 0,
            reserved1: 0,
            routing: Bytes::from_slice(&[0, 0, 0, 0]),
            protocol: None,
            teb: false,
            corrupt_checksum: false,
        }
    }

    /// Ethernet / IPv6 2001:db8::1 -> 2001:db8::2 (hop limit 64) / GRE without flags.
    pub fn ipv6() -> Self {
        let mut src = [0u8; 16];
        src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        src[15] = 1;
        let mut dst = src;
        dst[15] = 2;
        Self {
            ip: IpSpec::V6(Ipv6Spec {
                src,
                dst,
                ..Ipv6Spec::default()
            }),
            ..Self::ipv4()
        }
    }

    /// Sets C: a checksum over the GRE header and what follows.
    pub fn checksum(mut self) -> Self {
        self.flags_version |= flags::C;
        self
    }

    /// Sets K and the key.
    pub fn key(mut self, key: u32) -> Self {
        self.flags_version |= flags::K;
        self.key = key;
        self
    }

    /// Sets S and the sequence number.
    pub fn sequence(mut self, seq: u32) -> Self {
        self.flags_version |= flags::S;
        self.sequence = seq;
        self
    }

    /// Carries the inner Ethernet frame (protocol type 0x6558).
    pub fn teb(mut self) -> Self {
        self.teb = true;
        self
    }

    /// Adds an outer VLAN tag (at most two); switches raw IP or IPoIB to Ethernet.
    ///
    /// # Panics
    /// If two tags are already present.
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.link.push_vlan(tpid, tci);
        self
    }

    /// No outer link header (raw IP).
    pub fn raw_ip(mut self) -> Self {
        self.link = LinkSpec::RawIp;
        self
    }

    /// An outer IPoIB encapsulation header with this reserved field (GRE over InfiniBand).
    pub fn ipoib(mut self, reserved: u16) -> Self {
        self.link = LinkSpec::Ipoib { reserved };
        self
    }

    /// Sets the outer IPv4 identification (no effect on IPv6).
    pub fn ip_id(mut self, id: u16) -> Self {
        if let IpSpec::V4(v4) = &mut self.ip {
            v4.id = id;
        }
        self
    }

    /// Length of the outer link header.
    pub fn link_len(&self) -> usize {
        self.link.header_len()
    }

    /// Length of the GRE header these flags announce.
    pub fn gre_len(&self) -> usize {
        let f = self.flags_version;
        let routing = if f & flags::R != 0 {
            self.routing.len()
        } else {
            0
        };
        field::routing(f) + routing
    }

    /// Length of everything before the inner bytes: link, outer IP, GRE.
    pub fn header_len(&self) -> usize {
        self.link_len() + self.ip.header_len() + self.gre_len()
    }

    /// The inner bytes carried and their protocol type.
    fn inner<'a>(&self, inner: InnerFrame<'a>) -> Result<(&'a [u8], Protocol), WrapError> {
        let (link, bytes) = match inner {
            InnerFrame::Ethernet(b) => {
                let mut at = 12;
                loop {
                    let et = b.get(at..at + 2).ok_or(WrapError::NotIp)?;
                    if et == [0x81, 0x00] || et == [0x88, 0xa8] {
                        at += 4;
                        if at > 12 + 8 {
                            return Err(WrapError::NotIp);
                        }
                        continue;
                    }
                    break (at + 2, b);
                }
            }
            InnerFrame::Ip(b) => {
                if self.teb {
                    return Err(WrapError::NeedsEthernet);
                }
                (0, b)
            }
        };
        let ip = &bytes[link..];
        let (len, proto) = match ip.first().map(|v| v >> 4) {
            Some(4) if ip.len() >= 20 => (
                usize::from(u16::from_be_bytes([ip[2], ip[3]])),
                Protocol::IPV4,
            ),
            Some(6) if ip.len() >= 40 => (
                40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])),
                Protocol::IPV6,
            ),
            _ => return Err(WrapError::NotIp),
        };
        let end = link + len.min(ip.len());
        if self.teb {
            Ok((&bytes[..end], Protocol::TEB))
        } else {
            Ok((&bytes[link..end], proto))
        }
    }

    /// Length of `inner` wrapped.
    ///
    /// # Errors
    /// As [`GreSpec::write`], but for the buffer.
    pub fn wrapped_len(&self, inner: InnerFrame<'_>) -> Result<usize, WrapError> {
        let (bytes, _) = self.inner(inner)?;
        self.length_field(bytes.len())?;
        Ok(self.header_len() + bytes.len())
    }

    /// The outer IP header's length field for `inner_len` bytes carried (IPv4 total length,
    /// IPv6 payload length); [`WrapError::TooLong`] when it does not fit 16 bits.
    fn length_field(&self, inner_len: usize) -> Result<u16, WrapError> {
        let ip_len = self.ip.header_len() + self.gre_len() + inner_len;
        let field = match self.ip {
            IpSpec::V4(_) => ip_len,
            IpSpec::V6(_) => ip_len - 40,
        };
        u16::try_from(field).map_err(|_| WrapError::TooLong)
    }

    /// Writes the outer layers and `inner` to the start of `out`; returns the length.
    ///
    /// # Errors
    /// [`WrapError`]: an inner frame that is not IP, TEB of raw IP, an outer datagram over
    /// 65535 bytes, a short buffer. Nothing useful is written on error.
    pub fn write(&self, inner: InnerFrame<'_>, out: &mut [u8]) -> Result<usize, WrapError> {
        let (bytes, inner_proto) = self.inner(inner)?;
        let total = self.header_len() + bytes.len();
        if out.len() < total {
            return Err(WrapError::BufferTooSmall { needed: total });
        }
        let out = &mut out[..total];
        let len = self.length_field(bytes.len())?;
        let ethertype: u16 = match self.ip {
            IpSpec::V4(_) => 0x0800,
            IpSpec::V6(_) => 0x86dd,
        };
        let mut at = self.link.write(out, ethertype);
        match &self.ip {
            IpSpec::V4(v4) => {
                let hl = v4.header_len();
                out[at] = 0x40 | (hl / 4) as u8;
                out[at + 1] = v4.tos;
                put16(out, at + 2, len);
                put16(out, at + 4, v4.id);
                let frag = (u16::from(v4.reserved_flag) << 15)
                    | (u16::from(v4.df) << 14)
                    | (u16::from(v4.mf) << 13)
                    | (v4.frag_offset & 0x1fff);
                put16(out, at + 6, frag);
                out[at + 8] = v4.ttl;
                out[at + 9] = lro_core::wire::protocol::GRE;
                put16(out, at + 10, 0);
                out[at + 12..at + 16].copy_from_slice(&v4.src);
                out[at + 16..at + 20].copy_from_slice(&v4.dst);
                let opts = v4.options.as_slice();
                out[at + 20..at + 20 + opts.len()].copy_from_slice(opts);
                out[at + 20 + opts.len()..at + hl].fill(0);
                let check = !ones_complement_sum(&out[at..at + hl]);
                put16(out, at + 10, check);
                at += hl;
            }
            IpSpec::V6(v6) => {
                let first = (6u32 << 28)
                    | (u32::from(v6.traffic_class) << 20)
                    | (v6.flow_label & 0x000f_ffff);
                out[at..at + 4].copy_from_slice(&first.to_be_bytes());
                put16(out, at + 4, len);
                let n = v6.ext.iter().take_while(|e| e.is_some()).count();
                let after_ext = if v6.fragment.is_some() {
                    44
                } else {
                    lro_core::wire::protocol::GRE
                };
                out[at + 6] = match &v6.ext[0] {
                    Some(e) => e.kind.protocol(),
                    None => after_ext,
                };
                out[at + 7] = v6.hop_limit;
                out[at + 8..at + 24].copy_from_slice(&v6.src);
                out[at + 24..at + 40].copy_from_slice(&v6.dst);
                at += 40;
                for (i, ext) in v6.ext[..n].iter().flatten().enumerate() {
                    let next = match v6.ext.get(i + 1).and_then(|e| e.as_ref()) {
                        Some(e) if i + 1 < n => e.kind.protocol(),
                        _ => after_ext,
                    };
                    let len = ext.len();
                    out[at] = next;
                    out[at + 1] = (len / 8 - 1) as u8;
                    let body = ext.body.as_slice();
                    out[at + 2..at + 2 + body.len()].copy_from_slice(body);
                    out[at + 2 + body.len()..at + len].fill(0);
                    at += len;
                }
                if let Some(frag) = &v6.fragment {
                    out[at] = lro_core::wire::protocol::GRE;
                    out[at + 1] = 0;
                    put16(
                        out,
                        at + 2,
                        ((frag.offset & 0x1fff) << 3) | u16::from(frag.more),
                    );
                    out[at + 4..at + 8].copy_from_slice(&frag.ident.to_be_bytes());
                    at += 8;
                }
            }
        }
        // GRE.
        let gre = at;
        let f = self.flags_version;
        put16(out, at, f);
        put16(out, at + 2, self.protocol.unwrap_or(inner_proto).0);
        if f & (flags::C | flags::R) != 0 {
            put16(out, at + field::CHECKSUM.start, 0);
            put16(out, at + field::RESERVED1.start, self.reserved1);
        }
        if f & flags::K != 0 {
            let r = field::key(f);
            out[at + r.start..at + r.end].copy_from_slice(&self.key.to_be_bytes());
        }
        if f & flags::S != 0 {
            let r = field::sequence(f);
            out[at + r.start..at + r.end].copy_from_slice(&self.sequence.to_be_bytes());
        }
        if f & flags::R != 0 {
            let r = field::routing(f);
            let sre = self.routing.as_slice();
            out[at + r..at + r + sre.len()].copy_from_slice(sre);
        }
        at += self.gre_len();
        debug_assert!(self.gre_len() >= HEADER_LEN);
        out[at..].copy_from_slice(bytes);
        if f & flags::C != 0 {
            let mut check = !ones_complement_sum(&out[gre..]);
            if self.corrupt_checksum {
                check ^= 0x5a5a;
            }
            put16(out, gre + field::CHECKSUM.start, check);
        }
        Ok(total)
    }
}

/// How [`Tunnel`] numbers outer IPv4 headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OuterId {
    /// One counter per direction of the tunnel, as Linux numbers tunnel packets
    /// (`__ip_select_ident` per source, destination and protocol): the inner flows sharing a
    /// tunnel share the counter.
    Tunnel,
    /// The inner IPv4 header's ID (so per inner flow, as the inner sender numbered it); a
    /// per-direction counter for inner IPv6.
    Inner,
    /// Always this value.
    Fixed(u16),
}

/// A two-way tunnel that wraps a capture's frames: [`GreSpec`] for the direction in which the
/// inner source address sorts first, the same with outer addresses and MACs swapped for the
/// other; outer IPv4 IDs as [`OuterId`] says; with S, a sequence number per direction.
///
/// ```
/// use lro_core::testing::{FrameSpec, TCP_ACK};
/// use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
///
/// let mut tunnel = Tunnel::new(GreSpec::ipv4().key(9), OuterId::Tunnel);
/// let mut buf = [0u8; 128];
/// let mut out = [0u8; 256];
/// let n = FrameSpec::ipv4_tcp(1, 2).flags(TCP_ACK).write(&mut buf).unwrap();
/// let a = tunnel.wrap(InnerFrame::Ethernet(&buf[..n]), &mut out).unwrap();
/// assert_eq!(&out[14 + 12..14 + 20], &[198, 18, 0, 1, 198, 18, 0, 2]); // outer addresses
/// assert_eq!(a, 14 + 20 + 8 + n - 14);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    /// The outer layers of the forward direction.
    pub spec: GreSpec,
    /// How outer IPv4 IDs are chosen.
    pub outer_id: OuterId,
    next_id: [u16; 2],
    next_seq: [u32; 2],
}

impl Tunnel {
    /// A tunnel whose forward direction is `spec`.
    pub const fn new(spec: GreSpec, outer_id: OuterId) -> Self {
        Self {
            spec,
            outer_id,
            next_id: [0; 2],
            next_seq: [0; 2],
        }
    }

    /// Wraps `inner` into `out` in its direction of the tunnel; returns the length.
    ///
    /// # Errors
    /// As [`GreSpec::write`].
    pub fn wrap(&mut self, inner: InnerFrame<'_>, out: &mut [u8]) -> Result<usize, WrapError> {
        let (l3, bytes) = match inner {
            InnerFrame::Ethernet(b) => {
                let mut at = 12;
                while matches!(b.get(at..at + 2), Some([0x81, 0x00] | [0x88, 0xa8])) {
                    at += 4;
                }
                (at + 2, b)
            }
            InnerFrame::Ip(b) => (0, b),
        };
        let ip = bytes.get(l3..).unwrap_or(&[]);
        let (reverse, inner_id) = match ip.first().map(|v| v >> 4) {
            Some(4) if ip.len() >= 20 => (
                ip[12..16] > ip[16..20],
                Some(u16::from_be_bytes([ip[4], ip[5]])),
            ),
            Some(6) if ip.len() >= 40 => (ip[8..24] > ip[24..40], None),
            _ => return Err(WrapError::NotIp),
        };
        let dir = usize::from(reverse);
        let mut spec = self.spec;
        if reverse {
            if let LinkSpec::Ethernet(eth) = &mut spec.link {
                core::mem::swap(&mut eth.src, &mut eth.dst);
            }
            match &mut spec.ip {
                IpSpec::V4(v4) => core::mem::swap(&mut v4.src, &mut v4.dst),
                IpSpec::V6(v6) => core::mem::swap(&mut v6.src, &mut v6.dst),
            }
        }
        let id = match (self.outer_id, inner_id) {
            (OuterId::Fixed(v), _) => v,
            (OuterId::Inner, Some(v)) => v,
            _ => self.next_id[dir],
        };
        spec = spec.ip_id(id);
        spec.sequence = self.next_seq[dir];
        let n = spec.write(inner, out)?;
        self.next_id[dir] = self.next_id[dir].wrapping_add(1);
        self.next_seq[dir] = self.next_seq[dir].wrapping_add(1);
        Ok(n)
    }
}

fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Header;
    use lro_core::testing::{FrameSpec, TCP_ACK};

    extern crate std;
    use std::vec;
    use std::vec::Vec;

    fn inner(payload: &[u8]) -> Vec<u8> {
        let spec = FrameSpec::ipv4_tcp(1, 2)
            .flags(TCP_ACK)
            .payload(payload)
            .padding(&[0, 0]);
        let mut b = vec![0u8; spec.len()];
        spec.write(&mut b).unwrap();
        b
    }

    fn wrap(spec: &GreSpec, f: InnerFrame<'_>) -> Vec<u8> {
        let n = spec.wrapped_len(f).unwrap();
        let mut b = vec![0u8; n];
        assert_eq!(spec.write(f, &mut b), Ok(n));
        if n > 0 {
            assert_eq!(
                spec.write(f, &mut vec![0u8; n - 1]),
                Err(WrapError::BufferTooSmall { needed: n })
            );
        }
        b
    }

    /// etherparse reads the outer layers as we wrote them, GRE as our view reads it, and the
    /// inner datagram is the original one.
    #[test]
    fn outer_layers_as_etherparse_reads_them() {
        let frame = inner(&[5u8; 333]);
        for spec in [
            GreSpec::ipv4(),
            GreSpec::ipv4().checksum().key(7),
            GreSpec::ipv6()
                .key(1)
                .sequence(99)
                .vlan(0x88a8, 1)
                .vlan(0x8100, 2),
            GreSpec::ipv6().checksum().raw_ip(),
            GreSpec::ipv4().checksum().key(0x00ab_cd01).teb(),
            GreSpec::ipv4().key(9).ipoib(0x0102),
            GreSpec::ipv6().checksum().ipoib(0),
        ] {
            let b = wrap(&spec, InnerFrame::Ethernet(&frame));
            let p = match spec.link {
                LinkSpec::Ethernet(_) => etherparse::SlicedPacket::from_ethernet(&b),
                link => etherparse::SlicedPacket::from_ip(&b[link.header_len()..]),
            }
            .unwrap();
            if let LinkSpec::Ipoib { reserved } = spec.link {
                let v6 = matches!(spec.ip, IpSpec::V6(_));
                let et: [u8; 2] = if v6 { [0x86, 0xdd] } else { [0x08, 0x00] };
                assert_eq!((&b[..2], &b[2..4]), (&et[..], &reserved.to_be_bytes()[..]));
            }
            let (gre_bytes, ok) = match p.net.unwrap() {
                etherparse::NetSlice::Ipv4(v4) => {
                    assert_eq!(v4.header().protocol(), etherparse::IpNumber::GRE);
                    let h = v4.header().to_header();
                    assert_eq!(h.header_checksum, h.calc_header_checksum());
                    (v4.payload().payload, true)
                }
                etherparse::NetSlice::Ipv6(v6) => (v6.payload().payload, true),
                _ => panic!("not IP"),
            };
            assert!(ok);
            let h = Header::new_checked(gre_bytes).unwrap();
            assert_eq!(h.header_len(), spec.gre_len());
            assert_eq!(h.key(), spec.key_present().then_some(spec.key));
            if spec.flags_version & flags::C != 0 {
                assert_eq!(h.verify_checksum(h.payload()), Some(true));
            }
            let carried = h.payload();
            if spec.teb {
                assert_eq!(h.protocol(), Protocol::TEB);
                assert_eq!(
                    carried,
                    &frame[..frame.len() - 2],
                    "the frame without padding"
                );
            } else {
                assert_eq!(h.protocol(), Protocol::IPV4);
                assert_eq!(carried, &frame[14..frame.len() - 2], "the datagram");
            }
        }
    }

    #[test]
    fn corrupt_checksum_and_errors() {
        let frame = inner(&[1u8; 10]);
        let mut spec = GreSpec::ipv4().checksum();
        spec.corrupt_checksum = true;
        let b = wrap(&spec, InnerFrame::Ethernet(&frame));
        let h = Header::new_checked(&b[34..]).unwrap();
        assert_eq!(h.verify_checksum(h.payload()), Some(false));
        assert_eq!(
            GreSpec::ipv4()
                .teb()
                .wrapped_len(InnerFrame::Ip(&frame[14..])),
            Err(WrapError::NeedsEthernet)
        );
        assert_eq!(
            GreSpec::ipv4().wrapped_len(InnerFrame::Ethernet(&[0u8; 40])),
            Err(WrapError::NotIp)
        );
        let big = vec![0x45u8; 65530];
        let mut d = big.clone();
        d[2..4].copy_from_slice(&65530u16.to_be_bytes());
        assert_eq!(
            GreSpec::ipv4().write(InnerFrame::Ip(&d), &mut vec![0u8; 70000]),
            Err(WrapError::TooLong)
        );
    }

    #[test]
    fn wrapped_len_refuses_what_write_refuses() {
        // A datagram that fits its own length field but not once wrapped: `wrapped_len`
        // ("as `write`, but for the buffer") says so instead of sizing a buffer `write`
        // will then refuse.
        let mut d = vec![0x45u8; 65530];
        d[2..4].copy_from_slice(&65530u16.to_be_bytes());
        for spec in [GreSpec::ipv4(), GreSpec::ipv6().checksum().key(1)] {
            assert_eq!(
                spec.write(InnerFrame::Ip(&d), &mut vec![0u8; 70000]),
                Err(WrapError::TooLong)
            );
            assert_eq!(
                spec.wrapped_len(InnerFrame::Ip(&d)),
                Err(WrapError::TooLong),
                "{spec:?}"
            );
        }
        // Just within: both agree on the length.
        let n = 65535 - 20 - 4;
        let mut d = vec![0x45u8; n];
        d[2..4].copy_from_slice(&(n as u16).to_be_bytes());
        let len = GreSpec::ipv4().wrapped_len(InnerFrame::Ip(&d)).unwrap();
        assert_eq!(
            GreSpec::ipv4().write(InnerFrame::Ip(&d), &mut vec![0u8; len]),
            Ok(len)
        );
    }

    #[test]
    fn routing_field_is_written() {
        let frame = inner(&[1u8; 10]);
        let mut spec = GreSpec::ipv4();
        spec.flags_version = flags::R;
        spec.routing = Bytes::from_slice(&[0x08, 0x00, 0x00, 0x04, 1, 2, 3, 4, 0, 0, 0, 0]);
        let b = wrap(&spec, InnerFrame::Ethernet(&frame));
        let h = Header::new_checked(&b[34..]).unwrap();
        assert_eq!(h.header_len(), 4 + 4 + 12);
        assert_eq!(h.payload(), &frame[14..frame.len() - 2]);
    }

    impl GreSpec {
        fn key_present(&self) -> bool {
            self.flags_version & flags::K != 0
        }
    }
}
