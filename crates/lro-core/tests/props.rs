//! Property tests of DESIGN.md's invariants over random interleavings of many flows.
//!
//! Each case builds a scenario (flows with VLANs, IPv4/IPv6, extension headers, twins that
//! differ in one identity field; frames with random sizes, PSH/FIN, CWR/ECE changes,
//! SYN/RST/URG, timestamps forward and backward, SACK, gaps, retransmissions, duplicate and
//! advancing ACKs, window updates, ECN marks, TTL changes, IP options, fragments, corrupted
//! checksums, neutral and non-neutral padding; flush points; both policies) and checks the
//! sink output with `lro_testkit::check::check`: conservation, per-flow order, bytes, isolation, no
//! checksum laundering, valid output, never-merged rules, Gro rules and reversibility.
//!
//! Case counts default to 64 per property (honours `PROPTEST_CASES`). Needs the `test-utils`
//! feature: `cargo test -p lro-core --features test-utils --test props`.
#![cfg(feature = "test-utils")]

use lro_testkit::scenario::{run_and_check, run_both_and_check, FlowSeed, Knobs, Scenario, Step};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(64),
        max_shrink_iters: 4096,
        ..ProptestConfig::default()
    }
}

/// Knobs with the given adversarial switches.
fn knobs(
    hash_modes: &'static [u8],
    raw_twin: bool,
    truncate: bool,
    dup_mode: u8,
) -> impl Strategy<Value = Knobs> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.85),
        0u8..3,
        prop::sample::select(hash_modes),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            move |(gro, partial, verify, max_ip, hash_mode, timers, small, verified)| Knobs {
                gro,
                partial,
                verify,
                max_ip,
                hash_mode,
                timers,
                small,
                raw_twin,
                truncate,
                dup_mode,
                verified,
            },
        )
}

/// The generated inputs (compact, so a shrunk failure prints readably); `check` builds them.
type Case = (Knobs, Vec<FlowSeed>, Vec<Step>);

fn scenario(knobs: impl Strategy<Value = Knobs>) -> impl Strategy<Value = Case> {
    (
        knobs,
        prop::collection::vec(FlowSeed::strategy(), 1..7),
        prop::collection::vec(Step::strategy(), 1..160),
    )
}

fn check((knobs, seeds, steps): Case) -> Result<(), TestCaseError> {
    let sc = Scenario::build(knobs, &seeds, &steps);
    run_and_check(&sc).map(drop).map_err(TestCaseError::fail)
}

/// Header prediction decides as the general path: every scenario (truncated frames and
/// random hashes included) gives the same sink events, verdicts and counters with prediction on
/// and off, and the run with prediction meets every invariant. Run as a plain test around a
/// `TestRunner` so it can also require that prediction fired at all: a fast path that never
/// runs would pass the comparison vacuously. Frames arrive NIC-verified (the most prediction
/// reads); the next property mixes every checksum state.
#[test]
fn header_prediction_decides_as_the_general_path() {
    prediction_differential(true);
}

/// [`header_prediction_decides_as_the_general_path`] with every checksum state a frame can
/// arrive with (NIC-verified, a CHECKSUM_COMPLETE sum, nothing: verified in software), and
/// flows without timestamps as often as with: header prediction's software and
/// CHECKSUM_COMPLETE checks, and the copy it reads a pure ACK without options from.
#[test]
fn header_prediction_decides_as_the_general_path_under_any_checksum_state() {
    prediction_differential(false);
}

/// The differential run of prediction on and off; `verified`: every frame without a corrupted
/// checksum arrives NIC-verified.
fn prediction_differential(verified: bool) {
    // Runs of one flow, as a NIC queue sees them behind TSO senders: three steps in four stay
    // on the previous step's flow.
    let strategy = scenario(
        knobs(&[0, 1, 2, 3], false, true, 0).prop_map(move |k| Knobs {
            verified: verified || k.verified,
            ..k
        }),
    )
    .prop_map(|(knobs, mut seeds, mut steps)| {
        // Most flows of the shape prediction covers: untagged Ethernet, IPv4.
        for seed in seeds.iter_mut().filter(|s| s.misc % 4 != 0) {
            seed.shape = 0;
        }
        for i in 1..steps.len() {
            if steps[i].t % 4 != 0 {
                steps[i].flow = steps[i - 1].flow;
            }
        }
        (knobs, seeds, steps)
    });
    let predicted = run_summing(strategy, |(knobs, seeds, steps)| {
        let sc = Scenario::build(knobs, &seeds, &steps);
        run_both_and_check(&sc).map_err(TestCaseError::fail)
    });
    assert!(predicted > 0, "no frame took header prediction in any case");
    println!("{predicted} frames predicted");
}

/// Runs `case` on the values of `strategy` (shrinking a failure and panicking with it) and
/// sums what each case counted: for properties that must also show their subject ran at all.
fn run_summing<S: Strategy>(
    strategy: S,
    case: impl Fn(S::Value) -> Result<u64, TestCaseError>,
) -> u64 {
    let mut runner = TestRunner::new(config());
    let sum = std::cell::Cell::new(0u64);
    let result = runner.run(&strategy, |v| {
        sum.set(sum.get() + case(v)?);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    sum.get()
}

/// Adaptive bypass keeps every invariant, duplicate ACKs by the definition included
/// (a pure ACK passed through unparsed is still the flow's previous ACK for the next one):
/// scenarios with long bursts (a flush point in one step in 16) over up to 40 flows sent in
/// any order, and in half of them 40 flows taking turns step by step (so that bursts in which
/// nothing merges occur in most of those), run with the bypass on. Run around a `TestRunner`
/// to require that the bypass paused some bursts at all.
#[test]
fn adaptive_bypass_keeps_every_invariant() {
    const TURNS: usize = 40;
    let strategy = (
        knobs(&[0, 1, 2], false, true, 2),
        prop::collection::vec(FlowSeed::strategy(), 1..TURNS),
        prop::collection::vec(Step::strategy(), 1..200),
        any::<bool>(),
    )
        .prop_map(|(knobs, mut seeds, mut steps, turns)| {
            if turns {
                let given = seeds.len();
                for i in given..TURNS {
                    seeds.push(seeds[i % given]);
                }
                for (i, s) in steps.iter_mut().enumerate() {
                    s.flow = (i % TURNS) as u8;
                }
            }
            for s in &mut steps {
                // The high nibble picks flush points (0: flush_all, 1 and 2: flush_idle):
                // keep one step in 16 of them.
                if s.t >> 4 < 3 && s.a % 16 != 0 {
                    s.t |= 0x30;
                }
            }
            (knobs, seeds, steps)
        });
    let bypassed = run_summing(strategy, |(knobs, seeds, steps)| {
        let mut sc = Scenario::build(knobs, &seeds, &steps);
        sc.config = sc.config.with_adaptive_bypass(true);
        let stats = run_and_check(&sc).map_err(TestCaseError::fail)?;
        Ok(stats.passed(lro_core::PassReason::Bypassed))
    });
    assert!(bypassed > 0, "no frame bypassed coalescing in any case");
    println!("{bypassed} frames bypassed");
}

proptest! {
    #![proptest_config(config())]

    /// Every invariant (duplicate ACKs apart: see the two properties below), with per-flow RSS hashes that are consistent (absent, distinct, or all
    /// flows colliding on one value).
    #[test]
    fn invariants_hold(case in scenario(knobs(&[0, 1, 2], false, false, 0))) {
        check(case)?;
    }

    /// Same, with truncated (malformed) frames mixed in: no panic, conservation, and the
    /// invariants on everything else.
    #[test]
    fn invariants_hold_with_truncated_frames(case in scenario(knobs(&[0, 2], false, true, 0))) {
        check(case)?;
    }

    /// Adversarial hashes: every frame gets an arbitrary RSS value, so frames of one flow
    /// carry different hashes ("whatever their hashes", `RxMeta::rss`).
    #[test]
    fn invariants_hold_with_random_hashes(case in scenario(knobs(&[3], false, false, 0))) {
        check(case)?;
    }

    /// Duplicate ACKs of an ACK the engine still holds for the flow are never merged (also
    /// when their sequence number does not continue the held segment: a lost data segment of
    /// the peer).
    #[test]
    fn held_duplicate_acks_never_merged(case in scenario(knobs(&[0, 1, 2], false, false, 1))) {
        check(case)?;
    }

    /// Duplicate ACKs by the definition: a pure ACK with the same ACK number and
    /// window as the flow's previous ACK is never merged, also when the engine holds nothing
    /// for the flow at that moment (its previous frame was delivered alone: a PSH segment, an
    /// earlier duplicate).
    #[test]
    fn duplicate_acks_never_merged(case in scenario(knobs(&[0, 1, 2], false, false, 2))) {
        check(case)?;
    }

    /// A raw-IP flow next to an Ethernet flow with all-zero MAC addresses and the same
    /// addresses and ports: two links, two flows.
    #[test]
    fn raw_ip_and_ethernet_flows_stay_apart(case in scenario(knobs(&[0, 2], true, false, 0))) {
        check(case)?;
    }
}
