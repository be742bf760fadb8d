//! `lro replay`: coalesce a capture as a receive path would, write what comes out, summarise.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Result;
use lro_core::{Cause, PassReason, Segment, Sink, Stats};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};

use crate::capture::Capture;
use crate::engine::{drive, with_engine, EngineArgs, Frame, Output, Schedule, WithEngine};
use crate::explain::FlowTable;
use crate::output::{OutFile, OutputError};
use crate::report::{self, RunInfo};
use crate::tunnel::FlowId;

/// Snap length of the output pcap: room for a 64 KB segment and any link header (more when an
/// input frame, passed through as it is, is longer).
const OUT_SNAPLEN: u32 = 262_144;

/// Holding flows across bursts.
#[derive(Debug, Clone, Copy, clap::Args)]
pub(crate) struct HoldArgs {
    /// Keep flows held across bursts; a flow idle longer than --timeout-us (capture time) is
    /// flushed before the next frame (of any kind) is handled, which makes every frame a burst
    /// of its own for the engine (header prediction's pause after poor bursts then never
    /// applies). Not with --rss-sort or --bypass.
    #[arg(long)]
    pub(crate) hold: bool,
    /// Idle timeout for --hold, in microseconds of capture time.
    #[arg(long, default_value_t = 100, requires = "hold")]
    pub(crate) timeout_us: u64,
}

/// `--order`: the order of the frames in the output pcap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Order {
    /// The input's order across flows: each output frame where its first data frame arrived (a
    /// merged pure ACK where its newest ACK arrived); a frame waits for other flows' held
    /// segments that arrived before it. Reads like the input in Wireshark.
    Arrival,
    /// The order the engine delivered frames, as the stack above sees them: frames of one flow
    /// can overtake another flow's held segment (legal: TCP orders only within a flow).
    Delivery,
}

/// `lro replay` arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ReplayArgs {
    /// Capture to replay: pcap or pcapng, optionally .xz-compressed; `-` reads standard input
    /// [default: the built-in capture].
    pub(crate) input: Option<PathBuf>,
    /// Write the frames delivered up to this pcap (`-`: standard output, the summary then goes
    /// to standard error). Written beside it under a temporary name and renamed when the run
    /// succeeds, so a failed run leaves an existing file as it was; the input file is refused.
    #[arg(short, long)]
    pub(crate) output: Option<PathBuf>,
    /// Order of the frames in the output pcap. Every frame is stamped with the capture time at
    /// which it was written (delivered, or let go by the arrival-order buffer), so timestamps
    /// never go backwards where the input's did not.
    #[arg(long, value_enum, default_value_t = Order::Arrival, requires = "output")]
    pub(crate) order: Order,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// Print one JSON object instead of the readable summary (and no progress bar). Its
    /// `counters` hold every counter of the engine, named as lro-core's `Stats::counters`
    /// names them; the keys outside it name some otherwise: `frames_out` there is the frames
    /// delivered up (each segment once, as `segments`), `counters.frames_out` the input frames
    /// inside them.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The output pcap and its writing order.
struct PcapOut {
    writer: PcapWriter<BufWriter<OutFile>>,
    /// The output's name for messages.
    name: String,
    order: Order,
    reorder: Reorder,
    /// Per flow: the newest pure ACK absorbed since the flow's last delivery (arrival order
    /// places a merged ACK where its newest ACK arrived).
    absorbed: HashMap<FlowId, u64>,
    /// First write error; later frames are not written.
    error: Option<String>,
}

impl PcapOut {
    /// Writes a frame of `bytes` whose capture left out `cut` bytes of it (its length on the
    /// wire is the sum).
    fn write(&mut self, ts_ns: u64, bytes: &[u8], cut: usize) {
        if self.error.is_some() {
            return;
        }
        let wire_len = u32::try_from(bytes.len().saturating_add(cut)).unwrap_or(u32::MAX);
        let packet = PcapPacket::new(Duration::from_nanos(ts_ns), wire_len, bytes);
        if let Err(e) = self.writer.write_packet(&packet) {
            self.error = Some(format!("{}: cannot write: {}", self.name, describe(&e)));
        }
    }

    /// A frame or segment delivered at `now` (`cut`: bytes of it its capture left out):
    /// written at once, or when every frame that arrived before `key` has been delivered or
    /// absorbed.
    fn deliver(&mut self, now: u64, key: u64, bytes: Vec<u8>, cut: usize) {
        match self.order {
            Order::Delivery => {
                self.write(now, &bytes, cut);
                self.reorder.recycle(bytes);
            }
            Order::Arrival => {
                self.reorder.pending.insert(key, (bytes, cut));
                self.drain(now, false);
            }
        }
    }

    /// Writes what the arrival order lets go (everything when `all`).
    fn drain(&mut self, now: u64, all: bool) {
        while let Some((bytes, cut)) = self.reorder.pop_ready(all) {
            self.write(now, &bytes, cut);
            self.reorder.recycle(bytes);
        }
    }

    /// Writes what is left, flushes and commits the file; reports the first write error.
    fn finish(mut self, now: u64) -> Result<()> {
        self.drain(now, true);
        if let Some(e) = self.error {
            return Err(OutputError(e).into());
        }
        let name = self.name;
        let out = self
            .writer
            .into_writer()
            .into_inner()
            .map_err(|e| OutputError(format!("{name}: cannot write: {}", e.error())))?;
        out.commit()?;
        Ok(())
    }
}

/// A pcap-file error in words (its own text for I/O errors is "Error reading bytes").
fn describe(e: &pcap_file::PcapError) -> String {
    match e {
        pcap_file::PcapError::IoError(io) => io.to_string(),
        other => other.to_string(),
    }
}

/// The arrival-order buffer: frames wait here until every frame that arrived before theirs
/// has been delivered or absorbed.
#[derive(Debug, Default)]
struct Reorder {
    /// Every arrival index below this one has been delivered or absorbed.
    low: u64,
    /// Delivered-or-absorbed flags of the arrival indices from `low` on.
    done: VecDeque<bool>,
    /// Output frames waiting, by arrival index, with the bytes their capture left out.
    pending: BTreeMap<u64, (Vec<u8>, usize)>,
    /// Buffers to reuse.
    spare: Vec<Vec<u8>>,
}

impl Order {
    /// The value's name, as in `--order`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Order::Arrival => "arrival",
            Order::Delivery => "delivery",
        }
    }
}

impl Reorder {
    /// Frame `index` has left the engine (delivered or absorbed).
    fn mark(&mut self, index: u64) {
        let Some(i) = index
            .checked_sub(self.low)
            .and_then(|i| usize::try_from(i).ok())
        else {
            return;
        };
        if i >= self.done.len() {
            self.done.resize(i + 1, false);
        }
        self.done[i] = true;
        while self.done.front() == Some(&true) {
            self.done.pop_front();
            self.low += 1;
        }
    }

    /// The first waiting frame, if nothing that arrived before it is still in the engine.
    fn pop_ready(&mut self, all: bool) -> Option<(Vec<u8>, usize)> {
        let entry = self.pending.first_entry()?;
        (all || *entry.key() < self.low).then(|| entry.remove())
    }

    fn buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    fn recycle(&mut self, mut bytes: Vec<u8>) {
        bytes.clear();
        self.spare.push(bytes);
    }
}

/// The sink of `replay` and `explain`: writes frames, counts them per flow, recycles nothing.
pub(crate) struct ReplaySink {
    out: Option<PcapOut>,
    /// Per-flow counters (explain).
    pub(crate) flows: Option<FlowTable>,
    /// The receive path's clock: capture time of the frame being offered.
    now: u64,
    /// Frames delivered up (segments count once).
    pub(crate) delivered: u64,
}

impl ReplaySink {
    fn new(out: Option<PcapOut>, flows: Option<FlowTable>) -> Self {
        ReplaySink {
            out,
            flows,
            now: 0,
            delivered: 0,
        }
    }

    /// Writes the rest and commits the output file; reports the first write error.
    fn finish(self) -> Result<Option<FlowTable>> {
        if let Some(out) = self.out {
            out.finish(self.now)?;
        }
        Ok(self.flows)
    }
}

impl Sink<Frame> for ReplaySink {
    fn segment(&mut self, seg: Segment<'_, Frame>) {
        self.delivered += 1;
        let info = seg.info();
        if let Some(flows) = &mut self.flows {
            // A frame the adaptive bypass passed through carries no flow: parsed for the table.
            let parsed = if info.cause == Cause::Passed(PassReason::Bypassed) {
                seg.frames().next().and_then(FlowId::parse_with_payload)
            } else {
                None
            };
            flows.segment(info, parsed, self.now);
        }
        let Some(out) = &mut self.out else {
            return;
        };
        let Some(head) = seg.frames().next() else {
            return;
        };
        let absorbed = FlowId::of(info).and_then(|k| out.absorbed.remove(&k));
        let mut newest = head.index;
        for f in seg.frames() {
            out.reorder.mark(f.index);
            newest = newest.max(f.index);
        }
        // A frame passed alone keeps its length on the wire when the capture cut it (a frame
        // cut inside its datagram is never merged); a merged segment is the engine's, whole,
        // and so is a frame whose padding it trimmed (what the capture left out was padding).
        let as_captured = info.frames == 1 && seg.len() == head.as_ref().len();
        let cut = if as_captured { head.cut } else { 0 };
        let key = if info.payload_len == 0 {
            // A pure ACK carries the values of the newest ACK it absorbed: it goes where that
            // one arrived, after the data it acknowledges.
            newest.max(absorbed.unwrap_or(0))
        } else {
            // Data goes where its first byte arrived, before any ACK of it. Only the head can
            // be without payload (a held pure ACK that data was appended to): then the data
            // starts with the second frame.
            let skip = usize::from(info.frames.saturating_sub(info.gso_segs));
            seg.frames().nth(skip).map_or(head.index, |f| f.index)
        };
        let mut bytes = out.reorder.buffer();
        bytes.extend_from_slice(head.link_header());
        for chunk in seg.chunks() {
            bytes.extend_from_slice(chunk);
        }
        out.deliver(self.now, key, bytes, cut);
    }

    fn release(&mut self, frame: Frame) {
        let wanted = self.flows.is_some() || self.out.is_some();
        let key = wanted.then(|| FlowId::parse(&frame)).flatten();
        if let Some(flows) = &mut self.flows {
            flows.absorbed(key);
        }
        if let Some(out) = &mut self.out {
            if let Some(k) = key {
                let newest = out.absorbed.entry(k).or_insert(frame.index);
                *newest = (*newest).max(frame.index);
            }
            out.reorder.mark(frame.index);
            out.drain(self.now, false);
        }
    }
}

impl Output for ReplaySink {
    fn bypass(&mut self, frame: Frame) {
        self.delivered += 1;
        if let Some(flows) = &mut self.flows {
            flows.bypassed(self.now);
        }
        if let Some(out) = &mut self.out {
            out.reorder.mark(frame.index);
            let mut bytes = out.reorder.buffer();
            bytes.extend_from_slice(&frame.buf);
            out.deliver(self.now, frame.index, bytes, frame.cut);
        }
    }

    fn now(&mut self, ts_ns: u64) {
        self.now = ts_ns;
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
    /// The output pcap went to standard output.
    pub(crate) to_stdout: bool,
    /// The input file's identity (not to be overwritten by other outputs).
    pub(crate) input_id: Option<crate::output::FileId>,
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

/// What a replay writes and shows besides its counters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Outputs<'a> {
    /// The output pcap and its order.
    pub(crate) pcap: Option<(&'a Path, Order)>,
    /// Count per flow (explain).
    pub(crate) per_flow: bool,
    /// Also record every delivery per flow, for a picture (explain --plot).
    pub(crate) points: bool,
    /// A progress bar on a terminal (not with --json).
    pub(crate) progress: bool,
}

/// Loads the input and replays it through the engine; used by `replay` and `explain`.
pub(crate) fn run(
    input: Option<&Path>,
    engine_args: &EngineArgs,
    hold: &HoldArgs,
    outputs: Outputs<'_>,
) -> Result<Replayed> {
    engine_args.validate()?;
    if engine_args.rss_sort && hold.hold {
        anyhow::bail!(crate::UsageError(
            "--rss-sort cannot be combined with --hold: the RSS sort queue is one burst, fed and flushed whole".to_string()
        ));
    }
    if engine_args.bypass && hold.hold {
        anyhow::bail!(crate::UsageError(
            "--bypass cannot be combined with --hold: --bypass judges whole bursts, and --hold's idle flush before every frame makes each frame a burst of its own".to_string()
        ));
    }
    let t0 = Instant::now();
    let cap = Capture::load(input)?;
    let load_time = t0.elapsed();

    let mut to_stdout = false;
    let out = match outputs.pcap {
        Some((p, order)) => {
            let file = OutFile::open(p, cap.id, &cap.name, "a binary pcap")?;
            let name = file.name().to_string();
            to_stdout = file.is_stdout();
            let header = PcapHeader {
                // Frames passed through are written whole, however long.
                snaplen: OUT_SNAPLEN.max(u32::try_from(cap.max_len).unwrap_or(u32::MAX)),
                datalink: DataLink::from(cap.link_number),
                ts_resolution: TsResolution::NanoSecond,
                endianness: Endianness::native(),
                ..PcapHeader::default()
            };
            let writer =
                PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header)
                    .map_err(|e| OutputError(format!("{name}: cannot write: {}", describe(&e))))?;
            Some(PcapOut {
                writer,
                name,
                order,
                reorder: Reorder::default(),
                absorbed: HashMap::new(),
                error: None,
            })
        }
        None => None,
    };
    let output_name = out.as_ref().map(|o| o.name.clone());
    let table = match (outputs.per_flow, outputs.points) {
        (_, true) => Some(FlowTable::with_points()),
        (true, false) => Some(FlowTable::default()),
        (false, false) => None,
    };
    let mut sink = ReplaySink::new(out, table);

    let mut config = engine_args.config();
    if hold.hold {
        config.idle_timeout = Some(hold.timeout_us.saturating_mul(1000));
    }
    let schedule = Schedule {
        burst: usize::try_from(engine_args.burst).unwrap_or(usize::MAX),
        hold: hold.hold,
    };
    let bar = crate::progress::bar(cap.records.len() as u64, outputs.progress);
    let t1 = Instant::now();
    let job = Job {
        cap: &cap,
        args: engine_args,
        schedule,
        sink: &mut sink,
        bar: &bar,
    };
    let stats = with_engine(engine_args, config, crate::tunnel::carried(&cap), job)?;
    bar.finish_and_clear();
    let delivered = sink.delivered;
    debug_assert_eq!(delivered, report::frames_out(&stats));
    anyhow::ensure!(
        delivered == report::frames_out(&stats) && stats.is_conserved(),
        "internal error: the engine's counters ({} delivered, conserved: {}) disagree with the {delivered} frames the sink received",
        report::frames_out(&stats),
        stats.is_conserved()
    );
    // Only a consistent run replaces the output file.
    let flows = sink.finish()?;
    let run_time = t1.elapsed();

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
        bypass: engine_args.bypass,
        load_time,
        run_time,
        output: output_name,
        order: outputs.pcap.map(|(_, o)| o.name()),
    };
    Ok(Replayed {
        stats,
        flows,
        info,
        to_stdout,
        input_id: cap.id,
    })
}

/// `lro replay`.
pub(crate) fn command(args: &ReplayArgs) -> Result<()> {
    let r = run(
        args.input.as_deref(),
        &args.engine,
        &args.hold,
        Outputs {
            pcap: args.output.as_deref().map(|p| (p, args.order)),
            per_flow: false,
            points: false,
            progress: !args.json,
        },
    )?;
    let text = if args.json {
        format!("{}\n", report::json(&r.info, &r.stats))
    } else {
        report::text(&r.info, &r.stats)
    };
    // With the pcap on standard output, the summary goes to standard error.
    if r.to_stdout {
        crate::print_err(&text)
    } else {
        crate::print_out(&text)
    }
}
