//! Kernel TCP client -> veth -> XDP -> AF_XDP -> lro (`Lro` policy) -> smoltcp server: 64 MiB,
//! byte-exact (hash compared), every UMEM frame accounted for at the end.
//!
//! Prints `xdp-e2e: <bytes> bytes byte-exact, <frames> frames -> <segments> segments to
//! smoltcp, <Mb/s>`. Needs root, `ip`, `ethtool` and AF_XDP; skips with a printed reason
//! otherwise. Creates and deletes its own namespaces and veth pair (198.18.0.0/24).
#![cfg(all(target_os = "linux", feature = "xdp", feature = "smoltcp"))]

mod xdp_common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::xdp::{FrameAccount, XdpMode, XdpProgram, XskConfig};
use xdp_common::{kernel_client, staging, Fnv, Node};

const TOTAL: usize = 64 << 20;
const PORT: u16 = 5201;
const LIMIT: Duration = Duration::from_secs(60);

/// What the smoltcp side saw.
#[derive(Debug)]
struct Served {
    bytes: usize,
    hash: u64,
    wall: Duration,
    frames_in: u64,
    to_stack: u64,
    copied: u64,
    merged: u64,
    conserved: bool,
    account: FrameAccount,
    mode: XdpMode,
}

fn serve(ns: &str, ifname: &str, ready: mpsc::Sender<()>) -> Result<Served, String> {
    xdp_common::enter(ns).map_err(|e| format!("setns: {e}"))?;
    let xdp = XdpProgram::attach(ifname, XdpMode::Native).map_err(|e| e.to_string())?;
    let (rx, tx) = xdp
        .socket(0, &XskConfig::default())
        .map_err(|e| e.to_string())?
        .split();
    let mut staging = staging();
    let mut node = Node::new(rx, tx, &mut staging);
    let handle = node.listen(PORT, 1 << 20, 4096);
    let _ = ready.send(());

    let mut hash = Fnv::new();
    let mut bytes = 0usize;
    let mut first: Option<Instant> = None;
    let start = Instant::now();
    loop {
        if start.elapsed() > LIMIT {
            return Err(format!(
                "stuck after {bytes} bytes: {:?} {:?}",
                node.dev.stats(),
                node.dev.driver().account()
            ));
        }
        node.poll();
        let socket = node.sockets.get_mut::<tcp::Socket<'_>>(handle);
        let mut got = 0;
        while socket.can_recv() {
            got += socket
                .recv(|d| {
                    hash.update(d);
                    (d.len(), d.len())
                })
                .map_err(|e| format!("recv: {e}"))?;
        }
        if got > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        bytes += got;
        let done = first.is_some() && !socket.may_recv() && !socket.can_recv();
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
    let wall = first.map_or(Duration::ZERO, |t| t.elapsed());
    let stats = node.dev.stats();
    let engine = node.dev.engine_stats().clone();
    let (mut rx, _tx) = node.finish();
    xdp_common::drain(&mut rx);
    let account = rx.account();
    let mode = xdp.mode();
    xdp.detach().map_err(|e| e.to_string())?;
    Ok(Served {
        bytes,
        hash: hash.0,
        wall,
        frames_in: stats.frames_in,
        to_stack: stats.frames_to_stack,
        copied: stats.segments_copied,
        merged: engine.frames_merged,
        conserved: engine.is_conserved(),
        account,
        mode,
    })
}

#[test]
fn kernel_client_to_smoltcp_over_af_xdp_with_lro() {
    let Some(net) = xdp_common::setup("e", 1) else {
        return;
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let (ns_a, if_a) = (net.ns_a.clone(), net.if_a.clone());
    let server = thread::spawn(move || serve(&ns_a, &if_a, ready_tx));
    if ready_rx.recv_timeout(Duration::from_secs(20)).is_err() {
        panic!("server not ready: {:?}", server.join());
    }
    let ns_b = net.ns_b.clone();
    let client = thread::spawn(move || kernel_client(&ns_b, PORT, TOTAL, 0x5eed, LIMIT));
    let sent_hash = client
        .join()
        .expect("client thread")
        .expect("kernel client");
    let served = server
        .join()
        .expect("server thread")
        .expect("smoltcp over AF_XDP");

    let mbps = served.bytes as f64 * 8.0 / served.wall.as_secs_f64() / 1e6;
    println!(
        "xdp-e2e: {} bytes byte-exact, {} frames -> {} segments to smoltcp, {:.0} Mb/s",
        served.bytes, served.frames_in, served.to_stack, mbps
    );
    println!(
        "  ({} XDP mode, {} segments copied, {} frames merged; {})",
        served.mode, served.copied, served.merged, served.account
    );
    assert_eq!(served.bytes, TOTAL, "every byte arrived");
    assert_eq!(served.hash, sent_hash, "the bytes are the ones sent");
    assert!(served.conserved, "the engine gave back every frame");
    assert!(served.merged > 0 && served.to_stack < served.frames_in);
    assert!(served.account.is_conserved(), "{}", served.account);
    assert_eq!(
        served.account.held, 0,
        "no frame handle leaked: {}",
        served.account
    );
}
