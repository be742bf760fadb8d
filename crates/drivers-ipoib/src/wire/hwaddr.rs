//! The 20-byte IPoIB link-layer (hardware) address (RFC 4391 §9.1; connected-mode flags
//! RFC 4755).
//!
//! ```text
//!  0                   1                   2                   3
//!  0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |     Flags     |                 Queue Pair Number             |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                                                               |
//! +                                                               +
//! |                   GID (subnet prefix + port GUID)             |
//! +                                                               +
//! |                                                               |
//! +                                                               +
//! |                                                               |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//!
//! | field | bytes | meaning |
//! | --- | --- | --- |
//! | Flags | 0 | reserved in RFC 4391; RFC 4755 uses bit 0x80 for "accepts reliable-connected mode" and 0x40 for unreliable-connected (Linux `IPOIB_FLAGS_RC`, `IPOIB_FLAGS_UC`) |
//! | QPN | 1..4 | the receiving datagram queue pair, 24 bits (`0xffffff` for a multicast group) |
//! | GID | 4..20 | the port's 128-bit global identifier: a 64-bit subnet prefix (`fe80::/64` by default) and the port GUID, or a multicast GID |
//!
//! This is what ARP over IPoIB (hardware type 32) and IPv6 neighbour discovery carry, what
//! Linux shows as an IPoIB interface's `link/infiniband` address, and what a
//! `LINKTYPE_IPOIB` capture writes as the destination ([`super::capture`]).
//!
//! ```
//! use drivers_ipoib::wire::{Gid, HwAddr, Qpn};
//!
//! let bytes = [
//!     0x80, 0x00, 0x05, 0x50, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0xe0, 0x00, 0x66,
//!     0x4a, 0xb4, 0x51,
//! ];
//! let addr = HwAddr::parse(&bytes)?;
//! assert!(addr.accepts_connected_mode());
//! assert_eq!(addr.qpn, Qpn::try_new(0x550)?);
//! assert_eq!(addr.gid.to_ipv6().to_string(), "fe80::10:e000:664a:b451");
//! assert_eq!(addr.to_bytes(), bytes);
//! # Ok::<(), drivers_ipoib::wire::Error>(())
//! ```

use core::fmt;
use core::net::Ipv6Addr;

use super::{Error, Layer};

/// Byte ranges of the hardware address.
pub mod field {
    use core::ops::Range;
    /// Flags (reserved in RFC 4391).
    pub const FLAGS: usize = 0;
    /// Queue pair number, 24 bits big-endian.
    pub const QPN: Range<usize> = 1..4;
    /// Global identifier.
    pub const GID: Range<usize> = 4..20;
}

/// Length of an IPoIB hardware address (Linux `INFINIBAND_ALEN`).
pub const LEN: usize = field::GID.end;

/// Flag bit: the interface accepts reliable-connected mode (RFC 4755; Linux `IPOIB_FLAGS_RC`).
pub const FLAG_RC: u8 = 0x80;
/// Flag bit: the interface accepts unreliable-connected mode (Linux `IPOIB_FLAGS_UC`).
pub const FLAG_UC: u8 = 0x40;

/// A 24-bit queue pair number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Qpn(u32);

impl Qpn {
    /// The largest QPN: also the QPN of every multicast group.
    pub const MULTICAST: Qpn = Qpn(0xff_ffff);

    /// A QPN, if `v` fits 24 bits.
    ///
    /// # Errors
    /// [`Error::QpnOutOfRange`] when it does not.
    pub const fn try_new(v: u32) -> Result<Self, Error> {
        if v > 0xff_ffff {
            return Err(Error::QpnOutOfRange(v));
        }
        Ok(Self(v))
    }

    /// The number.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#08x}", self.0)
    }
}

/// A 128-bit InfiniBand global identifier (GID), in network order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The GID as an IPv6 address (how Wireshark and Linux print it).
    pub const fn to_ipv6(self) -> Ipv6Addr {
        Ipv6Addr::from_bits(u128::from_be_bytes(self.0))
    }

    /// A link-local unicast GID (`fe80::/64` subnet prefix) for a port GUID.
    pub const fn link_local(guid: u64) -> Self {
        Self((0xfe80_u128 << 112 | guid as u128).to_be_bytes())
    }

    /// A multicast GID (first byte `0xff`)?
    pub const fn is_multicast(self) -> bool {
        self.0[0] == 0xff
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_ipv6(), f)
    }
}

/// An IPoIB hardware address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HwAddr {
    /// The flags byte ([`FLAG_RC`], [`FLAG_UC`]; reserved bits kept as they are).
    pub flags: u8,
    /// The datagram queue pair.
    pub qpn: Qpn,
    /// The port (or multicast group).
    pub gid: Gid,
}

impl HwAddr {
    /// Reads the first [`LEN`] bytes of `bytes`.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `bytes` is shorter.
    pub fn parse(bytes: &[u8]) -> Result<Self, Error> {
        let b: &[u8; LEN] =
            bytes
                .first_chunk()
                .ok_or(Error::truncated(Layer::HwAddr, LEN, bytes.len()))?;
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[field::GID]);
        Ok(Self {
            flags: b[field::FLAGS],
            qpn: Qpn(u32::from_be_bytes([0, b[1], b[2], b[3]])),
            gid: Gid(gid),
        })
    }

    /// The address as bytes.
    pub fn to_bytes(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[field::FLAGS] = self.flags;
        b[field::QPN].copy_from_slice(&self.qpn.0.to_be_bytes()[1..]);
        b[field::GID].copy_from_slice(&self.gid.0);
        b
    }

    /// Writes the address into the first [`LEN`] bytes of `out`.
    ///
    /// # Errors
    /// [`Error::Truncated`] when `out` is shorter.
    pub fn emit(&self, out: &mut [u8]) -> Result<(), Error> {
        let got = out.len();
        let dst: &mut [u8; LEN] =
            out.first_chunk_mut()
                .ok_or(Error::truncated(Layer::HwAddr, LEN, got))?;
        *dst = self.to_bytes();
        Ok(())
    }

    /// The RC flag is set: the owner accepts IPoIB connected mode (RFC 4755).
    pub const fn accepts_connected_mode(&self) -> bool {
        self.flags & FLAG_RC != 0
    }

    /// A multicast group's address (QPN `0xffffff`, multicast GID).
    pub fn is_multicast(&self) -> bool {
        self.qpn == Qpn::MULTICAST && self.gid.is_multicast()
    }
}

/// Colon-separated hex, as Linux prints `link/infiniband` addresses.
impl fmt::Display for HwAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.to_bytes().iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    /// The destination address of every unicast frame of tcpdump's `ipoib.pcap` test capture.
    static ADDR: [u8; 20] = [
        0x80, 0x00, 0x05, 0x50, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x10, 0xe0, 0x00, 0x66, 0x4a,
        0xb4, 0x51,
    ];

    #[test]
    fn deconstruct() {
        let a = HwAddr::parse(&ADDR).unwrap();
        assert_eq!(a.flags, FLAG_RC);
        assert_eq!(a.qpn.get(), 0x550);
        assert_eq!(a.gid.to_string(), "fe80::10:e000:664a:b451");
        assert_eq!(a.gid, Gid::link_local(0x0010_e000_664a_b451));
        assert!(!a.is_multicast());
        assert_eq!(
            a.to_string(),
            "80:00:05:50:fe:80:00:00:00:00:00:00:00:10:e0:00:66:4a:b4:51"
        );
    }

    #[test]
    fn construct() {
        let a = HwAddr {
            flags: FLAG_RC,
            qpn: Qpn::try_new(0x550).unwrap(),
            gid: Gid::link_local(0x0010_e000_664a_b451),
        };
        let mut out = [0u8; 24];
        a.emit(&mut out).unwrap();
        assert_eq!(&out[..20], &ADDR);
        assert_eq!(a.to_bytes(), ADDR);
    }

    #[test]
    fn truncated() {
        for n in 0..LEN {
            assert_eq!(
                HwAddr::parse(&ADDR[..n]),
                Err(Error::Truncated {
                    layer: Layer::HwAddr,
                    needed: 20,
                    got: n
                })
            );
            let mut short = [0u8; 20];
            assert!(HwAddr::default().emit(&mut short[..n]).is_err());
        }
    }

    #[test]
    fn qpn_is_24_bits() {
        assert_eq!(Qpn::try_new(0xff_ffff), Ok(Qpn::MULTICAST));
        assert_eq!(
            Qpn::try_new(0x100_0000),
            Err(Error::QpnOutOfRange(0x100_0000))
        );
    }

    #[test]
    fn broadcast_address() {
        // An IPv4 broadcast group: QPN 0xffffff, MGID ff1<scope>:401b:<P_Key>::ffff:ffff (RFC 4391
        // §4), here link-local scope and a zero P_Key.
        let mut b = [0u8; 20];
        b[1..4].copy_from_slice(&[0xff; 3]);
        b[4..6].copy_from_slice(&[0xff, 0x12]);
        b[6..8].copy_from_slice(&[0x40, 0x1b]);
        b[16..20].copy_from_slice(&[0xff; 4]);
        let a = HwAddr::parse(&b).unwrap();
        assert!(a.is_multicast());
        assert_eq!(a.gid.to_string(), "ff12:401b::ffff:ffff");
        // Both halves are needed: a multicast GID behind a queue pair's number, or the
        // multicast QPN in front of a unicast GID, is no group's address.
        let unicast_qpn = HwAddr {
            qpn: Qpn::try_new(0x550).unwrap(),
            ..a
        };
        let unicast_gid = HwAddr {
            gid: Gid::link_local(1),
            ..a
        };
        assert!(!unicast_qpn.is_multicast() && !unicast_gid.is_multicast());
    }

    #[test]
    fn only_the_rc_flag_says_connected_mode() {
        let a = HwAddr::parse(&ADDR).unwrap();
        assert!(a.accepts_connected_mode());
        for (flags, rc) in [(FLAG_UC, false), (0, false), (FLAG_RC | FLAG_UC, true)] {
            let b = HwAddr { flags, ..a };
            assert_eq!(b.accepts_connected_mode(), rc, "flags {flags:#04x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn round_trip(bytes in proptest::array::uniform20(proptest::num::u8::ANY)) {
            let a = HwAddr::parse(&bytes).unwrap();
            proptest::prop_assert_eq!(a.to_bytes(), bytes);
        }
    }
}
