//! The `replay` summary: readable text or one JSON object.

use std::fmt::Write as _;
use std::time::Duration;

use lro_core::{FlushReason, PassReason, Stats};
use serde_json::{json, Map, Value};

/// What was run, for the report's header.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    /// Input name.
    pub(crate) input: String,
    /// Its link type.
    pub(crate) link: &'static str,
    /// Engine policy name.
    pub(crate) policy: &'static str,
    /// Frames per burst.
    pub(crate) burst: u64,
    /// Flow-table capacity.
    pub(crate) flows: usize,
    /// `verify` or `trust`.
    pub(crate) csum: &'static str,
    /// `full` or `partial`.
    pub(crate) out_csum: &'static str,
    /// Idle timeout in microseconds when flows are held across bursts.
    pub(crate) hold_timeout_us: Option<u64>,
    /// Bursts sorted by RSS hash before coalescing.
    pub(crate) rss_sort: bool,
    /// Time spent reading and decompressing the input.
    pub(crate) load_time: Duration,
    /// Time spent coalescing (and writing the output, when asked).
    pub(crate) run_time: Duration,
    /// Output file, if any.
    pub(crate) output: Option<String>,
}

/// Frames delivered up: every segment counts once, a frame passed alone counts once.
pub(crate) fn frames_out(s: &Stats) -> u64 {
    s.segments
}

/// Input frames per delivered frame.
pub(crate) fn ratio(frames_in: u64, frames_out: u64) -> f64 {
    if frames_out == 0 {
        0.0
    } else {
        frames_in as f64 / frames_out as f64
    }
}

/// `name: count` pairs of the non-zero counters, largest first.
pub(crate) fn nonzero<'a>(
    names: impl Iterator<Item = &'a str>,
    counts: &[u64],
) -> Vec<(&'a str, u64)> {
    let mut v: Vec<(&str, u64)> = names
        .zip(counts.iter().copied())
        .filter(|&(_, n)| n > 0)
        .collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    v
}

fn list(pairs: &[(&str, u64)]) -> String {
    if pairs.is_empty() {
        return "none".to_string();
    }
    pairs
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The readable summary.
pub(crate) fn text(info: &RunInfo, s: &Stats) -> String {
    let out = frames_out(s);
    let mut t = String::new();
    let hold = match info.hold_timeout_us {
        Some(us) => format!("held across bursts, idle timeout {us} us"),
        None => "flushed at the end of each burst".to_string(),
    };
    let _ = writeln!(t, "input        {} ({})", info.input, info.link);
    let _ = writeln!(
        t,
        "engine       policy {}, burst {}{}, {} flows, checksums {} (out {}), {}",
        info.policy,
        info.burst,
        if info.rss_sort {
            " sorted by RSS hash"
        } else {
            ""
        },
        info.flows,
        info.csum,
        info.out_csum,
        hold
    );
    let _ = writeln!(
        t,
        "frames       {} in, {} out: aggregation ratio {:.2}",
        s.frames_in,
        out,
        ratio(s.frames_in, out)
    );
    let _ = writeln!(
        t,
        "data frames  {} in, {} out: {:.2} data frames per data segment (Linux GRO's figure)",
        s.data_in,
        s.data_out,
        ratio(s.data_in, s.data_out)
    );
    let _ = writeln!(
        t,
        "segments     {} coalesced (holding {} frames, mean {:.1} frames each), {} single frames",
        s.coalesced,
        s.coalesced + s.frames_merged,
        ratio(s.coalesced + s.frames_merged, s.coalesced),
        out - s.coalesced
    );
    let _ = writeln!(
        t,
        "ACKs merged  {} (superseded pure ACKs released: {})",
        s.acks_merged, s.released
    );
    if s.trimmed > 0 || s.evictions > 0 {
        let _ = writeln!(
            t,
            "other        {} padding trims, {} evictions",
            s.trimmed, s.evictions
        );
    }
    if s.predicted > 0 {
        let _ = writeln!(
            t,
            "predicted    {} frames appended by header prediction",
            s.predicted
        );
    }
    let passed = nonzero(PassReason::ALL.iter().map(|r| r.name()), &s.passed);
    let flushes = nonzero(FlushReason::ALL.iter().map(|r| r.name()), &s.flushes);
    let _ = writeln!(t, "passed alone {}", list(&passed));
    let _ = writeln!(t, "flushed by   {}", list(&flushes));
    let ns = info.run_time.as_nanos() as f64;
    let _ = writeln!(
        t,
        "time         {:.1} ms replay ({:.0} ns per input frame, output writing included), {:.1} ms reading input",
        ns / 1e6,
        if s.frames_in > 0 { ns / s.frames_in as f64 } else { 0.0 },
        info.load_time.as_secs_f64() * 1e3
    );
    if let Some(o) = &info.output {
        let _ = writeln!(t, "output       {o} ({out} frames)");
    }
    t
}

fn counters(names: impl Iterator<Item = &'static str>, counts: &[u64]) -> Value {
    let mut m = Map::new();
    for (k, n) in names.zip(counts) {
        m.insert(k.to_string(), json!(n));
    }
    Value::Object(m)
}

/// The JSON object.
pub(crate) fn json(info: &RunInfo, s: &Stats) -> Value {
    let out = frames_out(s);
    json!({
        "input": info.input,
        "link": info.link,
        "policy": info.policy,
        "burst": info.burst,
        "flows": info.flows,
        "csum": info.csum,
        "out_csum": info.out_csum,
        "hold": info.hold_timeout_us.is_some(),
        "rss_sort": info.rss_sort,
        "timeout_us": info.hold_timeout_us,
        "frames_in": s.frames_in,
        "frames_out": out,
        "segments": s.segments,
        "coalesced": s.coalesced,
        "frames_merged": s.frames_merged,
        "data_frames_in": s.data_in,
        "data_frames_out": s.data_out,
        "data_ratio": ratio(s.data_in, s.data_out),
        "acks_merged": s.acks_merged,
        "released": s.released,
        "trimmed": s.trimmed,
        "evictions": s.evictions,
        "predicted": s.predicted,
        "ratio": ratio(s.frames_in, out),
        "passed": counters(PassReason::ALL.iter().map(|r| r.name()), &s.passed),
        "flushes": counters(FlushReason::ALL.iter().map(|r| r.name()), &s.flushes),
        "load_ms": info.load_time.as_secs_f64() * 1e3,
        "run_ms": info.run_time.as_secs_f64() * 1e3,
        "output": info.output,
    })
}
