//! The IPoIB encapsulation header (RFC 4391 §6): every IPoIB packet starts with it.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |             Type              |           Reserved            |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! | field | bytes | meaning |
//! | --- | --- | --- |
//! | Type | 0..2 | the payload's IEEE EtherType: `0x0800` IPv4, `0x86dd` IPv6, `0x0806` ARP |
//! | Reserved | 2..4 | zero on send, ignored on receipt (RFC 4391 §6) |
//!
//! The field table is lro-core's ([`lro_core::wire::ipoib::field`]), the one its parser
//! reads for [`lro_core::LinkKind::Ipoib`], so the two cannot disagree.
//!
//! ```
//! use drivers_ipoib::wire::encap::{Packet, Repr};
//! use drivers_ipoib::wire::EtherType;
//!
//! let mut frame = [0u8; 4 + 20];
//! Repr { ether_type: EtherType::IPV4 }.emit(&mut Packet::new_unchecked(&mut frame[..]));
//! assert_eq!(&frame[..4], &[0x08, 0x00, 0, 0]);
//! let packet = Packet::new_checked(&frame[..])?;
//! assert_eq!(Repr::parse(&packet).ether_type, EtherType::IPV4);
//! assert_eq!(packet.payload().len(), 20);
//! # Ok::<(), drivers_ipoib::wire::Error>(())
//! ```

use core::fmt;

pub use lro_core::wire::ipoib::{field, HEADER_LEN};

use super::{Error, Layer};

/// The payload type of an IPoIB packet: an IEEE EtherType (an open set; the constants are the
/// ones IPoIB carries).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4 (RFC 4391 §6).
    pub const IPV4: Self = Self(0x0800);
    /// IPv6 (RFC 4391 §6).
    pub const IPV6: Self = Self(0x86dd);
    /// ARP (RFC 4391 §9: ARP over IPoIB, hardware type 32).
    pub const ARP: Self = Self(0x0806);
    /// Reverse ARP.
    pub const RARP: Self = Self(0x8035);

    /// IPv4 or IPv6: what a TCP/IP stack (and lro-core) takes.
    pub const fn is_ip(self) -> bool {
        self.0 == Self::IPV4.0 || self.0 == Self::IPV6.0
    }

    /// The EtherType for an IP packet of this version (4 or 6), from its first byte.
    pub const fn for_ip_packet(packet: &[u8]) -> Option<Self> {
        match packet.first() {
            Some(b) if *b >> 4 == 4 => Some(Self::IPV4),
            Some(b) if *b >> 4 == 6 => Some(Self::IPV6),
            _ => None,
        }
    }
}

impl From<u16> for EtherType {
    fn from(v: u16) -> Self {
        Self(v)
    }
}

impl From<EtherType> for u16 {
    fn from(t: EtherType) -> u16 {
        t.0
    }
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::IPV4 => f.write_str("IPv4"),
            Self::IPV6 => f.write_str("IPv6"),
            Self::ARP => f.write_str("ARP"),
            Self::RARP => f.write_str("RARP"),
            Self(v) => write!(f, "EtherType({v:#06x})"),
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A view of an IPoIB packet: the encapsulation header and what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks; accessors may panic on a buffer shorter than [`HEADER_LEN`].
    /// For buffers the caller sized (emission).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// A view of `buffer` after [`Packet::check_len`].
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buffer` is shorter than the header.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Whether the buffer holds the whole header; once it does, no accessor panics.
    ///
    /// # Errors
    /// [`Error::Truncated`] when it does not.
    pub fn check_len(&self) -> Result<(), Error> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(Error::truncated(Layer::Encap, HEADER_LEN, got));
        }
        Ok(())
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The payload type.
    #[inline]
    pub fn ether_type(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([b[0], b[1]]))
    }

    /// The reserved field (zero from a conforming sender, ignored on receipt).
    #[inline]
    pub fn reserved(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::RESERVED];
        u16::from_be_bytes([b[0], b[1]])
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The bytes after the header (the IP packet or ARP message), borrowed for `'a`.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the payload type.
    #[inline]
    pub fn set_ether_type(&mut self, t: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&t.0.to_be_bytes());
    }

    /// Sets the reserved field.
    #[inline]
    pub fn set_reserved(&mut self, v: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&v.to_be_bytes());
    }

    /// The bytes after the header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The header's content: all a receiver uses of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// The payload type.
    pub ether_type: EtherType,
}

impl Repr {
    /// Reads a checked packet (the reserved field is ignored, as RFC 4391 §6 says).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        Self {
            ether_type: packet.ether_type(),
        }
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (reserved zero). Never panics on a buffer of at least
    /// [`Repr::buffer_len`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_ether_type(self.ether_type);
        packet.set_reserved(0);
    }
}

/// Writes an IPoIB packet carrying `ip` (IPv4 or IPv6, told by its version nibble) into `out`;
/// returns its length.
///
/// # Errors
/// [`Error::NotIp`] when `ip` is empty or its version is neither 4 nor 6;
/// [`Error::Truncated`] when `out` is shorter than `4 + ip.len()`.
pub fn frame_ip(ip: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    let ether_type = EtherType::for_ip_packet(ip).ok_or(Error::NotIp)?;
    let len = HEADER_LEN + ip.len();
    let got = out.len();
    let out = out
        .get_mut(..len)
        .ok_or(Error::truncated(Layer::Encap, len, got))?;
    let mut packet = Packet::new_unchecked(&mut *out);
    Repr { ether_type }.emit(&mut packet);
    packet.payload_mut().copy_from_slice(ip);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    static ARP_PACKET: [u8; 8] = [0x08, 0x06, 0x00, 0x00, 0x00, 0x20, 0x08, 0x00];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&ARP_PACKET[..]).unwrap();
        assert_eq!(p.ether_type(), EtherType::ARP);
        assert_eq!(p.reserved(), 0);
        assert_eq!(p.payload(), &[0x00, 0x20, 0x08, 0x00]);
        assert!(!p.ether_type().is_ip());
    }

    #[test]
    fn construct() {
        let mut buf = [0xffu8; 8];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        Repr {
            ether_type: EtherType::ARP,
        }
        .emit(&mut p);
        p.payload_mut().copy_from_slice(&ARP_PACKET[4..]);
        assert_eq!(buf, ARP_PACKET);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&ARP_PACKET[..n]),
                Err(Error::Truncated {
                    layer: Layer::Encap,
                    needed: 4,
                    got: n
                })
            );
        }
        // The header alone is a packet, with an empty payload.
        let p = Packet::new_checked(&ARP_PACKET[..HEADER_LEN]).unwrap();
        assert_eq!(p.payload(), &[] as &[u8]);
    }

    #[test]
    fn reserved_is_ignored_on_receipt() {
        let mut buf = ARP_PACKET;
        buf[2] = 0xab;
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.reserved(), 0xab00);
        assert_eq!(Repr::parse(&p).ether_type, EtherType::ARP);
    }

    #[test]
    fn frames_ip_by_version() {
        let mut out = [0u8; 32];
        assert_eq!(frame_ip(&[0x45, 1, 2], &mut out), Ok(7));
        assert_eq!(&out[..7], &[0x08, 0, 0, 0, 0x45, 1, 2]);
        assert_eq!(frame_ip(&[0x60, 9], &mut out), Ok(6));
        assert_eq!(&out[..2], &[0x86, 0xdd]);
        assert_eq!(frame_ip(&[], &mut out), Err(Error::NotIp));
        assert_eq!(frame_ip(&[0x10], &mut out), Err(Error::NotIp));
        assert_eq!(
            frame_ip(&[0x45; 40], &mut out),
            Err(Error::Truncated {
                layer: Layer::Encap,
                needed: 44,
                got: 32
            })
        );
    }

    #[test]
    fn debug_names() {
        extern crate std;
        use std::format;
        assert_eq!(format!("{:?}", EtherType::IPV6), "IPv6");
        assert_eq!(format!("{}", EtherType(0x1234)), "EtherType(0x1234)");
    }
}
