//! The encapsulation hook (`lro_core::encap`) proven with a toy encapsulation, independently of
//! any real tunnel protocol: it merges, keeps tunnels apart, passes the frames it forbids alone
//! and in order, has its header fixed (length and checksum) at delivery, and software
//! segmentation gives the original frames back.
//!
//! The toy: IP protocol 253 (RFC 3692, for experiments), an 8-byte header
//!
//! ```text
//! 0..2 inner EtherType   2 flags (bit 0: never merge, bit 1: checksum)   3 reserved   4..8 key
//! 8..10 length of what follows the header   10..12 checksum   (only with the checksum flag)
//! ```
//!
//! With the checksum flag the header is 12 bytes. Its checksum, like GRE's, covers the header
//! and everything after it without a pseudo header, and it is the header's last two bytes (the
//! furthest the hook's contract lets it lie); its length, like a UDP header's, changes
//! when segments merge (`fix` writes it from `EncapFix::payload_len`; the engine never reads
//! it). Frames are built here with `lro_core::testing::FrameSpec` for the inner packet and a
//! few lines for the outer layers; output is read back with etherparse.
#![cfg(feature = "test-utils")]

use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::encap::{Encap, EncapFix, EncapHeader, Inner, NoEncap, TunnelKey};
use lro_core::gso;
use lro_core::parse::{self, FlowHint};
use lro_core::testing::{ones_complement_sum, seal_ipv4_header, FrameSpec, TCP_ACK, TCP_PSH};
use lro_core::{
    Cause, Config, Engine, FlushReason, PassReason, RxChecksum, RxMeta, Segment, SegmentInfo, Sink,
    Sizes, Verdict,
};
use lro_testkit::frame::bytes_of;

const TOY: u8 = 253;
const NO_MERGE: u8 = 1;
const CHECKSUM: u8 = 2;

struct Toy;

impl Encap for Toy {
    const IP_PROTOCOL: u8 = TOY;
    const MAX_HEADER_LEN: usize = 12;
    const NAME: &'static str = "toy";
    type Tunnel = TunnelKey;

    fn parse(b: &[u8]) -> Result<EncapHeader, PassReason> {
        let h = b.get(..8).ok_or(PassReason::Malformed)?;
        let inner = match u16::from_be_bytes([h[0], h[1]]) {
            0x0800 => Inner::Ipv4,
            0x86dd => Inner::Ipv6,
            0x6558 => Inner::Ethernet,
            _ => return Err(PassReason::NotTcp),
        };
        let len = if h[2] & CHECKSUM != 0 { 12 } else { 8 };
        if b.len() < len {
            return Err(PassReason::Malformed);
        }
        let key = u32::from_be_bytes([h[4], h[5], h[6], h[7]]);
        // The never-merge flag is not part of the identity: such a frame belongs to the flow of
        // its neighbours, whose held segment must go out before it.
        let id = u64::from(h[2] & !NO_MERGE) << 32 | u64::from(key);
        let mut header = EncapHeader::new(len, inner, id);
        if h[2] & CHECKSUM != 0 {
            header.checksum = Some(10);
        }
        if h[2] & NO_MERGE != 0 {
            header.mergeable = Err(PassReason::Encap);
        }
        Ok(header)
    }

    /// The reserved byte must be equal (it is not part of the identity).
    fn may_merge(held: &[u8], frame: &[u8]) -> bool {
        held.get(3) == frame.get(3)
    }

    fn fix(header: &mut [u8], fix: &EncapFix) {
        if header[2] & CHECKSUM == 0 {
            return;
        }
        let len = u16::try_from(fix.payload_len).expect("within an IPv4 datagram");
        header[8..10].copy_from_slice(&len.to_be_bytes());
        let Some(sum) = fix.payload_sum else { return };
        header[10..12].fill(0);
        let s = add(ones_complement_sum(header), sum);
        header[10..12].copy_from_slice(&(!s).to_be_bytes());
    }
}

fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The outer layers of a toy-tunnelled frame.
#[derive(Clone, Copy)]
struct Outer {
    src: [u8; 4],
    dst: [u8; 4],
    ttl: u8,
    id: u16,
    flags: u8,
    reserved: u8,
    key: u32,
    corrupt: bool,
}

impl Default for Outer {
    fn default() -> Self {
        Outer {
            src: [198, 18, 0, 1],
            dst: [198, 18, 0, 2],
            ttl: 64,
            id: 100,
            flags: 0,
            reserved: 0,
            key: 7,
            corrupt: false,
        }
    }
}

impl Outer {
    /// The default outer layers with the toy flags `flags`.
    fn flagged(flags: u8) -> Self {
        Outer {
            flags,
            ..Outer::default()
        }
    }
}

/// Ethernet / IPv4 (protocol 253) / toy header / the inner IP datagram of `inner`.
fn tunnelled(outer: Outer, inner: &FrameSpec<'_>) -> Vec<u8> {
    let datagram = bytes_of(&inner.raw_ip());
    let et: u16 = if datagram[0] >> 4 == 6 {
        0x86dd
    } else {
        0x0800
    };
    wrap(outer, et, &datagram)
}

/// Ethernet / IPv4 (protocol 253) / toy header announcing `et` / `inner`.
fn wrap(outer: Outer, et: u16, inner: &[u8]) -> Vec<u8> {
    let hlen = if outer.flags & CHECKSUM != 0 { 12 } else { 8 };
    let mut f = vec![0u8; 14 + 20 + hlen];
    f[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[18..20].copy_from_slice(&outer.id.to_be_bytes());
    f[20] = 0x40; // DF
    f[22] = outer.ttl;
    f[23] = TOY;
    f[26..30].copy_from_slice(&outer.src);
    f[30..34].copy_from_slice(&outer.dst);
    f[34..36].copy_from_slice(&et.to_be_bytes());
    f[36] = outer.flags;
    f[37] = outer.reserved;
    f[38..42].copy_from_slice(&outer.key.to_be_bytes());
    f.extend_from_slice(inner);
    mend_outer(&mut f);
    if outer.flags & CHECKSUM != 0 {
        f[42..44].copy_from_slice(&(inner.len() as u16).to_be_bytes());
        let mut c = !ones_complement_sum(&f[34..]);
        if outer.corrupt {
            c ^= 0x0101;
        }
        f[44..46].copy_from_slice(&c.to_be_bytes());
    }
    f
}

/// `n` consecutive data frames of one inner flow (1000 bytes each, distinct payload bytes),
/// outer and inner IPv4 IDs incrementing.
fn run_of(outer: Outer, n: usize, port: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let payload: Vec<u8> = (0..1000).map(|k| (k * 7 + i * 13) as u8).collect();
            let mut spec = FrameSpec::ipv4_tcp(port, 5201)
                .seq(1 + 1000 * i as u32)
                .ack(9)
                .flags(TCP_ACK)
                .timestamps(100, 50)
                .payload(&payload);
            if let lro_core::testing::IpSpec::V4(v4) = &mut spec.ip {
                v4.id = 500 + i as u16;
            }
            tunnelled(
                Outer {
                    id: outer.id + i as u16,
                    ..outer
                },
                &spec,
            )
        })
        .collect()
}

#[derive(Default)]
struct Collect {
    out: Vec<(Vec<u8>, SegmentInfo)>,
}

impl Sink<Vec<u8>> for Collect {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        let mut b = vec![0; seg.len()];
        seg.copy_to(&mut b).unwrap();
        self.out.push((b, *seg.info()));
    }
}

type ToyEngine = Engine<Vec<u8>, Sizes<16, 64>, Toy>;

fn meta(frame: &[u8], csum: u8) -> RxMeta {
    let m = RxMeta::ethernet(0);
    match csum {
        0 => m,
        1 => m.with_checksum(RxChecksum::Verified),
        _ => m.with_checksum(RxChecksum::Complete(ones_complement_sum(&frame[14..]))),
    }
}

fn run(config: Config, frames: &[Vec<u8>], csum: u8) -> (Collect, lro_core::Stats, Vec<Verdict>) {
    let mut e: Box<ToyEngine> = Box::new(Engine::new(config));
    let mut sink = Collect::default();
    let verdicts = frames
        .iter()
        .map(|f| e.push(f.clone(), &meta(f, csum), &mut sink))
        .collect();
    e.flush_all(&mut sink);
    assert!(e.stats().is_conserved());
    assert_eq!(e.held_frames(), 0);
    (sink, e.stats().clone(), verdicts)
}

/// Reads a delivered toy frame: the outer IPv4 header and the toy's checksum and length right,
/// the inner IPv4 and TCP checksums right; returns the TCP payload.
fn check_valid(b: &[u8]) -> Vec<u8> {
    checked(b).unwrap_or_else(|e| panic!("delivered toy frame: {e}"))
}

/// [`check_valid`], saying what is wrong instead of panicking.
fn checked(b: &[u8]) -> Result<Vec<u8>, String> {
    let ensure = |ok: bool, what: &str| if ok { Ok(()) } else { Err(what.to_string()) };
    let outer = SlicedPacket::from_ethernet(b).map_err(|e| format!("outer: {e:?}"))?;
    let Some(NetSlice::Ipv4(o)) = outer.net else {
        return Err("outer not IPv4".into());
    };
    let oh = o.header().to_header();
    ensure(
        oh.header_checksum == oh.calc_header_checksum(),
        "outer checksum",
    )?;
    ensure(usize::from(oh.total_len) == b.len() - 14, "outer length")?;
    let toy = o.payload().payload;
    let hlen = if toy.get(2).is_some_and(|f| f & CHECKSUM != 0) {
        12
    } else {
        8
    };
    ensure(toy.len() >= hlen, "toy header cut")?;
    if hlen == 12 {
        let s = ones_complement_sum(toy);
        ensure(s == 0xffff || s == 0, "toy checksum")?;
        let len = u16::from_be_bytes([toy[8], toy[9]]);
        ensure(usize::from(len) == toy.len() - hlen, "toy length")?;
    }
    let inner = SlicedPacket::from_ip(&toy[hlen..]).map_err(|e| format!("inner: {e:?}"))?;
    let Some(NetSlice::Ipv4(i)) = inner.net else {
        return Err("inner not IPv4".into());
    };
    let ih = i.header().to_header();
    ensure(
        ih.header_checksum == ih.calc_header_checksum(),
        "inner checksum",
    )?;
    ensure(
        usize::from(ih.total_len) == toy.len() - hlen,
        "inner length",
    )?;
    let Some(TransportSlice::Tcp(t)) = inner.transport else {
        return Err("not TCP".into());
    };
    let sum = t
        .to_header()
        .calc_checksum_ipv4(&ih, t.payload())
        .map_err(|e| format!("{e:?}"))?;
    ensure(t.checksum() == sum, "TCP checksum")?;
    Ok(t.payload().to_vec())
}

/// `check_valid` can fail: a toy frame as built passes, and each field it checks, made wrong
/// alone (the checksums that cover it made right again), is refused with that field's name.
#[test]
fn check_valid_refuses_a_broken_frame() {
    // Makes the toy checksum (when the header has one) and the outer IPv4 header checksum
    // right for the bytes as they are; the outer length is left alone.
    fn reseal(f: &mut [u8]) {
        if f[36] & CHECKSUM != 0 {
            f[44..46].fill(0);
            let c = !ones_complement_sum(&f[34..]);
            f[44..46].copy_from_slice(&c.to_be_bytes());
        }
        seal_ipv4_header(f, 14);
    }
    for flags in [0, CHECKSUM] {
        let good = run_of(Outer::flagged(flags), 1, 40000).remove(0);
        assert_eq!(checked(&good).map(|p| p.len()), Ok(1000), "flags {flags}");
        let inner = 34 + if flags & CHECKSUM != 0 { 12 } else { 8 };
        let length_less = |f: &mut [u8], at: usize| {
            let n = u16::from_be_bytes([f[at], f[at + 1]]) - 1;
            f[at..at + 2].copy_from_slice(&n.to_be_bytes());
        };
        // Each case: the frame broken, whether its covering checksums are made right again,
        // and the fault.
        let mut cases: Vec<(Vec<u8>, bool, &str)> = Vec::new();
        let mut f = good.clone();
        f[24] ^= 1;
        cases.push((f, false, "outer checksum"));
        let mut f = good.clone();
        length_less(&mut f, 16);
        cases.push((f, true, "outer length"));
        let mut f = good.clone();
        f[inner + 10] ^= 1;
        cases.push((f, true, "inner checksum"));
        let mut f = good.clone();
        length_less(&mut f, inner + 2);
        seal_ipv4_header(&mut f, inner);
        cases.push((f, true, "inner length"));
        let mut f = good.clone();
        f[inner + 36] ^= 1;
        cases.push((f, true, "TCP checksum"));
        let mut f = good.clone();
        *f.last_mut().unwrap() ^= 1;
        cases.push((f, true, "TCP checksum"));
        if flags & CHECKSUM != 0 {
            let mut f = good.clone();
            f[44] ^= 1;
            cases.push((f, false, "toy checksum"));
            let mut f = good.clone();
            length_less(&mut f, 42);
            cases.push((f, true, "toy length"));
        }
        for (mut f, sealed, what) in cases {
            if sealed {
                reseal(&mut f);
            }
            assert_eq!(checked(&f), Err(what.to_string()), "flags {flags}");
        }
    }
}

fn payloads(frames: &[Vec<u8>]) -> Vec<u8> {
    frames.iter().flat_map(|f| check_valid(f)).collect()
}

/// Rewrites the outer IPv4 total length and header checksum of a toy frame whose bytes after
/// the outer header were changed.
fn mend_outer(f: &mut [u8]) {
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    seal_ipv4_header(f, 14);
}

/// Pushes `frames` through an engine with the encapsulation `E` and checks that each was
/// passed alone as malformed and delivered as it came, byte for byte.
fn all_passed_as_malformed<E: Encap>(frames: &[Vec<u8>]) {
    let mut e: Box<Engine<Vec<u8>, Sizes<16, 64>, E>> = Box::new(Engine::new(Config::lro()));
    let mut sink = Collect::default();
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    let verdicts: Vec<Verdict> = frames
        .iter()
        .map(|f| e.push(f.clone(), &meta, &mut sink))
        .collect();
    e.flush_all(&mut sink);
    assert_eq!(
        verdicts,
        vec![Verdict::Passed(PassReason::Malformed); frames.len()]
    );
    let out: Vec<Vec<u8>> = sink.out.into_iter().map(|(b, _)| b).collect();
    assert_eq!(out, frames);
    assert!(e.stats().is_conserved());
}

#[test]
fn merges_through_the_toy_under_every_checksum_state() {
    for flags in [0, CHECKSUM] {
        let frames = run_of(Outer::flagged(flags), 5, 40000);
        for csum in 0..3 {
            for config in [Config::gro(), Config::lro()] {
                let (sink, stats, verdicts) = run(config, &frames, csum);
                assert_eq!(sink.out.len(), 1, "flags {flags} csum {csum}: {verdicts:?}");
                let (b, info) = &sink.out[0];
                assert_eq!(info.frames, 5);
                assert_eq!(
                    info.tunnel.map(|t| t.encap_id),
                    Some(u64::from(flags) << 32 | 7)
                );
                assert_eq!(check_valid(b), payloads(&frames));
                assert_eq!(stats.tunnel.frames_in, 5);
                assert_eq!(stats.tunnel.frames_merged, 4);
                // The link header is the head's; the outer addresses and key unchanged.
                assert_eq!(b[..14], frames[0][..14]);
                assert_eq!(b[26..34], frames[0][26..34]);
                assert_eq!(b[38..42], frames[0][38..42]);
            }
        }
    }
}

#[test]
fn keeps_tunnels_apart() {
    // The same inner flow in four tunnels: other key, other outer source, other outer
    // destination, other flags (checksum on), interleaved frame by frame.
    let base = Outer::default();
    let tunnels = [
        base,
        Outer { key: 8, ..base },
        Outer {
            src: [198, 18, 0, 3],
            ..base
        },
        Outer {
            dst: [198, 18, 0, 4],
            ..base
        },
        Outer {
            flags: CHECKSUM,
            ..base
        },
    ];
    let runs: Vec<Vec<Vec<u8>>> = tunnels.iter().map(|t| run_of(*t, 4, 40000)).collect();
    let mut frames = Vec::new();
    for i in 0..4 {
        for r in &runs {
            frames.push(r[i].clone());
        }
    }
    let (sink, stats, _) = run(Config::gro(), &frames, 0);
    assert_eq!(sink.out.len(), tunnels.len(), "one segment per tunnel");
    for (r, (b, info)) in runs.iter().zip(&sink.out) {
        assert_eq!(info.frames, 4);
        assert_eq!(check_valid(b), payloads(r));
        assert_eq!(b[26..34], r[0][26..34], "outer addresses of its tunnel");
    }
    assert_eq!(stats.frames_merged, 3 * tunnels.len() as u64);

    // A plain engine does not look into the toy: every frame passes alone, not TCP.
    let mut plain: Box<Engine<Vec<u8>, Sizes<16, 64>, NoEncap>> =
        Box::new(Engine::new(Config::gro()));
    let mut sink = Collect::default();
    for f in &runs[0] {
        let v = plain.push(f.clone(), &RxMeta::ethernet(0), &mut sink);
        assert_eq!(v, Verdict::Passed(PassReason::NotTcp));
    }
    assert_eq!(plain.stats().tunnel.frames_in, 0);
}

#[test]
fn may_merge_and_the_outer_header_rules_split_segments() {
    // Reserved byte changes at the third frame: the hook says no.
    let mut frames = run_of(Outer::default(), 4, 40000);
    let later = run_of(
        Outer {
            reserved: 1,
            ..Outer::default()
        },
        4,
        40000,
    );
    frames[2] = later[2].clone();
    frames[3] = later[3].clone();
    let (sink, stats, _) = run(Config::gro(), &frames, 0);
    assert_eq!(sink.out.len(), 2);
    assert_eq!(stats.flushes[FlushReason::Encap.index()], 1);
    assert_eq!(sink.out[0].1.cause, Cause::Flushed(FlushReason::Encap));

    // The outer TTL changes: the outer header follows the plain rules.
    let mut frames = run_of(Outer::default(), 4, 40000);
    frames[2] = run_of(
        Outer {
            ttl: 63,
            ..Outer::default()
        },
        4,
        40000,
    )[2]
    .clone();
    let (sink, stats, _) = run(Config::gro(), &frames, 0);
    assert_eq!(sink.out.len(), 3);
    assert_eq!(stats.flushes[FlushReason::IpFields.index()], 2);

    // Outer IDs neither incrementing nor fixed (Gro).
    let mut frames = run_of(Outer::default(), 3, 40000);
    frames[2] = run_of(
        Outer {
            id: 900,
            ..Outer::default()
        },
        3,
        40000,
    )[2]
    .clone();
    let (sink, stats, _) = run(Config::gro(), &frames, 0);
    assert_eq!(sink.out.len(), 2);
    assert_eq!(stats.flushes[FlushReason::IpId.index()], 1);
}

#[test]
fn forbidden_frames_pass_alone_in_order() {
    let ok = run_of(Outer::default(), 4, 40000);
    let never = run_of(
        Outer {
            flags: NO_MERGE,
            ..Outer::default()
        },
        4,
        40000,
    );
    // Two mergeable frames, a forbidden one (its flow's next bytes), then the rest.
    let frames = vec![
        ok[0].clone(),
        ok[1].clone(),
        never[2].clone(),
        ok[3].clone(),
    ];
    let (sink, stats, verdicts) = run(Config::lro(), &frames, 0);
    assert_eq!(verdicts[2], Verdict::Passed(PassReason::Encap));
    assert_eq!(stats.tunnel.passed[PassReason::Encap.index()], 1);
    assert_eq!(stats.passed[PassReason::Encap.index()], 1);
    // The held segment went first, then the forbidden frame as it came.
    assert_eq!(sink.out.len(), 3);
    assert_eq!(sink.out[0].1.frames, 2);
    assert_eq!(
        sink.out[0].1.cause,
        Cause::Flushed(FlushReason::Unmergeable)
    );
    assert_eq!(sink.out[1].0, frames[2]);
    assert_eq!(sink.out[1].1.cause, Cause::Passed(PassReason::Encap));
    // Order is kept: payloads come out as they went in.
    let out: Vec<Vec<u8>> = sink.out.iter().map(|o| o.0.clone()).collect();
    assert_eq!(payloads(&out), payloads(&frames));

    // A toy in a toy: never merged either.
    let inner = FrameSpec::ipv4_tcp(1, 2).flags(TCP_ACK).payload(&[1; 10]);
    let once = tunnelled(Outer::default(), &inner);
    let mut raw = once[14..].to_vec();
    raw[9] = TOY; // the inner datagram says "toy" again
    let mut nested = once[..14 + 20 + 8].to_vec();
    nested.extend_from_slice(&raw);
    mend_outer(&mut nested);
    let (_, stats, verdicts) = run(Config::lro(), &[nested], 1);
    assert_eq!(verdicts[0], Verdict::Passed(PassReason::Encap), "{stats:?}");
}

#[test]
fn a_bad_toy_checksum_is_never_merged() {
    let good = run_of(Outer::flagged(CHECKSUM), 4, 40000);
    let bad = run_of(
        Outer {
            flags: CHECKSUM,
            corrupt: true,
            ..Outer::default()
        },
        4,
        40000,
    );
    let frames = vec![
        good[0].clone(),
        good[1].clone(),
        bad[2].clone(),
        good[3].clone(),
    ];
    // Software and CHECKSUM_COMPLETE: caught; the NIC's Verified: trusted.
    for csum in [0, 2] {
        let (sink, stats, verdicts) = run(Config::gro(), &frames, csum);
        assert_eq!(
            verdicts[2],
            Verdict::Passed(PassReason::BadEncapChecksum),
            "csum {csum}"
        );
        assert_eq!(stats.tunnel.passed[PassReason::BadEncapChecksum.index()], 1);
        assert_eq!(sink.out.len(), 3);
        assert_eq!(sink.out[1].0, frames[2], "passed as received");
    }
    let (sink, _, verdicts) = run(Config::gro(), &frames, 1);
    assert_eq!(verdicts[2], Verdict::Merged);
    assert_eq!(sink.out.len(), 1);
    // The merged segment's checksum is computed afresh: right, whatever the frame carried.
    check_valid(&sink.out[0].0);
}

#[test]
fn resegments_back_to_the_original_frames() {
    for flags in [0, CHECKSUM] {
        let mut frames = run_of(Outer::flagged(flags), 6, 40000);
        // A short last frame with PSH.
        let payload: Vec<u8> = (0..300).map(|k| k as u8).collect();
        let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
            .seq(6001)
            .ack(9)
            .flags(TCP_ACK | TCP_PSH)
            .timestamps(100, 50)
            .payload(&payload);
        if let lro_core::testing::IpSpec::V4(v4) = &mut spec.ip {
            v4.id = 506;
        }
        frames.push(tunnelled(
            Outer {
                flags,
                id: 106,
                ..Outer::default()
            },
            &spec,
        ));
        let (sink, _, _) = run(Config::gro(), &frames, 0);
        assert_eq!(sink.out.len(), 1);
        let (b, info) = &sink.out[0];
        let mut back = Vec::new();
        let mut buf = vec![0u8; 2048];
        let n = gso::resegment_with::<Toy>(
            b,
            &RxMeta::ethernet(0),
            info.gso_size,
            (info.fixed_id, info.fixed_outer_id),
            &mut buf,
            |f| back.push(f.to_vec()),
        )
        .unwrap();
        assert_eq!(n, frames.len());
        assert_eq!(back, frames, "flags {flags}: byte for byte");
    }
}

#[test]
fn an_unreadable_inner_flow_flushes_its_tunnel_first() {
    // Two frames held, then a frame of the same tunnel whose inner TCP header is cut short:
    // its flow cannot be known, so the tunnel's held segments go first.
    let ok = run_of(Outer::default(), 2, 40000);
    let other_tunnel = run_of(
        Outer {
            src: [198, 18, 0, 9],
            ..Outer::default()
        },
        2,
        40000,
    );
    let mut cut = ok[1].clone();
    cut.truncate(14 + 20 + 8 + 20 + 10);
    mend_outer(&mut cut);
    let inner_total = (cut.len() - 42) as u16;
    cut[44..46].copy_from_slice(&inner_total.to_be_bytes());
    let frames = vec![
        ok[0].clone(),
        other_tunnel[0].clone(),
        cut,
        other_tunnel[1].clone(),
    ];
    let (sink, stats, verdicts) = run(Config::lro(), &frames, 1);
    assert_eq!(verdicts[2], Verdict::Passed(PassReason::Malformed));
    assert_eq!(stats.tunnel.passed[PassReason::Malformed.index()], 1);
    assert_eq!(
        stats.tunnel.frames_in, 4,
        "the cut frame came through the tunnel too"
    );
    // The first tunnel's segment went out before the cut frame; the other tunnel kept holding.
    assert_eq!(sink.out[0].1.cause, Cause::Flushed(FlushReason::Unknown));
    assert_eq!(sink.out[0].0[26..30], [198, 18, 0, 1]);
    assert_eq!(sink.out[1].0, frames[2]);
    assert_eq!(sink.out[2].1.frames, 2, "the other tunnel merged across it");
}

#[test]
fn plain_segments_of_a_tunnel_engine_name_no_tunnel() {
    // One plain flow and one tunnelled flow through the same engine: only the tunnelled
    // segments say they came through a tunnel (`SegmentInfo::tunnel`), whether merged or
    // passed alone.
    let mut frames = run_of(Outer::default(), 2, 40000);
    for i in 0..2u32 {
        let payload = [i as u8; 100];
        let spec = FrameSpec::ipv4_tcp(40001, 5201)
            .seq(1 + 100 * i)
            .flags(TCP_ACK)
            .payload(&payload);
        frames.push(bytes_of(&spec));
    }
    let syn = FrameSpec::ipv4_tcp(40002, 5201).flags(lro_core::testing::TCP_SYN);
    frames.push(bytes_of(&syn));
    let (sink, _, _) = run(Config::lro(), &frames, 1);
    assert_eq!(sink.out.len(), 3);
    let tunnels: Vec<Option<TunnelKey>> = sink.out.iter().map(|(_, i)| i.tunnel).collect();
    assert!(
        tunnels[2].is_none(),
        "a plain frame passed alone: {:?}",
        tunnels[2]
    );
    let (tunnelled, plain): (Vec<_>, Vec<_>) =
        sink.out[..2].iter().partition(|(b, _)| b[23] == TOY);
    assert_eq!(
        tunnelled[0]
            .1
            .tunnel
            .map(|t| t.outer_src_addr().to_string()),
        Some("198.18.0.1".into())
    );
    assert_eq!(plain[0].1.tunnel, None, "a plain segment");
}

/// When every frame comes through the tunnel, the tunnel's pass counters are the engine's:
/// every frame delivered alone is counted by its reason in both, whatever the reason (here
/// an unknown ACK state, a pure ACK duplicating the held one, a frame with options) and
/// whether header prediction read it.
#[test]
fn every_tunnelled_frame_passed_alone_is_counted_for_the_tunnel() {
    let ack = |id: u16, ack: u32, sack: bool| {
        let mut spec = FrameSpec::ipv4_tcp(40001, 5201)
            .seq(77)
            .ack(ack)
            .flags(TCP_ACK)
            .timestamps(100 + u32::from(id), 50);
        if sack {
            spec = spec.sack(&[(ack + 500, ack + 600)]);
        }
        if let lro_core::testing::IpSpec::V4(v4) = &mut spec.ip {
            v4.id = id;
        }
        tunnelled(
            Outer {
                id: 300 + id,
                ..Outer::default()
            },
            &spec,
        )
    };
    let frames = vec![
        ack(1, 1000, false), // no ACK state known yet: alone
        ack(2, 1100, false), // held
        ack(3, 1100, false), // repeats the held ACK: the held one goes, this one alone
        ack(4, 1200, false), // held
        ack(5, 1200, true),  // SACK blocks: alone
    ];
    for prediction in [true, false] {
        let config = Config::lro().with_header_prediction(prediction);
        let (_, stats, verdicts) = run(config, &frames, 1);
        assert_eq!(
            verdicts[2],
            Verdict::Passed(PassReason::DupAck),
            "{verdicts:?}"
        );
        assert_eq!(stats.tunnel.frames_in, frames.len() as u64);
        assert_eq!(
            stats.tunnel.passed, stats.passed,
            "prediction {prediction}: {stats:?}"
        );
    }
}

/// Hooks that break the contract, one way each. `ODD`: the toy's header measured one byte
/// longer, an odd length (`EncapHeader::len` must be a multiple of 2, or the sums of what
/// follows do not add). Otherwise: the header's checksum placed one byte before its end, so
/// that it runs past the header (it must lie within it).
struct BadToy<const ODD: bool>;

impl<const ODD: bool> Encap for BadToy<ODD> {
    const IP_PROTOCOL: u8 = TOY;
    const MAX_HEADER_LEN: usize = 12;
    const NAME: &'static str = "bad-toy";
    type Tunnel = TunnelKey;

    fn parse(b: &[u8]) -> Result<EncapHeader, PassReason> {
        let mut header = Toy::parse(b)?;
        if ODD {
            header.len += 1;
        } else {
            header.checksum = Some(header.len - 1);
        }
        Ok(header)
    }

    fn may_merge(held: &[u8], frame: &[u8]) -> bool {
        Toy::may_merge(held, frame)
    }

    fn fix(_header: &mut [u8], _fix: &EncapFix) {}
}

#[test]
fn a_hook_measuring_an_odd_header_gets_its_frames_passed_as_malformed() {
    // The toy frames with one byte put after the toy header, outer length and checksum
    // mended: read with the odd length, each inner datagram is whole and mergeable.
    let frames: Vec<Vec<u8>> = run_of(Outer::default(), 3, 40000)
        .into_iter()
        .map(|mut f| {
            f.insert(42, 0);
            mend_outer(&mut f);
            f
        })
        .collect();
    all_passed_as_malformed::<BadToy<true>>(&frames);
}

#[test]
fn a_hook_placing_its_checksum_past_its_header_gets_its_frames_passed_as_malformed() {
    // Good toy frames with a checksum (a 12-byte header): the hook says the checksum is at
    // bytes 11 and 12, the second of which is the inner IP header's first.
    let frames = run_of(Outer::flagged(CHECKSUM), 3, 40000);
    assert_eq!(
        run(Config::lro(), &frames, 1).0.out.len(),
        1,
        "the toy merges them"
    );
    all_passed_as_malformed::<BadToy<false>>(&frames);
}

#[test]
fn an_inner_datagram_shorter_than_the_outer_one_is_malformed() {
    // Four bytes after each inner datagram, inside the outer one (Linux: the inner
    // `inet_gro_receive` flushes on a length mismatch).
    let frames: Vec<Vec<u8>> = run_of(Outer::default(), 3, 40000)
        .into_iter()
        .map(|mut f| {
            f.extend_from_slice(&[0; 4]);
            mend_outer(&mut f);
            f
        })
        .collect();
    all_passed_as_malformed::<Toy>(&frames);
}

/// Ethernet / IPv4 / toy / the Ethernet frame of `inner` (transparent bridging).
fn bridged(outer: Outer, inner: &FrameSpec<'_>) -> Vec<u8> {
    wrap(outer, 0x6558, &bytes_of(inner))
}

#[test]
fn bridged_frames_under_either_vlan_tag_merge_and_the_tag_keeps_flows_apart() {
    for tpid in [0x8100, 0x88a8] {
        // One inner TCP flow, contiguous; the last frame under another VLAN id.
        let frames: Vec<Vec<u8>> = (0..4u16)
            .map(|i| {
                let payload = [i as u8; 500];
                let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
                    .seq(1 + 500 * u32::from(i))
                    .flags(TCP_ACK)
                    .payload(&payload)
                    .vlan(tpid, if i < 3 { 5 } else { 6 });
                if let lro_core::testing::IpSpec::V4(v4) = &mut spec.ip {
                    v4.id = 500 + i;
                }
                bridged(
                    Outer {
                        id: 100 + i,
                        ..Outer::default()
                    },
                    &spec,
                )
            })
            .collect();
        let (sink, _, verdicts) = run(Config::lro(), &frames, 1);
        let merged: Vec<u16> = sink.out.iter().map(|(_, i)| i.frames).collect();
        assert_eq!(merged, [3, 1], "tpid {tpid:#x}: {verdicts:?}");
        let inner_link = |k: usize| sink.out[k].1.tunnel.map(|t| t.inner_link as u32);
        assert_eq!(inner_link(0), Some(u32::from(tpid) << 16 | 5));
        assert_eq!(inner_link(1), Some(u32::from(tpid) << 16 | 6));
    }
}

#[test]
fn a_tunnelled_frame_is_parsed_layer_by_layer() {
    // Under an in-line VLAN tag: the outer IPv4 header at 18, the toy at 38, the inner IPv4
    // header at 46 (50 with the checksum flag), TCP 20 bytes further.
    for flags in [0, CHECKSUM] {
        let mut f = tunnelled(
            Outer::flagged(flags),
            &FrameSpec::ipv4_tcp(40000, 5201)
                .flags(TCP_ACK)
                .payload(&[7; 30]),
        );
        f.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        let p = parse::parse_with::<Toy>(&f, &RxMeta::ethernet(0)).expect("tunnelled TCP");
        let t = p.tunnel.expect("a tunnel layer");
        let inner = 38 + if flags & CHECKSUM != 0 { 12 } else { 8 };
        assert_eq!(
            (p.link_len, t.outer_l3, t.encap, t.inner, p.l3, p.l4),
            (18, 18, 38, inner, inner, inner + 20),
            "flags {flags}"
        );
        assert_eq!(p.payload_len, 30);
        assert_eq!(t.checksum, (flags & CHECKSUM != 0).then_some(10));
    }
    // Bridged, with an inner VLAN tag, and short (a pure ACK): the tag is the inner link's.
    let ack = bridged(
        Outer::default(),
        &FrameSpec::ipv4_tcp(40000, 5201)
            .flags(TCP_ACK)
            .vlan(0x8100, 9),
    );
    let p = parse::parse_with::<Toy>(&ack, &RxMeta::ethernet(0)).expect("a bridged pure ACK");
    assert_eq!((p.payload_len, p.l3), (0, 42 + 18));
    assert_eq!(
        p.tunnel.map(|t| t.key.inner_link as u32),
        Some(0x8100 << 16 | 9)
    );
}

#[test]
fn an_ipv6_fragment_names_its_tunnel_only_when_it_cuts_one() {
    let meta = RxMeta::ethernet(0);
    let mut spec = FrameSpec::ipv6_tcp(40000, 5201).payload(&[3; 40]);
    if let lro_core::testing::IpSpec::V6(v6) = &mut spec.ip {
        v6.fragment = Some(lro_core::testing::Ipv6Fragment {
            offset: 0,
            more: true,
            ident: 1,
        });
    }
    let mut f = bytes_of(&spec);
    // The Fragment header right after the fixed one; its first byte names what it cuts.
    let next = 14 + 40;
    assert_eq!(f[next], 6);
    let hint = |f: &[u8], toy: bool| {
        let u = if toy {
            parse::parse_with::<Toy>(f, &meta)
        } else {
            parse::parse(f, &meta)
        }
        .expect_err("a fragment");
        assert_eq!(u.reason, PassReason::Fragment);
        u.hint
    };
    // A TCP fragment: its addresses, with or without an encapsulation.
    assert!(matches!(hint(&f, true), FlowHint::Addresses(_)));
    assert!(matches!(hint(&f, false), FlowHint::Addresses(_)));
    // A fragment of a toy datagram: the tunnel, with the toy; without an encapsulation the
    // protocol means nothing, nor does one whose number is `NoEncap`'s placeholder 0.
    f[next] = TOY;
    assert!(matches!(hint(&f, true), FlowHint::Tunnel(_)));
    assert!(matches!(hint(&f, false), FlowHint::Addresses(_)));
    f[next] = NoEncap::IP_PROTOCOL;
    assert!(matches!(hint(&f, false), FlowHint::Addresses(_)));
    // A datagram that ends where its Fragment header should start (a Destination-options
    // header names it), with nothing after it: nothing past the datagram is read.
    let mut spec = FrameSpec::ipv6_tcp(40000, 5201);
    if let lro_core::testing::IpSpec::V6(v6) = &mut spec.ip {
        v6.ext[0] = Some(lro_core::testing::Ipv6Ext::new(
            lro_core::testing::Ipv6ExtKind::DestinationOptions,
            &[],
        ));
    }
    let mut cut = bytes_of(&spec);
    cut.truncate(14 + 40 + 8);
    cut[14 + 40] = 44;
    cut[14 + 4..14 + 6].copy_from_slice(&8u16.to_be_bytes());
    assert!(matches!(hint(&cut, true), FlowHint::Addresses(_)));
}
