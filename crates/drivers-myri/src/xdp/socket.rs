//! One AF_XDP socket per receive queue: its UMEM, its four rings, the receive half (frames as
//! UMEM handles, the fill ring refilled from dropped handles) and the transmit half (frames
//! written into UMEM chunks, completions recycled).

// The crate is `no_std`; this backend is `std`.
use std::prelude::rust_2021::*;
use std::vec;

use std::collections::VecDeque;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use lro_core::{RxChecksum, RxMeta};
use xdpilone::xdp::XdpDesc;
use xdpilone::{
    CompletionQueue, FillQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, UmemConfig, User,
};

use super::program::in_netns;
use super::sys::{self, Area, RxChunk};
use super::umem::{FrameAccount, TxAccount, UmemFrame};
use super::{XdpError, XdpProgram};
use crate::RxDriver;

/// How a socket binds to its queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum BindMode {
    /// Zero-copy where the driver supports it, copy mode otherwise (veth: copy).
    #[default]
    Auto,
    /// Copy mode (`XDP_COPY`): the kernel copies each frame into the UMEM.
    Copy,
    /// Zero-copy (`XDP_ZEROCOPY`): fails where the driver has no support.
    ZeroCopy,
}

/// Socket geometry and behaviour. `Default`: 4096 receive and 1024 transmit frames of 2048
/// bytes (10 MiB of UMEM per queue), rings as large as the frame pools, batches of 64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct XskConfig {
    /// Receive chunks of the UMEM (also the fill ring's size, rounded up to a power of two).
    /// Frames the coalescer and the stack hold count against it.
    pub rx_frames: u32,
    /// Transmit chunks of the UMEM (also the TX and completion rings' size, rounded up).
    pub tx_frames: u32,
    /// Chunk size: 2048 or 4096. The kernel writes a received frame after the 256 bytes of
    /// `XDP_PACKET_HEADROOM` it keeps at the start of each chunk, so a frame longer than
    /// `frame_size - 256` (1792 bytes for 2048) is dropped by the kernel (counted in
    /// [`KernelStats::rx_dropped`]). Transmitted frames may fill the whole chunk.
    pub frame_size: u32,
    /// RX ring entries (rounded up to a power of two). At least `rx_frames` means the ring
    /// never overflows: the kernel cannot hold more frames than there are chunks.
    pub rx_ring: u32,
    /// Descriptors read from the RX ring per access (at most `rx_frames` are used).
    pub batch: u32,
    /// Copy or zero-copy.
    pub bind: BindMode,
    /// The checksum state reported in [`RxMeta`]: `None` (the coalescer verifies in software)
    /// unless the device is known to verify (AF_XDP carries no checksum information).
    pub checksum: RxChecksum,
    /// Kick the kernel (`sendto`) from inside [`TxBuffer::send`] once this many frames wait in
    /// the TX ring (at most the transmit frames: a larger threshold kicks when all of them
    /// wait); `None`: only [`XskTx::flush`] kicks, and [`XskTx::buffer`] when no chunk is free.
    pub auto_kick: Option<u32>,
    /// Largest frame smoltcp may send, Ethernet header included (the link MTU + 14).
    pub max_frame: u32,
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            rx_frames: 4096,
            tx_frames: 1024,
            frame_size: 2048,
            rx_ring: 4096,
            batch: 64,
            bind: BindMode::Auto,
            checksum: RxChecksum::None,
            auto_kick: Some(32),
            max_frame: 1514,
        }
    }
}

impl XskConfig {
    /// The same configuration with `rx` receive and `tx` transmit frames.
    pub const fn with_frames(mut self, rx: u32, tx: u32) -> Self {
        self.rx_frames = rx;
        self.tx_frames = tx;
        if self.rx_ring < rx {
            self.rx_ring = rx;
        }
        self
    }

    /// The same configuration with another bind mode.
    pub const fn with_bind(mut self, bind: BindMode) -> Self {
        self.bind = bind;
        self
    }

    /// The same configuration with another automatic kick threshold.
    pub const fn with_auto_kick(mut self, threshold: Option<u32>) -> Self {
        self.auto_kick = threshold;
        self
    }

    /// The same configuration reporting `checksum` in the metadata.
    pub const fn with_checksum(mut self, checksum: RxChecksum) -> Self {
        self.checksum = checksum;
        self
    }
}

/// The kernel's counters of a socket (`XDP_STATISTICS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Frames dropped for other reasons (too long for a chunk, ...).
    pub rx_dropped: u64,
    /// Invalid fill-ring descriptors.
    pub rx_invalid_descs: u64,
    /// Invalid TX-ring descriptors.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived (frames dropped).
    pub rx_fill_ring_empty: u64,
    /// Times the TX ring was empty when the kernel looked.
    pub tx_ring_empty: u64,
}

/// Receive counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RxStats {
    /// Frames handed out.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// RX-ring reads that found frames.
    pub batches: u64,
    /// Descriptors refused (outside the UMEM's receive chunks, or for a chunk the kernel did
    /// not own).
    pub bad_descs: u64,
    /// Chunks posted to the fill ring: the first posting when the socket is created, then
    /// every chunk posted back.
    pub refilled: u64,
}

/// Transmit counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Frames put into the TX ring.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Completions taken back.
    pub completed: u64,
    /// `sendto` kicks.
    pub kicks: u64,
    /// Frames not sent: empty (the kernel would refuse the descriptor), longer than a chunk,
    /// or the TX ring full.
    pub dropped: u64,
    /// Completions refused (outside the UMEM's transmit chunks, or for a chunk not in flight).
    pub bad_completions: u64,
}

fn errno_of(e: &xdpilone::Errno) -> i32 {
    e.get_raw().abs()
}

fn xsk_error(op: &'static str, e: xdpilone::Errno) -> XdpError {
    let errno = errno_of(&e);
    match errno {
        libc::EPERM | libc::EACCES => XdpError::Permission { op },
        libc::EAFNOSUPPORT | libc::ENOPROTOOPT => XdpError::Unsupported {
            op,
            source: io::Error::from_raw_os_error(errno),
        },
        _ => XdpError::os(op, io::Error::from_raw_os_error(errno)),
    }
}

/// One AF_XDP socket on one receive queue; [`XskSocket::split`] gives its halves to different
/// threads if need be.
pub struct XskSocket {
    rx: XskRx,
    tx: XskTx,
}

impl XdpProgram {
    /// Opens an AF_XDP socket on receive queue `queue` with a UMEM of its own, and registers it
    /// in the XSKMAP: from now on that queue's frames come to the socket.
    ///
    /// # Errors
    /// [`XdpError::NoSuchQueue`] outside the map's slots, [`XdpError::Permission`],
    /// [`XdpError::Unsupported`] without AF_XDP in the kernel, [`XdpError::Os`] naming the
    /// failed step (`EBUSY` from bind: the queue has a socket already, or had one a moment
    /// ago: the kernel releases a closed socket in the background, about 100 ms on Linux 6.18).
    pub fn socket(&self, queue: u32, config: &XskConfig) -> Result<XskSocket, XdpError> {
        if queue >= self.queues() {
            return Err(XdpError::NoSuchQueue {
                queue,
                queues: self.queues(),
            });
        }
        let c = *config;
        if c.rx_frames == 0 || c.tx_frames == 0 || c.batch == 0 {
            return Err(XdpError::os(
                "configure the socket",
                io::Error::from(io::ErrorKind::InvalidInput),
            ));
        }
        let rx_frames = c.rx_frames;
        let ring_of = |n: u32| n.max(1).checked_next_power_of_two().unwrap_or(1 << 31);
        let chunks = rx_frames.checked_add(c.tx_frames).ok_or_else(|| {
            XdpError::os(
                "configure the socket",
                io::Error::from(io::ErrorKind::InvalidInput),
            )
        })?;
        let area = Area::new(chunks, c.frame_size).map_err(|e| XdpError::os("map the UMEM", e))?;
        let ifindex = self.ifindex();
        let map = self.map_fd();
        let (user, fill, comp, ring_rx, ring_tx) = in_netns(self.netns(), || {
            let umem = sys::register_umem(
                &area,
                UmemConfig {
                    fill_size: ring_of(rx_frames),
                    complete_size: ring_of(c.tx_frames),
                    frame_size: c.frame_size,
                    headroom: 0,
                    flags: 0,
                },
            )
            .map_err(|e| xsk_error("create the AF_XDP socket and register its UMEM", e))?;
            let mut info = IfInfo::invalid();
            info.from_ifindex(ifindex)
                .map_err(|e| xsk_error("look up the interface", e))?;
            info.set_queue(queue);
            let sock = Socket::with_shared(&info, &umem)
                .map_err(|e| xsk_error("create the AF_XDP socket", e))?;
            let device = umem
                .fq_cq(&sock)
                .map_err(|e| xsk_error("map the fill and completion rings", e))?;
            let mut bind_flags = SocketConfig::XDP_BIND_NEED_WAKEUP;
            match c.bind {
                BindMode::Auto => {}
                BindMode::Copy => bind_flags |= SocketConfig::XDP_BIND_COPY,
                BindMode::ZeroCopy => bind_flags |= SocketConfig::XDP_BIND_ZEROCOPY,
            }
            let user = umem
                .rx_tx(
                    &sock,
                    &SocketConfig {
                        rx_size: NonZeroU32::new(ring_of(c.rx_ring.max(1))),
                        tx_size: NonZeroU32::new(ring_of(c.tx_frames)),
                        bind_flags,
                    },
                )
                .map_err(|e| xsk_error("configure the RX and TX rings", e))?;
            let ring_rx = user.map_rx().map_err(|e| xsk_error("map the RX ring", e))?;
            let ring_tx = user.map_tx().map_err(|e| xsk_error("map the TX ring", e))?;
            umem.bind(&user)
                .map_err(|e| xsk_error("bind the AF_XDP socket to the queue", e))?;
            let (fill, comp) = device.into_parts();
            Ok((user, fill, comp, ring_rx, ring_tx))
        })?;
        let user = Arc::new(user);
        let mut rx = XskRx {
            area: Arc::clone(&area),
            ring: ring_rx,
            fill,
            user: Arc::clone(&user),
            queue,
            rx_frames,
            // A batch never holds more than the receive chunks: a larger setting reads no more.
            batch: VecDeque::with_capacity(c.batch.min(rx_frames) as usize),
            batch_max: c.batch.min(rx_frames),
            free: (0..rx_frames).rev().collect(),
            checksum: c.checksum,
            stats: RxStats::default(),
        };
        // The fill ring gets its chunks before the program can redirect frames to the socket:
        // a frame redirected to a socket with an empty fill ring is dropped, not passed on to
        // the kernel's stack.
        rx.post_free();
        sys::map_update(map, queue, rx.user.as_raw_fd() as u32)
            .map_err(|e| super::program::bpf_error("register the socket in the XSKMAP", e))?;
        let tx = XskTx {
            area,
            ring: ring_tx,
            comp,
            user,
            queue,
            free: (rx_frames..chunks).rev().collect(),
            pool: rx_frames..chunks,
            tx_frames: c.tx_frames,
            in_flight: 0,
            auto_kick: c.auto_kick,
            max_frame: c.max_frame.min(c.frame_size),
            stats: TxStats::default(),
        };
        Ok(XskSocket { rx, tx })
    }
}

impl XskSocket {
    /// The receive half.
    pub fn rx(&mut self) -> &mut XskRx {
        &mut self.rx
    }

    /// The transmit half.
    pub fn tx(&mut self) -> &mut XskTx {
        &mut self.tx
    }

    /// Both halves, to use on different threads (the socket closes when both are dropped).
    pub fn split(self) -> (XskRx, XskTx) {
        (self.rx, self.tx)
    }

    /// The queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.rx.queue
    }
}

fn kernel_stats(user: &User) -> io::Result<KernelStats> {
    let s = user
        .statistics_v2()
        .map_err(|e| io::Error::from_raw_os_error(errno_of(&e)))?;
    Ok(KernelStats {
        rx_dropped: s.rx_dropped,
        rx_invalid_descs: s.rx_invalid_descs,
        tx_invalid_descs: s.tx_invalid_descs,
        rx_ring_full: s.rx_ring_full,
        rx_fill_ring_empty: s.rx_fill_ring_empty_descs,
        tx_ring_empty: s.tx_ring_empty_descs,
    })
}

/// The receive half: the RX and fill rings. Hands out frames as [`UmemFrame`] handles, in
/// batches read from the RX ring, and posts the chunks of dropped handles back to the fill
/// ring. Implements [`RxDriver`], so it feeds [`LroDevice`](crate::phy::LroDevice) and any
/// coalescer loop.
pub struct XskRx {
    ring: RingRx,
    fill: FillQueue,
    user: Arc<User>,
    queue: u32,
    rx_frames: u32,
    batch: VecDeque<RxChunk>,
    batch_max: u32,
    /// Receive chunks the socket owns, not in the fill ring.
    free: Vec<u32>,
    checksum: RxChecksum,
    stats: RxStats,
    /// The UMEM. Declared last, so dropped after the rings that keep the socket (and its
    /// registration of this memory) open.
    area: Arc<Area>,
}

impl XskRx {
    /// Posts free chunks to the fill ring, as many as it has room for.
    fn post_free(&mut self) -> usize {
        let mut posted = 0;
        // A reservation sees the room the ring had when the kernel's consumer index was last
        // read, which may be less than it has now: ask again until nothing more fits.
        while !self.free.is_empty() {
            let mut w = self.fill.fill(self.free.len() as u32);
            let room = (w.capacity() as usize).min(self.free.len());
            let area = &self.area;
            let from = self.free.len() - room;
            // Exactly `room` items for `room` reserved slots: none is consumed without a slot.
            let n = w.insert(self.free.drain(from..).filter_map(|idx| area.post(idx)));
            w.commit();
            drop(w);
            if n == 0 {
                break;
            }
            posted += n as usize;
        }
        if posted > 0 && self.fill.needs_wakeup() {
            self.fill.wake();
        }
        self.stats.refilled += posted as u64;
        posted
    }

    /// Collects the chunks of dropped handles and posts them to the fill ring; returns how many
    /// were posted. [`XskRx::receive_frame`] does this before reading the RX ring.
    pub fn refill(&mut self) -> usize {
        let free = &mut self.free;
        self.area.collect_returned(|idx| free.push(idx));
        self.post_free()
    }

    /// Reads up to a batch of descriptors from the RX ring into the socket's batch.
    fn pull(&mut self) -> usize {
        self.refill();
        let mut read = self.ring.receive(self.batch_max);
        let mut n = 0;
        while let Some(XdpDesc { addr, len, .. }) = read.read() {
            match self.area.claim(addr, len, 0..self.rx_frames) {
                Ok(chunk) => {
                    self.batch.push_back(chunk);
                    n += 1;
                }
                Err(_) => self.stats.bad_descs += 1,
            }
        }
        read.release();
        drop(read);
        if n > 0 {
            self.stats.batches += 1;
        }
        n
    }

    /// The next received frame, reading a batch from the RX ring when the last one is used up.
    pub fn receive_frame(&mut self) -> Option<UmemFrame> {
        if self.batch.is_empty() && self.pull() == 0 {
            return None;
        }
        let chunk = self.batch.pop_front()?;
        self.stats.frames += 1;
        self.stats.bytes += u64::from(chunk.len());
        Some(UmemFrame::new(chunk))
    }

    /// Up to `max` received frames appended to `out` (one RX-ring access per batch); returns
    /// how many.
    pub fn receive_batch(&mut self, out: &mut impl Extend<UmemFrame>, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(f) = self.receive_frame() else { break };
            out.extend(std::iter::once(f));
            n += 1;
        }
        n
    }

    /// Waits until the RX ring has frames or `timeout` passes (`None`: no limit; `poll(2)`
    /// counts whole milliseconds, so a timeout is rounded up to one); true when frames are
    /// waiting.
    ///
    /// # Errors
    /// The `poll(2)` failure.
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if !self.batch.is_empty() || self.ring.available() > 0 {
            return Ok(true);
        }
        self.refill();
        sys::poll_readable(self.user.as_raw_fd(), timeout)
    }

    /// Frames read from the RX ring and not yet handed out.
    pub fn batched(&self) -> usize {
        self.batch.len()
    }

    /// The queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Receive counters.
    pub fn stats(&self) -> RxStats {
        self.stats
    }

    /// The kernel's counters for the socket.
    ///
    /// # Errors
    /// The `getsockopt` failure.
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        kernel_stats(&self.user)
    }

    /// Where the receive chunks are (see [`FrameAccount`]).
    pub fn account(&self) -> FrameAccount {
        let c = self.area.counts(0..self.rx_frames);
        FrameAccount {
            total: self.rx_frames,
            kernel: c.kernel,
            fill_ring: self.fill.pending(),
            rx_ring: self.ring.available(),
            held: c.held,
            returned: c.returned,
            free: c.free,
            claimed: self.stats.frames + self.batch.len() as u64,
            dropped: self.area.dropped(),
        }
    }
}

impl RxDriver for XskRx {
    type Frame = UmemFrame;

    #[inline]
    fn receive(&mut self, now: u64) -> Option<(UmemFrame, RxMeta)> {
        let frame = self.receive_frame()?;
        Some((frame, RxMeta::ethernet(now).with_checksum(self.checksum)))
    }
}

impl std::fmt::Debug for XskRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskRx")
            .field("queue", &self.queue)
            .field("stats", &self.stats)
            .field("account", &self.account())
            .finish()
    }
}

/// The socket's file descriptor (for `poll`/`epoll` in a caller's loop); it stays open while
/// either half lives.
impl AsRawFd for XskRx {
    fn as_raw_fd(&self) -> RawFd {
        self.user.as_raw_fd()
    }
}

/// The transmit half: the TX and completion rings. Frames are written straight into free UMEM
/// chunks ([`XskTx::buffer`]), queued in the TX ring, and sent by a `sendto` kick (veth and
/// other copy-mode drivers send nothing without one); completed chunks return to the free
/// list. With the `smoltcp` feature it is a smoltcp device (transmit only).
pub struct XskTx {
    ring: RingTx,
    comp: CompletionQueue,
    user: Arc<User>,
    queue: u32,
    free: Vec<u32>,
    /// The transmit chunks (after the receive ones, `tx_frames` of them).
    pool: std::ops::Range<u32>,
    tx_frames: u32,
    in_flight: u32,
    auto_kick: Option<u32>,
    max_frame: u32,
    stats: TxStats,
    /// The UMEM. Declared last, so dropped after the rings that keep the socket (and its
    /// registration of this memory) open.
    area: Arc<Area>,
}

/// Why a frame was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxError {
    /// Every transmit chunk is in flight: [`XskTx::flush`] and try again.
    Full,
    /// Longer than a UMEM chunk.
    TooLong {
        /// Frame length.
        len: usize,
        /// Chunk size.
        max: usize,
    },
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Full => f.write_str("every transmit frame is in flight"),
            Self::TooLong { len, max } => {
                write!(f, "a {len}-byte frame does not fit a {max}-byte UMEM chunk")
            }
        }
    }
}

impl std::error::Error for TxError {}

impl XskTx {
    /// Takes back the chunks the kernel has finished sending; returns how many.
    pub fn complete(&mut self) -> usize {
        let mut read = self.comp.complete(self.tx_frames);
        let mut n = 0;
        while let Some(addr) = read.read() {
            match self.area.reclaim(addr, self.pool.clone()) {
                Ok(idx) => {
                    self.free.push(idx);
                    self.in_flight -= 1;
                    n += 1;
                }
                Err(_) => self.stats.bad_completions += 1,
            }
        }
        read.release();
        drop(read);
        self.stats.completed += n as u64;
        n
    }

    /// Kicks the kernel until the TX ring is empty (or stops making progress), then takes
    /// completions back. Returns the frames still waiting in the TX ring.
    pub fn flush(&mut self) -> u32 {
        let mut last = u32::MAX;
        for _ in 0..1024 {
            let pending = self.ring.pending();
            if pending == 0 || pending == last || !self.ring.needs_wakeup() {
                break;
            }
            last = pending;
            self.ring.wake();
            self.stats.kicks += 1;
        }
        self.complete();
        self.ring.pending()
    }

    /// A free chunk to write the next frame into; `None` when every chunk is in flight (after
    /// taking completions back, and kicking the kernel when frames wait in the TX ring: in
    /// copy mode nothing completes without a kick).
    pub fn buffer(&mut self) -> Option<TxBuffer<'_>> {
        if self.free.is_empty() {
            self.complete();
        }
        if self.free.is_empty() && self.ring.pending() > 0 {
            self.flush();
        }
        let idx = self.free.pop()?;
        Some(TxBuffer {
            tx: self,
            idx: Some(idx),
        })
    }

    /// Copies `frame` into a free chunk and queues it. An empty frame is not sent (the kernel
    /// would refuse it): counted in [`TxStats::dropped`].
    ///
    /// # Errors
    /// [`TxError::Full`] when every chunk is in flight, [`TxError::TooLong`].
    pub fn send(&mut self, frame: &[u8]) -> Result<(), TxError> {
        let max = self.area.chunk_size() as usize;
        if frame.len() > max {
            // Not sent: counted, as `TxBuffer::send` counts it.
            self.stats.dropped += 1;
            return Err(TxError::TooLong {
                len: frame.len(),
                max,
            });
        }
        let buf = self.buffer().ok_or(TxError::Full)?;
        buf.send(frame.len(), |b| b.copy_from_slice(frame));
        Ok(())
    }

    /// Frames queued in the TX ring that the kernel has not taken yet.
    pub fn pending(&self) -> u32 {
        self.ring.pending()
    }

    /// Frames in the TX ring or sent and not completed.
    pub fn in_flight(&self) -> u32 {
        self.in_flight
    }

    /// Changes the automatic kick threshold (see [`XskConfig::auto_kick`]).
    pub fn set_auto_kick(&mut self, threshold: Option<u32>) {
        self.auto_kick = threshold;
    }

    /// The queue the socket is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Transmit counters.
    pub fn stats(&self) -> TxStats {
        self.stats
    }

    /// The kernel's counters for the socket.
    ///
    /// # Errors
    /// The `getsockopt` failure.
    pub fn kernel_stats(&self) -> io::Result<KernelStats> {
        kernel_stats(&self.user)
    }

    /// Where the transmit chunks are.
    pub fn account(&self) -> TxAccount {
        TxAccount {
            total: self.tx_frames,
            free: self.free.len() as u32,
            in_flight: self.in_flight,
        }
    }

    /// Largest frame, Ethernet header included, that the stack should send.
    pub fn max_frame(&self) -> usize {
        self.max_frame as usize
    }
}

impl std::fmt::Debug for XskTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskTx")
            .field("queue", &self.queue)
            .field("stats", &self.stats)
            .field("account", &self.account())
            .finish()
    }
}

/// A free transmit chunk, reserved: [`TxBuffer::send`] writes and queues the frame; dropped
/// unsent, the chunk goes back to the free list.
pub struct TxBuffer<'a> {
    tx: &'a mut XskTx,
    idx: Option<u32>,
}

impl TxBuffer<'_> {
    /// Lets `f` write a `len`-byte frame into the chunk and queues it in the TX ring. An empty
    /// frame (which the kernel would refuse) or one longer than the chunk is written into a
    /// scratch buffer and dropped (counted in [`TxStats::dropped`]): the callback always runs,
    /// as smoltcp requires.
    pub fn send<R>(mut self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        // `idx` stays in the buffer until the chunk is submitted: if `f` panics, the chunk
        // (back to `FREE` as its handle unwinds) returns to the free list in `drop`.
        let Some(idx) = self.idx else {
            // Not reachable: `idx` is taken only here, and `send` consumes the buffer.
            return f(&mut vec![0; len]);
        };
        let XskTx {
            area,
            ring,
            free,
            pool,
            in_flight,
            stats,
            auto_kick,
            tx_frames,
            ..
        } = &mut *self.tx;
        let Some(mut chunk) = area
            .tx_chunk(idx)
            .filter(|_| len > 0 && len <= area.chunk_size() as usize)
        else {
            self.idx = None;
            free.push(idx);
            stats.dropped += 1;
            return f(&mut vec![0; len]);
        };
        let r = f(&mut chunk.bytes_mut()[..len]);
        self.idx = None;
        let addr = chunk.submit();
        let mut w = ring.transmit(1);
        let queued = w.insert_once(XdpDesc {
            addr,
            len: len as u32,
            options: 0,
        });
        w.commit();
        drop(w);
        if queued {
            *in_flight += 1;
            stats.frames += 1;
            stats.bytes += len as u64;
        } else {
            // The TX ring is as large as the transmit pool, so this does not happen; the chunk
            // is taken back all the same.
            if let Ok(i) = area.reclaim(addr, pool.clone()) {
                free.push(i);
            }
            stats.dropped += 1;
        }
        if let Some(t) = *auto_kick {
            // At most the pool: a threshold above it would never be reached.
            if ring.pending() >= t.min(*tx_frames) {
                self.tx.flush();
            }
        }
        r
    }

    /// Room in the chunk.
    pub fn capacity(&self) -> usize {
        self.tx.area.chunk_size() as usize
    }
}

impl Drop for TxBuffer<'_> {
    fn drop(&mut self) {
        if let Some(idx) = self.idx.take() {
            self.tx.free.push(idx);
        }
    }
}

#[cfg(feature = "smoltcp")]
mod smol {
    use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
    use smoltcp::time::Instant;

    use super::{TxBuffer, XskTx};

    /// The receive token of a transmit-only device: never handed out.
    pub enum NoRx {}

    impl RxToken for NoRx {
        fn consume<R, F: FnOnce(&[u8]) -> R>(self, _f: F) -> R {
            match self {}
        }
    }

    impl TxToken for TxBuffer<'_> {
        fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
            self.send(len, f)
        }
    }

    /// Transmit only: receiving goes through [`XskRx`](super::XskRx) and the coalescer
    /// ([`LroDevice`](crate::phy::LroDevice)).
    impl Device for XskTx {
        type RxToken<'a> = NoRx;
        type TxToken<'a> = TxBuffer<'a>;

        fn receive(&mut self, _timestamp: Instant) -> Option<(NoRx, TxBuffer<'_>)> {
            None
        }

        fn transmit(&mut self, _timestamp: Instant) -> Option<TxBuffer<'_>> {
            self.buffer()
        }

        fn capabilities(&self) -> DeviceCapabilities {
            let mut caps = DeviceCapabilities::default();
            caps.medium = Medium::Ethernet;
            caps.max_transmission_unit = self.max_frame();
            caps
        }
    }
}

#[cfg(feature = "smoltcp")]
pub use smol::NoRx;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xdp::XdpMode;

    /// Runs `f` on a thread of its own in a fresh network namespace, with the redirect program
    /// on its `lo` (generic XDP, `lo` up); skips, saying why, without root or AF_XDP. Any
    /// other failure to attach is the backend's, not the machine's: the test fails.
    fn on_private_lo(f: impl FnOnce(&XdpProgram) + Send) {
        use lro_testkit::sys::skip;
        // The test's name, for the thread (`skip` reports it).
        let name = std::thread::current().name().unwrap_or("test").to_string();
        std::thread::scope(|s| {
            let thread = std::thread::Builder::new().name(name);
            let spawned = thread.spawn_scoped(s, || {
                if let Err(e) = sys::unshare_netns() {
                    skip(&format!("no network namespace of our own ({e})"));
                    return;
                }
                let up = std::process::Command::new("ip")
                    .args(["link", "set", "lo", "up"])
                    .status();
                if !up.as_ref().is_ok_and(|s| s.success()) {
                    skip(&format!("`ip link set lo up` failed ({up:?})"));
                    return;
                }
                match XdpProgram::attach("lo", XdpMode::Generic) {
                    Ok(xdp) => f(&xdp),
                    Err(e @ (XdpError::Permission { .. } | XdpError::Unsupported { .. })) => {
                        skip(&e.to_string())
                    }
                    Err(e) => std::panic!("generic XDP on lo: {e}"),
                }
            });
            spawned.expect("spawn the test's thread");
        });
    }

    fn small() -> XskConfig {
        XskConfig::default()
            .with_frames(64, 8)
            .with_bind(BindMode::Copy)
            .with_auto_kick(None)
    }

    /// A frame for the loopback receive queue (a local experimental EtherType, which the stack
    /// on lo ignores).
    fn lo_frame() -> Vec<u8> {
        lo_frame_of(60)
    }

    /// [`lo_frame`] `len` bytes long.
    fn lo_frame_of(len: usize) -> Vec<u8> {
        let mut f = vec![0xffu8; len];
        f[12..14].copy_from_slice(&[0x88, 0xb5]);
        f
    }

    /// Calls `done` until it returns true, every millisecond; fails with `what` after five
    /// seconds.
    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Sends `n` frames over `sock` and receives them back into `held` (lo loops them).
    fn echo(sock: &mut XskSocket, n: usize, held: &mut Vec<UmemFrame>) {
        let f = lo_frame();
        for _ in 0..n {
            sock.tx().send(&f).expect("sent");
        }
        assert_eq!(sock.tx().flush(), 0, "frames left in the TX ring");
        let want = held.len() + n;
        wait_until("frames lost", || {
            while let Some(frame) = sock.rx().receive_frame() {
                held.push(frame);
            }
            held.len() >= want
        });
    }

    /// Every returned chunk goes back to a fill ring that has room, in one refill: a single
    /// reservation saw the room as of the kernel's consumer index it last read, and left 30 of
    /// 36 chunks off the ring (found by a review).
    #[test]
    fn refill_posts_every_chunk_the_fill_ring_has_room_for() {
        on_private_lo(|xdp| {
            let config = XskConfig::default()
                .with_frames(64, 64)
                .with_bind(BindMode::Copy)
                .with_auto_kick(None);
            let mut sock = xdp.socket(0, &config).expect("socket");
            let mut held = Vec::new();
            echo(&mut sock, 10, &mut held);
            held.truncate(6);
            sock.rx().refill();
            echo(&mut sock, 30, &mut held);
            held.clear();
            let posted = sock.rx().refill();
            let account = sock.rx().account();
            assert_eq!(posted, 36, "{account}");
            assert_eq!(account.fill_ring, 64, "{account}");
        });
    }

    /// A transmit pool smaller than the kick threshold still sends: the threshold is capped at
    /// the pool, and `buffer` kicks when every chunk waits in the TX ring. Before, nothing
    /// kicked and 16 of 100 frames went out.
    #[test]
    fn a_pool_smaller_than_the_kick_threshold_still_sends() {
        on_private_lo(|xdp| {
            let config = XskConfig::default()
                .with_frames(64, 16)
                .with_bind(BindMode::Copy)
                .with_auto_kick(Some(32));
            let mut sock = xdp.socket(0, &config).expect("socket");
            let f = lo_frame();
            let mut sent = 0;
            for _ in 0..100 {
                match sock.tx().send(&f) {
                    Ok(()) => sent += 1,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
                // Keep the receive side from running out of chunks.
                while sock.rx().receive_frame().is_some() {}
            }
            assert_eq!(sent, 100, "{:?}", sock.tx().stats());
            // And with no threshold at all, `buffer` kicks when the pool runs dry.
            sock.tx().set_auto_kick(None);
            for _ in 0..100 {
                sock.tx().send(&f).expect("sent");
                while sock.rx().receive_frame().is_some() {}
            }
        });
    }

    /// The socket enters the XSKMAP only once its fill ring has chunks: a frame redirected to
    /// a socket with an empty fill ring is dropped (`rx_fill_ring_empty`), where without the
    /// socket it would have gone on to the kernel's stack. Loopback traffic (UDP datagrams,
    /// ~10,000 a second) runs while sockets are made; before, 17 of 20 sockets had dropped
    /// frames right after they were made (found by a review).
    #[test]
    fn a_new_socket_drops_nothing_while_its_fill_ring_is_posted() {
        on_private_lo(|xdp| {
            /// Stops the sender when dropped, also when an assertion fails (the scope waits for
            /// it before the panic goes on).
            struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for Stop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                }
            }
            let stop = std::sync::atomic::AtomicBool::new(false);
            std::thread::scope(|s| {
                s.spawn(|| {
                    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = udp.send_to(&[0u8; 18], "127.0.0.1:9");
                        std::thread::sleep(Duration::from_micros(100));
                    }
                });
                let _stop = Stop(&stop);
                let config = XskConfig::default()
                    .with_frames(4096, 8)
                    .with_bind(BindMode::Copy);
                let mut dropped = 0;
                for _ in 0..10 {
                    // The previous socket leaves the queue in the background: EBUSY until then.
                    let start = std::time::Instant::now();
                    let mut sock = loop {
                        match xdp.socket(0, &config) {
                            Ok(sock) => break sock,
                            Err(e) if start.elapsed() > Duration::from_secs(30) => {
                                std::panic!("no socket on queue 0: {e}")
                            }
                            Err(_) => std::thread::sleep(Duration::from_millis(10)),
                        }
                    };
                    dropped += sock.rx().kernel_stats().expect("stats").rx_fill_ring_empty;
                }
                assert_eq!(
                    dropped, 0,
                    "frames dropped by a socket with an empty fill ring"
                );
            });
        });
    }

    /// Receive and transmit frames that add up past `u32::MAX` are a configuration error, not
    /// an arithmetic overflow (a panic in a debug build).
    #[test]
    fn frame_counts_past_u32_max_are_an_error() {
        on_private_lo(|xdp| {
            let config = XskConfig::default().with_frames(u32::MAX, 8);
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                xdp.socket(0, &config).map(drop)
            }));
            match r {
                Ok(Err(XdpError::Os { source, .. })) => {
                    assert_eq!(source.kind(), io::ErrorKind::InvalidInput);
                }
                Ok(other) => std::panic!("expected an invalid-input error, got {other:?}"),
                Err(_) => std::panic!("socket() panicked on the frame counts"),
            }
        });
    }

    /// A transmit callback that panics (the caller catches it) leaves the chunk it was writing
    /// free, not lost: the transmit pool is still whole.
    #[test]
    fn a_panicking_transmit_callback_gives_its_chunk_back() {
        on_private_lo(|xdp| {
            let mut sock = match xdp.socket(0, &small()) {
                Ok(sock) => sock,
                Err(e @ (XdpError::Permission { .. } | XdpError::Unsupported { .. })) => {
                    lro_testkit::sys::skip(&e.to_string());
                    return;
                }
                Err(e) => std::panic!("socket: {e}"),
            };
            let tx = sock.tx();
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let buf = tx.buffer().expect("a free chunk");
                buf.send(60, |_| std::panic!("the stack's writer failed"))
            }));
            assert!(r.is_err());
            let a = tx.account();
            assert!(a.is_conserved(), "{a:?}");
            assert_eq!(a.free, a.total);
            // And the pool still sends all its frames.
            for _ in 0..a.total {
                tx.send(&[0u8; 60]).expect("a free chunk");
            }
        });
    }

    /// A frame longer than a chunk is not sent and is counted in `TxStats::dropped`, whichever
    /// way it was offered: by `XskTx::send` (it returned `TooLong` uncounted) or by a transmit
    /// buffer (counted).
    #[test]
    fn a_frame_longer_than_a_chunk_is_counted_dropped_by_send_too() {
        on_private_lo(|xdp| {
            let mut sock = xdp.socket(0, &small()).expect("socket");
            let tx = sock.tx();
            let r = tx.send(&[0u8; 2049]);
            assert_eq!(
                r,
                Err(TxError::TooLong {
                    len: 2049,
                    max: 2048
                })
            );
            assert_eq!(tx.stats().dropped, 1, "{:?}", tx.stats());
            let buf = tx.buffer().expect("a free chunk");
            buf.send(2049, |_| ());
            assert_eq!(tx.stats().dropped, 2, "{:?}", tx.stats());
            assert_eq!(tx.stats().frames, 0);
            let a = tx.account();
            assert!(a.is_conserved() && a.free == a.total, "{a:?}");
        });
    }

    /// A timeout shorter than a millisecond still waits: `poll(2)` takes whole milliseconds,
    /// and the timeout was rounded down to 0 (no wait at all).
    #[test]
    fn a_wait_shorter_than_a_millisecond_waits() {
        on_private_lo(|xdp| {
            let mut sock = xdp.socket(0, &small()).expect("socket");
            let timeout = Duration::from_micros(300);
            let t0 = std::time::Instant::now();
            assert!(!sock.rx().wait(Some(timeout)).expect("poll"), "no frame");
            // poll(2) sleeps at least its timeout when nothing arrives (nothing can: the
            // namespace's lo is idle).
            assert!(t0.elapsed() >= timeout, "{:?}", t0.elapsed());
        });
    }

    /// An empty frame is not sent: the kernel refuses an empty descriptor (counted in its
    /// `tx_invalid_descs`), and it was counted as a frame sent. It is counted dropped and its
    /// chunk stays free.
    #[test]
    fn an_empty_frame_is_counted_dropped_not_sent() {
        on_private_lo(|xdp| {
            let mut sock = xdp.socket(0, &small()).expect("socket");
            let tx = sock.tx();
            assert_eq!(tx.send(&[]), Ok(()));
            tx.buffer().expect("a free chunk").send(0, |_| ());
            assert_eq!(tx.flush(), 0);
            let s = tx.stats();
            assert_eq!((s.frames, s.dropped), (0, 2), "{s:?}");
            assert_eq!(tx.in_flight(), 0);
            let a = tx.account();
            assert!(a.is_conserved() && a.free == a.total, "{a:?}");
        });
    }

    /// Sent frames are counted with their bytes when queued; once the kernel completes them,
    /// every transmit chunk is free again and none in flight. A kick threshold above the pool
    /// is capped at it: queueing the whole pool kicks at once, without waiting for `flush` or
    /// for the next frame to find no free chunk.
    #[test]
    fn sent_frames_are_counted_and_their_chunks_come_back() {
        on_private_lo(|xdp| {
            let config = small().with_auto_kick(Some(32));
            let mut sock = xdp.socket(0, &config).expect("socket");
            let tx = sock.tx();
            let lens = [60, 61, 100, 1000, 60, 77, 90, 64];
            assert_eq!(lens.len(), tx.account().total as usize, "the whole pool");
            for len in lens {
                tx.send(&lo_frame_of(len)).expect("sent");
            }
            let s = tx.stats();
            assert_eq!(tx.pending(), 0, "kicked when the pool was queued: {s:?}");
            assert!(s.kicks > 0, "{s:?}");
            let bytes: usize = lens.iter().sum();
            assert_eq!(
                (s.frames, s.bytes, s.dropped),
                (8, bytes as u64, 0),
                "{s:?}"
            );
            wait_until("transmit completions", || {
                tx.complete();
                tx.stats().completed >= 8
            });
            let a = tx.account();
            assert!(a.is_conserved(), "{a:?}");
            assert_eq!((a.free, a.in_flight, tx.in_flight()), (8, 0, 0), "{a:?}");
        });
    }

    /// Receive counters, and the account while frames wait in the socket's batch: a read of
    /// the RX ring that found a single frame counts as a batch, bytes are counted per frame
    /// handed out, and frames read from the ring but not yet handed out are claimed (their
    /// chunks are held).
    #[test]
    fn received_frames_are_counted_and_accounted_while_batched() {
        on_private_lo(|xdp| {
            let mut sock = xdp.socket(0, &small()).expect("socket");
            // Sends frames of these lengths and waits until all are in the RX ring.
            let arrive = |sock: &mut XskSocket, lens: &[usize]| {
                for &len in lens {
                    sock.tx().send(&lo_frame_of(len)).expect("sent");
                }
                assert_eq!(sock.tx().flush(), 0);
                wait_until("frames lost", || {
                    sock.rx().account().rx_ring as usize >= lens.len()
                });
            };
            arrive(&mut sock, &[60]);
            let first = sock.rx().receive_frame().expect("a frame");
            let s = sock.rx().stats();
            assert_eq!((s.frames, s.bytes, s.batches), (1, 60, 1), "{s:?}");
            arrive(&mut sock, &[70, 80, 90]);
            let second = sock.rx().receive_frame().expect("a frame");
            assert_eq!(sock.rx().batched(), 2);
            let s = sock.rx().stats();
            assert_eq!((s.frames, s.bytes, s.batches), (2, 130, 2), "{s:?}");
            let a = sock.rx().account();
            assert!(a.is_conserved(), "{a}");
            assert_eq!((a.claimed, a.held, a.dropped), (4, 4, 0), "{a}");
            drop((first, second));
            let a = sock.rx().account();
            assert!(a.is_conserved(), "{a}");
            assert_eq!((a.held, a.returned, a.dropped), (2, 2, 2), "{a}");
        });
    }

    /// What `XskConfig::frame_size` says: the kernel keeps 256 bytes of headroom in a receive
    /// chunk, so a frame of `frame_size - 256` bytes arrives and one byte more is dropped (and
    /// counted by the kernel), not only frames longer than the chunk. On `lo`, our own
    /// transmitted frames come back through the generic XDP program to the socket.
    #[test]
    fn the_largest_received_frame_is_the_chunk_less_the_kernel_headroom() {
        on_private_lo(|xdp| {
            let mut sock = xdp.socket(0, &small()).expect("socket");
            let mut got: Vec<Option<usize>> = Vec::new();
            for len in [1792usize, 1793, 2048] {
                sock.tx().send(&lo_frame_of(len)).expect("sent");
                assert_eq!(sock.tx().flush(), 0);
                let deadline = std::time::Instant::now() + Duration::from_secs(2);
                let frame = loop {
                    if let Some(frame) = sock.rx().receive_frame() {
                        break Some(frame.len());
                    }
                    let k = sock.rx().kernel_stats().expect("statistics");
                    if k.rx_dropped > got.iter().filter(|g| g.is_none()).count() as u64 {
                        break None;
                    }
                    if std::time::Instant::now() > deadline {
                        std::panic!("frame of {len} bytes neither received nor dropped");
                    }
                    std::thread::sleep(Duration::from_millis(5));
                };
                got.push(frame);
            }
            assert_eq!(got, [Some(1792), None, None]);
            assert_eq!(sock.rx().kernel_stats().expect("statistics").rx_dropped, 2);
        });
    }
}
