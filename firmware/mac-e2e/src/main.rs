//! End-to-end firmware for QEMU's `mcimx6ul-evk` (Cortex-A7, NXP ENET): the MAC's receive DMA
//! fills drivers-myri's ring, frames go through lro-core (inside
//! [`drivers_myri::phy::LroDevice`]) into smoltcp, and a TCP server on 198.18.0.2:5201 hashes
//! (SHA-256) every byte it receives. When the peer closes, it prints over semihosting
//!
//! ```text
//! mac-e2e: fw bytes=<n> sha256=<hex> frames=<ring frames> segments=<frames smoltcp got> ...
//! ```
//!
//! and exits. `scripts/firmware-mac-e2e.sh` runs it behind a TAP device and compares the hash
//! with the data the Linux kernel's TCP client sent.
//!
//! One `unsafe` block, `Enet::new` (whose contract, that the MAC is stopped before the memory it
//! writes goes away, a `main` that never returns meets); the MAC's registers come from
//! `EnetRegs::take_imx6ul_enet1` (drivers-myri's `imx6ul` feature), descriptors and DMA memory
//! are drivers-myri's, the clock is the generic timer's count register read through
//! aarch32-cpu.
#![no_std]
#![no_main]

use core::fmt::Write as _;

use aarch32_cpu::register::{CntPct, Cntfrq};
use drivers_myri::enet::{Enet, EnetRegs, EnetRxDescriptor, EnetTxStorage, TX_BUFFER_SIZE};
use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
use lro_core::Sizes;
use sha2::{Digest, Sha256};
use smoltcp::iface::{Config, Interface, SocketSet, SocketStorage};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};

/// The firmware's station address (locally administered).
const MAC: [u8; 6] = [0x02, 0x00, 0xc6, 0x12, 0x00, 0x02];
/// Its IPv4 address; the TAP on the host side is 198.18.0.1.
const ADDR: [u8; 4] = [198, 18, 0, 2];
/// The TCP port it listens on.
const PORT: u16 = 5201;

/// Receive descriptors, and buffers: the descriptors, plus the frames the coalescer and the
/// adapter's queue (`Q` = 256) may hold, plus slack.
const RX_DESCRIPTORS: usize = 64;
const RX_BUFFERS: usize = 512;
/// ENET writes the frame and its FCS; `MRBR` is this fragment size (a multiple of 16).
const RX_BUFFER_SIZE: usize = 1536;
const TX_DESCRIPTORS: usize = 16;
/// smoltcp's receive window: as much as the sender may have in flight.
const TCP_RX_BUFFER: usize = 256 * 1024;

#[repr(C, align(64))]
struct Dma<const N: usize>([u8; N]);

/// Microseconds from the generic timer's physical count.
struct Clock {
    hz: u64,
}

impl Clock {
    fn new() -> Self {
        // QEMU sets CNTFRQ to its counter frequency (62.5 MHz); firmware normally writes it.
        let hz = match Cntfrq::read().0 {
            0 => 62_500_000,
            f => u64::from(f),
        };
        Self { hz }
    }

    fn now(&self) -> Instant {
        let ticks = u128::from(CntPct::read().0);
        Instant::from_micros((ticks * 1_000_000 / u128::from(self.hz)) as i64)
    }
}

#[aarch32_rt::entry]
fn main() -> ! {
    let clock = Clock::new();
    let Some(regs) = EnetRegs::take_imx6ul_enet1() else {
        fail("ENET1 registers already taken");
    };

    // Everything lives in this frame, which never returns (the system stack is 16 MB).
    let mut rx_storage: RxRingStorage<RX_DESCRIPTORS, RX_BUFFERS, EnetRxDescriptor> =
        RxRingStorage::new();
    let mut rx_memory = Dma([0u8; RX_BUFFERS * RX_BUFFER_SIZE]);
    let ring = match RxRing::new(
        &mut rx_storage,
        &mut rx_memory.0,
        BufferLayout::slots(RX_BUFFER_SIZE),
    ) {
        Ok(r) => r,
        Err(e) => fail_with("receive ring", &e),
    };
    let mut tx_storage: EnetTxStorage<TX_DESCRIPTORS> = EnetTxStorage::new();
    let mut tx_memory = Dma([0u8; TX_DESCRIPTORS * TX_BUFFER_SIZE]);
    // SAFETY: `main` never returns, so `enet` (moved into `dev` below) outlives nothing it
    // borrows: the rings and their memory are locals of this never-ending frame.
    let enet = match unsafe { Enet::new(regs, &ring, &mut tx_storage, &mut tx_memory.0, MAC) } {
        Ok(e) => e,
        Err(e) => fail_with("ENET", &e),
    };
    let mut staging = [0u8; STAGING_LEN];
    let mut dev: LroDevice<'_, &RxRing<'_, EnetRxDescriptor>, Enet<'_>, Sizes<8, 48>, 256> =
        LroDevice::new(&ring, enet, &mut staging);

    let mut config = Config::new(HardwareAddress::Ethernet(EthernetAddress(MAC)));
    config.random_seed = CntPct::read().0;
    let mut iface = Interface::new(config, &mut dev, clock.now());
    iface.update_ip_addrs(|addrs| {
        let [a, b, c, d] = ADDR;
        let _ = addrs.push(IpCidr::new(IpAddress::v4(a, b, c, d), 24));
    });
    let mut socket_storage = [SocketStorage::EMPTY; 1];
    let mut sockets = SocketSet::new(&mut socket_storage[..]);
    let mut rx_buf = [0u8; TCP_RX_BUFFER];
    let mut tx_buf = [0u8; 4096];
    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(&mut rx_buf[..]),
        tcp::SocketBuffer::new(&mut tx_buf[..]),
    );
    if socket.listen(PORT).is_err() {
        fail("listen");
    }
    let handle = sockets.add(socket);
    semihosting::println!("mac-e2e: fw listening on 198.18.0.2:{PORT}");

    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    let mut connected = false;
    let mut first = None;
    loop {
        let now = clock.now();
        iface.poll(now, &mut dev, &mut sockets);
        // Frames smoltcp consumed went back to the ring and re-armed descriptors.
        dev.inner_mut().poll_rx();
        let socket = sockets.get_mut::<tcp::Socket>(handle);
        if !matches!(socket.state(), tcp::State::Listen | tcp::State::SynReceived) {
            // Past the handshake (not merely SYN-RECEIVED): from now on, `!may_recv` means the
            // peer has closed. Not `may_recv`: a client that sends nothing and whose ACK and FIN
            // come in one poll (one segment, or frames that arrived together) goes straight to
            // CLOSE-WAIT, where `may_recv` is false.
            connected = true;
        }
        while socket.can_recv() {
            let got = socket.recv(|data| {
                hasher.update(&*data);
                (data.len(), data.len())
            });
            match got {
                Ok(n) => {
                    bytes += n as u64;
                    first.get_or_insert(now);
                }
                Err(_) => break,
            }
        }
        if connected && !socket.may_recv() && !socket.can_recv() {
            // The peer closed and everything it sent has been hashed.
            let elapsed = first.map_or(0, |t| (clock.now() - t).total_micros());
            report(&dev, bytes, hasher, elapsed);
            semihosting::process::exit(0);
        }
    }
}

fn report<'r>(
    dev: &LroDevice<'r, &'r RxRing<'r, EnetRxDescriptor>, Enet<'r>, Sizes<8, 48>, 256>,
    bytes: u64,
    hasher: Sha256,
    elapsed_us: u64,
) {
    let digest = hasher.finalize();
    let mut hex = [0u8; 64];
    for (i, b) in digest.iter().enumerate() {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        hex[2 * i] = DIGITS[usize::from(b >> 4)];
        hex[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
    let hex = core::str::from_utf8(&hex).unwrap_or("?");
    let a = dev.stats();
    let e = dev.engine_stats();
    let r = dev.driver().stats();
    let t = dev.inner().stats();
    let mut line = Line::default();
    let _ = write!(
        line,
        "mac-e2e: fw bytes={bytes} sha256={hex} frames={} segments={} copied={} superseded={} dropped={} \
         engine_in={} merged={} acks_merged={} ring_frames={} ring_errors={} starved={} rx_restarts={} \
         tx_frames={} tx_dropped={} elapsed_us={elapsed_us}",
        a.frames_in,
        a.frames_to_stack,
        a.segments_copied,
        a.superseded,
        a.dropped,
        e.frames_in,
        e.frames_merged,
        e.acks_merged,
        r.frames,
        r.errors,
        r.starved,
        t.rx_restarts,
        t.tx_frames,
        t.tx_dropped,
    );
    semihosting::println!("{}", line.as_str());
}

/// A fixed line buffer for one report line.
struct Line {
    buf: [u8; 1024],
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self {
            buf: [0; 1024],
            len: 0,
        }
    }
}

impl Line {
    fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
    }
}

impl core::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        let dst = self.buf.get_mut(self.len..end).ok_or(core::fmt::Error)?;
        dst.copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

fn fail(what: &str) -> ! {
    semihosting::eprintln!("mac-e2e: fw FAILED: {what}");
    semihosting::process::exit(1)
}

fn fail_with(what: &str, e: &dyn core::fmt::Display) -> ! {
    semihosting::eprintln!("mac-e2e: fw FAILED: {what}: {e}");
    semihosting::process::exit(1)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    semihosting::eprintln!("mac-e2e: fw PANIC: {info}");
    semihosting::process::exit(101)
}
