//! `lro explain`: per-flow aggregation and the reasons it stopped, worst flows first.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Result;
use lro_core::FlowKey;
use lro_core::{FlushReason, PassReason, SegmentInfo};
use serde_json::json;

use crate::engine::EngineArgs;
use crate::replay::HoldArgs;
use crate::report;

/// `lro explain` arguments.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ExplainArgs {
    /// Capture to analyse: pcap or pcapng, optionally .xz-compressed [default: the built-in
    /// capture].
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
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Why segments of a flow were delivered: pass-through reasons then flush reasons.
const CAUSES: usize = PassReason::COUNT + FlushReason::COUNT;

fn cause_name(i: usize) -> String {
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
    /// Pure ACKs absorbed and released.
    pub(crate) released: u64,
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
            released: 0,
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

/// Per-flow counters, filled by the replay sink.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    rows: HashMap<FlowKey, FlowRow>,
    /// Frames that are not TCP over IP (or whose headers could not be read).
    other: FlowRow,
}

impl FlowTable {
    fn row(&mut self, key: Option<FlowKey>) -> &mut FlowRow {
        match key {
            Some(k) => self.rows.entry(k).or_default(),
            None => &mut self.other,
        }
    }

    /// A delivered segment or single frame.
    pub(crate) fn segment(&mut self, info: &SegmentInfo) {
        let row = self.row(info.flow);
        row.frames_in += u64::from(info.frames);
        row.segments += 1;
        if info.frames > 1 {
            row.coalesced += 1;
        }
        if info.payload_len > 0 {
            row.data_segments += 1;
            row.payload_bytes += u64::from(info.payload_len);
        }
        let cause = match info.cause {
            lro_core::Cause::Passed(r) => r.index(),
            lro_core::Cause::Flushed(r) => PassReason::COUNT + r.index(),
        };
        row.causes[cause] += 1;
    }

    /// A pure ACK absorbed into a newer one of `key`'s flow.
    pub(crate) fn released(&mut self, key: Option<FlowKey>) {
        let row = self.row(key);
        row.frames_in += 1;
        row.released += 1;
    }

    /// A frame that bypassed the engine (not IP).
    pub(crate) fn bypassed(&mut self) {
        self.other.frames_in += 1;
        self.other.segments += 1;
        self.other.causes[PassReason::NotIp.index()] += 1;
    }

    /// Flows worst first: lowest aggregation ratio, then most frames; flows with fewer than
    /// `min_frames` frames after the others; the non-TCP row last.
    pub(crate) fn sorted(&self, min_frames: u64) -> Vec<(Option<&FlowKey>, &FlowRow)> {
        let mut v: Vec<(Option<&FlowKey>, &FlowRow)> =
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

/// `src:port > dst:port` (with VLAN tags when present).
pub(crate) fn flow_name(key: Option<&FlowKey>) -> String {
    let Some(k) = key else {
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
    s
}

/// `lro explain`.
pub(crate) fn command(args: &ExplainArgs) -> Result<()> {
    let r = crate::replay::run(args.input.as_deref(), None, &args.engine, &args.hold, true)?;
    let table = r.flows.unwrap_or_default();
    let rows = table.sorted(args.min_frames);
    let shown = if args.top == 0 {
        rows.len()
    } else {
        args.top.min(rows.len())
    };
    let mut stdout = std::io::stdout().lock();
    if args.json {
        let flows: Vec<_> = rows
            .iter()
            .take(shown)
            .map(|(k, row)| {
                json!({
                    "flow": flow_name(*k),
                    "frames_in": row.frames_in,
                    "frames_out": row.segments,
                    "coalesced": row.coalesced,
                    "ratio": row.ratio(),
                    "payload_bytes": row.payload_bytes,
                    "mean_segment": row.mean_segment(),
                    "acks_merged": row.released,
                    "causes": row.top_causes(CAUSES).into_iter().map(|(k, n)| (k, json!(n))).collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        let mut summary = report::json(&r.info, &r.stats);
        summary["flow_count"] = json!(rows.len());
        summary["flows_shown"] = json!(flows);
        writeln!(stdout, "{summary}")?;
        return Ok(());
    }
    let s = &r.stats;
    let out = report::frames_out(s);
    writeln!(
        stdout,
        "{}: {} frames in, {} out, ratio {:.2} (policy {}, burst {}{}); {} flows, worst first",
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
        rows.len()
    )?;
    let name_w = rows
        .iter()
        .take(shown)
        .map(|(k, _)| flow_name(*k).len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        stdout,
        "{:<name_w$}  {:>8}  {:>8}  {:>6}  {:>9}  {:>7}  why segments ended (most frequent first)",
        "flow", "frames", "out", "ratio", "mean seg", "acks"
    )?;
    for (k, row) in rows.iter().take(shown) {
        let mean = row
            .mean_segment()
            .map_or("-".to_string(), |m| format!("{m:.0}"));
        let why = row
            .top_causes(3)
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect::<Vec<_>>()
            .join(", ");
        writeln!(
            stdout,
            "{:<name_w$}  {:>8}  {:>8}  {:>6.2}  {:>9}  {:>7}  {}",
            flow_name(*k),
            row.frames_in,
            row.segments,
            row.ratio(),
            mean,
            row.released,
            why
        )?;
    }
    if shown < rows.len() {
        writeln!(
            stdout,
            "... {} more flows (--top 0 shows all)",
            rows.len() - shown
        )?;
    }
    writeln!(
        stdout,
        "reasons: alone:X = delivered without being held (X: why it could not be merged); other names = why a held segment was completed (flush_all: end of burst)"
    )?;
    Ok(())
}
