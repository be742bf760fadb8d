//! `bytes::Bytes` views of a segment's frames without copying (feature `bytes`).
//!
//! Each frame of a [`Segment`] becomes the owner of a [`Bytes`] (`Bytes::from_owner`) sliced to
//! the part of it that belongs to the segment: the head frame from its first byte (headers
//! rewritten) to the end of its payload, then each merged frame's payload. Dropping the last
//! clone of a frame's `Bytes`, on any thread, drops the frame, which for a driver's handle
//! (an AF_XDP [`UmemFrame`](crate::xdp::UmemFrame)) gives its buffer back. The frame type must
//! be `Send + 'static`: a handle that keeps its driver's memory alive, not one that borrows it.

use alloc::vec::Vec;

use bytes::Bytes;
use lro_core::Segment;

/// The segment's pieces, in order, each a `Bytes` owned by its frame (scatter-gather, no copy).
///
/// ```
/// use drivers_myri::bytes::segment_to_bytes;
/// use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};
/// # use lro_core::testing::{FrameSpec, TCP_ACK};
/// # fn tcp(seq: u32) -> Vec<u8> {
/// #     let spec = FrameSpec::ipv4_tcp(40000, 5201).seq(seq).ack(1).flags(TCP_ACK).payload(&[7u8; 100]);
/// #     let mut buf = vec![0u8; spec.len()];
/// #     spec.write(&mut buf).unwrap();
/// #     buf
/// # }
///
/// struct Stack(Vec<Vec<bytes::Bytes>>);
/// impl Sink<Vec<u8>> for Stack {
///     fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
///         self.0.push(segment_to_bytes(segment));
///     }
/// }
///
/// let mut engine: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(Config::lro());
/// let mut stack = Stack(Vec::new());
/// let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
/// for k in 0..3 {
///     engine.push(tcp(1 + k * 100), &meta, &mut stack);
/// }
/// engine.flush_all(&mut stack);
/// let pieces = &stack.0[0];
/// assert_eq!(pieces.len(), 3); // the head with its headers, then two payloads
/// assert_eq!(pieces.iter().map(|b| b.len()).sum::<usize>(), 14 + 20 + 20 + 300);
/// ```
pub fn segment_to_bytes<F>(segment: Segment<'_, F>) -> Vec<Bytes>
where
    F: AsRef<[u8]> + Send + 'static,
{
    segment
        .into_parts()
        .map(|part| {
            let len = part.frame.as_ref().len();
            let (start, end) = (part.range.start.min(len), part.range.end.min(len));
            Bytes::from_owner(part.frame).slice(start..end)
        })
        .collect()
}
