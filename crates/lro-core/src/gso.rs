//! Software GSO: splitting a coalesced segment back into wire-size frames.
//!
//! The inverse of the coalescer, for devices without TSO (AF_XDP, embedded MACs) and for
//! forwarding. Follows Linux `tcp_gso_segment` / `inet_gso_segment`: every frame gets the
//! head's headers with its own sequence number, IP length and checksums; the IPv4 ID increments
//! per frame unless the segment was merged with fixed IDs; PSH and FIN stay only on the last
//! frame; CWR is kept as merged (under [`Policy::Gro`](crate::Policy::Gro) all merged frames
//! carried the same CWR bit, Linux `SKB_GSO_TCP_ACCECN` behaviour).
//!
//! Under `Gro`, `resegment` of a coalesced segment gives back the original frames byte for byte
//! (provided their checksums were in canonical form, as every sender writes them).

use crate::csum;
use crate::meta::RxMeta;
use crate::stats::PassReason;
use crate::wire::{self, tcp_flags};

/// Why a frame could not be re-segmented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GsoError {
    /// The frame is not a TCP segment the parser accepts.
    Parse(PassReason),
    /// The output buffer cannot hold one frame.
    BufferTooSmall {
        /// Bytes needed for the largest output frame.
        needed: usize,
    },
    /// `gso_size` is zero while the payload is not empty, or the headers carry IPv4 options.
    Invalid,
}

impl core::fmt::Display for GsoError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Parse(r) => write!(f, "not a TCP segment that can be split ({r})"),
            Self::BufferTooSmall { needed } => {
                write!(f, "output buffer too small: {needed} bytes needed")
            }
            Self::Invalid => f.write_str("invalid segmentation parameters"),
        }
    }
}

impl core::error::Error for GsoError {}

/// Splits the contiguous coalesced frame `frame` into frames of at most `gso_size` payload bytes.
///
/// Each output frame is written into `out` and handed to `emit`; returns how many were emitted.
/// A frame whose payload fits in one segment (or `gso_size == 0` with no payload) is emitted as
/// it is. `fixed_id` is [`SegmentInfo::fixed_id`](crate::SegmentInfo::fixed_id).
///
/// # Errors
/// See [`GsoError`]; nothing is emitted on error.
pub fn resegment(
    frame: &[u8],
    meta: &RxMeta,
    gso_size: u16,
    fixed_id: bool,
    out: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let p = wire::parse(frame, meta).map_err(|u| GsoError::Parse(u.reason))?;
    if p.ip_options {
        return Err(GsoError::Invalid);
    }
    let (l3, l4, hdr) = (p.l3 as usize, p.l4 as usize, p.payload as usize);
    let payload = &frame[hdr..p.ip_end as usize];
    let mss = usize::from(gso_size);
    if payload.len() <= mss || payload.is_empty() {
        let whole = &frame[..p.ip_end as usize];
        let dst = out.get_mut(..whole.len()).ok_or(GsoError::BufferTooSmall {
            needed: whole.len(),
        })?;
        dst.copy_from_slice(whole);
        emit(dst);
        return Ok(1);
    }
    if mss == 0 {
        return Err(GsoError::Invalid);
    }
    if out.len() < hdr + mss {
        return Err(GsoError::BufferTooSmall { needed: hdr + mss });
    }
    let pieces = payload.len().div_ceil(mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let last = i + 1 == pieces;
        let len = hdr + chunk.len();
        let b = &mut out[..len];
        b[..hdr].copy_from_slice(&frame[..hdr]);
        b[hdr..].copy_from_slice(chunk);
        let ip_len = len - l3;
        if p.is_v6() {
            wire::write_be16(b, l3 + 4, (ip_len - wire::IPV6_LEN) as u16);
        } else {
            wire::write_be16(b, l3 + wire::IPV4_TOTAL_LEN, ip_len as u16);
            let id = if fixed_id {
                p.ip_id
            } else {
                p.ip_id.wrapping_add(i as u16)
            };
            wire::write_be16(b, l3 + wire::IPV4_ID, id);
            wire::write_be16(b, l3 + wire::IPV4_CHECKSUM, 0);
            let c = csum::finish(csum::sum(&b[l3..l4]));
            wire::write_be16(b, l3 + wire::IPV4_CHECKSUM, c);
        }
        wire::write_be32(b, l4 + wire::TCP_SEQ, p.seq.wrapping_add((i * mss) as u32));
        if !last {
            b[l4 + wire::TCP_FLAGS] &= !(tcp_flags::PSH | tcp_flags::FIN);
        }
        wire::write_be16(b, l4 + wire::TCP_CHECKSUM, 0);
        let tcp_len = (len - l4) as u32;
        let pseudo = p.key.pseudo_header_sum(tcp_len);
        let c = csum::finish(csum::add(pseudo, csum::sum(&b[l4..])));
        wire::write_be16(b, l4 + wire::TCP_CHECKSUM, c);
        emit(b);
    }
    Ok(pieces)
}
