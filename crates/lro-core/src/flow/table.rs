//! The flow table's index: which entry holds which flow, found by hash bucket then full key
//! compare, kept on an LRU list for eviction and idle flushing.
//!
//! Buckets are chains through the entries (the entry count is a power of two), so a lookup
//! costs one bucket read plus one key compare per colliding flow. A hash only chooses the
//! bucket: an entry matches when its whole key is equal, so colliding hashes (an attack, not a
//! corner case) cost time, never correctness.
//!
//! The arrays live in the engine's storage (sized by its [`Capacity`](crate::Capacity)); an
//! [`Index`] borrows them with the list ends and the free count.

use super::Key;

/// "No entry" in the index links.
pub(crate) const NIL: u16 = u16::MAX;

/// Per-entry link fields, kept apart from the entries' merge state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Links {
    hash: u32,
    /// Next entry in the same bucket.
    chain: u16,
    /// Neighbours on the LRU list while in use (towards older / newer), on the free list
    /// while free (towards the next to be taken / the most recently freed).
    older: u16,
    newer: u16,
    used: bool,
}

/// The list ends and the free count (kept in the engine itself).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends {
    /// Least recently active entry (evicted first).
    oldest: u16,
    /// Most recently active entry.
    newest: u16,
    /// The free entry taken next (freed longest ago) and the one freed last.
    free_first: u16,
    free_last: u16,
    /// Free entries.
    nfree: u16,
}

impl Ends {
    /// Every one of `n` entries free.
    pub(crate) const fn new(n: usize) -> Self {
        Self {
            oldest: NIL,
            newest: NIL,
            free_first: if n > 0 { 0 } else { NIL },
            free_last: if n > 0 { (n - 1) as u16 } else { NIL },
            nfree: n as u16,
        }
    }
}

/// The links of `N` free entries, on the free list in slot order.
pub(crate) const fn initial_links<const N: usize>() -> [Links; N] {
    let mut links = [Links {
        hash: 0,
        chain: NIL,
        older: NIL,
        newer: NIL,
        used: false,
    }; N];
    let mut i = 0;
    while i < N {
        links[i].older = if i + 1 < N { (i + 1) as u16 } else { NIL };
        links[i].newer = if i > 0 { (i - 1) as u16 } else { NIL };
        i += 1;
    }
    links
}

/// The entry holding `key` among the index's arrays, if any.
#[inline]
pub(crate) fn find<T: Copy + Eq>(
    buckets: &[u16],
    links: &[Links],
    keys: &[Key<T>],
    hash: u32,
    key: &Key<T>,
) -> Option<u16> {
    let mut slot = buckets[hash as usize & (buckets.len() - 1)];
    while slot != NIL {
        let s = usize::from(slot);
        if links[s].hash == hash && keys[s] == *key {
            return Some(slot);
        }
        slot = links[s].chain;
    }
    None
}

/// The index over borrowed arrays of `n` entries.
pub(crate) struct Index<'a, T> {
    pub(crate) buckets: &'a mut [u16],
    pub(crate) links: &'a mut [Links],
    pub(crate) keys: &'a mut [Key<T>],
    pub(crate) ends: &'a mut Ends,
}

impl<T: Copy + Eq> Index<'_, T> {
    /// The bucket of a hash among `n` (a power of two). The hash is already mixed
    /// ([`FlowHasher`](super::FlowHasher)): its low bits serve.
    #[inline(always)]
    fn bucket(hash: u32, n: usize) -> usize {
        hash as usize & (n - 1)
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.ends.nfree == 0
    }

    #[inline]
    pub(crate) fn key(&self, slot: u16) -> &Key<T> {
        &self.keys[usize::from(slot)]
    }

    /// The entry holding `key`, if any.
    #[inline]
    pub(crate) fn find(&self, hash: u32, key: &Key<T>) -> Option<u16> {
        find(self.buckets, self.links, self.keys, hash, key)
    }

    /// Takes a free entry for `key` and makes it the most recent: `want` if it is free (the
    /// entry that held the flow before, whose header-prediction template still describes it),
    /// otherwise the one freed longest ago (so that a delivered flow's template survives as
    /// long as possible). `None` when full (the caller makes room first).
    pub(crate) fn insert(&mut self, hash: u32, key: &Key<T>, want: Option<u16>) -> Option<u16> {
        let slot = match want {
            Some(w) if self.links.get(usize::from(w)).is_some_and(|l| !l.used) => w,
            _ if self.ends.nfree > 0 => self.ends.free_first,
            _ => return None,
        };
        self.unlink_free(slot);
        let s = usize::from(slot);
        let b = Self::bucket(hash, self.buckets.len());
        self.keys[s] = *key;
        self.links[s] = Links {
            hash,
            chain: self.buckets[b],
            older: self.ends.newest,
            newer: NIL,
            used: true,
        };
        self.buckets[b] = slot;
        if self.ends.newest != NIL {
            self.links[usize::from(self.ends.newest)].newer = slot;
        } else {
            self.ends.oldest = slot;
        }
        self.ends.newest = slot;
        Some(slot)
    }

    /// Takes the free entry `slot` off the free list.
    fn unlink_free(&mut self, slot: u16) {
        let Links { older, newer, .. } = self.links[usize::from(slot)];
        // `older` is the next to be taken after it, `newer` the one freed after it.
        if newer != NIL {
            self.links[usize::from(newer)].older = older;
        } else {
            self.ends.free_first = older;
        }
        if older != NIL {
            self.links[usize::from(older)].newer = newer;
        } else {
            self.ends.free_last = newer;
        }
        self.ends.nfree -= 1;
    }

    /// Marks `slot` as the most recently active.
    #[inline]
    pub(crate) fn touch(&mut self, slot: u16) {
        if self.ends.newest == slot {
            return;
        }
        self.unlink_lru(slot);
        let s = usize::from(slot);
        self.links[s].older = self.ends.newest;
        self.links[s].newer = NIL;
        if self.ends.newest != NIL {
            self.links[usize::from(self.ends.newest)].newer = slot;
        } else {
            self.ends.oldest = slot;
        }
        self.ends.newest = slot;
    }

    fn unlink_lru(&mut self, slot: u16) {
        let Links { older, newer, .. } = self.links[usize::from(slot)];
        if older != NIL {
            self.links[usize::from(older)].newer = newer;
        } else {
            self.ends.oldest = newer;
        }
        if newer != NIL {
            self.links[usize::from(newer)].older = older;
        } else {
            self.ends.newest = older;
        }
    }

    /// Frees `slot`. Its key stays readable ([`Index::key`]) until the slot is reused.
    pub(crate) fn remove(&mut self, slot: u16) {
        let s = usize::from(slot);
        if !self.links[s].used {
            return;
        }
        self.unlink_lru(slot);
        let b = Self::bucket(self.links[s].hash, self.buckets.len());
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
        // Last on the free list: taken after every entry freed before it.
        self.links[s] = Links {
            hash: 0,
            chain: NIL,
            older: NIL,
            newer: self.ends.free_last,
            used: false,
        };
        if self.ends.free_last != NIL {
            self.links[usize::from(self.ends.free_last)].older = slot;
        } else {
            self.ends.free_first = slot;
        }
        self.ends.free_last = slot;
        self.ends.nfree += 1;
    }

    /// Re-buckets every entry in use with `hash` (after the hash seed changed).
    pub(crate) fn rehash(&mut self, mut hash: impl FnMut(&Key<T>) -> u32) {
        self.buckets.fill(NIL);
        for s in 0..self.links.len() {
            if self.links[s].used {
                let h = hash(&self.keys[s]);
                let b = Self::bucket(h, self.buckets.len());
                self.links[s].hash = h;
                self.links[s].chain = self.buckets[b];
                self.buckets[b] = s as u16;
            }
        }
    }

    /// The least recently active entry.
    #[inline]
    pub(crate) fn oldest(&self) -> Option<u16> {
        (self.ends.oldest != NIL).then_some(self.ends.oldest)
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
    use crate::encap::NoTunnel;
    use crate::flow::FlowKey;

    struct Arrays<const N: usize> {
        buckets: [u16; N],
        links: [Links; N],
        keys: [Key<NoTunnel>; N],
        ends: Ends,
    }

    impl<const N: usize> Arrays<N> {
        fn new() -> Self {
            Self {
                buckets: [NIL; N],
                links: initial_links::<N>(),
                keys: [Key::EMPTY; N],
                ends: Ends::new(N),
            }
        }

        fn index(&mut self) -> Index<'_, NoTunnel> {
            Index {
                buckets: &mut self.buckets,
                links: &mut self.links,
                keys: &mut self.keys,
                ends: &mut self.ends,
            }
        }
    }

    fn key(n: u8) -> Key<NoTunnel> {
        let a = core::net::Ipv4Addr::new(198, 18, 0, 1).into();
        Key {
            flow: FlowKey::tcp(a, a, u16::from(n), 80),
            tunnel: NoTunnel,
        }
    }

    #[test]
    fn colliding_hashes_keep_flows_apart() {
        let mut arrays = Arrays::<8>::new();
        let mut idx = arrays.index();
        let a = idx.insert(7, &key(1), None).unwrap();
        let b = idx.insert(7, &key(2), None).unwrap();
        assert_ne!(a, b);
        assert_eq!(idx.find(7, &key(1)), Some(a));
        assert_eq!(idx.find(7, &key(2)), Some(b));
        assert_eq!(idx.find(7, &key(3)), None);
        idx.remove(a);
        assert_eq!(idx.find(7, &key(1)), None);
        assert_eq!(idx.find(7, &key(2)), Some(b));
        idx.rehash(|k| u32::from(k.flow.src_port()) << 20);
        assert_eq!(idx.find(2 << 20, &key(2)), Some(b));
        assert_eq!(idx.find(7, &key(2)), None);
    }

    #[test]
    fn lru_order_follows_touches() {
        let mut arrays = Arrays::<4>::new();
        let mut idx = arrays.index();
        let s: [u16; 4] = core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8), None).unwrap());
        assert!(idx.is_full());
        assert_eq!(idx.insert(9, &key(9), None), None);
        assert_eq!(idx.oldest(), Some(s[0]));
        idx.touch(s[0]);
        assert_eq!(idx.oldest(), Some(s[1]));
        idx.remove(s[1]);
        assert_eq!(idx.oldest(), Some(s[2]));
        assert_eq!(idx.newer(s[2]), Some(s[3]));
        assert_eq!(idx.newer(s[3]), Some(s[0]));
        assert_eq!(idx.newer(s[0]), None);
    }

    #[test]
    fn free_entries_are_taken_oldest_freed_first_unless_one_is_wanted() {
        let mut arrays = Arrays::<4>::new();
        let mut idx = arrays.index();
        let s: [u16; 4] =
            core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8), None).unwrap());
        assert_eq!(s, [0, 1, 2, 3]);
        idx.remove(s[2]);
        idx.remove(s[0]);
        idx.remove(s[3]);
        // Wanted and free: taken out of the middle of the free list.
        assert_eq!(idx.insert(5, &key(5), Some(s[0])), Some(s[0]));
        // Wanted but in use: the one freed longest ago instead.
        assert_eq!(idx.insert(6, &key(6), Some(s[1])), Some(s[2]));
        assert_eq!(idx.insert(7, &key(7), None), Some(s[3]));
        assert_eq!(idx.insert(8, &key(8), None), None);
        assert_eq!(idx.find(5, &key(5)), Some(s[0]));
        for slot in s {
            idx.remove(slot);
        }
        // Freed in slot order, taken in slot order.
        let again: [u16; 4] =
            core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8), None).unwrap());
        assert_eq!(again, s);
    }
}
