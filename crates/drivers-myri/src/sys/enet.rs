//! The NXP ENET register block (i.MX 6UL reference manual, chapter "10/100-Mbps Ethernet MAC
//! (ENET)"; the same layout on i.MX RT 10xx and Kinetis K6x).

use core::ptr::NonNull;

/// Offsets of the registers the driver uses.
pub(crate) mod reg {
    /// Interrupt event (write 1 to clear).
    pub(crate) const EIR: usize = 0x004;
    /// Interrupt mask.
    pub(crate) const EIMR: usize = 0x008;
    /// Receive descriptor active: written by the driver when empty descriptors are available;
    /// cleared by the MAC when it finds none.
    pub(crate) const RDAR: usize = 0x010;
    /// Transmit descriptor active: written by the driver when ready descriptors are queued.
    pub(crate) const TDAR: usize = 0x014;
    /// Ethernet control: reset, enable, descriptor byte swapping.
    pub(crate) const ECR: usize = 0x024;
    /// Receive control: maximum frame length, MII mode, filtering.
    pub(crate) const RCR: usize = 0x084;
    /// Transmit control: full duplex.
    pub(crate) const TCR: usize = 0x0c4;
    /// Physical address, low (first four bytes).
    pub(crate) const PALR: usize = 0x0e4;
    /// Physical address, high (last two bytes, then the pause type).
    pub(crate) const PAUR: usize = 0x0e8;
    /// Transmit FIFO watermark (store and forward).
    pub(crate) const TFWR: usize = 0x144;
    /// Receive descriptor ring start.
    pub(crate) const RDSR: usize = 0x180;
    /// Transmit descriptor ring start.
    pub(crate) const TDSR: usize = 0x184;
    /// Maximum receive buffer size (16-byte units).
    pub(crate) const MRBR: usize = 0x188;
    /// Size of the register block the handle may touch.
    pub(crate) const BLOCK: usize = 0x400;
}

/// A handle to one ENET's registers.
#[derive(Debug)]
pub struct EnetRegs {
    base: NonNull<u32>,
}

impl EnetRegs {
    /// The registers at `base`.
    ///
    /// # Safety
    /// `base` is the address of an ENET register block (at least 1 KiB, mapped as device
    /// memory, reachable from the running code at that address), and no other handle to it
    /// is used while this one lives.
    pub unsafe fn new(base: usize) -> Self {
        Self {
            base: NonNull::new(base as *mut u32).expect("ENET base address must not be null"),
        }
    }

    /// ENET1 of an NXP i.MX 6UL (`0x0218_8000`, the MAC QEMU's `mcimx6ul-evk` attaches its
    /// first `-nic` to); `None` after the first call.
    #[cfg(all(feature = "imx6ul", target_has_atomic = "8"))]
    #[cfg_attr(docsrs, doc(cfg(feature = "imx6ul")))]
    pub fn take_imx6ul_enet1() -> Option<Self> {
        use core::sync::atomic::{AtomicBool, Ordering};
        static TAKEN: AtomicBool = AtomicBool::new(false);
        if TAKEN.swap(true, Ordering::AcqRel) {
            return None;
        }
        // SAFETY: the `imx6ul` feature declares that this program runs on an i.MX 6UL, whose
        // memory map (reference manual, "System Memory Map") puts ENET1's 16 KiB register
        // window at 0x0218_8000, device memory at that address with the MMU off (or an
        // identity mapping). `TAKEN` makes this the only handle this function creates.
        Some(unsafe { Self::new(0x0218_8000) })
    }

    /// Reads the register at `offset`.
    #[inline]
    pub(crate) fn read(&self, offset: usize) -> u32 {
        assert!(offset < reg::BLOCK && offset.is_multiple_of(4));
        // SAFETY: `base` is an ENET register block of at least `reg::BLOCK` bytes (the contract
        // of `new`), `offset` is a word-aligned offset inside it (checked above), and a
        // volatile load of a device register has no other effect on Rust-visible memory.
        unsafe { self.base.as_ptr().byte_add(offset).read_volatile() }
    }

    /// Writes `value` to the register at `offset`.
    #[inline]
    pub(crate) fn write(&self, offset: usize, value: u32) {
        assert!(offset < reg::BLOCK && offset.is_multiple_of(4));
        // SAFETY: as in `read`. The device acts on the write (for example DMA to the
        // descriptor ring addresses), but only to addresses the driver programmed from memory
        // it owns for as long as the MAC is enabled (`Enet` borrows the rings, and the
        // contract of `Enet::new` has it dropped, which disables the MAC, before they end).
        unsafe { self.base.as_ptr().byte_add(offset).write_volatile(value) }
    }
}
