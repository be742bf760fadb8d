//! The input every driver builds and the runner and checker take: concrete frames with the
//! ground truth about them ([`Pushed`]) and the steps to run ([`Built`], [`Step`]).

use crate::oracle::{self, Tcp};
use lro_core::RxMeta;

/// A pushed frame and the ground truth about it.
#[derive(Debug, Clone)]
pub struct Pushed {
    /// The bytes pushed.
    pub bytes: Vec<u8>,
    /// Its metadata.
    pub meta: RxMeta,
    /// The reference's TCP view.
    pub tcp: Option<Tcp>,
    /// Checksums right *and* the metadata vouches correctly (or verification is on).
    pub trusted: bool,
}

/// A concrete step.
#[derive(Debug, Clone)]
pub enum Step {
    /// Push input number `n`.
    Push(usize),
    /// `flush_all`.
    FlushAll,
    /// `flush_idle(now)`.
    FlushIdle(u64),
}

/// Concrete frames and steps.
#[derive(Debug, Default, Clone)]
pub struct Built {
    /// Frames by id.
    pub frames: Vec<Pushed>,
    /// Steps.
    pub steps: Vec<Step>,
}

impl Built {
    /// The same frames and steps with every frame whose checksums are right marked
    /// hardware-verified (`RxChecksum::Verified`): the case header prediction covers. Ground
    /// truth (`trusted`) is not updated; only for comparing engines with each other.
    pub fn all_verified(&self) -> Built {
        let mut b = self.clone();
        for f in &mut b.frames {
            if oracle::checksums_ok(&f.bytes, f.tcp.as_ref()) {
                f.meta.checksum = lro_core::RxChecksum::Verified;
            }
        }
        b
    }
}
