//! The engine's memory: how many flows, frames per segment and ACK records it holds
//! ([`Capacity`], [`Sizes`]), and the per-flow state of a held segment.
//!
//! All of it is inside the engine value, sized at compile time: no allocator, no `unsafe`.
//! The arrays are reached through [`Store::parts`] as slices whose lengths are constants once
//! the engine is monomorphised, so bounds checks and masks fold as they would on arrays.

use super::fixup::Layers;
use super::predict::Template;
use crate::csum::PseudoHeader;
use crate::encap::TunnelSlot;
use crate::flow::table::{Ends, Index, Links, NIL};
use crate::flow::Key;

use super::ack_memo::{AckMemo, AckMemory};

/// How much an [`Engine`](crate::Engine) holds: the flow-table size, the most frames one
/// segment may hold, and how many flows' newest ACK state is remembered once their segment was
/// delivered. Implemented by [`Sizes`] only.
///
/// Memory per flow is about `FRAMES * (size_of::<F>() + 8) + 600` bytes on a 32-bit target
/// (the held state with its 384-byte header-prediction template, the key, the index links, the
/// frame slots), plus `ACKS * 72` bytes for the ACK memory; `SIZING.md` in the crate has measured figures.
pub trait Capacity: 'static + sealed::Sealed {
    /// Flow-table entries: a power of two, at most 32768.
    const FLOWS: usize;
    /// Most frames one segment holds (at least 1; Linux's GRO merges at most 64 KB, i.e. 45
    /// frames of 1448 bytes).
    const FRAMES: usize;
    /// ACK records (`Lro` duplicate-ACK protection with nothing held): a power of two.
    /// Direct-mapped by flow hash, so keep a few per flow-table entry (the default sizes have
    /// four): with fewer records than active flows, pure ACKs of flows whose records collide
    /// pass alone ([`PassReason::UnknownAck`](crate::PassReason::UnknownAck)) instead of merging.
    const ACKS: usize;
    /// The arrays.
    #[doc(hidden)]
    type Storage<F, T: TunnelSlot>: Store<F, T>;
}

/// The sizes of an engine: `FLOWS` flow-table entries (a power of two), `FRAMES` frames per
/// segment, `ACKS` remembered ACK states (a power of two).
///
/// ```
/// use lro_core::{Engine, Config, Sizes};
/// // 8 flows, 16 frames per segment, 16 ACK records: about 9 KB with slice frames.
/// let engine: Engine<&mut [u8], Sizes<8, 16, 16>> = Engine::new(Config::lro());
/// assert_eq!(engine.held_frames(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Sizes<const FLOWS: usize = 64, const FRAMES: usize = 64, const ACKS: usize = 256>;

/// The default sizes: 64 flows, 64 frames per segment, 256 ACK records.
pub type DefaultSizes = Sizes<64, 64, 256>;

/// A small engine for a microcontroller: 4 flows, 8 frames per segment, 8 ACK records.
pub type SmallSizes = Sizes<4, 8, 8>;

impl<const N: usize, const S: usize, const M: usize> sealed::Sealed for Sizes<N, S, M> {}

impl<const N: usize, const S: usize, const M: usize> Capacity for Sizes<N, S, M> {
    const FLOWS: usize = N;
    const FRAMES: usize = S;
    const ACKS: usize = M;
    type Storage<F, T: TunnelSlot> = Arrays<F, T, N, S, M>;
}

/// Header prediction's candidate table has this many entries per flow-table entry (the
/// reverse direction's ACK flows share it with the data flows). Two flows whose frames hash to
/// one entry take turns: every frame of the one that lost it takes the parser. With 4 entries
/// per flow, 64 flows of random ports (the adversarial bench's) collided for a quarter of their
/// frames, 1.55x the time of sequential ports; with 16, 1.18x, for 24 bytes more per flow.
pub(crate) const CANDIDATES_PER_FLOW: usize = 16;

/// A frame in a segment: the buffer and the byte range of it that belongs to the output.
pub struct Held<F> {
    pub(crate) frame: F,
    pub(crate) start: u32,
    pub(crate) end: u32,
}

/// What the engine's arrays look like from inside the engine.
#[doc(hidden)]
pub trait Store<F, T: TunnelSlot>: Sized {
    /// Every array empty.
    const EMPTY: Self;
    /// Frames per flow (the segment capacity).
    const FRAMES: usize;
    /// Borrows every array at once.
    fn parts(&mut self) -> Parts<'_, F, T>;
    /// The flow states.
    fn flows(&self) -> &[FlowState];
    /// The key stored in an entry (kept after its segment was delivered, until the entry is
    /// reused).
    fn key(&self, slot: u16) -> &Key<T>;
    /// The frame slots (`FLOWS * FRAMES`).
    fn frames(&self) -> &[Option<Held<F>>];
    /// The ACK records.
    fn acks(&self) -> &[AckMemo<T>];
    /// Header prediction's candidates (`FLOWS * CANDIDATES_PER_FLOW` entries; see [`Probe`](super::predict::Probe)).
    fn candidates(&self) -> &[u16];
}

/// The arrays of an engine, borrowed together (disjoint, so the engine can update the index,
/// a flow and its frames at once).
#[doc(hidden)]
pub struct Parts<'a, F, T> {
    pub(crate) index: Index<'a, T>,
    pub(crate) flows: &'a mut [FlowState],
    /// `FLOWS * FRAMES` slots: flow `i`'s frames are `frames[i * FRAMES..][..count]`.
    pub(crate) frames: &'a mut [Option<Held<F>>],
    pub(crate) acks: AckMemory<'a, T>,
    /// Header prediction's candidate entry per probe hash.
    pub(crate) candidates: &'a mut [u16],
}

/// The arrays of [`Sizes<N, S, M>`].
#[doc(hidden)]
pub struct Arrays<F, T, const N: usize, const S: usize, const M: usize> {
    buckets: [u16; N],
    links: [Links; N],
    keys: [Key<T>; N],
    ends: Ends,
    flows: [FlowState; N],
    frames: [[Option<Held<F>>; S]; N],
    acks: [AckMemo<T>; M],
    candidates: [[u16; CANDIDATES_PER_FLOW]; N],
}

impl<F, T: TunnelSlot, const N: usize, const S: usize, const M: usize> Store<F, T>
    for Arrays<F, T, N, S, M>
{
    const EMPTY: Self = {
        assert!(
            N.is_power_of_two() && N < NIL as usize,
            "the flow-table size must be a power of two below 65535"
        );
        assert!(
            S >= 1 && S < u16::MAX as usize,
            "FRAMES must be in 1..65535"
        );
        assert!(M.is_power_of_two(), "ACKS must be a power of two");
        Self {
            buckets: [NIL; N],
            links: [Links::FRESH; N],
            keys: [Key::EMPTY; N],
            ends: Ends::new(),
            flows: [FlowState::EMPTY; N],
            frames: [const { [const { None }; S] }; N],
            acks: [AckMemo::EMPTY; M],
            candidates: [[0; CANDIDATES_PER_FLOW]; N],
        }
    };
    const FRAMES: usize = S;

    #[inline(always)]
    fn parts(&mut self) -> Parts<'_, F, T> {
        Parts {
            index: Index {
                buckets: &mut self.buckets,
                links: &mut self.links,
                keys: &mut self.keys,
                ends: &mut self.ends,
            },
            flows: &mut self.flows,
            frames: self.frames.as_flattened_mut(),
            acks: AckMemory {
                records: &mut self.acks,
            },
            candidates: self.candidates.as_flattened_mut(),
        }
    }

    #[inline(always)]
    fn flows(&self) -> &[FlowState] {
        &self.flows
    }

    #[inline(always)]
    fn key(&self, slot: u16) -> &Key<T> {
        &self.keys[usize::from(slot)]
    }

    #[inline(always)]
    fn frames(&self) -> &[Option<Held<F>>] {
        self.frames.as_flattened()
    }

    #[inline(always)]
    fn acks(&self) -> &[AckMemo<T>] {
        &self.acks
    }

    #[inline(always)]
    fn candidates(&self) -> &[u16] {
        self.candidates.as_flattened()
    }
}

/// The IP facts of a held segment's head, and how its IDs have progressed (Linux
/// `inet_gro_flush`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct IpHeld {
    pub(crate) ttl: u8,
    pub(crate) tos: u8,
    pub(crate) df: bool,
    /// The head's IPv4 ID.
    pub(crate) id: u16,
    /// The second frame repeated the head's ID: every later one must too.
    pub(crate) fixed_id: bool,
}

/// A segment's payload sum as it accumulates (for the `Full` TCP checksum at delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sums {
    /// Ones'-complement sum of the payload of frames that brought a folded sum, at their
    /// offsets.
    pub(crate) folded: u16,
    /// Header prediction's frames at even offsets
    /// ([`PayloadSum::Negated`](super::predict::PayloadSum::Negated)): the sum of their varying
    /// header words, unfolded, native byte order, and their number. With
    /// `negated_frames * sum_base` added, the negation of the sum of their payload; folded
    /// once at delivery.
    pub(crate) negated_acc: u64,
    pub(crate) negated_frames: u16,
    /// Whether the sums cover every frame: not when a hardware-verified frame arrived under
    /// `Partial` output, which needs no sum (delivery then sums the held payload if the output
    /// mode changed to `Full` meanwhile).
    pub(crate) complete: bool,
}

/// State of one flow's held segment (and, once delivered, what header prediction keeps of it).
#[derive(Debug, Clone, Copy)]
pub struct FlowState {
    /// Frames held (the first `count` slots of the flow's frame row).
    pub(crate) count: u16,
    /// Where the head's headers are.
    pub(crate) layers: Layers,
    /// Expected next sequence number.
    pub(crate) next_seq: u32,
    /// Newest ACK number and window (the head's under `Gro`, where they must stay equal).
    pub(crate) ack: u32,
    pub(crate) window: u16,
    /// Newest timestamps (`Lro`; the head's under `Gro`).
    pub(crate) ts: Option<(u32, u32)>,
    /// The head's TCP flags word (bytes 12..16).
    pub(crate) flags_word: u32,
    /// PSH/FIN seen on merged frames.
    pub(crate) or_flags: u8,
    /// The (inner) IP header and, for a tunnel, the outer one.
    pub(crate) ip: IpHeld,
    pub(crate) outer: IpHeld,
    /// Payload of the first data frame (`gso_size` under `Gro`; the close-on-short rule).
    pub(crate) mss: u32,
    pub(crate) max_payload: u32,
    /// Frames carrying payload (Linux's `count`).
    pub(crate) data_frames: u16,
    /// Length of the merged datagram so far, from the first (outer) IP header.
    pub(crate) ip_len: u32,
    pub(crate) sums: Sums,
    /// TCP payload bytes held.
    pub(crate) payload_len: u32,
    /// An ACK was absorbed into the head (its ACK fields need rewriting even alone). A flag,
    /// not a count: nothing bounds how many ACKs one segment absorbs.
    pub(crate) absorbed: bool,
    /// An idle entry kept only for header prediction of a `Gro` flow of pure ACKs: the first
    /// idle entry to be reused, and the only kind such a flow may take from another flow.
    pub(crate) ack_only: bool,
    pub(crate) first_time: u64,
    pub(crate) last_time: u64,
    /// The flow key's hash (the key stays in the index slot of the same number, also once the
    /// segment is delivered, until the slot is reused).
    pub(crate) hash: u32,
    /// The flow's TCP pseudo header.
    pub(crate) pseudo: PseudoHeader,
    /// Header prediction's template of the head.
    pub(crate) tpl: Template,
}

impl FlowState {
    pub(crate) const EMPTY: Self = Self {
        count: 0,
        layers: Layers {
            outer: None,
            l3: 0,
            l4: 0,
            payload: 0,
            v6: false,
        },
        next_seq: 0,
        ack: 0,
        window: 0,
        ts: None,
        flags_word: 0,
        or_flags: 0,
        ip: IpHeld {
            ttl: 0,
            tos: 0,
            df: false,
            id: 0,
            fixed_id: false,
        },
        outer: IpHeld {
            ttl: 0,
            tos: 0,
            df: false,
            id: 0,
            fixed_id: false,
        },
        mss: 0,
        max_payload: 0,
        data_frames: 0,
        ip_len: 0,
        sums: Sums {
            folded: 0,
            negated_acc: 0,
            negated_frames: 0,
            complete: true,
        },
        payload_len: 0,
        absorbed: false,
        ack_only: false,
        first_time: 0,
        last_time: 0,
        hash: 0,
        pseudo: PseudoHeader::from_address_sum(0, 0),
        tpl: Template::EMPTY,
    };

    /// The flow's segment holds frames.
    #[inline(always)]
    pub(crate) fn is_held(&self) -> bool {
        self.count > 0
    }
}

mod sealed {
    pub trait Sealed {}
}
