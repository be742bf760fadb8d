//! Per-frame costs of this crate's receive path, the numbers the copybreak simulation is fed.
//!
//! - `ipoib_rx/copybreak`: a 160-byte frame (a 128-byte UDP message over IPoIB) completed in a
//!   connected-mode buffer (65524 bytes), copied into a small buffer, the large one reposted;
//!   then the small buffer given back (the stack consumed it).
//! - `ipoib_rx/handup`: the same frame passed up in its large buffer and the RQ slot refilled
//!   from the pool; then the large buffer given back.
//! - `ipoib_rx/coalesce`: lro-core's cost per TCP frame over IPoIB (2048-byte frames, 1992
//!   payload bytes with timestamps, checksums verified in software as connected mode offers no
//!   offload): push, and the frame's share of the segment delivered at the end of a 32-frame
//!   poll.
//!
//! Each iteration is one frame (`iter_custom`), so criterion's estimate is nanoseconds per
//! frame. The simulated HCA's writes are not timed. Run:
//!
//! ```sh
//! cargo bench -p drivers-ipoib --bench rx_path
//! cargo run --release -p drivers-ipoib --features std --example copybreak_sim -- --costs target/criterion
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use drivers_ipoib::hca::SimHca;
use drivers_ipoib::{Mode, QueueConfig, RxQueue, RxQueueStorage};
use lro_core::testing::{FrameSpec, TCP_ACK};
use lro_core::{Config, Engine, RxMeta, Segment, Sink, Sizes};

/// Frames per timed batch (a NAPI poll's worth).
const BATCH: u64 = 32;

/// An IPoIB/IPv4/UDP frame with a 128-byte payload.
fn udp_frame() -> Vec<u8> {
    let mut f = vec![0u8; 4 + 20 + 8 + 128];
    f[..4].copy_from_slice(&[0x08, 0x00, 0, 0]);
    let ip = &mut f[4..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&156u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..20].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    ip[24..26].copy_from_slice(&136u16.to_be_bytes());
    f
}

fn queue_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("ipoib_rx");
    g.throughput(Throughput::Elements(1));
    let frame = udp_frame();
    for (name, copybreak) in [("copybreak", Some(256)), ("handup", None)] {
        let mode = Mode::CONNECTED_MAX;
        let storage: Box<RxQueueStorage<'_, 64, 64>> = Box::default();
        let mut large = vec![0u8; 64 * mode.rx_buffer_len()];
        let mut small = vec![0u8; 64 * 256];
        let config = QueueConfig::new(mode, 32).with_copybreak(copybreak);
        let queue = RxQueue::new(&storage, &mut large, &mut small, config).expect("layout");
        let mut hca = SimHca::new(&queue);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut left = iters;
                while left > 0 {
                    let n = left.min(BATCH);
                    for _ in 0..n {
                        hca.deliver(&frame).expect("a posted buffer");
                    }
                    let t = Instant::now();
                    for _ in 0..n {
                        if let Some(Ok(f)) = queue.receive() {
                            black_box(f.as_ref());
                        }
                    }
                    total += t.elapsed();
                    left -= n;
                }
                total
            })
        });
        assert!(queue.accounting().is_consistent());
        let s = queue.stats();
        assert!(
            s.frames == 0 || (s.copied > 0) == copybreak.is_some(),
            "{s:?}"
        );
    }
    g.finish();
}

/// Takes every delivered frame back (no deallocation in the timed part).
struct Pool(Vec<Vec<u8>>);
impl Sink<Vec<u8>> for Pool {
    fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
        black_box(segment.len());
        self.0.extend(segment.into_frames());
    }
    fn release(&mut self, frame: Vec<u8>) {
        self.0.push(frame);
    }
}

fn coalesce(c: &mut Criterion) {
    let mut g = c.benchmark_group("ipoib_rx");
    g.throughput(Throughput::Elements(1));
    let payload = vec![0x5au8; 1992];
    let frames: Vec<Vec<u8>> = (0..BATCH as u32)
        .map(|k| {
            let spec = FrameSpec::ipv4_tcp(40000, 5201)
                .raw_ip()
                .seq(1 + k * 1992)
                .ack(1)
                .flags(TCP_ACK)
                .timestamps(100 + k, 50)
                .payload(&payload);
            let mut ip = vec![0u8; spec.len()];
            spec.write(&mut ip).expect("sized");
            let mut f = vec![0x08, 0x00, 0, 0];
            f.extend_from_slice(&ip);
            f
        })
        .collect();
    assert_eq!(frames[0].len(), 2048);
    let mut pool = Pool(frames.clone());
    pool.0.reserve(BATCH as usize);
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(BATCH as usize);
    let mut engine: Box<Engine<Vec<u8>, Sizes<8, 64>>> = Box::new(Engine::new(Config::lro()));
    let meta = RxMeta::ipoib(0);
    g.bench_function("coalesce", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let n = left.min(BATCH) as usize;
                // Fresh copies: the engine rewrites the head's headers in place.
                for src in frames.iter().take(n) {
                    let mut f = pool.0.pop().expect("pooled");
                    f.clear();
                    f.extend_from_slice(src);
                    batch.push(f);
                }
                let t = Instant::now();
                for f in batch.drain(..) {
                    engine.push(f, &meta, &mut pool);
                }
                engine.flush_all(&mut pool);
                total += t.elapsed();
                left -= n as u64;
            }
            total
        })
    });
    let s = engine.stats();
    // (Nothing ran when a filter left this benchmark out.)
    assert!(
        s.frames_in == 0 || (s.frames_merged > 0 && s.is_conserved()),
        "{s:?}"
    );
    g.finish();
}

criterion_group!(benches, queue_path, coalesce);
criterion_main!(benches);
