//! The rule table: every merge and flush rule of both policies, one small function per rule,
//! each citing its source.
//!
//! The rules read a frame's [`Facts`] (what its headers say) and the held segment's
//! [`FlowState`]. Two readers implement [`Facts`]: the general path's, over the parser's fields
//! and byte comparisons with the head, and header prediction's, over the frame's bytes at the
//! template's offsets, where what the template's masked compare established (the flow, TTL,
//! TOS, DF, the option layout, extension headers) reads as the head's own values. Both paths
//! call the functions below and nothing else, so they decide alike by construction (and the
//! compiler folds, for the predicted reader, every check the template already made); a property
//! test and the `coalesce` fuzz target compare them as a second guard.
//!
//! The groups, in the order the engine applies them:
//! 1. [`alone`]: may this frame be merged with anything (after its checksums were verified)?
//! 2. [`merge`], when its flow holds a segment: may it join it, and how?
//! 3. [`may_start`], only for a frame that starts a segment (its flow held none, or the held
//!    one was just delivered): may it head one?
//! 4. [`completes`]: once appended, does it complete the segment?
//!
//! Sources: Linux `net/ipv4/tcp_offload.c` (`tcp_gro_receive`, its `out_check_final`),
//! `net/ipv4/af_inet.c` (`inet_gro_receive`, `inet_gro_flush` in `include/net/gro.h`),
//! `net/ipv6/ip6_offload.c` (`ipv6_gro_receive`, `ipv6_gro_flush`), `net/core/gro.c`
//! (`skb_gro_receive`); FreeBSD `sys/netinet/tcp_lro.c` (`tcp_lro_rx_ipv4`,
//! `tcp_lro_condense`); the first seed (Myri10GE's `inet_lro` patch: pure-ACK merging,
//! checksum-neutral padding); RFC 5681 (duplicate ACKs), RFC 7323 (PAWS).
//!
//! Where `Gro` and Linux part on purpose (`tests/kernel_gro.rs` compares the two on the running
//! kernel, byte for byte, and leaves these cases out): a frame Linux does not offer to TCP GRO
//! (a bad checksum, IPv4 options, a fragment) and an IPv6 frame whose extension headers differ
//! from its flow's (another flow to Linux) go up there while the flow's segment stays open,
//! so a later frame can still join it; here such a frame belongs to the flow and its held
//! segment is delivered first (DESIGN.md invariant 2: a flow's frames come out in order). And
//! CWR follows Linux's 2026 rule (only a change flushes), which kernels before it do not have.
//! Not a rule but a capacity: Linux holds at most 8 segments per GRO hash bucket
//! (`MAX_GRO_SKBS`) and completes the oldest for a ninth, whatever its flow; the engine holds
//! as many as its flow table has entries.

use super::storage::{FlowState, IpHeld};
use super::{Config, Policy};
use crate::parse::IpFacts;
use crate::stats::{FlushReason, PassReason};
use crate::wire::tcp::{before, flags, TcpOptions};

/// What one frame's headers say, as the rules read them; and how they compare with the held
/// segment's head.
pub(crate) trait Facts {
    fn seq(&self) -> u32;
    fn ack(&self) -> u32;
    /// TCP header bytes 12..16: data offset, reserved bits, flags, window.
    fn flags_word(&self) -> u32;
    fn flags(&self) -> u8;
    fn window(&self) -> u16;
    fn payload_len(&self) -> u32;
    fn options(&self) -> TcpOptions;
    /// The (inner) IP header.
    fn ip(&self) -> IpFacts;
    /// The outer IP header of a tunnelled frame (`None` otherwise).
    fn outer(&self) -> Option<IpFacts>;
    /// An IPv4 header with options, inner or outer.
    fn ip_options(&self) -> bool {
        self.ip().options || self.outer().is_some_and(|o| o.options)
    }
    /// TTL, TOS and DF (inner and outer) equal to those of the head of `e`.
    fn ip_fields_equal(&self, e: &FlowState) -> bool {
        let same = |h: &IpHeld, x: &IpFacts| h.ttl == x.ttl && h.tos == x.tos && h.df == x.df;
        same(&e.ip, &self.ip()) && self.outer().is_none_or(|o| same(&e.outer, &o))
    }
    /// The IPv4 IDs, inner and outer (`None` for IPv6 or without a tunnel).
    fn ip_ids(&self) -> (Option<u16>, Option<u16>) {
        let id = |x: IpFacts| (!x.v6).then_some(x.id);
        (id(self.ip()), self.outer().and_then(id))
    }
    /// What the encapsulation says of merging this frame (`Ok` without a tunnel).
    fn encap(&self) -> Result<(), PassReason>;
    /// Bytes after the IP datagram.
    fn padded(&self) -> bool;
    /// Their ones'-complement sum is zero (trimming them keeps a full-frame checksum valid).
    fn padding_neutral(&self) -> bool;
    /// TCP options byte-identical to the head's.
    fn options_equal(&self) -> bool;
    /// IPv6 extension headers (inner and outer) byte-identical to the head's.
    fn extensions_equal(&self) -> bool;
    /// The encapsulation allows merging with the head
    /// ([`Encap::may_merge`](crate::encap::Encap::may_merge)).
    fn encap_may_merge(&self) -> bool;
}

/// A frame's facts as values: the general path's reading (from the parser), and what the
/// engine keeps of any frame once the rules decided something other than a plain append. The
/// rules read it through [`Compared`], which adds the byte comparisons with a head.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fields {
    pub(crate) seq: u32,
    pub(crate) ack: u32,
    pub(crate) flags_word: u32,
    pub(crate) flags: u8,
    pub(crate) window: u16,
    pub(crate) payload_len: u32,
    pub(crate) options: TcpOptions,
    pub(crate) ip: IpFacts,
    pub(crate) outer: Option<IpFacts>,
    pub(crate) encap: Result<(), PassReason>,
    pub(crate) padded: bool,
    pub(crate) padding_neutral: bool,
}

impl Fields {
    /// The values a reader gives.
    #[inline(always)]
    pub(crate) fn of(f: &impl Facts) -> Self {
        Self {
            seq: f.seq(),
            ack: f.ack(),
            flags_word: f.flags_word(),
            flags: f.flags(),
            window: f.window(),
            payload_len: f.payload_len(),
            options: f.options(),
            ip: f.ip(),
            outer: f.outer(),
            encap: f.encap(),
            padded: f.padded(),
            padding_neutral: f.padding_neutral(),
        }
    }
}

/// Comparisons of a frame's header bytes with the held segment's head.
pub(crate) trait HeadMatch {
    fn options_equal(&self) -> bool;
    fn extensions_equal(&self) -> bool;
    fn encap_may_merge(&self) -> bool;
}

/// [`Fields`] with byte comparisons against a head: the general path's reader.
pub(crate) struct Compared<'a, M> {
    pub(crate) fields: &'a Fields,
    pub(crate) head: M,
}

impl<M: HeadMatch> Facts for Compared<'_, M> {
    #[inline(always)]
    fn seq(&self) -> u32 {
        self.fields.seq
    }
    #[inline(always)]
    fn ack(&self) -> u32 {
        self.fields.ack
    }
    #[inline(always)]
    fn flags_word(&self) -> u32 {
        self.fields.flags_word
    }
    #[inline(always)]
    fn flags(&self) -> u8 {
        self.fields.flags
    }
    #[inline(always)]
    fn window(&self) -> u16 {
        self.fields.window
    }
    #[inline(always)]
    fn payload_len(&self) -> u32 {
        self.fields.payload_len
    }
    #[inline(always)]
    fn options(&self) -> TcpOptions {
        self.fields.options
    }
    #[inline(always)]
    fn ip(&self) -> IpFacts {
        self.fields.ip
    }
    #[inline(always)]
    fn outer(&self) -> Option<IpFacts> {
        self.fields.outer
    }
    #[inline(always)]
    fn encap(&self) -> Result<(), PassReason> {
        self.fields.encap
    }
    #[inline(always)]
    fn padded(&self) -> bool {
        self.fields.padded
    }
    #[inline(always)]
    fn padding_neutral(&self) -> bool {
        self.fields.padding_neutral
    }
    #[inline(always)]
    fn options_equal(&self) -> bool {
        self.head.options_equal()
    }
    #[inline(always)]
    fn extensions_equal(&self) -> bool {
        self.head.extensions_equal()
    }
    #[inline(always)]
    fn encap_may_merge(&self) -> bool {
        self.head.encap_may_merge()
    }
}

/// What a frame may do with the held segment of its flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Merge {
    /// Append its payload.
    Append,
    /// Absorb it (a pure ACK that supersedes the held one: its values win, the frame is
    /// released).
    Absorb,
    /// A duplicate ACK: the held segment goes first, then the duplicate alone.
    Duplicate,
}

// ---- 1. The frame on its own ----

/// Linux `inet_gro_receive`: `*(u8 *)iph != 0x45` flushes, so IPv4 options (in the inner or
/// the outer header) are never merged.
#[inline(always)]
pub(crate) fn ip_options(f: &impl Facts) -> Result<(), PassReason> {
    if f.ip_options() {
        return Err(PassReason::IpOptions);
    }
    Ok(())
}

/// The encapsulation's verdict on the frame (Linux `gre_gro_receive`: the sequence flag, the
/// routing flag and any version but 0 flush).
#[inline(always)]
pub(crate) fn encap(f: &impl Facts) -> Result<(), PassReason> {
    f.encap()
}

/// Linux `inet_gro_receive`: the IP total length must equal the bytes left (`Gro` never trims
/// padding); the first seed trims Ethernet padding only when its ones'-complement sum is zero,
/// so a NIC's full-frame checksum stays valid (`Lro`).
#[inline(always)]
pub(crate) fn padding(policy: Policy, f: &impl Facts) -> Result<(), PassReason> {
    if f.padded() && (policy == Policy::Gro || !f.padding_neutral()) {
        return Err(PassReason::Padding);
    }
    Ok(())
}

/// Linux `tcp_gro_receive` (`flags & (URG|RST|SYN)` never merges), FreeBSD `tcp_lro_rx_ipv4`:
/// SYN, RST, URG, or no ACK.
#[inline(always)]
pub(crate) fn control(f: &impl Facts) -> Result<(), PassReason> {
    if f.flags() & (flags::SYN | flags::RST | flags::URG) != 0 || f.flags() & flags::ACK == 0 {
        return Err(PassReason::Control);
    }
    Ok(())
}

/// Linux `tcp_gro_receive`: `(len - 1) >= mss` with `len` 0, so a segment without payload is
/// never merged under `Gro`. Under `Lro` a pure ACK may be (the first seed), but not one with
/// PSH or FIN (FreeBSD `tcp_lro_condense` pushes those out).
#[inline(always)]
pub(crate) fn pure_ack(policy: Policy, f: &impl Facts) -> Result<(), PassReason> {
    if f.payload_len() == 0 {
        if policy == Policy::Gro {
            return Err(PassReason::PureAck);
        }
        if f.flags() & (flags::PSH | flags::FIN) != 0 {
            return Err(PassReason::PushFin);
        }
    }
    Ok(())
}

/// FreeBSD `tcp_lro_rx_ipv4` (`TCP_LRO_TS_OPTION`): under `Lro` only no options or the
/// aligned timestamp option; SACK blocks and every other layout pass alone. (`Gro` compares
/// options byte for byte with the head instead: [`options`].)
#[inline(always)]
pub(crate) fn lro_options(policy: Policy, f: &impl Facts) -> Result<(), PassReason> {
    if policy == Policy::Lro && matches!(f.options(), TcpOptions::Other) {
        return Err(PassReason::Options);
    }
    Ok(())
}

/// Group 1 in order: may this frame (its checksums verified) be merged with anything?
#[inline(always)]
pub(crate) fn alone(policy: Policy, f: &impl Facts) -> Result<(), PassReason> {
    ip_options(f)?;
    encap(f)?;
    padding(policy, f)?;
    control(f)?;
    pure_ack(policy, f)?;
    lro_options(policy, f)
}

// ---- 2. Heading a segment ----

/// Linux `out_check_final`: a segment with PSH or FIN is never held; it is delivered at once
/// (after its flow's held segment).
#[inline(always)]
pub(crate) fn may_start(tcp_flags: u8) -> Result<(), PassReason> {
    if tcp_flags & (flags::PSH | flags::FIN) != 0 {
        return Err(PassReason::PushFin);
    }
    Ok(())
}

// ---- 3. Joining the held segment ----

/// RFC 5681 section 2: no data, the same ACK number and window as the flow's newest (FreeBSD
/// `tcp_lro_condense` keeps these apart). Checked before sequence contiguity: a duplicate sent
/// after a loss may carry any sequence number, and it must survive whatever else differs.
#[inline(always)]
pub(crate) fn duplicate_ack(policy: Policy, e: &FlowState, f: &impl Facts) -> bool {
    policy == Policy::Lro && f.payload_len() == 0 && f.ack() == e.ack && f.window() == e.window
}

/// Linux `tcp_gro_receive`: `(seq2 + len(p)) ^ seq`, exactly contiguous (mod 2^32).
#[inline(always)]
pub(crate) fn sequence(e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    if f.seq() != e.next_seq {
        return Err(FlushReason::SeqGap);
    }
    Ok(())
}

/// Linux `inet_gro_flush` / `ipv6_gro_flush`: TTL (hop limit), the whole TOS byte (traffic
/// class, ECN included) and DF must be equal, for the inner header and, through a tunnel, the
/// outer one (`gro_receive_network_flush` checks both).
#[inline(always)]
pub(crate) fn ip_fields(e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    if !f.ip_fields_equal(e) {
        return Err(FlushReason::IpFields);
    }
    Ok(())
}

/// Linux `ipv6_gro_receive`: extension headers must be byte-identical
/// (`memcmp(iph + 1, iph2 + 1, nlen - sizeof(struct ipv6hdr))`). Linux then holds the frame
/// as another flow, leaving the segment open; here it ends the segment (see the module
/// documentation).
#[inline(always)]
pub(crate) fn extensions(f: &impl Facts) -> Result<(), FlushReason> {
    if !f.extensions_equal() {
        return Err(FlushReason::IpFields);
    }
    Ok(())
}

/// The encapsulation's own comparison of the two headers
/// ([`Encap::may_merge`](crate::encap::Encap::may_merge)).
#[inline(always)]
pub(crate) fn encap_headers(f: &impl Facts) -> Result<(), FlushReason> {
    if !f.encap_may_merge() {
        return Err(FlushReason::Encap);
    }
    Ok(())
}

/// Linux `tcp_gro_receive`: `(flags ^ tcp_flag_word(th2)) & ~(FIN|PSH)`: data offset, reserved
/// bits, CWR, ECE, URG, ACK, RST, SYN must be equal; under `Gro` the window too (it is in the
/// same word). `Lro` takes the newest window.
#[inline(always)]
pub(crate) fn flag_word(policy: Policy, e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    const FIN_PSH: u32 = ((flags::FIN | flags::PSH) as u32) << 16;
    const WINDOW: u32 = 0xffff;
    let diff = (f.flags_word() ^ e.flags_word) & !FIN_PSH;
    if diff & !WINDOW != 0 {
        return Err(FlushReason::Flags);
    }
    if policy == Policy::Gro && diff != 0 {
        return Err(FlushReason::Window);
    }
    Ok(())
}

/// Linux `tcp_gro_receive`: `th->ack_seq ^ th2->ack_seq`, equal under `Gro`. Under `Lro`
/// (FreeBSD `tcp_lro_condense`) the newest ACK wins, but it must not go backwards.
#[inline(always)]
pub(crate) fn ack(policy: Policy, e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    let bad = match policy {
        Policy::Gro => f.ack() != e.ack,
        Policy::Lro => before(f.ack(), e.ack),
    };
    if bad {
        return Err(FlushReason::Ack);
    }
    Ok(())
}

/// Options. `Gro`, Linux `tcp_gro_receive`: every option byte equal to the head's, TSval
/// included. `Lro`, FreeBSD `tcp_lro_condense`: the same layout (none, or the aligned
/// timestamps) and a TSval that does not go backwards (RFC 7323 PAWS: `TSTMP_GT`).
#[inline(always)]
pub(crate) fn options(policy: Policy, e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    let ok = match policy {
        Policy::Gro => f.options().timestamps() == e.ts && f.options_equal(),
        Policy::Lro => match (f.options(), e.ts) {
            (TcpOptions::Timestamp { val, .. }, Some((held, _))) => !before(val, held),
            (TcpOptions::None, None) => true,
            _ => false,
        },
    };
    if !ok {
        return Err(FlushReason::Options);
    }
    Ok(())
}

/// Linux `inet_gro_flush` (`Gro`, IPv4): the ID is the head's plus the data frames so far
/// (incrementing), or the head's (fixed, decided by the second frame). For the inner header
/// and, through a tunnel, the outer one (Linux 6.18 checks outer IDs too, so GSO can restore
/// them). As in 6.18, fixed IDs do not need DF; kernels before it flushed a repeated ID
/// without DF.
#[inline(always)]
pub(crate) fn ip_id(policy: Policy, e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    if policy != Policy::Gro {
        return Ok(());
    }
    let follows = |h: &IpHeld, id: u16| {
        let offset = id.wrapping_sub(h.id);
        let fixed = h.fixed_id || (e.data_frames == 1 && offset == 0);
        offset == if fixed { 0 } else { e.data_frames }
    };
    let (inner, outer) = f.ip_ids();
    if inner.is_some_and(|id| !follows(&e.ip, id)) || outer.is_some_and(|id| !follows(&e.outer, id))
    {
        return Err(FlushReason::IpId);
    }
    Ok(())
}

/// Linux `tcp_gro_receive`: `(len - 1) >= mss`, a segment longer than the flow's MSS (the head's
/// payload, `gso_size`) does not merge under `Gro` (it could not be re-segmented).
#[inline(always)]
pub(crate) fn mss(policy: Policy, e: &FlowState, f: &impl Facts) -> Result<(), FlushReason> {
    if policy == Policy::Gro && f.payload_len() > e.mss {
        return Err(FlushReason::Mss);
    }
    Ok(())
}

/// FreeBSD `tcp_lro_condense` (`Lro`): a pure ACK that advances the ACK, or keeps it and opens
/// the window, supersedes the held one; one that repeats the flow's newest *delivered* state is
/// a duplicate (RFC 5681; the held state may be older, a stale ACK held, so the ACK memory is
/// asked); anything else ends the segment.
#[inline(always)]
pub(crate) fn pure_ack_absorb(
    e: &FlowState,
    f: &impl Facts,
    delivered: Option<(u32, u16)>,
) -> Result<Merge, FlushReason> {
    if delivered == Some((f.ack(), f.window())) {
        return Ok(Merge::Duplicate);
    }
    if f.ack() != e.ack || f.window() > e.window {
        Ok(Merge::Absorb)
    } else {
        Err(FlushReason::Window)
    }
}

/// Linux `skb_gro_receive` (`-E2BIG`): the merged datagram stays within `max_ip_len` (65535 by
/// default: an IPv4 total length cannot say more); and the segment within its frame slots.
#[inline(always)]
pub(crate) fn room(
    config: &Config,
    e: &FlowState,
    payload_len: u32,
    frames: usize,
) -> Result<(), FlushReason> {
    if e.ip_len + payload_len > u32::from(config.max_ip_len) {
        return Err(FlushReason::SizeLimit);
    }
    if usize::from(e.count) >= frames {
        return Err(FlushReason::FrameLimit);
    }
    Ok(())
}

/// [`Config::max_hold`]: a segment held that long since its first frame is delivered when its
/// flow receives a frame.
#[inline(always)]
pub(crate) fn expired(config: &Config, e: &FlowState, now: u64) -> bool {
    config
        .max_hold
        .is_some_and(|max| now.saturating_sub(e.first_time) >= max)
}

/// Group 3 in order: may `f` (which passed [`alone`]) join the held segment `e`?
/// `policy` is `config`'s (given apart, so that a caller compiled per policy folds its
/// checks), `delivered` the flow's ACK memory record (asked only for a pure ACK under `Lro`),
/// `frames` the segment's capacity.
#[inline(always)]
pub(crate) fn merge(
    policy: Policy,
    config: &Config,
    e: &FlowState,
    f: &impl Facts,
    delivered: impl FnOnce() -> Option<(u32, u16)>,
    frames: usize,
) -> Result<Merge, FlushReason> {
    if duplicate_ack(policy, e, f) {
        return Ok(Merge::Duplicate);
    }
    sequence(e, f)?;
    ip_fields(e, f)?;
    extensions(f)?;
    encap_headers(f)?;
    flag_word(policy, e, f)?;
    ack(policy, e, f)?;
    options(policy, e, f)?;
    ip_id(policy, e, f)?;
    mss(policy, e, f)?;
    if f.payload_len() == 0 {
        // Only under `Lro`: `alone` passed no pure ACK under `Gro`.
        return pure_ack_absorb(e, f, delivered());
    }
    room(config, e, f.payload_len(), frames)?;
    Ok(Merge::Append)
}

// ---- 4. After appending ----

/// Linux `out_check_final`: PSH or FIN completes the segment (`tcp_gro_receive` ORs them into
/// the head first); a payload shorter than the MSS does too (`len < mss`).
#[inline(always)]
pub(crate) fn completes(e: &FlowState, tcp_flags: u8, payload_len: u32) -> Option<FlushReason> {
    if tcp_flags & (flags::PSH | flags::FIN) != 0 {
        Some(FlushReason::PushFin)
    } else if e.mss > 0 && payload_len < e.mss {
        Some(FlushReason::ShortSegment)
    } else {
        None
    }
}
