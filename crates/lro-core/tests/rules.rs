//! Deterministic cases for rules the properties exercise at random: each is the shrunk,
//! hand-readable form of a property failure or an adversarial corner, checked from the
//! sink's point of view only.
#![cfg(feature = "test-utils")]

use lro_core::testing::{FrameSpec, IpSpec, TCP_ACK, TCP_ECE, TCP_FIN, TCP_PSH};
use lro_core::{
    Cause, Config, Engine, FlushReason, LinkKind, PassReason, RxChecksum, RxMeta, Segment, Sink,
    Sizes, Verdict,
};

/// What the sink saw: the frames of each segment (head first, as rewritten), and the
/// released frames.
#[derive(Default, Debug)]
struct Rec {
    segments: Vec<Vec<Vec<u8>>>,
    causes: Vec<lro_core::Cause>,
    /// Each segment's `gso_segs` and `gso_size`.
    gso: Vec<(u16, u16)>,
    released: Vec<Vec<u8>>,
}

impl Sink<Vec<u8>> for Rec {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        self.causes.push(seg.info().cause);
        self.gso.push((seg.info().gso_segs, seg.info().gso_size));
        self.segments.push(seg.into_frames().collect());
    }

    fn release(&mut self, frame: Vec<u8>) {
        self.released.push(frame);
    }
}

/// Ethernet metadata at `time` with a checksum the NIC verified.
fn verified_at(time: u64) -> RxMeta {
    RxMeta::ethernet(time).with_checksum(RxChecksum::Verified)
}

fn frame(spec: FrameSpec<'_>) -> Vec<u8> {
    lro_testkit::frame::bytes_of(&spec)
}

const MSS: usize = 100;

/// The flow's frames, with IPv4 ID `id`: the tag by which a frame is found in the output
/// (the engine never rewrites a head's ID, and incrementing IDs are what Gro expects).
fn spec(id: u16) -> FrameSpec<'static> {
    let mut s = FrameSpec::ipv4_tcp(40000, 80);
    if let IpSpec::V4(ip) = &mut s.ip {
        ip.id = id;
    }
    s
}

fn data(id: u16, seq: u32, ack: u32, flags: u8) -> Vec<u8> {
    let payload = [id as u8; MSS];
    frame(spec(id).seq(seq).ack(ack).flags(flags).payload(&payload))
}

fn pure_ack(id: u16, seq: u32, ack: u32) -> Vec<u8> {
    frame(spec(id).seq(seq).ack(ack).flags(TCP_ACK))
}

fn ip_id(f: &[u8]) -> u16 {
    u16::from_be_bytes([f[18], f[19]])
}

/// Asserts `dup` came out as a segment of its own, byte for byte as pushed.
fn assert_alone_and_unchanged(rec: &Rec, dup: &[u8]) {
    let seg = rec
        .segments
        .iter()
        .find(|s| s.iter().any(|f| ip_id(f) == ip_id(dup)))
        .expect("the duplicate ACK came back in a segment");
    assert_eq!(
        seg.len(),
        1,
        "duplicate ACK merged with {} frames",
        seg.len() - 1
    );
    assert_eq!(seg[0], dup, "duplicate ACK rewritten");
}

fn run(config: Config, frames: &[(Vec<u8>, RxMeta)]) -> (Rec, Vec<Verdict>) {
    let mut engine: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(config);
    let mut rec = Rec::default();
    let verdicts = frames
        .iter()
        .map(|(f, m)| engine.push(f.clone(), m, &mut rec))
        .collect();
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    (rec, verdicts)
}

/// Lro: a pure ACK with FIN or PSH is never absorbed, even one that advances the ACK of the
/// segment its flow holds (which a pure ACK without them would supersede): the held segment
/// goes first, then the ACK alone, as it came (FreeBSD `tcp_lro_condense` pushes those out).
/// Asked of both paths: header prediction (checksums verified by the NIC) and the parser
/// (checked in software).
#[test]
fn pure_ack_with_fin_or_psh_is_not_absorbed() {
    for meta in [verified_at(0), RxMeta::ethernet(0)] {
        let with_held = |last: Vec<u8>| {
            run(
                Config::lro(),
                &[
                    (data(1, 1000, 5, TCP_ACK), meta),
                    (data(2, 1000 + MSS as u32, 5, TCP_ACK), meta),
                    (last, meta),
                ],
            )
        };
        let ack_seq = 1000 + 2 * MSS as u32;
        for flag in [TCP_FIN, TCP_PSH] {
            let flagged = frame(spec(3).seq(ack_seq).ack(9).flags(TCP_ACK | flag));
            let (rec, verdicts) = with_held(flagged.clone());
            let case = format!("flag {flag:#x}, {:?}", meta.checksum);
            assert_eq!(verdicts[2], Verdict::Passed(PassReason::PushFin), "{case}");
            assert!(rec.released.is_empty(), "{case}: absorbed");
            assert_eq!(rec.segments.len(), 2, "{case}");
            assert_eq!(rec.segments[0].len(), 2, "{case}: the data first");
            assert_eq!(rec.segments[1], [flagged], "{case}");
        }
        // The same ACK without the flag is absorbed: the flag alone decides.
        let (rec, verdicts) = with_held(pure_ack(3, ack_seq, 9));
        assert_eq!(verdicts[2], Verdict::Absorbed, "{:?}", meta.checksum);
        assert_eq!(rec.released.len(), 1);
    }
}

/// Lro: the peer's data segment is held, its next data segment is lost, then it sends a
/// duplicate ACK (same ACK number and window, no data) whose sequence number is past the hole,
/// then more data. The duplicate must reach the stack as such (RFC 5681 section 2: it signals
/// loss to our sender); it must not become the head of the following data.
#[test]
fn duplicate_ack_after_a_sequence_gap_is_not_merged() {
    let meta = RxMeta::ethernet(0);
    let d1 = data(1, 1000, 5, TCP_ACK);
    let dup = pure_ack(2, 1200, 5);
    let d3 = data(3, 1200, 5, TCP_ACK);
    let (rec, _) = run(
        Config::lro(),
        &[(d1, meta), (dup.clone(), meta), (d3, meta)],
    );
    assert_alone_and_unchanged(&rec, &dup);
}

/// Lro: the flow's previous frame was delivered on its own (a PSH segment), so nothing is
/// held when a duplicate ACK of it arrives; the duplicate must still not be merged with the
/// data that follows.
#[test]
fn duplicate_ack_after_a_frame_delivered_alone_is_not_merged() {
    let meta = RxMeta::ethernet(0);
    let d1 = data(1, 1000, 5, TCP_ACK | TCP_PSH);
    let dup = pure_ack(2, 1100, 5);
    let d2 = data(3, 1100, 5, TCP_ACK);
    let (rec, _) = run(
        Config::lro(),
        &[(d1, meta), (dup.clone(), meta), (d2, meta)],
    );
    // The data frame passed alone counts as one data frame; the duplicate ACK as none.
    assert_eq!(rec.gso[..2], [(1, 0), (0, 0)]);
    assert_alone_and_unchanged(&rec, &dup);
}

/// Lro: a run of duplicate ACKs (fast retransmit needs three; each further one inflates the
/// congestion window in recovery) followed by the cumulative ACK of the recovery. Every
/// duplicate must come out on its own and unchanged. The engine passes a duplicate when it
/// sees the previous ACK held, but then holds the next one as a new head (nothing is held any
/// more), so the recovery ACK is absorbed into, and overwrites, the fourth duplicate.
#[test]
fn every_duplicate_in_a_run_survives() {
    let meta = RxMeta::ethernet(0);
    let mut frames = vec![(pure_ack(1, 1000, 5), meta)];
    let dups: Vec<Vec<u8>> = (2..6).map(|id| pure_ack(id, 1000, 5)).collect();
    frames.extend(dups.iter().map(|d| (d.clone(), meta)));
    frames.push((pure_ack(6, 1000, 9000), meta));
    let (rec, _) = run(Config::lro(), &frames);
    for dup in &dups {
        assert_alone_and_unchanged(&rec, dup);
    }
}

/// Lro: a pure ACK with the newest ACK number of the flow but a wider window is a window
/// update, not a duplicate (RFC 5681 section 2 asks for the same window too): it supersedes
/// the held ACK, and what is delivered carries its window. A duplicate would pass alone.
#[test]
fn a_window_update_supersedes_the_held_ack() {
    let meta = RxMeta::ethernet(0);
    let ack = |id: u16, ack: u32, window: u16| {
        frame(spec(id).seq(1000).ack(ack).flags(TCP_ACK).window(window))
    };
    let (a1, a2, update) = (ack(1, 5, 1000), ack(2, 6, 1000), ack(3, 6, 1100));
    let (rec, verdicts) = run(Config::lro(), &[(a1, meta), (a2, meta), (update, meta)]);
    assert_eq!(verdicts[2], Verdict::Absorbed);
    let last = rec.segments.last().expect("a segment");
    assert_eq!(u16::from_be_bytes([last[0][48], last[0][49]]), 1100);
}

/// Isolation across link types: a raw-IP frame and an Ethernet frame with all-zero MAC
/// addresses and no tags carry the same addresses and ports, but they come from different
/// links (`RxMeta::link`) and must never be merged (Linux `gro_list_prepare` compares the
/// device and the whole MAC header).
#[test]
fn raw_ip_and_zero_mac_ethernet_frames_are_not_merged() {
    for config in [Config::gro(), Config::lro()] {
        let mut eth = FrameSpec::ipv4_tcp(40000, 80).seq(1000).ack(5);
        if let lro_core::testing::LinkSpec::Ethernet(e) = &mut eth.link {
            e.dst = [0; 6];
            e.src = [0; 6];
        }
        let payload = [1u8; MSS];
        let f1 = frame(eth.payload(&payload));
        let f2 = frame(eth.raw_ip().seq(1000 + MSS as u32).payload(&payload));
        let (rec, _) = run(
            config,
            &[(f1, RxMeta::ethernet(0)), (f2, RxMeta::raw_ip(0))],
        );
        assert_eq!(
            rec.segments.len(),
            2,
            "{config:?}: merged across link types"
        );
    }
}

/// Header prediction compares the link kind too: the next frame of a predicted Ethernet flow,
/// byte for byte, offered as raw IP or IPoIB is not the flow's (the general path reads it as
/// that link's frame: a MAC address where the IP version should be, not IP) and goes alone,
/// unchanged. The template's bytes alone would take it.
#[test]
fn a_predicted_flows_bytes_from_another_link_are_not_merged() {
    for config in [Config::gro(), Config::lro()] {
        for link in [LinkKind::RawIp, LinkKind::Ipoib] {
            let payload = [1u8; MSS];
            let at = |seq: u32| frame(spec(1).seq(seq).ack(5).timestamps(7, 9).payload(&payload));
            let (f1, f2, f3) = (at(1000), at(1100), at(1200));
            let eth = RxMeta::ethernet(0);
            let (rec, verdicts) = run(
                config,
                &[
                    (f1, eth),
                    (f2, eth),
                    (f3.clone(), RxMeta::ethernet(0).with_link(link)),
                ],
            );
            assert!(
                matches!(verdicts[2], Verdict::Passed(_)),
                "{config:?} {link:?}: {:?}",
                verdicts[2]
            );
            // Not IP on its link, it goes as it came (before the held segment, which it does
            // not belong with).
            assert_eq!(rec.segments.len(), 2, "{config:?} {link:?}");
            assert_eq!(rec.segments[0], vec![f3], "{config:?} {link:?}");
            assert_eq!(rec.segments[1].len(), 2, "{config:?} {link:?}");
        }
    }
}

/// Gro keeps a pure ACK apart and, being of the flow, after the flow's held data.
#[test]
fn gro_pure_ack_follows_held_data() {
    let meta = RxMeta::ethernet(0);
    let d1 = data(1, 1000, 5, TCP_ACK);
    let d2 = data(2, 1100, 5, TCP_ACK);
    let ack = pure_ack(3, 1200, 6);
    let (rec, verdicts) = run(
        Config::gro(),
        &[(d1.clone(), meta), (d2, meta), (ack.clone(), meta)],
    );
    assert_eq!(verdicts[0], Verdict::Held);
    assert_eq!(verdicts[1], Verdict::Merged);
    assert!(matches!(verdicts[2], Verdict::Passed(_)));
    assert_eq!(rec.segments.len(), 2);
    assert_eq!(rec.segments[0].len(), 2);
    assert_eq!(rec.segments[1], vec![ack]);
}

/// Lro, hardware-verified frames: a pure ACK of the reverse direction that starts a segment
/// between two data frames of a bulk flow does not take header prediction's hot slot (which
/// only data frames use), so the flow's next data frame is still predicted.
#[test]
fn reverse_pure_ack_leaves_prediction_to_the_data_flow() {
    let meta = verified_at(0);
    let reverse = |id: u16, ack: u32| {
        let mut s = FrameSpec::ipv4_tcp(80, 40000);
        if let IpSpec::V4(ip) = &mut s.ip {
            ip.id = id;
            std::mem::swap(&mut ip.src, &mut ip.dst);
        }
        frame(s.seq(5).ack(ack).flags(TCP_ACK))
    };
    let frames = [
        data(1, 1000, 5, TCP_ACK),
        // Nothing known of the reverse flow yet: delivered alone, and remembered.
        reverse(2, 1000),
        // Advances the ACK: held, heading a segment of its own.
        reverse(3, 1100),
        data(4, 1100, 5, TCP_ACK),
    ];
    let mut engine: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    let verdicts: Vec<_> = frames
        .iter()
        .map(|f| engine.push(f.clone(), &meta, &mut rec))
        .collect();
    engine.flush_all(&mut rec);
    assert_eq!(verdicts[0], Verdict::Held);
    assert!(matches!(verdicts[1], Verdict::Passed(_)), "{verdicts:?}");
    assert_eq!(verdicts[2], Verdict::Held);
    assert_eq!(verdicts[3], Verdict::Merged);
    assert_eq!(engine.stats().predicted, 1, "the data flow's next frame");
    let sizes: Vec<usize> = rec.segments.iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 4);
    assert!(sizes.contains(&2), "the two data frames merged: {sizes:?}");
}

/// Lro: a segment headed by a pure ACK (the reverse direction's, advancing) takes the data
/// that follows it. Its `gso_segs` counts the data frames only, and its MSS is the first data
/// frame's payload: a shorter data frame after it closes the segment (`rules::completes`).
#[test]
fn a_segment_headed_by_a_pure_ack_counts_only_its_data() {
    let reverse = |id: u16, seq: u32, ack: u32, payload: &[u8]| {
        frame(ack_spec(80, id, ack).seq(seq).payload(payload))
    };
    let frames = [
        // Remembered, so that the next, advancing ACK may head a segment.
        reverse(1, 5, 1000, &[]),
        reverse(2, 5, 1100, &[]),
        reverse(3, 5, 1100, &[3; MSS]),
        reverse(4, 5 + MSS as u32, 1100, &[4; MSS]),
        reverse(5, 5 + 2 * MSS as u32, 1100, &[5; MSS / 2]),
    ];
    let meta = RxMeta::ethernet(0);
    let (rec, verdicts) = run(
        Config::lro(),
        &frames.iter().map(|f| (f.clone(), meta)).collect::<Vec<_>>(),
    );
    assert!(matches!(verdicts[0], Verdict::Passed(_)), "{verdicts:?}");
    assert_eq!(
        rec.gso[0],
        (0, 0),
        "a pure ACK passed alone carries no data"
    );
    assert_eq!(verdicts[1], Verdict::Held);
    assert_eq!(verdicts[2..4], [Verdict::Merged, Verdict::Merged]);
    assert_eq!(
        verdicts[4],
        Verdict::MergedAndFlushed(FlushReason::ShortSegment),
        "the first data frame's payload is the MSS"
    );
    assert_eq!(rec.segments.len(), 2);
    assert_eq!(rec.segments[1].len(), 4);
    assert_eq!(
        rec.gso[1],
        (3, MSS as u16),
        "three data frames, the largest {MSS}"
    );
}

/// A flow of pure ACKs from port `port` (the reverse direction of a bulk transfer), with
/// timestamps as Linux sends them (66 bytes: a pure ACK without options is a runt that
/// Ethernet pads, and padding is the general path's).
fn ack_flow(port: u16, id: u16, ack: u32) -> Vec<u8> {
    frame(ack_spec(port, id, ack))
}

/// [`ack_flow`]'s frame as a spec, for variants of it.
fn ack_spec(port: u16, id: u16, ack: u32) -> FrameSpec<'static> {
    let mut s = FrameSpec::ipv4_tcp(port, 40000);
    if let IpSpec::V4(ip) = &mut s.ip {
        ip.id = id;
        std::mem::swap(&mut ip.src, &mut ip.dst);
    }
    s.seq(7).ack(ack).flags(TCP_ACK).timestamps(ack, 9)
}

/// `Lro` with a single ACK record, which every flow's ACK state shares: a flow never reads
/// another flow's record as its own (its first pure ACK is still unknown), and a flow's SYN or
/// RST forgets its own record only, not the other flow's that took the slot since.
#[test]
fn flows_sharing_an_ack_record_keep_their_own_state() {
    let meta = RxMeta::ethernet(0);
    let mut engine: Engine<Vec<u8>, Sizes<8, 16, 1>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    let unknown = Verdict::Passed(lro_core::PassReason::UnknownAck);
    let mut push = |f: Vec<u8>| engine.push(f, &meta, &mut rec);
    assert_eq!(push(ack_flow(80, 1, 1000)), unknown);
    assert_eq!(
        push(ack_flow(81, 2, 5000)),
        unknown,
        "flow 81 read flow 80's ACK"
    );
    assert_eq!(push(ack_flow(80, 3, 1100)), unknown);
    let syn = frame(ack_spec(81, 4, 5000).flags(lro_core::testing::TCP_SYN));
    assert!(matches!(push(syn), Verdict::Passed(_)));
    assert_eq!(
        push(ack_flow(80, 5, 1200)),
        Verdict::Held,
        "flow 81's SYN forgot flow 80's ACK"
    );
}

/// Pushes `frames` through a `Gro` engine of 4 entries, with or without header prediction:
/// the verdicts, what the sink saw, and how many frames prediction read.
fn gro_run(frames: &[Vec<u8>], prediction: bool) -> (Vec<Verdict>, Rec, u64) {
    let meta = verified_at(0);
    let config = Config::gro().with_header_prediction(prediction);
    let mut engine: Engine<Vec<u8>, Sizes<4, 16>> = Engine::new(config);
    let mut rec = Rec::default();
    let verdicts = frames
        .iter()
        .map(|f| engine.push(f.clone(), &meta, &mut rec))
        .collect();
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    (verdicts, rec, engine.stats().predicted)
}

/// `Gro` passes every pure ACK alone, so their flow never starts a segment; it still gets an
/// idle entry, and its next pure ACKs are read by header prediction, with the same verdicts
/// and output as the parser's.
#[test]
fn gro_pure_ack_flows_are_predicted() {
    let mut frames = Vec::new();
    for i in 0..6u16 {
        frames.push(data(i, 1000 + u32::from(i) * MSS as u32, 5, TCP_ACK));
        frames.push(ack_flow(80, 100 + i, 2000 + u32::from(i) * 10));
    }
    let (verdicts, rec, predicted) = gro_run(&frames, true);
    let (verdicts_off, rec_off, predicted_off) = gro_run(&frames, false);
    assert_eq!(verdicts, verdicts_off);
    assert_eq!(rec.segments, rec_off.segments);
    assert_eq!(rec.causes, rec_off.causes);
    assert_eq!(predicted_off, 0);
    for v in verdicts.iter().skip(1).step_by(2) {
        assert_eq!(*v, Verdict::Passed(lro_core::PassReason::PureAck));
    }
    // Five data frames appended and five pure ACKs after the first of their flow.
    assert_eq!(predicted, 10, "{verdicts:?}");
}

/// With more pure-ACK flows than entries, they take fresh entries or each other's (the
/// index's own test shows which), never a held one: the data flow's segment goes on, and
/// everything comes out as without header prediction.
#[test]
fn gro_pure_ack_flows_take_no_held_entry() {
    let mut frames = vec![data(1, 1000, 5, TCP_ACK)];
    // Twelve flows of one pure ACK each, eight times over, while the data flow is held.
    for round in 0..8u16 {
        for port in 0..12u16 {
            frames.push(ack_flow(
                1000 + port,
                round * 16 + port,
                3000 + u32::from(round),
            ));
        }
    }
    frames.push(data(2, 1100, 5, TCP_ACK));
    let (verdicts, rec, _) = gro_run(&frames, true);
    let (verdicts_off, rec_off, _) = gro_run(&frames, false);
    assert_eq!(verdicts, verdicts_off);
    assert_eq!(rec.segments, rec_off.segments);
    assert_eq!(
        verdicts[verdicts.len() - 1],
        Verdict::Merged,
        "{verdicts:?}"
    );
}

/// A `Gro` flow whose pure ACK got an idle entry and that then sends data is a data flow: once
/// its segment is out, other pure-ACK flows never take its entry (they take only each other's),
/// so its next data frame is still found by header prediction.
#[test]
fn a_pure_ack_entry_that_held_data_is_not_given_to_other_ack_flows() {
    let meta = verified_at(0);
    let config = Config::gro().with_header_prediction(true);
    // One entry: the flow's pure ACK takes it, fresh.
    let mut engine: Engine<Vec<u8>, Sizes<1, 16>> = Engine::new(config);
    let mut rec = Rec::default();
    let payload = [7u8; MSS];
    let flow =
        |id: u16, seq: u32, payload: &[u8]| frame(ack_spec(80, id, 100).seq(seq).payload(payload));
    engine.push(flow(1, 7, &[]), &meta, &mut rec);
    assert_eq!(
        engine.push(flow(2, 7, &payload), &meta, &mut rec),
        Verdict::Held
    );
    engine.flush_all(&mut rec);
    // Sixteen other pure-ACK flows: every eighth miss may take another pure-ACK flow's entry.
    for port in 0..16u16 {
        engine.push(ack_flow(1000 + port, 10 + port, 3000), &meta, &mut rec);
    }
    assert_eq!(
        engine.stats().forgotten,
        0,
        "the data flow's entry was taken"
    );
    let before = engine.stats().predicted;
    let next = flow(3, 7 + MSS as u32, &payload);
    assert_eq!(engine.push(next, &meta, &mut rec), Verdict::Held);
    assert_eq!(
        engine.stats().predicted,
        before + 1,
        "the data flow lost its template"
    );
}

/// The entry a pure ACK gets under `Gro` carries the IP fields of its template: header
/// prediction takes them from the entry for the data frame that starts a segment there, and
/// the next frame, parsed, is judged against them (found by the differential property: a stale
/// TTL flushed for `ip_fields` where the parser's run said `flags`).
#[test]
fn gro_pure_ack_entry_keeps_the_ip_fields_of_its_template() {
    let reverse = |id: u16, seq: u32, flags: u8, payload: &[u8]| {
        let mut s = FrameSpec::ipv4_tcp(80, 40000);
        if let IpSpec::V4(ip) = &mut s.ip {
            ip.id = id;
            std::mem::swap(&mut ip.src, &mut ip.dst);
        }
        frame(
            s.seq(seq)
                .ack(100)
                .flags(flags)
                .timestamps(5, 9)
                .payload(payload),
        )
    };
    let payload = [7u8; MSS];
    let frames = [
        reverse(1, 7, TCP_ACK, &[]),
        // Predicted against the pure ACK's template: starts a segment in its entry.
        reverse(2, 7, TCP_ACK, &payload),
        // ECE: not the template's flags, so parsed, and judged against the entry.
        reverse(3, 7 + MSS as u32, TCP_ACK | TCP_ECE, &payload),
    ];
    let (verdicts, rec, predicted) = gro_run(&frames, true);
    let (verdicts_off, rec_off, _) = gro_run(&frames, false);
    assert_eq!(predicted, 1, "{verdicts:?}");
    assert_eq!(verdicts, verdicts_off);
    assert_eq!(rec.causes, rec_off.causes);
    assert_eq!(
        rec.causes[1],
        lro_core::Cause::Flushed(lro_core::FlushReason::Flags)
    );
}

/// Pushes `frames` (NIC-verified checksums) into a small engine of `config`, flushing
/// everything before frame `flush_before` and at the end, with header prediction and again
/// without it, and checks that the two runs agree (verdicts, output, causes). Returns each
/// frame's verdict, what was delivered, and which frames prediction read.
fn run_verified(
    config: Config,
    frames: &[Vec<u8>],
    flush_before: Option<usize>,
) -> (Vec<Verdict>, Rec, Vec<bool>) {
    let run = |prediction| run_csum(config, prediction, frames, flush_before, Csum::Verified);
    let (verdicts, rec, predicted, _) = run(true);
    let (verdicts_off, rec_off, _, _) = run(false);
    let policy = config.policy;
    assert_eq!(verdicts, verdicts_off, "{policy:?}");
    assert_eq!(rec.segments, rec_off.segments, "{policy:?}");
    assert_eq!(rec.causes, rec_off.causes, "{policy:?}");
    (verdicts, rec, predicted)
}

/// What the receiver knows of a frame's checksums.
#[derive(Debug, Clone, Copy)]
enum Csum {
    /// The NIC verified them.
    Verified,
    /// Nothing: the engine verifies in software.
    Software,
    /// The NIC's sum of the frame after the link header.
    Complete,
}

impl Csum {
    /// What the NIC reports of `frame`, received on a link of kind `link`.
    fn report(self, frame: &[u8], link: LinkKind) -> RxChecksum {
        match self {
            Csum::Verified => RxChecksum::Verified,
            Csum::Software => RxChecksum::None,
            Csum::Complete => {
                RxChecksum::Complete(lro_core::testing::complete_checksum(frame, link))
            }
        }
    }
}

/// [`run_verified`] with the checksum state `csum`.
fn run_csum(
    config: Config,
    prediction: bool,
    frames: &[Vec<u8>],
    flush_before: Option<usize>,
    csum: Csum,
) -> (Vec<Verdict>, Rec, Vec<bool>, lro_core::Stats) {
    let meta = |f: &[u8]| RxMeta::ethernet(0).with_checksum(csum.report(f, LinkKind::Ethernet));
    let mut engine: Engine<Vec<u8>, Sizes<4, 16>> =
        Engine::new(config.with_header_prediction(prediction));
    let mut rec = Rec::default();
    let mut verdicts = Vec::new();
    let mut predicted = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if flush_before == Some(i) {
            engine.flush_all(&mut rec);
        }
        let before = engine.stats().predicted;
        verdicts.push(engine.push(f.clone(), &meta(f), &mut rec));
        predicted.push(engine.stats().predicted > before);
    }
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    let stats = lro_testkit::check::without_prediction(engine.stats());
    (verdicts, rec, predicted, stats)
}

/// Header prediction's coverage, which the output alone cannot show (a frame prediction
/// declines takes the parser and comes out the same): every frame after the head of a data
/// flow is predicted, on every link layout (untagged, one in-line VLAN tag, QinQ, raw IP, a
/// stripped tag, IPoIB), IPv4 and IPv6, with and without timestamps, for every checksum
/// report (verified, a CHECKSUM_COMPLETE sum, none), under both policies; and the flow comes
/// out as one segment.
#[test]
fn every_common_layout_is_predicted_under_every_checksum_report() {
    const FRAMES: u16 = 6;
    for which in 0..6u8 {
        for v6 in [false, true] {
            for timestamps in [false, true] {
                let payload = [0x5au8; MSS];
                let frames: Vec<(Vec<u8>, RxMeta)> = (0..FRAMES)
                    .map(|k| {
                        let mut s = if v6 {
                            FrameSpec::ipv6_tcp(40000, 80)
                        } else {
                            spec(100 + k)
                        };
                        s = s.seq(1000 + u32::from(k) * MSS as u32).ack(1);
                        s = s.flags(TCP_ACK).payload(&payload);
                        if timestamps {
                            s = s.timestamps(7, 9);
                        }
                        let (s, meta) = lro_testkit::built::link_shape(s, which, 5);
                        (frame(s), meta)
                    })
                    .collect();
                for csum in [Csum::Verified, Csum::Complete, Csum::Software] {
                    for config in [Config::lro(), Config::gro()] {
                        let case = format!(
                            "layout {which}, v6 {v6}, timestamps {timestamps}, {csum:?}, {:?}",
                            config.policy
                        );
                        let mut engine: Engine<Vec<u8>, Sizes<4, 16>> = Engine::new(config);
                        let mut rec = Rec::default();
                        for (f, meta) in &frames {
                            let meta = meta.with_checksum(csum.report(f, meta.link));
                            engine.push(f.clone(), &meta, &mut rec);
                        }
                        engine.flush_all(&mut rec);
                        assert_eq!(engine.stats().predicted, u64::from(FRAMES - 1), "{case}");
                        assert_eq!(rec.segments.len(), 1, "{case}");
                        assert_eq!(rec.segments[0].len(), usize::from(FRAMES), "{case}");
                    }
                }
            }
        }
    }
}

/// Header prediction follows the layout of the first segment's head even when that head is a
/// pure ACK, until a data flow sets it: flows of pure ACKs alone on a layout other than
/// untagged Ethernet IPv4 (here IPv6) are predicted after their first frames, under both
/// policies, with the parser's verdicts and output. (Two flows: the second one's entry is not
/// entry 0, which every candidate names before prediction has proposed any.)
#[test]
fn lone_pure_ack_flows_on_another_layout_are_predicted() {
    let v6_ack = |port: u16, ack: u32| {
        frame(
            FrameSpec::ipv6_tcp(port, 40000)
                .seq(7)
                .ack(ack)
                .flags(TCP_ACK)
                .timestamps(ack, 9),
        )
    };
    let mut frames = vec![v6_ack(80, 2000), v6_ack(80, 2100)];
    frames.extend((0..6).map(|i| v6_ack(81, 2000 + i * 100)));
    for config in [Config::lro(), Config::gro()] {
        let (_, _, predicted) = run_verified(config, &frames, None);
        let policy = config.policy;
        assert!(
            predicted[4..].iter().all(|&p| p),
            "{policy:?}: {predicted:?}"
        );
    }
}

/// Once a data flow has set header prediction's layout, a segment headed by a pure ACK of
/// another layout does not move it: an IPv6 data flow interleaved with the pure ACKs of an
/// IPv4 flow (which start a segment of their own under `Lro`) keeps every data frame after its
/// head predicted, under both policies. (Were the ACKs' segment to take it, prediction would
/// find the ACKs instead, and no data frame.)
#[test]
fn a_pure_ack_segment_does_not_take_prediction_from_a_data_flow() {
    let payload = [0x33u8; MSS];
    let data = |k: u32| {
        frame(
            FrameSpec::ipv6_tcp(40000, 80)
                .seq(1000 + k * MSS as u32)
                .ack(1)
                .flags(TCP_ACK)
                .payload(&payload),
        )
    };
    let ack = |k: u32| frame(spec(50).seq(7).ack(2000 + 100 * k).flags(TCP_ACK));
    // An IPv4 data frame of a third flow first, then the ACK flow's: the data flow's entry
    // is not entry 0, which every candidate names before prediction has proposed any.
    let other = frame(
        FrameSpec::ipv4_tcp(41000, 80)
            .seq(5)
            .ack(1)
            .flags(TCP_ACK)
            .payload(&payload),
    );
    let frames: Vec<Vec<u8>> = [other, ack(0)]
        .into_iter()
        .chain((0..6).flat_map(|k| [data(k), ack(k + 1)]))
        .collect();
    for config in [Config::lro(), Config::gro()] {
        let (_, rec, predicted) = run_verified(config, &frames, None);
        let policy = config.policy;
        let data_predicted: Vec<bool> = predicted.iter().skip(2).step_by(2).copied().collect();
        assert_eq!(
            data_predicted,
            [false, true, true, true, true, true],
            "{policy:?}: {predicted:?}"
        );
        assert!(rec.segments.iter().any(|s| s.len() == 6), "{policy:?}");
    }
}

/// A SACK pure ACK that header prediction reads as a variant and passes alone with nothing of
/// its flow held updates the `Lro` ACK memory as the parser's reading does: the plain ACK
/// after it that repeats its ACK state is a duplicate and goes alone, not into a segment.
#[test]
fn a_lone_sack_ack_read_by_prediction_updates_the_ack_memory() {
    let frames = [
        ack_flow(80, 1, 2000),
        ack_flow(80, 2, 2100),
        // (flush_all here: nothing of the flow is held afterwards.)
        frame(ack_spec(80, 3, 2200).sack(&[(2500, 2600)])),
        ack_flow(80, 4, 2200),
    ];
    let (verdicts, _, predicted) = run_verified(Config::lro(), &frames, Some(2));
    assert!(
        predicted[2],
        "the SACK ACK was not read by header prediction"
    );
    assert_eq!(verdicts[2], Verdict::Passed(lro_core::PassReason::Options));
    assert_eq!(verdicts[3], Verdict::Passed(lro_core::PassReason::DupAck));
}

/// A pure ACK with SACK blocks has a longer TCP header than its flow's template: header
/// prediction reads it as a variant of the template (its own options and payload offset) and
/// takes it when the rules pass it alone, after the flow's held ACK (`Lro`: options other
/// than timestamps; `Gro`: a pure ACK). Verdicts, output and causes are the parser's; a data
/// frame with SACK blocks that could merge under `Gro`, and one whose data offset is out of
/// range, go to the general path.
#[test]
fn sack_acks_are_predicted_as_variants_of_their_flows_template() {
    let sack_ack =
        |id: u16, ack: u32, blocks: &[(u32, u32)]| frame(ack_spec(80, id, ack).sack(blocks));
    let mut bad_offset = sack_ack(9, 2400, &[(3000, 3100)]);
    // Data offset 15 (60 bytes) runs past the datagram's end.
    bad_offset[14 + 20 + 12] = 0xf0;
    let frames = [
        ack_flow(80, 1, 2000),
        ack_flow(80, 2, 2100),
        ack_flow(80, 3, 2200),
        // Predicted as a variant: passes alone after the held ACK.
        sack_ack(4, 2200, &[(2500, 2600)]),
        ack_flow(80, 5, 2300),
        sack_ack(6, 2300, &[(2500, 2700), (2800, 2900)]),
        ack_flow(80, 7, 2400),
        // Not a variant: the general path says what it is.
        bad_offset,
        // A data frame with SACK blocks: not passed alone under `Gro` (it may start a
        // segment), so not taken from the variant's reading.
        frame(
            ack_spec(80, 10, 2400)
                .sack(&[(3000, 3100)])
                .payload(&[5; 100]),
        ),
    ];
    for config in [Config::lro(), Config::gro()] {
        let (verdicts, rec, predicted) = run_verified(config, &frames, None);
        let policy = config.policy;
        let reason = if policy == lro_core::Policy::Lro {
            lro_core::PassReason::Options
        } else {
            lro_core::PassReason::PureAck
        };
        for i in [3, 5] {
            assert_eq!(verdicts[i], Verdict::Passed(reason), "{policy:?} frame {i}");
            assert!(predicted[i], "{policy:?}: SACK ACK {i} not predicted");
        }
        assert_eq!(
            verdicts[7],
            Verdict::Passed(lro_core::PassReason::Malformed),
            "{policy:?}"
        );
        assert!(!predicted[7], "{policy:?}");
        if policy == lro_core::Policy::Gro {
            assert!(!predicted[8], "{policy:?}: {:?}", verdicts[8]);
        }
        if policy == lro_core::Policy::Lro {
            // The held ACK (absorbing the ones before it) came out before the SACK ACK.
            let at = rec.segments.iter().position(|s| s[0] == frames[3]).unwrap();
            assert!(
                at > 0 && ip_id(&rec.segments[at - 1][0]) < 4,
                "{:?}",
                rec.causes
            );
        }
    }
}

/// Lro: a segment absorbs any number of advancing pure ACKs (no frame slot is used, so no
/// limit applies before the flush). Its count of absorbed ACKs must not overflow: at 65536 a
/// 16-bit count wrapped to zero (a panic in debug builds), and the head then went out as
/// received, with its own, oldest ACK number, the 65536 newer ones released.
#[test]
fn a_segment_absorbs_more_than_65535_pure_acks() {
    let meta = verified_at(0);
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    assert_eq!(
        engine.push(data(1, 1000, 5, TCP_ACK), &meta, &mut rec),
        Verdict::Held
    );
    let n: u32 = 1 << 16;
    let ack = frame(spec(2).seq(1000 + MSS as u32).ack(6).flags(TCP_ACK));
    let ack_at = 14 + 20 + 8;
    let mut f = ack.clone();
    for i in 0..n {
        f[ack_at..ack_at + 4].copy_from_slice(&(6 + i).to_be_bytes());
        assert_eq!(engine.push(f.clone(), &meta, &mut rec), Verdict::Absorbed);
        // The sink keeps nothing of the released frames.
        rec.released.clear();
    }
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    assert_eq!(engine.stats().absorbed, u64::from(n));
    assert_eq!(rec.segments.len(), 1);
    let head = &rec.segments[0][0];
    let got = u32::from_be_bytes(head[ack_at..ack_at + 4].try_into().unwrap());
    assert_eq!(got, 6 + n - 1, "the newest ACK number is delivered");
}

/// `set_config` changing the maximum hold time while segments are held: `flush_idle`
/// applies the new limit to them, as the check at the flow's next frame does. (It skipped
/// them: its next deadline was computed under the old limit, never when there was none.)
#[test]
fn flush_idle_applies_a_max_hold_set_while_segments_are_held() {
    for before in [None, Some(1000)] {
        let mut config = Config::lro();
        config.max_hold = before;
        let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(config);
        let mut rec = Rec::default();
        assert_eq!(
            engine.push(data(1, 1000, 5, TCP_ACK), &verified_at(0), &mut rec),
            Verdict::Held
        );
        engine.set_config(config.with_max_hold(10));
        engine.flush_idle(20, &mut rec);
        assert_eq!(
            rec.causes,
            [lro_core::Cause::Flushed(lro_core::FlushReason::MaxHold)],
            "max hold {before:?} -> 10"
        );
        assert_eq!(engine.held_frames(), 0);
    }
}

/// `flush_idle` through the [`lro_core::Coalescer`] trait, as a driver generic over engines
/// calls it, delivers a segment once idle longer than the timeout, and not before.
#[test]
fn flush_idle_through_the_coalescer_trait_delivers_idle_segments() {
    fn idle<C: lro_core::Coalescer<Vec<u8>>>(c: &mut C, now: u64, rec: &mut Rec) {
        c.flush_idle(now, rec);
    }
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> =
        Engine::new(Config::lro().with_idle_timeout(100));
    let mut rec = Rec::default();
    assert_eq!(
        engine.push(data(1, 1000, 5, TCP_ACK), &verified_at(0), &mut rec),
        Verdict::Held
    );
    idle(&mut engine, 50, &mut rec);
    assert_eq!(engine.held_frames(), 1, "idle for 50 of 100");
    idle(&mut engine, 200, &mut rec);
    assert_eq!(engine.held_frames(), 0, "idle for 200 of 100");
    assert_eq!(rec.causes, [Cause::Flushed(FlushReason::Idle)]);
}

/// An engine's `Debug` output names its sizes and what it holds (logged by drivers).
#[test]
fn debug_output_names_sizes_and_held_frames() {
    let meta = verified_at(0);
    let mut engine: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
    engine.push(data(1, 1000, 5, TCP_ACK), &meta, &mut Rec::default());
    let shown = format!("{engine:?}");
    for part in [
        "Engine {",
        "flows: 4",
        "frames_per_segment: 8",
        "held_frames: 1",
    ] {
        assert!(shown.contains(part), "{part:?} not in {shown}");
    }
}

/// `flush_idle` keeps the earliest `max_hold` deadline: a segment started later must not put
/// off the delivery of one started earlier.
#[test]
fn flush_idle_keeps_the_earliest_max_hold_deadline() {
    let flow = |port: u16| {
        let payload = [0x5a; MSS];
        frame(
            FrameSpec::ipv4_tcp(port, 80)
                .seq(1000)
                .ack(5)
                .payload(&payload),
        )
    };
    let config = Config::lro().with_max_hold(100);
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(config);
    let mut rec = Rec::default();
    assert_eq!(
        engine.push(flow(40000), &verified_at(0), &mut rec),
        Verdict::Held
    );
    assert_eq!(
        engine.push(flow(40001), &verified_at(50), &mut rec),
        Verdict::Held
    );
    assert_eq!(engine.held_flows(), 2);
    let max_hold = [lro_core::Cause::Flushed(lro_core::FlushReason::MaxHold)];
    engine.flush_idle(120, &mut rec);
    assert_eq!(rec.causes, max_hold, "held since 0, max 100: due at 100");
    assert_eq!(engine.held_frames(), 1, "held since 50: due at 150");
    assert_eq!(engine.held_flows(), 1);
    engine.flush_idle(150, &mut rec);
    assert_eq!(rec.causes, [max_hold, max_hold].concat());
    assert_eq!(engine.held_frames(), 0);
    assert_eq!(engine.held_flows(), 0);
}

/// `set_config` from `Lro` to `Gro` while a segment is held: the segment keeps the newest ACK
/// number it merged under `Lro` (it went out with its head's, and the newer ACK never reached
/// the stack).
#[test]
fn a_segment_held_across_a_policy_change_keeps_its_newest_ack() {
    let meta = verified_at(0);
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    assert_eq!(
        engine.push(data(1, 1000, 1, TCP_ACK), &meta, &mut rec),
        Verdict::Held
    );
    assert_eq!(
        engine.push(data(2, 1000 + MSS as u32, 5, TCP_ACK), &meta, &mut rec),
        Verdict::Merged
    );
    engine.set_config(Config::gro());
    engine.flush_all(&mut rec);
    let head = &rec.segments[0][0];
    let ack_at = 14 + 20 + 8;
    let got = u32::from_be_bytes(head[ack_at..ack_at + 4].try_into().unwrap());
    assert_eq!(got, 5, "the newest ACK number is delivered");
}

/// A new hash seed re-keys header prediction's probe (a hash of the addresses and ports) as
/// well as the flow table: an idle engine given a seed with [`Engine::set_config`] predicts
/// exactly as one built with it. 256 interleaved flows make the probe's collisions (two flows
/// taking turns at one candidate miss each other's template), and so which frames are
/// predicted, depend on the seed: the seed pairs are chosen where they differ.
#[test]
fn a_new_hash_seed_rekeys_header_prediction_too() {
    let meta = verified_at(0);
    let frames: Vec<Vec<u8>> = (0..3u32)
        .flat_map(|round| {
            (0..256u16).map(move |flow| {
                let payload = [flow as u8; MSS];
                let seq = 1000 + round * MSS as u32;
                let spec = FrameSpec::ipv4_tcp(40000 + flow, 80);
                frame(spec.seq(seq).ack(1).flags(TCP_ACK).payload(&payload))
            })
        })
        .collect();
    let replay = |engine: &mut Engine<Vec<u8>, Sizes<256, 4>>| {
        let mut rec = Rec::default();
        for f in &frames {
            engine.push(f.clone(), &meta, &mut rec);
        }
        engine.flush_all(&mut rec);
        (engine.stats().clone(), rec.segments)
    };
    let fresh = |seed| replay(&mut Engine::new(Config::lro().with_hash_seed(seed)));
    for (before, after) in [(1, 2), (5, 7), (u64::MAX, 0)] {
        let (fresh_stats, fresh_out) = fresh(after);
        assert_ne!(
            fresh(before).0.predicted,
            fresh_stats.predicted,
            "seeds {before} and {after}: the probe's collisions differ"
        );
        let mut reseeded = Engine::new(Config::lro().with_hash_seed(before));
        reseeded.set_config(Config::lro().with_hash_seed(after));
        let (stats, out) = replay(&mut reseeded);
        assert_eq!(stats, fresh_stats, "seed {before} -> {after}");
        assert_eq!(out, fresh_out, "seed {before} -> {after}");
    }
}

/// The ACK memory keeps a record per flow (direct-mapped by the flow hash, 256 records by
/// default): after eight flows each delivered a segment, each flow's next pure ACK is known
/// not to repeat what its flow delivered, and starts a segment, instead of passing alone as an
/// ACK of unknown history ([`PassReason::UnknownAck`]).
#[test]
fn the_ack_memory_keeps_a_record_per_flow() {
    let meta = verified_at(0);
    let flow = |port: u16| FrameSpec::ipv4_tcp(port, 80);
    let mut engine: Engine<Vec<u8>, Sizes<16, 4>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    let ports: Vec<u16> = (0..8).map(|i| 40000 + 7 * i).collect();
    for &port in &ports {
        let pushed = frame(
            flow(port)
                .seq(1000)
                .ack(1)
                .flags(TCP_ACK | TCP_PSH)
                .payload(&[1; 10]),
        );
        assert_eq!(
            engine.push(pushed, &meta, &mut rec),
            Verdict::Passed(PassReason::PushFin)
        );
    }
    for &port in &ports {
        let ack = frame(flow(port).seq(1010).ack(2).flags(TCP_ACK));
        assert_eq!(
            engine.push(ack, &meta, &mut rec),
            Verdict::Held,
            "port {port}: its flow's record"
        );
    }
    engine.flush_all(&mut rec);
    assert_eq!(rec.segments.len(), 16);
}

/// `Lro`, then `Gro`, then `Lro` again: an ACK delivered under `Gro` is what a duplicate
/// repeats, though `Gro` records none; the policy change forgets the ACK memory, so the
/// duplicate is delivered alone (it was held, then absorbed by the next ACK and released).
#[test]
fn a_policy_change_forgets_the_ack_memory() {
    let meta = verified_at(0);
    let ack = |id: u16, n: u32, window: u16| {
        frame(spec(id).seq(1000).ack(n).window(window).flags(TCP_ACK))
    };
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    engine.push(ack(1, 100, 1000), &meta, &mut rec);
    engine.set_config(Config::gro());
    engine.push(ack(2, 200, 1000), &meta, &mut rec);
    engine.set_config(Config::lro());
    let dup = ack(3, 200, 1000);
    engine.push(dup.clone(), &meta, &mut rec);
    engine.push(ack(4, 200, 2000), &meta, &mut rec);
    engine.flush_all(&mut rec);
    assert!(rec.released.is_empty(), "released {:?}", rec.released.len());
    assert_alone_and_unchanged(&rec, &dup);
}

/// `reset_stats` while frames are held: they count as received after the reset, so the
/// counters are conserved again once they come out (they never were).
#[test]
fn counters_reset_while_frames_are_held_stay_conserved() {
    let meta = verified_at(0);
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(Config::lro());
    let mut rec = Rec::default();
    // A segment delivered before the reset: its counts go.
    engine.push(data(0, 1000 - MSS as u32, 5, TCP_ACK), &meta, &mut rec);
    engine.flush_all(&mut rec);
    engine.push(data(1, 1000, 5, TCP_ACK), &meta, &mut rec);
    engine.push(data(2, 1000 + MSS as u32, 5, TCP_ACK), &meta, &mut rec);
    engine.reset_stats();
    let mut held_only = lro_core::Stats::new();
    (held_only.frames_in, held_only.data_in) = (2, 2);
    assert_eq!(*engine.stats(), held_only);
    engine.flush_all(&mut rec);
    engine.push(
        data(3, 1000 + 2 * MSS as u32, 5, TCP_PSH | TCP_ACK),
        &meta,
        &mut rec,
    );
    engine.flush_all(&mut rec);
    let stats = engine.stats();
    assert!(stats.is_conserved(), "{stats:?}");
    assert_eq!((stats.frames_in, stats.data_in), (3, 3), "{stats:?}");
    assert_eq!((stats.data_out, stats.frames_merged), (2, 1), "{stats:?}");
}

/// `OutChecksum::AsReceived` configured: a coalesced segment's checksum is rewritten in full,
/// and its `SegmentInfo` says so (it said `AsReceived`, which promises the head unchanged).
#[test]
fn as_received_configured_labels_coalesced_segments_full() {
    struct Labels(Vec<(lro_core::OutChecksum, Vec<u8>)>);
    impl Sink<Vec<u8>> for Labels {
        fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
            let mut b = vec![0; seg.len()];
            seg.copy_to(&mut b).unwrap();
            self.0.push((seg.info().checksum, b));
        }
    }
    let meta = verified_at(0);
    let config = Config::gro().with_checksum_out(lro_core::OutChecksum::AsReceived);
    let mut engine: Engine<Vec<u8>, Sizes<4, 4>> = Engine::new(config);
    let mut out = Labels(Vec::new());
    engine.push(data(1, 1, 5, TCP_ACK), &meta, &mut out);
    engine.push(data(2, 1 + MSS as u32, 5, TCP_ACK), &meta, &mut out);
    engine.flush_all(&mut out);
    assert_eq!(out.0.len(), 1);
    let (label, b) = &out.0[0];
    assert_eq!(*label, lro_core::OutChecksum::Full);
    // IPv4 at 14, TCP at 34: the pseudo header and the segment sum to all ones.
    let tcp_len = (b.len() - 34) as u32;
    let pseudo = lro_core::testing::pseudo_header_sum_v4(
        b[26..30].try_into().unwrap(),
        b[30..34].try_into().unwrap(),
        tcp_len,
    );
    let sum = lro_core::testing::add16(pseudo, lro_core::testing::ones_complement_sum(&b[34..]));
    assert!(sum == 0xffff || sum == 0, "TCP checksum {sum:#06x}");
}

/// A pure ACK without TCP options ends 20 bytes after its TCP header's start: 54 bytes over
/// Ethernet where nothing pads it (veth, AF_XDP, a sender's own capture), 74 over IPv6, less
/// than the 32 bytes of TCP header header prediction reads; a wire pads it to 60. Such ACKs are
/// predicted too, with the parser's verdicts, output and counters: unpadded under both policies
/// and every checksum state, padded (with zeros) when `Lro` absorbs them and no
/// CHECKSUM_COMPLETE sum covers the padding. (They all went to the parser: the kernel's ACKs to
/// smoltcp, which sends no timestamps, did.) A data frame of a few bytes without options that
/// would be appended, and a padded frame otherwise, is left to the parser, with the same
/// result.
#[test]
fn pure_acks_without_options_are_predicted() {
    for v6 in [false, true] {
        let spec = |i: u16| {
            let mut s = if v6 {
                FrameSpec::ipv6_tcp(80, 40000)
            } else {
                FrameSpec::ipv4_tcp(80, 40000)
            };
            if let IpSpec::V4(ip) = &mut s.ip {
                ip.id = i;
            }
            s.flags(TCP_ACK)
        };
        let mut frames = Vec::new();
        // Eight advancing pure ACKs, four data frames of 5 bytes, eight more pure ACKs.
        for i in 0..8u16 {
            frames.push(frame(spec(i).seq(7).ack(2000 + 10 * u32::from(i))));
        }
        for i in 0..4u16 {
            let payload = [i as u8; 5];
            frames.push(frame(
                spec(8 + i)
                    .seq(7 + 5 * u32::from(i))
                    .ack(2070)
                    .payload(&payload),
            ));
        }
        for i in 0..8u16 {
            frames.push(frame(spec(12 + i).seq(27).ack(2080 + 10 * u32::from(i))));
        }
        let l4 = if v6 { 14 + 40 } else { 14 + 20 };
        assert_eq!(frames[0].len(), l4 + 20);
        // Padded to 60 bytes (IPv4) or by 4 bytes (IPv6, as a VLAN-tag-stripping NIC leaves it).
        let pad = |f: &Vec<u8>| {
            let mut f = f.clone();
            f.resize(if v6 { f.len() + 4 } else { f.len().max(60) }, 0);
            f
        };
        let padded: Vec<Vec<u8>> = frames.iter().map(pad).collect();
        assert!(padded[0].len() > frames[0].len());
        for config in [Config::lro(), Config::gro()] {
            let lro = config.policy == lro_core::Policy::Lro;
            for csum in [Csum::Verified, Csum::Software, Csum::Complete] {
                for (frames, is_padded) in [(&frames, false), (&padded, true)] {
                    let ip = if v6 { 6 } else { 4 };
                    let case =
                        format!("{:?}, {csum:?}, IPv{ip}, padded {is_padded}", config.policy);
                    let (verdicts, rec, predicted, stats) =
                        run_csum(config, true, frames, None, csum);
                    let (verdicts_off, rec_off, _, stats_off) =
                        run_csum(config, false, frames, None, csum);
                    assert_eq!(verdicts, verdicts_off, "{case}");
                    assert_eq!(rec.segments, rec_off.segments, "{case}");
                    assert_eq!(rec.causes, rec_off.causes, "{case}");
                    assert_eq!(stats, stats_off, "{case}");
                    // The flow's template comes from its first frame under `Gro` (passed alone,
                    // it keeps an idle entry), from its second under `Lro` (the first, an ACK of
                    // an unknown flow, goes alone without one; the second starts the segment).
                    // Padded, only the ACKs `Lro` absorbs are read.
                    let expected: Vec<usize> = if !is_padded {
                        (0..8)
                            .chain(12..20)
                            .filter(|&i| i >= if lro { 2 } else { 1 })
                            .collect()
                    } else if lro && !matches!(csum, Csum::Complete) {
                        (0..20)
                            .filter(|&i| verdicts[i] == Verdict::Absorbed)
                            .collect()
                    } else {
                        Vec::new()
                    };
                    if is_padded && lro && !matches!(csum, Csum::Complete) {
                        assert_eq!(expected.len(), 6 + 8, "{case}: {verdicts:?}");
                        assert_eq!(stats.trimmed, 20 - 1, "{case}");
                    }
                    let missed: Vec<usize> = expected
                        .iter()
                        .copied()
                        .filter(|&i| !predicted[i])
                        .collect();
                    assert!(
                        missed.is_empty(),
                        "{case}: frames {missed:?} not predicted: {verdicts:?}"
                    );
                    let extra: Vec<usize> = (0..20)
                        .filter(|&i| predicted[i] && is_padded)
                        .filter(|i| !expected.contains(i))
                        .collect();
                    assert!(
                        extra.is_empty(),
                        "{case}: frames {extra:?} predicted: {verdicts:?}"
                    );
                }
            }
        }
    }
}

/// Frame `i` of flow `flow` (source port 10000 + flow), 100 bytes of payload, timestamps.
fn flow_data(flow: u16, i: u32) -> Vec<u8> {
    let payload = [flow as u8; MSS];
    frame(
        FrameSpec::ipv4_tcp(10000 + flow, 80)
            .seq(1 + i * MSS as u32)
            .ack(1)
            .flags(TCP_ACK)
            .timestamps(5, 6)
            .payload(&payload),
    )
}

/// Pushes `bursts` through an engine of 16 entries under `config` (`Lro`, header prediction
/// on or off: [`burst_config`]), one burst per millisecond, ending each with `flush_all`, or
/// with `flush_idle` (`idle`: segments idle for 1 ms are flushed, so each burst's segments go
/// at the next burst's end): the verdicts, what the sink saw, and the counters after each
/// burst.
fn burst_run(
    bursts: &[Vec<Vec<u8>>],
    config: Config,
    idle: bool,
) -> (Vec<Verdict>, Rec, Vec<lro_core::Stats>) {
    let mut config = config;
    if idle {
        config = config.with_idle_timeout(1_000_000);
    }
    let mut engine: Engine<Vec<u8>, Sizes<16, 16>> = Engine::new(config);
    let mut rec = Rec::default();
    let mut verdicts = Vec::new();
    let mut stats = Vec::new();
    for (i, burst) in bursts.iter().enumerate() {
        let now = i as u64 * 1_000_000;
        let meta = verified_at(now);
        for f in burst {
            verdicts.push(engine.push(f.clone(), &meta, &mut rec));
        }
        if idle {
            engine.flush_idle(now, &mut rec);
        } else {
            engine.flush_all(&mut rec);
        }
        stats.push(engine.stats().clone());
    }
    engine.flush_all(&mut rec);
    assert!(engine.stats().is_conserved());
    (verdicts, rec, stats)
}

/// Header prediction pauses after bursts in which it hardly hits (64 flows through 16
/// entries, one frame each per burst) and resumes when it is tried again on bursts of runs
/// (4 flows, 8 frames each): the output and the verdicts are those of the general path
/// throughout, the pause is counted, and prediction takes the runs again afterwards.
#[test]
fn header_prediction_pauses_where_it_misses_and_resumes() {
    pause_case(false);
}

/// [`header_prediction_pauses_where_it_misses_and_resumes`] with segments held across polls,
/// each poll ending with `flush_idle`: the bursts the gate judges.
#[test]
fn header_prediction_pauses_between_idle_flushes_too() {
    pause_case(true);
}

/// `Lro` with header prediction and adaptive bypass on or off.
fn burst_config(prediction: bool, bypass: bool) -> Config {
    Config::lro()
        .with_header_prediction(prediction)
        .with_adaptive_bypass(bypass)
}

/// 4 bursts of runs (4 flows, 8 frames each), 8 bursts of one frame from each of 64 flows,
/// then 20 bursts of runs again.
fn runs_then_singles_then_runs() -> Vec<Vec<Vec<u8>>> {
    let mut next = [0u32; 64];
    let mut bursts = Vec::new();
    let runs = |bursts: &mut Vec<Vec<Vec<u8>>>, next: &mut [u32; 64], n: usize| {
        for _ in 0..n {
            let mut b = Vec::new();
            for flow in 0..4u16 {
                for _ in 0..8 {
                    b.push(flow_data(flow, next[usize::from(flow)]));
                    next[usize::from(flow)] += 1;
                }
            }
            bursts.push(b);
        }
    };
    runs(&mut bursts, &mut next, 4);
    for _ in 0..8 {
        let b = (0..64u16)
            .map(|flow| {
                next[usize::from(flow)] += 1;
                flow_data(flow, next[usize::from(flow)] - 1)
            })
            .collect();
        bursts.push(b);
    }
    runs(&mut bursts, &mut next, 20);
    bursts
}

fn pause_case(idle: bool) {
    let bursts = runs_then_singles_then_runs();
    let (v_on, rec_on, stats_on) = burst_run(&bursts, burst_config(true, false), idle);
    let (v_off, rec_off, stats_off) = burst_run(&bursts, burst_config(false, false), idle);
    assert_eq!(v_on, v_off, "verdicts");
    assert_eq!(rec_on.segments, rec_off.segments, "segments");
    assert_eq!(rec_on.released, rec_off.released, "released frames");
    let (on, off) = (stats_on.last().unwrap(), stats_off.last().unwrap());
    assert_eq!((off.predicted, off.prediction_paused), (0, 0));
    // The one-frame bursts (4 to 11) predict nothing; from the second on prediction pauses.
    let paused_by = |b: usize| stats_on[b].prediction_paused;
    assert_eq!(paused_by(4), 0, "bursts of runs never pause it");
    assert!(
        paused_by(11) >= 3,
        "paused for {} of the poor bursts",
        paused_by(11)
    );
    // Tried again within 16 bursts of the last poor one, it takes the runs again: every frame
    // of the last burst (each flow's first starts its next segment from the template).
    let last = stats_on.len() - 1;
    let taken_last = stats_on[last].predicted - stats_on[last - 1].predicted;
    assert_eq!(taken_last, 32, "predicted in the last burst");
    assert_eq!(
        on.prediction_paused,
        stats_on[last - 1].prediction_paused,
        "not paused at the end"
    );
    assert!(on.prediction_paused <= paused_by(11) + 16);
}

/// The frames each flow (by source port) delivered, in order: the sequence numbers of the
/// frames of every segment, head first, and of the released frames apart.
fn per_flow(rec: &Rec) -> std::collections::BTreeMap<u16, Vec<u32>> {
    let mut flows = std::collections::BTreeMap::<u16, Vec<u32>>::new();
    for f in rec.segments.iter().flatten() {
        let port = u16::from_be_bytes([f[34], f[35]]);
        let seq = u32::from_be_bytes([f[38], f[39], f[40], f[41]]);
        flows.entry(port).or_default().push(seq);
    }
    flows
}

/// Adaptive bypass passes the bursts of one frame per flow (64 flows through 16 entries:
/// nothing merges) through, and coalesces the runs before and after them as the engine
/// without it does: every flow's frames come out in the same order as without the bypass,
/// the runs merge, and the paused bursts are counted.
#[test]
fn adaptive_bypass_passes_bursts_that_merge_nothing_and_resumes() {
    bypass_case(false);
}

/// [`adaptive_bypass_passes_bursts_that_merge_nothing_and_resumes`] with segments held across
/// polls (`flush_idle`): those held when a pause begins go before the frames passed through.
#[test]
fn adaptive_bypass_delivers_what_is_held_first() {
    bypass_case(true);
}

/// Pure ACKs absorbed under `Lro` are merges to the bypass gate: bursts of ACK runs (4 flows of
/// 8 advancing pure ACKs each), in which nothing else merges, never pause coalescing, with
/// segments flushed every burst or held across polls.
#[test]
fn adaptive_bypass_counts_absorbed_acks_as_merges() {
    for idle in [false, true] {
        let bursts: Vec<Vec<Vec<u8>>> = (0..8u32)
            .map(|b| {
                (0..4u16)
                    .flat_map(|flow| {
                        (0..8u32).map(move |k| {
                            let n = b * 8 + k;
                            ack_flow(1000 + flow, n as u16, 5000 + 100 * n)
                        })
                    })
                    .collect()
            })
            .collect();
        let (_, _, stats) = burst_run(&bursts, burst_config(true, true), idle);
        let last = stats.last().unwrap();
        assert_eq!(last.bypassed_bursts, 0, "idle {idle}: paused");
        // Each flow's first pure ACK goes alone (nothing is known of the flow yet) and its
        // second heads a segment; flushed every burst, each later burst's first heads one.
        let absorbed = if idle {
            4 * (8 * 8 - 2)
        } else {
            4 * (6 + 7 * 7)
        };
        assert_eq!(last.absorbed, absorbed, "idle {idle}: absorbed");
    }
}

fn bypass_case(idle: bool) {
    let bursts = runs_then_singles_then_runs();
    let (v_on, rec_on, stats_on) = burst_run(&bursts, burst_config(true, true), idle);
    let (v_off, rec_off, stats_off) = burst_run(&bursts, burst_config(true, false), idle);
    assert_eq!(
        per_flow(&rec_on),
        per_flow(&rec_off),
        "each flow's frames, in order"
    );
    assert_eq!(rec_on.released, rec_off.released, "released frames");
    let (on, off) = (stats_on.last().unwrap(), stats_off.last().unwrap());
    assert_eq!(off.bypassed_bursts, 0);
    assert_eq!(off.passed(PassReason::Bypassed), 0);
    // Bursts of runs never pause coalescing; the one-frame bursts (4 to 11) do, from the
    // second on, and what passes through is counted frame by frame.
    let bypassed_by = |b: usize| stats_on[b].bypassed_bursts;
    assert_eq!(bypassed_by(4), 0, "bursts of runs never pause it");
    assert!(
        bypassed_by(11) >= 3,
        "paused for {} of the poor bursts",
        bypassed_by(11)
    );
    let paused_frames: usize = (0..bursts.len())
        .filter(|&b| bypassed_by(b) > if b == 0 { 0 } else { bypassed_by(b - 1) })
        .map(|b| bursts[b].len())
        .sum();
    assert_eq!(
        on.passed(PassReason::Bypassed),
        paused_frames as u64,
        "every frame of a paused burst passed through, and no other"
    );
    // Tried again within 16 bursts of the last poor one, it merges the runs again: the last
    // burst's verdicts are those without the bypass (7 of each flow's 8 frames merged, all 8
    // when held across polls).
    let last = stats_on.len() - 1;
    let tail = |v: &[Verdict]| v[v.len() - bursts[last].len()..].to_vec();
    assert_eq!(tail(&v_on), tail(&v_off), "the last burst's verdicts");
    let merged = tail(&v_on)
        .iter()
        .filter(|v| matches!(v, Verdict::Merged | Verdict::MergedAndFlushed(_)))
        .count();
    assert_eq!(
        merged,
        if idle { 32 } else { 28 },
        "merged in the last burst"
    );
    assert_eq!(
        on.bypassed_bursts,
        bypassed_by(last - 1),
        "not paused at the end"
    );
    let bypass_flushes = rec_on
        .causes
        .iter()
        .filter(|c| **c == Cause::Flushed(FlushReason::Bypass))
        .count();
    if idle {
        // The first poor burst's frames were still held when the pause began.
        assert!(
            bypass_flushes > 0,
            "held segments delivered when the pause began"
        );
    } else {
        assert_eq!(bypass_flushes, 0, "flush_all left nothing held");
    }
}

/// A pure ACK that passed through during a pause was not recorded in the ACK memory; if the
/// memory kept the flow's older record, a duplicate of that ACK after the pause would look
/// new, be held, and be superseded by the next ACK: a duplicate lost to the sender's fast
/// retransmit. The memory is forgotten when a pause begins, so the duplicate is delivered.
#[test]
fn adaptive_bypass_forgets_ack_states() {
    // 20 data frames of the flow, each a sequence gap after the last: each is held and
    // delivered alone, none merges, so the next burst passes through. Each delivery records
    // the flow's ACK state (1000): its only records, whatever the hash.
    let poor: Vec<Vec<u8>> = (0..20u16)
        .map(|i| data(i, 1 + u32::from(i) * 2 * MSS as u32, 1000, TCP_ACK))
        .collect();
    let passed = pure_ack(100, 1, 2000);
    let dup = pure_ack(101, 1, 2000);
    let newer = pure_ack(102, 1, 3000);
    let bursts = vec![poor, vec![passed], vec![dup.clone(), newer]];
    let (verdicts, rec, stats) = burst_run(&bursts, burst_config(true, true), false);
    assert_eq!(stats[0].frames_merged, 0);
    assert_eq!(
        stats[1].bypassed_bursts, 1,
        "the second burst passed through"
    );
    assert_eq!(verdicts[20], Verdict::Passed(PassReason::Bypassed));
    assert!(
        !rec.released.contains(&dup),
        "the duplicate ACK was superseded"
    );
    assert_alone_and_unchanged(&rec, &dup);
}

/// Turned on by `set_config`, the bypass judges the bursts from then on, not the history
/// before (bursts of runs that merged); turned off, the next frame is coalesced again.
#[test]
fn adaptive_bypass_follows_set_config() {
    let mut engine: Engine<Vec<u8>, Sizes<16, 16>> = Engine::new(burst_config(true, false));
    let mut rec = Rec::default();
    let meta = verified_at(0);
    let mut push = |engine: &mut Engine<Vec<u8>, Sizes<16, 16>>, frames: Vec<Vec<u8>>| {
        let v: Vec<Verdict> = frames
            .into_iter()
            .map(|f| engine.push(f, &meta, &mut rec))
            .collect();
        engine.flush_all(&mut rec);
        v
    };
    // Four bursts of runs (4 flows, 8 frames each): 28 of every 32 frames merge.
    for b in 0..4u32 {
        let runs = (0..4u16)
            .flat_map(|flow| (0..8).map(move |i| flow_data(flow, b * 8 + i)))
            .collect();
        push(&mut engine, runs);
    }
    engine.set_config(burst_config(true, true));
    // A burst of 20 flows' first frames: nothing merges.
    push(
        &mut engine,
        (20..40u16).map(|flow| flow_data(flow, 0)).collect(),
    );
    let v = push(&mut engine, vec![flow_data(0, 32)]);
    assert_eq!(
        v,
        [Verdict::Passed(PassReason::Bypassed)],
        "judged on the last burst"
    );
    engine.set_config(burst_config(true, false));
    let v = push(&mut engine, vec![flow_data(0, 33)]);
    assert_eq!(v, [Verdict::Held], "coalesced again once turned off");
    assert!(engine.stats().is_conserved());
}
