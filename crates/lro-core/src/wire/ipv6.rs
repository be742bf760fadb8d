//! IPv6 (RFC 8200) and the extension headers the engine walks.

/// Byte ranges of the fixed IPv6 header.
pub mod field {
    use super::super::Field;
    /// Version (4 bits), traffic class (8 bits), flow label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload length (everything after the fixed header).
    pub const LENGTH: Field = 4..6;
    /// Next header.
    pub const NXT_HDR: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC: Field = 8..24;
    /// Destination address.
    pub const DST: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST.end;

/// Addresses: the part of the header in the TCP pseudo header.
pub const ADDRS: super::Field = field::SRC.start..field::DST.end;

/// Most extension headers the parser walks before giving up (Malformed).
pub const MAX_EXT: usize = 8;

/// Byte ranges of a generic extension header (Hop-by-Hop, Routing, Destination options).
pub mod ext {
    /// Next header.
    pub const NXT_HDR: usize = 0;
    /// Length in 8-byte units, not counting the first 8 bytes.
    pub const LEN: usize = 1;
    /// Segments left, in a Routing header (RFC 8200 section 4.4): nodes still to visit.
    pub const SEGMENTS_LEFT: usize = 3;
}

/// Traffic class of the first header word.
#[inline(always)]
pub const fn traffic_class(first_word: u32) -> u8 {
    (first_word >> 20) as u8
}

/// Flow label of the first header word.
#[inline(always)]
pub const fn flow_label(first_word: u32) -> u32 {
    first_word & 0x000f_ffff
}
