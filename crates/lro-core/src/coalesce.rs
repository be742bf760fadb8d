//! The coalescer: flow matching, the merge rules of both policies, and header finalisation.

use crate::csum;
use crate::flow::Index;
use crate::meta::{LinkKind, RxChecksum, RxMeta};
use crate::stats::{FlushReason, PassReason, Stats, Verdict};
use crate::wire::{self, tcp_flags, FlowHint, FlowKey, Parsed, TcpOptions};
use heapless::vec::VecView;

/// Which merge rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Policy {
    /// Linux GRO's rules exactly (`tcp_gro_receive`, `inet_gro_flush`, `ipv6_gro_flush`): only
    /// what software GSO can split back into the exact original frames. For forwarding, and for
    /// anyone who needs reversibility.
    Gro,
    /// For an endpoint: everything `Gro` merges with the MSS rule relaxed, plus pure ACKs whose
    /// ACK number advances (superseded ACKs are released, the newest ACK, window and timestamps
    /// win) and data whose ACK number advances, with aligned TCP timestamps whose TSval does not
    /// go backwards. FreeBSD `tcp_lro_condense`, Myri10GE's patched `inet_lro`.
    #[default]
    Lro,
}

/// How the TCP checksum of a coalesced segment is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OutChecksum {
    /// A complete, correct TCP checksum, combined from the frames' payload sums without
    /// re-reading payload.
    #[default]
    Full,
    /// Only the pseudo-header sum (not complemented) in the checksum field, as Linux's
    /// `tcp_gro_complete` leaves it for `CHECKSUM_PARTIAL` (`csum_start` = TCP header,
    /// `csum_offset` = 16): for stacks or devices that finish the checksum themselves.
    Partial,
    /// As received: a segment of one frame, never rewritten.
    AsReceived,
}

/// Engine configuration. Build it with [`Config::gro`] or [`Config::lro`] and adjust fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Merge rules.
    pub policy: Policy,
    /// Verify checksums in software when the metadata says [`RxChecksum::None`]. When off, such
    /// frames are never merged ([`PassReason::Unverified`]): a checksum nobody checked is never
    /// laundered into a segment carrying a valid one.
    pub verify_checksums: bool,
    /// How coalesced segments' TCP checksums are written.
    pub checksum_out: OutChecksum,
    /// Largest IP datagram a segment may grow to, IP header included (Linux
    /// `GRO_LEGACY_MAX_SIZE`: 65535, also the most an IPv4 total length can say).
    pub max_ip_len: u16,
    /// Flush a flow idle for at least this long, on the [`RxMeta::time`] clock, when
    /// [`Coalesce::flush_idle`] runs. `None`: never by idleness.
    pub idle_timeout: Option<u64>,
    /// Flush a segment held for at least this long since its first frame, checked when the flow
    /// receives a frame and in [`Coalesce::flush_idle`]. `None`: no limit.
    pub max_hold: Option<u64>,
    /// Header prediction (on by default): a frame whose headers equal those of the segment the
    /// previous data frame started or joined, in every byte that must not change (addresses, ports,
    /// MACs, IP and TCP fields, option layout), is checked and appended without the parser and
    /// the flow lookup; once that segment was delivered, the frame starts the flow's next one
    /// the same way. Van Jacobson's TCP fast path applied to GRO: the common case of a run of
    /// one flow's segments costs a fraction of the general path. It applies to untagged
    /// Ethernet/IPv4 frames with hardware-verified checksums ([`RxChecksum::Verified`]); any
    /// frame it cannot decide goes through the general path, and every decision it takes is the
    /// one the general path takes (a property test and the `coalesce` fuzz target compare the
    /// two). Off: every frame takes the general path.
    pub header_prediction: bool,
}

impl Config {
    /// Linux GRO rules, full checksums, 64 KB segments, no timeouts.
    pub const fn gro() -> Self {
        Self {
            policy: Policy::Gro,
            verify_checksums: true,
            checksum_out: OutChecksum::Full,
            max_ip_len: 65535,
            idle_timeout: None,
            max_hold: None,
            header_prediction: true,
        }
    }

    /// Endpoint LRO rules (pure-ACK merging), full checksums, 64 KB segments, no timeouts.
    pub const fn lro() -> Self {
        Self {
            policy: Policy::Lro,
            ..Self::gro()
        }
    }

    /// The same configuration with the given policy.
    pub const fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The same configuration with software checksum verification on or off.
    pub const fn with_verify_checksums(mut self, on: bool) -> Self {
        self.verify_checksums = on;
        self
    }

    /// The same configuration with the given output checksum mode.
    pub const fn with_checksum_out(mut self, mode: OutChecksum) -> Self {
        self.checksum_out = mode;
        self
    }

    /// The same configuration with an idle timeout.
    pub const fn with_idle_timeout(mut self, timeout: u64) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }

    /// The same configuration with a maximum hold time.
    pub const fn with_max_hold(mut self, max: u64) -> Self {
        self.max_hold = Some(max);
        self
    }

    /// The same configuration with header prediction on or off (see
    /// [`Config::header_prediction`]).
    pub const fn with_header_prediction(mut self, on: bool) -> Self {
        self.header_prediction = on;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::lro()
    }
}

/// Receives what the engine emits. Every frame pushed comes back exactly once: inside a
/// [`Segment`] or through [`Sink::release`].
pub trait Sink<F> {
    /// A segment to pass up: several coalesced frames, or one frame on its own.
    ///
    /// Frames the implementation does not take out with [`Segment::into_frames`] are dropped
    /// when this returns (for a driver handle, its `Drop` recycles the buffer).
    fn segment(&mut self, segment: Segment<'_, F>);

    /// A frame superseded by a newer one (a pure ACK absorbed under [`Policy::Lro`]): not to
    /// be passed up, only recycled. The default drops it.
    fn release(&mut self, frame: F) {
        drop(frame);
    }
}

impl<F, K: Sink<F> + ?Sized> Sink<F> for &mut K {
    fn segment(&mut self, segment: Segment<'_, F>) {
        (**self).segment(segment);
    }

    fn release(&mut self, frame: F) {
        (**self).release(frame);
    }
}

/// A coalescing engine: the per-frame operations a driver's poll loop calls. Implemented by
/// [`Coalescer`] and by wrappers around it (such as the RSS-sorting batch in [`crate::rss`]).
pub trait Coalesce<F> {
    /// Offers one received frame. The frame is merged, held, absorbed or delivered at once;
    /// segments it completes are delivered to `sink` before this returns.
    fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict;

    /// Delivers everything held (the end of a poll, or teardown).
    fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K);

    /// Delivers flows idle for at least the configured timeout, and segments held longer than
    /// the configured maximum, as of `now` (same clock as [`RxMeta::time`]).
    fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K);

    /// The counters.
    fn stats(&self) -> &Stats;

    /// Frames currently held.
    fn held_frames(&self) -> usize;
}

/// A borrowed engine is an engine: wrappers such as [`RssSorted`](crate::rss::RssSorted) can
/// drive an engine that lives elsewhere (a `static`, a `Box`) without moving it.
impl<F, C: Coalesce<F> + ?Sized> Coalesce<F> for &mut C {
    #[inline]
    fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict {
        (**self).push(frame, meta, sink)
    }

    fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        (**self).flush_all(sink);
    }

    fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        (**self).flush_idle(now, sink);
    }

    fn stats(&self) -> &Stats {
        (**self).stats()
    }

    fn held_frames(&self) -> usize {
        (**self).held_frames()
    }
}

/// What the sink learns about a delivered segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SegmentInfo {
    /// Frames in the segment (the head included).
    pub frames: u16,
    /// Frames carrying payload: Linux's `gso_segs` (`NAPI_GRO_CB(skb)->count`).
    pub gso_segs: u16,
    /// Largest payload of one merged frame: the MSS to re-segment with (`gso_size`); under
    /// [`Policy::Gro`] the first frame's payload. Zero for a single frame.
    pub gso_size: u16,
    /// Length in bytes of the segment as one contiguous frame ([`Segment::copy_to`]).
    pub len: usize,
    /// Offset of the IP header.
    pub l3: u32,
    /// Offset of the TCP header (zero when not TCP).
    pub l4: u32,
    /// TCP payload bytes in the segment.
    pub payload_len: u32,
    /// Its TCP checksum state.
    pub checksum: OutChecksum,
    /// The IPv4 IDs of the merged frames were all equal (Linux `SKB_GSO_TCP_FIXEDID`).
    pub fixed_id: bool,
    /// The flow, when the frame was TCP.
    pub flow: Option<FlowKey>,
    /// Why it was delivered now.
    pub cause: Cause,
}

/// Why a segment was delivered when it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A held segment completed.
    Flushed(FlushReason),
    /// A frame delivered on its own without being held.
    Passed(PassReason),
}

/// A frame in a segment: the buffer and the byte range of it that belongs to the output.
pub(crate) struct Held<F> {
    frame: F,
    start: u32,
    end: u32,
}

/// One delivered segment: the head frame, its headers rewritten in place, followed by the
/// payloads of the frames merged into it (scatter-gather). [`Segment::copy_to`] makes one
/// contiguous frame of it for stacks that need that.
pub struct Segment<'a, F> {
    frames: &'a mut VecView<Held<F>>,
    info: SegmentInfo,
}

impl<'a, F: AsRef<[u8]>> Segment<'a, F> {
    /// What the segment is.
    #[inline]
    pub fn info(&self) -> &SegmentInfo {
        &self.info
    }

    /// Length of the segment as one contiguous frame.
    #[inline]
    pub fn len(&self) -> usize {
        self.info.len
    }

    /// Never true: a segment holds at least its head's headers.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.info.len == 0
    }

    /// The pieces of the segment, in order: the head frame from its first byte to the end of its
    /// payload (headers rewritten), then the payload of each merged frame.
    pub fn chunks(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.frames.iter().map(|h| {
            let b = h.frame.as_ref();
            b.get(h.start as usize..h.end as usize).unwrap_or(&[])
        })
    }

    /// The head frame's bytes that belong to the segment (its headers and payload).
    pub fn head(&self) -> &[u8] {
        self.chunks().next().unwrap_or(&[])
    }

    /// The frames of the segment.
    pub fn frames(&self) -> impl Iterator<Item = &F> + '_ {
        self.frames.iter().map(|h| &h.frame)
    }

    /// Copies the segment into `out` as one contiguous frame and returns its length.
    ///
    /// # Errors
    /// [`BufferTooSmall`] when `out` is shorter than [`Segment::len`]; nothing is written then.
    pub fn copy_to(&self, out: &mut [u8]) -> Result<usize, BufferTooSmall> {
        if out.len() < self.info.len {
            return Err(BufferTooSmall {
                needed: self.info.len,
                available: out.len(),
            });
        }
        let mut at = 0;
        for c in self.chunks() {
            out[at..at + c.len()].copy_from_slice(c);
            at += c.len();
        }
        Ok(at)
    }

    /// Takes the frames out (head first), to recycle them once the segment is consumed.
    pub fn into_frames(self) -> impl Iterator<Item = F> + 'a
    where
        F: 'a,
    {
        self.frames.drain(..).map(|h| h.frame)
    }
}

/// An output buffer too small for a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferTooSmall {
    /// Bytes needed.
    pub needed: usize,
    /// Bytes available.
    pub available: usize,
}

impl core::fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "buffer too small: {} bytes needed, {} available",
            self.needed, self.available
        )
    }
}

impl core::error::Error for BufferTooSmall {}

/// State of one held segment.
struct Entry<F, const S: usize> {
    frames: heapless::Vec<Held<F>, S>,
    /// Head geometry.
    l3: u32,
    l4: u32,
    head_payload: u32,
    /// Expected next sequence number.
    next_seq: u32,
    /// Newest ACK number and window (the head's under `Gro`, where they must stay equal).
    ack: u32,
    window: u16,
    /// Newest timestamps (`Lro`).
    ts: Option<(u32, u32)>,
    /// The head's TCP flags word (bytes 12..16).
    flags_word: u32,
    /// PSH/FIN seen on merged frames.
    or_flags: u8,
    ttl: u8,
    tos: u8,
    df: bool,
    v6: bool,
    ip_id: u16,
    fixed_id: bool,
    /// Payload of the first data frame (`gso_size` under `Gro`; the close-on-short rule).
    mss: u32,
    max_payload: u32,
    /// Frames carrying payload.
    data_frames: u16,
    /// Length of the merged IP datagram so far.
    ip_len: u32,
    /// Ones'-complement sum of the payload so far, folded, and its length (for odd offsets);
    /// together with the predicted frames' (`negated_acc`).
    payload_sum: u16,
    /// The payload of frames header prediction appended at even offsets
    /// ([`PayloadSum::Negated`]): the sum of their varying header words ([`predicted_words`],
    /// unfolded, native byte order) and their number. With `negated_frames * sum_base` added,
    /// the negation of the sum of their payload; `finalise` folds it once.
    negated_acc: u64,
    negated_frames: u16,
    /// Whether the two sums cover every frame: not when a hardware-verified frame arrived
    /// under `Partial` output, which needs no sum (`finalise` then sums the held payload if
    /// the output mode changed to `Full` meanwhile).
    sums_ok: bool,
    payload_len: u32,
    /// ACKs absorbed into the head (the head's ACK fields need rewriting even alone).
    absorbed: u16,
    first_time: u64,
    last_time: u64,
    /// Whether header prediction may compare frames with the head, and how.
    predict: Layout,
    /// The head's first bytes, the template header prediction compares frames with.
    template: Template,
    /// The flow's pseudo-header sum without the TCP length (`FlowKey::pseudo_header_base`).
    pseudo_base: u64,
    /// The part of a predicted frame's pseudo-header and TCP-header sum every such frame
    /// shares with the template: `pseudo_base`, minus the IPv4 header length (the pseudo header
    /// counts the TCP length, [`predicted_words`] the IP total length), the ports and option
    /// kinds; in native byte order, as [`predicted_words`] sums.
    sum_base: u64,
    /// The flow key's hash (the key itself stays in the index slot of the same number, also
    /// once the segment is delivered, until the slot is reused).
    hash: u32,
}

/// The head layouts header prediction covers (see [`Config::header_prediction`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Not covered: every frame of the flow takes the general path.
    No,
    /// Untagged Ethernet, IPv4 without options, TCP without options.
    Plain,
    /// The same with TCP options NOP, NOP, timestamps (the aligned form, RFC 7323 appendix A).
    Timestamp,
}

/// A template in one cache line of its own: the comparison touches one line, not two.
#[derive(Clone, Copy)]
#[repr(align(64))]
struct Template([u8; PREDICT_LEN]);

/// Bytes of a frame header prediction compares: Ethernet, IPv4, TCP up to the timestamp
/// values (54 or 58 bytes, rounded up to 64 for the comparison's sake).
const PREDICT_LEN: usize = 64;

/// Which header bytes must equal the head's for a frame to be predicted: `0xff` compared, `0`
/// not. Free: IPv4 total length, ID and checksum; TCP sequence and ACK numbers, window,
/// checksum and urgent pointer, FIN and PSH; the timestamp values. Everything else is part of
/// the flow key or of a field the merge rules require to be equal to the head's (TOS, DF and
/// fragment offset, TTL, data offset, flags, option layout).
const fn predict_mask(header_len: usize) -> [u8; PREDICT_LEN] {
    let mut m = [0u8; PREDICT_LEN];
    let mut i = 0;
    while i < header_len {
        m[i] = 0xff;
        i += 1;
    }
    const L3: usize = wire::ETHERNET_LEN;
    const L4: usize = L3 + wire::IPV4_LEN;
    let free: [(usize, usize); 4] = [
        (L3 + 2, 4),  // total length, identification
        (L3 + 10, 2), // header checksum
        (L4 + 4, 8),  // sequence, acknowledgment
        (L4 + 14, 6), // window, checksum, urgent pointer
    ];
    let mut f = 0;
    while f < free.len() {
        let (at, n) = free[f];
        let mut j = at;
        while j < at + n && j < PREDICT_LEN {
            m[j] = 0;
            j += 1;
        }
        f += 1;
    }
    m[L4 + 13] = !(tcp_flags::FIN | tcp_flags::PSH);
    m
}

const MASK_PLAIN: [u8; PREDICT_LEN] =
    predict_mask(wire::ETHERNET_LEN + wire::IPV4_LEN + wire::TCP_LEN);
const MASK_TIMESTAMP: [u8; PREDICT_LEN] =
    predict_mask(wire::ETHERNET_LEN + wire::IPV4_LEN + wire::TCP_LEN + 4);

/// What the head of a new segment brings, from the parser or header prediction: what any
/// frame brings, plus the head's geometry and identity.
struct Head {
    frame: Appended,
    l3: u32,
    l4: u32,
    ttl: u8,
    tos: u8,
    df: bool,
    v6: bool,
    layout: Layout,
    pseudo_base: u64,
    hash: u32,
}

/// What a frame appended to a held segment (or heading one) brings, from the parser or header
/// prediction.
struct Appended {
    seq: u32,
    flags_word: u32,
    /// Offset of its payload and of the end of its IP datagram.
    payload: u32,
    ip_end: u32,
    payload_len: u32,
    ack: u32,
    window: u16,
    ts: Option<(u32, u32)>,
    flags: u8,
    ip_id: u16,
    /// Ones'-complement sum of its payload.
    payload_sum: PayloadSum,
    trimmed: bool,
    time: u64,
}

/// A frame's payload sum, in the form its source has it.
#[derive(Clone, Copy)]
enum PayloadSum {
    /// Not computed: a hardware-verified frame under `Partial` output, which never needs it.
    None,
    /// The folded sum (the general path).
    Folded(u16),
    /// Header prediction's: pseudo header, TCP header (checksum field included) and payload
    /// sum to -0, so the payload's sum is the negation of the headers'. Their varying words
    /// ([`predicted_words`]) are added to the segment's `negated_acc` as they are, the
    /// constant ones (`sum_base`) once per segment, and the result folded once, in `finalise`.
    Negated,
}

/// The words of a predicted frame's pseudo header and TCP header that vary from frame to frame
/// (IP total length; sequence and ACK numbers, data offset, flags, window, checksum, urgent
/// pointer; timestamp values), summed as loaded: native byte order, 32 bits at a time (2^16 = 1
/// in ones'-complement arithmetic), which gives the byte-swapped sum on a little-endian host
/// (RFC 1071 section 2 (B)). `None` if the frame is shorter than its layout (never after
/// `predict`).
#[inline(always)]
fn predicted_words(bytes: &[u8], layout: Layout) -> Option<u64> {
    const L3: usize = wire::ETHERNET_LEN;
    const L4: usize = L3 + wire::IPV4_LEN;
    let h = bytes.first_chunk::<{ L4 + wire::TCP_LEN }>()?;
    let acc = u64::from(u16::from_ne_bytes([h[L3 + 2], h[L3 + 3]]))
        + ne32(h, L4 + 4)
        + ne32(h, L4 + 8)
        + ne32(h, L4 + 12)
        + ne32(h, L4 + 16);
    Some(match layout {
        Layout::Timestamp => {
            let t = bytes.get(L4 + wire::TCP_LEN + 4..L4 + wire::TCP_LEN + 12)?;
            acc + ne32(t, 0) + ne32(t, 4)
        }
        _ => acc,
    })
}

/// A 32-bit word of `b` at `at` in native byte order, widened for an unfolded sum.
#[inline(always)]
fn ne32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]))
}

/// The payload sum a native-order unfolded sum of header words stands for (its negation).
#[inline(always)]
fn negated_sum(acc: u64) -> u16 {
    csum::finish(u16::from_be(csum::fold(acc)))
}

impl Appended {
    /// From the parser's fields.
    #[inline(always)]
    fn from_parsed(p: &Parsed, payload_sum: Option<u16>, trimmed: bool, time: u64) -> Self {
        Self {
            seq: p.seq,
            flags_word: p.flags_word,
            payload: p.payload,
            ip_end: p.ip_end,
            payload_len: p.payload_len,
            ack: p.ack,
            window: p.window,
            ts: p.options.timestamps(),
            flags: p.flags,
            ip_id: p.ip_id,
            payload_sum: match payload_sum {
                Some(sum) => PayloadSum::Folded(sum),
                None => PayloadSum::None,
            },
            trimmed,
            time,
        }
    }
}

impl<F, const S: usize> Entry<F, S> {
    const EMPTY: Self = Self {
        frames: heapless::Vec::new(),
        l3: 0,
        l4: 0,
        head_payload: 0,
        next_seq: 0,
        ack: 0,
        window: 0,
        ts: None,
        flags_word: 0,
        or_flags: 0,
        ttl: 0,
        tos: 0,
        df: false,
        v6: false,
        ip_id: 0,
        fixed_id: false,
        mss: 0,
        max_payload: 0,
        data_frames: 0,
        ip_len: 0,
        payload_sum: 0,
        negated_acc: 0,
        negated_frames: 0,
        sums_ok: true,
        payload_len: 0,
        absorbed: 0,
        first_time: 0,
        last_time: 0,
        predict: Layout::No,
        template: Template([0; PREDICT_LEN]),
        pseudo_base: 0,
        sum_base: 0,
        hash: 0,
    };
}

/// The newest ACK state delivered for a flow (`Lro`), kept after its segment is flushed so a
/// pure ACK arriving with nothing held can still be recognised as a duplicate. Direct-mapped by
/// bucket: a colliding flow overwrites it, and then a pure ACK is simply delivered alone.
#[derive(Clone, Copy)]
struct AckMemo {
    key: FlowKey,
    ack: u32,
    window: u16,
    valid: bool,
}

/// The ACK-memory slot of a flow hash (`M` a power of two).
#[inline]
fn memo_slot<const M: usize>(hash: u32) -> usize {
    (hash.wrapping_mul(0x85eb_ca6b) >> 8) as usize & (M - 1)
}

const NO_MEMO: AckMemo = AckMemo {
    key: FlowKey::EMPTY,
    ack: 0,
    window: 0,
    valid: false,
};

/// What a frame may do with the held segment of its flow.
enum Merge {
    /// Append its payload.
    Append,
    /// Absorb it (a pure ACK that supersedes the held one: its values win, the frame is
    /// released).
    Absorb,
    /// A duplicate ACK: the held segment goes first, then the duplicate alone.
    Duplicate,
}

/// The allocation-free coalescing engine.
///
/// # Teardown
/// Frames the engine holds are delivered by [`Coalesce::flush_all`]; call it before dropping
/// the engine (at the end of every poll, and at shutdown). Dropping an engine that still holds
/// frames drops them, which for a driver's buffer handle returns the buffer through its `Drop`:
/// nothing leaks, but those frames are not passed up.
///
/// `F` is the frame type: anything that lends its bytes (`&mut [u8]`, `Vec<u8>`, a driver's
/// buffer handle). `N` is the flow-table capacity (a power of two), `S` the most frames one
/// segment may hold, `M` the number of flows whose newest ACK is remembered after their segment
/// was delivered (a power of two; `Lro` uses it to recognise duplicate ACKs when nothing is
/// held, see [`PassReason::UnknownAck`]). All memory is inside the value: `N * S` frame slots,
/// per-flow state and `M` ACK records of 72 bytes.
///
/// ```
/// use lro_core::{Coalesce, Coalescer, Config, RxMeta, Segment, Sink};
///
/// struct Count(usize);
/// impl<F: AsRef<[u8]>> Sink<F> for Count {
///     fn segment(&mut self, _segment: Segment<'_, F>) {
///         self.0 += 1;
///     }
/// }
///
/// let mut engine: Coalescer<Vec<u8>, 8, 16> = Coalescer::new(Config::lro());
/// let mut sink = Count(0);
/// // Not TCP: delivered at once, counted.
/// engine.push(vec![0u8; 60], &RxMeta::ethernet(0), &mut sink);
/// engine.flush_all(&mut sink);
/// assert_eq!(sink.0, 1);
/// assert!(engine.stats().is_conserved());
/// ```
pub struct Coalescer<F, const N: usize = 64, const S: usize = 64, const M: usize = 256> {
    config: Config,
    index: Index<N>,
    entries: [Entry<F, S>; N],
    acks: [AckMemo; M],
    stats: Stats,
    /// Earliest time at which some held segment reaches `max_hold` (`u64::MAX`: none).
    hold_deadline: u64,
    held: usize,
    /// The entry the previous data frame started or joined: header prediction's candidate.
    hot: u16,
}

impl<F: AsRef<[u8]> + AsMut<[u8]>, const N: usize, const S: usize, const M: usize>
    Coalescer<F, N, S, M>
{
    /// A new engine with nothing held.
    ///
    /// The table size `N` must be a power of two below 65535, `S` at least 1 and `M` a power
    /// of two (checked at compile time).
    ///
    /// # Memory
    /// The engine is one value of about `N * S * (size_of::<F>() + 8)` bytes plus
    /// `N * 280 + M * 72` bytes (a 64-flow, 64-frame table of `Vec<u8>` frames: ~170 KB).
    /// `new` is a `const fn`, so a large table can be evaluated at compile time instead of on
    /// the stack: in a `static` for firmware, or `Box::new(const { ... })` on a host.
    ///
    /// ```
    /// use lro_core::{Coalescer, Config};
    /// // Evaluated at compile time: no stack space is used to build it.
    /// let engine = Box::new(const { Coalescer::<Vec<u8>, 1024, 64>::new(Config::lro()) });
    /// assert_eq!(lro_core::Coalesce::held_frames(&*engine), 0);
    /// ```
    pub const fn new(config: Config) -> Self {
        const { assert!(S >= 1 && S <= u16::MAX as usize, "S must be in 1..=65535") };
        const { assert!(M.is_power_of_two(), "M must be a power of two") };
        Self {
            config,
            index: Index::new(),
            entries: [const { Entry::EMPTY }; N],
            acks: [NO_MEMO; M],
            stats: Stats::new(),
            hold_deadline: u64::MAX,
            held: 0,
            hot: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Changes the configuration; takes effect for the next frame.
    pub fn set_config(&mut self, config: Config) {
        self.config = config;
    }

    /// Flows currently held.
    pub fn held_flows(&self) -> usize {
        self.index.len()
    }

    /// Resets the counters to zero.
    pub fn reset_stats(&mut self) {
        self.stats = Stats::new();
    }

    fn deliver_alone<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        reason: PassReason,
        parsed: Option<&Parsed>,
        sink: &mut K,
    ) -> Verdict {
        if let Some(p) = parsed {
            // Values are trusted only once the checksum was verified (`check_alone` verifies
            // before any other verdict). A SYN or RST starts or ends a connection: the flow's
            // ACK history no longer applies. Only a segment with ACK set carries an ACK number.
            let verified = !matches!(
                reason,
                PassReason::BadIpChecksum | PassReason::BadTcpChecksum | PassReason::Unverified
            );
            if verified {
                if p.flags & (tcp_flags::SYN | tcp_flags::RST) != 0 {
                    self.forget(&p.key);
                } else if p.flags & tcp_flags::ACK != 0 {
                    self.remember(&p.key, p.key.hash(), p.ack, p.window);
                }
            }
        }
        let len = frame.as_ref().len();
        let mut one: heapless::Vec<Held<F>, 1> = heapless::Vec::new();
        // A one-slot vector always has room for one frame.
        let _ = one.push(Held {
            frame,
            start: 0,
            end: len as u32,
        });
        self.stats.passed[reason.index()] += 1;
        self.stats.data_out += u64::from(parsed.is_some_and(|p| p.payload_len > 0));
        self.stats.frames_out += 1;
        self.stats.segments += 1;
        sink.segment(Segment {
            frames: one.as_mut_view(),
            info: SegmentInfo {
                frames: 1,
                gso_segs: u16::from(parsed.is_some_and(|p| p.payload_len > 0)),
                gso_size: 0,
                len,
                l3: parsed.map_or(0, |p| p.l3),
                l4: parsed.map_or(0, |p| p.l4),
                payload_len: parsed.map_or(0, |p| p.payload_len),
                checksum: OutChecksum::AsReceived,
                fixed_id: false,
                flow: parsed.map(|p| p.key),
                cause: Cause::Passed(reason),
            },
        });
        Verdict::Passed(reason)
    }

    /// Records the newest ACK state delivered for a flow (`Lro` only).
    #[inline]
    fn remember(&mut self, key: &FlowKey, hash: u32, ack: u32, window: u16) {
        if self.config.policy == Policy::Lro {
            let m = &self.acks[memo_slot::<M>(hash)];
            if m.valid && m.key == *key && before(ack, m.ack) {
                // An old (reordered) ACK never makes the flow's newest ACK state older.
                return;
            }
            self.acks[memo_slot::<M>(hash)] = AckMemo {
                key: *key,
                ack,
                window,
                valid: true,
            };
        }
    }

    /// Drops the ACK history of a flow (`Lro` only).
    #[inline]
    fn forget(&mut self, key: &FlowKey) {
        let m = &mut self.acks[memo_slot::<M>(key.hash())];
        if m.key == *key {
            m.valid = false;
        }
    }

    /// May a pure ACK with nothing held start a segment (`Lro`)? A held ACK may later be
    /// superseded, and a superseded duplicate would be lost to the sender's fast retransmit
    /// (RFC 5681 section 3.2), so it must be known not to duplicate the flow's newest delivered
    /// ACK state. An ACK older than that state may be held: the sender ignores it anyway
    /// (RFC 9293 section 3.10.7.4, SEG.ACK < SND.UNA), so superseding it loses nothing.
    fn classify_lone_ack(&self, p: &Parsed, hash: u32) -> Result<(), PassReason> {
        match self.memo(&p.key, hash) {
            None => Err(PassReason::UnknownAck),
            Some(m) if p.ack == m.ack && p.window == m.window => Err(PassReason::DupAck),
            Some(_) => Ok(()),
        }
    }

    /// The ACK memory of a flow, if it holds one.
    #[inline]
    fn memo(&self, key: &FlowKey, hash: u32) -> Option<&AckMemo> {
        let m = &self.acks[memo_slot::<M>(hash)];
        (m.valid && m.key == *key).then_some(m)
    }

    /// Flushes held segments a frame with this hint must not overtake.
    fn flush_for_hint<K: Sink<F> + ?Sized>(&mut self, hint: &FlowHint, sink: &mut K) {
        match hint {
            FlowHint::None => {}
            FlowHint::Flow(key) => {
                if let Some(slot) = self.index.find(key.hash(), key) {
                    self.flush_slot(slot, FlushReason::Unmergeable, sink);
                }
            }
            FlowHint::Addresses(key) => {
                // Ports unknown: every held flow of the address pair goes first. O(N), only for
                // fragments and truncated TCP headers.
                let mut cur = self.index.oldest();
                while let Some(slot) = cur {
                    cur = self.index.newer(slot);
                    if self.index.key(slot).same_addresses(key) {
                        self.flush_slot(slot, FlushReason::Unknown, sink);
                    }
                }
            }
        }
    }

    /// Checks the frame on its own; on success returns the sum of its TCP payload (for the
    /// merged checksum) and whether padding was trimmed.
    #[inline(always)]
    fn check_alone(
        &self,
        p: &Parsed,
        bytes: &[u8],
        meta: &RxMeta,
    ) -> Result<(Option<u16>, bool), PassReason> {
        // Checksums first: header values are only trusted (and remembered, see `AckMemo`)
        // once the checksum vouched for them, also for frames then delivered alone.
        let ip_end = p.ip_end as usize;
        let padded = ip_end < bytes.len();
        let pad_sum = if padded {
            csum::sum(&bytes[ip_end..])
        } else {
            0
        };
        let sum = self.verify(p, bytes, meta, pad_sum)?;
        let gro = self.config.policy == Policy::Gro;
        if p.ip_options {
            return Err(PassReason::IpOptions);
        }
        // Linux `inet_gro_receive`: tot_len must equal the remaining length (Gro); the first
        // seed trims padding only when its sum is zero, so a NIC's full-frame sum stays valid.
        if padded && (gro || !csum::is_zero(pad_sum)) {
            return Err(PassReason::Padding);
        }
        let flags = p.flags;
        if flags & (tcp_flags::SYN | tcp_flags::RST | tcp_flags::URG) != 0
            || flags & tcp_flags::ACK == 0
        {
            return Err(PassReason::Control);
        }
        if p.payload_len == 0 {
            if gro {
                return Err(PassReason::PureAck);
            }
            if flags & (tcp_flags::PSH | tcp_flags::FIN) != 0 {
                return Err(PassReason::PushFin);
            }
        }
        if !gro && matches!(p.options, TcpOptions::Other) {
            return Err(PassReason::Options);
        }
        Ok((sum, padded))
    }

    /// Verifies the IPv4 header and TCP checksums as the metadata allows and returns the TCP
    /// payload's sum. Linux `inet_gro_receive` (`ip_fast_csum`), `skb_gro_checksum_validate`.
    #[inline(always)]
    fn verify(
        &self,
        p: &Parsed,
        bytes: &[u8],
        meta: &RxMeta,
        pad_sum: u16,
    ) -> Result<Option<u16>, PassReason> {
        let l3 = p.l3 as usize;
        let l4 = p.l4 as usize;
        let payload = p.payload as usize;
        let ip_end = p.ip_end as usize;
        // Functions, not closures: a closure called from two arms was not inlined.
        #[inline(always)]
        fn hdr_sum(bytes: &[u8], l4: usize, payload: usize) -> u16 {
            csum::sum_header(&bytes[l4..payload])
        }
        #[inline(always)]
        fn pseudo_acc(p: &Parsed, l4: usize, ip_end: usize) -> u64 {
            p.key.pseudo_header_acc((ip_end - l4) as u32)
        }
        let hdr_sum = || hdr_sum(bytes, l4, payload);
        let pseudo_acc = || pseudo_acc(p, l4, ip_end);
        match meta.checksum {
            RxChecksum::Verified => Ok(match self.config.checksum_out {
                // Nothing to check, and the payload sum is never used: `Partial` output
                // writes only the pseudo-header sum.
                OutChecksum::Partial => None,
                // The checksum field makes pseudo + header + payload sum to -0, so the
                // payload's sum is the negation of the rest: no payload byte is read.
                _ => Some(csum::finish(csum::fold(
                    u64::from(hdr_sum()) + pseudo_acc(),
                ))),
            }),
            RxChecksum::Complete(total) => {
                let (hdr_sum, pseudo) = (hdr_sum(), csum::fold(pseudo_acc()));
                // The NIC summed from the end of the Ethernet header (VLAN tags and IP header
                // included) to the end of the frame, padding included.
                let start = match meta.link {
                    LinkKind::Ethernet => wire::ETHERNET_LEN,
                    LinkKind::RawIp => 0,
                };
                if !p.is_v6() && !csum::is_zero(csum::sum(&bytes[l3..l4])) {
                    return Err(PassReason::BadIpChecksum);
                }
                let before = csum::sum(bytes.get(start..l4).unwrap_or(&[]));
                let mut l4_sum = csum::sub(total, before);
                l4_sum = if (ip_end - start) % 2 == 1 {
                    csum::sub(l4_sum, pad_sum.swap_bytes())
                } else {
                    csum::sub(l4_sum, pad_sum)
                };
                if !csum::is_zero(csum::add(l4_sum, pseudo)) {
                    return Err(PassReason::BadTcpChecksum);
                }
                Ok(Some(csum::sub(l4_sum, hdr_sum)))
            }
            RxChecksum::None => {
                if !self.config.verify_checksums {
                    return Err(PassReason::Unverified);
                }
                let (hdr_sum, pseudo) = (hdr_sum(), csum::fold(pseudo_acc()));
                if !p.is_v6() && !csum::is_zero(csum::sum(&bytes[l3..l4])) {
                    return Err(PassReason::BadIpChecksum);
                }
                let payload_sum = csum::sum(&bytes[payload..ip_end]);
                if !csum::is_zero(csum::add(csum::add(pseudo, hdr_sum), payload_sum)) {
                    return Err(PassReason::BadTcpChecksum);
                }
                Ok(Some(payload_sum))
            }
        }
    }

    /// Linux `tcp_gro_receive` + `gro_receive_network_flush` (Gro), FreeBSD
    /// `tcp_lro_condense` rules (Lro): may `p` join the held segment `e`?
    #[inline(always)]
    fn check_merge(&self, e: &Entry<F, S>, p: &Parsed, bytes: &[u8]) -> Result<Merge, FlushReason> {
        const FIN_PSH: u32 = ((tcp_flags::FIN | tcp_flags::PSH) as u32) << 16;
        const WINDOW: u32 = 0xffff;
        if self.config.policy == Policy::Lro
            && p.payload_len == 0
            && p.ack == e.ack
            && p.window == e.window
        {
            // RFC 5681 section 2: no data, same ACK number and window as the flow's newest.
            // Checked before sequence contiguity: a duplicate sent after a loss may carry any
            // sequence number, and it must survive whatever else differs.
            return Ok(Merge::Duplicate);
        }
        if p.seq != e.next_seq {
            return Err(FlushReason::SeqGap);
        }
        if p.ttl != e.ttl || p.tos != e.tos || p.df != e.df {
            return Err(FlushReason::IpFields);
        }
        // The head frame's bytes, read only where a comparison needs them.
        let head = || head_bytes(e);
        if e.v6 {
            // Identical extension headers (`ipv6_gro_receive` memcmp).
            let ours = head().get(e.l3 as usize + wire::IPV6_LEN..e.l4 as usize);
            let theirs = bytes.get(p.l3 as usize + wire::IPV6_LEN..p.l4 as usize);
            if ours != theirs {
                return Err(FlushReason::IpFields);
            }
        }
        let diff = (p.flags_word ^ e.flags_word) & !FIN_PSH;
        match self.config.policy {
            Policy::Gro => {
                if diff & !WINDOW != 0 {
                    return Err(FlushReason::Flags);
                }
                if diff != 0 {
                    return Err(FlushReason::Window);
                }
                if p.ack != e.ack {
                    return Err(FlushReason::Ack);
                }
                // Options byte-identical to the head's (TSval included); same data offset is
                // guaranteed by the flags word.
                let ours = head().get(e.l4 as usize + wire::TCP_LEN..e.head_payload as usize);
                let theirs = bytes.get(p.l4 as usize + wire::TCP_LEN..p.payload as usize);
                if ours != theirs {
                    return Err(FlushReason::Options);
                }
                if !e.v6 && !ip_id_follows(e, p.ip_id) {
                    return Err(FlushReason::IpId);
                }
                if p.payload_len > e.mss {
                    return Err(FlushReason::Mss);
                }
            }
            Policy::Lro => {
                if diff & !WINDOW != 0 {
                    return Err(FlushReason::Flags);
                }
                if before(p.ack, e.ack) {
                    return Err(FlushReason::Ack);
                }
                match (p.options, e.ts) {
                    (TcpOptions::Timestamp { val, .. }, Some((held, _))) => {
                        // RFC 7323 PAWS order: the newest TSval must not be older.
                        if before(val, held) {
                            return Err(FlushReason::Options);
                        }
                    }
                    (TcpOptions::None, None) => {}
                    _ => return Err(FlushReason::Options),
                }
                if p.payload_len == 0 {
                    // `tcp_lro_condense`: a pure ACK that advances the ACK, or keeps it and
                    // opens the window, is superseded; the same ACK and window is a duplicate.
                    // Same ACK and window as the held state was caught above as a duplicate;
                    // the held state may be older than what was delivered last (a stale ACK
                    // held), so a duplicate of the delivered state is caught here.
                    if self
                        .memo(&p.key, p.key.hash())
                        .is_some_and(|m| p.ack == m.ack && p.window == m.window)
                    {
                        return Ok(Merge::Duplicate);
                    }
                    return if p.ack != e.ack || p.window > e.window {
                        Ok(Merge::Absorb)
                    } else {
                        Err(FlushReason::Window)
                    };
                }
            }
        }
        self.room_for(e, p.payload_len)?;
        Ok(Merge::Append)
    }

    /// Whether the segment can take `payload_len` more bytes in one more frame.
    #[inline(always)]
    fn room_for(&self, e: &Entry<F, S>, payload_len: u32) -> Result<(), FlushReason> {
        if e.ip_len + payload_len > u32::from(self.config.max_ip_len) {
            return Err(FlushReason::SizeLimit);
        }
        if e.frames.is_full() {
            return Err(FlushReason::FrameLimit);
        }
        Ok(())
    }

    /// Whether the segment has been held for `max_hold` at `now`.
    #[inline(always)]
    fn expired(&self, e: &Entry<F, S>, now: u64) -> bool {
        self.config
            .max_hold
            .is_some_and(|max| now.saturating_sub(e.first_time) >= max)
    }

    /// Completes the held segment in `slot`: finalises the head's headers and delivers it.
    fn flush_slot<K: Sink<F> + ?Sized>(&mut self, slot: u16, reason: FlushReason, sink: &mut K) {
        let flow = *self.index.key(slot);
        self.index.remove(slot);
        let (ack, window, hash) = {
            let e = &self.entries[usize::from(slot)];
            (e.ack, e.window, e.hash)
        };
        if !self.entries[usize::from(slot)].frames.is_empty() {
            self.remember(&flow, hash, ack, window);
        }
        let config = self.config;
        let e = &mut self.entries[usize::from(slot)];
        let count = e.frames.len();
        if count == 0 {
            return;
        }
        self.held -= count;
        let rewrite = count > 1 || e.absorbed > 0;
        let checksum = if rewrite {
            finalise(e, &config);
            config.checksum_out
        } else {
            OutChecksum::AsReceived
        };
        // The head from offset 0 to its IP end, then each appended frame's payload: the link
        // header plus the merged IP datagram (held frames' `start..end`, summed).
        let len = e.l3 as usize + e.ip_len as usize;
        debug_assert_eq!(
            len,
            e.frames
                .iter()
                .map(|h| (h.end - h.start) as usize)
                .sum::<usize>()
        );
        self.stats.flushes[reason.index()] += 1;
        self.stats.data_out += u64::from(e.payload_len > 0);
        self.stats.frames_out += count as u64;
        self.stats.segments += 1;
        if count > 1 {
            self.stats.coalesced += 1;
            self.stats.frames_merged += count as u64 - 1;
        }
        let info = SegmentInfo {
            frames: count as u16,
            gso_segs: e.data_frames,
            gso_size: if e.data_frames > 1 {
                e.max_payload as u16
            } else {
                0
            },
            len,
            l3: e.l3,
            l4: e.l4,
            payload_len: e.payload_len,
            checksum,
            fixed_id: e.fixed_id,
            flow: Some(flow),
            cause: Cause::Flushed(reason),
        };
        sink.segment(Segment {
            frames: e.frames.as_mut_view(),
            info,
        });
        e.frames.clear();
    }

    /// Everything header prediction does not decide: parse, look the flow up, check, merge or
    /// deliver. Out of line, so the predicted path keeps a small frame of its own.
    #[inline(never)]
    fn push_general<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let bytes = frame.as_ref();
        // Filled in place (see `wire::parse_into`): a returned `Parsed` costs a copy per frame.
        let mut parsed = Parsed::EMPTY;
        if let Err(u) = wire::parse_into(bytes, meta, &mut parsed) {
            self.flush_for_hint(&u.hint, sink);
            return self.deliver_alone(frame, u.reason, None, sink);
        }
        let p = &parsed;
        self.stats.data_in += u64::from(p.payload_len > 0);
        // The table hashes the key itself: a NIC hash that differs between frames of one flow
        // (or a hostile one) must not be able to split a flow and reorder it.
        let slot = self.index.find(p.key.hash(), &p.key);
        let (payload_sum, trimmed) = match self.check_alone(p, bytes, meta) {
            Ok(v) => v,
            Err(reason) => {
                if let Some(slot) = slot {
                    self.flush_slot(slot, FlushReason::Unmergeable, sink);
                }
                return self.deliver_alone(frame, reason, Some(p), sink);
            }
        };
        if let Some(slot) = slot {
            let e = &self.entries[usize::from(slot)];
            let decision = if self.expired(e, meta.time) {
                Err(FlushReason::MaxHold)
            } else {
                self.check_merge(e, p, bytes)
            };
            match decision {
                Ok(Merge::Absorb) => {
                    let e = &mut self.entries[usize::from(slot)];
                    e.ack = p.ack;
                    e.window = p.window;
                    if let Some(ts) = p.options.timestamps() {
                        e.ts = Some(ts);
                    }
                    e.absorbed += 1;
                    e.last_time = meta.time;
                    self.index.touch(slot);
                    self.stats.acks_merged += 1;
                    self.stats.released += 1;
                    if trimmed {
                        self.stats.trimmed += 1;
                    }
                    sink.release(frame);
                    return Verdict::Absorbed;
                }
                Ok(Merge::Append) => {
                    let a = Appended::from_parsed(p, payload_sum, trimmed, meta.time);
                    return self.append(slot, frame, &a, sink);
                }
                Ok(Merge::Duplicate) => {
                    // The held segment goes first, then the duplicate on its own.
                    self.flush_slot(slot, FlushReason::Unmergeable, sink);
                    return self.deliver_alone(frame, PassReason::DupAck, Some(p), sink);
                }
                Err(reason) => self.flush_slot(slot, reason, sink),
            }
        }
        self.start(frame, p, payload_sum, trimmed, meta, sink)
    }

    /// Appends a frame `check_merge` (or header prediction) accepted to the segment in `slot`.
    #[inline(always)]
    fn append<K: Sink<F> + ?Sized>(
        &mut self,
        slot: u16,
        frame: F,
        a: &Appended,
        sink: &mut K,
    ) -> Verdict {
        let e = &mut self.entries[usize::from(slot)];
        if e.data_frames == 1 && !e.v6 && a.ip_id == e.ip_id {
            e.fixed_id = true;
        }
        let at = e.payload_len as usize;
        match a.payload_sum {
            PayloadSum::Folded(sum) => e.payload_sum = csum::add_at_offset(e.payload_sum, sum, at),
            PayloadSum::Negated => match predicted_words(frame.as_ref(), e.predict) {
                // Even offset: the pieces' sums add as they are, and so do their negations.
                Some(words) if at.is_multiple_of(2) => {
                    e.negated_acc += words;
                    e.negated_frames += 1;
                }
                Some(words) => {
                    let sum = negated_sum(words + e.sum_base);
                    e.payload_sum = csum::add_at_offset(e.payload_sum, sum, at);
                }
                None => e.sums_ok = false,
            },
            PayloadSum::None => e.sums_ok = false,
        }
        e.payload_len += a.payload_len;
        e.ip_len += a.payload_len;
        e.next_seq = e.next_seq.wrapping_add(a.payload_len);
        e.ack = a.ack;
        e.window = a.window;
        if a.ts.is_some() {
            e.ts = a.ts;
        }
        let short = e.mss > 0 && a.payload_len < e.mss;
        if e.mss == 0 {
            e.mss = a.payload_len;
        }
        e.max_payload = e.max_payload.max(a.payload_len);
        e.data_frames += 1;
        e.last_time = a.time;
        // `check_merge` (or `predict`) saw room for one more frame.
        let _ = e.frames.push(Held {
            frame,
            start: a.payload,
            end: a.ip_end,
        });
        self.held += 1;
        if a.trimmed {
            self.stats.trimmed += 1;
        }
        self.index.touch(slot);
        self.hot = slot;
        // Linux `out_check_final`: PSH/FIN or a short segment completes it.
        let push_fin = a.flags & (tcp_flags::PSH | tcp_flags::FIN);
        if push_fin != 0 {
            self.entries[usize::from(slot)].or_flags |= push_fin;
            self.flush_slot(slot, FlushReason::PushFin, sink);
        } else if short {
            self.flush_slot(slot, FlushReason::ShortSegment, sink);
        }
        Verdict::Merged
    }

    /// Header prediction (see [`Config::header_prediction`]): when the frame continues the
    /// segment the previous data frame started or joined and the general path would append it, or
    /// that segment was delivered and the general path would start the flow's next segment with
    /// the frame, the entry, whether it is such a start, and what the frame brings; `None` when
    /// the general path has to decide. Changes nothing.
    ///
    /// Every condition of `check_alone` and `check_merge` (or `start`) for such a frame holds
    /// here: equal masked bytes give the head's flow key, IP version, header lengths, TOS,
    /// TTL, DF and fragment field, TCP flags but FIN/PSH (ACK set, no SYN, RST or URG) and
    /// option layout; the rest is checked field by field below.
    #[inline(always)]
    fn predict(&self, bytes: &[u8], meta: &RxMeta) -> Option<(u16, bool, Appended)> {
        const L4: usize = wire::ETHERNET_LEN + wire::IPV4_LEN;
        if !self.config.header_prediction
            || meta.link != LinkKind::Ethernet
            || meta.vlan_stripped.is_some()
            || meta.checksum != RxChecksum::Verified
        {
            return None;
        }
        // Always below N (a power of two); the mask lets the compiler drop the bounds check.
        let slot = (usize::from(self.hot) & (N - 1)) as u16;
        let e = &self.entries[usize::from(slot)];
        let mask = match e.predict {
            Layout::No => return None,
            Layout::Plain => &MASK_PLAIN,
            Layout::Timestamp => &MASK_TIMESTAMP,
        };
        let h = bytes.first_chunk::<PREDICT_LEN>()?;
        let mut diff = 0u8;
        for i in 0..PREDICT_LEN {
            diff |= (h[i] ^ e.template.0[i]) & mask[i];
        }
        if diff != 0 {
            return None;
        }
        let be16 = |at: usize| u16::from_be_bytes([h[at], h[at + 1]]);
        let be32 = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        // No padding (a padded frame's trim is the general path's), and some payload.
        let ip_end = wire::ETHERNET_LEN + usize::from(be16(wire::ETHERNET_LEN + 2));
        let payload = e.head_payload as usize;
        if ip_end != bytes.len() || ip_end <= payload {
            return None;
        }
        let payload_len = (ip_end - payload) as u32;
        // Fields are read where they are used: fewer values live across the checks.
        let seq = be32(L4 + 4);
        let ack = be32(L4 + 8);
        let ts = match e.predict {
            Layout::Timestamp => {
                let t = bytes.get(L4 + wire::TCP_LEN + 4..L4 + wire::TCP_LEN + 12)?;
                Some((
                    u32::from_be_bytes([t[0], t[1], t[2], t[3]]),
                    u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
                ))
            }
            _ => None,
        };
        let start = e.frames.is_empty();
        if start {
            // The flow's previous segment was delivered: the frame starts the next one unless
            // it carries PSH/FIN (delivered alone) or the flow is held elsewhere (the key and
            // hash stay with the slot until it is reused, and then the template changes too).
            if h[L4 + 13] & (tcp_flags::PSH | tcp_flags::FIN) != 0
                || self.index.find(e.hash, self.index.key(slot)).is_some()
            {
                return None;
            }
        } else {
            if seq != e.next_seq
                || self.room_for(e, payload_len).is_err()
                || self.expired(e, meta.time)
            {
                return None;
            }
            match self.config.policy {
                Policy::Gro => {
                    if ack != e.ack
                        || be16(L4 + 14) != e.window
                        || ts != e.ts
                        || !ip_id_follows(e, be16(wire::ETHERNET_LEN + 4))
                        || payload_len > e.mss
                    {
                        return None;
                    }
                }
                Policy::Lro => {
                    if before(ack, e.ack) {
                        return None;
                    }
                    if let (Some((val, _)), Some((held, _))) = (ts, e.ts) {
                        if before(val, held) {
                            return None;
                        }
                    }
                }
            }
        }
        let payload_sum = match self.config.checksum_out {
            OutChecksum::Partial => PayloadSum::None,
            _ => PayloadSum::Negated,
        };
        Some((
            slot,
            start,
            Appended {
                seq,
                flags_word: be32(L4 + 12),
                payload: payload as u32,
                ip_end: ip_end as u32,
                payload_len,
                ack,
                window: be16(L4 + 14),
                ts,
                flags: h[L4 + 13],
                ip_id: be16(wire::ETHERNET_LEN + 4),
                payload_sum,
                trimmed: false,
                time: meta.time,
            },
        ))
    }

    fn start<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        p: &Parsed,
        payload_sum: Option<u16>,
        trimmed: bool,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let hash = p.key.hash();
        if p.flags & (tcp_flags::PSH | tcp_flags::FIN) != 0 {
            // Linux: a segment with PSH/FIN is never held (`out_check_final`).
            return self.deliver_alone(frame, PassReason::PushFin, Some(p), sink);
        }
        if p.payload_len == 0 {
            if let Err(reason) = self.classify_lone_ack(p, hash) {
                return self.deliver_alone(frame, reason, Some(p), sink);
            }
        }
        // Counted only once the frame is held without its padding (a frame delivered alone
        // goes out as received).
        if trimmed {
            self.stats.trimmed += 1;
        }
        if self.index.is_full() {
            if let Some(oldest) = self.index.oldest() {
                self.stats.evictions += 1;
                self.flush_slot(oldest, FlushReason::Evicted, sink);
            }
        }
        let Some(slot) = self.index.insert(hash, &p.key) else {
            // Unreachable with N >= 1, but never lose a frame.
            return self.deliver_alone(frame, PassReason::Malformed, Some(p), sink);
        };
        let head = Head {
            frame: Appended::from_parsed(p, payload_sum, trimmed, meta.time),
            l3: p.l3,
            l4: p.l4,
            ttl: p.ttl,
            tos: p.tos,
            df: p.df,
            v6: p.is_v6(),
            layout: layout(p, frame.as_ref(), meta),
            pseudo_base: p.key.pseudo_header_base(),
            hash,
        };
        self.init_entry(slot, frame, &head)
    }

    /// Starts a segment in the free entry `slot` with `frame` as its head.
    #[inline(always)]
    fn init_entry(&mut self, slot: u16, frame: F, h: &Head) -> Verdict {
        let (a, time) = (&h.frame, h.frame.time);
        let e = &mut self.entries[usize::from(slot)];
        if h.layout != Layout::No {
            if let Some(t) = frame.as_ref().first_chunk::<PREDICT_LEN>() {
                e.template = Template(*t);
            }
        }
        e.predict = h.layout;
        e.pseudo_base = h.pseudo_base;
        e.sum_base = {
            const L4: usize = wire::ETHERNET_LEN + wire::IPV4_LEN;
            let t = &e.template.0;
            // Network-order values in native order: their bytes as they sit in a frame. Minus
            // the IPv4 header length is plus its ones' complement.
            let base = u64::from(csum::fold(h.pseudo_base).to_be())
                + u64::from((!(wire::IPV4_LEN as u16)).to_be());
            match h.layout {
                Layout::No => 0,
                Layout::Plain => base + ne32(t, L4),
                Layout::Timestamp => base + ne32(t, L4) + ne32(t, L4 + wire::TCP_LEN),
            }
        };
        e.hash = h.hash;
        // Prediction takes data frames only: a segment headed by a pure ACK (the reverse
        // direction of a bulk flow, typically) leaves the hot slot to the flow whose data
        // comes next.
        if a.payload_len > 0 {
            self.hot = slot;
        }
        // Field by field: the frame vector stays in place (moving it would copy S slots).
        e.l3 = h.l3;
        e.l4 = h.l4;
        e.head_payload = a.payload;
        e.next_seq = a.seq.wrapping_add(a.payload_len);
        e.ack = a.ack;
        e.window = a.window;
        e.ts = a.ts;
        e.flags_word = a.flags_word;
        e.or_flags = 0;
        e.ttl = h.ttl;
        e.tos = h.tos;
        e.df = h.df;
        e.v6 = h.v6;
        e.ip_id = a.ip_id;
        e.fixed_id = false;
        e.mss = a.payload_len;
        e.max_payload = a.payload_len;
        e.data_frames = u16::from(a.payload_len > 0);
        e.ip_len = a.ip_end - h.l3;
        (e.payload_sum, e.negated_acc, e.negated_frames, e.sums_ok) = match a.payload_sum {
            PayloadSum::None => (0, 0, 0, false),
            PayloadSum::Folded(sum) => (sum, 0, 0, true),
            // The head's payload starts the segment's, at offset 0.
            PayloadSum::Negated => match predicted_words(frame.as_ref(), h.layout) {
                Some(words) => (0, words, 1, true),
                None => (0, 0, 0, false),
            },
        };
        e.payload_len = a.payload_len;
        e.absorbed = 0;
        e.first_time = time;
        e.last_time = time;
        // The entry's vector was emptied when it was last flushed, so this cannot fail.
        let _ = e.frames.push(Held {
            frame,
            start: 0,
            end: a.ip_end,
        });
        self.held += 1;
        if let Some(max) = self.config.max_hold {
            self.hold_deadline = self.hold_deadline.min(time.saturating_add(max));
        }
        Verdict::Held
    }

    /// Starts a segment with a frame header prediction matched against the template of the
    /// empty entry `hot` (the flow's previous segment, delivered): what `start` does after the
    /// parser, the lookup and the checks, which the prediction stood in for.
    fn start_predicted<K: Sink<F> + ?Sized>(
        &mut self,
        hot: u16,
        frame: F,
        a: Appended,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let old = &self.entries[usize::from(hot)];
        let key = *self.index.key(hot);
        let head = Head {
            frame: a,
            l3: wire::ETHERNET_LEN as u32,
            l4: (wire::ETHERNET_LEN + wire::IPV4_LEN) as u32,
            // Equal to the template's, as the mask requires.
            ttl: old.ttl,
            tos: old.tos,
            df: old.df,
            v6: false,
            layout: old.predict,
            pseudo_base: old.pseudo_base,
            hash: old.hash,
        };
        if self.index.is_full() {
            if let Some(oldest) = self.index.oldest() {
                self.stats.evictions += 1;
                self.flush_slot(oldest, FlushReason::Evicted, sink);
            }
        }
        let Some(slot) = self.index.insert(head.hash, &key) else {
            // Unreachable (room was made above), but never lose a frame.
            return self.push_general(frame, meta, sink);
        };
        self.init_entry(slot, frame, &head)
    }
}

/// The layout header prediction sees in a segment's head (`No` when it does not cover it).
#[inline(always)]
fn layout(p: &Parsed, bytes: &[u8], meta: &RxMeta) -> Layout {
    const L3: usize = wire::ETHERNET_LEN;
    const L4: usize = L3 + wire::IPV4_LEN;
    let Some(h) = bytes.first_chunk::<PREDICT_LEN>() else {
        return Layout::No;
    };
    // The shape `wire::parse_into`'s fast path reads: untagged Ethernet (IP at 14), IPv4 with
    // IHL 5 (TCP at 34), TCP (`p` exists), no flag but DF and no fragment offset.
    if meta.link != LinkKind::Ethernet
        || meta.vlan_stripped.is_some()
        || p.is_v6()
        || p.l3 != L3 as u32
        || p.l4 != L4 as u32
        || h[L3 + 6] & !0x40 != 0
        || h[L3 + 7] != 0
    {
        return Layout::No;
    }
    match (p.payload as usize - L4, p.options) {
        (wire::TCP_LEN, TcpOptions::None) => Layout::Plain,
        (32, TcpOptions::Timestamp { .. }) if h[L4 + 20..L4 + 24] == [1, 1, 8, 10] => {
            Layout::Timestamp
        }
        _ => Layout::No,
    }
}

/// Serial-number order (RFC 1982, as TCP compares sequence, ACK and timestamp values): `a` is
/// before `b`.
#[inline(always)]
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Linux `inet_gro_flush` for IPv4 under `Gro`: the frame's ID is the head's plus the data
/// frames so far, or the same fixed ID (fixed since the second frame).
#[inline(always)]
fn ip_id_follows<F, const S: usize>(e: &Entry<F, S>, ip_id: u16) -> bool {
    let offset = ip_id.wrapping_sub(e.ip_id);
    let fixed = e.fixed_id || (e.data_frames == 1 && offset == 0);
    offset == if fixed { 0 } else { e.data_frames }
}

/// The bytes of a held segment's first frame (empty when nothing is held).
#[inline(always)]
fn head_bytes<F: AsRef<[u8]>, const S: usize>(e: &Entry<F, S>) -> &[u8] {
    e.frames.first().map(|h| h.frame.as_ref()).unwrap_or(&[])
}

/// Rewrites the head's headers for the merged segment (Linux `inet_gro_complete`,
/// `ipv6_gro_complete`, `tcp_gro_complete`; FreeBSD `tcp_lro_update_checksum` for the newest
/// ACK/window/timestamps under `Lro`).
fn finalise<F: AsRef<[u8]> + AsMut<[u8]>, const S: usize>(e: &mut Entry<F, S>, config: &Config) {
    let (l3, l4, payload) = (e.l3 as usize, e.l4 as usize, e.head_payload as usize);
    let ip_len = e.ip_len;
    let lro = config.policy == Policy::Lro;
    if !e.sums_ok && config.checksum_out != OutChecksum::Partial {
        // Some frames arrived under `Partial` output, which keeps no sums: read the payload.
        let mut sum = 0u16;
        let mut at = 0usize;
        for (i, h) in e.frames.iter().enumerate() {
            let start = if i == 0 { payload } else { h.start as usize };
            let piece = h.frame.as_ref().get(start..h.end as usize).unwrap_or(&[]);
            sum = csum::add_at_offset(sum, csum::sum(piece), at);
            at += piece.len();
        }
        e.payload_sum = sum;
        e.negated_acc = 0;
        e.negated_frames = 0;
        e.sums_ok = true;
    }
    let Some(head) = e.frames.first_mut() else {
        return;
    };
    let b = head.frame.as_mut();
    if b.len() < payload {
        return;
    }
    if e.v6 {
        wire::write_be16(b, l3 + 4, (ip_len - wire::IPV6_LEN as u32) as u16);
    } else {
        wire::write_be16(b, l3 + wire::IPV4_TOTAL_LEN, ip_len as u16);
        wire::write_be16(b, l3 + wire::IPV4_CHECKSUM, 0);
        let c = csum::finish(csum::sum_header(&b[l3..l4]));
        wire::write_be16(b, l3 + wire::IPV4_CHECKSUM, c);
    }
    b[l4 + wire::TCP_FLAGS] |= e.or_flags;
    if lro {
        wire::write_be32(b, l4 + wire::TCP_ACK, e.ack);
        wire::write_be16(b, l4 + wire::TCP_WINDOW, e.window);
        if let Some((val, ecr)) = e.ts {
            // Aligned NOP,NOP,TS: kind at +22, TSval at +24, TSecr at +28.
            wire::write_be32(b, l4 + wire::TCP_LEN + 4, val);
            wire::write_be32(b, l4 + wire::TCP_LEN + 8, ecr);
        }
    }
    let tcp_len = ip_len - (l4 - l3) as u32;
    let pseudo = csum::fold(wire::pseudo_header_acc_from(e.pseudo_base, tcp_len));
    wire::write_be16(b, l4 + wire::TCP_CHECKSUM, 0);
    let value = match config.checksum_out {
        OutChecksum::Partial => pseudo,
        OutChecksum::Full | OutChecksum::AsReceived => {
            let hdr = csum::sum_header(&b[l4..payload]);
            // Folding the negated pieces' sum here, not per frame, can turn a -0 (0xffff)
            // payload sum into +0 (0): the same number, and adding it to the nonzero
            // pseudo-header sum gives the same result either way.
            let payload_sum = match e.negated_frames {
                0 => e.payload_sum,
                n => {
                    let acc = e.negated_acc + u64::from(n) * e.sum_base;
                    csum::add(e.payload_sum, negated_sum(acc))
                }
            };
            csum::finish(csum::add(csum::add(pseudo, hdr), payload_sum))
        }
    };
    wire::write_be16(b, l4 + wire::TCP_CHECKSUM, value);
}

impl<F: AsRef<[u8]> + AsMut<[u8]>, const N: usize, const S: usize, const M: usize> Coalesce<F>
    for Coalescer<F, N, S, M>
{
    fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict {
        self.stats.frames_in += 1;
        if let Some((slot, start, a)) = self.predict(frame.as_ref(), meta) {
            self.stats.data_in += 1;
            self.stats.predicted += 1;
            return if start {
                self.start_predicted(slot, frame, a, meta, sink)
            } else {
                self.append(slot, frame, &a, sink)
            };
        }
        self.push_general(frame, meta, sink)
    }

    fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        while let Some(slot) = self.index.oldest() {
            self.flush_slot(slot, FlushReason::FlushAll, sink);
        }
        self.hold_deadline = u64::MAX;
    }

    fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        if let Some(timeout) = self.config.idle_timeout {
            while let Some(slot) = self.index.oldest() {
                if now.saturating_sub(self.entries[usize::from(slot)].last_time) < timeout {
                    break;
                }
                self.flush_slot(slot, FlushReason::Idle, sink);
            }
        }
        if let Some(max) = self.config.max_hold {
            if now >= self.hold_deadline {
                let mut next = u64::MAX;
                let mut cur = self.index.oldest();
                while let Some(slot) = cur {
                    cur = self.index.newer(slot);
                    let due = self.entries[usize::from(slot)]
                        .first_time
                        .saturating_add(max);
                    if now >= due {
                        self.flush_slot(slot, FlushReason::MaxHold, sink);
                    } else {
                        next = next.min(due);
                    }
                }
                self.hold_deadline = next;
            }
        }
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn held_frames(&self) -> usize {
        self.held
    }
}
