//! `bytes` interop over real UMEM frames: TCP segments injected on the peer side arrive through
//! XDP and AF_XDP, the coalescer merges them, each segment becomes `Bytes` views of its UMEM
//! frames (`segment_to_bytes`, no copy), and another thread checks and drops them. The frames
//! must come back to the socket from that thread (every handle returned, every chunk reposted)
//! and the bytes must be the ones sent; the UMEM is never copied (the views point into it).
//!
//! Needs root, `ip`, `ethtool` and AF_XDP; skips with a printed reason otherwise.
#![cfg(all(target_os = "linux", feature = "xdp", feature = "bytes"))]

mod xdp_common;

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use drivers_myri::bytes::segment_to_bytes;
use drivers_myri::xdp::{UmemFrame, XdpMode, XdpProgram, XskConfig};
use drivers_myri::RxDriver;
use lro_core::testing::{EthernetSpec, FrameSpec, IpSpec, Ipv4Spec, LinkSpec, TCP_ACK};
use lro_core::{Config, Engine, Segment, Sink, Sizes};
use xdp_common::{inject, mac_of, SMOL_IP, SMOL_MAC};

const FRAMES: usize = 400;
const PAYLOAD: usize = 1000;

/// One flow's frames, payload bytes numbered by sequence number.
fn flow(kernel_mac: [u8; 6]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let mut frames = Vec::new();
    let mut stream = Vec::new();
    for k in 0..FRAMES {
        let seq = 1 + (k * PAYLOAD) as u32;
        let payload: Vec<u8> = (0..PAYLOAD).map(|i| (seq as usize + i) as u8).collect();
        stream.extend_from_slice(&payload);
        let spec = FrameSpec {
            link: LinkSpec::Ethernet(EthernetSpec {
                dst: SMOL_MAC,
                src: kernel_mac,
                ..EthernetSpec::default()
            }),
            ip: IpSpec::V4(Ipv4Spec {
                src: [198, 18, 0, 1],
                dst: SMOL_IP,
                id: k as u16,
                ..Ipv4Spec::default()
            }),
            ..FrameSpec::ipv4_tcp(41000, 5555)
        }
        .seq(seq)
        .ack(1)
        .flags(TCP_ACK)
        .payload(&payload);
        let mut f = vec![0u8; spec.len()];
        spec.write(&mut f).expect("sized");
        frames.push(f);
    }
    (frames, stream)
}

/// Sends each segment, as `Bytes` views of its frames, to the checking thread; counts the
/// segments and the views that are the segment's own pieces in place (the same address and
/// length as the piece in its UMEM frame: not a copy).
struct ToBytes {
    to_checker: mpsc::Sender<Vec<Bytes>>,
    segments: usize,
    in_place: usize,
}

impl Sink<UmemFrame> for ToBytes {
    fn segment(&mut self, segment: Segment<'_, UmemFrame>) {
        self.segments += 1;
        let pieces: Vec<(usize, usize)> = segment
            .chunks()
            .map(|c| (c.as_ptr() as usize, c.len()))
            .collect();
        let views = segment_to_bytes(segment);
        if views.len() == pieces.len() {
            self.in_place += views
                .iter()
                .zip(&pieces)
                .filter(|(v, p)| (v.as_ptr() as usize, v.len()) == **p)
                .count();
        }
        let _ = self.to_checker.send(views);
    }
}

#[test]
fn umem_frames_as_bytes_return_from_another_thread() {
    let Some(net) = xdp_common::setup("y", 1) else {
        return;
    };
    let kernel_mac = mac_of(&net.ns_b, &net.if_b).expect("MAC");
    let (frames, stream) = flow(kernel_mac);
    let (ns_a, if_a) = (net.ns_a.clone(), net.if_a.clone());
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = thread::spawn(move || {
        xdp_common::enter(&ns_a).expect("setns");
        let xdp = XdpProgram::attach(&if_a, XdpMode::Native).expect("attach");
        // Fewer chunks than frames: the test passes only if dropped views return their chunks.
        let config = XskConfig::default().with_frames(256, 64);
        let (mut rx, _tx) = xdp.socket(0, &config).expect("socket").split();
        let mut engine: Box<Engine<UmemFrame, Sizes<8, 48>>> = Box::new(Engine::new(Config::lro()));
        let (seg_tx, seg_rx) = mpsc::channel::<Vec<Bytes>>();
        // The checking thread: concatenates payloads, drops the views (returning the frames).
        let checker = thread::spawn(move || {
            let mut payload = Vec::new();
            let mut pieces = 0;
            for seg in seg_rx {
                pieces += seg.len();
                // The head carries Ethernet + IPv4 + TCP headers (54 bytes) before its payload.
                for (i, b) in seg.iter().enumerate() {
                    payload.extend_from_slice(if i == 0 { &b[54..] } else { &b[..] });
                }
            }
            (payload, pieces)
        });
        let _ = ready_tx.send(());
        let mut sink = ToBytes {
            to_checker: seg_tx,
            segments: 0,
            in_place: 0,
        };
        let start = Instant::now();
        let mut taken = 0;
        while taken < FRAMES && start.elapsed() < Duration::from_secs(20) {
            let mut burst = 0;
            while let Some((frame, meta)) = rx.receive(0) {
                engine.push(frame, &meta, &mut sink);
                taken += 1;
                burst += 1;
            }
            engine.flush_all(&mut sink);
            if burst == 0 {
                let _ = rx.wait(Some(Duration::from_millis(10)));
            } else {
                // Let the next burst gather, as a NAPI poll under load does.
                thread::sleep(Duration::from_millis(2));
            }
        }
        let (segments, views) = (sink.segments, sink.in_place);
        drop(sink);
        let (payload, pieces) = checker.join().expect("checker");
        // Every view is gone: every frame handle was dropped on the checking thread.
        rx.refill();
        let account = rx.account();
        let stats = engine.stats().clone();
        xdp.detach().expect("detach");
        (taken, segments, payload, pieces, views, account, stats)
    });
    ready_rx
        .recv_timeout(Duration::from_secs(20))
        .expect("receiver ready");
    let (ns_b, if_b) = (net.ns_b.clone(), net.if_b.clone());
    // Paced a little so the 256-chunk socket keeps up.
    let sent = thread::spawn(move || inject(&ns_b, &if_b, &frames, Duration::from_micros(20)))
        .join()
        .expect("injector")
        .expect("inject");
    let (taken, segments, payload, pieces, views, account, stats) =
        receiver.join().expect("receiver");
    println!(
        "xdp-bytes: {sent} frames injected, {taken} taken, {} merged into {segments} segments, {pieces} Bytes views over UMEM checked and dropped on another thread; {account}",
        stats.frames_merged
    );
    assert_eq!(taken, FRAMES, "every injected frame arrived");
    assert!(stats.is_conserved());
    assert!(
        stats.frames_merged > 0 && segments < FRAMES,
        "segments were coalesced"
    );
    // Every view the checking thread got is its piece in the UMEM frame, not a copy.
    assert_eq!(views, pieces, "views over the UMEM frames (not copies)");
    assert_eq!(
        payload, stream,
        "the payload through the Bytes views is the one sent"
    );
    assert!(account.is_conserved(), "{account}");
    assert_eq!(account.held, 0, "every view returned its frame: {account}");
    assert_eq!(account.claimed, account.dropped);
    assert!(account.claimed >= FRAMES as u64);
}
