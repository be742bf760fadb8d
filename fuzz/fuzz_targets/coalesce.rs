//! The coalescer driven by structured input (frames raw or built, metadata, flushes, clock
//! steps, both policies, several table shapes); DESIGN.md invariants checked on the output,
//! and header prediction on and off must give the same output (also with every frame whose
//! checksums are right marked hardware-verified, the case prediction covers).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: lro_fuzz::scenario::Input| {
    lro_fuzz::coalesce(&input);
});
