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

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant as WallInstant};

use drivers_myri::phy::{LroDevice, STAGING_LEN};
use drivers_myri::sim::SimMac;
use drivers_myri::smoltcp::iface::{Config as IfaceConfig, Interface, SocketSet};
use drivers_myri::smoltcp::phy::{wait, Medium, TunTapInterface};
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::time::{Duration as SmolDuration, Instant};
use drivers_myri::smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use drivers_myri::{BufferLayout, RxRing, RxRingStorage};
use lro_testkit::sys::{
    kernel_client, not_root, output, run, thread_cpu_ns, tool_missing, tun_missing, Cleanup, Fnv,
};

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

/// Why the test cannot run here, if it cannot.
fn skip_reason() -> Option<String> {
    not_root("network namespaces and TAP devices need CAP_NET_ADMIN")
        .or_else(|| tool_missing("ip", "-V", "(iproute2)"))
        .or_else(|| tool_missing("ethtool", "--version", "(apt-get install -y ethtool)"))
        .or_else(tun_missing)
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
    let to = SocketAddr::from((SERVER_IP, port));
    let seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(port);
    let client =
        std::thread::spawn(move || kernel_client(&ns_owned, to, TOTAL, seed, RUN_LIMIT, false));

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
        lro_testkit::sys::skip(&reason);
        return;
    }
    let pid = std::process::id();
    let ns = format!("myri{pid}");
    let tap_name = format!("myri{pid}t");
    run(&["ip", "netns", "add", &ns]).expect("create the namespace");
    let _cleanup = Cleanup::netns(&ns);

    let tap = match TunTapInterface::new(&tap_name, Medium::Ethernet) {
        Ok(t) => t,
        Err(e) => {
            lro_testkit::sys::skip(&format!("cannot create a TAP device: {e}"));
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
        run(cmd).expect("configure the namespace");
    }
    // Wire-size frames with real checksums: no TSO/GSO, no checksum offload on the sender.
    let _ = run(&[
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
