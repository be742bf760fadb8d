//! A simulated MAC: the device side of an [`RxRing`], for host tests, examples and the no_std
//! probe (feature `test-utils`).
//!
//! [`SimMac::deliver`] does what the MAC's receive DMA does with a frame off the wire: it takes
//! the next descriptor in ring order if the device owns it, writes the frame into the buffer
//! the driver programmed, fills in the length, the CHECKSUM_COMPLETE sum and, when asked
//! ([`SimMac::with_rss`]), the RSS hash, and clears OWN. When the next descriptor is not the device's (the driver has not re-armed it:
//! ring full, or pages all held), the frame is dropped and counted, as hardware counts missed
//! frames.

use lro_core::rss::Toeplitz;
use lro_core::{csum, RssType, RxMeta};

use crate::desc::{bits, DeviceRefused, DeviceWrite};
use crate::RxRing;

/// Why the simulated MAC could not deliver a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimError {
    /// The next descriptor is not owned by the device: no free descriptor (ring full, or the
    /// driver could not re-arm it because every buffer page is held).
    RingFull,
    /// The descriptor's buffer address is not the buffer the driver parked (a driver bug).
    BadDescriptor,
}

impl core::fmt::Display for SimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::RingFull => "no descriptor owned by the device",
            Self::BadDescriptor => "descriptor does not hold the parked buffer",
        })
    }
}

impl core::error::Error for SimError {}

/// Counters of the simulated device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Frames written into descriptors (truncated ones included).
    pub delivered: u64,
    /// Frames dropped because the next descriptor was not the device's.
    pub missed: u64,
    /// Frames longer than the buffer: written truncated with the error bit.
    pub truncated: u64,
}

/// The device side of a ring. Borrows the ring, so it cannot outlive the memory it writes.
#[derive(Debug)]
pub struct SimMac<'r> {
    ring: &'r RxRing<'r>,
    next: usize,
    checksum: bool,
    rss: Option<&'static Toeplitz>,
    stats: SimStats,
}

impl<'r> SimMac<'r> {
    /// A device on `ring` that reports CHECKSUM_COMPLETE sums (as Myri10GE firmware does) and
    /// no RSS hash (see [`SimMac::with_rss`]). The device starts at descriptor 0, where the
    /// driver starts arming.
    pub fn new(ring: &'r RxRing<'r>) -> Self {
        Self {
            ring,
            next: 0,
            checksum: true,
            rss: None,
            stats: SimStats::default(),
        }
    }

    /// The same device with checksum reporting on or off (off: the engine verifies in
    /// software).
    pub fn with_checksum(mut self, on: bool) -> Self {
        self.checksum = on;
        self
    }

    /// The same device reporting RSS hashes computed with `hasher` (as a NIC with RSS does;
    /// `Some(Toeplitz::microsoft())` for the standard key), or none.
    ///
    /// The hasher is a reference rather than a switch so that a program that never turns RSS
    /// on does not link a Toeplitz table (36 KiB of `.rodata`, which a switch tested at run
    /// time would keep referenced from [`SimMac::deliver`]).
    pub fn with_rss(mut self, hasher: Option<&'static Toeplitz>) -> Self {
        self.rss = hasher;
        self
    }

    /// The ring.
    pub fn ring(&self) -> &'r RxRing<'r> {
        self.ring
    }

    /// The counters.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// The descriptor the device fills next.
    pub fn next_descriptor(&self) -> usize {
        self.next
    }

    /// Whether the next descriptor is the device's (a frame delivered now would be received).
    pub fn can_accept(&self) -> bool {
        self.ring.descriptors()[self.next].is_owned_by_device()
    }

    /// Receives `frame` off the wire into the next descriptor. Returns the bytes written
    /// (shorter than the frame when it did not fit the buffer; the driver then drops it).
    ///
    /// # Errors
    /// [`SimError::RingFull`] when the device owns no descriptor at its position; the frame
    /// is dropped and counted in [`SimStats::missed`]. [`SimError::BadDescriptor`] when the
    /// descriptor's buffer address is not the buffer the driver parked there (a driver bug);
    /// the frame is not written.
    pub fn deliver(&mut self, frame: &[u8]) -> Result<usize, SimError> {
        let mut w = DeviceWrite::default();
        if self.checksum && frame.len() >= 14 {
            w.flags |= bits::CSV;
            w.csum_vlan = u32::from(csum::sum(&frame[14..]));
        }
        if let Some(hasher) = self.rss {
            if let Ok(p) = lro_core::parse::parse(frame, &RxMeta::ethernet(0)) {
                let h = hasher.flow(&p.key, true);
                let kind = match h.kind {
                    RssType::Ipv4 => 1,
                    RssType::TcpIpv4 => 2,
                    RssType::Ipv6 => 3,
                    RssType::TcpIpv6 => 4,
                    _ => 0,
                };
                w.flags |= bits::RHV | (kind << bits::RHT_SHIFT);
                w.hash = h.value;
            }
        }
        self.write(frame, w)
    }

    /// Receives `frame` with a bad CRC: written with the error-summary bit, which the driver
    /// must drop.
    ///
    /// # Errors
    /// As [`SimMac::deliver`].
    pub fn deliver_corrupt(&mut self, frame: &[u8]) -> Result<usize, SimError> {
        self.write(
            frame,
            DeviceWrite {
                flags: bits::ES,
                ..DeviceWrite::default()
            },
        )
    }

    fn write(&mut self, frame: &[u8], w: DeviceWrite) -> Result<usize, SimError> {
        match self.ring.desc().device_write(self.next, frame, w) {
            Ok(n) => {
                self.next = (self.next + 1) % self.ring.capacity();
                self.stats.delivered += 1;
                if n < frame.len() {
                    self.stats.truncated += 1;
                }
                Ok(n)
            }
            Err(DeviceRefused::NotOwned) => {
                self.stats.missed += 1;
                Err(SimError::RingFull)
            }
            Err(DeviceRefused::BadDescriptor) => Err(SimError::BadDescriptor),
        }
    }

    /// Moves up to `budget` frames from `wire` (any smoltcp device, such as a TAP interface)
    /// into the ring, stopping early when the wire is empty or the device has no descriptor
    /// (the frame then stays on the wire). Returns the frames delivered.
    #[cfg(feature = "smoltcp")]
    #[cfg_attr(docsrs, doc(cfg(feature = "smoltcp")))]
    pub fn pump<D: smoltcp::phy::Device + ?Sized>(
        &mut self,
        wire: &mut D,
        now: smoltcp::time::Instant,
        budget: usize,
    ) -> usize {
        use smoltcp::phy::RxToken;
        let mut n = 0;
        while n < budget && self.can_accept() {
            let Some((rx, _tx)) = wire.receive(now) else {
                break;
            };
            if rx.consume(|frame| self.deliver(frame)).is_ok() {
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use lro_core::{Config, Engine, RxChecksum, Segment, Sink, Sizes};

    use super::*;
    use crate::test_frames::tcp;
    use crate::{bits, BufferLayout, LayoutError, RxFrame, RxRingStorage};

    #[test]
    fn ownership_handoff_and_frame_contents() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        // Every descriptor is armed with a distinct buffer of the right size.
        assert_eq!(ring.armed(), 4);
        let descs = ring.descriptors();
        for d in descs {
            assert!(d.is_owned_by_device());
            assert_eq!(d.buffer_size(), 2048);
        }
        let mut addrs: Vec<u64> = descs.iter().map(|d| d.buffer_addr()).collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(addrs.len(), 4);

        let mut mac = SimMac::new(&ring).with_rss(Some(Toeplitz::microsoft()));
        let f = tcp(1, 100);
        assert_eq!(mac.deliver(&f), Ok(f.len()));
        // The device cleared OWN and wrote the length and flags.
        let st = descs[0].status();
        assert_eq!(st & bits::OWN, 0);
        assert_eq!(st & bits::FL_MASK, f.len() as u32);
        assert_ne!(st & bits::CSV, 0);
        let frame = ring.receive().unwrap();
        assert_eq!(&frame[..], &f[..]);
        let meta = frame.meta(7);
        assert_eq!(meta.time, 7);
        assert_eq!(
            meta.checksum,
            RxChecksum::Complete(lro_core::csum::sum(&f[14..]))
        );
        assert!(frame.rss_hash().is_some());
        // Descriptor 0 was re-armed at once from the pool... but the pool of four buffers is
        // all in use (three posted, one held), so it stays with the CPU.
        assert_eq!(ring.outstanding(), 1);
        assert_eq!(ring.armed(), 3);
        assert!(!descs[0].is_owned_by_device());
        assert!(ring.stats().starved > 0);
        drop(frame);
        // Returned: re-armed.
        assert_eq!(ring.outstanding(), 0);
        assert_eq!(ring.armed(), 4);
        assert!(descs[0].is_owned_by_device());
        assert_eq!(ring.stats().returned, 1);
        assert!(ring.receive().is_none());
    }

    #[test]
    fn rss_hash_only_when_asked() {
        let mut storage: RxRingStorage<2, 2> = RxRingStorage::new();
        let mut mem = vec![0u8; 2 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let f = tcp(1, 100);
        let mut plain = SimMac::new(&ring);
        plain.deliver(&f).unwrap();
        let frame = ring.receive().unwrap();
        assert_eq!(frame.rss_hash(), None);
        assert_eq!(frame.meta(0).rss, None);
        drop(frame);
        let mut hashing = SimMac::new(&ring).with_rss(Some(Toeplitz::microsoft()));
        // The second device continues where the first one stopped.
        hashing.next = plain.next_descriptor();
        hashing.deliver(&f).unwrap();
        let frame = ring.receive().unwrap();
        let p = lro_core::parse::parse(&f, &RxMeta::ethernet(0)).unwrap();
        assert_eq!(
            frame.rss_hash(),
            Some(Toeplitz::microsoft().flow(&p.key, true))
        );
    }

    #[test]
    fn wraparound_keeps_order() {
        let mut storage: RxRingStorage<4, 8> = RxRingStorage::new();
        let mut mem = vec![0u8; 8 * 256];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(256)).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut seq = 1;
        // 10 laps of the 4-descriptor ring, in bursts of 3 so device and driver wrap at
        // different points.
        for _ in 0..10 * 4 / 3 + 1 {
            let sent: Vec<Vec<u8>> = (0..3).map(|i| tcp(seq + i * 50, 50)).collect();
            for f in &sent {
                mac.deliver(f).unwrap();
            }
            for f in &sent {
                let got = ring.receive().unwrap();
                assert_eq!(&got[..], &f[..]);
            }
            assert!(ring.receive().is_none());
            seq += 150;
        }
        assert_eq!(ring.stats().frames, mac.stats().delivered);
        assert_eq!(ring.outstanding(), 0);
        assert_eq!(ring.armed(), 4);
    }

    #[test]
    fn page_frags_share_a_page_and_repost_when_all_returned() {
        // Two pages of four 512-byte frags; a ring of 2 descriptors.
        let mut storage: RxRingStorage<2, 2> = RxRingStorage::new();
        let mut mem = vec![0u8; 2 * 2048];
        let layout = BufferLayout::page_frags(2048, 512);
        let ring = RxRing::new(&mut storage, &mut mem, layout).unwrap();
        assert_eq!(ring.fragments(), 8);
        assert_eq!(ring.pages(), 2);
        // Two frags of page 0 posted.
        assert_eq!((ring.page_refs(0), ring.page_refs(1)), (2, 0));
        let mut mac = SimMac::new(&ring);
        let mut held: Vec<RxFrame<'_>> = Vec::new();
        for k in 0..4 {
            mac.deliver(&tcp(1 + k * 10, 10)).unwrap();
            held.push(ring.receive().unwrap());
        }
        // Four frames share page 0; page 0's last frag was handed out, so carving moved to
        // page 1 for the two re-armed descriptors.
        assert!(held.iter().all(|f| f.page() == 0));
        assert_eq!((ring.page_refs(0), ring.page_refs(1)), (4, 2));
        // Three of four returned: page 0 is not reposted yet.
        for f in held.drain(..3) {
            f.recycle();
        }
        assert_eq!(ring.page_refs(0), 1);
        // Fill page 1 up and hold its frames, so the ring needs a new page.
        for k in 0..4 {
            mac.deliver(&tcp(100 + k * 10, 10)).unwrap();
            held.push(ring.receive().unwrap());
        }
        assert_eq!(ring.page_refs(1), 4);
        // Page 0 still has a frame out: no page for the ring, it starves.
        assert_eq!(ring.armed(), 0);
        assert_eq!(mac.deliver(&tcp(1000, 10)), Err(SimError::RingFull));
        let posted = ring.stats().pages_posted;
        // The last frame of page 0 comes back: page 0 is reposted and the ring re-armed.
        held.remove(0).recycle();
        assert_eq!(ring.stats().pages_posted, posted + 1);
        assert_eq!(ring.armed(), 2);
        assert_eq!(ring.page_refs(0), 2);
        mac.deliver(&tcp(1000, 10)).unwrap();
        let f = ring.receive().unwrap();
        assert_eq!(f.page(), 0);
        drop(f);
        drop(held);
        assert_eq!(ring.outstanding(), 0);
        // Only posted frags remain counted.
        assert_eq!(
            usize::from(ring.page_refs(0)) + usize::from(ring.page_refs(1)),
            ring.armed()
        );
    }

    #[test]
    fn exhaustion_device_drops_when_no_descriptor() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 256];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(256)).unwrap();
        let mut mac = SimMac::new(&ring);
        // Ring full: four frames completed, none reaped yet.
        for k in 0..4 {
            assert!(mac.can_accept());
            mac.deliver(&tcp(1 + k, 1)).unwrap();
        }
        assert!(!mac.can_accept());
        assert_eq!(mac.deliver(&tcp(9, 1)), Err(SimError::RingFull));
        assert_eq!(mac.stats().missed, 1);
        // Reaping the frames while holding them: no free buffer to re-arm with.
        let held: Vec<_> = core::iter::from_fn(|| ring.receive()).collect();
        assert_eq!(held.len(), 4);
        assert_eq!(ring.armed(), 0);
        assert!(!mac.can_accept());
        assert_eq!(mac.deliver(&tcp(9, 1)), Err(SimError::RingFull));
        assert!(ring.receive().is_none());
        // Returning one frame re-arms one descriptor, at the device's position.
        let mut held = held.into_iter();
        drop(held.next());
        assert!(mac.can_accept());
        mac.deliver(&tcp(9, 1)).unwrap();
        assert!(!mac.can_accept());
        drop(held);
        assert_eq!(ring.receive().map(|f| f.len()), Some(tcp(9, 1).len()));
        assert_eq!(ring.armed(), 4);
    }

    #[test]
    fn errors_are_dropped_and_recycled() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 128];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(128)).unwrap();
        let mut mac = SimMac::new(&ring);
        let good = tcp(1, 10);
        mac.deliver_corrupt(&good).unwrap();
        // Longer than the 128-byte buffer: truncated with the error bit.
        assert_eq!(mac.deliver(&tcp(2, 200)), Ok(128));
        mac.deliver(&good).unwrap();
        mac.deliver(&[0u8; 10]).unwrap(); // runt
        let f = ring.receive().unwrap();
        assert_eq!(&f[..], &good[..]);
        drop(f);
        assert!(ring.receive().is_none());
        let s = ring.stats();
        assert_eq!((s.frames, s.errors), (1, 3));
        assert_eq!(mac.stats().truncated, 1);
        assert_eq!(ring.armed(), 4);
        assert_eq!(ring.outstanding(), 0);
    }

    #[test]
    fn layout_errors() {
        let mut mem = vec![0u8; 4096];
        let mut st: RxRingStorage<4, 2> = RxRingStorage::new();
        let e = |r: Result<RxRing<'_>, LayoutError>| r.err();
        assert_eq!(
            e(RxRing::new(&mut st, &mut mem, BufferLayout::slots(10))),
            Some(LayoutError::FragSize(10))
        );
        let mut st: RxRingStorage<4, 2> = RxRingStorage::new();
        assert_eq!(
            e(RxRing::new(
                &mut st,
                &mut mem,
                BufferLayout::page_frags(1000, 2000)
            )),
            Some(LayoutError::PageSmallerThanFrag)
        );
        let mut st: RxRingStorage<4, 2> = RxRingStorage::new();
        assert_eq!(
            e(RxRing::new(&mut st, &mut mem, BufferLayout::slots(512))),
            Some(LayoutError::TooManyPages {
                pages: 8,
                capacity: 2
            })
        );
        let mut st: RxRingStorage<0, 2> = RxRingStorage::new();
        assert_eq!(
            e(RxRing::new(&mut st, &mut mem, BufferLayout::slots(512))),
            Some(LayoutError::NoDescriptors)
        );
    }

    #[test]
    fn dropping_the_ring_takes_descriptors_back() {
        let mut storage: RxRingStorage<4, 8> = RxRingStorage::new();
        let mut mem = vec![0u8; 8 * 256];
        {
            let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(256)).unwrap();
            assert_eq!(ring.armed(), 4);
        }
        // The storage can be reused: the new ring starts from a clean state.
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(256)).unwrap();
        assert!(ring.descriptors().iter().all(|d| d.is_owned_by_device()));
        drop(ring);
        assert!(storage_descs_idle(&storage));
    }

    fn storage_descs_idle<const D: usize, const P: usize>(s: &RxRingStorage<D, P>) -> bool {
        s.descriptors().iter().all(|d| !d.is_owned_by_device())
    }

    /// Collects the segments as contiguous frames; the frames go back to the ring afterwards.
    #[derive(Default)]
    struct Collect {
        frames: Vec<Vec<u8>>,
        sizes: Vec<u16>,
    }

    impl<'r> Sink<RxFrame<'r>> for Collect {
        fn segment(&mut self, segment: Segment<'_, RxFrame<'r>>) {
            let mut out = vec![0u8; segment.len()];
            segment.copy_to(&mut out).unwrap();
            self.sizes.push(segment.info().frames);
            self.frames.push(out);
        }
    }

    #[test]
    fn coalescer_holds_ring_frames_and_recycling_returns_them() {
        let mut storage: RxRingStorage<8, 8> = RxRingStorage::new();
        let mut mem = vec![0u8; 8 * 4096];
        let layout = BufferLayout::page_frags(4096, 2048);
        let ring = RxRing::new(&mut storage, &mut mem, layout).unwrap();
        let mut mac = SimMac::new(&ring);
        let mut engine: Engine<RxFrame<'_>, Sizes<4, 16>> = Engine::new(Config::lro());
        let mut stack = Collect::default();
        let mut seq = 1;
        for _burst in 0..5 {
            for _ in 0..6 {
                mac.deliver(&tcp(seq, 1000)).unwrap();
                seq += 1000;
            }
            while let Some(frame) = ring.receive() {
                let meta = frame.meta(0);
                engine.push(frame, &meta, &mut stack);
            }
            // Held in their ring buffers, not copied.
            assert_eq!(engine.held_frames(), 6);
            assert_eq!(ring.outstanding(), 6);
            engine.flush_all(&mut stack);
            // Consumed: every buffer is back.
            assert_eq!(ring.outstanding(), 0);
            assert_eq!(ring.armed(), 8);
        }
        assert_eq!(stack.sizes, vec![6; 5]);
        assert!(engine.stats().is_conserved());
        // The merged stream is the original payload.
        let payload: Vec<u8> = stack.frames.iter().flat_map(|f| f[54..].to_vec()).collect();
        let expected: Vec<u8> = (0..30)
            .flat_map(|k| tcp(1 + k * 1000, 1000)[54..].to_vec())
            .collect();
        assert_eq!(payload, expected);
        let s = ring.stats();
        assert_eq!(s.frames, 30);
        assert_eq!(s.returned, 30);
    }
}
