//! Ethernet II (IEEE 802.3 clause 3.2.6) and in-line VLAN tags (IEEE 802.1Q clause 9.6).

use super::Field;

/// Byte ranges of the Ethernet II header.
pub mod field {
    use super::Field;
    /// Destination MAC address.
    pub const DST: Field = 0..6;
    /// Source MAC address.
    pub const SRC: Field = 6..12;
    /// EtherType (or the TPID of a first VLAN tag).
    pub const ETHERTYPE: Field = 12..14;
}

/// Byte ranges of one VLAN tag, from its TPID (which sits where an EtherType would).
pub mod vlan {
    use super::Field;
    /// Tag protocol identifier (`0x8100` or `0x88a8`).
    pub const TPID: Field = 0..2;
    /// Tag control information: PCP, DEI, VLAN id.
    pub const TCI: Field = 2..4;
    /// The EtherType after the tag (or the next tag's TPID).
    pub const ETHERTYPE: Field = 4..6;
    /// Bytes a tag adds to the header.
    pub const LEN: usize = TCI.end;
}

/// Length of an Ethernet II header without tags.
pub const HEADER_LEN: usize = field::ETHERTYPE.end;

/// Most in-line VLAN tags the engine walks (802.1ad outer + 802.1Q inner).
pub const MAX_TAGS: usize = 2;

/// Length of the MAC addresses: the part of the header the flow key holds.
pub const ADDRS: Field = field::DST.start..field::SRC.end;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_derive_from_the_table() {
        assert_eq!(HEADER_LEN, 14);
        assert_eq!(vlan::LEN, 4);
        assert_eq!(ADDRS, 0..12);
        let _: Field = field::DST;
    }
}
