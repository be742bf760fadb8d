#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! `lro-gre`: coalescing GRE-tunnelled TCP *before* decapsulation (Linux `gre_gro_receive`,
//! `gre_gro_complete`: the "net-gre-gro" patch), on lro-core's encapsulation hook.
//!
//! A receive path that terminates GRE tunnels (a gretap or GRE endpoint, a vswitch, a
//! userspace router) sees each tunnelled TCP segment as outer IP + GRE + inner packet. [`Gre`]
//! tells an [`lro_core::Engine`] how to read the GRE header, so consecutive segments of one
//! inner TCP flow in one tunnel are merged as they arrive, and the tunnel code above runs once
//! per 64 KB instead of once per frame. Nothing is allocated; `#![no_std]`.
//!
//! # What merges (Linux `net/ipv4/gre_offload.c`)
//! - GRE version 0 with the checksum (C) and key (K) flags in any combination. A frame with the
//!   sequence flag (S), the routing flag (R), any other RFC 1701 bit or another version is
//!   never merged: it is delivered alone, in order, and counted under [`PassReason::Encap`]
//!   (Linux flushes these: GSO cannot rebuild sequence numbers). Its flags make it another
//!   tunnel, but the inner connection may be the one a held segment belongs to: the held
//!   segments of its inner flow between the same outer addresses go first.
//! - Inner IPv4, IPv6, and transparent Ethernet bridging (protocol `0x6558`: gretap; NVGRE,
//!   RFC 7637, is TEB with the key carrying the virtual subnet and a flow id). Any other
//!   protocol type passes alone as not TCP ([`PassReason::NotTcp`]); a tunnel in a tunnel
//!   as [`PassReason::Encap`].
//! - Outer IPv4 or IPv6 (extension headers as for plain IPv6), behind Ethernet with up to two
//!   VLAN tags, a stripped tag, or raw IP. The engine checks the outer IP header with the same
//!   rules as a plain one (TTL, TOS/traffic class, DF, ID incrementing or fixed, never a
//!   fragment), then the inner TCP rules of the policy: under [`Policy::Lro`] pure ACKs merge
//!   inside the tunnel too.
//! - Two frames are one flow only when the outer addresses (and IPv6 flow label), the GRE flags,
//!   protocol type and key, the inner link header (TEB) and the inner TCP flow are all equal.
//!   The key is read at its RFC 2890 place, after the checksum word when C is set (Linux
//!   compares the word after the fixed header, which with C+K is the checksum).
//!
//! # The GRE checksum
//! With C set the header carries a checksum over itself and everything after it. The engine
//! verifies it before merging: from the NIC's [`RxChecksum::Complete`] sum without reading
//! payload (the sum of the bytes before the GRE header is taken away), in software under
//! [`RxChecksum::None`], or trusts it under [`RxChecksum::Verified`]. A frame whose checksum is
//! wrong is never merged: it passes alone, counted as [`PassReason::BadEncapChecksum`], and
//! nothing is dropped. A coalesced segment gets a new GRE checksum from the sum of its payload
//! pieces, again without re-reading payload ([`Gre`]'s [`Encap::fix`]), along with its outer
//! IP length and header checksum and every inner header.
//!
//! # Example
//!
//! ```
//! use lro_core::{Config, RxChecksum, RxMeta, Segment, Sink};
//! use lro_gre::GreEngine;
//!
//! /// Collects segments as contiguous frames.
//! #[derive(Default)]
//! struct Stack(Vec<Vec<u8>>);
//! impl Sink<Vec<u8>> for Stack {
//!     fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
//!         let mut frame = vec![0; segment.len()];
//!         segment.copy_to(&mut frame).expect("sized to fit");
//!         self.0.push(frame);
//!     }
//! }
//!
//! /// Ethernet / IPv4 198.18.0.1 -> 198.18.0.2 / GRE with key 7 / IPv4 10.0.0.1 -> 10.0.0.2 /
//! /// TCP 40000 -> 5201 carrying 1000 bytes from `seq`. The NIC verified the checksums
//! /// (`RxChecksum::Verified` below), so they are left zero.
//! fn tunnelled(seq: u32, outer_id: u16, inner_id: u16) -> Vec<u8> {
//!     let mut f = vec![0u8; 14 + 20 + 8 + 20 + 20 + 1000];
//!     f[12..14].copy_from_slice(&[0x08, 0x00]);
//!     let ip = |f: &mut [u8], at: usize, proto: u8, id: u16, addrs: [u8; 8]| {
//!         let len = (f.len() - at) as u16;
//!         f[at] = 0x45;
//!         f[at + 2..at + 4].copy_from_slice(&len.to_be_bytes());
//!         f[at + 4..at + 6].copy_from_slice(&id.to_be_bytes());
//!         f[at + 8] = 64;
//!         f[at + 9] = proto;
//!         f[at + 12..at + 20].copy_from_slice(&addrs);
//!     };
//!     ip(&mut f, 14, 47, outer_id, [198, 18, 0, 1, 198, 18, 0, 2]);
//!     // GRE: the K flag, protocol IPv4, key 7.
//!     f[34..42].copy_from_slice(&[0x20, 0x00, 0x08, 0x00, 0, 0, 0, 7]);
//!     ip(&mut f, 42, 6, inner_id, [10, 0, 0, 1, 10, 0, 0, 2]);
//!     f[62..66].copy_from_slice(&[0x9c, 0x40, 0x14, 0x51]); // ports
//!     f[66..70].copy_from_slice(&seq.to_be_bytes());
//!     f[74] = 0x50; // data offset: 20 bytes
//!     f[75] = 0x10; // ACK
//!     f[76] = 0x02; // window
//!     f
//! }
//!
//! let mut engine: GreEngine<Vec<u8>> = GreEngine::new(Config::gro());
//! let mut stack = Stack::default();
//! let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
//! for i in 0..3u16 {
//!     engine.push(tunnelled(1 + 1000 * u32::from(i), 100 + i, 7 + i), &meta, &mut stack);
//! }
//! engine.flush_all(&mut stack);
//!
//! // One frame: the three payloads behind one set of outer, GRE and inner headers.
//! assert_eq!(stack.0.len(), 1);
//! let out = &stack.0[0];
//! assert_eq!(out.len(), 14 + 20 + 8 + 20 + 20 + 3000);
//! assert_eq!(u16::from_be_bytes([out[16], out[17]]), 20 + 8 + 20 + 20 + 3000); // outer length
//! assert_eq!(u16::from_be_bytes([out[44], out[45]]), 20 + 20 + 3000); // inner length
//! let tunnel = engine.stats().tunnel.clone();
//! assert_eq!((tunnel.frames_in, tunnel.frames_merged), (3, 2));
//! ```
//!
//! The segment is the head frame with its headers rewritten in place, followed by the payload of
//! the others (scatter-gather); under [`Policy::Gro`],
//! [`lro_core::gso::resegment_with::<Gre>`](lro_core::gso::resegment_with) gives back the
//! original frames byte for byte.
//!
//! # Modules
//! - [`wire`]: the GRE header's field table and a view over bytes.
//! - `testing` (feature `test-utils`): `testing::GreSpec` wraps frames in GRE with correct
//!   outer lengths and checksums, for tests, fuzz targets and examples.
//!
//! [`PassReason::Encap`]: lro_core::PassReason::Encap
//! [`PassReason::NotTcp`]: lro_core::PassReason::NotTcp
//! [`PassReason::BadEncapChecksum`]: lro_core::PassReason::BadEncapChecksum
//! [`Policy::Lro`]: lro_core::Policy::Lro
//! [`Policy::Gro`]: lro_core::Policy::Gro
//! [`RxChecksum::Complete`]: lro_core::RxChecksum::Complete
//! [`RxChecksum::None`]: lro_core::RxChecksum::None
//! [`RxChecksum::Verified`]: lro_core::RxChecksum::Verified
//! [`Encap::fix`]: lro_core::encap::Encap::fix

pub mod wire;

#[cfg(any(test, feature = "test-utils"))]
#[cfg_attr(docsrs, doc(cfg(feature = "test-utils")))]
pub mod testing;

use core::fmt;

use lro_core::encap::{Encap, EncapFix, EncapHeader, Inner, TunnelKey};
use lro_core::{DefaultSizes, Engine, PassReason};

use wire::{field, flags, Header, Protocol};

/// GRE (IP protocol 47) for [`lro_core::Engine`]: see the [crate documentation](crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gre;

/// An engine that coalesces plain and GRE-tunnelled TCP: [`Engine`] with [`Gre`] as its
/// encapsulation (`F` the frame type, `C` its sizes).
pub type GreEngine<F, C = DefaultSizes> = Engine<F, C, Gre>;

impl Encap for Gre {
    const IP_PROTOCOL: u8 = lro_core::wire::protocol::GRE;
    const MAX_HEADER_LEN: usize = wire::MAX_LEN;
    const NAME: &'static str = "gre";
    type Tunnel = TunnelKey;

    /// Reads a GRE header: its length, what it carries, its identity (flags and version,
    /// protocol type and key: [`TunnelId`]), the checksum's place when C is set, and whether
    /// it may merge at all (only C and K, version 0).
    ///
    /// # Errors
    /// [`PassReason::Malformed`] for a truncated header; [`PassReason::Encap`] for a version
    /// other than 0 (its layout is not RFC 2784's) or an RFC 1701 routing field too long to
    /// walk or of odd length; [`PassReason::NotTcp`] for a protocol type other than IPv4, IPv6
    /// and TEB.
    #[inline]
    fn parse(bytes: &[u8]) -> Result<EncapHeader, PassReason> {
        let Some(base) = bytes.first_chunk::<{ wire::HEADER_LEN }>() else {
            return Err(PassReason::Malformed);
        };
        let f = u16::from_be_bytes([base[0], base[1]]);
        let protocol = Protocol(u16::from_be_bytes([base[2], base[3]]));
        let len = if f & !flags::MERGEABLE == 0 {
            // The common case, straight-line: 4 bytes, 4 more each for C and K.
            let len = field::key(f).start + if f & flags::K != 0 { 4 } else { 0 };
            if bytes.len() < len {
                return Err(PassReason::Malformed);
            }
            len
        } else if f & flags::VERSION != 0 {
            // PPTP's enhanced GRE (version 1, RFC 2637) and unknown versions: never merged.
            return Err(PassReason::Encap);
        } else {
            match Header::new_unchecked(bytes).check_len() {
                // Hostile SRE lengths can make the header odd-sized, which the hook does not
                // allow (`EncapHeader::len` is a multiple of 2): never merged anyway.
                Ok(()) => match Header::new_unchecked(bytes).header_len() {
                    n if n.is_multiple_of(2) => n,
                    _ => return Err(PassReason::Encap),
                },
                Err(wire::Error::Routing) => return Err(PassReason::Encap),
                Err(_) => return Err(PassReason::Malformed),
            }
        };
        let inner = match protocol {
            Protocol::IPV4 => Inner::Ipv4,
            Protocol::IPV6 => Inner::Ipv6,
            Protocol::TEB => Inner::Ethernet,
            _ => return Err(PassReason::NotTcp),
        };
        let key = if f & flags::K != 0 {
            let r = field::key(f);
            u32::from_be_bytes([
                bytes[r.start],
                bytes[r.start + 1],
                bytes[r.start + 2],
                bytes[r.start + 3],
            ])
        } else {
            0
        };
        let id = TunnelId {
            flags_version: f,
            protocol,
            key: (f & flags::K != 0).then_some(key),
        };
        let mut header = EncapHeader::new(len, inner, id.encap_id());
        if f & flags::C != 0 {
            header.checksum = Some(field::CHECKSUM.start);
        }
        if f & !flags::MERGEABLE != 0 {
            // Sequence numbers (GSO could not rebuild them), routing, the other RFC 1701 bits.
            header.mergeable = Err(PassReason::Encap);
        }
        Ok(header)
    }

    /// Every byte but the checksum must be equal. The identity ([`TunnelId`]) already covers
    /// the flags, protocol and key, and so the header's length and layout; what it leaves is
    /// Reserved1 (with C), compared here so that a coalesced segment re-segments into the
    /// original headers. (The sequence number and routing field never reach this: such frames
    /// are never merged.) Called for every frame that joins a segment: two loads, no loop.
    #[inline]
    fn may_merge(held: &[u8], frame: &[u8]) -> bool {
        let at = field::RESERVED1.start;
        let c = held
            .first()
            .is_some_and(|f| u16::from(*f) << 8 & flags::C != 0);
        if c {
            (held.get(at), held.get(at + 1)) == (frame.get(at), frame.get(at + 1))
        } else {
            held.len() == frame.len()
        }
    }

    /// Rewrites the checksum when C is set (RFC 2784 section 2.5), from the sum of what follows
    /// the header: no payload byte is read. Without that sum (never the case through the engine,
    /// which keeps payload sums whenever a header has a checksum) the field is left as it is.
    ///
    /// `header` is exactly the header [`Encap::parse`] measured, so it is summed as it is
    /// ([`Header::fill_checksum`] would measure it again: a routing field has a variable
    /// length).
    #[inline]
    fn fix(header: &mut [u8], fix: &EncapFix) {
        let Some(sum) = fix.payload_sum else { return };
        let mut h = Header::new_unchecked(&mut *header);
        if !h.checksum_present() {
            return;
        }
        h.set_checksum(0);
        let s = lro_core::csum::add(lro_core::csum::sum_header(header), sum);
        Header::new_unchecked(header).set_checksum(lro_core::csum::finish(s));
    }
}

/// The GRE part of a tunnel's identity ([`TunnelKey::encap_id`]): two frames are one flow only
/// when all of it is equal.
///
/// ```
/// use lro_gre::wire::Protocol;
/// use lro_gre::TunnelId;
/// let id = TunnelId { flags_version: 0x2000, protocol: Protocol::IPV4, key: Some(42) };
/// assert_eq!(TunnelId::from_encap_id(id.encap_id()), id);
/// assert_eq!(id.to_string(), "gre key 42");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TunnelId {
    /// The flags-and-version word ([`wire::flags`]).
    pub flags_version: u16,
    /// The protocol type.
    pub protocol: Protocol,
    /// The key, when K is set.
    pub key: Option<u32>,
}

impl TunnelId {
    /// Packs the identity as [`EncapHeader::id`]: flags and version in bits 63..48, the
    /// protocol type in 47..32, the key (zero without K) in 31..0.
    pub const fn encap_id(&self) -> u64 {
        let key = match self.key {
            Some(k) => k,
            None => 0,
        };
        (self.flags_version as u64) << 48 | (self.protocol.0 as u64) << 32 | key as u64
    }

    /// Unpacks [`TunnelId::encap_id`] (the key is `None` when K is not set).
    pub const fn from_encap_id(id: u64) -> Self {
        let flags_version = (id >> 48) as u16;
        Self {
            flags_version,
            protocol: Protocol((id >> 32) as u16),
            key: if flags_version & flags::K != 0 {
                Some(id as u32)
            } else {
                None
            },
        }
    }

    /// The identity of a tunnel key the engine reports ([`lro_core::SegmentInfo::tunnel`]).
    pub const fn of(tunnel: &TunnelKey) -> Self {
        Self::from_encap_id(tunnel.encap_id)
    }
}

/// `gre`, then `csum`, `seq` and `routing` for C, S and R, `key N` (with `vsid N flow N` for
/// NVGRE-style TEB), `teb` or the protocol type when not IPv4 or IPv6, and the version when not
/// 0.
impl fmt::Display for TunnelId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fl = self.flags_version;
        f.write_str("gre")?;
        if fl & flags::C != 0 {
            f.write_str(" csum")?;
        }
        if fl & flags::S != 0 {
            f.write_str(" seq")?;
        }
        if fl & flags::R != 0 {
            f.write_str(" routing")?;
        }
        match (self.key, self.protocol) {
            (Some(k), Protocol::TEB) => write!(f, " key {k} (vsid {} flow {})", k >> 8, k & 0xff)?,
            (Some(k), _) => write!(f, " key {k}")?,
            (None, _) => {}
        }
        match self.protocol {
            Protocol::IPV4 | Protocol::IPV6 => {}
            Protocol::TEB => f.write_str(" teb")?,
            Protocol(p) => write!(f, " proto {p:#06x}")?,
        }
        if fl & flags::VERSION != 0 {
            write!(f, " v{}", fl & flags::VERSION)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(b: &[u8]) -> Result<EncapHeader, PassReason> {
        Gre::parse(b)
    }

    #[test]
    fn every_flag_combination() {
        // [flags, protocol], then optional words.
        let plain = [0x00, 0x00, 0x08, 0x00];
        let h = hdr(&plain).unwrap();
        assert_eq!(
            (h.len, h.inner, h.checksum, h.mergeable),
            (4, Inner::Ipv4, None, Ok(()))
        );
        let k = [0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 5];
        let h = hdr(&k).unwrap();
        assert_eq!((h.len, h.inner, h.checksum), (8, Inner::Ipv6, None));
        assert_eq!(TunnelId::from_encap_id(h.id).key, Some(5));
        let c = [0x80, 0x00, 0x65, 0x58, 0xab, 0xcd, 0, 0];
        let h = hdr(&c).unwrap();
        assert_eq!((h.len, h.inner, h.checksum), (8, Inner::Ethernet, Some(4)));
        let ck = [0xa0, 0x00, 0x08, 0x00, 0xab, 0xcd, 0, 0, 0, 0, 0, 9];
        let h = hdr(&ck).unwrap();
        assert_eq!((h.len, h.checksum, h.mergeable), (12, Some(4), Ok(())));
        assert_eq!(
            TunnelId::from_encap_id(h.id).key,
            Some(9),
            "the key, not the checksum word"
        );
        let s = [0x10, 0x00, 0x08, 0x00, 0, 0, 0, 1];
        let h = hdr(&s).unwrap();
        assert_eq!((h.len, h.mergeable), (8, Err(PassReason::Encap)));
        let cks = [0xb0, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1];
        assert_eq!(hdr(&cks).unwrap().len, 16);
        assert_eq!(hdr(&cks).unwrap().mergeable, Err(PassReason::Encap));
    }

    #[test]
    fn never_merged_bits_and_versions() {
        for bit in [flags::STRICT, 0x0100, 0x0400, 0x0008, 0x0080] {
            let b = [(bit >> 8) as u8, bit as u8, 0x08, 0x00];
            assert_eq!(
                hdr(&b).unwrap().mergeable,
                Err(PassReason::Encap),
                "{bit:#x}"
            );
        }
        for v in 1..8u8 {
            assert_eq!(
                hdr(&[0x20, v, 0x88, 0x0b, 0, 0, 0, 0]),
                Err(PassReason::Encap)
            );
        }
        // Routing: measured to the null SRE, never merged.
        let r = [0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(hdr(&r).unwrap().len, 12);
        assert_eq!(hdr(&r).unwrap().mergeable, Err(PassReason::Encap));
        assert_eq!(hdr(&r[..10]), Err(PassReason::Malformed));
    }

    #[test]
    fn odd_length_routing_is_not_measured_as_a_header() {
        // R with an SRE of one byte, then the null SRE: 17 bytes, not a multiple of 2.
        let r = [
            0x40, 0x00, 0x08, 0x00, 0, 0, 0, 0, 0x00, 0x01, 0x00, 0x01, 0xaa, 0, 0, 0, 0,
        ];
        assert_eq!(hdr(&r), Err(PassReason::Encap));
    }

    #[test]
    fn truncated_and_foreign() {
        for cut in 0..12 {
            let ck = [0xa0, 0x00, 0x08, 0x00, 0xab, 0xcd, 0, 0, 0, 0, 0, 9];
            assert_eq!(hdr(&ck[..cut]), Err(PassReason::Malformed));
        }
        for p in [
            Protocol::ERSPAN_II,
            Protocol::ERSPAN_III,
            Protocol::WCCP,
            Protocol(0),
        ] {
            let b = [0, 0, (p.0 >> 8) as u8, p.0 as u8];
            assert_eq!(hdr(&b), Err(PassReason::NotTcp), "{p:?}");
        }
    }

    #[test]
    fn identity_covers_flags_protocol_and_key() {
        let ids = [
            [0x20, 0x00, 0x08, 0x00, 0, 0, 0, 5],
            [0x20, 0x00, 0x08, 0x00, 0, 0, 0, 6],
            [0x20, 0x00, 0x86, 0xdd, 0, 0, 0, 5],
            [0x20, 0x00, 0x65, 0x58, 0, 0, 0, 5],
            [0x80, 0x00, 0x08, 0x00, 0, 0, 0, 5],
            [0x00, 0x00, 0x08, 0x00, 0, 0, 0, 5],
        ];
        for (i, a) in ids.iter().enumerate() {
            for (j, b) in ids.iter().enumerate() {
                assert_eq!(hdr(a).unwrap().id == hdr(b).unwrap().id, i == j, "{i} {j}");
            }
        }
        // No key and key 0 are different tunnels.
        assert_ne!(
            hdr(&[0x00, 0x00, 0x08, 0x00]).unwrap().id,
            hdr(&[0x20, 0x00, 0x08, 0x00, 0, 0, 0, 0]).unwrap().id
        );
    }

    #[test]
    fn may_merge_ignores_only_the_checksum() {
        let a = [0xa0, 0x00, 0x08, 0x00, 0x11, 0x11, 0, 0, 0, 0, 0, 9];
        let mut b = a;
        b[4] = 0x22;
        assert!(Gre::may_merge(&a, &b));
        let mut c = a;
        c[7] = 1; // Reserved1
        assert!(!Gre::may_merge(&a, &c));
        let k = [0x20, 0x00, 0x08, 0x00, 0, 0, 0, 9];
        assert!(Gre::may_merge(&k, &k));
        assert!(!Gre::may_merge(&k, &a));
        // Both bytes of Reserved1 are compared, each with its own: equal ones merge.
        let mut r = a;
        r[6..8].copy_from_slice(&[1, 2]);
        assert!(Gre::may_merge(&r, &r));
        // C alone: the same.
        let c_only = [0x80, 0x00, 0x08, 0x00, 0x11, 0x11, 0, 0];
        let mut d = c_only;
        d[6] = 1;
        assert!(Gre::may_merge(&c_only, &c_only));
        assert!(!Gre::may_merge(&c_only, &d));
    }

    #[test]
    fn display() {
        extern crate std;
        use std::string::ToString;
        let id = |f: u16, p: Protocol, k: Option<u32>| TunnelId {
            flags_version: f,
            protocol: p,
            key: k,
        };
        assert_eq!(id(0, Protocol::IPV4, None).to_string(), "gre");
        assert_eq!(
            id(flags::C | flags::K, Protocol::IPV6, Some(3)).to_string(),
            "gre csum key 3"
        );
        assert_eq!(
            id(flags::K, Protocol::TEB, Some(0x1234_56ff)).to_string(),
            "gre key 305420031 (vsid 1193046 flow 255) teb"
        );
        assert_eq!(
            id(flags::S | 1, Protocol::PPP, None).to_string(),
            "gre seq proto 0x880b v1"
        );
    }
}

// The README's examples, compiled and run with the doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
