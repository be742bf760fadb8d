//! The lro-core property tests' scenario generator: many interleaved TCP flows with the
//! nasty cases of real traffic (near-twin identities, VLANs, raw IP, IPv6 extension headers,
//! sequence numbers near 2^32, corrupted checksums, padding, truncation, SYN/RST/URG, ECN,
//! TTL/TOS changes, IP options, fragments, SACK, timestamps going back, duplicate ACKs), driven
//! by plain [`Step`]s that proptest strategies (or any other source) generate.
//!
//! [`Scenario::build`] produces the same [`Built`] input as every other driver (frames read by
//! the reference reader, [`crate::oracle`]), plus the generator's own ground truth
//! ([`Truth`]: which flow a frame belongs to, its payload, whether its checksum was
//! corrupted...), never taken from the engine's parser. [`crate::check::check`] then applies
//! the common invariant checks and, with the ground truth, [`check_truth`]: the same
//! invariants judged from the generator's knowledge, with the output read back by etherparse.

mod truth;

pub use truth::check_truth;

use crate::built::{self, twin_byte, twin_mac_byte, Built, Pushed, Step as Do};
use crate::check;
use crate::frame::Tagged;
use crate::oracle;
use lro_core::testing::{
    self, Corrupt, EthernetSpec, FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, Ipv6Fragment, LinkSpec,
    VlanTag, TCP_ACK, TCP_CWR, TCP_ECE, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, TCP_URG,
};
use lro_core::{Config, Engine, OutChecksum, RssHash, RssType, RxChecksum, RxMeta, Sizes, Stats};
use proptest::prelude::{any, Strategy};

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

impl Step {
    /// Any step: every byte of it drawn at random (the interpreter gives each value a
    /// meaning).
    pub fn strategy() -> impl Strategy<Value = Step> {
        (
            any::<u8>(),
            any::<u8>(),
            any::<u16>(),
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|(flow, kind, a, m, t)| Step {
                flow,
                kind,
                a,
                m,
                t,
            })
    }
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

impl FlowSeed {
    /// Any flow seed.
    pub fn strategy() -> impl Strategy<Value = FlowSeed> {
        (any::<u8>(), any::<u8>(), any::<u32>()).prop_map(|(shape, twin, misc)| FlowSeed {
            shape,
            twin,
            misc,
        })
    }
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

/// A fully built scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Knobs.
    pub knobs: Knobs,
    /// Engine configuration.
    pub config: Config,
    /// The frames (read by the reference reader) and steps, with the generator's ground
    /// truth in `built.truth`.
    pub built: Built,
}

/// The generator's ground truth about every frame of a scenario ([`Built::truth`]).
#[derive(Debug, Clone)]
pub struct Truth {
    /// How duplicate ACKs are judged ([`Knobs::dup_mode`]).
    pub dup_mode: u8,
    /// Per frame id.
    pub frames: Vec<Input>,
}

impl Scenario {
    /// The generator's ground truth about every frame, by id.
    pub fn inputs(&self) -> &[Input] {
        &self
            .built
            .truth
            .as_ref()
            .expect("a generated scenario")
            .frames
    }
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
    let spec = if v6 {
        FrameSpec::ipv6_tcp(10000 + i as u16, 443)
    } else {
        FrameSpec::ipv4_tcp(10000 + i as u16, 443)
    };
    let (mut spec, mut meta) = built::link_shape(spec, seed.shape >> 1, 10);
    let mut group = i;
    let flow_label = if seed.shape & 0x40 != 0 { 0x12345 } else { 0 };
    built::ipv6_shape(
        &mut spec,
        seed.shape & 0x10 != 0,
        seed.shape & 0x20 != 0,
        flow_label,
    );
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
            // An address differs in one byte (`twin_byte`); the value is this flow's own.
            3 => match &mut twin.link {
                LinkSpec::Ethernet(eth) => eth.src[twin_mac_byte(i)] = 0x80 + i as u8,
                // Linux GRO compares the whole hard header: IPoIB's reserved field too.
                LinkSpec::Ipoib { reserved } => *reserved = 0x100 + i as u16,
                LinkSpec::RawIp => twin.tcp.src_port = 20000 + i as u16,
            },
            4 => match &mut twin.ip {
                IpSpec::V6(ip) => ip.flow_label = 0x1000 + i as u32,
                IpSpec::V4(ip) => ip.dst[twin_byte(i, 4)] = 100 + i as u8,
            },
            5 => match &mut twin.ip {
                IpSpec::V6(ip) => ip.src[twin_byte(i, 16)] = 100 + i as u8,
                IpSpec::V4(ip) => ip.src[twin_byte(i, 4)] = 100 + i as u8,
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
                    ops.push(Do::FlushAll);
                    flows.iter_mut().for_each(|f| f.prev = None);
                }
                1 | 2 => {
                    ops.push(Do::FlushIdle(now));
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
            ops.push(Do::Push(inputs.len()));
            inputs.push(input);
        }
        ops.push(Do::FlushAll);
        let frames = inputs
            .iter()
            .map(|inp| {
                let tcp = oracle::tcp_of(&inp.bytes, &inp.meta);
                Pushed::judged(inp.bytes.clone(), inp.meta, tcp, config.verify_checksums)
            })
            .collect();
        Scenario {
            knobs,
            config,
            built: Built {
                frames,
                steps: ops,
                truth: Some(Truth {
                    dup_mode: knobs.dup_mode,
                    frames: inputs,
                }),
            },
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
        // A window update: on a pure ACK, or on a data frame (which `Gro` must not merge
        // into a segment of the old window; `Lro` merges it, the newest window winning).
        79 => {
            st.window = st.window.wrapping_add(1 + (a % 2000) as u16);
            len = 0;
        }
        80 => st.window = st.window.wrapping_add(1 + (a % 2000) as u16),
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
    let mut bytes = crate::frame::bytes_of(&spec);
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
        2 => RxChecksum::Complete(testing::complete_checksum(&bytes, st.meta.link)),
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

/// Runs a scenario with header prediction on and off (on the table shape the knobs choose),
/// requires the same sink events, verdicts and counters (those
/// [`without_prediction`](crate::check::without_prediction) leaves out apart), then
/// checks the run with prediction ([`check::check`], ground truth included). Returns how many
/// frames were predicted, or the first violation.
pub fn run_both_and_check(sc: &Scenario) -> Result<u64, String> {
    fn go<const N: usize, const S: usize>(sc: &Scenario) -> u64 {
        let mut on: Box<Engine<Tagged, Sizes<N, S>>> =
            Box::new(Engine::new(sc.config.with_header_prediction(true)));
        let mut off: Box<Engine<Tagged, Sizes<N, S>>> =
            Box::new(Engine::new(sc.config.with_header_prediction(false)));
        let a = check::run(&mut *on, &sc.built, true);
        let b = check::run(&mut *off, &sc.built, true);
        let predicted = check::same_with_prediction(&a, on.stats(), &b, off.stats());
        check::check(&sc.built, &sc.config, S, &a, check::Order::Arrival);
        predicted
    }
    check::catch(|| {
        if sc.knobs.small {
            go::<4, 8>(sc)
        } else {
            go::<64, 64>(sc)
        }
    })
}

/// Runs and checks a scenario on the table shape the knobs choose. Returns the engine's
/// counters, or the first violation.
pub fn run_and_check(sc: &Scenario) -> Result<Stats, String> {
    fn go<const N: usize, const S: usize>(sc: &Scenario) -> Stats {
        let mut e: Box<Engine<Tagged, Sizes<N, S>>> = Box::new(Engine::new(sc.config));
        let run = check::run(&mut *e, &sc.built, true);
        check::check(&sc.built, &sc.config, S, &run, check::Order::Arrival);
        e.stats().clone()
    }
    check::catch(|| {
        if sc.knobs.small {
            go::<4, 8>(sc)
        } else {
            go::<64, 64>(sc)
        }
    })
}
