//! The coalescer through GRE: the `coalesce` target's structured scenario with every frame
//! wrapped in one of four near-twin GRE tunnels (or left plain), with per-frame mischief; the
//! same invariants on the output, read back through GRE; header prediction on and off agree;
//! `Gro` segments split back into their frames (`src/gre.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: lro_fuzz::gre::GreInput| {
    lro_fuzz::gre::gre(&input);
});
