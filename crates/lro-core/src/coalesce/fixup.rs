//! Header fix-up: after a segment's headers changed length (a coalesced segment at delivery,
//! one frame cut from it by software segmentation), rewrite every length and checksum in the
//! stack, innermost first, without reading payload: the payload's ones'-complement sum is
//! known.
//!
//! Linux `inet_gro_complete` / `ipv6_gro_complete` (IP lengths and IPv4 header checksums, for
//! the inner and the outer header), `tcp_gro_complete` (TCP checksum: full here, or the
//! pseudo-header sum for `CHECKSUM_PARTIAL`), `gre_gro_complete` (the encapsulation, through
//! [`Encap::fix`]). [`crate::gso`] uses the same function for every frame it emits.

use crate::csum::{self, PseudoHeader};
use crate::encap::{Encap, EncapFix};
use crate::parse::Parsed;
use crate::wire::{ipv4, ipv6, tcp, write_be16};

/// Where the headers of a frame are: what the fix-up needs, taken once from a parsed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct Layers {
    /// The tunnel's outer headers, if any.
    pub(crate) outer: Option<OuterLayers>,
    /// Offset of the (inner) IP header.
    pub(crate) l3: u16,
    /// Offset of the TCP header.
    pub(crate) l4: u16,
    /// Offset of the TCP payload (every header's length together).
    pub(crate) payload: u16,
    /// Inner IP version 6?
    pub(crate) v6: bool,
}

/// The outer headers of a tunnelled frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub(crate) struct OuterLayers {
    /// Offset of the outer IP header.
    pub(crate) l3: u16,
    /// Outer IP version 6?
    pub(crate) v6: bool,
    /// Offset of the encapsulation header.
    pub(crate) encap: u16,
    /// Offset just past it.
    pub(crate) inner: u16,
    /// Offset in the encapsulation header of its checksum over itself and what follows.
    pub(crate) checksum: Option<u16>,
}

impl Layers {
    /// The layers of a parsed frame; `None` when an offset does not fit 16 bits (a frame
    /// longer than any IP datagram, never from the parser of a real frame).
    pub(crate) fn of(p: &Parsed) -> Option<Self> {
        let u = |x: u32| u16::try_from(x).ok();
        let outer = match &p.tunnel {
            Some(t) => Some(OuterLayers {
                l3: u(t.outer_l3)?,
                v6: t.outer.v6,
                encap: u(t.encap)?,
                inner: u(t.inner)?,
                checksum: t.checksum,
            }),
            None => None,
        };
        Some(Self {
            outer,
            l3: u(p.l3)?,
            l4: u(p.l4)?,
            payload: u(p.payload)?,
            v6: p.ip.v6,
        })
    }

    /// Offset of the first IP header (the outer one of a tunnelled frame).
    #[inline(always)]
    pub(crate) fn first_l3(&self) -> usize {
        match &self.outer {
            Some(o) => usize::from(o.l3),
            None => usize::from(self.l3),
        }
    }

    /// Offset of the TCP payload.
    #[inline(always)]
    pub(crate) fn header_len(&self) -> usize {
        usize::from(self.payload)
    }

    /// Whether every length field would hold a datagram ending at `end`.
    #[inline]
    pub(crate) fn fits(&self, end: usize) -> bool {
        let ip_ok = |l3: u16, v6: bool| {
            let len = end.saturating_sub(usize::from(l3));
            let len = if v6 {
                len.saturating_sub(ipv6::HEADER_LEN)
            } else {
                len
            };
            len <= usize::from(u16::MAX)
        };
        ip_ok(self.l3, self.v6) && self.outer.is_none_or(|o| ip_ok(o.l3, o.v6))
    }
}

/// How the TCP checksum is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TcpSum {
    /// Complete (needs the payload's sum; without it, as `Partial`).
    Full,
    /// The pseudo-header sum only (`CHECKSUM_PARTIAL`, Linux `tcp_gro_complete`).
    Partial,
}

/// Rewrites the lengths and checksums of the frame `b`, whose headers are laid out as `l` says
/// and whose (inner and outer) datagrams end at `end`, innermost first:
/// 1. the inner IP length (IPv4 total length and header checksum, or IPv6 payload length);
/// 2. the TCP checksum (`tcp`), over the pseudo header of `pseudo` and `payload_sum`, the sum
///    of the TCP payload (from the payload offset to `end`) when known;
/// 3. for a tunnel, the encapsulation header through [`Encap::fix`] (given the sum of every
///    byte after it, headers as rewritten plus payload), then the outer IP length and header
///    checksum.
///
/// Fields not listed (IP IDs, TTL, TCP flags, sequence numbers...) are the caller's. Offsets
/// out of bounds are skipped, never a panic.
pub(crate) fn fix_headers<E: Encap>(
    b: &mut [u8],
    l: &Layers,
    end: usize,
    payload_sum: Option<u16>,
    tcp: TcpSum,
    pseudo: &PseudoHeader,
) {
    let (l3, l4, payload) = (usize::from(l.l3), usize::from(l.l4), l.header_len());
    if end < payload || l4 > payload {
        return;
    }
    let Some(h) = b.get_mut(..payload) else {
        return;
    };
    ip_length(h, l3, l.v6, end);
    let tcp_len = (end - l4) as u32;
    let th = &mut h[l4..];
    let Some(field) = th.get_mut(tcp::field::CHECKSUM) else {
        return;
    };
    field.fill(0);
    let check = match (tcp, payload_sum) {
        (TcpSum::Full, Some(payload_sum)) => {
            // The TCP header has an even length (data offset * 4): the payload sum needs no
            // byte swap (RFC 1071 section 2 (A) and (B)).
            csum::finish(csum::add(
                csum::add(csum::fold(pseudo.acc(tcp_len)), csum::sum_header(th)),
                payload_sum,
            ))
        }
        _ => pseudo.sum(tcp_len),
    };
    th[tcp::field::CHECKSUM].copy_from_slice(&check.to_be_bytes());
    if let Some(o) = l.outer.as_ref().filter(|_| E::ENABLED) {
        // With a complete TCP checksum written, the TCP segment sums to minus its pseudo
        // header's sum, whatever its bytes: the encapsulation's checksum needs no second pass
        // over the headers (see `fix_outer`).
        let segment_sum = match (tcp, payload_sum) {
            (TcpSum::Full, Some(_)) => Some(!pseudo.sum(tcp_len)),
            _ => None,
        };
        fix_outer::<E>(h, l, o, end, payload_sum, segment_sum);
    }
}

/// The tunnel part of [`fix_headers`]: the encapsulation header through [`Encap::fix`], then
/// the outer IP length and header checksum (`h`: the headers, `l.payload` long).
///
/// [`Encap::fix`] is given the sum of everything after the encapsulation header only when the
/// header has a checksum over it. That sum is, when `segment_sum` (the TCP segment's sum, from
/// its complete checksum) is known, the sum of the bytes between the encapsulation header and
/// the inner IP header (a tunnelled Ethernet header), of the inner IP header (an IPv4 header
/// with its checksum sums to zero; IPv6 and its extension headers are summed), and of the TCP
/// segment; otherwise every header byte is summed and `payload_sum` added.
#[inline(never)]
fn fix_outer<E: Encap>(
    h: &mut [u8],
    l: &Layers,
    o: &OuterLayers,
    end: usize,
    payload_sum: Option<u16>,
    segment_sum: Option<u16>,
) {
    let (encap, inner, payload) = (usize::from(o.encap), usize::from(o.inner), l.header_len());
    let (l3, l4) = (usize::from(l.l3), usize::from(l.l4));
    if inner > l3 || l3 > l4 || l4 > payload {
        return;
    }
    let after = match (o.checksum, segment_sum) {
        (None, _) => None,
        (Some(_), Some(segment)) => {
            let ip = if l.v6 {
                csum::sum_header(&h[l3..l4])
            } else {
                0
            };
            let link = if inner < l3 {
                csum::sum(&h[inner..l3])
            } else {
                0
            };
            Some(csum::add(csum::add(link, ip), segment))
        }
        (Some(_), None) => payload_sum
            .map(|s| csum::add_at_offset(csum::sum(&h[inner..payload]), s, payload - inner)),
    };
    if let Some(eh) = h.get_mut(encap..inner) {
        E::fix(
            eh,
            &EncapFix {
                payload_len: end - inner,
                payload_sum: after,
            },
        );
    }
    ip_length(h, usize::from(o.l3), o.v6, end);
}

/// Writes the length of the IP datagram at `l3` ending at `end`, and for IPv4 its header
/// checksum.
#[inline(always)]
fn ip_length(b: &mut [u8], l3: usize, v6: bool, end: usize) {
    if v6 {
        let len = end.saturating_sub(l3 + ipv6::HEADER_LEN);
        write_be16(b, l3 + ipv6::field::LENGTH.start, len.min(0xffff) as u16);
    } else {
        let len = end.saturating_sub(l3);
        write_be16(b, l3 + ipv4::field::LENGTH.start, len.min(0xffff) as u16);
        ipv4_checksum(b, l3);
    }
}

/// Recomputes the header checksum of the IPv4 header at `l3` (options included).
#[inline(always)]
pub(crate) fn ipv4_checksum(b: &mut [u8], l3: usize) {
    match b
        .get_mut(l3..)
        .and_then(|h| h.first_chunk_mut::<{ ipv4::HEADER_LEN }>())
    {
        Some(h) if h[0] == ipv4::VER_IHL_PLAIN => {
            h[ipv4::field::CHECKSUM].fill(0);
            let c = csum::finish(csum::sum_header(h));
            h[ipv4::field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        }
        _ => ipv4_checksum_options(b, l3),
    }
}

/// [`ipv4_checksum`] of a header with options.
#[inline(never)]
fn ipv4_checksum_options(b: &mut [u8], l3: usize) {
    let ihl = b
        .get(l3)
        .map_or(ipv4::HEADER_LEN, |v| usize::from(v & 0x0f) * 4);
    write_be16(b, l3 + ipv4::field::CHECKSUM.start, 0);
    if let Some(h) = b.get(l3..l3 + ihl) {
        let c = csum::finish(csum::sum_header(h));
        write_be16(b, l3 + ipv4::field::CHECKSUM.start, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4 header of `ihl` words at offset 2 of a buffer, its checksum field garbage.
    fn header(ihl: u8) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i as u8).wrapping_mul(37) ^ 0x5a;
        }
        b[2] = 0x40 | ihl;
        b
    }

    #[test]
    fn ipv4_checksum_covers_the_header_ihl_gives() {
        for ihl in [5u8, 6, 10, 15] {
            let mut b = header(ihl);
            let after = b;
            ipv4_checksum(&mut b, 2);
            let len = usize::from(ihl) * 4;
            assert_eq!(
                csum::sum(&b[2..2 + len]),
                0xffff,
                "ihl {ihl}: does not sum to -0"
            );
            // Nothing but the checksum field changed.
            let field = 2 + ipv4::field::CHECKSUM.start..2 + ipv4::field::CHECKSUM.end;
            for i in (0..b.len()).filter(|i| !field.contains(i)) {
                assert_eq!(b[i], after[i], "ihl {ihl}: byte {i} changed");
            }
        }
    }

    /// An encapsulation whose `fix` writes the length and sum it is given into the first four
    /// bytes of its header slice: a slice shorter than that (a guard letting through offsets
    /// out of order) panics.
    struct Probe;

    impl Encap for Probe {
        const IP_PROTOCOL: u8 = 253;
        const MAX_HEADER_LEN: usize = 8;
        const NAME: &'static str = "probe";
        type Tunnel = crate::encap::TunnelKey;

        fn parse(_b: &[u8]) -> Result<crate::encap::EncapHeader, crate::PassReason> {
            Err(crate::PassReason::NotTcp)
        }

        fn fix(header: &mut [u8], fix: &EncapFix) {
            let len = u16::try_from(fix.payload_len).unwrap_or(u16::MAX);
            header[..2].copy_from_slice(&len.to_be_bytes());
            header[2..4].copy_from_slice(&fix.payload_sum.unwrap_or(0).to_be_bytes());
        }
    }

    /// "Offsets out of bounds are skipped, never a panic": every order of the offsets (each
    /// inside, at the end of, or past the buffer), with and without a tunnel and its checksum,
    /// every way of writing the TCP checksum.
    #[test]
    fn fix_headers_with_offsets_in_any_order_does_not_panic() {
        const AT: [u16; 5] = [0, 14, 34, 54, 70];
        let pseudo = PseudoHeader::new(&[198, 18, 0, 1], &[198, 18, 0, 2], 6);
        let mut b = [0u8; 64];
        let mut calls = 0u32;
        // Every choice of (l3, l4, payload, end) from `AT`: the digits of `n` in base 5.
        for n in 0..AT.len().pow(4) {
            let [l3, l4, payload, end] = [0, 1, 2, 3].map(|k| AT[n / AT.len().pow(k) % AT.len()]);
            for outer in [None, Some((0u16, 14u16, 34u16)), Some((14, 34, 14))] {
                for (v6, checksum) in [(false, None), (true, Some(2)), (false, Some(2))] {
                    let l = Layers {
                        outer: outer.map(|(o3, encap, inner)| OuterLayers {
                            l3: o3,
                            v6,
                            encap,
                            inner,
                            checksum,
                        }),
                        l3,
                        l4,
                        payload,
                        v6,
                    };
                    for sum in [None, Some(0x1234)] {
                        for tcp in [TcpSum::Full, TcpSum::Partial] {
                            fix_headers::<Probe>(&mut b, &l, end.into(), sum, tcp, &pseudo);
                            calls += 1;
                        }
                    }
                }
            }
        }
        assert_eq!(calls, 5 * 5 * 5 * 5 * 3 * 3 * 4);
    }

    #[test]
    fn ipv4_checksum_of_a_cut_header_does_not_panic() {
        // Options said, but the buffer ends inside them; or it ends before the header.
        let mut b = header(15);
        let before = b;
        ipv4_checksum(&mut b[..30], 2);
        assert_eq!(b[..12], before[..12]);
        assert_eq!(b[14..], before[14..]);
        ipv4_checksum(&mut b[..2], 2);
        ipv4_checksum(&mut [], 0);
    }
}
