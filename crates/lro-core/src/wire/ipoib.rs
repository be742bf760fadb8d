//! The IPoIB encapsulation header (RFC 4391 section 6): a 2-byte EtherType and 2 reserved bytes
//! in front of every IP-over-InfiniBand packet.

/// Byte ranges of the IPoIB encapsulation header.
pub mod field {
    use super::super::Field;
    /// EtherType of the payload (`0x0800` IPv4, `0x86dd` IPv6).
    pub const ETHERTYPE: Field = 0..2;
    /// Reserved, zero.
    pub const RESERVED: Field = 2..4;
}

/// Length of the IPoIB encapsulation header.
pub const HEADER_LEN: usize = field::RESERVED.end;
