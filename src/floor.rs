//! `lro bench --floor`: the least work a coalescer does per frame, timed in the same harness as
//! the engine, to tell what the harness and the job cost from what the engine's generality costs.
//!
//! Not an engine and not a second rule table: a reference for measurements only. (The
//! `harness` group of `benches/engine.rs` is a lower yardstick still: the harness alone, frames
//! only recycled or parsed.)
//! - **One layout:** untagged Ethernet, IPv4 without options, TCP with the aligned timestamp
//!   option. Every other frame is delivered on its own.
//! - **Trusted checksums** (`--csum trust`), 64 flows direct-mapped by a hash of addresses and
//!   ports (a colliding flow's segment is delivered and its place taken).
//! - **Merges** a frame into its flow's segment when it repeats the head's headers (a masked
//!   compare, as header prediction does), its sequence number is the next one, FIN is clear and
//!   no earlier frame had PSH, ACK and timestamp do not go back, the datagram stays within 65535
//!   bytes, its payload is not larger than the head's, the previous one was as large and the
//!   payload held so far has an even length (the summed header words stand for payloads at even
//!   offsets; a sender's MSS is even). A pure ACK after a held pure ACK supersedes it, as `Lro`
//!   absorbs.
//! - **Delivery does the engine's full job:** the head's IP length and header checksum, a full
//!   TCP checksum (from the frames' trusted checksums, no payload read), the newest ACK, window
//!   and timestamps, PSH when a frame had it.
//! - **Left out**, which the engine does: other link kinds, tags, IPv6, tunnels, other TCP
//!   options, checksum verification and `Complete` sums, full flow keys, LRU and eviction, idle
//!   and hold timeouts, the ACK memory, padding, the TTL/TOS/ID, window and urgent rules, the
//!   other flush reasons, counters, the `Gro` policy.

use lro_core::csum::{self, PseudoHeader};
use lro_core::wire::tcp::flags::{ACK, FIN, PSH, RST, SYN, URG};
use lro_core::wire::{be32, ethernet, ethertype, ipv4, protocol, tcp};

/// Flows, direct-mapped.
pub(crate) const FLOWS: usize = 64;
/// Frames a segment holds at most.
const FRAMES: usize = 64;
/// Where the one layout has the IP header and the TCP header.
const L3: usize = ethernet::HEADER_LEN;
const L4: usize = L3 + ipv4::HEADER_LEN;
/// Header length of the one layout: Ethernet 14, IPv4 20, TCP with timestamps 32.
const HDR: usize = L4 + tcp::HEADER_LEN_TS;
/// Header bytes compared with the template (the last two, the timestamp echo's low half, are
/// left out with the rest of it).
const CMP: usize = 64;

/// The fields the floor reads and writes, as offsets in the frame.
const IP_LEN: usize = L3 + ipv4::field::LENGTH.start;
const IP_ID: usize = L3 + ipv4::field::IDENT.start;
const IP_CHECKSUM: usize = L3 + ipv4::field::CHECKSUM.start;
const IP_SRC: usize = L3 + ipv4::field::SRC.start;
const IP_DST: usize = L3 + ipv4::field::DST.start;
const PORTS: usize = L4 + tcp::field::PORTS.start;
const SEQ: usize = L4 + tcp::field::SEQ_NUM.start;
const ACK_NUM: usize = L4 + tcp::field::ACK_NUM.start;
const FLAG_WORD: usize = L4 + tcp::field::FLAG_WORD.start;
const FLAGS: usize = L4 + tcp::field::FLAGS;
const WINDOW: usize = L4 + tcp::field::WINDOW.start;
const TCP_CHECKSUM: usize = L4 + tcp::field::CHECKSUM.start;
const TCP_CHECKSUM_END: usize = L4 + tcp::field::CHECKSUM.end;
const TS_KINDS: usize = L4 + tcp::field::TS_KINDS.start;
const TS_VAL: usize = L4 + tcp::field::TS_VAL.start;
const TS_ECR: usize = L4 + tcp::field::TS_ECR.start;

/// What the floor hands on: a segment (its frames, head first, and its length as one frame),
/// or a superseded pure ACK to recycle.
pub(crate) trait Deliver<F> {
    /// A segment of `frames` (all `Some`), `len` bytes as one contiguous frame.
    fn segment(&mut self, frames: &mut [Option<F>], len: usize);
    /// A frame superseded by a newer pure ACK.
    fn release(&mut self, frame: F);
}

/// The mask of the compared header bytes: zero where frames of a flow differ (IP length, ID
/// and checksum; sequence and ACK numbers; window, checksum, urgent pointer; timestamp
/// values), FIN and PSH free in the flags.
const MASK: [u8; CMP] = {
    let mut m = [0xff; CMP];
    let free = [
        (IP_LEN, 4), // and the ID
        (IP_CHECKSUM, 2),
        (SEQ, 8),    // and the ACK number
        (WINDOW, 6), // and the checksum and urgent pointer
        (TS_VAL, 8), // and the echo
    ];
    let mut i = 0;
    while i < free.len() {
        let (at, n) = free[i];
        let mut j = 0;
        while j < n && at + j < CMP {
            m[at + j] = 0;
            j += 1;
        }
        i += 1;
    }
    m[FLAGS] = !(FIN | PSH);
    m
};

/// A held segment's state (the head's headers are its template).
#[derive(Clone, Copy)]
struct Flow {
    template: [u8; CMP],
    valid: bool,
    count: u16,
    absorbed: bool,
    next_seq: u32,
    ack: u32,
    /// The newest frame's data offset, flags and window, as loaded.
    word: u32,
    ts_val: u32,
    /// The newest frame's timestamp echo, as loaded.
    ts_ecr: u32,
    payload: u32,
    mss: u32,
    last: u32,
    psh: bool,
    /// The frames' varying header words, summed as loaded (see [`Read::words`]).
    acc: u64,
}

const IDLE: Flow = Flow {
    template: [0; CMP],
    valid: false,
    count: 0,
    absorbed: false,
    next_seq: 0,
    ack: 0,
    word: 0,
    ts_val: 0,
    ts_ecr: 0,
    payload: 0,
    mss: 0,
    last: 0,
    psh: false,
    acc: 0,
};

impl Flow {
    /// Takes the newest frame's ACK, flags, window and timestamps (what delivery writes).
    #[inline(always)]
    fn newest(&mut self, r: &Read) {
        self.ack = r.ack;
        self.word = r.word;
        self.ts_val = r.ts_val;
        self.ts_ecr = r.ts_ecr;
    }
}

/// A frame's varying fields, read before the frame moves.
#[derive(Clone, Copy)]
struct Read {
    seq: u32,
    ack: u32,
    word: u32,
    ts_val: u32,
    ts_ecr: u32,
    flags: u8,
    /// IP total length, sequence and ACK numbers, offset/flags/window, checksum/urgent and
    /// the timestamp values, as native-order words: with trusted checksums the payload's sum
    /// is the negation of the pseudo header's and TCP header's, whose other words are the same
    /// in every frame of the flow (added at delivery).
    words: u64,
}

fn ne32(h: &[u8], at: usize) -> u32 {
    h.get(at..at + 4)
        .map_or(0, |w| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]))
}

impl Read {
    #[inline(always)]
    fn of(h: &[u8; HDR]) -> Self {
        let w = |at| u64::from(ne32(h, at));
        Read {
            seq: be32(h, SEQ),
            ack: be32(h, ACK_NUM),
            word: ne32(h, FLAG_WORD),
            ts_val: be32(h, TS_VAL),
            ts_ecr: ne32(h, TS_ECR),
            flags: h[FLAGS],
            words: u64::from(u16::from_ne_bytes([h[IP_LEN], h[IP_LEN + 1]]))
                + w(SEQ)
                + w(ACK_NUM)
                + w(FLAG_WORD)
                + w(TCP_CHECKSUM)
                + w(TS_VAL)
                + w(TS_ECR),
        }
    }
}

/// The floor coalescer: 64 direct-mapped flows of up to 64 frames.
pub(crate) struct Floor<F> {
    flows: Box<[Flow; FLOWS]>,
    held: Box<[[Option<F>; FRAMES]; FLOWS]>,
    /// Frames held now.
    in_flight: usize,
}

impl<F: AsRef<[u8]> + AsMut<[u8]>> Floor<F> {
    pub(crate) fn new() -> Self {
        Self {
            flows: Box::new([IDLE; FLOWS]),
            held: Box::new(std::array::from_fn(|_| std::array::from_fn(|_| None))),
            in_flight: 0,
        }
    }

    /// Frames held now.
    pub(crate) fn held_frames(&self) -> usize {
        self.in_flight
    }

    #[inline(always)]
    fn repeats(template: &[u8; CMP], h: &[u8; HDR]) -> bool {
        let block = |b: &[u8], at: usize| {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[at..at + 16]);
            u128::from_ne_bytes(a)
        };
        let mut d = 0;
        for at in (0..CMP).step_by(16) {
            d |= (block(h, at) ^ block(template, at)) & block(&MASK, at);
        }
        d == 0
    }

    /// Offers one frame.
    #[inline(always)]
    pub(crate) fn push<D: Deliver<F>>(&mut self, frame: F, out: &mut D) {
        let b = frame.as_ref();
        let Some(h) = b.first_chunk::<HDR>() else {
            return alone(frame, out);
        };
        let end = L3 + usize::from(u16::from_be_bytes([h[IP_LEN], h[IP_LEN + 1]]));
        if end != b.len() || end < HDR {
            return alone(frame, out);
        }
        let payload = (end - HDR) as u32;
        let a = &h[IP_SRC..PORTS];
        let key = u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
            ^ u64::from(ne32(h, PORTS));
        let s = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize & (FLOWS - 1);
        let e = &self.flows[s];
        if !(e.valid && Self::repeats(&e.template, h)) {
            let layout = h[ethernet::field::ETHERTYPE] == ethertype::IPV4.to_be_bytes()
                && h[L3] == ipv4::VER_IHL_PLAIN
                && h[L3 + ipv4::field::PROTOCOL] == protocol::TCP
                && usize::from(h[FLAG_WORD] >> 4) * 4 == tcp::HEADER_LEN_TS
                && h[TS_KINDS..TS_VAL] == tcp::TS_KINDS;
            if !layout || h[FLAGS] & (FIN | SYN | RST | URG) != 0 || h[FLAGS] & ACK == 0 {
                // Perhaps the held flow's own (a RST): after its segment.
                self.flush(s, out);
                return alone(frame, out);
            }
            let r = Read::of(h);
            self.flush(s, out);
            let e = &mut self.flows[s];
            e.template.copy_from_slice(&h[..CMP]);
            e.valid = true;
            return self.begin(s, frame, r, payload);
        }
        let r = Read::of(h);
        if e.count == 0 {
            if r.flags & FIN != 0 {
                return alone(frame, out);
            }
            return self.begin(s, frame, r, payload);
        }
        let next = r.seq == e.next_seq
            && r.flags & FIN == 0
            && !e.psh
            && r.ack.wrapping_sub(e.ack) as i32 >= 0
            && r.ts_val.wrapping_sub(e.ts_val) as i32 >= 0
            && (end - L3) as u32 + e.payload <= 65535
            && usize::from(e.count) < FRAMES;
        if next
            && payload > 0
            && payload <= e.mss
            && e.last == e.mss
            && e.payload.is_multiple_of(2)
            && e.payload > 0
        {
            let e = &mut self.flows[s];
            let i = usize::from(e.count);
            e.count += 1;
            e.next_seq = r.seq.wrapping_add(payload);
            e.newest(&r);
            e.payload += payload;
            e.last = payload;
            e.psh |= r.flags & PSH != 0;
            e.acc += r.words;
            self.held[s][i] = Some(frame);
            self.in_flight += 1;
            return;
        }
        if next && payload == 0 && e.payload == 0 && e.count == 1 {
            let e = &mut self.flows[s];
            e.newest(&r);
            e.acc = r.words;
            e.absorbed = true;
            if let Some(old) = self.held[s][0].replace(frame) {
                out.release(old);
            }
            return;
        }
        self.flush(s, out);
        self.begin(s, frame, r, payload)
    }

    #[inline(always)]
    fn begin(&mut self, s: usize, frame: F, r: Read, payload: u32) {
        let e = &mut self.flows[s];
        e.count = 1;
        e.absorbed = false;
        e.next_seq = r.seq.wrapping_add(payload);
        e.newest(&r);
        e.payload = payload;
        e.mss = payload;
        e.last = payload;
        e.psh = r.flags & PSH != 0;
        e.acc = r.words;
        self.held[s][0] = Some(frame);
        self.in_flight += 1;
    }

    /// Delivers everything held.
    pub(crate) fn flush_all<D: Deliver<F>>(&mut self, out: &mut D) {
        for s in 0..FLOWS {
            if self.flows[s].count > 0 {
                self.flush(s, out);
            }
        }
    }

    /// Delivers the segment of flow `s`, its head's headers rewritten when frames were merged.
    #[inline(never)]
    fn flush<D: Deliver<F>>(&mut self, s: usize, out: &mut D) {
        let e = &mut self.flows[s];
        let count = usize::from(e.count);
        if count == 0 {
            return;
        }
        let row = &mut self.held[s][..count];
        if count > 1 || e.absorbed {
            if let Some(head) = row[0].as_mut() {
                fix_head(head.as_mut(), e, count);
            }
        }
        e.count = 0;
        self.in_flight -= count;
        out.segment(row, HDR + e.payload as usize);
    }
}

/// Rewrites a segment head's IP length and checksum and its TCP header: newest ACK, flags and
/// window, timestamps, PSH if any frame had it, a full checksum.
fn fix_head(b: &mut [u8], e: &Flow, count: usize) {
    let Some(h) = b.get_mut(..HDR) else {
        return;
    };
    let total = (HDR - L3) as u16 + e.payload as u16;
    h[IP_LEN..IP_ID].copy_from_slice(&total.to_be_bytes());
    h[IP_CHECKSUM..IP_SRC].fill(0);
    let ip = csum::finish(csum::sum_header(&h[L3..L4]));
    h[IP_CHECKSUM..IP_SRC].copy_from_slice(&ip.to_be_bytes());
    h[ACK_NUM..FLAG_WORD].copy_from_slice(&e.ack.to_be_bytes());
    h[FLAG_WORD..TCP_CHECKSUM].copy_from_slice(&e.word.to_ne_bytes());
    if e.psh {
        h[FLAGS] |= PSH;
    }
    h[TS_VAL..TS_ECR].copy_from_slice(&e.ts_val.to_be_bytes());
    h[TS_ECR..HDR].copy_from_slice(&e.ts_ecr.to_ne_bytes());
    let pseudo = PseudoHeader::new(&h[IP_SRC..IP_DST], &h[IP_DST..L4], protocol::TCP);
    // The words every frame of the flow shares: addresses and protocol, minus the IP header
    // the length word counts, ports, the timestamp option's kinds.
    let shared = u64::from(pseudo.base().to_be())
        + u64::from((!(ipv4::HEADER_LEN as u16)).to_be())
        + u64::from(ne32(h, PORTS))
        + u64::from(ne32(h, TS_KINDS));
    let payload = csum::finish(u16::from_be(csum::fold(e.acc + shared * count as u64)));
    h[TCP_CHECKSUM..TCP_CHECKSUM_END].fill(0);
    let tcp_len = (HDR - L4) as u32 + e.payload;
    let sum = csum::add(
        csum::add(pseudo.sum(tcp_len), csum::sum_header(&h[L4..HDR])),
        payload,
    );
    h[TCP_CHECKSUM..TCP_CHECKSUM_END].copy_from_slice(&csum::finish(sum).to_be_bytes());
}

/// Delivers a frame on its own.
fn alone<F: AsRef<[u8]>, D: Deliver<F>>(frame: F, out: &mut D) {
    let len = frame.as_ref().len();
    out.segment(&mut [Some(frame)], len);
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{PacketBuilder, SlicedPacket, TransportSlice};
    use proptest::prelude::*;

    /// Collects segments as contiguous frames.
    #[derive(Default)]
    struct Collect {
        /// Each segment as one frame, with the number of frames in it.
        out: Vec<(Vec<u8>, usize)>,
        released: usize,
    }

    impl Deliver<Vec<u8>> for Collect {
        fn segment(&mut self, frames: &mut [Option<Vec<u8>>], len: usize) {
            let mut seg = Vec::new();
            for (i, f) in frames.iter_mut().enumerate() {
                let f = f.take().expect("every frame of a segment");
                if i == 0 {
                    seg.extend_from_slice(&f);
                } else {
                    seg.extend_from_slice(&f[HDR..]);
                }
            }
            assert_eq!(seg.len(), len, "segment length");
            self.out.push((seg, frames.len()));
        }
        fn release(&mut self, _: Vec<u8>) {
            self.released += 1;
        }
    }

    fn frame(port: u16, seq: u32, ack: u32, ts: u32, payload: &[u8], psh: bool) -> Vec<u8> {
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 18, 0, 2], 64)
            .tcp(port, 80, seq, 5000)
            .ack(ack)
            .options(&[
                etherparse::TcpOptionElement::Noop,
                etherparse::TcpOptionElement::Noop,
                etherparse::TcpOptionElement::Timestamp(ts, 7),
            ])
            .expect("options fit");
        let b = if psh { b.psh() } else { b };
        let mut v = Vec::new();
        b.write(&mut v, payload).expect("written");
        v
    }

    /// The sequence number and payload bytes of one TCP frame; fails the test when its IPv4
    /// or TCP checksum is wrong.
    fn check(f: &[u8]) -> (u32, Vec<u8>) {
        let p = SlicedPacket::from_ethernet(f).expect("parses");
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            panic!("IPv4")
        };
        assert_eq!(
            ip.header().to_header().calc_header_checksum(),
            ip.header().header_checksum()
        );
        let Some(TransportSlice::Tcp(t)) = &p.transport else {
            panic!("TCP")
        };
        let want = t
            .to_header()
            .calc_checksum_ipv4(&ip.header().to_header(), t.payload())
            .expect("checksum");
        assert_eq!(t.checksum(), want, "TCP checksum of a delivered segment");
        (t.sequence_number(), t.payload().to_vec())
    }

    #[test]
    fn merges_a_flow_with_full_checksums_and_the_newest_ack() {
        let mut floor = Floor::new();
        let mut out = Collect::default();
        let chunk = [0x5au8; 1000];
        for i in 0..5u32 {
            floor.push(
                frame(4000, 1 + 1000 * i, 100 + i, 10 + i, &chunk, i == 4),
                &mut out,
            );
        }
        assert_eq!(floor.held_frames(), 5);
        floor.flush_all(&mut out);
        assert_eq!(floor.held_frames(), 0);
        assert_eq!(out.out.len(), 1, "one segment");
        let (seq, payload) = check(&out.out[0].0);
        assert_eq!((seq, payload.len()), (1, 5000));
        let p = SlicedPacket::from_ethernet(&out.out[0].0).expect("parses");
        let Some(TransportSlice::Tcp(t)) = &p.transport else {
            panic!("TCP")
        };
        assert_eq!(t.acknowledgment_number(), 104, "the newest ACK");
        assert!(t.psh(), "PSH of the last frame");
    }

    #[test]
    fn a_gap_or_another_layout_is_not_merged() {
        let mut floor = Floor::new();
        let mut out = Collect::default();
        floor.push(frame(4000, 1, 1, 1, &[1; 100], false), &mut out);
        floor.push(frame(4000, 500, 1, 1, &[2; 100], false), &mut out); // a gap
        floor.push(vec![0; 40], &mut out); // too short: alone
        floor.flush_all(&mut out);
        assert_eq!(out.out.len(), 3);
    }

    /// The built-in capture in bursts of 32: every frame comes out, every merged segment has
    /// right checksums, and each flow's payload bytes come out in the order they went in.
    #[test]
    fn the_built_in_capture_comes_out_whole_with_right_checksums() {
        let cap = crate::capture::Capture::load(None).expect("built-in capture");
        let frames: Vec<Vec<u8>> = cap.records.iter().map(|r| cap.frame(r).to_vec()).collect();
        // Each flow's payload bytes (by addresses and ports), in order.
        fn streams<'a>(
            frames: impl Iterator<Item = &'a [u8]>,
        ) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
            let mut m = std::collections::BTreeMap::<Vec<u8>, Vec<u8>>::new();
            for f in frames {
                if let Ok(p) = SlicedPacket::from_ethernet(f) {
                    if let Some(TransportSlice::Tcp(t)) = &p.transport {
                        m.entry(f[26..38].to_vec())
                            .or_default()
                            .extend_from_slice(t.payload());
                    }
                }
            }
            m
        }
        let mut floor = Floor::new();
        let mut out = Collect::default();
        for burst in frames.chunks(32) {
            for f in burst {
                floor.push(f.clone(), &mut out);
            }
            floor.flush_all(&mut out);
        }
        let merged = out.out.iter().filter(|(_, n)| *n > 1).count();
        assert!(
            merged > 50 && out.out.len() * 3 < frames.len(),
            "{merged} merged segments, {} out",
            out.out.len()
        );
        for (seg, n) in &out.out {
            if *n > 1 {
                let _ = check(seg);
            }
        }
        let delivered: usize = out.out.iter().map(|(_, n)| n).sum();
        assert_eq!(delivered + out.released, frames.len());
        assert_eq!(
            streams(out.out.iter().map(|(s, _)| &s[..])),
            streams(frames.iter().map(|f| &f[..]))
        );
    }

    proptest! {
        /// Whatever the frames, nothing panics, every frame comes out (in a segment or
        /// released) and every merged segment carries right checksums. (Each flow's bytes in
        /// order: the built-in capture's test.)
        #[test]
        fn conserves_frames_and_writes_right_checksums(
            steps in prop::collection::vec((0u16..3, 0u32..4, 0usize..300, any::<bool>(), any::<u8>()), 1..60),
            junk in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..120), 0..4),
        ) {
            let mut floor = Floor::new();
            let mut out = Collect::default();
            let mut next = [1u32; 3];
            let mut n = 0;
            for (flow, gap, len, psh, fill) in steps {
                let seq = next[usize::from(flow)] + if gap == 0 { 7 } else { 0 };
                next[usize::from(flow)] = seq + len as u32;
                floor.push(frame(4000 + flow, seq, 1, 1, &vec![fill; len], psh), &mut out);
                n += 1;
            }
            for j in junk {
                floor.push(j, &mut out);
                n += 1;
            }
            floor.flush_all(&mut out);
            prop_assert_eq!(floor.held_frames(), 0);
            let mut frames = out.released;
            for (seg, count) in &out.out {
                // A merged segment is checked (a frame delivered alone comes out as it came).
                if *count > 1 {
                    let _ = check(seg);
                }
                frames += count;
            }
            prop_assert_eq!(frames, n);
        }
    }
}
