//! Shared code of the lro-core fuzz targets: a reference frame reader ([`oracle`]), the
//! structured input of the coalescing targets ([`scenario`]) and the invariant checker
//! ([`check`]). Every check panics with a description, which libFuzzer reports as a crash.

pub mod check;
pub mod oracle;
pub mod scenario;

use lro_core::rss::RssSorted;
use lro_core::{Coalesce, Coalescer, Config};
use std::collections::HashMap;

use check::Tagged;
use oracle::Identity;
use scenario::{Built, Input};

fn run_plain<const N: usize, const S: usize>(built: &Built, config: Config) {
    let mut engine: Box<Coalescer<Tagged, N, S>> = Box::new(Coalescer::new(config));
    let rec = check::run(&mut *engine, built, true);
    check::check(built, &config, S, &rec, &|_| true);
}

/// The `coalesce` target: one structured input through a plain `Coalescer`.
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
    let inner: Coalescer<Tagged, N, S> = Coalescer::new(config);
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
