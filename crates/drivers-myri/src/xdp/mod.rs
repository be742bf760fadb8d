//! AF_XDP sockets (feature `xdp`, Linux): receive frames from a real interface into UMEM
//! chunks, hand them to the coalescer without copying, transmit through the same UMEM.
//!
//! The pieces:
//! - [`XdpProgram`]: the XSKMAP and the six-instruction redirect program
//!   (`bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`), created in-process with
//!   `bpf(2)` (no compiler, no object file) and attached through a BPF link that the program
//!   owns: the kernel detaches it on drop and when the process exits, killed or not. An
//!   interface that has a program already (anyone's) is refused.
//! - [`XdpProgram::socket`]: one AF_XDP socket per receive queue ([`XskSocket`]), each with a
//!   UMEM of its own (xdpilone maps the rings). Its halves can live on different threads:
//!   - [`XskRx`] hands out [`UmemFrame`]s in batches read from the RX ring. A frame is the
//!     coalescer's frame type (`AsRef<[u8]> + AsMut<[u8]>`, headers rewritten in place) and
//!     gives its chunk back when dropped, on any thread; the receive half posts returned chunks
//!     to the fill ring. It implements [`RxDriver`](crate::RxDriver), so
//!     [`LroDevice`](crate::phy::LroDevice) puts the coalescer between it and smoltcp.
//!   - [`XskTx`] writes frames into free chunks and the TX ring, kicks the kernel with
//!     `sendto` (copy-mode drivers such as veth send nothing without it) and recycles
//!     completions. With the `smoltcp` feature it is a transmit-only smoltcp device.
//! - [`FrameAccount`]: where every receive chunk is (kernel, held, returned, free), checked
//!   against the handle counters: frames are never lost.
//!
//! All `unsafe` of the backend is in one private module (`sys`), each block with its `SAFETY`
//! argument: the UMEM mapping is cut into chunks whose ownership is a state machine of
//! compare-and-swaps, so a chunk's bytes are reachable only through the one handle that owns
//! it, and a descriptor the kernel hands back for a chunk it does not own is refused.
//!
//! # Example
//! Needs the features `xdp` and `smoltcp`, root and an interface; the program detaches when
//! `xdp` drops.
//! ```no_run
//! use drivers_myri::phy::{LroDevice, STAGING_LEN};
//! use drivers_myri::xdp::{XdpMode, XdpProgram, XskConfig};
//!
//! let xdp = XdpProgram::attach("eth0", XdpMode::Auto)?;
//! let (rx, tx) = xdp.socket(0, &XskConfig::default())?.split();
//! let mut staging = vec![0u8; STAGING_LEN];
//! // smoltcp over AF_XDP with the coalescer in front: hand `dev` to `Interface::poll`.
//! let mut dev: LroDevice<'_, _, _> = LroDevice::new(rx, tx, &mut staging);
//! # let _ = &mut dev;
//! # Ok::<(), drivers_myri::xdp::XdpError>(())
//! ```
//!
//! # What this kernel needs
//! - Root (`CAP_NET_ADMIN` and `CAP_BPF`), `CONFIG_XDP_SOCKETS` and `CONFIG_BPF_SYSCALL`;
//!   otherwise [`XdpError::Permission`] or [`XdpError::Unsupported`].
//! - Linux 5.9 or later, for XDP through a BPF link (an older kernel answers `EINVAL` to the
//!   attach).
//! - Frames no longer than a chunk less the kernel's 256 bytes of headroom (1792 bytes with
//!   the default [`XskConfig::frame_size`]): turn off TSO/GSO (and GRO on a forwarding hop) on
//!   the sender, or raise [`XskConfig::frame_size`].
//! - AF_XDP carries no checksum state: the coalescer verifies checksums in software
//!   ([`RxChecksum::None`](lro_core::RxChecksum)), so a sender's checksum offload must be off
//!   (`ethtool -K <veth> tx off`): on veth, an offloading sender's frames carry only the
//!   pseudo-header sum and every stack that verifies drops them.
//! - Every frame of the queue goes to the socket, ARP included: the stack above answers ARP
//!   (smoltcp does), or the peer gets a permanent neighbour entry.
//!
//! # Builds with overflow checks
//! xdpilone 1.3, which maps the rings, adds to their 32-bit producer and consumer indices
//! without wrapping, so with overflow checks on (debug builds) a ring panics once 2^32 frames
//! have passed through it: minutes at line rate. This workspace turns the checks off for that
//! crate in its `Cargo.toml`; a program built on this backend should do the same:
//! ```toml
//! [profile.dev.package.xdpilone]
//! overflow-checks = false
//! ```

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;

mod program;
mod socket;
mod sys;
mod umem;

use std::fmt;
use std::io;

pub use program::{attached_program, AttachedProgram, XdpMode, XdpProgram, PROGRAM_NAME};
#[cfg(feature = "smoltcp")]
pub use socket::NoRx;
pub use socket::{
    BindMode, KernelStats, RxStats, TxBuffer, TxError, TxStats, XskConfig, XskRx, XskSocket, XskTx,
};
pub use umem::{FrameAccount, TxAccount, UmemFrame};

/// Installs a SIGINT and SIGTERM handler that only sets the returned flag: a poll loop checks
/// it and returns, and the [`XdpProgram`] detaches as it drops. The handler then restores the
/// default action, so a second Ctrl-C ends the process at once. (A process killed by a signal
/// loses its program all the same: the kernel detaches it as the process's link closes. The
/// handler lets the loop finish its work and report first.)
///
/// # Errors
/// The `sigaction(2)` failure.
pub fn stop_on_signals() -> io::Result<&'static std::sync::atomic::AtomicBool> {
    sys::install_stop_handler()
}

/// Why the AF_XDP backend could not do something.
#[derive(Debug)]
#[non_exhaustive]
pub enum XdpError {
    /// Not allowed: BPF maps and programs, XDP attachment and AF_XDP sockets need
    /// `CAP_NET_ADMIN` and `CAP_BPF` (run as root).
    Permission {
        /// The step that was refused.
        op: &'static str,
    },
    /// The kernel lacks what the step needs (`CONFIG_BPF_SYSCALL`, `CONFIG_XDP_SOCKETS`).
    Unsupported {
        /// The step.
        op: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// No interface of that name in this network namespace.
    NoSuchInterface(String),
    /// The interface's driver does not run XDP in the mode asked for.
    ModeUnsupported {
        /// The interface.
        ifname: String,
        /// The mode asked for.
        mode: XdpMode,
    },
    /// The interface has a program already: one held by a BPF link (ours or another's; it goes
    /// when the process holding the link closes it or exits), or one attached over netlink,
    /// which stays until someone detaches it (`ip link set dev IF xdp off`, or `xdpgeneric off`
    /// for a generic one).
    Busy {
        /// The interface.
        ifname: String,
        /// The attached program's id.
        prog_id: u32,
        /// Its name, when it could be read.
        name: Option<String>,
        /// Where it runs.
        mode: XdpMode,
        /// The id of the BPF link that holds it; `None` for a program attached over netlink
        /// (or when the links could not be listed).
        link: Option<u32>,
    },
    /// The queue has no slot in the XSKMAP.
    NoSuchQueue {
        /// The queue asked for.
        queue: u32,
        /// The map's slots.
        queues: u32,
    },
    /// The verifier refused the program.
    Verifier {
        /// The verifier's log.
        log: String,
        /// The kernel's answer.
        source: io::Error,
    },
    /// A netlink failure that carries no errno.
    Netlink {
        /// The step.
        op: &'static str,
        /// What rtnetlink said.
        message: String,
    },
    /// Any other operating-system failure of a named step.
    Os {
        /// The step.
        op: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
}

impl XdpError {
    pub(crate) fn os(op: &'static str, source: io::Error) -> Self {
        Self::Os { op, source }
    }
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Permission { op } => write!(
                f,
                "{op}: permission denied (AF_XDP needs CAP_NET_ADMIN and CAP_BPF: run as root)"
            ),
            Self::Unsupported { op, source } => write!(
                f,
                "{op}: not supported by this kernel ({source}; needs CONFIG_BPF_SYSCALL and CONFIG_XDP_SOCKETS)"
            ),
            Self::NoSuchInterface(name) => {
                write!(f, "no network interface {name:?} in this network namespace")
            }
            Self::ModeUnsupported { ifname, mode } => {
                write!(f, "{ifname}: the driver does not run XDP in {mode} mode")
            }
            Self::Busy {
                ifname,
                prog_id,
                name,
                mode,
                link,
            } => {
                write!(f, "{ifname}: XDP program {prog_id}")?;
                if let Some(name) = name {
                    write!(f, " ({name})")?;
                }
                match link {
                    Some(id) => write!(
                        f,
                        " is attached in {mode} mode through BPF link {id}; it is detached when the process holding the link closes it or exits"
                    ),
                    None => {
                        // `xdp off` detaches the native program of a driver that has native
                        // XDP; a generic one needs its mode named.
                        let off = match mode {
                            XdpMode::Generic => "xdpgeneric",
                            _ => "xdp",
                        };
                        write!(
                            f,
                            " is attached in {mode} mode over netlink; if it is not in use, detach it with `ip link set dev {ifname} {off} off`"
                        )
                    }
                }
            }
            Self::NoSuchQueue { queue, queues } => {
                write!(f, "queue {queue}: the XSKMAP has {queues} slots")
            }
            Self::Verifier { log, source } => {
                write!(f, "the verifier refused the redirect program ({source}): {log}")
            }
            Self::Netlink { op, message } => write!(f, "{op}: {message}"),
            Self::Os { op, source } => write!(f, "{op}: {source}"),
        }
    }
}

impl std::error::Error for XdpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Unsupported { source, .. }
            | Self::Verifier { source, .. }
            | Self::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}
