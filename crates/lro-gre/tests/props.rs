//! Property tests of DESIGN.md's invariants for GRE-tunnelled traffic.
//!
//! Each case builds a few tunnelled flows (outer IPv4/IPv6, VLAN tags, raw IP or a stripped
//! tag, GRE with no flags, K, C, C+K, TEB with a key (NVGRE) or a checksum, S; inner IPv4 or
//! IPv6) some of which are *twins*: the same inner flow (addresses, ports, sequence numbers) in
//! a tunnel that differs in one thing only (key, outer source, outer destination, flags, outer
//! flow label or tag), so that merging across tunnels would go unnoticed by anything but the
//! identity check. Frames come interleaved with full and short segments, pure and duplicate
//! ACKs, PSH, bad GRE and TCP checksums, outer TTL changes and ID jumps, every checksum state
//! a NIC reports (none, verified, CHECKSUM_COMPLETE right and wrong), and flush points.
//!
//! `common::check` (`lro_testkit::check::check`, the harness shared with lro-core and the fuzz
//! targets) then requires conservation, per-flow order, per-flow bytes, isolation, no
//! checksum laundering (GRE, outer and inner IPv4, TCP), valid output (outer length and
//! checksum, GRE checksum, inner lengths and checksums) and, under `Gro`, that
//! `gso::resegment_with::<Gre>` gives back the original frames byte for byte. Header
//! prediction must decide as the general path. Counters prove the properties were not vacuous.
//!
//! Case counts default to 64 per property (honours `PROPTEST_CASES`).

mod common;

use std::cell::Cell;

use common::{check, run, Input, Op, Out, Recorder};
use lro_core::testing::{
    EthernetSpec, FrameSpec, IpSpec, LinkSpec, TCP_ACK, TCP_PSH, TPID_8021AD, TPID_8021Q,
};
use lro_core::{Config, OutChecksum, Policy, RxChecksum, RxMeta, Sizes};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::GreEngine;
use lro_testkit::check::without_prediction;
use lro_testkit::frame::wrapped;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

/// The shape of one tunnelled flow.
#[derive(Debug, Clone, Copy)]
struct TunSeed {
    outer_v6: bool,
    /// 0 Ethernet, 1 one 802.1Q tag, 2 QinQ, 3 raw IP, 4 a NIC-stripped tag.
    link: u8,
    /// 0 none, 1 K, 2 C, 3 C+K, 4 TEB+K (NVGRE), 5 TEB+C, 6 S, 7 C+K again (common).
    gre: u8,
    inner_v6: bool,
    /// Twin of the previous flow: 0..=1 none, 2 other key, 3 other outer source, 4 other outer
    /// destination, 5 other flags (C toggled, or S set), 6 other outer flow label or tag, 7 the
    /// same tunnel (a copy: one flow).
    twin: u8,
    key: u32,
    isn: u32,
    /// MSS: 0 100, 1 536, else 1448.
    mss: u8,
}

fn tun_seed() -> impl Strategy<Value = TunSeed> {
    // Weighted towards the layouts header prediction has copies of its path for (untagged
    // Ethernet or a stripped tag, outer IPv4, GRE without options or with a key, inner IPv4):
    // about one flow in six, so that a case with twins of them is common.
    (
        prop::bool::weighted(0.3),
        prop_oneof![2 => Just(0u8), 3 => 0u8..5],
        prop_oneof![1 => Just(0u8), 1 => Just(1u8), 3 => 0u8..8],
        prop::bool::weighted(0.3),
        0u8..8,
        any::<u32>(),
        any::<u32>(),
        0u8..4,
    )
        .prop_map(
            |(outer_v6, link, gre, inner_v6, twin, key, isn, mss)| TunSeed {
                outer_v6,
                link,
                gre,
                inner_v6,
                twin,
                key,
                isn,
                mss,
            },
        )
}

/// One step: which flow, what kind of frame, a parameter, the NIC's checksum report.
#[derive(Debug, Clone, Copy)]
struct Step {
    flow: u8,
    kind: u8,
    a: u16,
    nic: u8,
}

fn step() -> impl Strategy<Value = Step> {
    (any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>()).prop_map(|(flow, kind, a, nic)| Step {
        flow,
        kind,
        a,
        nic,
    })
}

#[derive(Debug, Clone, Copy)]
struct Knobs {
    gro: bool,
    partial: bool,
    verify: bool,
    small_table: bool,
    prediction: bool,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.2),
        any::<bool>(),
    )
        .prop_map(|(gro, partial, verify, small_table, prediction)| Knobs {
            gro,
            partial,
            verify,
            small_table,
            prediction,
        })
}

/// A flow's tunnel, inner template and outer IP ID. Twin flows share one [`Stream`] (the inner
/// connection's sequence space), so a twin's frame often continues exactly where the other
/// tunnel's last frame ended: merging across tunnels would go unnoticed by everything but the
/// identity check.
#[derive(Clone, Copy)]
struct Flow {
    gre: GreSpec,
    inner: FrameSpec<'static>,
    meta: RxMeta,
    mss: usize,
    outer_id: u16,
    stream: usize,
}

/// The inner connection: sequence and ACK numbers, the inner IPv4 ID (fixed for streams that
/// twins share, as Linux merges fixed IDs, else incrementing).
#[derive(Clone, Copy)]
struct Stream {
    seq: u32,
    ack: u32,
    inner_id: u16,
    fixed_id: bool,
}

fn make_flows(seeds: &[TunSeed]) -> (Vec<Flow>, Vec<Stream>) {
    let mut flows: Vec<Flow> = Vec::new();
    let mut streams: Vec<Stream> = Vec::new();
    for (i, s) in seeds.iter().enumerate() {
        let twin = if i == 0 { 0 } else { s.twin };
        let mut f = if twin >= 2 {
            let mut f = flows[i - 1];
            streams[f.stream].fixed_id = true;
            f.outer_id = (s.isn >> 3) as u16;
            match twin {
                2 => f.gre = f.gre.key(f.gre.key.wrapping_add(1)),
                3 | 4 => {
                    let at = if twin == 3 { 0 } else { 1 };
                    match &mut f.gre.ip {
                        IpSpec::V4(v4) => [&mut v4.src, &mut v4.dst][at][3] ^= 0x40,
                        IpSpec::V6(v6) => [&mut v6.src, &mut v6.dst][at][15] ^= 0x40,
                    }
                }
                // Another tunnel identity: C toggled, or the sequence flag, whose frames are
                // never merged and must not overtake their inner connection's held segment.
                5 if s.key & 4 == 0 => f.gre.flags_version ^= lro_gre::wire::flags::C,
                5 => f.gre = f.gre.sequence(s.isn),
                6 => match (&mut f.gre.ip, &mut f.gre.link) {
                    (IpSpec::V6(v6), _) => v6.flow_label ^= 0x5,
                    (_, LinkSpec::Ethernet(eth)) if eth.vlans[0].is_some() => {
                        if let Some(v) = &mut eth.vlans[0] {
                            v.tci ^= 0x9;
                        }
                    }
                    _ => f.meta.vlan_stripped = Some(f.meta.vlan_stripped.unwrap_or(0) ^ 0x3),
                },
                _ => {}
            }
            f
        } else {
            let mut gre = if s.outer_v6 {
                GreSpec::ipv6()
            } else {
                GreSpec::ipv4()
            };
            gre = match s.gre {
                0 => gre,
                1 => gre.key(s.key),
                2 => gre.checksum(),
                4 => gre.key(s.key).teb(),
                5 => gre.checksum().teb(),
                6 => gre.sequence(s.key),
                _ => gre.checksum().key(s.key),
            };
            let mut meta = RxMeta::ethernet(0);
            match s.link {
                1 => gre = gre.vlan(TPID_8021Q, 10 + i as u16),
                2 => gre = gre.vlan(TPID_8021AD, 20).vlan(TPID_8021Q, 30),
                3 => {
                    gre = gre.raw_ip();
                    meta = RxMeta::raw_ip(0);
                }
                4 => meta = meta.with_vlan_stripped(40),
                _ => {}
            }
            if let IpSpec::V6(v6) = &mut gre.ip {
                v6.flow_label = if s.key & 1 == 0 { 0 } else { 0x12345 };
            }
            let port = 40000 + i as u16;
            let mut inner = if s.inner_v6 {
                FrameSpec::ipv6_tcp(port, 5201)
            } else {
                FrameSpec::ipv4_tcp(port, 5201)
            };
            if let LinkSpec::Ethernet(eth) = &mut inner.link {
                *eth = EthernetSpec {
                    src: [0x02, 0, 0, 0, 1, i as u8],
                    ..EthernetSpec::default()
                };
            }
            streams.push(Stream {
                seq: s.isn,
                ack: s.isn.rotate_left(9),
                inner_id: (s.isn >> 17) as u16,
                fixed_id: s.key & 2 != 0,
            });
            Flow {
                gre,
                inner,
                meta,
                mss: match s.mss {
                    0 => 100,
                    1 => 536,
                    _ => 1448,
                },
                outer_id: (s.isn >> 3) as u16,
                stream: streams.len() - 1,
            }
        };
        if twin == 7 {
            // A copy of the same tunnel and flow: its frames are the previous flow's.
            f = flows[i - 1];
        }
        flows.push(f);
    }
    (flows, streams)
}

/// Builds the inputs and the operations of a case, and for each input whether its flow has a
/// twin (another flow, in another tunnel, of the same inner connection).
fn build(knobs: &Knobs, seeds: &[TunSeed], steps: &[Step]) -> (Vec<Input>, Vec<Op>, Vec<bool>) {
    let (mut flows, mut streams) = make_flows(seeds);
    // Flows per inner connection (a copy of the previous flow, twin 7, is that flow).
    let mut flows_of_stream = vec![0usize; streams.len()];
    for (i, f) in flows.iter().enumerate() {
        if i == 0 || seeds[i].twin != 7 {
            flows_of_stream[f.stream] += 1;
        }
    }
    let mut twinned = Vec::new();
    let mut inputs = Vec::new();
    let mut ops = Vec::new();
    for s in steps {
        let fi = usize::from(s.flow) % flows.len();
        // A copy of the previous flow shares its state from the start: it is one flow.
        let fi = if fi > 0 && seeds[fi].twin == 7 {
            fi - 1
        } else {
            fi
        };
        let f = &mut flows[fi];
        let st = &mut streams[f.stream];
        let kind = s.kind % 20;
        if kind == 19 {
            ops.push(Op::FlushAll);
            continue;
        }
        let len = match kind {
            7 => usize::from(s.a) % f.mss,
            8 | 9 => 0,
            _ => f.mss,
        };
        if kind == 8 {
            st.ack = st.ack.wrapping_add(u32::from(s.a % 3000) + 1);
        }
        if kind == 13 {
            match &mut f.gre.ip {
                IpSpec::V4(v4) => v4.ttl = v4.ttl.wrapping_sub(1),
                IpSpec::V6(v6) => v6.hop_limit = v6.hop_limit.wrapping_sub(1),
            }
        }
        if kind == 14 {
            f.outer_id = f.outer_id.wrapping_add(s.a | 2);
        }
        let seq = if kind == 15 {
            // A retransmission of earlier bytes.
            st.seq.wrapping_sub(u32::from(s.a % 4000) + 1)
        } else {
            st.seq
        };
        let payload: Vec<u8> = (0..len)
            .map(|k| (k as u32).wrapping_mul(31).wrapping_add(seq) as u8)
            .collect();
        let mut spec = f.inner;
        spec.tcp.seq = seq;
        spec.tcp.ack = st.ack;
        spec.tcp.flags = if kind == 10 {
            TCP_ACK | TCP_PSH
        } else {
            TCP_ACK
        };
        spec.tcp.push_timestamps(7, 9);
        spec.payload = &payload;
        if kind == 12 {
            spec.corrupt = lro_core::testing::Corrupt::TcpChecksum;
        }
        if let IpSpec::V4(v4) = &mut spec.ip {
            v4.id = st.inner_id;
        }
        let mut inner = vec![0u8; spec.len()];
        spec.write(&mut inner).expect("sized");
        let mut gre = f.gre.ip_id(f.outer_id);
        gre.corrupt_checksum = kind == 11;
        let frame = if gre.teb {
            InnerFrame::Ethernet(&inner)
        } else {
            InnerFrame::Ip(&inner[spec.link_len()..])
        };
        let bytes = wrapped(&gre, frame);
        if kind != 15 {
            st.seq = st.seq.wrapping_add(len as u32);
        }
        f.outer_id = f.outer_id.wrapping_add(1);
        if !st.fixed_id {
            st.inner_id = st.inner_id.wrapping_add(1);
        }
        let meta = f.meta;
        let probe = Input::new(bytes.clone(), meta);
        let good = common::read(&probe.bytes, &probe.meta)
            .is_some_and(|t| common::checksums_ok(&probe.bytes, &t));
        let meta = match s.nic % 4 {
            1 if good => meta.with_checksum(RxChecksum::Verified),
            2 => meta.with_checksum(RxChecksum::Complete(common::complete(&bytes, &meta))),
            3 => {
                let c = common::complete(&bytes, &meta);
                meta.with_checksum(RxChecksum::Complete(c ^ 0x0404))
            }
            _ => meta,
        };
        let mut input = Input::new(bytes, meta);
        if meta.checksum == RxChecksum::None && !knobs.verify {
            input.trusted = false;
        }
        ops.push(Op::Push(inputs.len()));
        inputs.push(input);
        twinned.push(flows_of_stream[f.stream] > 1);
    }
    (inputs, ops, twinned)
}

fn engine_config(k: &Knobs) -> Config {
    let c = if k.gro { Config::gro() } else { Config::lro() };
    let c = c
        .with_verify_checksums(k.verify)
        .with_header_prediction(k.prediction);
    if k.partial {
        c.with_checksum_out(OutChecksum::Partial)
    } else {
        c
    }
}

/// Runs a case on an engine of the knobs' table size; returns the record and the counters.
fn run_case(
    k: &Knobs,
    config: Config,
    inputs: &[Input],
    ops: &[Op],
) -> (Recorder, lro_core::Stats) {
    if k.small_table {
        let mut e: Box<GreEngine<common::Tagged, Sizes<2, 4>>> = Box::new(GreEngine::new(config));
        let (rec, _) = run(&mut *e, inputs, ops);
        (rec, e.stats().clone())
    } else {
        let mut e: Box<GreEngine<common::Tagged, Sizes<16, 64>>> = Box::new(GreEngine::new(config));
        let (rec, _) = run(&mut *e, inputs, ops);
        (rec, e.stats().clone())
    }
}

type Case = (Knobs, Vec<TunSeed>, Vec<Step>);

fn case() -> impl Strategy<Value = Case> {
    (
        knobs(),
        prop::collection::vec(tun_seed(), 1..6),
        prop::collection::vec(step(), 1..120),
    )
}

/// Counts of what the properties exercised, so none of them passes vacuously.
#[derive(Default)]
struct Seen {
    merged: Cell<u64>,
    resegmented: Cell<u64>,
    acks: Cell<u64>,
    bad_gre: Cell<u64>,
    twins_merged: Cell<u64>,
}

fn check_case(case: &Case, seen: &Seen) -> Result<(), TestCaseError> {
    let (knobs, seeds, steps) = case;
    let (inputs, ops, twinned) = build(knobs, seeds, steps);
    let config = engine_config(knobs);
    let (rec, stats) = run_case(knobs, config, &inputs, &ops);
    check(&inputs, &ops, &config, &rec).map_err(TestCaseError::fail)?;
    // Every tunnelled frame counted: the frames the reader reads as GRE TCP.
    let gre_frames = inputs
        .iter()
        .filter(|i| common::read(&i.bytes, &i.meta).is_some())
        .count() as u64;
    prop_assert_eq!(stats.tunnel.frames_in, gre_frames);
    prop_assert_eq!(stats.tunnel.frames_merged, stats.frames_merged);
    prop_assert_eq!(stats.tunnel.acks_merged, stats.acks_merged);
    let merged = common::merged_segments(&rec) as u64;
    seen.merged.set(seen.merged.get() + merged);
    if config.policy == Policy::Gro {
        seen.resegmented.set(seen.resegmented.get() + merged);
    }
    seen.acks.set(seen.acks.get() + stats.acks_merged);
    seen.bad_gre.set(
        seen.bad_gre.get() + stats.tunnel.passed[lro_core::PassReason::BadEncapChecksum.index()],
    );
    // Merged segments of flows that have a twin in another tunnel (the checker above proved
    // that no segment mixed the two).
    let twins_merged = rec
        .out
        .iter()
        .filter(|o| matches!(o, Out::Seg { ids, .. } if ids.len() > 1 && twinned[ids[0]]))
        .count() as u64;
    seen.twins_merged
        .set(seen.twins_merged.get() + twins_merged);
    // Header prediction decides as the general path: the same case with it switched.
    let other = config.with_header_prediction(!config.header_prediction);
    let (rec2, stats2) = run_case(knobs, other, &inputs, &ops);
    prop_assert_eq!(&rec.out, &rec2.out, "prediction on vs off: output differs");
    prop_assert_eq!(
        without_prediction(&stats),
        without_prediction(&stats2),
        "prediction on vs off: counters differ"
    );
    Ok(())
}

/// Every invariant on mixed tunnelled traffic, both policies, every NIC checksum state.
#[test]
fn invariants_hold_through_gre() {
    let seen = Seen::default();
    let mut runner = TestRunner::new(config());
    runner.run(&case(), |c| check_case(&c, &seen)).unwrap();
    assert!(seen.merged.get() > 0, "no case merged anything");
    assert!(
        seen.resegmented.get() > 0,
        "no Gro segment was re-segmented"
    );
    assert!(seen.bad_gre.get() > 0, "no bad GRE checksum was caught");
    assert!(
        seen.twins_merged.get() > 0,
        "no case with twin tunnels merged anything"
    );
}

/// Clean runs of data in twin tunnels under `Gro`: many merges, every segment re-segmented
/// byte for byte, no two tunnels mixed.
#[test]
fn gro_resegments_and_isolates_twin_tunnels() {
    let seen = Seen::default();
    let strategy = (
        prop::collection::vec(tun_seed(), 2..6),
        prop::collection::vec((any::<u8>(), 0u8..7, any::<u8>()), 1..100),
        any::<bool>(),
    )
        .prop_map(|(mut seeds, raw, partial)| {
            for (i, s) in seeds.iter_mut().enumerate().skip(1) {
                s.twin = 2 + (s.twin + i as u8) % 5;
            }
            let steps = raw
                .into_iter()
                .map(|(flow, kind, nic)| Step {
                    flow,
                    kind,
                    a: 0,
                    nic: nic % 3,
                })
                .collect();
            let knobs = Knobs {
                gro: true,
                partial,
                verify: true,
                small_table: false,
                prediction: true,
            };
            (knobs, seeds, steps)
        });
    let mut runner = TestRunner::new(config());
    runner.run(&strategy, |c| check_case(&c, &seen)).unwrap();
    assert!(seen.resegmented.get() > 0, "nothing re-segmented");
    assert!(
        seen.twins_merged.get() > 0,
        "twins never merged within their tunnel"
    );
}

/// `Lro` pure-ACK merging inside the tunnel: runs of advancing ACKs, duplicate ACKs and data;
/// superseded ACKs are released (never delivered), duplicates never merged.
#[test]
fn lro_merges_pure_acks_inside_the_tunnel() {
    let seen = Seen::default();
    let strategy = (
        prop::collection::vec(tun_seed(), 1..4),
        prop::collection::vec(
            (
                any::<u8>(),
                prop::sample::select(vec![0u8, 8, 8, 8, 9, 7]),
                any::<u16>(),
                any::<u8>(),
            ),
            1..100,
        ),
    )
        .prop_map(|(seeds, raw)| {
            let steps = raw
                .into_iter()
                .map(|(flow, kind, a, nic)| Step {
                    flow,
                    kind,
                    a,
                    nic: nic % 3,
                })
                .collect();
            let knobs = Knobs {
                gro: false,
                partial: false,
                verify: true,
                small_table: false,
                prediction: true,
            };
            (knobs, seeds, steps)
        });
    let mut runner = TestRunner::new(config());
    runner
        .run(&strategy, |c| {
            check_case(&c, &seen)?;
            let (inputs, ops, _) = build(&c.0, &c.1, &c.2);
            let (rec, stats) = run_case(&c.0, engine_config(&c.0), &inputs, &ops);
            let released = rec.out.iter().filter(|o| matches!(o, Out::Rel(_))).count() as u64;
            prop_assert_eq!(released, stats.tunnel.acks_merged);
            Ok(())
        })
        .unwrap();
    assert!(seen.acks.get() > 0, "no pure ACK was merged in any case");
}
