//! The ACK memory (`Lro`): the newest ACK state delivered for a flow, kept after its segment
//! is flushed, so a pure ACK arriving with nothing held can still be recognised as a
//! duplicate.
//!
//! A held pure ACK may later be superseded, and a superseded duplicate would be lost to the
//! sender's fast retransmit (RFC 5681 section 3.2). So a pure ACK may only start a segment when
//! it is known not to duplicate the flow's newest delivered ACK state; an ACK older than that
//! state may be held: the sender ignores it anyway (RFC 9293 section 3.10.7.4, SEG.ACK <
//! SND.UNA), so superseding it loses nothing.
//!
//! Direct-mapped by the flow hash: a colliding flow overwrites a record, and then a pure ACK of
//! the overwritten flow is simply delivered alone ([`PassReason::UnknownAck`]).

use crate::flow::Key;
use crate::stats::PassReason;
use crate::wire::tcp::before;

/// One record.
#[derive(Clone, Copy, Debug)]
pub struct AckMemo<T> {
    key: Key<T>,
    ack: u32,
    window: u16,
    valid: bool,
}

impl<T: crate::encap::TunnelSlot> AckMemo<T> {
    /// No record.
    pub(crate) const EMPTY: Self = Self {
        key: Key::EMPTY,
        ack: 0,
        window: 0,
        valid: false,
    };
}

/// The memory over the engine's records (a power-of-two count).
pub(crate) struct AckMemory<'a, T> {
    pub(crate) records: &'a mut [AckMemo<T>],
}

/// The record slot of a flow hash among `n` (a power of two): other bits than the table's
/// bucket, so flows sharing a bucket do not share a record.
#[inline(always)]
fn slot(hash: u32, n: usize) -> usize {
    hash.rotate_left(16) as usize & (n - 1)
}

/// The record of a flow among `records`, if they hold one.
#[inline]
pub(crate) fn get<T: Copy + Eq>(
    records: &[AckMemo<T>],
    key: &Key<T>,
    hash: u32,
) -> Option<(u32, u16)> {
    let m = &records[slot(hash, records.len())];
    (m.valid && m.key == *key).then_some((m.ack, m.window))
}

/// May a pure ACK with nothing held start a segment? Not when the flow has no record among
/// `records` (it could be a duplicate), nor when it repeats the record (a duplicate).
#[inline]
pub(crate) fn lone_ack<T: Copy + Eq>(
    records: &[AckMemo<T>],
    key: &Key<T>,
    hash: u32,
    ack: u32,
    window: u16,
) -> Result<(), PassReason> {
    match get(records, key, hash) {
        None => Err(PassReason::UnknownAck),
        Some((a, w)) if a == ack && w == window => Err(PassReason::DupAck),
        Some(_) => Ok(()),
    }
}

impl<T: Copy + Eq> AckMemory<'_, T> {
    /// Records the newest ACK state delivered for a flow. An old (reordered) ACK never makes
    /// the flow's record older.
    #[inline]
    pub(crate) fn remember(&mut self, key: &Key<T>, hash: u32, ack: u32, window: u16) {
        let n = self.records.len();
        let m = &mut self.records[slot(hash, n)];
        if m.valid && m.key == *key && before(ack, m.ack) {
            return;
        }
        *m = AckMemo {
            key: *key,
            ack,
            window,
            valid: true,
        };
    }

    /// Drops the record of a flow (a SYN or RST: the connection's ACK history no longer
    /// applies).
    #[inline]
    pub(crate) fn forget(&mut self, key: &Key<T>, hash: u32) {
        let n = self.records.len();
        let m = &mut self.records[slot(hash, n)];
        if m.key == *key {
            m.valid = false;
        }
    }

    /// Drops every record (the hash seed changed).
    pub(crate) fn clear(&mut self) {
        for m in self.records.iter_mut() {
            m.valid = false;
        }
    }
}
