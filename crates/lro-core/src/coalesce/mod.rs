//! Coalescing: the [`Coalescer`] interface, its configuration, what it delivers, and the
//! [`Engine`] that implements it.
//!
//! The engine's parts, each in a file of its own:
//! - `engine`: the per-frame path (header prediction, then parse, look up, check, merge or
//!   deliver), segment delivery, flushing;
//! - `rules`: every merge and flush rule, one function each, with its source;
//! - `predict`: header prediction's template and fast read of a frame;
//! - `ack_memo`: the newest delivered ACK per flow (`Lro` duplicate-ACK protection);
//! - `gate`: when header prediction pauses (bursts in which it took almost no frame);
//! - `fixup`: lengths and checksums rewritten at delivery (shared with [`crate::gso`]);
//! - `storage`: the engine's memory ([`Capacity`], [`Sizes`]) and a held segment's state.

mod ack_memo;
mod engine;
pub(crate) mod fixup;
mod gate;
mod predict;
mod rules;
mod storage;

use core::ops::Range;

use crate::encap::TunnelKey;
use crate::flow::FlowKey;
use crate::meta::RxMeta;
use crate::stats::{FlushReason, PassReason, Stats, Verdict};

pub use engine::Engine;
#[doc(hidden)]
pub use storage::{Arrays, Parts, Store};
pub use storage::{Capacity, DefaultSizes, Held, Sizes, SmallSizes};

/// Which merge rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Policy {
    /// Linux GRO's rules exactly (`tcp_gro_receive`, `inet_gro_flush`, `ipv6_gro_flush`): only
    /// what software GSO can split back into the exact original frames. For forwarding, and for
    /// anyone who needs reversibility.
    Gro,
    /// For an endpoint: everything `Gro` merges with the MSS rule relaxed, plus pure ACKs whose
    /// ACK number advances or whose window opens at the same ACK number (superseded ACKs are released, the newest ACK, window and timestamps
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

impl OutChecksum {
    /// What a rewritten segment's TCP checksum is under this mode: `Partial`, else `Full`
    /// (`AsReceived` is only ever a label for a segment of one frame left as it came).
    #[inline(always)]
    pub(crate) const fn rewritten(self) -> Self {
        match self {
            Self::Partial => Self::Partial,
            Self::Full | Self::AsReceived => Self::Full,
        }
    }
}

/// Engine configuration. Build it with [`Config::gro`] or [`Config::lro`] and the `with_*`
/// methods.
///
/// ```
/// use lro_core::{Config, Policy};
/// let config = Config::lro()
///     .with_hash_seed(0x5eed)
///     .with_idle_timeout(20_000)
///     .with_max_hold(100_000);
/// assert_eq!(config.policy, Policy::Lro);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Config {
    /// Merge rules.
    pub policy: Policy,
    /// Verify checksums in software when the metadata says
    /// [`RxChecksum::None`](crate::RxChecksum::None). When off, such frames are never merged
    /// ([`PassReason::Unverified`]): a checksum nobody checked is never laundered into a
    /// segment carrying a valid one.
    pub verify_checksums: bool,
    /// How coalesced segments' TCP checksums are written ([`OutChecksum::AsReceived`] reads
    /// as [`OutChecksum::Full`]: a rewritten segment never keeps its head's checksum).
    pub checksum_out: OutChecksum,
    /// Largest datagram a segment may grow to, from its first (outer) IP header (Linux
    /// `GRO_LEGACY_MAX_SIZE`: 65535, also the most an IPv4 total length can say).
    pub max_ip_len: u16,
    /// Flush a flow idle for at least this long, on the [`RxMeta::time`] clock, when
    /// [`Coalescer::flush_idle`] runs. `None`: never by idleness.
    pub idle_timeout: Option<u64>,
    /// Flush a segment held for at least this long since its first frame, checked when the flow
    /// receives a frame and in [`Coalescer::flush_idle`]. `None`: no limit.
    pub max_hold: Option<u64>,
    /// Header prediction (on by default): a frame whose headers equal those of the segment the
    /// previous data frame started or joined, in every byte that must not change (link header,
    /// addresses, ports, IP and TCP fields, option layout, tunnel headers), is read at that
    /// segment's offsets and given to the merge rules without the parser and the flow lookup;
    /// once that segment was delivered, the frame starts the flow's next one the same way. Van
    /// Jacobson's TCP fast path applied to GRO. It decides nothing itself: the rules are the
    /// general path's, and a property test and the `coalesce` fuzz target require identical
    /// output with it off.
    ///
    /// Where it hardly ever hits (more flows than entries, each sending one frame at a time)
    /// it only costs, so it pauses itself: after a burst (the frames between two calls of
    /// [`Coalescer::flush_all`] or [`Coalescer::flush_idle`], a driver's polls) of at least 16
    /// frames in which it took fewer than one in eight, the next burst runs without it; it is
    /// tried again after each pause, which doubles (up to 16 bursts) while the bursts it is
    /// tried in stay poor ([`Stats::prediction_paused`] counts the bursts run without it).
    pub header_prediction: bool,
    /// Adaptive bypass (off by default): after a burst (as for
    /// [`header_prediction`](Config::header_prediction)) in which at least 16 frames were held
    /// or merged (frames delivered alone anyway, such as control frames, do not count) and
    /// fewer than one in 32 of them merged into a segment (appended or absorbed), the next
    /// burst's frames pass through unparsed and unheld ([`PassReason::Bypassed`]), and
    /// coalescing is tried again after each such pause, which doubles (up to 16 bursts) while
    /// the bursts it is tried in stay poor. For traffic in which frames rarely find another of
    /// their flow (many request-response flows, each sending a frame at a time), where
    /// coalescing would cost the parser, the lookup, a held entry and a delivery per frame for
    /// no merge.
    ///
    /// What it changes: merges a paused burst would have found are not made (at most 16
    /// bursts after traffic turns mergeable); bypassed frames are not parsed, so they count in
    /// `frames_in`, `frames_out` and `passed` but not in `data_in`/`data_out` or the tunnel
    /// counters, and their [`SegmentInfo`] has no flow. What it keeps: every frame comes back,
    /// in order within its flow: segments held when a pause begins (by
    /// [`Coalescer::flush_idle`]) are delivered first ([`FlushReason::Bypass`]), and the ACK
    /// memory is cleared, so no pure ACK delivered unseen can make a later duplicate look new.
    /// [`Stats::bypassed_bursts`] counts the paused bursts. Behind
    /// [`RssSorted`](crate::rss::RssSorted), which ends the inner engine's burst at every hash
    /// run, bursts are one flow's run and seldom reach 16 frames: the bypass hardly engages
    /// there (sorting is the other answer to many flows).
    pub adaptive_bypass: bool,
    /// The seed of the flow table's hash ([`FlowHasher`](crate::flow::FlowHasher)). Give each
    /// engine a random one (a hardware RNG, `getrandom` on a host): an attacker who cannot
    /// learn it cannot make flows collide in one bucket. The default is a fixed constant.
    /// Changing it with [`Engine::set_config`] re-buckets the table.
    pub hash_seed: u64,
}

impl Config {
    /// The seed of [`Config::gro`] and [`Config::lro`]: a fixed constant, fine for tests and
    /// captures; give production engines a random one ([`Config::with_hash_seed`]).
    pub const DEFAULT_HASH_SEED: u64 = 0x6c72_6f2d_636f_7265;

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
            adaptive_bypass: false,
            hash_seed: Self::DEFAULT_HASH_SEED,
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

    /// The same configuration with another segment size limit (see [`Config::max_ip_len`]).
    pub const fn with_max_ip_len(mut self, max: u16) -> Self {
        self.max_ip_len = max;
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

    /// The same configuration with adaptive bypass on or off (see
    /// [`Config::adaptive_bypass`]).
    pub const fn with_adaptive_bypass(mut self, on: bool) -> Self {
        self.adaptive_bypass = on;
        self
    }

    /// The same configuration with a hash seed (see [`Config::hash_seed`]).
    pub const fn with_hash_seed(mut self, seed: u64) -> Self {
        self.hash_seed = seed;
        self
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::lro()
    }
}

/// Receives what an engine emits. Every frame pushed comes back exactly once: inside a
/// [`Segment`] or through [`Sink::release`].
pub trait Sink<F> {
    /// A segment to pass up: several coalesced frames, or one frame on its own.
    ///
    /// Frames the implementation does not take out with [`Segment::into_frames`] or
    /// [`Segment::into_parts`] are dropped when this returns (for a driver handle, its `Drop`
    /// recycles the buffer).
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

/// A coalescing engine: the per-frame operations a driver's poll loop calls, over any frame
/// type `F` that lends its bytes (`&mut [u8]`, `Vec<u8>`, a driver's buffer handle).
///
/// Implemented by [`Engine`] and by wrappers around it (the RSS-sorting batch
/// [`RssSorted`](crate::rss::RssSorted)), so a driver or a stack can take any of them.
/// [`Engine`] also has these methods as its own, so calling them needs no import.
///
/// ```
/// use lro_core::{Coalescer, Config, Engine, RxMeta, Segment, Sink};
///
/// /// Counts what comes out, whatever the engine.
/// fn run<C: Coalescer<Vec<u8>>>(engine: &mut C, frames: Vec<Vec<u8>>) -> usize {
///     struct Count(usize);
///     impl Sink<Vec<u8>> for Count {
///         fn segment(&mut self, _s: Segment<'_, Vec<u8>>) {
///             self.0 += 1;
///         }
///     }
///     let mut sink = Count(0);
///     for f in frames {
///         engine.push(f, &RxMeta::ethernet(0), &mut sink);
///     }
///     engine.flush_all(&mut sink);
///     sink.0
/// }
/// let mut engine: Engine<Vec<u8>> = Engine::new(Config::lro());
/// assert_eq!(run(&mut engine, vec![vec![0; 60]]), 1);
/// ```
pub trait Coalescer<F> {
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
impl<F, C: Coalescer<F> + ?Sized> Coalescer<F> for &mut C {
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
    /// [`Policy::Gro`] the first frame's payload. Zero unless two or more frames carry
    /// payload (`gso_segs` of at least 2): there is nothing to re-segment.
    pub gso_size: u16,
    /// Length in bytes of the segment as one contiguous frame ([`Segment::copy_to`]).
    pub len: usize,
    /// Offset of the (inner) IP header.
    pub l3: u32,
    /// Offset of the TCP header (zero when not TCP).
    pub l4: u32,
    /// TCP payload bytes in the segment.
    pub payload_len: u32,
    /// Its TCP checksum state.
    pub checksum: OutChecksum,
    /// The IPv4 IDs of the merged frames were all equal (Linux `SKB_GSO_TCP_FIXEDID`).
    pub fixed_id: bool,
    /// The same for the outer IPv4 header of a tunnel (Linux 6.18 `FIXEDID_OUTER`).
    pub fixed_outer_id: bool,
    /// The flow, when the frame was TCP. `None` also for a frame the adaptive bypass passed
    /// through unparsed ([`PassReason::Bypassed`], [`Config::adaptive_bypass`]), whose
    /// offsets, `gso_segs` and `payload_len` are zero as for a frame that is not TCP.
    pub flow: Option<FlowKey>,
    /// The tunnel, when the frames arrived through an encapsulation.
    pub tunnel: Option<TunnelKey>,
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

/// One frame of a delivered segment, taken out of it ([`Segment::into_parts`]): the frame and
/// the byte range of it that belongs to the segment (the head: from its first byte to the end
/// of its payload, headers rewritten; the others: their payload).
#[derive(Debug)]
pub struct Part<F> {
    /// The frame.
    pub frame: F,
    /// Its bytes in the segment.
    pub range: Range<usize>,
}

/// One delivered segment: the head frame, its headers rewritten in place, followed by the
/// payloads of the frames merged into it (scatter-gather). [`Segment::copy_to`] makes one
/// contiguous frame of it for stacks that need that.
pub struct Segment<'a, F> {
    frames: &'a mut [Option<Held<F>>],
    info: SegmentInfo,
}

impl<'a, F: AsRef<[u8]>> Segment<'a, F> {
    pub(crate) fn new(frames: &'a mut [Option<Held<F>>], info: SegmentInfo) -> Self {
        Self { frames, info }
    }

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
        self.frames.iter().flatten().map(|h| {
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
        self.frames.iter().flatten().map(|h| &h.frame)
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
        self.frames
            .iter_mut()
            .filter_map(Option::take)
            .map(|h| h.frame)
    }

    /// Takes the frames out (head first) with the byte range of each that belongs to the
    /// segment: for a driver that hands the pieces on (scatter-gather) and recycles each frame
    /// when its piece is consumed.
    ///
    /// (The frames are made by `lro_core::testing`, which needs the crate's `test-utils`
    /// feature.)
    ///
    /// ```
    /// use lro_core::{Config, Engine, RxChecksum, RxMeta, Segment, Sink};
    /// use lro_core::testing::{FrameSpec, TCP_ACK};
    ///
    /// struct Pieces(Vec<(usize, std::ops::Range<usize>)>);
    /// impl Sink<Vec<u8>> for Pieces {
    ///     fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
    ///         for part in segment.into_parts() {
    ///             self.0.push((part.frame.len(), part.range));
    ///         }
    ///     }
    /// }
    /// let frame = |seq| {
    ///     let spec = FrameSpec::ipv4_tcp(1, 2).seq(seq).flags(TCP_ACK).payload(&[7; 100]);
    ///     let mut b = vec![0; spec.len()];
    ///     spec.write(&mut b).unwrap();
    ///     b
    /// };
    /// let mut engine: Engine<Vec<u8>> = Engine::new(Config::lro());
    /// let mut sink = Pieces(Vec::new());
    /// let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    /// engine.push(frame(1), &meta, &mut sink);
    /// engine.push(frame(101), &meta, &mut sink);
    /// engine.flush_all(&mut sink);
    /// // The head whole (54 header bytes + 100), then the second frame's payload.
    /// assert_eq!(sink.0, [(154, 0..154), (154, 54..154)]);
    /// ```
    pub fn into_parts(self) -> impl Iterator<Item = Part<F>> + 'a
    where
        F: 'a,
    {
        self.frames
            .iter_mut()
            .filter_map(Option::take)
            .map(|h| Part {
                frame: h.frame,
                range: h.start as usize..h.end as usize,
            })
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
