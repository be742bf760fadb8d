//! LRO over IPoIB: lro-core's engine on frames that start with the 4-byte IPoIB encapsulation
//! header (`LinkKind::Ipoib`), under both policies, IPv4 and IPv6, with header prediction,
//! and every checksum state (CHECKSUM_COMPLETE summed from byte 4).
//!
//! The main property is differential: the same TCP traffic framed as Ethernet and as IPoIB
//! must give the same engine counters (prediction included) and the same segments, byte for
//! byte after the link header, and each IPoIB segment keeps its first frame's encapsulation
//! header. Output is checked independently with etherparse (lengths, checksums), and `Gro`
//! output re-segments into the original frames.

use etherparse::{EtherType as EpEtherType, NetSlice, SlicedPacket, TransportSlice};
use lro_core::gso::resegment;
use lro_core::testing::{ones_complement_sum, seal_ipv4_header, FrameSpec, TCP_ACK, TCP_PSH};
use lro_core::{
    Config, Engine, FlushReason, LinkKind, PassReason, RxChecksum, RxMeta, Segment, SegmentInfo,
    Sink, Sizes,
};
use proptest::prelude::*;

/// One emitted segment: as one contiguous frame, with its info.
#[derive(Debug, Clone)]
struct Out {
    bytes: Vec<u8>,
    info: SegmentInfo,
    /// Frames in the segment.
    frames: u16,
}

#[derive(Default)]
struct Collect {
    out: Vec<Out>,
    released: usize,
}

impl Sink<Vec<u8>> for Collect {
    fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
        let mut bytes = vec![0u8; segment.len()];
        segment.copy_to(&mut bytes).expect("sized");
        let info = *segment.info();
        self.out.push(Out {
            bytes,
            info,
            frames: info.frames,
        });
    }
    fn release(&mut self, _frame: Vec<u8>) {
        self.released += 1;
    }
}

/// A frame and how its checksum arrives.
type Input = (Vec<u8>, Csum);

/// How a frame's checksum arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Csum {
    None,
    Verified,
    Complete,
}

/// The spec written with an Ethernet header.
fn ethernet(spec: FrameSpec<'_>) -> Vec<u8> {
    let mut b = vec![0u8; spec.len()];
    spec.write(&mut b).expect("sized");
    b
}

/// The spec written as an IPoIB packet: encapsulation header, then the IP packet.
fn ipoib(spec: FrameSpec<'_>) -> Vec<u8> {
    let raw = spec.raw_ip();
    let mut ip = vec![0u8; raw.len()];
    raw.write(&mut ip).expect("sized");
    let mut f = vec![0u8; 4 + ip.len()];
    drivers_ipoib::wire::encap::frame_ip(&ip, &mut f).expect("IP packet");
    f
}

fn meta(link: LinkKind, csum: Csum, frame: &[u8], t: u64) -> RxMeta {
    let m = RxMeta::new(link, t);
    match csum {
        Csum::None => m,
        Csum::Verified => m.with_checksum(RxChecksum::Verified),
        Csum::Complete => {
            let skip = link.header_len();
            // (A frame cut shorter than its link header sums to nothing.)
            let rest = frame.get(skip..).unwrap_or_default();
            m.with_checksum(RxChecksum::Complete(ones_complement_sum(rest)))
        }
    }
}

/// Runs `frames` (with their checksum states) through an engine in bursts of `burst`.
fn run(
    frames: &[(Vec<u8>, Csum)],
    link: LinkKind,
    config: Config,
    burst: usize,
) -> (Collect, lro_core::Stats) {
    let mut engine: Box<Engine<Vec<u8>, Sizes<8, 64>>> = Box::new(Engine::new(config));
    let mut sink = Collect::default();
    for (i, chunk) in frames.chunks(burst.max(1)).enumerate() {
        for (f, c) in chunk {
            let m = meta(link, *c, f, i as u64);
            engine.push(f.clone(), &m, &mut sink);
        }
        engine.flush_all(&mut sink);
    }
    let stats = engine.stats().clone();
    (sink, stats)
}

/// Checks one IPoIB output frame with etherparse: it parses, lengths agree, and (TCP) its
/// checksums are right. Returns (flow, seq, payload) for TCP.
fn check_ipoib_output(frame: &[u8]) -> Option<TcpRead> {
    checked_ipoib(frame).unwrap_or_else(|e| panic!("IPoIB output frame: {e}"))
}

/// What [`check_ipoib_output`] reads from a TCP frame: its flow (addresses and ports), sequence
/// number and payload.
type TcpRead = (Vec<u8>, u32, Vec<u8>);

/// [`check_ipoib_output`], saying what is wrong instead of panicking.
fn checked_ipoib(frame: &[u8]) -> Result<Option<TcpRead>, String> {
    let ensure = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    let head = frame.get(..4).ok_or("shorter than the IPoIB header")?;
    let et = EpEtherType(u16::from_be_bytes([head[0], head[1]]));
    let p = SlicedPacket::from_ether_type(et, &frame[4..]).map_err(|e| format!("{e:?}"))?;
    let Some(TransportSlice::Tcp(tcp)) = p.transport else {
        return Ok(None);
    };
    let (flow, sum) = match p.net {
        Some(NetSlice::Ipv4(ip)) => {
            let h = ip.header();
            ensure(usize::from(h.total_len()) == frame.len() - 4, "IPv4 length")?;
            let hdr = h.to_header();
            ensure(
                hdr.calc_header_checksum() == h.header_checksum(),
                "IPv4 sum",
            )?;
            let sum = tcp.to_header().calc_checksum_ipv4(&hdr, tcp.payload());
            ([h.source(), h.destination()].concat(), sum)
        }
        Some(NetSlice::Ipv6(ip)) => {
            let h = ip.header();
            ensure(
                usize::from(h.payload_length()) + 40 == frame.len() - 4,
                "IPv6 length",
            )?;
            let sum = tcp
                .to_header()
                .calc_checksum_ipv6(&h.to_header(), tcp.payload());
            ([h.source(), h.destination()].concat(), sum)
        }
        _ => return Err("TCP over something else".into()),
    };
    ensure(
        sum.map_err(|e| format!("{e:?}"))? == tcp.checksum(),
        "TCP checksum",
    )?;
    let mut key = flow;
    key.extend_from_slice(&tcp.source_port().to_be_bytes());
    key.extend_from_slice(&tcp.destination_port().to_be_bytes());
    Ok(Some((key, tcp.sequence_number(), tcp.payload().to_vec())))
}

/// `check_ipoib_output` can fail: an IPv4 and an IPv6 IPoIB frame as built pass, and each
/// field it checks, made wrong alone (the IPv4 header checksum made right again where another
/// field changed), is refused for that reason.
#[test]
fn check_ipoib_output_refuses_a_broken_frame() {
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 31 + 7) as u8).collect();
    for v6 in [false, true] {
        let spec = if v6 {
            FrameSpec::ipv6_tcp(40000, 5201)
        } else {
            FrameSpec::ipv4_tcp(40000, 5201)
        };
        let good = ipoib(spec.seq(77).flags(TCP_ACK).payload(&payload));
        let (_, seq, got) = checked_ipoib(&good).expect("valid").expect("TCP");
        assert_eq!((seq, &got), (77, &payload), "v6 {v6}");
        let (length_at, tcp_at, length) = if v6 {
            (4 + 4, 4 + 40, "IPv6 length")
        } else {
            (4 + 2, 4 + 20, "IPv4 length")
        };
        let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
        let mut f = good.clone();
        let n = u16::from_be_bytes([f[length_at], f[length_at + 1]]) - 1;
        f[length_at..length_at + 2].copy_from_slice(&n.to_be_bytes());
        if !v6 {
            seal_ipv4_header(&mut f, 4);
        }
        cases.push((f, length));
        let mut f = good.clone();
        f.push(0);
        cases.push((f, length));
        let mut f = good.clone();
        f[tcp_at + 16] ^= 1;
        cases.push((f, "TCP checksum"));
        let mut f = good.clone();
        *f.last_mut().unwrap() ^= 0x80;
        cases.push((f, "TCP checksum"));
        if !v6 {
            let mut f = good.clone();
            f[14] ^= 1;
            cases.push((f, "IPv4 sum"));
        }
        for (f, want) in cases {
            assert_eq!(checked_ipoib(&f), Err(want.to_string()), "v6 {v6}");
        }
    }
}

/// The frames of every output segment (software GSO of IPoIB segments; a segment of one
/// frame is that frame), in output order.
fn resegment_all(out: &[Out]) -> Vec<Vec<u8>> {
    let mut back = Vec::new();
    let mut buf = vec![0u8; 4096];
    for seg in out {
        if seg.frames == 1 {
            back.push(seg.bytes.clone());
            continue;
        }
        resegment(
            &seg.bytes,
            &RxMeta::ipoib(0),
            seg.info.gso_size,
            seg.info.fixed_id,
            &mut buf,
            |f| back.push(f.to_vec()),
        )
        .expect("resegment");
    }
    back
}

/// A flow of `n` data frames of `len` bytes starting at `seq`.
fn flow(v6: bool, port: u16, seq: u32, n: usize, len: usize, ts: bool) -> Vec<FrameSpec<'static>> {
    static PAYLOAD: [u8; 1500] = {
        let mut p = [0u8; 1500];
        let mut i = 0;
        while i < 1500 {
            p[i] = (i * 7 + 3) as u8;
            i += 1;
        }
        p
    };
    (0..n)
        .map(|k| {
            let base = if v6 {
                FrameSpec::ipv6_tcp(port, 5201)
            } else {
                FrameSpec::ipv4_tcp(port, 5201)
            };
            let mut s = base
                .seq(seq + (k * len) as u32)
                .ack(1)
                .flags(TCP_ACK)
                .payload(&PAYLOAD[..len]);
            if ts {
                // The same TSval throughout: Linux GRO (`Gro`) merges only identical options.
                s = s.timestamps(1000, 77);
            }
            if let lro_core::testing::IpSpec::V4(ip) = &mut s.ip {
                ip.id = k as u16;
            }
            s
        })
        .collect()
}

#[test]
fn merges_ipv4_and_ipv6_under_both_policies_with_prediction() {
    for v6 in [false, true] {
        for config in [Config::gro(), Config::lro()] {
            for csum in [Csum::None, Csum::Verified, Csum::Complete] {
                let frames: Vec<(Vec<u8>, Csum)> = flow(v6, 40000, 1, 8, 1000, true)
                    .into_iter()
                    .map(|s| (ipoib(s), csum))
                    .collect();
                let (sink, stats) = run(&frames, LinkKind::Ipoib, config, 64);
                let what = format!("v6 {v6} {:?} {csum:?}", config.policy);
                assert_eq!(sink.out.len(), 1, "{what}: one segment");
                let seg = &sink.out[0];
                assert_eq!(seg.frames, 8, "{what}");
                assert_eq!(stats.frames_merged, 7, "{what}");
                assert_eq!(stats.predicted, 7, "{what}: header prediction covers IPoIB");
                assert!(stats.is_conserved());
                // The first frame's encapsulation header, then the merged datagram.
                assert_eq!(&seg.bytes[..4], &frames[0].0[..4], "{what}");
                let (_, seq, payload) = check_ipoib_output(&seg.bytes).expect("TCP");
                assert_eq!(seq, 1);
                assert_eq!(payload.len(), 8000);
                let hdr = frames[0].0.len() - 1000;
                let want: Vec<u8> = frames.iter().flat_map(|(f, _)| f[hdr..].to_vec()).collect();
                assert_eq!(payload, want, "{what}: payload in order");
            }
        }
    }
}

#[test]
fn gro_output_resegments_into_the_original_frames() {
    for v6 in [false, true] {
        let frames: Vec<(Vec<u8>, Csum)> = flow(v6, 40001, 77, 6, 1200, false)
            .into_iter()
            .map(|s| (ipoib(s), Csum::None))
            .collect();
        let (sink, _) = run(&frames, LinkKind::Ipoib, Config::gro(), 64);
        assert_eq!(sink.out.len(), 1);
        let back = resegment_all(&sink.out);
        let orig: Vec<Vec<u8>> = frames.into_iter().map(|(f, _)| f).collect();
        assert_eq!(back, orig, "v6 {v6}: byte for byte");
    }
}

#[test]
fn hostile_ipoib_frames_pass_with_a_reason() {
    let good = ipoib(flow(false, 40002, 1, 1, 100, false)[0]);
    let mut arp = good.clone();
    arp[..2].copy_from_slice(&[0x08, 0x06]);
    let mut wrong_version = good.clone();
    wrong_version[..2].copy_from_slice(&[0x86, 0xdd]);
    let mut long_ip = good.clone();
    long_ip[4 + 2..4 + 4].copy_from_slice(&9000u16.to_be_bytes());
    let cases: [(&[u8], PassReason); 5] = [
        (&[], PassReason::Malformed),
        (&good[..3], PassReason::Malformed),
        (&arp, PassReason::NotIp),
        (&wrong_version, PassReason::Malformed),
        (&long_ip, PassReason::Malformed),
    ];
    for (frame, reason) in cases {
        let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
        let mut sink = Collect::default();
        engine.push(frame.to_vec(), &RxMeta::ipoib(0), &mut sink);
        engine.flush_all(&mut sink);
        assert_eq!(sink.out.len(), 1, "{frame:?}: passed up, not lost");
        assert_eq!(sink.out[0].bytes, frame);
        assert_eq!(engine.stats().passed[reason.index()], 1, "{reason:?}");
    }
}

#[test]
fn checksum_complete_is_summed_after_the_encapsulation_header() {
    let frames: Vec<Vec<u8>> = flow(true, 40004, 1, 4, 700, true)
        .into_iter()
        .map(ipoib)
        .collect();
    // From byte 4: verified from the sum, merged.
    let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
    let mut sink = Collect::default();
    for f in &frames {
        let m = meta(LinkKind::Ipoib, Csum::Complete, f, 0);
        engine.push(f.clone(), &m, &mut sink);
    }
    engine.flush_all(&mut sink);
    assert_eq!((sink.out.len(), engine.stats().frames_merged), (1, 3));
    check_ipoib_output(&sink.out[0].bytes).expect("TCP");

    // A sum over the whole frame (the encapsulation header included) is a wrong sum: no frame
    // passes as verified, none is merged.
    let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
    let mut sink = Collect::default();
    for f in &frames {
        let wrong = RxMeta::ipoib(0).with_checksum(RxChecksum::Complete(ones_complement_sum(f)));
        engine.push(f.clone(), &wrong, &mut sink);
    }
    engine.flush_all(&mut sink);
    assert_eq!(engine.stats().frames_merged, 0);
    assert_eq!(
        engine.stats().passed[PassReason::BadTcpChecksum.index()],
        4,
        "{:?}",
        engine.stats()
    );

    // A corrupted TCP checksum with a correct sum: caught, passed alone.
    let bad = ipoib(
        flow(false, 40005, 1, 1, 300, false)[0].corrupt(lro_core::testing::Corrupt::TcpChecksum),
    );
    let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::gro());
    let mut sink = Collect::default();
    let m = meta(LinkKind::Ipoib, Csum::Complete, &bad, 0);
    engine.push(bad.clone(), &m, &mut sink);
    engine.flush_all(&mut sink);
    assert_eq!(engine.stats().passed[PassReason::BadTcpChecksum.index()], 1);
    assert_eq!(sink.out[0].bytes, bad);
}

#[test]
fn frames_whose_reserved_bytes_differ_are_kept_apart() {
    // Linux GRO compares the whole hard header: frames differing only in the reserved field
    // are not merged, under either policy, so every segment carries its frames' own field and
    // (under `Gro`) re-segments into exactly them.
    for (v6, config) in [false, true]
        .into_iter()
        .flat_map(|v6| [(v6, Config::gro()), (v6, Config::lro())])
    {
        let mut frames: Vec<(Vec<u8>, Csum)> = flow(v6, 40006, 5, 6, 700, false)
            .into_iter()
            .map(|s| (ipoib(s), Csum::None))
            .collect();
        for f in &mut frames[2..4] {
            f.0[2..4].copy_from_slice(&[0x5a, 0x01]);
        }
        let (sink, stats) = run(&frames, LinkKind::Ipoib, config, 64);
        assert_eq!(
            sink.out.iter().map(|o| o.frames).collect::<Vec<_>>(),
            [2, 2, 2],
            "v6 {v6} {config:?}: {stats:?}"
        );
        for (seg, want) in sink.out.iter().zip([[0, 0], [0x5a, 0x01], [0, 0]]) {
            assert_eq!(seg.bytes[2..4], want);
            assert_eq!(
                seg.info.flow.map(|k| k.ipoib_reserved()),
                Some(u16::from_be_bytes(want))
            );
        }
        if config.policy == lro_core::Policy::Gro {
            let back = resegment_all(&sink.out);
            let orig: Vec<Vec<u8>> = frames.into_iter().map(|(f, _)| f).collect();
            assert_eq!(back, orig, "v6 {v6}: byte for byte");
        }
    }
}

#[test]
fn a_policy_change_keeps_the_reserved_field_apart() {
    // The identity does not depend on the policy: a flow held or remembered under one policy
    // and continued under the other never takes in frames of another reserved field.
    for (first, then) in [
        (Config::lro(), Config::gro()),
        (Config::gro(), Config::lro()),
    ] {
        let mut frames: Vec<Vec<u8>> = flow(false, 40008, 1, 6, 500, false)
            .into_iter()
            .map(ipoib)
            .collect();
        for f in &mut frames[..4] {
            f[3] = 5;
        }
        let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(first);
        let mut sink = Collect::default();
        for (i, f) in frames.iter().enumerate() {
            if i == 2 {
                engine.flush_all(&mut sink);
                engine.set_config(then);
            }
            engine.push(f.clone(), &RxMeta::ipoib(0), &mut sink);
        }
        engine.flush_all(&mut sink);
        let seen: Vec<(u16, u8)> = sink.out.iter().map(|o| (o.frames, o.bytes[3])).collect();
        assert_eq!(seen, [(2, 5), (2, 5), (2, 0)], "{first:?} -> {then:?}");
    }
}

#[test]
fn gro_flushes_the_held_flow_of_an_unreadable_frame_with_its_reserved_bytes() {
    // Under `Gro` the reserved field is part of the flow: a frame whose ports cannot be read
    // (TCP header cut short) still flushes the held segment of its addresses and reserved
    // field first, so that the flow's frames leave in order.
    let mut frames: Vec<(Vec<u8>, Csum)> = flow(false, 40007, 1, 3, 300, false)
        .into_iter()
        .map(|s| (ipoib(s), Csum::None))
        .collect();
    let mut cut = frames[2].0[..4 + 20 + 2].to_vec();
    // IPv4 total length: the cut datagram (a TCP header of two bytes).
    cut[4 + 2..4 + 4].copy_from_slice(&22u16.to_be_bytes());
    cut[4 + 10..4 + 12].copy_from_slice(&[0, 0]);
    let sum = !ones_complement_sum(&cut[4..24]);
    cut[4 + 10..4 + 12].copy_from_slice(&sum.to_be_bytes());
    frames[2] = (cut.clone(), Csum::None);
    for f in &mut frames {
        f.0[2..4].copy_from_slice(&[0x00, 0x07]);
    }
    let (sink, stats) = run(&frames, LinkKind::Ipoib, Config::gro(), 64);
    assert_eq!(stats.flushes[FlushReason::Unknown.index()], 1, "{stats:?}");
    assert_eq!(
        sink.out.iter().map(|o| o.frames).collect::<Vec<_>>(),
        [2, 1],
        "the held pair first, then the cut frame"
    );
    assert_eq!(sink.out[1].bytes[..2], cut[..2]);
}

/// A frame of the differential property: which flow, how much payload, flags, checksum.
#[derive(Debug, Clone)]
struct Step {
    flow: usize,
    len: usize,
    psh: bool,
    csum: Csum,
    bad: bool,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (
            0usize..3,
            prop_oneof![Just(0usize), 1usize..200, Just(1000usize)],
            prop::bool::weighted(0.1),
            prop_oneof![Just(Csum::None), Just(Csum::Verified), Just(Csum::Complete)],
            prop::bool::weighted(0.05),
        )
            .prop_map(|(flow, len, psh, csum, bad)| Step {
                flow,
                len,
                psh,
                // A NIC that says "verified" for a bad checksum is not a case: the engine
                // trusts it by definition.
                csum: if bad && csum == Csum::Verified {
                    Csum::None
                } else {
                    csum
                },
                bad,
            }),
        1..60,
    )
}

/// Builds both framings of a random interleaving of three flows (two IPv4, one IPv6), each
/// flow's sequence numbers consecutive, ACK numbers advancing on pure ACKs, timestamps on
/// the IPv6 flow.
fn build(steps: &[Step]) -> (Vec<Input>, Vec<Input>) {
    static PAYLOAD: [u8; 1000] = [0x42; 1000];
    let mut seq = [1u32, 5000, 90000];
    let mut ack = [1u32; 3];
    let mut eth = Vec::new();
    let mut ib = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let v6 = s.flow == 2;
        let base = if v6 {
            FrameSpec::ipv6_tcp(40100 + s.flow as u16, 443)
        } else {
            FrameSpec::ipv4_tcp(40100 + s.flow as u16, 443)
        };
        if s.len == 0 {
            ack[s.flow] += 100;
        }
        let mut spec = base
            .seq(seq[s.flow])
            .ack(ack[s.flow])
            .flags(TCP_ACK | if s.psh { TCP_PSH } else { 0 })
            .payload(&PAYLOAD[..s.len]);
        if v6 {
            spec = spec.timestamps(10 + i as u32, 5);
        }
        if s.bad {
            spec = spec.corrupt(lro_core::testing::Corrupt::TcpChecksum);
        }
        if let lro_core::testing::IpSpec::V4(ip) = &mut spec.ip {
            ip.id = i as u16;
        }
        seq[s.flow] += s.len as u32;
        eth.push((ethernet(spec), s.csum));
        ib.push((ipoib(spec), s.csum));
    }
    (eth, ib)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// IPoIB framing changes nothing but the link header: the same counters (prediction
    /// included), the same segments with the same bytes after the link header, the first
    /// frame's encapsulation header in front of each, and valid output.
    #[test]
    fn ipoib_coalesces_exactly_as_ethernet(
        steps in steps(),
        burst in 1usize..40,
        gro in any::<bool>(),
        prediction in any::<bool>(),
    ) {
        let config = if gro { Config::gro() } else { Config::lro() }
            .with_header_prediction(prediction);
        let (eth, ib) = build(&steps);
        let (e_out, e_stats) = run(&eth, LinkKind::Ethernet, config, burst);
        let (i_out, i_stats) = run(&ib, LinkKind::Ipoib, config, burst);
        prop_assert_eq!(&e_stats, &i_stats);
        prop_assert!(i_stats.is_conserved());
        prop_assert_eq!(e_out.released, i_out.released);
        prop_assert_eq!(e_out.out.len(), i_out.out.len());
        for (e, i) in e_out.out.iter().zip(&i_out.out) {
            prop_assert_eq!(&e.bytes[14..], &i.bytes[4..]);
            prop_assert_eq!(e.info.frames, i.info.frames);
            prop_assert_eq!(e.info.gso_size, i.info.gso_size);
            prop_assert_eq!(e.info.payload_len, i.info.payload_len);
            prop_assert_eq!(e.info.cause, i.info.cause);
            prop_assert_eq!(e.info.l3 - 14, i.info.l3 - 4);
            if let (Some(ek), Some(ik)) = (e.info.flow, i.info.flow) {
                prop_assert_eq!(ek.src_addr(), ik.src_addr());
                prop_assert_eq!(ek.dst_port(), ik.dst_port());
            }
            // The link header is an encapsulation header whose type matches the packet.
            let v = i.bytes[4] >> 4;
            let want: [u8; 2] = if v == 6 { [0x86, 0xdd] } else { [0x08, 0x00] };
            prop_assert_eq!(&i.bytes[..2], &want);
        }
        // Valid output: every TCP segment without a corrupted input parses with correct
        // lengths and checksums (a corrupted frame is passed alone, as received).
        let corrupted = steps.iter().any(|s| s.bad);
        for i in &i_out.out {
            if i.info.frames > 1 || !corrupted {
                check_ipoib_output(&i.bytes);
            }
        }
    }

    /// `Gro` over IPoIB frames whose reserved fields differ (a sender that does not zero
    /// them): every segment re-segments into exactly the frames it merged, so the outputs
    /// re-segmented are the inputs, byte for byte (as a multiset: flows interleave).
    #[test]
    fn gro_resegments_ipoib_with_any_reserved_bytes_into_the_inputs(
        steps in steps(),
        reserved in prop::collection::vec(0u8..3, 60),
        burst in 1usize..40,
        prediction in any::<bool>(),
    ) {
        let config = Config::gro().with_header_prediction(prediction);
        let (_, mut ib) = build(&steps);
        for (f, r) in ib.iter_mut().zip(&reserved) {
            f.0[3] = *r;
        }
        let (out, stats) = run(&ib, LinkKind::Ipoib, config, burst);
        prop_assert!(stats.is_conserved());
        prop_assert_eq!(out.released, 0);
        let mut back = resegment_all(&out.out);
        let mut inputs: Vec<Vec<u8>> = ib.into_iter().map(|(f, _)| f).collect();
        inputs.sort();
        back.sort();
        prop_assert_eq!(back, inputs);
    }

    /// Any bytes as an IPoIB frame: no panic, every frame back exactly once.
    #[test]
    fn arbitrary_bytes_never_panic(frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 1..20)) {
        let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
        let mut sink = Collect::default();
        for f in &frames {
            engine.push(f.clone(), &RxMeta::ipoib(0), &mut sink);
        }
        engine.flush_all(&mut sink);
        let out: usize = sink.out.iter().map(|o| usize::from(o.frames)).sum();
        prop_assert_eq!(out + sink.released, frames.len());
    }
}

/// Valid IPoIB frames of the three flows with header bytes flipped and frames cut short, under
/// both policies, every checksum state, with and without header prediction: no panic, every
/// frame back exactly once. Random bytes (above) rarely get past the first checks of the
/// parser; these reach the merge rules, which the run proves by merging some of them.
#[test]
fn mutated_ipoib_frames_never_panic_nor_lose_a_frame() {
    use prop::sample::Index;
    let merged = std::cell::Cell::new(0u64);
    let strategy = (
        steps(),
        prop::collection::vec((any::<Index>(), 0usize..96, 1u8..=255), 1..8),
        prop::collection::vec((any::<Index>(), 0usize..96), 0..3),
        1usize..40,
        any::<bool>(),
        any::<bool>(),
    );
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
    runner
        .run(&strategy, |(steps, flips, cuts, burst, gro, prediction)| {
            let config =
                if gro { Config::gro() } else { Config::lro() }.with_header_prediction(prediction);
            let (_, mut ib) = build(&steps);
            let n = ib.len();
            for (i, at, x) in &flips {
                if let Some(b) = ib[i.index(n)].0.get_mut(*at) {
                    *b ^= x;
                }
            }
            for (i, len) in &cuts {
                ib[i.index(n)].0.truncate(*len);
            }
            let (out, stats) = run(&ib, LinkKind::Ipoib, config, burst);
            prop_assert!(stats.is_conserved());
            let back: usize = out.out.iter().map(|o| usize::from(o.frames)).sum();
            prop_assert_eq!(back + out.released, n);
            merged.set(merged.get() + stats.frames_merged);
            Ok(())
        })
        .unwrap();
    assert!(merged.get() > 0, "no mutated case merged anything");
}
