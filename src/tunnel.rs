//! Tunnels: the encapsulation the tool's engines look through (GRE with the default `gre`
//! feature, `lro-gre`; none without it), and how flows and tunnels are named in reports.

use std::net::IpAddr;

use lro_core::encap::{Encap as _, TunnelKey};
use lro_core::{FlowKey, SegmentInfo, TunnelStats};

use crate::engine::Frame;

/// The encapsulation every engine of the tool coalesces through.
#[cfg(feature = "gre")]
pub(crate) type Encap = lro_gre::Gre;
/// The encapsulation every engine of the tool coalesces through (none: built without the
/// `gre` feature).
#[cfg(not(feature = "gre"))]
pub(crate) type Encap = lro_core::encap::NoEncap;

/// Whether any frame of `cap` comes through [`Encap`]: only then do the tool's engines look
/// through tunnels (an engine that reads them costs plain traffic some instructions per frame:
/// the tunnel part of every flow key). One parse per frame, before anything is timed.
pub(crate) fn carried(cap: &crate::capture::Capture) -> bool {
    cap.records.iter().any(|r| {
        let Some(meta) = r.class.meta(0) else {
            return false;
        };
        let frame = cap.frame(r).get(r.class.skip()..).unwrap_or(&[]);
        match lro_core::parse::parse_with::<Encap>(frame, &meta) {
            Ok(p) => p.tunnel.is_some(),
            Err(u) => matches!(u.hint, lro_core::parse::FlowHint::Tunnel(_)),
        }
    })
}

/// The encapsulation's name in reports (`gre`).
pub(crate) const NAME: &str = Encap::NAME;

/// A flow as the reports count it: its key and, for a tunnelled flow, its tunnel (the same
/// inner flow in two tunnels is two flows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FlowId {
    pub(crate) key: FlowKey,
    pub(crate) tunnel: Option<TunnelKey>,
}

impl FlowId {
    /// The flow of a delivered segment (`None`: not TCP).
    pub(crate) fn of(info: &SegmentInfo) -> Option<Self> {
        info.flow.map(|key| FlowId {
            key,
            tunnel: info.tunnel,
        })
    }

    /// The flow of a frame, parsed as the engines parse it.
    pub(crate) fn parse(frame: &Frame) -> Option<Self> {
        Self::parse_with_payload(frame).map(|(id, _)| id)
    }

    /// The flow of a frame and its TCP payload length, parsed as the engines parse it.
    pub(crate) fn parse_with_payload(frame: &Frame) -> Option<(Self, u32)> {
        let meta = frame.class.meta(0)?;
        lro_core::parse::parse_with::<Encap>(frame.as_ref(), &meta)
            .ok()
            .map(|p| {
                let id = FlowId {
                    key: p.key,
                    tunnel: p.tunnel.map(|t| t.key),
                };
                (id, p.payload_len)
            })
    }
}

fn addr(a: IpAddr) -> String {
    match a {
        IpAddr::V4(a) => a.to_string(),
        IpAddr::V6(a) => format!("[{a}]"),
    }
}

/// The encapsulation header's part of a tunnel's identity, in words: `gre csum key 42`.
#[cfg(feature = "gre")]
pub(crate) fn encap_name(t: &TunnelKey) -> String {
    lro_gre::TunnelId::of(t).to_string()
}

/// The encapsulation header's part of a tunnel's identity, in words.
#[cfg(not(feature = "gre"))]
pub(crate) fn encap_name(t: &TunnelKey) -> String {
    format!("{NAME} {:#x}", t.encap_id)
}

/// The key, when the encapsulation has one (GRE's K flag).
pub(crate) fn key(t: &TunnelKey) -> Option<u32> {
    #[cfg(feature = "gre")]
    return lro_gre::TunnelId::of(t).key;
    #[cfg(not(feature = "gre"))]
    {
        let _ = t;
        None
    }
}

/// A tunnel in words: `gre key 42 198.18.0.1 > 198.18.0.2`.
pub(crate) fn name(t: &TunnelKey) -> String {
    format!(
        "{} {} > {}",
        encap_name(t),
        addr(t.outer_src_addr()),
        addr(t.outer_dst_addr())
    )
}

/// The report line of the tunnel counters (`None` when no frame came through a tunnel).
pub(crate) fn summary(t: &TunnelStats) -> Option<String> {
    if t.frames_in == 0 {
        return None;
    }
    let passed = crate::report::nonzero(
        lro_core::PassReason::ALL.iter().map(|r| r.name()),
        &t.passed,
    );
    let passed = if passed.is_empty() {
        "none".to_string()
    } else {
        passed
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "{} frames in, {} merged into segments, {} pure ACKs absorbed; passed alone: {passed}",
        t.frames_in, t.frames_merged, t.acks_merged
    ))
}
