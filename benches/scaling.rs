//! How the cost per frame grows with the work: the number of concurrent flows (1 to 65,536,
//! with and without RSS sorting) and the burst size (frames per driver poll); and what
//! traffic in which nothing merges costs, with and without the adaptive bypass
//! (`scaling_singles`: the flows send one segment at a time, interleaved).
//!
//! The input is Linux-like bulk traffic: every flow sends runs of 8 back-to-back segments (TSO
//! on the sender), the flows take turns, checksums are trusted (a NIC verified them), and the
//! end of every burst flushes everything, as a poll loop without `max_hold` does. The engine
//! has 1,024 flow entries: beyond that, flows are evicted and restarted, which is what a table
//! of that size costs under that many flows. Refilling a burst's buffers (the engine rewrites
//! headers in place) is not timed.
//!
//! Throughput is in frames, so criterion's time per iteration divided by the element count is
//! the cost per frame. Run and plot:
//!
//! ```text
//! cargo bench --bench scaling -- --noplot
//! python3 scripts/plot-scaling.py          # writes target/criterion/scaling.svg
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lro_core::rss::RssSorted;
use lro_core::testing::{FrameSpec, IpSpec};
use lro_core::{Coalescer, Config, Engine, RxChecksum, RxMeta, Segment, Sink, Sizes};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Segments a flow sends back to back.
const RUN: usize = 8;
/// Payload per segment: small, so that 65,536 flows fit in memory (the engine never reads
/// payload with trusted checksums).
const PAYLOAD: [u8; 256] = [0x5a; 256];
/// The engine's table.
type Table = Engine<Vec<u8>, Sizes<1024, 64>>;

/// At least `frames` frames of `flows` flows in runs of `run` segments, every flow sending at
/// least one run.
fn traffic(flows: usize, frames: usize, run: usize) -> Vec<Vec<u8>> {
    let total = frames.max(flows * run);
    let mut seq = vec![1u32; flows];
    (0..total)
        .map(|i| {
            let f = (i / run) % flows;
            let mut s = FrameSpec::ipv4_tcp(1024 + (f % 60_000) as u16, 5201)
                .seq(seq[f])
                .timestamps(1000, 1)
                .payload(&PAYLOAD);
            if let IpSpec::V4(ip) = &mut s.ip {
                ip.src = [198, 18, 1 + (f / 60_000) as u8, 1];
            }
            seq[f] = seq[f].wrapping_add(PAYLOAD.len() as u32);
            let mut b = vec![0u8; s.len()];
            s.write(&mut b).expect("sized");
            b
        })
        .collect()
}

/// Recycles every buffer.
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

/// Times `input` through `engine` in bursts of `burst`, each followed by `flush_all`.
fn run<C: Coalescer<Vec<u8>>>(
    b: &mut criterion::Bencher<'_>,
    engine: &mut C,
    input: &[Vec<u8>],
    burst: usize,
) {
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    let mut sink = Pool {
        free: input.to_vec(),
        segments: 0,
    };
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(burst);
    b.iter_custom(|iters| {
        let mut total = Duration::ZERO;
        for _ in 0..iters {
            for chunk in input.chunks(burst) {
                for src in chunk {
                    let mut buf = sink.free.pop().unwrap_or_default();
                    buf.clear();
                    buf.extend_from_slice(src);
                    batch.push(buf);
                }
                let start = Instant::now();
                for f in batch.drain(..) {
                    engine.push(f, &meta, &mut sink);
                }
                engine.flush_all(&mut sink);
                total += start.elapsed();
            }
        }
        black_box(sink.segments);
        total
    });
}

fn flows(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling_flows");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [1usize, 4, 16, 64, 256, 1024, 4096, 16384, 65536] {
        let input = traffic(n, 16_384, RUN);
        g.throughput(Throughput::Elements(input.len() as u64));
        g.bench_with_input(BenchmarkId::new("plain", n), &input, |b, input| {
            let mut engine = Box::new(Table::new(Config::lro()));
            run(b, &mut *engine, input, 32);
        });
        g.bench_with_input(BenchmarkId::new("rss_sorted", n), &input, |b, input| {
            let mut engine = Box::new(RssSorted::<_, Vec<u8>, 64>::new(Table::new(Config::lro())));
            run(b, &mut *engine, input, 32);
        });
    }
    g.finish();
}

fn bursts(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling_burst");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    let input = traffic(64, 16_384, RUN);
    g.throughput(Throughput::Elements(input.len() as u64));
    for burst in [1usize, 4, 16, 32, 64, 256] {
        g.bench_with_input(BenchmarkId::new("plain", burst), &input, |b, input| {
            let mut engine = Box::new(Table::new(Config::lro()));
            run(b, &mut *engine, input, burst);
        });
    }
    g.finish();
}

/// Flows that send one segment at a time, interleaved, more of them than the table has
/// entries and than a burst has frames: nothing merges. `plain` holds and delivers every frame;
/// `bypass` ([`Config::adaptive_bypass`]) passes most bursts through.
fn singles(c: &mut Criterion) {
    let mut g = c.benchmark_group("scaling_singles");
    g.sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    for n in [256usize, 4096] {
        let input = traffic(n, 16_384, 1);
        g.throughput(Throughput::Elements(input.len() as u64));
        for (name, bypass) in [("plain", false), ("bypass", true)] {
            g.bench_with_input(BenchmarkId::new(name, n), &input, |b, input| {
                let config = Config::lro().with_adaptive_bypass(bypass);
                let mut engine = Box::new(Engine::<Vec<u8>, Sizes<64, 64>>::new(config));
                run(b, &mut *engine, input, 32);
            });
        }
    }
    g.finish();
}

criterion_group!(benches, flows, bursts, singles);
criterion_main!(benches);
