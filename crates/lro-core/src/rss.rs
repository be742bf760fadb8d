//! RSS: a software Toeplitz hash, allocation-free batch sorting, and the FreeBSD-style
//! RSS-sorting batch wrapper [`RssSorted`].
//!
//! FreeBSD's "Optimise LRO for RSS" (D4914, `tcp_lro_queue_mbuf` / `tcp_lro_flush_all` in
//! `sys/netinet/tcp_lro.c`) queues a whole receive burst, sorts it by RSS hash type and flow id
//! (stable on arrival), and feeds the coalescer one stream at a time, flushing between streams
//! (`tcp_lro_rx_done`). A table of 8 entries then serves any number of interleaved flows.
//!
//! - [`Toeplitz`]: the Microsoft RSS hash ("RSS hashing functions" and "Verifying the RSS hash
//!   calculation" in the Windows driver documentation), table-driven, usable in `const`.
//! - [`sort_key`]: the 64-bit key of `tcp_lro_queue_mbuf`.
//! - [`group_keys`]: groups a batch of such keys by (type, hash), stable on arrival, without
//!   allocating, in one counting pass and one scatter pass: what [`RssSorted`] uses.
//!   [`radix_sort_msb`] is FreeBSD's `tcp_lro_sort`, kept as the reference and benchmark
//!   baseline. Medians from `cargo bench --bench rss_sort` (per frame, noisy shared machine):
//!   for 64..1024 frames `group_keys` costs about 3 ns, `sort_unstable` 3-5 ns,
//!   `tcp_lro_sort` 4-7.5 ns; at 32 frames or fewer `group_keys` calls `sort_unstable`.
//! - [`RssSorted`]: a [`Coalesce`] wrapper doing the whole FreeBSD scheme around any engine.

use core::fmt;

use crate::coalesce::{Coalesce, Sink};
use crate::meta::{RssHash, RssType, RxMeta};
use crate::stats::{Stats, Verdict};
use crate::wire::{self, FlowHint, FlowKey, Unparsed};

/// The 40-byte secret key of the Microsoft RSS verification suite, the default key of most NIC
/// drivers (Intel 82599 datasheet 7.1.2.8.3, Windows "Verifying the RSS hash calculation").
pub const MICROSOFT_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// Most input bytes a 40-byte key can hash: the key must be 4 bytes longer than the input (the
/// 32-bit window for the input's last bit ends at the key's last bit). Exactly the IPv6
/// addresses-and-ports tuple.
pub const MAX_INPUT: usize = 36;

/// The Toeplitz hash of Microsoft's RSS specification, with a precomputed table.
///
/// For every input bit set, the hash is XORed with the 32 key bits starting at that bit's
/// position (Windows driver docs, "RSS hashing functions"). The table holds, for each of the 36
/// input byte positions and each of the 256 byte values, the XOR of the windows of that byte's
/// set bits, so hashing `n` bytes costs `n` table loads. The table is 36 KiB; build it once:
/// [`Toeplitz::new`] is a `const fn`, so a custom key fits in a `static`, and
/// [`Toeplitz::microsoft`] returns a shared `'static` one for the standard key.
///
/// Input is in network byte order: source address, destination address, source port,
/// destination port, as the NIC sees a received packet.
///
/// ```
/// use lro_core::rss::Toeplitz;
///
/// let t = Toeplitz::microsoft();
/// // First line of the Microsoft verification suite.
/// let (src, dst) = ([66, 9, 149, 187], [161, 142, 100, 80]);
/// assert_eq!(t.ipv4(src, dst), 0x323e_8fc2);
/// assert_eq!(t.tcp_ipv4(src, dst, 2794, 1766), 0x51cc_c178);
///
/// // Any 40-byte key, built at compile time.
/// static MINE: Toeplitz = Toeplitz::new(&[0x5a; 40]);
/// assert_ne!(MINE.ipv4(src, dst), t.ipv4(src, dst));
/// ```
#[derive(Clone)]
pub struct Toeplitz {
    table: [[u32; 256]; MAX_INPUT],
}

/// The shared table for [`MICROSOFT_KEY`], built at compile time.
static MICROSOFT: Toeplitz = Toeplitz::new(&MICROSOFT_KEY);

impl Toeplitz {
    /// The hasher for [`MICROSOFT_KEY`] (a 36 KiB value: prefer [`Toeplitz::microsoft`], which
    /// borrows one shared copy).
    pub const MICROSOFT: Toeplitz = Toeplitz::new(&MICROSOFT_KEY);

    /// Builds the table for `key` (9216 entries, each from the one before it with one XOR).
    pub const fn new(key: &[u8; 40]) -> Self {
        let mut table = [[0u32; 256]; MAX_INPUT];
        let mut i = 0;
        while i < MAX_INPUT {
            // Key bits 8i .. 8i+39: every 32-bit window a bit of input byte i can select.
            let window = (key[i] as u64) << 32
                | (key[i + 1] as u64) << 24
                | (key[i + 2] as u64) << 16
                | (key[i + 3] as u64) << 8
                | key[i + 4] as u64;
            let mut b = 1;
            while b < 256 {
                // Bit k of the byte (k = 0: least significant) is input bit 8i + 7 - k; its
                // window is key bits 8i + 7 - k .. +31, i.e. `window >> (k + 1)`.
                let k = (b as u32).trailing_zeros();
                table[i][b] = table[i][b & (b - 1)] ^ (window >> (k + 1)) as u32;
                b += 1;
            }
            i += 1;
        }
        Self { table }
    }

    /// A shared hasher for [`MICROSOFT_KEY`].
    pub fn microsoft() -> &'static Toeplitz {
        &MICROSOFT
    }

    /// The hash of `input`. Only the first [`MAX_INPUT`] (36) bytes are used: a 40-byte key
    /// cannot hash more.
    #[inline]
    pub fn hash(&self, input: &[u8]) -> u32 {
        self.table
            .iter()
            .zip(input)
            .fold(0, |h, (row, &b)| h ^ row[usize::from(b)])
    }

    /// Hash of an IPv4 address pair (Microsoft `NDIS_HASH_IPV4`, FreeBSD `M_HASHTYPE_RSS_IPV4`).
    #[inline]
    pub fn ipv4(&self, src: [u8; 4], dst: [u8; 4]) -> u32 {
        let mut input = [0u8; 8];
        input[..4].copy_from_slice(&src);
        input[4..].copy_from_slice(&dst);
        self.hash(&input)
    }

    /// Hash of an IPv4 address pair and TCP ports (`NDIS_HASH_TCP_IPV4`,
    /// `M_HASHTYPE_RSS_TCP_IPV4`).
    #[inline]
    pub fn tcp_ipv4(&self, src: [u8; 4], dst: [u8; 4], src_port: u16, dst_port: u16) -> u32 {
        let mut input = [0u8; 12];
        input[..4].copy_from_slice(&src);
        input[4..8].copy_from_slice(&dst);
        input[8..10].copy_from_slice(&src_port.to_be_bytes());
        input[10..].copy_from_slice(&dst_port.to_be_bytes());
        self.hash(&input)
    }

    /// Hash of an IPv6 address pair (`NDIS_HASH_IPV6`, `M_HASHTYPE_RSS_IPV6`).
    #[inline]
    pub fn ipv6(&self, src: [u8; 16], dst: [u8; 16]) -> u32 {
        let mut input = [0u8; 32];
        input[..16].copy_from_slice(&src);
        input[16..].copy_from_slice(&dst);
        self.hash(&input)
    }

    /// Hash of an IPv6 address pair and TCP ports (`NDIS_HASH_TCP_IPV6`,
    /// `M_HASHTYPE_RSS_TCP_IPV6`).
    #[inline]
    pub fn tcp_ipv6(&self, src: [u8; 16], dst: [u8; 16], src_port: u16, dst_port: u16) -> u32 {
        let mut input = [0u8; 36];
        input[..16].copy_from_slice(&src);
        input[16..32].copy_from_slice(&dst);
        input[32..34].copy_from_slice(&src_port.to_be_bytes());
        input[34..].copy_from_slice(&dst_port.to_be_bytes());
        self.hash(&input)
    }

    /// The RSS hash of a parsed flow, as a NIC would compute it: over addresses and ports when
    /// `with_ports`, over the addresses only otherwise (an IP fragment, whose ports are unknown).
    #[inline]
    pub fn flow(&self, key: &FlowKey, with_ports: bool) -> RssHash {
        let (src, dst) = (key.src_bytes(), key.dst_bytes());
        let v4 = |a: [u8; 16]| [a[0], a[1], a[2], a[3]];
        let (sp, dp) = (key.src_port(), key.dst_port());
        let (value, kind) = match (key.version() == 6, with_ports) {
            (false, false) => (self.ipv4(v4(src), v4(dst)), RssType::Ipv4),
            (false, true) => (self.tcp_ipv4(v4(src), v4(dst), sp, dp), RssType::TcpIpv4),
            (true, false) => (self.ipv6(src, dst), RssType::Ipv6),
            (true, true) => (self.tcp_ipv6(src, dst, sp, dp), RssType::TcpIpv6),
        };
        RssHash { value, kind }
    }
}

impl Default for Toeplitz {
    fn default() -> Self {
        Self::MICROSOFT
    }
}

impl fmt::Debug for Toeplitz {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The table is 9216 words: show only what identifies the key.
        f.debug_struct("Toeplitz")
            .field("first_word", &self.table[0][0x80])
            .finish_non_exhaustive()
    }
}

/// Bits of a [`sort_key`] holding the arrival index.
pub const ARRIVAL_BITS: u32 = 24;

/// Mask of the arrival index in a [`sort_key`].
pub const ARRIVAL_MASK: u64 = (1 << ARRIVAL_BITS) - 1;

/// The sort key of `tcp_lro_queue_mbuf`: `hash type << 56 | hash << 24 | arrival`.
///
/// The full 32-bit hash sits in bits 24..56 (FreeBSD shifts the 32-bit `m_pkthdr.flowid` by 24),
/// the hash type's number in bits 56..64, and the arrival index (taken modulo 2^24) in the low
/// 24 bits, so sorting the keys groups frames by (type, hash) and keeps arrival order inside
/// each group: a stable sort out of an unstable one.
///
/// ```
/// use lro_core::rss::{sort_key, ARRIVAL_BITS};
/// use lro_core::RssType;
///
/// let k = sort_key(0xdead_beef, RssType::TcpIpv4, 7);
/// assert_eq!(k & 0xff_ffff, 7);
/// assert_eq!((k >> ARRIVAL_BITS) as u32, 0xdead_beef);
/// assert!(sort_key(1, RssType::TcpIpv6, 0) > sort_key(u32::MAX, RssType::TcpIpv4, 5));
/// ```
#[inline]
pub const fn sort_key(hash: u32, kind: RssType, arrival: u32) -> u64 {
    (type_code(kind) << 56) | ((hash as u64) << ARRIVAL_BITS) | (arrival as u64 & ARRIVAL_MASK)
}

/// The number of a hash type in a [`sort_key`] (the order of [`RssType`]).
#[inline]
const fn type_code(kind: RssType) -> u64 {
    match kind {
        RssType::Opaque => 0,
        RssType::Ipv4 => 1,
        RssType::TcpIpv4 => 2,
        RssType::Ipv6 => 3,
        RssType::TcpIpv6 => 4,
    }
}

/// At or below this many keys the sorts use insertion sort (FreeBSD `tcp_lro_sort`: 12).
const INSERTION_MAX: usize = 12;

/// At or below this many keys [`group_keys`] sorts fully instead (measured: `rss_sort`).
const GROUP_SORT_MAX: usize = 32;

#[inline]
fn insertion_sort(v: &mut [u64]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

/// Sorts keys in place: FreeBSD's `tcp_lro_sort`, a most-significant-bit-first binary radix
/// sort that skips the bits constant over the (sub)array, with insertion sort for 12 keys or
/// fewer. No scratch memory; at most `min(n, 64) * n` steps; recursion depth at most 64 (it
/// recurses into the smaller half and loops on the larger). One addition: an already sorted
/// (sub)array is detected by the pass that finds the constant bits, and left alone.
///
/// Kept as the reference algorithm and benchmark baseline: on this machine `sort_unstable`
/// (allocation-free too, in `core`) is faster from 32 keys up, and [`group_keys`] faster still.
///
/// ```
/// let mut v = [5u64, 1, 4, 1, 3];
/// lro_core::rss::radix_sort_msb(&mut v);
/// assert_eq!(v, [1, 1, 3, 4, 5]);
/// ```
pub fn radix_sort_msb(keys: &mut [u64]) {
    let mut keys = keys;
    loop {
        if keys.len() <= INSERTION_MAX {
            insertion_sort(keys);
            return;
        }
        let (mut ones, mut zeros, mut sorted) = (0u64, 0u64, true);
        let mut prev = 0;
        for &k in keys.iter() {
            ones |= k;
            zeros |= !k;
            sorted &= prev <= k;
            prev = k;
        }
        let varying = ones & zeros;
        if varying == 0 || sorted {
            return;
        }
        let bit = 1u64 << (63 - varying.leading_zeros());
        // Partition: keys with the bit clear first. Keys are plain integers, so the swaps'
        // instability is invisible.
        let mut split = 0;
        for y in 0..keys.len() {
            if keys[y] & bit == 0 {
                keys.swap(split, y);
                split += 1;
            }
        }
        let (lo, hi) = core::mem::take(&mut keys).split_at_mut(split);
        if lo.len() < hi.len() {
            radix_sort_msb(lo);
            keys = hi;
        } else {
            radix_sort_msb(hi);
            keys = lo;
        }
    }
}

/// The bucket of a [`sort_key`] among `buckets` (nonzero): a multiplicative hash of the type and
/// hash bits (never the arrival index), reduced by multiply-shift so any bucket count works and
/// every hash bit matters (an RX queue's frames share the low hash bits the NIC's indirection
/// table used to pick the queue).
#[inline]
fn bucket_of(key: u64, buckets: usize) -> usize {
    let mixed = (key >> ARRIVAL_BITS).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((mixed * buckets as u64) >> 32) as usize
}

/// Groups a batch of [`sort_key`]s by (hash type, hash), keeping arrival order inside each
/// group: what [`RssSorted`] needs, for less than a full sort.
///
/// A stable counting sort into `counts.len()` buckets by a hash of the (type, hash) bits, then
/// a full sort of only those buckets that hold more than one (type, hash). Afterwards every
/// (type, hash) group is contiguous and, if `keys` were in arrival order on entry (as a queued
/// batch is), in arrival order; the order *between* groups is unspecified (bucket order, not
/// hash order). `scratch` must be at least as long as `keys` and `counts` nonempty (a bucket per
/// key is plenty); otherwise the keys are fully sorted with `sort_unstable`, which is also a
/// valid grouping. 32 keys or fewer are fully sorted with `sort_unstable` (faster there: the
/// `rss_sort` benchmark).
///
/// ```
/// use lro_core::rss::{group_keys, sort_key, ARRIVAL_MASK};
/// use lro_core::RssType;
///
/// let hashes = [9u32, 3, 9, 3, 7, 9, 3, 7, 7, 3, 9, 3, 9];
/// let mut keys: Vec<u64> = hashes
///     .iter()
///     .enumerate()
///     .map(|(i, &h)| sort_key(h, RssType::TcpIpv4, i as u32))
///     .collect();
/// let (mut scratch, mut counts) = (vec![0; keys.len()], vec![0; keys.len()]);
/// group_keys(&mut keys, &mut scratch, &mut counts);
/// let hash_runs: Vec<u32> = keys.iter().map(|k| (k >> 24) as u32).collect();
/// let mut runs = hash_runs.clone();
/// runs.dedup();
/// assert_eq!(runs.len(), 3); // one run per hash
/// let nines: Vec<u64> = keys.iter().filter(|k| (*k >> 24) as u32 == 9).map(|k| k & ARRIVAL_MASK).collect();
/// assert_eq!(nines, [0, 2, 5, 10, 12]); // arrival order kept
/// ```
pub fn group_keys(keys: &mut [u64], scratch: &mut [u64], counts: &mut [u32]) {
    let n = keys.len();
    if n <= GROUP_SORT_MAX {
        keys.sort_unstable();
        return;
    }
    let buckets = counts.len();
    let Some(scratch) = scratch.get_mut(..n) else {
        keys.sort_unstable();
        return;
    };
    if buckets == 0 || u32::try_from(n).is_err() {
        keys.sort_unstable();
        return;
    }
    counts.fill(0);
    for &k in keys.iter() {
        counts[bucket_of(k, buckets)] += 1;
    }
    let mut sum = 0;
    for c in counts.iter_mut() {
        let here = *c;
        *c = sum;
        sum += here;
    }
    for &k in keys.iter() {
        let slot = &mut counts[bucket_of(k, buckets)];
        scratch[*slot as usize] = k;
        *slot += 1;
    }
    // counts[b] is now the end of bucket b. A bucket with two (type, hash) values (two flows
    // whose hashes collide in the bucket hash) is sorted whole: arrival is in the key.
    let mut start = 0;
    for &end in counts.iter() {
        let end = end as usize;
        if let Some(run) = scratch.get_mut(start..end) {
            if let Some(&first) = run.first() {
                if run.iter().any(|&k| (k ^ first) >> ARRIVAL_BITS != 0) {
                    run.sort_unstable();
                }
            }
        }
        start = end;
    }
    keys.copy_from_slice(scratch);
}

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
/// wrapper that is itself a [`Coalesce`] engine.
///
/// [`push`](Coalesce::push) only queues the frame and its [`RxMeta`] (up to `B` frames, in
/// fixed arrays). [`flush_all`](Coalesce::flush_all) (the end of a poll) groups the queue by
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
/// use lro_core::{Coalesce, Coalescer, Config, RxMeta, Segment, Sink};
///
/// struct Count(usize);
/// impl<F: AsRef<[u8]>> Sink<F> for Count {
///     fn segment(&mut self, _segment: Segment<'_, F>) {
///         self.0 += 1;
///     }
/// }
///
/// // 8 flow entries behind a queue of 256 frames.
/// let inner: Coalescer<Vec<u8>, 8, 16> = Coalescer::new(Config::lro());
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
        C: Coalesce<F>,
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
        let (key, with_ports) = match wire::parse(frame, meta) {
            Ok(p) => (p.key, true),
            Err(Unparsed {
                hint: FlowHint::Flow(k),
                ..
            }) => (k, true),
            Err(Unparsed {
                hint: FlowHint::Addresses(k),
                ..
            }) => (k, false),
            Err(_) => {
                self.rss_stats.unhashed += 1;
                return None;
            }
        };
        self.rss_stats.software_hashes += 1;
        Some(self.toeplitz.flow(&key, with_ports))
    }

    /// Groups the queue and feeds it to the inner engine run by run (`tcp_lro_flush_all`).
    fn drain<K: Sink<F> + ?Sized>(&mut self, sink: &mut K)
    where
        C: Coalesce<F>,
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

impl<C: Coalesce<F>, F: AsRef<[u8]>, const B: usize> Coalesce<F> for RssSorted<C, F, B> {
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
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;
    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    /// Bit-by-bit Toeplitz, straight from the Microsoft pseudo-code: for each input bit set,
    /// XOR in the 32 key bits starting at that bit.
    fn reference(key: &[u8; 40], input: &[u8]) -> u32 {
        let key_bit = |q: usize| u32::from((key[q / 8] >> (7 - q % 8)) & 1);
        let mut result = 0u32;
        for p in 0..input.len().min(MAX_INPUT) * 8 {
            if input[p / 8] & (0x80 >> (p % 8)) != 0 {
                let window = (0..32).fold(0u32, |w, t| w << 1 | key_bit(p + t));
                result ^= window;
            }
        }
        result
    }

    // Microsoft "Verifying the RSS hash calculation" (also the Intel 82599 datasheet 7.1.2.8.3
    // suite): (source, source port, destination, destination port, IP-only, with-TCP).
    type V4Case = ([u8; 4], u16, [u8; 4], u16, u32, u32);
    const V4: [V4Case; 5] = [
        (
            [66, 9, 149, 187],
            2794,
            [161, 142, 100, 80],
            1766,
            0x323e8fc2,
            0x51ccc178,
        ),
        (
            [199, 92, 111, 2],
            14230,
            [65, 69, 140, 83],
            4739,
            0xd718262a,
            0xc626b0ea,
        ),
        (
            [24, 19, 198, 95],
            12898,
            [12, 22, 207, 184],
            38024,
            0xd2d0a5de,
            0x5c2b394a,
        ),
        (
            [38, 27, 205, 30],
            48228,
            [209, 142, 163, 6],
            2217,
            0x82989176,
            0xafc7327f,
        ),
        (
            [153, 39, 163, 191],
            44251,
            [202, 188, 127, 2],
            1303,
            0x5d1809c5,
            0x10e828a2,
        ),
    ];

    fn v6(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    const V6: [(&str, u16, &str, u16, u32, u32); 3] = [
        (
            "3ffe:2501:200:1fff::7",
            2794,
            "3ffe:2501:200:3::1",
            1766,
            0x2cc18cd5,
            0x40207d3d,
        ),
        (
            "3ffe:501:8::260:97ff:fe40:efab",
            14230,
            "ff02::1",
            4739,
            0x0f0c461c,
            0xdde51bbf,
        ),
        (
            "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
            44251,
            "fe80::200:f8ff:fe21:67cf",
            38024,
            0x4b61e985,
            0x02d1feef,
        ),
    ];

    #[test]
    fn microsoft_vectors_ipv4() {
        let t = Toeplitz::microsoft();
        for (src, sp, dst, dp, ip, tcp) in V4 {
            assert_eq!(t.ipv4(src, dst), ip, "{src:?} -> {dst:?}");
            assert_eq!(
                t.tcp_ipv4(src, dst, sp, dp),
                tcp,
                "{src:?}:{sp} -> {dst:?}:{dp}"
            );
        }
    }

    #[test]
    fn microsoft_vectors_ipv6() {
        let t = Toeplitz::microsoft();
        for (src, sp, dst, dp, ip, tcp) in V6 {
            let (s, d) = (v6(src), v6(dst));
            assert_eq!(t.ipv6(s, d), ip, "{src} -> {dst}");
            assert_eq!(t.tcp_ipv6(s, d, sp, dp), tcp, "{src}:{sp} -> {dst}:{dp}");
        }
    }

    #[test]
    fn reference_matches_vectors() {
        // The reference itself is checked, so the property below compares against truth.
        let (src, sp, dst, dp, ip, tcp) = V4[0];
        let mut input = Vec::new();
        input.extend_from_slice(&src);
        input.extend_from_slice(&dst);
        assert_eq!(reference(&MICROSOFT_KEY, &input), ip);
        input.extend_from_slice(&sp.to_be_bytes());
        input.extend_from_slice(&dp.to_be_bytes());
        assert_eq!(reference(&MICROSOFT_KEY, &input), tcp);
    }

    #[test]
    fn const_default_and_static_agree() {
        let owned = Toeplitz::default();
        let input = [0xa5u8; MAX_INPUT];
        assert_eq!(owned.hash(&input), Toeplitz::microsoft().hash(&input));
        assert_eq!(
            Toeplitz::MICROSOFT.hash(&input),
            reference(&MICROSOFT_KEY, &input)
        );
        // Bytes beyond 36 are ignored, never read out of bounds.
        assert_eq!(owned.hash(&[0xa5u8; 50]), owned.hash(&input));
        assert_eq!(owned.hash(&[]), 0);
    }

    #[test]
    fn flow_hash_uses_addresses_and_ports() {
        let t = Toeplitz::microsoft();
        let hash = |value, kind| RssHash { value, kind };
        let (src, sp, dst, dp, ip, tcp) = V4[1];
        let key = FlowKey::tcp(
            Ipv4Addr::from(src).into(),
            Ipv4Addr::from(dst).into(),
            sp,
            dp,
        );
        assert_eq!(t.flow(&key, true), hash(tcp, RssType::TcpIpv4));
        assert_eq!(t.flow(&key, false), hash(ip, RssType::Ipv4));
        let (src, sp, dst, dp, ip, tcp) = V6[2];
        let (src, dst) = (Ipv6Addr::from(v6(src)), Ipv6Addr::from(v6(dst)));
        let key = FlowKey::tcp(src.into(), dst.into(), sp, dp);
        assert_eq!(t.flow(&key, true), hash(tcp, RssType::TcpIpv6));
        assert_eq!(t.flow(&key, false), hash(ip, RssType::Ipv6));
    }

    proptest! {
        #[test]
        fn table_equals_bitwise_reference(
            key in proptest::array::uniform32(any::<u8>()),
            tail in proptest::array::uniform8(any::<u8>()),
            input in proptest::collection::vec(any::<u8>(), 0..=MAX_INPUT),
        ) {
            let mut k = [0u8; 40];
            k[..32].copy_from_slice(&key);
            k[32..].copy_from_slice(&tail);
            let t = Toeplitz::new(&k);
            prop_assert_eq!(t.hash(&input), reference(&k, &input));
        }

        #[test]
        fn fixed_tuple_helpers_equal_reference(
            src in any::<[u8; 16]>(), dst in any::<[u8; 16]>(), sp in any::<u16>(), dp in any::<u16>(),
        ) {
            let t = Toeplitz::microsoft();
            let mut input = Vec::new();
            input.extend_from_slice(&src[..4]);
            input.extend_from_slice(&dst[..4]);
            let s4 = [src[0], src[1], src[2], src[3]];
            let d4 = [dst[0], dst[1], dst[2], dst[3]];
            prop_assert_eq!(t.ipv4(s4, d4), reference(&MICROSOFT_KEY, &input));
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            prop_assert_eq!(t.tcp_ipv4(s4, d4, sp, dp), reference(&MICROSOFT_KEY, &input));
            let mut input = Vec::new();
            input.extend_from_slice(&src);
            input.extend_from_slice(&dst);
            prop_assert_eq!(t.ipv6(src, dst), reference(&MICROSOFT_KEY, &input));
            input.extend_from_slice(&sp.to_be_bytes());
            input.extend_from_slice(&dp.to_be_bytes());
            prop_assert_eq!(t.tcp_ipv6(src, dst, sp, dp), reference(&MICROSOFT_KEY, &input));
        }
    }

    /// Inputs for the sort properties: random, few distinct values, all equal, sorted,
    /// reversed, FreeBSD-style keys in arrival order; sizes 0..2000.
    fn sort_inputs() -> impl Strategy<Value = Vec<u64>> {
        let n = 0usize..2000;
        prop_oneof![
            proptest::collection::vec(any::<u64>(), n.clone()),
            proptest::collection::vec(0u64..4, n.clone()),
            (any::<u64>(), n.clone()).prop_map(|(x, n)| vec![x; n]),
            proptest::collection::vec(any::<u64>(), n.clone()).prop_map(|mut v| {
                v.sort_unstable();
                v
            }),
            proptest::collection::vec(any::<u64>(), n.clone()).prop_map(|mut v| {
                v.sort_unstable_by(|a, b| b.cmp(a));
                v
            }),
            (
                proptest::collection::vec((0u32..5, 0u32..40), n),
                any::<u32>()
            )
                .prop_map(|(flows, salt)| {
                    flows
                        .iter()
                        .enumerate()
                        .map(|(i, &(t, f))| {
                            let kind = [
                                RssType::Opaque,
                                RssType::Ipv4,
                                RssType::TcpIpv4,
                                RssType::Ipv6,
                                RssType::TcpIpv6,
                            ][t as usize];
                            sort_key(f.wrapping_mul(0x9e37_79b9) ^ salt, kind, i as u32)
                        })
                        .collect()
                }),
        ]
    }

    proptest! {
        #[test]
        fn msb_equals_sort_unstable(input in sort_inputs()) {
            let mut expected = input.clone();
            expected.sort_unstable();
            let mut got = input;
            radix_sort_msb(&mut got);
            prop_assert_eq!(got, expected);
        }
    }

    proptest! {
        #[test]
        fn group_keys_groups_stably(
            picks in proptest::collection::vec((0u32..5, 0u32..60), 0..2000),
            salt in any::<u32>(),
            buckets in 1usize..3000,
        ) {
            let kinds = [RssType::Opaque, RssType::Ipv4, RssType::TcpIpv4, RssType::Ipv6, RssType::TcpIpv6];
            let input: Vec<u64> = picks
                .iter()
                .enumerate()
                .map(|(i, &(t, f))| sort_key(f.wrapping_mul(0x0101_0101) ^ salt, kinds[t as usize], i as u32))
                .collect();
            let mut got = input.clone();
            let mut scratch = vec![0; got.len()];
            let mut counts = vec![0; buckets];
            group_keys(&mut got, &mut scratch, &mut counts);
            // A permutation...
            let (mut a, mut b) = (got.clone(), input.clone());
            a.sort_unstable();
            b.sort_unstable();
            prop_assert_eq!(a, b);
            // ...where each (type, hash) is one contiguous run, in arrival order.
            let mut seen = std::collections::HashSet::new();
            for (i, &k) in got.iter().enumerate() {
                let group = k >> ARRIVAL_BITS;
                if i > 0 && got[i - 1] >> ARRIVAL_BITS == group {
                    prop_assert!(got[i - 1] & ARRIVAL_MASK < k & ARRIVAL_MASK);
                } else {
                    prop_assert!(seen.insert(group), "group {:x} split", group);
                }
            }
        }
    }

    #[test]
    fn sort_key_layout_orders_by_type_hash_arrival() {
        let a = sort_key(u32::MAX, RssType::Opaque, ARRIVAL_MASK as u32);
        let b = sort_key(0, RssType::Ipv4, 0);
        assert!(a < b);
        assert!(sort_key(5, RssType::TcpIpv4, 3) < sort_key(5, RssType::TcpIpv4, 4));
        assert!(sort_key(5, RssType::TcpIpv4, 9) < sort_key(6, RssType::TcpIpv4, 0));
        // Arrival wraps modulo 2^24 and never spills into the hash.
        assert_eq!(
            sort_key(1, RssType::Ipv6, 1 << 24) >> ARRIVAL_BITS,
            sort_key(1, RssType::Ipv6, 0) >> ARRIVAL_BITS
        );
    }

    // ---- RssSorted ----

    use crate::coalesce::{Coalescer, Config, Segment};
    use crate::meta::RxChecksum;
    use crate::testing::{FrameSpec, TCP_ACK};

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
        let mut buf = vec![0u8; spec.len()];
        let len = spec.write(&mut buf).unwrap();
        buf.truncate(len);
        buf
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
            let Ok(p) = wire::parse(&buf[..len], &RxMeta::ethernet(0)) else {
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
    fn run<E: Coalesce<Vec<u8>>>(
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
            let inner: Coalescer<Vec<u8>, 4, 8> = Coalescer::new(Config::lro());
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
        let mut small: Coalescer<Vec<u8>, 8, 16> = Coalescer::new(Config::lro());
        let (t_small, s_small) = run(&mut small, &arrivals, poll, v6, nic_hash);
        let mut big: Box<Coalescer<Vec<u8>, 1024, 16>> = Box::new(Coalescer::new(Config::lro()));
        let (t_big, s_big) = run(&mut *big, &arrivals, poll, v6, nic_hash);
        let inner: Coalescer<Vec<u8>, 8, 16> = Coalescer::new(Config::lro());
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
        let inner: Coalescer<Vec<u8>, 4, 8> = Coalescer::new(Config::lro());
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
}
