//! Properties of the transmit side (`lro_core::tx`, `lro_core::gso`).
//!
//! - GSO is the inverse of the coalescer under `Gro`, both ways: `coalesce(gso(segment)) ==
//!   segment` and `resegment(coalesce(frames)) == frames`; every GSO frame is checked with a
//!   reference checksum and etherparse, and scatter-gather input gives the same frames as
//!   contiguous input.
//! - The TX queue under random interleavings of pushes, ACKs (advancing, duplicate, old,
//!   beyond `SND.NXT`, arbitrary `u32`), TX completions in any order and SACK-free
//!   retransmits, with sequence numbers wrapping at 2^32, against a simple model that keeps
//!   byte offsets in `u64` (no modular arithmetic): every buffer comes back exactly once,
//!   never while a transmission of it is uncompleted, never modified, and a retransmit carries
//!   exactly the unACKed bytes.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::gso::{self, Layout};
use lro_core::testing::{
    add16, ones_complement_sum, pseudo_header_sum_v4, pseudo_header_sum_v6, seal_ipv4_header,
    FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, TCP_ACK, TCP_CWR, TCP_ECE, TCP_FIN, TCP_PSH,
    TPID_8021Q,
};
use lro_core::tx::{
    AckOutcome, Completion, Post, RetransmitOptions, TxChecksum, TxError, TxQueue, TxStats, TxToken,
};
use lro_core::wire::{ipv4, ipv6};
use lro_core::{Config, Engine, LinkKind, RxMeta, Segment, SegmentInfo, Sink, Sizes};
use proptest::prelude::*;
use std::collections::{HashMap, HashSet};

// ---------------------------------------------------------------------------------------------
// Frames.

/// Header shape of a flow.
#[derive(Debug, Clone, Copy)]
struct Shape {
    v6: bool,
    raw: bool,
    vlan: bool,
    ts: Option<(u32, u32)>,
    ext: bool,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        any::<bool>(),
        0u8..4,
        any::<bool>(),
        proptest::option::of((any::<u32>(), any::<u32>())),
    )
        .prop_map(|(v6, link, ext, ts)| Shape {
            v6,
            raw: link == 0,
            vlan: link == 1,
            ts,
            ext: v6 && ext,
        })
}

impl Shape {
    fn meta(&self) -> RxMeta {
        if self.raw {
            RxMeta::raw_ip(0)
        } else {
            RxMeta::ethernet(0)
        }
    }

    fn link(&self) -> LinkKind {
        if self.raw {
            LinkKind::RawIp
        } else {
            LinkKind::Ethernet
        }
    }
}

/// Field values of one frame.
#[derive(Debug, Clone, Copy)]
struct Fields {
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    ip_id: u16,
}

fn build(shape: &Shape, f: Fields, payload: &[u8]) -> Vec<u8> {
    let mut s = if shape.v6 {
        FrameSpec::ipv6_tcp(40000, 5201)
    } else {
        FrameSpec::ipv4_tcp(40000, 5201)
    }
    .seq(f.seq)
    .ack(f.ack)
    .flags(f.flags)
    .window(f.window)
    .payload(payload);
    if let Some((val, ecr)) = shape.ts {
        s = s.timestamps(val, ecr);
    }
    if shape.raw {
        s = s.raw_ip();
    }
    if shape.vlan {
        s = s.vlan(TPID_8021Q, 42);
    }
    match &mut s.ip {
        IpSpec::V4(v4) => v4.id = f.ip_id,
        IpSpec::V6(v6) => {
            if shape.ext {
                v6.ext[0] = Some(Ipv6Ext::new(Ipv6ExtKind::HopByHop, &[1, 4, 0, 0, 0, 0]));
            }
        }
    }
    let mut b = vec![0u8; s.len()];
    s.write(&mut b).expect("sized by len()");
    b
}

/// What etherparse and the reference checksum say about a frame.
#[derive(Debug, PartialEq, Eq)]
struct Checked {
    seq: u32,
    ack: u32,
    window: u16,
    flags: u8,
    ip_id: Option<u16>,
    payload: Vec<u8>,
}

fn check_frame(frame: &[u8], raw: bool) -> Result<Checked, String> {
    let p = if raw {
        SlicedPacket::from_ip(frame)
    } else {
        SlicedPacket::from_ethernet(frame)
    }
    .map_err(|e| format!("etherparse: {e:?}"))?;
    let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
        return Err("no TCP".into());
    };
    let seg = tcp.slice();
    let tcp_len = seg.len() as u32;
    // Where a header starts in the frame (tags included): etherparse cuts the datagram at the
    // IP length, so the IP length must be checked to end the frame, or bytes after it would
    // pass unseen.
    let at = |header: &[u8]| header.as_ptr() as usize - frame.as_ptr() as usize;
    let (pseudo, ip_id) = match &p.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            if ones_complement_sum(h.slice()) != 0xffff {
                return Err("bad IPv4 header checksum".into());
            }
            if usize::from(h.total_len()) != h.slice().len() + seg.len()
                || at(h.slice()) + usize::from(h.total_len()) != frame.len()
            {
                return Err("IPv4 total length".into());
            }
            (
                pseudo_header_sum_v4(h.source(), h.destination(), tcp_len),
                Some(h.identification()),
            )
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            if usize::from(h.payload_length()) != v6.extensions().slice().len() + seg.len()
                || at(h.slice()) + ipv6::HEADER_LEN + usize::from(h.payload_length()) != frame.len()
            {
                return Err("IPv6 payload length".into());
            }
            (
                pseudo_header_sum_v6(h.source(), h.destination(), tcp_len),
                None,
            )
        }
        _ => return Err("no IP".into()),
    };
    if add16(pseudo, ones_complement_sum(seg)) != 0xffff {
        return Err("bad TCP checksum".into());
    }
    Ok(Checked {
        seq: tcp.sequence_number(),
        ack: tcp.acknowledgment_number(),
        window: tcp.window_size(),
        flags: seg[13],
        ip_id,
        payload: tcp.payload().to_vec(),
    })
}

/// `check_frame` can fail: it takes a frame as built, and refuses the same frame with a wrong
/// checksum (IPv4 header, TCP), a payload byte changed under the old checksum, a wrong IP
/// length, or a byte after the datagram. Every link layout, IPv4 and IPv6.
#[test]
fn check_frame_refuses_a_broken_frame() {
    let payload = bytes(300, 9);
    for v6 in [false, true] {
        for link in 0..3 {
            let shape = Shape {
                v6,
                raw: link == 0,
                vlan: link == 2,
                ts: Some((1, 2)),
                ext: false,
            };
            let good = build(&shape, FIXED, &payload);
            let l3 = match link {
                0 => 0,
                1 => 14,
                _ => 18,
            };
            let at = format!("v6 {v6}, link {link}");
            let c = check_frame(&good, shape.raw).unwrap_or_else(|e| panic!("{at}: {e}"));
            assert_eq!((c.seq, c.payload), (FIXED.seq, payload.clone()), "{at}");

            let mut broken: Vec<(&str, Vec<u8>)> = Vec::new();
            let mut f = good.clone();
            *f.last_mut().unwrap() ^= 0x40;
            broken.push(("payload byte", f));
            let mut f = good.clone();
            f.push(0);
            broken.push(("byte after the datagram", f));
            let tcp_check = l3 + if v6 { 40 } else { 20 } + 16;
            let mut f = good.clone();
            f[tcp_check] ^= 0x01;
            broken.push(("TCP checksum", f));
            // One byte less in the IP length (and, for IPv4, a header checksum that agrees).
            let length = l3
                + if v6 {
                    ipv6::field::LENGTH.start
                } else {
                    ipv4::field::LENGTH.start
                };
            let mut f = good.clone();
            let len = u16::from_be_bytes([f[length], f[length + 1]]) - 1;
            f[length..length + 2].copy_from_slice(&len.to_be_bytes());
            if !v6 {
                seal_ipv4_header(&mut f, l3);
                let mut g = good.clone();
                g[l3 + 10] ^= 0x01;
                broken.push(("IPv4 header checksum", g));
            }
            broken.push(("IP length", f));
            for (what, f) in broken {
                assert!(check_frame(&f, shape.raw).is_err(), "{at}: {what} passed");
            }
        }
    }
}

fn bytes(len: usize, salt: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13 ^ salt) as u8)
        .collect()
}

/// Collects what a coalescer emits as contiguous frames with their info.
#[derive(Default)]
struct Collect {
    out: Vec<(Vec<u8>, SegmentInfo)>,
    released: usize,
}

impl Sink<Vec<u8>> for Collect {
    fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
        let mut b = vec![0u8; segment.len()];
        segment.copy_to(&mut b).expect("sized by len()");
        self.out.push((b, *segment.info()));
    }

    fn release(&mut self, _frame: Vec<u8>) {
        self.released += 1;
    }
}

fn coalesce_gro(frames: Vec<Vec<u8>>, meta: &RxMeta) -> Collect {
    // Software verification of every frame (`RxChecksum::None`): the coalescer checks the GSO
    // output's checksums with its own code too.
    let mut engine: Engine<Vec<u8>, Sizes<4, 64>> = Engine::new(Config::gro());
    let mut sink = Collect::default();
    for f in frames {
        engine.push(f, meta, &mut sink);
    }
    engine.flush_all(&mut sink);
    sink
}

/// A super-segment to split: shape, fields, MSS and payload length.
fn superseg() -> impl Strategy<Value = (Shape, Fields, u16, usize, u32)> {
    (
        shape(),
        any::<u32>(),
        any::<u32>(),
        any::<u16>(),
        any::<u16>(),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        1u16..1500,
        0usize..40,
        0usize..1500,
        any::<u32>(),
    )
        .prop_map(
            |(shape, seq, ack, window, ip_id, (psh, fin, ece, cwr), mss, full, rest, salt)| {
                let mut flags = TCP_ACK;
                for (on, bit) in [
                    (psh, TCP_PSH),
                    (fin, TCP_FIN),
                    (ece, TCP_ECE),
                    (cwr, TCP_CWR),
                ] {
                    if on {
                        flags |= bit;
                    }
                }
                let len = (usize::from(mss) * full + rest % usize::from(mss)).min(30_000);
                let f = Fields {
                    seq,
                    ack,
                    flags,
                    window,
                    ip_id,
                };
                (shape, f, mss, len, salt)
            },
        )
}

fn gso_frames(frame: &[u8], meta: &RxMeta, mss: u16) -> Vec<Vec<u8>> {
    let mut out = vec![0u8; 256 + usize::from(mss)];
    let mut frames = Vec::new();
    let n = gso::segment_frame(frame, meta, mss, &mut out, |f| frames.push(f.to_vec()))
        .expect("valid super-segment");
    assert_eq!(n, frames.len());
    frames
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Linux `tcp_gso_segment` rules, frame by frame, and `coalesce(gso(segment)) == segment`
    /// under `Gro` (when CWR is clear: Gro merges only frames whose flags differ in PSH/FIN).
    #[test]
    fn gso_then_coalesce_is_identity((shape, f, mss, len, salt) in superseg()) {
        let payload = bytes(len, salt);
        let sup = build(&shape, f, &payload);
        let meta = shape.meta();
        let frames = gso_frames(&sup, &meta, mss);
        let m = usize::from(mss);
        prop_assert_eq!(frames.len(), len.div_ceil(m).max(1));
        let mut joined = Vec::new();
        for (i, fr) in frames.iter().enumerate() {
            let c = check_frame(fr, shape.raw).map_err(TestCaseError::fail)?;
            let last = i + 1 == frames.len();
            prop_assert_eq!(c.seq, f.seq.wrapping_add((i * m) as u32));
            let mut want = f.flags;
            if i > 0 {
                want &= !TCP_CWR;
            }
            if !last {
                want &= !(TCP_PSH | TCP_FIN);
                prop_assert_eq!(c.payload.len(), m);
            }
            prop_assert_eq!(c.flags, want, "frame {}", i);
            if !shape.v6 {
                prop_assert_eq!(c.ip_id, Some(f.ip_id.wrapping_add(i as u16)));
            }
            joined.extend_from_slice(&c.payload);
        }
        prop_assert_eq!(&joined, &payload);

        // Scatter-gather input (the payload cut in three at arbitrary points) gives the same
        // frames.
        let (layout, p) = Layout::parse(&sup, &meta).unwrap();
        let (hdr, rest) = sup.split_at(layout.header_len());
        let body = &rest[..p.payload_len as usize];
        let a = (salt as usize) % (len + 1);
        let b = a + (salt as usize >> 8) % (len - a + 1);
        let mut out = vec![0u8; layout.header_len() + m];
        let mut sg = Vec::new();
        gso::segment(&layout, hdr, [&body[..a], &body[a..b], &[][..], &body[b..]], mss, &mut out,
            |fr| sg.push(fr.to_vec())).unwrap();
        prop_assert_eq!(&sg, &frames);

        if f.flags & TCP_CWR == 0 {
            // Without CWR, the same frames as the receive-side inverse `resegment`.
            let mut out = vec![0u8; sup.len()];
            let mut re = Vec::new();
            gso::resegment(&sup, &meta, mss, false, &mut out, |fr| re.push(fr.to_vec())).unwrap();
            prop_assert_eq!(&re, &frames);

            let got = coalesce_gro(frames, &meta);
            prop_assert_eq!(got.released, 0);
            prop_assert_eq!(got.out.len(), 1);
            prop_assert!(got.out[0].0 == sup, "coalesce(gso(segment)) differs from segment");
        }
    }

    /// `resegment(coalesce(frames)) == frames` under `Gro`: runs of MSS-size frames (IP IDs
    /// incrementing or fixed, a short last frame, PSH at the end, a window change that splits
    /// the run), coalesced, each segment re-segmented with the info the coalescer gave.
    #[test]
    fn coalesce_then_resegment_is_identity(
        shape in shape(),
        seq in any::<u32>(),
        ack in any::<u32>(),
        ip_id in any::<u16>(),
        mss in 1u16..1500,
        k in 1usize..24,
        short in 0usize..1500,
        fixed_id in any::<bool>(),
        psh_last in any::<bool>(),
        window_change in proptest::option::of(0usize..24),
        salt in any::<u32>(),
    ) {
        let m = usize::from(mss);
        let meta = shape.meta();
        let mut inputs = Vec::new();
        let mut at = 0u32;
        for i in 0..k {
            let last = i + 1 == k;
            let len = if last && short % m != 0 { short % m } else { m };
            let payload = bytes(len, salt ^ i as u32);
            let window = if window_change.is_some_and(|j| i >= j) { 1000 } else { 2000 };
            let flags = if last && psh_last { TCP_ACK | TCP_PSH } else { TCP_ACK };
            let id = if fixed_id { ip_id } else { ip_id.wrapping_add(i as u16) };
            let fields = Fields { seq: seq.wrapping_add(at), ack, flags, window, ip_id: id };
            inputs.push(build(&shape, fields, &payload));
            at += len as u32;
        }
        let got = coalesce_gro(inputs.clone(), &meta);
        prop_assert_eq!(got.released, 0);
        if window_change.is_none() && k > 1 {
            prop_assert_eq!(got.out.len(), 1, "one run, one segment");
        }
        let mut back = Vec::new();
        for (seg, info) in &got.out {
            // A frame passed on alone has gso_size 0: resegment hands it back as it is.
            let mut out = vec![0u8; seg.len()];
            gso::resegment(seg, &meta, info.gso_size, info.fixed_id, &mut out,
                |fr| back.push(fr.to_vec())).unwrap();
        }
        prop_assert!(back == inputs, "resegment(coalesce(frames)) differs from frames");
    }
}

/// Field values of the examples below.
const FIXED: Fields = Fields {
    seq: 1,
    ack: 2,
    flags: TCP_ACK,
    window: 3,
    ip_id: 4,
};

#[test]
fn gso_errors_emit_nothing() {
    let shape = Shape {
        v6: false,
        raw: false,
        vlan: false,
        ts: None,
        ext: false,
    };
    let sup = build(&shape, FIXED, &bytes(3000, 1));
    let meta = shape.meta();
    let mut emitted = 0;
    let mut small = [0u8; 100];
    assert_eq!(
        gso::segment_frame(&sup, &meta, 1000, &mut small, |_| emitted += 1),
        Err(gso::GsoError::BufferTooSmall { needed: 1054 })
    );
    assert_eq!(
        gso::segment_frame(&sup, &meta, 0, &mut small, |_| emitted += 1),
        Err(gso::GsoError::Invalid)
    );
    let (layout, _) = Layout::parse(&sup, &meta).unwrap();
    let mut out = [0u8; 2000];
    assert_eq!(
        gso::segment(&layout, &sup[..10], [&sup[54..]], 1000, &mut out, |_| {
            emitted += 1
        }),
        Err(gso::GsoError::Invalid)
    );
    assert_eq!(emitted, 0);
}

/// `segment` takes any MSS whose frames an IP length field holds, and no larger: IPv4's total
/// length counts its header, IPv6's payload length does not (RFC 8200 section 3), so an IPv6
/// frame may carry 40 bytes more.
#[test]
fn segment_takes_every_mss_an_ip_length_holds() {
    for v6 in [false, true] {
        for raw in [false, true] {
            let shape = Shape {
                v6,
                raw,
                vlan: false,
                ts: Some((5, 6)),
                ext: v6,
            };
            let sup = build(&shape, FIXED, &[0x5a; 3]);
            let (layout, _) = Layout::parse(&sup, &shape.meta()).unwrap();
            let (hdr, l3) = (layout.header_len(), layout.l3());
            let (fixed, length) = if v6 {
                (ipv6::HEADER_LEN, ipv6::field::LENGTH.start)
            } else {
                (0, ipv4::field::LENGTH.start)
            };
            let largest = 65535 + l3 + fixed - hdr;
            let payload = bytes(largest + 1, 7);
            let mut out = vec![0u8; hdr + largest + 1];
            let mut lens = Vec::new();
            let n = gso::segment(
                &layout,
                &sup[..hdr],
                [&payload[..]],
                largest as u16,
                &mut out,
                |fr| lens.push((fr.len(), lro_core::wire::be16(fr, l3 + length))),
            )
            .unwrap_or_else(|e| panic!("v6 {v6} raw {raw}: mss {largest} refused: {e}"));
            assert_eq!(n, 2, "v6 {v6} raw {raw}");
            assert_eq!(
                lens[0],
                (hdr + largest, 65535),
                "v6 {v6} raw {raw}: first frame"
            );
            assert_eq!(
                gso::segment(
                    &layout,
                    &sup[..hdr],
                    [&payload[..]],
                    largest as u16 + 1,
                    &mut out,
                    |_| panic!("emitted on error")
                ),
                Err(gso::GsoError::Invalid),
                "v6 {v6} raw {raw}: mss {} does not fit the length field",
                largest + 1
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The TX queue against a model.

/// A buffer whose identity the queue cannot forge (not `Clone`).
#[derive(Debug)]
struct TBuf {
    tag: u32,
    bytes: Vec<u8>,
}

impl AsRef<[u8]> for TBuf {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Push a super-segment of `len` payload bytes (FIN when `fin`).
    Push { len: u16, fin: bool },
    /// An ACK: 0 advancing within the flight, 1 duplicate, 2 old, 3 beyond SND.NXT,
    /// 4 any u32, 5 at a held super-segment's end or one byte either side.
    Ack { kind: u8, x: u32 },
    /// Complete the outstanding transmission `k % outstanding`.
    Complete { k: u16 },
    /// Retransmit the `n`-th unACKed super-segment.
    Retransmit {
        n: u8,
        zero_copy: bool,
        partial_csum: bool,
        mss: u16,
        /// New ACK number, window and IPv4 ID for the rebuilt header.
        refresh: Option<(u32, u16, u16)>,
    },
}

fn op(max_len: u16) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=max_len, proptest::bool::weighted(0.05))
            .prop_map(|(len, fin)| Op::Push { len, fin }),
        5 => (0u8..6, any::<u32>()).prop_map(|(kind, x)| Op::Ack { kind, x }),
        3 => any::<u16>().prop_map(|k| Op::Complete { k }),
        1 => (
            0u8..4,
            any::<bool>(),
            any::<bool>(),
            1u16..2000,
            proptest::option::of(any::<(u32, u16, u16)>()),
        )
            .prop_map(|(n, zero_copy, partial_csum, mss, refresh)| Op::Retransmit {
                n,
                zero_copy,
                partial_csum,
                mss,
                refresh,
            }),
    ]
}

/// The model's view of one pushed super-segment; offsets are from the initial sequence
/// number, in `u64`.
#[derive(Debug, Clone)]
struct MEntry {
    tag: u32,
    start: u64,
    payload_len: u64,
    fin: bool,
    bytes: Vec<u8>,
    header_len: usize,
}

impl MEntry {
    fn end(&self) -> u64 {
        self.start + self.payload_len + u64::from(self.fin)
    }
}

struct Model {
    iss: u32,
    una: u64,
    nxt: u64,
    entries: Vec<MEntry>,
    /// Every data byte sent, by offset.
    stream: Vec<u8>,
    /// Uncompleted transmissions per buffer.
    nic: HashMap<u32, u32>,
    released: HashSet<u32>,
    aborted: bool,
    fin_sent: bool,
    /// The counters the queue should show, but those the model has otherwise (see
    /// [`Model::stats`]).
    stats: TxStats,
}

impl Model {
    fn seq(&self, off: u64) -> u32 {
        self.iss.wrapping_add(off as u32)
    }

    fn entry(&self, tag: u32) -> &MEntry {
        &self.entries[tag as usize]
    }

    /// Checks buffers handed back by the queue.
    fn on_release(&mut self, bufs: Vec<TBuf>) -> Result<(), TestCaseError> {
        for b in bufs {
            prop_assert!(
                self.released.insert(b.tag),
                "buffer {} released twice",
                b.tag
            );
            prop_assert_eq!(
                self.nic.get(&b.tag).copied().unwrap_or(0),
                0,
                "buffer {} released while the NIC owns it",
                b.tag
            );
            let e = self.entry(b.tag);
            prop_assert!(
                self.aborted || e.end() <= self.una,
                "buffer {} released before it was ACKed",
                b.tag
            );
            prop_assert!(b.bytes == e.bytes, "buffer {} was modified", b.tag);
        }
        Ok(())
    }

    /// The counters the queue should show: pushes and releases are the model's entries and
    /// released set.
    fn stats(&self) -> TxStats {
        TxStats {
            pushed: self.entries.len() as u64,
            released: self.released.len() as u64,
            ..self.stats
        }
    }

    fn held(&self) -> Vec<&MEntry> {
        self.entries
            .iter()
            .filter(|e| !self.released.contains(&e.tag))
            .collect()
    }
}

fn run_tx(shape: Shape, iss: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    const N: usize = 6;
    let mut q: TxQueue<TBuf, N> = TxQueue::new(iss, shape.link());
    let mut m = Model {
        iss,
        una: 0,
        nxt: 0,
        entries: Vec::new(),
        stream: Vec::new(),
        nic: HashMap::new(),
        released: HashSet::new(),
        aborted: false,
        fin_sent: false,
        stats: TxStats::default(),
    };
    let mut tokens: Vec<(TxToken, u32)> = Vec::new();
    let mut hdr = [0u8; 160];
    for (step, &o) in ops.iter().enumerate() {
        match o {
            Op::Push { len, fin } => {
                if m.fin_sent {
                    continue;
                }
                let tag = m.entries.len() as u32;
                let payload = bytes(usize::from(len), tag);
                let f = Fields {
                    seq: m.seq(m.nxt),
                    ack: 77,
                    flags: TCP_ACK | if fin { TCP_FIN } else { 0 },
                    window: 500,
                    ip_id: tag as u16,
                };
                let frame = build(&shape, f, &payload);
                let full = m.held().len() == N;
                let r = q.push(TBuf {
                    tag,
                    bytes: frame.clone(),
                });
                match r {
                    Ok(t) => {
                        prop_assert!(len > 0 || fin, "step {step}: empty push accepted");
                        prop_assert!(!full, "step {step}: push into a full queue");
                        // Tokens number the pushes from 0.
                        prop_assert_eq!(t.entry(), u64::from(tag), "step {}", step);
                        let header_len = frame.len() - payload.len();
                        m.entries.push(MEntry {
                            tag,
                            start: m.nxt,
                            payload_len: u64::from(len),
                            fin,
                            bytes: frame,
                            header_len,
                        });
                        m.stream.extend_from_slice(&payload);
                        m.nxt += u64::from(len) + u64::from(fin);
                        m.fin_sent = fin;
                        *m.nic.entry(tag).or_default() += 1;
                        tokens.push((t, tag));
                    }
                    Err(e) => {
                        let want = if len == 0 && !fin {
                            TxError::Unsupported
                        } else {
                            TxError::Full
                        };
                        prop_assert_eq!(e.error, want, "step {}", step);
                        prop_assert!(e.buffer.bytes == frame && e.buffer.tag == tag);
                    }
                }
            }
            Op::Ack { kind, x } => {
                let flight = m.nxt - m.una;
                let una = m.seq(m.una);
                // Near the edges half of the time: one off is where bugs live.
                let near = |x: u32, far: u32| {
                    if x & 1 == 0 {
                        1 + (x >> 1) % 3
                    } else {
                        1 + (x >> 1) % far
                    }
                };
                let boundaries: Vec<u64> = m
                    .held()
                    .iter()
                    .map(|e| e.end())
                    .filter(|&b| b > m.una)
                    .collect();
                let ack = match kind {
                    0 if flight > 0 => una.wrapping_add(1 + (u64::from(x) % flight) as u32),
                    5 if !boundaries.is_empty() => {
                        // An entry's exact end, or one either side.
                        let b = boundaries[(x >> 2) as usize % boundaries.len()];
                        m.seq(b).wrapping_add(x % 3).wrapping_sub(1)
                    }
                    0 | 1 | 5 => una,
                    2 => una.wrapping_sub(near(x, 1 << 31)),
                    3 => m
                        .seq(m.nxt)
                        .wrapping_add(near(x, (1 << 31) - 1 - flight as u32)),
                    _ => x,
                };
                // RFC 9293 3.10.7.4 on the signed distance from SND.UNA.
                let d = i64::from(ack.wrapping_sub(una) as i32);
                let mut rel = Vec::new();
                let r = q.ack(ack, |b| rel.push(b));
                if d == 0 {
                    prop_assert_eq!(r, Ok(AckOutcome::Duplicate), "step {}", step);
                    m.stats.duplicate_acks += 1;
                } else if d < 0 {
                    prop_assert_eq!(r, Ok(AckOutcome::Old), "step {}", step);
                    m.stats.old_acks += 1;
                } else if d as u64 > flight {
                    m.stats.rejected_acks += 1;
                    prop_assert_eq!(
                        r,
                        Err(TxError::AckBeyondSndNxt {
                            ack,
                            snd_nxt: m.seq(m.nxt)
                        }),
                        "step {}",
                        step
                    );
                } else {
                    let old_una = m.una;
                    m.una += d as u64;
                    m.stats.acks += 1;
                    // Ends inside a super-segment: an offset recorded.
                    if m.entries.iter().any(|e| e.start < m.una && m.una < e.end()) {
                        m.stats.partial_acks += 1;
                    }
                    // Completed by this ACK while the NIC still reads them.
                    m.stats.acked_before_completion += m
                        .entries
                        .iter()
                        .filter(|e| old_una < e.end() && e.end() <= m.una && m.nic[&e.tag] > 0)
                        .count() as u64;
                    // Released now: fully ACKed, never released, no transmission pending.
                    let want: Vec<u32> = m
                        .held()
                        .iter()
                        .filter(|e| e.end() <= m.una && m.nic[&e.tag] == 0)
                        .map(|e| e.tag)
                        .collect();
                    prop_assert_eq!(
                        r,
                        Ok(AckOutcome::Advanced {
                            released: want.len()
                        })
                    );
                    let got: Vec<u32> = rel.iter().map(|b| b.tag).collect();
                    prop_assert_eq!(got, want, "step {}", step);
                }
                if !matches!(r, Ok(AckOutcome::Advanced { .. })) {
                    prop_assert!(rel.is_empty());
                }
                m.on_release(rel)?;
            }
            Op::Complete { k } => {
                if tokens.is_empty() {
                    continue;
                }
                let (t, tag) = tokens.remove(usize::from(k) % tokens.len());
                let n = m.nic.get_mut(&tag).expect("token of a pushed buffer");
                *n -= 1;
                let want = if *n > 0 {
                    Completion::StillInFlight
                } else if m.aborted || m.entry(tag).end() <= m.una {
                    Completion::Released
                } else {
                    Completion::AwaitingAck
                };
                let mut rel = Vec::new();
                let r = q.complete(t, |b| rel.push(b));
                prop_assert_eq!(r, Ok(want), "step {}", step);
                m.stats.completions += 1;
                prop_assert_eq!(rel.len(), usize::from(want == Completion::Released));
                m.on_release(rel)?;
            }
            Op::Retransmit {
                n,
                zero_copy,
                partial_csum,
                mss,
                refresh,
            } => {
                let una = m.una;
                let unacked: Vec<MEntry> = m
                    .entries
                    .iter()
                    .filter(|e| e.end() > una)
                    .cloned()
                    .collect();
                let mut opts = RetransmitOptions::new();
                if zero_copy {
                    opts = opts.zero_copy();
                }
                if partial_csum {
                    opts = opts.with_checksum(TxChecksum::Partial);
                }
                if let Some((ack, window, id)) = refresh {
                    opts = opts.with_ack(ack).with_window(window).with_ip_id(id);
                }
                prop_assert_eq!(opts.post == Post::ZeroCopy, zero_copy);
                let r = q.retransmit(usize::from(n), &mut hdr, opts);
                let Some(e) = unacked.get(usize::from(n)) else {
                    prop_assert_eq!(r.err(), Some(TxError::NothingToRetransmit));
                    continue;
                };
                let mut r = r.map_err(|e| TestCaseError::fail(format!("step {step}: {e}")))?;
                m.stats.retransmits += 1;
                // Exactly the unACKed bytes, from the model's stream.
                let from = una.max(e.start);
                let data_end = e.start + e.payload_len;
                let want = &m.stream[from.min(data_end) as usize..data_end as usize];
                prop_assert_eq!(r.seq(), m.seq(from), "step {}", step);
                prop_assert!(
                    r.payload() == want,
                    "step {step}: retransmitted bytes differ"
                );
                prop_assert_eq!(r.fin(), e.fin);
                prop_assert_eq!(r.header().len(), e.header_len);
                let token = r.take_token();
                prop_assert_eq!(token.is_some(), zero_copy);
                // The rebuilt frame is valid (full checksum), or carries the pseudo-header
                // sum (partial).
                let mut frame = vec![0u8; r.len()];
                r.copy_to(&mut frame).unwrap();
                if !partial_csum {
                    let c = check_frame(&frame, shape.raw).map_err(TestCaseError::fail)?;
                    prop_assert_eq!(c.seq, m.seq(from));
                    if let Some((ack, window, id)) = refresh {
                        // The refreshed fields; an IPv6 header has no ID to refresh.
                        prop_assert_eq!((c.ack, c.window), (ack, window), "step {}", step);
                        prop_assert_eq!(c.ip_id, (!shape.v6).then_some(id), "step {}", step);
                    }
                    prop_assert!(c.payload == want);
                    prop_assert_eq!(c.flags & TCP_FIN != 0, e.fin);
                }
                // Software GSO of the view carries the same bytes, MSS at a time.
                let mut out = vec![0u8; 200 + usize::from(mss)];
                let mut joined = Vec::new();
                let mut next_seq = m.seq(from);
                let mut bad = None;
                r.gso(mss, &mut out, |fr| match check_frame(fr, shape.raw) {
                    Ok(c) if c.seq == next_seq => {
                        next_seq = next_seq.wrapping_add(c.payload.len() as u32);
                        joined.extend_from_slice(&c.payload);
                    }
                    other => bad = Some(format!("{other:?}")),
                })
                .unwrap();
                prop_assert!(bad.is_none(), "step {step}: GSO frame {bad:?}");
                prop_assert!(joined == want, "step {step}: GSO bytes differ");
                if let Some(t) = token {
                    *m.nic.entry(e.tag).or_default() += 1;
                    tokens.push((t, e.tag));
                }
            }
        }
        // The queue agrees with the model on SND.UNA/SND.NXT and on each held entry's ACKed
        // offset (derived from SND.UNA, recorded, never applied to the buffer).
        prop_assert_eq!(q.snd_una(), m.seq(m.una));
        prop_assert_eq!(q.snd_nxt(), m.seq(m.nxt));
        let held = m.held();
        let infos: Vec<_> = q.entries().collect();
        prop_assert_eq!(infos.len(), held.len(), "step {}", step);
        prop_assert_eq!(q.len(), held.len(), "step {}", step);
        prop_assert_eq!(q.is_empty(), held.is_empty(), "step {}", step);
        prop_assert_eq!(q.stats(), &m.stats(), "step {}", step);
        for (i, e) in infos.iter().zip(&held) {
            prop_assert_eq!(i.id, u64::from(e.tag));
            prop_assert_eq!(i.seq, m.seq(e.start));
            prop_assert_eq!(u64::from(i.seq_len), e.end() - e.start);
            let acked = m.una.clamp(e.start, e.end()) - e.start;
            prop_assert_eq!(u64::from(i.acked), acked, "step {}", step);
            prop_assert_eq!(i.in_flight, m.nic[&e.tag]);
        }
    }
    // Teardown: abort, then the NIC completes whatever it still holds, in reverse order.
    let mut rel = Vec::new();
    q.abort(|b| rel.push(b));
    m.aborted = true;
    m.on_release(rel)?;
    while let Some((t, tag)) = tokens.pop() {
        *m.nic.get_mut(&tag).unwrap() -= 1;
        let mut rel = Vec::new();
        q.complete(t, |b| rel.push(b)).unwrap();
        m.stats.completions += 1;
        m.on_release(rel)?;
    }
    prop_assert!(q.is_empty());
    prop_assert_eq!(q.stats(), &m.stats());
    prop_assert_eq!(
        m.released.len(),
        m.entries.len(),
        "every buffer back exactly once"
    );
    prop_assert_eq!(q.stats().released, m.entries.len() as u64);
    prop_assert_eq!(q.stats().pushed, m.entries.len() as u64);
    Ok(())
}

fn iss() -> impl Strategy<Value = u32> {
    prop_oneof![any::<u32>(), (0u32..20_000).prop_map(|d| u32::MAX - d)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Small super-segments, many operations.
    #[test]
    fn tx_queue_matches_model(
        shape in shape(),
        iss in iss(),
        ops in proptest::collection::vec(op(3000), 1..150),
    ) {
        run_tx(shape, iss, &ops)?;
    }

    /// 64 KB super-segments (the seed's situation), fewer operations.
    #[test]
    fn tx_queue_matches_model_64k(
        iss in iss(),
        ops in proptest::collection::vec(op(65_000), 1..40),
    ) {
        let shape = Shape { v6: false, raw: false, vlan: false, ts: Some((1, 2)), ext: false };
        run_tx(shape, iss, &ops)?;
    }
}

/// Hostile ACK values on an empty and a busy queue: an answer, never a panic.
#[test]
fn hostile_acks_never_panic() {
    let shape = Shape {
        v6: true,
        raw: false,
        vlan: true,
        ts: None,
        ext: false,
    };
    let mut q: TxQueue<TBuf, 2> = TxQueue::new(u32::MAX - 5, shape.link());
    for ack in [
        0,
        1,
        u32::MAX,
        u32::MAX - 5,
        u32::MAX - 6,
        1 << 31,
        (1 << 31) - 1,
    ] {
        let r = q.ack(ack, |_| panic!("nothing to release"));
        // Nothing sent: SND.UNA = SND.NXT. The ACK repeats it, lies before it (mod 2^32) or
        // acknowledges what was never sent.
        let d = ack.wrapping_sub(u32::MAX - 5) as i32;
        match d {
            0 => assert_eq!(r, Ok(AckOutcome::Duplicate), "ack {ack}"),
            d if d < 0 => assert_eq!(r, Ok(AckOutcome::Old), "ack {ack}"),
            _ => assert!(
                matches!(r, Err(TxError::AckBeyondSndNxt { .. })),
                "ack {ack}: {r:?}"
            ),
        }
    }
    let f = Fields {
        seq: u32::MAX - 5,
        ack: 0,
        flags: TCP_ACK,
        window: 1,
        ip_id: 0,
    };
    let frame = build(&shape, f, &bytes(100, 3));
    let t = q
        .push(TBuf {
            tag: 0,
            bytes: frame,
        })
        .unwrap();
    let mut x = 0x9e37_79b9u32;
    let mut released = 0;
    // 100 bytes in flight from SND.UNA; every answer is determined by where the ACK falls.
    let (mut una, nxt) = (u32::MAX - 5, (u32::MAX - 5).wrapping_add(100));
    let mut advanced = 0;
    for i in 0..100_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        // Every 1000th ACK falls inside the window, so that some advance SND.UNA.
        let ack = if i % 1000 == 0 {
            una.wrapping_add(1 + x % nxt.wrapping_sub(una).max(1))
        } else {
            x
        };
        let r = q.ack(ack, |_| released += 1);
        let ahead = ack.wrapping_sub(una);
        if ahead == 1 << 31 {
            continue; // Half the sequence space away: either reading is RFC-correct.
        }
        if ack == una {
            assert_eq!(r, Ok(AckOutcome::Duplicate), "ack {ack}, una {una}");
        } else if (ahead as i32) < 0 {
            assert_eq!(r, Ok(AckOutcome::Old), "ack {ack}, una {una}");
        } else if ahead <= nxt.wrapping_sub(una) {
            // The NIC still owns the buffer: nothing released.
            assert_eq!(r, Ok(AckOutcome::Advanced { released: 0 }), "ack {ack}");
            una = ack;
            advanced += 1;
        } else {
            assert!(
                matches!(r, Err(TxError::AckBeyondSndNxt { .. })),
                "ack {ack}, una {una}: {r:?}"
            );
        }
    }
    assert!(advanced > 0, "some ACKs advanced SND.UNA");
    assert_eq!(released, 0);
    let mut back = None;
    q.abort(|b| back = Some(b));
    assert!(back.is_none());
    assert_eq!(q.complete(t, |b| back = Some(b)), Ok(Completion::Released));
    assert_eq!(back.map(|b| b.tag), Some(0));
}
