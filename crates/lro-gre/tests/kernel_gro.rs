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
//! checksum (see [`without_merged_gre_checksum`]).
//!
//! The kernel's side is `lro_testkit::kernel` (a veth pair with GRO on, in a namespace of the
//! test's own, each poll of frames put into one NAPI poll). Outer VLAN tags are left out: a
//! kernel without 802.1Q support (this project's VM) has no VLAN GRO at all, tunnelled or
//! not.
//!
//! `LRO_KERNEL_GRO_FULL=1` wraps every frame of the two captures (the default: the first
//! 1,008 of each); `LRO_KERNEL_GRO_DUMP` names a file to write a failing poll to, as a pcap.
//! Needs root, `ip`, `ethtool` and Linux 6.18 or later; skips with the reason otherwise.

mod common;

use lro_core::testing::{FrameSpec, TCP_ACK};
use lro_core::{Config, OutChecksum, RxMeta};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::wire::flags;
use lro_gre::Gre;
use lro_testkit::kernel::{engine_gro, frames_of, Kernel, BATCH};
use lro_testkit::oracle;

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
    let kernel = match Kernel::new("gre") {
        Ok(k) => k,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
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
    let full = std::env::var_os("LRO_KERNEL_GRO_FULL").is_some();
    for capture in ["default.pcap.xz", "small.pcap.xz"] {
        let frames: Vec<Vec<u8>> = common::committed_capture(capture)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        let frames = &frames[..if full {
            frames.len()
        } else {
            (16 * BATCH).min(frames.len())
        }];
        for (name, spec, outer_id, merges) in variants() {
            let both = flags::C | flags::K;
            if !keys && spec.flags_version & both == both {
                continue;
            }
            let input = wrap(frames, Tunnel::new(spec, outer_id));
            let (mut out, mut merged) = (0, 0);
            for (i, poll) in input.chunks(BATCH).enumerate() {
                let delivered = engine_gro::<Gre>(poll);
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
                out += ours.len();
                merged += delivered
                    .iter()
                    .filter(|d| d.info.tunnel.is_some() && d.info.frames > 1)
                    .count();
            }
            println!(
                "{capture} through {name}: {} frames in polls of {BATCH}, {out} out, the same \
                 from Linux GRO ({merged} tunnelled segments merged)",
                input.len()
            );
            assert_eq!(
                merged > 0,
                merges,
                "{capture} through {name}: merged segments"
            );
        }
    }
}
