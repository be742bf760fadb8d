//! IPoIB framing: the encapsulation header every IPoIB packet starts with, the 20-byte IPoIB
//! hardware address, and the capture form `LINKTYPE_IPOIB` (242).
//!
//! | layer | bytes | module |
//! | --- | --- | --- |
//! | encapsulation header (RFC 4391 §6): EtherType, reserved | 4 | [`encap`] |
//! | IPoIB link-layer address (RFC 4391 §9.1): flags, QPN, GID | 20 | [`hwaddr`] |
//! | capture pseudo header (`LINKTYPE_IPOIB`): GRH area or destination address, then the encapsulation header | 40 + 4 | [`capture`] |
//!
//! On the wire (after the InfiniBand transport headers the HCA consumes) an IPoIB packet is the
//! 4-byte encapsulation header and the IP packet (or ARP message). That is what the receive
//! queue ([`crate::RxQueue`]) hands out and what lro-core's [`lro_core::LinkKind::Ipoib`]
//! parses. The hardware address never travels in a data packet: it is what ARP and neighbour
//! discovery carry, and what a capture writes in front of each packet.
//!
//! # Panic contract
//! As in smoltcp: a view built with `new_checked` (or checked with `check_len`) never panics
//! in its accessors; `new_unchecked` views are for buffers the caller sized (emission). Every
//! `parse` returns an [`Error`] for short input, never panics, and reads nothing past the
//! slice.

use core::fmt;

pub mod capture;
pub mod encap;
pub mod hwaddr;

pub use encap::EtherType;
pub use hwaddr::{Gid, HwAddr, Qpn};

/// Which header a framing error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layer {
    /// The 4-byte IPoIB encapsulation header.
    Encap,
    /// The 20-byte IPoIB hardware address.
    HwAddr,
    /// The 44-byte `LINKTYPE_IPOIB` capture header.
    Capture,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Encap => "IPoIB encapsulation header",
            Layer::HwAddr => "IPoIB hardware address",
            Layer::Capture => "LINKTYPE_IPOIB capture header",
        })
    }
}

/// A framing error: what is wrong and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header.
    Truncated {
        /// The header.
        layer: Layer,
        /// Bytes it needs.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// A queue pair number above 24 bits.
    QpnOutOfRange(u32),
    /// A payload that is not an IPv4 or IPv6 packet (by its version nibble), where one is
    /// required.
    NotIp,
    /// A frame longer than the mode's MTU allows.
    TooLong {
        /// Bytes of the frame, encapsulation header included.
        len: usize,
        /// The most allowed.
        max: usize,
    },
    /// An MTU the mode cannot have.
    Mtu {
        /// The MTU asked for.
        mtu: u32,
        /// The least the mode allows.
        min: u32,
        /// The most the mode allows.
        max: u32,
    },
}

impl Error {
    pub(crate) const fn truncated(layer: Layer, needed: usize, got: usize) -> Self {
        Error::Truncated { layer, needed, got }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { layer, needed, got } => {
                write!(f, "{layer} truncated: needs {needed} bytes, {got} present")
            }
            Error::QpnOutOfRange(q) => {
                write!(f, "queue pair number {q:#x} does not fit 24 bits")
            }
            Error::NotIp => f.write_str("not an IPv4 or IPv6 packet"),
            Error::TooLong { len, max } => write!(f, "{len} bytes: at most {max} allowed"),
            Error::Mtu { mtu, min, max } => {
                write!(f, "an MTU of {mtu} bytes: {min} to {max} allowed")
            }
        }
    }
}

impl core::error::Error for Error {}
