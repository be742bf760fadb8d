//! The model MAC's receive descriptor ([`RxDescriptor`]): eight 32-bit words with an OWN bit,
//! the frame length, a CHECKSUM_COMPLETE sum, an RSS hash and a stripped VLAN tag, the
//! device side of which [`crate::sim::SimMac`] plays.

use core::cell::UnsafeCell;
use core::sync::atomic::{fence, Ordering};

use super::sealed::{RawRx, Token};
#[cfg(feature = "test-utils")]
use super::DescRing;
use super::{Completion, RxDescriptorFormat};

/// Bits of the status word (word 0) of a receive descriptor.
///
/// The layout is this crate's model MAC (close to the Synopsys/STM32 "enhanced" RDES0 and to
/// Myri10GE's receive-done slot, which reports a length and a CHECKSUM_COMPLETE sum): words are
/// in the CPU's byte order, as on a little-endian microcontroller.
pub mod bits {
    /// Owned by the device: set by the driver to give the descriptor to the MAC, cleared by the
    /// MAC when it has written a frame.
    pub const OWN: u32 = 1 << 31;
    /// Error summary: the frame is bad (CRC, overrun, or longer than the buffer) and must be
    /// dropped.
    pub const ES: u32 = 1 << 30;
    /// First descriptor of a frame.
    pub const FS: u32 = 1 << 29;
    /// Last descriptor of a frame. A frame with both `FS` and `LS` fits in one buffer; this
    /// driver drops frames that span descriptors (configure buffers of at least the MTU).
    pub const LS: u32 = 1 << 28;
    /// Checksum valid: the checksum word holds the ones'-complement sum of every byte after the
    /// 14-byte Ethernet header (Linux CHECKSUM_COMPLETE, what Myri10GE firmware reports).
    pub const CSV: u32 = 1 << 27;
    /// RSS hash valid: the hash word holds the NIC's receive-side-scaling hash.
    pub const RHV: u32 = 1 << 26;
    /// VLAN tag stripped: the upper half of the checksum word holds the TCI.
    pub const VLV: u32 = 1 << 25;
    /// RSS hash type shift (`RHT_MASK`): 0 opaque, 1 IPv4, 2 TCP/IPv4, 3 IPv6, 4 TCP/IPv6.
    pub const RHT_SHIFT: u32 = 20;
    /// RSS hash type mask (after shifting by `RHT_SHIFT`).
    pub const RHT_MASK: u32 = 0x7;
    /// Frame length mask: bytes the MAC wrote into the buffer (FCS stripped).
    pub const FL_MASK: u32 = 0xffff;
    /// Buffer size mask of the control word (word 1), written by the driver.
    pub const RBS_MASK: u32 = 0xffff;
}

/// Word indices inside a descriptor.
mod word {
    /// Status: OWN, flags, frame length (device writes; driver sets OWN).
    pub(super) const STATUS: usize = 0;
    /// Control: buffer size (driver writes).
    pub(super) const CONTROL: usize = 1;
    /// Buffer address, low 32 bits (driver writes).
    pub(super) const ADDR_LO: usize = 2;
    /// Buffer address, high 32 bits (driver writes; zero on a 32-bit MCU).
    pub(super) const ADDR_HI: usize = 3;
    /// CHECKSUM_COMPLETE sum (low half) and stripped VLAN TCI (high half) (device writes).
    pub(super) const CSUM_VLAN: usize = 4;
    /// RSS hash (device writes).
    pub(super) const HASH: usize = 5;
}

/// One receive descriptor as the MAC sees it: eight 32-bit words, 32-byte aligned, in memory the
/// device reads and writes by DMA. All accesses are volatile.
///
/// Descriptors live in caller-provided memory (see [`RxRingStorage`](crate::RxRingStorage));
/// the driver is the only code that writes them, through the ring.
#[repr(C, align(32))]
pub struct RxDescriptor {
    words: [UnsafeCell<u32>; 8],
}

impl RxDescriptor {
    /// A descriptor owned by the CPU, with no buffer.
    pub const fn new() -> Self {
        Self {
            words: [const { UnsafeCell::new(0) }; 8],
        }
    }

    #[inline(always)]
    fn read(&self, w: usize) -> u32 {
        // SAFETY: the pointer comes from an `UnsafeCell` inside `self`, so it is valid, aligned
        // and may be accessed while `self` is shared; no reference to the word is ever created,
        // only volatile accesses, because the device may write it at any time.
        unsafe { self.words[w].get().read_volatile() }
    }

    #[inline(always)]
    fn write(&self, w: usize, value: u32) {
        // SAFETY: as in `read`: a valid, aligned word inside `self`, written through the
        // `UnsafeCell` pointer with a volatile store and never referenced.
        unsafe { self.words[w].get().write_volatile(value) }
    }

    /// The status word (word 0): [`bits::OWN`], flags and the frame length.
    #[inline]
    pub fn status(&self) -> u32 {
        self.read(word::STATUS)
    }

    /// Whether the device owns the descriptor (the OWN bit).
    #[inline]
    pub fn is_owned_by_device(&self) -> bool {
        self.status() & bits::OWN != 0
    }

    /// The buffer address the driver programmed (zero when none).
    #[inline]
    pub fn buffer_addr(&self) -> u64 {
        (u64::from(self.read(word::ADDR_HI)) << 32) | u64::from(self.read(word::ADDR_LO))
    }

    /// The buffer size the driver programmed.
    #[inline]
    pub fn buffer_size(&self) -> usize {
        (self.read(word::CONTROL) & bits::RBS_MASK) as usize
    }
}

impl Default for RxDescriptor {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for RxDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxDescriptor")
            .field("status", &format_args!("{:#010x}", self.status()))
            .field("buffer_addr", &format_args!("{:#x}", self.buffer_addr()))
            .field("buffer_size", &self.buffer_size())
            .finish()
    }
}

impl RxDescriptorFormat for RxDescriptor {}

impl RawRx for RxDescriptor {
    const EMPTY: Self = Self::new();
    const MAX_BUFFER: usize = bits::RBS_MASK as usize;
    const BUFFER_ALIGN: usize = 1;
    const TRAILER: usize = 0;

    fn arm(&self, addr: u64, size: usize, _wrap: bool, _: Token) {
        self.write(word::ADDR_LO, addr as u32);
        self.write(word::ADDR_HI, (addr >> 32) as u32);
        self.write(word::CONTROL, size as u32 & bits::RBS_MASK);
        self.write(word::CSUM_VLAN, 0);
        self.write(word::HASH, 0);
        // Release: the address, size and the CPU's last accesses to the buffer happen before
        // the device can see OWN (stm32-eth `set_owned`, embassy "fence before tail pointer").
        fence(Ordering::Release);
        self.write(word::STATUS, bits::OWN);
    }

    fn completed(&self) -> Option<Completion> {
        let status = self.status();
        if status & bits::OWN != 0 {
            return None;
        }
        // Acquire: the length, status words and frame bytes are read after OWN was seen clear.
        fence(Ordering::Acquire);
        Some(Completion {
            status,
            len: (status & bits::FL_MASK) as u16,
            good: status & (bits::FS | bits::LS | bits::ES) == bits::FS | bits::LS,
            last: status & bits::LS != 0,
            first: Some(status & bits::FS != 0),
            extra: [self.read(word::CSUM_VLAN), self.read(word::HASH)],
        })
    }

    fn disarm(&self, _wrap: bool, _: Token) {
        self.write(word::STATUS, 0);
        fence(Ordering::Acquire);
    }

    fn owned_by_device(&self) -> bool {
        self.is_owned_by_device()
    }

    fn checksum(done: &Completion) -> Option<u16> {
        (done.status & bits::CSV != 0).then_some(done.extra[0] as u16)
    }

    fn rss(done: &Completion) -> Option<lro_core::RssHash> {
        (done.status & bits::RHV != 0).then(|| {
            super::rss_hash(
                done.extra[1],
                (done.status >> bits::RHT_SHIFT) & bits::RHT_MASK,
            )
        })
    }

    fn vlan(done: &Completion) -> Option<u16> {
        (done.status & bits::VLV != 0).then_some((done.extra[0] >> 16) as u16)
    }
}

/// What the device side writes for one frame (the simulator's view of a completion).
#[cfg(feature = "test-utils")]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DeviceWrite {
    /// Extra status flags (`ES`, `CSV`, `RHV`, `VLV`, hash type); `FS`, `LS` and the length
    /// are added.
    pub(crate) flags: u32,
    /// Checksum (low half) and VLAN TCI (high half).
    pub(crate) csum_vlan: u32,
    /// RSS hash.
    pub(crate) hash: u32,
}

/// Why the device could not take a frame.
#[cfg(feature = "test-utils")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceRefused {
    /// The descriptor is not owned by the device (ring full / starved).
    NotOwned,
    /// The descriptor's buffer is not the one the driver parked (a driver bug).
    BadDescriptor,
}

#[cfg(feature = "test-utils")]
impl DescRing<'_, RxDescriptor> {
    /// Plays the MAC for descriptor `i`: if the device owns it, writes `frame` into its buffer
    /// by "DMA" (truncated to the buffer, with [`bits::ES`] set, when longer), then the status
    /// words, and gives it back to the CPU. Returns the bytes written.
    pub(crate) fn device_write(
        &self,
        i: usize,
        frame: &[u8],
        mut w: DeviceWrite,
    ) -> Result<usize, DeviceRefused> {
        let d = &self.hw[i];
        if d.status() & bits::OWN == 0 {
            return Err(DeviceRefused::NotOwned);
        }
        // Acquire: the buffer address and size are read after OWN was seen set.
        fence(Ordering::Acquire);
        let size = d.buffer_size();
        let n = frame.len().min(size).min(bits::FL_MASK as usize);
        if n < frame.len() {
            w.flags |= bits::ES;
        }
        // A real MAC writes to the address in the descriptor. The simulator checks that the
        // driver programmed the address of the fragment parked in slot `i`, then writes through
        // that token's pointer (which carries the memory's provenance).
        let addr = d.buffer_addr();
        let parked = self.slots[i].0.take();
        let dst = parked
            .as_ref()
            .filter(|f| f.ptr.as_ptr().addr() as u64 == addr && size <= self.frag_size)
            .map(|f| f.ptr.as_ptr());
        self.slots[i].0.set(parked);
        let Some(dst) = dst else {
            return Err(DeviceRefused::BadDescriptor);
        };
        // SAFETY: `dst` is the fragment whose token `post` parked in slot `i` (checked above
        // against the descriptor's address), and the device owns descriptor `i` (OWN set,
        // read before the Acquire fence): by invariant 3 no CPU reference to that fragment
        // exists while its token is parked. The ring that owns the pool, and so the memory,
        // outlives `self`. `n <= size <= frag_size` keeps the copy inside the fragment, and
        // `frame` is a distinct shared borrow, so the ranges do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(frame.as_ptr(), dst, n) };
        d.write(word::CSUM_VLAN, w.csum_vlan);
        d.write(word::HASH, w.hash);
        // Release: the frame bytes and the other words are visible before OWN clears.
        fence(Ordering::Release);
        d.write(
            word::STATUS,
            (w.flags & !bits::OWN & !bits::FL_MASK) | bits::FS | bits::LS | n as u32,
        );
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;

    use super::*;
    use crate::sim::SimMac;
    use crate::test_frames::tcp;
    use crate::{BufferLayout, RxRing, RxRingStorage};

    /// A device that abandons a frame after its first descriptor (it found no free one for
    /// the rest) leaves a descriptor with `FS` and no `LS`; the next frame's descriptor says
    /// `FS` again: it is a frame of its own, not the rest of the abandoned one.
    #[test]
    fn a_frame_after_an_abandoned_one_is_received() {
        let mut storage: RxRingStorage<4, 4> = RxRingStorage::new();
        let mut mem = vec![0u8; 4 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let mut mac = SimMac::new(&ring);
        let (abandoned, good) = (tcp(1, 1000), tcp(1001, 100));
        mac.deliver(&abandoned).unwrap();
        // The first piece only: `LS` cleared, as the device leaves it when it gives up.
        let d = &ring.descriptors()[0];
        d.write(word::STATUS, d.status() & !bits::LS);
        mac.deliver(&good).unwrap();
        assert_eq!(&ring.receive().expect("the good frame")[..], &good[..]);
        assert_eq!(ring.stats().errors, 1, "the abandoned piece only");
        assert!(ring.receive().is_none());
    }

    /// The checksum, VLAN tag and RSS hash words count only when their valid bits say so, and
    /// every hash type code reads back as its type.
    #[test]
    fn status_words_count_only_with_their_valid_bits() {
        use lro_core::{RssHash, RssType};
        let mut storage: RxRingStorage<2, 2> = RxRingStorage::new();
        let mut mem = vec![0u8; 2 * 2048];
        let ring = RxRing::new(&mut storage, &mut mem, BufferLayout::slots(2048)).unwrap();
        let f = tcp(1, 100);
        let words = |flags| DeviceWrite {
            flags,
            csum_vlan: 0x0123_abcd,
            hash: 0x5eed_1234,
        };
        let mut next = 0;
        let mut receive = |w: DeviceWrite| {
            ring.desc().device_write(next, &f, w).unwrap();
            next = (next + 1) % ring.capacity();
            let frame = ring.receive().unwrap();
            (
                frame.hardware_checksum(),
                frame.vlan_stripped(),
                frame.rss_hash(),
            )
        };
        assert_eq!(receive(words(0)), (None, None, None), "no valid bit");
        let kinds = [
            RssType::Opaque,
            RssType::Ipv4,
            RssType::TcpIpv4,
            RssType::Ipv6,
            RssType::TcpIpv6,
        ];
        for (code, kind) in (0u32..).zip(kinds) {
            let all = bits::CSV | bits::VLV | bits::RHV | code << bits::RHT_SHIFT;
            let value = 0x5eed_1234;
            assert_eq!(
                receive(words(all)),
                (Some(0xabcd), Some(0x0123), Some(RssHash { value, kind })),
                "hash type code {code}"
            );
        }
    }
}
