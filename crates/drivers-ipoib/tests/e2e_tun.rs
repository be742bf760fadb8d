//! End to end with real components: the Linux kernel's TCP client, in a network namespace of
//! its own, sends 32 MiB through a TUN device (IP packets, no link header, IPoIB's 2044-byte
//! datagram-mode MTU). Each packet read from the TUN is framed as IPoIB and received by the
//! simulated HCA into the receive queue (datagram mode: after 40 bytes of GRH space), taken
//! through copybreak and lro-core's coalescer (Lro policy, checksums verified in software) and
//! handed to a smoltcp TCP server (`Medium::Ip`). The data must arrive byte-exact (hash
//! compared); the test prints one `ipoib-e2e:` line.
//!
//! Every packet read from the TUN is checked first: the device is opened with `IFF_NO_PI`
//! (smoltcp's `TunTapInterface`), and without `IFF_VNET_HDR` and `TUNSETOFFLOAD` the kernel
//! must hand over complete IPv4 header and TCP checksums (no CHECKSUM_PARTIAL, no GSO
//! super-packets), which the test asserts rather than assumes.
//!
//! Needs root, `ip` (iproute2) and /dev/net/tun; skips with a printed reason otherwise. Uses
//! only the namespace and TUN device it creates (named `ib<pid>`), addresses in
//! 198.18.0.0/24, and deletes them on exit, also on failure (a Drop guard).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant as WallInstant};

use drivers_ipoib::hca::SimHca;
use drivers_ipoib::phy::IpoibDevice;
use drivers_ipoib::{Mode, QueueConfig, RxQueue, RxQueueStorage};
use drivers_myri::phy::STAGING_LEN;
use lro_core::csum;
use lro_testkit::sys::{kernel_client, not_root, run, tool_missing, tun_missing, Cleanup, Fnv};
use smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use smoltcp::phy::{wait, Device, Medium, RxToken, TunTapInterface};
use smoltcp::socket::tcp;
use smoltcp::time::{Duration as SmolDuration, Instant};
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};

/// Bytes the kernel client sends.
const TOTAL: usize = 32 << 20;
const CLIENT_IP: &str = "198.18.0.1";
const SERVER_IP: [u8; 4] = [198, 18, 0, 2];
const PORT: u16 = 5201;
/// Datagram mode over a 2K InfiniBand MTU.
const MODE: Mode = Mode::DATAGRAM_2K;
/// Receive queue: 256 buffers posted, 1024 in all (the adapter keeps up to 256 frames of
/// completed segments and the engine holds more), 256 small ones.
const RQ_DEPTH: u16 = 256;
const LARGE: usize = 1024;
const SMALL: usize = 256;
/// A stuck transfer fails instead of hanging.
const RUN_LIMIT: Duration = Duration::from_secs(120);

fn skip_reason() -> Option<String> {
    not_root("network namespaces and TUN devices need CAP_NET_ADMIN")
        .or_else(|| tool_missing("ip", "-V", "(iproute2)"))
        .or_else(tun_missing)
}

/// What the kernel handed over, checked: complete checksums, within the MTU.
#[derive(Debug, Default)]
struct TunCheck {
    packets: u64,
    tcp: u64,
    bad_ip_checksum: u64,
    bad_tcp_checksum: u64,
    over_mtu: u64,
    largest: usize,
}

impl TunCheck {
    fn check(&mut self, ip: &[u8]) {
        self.packets += 1;
        self.largest = self.largest.max(ip.len());
        if ip.len() > MODE.mtu() {
            self.over_mtu += 1;
        }
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return;
        }
        let ihl = usize::from(ip[0] & 0xf) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
        if !csum::is_zero(!csum::sum(&ip[..ihl])) {
            self.bad_ip_checksum += 1;
        }
        if ip[9] == 6 && total > ihl {
            self.tcp += 1;
            let seg = &ip[ihl..total];
            let pseudo = csum::PseudoHeader::new(&ip[12..16], &ip[16..20], 6).sum(seg.len() as u32);
            if !csum::is_zero(!csum::add(pseudo, csum::sum(seg))) {
                self.bad_tcp_checksum += 1;
            }
        }
    }
}

#[test]
fn kernel_client_to_smoltcp_through_ipoib_copybreak_and_coalescer() {
    if let Some(reason) = skip_reason() {
        lro_testkit::sys::skip(&reason);
        return;
    }
    let pid = std::process::id();
    let ns = format!("ib{pid}");
    let tun_name = format!("ib{pid}t");
    // The namespace, and the TUN device if it never moved into it.
    let _cleanup = Cleanup::netns(&ns).and_link(&tun_name);
    // A persistent TUN device with the IPoIB MTU set before smoltcp opens it (smoltcp sizes its
    // reads by the MTU it finds), then moved into the client's namespace.
    if let Err(e) = run(&["ip", "tuntap", "add", "dev", &tun_name, "mode", "tun"]) {
        lro_testkit::sys::skip(&format!("cannot create a TUN device: {e}"));
        return;
    }
    let mtu = MODE.mtu().to_string();
    run(&["ip", "link", "set", &tun_name, "mtu", &mtu]).expect("set the MTU");
    let tun = TunTapInterface::new(&tun_name, Medium::Ip).expect("open the TUN device");
    assert_eq!(tun.capabilities().max_transmission_unit, MODE.mtu());
    run(&["ip", "netns", "add", &ns]).expect("create the namespace");
    let addr = format!("{CLIENT_IP}/24");
    for cmd in [
        &["ip", "link", "set", &tun_name, "netns", &ns][..],
        &["ip", "-n", &ns, "link", "set", "lo", "up"],
        &["ip", "-n", &ns, "addr", "add", &addr, "dev", &tun_name],
        &["ip", "-n", &ns, "link", "set", &tun_name, "up"],
    ] {
        run(cmd).expect("configure the namespace");
    }

    // The receive path: queue memory, the simulated HCA, the coalescing smoltcp device.
    let storage: Box<RxQueueStorage<'_, LARGE, SMALL>> = Box::default();
    let config = QueueConfig::new(MODE, RQ_DEPTH);
    let mut large = vec![0u8; LARGE * config.large_len()];
    let mut small = vec![0u8; SMALL * config.small_len()];
    let queue = RxQueue::new(&storage, &mut large, &mut small, config).expect("queue layout");
    let mut hca = SimHca::new(&queue);
    let mut staging = vec![0u8; STAGING_LEN];
    let mut dev = IpoibDevice::new(&queue, tun, &mut staging);

    let start = WallInstant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as i64);
    let mut iface = Interface::new(IfaceConfig::new(HardwareAddress::Ip), &mut dev, now());
    iface.update_ip_addrs(|a| {
        let [a0, a1, a2, a3] = SERVER_IP;
        a.push(IpCidr::new(IpAddress::v4(a0, a1, a2, a3), 24))
            .expect("one address");
    });
    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 1 << 20]),
        tcp::SocketBuffer::new(vec![0u8; 4096]),
    );
    socket.listen(PORT).expect("listen");
    let mut sockets = SocketSet::new(vec![]);
    let handle = sockets.add(socket);

    let ns_owned = ns.clone();
    let to = SocketAddr::from((SERVER_IP, PORT));
    let client = std::thread::spawn(move || {
        kernel_client(
            &ns_owned,
            to,
            TOTAL,
            0x9e37_79b9_7f4a_7c15,
            RUN_LIMIT,
            false,
        )
    });

    let mut check = TunCheck::default();
    let mut hash = Fnv::new();
    let mut bytes = 0usize;
    let mut connected = false;
    loop {
        assert!(
            start.elapsed() < RUN_LIMIT,
            "transfer stuck after {bytes} bytes; adapter {:?}, queue {:?}, hca {:?}",
            dev.lro().stats(),
            queue.stats(),
            hca.stats()
        );
        // The HCA receives while it has buffers posted; the rest waits in the TUN queue (the
        // sender's RNR wait).
        let mut pumped = 0;
        while queue.posted() > 0 {
            let Some((rx, _tx)) = dev.lro_mut().inner_mut().receive(now()) else {
                break;
            };
            rx.consume(|ip| {
                check.check(ip);
                hca.deliver_ip(ip).expect("a posted buffer");
            });
            pumped += 1;
        }
        iface.poll(now(), &mut dev, &mut sockets);
        let socket = sockets.get_mut::<tcp::Socket<'_>>(handle);
        connected |= socket.may_recv();
        let mut got = 0;
        while socket.can_recv() {
            got += socket
                .recv(|data| {
                    hash.update(data);
                    (data.len(), data.len())
                })
                .expect("recv");
        }
        bytes += got;
        if connected && !socket.may_recv() && !socket.can_recv() {
            socket.close();
            iface.poll(now(), &mut dev, &mut sockets);
            break;
        }
        if pumped == 0 && got == 0 {
            let delay = iface
                .poll_delay(now(), &sockets)
                .unwrap_or(SmolDuration::from_millis(10))
                .min(SmolDuration::from_millis(10));
            let fd = dev.lro().inner().as_raw_fd();
            wait(fd, Some(delay)).expect("wait on the TUN device");
        }
    }
    let wall = start.elapsed();
    let sent_hash = client
        .join()
        .expect("client thread")
        .expect("kernel client send");
    let adapter = dev.lro().stats();
    let engine = dev.lro().engine_stats().clone();
    let driver = dev.lro().driver().stats();
    drop(sockets);
    drop(iface);
    drop(dev);
    let qs = queue.stats();

    // What the kernel handed over through the TUN: complete checksums, MTU-sized packets.
    assert!(check.tcp > 0, "{check:?}");
    assert_eq!(
        (
            check.bad_ip_checksum,
            check.bad_tcp_checksum,
            check.over_mtu
        ),
        (0, 0, 0),
        "the TUN device handed over partial checksums or GSO packets: {check:?}"
    );
    for reason in [
        lro_core::PassReason::BadIpChecksum,
        lro_core::PassReason::BadTcpChecksum,
    ] {
        assert_eq!(engine.passed[reason.index()], 0, "{reason:?}: {engine:?}");
    }
    assert_eq!(bytes, TOTAL, "every byte arrived");
    assert_eq!(hash.0, sent_hash, "the bytes are the ones sent");
    assert!(engine.is_conserved(), "{engine:?}");
    // Every packet the HCA received went up (copied or handed up) and through the adapter.
    assert_eq!(hca.stats().delivered, check.packets);
    assert_eq!(qs.frames, check.packets);
    assert_eq!(qs.copied + qs.handed_up, qs.frames);
    assert_eq!(driver.frames, adapter.frames_in);
    assert!(
        qs.copied > 0,
        "the handshake's small packets were copied: {qs:?}"
    );
    assert!(engine.frames_merged > 0);
    assert!(
        adapter.frames_to_stack * 4 <= adapter.frames_in,
        "coalescing cut smoltcp's frames only from {} to {}",
        adapter.frames_in,
        adapter.frames_to_stack
    );
    // Every buffer back where it belongs: the RQ full again, nothing up.
    let acc = queue.accounting();
    assert!(acc.is_consistent(), "{acc:?}");
    assert_eq!((acc.large_up, acc.small_up), (0, 0), "{acc:?}");
    assert_eq!(queue.posted(), usize::from(RQ_DEPTH));

    println!(
        "ipoib-e2e: {bytes} bytes byte-exact (FNV-1a {:016x}) in {wall:.2?}; frames in {}, segments smoltcp processed {} ({:.1}x fewer); \
         copybreak copied {} small frames, handed up {}; largest IP packet {} B (MTU {}), checksums complete in all {} TCP packets the TUN device handed over",
        hash.0,
        adapter.frames_in,
        adapter.frames_to_stack,
        adapter.frames_in as f64 / adapter.frames_to_stack.max(1) as f64,
        qs.copied,
        qs.handed_up,
        check.largest,
        MODE.mtu(),
        check.tcp,
    );
}
