//! The receive queue's accounting, proven over random orders of arrivals, receives, consumes,
//! teardowns and restarts: every buffer is in exactly one place after every step, every frame
//! the HCA accepted comes out exactly once (as a frame with its bytes, as an error, or flushed
//! by a teardown), in arrival order, and once torn down with every handle dropped every buffer
//! is back in its pool.

use std::collections::VecDeque;

use drivers_ipoib::hca::SimHca;
use drivers_ipoib::{
    Mode, QueueConfig, Refused, Replacement, RxBuf, RxError, RxQueue, RxQueueStorage,
};
use proptest::prelude::*;

const LARGE: usize = 8;
const SMALL: usize = 4;
/// Connected mode with a small MTU keeps the buffers small.
const MTU: u32 = 300;

#[derive(Debug, Clone)]
enum Op {
    /// A packet of this length arrives (longer than the buffer: a length error; shorter than
    /// the encapsulation header: a runt).
    Arrive(usize),
    /// The driver takes the next completion.
    Receive,
    /// The stack consumes one of the frames it holds.
    Consume(usize),
    Teardown,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => prop_oneof![
            2 => 4usize..64,
            2 => 200usize..=304,
            2 => Just(305usize),
            1 => 0usize..4,
        ]
        .prop_map(Op::Arrive),
        5 => Just(Op::Receive),
        4 => any::<usize>().prop_map(Op::Consume),
        1 => Just(Op::Teardown),
        1 => Just(Op::Restart),
    ]
}

/// An IPoIB packet of `len` bytes whose bytes name it.
fn packet(len: usize, id: u32) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| (id as usize * 31 + i) as u8).collect();
    if len >= 4 {
        p[..4].copy_from_slice(&[0x08, 0x00, 0, 0]);
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_buffer_accounted_for(
        ops in prop::collection::vec(op(), 1..200),
        rq_depth in 1u16..=LARGE as u16,
        copybreak in prop_oneof![Just(None), Just(Some(64u16)), Just(Some(256u16))],
        drop_policy in any::<bool>(),
        datagram in any::<bool>(),
    ) {
        let mode = if datagram {
            Mode::datagram(drivers_ipoib::IbMtu::Mtu256)
        } else {
            Mode::connected(MTU).unwrap()
        };
        let replacement = if drop_policy { Replacement::Drop } else { Replacement::Wait };
        let config = QueueConfig::new(mode, rq_depth)
            .with_copybreak(copybreak)
            .with_replacement(replacement);
        let storage: RxQueueStorage<'_, LARGE, SMALL> = RxQueueStorage::new();
        let mut large = vec![0u8; LARGE * config.large_len()];
        let mut small = vec![0u8; SMALL * config.small_len()];
        let q = RxQueue::new(&storage, &mut large, &mut small, config).unwrap();
        let mut hca = SimHca::new(&q);
        // Frames accepted by the HCA and not yet taken, in order: (id, len).
        let mut pending: VecDeque<(u32, usize)> = VecDeque::new();
        let mut held: Vec<(u32, RxBuf<'_, '_>)> = Vec::new();
        let (mut accepted, mut out, mut flushed) = (0u64, 0u64, 0u64);
        let max = mode.max_frame_len();
        for (n, op) in ops.iter().enumerate() {
            let id = n as u32;
            match *op {
                Op::Arrive(len) => {
                    let len = len.min(max + 1);
                    let posted = q.posted();
                    match hca.deliver(&packet(len, id)) {
                        Ok(()) => {
                            prop_assert!(posted > 0 && q.is_running());
                            pending.push_back((id, len));
                            accepted += 1;
                        }
                        Err(Refused::ReceiverNotReady) => prop_assert_eq!(posted, 0),
                        Err(Refused::Down) => prop_assert!(!q.is_running()),
                    }
                }
                Op::Receive => {
                    let small_free = q.accounting().small_free;
                    match q.receive() {
                    None => prop_assert!(pending.is_empty()),
                    Some(r) => {
                        let (want_id, len) = pending.pop_front().expect("a pending frame");
                        out += 1;
                        match r {
                            Ok(buf) => {
                                prop_assert!(len <= max);
                                prop_assert_eq!(buf.as_ref(), &packet(len, want_id)[..]);
                                // Copied exactly when small enough and a small buffer
                                // was free.
                                let small = copybreak.is_some_and(|t| len <= usize::from(t));
                                prop_assert_eq!(buf.is_copied(), small && small_free > 0);
                                held.push((want_id, buf));
                            }
                            Err(RxError::Length { .. }) => prop_assert!(len > max),
                            Err(RxError::Runt { .. }) => prop_assert!(len < 4),
                            Err(RxError::NoReplacement) => prop_assert!(drop_policy),
                            Err(e) => prop_assert!(false, "unexpected {e}"),
                        }
                    }
                    }
                }
                Op::Consume(i) => {
                    if !held.is_empty() {
                        let posted = q.posted();
                        let owed = q.accounting().owed;
                        let (_, buf) = held.swap_remove(i % held.len());
                        let large = !buf.is_copied();
                        drop(buf);
                        // A large buffer fills a waiting slot first.
                        if large && owed > 0 && q.is_running() {
                            prop_assert_eq!(q.posted(), posted + 1);
                        }
                    }
                }
                Op::Teardown => {
                    flushed += pending.len() as u64;
                    pending.clear();
                    q.teardown();
                    prop_assert_eq!(q.posted(), 0);
                }
                Op::Restart => {
                    let was = q.is_running();
                    q.restart();
                    if !was {
                        prop_assert_eq!(q.posted() + q.accounting().owed, usize::from(rq_depth));
                    }
                }
            }
            let acc = q.accounting();
            prop_assert!(acc.is_consistent(), "after {:?}: {:?}", op, acc);
            prop_assert_eq!(acc.large_up + acc.small_up, held.len());
            prop_assert_eq!(acc.large_completed, pending.len());
        }
        // Teardown flushes what was never received; then the stack lets go.
        q.teardown();
        flushed += pending.len() as u64;
        prop_assert!(q.receive().is_none());
        // Nothing lost: every accepted frame came out or was flushed.
        prop_assert_eq!(accepted, out + flushed);
        prop_assert_eq!(hca.stats().delivered, accepted);
        drop(held);
        // Every buffer back in its pool.
        let acc = q.accounting();
        prop_assert!(acc.all_free(), "{:?}", acc);
        prop_assert!(acc.is_consistent());
    }
}
