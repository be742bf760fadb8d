//! The checkers catch what they say they check.
//!
//! The harness's checkers are the second guard of every property test and fuzz target: the
//! runner (`check::run`), the reference checker (`check::check`, with the second GRE reader's
//! `gre_reader::cross_check` for tunnelled segments), the ground-truth checker
//! (`scenario::check_truth`), `check::same_with_prediction`, and the fuzz targets'
//! `structured::check_headers`. An engine that keeps DESIGN.md's invariants never makes them
//! fail, so those suites cannot show that a check still works. Here a genuine run of a small
//! two-flow scenario is first accepted, then broken one way at a time: an output dropped,
//! duplicated or moved, a byte of a segment changed (with its checksums made right again, so
//! that the targeted check and not a checksum check must see it), a frame's ground truth
//! changed, an engine that lies about its verdicts, counters or held frames. Each break must be
//! refused by every checker that reads what it changed, with the message of the check it aims
//! at.

use lro_core::testing::{FrameSpec, IpSpec};
use lro_core::wire::{write_be16, write_be32};
use lro_core::{
    Coalescer, Config, Engine, FlushReason, OutChecksum, PassReason, Policy, RxMeta, SegmentInfo,
    Sink, Sizes, Stats, Verdict,
};
use lro_gre::testing::{GreSpec, InnerFrame};
use lro_gre::GreEngine;
use lro_testkit::built::{Built, Pushed, Step};
use lro_testkit::check::{self, Order, Run};
use lro_testkit::frame::{bytes_of, Out, Tagged};
use lro_testkit::oracle::{self, Tcp};
use lro_testkit::scenario::{check_truth, Input, Truth};

/// Payload bytes of every data frame.
const MSS: usize = 100;
/// The ACK number the data frames carry; the pure ACK acknowledges 100 more.
const ACK: u32 = 5000;
/// The table's frame limit per segment (`Sizes<8, FRAMES>`).
const FRAMES: usize = 16;

/// The metadata every frame is pushed with.
const META: RxMeta = RxMeta::ethernet(0);

/// Frame ids of the scenario (pushed in id order: A0 B0 A1 B1 A2, flow A's pure ACK, B2).
const A0: usize = 0;
const B0: usize = 1;
const A1: usize = 2;
const ACK_A: usize = 5;

/// Flow `flow`'s `k`-th frame: `len` payload bytes (different in every frame), sequence
/// numbers contiguous, the same timestamps throughout (so `Gro` merges them too), IPv4 IDs
/// incrementing.
fn frame(flow: u16, k: usize, ack: u32, flags: u8, len: usize) -> Pushed {
    Pushed::new(frame_bytes(flow, k, ack, flags, len), META)
}

/// The bytes of [`frame`]'s frame.
fn frame_bytes(flow: u16, k: usize, ack: u32, flags: u8, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..len)
        .map(|i| (usize::from(flow) * 31 + k * 7 + i) as u8)
        .collect();
    let mut spec = FrameSpec::ipv4_tcp(1000 + flow, 80)
        .seq(1 + (k * MSS) as u32)
        .ack(ack)
        .flags(flags)
        .timestamps(100, 7)
        .payload(&payload);
    if let IpSpec::V4(ip) = &mut spec.ip {
        ip.id = k as u16;
    }
    bytes_of(&spec)
}

/// Two flows interleaved: A0 B0 A1 B1 A2, a pure ACK of flow A with a newer ACK number, then
/// B2 with PSH.
fn built() -> Built {
    let frames = vec![
        frame(0, 0, ACK, 0x10, MSS),
        frame(1, 0, ACK, 0x10, MSS),
        frame(0, 1, ACK, 0x10, MSS),
        frame(1, 1, ACK, 0x10, MSS),
        frame(0, 2, ACK, 0x10, MSS),
        frame(0, 3, ACK + 100, 0x10, 0),
        frame(1, 2, ACK, 0x18, MSS),
    ];
    pushed_in_order(frames)
}

/// `frames`, each pushed once, in order.
fn pushed_in_order(frames: Vec<Pushed>) -> Built {
    let steps = (0..frames.len()).map(Step::Push).collect();
    Built {
        frames,
        steps,
        truth: None,
    }
}

/// One genuine run, with everything both checkers take: the frames with the reference
/// reader's view of them (`check::check`) and the generator's records of them
/// (`scenario::check_truth`, as `Scenario::build` would make them).
struct Case {
    built: Built,
    truth: Truth,
    config: Config,
    frames_max: usize,
    run: Run,
}

fn case_with(built: Built, config: Config) -> Case {
    let mut engine: Box<Engine<Tagged, Sizes<8, FRAMES>>> = Box::new(Engine::new(config));
    let run = check::run(&mut *engine, &built, true);
    finished(built, config, run)
}

/// The case of a run made.
fn finished(built: Built, config: Config, run: Run) -> Case {
    let truth = Truth {
        // Duplicate ACKs judged by RFC 5681 whatever the engine holds.
        dup_mode: 2,
        frames: built.frames.iter().map(input_of).collect(),
    };
    Case {
        built,
        truth,
        config,
        frames_max: FRAMES,
        run,
    }
}

fn case(policy: Policy) -> Case {
    case_with(built(), Config::gro().with_policy(policy))
}

/// What `check::check` says of the case: `Ok` or the violation.
fn verdict_of(c: &Case) -> Result<(), String> {
    check::catch(|| {
        check::check(&c.built, &c.config, c.frames_max, &c.run, Order::Arrival);
    })
}

/// Asserts that a check refused, with a message that contains `want`.
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(r: Result<T, String>, want: &str) {
    match r {
        Err(msg) => assert!(msg.contains(want), "want {want:?}, got {msg:?}"),
        Ok(v) => panic!("want {want:?}, but the check passed ({v:?})"),
    }
}

/// The ids of every output, a segment's as a list, a released frame as `Rel`.
fn shape(run: &Run) -> Vec<String> {
    run.rec
        .out
        .iter()
        .map(|o| match o {
            Out::Seg { ids, .. } => format!("{ids:?}"),
            Out::Rel(i) => format!("Rel({i})"),
        })
        .collect()
}

/// Position of the segment whose head is frame `head`.
fn seg_at(run: &Run, head: usize) -> usize {
    run.rec
        .out
        .iter()
        .position(|o| matches!(o, Out::Seg { ids, .. } if ids[0] == head))
        .unwrap_or_else(|| panic!("no segment headed by frame {head}: {:?}", shape(run)))
}

/// The segment whose head is frame `head`.
fn seg(run: &mut Run, head: usize) -> (&mut Vec<usize>, &mut Vec<u8>, &mut SegmentInfo) {
    let at = seg_at(run, head);
    match &mut run.rec.out[at] {
        Out::Seg {
            ids, bytes, info, ..
        } => (ids, bytes, info),
        Out::Rel(_) => unreachable!("seg_at finds segments"),
    }
}

/// Edits the bytes of the segment headed by `head` as `edit` says, given the reference
/// reader's view of them (through GRE too), then makes every checksum right again.
fn edit_out(run: &mut Run, head: usize, edit: impl FnOnce(&mut [u8], &Tcp)) {
    let (_, bytes, _) = seg(run, head);
    let t = oracle::tcp_of_gre(bytes, &META).expect("the segment parses");
    edit(bytes, &t);
    let t = oracle::tcp_of_gre(bytes, &META).expect("the edited segment parses");
    oracle::fix_checksums(bytes, &t);
}

/// The reference reader's view of input frame `id`, to change the ground truth `check::check`
/// reads.
fn view(c: &mut Case, id: usize) -> &mut Tcp {
    c.built.frames[id].tcp.as_mut().expect("a TCP frame")
}

/// The generator's record of input frame `id`, to change the ground truth
/// `scenario::check_truth` reads.
fn record(c: &mut Case, id: usize) -> &mut Input {
    &mut c.truth.frames[id]
}

/// Sets TCP flag `bits` on frame `id` in both checkers' ground truth.
fn set_flags(c: &mut Case, id: usize, bits: u8) {
    view(c, id).flags |= bits;
    record(c, id).flags |= bits;
}

/// Says in both checkers' ground truth that frame `id` carries IPv4 options.
fn set_ip_options(c: &mut Case, id: usize) {
    view(c, id).ip_opts = true;
    record(c, id).ip_opts = true;
}

/// Moves frame `id`'s ACK number by `delta` in both checkers' ground truth.
fn move_ack(c: &mut Case, id: usize, delta: i32) {
    view(c, id).ack = view(c, id).ack.wrapping_add_signed(delta);
    record(c, id).ack = record(c, id).ack.wrapping_add_signed(delta);
}

/// Frame `id`'s checksums are not to be trusted, in both checkers' ground truth.
fn untrusted(c: &mut Case, id: usize) {
    c.built.frames[id].trusted = false;
    record(c, id).corrupt = true;
}

/// Frame `id` comes with a byte of padding `byte`, checksum-neutral when `neutral` (zero).
fn padded(c: &mut Case, id: usize, byte: u8, neutral: bool) {
    c.built.frames[id].bytes.push(byte);
    record(c, id).padding = Some(neutral);
}

/// Offset of the TSval in a frame of this scenario: its only options are NOP, NOP, timestamps.
fn tsval_at(t: &Tcp) -> usize {
    t.l4 + 20 + 4
}

#[test]
fn the_genuine_runs_pass_and_have_the_shapes_the_breaks_aim_at() {
    let lro = case(Policy::Lro);
    assert_eq!(verdict_of(&lro), Ok(()));
    assert_eq!(truth_verdict(&lro), Ok(()));
    assert_eq!(shape(&lro.run), ["Rel(5)", "[1, 3, 6]", "[0, 2, 4]"]);
    let gro = case(Policy::Gro);
    assert_eq!(verdict_of(&gro), Ok(()));
    assert_eq!(truth_verdict(&gro), Ok(()));
    assert_eq!(shape(&gro.run), ["[0, 2, 4]", "[5]", "[1, 3, 6]"]);
    // The one-frame output is passed as received; the others are rewritten, fully summed.
    let infos: Vec<_> = gro
        .run
        .rec
        .out
        .iter()
        .map(|o| match o {
            Out::Seg { info, .. } => info.checksum,
            Out::Rel(_) => unreachable!(),
        })
        .collect();
    assert_eq!(
        infos,
        [
            OutChecksum::Full,
            OutChecksum::AsReceived,
            OutChecksum::Full
        ]
    );
}

/// One break of a genuine run, and what each checker must say of it.
struct Break {
    /// What is broken.
    what: &'static str,
    /// The policy of the run it breaks.
    policy: Policy,
    /// The change: to the record, to the configuration the run is judged by, or to the ground
    /// truth (the reference reader's view, the generator's records, or both).
    tamper: fn(&mut Case),
    /// Part of `check::check`'s message. `None`: the break changes only what the other
    /// checker reads, or what this one does not look at.
    check: Option<&'static str>,
    /// Part of `scenario::check_truth`'s message, or `None` likewise.
    truth: Option<&'static str>,
}

const LRO: Policy = Policy::Lro;
const GRO: Policy = Policy::Gro;

impl Break {
    const fn new(
        what: &'static str,
        policy: Policy,
        tamper: fn(&mut Case),
        check: Option<&'static str>,
        truth: Option<&'static str>,
    ) -> Break {
        Break {
            what,
            policy,
            tamper,
            check,
            truth,
        }
    }
}

/// The breaks. Each must be refused by the check its message names, not by another one first.
const BREAKS: &[Break] = &[
    // (1) Conservation and (2) per-flow order.
    Break::new(
        "an output lost",
        LRO,
        |c| drop(c.run.rec.out.pop()),
        Some("conservation: frame 0 (pushed: true) came back 0 times"),
        Some("conservation: frame 0 came back 0 times"),
    ),
    Break::new(
        "a released frame twice",
        LRO,
        |c| c.run.rec.out.push(Out::Rel(ACK_A)),
        Some("conservation: frame 5 (pushed: true) came back 2 times"),
        Some("conservation: frame 5 came back 2 times"),
    ),
    Break::new(
        "a flow's frames out of order",
        GRO,
        |c| c.run.rec.out.swap(0, 1),
        Some("order: frame 0 after frame 5 of the same flow"),
        Some("order: flow 0: frame 0 after frame 5"),
    ),
    Break::new(
        "a merged frame said to be absorbed",
        LRO,
        |c| c.run.verdicts[A1] = Verdict::Absorbed,
        None,
        Some("bytes: flow 0: payload out differs from payload in"),
    ),
    // Segment bookkeeping.
    Break::new(
        "info.frames",
        LRO,
        |c| seg(&mut c.run, A0).2.frames += 1,
        Some("info.frames"),
        Some("info.frames 4"),
    ),
    Break::new(
        "info.len",
        LRO,
        |c| seg(&mut c.run, A0).2.len += 1,
        Some("info.len"),
        Some("info lengths"),
    ),
    Break::new(
        "info.payload_len",
        LRO,
        |c| seg(&mut c.run, A0).2.payload_len += 1,
        Some("[0, 2, 4]: info.payload_len"),
        Some("info lengths"),
    ),
    Break::new(
        "info.l4",
        LRO,
        |c| seg(&mut c.run, A0).2.l4 += 1,
        Some("info offsets"),
        Some("info offsets"),
    ),
    Break::new(
        "a segment over the table's frame limit",
        LRO,
        |c| c.frames_max = 2,
        Some("segment of 3 frames"),
        None,
    ),
    // (5) Isolation, with the order of both flows kept.
    Break::new(
        "a segment mixing flows",
        GRO,
        |c| {
            view(c, A0).id = view(c, B0).id;
            record(c, A0).flow = Some(1);
        },
        Some("isolation: segment [0, 2, 4] mixes flows (frame 2)"),
        Some("isolation: segment [0, 2, 4] mixes flows"),
    ),
    // (7) No laundering, and the rest of the never-merged list (4), frame by frame.
    Break::new(
        "an untrusted frame merged",
        LRO,
        |c| untrusted(c, A1),
        Some("laundering: frame 2"),
        Some("frame 2 (bad checksum (laundering))"),
    ),
    Break::new(
        "unverified frames merged",
        GRO,
        |c| c.config.verify_checksums = false,
        None,
        Some("frame 0 (unverified checksum)"),
    ),
    Break::new(
        "URG merged",
        LRO,
        |c| set_flags(c, A1, 0x20),
        Some("frame 2 flags 0x30"),
        Some("frame 2 (SYN/RST/URG)"),
    ),
    Break::new(
        "IP options merged",
        LRO,
        |c| set_ip_options(c, A1),
        Some("frame 2 has IP options"),
        Some("frame 2 (IP options)"),
    ),
    Break::new(
        "a malformed frame merged",
        LRO,
        |c| record(c, A1).malformed = true,
        None,
        Some("frame 2 (malformed)"),
    ),
    Break::new(
        "a fragment merged",
        LRO,
        |c| record(c, A1).fragment = true,
        None,
        Some("frame 2 (fragment)"),
    ),
    Break::new(
        "a duplicate ACK merged",
        LRO,
        |c| record(c, A1).dup_ack = true,
        None,
        Some("frame 2 (duplicate ACK)"),
    ),
    Break::new(
        "SACK merged under Lro",
        LRO,
        |c| record(c, A1).sack = true,
        None,
        Some("frame 2 (SACK under Lro)"),
    ),
    Break::new(
        "non-neutral padding merged",
        LRO,
        |c| padded(c, A1, 1, false),
        Some("frame 2 has padding that may not be trimmed"),
        Some("frame 2 (non-neutral padding)"),
    ),
    Break::new(
        "padding merged under Gro",
        GRO,
        |c| padded(c, A1, 0, true),
        Some("frame 2 has padding that may not be trimmed"),
        Some("frame 2 (padding under Gro)"),
    ),
    Break::new(
        "another link header merged under Gro",
        GRO,
        |c| c.built.frames[A1].bytes[0] ^= 2,
        Some("frame 2 link header differs from the head's under Gro"),
        None,
    ),
    Break::new(
        "another TTL merged",
        LRO,
        |c| {
            view(c, A1).ttl -= 1;
            let l3 = record(c, A1).l3;
            record(c, A1).bytes[l3 + 8] -= 1;
        },
        Some("frame 2 TTL/TOS/DF"),
        Some("frame 2 differs in TTL/TOS/DF"),
    ),
    Break::new(
        "another data offset merged",
        LRO,
        |c| view(c, A1).doff_byte ^= 1,
        Some("frame 2 data offset/reserved"),
        None,
    ),
    Break::new(
        "another CWR merged",
        LRO,
        |c| set_flags(c, A1, 0x80),
        Some("frame 2 flags differ"),
        Some("frame 2 differs in TCP flags"),
    ),
    Break::new(
        "PSH before the last frame",
        LRO,
        |c| {
            set_flags(c, A1, 0x08);
            edit_out(&mut c.run, A0, |b, t| b[t.l4 + 13] |= 0x08);
        },
        Some("PSH/FIN on frame 2, not last"),
        Some("PSH/FIN on frame 2 which is not last"),
    ),
    Break::new(
        "a sequence gap merged",
        LRO,
        |c| {
            view(c, A1).seq += 1;
            record(c, A1).seq += 1;
        },
        Some("frame 2 not contiguous"),
        Some("frame 2 not contiguous"),
    ),
    Break::new(
        "a chunk that is not its frame's payload",
        LRO,
        |c| {
            let at = view(c, A1).payload;
            c.built.frames[A1].bytes[at] ^= 1;
            record(c, A1).payload[0] ^= 1;
        },
        Some("chunk 1 is not frame 2's payload"),
        Some("chunk 1 is not frame 2's payload"),
    ),
    // Policy rules.
    Break::new(
        "another ACK merged under Gro",
        GRO,
        |c| move_ack(c, A1, 1),
        Some("frame 2 ACK/window"),
        Some("ACK/window of frame 2 differ"),
    ),
    Break::new(
        "other options merged under Gro",
        GRO,
        |c| {
            let at = tsval_at(view(c, A1));
            c.built.frames[A1].bytes[at + 3] ^= 1;
            record(c, A1).bytes[at + 3] ^= 1;
        },
        Some("frame 2 options"),
        Some("options of frame 2 differ"),
    ),
    Break::new(
        "IPv4 IDs neither fixed nor incrementing under Gro",
        GRO,
        |c| {
            view(c, A1).ip_id = 999;
            let l3 = record(c, A1).l3;
            write_be16(&mut record(c, A1).bytes, l3 + 4, 999);
        },
        Some("IPv4 IDs neither fixed nor incrementing"),
        Some("IPv4 IDs neither fixed nor incrementing"),
    ),
    Break::new(
        "the ACK going back under Lro",
        LRO,
        |c| move_ack(c, A1, -1),
        Some("ACK goes back at 2"),
        Some("ACK goes backwards at frame 2"),
    ),
    Break::new(
        "the TSval going back under Lro",
        LRO,
        |c| {
            let at = tsval_at(view(c, A1));
            write_be32(&mut c.built.frames[A1].bytes, at, 99);
            record(c, A1).tsval = Some(99);
        },
        Some("TSval back at 2"),
        Some("TSval goes backwards at frame 2"),
    ),
    Break::new(
        "timestamps on some frames only under Lro",
        LRO,
        |c| record(c, A1).tsval = None,
        None,
        Some("timestamps present on some frames only"),
    ),
    Break::new(
        "the size limit crossed",
        LRO,
        |c| c.config.max_ip_len = 200,
        Some("over the limit"),
        Some("over the limit"),
    ),
    // (6) Valid output.
    Break::new(
        "a segment that does not parse",
        GRO,
        |c| {
            let (_, bytes, info) = seg(&mut c.run, A0);
            bytes.truncate(20);
            info.len = 20;
        },
        Some("[0, 2, 4]: output does not parse"),
        Some("[0, 2, 4] does not parse"),
    ),
    Break::new(
        "a payload byte",
        LRO,
        |c| *seg(&mut c.run, A0).1.last_mut().expect("payload") ^= 1,
        Some("payload is not its frames'"),
        Some("payload is not the frames' payloads"),
    ),
    Break::new(
        "the IPv4 header checksum",
        LRO,
        |c| seg(&mut c.run, A0).1[14 + 10] ^= 1,
        Some("bad IPv4 header checksum"),
        Some("bad IPv4 header checksum"),
    ),
    Break::new(
        "the TCP checksum",
        LRO,
        |c| seg(&mut c.run, A0).1[14 + 20 + 16] ^= 1,
        Some("bad TCP checksum"),
        Some("bad TCP checksum"),
    ),
    Break::new(
        "the checksum state",
        LRO,
        |c| c.config.checksum_out = OutChecksum::Partial,
        Some("[1, 3, 6]: checksum state"),
        Some("[1, 3, 6]: checksum state Full"),
    ),
    Break::new(
        "the sequence number",
        LRO,
        |c| edit_out(&mut c.run, A0, |b, t| write_be32(b, t.l4 + 4, t.seq + 1)),
        Some("sequence number"),
        Some("sequence number"),
    ),
    Break::new(
        "the flags",
        LRO,
        |c| edit_out(&mut c.run, A0, |b, t| b[t.l4 + 13] |= 0x08),
        Some("[0, 2, 4]: flags"),
        Some("[0, 2, 4]: flags 0x18"),
    ),
    // The link header is part of the flow's identity (addresses and tags), which
    // `check::check` checks first; its byte-for-byte compare of the link header after it is a
    // second guard.
    Break::new(
        "the link header",
        LRO,
        |c| edit_out(&mut c.run, A0, |b, _| b[0] ^= 2),
        Some("output flow identity changed"),
        Some("[0, 2, 4]: link or IP header changed beyond lengths and checksum"),
    ),
    Break::new(
        "the TTL",
        LRO,
        |c| edit_out(&mut c.run, A0, |b, t| b[t.l3 + 8] -= 1),
        Some("IP fields"),
        Some("[0, 2, 4]: link or IP header changed beyond lengths and checksum"),
    ),
    Break::new(
        "the IPv4 ID",
        LRO,
        |c| edit_out(&mut c.run, A0, |b, t| b[t.l3 + 5] ^= 1),
        Some("IP fields"),
        Some("[0, 2, 4]: link or IP header changed beyond lengths and checksum"),
    ),
    Break::new(
        "an ACK older than the last frame's under Lro",
        LRO,
        |c| edit_out(&mut c.run, B0, |b, t| write_be32(b, t.l4 + 8, ACK - 1)),
        Some("ACK older than its last frame's"),
        Some("ACK older than its last frame's"),
    ),
    Break::new(
        "the ACK rewritten under Gro",
        GRO,
        |c| edit_out(&mut c.run, A0, |b, t| write_be32(b, t.l4 + 8, ACK + 1)),
        Some("ACK/window rewritten"),
        Some("Gro segment [0, 2, 4]: TCP header fields other than lengths changed"),
    ),
    Break::new(
        "the options rewritten under Gro",
        GRO,
        |c| edit_out(&mut c.run, A0, |b, t| b[tsval_at(t) + 3] ^= 1),
        Some("options rewritten"),
        Some("Gro segment [0, 2, 4]: TCP header fields other than lengths changed"),
    ),
    Break::new(
        "the urgent pointer under Gro",
        GRO,
        |c| edit_out(&mut c.run, A0, |b, t| b[t.l4 + 19] = 1),
        Some("urgent pointer"),
        Some("[0, 2, 4]: urgent pointer changed"),
    ),
    Break::new(
        "a frame passed as received but changed",
        GRO,
        |c| seg(&mut c.run, ACK_A).1[0] ^= 2,
        Some("frame 5: AsReceived but bytes changed"),
        Some("frame 5: AsReceived but bytes changed"),
    ),
    // (8) Reversibility under Gro.
    Break::new(
        "a GSO size that does not give the frames back",
        GRO,
        |c| seg(&mut c.run, A0).2.gso_size = (MSS / 2) as u16,
        Some("resegment_with::<Gre> gave 6 frames"),
        None,
    ),
    // Released pure ACKs.
    Break::new(
        "a frame released under Gro",
        LRO,
        |c| c.config.policy = Policy::Gro,
        Some("frame 5 released under Gro"),
        Some("frame 5 released under Gro"),
    ),
    Break::new(
        "a released frame with PSH",
        LRO,
        |c| set_flags(c, ACK_A, 0x08),
        Some("frame 5 released with flags 0x18"),
        Some("frame 5 released but may not be merged"),
    ),
    Break::new(
        "a released frame with SACK",
        LRO,
        |c| {
            // The timestamp option's kind made SACK's (5): one block of 8 bytes.
            let at = tsval_at(view(c, ACK_A)) - 2;
            c.built.frames[ACK_A].bytes[at] = 5;
            record(c, ACK_A).sack = true;
        },
        Some("frame 5 released with options"),
        Some("frame 5 released but may not be merged"),
    ),
    Break::new(
        "a released frame with IP options",
        LRO,
        |c| set_ip_options(c, ACK_A),
        Some("frame 5 released with IP options"),
        Some("frame 5 released but may not be merged"),
    ),
    Break::new(
        "a released frame with non-neutral padding",
        LRO,
        |c| padded(c, ACK_A, 1, false),
        Some("frame 5 released with non-neutral padding"),
        Some("frame 5 released but may not be merged"),
    ),
    Break::new(
        "a released frame with payload",
        LRO,
        |c| view(c, ACK_A).ip_end += 1,
        Some("frame 5 released with payload"),
        None,
    ),
    Break::new(
        "a released frame with an untrusted checksum",
        LRO,
        |c| untrusted(c, ACK_A),
        Some("frame 5 released with an untrusted checksum"),
        Some("frame 5 released but may not be merged"),
    ),
    Break::new(
        "a released frame whose ACK the segment lacks",
        LRO,
        |c| move_ack(c, ACK_A, 1),
        Some("frame 5 released; its ACK 5101 is newer than the segment's 5100"),
        Some("frame 5 released; its ACK 5101 is newer than the segment's 5100"),
    ),
    Break::new(
        "a released frame with no segment after it",
        LRO,
        |c| {
            let at = seg_at(&c.run, A0);
            let last = c.run.rec.out.remove(at);
            c.run.rec.out.insert(0, last);
        },
        Some("frame 5 released, no later segment of its flow"),
        Some("frame 5 released but no later segment of its flow carries it"),
    ),
    Break::new(
        "a segment too short for the ACK it absorbed",
        LRO,
        |c| seg(&mut c.run, A0).1.truncate(20),
        Some("frame 5 released; the segment that carries it is too short for a TCP header"),
        Some("frame 5 released; the segment that carries it is too short for a TCP header"),
    ),
];

#[test]
fn every_break_is_refused_by_each_checker_that_reads_it() {
    let mut missed = Vec::new();
    for x in BREAKS {
        let mut c = case(x.policy);
        (x.tamper)(&mut c);
        for (checker, want, got) in [
            ("check::check", x.check, verdict_of(&c)),
            ("check_truth", x.truth, truth_verdict(&c)),
        ] {
            let Some(want) = want else { continue };
            if !got.as_ref().is_err_and(|msg| msg.contains(want)) {
                missed.push(format!(
                    "{} ({:?}), {checker}: want {want:?}, got {got:?}",
                    x.what, x.policy
                ));
            }
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// Under `Lro`, a duplicate ACK (RFC 5681) is never superseded: the engine passes it. Two
/// pure ACKs of flow A with the same ACK number and window, after a data frame.
fn duplicate_ack_case() -> Case {
    let frames = vec![
        frame(0, 0, ACK, 0x10, MSS),
        frame(0, 1, ACK + 100, 0x10, 0),
        frame(0, 1, ACK + 100, 0x10, 0),
    ];
    let built = pushed_in_order(frames);
    let mut c = case_with(built, Config::lro());
    // As the generator records it: a duplicate of frame 1's ACK.
    record(&mut c, 2).dup_ack = true;
    record(&mut c, 2).dup_prev = Some(1);
    c
}

#[test]
fn a_duplicate_ack_superseded_or_merged_is_caught() {
    let genuine = duplicate_ack_case();
    assert_eq!(verdict_of(&genuine), Ok(()));
    assert_eq!(truth_verdict(&genuine), Ok(()));
    assert_eq!(shape(&genuine.run), ["Rel(1)", "[0]", "[2]"]);

    let mut released = duplicate_ack_case();
    released.run.rec.out[2] = Out::Rel(2);
    assert_refused(
        verdict_of(&released),
        "frame 2: a duplicate ACK was released",
    );
    assert_refused(
        truth_verdict(&released),
        "frame 2 released but may not be merged",
    );

    // Frame 2 (no payload) appended to the segment of frame 0, as a recorder would show it.
    let mut merged = duplicate_ack_case();
    merged.run.rec.out.pop();
    let Some(Out::Seg {
        ids, chunks, info, ..
    }) = merged.run.rec.out.last_mut()
    else {
        panic!("the segment of frame 0 is last")
    };
    ids.push(2);
    chunks.push(Vec::new());
    info.frames += 1;
    assert_refused(verdict_of(&merged), "frame 2 is a duplicate ACK");
    assert_refused(truth_verdict(&merged), "frame 2 (duplicate ACK)");
}

#[test]
fn a_fragment_overtaking_its_flow_is_caught() {
    // Flow A's next frame with More Fragments set: a fragment of flow A's addresses.
    let data = frame(0, 2, ACK, 0x10, MSS);
    let t = data.tcp.expect("TCP");
    let mut bytes = data.bytes;
    bytes[14 + 6] |= 0x20;
    oracle::fix_checksums(&mut bytes, &t);
    let fragment = Pushed::new(bytes, META);
    assert!(fragment.tcp.is_none(), "a fragment has no TCP view");
    let frames = vec![
        frame(0, 0, ACK, 0x10, MSS),
        frame(0, 1, ACK, 0x10, MSS),
        fragment,
    ];
    let built = pushed_in_order(frames);
    let mut c = case_with(built, Config::lro());
    assert_eq!(verdict_of(&c), Ok(()));
    assert_eq!(shape(&c.run), ["[0, 1]", "[2]"]);
    c.run.rec.out.swap(0, 1);
    assert_refused(
        verdict_of(&c),
        "order: frame 2 (a fragment or a never-merged tunnel header)",
    );
}

#[test]
fn a_partial_checksum_that_is_not_the_pseudo_header_sum_is_caught() {
    let mut c = case_with(
        built(),
        Config::lro().with_checksum_out(OutChecksum::Partial),
    );
    assert_eq!(verdict_of(&c), Ok(()));
    assert_eq!(truth_verdict(&c), Ok(()));
    let (_, bytes, _) = seg(&mut c.run, A0);
    bytes[14 + 20 + 17] ^= 1;
    assert_refused(
        verdict_of(&c),
        "partial checksum is not the pseudo-header sum",
    );
    assert_refused(truth_verdict(&c), "[0, 2, 4]: partial checksum");
}

/// How [`Liar`] misreports.
#[derive(Clone, Copy, Debug)]
enum Lie {
    /// A frame it passes is said to be held.
    PassedAsHeld,
    /// A frame it holds is said to be passed.
    HeldAsPassed,
    /// A frame it holds is said to be absorbed (superseded and released).
    HeldAsAbsorbed,
    /// A frame it passes is said to be merged into a held segment.
    PassedAsMerged,
    /// A frame it merges and keeps is said to have completed its segment.
    MergedAsFlushed,
    /// It says it holds one more frame than it does.
    HeldFrames,
    /// It says it holds nothing.
    HeldNone,
    /// One frame more in and out than it saw: conserved, but not what was pushed.
    FramesIn,
    /// One frame more in than it saw: not conserved.
    Unconserved,
}

/// An engine that misreports one thing about what it did.
struct Liar {
    inner: Engine<Tagged, Sizes<8, FRAMES>>,
    lie: Lie,
    shown: Stats,
}

impl Liar {
    fn shown(&mut self) {
        self.shown = self.inner.stats().clone();
        match self.lie {
            Lie::FramesIn => {
                self.shown.frames_in += 1;
                self.shown.frames_out += 1;
            }
            Lie::Unconserved => self.shown.frames_in += 1,
            _ => {}
        }
    }
}

impl Coalescer<Tagged> for Liar {
    fn push<K: Sink<Tagged> + ?Sized>(
        &mut self,
        frame: Tagged,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let v = self.inner.push(frame, meta, sink);
        self.shown();
        match (self.lie, v) {
            (Lie::PassedAsHeld, Verdict::Passed(_)) => Verdict::Held,
            (Lie::HeldAsPassed, Verdict::Held) => Verdict::Passed(PassReason::NotTcp),
            (Lie::HeldAsAbsorbed, Verdict::Held) => Verdict::Absorbed,
            (Lie::PassedAsMerged, Verdict::Passed(_)) => Verdict::Merged,
            (Lie::MergedAsFlushed, Verdict::Merged) => {
                Verdict::MergedAndFlushed(FlushReason::SizeLimit)
            }
            _ => v,
        }
    }

    fn flush_all<K: Sink<Tagged> + ?Sized>(&mut self, sink: &mut K) {
        self.inner.flush_all(sink);
        self.shown();
    }

    fn flush_idle<K: Sink<Tagged> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        self.inner.flush_idle(now, sink);
        self.shown();
    }

    fn stats(&self) -> &Stats {
        &self.shown
    }

    fn held_frames(&self) -> usize {
        match self.lie {
            Lie::HeldNone => 0,
            lie => self.inner.held_frames() + usize::from(matches!(lie, Lie::HeldFrames)),
        }
    }
}

#[test]
fn an_engine_misreporting_its_verdicts_counters_or_held_frames_is_caught() {
    for (lie, want) in [
        (Lie::PassedAsHeld, "frame 5: Held but delivered"),
        (
            Lie::HeldAsPassed,
            "frame 0: Passed(NotTcp) but not delivered alone",
        ),
        (Lie::HeldAsAbsorbed, "frame 0: Absorbed but not released"),
        (
            Lie::PassedAsMerged,
            "frame 5: Merged (still held) but delivered",
        ),
        (
            Lie::MergedAsFlushed,
            "frame 2: verdict MergedAndFlushed(SizeLimit) but last output None",
        ),
        (Lie::HeldFrames, "held_frames after step 0"),
        (Lie::HeldNone, "held_frames after step 0"),
        (Lie::FramesIn, "frames_in"),
        (Lie::Unconserved, "stats not conserved"),
    ] {
        let config = Config::gro();
        let mut liar = Liar {
            inner: Engine::new(config),
            lie,
            shown: Stats::default(),
        };
        let built = built();
        let r = check::catch(|| check::run(&mut liar, &built, true).rec.out.len());
        assert!(
            r.as_ref().is_err_and(|msg| msg.contains(want)),
            "{lie:?}: want {want:?}, got {r:?}"
        );
    }
    // Without the verdict checks (a wrapper that queues), the teardown still counts.
    let mut liar = Liar {
        inner: Engine::new(Config::gro()),
        lie: Lie::HeldFrames,
        shown: Stats::default(),
    };
    let r = check::catch(|| check::run(&mut liar, &built(), false).rec.out.len());
    let want = "frames still held after flush_all";
    assert!(
        r.as_ref().is_err_and(|msg| msg.contains(want)),
        "want {want:?}, got {r:?}"
    );
}

#[test]
fn prediction_on_and_off_differing_is_caught() {
    let runs = || {
        let mut on: Box<Engine<Tagged, Sizes<8, FRAMES>>> =
            Box::new(Engine::new(Config::lro().with_header_prediction(true)));
        let mut off: Box<Engine<Tagged, Sizes<8, FRAMES>>> =
            Box::new(Engine::new(Config::lro().with_header_prediction(false)));
        let b = built().all_verified();
        let a = check::run(&mut *on, &b, true);
        let o = check::run(&mut *off, &b, true);
        (a, on.stats().clone(), o, off.stats().clone())
    };
    let same = |(a, sa, o, so): &(Run, Stats, Run, Stats)| {
        check::catch(|| check::same_with_prediction(a, sa, o, so))
    };
    let genuine = runs();
    assert!(
        same(&genuine).expect("the genuine runs agree") > 0,
        "header prediction took no frame"
    );

    let mut event = runs();
    event.2.rec.out.swap(0, 1);
    assert_refused(same(&event), "sink event 0 differs");

    let mut verdict = runs();
    verdict.2.verdicts[A1] = Verdict::Held;
    assert_refused(same(&verdict), "verdicts differ");

    let mut counter = runs();
    counter.3.segments += 1;
    assert_refused(same(&counter), "counters differ");

    let mut off_predicts = runs();
    off_predicts.3.predicted = 1;
    assert_refused(
        same(&off_predicts),
        "predicted and bursts paused with prediction off",
    );
}

/// The generator's record of one of this scenario's frames, as `Scenario::build` makes it
/// (`scenario::check_truth` reads these): flow A is flow 0, B flow 1. A frame the reference
/// reader does not read as TCP is recorded as malformed, of no flow.
fn input_of(p: &Pushed) -> Input {
    let t = p.tcp.as_ref();
    let at = |f: fn(&Tcp) -> usize| t.map_or(0, f);
    Input {
        flow: t.map(|t| usize::from(t.id.sport - 1000)),
        bytes: p.bytes.clone(),
        meta: p.meta,
        payload: t.map_or(Vec::new(), |t| p.bytes[t.payload..t.ip_end].to_vec()),
        ip_end: at(|t| t.ip_end),
        l3: at(|t| t.l3),
        l4: at(|t| t.l4),
        flags: t.map_or(0, |t| t.flags),
        seq: t.map_or(0, |t| t.seq),
        ack: t.map_or(0, |t| t.ack),
        window: t.map_or(0, |t| t.window),
        tsval: t.and_then(|t| t.tsval(&p.bytes)),
        sack: false,
        corrupt: false,
        ip_opts: false,
        fragment: false,
        malformed: t.is_none(),
        padding: None,
        dup_ack: false,
        dup_prev: None,
    }
}

/// What `scenario::check_truth` says of the case.
fn truth_verdict(c: &Case) -> Result<(), String> {
    check::catch(|| check_truth(&c.truth, &c.config, &c.run)).and_then(|r| r)
}

// Through a GRE tunnel: the checks of the outer layers, and the second GRE reader's
// (`gre_reader::cross_check`), which `check::check` applies to every tunnelled segment.

/// Where a tunnelled frame of [`gre_built`] has its outer IPv4 header and its GRE header
/// (Ethernet, then 20 bytes of IPv4; GRE with checksum and key).
const OUTER_L3: usize = 14;
const GRE_AT: usize = OUTER_L3 + 20;

/// Flow A's first three data frames in a GRE tunnel with checksum and key, outer IPv4 IDs
/// incrementing.
fn gre_built() -> Built {
    let frames: Vec<Pushed> = (0..3)
        .map(|k| {
            let inner = frame_bytes(0, k, ACK, 0x10, MSS);
            let gre = GreSpec::ipv4().checksum().key(7).ip_id(k as u16);
            let mut out = vec![0u8; 2048];
            let n = gre
                .write(InnerFrame::Ethernet(&inner), &mut out)
                .expect("room for the wrapped frame");
            out.truncate(n);
            Pushed::new(out, META)
        })
        .collect();
    pushed_in_order(frames)
}

fn gre_case() -> Case {
    let built = gre_built();
    let config = Config::gro();
    let mut engine: Box<GreEngine<Tagged, Sizes<8, FRAMES>>> = Box::new(GreEngine::new(config));
    let run = check::run(&mut *engine, &built, true);
    finished(built, config, run)
}

/// One break of the tunnelled run: its name, what it changes, and the message it must get.
type GreBreak = (&'static str, fn(&mut Case), &'static str);

const GRE_BREAKS: &[GreBreak] = &[
    (
        "another outer TTL merged (ground truth)",
        |c| {
            let o = c.built.frames[1].tcp.as_mut().expect("TCP").outer.as_mut();
            o.expect("tunnelled").ttl -= 1;
        },
        "frame 1 outer TTL/TOS/DF",
    ),
    (
        "another outer TTL merged (as the second reader reads it)",
        |c| c.built.frames[1].bytes[OUTER_L3 + 8] -= 1,
        "frame 1 outer TTL differs",
    ),
    (
        "never-merged GRE flags merged",
        |c| {
            for f in &mut c.built.frames {
                let t = f.tcp.as_mut().expect("TCP");
                t.id.tunnel.as_mut().expect("tunnelled").flags |= 0x1000;
            }
        },
        "GRE flags 0xb000 merged",
    ),
    (
        "another GRE header merged",
        |c| c.built.frames[1].bytes[GRE_AT + 6] ^= 1,
        // The reference reader's check, not the second reader's ("... GRE header differs").
        "frame 1 GRE header\n",
    ),
    (
        "no tunnel in the segment's info",
        |c| seg(&mut c.run, 0).2.tunnel = None,
        "tunnelled, but no tunnel in its info",
    ),
    (
        "the outer IPv4 header checksum",
        |c| seg(&mut c.run, 0).1[OUTER_L3 + 10] ^= 1,
        "IPv4 header checksum wrong",
    ),
    (
        "the GRE checksum",
        |c| seg(&mut c.run, 0).1[GRE_AT + 4] ^= 1,
        "GRE checksum wrong",
    ),
    (
        "the outer TTL",
        |c| edit_out(&mut c.run, 0, |b, _| b[OUTER_L3 + 8] -= 1),
        "outer IP header",
    ),
    (
        "the GRE header",
        |c| edit_out(&mut c.run, 0, |b, _| b[GRE_AT + 6] ^= 1),
        "GRE header changed beyond its checksum",
    ),
];

#[test]
fn every_break_of_a_tunnelled_segment_is_caught() {
    let genuine = gre_case();
    assert_eq!(verdict_of(&genuine), Ok(()));
    assert_eq!(shape(&genuine.run), ["[0, 1, 2]"]);
    let mut missed = Vec::new();
    for &(what, tamper, want) in GRE_BREAKS {
        let mut c = gre_case();
        tamper(&mut c);
        match verdict_of(&c) {
            Err(msg) if msg.contains(want) => {}
            other => missed.push(format!("{what}: want {want:?}, got {other:?}")),
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

/// The fuzz targets' header check (`structured::check_headers`, feature `fuzz`): a rewritten
/// segment's IP and TCP headers are the head's but for lengths, checksums and PSH/FIN, and
/// under `Lro` carry the newest ACK, window and timestamps of its frames and of the pure ACKs
/// it absorbed. CI runs this with `cargo test -p lro-testkit --features fuzz --test checker`.
#[cfg(feature = "fuzz")]
#[test]
fn the_fuzz_targets_header_check_refuses_broken_headers() {
    use lro_testkit::structured::check_headers;
    let judge = |c: &Case| check::catch(|| check_headers(&c.built, &c.config, &c.run, &|_| true));
    for policy in [LRO, GRO] {
        assert_eq!(judge(&case(policy)), Ok(()), "{policy:?}");
    }
    type HeaderBreak = (Policy, fn(&mut Case), &'static str);
    let breaks: [HeaderBreak; 4] = [
        (
            LRO,
            // The ACK of the data frames, not of the pure ACK the segment absorbed.
            |c| edit_out(&mut c.run, A0, |b, t| write_be32(b, t.l4 + 8, ACK)),
            "TCP header is not the head's with the newest ACK, window and timestamps (frame 5's)",
        ),
        (
            LRO,
            |c| edit_out(&mut c.run, A0, |b, t| b[tsval_at(t) + 7] ^= 1),
            "TCP header is not the head's with the newest ACK",
        ),
        (
            GRO,
            |c| edit_out(&mut c.run, A0, |b, t| b[t.l4 + 15] ^= 1),
            "Gro segment [0, 2, 4]: TCP header is not the head's",
        ),
        (
            GRO,
            |c| edit_out(&mut c.run, A0, |b, t| b[t.l3 + 1] = 4),
            "IP header changed beyond its length and checksum",
        ),
    ];
    for (policy, tamper, want) in breaks {
        let mut c = case(policy);
        tamper(&mut c);
        assert_refused(judge(&c), want);
    }
}
