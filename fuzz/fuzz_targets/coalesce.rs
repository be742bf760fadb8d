//! The coalescer driven by structured input (frames raw or built, metadata, flushes, clock
//! steps, both policies, several table shapes); DESIGN.md invariants checked on the output.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: lro_fuzz::scenario::Input| {
    lro_fuzz::coalesce(&input);
});
