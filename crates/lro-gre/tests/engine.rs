//! The GRE rules on built frames, one behaviour per test: what merges (every flag combination,
//! outer IPv4/IPv6, VLAN tags, raw IP, TEB and NVGRE), what never merges (S, routing, other
//! bits and versions), the key read at its RFC 2890 place, the GRE checksum validated from
//! software, CHECKSUM_COMPLETE and trusted when verified, the outer header rules, pure-ACK
//! merging inside the tunnel, and the output read back by an independent reader.

mod common;

use common::{check, pushes, run, Input, Op, Out, Recorder};
use lro_core::csum;
use lro_core::testing::{FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, TCP_ACK, TCP_PSH};
use lro_core::wire::{be16, ipv4, tcp, write_be16};
use lro_core::{
    Cause, Config, FlushReason, LinkKind, PassReason, RxChecksum, RxMeta, Sizes, Stats, Verdict,
};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::wire::flags;
use lro_gre::{GreEngine, TunnelId};
use lro_testkit::frame::{bytes_of, wrapped};

/// How the NIC reports checksums for a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nic {
    None,
    Verified,
    Complete,
}

const NICS: [Nic; 3] = [Nic::None, Nic::Verified, Nic::Complete];

/// One tunnelled TCP flow: the outer layers, the inner frame's template and where the flow is.
#[derive(Clone, Copy)]
struct Flow {
    gre: GreSpec,
    inner: FrameSpec<'static>,
    seq: u32,
    ack: u32,
    outer_id: u16,
    inner_id: u16,
    ts: u32,
}

impl Flow {
    fn new(gre: GreSpec) -> Self {
        let mut inner = FrameSpec::ipv4_tcp(40000, 5201).ack(9).flags(TCP_ACK);
        if let IpSpec::V4(v4) = &mut inner.ip {
            v4.src = [10, 0, 0, 1];
            v4.dst = [10, 0, 0, 2];
        }
        Flow {
            gre,
            inner,
            seq: 1,
            ack: 9,
            outer_id: 100,
            inner_id: 500,
            ts: 1000,
        }
    }

    fn v6_inside(mut self) -> Self {
        let ports = (self.inner.tcp.src_port, self.inner.tcp.dst_port);
        self.inner = FrameSpec::ipv6_tcp(ports.0, ports.1).ack(9).flags(TCP_ACK);
        self
    }

    /// The next frame: `len` payload bytes (0: a pure ACK advancing the ACK number), `flags`.
    fn frame(&mut self, len: usize, tcp_flags: u8) -> Vec<u8> {
        let payload: Vec<u8> = (0..len).map(|k| (k as u32 * 7 + self.seq) as u8).collect();
        if len == 0 {
            self.ack = self.ack.wrapping_add(1000);
        }
        let mut spec = self.inner;
        spec.tcp.seq = self.seq;
        spec.tcp.ack = self.ack;
        spec.tcp.flags = tcp_flags;
        spec.tcp.push_timestamps(self.ts, 77);
        spec.payload = &payload;
        if let IpSpec::V4(v4) = &mut spec.ip {
            v4.id = self.inner_id;
        }
        let b = bytes_of(&spec);
        let gre = self.gre.ip_id(self.outer_id);
        let inner = if gre.teb {
            InnerFrame::Ethernet(&b)
        } else {
            InnerFrame::Ip(&b[14..])
        };
        let out = wrapped(&gre, inner);
        self.seq = self.seq.wrapping_add(len as u32);
        self.outer_id = self.outer_id.wrapping_add(1);
        self.inner_id = self.inner_id.wrapping_add(1);
        out
    }

    fn data(&mut self, n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|_| self.frame(1000, TCP_ACK)).collect()
    }

    /// The next data frame with its GRE layer changed by `change`, for this frame only.
    fn changed(&mut self, change: impl FnOnce(&mut GreSpec)) -> Vec<u8> {
        let keep = self.gre;
        change(&mut self.gre);
        let frame = self.frame(1000, TCP_ACK);
        self.gre = keep;
        frame
    }

    fn meta(&self) -> RxMeta {
        RxMeta::new(self.gre.link.kind(), 0)
    }
}

fn inputs(flow: &Flow, frames: &[Vec<u8>], nic: Nic) -> Vec<Input> {
    frames
        .iter()
        .map(|b| {
            let m = flow.meta();
            let m = match nic {
                Nic::None => m,
                Nic::Verified => m.with_checksum(RxChecksum::Verified),
                Nic::Complete => m.with_checksum(RxChecksum::Complete(common::complete(b, &m))),
            };
            Input::new(b.clone(), m)
        })
        .collect()
}

type E = GreEngine<common::Tagged, Sizes<32, 64>>;

/// Runs the inputs in order on a fresh engine and checks every invariant.
fn go(config: Config, inputs: &[Input]) -> (Recorder, Vec<Verdict>, Stats) {
    let ops = pushes(inputs.len());
    go_ops(config, inputs, &ops)
}

fn go_ops(config: Config, inputs: &[Input], ops: &[Op]) -> (Recorder, Vec<Verdict>, Stats) {
    let mut e: Box<E> = Box::new(GreEngine::new(config));
    let (rec, v) = run(&mut *e, inputs, ops);
    check(inputs, ops, &config, &rec).unwrap();
    (rec, v, e.stats().clone())
}

/// The input indices of each segment, in delivery order.
fn segment_ids(rec: &Recorder) -> Vec<Vec<usize>> {
    segments(rec).into_iter().map(|(ids, _)| ids).collect()
}

fn segments(rec: &Recorder) -> Vec<(Vec<usize>, Cause)> {
    rec.out
        .iter()
        .filter_map(|o| match o {
            Out::Seg { ids, info, .. } => Some((ids.clone(), info.cause)),
            Out::Rel(_) => None,
        })
        .collect()
}

/// The mergeable header shapes: every combination of C and K, outer IPv4 and IPv6, tags,
/// raw IP, inner IPv6, TEB and NVGRE.
fn mergeable_shapes() -> Vec<(&'static str, Flow)> {
    vec![
        ("none", Flow::new(GreSpec::ipv4())),
        ("K", Flow::new(GreSpec::ipv4().key(7))),
        ("C", Flow::new(GreSpec::ipv4().checksum())),
        ("C+K", Flow::new(GreSpec::ipv4().checksum().key(7))),
        ("v6 outer", Flow::new(GreSpec::ipv6().key(3))),
        ("v6 outer C", Flow::new(GreSpec::ipv6().checksum())),
        (
            "v6 inner",
            Flow::new(GreSpec::ipv4().checksum().key(1)).v6_inside(),
        ),
        ("v6 in v6", Flow::new(GreSpec::ipv6()).v6_inside()),
        (
            "QinQ",
            Flow::new(GreSpec::ipv4().key(2).vlan(0x88a8, 5).vlan(0x8100, 6)),
        ),
        ("raw IP", Flow::new(GreSpec::ipv6().checksum().raw_ip())),
        ("IPoIB", Flow::new(GreSpec::ipv4().key(4).ipoib(0))),
        ("IPoIB v6 C", Flow::new(GreSpec::ipv6().checksum().ipoib(0))),
        ("TEB", Flow::new(GreSpec::ipv4().teb())),
        ("TEB C", Flow::new(GreSpec::ipv4().checksum().teb())),
        ("NVGRE", Flow::new(GreSpec::ipv4().key(0x0012_3401).teb())),
        (
            "NVGRE v6",
            Flow::new(GreSpec::ipv6().key(0x0012_3402).teb()).v6_inside(),
        ),
    ]
}

/// Every mergeable shape merges, under every NIC and both policies, and header prediction
/// takes every frame after the head.
#[test]
fn every_mergeable_shape_merges_under_every_nic_and_policy() {
    for (name, flow) in mergeable_shapes() {
        let mut f = flow;
        let frames = f.data(6);
        for nic in NICS {
            for config in [Config::gro(), Config::lro()] {
                let inputs = inputs(&flow, &frames, nic);
                let (rec, _, stats) = go(config, &inputs);
                let segs = segments(&rec);
                assert_eq!(segs.len(), 1, "{name} {nic:?} {config:?}: {segs:?}");
                assert_eq!(segs[0].0, (0..6).collect::<Vec<_>>());
                assert_eq!(stats.tunnel.frames_in, 6, "{name}");
                assert_eq!(stats.tunnel.frames_merged, 5, "{name}");
                // Which frames took header prediction's path shows only in the counters.
                assert_eq!(
                    stats.predicted, 5,
                    "{name} {nic:?} {config:?}: every frame after the head predicted"
                );
                if let Some(Out::Seg { info, .. }) = rec.out.first() {
                    let t = info.tunnel.expect("tunnel in the info");
                    let id = TunnelId::of(&t);
                    assert_eq!(id.flags_version, flow.gre.flags_version, "{name}");
                    assert_eq!(
                        id.key,
                        (flow.gre.flags_version & flags::K != 0).then_some(flow.gre.key)
                    );
                }
            }
        }
    }
}

#[test]
fn an_outer_ipoib_reserved_field_keeps_tunnels_apart() {
    // GRE over IPoIB: frames whose outer encapsulation headers differ only in the reserved
    // field are not merged (Linux GRO compares the whole hard header), under either policy.
    let mut f = Flow::new(GreSpec::ipv4().key(5).ipoib(0));
    let mut frames = f.data(6);
    for b in &mut frames[2..4] {
        b[3] = 7;
    }
    for nic in NICS {
        for config in [Config::gro(), Config::lro()] {
            let inputs = inputs(&f, &frames, nic);
            let (rec, _, _) = go(config, &inputs);
            let ids = segment_ids(&rec);
            assert_eq!(
                ids,
                [vec![0, 1], vec![2, 3], vec![4, 5]],
                "{nic:?} {config:?}"
            );
        }
    }
}

#[test]
fn sequence_routing_and_other_bits_never_merge() {
    let mut cases: Vec<(&str, GreSpec, PassReason)> = vec![
        ("S", GreSpec::ipv4().sequence(1), PassReason::Encap),
        ("K+S", GreSpec::ipv4().key(3).sequence(1), PassReason::Encap),
        (
            "C+K+S",
            GreSpec::ipv4().checksum().key(3).sequence(1),
            PassReason::Encap,
        ),
    ];
    let mut r = GreSpec::ipv4();
    r.flags_version = flags::R;
    cases.push(("R", r, PassReason::Encap));
    for (name, bits) in [
        ("strict", flags::STRICT),
        ("recur", 0x0100),
        ("reserved", 0x0008),
    ] {
        let mut g = GreSpec::ipv4().key(1);
        g.flags_version |= bits;
        cases.push((name, g, PassReason::Encap));
    }
    for v in [1u16, 7] {
        let mut g = GreSpec::ipv4().key(1);
        g.flags_version |= v;
        cases.push(("version", g, PassReason::Encap));
    }
    let mut erspan = GreSpec::ipv4().sequence(1);
    erspan.protocol = Some(lro_gre::wire::Protocol::ERSPAN_II);
    cases.push(("ERSPAN", erspan, PassReason::NotTcp));
    for (name, gre, reason) in cases {
        let mut f = Flow::new(gre);
        let frames = f.data(4);
        for nic in NICS {
            let inputs = inputs(&f, &frames, nic);
            let (rec, verdicts, stats) = go(Config::lro(), &inputs);
            assert!(
                verdicts.iter().all(|v| *v == Verdict::Passed(reason)),
                "{name} {nic:?}: {verdicts:?}"
            );
            assert_eq!(rec.out.len(), 4, "{name}");
            assert_eq!(stats.tunnel.passed[reason.index()], 4, "{name}");
            assert_eq!(stats.passed[reason.index()], 4, "{name}");
            // Passed as received, in order.
            for (i, o) in rec.out.iter().enumerate() {
                assert!(
                    matches!(o, Out::Seg { ids, bytes, .. } if ids == &[i] && bytes == &frames[i])
                );
            }
        }
    }
}

#[test]
fn a_never_merged_frame_goes_after_its_flows_held_segment() {
    // A frame with a bad GRE checksum goes alone *within* its flow: the flow's held segment
    // must go first. (Frames the tunnel keeps apart, with S or an outer fragment: the test
    // after `outer_header_rules_apply`.)
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(5));
    let mut frames = f.data(3);
    let mut bad = GreSpec::ipv4().checksum().key(5);
    bad.corrupt_checksum = true;
    let good = f.gre;
    f.gre = bad;
    frames.push(f.frame(1000, TCP_ACK));
    f.gre = good;
    frames.extend(f.data(2));
    let inputs = inputs(&f, &frames, Nic::None);
    let (rec, verdicts, stats) = go(Config::gro(), &inputs);
    assert_eq!(verdicts[3], Verdict::Passed(PassReason::BadEncapChecksum));
    let segs = segments(&rec);
    assert_eq!(
        segs,
        vec![
            (vec![0, 1, 2], Cause::Flushed(FlushReason::Unmergeable)),
            (vec![3], Cause::Passed(PassReason::BadEncapChecksum)),
            (vec![4, 5], Cause::Flushed(FlushReason::FlushAll)),
        ],
    );
    assert_eq!(stats.tunnel.passed[PassReason::BadEncapChecksum.index()], 1);
}

/// A frame of the tunnel's flow whose GRE header the encapsulation will not merge with the
/// head's (`Gre::may_merge`: with C, Reserved1 differs) ends the held segment
/// (`FlushReason::Encap`) and heads the next one; the frame after it, with the old header
/// again, ends that one in turn. Every NIC, both policies, prediction on and off.
#[test]
fn a_gre_header_the_tunnel_will_not_merge_ends_the_segment() {
    for outer in [GreSpec::ipv4(), GreSpec::ipv6()] {
        let (f, frames) = third_changed(outer, |g| g.reserved1 = 0x0102);
        every_setting(&f, &frames, |setting, rec, verdicts, stats| {
            let case = format!("outer {:?}, {setting}", outer.ip);
            let encap = Cause::Flushed(FlushReason::Encap);
            assert_eq!(
                segments(&rec),
                vec![
                    (vec![0, 1], encap),
                    (vec![2], encap),
                    (vec![3], Cause::Flushed(FlushReason::FlushAll)),
                ],
                "{case}"
            );
            assert_eq!(verdicts[2], Verdict::Held, "{case}");
            assert_eq!(stats.flushes[FlushReason::Encap.index()], 2, "{case}");
        });
    }
}

/// Four data frames of a C+K tunnel over `outer`, the third with its GRE layer changed by
/// `change`.
fn third_changed(outer: GreSpec, change: impl FnOnce(&mut GreSpec)) -> (Flow, Vec<Vec<u8>>) {
    let mut f = Flow::new(outer.checksum().key(5));
    let mut frames = f.data(2);
    frames.push(f.changed(change));
    frames.extend(f.data(1));
    (f, frames)
}

/// Runs `frames` of `f` under every NIC, both policies, prediction on and off (each on a fresh
/// engine, every invariant checked); `check` gets each run and a description of its setting.
fn every_setting(
    f: &Flow,
    frames: &[Vec<u8>],
    mut check: impl FnMut(&str, Recorder, Vec<Verdict>, Stats),
) {
    for nic in NICS {
        for mut config in [Config::gro(), Config::lro()] {
            for prediction in [true, false] {
                config.header_prediction = prediction;
                let (rec, verdicts, stats) = go(config, &inputs(f, frames, nic));
                check(&format!("{nic:?}, {config:?}"), rec, verdicts, stats);
            }
        }
    }
}

#[test]
fn the_key_is_read_after_the_checksum_word() {
    // C+K. The GRE checksum of a packet whose inner checksums are right depends only on the
    // GRE header, the inner addresses and the TCP length (the inner IP header sums to -0 and
    // the TCP bytes to minus the pseudo header), so full-sized frames of a flow share their
    // checksum word and a shorter last frame does not. Linux compares the word after the fixed
    // header, which with C+K is that checksum word: it would not merge the short last frame.
    // The key is what identifies the tunnel: all four merge here.
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(0x0102_0304));
    let mut frames = f.data(3);
    frames.push(f.frame(400, TCP_ACK));
    let words: Vec<&[u8]> = frames
        .iter()
        .map(|b| &b[14 + 20 + 4..14 + 20 + 8])
        .collect();
    assert_eq!(words[0], words[2], "same length: same checksum word");
    assert_ne!(words[2], words[3], "another length: another checksum word");
    let (rec, _, _) = go(Config::gro(), &inputs(&f, &frames, Nic::None));
    assert_eq!(
        segments(&rec),
        vec![(vec![0, 1, 2, 3], Cause::Flushed(FlushReason::ShortSegment))]
    );

    // Different keys whose checksum words are made equal: two flows, never merged.
    let mut a = Flow::new(GreSpec::ipv4().checksum().key(1));
    let mut b = Flow::new(GreSpec::ipv4().checksum().key(2));
    b.seq = a.seq;
    let fa = a.frame(1000, TCP_ACK);
    let mut fb = b.frame(1000, TCP_ACK);
    // Same checksum word as `fa`: Reserved1 pays for the key's difference so the GRE checksum
    // stays right.
    fb[38..40].copy_from_slice(&fa[38..40]);
    let s = lro_core::csum::sum(&fb[34..]);
    let r1 = lro_core::csum::add(u16::from_be_bytes([fb[40], fb[41]]), !s);
    fb[40..42].copy_from_slice(&r1.to_be_bytes());
    assert_eq!(fb[38..40], fa[38..40]);
    let fa2 = a.frame(1000, TCP_ACK);
    let frames = [fa, fb, fa2];
    let ins: Vec<Input> = frames
        .iter()
        .map(|x| Input::new(x.clone(), RxMeta::ethernet(0)))
        .collect();
    assert!(ins.iter().all(|i| i.trusted), "every GRE checksum right");
    let (rec, _, _) = go(Config::gro(), &ins);
    let segs = segments(&rec);
    assert_eq!(segs.len(), 2, "{segs:?}");
    assert!(segs.iter().any(|s| s.0 == vec![0, 2]));
}

#[test]
fn tunnels_are_kept_apart() {
    // One inner flow (same addresses, ports, sequence numbers) in tunnels that differ in one
    // thing each, interleaved frame by frame.
    let base = GreSpec::ipv4().checksum().key(9);
    let mut other_src = base;
    let mut other_dst = base;
    if let IpSpec::V4(v4) = &mut other_src.ip {
        v4.src = [198, 18, 0, 77];
    }
    if let IpSpec::V4(v4) = &mut other_dst.ip {
        v4.dst = [198, 18, 0, 78];
    }
    // The layouts header prediction has copies of its path for (no options, a key; outer
    // and inner IPv4 over untagged Ethernet), each with a twin differing in one thing.
    let plain = GreSpec::ipv4();
    let mut plain_other_src = plain;
    if let IpSpec::V4(v4) = &mut plain_other_src.ip {
        v4.src = [198, 18, 0, 79];
    }
    let tunnels = [
        base,
        base.key(10),
        GreSpec::ipv4().key(9),
        GreSpec::ipv4().key(10),
        GreSpec::ipv4().checksum(),
        plain,
        plain_other_src,
        other_src,
        other_dst,
        base.teb(),
        base.vlan(0x8100, 3),
        GreSpec::ipv6().checksum().key(9),
    ];
    let mut flows: Vec<Flow> = tunnels.iter().map(|g| Flow::new(*g)).collect();
    let mut frames = Vec::new();
    let mut metas = Vec::new();
    for _ in 0..4 {
        for f in &mut flows {
            frames.push(f.frame(1000, TCP_ACK));
            metas.push(f.meta());
        }
    }
    for nic in NICS {
        let ins: Vec<Input> = frames
            .iter()
            .zip(&metas)
            .map(|(b, m)| {
                let m = match nic {
                    Nic::None => *m,
                    Nic::Verified => m.with_checksum(RxChecksum::Verified),
                    Nic::Complete => m.with_checksum(RxChecksum::Complete(common::complete(b, m))),
                };
                Input::new(b.clone(), m)
            })
            .collect();
        let (rec, _, stats) = go(Config::gro(), &ins);
        let segs = segments(&rec);
        assert_eq!(segs.len(), tunnels.len(), "{nic:?}: one segment per tunnel");
        assert!(segs.iter().all(|s| s.0.len() == 4));
        assert_eq!(stats.tunnel.frames_merged, 3 * tunnels.len() as u64);
    }
    // NVGRE: the flow id (the key's low byte) separates flows of one virtual subnet.
    let mut a = Flow::new(GreSpec::ipv4().key(0x00ab_cd01).teb());
    let mut b = Flow::new(GreSpec::ipv4().key(0x00ab_cd02).teb());
    let frames: Vec<Vec<u8>> = (0..3)
        .flat_map(|_| [a.frame(1000, TCP_ACK), b.frame(1000, TCP_ACK)])
        .collect();
    let (rec, _, _) = go(Config::gro(), &inputs(&a, &frames, Nic::None));
    assert_eq!(segments(&rec).len(), 2);
}

#[test]
fn outer_header_rules_apply() {
    // Outer TTL change, outer TOS (ECN CE) change, outer IDs jumping, an outer fragment, outer
    // IPv4 options, a bad outer header checksum.
    let mut f = Flow::new(GreSpec::ipv4().key(1));
    let mut frames = f.data(2);
    let keep = f.gre;
    if let IpSpec::V4(v4) = &mut f.gre.ip {
        v4.ttl = 63;
    }
    frames.extend(f.data(2));
    f.gre = keep;
    if let IpSpec::V4(v4) = &mut f.gre.ip {
        v4.tos = 3;
    }
    frames.extend(f.data(2));
    f.outer_id = f.outer_id.wrapping_add(1000);
    frames.extend(f.data(2));
    let (rec, _, stats) = go(Config::gro(), &inputs(&f, &frames, Nic::None));
    assert_eq!(segments(&rec).len(), 4);
    assert_eq!(stats.flushes[FlushReason::IpFields.index()], 2);
    assert_eq!(stats.flushes[FlushReason::IpId.index()], 1);

    for (what, reason) in [
        ("fragment", PassReason::Fragment),
        ("options", PassReason::IpOptions),
    ] {
        let mut f = Flow::new(GreSpec::ipv4().key(1));
        let mut frames = f.data(2);
        frames.push(f.changed(|g| {
            if let IpSpec::V4(v4) = &mut g.ip {
                match what {
                    "fragment" => v4.mf = true,
                    _ => v4.options.extend(&[1, 1, 1, 0]),
                }
            }
        }));
        frames.extend(f.data(1));
        let (rec, verdicts, stats) = go(Config::lro(), &inputs(&f, &frames, Nic::None));
        assert_eq!(verdicts[2], Verdict::Passed(reason), "{what}");
        assert_eq!(stats.tunnel.passed[reason.index()], 1, "{what}");
        // The held pair went first.
        assert_eq!(segments(&rec)[0].0, vec![0, 1], "{what}");
    }

    let mut f = Flow::new(GreSpec::ipv4().key(1));
    let mut frames = f.data(3);
    frames[1][24] ^= 0xff; // outer header checksum
    let (_, verdicts, _) = go(Config::gro(), &inputs(&f, &frames, Nic::None));
    assert_eq!(verdicts[1], Verdict::Passed(PassReason::BadIpChecksum));
}

/// Linux `ipv6_gro_receive` compares the extension headers of every IPv6 header it walks, the
/// outer one of a tunnel too: two frames of a flow whose outer Destination Options differ in
/// one byte do not merge, under every NIC mode and policy, with and without prediction.
#[test]
fn outer_ipv6_extension_headers_must_match() {
    let options = |last: u8| {
        // An option of an unknown type the receiver skips (type 0x1e: action bits 00).
        Some(Ipv6Ext::new(
            Ipv6ExtKind::DestinationOptions,
            &[0x1e, 4, 1, 2, 3, last],
        ))
    };
    let mut outer = GreSpec::ipv6();
    if let IpSpec::V6(v6) = &mut outer.ip {
        v6.ext[0] = options(4);
    }
    let (f, frames) = third_changed(outer, |g| {
        if let IpSpec::V6(v6) = &mut g.ip {
            v6.ext[0] = options(5);
        }
    });
    every_setting(&f, &frames, |case, rec, _, stats| {
        let ids = segment_ids(&rec);
        assert_eq!(ids, vec![vec![0, 1], vec![2], vec![3]], "{case}");
        assert_eq!(stats.flushes[FlushReason::IpFields.index()], 2, "{case}");
    });
}

/// DESIGN.md invariant 2 for frames the tunnel layer keeps apart: an outer fragment (IPv4 or
/// IPv6: its inner flow cannot be read) and a GRE header that never merges (S, R, a reserved
/// bit: another tunnel identity, the same inner connection) go after the held segment of the
/// tunnel's flow, under both policies, with and without prediction, for every NIC mode.
/// An outer IPv4 total length that does not end where the inner datagram ends (2 bytes more or
/// less, with a valid header checksum) makes the frame malformed: it goes alone, under every
/// NIC mode and both policies, and is not taken by header prediction, which reads the
/// flow's frames at the template's offsets (with the comparison of the two lengths removed
/// from it, such frames were appended and the outer length rewritten).
#[test]
fn an_outer_length_that_disagrees_with_the_inner_one_is_never_merged() {
    for config in [Config::gro(), Config::lro()] {
        for nic in NICS {
            for delta in [2i16, -2] {
                let mut f = Flow::new(GreSpec::ipv4().key(1));
                let mut frames = f.data(3);
                let b = &mut frames[2];
                let len = u16::from_be_bytes([b[16], b[17]]).wrapping_add_signed(delta);
                b[16..18].copy_from_slice(&len.to_be_bytes());
                lro_core::testing::seal_ipv4_header(b, 14);
                let (rec, verdicts, _) = go(config, &inputs(&f, &frames, nic));
                let what = format!("{config:?} {nic:?} {delta}");
                assert!(
                    matches!(verdicts[2], Verdict::Passed(_)),
                    "{what}: {:?}",
                    verdicts[2]
                );
                let segs = segments(&rec);
                assert!(segs.iter().any(|s| s.0 == vec![0, 1]), "{what}: {segs:?}");
                assert!(segs.iter().any(|s| s.0 == vec![2]), "{what}: {segs:?}");
            }
        }
    }
}

/// Under CHECKSUM_COMPLETE, a bad outer or inner IPv4 header checksum passes as a bad IP
/// checksum (Linux checks each header alone, `ip_fast_csum`), also on the predicted path: the
/// NIC's sum proves the TCP segment right, not the headers before it. With the TCP checksum
/// made to cancel the header's error, so that the NIC's sum is a good frame's, the same.
#[test]
fn a_complete_sum_does_not_hide_a_bad_ip_header_in_the_tunnel() {
    for config in [Config::gro(), Config::lro()] {
        for (which, ip) in [("outer", 14), ("inner", 42)] {
            for cancelled in [false, true] {
                let mut f = Flow::new(GreSpec::ipv4().key(1));
                let mut frames = f.data(4);
                let b = &mut frames[2];
                // Ethernet, outer IPv4 at 14, GRE with a key at 34, inner IPv4 at 42, TCP at 62.
                assert_eq!((b[14], b[34], b[35], b[42]), (0x45, 0x20, 0, 0x45));
                let ip_at = ip + ipv4::field::CHECKSUM.start;
                let tcp_at = 62 + tcp::field::CHECKSUM.start;
                // +1, and -1 (0xfffe) in ones'-complement arithmetic: the sum is unchanged.
                let (ip_c, tcp_c) = (be16(b, ip_at), be16(b, tcp_at));
                write_be16(b, ip_at, csum::add(ip_c, 1));
                if cancelled {
                    write_be16(b, tcp_at, csum::add(tcp_c, 0xfffe));
                }
                let (rec, verdicts, _) = go(config, &inputs(&f, &frames, Nic::Complete));
                let what = format!("{which}, cancelled {cancelled}, {config:?}");
                assert_eq!(
                    verdicts[2],
                    Verdict::Passed(PassReason::BadIpChecksum),
                    "{what}"
                );
                let segs = segments(&rec);
                assert!(segs.iter().any(|s| s.0 == vec![0, 1]), "{what}: {segs:?}");
            }
        }
    }
}

#[test]
fn a_frame_the_tunnel_keeps_apart_goes_after_the_held_segment() {
    use lro_core::testing::Ipv6Fragment;
    type Change = fn(&mut GreSpec);
    let apart: [(&str, Change); 5] = [
        ("outer fragment", |g| match &mut g.ip {
            IpSpec::V4(v4) => v4.mf = true,
            IpSpec::V6(v6) => {
                v6.fragment = Some(Ipv6Fragment {
                    offset: 0,
                    more: true,
                    ident: 7,
                })
            }
        }),
        ("S", |g| *g = g.sequence(3)),
        ("R", |g| g.flags_version |= flags::R),
        ("reserved bit", |g| g.flags_version |= 0x0008),
        ("version 1", |g| g.flags_version |= 1),
    ];
    for outer in [GreSpec::ipv4(), GreSpec::ipv6()] {
        for (what, change) in apart {
            let (f, frames) = third_changed(outer, change);
            every_setting(&f, &frames, |setting, rec, verdicts, stats| {
                let case = format!("{what}, outer {:?}, {setting}", outer.ip);
                let reason = if what == "outer fragment" {
                    PassReason::Fragment
                } else {
                    PassReason::Encap
                };
                assert_eq!(verdicts[2], Verdict::Passed(reason), "{case}");
                assert_eq!(stats.tunnel.passed[reason.index()], 1, "{case}");
                let segs = segments(&rec);
                assert_eq!(segs[0].0, vec![0, 1], "{case}: the held pair first");
                assert_eq!(segs[1].0, vec![2], "{case}");
            });
        }
    }
}

/// A frame kept apart flushes only the held segments it must not overtake, and leaves the
/// others held: a GRE header that never merges, those of its inner connection in its tunnel
/// (not another connection in the same tunnel); a plain IPv4 fragment (ports unknown), those
/// between its addresses, inner or outer (no tunnel between other addresses); an outer
/// fragment (inner flow unknown), those of its tunnel (not another tunnel's).
#[test]
fn frames_kept_apart_flush_only_what_they_must_not_overtake() {
    let mut a = Flow::new(GreSpec::ipv4().key(1));
    let mut b = Flow::new(GreSpec::ipv4().key(1));
    b.inner.tcp.src_port = 40001;
    let mut c = Flow::new(GreSpec::ipv4().key(1));
    if let IpSpec::V4(v4) = &mut c.gre.ip {
        v4.src = [192, 0, 2, 77];
    }
    let mut frames = vec![
        a.frame(1000, TCP_ACK),
        b.frame(1000, TCP_ACK),
        c.frame(1000, TCP_ACK),
    ];
    // 3: a's next frame with a GRE sequence number.
    frames.push(a.changed(|g| *g = g.sequence(3)));
    // 4: a plain IPv4 fragment between addresses no held flow has.
    let payload = [7u8; 300];
    let mut spec = FrameSpec::ipv4_tcp(5000, 6000).payload(&payload);
    if let IpSpec::V4(v4) = &mut spec.ip {
        (v4.src, v4.dst, v4.mf) = ([198, 51, 100, 1], [198, 51, 100, 2], true);
    }
    frames.push(bytes_of(&spec));
    // 5: an outer fragment of a's and b's tunnel.
    frames.push(b.changed(|g| {
        if let IpSpec::V4(v4) = &mut g.ip {
            v4.mf = true;
        }
    }));
    // 6, 7: b's and c's next frames (`flush_all` takes the least recently touched first).
    frames.push(b.frame(1000, TCP_ACK));
    frames.push(c.frame(1000, TCP_ACK));
    every_setting(&a, &frames, |case, rec, verdicts, _| {
        let passed = [
            PassReason::Encap,
            PassReason::Fragment,
            PassReason::Fragment,
        ];
        assert_eq!(verdicts[3..6], passed.map(Verdict::Passed), "{case}");
        let ids = segment_ids(&rec);
        let want = [
            vec![0],
            vec![3],
            vec![4],
            vec![1],
            vec![5],
            vec![6],
            vec![2, 7],
        ];
        assert_eq!(ids, want, "{case}");
    });
}

/// An outer IPv6 fragment whose Fragment header names a Destination Options header (as a
/// sender puts options meant for the final destination after it): what follows, GRE here, is
/// unknown to the engine, which must still let the tunnel's held segment go first.
#[test]
fn an_outer_fragment_with_options_after_it_goes_after_the_tunnels_held_segment() {
    use lro_core::testing::{Ipv6Ext, Ipv6ExtKind};
    let mut gre = GreSpec::ipv6().key(9);
    if let IpSpec::V6(v6) = &mut gre.ip {
        // A Tunnel Encapsulation Limit option (RFC 2473), padded to 8 bytes.
        v6.ext[0] = Some(Ipv6Ext::new(
            Ipv6ExtKind::DestinationOptions,
            &[4, 1, 4, 1, 1, 0],
        ));
    }
    let mut f = Flow::new(gre);
    let mut frames = f.data(4);
    // Frame 2: a Fragment header (first fragment, more to come) between the IPv6 header and
    // the options, as RFC 8200 section 4.1 orders them.
    let (l3, frag) = (14, &mut frames[2]);
    let plen = u16::from_be_bytes([frag[l3 + 4], frag[l3 + 5]]) + 8;
    frag[l3 + 4..l3 + 6].copy_from_slice(&plen.to_be_bytes());
    let next = std::mem::replace(&mut frag[l3 + 6], 44);
    let header = [next, 0, 0, 1, 0, 0, 0, 7];
    frag.splice(l3 + 40..l3 + 40, header);
    for nic in NICS {
        for mut config in [Config::gro(), Config::lro()] {
            for prediction in [true, false] {
                config.header_prediction = prediction;
                let (rec, verdicts, _) = go(config, &inputs(&f, &frames, nic));
                let case = format!("{nic:?}, {config:?}");
                assert_eq!(verdicts[2], Verdict::Passed(PassReason::Fragment), "{case}");
                let segs = segments(&rec);
                assert_eq!(segs[0].0, vec![0, 1], "{case}: the held pair first");
                assert_eq!(segs[1].0, vec![2], "{case}");
            }
        }
    }
}

/// The GRE checksum: a frame whose checksum is wrong is never merged and passes counted, with
/// software verification and with the NIC's CHECKSUM_COMPLETE sum; under `Verified` the NIC
/// vouched for the frame and it is merged (and the segment's checksum computed afresh).
#[test]
fn a_bad_gre_checksum_is_caught_without_reading_payload() {
    for outer_v6 in [false, true] {
        let gre = if outer_v6 {
            GreSpec::ipv6()
        } else {
            GreSpec::ipv4()
        }
        .checksum()
        .key(4);
        let mut f = Flow::new(gre);
        let mut frames = f.data(2);
        let mut bad = gre;
        bad.corrupt_checksum = true;
        f.gre = bad;
        frames.extend(f.data(1));
        f.gre = gre;
        frames.extend(f.data(2));
        for nic in NICS {
            for config in [Config::gro(), Config::lro()] {
                let mut e: Box<E> = Box::new(GreEngine::new(config));
                let ins = inputs(&f, &frames, nic);
                let ops = pushes(ins.len());
                let (rec, verdicts) = run(&mut *e, &ins, &ops);
                let stats = e.stats();
                let bad_count = stats.tunnel.passed[PassReason::BadEncapChecksum.index()];
                if nic == Nic::Verified {
                    // Trusted: merged; the output's GRE checksum is right anyway.
                    assert_eq!(verdicts[2], Verdict::Merged, "{nic:?}");
                    assert_eq!(bad_count, 0);
                    let Out::Seg { bytes, ids, .. } = &rec.out[0] else {
                        panic!()
                    };
                    assert_eq!(ids.len(), 5);
                    let r = common::read(bytes, &ins[0].meta).unwrap();
                    let c = r.id.tunnel.is_some_and(|t| t.flags & flags::C != 0);
                    assert!(c && common::oracle::tunnel_checksums_ok(bytes, &r));
                } else {
                    check(&ins, &ops, &config, &rec).unwrap();
                    assert_eq!(
                        verdicts[2],
                        Verdict::Passed(PassReason::BadEncapChecksum),
                        "{nic:?}"
                    );
                    assert_eq!(bad_count, 1, "{nic:?}");
                    assert_eq!(stats.passed[PassReason::BadEncapChecksum.index()], 1);
                    // Passed as it came; nothing dropped.
                    assert!(rec.out.iter().any(|o| matches!(o, Out::Seg { ids, bytes, .. } if ids == &[2] && bytes == &frames[2])));
                }
            }
        }
    }
}

/// With CHECKSUM_COMPLETE the GRE checksum is judged from the NIC's sum, without reading
/// payload: (1) a NIC sum one off from the frame's bytes (whose own checksums are all right)
/// fails the GRE check; (2) a payload byte changed after the NIC summed the frame, with the
/// NIC's sum of the original bytes, is believed: the engine read no payload byte to notice.
#[test]
fn complete_sum_is_what_the_gre_check_uses() {
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(4));
    let frames = f.data(3);
    let m = f.meta();
    let complete = |b: &[u8]| m.with_checksum(RxChecksum::Complete(common::complete(b, &m)));
    let mut ins: Vec<Input> = frames
        .iter()
        .map(|b| Input::new(b.clone(), complete(b)))
        .collect();
    let c = common::complete(&frames[1], &m);
    ins[1].meta = m.with_checksum(RxChecksum::Complete(if c == 1 { 2 } else { c - 1 }));
    ins[1].trusted = false;
    let r = common::read(&frames[1], &m).unwrap();
    assert!(common::checksums_ok(&frames[1], &r));
    let ops = pushes(3);
    let mut e: Box<E> = Box::new(GreEngine::new(Config::gro()));
    let (rec, verdicts) = run(&mut *e, &ins, &ops);
    check(&ins, &ops, &Config::gro(), &rec).unwrap();
    assert_eq!(verdicts[1], Verdict::Passed(PassReason::BadEncapChecksum));

    let mut ins: Vec<Input> = frames
        .iter()
        .map(|b| Input::new(b.clone(), complete(b)))
        .collect();
    let last = ins[1].bytes.len() - 1;
    ins[1].bytes[last] ^= 0x01;
    let r = common::read(&ins[1].bytes, &m).unwrap();
    assert!(!common::checksums_ok(&ins[1].bytes, &r));
    let mut e: Box<E> = Box::new(GreEngine::new(Config::gro()));
    let (rec, verdicts) = run(&mut *e, &ins, &ops);
    assert_eq!(
        verdicts[1],
        Verdict::Merged,
        "judged by the NIC's sum alone"
    );
    assert_eq!(rec.out.len(), 1);
}

#[test]
fn pure_acks_merge_inside_the_tunnel_under_lro() {
    for gre in [
        GreSpec::ipv4().key(3),
        GreSpec::ipv6().checksum(),
        GreSpec::ipv4().teb(),
    ] {
        let mut f = Flow::new(gre);
        // Data, then a run of advancing pure ACKs (the reverse direction of a bulk transfer).
        let mut frames = vec![f.frame(1000, TCP_ACK)];
        frames.extend((0..6).map(|_| f.frame(0, TCP_ACK)));
        let (rec, _, stats) = go(Config::lro(), &inputs(&f, &frames, Nic::None));
        assert!(stats.tunnel.acks_merged >= 5, "{stats:?}");
        assert_eq!(stats.acks_merged, stats.tunnel.acks_merged);
        let released = rec.out.iter().filter(|o| matches!(o, Out::Rel(_))).count();
        assert_eq!(released as u64, stats.tunnel.acks_merged);
        // Under Gro pure ACKs are never merged.
        let (_, verdicts, stats) = go(Config::gro(), &inputs(&f, &frames, Nic::None));
        assert_eq!(stats.tunnel.acks_merged, 0);
        assert!(verdicts[1..]
            .iter()
            .all(|v| *v == Verdict::Passed(PassReason::PureAck)));
    }
}

#[test]
fn push_and_short_segments_close_tunnelled_segments() {
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(8));
    let mut frames = f.data(3);
    frames.push(f.frame(400, TCP_ACK | TCP_PSH));
    frames.extend(f.data(2));
    let (rec, verdicts, _) = go(Config::gro(), &inputs(&f, &frames, Nic::None));
    assert_eq!(verdicts[3], Verdict::MergedAndFlushed(FlushReason::PushFin));
    assert_eq!(segments(&rec)[0].0, vec![0, 1, 2, 3]);
}

#[test]
fn plain_and_tunnelled_traffic_share_an_engine() {
    // A plain frame of a flow with the same inner addresses and ports as the tunnelled one:
    // two flows.
    // (With `sack` blocks: a frame whose data offset is not its flow's template's.)
    let plain_sack = |i: u32, ack: u32, len: usize, sack: &[(u32, u32)]| {
        let payload = vec![i as u8; len];
        let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
            .seq(1 + 1000 * i)
            .ack(ack)
            .flags(TCP_ACK)
            .payload(&payload);
        if !sack.is_empty() {
            spec = spec.sack(sack);
        }
        if let IpSpec::V4(v4) = &mut spec.ip {
            v4.src = [10, 0, 0, 1];
            v4.dst = [10, 0, 0, 2];
            v4.id = i as u16;
        }
        Input::new(bytes_of(&spec), RxMeta::ethernet(0))
    };
    let plain = |i: u32, ack: u32, len: usize| plain_sack(i, ack, len, &[]);
    let tunnelled = |b: Vec<u8>| Input::new(b, RxMeta::ethernet(0));
    let mut t = Flow::new(GreSpec::ipv4().key(1));
    let mut ins = Vec::new();
    for i in 0..4u32 {
        ins.push(tunnelled(t.frame(1000, TCP_ACK)));
        ins.push(plain(i, 9, 1000));
    }
    let mut e: Box<E> = Box::new(GreEngine::new(Config::gro()));
    let (rec, _) = run(&mut *e, &ins, &pushes(ins.len()));
    let segs = segments(&rec);
    assert_eq!(segs.len(), 2);
    assert_eq!(segs[0].0, vec![0, 2, 4, 6]);
    assert_eq!(segs[1].0, vec![1, 3, 5, 7]);
    let tunnels: Vec<bool> = rec
        .out
        .iter()
        .map(|o| matches!(o, Out::Seg { info, .. } if info.tunnel.is_some()))
        .collect();
    assert_eq!(
        tunnels,
        [true, false],
        "only the tunnelled segment names a tunnel"
    );
    assert_eq!(e.stats().tunnel.frames_in, 4);
    assert_eq!(e.stats().frames_in, 8);
    assert_eq!(e.stats().frames_merged, 6);
    assert_eq!(e.stats().tunnel.frames_merged, 3);

    // A pure ACK of each passed alone under `Gro`: the tunnel's counter has the tunnelled one.
    // The plain flow's second ACK carries SACK blocks: prediction reads it as a variant.
    let ins = [
        tunnelled(t.frame(0, TCP_ACK)),
        plain(4, 1009, 0),
        plain_sack(4, 1009, 0, &[(9000, 9100)]),
    ];
    let predicted = e.stats().predicted;
    let (_, verdicts) = run(&mut *e, &ins, &pushes(ins.len()));
    assert_eq!(verdicts, [Verdict::Passed(PassReason::PureAck); 3]);
    assert_eq!(e.stats().passed(PassReason::PureAck), 3);
    let tunnel = e.stats().tunnel.passed[PassReason::PureAck.index()];
    assert_eq!(tunnel, 1, "the tunnelled ACK only");
    // All taken by header prediction, which counts the frames in: the tunnel's count has
    // the tunnelled one only.
    assert_eq!(e.stats().predicted, predicted + 3);
    assert_eq!(e.stats().tunnel.frames_in, 5);

    // Under `Lro`, pure ACKs of both flows absorbed into their held segments: the tunnel's
    // counters count the tunnelled ones only.
    let mut t = Flow::new(GreSpec::ipv4().key(1));
    let mut ins = vec![tunnelled(t.frame(1000, TCP_ACK)), plain(0, 9, 1000)];
    for k in 1..=3 {
        ins.push(tunnelled(t.frame(0, TCP_ACK)));
        ins.push(plain(1, 9 + 1000 * k, 0));
    }
    let (rec, verdicts, stats) = go(Config::lro(), &ins);
    assert_eq!(
        verdicts[2..],
        [Verdict::Absorbed; 6],
        "{:?}",
        segments(&rec)
    );
    assert_eq!(stats.acks_merged, 6);
    assert_eq!(stats.tunnel.acks_merged, 3, "the tunnelled ACKs only");
    assert_eq!(stats.tunnel.frames_in, 4, "the tunnelled frames only");
}

#[test]
fn truncated_and_hostile_gre_frames_pass_alone() {
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(8));
    let frame = f.frame(200, TCP_ACK);
    let mut e: Box<E> = Box::new(GreEngine::new(Config::lro()));
    let mut rec = Recorder::default();
    let mut n = 0;
    for cut in 0..frame.len() {
        let mut b = frame[..cut].to_vec();
        // Keep the outer length consistent with the cut (else it is only an outer problem).
        if cut > 34 {
            let total = (cut - 14) as u16;
            b[16..18].copy_from_slice(&total.to_be_bytes());
        }
        for link in [LinkKind::Ethernet, LinkKind::RawIp] {
            let v = e.push(
                common::Tagged {
                    id: n,
                    buf: b.clone(),
                },
                &RxMeta::ethernet(0).with_link(link),
                &mut rec,
            );
            n += 1;
            assert!(
                matches!(v, Verdict::Passed(_)),
                "cut at {cut}, {link:?}: {v:?}"
            );
        }
    }
    // Every flag word over a valid frame. Only the frame's own word (C and K) leaves it a
    // frame that may be held; with any other the GRE header has another length (so what
    // follows it is no longer the inner datagram), bits that never merge or another version,
    // and the frame passes alone.
    for word in (0..=u16::MAX).step_by(97) {
        assert_ne!(word, 0xa000);
        let mut b = frame.clone();
        b[34..36].copy_from_slice(&word.to_be_bytes());
        let v = e.push(
            common::Tagged { id: n, buf: b },
            &RxMeta::ethernet(0),
            &mut rec,
        );
        assert!(matches!(v, Verdict::Passed(_)), "word {word:#06x}: {v:?}");
        n += 1;
    }
    e.flush_all(&mut rec);
    assert!(e.stats().is_conserved());
    assert_eq!(e.stats().frames_in, n as u64);
    let back: usize = rec
        .out
        .iter()
        .map(|o| match o {
            Out::Seg { ids, .. } => ids.len(),
            Out::Rel(_) => 1,
        })
        .sum();
    assert_eq!(back, n);
}

#[test]
fn flushes_between_bursts_keep_everything() {
    let mut f = Flow::new(GreSpec::ipv4().checksum().key(8));
    let frames = f.data(9);
    let ins = inputs(&f, &frames, Nic::Complete);
    let ops: Vec<Op> = (0..9)
        .flat_map(|i| {
            if i % 3 == 2 {
                vec![Op::Push(i), Op::FlushAll]
            } else {
                vec![Op::Push(i)]
            }
        })
        .collect();
    let (rec, _, _) = go_ops(Config::gro(), &ins, &ops);
    assert_eq!(segments(&rec).len(), 3);
}

#[test]
fn the_size_limit_counts_from_the_outer_header() {
    // 45 frames of 1455 bytes: 20 + 32 + 45 * 1455 = 65527 bytes of inner datagram, within
    // 65535; with the outer IPv4 header and GRE in front (24 bytes) 65551, over it. Linux
    // `skb_gro_receive` limits the whole packet from its first header.
    let mut f = Flow::new(GreSpec::ipv4());
    let frames: Vec<Vec<u8>> = (0..46).map(|_| f.frame(1455, TCP_ACK)).collect();
    let (rec, _, stats) = go(Config::gro(), &inputs(&f, &frames, Nic::Verified));
    let segs = segments(&rec);
    assert_eq!(segs[0].0.len(), 44, "{segs:?}");
    assert_eq!(segs[0].1, Cause::Flushed(FlushReason::SizeLimit));
    assert_eq!(stats.flushes[FlushReason::SizeLimit.index()], 1);
    let Out::Seg { bytes, .. } = &rec.out[0] else {
        panic!()
    };
    assert!(bytes.len() - 14 <= 65535);
}

#[test]
fn odd_length_routing_field_passes_as_encap_under_every_nic() {
    // RFC 1701 routing with an SRE of odd length: the header is 17 bytes, an odd length the
    // hook's contract (`EncapHeader::len`, a multiple of 2) does not allow. Never merged, it
    // must pass counted as `Encap` whatever the NIC says of checksums.
    let mut g = GreSpec::ipv4();
    g.flags_version = flags::R;
    g.routing = lro_core::testing::Bytes::from_slice(&[0x00, 0x01, 0x00, 0x01, 0xaa, 0, 0, 0, 0]);
    assert_eq!(g.gre_len(), 17);
    let mut f = Flow::new(g);
    let frames = f.data(3);
    for nic in NICS {
        let ins = inputs(&f, &frames, nic);
        let mut e: Box<E> = Box::new(GreEngine::new(Config::lro()));
        let (rec, verdicts) = run(&mut *e, &ins, &pushes(ins.len()));
        assert!(
            verdicts
                .iter()
                .all(|v| *v == Verdict::Passed(PassReason::Encap)),
            "{nic:?}: {verdicts:?}"
        );
        assert_eq!(rec.out.len(), 3);
    }
}

/// Frames held through a tunnel when the counters are reset count as received again, for the
/// tunnel too: once they are out, the tunnel's counters read as the engine's.
#[test]
fn reset_stats_keeps_held_tunnel_frames_counted() {
    let mut f = Flow::new(GreSpec::ipv4().key(8));
    let mut e: Box<E> = Box::new(GreEngine::new(Config::lro()));
    let mut rec = Recorder::default();
    for (id, buf) in f.data(3).into_iter().enumerate() {
        let v = e.push(common::Tagged { id, buf }, &f.meta(), &mut rec);
        assert!(matches!(v, Verdict::Held | Verdict::Merged), "{v:?}");
    }
    e.reset_stats();
    e.flush_all(&mut rec);
    let s = e.stats();
    assert!(s.is_conserved());
    assert_eq!((s.frames_in, s.tunnel.frames_in), (3, 3));
    assert_eq!(s.tunnel.frames_merged, 2);
}
