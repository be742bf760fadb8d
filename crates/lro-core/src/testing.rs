//! Frame builders for tests, fuzz targets and examples (feature `test-utils`).
//!
//! [`FrameSpec`] describes one TCP frame field by field (link layer, IPv4 or IPv6 with
//! options and extension headers, TCP with options, payload, trailing padding) and
//! [`FrameSpec::write`] lays it out into a caller buffer with correct lengths and checksums.
//! Nothing here allocates, so the module also compiles into `no_std` builds.
//!
//! The checksums are computed by a deliberately naive reference implementation
//! ([`ones_complement_sum`]) that shares no code with the engine's own checksum module, so a
//! test that compares the two is meaningful.
//!
//! ```
//! use lro_core::testing::{FrameSpec, TCP_ACK};
//!
//! let payload = [0xabu8; 100];
//! let spec = FrameSpec::ipv4_tcp(1000, 2000)
//!     .seq(1)
//!     .flags(TCP_ACK)
//!     .timestamps(10, 20)
//!     .payload(&payload);
//! let mut buf = [0u8; 256];
//! let len = spec.write(&mut buf).unwrap();
//! assert_eq!(len, 14 + 20 + 32 + 100);
//! assert_eq!(len, spec.len());
//! ```

use core::fmt;

/// TCP flag FIN.
pub const TCP_FIN: u8 = 0x01;
/// TCP flag SYN.
pub const TCP_SYN: u8 = 0x02;
/// TCP flag RST.
pub const TCP_RST: u8 = 0x04;
/// TCP flag PSH.
pub const TCP_PSH: u8 = 0x08;
/// TCP flag ACK.
pub const TCP_ACK: u8 = 0x10;
/// TCP flag URG.
pub const TCP_URG: u8 = 0x20;
/// TCP flag ECE.
pub const TCP_ECE: u8 = 0x40;
/// TCP flag CWR.
pub const TCP_CWR: u8 = 0x80;

/// Tag protocol identifier of an IEEE 802.1Q (customer) VLAN tag.
pub const TPID_8021Q: u16 = 0x8100;
/// Tag protocol identifier of an IEEE 802.1ad (service, "QinQ") VLAN tag.
pub const TPID_8021AD: u16 = 0x88a8;

/// The output buffer given to [`FrameSpec::write`] is shorter than the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// Bytes the frame needs.
    pub needed: usize,
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer too small: the frame needs {} bytes", self.needed)
    }
}

impl core::error::Error for BufferTooSmall {}

/// A small fixed-capacity byte list (options, extension header bodies) so the specs need no
/// allocator. Pushing past the capacity panics: specs are written by tests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Bytes<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Bytes<N> {
    /// An empty list.
    pub const fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    /// A list holding a copy of `bytes`.
    ///
    /// # Panics
    /// If `bytes` is longer than `N`.
    pub fn from_slice(bytes: &[u8]) -> Self {
        let mut b = Self::new();
        b.extend(bytes);
        b
    }

    /// Appends `bytes`.
    ///
    /// # Panics
    /// If the capacity `N` would be exceeded.
    pub fn extend(&mut self, bytes: &[u8]) {
        assert!(
            self.len + bytes.len() <= N,
            "testing::Bytes capacity {N} exceeded"
        );
        self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len();
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Number of bytes.
    pub const fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Removes every byte.
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

impl<const N: usize> Default for Bytes<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> fmt::Debug for Bytes<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

/// One in-line VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag {
    /// Tag protocol identifier ([`TPID_8021Q`] or [`TPID_8021AD`]).
    pub tpid: u16,
    /// Tag control information (PCP, DEI, VLAN id).
    pub tci: u16,
}

/// Ethernet II header with up to two in-line VLAN tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetSpec {
    /// Destination MAC address.
    pub dst: [u8; 6],
    /// Source MAC address.
    pub src: [u8; 6],
    /// VLAN tags, outermost first; a `None` ends the list.
    pub vlans: [Option<VlanTag>; 2],
}

impl Default for EthernetSpec {
    fn default() -> Self {
        Self {
            dst: [0x02, 0, 0, 0, 0, 0x01],
            src: [0x02, 0, 0, 0, 0, 0x02],
            vlans: [None, None],
        }
    }
}

impl EthernetSpec {
    /// Length of the header, VLAN tags included.
    pub fn header_len(&self) -> usize {
        14 + 4 * self.vlan_count()
    }

    /// Number of VLAN tags (stops at the first `None`).
    pub fn vlan_count(&self) -> usize {
        self.vlans.iter().take_while(|v| v.is_some()).count()
    }
}

/// The link layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkSpec {
    /// Ethernet II (with optional VLAN tags).
    Ethernet(EthernetSpec),
    /// No link header: the frame starts with the IP header.
    RawIp,
    /// The IPoIB encapsulation header (RFC 4391 section 6): the EtherType of the IP version,
    /// then the 2-byte reserved field (zero from a conforming sender).
    Ipoib {
        /// The reserved field.
        reserved: u16,
    },
}

impl Default for LinkSpec {
    fn default() -> Self {
        Self::Ethernet(EthernetSpec::default())
    }
}

impl LinkSpec {
    /// The link kind a receiver announces for such frames ([`RxMeta::new`](crate::RxMeta::new)).
    pub fn kind(&self) -> crate::LinkKind {
        match self {
            Self::Ethernet(_) => crate::LinkKind::Ethernet,
            Self::RawIp => crate::LinkKind::RawIp,
            Self::Ipoib { .. } => crate::LinkKind::Ipoib,
        }
    }

    /// Length of the link header (0 for raw IP, 4 for IPoIB).
    pub fn header_len(&self) -> usize {
        match self {
            Self::Ethernet(eth) => eth.header_len(),
            _ => self.kind().header_len(),
        }
    }

    /// Adds an in-line VLAN tag after any existing ones (at most two); a raw IP or IPoIB link
    /// becomes Ethernet.
    ///
    /// # Panics
    /// If two tags are already present.
    pub fn push_vlan(&mut self, tpid: u16, tci: u16) {
        if !matches!(self, Self::Ethernet(_)) {
            *self = Self::default();
        }
        if let Self::Ethernet(eth) = self {
            let n = eth.vlan_count();
            assert!(n < 2, "at most two VLAN tags");
            eth.vlans[n] = Some(VlanTag { tpid, tci });
        }
    }

    /// Writes the link header of a packet of `ethertype` to the start of `buf` (at least
    /// [`LinkSpec::header_len`] bytes); returns its length.
    pub fn write(&self, buf: &mut [u8], ethertype: u16) -> usize {
        match self {
            Self::Ethernet(eth) => {
                buf[0..6].copy_from_slice(&eth.dst);
                buf[6..12].copy_from_slice(&eth.src);
                let mut at = 12;
                for tag in eth.vlans.iter().map_while(|v| v.as_ref()) {
                    put16(buf, at, tag.tpid);
                    put16(buf, at + 2, tag.tci);
                    at += 4;
                }
                put16(buf, at, ethertype);
                at + 2
            }
            Self::RawIp => 0,
            Self::Ipoib { reserved } => {
                put16(buf, 0, ethertype);
                put16(buf, 2, *reserved);
                4
            }
        }
    }
}

/// An IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Spec {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
    /// Time to live.
    pub ttl: u8,
    /// Type of service byte (DSCP and ECN).
    pub tos: u8,
    /// Identification.
    pub id: u16,
    /// Don't-fragment flag.
    pub df: bool,
    /// More-fragments flag.
    pub mf: bool,
    /// The reserved ("evil") flag bit.
    pub reserved_flag: bool,
    /// Fragment offset in 8-byte units (13 bits).
    pub frag_offset: u16,
    /// IP options; padded with zero (end-of-list) bytes to a multiple of 4 when written.
    pub options: Bytes<40>,
}

impl Default for Ipv4Spec {
    fn default() -> Self {
        Self {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
            ttl: 64,
            tos: 0,
            id: 0,
            df: true,
            mf: false,
            reserved_flag: false,
            frag_offset: 0,
            options: Bytes::new(),
        }
    }
}

impl Ipv4Spec {
    /// Header length with options (padded to a multiple of 4).
    pub fn header_len(&self) -> usize {
        20 + self.options.len().div_ceil(4) * 4
    }
}

/// Kind of a generic IPv6 extension header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipv6ExtKind {
    /// Hop-by-Hop options (next header 0).
    HopByHop,
    /// Routing header (next header 43).
    Routing,
    /// Destination options (next header 60).
    DestinationOptions,
}

impl Ipv6ExtKind {
    /// The IP protocol number of this header.
    pub const fn protocol(self) -> u8 {
        match self {
            Self::HopByHop => 0,
            Self::Routing => 43,
            Self::DestinationOptions => 60,
        }
    }
}

/// A generic IPv6 extension header: next-header and length bytes are written by the builder,
/// `body` follows them and is padded with zero bytes (Pad1 options) to a multiple of 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Ext {
    /// Which header.
    pub kind: Ipv6ExtKind,
    /// The bytes after the next-header and length bytes.
    pub body: Bytes<46>,
}

impl Ipv6Ext {
    /// An extension header of `kind` with the given body bytes.
    pub fn new(kind: Ipv6ExtKind, body: &[u8]) -> Self {
        Self {
            kind,
            body: Bytes::from_slice(body),
        }
    }

    /// Length on the wire (a multiple of 8).
    pub fn len(&self) -> usize {
        (2 + self.body.len()).div_ceil(8) * 8
    }

    /// Never true: an extension header is at least 8 bytes.
    pub fn is_empty(&self) -> bool {
        false
    }
}

/// An IPv6 Fragment header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ipv6Fragment {
    /// Fragment offset in 8-byte units (13 bits).
    pub offset: u16,
    /// More-fragments flag.
    pub more: bool,
    /// Identification.
    pub ident: u32,
}

/// An IPv6 header with optional extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Spec {
    /// Source address.
    pub src: [u8; 16],
    /// Destination address (also used in the TCP pseudo-header: give a Routing header
    /// "segments left" 0 if you want that to be right per RFC 8200 section 8.1).
    pub dst: [u8; 16],
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Hop limit.
    pub hop_limit: u8,
    /// Extension headers in wire order; a `None` ends the list.
    pub ext: [Option<Ipv6Ext>; 3],
    /// A Fragment header, written after the extension headers.
    pub fragment: Option<Ipv6Fragment>,
}

impl Default for Ipv6Spec {
    fn default() -> Self {
        let mut src = [0u8; 16];
        src[..2].copy_from_slice(&[0xfd, 0x00]);
        src[15] = 1;
        let mut dst = src;
        dst[15] = 2;
        Self {
            src,
            dst,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 64,
            ext: [None, None, None],
            fragment: None,
        }
    }
}

impl Ipv6Spec {
    /// Length of the fixed header plus every extension header.
    pub fn header_len(&self) -> usize {
        40 + self
            .ext
            .iter()
            .map_while(|e| e.as_ref().map(Ipv6Ext::len))
            .sum::<usize>()
            + if self.fragment.is_some() { 8 } else { 0 }
    }
}

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpSpec {
    /// IPv4.
    V4(Ipv4Spec),
    /// IPv6.
    V6(Ipv6Spec),
}

impl Default for IpSpec {
    fn default() -> Self {
        Self::V4(Ipv4Spec::default())
    }
}

impl IpSpec {
    /// Header length, options and extension headers included.
    pub fn header_len(&self) -> usize {
        match self {
            Self::V4(v4) => v4.header_len(),
            Self::V6(v6) => v6.header_len(),
        }
    }
}

/// A TCP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSpec {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Flags byte (`TCP_*` constants).
    pub flags: u8,
    /// The four bits between the data offset and the flags (reserved bits and AE/NS).
    pub reserved: u8,
    /// Window.
    pub window: u16,
    /// Urgent pointer.
    pub urgent: u16,
    /// Options; padded with zero (end-of-list) bytes to a multiple of 4 when written.
    pub options: Bytes<40>,
}

impl Default for TcpSpec {
    fn default() -> Self {
        Self {
            src_port: 40000,
            dst_port: 80,
            seq: 0,
            ack: 0,
            flags: TCP_ACK,
            reserved: 0,
            window: 65535,
            urgent: 0,
            options: Bytes::new(),
        }
    }
}

impl TcpSpec {
    /// Header length with options (padded to a multiple of 4).
    pub fn header_len(&self) -> usize {
        20 + self.options.len().div_ceil(4) * 4
    }

    /// Appends the aligned timestamp option `NOP, NOP, TS(tsval, tsecr)` (12 bytes, the layout
    /// Linux sends and RFC 7323 appendix A recommends).
    pub fn push_timestamps(&mut self, tsval: u32, tsecr: u32) {
        self.options.extend(&[1, 1, 8, 10]);
        self.options.extend(&tsval.to_be_bytes());
        self.options.extend(&tsecr.to_be_bytes());
    }

    /// Appends `NOP, NOP, SACK(blocks)` (RFC 2018); at most 4 blocks fit without timestamps.
    pub fn push_sack(&mut self, blocks: &[(u32, u32)]) {
        self.options
            .extend(&[1, 1, 5, (2 + 8 * blocks.len()) as u8]);
        for (l, r) in blocks {
            self.options.extend(&l.to_be_bytes());
            self.options.extend(&r.to_be_bytes());
        }
    }
}

/// Which checksum [`FrameSpec::write`] should deliberately get wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Corrupt {
    /// Both checksums right.
    #[default]
    None,
    /// The TCP checksum is wrong (by a value that is never ones'-complement equivalent).
    TcpChecksum,
    /// The IPv4 header checksum is wrong (no effect on IPv6, which has none).
    IpChecksum,
}

/// A complete description of one TCP frame. All fields are public; the builder methods are
/// shortcuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameSpec<'a> {
    /// Link layer.
    pub link: LinkSpec,
    /// Network layer.
    pub ip: IpSpec,
    /// Transport layer.
    pub tcp: TcpSpec,
    /// TCP payload.
    pub payload: &'a [u8],
    /// Bytes after the IP datagram (Ethernet padding of runts, or trailing garbage).
    pub padding: &'a [u8],
    /// Checksum corruption.
    pub corrupt: Corrupt,
}

impl<'a> FrameSpec<'a> {
    /// Ethernet + IPv4 + TCP with the given ports, everything else default.
    pub fn ipv4_tcp(src_port: u16, dst_port: u16) -> Self {
        Self {
            tcp: TcpSpec {
                src_port,
                dst_port,
                ..TcpSpec::default()
            },
            ..Self::default()
        }
    }

    /// Ethernet + IPv6 + TCP with the given ports, everything else default.
    pub fn ipv6_tcp(src_port: u16, dst_port: u16) -> Self {
        Self {
            ip: IpSpec::V6(Ipv6Spec::default()),
            ..Self::ipv4_tcp(src_port, dst_port)
        }
    }

    /// Sets the sequence number.
    pub fn seq(mut self, seq: u32) -> Self {
        self.tcp.seq = seq;
        self
    }

    /// Sets the acknowledgment number.
    pub fn ack(mut self, ack: u32) -> Self {
        self.tcp.ack = ack;
        self
    }

    /// Sets the flags byte.
    pub fn flags(mut self, flags: u8) -> Self {
        self.tcp.flags = flags;
        self
    }

    /// Sets the window.
    pub fn window(mut self, window: u16) -> Self {
        self.tcp.window = window;
        self
    }

    /// Appends aligned timestamps (see [`TcpSpec::push_timestamps`]).
    pub fn timestamps(mut self, tsval: u32, tsecr: u32) -> Self {
        self.tcp.push_timestamps(tsval, tsecr);
        self
    }

    /// Appends SACK blocks (see [`TcpSpec::push_sack`]).
    pub fn sack(mut self, blocks: &[(u32, u32)]) -> Self {
        self.tcp.push_sack(blocks);
        self
    }

    /// Sets the payload.
    pub fn payload(mut self, payload: &'a [u8]) -> Self {
        self.payload = payload;
        self
    }

    /// Sets the trailing padding.
    pub fn padding(mut self, padding: &'a [u8]) -> Self {
        self.padding = padding;
        self
    }

    /// Removes the link header (raw IP frame).
    pub fn raw_ip(mut self) -> Self {
        self.link = LinkSpec::RawIp;
        self
    }

    /// Frames the packet for IP over InfiniBand: the 4-byte encapsulation header with this
    /// reserved field (read with [`RxMeta::ipoib`](crate::RxMeta::ipoib)).
    pub fn ipoib(mut self, reserved: u16) -> Self {
        self.link = LinkSpec::Ipoib { reserved };
        self
    }

    /// Adds an in-line VLAN tag after any existing ones (at most two). Switches a raw IP or
    /// IPoIB frame to Ethernet.
    ///
    /// # Panics
    /// If two tags are already present.
    pub fn vlan(mut self, tpid: u16, tci: u16) -> Self {
        self.link.push_vlan(tpid, tci);
        self
    }

    /// Sets the checksum corruption.
    pub fn corrupt(mut self, corrupt: Corrupt) -> Self {
        self.corrupt = corrupt;
        self
    }

    /// Length of the link header (0 for raw IP, 4 for IPoIB).
    pub fn link_len(&self) -> usize {
        self.link.header_len()
    }

    /// Length of the IP datagram (IP header to the end of the payload).
    pub fn ip_len(&self) -> usize {
        self.ip.header_len() + self.tcp.header_len() + self.payload.len()
    }

    /// Total frame length, padding included.
    pub fn len(&self) -> usize {
        self.link_len() + self.ip_len() + self.padding.len()
    }

    /// Never true: a frame has at least the IP and TCP headers.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the frame to the start of `buf` and returns its length.
    ///
    /// Lengths (IPv4 total length, IPv6 payload length, TCP data offset, extension header
    /// lengths) and checksums are computed; [`FrameSpec::corrupt`] then spoils one checksum.
    /// Lengths that do not fit their fields (an IPv4 datagram over 65535 bytes) are truncated
    /// to the field width, which makes a malformed frame on purpose.
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, BufferTooSmall> {
        let total = self.len();
        if buf.len() < total {
            return Err(BufferTooSmall { needed: total });
        }
        let buf = &mut buf[..total];
        // Link layer.
        let ethertype: u16 = match self.ip {
            IpSpec::V4(_) => 0x0800,
            IpSpec::V6(_) => 0x86dd,
        };
        let mut at = self.link.write(buf, ethertype);

        // Network layer.
        let ip_start = at;
        let ip_len = self.ip_len();
        let tcp_len = self.tcp.header_len() + self.payload.len();
        match &self.ip {
            IpSpec::V4(v4) => {
                let hl = v4.header_len();
                buf[at] = 0x40 | (hl / 4) as u8;
                buf[at + 1] = v4.tos;
                put16(buf, at + 2, ip_len as u16);
                put16(buf, at + 4, v4.id);
                let flags = (u16::from(v4.reserved_flag) << 15)
                    | (u16::from(v4.df) << 14)
                    | (u16::from(v4.mf) << 13)
                    | (v4.frag_offset & 0x1fff);
                put16(buf, at + 6, flags);
                buf[at + 8] = v4.ttl;
                buf[at + 9] = 6;
                put16(buf, at + 10, 0);
                buf[at + 12..at + 16].copy_from_slice(&v4.src);
                buf[at + 16..at + 20].copy_from_slice(&v4.dst);
                let opts = v4.options.as_slice();
                buf[at + 20..at + 20 + opts.len()].copy_from_slice(opts);
                buf[at + 20 + opts.len()..at + hl].fill(0);
                seal_ipv4_header(buf, at);
                if self.corrupt == Corrupt::IpChecksum {
                    buf[at + 10] ^= 0x5a;
                    buf[at + 11] ^= 0x5a;
                }
                at += hl;
            }
            IpSpec::V6(v6) => {
                let first = (6u32 << 28)
                    | (u32::from(v6.traffic_class) << 20)
                    | (v6.flow_label & 0x000f_ffff);
                buf[at..at + 4].copy_from_slice(&first.to_be_bytes());
                put16(buf, at + 4, (ip_len - 40) as u16);
                // Next header of the fixed header: the first extension, else fragment, else TCP.
                buf[at + 6] = first_next_header(v6);
                buf[at + 7] = v6.hop_limit;
                buf[at + 8..at + 24].copy_from_slice(&v6.src);
                buf[at + 24..at + 40].copy_from_slice(&v6.dst);
                at += 40;
                let exts: &[Option<Ipv6Ext>] = &v6.ext;
                let n = exts.iter().take_while(|e| e.is_some()).count();
                for (i, ext) in exts[..n].iter().flatten().enumerate() {
                    let next = match exts.get(i + 1).and_then(|e| e.as_ref()) {
                        Some(e) if i + 1 < n => e.kind.protocol(),
                        _ if v6.fragment.is_some() => 44,
                        _ => 6,
                    };
                    let len = ext.len();
                    buf[at] = next;
                    buf[at + 1] = (len / 8 - 1) as u8;
                    let body = ext.body.as_slice();
                    buf[at + 2..at + 2 + body.len()].copy_from_slice(body);
                    buf[at + 2 + body.len()..at + len].fill(0);
                    at += len;
                }
                if let Some(frag) = &v6.fragment {
                    buf[at] = 6;
                    buf[at + 1] = 0;
                    put16(
                        buf,
                        at + 2,
                        ((frag.offset & 0x1fff) << 3) | u16::from(frag.more),
                    );
                    buf[at + 4..at + 8].copy_from_slice(&frag.ident.to_be_bytes());
                    at += 8;
                }
            }
        }
        debug_assert_eq!(at - ip_start, self.ip.header_len());

        // Transport layer.
        let tcp_start = at;
        let t = &self.tcp;
        let thl = t.header_len();
        put16(buf, at, t.src_port);
        put16(buf, at + 2, t.dst_port);
        buf[at + 4..at + 8].copy_from_slice(&t.seq.to_be_bytes());
        buf[at + 8..at + 12].copy_from_slice(&t.ack.to_be_bytes());
        buf[at + 12] = ((thl / 4) as u8) << 4 | (t.reserved & 0x0f);
        buf[at + 13] = t.flags;
        put16(buf, at + 14, t.window);
        put16(buf, at + 16, 0);
        put16(buf, at + 18, t.urgent);
        let opts = t.options.as_slice();
        buf[at + 20..at + 20 + opts.len()].copy_from_slice(opts);
        buf[at + 20 + opts.len()..at + thl].fill(0);
        at += thl;
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();

        let pseudo = match &self.ip {
            IpSpec::V4(v4) => pseudo_header_sum_v4(v4.src, v4.dst, tcp_len as u32),
            IpSpec::V6(v6) => pseudo_header_sum_v6(v6.src, v6.dst, tcp_len as u32),
        };
        let sum = add16(pseudo, ones_complement_sum(&buf[tcp_start..at]));
        let mut check = !sum;
        if self.corrupt == Corrupt::TcpChecksum {
            check ^= 0x5a5a;
        }
        put16(buf, tcp_start + 16, check);

        // Trailing padding.
        buf[at..at + self.padding.len()].copy_from_slice(self.padding);
        at += self.padding.len();
        debug_assert_eq!(at, total);
        Ok(total)
    }
}

fn first_next_header(v6: &Ipv6Spec) -> u8 {
    match (&v6.ext[0], &v6.fragment) {
        (Some(e), _) => e.kind.protocol(),
        (None, Some(_)) => 44,
        (None, None) => 6,
    }
}

fn put16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Ones'-complement addition of two 16-bit values (end-around carry).
pub fn add16(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The folded 16-bit ones'-complement sum of `bytes` read as big-endian words (an odd final
/// byte is padded with zero), not complemented. A plain reference implementation: one word
/// at a time, fold at the end.
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for w in &mut chunks {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = chunks.remainder() {
        acc += u64::from(*last) << 8;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Ones'-complement sum of the IPv4 TCP pseudo-header (not complemented).
pub fn pseudo_header_sum_v4(src: [u8; 4], dst: [u8; 4], tcp_len: u32) -> u16 {
    let mut s = add16(ones_complement_sum(&src), ones_complement_sum(&dst));
    s = add16(s, 6);
    add16(s, ones_complement_sum(&tcp_len.to_be_bytes()))
}

/// Ones'-complement sum of the IPv6 TCP pseudo-header (not complemented).
pub fn pseudo_header_sum_v6(src: [u8; 16], dst: [u8; 16], tcp_len: u32) -> u16 {
    let mut s = add16(ones_complement_sum(&src), ones_complement_sum(&dst));
    s = add16(s, 6);
    add16(s, ones_complement_sum(&tcp_len.to_be_bytes()))
}

/// The CHECKSUM_COMPLETE value a NIC would report for `frame` of `link` (see
/// [`RxChecksum::Complete`](crate::RxChecksum::Complete)): the folded sum of every byte after
/// the link header ([`LinkKind::header_len`](crate::LinkKind::header_len): in-line VLAN tags
/// and padding included).
pub fn complete_checksum(frame: &[u8], link: crate::LinkKind) -> u16 {
    ones_complement_sum(&frame[link.header_len().min(frame.len())..])
}

/// Makes the header checksum of the IPv4 header at `l3` of `frame` (as long as its IHL says)
/// right for the header's bytes as they are: for a test that changes another field and wants
/// only that field wrong. Does nothing to a header cut short or with an IHL below 5.
pub fn seal_ipv4_header(frame: &mut [u8], l3: usize) {
    let Some(&ver_ihl) = frame.get(l3) else {
        return;
    };
    let len = usize::from(ver_ihl & 0x0f) * 4;
    let Some(h) = frame.get_mut(l3..l3 + len).filter(|h| h.len() >= 20) else {
        return;
    };
    h[10..12].fill(0);
    let check = !ones_complement_sum(h);
    h[10..12].copy_from_slice(&check.to_be_bytes());
}

/// True when `padding` is checksum-neutral: its ones'-complement sum is zero (`0x0000` or
/// `0xffff`, +0 or -0), so a sum over the frame is the same with or without it, at any byte
/// offset.
pub fn padding_is_neutral(padding: &[u8]) -> bool {
    matches!(ones_complement_sum(padding), 0x0000 | 0xffff)
}

/// `spec`'s frame in a buffer of its length, for lro-core's own unit tests: they cannot link
/// lro-testkit (a second copy of this crate), whose `frame::bytes_of` serves every other test.
#[cfg(test)]
pub(crate) fn bytes_of(spec: &FrameSpec<'_>) -> std::vec::Vec<u8> {
    let mut b = std::vec![0u8; spec.len()];
    spec.write(&mut b).expect("a buffer of the spec's length");
    b
}

#[cfg(test)]
extern crate std;

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    extern crate std;
    use std::vec;
    use std::vec::Vec;

    fn build(spec: &FrameSpec<'_>) -> Vec<u8> {
        let mut buf = vec![0u8; spec.len()];
        assert_eq!(spec.write(&mut buf), Ok(spec.len()));
        // A buffer one byte short is refused.
        let mut short = vec![0u8; spec.len() - 1];
        assert_eq!(
            spec.write(&mut short),
            Err(BufferTooSmall { needed: spec.len() })
        );
        buf
    }

    /// Parses `frame` with etherparse and checks lengths and both checksums; returns
    /// `(ip_checksum_ok, tcp_checksum_ok)`.
    fn verify(spec: &FrameSpec<'_>, frame: &[u8]) -> (bool, bool) {
        let p = match spec.link {
            LinkSpec::Ethernet(_) => SlicedPacket::from_ethernet(frame),
            link => SlicedPacket::from_ip(&frame[link.header_len()..]),
        }
        .expect("etherparse parses the frame");
        if let LinkSpec::Ethernet(eth) = &spec.link {
            assert_eq!(p.vlan_ids().len(), eth.vlan_count());
        }
        if let LinkSpec::Ipoib { reserved } = spec.link {
            let v6 = matches!(spec.ip, IpSpec::V6(_));
            let et: [u8; 2] = if v6 { [0x86, 0xdd] } else { [0x08, 0x00] };
            assert_eq!(frame[..2], et);
            assert_eq!(frame[2..4], reserved.to_be_bytes());
        }
        let tcp = match p.transport {
            Some(TransportSlice::Tcp(t)) => t,
            other => panic!("no TCP: {other:?}"),
        };
        assert_eq!(tcp.payload(), spec.payload);
        assert_eq!(tcp.source_port(), spec.tcp.src_port);
        assert_eq!(tcp.destination_port(), spec.tcp.dst_port);
        assert_eq!(tcp.sequence_number(), spec.tcp.seq);
        assert_eq!(tcp.acknowledgment_number(), spec.tcp.ack);
        assert_eq!(tcp.window_size(), spec.tcp.window);
        assert_eq!(tcp.header_len(), spec.tcp.header_len());
        let hdr = etherparse::TcpHeaderSlice::from_slice(tcp.slice()).unwrap();
        let (ip_ok, tcp_sum) = match p.net {
            Some(NetSlice::Ipv4(v4)) => {
                let h = v4.header();
                assert_eq!(usize::from(h.total_len()), spec.ip_len());
                let ip_ok = h.to_header().calc_header_checksum() == h.header_checksum();
                (
                    ip_ok,
                    hdr.calc_checksum_ipv4_raw(h.source(), h.destination(), spec.payload)
                        .unwrap(),
                )
            }
            Some(NetSlice::Ipv6(v6)) => {
                let h = v6.header();
                assert_eq!(usize::from(h.payload_length()) + 40, spec.ip_len());
                (
                    true,
                    hdr.calc_checksum_ipv6_raw(h.source(), h.destination(), spec.payload)
                        .unwrap(),
                )
            }
            other => panic!("no IP: {other:?}"),
        };
        (ip_ok, tcp_sum == tcp.checksum())
    }

    fn specs<'a>(payload: &'a [u8], padding: &'a [u8]) -> Vec<FrameSpec<'a>> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            for vlans in 0..=2 {
                // 0: Ethernet, 1: raw IP, 2: IPoIB.
                for link in 0..3 {
                    if link > 0 && vlans > 0 {
                        continue;
                    }
                    let mut s = if v6 {
                        FrameSpec::ipv6_tcp(1234, 80)
                    } else {
                        FrameSpec::ipv4_tcp(1234, 80)
                    }
                    .seq(0xfffffff0)
                    .ack(77)
                    .flags(TCP_ACK | TCP_PSH)
                    .timestamps(1, 2)
                    .payload(payload)
                    .padding(padding);
                    if link == 1 {
                        s = s.raw_ip();
                    } else if link == 2 {
                        s = s.ipoib(0x1234);
                    }
                    if vlans >= 1 {
                        s = s.vlan(TPID_8021AD, 100);
                    }
                    if vlans >= 2 {
                        s = s.vlan(TPID_8021Q, 200);
                    }
                    out.push(s);
                }
            }
        }
        out
    }

    #[test]
    fn frames_parse_and_checksums_verify() {
        let payload: Vec<u8> = (0..1001u32).map(|i| (i * 7 + 3) as u8).collect();
        for pad in [&[][..], &[0, 0, 0, 0, 0, 0][..], &[1, 2, 3][..]] {
            for len in [0, 1, 2, 999, 1001] {
                for spec in specs(&payload[..len], pad) {
                    let frame = build(&spec);
                    assert_eq!(verify(&spec, &frame), (true, true), "{spec:?}");
                    assert_eq!(frame.len(), spec.len());
                }
            }
        }
    }

    #[test]
    fn corruption_is_detected() {
        let payload = [9u8; 33];
        for spec in specs(&payload, &[]) {
            let is_v4 = matches!(spec.ip, IpSpec::V4(_));
            let f = build(&spec.corrupt(Corrupt::TcpChecksum));
            assert_eq!(verify(&spec, &f), (true, false));
            let f = build(&spec.corrupt(Corrupt::IpChecksum));
            assert_eq!(verify(&spec, &f), (!is_v4, true));
        }
    }

    #[test]
    fn options_and_sack() {
        let payload = [1u8; 10];
        let spec = FrameSpec::ipv4_tcp(1, 2)
            .sack(&[(10, 20), (30, 40)])
            .timestamps(5, 6)
            .payload(&payload);
        let frame = build(&spec);
        assert_eq!(verify(&spec, &frame), (true, true));
        let p = SlicedPacket::from_ethernet(&frame).unwrap();
        let Some(TransportSlice::Tcp(t)) = p.transport else {
            panic!()
        };
        let opts: Vec<_> = t.options_iterator().map(|o| o.unwrap()).collect();
        use etherparse::TcpOptionElement::*;
        assert_eq!(
            opts,
            vec![
                Noop,
                Noop,
                SelectiveAcknowledgement((10, 20), [Some((30, 40)), None, None]),
                Noop,
                Noop,
                Timestamp(5, 6)
            ]
        );
        // A non-multiple-of-4 option list is padded with end-of-list bytes.
        let mut s = FrameSpec::ipv4_tcp(1, 2);
        s.tcp.options = Bytes::from_slice(&[2, 4, 5, 0xb4, 1, 3, 3, 7]);
        s.tcp.options.extend(&[4, 2]);
        assert_eq!(s.tcp.header_len(), 32);
        let f = build(&s);
        assert_eq!(verify(&s, &f), (true, true));
    }

    #[test]
    fn ipv4_options_and_fragments() {
        let payload = [1u8; 10];
        let mut s = FrameSpec::ipv4_tcp(1, 2).payload(&payload);
        if let IpSpec::V4(v4) = &mut s.ip {
            v4.options = Bytes::from_slice(&[1, 1, 1]); // NOPs, padded to 4
            v4.id = 0xbeef;
            v4.ttl = 3;
            v4.tos = 0x03;
        }
        let f = build(&s);
        assert_eq!(verify(&s, &f), (true, true));
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv4(v4)) = p.net else {
            panic!()
        };
        assert_eq!(v4.header().ihl(), 6);
        assert_eq!(v4.header().options(), &[1, 1, 1, 0]);
        assert_eq!(v4.header().identification(), 0xbeef);
        assert_eq!(v4.header().ttl(), 3);
        assert!(v4.header().dont_fragment());

        // A fragment: etherparse reports it as fragmented and does not parse TCP.
        if let IpSpec::V4(v4) = &mut s.ip {
            v4.options.clear();
            v4.df = false;
            v4.mf = true;
        }
        let f = build(&s);
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        assert!(p.is_ip_payload_fragmented());
        let Some(NetSlice::Ipv4(v4)) = p.net else {
            panic!()
        };
        assert_eq!(
            v4.header().to_header().calc_header_checksum(),
            v4.header().header_checksum()
        );
    }

    #[test]
    fn ipv6_extension_headers() {
        let payload = [0x42u8; 21];
        let mut s = FrameSpec::ipv6_tcp(5, 6)
            .payload(&payload)
            .vlan(TPID_8021Q, 7);
        if let IpSpec::V6(v6) = &mut s.ip {
            v6.traffic_class = 0xb8 | 0x01;
            v6.flow_label = 0xabcde;
            v6.hop_limit = 9;
            v6.ext[0] = Some(Ipv6Ext::new(Ipv6ExtKind::HopByHop, &[1, 4, 0, 0, 0, 0]));
            // Routing type 4, segments left 0.
            v6.ext[1] = Some(Ipv6Ext::new(Ipv6ExtKind::Routing, &[4, 0, 0, 0, 0, 0]));
            v6.ext[2] = Some(Ipv6Ext::new(
                Ipv6ExtKind::DestinationOptions,
                &[1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            ));
        }
        assert_eq!(s.ip.header_len(), 40 + 8 + 8 + 16);
        let f = build(&s);
        assert_eq!(verify(&s, &f), (true, true));
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv6(v6)) = p.net else {
            panic!()
        };
        assert_eq!(v6.header().traffic_class(), 0xb9);
        assert_eq!(v6.header().flow_label().value(), 0xabcde);
        assert_eq!(v6.header().hop_limit(), 9);
        assert_eq!(v6.extensions().slice().len(), 32);

        // Add a Fragment header: etherparse sees a fragment.
        if let IpSpec::V6(v6) = &mut s.ip {
            v6.fragment = Some(Ipv6Fragment {
                offset: 0,
                more: true,
                ident: 99,
            });
        }
        let f = build(&s);
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        assert!(p.is_ip_payload_fragmented());
    }

    #[test]
    fn reference_sum_matches_etherparse_and_padding_rules() {
        let data: Vec<u8> = (0..257u32).map(|i| (i * 31 + 1) as u8).collect();
        for n in 0..data.len() {
            let ours = !ones_complement_sum(&data[..n]);
            let theirs = etherparse::checksum::Sum16BitWords::new()
                .add_slice(&data[..n])
                .ones_complement()
                .to_be();
            assert_eq!(ours, theirs, "len {n}");
        }
        assert!(padding_is_neutral(&[0; 6]));
        assert!(padding_is_neutral(&[0xff, 0xff]));
        assert!(padding_is_neutral(&[0x12, 0x34, 0xed, 0xcb]));
        assert!(!padding_is_neutral(&[0, 1]));
        // complete_checksum over a valid IPv4 frame: the IP header part sums to -0, so the
        // complete sum equals the sum of the TCP segment alone.
        let payload = [7u8; 40];
        let s = FrameSpec::ipv4_tcp(1, 2).payload(&payload);
        let f = build(&s);
        assert_eq!(
            complete_checksum(&f, crate::LinkKind::Ethernet),
            add16(0xffff, ones_complement_sum(&f[34..]))
        );
    }
}
