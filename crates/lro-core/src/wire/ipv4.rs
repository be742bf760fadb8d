//! IPv4 (RFC 791).

/// Byte ranges of the IPv4 header.
pub mod field {
    use super::super::Field;
    /// Version (high nibble) and header length in 32-bit words (IHL, low nibble).
    pub const VER_IHL: usize = 0;
    /// Type of service: DSCP and ECN (RFC 2474, RFC 3168).
    pub const TOS: usize = 1;
    /// Total length of the datagram, header included.
    pub const LENGTH: Field = 2..4;
    /// Identification.
    pub const IDENT: Field = 4..6;
    /// Flags (reserved, DF, MF) and fragment offset.
    pub const FLG_OFF: Field = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol of the payload.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source address.
    pub const SRC: Field = 12..16;
    /// Destination address.
    pub const DST: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST.end;

/// The first byte of a header without options: version 4, IHL 5 (Linux `inet_gro_receive`
/// merges nothing else).
pub const VER_IHL_PLAIN: u8 = 0x45;

/// Don't-fragment bit of the flags field.
pub const DF: u16 = 0x4000;

/// Every bit of the flags field but DF: MF, the offset and the reserved bit. Any of them makes
/// a frame a fragment to the engine (Linux: any `frag_off` bit but DF flushes).
pub const NOT_DF: u16 = !DF;

/// Addresses: the part of the header in the TCP pseudo header.
pub const ADDRS: super::Field = field::SRC.start..field::DST.end;
