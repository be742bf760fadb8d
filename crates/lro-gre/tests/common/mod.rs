//! Shared by the integration tests: an independent reader of GRE frames (etherparse for the
//! IP and TCP layers, the GRE header read here from RFC 2784/2890, not through `lro_gre`), a
//! recording sink, a runner, and the invariant checks of DESIGN.md applied to tunnels.
#![allow(dead_code, unreachable_pub)]

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::{
    Coalescer, Config, OutChecksum, Policy, RxChecksum, RxMeta, Segment, SegmentInfo, Sink, Verdict,
};
use lro_gre::Gre;

/// Everything two frames must share to be one flow: outer link (with a stripped tag), outer
/// addresses and flow label, the GRE flags, protocol and key, the inner link header (TEB), the
/// inner addresses, flow label and ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub stripped: Option<u16>,
    pub outer_link: Vec<u8>,
    pub outer: (Vec<u8>, Vec<u8>, u32),
    pub gre: (u16, u16, Option<u32>),
    pub inner_link: Vec<u8>,
    pub inner: (Vec<u8>, Vec<u8>, u32),
    pub ports: (u16, u16),
}

/// A GRE-tunnelled TCP frame as this reader sees it.
#[derive(Debug, Clone)]
pub struct Read {
    pub id: Identity,
    /// Offsets: outer IP, GRE, inner IP, TCP, TCP payload; the end of the outer datagram.
    pub outer_l3: usize,
    pub gre: usize,
    pub gre_len: usize,
    pub inner_l3: usize,
    pub l4: usize,
    pub payload: usize,
    pub end: usize,
    pub outer_v6: bool,
    pub inner_v6: bool,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Outer IPv4 header checksum right (true for IPv6), GRE checksum right (None without C),
    /// inner IPv4 header checksum right, TCP checksum right.
    pub outer_ip_ok: bool,
    pub gre_ok: Option<bool>,
    pub inner_ip_ok: bool,
    pub tcp_ok: bool,
    /// The TCP checksum field holds the pseudo-header sum (CHECKSUM_PARTIAL output).
    pub tcp_partial: bool,
    pub outer_ttl: u8,
    pub outer_id: u16,
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

/// Reads an outer-Ethernet (or raw IP) / IP / GRE / (Ethernet) / IP / TCP frame. `None` for
/// anything else.
pub fn read(b: &[u8], meta: &RxMeta) -> Option<Read> {
    let outer = match meta.link {
        lro_core::LinkKind::RawIp => SlicedPacket::from_ip(b),
        _ => SlicedPacket::from_ethernet(b),
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

/// The CHECKSUM_COMPLETE value a NIC would give: the sum after the 14-byte Ethernet header
/// (tags included), or of the whole raw IP frame.
pub fn complete(b: &[u8], meta: &RxMeta) -> u16 {
    lro_core::testing::complete_checksum(b, meta.link != lro_core::LinkKind::RawIp)
}

/// A frame with an identity the engine cannot forge.
#[derive(Debug)]
pub struct Tagged {
    pub id: usize,
    pub buf: Vec<u8>,
}

impl AsRef<[u8]> for Tagged {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl AsMut<[u8]> for Tagged {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

/// What came out.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)]
pub enum Out {
    Seg {
        ids: Vec<usize>,
        bytes: Vec<u8>,
        info: SegmentInfo,
    },
    Rel(usize),
}

#[derive(Debug, Default)]
pub struct Recorder {
    pub out: Vec<Out>,
}

impl Sink<Tagged> for Recorder {
    fn segment(&mut self, seg: Segment<'_, Tagged>) {
        let info = *seg.info();
        let mut bytes = vec![0u8; seg.len()];
        seg.copy_to(&mut bytes).expect("sized");
        let ids = seg.into_frames().map(|f| f.id).collect();
        self.out.push(Out::Seg { ids, bytes, info });
    }

    fn release(&mut self, frame: Tagged) {
        self.out.push(Out::Rel(frame.id));
    }
}

/// One input frame and what the test knows about it.
#[derive(Debug, Clone)]
pub struct Input {
    pub bytes: Vec<u8>,
    pub meta: RxMeta,
    /// The reader's view (None: not GRE/TCP as this reader reads it).
    pub read: Option<Read>,
    /// Its checksums are right and the metadata vouches for them correctly, or nobody checked
    /// and verification is on: what the engine may merge.
    pub trusted: bool,
}

impl Input {
    /// Reads the frame and decides whether it is trusted (software verification on).
    pub fn new(bytes: Vec<u8>, meta: RxMeta) -> Self {
        let read = read(&bytes, &meta);
        let good = read.as_ref().is_some_and(Read::checksums_ok);
        let trusted = good
            && match meta.checksum {
                RxChecksum::Complete(c) => c == complete(&bytes, &meta),
                _ => true,
            };
        Input {
            bytes,
            meta,
            read,
            trusted,
        }
    }
}

/// A step of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Push(usize),
    FlushAll,
}

/// Pushes every input in order (flushing where told), then flushes; checks conservation of
/// the counters and that nothing is held at the end.
pub fn run<C: Coalescer<Tagged>>(
    engine: &mut C,
    inputs: &[Input],
    ops: &[Op],
) -> (Recorder, Vec<Verdict>) {
    let mut rec = Recorder::default();
    let mut verdicts = vec![Verdict::Queued; inputs.len()];
    for op in ops {
        match *op {
            Op::Push(i) => {
                let f = Tagged {
                    id: i,
                    buf: inputs[i].bytes.clone(),
                };
                verdicts[i] = engine.push(f, &inputs[i].meta, &mut rec);
            }
            Op::FlushAll => engine.flush_all(&mut rec),
        }
    }
    engine.flush_all(&mut rec);
    assert_eq!(engine.held_frames(), 0, "frames held after flush_all");
    assert!(engine.stats().is_conserved(), "{:?}", engine.stats());
    (rec, verdicts)
}

/// Pushes every input in order with no flush but the last.
pub fn pushes(n: usize) -> Vec<Op> {
    (0..n).map(Op::Push).collect()
}

/// DESIGN.md's invariants on a record, for GRE: conservation, per-flow order, per-flow bytes,
/// isolation (the tunnel part of the identity included), no checksum laundering (GRE, outer,
/// inner, TCP), valid output (outer length and checksum, GRE checksum, inner lengths and
/// checksums), never-merged GRE flags; under `Gro`, software segmentation gives back the
/// original frames byte for byte.
pub fn check(inputs: &[Input], ops: &[Op], config: &Config, rec: &Recorder) -> Result<(), String> {
    let pushed: Vec<usize> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Push(i) => Some(*i),
            Op::FlushAll => None,
        })
        .collect();
    let mut seen = vec![0u32; inputs.len()];
    for o in &rec.out {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| seen[i] += 1),
            Out::Rel(i) => seen[*i] += 1,
        }
    }
    for &i in &pushed {
        if seen[i] != 1 {
            return Err(format!(
                "conservation: frame {i} came back {} times",
                seen[i]
            ));
        }
    }
    if seen.iter().sum::<u32>() as usize != pushed.len() {
        return Err("conservation: a frame came back that was not pushed".into());
    }
    // Order: per identity, frames delivered up leave in push order (every frame is pushed once
    // here; a released frame is not delivered up: it was superseded by a later one).
    let rank: std::collections::HashMap<usize, usize> =
        pushed.iter().enumerate().map(|(r, &i)| (i, r)).collect();
    let mut last: std::collections::HashMap<&Identity, usize> = Default::default();
    for o in &rec.out {
        let Out::Seg { ids, .. } = o else { continue };
        for &i in ids {
            if let Some(r) = &inputs[i].read {
                if let Some(&p) = last.get(&r.id) {
                    if rank[&p] > rank[&i] {
                        return Err(format!("order: frame {i} after frame {p} of its flow"));
                    }
                }
                last.insert(&r.id, i);
            }
        }
    }
    for o in &rec.out {
        match o {
            Out::Rel(i) => {
                let f = &inputs[*i];
                let r = f
                    .read
                    .as_ref()
                    .ok_or(format!("released {i}: not GRE TCP"))?;
                if config.policy == Policy::Gro {
                    return Err(format!("frame {i} released under Gro"));
                }
                if !f.trusted || !r.gre_mergeable() || r.payload < r.end {
                    return Err(format!(
                        "frame {i} released but not a trusted mergeable pure ACK"
                    ));
                }
            }
            Out::Seg { ids, bytes, info } => check_segment(inputs, config, ids, bytes, info)?,
        }
    }
    Ok(())
}

fn check_segment(
    inputs: &[Input],
    config: &Config,
    ids: &[usize],
    bytes: &[u8],
    info: &SegmentInfo,
) -> Result<(), String> {
    let head = &inputs[ids[0]];
    if info.checksum == OutChecksum::AsReceived {
        if ids.len() != 1 || bytes != &head.bytes[..] {
            return Err(format!("segment {ids:?}: AsReceived but changed"));
        }
        return Ok(());
    }
    let h = head
        .read
        .as_ref()
        .ok_or(format!("segment {ids:?}: rewritten, head not GRE TCP"))?;
    let mut payload = Vec::new();
    for &i in ids {
        let f = &inputs[i];
        let r = f
            .read
            .as_ref()
            .ok_or(format!("segment {ids:?}: frame {i} not GRE TCP"))?;
        if r.id != h.id {
            return Err(format!(
                "isolation: segment {ids:?} mixes flows at frame {i}: {:?} vs {:?}",
                r.id, h.id
            ));
        }
        if !f.trusted {
            return Err(format!(
                "laundering: frame {i} (bad or unverified checksum) in {ids:?}"
            ));
        }
        if ids.len() > 1 && !r.gre_mergeable() {
            return Err(format!(
                "segment {ids:?}: frame {i} has GRE flags {:#x}",
                r.id.gre.0
            ));
        }
        if ids.len() > 1 && r.outer_ttl != h.outer_ttl {
            return Err(format!("segment {ids:?}: frame {i} outer TTL differs"));
        }
        if ids.len() > 1 && bytes_of_gre(f, r) != bytes_of_gre(head, h) {
            return Err(format!(
                "segment {ids:?}: frame {i} GRE header differs beyond its checksum"
            ));
        }
        payload.extend_from_slice(r.payload(&f.bytes));
    }
    // Valid output.
    let o = read(bytes, &head.meta).ok_or(format!("segment {ids:?}: output does not parse"))?;
    if o.id != h.id {
        return Err(format!("segment {ids:?}: output identity changed"));
    }
    if o.end != bytes.len() {
        return Err(format!(
            "segment {ids:?}: outer length {} vs {} bytes",
            o.end,
            bytes.len()
        ));
    }
    if o.payload(bytes) != &payload[..] {
        return Err(format!(
            "segment {ids:?}: payload is not its frames' in order"
        ));
    }
    if !o.outer_ip_ok || !o.inner_ip_ok {
        return Err(format!("segment {ids:?}: IPv4 header checksum wrong"));
    }
    if o.gre_ok == Some(false) {
        return Err(format!("segment {ids:?}: GRE checksum wrong"));
    }
    match info.checksum {
        OutChecksum::Full if !o.tcp_ok => {
            return Err(format!("segment {ids:?}: TCP checksum wrong"))
        }
        OutChecksum::Partial if !o.tcp_partial => {
            return Err(format!(
                "segment {ids:?}: partial TCP checksum is not the pseudo sum"
            ))
        }
        _ => {}
    }
    if bytes[..o.outer_l3] != head.bytes[..h.outer_l3] {
        return Err(format!("segment {ids:?}: outer link header changed"));
    }
    if info.tunnel.is_none() {
        return Err(format!("segment {ids:?}: no tunnel in its info"));
    }
    if config.policy == Policy::Gro && ids.len() > 1 {
        let mut back: Vec<Vec<u8>> = Vec::new();
        let mut buf = vec![0u8; 65536 + 256];
        lro_core::gso::resegment_with::<Gre>(
            bytes,
            &head.meta,
            info.gso_size,
            (info.fixed_id, info.fixed_outer_id),
            &mut buf,
            |f| back.push(f.to_vec()),
        )
        .map_err(|e| format!("segment {ids:?}: resegment: {e}"))?;
        let orig: Vec<&[u8]> = ids.iter().map(|&i| &inputs[i].bytes[..]).collect();
        if back.len() != orig.len() || back.iter().zip(&orig).any(|(a, b)| a[..] != b[..]) {
            let at = back.iter().zip(&orig).position(|(a, b)| a[..] != b[..]);
            return Err(format!(
                "segment {ids:?}: resegment gave {} frames, not the originals (first difference at {at:?})",
                back.len()
            ));
        }
    }
    Ok(())
}

/// A frame's GRE header with the checksum field left out.
fn bytes_of_gre(f: &Input, r: &Read) -> Vec<u8> {
    let mut g = f.bytes[r.gre..r.gre + r.gre_len].to_vec();
    if r.id.gre.0 & 0x8000 != 0 {
        g[4..6].fill(0);
    }
    g
}

/// Counts the delivered segments of more than one frame.
pub fn merged_segments(rec: &Recorder) -> usize {
    rec.out
        .iter()
        .filter(|o| matches!(o, Out::Seg { ids, .. } if ids.len() > 1))
        .count()
}

/// The frames of a pcap or pcapng capture with their link-layer types; tolerant of truncated
/// and hostile files (stops at the first record that does not fit). `None`: not a capture.
pub fn read_capture(data: &[u8]) -> Option<Vec<(u32, Vec<u8>)>> {
    let magic = data.get(..4)?;
    if magic == [0x0a, 0x0d, 0x0d, 0x0a] {
        return Some(read_pcapng(data));
    }
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return None,
    };
    let word = |at: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    let link = word(20)? & 0x0fff_ffff;
    let mut out = Vec::new();
    let mut at = 24;
    while let Some(len) = word(at + 8) {
        let Some(frame) = data.get(at + 16..(at + 16).saturating_add(len as usize)) else {
            break;
        };
        out.push((link, frame.to_vec()));
        at += 16 + len as usize;
    }
    Some(out)
}

fn read_pcapng(data: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    let mut links = Vec::new();
    let mut le = true;
    let mut at = 0usize;
    let word = |le: bool, at: usize| -> Option<u32> {
        let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
        Some(if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        })
    };
    loop {
        if data.get(at..at + 4) == Some(&[0x0a, 0x0d, 0x0d, 0x0a][..]) {
            le = data.get(at + 8..at + 12) == Some(&[0x4d, 0x3c, 0x2b, 0x1a][..]);
            links.clear();
        }
        let (Some(kind), Some(len)) = (word(le, at), word(le, at + 4)) else {
            break;
        };
        let len = len as usize;
        if len < 12 || at + len > data.len() {
            break;
        }
        let body = &data[at + 8..at + len - 4];
        match kind {
            1 if body.len() >= 2 => {
                let b = [body[0], body[1]];
                links.push(u32::from(if le {
                    u16::from_le_bytes(b)
                } else {
                    u16::from_be_bytes(b)
                }));
            }
            6 if body.len() >= 20 => {
                let iface = word(le, at + 8).unwrap_or(0) as usize;
                let cap = word(le, at + 20).unwrap_or(0) as usize;
                let link = links.get(iface).copied().unwrap_or(1);
                out.push((link, body[20..20 + cap.min(body.len() - 20)].to_vec()));
            }
            3 if body.len() >= 4 => {
                out.push((links.first().copied().unwrap_or(1), body[4..].to_vec()))
            }
            _ => {}
        }
        at += len;
    }
    out
}

/// How a frame of a capture's link type is offered: Ethernet and raw IP as themselves, Linux
/// cooked captures as raw IP after their header; `None` for other link types.
pub fn link_of(link: u32, frame: &[u8]) -> Option<(RxMeta, Vec<u8>)> {
    match link {
        1 => Some((RxMeta::ethernet(0), frame.to_vec())),
        12 | 14 | 101 | 228 | 229 => Some((RxMeta::raw_ip(0), frame.to_vec())),
        113 => Some((RxMeta::raw_ip(0), frame.get(16..)?.to_vec())),
        276 => Some((RxMeta::raw_ip(0), frame.get(20..)?.to_vec())),
        _ => None,
    }
}

/// The workspace root (two levels above this crate).
pub fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A committed capture of `data/`, decompressed.
pub fn committed_capture(name: &str) -> Vec<(u32, Vec<u8>)> {
    let path = workspace().join("data").join(name);
    let xz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut raw).expect("xz");
    read_capture(&raw).expect("a pcap")
}
