//! Driving the engine over a capture: frames, engine settings, the table-size dispatch, and the
//! burst loop shared by `replay` and `explain`.

use anyhow::{bail, Result};
use lro_core::rss::RssSorted;
use lro_core::{
    Coalescer, Config, Engine, OutChecksum, Policy, RxChecksum, RxMeta, Sink, Sizes, Stats,
};

use crate::capture::{Capture, FrameClass, Record};
use crate::tunnel::Encap;
use lro_core::encap::{Encap as EncapHook, NoEncap};

/// Frames per flow (the engine's `S`): more than a 64 KB segment of 1500-byte frames needs.
pub(crate) const FRAMES_PER_FLOW: usize = 64;

/// Flow-table sizes the binary is built with (the table size is a const generic).
pub(crate) const TABLE_SIZES: [usize; 8] = [8, 16, 32, 64, 128, 256, 512, 1024];

/// A frame as the tool hands it to the engine: the captured bytes, a cooked-capture header the
/// engine does not see, the capture timestamp and the frame's place in the capture.
#[derive(Debug, Default)]
pub(crate) struct Frame {
    /// Captured bytes, link header included.
    pub(crate) buf: Vec<u8>,
    /// How the engine sees it: its link, the bytes of pseudo header (Linux cooked capture,
    /// IPoIB's GRH area) hidden from it, a VLAN tag a cooked capture took out.
    pub(crate) class: FrameClass,
    /// Capture timestamp in nanoseconds.
    pub(crate) ts_ns: u64,
    /// Arrival order: the frame's index in the capture (0 for the first frame).
    pub(crate) index: u64,
    /// Bytes of the frame on the wire that the capture left out (cut at its snap length).
    pub(crate) cut: usize,
}

impl Frame {
    /// The pseudo header hidden from the engine (empty unless cooked capture or IPoIB).
    pub(crate) fn link_header(&self) -> &[u8] {
        &self.buf[..self.skip()]
    }

    fn skip(&self) -> usize {
        self.class.skip().min(self.buf.len())
    }

    /// Refills this buffer with captured frame `r` of `cap`, reusing its allocation.
    pub(crate) fn fill(&mut self, cap: &Capture, r: &Record, index: u64) {
        self.buf.clear();
        self.buf.extend_from_slice(cap.frame(r));
        self.class = r.class;
        self.ts_ns = r.ts_ns;
        self.index = index;
        self.cut = r.cut;
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.buf[self.skip()..]
    }
}

impl AsMut<[u8]> for Frame {
    fn as_mut(&mut self) -> &mut [u8] {
        let skip = self.skip();
        &mut self.buf[skip..]
    }
}

/// `--policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum PolicyArg {
    /// Linux GRO rules: only what re-segments into the exact original frames.
    Gro,
    /// Endpoint LRO: also merges pure ACKs (an ACK superseded by a newer one of its flow is
    /// absorbed: not delivered).
    Lro,
}

/// `--csum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum CsumArg {
    /// Verify IPv4 header and TCP checksums in software.
    Verify,
    /// Trust them, as if the NIC had verified them (CHECKSUM_UNNECESSARY).
    Trust,
    /// Hand the engine each frame's full ones'-complement sum, as a NIC reporting
    /// CHECKSUM_COMPLETE does (computed when the frame is read, not timed by `bench`): the engine
    /// checks the TCP checksum from it without reading payload.
    Complete,
}

/// `--out-csum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutCsumArg {
    /// A complete TCP checksum in every coalesced segment.
    Full,
    /// Only the pseudo-header sum, as Linux GRO leaves it for CHECKSUM_PARTIAL: the output
    /// pcap's merged segments then show "bad" TCP checksums to a reader expecting full ones.
    Partial,
}

impl OutCsumArg {
    /// As printed in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            OutCsumArg::Full => "full",
            OutCsumArg::Partial => "partial",
        }
    }
}

/// Engine settings common to every subcommand.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct EngineArgs {
    /// Merge rules.
    #[arg(long, value_enum, default_value_t = PolicyArg::Lro)]
    pub(crate) policy: PolicyArg,
    /// Frames offered per burst (one driver poll); the end of a burst flushes everything
    /// (in replay and explain, unless --hold).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) burst: u64,
    /// Flow-table capacity: 8, 16, 32, 64, 128, 256, 512 or 1024.
    #[arg(long, default_value_t = 64)]
    pub(crate) flows: usize,
    /// Checksums: verify in software, trust them as a NIC's offload would, or take a
    /// CHECKSUM_COMPLETE sum (the NIC's sum of the whole frame) and check with it.
    #[arg(long, value_enum, default_value_t = CsumArg::Verify)]
    pub(crate) csum: CsumArg,
    /// TCP checksum of coalesced segments: full, or the pseudo-header sum only.
    #[arg(long, value_enum, default_value_t = OutCsumArg::Full)]
    pub(crate) out_csum: OutCsumArg,
    /// Queue each burst and sort it by RSS hash type and hash (software Toeplitz) before
    /// coalescing, stream by stream (FreeBSD's RSS-optimised LRO); bursts of at most 1024. Not
    /// with --bypass or --hold.
    #[arg(long)]
    pub(crate) rss_sort: bool,
    /// Turn header prediction off: every frame through the parser and the flow lookup (the
    /// output is the same; for comparing the cost of the two paths).
    #[arg(long)]
    pub(crate) no_prediction: bool,
    /// Adaptive bypass: after a burst in which 16 frames or more were held or merged and fewer
    /// than one in 32 of them merged, pass the next bursts' frames through without coalescing
    /// (1 to 16 bursts, then try again). For traffic of many flows that rarely send two frames
    /// in a burst. Not with --rss-sort or --hold.
    #[arg(long)]
    pub(crate) bypass: bool,
}

impl EngineArgs {
    /// The engine configuration (idle timeout set by the caller when holding).
    pub(crate) fn config(&self) -> Config {
        let mut config = match self.policy {
            PolicyArg::Gro => Config::gro(),
            PolicyArg::Lro => Config::lro(),
        };
        config.checksum_out = match self.out_csum {
            OutCsumArg::Full => OutChecksum::Full,
            OutCsumArg::Partial => OutChecksum::Partial,
        };
        config
            .with_header_prediction(!self.no_prediction)
            .with_adaptive_bypass(self.bypass)
    }

    /// Checks settings the argument parser cannot.
    pub(crate) fn validate(&self) -> Result<()> {
        if !TABLE_SIZES.contains(&self.flows) {
            bail!(crate::UsageError(format!(
                "--flows {}: the flow table size must be one of {}",
                self.flows,
                TABLE_SIZES.map(|n| n.to_string()).join(", ")
            )));
        }
        if self.rss_sort && self.bypass {
            bail!(crate::UsageError(
                "--bypass judges whole bursts, and --rss-sort feeds the engine one hash run at a \
                 time: use one or the other"
                    .to_string()
            ));
        }
        if self.rss_sort && self.burst > RSS_QUEUE as u64 {
            bail!(crate::UsageError(format!(
                "--rss-sort sorts whole bursts of at most {RSS_QUEUE} frames: --burst {} is too large",
                self.burst
            )));
        }
        Ok(())
    }

    /// The metadata `frame` (as the engine sees it) arrives with: `base` (its link, time and
    /// any stripped tag) with the checksum state `--csum` says.
    pub(crate) fn meta(&self, base: RxMeta, frame: &[u8]) -> RxMeta {
        match self.csum {
            CsumArg::Verify => base,
            CsumArg::Trust => base.with_checksum(RxChecksum::Verified),
            CsumArg::Complete => {
                let summed = frame.get(base.link.header_len()..).unwrap_or(&[]);
                base.with_checksum(RxChecksum::Complete(lro_core::csum::sum(summed)))
            }
        }
    }

    /// The policy's name.
    pub(crate) fn policy_name(&self) -> &'static str {
        match self.config().policy {
            Policy::Gro => "gro",
            _ => "lro",
        }
    }

    /// `--csum` as printed in reports.
    pub(crate) fn csum_name(&self) -> &'static str {
        match self.csum {
            CsumArg::Verify => "verify",
            CsumArg::Trust => "trust",
            CsumArg::Complete => "complete",
        }
    }

    /// `--out-csum` as printed in reports.
    pub(crate) fn out_csum_name(&self) -> &'static str {
        self.out_csum.name()
    }
}

/// Frames the `--rss-sort` queue holds: bursts up to this size are sorted whole.
pub(crate) const RSS_QUEUE: usize = 1024;

/// Something to do with an engine, whatever its table size and wrapping (a generic closure).
pub(crate) trait WithEngine {
    /// The frame handle the engine holds.
    type Frame: AsRef<[u8]> + AsMut<[u8]>;
    /// What it returns.
    type Out;
    /// Does it.
    fn run<E: Coalescer<Self::Frame>>(self, engine: &mut E) -> Self::Out;
}

/// Builds the engine `args` ask for (table size, optional RSS-sorting wrapper) with `config`
/// and runs `job` on it. The table size is a const generic: one instance per supported size.
/// With `tunnels` (the capture carries some: [`crate::tunnel::carried`]) the engine coalesces
/// through [`Encap`] (GRE with the default `gre` feature); otherwise through none, which plain
/// traffic runs faster on (no tunnel part in the flow key to carry and hash).
pub(crate) fn with_engine<W: WithEngine>(
    args: &EngineArgs,
    config: Config,
    tunnels: bool,
    job: W,
) -> Result<W::Out> {
    if tunnels {
        with_encap::<W, Encap>(args, config, job)
    } else {
        with_encap::<W, NoEncap>(args, config, job)
    }
}

/// [`with_engine`] with the encapsulation `X`.
fn with_encap<W: WithEngine, X: EncapHook>(
    args: &EngineArgs,
    config: Config,
    job: W,
) -> Result<W::Out> {
    fn go<const N: usize, const M: usize, W: WithEngine, X: EncapHook>(
        rss: bool,
        config: Config,
        job: W,
    ) -> W::Out {
        if rss {
            // The table is built at compile time (`Engine::new` is const), then configured:
            // a 1024-flow table is megabytes, too large to build on the stack.
            let mut inner = Box::new(
                const { Engine::<W::Frame, Sizes<N, FRAMES_PER_FLOW, M>, X>::new(Config::lro()) },
            );
            inner.set_config(config);
            let mut engine = Box::new(RssSorted::<_, W::Frame, RSS_QUEUE>::new(&mut *inner));
            job.run(&mut *engine)
        } else {
            let mut engine = Box::new(
                const { Engine::<W::Frame, Sizes<N, FRAMES_PER_FLOW, M>, X>::new(Config::lro()) },
            );
            engine.set_config(config);
            job.run(&mut *engine)
        }
    }
    // Four ACK records per table entry, as the default sizes have (64 and 256): the ACK memory
    // is direct-mapped by flow hash, and with fewer records than active flows the pure ACKs of
    // colliding flows pass alone (`unknown_ack`) where they could merge.
    let rss = args.rss_sort;
    Ok(match args.flows {
        8 => go::<8, 256, W, X>(rss, config, job),
        16 => go::<16, 256, W, X>(rss, config, job),
        32 => go::<32, 256, W, X>(rss, config, job),
        64 => go::<64, 256, W, X>(rss, config, job),
        128 => go::<128, 512, W, X>(rss, config, job),
        256 => go::<256, 1024, W, X>(rss, config, job),
        512 => go::<512, 2048, W, X>(rss, config, job),
        1024 => go::<1024, 4096, W, X>(rss, config, job),
        other => bail!(crate::UsageError(format!("unsupported --flows {other}"))),
    })
}

/// Where the frames the engine emits go, plus frames that bypass it.
pub(crate) trait Output: Sink<Frame> {
    /// A frame delivered without the engine (a cooked-capture frame that is not IP).
    fn bypass(&mut self, frame: Frame);
    /// The receive path's clock: the capture time of the frame being offered. Whatever the
    /// engine delivers from now on (the frame itself, segments it completes, idle flushes
    /// before it, the end-of-burst flush after it) is delivered at this time.
    fn now(&mut self, ts_ns: u64);
}

/// Burst-loop settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schedule {
    /// Frames per burst.
    pub(crate) burst: usize,
    /// Keep flows held across bursts, flushing idle ones by capture time.
    pub(crate) hold: bool,
}

/// Offers every frame of `cap` to `engine` in bursts and flushes as `schedule` says; returns
/// the engine's counters with bypassed frames added (as passed, not IP).
pub(crate) fn drive<E: Coalescer<Frame> + ?Sized, O: Output>(
    engine: &mut E,
    cap: &Capture,
    args: &EngineArgs,
    schedule: Schedule,
    out: &mut O,
    mut progress: impl FnMut(usize),
) -> Stats {
    let mut bypassed = 0u64;
    let mut index = 0u64;
    for chunk in cap.records.chunks(schedule.burst.max(1)) {
        for r in chunk {
            let Record { ts_ns, class, .. } = *r;
            let mut frame = Frame::default();
            out.now(ts_ns);
            // Idle flows go before every frame, whether the engine sees it or not: an ARP
            // frame of a cooked capture flushes them as the same frame of an Ethernet capture
            // (offered to the engine, passed as not IP) does.
            if schedule.hold {
                engine.flush_idle(ts_ns, out);
            }
            frame.fill(cap, r, index);
            match class.meta(ts_ns) {
                Some(base) => {
                    let meta = args.meta(base, frame.as_ref());
                    engine.push(frame, &meta, out);
                }
                None => {
                    bypassed += 1;
                    out.bypass(frame);
                }
            }
            index += 1;
        }
        if !schedule.hold {
            engine.flush_all(out);
        }
        progress(chunk.len());
    }
    engine.flush_all(out);
    let mut stats = engine.stats().clone();
    stats.frames_in += bypassed;
    stats.frames_out += bypassed;
    stats.segments += bypassed;
    stats.passed[lro_core::PassReason::NotIp.index()] += bypassed;
    stats
}
