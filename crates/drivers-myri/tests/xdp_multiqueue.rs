//! Four RX queues and sixteen connections: one XDP program with four XSKMAP slots, one AF_XDP
//! socket, one coalescer and one smoltcp interface per queue, each queue on its own thread
//! (shared nothing: the kernel's transmit hash spreads the connections over the veth queues,
//! and a connection's frames stay on its queue). Every connection must arrive byte-exact;
//! each queue's coalescer is counted, and every queue's UMEM frames are accounted for.
//!
//! Needs root, `ip`, `ethtool` and AF_XDP; skips with a printed reason otherwise.
#![cfg(all(target_os = "linux", feature = "xdp", feature = "smoltcp"))]

mod xdp_common;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use drivers_myri::smoltcp::iface::SocketHandle;
use drivers_myri::smoltcp::socket::tcp;
use drivers_myri::xdp::{FrameAccount, XdpMode, XdpProgram, XskConfig};
use lro_core::Stats;
use xdp_common::{arp_request, kernel_client, mac_of, staging, Fnv, Node, Primed};

const QUEUES: u32 = 4;
const CONNECTIONS: u16 = 16;
const PER_CONNECTION: usize = 3 << 20;
const PORT: u16 = 7000;
const LIMIT: Duration = Duration::from_secs(90);

/// One connection as smoltcp received it.
#[derive(Debug, Clone, Copy)]
struct Received {
    queue: u32,
    bytes: usize,
    hash: u64,
}

/// One queue's figures.
#[derive(Debug)]
struct QueueReport {
    queue: u32,
    connections: usize,
    frames_in: u64,
    to_stack: u64,
    engine: Stats,
    account: FrameAccount,
}

/// One queue: socket, coalescer and smoltcp with a listener on every port; serves what comes.
fn serve_queue(
    xdp: &XdpProgram,
    queue: u32,
    kernel_mac: [u8; 6],
    ready: &Barrier,
    done: &AtomicUsize,
    results: &Mutex<BTreeMap<u16, Received>>,
) -> Result<QueueReport, String> {
    let config = XskConfig::default().with_frames(2048, 512);
    let socket = xdp.socket(queue, &config);
    // Every queue has its socket (or failed) before the clients start.
    ready.wait();
    let (rx, tx) = socket.map_err(|e| e.to_string())?.split();
    let primed = Primed {
        first: VecDeque::from([arp_request(kernel_mac, [198, 18, 0, 1])]),
        rx,
    };
    let mut staging = staging();
    let mut node = Node::new(primed, tx, &mut staging);
    let mut conns: Vec<(u16, SocketHandle, Fnv, usize, bool)> = (0..CONNECTIONS)
        .map(|i| {
            let port = PORT + i;
            (
                port,
                node.listen(port, 512 << 10, 4096),
                Fnv::new(),
                0,
                false,
            )
        })
        .collect();
    let start = Instant::now();
    let mut served = 0;
    while done.load(Ordering::Acquire) < usize::from(CONNECTIONS) {
        if start.elapsed() > LIMIT {
            return Err(format!("queue {queue}: stuck, {served} connections served"));
        }
        node.poll();
        let mut got_any = 0;
        for (port, handle, hash, bytes, finished) in &mut conns {
            if *finished {
                continue;
            }
            let socket = node.sockets.get_mut::<tcp::Socket<'_>>(*handle);
            while socket.can_recv() {
                let n = socket
                    .recv(|d| {
                        hash.update(d);
                        (d.len(), d.len())
                    })
                    .map_err(|e| format!("recv: {e}"))?;
                *bytes += n;
                got_any += n;
            }
            if *bytes > 0 && !socket.may_recv() && !socket.can_recv() {
                socket.close();
                *finished = true;
                served += 1;
                results.lock().expect("results").insert(
                    *port,
                    Received {
                        queue,
                        bytes: *bytes,
                        hash: hash.0,
                    },
                );
                done.fetch_add(1, Ordering::AcqRel);
            }
        }
        node.kick();
        if got_any == 0 {
            node.wait();
        }
    }
    // Let the FINs go out.
    for _ in 0..5 {
        node.poll();
        node.kick();
    }
    let stats = node.dev.stats();
    let engine = node.dev.engine_stats().clone();
    let (mut primed, _tx) = node.finish();
    xdp_common::drain(&mut primed.rx);
    Ok(QueueReport {
        queue,
        connections: served,
        frames_in: stats.frames_in,
        to_stack: stats.frames_to_stack,
        engine,
        account: primed.rx.account(),
    })
}

#[test]
fn four_queues_sixteen_connections_byte_exact() {
    let Some(net) = xdp_common::setup("m", QUEUES) else {
        return;
    };
    let kernel_mac = mac_of(&net.ns_b, &net.if_b).expect("the kernel side's MAC");
    let ns_a = net.ns_a.clone();
    let if_a = net.if_a.clone();
    let ns_b = net.ns_b.clone();
    let (reports, received, sent) = thread::spawn(move || {
        xdp_common::enter(&ns_a).expect("setns");
        // Fewer XSKMAP slots than receive queues when asked for.
        let one = XdpProgram::attach_with_queues(&if_a, 1, XdpMode::Native).expect("attach");
        assert_eq!((one.queues(), one.rx_queues()), (1, QUEUES));
        one.detach().expect("detach");
        let xdp = XdpProgram::attach(&if_a, XdpMode::Native).expect("attach");
        assert_eq!(xdp.queues(), QUEUES, "one XSKMAP slot per RX queue");
        let done = AtomicUsize::new(0);
        let results = Mutex::new(BTreeMap::new());
        let ready = Barrier::new(QUEUES as usize + 1);
        let (reports, sent) = thread::scope(|s| {
            let servers: Vec<_> = (0..QUEUES)
                .map(|q| {
                    let (xdp, ready, done, results) = (&xdp, &ready, &done, &results);
                    s.spawn(move || serve_queue(xdp, q, kernel_mac, ready, done, results))
                })
                .collect();
            ready.wait();
            // The listeners and the primed neighbour caches follow within a poll.
            thread::sleep(Duration::from_millis(100));
            let clients: Vec<_> = (0..CONNECTIONS)
                .map(|i| {
                    let ns = ns_b.clone();
                    s.spawn(move || {
                        kernel_client(&ns, PORT + i, PER_CONNECTION, 0x1000 + u64::from(i), LIMIT)
                    })
                })
                .collect();
            let sent: Vec<u64> = clients
                .into_iter()
                .map(|c| c.join().expect("client thread").expect("kernel client"))
                .collect();
            let reports: Vec<QueueReport> = servers
                .into_iter()
                .map(|h| h.join().expect("queue thread").expect("queue served"))
                .collect();
            (reports, sent)
        });
        xdp.detach().expect("detach");
        (reports, results.into_inner().expect("results"), sent)
    })
    .join()
    .expect("test thread");

    let mut total = Stats::new();
    for r in &reports {
        total.add(&r.engine);
        println!(
            "  queue {}: {} connections, {} frames -> {} segments to smoltcp (engine: {} in, {} merged, {} segments); {}",
            r.queue,
            r.connections,
            r.frames_in,
            r.to_stack,
            r.engine.frames_in,
            r.engine.frames_merged,
            r.engine.segments,
            r.account
        );
    }
    let busy = reports.iter().filter(|r| r.connections > 0).count();
    println!(
        "xdp-multiqueue: {} connections byte-exact over {busy} of {QUEUES} queues, {} frames -> {} segments to smoltcp",
        received.len(),
        total.frames_in,
        total.segments
    );

    assert_eq!(
        received.len(),
        usize::from(CONNECTIONS),
        "every connection served once"
    );
    for (i, hash) in sent.iter().enumerate() {
        let r = received[&(PORT + i as u16)];
        assert_eq!(
            r.bytes, PER_CONNECTION,
            "connection {i} complete (queue {})",
            r.queue
        );
        assert_eq!(
            r.hash, *hash,
            "connection {i} byte-exact (queue {})",
            r.queue
        );
    }
    for r in &reports {
        assert!(
            r.engine.is_conserved(),
            "queue {} engine conservation",
            r.queue
        );
        assert_eq!(
            r.engine.frames_in, r.frames_in,
            "queue {}: every frame through its coalescer",
            r.queue
        );
        assert!(
            r.account.is_conserved() && r.account.held == 0,
            "queue {}: {}",
            r.queue,
            r.account
        );
        let served = received.values().filter(|x| x.queue == r.queue).count();
        assert_eq!(served, r.connections);
        if r.connections > 0 {
            assert!(r.engine.frames_merged > 0, "queue {} coalesced", r.queue);
        }
    }
    // The kernel spread the connections: sixteen on one queue would mean the queues were not
    // separate (1 in 4^15 by chance).
    assert!(busy >= 2, "connections spread over {busy} queue(s)");
}
