//! Allocation-free batch sorting and grouping by RSS hash (FreeBSD `tcp_lro_queue_mbuf`, `tcp_lro_sort`).

use crate::meta::RssType;

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
/// group: what [`RssSorted`](super::RssSorted) needs, for less than a full sort.
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

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

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

    /// Each (type, hash) of `got` is one contiguous run, in arrival order, and `got` is a
    /// permutation of `input`.
    fn assert_grouped(got: &[u64], input: &[u64]) {
        let (mut a, mut b) = (got.to_vec(), input.to_vec());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "not a permutation");
        let mut seen = std::collections::HashSet::new();
        for (i, &k) in got.iter().enumerate() {
            let group = k >> ARRIVAL_BITS;
            if i > 0 && got[i - 1] >> ARRIVAL_BITS == group {
                assert!(got[i - 1] & ARRIVAL_MASK < k & ARRIVAL_MASK, "{got:x?}");
            } else {
                assert!(seen.insert(group), "group {group:x} split: {got:x?}");
            }
        }
    }

    const KINDS: [RssType; 5] = [
        RssType::Opaque,
        RssType::Ipv4,
        RssType::TcpIpv4,
        RssType::Ipv6,
        RssType::TcpIpv6,
    ];

    #[test]
    fn every_hash_type_has_its_own_place_in_the_order() {
        // Types in `RssType` order, whatever the hash and arrival: two types never share a
        // group, even with equal hashes.
        for pair in KINDS.windows(2) {
            assert!(
                sort_key(u32::MAX, pair[0], ARRIVAL_MASK as u32) < sort_key(0, pair[1], 0),
                "{:?} before {:?}",
                pair[0],
                pair[1]
            );
        }
    }

    #[test]
    fn group_keys_splits_groups_that_differ_in_one_bit() {
        // One bucket holds every key, so every bit of type and hash must tell two groups
        // apart: hashes one bit apart, equal hashes of two types, and a zero hash of the
        // opaque type (no group bit set) first.
        let h = 0x5555_5555u32;
        let pairs = (0..32)
            .map(|bit| ((h, RssType::TcpIpv4), (h ^ (1 << bit), RssType::TcpIpv4)))
            .chain(KINDS.windows(2).map(|w| ((h, w[0]), (h, w[1]))))
            .chain([((0, RssType::Opaque), (h, RssType::Opaque))]);
        for (a, b) in pairs {
            let input: Vec<u64> = (0..40u32)
                .map(|i| {
                    let (hash, kind) = if i % 2 == 0 { a } else { b };
                    sort_key(hash, kind, i)
                })
                .collect();
            let mut got = input.clone();
            let (mut scratch, mut counts) = (vec![0; got.len()], [0u32; 1]);
            group_keys(&mut got, &mut scratch, &mut counts);
            assert_grouped(&got, &input);
        }
    }

    #[test]
    fn group_keys_without_room_sorts_and_with_more_room_groups() {
        let input: Vec<u64> = (0..100u32)
            .map(|i| sort_key((i % 7).wrapping_mul(0x9e37_79b9), RssType::TcpIpv4, i))
            .collect();
        let mut sorted = input.clone();
        sorted.sort_unstable();
        // No buckets, or scratch shorter than the keys: a full sort.
        for (scratch_len, buckets) in [(100, 0), (99, 100), (0, 100)] {
            let mut got = input.clone();
            let (mut scratch, mut counts) = (vec![0; scratch_len], vec![0; buckets]);
            group_keys(&mut got, &mut scratch, &mut counts);
            assert_eq!(got, sorted, "scratch {scratch_len}, buckets {buckets}");
        }
        // Scratch longer than the keys is room enough.
        for scratch_len in [101, 300] {
            let mut got = input.clone();
            let (mut scratch, mut counts) = (vec![0; scratch_len], vec![0; 100]);
            group_keys(&mut got, &mut scratch, &mut counts);
            assert_grouped(&got, &input);
        }
    }
}
