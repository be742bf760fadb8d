//! Bad input from the wire: malformed, truncated and hostile frames, injected with an
//! AF_PACKET raw socket on the peer side of the veth pair, go through XDP and AF_XDP into the
//! coalescer and smoltcp. Nothing panics; every frame reaches smoltcp or is counted (the
//! adapter counts every frame it takes, the engine every reason it passes one on); a kernel
//! TCP connection running while garbage is injected still arrives byte-exact; and every UMEM
//! frame is accounted for at the end.
//!
//! Needs root, `ip`, `ethtool` and AF_XDP; skips with a printed reason otherwise.
#![cfg(all(target_os = "linux", feature = "xdp", feature = "smoltcp"))]

mod xdp_common;

use std::collections::VecDeque;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::xdp::{XdpMode, XdpProgram, XskConfig};
use lro_core::testing::{
    Corrupt, EthernetSpec, FrameSpec, IpSpec, Ipv4Spec, LinkSpec, TCP_ACK, TCP_PSH,
};
use lro_core::{PassReason, Stats};
use xdp_common::{
    arp_request, inject, kernel_client, mac_of, staging, Fnv, Node, Primed, SMOL_IP, SMOL_MAC,
};

const PORT: u16 = 5301;
const CONNECTION_BYTES: usize = 8 << 20;
const LIMIT: Duration = Duration::from_secs(60);

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A valid Ethernet/IPv4/TCP frame from the kernel side to smoltcp (port 9: nothing listens).
fn tcp_frame(kernel_mac: [u8; 6], payload: &[u8], flags: u8, corrupt: Corrupt) -> Vec<u8> {
    let spec = FrameSpec {
        link: LinkSpec::Ethernet(EthernetSpec {
            dst: SMOL_MAC,
            src: kernel_mac,
            ..EthernetSpec::default()
        }),
        ip: IpSpec::V4(Ipv4Spec {
            src: [198, 18, 0, 1],
            dst: SMOL_IP,
            ..Ipv4Spec::default()
        }),
        ..FrameSpec::ipv4_tcp(40999, 9)
    }
    .seq(1000)
    .ack(1)
    .flags(flags)
    .payload(payload)
    .corrupt(corrupt);
    let mut buf = vec![0u8; spec.len()];
    spec.write(&mut buf).expect("sized to fit");
    buf
}

/// Handcrafted bad frames, each aimed at one check, then mutated copies of good frames.
fn hostile_frames(kernel_mac: [u8; 6], random: usize, seed: u64) -> Vec<Vec<u8>> {
    let good = tcp_frame(kernel_mac, &[0x5a; 100], TCP_ACK | TCP_PSH, Corrupt::None);
    let pure_ack = tcp_frame(kernel_mac, &[], TCP_ACK, Corrupt::None);
    let mut frames = Vec::new();
    let eth = |ethertype: u16| {
        let mut f = vec![0u8; 14];
        f[0..6].copy_from_slice(&SMOL_MAC);
        f[6..12].copy_from_slice(&kernel_mac);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    };
    // Only an Ethernet header, and a truncated IPv4 header.
    frames.push(eth(0x0800));
    frames.push(good[..24].to_vec());
    // IHL below 5, IHL beyond the frame.
    let mut f = good.clone();
    f[14] = 0x44;
    frames.push(f);
    let mut f = good[..40].to_vec();
    f[14] = 0x4f;
    frames.push(f);
    // Total length past the frame, and shorter than the headers.
    let mut f = good.clone();
    f[16..18].copy_from_slice(&1000u16.to_be_bytes());
    frames.push(f);
    let mut f = good.clone();
    f[16..18].copy_from_slice(&20u16.to_be_bytes());
    frames.push(f);
    // Bad IPv4 and TCP checksums.
    frames.push(tcp_frame(
        kernel_mac,
        &[1; 50],
        TCP_ACK,
        Corrupt::IpChecksum,
    ));
    frames.push(tcp_frame(
        kernel_mac,
        &[2; 50],
        TCP_ACK,
        Corrupt::TcpChecksum,
    ));
    // TCP data offset below 5, and beyond the frame.
    let mut f = good.clone();
    f[46] = 0x30;
    frames.push(f);
    let mut f = good[..60].to_vec();
    f[46] = 0xf0;
    frames.push(f);
    // A fragment (MF and an offset).
    let mut f = good.clone();
    f[20] = 0x20;
    f[21] = 0x10;
    frames.push(f);
    // Every TCP flag at once.
    frames.push(tcp_frame(kernel_mac, &[3; 10], 0xff, Corrupt::None));
    // Three VLAN tags.
    let mut f = eth(0x8100);
    for _ in 0..2 {
        f.extend_from_slice(&[0, 1, 0x81, 0x00]);
    }
    f.extend_from_slice(&[0, 1, 0x08, 0x00]);
    f.extend_from_slice(&good[14..]);
    frames.push(f);
    // IPv6: a truncated header; a hop-by-hop header longer than the frame.
    let mut f = eth(0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 40, 6, 64]);
    frames.push(f);
    let mut f = eth(0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 16, 0, 64]);
    f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[6, 200, 0, 0, 0, 0, 0, 0]);
    frames.push(f);
    // ARP garbage, an unknown EtherType.
    let mut f = eth(0x0806);
    f.extend_from_slice(&[0xee; 20]);
    frames.push(f);
    let mut f = eth(0x88b5);
    f.extend_from_slice(&[0xab; 46]);
    frames.push(f);
    // A pure ACK padded with bytes whose sum is not zero (must not be trimmed).
    let mut f = pure_ack.clone();
    f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 0]);
    frames.push(f);
    // A full-size frame of noise behind a valid Ethernet header.
    let mut rng = Rng(seed | 1);
    let mut f = eth(0x0800);
    f.extend((0..1500).map(|_| rng.next() as u8));
    frames.push(f);
    // Mutated copies of good frames: flipped header bytes, truncation, lengths rewritten.
    for _ in 0..random {
        let len = rng.below(1400);
        let payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let mut f = tcp_frame(kernel_mac, &payload, TCP_ACK, Corrupt::None);
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 => {
                    let at = 12 + rng.below(f.len().min(80) - 12);
                    f[at] ^= 1 << rng.below(8);
                }
                1 => {
                    let keep = 14 + rng.below(f.len() - 14);
                    f.truncate(keep.max(14));
                }
                2 if f.len() >= 18 => {
                    let v = rng.next() as u16;
                    f[16..18].copy_from_slice(&v.to_be_bytes());
                }
                _ if f.len() >= 47 => f[46] = (rng.next() as u8) & 0xf0,
                _ => {}
            }
        }
        frames.push(f);
    }
    frames
}

/// What the smoltcp side saw.
#[derive(Debug)]
struct Outcome {
    phase1_frames: u64,
    phase1_engine: Stats,
    phase1_to_stack: u64,
    bytes: usize,
    hash: u64,
    account_ok: bool,
    account: String,
}

fn victim(
    ns_a: &str,
    if_a: &str,
    kernel_mac: [u8; 6],
    expect_phase1: usize,
    go: mpsc::Receiver<()>,
    ready: mpsc::Sender<()>,
) -> Result<Outcome, String> {
    xdp_common::enter(ns_a).map_err(|e| format!("setns: {e}"))?;
    let xdp = XdpProgram::attach(if_a, XdpMode::Native).map_err(|e| e.to_string())?;
    let (rx, tx) = xdp
        .socket(0, &XskConfig::default())
        .map_err(|e| e.to_string())?
        .split();
    // smoltcp learns the kernel's MAC from an injected ARP request first, so it never asks
    // (the answer would be a frame nobody injected).
    let primed = Primed {
        first: VecDeque::from([arp_request(kernel_mac, [198, 18, 0, 1])]),
        rx,
    };
    let mut staging = staging();
    let mut node = Node::new(primed, tx, &mut staging);
    let handle = node.listen(PORT, 1 << 20, 4096);
    node.poll();
    node.kick();
    let _ = ready.send(());

    // Phase 1: only injected frames arrive; every one must be taken and counted.
    let start = Instant::now();
    while (node.dev.stats().frames_in as usize) < expect_phase1 && start.elapsed() < LIMIT {
        node.poll();
        node.kick();
        node.wait();
    }
    // A moment more, to see any frame beyond those expected.
    let settle = Instant::now();
    while settle.elapsed() < Duration::from_millis(200) {
        node.poll();
        node.kick();
        node.wait();
    }
    let phase1_frames = node.dev.stats().frames_in;
    let phase1_to_stack = node.dev.stats().frames_to_stack;
    let phase1_engine = node.dev.engine_stats().clone();
    let _ = ready.send(());
    go.recv_timeout(LIMIT)
        .map_err(|_| "no go for phase 2".to_string())?;

    // Phase 2: a kernel connection while more garbage is injected.
    let mut hash = Fnv::new();
    let mut bytes = 0;
    let mut connected = false;
    let start = Instant::now();
    loop {
        if start.elapsed() > LIMIT {
            return Err(format!("connection stuck after {bytes} bytes"));
        }
        node.poll();
        let socket = node.sockets.get_mut::<tcp::Socket<'_>>(handle);
        connected |= socket.is_active();
        let mut got = 0;
        while socket.can_recv() {
            got += socket
                .recv(|d| {
                    hash.update(d);
                    (d.len(), d.len())
                })
                .map_err(|e| format!("recv: {e}"))?;
        }
        bytes += got;
        let done = connected && bytes > 0 && !socket.may_recv() && !socket.can_recv();
        if done {
            socket.close();
        }
        node.kick();
        if done {
            node.poll();
            node.kick();
            break;
        }
        if got == 0 {
            node.wait();
        }
    }
    let (mut primed, _tx) = node.finish();
    xdp_common::drain(&mut primed.rx);
    let account = primed.rx.account();
    xdp.detach().map_err(|e| e.to_string())?;
    Ok(Outcome {
        phase1_frames,
        phase1_engine,
        phase1_to_stack,
        bytes,
        hash: hash.0,
        account_ok: account.is_conserved() && account.held == 0,
        account: account.to_string(),
    })
}

#[test]
fn hostile_frames_are_counted_never_panic_never_leak() {
    let Some(net) = xdp_common::setup("h", 1) else {
        return;
    };
    let kernel_mac = mac_of(&net.ns_b, &net.if_b).expect("the kernel side's MAC");
    let phase1 = hostile_frames(kernel_mac, 2000, 0x0bad_5eed);
    let phase2 = hostile_frames(kernel_mac, 2000, 0x0bad_f00d);

    let (go_tx, go_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let (ns_a, if_a) = (net.ns_a.clone(), net.if_a.clone());
    // The phase-1 frames and the ARP request that primes smoltcp.
    let expect = phase1.len() + 1;
    let victim = thread::spawn(move || victim(&ns_a, &if_a, kernel_mac, expect, go_rx, ready_tx));
    ready_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("smoltcp side ready");

    let (ns_b, if_b) = (net.ns_b.clone(), net.if_b.clone());
    let injected = thread::spawn(move || inject(&ns_b, &if_b, &phase1, Duration::ZERO))
        .join()
        .expect("injector")
        .expect("inject phase 1");
    ready_rx.recv_timeout(LIMIT).expect("phase 1 done");

    go_tx.send(()).expect("go");
    let ns_b = net.ns_b.clone();
    let client = thread::spawn(move || kernel_client(&ns_b, PORT, CONNECTION_BYTES, 0x4057, LIMIT));
    let (ns_b, if_b) = (net.ns_b.clone(), net.if_b.clone());
    let injector = thread::spawn(move || inject(&ns_b, &if_b, &phase2, Duration::from_micros(200)));
    let sent_hash = client
        .join()
        .expect("client thread")
        .expect("kernel client");
    let injected2 = injector.join().expect("injector").expect("inject phase 2");
    let out = victim
        .join()
        .expect("smoltcp thread")
        .expect("smoltcp side");

    let e = &out.phase1_engine;
    println!(
        "xdp-hostile: {injected} + {injected2} hostile frames injected, {} taken in phase 1 (with the priming ARP request), {} to smoltcp; engine passed: {} malformed, {} bad IP checksum, {} bad TCP checksum, {} not IP, {} not TCP, {} fragments, {} control, {} padding, {} unverified; connection {} bytes byte-exact; {}",
        out.phase1_frames,
        out.phase1_to_stack,
        e.passed(PassReason::Malformed),
        e.passed(PassReason::BadIpChecksum),
        e.passed(PassReason::BadTcpChecksum),
        e.passed(PassReason::NotIp),
        e.passed(PassReason::NotTcp),
        e.passed(PassReason::Fragment),
        e.passed(PassReason::Control),
        e.passed(PassReason::Padding),
        e.passed(PassReason::Unverified),
        out.bytes,
        out.account
    );
    // Every injected frame was taken from AF_XDP, went through the engine and reached
    // smoltcp or was counted as released.
    assert_eq!(
        out.phase1_frames as usize,
        injected + 1,
        "every injected frame (and the priming ARP request) taken, nothing else"
    );
    assert!(e.is_conserved(), "engine conservation: {e:?}");
    assert_eq!(e.frames_in, out.phase1_frames);
    assert_eq!(out.phase1_to_stack + e.absorbed, out.phase1_frames);
    // The handcrafted frames hit these checks.
    for (reason, n) in [
        (PassReason::Malformed, e.passed(PassReason::Malformed)),
        (
            PassReason::BadIpChecksum,
            e.passed(PassReason::BadIpChecksum),
        ),
        (
            PassReason::BadTcpChecksum,
            e.passed(PassReason::BadTcpChecksum),
        ),
        (PassReason::NotIp, e.passed(PassReason::NotIp)),
        (PassReason::Fragment, e.passed(PassReason::Fragment)),
        (PassReason::Control, e.passed(PassReason::Control)),
    ] {
        assert!(n > 0, "no frame passed as {reason:?}");
    }
    assert_eq!(out.bytes, CONNECTION_BYTES, "the connection arrived whole");
    assert_eq!(out.hash, sent_hash, "the connection arrived byte-exact");
    assert!(out.account_ok, "UMEM frames conserved: {}", out.account);
}
