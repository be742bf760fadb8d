//! IPoIB's two transport modes and their MTUs.
//!
//! | mode | IB transport | IPoIB MTU | receive buffer |
//! | --- | --- | --- | --- |
//! | datagram (RFC 4391) | unreliable datagram (UD) | the IB path MTU minus the 4-byte header: 2044 (2K IB MTU) or 4092 (4K) | 40 bytes of GRH space + 4 + MTU |
//! | connected (RFC 4755) | reliable connected (RC) | up to 65520 (Linux `IPOIB_CM_MTU`; the RFC allows more) | 4 + MTU |
//!
//! A UD receive buffer starts with 40 bytes the HCA reserves for the packet's Global Route
//! Header (written when the packet carried one), so the IPoIB packet starts at byte 40 of the
//! buffer; a completion's byte count includes them. Connected mode delivers the IPoIB packet at
//! the start of the buffer.
//!
//! ```
//! use drivers_ipoib::Mode;
//!
//! assert_eq!(Mode::DATAGRAM_2K.mtu(), 2044);
//! assert_eq!(Mode::DATAGRAM_4K.rx_buffer_len(), 40 + 4 + 4092);
//! let cm = Mode::connected(65520)?;
//! assert_eq!((cm.max_frame_len(), cm.grh_len()), (65524, 0));
//! assert!(Mode::connected(65521).is_err());
//! # Ok::<(), drivers_ipoib::wire::Error>(())
//! ```

use crate::wire::encap::{self, EtherType};
use crate::wire::Error;

/// Bytes a UD receive buffer reserves for the Global Route Header.
pub const GRH_LEN: usize = 40;

/// The largest connected-mode MTU Linux configures (`IPOIB_CM_MTU`, 64 KiB minus 16).
pub const CONNECTED_MAX_MTU: u32 = 65520;

/// The smallest MTU accepted (IPv4's minimum, RFC 791).
pub const MIN_MTU: u32 = 68;

/// An InfiniBand path MTU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IbMtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes.
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes.
    Mtu4096,
}

impl IbMtu {
    /// The MTU in bytes.
    pub const fn bytes(self) -> u32 {
        match self {
            IbMtu::Mtu256 => 256,
            IbMtu::Mtu512 => 512,
            IbMtu::Mtu1024 => 1024,
            IbMtu::Mtu2048 => 2048,
            IbMtu::Mtu4096 => 4096,
        }
    }
}

/// The transport mode with its IPoIB MTU (bytes of IP packet per IPoIB packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Mode {
    connected: bool,
    mtu: u32,
}

impl Mode {
    /// Datagram mode over a 2K IB MTU: IPoIB MTU 2044.
    pub const DATAGRAM_2K: Mode = Mode::datagram(IbMtu::Mtu2048);
    /// Datagram mode over a 4K IB MTU: IPoIB MTU 4092.
    pub const DATAGRAM_4K: Mode = Mode::datagram(IbMtu::Mtu4096);
    /// Connected mode at Linux's largest MTU, 65520.
    pub const CONNECTED_MAX: Mode = Mode {
        connected: true,
        mtu: CONNECTED_MAX_MTU,
    };

    /// Datagram mode over an IB path MTU.
    pub const fn datagram(ib_mtu: IbMtu) -> Mode {
        Mode {
            connected: false,
            mtu: ib_mtu.bytes() - encap::HEADER_LEN as u32,
        }
    }

    /// Connected mode with an IPoIB MTU of `mtu` bytes.
    ///
    /// # Errors
    /// [`Error::Mtu`] when `mtu` is below [`MIN_MTU`] or above [`CONNECTED_MAX_MTU`].
    pub const fn connected(mtu: u32) -> Result<Mode, Error> {
        if mtu < MIN_MTU || mtu > CONNECTED_MAX_MTU {
            return Err(Error::Mtu {
                mtu,
                min: MIN_MTU,
                max: CONNECTED_MAX_MTU,
            });
        }
        Ok(Mode {
            connected: true,
            mtu,
        })
    }

    /// Connected (RC) rather than datagram (UD)?
    pub const fn is_connected(self) -> bool {
        self.connected
    }

    /// The IPoIB MTU: the largest IP packet.
    pub const fn mtu(self) -> usize {
        self.mtu as usize
    }

    /// The largest IPoIB packet: the encapsulation header and an MTU-sized IP packet.
    pub const fn max_frame_len(self) -> usize {
        self.mtu() + encap::HEADER_LEN
    }

    /// Bytes in front of the IPoIB packet in a receive buffer: [`GRH_LEN`] in datagram mode,
    /// 0 in connected mode.
    pub const fn grh_len(self) -> usize {
        if self.connected {
            0
        } else {
            GRH_LEN
        }
    }

    /// The receive buffer a full-sized packet needs.
    pub const fn rx_buffer_len(self) -> usize {
        self.grh_len() + self.max_frame_len()
    }

    /// Checks an IPoIB packet against the mode: at least the encapsulation header, at most
    /// [`Mode::max_frame_len`]. Returns its EtherType.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::TooLong`].
    pub fn check_frame(self, frame: &[u8]) -> Result<EtherType, Error> {
        let p = encap::Packet::new_checked(frame)?;
        if frame.len() > self.max_frame_len() {
            return Err(Error::TooLong {
                len: frame.len(),
                max: self.max_frame_len(),
            });
        }
        Ok(p.ether_type())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::ToString;

    use super::*;

    #[test]
    fn datagram_mtus() {
        assert_eq!(Mode::DATAGRAM_2K.mtu(), 2044);
        assert_eq!(Mode::DATAGRAM_4K.mtu(), 4092);
        assert_eq!(Mode::datagram(IbMtu::Mtu256).mtu(), 252);
        assert_eq!(Mode::DATAGRAM_2K.grh_len(), 40);
        assert!(!Mode::DATAGRAM_4K.is_connected());
    }

    #[test]
    fn connected_bounds() {
        assert_eq!(Mode::connected(65520), Ok(Mode::CONNECTED_MAX));
        let refused = |mtu| {
            Err(Error::Mtu {
                mtu,
                min: 68,
                max: 65520,
            })
        };
        assert_eq!(Mode::connected(65521), refused(65521));
        assert_eq!(Mode::connected(67), refused(67));
        assert_eq!(
            Mode::connected(67).unwrap_err().to_string(),
            "an MTU of 67 bytes: 68 to 65520 allowed"
        );
        // Both ends are modes.
        assert_eq!(
            Mode::connected(MIN_MTU).map(Mode::mtu),
            Ok(MIN_MTU as usize)
        );
        assert!(Mode::connected(MIN_MTU - 1).is_err());
        assert_eq!(Mode::connected(2044).unwrap().rx_buffer_len(), 2048);
    }

    #[test]
    fn frames_checked() {
        let m = Mode::DATAGRAM_2K;
        let mut f = [0u8; 2049];
        f[0] = 0x08;
        assert_eq!(m.check_frame(&f[..2048]), Ok(EtherType::IPV4));
        assert_eq!(
            m.check_frame(&f),
            Err(Error::TooLong {
                len: 2049,
                max: 2048
            })
        );
        assert!(m.check_frame(&f[..3]).is_err());
    }
}
