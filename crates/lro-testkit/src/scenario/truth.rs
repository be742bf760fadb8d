//! The invariant checks judged from the generator's ground truth ([`Truth`]) rather than from
//! the reference reader: isolation and order by generator flow, the bytes of every flow, the
//! never-merged list as the generator made the frames, duplicate ACKs as the knobs define them,
//! and the output read back by etherparse (a second reader, independent of
//! [`crate::oracle`]).

use super::{Input, Truth};
use crate::check::{serial_le, Run};
use crate::frame::{Out, Recorder};
use etherparse::{NetSlice, SlicedPacket, TransportSlice};
use lro_core::testing::{self, TCP_FIN, TCP_PSH, TCP_RST, TCP_SYN, TCP_URG};
use lro_core::{Config, OutChecksum, Policy, RxChecksum, SegmentInfo, Verdict};
use std::collections::HashMap;

/// What the checks read of a scenario.
struct Sc<'a> {
    inputs: &'a [Input],
    config: &'a Config,
    dup_mode: u8,
}

fn csum_eq(a: u16, b: u16) -> bool {
    a == b || (a | b == 0xffff && a & b == 0)
}

/// IP header bytes with the per-frame fields (lengths, ID, checksum) masked.
fn ip_identity(inp: &Input) -> Vec<u8> {
    let mut h = inp.bytes[inp.l3..inp.l4].to_vec();
    if h[0] >> 4 == 4 {
        h[2..6].fill(0);
        h[10..12].fill(0);
    } else {
        h[4..6].fill(0);
    }
    h
}

/// Checks every invariant on a run's output against the generator's ground truth. Returns a
/// description of the first violation.
pub fn check_truth(truth: &Truth, config: &Config, run: &Run) -> Result<(), String> {
    let sc = &Sc {
        inputs: &truth.frames,
        config,
        dup_mode: truth.dup_mode,
    };
    let (rec, verdicts) = (&run.rec, &run.verdicts[..]);
    let is_dup = |id: usize| {
        let i = id;
        sc.inputs[i].dup_ack
            && match sc.dup_mode {
                0 => false,
                1 => run.dup_known[i],
                _ => true,
            }
    };
    let gro = sc.config.policy == Policy::Gro;
    let n = sc.inputs.len();
    // (1) Conservation: every id exactly once.
    let mut seen = vec![0u32; n];
    for o in &rec.out {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| seen[i] += 1),
            Out::Rel(i) => seen[*i] += 1,
        }
    }
    if let Some(i) = seen.iter().position(|&c| c != 1) {
        return Err(format!(
            "conservation: frame {i} came back {} times",
            seen[i]
        ));
    }

    // The engine hashes the flow key itself (`RxMeta::rss` only feeds RSS sorting), so order
    // and the per-flow byte stream hold even when every frame carries a different NIC hash.
    let consistent = true;
    // (2) Order per flow.
    let mut last: HashMap<usize, usize> = HashMap::new();
    for o in &rec.out {
        if let Out::Seg { ids, .. } = o {
            for &id in ids {
                let inp = &sc.inputs[id];
                if inp.malformed {
                    continue;
                }
                if let Some(f) = inp.flow {
                    if let Some(&prev) = last.get(&f) {
                        if prev > id && consistent {
                            return Err(format!("order: flow {f}: frame {id} after frame {prev}"));
                        }
                    }
                    last.insert(f, id);
                }
            }
        }
    }

    // (3) Bytes per flow: concatenated payload out == in (excluding released pure ACKs).
    let mut flow_in: HashMap<usize, Vec<u8>> = HashMap::new();
    for (id, inp) in sc.inputs.iter().enumerate() {
        if let (Some(f), false) = (inp.flow, matches!(verdicts[id], Verdict::Absorbed)) {
            if !inp.malformed {
                flow_in
                    .entry(f)
                    .or_default()
                    .extend_from_slice(&inp.payload);
            }
        }
    }
    let mut flow_out: HashMap<usize, Vec<u8>> = HashMap::new();

    for (pos, o) in rec.out.iter().enumerate() {
        match o {
            Out::Rel(id) => check_released(sc, rec, pos, *id, is_dup(*id))?,
            Out::Seg {
                ids,
                bytes,
                chunks,
                info,
            } => {
                let head = &sc.inputs[ids[0]];
                if usize::from(info.frames) != ids.len() {
                    return Err(format!("segment {ids:?}: info.frames {}", info.frames));
                }
                // (4) Isolation.
                if ids.iter().any(|&i| sc.inputs[i].flow != head.flow) {
                    let flows: Vec<_> = ids.iter().map(|&i| sc.inputs[i].flow).collect();
                    return Err(format!("isolation: segment {ids:?} mixes flows {flows:?}"));
                }
                // Scatter-gather pieces: the others' chunks are exactly their payloads.
                for (k, &i) in ids.iter().enumerate().skip(1) {
                    if chunks[k] != sc.inputs[i].payload {
                        return Err(format!(
                            "segment {ids:?}: chunk {k} is not frame {i}'s payload"
                        ));
                    }
                }
                let unchanged = info.checksum == OutChecksum::AsReceived;
                if unchanged {
                    if ids.len() != 1 {
                        return Err(format!("segment {ids:?}: several frames but AsReceived"));
                    }
                    let full = &head.bytes[..];
                    let trimmed = &head.bytes[..head.ip_end.min(head.bytes.len())];
                    if bytes[..] != *full
                        && (bytes[..] != *trimmed || head.padding != Some(true) || gro)
                    {
                        return Err(format!("frame {}: AsReceived but bytes changed", ids[0]));
                    }
                } else {
                    check_rewritten(sc, ids, bytes, info)?;
                }
                if ids.len() > 1 || !unchanged {
                    check_never_merged(sc, ids, unchanged, &is_dup)?;
                }
                if let Some(f) = head.flow {
                    if !head.malformed {
                        for &i in ids {
                            flow_out
                                .entry(f)
                                .or_default()
                                .extend_from_slice(&sc.inputs[i].payload);
                        }
                    }
                }
                // (8) Reversibility: in `check::check`, byte for byte for generated frames.
            }
        }
    }
    for (f, data) in flow_in.iter().filter(|_| consistent) {
        if flow_out.get(f).map(Vec::as_slice).unwrap_or(&[]) != data.as_slice() {
            return Err(format!(
                "bytes: flow {f}: payload out differs from payload in"
            ));
        }
    }
    Ok(())
}

/// A released frame: Lro only, a mergeable pure ACK, superseded by a later segment of its flow
/// holding a frame pushed before it.
fn check_released(
    sc: &Sc<'_>,
    rec: &Recorder,
    pos: usize,
    id: usize,
    dup: bool,
) -> Result<(), String> {
    let inp = &sc.inputs[id];
    if sc.config.policy == Policy::Gro {
        return Err(format!("frame {id} released under Gro"));
    }
    let bad = !inp.pure_ack()
        || inp.malformed
        || inp.corrupt
        || inp.ip_opts
        || inp.fragment
        || inp.sack
        || dup
        || inp.padding == Some(false)
        || inp.flags & (TCP_SYN | TCP_RST | TCP_URG | TCP_FIN | TCP_PSH) != 0
        || (inp.meta.checksum == RxChecksum::None && !sc.config.verify_checksums);
    if bad {
        return Err(format!(
            "frame {id} released but may not be merged: {inp:?}"
        ));
    }
    let absorbed_by = rec.out[pos + 1..].iter().find_map(|o| match o {
        Out::Seg { ids, bytes, .. } if sc.inputs[ids[0]].flow == inp.flow && ids[0] < id => {
            Some(bytes)
        }
        _ => None,
    });
    let Some(bytes) = absorbed_by else {
        return Err(format!(
            "frame {id} released but no later segment of its flow carries it"
        ));
    };
    let Some(head_ack) = bytes
        .get(inp.l4 + 8..inp.l4 + 12)
        .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
    else {
        return Err(format!(
            "frame {id} released; the segment that carries it is too short for a TCP header"
        ));
    };
    if !serial_le(inp.ack, head_ack) {
        return Err(format!(
            "frame {id} released; its ACK {} is newer than the segment's {head_ack}",
            inp.ack
        ));
    }
    Ok(())
}

/// (5) and (7): frames that may never be merged (or rewritten).
fn check_never_merged(
    sc: &Sc<'_>,
    ids: &[usize],
    unchanged: bool,
    is_dup: &dyn Fn(usize) -> bool,
) -> Result<(), String> {
    let gro = sc.config.policy == Policy::Gro;
    let multi = ids.len() > 1;
    for &i in ids {
        let inp = &sc.inputs[i];
        let why = if inp.corrupt {
            "bad checksum (laundering)"
        } else if inp.meta.checksum == RxChecksum::None && !sc.config.verify_checksums {
            "unverified checksum"
        } else if inp.malformed {
            "malformed"
        } else if inp.ip_opts {
            "IP options"
        } else if inp.fragment {
            "fragment"
        } else if inp.flags & (TCP_SYN | TCP_RST | TCP_URG) != 0 {
            "SYN/RST/URG"
        } else if is_dup(i) {
            "duplicate ACK"
        } else if inp.padding == Some(false) {
            "non-neutral padding"
        } else if inp.padding.is_some() && gro {
            "padding under Gro"
        } else if inp.sack && !gro {
            "SACK under Lro"
        } else if gro && multi && inp.pure_ack() {
            "pure ACK under Gro"
        } else {
            continue;
        };
        if multi || !unchanged {
            return Err(format!(
                "never merged: frame {i} ({why}) is in segment {ids:?} (rewritten: {})",
                !unchanged
            ));
        }
    }
    if !multi {
        return Ok(());
    }
    let head = &sc.inputs[ids[0]];
    let head_ip = ip_identity(head);
    let mut next_seq = head.seq;
    for (k, &i) in ids.iter().enumerate() {
        let inp = &sc.inputs[i];
        if ip_identity(inp) != head_ip {
            return Err(format!(
                "segment {ids:?}: frame {i} differs in TTL/TOS/DF/flow label/ext headers"
            ));
        }
        if (inp.flags ^ head.flags) & !(TCP_PSH | TCP_FIN) != 0 {
            return Err(format!(
                "segment {ids:?}: frame {i} differs in TCP flags (CWR/ECE...)"
            ));
        }
        if k + 1 < ids.len() && inp.flags & (TCP_PSH | TCP_FIN) != 0 {
            return Err(format!(
                "segment {ids:?}: PSH/FIN on frame {i} which is not last"
            ));
        }
        if inp.seq != next_seq {
            return Err(format!("segment {ids:?}: frame {i} not contiguous"));
        }
        next_seq = next_seq.wrapping_add(inp.payload.len() as u32);
        if gro {
            let mss = head.payload.len();
            let len = inp.payload.len();
            if inp.ack != head.ack || inp.window != head.window {
                return Err(format!(
                    "Gro segment {ids:?}: ACK/window of frame {i} differ"
                ));
            }
            if inp.tcp_options(&inp.bytes) != head.tcp_options(&head.bytes) {
                return Err(format!("Gro segment {ids:?}: options of frame {i} differ"));
            }
            if len == 0 || len > mss || (k + 1 < ids.len() && len != mss) {
                return Err(format!(
                    "Gro segment {ids:?}: frame {i} payload {len} vs mss {mss}"
                ));
            }
        } else {
            let prev = &sc.inputs[ids[k.saturating_sub(1)]];
            if !serial_le(prev.ack, inp.ack) {
                return Err(format!(
                    "Lro segment {ids:?}: ACK goes backwards at frame {i}"
                ));
            }
            match (prev.tsval, inp.tsval) {
                (Some(a), Some(b)) if !serial_le(a, b) => {
                    return Err(format!(
                        "Lro segment {ids:?}: TSval goes backwards at frame {i}"
                    ));
                }
                (Some(_), None) | (None, Some(_)) => {
                    return Err(format!(
                        "Lro segment {ids:?}: timestamps present on some frames only"
                    ));
                }
                _ => {}
            }
        }
    }
    if gro && head.ip_identity_is_v4() {
        let id_of = |i: usize| {
            let b = &sc.inputs[i].bytes;
            let l3 = sc.inputs[i].l3;
            u16::from_be_bytes([b[l3 + 4], b[l3 + 5]])
        };
        let first = id_of(ids[0]);
        let fixed = ids.iter().all(|&i| id_of(i) == first);
        let inc = ids
            .iter()
            .enumerate()
            .all(|(k, &i)| id_of(i) == first.wrapping_add(k as u16));
        if !fixed && !inc {
            return Err(format!(
                "Gro segment {ids:?}: IPv4 IDs neither fixed nor incrementing"
            ));
        }
    }
    Ok(())
}

impl Input {
    fn ip_identity_is_v4(&self) -> bool {
        self.bytes[self.l3] >> 4 == 4
    }
}

/// (6) A rewritten segment parses, its lengths and checksums are right, its payload is the
/// concatenation of its frames' payloads, and its header fields are the ones the policy says.
fn check_rewritten(
    sc: &Sc<'_>,
    ids: &[usize],
    bytes: &[u8],
    info: &SegmentInfo,
) -> Result<(), String> {
    let head = &sc.inputs[ids[0]];
    let p = match head.meta.link {
        lro_core::LinkKind::Ethernet => SlicedPacket::from_ethernet(bytes),
        link => SlicedPacket::from_ip(bytes.get(link.header_len()..).unwrap_or_default()),
    }
    .map_err(|e| format!("segment {ids:?} does not parse: {e:?}"))?;
    let Some(TransportSlice::Tcp(tcp)) = &p.transport else {
        return Err(format!("segment {ids:?}: no TCP"));
    };
    let expected: Vec<u8> = ids
        .iter()
        .flat_map(|&i| sc.inputs[i].payload.iter().copied())
        .collect();
    if tcp.payload() != expected.as_slice() {
        return Err(format!(
            "segment {ids:?}: payload is not the frames' payloads"
        ));
    }
    if info.payload_len as usize != expected.len() || info.len != bytes.len() {
        return Err(format!("segment {ids:?}: info lengths {info:?}"));
    }
    if info.l3 as usize != head.l3 || info.l4 as usize != head.l4 {
        return Err(format!("segment {ids:?}: info offsets {info:?}"));
    }
    let hdr = etherparse::TcpHeaderSlice::from_slice(tcp.slice()).unwrap();
    let tcp_len = bytes.len() - head.l4;
    let (sum, pseudo, ip_len) = match &p.net {
        Some(NetSlice::Ipv4(v4)) => {
            let h = v4.header();
            if h.to_header().calc_header_checksum() != h.header_checksum() {
                return Err(format!("segment {ids:?}: bad IPv4 header checksum"));
            }
            if usize::from(h.total_len()) != bytes.len() - head.l3 {
                return Err(format!(
                    "segment {ids:?}: IPv4 total length {} vs {}",
                    h.total_len(),
                    bytes.len() - head.l3
                ));
            }
            (
                hdr.calc_checksum_ipv4_raw(h.source(), h.destination(), tcp.payload())
                    .unwrap(),
                testing::pseudo_header_sum_v4(h.source(), h.destination(), tcp_len as u32),
                usize::from(h.total_len()),
            )
        }
        Some(NetSlice::Ipv6(v6)) => {
            let h = v6.header();
            if usize::from(h.payload_length()) + 40 != bytes.len() - head.l3 {
                return Err(format!("segment {ids:?}: IPv6 payload length"));
            }
            (
                hdr.calc_checksum_ipv6_raw(h.source(), h.destination(), tcp.payload())
                    .unwrap(),
                testing::pseudo_header_sum_v6(h.source(), h.destination(), tcp_len as u32),
                usize::from(h.payload_length()) + 40,
            )
        }
        _ => return Err(format!("segment {ids:?}: no IP")),
    };
    if ip_len > usize::from(sc.config.max_ip_len) {
        return Err(format!(
            "segment {ids:?}: IP datagram {ip_len} over the limit"
        ));
    }
    match info.checksum {
        OutChecksum::Full => {
            if !csum_eq(sum, tcp.checksum()) {
                return Err(format!(
                    "segment {ids:?}: bad TCP checksum {:#x}, want {sum:#x}",
                    tcp.checksum()
                ));
            }
        }
        OutChecksum::Partial => {
            if !csum_eq(pseudo, tcp.checksum()) {
                return Err(format!(
                    "segment {ids:?}: partial checksum {:#x}, want {pseudo:#x}",
                    tcp.checksum()
                ));
            }
        }
        other => return Err(format!("segment {ids:?}: checksum state {other:?}")),
    }
    if info.checksum != sc.config.checksum_out {
        return Err(format!(
            "segment {ids:?}: checksum state {:?}",
            info.checksum
        ));
    }
    // Header fields: everything up to the TCP checksum is the head's except lengths, IP
    // checksum, PSH/FIN ORed in, and under Lro the newest ACK/window/timestamps (the Lro
    // TCP header in full is `structured::check_headers`'s, in the fuzz targets).
    if tcp.sequence_number() != head.seq {
        return Err(format!("segment {ids:?}: sequence number"));
    }
    let or = ids
        .iter()
        .fold(0u8, |f, &i| f | sc.inputs[i].flags & (TCP_PSH | TCP_FIN));
    let flags = bytes[head.l4 + 13];
    if flags != head.flags | or {
        return Err(format!("segment {ids:?}: flags {flags:#x}"));
    }
    // Under both policies: the link header, the IP header (its ID included) and the urgent
    // pointer are the head's.
    let (l3, l4) = (head.l3, head.l4);
    let same_id = head.bytes[l3] >> 4 != 4 || bytes[l3 + 4..l3 + 6] == head.bytes[l3 + 4..l3 + 6];
    if bytes[..l3] != head.bytes[..l3]
        || ip_identity_bytes(&bytes[l3..l4]) != ip_identity(head)
        || !same_id
    {
        return Err(format!(
            "segment {ids:?}: link or IP header changed beyond lengths and checksum"
        ));
    }
    if bytes[l4 + 18..l4 + 20] != head.bytes[l4 + 18..l4 + 20] {
        return Err(format!("segment {ids:?}: urgent pointer changed"));
    }
    let last = &sc.inputs[*ids.last().unwrap()];
    if sc.config.policy == Policy::Gro {
        let same_tcp = bytes[l4..l4 + 13] == head.bytes[l4..l4 + 13]
            && bytes[l4 + 14..l4 + 16] == head.bytes[l4 + 14..l4 + 16];
        if !same_tcp || tcp.options() != head.tcp_options(&head.bytes) {
            return Err(format!(
                "Gro segment {ids:?}: TCP header fields other than lengths changed"
            ));
        }
    } else if !serial_le(last.ack, tcp.acknowledgment_number()) {
        return Err(format!(
            "Lro segment {ids:?}: ACK older than its last frame's"
        ));
    }
    Ok(())
}

fn ip_identity_bytes(h: &[u8]) -> Vec<u8> {
    let mut h = h.to_vec();
    if h[0] >> 4 == 4 {
        h[2..4].fill(0);
        h[4..6].fill(0);
        h[10..12].fill(0);
    } else {
        h[4..6].fill(0);
    }
    h
}
