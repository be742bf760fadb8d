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
    /// Where the options of a Hop-by-Hop or Destination Options header start.
    pub const OPTIONS: usize = 2;
}

/// Option types of Hop-by-Hop and Destination Options headers (type, length, data; RFC 8200
/// section 4.2).
pub mod option {
    /// One byte of padding, without a length byte.
    pub const PAD1: u8 = 0;
    /// Mobile IPv6's Home Address option (RFC 6275 section 6.3): the sender's home address,
    /// which upper-layer checksums use as the source.
    pub const HOME_ADDRESS: u8 = 0xc9;
}

/// Whether the options `opts` of a Destination Options header hold a Home Address option:
/// options are walked by their lengths until one is, or until one's length byte is missing.
#[inline]
pub fn has_home_address(opts: &[u8]) -> bool {
    let mut at = 0;
    while let Some(&kind) = opts.get(at) {
        match kind {
            option::HOME_ADDRESS => return true,
            option::PAD1 => at += 1,
            _ => match opts.get(at + 1) {
                Some(&len) => at += 2 + usize::from(len),
                None => return false,
            },
        }
    }
    false
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_address_option_found_by_walking_option_lengths() {
        const HAO: u8 = option::HOME_ADDRESS;
        let addr = [0x20; 16];
        let hao = |pre: &[u8]| {
            let mut v = pre.to_vec();
            v.extend([HAO, 16]);
            v.extend(addr);
            v
        };
        // After PadN (the RFC's alignment), after Pad1s, first. An odd number of Pad1s: a
        // Pad1 read as a type with a length byte would swallow the Home Address type. PadNs of
        // lengths 0, 2 and 3: the walk skips 2 + length bytes (not 2 * length), the length
        // read from the byte after the type.
        assert!(has_home_address(&hao(&[1, 0])));
        assert!(has_home_address(&hao(&[1, 2, 0, 0])));
        assert!(has_home_address(&hao(&[1, 3, 0, 0, 0])));
        assert!(has_home_address(&hao(&[0, 0, 0, 0])));
        assert!(has_home_address(&hao(&[0, 0, 0])));
        assert!(has_home_address(&hao(&[])));
        // Padding only; another option whose data holds the type byte; a PadN whose length
        // runs past the options (nothing more to read).
        assert!(!has_home_address(&[1, 4, 0, 0, 0, 0]));
        assert!(!has_home_address(&[0x1e, 2, HAO, 16, 1, 0]));
        assert!(!has_home_address(&[1, 1, HAO]));
        assert!(!has_home_address(&[1, 2, 0, HAO]));
        assert!(!has_home_address(&[1, 200, HAO, 16]));
        // A last option without its length byte.
        assert!(!has_home_address(&[0, 0, 0, 0, 0, 7]));
        assert!(!has_home_address(&[]));
    }
}
