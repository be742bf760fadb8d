//! The RSS-sorting batch wrapper around small tables: conservation, per-flow order (for flows
//! whose frames carry one hash), and every other invariant of the inner engine's output.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: lro_fuzz::scenario::Input| {
    lro_fuzz::rss_sorted(&input);
});
