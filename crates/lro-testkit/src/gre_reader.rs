//! A second, independent reader of GRE-tunnelled TCP frames: etherparse for the IP and TCP
//! layers, the GRE header read here from RFC 2784/2890 (not through `lro_gre`, nor through
//! [`crate::oracle`]). [`crate::check::check`] judges every rewritten tunnelled segment with
//! it too ([`cross_check`]), so that a reading mistake shared by the engine and the oracle
//! does not go unseen.

use crate::built::Pushed;
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::{OutChecksum, RxMeta, SegmentInfo};

/// Everything two frames must share to be one flow: outer link (with a stripped tag), outer
/// addresses and flow label, the GRE flags, protocol and key, the inner link header (TEB), the
/// inner addresses, flow label and ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    /// NIC-stripped VLAN TCI.
    pub stripped: Option<u16>,
    /// The outer link header bytes.
    pub outer_link: Vec<u8>,
    /// Outer source, destination, flow label.
    pub outer: (Vec<u8>, Vec<u8>, u32),
    /// GRE flags and version, protocol type, key.
    pub gre: (u16, u16, Option<u32>),
    /// The inner link header bytes (TEB), empty otherwise.
    pub inner_link: Vec<u8>,
    /// Inner source, destination, flow label.
    pub inner: (Vec<u8>, Vec<u8>, u32),
    /// TCP source and destination ports.
    pub ports: (u16, u16),
}

/// A GRE-tunnelled TCP frame as this reader sees it.
#[derive(Debug, Clone)]
pub struct Read {
    /// Flow identity.
    pub id: Identity,
    /// Offsets: outer IP, GRE, inner IP, TCP, TCP payload; the end of the outer datagram.
    pub outer_l3: usize,
    /// GRE header offset.
    pub gre: usize,
    /// GRE header length.
    pub gre_len: usize,
    /// Inner IP header offset.
    pub inner_l3: usize,
    /// TCP header offset.
    pub l4: usize,
    /// TCP payload offset.
    pub payload: usize,
    /// End of the outer datagram.
    pub end: usize,
    /// Outer IPv6.
    pub outer_v6: bool,
    /// Inner IPv6.
    pub inner_v6: bool,
    /// Sequence number.
    pub seq: u32,
    /// ACK number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Window.
    pub window: u16,
    /// Outer IPv4 header checksum right (true for IPv6).
    pub outer_ip_ok: bool,
    /// GRE checksum right (None without C).
    pub gre_ok: Option<bool>,
    /// Inner IPv4 header checksum right (true for IPv6).
    pub inner_ip_ok: bool,
    /// TCP checksum right.
    pub tcp_ok: bool,
    /// The TCP checksum field holds the pseudo-header sum (CHECKSUM_PARTIAL output).
    pub tcp_partial: bool,
    /// Outer TTL / hop limit.
    pub outer_ttl: u8,
    /// Outer IPv4 ID.
    pub outer_id: u16,
    /// Inner IPv4 ID.
    pub inner_id: u16,
}

impl Read {
    /// Every checksum right.
    pub fn checksums_ok(&self) -> bool {
        self.outer_ip_ok && self.gre_ok != Some(false) && self.inner_ip_ok && self.tcp_ok
    }

    /// GRE version 0 with only C and K (what may merge).
    pub fn gre_mergeable(&self) -> bool {
        self.id.gre.0 & !0xa000 == 0
    }

    /// The TCP payload bytes.
    pub fn payload<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        &b[self.payload..self.end]
    }
}

fn offset(base: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - base.as_ptr() as usize
}

fn sum(data: &[u8]) -> u32 {
    let mut s: u32 = data
        .chunks(2)
        .map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

fn folded_zero(s: u32) -> bool {
    let mut s = s;
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s == 0xffff || s == 0
}

/// The GRE header's length and identity from RFC 2784/2890 (no routing: this reader only
/// reads frames it was told are GRE without R).
fn gre_fields(g: &[u8]) -> Option<(usize, u16, u16, Option<u32>)> {
    let flags = u16::from_be_bytes([*g.first()?, *g.get(1)?]);
    let proto = u16::from_be_bytes([*g.get(2)?, *g.get(3)?]);
    if flags & 0x4000 != 0 {
        return None;
    }
    let mut at = 4;
    if flags & 0x8000 != 0 {
        at += 4;
    }
    let key = if flags & 0x2000 != 0 {
        let k = g.get(at..at + 4)?;
        at += 4;
        Some(u32::from_be_bytes([k[0], k[1], k[2], k[3]]))
    } else {
        None
    };
    if flags & 0x1000 != 0 {
        at += 4;
    }
    (g.len() >= at).then_some((at, flags, proto, key))
}

/// Reads an outer-Ethernet (or raw IP, or IPoIB) / IP / GRE / (Ethernet) / IP / TCP frame.
/// `None` for anything else.
pub fn read(b: &[u8], meta: &RxMeta) -> Option<Read> {
    let outer = match meta.link {
        lro_core::LinkKind::Ethernet => SlicedPacket::from_ethernet(b),
        link => SlicedPacket::from_ip(b.get(link.header_len()..)?),
    }
    .ok()?;
    let (outer_l3, outer_v6, src, dst, label, gre_bytes, outer_ip_ok, ttl, oid) = match outer.net? {
        NetSlice::Ipv4(v4) => {
            let h = v4.header();
            if h.protocol() != etherparse::IpNumber::GRE || h.is_fragmenting_payload() {
                return None;
            }
            let hh = h.to_header();
            (
                offset(b, h.slice()),
                false,
                h.source().to_vec(),
                h.destination().to_vec(),
                0,
                v4.payload().payload,
                hh.header_checksum == hh.calc_header_checksum(),
                h.ttl(),
                h.identification(),
            )
        }
        NetSlice::Ipv6(v6) => {
            if v6.payload().ip_number != etherparse::IpNumber::GRE || v6.is_payload_fragmented() {
                return None;
            }
            let h = v6.header();
            (
                offset(b, h.slice()),
                true,
                h.source().to_vec(),
                h.destination().to_vec(),
                h.flow_label().value(),
                v6.payload().payload,
                true,
                h.hop_limit(),
                0,
            )
        }
        _ => return None,
    };
    let gre = offset(b, gre_bytes);
    let end = gre + gre_bytes.len();
    let (gre_len, gflags, proto, key) = gre_fields(gre_bytes)?;
    let gre_ok = (gflags & 0x8000 != 0).then(|| folded_zero(sum(gre_bytes)));
    let carried = &gre_bytes[gre_len..];
    let (inner, inner_link) = match proto {
        0x0800 | 0x86dd => (SlicedPacket::from_ip(carried).ok()?, Vec::new()),
        0x6558 => {
            let p = SlicedPacket::from_ethernet(carried).ok()?;
            let l3 = match &p.net {
                Some(NetSlice::Ipv4(v4)) => offset(carried, v4.header().slice()),
                Some(NetSlice::Ipv6(v6)) => offset(carried, v6.header().slice()),
                _ => return None,
            };
            (p, carried[..l3].to_vec())
        }
        _ => return None,
    };
    let (inner_l3, inner_v6, isrc, idst, ilabel, inner_ip_ok, iid, iend) = match inner.net? {
        NetSlice::Ipv4(v4) => {
            let h = v4.header();
            let hh = h.to_header();
            (
                offset(b, h.slice()),
                false,
                h.source().to_vec(),
                h.destination().to_vec(),
                0,
                hh.header_checksum == hh.calc_header_checksum(),
                h.identification(),
                offset(b, h.slice()) + usize::from(h.total_len()),
            )
        }
        NetSlice::Ipv6(v6) => {
            let h = v6.header();
            (
                offset(b, h.slice()),
                true,
                h.source().to_vec(),
                h.destination().to_vec(),
                h.flow_label().value(),
                true,
                0,
                offset(b, h.slice()) + 40 + usize::from(h.payload_length()),
            )
        }
        _ => return None,
    };
    if iend != end {
        return None;
    }
    let Some(TransportSlice::Tcp(t)) = inner.transport else {
        return None;
    };
    let l4 = offset(b, t.slice());
    let payload = l4 + t.slice().len() - t.payload().len();
    let tcp_bytes = &b[l4..end];
    let pseudo = {
        let mut p = sum(&isrc) + sum(&idst) + 6 + tcp_bytes.len() as u32;
        while p > 0xffff {
            p = (p & 0xffff) + (p >> 16);
        }
        p
    };
    let tcp_ok = folded_zero(pseudo + sum(tcp_bytes));
    let tcp_partial = u32::from(t.checksum()) == pseudo;
    Some(Read {
        id: Identity {
            stripped: meta.vlan_stripped,
            outer_link: b[..outer_l3].to_vec(),
            outer: (src, dst, label),
            gre: (gflags, proto, key),
            inner_link,
            inner: (isrc, idst, ilabel),
            ports: (t.source_port(), t.destination_port()),
        },
        outer_l3,
        gre,
        gre_len,
        inner_l3,
        l4,
        payload,
        end,
        outer_v6,
        inner_v6,
        seq: t.sequence_number(),
        ack: t.acknowledgment_number(),
        flags: t.slice()[13],
        window: t.window_size(),
        outer_ip_ok,
        gre_ok,
        inner_ip_ok,
        tcp_ok,
        tcp_partial,
        outer_ttl: ttl,
        outer_id: oid,
        inner_id: iid,
    })
}

/// A frame's GRE header with the checksum field left out.
fn bytes_of_gre(b: &[u8], r: &Read) -> Vec<u8> {
    let mut g = b[r.gre..r.gre + r.gre_len].to_vec();
    if r.id.gre.0 & 0x8000 != 0 {
        g[4..6].fill(0);
    }
    g
}

/// A rewritten segment of tunnelled frames as this reader sees it: every frame reads as GRE
/// TCP with the head's identity (GRE header equal but for its checksum, outer TTL equal when
/// several merged); the output reads with the same identity, its outer length is its length,
/// its payload is its frames' in order, its outer and inner IPv4 header checksums, GRE
/// checksum and TCP checksum (or pseudo-header sum for `Partial`) are right, and its outer
/// link header is the head's. Panics with a description on a violation.
pub fn cross_check(inputs: &[Pushed], ids: &[usize], bytes: &[u8], info: &SegmentInfo) {
    let head = &inputs[ids[0]];
    let h = read(&head.bytes, &head.meta)
        .unwrap_or_else(|| panic!("segment {ids:?}: its head does not read as GRE TCP"));
    let mut payload = Vec::new();
    for &i in ids {
        let f = &inputs[i];
        let r = read(&f.bytes, &f.meta)
            .unwrap_or_else(|| panic!("segment {ids:?}: frame {i} does not read as GRE TCP"));
        assert_eq!(
            r.id, h.id,
            "isolation: segment {ids:?} mixes flows at frame {i}"
        );
        if ids.len() > 1 {
            assert!(
                r.gre_mergeable(),
                "segment {ids:?}: frame {i} has GRE flags {:#x}",
                r.id.gre.0
            );
            assert_eq!(
                r.outer_ttl, h.outer_ttl,
                "segment {ids:?}: frame {i} outer TTL differs"
            );
            assert_eq!(
                bytes_of_gre(&f.bytes, &r),
                bytes_of_gre(&head.bytes, &h),
                "segment {ids:?}: frame {i} GRE header differs beyond its checksum"
            );
        }
        payload.extend_from_slice(r.payload(&f.bytes));
    }
    let o = read(bytes, &head.meta)
        .unwrap_or_else(|| panic!("segment {ids:?}: output does not read as GRE TCP"));
    assert_eq!(o.id, h.id, "segment {ids:?}: output identity changed");
    assert_eq!(o.end, bytes.len(), "segment {ids:?}: outer length vs bytes");
    assert_eq!(
        o.payload(bytes),
        &payload[..],
        "segment {ids:?}: payload is not its frames' in order"
    );
    assert!(
        o.outer_ip_ok && o.inner_ip_ok,
        "segment {ids:?}: IPv4 header checksum wrong"
    );
    assert_ne!(o.gre_ok, Some(false), "segment {ids:?}: GRE checksum wrong");
    match info.checksum {
        OutChecksum::Full => assert!(o.tcp_ok, "segment {ids:?}: TCP checksum wrong"),
        OutChecksum::Partial => assert!(
            o.tcp_partial,
            "segment {ids:?}: partial TCP checksum is not the pseudo sum"
        ),
        _ => {}
    }
    assert_eq!(
        &bytes[..o.outer_l3],
        &head.bytes[..h.outer_l3],
        "segment {ids:?}: outer link header changed"
    );
}
