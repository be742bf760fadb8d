//! A smoltcp [`Device`] that coalesces between a receive ring and smoltcp's `Interface`
//! (feature `smoltcp`).
//!
//! [`LroDevice`] drains the [`RxRing`] when smoltcp asks for a frame and smoltcp has consumed
//! everything pending: each received frame goes through an [`lro_core::Coalescer`] with the
//! `Lro` policy, and at the end of the burst (the ring is empty) everything held is flushed,
//! as a NAPI poll ends with `napi_gro_flush`. Completed segments stay in their ring buffers
//! (Myri10GE style) in a queue of frame handles; smoltcp receives each segment as one frame:
//! a single-frame segment straight from its ring buffer, a coalesced one copied once into a
//! contiguous staging buffer with its headers already rewritten (`Segment::copy_to`'s layout).
//! The frames go back to the ring as soon as their bytes have been handed over.
//!
//! What smoltcp 0.14 accepts on receive: an Ethernet frame whose IPv4 `total_len` (a u16) fits
//! the buffer; it never compares a received frame with `max_transmission_unit`, and TCP takes
//! any in-window segment whatever its size. So the advertised MTU stays the link MTU (the
//! capabilities are the TX device's), and merged IP datagrams stay within 65535 bytes (and
//! within the staging buffer). Checksums of merged segments are complete and correct, so
//! smoltcp may keep verifying them.
//!
//! Transmission passes straight through to the wrapped device `T`.

use heapless::{Deque, Vec};
use lro_core::{Coalesce, Coalescer, Config, Segment, Sink, Stats};
use smoltcp::phy::{Device, DeviceCapabilities, RxToken};
use smoltcp::time::Instant;

use crate::{RxDescriptor, RxDescriptorFormat, RxFrame, RxRing};

/// Bytes of link header a merged segment may carry before its IP header (Ethernet and two
/// in-line VLAN tags).
pub const LINK_ROOM: usize = 14 + 8;

/// Staging buffer size that fits the largest merged segment (a 65535-byte IP datagram).
pub const STAGING_LEN: usize = 65535 + LINK_ROOM;

/// Adapter counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterStats {
    /// Frames taken from the ring.
    pub frames_in: u64,
    /// Frames handed to smoltcp (each a segment): what smoltcp processed.
    pub frames_to_stack: u64,
    /// Bytes handed to smoltcp.
    pub bytes_to_stack: u64,
    /// Coalesced segments copied into the staging buffer.
    pub segments_copied: u64,
    /// Bytes copied into the staging buffer.
    pub bytes_copied: u64,
    /// Pure ACKs superseded by newer ones and recycled without reaching smoltcp.
    pub superseded: u64,
    /// Frames dropped because a segment did not fit the staging buffer or the queue (never
    /// with the sizes [`LroDevice::new`] enforces).
    pub dropped: u64,
}

/// A frame of a completed segment, waiting in its ring buffer for smoltcp.
struct Pending<'r, D: RxDescriptorFormat> {
    frame: RxFrame<'r, D>,
    /// The bytes of the frame that belong to the segment.
    start: u32,
    end: u32,
    /// First frame of its segment.
    head: bool,
    /// Frames in the segment (on the head).
    seg_frames: u16,
    /// Length of the segment as one frame (on the head).
    seg_len: u32,
}

/// Receive state: the engine, the queue of completed segments, the staging buffer.
struct RxState<'r, const N: usize, const S: usize, const Q: usize, D: RxDescriptorFormat> {
    engine: Coalescer<RxFrame<'r, D>, N, S>,
    pending: Deque<Pending<'r, D>, Q>,
    staging: &'r mut [u8],
    coalescing: bool,
    stats: AdapterStats,
}

/// Puts completed segments into the pending queue, frames still in their ring buffers.
struct PendingSink<'x, 'r, const S: usize, const Q: usize, D: RxDescriptorFormat> {
    pending: &'x mut Deque<Pending<'r, D>, Q>,
    staging_len: usize,
    stats: &'x mut AdapterStats,
}

impl<'r, const S: usize, const Q: usize, D: RxDescriptorFormat> PendingSink<'_, 'r, S, Q, D> {
    fn push_alone(&mut self, frame: RxFrame<'r, D>) {
        let len = frame.len() as u32;
        let p = Pending {
            frame,
            start: 0,
            end: len,
            head: true,
            seg_frames: 1,
            seg_len: len,
        };
        if self.pending.push_back(p).is_err() {
            self.stats.dropped += 1;
        }
    }
}

impl<'r, const S: usize, const Q: usize, D: RxDescriptorFormat> Sink<RxFrame<'r, D>>
    for PendingSink<'_, 'r, S, Q, D>
{
    fn segment(&mut self, segment: Segment<'_, RxFrame<'r, D>>) {
        let info = *segment.info();
        let n = usize::from(info.frames);
        if (n > 1 && info.len > self.staging_len)
            || self.pending.capacity() - self.pending.len() < n
        {
            // Not reachable with the sizes `LroDevice` enforces; the frames go back to the ring.
            self.stats.dropped += n as u64;
            return;
        }
        // The byte range of each frame that belongs to the segment.
        let mut ranges: Vec<(u32, u32), S> = Vec::new();
        for (chunk, frame) in segment.chunks().zip(segment.frames()) {
            let base = frame.as_ref().as_ptr() as usize;
            let start = (chunk.as_ptr() as usize).wrapping_sub(base) as u32;
            // `push` fails only beyond S frames, which a segment never has.
            let _ = ranges.push((start, start + chunk.len() as u32));
        }
        for (i, (frame, (start, end))) in segment.into_frames().zip(ranges).enumerate() {
            let p = Pending {
                frame,
                start,
                end,
                head: i == 0,
                seg_frames: n as u16,
                seg_len: info.len as u32,
            };
            if self.pending.push_back(p).is_err() {
                self.stats.dropped += 1;
            }
        }
    }

    fn release(&mut self, frame: RxFrame<'r, D>) {
        self.stats.superseded += 1;
        frame.recycle();
    }
}

impl<'r, const N: usize, const S: usize, const Q: usize, D: RxDescriptorFormat>
    RxState<'r, N, S, Q, D>
{
    /// Drops frames left at the front without their head (a token dropped unconsumed).
    fn skip_orphans(&mut self) {
        while self.pending.front().is_some_and(|p| !p.head) {
            self.pending.pop_front();
            self.stats.dropped += 1;
        }
    }

    /// One burst: takes what the ring has (as much as the queue can take whatever the engine
    /// emits), then flushes everything held.
    fn fill(&mut self, ring: &'r RxRing<'r, D>, now: u64) {
        let mut sink: PendingSink<'_, 'r, S, Q, D> = PendingSink {
            pending: &mut self.pending,
            staging_len: self.staging.len(),
            stats: &mut self.stats,
        };
        if !self.coalescing {
            while !sink.pending.is_full() {
                let Some(frame) = ring.receive() else { break };
                sink.stats.frames_in += 1;
                sink.push_alone(frame);
            }
            return;
        }
        // Room for every frame queued, held and pushed: whatever the engine emits fits.
        while sink.pending.len() + self.engine.held_frames() < Q {
            let Some(frame) = ring.receive() else { break };
            sink.stats.frames_in += 1;
            let meta = frame.meta(now);
            self.engine.push(frame, &meta, &mut sink);
        }
        self.engine.flush_all(&mut sink);
    }
}

/// smoltcp's receive token: one segment.
pub struct LroRxToken<
    'a,
    'r,
    const N: usize,
    const S: usize,
    const Q: usize,
    D: RxDescriptorFormat = RxDescriptor,
> {
    head: Pending<'r, D>,
    rx: &'a mut RxState<'r, N, S, Q, D>,
}

impl<const N: usize, const S: usize, const Q: usize, D: RxDescriptorFormat> RxToken
    for LroRxToken<'_, '_, N, S, Q, D>
{
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let Self { head, rx } = self;
        rx.stats.frames_to_stack += 1;
        rx.stats.bytes_to_stack += u64::from(head.seg_len);
        let range = |p: &Pending<'_, D>| p.start as usize..p.end as usize;
        if head.seg_frames <= 1 {
            // Straight from the ring buffer; the frame goes back when `head` drops.
            return f(&head.frame[range(&head)]);
        }
        let mut at = 0;
        let mut copy = |p: Pending<'_, D>, staging: &mut [u8]| {
            let chunk = &p.frame[range(&p)];
            if let Some(dst) = staging.get_mut(at..at + chunk.len()) {
                dst.copy_from_slice(chunk);
                at += chunk.len();
            }
            // `p` drops here: its buffer goes back to the ring before smoltcp runs.
        };
        let rest = head.seg_frames - 1;
        copy(head, rx.staging);
        for _ in 0..rest {
            match rx.pending.front() {
                Some(p) if !p.head => {}
                _ => break,
            }
            if let Some(p) = rx.pending.pop_front() {
                copy(p, rx.staging);
            }
        }
        rx.stats.segments_copied += 1;
        rx.stats.bytes_copied += at as u64;
        f(&rx.staging[..at])
    }
}

/// A smoltcp device that receives from an [`RxRing`] through the coalescer and transmits
/// through `T`.
///
/// `N` is the flow-table size and `S` the most frames per segment of the engine; `Q` bounds the
/// frames of completed segments waiting for smoltcp. Give the ring at least `Q` fragments more
/// than descriptors so the device keeps receiving while they wait.
///
/// `D` is the ring's descriptor format: the model MAC's [`RxDescriptor`] by default, or a real
/// MAC's such as [`EnetRxDescriptor`](crate::enet::EnetRxDescriptor).
pub struct LroDevice<
    'r,
    T,
    const N: usize = 8,
    const S: usize = 48,
    const Q: usize = 256,
    D: RxDescriptorFormat = RxDescriptor,
> {
    ring: &'r RxRing<'r, D>,
    tx: T,
    rx: RxState<'r, N, S, Q, D>,
}

impl<'r, T: Device, const N: usize, const S: usize, const Q: usize, D: RxDescriptorFormat>
    LroDevice<'r, T, N, S, Q, D>
{
    /// Coalesces frames from `ring` with [`Config::lro`] and transmits through `tx`; coalesced
    /// segments are copied into `staging` (at least [`STAGING_LEN`] bytes for 64 KB segments;
    /// a smaller buffer caps the segment size).
    pub fn new(ring: &'r RxRing<'r, D>, tx: T, staging: &'r mut [u8]) -> Self {
        Self::with_config(ring, tx, staging, Config::lro())
    }

    /// As [`LroDevice::new`] with another engine configuration. `max_ip_len` is lowered to what
    /// `staging` holds.
    pub fn with_config(
        ring: &'r RxRing<'r, D>,
        tx: T,
        staging: &'r mut [u8],
        mut config: Config,
    ) -> Self {
        let room = staging.len().saturating_sub(LINK_ROOM).min(65535) as u16;
        config.max_ip_len = config.max_ip_len.min(room);
        Self {
            ring,
            tx,
            rx: RxState {
                engine: Coalescer::new(config),
                pending: Deque::new(),
                staging,
                coalescing: true,
                stats: AdapterStats::default(),
            },
        }
    }

    /// Turns coalescing on or off. Off, every frame goes to smoltcp on its own, straight from
    /// its ring buffer (the baseline); frames held when it is turned off are flushed first.
    pub fn set_coalescing(&mut self, on: bool) {
        if !on && self.rx.coalescing {
            let rx = &mut self.rx;
            let mut sink: PendingSink<'_, 'r, S, Q, D> = PendingSink {
                pending: &mut rx.pending,
                staging_len: rx.staging.len(),
                stats: &mut rx.stats,
            };
            rx.engine.flush_all(&mut sink);
        }
        self.rx.coalescing = on;
    }

    /// Whether coalescing is on.
    pub fn coalescing(&self) -> bool {
        self.rx.coalescing
    }

    /// The adapter's counters.
    pub fn stats(&self) -> AdapterStats {
        self.rx.stats
    }

    /// The engine's counters.
    pub fn engine_stats(&self) -> &Stats {
        self.rx.engine.stats()
    }

    /// Frames of completed segments waiting for smoltcp.
    pub fn pending_frames(&self) -> usize {
        self.rx.pending.len()
    }

    /// The ring.
    pub fn ring(&self) -> &'r RxRing<'r, D> {
        self.ring
    }

    /// The transmit device.
    pub fn inner(&self) -> &T {
        &self.tx
    }

    /// The transmit device, mutably (for example to read its own receive side).
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.tx
    }

    /// The transmit device back; frames held or pending go back to the ring.
    pub fn into_inner(self) -> T {
        self.tx
    }
}

impl<'r, T: Device, const N: usize, const S: usize, const Q: usize, D: RxDescriptorFormat> Device
    for LroDevice<'r, T, N, S, Q, D>
{
    type RxToken<'a>
        = LroRxToken<'a, 'r, N, S, Q, D>
    where
        Self: 'a;
    type TxToken<'a>
        = T::TxToken<'a>
    where
        Self: 'a;

    fn receive(&mut self, timestamp: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let rx = &mut self.rx;
        rx.skip_orphans();
        if rx.pending.is_empty() {
            rx.fill(self.ring, timestamp.total_micros() as u64);
        }
        if rx.pending.is_empty() {
            return None;
        }
        // Only with a transmit token (smoltcp may answer at once); otherwise the segment waits.
        let tx = self.tx.transmit(timestamp)?;
        let head = rx.pending.pop_front()?;
        Some((LroRxToken { head, rx }, tx))
    }

    fn transmit(&mut self, timestamp: Instant) -> Option<Self::TxToken<'_>> {
        self.tx.transmit(timestamp)
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.tx.capabilities()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use smoltcp::phy::{Loopback, Medium, TxToken};

    use super::*;
    use crate::sim::SimMac;
    use crate::test_frames::tcp;
    use crate::{BufferLayout, RxRingStorage};

    /// Everything the device hands smoltcp right now.
    fn drain<D: Device>(dev: &mut D) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some((rx, _tx)) = dev.receive(Instant::from_millis(0)) {
            out.push(rx.consume(|f| f.to_vec()));
        }
        out
    }

    #[test]
    fn coalesces_ring_frames_into_one_smoltcp_frame() {
        let mut storage: RxRingStorage<8, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 8192];
        let layout = BufferLayout::page_frags(8192, 2048);
        let ring = RxRing::new(&mut storage, &mut mem, layout).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut staging = vec![0u8; STAGING_LEN];
        let mut dev: LroDevice<'_, Loopback> =
            LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);

        let frames: Vec<Vec<u8>> = (0..5).map(|k| tcp(1 + k * 100, 100)).collect();
        for f in &frames {
            mac.deliver(f).unwrap();
        }
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        mac.deliver(&arp).unwrap();

        let got = drain(&mut dev);
        assert_eq!(got.len(), 2, "one coalesced segment and the non-TCP frame");
        // The non-TCP frame passes at once, straight from its ring buffer.
        assert_eq!(got[0], arp);
        let merged = &got[1];
        assert_eq!(merged.len(), 14 + 20 + 20 + 500);
        let payload: Vec<u8> = frames.iter().flat_map(|f| f[54..].to_vec()).collect();
        assert_eq!(&merged[54..], &payload[..]);
        // IPv4 total length rewritten and the header checksum valid.
        assert_eq!(u16::from_be_bytes([merged[16], merged[17]]), 540);
        assert_eq!(lro_core::csum::sum(&merged[14..34]), 0xffff);
        let s = dev.stats();
        assert_eq!(
            (s.frames_in, s.frames_to_stack, s.segments_copied),
            (6, 2, 1)
        );
        assert!(dev.engine_stats().is_conserved());
        // Every buffer went back to the ring once smoltcp had the bytes.
        assert_eq!(ring.outstanding(), 0);
        assert_eq!(ring.armed(), 8);
    }

    #[test]
    fn without_coalescing_every_frame_passes_alone() {
        let mut storage: RxRingStorage<8, 8> = RxRingStorage::new();
        let mut mem = vec![0u8; 8 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut staging = vec![0u8; STAGING_LEN];
        let mut dev: LroDevice<'_, Loopback> =
            LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
        dev.set_coalescing(false);
        let frames: Vec<Vec<u8>> = (0..3).map(|k| tcp(1 + k * 100, 100)).collect();
        for f in &frames {
            mac.deliver(f).unwrap();
        }
        assert_eq!(drain(&mut dev), frames);
        assert_eq!(dev.stats().segments_copied, 0);
        assert_eq!(ring.outstanding(), 0);
    }

    #[test]
    fn staging_buffer_caps_the_segment() {
        let mut storage: RxRingStorage<16, 16> = RxRingStorage::new();
        let mut mem = vec![0u8; 16 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut mac = SimMac::new(&ring);
        // Room for a 14 + 3040-byte frame: at most three 1000-byte payloads per segment.
        let mut staging = vec![0u8; LINK_ROOM + 3040];
        let mut dev: LroDevice<'_, Loopback> =
            LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
        for k in 0..9 {
            mac.deliver(&tcp(1 + k * 1000, 1000)).unwrap();
        }
        let got = drain(&mut dev);
        assert_eq!(got.len(), 3);
        assert!(got.iter().all(|f| f.len() == 14 + 40 + 3000));
        assert_eq!(dev.stats().dropped, 0);
    }

    #[test]
    fn transmit_passes_through() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut staging = vec![0u8; 4096];
        let mut dev: LroDevice<'_, Loopback> =
            LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
        assert_eq!(dev.capabilities().medium, Medium::Ethernet);
        let tx = dev.transmit(Instant::from_millis(0)).unwrap();
        tx.consume(4, |b| b.copy_from_slice(&[1, 2, 3, 4]));
        // The loopback received what the adapter transmitted; nothing came from the ring.
        assert_eq!(drain(dev.inner_mut()), vec![vec![1, 2, 3, 4]]);
        assert!(drain(&mut dev).is_empty());
    }
}
