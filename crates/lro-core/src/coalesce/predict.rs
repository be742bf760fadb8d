//! Header prediction: Van Jacobson's TCP fast path, applied to coalescing.
//!
//! When a segment starts, the engine keeps its head's headers (up to 160 bytes) as a template
//! with a mask of the bytes that may differ from frame to frame of the flow: IP lengths, IDs and
//! header checksums (inner and outer), TCP sequence and ACK numbers, window, checksum, urgent
//! pointer, FIN and PSH, the timestamp values, an encapsulation's checksum. A frame equal to the
//! template in every other byte (link header and tags, addresses, ports, TOS, TTL, DF, IHL,
//! extension headers, data offset, flags, option layout, encapsulation header) belongs to the
//! flow and has the head's shape, so its facts can be read at the template's offsets without
//! the parser and the flow lookup. Which template to try is proposed by a [`Probe`]: a hash
//! of the bytes where a frame of the common layout has its addresses and ports.
//!
//! Prediction does not decide anything itself: it builds the frame's [`Facts`] and hands them
//! to the same [rules](super::rules) the general path calls. What the template's equality
//! establishes (the flow, the layout, TTL/TOS/DF, extension headers) is given to the rules as
//! what it is (the head's values, in [`View`]), and everything the mask leaves free is read
//! from the frame.
//!
//! It covers every link kind and tag (in-line or stripped), IPv4 without options and IPv6 with
//! or without extension headers, tunnels, TCP without options or with the aligned timestamps,
//! data and pure ACKs, and checksums verified by the NIC, given as a CHECKSUM_COMPLETE sum
//! (checked from the sum and the header bytes, no payload read) or checked in software. A frame
//! of a template's flow whose TCP header has another length (SACK blocks on a pure ACK, the
//! reverse direction of a lossy transfer) is read as a variant of the template, but only a
//! decision to pass it alone is taken from that reading. A frame too short for the 32 bytes
//! of TCP header [`read`] takes (a pure ACK without options) has its TCP header read from a
//! zero-extended copy, and its padding left out when `Lro` absorbs it. A frame it cannot
//! decide (a mismatch, other padding, a bad checksum) goes through the general path.

use super::fixup::{Layers, OuterLayers};
use super::rules::Facts;
use super::storage::FlowState;
use crate::csum::{self, PseudoHeader};
use crate::encap::Encap;
use crate::meta::{LinkKind, RxChecksum, RxMeta};
use crate::parse::IpFacts;

use crate::wire::tcp::{self, TcpOptions};
use crate::wire::{ethernet, ipv4, ipv6};

/// Most header bytes a template holds: 160. An Ethernet/IPv6/TCP header with timestamps is 86
/// bytes; GRE with a key over IPv4 inside IPv4 and timestamps 94, IPv6 inside IPv6 134 (138
/// with a checksum); gretap over IPv6 carrying IPv6, 148, with two VLAN tags 156. Headers of
/// up to 64 or 128 bytes are compared in fixed blocks; longer ones out of line.
pub(crate) const LEN: usize = 160;

/// A head's headers and what of them a frame must repeat.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub(crate) struct Template {
    /// The head's first `len` bytes.
    bytes: [u8; LEN],
    /// `0xff` where a frame must equal `bytes`, `0` (or the FIN/PSH bits cleared) where it may
    /// differ. The path of a copied kind reads its kind's constant instead ([`Kind::mask`]),
    /// which this equals.
    mask: [u8; LEN],
    /// The head's header length; 0 when the flow is not predicted.
    pub(crate) len: u8,
    /// Where the headers are.
    shape: Shape,
    /// Link kind and stripped tag of the head's metadata (part of the flow key).
    link: LinkKind,
    /// Which of the common layouts `shape` is, asked once per frame (a byte, not the shape's
    /// seven fields). Here, in padding: at 448 bytes instead of 384 a template cost the
    /// general path 18 instructions more per frame (measured).
    kind: Kind,
    stripped: Option<u16>,
    /// The constant part of a predicted frame's pseudo-header and TCP-header sum (addresses,
    /// protocol, minus the IP header length, ports, option kinds) in native byte order, as
    /// [`Template::varying_words`] sums; see [`PayloadSum::Negated`].
    pub(crate) sum_base: u64,
}

/// The layouts header prediction has a copy of its path for, with their offsets as constants
/// (see `Engine::push_predicted`). [`Kind::shape`] pairs each with its layout, the only place
/// the two are paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Untagged Ethernet (or a stripped tag), IPv4 without options, TCP with the aligned
    /// timestamps: the most common layout.
    EthernetV4,
    /// The same with one VLAN tag in the frame.
    VlanV4,
    /// Untagged Ethernet, IPv6 without extension headers, TCP with the aligned timestamps.
    EthernetV6,
    /// A tunnel over untagged Ethernet and IPv4 (without options) whose encapsulation header
    /// is 8 bytes without a checksum (GRE with a key, the common GRE tunnel), carrying IPv4
    /// (without options) and TCP with the aligned timestamps. Only for engines with an
    /// encapsulation.
    TunnelV4,
    /// The same with a 4-byte encapsulation header (GRE without options).
    ShortTunnelV4,
    /// Any other layout: read with the template's offsets.
    Other,
}

impl Kind {
    /// The kinds with a copy of the path: all but [`Kind::Other`].
    const COPIED: [Kind; 5] = [
        Kind::EthernetV4,
        Kind::VlanV4,
        Kind::EthernetV6,
        Kind::TunnelV4,
        Kind::ShortTunnelV4,
    ];

    /// The layout of a kind with a copy (`None` for [`Kind::Other`]).
    pub(crate) const fn shape(self) -> Option<Shape> {
        match self {
            Kind::EthernetV4 => Some(Shape::with_timestamps(ethernet::HEADER_LEN, false)),
            Kind::VlanV4 => Some(Shape::with_timestamps(
                ethernet::HEADER_LEN + ethernet::vlan::LEN,
                false,
            )),
            Kind::EthernetV6 => Some(Shape::with_timestamps(ethernet::HEADER_LEN, true)),
            Kind::TunnelV4 | Kind::ShortTunnelV4 => match self.outer() {
                Some(o) => Some(Shape {
                    tunnel: true,
                    ..Shape::with_timestamps(o.inner as usize, false)
                }),
                None => None,
            },
            Kind::Other => None,
        }
    }

    /// The outer layers of a kind with a copy (`None` for a kind that is not tunnelled).
    const fn outer(self) -> Option<OuterLayers> {
        match self {
            Kind::TunnelV4 => Some(tunnel_v4(8)),
            Kind::ShortTunnelV4 => Some(tunnel_v4(4)),
            _ => None,
        }
    }

    /// The mask of a template of this kind's layout (zero for [`Kind::Other`]).
    const fn const_mask(self) -> [u8; LEN] {
        match self.shape() {
            Some(s) => layout_mask(s, self.outer()),
            None => [0; LEN],
        }
    }

    /// The mask of a template `t` of this kind: the kind's constant, or `t`'s own for
    /// [`Kind::Other`] (what [`Template::fill`] computed for its layout).
    #[inline(always)]
    fn mask(self, t: &Template) -> &[u8; LEN] {
        match self {
            Kind::EthernetV4 => &MASK_ETHERNET_V4,
            Kind::VlanV4 => &MASK_VLAN_V4,
            Kind::EthernetV6 => &MASK_ETHERNET_V6,
            Kind::TunnelV4 => &MASK_TUNNEL_V4,
            Kind::ShortTunnelV4 => &MASK_SHORT_TUNNEL_V4,
            Kind::Other => &t.mask,
        }
    }

    /// The kind whose layout is `shape` with the outer layers `outer`.
    fn of(shape: Shape, outer: Option<OuterLayers>) -> Kind {
        Kind::COPIED
            .into_iter()
            .find(|k| k.shape() == Some(shape) && k.outer() == outer)
            .unwrap_or(Kind::Other)
    }
}

const _: () = assert!(core::mem::size_of::<Template>() == 384);

impl core::fmt::Debug for Template {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Template")
            .field("len", &self.len)
            .field("bytes", &&self.bytes[..usize::from(self.len)])
            .finish_non_exhaustive()
    }
}

/// A frame's payload sum, in the form its source has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PayloadSum {
    /// Not computed: a hardware-verified frame under `Partial` output, which never needs it.
    None,
    /// The folded sum (the general path; prediction with software verification).
    Folded(u16),
    /// Header prediction's, for a frame whose TCP checksum is known good: pseudo header, TCP
    /// header (checksum field included) and payload sum to -0, so the payload's sum is the
    /// negation of the headers'. Their varying words (given, see `Template::varying_words`) are
    /// added to the segment's accumulator as they are, the constant ones
    /// ([`Template::sum_base`]) once per frame at delivery, and the result folded once.
    Negated(u64),
}

/// Where a predicted frame's headers are: the template's layout, as the predicted path reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Offset of the (inner) IP header.
    l3: usize,
    /// Offset of the TCP header.
    l4: usize,
    /// Offset of the payload (the header length).
    payload: usize,
    /// Inner IPv6?
    v6: bool,
    /// Aligned timestamp option?
    ts: bool,
    /// Bytes compared: up to the last byte the mask keeps (the timestamp values at the end of
    /// the header are free, so they are not read).
    cmp: usize,
    /// A tunnel's outer headers are in the layout.
    tunnel: bool,
}

impl Shape {
    /// The layout of an IP header at `l3` (IPv4 without options, or IPv6 without extension
    /// headers) and TCP with the aligned timestamps, not tunnelled.
    const fn with_timestamps(l3: usize, v6: bool) -> Shape {
        let l4 = l3
            + if v6 {
                ipv6::HEADER_LEN
            } else {
                ipv4::HEADER_LEN
            };
        Shape {
            l3,
            l4,
            payload: l4 + tcp::HEADER_LEN_TS,
            v6,
            ts: true,
            cmp: l4 + compared_tcp_bytes(true),
            tunnel: false,
        }
    }

    #[inline(always)]
    pub(crate) fn l3(self) -> usize {
        self.l3
    }
    #[inline(always)]
    pub(crate) fn l4(self) -> usize {
        self.l4
    }
    #[inline(always)]
    pub(crate) fn payload(self) -> usize {
        self.payload
    }
    #[inline(always)]
    pub(crate) fn v6(self) -> bool {
        self.v6
    }
    #[inline(always)]
    pub(crate) fn ts(self) -> bool {
        self.ts
    }
    #[inline(always)]
    pub(crate) fn cmp(self) -> usize {
        self.cmp
    }
    #[inline(always)]
    pub(crate) fn tunnel(self) -> bool {
        self.tunnel
    }
}

/// Where header prediction looks for a frame's flow before anything of the frame is parsed: a
/// multiplicative hash of the bytes where the addresses and ports are in one layout (the newest
/// predicted flow's; the flows of one link usually share it), indexing a table of entry numbers
/// kept up to date when a segment starts and when the general path finds a flow. The probe only
/// proposes: the entry's template decides, so a collision, a stale entry or another layout costs
/// one template compare and the general path, never a wrong merge.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Probe {
    l3: usize,
    l4: usize,
    v6: bool,
    /// Whether the layout is a data flow's (a segment headed by a payload), not only the first
    /// template's or the initial guess.
    from_data: bool,
    /// An odd multiplier from the hash seed.
    mul: u64,
}

impl Probe {
    /// A probe of the untagged Ethernet IPv4 layout, until the first template's.
    pub(crate) const fn new(mul: u64) -> Self {
        Self {
            l3: 14,
            l4: 34,
            v6: false,
            from_data: false,
            mul,
        }
    }

    /// The probe to use once a segment of layout `shape` starts (`data`: headed by a frame
    /// with payload). Prediction follows the layout of data flows: a segment headed by a pure
    /// ACK (the reverse direction of a bulk flow, typically) does not change it, unless no data
    /// flow has set it yet (so that the first segments of a link other than untagged Ethernet
    /// IPv4, such as IPoIB's, are found whatever their head).
    #[inline(always)]
    pub(crate) fn after_start(self, shape: Shape, data: bool) -> Self {
        if data || !self.from_data {
            Self {
                l3: shape.l3,
                l4: shape.l4,
                v6: shape.v6,
                from_data: data,
                mul: self.mul,
            }
        } else {
            self
        }
    }

    /// The probe with another multiplier.
    pub(crate) fn with_multiplier(self, mul: u64) -> Self {
        Self { mul, ..self }
    }

    /// Whether a template of this layout is found by this probe.
    #[inline(always)]
    pub(crate) fn covers(&self, shape: Shape) -> bool {
        self.l3 == shape.l3 && self.l4 == shape.l4 && self.v6 == shape.v6
    }

    /// The candidate index of a frame in a table of `n` (a power of two) entries: a hash of
    /// the 12 bytes before the end of the ports, both IPv4 addresses and the ports (for IPv6,
    /// the low half of the destination address and the ports).
    #[inline(always)]
    pub(crate) fn index(&self, bytes: &[u8], n: usize) -> usize {
        // `l4` is at least 20 for every layout a template covers (and 0 before the first).
        let k = bytes
            .get(self.l4.wrapping_sub(8)..)
            .and_then(|b| b.first_chunk::<12>())
            .copied()
            .unwrap_or([0; 12]);
        let addresses = u64::from_ne_bytes([k[0], k[1], k[2], k[3], k[4], k[5], k[6], k[7]]);
        let ports = u32::from_ne_bytes([k[8], k[9], k[10], k[11]]);
        let x = (addresses ^ u64::from(ports)).wrapping_mul(self.mul);
        (x >> 40) as usize & (n - 1)
    }
}

/// Clears `n` bytes of mask `m` from `at` (bytes a frame of the flow may change).
const fn free(m: &mut [u8; LEN], at: usize, n: usize) {
    let mut i = at;
    while i < at + n && i < LEN {
        m[i] = 0;
        i += 1;
    }
}

/// Frees the varying bytes of an IP header at `at`: IPv6's payload length; IPv4's total
/// length, identification and header checksum.
const fn free_ip(m: &mut [u8; LEN], at: usize, v6: bool) {
    if v6 {
        free(m, at + ipv6::field::LENGTH.start, 2);
    } else {
        free(m, at + ipv4::field::LENGTH.start, 4);
        free(m, at + ipv4::field::CHECKSUM.start, 2);
    }
}

/// The mask of a template of layout `shape` with the outer layers `outer`: every header byte
/// kept but the (inner) IP header's varying ones, TCP's sequence and ACK numbers, window,
/// checksum and urgent pointer, the timestamp values, FIN and PSH, and for a tunnel the outer
/// IP header's varying bytes and the encapsulation checksum; zero past the header, so that a
/// comparison of whole blocks ignores those bytes.
const fn layout_mask(shape: Shape, outer: Option<OuterLayers>) -> [u8; LEN] {
    let mut m = [0u8; LEN];
    let mut i = 0;
    while i < shape.payload && i < LEN {
        m[i] = 0xff;
        i += 1;
    }
    free_ip(&mut m, shape.l3, shape.v6);
    let l4 = shape.l4;
    free(&mut m, l4 + tcp::field::SEQ_NUM.start, 8);
    free(&mut m, l4 + tcp::field::WINDOW.start, 6);
    if shape.ts {
        free(&mut m, l4 + tcp::field::TS_VAL.start, 8);
    }
    if l4 + tcp::field::FLAGS < LEN {
        m[l4 + tcp::field::FLAGS] = !(tcp::flags::FIN | tcp::flags::PSH);
    }
    if let Some(o) = outer {
        free_ip(&mut m, o.l3 as usize, o.v6);
        if let Some(c) = o.checksum {
            free(&mut m, o.encap as usize + c as usize, 2);
        }
    }
    m
}

/// The outer layers of [`Kind::TunnelV4`] and [`Kind::ShortTunnelV4`]: IPv4 after an
/// untagged Ethernet header, an encapsulation header of `len` bytes without a checksum after
/// it, the inner IP header after that.
const fn tunnel_v4(len: usize) -> OuterLayers {
    OuterLayers {
        l3: ethernet::HEADER_LEN as u16,
        v6: false,
        encap: (ethernet::HEADER_LEN + ipv4::HEADER_LEN) as u16,
        inner: (ethernet::HEADER_LEN + ipv4::HEADER_LEN + len) as u16,
        checksum: None,
    }
}

/// The masks of the copied kinds, shared by every template of the kind: the comparison of a
/// frame reads its template's bytes and a mask that stays in cache, not a mask of its own
/// (with 64 flows interleaved, two cache lines fewer per frame).
static MASK_ETHERNET_V4: [u8; LEN] = Kind::EthernetV4.const_mask();
static MASK_VLAN_V4: [u8; LEN] = Kind::VlanV4.const_mask();
static MASK_ETHERNET_V6: [u8; LEN] = Kind::EthernetV6.const_mask();
static MASK_TUNNEL_V4: [u8; LEN] = Kind::TunnelV4.const_mask();
static MASK_SHORT_TUNNEL_V4: [u8; LEN] = Kind::ShortTunnelV4.const_mask();

/// TCP header bytes the template compares: up to the flags, or up to the timestamp option's
/// kinds (the window, checksum, urgent pointer and timestamp values after them are free).
const fn compared_tcp_bytes(ts: bool) -> usize {
    if ts {
        tcp::field::TS_KINDS.end
    } else {
        tcp::field::FLAGS + 1
    }
}

impl Template {
    /// No template: the flow is not predicted.
    pub(crate) const EMPTY: Self = Self {
        bytes: [0; LEN],
        mask: [0; LEN],
        len: 0,
        shape: Shape {
            l3: 0,
            l4: 0,
            payload: 0,
            v6: false,
            ts: false,
            cmp: 0,
            tunnel: false,
        },
        link: LinkKind::Ethernet,
        stripped: None,
        sum_base: 0,
        kind: Kind::Other,
    };

    /// Makes the template empty: the flow is not predicted.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether the flow is predicted (the template is not empty).
    #[inline(always)]
    pub(crate) fn is_predicted(&self) -> bool {
        self.len != 0
    }

    /// Where the template's headers are.
    #[inline(always)]
    pub(crate) fn layout(&self) -> Shape {
        self.shape
    }

    /// Which common layout [`Template::layout`] is (unused on bare metal, where prediction
    /// has no copies for them).
    #[inline(always)]
    #[cfg_attr(target_os = "none", allow(dead_code))]
    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    /// Makes this the template of a head (`bytes`, laid out as `l` says, of the flow whose
    /// pseudo header is `pseudo`, with `options`, arriving with `meta`); empty when header
    /// prediction does not cover the layout. Written in place: a template is 384 bytes.
    pub(crate) fn fill(
        &mut self,
        bytes: &[u8],
        l: &Layers,
        pseudo: &PseudoHeader,
        options: TcpOptions,
        meta: &RxMeta,
    ) {
        self.clear();
        let (l3, l4, hdr) = (usize::from(l.l3), usize::from(l.l4), l.header_len());
        let ts = match options {
            TcpOptions::None if hdr - l4 == tcp::HEADER_LEN => false,
            TcpOptions::Timestamp { .. } if hdr - l4 == tcp::HEADER_LEN_TS => true,
            _ => return,
        };
        let Some(head) = bytes.get(..hdr) else {
            return;
        };
        // IPv4 options (never merged) anywhere in the stack: not predicted.
        let plain_v4 = |at: usize, v6: bool| v6 || head.get(at) == Some(&ipv4::VER_IHL_PLAIN);
        if hdr > LEN
            || !plain_v4(l3, l.v6)
            || l.outer.is_some_and(|o| !plain_v4(usize::from(o.l3), o.v6))
        {
            return;
        }
        self.bytes[..hdr].copy_from_slice(head);
        // Compared up to the last kept byte: the flags, or the timestamp option's kinds.
        self.len = hdr as u8;
        self.shape = Shape {
            l3,
            l4,
            payload: hdr,
            v6: l.v6,
            ts,
            cmp: l4 + compared_tcp_bytes(ts),
            tunnel: l.outer.is_some(),
        };
        self.link = meta.link;
        self.stripped = meta.vlan_stripped;
        self.kind = Kind::of(self.shape, l.outer);
        // A copied kind's mask is its constant, which its copy of the path reads (another
        // template's lines are not read per frame); the template keeps a copy for the paths
        // that read any layout (pure ACKs without options, variants). Bare metal has no
        // copies: there every template computes its own, and the constants are not linked
        // (800 bytes of flash).
        self.mask = if cfg!(target_os = "none") || self.kind == Kind::Other {
            layout_mask(self.shape, l.outer)
        } else {
            *self.kind.mask(self)
        };
        // The constant words of the pseudo header and the TCP header, in native byte order:
        // the address sum and protocol, minus the bytes of the IP header that the length word
        // counts but the TCP length does not (its ones' complement), the ports, the option
        // kinds.
        let ip_hdr = if l.v6 {
            l4 - l3 - ipv6::HEADER_LEN
        } else {
            l4 - l3
        };
        self.sum_base = u64::from(pseudo.base().to_be())
            + u64::from((!(ip_hdr as u16)).to_be())
            + ne32(head, l4);
        if ts {
            self.sum_base += ne32(head, l4 + tcp::field::TS_KINDS.start);
        }
    }

    /// Whether `bytes` (arriving with `meta`) repeats the template in every byte the mask
    /// keeps. Compares 16 bytes at a time: the first 64 bytes (96 or 128 for a longer header)
    /// when the frame has them, the mask being zero past the header; otherwise four, six or
    /// eight blocks of the compared length, the last ones overlapping the first so that no
    /// byte past it is read.
    #[inline(always)]
    pub(crate) fn matches(&self, bytes: &[u8], meta: &RxMeta, shape: Shape, kind: Kind) -> bool {
        // A constant when the caller's copy is of a known kind; the template's otherwise.
        let mask = kind.mask(self);
        // Between 16 and LEN for any template `fill` made (an empty one is
        // never asked); out of range, `block` reads zeros and the frame does not match.
        let n = shape.cmp();
        if meta.link != self.link || meta.vlan_stripped != self.stripped {
            return false;
        }
        #[inline(always)]
        fn block(s: &[u8], at: usize) -> u128 {
            match s.get(at..at + 16) {
                Some(w) => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(w);
                    u128::from_ne_bytes(a)
                }
                None => 0,
            }
        }
        let diff = |b: &[u8], at: usize| (block(b, at) ^ block(&self.bytes, at)) & block(mask, at);
        // `K` blocks of a slice of the compared length (at least 16): whole blocks from the
        // start, the last ones moved back to end at the compared length, so that no byte past
        // it is read.
        let blocks = |b: &[u8], k: usize| {
            let mut d = 0;
            for i in 0..k {
                d |= diff(b, (16 * i).min(b.len() - 16));
            }
            d
        };
        // The first 64, 96 or 128 bytes when the frame has them (the mask is zero past the
        // header); otherwise only the compared bytes (a pure ACK without options, a tunnel's
        // long header).
        let short = |k: usize| match bytes.get(..n) {
            Some(b) if n >= 16 => blocks(b, k) == 0,
            _ => false,
        };
        // Every block of the first 64, 96 or 128 bytes.
        let whole = |b: &[u8]| {
            let mut d = 0;
            for at in (0..b.len()).step_by(16) {
                d |= diff(b, at);
            }
            d == 0
        };
        if n <= 64 {
            match bytes.first_chunk::<64>() {
                Some(b) => whole(b),
                None => short(4),
            }
        } else if n <= 96 {
            // A tunnel over IPv4 (GRE with a key over Ethernet: 76 bytes to the TCP flags, 86
            // to the timestamps' kinds; 80 and 90 with a VLAN tag or a GRE checksum).
            match bytes.first_chunk::<96>() {
                Some(b) => whole(b),
                None => short(6),
            }
        } else if n <= 128 {
            match bytes.first_chunk::<128>() {
                Some(b) => whole(b),
                None => short(8),
            }
        } else {
            self.matches_long(bytes, n)
        }
    }

    /// Whether `bytes` has another TCP data offset than the template (where the template has
    /// its TCP header): the first test of a variant of the template, a frame of the flow whose
    /// TCP header has another length (SACK blocks on a pure ACK). Asked of the frames header
    /// prediction did not read; most have the template's data offset (another flow's
    /// template).
    #[inline(always)]
    pub(crate) fn data_offset_differs(&self, bytes: &[u8], shape: Shape) -> bool {
        let at = shape.l4() + tcp::field::DATA_OFF;
        match (bytes.get(at), self.bytes.get(at)) {
            (Some(b), Some(t)) => b >> 4 != t >> 4,
            _ => false,
        }
    }

    /// [`Template::matches`] but for the TCP data offset: the frame is the template's in
    /// every other compared byte. Compares a copy of the frame's first bytes with the
    /// template's data offset put in.
    #[inline(always)]
    pub(crate) fn matches_but_data_offset(
        &self,
        bytes: &[u8],
        meta: &RxMeta,
        shape: Shape,
    ) -> bool {
        let at = shape.l4() + tcp::field::DATA_OFF;
        let n = bytes.len().min(LEN);
        let mut copy = [0u8; LEN];
        copy[..n].copy_from_slice(&bytes[..n]);
        match (copy.get_mut(at), self.bytes.get(at)) {
            (Some(b), Some(t)) => *b = (*b & 0x0f) | (*t & 0xf0),
            _ => return false,
        }
        self.matches(&copy[..n], meta, shape, Kind::Other)
    }

    /// [`Template::matches`] for a header longer than 128 bytes (IPv6 in IPv6 GRE, gretap over
    /// IPv6): out of line, so that the common lengths' comparison stays small.
    #[cold]
    #[inline(never)]
    fn matches_long(&self, bytes: &[u8], n: usize) -> bool {
        let Some(b) = bytes.get(..n) else {
            return false;
        };
        let mut d = 0;
        for i in 0..LEN / 16 {
            let at = (16 * i).min(n - 16);
            let block = |s: &[u8]| match s.get(at..at + 16) {
                Some(w) => {
                    let mut a = [0u8; 16];
                    a.copy_from_slice(w);
                    u128::from_ne_bytes(a)
                }
                None => 0,
            };
            d |= (block(b) ^ block(&self.bytes)) & block(&self.mask);
        }
        d == 0
    }

    /// The words of a predicted frame's pseudo header and TCP header that vary from frame to
    /// frame (the IP length word `len`; sequence and ACK numbers, data offset, flags, window,
    /// checksum, urgent pointer; timestamp values), summed as loaded: native byte order, 32
    /// bits at a time (2^16 = 1 in ones'-complement arithmetic), which gives the byte-swapped
    /// sum on a little-endian host (RFC 1071 section 2 (B)). `t` is the TCP header.
    #[inline(always)]
    fn varying_words(len: [u8; 2], t: &[u8; tcp::HEADER_LEN_TS], ts: bool) -> u64 {
        let w = |at: usize| u64::from(u32::from_ne_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]]));
        let acc = u64::from(u16::from_ne_bytes(len)) + w(4) + w(8) + w(12) + w(16);
        if ts {
            acc + w(tcp::field::TS_VAL.start) + w(tcp::field::TS_ECR.start)
        } else {
            acc
        }
    }
}

/// A 32-bit word of `b` at `at` in native byte order, widened for an unfolded sum (zero when out
/// of bounds, never after [`Template::matches`]).
#[inline(always)]
fn ne32(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 4) {
        Some(w) => u64::from(u32::from_ne_bytes([w[0], w[1], w[2], w[3]])),
        None => 0,
    }
}

/// The payload sum a native-order unfolded sum of header words stands for (its negation).
#[inline(always)]
pub(crate) fn negated_sum(acc: u64) -> u16 {
    csum::finish(u16::from_be(csum::fold(acc)))
}

/// A frame [`Template::matches`] accepted, read at the template's offsets: header
/// prediction's [`Facts`]. What the template's equality establishes reads as the head's own
/// values (TTL, TOS, DF, the option layout, no IP options, no padding, extension headers equal),
/// so the rules' checks of those fold away.
pub(crate) struct View<'a, E, const V: bool> {
    /// The layout.
    shape: Shape,
    /// The TCP header (with the timestamps, when the layout has them).
    t: &'a [u8; tcp::HEADER_LEN_TS],
    /// The (inner) IP header's first 8 bytes.
    ip: &'a [u8; 8],
    /// The outer IP header's ID.
    outer_id: u16,
    payload_len: u32,
    /// `V`, a header of another length than the template's: its options, classified from its
    /// own bytes (everything else about the header is the template's).
    variant: TcpOptions,
    /// The flow's state (its head is the template's).
    pub(crate) e: &'a FlowState,
    encap: core::marker::PhantomData<E>,
}

impl<E: Encap, const V: bool> Facts for View<'_, E, V> {
    #[inline(always)]
    fn seq(&self) -> u32 {
        be32(self.t, tcp::field::SEQ_NUM.start)
    }
    #[inline(always)]
    fn ack(&self) -> u32 {
        be32(self.t, tcp::field::ACK_NUM.start)
    }
    #[inline(always)]
    fn flags_word(&self) -> u32 {
        be32(self.t, tcp::field::FLAG_WORD.start)
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.t[tcp::field::FLAGS]
    }
    #[inline(always)]
    fn window(&self) -> u16 {
        u16::from_be_bytes([self.t[14], self.t[15]])
    }
    #[inline(always)]
    fn payload_len(&self) -> u32 {
        self.payload_len
    }
    #[inline(always)]
    fn options(&self) -> TcpOptions {
        if V {
            self.variant
        } else if self.shape.ts() {
            TcpOptions::Timestamp {
                val: be32(self.t, tcp::field::TS_VAL.start),
                ecr: be32(self.t, tcp::field::TS_ECR.start),
            }
        } else {
            TcpOptions::None
        }
    }
    #[inline(always)]
    fn ip(&self) -> IpFacts {
        let (h, v6) = (&self.e.ip, self.shape.v6());
        IpFacts {
            ttl: h.ttl,
            tos: h.tos,
            df: h.df,
            id: if v6 {
                0
            } else {
                u16::from_be_bytes([self.ip[4], self.ip[5]])
            },
            options: false,
            v6,
        }
    }
    #[inline(always)]
    fn outer(&self) -> Option<IpFacts> {
        let h = &self.e.outer;
        let outer = if E::ENABLED {
            self.e.layers.outer
        } else {
            None
        };
        outer.map(|o| IpFacts {
            ttl: h.ttl,
            tos: h.tos,
            df: h.df,
            id: self.outer_id,
            options: false,
            v6: o.v6,
        })
    }
    #[inline(always)]
    fn ip_options(&self) -> bool {
        // The template covers only headers without options.
        false
    }
    #[inline(always)]
    fn ip_fields_equal(&self, _e: &FlowState) -> bool {
        // Inside the compared header bytes (the rules ask only about the template's own entry).
        true
    }
    #[inline(always)]
    fn ip_ids(&self) -> (Option<u16>, Option<u16>) {
        let v6 = self.shape.v6();
        let inner = (!v6).then(|| u16::from_be_bytes([self.ip[4], self.ip[5]]));
        let outer = match self.e.layers.outer {
            Some(o) if E::ENABLED && self.shape.tunnel() && !o.v6 => Some(self.outer_id),
            _ => None,
        };
        (inner, outer)
    }
    #[inline(always)]
    fn encap(&self) -> Result<(), crate::PassReason> {
        // The encapsulation header is the head's (but for its checksum): the head's merged.
        Ok(())
    }
    #[inline(always)]
    fn padded(&self) -> bool {
        false
    }
    #[inline(always)]
    fn padding_neutral(&self) -> bool {
        true
    }
    #[inline(always)]
    fn options_equal(&self) -> bool {
        // The mask keeps the option layout of a header of the template's length; the
        // timestamp values the rule compares itself.
        !V
    }
    #[inline(always)]
    fn extensions_equal(&self) -> bool {
        // Inside the compared header bytes.
        true
    }
    #[inline(always)]
    fn encap_may_merge(&self) -> bool {
        // The mask kept every byte of the encapsulation header but its checksum, and two
        // headers equal in those merge (the contract of `Encap::may_merge`).
        true
    }
}

#[inline(always)]
fn be32(t: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]])
}

/// A frame header prediction read: its facts, payload offset, datagram end and payload sum.
pub(crate) struct Predicted<'a, E, const V: bool> {
    pub(crate) view: View<'a, E, V>,
    pub(crate) payload: u32,
    pub(crate) ip_end: u32,
    pub(crate) sum: PayloadSum,
}

/// Reads a frame that [`Template::matches`] accepted for the flow `e`. `None` when the general
/// path must decide: padding, lengths that do not fit the
/// frame, a checksum that does not verify, software verification switched off. Changes
/// nothing.
///
/// The TCP header is read as 32 bytes from `bytes`; or, with `S`, taken from `tcp`, the
/// zero-extended copy of the header of a frame that ends within those 32 bytes (a pure ACK
/// without options; `bytes` then ends where its datagram does, padding left out). `S` is a
/// constant so that the common instance is compiled without the choice: as an `Option` alone
/// it cost the predicted path 5 to 10 instructions per frame, measured.
#[inline(always)]
pub(crate) fn read<'a, E: Encap, const V: bool, const S: bool>(
    bytes: &'a [u8],
    tcp: Option<&'a [u8; tcp::HEADER_LEN_TS]>,
    meta: &RxMeta,
    e: &'a FlowState,
    shape: Shape,
    verify: bool,
    want_sum: bool,
) -> Option<Predicted<'a, E, V>> {
    let l = &e.layers;
    let (l3, l4, payload) = (shape.l3(), shape.l4(), shape.payload());
    // The TCP header, timestamps included when the layout has them (without them the
    // timestamp bytes may run into the payload, or into the copy's zeros: read but unused).
    let t: &[u8; tcp::HEADER_LEN_TS] = if S {
        tcp?
    } else {
        bytes.get(l4..)?.first_chunk()?
    };
    // The length word of the (inner) IP header, and where its datagram ends.
    let ip: &[u8; 8] = bytes.get(l3..)?.first_chunk()?;
    let (len_word, end) = datagram_end(ip, l3, shape.v6());
    // No padding (a padded frame's trim is the general path's), the datagram inside the frame,
    // a tunnel's inner and outer datagrams ending together.
    if end != bytes.len() {
        return None;
    }
    // A header of the template's length is read as the template lays it out; one of another
    // length (`V`, [`Template::matches_but_data_offset`]: SACK blocks on a pure ACK, mostly)
    // is a variant, with its own options and payload offset.
    let (payload, variant) = if !V {
        if end < payload {
            return None;
        }
        (payload, TcpOptions::None)
    } else {
        let hlen = usize::from(t[tcp::field::DATA_OFF] >> 4) * 4;
        if l4 + hlen == payload || hlen < tcp::HEADER_LEN || l4 + hlen > end {
            return None;
        }
        let options = bytes.get(l4 + tcp::HEADER_LEN..l4 + hlen)?;
        (l4 + hlen, TcpOptions::classify(options))
    };
    let outer = if E::ENABLED && shape.tunnel() {
        l.outer
    } else {
        None
    };
    let outer_id = match &outer {
        Some(o) => {
            let at = usize::from(o.l3);
            let oh: &[u8; 8] = bytes.get(at..)?.first_chunk()?;
            if datagram_end(oh, at, o.v6).1 != end {
                return None;
            }
            if o.v6 {
                0
            } else {
                u16::from_be_bytes([oh[4], oh[5]])
            }
        }
        None => 0,
    };
    // The template's sums assume its header length: a variant's is not asked for.
    let want_sum = want_sum && !V;
    let negated = || PayloadSum::Negated(Template::varying_words(len_word, t, shape.ts()));
    let sum = match meta.checksum {
        RxChecksum::Verified => {
            if want_sum {
                negated()
            } else {
                PayloadSum::None
            }
        }
        RxChecksum::Complete(total) => {
            complete_ok(bytes, meta, e, shape, total, (end - l4) as u32)?;
            if want_sum {
                negated()
            } else {
                PayloadSum::None
            }
        }
        RxChecksum::None => {
            if !verify {
                return None;
            }
            PayloadSum::Folded(software_ok(bytes, e, end)?)
        }
    };
    // Software verification gives a sum as it checks: a variant's is dropped (the checks
    // above cover the whole segment whatever its header length).
    let sum = if V { PayloadSum::None } else { sum };
    Some(Predicted {
        view: View {
            shape,
            t,
            ip,
            outer_id,
            payload_len: (end - payload) as u32,
            variant,
            e,
            encap: core::marker::PhantomData,
        },
        payload: payload as u32,
        ip_end: end as u32,
        sum,
    })
}

/// The length word of the IP header at `l3` whose first 8 bytes are `ip`, and where its
/// datagram ends (IPv4: the total length counts the header; IPv6: the payload length does not).
#[inline(always)]
pub(crate) fn datagram_end(ip: &[u8; 8], l3: usize, v6: bool) -> ([u8; 2], usize) {
    if v6 {
        let w = [ip[4], ip[5]];
        (
            w,
            l3 + ipv6::HEADER_LEN + usize::from(u16::from_be_bytes(w)),
        )
    } else {
        let w = [ip[2], ip[3]];
        (w, l3 + usize::from(u16::from_be_bytes(w)))
    }
}

/// The checks of a CHECKSUM_COMPLETE frame, from the NIC's sum and the header bytes (Linux
/// `skb_gro_checksum_validate` with `CHECKSUM_COMPLETE`, `ip_fast_csum` for IPv4 headers):
/// IPv4 header checksums, the encapsulation's checksum, the TCP checksum.
#[inline(always)]
fn complete_ok(
    bytes: &[u8],
    meta: &RxMeta,
    e: &FlowState,
    shape: Shape,
    total: u16,
    tcp_len: u32,
) -> Option<()> {
    // The template's layout (the flow's layers; constants on the common layouts' paths).
    let l3 = shape.l3();
    let start = meta.link.header_len();
    // The sum of what the NIC summed ahead of the TCP header.
    let before = if !shape.tunnel() && !shape.v6() && start <= l3 {
        // A valid IPv4 header (the template's have no options) sums to -0, which adds
        // nothing: what precedes the TCP header sums as the in-line tags before it.
        let h = bytes.get(l3..)?.first_chunk::<{ ipv4::HEADER_LEN }>()?;
        if !csum::is_zero(csum::sum_header(h)) {
            return None;
        }
        if start < l3 {
            csum::sum(bytes.get(start..l3)?)
        } else {
            0
        }
    } else {
        complete_before(bytes, &e.layers, start, total)?
    };
    // The TCP segment's sum (the NIC's less what precedes it) and its pseudo header's make
    // -0: added unfolded, folded once.
    let acc = u64::from(total) + u64::from(!before) + e.pseudo.acc(tcp_len);
    csum::is_zero(csum::fold(acc)).then_some(())
}

/// [`complete_ok`]'s sum of what precedes the TCP header for IPv6 and tunnels, with their IPv4
/// header checksums and the encapsulation's checksum checked.
#[inline(never)]
fn complete_before(bytes: &[u8], l: &Layers, start: usize, total: u16) -> Option<u16> {
    let v4_ok = |at: usize| {
        bytes
            .get(at..at + ipv4::HEADER_LEN)
            .is_some_and(|h| csum::is_zero(csum::sum_header(h)))
    };
    if (!l.v6 && !v4_ok(usize::from(l.l3)))
        || l.outer.is_some_and(|o| !o.v6 && !v4_ok(usize::from(o.l3)))
    {
        return None;
    }
    if let Some(o) = &l.outer {
        if o.checksum.is_some() {
            let before = csum::sum(bytes.get(start..usize::from(o.encap))?);
            if !csum::is_zero(csum::sub(total, before)) {
                return None;
            }
        }
    }
    Some(csum::sum(bytes.get(start..usize::from(l.l4))?))
}

/// The checks of a frame nobody verified, in software (Linux `skb_gro_checksum_validate`,
/// `ip_fast_csum`): IPv4 header checksums, the encapsulation's checksum, the TCP checksum.
/// Returns the payload's sum.
#[inline(never)]
fn software_ok(bytes: &[u8], e: &FlowState, end: usize) -> Option<u16> {
    let l = &e.layers;
    let (l3, l4, payload) = (usize::from(l.l3), usize::from(l.l4), l.header_len());
    let v4_ok = |at: usize| {
        bytes
            .get(at..at + ipv4::HEADER_LEN)
            .is_some_and(|h| csum::is_zero(csum::sum_header(h)))
    };
    if (!l.v6 && !v4_ok(l3)) || l.outer.is_some_and(|o| !o.v6 && !v4_ok(usize::from(o.l3))) {
        return None;
    }
    let payload_sum = csum::sum(bytes.get(payload..end)?);
    let tcp_ok = csum::is_zero(csum::add(
        csum::add(
            csum::fold(e.pseudo.acc((end - l4) as u32)),
            csum::sum_header(&bytes[l4..payload]),
        ),
        payload_sum,
    ));
    if !tcp_ok {
        return None;
    }
    if let Some(o) = &l.outer {
        if o.checksum.is_some() {
            let encap = usize::from(o.encap);
            let s = csum::add_at_offset(
                csum::sum(&bytes[encap..payload]),
                payload_sum,
                payload - encap,
            );
            if !csum::is_zero(s) {
                return None;
            }
        }
    }
    Some(payload_sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layout with the aligned timestamps, as `Template::fill` describes a head's: IP at
    /// `l3`, TCP at `l4`, a 32-byte TCP header; `tunnel` when outer layers are present.
    fn ts_layout(l3: usize, l4: usize, v6: bool, tunnel: bool) -> Shape {
        Shape {
            l3,
            l4,
            payload: l4 + 32,
            v6,
            ts: true,
            // Up to the end of the timestamp option's kinds.
            cmp: l4 + 24,
            tunnel,
        }
    }

    /// The outer layers of IPv4 over untagged Ethernet and an `encap_len`-byte header
    /// without a checksum.
    fn outer_v4(encap_len: u16) -> OuterLayers {
        OuterLayers {
            l3: 14,
            v6: false,
            encap: 34,
            inner: 34 + encap_len,
            checksum: None,
        }
    }

    /// Each common layout, written out by its offsets, gets the kind whose copy of the path
    /// reads it (a wrong pairing would send it to the any-layout path: slower, not wrong),
    /// and nothing else does.
    #[test]
    fn common_layouts_get_their_copy() {
        let cases = [
            (ts_layout(14, 34, false, false), None, Kind::EthernetV4),
            (ts_layout(18, 38, false, false), None, Kind::VlanV4),
            (ts_layout(14, 54, true, false), None, Kind::EthernetV6),
            (
                ts_layout(42, 62, false, true),
                Some(outer_v4(8)),
                Kind::TunnelV4,
            ),
            (
                ts_layout(38, 58, false, true),
                Some(outer_v4(4)),
                Kind::ShortTunnelV4,
            ),
        ];
        for (shape, outer, kind) in cases {
            assert_eq!(Kind::of(shape, outer), kind, "{shape:?}");
            assert_eq!(kind.shape(), Some(shape));
            // Its shared mask is the one the template would compute for itself.
            let t = Template::EMPTY;
            assert_eq!(kind.mask(&t), &layout_mask(shape, outer), "{kind:?}");
        }
        let other = [
            // Two tags, IPv6 behind a tag, no timestamps, a tunnel layout without its outer
            // layers or with another header length, outer layers on a plain layout.
            (ts_layout(22, 42, false, false), None),
            (ts_layout(18, 58, true, false), None),
            (
                Shape {
                    payload: 54,
                    ts: false,
                    cmp: 34 + 14,
                    ..ts_layout(14, 34, false, false)
                },
                None,
            ),
            (ts_layout(42, 62, false, true), None),
            (ts_layout(42, 62, false, true), Some(outer_v4(4))),
            (ts_layout(14, 34, false, false), Some(outer_v4(8))),
        ];
        for (shape, outer) in other {
            assert_eq!(Kind::of(shape, outer), Kind::Other, "{shape:?} {outer:?}");
        }
        assert_eq!(Kind::Other.shape(), None);
    }

    /// The mask of each common layout, written out: every header byte kept but the IP
    /// lengths, IPv4 identification and header checksum (outer and inner), TCP's sequence
    /// and ACK numbers, window, checksum, urgent pointer and timestamp values, and FIN and PSH
    /// in the flags; nothing past the header. One byte too many freed would let a frame of
    /// another flow (an address byte) or with other IP flags (DF) match the template.
    #[test]
    fn masks_free_exactly_the_varying_bytes() {
        // IP headers at `ips` (offset, IPv6?), TCP with the timestamps at `l4`.
        fn want(ips: &[(usize, bool)], l4: usize) -> [u8; LEN] {
            let mut m = [0u8; LEN];
            m[..l4 + 32].fill(0xff);
            for &(l3, v6) in ips {
                if v6 {
                    m[l3 + 4..l3 + 6].fill(0);
                } else {
                    m[l3 + 2..l3 + 6].fill(0);
                    m[l3 + 10..l3 + 12].fill(0);
                }
            }
            m[l4 + 4..l4 + 12].fill(0);
            m[l4 + 14..l4 + 20].fill(0);
            m[l4 + 24..l4 + 32].fill(0);
            m[l4 + 13] = 0xf6;
            m
        }
        let cases = [
            (Kind::EthernetV4, want(&[(14, false)], 34)),
            (Kind::VlanV4, want(&[(18, false)], 38)),
            (Kind::EthernetV6, want(&[(14, true)], 54)),
            (Kind::TunnelV4, want(&[(14, false), (42, false)], 62)),
            (Kind::ShortTunnelV4, want(&[(14, false), (38, false)], 58)),
        ];
        for (kind, want) in cases {
            let shape = kind.shape().unwrap();
            assert_eq!(layout_mask(shape, kind.outer()), want, "{kind:?}");
        }
        // An encapsulation checksum is free too.
        let outer = OuterLayers {
            checksum: Some(4),
            ..outer_v4(8)
        };
        let shape = Kind::TunnelV4.shape().unwrap();
        let mut with_sum = want(&[(14, false), (42, false)], 62);
        with_sum[38..40].fill(0);
        assert_eq!(layout_mask(shape, Some(outer)), with_sum);
    }

    #[test]
    fn a_template_shows_its_bytes() {
        let mut t = Template::EMPTY;
        t.bytes[..3].copy_from_slice(&[0xab, 0xcd, 0xef]);
        t.len = 3;
        extern crate std;
        let s = std::format!("{t:?}");
        assert!(
            s.starts_with("Template { len: 3, bytes: [171, 205, 239]"),
            "{s}"
        );
    }
}
