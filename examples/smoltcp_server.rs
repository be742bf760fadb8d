//! A smoltcp TCP server behind a TAP device, receiving through the drivers-myri ring and the
//! coalescer: run it, point your own kernel client at it, and watch how many frames smoltcp
//! processes for the bytes it receives.
//!
//! The chain: kernel TCP client -> TAP device -> simulated MAC writing into the DMA ring (page
//! frags) -> `lro_core` coalescer (Lro policy) -> smoltcp `Interface` -> TCP socket on 198.18.0.2.
//!
//! Run (as root, or with CAP_NET_ADMIN):
//!
//! ```text
//! # terminal 1: creates TAP device `lrotap0` and listens on 198.18.0.2:5201
//! cargo run --release --example smoltcp_server -- lrotap0 5201        # add --no-lro for the baseline
//!
//! # terminal 2: give the kernel its side of the link, with wire-size frames and real checksums
//! ip addr add 198.18.0.1/24 dev lrotap0 && ip link set lrotap0 up
//! ethtool -K lrotap0 tx off tso off gso off
//! head -c 64M /dev/urandom | nc -N 198.18.0.2 5201      # or: iperf3 -c ... is not supported (no control channel)
//! ```
//!
//! For each connection it prints the bytes received, the frames the ring received, the frames
//! smoltcp processed and the aggregation ratio. The TAP device disappears when it exits.

use std::time::Instant as WallInstant;

use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::sim::SimMac;
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use drivers_myri::smoltcp::phy::{wait, Medium, TunTapInterface};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::{Duration, Instant};
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use drivers_myri::{BufferLayout, RxRing, RxRingStorage};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let lro = !args.iter().any(|a| a == "--no-lro");
    let mut positional = args.iter().filter(|a| !a.starts_with("--"));
    let tap_name = positional.next().map_or("lrotap0", String::as_str);
    let port: u16 = positional.next().map_or(Ok(5201), |p| p.parse())?;

    let tap = TunTapInterface::new(tap_name, Medium::Ethernet)
        .map_err(|e| anyhow::anyhow!("cannot create TAP device {tap_name} (root needed?): {e}"))?;
    // 256 descriptors; 64 pages of 32 KiB cut into 2 KiB fragments (Myri10GE page frags).
    let mut storage: Box<RxRingStorage<256, 64>> = Box::default();
    let mut memory = vec![0u8; 64 * 32 * 1024];
    let ring = RxRing::new(
        &mut storage,
        &mut memory,
        BufferLayout::page_frags(32 * 1024, 2048),
    )?;
    let mut mac = SimMac::new(&ring);
    let mut staging = vec![0u8; STAGING_LEN];
    let mut dev: LroDevice<'_, &RxRing<'_>, TunTapInterface> =
        LroDevice::new(&ring, tap, &mut staging);
    dev.set_coalescing(lro);

    let start = WallInstant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as i64);
    let hw = HardwareAddress::Ethernet(EthernetAddress([0x02, 0, 0, 0, 0x4d, 0x10]));
    let mut iface = Interface::new(IfaceConfig::new(hw), &mut dev, now());
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::v4(198, 18, 0, 2), 24));
    });
    let mut sockets = SocketSet::new(vec![]);
    let handle = sockets.add(tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 1 << 20]),
        tcp::SocketBuffer::new(vec![0u8; 4096]),
    ));
    println!(
        "listening on 198.18.0.2:{port} behind {tap_name} (coalescing {}); give the kernel 198.18.0.1/24 on {tap_name}",
        if lro { "on" } else { "off" }
    );

    let mut bytes = 0u64;
    let mut counting = false;
    let mut base = (dev.stats(), WallInstant::now());
    loop {
        let pumped = mac.pump(dev.inner_mut(), now(), usize::MAX);
        iface.poll(now(), &mut dev, &mut sockets);
        let socket = sockets.get_mut::<tcp::Socket<'_>>(handle);
        if !socket.is_open() {
            socket.listen(port)?;
        }
        let mut got = 0;
        while socket.can_recv() {
            got += socket.recv(|data| (data.len(), data.len()))?;
        }
        if socket.may_recv() && !counting {
            // Established: count this connection from here.
            counting = true;
            base = (dev.stats(), WallInstant::now());
        }
        bytes += got as u64;
        if counting && !socket.may_recv() && !socket.can_recv() {
            counting = false;
            socket.close();
            let s = dev.stats();
            let ring_frames = s.frames_in - base.0.frames_in;
            let stack_frames = s.frames_to_stack - base.0.frames_to_stack;
            let secs = base.1.elapsed().as_secs_f64();
            println!(
                "connection closed: {bytes} bytes in {secs:.2} s ({:.0} Mbit/s); ring frames {ring_frames}, frames smoltcp processed {stack_frames} ({:.1} ring frames per smoltcp frame)",
                bytes as f64 * 8.0 / secs / 1e6,
                ring_frames as f64 / stack_frames.max(1) as f64,
            );
            bytes = 0;
        }
        if pumped == 0 && got == 0 {
            let delay = iface
                .poll_delay(now(), &sockets)
                .unwrap_or(Duration::from_millis(100))
                .min(Duration::from_millis(100));
            wait(std::os::fd::AsRawFd::as_raw_fd(dev.inner()), Some(delay))?;
        }
    }
}
