//! `lro bench`: nanoseconds per input frame of parse + coalesce + header fix-up + emit.
//!
//! The method of the DPDK peer benchmark (`gro_bench.c` in the project's shared data,
//! `../shared/tools/peer-dpdk-gro/` beside the checkout): frames are decoded from the file
//! once; before each burst their bytes are copied into preallocated working buffers (not timed:
//! the engine rewrites headers in place, so every round needs fresh copies); only the calls
//! that offer the burst to the engine and flush it are timed, with [`Instant`], and summed over
//! the file. The sink does what a driver would do
//! with a segment — count it and its bytes — and recycles the buffers.
//!
//! The buffers are slots of one arena, 64-byte aligned, like a driver's receive buffers (or
//! DPDK's mbuf pool); the frame handle is a slot and the length of what the engine sees (a
//! cooked-capture header is left out when copying).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use lro_core::{Coalescer, RxMeta, Segment, Sink, Stats};
use serde_json::json;

use crate::alloc_count;
use crate::capture::Capture;
use crate::engine::{with_engine, EngineArgs, OutCsumArg, WithEngine};
use crate::floor::Floor;
use crate::report;

/// `lro bench` arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BenchArgs {
    /// Capture to measure on: pcap or pcapng, optionally .xz-compressed; `-` reads standard
    /// input [default: the built-in capture].
    pub(crate) input: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    /// Full passes over the capture; best and median are reported.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub(crate) rounds: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Time the floor reference instead of the engine: the least a coalescer does per frame
    /// (one layout, trusted checksums, direct-mapped flows, full output checksums), to compare
    /// with. Needs `--csum trust`; `--burst` applies, the other engine settings are checked
    /// but do not apply.
    #[arg(long)]
    pub(crate) floor: bool,
}

/// A driver-like sink: counts segments and bytes, recycles every frame into the pool.
struct CountSink<'p, 'a, const SLOT: usize> {
    segments: u64,
    bytes: u64,
    pool: &'p mut Vec<Frame<'a, SLOT>>,
}

/// The frame handle of the benchmark: a buffer slot of the arena (a thin pointer: the slot
/// size is a constant) and the length in use, 16 bytes like a driver's descriptor handle.
struct Frame<'a, const SLOT: usize> {
    slot: &'a mut [u8; SLOT],
    len: usize,
}

impl<const SLOT: usize> Frame<'_, SLOT> {
    /// Copies a frame into the slot (the arena's slots hold the largest frame of the input).
    fn fill(&mut self, bytes: &[u8]) {
        self.len = bytes.len().min(self.slot.len());
        self.slot[..self.len].copy_from_slice(&bytes[..self.len]);
    }
}

impl<const SLOT: usize> AsRef<[u8]> for Frame<'_, SLOT> {
    fn as_ref(&self) -> &[u8] {
        &self.slot[..self.len]
    }
}

impl<const SLOT: usize> AsMut<[u8]> for Frame<'_, SLOT> {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.slot[..self.len]
    }
}

impl<'a, const SLOT: usize> CountSink<'_, 'a, SLOT> {
    /// Counts a segment of `len` bytes and recycles its frames.
    #[inline(always)]
    fn take(&mut self, len: usize, frames: impl IntoIterator<Item = Frame<'a, SLOT>>) {
        self.segments += 1;
        self.bytes += len as u64;
        // The pool has room for every frame in flight: no allocation here.
        for f in frames {
            self.pool.push(f);
        }
    }
}

impl<'a, const SLOT: usize> Sink<Frame<'a, SLOT>> for CountSink<'_, 'a, SLOT> {
    fn segment(&mut self, seg: Segment<'_, Frame<'a, SLOT>>) {
        self.take(seg.len(), seg.into_frames());
    }

    fn release(&mut self, frame: Frame<'a, SLOT>) {
        self.pool.push(frame);
    }
}

impl<'a, const SLOT: usize> crate::floor::Deliver<Frame<'a, SLOT>> for CountSink<'_, 'a, SLOT> {
    fn segment(&mut self, frames: &mut [Option<Frame<'a, SLOT>>], len: usize) {
        self.take(len, frames.iter_mut().filter_map(Option::take));
    }

    fn release(&mut self, frame: Frame<'a, SLOT>) {
        self.pool.push(frame);
    }
}

/// What a timed burst runs: an engine, or the floor reference.
trait Timed<'a, const SLOT: usize> {
    /// Offers one frame.
    fn push(&mut self, frame: Frame<'a, SLOT>, meta: &RxMeta, sink: &mut CountSink<'_, 'a, SLOT>);
    /// Delivers everything held (the end of the burst).
    fn flush_all(&mut self, sink: &mut CountSink<'_, 'a, SLOT>);
    /// Frames held now.
    fn held_frames(&self) -> usize;
    /// Checks a pass's figures against what the coalescer counted, and adds what only it
    /// counts (the flows it forgot, `Stats::forgotten`; the floor keeps none to forget).
    /// Untimed.
    fn account(&mut self, _: &mut Round) -> Result<()> {
        Ok(())
    }
}

/// An engine, timed, with its counters before the pass.
struct Engine<'e, E> {
    engine: &'e mut E,
    before: Stats,
}

impl<'a, const SLOT: usize, E: Coalescer<Frame<'a, SLOT>>> Timed<'a, SLOT> for Engine<'_, E> {
    #[inline(always)]
    fn push(&mut self, frame: Frame<'a, SLOT>, meta: &RxMeta, sink: &mut CountSink<'_, 'a, SLOT>) {
        self.engine.push(frame, meta, sink);
    }

    #[inline(always)]
    fn flush_all(&mut self, sink: &mut CountSink<'_, 'a, SLOT>) {
        self.engine.flush_all(sink);
    }

    fn held_frames(&self) -> usize {
        self.engine.held_frames()
    }

    fn account(&mut self, r: &mut Round) -> Result<()> {
        let before = std::mem::replace(&mut self.before, self.engine.stats().clone());
        let now = &self.before;
        let segments = now.segments - before.segments;
        anyhow::ensure!(
            r.frames_out == segments && now.is_conserved(),
            "internal error: the sink saw {} segments, the engine counted {segments}",
            r.frames_out,
        );
        r.forgotten = now.forgotten - before.forgotten;
        Ok(())
    }
}

impl<'a, const SLOT: usize> Timed<'a, SLOT> for Floor<Frame<'a, SLOT>> {
    #[inline(always)]
    fn push(&mut self, frame: Frame<'a, SLOT>, _: &RxMeta, sink: &mut CountSink<'_, 'a, SLOT>) {
        Floor::push(self, frame, sink);
    }

    #[inline(always)]
    fn flush_all(&mut self, sink: &mut CountSink<'_, 'a, SLOT>) {
        Floor::flush_all(self, sink);
    }

    fn held_frames(&self) -> usize {
        Floor::held_frames(self)
    }
}

/// One timed pass.
struct Round {
    time: Duration,
    frames_in: u64,
    frames_out: u64,
    allocations: u64,
    /// Flows forgotten in the pass (untimed; see [`Timed::account`]).
    forgotten: u64,
}

/// One full pass over `frames` in bursts; only the engine calls are timed.
fn round<'a, const SLOT: usize, T: Timed<'a, SLOT>>(
    engine: &mut T,
    frames: &[(&[u8], RxMeta)],
    burst: usize,
    pool: &mut Vec<Frame<'a, SLOT>>,
    batch: &mut Vec<Frame<'a, SLOT>>,
) -> Result<Round> {
    let mut time = Duration::ZERO;
    let mut allocations = 0;
    let mut sink = CountSink {
        segments: 0,
        bytes: 0,
        pool,
    };
    for chunk in frames.chunks(burst) {
        // Not timed: fresh copies of the burst's frames in recycled buffers.
        for &(bytes, _) in chunk {
            // The pool holds a slot for every frame of a burst (all come back each burst).
            let Some(mut f) = sink.pool.pop() else {
                anyhow::bail!("internal error: a frame of the previous burst did not come back");
            };
            f.fill(bytes);
            batch.push(f);
        }
        let a0 = alloc_count::allocations();
        let t0 = Instant::now();
        burst_once(engine, batch, chunk, &mut sink);
        time += t0.elapsed();
        allocations += alloc_count::allocations() - a0;
    }
    Ok(Round {
        time,
        frames_in: frames.len() as u64,
        frames_out: sink.segments,
        allocations,
        forgotten: 0,
    })
}

/// The timed work of one burst: every frame pushed, then the end-of-poll flush. Not inlined, so
/// an instruction counter can be told to count exactly this
/// (`valgrind --tool=callgrind --toggle-collect='*burst_once*'`); one call per burst costs
/// nothing measurable.
#[inline(never)]
fn burst_once<'a, const SLOT: usize, T: Timed<'a, SLOT>>(
    engine: &mut T,
    batch: &mut Vec<Frame<'a, SLOT>>,
    chunk: &[(&[u8], RxMeta)],
    sink: &mut CountSink<'_, 'a, SLOT>,
) {
    for (f, (_, meta)) in batch.drain(..).zip(chunk) {
        engine.push(f, meta, sink);
    }
    engine.flush_all(sink);
}

/// Every round on one engine, as a job for [`with_engine`].
struct Rounds<'a, 'f, 'm, const SLOT: usize> {
    frames: &'a [(&'f [u8], RxMeta)],
    burst: usize,
    rounds: u64,
    pool: &'a mut Vec<Frame<'m, SLOT>>,
    batch: &'a mut Vec<Frame<'m, SLOT>>,
    bar: &'a indicatif::ProgressBar,
}

impl<'m, const SLOT: usize> WithEngine for Rounds<'_, '_, 'm, SLOT> {
    type Frame = Frame<'m, SLOT>;
    type Out = Result<Vec<Round>>;

    fn run<E: Coalescer<Frame<'m, SLOT>>>(self, engine: &mut E) -> Result<Vec<Round>> {
        let before = engine.stats().clone();
        self.timed(&mut Engine { engine, before })
    }
}

impl<'m, const SLOT: usize> Rounds<'_, '_, 'm, SLOT> {
    /// A warm-up pass (caches, branch predictors, page faults of the buffers), not counted,
    /// then every round, each checked: nothing held after the end-of-burst flush, every frame
    /// back in the pool, and what `t` itself checks.
    fn timed<T: Timed<'m, SLOT>>(self, t: &mut T) -> Result<Vec<Round>> {
        let mut rounds = Vec::new();
        for i in 0..=self.rounds {
            let mut r = round(t, self.frames, self.burst, self.pool, self.batch)?;
            anyhow::ensure!(
                t.held_frames() == 0 && self.pool.len() == self.burst,
                "internal error: {} frames held after the flush, {} of {} buffers back",
                t.held_frames(),
                self.pool.len(),
                self.burst
            );
            t.account(&mut r)?;
            if i > 0 {
                self.bar.inc(self.frames.len() as u64);
                rounds.push(r);
            }
        }
        Ok(rounds)
    }
}

/// The largest frame `bench` measures (pcap's largest usual snap length).
const MAX_FRAME: usize = 262_144;

/// Every round with buffer slots of `SLOT` bytes (at least the largest frame).
fn measure<const SLOT: usize>(
    args: &BenchArgs,
    tunnels: bool,
    frames: &[(&[u8], RxMeta)],
    burst: usize,
    bar: &indicatif::ProgressBar,
) -> Result<Vec<Round>> {
    // Working buffers, allocated once as one arena of 64-byte aligned slots: every frame of a
    // burst comes back before the next one. An arena too large for memory (a long --burst of
    // large frames) is refused with a message, not an abort.
    let len = (burst + 1).saturating_mul(SLOT);
    let mut arena = Vec::new();
    arena.try_reserve_exact(len).map_err(|e| {
        crate::UsageError(format!(
            "--burst {}: {burst} buffers of {SLOT} bytes (room for the capture's largest frame) cannot be allocated ({e}); choose a smaller --burst",
            args.engine.burst
        ))
    })?;
    arena.resize(len, 0u8);
    let skew = arena.as_ptr().align_offset(64).min(SLOT);
    let mut pool: Vec<Frame<'_, SLOT>> = Vec::with_capacity(2 * burst);
    pool.extend(
        arena[skew..]
            .chunks_exact_mut(SLOT)
            .take(burst)
            .filter_map(|c| <&mut [u8; SLOT]>::try_from(c).ok())
            .map(|slot| Frame { slot, len: 0 }),
    );
    let mut batch: Vec<Frame<'_, SLOT>> = Vec::with_capacity(burst);
    let job = Rounds {
        frames,
        burst,
        rounds: args.rounds,
        pool: &mut pool,
        batch: &mut batch,
        bar,
    };
    if args.floor {
        return job.timed(&mut Floor::new());
    }
    with_engine(&args.engine, args.engine.config(), tunnels, job)?
}

/// The smallest and the median of `values` (not empty), sorting them: the middle one of an odd
/// number, the mean of the two middle ones of an even number.
fn best_and_median(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    let median = if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    };
    (values[0], median)
}

/// `lro bench`.
pub(crate) fn command(args: &BenchArgs) -> Result<()> {
    args.engine.validate()?;
    if args.floor && !matches!(args.engine.csum, crate::engine::CsumArg::Trust) {
        anyhow::bail!(crate::UsageError(
            "--floor trusts every checksum: use it with --csum trust".to_string()
        ));
    }
    let cap = Capture::load(args.input.as_deref())?;
    // Frames that bypass the engine (cooked-capture frames that are not IP) are not measured.
    let frames: Vec<(&[u8], RxMeta)> = cap
        .records
        .iter()
        .filter_map(|r| {
            let base = r.class.meta(r.ts_ns)?;
            let bytes = cap.frame(r).get(r.class.skip()..).unwrap_or(&[]);
            Some((bytes, args.engine.meta(base, bytes)))
        })
        .collect();
    if frames.is_empty() {
        anyhow::bail!(crate::capture::InputError {
            file: cap.name.clone(),
            problem: "no IP frames to measure".to_string(),
        });
    }
    let burst = usize::try_from(args.engine.burst)
        .unwrap_or(usize::MAX)
        .min(frames.len());
    let tunnels = crate::tunnel::carried(&cap);
    let bar = crate::progress::bar(frames.len() as u64 * args.rounds, !args.json);
    let rounds = match cap.max_len {
        0..=2048 => measure::<2048>(args, tunnels, &frames, burst, &bar)?,
        2049..=16384 => measure::<16384>(args, tunnels, &frames, burst, &bar)?,
        16385..=MAX_FRAME => measure::<MAX_FRAME>(args, tunnels, &frames, burst, &bar)?,
        n => anyhow::bail!(crate::capture::InputError {
            file: cap.name.clone(),
            problem: format!("a frame of {n} bytes: bench handles frames up to {MAX_FRAME} bytes"),
        }),
    };
    bar.finish_and_clear();

    let mut per_frame: Vec<f64> = rounds
        .iter()
        .map(|r| r.time.as_nanos() as f64 / r.frames_in as f64)
        .collect();
    let (best, median) = best_and_median(&mut per_frame);
    let last = &rounds[rounds.len() - 1];
    let allocations: u64 = rounds.iter().map(|r| r.allocations).sum();
    let ratio = report::ratio(last.frames_in, last.frames_out);
    let csum = args.engine.csum_name();
    // What ran: the floor reference has its own fixed settings (the engine's do not apply).
    let (policy, flows, rss_sort, out_csum, bypass) = if args.floor {
        (
            "floor",
            crate::floor::FLOWS,
            false,
            OutCsumArg::Full.name(),
            false,
        )
    } else {
        (
            args.engine.policy_name(),
            args.engine.flows,
            args.engine.rss_sort,
            args.engine.out_csum_name(),
            args.engine.bypass,
        )
    };
    let mut t = String::new();
    if args.json {
        let v = json!({
            "input": cap.name,
            "policy": policy,
            "burst": burst,
            "flows": flows,
            "csum": csum,
            "out_csum": out_csum,
            "rss_sort": rss_sort,
            "bypass": bypass,
            "rounds": args.rounds,
            "frames_in": last.frames_in,
            "frames_out": last.frames_out,
            "ratio": ratio,
            "ns_per_frame_best": best,
            "ns_per_frame_median": median,
            "allocations_timed": allocations,
            "forgotten_per_pass": last.forgotten,
        });
        let _ = writeln!(t, "{v}");
    } else {
        let _ = writeln!(
            t,
            "{}: {} frames in, {} out, ratio {:.2} (policy {}, burst {burst}{}, {} flows, checksums {csum}, out {out_csum}{})",
            cap.name,
            last.frames_in,
            last.frames_out,
            ratio,
            policy,
            if rss_sort { " sorted by RSS hash" } else { "" },
            flows,
            if bypass { ", adaptive bypass" } else { "" }
        );
        let _ = writeln!(
            t,
            "ns per input frame: best {best:.1}, median {median:.1} over {} rounds (parse + coalesce + header fix-up + emit; refilling buffers not timed)",
            args.rounds
        );
        let _ = writeln!(t, "allocations in the timed region: {allocations}");
        if last.forgotten > 0 {
            let _ = writeln!(
                t,
                "forgotten: {} flows per pass lost their table entry to make room (fewer entries, {flows}, than active flows: `--flows` sets them), and their next frames took the parser",
                last.forgotten
            );
        }
    }
    // A failure to write the report is an output error (exit status 4), naming stdout.
    crate::print_out(&t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{CsumArg, OutCsumArg, PolicyArg};

    #[test]
    fn an_arena_too_large_for_memory_is_an_error_not_an_abort() {
        let args = BenchArgs {
            input: None,
            engine: EngineArgs {
                policy: PolicyArg::Lro,
                burst: 64,
                flows: 64,
                csum: CsumArg::Trust,
                out_csum: OutCsumArg::Full,
                rss_sort: false,
                no_prediction: false,
                bypass: false,
            },
            rounds: 1,
            json: true,
            floor: false,
        };
        let frame = [0u8; 60];
        let meta = args.engine.meta(RxMeta::ethernet(0), &frame);
        // 2^42 buffers of 256 KiB: 2^60 bytes, more than any address space.
        let bar = indicatif::ProgressBar::hidden();
        let e = measure::<MAX_FRAME>(&args, false, &[(&frame[..], meta)], 1 << 42, &bar)
            .err()
            .expect("refused");
        assert!(e.is::<crate::UsageError>(), "{e}");
        assert!(e.to_string().contains("--burst"), "{e}");
    }

    #[test]
    fn best_and_median_of_odd_and_even_counts() {
        assert_eq!(best_and_median(&mut [7.0]), (7.0, 7.0));
        assert_eq!(best_and_median(&mut [9.0, 1.0, 4.0]), (1.0, 4.0));
        assert_eq!(best_and_median(&mut [8.0, 2.0, 6.0, 3.0]), (2.0, 4.5));
    }
}
