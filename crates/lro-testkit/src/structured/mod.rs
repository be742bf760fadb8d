//! Structured fuzz input for the coalescing targets: an engine setup and a sequence of
//! operations (frames with metadata, flushes, clock steps), turned into concrete frames.
//!
//! Frames come two ways: raw bytes from the fuzzer (optionally with their checksums repaired so
//! that they can be merged at all), and `lro_core::testing::FrameSpec` frames of a few flow
//! templates whose sequence numbers, ACKs and timestamps follow on from the previous frame of
//! the flow, so that most of them are mergeable and the merge rules are reached.

pub mod gre;

use crate::built::{twin_byte, twin_mac_byte};
pub use crate::built::{Built, Pushed, Step};
use crate::check;
use crate::check::Run;
use crate::frame::{Out, Tagged};
use crate::oracle::Identity;
use crate::oracle::{self, Tcp};
use arbitrary::Arbitrary;
use lro_core::rss::RssSorted;
use lro_core::testing::{
    Corrupt, EthernetSpec, FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, LinkSpec, VlanTag, TCP_ACK,
    TCP_PSH,
};
use lro_core::{Coalescer, Engine, Sizes};
use lro_core::{Config, OutChecksum, Policy, RssHash, RssType, RxChecksum, RxMeta};
use std::collections::HashMap;

/// Engine-wide choices.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct Setup {
    /// `Gro` (true) or `Lro`.
    pub gro: bool,
    /// Flow table shape: 0 1x1, 1 4x8, 2 8x64, 3 64x64.
    pub table: u8,
    /// Software verification of unverified frames.
    pub verify: bool,
    /// Partial output checksums.
    pub partial: bool,
    /// Largest IP datagram: 0 65535, 1 1500, 2 9000, 3 a value from `max_ip_raw`.
    pub max_ip: u8,
    /// Used when `max_ip == 3`.
    pub max_ip_raw: u16,
    /// Idle timeout.
    pub idle: Option<u8>,
    /// Maximum hold.
    pub hold: Option<u8>,
    /// Flow templates.
    pub flows: [FlowTemplate; 4],
}

impl Setup {
    /// The engine configuration.
    pub fn config(&self) -> Config {
        let mut c = if self.gro {
            Config::gro()
        } else {
            Config::lro()
        };
        c = c.with_verify_checksums(self.verify);
        if self.partial {
            c = c.with_checksum_out(OutChecksum::Partial);
        }
        c.max_ip_len = match self.max_ip % 4 {
            0 => 65535,
            1 => 1500,
            2 => 9000,
            // Below 40 the engine can still hold single frames; keep it sane but small.
            _ => self.max_ip_raw.max(40),
        };
        if let Some(t) = self.idle {
            c = c.with_idle_timeout(u64::from(t));
        }
        if let Some(t) = self.hold {
            c = c.with_max_hold(u64::from(t));
        }
        c
    }
}

/// The shape of one structured flow.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct FlowTemplate {
    /// IPv6.
    pub v6: bool,
    /// 0 Ethernet, 1 one 802.1Q tag, 2 QinQ, 3 raw IP, 4 NIC-stripped tag.
    pub link: u8,
    /// IPv6 extension headers (bit 0 Hop-by-Hop, bit 1 Destination options), flow label (bit 2).
    pub ext: u8,
    /// Aligned timestamps on every frame.
    pub ts: bool,
    /// MSS: 0 100, 1 536, 2 1448, 3 9000 (jumbo), else 1 byte.
    pub mss: u8,
    /// Fixed IPv4 ID (else incrementing).
    pub fixed_id: bool,
    /// Near twin of the previous flow: 0 none, 1 other source port, 2 other VLAN/stripped tag,
    /// 3 other source MAC, 4 the raw-IP twin of a zero-MAC Ethernet flow, 5 other flow label,
    /// 6 same everything (a copy: the same flow).
    pub twin: u8,
    /// Initial sequence number (near 2^32 half the time).
    pub isn: u32,
}

/// How the checksum metadata of a frame is chosen.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum CsumMode {
    /// `RxChecksum::None`.
    None,
    /// `RxChecksum::Verified` (used only when the frame's checksums really are right; else
    /// `None`: a NIC that lies is out of scope).
    Verified,
    /// `RxChecksum::Complete` with the true sum.
    Complete,
    /// `RxChecksum::Complete` with a sum off by this (never ones'-complement zero) amount.
    CompleteOff(u16),
}

/// A raw frame from fuzz bytes.
#[derive(Debug, Clone, Arbitrary)]
pub struct RawFrame {
    /// Bytes.
    pub bytes: Vec<u8>,
    /// Raw IP (else Ethernet).
    pub raw_ip: bool,
    /// Repair the checksums when the reference reads it as TCP.
    pub fix: bool,
    /// Checksum metadata.
    pub csum: CsumMode,
    /// NIC-stripped VLAN.
    pub vlan: Option<u16>,
    /// NIC RSS hash.
    pub rss: Option<u32>,
}

/// A structured frame of a flow template.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub struct SpecFrame {
    /// Template index (mod 4).
    pub flow: u8,
    /// Payload (mod 8): 0..=2 the MSS, 3 short (`len % mss`), 4..=5 empty (pure ACK), 6
    /// `len % 2048` bytes, 7 `len` bytes (past 65535 the IP length field wraps: malformed).
    pub size: u8,
    /// Length parameter.
    pub len: u16,
    /// Sequence number: 0..=3 contiguous, 4 a gap of `delta`, 5 a retransmit of `delta` back,
    /// 6 exactly `delta`.
    pub seq_mode: u8,
    /// Delta parameter.
    pub delta: u32,
    /// ACK: 0..=2 unchanged, 3 advance by `ack_step`, 4 back by `ack_step`.
    pub ack_mode: u8,
    /// ACK step.
    pub ack_step: u16,
    /// Window change (replaces the flow's window).
    pub window: Option<u16>,
    /// Flags: 0..=5 ACK, 6 ACK|PSH, 7 `raw_flags`.
    pub flag_mode: u8,
    /// Raw flag byte.
    pub raw_flags: u8,
    /// Options: 0..=3 the flow's, 4 SACK, 5 timestamps going back, 6 garbage (`raw_flags`
    /// repeated), 7 none.
    pub opt_mode: u8,
    /// IP oddities: 0..=4 none, 5 other TTL, 6 CE mark, 7 IPv4 options / IPv6 other
    /// extension, 8 IPv4 fragment, 9 other IP ID.
    pub ip_mode: u8,
    /// Checksum corruption: 0..=5 none, 6 TCP, 7 IP.
    pub corrupt: u8,
    /// Padding: 0..=3 none, 4 `pad` zero bytes, 5 `pad` bytes of 0x55 (non-neutral unless
    /// the sum cancels), 6 0xff 0xff (-0).
    pub pad_mode: u8,
    /// Padding length.
    pub pad: u8,
    /// Truncate to this many bytes.
    pub truncate: Option<u16>,
    /// Checksum metadata.
    pub csum: CsumMode,
    /// NIC RSS hash: 0..=1 the flow's, 2 none, 3 `rss`.
    pub rss_mode: u8,
    /// RSS value.
    pub rss: u32,
}

/// One operation.
#[derive(Debug, Clone, Arbitrary)]
pub enum Op {
    /// A structured frame.
    Spec(SpecFrame),
    /// A raw frame.
    Raw(RawFrame),
    /// `flush_all`.
    FlushAll,
    /// `flush_idle(now + x)` (the clock moves to it).
    FlushIdle(u8),
    /// The clock moves.
    Tick(u8),
}

/// A whole input.
#[derive(Debug, Clone, Arbitrary)]
pub struct Input {
    /// Engine choices.
    pub setup: Setup,
    /// Operations (at most 256 are run).
    pub ops: Vec<Op>,
}

struct FlowState {
    spec: FrameSpec<'static>,
    meta: RxMeta,
    mss: usize,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<u32>,
    ip_id: u16,
    fixed_id: bool,
    rss: u32,
}

fn flow_states(setup: &Setup) -> Vec<FlowState> {
    let mut out: Vec<FlowState> = Vec::with_capacity(4);
    for (i, t) in setup.flows.iter().enumerate() {
        let twin = if i > 0 { t.twin % 8 } else { 0 };
        let (mut spec, mut meta) = if twin != 0 && twin <= 6 {
            let prev = &out[i - 1];
            (prev.spec, prev.meta)
        } else {
            let port = 40000 + i as u16;
            let spec = if t.v6 {
                FrameSpec::ipv6_tcp(port, 443)
            } else {
                FrameSpec::ipv4_tcp(port, 443)
            };
            let (mut spec, meta) = crate::built::link_shape(spec, t.link, 10 + i as u16);
            let flow_label = if t.ext & 4 != 0 { 0xabcde } else { 0 };
            crate::built::ipv6_shape(&mut spec, t.ext & 1 != 0, t.ext & 2 != 0, flow_label);
            (spec, meta)
        };
        match twin {
            1 => spec.tcp.src_port ^= 0x100,
            2 => match &mut spec.link {
                LinkSpec::Ethernet(eth) if eth.vlans[0].is_some() => {
                    eth.vlans[0] = eth.vlans[0].map(|v| VlanTag {
                        tpid: v.tpid,
                        tci: v.tci ^ 0x7,
                    });
                }
                _ => meta.vlan_stripped = Some(meta.vlan_stripped.unwrap_or(0) ^ 0x5),
            },
            // An address differs in one bit (`twin_byte`).
            3 => match &mut spec.link {
                LinkSpec::Ethernet(eth) => eth.src[twin_mac_byte(i)] ^= 0x80,
                // Linux GRO compares the whole hard header: IPoIB's reserved field too.
                LinkSpec::Ipoib { reserved } => *reserved ^= 0x0101,
                LinkSpec::RawIp => spec.tcp.dst_port ^= 0x10,
            },
            4 => {
                // The previous flow turns into Ethernet with zero MACs and no tags; this one
                // is its raw-IP twin.
                let prev = &mut out[i - 1];
                prev.spec.link = LinkSpec::Ethernet(EthernetSpec {
                    dst: [0; 6],
                    src: [0; 6],
                    vlans: [None, None],
                });
                prev.meta = RxMeta::ethernet(0);
                spec = prev.spec.raw_ip();
                meta = RxMeta::raw_ip(0);
            }
            5 => match &mut spec.ip {
                IpSpec::V6(ip) => ip.flow_label ^= 0x11,
                IpSpec::V4(ip) => ip.dst[twin_byte(i, 4)] ^= 0x40,
            },
            _ => {}
        }
        let mss = match t.mss % 5 {
            0 => 100,
            1 => 536,
            2 => 1448,
            3 => 9000,
            _ => 1,
        };
        let isn = if t.isn & 1 == 0 {
            0u32.wrapping_sub(t.isn >> 20)
        } else {
            t.isn
        };
        out.push(FlowState {
            spec,
            meta,
            mss,
            seq: isn,
            ack: t.isn.rotate_left(11),
            window: 30000,
            ts: t.ts.then_some(t.isn.rotate_left(5)),
            ip_id: (t.isn >> 7) as u16,
            fixed_id: t.fixed_id,
            rss: t.isn.rotate_left(17) ^ i as u32,
        });
    }
    out
}

/// Payload bytes: a window of a fixed pseudo-random pattern, so consecutive frames differ.
fn payload_bytes(salt: usize, len: usize) -> Vec<u8> {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let pattern = PATTERN.get_or_init(|| {
        (0..65536 + 4096)
            .map(|k: usize| (k.wrapping_mul(131) ^ (k >> 8) ^ (k >> 3)) as u8)
            .collect()
    });
    let at = salt % 4096;
    pattern[at..at + len.min(65536)].to_vec()
}

/// Applies the checksum metadata mode and returns whether the frame is trusted.
fn finish_meta(
    bytes: &[u8],
    meta: &mut RxMeta,
    mode: CsumMode,
    tcp: Option<&Tcp>,
    config: &Config,
) -> bool {
    let good = oracle::checksums_ok(bytes, tcp);
    let complete = lro_core::testing::complete_checksum(bytes, meta.link);
    meta.checksum = match mode {
        CsumMode::Verified if good => RxChecksum::Verified,
        CsumMode::None | CsumMode::Verified => RxChecksum::None,
        CsumMode::Complete => RxChecksum::Complete(complete),
        CsumMode::CompleteOff(d) => {
            let d = if oracle::is_zero(d) { 0x1234 } else { d };
            RxChecksum::Complete(oracle::add(complete, d))
        }
    };
    good && match meta.checksum {
        RxChecksum::None => config.verify_checksums,
        RxChecksum::Complete(c) => c == complete,
        _ => true,
    }
}

/// Turns an input into frames and steps.
pub fn build(input: &Input, config: &Config) -> Built {
    let mut flows = flow_states(&input.setup);
    let mut built = Built::default();
    let mut now: u64 = 0;
    for op in input.ops.iter().take(256) {
        let n = built.frames.len();
        match op {
            Op::FlushAll => built.steps.push(Step::FlushAll),
            Op::FlushIdle(d) => {
                now += u64::from(*d);
                built.steps.push(Step::FlushIdle(now));
            }
            Op::Tick(d) => now += u64::from(*d),
            Op::Raw(r) => {
                let mut bytes = r.bytes.clone();
                let mut meta = if r.raw_ip {
                    RxMeta::raw_ip(now)
                } else {
                    RxMeta::ethernet(now)
                };
                meta.vlan_stripped = r.vlan;
                meta.rss = r.rss.map(|value| RssHash {
                    value,
                    kind: RssType::TcpIpv4,
                });
                let tcp = oracle::tcp_of(&bytes, &meta);
                if let (Some(t), true) = (&tcp, r.fix) {
                    oracle::fix_checksums(&mut bytes, t);
                }
                let trusted = finish_meta(&bytes, &mut meta, r.csum, tcp.as_ref(), config);
                built.frames.push(Pushed {
                    bytes,
                    meta,
                    tcp,
                    trusted,
                });
                built.steps.push(Step::Push(n));
            }
            Op::Spec(s) => {
                let f = &mut flows[usize::from(s.flow % 4)];
                let (bytes, mut meta) = spec_frame(f, s, n, now);
                let tcp = oracle::tcp_of(&bytes, &meta);
                let trusted = finish_meta(&bytes, &mut meta, s.csum, tcp.as_ref(), config);
                built.frames.push(Pushed {
                    bytes,
                    meta,
                    tcp,
                    trusted,
                });
                built.steps.push(Step::Push(n));
            }
        }
    }
    built
}

fn spec_frame(f: &mut FlowState, s: &SpecFrame, n: usize, now: u64) -> (Vec<u8>, RxMeta) {
    let len = usize::from(s.len);
    let plen = match s.size % 8 {
        0..=2 => f.mss,
        3 => len % f.mss,
        4 | 5 => 0,
        6 => len % 2048,
        _ => len,
    };
    let payload = payload_bytes(n ^ f.seq as usize, plen);
    let pad_bytes: Vec<u8> = match s.pad_mode % 7 {
        4 => vec![0; usize::from(s.pad % 64)],
        5 => vec![0x55; usize::from(s.pad % 64)],
        6 => vec![0xff, 0xff],
        _ => Vec::new(),
    };
    let mut spec = f.spec;
    let seq = match s.seq_mode % 7 {
        4 => f.seq.wrapping_add(s.delta),
        5 => f.seq.wrapping_sub(s.delta),
        6 => s.delta,
        _ => f.seq,
    };
    match s.ack_mode % 5 {
        3 => f.ack = f.ack.wrapping_add(u32::from(s.ack_step)),
        4 => f.ack = f.ack.wrapping_sub(u32::from(s.ack_step)),
        _ => {}
    }
    if let Some(w) = s.window {
        f.window = w;
    }
    spec.tcp.seq = seq;
    spec.tcp.ack = f.ack;
    spec.tcp.window = f.window;
    spec.tcp.flags = match s.flag_mode % 8 {
        6 => TCP_ACK | TCP_PSH,
        7 => s.raw_flags,
        _ => TCP_ACK,
    };
    if let Some(ts) = &mut f.ts {
        if s.opt_mode % 8 != 5 {
            *ts = ts.wrapping_add(u32::from(s.ack_step & 3));
        }
    }
    match s.opt_mode % 8 {
        4 => {
            if let Some(ts) = f.ts {
                spec.tcp.push_timestamps(ts, 7);
            }
            spec.tcp
                .push_sack(&[(f.ack.wrapping_add(100), f.ack.wrapping_add(200))]);
        }
        5 => {
            if let Some(ts) = f.ts {
                spec.tcp
                    .push_timestamps(ts.wrapping_sub(1 + u32::from(s.ack_step)), 7);
            }
        }
        6 => {
            let k = usize::from(s.raw_flags % 40);
            spec.tcp.options.extend(&vec![s.raw_flags; k]);
        }
        7 => {}
        _ => {
            if let Some(ts) = f.ts {
                spec.tcp.push_timestamps(ts, 7);
            }
        }
    }
    match &mut spec.ip {
        IpSpec::V4(ip) => {
            ip.id = f.ip_id;
            match s.ip_mode % 10 {
                5 => ip.ttl = ip.ttl.wrapping_sub(1),
                6 => ip.tos |= 3,
                7 => ip.options.extend(&[1, 1, 1, 0]),
                8 => ip.mf = true,
                9 => ip.id = ip.id.wrapping_add(s.ack_step | 1),
                _ => {}
            }
        }
        IpSpec::V6(ip) => match s.ip_mode % 10 {
            5 => ip.hop_limit = ip.hop_limit.wrapping_sub(1),
            6 => ip.traffic_class |= 3,
            7 => {
                // A Routing header with different contents than the held frames'.
                if let Some(slot) = ip.ext.iter_mut().find(|e| e.is_none()) {
                    *slot = Some(Ipv6Ext::new(
                        Ipv6ExtKind::Routing,
                        &[0, 0, 0, 0, 0, s.raw_flags],
                    ));
                }
            }
            8 => {
                ip.fragment = Some(lro_core::testing::Ipv6Fragment {
                    offset: 0,
                    more: true,
                    ident: 9,
                })
            }
            _ => {}
        },
    }
    spec.corrupt = match s.corrupt % 8 {
        6 => Corrupt::TcpChecksum,
        7 => Corrupt::IpChecksum,
        _ => Corrupt::None,
    };
    spec.payload = &payload;
    spec.padding = &pad_bytes;
    let mut bytes = crate::frame::bytes_of(&spec);
    if let Some(t) = s.truncate {
        bytes.truncate(usize::from(t));
    }
    if s.seq_mode % 7 < 4 {
        f.seq = f.seq.wrapping_add(plen as u32);
    }
    if !f.fixed_id {
        f.ip_id = f.ip_id.wrapping_add(1);
    }
    let mut meta = f.meta;
    meta.time = now;
    meta.rss = match s.rss_mode % 4 {
        0 | 1 => Some(RssHash {
            value: f.rss,
            kind: RssType::TcpIpv4,
        }),
        2 => None,
        _ => Some(RssHash {
            value: s.rss,
            kind: RssType::TcpIpv4,
        }),
    };
    (bytes, meta)
}

/// Every check of a run's record: [`check::check`] and [`check_headers`].
pub fn check_all(
    built: &Built,
    config: &Config,
    frames_max: usize,
    run: &Run,
    order: check::Order<'_>,
) {
    check::check(built, config, frames_max, run, order);
    check_headers(built, config, run, &|id| order.keeps(id));
}

/// The TCP and (inner) IP headers of every rewritten segment, byte for byte: the head's but
/// for the IP length and checksum, the TCP flags (PSH/FIN ORed in, judged by
/// [`check::check`]) and the TCP checksum, and under `Lro` the ACK number, window and
/// timestamp values, which are the newest (DESIGN.md: "newest values win"): those of the
/// frame pushed last among the segment's frames and the pure ACKs it absorbed (released while
/// it was held: a released frame belongs to the next segment of its flow, as
/// [`check::check`] establishes). [`check::check`] only bounds the ACK from below and never
/// reads the window, TSecr, urgent pointer or reserved bits of an `Lro` segment, so an ACK
/// for data never acknowledged, a stale window or a wrong timestamp echo would pass it.
/// Flows whose order is not promised (`ordered`) are skipped. Panics with a description.
pub fn check_headers(
    built: &Built,
    config: &Config,
    run: &Run,
    ordered: &dyn Fn(&Identity) -> bool,
) {
    let inputs = &built.frames;
    let out = &run.rec.out;
    let lro = config.policy == Policy::Lro;
    let mut rank = vec![usize::MAX; inputs.len()];
    for (r, step) in built.steps.iter().enumerate() {
        if let Step::Push(id) = step {
            rank[*id] = r;
        }
    }
    let flow_of = |i: usize| inputs[i].tcp.as_ref().map(|t| t.id);
    // Released frames by the position of the segment that absorbed them.
    let mut absorbed: HashMap<usize, Vec<usize>> = HashMap::new();
    for (pos, o) in out.iter().enumerate() {
        let Out::Rel(i) = o else { continue };
        let Some(id) = flow_of(*i).filter(|id| ordered(id)) else {
            continue;
        };
        let by = out[pos + 1..]
            .iter()
            .position(|o| matches!(o, Out::Seg { ids, .. } if flow_of(ids[0]) == Some(id)));
        if let Some(p) = by {
            absorbed.entry(pos + 1 + p).or_default().push(*i);
        }
    }
    for (pos, o) in out.iter().enumerate() {
        let Out::Seg {
            ids, bytes, info, ..
        } = o
        else {
            continue;
        };
        if info.checksum == OutChecksum::AsReceived {
            continue;
        }
        let head = &inputs[ids[0]];
        let Some(h) = head.tcp.as_ref().filter(|h| ordered(&h.id)) else {
            continue;
        };
        let o = oracle::tcp_of_gre(bytes, &head.meta)
            .unwrap_or_else(|| panic!("segment {ids:?}: output does not parse"));
        assert_eq!(
            (o.l3, o.l4, o.payload),
            (h.l3, h.l4, h.payload),
            "segment {ids:?}: offsets"
        );
        // The inner IP header: lengths and the IPv4 header checksum apart.
        let mask: &[usize] = if h.v6 { &[4, 5] } else { &[2, 3, 10, 11] };
        let ip = |b: &[u8]| {
            let mut v = b[h.l3..h.l4].to_vec();
            mask.iter().for_each(|&k| v[k] = 0);
            v
        };
        assert_eq!(
            ip(bytes),
            ip(&head.bytes),
            "segment {ids:?}: IP header changed beyond its length and checksum"
        );
        // The TCP header.
        let got = &bytes[o.l4..o.payload];
        let mut want = head.bytes[h.l4..h.payload].to_vec();
        want[13] = got[13];
        want[16..18].copy_from_slice(&got[16..18]);
        if lro {
            let newest = ids
                .iter()
                .chain(absorbed.get(&pos).into_iter().flatten())
                .copied()
                .max_by_key(|&i| rank[i])
                .expect("non-empty");
            let f = &inputs[newest];
            let n = f.tcp.as_ref().expect("a TCP frame");
            let nb = &f.bytes[n.l4..n.payload];
            want[8..12].copy_from_slice(&nb[8..12]);
            want[14..16].copy_from_slice(&nb[14..16]);
            if h.tsval(&head.bytes).is_some() && n.tsval(&f.bytes).is_some() {
                want[24..32].copy_from_slice(&nb[24..32]);
            }
            assert_eq!(
                got,
                &want[..],
                "Lro segment {ids:?} (absorbed {:?}): TCP header is not the head's with the \
                 newest ACK, window and timestamps (frame {newest}'s)",
                absorbed.get(&pos)
            );
        } else {
            assert_eq!(
                got,
                &want[..],
                "Gro segment {ids:?}: TCP header is not the head's"
            );
        }
    }
}

fn run_plain<const N: usize, const S: usize>(built: &Built, config: Config) {
    let on = run_engine::<N, S>(built, config);
    check_all(built, &config, S, &on.0, check::Order::Arrival);
    // Header prediction decides as the general path: the same input through an engine with it
    // off, and the same input with every frame whose checksums are right marked
    // hardware-verified (the case prediction covers) through both, give the same output and
    // counters (its own counter apart). The verified run is judged by the checks too: the
    // comparison alone would pass a mistake both paths share.
    let off = run_engine::<N, S>(built, config.with_header_prediction(false));
    same_output(&on, &off);
    let verified = built.all_verified();
    let on = run_engine::<N, S>(&verified, config);
    check_all(&verified, &config, S, &on.0, check::Order::Arrival);
    let off = run_engine::<N, S>(&verified, config.with_header_prediction(false));
    same_output(&on, &off);
    // Adaptive bypass changes what merges, so its output is not compared; it must keep every
    // invariant.
    let bypass = config.with_adaptive_bypass(true);
    let on = run_engine::<N, S>(built, bypass);
    check_all(built, &bypass, S, &on.0, check::Order::Arrival);
}

/// One run: the output and the counters.
fn run_engine<const N: usize, const S: usize>(
    built: &Built,
    config: Config,
) -> (Run, lro_core::Stats) {
    let mut engine: Box<Engine<Tagged, Sizes<N, S>>> = Box::new(Engine::new(config));
    let rec = check::run(&mut *engine, built, true);
    let stats = engine.stats().clone();
    (rec, stats)
}

fn same_output(on: &(Run, lro_core::Stats), off: &(Run, lro_core::Stats)) {
    check::same_with_prediction(&on.0, &on.1, &off.0, &off.1);
}

/// The `coalesce` target: one structured input through a plain `Engine`.
pub fn coalesce(input: &Input) {
    let config = input.setup.config();
    let built = build(input, &config);
    match input.setup.table % 4 {
        0 => run_plain::<1, 1>(&built, config),
        1 => run_plain::<4, 8>(&built, config),
        2 => run_plain::<8, 64>(&built, config),
        _ => run_plain::<64, 64>(&built, config),
    }
}

fn run_sorted<const N: usize, const S: usize, const B: usize>(built: &Built, config: Config) {
    // Order is promised per flow only when every frame of the flow carried the same hash.
    let mut hashes: HashMap<Identity, Option<lro_core::RssHash>> = HashMap::new();
    let mut mixed: HashMap<Identity, bool> = HashMap::new();
    for f in &built.frames {
        if let Some(t) = &f.tcp {
            let h = *hashes.entry(t.id).or_insert(f.meta.rss);
            if h != f.meta.rss {
                mixed.insert(t.id, true);
            }
        }
    }
    let inner: Engine<Tagged, Sizes<N, S>> = Engine::new(config);
    let mut engine: Box<RssSorted<_, Tagged, B>> = Box::new(RssSorted::new(inner));
    let rec = check::run(&mut *engine, built, false);
    assert_eq!(engine.queued(), 0, "frames still queued after flush_all");
    assert_eq!(
        engine.stats().frames_in as usize,
        built.frames.len(),
        "inner frames_in"
    );
    let ordered = |id: &Identity| !mixed.contains_key(id);
    check_all(built, &config, S, &rec, check::Order::Flows(&ordered));
}

/// The `rss_sorted` target: the same input through `RssSorted` around a small table.
pub fn rss_sorted(input: &Input) {
    let config = input.setup.config();
    let built = build(input, &config);
    match input.setup.table % 4 {
        0 => run_sorted::<1, 4, 1>(&built, config),
        1 => run_sorted::<2, 8, 7>(&built, config),
        2 => run_sorted::<4, 16, 32>(&built, config),
        _ => run_sorted::<8, 64, 256>(&built, config),
    }
}
