//! A smoltcp [`Device`] that coalesces between any receive driver and smoltcp's `Interface`
//! (feature `smoltcp`).
//!
//! [`LroDevice`] drains its [`RxDriver`] (the embedded [`RxRing`](crate::RxRing), an AF_XDP
//! socket's receive half, ...) when smoltcp asks for a frame and smoltcp has consumed
//! everything pending: each received frame goes through an [`lro_core::Engine`] with the
//! `Lro` policy, and at the end of the burst (the driver has nothing more) everything held is
//! flushed, as a NAPI poll ends with `napi_gro_flush`. Completed segments stay in the driver's
//! buffers (Myri10GE style) in a queue of frame handles; smoltcp receives each segment as one
//! frame: a single-frame segment straight from its driver buffer, a coalesced one copied once
//! into a contiguous staging buffer with its headers already rewritten (`Segment::copy_to`'s
//! layout). The frames go back to the driver as soon as their bytes have been handed over.
//!
//! What smoltcp 0.14 accepts on receive: an Ethernet frame whose IPv4 `total_len` (a u16) fits
//! the buffer; it never compares a received frame with `max_transmission_unit`, and TCP takes
//! any in-window segment whatever its size. So the advertised MTU stays the link MTU (the
//! capabilities are the TX device's), and merged IP datagrams stay within 65535 bytes (and
//! within the staging buffer). Checksums of merged segments are complete and correct, so
//! smoltcp may keep verifying them.
//!
//! Transmission passes straight through to the wrapped device `T`.

use heapless::Deque;
use lro_core::{Capacity, Config, Engine, Segment, SegmentInfo, Sink, Sizes, Stats};
use smoltcp::phy::{Device, DeviceCapabilities, RxToken};
use smoltcp::time::Instant;

use crate::RxDriver;

/// Bytes of link header a merged segment may carry before its IP header (Ethernet and two
/// in-line VLAN tags).
pub const LINK_ROOM: usize = 14 + 8;

/// Staging buffer size that fits the largest merged segment (a 65535-byte IP datagram).
pub const STAGING_LEN: usize = 65535 + LINK_ROOM;

/// Adapter counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterStats {
    /// Frames taken from the driver.
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
    /// Pure ACKs handed to smoltcp (TCP without payload and without SYN, FIN or RST), counted
    /// while coalescing is on, when queued for smoltcp (one thrown away by
    /// [`LroDevice::release_all`] before smoltcp took it still counts): with
    /// [`AdapterStats::superseded`], the pure ACKs received.
    pub pure_acks_to_stack: u64,
    /// Frames given back to the driver without reaching smoltcp: a segment that did not fit
    /// the staging buffer or the queue (never with the sizes [`LroDevice::new`] enforces), or
    /// whose receive token was dropped without being consumed.
    pub dropped: u64,
}

/// A frame of a completed segment, waiting in its driver buffer for smoltcp.
struct Pending<F> {
    frame: F,
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
struct RxState<'s, F, C: Capacity, const Q: usize> {
    engine: Engine<F, C>,
    pending: Deque<Pending<F>, Q>,
    staging: &'s mut [u8],
    coalescing: bool,
    stats: AdapterStats,
}

/// Puts completed segments into the pending queue, frames still in their driver buffers.
struct PendingSink<'x, F, const Q: usize> {
    pending: &'x mut Deque<Pending<F>, Q>,
    staging_len: usize,
    stats: &'x mut AdapterStats,
}

/// A segment's head is a pure ACK: TCP, no payload, ACK set, none of SYN, FIN, RST.
fn is_pure_ack(info: &SegmentInfo, head: &[u8]) -> bool {
    const ACK: u8 = 0x10;
    const SYN_FIN_RST: u8 = 0x07;
    if info.flow.is_none() || info.payload_len != 0 {
        return false;
    }
    let flags = head.get(info.l4 as usize + 13).copied().unwrap_or(0);
    flags & ACK != 0 && flags & SYN_FIN_RST == 0
}

impl<F: AsRef<[u8]>, const Q: usize> PendingSink<'_, F, Q> {
    fn push_alone(&mut self, frame: F) {
        let len = frame.as_ref().len() as u32;
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

impl<F: AsRef<[u8]>, const Q: usize> Sink<F> for PendingSink<'_, F, Q> {
    fn segment(&mut self, segment: Segment<'_, F>) {
        let info = *segment.info();
        let n = usize::from(info.frames);
        if (n > 1 && info.len > self.staging_len)
            || self.pending.capacity() - self.pending.len() < n
        {
            // Not reachable with the sizes `LroDevice` enforces; the frames go back to the driver.
            self.stats.dropped += n as u64;
            return;
        }
        if is_pure_ack(&info, segment.head()) {
            self.stats.pure_acks_to_stack += 1;
        }
        for (i, part) in segment.into_parts().enumerate() {
            let p = Pending {
                frame: part.frame,
                start: part.range.start as u32,
                end: part.range.end as u32,
                head: i == 0,
                seg_frames: n as u16,
                seg_len: info.len as u32,
            };
            if self.pending.push_back(p).is_err() {
                self.stats.dropped += 1;
            }
        }
    }

    fn release(&mut self, frame: F) {
        self.stats.superseded += 1;
        drop(frame);
    }
}

impl<F: AsRef<[u8]> + AsMut<[u8]>, C: Capacity, const Q: usize> RxState<'_, F, C, Q> {
    /// Drops frames left at the front without their head (a token leaked with `mem::forget`;
    /// one dropped unconsumed gives its frames back itself).
    fn skip_orphans(&mut self) {
        while self.pending.front().is_some_and(|p| !p.head) {
            self.pending.pop_front();
            self.stats.dropped += 1;
        }
    }

    /// One burst: takes what the driver has (as much as the queue can take whatever the engine
    /// emits), then flushes everything held.
    fn fill<R: RxDriver<Frame = F>>(&mut self, driver: &mut R, now: u64) {
        let mut sink: PendingSink<'_, F, Q> = PendingSink {
            pending: &mut self.pending,
            staging_len: self.staging.len(),
            stats: &mut self.stats,
        };
        if !self.coalescing {
            while !sink.pending.is_full() {
                let Some((frame, _meta)) = driver.receive(now) else {
                    break;
                };
                sink.stats.frames_in += 1;
                sink.push_alone(frame);
            }
            return;
        }
        // Room for every frame queued, held and pushed: whatever the engine emits fits.
        while sink.pending.len() + self.engine.held_frames() < Q {
            let Some((frame, meta)) = driver.receive(now) else {
                break;
            };
            sink.stats.frames_in += 1;
            self.engine.push(frame, &meta, &mut sink);
        }
        self.engine.flush_all(&mut sink);
    }
}

/// smoltcp's receive token: one segment. Dropped without being consumed, it gives the
/// segment's frames back to the driver at once, counted in [`AdapterStats::dropped`].
pub struct LroRxToken<'a, 's, F, C: Capacity, const Q: usize> {
    /// The segment's head (`None` once consumed).
    head: Option<Pending<F>>,
    rx: &'a mut RxState<'s, F, C, Q>,
}

impl<F, C: Capacity, const Q: usize> Drop for LroRxToken<'_, '_, F, C, Q> {
    fn drop(&mut self) {
        let Some(head) = self.head.take() else {
            return;
        };
        let rest = head.seg_frames.saturating_sub(1);
        drop(head);
        self.rx.stats.dropped += 1;
        for _ in 0..rest {
            if self.rx.pending.front().is_none_or(|p| p.head) {
                break;
            }
            self.rx.pending.pop_front();
            self.rx.stats.dropped += 1;
        }
    }
}

impl<Fr: AsRef<[u8]>, C: Capacity, const Q: usize> RxToken for LroRxToken<'_, '_, Fr, C, Q> {
    fn consume<R, F>(mut self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let Some(head) = self.head.take() else {
            return f(&[]);
        };
        let rx = &mut *self.rx;
        rx.stats.frames_to_stack += 1;
        rx.stats.bytes_to_stack += u64::from(head.seg_len);
        let range = |p: &Pending<Fr>| p.start as usize..p.end as usize;
        if head.seg_frames <= 1 {
            // Straight from the driver buffer; the frame goes back when `head` drops.
            return f(&head.frame.as_ref()[range(&head)]);
        }
        let mut at = 0;
        let mut copy = |p: Pending<Fr>, staging: &mut [u8]| {
            let chunk = &p.frame.as_ref()[range(&p)];
            if let Some(dst) = staging.get_mut(at..at + chunk.len()) {
                dst.copy_from_slice(chunk);
                at += chunk.len();
            }
            // `p` drops here: its buffer goes back to the driver before smoltcp runs.
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

/// A smoltcp device that receives from an [`RxDriver`] through the coalescer and transmits
/// through `T`.
///
/// `C` sizes the engine ([`Capacity`], e.g. [`Sizes`]`<FLOWS, FRAMES, ACKS>`; the default is
/// 8 flows and 48 frames per segment); `Q` bounds the frames of completed segments waiting for
/// smoltcp. Give the driver at least `Q` buffers more than its receive queue holds (plus the
/// frames the engine holds) so it keeps receiving while they wait; a ring of page frags needs
/// whole pages to spare, as a held frame pins its page (see the `ring` module).
///
/// (smoltcp's `Loopback` needs the `std` feature besides `smoltcp`.)
///
/// ```
/// use drivers_myri::phy::{LroDevice, STAGING_LEN};
/// use drivers_myri::smoltcp::phy::{Device, Loopback, Medium};
/// use drivers_myri::smoltcp::time::Instant;
/// use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
///
/// let mut storage: RxRingStorage<8, 8> = RxRingStorage::new();
/// let mut memory = vec![0u8; 8 * 2048];
/// let ring = RxRing::new(&mut storage, &mut memory, BufferLayout::slots(2048))?;
/// let mut staging = vec![0u8; STAGING_LEN];
/// // Receive from the ring, transmit through a loopback device.
/// let mut dev: LroDevice<'_, _, _> =
///     LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
/// assert!(dev.receive(Instant::from_millis(0)).is_none());
/// # Ok::<(), drivers_myri::LayoutError>(())
/// ```
pub struct LroDevice<'s, R: RxDriver, T, C: Capacity = Sizes<8, 48>, const Q: usize = 256> {
    driver: R,
    tx: T,
    rx: RxState<'s, R::Frame, C, Q>,
}

impl<'s, R: RxDriver, T: Device, C: Capacity, const Q: usize> LroDevice<'s, R, T, C, Q> {
    /// Coalesces frames from `driver` with [`Config::lro`] and transmits through `tx`;
    /// coalesced segments are copied into `staging` (at least [`STAGING_LEN`] bytes for 64 KB
    /// segments; a smaller buffer caps the segment size).
    pub fn new(driver: R, tx: T, staging: &'s mut [u8]) -> Self {
        Self::with_config(driver, tx, staging, Config::lro())
    }

    /// As [`LroDevice::new`] with another engine configuration. `max_ip_len` is lowered to what
    /// `staging` holds.
    pub fn with_config(driver: R, tx: T, staging: &'s mut [u8], mut config: Config) -> Self {
        let room = staging.len().saturating_sub(LINK_ROOM).min(65535) as u16;
        config.max_ip_len = config.max_ip_len.min(room);
        Self {
            driver,
            tx,
            rx: RxState {
                engine: Engine::new(config),
                pending: Deque::new(),
                staging,
                coalescing: true,
                stats: AdapterStats::default(),
            },
        }
    }

    /// Turns coalescing on or off. Off, every frame goes to smoltcp on its own, straight from
    /// its driver buffer (the baseline); frames held when it is turned off are flushed first.
    pub fn set_coalescing(&mut self, on: bool) {
        if !on && self.rx.coalescing {
            let rx = &mut self.rx;
            let mut sink: PendingSink<'_, R::Frame, Q> = PendingSink {
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

    /// Changes the engine configuration (for example the policy: [`Config::gro`] merges data
    /// but never pure ACKs); takes effect for the next frame. `max_ip_len` is lowered to what
    /// the staging buffer holds.
    pub fn set_config(&mut self, mut config: Config) {
        let room = self.rx.staging.len().saturating_sub(LINK_ROOM).min(65535) as u16;
        config.max_ip_len = config.max_ip_len.min(room);
        self.rx.engine.set_config(config);
    }

    /// The adapter's counters.
    pub fn stats(&self) -> AdapterStats {
        self.rx.stats
    }

    /// Sets the adapter's and the engine's counters to zero.
    pub fn reset_stats(&mut self) {
        self.rx.stats = AdapterStats::default();
        self.rx.engine.reset_stats();
    }

    /// The engine's counters.
    pub fn engine_stats(&self) -> &Stats {
        self.rx.engine.stats()
    }

    /// Frames of completed segments waiting for smoltcp.
    pub fn pending_frames(&self) -> usize {
        self.rx.pending.len()
    }

    /// Frames waiting for smoltcp or held by the engine: buffers the device keeps from the
    /// driver right now.
    pub fn frames_held(&self) -> usize {
        self.rx.pending.len() + self.rx.engine.held_frames()
    }

    /// The receive driver.
    pub fn driver(&self) -> &R {
        &self.driver
    }

    /// The receive driver, mutably.
    pub fn driver_mut(&mut self) -> &mut R {
        &mut self.driver
    }

    /// The transmit device.
    pub fn inner(&self) -> &T {
        &self.tx
    }

    /// The transmit device, mutably (for example to read its own receive side).
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.tx
    }

    /// Gives every frame held or pending back to the driver (they are dropped, not passed up,
    /// and not counted in [`AdapterStats::dropped`]: the caller asked for it).
    pub fn release_all(&mut self) {
        let rx = &mut self.rx;
        let mut sink: PendingSink<'_, R::Frame, Q> = PendingSink {
            pending: &mut rx.pending,
            staging_len: rx.staging.len(),
            stats: &mut rx.stats,
        };
        rx.engine.flush_all(&mut sink);
        rx.pending.clear();
    }

    /// The driver and the transmit device back; frames held or pending go back to the driver.
    pub fn into_parts(mut self) -> (R, T) {
        self.release_all();
        let Self { driver, tx, .. } = self;
        (driver, tx)
    }

    /// The transmit device back; frames held or pending go back to the driver.
    pub fn into_inner(self) -> T {
        self.into_parts().1
    }
}

impl<'s, R: RxDriver, T: Device, C: Capacity, const Q: usize> Device for LroDevice<'s, R, T, C, Q> {
    type RxToken<'a>
        = LroRxToken<'a, 's, R::Frame, C, Q>
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
            rx.fill(&mut self.driver, timestamp.total_micros() as u64);
        }
        if rx.pending.is_empty() {
            return None;
        }
        // Only with a transmit token (smoltcp may answer at once); otherwise the segment waits.
        let tx = self.tx.transmit(timestamp)?;
        let head = rx.pending.pop_front()?;
        Some((
            LroRxToken {
                head: Some(head),
                rx,
            },
            tx,
        ))
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
    use crate::test_frames::{tcp, tcp_from};
    use crate::{BufferLayout, RxRing, RxRingStorage};

    /// Everything the device hands smoltcp right now.
    fn drain<D: Device>(dev: &mut D) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Some((rx, _tx)) = dev.receive(Instant::from_millis(0)) {
            out.push(rx.consume(|f| f.to_vec()));
        }
        out
    }

    /// The device most cases use: `LroDevice`'s default sizes over a ring.
    type Dev<'s, 'r> = LroDevice<'s, &'r RxRing<'r>, Loopback>;

    /// Runs `f` on a ring of `N` 2048-byte slots, the simulated MAC that fills it, and a
    /// device over it of sizes `C` and queue `Q` with a staging buffer of `staging` bytes.
    fn with_ring<const N: usize, C: Capacity, const Q: usize>(
        staging: usize,
        f: impl for<'r> FnOnce(
            &'r RxRing<'r>,
            &mut SimMac<'r>,
            &mut LroDevice<'_, &'r RxRing<'r>, Loopback, C, Q>,
        ),
    ) {
        let mut storage: RxRingStorage<N, N> = RxRingStorage::new();
        let mut mem = vec![0u8; N * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut staging = vec![0u8; staging];
        let mut dev = LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
        f(&ring, &mut mac, &mut dev);
    }

    /// What most cases need: [`with_ring`] with eight slots and a staging buffer for 64 KB
    /// segments.
    fn with_device<C: Capacity, const Q: usize>(
        f: impl for<'r> FnOnce(
            &'r RxRing<'r>,
            &mut SimMac<'r>,
            &mut LroDevice<'_, &'r RxRing<'r>, Loopback, C, Q>,
        ),
    ) {
        with_ring::<8, C, Q>(STAGING_LEN, f);
    }

    #[test]
    fn coalesces_ring_frames_into_one_smoltcp_frame() {
        let mut storage: RxRingStorage<8, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 8192];
        let layout = BufferLayout::page_frags(8192, 2048);
        let ring = RxRing::new(&mut storage, &mut mem, layout).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut staging = vec![0u8; STAGING_LEN];
        let mut dev: LroDevice<'_, &RxRing<'_>, Loopback> =
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
        // Only the coalesced segment was copied; both went up.
        assert_eq!(s.bytes_copied, 554);
        assert_eq!(s.bytes_to_stack, 554 + 60);
        assert!(dev.engine_stats().is_conserved());
        // Every buffer went back to the ring once smoltcp had the bytes.
        assert_eq!(ring.outstanding(), 0);
        assert_eq!(ring.armed(), 8);
    }

    #[test]
    fn without_coalescing_every_frame_passes_alone() {
        with_device(|ring, mac, dev: &mut Dev<'_, '_>| {
            dev.set_coalescing(false);
            let frames: Vec<Vec<u8>> = (0..3).map(|k| tcp(1 + k * 100, 100)).collect();
            for f in &frames {
                mac.deliver(f).unwrap();
            }
            assert_eq!(drain(dev), frames);
            assert_eq!(dev.stats().segments_copied, 0);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    #[test]
    fn staging_buffer_caps_the_segment() {
        // Room for a 14 + 3040-byte frame: at most three 1000-byte payloads per segment.
        with_ring::<16, _, 256>(LINK_ROOM + 3040, |ring, mac, dev: &mut Dev<'_, '_>| {
            for k in 0..9 {
                mac.deliver(&tcp(1 + k * 1000, 1000)).unwrap();
            }
            let got = drain(dev);
            assert_eq!(got.len(), 3);
            assert!(got.iter().all(|f| f.len() == 14 + 40 + 3000));
            // A new configuration is capped the same way.
            dev.set_config(Config::gro());
            for k in 9..18 {
                mac.deliver(&tcp(1 + k * 1000, 1000)).unwrap();
            }
            let got = drain(dev);
            assert_eq!(got.len(), 3, "after set_config");
            assert!(got.iter().all(|f| f.len() == 14 + 40 + 3000));
            assert_eq!(dev.stats().dropped, 0);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    #[test]
    fn frames_longer_than_the_staging_buffer_pass_uncopied() {
        // Room for no merged segment at all: every frame goes up alone.
        with_ring::<4, _, 256>(512, |ring, mac, dev: &mut Dev<'_, '_>| {
            let frames: Vec<Vec<u8>> = (0..3).map(|k| tcp(1 + k * 1000, 1000)).collect();
            for f in &frames {
                mac.deliver(f).unwrap();
            }
            assert_eq!(drain(dev), frames);
            let s = dev.stats();
            assert_eq!((s.segments_copied, s.dropped), (0, 0));
            assert_eq!(ring.outstanding(), 0);
        });
    }

    #[test]
    fn a_staging_buffer_beyond_64_kb_merges_up_to_64_kb() {
        with_ring::<64, _, 256>(100_000, |ring, mac, dev: &mut Dev<'_, '_>| {
            // 45 frames of 1400 bytes: one 63,040-byte IP datagram.
            for k in 0..45 {
                mac.deliver(&tcp(1 + k * 1400, 1400)).unwrap();
            }
            let got = drain(dev);
            assert_eq!(got.len(), 1);
            assert_eq!(got[0].len(), 14 + 40 + 45 * 1400);
            assert_eq!(dev.stats().dropped, 0);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    #[test]
    fn release_all_gives_back_what_waits_for_smoltcp() {
        use lro_core::testing::TCP_ACK;
        with_device(|ring, mac, dev: &mut Dev<'_, '_>| {
            // Three segments: two frames of one flow, one of another, one of a third.
            for f in [
                tcp(1, 100),
                tcp(101, 100),
                tcp_from(40001, TCP_ACK, 1, 100),
                tcp_from(40002, TCP_ACK, 1, 100),
            ] {
                mac.deliver(&f).unwrap();
            }
            let (rx, _tx) = dev.receive(Instant::from_millis(0)).unwrap();
            assert_eq!(rx.consume(|f| f.len()), 14 + 40 + 200);
            assert_eq!(dev.pending_frames(), 2);
            dev.release_all();
            assert_eq!(dev.pending_frames(), 0);
            assert_eq!(dev.frames_held(), 0);
            assert_eq!(ring.outstanding(), 0);
            // Given back on request: not counted as dropped, and not passed up later.
            assert_eq!(dev.stats().dropped, 0);
            assert!(drain(dev).is_empty());
        });
    }

    #[test]
    fn a_token_dropped_unconsumed_gives_its_frames_back_counted() {
        with_device(|ring, mac, dev: &mut Dev<'_, '_>| {
            // A segment of four frames: smoltcp drops its token without consuming it.
            for k in 0..4 {
                mac.deliver(&tcp(1 + k * 100, 100)).unwrap();
            }
            let (rx, _tx) = dev.receive(Instant::from_millis(0)).unwrap();
            drop(rx);
            // Not passed up: every frame of the segment is back in the ring and counted.
            assert_eq!(ring.outstanding(), 0);
            assert_eq!(dev.stats().dropped, 4);
            assert_eq!(dev.stats().frames_to_stack, 0);
            // A single-frame segment dropped unconsumed is counted too.
            let mut arp = vec![0u8; 60];
            arp[12..14].copy_from_slice(&[0x08, 0x06]);
            mac.deliver(&arp).unwrap();
            let (rx, _tx) = dev.receive(Instant::from_millis(0)).unwrap();
            drop(rx);
            assert_eq!(ring.outstanding(), 0);
            assert_eq!(dev.stats().dropped, 5);
            // The device goes on with the next segment.
            mac.deliver(&tcp(401, 100)).unwrap();
            assert_eq!(drain(dev), vec![tcp(401, 100)]);
            assert_eq!(dev.stats().dropped, 5);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    #[test]
    fn transmit_passes_through() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut staging = vec![0u8; 4096];
        let mut dev: LroDevice<'_, &RxRing<'_>, Loopback> =
            LroDevice::new(&ring, Loopback::new(Medium::Ethernet), &mut staging);
        assert_eq!(dev.capabilities().medium, Medium::Ethernet);
        let tx = dev.transmit(Instant::from_millis(0)).unwrap();
        tx.consume(4, |b| b.copy_from_slice(&[1, 2, 3, 4]));
        // The loopback received what the adapter transmitted; nothing came from the ring.
        assert_eq!(drain(dev.inner_mut()), vec![vec![1, 2, 3, 4]]);
        assert!(drain(&mut dev).is_empty());
    }

    #[test]
    fn counts_pure_acks_and_bytes_passed_up() {
        use lro_core::testing::{TCP_ACK, TCP_FIN};
        with_device(|ring, mac, dev: &mut Dev<'_, '_>| {
            // A FIN without payload is not a pure ACK; the other flow's first ACK is.
            mac.deliver(&tcp_from(40001, TCP_ACK | TCP_FIN, 1, 0))
                .unwrap();
            mac.deliver(&tcp_from(40002, TCP_ACK, 1, 0)).unwrap();
            for k in 0..3 {
                mac.deliver(&tcp(1 + k * 100, 100)).unwrap();
            }
            let got = drain(dev);
            assert_eq!(got.len(), 3, "the FIN, the ACK, one segment");
            let s = dev.stats();
            assert_eq!(s.pure_acks_to_stack, 1);
            assert_eq!(s.frames_to_stack, 3);
            let bytes: usize = got.iter().map(Vec::len).sum();
            assert_eq!(s.bytes_to_stack, bytes as u64);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    /// Without coalescing a burst takes as many frames as the queue holds, not one fewer.
    #[test]
    fn without_coalescing_a_burst_fills_the_queue() {
        with_device::<Sizes<8, 48>, 4>(|ring, mac, dev| {
            dev.set_coalescing(false);
            let frames: Vec<Vec<u8>> = (0..6).map(|k| tcp(1 + k * 100, 100)).collect();
            for f in &frames {
                mac.deliver(f).unwrap();
            }
            let (rx, _tx) = dev.receive(Instant::from_millis(0)).unwrap();
            assert_eq!(rx.consume(|f| f.to_vec()), frames[0]);
            assert_eq!(dev.stats().frames_in, 4, "the first burst: a queue of four");
            assert_eq!(dev.pending_frames(), 3);
            assert_eq!(drain(dev), frames[1..]);
            assert_eq!(dev.stats().frames_in, 6);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    /// With `Q` frames queued or held the device takes no more from the driver: the engine
    /// may deliver every frame it holds at once, and they must fit the queue.
    #[test]
    fn never_takes_more_frames_than_the_queue_holds() {
        use lro_core::testing::TCP_ACK;
        // Eight flow entries, a queue of four frames; five flows, each a held data frame.
        with_device::<Sizes<8, 48>, 4>(|ring, mac, dev| {
            let frames: Vec<Vec<u8>> = (0..5)
                .map(|k| tcp_from(40000 + k, TCP_ACK, 1, 100))
                .collect();
            for f in &frames {
                mac.deliver(f).unwrap();
            }
            let mut got = drain(dev);
            got.sort();
            let mut want = frames.clone();
            want.sort();
            assert_eq!(got, want);
            assert_eq!(dev.stats().dropped, 0);
            assert_eq!(ring.outstanding(), 0);
        });
    }

    /// A token leaked (`mem::forget`) leaves its segment's other frames without their head:
    /// the next receive drops them, counted, and goes on.
    #[test]
    fn frames_of_a_leaked_token_are_dropped_counted() {
        with_device(|ring, mac, dev: &mut Dev<'_, '_>| {
            for k in 0..4 {
                mac.deliver(&tcp(1 + k * 100, 100)).unwrap();
            }
            let (rx, _tx) = dev.receive(Instant::from_millis(0)).unwrap();
            core::mem::forget(rx);
            mac.deliver(&tcp(401, 100)).unwrap();
            assert_eq!(drain(dev), vec![tcp(401, 100)]);
            // The head's buffer leaked with the token; the three others went back.
            assert_eq!(dev.stats().dropped, 3);
            assert_eq!(ring.outstanding(), 1);
        });
    }
}
