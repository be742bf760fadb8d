#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! Crate docs are written in coalesce.rs for now.

pub mod csum;
pub mod gso;
pub mod meta;
pub mod rss;
pub mod stats;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;
pub mod wire;

mod coalesce;
mod flow;

pub use coalesce::{
    BufferTooSmall, Cause, Coalesce, Coalescer, Config, OutChecksum, Policy, Segment, SegmentInfo,
    Sink,
};
pub use meta::{LinkKind, RssHash, RssType, RxChecksum, RxMeta};
pub use stats::{FlushReason, PassReason, Stats, Verdict};
