//! The flow key, and the seeded hash the flow table and the ACK memory index it with.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::csum::PseudoHeader;
use crate::meta::LinkKind;
use crate::wire::{ethertype, protocol};

/// Where an IPoIB key's link word holds the encapsulation header's reserved field.
const IPOIB_RESERVED_AT: u32 = 112;

/// The identity of a TCP flow as the engine compares it: every field that must be equal for two
/// frames to be merged, whatever their hashes (Linux `gro_list_prepare` + `inet_gro_receive` /
/// `ipv6_gro_receive` + `tcp_gro_lookup`): link kind, MAC addresses (an IPoIB header's
/// reserved field in their place), VLAN tags (stripped and in-line), IP version, addresses,
/// IPv6 flow label and TCP ports. A tunnelled frame's key has its outer link layer and its inner
/// IP and TCP identity; the outer IP and encapsulation identity is its
/// [`TunnelKey`](crate::encap::TunnelKey).
///
/// Stored as four 128-bit words so that building, hashing and comparing it stays in registers.
///
/// ```
/// use core::net::{IpAddr, Ipv4Addr};
/// use lro_core::FlowKey;
/// let k = FlowKey::tcp(Ipv4Addr::new(198, 18, 0, 1).into(), Ipv4Addr::new(198, 18, 0, 2).into(), 40000, 5201);
/// assert_eq!(k.src_addr(), IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)));
/// assert_eq!((k.src_port(), k.dst_port()), (40000, 5201));
/// assert_ne!(k, k.with_vlan(0, 7));
/// ```
#[derive(Debug, Clone, Copy, Eq, Default)]
pub struct FlowKey {
    /// Source address as a big-endian number (IPv4 in the top 32 bits).
    pub(crate) src: u128,
    /// Destination address, same layout.
    pub(crate) dst: u128,
    /// Destination MAC (bits 127..80), source MAC (79..32), source port (31..16), destination
    /// port (15..0). An IPoIB key has no MAC addresses; its bits 127..112 hold the
    /// encapsulation header's reserved field ([`FlowKey::ipoib_reserved`]).
    pub(crate) l2_ports: u128,
    /// VLAN tags `TPID << 16 | TCI`: stripped (127..96), first in-line (95..64), second
    /// (63..32); IP version (31..28), link kind (27..24, [`LinkKind`]'s code, never 0) and
    /// IPv6 flow label (19..0). The link kind keeps an Ethernet frame with zero MAC addresses
    /// apart from a raw IP frame of the same addresses.
    pub(crate) tags: u128,
}

impl PartialEq for FlowKey {
    /// Branch-free: one OR of four XORs (the derived version compares field by field).
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        ((self.src ^ other.src)
            | (self.dst ^ other.dst)
            | (self.l2_ports ^ other.l2_ports)
            | (self.tags ^ other.tags))
            == 0
    }
}

impl core::hash::Hash for FlowKey {
    /// Hashes exactly the fields `eq` compares.
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        (self.src, self.dst, self.l2_ports, self.tags).hash(state);
    }
}

/// The bits of [`FlowKey::l2_ports`] that hold the ports.
const PORTS: u128 = 0xffff_ffff;

impl FlowKey {
    /// The all-zero key (matches no parsed frame: every parsed key has a version).
    pub const EMPTY: FlowKey = FlowKey {
        src: 0,
        dst: 0,
        l2_ports: 0,
        tags: 0,
    };

    /// A key for a TCP flow between two addresses, without link-layer identity.
    pub fn tcp(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16) -> Self {
        let (version, s, d) = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (
                4u8,
                u128::from(u32::from(s)) << 96,
                u128::from(u32::from(d)) << 96,
            ),
            (s, d) => (6u8, u128::from(to_v6(s)), u128::from(to_v6(d))),
        };
        Self {
            src: s,
            dst: d,
            l2_ports: u128::from(src_port) << 16 | u128::from(dst_port),
            tags: u128::from(version) << 28,
        }
    }

    /// Builds a key from its parts (the parser's constructor): addresses, MACs or'd with
    /// ports ([`FlowKey::l2_ports`] layout), and [`FlowKey::pack_tags`].
    #[inline(always)]
    pub(crate) const fn from_parts(src: u128, dst: u128, l2_ports: u128, tags: u128) -> Self {
        Self {
            src,
            dst,
            l2_ports,
            tags,
        }
    }

    /// The tags word: VLAN tags (flow-key layout), IP version, link kind, flow label.
    #[inline(always)]
    pub(crate) const fn pack_tags(
        vlan_tags: u128,
        version: u8,
        link: LinkKind,
        flow_label: u32,
    ) -> u128 {
        vlan_tags
            | (version as u128) << 28
            | (link.code() as u128) << 24
            | (flow_label & 0xf_ffff) as u128
    }

    /// The same key with VLAN tag slot `slot` (0: NIC-stripped, 1 and 2: in-line, outer first)
    /// set to an 802.1Q tag with this TCI.
    pub fn with_vlan(mut self, slot: usize, tci: u16) -> Self {
        let shift = 96 - 32 * slot.min(2) as u32;
        let tag = u128::from(u32::from(ethertype::VLAN) << 16 | u32::from(tci));
        self.tags = (self.tags & !(0xffff_ffff << shift)) | tag << shift;
        self
    }

    /// The same key with an IPv6 flow label.
    pub fn with_flow_label(mut self, label: u32) -> Self {
        self.tags = (self.tags & !0xf_ffff) | u128::from(label & 0xf_ffff);
        self
    }

    /// The same key with other ports (what a frame whose ports could not be read lacks).
    #[inline(always)]
    pub(crate) const fn with_ports(mut self, ports: u32) -> Self {
        self.l2_ports = (self.l2_ports & !PORTS) | ports as u128;
        self
    }

    /// IP version: 4 or 6.
    #[inline]
    pub fn version(&self) -> u8 {
        ((self.tags >> 28) & 0xf) as u8
    }

    /// Source address bytes in network order (IPv4 in the first four).
    #[inline]
    pub fn src_bytes(&self) -> [u8; 16] {
        self.src.to_be_bytes()
    }

    /// Destination address bytes in network order (IPv4 in the first four).
    #[inline]
    pub fn dst_bytes(&self) -> [u8; 16] {
        self.dst.to_be_bytes()
    }

    /// Source address.
    pub fn src_addr(&self) -> IpAddr {
        addr_of(self.src, self.version())
    }

    /// Destination address.
    pub fn dst_addr(&self) -> IpAddr {
        addr_of(self.dst, self.version())
    }

    /// TCP source port (zero when unknown).
    #[inline]
    pub fn src_port(&self) -> u16 {
        (self.l2_ports >> 16) as u16
    }

    /// TCP destination port (zero when unknown).
    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.l2_ports as u16
    }

    /// IPv6 flow label (zero for IPv4).
    pub fn flow_label(&self) -> u32 {
        (self.tags & 0xf_ffff) as u32
    }

    /// The link word (`l2_ports` without ports) of an IPoIB key whose encapsulation header has
    /// the reserved field `r`: where an Ethernet key has its destination MAC's first two bytes.
    #[inline(always)]
    pub(crate) const fn ipoib_link(r: u16) -> u128 {
        (r as u128) << IPOIB_RESERVED_AT
    }

    /// Whether the key's link layer is IPoIB (its link identity is then the encapsulation
    /// header's reserved field, if anything: see [`FlowKey::ipoib_reserved`]).
    #[inline]
    fn is_ipoib(&self) -> bool {
        (self.tags >> 24) & 0xf == u128::from(LinkKind::Ipoib.code())
    }

    /// Destination MAC address (zero without an Ethernet header).
    pub fn dst_mac(&self) -> [u8; 6] {
        if self.is_ipoib() {
            return [0; 6];
        }
        let b = self.l2_ports.to_be_bytes();
        [b[0], b[1], b[2], b[3], b[4], b[5]]
    }

    /// Source MAC address (zero without an Ethernet header).
    pub fn src_mac(&self) -> [u8; 6] {
        let b = self.l2_ports.to_be_bytes();
        [b[6], b[7], b[8], b[9], b[10], b[11]]
    }

    /// The reserved field of the IPoIB encapsulation header (RFC 4391 section 6), zero for
    /// other links. It is part of the flow's identity, as Linux GRO compares the whole hard
    /// header: frames whose fields differ are not merged, so software GSO gives every frame
    /// back as it came. (RFC 4391 has a sender write zero and a receiver ignore the field: a
    /// sender that does not costs only aggregation.)
    pub fn ipoib_reserved(&self) -> u16 {
        if self.is_ipoib() {
            (self.l2_ports >> IPOIB_RESERVED_AT) as u16
        } else {
            0
        }
    }

    /// The same key with the IPoIB reserved field `r` in its link identity (where an Ethernet
    /// key has its destination MAC's first two bytes; an IPoIB key has no MAC addresses).
    #[cfg(test)]
    const fn with_ipoib_reserved(mut self, r: u16) -> Self {
        self.l2_ports = (self.l2_ports & !Self::ipoib_link(0xffff)) | Self::ipoib_link(r);
        self
    }

    /// VLAN tags as `TPID << 16 | TCI`, `None` when absent: the NIC-stripped one, then the
    /// in-line ones outer first.
    pub fn vlans(&self) -> [Option<u32>; 3] {
        let tag = |shift: u32| Some((self.tags >> shift) as u32).filter(|t| *t != 0);
        [tag(96), tag(64), tag(32)]
    }

    /// True when `other` has the same L2 identity and addresses (ports not compared): used to
    /// flush the held segments of an address pair when a frame with unreadable ports arrives.
    #[inline]
    pub fn same_addresses(&self, other: &FlowKey) -> bool {
        self.src == other.src
            && self.dst == other.dst
            && self.tags == other.tags
            && (self.l2_ports ^ other.l2_ports) & !PORTS == 0
    }

    /// The TCP pseudo header of the flow's segments (addresses and protocol).
    #[inline]
    pub fn pseudo_header(&self) -> PseudoHeader {
        // IPv4 addresses sit in the top 32 bits with zeros below: the same word sum serves both.
        let half = |x: u128| {
            let (s, c) = (x as u64).overflowing_add((x >> 64) as u64);
            s + u64::from(c)
        };
        let (s, c) = half(self.src).overflowing_add(half(self.dst));
        PseudoHeader::from_address_sum(crate::csum::fold(s + u64::from(c)), protocol::TCP)
    }

    /// The key as eight 64-bit words, for hashing.
    #[inline(always)]
    pub(crate) fn words(&self) -> [u64; 8] {
        let w = |x: u128| [(x >> 64) as u64, x as u64];
        let [a, b] = w(self.src);
        let [c, d] = w(self.dst);
        let [e, f] = w(self.l2_ports);
        let [g, h] = w(self.tags);
        [a, b, c, d, e, f, g, h]
    }
}

/// An address stored as a big-endian number with IPv4 in the top 32 bits.
pub(crate) fn addr_of(a: u128, version: u8) -> IpAddr {
    if version == 4 {
        IpAddr::V4(Ipv4Addr::from((a >> 96) as u32))
    } else {
        IpAddr::V6(Ipv6Addr::from(a))
    }
}

fn to_v6(a: IpAddr) -> Ipv6Addr {
    match a {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// The seeded hash of flow keys: the flow table's buckets and the ACK memory's slots are
/// chosen by it, so an attacker who cannot learn the seed cannot make flows collide.
///
/// NH (the hash of UMAC, RFC 4418 section 5): pairs of key words are offset by secret key words
/// and multiplied, and the 128-bit products added; for two different keys the sums are equal
/// with probability at most 2^-64 over the seed's expansion. A final multiply-xorshift spreads
/// the result over the 32 bits the table uses. The secret words come from the 64-bit seed
/// ([`Config::hash_seed`](crate::Config::hash_seed)) through SplitMix64, at construction (a
/// `const fn`), so a `no_std` engine without a random-number source takes its seed from the
/// caller (a hardware RNG, a boot-time counter, the MAC address and a timestamp...).
///
/// A hash only picks a bucket: two frames are merged only when their whole keys are equal, so
/// a collision costs time, never correctness.
///
/// ```
/// use lro_core::flow::FlowHasher;
/// use lro_core::FlowKey;
/// let k = FlowKey::tcp([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), 40000, 5201);
/// let (a, b) = (FlowHasher::new(1), FlowHasher::new(2));
/// assert_eq!(a.hash(&k), FlowHasher::new(1).hash(&k));
/// assert_ne!(a.hash(&k), b.hash(&k));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHasher {
    key: [u64; KEY_WORDS],
}

/// Secret words: one per key word (eight for the flow key, eight for a tunnel's), plus the
/// final multiplier.
const KEY_WORDS: usize = 17;

impl FlowHasher {
    /// The hasher for `seed`.
    pub const fn new(seed: u64) -> Self {
        let mut key = [0u64; KEY_WORDS];
        let mut state = seed;
        let mut i = 0;
        while i < KEY_WORDS {
            // SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
            // generators", 2014).
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            key[i] = z ^ (z >> 31);
            i += 1;
        }
        // An odd final multiplier is a bijection on u64.
        key[KEY_WORDS - 1] |= 1;
        Self { key }
    }

    /// An odd multiplier derived from the seed, for hashes that need not be strong (header
    /// prediction's probe, which a collision only makes miss).
    #[inline(always)]
    pub(crate) const fn multiplier(&self) -> u64 {
        self.key[KEY_WORDS - 1]
    }

    /// The 32-bit hash of a flow key.
    #[inline]
    pub fn hash(&self, key: &FlowKey) -> u32 {
        self.hash_words(&key.words(), &[0; 8], false)
    }

    /// The 32-bit hash of a flow key and a tunnel's words.
    #[inline(always)]
    pub(crate) fn hash_with<T: crate::encap::TunnelSlot>(&self, key: &FlowKey, tunnel: &T) -> u32 {
        if T::PRESENT {
            self.hash_words(&key.words(), &tunnel.words(), true)
        } else {
            self.hash_words(&key.words(), &[0; 8], false)
        }
    }

    #[inline(always)]
    fn hash_words(&self, w: &[u64; 8], t: &[u64; 8], tunnel: bool) -> u32 {
        let k = &self.key;
        let nh = |x: u64, y: u64, i: usize| {
            u128::from(x.wrapping_add(k[i])) * u128::from(y.wrapping_add(k[i + 1]))
        };
        let mut acc = nh(w[0], w[1], 0)
            .wrapping_add(nh(w[2], w[3], 2))
            .wrapping_add(nh(w[4], w[5], 4))
            .wrapping_add(nh(w[6], w[7], 6));
        if tunnel {
            acc = acc
                .wrapping_add(nh(t[0], t[1], 8))
                .wrapping_add(nh(t[2], t[3], 10))
                .wrapping_add(nh(t[4], t[5], 12))
                .wrapping_add(nh(t[6], t[7], 14));
        }
        let x = (acc as u64) ^ ((acc >> 64) as u64);
        let x = (x ^ (x >> 29)).wrapping_mul(k[KEY_WORDS - 1]);
        (x >> 32) as u32
    }
}

impl Default for FlowHasher {
    /// The hasher of [`Config`](crate::Config)'s default seed.
    fn default() -> Self {
        Self::new(crate::Config::DEFAULT_HASH_SEED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u16) -> FlowKey {
        FlowKey::tcp([198, 18, 0, 1].into(), [198, 18, 0, 2].into(), n, 80)
    }

    #[test]
    fn ipoib_reserved_field_is_its_own_accessor_not_a_mac() {
        let base = FlowKey::tcp(
            Ipv4Addr::new(198, 18, 0, 1).into(),
            Ipv4Addr::new(198, 18, 0, 2).into(),
            1,
            2,
        );
        let ipoib = FlowKey {
            tags: base.tags | u128::from(LinkKind::Ipoib.code()) << 24,
            ..base
        };
        let k = ipoib.with_ipoib_reserved(0xbeef);
        assert_ne!(k, ipoib);
        assert_eq!((k.ipoib_reserved(), ipoib.ipoib_reserved()), (0xbeef, 0));
        assert_eq!((k.dst_mac(), k.src_mac()), ([0; 6], [0; 6]));
        assert_eq!((k.src_port(), k.dst_port()), (1, 2));
        assert_eq!(k.with_ipoib_reserved(0), ipoib);
        // Another link's key has no such field: those bits are its destination MAC.
        let eth = FlowKey {
            tags: base.tags | u128::from(LinkKind::Ethernet.code()) << 24,
            ..base
        }
        .with_ipoib_reserved(0x0a0b);
        assert_eq!(eth.ipoib_reserved(), 0);
        assert_eq!(eth.dst_mac(), [0x0a, 0x0b, 0, 0, 0, 0]);
    }

    #[test]
    fn hash_spreads_ports_and_depends_on_the_seed() {
        let h = FlowHasher::new(7);
        let mut buckets = [0u32; 64];
        for p in 0..4096 {
            buckets[(h.hash(&key(p)) >> 26) as usize] += 1;
        }
        // 64 per bucket on average; a skewed hash would leave buckets empty or crowd one.
        assert!(
            buckets.iter().all(|&n| (24..=112).contains(&n)),
            "{buckets:?}"
        );
        let other = FlowHasher::new(8);
        let differ = (0..256)
            .filter(|&p| h.hash(&key(p)) != other.hash(&key(p)))
            .count();
        assert!(differ > 250, "{differ}");
    }

    #[test]
    fn the_xor_fold_collisions_of_the_old_hash_spread() {
        // Flows built so that an XOR-folding hash gives them one value (source address and
        // port changed together): keyed NH spreads them.
        let h = FlowHasher::default();
        let hashes: heapless::index_set::FnvIndexSet<u32, 64> = (0..64u16)
            .map(|k| {
                let sport = 1024 + 8 * k;
                let src = u32::from_be_bytes([198, 18, 0, 1]) ^ u32::from(sport >> 3);
                h.hash(&FlowKey::tcp(
                    src.to_be_bytes().into(),
                    [198, 18, 0, 2].into(),
                    sport,
                    5201,
                ))
            })
            .collect();
        assert!(hashes.len() > 60, "{}", hashes.len());
    }

    #[test]
    fn pseudo_header_of_v4_and_v6_keys() {
        let k = key(1);
        assert_eq!(
            k.pseudo_header(),
            PseudoHeader::new(&[198, 18, 0, 1], &[198, 18, 0, 2], 6)
        );
        // The second pair's 64-bit halves, and the sums of those, carry out.
        for (a, b) in [
            ("fd00::1", "fd00::2"),
            ("fe80::ffff:ffff:ffff:ff01", "ff02::1:ff00:1"),
        ] {
            let (a, b): (Ipv6Addr, Ipv6Addr) = (a.parse().unwrap(), b.parse().unwrap());
            let k6 = FlowKey::tcp(a.into(), b.into(), 1, 2);
            assert_eq!(
                k6.pseudo_header(),
                PseudoHeader::new(&a.octets(), &b.octets(), 6),
                "{a} > {b}"
            );
        }
    }

    /// `core::hash::Hash` of a key, with the standard library's hasher.
    fn std_hash(k: &FlowKey) -> u64 {
        extern crate std;
        use core::hash::{Hash, Hasher};
        let mut h = std::hash::DefaultHasher::new();
        k.hash(&mut h);
        h.finish()
    }

    #[test]
    fn keys_are_equal_only_when_every_word_is() {
        let base = key(1);
        assert_eq!(base, key(1));
        assert_eq!(std_hash(&base), std_hash(&key(1)));
        let flip = |k: &mut FlowKey, word: usize, bits: u128| match word {
            0 => k.src ^= bits,
            1 => k.dst ^= bits,
            2 => k.l2_ports ^= bits,
            _ => k.tags ^= bits,
        };
        for bits in [1u128, 1 << 127, 0x8100_0007 << 96] {
            for a in 0..4 {
                for b in 0..4 {
                    // One word changed, or two changed by the same bits: the differences
                    // must not cancel.
                    let mut k = base;
                    flip(&mut k, a, bits);
                    if b != a {
                        flip(&mut k, b, bits);
                    }
                    assert_ne!(k, base, "words {a} and {b}, bits {bits:#x}");
                    assert_ne!(std_hash(&k), std_hash(&base), "words {a} and {b}");
                }
            }
        }
        // The other direction of a flow with one port on both sides.
        let (a, b) = ([198, 18, 0, 1].into(), [198, 18, 0, 2].into());
        assert_ne!(FlowKey::tcp(a, b, 80, 80), FlowKey::tcp(b, a, 80, 80));
    }

    #[test]
    fn with_vlan_sets_one_slot() {
        let k = key(1);
        assert_eq!(k.vlans(), [None; 3]);
        for slot in 0..3 {
            let mut want = [None; 3];
            want[slot] = Some(0x8100_0007);
            let tagged = k.with_vlan(slot, 7);
            assert_eq!(tagged.vlans(), want, "slot {slot}");
            // The rest of the key is kept; a second call replaces the tag.
            assert_eq!(
                (tagged.src_port(), tagged.version(), tagged.src_addr()),
                (1, 4, k.src_addr())
            );
            want[slot] = Some(0x8100_0123);
            assert_eq!(tagged.with_vlan(slot, 0x123).vlans(), want, "slot {slot}");
        }
        // Beyond the last slot: the last.
        assert_eq!(k.with_vlan(5, 7), k.with_vlan(2, 7));
        // Slots stack.
        assert_eq!(
            k.with_vlan(0, 1).with_vlan(1, 2).with_vlan(2, 3).vlans(),
            [Some(0x8100_0001), Some(0x8100_0002), Some(0x8100_0003)]
        );
    }

    #[test]
    fn with_flow_label_sets_its_20_bits() {
        let k = key(1).with_vlan(2, 9);
        let l = k.with_flow_label(0xf_edcb);
        assert_eq!(l.flow_label(), 0xf_edcb);
        // The rest of the key is kept (the version and the in-line tag next to the label).
        assert_eq!((l.version(), l.vlans(), l.src_port()), (4, k.vlans(), 1));
        // A second call replaces it; only 20 bits are taken.
        assert_eq!(l.with_flow_label(0x1_2345).flow_label(), 0x1_2345);
        assert_eq!(k.with_flow_label(0xfff0_0001), k.with_flow_label(1));
        assert_eq!(l.with_flow_label(0), k);
    }

    #[test]
    fn same_addresses_compares_all_but_the_ports() {
        let k = key(1);
        assert!(k.same_addresses(&key(2)));
        assert!(k.same_addresses(&k.with_ports(0)));
        let others = [
            k.with_vlan(1, 5),
            k.with_flow_label(7),
            FlowKey::tcp([198, 18, 0, 3].into(), [198, 18, 0, 2].into(), 1, 80),
            FlowKey::tcp([198, 18, 0, 1].into(), [198, 18, 0, 3].into(), 1, 80),
            FlowKey {
                l2_ports: k.l2_ports | 1 << 40,
                ..k
            },
        ];
        for (i, o) in others.iter().enumerate() {
            assert!(!k.same_addresses(o), "case {i}: {o:?}");
        }
    }
}
