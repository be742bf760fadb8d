//! End to end with real components: the Linux kernel's TCP client, in a network namespace of
//! its own, sends 32 MiB through a TAP device; the simulated MAC writes every frame into the
//! DMA ring; the smoltcp adapter coalesces the ring's frames (Lro policy) and hands them to a
//! smoltcp TCP server. The data must arrive byte-exact (hash compared).
//!
//! The transfer runs twice, without and with coalescing, and prints the frames smoltcp
//! processed and smoltcp's thread CPU time per MB received (`Interface::poll`, which includes
//! draining the ring and coalescing) for both, with their ratios.
//!
//! Needs root, `ip` (iproute2), `ethtool` and /dev/net/tun; skips with a printed reason
//! otherwise. Uses only the namespace and TAP device it creates (named after the process id),
//! addresses in 198.18.0.0/24, and deletes them on exit, also on failure (a Drop guard).

use std::fs::File;
use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant as WallInstant};

use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::sim::SimMac;
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use drivers_myri::smoltcp::phy::{wait, Medium, TunTapInterface};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::{Duration as SmolDuration, Instant};
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use drivers_myri::{BufferLayout, RxRing, RxRingStorage};

/// Bytes the kernel client sends per run.
const TOTAL: usize = 32 << 20;
/// The kernel's side of the TAP link.
const CLIENT_IP: &str = "198.18.0.1";
/// smoltcp's address behind the TAP device.
const SERVER_IP: [u8; 4] = [198, 18, 0, 2];
/// Ring geometry: 256 descriptors, 64 pages of 32 KiB cut into 2 KiB fragments (Myri10GE's
/// page frags): 1024 fragments, enough for the ring plus everything the adapter holds.
const DESCRIPTORS: usize = 256;
const PAGES: usize = 64;
const PAGE: usize = 32 * 1024;
const FRAG: usize = 2048;
/// Whole-test wall-clock limit per run (a stuck transfer fails instead of hanging).
const RUN_LIMIT: Duration = Duration::from_secs(25);

/// FNV-1a, 64 bits: enough to compare two 32 MiB streams.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

/// The client's data: a xorshift stream, so reordering or duplication cannot go unnoticed.
fn fill(buf: &mut [u8], state: &mut u64) {
    for chunk in buf.chunks_mut(8) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let bytes = state.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

fn run_cmd(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn output(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (network namespaces and TAP devices need CAP_NET_ADMIN)".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` (iproute2) not found".into());
    }
    if Command::new("ethtool").arg("--version").output().is_err() {
        return Some("`ethtool` not found (apt-get install -y ethtool)".into());
    }
    if File::open("/dev/net/tun").is_err() {
        return Some("/dev/net/tun unavailable".into());
    }
    None
}

/// Deletes the namespace (and the TAP device moved into it) on drop, also on panic.
struct NetnsGuard {
    ns: String,
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// Thread CPU time in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The kernel TCP client: joins the namespace (this thread only), connects, sends `TOTAL`
/// bytes and closes. Returns the hash of what it sent.
fn client(ns: &str, port: u16) -> std::io::Result<u64> {
    let netns = File::open(format!("/var/run/netns/{ns}"))?;
    // SAFETY: `netns` is an open namespace file descriptor; setns changes the network
    // namespace of the calling thread only, which runs nothing but this client.
    if unsafe { libc::setns(netns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let addr: SocketAddr = format!("198.18.0.2:{port}").parse().expect("address");
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))?;
    stream.set_write_timeout(Some(RUN_LIMIT))?;
    let mut hash = Fnv::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(port);
    let mut buf = vec![0u8; 64 * 1024];
    let mut sent = 0;
    while sent < TOTAL {
        let n = buf.len().min(TOTAL - sent);
        fill(&mut buf[..n], &mut state);
        hash.update(&buf[..n]);
        stream.write_all(&buf[..n])?;
        sent += n;
    }
    stream.shutdown(Shutdown::Write)?;
    Ok(hash.0)
}

/// What one transfer measured.
#[derive(Debug)]
struct RunResult {
    bytes: usize,
    hash_ok: bool,
    ring_frames: u64,
    stack_frames: u64,
    segments_copied: u64,
    poll_cpu_ns: u64,
    wall: Duration,
    engine_conserved: bool,
    frames_merged: u64,
    acks_merged: u64,
    missed: u64,
}

fn transfer(
    tap: TunTapInterface,
    ns: &str,
    port: u16,
    coalesce: bool,
) -> (RunResult, TunTapInterface) {
    let mut storage: Box<RxRingStorage<DESCRIPTORS, PAGES>> = Box::default();
    let mut memory = vec![0u8; PAGES * PAGE];
    let ring = RxRing::new(
        &mut storage,
        &mut memory,
        BufferLayout::page_frags(PAGE, FRAG),
    )
    .expect("ring layout");
    let mut mac = SimMac::new(&ring);
    let mut staging = vec![0u8; STAGING_LEN];
    let mut dev: LroDevice<'_, &RxRing<'_>, TunTapInterface> =
        LroDevice::new(&ring, tap, &mut staging);
    dev.set_coalescing(coalesce);

    let start = WallInstant::now();
    let now = || Instant::from_micros(start.elapsed().as_micros() as i64);
    let hw = HardwareAddress::Ethernet(EthernetAddress([0x02, 0, 0, 0, 0x4d, 0x10]));
    let mut iface = Interface::new(IfaceConfig::new(hw), &mut dev, now());
    iface.update_ip_addrs(|a| {
        a.push(IpCidr::new(
            IpAddress::v4(SERVER_IP[0], SERVER_IP[1], SERVER_IP[2], SERVER_IP[3]),
            24,
        ))
        .expect("one address");
    });
    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 1 << 20]),
        tcp::SocketBuffer::new(vec![0u8; 4096]),
    );
    socket.listen(port).expect("listen");
    let mut sockets = SocketSet::new(vec![]);
    let handle = sockets.add(socket);

    let ns_owned = ns.to_owned();
    let client = std::thread::spawn(move || client(&ns_owned, port));

    let mut hash = Fnv::new();
    let mut bytes = 0usize;
    let mut poll_cpu_ns = 0u64;
    let mut connected = false;
    let mut last_trace = 0;
    loop {
        assert!(
            start.elapsed() < RUN_LIMIT,
            "transfer stuck after {bytes} bytes (coalescing {coalesce}); adapter {:?}, ring {:?}",
            dev.stats(),
            ring.stats()
        );
        if std::env::var_os("MYRI_E2E_TRACE").is_some()
            && start.elapsed().as_millis() / 1000 != last_trace
        {
            last_trace = start.elapsed().as_millis() / 1000;
            eprintln!(
                "{:?} bytes {bytes} adapter {:?} ring {:?} mac {:?} cpu {poll_cpu_ns}",
                start.elapsed(),
                dev.stats(),
                ring.stats(),
                mac.stats()
            );
        }
        let pumped = mac.pump(dev.inner_mut(), now(), usize::MAX);
        let t0 = thread_cpu_ns();
        iface.poll(now(), &mut dev, &mut sockets);
        poll_cpu_ns += thread_cpu_ns() - t0;

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
            // The client closed and everything has been read.
            socket.close();
            iface.poll(now(), &mut dev, &mut sockets);
            break;
        }
        if pumped == 0 && got == 0 {
            let delay = iface
                .poll_delay(now(), &sockets)
                .unwrap_or(SmolDuration::from_millis(10))
                .min(SmolDuration::from_millis(10));
            wait(dev.inner().as_raw_fd(), Some(delay)).expect("wait on the TAP device");
        }
    }
    let wall = start.elapsed();
    let sent_hash = client
        .join()
        .expect("client thread")
        .expect("kernel client send");
    let stats = dev.stats();
    let engine = dev.engine_stats().clone();
    let result = RunResult {
        bytes,
        hash_ok: sent_hash == hash.0,
        ring_frames: stats.frames_in,
        stack_frames: stats.frames_to_stack,
        segments_copied: stats.segments_copied,
        poll_cpu_ns,
        wall,
        engine_conserved: engine.is_conserved(),
        frames_merged: engine.frames_merged,
        acks_merged: engine.acks_merged,
        missed: mac.stats().missed,
    };
    drop(sockets);
    drop(iface);
    let tap = dev.into_inner();
    assert_eq!(ring.outstanding(), 0, "every frame went back to the ring");
    (result, tap)
}

#[test]
fn kernel_client_to_smoltcp_through_ring_and_coalescer() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    let pid = std::process::id();
    let ns = format!("myri{pid}");
    let tap_name = format!("myri{pid}t");
    run_cmd(&["ip", "netns", "add", &ns]).expect("create the namespace");
    let _guard = NetnsGuard { ns: ns.clone() };

    let tap = match TunTapInterface::new(&tap_name, Medium::Ethernet) {
        Ok(t) => t,
        Err(e) => {
            println!("skipped: cannot create a TAP device: {e}");
            return;
        }
    };
    let addr = format!("{CLIENT_IP}/24");
    for cmd in [
        &["ip", "link", "set", &tap_name, "netns", &ns][..],
        &["ip", "-n", &ns, "link", "set", "lo", "up"],
        &["ip", "-n", &ns, "addr", "add", &addr, "dev", &tap_name],
        &["ip", "-n", &ns, "link", "set", &tap_name, "up"],
    ] {
        run_cmd(cmd).expect("configure the namespace");
    }
    // Wire-size frames with real checksums: no TSO/GSO, no checksum offload on the sender.
    let _ = run_cmd(&[
        "ip", "netns", "exec", &ns, "ethtool", "-K", &tap_name, "tx", "off", "tso", "off", "gso",
        "off",
    ]);
    let features =
        output(&["ip", "netns", "exec", &ns, "ethtool", "-k", &tap_name]).expect("ethtool -k");
    for off in [
        "tx-checksumming: off",
        "tcp-segmentation-offload: off",
        "generic-segmentation-offload: off",
    ] {
        assert!(
            features.contains(off),
            "{off} expected on {tap_name}:\n{features}"
        );
    }

    let (plain, tap) = transfer(tap, &ns, 5001, false);
    let (lro, _tap) = transfer(tap, &ns, 5002, true);

    let mb = TOTAL as f64 / 1e6;
    for (name, r) in [("without coalescing", &plain), ("with coalescing   ", &lro)] {
        println!(
            "{name}: {} bytes in {:.2?}; ring frames {}, frames smoltcp processed {} ({} copied segments, {} frames merged, {} ACKs merged, {} missed); smoltcp poll CPU {:.3} ms/MB",
            r.bytes,
            r.wall,
            r.ring_frames,
            r.stack_frames,
            r.segments_copied,
            r.frames_merged,
            r.acks_merged,
            r.missed,
            r.poll_cpu_ns as f64 / 1e6 / mb,
        );
    }
    println!(
        "frames smoltcp processed: {:.1}x fewer with coalescing; CPU per MB (service demand) ratio without/with: {:.2}",
        plain.stack_frames as f64 / lro.stack_frames as f64,
        plain.poll_cpu_ns as f64 / lro.poll_cpu_ns as f64,
    );

    for r in [&plain, &lro] {
        assert_eq!(r.bytes, TOTAL, "every byte arrived");
        assert!(r.hash_ok, "the bytes are the ones sent");
        assert!(r.engine_conserved);
    }
    // Without coalescing every ring frame reaches smoltcp on its own.
    assert_eq!(plain.stack_frames, plain.ring_frames);
    assert_eq!(plain.frames_merged, 0);
    // With coalescing smoltcp sees fewer, larger frames.
    assert!(lro.frames_merged > 0);
    assert!(lro.stack_frames < lro.ring_frames);
    // The target is 10x fewer (36-40x measured here); the floor only guards against
    // coalescing silently stopping, whatever the scheduling of the kernel sender.
    assert!(
        lro.stack_frames * 4 <= plain.stack_frames,
        "coalescing cut smoltcp's frames only from {} to {}",
        plain.stack_frames,
        lro.stack_frames
    );
}
