//! Transmit side: a queue of sent super-segments with lazy head trimming (the fourth seed).
//!
//! A sender hands a TSO device 64 KB super-segments. With a close peer the ACK for the first
//! part of one can arrive while the NIC is still reading it (at 10 Gb/s a 64 KB frame takes
//! ~54 us on the wire, a LAN round trip can be shorter). Trimming the ACKed head off at that
//! moment means copying the rest (Linux `tcp_trim_head` had to `pskb_expand_head` because the
//! transmit clone was still alive). The fix, Linux commit "tcp: avoid expensive
//! pskb_expand_head() calls" (Eric Dumazet, net-next, April 2012): don't trim on ACK, remember
//! how much is ACKed, and trim only when a retransmit needs it. Most of the time a later ACK
//! covers the whole super-segment and it is freed without ever being touched.
//!
//! [`TxQueue`] keeps each sent super-segment as the caller's buffer handle `B` with two
//! ownership facts: how much of it is ACKed and how many transmissions of it the NIC has not
//! yet completed. The rules, each from its source:
//!
//! - An ACK is acceptable when `SND.UNA < SEG.ACK =< SND.NXT`; one with `SEG.ACK =< SND.UNA`
//!   is a duplicate or old and changes nothing; one beyond `SND.NXT` acknowledges data never
//!   sent and is refused (RFC 9293 section 3.10.7.4), all compared mod 2^32 (section 3.4).
//!   Any `u32` is a valid input: hostile values give an error, never a panic.
//! - A fully ACKed super-segment is handed back to the caller exactly once, and only when the
//!   NIC has completed every transmission of it (the seed: "we can free it with minimal cost
//!   since clone was already freed by TX completion"); otherwise it is handed back by the
//!   completion that finishes the last one ([`TxQueue::complete`]).
//! - A partly ACKed super-segment only records the ACKed offset: no copy, no write. The queue
//!   needs only `B: AsRef<[u8]>` and never asks for `&mut` access, so it cannot write to a
//!   buffer the NIC may be reading; the caller gets the handle (and with it write access)
//!   back only after the NIC is done. `as_ref` must give the same bytes while the queue holds
//!   the handle (a handle whose length can shrink behind the queue's back makes a retransmit
//!   slice past its end, which panics).
//! - A retransmit ([`TxQueue::retransmit`]) produces the unACKed remainder as a view: headers
//!   rebuilt for the new sequence number into a small caller buffer, payload borrowed from the
//!   original buffer from the ACKed offset on. The trim is derived from `SND.UNA` inside the
//!   queue; no method takes a trim length (Neal Cardwell's review of the seed patch: a
//!   caller-supplied length "invites the caller to chop off an arbitrary amount").
//! - A retransmit posted to the NIC without copying is one more transmission the NIC owns:
//!   it returns a [`TxToken`] and the buffer stays held until that completion too.
//!
//! For a device without TSO, [`Retransmit::gso`] (and [`gso::segment`] for a fresh
//! super-segment) splits the view into MSS-size frames.
//!
//! # Example
//!
//! ```
//! use lro_core::tx::{AckOutcome, Completion, RetransmitOptions, TxQueue};
//! use lro_core::LinkKind;
//! # fn superseg(seq: u32, payload: usize) -> Vec<u8> {
//! #     let mut f = vec![0u8; 14 + 20 + 20 + payload];
//! #     f[12] = 0x08;
//! #     f[14] = 0x45;
//! #     f[16..18].copy_from_slice(&((40 + payload) as u16).to_be_bytes());
//! #     f[22] = 64;
//! #     f[23] = 6;
//! #     f[26..34].copy_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
//! #     f[38..42].copy_from_slice(&seq.to_be_bytes());
//! #     f[46] = 0x50;
//! #     f[47] = 0x10;
//! #     for (i, b) in f[54..].iter_mut().enumerate() { *b = i as u8; }
//! #     f
//! # }
//! // Room for 8 super-segments in flight; the next byte to send is 1000.
//! let mut q: TxQueue<Vec<u8>, 8> = TxQueue::new(1000, LinkKind::Ethernet);
//! let mut freed = Vec::new();
//!
//! // Send 60000 bytes; the NIC now reads the buffer (the token stands for that).
//! let token = q.push(superseg(1000, 60000)).map_err(|e| e.error).unwrap();
//!
//! // The first 20000 bytes are ACKed while the NIC still owns the buffer: only an offset.
//! assert_eq!(q.ack(21000, |b| freed.push(b)), Ok(AckOutcome::Advanced { released: 0 }));
//!
//! // A retransmit: the unACKed 40000 bytes, headers rebuilt for sequence number 21000.
//! let mut hdr = [0u8; 128];
//! let rtx = q.retransmit(0, &mut hdr, RetransmitOptions::new()).unwrap();
//! assert_eq!(rtx.seq(), 21000);
//! assert_eq!(rtx.payload().len(), 40000);
//! assert_eq!(rtx.payload()[0], (20000 % 256) as u8);
//!
//! // All ACKed, still owned by the NIC: held. The completion hands it back.
//! assert_eq!(q.ack(61000, |b| freed.push(b)), Ok(AckOutcome::Advanced { released: 0 }));
//! assert!(freed.is_empty());
//! assert_eq!(q.complete(token, |b| freed.push(b)), Ok(Completion::Released));
//! assert_eq!(freed.len(), 1);
//! assert!(q.is_empty());
//!
//! // An ACK for data never sent is refused.
//! assert!(q.ack(70000, |b| freed.push(b)).is_err());
//! ```

use crate::csum;
use crate::gso::{self, GsoError, Layout};
use crate::meta::{LinkKind, RxMeta};
use crate::parse;
use crate::stats::PassReason;
use crate::wire::tcp::flags as tcp_flags;
use crate::wire::{self, ipv4, tcp};

/// Why the queue refused an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TxError {
    /// The frame is not a TCP segment the parser accepts.
    Parse(PassReason),
    /// SYN or RST set, IPv4 options, or no sequence space (no payload and no FIN): not a data
    /// super-segment.
    Unsupported,
    /// The segment does not start at `SND.NXT`.
    NotContiguous {
        /// `SND.NXT`.
        expected: u32,
        /// The segment's sequence number.
        got: u32,
    },
    /// The next super-segment's slot is taken: slots are used in push order (modulo the
    /// queue's size), so every slot holds one, or the one in that slot was ACKed and waits
    /// for its TX completion while later ones were already released.
    Full,
    /// Sending it would put 2^31 or more bytes in flight, beyond what mod-2^32 comparison can
    /// order (RFC 9293 section 3.4, RFC 7323 section 5.2).
    WindowTooLarge,
    /// The ACK acknowledges data never sent (`SEG.ACK > SND.NXT`, RFC 9293 section 3.10.7.4).
    AckBeyondSndNxt {
        /// The ACK number.
        ack: u32,
        /// `SND.NXT`.
        snd_nxt: u32,
    },
    /// No unACKed super-segment at that position.
    NothingToRetransmit,
    /// The header buffer cannot hold the rebuilt headers.
    HeaderBufferTooSmall {
        /// Bytes needed.
        needed: usize,
    },
    /// The token names no transmission this queue is waiting for (it was completed already).
    UnknownToken,
    /// The token was issued by another queue. Each queue has a tag of its own: a count of the
    /// queues the program made, on targets with atomic read-modify-write (so no two queues of
    /// one program share one); elsewhere (Cortex-M0) the sequence number it was created with,
    /// a connection's initial sequence number, random per RFC 6528, so that a token of another
    /// connection is refused unless both started at the same number, in which case its number
    /// is checked as [`TxError::UnknownToken`] says.
    OtherQueue,
}

impl core::fmt::Display for TxError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Parse(r) => write!(f, "not a TCP segment ({r})"),
            Self::Unsupported => f.write_str("not a data super-segment (SYN/RST/IP options/empty)"),
            Self::NotContiguous { expected, got } => {
                write!(f, "segment starts at {got}, SND.NXT is {expected}")
            }
            Self::Full => f.write_str("transmit queue full"),
            Self::WindowTooLarge => f.write_str("2^31 or more bytes would be in flight"),
            Self::AckBeyondSndNxt { ack, snd_nxt } => {
                write!(
                    f,
                    "ACK {ack} acknowledges data never sent (SND.NXT {snd_nxt})"
                )
            }
            Self::NothingToRetransmit => f.write_str("no unACKed super-segment at that position"),
            Self::HeaderBufferTooSmall { needed } => {
                write!(f, "header buffer too small: {needed} bytes needed")
            }
            Self::UnknownToken => f.write_str("unknown transmit token"),
            Self::OtherQueue => f.write_str("transmit token of another queue"),
        }
    }
}

impl core::error::Error for TxError {}

/// A refused [`TxQueue::push`]: the error and the buffer, handed back untouched.
#[derive(Debug)]
pub struct PushError<B> {
    /// Why.
    pub error: TxError,
    /// The buffer that was pushed.
    pub buffer: B,
}

/// One transmission of a held buffer the NIC has not completed yet. Give it back to the
/// [`TxQueue::complete`] of the queue that issued it when the TX ring reports the descriptor
/// done (another queue refuses it: [`TxError::OtherQueue`]).
///
/// Neither `Clone` nor `Copy`: each transmission is completed at most once.
#[derive(Debug, PartialEq, Eq, Hash)]
#[must_use = "the buffer stays held until this transmission is completed"]
pub struct TxToken {
    id: u64,
    /// The issuing queue's tag (see [`TxError::OtherQueue`]).
    queue: u32,
}

impl TxToken {
    /// Identifies the super-segment (pushes are numbered from 0); for a driver's bookkeeping.
    pub const fn entry(&self) -> u64 {
        self.id
    }
}

/// What an acceptable-looking ACK did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckOutcome {
    /// `SND.UNA` advanced; `released` buffers were handed back (fully ACKed and completed).
    Advanced {
        /// Buffers handed to the release closure.
        released: usize,
    },
    /// `SEG.ACK == SND.UNA`: nothing new (RFC 9293 section 3.10.7.4: ignored).
    Duplicate,
    /// `SEG.ACK < SND.UNA` (mod 2^32): an old, reordered ACK, ignored.
    Old,
}

/// What a TX completion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Completion {
    /// The last transmission of a fully ACKed super-segment: its buffer was handed back.
    Released,
    /// The NIC is done, but part of the data is unACKed: the buffer stays for retransmits.
    AwaitingAck,
    /// Other transmissions of the buffer (zero-copy retransmits) are still with the NIC.
    StillInFlight,
}

/// How a retransmit's TCP checksum is written into the rebuilt header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TxChecksum {
    /// Complete: the payload remainder is read (never written) to sum it.
    #[default]
    Full,
    /// The pseudo-header sum only, for a device that finishes the checksum (Linux
    /// CHECKSUM_PARTIAL with `csum_start` at the TCP header, `csum_offset` 16).
    Partial,
}

/// How a retransmit will be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Post {
    /// The caller copies the view (software GSO, a bounce buffer): the NIC never reads the
    /// held buffer for it.
    #[default]
    Copy,
    /// The caller posts the view's payload slice to the TX ring as it is: one more
    /// transmission the NIC owns; the view carries its [`TxToken`], which must be taken and
    /// completed (even if the caller ends up not posting the view).
    ZeroCopy,
}

/// Header fields a retransmit may refresh. Everything left `None` keeps the original's value;
/// the sequence number and lengths are always derived by the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RetransmitOptions {
    /// New ACK number (the receive side's current `RCV.NXT`).
    pub ack: Option<u32>,
    /// New window.
    pub window: Option<u16>,
    /// New IPv4 identification (ignored for IPv6).
    pub ip_id: Option<u16>,
    /// Checksum written into the header.
    pub checksum: TxChecksum,
    /// Copied or zero-copy.
    pub post: Post,
}

impl RetransmitOptions {
    /// Keep the original's fields, full checksum, copied.
    pub const fn new() -> Self {
        Self {
            ack: None,
            window: None,
            ip_id: None,
            checksum: TxChecksum::Full,
            post: Post::Copy,
        }
    }

    /// With a new ACK number.
    pub const fn with_ack(mut self, ack: u32) -> Self {
        self.ack = Some(ack);
        self
    }

    /// With a new window.
    pub const fn with_window(mut self, window: u16) -> Self {
        self.window = Some(window);
        self
    }

    /// With a new IPv4 identification.
    pub const fn with_ip_id(mut self, id: u16) -> Self {
        self.ip_id = Some(id);
        self
    }

    /// With the given checksum mode.
    pub const fn with_checksum(mut self, checksum: TxChecksum) -> Self {
        self.checksum = checksum;
        self
    }

    /// Posted to the TX ring without copying (see [`Post::ZeroCopy`]).
    pub const fn zero_copy(mut self) -> Self {
        self.post = Post::ZeroCopy;
        self
    }
}

/// The unACKed remainder of a super-segment, ready to send again: rebuilt headers (in the
/// caller's buffer) and the payload borrowed from the held buffer.
///
/// A [`Post::ZeroCopy`] view counts one more transmission of the held buffer: take its token
/// ([`Retransmit::take_token`]) and complete it when the NIC is done, or the buffer is held
/// for good (the queue cannot tell a view dropped unposted from one whose payload the NIC is
/// still reading).
#[derive(Debug)]
#[must_use = "a zero-copy retransmit's token must be taken and completed, or its buffer stays held"]
pub struct Retransmit<'a> {
    header: &'a [u8],
    payload: &'a [u8],
    layout: Layout,
    seq: u32,
    fin: bool,
    token: Option<TxToken>,
}

impl<'a> Retransmit<'a> {
    /// The rebuilt link, IP and TCP headers.
    pub fn header(&self) -> &'a [u8] {
        self.header
    }

    /// The unACKed payload, borrowed from the original buffer.
    pub fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// Its sequence number (`SND.UNA` for the first unACKed super-segment).
    pub const fn seq(&self) -> u32 {
        self.seq
    }

    /// Whether it carries FIN.
    pub const fn fin(&self) -> bool {
        self.fin
    }

    /// Frame length: headers plus payload.
    pub fn len(&self) -> usize {
        self.header.len() + self.payload.len()
    }

    /// Never empty: there are always headers.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The header layout (for [`gso::segment`]).
    pub const fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The transmission token of a [`Post::ZeroCopy`] retransmit (once; `None` after, and for
    /// [`Post::Copy`]).
    pub fn take_token(&mut self) -> Option<TxToken> {
        self.token.take()
    }

    /// Copies the frame into `out`; returns its length.
    ///
    /// # Errors
    /// [`TxError::HeaderBufferTooSmall`] (with the frame length) if `out` is shorter.
    pub fn copy_to(&self, out: &mut [u8]) -> Result<usize, TxError> {
        let len = self.len();
        let dst = out
            .get_mut(..len)
            .ok_or(TxError::HeaderBufferTooSmall { needed: len })?;
        let (h, p) = dst.split_at_mut(self.header.len());
        h.copy_from_slice(self.header);
        p.copy_from_slice(self.payload);
        Ok(len)
    }

    /// Software GSO of the remainder for a device without TSO: see [`gso::segment`].
    ///
    /// # Errors
    /// As [`gso::segment`].
    pub fn gso(
        &self,
        mss: u16,
        out: &mut [u8],
        emit: impl FnMut(&[u8]),
    ) -> Result<usize, GsoError> {
        gso::segment(&self.layout, self.header, [self.payload], mss, out, emit)
    }
}

/// Read-only facts about a held super-segment, for drivers' diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EntryInfo {
    /// Push number (what [`TxToken::entry`] says).
    pub id: u64,
    /// First sequence number.
    pub seq: u32,
    /// Sequence space: payload bytes, plus one for FIN.
    pub seq_len: u32,
    /// Sequence space ACKed so far (derived from `SND.UNA` when ACKs arrive).
    pub acked: u32,
    /// Transmissions the NIC has not completed.
    pub in_flight: u32,
}

/// Counters of a [`TxQueue`] (64-bit: they never wrap in practice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TxStats {
    /// Super-segments accepted.
    pub pushed: u64,
    /// ACKs that advanced `SND.UNA`.
    pub acks: u64,
    /// ACKs equal to `SND.UNA`.
    pub duplicate_acks: u64,
    /// ACKs below `SND.UNA`.
    pub old_acks: u64,
    /// ACKs beyond `SND.NXT`, refused.
    pub rejected_acks: u64,
    /// ACKs that ended inside a super-segment: an offset recorded instead of a copy (each is
    /// a `pskb_expand_head` the seed avoids).
    pub partial_acks: u64,
    /// Fully ACKed super-segments held because the NIC still owned them when ACKed.
    pub acked_before_completion: u64,
    /// TX completions received.
    pub completions: u64,
    /// Buffers handed back.
    pub released: u64,
    /// Retransmit views produced.
    pub retransmits: u64,
}

#[derive(Debug)]
struct Entry<B> {
    buf: B,
    id: u64,
    layout: Layout,
    seq: u32,
    payload_len: u32,
    fin: bool,
    acked: u32,
    in_flight: u32,
}

impl<B> Entry<B> {
    fn seq_len(&self) -> u32 {
        self.payload_len + u32::from(self.fin)
    }

    fn info(&self) -> EntryInfo {
        EntryInfo {
            id: self.id,
            seq: self.seq,
            seq_len: self.seq_len(),
            acked: self.acked,
            in_flight: self.in_flight,
        }
    }
}

/// A tag for a new queue (see [`TxError::OtherQueue`]).
fn new_tag(snd_nxt: u32) -> u32 {
    #[cfg(target_has_atomic = "32")]
    {
        use core::sync::atomic::{AtomicU32, Ordering};
        // Unique per queue until 2^32 queues were made; the sequence number is not needed.
        static QUEUES: AtomicU32 = AtomicU32::new(0);
        let _ = snd_nxt;
        QUEUES.fetch_add(1, Ordering::Relaxed)
    }
    #[cfg(not(target_has_atomic = "32"))]
    {
        snd_nxt
    }
}

/// Transmitted super-segments of one TCP connection, oldest first, held as buffer handles
/// until they are both ACKed and completed by the NIC. `N` is the number of super-segments
/// that can be held at once (ACKed ones waiting for their completion included); all memory is
/// inside the value.
///
/// See the [module documentation](self) for the rules and an example.
#[derive(Debug)]
pub struct TxQueue<B, const N: usize> {
    slots: [Option<Entry<B>>; N],
    /// Oldest id whose slot may still be occupied.
    head: u64,
    /// First id not fully ACKed (`head..una` are ACKed, held only while the NIC owns them).
    una: u64,
    /// Next id to push.
    tail: u64,
    snd_una: u32,
    snd_nxt: u32,
    /// `snd_nxt` at creation, in every token: a completion with a token of another queue is
    /// refused before it can release a buffer the NIC may still be reading.
    tag: u32,
    link: LinkKind,
    stats: TxStats,
}

impl<B: AsRef<[u8]>, const N: usize> TxQueue<B, N> {
    const NONZERO: () = assert!(N > 0, "a TxQueue needs at least one slot");

    /// An empty queue whose next byte to send (and first unACKed byte) is `snd_nxt`; frames
    /// pushed start with the `link` header.
    pub fn new(snd_nxt: u32, link: LinkKind) -> Self {
        let () = Self::NONZERO;
        Self {
            slots: core::array::from_fn(|_| None),
            head: 0,
            una: 0,
            tail: 0,
            snd_una: snd_nxt,
            snd_nxt,
            tag: new_tag(snd_nxt),
            link,
            stats: TxStats::default(),
        }
    }

    /// The token of this queue's transmission `id`.
    fn token(&self, id: u64) -> TxToken {
        TxToken {
            id,
            queue: self.tag,
        }
    }

    /// `SND.UNA`: the oldest unACKed sequence number.
    pub const fn snd_una(&self) -> u32 {
        self.snd_una
    }

    /// `SND.NXT`: the next sequence number to send.
    pub const fn snd_nxt(&self) -> u32 {
        self.snd_nxt
    }

    /// Bytes of sequence space sent and not ACKed.
    pub const fn in_flight(&self) -> u32 {
        self.snd_nxt.wrapping_sub(self.snd_una)
    }

    /// Buffers held (unACKed, or ACKed and still owned by the NIC).
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }

    /// No buffer held.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// True when a push would be refused with [`TxError::Full`].
    pub fn is_full(&self) -> bool {
        self.tail - self.head == N as u64
    }

    /// Counters.
    pub const fn stats(&self) -> &TxStats {
        &self.stats
    }

    /// The held super-segments, oldest first.
    pub fn entries(&self) -> impl Iterator<Item = EntryInfo> + '_ {
        (self.head..self.tail).filter_map(|id| self.slot(id).as_ref().map(Entry::info))
    }

    fn index(id: u64) -> usize {
        (id % N as u64) as usize
    }

    fn slot(&self, id: u64) -> &Option<Entry<B>> {
        &self.slots[Self::index(id)]
    }

    fn slot_mut(&mut self, id: u64) -> &mut Option<Entry<B>> {
        &mut self.slots[Self::index(id)]
    }

    /// Drops released slots from the front.
    fn advance_head(&mut self) {
        while self.head < self.una && self.slot(self.head).is_none() {
            self.head += 1;
        }
    }

    /// Records a super-segment just handed to the NIC (the whole frame: headers and payload,
    /// as for a TSO device). It must start at `SND.NXT`; `SND.NXT` advances past its payload
    /// (and FIN). The returned token stands for this transmission.
    ///
    /// # Errors
    /// See [`TxError`]; the buffer comes back in the [`PushError`].
    pub fn push(&mut self, buf: B) -> Result<TxToken, PushError<B>> {
        match self.check_push(buf.as_ref()) {
            Ok((layout, seq, payload_len, fin)) => {
                let id = self.tail;
                *self.slot_mut(id) = Some(Entry {
                    buf,
                    id,
                    layout,
                    seq,
                    payload_len,
                    fin,
                    acked: 0,
                    in_flight: 1,
                });
                self.tail += 1;
                self.snd_nxt = seq.wrapping_add(payload_len + u32::from(fin));
                self.stats.pushed += 1;
                Ok(self.token(id))
            }
            Err(error) => Err(PushError { error, buffer: buf }),
        }
    }

    fn check_push(&self, frame: &[u8]) -> Result<(Layout, u32, u32, bool), TxError> {
        let meta = RxMeta::new(self.link, 0);
        let p = parse::parse(frame, &meta).map_err(|u| TxError::Parse(u.reason))?;
        let layout = Layout::from_parsed(&p, frame).map_err(|_| TxError::Unsupported)?;
        let fin = p.flags & tcp_flags::FIN != 0;
        if p.flags & (tcp_flags::SYN | tcp_flags::RST) != 0 || (p.payload_len == 0 && !fin) {
            return Err(TxError::Unsupported);
        }
        if p.seq != self.snd_nxt {
            return Err(TxError::NotContiguous {
                expected: self.snd_nxt,
                got: p.seq,
            });
        }
        let seq_len = u64::from(p.payload_len) + u64::from(fin);
        if u64::from(self.in_flight()) + seq_len > i32::MAX as u64 {
            return Err(TxError::WindowTooLarge);
        }
        if self.is_full() {
            return Err(TxError::Full);
        }
        Ok((layout, p.seq, p.payload_len, fin))
    }

    /// Processes a cumulative ACK (the peer's new `SND.UNA`). Fully ACKed super-segments whose
    /// transmissions the NIC has all completed are handed to `release`, oldest first; a fully
    /// ACKed one the NIC still reads is kept until [`TxQueue::complete`]; a partly ACKed one
    /// only records its ACKed offset (nothing is copied or written).
    ///
    /// # Errors
    /// [`TxError::AckBeyondSndNxt`] for an ACK of data never sent; the queue is unchanged.
    pub fn ack(&mut self, ack: u32, mut release: impl FnMut(B)) -> Result<AckOutcome, TxError> {
        // RFC 9293 section 3.10.7.4, in mod-2^32 order (in flight < 2^31, see `push`).
        let advance = ack.wrapping_sub(self.snd_una);
        if advance == 0 {
            self.stats.duplicate_acks += 1;
            return Ok(AckOutcome::Duplicate);
        }
        if advance > self.in_flight() {
            if (advance as i32) < 0 {
                self.stats.old_acks += 1;
                return Ok(AckOutcome::Old);
            }
            self.stats.rejected_acks += 1;
            return Err(TxError::AckBeyondSndNxt {
                ack,
                snd_nxt: self.snd_nxt,
            });
        }
        self.snd_una = ack;
        self.stats.acks += 1;
        let mut released = 0;
        while self.una < self.tail {
            let id = self.una;
            let Some(e) = self.slots[Self::index(id)].as_mut() else {
                // Unreachable: slots from `una` on are occupied. Never loop forever.
                self.una += 1;
                continue;
            };
            // `e.seq` is at or before the old SND.UNA and `ack` is at most SND.NXT: the
            // offset is exact in mod-2^32 arithmetic.
            let offset = ack.wrapping_sub(e.seq);
            if offset < e.seq_len() {
                // The seed: "we dont really need to trim skb", remember the ACKed part. An
                // ACK ending where this one starts (offset 0) ACKs none of it.
                if offset != 0 {
                    e.acked = offset;
                    self.stats.partial_acks += 1;
                }
                break;
            }
            e.acked = e.seq_len();
            self.una += 1;
            if e.in_flight == 0 {
                if let Some(e) = self.slots[Self::index(id)].take() {
                    self.stats.released += 1;
                    released += 1;
                    release(e.buf);
                }
            } else {
                self.stats.acked_before_completion += 1;
            }
        }
        self.advance_head();
        Ok(AckOutcome::Advanced { released })
    }

    /// The NIC finished reading one transmission (the TX ring reported the descriptor done).
    /// If that was the last transmission of a fully ACKed super-segment, its buffer is handed
    /// to `release`.
    ///
    /// # Errors
    /// [`TxError::UnknownToken`] for a token naming no transmission this queue is waiting for
    /// (tokens cannot be copied, so a token of this queue is completed at most once);
    /// [`TxError::OtherQueue`] for a token another queue issued. Either way nothing changes.
    pub fn complete(
        &mut self,
        token: TxToken,
        release: impl FnOnce(B),
    ) -> Result<Completion, TxError> {
        if token.queue != self.tag {
            return Err(TxError::OtherQueue);
        }
        let id = token.id;
        if id < self.head || id >= self.tail {
            return Err(TxError::UnknownToken);
        }
        let fully_acked = id < self.una;
        let e = match self.slots[Self::index(id)].as_mut() {
            Some(e) if e.id == id && e.in_flight > 0 => e,
            _ => return Err(TxError::UnknownToken),
        };
        e.in_flight -= 1;
        self.stats.completions += 1;
        if e.in_flight > 0 {
            return Ok(Completion::StillInFlight);
        }
        if !fully_acked {
            return Ok(Completion::AwaitingAck);
        }
        if let Some(e) = self.slot_mut(id).take() {
            self.stats.released += 1;
            release(e.buf);
        }
        self.advance_head();
        Ok(Completion::Released)
    }

    /// The unACKed remainder of the `n`-th unACKed super-segment (0: the one holding
    /// `SND.UNA`), for a SACK-free retransmit (RTO or fast retransmit, RFC 5681 / RFC 6298).
    ///
    /// The headers are copied into `header` and rebuilt: sequence number `seq + ACKed offset`
    /// (the ACKed offset is the queue's own, derived from `SND.UNA`), IP length, checksums and
    /// whatever `options` refreshes; flags are the original's. The payload is a slice of the
    /// held buffer starting at the ACKed offset: the buffer is read, never written or copied.
    ///
    /// # Errors
    /// [`TxError::NothingToRetransmit`] when fewer than `n + 1` super-segments are unACKed,
    /// [`TxError::HeaderBufferTooSmall`] when `header` is shorter than the headers.
    pub fn retransmit<'a>(
        &'a mut self,
        n: usize,
        header: &'a mut [u8],
        options: RetransmitOptions,
    ) -> Result<Retransmit<'a>, TxError> {
        let id = self
            .una
            .checked_add(n as u64)
            .filter(|&id| id < self.tail)
            .ok_or(TxError::NothingToRetransmit)?;
        let need = match self.slot(id) {
            Some(e) => e.layout.header_len(),
            None => return Err(TxError::NothingToRetransmit),
        };
        if header.len() < need {
            return Err(TxError::HeaderBufferTooSmall { needed: need });
        }
        self.stats.retransmits += 1;
        let zero_copy = options.post == Post::ZeroCopy;
        let token = zero_copy.then(|| self.token(id));
        let Some(e) = self.slots[Self::index(id)].as_mut() else {
            return Err(TxError::NothingToRetransmit);
        };
        if zero_copy {
            e.in_flight += 1;
        }
        let e = &*e;
        let layout = e.layout;
        let hdr = layout.header_len();
        let bytes = e.buf.as_ref();
        // Lazy head trim, derived inside (the review of the seed patch): the data part of the
        // ACKed offset; an ACKed offset of `payload_len` leaves only the FIN.
        let trim = e.acked.min(e.payload_len) as usize;
        let payload = &bytes[hdr + trim..hdr + e.payload_len as usize];
        let seq = e.seq.wrapping_add(e.acked);
        let header = &mut header[..hdr];
        header.copy_from_slice(&bytes[..hdr]);
        let (l3, l4) = (layout.l3(), layout.l4());
        wire::write_be32(header, l4 + tcp::field::SEQ_NUM.start, seq);
        if let Some(ack) = options.ack {
            wire::write_be32(header, l4 + tcp::field::ACK_NUM.start, ack);
        }
        if let Some(window) = options.window {
            wire::write_be16(header, l4 + tcp::field::WINDOW.start, window);
        }
        if let (Some(ip_id), false) = (options.ip_id, layout.is_v6()) {
            wire::write_be16(header, l3 + ipv4::field::IDENT.start, ip_id);
        }
        let full = options.checksum == TxChecksum::Full;
        let payload_sum = if full { csum::sum(payload) } else { 0 };
        layout.finish(header, payload.len(), payload_sum, full);
        Ok(Retransmit {
            header,
            payload,
            layout,
            seq,
            fin: e.fin,
            token,
        })
    }

    /// Tears the connection down (abort, RST): every held buffer is treated as no longer
    /// needed. Those the NIC has finished with are handed to `release` now; the others by
    /// [`TxQueue::complete`] when their completions arrive (never while the NIC reads them).
    /// `SND.UNA` becomes `SND.NXT`. Returns how many were released now.
    pub fn abort(&mut self, mut release: impl FnMut(B)) -> usize {
        self.snd_una = self.snd_nxt;
        self.una = self.tail;
        let mut released = 0;
        for id in self.head..self.tail {
            let slot = self.slot_mut(id);
            if let Some(e) = slot.as_mut() {
                e.acked = e.seq_len();
                if e.in_flight == 0 {
                    if let Some(e) = slot.take() {
                        released += 1;
                        release(e.buf);
                    }
                }
            }
        }
        self.stats.released += released as u64;
        self.advance_head();
        released as usize
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::testing::{bytes_of, FrameSpec, TCP_ACK, TCP_FIN, TCP_PSH};
    use std::vec;
    use std::vec::Vec;

    #[derive(Debug, PartialEq, Eq)]
    struct Buf(u32, Vec<u8>);

    impl AsRef<[u8]> for Buf {
        fn as_ref(&self) -> &[u8] {
            &self.1
        }
    }

    fn seg(tag: u32, seq: u32, len: usize, flags: u8) -> Buf {
        let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ tag) as u8).collect();
        let spec = FrameSpec::ipv4_tcp(5201, 40000)
            .seq(seq)
            .ack(9)
            .flags(flags)
            .payload(&payload);
        Buf(tag, bytes_of(&spec))
    }

    type Q = TxQueue<Buf, 4>;

    /// An ACK that ends exactly where a super-segment ends leaves the next one untouched:
    /// nothing of it is ACKed, no offset is recorded, and `TxStats::partial_acks` ("ACKs that
    /// ended inside a super-segment") does not count it.
    #[test]
    fn an_ack_at_a_super_segment_boundary_is_not_a_partial_ack() {
        let mut q = Q::new(1000, LinkKind::Ethernet);
        let _t0 = q.push(seg(0, 1000, 100, TCP_ACK)).unwrap();
        let _t1 = q.push(seg(1, 1100, 100, TCP_ACK)).unwrap();
        // The first super-segment exactly: it is ACKed whole (held, the NIC still owns it),
        // the second not at all.
        assert_eq!(
            q.ack(1100, |_| panic!("still owned by the NIC")),
            Ok(AckOutcome::Advanced { released: 0 })
        );
        let e: Vec<_> = q.entries().map(|e| (e.acked, e.seq_len)).collect();
        assert_eq!(e, [(100, 100), (0, 100)]);
        assert_eq!(
            q.stats().partial_acks,
            0,
            "no ACK ended inside a super-segment"
        );
        // One that does end inside the second is counted.
        q.ack(1150, |_| panic!("still owned by the NIC")).unwrap();
        assert_eq!(q.stats().partial_acks, 1);
    }

    #[test]
    fn partial_ack_before_completion_records_offset_only() {
        let mut q = Q::new(u32::MAX - 100, LinkKind::Ethernet);
        let t0 = q.push(seg(0, u32::MAX - 100, 1000, TCP_ACK)).unwrap();
        let t1 = q.push(seg(1, 899, 500, TCP_ACK | TCP_PSH)).unwrap();
        assert_eq!(q.snd_nxt(), 1399);
        let mut out = Vec::new();
        // Across the wrap, into the first super-segment.
        assert_eq!(
            q.ack(50, |b| out.push(b)),
            Ok(AckOutcome::Advanced { released: 0 })
        );
        let e: Vec<_> = q.entries().collect();
        assert_eq!((e[0].acked, e[0].in_flight), (151, 1));
        assert_eq!(q.stats().partial_acks, 1);
        // Duplicate and old ACKs change nothing.
        assert_eq!(q.ack(50, |b| out.push(b)), Ok(AckOutcome::Duplicate));
        assert_eq!(q.ack(u32::MAX - 100, |b| out.push(b)), Ok(AckOutcome::Old));
        assert_eq!(q.entries().next().unwrap().acked, 151);
        // Beyond SND.NXT: refused, unchanged.
        assert_eq!(
            q.ack(1400, |b| out.push(b)),
            Err(TxError::AckBeyondSndNxt {
                ack: 1400,
                snd_nxt: 1399
            })
        );
        assert_eq!(q.snd_una(), 50);
        // The first completes: awaiting the rest of its ACK.
        assert_eq!(q.complete(t0, |b| out.push(b)), Ok(Completion::AwaitingAck));
        // ACK everything: the first goes back at once, the second waits for its completion.
        assert_eq!(
            q.ack(1399, |b| out.push(b)),
            Ok(AckOutcome::Advanced { released: 1 })
        );
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 0);
        assert_eq!(q.complete(t1, |b| out.push(b)), Ok(Completion::Released));
        assert_eq!(out.iter().map(|b| b.0).collect::<Vec<_>>(), [0, 1]);
        assert!(q.is_empty());
        assert_eq!(q.stats().released, 2);
    }

    #[test]
    fn retransmit_view_starts_at_snd_una() {
        let mut q = Q::new(1000, LinkKind::Ethernet);
        let original = seg(7, 1000, 3000, TCP_ACK | TCP_FIN);
        let bytes = original.1.clone();
        let t = q.push(original).unwrap();
        assert_eq!(q.snd_nxt(), 4001);
        q.ack(2001, |_| panic!("nothing to release")).unwrap();
        // The same ACK again is a duplicate, counted.
        q.ack(2001, |_| panic!("nothing to release")).unwrap();
        assert_eq!(q.stats().duplicate_acks, 1);
        // The headers (54 bytes) fit a buffer of exactly their length, not one byte less.
        assert_eq!(
            q.retransmit(0, &mut [0u8; 53], RetransmitOptions::new())
                .err(),
            Some(TxError::HeaderBufferTooSmall { needed: 54 })
        );
        assert!(q
            .retransmit(0, &mut [0u8; 54], RetransmitOptions::new())
            .is_ok());
        let mut hdr = [0u8; 64];
        let mut r = q
            .retransmit(0, &mut hdr, RetransmitOptions::new().zero_copy())
            .unwrap();
        assert_eq!(r.seq(), 2001);
        assert_eq!(r.payload(), &bytes[54 + 1001..]);
        assert!(r.fin());
        let t2 = r.take_token().unwrap();
        assert!(r.take_token().is_none());
        let mut frame = [0u8; 2100];
        let len = r.copy_to(&mut frame).unwrap();
        // The rebuilt frame is a valid segment: the engine's own parser and a reference sum.
        let p = crate::parse::parse(&frame[..len], &RxMeta::ethernet(0)).unwrap();
        assert_eq!((p.seq, p.payload_len), (2001, 1999));
        assert_eq!(crate::testing::ones_complement_sum(&frame[14..34]), 0xffff);
        // Only the FIN left unACKed: an empty payload with FIN.
        q.ack(4000, |_| panic!("still unACKed")).unwrap();
        let r = q.retransmit(0, &mut hdr, RetransmitOptions::new()).unwrap();
        assert_eq!((r.seq(), r.payload().len(), r.fin()), (4000, 0, true));
        // No payload, but a frame: headers.
        assert!(!r.is_empty());
        assert_eq!(r.len(), 54);
        assert_eq!(
            q.retransmit(1, &mut hdr, RetransmitOptions::new()).err(),
            Some(TxError::NothingToRetransmit)
        );
        // Three retransmissions made; the refused ones are not counted.
        assert_eq!(q.stats().retransmits, 3);
        // Two transmissions outstanding: held until both complete.
        let mut out = Vec::new();
        assert_eq!(
            q.ack(4001, |b| out.push(b)),
            Ok(AckOutcome::Advanced { released: 0 })
        );
        assert_eq!(
            q.complete(t, |b| out.push(b)),
            Ok(Completion::StillInFlight)
        );
        assert!(out.is_empty());
        assert_eq!(q.complete(t2, |b| out.push(b)), Ok(Completion::Released));
        assert_eq!(out.len(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn refused_pushes_return_the_buffer() {
        let mut q: TxQueue<Buf, 1> = TxQueue::new(0, LinkKind::Ethernet);
        let e = q.push(seg(1, 5, 10, TCP_ACK)).unwrap_err();
        assert_eq!(
            e.error,
            TxError::NotContiguous {
                expected: 0,
                got: 5
            }
        );
        assert_eq!(e.buffer.0, 1);
        assert_eq!(
            q.push(seg(2, 0, 0, TCP_ACK)).unwrap_err().error,
            TxError::Unsupported
        );
        let _t = q.push(seg(3, 0, 10, TCP_ACK)).unwrap();
        assert_eq!(
            q.push(seg(4, 10, 10, TCP_ACK)).unwrap_err().error,
            TxError::Full
        );
        let bad = Buf(5, vec![0; 20]);
        assert!(matches!(q.push(bad).unwrap_err().error, TxError::Parse(_)));
        assert_eq!(
            q.complete(
                TxToken {
                    id: 9,
                    queue: q.tag
                },
                |_| ()
            ),
            Err(TxError::UnknownToken)
        );
    }

    /// A token for a transmission already completed is refused and changes nothing. Tokens
    /// cannot be copied, but where queues are told apart by their starting sequence number
    /// (no atomics), another queue's token can name one; here it is forged.
    #[test]
    fn a_completed_transmission_is_not_completed_again() {
        let mut q = Q::new(0, LinkKind::Ethernet);
        let t = q.push(seg(0, 0, 100, TCP_ACK)).unwrap();
        assert_eq!(q.complete(t, |_| ()), Ok(Completion::AwaitingAck));
        let forged = TxToken {
            id: 0,
            queue: q.tag,
        };
        assert_eq!(
            q.complete(forged, |_| panic!("not ACKed")),
            Err(TxError::UnknownToken)
        );
        assert_eq!(q.stats().completions, 1);
        assert_eq!(q.entries().next().map(|e| e.in_flight), Some(0));
        // Still released by its ACK, as a buffer the NIC is done with.
        let mut out = Vec::new();
        assert_eq!(
            q.ack(100, |b| out.push(b)),
            Ok(AckOutcome::Advanced { released: 1 })
        );
        assert_eq!(out.len(), 1);
    }

    /// SYN and RST segments are not data super-segments, even with a payload.
    #[test]
    fn syn_and_rst_segments_are_refused() {
        use crate::testing::{TCP_RST, TCP_SYN};
        let mut q: TxQueue<Buf, 2> = TxQueue::new(0, LinkKind::Ethernet);
        for flags in [TCP_SYN, TCP_SYN | TCP_ACK, TCP_RST, TCP_RST | TCP_ACK] {
            let e = q.push(seg(1, 0, 10, flags)).unwrap_err();
            assert_eq!(e.error, TxError::Unsupported, "flags {flags:#x}");
        }
        assert!(q.is_empty());
    }

    /// A push that would put 2^31 bytes (a FIN counting one) in flight is refused; one short
    /// of that is taken. Reaching it by pushing needs 2 GiB of frames, so the test starts
    /// the queue with SND.UNA set back.
    #[test]
    fn a_push_that_would_put_2_pow_31_bytes_in_flight_is_refused() {
        const LIMIT: u32 = i32::MAX as u32;
        for (room, len, fin, taken) in [
            (10, 10, false, true),
            (10, 11, false, false),
            (10, 9, true, true),
            (10, 10, true, false),
            (1, 0, true, true),
            (0, 0, true, false),
            (0, 1, false, false),
        ] {
            let mut q = Q::new(5000, LinkKind::Ethernet);
            q.snd_una = 5000u32.wrapping_sub(LIMIT - room);
            assert_eq!(q.in_flight(), LIMIT - room);
            let flags = TCP_ACK | if fin { TCP_FIN } else { 0 };
            let r = q.push(seg(0, 5000, len, flags)).map(|t| t.entry());
            let case = (room, len, fin);
            if taken {
                assert_eq!(r.map_err(|e| e.error), Ok(0), "{case:?}");
                assert_eq!(q.in_flight(), LIMIT - room + len as u32 + u32::from(fin));
            } else {
                assert_eq!(
                    r.map_err(|e| e.error),
                    Err(TxError::WindowTooLarge),
                    "{case:?}"
                );
                assert!(q.is_empty(), "{case:?}");
            }
        }
    }

    #[test]
    fn errors_display_what_went_wrong() {
        use core::fmt::Write;
        let errors = [
            (
                TxError::Parse(PassReason::NotTcp),
                "not a TCP segment (not_tcp)",
            ),
            (TxError::Unsupported, "not a data super-segment"),
            (
                TxError::NotContiguous {
                    expected: 7,
                    got: 9,
                },
                "segment starts at 9, SND.NXT is 7",
            ),
            (TxError::Full, "transmit queue full"),
            (TxError::WindowTooLarge, "2^31 or more bytes"),
            (
                TxError::AckBeyondSndNxt {
                    ack: 12,
                    snd_nxt: 11,
                },
                "ACK 12 acknowledges data never sent (SND.NXT 11)",
            ),
            (TxError::NothingToRetransmit, "no unACKed super-segment"),
            (
                TxError::HeaderBufferTooSmall { needed: 54 },
                "header buffer too small: 54 bytes needed",
            ),
            (TxError::UnknownToken, "unknown transmit token"),
            (TxError::OtherQueue, "transmit token of another queue"),
        ];
        for (e, text) in errors {
            let mut s = std::string::String::new();
            write!(s, "{e}").unwrap();
            assert!(s.starts_with(text), "{e:?} displays as {s:?}");
        }
    }

    /// A token completed at the wrong queue must not release that queue's buffer while the
    /// NIC may still read it: here queue B's only transmission is ACKed and in flight, and
    /// A's token has the same number (0) as B's.
    #[test]
    fn a_token_of_another_queue_is_refused() {
        let mut a = Q::new(1000, LinkKind::Ethernet);
        let mut b = Q::new(5000, LinkKind::Ethernet);
        let ta = a.push(seg(0, 1000, 100, TCP_ACK)).unwrap();
        let tb = b.push(seg(1, 5000, 100, TCP_ACK)).unwrap();
        assert_eq!(ta.entry(), tb.entry());
        assert_eq!(
            b.ack(5100, |_| panic!("the NIC still owns it")),
            Ok(AckOutcome::Advanced { released: 0 })
        );
        assert_eq!(
            b.complete(ta, |_| panic!("released B's buffer on A's token")),
            Err(TxError::OtherQueue)
        );
        assert_eq!(b.stats().completions, 0, "nothing changed");
        let mut out = Vec::new();
        assert_eq!(b.complete(tb, |x| out.push(x)), Ok(Completion::Released));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, 1);
        // A retransmit's token (posted without a copy) carries the queue too.
        let mut header = [0u8; 128];
        let rt = a
            .retransmit(0, &mut header, RetransmitOptions::new().zero_copy())
            .unwrap()
            .take_token()
            .expect("a zero-copy retransmit has a token");
        let tb2 = b.push(seg(3, 5100, 100, TCP_ACK)).unwrap();
        assert_eq!(b.complete(rt, |_| ()), Err(TxError::OtherQueue));
        assert_eq!(b.complete(tb2, |_| ()), Ok(Completion::AwaitingAck));
    }

    /// Two queues created with the same sequence number (a fixed test number, a queue rebuilt
    /// for the same connection) still refuse each other's tokens.
    #[test]
    #[cfg(target_has_atomic = "32")]
    fn queues_of_one_starting_number_refuse_each_others_tokens() {
        let mut a = Q::new(1000, LinkKind::Ethernet);
        let mut b = Q::new(1000, LinkKind::Ethernet);
        let ta = a.push(seg(0, 1000, 100, TCP_ACK)).unwrap();
        let tb = b.push(seg(1, 1000, 100, TCP_ACK)).unwrap();
        assert_eq!(
            b.ack(1100, |_| ()),
            Ok(AckOutcome::Advanced { released: 0 })
        );
        assert_eq!(
            b.complete(ta, |_| panic!("released B's buffer on A's token")),
            Err(TxError::OtherQueue)
        );
        assert_eq!(b.complete(tb, |_| ()), Ok(Completion::Released));
    }

    #[test]
    fn abort_never_releases_what_the_nic_reads() {
        let mut q = Q::new(0, LinkKind::Ethernet);
        let t0 = q.push(seg(0, 0, 100, TCP_ACK)).unwrap();
        let t1 = q.push(seg(1, 100, 100, TCP_ACK)).unwrap();
        let mut out = Vec::new();
        assert_eq!(q.complete(t1, |b| out.push(b)), Ok(Completion::AwaitingAck));
        assert_eq!(q.abort(|b| out.push(b)), 1);
        assert_eq!(out[0].0, 1);
        assert_eq!(q.complete(t0, |b| out.push(b)), Ok(Completion::Released));
        assert_eq!(out.len(), 2);
        assert!(q.is_empty());
        assert_eq!(q.snd_una(), 200);
    }

    #[test]
    fn ipoib_link_frames_are_accepted() {
        let payload = [7u8; 100];
        let spec = FrameSpec::ipv4_tcp(5201, 40000)
            .seq(0)
            .flags(TCP_ACK)
            .payload(&payload)
            .raw_ip();
        let ip = bytes_of(&spec);
        let mut frame = vec![0x08, 0x00, 0, 0];
        frame.extend_from_slice(&ip);
        // A queue for IPoIB frames parses them as IPoIB (not as Ethernet).
        let mut q: TxQueue<Buf, 2> = TxQueue::new(0, LinkKind::Ipoib);
        let _t = q.push(Buf(0, frame)).map_err(|e| e.error).unwrap();
        assert_eq!(q.snd_nxt(), 100);
        q.ack(40, |_| panic!("still unACKed")).unwrap();
        let mut hdr = [0u8; 64];
        let r = q.retransmit(0, &mut hdr, RetransmitOptions::new()).unwrap();
        assert_eq!(r.header().len(), 4 + 20 + 20);
        let mut out = [0u8; 200];
        let len = r.copy_to(&mut out).unwrap();
        let p = crate::parse::parse(&out[..len], &RxMeta::ipoib(0)).unwrap();
        assert_eq!((p.seq, p.payload_len), (40, 60));
        assert_eq!(crate::testing::ones_complement_sum(&out[4..24]), 0xffff);
    }
}
