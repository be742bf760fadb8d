//! `lro replay`: coalesce a capture as a receive path would, write what comes out, summarise.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use lro_core::{LinkKind, RxMeta, Segment, Sink, Stats};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::capture::{Capture, Link};
use crate::engine::{drive, with_engine, EngineArgs, Frame, Output, Schedule, WithEngine};
use crate::explain::FlowTable;
use crate::report::{self, RunInfo};

/// Snap length of the output pcap: room for a 64 KB segment and any link header.
const OUT_SNAPLEN: u32 = 262_144;

/// Holding flows across bursts.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct HoldArgs {
    /// Keep flows held across bursts; a flow idle longer than --timeout-us (capture time) is
    /// flushed before the next frame is offered.
    #[arg(long)]
    pub(crate) hold: bool,
    /// Idle timeout for --hold, in microseconds of capture time.
    #[arg(long, default_value_t = 100, requires = "hold")]
    pub(crate) timeout_us: u64,
}

/// `lro replay` arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ReplayArgs {
    /// Capture to replay: pcap or pcapng, optionally .xz-compressed [default: the built-in
    /// capture].
    pub(crate) input: Option<PathBuf>,
    /// Write every emitted frame, in emission order, to this pcap.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// Print one JSON object instead of the readable summary.
    #[arg(long)]
    pub(crate) json: bool,
}

/// A failure writing the output file (exit status 1, not a bad-input error).
#[derive(Debug)]
pub(crate) struct OutputError(pub(crate) String);

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for OutputError {}

/// The output pcap.
struct PcapOut {
    writer: PcapWriter<BufWriter<File>>,
    path: String,
}

/// The sink of `replay` and `explain`: writes frames, counts them per flow, recycles nothing.
pub(crate) struct ReplaySink {
    out: Option<PcapOut>,
    /// First write error; later frames are not written.
    error: Option<String>,
    /// Per-flow counters (explain).
    pub(crate) flows: Option<FlowTable>,
    /// How released frames are parsed for their flow.
    link: LinkKind,
    scratch: Vec<u8>,
    /// Frames delivered up (segments count once).
    pub(crate) delivered: u64,
}

impl ReplaySink {
    fn new(out: Option<PcapOut>, flows: Option<FlowTable>, cap: &Capture) -> Self {
        ReplaySink {
            out,
            error: None,
            flows,
            link: match cap.link {
                Link::Ethernet => LinkKind::Ethernet,
                _ => LinkKind::RawIp,
            },
            scratch: Vec::with_capacity(OUT_SNAPLEN as usize),
            delivered: 0,
        }
    }

    fn write(&mut self, ts_ns: u64) {
        let (Some(out), None) = (&mut self.out, &self.error) else {
            return;
        };
        let len = self.scratch.len() as u32;
        let packet = PcapPacket::new(Duration::from_nanos(ts_ns), len, &self.scratch);
        if let Err(e) = out.writer.write_packet(&packet) {
            self.error = Some(format!("{}: cannot write: {e}", out.path));
        }
    }

    /// Flushes the output file; reports the first write error.
    fn finish(self) -> Result<(Option<FlowTable>, u64)> {
        if let Some(e) = self.error {
            return Err(OutputError(e).into());
        }
        if let Some(out) = self.out {
            let path = out.path;
            out.writer
                .into_writer()
                .flush()
                .map_err(|e| OutputError(format!("{path}: cannot write: {e}")))?;
        }
        Ok((self.flows, self.delivered))
    }
}

impl Sink<Frame> for ReplaySink {
    fn segment(&mut self, seg: Segment<'_, Frame>) {
        self.delivered += 1;
        if let Some(flows) = &mut self.flows {
            flows.segment(seg.info());
        }
        if self.out.is_some() {
            let Some(head) = seg.frames().next() else {
                return;
            };
            let ts = head.ts_ns;
            self.scratch.clear();
            self.scratch.extend_from_slice(head.link_header());
            for chunk in seg.chunks() {
                self.scratch.extend_from_slice(chunk);
            }
            self.write(ts);
        }
    }

    fn release(&mut self, frame: Frame) {
        if let Some(flows) = &mut self.flows {
            let key = lro_core::parse::flow_key(
                frame.as_ref(),
                &RxMeta::ethernet(0).with_link(self.link),
            );
            flows.released(key);
        }
    }
}

impl Output for ReplaySink {
    fn bypass(&mut self, frame: Frame) {
        self.delivered += 1;
        if let Some(flows) = &mut self.flows {
            flows.bypassed();
        }
        if self.out.is_some() {
            self.scratch.clear();
            self.scratch.extend_from_slice(&frame.buf);
            self.write(frame.ts_ns);
        }
    }
}

/// Result of one replay of a capture.
pub(crate) struct Replayed {
    /// Engine counters, frames bypassing the engine included.
    pub(crate) stats: Stats,
    /// Per-flow table, when asked.
    pub(crate) flows: Option<FlowTable>,
    /// What was run.
    pub(crate) info: RunInfo,
}

/// The burst loop as a job for [`with_engine`].
struct Job<'a> {
    cap: &'a Capture,
    args: &'a EngineArgs,
    schedule: Schedule,
    sink: &'a mut ReplaySink,
    bar: &'a indicatif::ProgressBar,
}

impl WithEngine for Job<'_> {
    type Frame = Frame;
    type Out = Stats;

    fn run<E: lro_core::Coalescer<Frame>>(self, engine: &mut E) -> Stats {
        let bar = self.bar;
        drive(engine, self.cap, self.args, self.schedule, self.sink, |n| {
            bar.inc(n as u64)
        })
    }
}

/// Loads the input and replays it through the engine; used by `replay` and `explain`.
pub(crate) fn run(
    input: Option<&std::path::Path>,
    output: Option<&std::path::Path>,
    engine_args: &EngineArgs,
    hold: &HoldArgs,
    per_flow: bool,
) -> Result<Replayed> {
    engine_args.validate()?;
    if engine_args.rss_sort && hold.hold {
        anyhow::bail!(crate::UsageError(
            "--rss-sort cannot be combined with --hold: the RSS sort queue is one burst, fed and flushed whole".to_string()
        ));
    }
    let t0 = Instant::now();
    let cap = Capture::load(input)?;
    let load_time = t0.elapsed();

    let out = match output {
        Some(p) => {
            let path = p.display().to_string();
            let file =
                File::create(p).map_err(|e| OutputError(format!("{path}: cannot create: {e}")))?;
            let header = PcapHeader {
                snaplen: OUT_SNAPLEN,
                datalink: DataLink::from(cap.link_number),
                ts_resolution: TsResolution::NanoSecond,
                endianness: Endianness::native(),
                ..PcapHeader::default()
            };
            let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header)
                .map_err(|e| OutputError(format!("{path}: cannot write: {e}")))?;
            Some(PcapOut { writer, path })
        }
        None => None,
    };
    let mut sink = ReplaySink::new(out, per_flow.then(FlowTable::default), &cap);

    let mut config = engine_args.config();
    if hold.hold {
        config.idle_timeout = Some(hold.timeout_us.saturating_mul(1000));
    }
    let schedule = Schedule {
        burst: usize::try_from(engine_args.burst).unwrap_or(usize::MAX),
        hold: hold.hold,
    };
    let bar = crate::progress::bar(cap.records.len() as u64);
    let t1 = Instant::now();
    let job = Job {
        cap: &cap,
        args: engine_args,
        schedule,
        sink: &mut sink,
        bar: &bar,
    };
    let stats = with_engine(engine_args, config, job)?;
    let run_time = t1.elapsed();
    bar.finish_and_clear();
    let (flows, delivered) = sink.finish()?;
    debug_assert_eq!(delivered, report::frames_out(&stats));
    anyhow::ensure!(
        delivered == report::frames_out(&stats) && stats.is_conserved(),
        "internal error: the engine's counters ({} delivered, conserved: {}) disagree with the {delivered} frames the sink received",
        report::frames_out(&stats),
        stats.is_conserved()
    );

    let info = RunInfo {
        input: cap.name.clone(),
        link: cap.link.name(),
        policy: engine_args.policy_name(),
        burst: engine_args.burst,
        flows: engine_args.flows,
        csum: engine_args.csum_name(),
        out_csum: engine_args.out_csum_name(),
        hold_timeout_us: hold.hold.then_some(hold.timeout_us),
        rss_sort: engine_args.rss_sort,
        load_time,
        run_time,
        output: output.map(|p| p.display().to_string()),
    };
    Ok(Replayed { stats, flows, info })
}

/// `lro replay`.
pub(crate) fn command(args: &ReplayArgs) -> Result<()> {
    let r = run(
        args.input.as_deref(),
        args.output.as_deref(),
        &args.engine,
        &args.hold,
        false,
    )?;
    let mut stdout = std::io::stdout().lock();
    if args.json {
        writeln!(stdout, "{}", report::json(&r.info, &r.stats))?;
    } else {
        write!(stdout, "{}", report::text(&r.info, &r.stats))?;
    }
    Ok(())
}
