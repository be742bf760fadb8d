//! The thin layer over lro-core: one NAPI-style poll of the receive queue into any lro-core
//! [`Coalescer`].
//!
//! Frames go into the coalescer in their buffers ([`RxBuf`] handles), with
//! [`LinkKind::Ipoib`] metadata: lro-core parses the 4-byte encapsulation header, keys flows
//! on IP addresses and ports (an IPoIB packet carries no hardware addresses), and keeps the
//! first frame's encapsulation header in front of a coalesced segment. At the end of the poll
//! everything held is flushed, as Linux's NAPI poll ends with `napi_gro_flush`.
//!
//! (The simulated HCA, `hca::SimHca`, needs the feature `test-utils`.)
//!
//! ```
//! use drivers_ipoib::hca::SimHca;
//! use drivers_ipoib::{poll, Mode, QueueConfig, RxQueue, RxQueueStorage};
//! use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};
//!
//! struct Count(usize);
//! impl<F> Sink<F> for Count {
//!     fn segment(&mut self, _segment: Segment<'_, F>) {
//!         self.0 += 1;
//!     }
//! }
//!
//! let storage: RxQueueStorage<'_, 8, 8> = RxQueueStorage::new();
//! let mode = Mode::DATAGRAM_2K;
//! let mut large = vec![0u8; 8 * mode.rx_buffer_len()];
//! let mut small = vec![0u8; 8 * 256];
//! let queue = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 4))?;
//! let mut hca = SimHca::new(&queue);
//! hca.deliver_ip(&[0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2])?;
//! let mut engine: Engine<_, Sizes<8, 8>> = Engine::new(Config::lro());
//! let mut stack = Count(0);
//! let meta = RxMeta::ipoib(0).with_checksum(RxChecksum::Verified);
//! let done = poll::poll(&queue, &mut engine, &mut stack, &meta, 64);
//! assert_eq!((done.frames, stack.0), (1, 1)); // not TCP: passed up alone
//! // Copied (copybreak), passed up, and its small buffer is back; the RQ never emptied.
//! assert_eq!((queue.accounting().small_free, queue.posted()), (8, 4));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use lro_core::{Coalescer, LinkKind, RxMeta, Sink};

use crate::queue::{RxBuf, RxQueue};

/// What one poll did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PollStats {
    /// Frames pushed into the coalescer.
    pub frames: usize,
    /// Completions that could not go up (counted in [`RxQueue::stats`] by kind).
    pub errors: usize,
}

/// Takes up to `budget` completions from `queue` into `coalescer` with `meta` (its link kind
/// forced to [`LinkKind::Ipoib`]), then flushes everything the coalescer holds into `sink`.
pub fn poll<'q, 'a, C, K>(
    queue: &'q RxQueue<'a>,
    coalescer: &mut C,
    sink: &mut K,
    meta: &RxMeta,
    budget: usize,
) -> PollStats
where
    C: Coalescer<RxBuf<'q, 'a>> + ?Sized,
    K: Sink<RxBuf<'q, 'a>> + ?Sized,
{
    let meta = meta.with_link(LinkKind::Ipoib);
    let mut done = PollStats::default();
    while done.frames + done.errors < budget {
        match queue.receive() {
            None => break,
            Some(Ok(frame)) => {
                coalescer.push(frame, &meta, sink);
                done.frames += 1;
            }
            Some(Err(_)) => done.errors += 1,
        }
    }
    coalescer.flush_all(sink);
    done
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use lro_core::testing::{FrameSpec, TCP_ACK};
    use lro_core::{Config, Engine, RxChecksum, Segment, Sizes};

    use super::*;
    use crate::hca::SimHca;
    use crate::{Mode, QueueConfig, RxQueueStorage};

    /// The frame count of every segment delivered.
    struct Segments(Vec<u16>);

    impl<F: AsRef<[u8]>> Sink<F> for Segments {
        fn segment(&mut self, segment: Segment<'_, F>) {
            self.0.push(segment.info().frames);
        }
    }

    /// Data segment `i` of one TCP flow, as the IP packet an IPoIB frame carries.
    fn data(i: u32) -> Vec<u8> {
        let spec = FrameSpec::ipv4_tcp(40000, 5201)
            .flags(TCP_ACK)
            .seq(1000 + 100 * i)
            .payload(&[7; 100]);
        lro_testkit::frame::bytes_of(&spec)[14..].to_vec()
    }

    #[test]
    fn a_poll_counts_errors_against_its_budget_and_flushes_what_it_held() {
        let storage: RxQueueStorage<'_, 8, 0> = RxQueueStorage::new();
        let mode = Mode::DATAGRAM_2K;
        let mut large = vec![0u8; 8 * mode.rx_buffer_len()];
        let config = QueueConfig::new(mode, 8).with_copybreak(None);
        let queue = RxQueue::new(&storage, &mut large, &mut [], config).unwrap();
        let mut hca = SimHca::new(&queue);
        // Three segments of one flow, two runts, two more segments.
        for i in 0..3 {
            hca.deliver_ip(&data(i)).unwrap();
        }
        hca.deliver(&[0x08, 0x00]).unwrap();
        hca.deliver(&[0x08]).unwrap();
        for i in 3..5 {
            hca.deliver_ip(&data(i)).unwrap();
        }
        let mut engine: Engine<_, Sizes<8, 8>> = Engine::new(Config::lro());
        let mut up = Segments(Vec::new());
        // Whatever link the caller's metadata names, the frames are IPoIB's.
        let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
        let done = poll(&queue, &mut engine, &mut up, &meta, 5);
        assert_eq!(
            done,
            PollStats {
                frames: 3,
                errors: 2
            }
        );
        // The three merged into one segment, delivered by the poll's flush.
        assert_eq!(up.0, [3]);
        assert_eq!(engine.held_frames(), 0);
        assert_eq!(queue.completed(), 2, "the budget left two frames waiting");
        let done = poll(&queue, &mut engine, &mut up, &meta, 64);
        assert_eq!(
            done,
            PollStats {
                frames: 2,
                errors: 0
            }
        );
        assert_eq!(up.0, [3, 2]);
    }
}
