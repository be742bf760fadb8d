//! Shared test harness: a scenario generator (many interleaved TCP flows with the nasty cases
//! of real traffic), a recording sink, and an independent checker of DESIGN.md's invariants.
//!
//! Ground truth comes from the generator (which flow a frame belongs to, what its payload is,
//! whether its checksum was corrupted...), never from the engine's own parser, and frames are
//! built with `lro_core::testing` (its own reference checksum) and parsed back with etherparse.

#![allow(dead_code, unreachable_pub)]

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::testing::{
    self, Corrupt, EthernetSpec, FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, Ipv6Fragment, LinkSpec,
    VlanTag, TCP_ACK, TCP_CWR, TCP_ECE, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, TCP_URG,
};
use lro_core::{
    Cause, Coalescer, Config, Engine, OutChecksum, Policy, RssHash, RssType, RxChecksum, RxMeta,
    Segment, SegmentInfo, Sink, Sizes, Stats, Verdict,
};
use std::collections::HashMap;

/// A frame buffer that carries an identity the engine cannot forge: the type is not `Clone`,
/// so every frame that comes back is one we pushed, and we count that each comes back once.
#[derive(Debug)]
pub struct TFrame {
    /// Index into the scenario's inputs.
    pub id: u32,
    /// The bytes.
    pub buf: Vec<u8>,
}

impl AsRef<[u8]> for TFrame {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl AsMut<[u8]> for TFrame {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

/// One step of a scenario as proptest generates it; the interpreter gives it meaning.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Flow index (modulo the number of flows).
    pub flow: u8,
    /// What kind of frame (see `Scenario::build`).
    pub kind: u8,
    /// A free parameter (lengths, deltas).
    pub a: u16,
    /// Modifiers: corruption, padding, truncation, checksum metadata.
    pub m: u8,
    /// Time advance and flush operations.
    pub t: u8,
}

/// Scenario-wide knobs.
#[derive(Debug, Clone, Copy)]
pub struct Knobs {
    /// `Gro` or `Lro`.
    pub gro: bool,
    /// Output checksum mode: true = Partial.
    pub partial: bool,
    /// Software verification of `RxChecksum::None` frames.
    pub verify: bool,
    /// 0: 65535, 1: 4000, 2: 20000.
    pub max_ip: u8,
    /// 0: no RSS hash, 1: a hash per flow, 2: every flow the same hash, 3: random per frame.
    pub hash_mode: u8,
    /// Idle timeout / max hold set.
    pub timers: bool,
    /// Flow table shape: false 64x64, true 4x8 (evictions, frame limits).
    pub small: bool,
    /// Allow the "raw IP twin of a zero-MAC Ethernet flow" identity variant.
    pub raw_twin: bool,
    /// Allow truncated frames.
    pub truncate: bool,
    /// How duplicate ACKs are judged. 0: not at all (other properties cover them).
    /// 1: a duplicate of an ACK whose frame the engine still holds for the flow (what it can
    /// know without per-flow memory after a flush). 2: the definition, against the
    /// flow's previous ACK whatever the engine holds.
    pub dup_mode: u8,
    /// Every frame without a corrupted checksum arrives hardware-verified
    /// (`RxChecksum::Verified`), the case header prediction covers.
    pub verified: bool,
}

/// Description of one flow: seed bytes.
#[derive(Debug, Clone, Copy)]
pub struct FlowSeed {
    /// Version, link layer, extension headers.
    pub shape: u8,
    /// Twin-of-previous variant.
    pub twin: u8,
    /// MSS, timestamps, fixed IP ID, initial numbers.
    pub misc: u32,
}

/// Ground truth about one pushed frame.
#[derive(Debug, Clone)]
pub struct Input {
    /// Generator flow (None: not a TCP frame of any flow).
    pub flow: Option<usize>,
    /// The bytes pushed.
    pub bytes: Vec<u8>,
    /// Metadata pushed.
    pub meta: RxMeta,
    /// TCP payload as written (empty for noise).
    pub payload: Vec<u8>,
    /// Link + IP datagram length (the frame without padding).
    pub ip_end: usize,
    /// Offset of the IP header.
    pub l3: usize,
    /// Offset of the TCP header.
    pub l4: usize,
    /// TCP flags byte.
    pub flags: u8,
    /// Sequence number, ACK number, window.
    pub seq: u32,
    /// ACK number.
    pub ack: u32,
    /// Window.
    pub window: u16,
    /// TSval if the aligned timestamp option is present.
    pub tsval: Option<u32>,
    /// Carries a SACK option.
    pub sack: bool,
    /// A checksum is wrong.
    pub corrupt: bool,
    /// IPv4 options.
    pub ip_opts: bool,
    /// A fragment.
    pub fragment: bool,
    /// Truncated (malformed) or not a TCP frame at all.
    pub malformed: bool,
    /// Padding bytes and whether they are checksum-neutral.
    pub padding: Option<bool>,
    /// A duplicate ACK: a pure ACK (no data, no SACK, no PSH/FIN/SYN/RST/URG, trusted
    /// checksum) with the same ACK number and window as the previous trusted well-formed frame
    /// of its flow, with no flush operation in between.
    pub dup_ack: bool,
    /// That previous frame.
    pub dup_prev: Option<u32>,
}

impl Input {
    fn pure_ack(&self) -> bool {
        self.payload.is_empty()
    }

    fn tcp_options<'a>(&self, b: &'a [u8]) -> &'a [u8] {
        let doff = usize::from(b[self.l4 + 12] >> 4) * 4;
        &b[self.l4 + 20..self.l4 + doff]
    }
}

/// An operation of the scenario.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    /// Push input `id`.
    Push(u32),
    /// `flush_all`.
    FlushAll,
    /// `flush_idle(now)`.
    FlushIdle(u64),
}

/// A fully built scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Knobs.
    pub knobs: Knobs,
    /// Engine configuration.
    pub config: Config,
    /// Every frame, by id.
    pub inputs: Vec<Input>,
    /// What to do, in order.
    pub ops: Vec<Op>,
}

struct FlowState {
    spec: FrameSpec<'static>,
    meta: RxMeta,
    rss: u32,
    mss: u32,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    ip_id: u16,
    fixed_id: bool,
    ecn_flags: u8,
    /// Twins share their sequence space with the flow they copy (index of the first flow of
    /// the group), so an engine that overlooked the identity field would find them mergeable.
    group: usize,
    /// (ack, window, id) of the previous trusted valid frame of this flow since the last flush
    /// operation.
    prev: Option<(u32, u16, u32)>,
}

/// The sequence-space state a twin shares with its group.
#[derive(Clone, Copy)]
struct Numbers {
    mss: u32,
    seq: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    ip_id: u16,
    fixed_id: bool,
    ecn_flags: u8,
}

impl Numbers {
    fn of(f: &FlowState) -> Self {
        Self {
            mss: f.mss,
            seq: f.seq,
            ack: f.ack,
            window: f.window,
            ts: f.ts,
            ip_id: f.ip_id,
            fixed_id: f.fixed_id,
            ecn_flags: f.ecn_flags,
        }
    }

    fn set(self, f: &mut FlowState) {
        f.mss = self.mss;
        f.seq = self.seq;
        f.ack = self.ack;
        f.window = self.window;
        f.ts = self.ts;
        f.ip_id = self.ip_id;
        f.fixed_id = self.fixed_id;
        f.ecn_flags = self.ecn_flags;
    }
}

fn payload_byte(flow: usize, off: u32) -> u8 {
    (off.wrapping_mul(131) ^ (off >> 8) ^ (flow as u32).wrapping_mul(0x3b)) as u8
}

fn make_flow(i: usize, seed: &FlowSeed, flows: &mut [FlowState], knobs: &Knobs) -> FlowState {
    let v6 = seed.shape & 1 == 1;
    let mut spec = if v6 {
        FrameSpec::ipv6_tcp(10000 + i as u16, 443)
    } else {
        FrameSpec::ipv4_tcp(10000 + i as u16, 443)
    };
    let mut meta = RxMeta::ethernet(0);
    let mut group = i;
    match (seed.shape >> 1) % 5 {
        0 => {}
        1 => spec = spec.vlan(testing::TPID_8021Q, 10),
        2 => {
            spec = spec
                .vlan(testing::TPID_8021AD, 20)
                .vlan(testing::TPID_8021Q, 30)
        }
        3 => {
            spec = spec.raw_ip();
            meta = RxMeta::raw_ip(0);
        }
        _ => meta = meta.with_vlan_stripped(40),
    }
    if let IpSpec::V6(ip) = &mut spec.ip {
        let mut n = 0;
        if seed.shape & 0x10 != 0 {
            // Hop-by-Hop with a PadN option.
            ip.ext[n] = Some(Ipv6Ext::new(Ipv6ExtKind::HopByHop, &[1, 4, 0, 0, 0, 0]));
            n += 1;
        }
        if seed.shape & 0x20 != 0 {
            ip.ext[n] = Some(Ipv6Ext::new(
                Ipv6ExtKind::DestinationOptions,
                &[1, 4, 0, 0, 0, 0],
            ));
        }
        ip.flow_label = if seed.shape & 0x40 != 0 { 0x12345 } else { 0 };
    }
    // Twin of the previous flow: same identity but one field.
    if i > 0 && seed.twin.is_multiple_of(2) {
        let prev = &mut flows[i - 1];
        let mut twin = prev.spec;
        let mut tmeta = prev.meta;
        let variant = (seed.twin / 2) % if knobs.raw_twin { 7 } else { 6 };
        match variant {
            0 => twin.tcp.src_port = 20000 + i as u16,
            1 => twin.tcp.dst_port = 30000 + i as u16,
            2 => match &mut twin.link {
                LinkSpec::Ethernet(eth) if eth.vlans[0].is_some() => {
                    eth.vlans[0] = Some(VlanTag {
                        tpid: eth.vlans[0].unwrap().tpid,
                        tci: 200 + i as u16,
                    });
                }
                _ => tmeta = tmeta.with_vlan_stripped(200 + i as u16),
            },
            3 => match &mut twin.link {
                LinkSpec::Ethernet(eth) => eth.src[5] = 0x80 + i as u8,
                LinkSpec::RawIp => twin.tcp.src_port = 20000 + i as u16,
            },
            4 => match &mut twin.ip {
                IpSpec::V6(ip) => ip.flow_label = 0x1000 + i as u32,
                IpSpec::V4(ip) => ip.dst[3] = 100 + i as u8,
            },
            5 => match &mut twin.ip {
                IpSpec::V6(ip) => ip.src[15] = 100 + i as u8,
                IpSpec::V4(ip) => ip.src[3] = 100 + i as u8,
            },
            _ if matches!(prev.spec.link, LinkSpec::RawIp)
                || prev.meta.link == lro_core::LinkKind::RawIp
                || matches!(&prev.spec.link, LinkSpec::Ethernet(e) if e.src == [0; 6] && e.dst == [0; 6]) =>
            {
                // The previous flow is already one half of a raw twin pair: turning it into
                // zero-MAC Ethernet again would make this flow an exact copy of the one before
                // it. Differ by port instead.
                twin.tcp.src_port = 20000 + i as u16;
            }
            _ => {
                // The previous flow becomes Ethernet with all-zero MACs and no tags; this one
                // is the same addresses and ports as raw IP.
                prev.spec.link = LinkSpec::Ethernet(EthernetSpec {
                    dst: [0; 6],
                    src: [0; 6],
                    vlans: [None, None],
                });
                prev.meta = RxMeta::ethernet(0);
                twin = prev.spec.raw_ip();
                tmeta = RxMeta::raw_ip(0);
            }
        }
        spec = twin;
        meta = tmeta;
        group = prev.group;
    }
    let misc = seed.misc;
    let mss = [100u32, 536, 1000, 1448][(misc & 3) as usize];
    let ts = (misc & 4 != 0).then_some((misc >> 8, 7));
    FlowState {
        spec,
        meta,
        rss: misc.rotate_left(13) ^ 0x5bd1_e995,
        mss,
        // Start near the wrap point sometimes.
        seq: if misc & 8 != 0 {
            0xffff_f000
        } else {
            misc >> 3
        },
        ack: misc.rotate_left(7),
        window: 30000,
        ts,
        ip_id: (misc >> 16) as u16,
        fixed_id: misc & 16 != 0,
        ecn_flags: 0,
        group,
        prev: None,
    }
}

impl Scenario {
    /// Interprets the generated steps.
    pub fn build(knobs: Knobs, seeds: &[FlowSeed], steps: &[Step]) -> Self {
        let mut config = if knobs.gro {
            Config::gro()
        } else {
            Config::lro()
        };
        config.verify_checksums = knobs.verify;
        config.checksum_out = if knobs.partial {
            OutChecksum::Partial
        } else {
            OutChecksum::Full
        };
        config.max_ip_len = [65535, 4000, 20000][usize::from(knobs.max_ip % 3)];
        if knobs.timers {
            config.idle_timeout = Some(20);
            config.max_hold = Some(50);
        }
        let mut flows: Vec<FlowState> = Vec::new();
        for (i, s) in seeds.iter().enumerate() {
            let f = make_flow(i, s, &mut flows, &knobs);
            flows.push(f);
        }
        let mut inputs = Vec::new();
        let mut ops = Vec::new();
        let mut now: u64 = 0;
        for (n, step) in steps.iter().enumerate() {
            // Time and flush points.
            now += u64::from(step.t % 4);
            match step.t >> 4 {
                0 => {
                    ops.push(Op::FlushAll);
                    flows.iter_mut().for_each(|f| f.prev = None);
                }
                1 | 2 => {
                    ops.push(Op::FlushIdle(now));
                    flows.iter_mut().for_each(|f| f.prev = None);
                }
                _ => {}
            }
            let fi = usize::from(step.flow) % flows.len();
            let g = flows[fi].group;
            let shared = Numbers::of(&flows[g]);
            shared.set(&mut flows[fi]);
            let input = build_frame(fi, &mut flows[fi], step, &knobs, now, n as u32);
            let shared = Numbers::of(&flows[fi]);
            shared.set(&mut flows[g]);
            ops.push(Op::Push(inputs.len() as u32));
            inputs.push(input);
        }
        ops.push(Op::FlushAll);
        Scenario {
            knobs,
            config,
            inputs,
            ops,
        }
    }
}

fn build_frame(
    fi: usize,
    st: &mut FlowState,
    step: &Step,
    knobs: &Knobs,
    now: u64,
    n: u32,
) -> Input {
    let a = u32::from(step.a);
    let mss = st.mss;
    let mut spec = st.spec;
    let mut flags = TCP_ACK | st.ecn_flags;
    let mut len = mss;
    let mut seq = st.seq;
    let mut advance = true;
    let mut sack = false;
    let mut ts = st.ts;
    let mut ip_opts = false;
    let mut fragment = false;
    let mut noise = false;
    if let Some((v, e)) = &mut st.ts {
        // TSval moves forward now and then (sometimes equal, for byte-identical options).
        *v = v.wrapping_add(a >> 15);
        ts = Some((*v, *e));
    }
    match step.kind % 100 {
        0..=44 => {}
        45..=54 => len = 1 + a % mss,
        55..=57 => len = mss + 1 + a % 64,
        58..=61 => flags |= TCP_PSH,
        62..=63 => {
            flags |= TCP_FIN;
            len = a % (mss + 1);
        }
        64..=71 => {
            st.ack = st.ack.wrapping_add(1 + a % 3000);
            len = 0;
        }
        72..=78 => len = 0,
        79..=80 => {
            st.window = st.window.wrapping_add(1 + (a % 2000) as u16);
            len = 0;
        }
        81..=82 => {
            seq = seq.wrapping_add(1 + a % 5000);
            st.seq = seq;
        }
        83..=84 => {
            seq = seq.wrapping_sub(mss);
            advance = false;
        }
        85 => {
            len = 0;
            sack = true;
        }
        86 => sack = true,
        87 => {
            if let Some((v, e)) = ts {
                ts = Some((v.wrapping_sub(1 + a % 100), e));
            }
        }
        88 => {
            flags |= TCP_SYN;
            len = 0;
            advance = false;
        }
        89 => {
            flags = TCP_RST | TCP_ACK;
            len = 0;
        }
        90 => {
            flags |= TCP_URG;
            spec.tcp.urgent = 1;
        }
        91 => {
            st.ecn_flags ^= TCP_CWR;
            flags ^= TCP_CWR;
        }
        92 => {
            st.ecn_flags ^= TCP_ECE;
            flags ^= TCP_ECE;
        }
        93 => match &mut spec.ip {
            IpSpec::V4(ip) => ip.tos |= 3,
            IpSpec::V6(ip) => ip.traffic_class |= 3,
        },
        94 => match &mut st.spec.ip {
            IpSpec::V4(ip) => {
                ip.ttl -= 1;
                spec.ip = st.spec.ip;
            }
            IpSpec::V6(ip) => {
                ip.hop_limit -= 1;
                spec.ip = st.spec.ip;
            }
        },
        95 => match &mut spec.ip {
            IpSpec::V4(ip) => {
                ip.options = testing::Bytes::from_slice(&[1, 1, 1, 0]);
                ip_opts = true;
            }
            IpSpec::V6(ip) => {
                // A different Destination-options header for this frame only.
                let n = ip.ext.iter().take_while(|e| e.is_some()).count();
                ip.ext[n] = Some(Ipv6Ext::new(
                    Ipv6ExtKind::DestinationOptions,
                    &[1, 4, 0, 0, 0, (n as u8) + 1],
                ));
            }
        },
        96 => {
            fragment = true;
            match &mut spec.ip {
                IpSpec::V4(ip) => ip.mf = true,
                IpSpec::V6(ip) => {
                    ip.fragment = Some(Ipv6Fragment {
                        offset: 0,
                        more: true,
                        ident: n,
                    })
                }
            }
        }
        97 => st.ip_id = st.ip_id.wrapping_add(1 + (a % 1000) as u16),
        98 => st.ack = st.ack.wrapping_add(1 + a % 3000),
        _ => noise = true,
    }
    let payload: Vec<u8> = (0..len)
        .map(|o| payload_byte(fi, seq.wrapping_add(o)))
        .collect();
    spec.tcp.seq = seq;
    spec.tcp.ack = st.ack;
    spec.tcp.window = st.window;
    spec.tcp.flags = flags;
    spec.tcp.options.clear();
    if sack {
        let l = st.ack.wrapping_add(1000);
        spec.tcp.push_sack(&[(l, l.wrapping_add(500))]);
    }
    if let Some((v, e)) = ts {
        spec.tcp.push_timestamps(v, e);
    }
    if let IpSpec::V4(ip) = &mut spec.ip {
        ip.id = st.ip_id;
        if !st.fixed_id {
            st.ip_id = st.ip_id.wrapping_add(1);
        }
    }
    if advance {
        st.seq = seq
            .wrapping_add(len)
            .wrapping_add(u32::from(flags & (TCP_FIN | TCP_SYN) != 0));
    }
    let m = step.m;
    let mut corrupt = false;
    match m % 16 {
        0 => {
            spec.corrupt = Corrupt::TcpChecksum;
            corrupt = true;
        }
        1 => {
            spec.corrupt = if matches!(spec.ip, IpSpec::V4(_)) {
                Corrupt::IpChecksum
            } else {
                Corrupt::TcpChecksum
            };
            corrupt = true;
        }
        _ => {}
    }
    let zero_pad = [0u8; 8];
    let bad_pad = [0x5a, 0x01, 0x00, 0x77, 0, 0, 0, 0];
    let pad_len = usize::from((m >> 4) % 8) + 1;
    let padding = match m % 16 {
        2 => {
            spec.padding = &zero_pad[..pad_len];
            Some(true)
        }
        3 => {
            spec.padding = &bad_pad[..pad_len.max(2)];
            Some(testing::padding_is_neutral(spec.padding))
        }
        _ => None,
    };
    let spec = FrameSpec {
        payload: &payload,
        ..spec
    };
    let mut bytes = vec![0u8; spec.len()];
    spec.write(&mut bytes).unwrap();
    let l3 = spec.link_len();
    let ip_end = l3 + spec.ip_len();
    let l4 = l3 + spec.ip.header_len();
    let mut malformed = false;
    if noise {
        // An ARP-like frame: not IP at all.
        bytes = vec![0xff; 42];
        bytes[12] = 0x08;
        bytes[13] = 0x06;
        malformed = true;
    } else if knobs.truncate && m % 16 == 4 && bytes.len() > 1 {
        bytes.truncate(usize::from(step.a) % bytes.len());
        malformed = true;
    }
    let ethernet = !matches!(spec.link, LinkSpec::RawIp);
    let mut meta = st.meta;
    meta.time = now;
    meta.rss = match knobs.hash_mode % 4 {
        0 => None,
        1 => Some(RssHash {
            value: st.rss,
            kind: RssType::TcpIpv4,
        }),
        2 => Some(RssHash {
            value: 0xdead_beef,
            kind: RssType::TcpIpv4,
        }),
        _ => Some(RssHash {
            value: (u32::from(step.a) * 0x9e37) ^ u32::from(step.m),
            kind: RssType::Opaque,
        }),
    };
    meta.checksum = match m >> 6 {
        _ if knobs.verified && !corrupt => RxChecksum::Verified,
        1 if !corrupt => RxChecksum::Verified,
        2 => RxChecksum::Complete(testing::complete_checksum(&bytes, ethernet)),
        _ => RxChecksum::None,
    };
    let valid = !noise && !malformed && !corrupt && !fragment && !ip_opts;
    let control = flags & (TCP_SYN | TCP_RST | TCP_URG | TCP_FIN | TCP_PSH) != 0;
    let dup_ack = valid
        && (meta.checksum != RxChecksum::None || knobs.verify)
        && !control
        && len == 0
        && !sack
        && padding != Some(false)
        && st
            .prev
            .is_some_and(|(a, w, _)| (a, w) == (st.ack, st.window));
    let dup_prev = st.prev.map(|p| p.2);
    // Only frames whose checksums the engine can establish tell it the flow's last ACK.
    let trusted = meta.checksum != RxChecksum::None || knobs.verify;
    if valid && trusted {
        st.prev = Some((st.ack, st.window, n));
    }
    Input {
        flow: (!noise).then_some(fi),
        meta,
        ip_end,
        l3,
        l4,
        flags,
        seq,
        ack: st.ack,
        window: st.window,
        tsval: if sack { None } else { ts.map(|t| t.0) },
        sack,
        corrupt,
        ip_opts,
        fragment,
        malformed,
        padding,
        dup_ack,
        dup_prev,
        payload: if noise { Vec::new() } else { payload },
        bytes,
    }
}

/// What came out of the engine.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // test records, built once per output
pub enum Out {
    /// A segment: its frames, contiguous bytes, chunks and info.
    Seg {
        /// Frame ids, head first.
        ids: Vec<u32>,
        /// The contiguous copy.
        bytes: Vec<u8>,
        /// The scatter-gather pieces.
        chunks: Vec<Vec<u8>>,
        /// Engine metadata.
        info: SegmentInfo,
    },
    /// A released frame.
    Rel(u32),
}

/// Records everything in order.
#[derive(Default)]
pub struct Recorder {
    /// Events.
    pub out: Vec<Out>,
}

impl Sink<TFrame> for Recorder {
    fn segment(&mut self, seg: Segment<'_, TFrame>) {
        let info = *seg.info();
        let mut bytes = vec![0u8; seg.len()];
        let n = seg
            .copy_to(&mut bytes)
            .expect("copy_to into a buffer of len()");
        assert_eq!(n, info.len, "copy_to length vs info.len");
        let chunks: Vec<Vec<u8>> = seg.chunks().map(<[u8]>::to_vec).collect();
        assert_eq!(chunks.concat(), bytes, "chunks vs copy_to");
        let ids: Vec<u32> = seg.into_frames().map(|f| f.id).collect();
        self.out.push(Out::Seg {
            ids,
            bytes,
            chunks,
            info,
        });
    }

    fn release(&mut self, frame: TFrame) {
        self.out.push(Out::Rel(frame.id));
    }
}

/// Runs a scenario on an engine; returns the recorded output and the verdicts. Also checks the
/// verdict of every push against what the sink saw during that push.
pub fn run<C: Coalescer<TFrame>>(engine: &mut C, sc: &Scenario) -> Result<Run, String> {
    let mut rec = Recorder::default();
    let n = sc.inputs.len();
    let mut verdicts = vec![Verdict::Held; n];
    let mut emitted_ids = vec![false; n];
    let mut dup_known = vec![false; n];
    for op in &sc.ops {
        let before = rec.out.len();
        match *op {
            Op::Push(id) => {
                let inp = &sc.inputs[id as usize];
                if let (true, Some(p)) = (inp.dup_ack, inp.dup_prev) {
                    let held = |i: usize| {
                        matches!(verdicts[i], Verdict::Held | Verdict::Merged) && !emitted_ids[i]
                    };
                    let flow_held =
                        (0..id as usize).any(|i| sc.inputs[i].flow == inp.flow && held(i));
                    dup_known[id as usize] = held(p as usize)
                        || (verdicts[p as usize] == Verdict::Absorbed && flow_held);
                }
                let frame = TFrame {
                    id,
                    buf: inp.bytes.clone(),
                };
                let v = engine.push(frame, &inp.meta, &mut rec);
                verdicts[id as usize] = v;
                let emitted: Vec<&Out> = rec.out[before..].iter().collect();
                let contains = |o: &Out| matches!(o, Out::Seg { ids, .. } if ids.contains(&id));
                match v {
                    Verdict::Passed(r) => match emitted.last() {
                        Some(Out::Seg { ids, info, .. }) if ids == &[id] => {
                            if info.cause != Cause::Passed(r) {
                                return Err(format!(
                                    "frame {id}: verdict {v:?}, cause {:?}",
                                    info.cause
                                ));
                            }
                        }
                        other => {
                            return Err(format!(
                                "frame {id}: verdict {v:?} but last output {other:?}"
                            ))
                        }
                    },
                    Verdict::Absorbed => {
                        if !emitted.iter().any(|o| matches!(o, Out::Rel(r) if *r == id)) {
                            return Err(format!("frame {id}: Absorbed but not released"));
                        }
                    }
                    Verdict::Held => {
                        if emitted.iter().any(|o| contains(o)) {
                            return Err(format!("frame {id}: Held but emitted at once"));
                        }
                    }
                    Verdict::Queued => {
                        return Err(format!("frame {id}: the engine itself never queues"));
                    }
                    Verdict::Merged => {
                        if emitted.iter().any(|o| contains(o)) {
                            return Err(format!("frame {id}: Merged (still held) but emitted"));
                        }
                    }
                    Verdict::MergedAndFlushed(r) => {
                        // It completed the segment (PSH/FIN, short): delivered last, with it.
                        match emitted.last() {
                            Some(Out::Seg { ids, info, .. })
                                if ids.len() > 1
                                    && ids.last() == Some(&id)
                                    && info.cause == Cause::Flushed(r) => {}
                            other => {
                                return Err(format!(
                                    "frame {id}: verdict {v:?} but last output {other:?}"
                                ))
                            }
                        }
                    }
                }
                for o in &emitted {
                    let later = match o {
                        Out::Seg { ids, .. } => ids.iter().any(|&i| i > id),
                        Out::Rel(r) => *r > id,
                    };
                    if later {
                        return Err(format!("push of {id} emitted a frame not yet pushed"));
                    }
                }
            }
            Op::FlushAll => engine.flush_all(&mut rec),
            Op::FlushIdle(now) => engine.flush_idle(now, &mut rec),
        }
        for o in &rec.out[before..] {
            if let Out::Seg { ids, .. } = o {
                ids.iter().for_each(|&i| emitted_ids[i as usize] = true);
            }
        }
    }
    if engine.held_frames() != 0 {
        return Err(format!(
            "{} frames held after flush_all",
            engine.held_frames()
        ));
    }
    let s = engine.stats();
    if s.frames_in != sc.inputs.len() as u64 || !s.is_conserved() {
        return Err(format!("stats not conserved: {s:?}"));
    }
    Ok(Run {
        rec,
        verdicts,
        dup_known,
    })
}

/// The outcome of [`run`].
pub struct Run {
    /// Everything the sink saw.
    pub rec: Recorder,
    /// Verdict per frame id.
    pub verdicts: Vec<Verdict>,
    /// Per frame id: a duplicate ACK of an ACK the engine still held for the flow.
    pub dup_known: Vec<bool>,
}

fn serial_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

fn csum_eq(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && a & b == 0)
}

/// IP header bytes with the per-frame fields (lengths, ID, checksum) masked.
fn ip_identity(inp: &Input) -> Vec<u8> {
    let mut h = inp.bytes[inp.l3..inp.l4].to_vec();
    if h[0] >> 4 == 4 {
        h[2..6].fill(0);
        h[10..12].fill(0);
    } else {
        h[4..6].fill(0);
    }
    h
}

/// Checks every invariant on a run's output. Returns a description of the first violation.
pub fn check(sc: &Scenario, run: &Run) -> Result<(), String> {
    let (rec, verdicts) = (&run.rec, &run.verdicts[..]);
    let is_dup = |id: u32| {
        let i = id as usize;
        sc.inputs[i].dup_ack
            && match sc.knobs.dup_mode {
                0 => false,
                1 => run.dup_known[i],
                _ => true,
            }
    };
    let gro = sc.config.policy == Policy::Gro;
    let n = sc.inputs.len();
    // (1) Conservation: every id exactly once.
    let mut seen = vec![0u32; n];
    for o in &rec.out {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| seen[i as usize] += 1),
            Out::Rel(i) => seen[*i as usize] += 1,
        }
    }
    if let Some(i) = seen.iter().position(|&c| c != 1) {
        return Err(format!(
            "conservation: frame {i} came back {} times",
            seen[i]
        ));
    }

    // The engine hashes the flow key itself (`RxMeta::rss` only feeds RSS sorting), so order
    // and the per-flow byte stream hold even when every frame carries a different NIC hash.
    let consistent = true;
    // (2) Order per flow.
    let mut last: HashMap<usize, u32> = HashMap::new();
    for o in &rec.out {
        if let Out::Seg { ids, .. } = o {
            for &id in ids {
                let inp = &sc.inputs[id as usize];
                if inp.malformed {
                    continue;
                }
                if let Some(f) = inp.flow {
                    if let Some(&prev) = last.get(&f) {
                        if prev > id && consistent {
                            return Err(format!("order: flow {f}: frame {id} after frame {prev}"));
                        }
                    }
                    last.insert(f, id);
                }
            }
        }
    }

    // (3) Bytes per flow: concatenated payload out == in (excluding released pure ACKs).
    let mut flow_in: HashMap<usize, Vec<u8>> = HashMap::new();
    for (id, inp) in sc.inputs.iter().enumerate() {
        if let (Some(f), false) = (inp.flow, matches!(verdicts[id], Verdict::Absorbed)) {
            if !inp.malformed {
                flow_in
                    .entry(f)
                    .or_default()
                    .extend_from_slice(&inp.payload);
            }
        }
    }
    let mut flow_out: HashMap<usize, Vec<u8>> = HashMap::new();

    for (pos, o) in rec.out.iter().enumerate() {
        match o {
            Out::Rel(id) => check_released(sc, rec, pos, *id, is_dup(*id))?,
            Out::Seg {
                ids,
                bytes,
                chunks,
                info,
            } => {
                let head = &sc.inputs[ids[0] as usize];
                if usize::from(info.frames) != ids.len() {
                    return Err(format!("segment {ids:?}: info.frames {}", info.frames));
                }
                // (4) Isolation.
                if ids.iter().any(|&i| sc.inputs[i as usize].flow != head.flow) {
                    let flows: Vec<_> = ids.iter().map(|&i| sc.inputs[i as usize].flow).collect();
                    return Err(format!("isolation: segment {ids:?} mixes flows {flows:?}"));
                }
                // Scatter-gather pieces: the others' chunks are exactly their payloads.
                for (k, &i) in ids.iter().enumerate().skip(1) {
                    if chunks[k] != sc.inputs[i as usize].payload {
                        return Err(format!(
                            "segment {ids:?}: chunk {k} is not frame {i}'s payload"
                        ));
                    }
                }
                let unchanged = info.checksum == OutChecksum::AsReceived;
                if unchanged {
                    if ids.len() != 1 {
                        return Err(format!("segment {ids:?}: several frames but AsReceived"));
                    }
                    let full = &head.bytes[..];
                    let trimmed = &head.bytes[..head.ip_end.min(head.bytes.len())];
                    if bytes[..] != *full
                        && (bytes[..] != *trimmed || head.padding != Some(true) || gro)
                    {
                        return Err(format!("frame {}: AsReceived but bytes changed", ids[0]));
                    }
                } else {
                    check_rewritten(sc, ids, bytes, info)?;
                }
                if ids.len() > 1 || !unchanged {
                    check_never_merged(sc, ids, unchanged, &is_dup)?;
                }
                if let Some(f) = head.flow {
                    if !head.malformed {
                        for &i in ids {
                            flow_out
                                .entry(f)
                                .or_default()
                                .extend_from_slice(&sc.inputs[i as usize].payload);
                        }
                    }
                }
                // (8) Reversibility.
                if gro && ids.len() > 1 {
                    check_resegment(sc, ids, bytes, info)?;
                }
            }
        }
    }
    for (f, data) in flow_in.iter().filter(|_| consistent) {
        if flow_out.get(f).map(Vec::as_slice).unwrap_or(&[]) != data.as_slice() {
            return Err(format!(
                "bytes: flow {f}: payload out differs from payload in"
            ));
        }
    }
    Ok(())
}

/// A released frame: Lro only, a mergeable pure ACK, superseded by a later segment of its flow
/// holding a frame pushed before it.
fn check_released(
    sc: &Scenario,
    rec: &Recorder,
    pos: usize,
    id: u32,
    dup: bool,
) -> Result<(), String> {
    let inp = &sc.inputs[id as usize];
    if sc.config.policy == Policy::Gro {
        return Err(format!("frame {id} released under Gro"));
    }
    let bad = !inp.pure_ack()
        || inp.malformed
        || inp.corrupt
        || inp.ip_opts
        || inp.fragment
        || inp.sack
        || dup
        || inp.padding == Some(false)
        || inp.flags & (TCP_SYN | TCP_RST | TCP_URG | TCP_FIN | TCP_PSH) != 0
        || (inp.meta.checksum == RxChecksum::None && !sc.config.verify_checksums);
    if bad {
        return Err(format!(
            "frame {id} released but may not be merged: {inp:?}"
        ));
    }
    let absorbed_by = rec.out[pos + 1..].iter().find_map(|o| match o {
        Out::Seg { ids, bytes, .. }
            if sc.inputs[ids[0] as usize].flow == inp.flow && ids[0] < id =>
        {
            Some(bytes)
        }
        _ => None,
    });
    let Some(bytes) = absorbed_by else {
        return Err(format!(
            "frame {id} released but no later segment of its flow carries it"
        ));
    };
    let head_ack = u32::from_be_bytes(bytes[inp.l4 + 8..inp.l4 + 12].try_into().unwrap());
    if !serial_le(inp.ack, head_ack) {
        return Err(format!(
            "frame {id} released; its ACK {} is newer than the segment's {head_ack}",
            inp.ack
        ));
    }
    Ok(())
}

/// (5) and (7): frames that may never be merged (or rewritten).
fn check_never_merged(
    sc: &Scenario,
    ids: &[u32],
    unchanged: bool,
    is_dup: &dyn Fn(u32) -> bool,
) -> Result<(), String> {
    let gro = sc.config.policy == Policy::Gro;
    let multi = ids.len() > 1;
    for &i in ids {
        let inp = &sc.inputs[i as usize];
        let why = if inp.corrupt {
            "bad checksum (laundering)"
        } else if inp.meta.checksum == RxChecksum::None && !sc.config.verify_checksums {
            "unverified checksum"
        } else if inp.malformed {
            "malformed"
        } else if inp.ip_opts {
            "IP options"
        } else if inp.fragment {
            "fragment"
        } else if inp.flags & (TCP_SYN | TCP_RST | TCP_URG) != 0 {
            "SYN/RST/URG"
        } else if is_dup(i) {
            "duplicate ACK"
        } else if inp.padding == Some(false) {
            "non-neutral padding"
        } else if inp.padding.is_some() && gro {
            "padding under Gro"
        } else if inp.sack && !gro {
            "SACK under Lro"
        } else if gro && multi && inp.pure_ack() {
            "pure ACK under Gro"
        } else {
            continue;
        };
        if multi || !unchanged {
            return Err(format!(
                "never merged: frame {i} ({why}) is in segment {ids:?} (rewritten: {})",
                !unchanged
            ));
        }
    }
    if !multi {
        return Ok(());
    }
    let head = &sc.inputs[ids[0] as usize];
    let head_ip = ip_identity(head);
    let mut next_seq = head.seq;
    for (k, &i) in ids.iter().enumerate() {
        let inp = &sc.inputs[i as usize];
        if ip_identity(inp) != head_ip {
            return Err(format!(
                "segment {ids:?}: frame {i} differs in TTL/TOS/DF/flow label/ext headers"
            ));
        }
        if (inp.flags ^ head.flags) & !(TCP_PSH | TCP_FIN) != 0 {
            return Err(format!(
                "segment {ids:?}: frame {i} differs in TCP flags (CWR/ECE...)"
            ));
        }
        if k + 1 < ids.len() && inp.flags & (TCP_PSH | TCP_FIN) != 0 {
            return Err(format!(
                "segment {ids:?}: PSH/FIN on frame {i} which is not last"
            ));
        }
        if inp.seq != next_seq {
            return Err(format!("segment {ids:?}: frame {i} not contiguous"));
        }
        next_seq = next_seq.wrapping_add(inp.payload.len() as u32);
        if gro {
            let mss = head.payload.len();
            let len = inp.payload.len();
            if inp.ack != head.ack || inp.window != head.window {
                return Err(format!(
                    "Gro segment {ids:?}: ACK/window of frame {i} differ"
                ));
            }
            if inp.tcp_options(&inp.bytes) != head.tcp_options(&head.bytes) {
                return Err(format!("Gro segment {ids:?}: options of frame {i} differ"));
            }
            if len == 0 || len > mss || (k + 1 < ids.len() && len != mss) {
                return Err(format!(
                    "Gro segment {ids:?}: frame {i} payload {len} vs mss {mss}"
                ));
            }
        } else {
            let prev = &sc.inputs[ids[k.saturating_sub(1)] as usize];
            if !serial_le(prev.ack, inp.ack) {
                return Err(format!(
                    "Lro segment {ids:?}: ACK goes backwards at frame {i}"
                ));
            }
            match (prev.tsval, inp.tsval) {
                (Some(a), Some(b)) if !serial_le(a, b) => {
                    return Err(format!(
                        "Lro segment {ids:?}: TSval goes backwards at frame {i}"
                    ));
                }
                (Some(_), None) | (None, Some(_)) => {
                    return Err(format!(
                        "Lro segment {ids:?}: timestamps present on some frames only"
                    ));
                }
                _ => {}
            }
        }
    }
    if gro && head.ip_identity_is_v4() {
        let id_of = |i: u32| {
            let b = &sc.inputs[i as usize].bytes;
            let l3 = sc.inputs[i as usize].l3;
            u16::from_be_bytes([b[l3 + 4], b[l3 + 5]])
        };
        let first = id_of(ids[0]);
        let fixed = ids.iter().all(|&i| id_of(i) == first);
        let inc = ids
            .iter()
            .enumerate()
            .all(|(k, &i)| id_of(i) == first.wrapping_add(k as u16));
        if !fixed && !inc {
            return Err(format!(
                "Gro segment {ids:?}: IPv4 IDs neither fixed nor incrementing"
            ));
        }
    }
    Ok(())
}

impl Input {
    fn ip_identity_is_v4(&self) -> bool {
        self.bytes[self.l3] >> 4 == 4
    }
}

/// (6) A rewritten segment parses, its lengths and checksums are right, its payload is the
/// concatenation of its frames' payloads, and its header fields are the ones the policy says.
fn check_rewritten(
    sc: &Scenario,
    ids: &[u32],
    bytes: &[u8],
    info: &SegmentInfo,
) -> Result<(), String> {
    let head = &sc.inputs[ids[0] as usize];
    let p = match head.meta.link {
        lro_core::LinkKind::RawIp => SlicedPacket::from_ip(bytes),
        _ => SlicedPacket::from_ethernet(bytes),
    }
    .map_err(|e| format!("segment {ids:?} does not parse: {e:?}"))?;
    let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
        return Err(format!("segment {ids:?}: no TCP"));
    };
    let expected: Vec<u8> = ids
        .iter()
        .flat_map(|&i| sc.inputs[i as usize].payload.iter().copied())
        .collect();
    if tcp.payload() != expected.as_slice() {
        return Err(format!(
            "segment {ids:?}: payload is not the frames' payloads"
        ));
    }
    if info.payload_len as usize != expected.len() || info.len != bytes.len() {
        return Err(format!("segment {ids:?}: info lengths {info:?}"));
    }
    if info.l3 as usize != head.l3 || info.l4 as usize != head.l4 {
        return Err(format!("segment {ids:?}: info offsets {info:?}"));
    }
    let hdr = etherparse::TcpHeaderSlice::from_slice(tcp.slice()).unwrap();
    let tcp_len = bytes.len() - head.l4;
    let (sum, pseudo, ip_len) = match &p.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            if h.to_header().calc_header_checksum() != h.header_checksum() {
                return Err(format!("segment {ids:?}: bad IPv4 header checksum"));
            }
            if usize::from(h.total_len()) != bytes.len() - head.l3 {
                return Err(format!(
                    "segment {ids:?}: IPv4 total length {} vs {}",
                    h.total_len(),
                    bytes.len() - head.l3
                ));
            }
            (
                hdr.calc_checksum_ipv4_raw(h.source(), h.destination(), tcp.payload())
                    .unwrap(),
                testing::pseudo_header_sum_v4(h.source(), h.destination(), tcp_len as u32),
                usize::from(h.total_len()),
            )
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            if usize::from(h.payload_length()) + 40 != bytes.len() - head.l3 {
                return Err(format!("segment {ids:?}: IPv6 payload length"));
            }
            (
                hdr.calc_checksum_ipv6_raw(h.source(), h.destination(), tcp.payload())
                    .unwrap(),
                testing::pseudo_header_sum_v6(h.source(), h.destination(), tcp_len as u32),
                usize::from(h.payload_length()) + 40,
            )
        }
        _ => return Err(format!("segment {ids:?}: no IP")),
    };
    if ip_len > usize::from(sc.config.max_ip_len) {
        return Err(format!(
            "segment {ids:?}: IP datagram {ip_len} over the limit"
        ));
    }
    match info.checksum {
        OutChecksum::Full => {
            if !csum_eq(sum, tcp.checksum()) {
                return Err(format!(
                    "segment {ids:?}: bad TCP checksum {:#x}, want {sum:#x}",
                    tcp.checksum()
                ));
            }
        }
        OutChecksum::Partial => {
            if !csum_eq(pseudo, tcp.checksum()) {
                return Err(format!(
                    "segment {ids:?}: partial checksum {:#x}, want {pseudo:#x}",
                    tcp.checksum()
                ));
            }
        }
        other => return Err(format!("segment {ids:?}: checksum state {other:?}")),
    }
    if info.checksum != sc.config.checksum_out {
        return Err(format!(
            "segment {ids:?}: checksum state {:?}",
            info.checksum
        ));
    }
    // Header fields: everything up to the TCP checksum is the head's except lengths, IP
    // checksum, PSH/FIN ORed in, and under Lro the newest ACK/window/timestamps.
    if tcp.sequence_number() != head.seq {
        return Err(format!("segment {ids:?}: sequence number"));
    }
    let or = ids.iter().fold(0u8, |f, &i| {
        f | sc.inputs[i as usize].flags & (TCP_PSH | TCP_FIN)
    });
    let flags = bytes[head.l4 + 13];
    if flags != head.flags | or {
        return Err(format!("segment {ids:?}: flags {flags:#x}"));
    }
    let last = &sc.inputs[*ids.last().unwrap() as usize];
    if sc.config.policy == Policy::Gro {
        let (l3, l4) = (head.l3, head.l4);
        let same_tcp = bytes[l4..l4 + 13] == head.bytes[l4..l4 + 13]
            && bytes[l4 + 14..l4 + 16] == head.bytes[l4 + 14..l4 + 16];
        let same_id =
            head.bytes[l3] >> 4 != 4 || bytes[l3 + 4..l3 + 6] == head.bytes[l3 + 4..l3 + 6];
        if bytes[..l3] != head.bytes[..l3]
            || ip_identity_bytes(&bytes[l3..l4]) != ip_identity(head)
            || !same_id
            || !same_tcp
            || tcp.options() != head.tcp_options(&head.bytes)
        {
            return Err(format!(
                "Gro segment {ids:?}: header fields other than lengths changed"
            ));
        }
    } else if !serial_le(last.ack, tcp.acknowledgment_number()) {
        return Err(format!(
            "Lro segment {ids:?}: ACK older than its last frame's"
        ));
    }
    Ok(())
}

fn ip_identity_bytes(h: &[u8]) -> Vec<u8> {
    let mut h = h.to_vec();
    if h[0] >> 4 == 4 {
        h[2..4].fill(0);
        h[4..6].fill(0);
        h[10..12].fill(0);
    } else {
        h[4..6].fill(0);
    }
    h
}

/// (8) Gro: software GSO of the coalesced segment gives back the original frames.
fn check_resegment(
    sc: &Scenario,
    ids: &[u32],
    bytes: &[u8],
    info: &SegmentInfo,
) -> Result<(), String> {
    let head = &sc.inputs[ids[0] as usize];
    let mut out = vec![0u8; bytes.len()];
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let r = lro_core::gso::resegment(
        bytes,
        &head.meta,
        info.gso_size,
        info.fixed_id,
        &mut out,
        |f| frames.push(f.to_vec()),
    );
    if let Err(e) = r {
        return Err(format!("segment {ids:?}: resegment failed: {e:?}"));
    }
    if frames.len() != ids.len() {
        return Err(format!(
            "segment {ids:?}: resegment gave {} frames",
            frames.len()
        ));
    }
    for (f, &i) in frames.iter().zip(ids) {
        if *f != sc.inputs[i as usize].bytes {
            return Err(format!(
                "segment {ids:?}: resegmented frame for {i} differs from the original"
            ));
        }
    }
    Ok(())
}

/// Runs a scenario with header prediction on and off (on the table shape the knobs choose)
/// and requires the same sink events, verdicts and counters (the prediction counter apart);
/// then checks the run with prediction. Returns how many frames were predicted.
pub fn run_both_and_check(sc: &Scenario) -> Result<u64, String> {
    fn go<const N: usize, const S: usize>(
        sc: &Scenario,
    ) -> Result<(Run, Stats, Run, Stats), String> {
        let mut on: Box<Engine<TFrame, Sizes<N, S>>> =
            Box::new(Engine::new(sc.config.with_header_prediction(true)));
        let mut off: Box<Engine<TFrame, Sizes<N, S>>> =
            Box::new(Engine::new(sc.config.with_header_prediction(false)));
        let a = run(&mut *on, sc)?;
        let b = run(&mut *off, sc)?;
        Ok((a, on.stats().clone(), b, off.stats().clone()))
    }
    let (on, mut on_stats, off, off_stats) = if sc.knobs.small {
        go::<4, 8>(sc)?
    } else {
        go::<64, 64>(sc)?
    };
    if off_stats.predicted != 0 {
        return Err(format!(
            "{} frames predicted with prediction off",
            off_stats.predicted
        ));
    }
    if let Some(i) = (0..on.rec.out.len().max(off.rec.out.len()))
        .find(|&i| on.rec.out.get(i) != off.rec.out.get(i))
    {
        return Err(format!(
            "sink event {i} differs: with prediction {:?}, without {:?}",
            on.rec.out.get(i),
            off.rec.out.get(i)
        ));
    }
    if on.verdicts != off.verdicts {
        return Err(format!(
            "verdicts differ: with prediction {:?}, without {:?}",
            on.verdicts, off.verdicts
        ));
    }
    let predicted = on_stats.predicted;
    on_stats.predicted = 0;
    if on_stats != off_stats {
        return Err(format!(
            "counters differ: with prediction {on_stats:?}, without {off_stats:?}"
        ));
    }
    check(sc, &on)?;
    Ok(predicted)
}

/// Runs and checks a scenario on both table shapes chosen by the knobs.
pub fn run_and_check(sc: &Scenario) -> Result<(), String> {
    let run = if sc.knobs.small {
        let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(sc.config));
        run(&mut *e, sc)?
    } else {
        let mut e: Box<Engine<TFrame, Sizes<64, 64>>> = Box::new(Engine::new(sc.config));
        run(&mut *e, sc)?
    };
    check(sc, &run)
}
