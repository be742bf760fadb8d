//! The receive queue: large buffers posted to the HCA, copybreak of small frames, hand-up and
//! replacement of large ones, every buffer accounted for.
//!
//! An HCA receives into buffers the driver posted to the queue pair's receive queue (RQ), one
//! per receive work request, in the order they were posted. When none is posted, a
//! reliable-connected sender gets a receiver-not-ready NAK (RNR NAK) and must wait and retry;
//! Linux's connected-mode IPoIB allows no retries, so the connection is torn down and the
//! messages in flight are lost. Keeping the RQ full is the receive path's first duty.
//!
//! [`RxQueue::receive`] takes the next completion and decides, as Linux's
//! `ipoib_cm_handle_rx_wc` does after the seed commit ("IPoIB: Copy small received SKBs in
//! connected mode"):
//!
//! - **copybreak**: a frame of at most [`QueueConfig::copybreak`] bytes (default
//!   [`COPYBREAK_DEFAULT`], Linux's `IPOIB_CM_COPYBREAK`; Linux copies when strictly below, so
//!   255 gives its exact rule) is copied into a buffer from the small-buffer pool, and its
//!   large buffer is reposted at once: the RQ slot never empties. The frame goes up in the small
//!   buffer, cut to its length.
//! - **hand-up**: a larger frame (or a small one when the small pool is empty) goes up in its
//!   large buffer; the RQ slot is refilled from the large-buffer pool when one is free. When
//!   none is, [`Replacement::Wait`] (default) leaves the slot empty until a large buffer comes
//!   back from the stack (it is then reposted before anything else), and
//!   [`Replacement::Drop`] does what Linux does when its allocation fails: drops the frame and
//!   reposts its buffer.
//!
//! Frames go up as [`RxBuf`] handles: they lend their bytes (writable, so lro-core can rewrite
//! headers in place) and give the buffer back when dropped. All memory is the caller's:
//! buffer bytes in two slices, bookkeeping in an [`RxQueueStorage`]; nothing is allocated.
//!
//! # Accounting
//! Every large buffer is at every moment in exactly one place: free in the pool, posted to the
//! RQ, completed by the HCA and waiting in the completion queue, or up (an [`RxBuf`] the stack
//! holds). Every small buffer is free or up. While the queue runs, the RQ's slots are posted,
//! completed or waiting for a buffer, adding up to the RQ depth. [`RxQueue::accounting`] counts
//! them; [`Accounting::is_consistent`] checks the sums, which `tests/queue_props.rs` proves over
//! random arrival, consume and teardown orders. [`RxQueue::teardown`] flushes the posted and
//! completed buffers back to the pool (the RQ's work requests complete in flush error, as when a
//! queue pair is destroyed); buffers still up come back when their handles drop.
//!
//! The queue is used through shared references (the bookkeeping lives in [`Cell`]s), so the
//! handles it lends and the queue can be used side by side; it is not `Sync`, one poll loop
//! owns it.
//!
//! (The simulated HCA, `hca::SimHca`, needs the feature `test-utils`.)
//!
//! ```
//! use drivers_ipoib::hca::SimHca;
//! use drivers_ipoib::{Mode, QueueConfig, RxQueue, RxQueueStorage};
//!
//! let mode = Mode::connected(2044)?;
//! let storage: RxQueueStorage<'_, 8, 8> = RxQueueStorage::new();
//! let mut large = [0u8; 8 * 2048];
//! let mut small = [0u8; 8 * 256];
//! let queue = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 4))?;
//! let mut hca = SimHca::new(&queue);
//!
//! hca.deliver(&[0x08, 0x00, 0, 0, 0x45, 0, 0, 20])?; // a small IPoIB frame
//! let frame = queue.receive().expect("a completion")?;
//! assert!(frame.is_copied()); // copybreak: the large buffer is already posted again
//! assert_eq!(queue.posted(), 4);
//! assert_eq!(frame.as_ref(), &[0x08, 0x00, 0, 0, 0x45, 0, 0, 20]);
//! drop(frame); // back to the small pool
//! assert!(queue.accounting().is_consistent());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! [`Cell`]: core::cell::Cell

use core::cell::Cell;
use core::fmt;

use crate::mode::Mode;
use crate::wire::encap::{self, EtherType};

/// Linux's `IPOIB_CM_COPYBREAK`: frames up to this size are copied.
pub const COPYBREAK_DEFAULT: u16 = 256;

/// What a hand-up does when the large-buffer pool is empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Replacement {
    /// The frame goes up; its RQ slot stays empty until a large buffer comes back.
    #[default]
    Wait,
    /// The frame is dropped and its buffer reposted (Linux, when the replacement allocation
    /// fails): the RQ never shrinks, frames are lost instead.
    Drop,
}

/// Receive queue configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct QueueConfig {
    /// Transport mode: sets the large buffers' size and the GRH space in front of each frame.
    pub mode: Mode,
    /// Receive work requests kept posted (at most the number of large buffers).
    pub rq_depth: u16,
    /// Frames of at most this many bytes (encapsulation header included) are copied into a
    /// small buffer of this size; `None` hands every frame up.
    pub copybreak: Option<u16>,
    /// What a hand-up does when no large buffer is free.
    pub replacement: Replacement,
}

impl QueueConfig {
    /// `rq_depth` posted buffers, copybreak at [`COPYBREAK_DEFAULT`], [`Replacement::Wait`].
    pub const fn new(mode: Mode, rq_depth: u16) -> Self {
        Self {
            mode,
            rq_depth,
            copybreak: Some(COPYBREAK_DEFAULT),
            replacement: Replacement::Wait,
        }
    }

    /// The same with another copybreak threshold (`None`: off).
    pub const fn with_copybreak(mut self, copybreak: Option<u16>) -> Self {
        self.copybreak = copybreak;
        self
    }

    /// The same with another replacement policy.
    pub const fn with_replacement(mut self, replacement: Replacement) -> Self {
        self.replacement = replacement;
        self
    }

    /// Bytes of one large buffer: [`Mode::rx_buffer_len`].
    pub const fn large_len(&self) -> usize {
        self.mode.rx_buffer_len()
    }

    /// Bytes of one small buffer: the copybreak threshold (0 without copybreak).
    pub const fn small_len(&self) -> usize {
        match self.copybreak {
            Some(t) => t as usize,
            None => 0,
        }
    }
}

/// Why [`RxQueue::new`] refused its memory or configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LayoutError {
    /// More receive work requests than large buffers (or none at all).
    RqDepth {
        /// Asked for.
        rq_depth: u16,
        /// Large buffers.
        buffers: usize,
    },
    /// The large-buffer memory is smaller than `buffers * QueueConfig::large_len`.
    LargeMemory {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// The small-buffer memory is smaller than `buffers * QueueConfig::small_len`.
    SmallMemory {
        /// Bytes needed.
        needed: usize,
        /// Bytes given.
        got: usize,
    },
    /// More than 65535 buffers of a kind.
    TooManyBuffers,
    /// Another queue uses the storage (one queue at a time: the storage's slots and rings
    /// are the queue's state).
    StorageInUse,
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LayoutError::RqDepth { rq_depth, buffers } => write!(
                f,
                "receive queue depth {rq_depth} needs 1 to {buffers} large buffers posted"
            ),
            LayoutError::LargeMemory { needed, got } => {
                write!(f, "large-buffer memory: {needed} bytes needed, {got} given")
            }
            LayoutError::SmallMemory { needed, got } => {
                write!(f, "small-buffer memory: {needed} bytes needed, {got} given")
            }
            LayoutError::TooManyBuffers => f.write_str("at most 65535 buffers of each size"),
            LayoutError::StorageInUse => f.write_str("another receive queue uses this storage"),
        }
    }
}

impl core::error::Error for LayoutError {}

/// A completion the driver could not pass up. Its buffer is already posted again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RxError {
    /// The packet did not fit the buffer (the HCA's local length error).
    Length {
        /// Bytes the HCA had to place (GRH space included).
        byte_len: u32,
    },
    /// Shorter than the GRH space and the encapsulation header.
    Runt {
        /// Bytes completed.
        byte_len: u32,
    },
    /// [`Replacement::Drop`]: no large buffer was free, so the frame was dropped.
    NoReplacement,
}

impl fmt::Display for RxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RxError::Length { byte_len } => {
                write!(f, "{byte_len}-byte packet longer than the receive buffer")
            }
            RxError::Runt { byte_len } => {
                write!(
                    f,
                    "{byte_len}-byte completion shorter than the IPoIB header"
                )
            }
            RxError::NoReplacement => f.write_str("no large buffer to replace it: dropped"),
        }
    }
}

impl core::error::Error for RxError {}

/// Why the (simulated) HCA could not place a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refused {
    /// No receive buffer posted: the HCA answers a connected-mode sender with an RNR NAK.
    ReceiverNotReady,
    /// The queue is torn down.
    Down,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refused::ReceiverNotReady => "receiver not ready: no receive buffer posted (RNR NAK)",
            Refused::Down => "receive queue torn down",
        })
    }
}

impl core::error::Error for Refused {}

/// Receive queue counters (64-bit, never reset by the queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QueueStats {
    /// Completions taken from the completion queue.
    pub completions: u64,
    /// Frames passed up (copied or handed up).
    pub frames: u64,
    /// Bytes passed up.
    pub bytes: u64,
    /// Frames copied into a small buffer (copybreak), their large buffer reposted at once.
    pub copied: u64,
    /// Frames passed up in their large buffer.
    pub handed_up: u64,
    /// Hand-ups whose RQ slot was refilled at once from the large-buffer pool.
    pub replaced: u64,
    /// Hand-ups that left their RQ slot empty: no large buffer was free.
    pub slot_waits: u64,
    /// Empty RQ slots refilled by a buffer coming back from the stack.
    pub reposted_on_return: u64,
    /// Frames small enough to copy when the small pool was empty: handed up in their large
    /// buffer, or dropped (also counted in `dropped_no_buffer`) under [`Replacement::Drop`]
    /// with the large pool empty too.
    pub small_pool_empty: u64,
    /// Frames dropped under [`Replacement::Drop`].
    pub dropped_no_buffer: u64,
    /// Length errors (packet longer than the buffer).
    pub length_errors: u64,
    /// Completions shorter than the IPoIB header.
    pub runts: u64,
    /// Posted or completed buffers returned to the pool by [`RxQueue::teardown`].
    pub flushed: u64,
}

/// Where every buffer is right now ([`RxQueue::accounting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Accounting {
    /// Large buffers in all.
    pub large: usize,
    /// Large buffers in the pool.
    pub large_free: usize,
    /// Large buffers posted to the RQ.
    pub large_posted: usize,
    /// Large buffers the HCA completed, waiting for [`RxQueue::receive`].
    pub large_completed: usize,
    /// Large buffers up (held by [`RxBuf`] handles).
    pub large_up: usize,
    /// Small buffers in all.
    pub small: usize,
    /// Small buffers in the pool.
    pub small_free: usize,
    /// Small buffers up.
    pub small_up: usize,
    /// RQ slots waiting for a large buffer.
    pub owed: usize,
    /// The configured RQ depth.
    pub rq_depth: usize,
    /// The queue runs (not torn down).
    pub running: bool,
}

impl Accounting {
    /// Every buffer is in exactly one place, and (running) the RQ's slots add up to its depth,
    /// (torn down) nothing is posted, completed or owed.
    pub fn is_consistent(&self) -> bool {
        let large = self.large_free + self.large_posted + self.large_completed + self.large_up;
        let small = self.small_free + self.small_up;
        let slots = self.large_posted + self.large_completed + self.owed;
        large == self.large
            && small == self.small
            && if self.running {
                slots == self.rq_depth
            } else {
                slots == 0
            }
    }

    /// Nothing posted, completed or up: every buffer is back in its pool (after
    /// [`RxQueue::teardown`] and once every handle dropped).
    pub fn all_free(&self) -> bool {
        self.large_free == self.large && self.small_free == self.small
    }
}

/// The counters, one cell each (updating one does not copy the others).
#[derive(Default)]
struct Counters {
    completions: Cell<u64>,
    frames: Cell<u64>,
    bytes: Cell<u64>,
    copied: Cell<u64>,
    handed_up: Cell<u64>,
    replaced: Cell<u64>,
    slot_waits: Cell<u64>,
    reposted_on_return: Cell<u64>,
    small_pool_empty: Cell<u64>,
    dropped_no_buffer: Cell<u64>,
    length_errors: Cell<u64>,
    runts: Cell<u64>,
    flushed: Cell<u64>,
}

#[inline(always)]
fn add(c: &Cell<u64>, n: u64) {
    c.set(c.get() + n);
}

impl Counters {
    fn snapshot(&self) -> QueueStats {
        QueueStats {
            completions: self.completions.get(),
            frames: self.frames.get(),
            bytes: self.bytes.get(),
            copied: self.copied.get(),
            handed_up: self.handed_up.get(),
            replaced: self.replaced.get(),
            slot_waits: self.slot_waits.get(),
            reposted_on_return: self.reposted_on_return.get(),
            small_pool_empty: self.small_pool_empty.get(),
            dropped_no_buffer: self.dropped_no_buffer.get(),
            length_errors: self.length_errors.get(),
            runts: self.runts.get(),
            flushed: self.flushed.get(),
        }
    }
}

/// A completion: which buffer, how many bytes, how it went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Completion {
    buffer: u16,
    byte_len: u32,
    fits: bool,
}

impl Completion {
    const EMPTY: Self = Self {
        buffer: 0,
        byte_len: 0,
        fits: false,
    };
}

type Slot<'a> = Cell<Option<&'a mut [u8]>>;

/// The queue's bookkeeping, sized at compile time: `L` large buffers, `S` small ones. Put it
/// on the stack, or in a `Box` for large `L` (it is not `Sync`: in a `static` only behind a
/// cell that hands it out once); it holds no buffer bytes (a few dozen bytes per buffer). One
/// queue at a time uses it ([`LayoutError::StorageInUse`]).
pub struct RxQueueStorage<'a, const L: usize, const S: usize> {
    large: [Slot<'a>; L],
    small: [Slot<'a>; S],
    free_large: [Cell<u16>; L],
    free_small: [Cell<u16>; S],
    rq: [Cell<u16>; L],
    cq: [Cell<Completion>; L],
    /// A queue uses the storage.
    in_use: Cell<bool>,
}

impl<const L: usize, const S: usize> RxQueueStorage<'_, L, S> {
    /// Empty storage.
    pub const fn new() -> Self {
        Self {
            large: [const { Cell::new(None) }; L],
            small: [const { Cell::new(None) }; S],
            free_large: [const { Cell::new(0) }; L],
            free_small: [const { Cell::new(0) }; S],
            rq: [const { Cell::new(0) }; L],
            cq: [const { Cell::new(Completion::EMPTY) }; L],
            in_use: Cell::new(false),
        }
    }
}

impl<const L: usize, const S: usize> Default for RxQueueStorage<'_, L, S> {
    fn default() -> Self {
        Self::new()
    }
}

/// A stack of buffer indices (a free pool).
struct Stack<'a> {
    slots: &'a [Cell<u16>],
    len: Cell<usize>,
}

impl Stack<'_> {
    fn push(&self, v: u16) -> bool {
        let n = self.len.get();
        match self.slots.get(n) {
            Some(s) => {
                s.set(v);
                self.len.set(n + 1);
                true
            }
            None => false,
        }
    }

    fn pop(&self) -> Option<u16> {
        let n = self.len.get().checked_sub(1)?;
        self.len.set(n);
        self.slots.get(n).map(Cell::get)
    }
}

/// A FIFO ring (the RQ in posting order, the completion queue).
struct Fifo<'a, T: Copy> {
    slots: &'a [Cell<T>],
    head: Cell<usize>,
    len: Cell<usize>,
}

impl<T: Copy> Fifo<'_, T> {
    fn push(&self, v: T) -> bool {
        let (n, cap) = (self.len.get(), self.slots.len());
        if n == cap {
            return false;
        }
        // A wrap instead of `%`: a division per completion shows in the per-frame cost.
        let mut at = self.head.get() + n;
        if at >= cap {
            at -= cap;
        }
        self.slots[at].set(v);
        self.len.set(n + 1);
        true
    }

    fn pop(&self) -> Option<T> {
        let n = self.len.get().checked_sub(1)?;
        let head = self.head.get();
        let v = self.slots.get(head)?.get();
        let next = head + 1;
        self.head
            .set(if next == self.slots.len() { 0 } else { next });
        self.len.set(n);
        Some(v)
    }
}

/// The receive queue. See the [module documentation](self).
pub struct RxQueue<'a> {
    config: QueueConfig,
    /// Bytes of each small buffer, as cut at construction (the copybreak threshold then).
    small_len: u16,
    large: &'a [Slot<'a>],
    small: &'a [Slot<'a>],
    free_large: Stack<'a>,
    free_small: Stack<'a>,
    rq: Fifo<'a, u16>,
    cq: Fifo<'a, Completion>,
    owed: Cell<usize>,
    up_large: Cell<usize>,
    up_small: Cell<usize>,
    running: Cell<bool>,
    stats: Counters,
    /// The storage's "in use" mark, cleared when the queue is dropped.
    in_use: &'a Cell<bool>,
}

impl Drop for RxQueue<'_> {
    /// Lets another queue use the storage (no buffer handle outlives the queue).
    fn drop(&mut self) {
        self.in_use.set(false);
    }
}

impl fmt::Debug for RxQueue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxQueue")
            .field("config", &self.config)
            .field("accounting", &self.accounting())
            .finish_non_exhaustive()
    }
}

impl<'a> RxQueue<'a> {
    /// A queue over `storage`, cutting `L` large buffers of [`QueueConfig::large_len`] bytes
    /// from `large` and `S` small ones of [`QueueConfig::small_len`] from `small` (bytes beyond
    /// are unused), with `config.rq_depth` large buffers posted.
    ///
    /// # Errors
    /// [`LayoutError`] when the memory is too small, the RQ deeper than the large buffers, a
    /// pool larger than 65535, or another queue uses `storage`.
    pub fn new<const L: usize, const S: usize>(
        storage: &'a RxQueueStorage<'a, L, S>,
        large: &'a mut [u8],
        small: &'a mut [u8],
        config: QueueConfig,
    ) -> Result<Self, LayoutError> {
        if L > usize::from(u16::MAX) || S > usize::from(u16::MAX) {
            return Err(LayoutError::TooManyBuffers);
        }
        let depth = usize::from(config.rq_depth);
        if depth == 0 || depth > L {
            return Err(LayoutError::RqDepth {
                rq_depth: config.rq_depth,
                buffers: L,
            });
        }
        let (llen, slen) = (config.large_len(), config.small_len());
        let needed = L * llen;
        if large.len() < needed {
            return Err(LayoutError::LargeMemory {
                needed,
                got: large.len(),
            });
        }
        let needed = S * slen;
        if small.len() < needed {
            return Err(LayoutError::SmallMemory {
                needed,
                got: small.len(),
            });
        }
        // Last of the checks: nothing to undo after it.
        if storage.in_use.replace(true) {
            return Err(LayoutError::StorageInUse);
        }
        for (slot, chunk) in storage.large.iter().zip(large.chunks_exact_mut(llen)) {
            slot.set(Some(chunk));
        }
        let mut small = small;
        for slot in &storage.small {
            // `slen` may be 0 (no copybreak): every small buffer is then empty and unused.
            let (chunk, rest) = core::mem::take(&mut small).split_at_mut(slen);
            slot.set(Some(chunk));
            small = rest;
        }
        let q = Self {
            config,
            small_len: config.copybreak.unwrap_or(0),
            large: &storage.large,
            small: &storage.small,
            free_large: Stack {
                slots: &storage.free_large,
                len: Cell::new(0),
            },
            free_small: Stack {
                slots: &storage.free_small,
                len: Cell::new(0),
            },
            rq: Fifo {
                slots: &storage.rq,
                head: Cell::new(0),
                len: Cell::new(0),
            },
            cq: Fifo {
                slots: &storage.cq,
                head: Cell::new(0),
                len: Cell::new(0),
            },
            owed: Cell::new(0),
            up_large: Cell::new(0),
            up_small: Cell::new(0),
            running: Cell::new(true),
            stats: Counters::default(),
            in_use: &storage.in_use,
        };
        // Buffers 0..depth posted in order, the rest in the pool (the lowest index on top).
        for i in 0..depth {
            q.rq.push(i as u16);
        }
        for i in (depth..L).rev() {
            q.free_large.push(i as u16);
        }
        for i in (0..S).rev() {
            q.free_small.push(i as u16);
        }
        Ok(q)
    }

    /// The configuration.
    pub fn config(&self) -> &QueueConfig {
        &self.config
    }

    /// Changes the copybreak threshold, up to the small buffers' size (larger values are
    /// capped); `None` turns copybreak off.
    pub fn set_copybreak(&mut self, copybreak: Option<u16>) {
        // The small buffers' size as cut, not the current threshold: a lowered threshold or
        // copybreak turned off can be raised or turned on again.
        let cap = self.small_len;
        self.config.copybreak = match copybreak {
            Some(t) if cap > 0 => Some(t.min(cap)),
            // Small buffers of size 0 (no copybreak at construction) cannot hold anything:
            // stays off.
            Some(_) | None => None,
        };
    }

    /// Receive buffers posted to the RQ right now (0: the next packet meets an RNR NAK).
    pub fn posted(&self) -> usize {
        self.rq.len.get()
    }

    /// Completions waiting for [`RxQueue::receive`].
    pub fn completed(&self) -> usize {
        self.cq.len.get()
    }

    /// The counters.
    pub fn stats(&self) -> QueueStats {
        self.stats.snapshot()
    }

    /// Running (not torn down)?
    pub fn is_running(&self) -> bool {
        self.running.get()
    }

    /// Where every buffer is.
    pub fn accounting(&self) -> Accounting {
        Accounting {
            large: self.large.len(),
            large_free: self.free_large.len.get(),
            large_posted: self.rq.len.get(),
            large_completed: self.cq.len.get(),
            large_up: self.up_large.get(),
            small: self.small.len(),
            small_free: self.free_small.len.get(),
            small_up: self.up_small.get(),
            owed: self.owed.get(),
            rq_depth: usize::from(self.config.rq_depth),
            running: self.running.get(),
        }
    }

    /// The device side: what an HCA does with an arriving packet, for a backend that is not a
    /// DMA engine (the simulated HCA, a bridge from another device). Places an IPoIB packet of
    /// `len` bytes, written by `write` into the slice it is given, in the oldest posted buffer
    /// (after the GRH space, which `grh` fills in datagram mode, zeros when `None`), and
    /// completes it. A packet longer than the buffer completes with a length error (`write` is
    /// not called).
    ///
    /// # Errors
    /// [`Refused::ReceiverNotReady`] when no buffer is posted (an RNR NAK in connected mode),
    /// [`Refused::Down`] after [`RxQueue::teardown`].
    pub fn hca_place(
        &self,
        len: usize,
        grh: Option<&[u8; crate::mode::GRH_LEN]>,
        write: impl FnOnce(&mut [u8]),
    ) -> Result<(), Refused> {
        if !self.running.get() {
            return Err(Refused::Down);
        }
        let buffer = self.rq.pop().ok_or(Refused::ReceiverNotReady)?;
        let off = self.config.mode.grh_len();
        // A length no buffer holds completes as a length error, whatever its size.
        let byte_len = off.saturating_add(len).min(u32::MAX as usize);
        let mut fits = false;
        if let Some(slot) = self.large.get(usize::from(buffer)) {
            if let Some(buf) = slot.take() {
                if let Some(dst) = buf.get_mut(..byte_len) {
                    if off > 0 {
                        match grh {
                            Some(g) => dst[..off].copy_from_slice(g),
                            None => dst[..off].fill(0),
                        }
                    }
                    write(&mut dst[off..]);
                    fits = true;
                }
                slot.set(Some(buf));
            }
        }
        // The CQ holds as many entries as there are large buffers: never full here.
        self.cq.push(Completion {
            buffer,
            byte_len: byte_len as u32,
            fits,
        });
        Ok(())
    }

    /// Posts a large buffer (while running) or returns it to the pool.
    fn repost(&self, buffer: u16) {
        if self.running.get() {
            self.rq.push(buffer);
        } else {
            self.free_large.push(buffer);
        }
    }

    /// The next received frame: copied (copybreak) or handed up in its large buffer, `Err`
    /// for a completion that cannot go up (its buffer is posted again), `None` when nothing
    /// is waiting.
    pub fn receive(&self) -> Option<Result<RxBuf<'_, 'a>, RxError>> {
        let c = self.cq.pop()?;
        add(&self.stats.completions, 1);
        let off = self.config.mode.grh_len();
        if !c.fits {
            self.repost(c.buffer);
            add(&self.stats.length_errors, 1);
            return Some(Err(RxError::Length {
                byte_len: c.byte_len,
            }));
        }
        let byte_len = c.byte_len as usize;
        if byte_len < off + encap::HEADER_LEN {
            self.repost(c.buffer);
            add(&self.stats.runts, 1);
            return Some(Err(RxError::Runt {
                byte_len: c.byte_len,
            }));
        }
        let len = byte_len - off;
        if self.config.copybreak.is_some_and(|t| len <= usize::from(t)) {
            match self.copy_small(c.buffer, off, len) {
                Some(frame) => return Some(Ok(frame)),
                None => add(&self.stats.small_pool_empty, 1),
            }
        }
        // Hand-up: a replacement for the RQ slot first.
        match self.free_large.pop() {
            Some(r) => {
                self.rq.push(r);
                add(&self.stats.replaced, 1);
            }
            None if self.config.replacement == Replacement::Drop => {
                self.repost(c.buffer);
                add(&self.stats.dropped_no_buffer, 1);
                return Some(Err(RxError::NoReplacement));
            }
            None => {
                self.owed.set(self.owed.get() + 1);
                add(&self.stats.slot_waits, 1);
            }
        }
        let buf = self.large.get(usize::from(c.buffer)).and_then(Cell::take);
        self.up_large.set(self.up_large.get() + 1);
        add(&self.stats.handed_up, 1);
        add(&self.stats.frames, 1);
        add(&self.stats.bytes, len as u64);
        Some(Ok(RxBuf {
            queue: self,
            buf,
            index: c.buffer,
            small: false,
            start: off as u32,
            end: byte_len as u32,
        }))
    }

    /// Copybreak: `len` bytes at `off` of large buffer `buffer` into a small buffer; the large
    /// one is posted again. `None` (nothing changed) when the small pool is empty.
    fn copy_small(&self, buffer: u16, off: usize, len: usize) -> Option<RxBuf<'_, 'a>> {
        let s = self.free_small.pop()?;
        let (Some(sslot), Some(lslot)) = (
            self.small.get(usize::from(s)),
            self.large.get(usize::from(buffer)),
        ) else {
            self.free_small.push(s);
            return None;
        };
        let (sbuf, lbuf) = (sslot.take(), lslot.take());
        let copied = match (sbuf, lbuf) {
            (Some(sbuf), Some(lbuf)) => {
                let ok = match (sbuf.get_mut(..len), lbuf.get(off..off + len)) {
                    (Some(d), Some(src)) => {
                        d.copy_from_slice(src);
                        true
                    }
                    _ => false,
                };
                lslot.set(Some(lbuf));
                if ok {
                    Some(sbuf)
                } else {
                    sslot.set(Some(sbuf));
                    None
                }
            }
            (s2, l2) => {
                sslot.set(s2);
                lslot.set(l2);
                None
            }
        };
        let Some(sbuf) = copied else {
            self.free_small.push(s);
            return None;
        };
        self.repost(buffer);
        self.up_small.set(self.up_small.get() + 1);
        add(&self.stats.copied, 1);
        add(&self.stats.frames, 1);
        add(&self.stats.bytes, len as u64);
        Some(RxBuf {
            queue: self,
            buf: Some(sbuf),
            index: s,
            small: true,
            start: 0,
            end: len as u32,
        })
    }

    /// A buffer coming back from the stack.
    fn give_back(&self, small: bool, index: u16, buf: &'a mut [u8]) {
        let i = usize::from(index);
        if small {
            if let Some(slot) = self.small.get(i) {
                slot.set(Some(buf));
            }
            self.up_small.set(self.up_small.get().saturating_sub(1));
            self.free_small.push(index);
            return;
        }
        if let Some(slot) = self.large.get(i) {
            slot.set(Some(buf));
        }
        self.up_large.set(self.up_large.get().saturating_sub(1));
        let owed = self.owed.get();
        if self.running.get() && owed > 0 {
            // An empty RQ slot first: the HCA needs it more than the pool does.
            self.owed.set(owed - 1);
            self.rq.push(index);
            add(&self.stats.reposted_on_return, 1);
        } else {
            self.free_large.push(index);
        }
    }

    /// Tears the queue down: posted buffers are flushed back to the pool (their work requests
    /// complete in flush error), completions not yet received are discarded with their buffers
    /// returned, and no slot waits any more. Buffers up come back to the pool as their handles
    /// drop. The HCA refuses packets until [`RxQueue::restart`].
    pub fn teardown(&self) {
        self.running.set(false);
        let mut flushed = 0;
        while let Some(b) = self.rq.pop() {
            self.free_large.push(b);
            flushed += 1;
        }
        while let Some(c) = self.cq.pop() {
            self.free_large.push(c.buffer);
            flushed += 1;
        }
        self.owed.set(0);
        add(&self.stats.flushed, flushed);
    }

    /// Starts a torn-down queue again (a new connection): posts up to the RQ depth from the
    /// pool; slots it cannot fill wait for buffers to come back. Nothing happens while running.
    pub fn restart(&self) {
        if self.running.get() {
            return;
        }
        self.running.set(true);
        let depth = usize::from(self.config.rq_depth);
        let mut posted = 0;
        while posted < depth {
            let Some(b) = self.free_large.pop() else {
                break;
            };
            self.rq.push(b);
            posted += 1;
        }
        self.owed.set(depth - posted);
    }
}

/// A received frame in its buffer (large, handed up; or small, copied), lent until dropped.
///
/// The bytes are the IPoIB packet: the encapsulation header and its payload. Dropping the
/// handle gives the buffer back: a small one to its pool, a large one to an empty RQ slot if
/// one waits, else to its pool.
pub struct RxBuf<'q, 'a> {
    queue: &'q RxQueue<'a>,
    buf: Option<&'a mut [u8]>,
    index: u16,
    small: bool,
    start: u32,
    end: u32,
}

impl RxBuf<'_, '_> {
    /// Copied into a small buffer (copybreak) rather than handed up in its large buffer?
    pub fn is_copied(&self) -> bool {
        self.small
    }

    /// The frame's length.
    pub fn len(&self) -> usize {
        (self.end - self.start) as usize
    }

    /// Never empty (a frame has at least the encapsulation header); for clippy's sake.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }

    /// The payload type from the encapsulation header.
    pub fn ether_type(&self) -> EtherType {
        match encap::Packet::new_checked(self.as_ref()) {
            Ok(p) => p.ether_type(),
            Err(_) => EtherType(0),
        }
    }
}

impl fmt::Debug for RxBuf<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxBuf")
            .field("len", &self.len())
            .field("copied", &self.small)
            .field("buffer", &self.index)
            .finish()
    }
}

impl AsRef<[u8]> for RxBuf<'_, '_> {
    fn as_ref(&self) -> &[u8] {
        let r = self.start as usize..self.end as usize;
        match &self.buf {
            Some(b) => b.get(r).unwrap_or(&[]),
            None => &[],
        }
    }
}

impl AsMut<[u8]> for RxBuf<'_, '_> {
    fn as_mut(&mut self) -> &mut [u8] {
        let r = self.start as usize..self.end as usize;
        match &mut self.buf {
            Some(b) => b.get_mut(r).unwrap_or(&mut []),
            None => &mut [],
        }
    }
}

impl Drop for RxBuf<'_, '_> {
    fn drop(&mut self) {
        if let Some(buf) = self.buf.take() {
            self.queue.give_back(self.small, self.index, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec;
    use std::vec::Vec;

    use super::*;
    use crate::hca::SimHca;

    const MODE: Mode = match Mode::connected(1024) {
        Ok(m) => m,
        Err(_) => panic!(),
    };

    fn frame(len: usize, tag: u8) -> Vec<u8> {
        let mut f = vec![tag; len];
        f[..4].copy_from_slice(&[0x08, 0x00, 0, 0]);
        f
    }

    #[test]
    fn one_queue_at_a_time_uses_a_storage() {
        let storage: RxQueueStorage<'_, 4, 2> = RxQueueStorage::new();
        let (mut large, mut small) = (vec![0u8; 4 * 1028], vec![0u8; 2 * 256]);
        let (mut large2, mut small2) = (large.clone(), small.clone());
        let (mut large3, mut small3) = (large.clone(), small.clone());
        let config = QueueConfig::new(MODE, 2);
        let q = RxQueue::new(&storage, &mut large, &mut small, config).unwrap();
        let second = RxQueue::new(&storage, &mut large2, &mut small2, config);
        assert_eq!(second.err(), Some(LayoutError::StorageInUse));
        // The first still has its own buffers: a frame delivered to it comes back from it.
        {
            let mut hca = SimHca::new(&q);
            hca.deliver(&frame(100, 7)).unwrap();
            assert_eq!(q.receive().unwrap().unwrap().as_ref(), &frame(100, 7)[..]);
        }
        drop(q);
        let again = RxQueue::new(&storage, &mut large3, &mut small3, config);
        assert!(again.is_ok(), "free once the first queue is gone");
    }

    #[test]
    fn copybreak_reposts_at_once_and_handup_takes_a_replacement() {
        let storage: RxQueueStorage<'_, 4, 2> = RxQueueStorage::new();
        let mut large = vec![0u8; 4 * 1028];
        let mut small = vec![0u8; 2 * 256];
        let q = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(MODE, 2)).unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(256, 1)).unwrap();
        hca.deliver(&frame(257, 2)).unwrap();
        assert_eq!(q.posted(), 0);
        assert_eq!(hca.deliver(&frame(60, 3)), Err(Refused::ReceiverNotReady));

        let a = q.receive().unwrap().unwrap();
        assert!(a.is_copied(), "256 bytes: at the threshold, copied");
        assert_eq!(a.as_ref(), &frame(256, 1)[..]);
        assert_eq!(q.posted(), 1);
        let b = q.receive().unwrap().unwrap();
        assert!(!b.is_copied());
        assert_eq!(b.as_ref(), &frame(257, 2)[..]);
        // Replaced from the pool (buffers 2 and 3 were free).
        assert_eq!(q.posted(), 2);
        let s = q.stats();
        assert_eq!(
            (s.copied, s.handed_up, s.replaced, s.slot_waits),
            (1, 1, 1, 0)
        );
        assert!(q.accounting().is_consistent());
        drop((a, b));
        let acc = q.accounting();
        assert_eq!((acc.large_free, acc.small_free, acc.large_up), (2, 2, 0));
    }

    #[test]
    fn an_empty_pool_leaves_the_slot_waiting_until_a_buffer_returns() {
        let storage: RxQueueStorage<'_, 2, 0> = RxQueueStorage::new();
        let mut large = vec![0u8; 2 * 1028];
        let q = RxQueue::new(
            &storage,
            &mut large,
            &mut [],
            QueueConfig::new(MODE, 2).with_copybreak(None),
        )
        .unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(100, 1)).unwrap();
        hca.deliver(&frame(100, 2)).unwrap();
        let a = q.receive().unwrap().unwrap();
        let b = q.receive().unwrap().unwrap();
        assert_eq!(q.posted(), 0);
        assert_eq!(q.accounting().owed, 2);
        assert_eq!(hca.deliver(&frame(100, 3)), Err(Refused::ReceiverNotReady));
        drop(a);
        assert_eq!(q.posted(), 1, "the returned buffer went straight to the RQ");
        hca.deliver(&frame(100, 3)).unwrap();
        assert_eq!(q.receive().unwrap().unwrap().as_ref(), &frame(100, 3)[..]);
        drop(b);
        let s = q.stats();
        assert_eq!((s.slot_waits, s.reposted_on_return), (3, 3));
        assert!(q.accounting().is_consistent());
        assert_eq!(q.posted(), 2);
    }

    #[test]
    fn drop_policy_keeps_the_rq_full() {
        let storage: RxQueueStorage<'_, 1, 0> = RxQueueStorage::new();
        let mut large = vec![0u8; 1028];
        let cfg = QueueConfig::new(MODE, 1)
            .with_copybreak(None)
            .with_replacement(Replacement::Drop);
        let q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(100, 1)).unwrap();
        assert_eq!(q.receive().unwrap().unwrap_err(), RxError::NoReplacement);
        assert_eq!(q.posted(), 1);
        assert_eq!(q.stats().dropped_no_buffer, 1);
    }

    #[test]
    fn small_pool_empty_falls_back_to_handup() {
        let storage: RxQueueStorage<'_, 4, 1> = RxQueueStorage::new();
        let mut large = vec![0u8; 4 * 1028];
        let mut small = vec![0u8; 256];
        let q = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(MODE, 2)).unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(60, 1)).unwrap();
        hca.deliver(&frame(60, 2)).unwrap();
        let a = q.receive().unwrap().unwrap();
        let b = q.receive().unwrap().unwrap();
        assert!(a.is_copied() && !b.is_copied());
        assert_eq!(b.as_ref(), &frame(60, 2)[..]);
        assert_eq!(q.stats().small_pool_empty, 1);
    }

    #[test]
    fn datagram_mode_skips_the_grh_space() {
        let storage: RxQueueStorage<'_, 2, 2> = RxQueueStorage::new();
        let mode = Mode::DATAGRAM_2K;
        let mut large = vec![0u8; 2 * mode.rx_buffer_len()];
        let mut small = vec![0u8; 2 * 256];
        let q = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(mode, 2)).unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(2048, 7)).unwrap();
        hca.deliver(&frame(2049, 8)).unwrap();
        hca.deliver(&frame(100, 9)).ok();
        let big = q.receive().unwrap().unwrap();
        assert_eq!(big.len(), 2048);
        assert_eq!(big.as_ref(), &frame(2048, 7)[..]);
        // Counted without the GRH space, as the stack gets it.
        assert_eq!((q.stats().frames, q.stats().bytes), (1, 2048));
        assert_eq!(
            q.receive().unwrap().unwrap_err(),
            RxError::Length {
                byte_len: 40 + 2049
            }
        );
        // The big frame's slot waits (no spare buffer), the failed one is posted again.
        assert_eq!(q.posted(), 1);
        drop(big);
        assert_eq!(q.posted(), 2);
    }

    #[test]
    fn absurd_lengths_complete_as_length_errors() {
        let storage: RxQueueStorage<'_, 1, 0> = RxQueueStorage::new();
        let mut large = vec![0u8; 1028];
        let cfg = QueueConfig::new(MODE, 1).with_copybreak(None);
        let q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
        let mut called = false;
        q.hca_place(usize::MAX, None, |_| called = true).unwrap();
        assert!(!called);
        assert!(matches!(
            q.receive().unwrap(),
            Err(RxError::Length { byte_len: u32::MAX })
        ));
        assert_eq!(q.posted(), 1);
        let st = q.stats();
        assert_eq!((st.length_errors, st.runts, st.frames), (1, 0, 0));
    }

    #[test]
    fn runts_and_layout_errors() {
        let storage: RxQueueStorage<'_, 2, 0> = RxQueueStorage::new();
        let mut large = vec![0u8; 2 * 1028];
        let cfg = QueueConfig::new(MODE, 2).with_copybreak(None);
        assert_eq!(
            RxQueue::new(&storage, &mut large[..2000], &mut [], cfg).unwrap_err(),
            LayoutError::LargeMemory {
                needed: 2056,
                got: 2000
            }
        );
        let storage: RxQueueStorage<'_, 2, 0> = RxQueueStorage::new();
        assert!(matches!(
            RxQueue::new(&storage, &mut large, &mut [], QueueConfig::new(MODE, 3)),
            Err(LayoutError::RqDepth { .. })
        ));
        let storage: RxQueueStorage<'_, 2, 1> = RxQueueStorage::new();
        assert!(matches!(
            RxQueue::new(
                &storage,
                &mut large,
                &mut [0u8; 10],
                QueueConfig::new(MODE, 2)
            ),
            Err(LayoutError::SmallMemory { .. })
        ));
        let storage: RxQueueStorage<'_, 2, 0> = RxQueueStorage::new();
        let q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
        let mut hca = SimHca::new(&q);
        hca.deliver(&[0x08, 0]).unwrap();
        assert_eq!(
            q.receive().unwrap().unwrap_err(),
            RxError::Runt { byte_len: 2 }
        );
        assert_eq!(q.posted(), 2);
        let st = q.stats();
        assert_eq!((st.runts, st.length_errors, st.frames), (1, 0, 0));
    }

    #[test]
    fn layout_limits_are_exact() {
        // MODE's buffers are 1028 bytes; copybreak 256 makes the small ones 256.
        let cfg = QueueConfig::new(MODE, 2).with_copybreak(Some(256));
        let (mut large, mut small) = (vec![0u8; 2 * 1028], vec![0u8; 2 * 256]);
        let new = |large: &mut [u8], small: &mut [u8], cfg| {
            let storage: RxQueueStorage<'_, 2, 2> = RxQueueStorage::new();
            RxQueue::new(&storage, large, small, cfg).map(|_| ())
        };
        assert_eq!(new(&mut large, &mut small, cfg), Ok(()));
        assert_eq!(
            new(&mut large[1..], &mut small, cfg),
            Err(LayoutError::LargeMemory {
                needed: 2056,
                got: 2055
            })
        );
        assert_eq!(
            new(&mut large, &mut small[1..], cfg),
            Err(LayoutError::SmallMemory {
                needed: 512,
                got: 511
            })
        );
        // A depth of every buffer is fine; none is not a queue.
        let none = QueueConfig::new(MODE, 0);
        assert_eq!(
            new(&mut large, &mut small, none.with_copybreak(Some(256))),
            Err(LayoutError::RqDepth {
                rq_depth: 0,
                buffers: 2
            })
        );
    }

    #[test]
    fn datagram_mode_writes_the_grh_in_front_of_the_packet() {
        // The GRH space is the buffer's first 40 bytes, as an HCA's DMA fills it; the frame
        // handed up starts after it, and the GRH is where the buffer memory says.
        let mode = Mode::DATAGRAM_2K;
        let mut large = vec![0xeeu8; mode.rx_buffer_len()];
        let grh: [u8; crate::mode::GRH_LEN] = core::array::from_fn(|i| i as u8 + 1);
        {
            let storage: RxQueueStorage<'_, 1, 0> = RxQueueStorage::new();
            let cfg = QueueConfig::new(mode, 1).with_copybreak(None);
            let q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
            let mut hca = SimHca::new(&q);
            hca.set_grh(Some(grh));
            hca.deliver(&frame(60, 7)).unwrap();
            assert_eq!(q.receive().unwrap().unwrap().as_ref(), &frame(60, 7)[..]);
        }
        assert_eq!(large[..40], grh);
        assert_eq!(large[40..100], frame(60, 7)[..]);
        // Without a GRH, zeros where it would be.
        {
            let storage: RxQueueStorage<'_, 1, 0> = RxQueueStorage::new();
            let cfg = QueueConfig::new(mode, 1).with_copybreak(None);
            let q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
            SimHca::new(&q).deliver(&frame(60, 8)).unwrap();
        }
        assert_eq!(large[..40], [0; 40]);
    }

    #[test]
    fn teardown_flushes_and_handles_come_back_to_the_pool() {
        let storage: RxQueueStorage<'_, 4, 2> = RxQueueStorage::new();
        let mut large = vec![0u8; 4 * 1028];
        let mut small = vec![0u8; 2 * 256];
        let q = RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(MODE, 3)).unwrap();
        let mut hca = SimHca::new(&q);
        for len in [50, 500, 600] {
            hca.deliver(&frame(len, 1)).unwrap();
        }
        let a = q.receive().unwrap().unwrap();
        let b = q.receive().unwrap().unwrap();
        q.teardown();
        assert_eq!(hca.deliver(&frame(50, 1)), Err(Refused::Down));
        let st = hca.stats();
        assert_eq!(
            (st.delivered, st.bytes, st.refused_down, st.rnr_naks),
            (3, 50 + 500 + 600, 1, 0),
            "the HCA counts the refusal as one of a torn-down queue"
        );
        assert!(
            q.receive().is_none(),
            "the unreceived completion was flushed"
        );
        assert!(q.accounting().is_consistent());
        drop((a, b));
        let acc = q.accounting();
        assert!(acc.all_free(), "{acc:?}");
        q.restart();
        assert_eq!(q.posted(), 3);
        assert!(q.accounting().is_consistent());
    }

    #[test]
    fn copybreak_can_be_lowered_and_turned_off() {
        let storage: RxQueueStorage<'_, 2, 2> = RxQueueStorage::new();
        let mut large = vec![0u8; 2 * 1028];
        let mut small = vec![0u8; 2 * 256];
        let mut q =
            RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(MODE, 1)).unwrap();
        q.set_copybreak(Some(1000));
        assert_eq!(
            q.config().copybreak,
            Some(256),
            "capped at the small buffers' size"
        );
        q.set_copybreak(Some(100));
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(101, 1)).unwrap();
        assert!(!q.receive().unwrap().unwrap().is_copied());
    }

    #[test]
    fn copybreak_can_be_raised_again_and_turned_back_on() {
        let storage: RxQueueStorage<'_, 2, 2> = RxQueueStorage::new();
        let mut large = vec![0u8; 2 * 1028];
        let mut small = vec![0u8; 2 * 256];
        let mut q =
            RxQueue::new(&storage, &mut large, &mut small, QueueConfig::new(MODE, 1)).unwrap();
        // Lowered, then raised back: the small buffers still hold 256 bytes.
        q.set_copybreak(Some(100));
        q.set_copybreak(Some(256));
        assert_eq!(q.config().copybreak, Some(256));
        // Off, then on again.
        q.set_copybreak(None);
        q.set_copybreak(Some(200));
        assert_eq!(q.config().copybreak, Some(200));
        let mut hca = SimHca::new(&q);
        hca.deliver(&frame(200, 1)).unwrap();
        let f = q.receive().unwrap().unwrap();
        assert!(f.is_copied());
        assert_eq!(f.as_ref(), &frame(200, 1)[..]);
        drop(f);
        // A queue built without copybreak has empty small buffers: it stays off.
        let storage: RxQueueStorage<'_, 1, 1> = RxQueueStorage::new();
        let mut large = vec![0u8; 1028];
        let cfg = QueueConfig::new(MODE, 1).with_copybreak(None);
        let mut q = RxQueue::new(&storage, &mut large, &mut [], cfg).unwrap();
        q.set_copybreak(Some(256));
        assert_eq!(q.config().copybreak, None);
    }
}
