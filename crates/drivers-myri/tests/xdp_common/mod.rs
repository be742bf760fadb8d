//! Shared by the AF_XDP tests: skip logic, namespaces and a veth pair that delete themselves,
//! the kernel's TCP client and server (std sockets in a namespace), a smoltcp node on an
//! AF_XDP socket with the coalescer in front, hashing and CPU time.
//!
//! Layout of every test: namespace `<prefix>a` holds the XDP side of the veth pair (no IP
//! address: smoltcp is 198.18.0.2 behind AF_XDP), namespace `<prefix>b` the kernel side
//! (198.18.0.1/24, a permanent neighbour entry for smoltcp, checksum/TSO/GSO offload off so
//! frames on the wire are wire-size with real checksums).
#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant as WallInstant};

use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketHandle, SocketSet};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::Instant;
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use std::collections::VecDeque;

use drivers_myri::xdp::{UmemFrame, XskRx, XskTx};
use drivers_myri::RxDriver;
use lro_core::RxMeta;
use lro_testkit::sys::{self, not_root, tool_missing, Cleanup};
pub(crate) use lro_testkit::sys::{enter_netns as enter, output, run, thread_cpu_ns, Fnv};

/// The kernel's address (namespace b).
pub(crate) const KERNEL_IP: &str = "198.18.0.1";
/// smoltcp's address behind AF_XDP.
pub(crate) const SMOL_IP: [u8; 4] = [198, 18, 0, 2];
/// smoltcp's MAC address.
pub(crate) const SMOL_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x4d, 0x20];
/// smoltcp's MAC in `ip neigh` notation.
pub(crate) const SMOL_MAC_STR: &str = "02:00:00:00:4d:20";

/// Why the AF_XDP tests cannot run here, if they cannot.
pub(crate) fn skip_reason() -> Option<String> {
    if let Some(reason) = not_root("namespaces, veth, XDP and AF_XDP need CAP_NET_ADMIN/CAP_BPF")
        .or_else(|| tool_missing("ip", "-V", "(iproute2)"))
        .or_else(|| tool_missing("ethtool", "--version", "(apt-get install -y ethtool)"))
    {
        return Some(reason);
    }
    // SAFETY: socket(2) with constant arguments; the descriptor is closed right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    if fd < 0 {
        return Some(format!(
            "no AF_XDP sockets in this kernel: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `fd` is the socket just created and owned here.
    unsafe { libc::close(fd) };
    // bpf(2) may be refused even to root (a container's seccomp filter or missing CAP_BPF):
    // try to create a one-slot XSKMAP, the first thing the backend does.
    #[repr(C)]
    struct MapCreate {
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    }
    let mut attr = MapCreate {
        map_type: 17, // BPF_MAP_TYPE_XSKMAP
        key_size: 4,
        value_size: 4,
        max_entries: 1,
    };
    // SAFETY: BPF_MAP_CREATE (0) with a valid, writable prefix of `union bpf_attr` and its
    // size; the returned descriptor is closed right away.
    let map = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            0,
            &mut attr as *mut MapCreate,
            std::mem::size_of::<MapCreate>() as u32,
        )
    };
    if map < 0 {
        return Some(format!(
            "bpf(2) cannot create an XSKMAP here: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `map` is the descriptor just created and owned here.
    unsafe { libc::close(map as i32) };
    None
}

/// The test's namespaces and veth pair, or `None` after printing why the test skips (not
/// root, no AF_XDP or bpf(2), namespaces or veth pairs not allowed here).
pub(crate) fn setup(tag: &str, queues: u32) -> Option<Net> {
    if let Some(reason) = skip_reason() {
        lro_testkit::sys::skip(&reason);
        return None;
    }
    match Net::new(tag, queues) {
        Ok(net) => Some(net),
        Err(e) => {
            lro_testkit::sys::skip(&format!("cannot create the namespaces and veth pair: {e}"));
            None
        }
    }
}

/// Two namespaces and a veth pair between them, deleted on drop (also on panic).
pub(crate) struct Net {
    /// Namespace of the XDP side.
    pub(crate) ns_a: String,
    /// Namespace of the kernel side.
    pub(crate) ns_b: String,
    /// The XDP side's interface (in `ns_a`).
    pub(crate) if_a: String,
    /// The kernel side's interface (in `ns_b`).
    pub(crate) if_b: String,
    /// Deletes both namespaces, and with them the veth pair.
    _cleanup: Cleanup,
}

impl Net {
    /// `queues` queues on both ends; the kernel side configured for wire-size, checksummed
    /// frames; `tag` keeps the names of tests running at once apart.
    pub(crate) fn new(tag: &str, queues: u32) -> Result<Self, String> {
        let pid = std::process::id();
        let (ns_a, ns_b) = (format!("xdp{pid}{tag}a"), format!("xdp{pid}{tag}b"));
        let net = Self {
            _cleanup: Cleanup::netns(&ns_a).and_netns(&ns_b),
            if_a: ns_a.clone(),
            if_b: ns_b.clone(),
            ns_a,
            ns_b,
        };
        run(&["ip", "netns", "add", &net.ns_a])?;
        run(&["ip", "netns", "add", &net.ns_b])?;
        // No IPv6 (router solicitations, MLD reports, DAD) on the link: the frames that cross
        // it are the test's.
        for ns in [&net.ns_a, &net.ns_b] {
            run(&[
                "ip", "netns", "exec", ns, "sh", "-c",
                "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6",
            ])?;
        }
        // A connection keeps its transmit queue: no new hash after a retransmission timeout,
        // which would move it to another RX queue (another smoltcp, with several queues).
        run(&[
            "ip",
            "netns",
            "exec",
            &net.ns_b,
            "sh",
            "-c",
            "echo 0 > /proc/sys/net/core/txrehash",
        ])?;
        let q = queues.to_string();
        run(&[
            "ip",
            "link",
            "add",
            &net.if_a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &net.ns_a,
            "type",
            "veth",
            "peer",
            "name",
            &net.if_b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &net.ns_b,
        ])?;
        let addr = format!("{KERNEL_IP}/24");
        let smol_ip = format!(
            "{}.{}.{}.{}",
            SMOL_IP[0], SMOL_IP[1], SMOL_IP[2], SMOL_IP[3]
        );
        for cmd in [
            &["ip", "-n", &net.ns_a, "link", "set", "lo", "up"][..],
            &["ip", "-n", &net.ns_a, "link", "set", &net.if_a, "up"],
            &["ip", "-n", &net.ns_b, "link", "set", "lo", "up"],
            &[
                "ip", "-n", &net.ns_b, "addr", "add", &addr, "dev", &net.if_b,
            ],
            &["ip", "-n", &net.ns_b, "link", "set", &net.if_b, "up"],
            &[
                "ip",
                "-n",
                &net.ns_b,
                "neigh",
                "replace",
                &smol_ip,
                "lladdr",
                SMOL_MAC_STR,
                "dev",
                &net.if_b,
                "nud",
                "permanent",
            ],
            &[
                "ip", "netns", "exec", &net.ns_b, "ethtool", "-K", &net.if_b, "tx", "off", "tso",
                "off", "gso", "off",
            ],
        ] {
            run(cmd)?;
        }
        let features = output(&["ip", "netns", "exec", &net.ns_b, "ethtool", "-k", &net.if_b])?;
        for off in [
            "tx-checksumming: off",
            "tcp-segmentation-offload: off",
            "generic-segmentation-offload: off",
        ] {
            if !features.contains(off) {
                return Err(format!("{off} expected on {}", net.if_b));
            }
        }
        Ok(net)
    }

    /// The kernel receiver ACKs every segment: quick ACKs on its route, no GRO on its veth.
    pub(crate) fn kernel_acks_every_segment(&self) -> Result<(), String> {
        run(&[
            "ip", "netns", "exec", &self.ns_b, "ethtool", "-K", &self.if_b, "gro", "off",
        ])?;
        run(&[
            "ip",
            "-n",
            &self.ns_b,
            "route",
            "change",
            "198.18.0.0/24",
            "dev",
            &self.if_b,
            "proto",
            "kernel",
            "scope",
            "link",
            "src",
            KERNEL_IP,
            "quickack",
            "1",
        ])?;
        let routes = output(&["ip", "-n", &self.ns_b, "route", "show", "198.18.0.0/24"])?;
        if !routes.contains("quickack 1") {
            return Err(format!("quickack not set on the route: {routes}"));
        }
        Ok(())
    }
}

/// The kernel TCP client: in namespace `ns`, connects to smoltcp's `port`, sends `total` bytes
/// of the stream seeded with `seed`, closes. Returns the hash of what it sent.
pub(crate) fn kernel_client(
    ns: &str,
    port: u16,
    total: usize,
    seed: u64,
    limit: Duration,
) -> std::io::Result<u64> {
    let [a, b, c, d] = SMOL_IP;
    let to = SocketAddr::from(([a, b, c, d], port));
    sys::kernel_client(ns, to, total, seed, limit, true)
}

/// The kernel TCP server: listens in namespace `ns` on `port` (ready when `ready` is sent),
/// accepts one connection, reads to the end. Returns the bytes and their hash.
pub(crate) fn kernel_server(
    ns: &str,
    port: u16,
    ready: std::sync::mpsc::Sender<()>,
    limit: Duration,
) -> std::io::Result<(usize, u64)> {
    enter(ns)?;
    let listener = TcpListener::bind(format!("{KERNEL_IP}:{port}"))?;
    let _ = ready.send(());
    let (mut stream, _) = listener.accept()?;
    stream.set_read_timeout(Some(limit))?;
    let mut hash = Fnv::new();
    // Reads of one segment's payload: the socket is locked only briefly, so segments arriving
    // meanwhile are not coalesced in its backlog (`tcp_add_backlog`) and each gets its own
    // ACK, as the seed 000 experiment wants (with 256 KiB reads: about 0.7 ACK per segment).
    let mut buf = vec![0u8; 1448];
    let mut total = 0;
    loop {
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        total += n;
    }
    Ok((total, hash.0))
}

/// A receive driver the node can wait on.
pub(crate) trait Wait: RxDriver {
    fn wait_frames(&mut self, timeout: Duration);
    fn socket(&mut self) -> &mut XskRx;
}

impl Wait for XskRx {
    fn wait_frames(&mut self, timeout: Duration) {
        let _ = self.wait(Some(timeout));
    }

    fn socket(&mut self) -> &mut XskRx {
        self
    }
}

/// A frame from the socket or one the test injects (see [`Primed`]).
pub(crate) enum Frame {
    Injected(Vec<u8>),
    Umem(UmemFrame),
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        match self {
            Self::Injected(v) => v,
            Self::Umem(f) => f.as_ref(),
        }
    }
}

impl AsMut<[u8]> for Frame {
    fn as_mut(&mut self) -> &mut [u8] {
        match self {
            Self::Injected(v) => v,
            Self::Umem(f) => f.as_mut(),
        }
    }
}

/// The socket's receive half, after frames the test hands smoltcp first: with several queues,
/// each queue's smoltcp learns the kernel's MAC from an injected ARP request (the kernel's own
/// ARP traffic reaches one queue only).
pub(crate) struct Primed {
    pub(crate) first: VecDeque<Vec<u8>>,
    pub(crate) rx: XskRx,
}

impl RxDriver for Primed {
    type Frame = Frame;

    fn receive(&mut self, now: u64) -> Option<(Frame, RxMeta)> {
        if let Some(f) = self.first.pop_front() {
            return Some((Frame::Injected(f), RxMeta::ethernet(now)));
        }
        let (f, meta) = self.rx.receive(now)?;
        Some((Frame::Umem(f), meta))
    }
}

impl Wait for Primed {
    fn wait_frames(&mut self, timeout: Duration) {
        if self.first.is_empty() {
            let _ = self.rx.wait(Some(timeout));
        }
    }

    fn socket(&mut self) -> &mut XskRx {
        &mut self.rx
    }
}

/// An ARP request from `mac`/`ip` for smoltcp's address: smoltcp fills its neighbour cache
/// from it.
pub(crate) fn arp_request(mac: [u8; 6], ip: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 42];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[22..28].copy_from_slice(&mac);
    f[28..32].copy_from_slice(&ip);
    f[38..42].copy_from_slice(&SMOL_IP);
    f
}

/// The MAC address of `ifname` in namespace `ns`.
pub(crate) fn mac_of(ns: &str, ifname: &str) -> Result<[u8; 6], String> {
    let out = output(&["ip", "-n", ns, "-br", "link", "show", "dev", ifname])?;
    let word = out
        .split_whitespace()
        .find(|w| w.len() == 17 && w.matches(':').count() == 5)
        .ok_or_else(|| format!("no MAC in {out:?}"))?;
    let mut mac = [0u8; 6];
    for (m, part) in mac.iter_mut().zip(word.split(':')) {
        *m = u8::from_str_radix(part, 16).map_err(|e| e.to_string())?;
    }
    Ok(mac)
}

/// smoltcp on an AF_XDP socket with the coalescer in front.
pub(crate) struct Node<'s, R: Wait = XskRx> {
    pub(crate) dev: LroDevice<'s, R, XskTx>,
    pub(crate) iface: Interface,
    pub(crate) sockets: SocketSet<'static>,
    pub(crate) start: WallInstant,
}

/// A staging buffer for [`Node::new`].
pub(crate) fn staging() -> Vec<u8> {
    vec![0u8; STAGING_LEN]
}

impl<'s, R: Wait> Node<'s, R> {
    pub(crate) fn new(rx: R, tx: XskTx, staging: &'s mut [u8]) -> Self {
        let start = WallInstant::now();
        let mut dev: LroDevice<'s, R, XskTx> = LroDevice::new(rx, tx, staging);
        let hw = HardwareAddress::Ethernet(EthernetAddress(SMOL_MAC));
        let mut iface = Interface::new(IfaceConfig::new(hw), &mut dev, Instant::from_micros(0));
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(
                IpAddress::v4(SMOL_IP[0], SMOL_IP[1], SMOL_IP[2], SMOL_IP[3]),
                24,
            ))
            .expect("one address");
        });
        Self {
            dev,
            iface,
            sockets: SocketSet::new(vec![]),
            start,
        }
    }

    pub(crate) fn now(&self) -> Instant {
        Instant::from_micros(self.start.elapsed().as_micros() as i64)
    }

    /// A listening TCP socket with buffers of `rx`/`tx` bytes.
    pub(crate) fn listen(&mut self, port: u16, rx: usize, tx: usize) -> SocketHandle {
        let mut socket = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0u8; rx]),
            tcp::SocketBuffer::new(vec![0u8; tx]),
        );
        socket.listen(port).expect("listen");
        self.sockets.add(socket)
    }

    /// One smoltcp poll; returns its thread CPU time in nanoseconds. The TX kick happens
    /// outside ([`Node::kick`]).
    pub(crate) fn poll(&mut self) -> u64 {
        let now = self.now();
        let t0 = thread_cpu_ns();
        self.iface.poll(now, &mut self.dev, &mut self.sockets);
        thread_cpu_ns() - t0
    }

    /// Sends what smoltcp queued in the TX ring.
    pub(crate) fn kick(&mut self) {
        self.dev.inner_mut().flush();
    }

    /// Waits for frames, at most until smoltcp's next deadline (and at most 10 ms).
    pub(crate) fn wait(&mut self) {
        let now = self.now();
        let delay = self
            .iface
            .poll_delay(now, &self.sockets)
            .map_or(Duration::from_millis(10), |d| {
                Duration::from_micros(d.total_micros())
            })
            .min(Duration::from_millis(10));
        self.dev.driver_mut().wait_frames(delay);
    }

    /// Gives every frame the device holds back, drops the interface and returns the socket
    /// halves (for the frame accounting).
    pub(crate) fn finish(self) -> (R, XskTx) {
        let Self { dev, .. } = self;
        let (mut rx, mut tx) = dev.into_parts();
        rx.socket().refill();
        tx.flush();
        (rx, tx)
    }
}

/// Drains what the socket has, if anything (after a test, before the accounting).
pub(crate) fn drain(rx: &mut XskRx) -> usize {
    let mut n = 0;
    while let Some((frame, _)) = rx.receive(0) {
        drop(frame);
        n += 1;
    }
    rx.refill();
    n
}

/// Sends every frame out of `ifname` in namespace `ns` through an AF_PACKET raw socket.
pub(crate) fn inject(
    ns: &str,
    ifname: &str,
    frames: &[Vec<u8>],
    pace: Duration,
) -> Result<usize, String> {
    enter(ns).map_err(|e| format!("setns: {e}"))?;
    let socket =
        sys::PacketSocket::sender(ifname).map_err(|e| format!("AF_PACKET on {ifname}: {e}"))?;
    let mut sent = 0;
    for f in frames {
        socket
            .send(f)
            .map_err(|e| format!("send ({} bytes): {e}", f.len()))?;
        sent += 1;
        if !pace.is_zero() {
            std::thread::sleep(pace);
        }
    }
    Ok(sent)
}
