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
    /// 1 Ethernet, 2 raw IP.
    pub link: u8,
    /// NIC-stripped VLAN TCI.
    pub stripped: Option<u16>,
    /// Destination then source MAC (zero for raw IP).
    pub macs: [u8; 12],
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
}

/// How the reference classifies a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Class {
    /// A TCP segment with readable headers.
    Tcp(Box<Tcp>),
    /// An IP fragment of a TCP datagram (IPv4 MF/offset/reserved bit, IPv6 fragment header).
    Fragment,
    /// IP header readable, not TCP (or an IPv6 extension header the engine does not walk).
    NotTcp,
    /// Not IP at all (other ethertype, a third VLAN tag, other version nibble).
    NotIp,
    /// Too short or inconsistent lengths.
    Malformed,
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
    /// IPv4 header longer than 20 bytes.
    pub ip_opts: bool,
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

/// Reads a frame the way the engine's contract says it must be read.
pub fn classify(b: &[u8], meta: &RxMeta) -> Class {
    let mut id = Identity {
        link: 2,
        stripped: meta.vlan_stripped,
        macs: [0; 12],
        tags: [None, None],
        version: 0,
        src: [0; 16],
        dst: [0; 16],
        label: 0,
        sport: 0,
        dport: 0,
    };
    let l3 = match meta.link {
        LinkKind::Ethernet => {
            id.link = 1;
            if b.len() < 14 {
                return Class::Malformed;
            }
            id.macs.copy_from_slice(&b[..12]);
            let mut at = 12;
            let mut ntags = 0;
            loop {
                let et = be16(b, at);
                if et == 0x8100 || et == 0x88a8 {
                    if ntags == 2 {
                        return Class::NotIp;
                    }
                    if b.len() < at + 2 + 4 {
                        return Class::Malformed;
                    }
                    id.tags[ntags] = Some((et, be16(b, at + 2)));
                    ntags += 1;
                    at += 4;
                    continue;
                }
                let want = match et {
                    0x0800 => 4,
                    0x86dd => 6,
                    _ => return Class::NotIp,
                };
                // The version nibble must agree with the ethertype.
                match b.get(at + 2) {
                    Some(v) if v >> 4 == want => {}
                    _ => return Class::Malformed,
                }
                break at + 2;
            }
        }
        LinkKind::RawIp => 0,
        LinkKind::Ipoib => {
            // RFC 4391 section 6: EtherType, 2 reserved bytes.
            id.link = 3;
            if b.len() < 4 {
                return Class::Malformed;
            }
            let want = match be16(b, 0) {
                0x0800 => 4,
                0x86dd => 6,
                _ => return Class::NotIp,
            };
            match b.get(4) {
                Some(v) if v >> 4 == want => {}
                _ => return Class::Malformed,
            }
            4
        }
        _ => return Class::NotIp,
    };
    match b.get(l3).map(|v| v >> 4) {
        None => Class::Malformed,
        Some(4) => ipv4(b, l3, id),
        Some(6) => ipv6(b, l3, id),
        Some(_) => Class::NotIp,
    }
}

fn ipv4(b: &[u8], l3: usize, mut id: Identity) -> Class {
    if b.len() < l3 + 20 {
        return Class::Malformed;
    }
    let ihl = usize::from(b[l3] & 15) * 4;
    let total = usize::from(be16(b, l3 + 2));
    if ihl < 20 || total < ihl || l3 + total > b.len() {
        return Class::Malformed;
    }
    if b[l3 + 9] != 6 {
        return Class::NotTcp;
    }
    let frag = be16(b, l3 + 6);
    if frag & 0xbfff != 0 {
        return Class::Fragment;
    }
    id.version = 4;
    id.src[..4].copy_from_slice(&b[l3 + 12..l3 + 16]);
    id.dst[..4].copy_from_slice(&b[l3 + 16..l3 + 20]);
    tcp(b, l3, l3 + ihl, l3 + total, id, false).map_or(Class::Malformed, |mut t| {
        t.ttl = b[l3 + 8];
        t.tos = b[l3 + 1];
        t.df = frag & 0x4000 != 0;
        t.ip_id = be16(b, l3 + 4);
        t.ip_opts = ihl > 20;
        Class::Tcp(Box::new(t))
    })
}

fn ipv6(b: &[u8], l3: usize, mut id: Identity) -> Class {
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
    while next != 6 {
        match next {
            0 if walked == 0 => {}
            43 | 60 => {}
            44 => return Class::Fragment,
            _ => return Class::NotTcp,
        }
        if walked == 8 || at + 2 > ip_end {
            return Class::Malformed;
        }
        next = b[at];
        at += 8 * (usize::from(b[at + 1]) + 1);
        walked += 1;
        if at > ip_end {
            return Class::Malformed;
        }
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

/// Both checksums right, for a frame the reference reads as TCP.
pub fn checksums_ok(b: &[u8], t: Option<&Tcp>) -> bool {
    t.is_some_and(|t| ip_checksum_ok(b, t) && tcp_checksum_ok(b, t))
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
}

/// The CHECKSUM_COMPLETE value a NIC reports: the sum from the end of the link header (14-byte
/// Ethernet, 4-byte IPoIB; raw IP: from the start) to the end of the frame.
pub fn complete_sum(b: &[u8], link: LinkKind) -> u16 {
    match link {
        LinkKind::Ethernet => sum(b.get(14..).unwrap_or(&[])),
        LinkKind::Ipoib => sum(b.get(4..).unwrap_or(&[])),
        _ => sum(b),
    }
}
