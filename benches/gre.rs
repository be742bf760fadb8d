//! GRE-tunnelled traffic against the same traffic without the tunnel, in one criterion group:
//! the committed kernel capture (`data/default.pcap.xz`) plain, and wrapped in GRE with a key,
//! with a checksum and a key, and as TEB, through one engine that looks through GRE
//! (`lro_gre::GreEngine`), in bursts of 32 with trusted checksums. Refilling the burst's
//! buffers is not timed (the method of `lro bench`). The aggregation of each variant is
//! printed once before it is measured: the tunnel must not change it.
//!
//! Run: `cargo bench --bench gre -- --noplot`; `scripts/bench-gre.sh` compares the same with
//! `lro bench` in alternating runs and counts instructions.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lro_core::{Config, RxChecksum, RxMeta, Segment, Sink, Sizes};
use lro_gre::testing::{GreSpec, InnerFrame, OuterId, Tunnel};
use lro_gre::GreEngine;

const BURST: usize = 32;

/// The committed capture's Ethernet frames.
fn capture() -> Vec<Vec<u8>> {
    let xz = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/data/default.pcap.xz"))
        .expect("data/default.pcap.xz");
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut raw).expect("xz");
    let mut r = pcap_file::pcap::PcapReader::new(&raw[..]).expect("pcap");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.expect("packet").data.into_owned());
    }
    out
}

fn wrapped(frames: &[Vec<u8>], spec: GreSpec) -> Vec<Vec<u8>> {
    let mut t = Tunnel::new(spec, OuterId::Tunnel);
    let mut buf = vec![0u8; 70_000];
    frames
        .iter()
        .map(|f| match t.wrap(InnerFrame::Ethernet(f), &mut buf) {
            Ok(n) => buf[..n].to_vec(),
            Err(_) => f.clone(),
        })
        .collect()
}

struct Count {
    segments: usize,
    pool: Vec<Vec<u8>>,
}

impl Sink<Vec<u8>> for Count {
    fn segment(&mut self, seg: Segment<'_, Vec<u8>>) {
        self.segments += 1;
        self.pool.extend(seg.into_frames());
    }
    fn release(&mut self, frame: Vec<u8>) {
        self.pool.push(frame);
    }
}

/// One pass over `input` in bursts; returns the time spent in the engine.
fn pass(
    engine: &mut GreEngine<Vec<u8>, Sizes<64, 64>>,
    input: &[Vec<u8>],
    sink: &mut Count,
) -> Duration {
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    let mut burst: Vec<Vec<u8>> = Vec::with_capacity(BURST);
    let mut total = Duration::ZERO;
    for chunk in input.chunks(BURST) {
        for src in chunk {
            let mut buf = sink.pool.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(src);
            burst.push(buf);
        }
        let start = Instant::now();
        for f in burst.drain(..) {
            engine.push(f, &meta, sink);
        }
        engine.flush_all(sink);
        total += start.elapsed();
    }
    total
}

fn bench_gre(c: &mut Criterion) {
    let plain = capture();
    let variants = [
        ("plain", plain.clone()),
        ("gre_k", wrapped(&plain, GreSpec::ipv4().key(42))),
        (
            "gre_ck",
            wrapped(&plain, GreSpec::ipv4().checksum().key(42)),
        ),
        ("gre_teb", wrapped(&plain, GreSpec::ipv4().teb())),
    ];
    let mut g = c.benchmark_group("gre_vs_plain");
    g.throughput(Throughput::Elements(plain.len() as u64));
    for (name, input) in &variants {
        let mut engine: Box<GreEngine<Vec<u8>, Sizes<64, 64>>> =
            Box::new(GreEngine::new(Config::lro()));
        let mut sink = Count {
            segments: 0,
            pool: input.clone(),
        };
        pass(&mut engine, input, &mut sink);
        eprintln!(
            "gre_vs_plain/{name}: {} frames in, {} out",
            input.len(),
            sink.segments
        );
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    total += pass(&mut engine, input, &mut sink);
                }
                black_box(sink.segments);
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_gre);
criterion_main!(benches);
