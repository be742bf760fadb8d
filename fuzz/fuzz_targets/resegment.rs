//! `Gro` round trips: runs of valid frames of one or two flows are coalesced under
//! `Policy::Gro`, every delivered segment is split again with `gso::resegment`, and the pieces
//! must be the original frames byte for byte (DESIGN.md invariant 8). Also `resegment` on
//! arbitrary bytes: never panics, and what it emits is valid (lengths, checksums, sequence
//! numbers, the payload split in order).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use lro_core::testing::{FrameSpec, IpSpec, Ipv6Ext, Ipv6ExtKind, TCP_ACK, TCP_PSH, TPID_8021Q};
use lro_core::{gso, Config, Engine, OutChecksum, RxChecksum, RxMeta, Sizes};
use lro_fuzz::frame::{Out, Recorder, Tagged};
use lro_fuzz::oracle;

#[derive(Debug, Arbitrary)]
struct Flow {
    v6: bool,
    /// 0 Ethernet, 1 VLAN, 2 raw IP, 3 stripped tag.
    link: u8,
    /// IPv6 Hop-by-Hop + Destination options.
    ext: bool,
    /// Options: 0 none, 1 timestamps, 2 SACK (identical on every frame).
    opts: u8,
    fixed_id: bool,
    mss: u16,
    isn: u32,
    ip_id: u16,
    ack: u32,
    window: u16,
    tos: u8,
    /// Payload lengths: 0 the MSS, else `len % mss` (a short frame ends a segment).
    lens: Vec<(u8, u16)>,
    /// PSH on the last frame.
    psh: bool,
}

#[derive(Debug, Arbitrary)]
struct Case {
    flows: [Flow; 2],
    /// Interleaving: bit i picks the flow of frame i.
    mix: u64,
    /// 0 None (software verification), 1 Verified, 2 Complete.
    csum: u8,
    /// A direct `resegment` of arbitrary bytes.
    raw: Vec<u8>,
    raw_ip: bool,
    gso: u16,
    fixed: bool,
}

fn frames(f: &Flow, salt: u8) -> Vec<(Vec<u8>, RxMeta)> {
    let mss = usize::from(f.mss % 9000).max(1);
    let mut spec = if f.v6 {
        FrameSpec::ipv6_tcp(1000 + u16::from(salt), 80)
    } else {
        FrameSpec::ipv4_tcp(1000 + u16::from(salt), 80)
    };
    let mut meta = RxMeta::ethernet(0);
    match f.link % 4 {
        1 => spec = spec.vlan(TPID_8021Q, 5),
        2 => {
            spec = spec.raw_ip();
            meta = RxMeta::raw_ip(0);
        }
        3 => meta = meta.with_vlan_stripped(9),
        _ => {}
    }
    match &mut spec.ip {
        IpSpec::V4(ip) => {
            ip.tos = f.tos;
        }
        IpSpec::V6(ip) => {
            ip.traffic_class = f.tos;
            if f.ext {
                ip.ext[0] = Some(Ipv6Ext::new(Ipv6ExtKind::HopByHop, &[1, 4, 0, 0, 0, 0]));
                ip.ext[1] = Some(Ipv6Ext::new(
                    Ipv6ExtKind::DestinationOptions,
                    &[1, 4, 0, 0, 0, 0],
                ));
            }
        }
    }
    match f.opts % 3 {
        1 => spec.tcp.push_timestamps(f.isn, f.ack),
        2 => spec.tcp.push_sack(&[(f.ack, f.ack.wrapping_add(10))]),
        _ => {}
    }
    spec.tcp.ack = f.ack;
    spec.tcp.window = f.window;
    let mut out = Vec::new();
    let mut seq = f.isn;
    let mut id = f.ip_id;
    let n = f.lens.len().min(48);
    for (k, (mode, len)) in f.lens.iter().take(n).enumerate() {
        let plen = if *mode % 4 == 0 {
            usize::from(*len) % mss
        } else {
            mss
        };
        let payload: Vec<u8> = (0..plen)
            .map(|i| (i as u8) ^ salt ^ (k as u8).wrapping_mul(7))
            .collect();
        let mut s = spec;
        s.tcp.seq = seq;
        s.tcp.flags = if f.psh && k + 1 == n {
            TCP_ACK | TCP_PSH
        } else {
            TCP_ACK
        };
        if let IpSpec::V4(ip) = &mut s.ip {
            ip.id = id;
        }
        s.payload = &payload;
        let mut b = vec![0u8; s.len()];
        let _ = s.write(&mut b);
        out.push((b, meta));
        seq = seq.wrapping_add(plen as u32);
        if !f.fixed_id {
            id = id.wrapping_add(1);
        }
    }
    out
}

/// Byte-for-byte equal, allowing only a ones'-complement-equivalent (0x0000 / 0xffff) TCP
/// checksum form.
fn same(a: &[u8], b: &[u8], l4: usize) -> bool {
    if a == b {
        return true;
    }
    if a.len() != b.len() || a.len() < l4 + 18 {
        return false;
    }
    let (mut x, mut y) = (a.to_vec(), b.to_vec());
    let cx = u16::from_be_bytes([x[l4 + 16], x[l4 + 17]]);
    let cy = u16::from_be_bytes([y[l4 + 16], y[l4 + 17]]);
    x[l4 + 16..l4 + 18].fill(0);
    y[l4 + 16..l4 + 18].fill(0);
    x == y && oracle::is_zero(cx) && oracle::is_zero(cy)
}

fn round_trip(case: &Case) {
    let a = frames(&case.flows[0], 0);
    let b = frames(&case.flows[1], 0x55);
    let (mut ia, mut ib) = (a.into_iter(), b.into_iter());
    let mut originals: Vec<(Vec<u8>, RxMeta)> = Vec::new();
    for i in 0.. {
        let pick_b = i < 64 && case.mix >> i & 1 == 1;
        let next = if pick_b {
            ib.next().or_else(|| ia.next())
        } else {
            ia.next().or_else(|| ib.next())
        };
        match next {
            Some(f) => originals.push(f),
            None => break,
        }
    }
    let mut engine: Box<Engine<Tagged, Sizes<8, 64>>> = Box::new(Engine::new(Config::gro()));
    let mut rec = Recorder::default();
    for (id, (bytes, meta)) in originals.iter().enumerate() {
        let mut meta = *meta;
        meta.checksum = match case.csum % 3 {
            1 => RxChecksum::Verified,
            2 => RxChecksum::Complete(lro_core::testing::complete_checksum(bytes, meta.link)),
            _ => RxChecksum::None,
        };
        engine.push(
            Tagged {
                id,
                buf: bytes.clone(),
            },
            &meta,
            &mut rec,
        );
    }
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    let mut seen = vec![false; originals.len()];
    let mut out = vec![0u8; 70_000];
    for o in &rec.out {
        let Out::Seg {
            ids, bytes, info, ..
        } = o
        else {
            panic!("Gro released a frame");
        };
        for &i in ids {
            assert!(!seen[i], "frame {i} twice");
            seen[i] = true;
        }
        let meta = originals[ids[0]].1;
        if ids.len() == 1 {
            // A single frame comes back as received, and its `gso_size` of 0 makes `resegment`
            // hand it back as it is.
            assert_eq!(info.checksum, OutChecksum::AsReceived);
            assert_eq!(bytes, &originals[ids[0]].0, "frame {} changed", ids[0]);
        }
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        let n = gso::resegment(bytes, &meta, info.gso_size, info.fixed_id, &mut out, |p| {
            pieces.push(p.to_vec())
        })
        .unwrap_or_else(|e| panic!("segment {ids:?} ({info:?}): resegment failed: {e:?}"));
        assert_eq!(n, pieces.len());
        assert_eq!(
            n,
            ids.len(),
            "segment {ids:?} ({info:?}) resegmented into {n} frames"
        );
        if ids.len() > 1 {
            assert_eq!(info.checksum, OutChecksum::Full);
        }
        for (p, &i) in pieces.iter().zip(ids) {
            let l4 = oracle::tcp_of(&originals[i].0, &meta)
                .expect("valid frame")
                .l4;
            assert!(
                same(p, &originals[i].0, l4),
                "segment {ids:?}: frame {i} differs after resegment"
            );
        }
    }
    assert!(seen.iter().all(|s| *s), "a frame never came back");
}

fn raw(case: &Case) {
    let meta = if case.raw_ip {
        RxMeta::raw_ip(0)
    } else {
        RxMeta::ethernet(0)
    };
    let mut out = vec![0u8; case.raw.len() + 16];
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let r = gso::resegment(&case.raw, &meta, case.gso, case.fixed, &mut out, |p| {
        pieces.push(p.to_vec())
    });
    let Ok(n) = r else {
        assert!(pieces.is_empty(), "emitted before an error");
        return;
    };
    assert_eq!(n, pieces.len());
    let t =
        oracle::tcp_of(&case.raw, &meta).expect("resegment accepted a frame the reference refuses");
    if n == 1 {
        assert_eq!(
            pieces[0],
            case.raw[..t.ip_end],
            "a single piece is the frame"
        );
        return;
    }
    let mss = usize::from(case.gso);
    let mut payload = Vec::new();
    for (k, p) in pieces.iter().enumerate() {
        let o = oracle::tcp_of(p, &meta).unwrap_or_else(|| panic!("piece {k} does not parse"));
        assert_eq!(o.ip_end, p.len());
        assert_eq!(o.id, t.id, "piece {k}: flow changed");
        assert!(
            o.payload_len() <= mss && o.payload_len() > 0,
            "piece {k}: payload {}",
            o.payload_len()
        );
        assert!(k + 1 == n || o.payload_len() == mss);
        assert_eq!(
            o.seq,
            t.seq.wrapping_add((k * mss) as u32),
            "piece {k}: seq"
        );
        assert!(
            oracle::ip_checksum_ok(p, &o),
            "piece {k}: IPv4 header checksum"
        );
        assert!(oracle::tcp_checksum_ok(p, &o), "piece {k}: TCP checksum");
        assert!(
            k + 1 == n || o.flags & 0x09 == 0,
            "piece {k}: PSH/FIN before the last"
        );
        assert_eq!(o.flags | 0x09, t.flags | 0x09);
        payload.extend_from_slice(&p[o.payload..]);
    }
    assert_eq!(
        payload,
        case.raw[t.payload..t.ip_end],
        "payload not split in order"
    );
}

fuzz_target!(|case: Case| {
    round_trip(&case);
    raw(&case);
});
