//! `Policy::Gro` against the running kernel's GRO: the same frames, through Linux's GRO and
//! through the engine, must come out as the same frames, byte for byte (lengths, IPv4 header
//! checksums, the pseudo-header TCP checksum that Linux leaves for `CHECKSUM_PARTIAL`). And
//! the way back: every segment the engine merged, handed to Linux's GSO as a forwarding stack
//! would hand it (a `virtio_net_hdr` with the segment's `gso_size`), must be cut into exactly
//! the frames that went into it (DESIGN.md invariant 8, with Linux's segmentation).
//!
//! The kernel's side is `lro_testkit::kernel`: a veth pair with GRO on in a namespace of the
//! test's own, each batch put into one NAPI poll, and a second pair through which the kernel
//! segments in software (its module documentation says how). The engine's side: the same
//! frames, pushed with no checksum metadata (the kernel verifies in software as well), then
//! `flush_all`, with `Config::gro()` and `OutChecksum::Partial`; and again with the frames
//! hardware-verified and with CHECKSUM_COMPLETE sums, which must change nothing.
//!
//! What is compared: per flow, the multiset of frames that came out. Two differences are
//! deliberate, and the batches leave out the frames that would show them:
//! - Linux passes a frame it does not offer to TCP GRO (a bad checksum, IPv4 options, a
//!   fragment) up at once, ahead of a segment its flow holds, and keeps that segment open, so
//!   a later frame (a pure ACK's successor, a retransmission) can still join it. The engine
//!   delivers the held segment first (DESIGN.md invariant 2: a non-mergeable frame of a flow
//!   is preceded by that flow's held segment). Such frames are left out, and so are IPv6
//!   frames whose extension headers differ from their flow's: to Linux another flow, across
//!   which it keeps the segment open (`ipv6_gro_receive` compares the headers' length and
//!   bytes), to the engine a non-mergeable frame of the same flow.
//! - Before its 2026 AccECN change, Linux flushes on every frame with CWR; since, only a
//!   change of CWR flushes, and the engine follows that. A probe finds which rule the running
//!   kernel has; under the old one, frames with CWR are left out.
//!
//! A kernel built without 802.1Q support has no VLAN GRO at all; a second probe finds out,
//! and then only untagged frames are compared.
//!
//! Not a rule but a capacity: Linux holds at most 8 segments per hash bucket, and on a veth
//! all flows share one (the frames carry no skb hash). For a ninth segment it completes its
//! oldest, which the engine (64 flows) keeps open. A batch in which the engine started a
//! segment while holding 8 is left out as crowded, and counted (`lro_testkit::kernel::crowded`;
//! the generated batches, of 6 flows at most, never are).
//!
//! Everything else is Linux's to decide, byte for byte.
//!
//! Two sources of frames:
//! - the property tests' scenario generator (`lro_testkit::scenario`), 48 batches with a fixed
//!   seed: up to 6 flows over Ethernet (untagged, one 802.1Q tag, 802.1ad over 802.1Q),
//!   IPv4 and IPv6 (with extension headers), near-twin identities, and per frame the
//!   generator's mutations (short and long segments, PSH, FIN, SYN, RST, URG, ECE, CWR (see
//!   above), ACK and window changes, sequence gaps and retransmissions, SACK, timestamps,
//!   TOS/TTL and hop-limit changes, IP IDs fixed or jumping, padding, frames that are not IP);
//! - real Linux TCP traffic: the committed captures, in polls of 63 frames.
//!
//! Settings (environment): `LRO_KERNEL_GRO_CASES` (batches, 48), `LRO_KERNEL_GRO_SEED` (the
//! generator's seed, a number), `LRO_KERNEL_GRO_FULL=1` (every frame of the captures),
//! `LRO_KERNEL_GRO_PCAP` (one more Ethernet pcap to compare, whole), `LRO_KERNEL_GRO_DUMP` (a
//! file to write a failing batch to, as a pcap).
//!
//! Needs root, `ip`, `ethtool` and Linux 6.18 or later (the rules the engine follows; older
//! kernels differ, `shared/research/linux-gro-rules.md` says where); skips with the reason
//! otherwise. Deletes its namespace also when it fails.

use lro_core::encap::NoEncap;
use lro_core::testing::{FrameSpec, TCP_ACK, TCP_CWR, TPID_8021Q};
use lro_core::wire::write_be16;
use lro_core::RxMeta;
use lro_testkit::kernel::{
    by_flow, captures, crowded, describe, engine_gro, frames_of, gso_gives_back, most_held,
    poll_steps, runner, wire_batch, wire_seeds, Kernel, BATCH, MAX_GRO_SKBS,
};
use lro_testkit::oracle;
use proptest::test_runner::TestCaseError;
use std::cell::Cell;

/// Two consecutive data frames of each of `flows` flows (ports 40000 on), with `flags`,
/// through `vlan` (an 802.1Q tag) or untagged, interleaved: every flow's first frame, then
/// every flow's second.
fn interleaved(flows: u16, flags: u8, vlan: Option<u16>) -> Vec<Vec<u8>> {
    let payload = [0x5a; 100];
    (0..2u32)
        .flat_map(|i| {
            (0..flows).map(move |f| {
                let mut spec = FrameSpec::ipv4_tcp(40000 + f, 443)
                    .seq(1000 + 100 * i)
                    .flags(flags)
                    .payload(&payload);
                if let Some(tci) = vlan {
                    spec = spec.vlan(TPID_8021Q, tci);
                }
                let mut b = vec![0u8; spec.len()];
                spec.write(&mut b).expect("sized");
                b
            })
        })
        .collect()
}

/// What the running kernel's GRO does where kernels differ, the engine's rule being the
/// `true` one.
struct Rules {
    /// Frames with CWR merge with each other, only a change of CWR flushes (Linux since its
    /// 2026 AccECN change); before it, every frame with CWR flushes.
    cwr: bool,
    /// VLAN-tagged frames go through GRO (`vlan_gro_receive`, in a kernel built with 802.1Q
    /// support).
    vlan: bool,
}

impl Rules {
    /// Asks the kernel with two pairs of frames that the engine merges.
    fn probe(kernel: &Kernel) -> Result<Self, String> {
        let merges = |frames: Vec<Vec<u8>>| -> Result<bool, String> {
            assert_eq!(
                engine_gro::<NoEncap>(&frames).len(),
                1,
                "the engine merges the probe"
            );
            let out = kernel.gro(&frames, |got| got.len() == 2)?;
            match out.len() {
                1 => Ok(true),
                // Not merged: the frames come back as they went, tags included (the
                // receiver puts back what Linux took out of them).
                2 if by_flow(&out) == by_flow(&frames) => Ok(false),
                _ => Err(format!(
                    "probe: the frames did not come back as sent (\"lro\": as sent)\n{}",
                    describe(&frames, &out, &frames)
                )),
            }
        };
        Ok(Self {
            cwr: merges(interleaved(1, TCP_ACK | TCP_CWR, None))?,
            vlan: merges(interleaved(1, TCP_ACK, Some(7)))?,
        })
    }
}

#[test]
fn gro_policy_makes_the_frames_linux_gro_makes() {
    let Some(kernel) = Kernel::or_skip("gen") else {
        return;
    };
    let rules = Rules::probe(&kernel).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}",
        if rules.cwr {
            "this kernel merges frames with CWR as the engine does: CWR compared"
        } else {
            "this kernel flushes on every frame with CWR (before Linux's 2026 AccECN change, \
             which the engine follows): frames with CWR left out"
        }
    );
    println!(
        "{}",
        if rules.vlan {
            "this kernel coalesces VLAN-tagged frames: 802.1Q and 802.1ad compared"
        } else {
            "this kernel has no VLAN GRO (built without 802.1Q support): untagged frames only"
        }
    );
    // A fixed seed: the same batches every run (set LRO_KERNEL_GRO_SEED for others).
    let (mut runner, cases) = runner(48, 0x6c72_6f2d_6b67_726f);
    let (frames_in, frames_out, segmented) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0));
    let left_out = Cell::new(0usize);
    // With VLAN GRO, also flows with their tags in the frame (one 802.1Q tag, or 802.1ad
    // over 802.1Q).
    let strategy = (wire_seeds(if rules.vlan { 3 } else { 1 }), poll_steps());
    let result = runner.run(&strategy, |(seeds, steps)| {
        let input: Vec<Vec<u8>> = wire_batch(&seeds, &steps, rules.cwr)
            .into_iter()
            .map(|(_, f)| f)
            .collect();
        let out = engine_gro::<NoEncap>(&input);
        if crowded(&out) {
            left_out.set(left_out.get() + 1);
            return Ok(());
        }
        let ours = frames_of(&out);
        kernel.agrees(&input, &ours).map_err(TestCaseError::fail)?;
        let n = gso_gives_back(&kernel, &input, &out).map_err(TestCaseError::fail)?;
        segmented.set(segmented.get() + n);
        frames_in.set(frames_in.get() + input.len());
        frames_out.set(frames_out.get() + ours.len());
        Ok(())
    });
    let (frames_in, frames_out, segmented) = (frames_in.get(), frames_out.get(), segmented.get());
    let merged = frames_in - frames_out;
    println!(
        "{} of {cases} batches: {frames_in} frames in, {frames_out} out, the same from Linux \
         GRO ({merged} frames merged); Linux's GSO gave back the frames of {segmented} \
         segments; {} batches left out as crowded (a segment started with {MAX_GRO_SKBS} \
         held)",
        cases as usize - left_out.get(),
        left_out.get()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The comparison saw merging at all (a kernel that merged nothing would agree with an
    // engine that merged nothing), and segments went through GSO.
    assert!(
        merged > 0 && segmented > 0,
        "nothing merged in {frames_in} frames"
    );
}

/// The comparisons with the kernel can fail: a claim that the frames come out unmerged, where
/// Linux merges each flow's two, is refused with an account of both sides per flow; and
/// Linux's GSO of the engine's segments, which gives their frames back, is refused once the
/// frames claimed for a segment are another order of them.
#[test]
fn the_comparisons_with_the_kernel_refuse_a_wrong_claim() {
    let Some(kernel) = Kernel::or_skip("refuse") else {
        return;
    };
    // IPv4 IDs incrementing per flow, so that Linux's GSO can be asked to segment them.
    let flows = 4;
    let mut input = interleaved(flows, TCP_ACK, None);
    for (k, f) in input.iter_mut().enumerate() {
        let t = oracle::tcp_of(f, &RxMeta::ethernet(0)).expect("TCP");
        write_be16(f, t.l3 + 4, k as u16 / flows);
        oracle::fix_checksums(f, &t);
    }
    let err = kernel
        .agrees(&input, &input)
        .expect_err("Linux merges each flow; the claim does not");
    assert!(
        err.contains("linux: 254@1000\n") && err.contains("lro:   154@1000 154@1100\n"),
        "{err}"
    );
    let mut out = engine_gro::<NoEncap>(&input);
    kernel
        .agrees(&input, &frames_of(&out))
        .unwrap_or_else(|e| panic!("the engine's own frames: {e}"));
    assert_eq!(
        gso_gives_back(&kernel, &input, &out),
        Ok(usize::from(flows))
    );
    out[0].ids.reverse();
    let err = gso_gives_back(&kernel, &input, &out).expect_err("the frames in another order");
    assert!(
        err.starts_with("Linux's GSO of a segment of 2 frames"),
        "{err}"
    );
}

/// What the tests leave out as crowded ([`crowded`]): of 8 flows interleaved frame by frame
/// the engine holds 7 when the eighth starts, and Linux's GRO merges each flow as the engine
/// does; with a ninth, the engine holds 8 when it starts, and the batch is crowded. What Linux
/// makes of that one depends on its skb hash; this says what it did here.
#[test]
fn crowded_batches_are_those_linux_may_have_no_room_for() {
    let Some(kernel) = Kernel::or_skip("crowd") else {
        return;
    };
    let eight = interleaved(MAX_GRO_SKBS as u16, TCP_ACK, None);
    let out = engine_gro::<NoEncap>(&eight);
    assert_eq!(
        (most_held(&out), out.len()),
        (MAX_GRO_SKBS - 1, MAX_GRO_SKBS)
    );
    assert!(!crowded(&out));
    kernel
        .agrees(&eight, &frames_of(&out))
        .unwrap_or_else(|e| panic!("8 flows: {e}"));
    let nine = interleaved(MAX_GRO_SKBS as u16 + 1, TCP_ACK, None);
    let out = engine_gro::<NoEncap>(&nine);
    assert_eq!(
        (most_held(&out), out.len()),
        (MAX_GRO_SKBS, MAX_GRO_SKBS + 1)
    );
    assert!(crowded(&out));
    let linux = kernel
        .gro(&nine, |got| got.len() == nine.len())
        .unwrap_or_else(|e| panic!("9 flows: {e}"));
    println!(
        "9 flows interleaved: the engine merged each, Linux gave {} frames for the {} sent{}",
        linux.len(),
        nine.len(),
        if linux.len() == nine.len() {
            " (one bucket: each new flow completed the oldest segment)"
        } else {
            ""
        }
    );
}

/// Real Linux TCP traffic in polls of 63 frames: the built-in capture whole, and the first
/// 2,520 frames of each of the two traces `scripts/make-capture.sh` made for the DPDK
/// comparison (an ACK-heavy one, and a lossy one with SACK); every frame of all three with
/// `LRO_KERNEL_GRO_FULL=1`, and any Ethernet pcap named by `LRO_KERNEL_GRO_PCAP`.
#[test]
fn gro_policy_makes_the_frames_linux_gro_makes_of_real_traffic() {
    let Some(kernel) = Kernel::or_skip("cap") else {
        return;
    };
    for (name, frames) in captures(&[
        ("default.pcap.xz", usize::MAX),
        ("bench/ack-heavy.pcap.xz", 2520),
        ("bench/lossy.pcap.xz", 2520),
    ]) {
        let (mut compared, mut out, mut segmented, mut left_out) = (0, 0, 0, 0);
        for (i, poll) in frames.chunks(BATCH).enumerate() {
            let delivered = engine_gro::<NoEncap>(poll);
            if crowded(&delivered) {
                left_out += 1;
                continue;
            }
            let ours = frames_of(&delivered);
            if let Err(e) = kernel.agrees(poll, &ours) {
                panic!("{name}, poll {i} (frames {} on):\n{e}", i * BATCH);
            }
            match gso_gives_back(&kernel, poll, &delivered) {
                Ok(n) => segmented += n,
                Err(e) => panic!("{name}, poll {i} (frames {} on):\n{e}", i * BATCH),
            }
            compared += poll.len();
            out += ours.len();
        }
        println!(
            "{name}: {compared} frames in polls of {BATCH}, {out} out, the same from Linux GRO; \
             Linux's GSO gave back the frames of {segmented} segments; {left_out} polls left out \
             as crowded (a segment started with {MAX_GRO_SKBS} held)"
        );
        assert!(out < frames.len(), "{name}: nothing merged");
        assert!(segmented > 0, "{name}: no segment through GSO");
    }
}
