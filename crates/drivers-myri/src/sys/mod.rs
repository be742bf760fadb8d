//! Memory-mapped device registers: with [`crate::desc`] the `unsafe` code of the embedded side
//! (the AF_XDP backend's is in `xdp::sys`).
//!
//! A register block is reached through a handle whose construction is the one `unsafe` step
//! (the caller vouches for the address), or, for a chip named by a cargo feature, through a
//! take-once constructor that vouches for it from the chip's memory map. Every access is a
//! volatile 32-bit load or store inside the block.

pub(crate) mod enet;
