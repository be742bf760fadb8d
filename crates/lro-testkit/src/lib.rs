//! The single place for lro's test harness code, shared by the integration tests of
//! `lro-core` and `lro-gre` and by the fuzz targets (`fuzz/`): nothing here is a second copy
//! of something elsewhere, and new harness code belongs here rather than in a `tests/common`.
//!
//! - [`oracle`]: an independent reference reader of frames (plain and through GRE): flow
//!   identity, offsets, header fields, checksums, written from the protocol rules and not from
//!   the engine's code.
//! - [`parser`]: the engine's parser against the reference reader, field by field (the
//!   `parse` fuzz target's check, also run by lro-core's robustness tests).
//! - [`capture`]: a tolerant pcap / pcapng reader for the tests that replay captures.
//! - [`gre_reader`]: a second reader of GRE-tunnelled frames (etherparse and RFC 2784/2890),
//!   which the checker applies to tunnelled segments on top of the oracle.
//! - [`built`]: the input every driver produces and the runner and checker take: frames with
//!   the ground truth about them, and the steps to run.
//! - [`frame`]: the frame type pushed into engines ([`frame::Tagged`], an identity the engine
//!   cannot forge) and the recording sink ([`frame::Recorder`]).
//! - [`check`]: the runner over any [`lro_core::Coalescer`] and the checker of DESIGN.md's
//!   invariants on what it recorded. A correct engine never makes a check fail, so this
//!   crate's `tests/checker.rs` breaks a genuine run one way at a time (the record, the
//!   frames' ground truth, an engine that misreports) and requires each check to refuse it.
//! - [`scenario`]: the lro-core property tests' scenario generator (plain steps that proptest
//!   strategies generate), with its own ground truth and the checks judged from it.
//! - `structured` (feature `fuzz`): the `arbitrary`-derived structured input of the fuzz
//!   targets and their drivers, with GRE wrapping in `structured::gre`.
//! - `kernel` (feature `sys`, Linux): the running kernel's GRO and GSO on veth pairs, and the
//!   engine's `Gro` output beside them, for the tests that compare the two byte for byte.
//! - `sys` (feature `sys`, Linux): what the end-to-end tests over network namespaces share
//!   (commands, skip checks, namespace entry and cleanup, `AF_PACKET` sockets, the client's
//!   byte stream and its hash, thread CPU time). The only module with `unsafe` (`geteuid`,
//!   `setns`, the socket calls, `clock_gettime`).

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod built;
pub mod capture;
pub mod check;
pub mod frame;
pub mod gre_reader;
#[cfg(all(feature = "sys", target_os = "linux"))]
pub mod kernel;
pub mod oracle;
pub mod parser;
pub mod scenario;
#[cfg(feature = "fuzz")]
pub mod structured;
#[cfg(all(feature = "sys", target_os = "linux"))]
pub mod sys;
