//! NXP ENET legacy buffer descriptors (i.MX RT 10xx, i.MX 6/7/8, Kinetis K6x; QEMU's
//! `imx.enet` on `mcimx6ul-evk`): eight bytes each, a 16-bit data length, a 16-bit flags word
//! with the E (empty) / R (ready) ownership bit and the W (wrap) bit the device follows back to
//! the start of the ring, and a 32-bit buffer address. Little-endian (the driver sets
//! `ECR[DBSWP]`).
//!
//! Receive: [`EnetRxDescriptor`], driven by the generic ring. Transmit: [`EnetTxDescriptor`]
//! and `TxDescRing`, a ring of fixed transmit buffers the CPU fills only while it owns their
//! descriptor (R clear).

use core::cell::{Cell, UnsafeCell};
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{fence, Ordering};

use super::sealed::{RawRx, Token};
use super::{Completion, RxDescriptorFormat};

/// Flag bits of ENET legacy buffer descriptors (the reference manuals' "Enhanced/legacy
/// buffer descriptor" tables; the same bits in QEMU's `hw/net/imx_fec.c`).
pub mod bits {
    /// Receive: empty, owned by the device (set by the driver, cleared by the MAC when it has
    /// written a frame).
    pub const RX_E: u16 = 1 << 15;
    /// Wrap: the last descriptor of the ring; the device continues at the ring's start.
    pub const W: u16 = 1 << 13;
    /// Last buffer of a frame (receive: set by the MAC; transmit: set by the driver).
    pub const L: u16 = 1 << 11;
    /// Receive: frame length violation (longer than `RCR[MAX_FL]`).
    pub const RX_LG: u16 = 1 << 5;
    /// Receive: non-octet-aligned frame.
    pub const RX_NO: u16 = 1 << 4;
    /// Receive: CRC error.
    pub const RX_CR: u16 = 1 << 2;
    /// Receive: FIFO overrun.
    pub const RX_OV: u16 = 1 << 1;
    /// Receive: frame truncated (longer than the truncation length).
    pub const RX_TR: u16 = 1 << 0;
    /// Receive: every error bit; a frame with any of them is dropped.
    pub const RX_ERRORS: u16 = RX_LG | RX_NO | RX_CR | RX_OV | RX_TR;
    /// Transmit: ready, owned by the device until it has sent the buffer.
    pub const TX_R: u16 = 1 << 15;
    /// Transmit: append the CRC.
    pub const TX_TC: u16 = 1 << 10;
    /// Bytes of CRC the MAC writes after a received frame (included in the data length).
    pub const FCS_LEN: usize = 4;
}

/// One ENET legacy buffer descriptor as the DMA engine sees it. All accesses are volatile.
#[repr(C, align(8))]
struct Raw {
    /// Data length (written by the MAC on receive, by the driver on transmit).
    length: UnsafeCell<u16>,
    /// Flags: ownership, wrap, last, status.
    flags: UnsafeCell<u16>,
    /// Buffer address.
    buffer: UnsafeCell<u32>,
}

impl Raw {
    const fn new() -> Self {
        Self {
            length: UnsafeCell::new(0),
            flags: UnsafeCell::new(0),
            buffer: UnsafeCell::new(0),
        }
    }

    #[inline(always)]
    fn length(&self) -> u16 {
        // SAFETY: a valid, aligned field of `self`, read through the `UnsafeCell` pointer with a
        // volatile load (the device may write it at any time); no reference to it is created.
        unsafe { self.length.get().read_volatile() }
    }

    #[inline(always)]
    fn set_length(&self, v: u16) {
        // SAFETY: as in `length`, a volatile store through the `UnsafeCell` pointer.
        unsafe { self.length.get().write_volatile(v) }
    }

    #[inline(always)]
    fn flags(&self) -> u16 {
        // SAFETY: as in `length`.
        unsafe { self.flags.get().read_volatile() }
    }

    #[inline(always)]
    fn set_flags(&self, v: u16) {
        // SAFETY: as in `set_length`.
        unsafe { self.flags.get().write_volatile(v) }
    }

    #[inline(always)]
    fn buffer(&self) -> u32 {
        // SAFETY: as in `length`.
        unsafe { self.buffer.get().read_volatile() }
    }

    #[inline(always)]
    fn set_buffer(&self, v: u32) {
        // SAFETY: as in `set_length`.
        unsafe { self.buffer.get().write_volatile(v) }
    }
}

/// An ENET receive buffer descriptor (legacy format, 8 bytes), in memory the MAC reads and
/// writes by DMA. The ring base address register (`RDSR`) points at an array of them.
#[repr(transparent)]
pub struct EnetRxDescriptor(Raw);

impl EnetRxDescriptor {
    /// A descriptor owned by the CPU, with no buffer.
    pub const fn new() -> Self {
        Self(Raw::new())
    }

    /// The flags word ([`bits`]).
    pub fn flags(&self) -> u16 {
        self.0.flags()
    }

    /// The data length the MAC wrote (frame and FCS).
    pub fn length(&self) -> u16 {
        self.0.length()
    }

    /// The buffer address the driver programmed.
    pub fn buffer_addr(&self) -> u32 {
        self.0.buffer()
    }
}

impl Default for EnetRxDescriptor {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for EnetRxDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EnetRxDescriptor")
            .field("flags", &format_args!("{:#06x}", self.flags()))
            .field("length", &self.length())
            .field("buffer", &format_args!("{:#010x}", self.buffer_addr()))
            .finish()
    }
}

impl RxDescriptorFormat for EnetRxDescriptor {}

impl RawRx for EnetRxDescriptor {
    const EMPTY: Self = Self::new();
    /// `MRBR` holds at most 0x3ff0 bytes.
    const MAX_BUFFER: usize = 0x3ff0;
    /// `MRBR` counts in 16-byte units; buffer addresses 16-byte aligned (i.MX 6 and RT
    /// reference manuals).
    const BUFFER_ALIGN: usize = 16;
    const TRAILER: usize = bits::FCS_LEN;

    fn arm(&self, addr: u64, _size: usize, wrap: bool, _: Token) {
        // The buffer size is the MAC's `MRBR`, not per descriptor; the address is 32 bits
        // (`Enet::new` checks that the ring's memory lies below 4 GiB before the MAC sees it).
        self.0.set_buffer(addr as u32);
        self.0.set_length(0);
        // Release: the buffer address and the CPU's last accesses to the buffer happen before
        // the MAC can see E.
        fence(Ordering::Release);
        self.0
            .set_flags(bits::RX_E | if wrap { bits::W } else { 0 });
    }

    fn completed(&self) -> Option<Completion> {
        let flags = self.0.flags();
        if flags & bits::RX_E != 0 {
            return None;
        }
        // Acquire: length and frame bytes are read after E was seen clear.
        fence(Ordering::Acquire);
        let length = self.0.length();
        let good = flags & bits::L != 0
            && flags & bits::RX_ERRORS == 0
            && usize::from(length) >= bits::FCS_LEN;
        Some(Completion {
            status: u32::from(flags) | u32::from(length) << 16,
            len: length.saturating_sub(bits::FCS_LEN as u16),
            good,
            last: flags & bits::L != 0,
            first: None,
            extra: [0; 2],
        })
    }

    fn disarm(&self, wrap: bool, _: Token) {
        self.0.set_flags(if wrap { bits::W } else { 0 });
        fence(Ordering::Acquire);
    }

    fn owned_by_device(&self) -> bool {
        self.0.flags() & bits::RX_E != 0
    }
}

/// An ENET transmit buffer descriptor (legacy format, 8 bytes). The ring base address register
/// (`TDSR`) points at an array of them.
#[repr(transparent)]
pub struct EnetTxDescriptor(Raw);

impl EnetTxDescriptor {
    /// A descriptor owned by the CPU, with no buffer.
    pub const fn new() -> Self {
        Self(Raw::new())
    }

    /// The flags word ([`bits`]).
    pub fn flags(&self) -> u16 {
        self.0.flags()
    }

    /// Whether the MAC still owns the descriptor (R set: not sent yet).
    pub fn is_ready(&self) -> bool {
        self.flags() & bits::TX_R != 0
    }
}

impl Default for EnetTxDescriptor {
    fn default() -> Self {
        Self::new()
    }
}

impl core::fmt::Debug for EnetTxDescriptor {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EnetTxDescriptor")
            .field("flags", &format_args!("{:#06x}", self.flags()))
            .field("length", &self.0.length())
            .field("buffer", &format_args!("{:#010x}", self.0.buffer()))
            .finish()
    }
}

/// Why a transmit ring could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxLayoutError {
    /// Buffer size not a multiple of 16, or zero, or no descriptors.
    BufferSize,
    /// Fewer bytes of memory than descriptors times the buffer size.
    TooLittleMemory,
    /// The memory is not 16-byte aligned.
    Misaligned,
}

/// A transmit ring: descriptor `i` always points at buffer `i` of the caller's memory. The CPU
/// writes a buffer only while it owns the descriptor (R clear, seen before a fence(Acquire));
/// the MAC reads it only while R is set.
pub(crate) struct TxDescRing<'a> {
    hw: &'a [EnetTxDescriptor],
    base: NonNull<u8>,
    buf_size: usize,
    next: Cell<usize>,
    _mem: PhantomData<&'a mut [u8]>,
}

impl<'a> TxDescRing<'a> {
    /// Cuts `mem` into one buffer of `buf_size` bytes per descriptor and points each
    /// descriptor at its buffer, owned by the CPU.
    pub(crate) fn new(
        hw: &'a [EnetTxDescriptor],
        mem: &'a mut [u8],
        buf_size: usize,
    ) -> Result<Self, TxLayoutError> {
        if hw.is_empty()
            || buf_size == 0
            || !buf_size.is_multiple_of(16)
            || buf_size > usize::from(u16::MAX)
        {
            return Err(TxLayoutError::BufferSize);
        }
        let need = hw
            .len()
            .checked_mul(buf_size)
            .ok_or(TxLayoutError::TooLittleMemory)?;
        if mem.len() < need {
            return Err(TxLayoutError::TooLittleMemory);
        }
        let start = mem.as_ptr().addr();
        if !start.is_multiple_of(16) {
            return Err(TxLayoutError::Misaligned);
        }
        let last = hw.len() - 1;
        for (i, d) in hw.iter().enumerate() {
            d.0.set_buffer((start + i * buf_size) as u32);
            d.0.set_length(0);
            d.0.set_flags(if i == last { bits::W } else { 0 });
        }
        fence(Ordering::Release);
        Ok(Self {
            hw,
            base: NonNull::from(&mut *mem).cast(),
            buf_size,
            next: Cell::new(0),
            _mem: PhantomData,
        })
    }

    /// The descriptors (for `TDSR`).
    pub(crate) fn hw(&self) -> &'a [EnetTxDescriptor] {
        self.hw
    }

    /// Bytes per transmit buffer.
    pub(crate) fn buf_size(&self) -> usize {
        self.buf_size
    }

    /// Whether the next descriptor is the CPU's (a frame can be queued now).
    pub(crate) fn has_room(&self) -> bool {
        !self.hw[self.next.get()].is_ready()
    }

    /// Fills the next free buffer with `len` bytes written by `f` and gives it to the MAC
    /// (R, L, TC; W on the last descriptor). `None`, without calling `f`, when the MAC still
    /// owns the next descriptor or `len` exceeds the buffer. The caller then writes `TDAR`.
    pub(crate) fn send<R>(&mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        let i = self.next.get();
        let d = &self.hw[i];
        if d.is_ready() || len > self.buf_size {
            return None;
        }
        // Acquire: the MAC's reads of the buffer (before it cleared R) happen before we write.
        fence(Ordering::Acquire);
        let ptr = self.base.as_ptr().wrapping_add(i * self.buf_size);
        // SAFETY: buffer `i` is `buf_size` bytes inside the memory this ring borrows uniquely
        // for 'a (`new` checked `hw.len() * buf_size <= mem.len()`). The MAC reads it only while
        // descriptor `i` has R set, and R was seen clear before the Acquire fence above; `&mut
        // self` makes this the only reference into the transmit memory for the call, and
        // buffers of different descriptors do not overlap.
        let buf = unsafe { core::slice::from_raw_parts_mut(ptr, len) };
        let r = f(buf);
        d.0.set_length(len as u16);
        // Release: the frame bytes and the length are visible before R.
        fence(Ordering::Release);
        let wrap = if i + 1 == self.hw.len() { bits::W } else { 0 };
        d.0.set_flags(bits::TX_R | bits::L | bits::TX_TC | wrap);
        self.next.set((i + 1) % self.hw.len());
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn rx_descriptor_codec() {
        let d = EnetRxDescriptor::new();
        d.arm(0x8010_0040, 1536, true, Token(()));
        assert!(d.owned_by_device());
        assert_eq!(d.flags(), bits::RX_E | bits::W);
        assert_eq!(d.buffer_addr(), 0x8010_0040);
        assert_eq!(d.completed(), None);
        // The MAC writes a 60-byte frame plus its FCS and clears E (keeping W).
        d.0.set_length(64);
        d.0.set_flags(bits::W | bits::L);
        let c = d.completed().unwrap();
        assert_eq!((c.len, c.good), (60, true));
        assert_eq!(EnetRxDescriptor::checksum(&c), None);
        // Error bits and a frame spanning descriptors (L clear) are not good.
        for flags in [
            bits::L | bits::RX_CR,
            bits::L | bits::RX_TR,
            bits::L | bits::RX_LG,
            0,
        ] {
            d.0.set_flags(flags);
            assert!(!d.completed().unwrap().good, "flags {flags:#06x}");
        }
        // A length shorter than the FCS cannot be a frame.
        d.0.set_flags(bits::L);
        d.0.set_length(3);
        assert!(!d.completed().unwrap().good);
        d.disarm(false, Token(()));
        assert_eq!(d.flags(), 0);
        assert!(!d.owned_by_device());
        // The last descriptor keeps W when disarmed, as when armed.
        d.arm(0x8010_0040, 1536, true, Token(()));
        d.disarm(true, Token(()));
        assert_eq!(d.flags(), bits::W);
    }

    /// The receive side of an ENET as QEMU's `imx_fec.c` and the reference manuals describe
    /// it: takes the descriptor it points at if E is set, writes the frame and its FCS, clears
    /// E, sets L, and moves to the next descriptor or, after one with W, to the first.
    struct EnetModel {
        next: usize,
    }

    impl EnetModel {
        fn deliver(&mut self, ring: &crate::RxRing<'_, EnetRxDescriptor>, frame: &[u8]) -> bool {
            let desc = ring.desc();
            let d = &desc.hw[self.next];
            if d.flags() & bits::RX_E == 0 {
                return false;
            }
            fence(Ordering::Acquire);
            let parked = desc.slots[self.next].0.take();
            let dst = parked.as_ref().map(|f| f.ptr.as_ptr());
            // The device writes where the descriptor points: the parked fragment's address.
            assert_eq!(dst.map(|p| p.addr() as u32), Some(d.buffer_addr()));
            desc.slots[self.next].0.set(parked);
            let n = frame.len() + bits::FCS_LEN;
            assert!(n <= ring.layout().frag_size, "frame larger than MRBR");
            // SAFETY: `dst` is the fragment parked in this descriptor while E is set (checked
            // above, before the Acquire fence): by invariant 3 no CPU reference to it exists,
            // and `n` bytes fit the fragment. `frame` is a distinct allocation.
            unsafe {
                core::ptr::copy_nonoverlapping(frame.as_ptr(), dst.unwrap(), frame.len());
                dst.unwrap()
                    .add(frame.len())
                    .write_bytes(0xfc, bits::FCS_LEN);
            }
            d.0.set_length(n as u16);
            fence(Ordering::Release);
            let wrap = d.flags() & bits::W;
            d.0.set_flags(wrap | bits::L);
            self.next = if wrap != 0 { 0 } else { self.next + 1 };
            true
        }
    }

    impl EnetModel {
        /// QEMU's `imx_fec_receive` with a frame longer than `MRBR`: the frame and its FCS
        /// spread over consecutive descriptors, each with the length of what it holds (the
        /// last one too, unlike the reference manual's whole-frame length), L on the last.
        fn deliver_split(&mut self, ring: &crate::RxRing<'_, EnetRxDescriptor>, frame: &[u8]) {
            let desc = ring.desc();
            let mut data = frame.to_vec();
            data.extend_from_slice(&[0xfc; bits::FCS_LEN]);
            let chunks: std::vec::Vec<&[u8]> = data.chunks(ring.layout().frag_size).collect();
            for (k, chunk) in chunks.iter().enumerate() {
                let d = &desc.hw[self.next];
                assert_ne!(d.flags() & bits::RX_E, 0, "no empty descriptor");
                fence(Ordering::Acquire);
                let parked = desc.slots[self.next].0.take();
                let dst = parked.as_ref().map(|f| f.ptr.as_ptr()).unwrap();
                assert_eq!(dst.addr() as u32, d.buffer_addr());
                desc.slots[self.next].0.set(parked);
                // SAFETY: as in `deliver`; `chunk` is at most a fragment long.
                unsafe { core::ptr::copy_nonoverlapping(chunk.as_ptr(), dst, chunk.len()) };
                d.0.set_length(chunk.len() as u16);
                fence(Ordering::Release);
                let wrap = d.flags() & bits::W;
                let last = if k + 1 == chunks.len() { bits::L } else { 0 };
                d.0.set_flags(wrap | last);
                self.next = if wrap != 0 { 0 } else { self.next + 1 };
            }
        }
    }

    #[test]
    fn the_tail_of_a_frame_spanning_descriptors_is_not_a_frame() {
        extern crate std;
        use std::vec::Vec;

        use crate::test_frames::tcp;
        use crate::{BufferLayout, RxRing, RxRingStorage};

        #[repr(align(64))]
        struct Mem([u8; 8 * 256]);
        let mut storage: RxRingStorage<4, 8, EnetRxDescriptor> = RxRingStorage::new();
        let mut mem = std::boxed::Box::new(Mem([0; 8 * 256]));
        let ring = RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(256)).unwrap();
        let mut mac = EnetModel { next: 0 };
        // 400 bytes and the FCS in 256-byte buffers: the last descriptor holds 148 bytes, L
        // set and no error bit. Its 144 bytes are the middle of the frame, not a frame.
        let long = tcp(1, 346);
        mac.deliver_split(&ring, &long);
        assert!(ring.receive().is_none());
        assert_eq!(ring.stats().frames, 0);
        assert_eq!(ring.stats().errors, 2);
        // Both buffers reposted; the next frames (across the wrap) are received whole.
        assert_eq!(ring.armed(), 4);
        let frames: Vec<Vec<u8>> = (0..3).map(|k| tcp(400 + k * 100, 100)).collect();
        for f in &frames {
            assert!(mac.deliver(&ring, f));
        }
        for f in &frames {
            assert_eq!(&ring.receive().unwrap()[..], &f[..]);
        }
        assert!(ring.receive().is_none());
        assert_eq!(ring.stats().frames, 3);
    }

    #[test]
    fn a_length_beyond_the_buffer_is_an_error() {
        use crate::test_frames::tcp;
        use crate::{BufferLayout, RxRing, RxRingStorage};

        #[repr(align(64))]
        struct Mem([u8; 4 * 256]);
        let mut storage: RxRingStorage<4, 4, EnetRxDescriptor> = RxRingStorage::new();
        let mut mem = std::boxed::Box::new(Mem([0; 4 * 256]));
        let ring = RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(256)).unwrap();
        let mut mac = EnetModel { next: 0 };
        // 252 bytes and the FCS fill a 256-byte buffer exactly.
        let exact = tcp(1, 252 - 54);
        assert_eq!(exact.len(), 252);
        assert!(mac.deliver(&ring, &exact));
        assert_eq!(&ring.receive().unwrap()[..], &exact[..]);
        // A length 1 to 4 bytes beyond the buffer (an ENET spreads a longer frame over
        // descriptors, so only a broken or hostile device says so): the frame would end past
        // what the device could write. Dropped as an error, the buffer reposted.
        for extra in 1..=4u16 {
            let i = mac.next;
            assert!(mac.deliver(&ring, &exact));
            ring.desc().hw[i].0.set_length(256 + extra);
            assert!(ring.receive().is_none(), "length 256 + {extra}");
            assert_eq!(ring.stats().errors, u64::from(extra));
            assert_eq!(ring.armed(), 4);
        }
        assert!(mac.deliver(&ring, &exact));
        assert_eq!(&ring.receive().unwrap()[..], &exact[..]);
    }

    #[test]
    fn generic_ring_drives_enet_descriptors() {
        extern crate std;
        use std::vec::Vec;

        use crate::test_frames::tcp;
        use crate::{BufferLayout, RxRing, RxRingStorage};

        #[repr(align(64))]
        struct Mem([u8; 6 * 1536]);
        let mut storage: RxRingStorage<4, 6, EnetRxDescriptor> = RxRingStorage::new();
        let mut mem = std::boxed::Box::new(Mem([0; 6 * 1536]));
        let ring = RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(1536)).unwrap();
        let descs = ring.descriptors();
        // Armed, W on the last descriptor only.
        let wraps: Vec<bool> = descs.iter().map(|d| d.flags() & bits::W != 0).collect();
        assert_eq!(wraps, [false, false, false, true]);
        assert!(descs.iter().all(|d| d.flags() & bits::RX_E != 0));
        let mut mac = EnetModel { next: 0 };
        // Five laps in bursts of three: the model follows W back to the start, and the frames
        // come out in order without their FCS, W kept on the last descriptor when re-armed.
        let mut seq = 1;
        for _ in 0..7 {
            let sent: Vec<Vec<u8>> = (0..3).map(|i| tcp(seq + i * 100, 100)).collect();
            for f in &sent {
                assert!(mac.deliver(&ring, f));
            }
            for f in &sent {
                let got = ring.receive().unwrap();
                assert_eq!(&got[..], &f[..]);
                assert_eq!(got.hardware_checksum(), None);
                assert_eq!(got.meta(0).checksum, lro_core::RxChecksum::None);
            }
            assert!(ring.receive().is_none());
            seq += 300;
        }
        assert_eq!(descs[3].flags() & bits::W, bits::W);
        // A frame with a CRC error is dropped and its buffer reposted.
        let d = &descs[mac.next];
        assert!(mac.deliver(&ring, &tcp(seq, 10)));
        d.0.set_flags(d.flags() | bits::RX_CR);
        assert!(ring.receive().is_none());
        assert_eq!(ring.stats().errors, 1);
        assert_eq!(ring.stats().frames, 21);
        assert_eq!(ring.armed(), 4);
    }

    #[test]
    fn enet_ring_rejects_misaligned_memory_and_oversized_buffers() {
        use crate::{BufferLayout, LayoutError, RxRing, RxRingStorage};

        #[repr(align(64))]
        struct Mem([u8; 4 * 2048 + 16]);
        let mut storage: RxRingStorage<2, 4, EnetRxDescriptor> = RxRingStorage::new();
        let mut mem = Mem([0; 4 * 2048 + 16]);
        assert_eq!(
            RxRing::new(&mut storage, &mut mem.0[8..], BufferLayout::slots(2048)).err(),
            Some(LayoutError::Misaligned { align: 16 })
        );
        assert_eq!(
            RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(1530)).err(),
            Some(LayoutError::Misaligned { align: 16 })
        );
        assert_eq!(
            RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(0x4000)).err(),
            Some(LayoutError::FragSize(0x4000))
        );
        assert!(RxRing::new(&mut storage, &mut mem.0, BufferLayout::slots(2048)).is_ok());
    }

    #[test]
    fn tx_ring_rejects_bad_layouts() {
        #[repr(align(16))]
        struct Mem([u8; 2 * 64 + 16]);
        let hw = [const { EnetTxDescriptor::new() }; 2];
        let mut mem = Mem([0; 2 * 64 + 16]);
        // Zero, not a multiple of 16 (the MAC's buffer alignment), beyond a 16-bit length.
        for size in [0, 40, 0x1_0000] {
            assert_eq!(
                TxDescRing::new(&hw, &mut mem.0, size).err(),
                Some(TxLayoutError::BufferSize),
                "buffer size {size}"
            );
        }
        assert_eq!(
            TxDescRing::new(&[], &mut mem.0, 64).err(),
            Some(TxLayoutError::BufferSize)
        );
        assert_eq!(
            TxDescRing::new(&hw, &mut mem.0[..127], 64).err(),
            Some(TxLayoutError::TooLittleMemory)
        );
        assert_eq!(
            TxDescRing::new(&hw, &mut mem.0[8..], 64).err(),
            Some(TxLayoutError::Misaligned)
        );
        assert!(TxDescRing::new(&hw, &mut mem.0[16..], 64).is_ok());
    }

    #[test]
    fn tx_ring_fills_in_order_and_waits_for_the_mac() {
        #[repr(align(16))]
        struct Mem([u8; 3 * 64]);
        let hw = [const { EnetTxDescriptor::new() }; 3];
        let mut mem = Mem([0; 3 * 64]);
        let mut ring = TxDescRing::new(&hw, &mut mem.0, 64).unwrap();
        assert_eq!(hw[2].flags(), bits::W);
        for i in 0..3u8 {
            assert!(ring.has_room());
            assert_eq!(ring.send(10, |b| b.fill(i + 1)), Some(()));
            let f = hw[usize::from(i)].flags();
            assert_eq!(
                f & (bits::TX_R | bits::L | bits::TX_TC),
                bits::TX_R | bits::L | bits::TX_TC
            );
            // W stays on the last descriptor, or the MAC runs past the ring.
            assert_eq!(f & bits::W != 0, i == 2, "W on descriptor {i}");
        }
        // All three with the MAC: nothing more until it has sent one.
        assert!(!ring.has_room());
        assert_eq!(ring.send(10, |_| unreachable!()), None);
        // The MAC sends descriptor 0 (clears R): its buffer is reused with the next frame.
        hw[0].0.set_flags(hw[0].flags() & !bits::TX_R);
        assert_eq!(ring.send(65, |_| ()), None, "larger than a buffer");
        assert_eq!(ring.send(4, |b| b.copy_from_slice(b"next")), Some(()));
        assert_eq!(&mem.0[..4], b"next");
        assert_eq!(&mem.0[64..74], &[2; 10]);
    }
}
