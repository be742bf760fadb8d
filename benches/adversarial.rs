//! Cost per frame under hostile traffic, next to a benign baseline of the same shape:
//! flows crafted to collide in the flow-key hash (one bucket chain) vs distinct flows, many
//! flows sharing one RSS hash through the RSS-sorting wrapper, flow-table eviction storms,
//! sequence numbers wrapping at 2^32, the 64 KB limit, zero-window ACKs, a flood of duplicate
//! ACKs, and headers truncated at every byte offset.
//!
//! Each benchmark pushes a fixed set of frames and ends with `flush_all`; throughput is in
//! frames, so criterion's time divided by the element count is the cost per frame (its
//! median is in `target/criterion/adversarial/*/new/estimates.json`). Refilling the frames'
//! buffers (the engine rewrites headers in place) is not timed.
//!
//! The hash collisions come in three kinds. `v1_crafted`: flows that all shared one bucket
//! under lro-core 0.1's unkeyed XOR-fold hash (their source address XORed with their port);
//! under the seeded hash they are ordinary distinct flows. `known_seed`: flows found by
//! searching ports whose hash under the *default* seed (`Config::DEFAULT_HASH_SEED`) lands in
//! one bucket: what an attacker who knows the seed can still do, and why a production engine
//! takes a secret one. `secret_seed`: the same flows against an engine with another seed.
//!
//! Run: `cargo bench --bench adversarial -- --noplot`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lro_core::flow::FlowHasher;
use lro_core::rss::RssSorted;
use lro_core::testing::{FrameSpec, IpSpec};
use lro_core::{
    Coalescer, Config, Engine, RssHash, RssType, RxChecksum, RxMeta, Segment, Sink, Sizes,
};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Recycles every buffer it gets back.
struct Pool {
    free: Vec<Vec<u8>>,
    segments: usize,
}

impl Sink<Vec<u8>> for Pool {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        self.segments += 1;
        self.free.extend(seg.into_frames());
    }

    fn release(&mut self, frame: Vec<u8>) {
        self.free.push(frame);
    }
}

type Frames = Vec<(Vec<u8>, RxMeta)>;

fn build(spec: &FrameSpec<'_>) -> Vec<u8> {
    let mut b = vec![0u8; spec.len()];
    spec.write(&mut b).expect("sized");
    b
}

fn verified() -> RxMeta {
    RxMeta::ethernet(0).with_checksum(RxChecksum::Verified)
}

/// Times pushing all `frames` into the engine `make()` returns, then `flush_all`.
fn bench<C: Coalescer<Vec<u8>>>(
    c: &mut Criterion,
    name: &str,
    frames: &Frames,
    make: impl Fn() -> C,
) {
    let mut g = c.benchmark_group("adversarial");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function(name, |b| {
        let mut engine = Box::new(make());
        let mut sink = Pool {
            free: frames.iter().map(|(f, _)| f.clone()).collect(),
            segments: 0,
        };
        let mut batch: Vec<Vec<u8>> = Vec::with_capacity(frames.len());
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                for (src, _) in frames {
                    let mut buf = sink.free.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(src);
                    batch.push(buf);
                }
                let start = Instant::now();
                for (f, (_, meta)) in batch.drain(..).zip(frames) {
                    engine.push(f, meta, &mut sink);
                }
                engine.flush_all(&mut sink);
                total += start.elapsed();
            }
            black_box(sink.segments);
            total
        });
    });
    g.finish();
}

const PAYLOAD: [u8; 9000] = [0x5a; 9000];

/// `per_flow` 1000-byte segments of each flow `make(flow)`, round-robin.
fn interleaved(
    flows: usize,
    per_flow: usize,
    make: &dyn Fn(usize) -> FrameSpec<'static>,
    rss: Option<u32>,
) -> Frames {
    let mut seq = vec![1u32; flows];
    (0..flows * per_flow)
        .map(|i| {
            let f = i % flows;
            let s = make(f).seq(seq[f]).payload(&PAYLOAD[..1000]);
            seq[f] = seq[f].wrapping_add(1000);
            let mut meta = verified();
            if let Some(value) = rss {
                meta = meta.with_rss(RssHash {
                    value,
                    kind: RssType::TcpIpv4,
                });
            }
            (build(&s), meta)
        })
        .collect()
}

fn distinct(k: usize) -> FrameSpec<'static> {
    FrameSpec::ipv4_tcp(1024 + k as u16, 5201)
}

/// Flows whose hash was identical under lro-core 0.1's unkeyed XOR-fold: one bucket chain
/// then, spread now.
fn v1_crafted(k: usize) -> FrameSpec<'static> {
    let sport = 1024 + 8 * k as u16;
    let mut s = FrameSpec::ipv4_tcp(sport, 5201);
    if let IpSpec::V4(ip) = &mut s.ip {
        ip.src = (u32::from_be_bytes(ip.src) ^ u32::from(sport >> 3)).to_be_bytes();
    }
    s
}

/// `n` source ports whose flows (as [`distinct`] builds them) share one bucket of a 64-entry
/// table under the default hash seed: a search over the port space, as an attacker knowing the
/// seed would run it.
fn known_seed_ports(n: usize) -> Vec<u16> {
    let hasher = FlowHasher::new(Config::DEFAULT_HASH_SEED);
    let key = |port: u16| {
        let f = build(&FrameSpec::ipv4_tcp(port, 5201).payload(&PAYLOAD[..10]));
        lro_core::parse::flow_key(&f, &RxMeta::ethernet(0)).expect("TCP")
    };
    let target = hasher.hash(&key(1024)) & 63;
    (1024..=u16::MAX)
        .filter(|&p| hasher.hash(&key(p)) & 63 == target)
        .take(n)
        .collect()
}

fn hash_collisions(c: &mut Criterion) {
    let make = || Engine::<Vec<u8>, Sizes<64, 64>>::new(Config::lro());
    bench(
        c,
        "distinct_key_hashes_64_flows",
        &interleaved(64, 8, &distinct, None),
        make,
    );
    bench(
        c,
        "v1_crafted_collisions_64_flows",
        &interleaved(64, 8, &v1_crafted, None),
        make,
    );
    let ports = known_seed_ports(64);
    assert_eq!(ports.len(), 64, "enough colliding ports");
    let attack = interleaved(64, 8, &|k| FrameSpec::ipv4_tcp(ports[k], 5201), None);
    bench(c, "known_seed_collisions_64_flows", &attack, make);
    bench(c, "secret_seed_same_flows_64_flows", &attack, || {
        Engine::<Vec<u8>, Sizes<64, 64>>::new(Config::lro().with_hash_seed(0x0123_4567_89ab_cdef))
    });
}

fn shared_rss(c: &mut Criterion) {
    let make =
        || RssSorted::<_, Vec<u8>, 1024>::new(Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::lro()));
    let one = interleaved(256, 4, &distinct, Some(0x1234_5678));
    let own: Frames = one
        .iter()
        .enumerate()
        .map(|(i, (f, m))| {
            let meta = m.with_rss(RssHash {
                value: (i % 256) as u32 * 0x9e37_79b9,
                kind: RssType::TcpIpv4,
            });
            (f.clone(), meta)
        })
        .collect();
    bench(c, "rss_sorted_256_flows_own_hashes", &own, make);
    bench(c, "rss_sorted_256_flows_one_hash", &one, make);
}

fn eviction_storm(c: &mut Criterion) {
    let frames = interleaved(1024, 2, &distinct, None);
    bench(c, "eviction_storm_1024_flows_4_entries", &frames, || {
        Engine::<Vec<u8>, Sizes<4, 8>>::new(Config::lro())
    });
}

fn sequence_wrap(c: &mut Criterion) {
    let frames: Frames = (0..256u32)
        .map(|k| {
            let s = FrameSpec::ipv4_tcp(7, 8)
                .seq(0u32.wrapping_sub(128 * 1000).wrapping_add(k * 1000))
                .payload(&PAYLOAD[..1000]);
            (build(&s), verified())
        })
        .collect();
    bench(c, "sequence_wrap_one_flow", &frames, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::gro())
    });
}

fn size_limit(c: &mut Criterion) {
    let frames: Frames = (0..64u32)
        .map(|k| {
            let s = FrameSpec::ipv4_tcp(7, 8)
                .seq(1 + k * 9000)
                .payload(&PAYLOAD);
            (build(&s), verified())
        })
        .collect();
    bench(c, "size_limit_64k_jumbo_frames", &frames, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::gro())
    });
}

fn acks(c: &mut Criterion) {
    let dup: Frames = (0..1024)
        .map(|_| {
            (
                build(&FrameSpec::ipv4_tcp(4, 5).ack(777).window(1000)),
                verified(),
            )
        })
        .collect();
    bench(c, "duplicate_ack_flood", &dup, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::lro())
    });
    let advancing: Frames = (0..1024u32)
        .map(|k| {
            (
                build(&FrameSpec::ipv4_tcp(4, 5).ack(777 + k).window(1000)),
                verified(),
            )
        })
        .collect();
    bench(c, "advancing_ack_stream", &advancing, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::lro())
    });
    let zero: Frames = (0..1024u32)
        .map(|k| {
            let window = if k % 16 == 15 { 4096 } else { 0 };
            (
                build(&FrameSpec::ipv4_tcp(4, 5).ack(777 + k / 4).window(window)),
                verified(),
            )
        })
        .collect();
    bench(c, "zero_window_acks", &zero, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::lro())
    });
}

fn truncated(c: &mut Criterion) {
    let full = build(
        &FrameSpec::ipv4_tcp(4, 5)
            .timestamps(1, 2)
            .payload(&PAYLOAD[..100]),
    );
    let frames: Frames = (0..full.len())
        .map(|cut| (full[..cut].to_vec(), RxMeta::ethernet(0)))
        .collect();
    bench(c, "truncated_at_every_offset", &frames, || {
        Engine::<Vec<u8>, Sizes<8, 64>>::new(Config::lro())
    });
}

criterion_group!(
    benches,
    hash_collisions,
    shared_rss,
    eviction_storm,
    sequence_wrap,
    size_limit,
    acks,
    truncated
);
criterion_main!(benches);
