//! The flow table: `N` entries in fixed memory, found by hash bucket then full key compare,
//! kept on an LRU list for eviction and idle flushing.
//!
//! Buckets are chains through the entries (`N` must be a power of two), so a lookup costs one
//! bucket read plus one key compare per colliding flow. A hash only chooses the bucket: an entry
//! matches when its whole [`FlowKey`] is equal, so colliding hashes (an attack, not a corner
//! case) cost time, never correctness.

use crate::wire::FlowKey;

/// "No entry" in the index links.
pub(crate) const NIL: u16 = u16::MAX;

/// Per-entry link fields, kept apart from the entries' merge state.
#[derive(Clone, Copy)]
struct Links {
    hash: u32,
    /// Next entry in the same bucket.
    chain: u16,
    /// LRU neighbours (towards older / newer).
    older: u16,
    newer: u16,
    used: bool,
}

const FREE: Links = Links {
    hash: 0,
    chain: NIL,
    older: NIL,
    newer: NIL,
    used: false,
};

/// Index bookkeeping for `N` entries. The entries themselves (keys and state) live in the
/// coalescer; this type only manages which slot holds which flow.
pub(crate) struct Index<const N: usize> {
    buckets: [u16; N],
    links: [Links; N],
    keys: [FlowKey; N],
    /// Least recently active entry (evicted first).
    oldest: u16,
    /// Most recently active entry.
    newest: u16,
    /// Free slots, as a stack.
    free: [u16; N],
    nfree: usize,
}

impl<const N: usize> Index<N> {
    pub(crate) const VALID: () = assert!(
        N.is_power_of_two() && N < NIL as usize,
        "flow table capacity must be a power of two below 65535"
    );

    pub(crate) const fn new() -> Self {
        #[allow(clippy::let_unit_value)]
        let () = Self::VALID;
        let mut free = [0u16; N];
        let mut i = 0;
        while i < N {
            free[i] = (N - 1 - i) as u16;
            i += 1;
        }
        Self {
            buckets: [NIL; N],
            links: [FREE; N],
            keys: [FlowKey::EMPTY; N],
            oldest: NIL,
            newest: NIL,
            free,
            nfree: N,
        }
    }

    /// The bucket of a hash. A NIC's RSS hashes on one receive queue share their low bits
    /// (the indirection table is indexed by them), so the bucket is taken from a multiplicative
    /// mix of the whole hash rather than from its low bits.
    #[inline]
    pub(crate) fn bucket(hash: u32) -> usize {
        (hash.wrapping_mul(0x9e37_79b9) >> 16) as usize & (N - 1)
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        N - self.nfree
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.nfree == 0
    }

    #[inline]
    pub(crate) fn key(&self, slot: u16) -> &FlowKey {
        &self.keys[usize::from(slot)]
    }

    /// The entry holding `key`, if any.
    #[inline]
    pub(crate) fn find(&self, hash: u32, key: &FlowKey) -> Option<u16> {
        let mut slot = self.buckets[Self::bucket(hash)];
        while slot != NIL {
            let s = usize::from(slot);
            if self.links[s].hash == hash && self.keys[s] == *key {
                return Some(slot);
            }
            slot = self.links[s].chain;
        }
        None
    }

    /// Takes a free slot for `key` and makes it the most recent. The caller must have made room
    /// (`!is_full()`).
    pub(crate) fn insert(&mut self, hash: u32, key: &FlowKey) -> Option<u16> {
        if self.nfree == 0 {
            return None;
        }
        self.nfree -= 1;
        let slot = self.free[self.nfree];
        let s = usize::from(slot);
        let b = Self::bucket(hash);
        self.keys[s] = *key;
        self.links[s] = Links {
            hash,
            chain: self.buckets[b],
            older: self.newest,
            newer: NIL,
            used: true,
        };
        self.buckets[b] = slot;
        if self.newest != NIL {
            self.links[usize::from(self.newest)].newer = slot;
        } else {
            self.oldest = slot;
        }
        self.newest = slot;
        Some(slot)
    }

    /// Marks `slot` as the most recently active.
    #[inline]
    pub(crate) fn touch(&mut self, slot: u16) {
        if self.newest == slot {
            return;
        }
        self.unlink_lru(slot);
        let s = usize::from(slot);
        self.links[s].older = self.newest;
        self.links[s].newer = NIL;
        if self.newest != NIL {
            self.links[usize::from(self.newest)].newer = slot;
        } else {
            self.oldest = slot;
        }
        self.newest = slot;
    }

    fn unlink_lru(&mut self, slot: u16) {
        let Links { older, newer, .. } = self.links[usize::from(slot)];
        if older != NIL {
            self.links[usize::from(older)].newer = newer;
        } else {
            self.oldest = newer;
        }
        if newer != NIL {
            self.links[usize::from(newer)].older = older;
        } else {
            self.newest = older;
        }
    }

    /// Frees `slot`.
    pub(crate) fn remove(&mut self, slot: u16) {
        let s = usize::from(slot);
        if !self.links[s].used {
            return;
        }
        self.unlink_lru(slot);
        let b = Self::bucket(self.links[s].hash);
        let mut cur = self.buckets[b];
        let mut prev = NIL;
        while cur != NIL && cur != slot {
            prev = cur;
            cur = self.links[usize::from(cur)].chain;
        }
        if cur == slot {
            let next = self.links[s].chain;
            if prev == NIL {
                self.buckets[b] = next;
            } else {
                self.links[usize::from(prev)].chain = next;
            }
        }
        self.links[s] = FREE;
        self.free[self.nfree] = slot;
        self.nfree += 1;
    }

    /// The least recently active entry.
    #[inline]
    pub(crate) fn oldest(&self) -> Option<u16> {
        (self.oldest != NIL).then_some(self.oldest)
    }

    /// The entry after `slot` in LRU order (towards the newest).
    #[inline]
    pub(crate) fn newer(&self, slot: u16) -> Option<u16> {
        let n = self.links[usize::from(slot)].newer;
        (n != NIL).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> FlowKey {
        let a = core::net::Ipv4Addr::new(198, 18, 0, 1).into();
        FlowKey::tcp(a, a, u16::from(n), 80)
    }

    #[test]
    fn colliding_hashes_keep_flows_apart() {
        let mut idx = Index::<8>::new();
        let a = idx.insert(7, &key(1)).unwrap();
        let b = idx.insert(7, &key(2)).unwrap();
        assert_ne!(a, b);
        assert_eq!(idx.find(7, &key(1)), Some(a));
        assert_eq!(idx.find(7, &key(2)), Some(b));
        assert_eq!(idx.find(7, &key(3)), None);
        idx.remove(a);
        assert_eq!(idx.find(7, &key(1)), None);
        assert_eq!(idx.find(7, &key(2)), Some(b));
    }

    #[test]
    fn lru_order_follows_touches() {
        let mut idx = Index::<4>::new();
        let s: [u16; 4] = core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8)).unwrap());
        assert!(idx.is_full());
        assert_eq!(idx.insert(9, &key(9)), None);
        assert_eq!(idx.oldest(), Some(s[0]));
        idx.touch(s[0]);
        assert_eq!(idx.oldest(), Some(s[1]));
        idx.remove(s[1]);
        assert_eq!(idx.oldest(), Some(s[2]));
        assert_eq!(idx.newer(s[2]), Some(s[3]));
        assert_eq!(idx.newer(s[3]), Some(s[0]));
        assert_eq!(idx.newer(s[0]), None);
        assert_eq!(idx.len(), 3);
    }
}
