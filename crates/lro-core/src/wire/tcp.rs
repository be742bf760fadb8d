//! TCP (RFC 9293), its flags (RFC 3168 for ECE/CWR) and the aligned timestamp option (RFC 7323).

/// Byte ranges of the TCP header.
pub mod field {
    use super::super::Field;
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Both ports: the part of the header in the flow key.
    pub const PORTS: Field = 0..4;
    /// Sequence number.
    pub const SEQ_NUM: Field = 4..8;
    /// Acknowledgment number.
    pub const ACK_NUM: Field = 8..12;
    /// The flags word: data offset, reserved/AE bits, flags, window (what Linux's
    /// `tcp_flag_word` compares).
    pub const FLAG_WORD: Field = 12..16;
    /// Data offset (high nibble) and the reserved/AE bits.
    pub const DATA_OFF: usize = 12;
    /// Flags.
    pub const FLAGS: usize = 13;
    /// Window (unscaled).
    pub const WINDOW: Field = 14..16;
    /// Checksum.
    pub const CHECKSUM: Field = 16..18;
    /// Urgent pointer.
    pub const URGENT: Field = 18..20;
    /// The aligned timestamp option as Linux sends it (RFC 7323 appendix A): NOP, NOP, kind 8,
    /// length 10.
    pub const TS_KINDS: Field = 20..24;
    /// TSval of the aligned timestamp option.
    pub const TS_VAL: Field = 24..28;
    /// TSecr of the aligned timestamp option.
    pub const TS_ECR: Field = 28..32;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::URGENT.end;

/// Length of a header with exactly the aligned timestamp option.
pub const HEADER_LEN_TS: usize = field::TS_ECR.end;

/// The kind bytes of the aligned timestamp option: NOP, NOP, TS, length 10.
pub const TS_KINDS: [u8; 4] = [1, 1, 8, 10];

/// TCP flag bits (the flags byte, RFC 9293 section 3.1, RFC 3168).
pub mod flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push function.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field is significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer field is significant.
    pub const URG: u8 = 0x20;
    /// ECN-Echo (RFC 3168).
    pub const ECE: u8 = 0x40;
    /// Congestion Window Reduced (RFC 3168).
    pub const CWR: u8 = 0x80;
}

/// TCP options as the merge rules classify them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOptions {
    /// No options (data offset 5).
    None,
    /// Exactly the aligned `NOP, NOP, Timestamp` layout of RFC 7323 appendix A (data offset 8).
    Timestamp {
        /// TSval.
        val: u32,
        /// TSecr.
        ecr: u32,
    },
    /// Anything else (SACK blocks, other layouts).
    Other,
}

impl TcpOptions {
    /// Classifies the option bytes of a header (everything after the fixed 20 bytes).
    #[inline(always)]
    pub fn classify(options: &[u8]) -> Self {
        match options {
            [] => TcpOptions::None,
            [1, 1, 8, 10, v0, v1, v2, v3, e0, e1, e2, e3] => TcpOptions::Timestamp {
                val: u32::from_be_bytes([*v0, *v1, *v2, *v3]),
                ecr: u32::from_be_bytes([*e0, *e1, *e2, *e3]),
            },
            _ => TcpOptions::Other,
        }
    }

    /// `(TSval, TSecr)` of the aligned timestamp layout, if that is what the frame carries.
    #[inline]
    pub const fn timestamps(self) -> Option<(u32, u32)> {
        match self {
            TcpOptions::Timestamp { val, ecr } => Some((val, ecr)),
            _ => None,
        }
    }
}

/// Serial-number order (RFC 1982, as TCP compares sequence, ACK and timestamp values, RFC 9293
/// section 3.4): `a` is before `b`.
#[inline(always)]
pub const fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_classes() {
        assert_eq!(TcpOptions::classify(&[]), TcpOptions::None);
        let ts = [1, 1, 8, 10, 0, 0, 0, 5, 0, 0, 0, 6];
        assert_eq!(
            TcpOptions::classify(&ts),
            TcpOptions::Timestamp { val: 5, ecr: 6 }
        );
        assert_eq!(TcpOptions::classify(&ts[..8]), TcpOptions::Other);
        let sack = [1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(TcpOptions::classify(&sack), TcpOptions::Other);
        assert_eq!(HEADER_LEN_TS - HEADER_LEN, ts.len());
    }

    #[test]
    fn serial_order_wraps() {
        assert!(before(u32::MAX, 0));
        assert!(!before(0, u32::MAX));
        assert!(!before(5, 5));
        assert!(before(1, 1 << 30));
    }

    #[test]
    fn timestamp_layout_needs_every_kind_byte() {
        let ts = [1, 1, 8, 10, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(ts[..4], TS_KINDS);
        let opts = TcpOptions::classify(&ts);
        // Distinct bytes, so a byte taken from the wrong place shows.
        assert_eq!(
            opts,
            TcpOptions::Timestamp {
                val: 0x0102_0304,
                ecr: 0x0506_0708
            }
        );
        assert_eq!(opts.timestamps(), Some((0x0102_0304, 0x0506_0708)));
        assert_eq!(TcpOptions::None.timestamps(), None);
        assert_eq!(TcpOptions::Other.timestamps(), None);
        // Any other byte in any of the four kind positions is another layout.
        for at in 0..TS_KINDS.len() {
            let mut other = ts;
            other[at] ^= 0x40;
            assert_eq!(TcpOptions::classify(&other), TcpOptions::Other, "byte {at}");
        }
    }

    #[test]
    fn flag_bits_are_the_rfcs() {
        // The flags byte from its least significant bit: RFC 9293 section 3.1, RFC 3168
        // section 6.1 for ECE and CWR. (The merge rules compare whole flag bytes, so a wrong
        // constant would show nowhere else.)
        let bits = [
            flags::FIN,
            flags::SYN,
            flags::RST,
            flags::PSH,
            flags::ACK,
            flags::URG,
            flags::ECE,
            flags::CWR,
        ];
        for (k, bit) in bits.into_iter().enumerate() {
            assert_eq!(bit, 1 << k, "bit {k}");
        }
    }

    #[test]
    fn serial_order_at_half_the_space_is_linuxs() {
        // RFC 1982 leaves values 2^31 apart unordered; Linux `before()` (`(s32)(a - b) < 0`)
        // says each is before the other, and so does this.
        assert!(before(0, 1 << 31));
        assert!(before(1 << 31, 0));
        assert!(before(7, 7 + (1 << 31)));
        assert!(!before(0, (1 << 31) + 1));
        assert!(before(0, (1 << 31) - 1));
    }
}
