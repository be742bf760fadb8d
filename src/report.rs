//! The `replay` summary: readable text or one JSON object.

use std::fmt::Write as _;
use std::time::Duration;

use lro_core::stats::Group;
use lro_core::{FlushReason, PassReason, Stats};
use serde_json::{json, Value};

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
    /// Adaptive bypass on (`--bypass`).
    pub(crate) bypass: bool,
    /// Time spent reading and decompressing the input.
    pub(crate) load_time: Duration,
    /// Time spent coalescing (and writing the output, when asked).
    pub(crate) run_time: Duration,
    /// Output file, if any.
    pub(crate) output: Option<String>,
    /// Its frame order (`--order`).
    pub(crate) order: Option<&'static str>,
}

/// What a pass-through reason means, in a few words.
pub(crate) fn pass_meaning(r: PassReason) -> &'static str {
    match r {
        PassReason::NotIp => "not IPv4 or IPv6 (ARP, LLDP, ...)",
        PassReason::NotTcp => "IP but not TCP",
        PassReason::Malformed => "truncated or inconsistent headers",
        PassReason::IpOptions => "IPv4 header with options",
        PassReason::Fragment => "an IP fragment",
        PassReason::Routed => "IPv6 Routing header with segments left, or Home Address option",
        PassReason::BadIpChecksum => "wrong IPv4 header checksum",
        PassReason::BadTcpChecksum => "wrong TCP checksum",
        PassReason::BadEncapChecksum => "wrong checksum in the tunnel header (GRE)",
        PassReason::Encap => {
            "a tunnel header that is never merged (GRE sequence or routing flag, another version)"
        }
        PassReason::Unverified => "checksum not verified: never merged",
        PassReason::Padding => "padding after the IP datagram that cannot be trimmed",
        PassReason::Control => "SYN, RST or URG: never merged",
        PassReason::PushFin => {
            "PSH or FIN on a frame that starts no segment: delivered at once, as Linux does"
        }
        PassReason::PureAck => "a pure ACK under --policy gro: never merged",
        PassReason::DupAck => "a duplicate ACK: never merged, it tells the sender of a loss",
        PassReason::Options => "TCP options other than timestamps (SACK among them)",
        PassReason::UnknownAck => {
            "a pure ACK of a flow whose ACK state is not known yet (it could be a duplicate)"
        }
        PassReason::Bypassed => {
            "passed through unparsed: the burst before merged (almost) nothing (--bypass)"
        }
    }
}

/// What a flush reason means, in a few words.
pub(crate) fn flush_meaning(r: FlushReason) -> &'static str {
    match r {
        FlushReason::FlushAll => "the end of a burst (a driver poll) flushed everything held",
        FlushReason::Idle => "idle longer than --timeout-us",
        FlushReason::MaxHold => "held longer than the maximum hold time",
        FlushReason::Evicted => "the flow table was full and this flow was the least recently used",
        FlushReason::SizeLimit => "the next frame would have passed 64 KB",
        FlushReason::FrameLimit => "as many frames as a segment may hold",
        FlushReason::PushFin => "PSH or FIN merged: the segment is complete",
        FlushReason::ShortSegment => "a frame shorter than the MSS merged: the segment is complete",
        FlushReason::SeqGap => "the next frame did not start where the segment ended",
        FlushReason::Ack => "the ACK number changed (gro) or went backwards (lro)",
        FlushReason::Flags => "the TCP flags differ",
        FlushReason::Window => "the TCP window differs (gro)",
        FlushReason::Options => "the TCP options differ, or a timestamp went backwards",
        FlushReason::IpFields => "TTL, TOS/ECN or DF differ",
        FlushReason::IpId => "the IPv4 ID is neither incrementing nor fixed (gro)",
        FlushReason::Mss => "a frame longer than the flow's MSS (gro)",
        FlushReason::Encap => "the tunnel headers may not be merged",
        FlushReason::Unmergeable => {
            "a frame of the flow that cannot be merged arrived; the segment goes before it"
        }
        FlushReason::Unknown => "a TCP frame with unreadable ports arrived for the same addresses",
        FlushReason::Bypass => "coalescing paused (--bypass): what was held goes first",
    }
}

/// How a legend names the reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Names {
    /// `push_fin  alone: ...` and `push_fin  flush: ...`, as `replay` lists them.
    Replay,
    /// `alone:push_fin  ...` and `push_fin  ...`, as `explain` lists them.
    Explain,
}

/// The legend lines for the reasons with non-zero counters, one per reason.
pub(crate) fn legend(s: &Stats, indent: &str, names: Names) -> String {
    let mut t = String::new();
    let rows: Vec<(String, &str)> = PassReason::ALL
        .iter()
        .filter(|r| s.passed[r.index()] > 0)
        .map(|&r| match names {
            Names::Replay => (r.name().to_string(), pass_meaning(r)),
            Names::Explain => (format!("alone:{}", r.name()), pass_meaning(r)),
        })
        .chain(
            FlushReason::ALL
                .iter()
                .filter(|r| s.flushes[r.index()] > 0)
                .map(|&r| (r.name().to_string(), flush_meaning(r))),
        )
        .collect();
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let passes = PassReason::ALL
        .iter()
        .filter(|r| s.passed[r.index()] > 0)
        .count();
    for (i, (name, meaning)) in rows.into_iter().enumerate() {
        let kind = match (names, i < passes) {
            (Names::Explain, _) => "",
            (Names::Replay, true) => "alone: ",
            (Names::Replay, false) => "flush: ",
        };
        let _ = writeln!(t, "{indent}{name:<w$}  {kind}{meaning}");
    }
    t
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
        "engine       policy {}, burst {}{}, {} flows, checksums {} (out {}), {}{}",
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
        hold,
        if info.bypass { ", adaptive bypass" } else { "" }
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
        "data frames  {} in, {} out: {:.2} data frames per data segment (frames with TCP payload only, as Linux counts GRO){}",
        s.data_in,
        s.data_out,
        ratio(s.data_in, s.data_out),
        if s.bypassed_bursts > 0 {
            "; of the frames coalesced, not those bypassed"
        } else {
            ""
        }
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
        "ACKs merged  {} pure ACKs absorbed: superseded by a newer ACK of their flow, so not delivered",
        s.acks_merged
    );
    if let Some(line) = crate::tunnel::summary(&s.tunnel) {
        let _ = writeln!(t, "tunnelled    {}: {line}", crate::tunnel::NAME);
    }
    if s.absorbed != s.acks_merged {
        let _ = writeln!(t, "absorbed     {} frames in all", s.absorbed);
    }
    if s.trimmed > 0 || s.evictions > 0 {
        let _ = writeln!(
            t,
            "other        {} padding trims, {} evictions",
            s.trimmed, s.evictions
        );
    }
    if s.forgotten > 0 {
        let _ = writeln!(
            t,
            "forgotten    {} flows lost their table entry to make room: fewer entries ({}) than active flows (`--flows` sets them)",
            s.forgotten, info.flows
        );
    }
    if s.predicted > 0 {
        let _ = writeln!(
            t,
            "predicted    {} frames read by header prediction (without the parser and the flow lookup)",
            s.predicted
        );
    }
    if s.prediction_paused > 0 {
        let n = s.prediction_paused;
        let _ = writeln!(
            t,
            "paused       header prediction for {n} {} (after bursts in which it took fewer than one frame in eight)",
            if n == 1 { "burst" } else { "bursts" }
        );
    }
    if s.bypassed_bursts > 0 {
        let n = s.bypassed_bursts;
        let _ = writeln!(
            t,
            "bypassed     {} frames in {n} {} passed through without coalescing (after bursts in which fewer than one frame in 32 merged)",
            s.passed(PassReason::Bypassed),
            if n == 1 { "burst" } else { "bursts" }
        );
    }
    let passed = nonzero(PassReason::ALL.iter().map(|r| r.name()), &s.passed);
    let flushes = nonzero(FlushReason::ALL.iter().map(|r| r.name()), &s.flushes);
    let _ = writeln!(t, "passed alone {}", list(&passed));
    let _ = writeln!(t, "flushed by   {}", list(&flushes));
    let ns = info.run_time.as_nanos() as f64;
    let _ = writeln!(
        t,
        "time         {:.1} ms replay, {:.0} ns per input frame: one cold pass copying each frame into a new buffer, {}coalescing{} (`lro bench` times the engine alone, warmed up); {:.1} ms reading input",
        ns / 1e6,
        if s.frames_in > 0 { ns / s.frames_in as f64 } else { 0.0 },
        if info.csum == "verify" { "verifying checksums, " } else { "" },
        if info.output.is_some() { ", writing the output" } else { "" },
        info.load_time.as_secs_f64() * 1e3
    );
    if let Some(o) = &info.output {
        let _ = writeln!(
            t,
            "output       {o} ({out} frames, {} order)",
            info.order.unwrap_or("delivery")
        );
    }
    let _ = writeln!(
        t,
        "reasons      alone: delivered as it came, never held; flush: why a held segment was completed"
    );
    t.push_str(&legend(s, "  ", Names::Replay));
    t
}

/// Every counter of `s` by its own name ([`Stats::counters`]): the `Stats` fields as the
/// engine names them (the keys above rename some, `frames_out` among them), for tools that
/// compare all of them, such as `scripts/firmware-qemu.sh`.
fn all_counters(s: &Stats) -> Value {
    Value::Object(
        s.counters()
            .map(|c| (c.key().to_string(), json!(c.value)))
            .collect(),
    )
}

/// The counters of one group of `s` ([`Stats::counters`]), by their names in it:
/// `{"not_ip": 0, ...}` for [`Group::Passed`].
fn group(s: &Stats, group: Group) -> Value {
    Value::Object(
        s.counters()
            .filter(|c| c.group == group)
            .map(|c| (c.name.to_string(), json!(c.value)))
            .collect(),
    )
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
        "bypass": info.bypass,
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
        "absorbed": s.absorbed,
        "trimmed": s.trimmed,
        "evictions": s.evictions,
        "forgotten": s.forgotten,
        "predicted": s.predicted,
        "prediction_paused": s.prediction_paused,
        "bypassed_bursts": s.bypassed_bursts,
        "ratio": ratio(s.frames_in, out),
        "passed": group(s, Group::Passed),
        "flushes": group(s, Group::Flushes),
        "tunnel": {
            "encap": crate::tunnel::NAME,
            "frames_in": s.tunnel.frames_in,
            "frames_merged": s.tunnel.frames_merged,
            "acks_merged": s.tunnel.acks_merged,
            "passed": group(s, Group::TunnelPassed),
        },
        "counters": all_counters(s),
        "load_ms": info.load_time.as_secs_f64() * 1e3,
        "run_ms": info.run_time.as_secs_f64() * 1e3,
        "output": info.output,
        "order": info.order,
    })
}
