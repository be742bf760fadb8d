//! `GreEngine` under `Policy::Gro` against the running kernel's GRE GRO (`gre_gro_receive`,
//! built into every kernel with IPv4 GRE offload, even one without GRE devices): real Linux
//! TCP traffic (the committed captures) wrapped in GRE every way Linux coalesces or refuses
//! (no flags, K, C, outer IPv4 and IPv6, outer IDs per tunnel, per inner flow or fixed, TEB
//! with and without a key; S, routing and version 1, which Linux passes up unmerged), in polls
//! of 63 frames through both. C with K only where the kernel reads the key: see
//! [`kernel_compares_keys`]. Per flow
//! (the tunnel is part of it), the frames that come out must be the same, byte for byte:
//! outer and inner lengths and IPv4 header checksums, the inner TCP checksum that Linux
//! leaves for `CHECKSUM_PARTIAL`. One field differs on purpose: a merged segment's GRE
//! checksum (see [`without_merged_gre_checksum`]). A poll in which the engine started a
//! segment while it held 8 is left out as crowded: Linux holds 8 at most, and for one more
//! completes its oldest (`lro_testkit::kernel::crowded`).
//!
//! The kernel's side is `lro_testkit::kernel` (a veth pair with GRO on, in a namespace of the
//! test's own, each poll of frames put into one NAPI poll). Outer VLAN tags are left out: a
//! kernel without 802.1Q support (this project's VM) has no VLAN GRO at all, tunnelled or
//! not.
//!
//! `LRO_KERNEL_GRO_FULL=1` wraps every frame of the two captures (the default: the first
//! 1,008 of each); `LRO_KERNEL_GRO_PCAP` names one more Ethernet pcap to wrap, whole;
//! `LRO_KERNEL_GRO_DUMP` names a file to write a failing poll to, as a pcap.
//! Needs root, `ip`, `ethtool` and Linux 6.18 or later; skips with the reason otherwise.

mod common;

use lro_core::testing::{FrameSpec, IpSpec, TCP_ACK};
use lro_core::{Config, OutChecksum, RxMeta};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::wire::flags;
use lro_gre::Gre;
use lro_testkit::kernel::{
    captures, crowded, engine_gro, frames_of, poll_steps, runner, wire_batch, wire_seeds, Kernel,
    BATCH, MAX_GRO_SKBS,
};
use lro_testkit::oracle;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::cell::Cell;

/// The variants: a name, the forward direction's outer layers and outer IPv4 IDs, and
/// whether Linux merges through them.
fn variants() -> Vec<(&'static str, GreSpec, OuterId, bool)> {
    let mut routing = GreSpec::ipv4();
    routing.flags_version = flags::R;
    let mut v1 = GreSpec::ipv4().key(0x0001_0002);
    v1.flags_version |= 1;
    vec![
        ("plain GRE", GreSpec::ipv4(), OuterId::Tunnel, true),
        ("K", GreSpec::ipv4().key(0x0102_0304), OuterId::Inner, true),
        ("C", GreSpec::ipv4().checksum(), OuterId::Tunnel, true),
        (
            "C, fixed outer ID",
            GreSpec::ipv4().checksum(),
            OuterId::Fixed(9),
            true,
        ),
        (
            "C over IPv6",
            GreSpec::ipv6().checksum(),
            OuterId::Inner,
            true,
        ),
        (
            "C+K",
            GreSpec::ipv4().checksum().key(42),
            OuterId::Inner,
            true,
        ),
        (
            "C+K over IPv6",
            GreSpec::ipv6().checksum().key(42),
            OuterId::Tunnel,
            true,
        ),
        ("TEB", GreSpec::ipv4().teb(), OuterId::Tunnel, true),
        (
            "TEB C over IPv6",
            GreSpec::ipv6().checksum().teb(),
            OuterId::Tunnel,
            true,
        ),
        (
            "NVGRE (TEB K)",
            GreSpec::ipv4().key(0x00c0_ff01).teb(),
            OuterId::Inner,
            true,
        ),
        ("S", GreSpec::ipv4().sequence(0), OuterId::Tunnel, false),
        ("routing", routing, OuterId::Tunnel, false),
        ("version 1", v1, OuterId::Tunnel, false),
    ]
}

/// `frames` wrapped by `tunnel` (a frame that is not IP stays as it is).
fn wrap(frames: &[Vec<u8>], mut tunnel: Tunnel) -> Vec<Vec<u8>> {
    frames
        .iter()
        .map(|f| {
            let inner = InnerFrame::Ethernet(f);
            match tunnel.spec.wrapped_len(inner) {
                Ok(n) => {
                    let mut b = vec![0u8; n];
                    tunnel.wrap(inner, &mut b).expect("sized");
                    b
                }
                Err(_) => f.clone(),
            }
        })
        .collect()
}

/// Where the GRE checksum of a frame read through GRE is, if it has one.
fn gre_checksum_at(f: &[u8]) -> Option<usize> {
    let t = oracle::tcp_of_gre(f, &RxMeta::ethernet(0))?;
    t.outer?.checksum_at(&t)
}

/// Whether the GRE checksum of `f` (if it has one) is right for its bytes as they are: the
/// engine writes one over the headers it rewrote and the payload.
fn gre_checksum_holds(f: &[u8]) -> bool {
    match gre_checksum_at(f) {
        // The checksum covers the GRE header (from 4 bytes before the field) to the end.
        Some(at) => oracle::is_zero(!oracle::sum(&f[at - 4..])),
        None => true,
    }
}

/// `f`, its GRE checksum blanked when it is a merged segment (not one of the `input`
/// frames). Linux leaves the head's GRE checksum in a merged packet (`gre_gro_complete`
/// marks it for GSO, `SKB_GSO_GRE_CSUM`, and GSO computes one per segment); the engine
/// writes one that holds for the merged frame as it is (checked above), so a reader of its
/// output can verify it. That field is the one difference.
fn without_merged_gre_checksum(f: &[u8], input: &[Vec<u8>]) -> Vec<u8> {
    let mut f = f.to_vec();
    if let Some(at) = gre_checksum_at(&f).filter(|_| !input.contains(&f)) {
        f[at..at + 2].fill(0);
    }
    f
}

/// Two consecutive data frames of one flow through GRE with C and K, the second shorter (so
/// the two GRE checksum words differ): the engine merges them, and so does a kernel that
/// compares the keys. Linux 6.18 compares the word after the fixed GRE header, which with C
/// is the checksum word, not the key (`gre_gro_receive`; `shared/research/linux-gro-rules.md`
/// on GRE): it merges only frames whose checksum words are equal. Whether the running kernel
/// compares the keys.
fn kernel_compares_keys(kernel: &Kernel) -> Result<bool, String> {
    let payload = [0x5a; 100];
    let mut tunnel = Tunnel::new(GreSpec::ipv4().checksum().key(42), OuterId::Inner);
    let frames: Vec<Vec<u8>> = [100, 60]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let spec = FrameSpec::ipv4_tcp(40000, 443)
                .seq(1000 + 100 * i as u32)
                .flags(TCP_ACK)
                .payload(&payload[..len]);
            let mut inner = vec![0u8; spec.len()];
            spec.write(&mut inner).expect("sized");
            let mut b = vec![0u8; 256];
            let n = tunnel
                .wrap(InnerFrame::Ethernet(&inner), &mut b)
                .expect("wrapped");
            b.truncate(n);
            b
        })
        .collect();
    assert_eq!(
        engine_gro::<Gre>(&frames).len(),
        1,
        "the engine merges the probe"
    );
    Ok(kernel.gro(&frames, |got| got.len() == 2)?.len() == 1)
}

#[test]
fn gre_gro_makes_the_frames_linux_gre_gro_makes() {
    let Some(kernel) = Kernel::or_skip("gre") else {
        return;
    };
    // The engine's configuration is what `engine_gro` builds; this says so here.
    let config = Config::gro().with_checksum_out(OutChecksum::Partial);
    assert_eq!(config.policy, lro_core::Policy::Gro);
    let keys = kernel_compares_keys(&kernel).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}",
        if keys {
            "this kernel compares GRE keys with C set: C+K compared"
        } else {
            "this kernel compares the GRE checksum word in place of the key when C and K are \
             set (the engine reads the key): C+K left out"
        }
    );
    let committed = [
        ("default.pcap.xz", 16 * BATCH),
        ("small.pcap.xz", 16 * BATCH),
    ];
    for (n, (capture, frames)) in captures(&committed).iter().enumerate() {
        // Whether a capture of one's own (LRO_KERNEL_GRO_PCAP, after the committed ones)
        // merges is its own affair.
        let own = n >= committed.len();
        for (name, spec, outer_id, merges) in variants() {
            let both = flags::C | flags::K;
            if !keys && spec.flags_version & both == both {
                continue;
            }
            let input = wrap(frames, Tunnel::new(spec, outer_id));
            let (mut compared, mut out, mut merged, mut left_out) = (0, 0, 0, 0);
            for (i, poll) in input.chunks(BATCH).enumerate() {
                let delivered = engine_gro::<Gre>(poll);
                if crowded(&delivered) {
                    left_out += 1;
                    continue;
                }
                let ours = frames_of(&delivered);
                for d in delivered.iter().filter(|d| d.info.frames > 1) {
                    assert!(
                        gre_checksum_holds(&d.bytes),
                        "{capture} through {name}: a merged segment's GRE checksum"
                    );
                }
                let seen = |f: &[u8]| without_merged_gre_checksum(f, poll);
                if let Err(e) = kernel.agrees_but(poll, &ours, seen) {
                    panic!(
                        "{capture} through {name}, poll {i} (frames {} on):\n{e}",
                        i * BATCH
                    );
                }
                compared += poll.len();
                out += ours.len();
                merged += delivered
                    .iter()
                    .filter(|d| d.info.tunnel.is_some() && d.info.frames > 1)
                    .count();
            }
            println!(
                "{capture} through {name}: {compared} frames in polls of {BATCH}, {out} out, \
                 the same from Linux GRO ({merged} tunnelled segments merged); {left_out} \
                 polls left out as crowded (a segment started with {MAX_GRO_SKBS} held)"
            );
            if !own {
                assert_eq!(
                    merged > 0,
                    merges,
                    "{capture} through {name}: merged segments"
                );
            }
        }
    }
}

/// One tunnel of a generated batch: its GRE (0 none, 1 K, 2 C, 3 TEB, 4 TEB with K, 5 TEB
/// with C), outer IPv6 or not, its outer IPv4 IDs (0 per tunnel, 1 the inner header's, 2
/// fixed) and key.
fn tunnel() -> impl Strategy<Value = Tunnel> {
    (0u8..6, any::<bool>(), 0u8..3, any::<u32>()).prop_map(|(gre, v6, ids, key)| {
        let g = if v6 { GreSpec::ipv6() } else { GreSpec::ipv4() };
        let g = match gre {
            0 => g,
            1 => g.key(key),
            2 => g.checksum(),
            3 => g.teb(),
            4 => g.key(key).teb(),
            _ => g.checksum().teb(),
        };
        let ids = match ids {
            0 => OuterId::Tunnel,
            1 => OuterId::Inner,
            _ => OuterId::Fixed(key as u16),
        };
        Tunnel::new(g, ids)
    })
}

/// What happens to one frame on its way into its tunnel: 10 another tunnel, 11 the outer TTL
/// (hop limit) one lower, 12 the outer TOS (traffic class) CE, 13 the outer DF off, 15 left
/// plain; nothing otherwise. (Not the S flag: Linux does not offer such a frame to GRO and
/// keeps its flow's segment open across it, where the engine delivers the segment first,
/// DESIGN.md invariant 2; the real-traffic test has a tunnel with S throughout.)
fn mischief() -> impl Strategy<Value = u8> {
    0u8..32
}

/// `frames` wrapped: each frame of flow `f` through `tunnels[f % n]`, as `mischief` says.
fn wrap_batch(
    frames: &[(Option<usize>, Vec<u8>)],
    tunnels: &mut [Tunnel],
    mischief: &[u8],
) -> Vec<Vec<u8>> {
    frames
        .iter()
        .zip(mischief.iter().cycle())
        .map(|((flow, f), &m)| {
            let n = tunnels.len();
            let t = flow.unwrap_or(0) % n;
            let t = if m == 10 { (t + 1) % n } else { t };
            let tunnel = &mut tunnels[t];
            let kept = tunnel.spec;
            match (m, &mut tunnel.spec.ip) {
                (11, IpSpec::V4(ip)) => ip.ttl -= 1,
                (11, IpSpec::V6(ip)) => ip.hop_limit -= 1,
                (12, IpSpec::V4(ip)) => ip.tos |= 3,
                (12, IpSpec::V6(ip)) => ip.traffic_class |= 3,
                (13, IpSpec::V4(ip)) => ip.df = false,
                _ => {}
            }
            let inner = InnerFrame::Ethernet(f);
            let out = match tunnel.spec.wrapped_len(inner) {
                Ok(len) if m != 15 => {
                    let mut b = vec![0u8; len];
                    tunnel.wrap(inner, &mut b).expect("sized");
                    b
                }
                _ => f.clone(),
            };
            tunnel.spec = kept;
            out
        })
        .collect()
}

/// The scenario generator's batches (as lro-core's kernel test makes them: untagged Ethernet,
/// IPv4 and IPv6, the generator's mutations, without CWR) wrapped in up to three tunnels, with
/// per-frame changes of the outer headers; 32 batches with a fixed seed
/// (`LRO_KERNEL_GRO_CASES`, `LRO_KERNEL_GRO_SEED`).
#[test]
fn gre_gro_makes_the_frames_linux_gre_gro_makes_of_generated_traffic() {
    let Some(kernel) = Kernel::or_skip("gre-gen") else {
        return;
    };
    let (mut runner, cases) = runner(32, 0x6c72_6f2d_6772_6567);
    let strategy = (
        wire_seeds(1),
        poll_steps(),
        proptest::collection::vec(tunnel(), 1..=3),
        proptest::collection::vec(mischief(), 1..=BATCH),
    );
    let (frames_in, frames_out) = (Cell::new(0usize), Cell::new(0usize));
    let left_out = Cell::new(0usize);
    let result = runner.run(&strategy, |(seeds, steps, mut tunnels, mischief)| {
        let input = wrap_batch(&wire_batch(&seeds, &steps, false), &mut tunnels, &mischief);
        let delivered = engine_gro::<Gre>(&input);
        if crowded(&delivered) {
            left_out.set(left_out.get() + 1);
            return Ok(());
        }
        for d in delivered.iter().filter(|d| d.info.frames > 1) {
            prop_assert!(
                gre_checksum_holds(&d.bytes),
                "a merged segment's GRE checksum"
            );
        }
        let ours = frames_of(&delivered);
        let seen = |f: &[u8]| without_merged_gre_checksum(f, &input);
        kernel
            .agrees_but(&input, &ours, seen)
            .map_err(TestCaseError::fail)?;
        frames_in.set(frames_in.get() + input.len());
        frames_out.set(frames_out.get() + ours.len());
        Ok(())
    });
    let (frames_in, frames_out) = (frames_in.get(), frames_out.get());
    println!(
        "{} of {cases} batches: {frames_in} frames in (most through GRE), {frames_out} out, the \
         same from Linux GRO ({} frames merged); {} batches left out as crowded (a segment \
         started with {MAX_GRO_SKBS} held)",
        cases as usize - left_out.get(),
        frames_in - frames_out,
        left_out.get()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The comparison saw merging at all.
    assert!(
        frames_out < frames_in,
        "nothing merged in {frames_in} frames"
    );
}
