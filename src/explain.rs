//! `lro explain`: per-flow aggregation and the reasons it stopped, worst flows first.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Result;
use lro_core::{FlushReason, PassReason, SegmentInfo};
use serde_json::json;

use crate::engine::EngineArgs;
use crate::replay::HoldArgs;
use crate::report;
use crate::tunnel::{self, FlowId};

/// `lro explain` arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExplainArgs {
    /// Capture to analyse: pcap or pcapng, optionally .xz-compressed; `-` reads standard input
    /// [default: the built-in capture].
    pub(crate) input: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) engine: EngineArgs,
    #[command(flatten)]
    pub(crate) hold: HoldArgs,
    /// Flows with fewer frames than this are listed after the others (short connections, such
    /// as a benchmark's control connection, aggregate poorly and rarely matter).
    #[arg(long, default_value_t = 20)]
    pub(crate) min_frames: u64,
    /// Show at most this many flows (0: all).
    #[arg(long, default_value_t = 20)]
    pub(crate) top: usize,
    /// Also draw the shown flows (at most 16) as an SVG picture: per flow, every delivered
    /// segment at the time it was delivered, its height the input frames it stands for, its
    /// marker why it ended. `-` writes it to standard output (the table then goes to standard
    /// error).
    #[arg(long, value_name = "SVG")]
    pub(crate) plot: Option<PathBuf>,
    /// Print one JSON object instead of the table (and no progress bar).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Why segments of a flow were delivered: pass-through reasons then flush reasons.
pub(crate) const CAUSES: usize = PassReason::COUNT + FlushReason::COUNT;

/// The index of a delivery cause in [`FlowRow::causes`].
pub(crate) fn cause_index(cause: lro_core::Cause) -> usize {
    match cause {
        lro_core::Cause::Passed(r) => r.index(),
        lro_core::Cause::Flushed(r) => PassReason::COUNT + r.index(),
    }
}

/// A delivery cause's name: `alone:X` for a pass-through reason, the flush reason's name.
pub(crate) fn cause_name(i: usize) -> String {
    if i < PassReason::COUNT {
        format!("alone:{}", PassReason::ALL[i].name())
    } else {
        FlushReason::ALL[i - PassReason::COUNT].name().to_string()
    }
}

/// Counters of one flow (one direction of a TCP connection).
#[derive(Debug, Clone)]
pub(crate) struct FlowRow {
    /// Frames of the flow offered to the engine.
    pub(crate) frames_in: u64,
    /// Frames delivered up (segments and single frames).
    pub(crate) segments: u64,
    /// Segments holding more than one frame.
    pub(crate) coalesced: u64,
    /// Delivered segments carrying payload, and their payload bytes.
    pub(crate) data_segments: u64,
    /// TCP payload bytes delivered.
    pub(crate) payload_bytes: u64,
    /// Pure ACKs absorbed into a newer ACK of the flow (not delivered).
    pub(crate) absorbed: u64,
    /// Delivery causes: [`PassReason`] counters then [`FlushReason`] counters.
    pub(crate) causes: [u64; CAUSES],
}

impl Default for FlowRow {
    fn default() -> Self {
        FlowRow {
            frames_in: 0,
            segments: 0,
            coalesced: 0,
            data_segments: 0,
            payload_bytes: 0,
            absorbed: 0,
            causes: [0; CAUSES],
        }
    }
}

impl FlowRow {
    fn ratio(&self) -> f64 {
        report::ratio(self.frames_in, self.segments)
    }

    /// Mean TCP payload per delivered data segment.
    fn mean_segment(&self) -> Option<f64> {
        (self.data_segments > 0).then(|| self.payload_bytes as f64 / self.data_segments as f64)
    }

    /// The most frequent causes, largest first.
    fn top_causes(&self, n: usize) -> Vec<(String, u64)> {
        let mut v: Vec<(usize, u64)> = self
            .causes
            .iter()
            .copied()
            .enumerate()
            .filter(|c| c.1 > 0)
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter()
            .take(n)
            .map(|(i, c)| (cause_name(i), c))
            .collect()
    }
}

/// One delivered segment or single frame, for the picture.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Point {
    /// Capture time at which it was delivered, in nanoseconds.
    pub(crate) t_ns: u64,
    /// Its flow (`None`: not TCP/IP).
    pub(crate) flow: Option<FlowId>,
    /// Input frames it stands for: its frames and the pure ACKs it absorbed.
    pub(crate) frames: u32,
    /// Why it was delivered ([`cause_index`]).
    pub(crate) cause: usize,
}

/// Per-flow counters, filled by the replay sink.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    rows: HashMap<FlowId, FlowRow>,
    /// Frames that are not TCP over IP (or whose headers could not be read).
    other: FlowRow,
    /// Every delivery, when drawing.
    pub(crate) points: Option<Vec<Point>>,
    /// Per flow, pure ACKs absorbed since its last delivery (drawing only).
    absorbed: HashMap<Option<FlowId>, u32>,
}

impl FlowTable {
    fn row(&mut self, key: Option<FlowId>) -> &mut FlowRow {
        match key {
            Some(k) => self.rows.entry(k).or_default(),
            None => &mut self.other,
        }
    }

    /// A table that also records every delivery for the picture.
    pub(crate) fn with_points() -> Self {
        FlowTable {
            points: Some(Vec::new()),
            ..FlowTable::default()
        }
    }

    /// A delivered segment or single frame, at capture time `now`. `parsed`: the flow and TCP
    /// payload length of a frame the engine passed through unparsed (`--bypass`), which the
    /// caller parsed for the table.
    pub(crate) fn segment(&mut self, info: &SegmentInfo, parsed: Option<(FlowId, u32)>, now: u64) {
        let (flow, payload_len) = match parsed {
            Some((id, len)) => (Some(id), len),
            None => (FlowId::of(info), info.payload_len),
        };
        if let Some(points) = &mut self.points {
            let absorbed = self.absorbed.remove(&flow).unwrap_or(0);
            points.push(Point {
                t_ns: now,
                flow,
                frames: u32::from(info.frames) + absorbed,
                cause: cause_index(info.cause),
            });
        }
        let row = self.row(flow);
        row.frames_in += u64::from(info.frames);
        row.segments += 1;
        if info.frames > 1 {
            row.coalesced += 1;
        }
        if payload_len > 0 {
            row.data_segments += 1;
            row.payload_bytes += u64::from(payload_len);
        }
        row.causes[cause_index(info.cause)] += 1;
    }

    /// A pure ACK absorbed into a newer one of `key`'s flow.
    pub(crate) fn absorbed(&mut self, key: Option<FlowId>) {
        if self.points.is_some() {
            *self.absorbed.entry(key).or_default() += 1;
        }
        let row = self.row(key);
        row.frames_in += 1;
        row.absorbed += 1;
    }

    /// A frame that bypassed the engine (not IP), at capture time `now`.
    pub(crate) fn bypassed(&mut self, now: u64) {
        if let Some(points) = &mut self.points {
            points.push(Point {
                t_ns: now,
                flow: None,
                frames: 1,
                cause: PassReason::NotIp.index(),
            });
        }
        self.other.frames_in += 1;
        self.other.segments += 1;
        self.other.causes[PassReason::NotIp.index()] += 1;
    }

    /// Flows worst first: lowest aggregation ratio, then most frames; flows with fewer than
    /// `min_frames` frames after the others (worst first among themselves); the non-TCP row
    /// last.
    pub(crate) fn sorted(&self, min_frames: u64) -> Vec<(Option<&FlowId>, &FlowRow)> {
        let mut v: Vec<(Option<&FlowId>, &FlowRow)> =
            self.rows.iter().map(|(k, r)| (Some(k), r)).collect();
        v.sort_by(|a, b| {
            (a.1.frames_in < min_frames)
                .cmp(&(b.1.frames_in < min_frames))
                .then(a.1.ratio().total_cmp(&b.1.ratio()))
                .then(b.1.frames_in.cmp(&a.1.frames_in))
                .then_with(|| flow_name(a.0).cmp(&flow_name(b.0)))
        });
        if self.other.frames_in > 0 {
            v.push((None, &self.other));
        }
        v
    }
}

/// `src:port > dst:port` (with VLAN tags when present), and for a tunnelled flow its tunnel:
/// `in gre key 42 198.18.0.1 > 198.18.0.2`.
pub(crate) fn flow_name(key: Option<&FlowId>) -> String {
    let Some(FlowId { key: k, tunnel: t }) = key else {
        return "(not TCP/IP)".to_string();
    };
    let end = |a: IpAddr, port: u16| match a {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    };
    let mut s = format!(
        "{} > {}",
        end(k.src_addr(), k.src_port()),
        end(k.dst_addr(), k.dst_port())
    );
    for tag in k.vlans().iter().flatten() {
        let _ = write!(s, " vlan {}", tag & 0x0fff);
    }
    if let Some(t) = t {
        let _ = write!(s, " in {}", tunnel::name(t));
    }
    s
}

/// `lro explain`.
pub(crate) fn command(args: &ExplainArgs) -> Result<()> {
    let mut r = crate::replay::run(
        args.input.as_deref(),
        &args.engine,
        &args.hold,
        crate::replay::Outputs {
            pcap: None,
            per_flow: true,
            points: args.plot.is_some(),
            progress: !args.json,
        },
    )?;
    let table = r.flows.take().unwrap_or_default();
    let rows = table.sorted(args.min_frames);
    // Flows: the rows but the "(not TCP/IP)" one.
    let flow_count = rows.iter().filter(|(k, _)| k.is_some()).count();
    let shown = if args.top == 0 {
        rows.len()
    } else {
        args.top.min(rows.len())
    };
    let small = |row: &FlowRow| row.frames_in < args.min_frames;
    let mut to_stdout = false;
    let mut plot_note = String::new();
    if let Some(path) = &args.plot {
        let flows: Vec<(Option<FlowId>, String)> = rows
            .iter()
            .take(shown)
            .map(|(k, row)| {
                (
                    k.copied(),
                    format!(
                        "{}: {} frames in, {} out, ratio {:.2}",
                        flow_name(*k),
                        row.frames_in,
                        row.segments,
                        row.ratio()
                    ),
                )
            })
            .collect();
        let drawn = crate::plot::write(
            path,
            &crate::plot::Picture {
                title: &r.info.input,
                flows: &flows,
                points: table.points.as_deref().unwrap_or(&[]),
                input: r.input_id,
            },
        )?;
        to_stdout = drawn.to_stdout;
        plot_note = format!(
            "plot: {} ({} of {} flows drawn{})\n",
            drawn.name,
            drawn.flows,
            rows.len(),
            if drawn.flows < shown {
                format!(", at most {}", crate::plot::MAX_FLOWS)
            } else if shown < rows.len() {
                ": the flows shown (--top)".to_string()
            } else {
                String::new()
            }
        );
    }
    let mut t = String::new();
    if args.json {
        let flows: Vec<_> = rows
            .iter()
            .take(shown)
            .map(|(k, row)| {
                json!({
                    "flow": flow_name(*k),
                    "tunnel": k.and_then(|k| k.tunnel).map(|t| json!({
                        "encap": tunnel::encap_name(&t),
                        "outer_src": t.outer_src_addr().to_string(),
                        "outer_dst": t.outer_dst_addr().to_string(),
                        "key": tunnel::key(&t),
                    })),
                    "frames_in": row.frames_in,
                    "frames_out": row.segments,
                    "coalesced": row.coalesced,
                    "ratio": row.ratio(),
                    "payload_bytes": row.payload_bytes,
                    "mean_segment": row.mean_segment(),
                    "acks_merged": row.absorbed,
                    "small": k.is_some() && small(row),
                    "causes": row.top_causes(CAUSES).into_iter().map(|(k, n)| (k, json!(n))).collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        let mut summary = report::json(&r.info, &r.stats);
        summary["flow_count"] = json!(flow_count);
        summary["min_frames"] = json!(args.min_frames);
        summary["flows_shown"] = json!(flows);
        summary["plot"] = json!(args.plot.as_ref().map(|p| p.display().to_string()));
        let _ = writeln!(t, "{summary}");
    } else {
        write_table(&mut t, args, &r, &rows, flow_count, shown);
        t.push_str(&plot_note);
    }
    if to_stdout {
        crate::print_err(&t)
    } else {
        crate::print_out(&t)
    }
}

/// The readable table.
fn write_table(
    t: &mut String,
    args: &ExplainArgs,
    r: &crate::replay::Replayed,
    rows: &[(Option<&FlowId>, &FlowRow)],
    flow_count: usize,
    shown: usize,
) {
    let s = &r.stats;
    let out = report::frames_out(s);
    let small = |row: &FlowRow| row.frames_in < args.min_frames;
    let _ = writeln!(
        t,
        "{}: {} frames in, {} out, ratio {:.2} (policy {}, burst {}{}); {} flows, worst aggregation first",
        r.info.input,
        s.frames_in,
        out,
        report::ratio(s.frames_in, out),
        r.info.policy,
        r.info.burst,
        match r.info.hold_timeout_us {
            Some(us) => format!(", held, idle timeout {us} us"),
            None => String::new(),
        },
        flow_count
    );
    if let Some(line) = tunnel::summary(&s.tunnel) {
        let _ = writeln!(t, "tunnelled ({}): {line}", tunnel::NAME);
    }
    let name_w = rows
        .iter()
        .take(shown)
        .map(|(k, _)| flow_name(*k).len())
        .max()
        .unwrap_or(4)
        .max(4);
    let _ = writeln!(
        t,
        "{:<name_w$}  {:>8}  {:>8}  {:>6}  {:>9}  {:>7}  why segments ended (most frequent first)",
        "flow", "frames", "out", "ratio", "mean seg", "acks"
    );
    let mut in_small = false;
    for (k, row) in rows.iter().take(shown) {
        if k.is_some() && small(row) && !in_small {
            in_small = true;
            let _ = writeln!(
                t,
                "-- flows of fewer than {} frames (--min-frames), worst first: short connections aggregate little and rarely matter",
                args.min_frames
            );
        }
        if k.is_none() {
            let _ = writeln!(t, "-- frames of no TCP flow");
        }
        let mean = row
            .mean_segment()
            .map_or("-".to_string(), |m| format!("{m:.0}"));
        let why = row
            .top_causes(3)
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            t,
            "{:<name_w$}  {:>8}  {:>8}  {:>6.2}  {:>9}  {:>7}  {}",
            flow_name(*k),
            row.frames_in,
            row.segments,
            row.ratio(),
            mean,
            row.absorbed,
            why
        );
    }
    if shown < rows.len() {
        let _ = writeln!(
            t,
            "... {} more rows (--top 0 shows all)",
            rows.len() - shown
        );
    }
    let _ = writeln!(
        t,
        "columns: frames offered, frames delivered up (out), their ratio, mean TCP payload per data segment in bytes, pure ACKs absorbed into a newer ACK (acks)"
    );
    let _ = writeln!(
        t,
        "reasons: alone:X = delivered as it came, never held (X: why it could not be merged); other names = why a held segment was completed:"
    );
    t.push_str(&report::legend(s, "  ", report::Names::Explain));
}
