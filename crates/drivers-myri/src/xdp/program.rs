//! The XSKMAP, the redirect program and their attachment to an interface over netlink.
//!
//! The program is `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`: a frame
//! goes to the AF_XDP socket registered for its receive queue, or, when that queue has none, on
//! to the kernel's stack. It is built in-process (six instructions, no compiler, no object
//! file) and attached with `rtnetlink` (`IFLA_XDP`).
//!
//! A program attached over netlink outlives the process that attached it. So the program's
//! name carries the attaching process id (`lro_xsk_<pid>`): a later [`XdpProgram::attach`]
//! replaces a program of ours whose process is gone (atomically, `XDP_FLAGS_REPLACE`), and
//! refuses ([`XdpError::Busy`]) one whose process is alive or a program that is not ours.
//! Detaching (on [`XdpProgram::detach`] or drop) uses `XDP_FLAGS_REPLACE` with our program as
//! the expected one, so it never removes a program someone attached after us.

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;
use std::{format, vec};

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached};
use rtnetlink::{Handle, LinkUnspec};

use super::{sys, XdpError};

/// Prefix of our programs' names; the attaching process id follows.
pub const PROGRAM_PREFIX: &str = "lro_xsk_";

const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_FLAGS_REPLACE: u32 = 1 << 4;

/// Where the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum XdpMode {
    /// Native if the driver supports it, generic otherwise.
    #[default]
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`): veth, most 10G+ NICs. Veth has no zero-copy AF_XDP,
    /// so frames are copied into the UMEM once.
    Native,
    /// In the kernel's generic path (`XDP_FLAGS_SKB_MODE`): any interface, after the skb is built.
    Generic,
}

impl XdpMode {
    fn flags(self) -> u32 {
        match self {
            Self::Generic => XDP_FLAGS_SKB_MODE,
            Self::Native | Self::Auto => XDP_FLAGS_DRV_MODE,
        }
    }
}

impl std::fmt::Display for XdpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Native => "native",
            Self::Generic => "generic",
        })
    }
}

/// A program found attached to an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedProgram {
    /// The kernel's program id.
    pub prog_id: u32,
    /// Where it runs.
    pub mode: XdpMode,
    /// Its name, when it could be read (needs `CAP_SYS_ADMIN`/`CAP_BPF`).
    pub name: Option<String>,
    /// The process that attached it, for one of ours (`lro_xsk_<pid>`).
    pub owner: Option<u32>,
}

/// What the kernel says about an interface.
#[derive(Debug, Clone)]
pub(crate) struct LinkInfo {
    pub(crate) index: u32,
    pub(crate) rx_queues: u32,
    pub(crate) xdp: Option<(u32, XdpMode)>,
}

/// Runs `f` on a helper thread in the network namespace `ns`: netlink and AF_XDP sockets
/// belong to the namespace of the thread that creates them, whichever thread calls us.
pub(crate) fn in_netns<T: Send>(
    ns: &File,
    f: impl FnOnce() -> Result<T, XdpError> + Send,
) -> Result<T, XdpError> {
    std::thread::scope(|s| {
        s.spawn(|| {
            // The helper starts in its creator's namespace: usually the one asked for already.
            if !sys::in_netns(ns) {
                sys::enter_netns(ns).map_err(|e| match e.raw_os_error() {
                    Some(libc::EPERM) => XdpError::Permission {
                        op: "enter the network namespace",
                    },
                    _ => XdpError::os("enter the network namespace", e),
                })?;
            }
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(XdpError::os("helper thread", io::Error::other("panicked"))))
    })
}

/// Runs a netlink conversation to completion, in the namespace `ns`, on a helper thread with a
/// runtime of its own (so callers inside an async runtime are fine too).
fn netlink<T: Send, Fut>(
    ns: &File,
    op: &'static str,
    f: impl FnOnce(Handle) -> Fut + Send,
) -> Result<T, XdpError>
where
    Fut: Future<Output = Result<T, XdpError>>,
{
    in_netns(ns, || netlink_here(op, f))
}

fn netlink_here<T, Fut>(op: &'static str, f: impl FnOnce(Handle) -> Fut) -> Result<T, XdpError>
where
    Fut: Future<Output = Result<T, XdpError>>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(|e| XdpError::os(op, e))?;
    rt.block_on(async {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(|e| XdpError::os(op, e))?;
        let task = tokio::spawn(conn);
        let out = f(handle).await;
        task.abort();
        out
    })
}

/// The errno of a netlink error, if it is one.
fn nl_errno(e: &rtnetlink::Error) -> Option<i32> {
    match e {
        rtnetlink::Error::NetlinkError(m) => m.code.map(|c| -c.get()),
        _ => None,
    }
}

fn nl_error(op: &'static str, ifname: &str, e: rtnetlink::Error) -> XdpError {
    match nl_errno(&e) {
        Some(libc::ENODEV) => XdpError::NoSuchInterface(ifname.to_owned()),
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Permission { op },
        Some(errno) => XdpError::os(op, io::Error::from_raw_os_error(errno)),
        None => XdpError::Netlink {
            op,
            message: e.to_string(),
        },
    }
}

fn parse_link(msg: &LinkMessage) -> LinkInfo {
    let mut info = LinkInfo {
        index: msg.header.index,
        rx_queues: 1,
        xdp: None,
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::NumRxQueues(n) => info.rx_queues = (*n).max(1),
            LinkAttribute::Xdp(xdp) => {
                let mut id = 0;
                let mut mode = XdpMode::Native;
                for x in xdp {
                    match x {
                        LinkXdp::ProgId(p) => id = *p,
                        LinkXdp::Attached(XdpAttached::SocketBuffer) => mode = XdpMode::Generic,
                        _ => {}
                    }
                }
                if id != 0 {
                    info.xdp = Some((id, mode));
                }
            }
            _ => {}
        }
    }
    info
}

/// Looks up `ifname` in the namespace `ns` (no privileges needed).
pub(crate) fn link_info(ns: &File, ifname: &str) -> Result<LinkInfo, XdpError> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains(['/', ' ', '\0']) {
        return Err(XdpError::NoSuchInterface(ifname.to_owned()));
    }
    netlink(ns, "look up the interface", |handle| async move {
        let mut links = handle.link().get().match_name(ifname.to_owned()).execute();
        match links.try_next().await {
            Ok(Some(msg)) => Ok(parse_link(&msg)),
            Ok(None) => Err(XdpError::NoSuchInterface(ifname.to_owned())),
            Err(e) => Err(nl_error("look up the interface", ifname, e)),
        }
    })
}

/// Sets the interface's XDP program: `fd` (-1 detaches) with `flags`, replacing `expected`
/// only if given.
fn set_xdp(
    ns: &File,
    op: &'static str,
    ifname: &str,
    index: u32,
    fd: i32,
    flags: u32,
    expected: Option<BorrowedFd<'_>>,
) -> Result<(), XdpError> {
    use std::os::fd::AsRawFd;
    let mut xdp = vec![LinkXdp::Fd(fd), LinkXdp::Flags(flags)];
    if let Some(old) = expected {
        xdp.push(LinkXdp::ExpectedFd(old.as_raw_fd() as u32));
    }
    let msg = LinkUnspec::new_with_index(index)
        .append_extra_attribute(LinkAttribute::Xdp(xdp))
        .build();
    netlink(ns, op, |handle| async move {
        handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(|e| nl_error(op, ifname, e))
    })
}

/// The program attached to `ifname` in the calling thread's namespace, if any.
///
/// # Errors
/// [`XdpError::NoSuchInterface`], or a netlink failure.
pub fn attached_program(ifname: &str) -> Result<Option<AttachedProgram>, XdpError> {
    let ns = sys::current_netns().map_err(|e| XdpError::os("open the network namespace", e))?;
    let link = link_info(&ns, ifname)?;
    let Some((prog_id, mode)) = link.xdp else {
        return Ok(None);
    };
    let name = sys::prog_fd_by_id(prog_id)
        .and_then(|fd| sys::prog_info(fd.as_fd()))
        .ok()
        .map(|i| i.name);
    let owner = name.as_deref().and_then(owner_of);
    Ok(Some(AttachedProgram {
        prog_id,
        mode,
        name,
        owner,
    }))
}

/// The process id in one of our program names.
fn owner_of(name: &str) -> Option<u32> {
    name.strip_prefix(PROGRAM_PREFIX)?.parse().ok()
}

/// A program we found attached and replaced: its attaching process had died.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleProgram {
    /// Its program id.
    pub prog_id: u32,
    /// Its name.
    pub name: String,
    /// The dead process that attached it.
    pub owner: u32,
}

/// The XSKMAP and the redirect program, attached to one interface: what AF_XDP sockets
/// ([`XdpProgram::socket`](Self::socket)) receive through. Detached on drop.
///
/// Attaching, detaching and creating sockets need `CAP_NET_ADMIN` and `CAP_BPF` (root); the
/// interface is looked up in the network namespace of the calling thread, which the program
/// remembers: its sockets and its detach happen there, from whichever thread.
#[derive(Debug)]
pub struct XdpProgram {
    ifname: String,
    ifindex: u32,
    queues: u32,
    rx_queues: u32,
    mode: XdpMode,
    prog: OwnedFd,
    map: OwnedFd,
    prog_id: u32,
    netns: File,
    replaced: Option<StaleProgram>,
    attached: bool,
}

impl XdpProgram {
    /// Attaches to `ifname` with one XSKMAP slot per receive queue of the interface.
    ///
    /// # Errors
    /// [`XdpError::NoSuchInterface`], [`XdpError::Permission`] without root,
    /// [`XdpError::Unsupported`] without BPF in the kernel, [`XdpError::ModeUnsupported`] when
    /// the driver lacks the mode asked for, [`XdpError::Busy`] when another live program is
    /// attached.
    pub fn attach(ifname: &str, mode: XdpMode) -> Result<Self, XdpError> {
        Self::attach_with_queues(ifname, 0, mode)
    }

    /// As [`XdpProgram::attach`] with `queues` XSKMAP slots (0: one per receive queue).
    ///
    /// # Errors
    /// As [`XdpProgram::attach`].
    pub fn attach_with_queues(ifname: &str, queues: u32, mode: XdpMode) -> Result<Self, XdpError> {
        let netns =
            sys::current_netns().map_err(|e| XdpError::os("open the network namespace", e))?;
        let link = link_info(&netns, ifname)?;
        let queues = if queues == 0 { link.rx_queues } else { queues };

        // A program already attached: ours from a dead process is replaced, anything else
        // refused.
        let mut stale: Option<(OwnedFd, StaleProgram, XdpMode)> = None;
        if let Some((prog_id, old_mode)) = link.xdp {
            let fd = sys::prog_fd_by_id(prog_id)
                .map_err(|e| bpf_error("read the attached program", e))?;
            let info = sys::prog_info(fd.as_fd())
                .map_err(|e| bpf_error("read the attached program", e))?;
            match owner_of(&info.name) {
                Some(pid) if pid != std::process::id() && !sys::process_alive(pid) => {
                    let s = StaleProgram {
                        prog_id,
                        name: info.name,
                        owner: pid,
                    };
                    stale = Some((fd, s, old_mode));
                }
                owner => {
                    return Err(XdpError::Busy {
                        ifname: ifname.to_owned(),
                        prog_id,
                        name: info.name,
                        owner,
                    })
                }
            }
        }

        let map = sys::create_xskmap(queues, "lro_xsks").map_err(xskmap_error)?;
        let name = format!("{PROGRAM_PREFIX}{}", std::process::id());
        let prog = sys::load_redirect_program(map.as_fd(), &name).map_err(|(e, log)| {
            match bpf_error("load the redirect program", e) {
                XdpError::Os { source, .. } => XdpError::Verifier { log, source },
                other => other,
            }
        })?;
        let prog_id = sys::prog_info(prog.as_fd())
            .map_err(|e| bpf_error("read the loaded program", e))?
            .id;

        let candidates: &[XdpMode] = match mode {
            XdpMode::Auto => &[XdpMode::Native, XdpMode::Generic],
            XdpMode::Native => &[XdpMode::Native],
            XdpMode::Generic => &[XdpMode::Generic],
        };
        let mut replaced = None;
        let mut attached_mode = None;
        if let Some((old_fd, info, old_mode)) = stale {
            if candidates.contains(&old_mode) {
                // Atomic swap: the interface never goes without a program in between.
                set_xdp(
                    &netns,
                    "replace the stale XDP program",
                    ifname,
                    link.index,
                    std::os::fd::AsRawFd::as_raw_fd(&prog),
                    old_mode.flags() | XDP_FLAGS_REPLACE,
                    Some(old_fd.as_fd()),
                )?;
                attached_mode = Some(old_mode);
            } else {
                // Another mode: the stale program goes first (native and generic exclude
                // each other).
                set_xdp(
                    &netns,
                    "detach the stale XDP program",
                    ifname,
                    link.index,
                    -1,
                    old_mode.flags() | XDP_FLAGS_REPLACE,
                    Some(old_fd.as_fd()),
                )?;
            }
            replaced = Some(info);
        }
        if attached_mode.is_none() {
            let mut last = None;
            for &m in candidates {
                match set_xdp(
                    &netns,
                    "attach the XDP program",
                    ifname,
                    link.index,
                    std::os::fd::AsRawFd::as_raw_fd(&prog),
                    m.flags() | XDP_FLAGS_UPDATE_IF_NOEXIST,
                    None,
                ) {
                    Ok(()) => {
                        attached_mode = Some(m);
                        break;
                    }
                    Err(e) => last = Some(e),
                }
            }
            if attached_mode.is_none() {
                return Err(match last {
                    Some(XdpError::Os { source, .. })
                        if source.raw_os_error() == Some(libc::EOPNOTSUPP) =>
                    {
                        XdpError::ModeUnsupported {
                            ifname: ifname.to_owned(),
                            mode,
                        }
                    }
                    Some(XdpError::Os { source, .. })
                        if matches!(source.raw_os_error(), Some(libc::EBUSY | libc::EEXIST)) =>
                    {
                        XdpError::Busy {
                            ifname: ifname.to_owned(),
                            prog_id: 0,
                            name: String::from("(attached meanwhile)"),
                            owner: None,
                        }
                    }
                    Some(e) => e,
                    None => XdpError::ModeUnsupported {
                        ifname: ifname.to_owned(),
                        mode,
                    },
                });
            }
        }
        Ok(Self {
            ifname: ifname.to_owned(),
            ifindex: link.index,
            queues,
            rx_queues: link.rx_queues,
            mode: attached_mode.unwrap_or(mode),
            prog,
            map,
            prog_id,
            netns,
            replaced,
            attached: true,
        })
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// XSKMAP slots: queues `0..queues()` can have a socket.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The interface's receive queues.
    pub fn rx_queues(&self) -> u32 {
        self.rx_queues
    }

    /// Where the program runs (native or generic, never `Auto`).
    pub fn mode(&self) -> XdpMode {
        self.mode
    }

    /// The kernel's id of the program.
    pub fn prog_id(&self) -> u32 {
        self.prog_id
    }

    /// The stale program this attach replaced, if any.
    pub fn replaced(&self) -> Option<&StaleProgram> {
        self.replaced.as_ref()
    }

    pub(crate) fn map_fd(&self) -> BorrowedFd<'_> {
        self.map.as_fd()
    }

    pub(crate) fn netns(&self) -> &File {
        &self.netns
    }

    /// Removes queue `queue`'s socket from the map: its frames go to the kernel's stack again.
    /// (Closing the socket does that too.)
    ///
    /// # Errors
    /// The `bpf(2)` failure.
    pub fn unregister(&self, queue: u32) -> Result<(), XdpError> {
        sys::map_delete(self.map.as_fd(), queue)
            .map_err(|e| bpf_error("remove the socket from the XSKMAP", e))
    }

    fn detach_inner(&mut self) -> Result<(), XdpError> {
        if !self.attached {
            return Ok(());
        }
        self.attached = false;
        let (ifname, index, flags) = (self.ifname.clone(), self.ifindex, self.mode.flags());
        match set_xdp(
            &self.netns,
            "detach the XDP program",
            &ifname,
            index,
            -1,
            flags | XDP_FLAGS_REPLACE,
            Some(self.prog.as_fd()),
        ) {
            // Gone with its interface, or replaced by someone else meanwhile: not ours to
            // remove any more.
            Err(XdpError::NoSuchInterface(_)) => Ok(()),
            Err(XdpError::Os { source, .. }) if source.raw_os_error() == Some(libc::EEXIST) => {
                Ok(())
            }
            other => other,
        }
    }

    /// Detaches the program now (drop does it too, ignoring errors).
    ///
    /// # Errors
    /// The netlink failure; a program that is no longer ours, or an interface that is gone,
    /// is not an error.
    pub fn detach(mut self) -> Result<(), XdpError> {
        self.detach_inner()
    }
}

impl Drop for XdpProgram {
    fn drop(&mut self) {
        let _ = self.detach_inner();
    }
}

/// Maps a `bpf(2)` failure to an error.
pub(crate) fn bpf_error(op: &'static str, e: io::Error) -> XdpError {
    match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Permission { op },
        Some(libc::ENOSYS) => XdpError::Unsupported { op, source: e },
        _ => XdpError::os(op, e),
    }
}

/// Maps a failure to create the XSKMAP to an error. A kernel built without AF_XDP
/// (`CONFIG_XDP_SOCKETS`) has the `bpf` call but not the map type, and answers EINVAL for a
/// type it does not know (`map_create`); the map's other attributes are fixed and valid.
fn xskmap_error(e: io::Error) -> XdpError {
    let op = "create the XSKMAP";
    match e.raw_os_error() {
        Some(libc::EINVAL) => XdpError::Unsupported { op, source: e },
        _ => bpf_error(op, e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno(n: i32) -> io::Error {
        io::Error::from_raw_os_error(n)
    }

    #[test]
    fn a_kernel_without_af_xdp_is_reported_as_such() {
        let e = xskmap_error(errno(libc::EINVAL));
        assert!(matches!(e, XdpError::Unsupported { .. }), "{e:?}");
        assert!(e.to_string().contains("CONFIG_XDP_SOCKETS"), "{e}");
        // Without `bpf(2)` at all, and without the rights, as for every other step.
        assert!(matches!(
            xskmap_error(errno(libc::ENOSYS)),
            XdpError::Unsupported { .. }
        ));
        assert!(matches!(
            xskmap_error(errno(libc::EPERM)),
            XdpError::Permission { .. }
        ));
        // EINVAL from any other step is that step's own failure.
        let other = bpf_error("register the socket in the XSKMAP", errno(libc::EINVAL));
        assert!(matches!(other, XdpError::Os { .. }), "{other:?}");
    }
}
