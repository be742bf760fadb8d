//! The capture form of an IPoIB packet: link type `LINKTYPE_IPOIB` (242, `DLT_IPOIB`).
//!
//! tcpdump.org's link-type list describes 242 only as "IP-over-InfiniBand, as specified by
//! RFC 4391 section 6", which is the 4-byte encapsulation header. The captures that exist and
//! both readers put **44 bytes** in front of the IP packet: tcpdump's `print-ipoib.c` skips
//! `IPOIB_HDRLEN` = 44 and reads the EtherType at byte 40; Wireshark's `packet-ipoib.c` reads a
//! 40-byte "GRH pseudo header" for `WTAP_ENCAP_IP_OVER_IB_PCAP` and then the encapsulation
//! header. (The printer is Oracle's: the format is what Solaris' IPoIB driver hands its
//! packet capture. 40 bytes is the size of InfiniBand's Global Route Header, the space a
//! datagram receive buffer reserves in front of the packet.) Checked byte by byte against
//! tcpdump's test capture `ipoib.pcap` and `tshark -V`:
//!
//! | bytes | field | content |
//! | --- | --- | --- |
//! | 0..40 | GRH area | see below |
//! | 40..42 | Type | the payload's EtherType (the encapsulation header, [`super::encap`]) |
//! | 42..44 | Reserved | zero |
//! | 44.. | payload | the IPv4/IPv6 packet or ARP message |
//!
//! The GRH area is read one of two ways, chosen (as Wireshark does) by its first two bytes:
//!
//! - **zero: no valid GRH** (every unicast packet of the test capture). Bytes 20..40 are the
//!   destination's IPoIB hardware address ([`HwAddr`]: flags at 20, QPN at 21..24, GID at
//!   24..40); bytes 0..20 carry nothing defined (the test capture has zeros and four varying
//!   bytes at 16..20).
//! - **non-zero: a Global Route Header**, as Wireshark decodes it: IP version (4 bits), traffic
//!   class (8 bits) and flow label (20 bits) in 0..4, a source QPN at 5..8 (where the IB GRH
//!   has payload length, next header and hop limit), the source GID at 8..24 and the
//!   destination GID at 24..40.
//!
//! The rule is a heuristic and the bytes are not always meaningful: two ARP frames of
//! `ipoib.pcap` have ASCII text (stale buffer contents) in bytes 0..20, so Wireshark shows a
//! "GRH" with a source GID made of letters, while bytes 20..40 of the same frames hold a
//! plausible destination (the broadcast QPN `0xffffff` and a multicast GID). So a reader must
//! accept any 40 bytes there: [`Packet`] never fails on them and offers both readings
//! ([`Packet::dest_addr`], [`Packet::grh`]) besides [`Repr::parse`]'s choice.
//!
//! For lro-core the first [`PSEUDO_LEN`] bytes are hidden: what follows starts with the
//! encapsulation header, the layout of [`lro_core::LinkKind::Ipoib`] (the `lro` tool's
//! `replay`, `explain` and `bench` read this link type so, and write each output segment
//! after its first frame's 40 bytes).
//!
//! ```
//! use drivers_ipoib::wire::capture::{self, Addressing, Packet, Repr};
//! use drivers_ipoib::wire::{EtherType, Gid, HwAddr, Qpn};
//!
//! let dest = HwAddr { flags: 0x80, qpn: Qpn::try_new(0x48)?, gid: Gid::link_local(2) };
//! let repr = Repr { addressing: Addressing::Destination(dest), ether_type: EtherType::IPV4 };
//! let mut record = [0u8; capture::HEADER_LEN + 20];
//! repr.emit(&mut Packet::new_unchecked(&mut record[..]));
//! let packet = Packet::new_checked(&record[..])?;
//! assert_eq!(Repr::parse(&packet), repr);
//! assert_eq!(packet.ipoib_frame().len(), 4 + 20); // what lro-core's LinkKind::Ipoib parses
//! # Ok::<(), drivers_ipoib::wire::Error>(())
//! ```

use super::encap::{self, EtherType};
use super::hwaddr::{self, Gid, HwAddr, Qpn};
use super::{Error, Layer};

/// The link-type number in a pcap file header or a pcapng interface description.
pub const LINKTYPE: u32 = 242;

/// Bytes in front of the encapsulation header: the GRH area.
pub const PSEUDO_LEN: usize = 40;

/// Bytes in front of the IP packet: the GRH area and the encapsulation header.
pub const HEADER_LEN: usize = PSEUDO_LEN + encap::HEADER_LEN;

/// Byte ranges of the capture header.
pub mod field {
    use core::ops::Range;
    /// The GRH area.
    pub const GRH: Range<usize> = 0..40;
    /// GRH reading: IP version (4 bits), traffic class (8), flow label (20).
    pub const VERSION_CLASS_FLOW: Range<usize> = 0..4;
    /// GRH reading: the source QPN (Wireshark's `ipoib.grh.sqpn`).
    pub const SRC_QPN: Range<usize> = 5..8;
    /// GRH reading: the source GID.
    pub const SGID: Range<usize> = 8..24;
    /// GRH reading: the destination GID.
    pub const DGID: Range<usize> = 24..40;
    /// No-GRH reading: the destination hardware address.
    pub const DEST_ADDR: Range<usize> = 20..40;
    /// The encapsulation header.
    pub const ENCAP: Range<usize> = 40..44;
    /// The payload's EtherType.
    pub const ETHERTYPE: Range<usize> = 40..42;
    /// Reserved.
    pub const RESERVED: Range<usize> = 42..44;
}

/// A Global Route Header as Wireshark reads the GRH area.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Grh {
    /// IP version (the top 4 bits; 6 in a real GRH).
    pub version: u8,
    /// Traffic class.
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// The sender's queue pair.
    pub src_qpn: Qpn,
    /// The sender's port.
    pub sgid: Gid,
    /// The destination's port or multicast group.
    pub dgid: Gid,
}

/// What the GRH area says, by the first-two-bytes rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Addressing {
    /// No valid GRH: the destination's hardware address.
    Destination(HwAddr),
    /// A Global Route Header (its first two bytes are not both zero).
    Grh(Grh),
}

/// A view of one `LINKTYPE_IPOIB` record's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn gid(b: &[u8]) -> Gid {
    let mut g = [0u8; 16];
    g.copy_from_slice(b);
    Gid(g)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// A view without checks (for buffers the caller sized).
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// A view of `buffer` after [`Packet::check_len`].
    ///
    /// # Errors
    /// [`Error::Truncated`] when `buffer` is shorter than [`HEADER_LEN`].
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    /// Whether the whole header is there; once it is, no accessor panics.
    ///
    /// # Errors
    /// [`Error::Truncated`] when it is not.
    pub fn check_len(&self) -> Result<(), Error> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(Error::truncated(Layer::Capture, HEADER_LEN, got));
        }
        Ok(())
    }

    /// The buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Wireshark's rule: the GRH area holds a GRH when its first two bytes are not both zero.
    pub fn grh_valid(&self) -> bool {
        self.buffer.as_ref()[0..2] != [0, 0]
    }

    /// Bytes 20..40 read as the destination hardware address (whatever [`Packet::grh_valid`]
    /// says).
    pub fn dest_addr(&self) -> HwAddr {
        // 20 bytes: cannot fail.
        HwAddr::parse(&self.buffer.as_ref()[field::DEST_ADDR]).unwrap_or_default()
    }

    /// The GRH area read as a Global Route Header (whatever [`Packet::grh_valid`] says).
    pub fn grh(&self) -> Grh {
        let b = self.buffer.as_ref();
        let w = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        Grh {
            version: (w >> 28) as u8,
            traffic_class: (w >> 20) as u8,
            flow_label: w & 0xf_ffff,
            // 24 bits: cannot fail.
            src_qpn: Qpn::try_new(u32::from_be_bytes([0, b[5], b[6], b[7]])).unwrap_or_default(),
            sgid: gid(&b[field::SGID]),
            dgid: gid(&b[field::DGID]),
        }
    }

    /// The payload's EtherType.
    pub fn ether_type(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([b[0], b[1]]))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The IPoIB packet: the encapsulation header and its payload (bytes 40..), the frame
    /// lro-core parses as [`lro_core::LinkKind::Ipoib`].
    pub fn ipoib_frame(&self) -> &'a [u8] {
        &self.buffer.as_ref()[PSEUDO_LEN..]
    }

    /// The payload (bytes 44..): the IP packet or ARP message.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

/// The header's content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// What the GRH area says.
    pub addressing: Addressing,
    /// The payload's EtherType.
    pub ether_type: EtherType,
}

impl Repr {
    /// Reads a checked record by Wireshark's rule ([`Packet::grh_valid`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        Self {
            addressing: if packet.grh_valid() {
                Addressing::Grh(packet.grh())
            } else {
                Addressing::Destination(packet.dest_addr())
            },
            ether_type: packet.ether_type(),
        }
    }

    /// Bytes the header takes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 44-byte header. A [`Addressing::Destination`] record gets zeros in bytes
    /// 0..20; a [`Addressing::Grh`] record whose first two bytes would come out zero (version
    /// 0, traffic class 0 and a flow label below 65536) would read back as a destination address:
    /// give GRHs version 6, as InfiniBand does. Never panics on a buffer of at least
    /// [`HEADER_LEN`] bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let b = &mut packet.buffer.as_mut()[..HEADER_LEN];
        match self.addressing {
            Addressing::Destination(a) => {
                b[..field::DEST_ADDR.start].fill(0);
                b[field::DEST_ADDR].copy_from_slice(&a.to_bytes());
            }
            Addressing::Grh(g) => {
                let w = u32::from(g.version & 0xf) << 28
                    | u32::from(g.traffic_class) << 20
                    | (g.flow_label & 0xf_ffff);
                b[field::VERSION_CLASS_FLOW].copy_from_slice(&w.to_be_bytes());
                b[4] = 0;
                b[field::SRC_QPN].copy_from_slice(&g.src_qpn.get().to_be_bytes()[1..]);
                b[field::SGID].copy_from_slice(&g.sgid.0);
                b[field::DGID].copy_from_slice(&g.dgid.0);
            }
        }
        b[field::ETHERTYPE].copy_from_slice(&self.ether_type.0.to_be_bytes());
        b[field::RESERVED].fill(0);
    }
}

/// Writes a `LINKTYPE_IPOIB` record for an IPoIB packet (`ipoib`: encapsulation header and
/// payload) sent to `dest` into `out`; returns the record's length.
///
/// # Errors
/// [`Error::Truncated`] when `ipoib` is shorter than the encapsulation header (layer
/// [`Layer::Encap`]) or `out` is shorter than the record (layer [`Layer::Capture`]).
pub fn write_record(dest: &HwAddr, ipoib: &[u8], out: &mut [u8]) -> Result<usize, Error> {
    let p = encap::Packet::new_checked(ipoib)?;
    let len = PSEUDO_LEN + ipoib.len();
    let got = out.len();
    let out = out
        .get_mut(..len)
        .ok_or(Error::truncated(Layer::Capture, len, got))?;
    Repr {
        addressing: Addressing::Destination(*dest),
        ether_type: p.ether_type(),
    }
    .emit(&mut Packet::new_unchecked(&mut *out));
    // Keep the packet's own encapsulation header (its reserved field included).
    out[PSEUDO_LEN..].copy_from_slice(ipoib);
    Ok(len)
}

// The hardware address fits the no-GRH reading exactly.
const _: () = assert!(field::DEST_ADDR.end - field::DEST_ADDR.start == hwaddr::LEN);

#[cfg(test)]
mod tests {
    use super::*;

    /// Frame 9 of tcpdump's `ipoib.pcap` test capture (a TCP SYN, 104 bytes), header and
    /// the start of the IP header.
    static SYN: [u8; 48] = [
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0x20, 0x00, 0x03, // no GRH
        0x80, 0x00, 0x05, 0x50, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0xe0, 0x00, 0x66, 0x4a,
        0xb4, 0x51, // destination
        0x08, 0x00, 0x00, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x3c,
    ];

    /// Frame 7 of the same capture: an ARP reply with stale text in the GRH area.
    static ARP_WITH_TEXT: [u8; 44] = [
        0x20, 0x72, 0x65, 0x63, 0x65, 0x69, 0x76, 0x65, 0x64, 0x20, 0x62, 0x79, 0x20, 0x66, 0x69,
        0x6c, 0x74, 0x65, 0x72, 0x70, 0x00, 0xff, 0xff, 0xff, 0xff, 0x10, 0x40, 0x1b, 0, 0, 0, 0,
        0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x08, 0x06, 0x00, 0x00,
    ];

    #[test]
    fn deconstruct_unicast() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert!(!p.grh_valid());
        let r = Repr::parse(&p);
        assert_eq!(r.ether_type, EtherType::IPV4);
        let Addressing::Destination(a) = r.addressing else {
            panic!("no GRH expected");
        };
        assert_eq!(a.qpn.get(), 0x550);
        extern crate std;
        use std::string::ToString;
        assert_eq!(a.gid.to_string(), "fe80::10:e000:664a:b451");
        assert_eq!(p.ipoib_frame()[..4], [0x08, 0, 0, 0]);
        assert_eq!(p.payload()[0], 0x45);
    }

    #[test]
    fn stale_bytes_read_both_ways() {
        let p = Packet::new_checked(&ARP_WITH_TEXT[..]).unwrap();
        assert!(p.grh_valid(), "Wireshark takes the text for a GRH");
        assert_eq!(p.ether_type(), EtherType::ARP);
        // Bytes 20..40 still hold the broadcast destination.
        let a = p.dest_addr();
        assert_eq!(a.qpn, Qpn::MULTICAST);
        assert!(a.gid.is_multicast());
        // And the GRH reading is what tshark shows: source QPN 0x697665 ("ive").
        assert_eq!(p.grh().src_qpn.get(), 0x69_7665);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn construct_both_forms() {
        let mut buf = [0xaau8; 44];
        let dest = HwAddr::parse(&SYN[20..40]).unwrap();
        let r = Repr {
            addressing: Addressing::Destination(dest),
            ether_type: EtherType::IPV4,
        };
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[20..44], &SYN[20..44]);
        assert_eq!(&buf[..20], &[0; 20]);

        let g = Grh {
            version: 6,
            traffic_class: 0x12,
            flow_label: 0x3_4567,
            src_qpn: Qpn::try_new(0x48).unwrap(),
            sgid: Gid::link_local(1),
            dgid: Gid::link_local(2),
        };
        let r = Repr {
            addressing: Addressing::Grh(g),
            ether_type: EtherType::IPV6,
        };
        r.emit(&mut Packet::new_unchecked(&mut buf[..]));
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&p), r);
    }

    #[test]
    fn grh_with_zero_first_two_bytes_reads_back_as_a_destination() {
        // The first two bytes hold the version, the traffic class and the flow label's top 4
        // bits: with version and class 0, any flow label below 0x10000 leaves them zero.
        let mut buf = [0u8; 44];
        for (flow_label, grh) in [(0xffff, false), (0x1_0000, true)] {
            let g = Grh {
                flow_label,
                src_qpn: Qpn::try_new(0x48).unwrap(),
                sgid: Gid::link_local(1),
                dgid: Gid::link_local(2),
                ..Grh::default()
            };
            Repr {
                addressing: Addressing::Grh(g),
                ether_type: EtherType::IPV6,
            }
            .emit(&mut Packet::new_unchecked(&mut buf[..]));
            let p = Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(p.grh_valid(), grh, "flow label {flow_label:#x}");
            assert_eq!(p.grh().flow_label, flow_label);
        }
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&SYN[..n]),
                Err(Error::Truncated {
                    layer: Layer::Capture,
                    needed: 44,
                    got: n
                })
            );
        }
    }

    #[test]
    fn write_record_keeps_the_packet() {
        let dest = HwAddr::parse(&SYN[20..40]).unwrap();
        let ipoib = [0x86, 0xdd, 0, 0, 0x60, 1, 2, 3];
        let mut out = [0u8; 64];
        let n = write_record(&dest, &ipoib, &mut out).unwrap();
        assert_eq!(n, 48);
        let p = Packet::new_checked(&out[..n]).unwrap();
        assert_eq!(p.ipoib_frame(), &ipoib);
        assert_eq!(p.dest_addr(), dest);
        assert!(write_record(&dest, &ipoib[..3], &mut out).is_err());
        assert!(write_record(&dest, &ipoib, &mut out[..47]).is_err());
    }

    proptest::proptest! {
        /// Any bytes: never a panic, and a view of at least 44 bytes always parses.
        #[test]
        fn any_bytes(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..100)) {
            match Packet::new_checked(&bytes[..]) {
                Ok(p) => {
                    let r = Repr::parse(&p);
                    proptest::prop_assert_eq!(r.ether_type, p.ether_type());
                    proptest::prop_assert_eq!(p.ipoib_frame().len(), bytes.len() - 40);
                }
                Err(_) => proptest::prop_assert!(bytes.len() < HEADER_LEN),
            }
        }
    }
}
