//! Real kernel TCP captures (`data/small.pcap.xz`, `data/default.pcap.xz`, made from the
//! Linux TCP stack by `scripts/make-capture.sh`) wrapped in GRE every way (no flags, K, C,
//! C+K, S, routing, version 1; outer IPv4 and IPv6; outer VLAN tags and raw IP; TEB with and
//! without a key), then coalesced: every invariant holds, the tunnel changes nothing about
//! the aggregation of the mergeable variants, and the never-merged ones pass alone. Then the
//! GRE captures of the tcpdump test corpus (`../shared/corpus/tcpdump-tests`, beside the
//! checkout), when present: no panic, every frame back once.

mod common;

use std::path::PathBuf;

use common::{check, pushes, run, Input, Out};
use lro_core::{Config, PassReason, RxChecksum, RxMeta, Sizes, Stats};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::wire::flags;
use lro_gre::GreEngine;

/// 4096 ACK records: the ACK memory is direct-mapped by the flow hash, which differs with and
/// without a tunnel, so with few records a collision could make a pure ACK `unknown_ack` in
/// one run and not in the other; with these few flows in 4096 records none collide.
type E = GreEngine<common::Tagged, Sizes<64, 64, 4096>>;

/// The variants: a name, the forward direction's outer layers, whether they may merge.
fn variants() -> Vec<(&'static str, GreSpec, bool)> {
    let mut routing = GreSpec::ipv4();
    routing.flags_version = flags::R;
    let mut v1 = GreSpec::ipv4().key(0x0001_0002);
    v1.flags_version |= 1;
    vec![
        ("plain GRE", GreSpec::ipv4(), true),
        ("K", GreSpec::ipv4().key(0x0102_0304), true),
        ("C", GreSpec::ipv4().checksum(), true),
        ("C+K", GreSpec::ipv4().checksum().key(42), true),
        ("C+K over IPv6", GreSpec::ipv6().checksum().key(42), true),
        (
            "K over IPv6, QinQ",
            GreSpec::ipv6().key(5).vlan(0x88a8, 100).vlan(0x8100, 200),
            true,
        ),
        (
            "C behind a VLAN tag",
            GreSpec::ipv4().checksum().vlan(0x8100, 7),
            true,
        ),
        (
            "C+K, raw IP",
            GreSpec::ipv4().checksum().key(1).raw_ip(),
            true,
        ),
        ("TEB", GreSpec::ipv4().teb(), true),
        ("TEB C", GreSpec::ipv6().checksum().teb(), true),
        (
            "NVGRE (TEB K)",
            GreSpec::ipv4().key(0x00c0_ff01).teb(),
            true,
        ),
        ("S", GreSpec::ipv4().sequence(0), false),
        (
            "C+K+S",
            GreSpec::ipv4().checksum().key(42).sequence(0),
            false,
        ),
        ("routing", routing, false),
        ("version 1", v1, false),
    ]
}

fn metas(spec: &GreSpec) -> RxMeta {
    match spec.link {
        lro_core::testing::LinkSpec::RawIp => RxMeta::raw_ip(0),
        _ => RxMeta::ethernet(0),
    }
}

/// The capture's frames wrapped by `tunnel` (frames that are not IP stay as they are), with
/// the NIC's checksum state `nic` (0 none, 1 verified, 2 CHECKSUM_COMPLETE); and how many were
/// wrapped.
fn wrap_all(frames: &[(u32, Vec<u8>)], mut tunnel: Tunnel, nic: u8) -> (Vec<Input>, u64) {
    let meta = metas(&tunnel.spec);
    let mut wrapped = 0;
    let inputs = frames
        .iter()
        .map(|(_, f)| {
            let inner = InnerFrame::Ethernet(f);
            let (bytes, m) = match tunnel.spec.wrapped_len(inner) {
                Ok(n) => {
                    let mut b = vec![0u8; n];
                    tunnel.wrap(inner, &mut b).expect("sized");
                    wrapped += 1;
                    (b, meta)
                }
                Err(_) => (f.clone(), RxMeta::ethernet(0)),
            };
            let m = match nic {
                1 => m.with_checksum(RxChecksum::Verified),
                2 => m.with_checksum(RxChecksum::Complete(common::complete(&bytes, &m))),
                _ => m,
            };
            Input::new(bytes, m)
        })
        .collect();
    (inputs, wrapped)
}

fn plain(frames: &[(u32, Vec<u8>)]) -> Vec<Input> {
    frames
        .iter()
        .map(|(_, f)| Input::new(f.clone(), RxMeta::ethernet(0)))
        .collect()
}

/// Runs inputs in bursts of 64 (a driver's poll).
fn go(config: Config, inputs: &[Input]) -> (common::Recorder, Stats) {
    let mut ops = Vec::new();
    for (i, op) in pushes(inputs.len()).into_iter().enumerate() {
        ops.push(op);
        if i % 64 == 63 {
            ops.push(common::Op::FlushAll);
        }
    }
    let mut e: Box<E> = Box::new(GreEngine::new(config));
    let (rec, _) = run(&mut *e, inputs, &ops);
    if inputs
        .iter()
        .any(|i| common::read(&i.bytes, &i.meta).is_some())
    {
        check(inputs, &ops, &config, &rec).unwrap_or_else(|e| panic!("{e}"));
    }
    (rec, e.stats().clone())
}

#[test]
fn kernel_captures_wrapped_every_way() {
    for capture in ["small.pcap.xz", "default.pcap.xz"] {
        let frames = lro_testkit::capture::committed(capture);
        let tcp = plain(&frames);
        for config in [Config::gro(), Config::lro()] {
            for (name, spec, mergeable) in variants() {
                // The plain capture through the same engine is what the tunnel must not
                // change, but for one thing: the 64 KB limit counts from the outer IP header,
                // so a tunnelled segment reaches it that many bytes sooner.
                let overhead =
                    spec.ip.header_len() + spec.gre_len() + if spec.teb { 14 } else { 0 };
                let limit = config.max_ip_len - overhead as u16;
                let (_, base) = go(config.with_max_ip_len(limit), &tcp);
                assert!(base.frames_merged > 0);
                // Outer IDs that follow the inner ones: the outer header never stops a merge
                // the inner one allows, so the aggregation must be the plain capture's.
                let nic = (name.len() % 3) as u8;
                let (inputs, wrapped) = wrap_all(&frames, Tunnel::new(spec, OuterId::Inner), nic);
                assert!(wrapped > 0);
                let (rec, s) = go(config, &inputs);
                assert_eq!(s.frames_in, base.frames_in, "{capture} {name}");
                if mergeable {
                    assert_eq!(s.tunnel.frames_in, wrapped, "{capture} {name}");
                    assert_eq!(
                        (s.segments, s.frames_merged, s.acks_merged),
                        (base.segments, base.frames_merged, base.acks_merged),
                        "{capture} {name} {:?}: the tunnel changed the aggregation",
                        config.policy
                    );
                    assert_eq!(s.tunnel.frames_merged, s.frames_merged, "{capture} {name}");
                } else {
                    assert_eq!(s.frames_merged + s.acks_merged, 0, "{capture} {name}");
                    assert_eq!(
                        s.passed[PassReason::Encap.index()],
                        wrapped,
                        "{capture} {name}"
                    );
                    assert_eq!(s.tunnel.passed[PassReason::Encap.index()], wrapped);
                    assert!(rec
                        .out
                        .iter()
                        .all(|o| matches!(o, Out::Seg { ids, .. } if ids.len() == 1)));
                }
            }
        }
    }
}

/// Header prediction covers the longest tunnel headers: the IPv6 flows of the capture inside
/// IPv6 GRE with a checksum and a key (138 header bytes) and inside gretap over IPv6 (148),
/// which are compared out of line. Every frame the plain capture predicts is predicted in the
/// tunnel too, and prediction changes nothing in the output or the other counters.
#[test]
fn long_tunnel_headers_are_predicted() {
    let frames = lro_testkit::capture::committed("default.pcap.xz");
    for config in [Config::gro(), Config::lro()] {
        let (_, base) = go(config, &plain(&frames));
        assert!(base.predicted > 0);
        for spec in [
            GreSpec::ipv6().checksum().key(42),
            GreSpec::ipv6().checksum().teb(),
        ] {
            let (inputs, _) = wrap_all(&frames, Tunnel::new(spec, OuterId::Inner), 1);
            let (rec, s) = go(config, &inputs);
            assert_eq!(s.predicted, base.predicted, "{:?} {spec:?}", config.policy);
            let (rec2, mut s2) = go(config.with_header_prediction(false), &inputs);
            assert_eq!(s2.predicted, 0);
            assert!(rec.out == rec2.out, "prediction changed the output");
            s2.predicted = s.predicted;
            assert_eq!(s, s2);
        }
    }
}

/// Outer IDs numbered per tunnel direction, as Linux numbers them: the inner flows sharing a
/// tunnel share the counter. Under `Lro` (no ID rule) the aggregation is the plain capture's;
/// under `Gro` the outer ID rule (Linux 6.18) splits a segment wherever another flow's frame
/// took an ID in between, and every invariant still holds.
#[test]
fn outer_ids_per_tunnel() {
    let frames = lro_testkit::capture::committed("small.pcap.xz");
    let tcp = plain(&frames);
    let (_, base) = go(Config::lro(), &tcp);
    let (inputs, _) = wrap_all(
        &frames,
        Tunnel::new(GreSpec::ipv4().checksum().key(3), OuterId::Tunnel),
        2,
    );
    let (_, s) = go(Config::lro(), &inputs);
    assert_eq!(s.segments, base.segments);
    let (_, gro_base) = go(Config::gro(), &tcp);
    let (_, gro) = go(Config::gro(), &inputs);
    assert!(gro.segments >= gro_base.segments);
    println!(
        "small.pcap.xz, outer IDs per tunnel: Gro {} frames -> {} (plain {}), Lro {} (plain {})",
        gro.frames_in, gro.segments, gro_base.segments, s.segments, base.segments
    );
}

fn tcpdump_tests() -> PathBuf {
    std::env::var_os("LRO_TCPDUMP_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::workspace().join("../shared/corpus/tcpdump-tests"))
}

/// Every frame of the corpus's GRE captures through a GRE engine, as Ethernet or raw IP per the
/// link type, under both policies and every checksum state: no panic, every frame back once,
/// counters conserved; under software and CHECKSUM_COMPLETE verification the full invariant
/// check. Then every other capture of the corpus through it too (hostile bytes: conservation
/// only).
#[test]
fn tcpdump_gre_captures() {
    let dir = tcpdump_tests();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "skipped: {} is absent (the project's shared data beside the checkout; or set LRO_TCPDUMP_TESTS)",
            dir.display()
        );
        return;
    };
    let mut names: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    names.sort();
    let is_gre = |p: &PathBuf| {
        let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        n.starts_with("various_gre")
            || n.starts_with("gre-heapoverflow")
            || n.starts_with("erspan-")
            || n.starts_with("wccp_redirect_gre")
    };
    let (mut gre_files, mut gre_frames, mut tunnel_frames, mut other_frames) = (0, 0, 0u64, 0);
    for path in &names {
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Some(packets) = lro_testkit::capture::read(&data) else {
            continue;
        };
        let gre = is_gre(path);
        let frames: Vec<(RxMeta, Vec<u8>)> = packets
            .iter()
            .filter_map(|(link, f)| common::link_of(*link, f))
            .collect();
        if frames.is_empty() {
            continue;
        }
        let nics: &[u8] = if gre { &[0, 1, 2] } else { &[2] };
        for config in [Config::gro(), Config::lro()] {
            for &nic in nics {
                let inputs: Vec<Input> = frames
                    .iter()
                    .map(|(m, b)| {
                        let m = match nic {
                            1 => m.with_checksum(RxChecksum::Verified),
                            2 => m.with_checksum(RxChecksum::Complete(common::complete(b, m))),
                            _ => *m,
                        };
                        Input::new(b.clone(), m)
                    })
                    .collect();
                let ops = pushes(inputs.len());
                let mut e: Box<E> = Box::new(GreEngine::new(config));
                let (rec, _) = run(&mut *e, &inputs, &ops);
                let back: usize = rec
                    .out
                    .iter()
                    .map(|o| match o {
                        Out::Seg { ids, .. } => ids.len(),
                        Out::Rel(_) => 1,
                    })
                    .sum();
                assert_eq!(back, inputs.len(), "{}", path.display());
                assert_eq!(e.stats().frames_in, inputs.len() as u64);
                if gre && nic != 1 {
                    check(&inputs, &ops, &config, &rec)
                        .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
                }
                if gre && nic == 0 && config.policy == lro_core::Policy::Lro {
                    tunnel_frames += e.stats().tunnel.frames_in;
                }
            }
        }
        if gre {
            gre_files += 1;
            gre_frames += frames.len();
        } else {
            other_frames += frames.len();
        }
    }
    println!(
        "{gre_files} GRE captures ({gre_frames} frames, {tunnel_frames} of them GRE over IP as the engine counts them), {other_frames} frames of the other captures"
    );
    assert!(
        gre_files >= 10,
        "the corpus's GRE captures are missing from {}",
        dir.display()
    );
    assert!(
        tunnel_frames > 0,
        "no frame of the GRE captures was seen as GRE"
    );
}
