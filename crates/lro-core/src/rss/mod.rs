//! RSS: a software Toeplitz hash, allocation-free batch sorting, and the FreeBSD-style
//! RSS-sorting batch wrapper [`RssSorted`].
//!
//! FreeBSD's "Optimise LRO for RSS" (D4914, `tcp_lro_queue_mbuf` / `tcp_lro_flush_all` in
//! `sys/netinet/tcp_lro.c`) queues a whole receive burst, sorts it by RSS hash type and flow id
//! (stable on arrival), and feeds the coalescer one stream at a time, flushing between streams
//! (`tcp_lro_rx_done`). A table of 8 entries then serves any number of interleaved flows.
//!
//! - [`Toeplitz`]: the Microsoft RSS hash ("RSS hashing functions" and "Verifying the RSS hash
//!   calculation" in the Windows driver documentation), table-driven, usable in `const`.
//! - [`sort_key`]: the 64-bit key of `tcp_lro_queue_mbuf`.
//! - [`group_keys`]: groups a batch of such keys by (type, hash), stable on arrival, without
//!   allocating, in one counting pass and one scatter pass: what [`RssSorted`] uses.
//!   [`radix_sort_msb`] is FreeBSD's `tcp_lro_sort`, kept as the reference and benchmark
//!   baseline. Medians from `cargo bench --bench rss_sort` (per frame, noisy shared machine):
//!   for 64..1024 frames `group_keys` costs about 3 ns, `sort_unstable` 3-5 ns,
//!   `tcp_lro_sort` 4-7.5 ns; at 32 frames or fewer `group_keys` calls `sort_unstable`.
//! - [`RssSorted`]: a [`Coalescer`](crate::Coalescer) wrapper doing the whole FreeBSD scheme around any engine.

mod sort;
mod sorted;
mod toeplitz;

pub use sort::{group_keys, radix_sort_msb, sort_key, ARRIVAL_BITS, ARRIVAL_MASK};
pub use sorted::{RssSorted, RssStats};
pub use toeplitz::{Toeplitz, MAX_INPUT, MICROSOFT_KEY};
