//! The GRE header (RFC 2784, RFC 2890; the RFC 1701 fields it replaced, so a frame that still
//! carries them is measured right): a view over bytes with a field table, in smoltcp's style.
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-----+---------+-----+-------------------------------+
//! |C|R|K|S|s|Recur|  Flags  | Ver |         Protocol Type         |
//! +-+-+-+-+-+-----+---------+-----+-------------------------------+
//! |      Checksum (optional)      |  Reserved1 / Offset (optional) |   C or R
//! +-------------------------------+-------------------------------+
//! |                         Key (optional)                        |   K
//! +---------------------------------------------------------------+
//! |                   Sequence Number (optional)                  |   S
//! +---------------------------------------------------------------+
//! |                    Routing (optional, RFC 1701)               |   R: SREs, a null SRE last
//! +---------------------------------------------------------------+
//! ```
//!
//! RFC 2784 keeps C and the version; RFC 2890 adds K and S in bits 2 and 3, with the optional
//! fields in the order C (checksum and Reserved1), K, S. RFC 1701's R, s and Recur bits must be
//! zero in RFC 2784 senders; a frame with any of them is still measured (the checksum/offset
//! word is present when C *or* R is set, the Source Route Entries are walked to the null SRE)
//! so that what follows it can be located.
//!
//! # Panic contract
//! Once [`Header::check_len`] (or [`Header::new_checked`]) returned `Ok`, no accessor panics.
//! [`Header::new_unchecked`] is for bytes already checked, or for writing; its accessors of
//! optional fields return `None` (and setters do nothing) where the buffer is too short.

use core::fmt;

use lro_core::wire::{be16, be32, write_be16, write_be32, Field};

/// Byte ranges of the GRE header.
pub mod field {
    use super::Field;
    /// Flags (C, R, K, S, s, Recur, reserved) and version.
    pub const FLAGS_VERSION: Field = 0..2;
    /// Protocol type of the payload: an EtherType (RFC 2784 section 2.4).
    pub const PROTOCOL: Field = 2..4;
    /// Checksum (present when C or R is set; valid only with C).
    pub const CHECKSUM: Field = 4..6;
    /// Reserved1 (RFC 2784), the routing offset in RFC 1701 (present with the checksum).
    pub const RESERVED1: Field = 6..8;

    /// Where the key is, given the flags word: after the checksum word when that is present
    /// (RFC 2890 section 2: C, then K, then S).
    pub const fn key(flags: u16) -> Field {
        let at = super::HEADER_LEN + super::checksum_word_len(flags);
        at..at + 4
    }

    /// Where the sequence number is, given the flags word.
    pub const fn sequence(flags: u16) -> Field {
        let k = key(flags);
        let at = if flags & super::flags::K != 0 {
            k.end
        } else {
            k.start
        };
        at..at + 4
    }

    /// Where the RFC 1701 routing field starts, given the flags word.
    pub const fn routing(flags: u16) -> usize {
        let s = sequence(flags);
        if flags & super::flags::S != 0 {
            s.end
        } else {
            s.start
        }
    }
}

/// Bits of the flags-and-version word ([`field::FLAGS_VERSION`]).
pub mod flags {
    /// Checksum present (RFC 2784).
    pub const C: u16 = 0x8000;
    /// Routing present (RFC 1701; obsolete).
    pub const R: u16 = 0x4000;
    /// Key present (RFC 2890).
    pub const K: u16 = 0x2000;
    /// Sequence number present (RFC 2890).
    pub const S: u16 = 0x1000;
    /// Strict source route (RFC 1701; obsolete).
    pub const STRICT: u16 = 0x0800;
    /// Recursion control (RFC 1701; obsolete).
    pub const RECUR: u16 = 0x0700;
    /// Reserved flag bits (must be zero).
    pub const RESERVED: u16 = 0x00f8;
    /// The version number.
    pub const VERSION: u16 = 0x0007;
    /// The flags a header may carry and still be merged (Linux `gre_gro_receive`:
    /// `(greh->flags & ~(GRE_KEY | GRE_CSUM)) != 0` flushes): C and K, version 0.
    pub const MERGEABLE: u16 = C | K;
}

/// Length of the fixed part of the header (flags, version, protocol).
pub const HEADER_LEN: usize = field::PROTOCOL.end;

/// The longest RFC 2890 header: base, checksum word, key, sequence number.
pub const MAX_RFC2890_LEN: usize = HEADER_LEN + 12;

/// The longest header [`Header::check_len`] accepts, RFC 1701 routing included: a routing
/// field longer than this is refused ([`Error::Routing`]).
pub const MAX_LEN: usize = 128;

/// Length of the checksum word given the flags (RFC 1701: present when C or R is set).
const fn checksum_word_len(flags: u16) -> usize {
    if flags & (flags::C | flags::R) != 0 {
        4
    } else {
        0
    }
}

/// The GRE protocol type: an EtherType (RFC 2784 section 2.4). An open newtype with the values
/// GRE carries as associated constants, as etherparse writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Protocol(pub u16);

impl Protocol {
    /// IPv4.
    pub const IPV4: Protocol = Protocol(0x0800);
    /// IPv6.
    pub const IPV6: Protocol = Protocol(0x86dd);
    /// Transparent Ethernet bridging: an Ethernet frame (gretap; NVGRE, RFC 7637).
    pub const TEB: Protocol = Protocol(0x6558);
    /// ERSPAN type II (mirrored frames; never merged).
    pub const ERSPAN_II: Protocol = Protocol(0x88be);
    /// ERSPAN type III.
    pub const ERSPAN_III: Protocol = Protocol(0x22eb);
    /// PPP (PPTP's enhanced GRE, version 1).
    pub const PPP: Protocol = Protocol(0x880b);
    /// WCCP redirection (Cisco).
    pub const WCCP: Protocol = Protocol(0x883e);
}

impl From<u16> for Protocol {
    fn from(v: u16) -> Self {
        Protocol(v)
    }
}

impl From<Protocol> for u16 {
    fn from(p: Protocol) -> Self {
        p.0
    }
}

/// Why bytes are not a GRE header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The bytes end before the header does.
    Truncated {
        /// Bytes the header needs (as far as it could be measured).
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// An RFC 1701 routing field without its null Source Route Entry within [`MAX_LEN`] bytes.
    Routing,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated { needed, available } => write!(
                f,
                "truncated GRE header: {needed} bytes needed, {available} available"
            ),
            Error::Routing => write!(
                f,
                "GRE routing field without its last (null) entry within {MAX_LEN} bytes"
            ),
        }
    }
}

impl core::error::Error for Error {}

/// A GRE header at the start of `buffer` (and the payload after it).
///
/// ```
/// use lro_gre::wire::{Header, Protocol};
/// // C and K set: checksum word, then the key (RFC 2890's order), IPv4 inside.
/// let bytes = [0xa0, 0x00, 0x08, 0x00, 0x12, 0x34, 0, 0, 0, 0, 0, 42];
/// let h = Header::new_checked(&bytes[..]).unwrap();
/// assert_eq!(h.protocol(), Protocol::IPV4);
/// assert_eq!(h.checksum(), Some(0x1234));
/// assert_eq!(h.key(), Some(42));
/// assert_eq!(h.header_len(), 12);
/// assert!(Header::new_checked(&bytes[..11]).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// A view without checking the length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// A view whose header (every optional field its flags announce) fits the buffer.
    ///
    /// # Errors
    /// See [`Header::check_len`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let h = Self::new_unchecked(buffer);
        h.check_len()?;
        Ok(h)
    }

    /// Checks that the buffer holds the whole header: the fixed part, the optional fields the
    /// flags announce and, with R, the Source Route Entries up to the null one.
    ///
    /// # Errors
    /// [`Error::Truncated`] when the buffer ends first; [`Error::Routing`] for a routing field
    /// longer than [`MAX_LEN`] allows.
    pub fn check_len(&self) -> Result<(), Error> {
        self.measure().map(|_| ())
    }

    /// The header's length, walking the routing field if there is one.
    fn measure(&self) -> Result<usize, Error> {
        let b = self.buffer.as_ref();
        let truncated = |needed: usize| Error::Truncated {
            needed,
            available: b.len(),
        };
        if b.len() < HEADER_LEN {
            return Err(truncated(HEADER_LEN));
        }
        let f = self.flags_version();
        let mut len = field::routing(f);
        if f & flags::R != 0 {
            // Source Route Entries: address family (2), SRE offset (1), SRE length (1), the
            // routing information; the list ends with address family 0 and length 0.
            loop {
                if len + 4 > MAX_LEN {
                    return Err(Error::Routing);
                }
                let sre = b.get(len..len + 4).ok_or(truncated(len + 4))?;
                let (family, length) = (u16::from_be_bytes([sre[0], sre[1]]), sre[3]);
                len += 4 + usize::from(length);
                if family == 0 && length == 0 {
                    // So the walk ends within MAX_LEN: the check above let this null entry
                    // begin at most 4 bytes before MAX_LEN, and it is 4 bytes long.
                    break;
                }
            }
        }
        if b.len() < len {
            return Err(truncated(len));
        }
        Ok(len)
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The flags-and-version word (see [`flags`]).
    #[inline]
    pub fn flags_version(&self) -> u16 {
        be16(self.buffer.as_ref(), field::FLAGS_VERSION.start)
    }

    /// The version number (0 for RFC 2784/2890 GRE, 1 for PPTP's enhanced GRE).
    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags_version() & flags::VERSION) as u8
    }

    /// C: the checksum is present and valid.
    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.flags_version() & flags::C != 0
    }

    /// K: the key is present.
    #[inline]
    pub fn key_present(&self) -> bool {
        self.flags_version() & flags::K != 0
    }

    /// S: the sequence number is present.
    #[inline]
    pub fn sequence_present(&self) -> bool {
        self.flags_version() & flags::S != 0
    }

    /// R: the RFC 1701 routing field is present.
    #[inline]
    pub fn routing_present(&self) -> bool {
        self.flags_version() & flags::R != 0
    }

    /// The protocol type of the payload.
    #[inline]
    pub fn protocol(&self) -> Protocol {
        Protocol(be16(self.buffer.as_ref(), field::PROTOCOL.start))
    }

    /// The checksum field, when C is set.
    pub fn checksum(&self) -> Option<u16> {
        let b = self.buffer.as_ref();
        (self.checksum_present() && b.len() >= field::CHECKSUM.end)
            .then(|| be16(b, field::CHECKSUM.start))
    }

    /// Reserved1 (the RFC 1701 offset), when the checksum word is present.
    pub fn reserved1(&self) -> Option<u16> {
        let b = self.buffer.as_ref();
        (checksum_word_len(self.flags_version()) != 0 && b.len() >= field::RESERVED1.end)
            .then(|| be16(b, field::RESERVED1.start))
    }

    /// The key, when K is set (at its RFC 2890 place: after the checksum word, if any).
    pub fn key(&self) -> Option<u32> {
        let f = self.flags_version();
        let r = field::key(f);
        let b = self.buffer.as_ref();
        (f & flags::K != 0 && b.len() >= r.end).then(|| be32(b, r.start))
    }

    /// The sequence number, when S is set.
    pub fn sequence(&self) -> Option<u32> {
        let f = self.flags_version();
        let r = field::sequence(f);
        let b = self.buffer.as_ref();
        (f & flags::S != 0 && b.len() >= r.end).then(|| be32(b, r.start))
    }

    /// NVGRE (RFC 7637 section 3.2): the Virtual Subnet ID, the key's upper 24 bits, when the
    /// header is transparent Ethernet bridging with a key.
    pub fn nvgre_vsid(&self) -> Option<u32> {
        (self.protocol() == Protocol::TEB)
            .then(|| self.key())
            .flatten()
            .map(|k| k >> 8)
    }

    /// NVGRE: the FlowID, the key's low 8 bits (entropy for ECMP; part of the flow identity).
    pub fn nvgre_flow_id(&self) -> Option<u8> {
        (self.protocol() == Protocol::TEB)
            .then(|| self.key())
            .flatten()
            .map(|k| k as u8)
    }

    /// The header's length: 4 bytes, 4 more for each of the checksum word, key and sequence
    /// number, and with R the routing field. Bytes that do not hold the whole header: the
    /// length the flags announce without routing.
    pub fn header_len(&self) -> usize {
        self.measure()
            .unwrap_or_else(|_| field::routing(self.flags_version()))
    }

    /// The bytes after the header (empty when the buffer is shorter than the header).
    pub fn payload(&self) -> &[u8] {
        // Measured, not `header_len`: its fallback for a routing field that cannot be walked
        // stops at the routing field, whose bytes are not payload.
        let b = self.buffer.as_ref();
        self.measure()
            .ok()
            .and_then(|len| b.get(len..))
            .unwrap_or(&[])
    }

    /// Whether the checksum (when C is set) is right over the header and `payload`, the bytes
    /// after it to the end of the outer datagram; `None` without C. Computed in software: the
    /// engine itself verifies it from a CHECKSUM_COMPLETE sum without reading payload.
    pub fn verify_checksum(&self, payload: &[u8]) -> Option<bool> {
        self.checksum()?;
        let b = self.buffer.as_ref();
        let hdr = b.get(..self.header_len()).unwrap_or(b);
        let s = lro_core::csum::add_at_offset(
            lro_core::csum::sum(hdr),
            lro_core::csum::sum(payload),
            hdr.len(),
        );
        Some(lro_core::csum::is_zero(s))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Sets the flags-and-version word.
    pub fn set_flags_version(&mut self, v: u16) {
        write_be16(self.buffer.as_mut(), field::FLAGS_VERSION.start, v);
    }

    /// Sets the protocol type.
    pub fn set_protocol(&mut self, p: Protocol) {
        write_be16(self.buffer.as_mut(), field::PROTOCOL.start, p.0);
    }

    /// Sets the checksum field (when the checksum word is present).
    pub fn set_checksum(&mut self, v: u16) {
        if checksum_word_len(self.flags_version()) != 0 {
            write_be16(self.buffer.as_mut(), field::CHECKSUM.start, v);
        }
    }

    /// Sets Reserved1 (when the checksum word is present).
    pub fn set_reserved1(&mut self, v: u16) {
        if checksum_word_len(self.flags_version()) != 0 {
            write_be16(self.buffer.as_mut(), field::RESERVED1.start, v);
        }
    }

    /// Sets the key (when K is set).
    pub fn set_key(&mut self, key: u32) {
        let f = self.flags_version();
        if f & flags::K != 0 {
            write_be32(self.buffer.as_mut(), field::key(f).start, key);
        }
    }

    /// Sets the sequence number (when S is set).
    pub fn set_sequence(&mut self, seq: u32) {
        let f = self.flags_version();
        if f & flags::S != 0 {
            write_be32(self.buffer.as_mut(), field::sequence(f).start, seq);
        }
    }

    /// Writes the checksum (when C is set) from `payload_sum`, the folded ones'-complement sum
    /// of every byte after the header to the end of the outer datagram (RFC 2784 section 2.5:
    /// the sum of the header, checksum field zero, and the payload). No payload byte is read;
    /// after a header of odd length (an RFC 1701 routing field) the payload's sum is added
    /// byte-swapped.
    pub fn fill_checksum(&mut self, payload_sum: u16) {
        if !self.checksum_present() {
            return;
        }
        let len = self.header_len();
        self.set_checksum(0);
        let b = self.buffer.as_ref();
        let hdr = b.get(..len).unwrap_or(b);
        let s = lro_core::csum::add_at_offset(lro_core::csum::sum(hdr), payload_sum, hdr.len());
        self.set_checksum(lro_core::csum::finish(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use std::vec::Vec;

    /// C, K and S with their values (checksum not computed).
    const CKS: [u8; 16] = [
        0xb0, 0x00, 0x65, 0x58, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x00, 0x00, 0x00,
        0x07,
    ];

    #[test]
    fn deconstruct() {
        let h = Header::new_checked(&CKS[..]).unwrap();
        assert!(h.checksum_present() && h.key_present() && h.sequence_present());
        assert!(!h.routing_present());
        assert_eq!(h.version(), 0);
        assert_eq!(h.protocol(), Protocol::TEB);
        assert_eq!(h.checksum(), Some(0xbeef));
        assert_eq!(h.reserved1(), Some(0));
        assert_eq!(h.key(), Some(0x1234));
        assert_eq!(h.sequence(), Some(7));
        assert_eq!(h.header_len(), MAX_RFC2890_LEN);
        assert_eq!(h.nvgre_vsid(), Some(0x12));
        assert_eq!(h.nvgre_flow_id(), Some(0x34));
        assert!(h.payload().is_empty());
    }

    #[test]
    fn each_flag_and_the_version_are_read_from_their_own_bits() {
        // A buffer long enough for every optional field, so an accessor's answer depends on
        // its flag alone.
        let mut b = [0xee_u8; 32];
        for (flag, name) in [
            (flags::C, "C"),
            (flags::R, "R"),
            (flags::K, "K"),
            (flags::S, "S"),
            (0, "none"),
        ] {
            b[..2].copy_from_slice(&flag.to_be_bytes());
            let h = Header::new_unchecked(&b[..]);
            assert_eq!(
                [
                    h.checksum_present(),
                    h.routing_present(),
                    h.key_present(),
                    h.sequence_present(),
                ],
                [flags::C, flags::R, flags::K, flags::S].map(|f| f == flag),
                "{name}"
            );
            assert_eq!(h.key().is_some(), flag == flags::K, "{name}");
            assert_eq!(h.sequence().is_some(), flag == flags::S, "{name}");
        }
        for v in 0..8u16 {
            b[..2].copy_from_slice(&(flags::S | v).to_be_bytes());
            assert_eq!(Header::new_unchecked(&b[..]).version(), v as u8);
        }
    }

    #[test]
    fn field_places_follow_rfc_2890_order() {
        // K alone: the key right after the fixed part.
        assert_eq!(field::key(flags::K), 4..8);
        // C and K: the checksum word first, then the key (not the checksum word, as Linux's
        // `*(__be32 *)(greh + 1)` compares).
        assert_eq!(field::key(flags::C | flags::K), 8..12);
        assert_eq!(field::sequence(flags::S), 4..8);
        assert_eq!(field::sequence(flags::K | flags::S), 8..12);
        assert_eq!(field::sequence(flags::C | flags::K | flags::S), 12..16);
        assert_eq!(field::routing(flags::R), 8);
        let ck = [0xa0, 0x00, 0x08, 0x00, 0xaa, 0xbb, 0, 0, 0, 0, 0, 9];
        let h = Header::new_checked(&ck[..]).unwrap();
        assert_eq!(
            (h.checksum(), h.key(), h.sequence()),
            (Some(0xaabb), Some(9), None)
        );
    }

    #[test]
    fn construct() {
        let mut b = [0u8; 12];
        let mut h = Header::new_unchecked(&mut b[..]);
        h.set_flags_version(flags::K | flags::S);
        h.set_protocol(Protocol::IPV6);
        h.set_key(0xdead_beef);
        h.set_sequence(3);
        h.set_checksum(0xffff); // no checksum word: ignored
        h.set_reserved1(0xffff); // nor its second half
        assert_eq!(b, [0x30, 0, 0x86, 0xdd, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 3]);
    }

    #[test]
    fn truncated() {
        for cut in 0..CKS.len() {
            assert_eq!(
                Header::new_checked(&CKS[..cut]),
                Err(Error::Truncated {
                    needed: if cut < 4 { 4 } else { 16 },
                    available: cut
                })
            );
            // Unchecked accessors of a short buffer say "absent" for a field the buffer does
            // not hold whole (never a value read past its end), and never panic.
            let h = Header::new_unchecked(&CKS[..cut]);
            assert_eq!(h.checksum(), (cut >= 6).then_some(0xbeef), "cut {cut}");
            assert_eq!(h.reserved1(), (cut >= 8).then_some(0), "cut {cut}");
            assert_eq!(h.key(), (cut >= 12).then_some(0x1234), "cut {cut}");
            assert_eq!(h.sequence(), None, "cut {cut}");
            assert!(h.payload().is_empty(), "cut {cut}");
            // Without the flags word the header is the fixed part; with it, what C, K and S
            // announce.
            let announced = if cut < 2 { HEADER_LEN } else { MAX_RFC2890_LEN };
            assert_eq!(h.header_len(), announced, "cut {cut}");
        }
    }

    #[test]
    fn routing_is_walked_to_the_null_entry() {
        // R: checksum/offset word, one SRE of 4 bytes of IPv4 addresses, the null SRE.
        let mut b = [0u8; 4 + 4 + 4 + 4 + 4 + 2];
        b[0] = 0x40;
        b[2..4].copy_from_slice(&[0x08, 0x00]);
        b[8..12].copy_from_slice(&[0x08, 0x00, 0x00, 0x04]);
        b[12..16].copy_from_slice(&[198, 18, 0, 9]);
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(h.header_len(), 20);
        assert_eq!(h.payload().len(), 2);
        assert_eq!(h.checksum(), None, "R without C: the checksum is not valid");
        assert_eq!(h.reserved1(), Some(0));
        // Without the null SRE: it needs the 4 bytes after the first entry.
        assert_eq!(
            Header::new_checked(&b[..18]),
            Err(Error::Truncated {
                needed: 20,
                available: 18
            })
        );
        // An endless list of entries: refused, not walked forever.
        let mut long = [0u8; 4 + 4 + MAX_LEN];
        long[0] = 0x40;
        for sre in long[8..].chunks_exact_mut(4) {
            sre.copy_from_slice(&[0x08, 0x00, 0x00, 0x00]);
        }
        assert_eq!(Header::new_checked(&long[..]), Err(Error::Routing));
    }

    #[test]
    fn checksum_fill_and_verify() {
        let payload = [1u8, 2, 3, 4, 5];
        let mut b = [0u8; 8];
        let mut h = Header::new_unchecked(&mut b[..]);
        h.set_flags_version(flags::C);
        h.set_protocol(Protocol::IPV4);
        h.fill_checksum(lro_core::csum::sum(&payload));
        let filled = b;
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(h.verify_checksum(&payload), Some(true));
        assert_eq!(h.verify_checksum(&payload[..4]), Some(false));
        // Filling again over a stale value gives the same field: the old one is not summed.
        let mut stale = filled;
        stale[4..6].copy_from_slice(&[0xbe, 0xef]);
        Header::new_unchecked(&mut stale[..]).fill_checksum(lro_core::csum::sum(&payload));
        assert_eq!(stale, filled);
        // The field makes header + payload sum to -0.
        let mut all: Vec<u8> = b.to_vec();
        all.extend_from_slice(&payload);
        assert!(lro_core::csum::is_zero(lro_core::csum::sum(&all)));
        let plain = [0u8, 0, 8, 0];
        assert_eq!(
            Header::new_checked(&plain[..])
                .unwrap()
                .verify_checksum(&payload),
            None
        );
    }

    #[test]
    fn checksum_fill_and_verify_agree_for_an_odd_length_header() {
        // C and R with an SRE of one byte: a 17-byte header, so the payload starts at an odd
        // offset and its sum must be added byte-swapped.
        let mut b = [0u8; 17];
        b[0] = 0xc0;
        b[2..4].copy_from_slice(&[0x08, 0x00]);
        b[8..13].copy_from_slice(&[0x00, 0x01, 0x00, 0x01, 0xaa]);
        let payload = [0x12u8, 0x34, 0x56, 0x78];
        let mut h = Header::new_unchecked(&mut b[..]);
        assert_eq!(h.header_len(), 17);
        h.fill_checksum(lro_core::csum::sum(&payload));
        let h = Header::new_checked(&b[..]).unwrap();
        assert_eq!(h.verify_checksum(&payload), Some(true));
        let mut all: Vec<u8> = b.to_vec();
        all.extend_from_slice(&payload);
        assert!(lro_core::csum::is_zero(lro_core::csum::sum(&all)));
    }

    #[test]
    fn protocol_conversions() {
        assert_eq!(Protocol::from(0x0800), Protocol::IPV4);
        assert_eq!(u16::from(Protocol::TEB), 0x6558);
    }
}
