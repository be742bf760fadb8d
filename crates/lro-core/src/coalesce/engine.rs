//! The engine: the per-frame path and segment delivery.
//!
//! Every frame takes one of two ways to its [`Facts`]: header prediction reads them at the
//! offsets of a matching template ([`predict`]), or the parser does ([`parse::parse_into`])
//! and the checksums are verified. From there both ask [`Engine::judge`], which applies the
//! [rule table](super::rules), and share the steps that carry its decision out (append,
//! absorb, flush, start, deliver alone). The general path reaches them through
//! [`Engine::act`]; the predicted one calls them directly, and falls back to `act` for what it
//! does not handle itself.

use core::marker::PhantomData;

use super::ack_memo;
use super::fixup::{self, Layers, TcpSum};
use super::gate::{Bypass, Prediction};
use super::predict::{self, PayloadSum, Predicted, Probe, Shape};
use super::rules::{self, Compared, Facts, Fields, HeadMatch, Merge};
use super::storage::{
    Capacity, DefaultSizes, FlowState, Held, IpHeld, Parts, Store, Sums, CANDIDATES_PER_FLOW,
};
use super::{Cause, Coalescer, Config, OutChecksum, Policy, Segment, SegmentInfo, Sink};
use crate::csum;
use crate::encap::{Encap, NoEncap, TunnelSlot};
use crate::flow::table::Taken;
use crate::flow::{FlowHasher, Key};
use crate::meta::{RxChecksum, RxMeta};
use crate::parse::{self, FlowHint, IpFacts, Parsed};
use crate::stats::{FlushReason, PassReason, Stats, Verdict};
use crate::wire::tcp::{self, flags};
use crate::wire::{write_be16, write_be32};

/// The allocation-free coalescing engine.
///
/// `F` is the frame type: anything that lends its bytes mutably (`&mut [u8]`, `Vec<u8>`, a
/// driver's buffer handle). `C` says how much it holds ([`Sizes`](super::Sizes): flows, frames
/// per segment, ACK records; [`DefaultSizes`] by default). `E` is the encapsulation it looks
/// through ([`NoEncap`] by default; `lro-gre` provides GRE). All memory is inside the value.
///
/// # Teardown
/// Frames the engine holds are delivered by [`Engine::flush_all`]; call it before dropping the
/// engine (at the end of every poll, and at shutdown). Dropping an engine that still holds
/// frames drops them, which for a driver's buffer handle returns the buffer through its `Drop`:
/// nothing leaks, but those frames are not passed up.
///
/// ```
/// use lro_core::{Config, Engine, RxMeta, Segment, Sink};
///
/// struct Count(usize);
/// impl<F: AsRef<[u8]>> Sink<F> for Count {
///     fn segment(&mut self, _segment: Segment<'_, F>) {
///         self.0 += 1;
///     }
/// }
///
/// // Frames are borrowed slices: the engine rewrites the head's headers in place.
/// let mut buffer = [0u8; 60];
/// let mut engine: Engine<&mut [u8]> = Engine::new(Config::lro());
/// let mut sink = Count(0);
/// // Not TCP: delivered at once, counted.
/// engine.push(&mut buffer[..], &RxMeta::ethernet(0), &mut sink);
/// engine.flush_all(&mut sink);
/// assert_eq!(sink.0, 1);
/// assert!(engine.stats().is_conserved());
/// ```
pub struct Engine<F, C: Capacity = DefaultSizes, E: Encap = NoEncap> {
    config: Config,
    hasher: FlowHasher,
    store: C::Storage<F, E::Tunnel>,
    stats: Stats,
    /// Earliest time at which some held segment reaches `max_hold` (`u64::MAX`: none).
    hold_deadline: u64,
    held: usize,
    /// Where header prediction finds a frame's candidate entry.
    probe: Probe,
    /// Counts the pure-ACK flows [`Engine::keep_idle`] found without an entry.
    ack_misses: u8,
    /// Whether this burst runs header prediction: [`Config::header_prediction`], its gate, and
    /// no bypass.
    predicting: bool,
    /// Pauses header prediction after bursts in which it took almost no frame.
    gate: Prediction,
    /// Pauses coalescing after bursts in which almost no frame merged: while it is closed,
    /// frames pass through ([`Config::adaptive_bypass`]; always open with it off).
    bypass: Bypass,
    _encap: PhantomData<fn() -> E>,
}

/// A frame on its way through [`Engine::judge`] and [`Engine::act`]: its facts and where it
/// goes, from the parser or from header prediction.
struct Incoming<T> {
    key: Key<T>,
    hash: u32,
    /// The flow's held segment.
    slot: Option<u16>,
    facts: Fields,
    /// The checksum verdict.
    checked: Result<(), PassReason>,
    sum: PayloadSum,
    /// Offset of its payload and of the end of its datagram.
    payload: u32,
    ip_end: u32,
    layers: Layers,
    /// The flow's entry, held or idle: a segment the frame starts goes there.
    entry: Option<u16>,
    /// The frame matched the entry's template (header prediction): the template, the layers
    /// and the pseudo header in the entry describe it as they are.
    predicted: bool,
    time: u64,
}

/// What header prediction made of a frame.
enum Pred {
    /// The template did not match, or the frame needs the general path.
    Miss,
    /// Append it to the segment in the slot: what that writes.
    Append {
        slot: u16,
        appended: Appended,
        sum: PayloadSum,
        payload: u32,
        ip_end: u32,
    },
    /// Absorb it (`Lro`: a pure ACK superseding the held one of its flow): what the segment
    /// keeps of it, in an `Appended` of which `absorb` reads the ACK state. (A variant with
    /// only those fields made the `Gro` path 4 to 6 instructions per frame dearer, measured:
    /// the enum's layout changes its code.)
    Absorb { slot: u16, appended: Appended },
    /// Deliver it alone, nothing of its flow held: the reason, and what the ACK memory and the
    /// sink read of it, in an `Appended` as for `Absorb`. Taken straight from what prediction
    /// read, without the frame's full facts or `act_predicted`. `predict` gives it under `Gro`
    /// only (its pure ACKs, mostly: under `Lro`, which passes few predicted frames alone, the
    /// arm made the predicted path 19 to 23 instructions per frame dearer, from codegen alone,
    /// measured); `read_variant` under both (SACK pure ACKs).
    Alone {
        slot: u16,
        reason: PassReason,
        appended: Appended,
    },
    /// Anything else the rules decided, and what carrying it out needs of the frame.
    Other {
        decision: Decision,
        held: Option<u16>,
        read: Read,
    },
}

/// What header prediction read of a frame it does not append.
struct Read {
    facts: Fields,
    sum: PayloadSum,
    payload: u32,
    ip_end: u32,
}

/// What appending a frame writes into its segment's state.
#[derive(Clone, Copy)]
struct Appended {
    ack: u32,
    window: u16,
    flags: u8,
    payload_len: u32,
    ts: Option<(u32, u32)>,
    ip_id: u16,
    outer_id: u16,
    tunnelled: bool,
    /// Its padding was trimmed.
    trimmed: bool,
}

impl Appended {
    /// A frame's ACK state, flags and payload length, nothing else of it: what a frame
    /// delivered alone ([`Pred::Alone`]) leaves to the ACK memory and the sink, and, with its
    /// timestamps, what an absorbed pure ACK ([`Pred::Absorb`]) leaves to its segment.
    #[inline(always)]
    fn alone(f: &impl Facts, tunnelled: bool) -> Self {
        Self {
            ack: f.ack(),
            window: f.window(),
            flags: f.flags(),
            payload_len: f.payload_len(),
            ts: None,
            ip_id: 0,
            outer_id: 0,
            tunnelled,
            trimmed: false,
        }
    }

    #[inline(always)]
    fn of(f: &Fields) -> Self {
        Self {
            ack: f.ack,
            window: f.window,
            flags: f.flags,
            payload_len: f.payload_len,
            ts: f.options.timestamps(),
            ip_id: f.ip.id,
            outer_id: f.outer.map_or(0, |o| o.id),
            tunnelled: f.outer.is_some(),
            trimmed: f.padded,
        }
    }
}

/// What [`Engine::judge`] decided.
#[derive(Clone, Copy)]
enum Decision {
    /// Deliver the frame on its own (after its flow's held segment).
    Alone(PassReason),
    /// Join the held segment in the slot.
    Join(u16, Merge),
    /// Deliver the held segment in the slot for this reason, then start a new one.
    FlushThenStart(u16, FlushReason),
    /// Nothing held: start a segment.
    Start,
}

/// The general path's [`HeadMatch`]: byte comparisons with the held segment's head.
struct ByteMatch<'a, E> {
    head: &'a [u8],
    head_layers: &'a Layers,
    frame: &'a [u8],
    layers: &'a Layers,
    encap: PhantomData<E>,
}

impl<E: Encap> HeadMatch for ByteMatch<'_, E> {
    #[inline(always)]
    fn options_equal(&self) -> bool {
        let r = |l: &Layers| usize::from(l.l4) + tcp::HEADER_LEN..l.header_len();
        self.head.get(r(self.head_layers)) == self.frame.get(r(self.layers))
    }

    #[inline(always)]
    fn extensions_equal(&self) -> bool {
        // IPv6 extension headers: between the fixed header and what follows it.
        let inner =
            |l: &Layers| usize::from(l.l3) + crate::wire::ipv6::HEADER_LEN..usize::from(l.l4);
        if self.layers.v6
            && self.head.get(inner(self.head_layers)) != self.frame.get(inner(self.layers))
        {
            return false;
        }
        match (&self.head_layers.outer, &self.layers.outer) {
            (Some(h), Some(f)) if f.v6 => {
                let r = |l3: u16, to: u16| {
                    usize::from(l3) + crate::wire::ipv6::HEADER_LEN..usize::from(to)
                };
                self.head.get(r(h.l3, h.encap)) == self.frame.get(r(f.l3, f.encap))
            }
            _ => true,
        }
    }

    #[inline(always)]
    fn encap_may_merge(&self) -> bool {
        match (&self.head_layers.outer, &self.layers.outer) {
            (Some(h), Some(f)) if E::ENABLED => {
                let r = |o: &fixup::OuterLayers| usize::from(o.encap)..usize::from(o.inner);
                match (self.head.get(r(h)), self.frame.get(r(f))) {
                    (Some(a), Some(b)) => E::may_merge(a, b),
                    _ => false,
                }
            }
            _ => true,
        }
    }
}

/// What a frame delivered alone tells the ACK memory and the sink.
struct Alone<T> {
    key: Key<T>,
    hash: u32,
    l3: u32,
    l4: u32,
    payload_len: u32,
    flags: u8,
    ack: u32,
    window: u16,
}

impl<T> Alone<T> {
    #[inline(always)]
    fn of(key: Key<T>, hash: u32, layers: &Layers, f: &Fields) -> Self {
        Self {
            key,
            hash,
            l3: u32::from(layers.l3),
            l4: u32::from(layers.l4),
            payload_len: f.payload_len,
            flags: f.flags,
            ack: f.ack,
            window: f.window,
        }
    }
}

impl<F, C: Capacity, E: Encap> Engine<F, C, E>
where
    F: AsRef<[u8]> + AsMut<[u8]>,
{
    /// A new engine with nothing held.
    ///
    /// The sizes are checked at compile time (the flow count and the ACK records powers of
    /// two, at least one frame per segment).
    ///
    /// # Memory
    /// The engine is one value: see [`Capacity`] for its size (a 64-flow, 64-frame table of
    /// `Vec<u8>` frames is about 200 KB). `new` is a `const fn`, so a large table can be
    /// evaluated at compile time instead of on the stack: in a `static` for firmware, or
    /// `Box::new(const { ... })` on a host.
    ///
    /// ```
    /// use lro_core::{Config, Engine, Sizes};
    /// // Evaluated at compile time: no stack space is used to build it.
    /// let engine = Box::new(const { Engine::<Vec<u8>, Sizes<1024, 64>>::new(Config::lro()) });
    /// assert_eq!(engine.held_frames(), 0);
    /// ```
    pub const fn new(config: Config) -> Self {
        Self {
            config,
            hasher: FlowHasher::new(config.hash_seed),
            store: <C::Storage<F, E::Tunnel> as Store<F, E::Tunnel>>::EMPTY,
            stats: Stats::new(),
            hold_deadline: u64::MAX,
            held: 0,
            probe: Probe::new(FlowHasher::new(config.hash_seed).multiplier()),
            ack_misses: 0,
            predicting: predicts(&config, &Prediction::NEW, &Bypass::NEW),
            gate: Prediction::NEW,
            bypass: Bypass::NEW,
            _encap: PhantomData,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Changes the configuration; takes effect for the next frame. A new
    /// [`hash_seed`](Config::hash_seed) re-buckets the held flows (and forgets the ACK
    /// memory, which is keyed by the hash). A new [`policy`](Config::policy) forgets the ACK
    /// memory too (`Gro` records no ACKs, so a duplicate delivered under it would look new);
    /// a segment held across the change keeps what it merged before it (under `Lro`, the
    /// newest ACK, window and timestamps, which it carries when delivered).
    pub fn set_config(&mut self, config: Config) {
        let reseed = config.hash_seed != self.config.hash_seed;
        if config.policy != self.config.policy {
            self.store.parts().acks.clear();
        }
        if config.max_hold != self.config.max_hold {
            // The next deadline was computed under the old limit (or none): `flush_idle`
            // rescans the held segments and computes it again.
            self.hold_deadline = 0;
        }
        let bypass_was = self.config.adaptive_bypass;
        self.config = config;
        if !config.adaptive_bypass {
            self.bypass = Bypass::NEW;
        } else if !bypass_was {
            // Judged from the next burst on, not on the history before it.
            let (mergeable, merged) = self.bypass_counters();
            self.bypass.pass(mergeable, merged);
        }
        self.predicting = predicts(&config, &self.gate, &self.bypass);
        if reseed {
            self.hasher = FlowHasher::new(config.hash_seed);
            self.probe = self.probe.with_multiplier(self.hasher.multiplier());
            let hasher = self.hasher;
            let Parts {
                mut index,
                flows,
                mut acks,
                ..
            } = self.store.parts();
            index.rehash(|k| k.hash(&hasher));
            for (slot, e) in flows.iter_mut().enumerate() {
                e.hash = index.key(slot as u16).hash(&hasher);
            }
            acks.clear();
        }
    }

    /// Flows currently held.
    pub fn held_flows(&self) -> usize {
        self.store.flows().iter().filter(|e| e.is_held()).count()
    }

    /// Frames currently held.
    #[inline]
    pub fn held_frames(&self) -> usize {
        self.held
    }

    /// The counters.
    #[inline]
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Resets the counters to zero, but for the frames still held, which count as received
    /// ([`Stats::frames_in`], [`Stats::data_in`], [`TunnelStats::frames_in`]): they come out
    /// after the reset, and [`Stats::is_conserved`] holds again once they have.
    ///
    /// [`TunnelStats::frames_in`]: crate::TunnelStats::frames_in
    pub fn reset_stats(&mut self) {
        let mut stats = Stats::new();
        for (slot, e) in self.store.flows().iter().enumerate() {
            if e.is_held() {
                stats.frames_in += u64::from(e.count);
                stats.data_in += u64::from(e.data_frames);
                if self.store.key(slot as u16).tunnel.key().is_some() {
                    stats.tunnel.frames_in += u64::from(e.count);
                }
            }
        }
        self.stats = stats;
    }

    /// Offers one received frame (see [`Coalescer::push`]).
    #[inline]
    pub fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict {
        self.stats.frames_in += 1;
        if self.predicting {
            // Compiled once per policy: the rules' policy checks fold.
            return match self.config.policy {
                Policy::Lro => self.push_predicted::<true, K>(frame, meta, sink),
                Policy::Gro => self.push_predicted::<false, K>(frame, meta, sink),
            };
        }
        // Never while predicting: the predicted path pays nothing for the bypass.
        if !self.bypass.open() {
            return self.deliver_alone(frame, PassReason::Bypassed, None, sink);
        }
        self.push_general(frame, meta, sink)
    }

    /// Header prediction, then what it decided; the general path when it cannot read the
    /// frame. A function of its own, so the common case (a predicted append) is compiled
    /// apart from the caller's loop (measured: inlined, the loop's registers spill).
    #[inline(never)]
    fn push_predicted<const LRO: bool, K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let slot = self.store.candidates()[self
            .probe
            .index(frame.as_ref(), C::FLOWS * CANDIDATES_PER_FLOW)];
        let tpl = &self.store.flows()[usize::from(slot)].tpl;
        // Copies of the path for the common layouts, their offsets constants (no loads of
        // them, no tests of the timestamp and IPv6 flags, bounds checks folded): on x86-64, 7
        // to 9% fewer instructions and 10 to 16% less time per frame on the four DPDK
        // comparison captures, and VLAN-tagged and IPv6 frames as fast as untagged IPv4 ones.
        // Not on bare metal, where each copy's flash (about 4 KB per policy) counts for more.
        #[cfg(not(target_os = "none"))]
        {
            use predict::Kind;
            // One call per kind, each with its layout a constant: a single call with the
            // layout chosen at run time is not specialised (404.6 instead of 354.8
            // instructions per frame on 4flows).
            macro_rules! copy {
                ($kind:expr) => {
                    return self.push_shape::<LRO, K>(
                        frame,
                        meta,
                        sink,
                        slot,
                        const { $kind.shape().expect("a kind with a copy") },
                        $kind,
                    )
                };
            }
            match tpl.kind() {
                Kind::EthernetV4 => copy!(Kind::EthernetV4),
                Kind::VlanV4 => copy!(Kind::VlanV4),
                Kind::EthernetV6 => copy!(Kind::EthernetV6),
                _ => {}
            }
            // GRE without options or with a key over IPv4, carrying IPv4: 12% less time per
            // frame than the any-layout path (2026-11-27, `scripts/bench-gre.sh`). Compiled
            // only for an engine with an encapsulation (no other has tunnels), and matched
            // apart: as guarded arms of the match above, they cost the plain engine's paths
            // registers (19 instructions per frame more on 4flows, measured).
            if E::ENABLED {
                match tpl.kind() {
                    Kind::TunnelV4 => copy!(Kind::TunnelV4),
                    Kind::ShortTunnelV4 => copy!(Kind::ShortTunnelV4),
                    _ => {}
                }
            }
        }
        let shape = tpl.layout();
        self.push_shape::<LRO, K>(frame, meta, sink, slot, shape, predict::Kind::Other)
    }

    /// [`Engine::push_predicted`] with the template's layout `shape`.
    #[inline(always)]
    fn push_shape<const LRO: bool, K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        meta: &RxMeta,
        sink: &mut K,
        slot: u16,
        shape: Shape,
        kind: predict::Kind,
    ) -> Verdict {
        // The copy taken is the one of the template's kind, whose layout `Kind::shape` gives:
        // a copy for another layout would only make every frame miss.
        debug_assert_eq!(shape, self.store.flows()[usize::from(slot)].tpl.layout());
        let len = frame.as_ref().len();
        match self.predict::<LRO, false>(frame.as_ref(), meta, slot, None, shape, kind) {
            Pred::Append {
                slot,
                appended,
                sum,
                payload,
                ip_end,
            } => {
                self.stats.predicted += 1;
                self.count_in(appended.payload_len, appended.tunnelled);
                self.append(
                    slot, frame, &appended, sum, payload, ip_end, meta.time, sink,
                )
            }
            Pred::Absorb { slot, appended: a } => {
                self.stats.predicted += 1;
                self.count_in(0, a.tunnelled);
                self.absorb_values(
                    slot,
                    frame,
                    a.ack,
                    a.window,
                    a.ts,
                    a.tunnelled,
                    meta.time,
                    sink,
                )
            }
            Pred::Alone {
                slot,
                reason,
                appended: a,
            } => self.deliver_predicted_alone(frame, slot, reason, &a, sink),
            Pred::Other {
                decision,
                held,
                read,
            } => self.act_predicted(frame, meta, slot, decision, held, read, sink),
            Pred::Miss if self.is_short(slot, len) => self.push_short(frame, slot, meta, sink),
            // A variant of the proposed template ([`Engine::predict_variant`]), else the
            // general path.
            Pred::Miss => match self.predict_variant::<LRO>(frame.as_ref(), meta, slot) {
                Pred::Other {
                    decision,
                    held,
                    read,
                } => self.act_predicted(frame, meta, slot, decision, held, read, sink),
                Pred::Alone {
                    slot,
                    reason,
                    appended: a,
                } => self.deliver_variant_alone(frame, slot, reason, &a, sink),
                _ => self.push_general(frame, meta, sink),
            },
        }
    }

    /// [`Engine::push_predicted`] for a frame that ends within 32 bytes of its TCP header's
    /// start, which [`predict::read`] refuses (it takes the TCP header as a 32-byte array): a
    /// pure ACK without options, mostly (54 bytes over Ethernet where nothing pads it: veth,
    /// AF_XDP, a sender's own capture; 60 where a wire padded it). Predicts the frame without
    /// its padding, with a zero-extended copy of its TCP header (20 bytes). Until 2026-11 it
    /// predicted a zero-extended copy of the whole frame: 23 to 25% slower per such ACK in
    /// `lro bench` (56 against 44 ns, trusted checksums; 69 against 52 verified), for about as
    /// many instructions (most likely stalls of the 16-byte loads of blocks the copy had just
    /// stored). Out of line, and asked only for a miss whose template has no timestamps: asked
    /// before `predict`, or of every short miss (SACK ACKs), it cost the other frames 2 to 65
    /// instructions each, measured; this way none.
    #[cold]
    #[inline(never)]
    fn push_short<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        slot: u16,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let (bytes, len) = (frame.as_ref(), frame.as_ref().len());
        let shape = self.store.flows()[usize::from(slot)].tpl.layout();
        let Some(ip) = bytes.get(shape.l3()..).and_then(<[u8]>::first_chunk) else {
            return self.push_general(frame, meta, sink);
        };
        let end = predict::datagram_end(ip, shape.l3(), shape.v6()).1;
        // A padded frame (a pure ACK without options is 60 bytes on a wire that pads): read
        // without its padding, and taken only when it is a pure ACK absorbed under `Lro`, which
        // the rules decide as for the same frame unpadded when the padding sums to zero
        // ([`rules::padding`]); the parser trims it otherwise. A CHECKSUM_COMPLETE sum covers
        // the padding: the parser's too.
        let padded = end < len;
        let lro = self.config.policy == Policy::Lro;
        // (A datagram shorter than its headers, or longer than the frame: the parser's verdict.)
        if end > len
            || end < shape.payload()
            || padded
                && (!lro
                    || matches!(meta.checksum, RxChecksum::Complete(_))
                    || !csum::is_zero(csum::sum(&bytes[end..])))
        {
            return self.push_general(frame, meta, sink);
        }
        // The frame without its padding, and its TCP header zero-extended to the 32 bytes
        // prediction reads (in range: `shape.l4() < shape.payload() <= end <= len`).
        let (datagram, header) = (&bytes[..end], &bytes[shape.l4()..end]);
        let mut tcp = [0; tcp::HEADER_LEN_TS];
        let n = header.len().min(tcp::HEADER_LEN_TS);
        tcp[..n].copy_from_slice(&header[..n]);
        // Read at the template's offsets, with its own mask.
        let (tcp, kind) = (Some(&tcp), predict::Kind::Other);
        let pred = if lro {
            self.predict::<true, true>(datagram, meta, slot, tcp, shape, kind)
        } else {
            self.predict::<false, true>(datagram, meta, slot, tcp, shape, kind)
        };
        // As `push_predicted` carries out the decisions, but for an append (a data frame of
        // fewer than 12 bytes without options, rare), left to the parser: one copy of this
        // code for both policies, without a second append (5 KB on a Cortex-M0, measured).
        match pred {
            Pred::Absorb { slot, appended: a } => {
                // As `absorb` counts a padded frame.
                self.stats.trimmed += u64::from(padded);
                self.absorb_predicted(slot, frame, &a, meta, sink)
            }
            _ if padded => self.push_general(frame, meta, sink),
            Pred::Alone {
                slot,
                reason,
                appended: a,
            } => self.deliver_predicted_alone(frame, slot, reason, &a, sink),
            Pred::Other {
                decision,
                held,
                read,
            } => self.act_predicted(frame, meta, slot, decision, held, read, sink),
            Pred::Append { .. } | Pred::Miss => self.push_general(frame, meta, sink),
        }
    }

    /// Absorbs a pure ACK header prediction read ([`Pred::Absorb`]) into the segment in `slot`,
    /// for [`Engine::push_short`]. `push_predicted` writes the same out: through this helper,
    /// its `Gro` path cost 3.8 to 4.4 instructions more per frame (measured), from codegen alone.
    #[inline(always)]
    fn absorb_predicted<K: Sink<F> + ?Sized>(
        &mut self,
        slot: u16,
        frame: F,
        a: &Appended,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        self.stats.predicted += 1;
        self.count_in(0, a.tunnelled);
        self.absorb_values(
            slot,
            frame,
            a.ack,
            a.window,
            a.ts,
            a.tunnelled,
            meta.time,
            sink,
        )
    }

    /// Whether a frame of `len` bytes that header prediction did not read ends within 32
    /// bytes of the TCP header's start in the layout of the template `slot`, one without
    /// timestamps: the frames [`Engine::push_short`] takes. (In a timestamp layout the TCP
    /// header is 32 bytes: a frame that ends inside it is not the flow's.)
    #[inline(always)]
    fn is_short(&self, slot: u16, len: usize) -> bool {
        let tpl = &self.store.flows()[usize::from(slot)].tpl;
        let shape = tpl.layout();
        tpl.is_predicted() && !shape.ts() && len < shape.l4() + tcp::HEADER_LEN_TS
    }

    /// Delivers a frame header prediction read and the rules pass alone, nothing of its flow
    /// held ([`Pred::Alone`]).
    #[inline(always)]
    fn deliver_predicted_alone<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        slot: u16,
        reason: PassReason,
        a: &Appended,
        sink: &mut K,
    ) -> Verdict {
        self.stats.predicted += 1;
        self.count_in(a.payload_len, a.tunnelled);
        let e = &self.store.flows()[usize::from(slot)];
        let alone = Alone {
            key: *self.store.key(slot),
            hash: e.hash,
            l3: u32::from(e.layers.l3),
            l4: u32::from(e.layers.l4),
            payload_len: a.payload_len,
            flags: a.flags,
            ack: a.ack,
            window: a.window,
        };
        self.deliver_alone(frame, reason, Some(alone), sink)
    }

    /// [`Engine::deliver_predicted_alone`] for a variant ([`Engine::read_variant`]), out of
    /// line: inlined there as well, it cost the common path 1 to 2 instructions per frame.
    #[inline(never)]
    fn deliver_variant_alone<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        slot: u16,
        reason: PassReason,
        a: &Appended,
        sink: &mut K,
    ) -> Verdict {
        self.deliver_predicted_alone(frame, slot, reason, a, sink)
    }

    /// Delivers everything held (see [`Coalescer::flush_all`]).
    pub fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        self.flush_every(FlushReason::FlushAll, sink);
        self.burst_end(sink);
    }

    /// Delivers every held segment, oldest first, for `reason`.
    fn flush_every<K: Sink<F> + ?Sized>(&mut self, reason: FlushReason, sink: &mut K) {
        while let Some(slot) = self.store.parts().index.oldest() {
            self.flush_slot(slot, reason, sink);
        }
        self.hold_deadline = u64::MAX;
    }

    /// The end of a burst (a driver's poll: `flush_all`, or `flush_idle` where segments are held
    /// across polls): the gates decide whether the next burst coalesces
    /// ([`Config::adaptive_bypass`]) and runs header prediction.
    fn burst_end<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        let (frames_in, predicted) = (self.stats.frames_in, self.stats.predicted);
        if self.gate.idle(frames_in) {
            // An empty poll is no burst: no pause counts down, nothing is counted.
            return;
        }
        let bypassed = !self.bypass.open();
        if bypassed {
            // Nothing was offered to prediction: nothing to judge it by.
            self.stats.bypassed_bursts += 1;
            self.gate.pass(frames_in, predicted);
        } else {
            if self.config.header_prediction && !self.predicting {
                self.stats.prediction_paused += 1;
            }
            self.gate.burst_end(frames_in, predicted);
        }
        if self.config.adaptive_bypass {
            let (mergeable, merged) = self.bypass_counters();
            self.bypass.burst_end(mergeable, merged);
            if !self.bypass.open() && !bypassed {
                self.begin_bypass(sink);
            }
        }
        self.predicting = predicts(&self.config, &self.gate, &self.bypass);
    }

    /// The running totals the bypass gate judges bursts by: the frames that could have merged
    /// (those held or merged, not those delivered alone anyway: control frames, handshakes'
    /// ACKs), and the frames merged, appended or absorbed, including those of segments still
    /// held. Each delivered segment of `n` frames merged `n - 1` (`frames_out - segments` sums
    /// them), and so has each held one. Walks the held segments: per burst, and only with
    /// [`Config::adaptive_bypass`].
    fn bypass_counters(&mut self) -> (u64, u64) {
        let s = &self.stats;
        let mergeable = s.frames_in.saturating_sub(s.passed.iter().sum());
        let delivered = s.frames_out.saturating_sub(s.segments) + s.absorbed;
        if self.held == 0 {
            return (mergeable, delivered);
        }
        let Parts { index, flows, .. } = self.store.parts();
        let mut held = 0u64;
        let mut cur = index.oldest();
        while let Some(slot) = cur {
            held += u64::from(flows[usize::from(slot)].count.saturating_sub(1));
            cur = index.newer(slot);
        }
        (mergeable, delivered + held)
    }

    /// Frames are about to pass through unseen: what is held goes first (their flows' order),
    /// and the ACK memory is forgotten. A pure ACK passed through is not recorded, so a record
    /// kept across the pause could make a later duplicate of it look new, and a held duplicate
    /// may be superseded (see [`ack_memo`]); without a record, a flow's next pure ACK is
    /// delivered alone and recorded.
    #[inline(never)]
    fn begin_bypass<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        self.flush_every(FlushReason::Bypass, sink);
        self.store.parts().acks.clear();
    }

    /// Delivers idle and overdue flows (see [`Coalescer::flush_idle`]).
    pub fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        if let Some(timeout) = self.config.idle_timeout {
            loop {
                let parts = self.store.parts();
                let Some(slot) = parts.index.oldest() else {
                    break;
                };
                if now.saturating_sub(parts.flows[usize::from(slot)].last_time) < timeout {
                    break;
                }
                self.flush_slot(slot, FlushReason::Idle, sink);
            }
        }
        if let Some(max) = self.config.max_hold {
            if now >= self.hold_deadline {
                let mut next = u64::MAX;
                let mut cur = self.store.parts().index.oldest();
                while let Some(slot) = cur {
                    let parts = self.store.parts();
                    cur = parts.index.newer(slot);
                    let due = parts.flows[usize::from(slot)]
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
        self.burst_end(sink);
    }

    // ---- The two ways to a frame's facts ----

    /// Header prediction: the template of the entry `slot` against the frame and, when it
    /// matches, the rules on what the template read. Changes nothing.
    /// With `S`, the frame's TCP header is `tcp` ([`predict::read`]; [`Engine::push_short`]).
    #[inline(always)]
    fn predict<const LRO: bool, const S: bool>(
        &self,
        bytes: &[u8],
        meta: &RxMeta,
        slot: u16,
        tcp: Option<&[u8; tcp::HEADER_LEN_TS]>,
        shape: Shape,
        kind: predict::Kind,
    ) -> Pred {
        let e = &self.store.flows()[usize::from(slot)];
        if !e.tpl.is_predicted() {
            return Pred::Miss;
        }
        if !e.tpl.matches(bytes, meta, shape, kind) {
            return Pred::Miss;
        }
        let Some(p) = self.read_predicted::<false, S>(bytes, meta, slot, shape, tcp) else {
            return Pred::Miss;
        };
        // The template describes the entry's flow, and a flow has one entry (see
        // `flow::table`): held or idle, this is the flow's.
        let held = e.is_held().then_some(slot);
        let memo = || ack_memo::get(self.store.acks(), self.store.key(slot), e.hash);
        let policy = if LRO { Policy::Lro } else { Policy::Gro };
        match self.judge(policy, &p.view, Ok(()), held, meta.time, memo) {
            Decision::Join(slot, Merge::Append) => {
                let (ip_id, outer_id) = p.view.ip_ids();
                Pred::Append {
                    slot,
                    appended: Appended {
                        ack: p.view.ack(),
                        window: p.view.window(),
                        flags: p.view.flags(),
                        payload_len: p.view.payload_len(),
                        ts: p.view.options().timestamps(),
                        ip_id: ip_id.unwrap_or(0),
                        outer_id: outer_id.unwrap_or(0),
                        tunnelled: E::ENABLED && shape.tunnel(),
                        trimmed: false,
                    },
                    sum: p.sum,
                    payload: p.payload,
                    ip_end: p.ip_end,
                }
            }
            // A pure ACK (`Lro` only): what `absorb` writes, without the frame's other facts.
            Decision::Join(slot, Merge::Absorb) if LRO => Pred::Absorb {
                slot,
                appended: Appended {
                    ts: p.view.options().timestamps(),
                    ..Appended::alone(&p.view, E::ENABLED && shape.tunnel())
                },
            },
            Decision::Alone(reason) if !LRO && held.is_none() => Pred::Alone {
                slot,
                reason,
                appended: Appended::alone(&p.view, E::ENABLED && shape.tunnel()),
            },
            decision => Pred::Other {
                decision,
                held,
                read: Read {
                    facts: Fields::of(&p.view),
                    sum: p.sum,
                    payload: p.payload,
                    ip_end: p.ip_end,
                },
            },
        }
    }

    /// Header prediction for a frame that matched the template `slot` but for its TCP header
    /// length (SACK blocks on a pure ACK of the flow, mostly): read with its own options and
    /// payload offset, and taken only when the rules pass it alone, the one decision that
    /// needs none of the template's sums.
    #[inline(always)]
    fn predict_variant<const LRO: bool>(&self, bytes: &[u8], meta: &RxMeta, slot: u16) -> Pred {
        let tpl = &self.store.flows()[usize::from(slot)].tpl;
        if tpl.is_predicted() && tpl.data_offset_differs(bytes, tpl.layout()) {
            let policy = if LRO { Policy::Lro } else { Policy::Gro };
            self.read_variant(bytes, meta, slot, policy)
        } else {
            Pred::Miss
        }
    }

    /// [`Engine::predict_variant`] for a frame whose data offset is not its template's. One
    /// copy for both policies: rare frames, and code size counts on small targets.
    #[inline(never)]
    fn read_variant(&self, bytes: &[u8], meta: &RxMeta, slot: u16, policy: Policy) -> Pred {
        let e = &self.store.flows()[usize::from(slot)];
        let shape = e.tpl.layout();
        if !e.tpl.matches_but_data_offset(bytes, meta, shape) {
            return Pred::Miss;
        }
        let Some(p) = self.read_predicted::<true, false>(bytes, meta, slot, shape, None) else {
            return Pred::Miss;
        };
        // As `predict` judges (written out in both: a shared helper returning the decision
        // and the held slot cost the predicted path 2 to 5 instructions per frame, measured).
        let held = e.is_held().then_some(slot);
        let memo = || ack_memo::get(self.store.acks(), self.store.key(slot), e.hash);
        match self.judge(policy, &p.view, Ok(()), held, meta.time, memo) {
            Decision::Alone(reason) if held.is_none() => Pred::Alone {
                slot,
                reason,
                appended: Appended::alone(&p.view, E::ENABLED && shape.tunnel()),
            },
            decision @ Decision::Alone(_) => Pred::Other {
                decision,
                held,
                read: Read {
                    facts: Fields::of(&p.view),
                    sum: p.sum,
                    payload: p.payload,
                    ip_end: p.ip_end,
                },
            },
            _ => Pred::Miss,
        }
    }

    /// [`predict::read`] for the entry `slot`.
    #[inline(always)]
    fn read_predicted<'a, const V: bool, const S: bool>(
        &'a self,
        bytes: &'a [u8],
        meta: &RxMeta,
        slot: u16,
        shape: Shape,
        tcp: Option<&'a [u8; tcp::HEADER_LEN_TS]>,
    ) -> Option<Predicted<'a, E, V>> {
        let e = &self.store.flows()[usize::from(slot)];
        let want_sum = self.wants_sums(&e.layers);
        let verify = self.config.verify_checksums;
        predict::read::<E, V, S>(bytes, tcp, meta, e, shape, verify, want_sum)
    }

    /// Carries out a predicted frame's decision other than an append (`slot`: the entry whose
    /// template matched, `held`: the flow's held segment, `read`: what prediction read).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)] // the frame and what prediction made of it
    fn act_predicted<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        meta: &RxMeta,
        slot: u16,
        decision: Decision,
        held: Option<u16>,
        read: Read,
        sink: &mut K,
    ) -> Verdict {
        let Read {
            facts,
            sum,
            payload,
            ip_end,
        } = read;
        self.stats.predicted += 1;
        self.count_in(facts.payload_len, facts.outer.is_some());
        let e = &self.store.flows()[usize::from(slot)];
        // The common decisions that need nothing more of the frame, taken without an
        // `Incoming`: what `act` would do, minus its copies.
        match decision {
            // A frame starting a segment in the entry whose template it matched (the flow's
            // first frame after a flush): what `start` does for it.
            Decision::Start | Decision::FlushThenStart(..)
                if rules::may_start(facts.flags).is_ok() =>
            {
                if let Decision::FlushThenStart(held, reason) = decision {
                    self.flush_slot(held, reason, sink);
                }
                if facts.payload_len == 0 {
                    // `Lro` only (`alone` passed every pure ACK under `Gro`), asked after the
                    // flush, which updates the ACK memory.
                    let e = &self.store.flows()[usize::from(slot)];
                    let key = self.store.key(slot);
                    let lone =
                        ack_memo::lone_ack(self.store.acks(), key, e.hash, facts.ack, facts.window);
                    if let Err(reason) = lone {
                        let alone = Alone::of(*key, e.hash, &e.layers, &facts);
                        return self.deliver_alone(frame, reason, Some(alone), sink);
                    }
                }
                self.store.parts().index.activate(slot);
                return self.begin(slot, frame, &facts, sum, ip_end, meta.time);
            }
            Decision::Alone(reason) if held.is_none() => {
                let alone = Alone::of(*self.store.key(slot), e.hash, &e.layers, &facts);
                return self.deliver_alone(frame, reason, Some(alone), sink);
            }
            _ => {}
        }
        let inc = Incoming {
            key: *self.store.key(slot),
            hash: e.hash,
            slot: held,
            facts,
            checked: Ok(()),
            sum,
            payload,
            ip_end,
            layers: e.layers,
            entry: Some(slot),
            predicted: true,
            time: meta.time,
        };
        self.act(frame, &inc, decision, meta, sink)
    }

    /// Everything header prediction does not read: parse, look the flow up, verify checksums,
    /// then the shared path. Out of line, so the predicted path keeps a small frame of its own.
    #[inline(never)]
    fn push_general<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let bytes = frame.as_ref();
        // Filled in place (see `parse::parse_into`): a returned `Parsed` costs a copy per frame.
        let mut p = Parsed::EMPTY;
        if let Err(u) = parse::parse_into::<E>(bytes, meta, &mut p) {
            self.flush_for_hint(&u.hint, sink);
            if matches!(u.hint, FlowHint::Tunnel(_)) {
                self.stats.tunnel.frames_in += 1;
                self.stats.tunnel.passed[u.reason.index()] += 1;
            }
            return self.deliver_alone(frame, u.reason, None, sink);
        }
        let Some(layers) = Layers::of(&p) else {
            return self.deliver_alone(frame, PassReason::Malformed, None, sink);
        };
        let key = Key {
            flow: p.key,
            tunnel: match &p.tunnel {
                Some(t) => E::Tunnel::from_key(&t.key),
                None => E::Tunnel::EMPTY,
            },
        };
        let hash = key.hash(&self.hasher);
        let (checked, sum, padded, padding_neutral) = self.verify(&p, &layers, bytes, meta);
        let facts = Fields {
            seq: p.seq,
            ack: p.ack,
            flags_word: p.flags_word,
            flags: p.flags,
            window: p.window,
            payload_len: p.payload_len,
            options: p.options,
            ip: p.ip,
            outer: p.tunnel.map(|t| t.outer),
            encap: p.tunnel.map_or(Ok(()), |t| t.mergeable),
            padded,
            padding_neutral,
        };
        self.count_in(facts.payload_len, facts.outer.is_some());
        let entry = self.store.parts().index.find(hash, &key);
        let slot = entry.filter(|&s| self.store.flows()[usize::from(s)].is_held());
        let inc = Incoming {
            key,
            hash,
            slot,
            facts,
            checked,
            sum,
            payload: p.payload,
            ip_end: p.ip_end,
            layers,
            entry,
            predicted: false,
            time: meta.time,
        };
        let decision = {
            let (head, head_layers) = match slot {
                Some(s) => (
                    head_bytes::<F, C, E>(&self.store, s),
                    &self.store.flows()[usize::from(s)].layers,
                ),
                // Nothing held: no comparison is asked.
                None => (&[][..], &inc.layers),
            };
            let f = Compared {
                fields: &inc.facts,
                head: ByteMatch::<'_, E> {
                    head,
                    head_layers,
                    frame: bytes,
                    layers: &inc.layers,
                    encap: PhantomData,
                },
            };
            let memo = || ack_memo::get(self.store.acks(), &inc.key, inc.hash);
            self.judge(self.config.policy, &f, inc.checked, slot, inc.time, memo)
        };
        self.act(frame, &inc, decision, meta, sink)
    }

    #[inline(always)]
    fn count_in(&mut self, payload_len: u32, tunnelled: bool) {
        self.stats.data_in += u64::from(payload_len > 0);
        if E::ENABLED && tunnelled {
            self.stats.tunnel.frames_in += 1;
        }
    }

    /// [`needs_sums`] under this engine's configuration.
    #[inline(always)]
    fn wants_sums(&self, l: &Layers) -> bool {
        needs_sums::<E>(&self.config, l)
    }

    /// Verifies the checksums as the metadata allows (Linux `inet_gro_receive`'s
    /// `ip_fast_csum`, `gre_gro_receive`'s `skb_gro_checksum_simple_validate`,
    /// `skb_gro_checksum_validate` for TCP) and returns the verdict, the payload's sum, and
    /// whether the frame is padded and the padding's sum zero.
    #[inline(always)]
    fn verify(
        &self,
        p: &Parsed,
        l: &Layers,
        bytes: &[u8],
        meta: &RxMeta,
    ) -> (Result<(), PassReason>, PayloadSum, bool, bool) {
        let (l4, payload, ip_end) = (p.l4 as usize, p.payload as usize, p.ip_end as usize);
        let padded = ip_end < bytes.len();
        let pad_sum = if padded {
            csum::sum(&bytes[ip_end..])
        } else {
            0
        };
        let neutral = csum::is_zero(pad_sum);
        let pseudo = p.key.pseudo_header();
        let tcp_len = (ip_end - l4) as u32;
        // IPv4 header checksums, outer first.
        let ip_ok = || {
            let v4_ok = |at: usize| {
                let ihl = bytes.get(at).map_or(0, |b| usize::from(b & 0x0f) * 4);
                bytes
                    .get(at..at + ihl)
                    .is_some_and(|h| csum::is_zero(csum::sum_header(h)))
            };
            (p.ip.v6 || v4_ok(p.l3 as usize))
                && p.tunnel
                    .is_none_or(|t| t.outer.v6 || v4_ok(t.outer_l3 as usize))
        };
        let encap_at = l
            .outer
            .and_then(|o| o.checksum.map(|_| usize::from(o.encap)));
        let verdict = |r| (Err(r), PayloadSum::None, padded, neutral);
        match meta.checksum {
            RxChecksum::Verified => {
                let sum = if self.wants_sums(l) {
                    // The checksum field makes pseudo header + TCP header + payload sum to -0,
                    // so the payload's sum is the negation of the rest: no payload byte read.
                    let hdr = csum::sum_header(&bytes[l4..payload]);
                    PayloadSum::Folded(csum::finish(csum::fold(
                        u64::from(hdr) + pseudo.acc(tcp_len),
                    )))
                } else {
                    PayloadSum::None
                };
                (Ok(()), sum, padded, neutral)
            }
            RxChecksum::Complete(total) => {
                if !ip_ok() {
                    return verdict(PassReason::BadIpChecksum);
                }
                // The NIC summed from the end of the link header (in-line VLAN tags and IP
                // headers included) to the end of the frame, padding included: take away what
                // precedes the summed range of interest and the padding.
                let start = meta.link.header_len().min(l4);
                let unpad = |s: u16| {
                    if (ip_end - start) % 2 == 1 {
                        csum::sub(s, pad_sum.swap_bytes())
                    } else {
                        csum::sub(s, pad_sum)
                    }
                };
                if let Some(at) = encap_at {
                    let s = unpad(csum::sub(
                        total,
                        csum::sum(bytes.get(start..at).unwrap_or(&[])),
                    ));
                    if !csum::is_zero(s) {
                        return verdict(PassReason::BadEncapChecksum);
                    }
                }
                let l4_sum = unpad(csum::sub(
                    total,
                    csum::sum(bytes.get(start..l4).unwrap_or(&[])),
                ));
                if !csum::is_zero(csum::add(l4_sum, pseudo.sum(tcp_len))) {
                    return verdict(PassReason::BadTcpChecksum);
                }
                let hdr = csum::sum_header(&bytes[l4..payload]);
                (
                    Ok(()),
                    PayloadSum::Folded(csum::sub(l4_sum, hdr)),
                    padded,
                    neutral,
                )
            }
            RxChecksum::None => {
                if !self.config.verify_checksums {
                    return verdict(PassReason::Unverified);
                }
                if !ip_ok() {
                    return verdict(PassReason::BadIpChecksum);
                }
                let payload_sum = csum::sum(&bytes[payload..ip_end]);
                if let Some(at) = encap_at {
                    let s = csum::add_at_offset(
                        csum::sum(&bytes[at..payload]),
                        payload_sum,
                        payload - at,
                    );
                    if !csum::is_zero(s) {
                        return verdict(PassReason::BadEncapChecksum);
                    }
                }
                let hdr = csum::sum_header(&bytes[l4..payload]);
                if !csum::is_zero(csum::add(csum::add(pseudo.sum(tcp_len), hdr), payload_sum)) {
                    return verdict(PassReason::BadTcpChecksum);
                }
                (Ok(()), PayloadSum::Folded(payload_sum), padded, neutral)
            }
        }
    }

    // ---- The shared path ----

    /// Applies the rule table to a frame: checksums, the frame on its own, then its flow's
    /// held segment in `slot` (`memo`: the flow's ACK memory record, asked only for a pure ACK).
    #[inline(always)]
    fn judge(
        &self,
        policy: Policy,
        f: &impl Facts,
        checked: Result<(), PassReason>,
        slot: Option<u16>,
        time: u64,
        memo: impl FnOnce() -> Option<(u32, u16)>,
    ) -> Decision {
        if let Err(reason) = checked.and_then(|()| rules::alone(policy, f)) {
            return Decision::Alone(reason);
        }
        let Some(slot) = slot else {
            return Decision::Start;
        };
        let e = &self.store.flows()[usize::from(slot)];
        let decision = if rules::expired(&self.config, e, time) {
            Err(FlushReason::MaxHold)
        } else {
            rules::merge(policy, &self.config, e, f, memo, C::FRAMES)
        };
        match decision {
            Ok(merge) => Decision::Join(slot, merge),
            Err(reason) => Decision::FlushThenStart(slot, reason),
        }
    }

    /// Carries a decision out.
    #[inline(always)]
    fn act<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        inc: &Incoming<E::Tunnel>,
        decision: Decision,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        if let (Decision::Join(slot, _), false) = (decision, inc.predicted) {
            // Found by the general path: next time, header prediction finds it.
            self.propose(slot, frame.as_ref());
        }
        match decision {
            Decision::Join(slot, Merge::Append) => {
                let a = Appended::of(&inc.facts);
                self.append(
                    slot,
                    frame,
                    &a,
                    inc.sum,
                    inc.payload,
                    inc.ip_end,
                    inc.time,
                    sink,
                )
            }
            Decision::Join(slot, Merge::Absorb) => {
                self.absorb(slot, frame, &inc.facts, inc.time, sink)
            }
            Decision::Join(slot, Merge::Duplicate) => {
                // The held segment goes first, then the duplicate on its own.
                self.flush_slot(slot, FlushReason::Unmergeable, sink);
                self.deliver_alone(frame, PassReason::DupAck, Some(self.alone_of(inc)), sink)
            }
            Decision::Alone(reason) => {
                if let Some(slot) = inc.slot {
                    self.flush_slot(slot, FlushReason::Unmergeable, sink);
                } else if E::ENABLED && inc.facts.encap.is_err() {
                    self.flush_inner_flow(&inc.key, sink);
                }
                if reason == PassReason::PureAck && !inc.predicted {
                    self.keep_idle(inc, frame.as_ref(), meta);
                }
                self.deliver_alone(frame, reason, Some(self.alone_of(inc)), sink)
            }
            Decision::FlushThenStart(slot, reason) => {
                self.flush_slot(slot, reason, sink);
                self.start(frame, inc, meta, sink)
            }
            Decision::Start => self.start(frame, inc, meta, sink),
        }
    }

    /// Makes the entry `slot` header prediction's candidate for frames like `bytes`.
    #[inline(always)]
    fn propose(&mut self, slot: u16, bytes: &[u8]) {
        let tpl = &self.store.flows()[usize::from(slot)].tpl;
        if tpl.is_predicted() && self.probe.covers(tpl.layout()) {
            let i = self.probe.index(bytes, C::FLOWS * CANDIDATES_PER_FLOW);
            self.store.parts().candidates[i] = slot;
        }
    }

    /// `Gro` passes every pure ACK alone ([`rules::pure_ack`]), so such a flow never starts a
    /// segment and would never have an entry: every one of its frames would take the parser.
    /// An idle entry with the flow's template lets header prediction find the next ones (the
    /// reverse direction of a bulk transfer: up to half the frames of a trace whose receiver
    /// ACKs every segment). Takes only a fresh or idle entry, never a held one, and changes no
    /// decision: predicted or parsed, the rules pass the pure ACK alone.
    ///
    /// The entry goes to the oldest end of the idle list, and it may reuse only a fresh entry
    /// or another such one ([`Index::insert_idle`](crate::flow::table)): with more flows
    /// than entries, pure-ACK flows would otherwise take the entries of data flows between
    /// their segments, and both would pay for a new template on every frame.
    #[inline(always)]
    fn keep_idle(&mut self, inc: &Incoming<E::Tunnel>, bytes: &[u8], meta: &RxMeta) {
        if !self.predicting {
            return;
        }
        match inc.entry {
            Some(slot) => self.propose(slot, bytes),
            None => {
                // Another pure-ACK flow's entry only on one miss in eight: with more such
                // flows than entries they would take each other's on every frame, each
                // paying for a template never used.
                self.ack_misses = self.ack_misses.wrapping_add(1);
                let reuse = self.ack_misses.is_multiple_of(8);
                if reuse || self.store.parts().index.has_fresh() {
                    self.new_idle_entry(inc, bytes, meta, reuse);
                }
            }
        }
    }

    /// [`Engine::keep_idle`] for a flow without an entry: a fresh one, or (`reuse`) the oldest
    /// idle one if it is another pure-ACK flow's. Never a data flow's: when every entry is a
    /// data flow's (more flows than entries), their templates are worth more.
    #[inline(never)]
    fn new_idle_entry(
        &mut self,
        inc: &Incoming<E::Tunnel>,
        bytes: &[u8],
        meta: &RxMeta,
        reuse: bool,
    ) {
        let Parts {
            mut index, flows, ..
        } = self.store.parts();
        let reusable = |slot: u16| reuse && flows[usize::from(slot)].ack_only;
        let Some(Taken { slot, reused }) = index.insert_idle(inc.hash, &inc.key, reusable) else {
            return;
        };
        self.stats.forgotten += u64::from(reused);
        flows[usize::from(slot)].ack_only = true;
        self.adopt(slot, bytes, inc, meta);
        let shape = self.store.flows()[usize::from(slot)].tpl.layout();
        self.probe = self.probe.after_start(shape, false);
        self.propose(slot, bytes);
    }

    /// Makes the entry `slot` describe the frame `bytes` the general path parsed: its layers,
    /// hash, pseudo header, IP fields and (with header prediction) its template. Header
    /// prediction reads the IP fields the template compares from the entry
    /// ([`predict::View`]), so they are set with the template, not only when a segment starts.
    #[inline(always)]
    fn adopt(&mut self, slot: u16, bytes: &[u8], inc: &Incoming<E::Tunnel>, meta: &RxMeta) {
        let prediction = self.predicting;
        let e = &mut self.store.parts().flows[usize::from(slot)];
        e.layers = inc.layers;
        e.hash = inc.hash;
        e.pseudo = inc.key.flow.pseudo_header();
        e.ip = held_ip(&inc.facts.ip);
        e.outer = inc.facts.outer.as_ref().map_or(IpHeld::default(), held_ip);
        if prediction {
            e.tpl
                .fill(bytes, &e.layers, &e.pseudo, inc.facts.options, meta);
        } else {
            e.tpl.clear();
        }
    }

    fn alone_of(&self, inc: &Incoming<E::Tunnel>) -> Alone<E::Tunnel> {
        Alone::of(inc.key, inc.hash, &inc.layers, &inc.facts)
    }

    /// Starts a segment with the frame as its head (Linux: the packet is held).
    fn start<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        inc: &Incoming<E::Tunnel>,
        meta: &RxMeta,
        sink: &mut K,
    ) -> Verdict {
        let f = &inc.facts;
        let mut reason = rules::may_start(f.flags).err();
        if reason.is_none() && f.payload_len == 0 {
            // `Lro` only: `alone` passed no pure ACK under `Gro`.
            reason =
                ack_memo::lone_ack(self.store.acks(), &inc.key, inc.hash, f.ack, f.window).err();
        }
        if let Some(reason) = reason {
            return self.deliver_alone(frame, reason, Some(self.alone_of(inc)), sink);
        }
        // Counted only once the frame is held without its padding (a frame delivered alone
        // goes out as received).
        if f.padded {
            self.stats.trimmed += 1;
        }
        let slot = match inc.entry {
            // The flow's idle entry: its segment starts where the last one was.
            Some(slot) => {
                self.store.parts().index.activate(slot);
                slot
            }
            None => {
                if self.store.parts().index.is_full() {
                    let oldest = self.store.parts().index.oldest();
                    if let Some(oldest) = oldest {
                        self.stats.evictions += 1;
                        self.flush_slot(oldest, FlushReason::Evicted, sink);
                    }
                }
                let Some(Taken { slot, reused }) =
                    self.store.parts().index.insert(inc.hash, &inc.key)
                else {
                    // Unreachable with at least one entry, but never lose a frame.
                    return self.deliver_alone(
                        frame,
                        PassReason::Malformed,
                        Some(self.alone_of(inc)),
                        sink,
                    );
                };
                self.stats.forgotten += u64::from(reused);
                slot
            }
        };
        if !inc.predicted {
            // Otherwise the entry's: the frame's headers equal its template's under the mask.
            self.adopt(slot, frame.as_ref(), inc, meta);
        }
        self.begin(slot, frame, f, inc.sum, inc.ip_end, inc.time)
    }

    /// Makes the frame (its facts `f`, payload sum, datagram end and arrival time) the head of
    /// a segment in the entry `slot`, whose layers and template describe it.
    #[inline(never)]
    fn begin(
        &mut self,
        slot: u16,
        frame: F,
        f: &Fields,
        sum: PayloadSum,
        ip_end: u32,
        time: u64,
    ) -> Verdict {
        let Parts {
            flows,
            frames,
            candidates,
            ..
        } = self.store.parts();
        let s = usize::from(slot);
        let e = &mut flows[s];
        let first_l3 = e.layers.first_l3() as u32;
        e.count = 1;
        e.ack_only = false;
        e.next_seq = f.seq.wrapping_add(f.payload_len);
        e.ack = f.ack;
        e.window = f.window;
        e.ts = f.options.timestamps();
        e.flags_word = f.flags_word;
        e.or_flags = 0;
        e.ip = held_ip(&f.ip);
        e.outer = f.outer.as_ref().map_or(IpHeld::default(), held_ip);
        e.mss = f.payload_len;
        e.max_payload = f.payload_len;
        e.data_frames = u16::from(f.payload_len > 0);
        e.ip_len = ip_end - first_l3;
        e.payload_len = f.payload_len;
        e.absorbed = false;
        e.first_time = time;
        e.last_time = time;
        e.sums = match sum {
            PayloadSum::None => Sums {
                complete: false,
                ..Sums::default()
            },
            PayloadSum::Folded(sum) => Sums {
                folded: sum,
                complete: true,
                ..Sums::default()
            },
            // The head's payload starts the segment's, at offset 0.
            PayloadSum::Negated(words) => Sums {
                negated_acc: words,
                negated_frames: 1,
                complete: true,
                ..Sums::default()
            },
        };
        if e.tpl.is_predicted() {
            let shape = e.tpl.layout();
            self.probe = self.probe.after_start(shape, f.payload_len > 0);
            if self.probe.covers(shape) {
                candidates[self
                    .probe
                    .index(frame.as_ref(), C::FLOWS * CANDIDATES_PER_FLOW)] = slot;
            }
        }
        frames[s * C::FRAMES] = Some(Held {
            frame,
            start: 0,
            end: ip_end,
        });
        self.held += 1;
        if let Some(max) = self.config.max_hold {
            self.hold_deadline = self.hold_deadline.min(time.saturating_add(max));
        }
        Verdict::Held
    }

    /// Appends a frame the rules accepted to the segment in `slot`: its facts, payload sum,
    /// payload offset and datagram end.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // the frame's parts, kept in registers on the hot path
    fn append<K: Sink<F> + ?Sized>(
        &mut self,
        slot: u16,
        frame: F,
        f: &Appended,
        sum: PayloadSum,
        payload: u32,
        ip_end: u32,
        time: u64,
        sink: &mut K,
    ) -> Verdict {
        let Parts {
            mut index,
            flows,
            frames,
            ..
        } = self.store.parts();
        let s = usize::from(slot);
        let e = &mut flows[s];
        let completes = rules::completes(e, f.flags, f.payload_len);
        // Linux `inet_gro_flush`: the second frame repeating the head's ID fixes the IDs.
        if e.data_frames == 1 {
            e.ip.fixed_id |= !e.layers.v6 && f.ip_id == e.ip.id;
            if let Some(o) = e.layers.outer.filter(|_| E::ENABLED) {
                e.outer.fixed_id |= !o.v6 && f.outer_id == e.outer.id;
            }
        }
        let at = e.payload_len as usize;
        match sum {
            PayloadSum::Folded(sum) => e.sums.folded = csum::add_at_offset(e.sums.folded, sum, at),
            PayloadSum::Negated(words) => {
                if at.is_multiple_of(2) {
                    // Even offset: the pieces' sums add as they are, and so do their negations.
                    e.sums.negated_acc += words;
                    e.sums.negated_frames += 1;
                } else {
                    let sum = predict::negated_sum(words + e.tpl.sum_base);
                    e.sums.folded = csum::add_at_offset(e.sums.folded, sum, at);
                }
            }
            PayloadSum::None => e.sums.complete = false,
        }
        e.payload_len += f.payload_len;
        e.ip_len += f.payload_len;
        e.next_seq = e.next_seq.wrapping_add(f.payload_len);
        e.ack = f.ack;
        e.window = f.window;
        if f.ts.is_some() {
            e.ts = f.ts;
        }
        if e.mss == 0 {
            e.mss = f.payload_len;
        }
        e.max_payload = e.max_payload.max(f.payload_len);
        e.data_frames += 1;
        e.last_time = time;
        let count = usize::from(e.count);
        e.count += 1;
        // `rules::room` saw a free slot.
        frames[s * C::FRAMES + count] = Some(Held {
            frame,
            start: payload,
            end: ip_end,
        });
        self.held += 1;
        if f.trimmed {
            self.stats.trimmed += 1;
        }
        index.touch(slot);
        match completes {
            Some(reason) => {
                e.or_flags |= f.flags & (flags::PSH | flags::FIN);
                self.flush_slot(slot, reason, sink);
                Verdict::MergedAndFlushed(reason)
            }
            None => Verdict::Merged,
        }
    }

    /// Absorbs a superseded pure ACK into the segment in `slot` (`Lro`): its values win, the
    /// frame is released.
    fn absorb<K: Sink<F> + ?Sized>(
        &mut self,
        slot: u16,
        frame: F,
        f: &Fields,
        time: u64,
        sink: &mut K,
    ) -> Verdict {
        if f.padded {
            self.stats.trimmed += 1;
        }
        let (ts, tunnelled) = (f.options.timestamps(), f.outer.is_some());
        self.absorb_values(slot, frame, f.ack, f.window, ts, tunnelled, time, sink)
    }

    /// [`Engine::absorb`] given the values it takes from the frame. A padded frame's trim is
    /// counted by the caller ([`Engine::absorb`], or [`Engine::push_short`] for the padded pure
    /// ACKs header prediction absorbs under `Lro`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)] // the frame and the values of it that are kept
    fn absorb_values<K: Sink<F> + ?Sized>(
        &mut self,
        slot: u16,
        frame: F,
        ack: u32,
        window: u16,
        ts: Option<(u32, u32)>,
        tunnelled: bool,
        time: u64,
        sink: &mut K,
    ) -> Verdict {
        let Parts {
            mut index, flows, ..
        } = self.store.parts();
        let e = &mut flows[usize::from(slot)];
        e.ack = ack;
        e.window = window;
        if let Some(ts) = ts {
            e.ts = Some(ts);
        }
        e.absorbed = true;
        e.last_time = time;
        index.touch(slot);
        self.stats.acks_merged += 1;
        self.stats.absorbed += 1;
        if E::ENABLED && tunnelled {
            self.stats.tunnel.acks_merged += 1;
        }
        sink.release(frame);
        Verdict::Absorbed
    }

    /// Delivers a frame on its own.
    fn deliver_alone<K: Sink<F> + ?Sized>(
        &mut self,
        frame: F,
        reason: PassReason,
        parsed: Option<Alone<E::Tunnel>>,
        sink: &mut K,
    ) -> Verdict {
        if let Some(a) = &parsed {
            // Counted for the tunnel too when the frame came through one (its key has the
            // tunnel's identity).
            if E::ENABLED && a.key.tunnel.key().is_some() {
                self.stats.tunnel.passed[reason.index()] += 1;
            }
            // Values are trusted only once the checksum was verified (verification comes
            // before any other verdict). A SYN or RST starts or ends a connection: the flow's
            // ACK history no longer applies. Only a segment with ACK set carries an ACK number.
            let verified = !matches!(
                reason,
                PassReason::BadIpChecksum
                    | PassReason::BadTcpChecksum
                    | PassReason::BadEncapChecksum
                    | PassReason::Unverified
            );
            if verified && self.config.policy == Policy::Lro {
                let mut acks = self.store.parts().acks;
                if a.flags & (flags::SYN | flags::RST) != 0 {
                    acks.forget(&a.key, a.hash);
                } else if a.flags & flags::ACK != 0 {
                    acks.remember(&a.key, a.hash, a.ack, a.window);
                }
            }
        }
        let len = frame.as_ref().len();
        let data = parsed.as_ref().is_some_and(|a| a.payload_len > 0);
        let mut one = [Some(Held {
            frame,
            start: 0,
            end: len as u32,
        })];
        self.stats.passed[reason.index()] += 1;
        self.stats.data_out += u64::from(data);
        self.stats.frames_out += 1;
        self.stats.segments += 1;
        let info = SegmentInfo {
            frames: 1,
            gso_segs: u16::from(data),
            gso_size: 0,
            len,
            l3: parsed.as_ref().map_or(0, |a| a.l3),
            l4: parsed.as_ref().map_or(0, |a| a.l4),
            payload_len: parsed.as_ref().map_or(0, |a| a.payload_len),
            checksum: OutChecksum::AsReceived,
            fixed_id: false,
            fixed_outer_id: false,
            flow: parsed.as_ref().map(|a| a.key.flow),
            tunnel: parsed.as_ref().and_then(|a| a.key.tunnel.key().copied()),
            cause: Cause::Passed(reason),
        };
        sink.segment(Segment::new(&mut one, info));
        Verdict::Passed(reason)
    }

    /// Flushes held segments a frame with this hint must not overtake.
    fn flush_for_hint<K: Sink<F> + ?Sized>(&mut self, hint: &FlowHint, sink: &mut K) {
        match hint {
            FlowHint::None => {}
            // Ports unknown: every held flow of the address pair goes first. With an
            // encapsulation, every tunnel's between these addresses too: an IPv6 fragment
            // whose Fragment header names an extension header may carry the tunnel behind it.
            FlowHint::Addresses(a) => self.flush_where(
                FlushReason::Unknown,
                |k| k.flow.same_addresses(a) || E::ENABLED && tunnelled_between(k, a.src, a.dst),
                sink,
            ),
            // Inner flow unknown: every held flow of the tunnel's outer address pair.
            FlowHint::Tunnel(o) => self.flush_where(
                FlushReason::Unknown,
                |k| tunnelled_between(k, o.src, o.dst),
                sink,
            ),
        }
    }

    /// Flushes, before a frame whose tunnel header never merges (`inc.facts.encap` is an
    /// error: GRE with a sequence number, say), the held segments of its inner flow between
    /// the same outer addresses. Such a header is part of the tunnel's identity, so no held
    /// flow has the frame's key, but the inner TCP connection is the same one and its data
    /// must not be overtaken.
    #[cold]
    fn flush_inner_flow<K: Sink<F> + ?Sized>(&mut self, key: &Key<E::Tunnel>, sink: &mut K) {
        let Some(outer) = key.tunnel.key().copied() else {
            return;
        };
        let inner = key.flow;
        // Its flow as far as the connection goes: the frame cannot be merged.
        self.flush_where(
            FlushReason::Unmergeable,
            |k| k.flow == inner && tunnelled_between(k, outer.outer_src, outer.outer_dst),
            sink,
        );
    }

    /// Flushes every held segment whose key `matches`, oldest first, for `reason`.
    fn flush_where<K: Sink<F> + ?Sized>(
        &mut self,
        reason: FlushReason,
        matches: impl Fn(&Key<E::Tunnel>) -> bool,
        sink: &mut K,
    ) {
        // O(flows held), only for frames the parser could not read as TCP but whose addresses
        // it knows (fragments, truncated headers, routed IPv6, tunnelled frames whose inner
        // flow it could not read, GRE carrying UDP among them) and for tunnelled frames whose
        // tunnel header never merges.
        let mut cur = self.store.parts().index.oldest();
        while let Some(slot) = cur {
            let parts = self.store.parts();
            cur = parts.index.newer(slot);
            if matches(parts.index.key(slot)) {
                self.flush_slot(slot, reason, sink);
            }
        }
    }

    /// Completes the held segment in `slot`: finalises the head's headers and delivers it.
    fn flush_slot<K: Sink<F> + ?Sized>(&mut self, slot: u16, reason: FlushReason, sink: &mut K) {
        let config = self.config;
        let Parts {
            mut index,
            flows,
            frames,
            mut acks,
            ..
        } = self.store.parts();
        let s = usize::from(slot);
        let e = &mut flows[s];
        let count = usize::from(e.count);
        if count == 0 {
            index.park(slot);
            return;
        }
        // Borrowed, not copied: the entry is parked once the segment's info has its copy.
        let key = index.key(slot);
        if config.policy == Policy::Lro {
            acks.remember(key, e.hash, e.ack, e.window);
        }
        let row = &mut frames[s * C::FRAMES..s * C::FRAMES + count];
        self.held -= count;
        let rewrite = count > 1 || e.absorbed;
        let checksum = if !rewrite {
            OutChecksum::AsReceived
        } else if count == 1
            && config.checksum_out == OutChecksum::Full
            && !(E::ENABLED && e.layers.outer.is_some())
        {
            refresh_head(e, row);
            OutChecksum::Full
        } else {
            finalise::<F, E>(e, row, &config);
            config.checksum_out.rewritten()
        };
        // The head from offset 0 to its datagram's end, then each appended frame's payload: the
        // link header plus the merged datagram (held frames' `start..end`, summed).
        let len = e.layers.first_l3() + e.ip_len as usize;
        self.stats.flushes[reason.index()] += 1;
        self.stats.data_out += u64::from(e.payload_len > 0);
        self.stats.frames_out += count as u64;
        self.stats.segments += 1;
        if count > 1 {
            self.stats.coalesced += 1;
            self.stats.frames_merged += count as u64 - 1;
            if E::ENABLED && e.layers.outer.is_some() {
                self.stats.tunnel.frames_merged += count as u64 - 1;
            }
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
            l3: u32::from(e.layers.l3),
            l4: u32::from(e.layers.l4),
            payload_len: e.payload_len,
            checksum,
            fixed_id: e.ip.fixed_id,
            fixed_outer_id: e.outer.fixed_id,
            flow: Some(key.flow),
            tunnel: key.tunnel.key().copied(),
            cause: Cause::Flushed(reason),
        };
        index.park(slot);
        e.count = 0;
        sink.segment(Segment::new(row, info));
        // Frames the sink did not take out are dropped here (their `Drop` recycles them).
        for h in row.iter_mut() {
            *h = None;
        }
    }
}

/// The bytes of the head frame of the segment in `slot` (empty when nothing is held).
#[inline(always)]
fn head_bytes<'a, F: AsRef<[u8]> + 'a, C: Capacity, E: Encap>(
    store: &'a C::Storage<F, E::Tunnel>,
    slot: u16,
) -> &'a [u8] {
    match store.frames().get(usize::from(slot) * C::FRAMES) {
        Some(Some(h)) => h.frame.as_ref(),
        _ => &[],
    }
}

#[inline(always)]
fn held_ip(f: &IpFacts) -> IpHeld {
    IpHeld {
        ttl: f.ttl,
        tos: f.tos,
        df: f.df,
        id: f.id,
        fixed_id: false,
    }
}

/// The header fix-up of a segment of one frame that absorbed pure ACKs (`Lro`): only the TCP
/// flags, ACK number, window and timestamps of the head change (no length, no payload), so
/// its TCP checksum, valid as received, is updated for the changed words (RFC 1624 eqn. 3:
/// `HC' = ~(~HC + ~m + m')`) instead of recomputed from the segment's sums. Tunnels, whose
/// encapsulation checksum covers these words too, and `Partial` output take [`finalise`].
fn refresh_head<F: AsRef<[u8]> + AsMut<[u8]>>(e: &FlowState, row: &mut [Option<Held<F>>]) {
    let Some(Some(head)) = row.first_mut() else {
        return;
    };
    let b = head.frame.as_mut();
    let l4 = usize::from(e.layers.l4);
    let t = b.get_mut(l4..usize::from(e.layers.payload));
    match (e.ts, t) {
        (Some(_), Some(t)) => {
            if let Some(t) = t.first_chunk_mut::<{ tcp::HEADER_LEN_TS }>() {
                refresh_tcp(t, e);
            }
        }
        (None, Some(t)) => {
            if let Some(t) = t.first_chunk_mut::<{ tcp::HEADER_LEN }>() {
                refresh_tcp(t, e);
            }
        }
        _ => {}
    }
}

/// [`refresh_head`] on the head's TCP header: `N` bytes, with the timestamp option when
/// `N` is [`tcp::HEADER_LEN_TS`].
#[inline(always)]
fn refresh_tcp<const N: usize>(t: &mut [u8; N], e: &FlowState) {
    // ACK number, data offset and flags, window; the timestamp values: at most eight 16-bit
    // words, added and folded once.
    let words = |t: &[u8; N]| {
        let w = |at: usize| u64::from(u16::from_be_bytes([t[at], t[at + 1]]));
        let mut acc = w(8) + w(10) + w(12) + w(14);
        if N == tcp::HEADER_LEN_TS {
            acc += w(24) + w(26) + w(28) + w(30);
        }
        csum::fold(acc)
    };
    let old = words(t);
    write_tcp_state(t, e);
    let new = words(t);
    let at = tcp::field::CHECKSUM.start;
    let hc = u16::from_be_bytes([t[at], t[at + 1]]);
    write_be16(t, at, !csum::add(csum::sub(!hc, old), new));
}

/// Whether `k` is a flow tunnelled between the outer addresses `src` and `dst`.
fn tunnelled_between<T: TunnelSlot>(k: &Key<T>, src: u128, dst: u128) -> bool {
    k.tunnel
        .key()
        .is_some_and(|t| t.outer_src == src && t.outer_dst == dst)
}

/// Writes a segment's TCP state into its head's TCP header `t`: the flags of every frame, and
/// the newest ACK number, window and timestamps (what [`finalise`] and [`refresh_head`] both
/// rewrite). Under `Gro` these equal the head's (its rules merge only frames that carry the
/// same), so only a segment that `Lro` merged into changes; written whatever the policy, a
/// segment held when [`Engine::set_config`] changed it keeps what it merged.
#[inline(always)]
fn write_tcp_state(t: &mut [u8], e: &FlowState) {
    if let Some(f) = t.get_mut(tcp::field::FLAGS) {
        *f |= e.or_flags;
    }
    write_be32(t, tcp::field::ACK_NUM.start, e.ack);
    write_be16(t, tcp::field::WINDOW.start, e.window);
    if let Some((val, ecr)) = e.ts {
        write_be32(t, tcp::field::TS_VAL.start, val);
        write_be32(t, tcp::field::TS_ECR.start, ecr);
    }
}

/// Whether segments of the layers `l` need payload sums under `config`: for a full TCP
/// checksum, or for an encapsulation's checksum (which covers the payload whatever the TCP
/// checksum mode).
#[inline(always)]
fn needs_sums<E: Encap>(config: &Config, l: &Layers) -> bool {
    config.checksum_out.rewritten() == OutChecksum::Full
        || (E::ENABLED && l.outer.is_some_and(|o| o.checksum.is_some()))
}

/// Whether frames go to header prediction: the configuration asks for it, its gate has not
/// paused it, and frames do not bypass coalescing (cached in `Engine::predicting`, read per
/// frame).
#[inline(always)]
const fn predicts(config: &Config, gate: &Prediction, bypass: &Bypass) -> bool {
    config.header_prediction && gate.open() && bypass.open()
}

/// Rewrites the head's headers for the merged segment (Linux `inet_gro_complete`,
/// `ipv6_gro_complete`, `tcp_gro_complete`, `gre_gro_complete`; FreeBSD
/// `tcp_lro_update_checksum` for the newest ACK, window and timestamps under `Lro`).
fn finalise<F: AsRef<[u8]> + AsMut<[u8]>, E: Encap>(
    e: &mut FlowState,
    row: &mut [Option<Held<F>>],
    config: &Config,
) {
    let l = e.layers;
    let payload = l.header_len();
    let full = config.checksum_out.rewritten() == OutChecksum::Full;
    let need_sum = needs_sums::<E>(config, &l);
    if need_sum && !e.sums.complete {
        // Some frames arrived under `Partial` output, which keeps no sums: read the payload.
        let mut sum = 0u16;
        let mut at = 0usize;
        for (i, h) in row.iter().flatten().enumerate() {
            let start = if i == 0 { payload } else { h.start as usize };
            let piece = h.frame.as_ref().get(start..h.end as usize).unwrap_or(&[]);
            sum = csum::add_at_offset(sum, csum::sum(piece), at);
            at += piece.len();
        }
        e.sums = Sums {
            folded: sum,
            complete: true,
            ..Sums::default()
        };
    }
    let payload_sum = need_sum.then(|| match e.sums.negated_frames {
        0 => e.sums.folded,
        // Folding the negated pieces' sum here, not per frame, can turn a -0 (0xffff) payload
        // sum into +0 (0): the same number, and adding it to the nonzero pseudo-header sum
        // gives the same result either way.
        n => {
            let acc = e.sums.negated_acc + u64::from(n) * e.tpl.sum_base;
            csum::add(e.sums.folded, predict::negated_sum(acc))
        }
    });
    let Some(Some(head)) = row.first_mut() else {
        return;
    };
    let b = head.frame.as_mut();
    let l4 = usize::from(l.l4);
    if b.len() < payload {
        return;
    }
    let Some(t) = b.get_mut(l4..) else {
        return;
    };
    write_tcp_state(t, e);
    let tcp = if full { TcpSum::Full } else { TcpSum::Partial };
    let end = l.first_l3() + e.ip_len as usize;
    fixup::fix_headers::<E>(b, &l, end, payload_sum, tcp, &e.pseudo);
}

impl<F, C: Capacity, E: Encap> Coalescer<F> for Engine<F, C, E>
where
    F: AsRef<[u8]> + AsMut<[u8]>,
{
    #[inline]
    fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict {
        Engine::push(self, frame, meta, sink)
    }

    fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        Engine::flush_all(self, sink);
    }

    fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        Engine::flush_idle(self, now, sink);
    }

    fn stats(&self) -> &Stats {
        &self.stats
    }

    fn held_frames(&self) -> usize {
        self.held
    }
}

impl<F, C: Capacity, E: Encap> Default for Engine<F, C, E>
where
    F: AsRef<[u8]> + AsMut<[u8]>,
{
    /// An engine with [`Config::default`] (`Lro`).
    fn default() -> Self {
        Self::new(Config::default())
    }
}

impl<F, C: Capacity, E: Encap> core::fmt::Debug for Engine<F, C, E> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Engine")
            .field("config", &self.config)
            .field("flows", &C::FLOWS)
            .field("frames_per_segment", &C::FRAMES)
            .field("encap", &E::NAME)
            .field("held_frames", &self.held)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
