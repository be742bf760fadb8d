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
//! - [`sort_keys`]: sorts such keys in place without allocating ([`radix_sort_msb`] is
//!   FreeBSD's `tcp_lro_sort`; [`radix_sort_lsd`] is a byte-wise LSD radix sort with scratch).
//! - [`RssSorted`]: a [`Coalesce`] wrapper doing the whole FreeBSD scheme around any engine.

use core::fmt;

use crate::meta::{RssHash, RssType};
use crate::wire::FlowKey;

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
        let v4 = |a: &[u8; 16]| [a[0], a[1], a[2], a[3]];
        let (value, kind) = match (key.version == 6, with_ports) {
            (false, false) => (self.ipv4(v4(&key.src), v4(&key.dst)), RssType::Ipv4),
            (false, true) => (
                self.tcp_ipv4(v4(&key.src), v4(&key.dst), key.src_port, key.dst_port),
                RssType::TcpIpv4,
            ),
            (true, false) => (self.ipv6(key.src, key.dst), RssType::Ipv6),
            (true, true) => (
                self.tcp_ipv6(key.src, key.dst, key.src_port, key.dst_port),
                RssType::TcpIpv6,
            ),
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

/// Sorts keys in place with a least-significant-digit radix sort on bytes, using `scratch`
/// (at least as long as `keys`; if it is shorter, falls back to [`radix_sort_msb`]).
///
/// One counting pass finds which bytes vary and builds their histograms; constant bytes cost
/// nothing. When the low 24 bits (the [`sort_key`] arrival index) already increase through the
/// array, as they do for a batch queued in arrival order, their three passes are skipped too:
/// LSD radix sort is stable, so sorting on the upper 40 bits alone keeps them in order. A
/// batch of FreeBSD keys thus costs one counting pass plus one pass per varying hash byte.
/// 12 keys or fewer use insertion sort.
///
/// ```
/// let mut v = [5u64 << 40, 1, 4 << 40, 1, 3];
/// let mut scratch = [0u64; 5];
/// lro_core::rss::radix_sort_lsd(&mut v, &mut scratch);
/// assert_eq!(v, [1, 1, 3, 4 << 40, 5 << 40]);
/// ```
pub fn radix_sort_lsd(keys: &mut [u64], scratch: &mut [u64]) {
    let n = keys.len();
    if n <= INSERTION_MAX {
        insertion_sort(keys);
        return;
    }
    let Some(scratch) = scratch.get_mut(..n) else {
        radix_sort_msb(keys);
        return;
    };
    let (mut ones, mut zeros) = (0u64, 0u64);
    let (mut sorted, mut low_sorted) = (true, true);
    let mut prev = 0;
    for &k in keys.iter() {
        ones |= k;
        zeros |= !k;
        sorted &= prev <= k;
        low_sorted &= prev & ARRIVAL_MASK <= k & ARRIVAL_MASK;
        prev = k;
    }
    if sorted {
        return;
    }
    let mut varying = ones & zeros;
    if low_sorted {
        varying &= !ARRIVAL_MASK;
    }
    // Digits (bytes) to sort on, least significant first.
    let mut digits = [0u32; 8];
    let mut nd = 0;
    for d in 0..8u32 {
        if (varying >> (8 * d)) & 0xff != 0 {
            digits[nd] = d;
            nd += 1;
        }
    }
    let digits = &digits[..nd];
    let mut counts = [[0u32; 256]; 8];
    for &k in keys.iter() {
        for (c, &d) in counts.iter_mut().zip(digits) {
            c[((k >> (8 * d)) & 0xff) as usize] += 1;
        }
    }
    let mut in_scratch = false;
    for (c, &d) in counts.iter_mut().zip(digits) {
        // Exclusive prefix sums: the first output slot of each byte value.
        let mut sum = 0;
        for slot in c.iter_mut() {
            let here = *slot;
            *slot = sum;
            sum += here;
        }
        let (src, dst): (&[u64], &mut [u64]) = if in_scratch {
            (&*scratch, &mut *keys)
        } else {
            (&*keys, &mut *scratch)
        };
        for &k in src {
            let slot = &mut c[((k >> (8 * d)) & 0xff) as usize];
            dst[*slot as usize] = k;
            *slot += 1;
        }
        in_scratch = !in_scratch;
    }
    if in_scratch {
        keys.copy_from_slice(scratch);
    }
}

/// Sorts a batch of [`sort_key`]s in place, the way [`RssSorted`] does: [`radix_sort_lsd`]
/// (see the crate's `rss_sort` benchmark for why). `scratch` must be at least as long as `keys`
/// for the fast path; a shorter one falls back to [`radix_sort_msb`], still without allocating.
///
/// ```
/// use lro_core::rss::{sort_key, sort_keys, ARRIVAL_MASK};
/// use lro_core::RssType;
///
/// let hashes = [9u32, 3, 9, 3, 7];
/// let mut keys: Vec<u64> = hashes
///     .iter()
///     .enumerate()
///     .map(|(i, &h)| sort_key(h, RssType::TcpIpv4, i as u32))
///     .collect();
/// let mut scratch = vec![0; keys.len()];
/// sort_keys(&mut keys, &mut scratch);
/// let order: Vec<u64> = keys.iter().map(|k| k & ARRIVAL_MASK).collect();
/// assert_eq!(order, [1, 3, 4, 0, 2]); // by hash, then by arrival
/// ```
#[inline]
pub fn sort_keys(keys: &mut [u64], scratch: &mut [u64]) {
    radix_sort_lsd(keys, scratch);
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
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
        s.parse::<core::net::Ipv6Addr>().unwrap().octets()
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
        let (src, sp, dst, dp, ip, tcp) = V4[1];
        let mut key = FlowKey {
            version: 4,
            src_port: sp,
            dst_port: dp,
            ..FlowKey::default()
        };
        key.src[..4].copy_from_slice(&src);
        key.dst[..4].copy_from_slice(&dst);
        assert_eq!(
            t.flow(&key, true),
            RssHash {
                value: tcp,
                kind: RssType::TcpIpv4
            }
        );
        assert_eq!(
            t.flow(&key, false),
            RssHash {
                value: ip,
                kind: RssType::Ipv4
            }
        );
        let (src, sp, dst, dp, ip, tcp) = V6[2];
        let key = FlowKey {
            version: 6,
            src: v6(src),
            dst: v6(dst),
            src_port: sp,
            dst_port: dp,
            ..FlowKey::default()
        };
        assert_eq!(
            t.flow(&key, true),
            RssHash {
                value: tcp,
                kind: RssType::TcpIpv6
            }
        );
        assert_eq!(
            t.flow(&key, false),
            RssHash {
                value: ip,
                kind: RssType::Ipv6
            }
        );
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

        #[test]
        fn lsd_equals_sort_unstable(input in sort_inputs(), short_scratch in any::<bool>()) {
            let mut expected = input.clone();
            expected.sort_unstable();
            let mut got = input;
            let mut scratch = vec![0; if short_scratch { got.len() / 2 } else { got.len() + 3 }];
            radix_sort_lsd(&mut got, &mut scratch);
            prop_assert_eq!(&got, &expected);
            let mut again = got.clone();
            sort_keys(&mut again, &mut scratch);
            prop_assert_eq!(again, expected);
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
}
