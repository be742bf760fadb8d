//! Every `unsafe` block of the AF_XDP backend, each with its `SAFETY` argument: the `bpf(2)`
//! calls that create the XSKMAP, load the redirect program and attach it through a BPF link,
//! the UMEM memory and the
//! ownership of its chunks, xdpilone's unsafe UMEM registration, `setns(2)`, `poll(2)` and the
//! stop-signal handler.
//!
//! # UMEM chunk ownership
//! The UMEM is one anonymous mapping cut into equal chunks. Each chunk has a state word
//! ([`Area`]): `FREE` (the socket's owner has it, in no ring), `KERNEL` (in the fill or RX ring,
//! or in the TX or completion ring), `HELD` (a frame handle, [`RxChunk`] or [`TxChunk`], owns it)
//! and `RETURNED` (a receive handle was dropped; the socket's owner collects it and posts it to
//! the fill ring). Every transition is a compare-and-swap from the expected state, so a
//! descriptor the kernel hands back for a chunk it does not own (a bug, or a hostile kernel
//! module) is refused instead of aliasing a live handle. Only a handle in state `HELD` gives
//! access to a chunk's bytes, and at most one handle per chunk exists: that is what makes the
//! safe `&[u8]`/`&mut [u8]` views below sound.

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;
use std::vec;

use std::ffi::{c_int, c_long, c_uint, c_void};
use std::fs::File;
use std::io;
use std::mem::size_of;
use std::ops::Range;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

// ------------------------------------------------------------------------------------------
// bpf(2)
// ------------------------------------------------------------------------------------------

const BPF_MAP_CREATE: c_int = 0;
const BPF_MAP_UPDATE_ELEM: c_int = 2;
const BPF_MAP_DELETE_ELEM: c_int = 3;
const BPF_PROG_LOAD: c_int = 5;
const BPF_PROG_GET_FD_BY_ID: c_int = 13;
const BPF_OBJ_GET_INFO_BY_FD: c_int = 15;
const BPF_LINK_CREATE: c_int = 28;
const BPF_LINK_GET_FD_BY_ID: c_int = 30;
const BPF_LINK_GET_NEXT_ID: c_int = 31;
const BPF_LINK_DETACH: c_int = 34;

/// `BPF_MAP_TYPE_XSKMAP`.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_PROG_TYPE_XDP`.
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_XDP` of `enum bpf_attach_type`: a link to a network device's XDP hook.
const BPF_XDP: u32 = 37;
/// `BPF_LINK_TYPE_XDP` of `enum bpf_link_type`.
const BPF_LINK_TYPE_XDP: u32 = 6;
/// `BPF_PSEUDO_MAP_FD`: the 64-bit immediate load's source register marking a map fd.
const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_FUNC_redirect_map`.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `XDP_PASS`, also the fallback action of `bpf_redirect_map` (its flags' low bits, Linux 5.3+).
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `BPF_OBJ_NAME_LEN`.
const OBJ_NAME_LEN: usize = 16;

/// `union bpf_attr` for `BPF_MAP_CREATE` (the prefix this code sets).
#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; OBJ_NAME_LEN],
}

/// `union bpf_attr` for `BPF_MAP_*_ELEM`.
#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

/// `union bpf_attr` for `BPF_PROG_LOAD` (up to `expected_attach_type`).
#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; OBJ_NAME_LEN],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_LINK_CREATE` (the `link_create` member up to `flags`: the
/// program, the target's union of `target_fd` and `target_ifindex`, the attach type and the
/// flags; the attach-type specific union after them stays zero for XDP).
#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// `union bpf_attr` for `BPF_LINK_DETACH`.
#[repr(C)]
#[derive(Default)]
struct LinkDetachAttr {
    link_fd: u32,
}

/// `union bpf_attr` for `BPF_*_GET_FD_BY_ID` and `BPF_*_GET_NEXT_ID` (`id` is the start id of
/// the latter).
#[repr(C)]
#[derive(Default)]
struct GetFdByIdAttr {
    id: u32,
    next_id: u32,
    open_flags: u32,
}

/// `union bpf_attr` for `BPF_OBJ_GET_INFO_BY_FD`.
#[repr(C)]
#[derive(Default)]
struct InfoByFdAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// `struct bpf_prog_info` up to `name` (the kernel fills at most `info_len` bytes).
#[repr(C)]
#[derive(Default)]
struct BpfProgInfo {
    prog_type: u32,
    id: u32,
    tag: [u8; 8],
    jited_prog_len: u32,
    xlated_prog_len: u32,
    jited_prog_insns: u64,
    xlated_prog_insns: u64,
    load_time: u64,
    created_by_uid: u32,
    nr_map_ids: u32,
    map_ids: u64,
    name: [u8; OBJ_NAME_LEN],
}

/// `struct bpf_link_info` up to its `xdp.ifindex` (the union of per-type members starts at
/// offset 16, 8-aligned; the kernel fills at most `info_len` bytes).
#[repr(C)]
#[derive(Default)]
struct BpfLinkInfo {
    link_type: u32,
    id: u32,
    prog_id: u32,
    _pad: u32,
    xdp_ifindex: u32,
    _pad2: u32,
}

/// A `bpf(2)` attribute block: plain old data whose embedded pointers (if any) point to memory
/// that outlives the call.
trait BpfAttr {}
impl BpfAttr for MapCreateAttr {}
impl BpfAttr for MapElemAttr {}
impl BpfAttr for ProgLoadAttr {}
impl BpfAttr for GetFdByIdAttr {}
impl BpfAttr for InfoByFdAttr {}
impl BpfAttr for LinkCreateAttr {}
impl BpfAttr for LinkDetachAttr {}

fn bpf<A: BpfAttr>(cmd: c_int, attr: &mut A) -> io::Result<c_long> {
    // SAFETY: `attr` is a live, writable `#[repr(C)]` prefix of `union bpf_attr` for `cmd`, and
    // the kernel reads and writes at most `size_of::<A>()` bytes of it (the size passed). Every
    // caller below fills its pointer fields from references that outlive this call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut A as *mut c_void,
            size_of::<A>() as c_uint,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn new_fd(rc: c_long) -> OwnedFd {
    // SAFETY: `rc` is a file descriptor the kernel has just created for this process (a
    // successful BPF_MAP_CREATE, BPF_PROG_LOAD, BPF_PROG_GET_FD_BY_ID, BPF_LINK_CREATE or
    // BPF_LINK_GET_FD_BY_ID); nothing else owns it.
    unsafe { OwnedFd::from_raw_fd(rc as c_int) }
}

fn obj_name(name: &str) -> [u8; OBJ_NAME_LEN] {
    let mut out = [0u8; OBJ_NAME_LEN];
    // BPF object names: up to 15 bytes of [A-Za-z0-9_.], NUL-terminated.
    for (o, b) in out[..OBJ_NAME_LEN - 1].iter_mut().zip(name.bytes()) {
        *o = if b.is_ascii_alphanumeric() || b == b'.' {
            b
        } else {
            b'_'
        };
    }
    out
}

/// Creates an XSKMAP of `entries` slots (key: queue index, value: AF_XDP socket fd).
pub(crate) fn create_xskmap(entries: u32, name: &str) -> io::Result<OwnedFd> {
    let mut attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: entries,
        map_name: obj_name(name),
        ..MapCreateAttr::default()
    };
    bpf(BPF_MAP_CREATE, &mut attr).map(new_fd)
}

/// One `struct bpf_insn`.
fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    let regs = if cfg!(target_endian = "little") {
        dst | (src << 4)
    } else {
        (dst << 4) | src
    };
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = regs;
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The redirect program, `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);`:
/// six instructions (the map load takes two).
fn redirect_program(map_fd: c_int) -> [u64; 6] {
    [
        // r2 = *(u32 *)(r1 + 16): ctx->rx_queue_index (BPF_LDX | BPF_MEM | BPF_W)
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = the map (BPF_LD | BPF_DW | BPF_IMM, pseudo map fd; the second half is zero)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: the action when the queue has no socket (BPF_ALU64 | BPF_MOV | BPF_K)
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map (BPF_JMP | BPF_CALL)
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // exit, with the helper's result in r0 (BPF_JMP | BPF_EXIT)
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// Loads the redirect program over `map`; on failure also returns the verifier's log.
pub(crate) fn load_redirect_program(
    map: BorrowedFd<'_>,
    name: &str,
) -> Result<OwnedFd, (io::Error, String)> {
    let insns = redirect_program(map.as_raw_fd());
    let license = b"Dual MIT/GPL\0";
    let mut log = vec![0u8; 4096];
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        log_level: 1,
        log_size: log.len() as u32,
        log_buf: log.as_mut_ptr() as u64,
        prog_name: obj_name(name),
        ..ProgLoadAttr::default()
    };
    match bpf(BPF_PROG_LOAD, &mut attr) {
        Ok(rc) => Ok(new_fd(rc)),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err((e, String::from_utf8_lossy(&log[..end]).trim().to_owned()))
        }
    }
}

/// `map[key] = value` for a map with 4-byte keys and values.
pub(crate) fn map_update(map: BorrowedFd<'_>, key: u32, value: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        value: &value as *const u32 as u64,
        ..MapElemAttr::default()
    };
    bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(drop)
}

/// Removes `map[key]`.
pub(crate) fn map_delete(map: BorrowedFd<'_>, key: u32) -> io::Result<()> {
    let mut attr = MapElemAttr {
        map_fd: map.as_raw_fd() as u32,
        key: &key as *const u32 as u64,
        ..MapElemAttr::default()
    };
    bpf(BPF_MAP_DELETE_ELEM, &mut attr).map(drop)
}

/// A file descriptor for the loaded program with id `id`.
pub(crate) fn prog_fd_by_id(id: u32) -> io::Result<OwnedFd> {
    fd_by_id(BPF_PROG_GET_FD_BY_ID, id)
}

/// A file descriptor for the object with id `id` (`cmd`: `BPF_PROG_GET_FD_BY_ID` or
/// `BPF_LINK_GET_FD_BY_ID`).
fn fd_by_id(cmd: c_int, id: u32) -> io::Result<OwnedFd> {
    let mut attr = GetFdByIdAttr {
        id,
        ..GetFdByIdAttr::default()
    };
    bpf(cmd, &mut attr).map(new_fd)
}

/// What `BPF_OBJ_GET_INFO_BY_FD` fills in: a `#[repr(C)]` prefix of the kernel's info
/// structure for the object's kind, all of whose bit patterns are valid.
trait ObjInfo: Default {}
impl ObjInfo for BpfProgInfo {}
impl ObjInfo for BpfLinkInfo {}

/// The kernel's information about the object behind `fd` (at most `size_of::<T>()` bytes of
/// it: the kernel fills no more than it is told).
fn obj_info<T: ObjInfo>(fd: BorrowedFd<'_>) -> io::Result<T> {
    let mut info = T::default();
    let mut attr = InfoByFdAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: size_of::<T>() as u32,
        info: &mut info as *mut T as u64,
    };
    bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)?;
    Ok(info)
}

/// What the kernel says about a loaded program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProgInfo {
    pub(crate) id: u32,
    pub(crate) prog_type: u32,
    pub(crate) name: String,
}

/// The id, type and name of the program behind `prog`.
pub(crate) fn prog_info(prog: BorrowedFd<'_>) -> io::Result<ProgInfo> {
    let info: BpfProgInfo = obj_info(prog)?;
    let end = info
        .name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(OBJ_NAME_LEN);
    Ok(ProgInfo {
        id: info.id,
        prog_type: info.prog_type,
        name: String::from_utf8_lossy(&info.name[..end]).into_owned(),
    })
}

/// Attaches `prog` to the XDP hook of the interface with index `ifindex` in the calling
/// thread's network namespace, through a BPF link: the returned descriptor. The program stays
/// attached while the link is open (in this process, or in a child that inherited it) and is
/// detached when the last descriptor closes, at the latest when the process exits. `flags` are
/// the mode flags (`XDP_FLAGS_SKB_MODE` or `XDP_FLAGS_DRV_MODE`), the only ones a link takes.
pub(crate) fn link_create_xdp(
    prog: BorrowedFd<'_>,
    ifindex: u32,
    flags: u32,
) -> io::Result<OwnedFd> {
    let mut attr = LinkCreateAttr {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: ifindex,
        attach_type: BPF_XDP,
        flags,
    };
    bpf(BPF_LINK_CREATE, &mut attr).map(new_fd)
}

/// Detaches the link's program now, even if another descriptor of the link is still open (a
/// child process that inherited it); the link stays a descriptor, attached to nothing.
pub(crate) fn link_detach(link: BorrowedFd<'_>) -> io::Result<()> {
    let mut attr = LinkDetachAttr {
        link_fd: link.as_raw_fd() as u32,
    };
    bpf(BPF_LINK_DETACH, &mut attr).map(drop)
}

/// The id of the XDP link that holds program `prog_id` on the interface with index `ifindex`,
/// if there is one: every link of the system is looked at (needs `CAP_SYS_ADMIN`). A link's
/// information names the interface by index only, without its network namespace.
pub(crate) fn xdp_link_of(ifindex: u32, prog_id: u32) -> io::Result<Option<u32>> {
    let mut start = 0;
    loop {
        let mut next = GetFdByIdAttr {
            id: start,
            ..GetFdByIdAttr::default()
        };
        match bpf(BPF_LINK_GET_NEXT_ID, &mut next) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        }
        start = next.next_id;
        let link = match fd_by_id(BPF_LINK_GET_FD_BY_ID, start) {
            Ok(fd) => fd,
            // Released since it was listed.
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => continue,
            Err(e) => return Err(e),
        };
        let info: BpfLinkInfo = obj_info(link.as_fd())?;
        if info.link_type == BPF_LINK_TYPE_XDP
            && info.xdp_ifindex == ifindex
            && info.prog_id == prog_id
        {
            return Ok(Some(info.id));
        }
    }
}

// ------------------------------------------------------------------------------------------
// Namespaces, signals, poll
// ------------------------------------------------------------------------------------------

/// The calling thread's network namespace, to come back to it from other threads.
pub(crate) fn current_netns() -> io::Result<File> {
    File::open("/proc/thread-self/ns/net")
}

/// Whether the calling thread is in the network namespace `ns` already.
pub(crate) fn in_netns(ns: &File) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (ns.metadata(), std::fs::metadata("/proc/thread-self/ns/net")) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Moves the calling thread into the network namespace `ns`.
pub(crate) fn enter_netns(ns: &File) -> io::Result<()> {
    // SAFETY: `ns` is an open namespace file; setns changes only the calling thread's network
    // namespace (the helper threads of this module call it before doing anything else).
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Moves the calling thread into a new network namespace of its own (tests: a private `lo`).
#[cfg(test)]
pub(crate) fn unshare_netns() -> io::Result<()> {
    // SAFETY: unshare(CLONE_NEWNET) changes only the calling thread's network namespace; it
    // reads and writes no memory of this process.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Waits until `fd` is readable or `timeout` passes; `Ok(true)` when readable.
pub(crate) fn poll_readable(fd: RawFd, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // Whole milliseconds, rounded up: a shorter timeout rounded down to 0 would not wait.
    let ms = timeout.map_or(-1, |t| {
        t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as c_int
    });
    // SAFETY: `pfd` is one valid, writable pollfd and the count passed is 1 (a stale or closed
    // descriptor number only makes poll report POLLNVAL).
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    match rc {
        n if n > 0 => Ok(true),
        0 => Ok(false),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

/// Set by SIGINT or SIGTERM once [`install_stop_handler`] ran.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(signal: c_int) {
    // An atomic store is async-signal-safe.
    STOP.store(true, Ordering::SeqCst);
    // SAFETY: `signal` (async-signal-safe) resets this signal to its default action, so a
    // second Ctrl-C ends a process whose loop does not stop.
    unsafe { libc::signal(signal, libc::SIG_DFL) };
}

/// Installs a SIGINT and SIGTERM handler that only sets a flag, and returns the flag.
pub(crate) fn install_stop_handler() -> io::Result<&'static AtomicBool> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid value (empty mask, no flags) that is then
        // filled in; the handler only performs an atomic store, which is async-signal-safe, and
        // has the signature `sa_handler` expects. The old action is not needed.
        let rc = unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_stop_signal as extern "C" fn(c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(&STOP)
}

// ------------------------------------------------------------------------------------------
// UMEM memory and chunk ownership
// ------------------------------------------------------------------------------------------

/// An anonymous, page-aligned, private mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; which thread may touch which bytes
// is decided by the chunk states of the `Area` that owns it (a chunk's bytes are reachable only
// through the one handle that owns the chunk).
unsafe impl Send for Mapping {}
// SAFETY: as above; `&Mapping` gives no access to the bytes by itself.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn anonymous(len: usize) -> io::Result<Self> {
        // SAFETY: a fresh anonymous private mapping of `len` bytes at an address the kernel
        // chooses: it aliases nothing. MAP_POPULATE pre-faults it (the kernel pins it anyway
        // when the UMEM is registered).
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Self { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped once; no handle into the
        // mapping outlives it (every handle holds the `Arc<Area>` that owns this mapping).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The socket's owner has the chunk (a free list, or about to be posted).
const FREE: u8 = 0;
/// The kernel has the chunk: fill or RX ring, TX or completion ring.
const KERNEL: u8 = 1;
/// One handle owns the chunk.
const HELD: u8 = 2;
/// A receive handle was dropped; the owner collects the chunk.
const RETURNED: u8 = 3;

/// Counts of chunks per state, over a range of chunks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StateCounts {
    pub(crate) free: u32,
    pub(crate) kernel: u32,
    pub(crate) held: u32,
    pub(crate) returned: u32,
}

/// Why a descriptor from the kernel was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadDesc {
    /// The address or length lies outside the UMEM or crosses a chunk boundary, or the chunk
    /// belongs to the other pool (a receive descriptor for a transmit chunk, a completion for
    /// a receive chunk).
    OutOfBounds,
    /// The chunk was not the kernel's to give.
    NotKernels,
}

/// The UMEM: the mapping, its chunk size and the ownership state of every chunk.
pub(crate) struct Area {
    map: Mapping,
    chunk_size: u32,
    chunks: u32,
    state: Box<[AtomicU8]>,
    /// One bit per chunk: returned by a dropped receive handle, not yet collected.
    returned: Box<[AtomicU64]>,
    /// Receive handles dropped, ever.
    dropped: AtomicU64,
}

impl Area {
    /// `chunks` chunks of `chunk_size` bytes (a power of two, at least 2048), all `FREE`.
    pub(crate) fn new(chunks: u32, chunk_size: u32) -> io::Result<Arc<Self>> {
        if !chunk_size.is_power_of_two() || chunk_size < 2048 || chunks == 0 {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        }
        let len = (chunks as usize)
            .checked_mul(chunk_size as usize)
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(Arc::new(Self {
            map: Mapping::anonymous(len)?,
            chunk_size,
            chunks,
            state: (0..chunks).map(|_| AtomicU8::new(FREE)).collect(),
            returned: (0..chunks.div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            dropped: AtomicU64::new(0),
        }))
    }

    pub(crate) fn chunk_size(&self) -> u32 {
        self.chunk_size
    }

    /// UMEM offset of chunk `idx`.
    pub(crate) fn addr_of(&self, idx: u32) -> u64 {
        u64::from(idx) * u64::from(self.chunk_size)
    }

    /// Receive handles dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn transition(&self, idx: u32, from: u8, to: u8) -> bool {
        self.state.get(idx as usize).is_some_and(|s| {
            s.compare_exchange(from, to, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Hands a `FREE` chunk to the kernel (about to be written into the fill or TX ring) and
    /// returns its UMEM address; `None` if it was not `FREE`.
    pub(crate) fn post(&self, idx: u32) -> Option<u64> {
        self.transition(idx, FREE, KERNEL)
            .then(|| self.addr_of(idx))
    }

    /// Takes a `KERNEL` chunk of `pool` (the transmit chunks) back as `FREE` (a TX
    /// completion): its index.
    pub(crate) fn reclaim(&self, addr: u64, pool: Range<u32>) -> Result<u32, BadDesc> {
        let idx = addr / u64::from(self.chunk_size);
        let idx = u32::try_from(idx).map_err(|_| BadDesc::OutOfBounds)?;
        if idx >= self.chunks || !pool.contains(&idx) {
            return Err(BadDesc::OutOfBounds);
        }
        if self.transition(idx, KERNEL, FREE) {
            Ok(idx)
        } else {
            Err(BadDesc::NotKernels)
        }
    }

    /// Takes the chunk of a received descriptor (`addr`, `len`) from the kernel as a handle;
    /// the chunk must be one of `pool` (the receive chunks).
    pub(crate) fn claim(
        self: &Arc<Self>,
        addr: u64,
        len: u32,
        pool: Range<u32>,
    ) -> Result<RxChunk, BadDesc> {
        let size = u64::from(self.chunk_size);
        let idx = u32::try_from(addr / size).map_err(|_| BadDesc::OutOfBounds)?;
        let off = (addr % size) as u32;
        if idx >= self.chunks || !pool.contains(&idx) || u64::from(off) + u64::from(len) > size {
            return Err(BadDesc::OutOfBounds);
        }
        if !self.transition(idx, KERNEL, HELD) {
            return Err(BadDesc::NotKernels);
        }
        Ok(RxChunk {
            area: Arc::clone(self),
            idx,
            off,
            len,
        })
    }

    /// Takes a `FREE` chunk as a writable transmit handle.
    pub(crate) fn tx_chunk(&self, idx: u32) -> Option<TxChunk<'_>> {
        // Built only on success: a `TxChunk` that was never owned must not run its `Drop`
        // (which frees the chunk); `then_some` would build, and then drop, one eagerly.
        if self.transition(idx, FREE, HELD) {
            Some(TxChunk { area: self, idx })
        } else {
            None
        }
    }

    /// Collects the chunks of dropped receive handles (`RETURNED` -> `FREE`), calling `f` with
    /// each index.
    pub(crate) fn collect_returned(&self, mut f: impl FnMut(u32)) -> usize {
        let mut n = 0;
        for (w, word) in self.returned.iter().enumerate() {
            if word.load(Ordering::Relaxed) == 0 {
                continue;
            }
            let mut bits = word.swap(0, Ordering::Acquire);
            while bits != 0 {
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                let idx = (w as u32) * 64 + bit;
                if self.transition(idx, RETURNED, FREE) {
                    f(idx);
                    n += 1;
                }
            }
        }
        n
    }

    /// Chunks per state among `range`.
    pub(crate) fn counts(&self, range: std::ops::Range<u32>) -> StateCounts {
        let mut c = StateCounts::default();
        for s in &self.state[range.start as usize..range.end as usize] {
            match s.load(Ordering::Acquire) {
                FREE => c.free += 1,
                KERNEL => c.kernel += 1,
                HELD => c.held += 1,
                _ => c.returned += 1,
            }
        }
        c
    }

    /// The mapping as xdpilone's UMEM area.
    fn as_slice_ptr(&self) -> NonNull<[u8]> {
        NonNull::slice_from_raw_parts(self.map.ptr, self.map.len)
    }

    /// The bytes `off..off + len` of chunk `idx`.
    ///
    /// # Safety
    /// The caller owns chunk `idx` through a handle in state `HELD` for as long as the returned
    /// slice lives, and `off + len <= chunk_size` (checked when the handle was made).
    unsafe fn bytes(&self, idx: u32, off: u32, len: u32) -> *mut u8 {
        debug_assert!(idx < self.chunks && off + len <= self.chunk_size);
        let at = self.addr_of(idx) as usize + off as usize;
        // SAFETY: `idx < chunks` and `off + len <= chunk_size`, so `at..at + len` lies inside
        // the mapping of `chunks * chunk_size` bytes.
        unsafe { self.map.ptr.as_ptr().add(at) }
    }
}

/// Registers `area` as the UMEM of a new AF_XDP socket (xdpilone's unsafe constructor).
pub(crate) fn register_umem(
    area: &Area,
    config: xdpilone::UmemConfig,
) -> Result<xdpilone::Umem, xdpilone::Errno> {
    // SAFETY: the area is a page-aligned mapping (mmap) of exactly `chunks * chunk_size` bytes,
    // shorter than isize::MAX. It outlives the registration: every object that keeps the
    // socket open (the rings of `XskRx`/`XskTx`) sits in a struct whose last field, dropped
    // after the rings, is an `Arc<Area>` (and the kernel pins the pages it registers: it
    // would not touch an unmapped page even if the mapping went first). xdpilone's `Umem::frame` pointers are never used; all access goes through
    // the chunk handles of this module.
    unsafe { xdpilone::Umem::new(config, area.as_slice_ptr()) }
}

/// A received frame's chunk: owns it (state `HELD`) and gives it back (`RETURNED`) on drop,
/// from any thread.
pub(crate) struct RxChunk {
    area: Arc<Area>,
    idx: u32,
    off: u32,
    len: u32,
}

impl RxChunk {
    pub(crate) fn idx(&self) -> u32 {
        self.idx
    }

    pub(crate) fn addr(&self) -> u64 {
        self.area.addr_of(self.idx) + u64::from(self.off)
    }

    pub(crate) fn len(&self) -> u32 {
        self.len
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: this handle is the only owner of chunk `idx` (state HELD since `claim`, left
        // only in `drop`), so no `&mut` to these bytes exists and the kernel does not write them
        // (it got the chunk from the RX ring and gets it back only through the fill ring, after
        // the drop); `off + len <= chunk_size` was checked in `claim`. The slice borrows `self`.
        unsafe {
            std::slice::from_raw_parts(
                self.area.bytes(self.idx, self.off, self.len),
                self.len as usize,
            )
        }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only live view of the chunk.
        unsafe {
            std::slice::from_raw_parts_mut(
                self.area.bytes(self.idx, self.off, self.len),
                self.len as usize,
            )
        }
    }
}

impl Drop for RxChunk {
    fn drop(&mut self) {
        // HELD -> RETURNED (Release: our accesses to the bytes happen before the owner reposts
        // the chunk), then the bit the owner's `collect_returned` looks for.
        if let Some(s) = self.area.state.get(self.idx as usize) {
            s.store(RETURNED, Ordering::Release);
        }
        if let Some(w) = self.area.returned.get(self.idx as usize / 64) {
            w.fetch_or(1 << (self.idx % 64), Ordering::Release);
        }
        self.area.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// A transmit chunk being written: owns it (`HELD`) until [`TxChunk::submit`] hands it to the
/// kernel; dropped unsubmitted it goes back to `FREE`.
pub(crate) struct TxChunk<'a> {
    area: &'a Area,
    idx: u32,
}

impl TxChunk<'_> {
    /// The whole chunk, writable.
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        let len = self.area.chunk_size;
        // SAFETY: this handle is the only owner of chunk `idx` (state HELD since `tx_chunk`),
        // the kernel does not have it (it was FREE), and the whole chunk lies in the mapping.
        unsafe { std::slice::from_raw_parts_mut(self.area.bytes(self.idx, 0, len), len as usize) }
    }

    /// Hands the chunk to the kernel (about to be written into the TX ring): its address.
    pub(crate) fn submit(self) -> u64 {
        let addr = self.area.addr_of(self.idx);
        if let Some(s) = self.area.state.get(self.idx as usize) {
            s.store(KERNEL, Ordering::Release);
        }
        std::mem::forget(self);
        addr
    }
}

impl Drop for TxChunk<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.area.state.get(self.idx as usize) {
            s.store(FREE, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CHUNK: u32 = 2048;

    /// The kernel's limits on a UMEM, refused before anything is mapped: chunks are a power
    /// of two of at least 2048 bytes, and there is at least one.
    #[test]
    fn a_umem_the_kernel_would_refuse_is_not_made() {
        assert!(Area::new(1, CHUNK).is_ok());
        assert!(Area::new(1, 4096).is_ok());
        for size in [0, 1024, 3000, CHUNK + 1] {
            assert!(Area::new(1, size).is_err(), "chunks of {size} bytes");
        }
        assert!(Area::new(0, CHUNK).is_err(), "no chunk");
    }

    #[test]
    fn chunk_handles_are_unique_and_come_back() {
        let area = Area::new(4, CHUNK).unwrap();
        let addr = area.post(1).unwrap();
        assert_eq!(addr, 2048);
        // Only a chunk the kernel has can be claimed, once, within its bounds.
        assert_eq!(area.claim(0, 60, 0..4).err(), Some(BadDesc::NotKernels));
        assert_eq!(
            area.claim(addr + 2000, 100, 0..4).err(),
            Some(BadDesc::OutOfBounds)
        );
        assert_eq!(
            area.claim(4 * 2048, 60, 0..4).err(),
            Some(BadDesc::OutOfBounds)
        );
        let mut h = area.claim(addr + 256, 100, 0..4).unwrap();
        assert_eq!(
            area.claim(addr + 256, 100, 0..4).err(),
            Some(BadDesc::NotKernels)
        );
        h.bytes_mut().fill(0xab);
        assert_eq!(h.bytes(), &[0xab; 100][..]);
        assert_eq!((h.idx(), h.addr(), h.len()), (1, 2048 + 256, 100));
        // Dropped on another thread, collected here.
        std::thread::spawn(move || drop(h)).join().unwrap();
        assert_eq!(area.dropped(), 1);
        let mut got = Vec::new();
        assert_eq!(area.collect_returned(|i| got.push(i)), 1);
        assert_eq!(got, [1]);
        assert_eq!(area.counts(0..4).free, 4);
        // Transmit chunks: taken, written, submitted, completed.
        let mut t = area.tx_chunk(3).unwrap();
        assert!(area.tx_chunk(3).is_none());
        t.bytes_mut()[..4].copy_from_slice(&[1, 2, 3, 4]);
        let a = t.submit();
        assert_eq!(area.counts(0..4).kernel, 1);
        assert_eq!(area.reclaim(a, 0..4), Ok(3));
        assert_eq!(area.reclaim(a, 0..4), Err(BadDesc::NotKernels));
        // A transmit chunk dropped unsubmitted is free again.
        drop(area.tx_chunk(2).unwrap());
        assert_eq!(area.counts(0..4).free, 4);
    }

    /// The receive and transmit chunks share one UMEM and one state (`KERNEL`) while the
    /// kernel has them: a receive descriptor for a chunk being transmitted, or a completion for
    /// a chunk in the fill ring, is refused instead of handing that chunk to the other half.
    #[test]
    fn a_descriptor_for_the_other_pool_is_refused() {
        // Chunks 0..2 receive, 2..4 transmit, as a socket splits its UMEM.
        let area = Area::new(4, CHUNK).unwrap();
        let (rx, tx) = (0..2, 2..4);
        let posted = area.post(0).unwrap();
        let sent = area.tx_chunk(2).unwrap().submit();
        assert_eq!(
            area.claim(sent + 256, 60, rx.clone()).err(),
            Some(BadDesc::OutOfBounds)
        );
        assert_eq!(area.reclaim(posted, tx.clone()), Err(BadDesc::OutOfBounds));
        assert_eq!(area.counts(0..4).kernel, 2);
        // Each in its own pool comes back as usual.
        assert_eq!(area.claim(posted + 256, 60, rx).unwrap().idx(), 0);
        assert_eq!(area.reclaim(sent, tx), Ok(2));
    }

    #[derive(Debug, Clone)]
    enum Op {
        Post(u32),
        Claim(u32, u32, u32),
        Drop(usize),
        Collect,
        Tx(u32, bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u32..10).prop_map(Op::Post),
            (0u32..10, 0u32..2100, 0u32..2100).prop_map(|(i, off, len)| Op::Claim(i, off, len)),
            (0usize..16).prop_map(Op::Drop),
            Just(Op::Collect),
            (0u32..10, any::<bool>()).prop_map(|(i, s)| Op::Tx(i, s)),
        ]
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Model {
        Free,
        Kernel,
        Held,
        Returned,
    }

    proptest! {
        /// Whatever the order of posts, claims (good and bogus descriptors), drops,
        /// collections and transmit round trips: the area's states match a model, no chunk is
        /// handed out twice, a handle's bytes are its own (a write through one never shows
        /// through another), and every chunk is somewhere.
        #[test]
        fn ownership_state_machine(ops in proptest::collection::vec(op(), 1..200)) {
            const N: u32 = 8;
            let area = Area::new(N, CHUNK).unwrap();
            let mut model = [Model::Free; N as usize];
            let mut held: Vec<(RxChunk, u8)> = Vec::new();
            let mut tag = 0u8;
            for op in ops {
                match op {
                    Op::Post(i) => {
                        let ok = area.post(i).is_some();
                        let expect = (i as usize) < model.len() && model[i as usize] == Model::Free;
                        prop_assert_eq!(ok, expect);
                        if ok { model[i as usize] = Model::Kernel; }
                    }
                    Op::Claim(i, off, len) => {
                        let addr = u64::from(i) * u64::from(CHUNK) + u64::from(off);
                        let r = area.claim(addr, len, 0..N);
                        // The chunk the address falls in, and the offset inside it.
                        let (i, off) = ((addr / u64::from(CHUNK)) as u32, (addr % u64::from(CHUNK)) as u32);
                        let in_bounds = i < N && off + len <= CHUNK;
                        let expect = in_bounds && model[i as usize] == Model::Kernel;
                        prop_assert_eq!(r.is_ok(), expect);
                        if let Ok(mut h) = r {
                            model[i as usize] = Model::Held;
                            tag = tag.wrapping_add(1);
                            h.bytes_mut().fill(tag);
                            held.push((h, tag));
                        }
                    }
                    Op::Drop(k) => {
                        if !held.is_empty() {
                            let (h, _) = held.swap_remove(k % held.len());
                            let i = h.idx();
                            drop(h);
                            model[i as usize] = Model::Returned;
                        }
                    }
                    Op::Collect => {
                        area.collect_returned(|i| model[i as usize] = Model::Free);
                    }
                    Op::Tx(i, submit) => {
                        let t = area.tx_chunk(i);
                        prop_assert_eq!(t.is_some(), i < N && model[i as usize] == Model::Free);
                        if let Some(t) = t {
                            if submit {
                                let a = t.submit();
                                prop_assert_eq!(area.reclaim(a, 0..N), Ok(i));
                            }
                        }
                    }
                }
                // Every live handle still sees its own bytes.
                for (h, t) in &held {
                    prop_assert!(h.bytes().iter().all(|b| b == t));
                }
                let c = area.counts(0..N);
                let count = |m| model.iter().filter(|&&x| x == m).count() as u32;
                prop_assert_eq!(
                    (c.free, c.kernel, c.held, c.returned),
                    (count(Model::Free), count(Model::Kernel), count(Model::Held), count(Model::Returned))
                );
                prop_assert_eq!(c.free + c.kernel + c.held + c.returned, N);
            }
        }
    }
}
