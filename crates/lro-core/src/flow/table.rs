//! The flow table's index: which entry holds which flow, found by hash bucket then full key
//! compare, with the entries on two LRU lists.
//!
//! An entry is *fresh* (never used), *held* (its flow's segment holds frames) or *idle* (its
//! flow's segment was delivered: the entry keeps the flow's key, its place in the index and its
//! header-prediction template, so the flow's next frame starts a segment where the last one was,
//! without an insertion). Held entries are on an LRU list for eviction and idle flushing; idle
//! ones on their own, oldest reused first when a new flow needs an entry. A flow has at most one
//! entry.
//!
//! Buckets are chains through the entries (the entry count is a power of two), so a lookup
//! costs one bucket read plus one key compare per colliding flow. A hash only chooses the
//! bucket: an entry matches when its whole key is equal, so colliding hashes (an attack, not a
//! corner case) cost time, never correctness.
//!
//! The arrays live in the engine's storage (sized by its [`Capacity`](crate::Capacity)); an
//! [`Index`] borrows them with the list ends.

use super::Key;

/// "No entry" in the index links.
pub(crate) const NIL: u16 = u16::MAX;

/// Per-entry link fields, kept apart from the entries' merge state.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Links {
    hash: u32,
    /// Next entry in the same bucket.
    chain: u16,
    /// Neighbours on the entry's list (held or idle), towards older / newer.
    older: u16,
    newer: u16,
    state: State,
}

/// Where an entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Fresh,
    Held,
    Idle,
}

impl Links {
    pub(crate) const FRESH: Links = Links {
        hash: 0,
        chain: NIL,
        older: NIL,
        newer: NIL,
        state: State::Fresh,
    };
}

/// The two ends of a list.
#[derive(Clone, Copy, Debug)]
struct List {
    oldest: u16,
    newest: u16,
}

impl List {
    const EMPTY: Self = Self {
        oldest: NIL,
        newest: NIL,
    };
}

/// The list ends and the fresh count (kept in the engine itself).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends {
    held: List,
    idle: List,
    /// Entries used so far: `fresh..n` were never used.
    fresh: u16,
}

impl Ends {
    /// Every entry fresh.
    pub(crate) const fn new() -> Self {
        Self {
            held: List::EMPTY,
            idle: List::EMPTY,
            fresh: 0,
        }
    }
}

/// The entry holding `key` (held or idle) among the index's arrays, if any.
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

/// The entry [`Index::insert`] or [`Index::insert_idle`] gave a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The entry.
    pub(crate) slot: u16,
    /// It was another flow's, idle (that flow left the index: `Stats::forgotten`), not one
    /// never used.
    pub(crate) reused: bool,
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

    /// Whether some entry was never used.
    #[inline]
    pub(crate) fn has_fresh(&self) -> bool {
        usize::from(self.ends.fresh) < self.links.len()
    }

    /// Whether a new flow needs an entry evicted first: none fresh, none idle.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        usize::from(self.ends.fresh) == self.links.len() && self.ends.idle.oldest == NIL
    }

    #[inline]
    pub(crate) fn key(&self, slot: u16) -> &Key<T> {
        &self.keys[usize::from(slot)]
    }

    /// The entry of `key`, held or idle, if any.
    #[inline]
    pub(crate) fn find(&self, hash: u32, key: &Key<T>) -> Option<u16> {
        find(self.buckets, self.links, self.keys, hash, key)
    }

    /// An entry for a flow that has none (the caller checked with [`Index::find`]), held and
    /// the most recent: a fresh one, or the idle one delivered longest ago (its flow leaves the
    /// index). `None` when full (the caller evicts a held entry first).
    pub(crate) fn insert(&mut self, hash: u32, key: &Key<T>) -> Option<Taken> {
        let taken = self.take(|_| true)?;
        self.bucket_in(taken.slot, hash, key);
        self.link_newest(taken.slot, State::Held);
        Some(taken)
    }

    /// An idle entry for a flow that has none, at the oldest end of the idle list (the first
    /// to be reused): a fresh one, or the idle one delivered longest ago if `reusable` says
    /// so. `None` otherwise: such an entry never takes one a held or busier flow may want.
    pub(crate) fn insert_idle(
        &mut self,
        hash: u32,
        key: &Key<T>,
        reusable: impl FnOnce(u16) -> bool,
    ) -> Option<Taken> {
        let taken = self.take(reusable)?;
        self.bucket_in(taken.slot, hash, key);
        self.link_oldest(taken.slot, State::Idle);
        Some(taken)
    }

    /// A fresh entry, else the oldest idle one if `reusable` says so (its flow leaves the
    /// index), on no list.
    #[inline]
    fn take(&mut self, reusable: impl FnOnce(u16) -> bool) -> Option<Taken> {
        if self.has_fresh() {
            self.ends.fresh += 1;
            return Some(Taken {
                slot: self.ends.fresh - 1,
                reused: false,
            });
        }
        let slot = self.ends.idle.oldest;
        if slot == NIL || !reusable(slot) {
            return None;
        }
        self.unlink(slot);
        self.unbucket(slot);
        Some(Taken { slot, reused: true })
    }

    /// Puts `key` in the entry `slot` and the entry in its bucket.
    #[inline]
    fn bucket_in(&mut self, slot: u16, hash: u32, key: &Key<T>) {
        let s = usize::from(slot);
        let b = Self::bucket(hash, self.buckets.len());
        self.keys[s] = *key;
        self.links[s].hash = hash;
        self.links[s].chain = self.buckets[b];
        self.buckets[b] = slot;
    }

    /// Makes the idle entry `slot` held again, the most recent (its flow starts a segment).
    #[inline]
    pub(crate) fn activate(&mut self, slot: u16) {
        if self.links[usize::from(slot)].state == State::Idle {
            self.unlink(slot);
            self.link_newest(slot, State::Held);
        }
    }

    /// Makes the held entry `slot` idle (its segment was delivered). Its key stays in the
    /// index until the entry is reused.
    #[inline]
    pub(crate) fn park(&mut self, slot: u16) {
        if self.links[usize::from(slot)].state == State::Held {
            self.unlink(slot);
            self.link_newest(slot, State::Idle);
        }
    }

    /// Marks the held entry `slot` as the most recently active.
    #[inline]
    pub(crate) fn touch(&mut self, slot: u16) {
        if self.ends.held.newest == slot {
            return;
        }
        self.unlink(slot);
        self.link_newest(slot, State::Held);
    }

    /// The list an entry in `state` is on.
    #[inline(always)]
    fn list(&mut self, state: State) -> &mut List {
        match state {
            State::Idle => &mut self.ends.idle,
            _ => &mut self.ends.held,
        }
    }

    /// Takes `slot` off its list.
    #[inline]
    fn unlink(&mut self, slot: u16) {
        let Links {
            older,
            newer,
            state,
            ..
        } = self.links[usize::from(slot)];
        if older != NIL {
            self.links[usize::from(older)].newer = newer;
        } else {
            self.list(state).oldest = newer;
        }
        if newer != NIL {
            self.links[usize::from(newer)].older = older;
        } else {
            self.list(state).newest = older;
        }
    }

    /// Puts `slot` at the newest end of the list of `state`.
    #[inline]
    fn link_newest(&mut self, slot: u16, state: State) {
        self.link_at(slot, state, true);
    }

    /// Puts `slot` at the oldest end of the list of `state`.
    fn link_oldest(&mut self, slot: u16, state: State) {
        self.link_at(slot, state, false);
    }

    /// Puts `slot` at one end of the list of `state`: the newest (`newest`) or the oldest.
    #[inline(always)]
    fn link_at(&mut self, slot: u16, state: State, newest: bool) {
        let end = if newest {
            self.list(state).newest
        } else {
            self.list(state).oldest
        };
        let l = &mut self.links[usize::from(slot)];
        (l.older, l.newer) = if newest { (end, NIL) } else { (NIL, end) };
        l.state = state;
        if end == NIL {
            *self.list(state) = List {
                oldest: slot,
                newest: slot,
            };
        } else if newest {
            self.links[usize::from(end)].newer = slot;
            self.list(state).newest = slot;
        } else {
            self.links[usize::from(end)].older = slot;
            self.list(state).oldest = slot;
        }
    }

    /// Takes `slot` out of its bucket's chain.
    fn unbucket(&mut self, slot: u16) {
        let s = usize::from(slot);
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
        self.links[s].chain = NIL;
    }

    /// Re-buckets every entry in use with `hash` (after the hash seed changed).
    pub(crate) fn rehash(&mut self, mut hash: impl FnMut(&Key<T>) -> u32) {
        self.buckets.fill(NIL);
        for s in 0..usize::from(self.ends.fresh) {
            let h = hash(&self.keys[s]);
            let b = Self::bucket(h, self.buckets.len());
            self.links[s].hash = h;
            self.links[s].chain = self.buckets[b];
            self.buckets[b] = s as u16;
        }
    }

    /// The least recently active held entry.
    #[inline]
    pub(crate) fn oldest(&self) -> Option<u16> {
        (self.ends.held.oldest != NIL).then_some(self.ends.held.oldest)
    }

    /// The held entry after `slot` in LRU order (towards the newest).
    #[inline]
    pub(crate) fn newer(&self, slot: u16) -> Option<u16> {
        let n = self.links[usize::from(slot)].newer;
        (n != NIL).then_some(n)
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::encap::NoTunnel;
    use crate::flow::FlowKey;
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

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
                links: [Links::FRESH; N],
                keys: [Key::EMPTY; N],
                ends: Ends::new(),
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
        let a = idx.insert(7, &key(1)).unwrap().slot;
        let b = idx.insert(7, &key(2)).unwrap().slot;
        assert_ne!(a, b);
        assert_eq!(idx.find(7, &key(1)), Some(a));
        assert_eq!(idx.find(7, &key(2)), Some(b));
        assert_eq!(idx.find(7, &key(3)), None);
        idx.rehash(|k| u32::from(k.flow.src_port()) << 20);
        assert_eq!(idx.find(2 << 20, &key(2)), Some(b));
        assert_eq!(idx.find(7, &key(2)), None);
    }

    #[test]
    fn lru_order_follows_touches() {
        let mut arrays = Arrays::<4>::new();
        let mut idx = arrays.index();
        let s: [u16; 4] =
            core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8)).unwrap().slot);
        assert!(idx.is_full());
        assert_eq!(idx.insert(9, &key(9)).map(|t| t.slot), None);
        assert_eq!(idx.oldest(), Some(s[0]));
        idx.touch(s[0]);
        assert_eq!(idx.oldest(), Some(s[1]));
        idx.park(s[1]);
        assert!(!idx.is_full());
        assert_eq!(idx.oldest(), Some(s[2]));
        assert_eq!(idx.newer(s[2]), Some(s[3]));
        assert_eq!(idx.newer(s[3]), Some(s[0]));
        assert_eq!(idx.newer(s[0]), None);
    }

    #[test]
    fn entries_inserted_idle_are_reused_first_and_take_only_what_they_may() {
        let mut arrays = Arrays::<4>::new();
        let mut idx = arrays.index();
        let a = idx.insert(1, &key(1)).unwrap().slot;
        idx.park(a);
        // Fresh entries first, whatever `reusable` says.
        let b = idx.insert_idle(2, &key(2), |_| false).unwrap();
        assert!(!b.reused);
        let b = b.slot;
        assert_eq!(idx.find(2, &key(2)), Some(b));
        let c = idx.insert(3, &key(3)).unwrap().slot;
        let d = idx.insert(4, &key(4)).unwrap().slot;
        idx.park(c);
        // None fresh: the oldest idle entry is `b` (at the oldest end although newer than
        // `a`), taken only if `reusable` allows it.
        assert_eq!(idx.insert_idle(5, &key(5), |_| false).map(|t| t.slot), None);
        let mut asked = None;
        let e = idx
            .insert_idle(5, &key(5), |s| {
                asked = Some(s);
                true
            })
            .unwrap()
            .slot;
        assert_eq!((asked, e), (Some(b), b));
        assert_eq!(idx.find(2, &key(2)), None);
        assert_eq!(idx.find(5, &key(5)), Some(e));
        // A flow starting a segment takes the entry inserted idle before the older `a`.
        let f = idx.insert(6, &key(6)).unwrap().slot;
        assert_eq!(f, e);
        assert_eq!(idx.insert(7, &key(7)).map(|t| t.slot), Some(a));
        assert_eq!(idx.insert(8, &key(8)).map(|t| t.slot), Some(c));
        assert_eq!(idx.insert(9, &key(9)).map(|t| t.slot), None);
        assert_eq!(idx.oldest(), Some(d));
    }

    #[test]
    fn idle_entries_stay_found_and_are_reused_oldest_first() {
        let mut arrays = Arrays::<4>::new();
        let mut idx = arrays.index();
        let s: [u16; 4] =
            core::array::from_fn(|i| idx.insert(i as u32, &key(i as u8)).unwrap().slot);
        assert_eq!(s, [0, 1, 2, 3]);
        idx.park(s[2]);
        idx.park(s[0]);
        idx.park(s[3]);
        // An idle flow is still found, and starts again in its own entry.
        assert_eq!(idx.find(0, &key(0)), Some(s[0]));
        idx.activate(s[0]);
        assert_eq!(idx.oldest(), Some(s[1]));
        assert_eq!(idx.newer(s[1]), Some(s[0]));
        // A new flow takes the idle entry delivered longest ago; its old flow leaves.
        assert_eq!(
            idx.insert(5, &key(5)),
            Some(Taken {
                slot: s[2],
                reused: true
            })
        );
        assert_eq!(idx.find(2, &key(2)), None);
        assert_eq!(idx.find(5, &key(5)), Some(s[2]));
        assert_eq!(idx.insert(6, &key(6)).map(|t| t.slot), Some(s[3]));
        assert_eq!(idx.insert(7, &key(7)).map(|t| t.slot), None);
        assert!(idx.is_full());
    }

    /// What the index should do, kept the plain way: per entry its flow (a key number), and
    /// both lists as vectors from the oldest to the newest entry.
    #[derive(Debug, Default)]
    struct Model {
        used: u16,
        flow: Vec<Option<u8>>,
        held: Vec<u16>,
        idle: Vec<u16>,
    }

    impl Model {
        fn slot_of(&self, k: u8) -> Option<u16> {
            (0..self.used).find(|&s| self.flow[usize::from(s)] == Some(k))
        }

        /// A fresh entry, else the oldest idle one if `reuse`.
        fn take(&mut self, n: u16, reuse: bool) -> Option<Taken> {
            if self.used < n {
                self.used += 1;
                return Some(Taken {
                    slot: self.used - 1,
                    reused: false,
                });
            }
            let slot = *self.idle.first().filter(|_| reuse)?;
            self.idle.remove(0);
            Some(Taken { slot, reused: true })
        }

        fn remove(list: &mut Vec<u16>, slot: u16) -> bool {
            let at = list.iter().position(|&s| s == slot);
            at.map(|i| list.remove(i)).is_some()
        }
    }

    /// One call on the index: flows by key number, entries by slot (a call on an entry never
    /// used, or one the engine would not make, is skipped).
    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        InsertIdle(u8, bool),
        Activate(u16),
        Park(u16),
        Touch(u16),
        Rehash(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u8..12).prop_map(Op::Insert),
            2 => (0u8..12, any::<bool>()).prop_map(|(k, r)| Op::InsertIdle(k, r)),
            2 => (0u16..8).prop_map(Op::Activate),
            3 => (0u16..8).prop_map(Op::Park),
            2 => (0u16..8).prop_map(Op::Touch),
            1 => (1u32..8).prop_map(Op::Rehash),
        ]
    }

    /// Few buckets' worth of distinct hashes, so that chains form and entries leave the
    /// middle of them.
    fn hash(k: u8, seed: u32) -> u32 {
        (u32::from(k) * seed) % 5
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// Against a plain model, after every call: each flow is found in its entry (or not at
        /// all), entries are taken fresh first and then idle oldest first (inserted idle at
        /// the oldest end), both LRU orders are the model's, read through `oldest` and
        /// `newer` (held) and through which entry is taken next (idle), and `is_full` and
        /// `has_fresh` say what the model says.
        #[test]
        fn the_index_behaves_as_its_model(
            eight in any::<bool>(),
            ops in proptest::collection::vec(op(), 0..64),
        ) {
            let mut a8 = Arrays::<8>::new();
            let mut a4 = Arrays::<4>::new();
            let mut idx = if eight { a8.index() } else { a4.index() };
            let n = idx.links.len() as u16;
            let mut m = Model { flow: vec![None; usize::from(n)], ..Model::default() };
            let mut seed = 1u32;
            for op in ops {
                match op {
                    Op::Insert(k) | Op::InsertIdle(k, _) if m.slot_of(k).is_some() => {}
                    Op::Insert(k) => {
                        let want = m.take(n, true);
                        prop_assert_eq!(idx.insert(hash(k, seed), &key(k)), want);
                        if let Some(t) = want {
                            m.flow[usize::from(t.slot)] = Some(k);
                            m.held.push(t.slot);
                        }
                    }
                    Op::InsertIdle(k, reuse) => {
                        let mut asked = None;
                        let got = idx.insert_idle(hash(k, seed), &key(k), |s| {
                            asked = Some(s);
                            reuse
                        });
                        // Asked about the oldest idle entry, and only when none is fresh.
                        let ask = m.idle.first().copied().filter(|_| m.used == n);
                        let want = m.take(n, reuse);
                        prop_assert_eq!(got, want);
                        prop_assert_eq!(asked, ask);
                        if let Some(t) = want {
                            m.flow[usize::from(t.slot)] = Some(k);
                            m.idle.insert(0, t.slot);
                        }
                    }
                    Op::Activate(i) | Op::Park(i) | Op::Touch(i) if i >= m.used => {}
                    Op::Activate(s) => {
                        idx.activate(s);
                        if Model::remove(&mut m.idle, s) {
                            m.held.push(s);
                        }
                    }
                    Op::Park(s) => {
                        idx.park(s);
                        if Model::remove(&mut m.held, s) {
                            m.idle.push(s);
                        }
                    }
                    // The engine touches held entries only.
                    Op::Touch(s) if !m.held.contains(&s) => {}
                    Op::Touch(s) => {
                        idx.touch(s);
                        Model::remove(&mut m.held, s);
                        m.held.push(s);
                    }
                    Op::Rehash(new) => {
                        seed = new;
                        idx.rehash(|k| hash(k.flow.src_port() as u8, new));
                    }
                }
                for k in 0..12 {
                    prop_assert_eq!(idx.find(hash(k, seed), &key(k)), m.slot_of(k), "flow {}", k);
                }
                let mut held = Vec::new();
                let mut at = idx.oldest();
                while let Some(s) = at {
                    prop_assert!(held.len() < usize::from(n), "the held list loops");
                    held.push(s);
                    at = idx.newer(s);
                }
                prop_assert_eq!(&held, &m.held);
                prop_assert_eq!(idx.has_fresh(), m.used < n);
                prop_assert_eq!(idx.is_full(), m.used == n && m.idle.is_empty());
            }
            // The idle order, oldest first: new flows take the idle entries in it.
            let mut taken = Vec::new();
            for k in 100..100 + n as u8 {
                match idx.insert(hash(k, seed), &key(k)) {
                    Some(t) if t.reused => taken.push(t.slot),
                    Some(_) => {}
                    None => break,
                }
            }
            prop_assert_eq!(taken, m.idle);
        }
    }
}
