//! The fourth seed's situation (Linux "tcp: avoid expensive pskb_expand_head() calls"): a
//! sender transmits 64 KB super-segments and, with a close peer, the ACKs for their first
//! parts arrive while the NIC still reads them (TX completion not yet reported).
//!
//! Per super-segment: 65000 payload bytes (MSS 1448) are pushed; the receiver ACKs every
//! second segment (RFC 5681 section 4.2 delayed ACKs), so 22 of the 23 ACKs that cover it
//! end inside it and arrive before the TX completion; then the completion, then the last ACK.
//! Only the ACK processing is timed; one criterion iteration is one ACK, so the reported time
//! is nanoseconds per ACK.
//!
//! - `lazy`: `lro_core::tx::TxQueue`: a partial ACK records an offset, nothing is copied.
//! - `eager_each`: every partial ACK copies the unACKed remainder (headers + payload) into a
//!   fresh buffer while the NIC keeps the old one.
//! - `eager_once`: the kernel before the patch: `tcp_trim_head` copies only while the transmit
//!   clone is alive (`pskb_expand_head`, here the first partial ACK); later trims of the
//!   now-private copy only move an offset.
//!
//! Buffer copies and bytes copied are counted and printed after each run (lazy: zero).
//!
//! Run: `cargo bench --bench tx_trim`.

use criterion::{criterion_group, criterion_main, Criterion};
use lro_core::tx::{AckOutcome, TxQueue};
use lro_core::{csum, LinkKind};
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

const PAYLOAD: usize = 65_000;
const HDR: usize = 14 + 20 + 20;
const MSS: u32 = 1448;
/// The receiver ACKs every second full-size segment.
const ACK_EVERY: u32 = 2 * MSS;

/// A 64 KB IPv4 super-segment at `seq`, as a stack hands it to a TSO device.
fn superseg(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; HDR + PAYLOAD];
    f[12] = 0x08; // IPv4
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((20 + 20 + PAYLOAD) as u16).to_be_bytes());
    f[20] = 0x40; // DF
    f[22] = 64;
    f[23] = 6;
    f[26..34].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    f[34..38].copy_from_slice(&[0x14, 0x51, 0x9c, 0x40]);
    f[38..42].copy_from_slice(&seq.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x10; // ACK
    f[48] = 0xff;
    for (i, b) in f[HDR..].iter_mut().enumerate() {
        *b = (i * 7) as u8;
    }
    let c = csum::finish(csum::sum(&f[14..34]));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

/// The ACK numbers that cover the super-segment at `seq`: every second MSS, then its end.
fn acks(seq: u32) -> (Vec<u32>, u32) {
    let end = seq.wrapping_add(PAYLOAD as u32);
    let partial = (1..)
        .map(|k| k * ACK_EVERY)
        .take_while(|&off| off < PAYLOAD as u32)
        .map(|off| seq.wrapping_add(off))
        .collect();
    (partial, end)
}

#[derive(Default, Clone, Copy)]
struct Copies {
    buffers: u64,
    bytes: u64,
    acks: u64,
}

/// Eager trimming, as before the seed patch.
struct Eager {
    entries: VecDeque<EagerEntry>,
    snd_una: u32,
    /// Old buffers the NIC still reads (the transmit clones), freed at completion.
    nic: Vec<Vec<u8>>,
    copy_each: bool,
    copies: Copies,
}

struct EagerEntry {
    buf: Vec<u8>,
    /// Payload offset already trimmed without copying (a private buffer: pointer move).
    start: usize,
    seq: u32,
    end: u32,
    /// The NIC still reads `buf` itself.
    nic_owns: bool,
}

impl Eager {
    fn new(copy_each: bool, snd_una: u32) -> Self {
        Self {
            entries: VecDeque::new(),
            snd_una,
            nic: Vec::new(),
            copy_each,
            copies: Copies::default(),
        }
    }

    fn push(&mut self, buf: Vec<u8>, seq: u32) {
        self.entries.push_back(EagerEntry {
            buf,
            start: 0,
            seq,
            end: seq.wrapping_add(PAYLOAD as u32),
            nic_owns: true,
        });
    }

    /// `tcp_clean_rtx_queue` + `tcp_trim_head` before the patch.
    fn ack(&mut self, ack: u32) -> AckOutcome {
        let advance = ack.wrapping_sub(self.snd_una);
        if advance == 0 || advance as i32 <= 0 {
            return AckOutcome::Duplicate;
        }
        self.snd_una = ack;
        self.copies.acks += 1;
        let mut released = 0;
        while let Some(e) = self.entries.front_mut() {
            if (ack.wrapping_sub(e.end) as i32) >= 0 {
                let e = self.entries.pop_front().expect("front exists");
                if e.nic_owns {
                    self.nic.push(e.buf);
                }
                released += 1;
                continue;
            }
            let off = ack.wrapping_sub(e.seq) as usize;
            if e.nic_owns || self.copy_each {
                // The clone is alive: copy the unACKed part into a fresh buffer.
                let from = HDR + e.start + off;
                let mut fresh = Vec::with_capacity(HDR + e.buf.len() - from);
                fresh.extend_from_slice(&e.buf[..HDR]);
                fresh.extend_from_slice(&e.buf[from..]);
                fresh[38..42].copy_from_slice(&ack.to_be_bytes());
                self.copies.buffers += 1;
                self.copies.bytes += fresh.len() as u64;
                let old = std::mem::replace(&mut e.buf, fresh);
                if e.nic_owns {
                    self.nic.push(old);
                }
                e.nic_owns = false;
                e.start = 0;
            } else {
                e.start += off;
            }
            e.seq = ack;
            break;
        }
        AckOutcome::Advanced { released }
    }

    fn complete(&mut self) {
        // The NIC finished the oldest transmission: its buffer (or the clone) is freed.
        if let Some(e) = self.entries.front_mut().filter(|e| e.nic_owns) {
            e.nic_owns = false;
        } else {
            self.nic.clear();
        }
    }
}

/// Runs super-segments until `iters` ACKs were timed; returns the time of the ACKs only.
fn run_lazy(iters: u64, pool: &mut Vec<Vec<u8>>, stats: &mut Copies) -> Duration {
    let mut seq = u32::MAX - 100_000; // crosses the 2^32 wrap
    let mut q: TxQueue<Vec<u8>, 8> = TxQueue::new(seq, LinkKind::Ethernet);
    let mut timed = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let mut buf = pool.pop().unwrap_or_else(|| superseg(0));
        buf[38..42].copy_from_slice(&seq.to_be_bytes());
        let token = q.push(buf).map_err(|e| e.error).expect("contiguous");
        let (partial, end) = acks(seq);
        let t = Instant::now();
        for &a in &partial {
            black_box(q.ack(a, |b| pool.push(b)).expect("in window"));
        }
        timed += t.elapsed();
        q.complete(token, |b| pool.push(b)).expect("issued here");
        let t = Instant::now();
        black_box(q.ack(end, |b| pool.push(b)).expect("in window"));
        timed += t.elapsed();
        done += partial.len() as u64 + 1;
        seq = end;
    }
    // Every ACK but the last of each super-segment only recorded an offset; the queue has
    // no way to copy (it only has `AsRef<[u8]>` access to the buffers).
    let s = q.stats();
    assert_eq!(s.partial_acks + s.pushed, done);
    assert_eq!(s.released, s.pushed);
    stats.acks += done;
    timed
}

fn run_eager(iters: u64, copy_each: bool, pool: &mut Vec<Vec<u8>>, stats: &mut Copies) -> Duration {
    let mut seq = u32::MAX - 100_000;
    let mut q = Eager::new(copy_each, seq);
    let mut timed = Duration::ZERO;
    let mut done = 0;
    while done < iters {
        let mut buf = pool.pop().unwrap_or_else(|| superseg(0));
        buf[38..42].copy_from_slice(&seq.to_be_bytes());
        q.push(buf, seq);
        let (partial, end) = acks(seq);
        let t = Instant::now();
        for &a in &partial {
            black_box(q.ack(a));
        }
        timed += t.elapsed();
        q.complete();
        let t = Instant::now();
        black_box(q.ack(end));
        timed += t.elapsed();
        done += partial.len() as u64 + 1;
        seq = end;
    }
    stats.buffers += q.copies.buffers;
    stats.bytes += q.copies.bytes;
    stats.acks += q.copies.acks;
    timed
}

fn report(name: &str, c: &Copies) {
    println!(
        "tx_trim/{name}: {} ACKs, {} buffer copies ({:.3} per ACK), {} bytes copied ({:.0} per ACK)",
        c.acks,
        c.buffers,
        c.buffers as f64 / c.acks.max(1) as f64,
        c.bytes,
        c.bytes as f64 / c.acks.max(1) as f64
    );
}

fn bench(c: &mut Criterion) {
    let (partial, _) = acks(0);
    println!(
        "tx_trim: {PAYLOAD}-byte super-segments, {} ACKs each ({} before TX completion)",
        partial.len() + 1,
        partial.len()
    );
    let mut g = c.benchmark_group("tx_trim");
    g.measurement_time(Duration::from_secs(3)).sample_size(50);
    let mut pool = Vec::new();

    let mut lazy = Copies::default();
    g.bench_function("lazy", |b| {
        b.iter_custom(|iters| run_lazy(iters, &mut pool, &mut lazy))
    });
    report("lazy", &lazy);

    for (name, each) in [("eager_once", false), ("eager_each", true)] {
        let mut eager = Copies::default();
        g.bench_function(name, |b| {
            b.iter_custom(|iters| run_eager(iters, each, &mut pool, &mut eager))
        });
        report(name, &eager);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
