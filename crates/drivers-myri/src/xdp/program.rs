//! The XSKMAP, the redirect program and their attachment to an interface through a BPF link.
//!
//! The program is `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`: a frame
//! goes to the AF_XDP socket registered for its receive queue, or, when that queue has none, on
//! to the kernel's stack. It is built in-process (six instructions, no compiler, no object
//! file) and attached with `bpf(BPF_LINK_CREATE)` (attach type `BPF_XDP`, Linux 5.9 or later).
//!
//! The link is a file descriptor that [`XdpProgram`] owns. The kernel detaches the program when
//! the link goes: on [`XdpProgram::detach`] or drop (`BPF_LINK_DETACH`), and when the process
//! exits, however it exits (a crash or SIGKILL too: the kernel closes its descriptors). A child
//! forked without `exec` shares the descriptor, and the program stays until both have closed it
//! or one detached it. So no program of ours outlives the processes that hold its link, and no
//! later attach has anything of ours to clean up. While the link exists the kernel refuses to
//! replace the program, over netlink or with another link, whatever the process asking and its
//! pid namespace.
//!
//! An interface that already has a program (someone's link, or a program attached over netlink,
//! which outlives its process) is refused with [`XdpError::Busy`], which says what is
//! attached. The interface is looked up, and its program listed, over netlink (`rtnetlink`).

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;

use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use futures_util::TryStreamExt;
use rtnetlink::packet_route::link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached};
use rtnetlink::Handle;

use super::{sys, XdpError};

/// The name of our redirect program, as [`attached_program`] and [`XdpError::Busy`] report it.
pub const PROGRAM_NAME: &str = "lro_xsk";

const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

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
    /// Its name, when it could be read (needs `CAP_SYS_ADMIN`/`CAP_BPF`); ours is
    /// [`PROGRAM_NAME`].
    pub name: Option<String>,
    /// The id of the BPF link that holds it, for a program attached through a link (ours
    /// are); `None` for one attached over netlink, and when the links could not be listed
    /// (needs `CAP_SYS_ADMIN`).
    pub link: Option<u32>,
}

impl AttachedProgram {
    /// What is attached to the interface with index `ifindex`: program `prog_id` in `mode`,
    /// its name and link when they can be read.
    fn describe(ifindex: u32, prog_id: u32, mode: XdpMode) -> Self {
        let name = sys::prog_fd_by_id(prog_id)
            .and_then(|fd| sys::prog_info(fd.as_fd()))
            .ok()
            .map(|i| i.name);
        let link = sys::xdp_link_of(ifindex, prog_id).ok().flatten();
        Self {
            prog_id,
            mode,
            name,
            link,
        }
    }
}

/// What the kernel says about an interface.
#[derive(Debug, Clone)]
pub(crate) struct LinkInfo {
    pub(crate) index: u32,
    pub(crate) rx_queues: u32,
    pub(crate) xdp: Option<(u32, XdpMode)>,
}

/// Runs `f` on a helper thread in the network namespace `ns`: netlink and AF_XDP sockets
/// belong to the namespace of the thread that creates them, and `BPF_LINK_CREATE` looks the
/// interface index up in it, whichever thread calls us.
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

/// What a link message says: the interface index, its receive queues and the program that
/// would stop ours (Linux `rtnl_xdp_fill`). The kernel names each mode's program
/// (`IFLA_XDP_DRV_PROG_ID`, `_SKB_`, `_HW_`, since 4.19), and `IFLA_XDP_PROG_ID` only when
/// one mode has one: with two (an offloaded program beside a native one, `XDP_ATTACHED_MULTI`)
/// only the per-mode ids say what is there. A native or generic program stops ours (the kernel
/// answers EBUSY in the same mode, EEXIST in the other); an offloaded one runs on the NIC
/// beside it and is not reported.
fn parse_link(msg: &LinkMessage) -> LinkInfo {
    let mut info = LinkInfo {
        index: msg.header.index,
        rx_queues: 1,
        xdp: None,
    };
    for attr in &msg.attributes {
        match attr {
            LinkAttribute::NumRxQueues(n) => info.rx_queues = (*n).max(1),
            LinkAttribute::Xdp(xdp) => info.xdp = blocking_program(xdp),
            _ => {}
        }
    }
    info
}

/// [`parse_link`]'s reading of `IFLA_XDP`: the native or generic program, if any.
fn blocking_program(xdp: &[LinkXdp]) -> Option<(u32, XdpMode)> {
    let (mut drv, mut skb, mut single) = (0, 0, None);
    let mut attached = XdpAttached::None;
    for x in xdp {
        match x {
            LinkXdp::DrvProgId(id) => drv = *id,
            LinkXdp::SkbProgId(id) => skb = *id,
            LinkXdp::ProgId(id) => single = Some(*id),
            LinkXdp::Attached(a) => attached = *a,
            _ => {}
        }
    }
    // The single id in the mode `IFLA_XDP_ATTACHED` names, for a kernel without per-mode ids.
    if drv == 0 && skb == 0 {
        match (single, attached) {
            (Some(id), XdpAttached::Driver) => drv = id,
            (Some(id), XdpAttached::SocketBuffer) => skb = id,
            _ => {}
        }
    }
    // Native and generic exclude each other: at most one of them is set.
    match (drv, skb) {
        (0, 0) => None,
        (0, id) => Some((id, XdpMode::Generic)),
        (id, _) => Some((id, XdpMode::Native)),
    }
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

/// The native or generic program attached to `ifname` in the calling thread's namespace, if
/// any: the program that would stop [`XdpProgram::attach`]. (An offloaded program, which runs
/// on the NIC beside ours, is not reported.)
///
/// # Errors
/// [`XdpError::NoSuchInterface`], or a netlink failure.
pub fn attached_program(ifname: &str) -> Result<Option<AttachedProgram>, XdpError> {
    let ns = sys::current_netns().map_err(|e| XdpError::os("open the network namespace", e))?;
    let link = link_info(&ns, ifname)?;
    Ok(link
        .xdp
        .map(|(prog_id, mode)| AttachedProgram::describe(link.index, prog_id, mode)))
}

/// The error for an interface that has a program already.
fn busy(ifname: &str, attached: AttachedProgram) -> XdpError {
    XdpError::Busy {
        ifname: ifname.to_owned(),
        prog_id: attached.prog_id,
        name: attached.name,
        mode: attached.mode,
        link: attached.link,
    }
}

/// The XSKMAP and the redirect program, attached to one interface through a BPF link: what
/// AF_XDP sockets ([`XdpProgram::socket`](Self::socket)) receive through. The kernel detaches
/// the program when the link closes: on drop, on [`XdpProgram::detach`], and when the process
/// exits or is killed.
///
/// Attaching and creating sockets need `CAP_NET_ADMIN` and `CAP_BPF` (root); the interface is
/// looked up in the network namespace of the calling thread, which the program remembers: its
/// sockets are created there, from whichever thread.
#[derive(Debug)]
pub struct XdpProgram {
    ifname: String,
    ifindex: u32,
    queues: u32,
    rx_queues: u32,
    mode: XdpMode,
    /// The BPF link that holds the program on the interface; `None` once detached.
    /// (The link holds the program, and the program the map.)
    link: Option<OwnedFd>,
    map: OwnedFd,
    prog_id: u32,
    netns: File,
}

impl XdpProgram {
    /// Attaches to `ifname` with one XSKMAP slot per receive queue of the interface.
    ///
    /// # Errors
    /// [`XdpError::NoSuchInterface`], [`XdpError::Permission`] without root,
    /// [`XdpError::Unsupported`] without BPF in the kernel, [`XdpError::ModeUnsupported`] when
    /// the driver lacks the mode asked for, [`XdpError::Busy`] when the interface has a program
    /// already (anyone's, ours included).
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

        // A program already attached is refused before anything is loaded. (One attached
        // between this look-up and ours makes the kernel refuse ours: see below.)
        if let Some((prog_id, old_mode)) = link.xdp {
            return Err(busy(
                ifname,
                AttachedProgram::describe(link.index, prog_id, old_mode),
            ));
        }

        let map = sys::create_xskmap(queues, "lro_xsks").map_err(xskmap_error)?;
        let prog = sys::load_redirect_program(map.as_fd(), PROGRAM_NAME).map_err(|(e, log)| {
            match bpf_error("load the redirect program", e) {
                XdpError::Os { source, .. } => XdpError::Verifier { log, source },
                other => other,
            }
        })?;
        let prog_id = sys::prog_info(prog.as_fd())
            .map_err(|e| bpf_error("read the loaded program", e))?
            .id;

        // Auto: native first, generic when native fails (a driver without native XDP answers
        // EOPNOTSUPP, some refuse a configuration with another errno).
        let candidates: &[XdpMode] = match mode {
            XdpMode::Auto => &[XdpMode::Native, XdpMode::Generic],
            XdpMode::Native => &[XdpMode::Native],
            XdpMode::Generic => &[XdpMode::Generic],
        };
        let mut last = None;
        for &m in candidates {
            // The kernel resolves the ifindex in the calling thread's network namespace.
            let prog_fd = prog.as_fd();
            let created = in_netns(&netns, || {
                Ok(sys::link_create_xdp(prog_fd, link.index, m.flags()))
            })?;
            match created {
                Ok(fd) => {
                    return Ok(Self {
                        ifname: ifname.to_owned(),
                        ifindex: link.index,
                        queues,
                        rx_queues: link.rx_queues,
                        mode: m,
                        link: Some(fd),
                        map,
                        prog_id,
                        netns,
                    })
                }
                Err(e) => last = Some(e),
            }
        }
        let e = last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EOPNOTSUPP));
        Err(match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => XdpError::ModeUnsupported {
                ifname: ifname.to_owned(),
                mode,
            },
            // A program attached meanwhile: EBUSY in the same mode, EEXIST in the other (native
            // and generic exclude each other). EEXIST also comes from an upper device (a
            // bond) with a program: nothing to report on this interface then.
            Some(libc::EBUSY | libc::EEXIST) => match link_info(&netns, ifname)?.xdp {
                Some((prog_id, old_mode)) => busy(
                    ifname,
                    AttachedProgram::describe(link.index, prog_id, old_mode),
                ),
                None => XdpError::os("attach the XDP program", e),
            },
            // What a kernel without XDP links (before 5.9) answers, and what a link to an
            // interface gone meanwhile gets.
            Some(libc::EINVAL) => match link_info(&netns, ifname) {
                Err(gone @ XdpError::NoSuchInterface(_)) => gone,
                _ => XdpError::os("attach the XDP program through a BPF link (Linux 5.9+)", e),
            },
            _ => bpf_error("attach the XDP program", e),
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
        let Some(link) = self.link.take() else {
            return Ok(());
        };
        // BPF_LINK_DETACH rather than only closing: a child forked without exec holds the
        // link too, and the program goes now all the same. Closing `link` then frees it.
        sys::link_detach(link.as_fd()).map_err(|e| bpf_error("detach the XDP program", e))
    }

    /// Detaches the program now (drop does it too, ignoring errors).
    ///
    /// # Errors
    /// The `bpf(2)` failure; an interface that is gone is not an error (its program went with
    /// it).
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

    /// The `IFLA_XDP` attributes as `rtnl_xdp_fill` writes them for programs `(id, mode)`:
    /// each mode's id, the single id when one mode has a program, and the attach state.
    fn xdp_attrs(progs: &[(u32, XdpAttached)]) -> Vec<LinkXdp> {
        let mut attrs: Vec<LinkXdp> = progs
            .iter()
            .map(|&(id, mode)| match mode {
                XdpAttached::Driver => LinkXdp::DrvProgId(id),
                XdpAttached::SocketBuffer => LinkXdp::SkbProgId(id),
                _ => LinkXdp::HwProgId(id),
            })
            .collect();
        let attached = match progs {
            [] => XdpAttached::None,
            &[(id, mode)] => {
                attrs.push(LinkXdp::ProgId(id));
                mode
            }
            _ => XdpAttached::Multiple,
        };
        attrs.push(LinkXdp::Attached(attached));
        attrs
    }

    #[test]
    fn the_program_that_stops_ours_is_found_in_every_mode() {
        use XdpAttached::{Driver as Native, Hardware as Offloaded, SocketBuffer as Generic};
        assert_eq!(blocking_program(&xdp_attrs(&[])), None);
        assert_eq!(
            blocking_program(&xdp_attrs(&[(7, Native)])),
            Some((7, XdpMode::Native))
        );
        assert_eq!(
            blocking_program(&xdp_attrs(&[(8, Generic)])),
            Some((8, XdpMode::Generic))
        );
        // Offloaded alone: it runs on the NIC, beside ours.
        assert_eq!(blocking_program(&xdp_attrs(&[(9, Offloaded)])), None);
        // An offloaded program beside a native or generic one: no `IFLA_XDP_PROG_ID`.
        assert_eq!(
            blocking_program(&xdp_attrs(&[(9, Offloaded), (7, Native)])),
            Some((7, XdpMode::Native))
        );
        assert_eq!(
            blocking_program(&xdp_attrs(&[(8, Generic), (9, Offloaded)])),
            Some((8, XdpMode::Generic))
        );
        // A kernel before per-mode ids (4.18).
        let old = |mode| vec![LinkXdp::Attached(mode), LinkXdp::ProgId(5)];
        assert_eq!(blocking_program(&old(Native)), Some((5, XdpMode::Native)));
        assert_eq!(blocking_program(&old(Generic)), Some((5, XdpMode::Generic)));
        assert_eq!(blocking_program(&old(Offloaded)), None);
    }

    #[test]
    fn a_link_message_gives_its_index_queues_and_program() {
        let read = |attributes: Vec<LinkAttribute>| {
            let mut msg = LinkMessage::default();
            msg.header.index = 7;
            msg.attributes = attributes;
            let info = parse_link(&msg);
            (info.index, info.rx_queues, info.xdp)
        };
        assert_eq!(read(vec![]), (7, 1, None), "no queue count: one queue");
        assert_eq!(read(vec![LinkAttribute::NumRxQueues(0)]), (7, 1, None));
        assert_eq!(
            read(vec![
                LinkAttribute::NumRxQueues(4),
                LinkAttribute::Xdp(xdp_attrs(&[(3, XdpAttached::Driver)])),
            ]),
            (7, 4, Some((3, XdpMode::Native)))
        );
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
