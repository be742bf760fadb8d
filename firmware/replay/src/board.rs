//! What each board runs: the engine's sizes and settings, chosen at build time by a feature.
//!
//! `scripts/firmware-qemu.sh` runs `lro replay` on the host with the same burst, flow-table
//! size, policy and checksum mode (the host engine keeps 64 frames per segment and 256 ACK
//! records: a segment never outgrows a burst, so the smaller `FRAMES_PER_SEGMENT` here changes
//! nothing as long as it is larger than `BURST`; the micro:bit runs `Gro`, which keeps no ACK
//! records, because 16 records collide in other ways than the host's 256 and would make `Lro`'s
//! counters differ for reasons that are not errors).

use lro_core::Config;

/// A board's identity and settings.
pub(crate) struct Board {
    /// QEMU machine name.
    pub(crate) machine: &'static str,
    /// The core, as the script prints it.
    pub(crate) core: &'static str,
    /// Frames arrive hardware-verified (`--csum trust`) instead of verified in software.
    pub(crate) trust_checksums: bool,
}

#[cfg(feature = "mps2-an386")]
mod sizes {
    /// Cortex-M4F with megabytes of RAM: the CLI's default engine, burst and checksum mode.
    pub(crate) const BOARD: super::Board = super::Board {
        machine: "mps2-an386",
        core: "cortex-m4",
        trust_checksums: false,
    };
    pub(crate) const FLOWS: usize = 64;
    pub(crate) const FRAMES_PER_SEGMENT: usize = 64;
    pub(crate) const ACK_MEMORY: usize = 256;
    pub(crate) const BURST: usize = 64;
    /// The engine configuration (as `lro replay --policy lro`).
    pub(crate) const CONFIG: super::Config = super::Config::lro();
}

#[cfg(feature = "microbit")]
mod sizes {
    /// Cortex-M0 with 16 KB of RAM: a small engine and short bursts (a burst's frames are
    /// 1.5 KB buffers each); frames arrive hardware-verified, so header prediction runs.
    pub(crate) const BOARD: super::Board = super::Board {
        machine: "microbit",
        core: "cortex-m0",
        trust_checksums: true,
    };
    pub(crate) const FLOWS: usize = 8;
    pub(crate) const FRAMES_PER_SEGMENT: usize = 8;
    /// `Gro` keeps none; one record is the least the engine takes.
    pub(crate) const ACK_MEMORY: usize = 1;
    pub(crate) const BURST: usize = 4;
    /// The engine configuration (as `lro replay --policy gro`).
    pub(crate) const CONFIG: super::Config = super::Config::gro();
}

pub(crate) use sizes::*;
