//! Flow identity and the flow table's index.
//!
//! - [`FlowKey`]: what must be equal for two frames to be one flow (link, IP, ports), with a
//!   tunnel's part ([`TunnelKey`](crate::encap::TunnelKey)) kept beside it by engines that
//!   decapsulate.
//! - [`FlowHasher`]: the seeded hash that picks a flow's bucket.
//! - The index (private): buckets, LRU order and free slots over the engine's storage.

mod key;
pub(crate) mod table;

pub(crate) use key::addr_of;
pub use key::{FlowHasher, FlowKey};

mod identity {
    use super::{FlowHasher, FlowKey};
    use crate::encap::TunnelSlot;

    /// A flow's whole identity as the table stores it: the flow key and the tunnel part (zero bytes
    /// for an engine without encapsulation).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct Key<T> {
        pub(crate) flow: FlowKey,
        pub(crate) tunnel: T,
    }

    impl<T: TunnelSlot> Key<T> {
        /// The empty key (no parsed frame has it).
        pub(crate) const EMPTY: Key<T> = Key {
            flow: FlowKey::EMPTY,
            tunnel: T::EMPTY,
        };

        /// The key's hash under `hasher`.
        #[inline(always)]
        pub(crate) fn hash(&self, hasher: &FlowHasher) -> u32 {
            hasher.hash_with(&self.flow, &self.tunnel)
        }
    }
}

pub(crate) use identity::Key;
