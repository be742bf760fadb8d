//! What the NIC (or the caller) says about a received frame.

use crate::wire::{ethernet, ipoib};

/// How the link layer of a frame looks, so the parser knows where the IP header starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LinkKind {
    /// Ethernet II, optionally with up to two in-line VLAN tags (802.1Q `0x8100`, 802.1ad `0x88a8`).
    #[default]
    Ethernet,
    /// No link header: the frame starts with the IPv4 or IPv6 header (capture link type RAW,
    /// a tunnel's inner packet).
    RawIp,
    /// IP over InfiniBand (RFC 4391 section 6): the frame starts with the 4-byte IPoIB
    /// encapsulation header (EtherType, 2 reserved bytes), as a host channel adapter delivers a
    /// datagram-mode or connected-mode receive once the GRH is stripped. Its reserved field
    /// is part of the flow identity ([`FlowKey::ipoib_reserved`](crate::FlowKey::ipoib_reserved)).
    Ipoib,
}

impl LinkKind {
    /// Bytes of link header a frame of this kind starts with before its EtherType-selected
    /// payload, VLAN tags not counted: what a NIC's CHECKSUM_COMPLETE sum leaves out
    /// ([`RxChecksum::Complete`]).
    pub const fn header_len(self) -> usize {
        match self {
            LinkKind::Ethernet => ethernet::HEADER_LEN,
            LinkKind::RawIp => 0,
            LinkKind::Ipoib => ipoib::HEADER_LEN,
        }
    }

    /// The number the flow key stores for this kind (never zero).
    pub(crate) const fn code(self) -> u8 {
        match self {
            LinkKind::Ethernet => 1,
            LinkKind::RawIp => 2,
            LinkKind::Ipoib => 3,
        }
    }
}

/// The checksum state a NIC reports for a received frame.
///
/// Mirrors Linux's `ip_summed` values on receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum RxChecksum {
    /// Nothing verified: the engine verifies the IPv4 header and TCP checksums in software
    /// (unless [`Config::verify_checksums`](crate::Config::verify_checksums) is off, in which
    /// case the frame is never merged). Linux: `CHECKSUM_NONE`.
    #[default]
    None,
    /// The NIC verified every checksum of the frame (IP headers, TCP, an encapsulation's) and
    /// found them good. Linux: `CHECKSUM_UNNECESSARY`.
    Verified,
    /// The NIC's ones'-complement sum (folded to 16 bits, in network byte order as a number,
    /// i.e. the value `csum_partial` would give before the final complement) over every byte
    /// after the link header ([`LinkKind::header_len`]: 14 for Ethernet, 4 for IPoIB, 0 for
    /// raw IP) up to the end of the frame, padding included. In-line VLAN tags are inside the
    /// summed range, as NICs do; the engine subtracts them (the first seed's VLAN fix-up).
    /// Linux: `CHECKSUM_COMPLETE`. The engine checks the TCP checksum (and an
    /// encapsulation's) from it without reading payload.
    Complete(u16),
}

/// Hash type of an RSS hash, as reported by the NIC (FreeBSD's `M_HASHTYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[non_exhaustive]
pub enum RssType {
    /// No hash, or an opaque one.
    #[default]
    Opaque,
    /// Toeplitz over IPv4 addresses.
    Ipv4,
    /// Toeplitz over IPv4 addresses and TCP ports.
    TcpIpv4,
    /// Toeplitz over IPv6 addresses.
    Ipv6,
    /// Toeplitz over IPv6 addresses and TCP ports.
    TcpIpv6,
}

/// A receive-side-scaling hash supplied by the NIC or computed in software.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RssHash {
    /// The 32-bit hash value.
    pub value: u32,
    /// What the hash covers.
    pub kind: RssType,
}

/// Per-frame receive metadata: what a NIC descriptor says about the frame.
///
/// Build it with [`RxMeta::ethernet`], [`RxMeta::raw_ip`], [`RxMeta::ipoib`] or
/// [`RxMeta::new`] and the `with_*` methods (the type is `#[non_exhaustive]`: fields may be
/// added, and are readable and writable as they are).
///
/// ```
/// use lro_core::{LinkKind, RssHash, RssType, RxChecksum, RxMeta};
/// let meta = RxMeta::ethernet(1_000)
///     .with_checksum(RxChecksum::Complete(0x1234))
///     .with_vlan_stripped(7)
///     .with_rss(RssHash { value: 0xdead_beef, kind: RssType::TcpIpv4 });
/// assert_eq!(meta.link, LinkKind::Ethernet);
/// assert_eq!(meta.with_link(LinkKind::RawIp).link, LinkKind::RawIp);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RxMeta {
    /// Link layer of the frame.
    pub link: LinkKind,
    /// RSS hash, if the NIC gave one. Used only to group frames ([`crate::rss::RssSorted`]):
    /// two frames are merged only when their full flow keys are equal, whatever their hashes,
    /// and the flow table hashes the key itself.
    pub rss: Option<RssHash>,
    /// The VLAN TCI the NIC stripped from the frame (`vlan_tci`), if any. Part of the flow key.
    pub vlan_stripped: Option<u16>,
    /// Checksum state.
    pub checksum: RxChecksum,
    /// Arrival time on the caller's clock (any monotonic unit, e.g. nanoseconds). Used for
    /// idle-timeout and maximum-hold flushing; the engine never reads an OS clock.
    pub time: u64,
}

impl RxMeta {
    /// Metadata for a frame of `link` with nothing verified, no hash, arriving at `time`.
    pub const fn new(link: LinkKind, time: u64) -> Self {
        Self {
            link,
            rss: None,
            vlan_stripped: None,
            checksum: RxChecksum::None,
            time,
        }
    }

    /// Metadata for an Ethernet frame with nothing verified, no hash, arriving at `time`.
    pub const fn ethernet(time: u64) -> Self {
        Self::new(LinkKind::Ethernet, time)
    }

    /// Metadata for a raw IP frame (no link header) with nothing verified, arriving at `time`.
    pub const fn raw_ip(time: u64) -> Self {
        Self::new(LinkKind::RawIp, time)
    }

    /// Metadata for an IPoIB frame (4-byte encapsulation header) with nothing verified,
    /// arriving at `time`.
    pub const fn ipoib(time: u64) -> Self {
        Self::new(LinkKind::Ipoib, time)
    }

    /// The same metadata with another link kind.
    pub const fn with_link(mut self, link: LinkKind) -> Self {
        self.link = link;
        self
    }

    /// The same metadata with the given checksum state.
    pub const fn with_checksum(mut self, checksum: RxChecksum) -> Self {
        self.checksum = checksum;
        self
    }

    /// The same metadata with the given RSS hash.
    pub const fn with_rss(mut self, rss: RssHash) -> Self {
        self.rss = Some(rss);
        self
    }

    /// The same metadata with a VLAN TCI the NIC stripped.
    pub const fn with_vlan_stripped(mut self, tci: u16) -> Self {
        self.vlan_stripped = Some(tci);
        self
    }

    /// The same metadata with another arrival time.
    pub const fn with_time(mut self, time: u64) -> Self {
        self.time = time;
        self
    }
}
