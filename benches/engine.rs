//! Per-frame cost of the engine: parse, coalesce, header fix-up and emit, on synthetic
//! Linux-like traffic (4 interleaved flows of 1448-byte segments with timestamps, plus the
//! receiver's pure ACKs), in bursts of 32 as a poll loop would hand them over.
//!
//! Refilling the burst's buffers (the engine rewrites headers in place) is not timed, the same
//! method as `lro bench` and the DPDK peer benchmark.
//!
//! Run: `cargo bench --bench engine -- --noplot`. `BENCH_PAYLOAD=N` makes the data segments
//! `N` bytes instead of 1448 (the sequence numbers follow, so they still coalesce).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use etherparse::{IpHeaders, Ipv4Header, PacketBuilder, TcpHeader};
use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};
use std::hint::black_box;
use std::time::{Duration, Instant};

const BURST: usize = 32;

fn frame(flow: u16, seq: u32, ack: u32, id: u16, payload: &[u8], tsval: u32) -> Vec<u8> {
    let mut ip = Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::TCP,
        [198, 18, 0, 1],
        [198, 18, 0, 2],
    )
    .unwrap();
    ip.identification = id;
    ip.dont_fragment = true;
    let mut tcp = TcpHeader::new(40000 + flow, 5201, seq, 502);
    tcp.ack = true;
    tcp.acknowledgment_number = ack;
    let mut opts = [1u8, 1, 8, 10, 0, 0, 0, 0, 0, 0, 0, 1];
    opts[4..8].copy_from_slice(&tsval.to_be_bytes());
    tcp.set_options_raw(&opts).unwrap();
    let mut v = Vec::with_capacity(1600);
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
        .ip(IpHeaders::Ipv4(ip, Default::default()))
        .tcp_header(tcp)
        .write(&mut v, payload)
        .unwrap();
    v
}

/// 4 flows, round-robin, 1448-byte segments; every 8th frame is a pure ACK of flow 0's
/// reverse direction would be unrealistic here, so the ACK stream is its own flow.
fn traffic(frames: usize) -> Vec<Vec<u8>> {
    traffic_runs(frames, 1)
}

/// The same with each data flow sending `run` segments back to back (TSO senders on a wire
/// look like this): the case header prediction is for. `run == 1` is strict round-robin,
/// where it never applies and costs a failed comparison per frame.
fn traffic_runs(frames: usize, run: usize) -> Vec<Vec<u8>> {
    let payload = vec![
        0x5au8;
        std::env::var("BENCH_PAYLOAD")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1448)
    ];
    let mut seqs = [1u32; 4];
    let mut ids = [0u16; 4];
    let mut ack = 1u32;
    (0..frames)
        .map(|i| {
            if i % 8 == 7 {
                ack = ack.wrapping_add(2896);
                frame(9, 1, ack, 0, &[], 1000 + i as u32)
            } else {
                let f = (i / run) % 4;
                let out = frame(f as u16, seqs[f], 1, ids[f], &payload, 1000);
                seqs[f] = seqs[f].wrapping_add(payload.len() as u32);
                ids[f] = ids[f].wrapping_add(1);
                out
            }
        })
        .collect()
}

struct Count {
    segments: usize,
    bytes: usize,
    pool: Vec<Vec<u8>>,
}

impl Sink<Vec<u8>> for Count {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        self.segments += 1;
        self.bytes += seg.len();
        self.pool.extend(seg.into_frames());
    }
    fn release(&mut self, frame: Vec<u8>) {
        self.pool.push(frame);
    }
}

fn bench_csum(c: &mut Criterion) {
    let data: Vec<u8> = (0..1448u32).map(|i| (i * 7 + 3) as u8).collect();
    let mut g = c.benchmark_group("csum");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("sum_1448", |b| {
        b.iter(|| black_box(lro_core::csum::sum(black_box(&data))))
    });
    g.finish();
}

fn bench_parse(c: &mut Criterion) {
    let f = traffic(1).remove(0);
    let meta = RxMeta::ethernet(0);
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(1));
    g.bench_function("lro_core::wire::parse", |b| {
        b.iter(|| black_box(lro_core::parse::parse(black_box(&f), &meta)))
    });
    g.bench_function("lro_core::wire::parse_into", |b| {
        let mut p = lro_core::parse::Parsed::EMPTY;
        b.iter(|| {
            let r = lro_core::parse::parse_into::<lro_core::encap::NoEncap>(
                black_box(&f),
                &meta,
                &mut p,
            );
            let _ = black_box((r, &p));
        })
    });
    g.bench_function("etherparse::SlicedPacket", |b| {
        b.iter(|| black_box(etherparse::SlicedPacket::from_ethernet(black_box(&f)).is_ok()))
    });
    g.finish();
}

fn run_bursts(c: &mut Criterion, name: &str, config: Config, checksum: RxChecksum) {
    run_bursts_on(c, name, config, checksum, traffic(BURST * 16));
}

fn run_bursts_on(
    c: &mut Criterion,
    name: &str,
    config: Config,
    checksum: RxChecksum,
    input: Vec<Vec<u8>>,
) {
    let mut g = c.benchmark_group("coalesce");
    g.throughput(Throughput::Elements(input.len() as u64));
    g.bench_function(name, |b| {
        let mut engine: Box<Engine<Vec<u8>, Sizes<64, 64>>> = Box::new(Engine::new(config));
        let mut sink = Count {
            segments: 0,
            bytes: 0,
            pool: input.clone(),
        };
        let meta = RxMeta::ethernet(0).with_checksum(checksum);
        let mut burst: Vec<Vec<u8>> = Vec::with_capacity(BURST);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for chunk in input.chunks(BURST) {
                    // Untimed: fresh copies of the burst's frames in recycled buffers.
                    for src in chunk {
                        let mut buf = sink.pool.pop().unwrap_or_default();
                        buf.clear();
                        buf.extend_from_slice(src);
                        burst.push(buf);
                    }
                    let start = Instant::now();
                    for f in burst.drain(..) {
                        engine.push(f, &meta, &mut sink);
                    }
                    engine.flush_all(&mut sink);
                    total += start.elapsed();
                }
            }
            black_box(sink.segments);
            total
        });
    });
    g.finish();
}

/// Baselines for the harness itself: frames only moved to the sink and recycled, and frames
/// only parsed, so the engine's own share of `coalesce/*` can be read off.
fn bench_harness(c: &mut Criterion) {
    let input = traffic(BURST * 16);
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    let mut g = c.benchmark_group("harness");
    g.throughput(Throughput::Elements(input.len() as u64));
    for parse in [false, true] {
        let name = if parse {
            "parse_and_recycle"
        } else {
            "recycle_only"
        };
        g.bench_function(name, |b| {
            let mut pool = input.clone();
            let mut burst: Vec<Vec<u8>> = Vec::with_capacity(BURST);
            let mut ok = 0usize;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    for chunk in input.chunks(BURST) {
                        for src in chunk {
                            let mut buf = pool.pop().unwrap_or_default();
                            buf.clear();
                            buf.extend_from_slice(src);
                            burst.push(buf);
                        }
                        let start = Instant::now();
                        for f in burst.drain(..) {
                            if parse {
                                ok += usize::from(
                                    lro_core::parse::parse(black_box(&f), &meta).is_ok(),
                                );
                            }
                            pool.push(f);
                        }
                        total += start.elapsed();
                    }
                }
                black_box(ok);
                total
            });
        });
    }
    g.finish();
}

fn bench_coalesce(c: &mut Criterion) {
    run_bursts(c, "lro_trust_burst32", Config::lro(), RxChecksum::Verified);
    run_bursts(c, "gro_trust_burst32", Config::gro(), RxChecksum::Verified);
    run_bursts(c, "lro_verify_burst32", Config::lro(), RxChecksum::None);
    // Header prediction on and off, on runs of 8 segments per flow and on strict round-robin.
    for (on, tag) in [(true, "predict"), (false, "no_predict")] {
        let config = Config::lro().with_header_prediction(on);
        let runs = traffic_runs(BURST * 16, 8);
        run_bursts_on(
            c,
            &format!("lro_trust_runs8_{tag}"),
            config,
            RxChecksum::Verified,
            runs,
        );
        let rr = traffic(BURST * 16);
        run_bursts_on(
            c,
            &format!("lro_trust_rr_{tag}"),
            config,
            RxChecksum::Verified,
            rr,
        );
    }
}

fn bench_setup(c: &mut Criterion) {
    c.bench_function("coalescer_new_64x64", |b| {
        b.iter_batched(
            || (),
            |()| {
                black_box(Box::new(Engine::<Vec<u8>, Sizes<64, 64>>::new(
                    Config::lro(),
                )))
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(
    benches,
    bench_csum,
    bench_parse,
    bench_harness,
    bench_coalesce,
    bench_setup
);
criterion_main!(benches);
