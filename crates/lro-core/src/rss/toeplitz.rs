//! The Toeplitz hash of Microsoft's RSS specification.

use core::fmt;

use crate::flow::FlowKey;
use crate::meta::{RssHash, RssType};
use crate::parse::FlowBytes;

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

    /// The share in [`Toeplitz::hash`] of `bytes` at input offset `at` (the hash is the XOR of
    /// every byte's share, which depends only on the byte and its offset): a loop of a constant
    /// length, unrolled.
    #[inline(always)]
    pub(crate) fn share<const N: usize>(&self, at: usize, bytes: &[u8; N]) -> u32 {
        let rows = self.table.get(at..).unwrap_or(&[]);
        rows.iter()
            .zip(bytes)
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

    /// The RSS hash of a TCP frame over its addresses and ports read in place
    /// ([`crate::parse::fast_flow_bytes`]): [`Toeplitz::flow`] of its flow, with ports, without
    /// copying them into one input.
    #[inline(always)]
    pub(crate) fn tcp_in_place(&self, f: FlowBytes<'_>) -> RssHash {
        match f {
            FlowBytes::V4(addresses, ports) => RssHash {
                value: self.share(0, addresses) ^ self.share(addresses.len(), ports),
                kind: RssType::TcpIpv4,
            },
            FlowBytes::V6(addresses, ports) => RssHash {
                value: self.share(0, addresses) ^ self.share(addresses.len(), ports),
                kind: RssType::TcpIpv6,
            },
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use core::net::{Ipv4Addr, Ipv6Addr};
    use proptest::prelude::*;

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
    fn debug_shows_the_keys_first_word() {
        // The hash of a first byte 0x80 is the key's first 32 bits.
        let text = std::format!("{:?}", Toeplitz::microsoft());
        let want = std::format!(
            "first_word: {}",
            u32::from_be_bytes([0x6d, 0x5a, 0x56, 0xda])
        );
        assert!(
            text.starts_with("Toeplitz") && text.contains(&want),
            "{text}"
        );
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
}
