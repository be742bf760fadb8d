//! Shared code of the lro-core fuzz targets: a reference frame reader ([`oracle`]), the
//! structured input of the coalescing targets ([`scenario`]), the invariant checker
//! ([`check`]) and the GRE target's wrapping ([`gre`]). Every check panics with a
//! description, which libFuzzer reports as a crash.

pub mod check;
pub mod gre;
pub mod oracle;
pub mod scenario;

use lro_core::rss::RssSorted;
use lro_core::{Coalescer, Config, Engine, Sizes};
use std::collections::HashMap;

use check::Tagged;
use oracle::Identity;
use scenario::{Built, Input};

fn run_plain<const N: usize, const S: usize>(built: &Built, config: Config) {
    let on = run_engine::<N, S>(built, config);
    check::check(built, &config, S, &on.0, &|_| true);
    // Header prediction decides as the general path: the same input through an engine with it
    // off, and the same input with every frame whose checksums are right marked
    // hardware-verified (the case prediction covers) through both, give the same output and
    // counters (its own counter apart).
    let off = run_engine::<N, S>(built, config.with_header_prediction(false));
    same_output(&on, &off);
    let verified = built.all_verified();
    let on = run_engine::<N, S>(&verified, config);
    let off = run_engine::<N, S>(&verified, config.with_header_prediction(false));
    same_output(&on, &off);
}

/// One run: the output and the counters without the prediction counter.
fn run_engine<const N: usize, const S: usize>(
    built: &Built,
    config: Config,
) -> (check::Recorder, lro_core::Stats) {
    let mut engine: Box<Engine<Tagged, Sizes<N, S>>> = Box::new(Engine::new(config));
    let rec = check::run(&mut *engine, built, true);
    let mut stats = engine.stats().clone();
    stats.predicted = 0;
    (rec, stats)
}

fn same_output(a: &(check::Recorder, lro_core::Stats), b: &(check::Recorder, lro_core::Stats)) {
    if let Some(i) =
        (0..a.0.out.len().max(b.0.out.len())).find(|&i| a.0.out.get(i) != b.0.out.get(i))
    {
        panic!(
            "header prediction on vs off: output {i} differs: {:?} vs {:?}",
            a.0.out.get(i),
            b.0.out.get(i)
        );
    }
    assert_eq!(a.1, b.1, "header prediction on vs off: counters differ");
}

/// The `coalesce` target: one structured input through a plain `Engine`.
pub fn coalesce(input: &Input) {
    let config = input.setup.config();
    let built = scenario::build(input, &config);
    match input.setup.table % 4 {
        0 => run_plain::<1, 1>(&built, config),
        1 => run_plain::<4, 8>(&built, config),
        2 => run_plain::<8, 64>(&built, config),
        _ => run_plain::<64, 64>(&built, config),
    }
}

fn run_sorted<const N: usize, const S: usize, const B: usize>(built: &Built, config: Config) {
    // Order is promised per flow only when every frame of the flow carried the same hash.
    let mut hashes: HashMap<Identity, Option<lro_core::RssHash>> = HashMap::new();
    let mut mixed: HashMap<Identity, bool> = HashMap::new();
    for f in &built.frames {
        if let Some(t) = &f.tcp {
            let h = *hashes.entry(t.id).or_insert(f.meta.rss);
            if h != f.meta.rss {
                mixed.insert(t.id, true);
            }
        }
    }
    let inner: Engine<Tagged, Sizes<N, S>> = Engine::new(config);
    let mut engine: Box<RssSorted<_, Tagged, B>> = Box::new(RssSorted::new(inner));
    let rec = check::run(&mut *engine, built, false);
    assert_eq!(engine.queued(), 0, "frames still queued after flush_all");
    assert_eq!(
        engine.stats().frames_in as usize,
        built.frames.len(),
        "inner frames_in"
    );
    check::check(built, &config, S, &rec, &|id| !mixed.contains_key(id));
}

/// The `rss_sorted` target: the same input through `RssSorted` around a small table.
pub fn rss_sorted(input: &Input) {
    let config = input.setup.config();
    let built = scenario::build(input, &config);
    match input.setup.table % 4 {
        0 => run_sorted::<1, 4, 1>(&built, config),
        1 => run_sorted::<2, 8, 7>(&built, config),
        2 => run_sorted::<4, 16, 32>(&built, config),
        _ => run_sorted::<8, 64, 256>(&built, config),
    }
}
