//! Helpers of the lro-gre integration tests over the shared harness (`lro-testkit`: the
//! reference reader that reads GRE, the recording sink, the runner and DESIGN.md's invariant
//! checks): adapters to the shape these tests use, and readers of the committed captures.
#![allow(dead_code, unreachable_pub)]

use lro_core::{Coalescer, Config, RxMeta, Verdict};
use lro_testkit::built::Built;
pub use lro_testkit::built::{Pushed as Input, Step as Op};
use lro_testkit::check::{self, Run};
pub use lro_testkit::frame::{Out, Recorder, Tagged};
pub use lro_testkit::oracle::{self, Tcp};

/// The reference reader's view of a GRE-tunnelled TCP frame (`None` for anything else, plain
/// TCP included).
pub fn read(b: &[u8], meta: &RxMeta) -> Option<Tcp> {
    oracle::tcp_of_gre(b, meta).filter(|t| t.outer.is_some())
}

/// Every checksum of a frame the reader reads right (outer IPv4, GRE, inner IPv4, TCP).
pub fn checksums_ok(b: &[u8], t: &Tcp) -> bool {
    oracle::checksums_ok(b, Some(t))
}

/// The CHECKSUM_COMPLETE value a NIC would give: the sum after the link header (tags
/// included).
pub fn complete(b: &[u8], meta: &RxMeta) -> u16 {
    lro_core::testing::complete_checksum(b, meta.link)
}

fn built(inputs: &[Input], ops: &[Op]) -> Built {
    Built {
        frames: inputs.to_vec(),
        steps: ops.to_vec(),
        truth: None,
    }
}

/// Pushes the inputs as `ops` say, then flushes ([`check::run`]: verdicts against the sink,
/// conservation of the counters, nothing held at the end).
pub fn run<C: Coalescer<Tagged>>(
    engine: &mut C,
    inputs: &[Input],
    ops: &[Op],
) -> (Recorder, Vec<Verdict>) {
    let run = check::run(engine, &built(inputs, ops), true);
    (run.rec, run.verdicts)
}

/// Pushes every input in order with no flush but the last.
pub fn pushes(n: usize) -> Vec<Op> {
    (0..n).map(Op::Push).collect()
}

/// DESIGN.md's invariants on a record ([`check::check`]), GRE included: conservation,
/// per-flow order and bytes, isolation (the tunnel part of the identity included), no checksum
/// laundering (GRE, outer, inner, TCP), valid output, never-merged GRE flags, and under `Gro`
/// software segmentation gives back the original frames.
pub fn check(inputs: &[Input], ops: &[Op], config: &Config, rec: &Recorder) -> Result<(), String> {
    let run = Run {
        rec: rec.clone(),
        verdicts: Vec::new(),
        dup_known: Vec::new(),
        steps_done: Vec::new(),
    };
    check::catch(|| {
        check::check(
            &built(inputs, ops),
            config,
            usize::MAX,
            &run,
            check::Order::Arrival,
        )
    })
}

/// Counts the delivered segments of more than one frame.
pub fn merged_segments(rec: &Recorder) -> usize {
    rec.out
        .iter()
        .filter(|o| matches!(o, Out::Seg { ids, .. } if ids.len() > 1))
        .count()
}

/// How a frame of a capture's link type is offered: Ethernet and raw IP as themselves, Linux
/// cooked captures as raw IP after their header; `None` for other link types.
pub fn link_of(link: u32, frame: &[u8]) -> Option<(RxMeta, Vec<u8>)> {
    match link {
        1 => Some((RxMeta::ethernet(0), frame.to_vec())),
        12 | 14 | 101 | 228 | 229 => Some((RxMeta::raw_ip(0), frame.to_vec())),
        113 => Some((RxMeta::raw_ip(0), frame.get(16..)?.to_vec())),
        276 => Some((RxMeta::raw_ip(0), frame.get(20..)?.to_vec())),
        _ => None,
    }
}

/// The workspace root (two levels above this crate).
pub fn workspace() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}
