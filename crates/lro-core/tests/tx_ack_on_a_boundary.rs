//! An ACK that ends exactly where a super-segment ends leaves the next one untouched: nothing
//! of it is ACKed, no offset is recorded, and `TxStats::partial_acks` ("ACKs that ended inside
//! a super-segment") does not count it.

use lro_core::testing::{FrameSpec, TCP_ACK};
use lro_core::tx::{AckOutcome, TxQueue};
use lro_core::LinkKind;

fn superseg(seq: u32, len: usize) -> Vec<u8> {
    let payload = vec![0x5au8; len];
    let spec = FrameSpec::ipv4_tcp(5201, 40000)
        .seq(seq)
        .ack(1)
        .flags(TCP_ACK)
        .payload(&payload);
    let mut b = vec![0u8; spec.len()];
    spec.write(&mut b).unwrap();
    b
}

#[test]
fn an_ack_at_a_super_segment_boundary_is_not_a_partial_ack() {
    let mut q: TxQueue<Vec<u8>, 4> = TxQueue::new(1000, LinkKind::Ethernet);
    let _t0 = q.push(superseg(1000, 100)).unwrap();
    let _t1 = q.push(superseg(1100, 100)).unwrap();
    // The first super-segment exactly: it is ACKed whole (held, the NIC still owns it), the
    // second not at all.
    assert_eq!(
        q.ack(1100, |_| panic!("still owned by the NIC")),
        Ok(AckOutcome::Advanced { released: 0 })
    );
    let e: Vec<_> = q.entries().map(|e| (e.acked, e.seq_len)).collect();
    assert_eq!(e, [(100, 100), (0, 100)]);
    assert_eq!(
        q.stats().partial_acks,
        0,
        "no ACK ended inside a super-segment"
    );
    // One that does end inside the second is counted.
    q.ack(1150, |_| panic!("still owned by the NIC")).unwrap();
    assert_eq!(q.stats().partial_acks, 1);
}
