//! Seed 000 on real traffic: smoltcp is the bulk sender over AF_XDP, the kernel receiver in the
//! other namespace ACKs every segment (`quickack 1` on its route, GRO off on its veth), the ACKs
//! come back through AF_XDP and the coalescer merges the pure ones before smoltcp sees them
//! (`Lro` policy), or does not (`Gro` policy: Linux GRO never merges pure ACKs, as the
//! unpatched `inet_lro` did not).
//!
//! Measured: smoltcp's service demand, the CPU time of the smoltcp thread's `Interface::poll`
//! (which includes draining the socket and coalescing) per KB sent, with ACK merging off and
//! on, in alternating runs of one test. The `sendto` kicks that make the kernel send what
//! smoltcp queued (on veth the receiver's softirq work runs inside them) happen outside the
//! measured polls and are reported apart. Timing is reported, never asserted, and compared with
//! the seed's target (at least 20% lower) only in an optimised build (`cargo test --release -p
//! drivers-myri --all-features --test xdp_ack_merge -- --nocapture`): in a debug build smoltcp's
//! and lro's unoptimised code dominate both modes alike.
//!
//! Prints `xdp-ack-merge: <acks in> acks -> <acks to smoltcp>, service demand <off> -> <on>
//! us/KB`. Needs root, `ip`, `ethtool` and AF_XDP; skips with a printed reason otherwise.
//!
//! Knobs for longer measurements (defaults in brackets): `XDP_ACK_RUNS` runs per mode [4],
//! `XDP_ACK_MIB` MiB per run [16], `XDP_ACK_TX_FRAMES` transmit frames of the socket [1024]:
//! smoltcp sends at most that many segments per poll, so it bounds the ACK bursts the coalescer
//! sees; `XDP_ACK_SNDBUF_KIB` smoltcp's send buffer [256]: what it may have in flight, so it
//! bounds what one poll sends too (see [`SNDBUF_KIB`]). `XDP_ACK_ONLY=on` or `off` runs one
//! mode only (for a profiler: `scripts/ack-merge-profile.sh` splits the poll CPU per segment by
//! where it goes); the comparison is then not printed.
#![cfg(all(target_os = "linux", feature = "xdp", feature = "smoltcp"))]

mod xdp_common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::smoltcp::wire::{IpAddress, IpEndpoint};
use drivers_myri::xdp::{XdpMode, XdpProgram, XskConfig};
use lro_core::Config;
use lro_testkit::sys::Stream;
use xdp_common::{kernel_server, output, staging, thread_cpu_ns, Fnv, Node};

/// A knob from the environment.
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .unwrap_or(default)
}
const PORT: u16 = 6000;

/// smoltcp's send buffer, KiB: a few times this veth's bandwidth-delay product (about 60 KB at
/// 5 Gbit/s and 100 us), so the window does not hold the sender back. With 2 MiB (until
/// 2026-11-26) smoltcp sent about 480 segments per poll, whose payload (700 KB) and UMEM frames
/// (2 MB) streamed through the cache in every poll: both modes paid for it per segment, which
/// hid part of what merging saves. Sixteen alternating invocations of 30 runs per mode each:
/// service demand 0.86x with merging off and 0.84x on; on/off 0.784x (0.75x to 0.83x) with
/// 2 MiB, 0.759x (0.68x to 0.79x) with 256 KiB.
const SNDBUF_KIB: usize = 256;
const LIMIT: Duration = Duration::from_secs(60);

/// The experiment's settings: the knobs, or their defaults.
#[derive(Debug, Clone, Copy)]
struct Knobs {
    runs_per_mode: usize,
    /// Bytes per run.
    per_run: usize,
    tx_frames: u32,
    /// smoltcp's send buffer, bytes.
    sndbuf: usize,
}

impl Knobs {
    fn from_env() -> Self {
        Self {
            runs_per_mode: knob("XDP_ACK_RUNS", 4),
            per_run: knob("XDP_ACK_MIB", 16) << 20,
            tx_frames: knob("XDP_ACK_TX_FRAMES", 1024) as u32,
            sndbuf: knob("XDP_ACK_SNDBUF_KIB", SNDBUF_KIB) << 10,
        }
    }
}

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    merge: bool,
    bytes: usize,
    poll_cpu_ns: u64,
    kick_cpu_ns: u64,
    wall: Duration,
    acks_in: u64,
    acks_to_stack: u64,
    frames_sent: u64,
    polls: u64,
    /// Segments the kernel receiver sent (its pure ACKs, SYN-ACK and FIN included).
    kernel_out: u64,
    /// Segments the kernel merged in its socket backlog (`TCPBacklogCoalesce`): each merge
    /// saves one ACK.
    backlog_merged: u64,
    /// Frames the kernel's veth end could not hand to the XDP end (`tx_dropped`: its peer's
    /// ring was full).
    veth_dropped: u64,
    /// Frames the AF_XDP socket dropped (RX ring full, fill ring empty, other).
    xsk_dropped: u64,
}

impl Run {
    fn us_per_kb(&self) -> f64 {
        self.poll_cpu_ns as f64 / 1e3 / (self.bytes as f64 / 1024.0)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// smoltcp sends `k.per_run` bytes to the kernel server on `port`; returns the run and the hash
/// of what it sent.
fn send_run(
    node: &mut Node<'_>,
    ns_b: &str,
    if_b: &str,
    port: u16,
    merge: bool,
    k: &Knobs,
) -> Result<(Run, u64, (usize, u64)), String> {
    let per_run = k.per_run;
    node.dev
        .set_config(if merge { Config::lro() } else { Config::gro() });
    node.dev.reset_stats();
    let (ready_tx, ready_rx) = mpsc::channel();
    let ns = ns_b.to_owned();
    let server = thread::spawn(move || kernel_server(&ns, port, ready_tx, LIMIT));
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .map_err(|_| "kernel server not ready".to_string())?;

    let mut socket = tcp::Socket::new(
        tcp::SocketBuffer::new(vec![0u8; 64 * 1024]),
        tcp::SocketBuffer::new(vec![0u8; k.sndbuf]),
    );
    let remote = IpEndpoint::new(IpAddress::v4(198, 18, 0, 1), port);
    socket
        .connect(node.iface.context(), remote, 40000 + port)
        .map_err(|e| format!("connect: {e}"))?;
    let handle = node.sockets.add(socket);

    let mut data = Stream::new(0xac4 + u64::from(port));
    let mut hash = Fnv::new();
    let mut sent = 0usize;
    let mut closed = false;
    let mut run = Run {
        merge,
        bytes: per_run,
        poll_cpu_ns: 0,
        kick_cpu_ns: 0,
        wall: Duration::ZERO,
        acks_in: 0,
        acks_to_stack: 0,
        frames_sent: 0,
        polls: 0,
        kernel_out: 0,
        backlog_merged: 0,
        veth_dropped: 0,
        xsk_dropped: 0,
    };
    let kernel_before = KernelTcp::read(ns_b, if_b)?;
    let xsk_before = xsk_dropped(node)?;
    let tx_before = node.dev.inner().stats().frames;
    let mut established: Option<Instant> = None;
    let start = Instant::now();
    loop {
        if start.elapsed() > LIMIT {
            return Err(format!(
                "run stuck after {sent} bytes: {:?}",
                node.dev.stats()
            ));
        }
        let cpu = node.poll();
        let socket = node.sockets.get_mut::<tcp::Socket<'_>>(handle);
        if established.is_some() {
            run.poll_cpu_ns += cpu;
            run.polls += 1;
        } else if socket.may_send() {
            established = Some(Instant::now());
        }
        let mut progressed = false;
        while sent < per_run && socket.can_send() {
            let n = socket
                .send(|buf| {
                    let n = buf.len().min(per_run - sent);
                    data.fill(&mut buf[..n]);
                    hash.update(&buf[..n]);
                    (n, n)
                })
                .map_err(|e| format!("send: {e}"))?;
            sent += n;
            progressed |= n > 0;
        }
        if sent == per_run && !closed {
            socket.close();
            closed = true;
        }
        // Everything sent has been acknowledged (our FIN included).
        let done = closed
            && socket.send_queue() == 0
            && matches!(
                socket.state(),
                tcp::State::FinWait2 | tcp::State::TimeWait | tcp::State::Closed
            );
        let t0 = thread_cpu_ns();
        node.kick();
        if established.is_some() {
            run.kick_cpu_ns += thread_cpu_ns() - t0;
        }
        if done {
            break;
        }
        if !progressed && node.dev.driver().batched() == 0 && node.dev.inner().pending() == 0 {
            node.wait();
        }
    }
    run.wall = established.map_or(Duration::ZERO, |t| t.elapsed());
    let s = node.dev.stats();
    run.acks_to_stack = s.pure_acks_to_stack;
    run.acks_in = s.pure_acks_to_stack + s.superseded;
    run.frames_sent = node.dev.inner().stats().frames - tx_before;
    node.sockets.remove(handle);
    // Let the kernel see the end of the connection.
    for _ in 0..10 {
        node.poll();
        node.kick();
    }
    let received = server
        .join()
        .map_err(|_| "kernel server panicked".to_string())?
        .map_err(|e| format!("kernel server: {e}"))?;
    let kernel_after = KernelTcp::read(ns_b, if_b)?;
    run.kernel_out = kernel_after.out_segs - kernel_before.out_segs;
    run.backlog_merged = kernel_after.backlog_coalesce - kernel_before.backlog_coalesce;
    run.veth_dropped = kernel_after.tx_dropped - kernel_before.tx_dropped;
    run.xsk_dropped = xsk_dropped(node)? - xsk_before;
    Ok((run, hash.0, received))
}

/// Frames the smoltcp node's AF_XDP socket dropped so far.
fn xsk_dropped(node: &Node<'_>) -> Result<u64, String> {
    let k = node
        .dev
        .driver()
        .kernel_stats()
        .map_err(|e| format!("XDP_STATISTICS: {e}"))?;
    Ok(k.rx_dropped + k.rx_ring_full + k.rx_fill_ring_empty)
}

/// The kernel receiver's counters: TCP's (its namespace's `/proc/net/snmp` and `netstat`) and
/// its veth end's transmit drops.
#[derive(Debug, Clone, Copy)]
struct KernelTcp {
    out_segs: u64,
    backlog_coalesce: u64,
    tx_dropped: u64,
}

impl KernelTcp {
    /// One `ip netns exec`: the veth end's `tx_dropped` (its first line), then the TCP counters.
    fn read(ns: &str, ifname: &str) -> Result<Self, String> {
        let stat = format!("/sys/class/net/{ifname}/statistics/tx_dropped");
        let text = output(&[
            "ip",
            "netns",
            "exec",
            ns,
            "cat",
            &stat,
            "/proc/net/snmp",
            "/proc/net/netstat",
        ])?;
        let tx_dropped = text.lines().next().unwrap_or("").trim();
        Ok(Self {
            out_segs: proc_counter(&text, "Tcp:", "OutSegs")?,
            backlog_coalesce: proc_counter(&text, "TcpExt:", "TCPBacklogCoalesce")?,
            tx_dropped: tx_dropped
                .parse()
                .map_err(|e| format!("{stat} = {tx_dropped}: {e}"))?,
        })
    }
}

/// One counter of a `/proc/net/snmp`-style text: a line of names, then a line of values, both
/// starting with `group`.
fn proc_counter(text: &str, group: &str, name: &str) -> Result<u64, String> {
    let mut lines = text.lines().filter(|l| l.starts_with(group));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        if let Some((_, v)) = names
            .split_whitespace()
            .zip(values.split_whitespace())
            .find(|(n, _)| *n == name)
        {
            return v.parse().map_err(|e| format!("{group} {name} = {v}: {e}"));
        }
    }
    Err(format!("no {group} {name} in the kernel's counters"))
}

fn experiment(
    ns_a: &str,
    if_a: &str,
    ns_b: &str,
    if_b: &str,
    k: &Knobs,
) -> Result<Vec<Run>, String> {
    xdp_common::enter(ns_a).map_err(|e| format!("setns: {e}"))?;
    let xdp = XdpProgram::attach(if_a, XdpMode::Native).map_err(|e| e.to_string())?;
    // Kicks only between polls, so the kernel's work inside `sendto` is not charged to
    // smoltcp's polls.
    let config = XskConfig::default()
        .with_frames(4096, k.tx_frames)
        .with_auto_kick(None);
    let (rx, tx) = xdp.socket(0, &config).map_err(|e| e.to_string())?.split();
    let mut staging = staging();
    let mut node = Node::new(rx, tx, &mut staging);
    let mut runs = Vec::new();
    // `XDP_ACK_ONLY`: one mode, `runs_per_mode` runs; else the two alternating.
    let only = match std::env::var("XDP_ACK_ONLY").ok().as_deref() {
        None => None,
        Some("on") => Some(true),
        Some("off") => Some(false),
        Some(other) => return Err(format!("XDP_ACK_ONLY={other}: on or off")),
    };
    let count = if only.is_some() {
        k.runs_per_mode
    } else {
        2 * k.runs_per_mode
    };
    for i in 0..count {
        let merge = only.unwrap_or(i % 2 == 1);
        let port = PORT + i as u16;
        let (run, sent_hash, (got, got_hash)) = send_run(&mut node, ns_b, if_b, port, merge, k)?;
        if got != k.per_run || got_hash != sent_hash {
            return Err(format!(
                "run {i}: the kernel received {got} bytes (hash match: {})",
                got_hash == sent_hash
            ));
        }
        runs.push(run);
    }
    let (mut rx, _tx) = node.finish();
    xdp_common::drain(&mut rx);
    let account = rx.account();
    if !account.is_conserved() || account.held != 0 {
        return Err(format!("UMEM frames not conserved: {account}"));
    }
    println!("  {account}");
    xdp.detach().map_err(|e| e.to_string())?;
    Ok(runs)
}

#[test]
fn seed_000_pure_acks_merged_before_smoltcp_cost_reported() {
    let Some(net) = xdp_common::setup("k", 1) else {
        return;
    };
    net.kernel_acks_every_segment()
        .expect("quickack route, GRO off");
    let k = Knobs::from_env();
    let Knobs {
        runs_per_mode,
        tx_frames,
        sndbuf,
        ..
    } = k;
    let (ns_a, if_a) = (net.ns_a.clone(), net.if_a.clone());
    let (ns_b, if_b) = (net.ns_b.clone(), net.if_b.clone());
    let runs = thread::spawn(move || experiment(&ns_a, &if_a, &ns_b, &if_b, &k))
        .join()
        .expect("sender thread")
        .expect("the experiment");

    for r in &runs {
        println!(
            "  merge {:<3} {} bytes in {:.2?}: {} frames sent, kernel sent {} ({} segments merged in its backlog), dropped {} at the veth and {} at the socket, {} pure ACKs in -> {} to smoltcp, {} polls, poll CPU {:.1} ms ({:.3} us/KB), kicks {:.1} ms",
            if r.merge { "on" } else { "off" },
            r.bytes,
            r.wall,
            r.frames_sent,
            r.kernel_out,
            r.backlog_merged,
            r.veth_dropped,
            r.xsk_dropped,
            r.acks_in,
            r.acks_to_stack,
            r.polls,
            r.poll_cpu_ns as f64 / 1e6,
            r.us_per_kb(),
            r.kick_cpu_ns as f64 / 1e6,
        );
    }
    let (off, on): (Vec<&Run>, Vec<&Run>) = runs.iter().partition(|r| !r.merge);
    // What the test asserts (the timing below is reported, never asserted), in either mode.
    for r in &off {
        // Without merging every pure ACK reaches smoltcp.
        assert_eq!(r.acks_to_stack, r.acks_in, "merging off: {r:?}");
        assert!(r.acks_in > 0, "the kernel ACKed: {r:?}");
    }
    for r in &on {
        assert!(r.acks_to_stack < r.acks_in, "merging on merged ACKs: {r:?}");
    }
    for r in &runs {
        // The coalescer counts no pure ACK the kernel did not send.
        assert!(r.acks_in <= r.kernel_out, "more ACKs in than sent: {r:?}");
    }
    // The premise: the kernel receiver ACKs every segment (quickack on its route, checked
    // above; no GRO). Each segment it receives is ACKed, or merged into the one before it in its
    // socket's backlog while its reader holds the lock, and that merge saves an ACK. Delayed ACKs
    // would give at most one ACK per two segments. Counted where the kernel sends them: ACKs
    // lost on the way to smoltcp (the drop counters printed above) do not undo the premise. A
    // debug run on a busy CI machine once saw only 0.46 pure ACKs per segment reach smoltcp.
    let (answered, sent) = runs.iter().fold((0, 0), |(a, s), r| {
        (a + r.kernel_out + r.backlog_merged, s + r.frames_sent)
    });
    assert!(
        answered * 4 >= sent * 3,
        "the kernel sent {answered} ACKs (or merged segments) for {sent} segments: not one per segment"
    );
    if off.is_empty() || on.is_empty() {
        // One mode only (`XDP_ACK_ONLY`): its runs are printed above; nothing to compare.
        let poll_ns: u64 = runs.iter().map(|r| r.poll_cpu_ns).sum();
        let sent: u64 = runs.iter().map(|r| r.frames_sent).sum();
        println!(
            "xdp-ack-merge (merging {} only): poll CPU {:.0} ns per segment sent",
            if on.is_empty() { "off" } else { "on" },
            poll_ns as f64 / sent.max(1) as f64
        );
        return;
    }
    let sd_off = median(off.iter().map(|r| r.us_per_kb()).collect());
    let sd_on = median(on.iter().map(|r| r.us_per_kb()).collect());
    let paired = median(
        off.iter()
            .zip(&on)
            .map(|(a, b)| b.us_per_kb() / a.us_per_kb())
            .collect(),
    );
    let acks_in: u64 = on.iter().map(|r| r.acks_in).sum();
    let acks_to: u64 = on.iter().map(|r| r.acks_to_stack).sum();
    println!(
        "xdp-ack-merge: {acks_in} acks -> {acks_to}, service demand {sd_off:.3} -> {sd_on:.3} us/KB"
    );
    println!(
        "  medians over {runs_per_mode} alternating runs per mode ({tx_frames} TX frames, {} KiB send buffer); on/off {:.2} (paired median {:.2}): {}",
        sndbuf >> 10,
        sd_on / sd_off,
        paired,
        if cfg!(debug_assertions) {
            // smoltcp's and lro's unoptimised code then dominates both modes alike.
            "an unoptimised build, not comparable with the 20% target (rerun with --release)"
        } else if sd_on <= 0.8 * sd_off {
            "meets the 20% target"
        } else {
            "misses the 20% target"
        }
    );
    // Where the saving comes from: poll CPU saved per pure ACK kept from smoltcp (paired runs),
    // against poll CPU per data segment sent. Their quotient, times the ACKs per segment, is
    // the largest saving ACK merging can give this sender.
    let per_ack = median(
        off.iter()
            .zip(&on)
            .filter(|(a, b)| a.acks_to_stack > b.acks_to_stack)
            .map(|(a, b)| {
                (a.poll_cpu_ns as f64 - b.poll_cpu_ns as f64)
                    / (a.acks_to_stack - b.acks_to_stack) as f64
            })
            .collect(),
    );
    let per_segment = median(
        off.iter()
            .map(|r| r.poll_cpu_ns as f64 / r.frames_sent.max(1) as f64)
            .collect(),
    );
    let acks_per_segment = median(
        off.iter()
            .map(|r| r.acks_in as f64 / r.frames_sent.max(1) as f64)
            .collect(),
    );
    println!(
        "  poll CPU saved per ACK kept from smoltcp {per_ack:.0} ns, poll CPU per segment sent {per_segment:.0} ns (merging off), {acks_per_segment:.2} ACKs per segment: merging can save about {:.0}% of this sender's poll CPU",
        100.0 * per_ack * acks_per_segment / per_segment
    );
}
