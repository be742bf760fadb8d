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
//!
//! On the transmit side, [`segment`] splits a super-segment given as headers plus payload
//! pieces (a [`tx::Retransmit`](crate::tx::Retransmit) view, scatter-gather chunks) by
//! `tcp_gso_segment`'s rules without AccECN: CWR only on the first frame; its [`Layout`] is
//! taken once from a parsed frame.

use crate::coalesce::fixup::{self, Layers, TcpSum};
use crate::csum::{self, PseudoHeader};
use crate::encap::{Encap, NoEncap};
use crate::meta::RxMeta;
use crate::parse::{self, Parsed};
use crate::stats::PassReason;
use crate::wire::{ipv4, ipv6, tcp, write_be16, write_be32};

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
    /// The frame cannot be cut as given: IPv4 options, a header longer than 65535 bytes or
    /// offsets that are not a header stack ([`Layout::from_parsed`]); for [`segment`] and
    /// [`segment_frame`] also an MSS of zero, a tunnelled layout, a header of another length
    /// than the layout's, or an MSS whose frames' IP length would not fit its 16-bit field.
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
/// A frame whose payload fits in one segment, or with `gso_size == 0` (as
/// [`SegmentInfo::gso_size`](crate::SegmentInfo::gso_size) says of a segment of one data frame,
/// and as Linux reads a zero `gso_size`: not a GSO packet), is emitted as it is. `fixed_id` is
/// [`SegmentInfo::fixed_id`](crate::SegmentInfo::fixed_id). [`resegment_with`] does the same
/// for frames that arrived through an encapsulation.
///
/// # Errors
/// See [`GsoError`]; nothing is emitted on error.
pub fn resegment(
    frame: &[u8],
    meta: &RxMeta,
    gso_size: u16,
    fixed_id: bool,
    out: &mut [u8],
    emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    resegment_with::<NoEncap>(frame, meta, gso_size, (fixed_id, false), out, emit)
}

/// [`resegment`] for a frame that may be tunnelled through `E`: every output frame gets the
/// head's headers with its own sequence number, inner and outer IP lengths and IDs (`fixed_id`:
/// [`SegmentInfo::fixed_id`](crate::SegmentInfo::fixed_id) and
/// [`SegmentInfo::fixed_outer_id`](crate::SegmentInfo::fixed_outer_id)), checksums, and
/// encapsulation header ([`Encap::fix`]).
///
/// # Errors
/// See [`GsoError`]; nothing is emitted on error.
pub fn resegment_with<E: Encap>(
    frame: &[u8],
    meta: &RxMeta,
    gso_size: u16,
    fixed_id: (bool, bool),
    out: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let p = parse::parse_with::<E>(frame, meta).map_err(|u| GsoError::Parse(u.reason))?;
    let layout = Layout::from_parsed(&p, frame)?;
    let hdr = layout.header_len();
    let payload = &frame[hdr..p.ip_end as usize];
    let mss = usize::from(gso_size);
    if mss == 0 || payload.len() <= mss {
        let whole = &frame[..p.ip_end as usize];
        let dst = out.get_mut(..whole.len()).ok_or(GsoError::BufferTooSmall {
            needed: whole.len(),
        })?;
        dst.copy_from_slice(whole);
        emit(dst);
        return Ok(1);
    }
    if out.len() < hdr + mss {
        return Err(GsoError::BufferTooSmall { needed: hdr + mss });
    }
    let l = &layout.layers;
    let ids = layout.ids(frame);
    let pieces = payload.len().div_ceil(mss);
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let last = i + 1 == pieces;
        let len = hdr + chunk.len();
        let b = &mut out[..len];
        b[..hdr].copy_from_slice(&frame[..hdr]);
        b[hdr..].copy_from_slice(chunk);
        let step = |fixed: bool| if fixed { 0 } else { i as u16 };
        layout.set_ids(b, ids, (step(fixed_id.0), step(fixed_id.1)));
        let l4 = usize::from(l.l4);
        write_be32(
            b,
            l4 + tcp::field::SEQ_NUM.start,
            p.seq.wrapping_add((i * mss) as u32),
        );
        if !last {
            b[l4 + tcp::field::FLAGS] &= !(tcp::flags::PSH | tcp::flags::FIN);
        }
        let sum = csum::sum(chunk);
        fixup::fix_headers::<E>(b, l, len, Some(sum), TcpSum::Full, &layout.pseudo);
        emit(b);
    }
    Ok(pieces)
}

/// Where the headers of a TCP frame are: what software GSO needs to rebuild them for each
/// output frame, taken once from a parsed frame (a transmitted super-segment, a retransmit's
/// rebuilt header) and then applied to a header copy with any payload pieces.
///
/// IPv4 headers with options are refused ([`GsoError::Invalid`]), as [`resegment`] does: the
/// coalescer never merges them (Linux `inet_gro_receive` flushes on `ihl != 5`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    layers: Layers,
    pseudo: PseudoHeader,
}

impl Layout {
    /// The layout of a frame [`parse::parse`] accepted; `frame` is the frame it parsed.
    ///
    /// # Errors
    /// [`GsoError::Invalid`] for IPv4 options, a header longer than 65535 bytes or offsets
    /// that are not a header stack (`p` not from the parser: each header must fit before the
    /// next one starts).
    pub fn from_parsed(p: &Parsed, frame: &[u8]) -> Result<Self, GsoError> {
        if p.ip.options || p.tunnel.is_some_and(|t| t.outer.options) {
            return Err(GsoError::Invalid);
        }
        let layers = Layers::of(p).ok_or(GsoError::Invalid)?;
        if frame.len() < layers.header_len() || !layers_are_a_stack(&layers) {
            return Err(GsoError::Invalid);
        }
        Ok(Self {
            layers,
            pseudo: p.key.pseudo_header(),
        })
    }

    /// Parses `frame` and returns its layout and the parse.
    ///
    /// # Errors
    /// [`GsoError::Parse`] when the frame is not TCP the parser accepts, else as
    /// [`Layout::from_parsed`].
    pub fn parse(frame: &[u8], meta: &RxMeta) -> Result<(Self, Parsed), GsoError> {
        let p = parse::parse(frame, meta).map_err(|u| GsoError::Parse(u.reason))?;
        Ok((Self::from_parsed(&p, frame)?, p))
    }

    /// Link, IP and TCP headers together: the offset of the TCP payload.
    pub const fn header_len(&self) -> usize {
        self.layers.payload as usize
    }

    /// Offset of the (inner) IP header.
    pub const fn l3(&self) -> usize {
        self.layers.l3 as usize
    }

    /// Offset of the TCP header.
    pub const fn l4(&self) -> usize {
        self.layers.l4 as usize
    }

    /// IPv6 (the inner header)?
    pub const fn is_v6(&self) -> bool {
        self.layers.v6
    }

    /// The TCP pseudo header of the frame's flow.
    pub const fn pseudo_header(&self) -> PseudoHeader {
        self.pseudo
    }

    /// The IPv4 IDs of a header (inner, outer; zero for IPv6 or no tunnel).
    fn ids(&self, header: &[u8]) -> (u16, u16) {
        let id = |l3: usize, v6: bool| {
            if v6 {
                0
            } else {
                crate::wire::be16(header, l3 + ipv4::field::IDENT.start)
            }
        };
        let l = &self.layers;
        (
            id(usize::from(l.l3), l.v6),
            l.outer.map_or(0, |o| id(usize::from(o.l3), o.v6)),
        )
    }

    /// Writes the IPv4 IDs `ids` advanced by `steps` (inner, outer).
    fn set_ids(&self, b: &mut [u8], ids: (u16, u16), steps: (u16, u16)) {
        let l = &self.layers;
        if !l.v6 {
            write_be16(
                b,
                usize::from(l.l3) + ipv4::field::IDENT.start,
                ids.0.wrapping_add(steps.0),
            );
        }
        if let Some(o) = l.outer.filter(|o| !o.v6) {
            write_be16(
                b,
                usize::from(o.l3) + ipv4::field::IDENT.start,
                ids.1.wrapping_add(steps.1),
            );
        }
    }

    /// Rewrites the lengths and checksums of `frame` (this layout's headers followed by
    /// `payload_len` payload bytes whose sum is `payload_sum`) after its header fields changed.
    /// With `full == false` the TCP checksum field holds the pseudo-header sum only
    /// (CHECKSUM_PARTIAL, for a device that finishes it, Linux `tcp_v4_send_check`).
    pub(crate) fn finish(
        &self,
        frame: &mut [u8],
        payload_len: usize,
        payload_sum: u16,
        full: bool,
    ) {
        let end = self.header_len() + payload_len;
        let tcp = if full { TcpSum::Full } else { TcpSum::Partial };
        fixup::fix_headers::<NoEncap>(
            frame,
            &self.layers,
            end,
            Some(payload_sum),
            tcp,
            &self.pseudo,
        );
    }
}

/// Whether the offsets of `l` are in order with room for each header (what the parser
/// guarantees; a hand-built [`Parsed`] need not): the fix-up skips what does not fit, but
/// [`segment`] and [`resegment`] index the TCP header.
fn layers_are_a_stack(l: &Layers) -> bool {
    let ip_len = |v6: bool| {
        if v6 {
            ipv6::HEADER_LEN
        } else {
            ipv4::HEADER_LEN
        }
    };
    let (l3, l4, payload) = (usize::from(l.l3), usize::from(l.l4), l.header_len());
    let inner = l3 + ip_len(l.v6) <= l4 && l4 + tcp::HEADER_LEN <= payload;
    inner
        && l.outer.is_none_or(|o| {
            let (ol3, encap, next) = (
                usize::from(o.l3),
                usize::from(o.encap),
                usize::from(o.inner),
            );
            ol3 + ip_len(o.v6) <= encap && encap <= next && next <= l3
        })
}

/// Software TSO: splits a super-segment given as its headers (`header`, laid out as `layout`
/// says) and its payload as any number of pieces (scatter-gather: a retransmit view, a
/// coalesced segment's chunks) into frames of at most `mss` payload bytes, written one at a
/// time into `out` and handed to `emit`. Returns how many frames were emitted.
///
/// The rules are Linux `tcp_gso_segment` (`net/ipv4/tcp_offload.c`) without
/// `SKB_GSO_TCP_ACCECN`, and `inet_gso_segment` (`net/ipv4/af_inet.c`) for IPv4:
/// - frame `i` carries sequence number `seq + i * mss` (mod 2^32, RFC 9293 section 3.4);
/// - the IPv4 ID increments per frame from the header's (`inet_gso_segment`: `id++` unless
///   `SKB_GSO_TCP_FIXEDID`);
/// - PSH and FIN stay only on the last frame (`th->fin = th->psh = 0` on all but the last);
/// - CWR stays only on the first (`th->cwr = 0` after the first: RFC 3168 section 6.1.2, the
///   sender sets CWR once per window reduction);
/// - checksums are complete (for a device without checksum offload): each payload piece is
///   summed as it is copied into `out` and the sums are combined with the header and
///   pseudo-header sums (RFC 1071 section 2, pieces at odd offsets byte-swapped), so the
///   payload is read once.
///
/// Under [`Policy::Gro`](crate::Policy::Gro) the coalescer merges the frames back into the
/// original super-segment byte for byte, unless it carried CWR: Gro only merges frames with
/// equal flags but PSH/FIN.
///
/// An empty payload gives one frame (a FIN or a pure ACK).
///
/// ```
/// use lro_core::gso::{self, Layout};
/// use lro_core::RxMeta;
/// # fn frame(payload: usize) -> Vec<u8> {
/// #     let mut f = vec![0u8; 14 + 20 + 20 + payload];
/// #     f[12] = 0x08;
/// #     f[14] = 0x45;
/// #     f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
/// #     f[22] = 64;
/// #     f[23] = 6;
/// #     f[26..34].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
/// #     f[38..42].copy_from_slice(&7u32.to_be_bytes());
/// #     f[46] = 0x50;
/// #     f[47] = 0x18; // ACK | PSH
/// #     f
/// # }
/// // A 4000-byte super-segment as a stack hands it to a TSO device.
/// let superseg = frame(4000);
/// let (layout, _) = Layout::parse(&superseg, &RxMeta::ethernet(0)).unwrap();
/// let (header, payload) = superseg.split_at(layout.header_len());
/// let mut out = [0u8; 1514];
/// let mut seqs = Vec::new();
/// let n = gso::segment(&layout, header, [payload], 1460, &mut out, |f| {
///     seqs.push((u32::from_be_bytes([f[38], f[39], f[40], f[41]]), f[47], f.len()));
/// })
/// .unwrap();
/// assert_eq!(n, 3);
/// // PSH only on the last frame.
/// assert_eq!(seqs, [(7, 0x10, 1514), (1467, 0x10, 1514), (2927, 0x18, 54 + 1080)]);
/// ```
///
/// # Errors
/// [`GsoError::Invalid`] if `mss` is zero, `layout` is of a tunnelled frame (use
/// [`resegment_with`]), `header` is not `layout.header_len()` bytes or a frame of `mss`
/// payload bytes would not fit an IP length field;
/// [`GsoError::BufferTooSmall`] if `out` cannot hold the headers and `mss` bytes. Nothing is
/// emitted on error.
pub fn segment<'p, I>(
    layout: &Layout,
    header: &[u8],
    payload: I,
    mss: u16,
    out: &mut [u8],
    mut emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError>
where
    I: IntoIterator<Item = &'p [u8]>,
{
    let hdr = layout.header_len();
    let mss = usize::from(mss);
    // A tunnelled layout (from `parse_with`) is refused: its encapsulation header and outer
    // IP header cannot be rewritten without knowing the encapsulation.
    let tunnelled = layout.layers.outer.is_some();
    if mss == 0 || tunnelled || header.len() != hdr || !layout.layers.fits(hdr + mss) {
        return Err(GsoError::Invalid);
    }
    let out = out
        .get_mut(..hdr + mss)
        .ok_or(GsoError::BufferTooSmall { needed: hdr + mss })?;
    let l4 = layout.l4();
    let seq0 = crate::wire::be32(header, l4 + tcp::field::SEQ_NUM.start);
    let ids = layout.ids(header);
    let flags0 = header[l4 + tcp::field::FLAGS];
    out[..hdr].copy_from_slice(header);
    let mut pieces = payload.into_iter().filter(|p| !p.is_empty()).peekable();
    let mut cur: &[u8] = &[];
    let mut sent: u32 = 0;
    let mut n = 0usize;
    loop {
        // Copy up to `mss` bytes from the pieces, summing each copied run.
        let mut fill = 0;
        let mut sum = 0u16;
        while fill < mss {
            if cur.is_empty() {
                match pieces.next() {
                    Some(p) => cur = p,
                    None => break,
                }
            }
            let take = (mss - fill).min(cur.len());
            let dst = &mut out[hdr + fill..hdr + fill + take];
            dst.copy_from_slice(&cur[..take]);
            sum = csum::add_at_offset(sum, csum::sum(dst), fill);
            fill += take;
            cur = &cur[take..];
        }
        let last = cur.is_empty() && pieces.peek().is_none();
        let mut flags = flags0;
        if n > 0 {
            flags &= !tcp::flags::CWR;
        }
        if !last {
            flags &= !(tcp::flags::PSH | tcp::flags::FIN);
        }
        out[l4 + tcp::field::FLAGS] = flags;
        write_be32(out, l4 + tcp::field::SEQ_NUM.start, seq0.wrapping_add(sent));
        layout.set_ids(out, ids, (n as u16, n as u16));
        layout.finish(&mut out[..hdr + fill], fill, sum, true);
        emit(&out[..hdr + fill]);
        n += 1;
        sent = sent.wrapping_add(fill as u32);
        if last {
            return Ok(n);
        }
    }
}

/// [`segment`] for a contiguous super-segment (headers and payload in one buffer, as a stack
/// hands it to a TSO device); bytes after the IP datagram (padding) are ignored.
///
/// # Errors
/// [`GsoError::Parse`] when `frame` is not a TCP segment the parser accepts, else as
/// [`segment`].
pub fn segment_frame(
    frame: &[u8],
    meta: &RxMeta,
    mss: u16,
    out: &mut [u8],
    emit: impl FnMut(&[u8]),
) -> Result<usize, GsoError> {
    let (layout, p) = Layout::parse(frame, meta)?;
    let (header, rest) = frame.split_at(layout.header_len());
    let payload = &rest[..p.payload_len as usize];
    segment(&layout, header, [payload], mss, out, emit)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::encap::{EncapFix, EncapHeader, Inner};
    use crate::testing::{
        bytes_of, ones_complement_sum, Corrupt, FrameSpec, IpSpec, TCP_ACK, TCP_PSH,
    };
    use std::vec;
    use std::vec::Vec;

    /// An 8-byte encapsulation with no length or checksum field (IP protocol 253, RFC 3692).
    struct Toy;

    impl Encap for Toy {
        const IP_PROTOCOL: u8 = 253;
        const MAX_HEADER_LEN: usize = 8;
        const NAME: &'static str = "toy";
        type Tunnel = crate::encap::TunnelKey;

        fn parse(b: &[u8]) -> Result<EncapHeader, PassReason> {
            let h = b.get(..8).ok_or(PassReason::Malformed)?;
            match u16::from_be_bytes([h[0], h[1]]) {
                0x0800 => Ok(EncapHeader::new(8, Inner::Ipv4, 0)),
                _ => Err(PassReason::NotTcp),
            }
        }

        fn fix(_header: &mut [u8], _fix: &EncapFix) {}
    }

    /// Ethernet, outer IPv4 (protocol 253), the toy header, inner IPv4/TCP with `payload`.
    fn tunnelled(payload: &[u8]) -> Vec<u8> {
        tunnelled_with(payload, (0, 0), &[])
    }

    /// [`tunnelled`] with the inner and outer IPv4 IDs given and `outer_options` (a multiple
    /// of 4 bytes) in the outer IPv4 header.
    fn tunnelled_with(payload: &[u8], ids: (u16, u16), outer_options: &[u8]) -> Vec<u8> {
        let mut spec = FrameSpec::ipv4_tcp(40000, 5201)
            .seq(1)
            .ack(1)
            .flags(TCP_ACK | TCP_PSH)
            .payload(payload)
            .raw_ip();
        if let IpSpec::V4(v4) = &mut spec.ip {
            v4.id = ids.0;
        }
        let inner = bytes_of(&spec);
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let hlen = 20 + outer_options.len();
        let mut ip = vec![0u8; hlen];
        ip[0] = 0x40 | (hlen / 4) as u8;
        ip[2..4].copy_from_slice(&((hlen + 8 + inner.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&ids.1.to_be_bytes());
        ip[8] = 64;
        ip[9] = 253;
        ip[12..20].copy_from_slice(&[192, 0, 2, 1, 192, 0, 2, 2]);
        ip[20..].copy_from_slice(outer_options);
        let c = !ones_complement_sum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x08, 0x00, 0, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&inner);
        f
    }

    #[test]
    fn segment_never_emits_a_tunnelled_frame_with_a_stale_outer_length() {
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let frame = tunnelled(&payload);
        let p = parse::parse_with::<Toy>(&frame, &RxMeta::ethernet(0)).unwrap();
        assert!(p.tunnel.is_some());
        let layout = Layout::from_parsed(&p, &frame).unwrap();
        let (header, rest) = frame.split_at(layout.header_len());
        let mut out = [0u8; 2000];
        let mut emitted = Vec::new();
        let r = segment(&layout, header, [rest], 1000, &mut out, |f| {
            emitted.push(f.to_vec())
        });
        // The encapsulation header cannot be rewritten without knowing `Toy`: every frame
        // emitted must still have outer lengths that match it.
        for f in &emitted {
            let outer_len = usize::from(u16::from_be_bytes([f[16], f[17]]));
            assert_eq!(outer_len, f.len() - 14, "outer IPv4 total length");
            assert_eq!(
                ones_complement_sum(&f[14..34]),
                0xffff,
                "outer IPv4 checksum"
            );
        }
        assert_eq!(r, Err(GsoError::Invalid));
        assert!(emitted.is_empty());
    }

    /// A tunnelled segment's inner and outer IDs were merged each by its own rule
    /// ([`SegmentInfo::fixed_id`](crate::SegmentInfo::fixed_id) and
    /// [`SegmentInfo::fixed_outer_id`](crate::SegmentInfo::fixed_outer_id) may differ), so each
    /// steps by its own flag.
    #[test]
    fn resegment_steps_inner_and_outer_ids_each_by_its_own_fixed_flag() {
        let payload: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
        let frame = tunnelled_with(&payload, (0x1000, 0x2000), &[]);
        let meta = RxMeta::ethernet(0);
        let inner_l3 = parse::parse_with::<Toy>(&frame, &meta).unwrap().l3 as usize;
        let id_at = |f: &[u8], l3: usize| u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]);
        for fixed in [(false, false), (true, false), (false, true), (true, true)] {
            let mut out = [0u8; 2000];
            let mut ids = Vec::new();
            let n = resegment_with::<Toy>(&frame, &meta, 1000, fixed, &mut out, |f| {
                ids.push((id_at(f, inner_l3), id_at(f, 14)));
            })
            .unwrap();
            assert_eq!(n, 3);
            let want: Vec<(u16, u16)> = (0..3u16)
                .map(|i| {
                    let step = |f: bool| if f { 0 } else { i };
                    (0x1000 + step(fixed.0), 0x2000 + step(fixed.1))
                })
                .collect();
            assert_eq!(ids, want, "fixed (inner, outer) {fixed:?}");
        }
    }

    /// The coalescer never merges IPv4 headers with options, outer ones included, so there is
    /// nothing to cut.
    #[test]
    fn outer_ipv4_options_are_refused() {
        let payload = [0x5au8; 2500];
        let frame = tunnelled_with(&payload, (0, 0), &[1, 1, 1, 0]);
        let meta = RxMeta::ethernet(0);
        let p = parse::parse_with::<Toy>(&frame, &meta).unwrap();
        assert!(p.tunnel.is_some_and(|t| t.outer.options));
        assert_eq!(Layout::from_parsed(&p, &frame), Err(GsoError::Invalid));
        let mut out = [0u8; 2000];
        let r = resegment_with::<Toy>(&frame, &meta, 1000, (false, false), &mut out, |_| {
            panic!("emitted on error")
        });
        assert_eq!(r, Err(GsoError::Invalid));
    }

    #[test]
    fn an_outer_ip_header_overlapping_the_encapsulation_is_refused() {
        let frame = tunnelled_with(&[0x5a; 100], (0, 0), &[]);
        let p = parse::parse_with::<Toy>(&frame, &RxMeta::ethernet(0)).unwrap();
        assert!(Layout::from_parsed(&p, &frame).is_ok());
        for v6 in [false, true] {
            let mut q = p;
            let t = q.tunnel.as_mut().unwrap();
            // The encapsulation header starts inside the outer IP header (20 or 40 bytes),
            // and ends before the inner one.
            t.outer.v6 = v6;
            t.encap = t.outer_l3 + 16;
            assert_eq!(
                Layout::from_parsed(&q, &frame),
                Err(GsoError::Invalid),
                "v6 {v6}"
            );
        }
    }

    /// Bytes after the IP datagram (Ethernet padding) belong to no frame: the output is that of
    /// the frame without them, whether it is cut or passed whole.
    #[test]
    fn padding_after_the_datagram_is_not_payload() {
        let payload: Vec<u8> = (0..2500u32).map(|i| (i * 7) as u8).collect();
        let spec = FrameSpec::ipv4_tcp(40000, 5201)
            .seq(1)
            .ack(1)
            .flags(TCP_ACK | TCP_PSH)
            .payload(&payload);
        let plain = bytes_of(&spec);
        let padded = bytes_of(&spec.padding(&[0xee; 7]));
        assert_eq!(padded.len(), plain.len() + 7);
        let meta = RxMeta::ethernet(0);
        let mut out = [0u8; 4000];
        for gso_size in [0, 1000, 2500, 3000] {
            let (mut want, mut got) = (Vec::new(), Vec::new());
            resegment(&plain, &meta, gso_size, false, &mut out, |f| {
                want.push(f.to_vec())
            })
            .unwrap();
            resegment(&padded, &meta, gso_size, false, &mut out, |f| {
                got.push(f.to_vec())
            })
            .unwrap();
            assert_eq!(got, want, "resegment, gso_size {gso_size}");
        }
        let (mut want, mut got) = (Vec::new(), Vec::new());
        segment_frame(&plain, &meta, 1000, &mut out, |f| want.push(f.to_vec())).unwrap();
        segment_frame(&padded, &meta, 1000, &mut out, |f| got.push(f.to_vec())).unwrap();
        assert_eq!(want.len(), 3);
        assert_eq!(got, want, "segment_frame");
    }

    /// A frame whose payload fits one segment is emitted as it is, checksum included (not
    /// rebuilt), however its payload compares with `gso_size`; and an output buffer of exactly
    /// one full frame is enough.
    #[test]
    fn a_frame_of_one_segment_is_emitted_as_it_is() {
        let payload = [0x5au8; 1000];
        let spec = FrameSpec::ipv4_tcp(40000, 5201)
            .seq(1)
            .ack(1)
            .flags(TCP_ACK | TCP_PSH)
            .payload(&payload)
            .corrupt(Corrupt::TcpChecksum);
        let frame = bytes_of(&spec);
        let meta = RxMeta::ethernet(0);
        for gso_size in [0, 1000, 1001] {
            let mut out = vec![0u8; frame.len()];
            let mut got = Vec::new();
            let n = resegment(&frame, &meta, gso_size, false, &mut out, |f| {
                got.push(f.to_vec())
            })
            .unwrap();
            assert_eq!((n, got), (1, vec![frame.clone()]), "gso_size {gso_size}");
        }
        let hdr = frame.len() - payload.len();
        let mut out = vec![0u8; hdr + 400];
        let n = resegment(&frame, &meta, 400, false, &mut out, |_| ()).unwrap();
        assert_eq!(n, 3);
        assert_eq!(
            resegment(&frame, &meta, 400, false, &mut out[..hdr + 399], |_| ()),
            Err(GsoError::BufferTooSmall { needed: hdr + 400 })
        );
    }

    /// The layout's accessors name the headers of the frame it was taken from, and each error
    /// says what went wrong.
    #[test]
    fn a_layout_names_its_headers_and_an_error_says_why() {
        let payload = [1u8; 10];
        for (v6, spec) in [
            (false, FrameSpec::ipv4_tcp(40000, 5201)),
            (true, FrameSpec::ipv6_tcp(40000, 5201)),
        ] {
            let frame = bytes_of(&spec.vlan(0x8100, 3).timestamps(1, 2).payload(&payload));
            let (layout, p) = Layout::parse(&frame, &RxMeta::ethernet(0)).unwrap();
            let ip = if v6 { 40 } else { 20 };
            assert_eq!(layout.is_v6(), v6);
            assert_eq!((layout.l3(), layout.l4()), (18, 18 + ip));
            assert_eq!(layout.header_len(), 18 + ip + 32);
            assert_eq!(layout.pseudo_header(), p.key.pseudo_header());
        }
        let text = |e: GsoError| std::format!("{e}");
        let reason = std::format!("{}", PassReason::Fragment);
        assert!(text(GsoError::Parse(PassReason::Fragment)).contains(&reason));
        assert!(text(GsoError::BufferTooSmall { needed: 1514 }).contains("1514 bytes needed"));
        assert_eq!(text(GsoError::Invalid), "invalid segmentation parameters");
    }
}
