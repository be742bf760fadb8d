//! Replays the committed corpora of the structured targets (`coalesce`, `rss_sorted`, `gre`)
//! and of `parse` through their drivers on a stable toolchain, without libFuzzer: every input
//! must pass the harness's checks (`lro-testkit`). `cargo test --release --manifest-path fuzz/Cargo.toml`.

use arbitrary::{Arbitrary, Unstructured};
use std::path::Path;

fn replay<T: for<'a> Arbitrary<'a>>(target: &str, run: impl Fn(&T)) {
    replay_bytes(target, |data| {
        // As `fuzz_target!` does: inputs that do not decode are skipped.
        let input = T::arbitrary_take_rest(Unstructured::new(data)).ok()?;
        run(&input);
        Some(())
    });
}

/// Runs every committed input of `target`; `run` says `None` for an input it skipped.
fn replay_bytes(target: &str, run: impl Fn(&[u8]) -> Option<()>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("corpus entry").path();
        let data = std::fs::read(&path).expect("corpus file");
        match lro_testkit::check::catch(|| run(&data)) {
            Ok(Some(())) => n += 1,
            Ok(None) => {}
            Err(e) => panic!("{target}: {}: {e}", path.display()),
        }
    }
    eprintln!("{target}: {n} inputs replayed");
    assert!(n > 0, "{target}: no input decoded");
}

#[test]
fn coalesce_corpus() {
    replay("coalesce", lro_fuzz::coalesce);
}

#[test]
fn rss_sorted_corpus() {
    replay("rss_sorted", lro_fuzz::rss_sorted);
}

#[test]
fn parse_corpus() {
    replay_bytes("parse", |data| {
        lro_fuzz::parser::every_link(data);
        Some(())
    });
}

#[test]
fn gre_corpus() {
    replay("gre", lro_fuzz::gre::gre);
}
