//! Cost of sorting a receive batch by RSS sort key (FreeBSD `tcp_lro_queue_mbuf` keys:
//! `hash type << 56 | hash << 24 | arrival index`), for the sort used by `lro_core::rss`:
//!
//! - `group`: `rss::group_keys` (what `RssSorted` uses): a stable counting sort into buckets
//!   of the (type, hash) bits, then a full sort of the rare buckets holding two flows. It only
//!   groups flows (their order is the bucket order), which is all the wrapper needs;
//! - `msb`: `rss::radix_sort_msb`, FreeBSD's `tcp_lro_sort` (no scratch);
//! - `sort_unstable` / `sort`: the standard library's.
//!
//! Two traffic shapes: `flows16` (16 flows interleaved at random, a busy RX ring) and
//! `distinct` (every frame its own flow: the worst case for the radix sorts).
//!
//! Run: `cargo bench --bench rss_sort`. Divide the reported time by the batch size for the
//! cost per frame.

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use lro_core::rss::{group_keys, radix_sort_msb, sort_key, Toeplitz};
use lro_core::RssType;
use std::hint::black_box;
use std::time::Duration;

const SIZES: [usize; 5] = [8, 32, 64, 256, 1024];

/// xorshift64*: deterministic inputs without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// A batch of `n` keys in arrival order; `flows == None` means one flow per frame.
fn batch(n: usize, flows: Option<usize>, rng: &mut Rng) -> Vec<u64> {
    let t = Toeplitz::microsoft();
    let flow_hash = |f: u64| {
        let f = f as u32;
        t.tcp_ipv4(
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            40000 + (f % 20000) as u16,
            5201,
        ) ^ (f / 20000)
    };
    (0..n)
        .map(|i| {
            let f = match flows {
                Some(k) => rng.next() % k as u64,
                None => i as u64,
            };
            sort_key(flow_hash(f), RssType::TcpIpv4, i as u32)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for (shape, flows) in [("flows16", Some(16)), ("distinct", None)] {
        let mut group = c.benchmark_group(format!("rss_sort/{shape}"));
        group
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(1))
            .sample_size(30);
        for n in SIZES {
            let keys = batch(n, flows, &mut rng);
            let mut scratch = vec![0u64; n];
            group.throughput(Throughput::Elements(n as u64));
            let mut counts = vec![0u32; n];
            group.bench_with_input(BenchmarkId::new("group", n), &keys, |b, keys| {
                b.iter_batched_ref(
                    || keys.clone(),
                    |v| group_keys(black_box(v), &mut scratch, &mut counts),
                    BatchSize::SmallInput,
                )
            });
            group.bench_with_input(BenchmarkId::new("msb", n), &keys, |b, keys| {
                b.iter_batched_ref(
                    || keys.clone(),
                    |v| radix_sort_msb(black_box(v)),
                    BatchSize::SmallInput,
                )
            });
            group.bench_with_input(BenchmarkId::new("sort_unstable", n), &keys, |b, keys| {
                b.iter_batched_ref(
                    || keys.clone(),
                    |v| black_box(v).sort_unstable(),
                    BatchSize::SmallInput,
                )
            });
            group.bench_with_input(BenchmarkId::new("sort", n), &keys, |b, keys| {
                b.iter_batched_ref(
                    || keys.clone(),
                    |v| black_box(v).sort(),
                    BatchSize::SmallInput,
                )
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
