//! Field tables of the headers the engine reads and rewrites: Ethernet (with VLAN tags), the
//! IPoIB encapsulation header, IPv4, IPv6 (with the extension headers it walks) and TCP.
//!
//! Each module holds a `field` table of byte ranges in smoltcp's style, the header length
//! derived from it, and the protocol constants of that layer. The parser
//! ([`crate::parse`]), the header fix-up at delivery, software segmentation ([`crate::gso`])
//! and the transmit queue ([`crate::tx`]) read and write headers mostly through these tables;
//! a few reads in the parser and header prediction still spell an offset out.
//!
//! # Panic contract
//! The helpers here ([`be16`], [`be32`], [`write_be16`], [`write_be32`]) never panic: a read
//! past the end of the slice gives zero, a write past the end is skipped. Code that must know
//! whether a field exists checks lengths first, as [`crate::parse::parse`] does for every
//! header it accepts (after which every field of those headers is in bounds).

pub mod ethernet;
pub mod ipoib;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;

/// A field: a byte range inside a header.
pub type Field = core::ops::Range<usize>;

/// IP protocol numbers the engine knows (IANA "Assigned Internet Protocol Numbers").
pub mod protocol {
    /// IPv6 Hop-by-Hop options.
    pub const HOPOPTS: u8 = 0;
    /// IPv4 encapsulated in IP (RFC 2003).
    pub const IPIP: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated in IP (RFC 2473).
    pub const IPV6: u8 = 41;
    /// IPv6 Routing header.
    pub const ROUTING: u8 = 43;
    /// IPv6 Fragment header.
    pub const FRAGMENT: u8 = 44;
    /// Generic Routing Encapsulation (RFC 2784).
    pub const GRE: u8 = 47;
    /// IPv6 Destination options.
    pub const DSTOPTS: u8 = 60;
}

/// EtherTypes the engine knows (IEEE "EtherType" registry).
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// 802.1Q customer VLAN tag (TPID).
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service VLAN tag (TPID).
    pub const QINQ: u16 = 0x88a8;
    /// Transparent Ethernet bridging (an Ethernet frame inside GRE: gretap, NVGRE).
    pub const TEB: u16 = 0x6558;
}

/// The big-endian `u16` at `at`, zero when out of bounds.
#[inline(always)]
pub fn be16(b: &[u8], at: usize) -> u16 {
    // `checked_add`: an offset near `usize::MAX` is out of bounds too, not an overflow.
    match at.checked_add(2).and_then(|end| b.get(at..end)) {
        Some(s) => u16::from_be_bytes([s[0], s[1]]),
        None => 0,
    }
}

/// The big-endian `u32` at `at`, zero when out of bounds.
#[inline(always)]
pub fn be32(b: &[u8], at: usize) -> u32 {
    match at.checked_add(4).and_then(|end| b.get(at..end)) {
        Some(s) => u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

/// Writes `v` big-endian at `at` (nothing when out of bounds).
#[inline(always)]
pub fn write_be16(b: &mut [u8], at: usize, v: u16) {
    if let Some(s) = at.checked_add(2).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// Writes `v` big-endian at `at` (nothing when out of bounds).
#[inline(always)]
pub fn write_be32(b: &mut [u8], at: usize, v: u32) {
    if let Some(s) = at.checked_add(4).and_then(|end| b.get_mut(at..end)) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}
