//! Running a built scenario on an engine, recording what comes out, and checking DESIGN.md's
//! invariants on the record against the ground truth of the inputs.

use crate::built::{Built, Pushed, Step};
use crate::frame::{Out, Recorder, Tagged};
use crate::oracle::{self, Identity};
use lro_core::{
    gso, Cause, Coalescer, Config, OutChecksum, PassReason, Policy, SegmentInfo, Stats, Verdict,
};
use lro_gre::Gre;
use std::collections::HashMap;

/// What [`run`] recorded.
#[derive(Debug)]
pub struct Run {
    /// Everything the sink saw, in order.
    pub rec: Recorder,
    /// The verdict of every frame's push, by frame id (`Verdict::Queued` for frames never
    /// pushed).
    pub verdicts: Vec<Verdict>,
    /// Per frame id, for scenarios with generator ground truth ([`Built::truth`]): a duplicate
    /// ACK of an ACK whose frame the engine still held for the flow when it was pushed.
    pub dup_known: Vec<bool>,
    /// Per entry of `rec.out`, how many steps had run when the sink saw it: `k + 1` for an
    /// output during step `k` (counted from 0), one more than the steps for the teardown
    /// flush. Empty for a run made elsewhere.
    pub steps_done: Vec<usize>,
}

/// Runs the steps on `engine`, then a final `flush_all` (teardown): nothing may stay held and
/// the counters must be conserved. With `verdicts` (a plain engine; wrappers such as
/// `RssSorted` only queue), also checks that every push's verdict agrees with what the sink saw
/// during the push (cause included), that a push never emits a frame not yet pushed, and that
/// `frames_in` grew by the pushes (an engine run before keeps its counters) and that after
/// every step `held_frames` counts the frames pushed, held or merged, and not yet delivered.
/// Panics with a description on a violation.
pub fn run<C: Coalescer<Tagged>>(engine: &mut C, built: &Built, verdicts: bool) -> Run {
    let frames_in_before = engine.stats().frames_in;
    let n = built.frames.len();
    let mut rec = Recorder::default();
    let mut out = vec![Verdict::Queued; n];
    let mut pushed = vec![false; n];
    let mut emitted_ids = vec![false; n];
    let mut dup_known = vec![false; n];
    // The frames of this run still held, by their verdicts ([`still_held`]).
    let mut held_count = 0usize;
    let mut pushes = 0u64;
    let mut steps_done = Vec::new();
    for (k, step) in built.steps.iter().enumerate() {
        let before = rec.out.len();
        match *step {
            Step::Push(id) => {
                let f = &built.frames[id];
                if let Some(truth) = &built.truth {
                    let inp = &truth.frames[id];
                    if let (true, Some(p)) = (inp.dup_ack, inp.dup_prev) {
                        let held = |i: usize| still_held(out[i], emitted_ids[i]);
                        let flow_held = (0..id)
                            .any(|i| truth.frames[i].flow == inp.flow && pushed[i] && held(i));
                        dup_known[id] =
                            held(p as usize) || (out[p as usize] == Verdict::Absorbed && flow_held);
                    }
                }
                let frame = Tagged {
                    id,
                    buf: f.bytes.clone(),
                };
                let v = engine.push(frame, &f.meta, &mut rec);
                pushes += 1;
                pushed[id] = true;
                out[id] = v;
                held_count += usize::from(still_held(v, false));
                if verdicts {
                    check_verdict(id, v, &rec.out[before..]);
                }
                for o in &rec.out[before..] {
                    let early = match o {
                        Out::Seg { ids, .. } => ids.iter().any(|&i| !pushed[i]),
                        Out::Rel(r) => !pushed[*r],
                    };
                    assert!(!early, "push of {id} emitted a frame not yet pushed");
                }
            }
            Step::FlushAll => engine.flush_all(&mut rec),
            Step::FlushIdle(now) => engine.flush_idle(now, &mut rec),
        }
        for o in &rec.out[before..] {
            if let Out::Seg { ids, .. } = o {
                for &i in ids {
                    if still_held(out[i], std::mem::replace(&mut emitted_ids[i], true)) {
                        held_count -= 1;
                    }
                }
            }
        }
        if verdicts {
            assert_eq!(
                engine.held_frames(),
                held_count,
                "held_frames after step {k} ({step:?})"
            );
        }
        steps_done.resize(rec.out.len(), k + 1);
    }
    engine.flush_all(&mut rec);
    steps_done.resize(rec.out.len(), built.steps.len() + 1);
    assert_eq!(engine.held_frames(), 0, "frames still held after flush_all");
    let s = engine.stats();
    assert!(s.is_conserved(), "stats not conserved: {s:?}");
    if verdicts {
        assert_eq!(s.frames_in - frames_in_before, pushes, "frames_in");
    }
    Run {
        rec,
        verdicts: out,
        dup_known,
        steps_done,
    }
}

/// Whether a frame pushed with the verdict `v` is still held: `Held` or `Merged`, and no
/// segment has delivered it (`emitted`).
fn still_held(v: Verdict, emitted: bool) -> bool {
    matches!(v, Verdict::Held | Verdict::Merged) && !emitted
}

/// Runs `f`, turning a panic (every check of this module panics) into its message, for
/// drivers that report failures as values (proptest's `TestCaseError::fail`).
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|e| {
        e.downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "a check panicked".to_string())
    })
}

/// `stats` without the counters header prediction may change (the frames it took, the bursts
/// it paused in, the flows it made forget their entries): what the general path alone counts
/// for the same input.
pub fn without_prediction(stats: &Stats) -> Stats {
    let mut s = stats.clone();
    s.predicted = 0;
    s.prediction_paused = 0;
    // Entries given to other flows: prediction also keeps an entry for a pure-ACK flow
    // between its frames (`Engine::keep_idle`), which can take another flow's.
    s.forgotten = 0;
    s
}

/// Header prediction decides as the general path: a run with prediction on and one with it
/// off (the same input, the same engine shape) give the same sink events, verdicts and counters
/// (those [`without_prediction`] leaves out apart; the prediction counters must be zero with
/// prediction off). Returns how many frames were predicted. Panics with a description on a
/// difference.
pub fn same_with_prediction(on: &Run, on_stats: &Stats, off: &Run, off_stats: &Stats) -> u64 {
    assert_eq!(
        (off_stats.predicted, off_stats.prediction_paused),
        (0, 0),
        "frames predicted and bursts paused with prediction off"
    );
    if let Some(i) = (0..on.rec.out.len().max(off.rec.out.len()))
        .find(|&i| on.rec.out.get(i) != off.rec.out.get(i))
    {
        panic!(
            "header prediction on vs off: sink event {i} differs: {:?} vs {:?}",
            on.rec.out.get(i),
            off.rec.out.get(i)
        );
    }
    assert_eq!(
        on.verdicts, off.verdicts,
        "header prediction on vs off: verdicts differ"
    );
    assert_eq!(
        without_prediction(on_stats),
        without_prediction(off_stats),
        "header prediction on vs off: counters differ"
    );
    on_stats.predicted
}

fn check_verdict(n: usize, v: Verdict, during: &[Out]) {
    let alone = during
        .iter()
        .any(|o| matches!(o, Out::Seg { ids, .. } if ids == &[n]));
    let released = during.iter().any(|o| matches!(o, Out::Rel(i) if *i == n));
    let anywhere = during.iter().any(|o| match o {
        Out::Seg { ids, .. } => ids.contains(&n),
        Out::Rel(i) => *i == n,
    });
    match v {
        Verdict::Passed(r) => {
            assert!(alone, "frame {n}: {v:?} but not delivered alone");
            match during.last() {
                Some(Out::Seg { ids, info, .. }) if ids == &[n] => assert_eq!(
                    info.cause,
                    Cause::Passed(r),
                    "frame {n}: verdict {v:?}, cause {:?}",
                    info.cause
                ),
                other => panic!("frame {n}: verdict {v:?} but last output {other:?}"),
            }
        }
        Verdict::Absorbed => assert!(released, "frame {n}: Absorbed but not released"),
        Verdict::Held => assert!(!anywhere, "frame {n}: Held but delivered"),
        Verdict::Queued => panic!("frame {n}: the engine itself never queues"),
        Verdict::Merged => assert!(!anywhere, "frame {n}: Merged (still held) but delivered"),
        // It completed its segment (PSH/FIN, short frame): delivered last, with it.
        Verdict::MergedAndFlushed(r) => {
            assert!(!released, "frame {n}: {v:?} but released");
            match during.last() {
                Some(Out::Seg { ids, info, .. })
                    if ids.len() > 1
                        && ids.last() == Some(&n)
                        && info.cause == Cause::Flushed(r) => {}
                other => panic!("frame {n}: verdict {v:?} but last output {other:?}"),
            }
        }
    }
}

/// DESIGN.md invariant 2 for frames whose flow the engine cannot fully read: every frame of
/// a flow such a frame belongs with, pushed before it, comes out before it. A fragment belongs
/// with the flows of its addresses, or for a fragment of a GRE datagram with every flow
/// tunnelled between its outer addresses ([`oracle::Barrier`]); a tunnelled frame whose GRE
/// header never merges (another tunnel identity) with its inner flow in any tunnel between
/// the same outer addresses.
fn check_barriers(inputs: &[Pushed], rec: &Recorder, rank: &[usize]) {
    let mut at = vec![usize::MAX; inputs.len()];
    for (pos, o) in rec.out.iter().enumerate() {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| at[i] = pos),
            Out::Rel(i) => at[*i] = pos,
        }
    }
    for (i, x) in inputs.iter().enumerate() {
        if rank[i] == usize::MAX {
            continue;
        }
        let Some(barrier) = oracle::barrier(&x.bytes, &x.meta) else {
            continue;
        };
        for (j, y) in inputs.iter().enumerate() {
            if rank[j] < rank[i] && y.tcp.as_ref().is_some_and(|t| barrier.covers(&t.id)) {
                assert!(
                    at[j] < at[i],
                    "order: frame {i} (a fragment or a never-merged tunnel header) came out \
                     before frame {j}, pushed earlier, of a flow it belongs with"
                );
            }
        }
    }
}

/// `a <= b` in sequence-number space (RFC 1982).
pub(crate) fn serial_le(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) >= 0
}

/// The order a run promises.
#[derive(Clone, Copy)]
pub enum Order<'a> {
    /// Arrival order, as an engine keeps it: every flow's frames in order, and the held
    /// segments a frame belongs with (though its flow cannot be fully read: a fragment, a
    /// tunnelled frame whose GRE header never merges) before it.
    Arrival,
    /// The order of the flows this accepts only, and nothing across flows (the RSS wrapper:
    /// frames of one connection with different hashes, fragments among them, may be
    /// reordered).
    Flows(&'a dyn Fn(&Identity) -> bool),
}

impl Order<'_> {
    /// Whether the order of the flow `id` is promised.
    pub fn keeps(&self, id: &Identity) -> bool {
        match self {
            Order::Arrival => true,
            Order::Flows(f) => f(id),
        }
    }
}

/// Checks every invariant on a run's record: conservation, per-flow order and bytes,
/// isolation, no laundering, the never-merged list, the policy rules, the size limit, valid
/// output (through GRE too), and under `Gro` that software segmentation gives the frames back.
/// With generator ground truth ([`Built::truth`]), also every check of
/// [`crate::scenario::check_truth`]. `frames_max` is the table's frame limit per segment;
/// `order` says which order the run promises ([`Order`]). Panics with a description on a
/// violation.
pub fn check(built: &Built, config: &Config, frames_max: usize, run: &Run, order: Order<'_>) {
    let ordered = &|id: &Identity| order.keeps(id);
    let rec = &run.rec;
    let inputs = &built.frames;
    let gro = config.policy == Policy::Gro;
    // (1) Conservation: every pushed frame exactly once, nothing else.
    let mut rank = vec![usize::MAX; inputs.len()];
    for (r, id) in built
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Push(id) => Some(*id),
            _ => None,
        })
        .enumerate()
    {
        assert_eq!(rank[id], usize::MAX, "frame {id} pushed twice");
        rank[id] = r;
    }
    let mut seen = vec![0u32; inputs.len()];
    for o in &rec.out {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| seen[i] += 1),
            Out::Rel(i) => seen[*i] += 1,
        }
    }
    if let Some(i) = (0..inputs.len()).find(|&i| seen[i] != u32::from(rank[i] != usize::MAX)) {
        panic!(
            "conservation: frame {i} (pushed: {}) came back {} times",
            rank[i] != usize::MAX,
            seen[i]
        );
    }
    let pred = duplicates(inputs, &rank);
    // (2)+(3) Order and bytes per flow: frames of a flow come out in push order, so the
    // concatenated payload out equals the payload in (each segment's payload is checked to be
    // its frames' payloads below).
    let mut last: HashMap<Identity, usize> = HashMap::new();
    for o in &rec.out {
        if let Out::Seg { ids, .. } = o {
            for &i in ids {
                if let Some(t) = &inputs[i].tcp {
                    if let Some(&p) = last.get(&t.id) {
                        assert!(
                            rank[p] < rank[i] || !ordered(&t.id),
                            "order: frame {i} after frame {p} of the same flow"
                        );
                    }
                    last.insert(t.id, i);
                }
            }
        }
    }
    if matches!(order, Order::Arrival) {
        check_barriers(inputs, rec, &rank);
    }
    for (pos, o) in rec.out.iter().enumerate() {
        match o {
            Out::Rel(i) => check_released(inputs, gro, rec, pos, *i, &pred, &rank, ordered),
            Out::Seg {
                ids,
                bytes,
                chunks,
                info,
            } => {
                assert_eq!(usize::from(info.frames), ids.len(), "info.frames");
                assert_eq!(info.len, bytes.len(), "info.len");
                assert!(ids.len() <= frames_max, "segment of {} frames", ids.len());
                let head = &inputs[ids[0]];
                if info.checksum == OutChecksum::AsReceived {
                    assert_eq!(ids.len(), 1, "segment {ids:?}: several frames, AsReceived");
                    let same = bytes[..] == head.bytes[..];
                    let trimmed = head.tcp.as_ref().is_some_and(|t| {
                        !gro && bytes[..] == head.bytes[..t.ip_end]
                            && oracle::is_zero(oracle::sum(&head.bytes[t.ip_end..]))
                    });
                    assert!(
                        same || trimmed,
                        "frame {}: AsReceived but bytes changed",
                        ids[0]
                    );
                    // A frame passed through by the adaptive bypass was not parsed: no flow.
                    let parsed = info.cause != Cause::Passed(PassReason::Bypassed);
                    if let Some(t) = head.tcp.as_ref().filter(|_| parsed) {
                        assert!(info.flow.is_some(), "frame {}: no flow in info", ids[0]);
                        assert_eq!(info.payload_len as usize, t.payload_len(), "payload_len");
                    }
                } else {
                    check_rewritten(inputs, config, ids, bytes, chunks, info, &pred, ordered);
                }
                // (8) Reversibility.
                if gro && ids.len() > 1 {
                    check_resegment(inputs, ids, bytes, info, built.truth.is_some());
                }
            }
        }
    }
    if let Some(truth) = &built.truth {
        if let Err(e) = crate::scenario::check_truth(truth, config, run) {
            panic!("{e}");
        }
    }
}

/// Every checksum of the frame as a sender writes it (canonical ones'-complement form): what
/// segmentation reproduces.
fn canonical(b: &[u8], t: &oracle::Tcp) -> bool {
    let mut c = b.to_vec();
    oracle::fix_checksums(&mut c, t);
    c == b
}

/// (8) A `Gro` segment of several frames: software segmentation (`resegment_with::<Gre>`, and
/// for plain frames `gso::resegment` too) gives back as many frames, and when every frame
/// carried canonical checksums (or `exact`: frames of the scenario generator, which must come
/// back whatever their checksums), the frames themselves byte for byte.
fn check_resegment(
    inputs: &[Pushed],
    ids: &[usize],
    bytes: &[u8],
    info: &SegmentInfo,
    exact: bool,
) {
    let head = &inputs[ids[0]];
    let all_canonical = ids.iter().all(|&i| {
        let f = &inputs[i];
        f.tcp.as_ref().is_some_and(|t| canonical(&f.bytes, t))
    });
    let plain = head.tcp.as_ref().is_some_and(|t| t.outer.is_none());
    let mut buf = vec![0u8; bytes.len().max(70_000)];
    let mut gre: Vec<Vec<u8>> = Vec::new();
    gso::resegment_with::<Gre>(
        bytes,
        &head.meta,
        info.gso_size,
        (info.fixed_id, info.fixed_outer_id),
        &mut buf,
        |f| gre.push(f.to_vec()),
    )
    .unwrap_or_else(|e| panic!("segment {ids:?}: resegment_with::<Gre>: {e}"));
    let mut all = vec![("resegment_with::<Gre>", gre)];
    if plain {
        let mut back: Vec<Vec<u8>> = Vec::new();
        gso::resegment(
            bytes,
            &head.meta,
            info.gso_size,
            info.fixed_id,
            &mut buf,
            |f| back.push(f.to_vec()),
        )
        .unwrap_or_else(|e| panic!("segment {ids:?}: resegment failed: {e:?}"));
        all.push(("resegment", back));
    }
    for (how, back) in all {
        assert_eq!(
            back.len(),
            ids.len(),
            "segment {ids:?}: {how} gave {} frames",
            back.len()
        );
        if !all_canonical && !exact {
            continue;
        }
        for (k, (&i, f)) in ids.iter().zip(&back).enumerate() {
            assert_eq!(
                &f[..],
                &inputs[i].bytes[..],
                "segment {ids:?}: {how}: piece {k} is not frame {i}"
            );
        }
    }
}

/// Per frame: is it a duplicate ACK in RFC 5681's sense (section 2): no data, ACK set, no
/// SYN/FIN/RST, the same ACK number and window as the previous ACK of its flow, and that ACK
/// number is the greatest the flow has carried (since its last SYN/RST). Only frames whose
/// checksums are trusted count as "received" (the engine may not believe the others).
/// Judged under `Lro` only (`Gro` never merges pure ACKs).
/// `rank[id]` is the frame's place in push order (`usize::MAX`: never pushed).
pub fn duplicates(inputs: &[Pushed], rank: &[usize]) -> Vec<bool> {
    // Per flow: (previous trusted ACK's number and window, greatest ACK number).
    let mut state: HashMap<Identity, ((u32, u16), u32)> = HashMap::new();
    let mut order: Vec<usize> = (0..inputs.len())
        .filter(|&i| rank[i] != usize::MAX)
        .collect();
    order.sort_by_key(|&i| rank[i]);
    let mut dup = vec![false; inputs.len()];
    for i in order {
        dup[i] = (|| {
            let f = &inputs[i];
            let Some(t) = f.tcp.as_ref().filter(|_| f.trusted) else {
                return false;
            };
            if t.flags & 0x06 != 0 {
                // SYN or RST: the flow's ACK history starts again.
                state.remove(&t.id);
                return false;
            }
            if t.flags & 0x10 == 0 {
                return false;
            }
            let cur = (t.ack, t.window);
            let dup = match state.get(&t.id) {
                Some(&(prev, max)) => {
                    t.payload_len() == 0 && t.flags & 0x01 == 0 && prev == cur && t.ack == max
                }
                None => false,
            };
            let max = match state.get(&t.id) {
                Some(&(_, m)) if !serial_le(m, t.ack) => m,
                _ => t.ack,
            };
            state.insert(t.id, (cur, max));
            dup
        })();
    }
    dup
}

#[allow(clippy::too_many_arguments)]
fn check_released(
    inputs: &[Pushed],
    gro: bool,
    rec: &Recorder,
    pos: usize,
    i: usize,
    pred: &[bool],
    rank: &[usize],
    ordered: &dyn Fn(&Identity) -> bool,
) {
    assert!(!gro, "frame {i} released under Gro");
    let f = &inputs[i];
    let t = f
        .tcp
        .as_ref()
        .unwrap_or_else(|| panic!("frame {i} released but not TCP"));
    assert!(f.trusted, "frame {i} released with an untrusted checksum");
    assert_eq!(t.payload_len(), 0, "frame {i} released with payload");
    assert!(
        t.flags & 0x10 != 0 && t.flags & 0x2f == 0,
        "frame {i} released with flags {:#x}",
        t.flags
    );
    assert!(!t.ip_opts, "frame {i} released with IP options");
    assert!(
        t.id.tunnel.is_none_or(|x| x.mergeable()),
        "frame {i} released with GRE flags {:#x}",
        t.id.tunnel.map_or(0, |x| x.flags)
    );
    assert!(
        t.options_mergeable(&f.bytes),
        "frame {i} released with options"
    );
    assert!(
        oracle::is_zero(oracle::sum(&f.bytes[t.ip_end..])),
        "frame {i} released with non-neutral padding"
    );
    if !ordered(&t.id) {
        return;
    }
    assert!(
        !pred[i],
        "frame {i}: a duplicate ACK was released (superseded)"
    );
    // The segment that absorbed it: the next segment of its flow, with a head pushed earlier,
    // carrying an ACK at least as new.
    let by = rec.out[pos + 1..].iter().find_map(|o| match o {
        Out::Seg { ids, bytes, .. }
            if inputs[ids[0]].tcp.as_ref().is_some_and(|h| h.id == t.id) =>
        {
            Some((ids, bytes))
        }
        _ => None,
    });
    let (ids, bytes) =
        by.unwrap_or_else(|| panic!("frame {i} released, no later segment of its flow"));
    assert!(
        rank[ids[0]] < rank[i],
        "frame {i} released; the next segment of its flow starts later"
    );
    let head = inputs[ids[0]].tcp.as_ref().expect("checked");
    let out_ack = bytes
        .get(head.l4 + 8..head.l4 + 12)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
        .unwrap_or_else(|| {
            panic!("frame {i} released; the segment that carries it is too short for a TCP header")
        });
    assert!(
        serial_le(t.ack, out_ack),
        "frame {i} released; its ACK {} is newer than the segment's {out_ack}",
        t.ack
    );
}

#[allow(clippy::too_many_arguments)]
fn check_rewritten(
    inputs: &[Pushed],
    config: &Config,
    ids: &[usize],
    bytes: &[u8],
    chunks: &[Vec<u8>],
    info: &SegmentInfo,
    pred: &[bool],
    ordered: &dyn Fn(&Identity) -> bool,
) {
    let gro = config.policy == Policy::Gro;
    let head = &inputs[ids[0]];
    let h = head
        .tcp
        .as_ref()
        .unwrap_or_else(|| panic!("segment {ids:?}: rewritten but its head is not TCP"));
    // Members: same flow, trusted, mergeable (5), (7), (4).
    let mut next_seq = h.seq;
    let mut or_flags = 0u8;
    let mut payload = Vec::new();
    let mut ip_len = h.payload - h.l3;
    for (k, &i) in ids.iter().enumerate() {
        let f = &inputs[i];
        let t = f
            .tcp
            .as_ref()
            .unwrap_or_else(|| panic!("segment {ids:?}: frame {i} is not TCP"));
        assert_eq!(
            t.id, h.id,
            "isolation: segment {ids:?} mixes flows (frame {i})"
        );
        assert!(
            f.trusted,
            "laundering: frame {i} (untrusted checksum) in segment {ids:?}"
        );
        assert!(!t.ip_opts, "segment {ids:?}: frame {i} has IP options");
        assert!(
            t.flags & 0x10 != 0 && t.flags & 0x26 == 0,
            "segment {ids:?}: frame {i} flags {:#x}",
            t.flags
        );
        // Arrival order is the engine's order only for flows whose order is promised.
        let dup = !gro && ordered(&t.id) && pred[i];
        assert!(!dup, "segment {ids:?}: frame {i} is a duplicate ACK");
        // `Gro`: the link header is the head's to the byte, as Linux GRO compares the whole
        // hard header (a second guard: the identity covers it, IPoIB's reserved field too).
        let link = |t: &oracle::Tcp| t.outer.as_ref().map_or(t.l3, |o| o.l3);
        assert!(
            !gro || f.bytes[..link(t)] == head.bytes[..link(h)],
            "segment {ids:?}: frame {i} link header differs from the head's under Gro"
        );
        let pad = &f.bytes[t.ip_end..];
        assert!(
            pad.is_empty() || (!gro && oracle::is_zero(oracle::sum(pad))),
            "segment {ids:?}: frame {i} has padding that may not be trimmed"
        );
        assert_eq!(
            (t.ttl, t.tos, t.df),
            (h.ttl, h.tos, h.df),
            "segment {ids:?}: frame {i} TTL/TOS/DF"
        );
        if let (Some(to), Some(ho)) = (&t.outer, &h.outer) {
            // Through a tunnel: the outer header follows the same rules, the GRE header
            // may merge (version 0, only C and K) and is the head's but for its checksum.
            assert_eq!(
                (to.ttl, to.tos, to.df),
                (ho.ttl, ho.tos, ho.df),
                "segment {ids:?}: frame {i} outer TTL/TOS/DF"
            );
            assert!(
                ids.len() == 1 || t.id.tunnel.is_none_or(|x| x.mergeable()),
                "segment {ids:?}: frame {i} GRE flags {:#x} merged",
                t.id.tunnel.map_or(0, |x| x.flags)
            );
            assert_eq!(
                gre_bytes(&f.bytes, t),
                gre_bytes(&head.bytes, h),
                "segment {ids:?}: frame {i} GRE header"
            );
        }
        assert_eq!(
            &f.bytes[t.l3 + if t.v6 { 40 } else { 20 }..t.l4],
            &head.bytes[h.l3 + if h.v6 { 40 } else { 20 }..h.l4],
            "segment {ids:?}: frame {i} extension headers"
        );
        assert_eq!(
            t.doff_byte, h.doff_byte,
            "segment {ids:?}: frame {i} data offset/reserved"
        );
        assert_eq!(
            t.flags & !0x09,
            h.flags & !0x09,
            "segment {ids:?}: frame {i} flags differ"
        );
        assert!(
            k + 1 == ids.len() || t.flags & 0x09 == 0,
            "segment {ids:?}: PSH/FIN on frame {i}, not last"
        );
        assert_eq!(t.seq, next_seq, "segment {ids:?}: frame {i} not contiguous");
        next_seq = next_seq.wrapping_add(t.payload_len() as u32);
        or_flags |= t.flags & 0x09;
        let p = &f.bytes[t.payload..t.ip_end];
        if k > 0 {
            assert_eq!(
                &chunks[k][..],
                p,
                "segment {ids:?}: chunk {k} is not frame {i}'s payload"
            );
            ip_len += p.len();
        }
        payload.extend_from_slice(p);
        if gro {
            assert_eq!(
                (t.ack, t.window),
                (h.ack, h.window),
                "Gro segment {ids:?}: frame {i} ACK/window"
            );
            assert_eq!(
                t.options(&f.bytes),
                h.options(&head.bytes),
                "Gro segment {ids:?}: frame {i} options"
            );
            let (len, mss) = (t.payload_len(), h.payload_len());
            if ids.len() > 1 {
                assert!(
                    len > 0 && len <= mss,
                    "Gro segment {ids:?}: frame {i} payload {len}, mss {mss}"
                );
                assert!(
                    k + 1 == ids.len() || len == mss,
                    "Gro segment {ids:?}: short frame {i} not last"
                );
            }
        } else {
            assert!(
                t.options_mergeable(&f.bytes),
                "Lro segment {ids:?}: frame {i} options"
            );
            let prev = inputs[ids[k.saturating_sub(1)]]
                .tcp
                .as_ref()
                .expect("checked");
            let pb = &inputs[ids[k.saturating_sub(1)]].bytes;
            assert!(
                serial_le(prev.ack, t.ack),
                "Lro segment {ids:?}: ACK goes back at {i}"
            );
            match (prev.tsval(pb), t.tsval(&f.bytes)) {
                (Some(a), Some(b)) => {
                    assert!(serial_le(a, b), "Lro segment {ids:?}: TSval back at {i}")
                }
                (None, None) => {}
                _ => panic!("Lro segment {ids:?}: timestamps on some frames only"),
            }
        }
    }
    ip_len += h.payload_len();
    if gro && !h.v6 && ids.len() > 1 {
        let first = h.ip_id;
        let idv = |i: usize| inputs[i].tcp.as_ref().expect("checked").ip_id;
        let fixed = ids.iter().all(|&i| idv(i) == first);
        let inc = ids
            .iter()
            .enumerate()
            .all(|(k, &i)| idv(i) == first.wrapping_add(k as u16));
        assert!(
            fixed || inc,
            "Gro segment {ids:?}: IPv4 IDs neither fixed nor incrementing"
        );
    }
    // A frame alone may exceed the limit (nothing to split); merging may not cross it.
    assert!(
        ids.len() == 1 || ip_len <= usize::from(config.max_ip_len),
        "segment {ids:?}: IP length {ip_len} over the limit"
    );
    // (6) Valid output.
    assert_eq!(
        info.checksum, config.checksum_out,
        "segment {ids:?}: checksum state"
    );
    let o = if h.outer.is_some() {
        oracle::tcp_of_gre(bytes, &head.meta)
    } else {
        oracle::tcp_of(bytes, &head.meta)
    }
    .unwrap_or_else(|| panic!("segment {ids:?}: output does not parse"));
    assert_eq!(o.id, h.id, "segment {ids:?}: output flow identity changed");
    assert_eq!(
        o.ip_end,
        bytes.len(),
        "segment {ids:?}: IP length field vs bytes"
    );
    assert_eq!(
        (o.l3, o.l4, o.payload),
        (h.l3, h.l4, h.payload),
        "segment {ids:?}: offsets"
    );
    assert_eq!(
        (info.l3 as usize, info.l4 as usize),
        (h.l3, h.l4),
        "segment {ids:?}: info offsets"
    );
    assert_eq!(
        &bytes[o.payload..],
        &payload[..],
        "segment {ids:?}: payload is not its frames'"
    );
    assert_eq!(
        info.payload_len as usize,
        payload.len(),
        "segment {ids:?}: info.payload_len"
    );
    assert!(
        oracle::ip_checksum_ok(bytes, &o),
        "segment {ids:?}: bad IPv4 header checksum"
    );
    if h.outer.is_some() {
        crate::gre_reader::cross_check(inputs, ids, bytes, info);
    }
    assert!(
        h.outer.is_none() || info.tunnel.is_some(),
        "segment {ids:?}: tunnelled, but no tunnel in its info"
    );
    assert!(
        oracle::tunnel_checksums_ok(bytes, &o),
        "segment {ids:?}: bad outer IPv4 header checksum or GRE checksum"
    );
    let field = u16::from_be_bytes([bytes[o.l4 + 16], bytes[o.l4 + 17]]);
    match info.checksum {
        OutChecksum::Full => assert!(
            oracle::tcp_checksum_ok(bytes, &o),
            "segment {ids:?}: bad TCP checksum"
        ),
        OutChecksum::Partial => assert_eq!(
            field,
            oracle::pseudo(&o, o.ip_end - o.l4),
            "segment {ids:?}: partial checksum is not the pseudo-header sum"
        ),
        other => panic!("segment {ids:?}: checksum {other:?}"),
    }
    assert_eq!(o.seq, h.seq, "segment {ids:?}: sequence number");
    assert_eq!(o.flags, h.flags | or_flags, "segment {ids:?}: flags");
    match (&h.outer, &o.outer) {
        (Some(ho), Some(oo)) => {
            assert_eq!(
                &bytes[..ho.l3],
                &head.bytes[..ho.l3],
                "segment {ids:?}: link header changed"
            );
            assert_eq!(
                (oo.l3, oo.gre, oo.gre_len, oo.ttl, oo.tos, oo.df, oo.ip_id),
                (ho.l3, ho.gre, ho.gre_len, ho.ttl, ho.tos, ho.df, ho.ip_id),
                "segment {ids:?}: outer IP header"
            );
            assert_eq!(
                gre_bytes(bytes, &o),
                gre_bytes(&head.bytes, h),
                "segment {ids:?}: GRE header changed beyond its checksum"
            );
            // The inner link header (TEB) and the inner IP header's place.
            let inner = ho.gre + ho.gre_len;
            assert_eq!(
                &bytes[inner..h.l3],
                &head.bytes[inner..h.l3],
                "segment {ids:?}: inner link header changed"
            );
        }
        (None, None) => assert_eq!(
            &bytes[..h.l3],
            &head.bytes[..h.l3],
            "segment {ids:?}: link header changed"
        ),
        _ => panic!("segment {ids:?}: the output's tunnel is not the head's"),
    }
    assert_eq!(
        (o.ttl, o.tos, o.df, o.ip_id),
        (h.ttl, h.tos, h.df, h.ip_id),
        "segment {ids:?}: IP fields"
    );
    let last = inputs[*ids.last().expect("non-empty")]
        .tcp
        .as_ref()
        .expect("checked");
    if gro {
        assert_eq!(
            (o.ack, o.window),
            (h.ack, h.window),
            "Gro segment {ids:?}: ACK/window rewritten"
        );
        assert_eq!(
            o.options(bytes),
            h.options(&head.bytes),
            "Gro segment {ids:?}: options rewritten"
        );
        assert_eq!(
            &bytes[o.l4 + 18..o.l4 + 20],
            &head.bytes[h.l4 + 18..h.l4 + 20],
            "urgent pointer"
        );
    } else {
        assert!(
            serial_le(last.ack, o.ack),
            "Lro segment {ids:?}: ACK older than its last frame's"
        );
    }
}

/// A tunnelled frame's GRE header with the checksum field zeroed (every other byte must be
/// equal in frames that merge, and in the segment the head's).
fn gre_bytes(b: &[u8], t: &oracle::Tcp) -> Vec<u8> {
    let Some(o) = &t.outer else {
        return Vec::new();
    };
    let mut g = b[o.gre..o.gre + o.gre_len].to_vec();
    if o.checksum_at(t).is_some() {
        g[4..6].fill(0);
    }
    g
}
