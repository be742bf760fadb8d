//! One test per coalescing rule of issue #2 (and of Linux GRO, as summarised in
//! `shared/research/linux-gro-rules.md`), each run over a matrix: IPv4 and IPv6, five link
//! setups (untagged Ethernet, one 802.1Q tag, 802.1ad + 802.1Q, a tag the NIC stripped, raw IP)
//! and every policy the rule applies to.
//!
//! Frames are built by hand in this file (independently of the engine and of
//! `lro_core::testing`); every emitted frame is checked independently with etherparse: it
//! parses, its IP length fields agree with the frame, the IPv4 header checksum and the TCP
//! checksum (or, in `OutChecksum::Partial` mode, the pseudo-header sum) are right, and its
//! payload is the sender's bytes for its sequence range. Frames delivered on their own must be
//! byte-identical to what was pushed, and every pushed frame must come back exactly once.

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::csum;
use lro_core::gso::resegment;
use lro_core::wire::{self, ipv4, tcp};
use lro_core::{
    Cause, Config, Engine, FlushReason, OutChecksum, PassReason, Policy, RssHash, RssType,
    RxChecksum, RxMeta, Segment, SegmentInfo, Sink, Sizes, Stats, Verdict,
};
use std::fmt;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// Payload of a full-size test segment (small, so the matrix stays fast).
const MSS: u32 = 100;

// ---------------------------------------------------------------------------------------------
// The matrix.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ip {
    V4,
    V6,
}

/// Link setups: 0, 1 and 2 in-line tags, a NIC-stripped tag, no link header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum L2 {
    Untagged,
    OneTag,
    TwoTags,
    Stripped,
    Raw,
}

const IPS: [Ip; 2] = [Ip::V4, Ip::V6];
const V4: [Ip; 1] = [Ip::V4];
const V6: [Ip; 1] = [Ip::V6];
const L2S: [L2; 5] = [L2::Untagged, L2::OneTag, L2::TwoTags, L2::Stripped, L2::Raw];
const BOTH: [Policy; 2] = [Policy::Gro, Policy::Lro];
const GRO: [Policy; 1] = [Policy::Gro];
const LRO: [Policy; 1] = [Policy::Lro];

#[derive(Clone, Copy, Debug)]
struct Case {
    ip: Ip,
    l2: L2,
    policy: Policy,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}/{:?}/{:?}", self.ip, self.l2, self.policy)
    }
}

impl Case {
    fn cfg(&self) -> Config {
        Config::gro().with_policy(self.policy)
    }

    fn base(&self) -> Seg {
        Seg::base(self.ip, self.l2)
    }

    fn gro(&self) -> bool {
        self.policy == Policy::Gro
    }

    /// A harness with the default geometry (16 flows, 64 frames per segment).
    fn h(&self, ctx: impl fmt::Display) -> H {
        H::new(self.cfg(), format!("{self} {ctx}"))
    }
}

fn matrix(ips: &[Ip], policies: &[Policy]) -> Vec<Case> {
    let mut v = Vec::new();
    for &ip in ips {
        for &l2 in &L2S {
            for &policy in policies {
                v.push(Case { ip, l2, policy });
            }
        }
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Checksum arithmetic of our own (RFC 1071), independent of `lro_core::csum`.

fn words(data: &[u8]) -> u64 {
    data.chunks(2)
        .map(|c| u64::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum()
}

fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

fn ones(data: &[u8]) -> u16 {
    fold(words(data))
}

/// The sender's byte at sequence number `x`: every payload is a function of its sequence range,
/// so any output's payload can be checked on its own.
fn pat(x: u32) -> u8 {
    (x.wrapping_mul(0x9e37_79b1) >> 24) as u8
}

// ---------------------------------------------------------------------------------------------
// Frame builder.

/// How the metadata reports the checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rx {
    None,
    Verified,
    /// CHECKSUM_COMPLETE with the correct sum of the frame as built.
    Complete,
    /// CHECKSUM_COMPLETE with a wrong sum.
    CompleteWrong,
}

/// A change to a frame.
type Tweak = fn(&mut Seg);
/// A change to the `n`-th frame of a run.
type TweakNth = fn(&mut Seg, u32);

#[derive(Clone, Debug)]
struct Seg {
    ip: Ip,
    l2: L2,
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    /// In-line tags (outer first); `tci[0]` is also the stripped tag.
    tci: [u16; 2],
    /// Last byte of the source address.
    host: u8,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    /// Low nibble of TCP header byte 12 (reserved bits and AccECN's AE).
    res: u8,
    win: u16,
    urg: u16,
    /// Raw TCP option bytes (a multiple of 4).
    opts: Vec<u8>,
    /// Payload length; the bytes are `pat(seq + i)`.
    len: usize,
    ttl: u8,
    tos: u8,
    df: bool,
    /// IPv4 flags/fragment-offset bits besides DF (MF, offset, reserved).
    frag: u16,
    id: u16,
    ip_opts: Vec<u8>,
    label: u32,
    /// IPv6 extension headers: (type, bytes after the next-header and length bytes).
    ext: Vec<(u8, Vec<u8>)>,
    pad: Vec<u8>,
    bad_tcp: bool,
    bad_ip: bool,
    rx: Rx,
    rss: Option<u32>,
    time: u64,
}

fn ts(val: u32, ecr: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 8, 10];
    o.extend_from_slice(&val.to_be_bytes());
    o.extend_from_slice(&ecr.to_be_bytes());
    o
}

fn sack(left: u32, right: u32) -> Vec<u8> {
    let mut o = vec![1, 1, 5, 10];
    o.extend_from_slice(&left.to_be_bytes());
    o.extend_from_slice(&right.to_be_bytes());
    o
}

impl Seg {
    fn base(ip: Ip, l2: L2) -> Seg {
        Seg {
            ip,
            l2,
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            tci: [100, 200],
            host: 1,
            sport: 40000,
            dport: 5201,
            seq: 1000,
            ack: 5000,
            flags: ACK,
            res: 0,
            win: 512,
            urg: 0,
            opts: Vec::new(),
            len: 0,
            ttl: 64,
            tos: 0,
            df: true,
            frag: 0,
            id: 100,
            ip_opts: Vec::new(),
            label: if ip == Ip::V6 { 0x1_2345 } else { 0 },
            ext: Vec::new(),
            pad: Vec::new(),
            bad_tcp: false,
            bad_ip: false,
            rx: Rx::None,
            rss: None,
            time: 0,
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Seg)) -> Seg {
        f(&mut self);
        self
    }

    /// The `i`-th full-size data segment from this one's sequence number (IPv4 ID + `i`).
    fn data(&self, i: u32) -> Seg {
        let mut s = self.clone();
        s.seq = self.seq.wrapping_add(i * MSS);
        s.id = self.id.wrapping_add(i as u16);
        s.len = MSS as usize;
        s
    }

    /// A pure ACK at this segment's sequence number.
    fn pure_ack(&self, ack: u32, win: u16) -> Seg {
        let mut s = self.clone();
        s.ack = ack;
        s.win = win;
        s.len = 0;
        s
    }

    fn v4(&self) -> bool {
        self.ip == Ip::V4
    }

    /// Offset of the IP header in the frame.
    fn l3(&self) -> usize {
        match self.l2 {
            L2::Untagged | L2::Stripped => 14,
            L2::OneTag => 18,
            L2::TwoTags => 22,
            L2::Raw => 0,
        }
    }

    fn src_addr(&self) -> Vec<u8> {
        if self.v4() {
            vec![198, 51, 100, self.host]
        } else {
            let mut a = vec![0x20, 0x01, 0x0d, 0xb8];
            a.extend_from_slice(&[0; 11]);
            a.push(self.host);
            a
        }
    }

    fn dst_addr(&self) -> Vec<u8> {
        let mut a = self.src_addr();
        *a.last_mut().unwrap() = 200;
        a
    }

    fn payload(&self) -> Vec<u8> {
        (0..self.len)
            .map(|i| pat(self.seq.wrapping_add(i as u32)))
            .collect()
    }

    fn build(&self) -> Vec<u8> {
        let mut f = Vec::new();
        if self.l2 != L2::Raw {
            f.extend_from_slice(&self.dst_mac);
            f.extend_from_slice(&self.src_mac);
            match self.l2 {
                L2::OneTag => {
                    f.extend_from_slice(&0x8100u16.to_be_bytes());
                    f.extend_from_slice(&self.tci[0].to_be_bytes());
                }
                L2::TwoTags => {
                    f.extend_from_slice(&0x88a8u16.to_be_bytes());
                    f.extend_from_slice(&self.tci[0].to_be_bytes());
                    f.extend_from_slice(&0x8100u16.to_be_bytes());
                    f.extend_from_slice(&self.tci[1].to_be_bytes());
                }
                _ => {}
            }
            let ethertype: u16 = if self.v4() { 0x0800 } else { 0x86dd };
            f.extend_from_slice(&ethertype.to_be_bytes());
        }
        let (src, dst) = (self.src_addr(), self.dst_addr());
        assert_eq!(self.opts.len() % 4, 0, "TCP options must fill words");
        let doff = 5 + self.opts.len() / 4;
        let mut tcp = Vec::new();
        tcp.extend_from_slice(&self.sport.to_be_bytes());
        tcp.extend_from_slice(&self.dport.to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.push((doff as u8) << 4 | (self.res & 0x0f));
        tcp.push(self.flags);
        tcp.extend_from_slice(&self.win.to_be_bytes());
        tcp.extend_from_slice(&[0, 0]);
        tcp.extend_from_slice(&self.urg.to_be_bytes());
        tcp.extend_from_slice(&self.opts);
        tcp.extend_from_slice(&self.payload());
        let mut pseudo = src.clone();
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&(tcp.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 6]);
        let mut c = !fold(words(&pseudo) + words(&tcp));
        if self.bad_tcp {
            c ^= 0x0101;
        }
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        if self.v4() {
            assert_eq!(self.ip_opts.len() % 4, 0);
            let ihl = 5 + self.ip_opts.len() / 4;
            let total = (ihl * 4 + tcp.len()) as u16;
            let frag = u16::from(self.df) << 14 | self.frag;
            let mut h = vec![0x40 | ihl as u8, self.tos];
            h.extend_from_slice(&total.to_be_bytes());
            h.extend_from_slice(&self.id.to_be_bytes());
            h.extend_from_slice(&frag.to_be_bytes());
            h.extend_from_slice(&[self.ttl, 6, 0, 0]);
            h.extend_from_slice(&src);
            h.extend_from_slice(&dst);
            h.extend_from_slice(&self.ip_opts);
            let mut c = !ones(&h);
            if self.bad_ip {
                c ^= 0x0101;
            }
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
        } else {
            let mut exts = Vec::new();
            for (i, (_, body)) in self.ext.iter().enumerate() {
                let next = self.ext.get(i + 1).map_or(6, |e| e.0);
                let total = body.len() + 2;
                assert_eq!(total % 8, 0, "extension headers fill 8-byte units");
                exts.push(next);
                exts.push((total / 8 - 1) as u8);
                exts.extend_from_slice(body);
            }
            let first = self.ext.first().map_or(6, |e| e.0);
            let plen = (exts.len() + tcp.len()) as u16;
            f.push(0x60 | self.tos >> 4);
            f.push(self.tos << 4 | ((self.label >> 16) & 0x0f) as u8);
            f.push((self.label >> 8) as u8);
            f.push(self.label as u8);
            f.extend_from_slice(&plen.to_be_bytes());
            f.push(first);
            f.push(self.ttl);
            f.extend_from_slice(&src);
            f.extend_from_slice(&dst);
            f.extend_from_slice(&exts);
        }
        f.extend_from_slice(&tcp);
        f.extend_from_slice(&self.pad);
        f
    }

    fn meta_for(&self, frame: &[u8]) -> RxMeta {
        let mut m = if self.l2 == L2::Raw {
            RxMeta::raw_ip(self.time)
        } else {
            RxMeta::ethernet(self.time)
        };
        if self.l2 == L2::Stripped {
            m = m.with_vlan_stripped(self.tci[0]);
        }
        if let Some(value) = self.rss {
            let kind = if self.v4() {
                RssType::TcpIpv4
            } else {
                RssType::TcpIpv6
            };
            m = m.with_rss(RssHash { value, kind });
        }
        // The NIC sums from the end of the 14-byte Ethernet header (in-line tags included) to
        // the end of the frame (padding included); raw IP frames from their first byte.
        let start = if self.l2 == L2::Raw { 0 } else { 14 };
        let complete = ones(&frame[start..]);
        m.with_checksum(match self.rx {
            Rx::None => RxChecksum::None,
            Rx::Verified => RxChecksum::Verified,
            Rx::Complete => RxChecksum::Complete(complete),
            Rx::CompleteWrong => RxChecksum::Complete(complete ^ 0x0101),
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Recording sink, harness and the independent output checker.

struct Out {
    bytes: Vec<u8>,
    info: SegmentInfo,
}

#[derive(Default)]
struct Rec {
    out: Vec<Out>,
    released: Vec<Vec<u8>>,
}

impl Sink<Vec<u8>> for Rec {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        let info = *seg.info();
        assert_eq!(seg.frames().count(), usize::from(info.frames));
        assert_eq!(seg.chunks().map(<[u8]>::len).sum::<usize>(), info.len);
        let mut bytes = vec![0; seg.len()];
        assert_eq!(seg.copy_to(&mut bytes), Ok(info.len));
        self.out.push(Out { bytes, info });
    }

    fn release(&mut self, frame: Vec<u8>) {
        self.released.push(frame);
    }
}

/// What etherparse reads from an emitted frame.
#[derive(Debug)]
struct View {
    seq: u32,
    ack: u32,
    win: u16,
    flags: u8,
    opts: Vec<u8>,
    payload_len: usize,
    ip_id: Option<u16>,
    df: Option<bool>,
    ttl: u8,
    tos: u8,
    sport: u16,
}

fn fl(r: FlushReason) -> Cause {
    Cause::Flushed(r)
}

fn ps(r: PassReason) -> Cause {
    Cause::Passed(r)
}

struct H<const N: usize = 16, const S: usize = 64> {
    c: Engine<Vec<u8>, Sizes<N, S>>,
    rec: Rec,
    inputs: Vec<Vec<u8>>,
    ctx: String,
}

impl<const N: usize, const S: usize> H<N, S> {
    fn new(cfg: Config, ctx: String) -> Self {
        Self {
            c: Engine::new(cfg),
            rec: Rec::default(),
            inputs: Vec::new(),
            ctx,
        }
    }

    fn push(&mut self, s: &Seg) -> Verdict {
        let f = s.build();
        let m = s.meta_for(&f);
        self.push_frame(f, m)
    }

    /// Pushes and expects a verdict.
    fn expect(&mut self, s: &Seg, want: Verdict) {
        let got = self.push(s);
        assert_eq!(
            got,
            want,
            "{}: verdict of frame #{}",
            self.ctx,
            self.inputs.len()
        );
    }

    fn push_frame(&mut self, f: Vec<u8>, m: RxMeta) -> Verdict {
        let before = self.rec.out.len();
        self.inputs.push(f.clone());
        let v = self.c.push(f.clone(), &m, &mut self.rec);
        let new = &self.rec.out[before..];
        if let Verdict::Passed(r) = v {
            let (last, earlier) = new.split_last().expect("a passed frame is delivered");
            assert_eq!(last.info.cause, ps(r), "{}", self.ctx);
            assert_eq!(last.info.frames, 1, "{}", self.ctx);
            assert!(
                last.bytes == f,
                "{}: passed frame not byte-identical",
                self.ctx
            );
            for o in earlier {
                assert!(
                    matches!(o.info.cause, Cause::Flushed(_)),
                    "{}: only held segments may go before a passed frame",
                    self.ctx
                );
            }
        } else {
            for o in new {
                assert!(matches!(o.info.cause, Cause::Flushed(_)), "{}", self.ctx);
            }
        }
        v
    }

    /// Flushes everything and checks conservation and every output.
    fn finish(&mut self) {
        self.c.flush_all(&mut self.rec);
        let ctx = &self.ctx;
        let s = self.c.stats();
        assert_eq!(self.c.held_frames(), 0, "{ctx}");
        assert!(s.is_conserved(), "{ctx}: conservation {s:?}");
        assert_eq!(s.frames_in, self.inputs.len() as u64, "{ctx}");
        assert_eq!(s.absorbed, self.rec.released.len() as u64, "{ctx}");
        assert_eq!(s.segments, self.rec.out.len() as u64, "{ctx}");
        let frames: u64 = self.rec.out.iter().map(|o| u64::from(o.info.frames)).sum();
        assert_eq!(frames, s.frames_out, "{ctx}");
        let merged: u64 = self
            .rec
            .out
            .iter()
            .map(|o| u64::from(o.info.frames) - 1)
            .sum();
        assert_eq!(merged, s.frames_merged, "{ctx}");
        let coalesced = self.rec.out.iter().filter(|o| o.info.frames > 1).count();
        assert_eq!(coalesced as u64, s.coalesced, "{ctx}");
        let data = self
            .rec
            .out
            .iter()
            .filter(|o| o.info.payload_len > 0)
            .count();
        assert_eq!(data as u64, s.data_out, "{ctx}: segments with payload");
        // `data_in` counts frames with payload: never a TCP frame without (the raw-IP and
        // unreadable inputs, which etherparse does not read as Ethernet, count as possible
        // data).
        let pure = |f: &Vec<u8>| {
            matches!(SlicedPacket::from_ethernet(f),
                Ok(SlicedPacket { transport: Some(TransportSlice::Tcp(t)), .. })
                if t.payload().is_empty())
        };
        let most = self.inputs.iter().filter(|f| !pure(f)).count();
        assert!(
            s.data_in <= most as u64,
            "{ctx}: data_in {} of at most {most} frames with payload",
            s.data_in
        );
        for o in &self.rec.out {
            // An MSS to re-segment with only when two or more frames carry payload.
            assert_eq!(
                o.info.gso_size > 0,
                o.info.gso_segs > 1,
                "{ctx}: gso_size {} of {} data frames",
                o.info.gso_size,
                o.info.gso_segs
            );
        }
        for r in &self.rec.released {
            assert!(
                self.inputs.contains(r),
                "{ctx}: released a frame never pushed"
            );
        }
        for o in &self.rec.out {
            if let Some(strict) = checkable(o.info.cause) {
                check(o, strict, ctx);
            }
        }
    }

    fn shape(&self) -> Vec<(Cause, u16)> {
        self.rec
            .out
            .iter()
            .map(|o| (o.info.cause, o.info.frames))
            .collect()
    }

    fn assert_shape(&self, want: &[(Cause, u16)]) {
        assert_eq!(
            self.shape(),
            want,
            "{}: (cause, frames) of the outputs",
            self.ctx
        );
    }

    fn view(&self, i: usize) -> View {
        check(&self.rec.out[i], false, &self.ctx)
    }

    fn stats(&self) -> &Stats {
        self.c.stats()
    }

    /// Asserts every flush and pass counter: the listed ones as given, all others zero.
    fn counts(&self, flushes: &[(FlushReason, u64)], passes: &[(PassReason, u64)]) {
        let s = self.stats();
        for &r in FlushReason::ALL {
            let want: u64 = flushes.iter().filter(|x| x.0 == r).map(|x| x.1).sum();
            assert_eq!(s.flushed(r), want, "{}: flushed({r})", self.ctx);
        }
        for &r in PassReason::ALL {
            let want: u64 = passes.iter().filter(|x| x.0 == r).map(|x| x.1).sum();
            assert_eq!(s.passed(r), want, "{}: passed({r})", self.ctx);
        }
    }
}

/// Which outputs are valid TCP segments to check: `Some(true)` strictly (no trailing bytes),
/// `Some(false)` leniently (passed through as received, padding allowed), `None` not at all
/// (passed because broken: their byte identity is checked at push time).
fn checkable(cause: Cause) -> Option<bool> {
    match cause {
        Cause::Flushed(_) => Some(true),
        Cause::Passed(
            PassReason::Control
            | PassReason::PushFin
            | PassReason::PureAck
            | PassReason::DupAck
            | PassReason::Options
            | PassReason::UnknownAck,
        ) => Some(false),
        Cause::Passed(_) => None,
    }
}

/// Independent validation of one emitted frame with etherparse.
fn check(o: &Out, strict: bool, ctx: &str) -> View {
    let b = &o.bytes;
    assert_eq!(b.len(), o.info.len, "{ctx}: SegmentInfo::len");
    let l3 = o.info.l3 as usize;
    let sp = if l3 == 0 {
        SlicedPacket::from_ip(b)
    } else {
        SlicedPacket::from_ethernet(b)
    }
    .unwrap_or_else(|e| panic!("{ctx}: output does not parse: {e:?}"));
    let (src, dst, ip_end, ip_id, df, ttl, tos) = match &sp.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            assert_eq!(
                h.header_checksum(),
                h.to_header().calc_header_checksum(),
                "{ctx}: IPv4 header checksum"
            );
            let tos = h.slice()[1];
            (
                h.source().to_vec(),
                h.destination().to_vec(),
                l3 + usize::from(h.total_len()),
                Some(h.identification()),
                Some(h.dont_fragment()),
                h.ttl(),
                tos,
            )
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            (
                h.source().to_vec(),
                h.destination().to_vec(),
                l3 + 40 + usize::from(h.payload_length()),
                None,
                None,
                h.hop_limit(),
                h.traffic_class(),
            )
        }
        other => panic!("{ctx}: not IP: {other:?}"),
    };
    assert!(ip_end - l3 <= 65535, "{ctx}: IP datagram over 65535");
    if strict {
        assert_eq!(ip_end, b.len(), "{ctx}: IP length vs frame length");
    } else {
        assert!(ip_end <= b.len(), "{ctx}: IP length beyond the frame");
    }
    let Some(TransportSlice::Tcp(tcp)) = &sp.transport else {
        panic!("{ctx}: not TCP: {:?}", sp.transport)
    };
    let l4 = tcp.slice().as_ptr() as usize - b.as_ptr() as usize;
    assert_eq!(l4, o.info.l4 as usize, "{ctx}: SegmentInfo::l4");
    let tcp_len = tcp.slice().len();
    assert_eq!(l4 + tcp_len, ip_end, "{ctx}");
    if o.info.checksum == OutChecksum::Partial {
        // Linux `tcp_gro_complete`: the folded pseudo-header sum, not complemented.
        let mut p = src.clone();
        p.extend_from_slice(&dst);
        p.extend_from_slice(&(tcp_len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 6]);
        assert_eq!(tcp.checksum(), fold(words(&p)), "{ctx}: partial checksum");
    } else {
        let want = if src.len() == 4 {
            tcp.calc_checksum_ipv4(src[..].try_into().unwrap(), dst[..].try_into().unwrap())
        } else {
            tcp.calc_checksum_ipv6(src[..].try_into().unwrap(), dst[..].try_into().unwrap())
        }
        .unwrap();
        assert_eq!(tcp.checksum(), want, "{ctx}: TCP checksum");
    }
    let seq = tcp.sequence_number();
    let payload = tcp.payload();
    for (i, &x) in payload.iter().enumerate() {
        assert_eq!(
            x,
            pat(seq.wrapping_add(i as u32)),
            "{ctx}: payload byte {i} of the segment at seq {seq}"
        );
    }
    assert_eq!(o.info.payload_len as usize, payload.len(), "{ctx}");
    View {
        seq,
        ack: tcp.acknowledgment_number(),
        win: tcp.window_size(),
        flags: tcp.header_slice()[13],
        opts: tcp.options().to_vec(),
        payload_len: payload.len(),
        ip_id,
        df,
        ttl,
        tos,
        sport: tcp.source_port(),
    }
}

// ---------------------------------------------------------------------------------------------
// Rule 1: contiguous same-size segments merge; lengths and checksums (full and partial).

#[test]
fn r01_contiguous_segments_merge() {
    for c in matrix(&IPS, &BOTH) {
        for mode in [OutChecksum::Full, OutChecksum::Partial] {
            let mut h = H::<16, 64>::new(
                c.cfg().with_checksum_out(mode),
                format!("{c} contiguous {mode:?}"),
            );
            let b = c.base();
            h.expect(&b.data(0), Verdict::Held);
            for i in 1..4 {
                h.expect(&b.data(i), Verdict::Merged);
            }
            let hdr = b.data(0).build().len() - MSS as usize;
            // A lone segment of another flow is never rewritten.
            let lone = b.data(0).with(|s| s.sport = 40001);
            h.expect(&lone, Verdict::Held);
            h.finish();
            h.assert_shape(&[
                (fl(FlushReason::FlushAll), 4),
                (fl(FlushReason::FlushAll), 1),
            ]);
            let info = h.rec.out[0].info;
            assert_eq!(info.checksum, mode, "{}", h.ctx);
            assert_eq!(info.frames, 4);
            assert_eq!(info.gso_segs, 4);
            assert_eq!(info.gso_size, MSS as u16);
            assert_eq!(info.payload_len, 4 * MSS);
            assert_eq!(info.len, hdr + 4 * MSS as usize);
            assert_eq!(info.l3 as usize, b.l3());
            assert!(!info.fixed_id);
            let v = h.view(0);
            assert_eq!((v.seq, v.ack, v.win, v.flags), (b.seq, b.ack, b.win, ACK));
            assert_eq!(v.payload_len, 4 * MSS as usize);
            assert_eq!(h.rec.out[1].info.checksum, OutChecksum::AsReceived);
            assert!(h.rec.out[1].bytes == lone.build());
            h.counts(&[(FlushReason::FlushAll, 2)], &[]);
            assert_eq!(h.stats().frames_merged, 3);
            assert_eq!(h.stats().coalesced, 1);
        }
    }
}

// Rule 2: a sequence gap completes the held segment; the new frame starts another.

#[test]
fn r02_sequence_gap_flushes() {
    for c in matrix(&IPS, &BOTH) {
        let mut h = c.h("seq gap");
        let b = c.base();
        h.expect(&b.data(0), Verdict::Held);
        h.expect(&b.data(1), Verdict::Merged);
        h.expect(&b.data(3), Verdict::Held); // gap: d2 missing
        h.expect(&b.data(4), Verdict::Merged);
        h.expect(&b.data(2), Verdict::Held); // late: a gap again (backwards)
        h.expect(&b.data(1), Verdict::Held); // retransmission of an older one
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::SeqGap), 2),
            (fl(FlushReason::SeqGap), 2),
            (fl(FlushReason::SeqGap), 1),
            (fl(FlushReason::FlushAll), 1),
        ]);
        assert_eq!(h.view(1).seq, b.data(3).seq);
        h.counts(&[(FlushReason::SeqGap, 3), (FlushReason::FlushAll, 1)], &[]);
    }
}

// Rule 3: PSH/FIN merge and complete the segment; with nothing held they pass alone.

#[test]
fn r03_psh_fin_complete_the_segment() {
    for c in matrix(&IPS, &BOTH) {
        for flag in [PSH, FIN, PSH | FIN] {
            let mut h = c.h(format!("flag {flag:#x}"));
            let b = c.base();
            let lone = b.data(0).with(|s| s.flags |= flag);
            h.expect(&lone, Verdict::Passed(PassReason::PushFin));
            h.expect(&b.data(1), Verdict::Held);
            h.expect(&b.data(2), Verdict::Merged);
            h.expect(
                &b.data(3).with(|s| s.flags |= flag),
                Verdict::MergedAndFlushed(FlushReason::PushFin),
            );
            h.expect(&b.data(4), Verdict::Held);
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::PushFin), 1),
                (fl(FlushReason::PushFin), 3),
                (fl(FlushReason::FlushAll), 1),
            ]);
            let v = h.view(1);
            assert_eq!(
                v.flags,
                ACK | flag,
                "{}: PSH/FIN ORed into the output",
                h.ctx
            );
            assert_eq!(v.payload_len, 3 * MSS as usize);
            assert_eq!(h.view(2).flags, ACK);
            h.counts(
                &[(FlushReason::PushFin, 1), (FlushReason::FlushAll, 1)],
                &[(PassReason::PushFin, 1)],
            );
        }
    }
}

// Rule 4: a shorter segment merges and completes; a longer one: Gro refuses (Mss), Lro merges.

#[test]
fn r04_short_and_long_segments() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        let mut h = c.h("short");
        h.expect(&b.data(0), Verdict::Held);
        h.expect(&b.data(1), Verdict::Merged);
        h.expect(
            &b.data(2).with(|s| s.len = 37),
            Verdict::MergedAndFlushed(FlushReason::ShortSegment),
        );
        let next = b.data(3).with(|s| s.seq = b.data(2).seq + 37);
        h.expect(&next, Verdict::Held);
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::ShortSegment), 3),
            (fl(FlushReason::FlushAll), 1),
        ]);
        assert_eq!(h.view(0).payload_len, 2 * MSS as usize + 37);
        assert_eq!(h.rec.out[0].info.gso_size, MSS as u16);
        h.counts(
            &[(FlushReason::ShortSegment, 1), (FlushReason::FlushAll, 1)],
            &[],
        );

        let mut h = c.h("long");
        h.expect(&b.data(0), Verdict::Held);
        let long = b.data(1).with(|s| s.len = MSS as usize + 20);
        if c.gro() {
            h.expect(&long, Verdict::Held);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::Mss), 1), (fl(FlushReason::FlushAll), 1)]);
            h.counts(&[(FlushReason::Mss, 1), (FlushReason::FlushAll, 1)], &[]);
        } else {
            h.expect(&long, Verdict::Merged);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::FlushAll), 2)]);
            assert_eq!(h.view(0).payload_len, 2 * MSS as usize + 20);
            assert_eq!(h.rec.out[0].info.gso_size, MSS as u16 + 20);
            h.counts(&[(FlushReason::FlushAll, 1)], &[]);
        }
    }
}

// Rule 5: ACK number. Gro: any change flushes. Lro: advancing merges (newest wins), backwards
// flushes.

#[test]
fn r05_ack_number() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        let mut h = c.h("ack");
        h.expect(&b.data(0), Verdict::Held);
        if c.gro() {
            h.expect(&b.data(1).with(|s| s.ack = 5100), Verdict::Held);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::Ack), 1), (fl(FlushReason::FlushAll), 1)]);
            assert_eq!(h.view(1).ack, 5100);
            h.counts(&[(FlushReason::Ack, 1), (FlushReason::FlushAll, 1)], &[]);
        } else {
            h.expect(&b.data(1).with(|s| s.ack = 5100), Verdict::Merged);
            h.expect(&b.data(2).with(|s| s.ack = 5200), Verdict::Merged);
            h.expect(&b.data(3).with(|s| s.ack = 5150), Verdict::Held);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::Ack), 3), (fl(FlushReason::FlushAll), 1)]);
            assert_eq!(h.view(0).ack, 5200, "{}: newest ACK in the output", h.ctx);
            assert_eq!(h.view(1).ack, 5150);
            h.counts(&[(FlushReason::Ack, 1), (FlushReason::FlushAll, 1)], &[]);
        }
    }
}

// Rule 6: window. Gro: differing window flushes. Lro: merges, newest window in the output.

#[test]
fn r06_window() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        let mut h = c.h("window");
        h.expect(&b.data(0), Verdict::Held);
        if c.gro() {
            h.expect(&b.data(1).with(|s| s.win = 1024), Verdict::Held);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::Window), 1), (fl(FlushReason::FlushAll), 1)]);
            assert_eq!(h.view(1).win, 1024);
            h.counts(&[(FlushReason::Window, 1), (FlushReason::FlushAll, 1)], &[]);
        } else {
            h.expect(&b.data(1).with(|s| s.win = 1024), Verdict::Merged);
            h.expect(&b.data(2).with(|s| s.win = 700), Verdict::Merged);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::FlushAll), 3)]);
            assert_eq!(h.view(0).win, 700, "{}: newest window in the output", h.ctx);
            h.counts(&[(FlushReason::FlushAll, 1)], &[]);
        }
    }
}

// Rule 7: TTL/hop limit, TOS/traffic class (ECN CE, DSCP), DF must be equal (both policies).

#[test]
fn r07_ip_fields() {
    for c in matrix(&IPS, &BOTH) {
        // ECT(0) on the held segment, then the variants.
        let b = c.base().with(|s| s.tos = 0x02);
        let mut variants: Vec<(&str, Seg)> = vec![
            ("ttl", b.data(1).with(|s| s.ttl = 63)),
            ("ecn ce", b.data(1).with(|s| s.tos = 0x03)),
            ("dscp", b.data(1).with(|s| s.tos = 0x2a)),
        ];
        if c.ip == Ip::V4 {
            variants.push(("df", b.data(1).with(|s| s.df = false)));
        }
        for (what, v) in variants {
            let mut h = c.h(what);
            h.expect(&b.data(0), Verdict::Held);
            h.expect(&v, Verdict::Held);
            h.finish();
            h.assert_shape(&[
                (fl(FlushReason::IpFields), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
            let out = h.view(1);
            assert_eq!(
                (out.ttl, out.tos),
                (v.ttl, v.tos),
                "{}: kept as sent",
                h.ctx
            );
            if c.ip == Ip::V4 {
                assert_eq!(out.df, Some(v.df));
            }
            h.counts(
                &[(FlushReason::IpFields, 1), (FlushReason::FlushAll, 1)],
                &[],
            );
        }
    }
}

// Rule 7 (TCP side): the flags word beyond PSH/FIN (CWR, ECE, AE/reserved bits, data offset)
// must be equal in both policies; CWR on every frame merges (Linux after "gro: flushing when
// CWR is set negatively affects AccECN").

#[test]
fn r07_tcp_flags_word() {
    for c in matrix(&IPS, &BOTH) {
        for (what, f0, f1, merges) in [
            (
                "cwr on all",
                (|s: &mut Seg| s.flags |= 0x80) as fn(&mut Seg),
                (|s: &mut Seg| s.flags |= 0x80) as fn(&mut Seg),
                true,
            ),
            ("ece on all", |s| s.flags |= 0x40, |s| s.flags |= 0x40, true),
            ("cwr appears", |_| {}, |s| s.flags |= 0x80, false),
            ("cwr disappears", |s| s.flags |= 0x80, |_| {}, false),
            ("ece appears", |_| {}, |s| s.flags |= 0x40, false),
            ("ae bit", |_| {}, |s| s.res = 1, false),
            ("reserved bit", |_| {}, |s| s.res = 8, false),
        ] {
            let b = c.base();
            let mut h = c.h(what);
            h.expect(&b.data(0).with(f0), Verdict::Held);
            h.expect(&b.data(1).with(f0), Verdict::Merged);
            if merges {
                h.expect(&b.data(2).with(f1), Verdict::Merged);
                h.finish();
                h.assert_shape(&[(fl(FlushReason::FlushAll), 3)]);
                h.counts(&[(FlushReason::FlushAll, 1)], &[]);
            } else {
                h.expect(&b.data(2).with(f1), Verdict::Held);
                h.finish();
                h.assert_shape(&[(fl(FlushReason::Flags), 2), (fl(FlushReason::FlushAll), 1)]);
                let want = b.data(2).with(f1).build();
                assert_eq!(
                    h.view(1).flags,
                    want[b.l3() + if c.ip == Ip::V4 { 20 } else { 40 } + 13]
                );
                h.counts(&[(FlushReason::Flags, 1), (FlushReason::FlushAll, 1)], &[]);
            }
        }
    }
}

// Rule 8: IPv4 ID. Gro: incrementing or fixed (decided by the second frame), mixed flushes.
// Lro ignores IDs.

#[test]
fn r08_ipv4_id() {
    for c in matrix(&V4, &BOTH) {
        let b = c.base();
        let run = |ids: &[u16], what: &str| {
            let mut h = c.h(format!("ids {what} {ids:?}"));
            for (i, &id) in ids.iter().enumerate() {
                h.push(&b.data(i as u32).with(|s| s.id = id));
            }
            h.finish();
            h
        };
        // Incrementing, across the 16-bit wrap.
        let h = run(&[0xfffe, 0xffff, 0, 1], "incrementing");
        h.assert_shape(&[(fl(FlushReason::FlushAll), 4)]);
        if c.gro() {
            assert!(!h.rec.out[0].info.fixed_id);
        }
        // Fixed.
        let h = run(&[7, 7, 7, 7], "fixed");
        h.assert_shape(&[(fl(FlushReason::FlushAll), 4)]);
        assert_eq!(h.view(0).ip_id, Some(7));
        if c.gro() {
            assert!(h.rec.out[0].info.fixed_id, "{}: fixed_id", h.ctx);
        }
        h.counts(&[(FlushReason::FlushAll, 1)], &[]);
        // Mixed.
        for ids in [&[100u16, 101, 101][..], &[100, 100, 101], &[100, 7, 8]] {
            let h = run(ids, "mixed");
            if c.gro() {
                let first = if ids[1] == 7 { 1 } else { 2 };
                let rest = ids.len() as u16 - first;
                h.assert_shape(&[
                    (fl(FlushReason::IpId), first),
                    (fl(FlushReason::FlushAll), rest),
                ]);
                h.counts(&[(FlushReason::IpId, 1), (FlushReason::FlushAll, 1)], &[]);
            } else {
                h.assert_shape(&[(fl(FlushReason::FlushAll), 3)]);
                h.counts(&[(FlushReason::FlushAll, 1)], &[]);
            }
        }
    }
}

// Rule 9: TCP options. Gro: byte-identical. Lro: aligned timestamps with non-decreasing TSval
// (newest kept); anything else passes alone after the held segment.

#[test]
fn r09_options_gro_byte_identical() {
    for c in matrix(&IPS, &GRO) {
        let b = c.base();
        for (what, o0, o1, merges) in [
            ("same ts", ts(1000, 77), ts(1000, 77), true),
            ("ts changed", ts(1000, 77), ts(1001, 77), false),
            ("ecr changed", ts(1000, 77), ts(1000, 78), false),
            ("same sack", sack(10, 20), sack(10, 20), true),
            ("sack changed", sack(10, 20), sack(10, 30), false),
            ("ts vs none", ts(1000, 77), Vec::new(), false),
        ] {
            let mut h = c.h(what);
            h.expect(&b.data(0).with(|s| s.opts = o0.clone()), Verdict::Held);
            let d1 = b.data(1).with(|s| s.opts = o1.clone());
            if merges {
                h.expect(&d1, Verdict::Merged);
                h.expect(&b.data(2).with(|s| s.opts = o1.clone()), Verdict::Merged);
                h.finish();
                h.assert_shape(&[(fl(FlushReason::FlushAll), 3)]);
                assert_eq!(h.view(0).opts, o0);
                h.counts(&[(FlushReason::FlushAll, 1)], &[]);
            } else {
                h.expect(&d1, Verdict::Held);
                h.finish();
                // A different data offset is a different flags word in Linux's terms.
                let reason = if o0.len() == o1.len() {
                    FlushReason::Options
                } else {
                    FlushReason::Flags
                };
                h.assert_shape(&[(fl(reason), 1), (fl(FlushReason::FlushAll), 1)]);
                assert_eq!(h.view(1).opts, o1);
                h.counts(&[(reason, 1), (FlushReason::FlushAll, 1)], &[]);
            }
        }
    }
}

#[test]
fn r09_options_lro_timestamps() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        // Non-decreasing TSval merges; the newest TSval/TSecr is written into the output. The
        // comparison is modulo 2^32 (RFC 7323 PAWS), so a wrapping TSval still advances.
        for (v0, v1, v2) in [
            (1000u32, 1000u32, 1005u32),
            (0xffff_fff0, 0xffff_ffff, 0x10),
        ] {
            let mut h = c.h(format!("ts {v0:#x}"));
            h.expect(&b.data(0).with(|s| s.opts = ts(v0, 77)), Verdict::Held);
            h.expect(&b.data(1).with(|s| s.opts = ts(v1, 78)), Verdict::Merged);
            h.expect(&b.data(2).with(|s| s.opts = ts(v2, 80)), Verdict::Merged);
            h.finish();
            h.assert_shape(&[(fl(FlushReason::FlushAll), 3)]);
            assert_eq!(h.view(0).opts, ts(v2, 80), "{}: newest timestamps", h.ctx);
            h.counts(&[(FlushReason::FlushAll, 1)], &[]);
        }
        // TSval going backwards; timestamps appearing or disappearing.
        for (what, o0, o1) in [
            ("backwards", ts(1000, 77), ts(999, 78)),
            ("ts then none", ts(1000, 77), Vec::new()),
            ("none then ts", Vec::new(), ts(1000, 77)),
        ] {
            let mut h = c.h(what);
            h.expect(&b.data(0).with(|s| s.opts = o0.clone()), Verdict::Held);
            h.expect(&b.data(1).with(|s| s.opts = o1.clone()), Verdict::Held);
            h.finish();
            // A different data offset is a different flags word (documented as `Flags`).
            let reason = if o0.len() == o1.len() {
                FlushReason::Options
            } else {
                FlushReason::Flags
            };
            h.assert_shape(&[(fl(reason), 1), (fl(FlushReason::FlushAll), 1)]);
            assert_eq!(h.view(1).opts, o1);
            h.counts(&[(reason, 1), (FlushReason::FlushAll, 1)], &[]);
        }
        // SACK or any other layout: passed alone, the flow's held segment first.
        for (what, o) in [
            ("sack", sack(10, 20)),
            ("ts unaligned", {
                let mut o = ts(1000, 78)[2..].to_vec();
                o.extend_from_slice(&[1, 1]);
                o
            }),
            ("mss", vec![2, 4, 5, 180]),
            ("ts + sack", [ts(1000, 78), sack(10, 20)].concat()),
        ] {
            let mut h = c.h(what);
            h.expect(
                &b.data(0).with(|s| s.opts = o.clone()),
                Verdict::Passed(PassReason::Options),
            );
            h.expect(&b.data(1).with(|s| s.opts = ts(1000, 77)), Verdict::Held);
            h.expect(
                &b.data(2).with(|s| s.opts = o.clone()),
                Verdict::Passed(PassReason::Options),
            );
            h.expect(&b.data(3).with(|s| s.opts = ts(1000, 77)), Verdict::Held);
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::Options), 1),
                (fl(FlushReason::Unmergeable), 1),
                (ps(PassReason::Options), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
            h.counts(
                &[(FlushReason::Unmergeable, 1), (FlushReason::FlushAll, 1)],
                &[(PassReason::Options, 2)],
            );
        }
    }
}

// Rule 10: SYN, RST, URG, or no ACK flag: passed alone (Control), after the held segment.

#[test]
fn r10_control_segments() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        for (what, make) in [
            (
                "syn-ack",
                (|s: &mut Seg| (s.flags, s.len) = (SYN | ACK, 0)) as fn(&mut Seg),
            ),
            ("syn with data", |s: &mut Seg| s.flags = SYN | ACK),
            ("rst", |s: &mut Seg| (s.flags, s.len) = (RST, 0)),
            ("rst-ack", |s: &mut Seg| (s.flags, s.len) = (RST | ACK, 0)),
            ("urg", |s: &mut Seg| (s.flags, s.urg) = (URG | ACK, 10)),
            ("no ack", |s: &mut Seg| s.flags = 0),
            ("psh without ack", |s: &mut Seg| s.flags = PSH),
        ] {
            let mut h = c.h(what);
            let ctl = Verdict::Passed(PassReason::Control);
            h.expect(&b.data(0).with(make), ctl);
            h.expect(&b.data(1), Verdict::Held);
            h.expect(&b.data(2), Verdict::Merged);
            h.expect(&b.data(3).with(make), ctl);
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::Control), 1),
                (fl(FlushReason::Unmergeable), 2),
                (ps(PassReason::Control), 1),
            ]);
            assert_eq!(h.view(1).seq, b.data(1).seq, "{}: order kept", h.ctx);
            h.counts(
                &[(FlushReason::Unmergeable, 1)],
                &[(PassReason::Control, 2)],
            );
        }
    }
}

// Rule 11: pure ACKs.

#[test]
fn r11_pure_acks_gro_never_merge() {
    for c in matrix(&IPS, &GRO) {
        let b = c.base();
        let mut h = c.h("pure acks");
        let pure = Verdict::Passed(PassReason::PureAck);
        h.expect(&b.pure_ack(5000, 512), pure);
        h.expect(&b.pure_ack(5100, 512), pure);
        h.expect(&b.pure_ack(5100, 512), pure); // a duplicate
        h.expect(&b.data(0), Verdict::Held);
        h.expect(&b.data(1).pure_ack(5000, 512), pure);
        h.expect(&b.data(1), Verdict::Held);
        h.expect(
            &b.data(2).pure_ack(5000, 512).with(|s| s.flags |= FIN),
            pure,
        );
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::PureAck), 1),
            (ps(PassReason::PureAck), 1),
            (ps(PassReason::PureAck), 1),
            (fl(FlushReason::Unmergeable), 1),
            (ps(PassReason::PureAck), 1),
            (fl(FlushReason::Unmergeable), 1),
            (ps(PassReason::PureAck), 1),
        ]);
        h.counts(
            &[(FlushReason::Unmergeable, 2)],
            &[(PassReason::PureAck, 5)],
        );
        assert_eq!(h.stats().acks_merged, 0);
        assert_eq!(h.stats().absorbed, 0);
    }
}

#[test]
fn r11_pure_acks_lro_run_collapses() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        // The echoed timestamp changes too, in both its 16-bit halves: the head's checksum is
        // updated for every word that changed.
        let ecr = |tsv: u32| tsv.wrapping_mul(0x0001_0003);
        let a = |ack: u32, win: u16, tsv: u32| {
            b.pure_ack(ack, win).with(|s| s.opts = ts(tsv, ecr(tsv)))
        };
        for mode in [OutChecksum::Full, OutChecksum::Partial] {
            let cfg = c.cfg().with_checksum_out(mode);
            let mut h = H::<16, 64>::new(cfg, format!("{c} ack run {mode:?}"));
            // The first ACK of a flow the engine knows nothing about may be a duplicate: alone.
            h.expect(&a(5000, 512, 100), Verdict::Passed(PassReason::UnknownAck));
            h.expect(&a(5100, 600, 101), Verdict::Held);
            let (a2, a3, a4) = (a(5200, 700, 102), a(5300, 800, 103), a(5300, 900, 104));
            h.expect(&a2, Verdict::Absorbed);
            h.expect(&a3, Verdict::Absorbed);
            h.expect(&a4, Verdict::Absorbed); // same ACK, larger window: superseded too
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::UnknownAck), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
            let v = h.view(1);
            assert_eq!(
                (v.ack, v.win),
                (5300, 900),
                "{}: newest ACK and window",
                h.ctx
            );
            assert_eq!(v.opts, ts(104, ecr(104)), "{}: newest timestamps", h.ctx);
            assert_eq!(v.payload_len, 0);
            assert_eq!(h.rec.released, vec![a2.build(), a3.build(), a4.build()]);
            assert_eq!(h.stats().acks_merged, 3);
            assert_eq!(h.stats().absorbed, 3);
            assert_eq!(h.stats().frames_merged, 0);
            assert_eq!(h.rec.out[1].info.checksum, mode);
            h.counts(
                &[(FlushReason::FlushAll, 1)],
                &[(PassReason::UnknownAck, 1)],
            );
        }
    }
}

#[test]
fn r11_pure_acks_lro_duplicates_and_shrinking_window() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        // Duplicates: the held ACK goes first, then each duplicate alone.
        let mut h = c.h("dup acks");
        h.expect(
            &b.pure_ack(5000, 512),
            Verdict::Passed(PassReason::UnknownAck),
        );
        h.expect(&b.pure_ack(5100, 512), Verdict::Held);
        h.expect(&b.pure_ack(5100, 512), Verdict::Passed(PassReason::DupAck));
        h.expect(&b.pure_ack(5100, 512), Verdict::Passed(PassReason::DupAck));
        h.expect(&b.pure_ack(5200, 512), Verdict::Held);
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::UnknownAck), 1),
            (fl(FlushReason::Unmergeable), 1),
            (ps(PassReason::DupAck), 1),
            (ps(PassReason::DupAck), 1),
            (fl(FlushReason::FlushAll), 1),
        ]);
        assert_eq!(h.view(1).ack, 5100);
        assert_eq!(h.view(4).ack, 5200);
        assert_eq!(h.stats().acks_merged, 0);
        h.counts(
            &[(FlushReason::Unmergeable, 1), (FlushReason::FlushAll, 1)],
            &[(PassReason::UnknownAck, 1), (PassReason::DupAck, 2)],
        );

        // Same ACK with a smaller window is neither a duplicate nor a newer ACK: the held one
        // is completed and the new one held.
        let mut h = c.h("window shrinks");
        h.expect(
            &b.pure_ack(5000, 512),
            Verdict::Passed(PassReason::UnknownAck),
        );
        h.expect(&b.pure_ack(5100, 600), Verdict::Held);
        h.expect(&b.pure_ack(5100, 500), Verdict::Held);
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::UnknownAck), 1),
            (fl(FlushReason::Window), 1),
            (fl(FlushReason::FlushAll), 1),
        ]);
        assert_eq!(h.view(2).win, 500);
        h.counts(
            &[(FlushReason::Window, 1), (FlushReason::FlushAll, 1)],
            &[(PassReason::UnknownAck, 1)],
        );

        // An older ACK (reordered): the held one goes first; the old one is stale (the sender
        // ignores an ACK below SND.UNA), so it may be held and superseded by the next newer
        // one; a pure ACK with SACK blocks (a duplicate ACK after loss, typically) goes alone,
        // after the held segment.
        let mut h = c.h("old ack, sack");
        let unknown = Verdict::Passed(PassReason::UnknownAck);
        h.expect(&b.pure_ack(5000, 512), unknown);
        h.expect(&b.pure_ack(5200, 512), Verdict::Held);
        h.expect(&b.pure_ack(5100, 512), Verdict::Held);
        h.expect(&b.pure_ack(5300, 512), Verdict::Absorbed);
        let sacked = b.pure_ack(5300, 512).with(|s| s.opts = sack(6000, 7000));
        h.expect(&sacked, Verdict::Passed(PassReason::Options));
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::UnknownAck), 1),
            (fl(FlushReason::Ack), 1),
            (fl(FlushReason::Unmergeable), 1),
            (ps(PassReason::Options), 1),
        ]);
        assert_eq!((h.view(1).ack, h.view(2).ack), (5200, 5300));
        h.counts(
            &[(FlushReason::Ack, 1), (FlushReason::Unmergeable, 1)],
            &[(PassReason::UnknownAck, 1), (PassReason::Options, 1)],
        );
    }
}

/// The `Lro` ACK memory learns a flow's ACK state only from a frame passed alone that it can
/// trust: one whose checksums were verified, and that has ACK set (the ACK number field of a
/// segment without ACK means nothing). A pure ACK repeating what an untrusted frame said is
/// then the first the engine knows of the flow (alone as unknown, not as a duplicate), and the
/// next advancing one is held.
#[test]
fn r11_lro_ack_memory_learns_only_from_trusted_frames() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        let untrusted: [(&str, Seg, PassReason); 2] = [
            (
                "bad checksum",
                b.pure_ack(5000, 512).with(|s| {
                    s.rx = Rx::None;
                    s.bad_tcp = true;
                }),
                PassReason::BadTcpChecksum,
            ),
            (
                "no ACK flag",
                b.pure_ack(5000, 512).with(|s| s.flags = 0),
                PassReason::Control,
            ),
        ];
        for (what, first, reason) in untrusted {
            let mut h = c.h(what);
            h.expect(&first, Verdict::Passed(reason));
            h.expect(
                &b.pure_ack(5000, 512),
                Verdict::Passed(PassReason::UnknownAck),
            );
            h.expect(&b.pure_ack(5100, 512), Verdict::Held);
            h.finish();
            h.counts(
                &[(FlushReason::FlushAll, 1)],
                &[(reason, 1), (PassReason::UnknownAck, 1)],
            );
        }
    }
}

#[test]
fn r11_pure_ack_after_data_lro() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        let mut h = c.h("ack after data");
        h.expect(&b.data(0), Verdict::Held);
        let pure = b.data(1).pure_ack(5100, 700);
        h.expect(&pure, Verdict::Absorbed);
        h.expect(&b.data(1).with(|s| s.ack = 5100), Verdict::Merged);
        h.expect(&b.data(2).pure_ack(5200, 800), Verdict::Absorbed);
        h.finish();
        h.assert_shape(&[(fl(FlushReason::FlushAll), 2)]);
        let v = h.view(0);
        assert_eq!(
            (v.ack, v.win),
            (5200, 800),
            "{}: newest ACK on the data",
            h.ctx
        );
        assert_eq!(v.payload_len, 2 * MSS as usize);
        assert_eq!(h.stats().acks_merged, 2);
        assert_eq!(h.stats().absorbed, 2);
        assert_eq!(h.rec.released[0], pure.build());
        h.counts(&[(FlushReason::FlushAll, 1)], &[]);

        // A pure ACK with the held data's ACK number and window is a duplicate whatever its
        // sequence number: the data goes first, then the duplicate alone.
        let mut h = c.h("dup ack after data");
        h.expect(&b.data(0), Verdict::Held);
        h.expect(&b.data(1), Verdict::Merged);
        h.expect(
            &b.pure_ack(b.ack, b.win),
            Verdict::Passed(PassReason::DupAck),
        );
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::Unmergeable), 2),
            (ps(PassReason::DupAck), 1),
        ]);
        h.counts(&[(FlushReason::Unmergeable, 1)], &[(PassReason::DupAck, 1)]);

        // Data following a held (advancing) pure ACK of the flow, contiguous: merged into it.
        let mut h = c.h("data after held ack");
        h.expect(
            &b.pure_ack(4000, 512),
            Verdict::Passed(PassReason::UnknownAck),
        );
        h.expect(&b.pure_ack(4500, 512), Verdict::Held);
        h.expect(&b.data(0), Verdict::Merged);
        h.expect(&b.data(1), Verdict::Merged);
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::UnknownAck), 1),
            (fl(FlushReason::FlushAll), 3),
        ]);
        let v = h.view(1);
        assert_eq!(
            (v.seq, v.ack, v.payload_len),
            (b.seq, b.ack, 2 * MSS as usize)
        );
        h.counts(
            &[(FlushReason::FlushAll, 1)],
            &[(PassReason::UnknownAck, 1)],
        );
    }
}

// Rule 12: Ethernet padding.

/// Frames padded as a runt would be (to at least 60 bytes), with zero bytes.
fn padded(s: Seg, pad: &[u8]) -> Seg {
    s.with(|s| s.pad = pad.to_vec())
}

#[test]
fn r12_padding_lro_trims_checksum_neutral_padding() {
    for c in matrix(&IPS, &LRO) {
        for rx in [Rx::None, Rx::Complete, Rx::Verified] {
            let b = c.base().with(|s| s.rx = rx);
            let zeros = [0u8; 6];
            // A run of padded pure ACKs (54 + 6 bytes for untagged IPv4).
            let mut h = c.h(format!("padded acks {rx:?}"));
            h.expect(
                &b.pure_ack(5000, 512),
                Verdict::Passed(PassReason::UnknownAck),
            );
            h.expect(&padded(b.pure_ack(5100, 512), &zeros), Verdict::Held);
            h.expect(&padded(b.pure_ack(5200, 512), &zeros), Verdict::Absorbed);
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::UnknownAck), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
            assert_eq!(h.rec.out[1].bytes.len(), b.pure_ack(0, 0).build().len());
            assert_eq!(h.view(1).ack, 5200);
            assert_eq!(h.stats().trimmed, 2, "{}", h.ctx);
            h.counts(
                &[(FlushReason::FlushAll, 1)],
                &[(PassReason::UnknownAck, 1)],
            );

            // Data: zero padding, and padding whose ones'-complement sum is -0 (0xffff), on an
            // odd-length datagram too.
            let mut h = c.h(format!("padded data {rx:?}"));
            h.expect(&b.data(0), Verdict::Held);
            h.expect(&padded(b.data(1), &zeros), Verdict::Merged);
            h.expect(&padded(b.data(2), &[0xff, 0xff, 0, 0]), Verdict::Merged);
            let odd = padded(b.data(3).with(|s| s.len = 51), &[0, 0xff, 0xff, 0, 0]);
            h.expect(&odd, Verdict::MergedAndFlushed(FlushReason::ShortSegment));
            h.finish();
            h.assert_shape(&[(fl(FlushReason::ShortSegment), 4)]);
            assert_eq!(h.view(0).payload_len, 3 * MSS as usize + 51);
            assert_eq!(h.stats().trimmed, 3);
            h.counts(&[(FlushReason::ShortSegment, 1)], &[]);
        }
    }
}

/// The duplicate-ACK memory must not go backwards: after an old (reordered) ACK is delivered,
/// a duplicate of the newest ACK delivered is still a duplicate, never held and absorbed.
#[test]
fn r11_dup_ack_after_reordered_old_ack_lro() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        // The old ACK still held when the duplicate arrives, or delivered before it:
        // delivering it must not make the memory older, or the duplicate is held and then
        // superseded.
        for delivered in [false, true] {
            let mut h = c.h(format!(
                "dup after old ack, old one delivered first: {delivered}"
            ));
            let unknown = Verdict::Passed(PassReason::UnknownAck);
            h.expect(&b.pure_ack(5000, 512), unknown);
            h.expect(&b.pure_ack(5200, 512), Verdict::Held);
            // Old, reordered: flushes 5200 first, then is held (stale, nothing to lose).
            h.expect(&b.pure_ack(5100, 512), Verdict::Held);
            if delivered {
                h.c.flush_all(&mut h.rec);
            }
            // Duplicates the newest ACK the stack has seen.
            h.expect(&b.pure_ack(5200, 512), Verdict::Passed(PassReason::DupAck));
            h.expect(&b.pure_ack(5300, 512), Verdict::Held);
            h.finish();
            assert!(
                h.rec.released.is_empty(),
                "{}: a duplicate ACK was absorbed",
                h.ctx
            );
            let old_one = if delivered {
                FlushReason::FlushAll
            } else {
                FlushReason::Unmergeable
            };
            h.assert_shape(&[
                (ps(PassReason::UnknownAck), 1),
                (fl(FlushReason::Ack), 1),
                (fl(old_one), 1),
                (ps(PassReason::DupAck), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
        }
    }
}

/// The ACK memory with nothing held (`lone_ack`): a window update of the newest ACK is not a
/// duplicate (RFC 5681 section 2: same ACK number *and* window), so it may be held; after a SYN
/// or RST of the flow the memory no longer applies, so the next pure ACK is unknown again.
#[test]
fn r11_ack_memory_with_nothing_held_lro() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        let unknown = Verdict::Passed(PassReason::UnknownAck);
        let mut h = c.h("window update, nothing held");
        h.expect(&b.pure_ack(5000, 512), unknown);
        h.expect(&b.pure_ack(5000, 700), Verdict::Held);
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::UnknownAck), 1),
            (fl(FlushReason::FlushAll), 1),
        ]);
        assert_eq!(h.view(1).win, 700);

        for (what, ctl) in [("rst-ack", RST | ACK), ("rst", RST), ("syn-ack", SYN | ACK)] {
            let mut h = c.h(format!("{what} forgets the memory"));
            h.expect(&b.pure_ack(5000, 512), unknown);
            let ctl = b.pure_ack(5000, 512).with(|s| s.flags = ctl);
            h.expect(&ctl, Verdict::Passed(PassReason::Control));
            h.expect(&b.pure_ack(5100, 512), unknown);
            h.finish();
        }
    }
}

/// `Stats::trimmed` counts "frames whose Ethernet padding was trimmed": a padded frame that is
/// delivered alone, as received (padding included), was not trimmed.
#[test]
fn r12_trimmed_counts_only_trimmed_frames() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        let zeros = [0u8; 6];
        for (what, lone, reason) in [
            (
                "unknown ack",
                padded(b.pure_ack(5000, 512), &zeros),
                PassReason::UnknownAck,
            ),
            (
                "psh",
                padded(b.data(0).with(|s| s.flags |= PSH), &zeros),
                PassReason::PushFin,
            ),
        ] {
            let mut h = c.h(format!("padded {what}"));
            h.expect(&lone, Verdict::Passed(reason));
            h.finish();
            assert!(h.rec.out[0].bytes.len() > b.data(0).pure_ack(0, 0).build().len());
            assert_eq!(h.stats().trimmed, 0, "{}: frames actually trimmed", h.ctx);
        }
    }
}

#[test]
fn r12_padding_not_neutral_or_gro_passes() {
    for c in matrix(&IPS, &BOTH) {
        for rx in [Rx::None, Rx::Complete] {
            let b = c.base().with(|s| s.rx = rx);
            let pads: &[&[u8]] = if c.gro() {
                &[&[0; 6], &[1, 2, 3, 4, 5, 6], &[0]]
            } else {
                &[&[1, 2, 3, 4, 5, 6], &[0, 1], &[0xff, 0xfe]]
            };
            // An odd-length datagram too: a CHECKSUM_COMPLETE sum then holds the padding's
            // bytes in the other order, which verification must take away as such.
            for (pad, len) in pads.iter().flat_map(|p| [(p, None), (p, Some(51))]) {
                let mut h = c.h(format!("pad {pad:?} {rx:?}, payload {len:?}"));
                let bad = Verdict::Passed(PassReason::Padding);
                h.expect(&b.data(0), Verdict::Held);
                let d1 = b.data(1).with(|s| s.len = len.unwrap_or(s.len));
                h.expect(&padded(d1, pad), bad);
                h.expect(&padded(b.data(2).pure_ack(5000, 512), pad), bad);
                h.expect(&b.data(2), Verdict::Held);
                h.finish();
                h.assert_shape(&[
                    (fl(FlushReason::Unmergeable), 1),
                    (ps(PassReason::Padding), 1),
                    (ps(PassReason::Padding), 1),
                    (fl(FlushReason::FlushAll), 1),
                ]);
                assert_eq!(h.stats().trimmed, 0);
                h.counts(
                    &[(FlushReason::Unmergeable, 1), (FlushReason::FlushAll, 1)],
                    &[(PassReason::Padding, 2)],
                );
            }
        }
    }
}

// Rule 13: flow isolation whatever the RSS hash.

fn isolation_variants(b: &Seg) -> Vec<(&'static str, Seg)> {
    let mut v = Vec::new();
    let w = |f: fn(&mut Seg)| b.clone().with(f);
    if b.l2 != L2::Raw {
        v.push(("src mac", w(|s| s.src_mac[5] = 9)));
        v.push(("dst mac", w(|s| s.dst_mac[0] = 0x06)));
        v.push(("raw ip", w(|s| s.l2 = L2::Raw)));
    }
    match b.l2 {
        L2::Untagged => {
            v.push(("tagged", w(|s| s.l2 = L2::OneTag)));
            v.push(("stripped", w(|s| s.l2 = L2::Stripped)));
            // A stripped priority tag (VLAN id 0) is a tag all the same (Linux compares
            // `vlan_all`, which says whether a tag was present).
            v.push((
                "stripped tci 0",
                w(|s| (s.l2, s.tci[0]) = (L2::Stripped, 0)),
            ));
        }
        L2::OneTag => {
            v.push(("other tci", w(|s| s.tci[0] = 101)));
            v.push(("same tci stripped", w(|s| s.l2 = L2::Stripped)));
            v.push(("untagged", w(|s| s.l2 = L2::Untagged)));
            v.push(("two tags", w(|s| s.l2 = L2::TwoTags)));
        }
        L2::TwoTags => {
            v.push(("outer tci", w(|s| s.tci[0] = 101)));
            v.push(("inner tci", w(|s| s.tci[1] = 201)));
            // Each tag keeps its place in the key: the same two tags the other way round are
            // another flow.
            v.push(("tags swapped", w(|s| s.tci.swap(0, 1))));
            v.push(("one tag", w(|s| s.l2 = L2::OneTag)));
        }
        L2::Stripped => {
            v.push(("stripped tci", w(|s| s.tci[0] = 101)));
            v.push(("same tci in-line", w(|s| s.l2 = L2::OneTag)));
            v.push(("not stripped", w(|s| s.l2 = L2::Untagged)));
        }
        L2::Raw => {
            v.push((
                "ethernet, zero macs",
                w(|s| (s.l2, s.src_mac, s.dst_mac) = (L2::Untagged, [0; 6], [0; 6])),
            ));
        }
    }
    if b.ip == Ip::V6 {
        v.push(("flow label", w(|s| s.label ^= 1)));
    }
    v
}

#[test]
fn r13_isolation_same_five_tuple() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base().with(|s| s.rss = Some(0xdead_beef));
        for (what, other) in isolation_variants(&b) {
            let mut h = c.h(format!("isolation: {what}"));
            h.expect(&b.data(0), Verdict::Held);
            // Contiguous with the held segment, same ports, same hash: a different flow.
            let x = other.data(1);
            h.expect(&x, Verdict::Held);
            h.expect(&b.data(1), Verdict::Merged);
            h.expect(&other.data(2), Verdict::Merged);
            h.finish();
            let mut shape = h.shape();
            shape.sort_by_key(|s| s.1);
            assert_eq!(shape.len(), 2, "{}", h.ctx);
            assert!(shape.iter().all(|s| s.1 == 2), "{}: {shape:?}", h.ctx);
            for (i, o) in h.rec.out.iter().enumerate() {
                let v = h.view(i);
                let own = if v.seq == b.data(0).seq { &b } else { &other };
                let l3 = own.l3();
                assert_eq!(o.info.l3 as usize, l3, "{}", h.ctx);
                assert_eq!(
                    o.bytes[..l3],
                    own.data(0).build()[..l3],
                    "{}: L2 header",
                    h.ctx
                );
                if c.ip == Ip::V6 {
                    assert_eq!(o.bytes[l3 + 1..l3 + 4], own.data(0).build()[l3 + 1..l3 + 4]);
                }
            }
            h.counts(&[(FlushReason::FlushAll, 2)], &[]);
        }
    }
}

#[test]
fn r13_one_flow_different_rss_hashes_merges() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        let mut h = c.h("hash changes");
        for i in 0..4 {
            let want = if i == 0 {
                Verdict::Held
            } else {
                Verdict::Merged
            };
            h.expect(&b.data(i).with(|s| s.rss = Some(0x1000 * i)), want);
        }
        h.finish();
        h.assert_shape(&[(fl(FlushReason::FlushAll), 4)]);
    }
}

#[test]
fn r13_many_flows_one_rss_hash() {
    for c in matrix(&IPS, &BOTH) {
        let mut h = H::<16, 64>::new(c.cfg(), format!("{c} shared hash"));
        let flows: Vec<Seg> = (0..12u16)
            .map(|k| {
                c.base().with(|s| {
                    s.sport = 40000 + k;
                    s.seq = 1000 + u32::from(k) * 1_000_000;
                    s.id = 100 * k;
                    s.rss = Some(0x1234_5678);
                })
            })
            .collect();
        for round in 0..4 {
            for f in &flows {
                let want = if round == 0 {
                    Verdict::Held
                } else {
                    Verdict::Merged
                };
                h.expect(&f.data(round), want);
            }
        }
        h.finish();
        assert_eq!(h.rec.out.len(), flows.len(), "{}", h.ctx);
        for (i, f) in flows.iter().enumerate() {
            let v = h.view(i);
            assert_eq!(v.sport, f.sport);
            assert_eq!((v.seq, v.payload_len), (f.seq, 4 * MSS as usize));
        }
        h.counts(&[(FlushReason::FlushAll, flows.len() as u64)], &[]);
    }
}

// Rule 14: IPv4 options and fragments; IPv6 extension headers and fragments.

#[test]
fn r14_ipv4_options_and_fragments() {
    for c in matrix(&V4, &BOTH) {
        let b = c.base();
        for (what, make, pass, flush) in [
            (
                "ip options",
                (|s: &mut Seg| s.ip_opts = vec![1, 1, 1, 0]) as fn(&mut Seg),
                PassReason::IpOptions,
                FlushReason::Unmergeable,
            ),
            (
                "router alert",
                |s: &mut Seg| s.ip_opts = vec![0x94, 4, 0, 0],
                PassReason::IpOptions,
                FlushReason::Unmergeable,
            ),
            (
                "more fragments",
                |s: &mut Seg| s.frag = 0x2000,
                PassReason::Fragment,
                FlushReason::Unknown,
            ),
            (
                "fragment offset",
                |s: &mut Seg| (s.frag, s.df) = (0x0010, false),
                PassReason::Fragment,
                FlushReason::Unknown,
            ),
            (
                "reserved flag",
                |s: &mut Seg| s.frag = 0x8000,
                PassReason::Fragment,
                FlushReason::Unknown,
            ),
        ] {
            let mut h = c.h(what);
            h.expect(&b.data(0).with(make), Verdict::Passed(pass));
            h.expect(&b.data(1), Verdict::Held);
            h.expect(&b.data(2).with(make), Verdict::Passed(pass));
            h.finish();
            h.assert_shape(&[(ps(pass), 1), (fl(flush), 1), (ps(pass), 1)]);
            h.counts(&[(flush, 1)], &[(pass, 2)]);
        }
    }
}

const HOPOPTS: u8 = 0;
const ROUTING: u8 = 43;
const FRAGMENT: u8 = 44;
const DSTOPTS: u8 = 60;

fn padn() -> Vec<u8> {
    vec![1, 4, 0, 0, 0, 0]
}

#[test]
fn r14_ipv6_extension_headers() {
    for c in matrix(&V6, &BOTH) {
        // Routing type 253 (experimental), segments left 0: the header's destination is final.
        let routing = vec![253, 0, 0, 0, 0, 0];
        let chains: Vec<Vec<(u8, Vec<u8>)>> = vec![
            vec![(HOPOPTS, padn())],
            vec![(ROUTING, routing.clone())],
            vec![(DSTOPTS, padn())],
            vec![
                (HOPOPTS, padn()),
                (DSTOPTS, [padn(), vec![1, 6, 0, 0, 0, 0, 0, 0]].concat()),
                (ROUTING, routing),
                (DSTOPTS, padn()),
            ],
        ];
        for (chain, rx) in chains
            .iter()
            .flat_map(|ch| [(ch, Rx::None), (ch, Rx::Complete)])
        {
            let b = c.base().with(|s| (s.ext, s.rx) = (chain.clone(), rx));
            let mut h = c.h(format!("ext {chain:?} {rx:?}"));
            h.expect(&b.data(0), Verdict::Held);
            h.expect(&b.data(1), Verdict::Merged);
            h.expect(&b.data(2), Verdict::Merged);
            // Same chain, the last header's last byte different.
            let other = b.data(3).with(|s| {
                let last = &mut s.ext.last_mut().unwrap().1;
                *last.last_mut().unwrap() ^= 1;
            });
            h.expect(&other, Verdict::Held);
            // Without any extension header.
            h.expect(&b.data(4).with(|s| s.ext.clear()), Verdict::Held);
            h.finish();
            h.assert_shape(&[
                (fl(FlushReason::IpFields), 3),
                (fl(FlushReason::IpFields), 1),
                (fl(FlushReason::FlushAll), 1),
            ]);
            h.counts(
                &[(FlushReason::IpFields, 2), (FlushReason::FlushAll, 1)],
                &[],
            );
        }
        // A Fragment header: passed, never merged, the address pair's held segments first.
        let frag = |s: &mut Seg| s.ext = vec![(FRAGMENT, vec![0, 1, 0, 0, 0, 42])];
        let mut h = c.h("ipv6 fragment");
        let pass = Verdict::Passed(PassReason::Fragment);
        let b = c.base();
        h.expect(&b.data(0).with(frag), pass);
        h.expect(&b.data(1), Verdict::Held);
        h.expect(&b.data(2).with(frag), pass);
        h.finish();
        h.assert_shape(&[
            (ps(PassReason::Fragment), 1),
            (fl(FlushReason::Unknown), 1),
            (ps(PassReason::Fragment), 1),
        ]);
        h.counts(&[(FlushReason::Unknown, 1)], &[(PassReason::Fragment, 2)]);
        // A Hop-by-Hop header anywhere but first (RFC 8200 section 4.1 allows it only right
        // after the IPv6 header): not walked, as Linux's `ipv6_gro_pull_exthdrs` does not;
        // what follows is unknown, the frame passes alone.
        let late_hbh = |s: &mut Seg| s.ext = vec![(DSTOPTS, padn()), (HOPOPTS, padn())];
        let mut h = c.h("hop-by-hop after another header");
        let b = c.base();
        h.expect(
            &b.data(0).with(late_hbh),
            Verdict::Passed(PassReason::NotTcp),
        );
        h.expect(
            &b.data(1).with(late_hbh),
            Verdict::Passed(PassReason::NotTcp),
        );
        h.finish();
        h.counts(&[], &[(PassReason::NotTcp, 2)]);
        // A Routing header with segments left: the checksum's pseudo-header holds the route's
        // final destination (RFC 8200 section 8.1), not the header's. Passed as a fragment is,
        // whatever the checksum state says (a NIC's `Complete` sum or `Verified` flag covers
        // the bytes, not the pseudo-header the engine would rewrite the checksum with).
        // The same for a Home Address destination option (Mobile IPv6, RFC 6275 section 6.3:
        // the checksum's source is the home address), after a PadN so that the address is
        // 8-byte aligned, as the RFC places it.
        let home = [vec![1, 2, 0, 0, 0xc9, 16], vec![0x20; 16]].concat();
        for (what, ext, rx) in [Rx::None, Rx::Complete, Rx::Verified]
            .into_iter()
            .flat_map(|rx| {
                [
                    (
                        "routing, segments left 1",
                        (ROUTING, vec![253, 1, 0, 0, 0, 0]),
                        rx,
                    ),
                    ("home address option", (DSTOPTS, home.clone()), rx),
                ]
            })
        {
            let routed = |s: &mut Seg| s.ext = vec![ext.clone()];
            let mut h = c.h(format!("{what}, {rx:?}"));
            let pass = Verdict::Passed(PassReason::Routed);
            let b = c.base().with(|s| s.rx = rx);
            h.expect(&b.data(0).with(routed), pass);
            h.expect(&b.data(1).with(routed), pass);
            h.expect(&b.data(2), Verdict::Held);
            h.expect(&b.data(3).with(routed), pass);
            h.finish();
            h.assert_shape(&[
                (ps(PassReason::Routed), 1),
                (ps(PassReason::Routed), 1),
                (fl(FlushReason::Unknown), 1),
                (ps(PassReason::Routed), 1),
            ]);
            h.counts(&[(FlushReason::Unknown, 1)], &[(PassReason::Routed, 3)]);
        }
    }
}

// Rule 15: checksums.

#[test]
fn r15_bad_checksums_pass_after_the_held_segment() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base();
        // (what, how the frame is damaged, what the NIC reports, the verdict)
        let mut bad: Vec<(&str, Tweak, Rx, PassReason)> = Vec::new();
        for rx in [Rx::None, Rx::Complete] {
            bad.push((
                "bad tcp",
                |s| s.bad_tcp = true,
                rx,
                PassReason::BadTcpChecksum,
            ));
            if c.ip == Ip::V4 {
                bad.push(("bad ip", |s| s.bad_ip = true, rx, PassReason::BadIpChecksum));
            }
        }
        bad.push((
            "complete wrong",
            |_| {},
            Rx::CompleteWrong,
            PassReason::BadTcpChecksum,
        ));
        for (what, damage, rx, reason) in bad {
            for pure in [false, true] {
                let mut h = c.h(format!("{what} {rx:?} pure ack {pure}"));
                let good = |i: u32| {
                    let rx = if rx == Rx::CompleteWrong {
                        Rx::Complete
                    } else {
                        rx
                    };
                    b.data(i).with(|s| s.rx = rx)
                };
                let x = |i: u32| {
                    let d = b.data(i).with(|s| s.rx = rx).with(damage);
                    if pure {
                        d.pure_ack(5100, 512)
                    } else {
                        d
                    }
                };
                let verdict = Verdict::Passed(reason);
                h.expect(&x(0), verdict);
                h.expect(&good(1), Verdict::Held);
                h.expect(&good(2), Verdict::Merged);
                h.expect(&x(3), verdict);
                h.expect(&good(3), Verdict::Held);
                h.finish();
                h.assert_shape(&[
                    (ps(reason), 1),
                    (fl(FlushReason::Unmergeable), 2),
                    (ps(reason), 1),
                    (fl(FlushReason::FlushAll), 1),
                ]);
                h.counts(
                    &[(FlushReason::Unmergeable, 1), (FlushReason::FlushAll, 1)],
                    &[(reason, 2)],
                );
            }
        }
    }
}

/// Under CHECKSUM_COMPLETE, a bad IPv4 header checksum whose error the TCP checksum cancels
/// (the NIC's sum over both is then what it would be for a good frame) still passes as a bad IP
/// checksum (Linux `inet_gro_receive`: `ip_fast_csum`), on the predicted path as on the general
/// one: the whole frame's sum proves nothing about the IP header alone.
#[test]
fn r15_complete_sum_does_not_hide_a_bad_ip_header() {
    for c in matrix(&V4, &BOTH) {
        let b = c.base().with(|s| s.rx = Rx::Complete);
        let mut h = c.h("ip and tcp checksums off by one each, opposite ways");
        h.expect(&b.data(0), Verdict::Held);
        h.expect(&b.data(1), Verdict::Merged);
        let hidden = b.data(2);
        let mut f = hidden.build();
        let l3 = hidden.l3();
        let ip_at = l3 + ipv4::field::CHECKSUM.start;
        let tcp_at = l3 + ipv4::HEADER_LEN + tcp::field::CHECKSUM.start;
        // +1 and -1 (0xfffe) in ones'-complement arithmetic: the frame's sum is unchanged.
        let (ip_c, tcp_c) = (wire::be16(&f, ip_at), wire::be16(&f, tcp_at));
        wire::write_be16(&mut f, ip_at, csum::add(ip_c, 1));
        wire::write_be16(&mut f, tcp_at, csum::add(tcp_c, 0xfffe));
        let m = hidden.meta_for(&f);
        assert_eq!(
            m,
            hidden.meta_for(&hidden.build()),
            "the NIC's sum is the same"
        );
        let v = h.push_frame(f, m);
        assert_eq!(v, Verdict::Passed(PassReason::BadIpChecksum), "{}", h.ctx);
        h.expect(&b.data(2), Verdict::Held);
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::Unmergeable), 2),
            (ps(PassReason::BadIpChecksum), 1),
            (fl(FlushReason::FlushAll), 1),
        ]);
    }
}

#[test]
fn r15_nic_checksum_states() {
    for c in matrix(&IPS, &BOTH) {
        for (what, cfg, rx, ok) in [
            ("verified", c.cfg(), Rx::Verified, true),
            ("complete", c.cfg(), Rx::Complete, true),
            ("software", c.cfg(), Rx::None, true),
            (
                "verified, no software",
                c.cfg().with_verify_checksums(false),
                Rx::Verified,
                true,
            ),
            (
                "complete, no software",
                c.cfg().with_verify_checksums(false),
                Rx::Complete,
                true,
            ),
            (
                "unverified",
                c.cfg().with_verify_checksums(false),
                Rx::None,
                false,
            ),
        ] {
            let b = c.base().with(|s| s.rx = rx);
            let mut h = H::<16, 64>::new(cfg, format!("{c} {what}"));
            if ok {
                h.expect(&b.data(0), Verdict::Held);
                for i in 1..4 {
                    h.expect(&b.data(i), Verdict::Merged);
                }
                h.finish();
                h.assert_shape(&[(fl(FlushReason::FlushAll), 4)]);
                h.counts(&[(FlushReason::FlushAll, 1)], &[]);
            } else {
                let un = Verdict::Passed(PassReason::Unverified);
                for i in 0..3 {
                    h.expect(&b.data(i), un);
                }
                h.finish();
                h.counts(&[], &[(PassReason::Unverified, 3)]);
            }
        }
    }
}

/// The output checksum mode changed while segments are held (`set_config` takes effect for
/// the next frame): under `Partial` with hardware-verified frames the engine keeps no payload
/// sums, so a segment begun then and finalised under `Full` must still carry a right checksum
/// (and the other way round, a `Full` segment finalised under `Partial` the pseudo-header sum).
/// An odd segment size too: the payload read back at delivery has pieces at odd offsets.
/// `finish` checks every emitted checksum against the mode the segment reports.
#[test]
fn r15_output_checksum_mode_changed_mid_segment() {
    for c in matrix(&IPS, &BOTH) {
        for (from, to, size) in [
            (OutChecksum::Partial, OutChecksum::Full, MSS),
            (OutChecksum::Partial, OutChecksum::Full, MSS + 1),
            (OutChecksum::Full, OutChecksum::Partial, MSS),
        ] {
            let b = c.base().with(|s| s.rx = Rx::Verified);
            let data = |i: u32| {
                b.data(i).with(|s| {
                    s.seq = b.seq.wrapping_add(i * size);
                    s.len = size as usize;
                })
            };
            let mut h = H::<16, 64>::new(
                c.cfg().with_checksum_out(from),
                format!("{c} {from:?} -> {to:?}, size {size}"),
            );
            h.expect(&data(0), Verdict::Held);
            h.expect(&data(1), Verdict::Merged);
            let cfg = h.c.config().with_checksum_out(to);
            h.c.set_config(cfg);
            for i in 2..4 {
                h.expect(&data(i), Verdict::Merged);
            }
            h.finish();
            h.assert_shape(&[(fl(FlushReason::FlushAll), 4)]);
        }
    }
}

// Rule 16: the merged IP datagram never exceeds 65535 bytes; the per-segment frame limit.

#[test]
fn r16_size_limit() {
    for c in matrix(&IPS, &BOTH) {
        const BIG: usize = 1000;
        let hdr = if c.ip == Ip::V4 { 40 } else { 60 };
        let fit = 65535 - hdr - 65 * BIG;
        for (extra, fits) in [(fit, true), (fit + 1, false)] {
            let mut h = H::<16, 128>::new(c.cfg(), format!("{c} size limit {extra}"));
            let b = c.base();
            let big = |i: u32| {
                b.data(i).with(|s| {
                    s.seq = b.seq + i * BIG as u32;
                    s.len = BIG;
                })
            };
            h.expect(&big(0), Verdict::Held);
            for i in 1..65 {
                h.expect(&big(i), Verdict::Merged);
            }
            let last = big(65).with(|s| s.len = extra);
            if fits {
                h.expect(&last, Verdict::MergedAndFlushed(FlushReason::ShortSegment));
                h.finish();
                h.assert_shape(&[(fl(FlushReason::ShortSegment), 66)]);
                assert_eq!(h.rec.out[0].info.len - b.l3(), 65535, "{}", h.ctx);
                h.counts(&[(FlushReason::ShortSegment, 1)], &[]);
            } else {
                h.expect(&last, Verdict::Held);
                h.finish();
                h.assert_shape(&[
                    (fl(FlushReason::SizeLimit), 65),
                    (fl(FlushReason::FlushAll), 1),
                ]);
                h.counts(
                    &[(FlushReason::SizeLimit, 1), (FlushReason::FlushAll, 1)],
                    &[],
                );
            }
        }
        // A smaller configured limit: three segments fit exactly, the fourth does not.
        let b = c.base();
        let mut cfg = c.cfg();
        cfg.max_ip_len = (b.data(0).build().len() - b.l3()) as u16 + 2 * MSS as u16;
        let mut h = H::<16, 64>::new(cfg, format!("{c} max_ip_len {}", cfg.max_ip_len));
        for i in 0..5 {
            let want = if i % 3 == 0 {
                Verdict::Held
            } else {
                Verdict::Merged
            };
            h.expect(&b.data(i), want);
        }
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::SizeLimit), 3),
            (fl(FlushReason::FlushAll), 2),
        ]);
        assert_eq!(h.rec.out[0].info.len - b.l3(), usize::from(cfg.max_ip_len));
    }
}

#[test]
fn r16_frame_limit() {
    for c in matrix(&IPS, &BOTH) {
        let mut h = H::<16, 4>::new(c.cfg(), format!("{c} frame limit"));
        let b = c.base();
        for i in 0..10 {
            let want = if i % 4 == 0 {
                Verdict::Held
            } else {
                Verdict::Merged
            };
            h.expect(&b.data(i), want);
        }
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::FrameLimit), 4),
            (fl(FlushReason::FrameLimit), 4),
            (fl(FlushReason::FlushAll), 2),
        ]);
        h.counts(
            &[(FlushReason::FrameLimit, 2), (FlushReason::FlushAll, 1)],
            &[],
        );
    }
}

// Rule 17: the flow table: eviction (least recently active first), idle timeout, max hold.

/// A table of 4 entries holding the first data frame of each of the first 4 of 6 flows.
fn four_of_six_held(c: &Case, what: &str) -> (H<4, 8>, Vec<Seg>) {
    let mut h = H::<4, 8>::new(c.cfg(), format!("{c} {what}"));
    let flows: Vec<Seg> = (0..6u16)
        .map(|k| c.base().with(|s| s.sport = 40000 + k))
        .collect();
    for f in &flows[..4] {
        h.expect(&f.data(0), Verdict::Held);
    }
    (h, flows)
}

/// `Lro`: a pure ACK absorbed into a held segment is activity of that segment: the idle timeout
/// counts from it, not from the segment's last data frame.
#[test]
fn r17_an_absorbed_ack_is_activity() {
    for c in matrix(&IPS, &LRO) {
        let b = c.base();
        let at = |s: Seg, t: u64| s.with(|s| s.time = t);
        let mut h = H::<16, 64>::new(c.cfg().with_idle_timeout(100), format!("{c} ack idle"));
        h.expect(&at(b.data(0), 0), Verdict::Held);
        h.expect(&at(b.data(1).pure_ack(5100, 700), 90), Verdict::Absorbed);
        h.c.flush_idle(150, &mut h.rec);
        assert!(
            h.rec.out.is_empty(),
            "{}: the ACK at 90 was activity",
            h.ctx
        );
        h.c.flush_idle(190, &mut h.rec);
        h.finish();
        h.assert_shape(&[(fl(FlushReason::Idle), 1)]);
        h.counts(&[(FlushReason::Idle, 1)], &[]);
    }
}

#[test]
fn r17_eviction_least_recently_active() {
    for c in matrix(&IPS, &BOTH) {
        let (mut h, flows) = four_of_six_held(&c, "eviction");
        // Flow 0 becomes the most recently active: flow 1 is evicted first, then flow 2.
        h.expect(&flows[0].data(1), Verdict::Merged);
        h.expect(&flows[4].data(0), Verdict::Held);
        h.expect(&flows[5].data(0), Verdict::Held);
        assert_eq!(h.stats().evictions, 2);
        assert_eq!(h.stats().forgotten, 2, "{}", h.ctx);
        h.finish();
        let sports: Vec<u16> = (0..h.rec.out.len()).map(|i| h.view(i).sport).collect();
        assert_eq!(sports[..2], [40001, 40002], "{}", h.ctx);
        assert_eq!(h.shape()[..2], [(fl(FlushReason::Evicted), 1); 2]);
        assert_eq!(h.rec.out.len(), 6);
        h.counts(
            &[(FlushReason::Evicted, 2), (FlushReason::FlushAll, 4)],
            &[],
        );
        assert_eq!(h.stats().evictions, 2);
    }
}

#[test]
fn r17_idle_entries_reused_are_counted_as_forgotten() {
    for c in matrix(&IPS, &BOTH) {
        let (mut h, flows) = four_of_six_held(&c, "forgotten");
        h.c.flush_all(&mut h.rec);
        // Four fresh entries, then idle ones: flows 4 and 5 take those of flows 0 and 1
        // (delivered longest ago), which held nothing, so nothing is evicted.
        assert_eq!(h.stats().forgotten, 0, "{}", h.ctx);
        h.expect(&flows[4].data(0), Verdict::Held);
        h.expect(&flows[5].data(0), Verdict::Held);
        assert_eq!(
            (h.stats().forgotten, h.stats().evictions),
            (2, 0),
            "{}",
            h.ctx
        );
        // Flow 2 kept its entry (and starts where it left off); flow 0 has to take one.
        h.expect(&flows[2].data(1), Verdict::Held);
        assert_eq!(h.stats().forgotten, 2, "{}", h.ctx);
        h.expect(&flows[0].data(1), Verdict::Held);
        assert_eq!(h.stats().forgotten, 3, "{}", h.ctx);
        h.finish();
    }
}

#[test]
fn r17_idle_and_max_hold() {
    for c in matrix(&IPS, &BOTH) {
        let f0 = c.base();
        let f1 = c.base().with(|s| s.sport = 40001);
        let at = |s: Seg, t: u64| s.with(|s| s.time = t);

        let mut h = H::<16, 64>::new(c.cfg().with_idle_timeout(100), format!("{c} idle"));
        h.expect(&at(f0.data(0), 0), Verdict::Held);
        h.expect(&at(f1.data(0), 50), Verdict::Held);
        h.expect(&at(f0.data(1), 60), Verdict::Merged);
        h.c.flush_idle(149, &mut h.rec);
        assert!(h.rec.out.is_empty(), "{}: nothing idle yet", h.ctx);
        h.c.flush_idle(155, &mut h.rec); // f1 idle 105, f0 idle 95
        assert_eq!(h.shape(), [(fl(FlushReason::Idle), 1)], "{}", h.ctx);
        assert_eq!(h.view(0).sport, 40001);
        h.c.flush_idle(160, &mut h.rec);
        h.finish();
        h.assert_shape(&[(fl(FlushReason::Idle), 1), (fl(FlushReason::Idle), 2)]);
        h.counts(&[(FlushReason::Idle, 2)], &[]);

        let mut h = H::<16, 64>::new(c.cfg().with_max_hold(100), format!("{c} max hold"));
        h.expect(&at(f0.data(0), 0), Verdict::Held);
        h.expect(&at(f1.data(0), 10), Verdict::Held);
        h.expect(&at(f0.data(1), 50), Verdict::Merged);
        h.expect(&at(f0.data(2), 100), Verdict::Held); // held 100 since its first frame
        assert_eq!(h.shape(), [(fl(FlushReason::MaxHold), 2)], "{}", h.ctx);
        h.c.flush_idle(109, &mut h.rec);
        assert_eq!(h.rec.out.len(), 1);
        h.c.flush_idle(110, &mut h.rec); // f1: held since 10
        h.c.flush_idle(199, &mut h.rec);
        h.c.flush_idle(200, &mut h.rec); // f0's new segment: since 100
        h.finish();
        h.assert_shape(&[
            (fl(FlushReason::MaxHold), 2),
            (fl(FlushReason::MaxHold), 1),
            (fl(FlushReason::MaxHold), 1),
        ]);
        assert_eq!(h.view(1).sport, 40001);
        assert_eq!(h.view(2).seq, f0.data(2).seq);
        h.counts(&[(FlushReason::MaxHold, 3)], &[]);
    }
}

// Rule 18: resegmenting a Gro segment gives back the original frames byte for byte.

#[test]
fn r18_gro_resegment_is_exact() {
    for c in matrix(&IPS, &GRO) {
        let mut variants: Vec<(&str, TweakNth)> = vec![
            ("incrementing", |_, _| {}),
            ("timestamps", |s, _| s.opts = ts(77, 88)),
            ("ecn ce", |s, _| s.tos = 0x03),
            ("cwr on all", |s, _| s.flags |= 0x80),
        ];
        if c.ip == Ip::V4 {
            variants.push(("fixed id", |s, _| s.id = 4242));
            variants.push(("no df", |s, _| s.df = false));
            variants.push(("fixed id no df", |s, _| (s.id, s.df) = (0, false)));
            variants.push(("id wraps", |s, i| s.id = 0xfffe_u16.wrapping_add(i as u16)));
        }
        for (what, tweak) in variants {
            for (last_len, last_flags) in
                [(MSS as usize, 0), (MSS as usize, PSH), (33, PSH), (33, 0)]
            {
                let b = c.base();
                let frames: Vec<Seg> = (0..5)
                    .map(|i| {
                        b.data(i).with(|s| {
                            tweak(s, i);
                            if i == 4 {
                                s.len = last_len;
                                s.flags |= last_flags;
                            }
                        })
                    })
                    .collect();
                let mut h = c.h(format!("resegment {what} last {last_len} {last_flags:#x}"));
                for f in &frames {
                    h.push(f);
                }
                h.finish();
                assert_eq!(h.rec.out.len(), 1, "{}: {:?}", h.ctx, h.shape());
                let o = &h.rec.out[0];
                assert_eq!(o.info.fixed_id, what.starts_with("fixed"), "{}", h.ctx);
                let originals: Vec<Vec<u8>> = frames.iter().map(Seg::build).collect();
                let meta = frames[0].meta_for(&originals[0]);
                let mut buf = vec![0u8; 2048];
                let mut got = Vec::new();
                let n = resegment(
                    &o.bytes,
                    &meta,
                    o.info.gso_size,
                    o.info.fixed_id,
                    &mut buf,
                    |f| got.push(f.to_vec()),
                )
                .unwrap_or_else(|e| panic!("{}: {e}", h.ctx));
                assert_eq!(n, originals.len(), "{}", h.ctx);
                for (i, (g, want)) in got.iter().zip(&originals).enumerate() {
                    assert!(g == want, "{}: frame {i} differs after resegment", h.ctx);
                }
            }
        }
    }
}

// Rule 19: sequence (and ACK) numbers wrapping past 2^32.

#[test]
fn r19_sequence_wrap() {
    for c in matrix(&IPS, &BOTH) {
        let b = c.base().with(|s| {
            s.seq = u32::MAX - 150;
            s.ack = u32::MAX - 5;
        });
        let mut h = c.h("wrap");
        h.expect(&b.data(0), Verdict::Held);
        for i in 1..4 {
            let d = b.data(i);
            let d = if c.gro() {
                d
            } else {
                d.with(|s| s.ack = s.ack.wrapping_add(i * 4))
            };
            h.expect(&d, Verdict::Merged);
        }
        h.expect(&b.data(5), Verdict::Held);
        h.finish();
        h.assert_shape(&[(fl(FlushReason::SeqGap), 4), (fl(FlushReason::FlushAll), 1)]);
        let v = h.view(0);
        assert_eq!((v.seq, v.payload_len), (b.seq, 4 * MSS as usize));
        let want_ack = if c.gro() {
            b.ack
        } else {
            b.ack.wrapping_add(12)
        };
        assert_eq!(v.ack, want_ack, "{}", h.ctx);
        h.counts(&[(FlushReason::SeqGap, 1), (FlushReason::FlushAll, 1)], &[]);
    }
}

// Rule 20: truncated and mislabelled frames never panic and come back exactly once.

#[test]
fn r20_truncated_frames() {
    for c in matrix(&IPS, &BOTH) {
        for opts in [Vec::new(), ts(1, 2)] {
            let b = c.base().with(|s| s.opts = opts.clone());
            let full = b.data(1).build();
            let meta = b.data(1).meta_for(&full);
            let wrong = if b.l2 == L2::Raw {
                RxMeta::ethernet(0)
            } else {
                RxMeta::raw_ip(0)
            };
            for cut in 0..full.len() {
                for m in [meta, wrong] {
                    let mut h = c.h(format!("cut {cut} {:?}", m.link));
                    h.expect(&b.data(0), Verdict::Held);
                    let v = h.push_frame(full[..cut].to_vec(), m);
                    assert!(matches!(v, Verdict::Passed(_)), "{}: {v:?}", h.ctx);
                    h.finish();
                    assert_eq!(h.rec.out.len(), 2, "{}", h.ctx);
                }
            }
        }
    }
}

// The checker itself: a corrupted output must be caught.

#[test]
fn checker_catches_corrupted_outputs() {
    for c in matrix(&IPS, &GRO) {
        let mut h = c.h("checker");
        let b = c.base();
        h.push(&b.data(0));
        h.push(&b.data(1));
        h.finish();
        let good = &h.rec.out[0];
        let l3 = b.l3();
        let l4 = good.info.l4 as usize;
        let mut corruptions = vec![
            ("payload byte", good.bytes.len() - 1),
            ("tcp checksum", l4 + 16),
            ("ip length", l3 + if c.ip == Ip::V4 { 3 } else { 5 }),
        ];
        if c.ip == Ip::V4 {
            corruptions.push(("ip checksum", l3 + 10));
        }
        for (what, at) in corruptions {
            let mut bytes = good.bytes.clone();
            bytes[at] ^= 0x10;
            let bad = Out {
                bytes,
                info: good.info,
            };
            let caught = std::panic::catch_unwind(|| check(&bad, true, what)).is_err();
            assert!(caught, "{}: {what} not caught", h.ctx);
        }
    }
}
