//! An independent reference reading of frames: which bytes are a TCP segment the engine may
//! coalesce, what its flow identity is, and whether its checksums are right.
//!
//! Written from the protocol rules (and the acceptance rules DESIGN.md and `lro_core::wire`
//! document), not from the engine's code paths: simple, slow and obviously bounds-checked, so
//! the fuzz targets can compare the engine's parser against it and judge the engine's output
//! with it.

use lro_core::{LinkKind, RxMeta};

/// Flow identity: every field two frames must share to be merged (DESIGN.md invariant 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// 1 Ethernet, 2 raw IP, 3 IPoIB.
    pub link: u8,
    /// NIC-stripped VLAN TCI.
    pub stripped: Option<u16>,
    /// Destination then source MAC (zero for raw IP and IPoIB).
    pub macs: [u8; 12],
    /// IPoIB's reserved field (RFC 4391 section 6), zero for other links: frames that differ
    /// here are not merged (Linux GRO compares the whole hard header).
    pub ipoib_reserved: u16,
    /// In-line VLAN tags (TPID, TCI), outer first.
    pub tags: [Option<(u16, u16)>; 2],
    /// 4 or 6.
    pub version: u8,
    /// Addresses (IPv4 in the first four bytes).
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// IPv6 flow label.
    pub label: u32,
    /// TCP ports.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// The tunnel, for a frame read through GRE ([`classify_gre`]).
    pub tunnel: Option<TunnelId>,
}

/// The tunnel part of a flow's identity (GRE, RFC 2784/2890): the outer IP version,
/// addresses and flow label, the GRE flags-and-version word, protocol type and key, and for
/// transparent Ethernet bridging the inner link header's addresses and tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TunnelId {
    /// 4 or 6.
    pub outer_version: u8,
    /// Outer source address (IPv4 in the first four bytes).
    pub outer_src: [u8; 16],
    /// Outer destination address.
    pub outer_dst: [u8; 16],
    /// Outer IPv6 flow label.
    pub outer_label: u32,
    /// GRE flags and version.
    pub flags: u16,
    /// GRE protocol type.
    pub protocol: u16,
    /// GRE key (K).
    pub key: Option<u32>,
    /// TEB: the inner Ethernet header's MACs and its tag (TPID, TCI), zero otherwise.
    pub inner_link: [u8; 16],
}

impl TunnelId {
    /// GRE version 0 with no flags but C and K (RFC 2890): a header frames may be merged
    /// under (Linux `gre_gro_receive` flushes on any other bit).
    pub fn mergeable(&self) -> bool {
        self.flags & !0xa000 == 0
    }
}

/// Where a tunnelled frame's outer layers are, and the outer IP header's facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outer {
    /// Outer IP header offset.
    pub l3: usize,
    /// Outer IPv6?
    pub v6: bool,
    /// GRE header offset.
    pub gre: usize,
    /// GRE header length.
    pub gre_len: usize,
    /// Outer TTL / hop limit.
    pub ttl: u8,
    /// Outer TOS / traffic class.
    pub tos: u8,
    /// Outer DF.
    pub df: bool,
    /// Outer IPv4 ID.
    pub ip_id: u16,
    /// Outer IPv4 header with options.
    pub opts: bool,
}

impl Outer {
    /// The GRE checksum field's offset, when C is set.
    pub fn checksum_at(&self, t: &Tcp) -> Option<usize> {
        let c = t.id.tunnel.is_some_and(|x| x.flags & 0x8000 != 0);
        c.then_some(self.gre + 4)
    }
}

/// How the reference classifies a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// A TCP segment with readable headers.
    Tcp(Box<Tcp>),
    /// An IP fragment of a TCP datagram (IPv4 MF/offset/reserved bit, IPv6 fragment header),
    /// or of a GRE datagram: the held segments it must not overtake.
    Fragment(Box<Barrier>),
    /// A TCP datagram on its way through an IPv6 Routing header's route (segments left not 0),
    /// or with a Home Address destination option: its checksum covers an address the IPv6
    /// header does not show.
    Routed,
    /// IP header readable, not TCP (or an IPv6 extension header the engine does not walk).
    NotTcp,
    /// Not IP at all (other ethertype, a third VLAN tag, other version nibble).
    NotIp,
    /// Too short or inconsistent lengths.
    Malformed,
    /// A GRE header whose inner frame is never read ([`classify_gre`]): another version, or
    /// a routing field longer than lro-gre walks ([`GRE_MAX_LEN`]) or of odd length; or a GRE
    /// datagram inside the tunnel.
    Encap,
}

/// The longest GRE header, routing field included, whose inner frame is read (lro-gre's
/// limit: a longer one passes unread, [`Class::Encap`]).
pub const GRE_MAX_LEN: usize = 128;

/// The held segments a fragment must not overtake (DESIGN.md invariant 2: its flow's, though
/// its ports or its inner flow cannot be read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Barrier {
    /// A plain fragment: the flows of this identity, ports aside (they are zero here).
    Addresses(Identity),
    /// A fragment of a GRE datagram: the flows of every tunnel between these outer addresses
    /// (IPv4 in the first four bytes).
    Tunnel {
        /// Outer source address.
        src: [u8; 16],
        /// Outer destination address.
        dst: [u8; 16],
    },
    /// An IPv6 fragment whose Fragment header names an extension header, which may hide TCP
    /// or GRE: both kinds, the flows of this identity (ports aside) and every tunnel between
    /// its addresses.
    Either(Identity),
    /// A tunnelled TCP frame whose GRE header is never merged (another tunnel identity): its
    /// inner connection (this identity but for the tunnel) in any tunnel between the same
    /// outer addresses.
    Connection(Identity),
}

impl Barrier {
    /// Whether the flow of `id` is one this fragment must not overtake.
    pub fn covers(&self, id: &Identity) -> bool {
        match self {
            Barrier::Addresses(a) => {
                id.tunnel.is_none()
                    && Identity {
                        sport: 0,
                        dport: 0,
                        ..*id
                    } == *a
            }
            Barrier::Tunnel { src, dst } => id
                .tunnel
                .is_some_and(|t| t.outer_src == *src && t.outer_dst == *dst),
            Barrier::Either(a) => {
                Barrier::Addresses(*a).covers(id)
                    || Barrier::Tunnel {
                        src: a.src,
                        dst: a.dst,
                    }
                    .covers(id)
            }
            Barrier::Connection(own) => own.tunnel.is_some_and(|t| {
                Barrier::Tunnel {
                    src: t.outer_src,
                    dst: t.outer_dst,
                }
                .covers(id)
                    && Identity {
                        tunnel: None,
                        ..*id
                    } == Identity {
                        tunnel: None,
                        ..*own
                    }
            }),
        }
    }
}

/// What a frame whose flow the engine cannot fully read must not overtake
/// ([`classify_gre`]): a fragment, or a tunnelled frame whose GRE header is never merged.
pub fn barrier(b: &[u8], meta: &RxMeta) -> Option<Barrier> {
    match classify_gre(b, meta) {
        Class::Fragment(barrier) => Some(*barrier),
        Class::Tcp(t) if t.id.tunnel.is_some_and(|x| !x.mergeable()) => {
            Some(Barrier::Connection(t.id))
        }
        _ => None,
    }
}

/// A TCP segment as the reference reads it. Offsets are from the start of the frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tcp {
    /// Flow identity.
    pub id: Identity,
    /// IP header offset.
    pub l3: usize,
    /// TCP header offset.
    pub l4: usize,
    /// Payload offset.
    pub payload: usize,
    /// End of the IP datagram.
    pub ip_end: usize,
    /// IPv6?
    pub v6: bool,
    /// Sequence number.
    pub seq: u32,
    /// ACK number.
    pub ack: u32,
    /// TCP header byte 12 (data offset and reserved bits).
    pub doff_byte: u8,
    /// Flags byte.
    pub flags: u8,
    /// Window.
    pub window: u16,
    /// TTL / hop limit.
    pub ttl: u8,
    /// TOS / traffic class.
    pub tos: u8,
    /// IPv4 DF.
    pub df: bool,
    /// IPv4 ID.
    pub ip_id: u16,
    /// IPv4 header longer than 20 bytes (the inner or the outer one).
    pub ip_opts: bool,
    /// The outer layers, for a frame read through GRE.
    pub outer: Option<Outer>,
}

impl Tcp {
    /// TCP payload length.
    pub fn payload_len(&self) -> usize {
        self.ip_end - self.payload
    }

    /// The TCP options bytes.
    pub fn options<'a>(&self, frame: &'a [u8]) -> &'a [u8] {
        &frame[self.l4 + 20..self.payload]
    }

    /// TSval when the options are exactly the aligned `NOP, NOP, TS` layout.
    pub fn tsval(&self, frame: &[u8]) -> Option<u32> {
        match self.options(frame) {
            [1, 1, 8, 10, a, b, c, d, ..] if self.payload - self.l4 == 32 => {
                Some(u32::from_be_bytes([*a, *b, *c, *d]))
            }
            _ => None,
        }
    }

    /// Options are empty or exactly the aligned timestamps (what `Lro` may merge).
    pub fn options_mergeable(&self, frame: &[u8]) -> bool {
        self.payload - self.l4 == 20 || self.tsval(frame).is_some()
    }
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

impl Identity {
    /// Nothing read yet but what the metadata says (the stripped tag).
    fn unread(meta: &RxMeta) -> Self {
        Identity {
            link: 2,
            stripped: meta.vlan_stripped,
            macs: [0; 12],
            ipoib_reserved: 0,
            tags: [None, None],
            version: 0,
            src: [0; 16],
            dst: [0; 16],
            label: 0,
            sport: 0,
            dport: 0,
            tunnel: None,
        }
    }
}

/// Reads a frame the way the engine's contract says it must be read.
pub fn classify(b: &[u8], meta: &RxMeta) -> Class {
    let mut id = Identity::unread(meta);
    let l3 = match link_layer(b, meta, &mut id) {
        Ok(l3) => l3,
        Err(c) => return c,
    };
    match b.get(l3).map(|v| v >> 4) {
        None => Class::Malformed,
        Some(4) => ipv4(b, l3, id, false),
        Some(6) => ipv6(b, l3, id, false),
        Some(_) => Class::NotIp,
    }
}

/// The link layer: the offset of the first IP header, with the link identity filled in.
fn link_layer(b: &[u8], meta: &RxMeta, id: &mut Identity) -> Result<usize, Class> {
    Ok(match meta.link {
        LinkKind::Ethernet => {
            id.link = 1;
            if b.len() < 14 {
                return Err(Class::Malformed);
            }
            id.macs.copy_from_slice(&b[..12]);
            let mut at = 12;
            let mut ntags = 0;
            loop {
                let et = be16(b, at);
                if et == 0x8100 || et == 0x88a8 {
                    if ntags == 2 {
                        return Err(Class::NotIp);
                    }
                    if b.len() < at + 2 + 4 {
                        return Err(Class::Malformed);
                    }
                    id.tags[ntags] = Some((et, be16(b, at + 2)));
                    ntags += 1;
                    at += 4;
                    continue;
                }
                let want = match et {
                    0x0800 => 4,
                    0x86dd => 6,
                    _ => return Err(Class::NotIp),
                };
                // The version nibble must agree with the ethertype.
                match b.get(at + 2) {
                    Some(v) if v >> 4 == want => {}
                    _ => return Err(Class::Malformed),
                }
                break at + 2;
            }
        }
        LinkKind::RawIp => 0,
        LinkKind::Ipoib => {
            // RFC 4391 section 6: EtherType, 2 reserved bytes.
            id.link = 3;
            if b.len() < 4 {
                return Err(Class::Malformed);
            }
            id.ipoib_reserved = be16(b, 2);
            let want = match be16(b, 0) {
                0x0800 => 4,
                0x86dd => 6,
                _ => return Err(Class::NotIp),
            };
            match b.get(4) {
                Some(v) if v >> 4 == want => {}
                _ => return Err(Class::Malformed),
            }
            4
        }
        _ => return Err(Class::NotIp),
    })
}

/// The IPv4 datagram at `l3`; `tunnel`: inside a GRE tunnel, where GRE again is
/// [`Class::Encap`].
fn ipv4(b: &[u8], l3: usize, mut id: Identity, tunnel: bool) -> Class {
    if b.len() < l3 + 20 {
        return Class::Malformed;
    }
    let ihl = usize::from(b[l3] & 15) * 4;
    let total = usize::from(be16(b, l3 + 2));
    if ihl < 20 || total < ihl || l3 + total > b.len() {
        return Class::Malformed;
    }
    match b[l3 + 9] {
        6 => {}
        47 if tunnel => return Class::Encap,
        _ => return Class::NotTcp,
    }
    let frag = be16(b, l3 + 6);
    id.version = 4;
    id.src[..4].copy_from_slice(&b[l3 + 12..l3 + 16]);
    id.dst[..4].copy_from_slice(&b[l3 + 16..l3 + 20]);
    if frag & 0xbfff != 0 {
        return Class::Fragment(Box::new(Barrier::Addresses(id)));
    }
    tcp(b, l3, l3 + ihl, l3 + total, id, false).map_or(Class::Malformed, |mut t| {
        t.ttl = b[l3 + 8];
        t.tos = b[l3 + 1];
        t.df = frag & 0x4000 != 0;
        t.ip_id = be16(b, l3 + 4);
        t.ip_opts = ihl > 20;
        Class::Tcp(Box::new(t))
    })
}

/// The IPv6 datagram at `l3`, as [`ipv4`].
fn ipv6(b: &[u8], l3: usize, mut id: Identity, tunnel: bool) -> Class {
    if b.len() < l3 + 40 {
        return Class::Malformed;
    }
    let plen = usize::from(be16(b, l3 + 4));
    let ip_end = l3 + 40 + plen;
    if plen == 0 || ip_end > b.len() {
        return Class::Malformed;
    }
    id.version = 6;
    id.src.copy_from_slice(&b[l3 + 8..l3 + 24]);
    id.dst.copy_from_slice(&b[l3 + 24..l3 + 40]);
    id.label = be32(b, l3) & 0xf_ffff;
    let mut next = b[l3 + 6];
    let mut at = l3 + 40;
    let mut walked = 0;
    let mut routed = false;
    while next != 6 {
        match next {
            0 if walked == 0 => {}
            43 | 60 => {}
            // A Fragment header names the first header of the part it cuts (RFC 8200 section
            // 4.5): GRE makes it a tunnel's fragment, an extension header may hide either.
            44 => {
                let first = b.get(at).copied().filter(|_| at < ip_end);
                return Class::Fragment(Box::new(match first {
                    Some(47) => Barrier::Tunnel {
                        src: id.src,
                        dst: id.dst,
                    },
                    Some(0 | 43 | 51 | 60) => Barrier::Either(id),
                    _ => Barrier::Addresses(id),
                }));
            }
            47 if tunnel => return Class::Encap,
            _ => return Class::NotTcp,
        }
        if walked == 8 || at + 2 > ip_end {
            return Class::Malformed;
        }
        let header = at;
        let kind = next;
        next = b[at];
        at += 8 * (usize::from(b[at + 1]) + 1);
        walked += 1;
        if at > ip_end {
            return Class::Malformed;
        }
        // Routing header: segments left (RFC 8200 section 4.4). Destination options: a Home
        // Address option (type 0xc9, RFC 6275), options read by their lengths.
        routed |= match kind {
            43 => b[header + 3] != 0,
            60 => {
                let mut o = header + 2;
                let mut home = false;
                while o < at {
                    if b[o] == 0xc9 {
                        home = true;
                        break;
                    }
                    if b[o] == 0 {
                        o += 1;
                    } else if o + 1 < at {
                        o += 2 + usize::from(b[o + 1]);
                    } else {
                        break;
                    }
                }
                home
            }
            _ => false,
        };
    }
    if routed {
        return Class::Routed;
    }
    tcp(b, l3, at, ip_end, id, true).map_or(Class::Malformed, |mut t| {
        t.ttl = b[l3 + 7];
        t.tos = ((be16(b, l3) >> 4) & 0xff) as u8;
        Class::Tcp(Box::new(t))
    })
}

fn tcp(b: &[u8], l3: usize, l4: usize, ip_end: usize, mut id: Identity, v6: bool) -> Option<Tcp> {
    if l4 + 20 > ip_end {
        return None;
    }
    let hlen = usize::from(b[l4 + 12] >> 4) * 4;
    if hlen < 20 || l4 + hlen > ip_end {
        return None;
    }
    id.sport = be16(b, l4);
    id.dport = be16(b, l4 + 2);
    Some(Tcp {
        id,
        l3,
        l4,
        payload: l4 + hlen,
        ip_end,
        v6,
        seq: be32(b, l4 + 4),
        ack: be32(b, l4 + 8),
        doff_byte: b[l4 + 12],
        flags: b[l4 + 13],
        window: be16(b, l4 + 14),
        ttl: 0,
        tos: 0,
        df: false,
        ip_id: 0,
        ip_opts: false,
        outer: None,
    })
}

/// The TCP view of a frame, if it is one.
pub fn tcp_of(b: &[u8], meta: &RxMeta) -> Option<Tcp> {
    match classify(b, meta) {
        Class::Tcp(t) => Some(*t),
        _ => None,
    }
}

/// Folded ones'-complement sum (RFC 1071), the slow obvious way.
pub fn sum(data: &[u8]) -> u16 {
    sum_from(0, data)
}

/// Adds `data` to a folded sum.
pub fn sum_from(init: u16, data: &[u8]) -> u16 {
    let mut acc = u64::from(init);
    let mut words = data.chunks_exact(8);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]))
            + u64::from(u16::from_be_bytes([w[2], w[3]]))
            + u64::from(u16::from_be_bytes([w[4], w[5]]))
            + u64::from(u16::from_be_bytes([w[6], w[7]]));
    }
    for pair in words.remainder().chunks(2) {
        let hi = u64::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |v| u64::from(*v));
        acc += hi | lo;
    }
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Ones'-complement addition.
pub fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// True for +0 and -0.
pub fn is_zero(s: u16) -> bool {
    s == 0 || s == 0xffff
}

/// Sum of the TCP pseudo-header.
pub fn pseudo(t: &Tcp, tcp_len: usize) -> u16 {
    let n = if t.v6 { 16 } else { 4 };
    let mut s = sum(&t.id.src[..n]);
    s = sum_from(s, &t.id.dst[..n]);
    s = add(s, 6);
    s = add(s, (tcp_len >> 16) as u16);
    add(s, tcp_len as u16)
}

/// IPv4 header checksum right (always true for IPv6).
pub fn ip_checksum_ok(b: &[u8], t: &Tcp) -> bool {
    t.v6 || is_zero(sum(&b[t.l3..t.l4]))
}

/// TCP checksum right.
pub fn tcp_checksum_ok(b: &[u8], t: &Tcp) -> bool {
    is_zero(add(pseudo(t, t.ip_end - t.l4), sum(&b[t.l4..t.ip_end])))
}

/// Both checksums right, for a frame the reference reads as TCP; through a tunnel, also the
/// outer IPv4 header checksum and the GRE checksum (C).
pub fn checksums_ok(b: &[u8], t: Option<&Tcp>) -> bool {
    t.is_some_and(|t| ip_checksum_ok(b, t) && tcp_checksum_ok(b, t) && tunnel_checksums_ok(b, t))
}

/// The outer IPv4 header checksum and the GRE checksum right (true without a tunnel).
pub fn tunnel_checksums_ok(b: &[u8], t: &Tcp) -> bool {
    let Some(o) = &t.outer else {
        return true;
    };
    let outer_ok = o.v6 || is_zero(sum(&b[o.l3..o.l3 + usize::from(b[o.l3] & 15) * 4]));
    let gre_ok = o.checksum_at(t).is_none() || is_zero(sum(&b[o.gre..t.ip_end]));
    outer_ok && gre_ok
}

/// Rewrites the IPv4 header and TCP checksums so they are right.
pub fn fix_checksums(b: &mut [u8], t: &Tcp) {
    if !t.v6 {
        b[t.l3 + 10..t.l3 + 12].fill(0);
        let c = !sum(&b[t.l3..t.l4]);
        b[t.l3 + 10..t.l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    b[t.l4 + 16..t.l4 + 18].fill(0);
    let c = !add(pseudo(t, t.ip_end - t.l4), sum(&b[t.l4..t.ip_end]));
    b[t.l4 + 16..t.l4 + 18].copy_from_slice(&c.to_be_bytes());
    if let Some(o) = &t.outer {
        if let Some(at) = o.checksum_at(t) {
            b[at..at + 2].fill(0);
            let c = !sum(&b[o.gre..t.ip_end]);
            b[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        if !o.v6 {
            let hl = usize::from(b[o.l3] & 15) * 4;
            b[o.l3 + 10..o.l3 + 12].fill(0);
            let c = !sum(&b[o.l3..o.l3 + hl]);
            b[o.l3 + 10..o.l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
    }
}

/// Reads a frame as [`classify`] does, and also through GRE (RFC 2784, RFC 2890): an outer
/// IPv4/IPv6 header carrying protocol 47, a version-0 GRE header (the checksum word with C or
/// R, the key with K, the sequence number with S, then with R the RFC 1701 Source Route
/// Entries up to the null one, in that order) carrying IPv4, IPv6 or an Ethernet frame with at
/// most one tag (0x6558), whose IP datagram ends where the outer one does. Frames with S, R or
/// the other RFC 1701 bits are read (their identity carries the flags: they must never merge);
/// another version, a routing field longer than [`GRE_MAX_LEN`] allows or of odd length:
/// [`Class::Encap`]; another protocol: not TCP.
pub fn classify_gre(b: &[u8], meta: &RxMeta) -> Class {
    classify_gre_in(b, meta).0
}

/// A tunnel's outer addresses: source, destination (IPv4 in the first four bytes).
pub type Ends = ([u8; 16], [u8; 16]);

/// [`classify_gre`], and the tunnel's outer addresses (source, destination) when the frame
/// was read as far as its GRE header: an outer IP header, not a fragment, carrying GRE. A
/// frame refused past that point must not overtake its tunnel's held flows (the engine's
/// `FlowHint::Tunnel` names them).
pub fn classify_gre_in(b: &[u8], meta: &RxMeta) -> (Class, Option<Ends>) {
    let mut id = Identity::unread(meta);
    let l3 = match link_layer(b, meta, &mut id) {
        Ok(l3) => l3,
        Err(c) => return (c, None),
    };
    let mut tun = TunnelId {
        outer_version: 0,
        outer_src: [0; 16],
        outer_dst: [0; 16],
        outer_label: 0,
        flags: 0,
        protocol: 0,
        key: None,
        inner_link: [0; 16],
    };
    let mut outer = Outer {
        l3,
        v6: false,
        gre: 0,
        gre_len: 0,
        ttl: 0,
        tos: 0,
        df: false,
        ip_id: 0,
        opts: false,
    };
    // The outer header, as `ipv4`/`ipv6` read it, up to its payload.
    let end = match b.get(l3).map(|v| v >> 4) {
        Some(4) => {
            if b.len() < l3 + 20 {
                return (Class::Malformed, None);
            }
            let ihl = usize::from(b[l3] & 15) * 4;
            let total = usize::from(be16(b, l3 + 2));
            if ihl < 20 || total < ihl || l3 + total > b.len() {
                return (Class::Malformed, None);
            }
            if b[l3 + 9] != 47 {
                return (classify(b, meta), None);
            }
            let frag = be16(b, l3 + 6);
            tun.outer_version = 4;
            tun.outer_src[..4].copy_from_slice(&b[l3 + 12..l3 + 16]);
            tun.outer_dst[..4].copy_from_slice(&b[l3 + 16..l3 + 20]);
            if frag & 0xbfff != 0 {
                let barrier = Barrier::Tunnel {
                    src: tun.outer_src,
                    dst: tun.outer_dst,
                };
                return (Class::Fragment(Box::new(barrier)), None);
            }
            outer.gre = l3 + ihl;
            outer.ttl = b[l3 + 8];
            outer.tos = b[l3 + 1];
            outer.df = frag & 0x4000 != 0;
            outer.ip_id = be16(b, l3 + 4);
            outer.opts = ihl > 20;
            l3 + total
        }
        Some(6) => {
            if b.len() < l3 + 40 {
                return (Class::Malformed, None);
            }
            let plen = usize::from(be16(b, l3 + 4));
            let end = l3 + 40 + plen;
            if plen == 0 || end > b.len() {
                return (Class::Malformed, None);
            }
            let mut next = b[l3 + 6];
            let mut at = l3 + 40;
            let mut walked = 0;
            while next != 47 {
                match next {
                    0 if walked == 0 => {}
                    43 | 60 => {}
                    6 | 44 => return (classify(b, meta), None),
                    _ => return (Class::NotTcp, None),
                }
                if walked == 8 || at + 2 > end {
                    return (Class::Malformed, None);
                }
                next = b[at];
                at += 8 * (usize::from(b[at + 1]) + 1);
                walked += 1;
                if at > end {
                    return (Class::Malformed, None);
                }
            }
            tun.outer_version = 6;
            tun.outer_src.copy_from_slice(&b[l3 + 8..l3 + 24]);
            tun.outer_dst.copy_from_slice(&b[l3 + 24..l3 + 40]);
            tun.outer_label = be32(b, l3) & 0xf_ffff;
            outer.v6 = true;
            outer.gre = at;
            outer.ttl = b[l3 + 7];
            outer.tos = ((be16(b, l3) >> 4) & 0xff) as u8;
            end
        }
        None => return (Class::Malformed, None),
        Some(_) => return (Class::NotIp, None),
    };
    let ends = Some((tun.outer_src, tun.outer_dst));
    (gre_layer(b, id, &mut tun, outer, end), ends)
}

/// The GRE header at `outer.gre` and what it carries, to the outer datagram's `end`.
fn gre_layer(b: &[u8], id: Identity, tun: &mut TunnelId, mut outer: Outer, end: usize) -> Class {
    let g = outer.gre;
    if g + 4 > end {
        return Class::Malformed;
    }
    let flags = be16(b, g);
    if flags & 0x0007 != 0 {
        // Another version (PPTP's is 1): another layout.
        return Class::Encap;
    }
    let mut len = 4;
    if flags & 0xc000 != 0 {
        // The checksum word: with C, and with R (RFC 1701: the routing offset is in it).
        len += 4;
    }
    if flags & 0x2000 != 0 {
        if g + len + 4 > end {
            return Class::Malformed;
        }
        tun.key = Some(be32(b, g + len));
        len += 4;
    }
    if flags & 0x1000 != 0 {
        len += 4;
    }
    if flags & 0x4000 != 0 {
        // Source Route Entries (RFC 1701): address family, offset, length, that many bytes
        // of route; family 0 and length 0 end the list.
        loop {
            if len + 4 > GRE_MAX_LEN {
                return Class::Encap;
            }
            if g + len + 4 > end {
                return Class::Malformed;
            }
            let (family, sre_len) = (be16(b, g + len), b[g + len + 3]);
            len += 4 + usize::from(sre_len);
            if family == 0 && sre_len == 0 {
                break;
            }
        }
    }
    if g + len > end {
        return Class::Malformed;
    }
    if len % 2 != 0 {
        return Class::Encap;
    }
    tun.flags = flags;
    tun.protocol = be16(b, g + 2);
    outer.gre_len = len;
    let mut inner_l3 = g + len;
    let want = match tun.protocol {
        0x0800 => 4,
        0x86dd => 6,
        0x6558 => {
            // An Ethernet frame with at most one tag.
            if inner_l3 + 14 > end {
                return Class::Malformed;
            }
            tun.inner_link[..12].copy_from_slice(&b[inner_l3..inner_l3 + 12]);
            let mut et = be16(b, inner_l3 + 12);
            inner_l3 += 14;
            if et == 0x8100 || et == 0x88a8 {
                if inner_l3 + 4 > end {
                    return Class::Malformed;
                }
                tun.inner_link[12..14].copy_from_slice(&et.to_be_bytes());
                tun.inner_link[14..16].copy_from_slice(&b[inner_l3..inner_l3 + 2]);
                et = be16(b, inner_l3 + 2);
                inner_l3 += 4;
            }
            match et {
                0x0800 => 4,
                0x86dd => 6,
                _ => return Class::NotIp,
            }
        }
        _ => return Class::NotTcp,
    };
    let inner = &b[..end];
    if inner.get(inner_l3).map(|v| v >> 4) != Some(want) {
        return Class::Malformed;
    }
    let c = if want == 4 {
        ipv4(inner, inner_l3, id, true)
    } else {
        ipv6(inner, inner_l3, id, true)
    };
    match c {
        Class::Tcp(mut t) => {
            if t.ip_end != end {
                return Class::Malformed;
            }
            t.id.tunnel = Some(*tun);
            t.ip_opts |= outer.opts;
            t.outer = Some(outer);
            Class::Tcp(t)
        }
        // An inner fragment: its inner flow cannot be read, only its tunnel's endpoints.
        Class::Fragment(_) => Class::Fragment(Box::new(Barrier::Tunnel {
            src: tun.outer_src,
            dst: tun.outer_dst,
        })),
        other => other,
    }
}

/// The TCP view of a frame read through GRE when it is tunnelled, else as [`tcp_of`].
pub fn tcp_of_gre(b: &[u8], meta: &RxMeta) -> Option<Tcp> {
    match classify_gre(b, meta) {
        Class::Tcp(t) => Some(*t),
        _ => None,
    }
}
