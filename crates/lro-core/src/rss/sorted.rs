//! The RSS-sorting batch wrapper (FreeBSD D4914).

use core::fmt;

use super::sort::{group_keys, sort_key, ARRIVAL_BITS, ARRIVAL_MASK};
use super::toeplitz::Toeplitz;
use crate::coalesce::{Coalescer, Sink};
use crate::meta::{RssHash, RxMeta};
use crate::parse::{self, FlowHint, Unparsed};
use crate::stats::{Stats, Verdict};

/// Counters of an [`RssSorted`] wrapper (the inner engine keeps its own [`Stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RssStats {
    /// Batches sorted and fed to the inner engine.
    pub batches: u64,
    /// Batches started because the queue was full (FreeBSD's `lro_mbuf_max` flush).
    pub full_queue: u64,
    /// (type, hash) runs fed; each ends with an inner `flush_all` (`tcp_lro_rx_done`).
    pub runs: u64,
    /// Frames without a NIC hash whose Toeplitz hash was computed in software.
    pub software_hashes: u64,
    /// Frames with neither a NIC hash nor readable IP addresses (fed in the first run, hash 0).
    pub unhashed: u64,
}

/// FreeBSD's RSS-optimised LRO (`tcp_lro_queue_mbuf` + `tcp_lro_flush_all`, D4914) as a
/// wrapper that is itself a [`Coalescer`].
///
/// [`push`](Coalescer::push) only queues the frame and its [`RxMeta`] (up to `B` frames, in
/// fixed arrays). [`flush_all`](Coalescer::flush_all) (the end of a poll) groups the queue by
/// RSS hash type and hash, keeping arrival order inside each group ([`sort_key`],
/// [`group_keys`]), and feeds the inner engine `C` one group at a time, calling the inner
/// `flush_all` whenever the (type, hash) changes and at the end, as `tcp_lro_flush_all` calls
/// `tcp_lro_rx_done` between streams. A queue that fills up is flushed the same way at once.
/// So an inner table of a few entries serves any number of interleaved flows: a burst of 64
/// flows through 8 entries aggregates like a table with one entry per flow.
///
/// Frames without a NIC hash (`meta.rss == None`) get a software Toeplitz hash of their
/// addresses and ports ([`Toeplitz::flow`]; addresses only when the ports are unreadable, an IP
/// fragment), and the inner engine receives that hash in their metadata.
///
/// Ordering: within a flow, frames reach the inner engine in arrival order, so its output
/// keeps each flow's order. Order *across* flows changes: frames come out grouped by flow,
/// not interleaved as they arrived. One more caveat, shared with FreeBSD: a frame is placed by
/// its (type, hash), so frames of one TCP connection that carry different hashes (for
/// instance an IP fragment hashed on addresses only while the rest are hashed with ports, or a
/// NIC that hashes some frames and not others) may be reordered relative to each other.
///
/// Memory: `B` frame slots, `B` metadata copies and three `B`-word arrays, all inside the
/// value; the arrival index has 24 bits, so `B` is at most 2^24 (checked at compile time).
///
/// ```
/// use lro_core::rss::RssSorted;
/// use lro_core::{Coalescer, Config, Engine, RxMeta, Segment, Sink, Sizes};
///
/// struct Count(usize);
/// impl<F: AsRef<[u8]>> Sink<F> for Count {
///     fn segment(&mut self, _segment: Segment<'_, F>) {
///         self.0 += 1;
///     }
/// }
///
/// // 8 flow entries behind a queue of 256 frames.
/// let inner: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(Config::lro());
/// let mut engine: RssSorted<_, Vec<u8>, 256> = RssSorted::new(inner);
/// let mut sink = Count(0);
/// engine.push(vec![0u8; 60], &RxMeta::ethernet(0), &mut sink); // queued
/// assert_eq!((sink.0, engine.queued()), (0, 1));
/// engine.flush_all(&mut sink); // sorted, fed, flushed
/// assert_eq!((sink.0, engine.queued()), (1, 0));
/// assert!(engine.stats().is_conserved());
/// ```
pub struct RssSorted<C, F, const B: usize> {
    inner: C,
    frames: [Option<F>; B],
    metas: [RxMeta; B],
    keys: [u64; B],
    scratch: [u64; B],
    counts: [u32; B],
    len: usize,
    toeplitz: &'static Toeplitz,
    rss_stats: RssStats,
}

impl<C, F, const B: usize> RssSorted<C, F, B> {
    /// Wraps `inner`, hashing unhashed frames with the Microsoft key.
    pub fn new(inner: C) -> Self {
        Self::with_toeplitz(inner, Toeplitz::microsoft())
    }

    /// Wraps `inner`, hashing unhashed frames with `toeplitz` (e.g. the key the NIC was
    /// programmed with, so software and hardware hashes agree).
    pub fn with_toeplitz(inner: C, toeplitz: &'static Toeplitz) -> Self {
        const {
            assert!(
                B >= 1 && B <= 1 << ARRIVAL_BITS,
                "B must be in 1..=2^24 (the arrival index has 24 bits)"
            )
        };
        Self {
            inner,
            frames: core::array::from_fn(|_| None),
            metas: [RxMeta::default(); B],
            keys: [0; B],
            scratch: [0; B],
            counts: [0; B],
            len: 0,
            toeplitz,
            rss_stats: RssStats::default(),
        }
    }

    /// The inner engine.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// The inner engine, mutably (e.g. to change its configuration). Frames pushed into it
    /// directly bypass the queue.
    pub fn inner_mut(&mut self) -> &mut C {
        &mut self.inner
    }

    /// Frames queued and not yet fed to the inner engine.
    pub fn queued(&self) -> usize {
        self.len
    }

    /// The wrapper's own counters.
    pub fn rss_stats(&self) -> &RssStats {
        &self.rss_stats
    }

    /// Flushes everything into `sink` and returns the inner engine.
    pub fn into_inner<K: Sink<F> + ?Sized>(mut self, sink: &mut K) -> C
    where
        C: Coalescer<F>,
        F: AsRef<[u8]>,
    {
        self.flush_all(sink);
        self.inner
    }

    /// The RSS hash a frame is sorted by: the NIC's, else Toeplitz over its flow.
    fn hash_of(&mut self, frame: &[u8], meta: &RxMeta) -> Option<RssHash> {
        if meta.rss.is_some() {
            return meta.rss;
        }
        let t = self.toeplitz;
        let hash = in_place_hash(t, frame, meta).or_else(|| parsed_hash(t, frame, meta));
        match hash {
            Some(_) => self.rss_stats.software_hashes += 1,
            None => self.rss_stats.unhashed += 1,
        }
        hash
    }

    /// Groups the queue and feeds it to the inner engine run by run (`tcp_lro_flush_all`).
    fn drain<K: Sink<F> + ?Sized>(&mut self, sink: &mut K)
    where
        C: Coalescer<F>,
    {
        let n = core::mem::take(&mut self.len);
        if n == 0 {
            return;
        }
        self.rss_stats.batches += 1;
        let keys = &mut self.keys[..n];
        group_keys(keys, &mut self.scratch, &mut self.counts[..n]);
        let mut run = None;
        for &key in keys.iter() {
            let Some(slot) = self.frames.get_mut((key & ARRIVAL_MASK) as usize) else {
                continue;
            };
            let Some(frame) = slot.take() else {
                continue;
            };
            let group = key >> ARRIVAL_BITS;
            if run != Some(group) {
                if run.is_some() {
                    // tcp_lro_rx_done: a new stream starts, push up the previous one.
                    self.inner.flush_all(sink);
                }
                run = Some(group);
                self.rss_stats.runs += 1;
            }
            let meta = &self.metas[(key & ARRIVAL_MASK) as usize];
            self.inner.push(frame, meta, sink);
        }
    }
}

/// Toeplitz over the addresses and ports of a frame of the parser's fast-path shapes, read in
/// place ([`Toeplitz::tcp_in_place`]): the hash [`parsed_hash`] gives such a frame, without
/// storing every field of it (the inner engine parses it again) or copying the key's bytes:
/// `lro bench --rss-sort` executes about 150 fewer instructions per frame (571 instead of 725
/// on a 4-flow capture). `None` for any other frame.
#[inline(always)]
fn in_place_hash(t: &Toeplitz, frame: &[u8], meta: &RxMeta) -> Option<RssHash> {
    parse::fast_flow_bytes(frame, meta).map(|f| t.tcp_in_place(f))
}

/// Toeplitz over the flow [`parse::parse`] reads ([`Toeplitz::flow`]): over the addresses and
/// ports when the frame parses, over the addresses alone when only they could be read (an IP
/// fragment, say); `None` when not even they could.
#[inline(never)]
fn parsed_hash(t: &Toeplitz, frame: &[u8], meta: &RxMeta) -> Option<RssHash> {
    let (key, with_ports) = match parse::parse(frame, meta) {
        Ok(p) => (p.key, true),
        Err(Unparsed {
            hint: FlowHint::Addresses(k) | FlowHint::Tunnel(k),
            ..
        }) => (k, false),
        Err(_) => return None,
    };
    Some(t.flow(&key, with_ports))
}

impl<C: Coalescer<F>, F: AsRef<[u8]>, const B: usize> Coalescer<F> for RssSorted<C, F, B> {
    /// Queues the frame (`tcp_lro_queue_mbuf`) and returns [`Verdict::Queued`]; if that fills
    /// the queue, the whole batch is fed to the inner engine before this returns.
    fn push<K: Sink<F> + ?Sized>(&mut self, frame: F, meta: &RxMeta, sink: &mut K) -> Verdict {
        if self.len >= B {
            self.flush_all(sink);
        }
        let i = self.len;
        let mut meta = *meta;
        let hash = self.hash_of(frame.as_ref(), &meta);
        meta.rss = hash;
        let hash = hash.unwrap_or_default();
        self.keys[i] = sort_key(hash.value, hash.kind, i as u32);
        self.metas[i] = meta;
        self.frames[i] = Some(frame);
        self.len = i + 1;
        if self.len == B {
            self.rss_stats.full_queue += 1;
            self.flush_all(sink);
        }
        Verdict::Queued
    }

    fn flush_all<K: Sink<F> + ?Sized>(&mut self, sink: &mut K) {
        self.drain(sink);
        self.inner.flush_all(sink);
    }

    /// A queue is a burst, never a hold: queued frames are fed and flushed first, then the
    /// inner engine's idle flush runs.
    fn flush_idle<K: Sink<F> + ?Sized>(&mut self, now: u64, sink: &mut K) {
        if self.len > 0 {
            self.flush_all(sink);
        }
        self.inner.flush_idle(now, sink);
    }

    /// The inner engine's counters: queued frames are counted once fed.
    fn stats(&self) -> &Stats {
        self.inner.stats()
    }

    fn held_frames(&self) -> usize {
        self.len + self.inner.held_frames()
    }
}

impl<C: fmt::Debug, F, const B: usize> fmt::Debug for RssSorted<C, F, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RssSorted")
            .field("inner", &self.inner)
            .field("queued", &self.len)
            .field("capacity", &B)
            .field("rss_stats", &self.rss_stats)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use crate::coalesce::{Config, Segment};
    use crate::meta::RxChecksum;
    use crate::testing::{bytes_of, FrameSpec, IpSpec, TCP_ACK, TPID_8021AD, TPID_8021Q};
    use crate::{Engine, RssType, Sizes};
    use proptest::prelude::*;
    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    /// Payload bytes per test frame; each carries (flow, index) so the output can be traced.
    const PAY: usize = 48;

    /// Data frame `idx` of flow `flow` (source port 10000 + flow), consecutive sequence numbers.
    fn data_frame(flow: u16, idx: u32, v6: bool) -> Vec<u8> {
        let mut payload = [0u8; PAY];
        for c in payload.chunks_mut(6) {
            c.copy_from_slice(&[(flow >> 8) as u8, flow as u8, 0, 0, 0, 0]);
            c[2..].copy_from_slice(&idx.to_be_bytes());
        }
        let spec = if v6 {
            FrameSpec::ipv6_tcp(10000 + flow, 5201)
        } else {
            FrameSpec::ipv4_tcp(10000 + flow, 5201)
        };
        let spec = spec
            .seq(1 + idx * PAY as u32)
            .ack(1)
            .flags(TCP_ACK)
            .window(1000)
            .payload(&payload);
        bytes_of(&spec)
    }

    fn meta(nic_hash: Option<u32>) -> RxMeta {
        let m = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
        match nic_hash {
            Some(value) => m.with_rss(RssHash {
                value,
                kind: RssType::TcpIpv4,
            }),
            None => m,
        }
    }

    /// Records the (flow, index) of every frame delivered, in output order.
    #[derive(Default)]
    struct Trace {
        out: Vec<(u16, u32)>,
        segments: usize,
        released: usize,
        /// Segments that are not TCP over IP.
        other: usize,
    }

    impl Sink<Vec<u8>> for Trace {
        fn segment(&mut self, segment: Segment<'_, Vec<u8>>) {
            self.segments += 1;
            let mut buf = vec![0u8; segment.len()];
            let len = segment.copy_to(&mut buf).unwrap();
            let Ok(p) = parse::parse(&buf[..len], &RxMeta::ethernet(0)) else {
                self.other += 1;
                return;
            };
            let payload = &buf[p.payload as usize..(p.payload + p.payload_len) as usize];
            assert_eq!(payload.len() % PAY, 0);
            for chunk in payload.chunks(PAY) {
                let flow = u16::from_be_bytes([chunk[0], chunk[1]]);
                let idx = u32::from_be_bytes([chunk[2], chunk[3], chunk[4], chunk[5]]);
                self.out.push((flow, idx));
            }
        }

        fn release(&mut self, _frame: Vec<u8>) {
            self.released += 1;
        }
    }

    /// Pushes `arrivals` (flow ids) with a flush after every `poll` frames and at the end;
    /// returns the trace and the engine's counters.
    fn run<E: Coalescer<Vec<u8>>>(
        engine: &mut E,
        arrivals: &[u16],
        poll: usize,
        v6: bool,
        nic_hash: impl Fn(u16) -> Option<u32>,
    ) -> (Trace, Stats) {
        let mut trace = Trace::default();
        let mut next = std::collections::HashMap::<u16, u32>::new();
        for (i, &flow) in arrivals.iter().enumerate() {
            let idx = next.entry(flow).or_insert(0);
            engine.push(
                data_frame(flow, *idx, v6),
                &meta(nic_hash(flow)),
                &mut trace,
            );
            *idx += 1;
            if (i + 1) % poll == 0 {
                engine.flush_all(&mut trace);
            }
        }
        engine.flush_all(&mut trace);
        assert_eq!(engine.held_frames(), 0);
        (trace, engine.stats().clone())
    }

    /// Every frame out exactly once, and each flow's frames in arrival order.
    fn check_trace(trace: &Trace, arrivals: &[u16]) {
        assert_eq!(trace.released, 0);
        let mut expected: Vec<(u16, u32)> = Vec::new();
        let mut next = std::collections::HashMap::<u16, u32>::new();
        for &flow in arrivals {
            let idx = next.entry(flow).or_insert(0);
            expected.push((flow, *idx));
            *idx += 1;
        }
        let mut got = trace.out.clone();
        got.sort_unstable();
        expected.sort_unstable();
        assert_eq!(got, expected, "every frame comes back exactly once");
        let mut last = std::collections::HashMap::<u16, u32>::new();
        for &(flow, idx) in &trace.out {
            if let Some(&prev) = last.get(&flow) {
                assert!(idx > prev, "flow {flow}: {idx} after {prev}");
            }
            last.insert(flow, idx);
        }
    }

    /// Records the hash in each frame's metadata, and hands the frame back.
    struct SeenHashes {
        seen: Vec<Option<RssHash>>,
        stats: Stats,
    }

    impl Coalescer<Vec<u8>> for SeenHashes {
        fn push<K: Sink<Vec<u8>> + ?Sized>(
            &mut self,
            frame: Vec<u8>,
            meta: &RxMeta,
            sink: &mut K,
        ) -> Verdict {
            self.seen.push(meta.rss);
            sink.release(frame);
            Verdict::Absorbed
        }
        fn flush_all<K: Sink<Vec<u8>> + ?Sized>(&mut self, _sink: &mut K) {}
        fn flush_idle<K: Sink<Vec<u8>> + ?Sized>(&mut self, _now: u64, _sink: &mut K) {}
        fn stats(&self) -> &Stats {
            &self.stats
        }
        fn held_frames(&self) -> usize {
            0
        }
    }

    /// The inner engine receives each frame with the hash it was sorted by in its metadata:
    /// the NIC's as given, the software one where the NIC gave none. (`Engine` keys its flow
    /// table with its own hash; an inner engine of the caller's may use this one.)
    #[test]
    fn inner_engine_sees_the_hash_each_frame_was_sorted_by() {
        let inner = SeenHashes {
            seen: Vec::new(),
            stats: Stats::new(),
        };
        let mut s: RssSorted<SeenHashes, Vec<u8>, 8> = RssSorted::new(inner);
        let (a, b) = (data_frame(1, 0, false), data_frame(2, 0, false));
        let software = parsed_hash(Toeplitz::microsoft(), &b, &meta(None)).unwrap();
        let mut trace = Trace::default();
        s.push(a, &meta(Some(77)), &mut trace);
        s.push(b, &meta(None), &mut trace);
        s.flush_all(&mut trace);
        let seen = &s.inner().seen;
        assert_eq!(seen.len(), 2);
        let nic = RssHash {
            value: 77,
            kind: RssType::TcpIpv4,
        };
        assert!(seen.contains(&Some(nic)), "{seen:?}");
        assert!(seen.contains(&Some(software)), "{seen:?} {software:?}");
        assert_eq!(s.rss_stats().software_hashes, 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn wrapper_keeps_flow_order_and_conserves(
            arrivals in proptest::collection::vec(0u16..12, 0..200),
            hashing in proptest::collection::vec(proptest::option::of(0u32..3), 12),
            poll in 1usize..80,
            v6 in any::<bool>(),
        ) {
            // NIC hashes from 0..3 make flows collide; None means software Toeplitz.
            let inner: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
            let mut engine: RssSorted<_, Vec<u8>, 32> = RssSorted::new(inner);
            let (trace, stats) = run(&mut engine, &arrivals, poll, v6, |f| hashing[usize::from(f)]);
            check_trace(&trace, &arrivals);
            prop_assert!(stats.is_conserved());
            prop_assert_eq!(stats.frames_in, arrivals.len() as u64);
            prop_assert_eq!(engine.queued(), 0);
        }
    }

    /// Deterministic interleaving of `flows` flows sending `per_flow` frames each.
    fn interleaved(flows: u16, per_flow: usize) -> Vec<u16> {
        let mut arrivals: Vec<u16> = (0..per_flow).flat_map(|_| 0..flows).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..arrivals.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            arrivals.swap(i, (x % (i as u64 + 1)) as usize);
        }
        arrivals
    }

    fn aggregation_case(v6: bool, nic: bool) {
        let arrivals = interleaved(64, 24);
        let poll = 256;
        let nic_hash = |f: u16| {
            nic.then(|| {
                Toeplitz::microsoft().tcp_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 10000 + f, 5201)
            })
        };
        let mut small: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(Config::lro());
        let (t_small, s_small) = run(&mut small, &arrivals, poll, v6, nic_hash);
        let mut big: Box<Engine<Vec<u8>, Sizes<1024, 16>>> = Box::new(Engine::new(Config::lro()));
        let (t_big, s_big) = run(&mut *big, &arrivals, poll, v6, nic_hash);
        let inner: Engine<Vec<u8>, Sizes<8, 16>> = Engine::new(Config::lro());
        let mut wrapped: Box<RssSorted<_, Vec<u8>, 256>> = Box::new(RssSorted::new(inner));
        let (t_wrapped, s_wrapped) = run(&mut *wrapped, &arrivals, poll, v6, nic_hash);
        std::eprintln!(
            "v6={v6} nic={nic}: segments for {} frames: 8 entries {}, 1024 entries {}, 8 entries sorted {}",
            arrivals.len(),
            s_small.segments,
            s_big.segments,
            s_wrapped.segments
        );
        for t in [&t_small, &t_big, &t_wrapped] {
            check_trace(t, &arrivals);
        }
        // The case must be one where 8 entries alone are not enough...
        assert!(
            s_small.segments > s_big.segments + s_big.segments / 2,
            "small {} vs big {}",
            s_small.segments,
            s_big.segments
        );
        // ...and sorting must bring 8 entries (nearly) to the 1024-entry result.
        assert!(
            s_wrapped.segments <= s_big.segments + s_big.segments / 20,
            "wrapped {} vs big {} (small {})",
            s_wrapped.segments,
            s_big.segments,
            s_small.segments
        );
        assert_eq!(s_wrapped.segments as usize, t_wrapped.segments);
        // Each (type, hash) run is flushed before the next starts (`tcp_lro_rx_done`): one flow
        // at a time in the 8 entries, none evicted.
        assert_eq!(s_wrapped.evictions, 0, "wrapped: runs not flushed apart");
        let rs = wrapped.rss_stats();
        assert_eq!(
            rs.software_hashes,
            if nic { 0 } else { arrivals.len() as u64 }
        );
        assert_eq!(rs.batches, arrivals.len().div_ceil(poll) as u64);
    }

    /// Runs `f` on a thread with room for a 1024-entry engine built on the stack.
    fn with_big_stack(f: impl FnOnce() + Send + 'static) {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap();
    }

    #[test]
    fn sorting_lets_8_entries_serve_64_flows_ipv4_software_hash() {
        with_big_stack(|| aggregation_case(false, false));
    }

    #[test]
    fn sorting_lets_8_entries_serve_64_flows_ipv4_nic_hash() {
        with_big_stack(|| aggregation_case(false, true));
    }

    #[test]
    fn sorting_lets_8_entries_serve_64_flows_ipv6_software_hash() {
        with_big_stack(|| aggregation_case(true, false));
    }

    #[test]
    fn full_queue_and_idle_flush_drain_the_queue() {
        let inner: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
        let mut engine: RssSorted<_, Vec<u8>, 4> = RssSorted::new(inner);
        let mut trace = Trace::default();
        for i in 0..3 {
            assert_eq!(
                engine.push(data_frame(1, i, false), &meta(None), &mut trace),
                Verdict::Queued
            );
        }
        assert_eq!((engine.queued(), trace.out.len()), (3, 0));
        engine.push(data_frame(1, 3, false), &meta(None), &mut trace);
        assert_eq!((engine.queued(), engine.held_frames()), (0, 0));
        assert_eq!(trace.out.len(), 4);
        assert_eq!(engine.rss_stats().full_queue, 1);
        // Garbage (no hash, no IP) and a frame waiting for an idle flush.
        engine.push(vec![0xff; 20], &RxMeta::ethernet(0), &mut trace);
        engine.push(data_frame(2, 0, true), &meta(None), &mut trace);
        engine.flush_idle(1, &mut trace);
        assert_eq!(engine.held_frames(), 0);
        assert_eq!(engine.rss_stats().unhashed, 1);
        assert_eq!((trace.out.len(), trace.other), (5, 1));
        assert_eq!(trace.segments, 3);
        let inner = engine.into_inner(&mut trace);
        assert!(inner.stats().is_conserved());
        assert_eq!(inner.stats().frames_in, 6);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// The in-place read gives every frame it reads the hash the parser's flow gives it:
        /// frames of the fast-path shapes (IPv4 and IPv6, untagged, 802.1Q and 802.1ad tagged,
        /// options or none) and near misses (any of the first 100 bytes changed, cut short or
        /// padded, another link, a stripped tag); the others it leaves to the parser. Unchanged
        /// frames must be read in place, so the property cannot hold by never reading.
        #[test]
        fn in_place_hash_is_the_parsed_flows_hash(
            v6 in any::<bool>(),
            tag in 0u8..3,
            options in 0u8..4,
            ports in any::<(u16, u16)>(),
            payload_len in 0usize..48,
            edits in proptest::collection::vec((0usize..100, any::<u8>()), 0..4),
            cut in proptest::option::of(0usize..160),
            pad in 0usize..8,
            link in 0u8..3,
        ) {
            let payload = [0x5au8; 48];
            let mut spec = if v6 {
                FrameSpec::ipv6_tcp(ports.0, ports.1)
            } else {
                FrameSpec::ipv4_tcp(ports.0, ports.1)
            }
            .payload(&payload[..payload_len]);
            spec = match options {
                0 => spec,
                1 => spec.timestamps(3, 4),
                2 => spec.sack(&[(5, 6)]),
                _ => spec.timestamps(3, 4).sack(&[(7, 8)]),
            };
            spec = match tag {
                0 => spec,
                1 => spec.vlan(TPID_8021Q, 5),
                _ => spec.vlan(TPID_8021AD, 6),
            };
            let mut b = bytes_of(&spec);
            let t = Toeplitz::microsoft();
            let meta = match link {
                0 => RxMeta::ethernet(0),
                1 => RxMeta::ethernet(0).with_vlan_stripped(9),
                _ => RxMeta::raw_ip(0),
            };
            if link != 2 {
                let hash = in_place_hash(t, &b, &meta);
                prop_assert!(hash.is_some(), "a well-formed frame is read in place");
                prop_assert_eq!(hash, parsed_hash(t, &b, &meta));
            }
            b.extend(core::iter::repeat_n(0u8, pad));
            for (at, v) in edits {
                if let Some(x) = b.get_mut(at) {
                    *x = v;
                }
            }
            if let Some(cut) = cut {
                b.truncate(cut);
            }
            if let Some(hash) = in_place_hash(t, &b, &meta) {
                prop_assert_eq!(Some(hash), parsed_hash(t, &b, &meta), "{:02x?}", b);
            }
        }
    }

    /// A queued frame counts as held, and every way out (an idle flush, `into_inner`) feeds
    /// the queue to the inner engine, down to a single frame.
    #[test]
    fn a_single_queued_frame_is_held_until_fed() {
        let inner: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
        let mut engine: RssSorted<_, Vec<u8>, 8> = RssSorted::new(inner);
        let mut trace = Trace::default();
        engine.push(data_frame(1, 0, false), &meta(None), &mut trace);
        assert_eq!((engine.queued(), engine.held_frames()), (1, 1));
        engine.flush_idle(1, &mut trace);
        assert_eq!((engine.queued(), engine.held_frames()), (0, 0));
        assert_eq!(trace.out, [(1, 0)]);
        engine.push(data_frame(1, 1, false), &meta(None), &mut trace);
        assert_eq!(engine.held_frames(), 1);
        let inner = engine.into_inner(&mut trace);
        assert_eq!(trace.out, [(1, 0), (1, 1)]);
        assert_eq!((inner.stats().frames_in, inner.held_frames()), (2, 0));
    }

    #[test]
    fn debug_shows_the_queue_and_the_inner_engine() {
        let inner: Engine<Vec<u8>, Sizes<4, 8>> = Engine::new(Config::lro());
        let mut engine: RssSorted<_, Vec<u8>, 8> = RssSorted::new(inner);
        engine.push(data_frame(1, 0, false), &meta(None), &mut Trace::default());
        let text = std::format!("{engine:?}");
        for part in ["RssSorted", "inner: Engine", "queued: 1", "capacity: 8"] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }

    /// A fragment's ports are unknown: its software hash is over the addresses alone, as a
    /// NIC hashes it (`NDIS_HASH_IPV4`).
    #[test]
    fn a_fragment_is_hashed_on_its_addresses_alone() {
        let payload = [0x5au8; PAY];
        let mut spec = FrameSpec::ipv4_tcp(10001, 5201)
            .flags(TCP_ACK)
            .payload(&payload);
        let IpSpec::V4(v4) = &mut spec.ip else {
            unreachable!("an IPv4 spec")
        };
        v4.mf = true;
        let (src, dst) = (v4.src, v4.dst);
        let frame = bytes_of(&spec);
        let inner = SeenHashes {
            seen: Vec::new(),
            stats: Stats::new(),
        };
        let mut s: RssSorted<SeenHashes, Vec<u8>, 8> = RssSorted::new(inner);
        let mut trace = Trace::default();
        s.push(frame, &meta(None), &mut trace);
        s.flush_all(&mut trace);
        let want = RssHash {
            value: Toeplitz::microsoft().ipv4(src, dst),
            kind: RssType::Ipv4,
        };
        assert_eq!(s.inner().seen, [Some(want)]);
        assert_eq!(s.rss_stats().software_hashes, 1);
    }
}
