//! A deterministic model of a connected-mode IPoIB receiver: the seed's experiment.
//!
//! The seed (Linux commit "IPoIB: Copy small received SKBs in connected mode") measured netperf
//! sending 128-byte UDP messages over IPoIB connected mode: the receiver got 116 Mb/s without
//! copybreak and about 315 Mb/s with it, and without it the receiver ran out of posted buffers,
//! so the sender got RNR NAKs; Linux's connected mode allows no RNR retries, so each one tore
//! the connection down and silently lost the messages in flight, and the sending application,
//! freed from actually transmitting, "sent" 5.1 M messages of which 1.5 M left the port.
//!
//! This module replays that situation in simulated time, integer picoseconds, no randomness:
//! the same configuration always gives the same result. Its parts:
//!
//! - **the sender**: an application sending messages at [`SimConfig::offered_rate`] (its own
//!   CPU's limit) into a send queue of [`SimConfig::send_queue`] work requests (it blocks when
//!   the queue is full), or at [`SimConfig::down_rate`] while the connection is down and the
//!   messages are dropped at once (cheaper: the seed's "application *thinks* it posted"); a
//!   reliable-connected queue pair transmitting them back to back at the link rate, each
//!   arriving [`SimConfig::latency_ns`] later. A message that finds no posted receive buffer
//!   gets an **RNR NAK**: the messages behind it are discarded (go-back-N) and the sender waits
//!   [`SimConfig::rnr_timer_ns`] and retries, at most [`SimConfig::rnr_retry`] times (7 means
//!   forever, as in InfiniBand; Linux's connected mode uses 0). When the retries run out the
//!   queue pair goes to the error state: **connection reset**, every message in the send queue
//!   is lost (flushed), and for [`SimConfig::reconnect_ns`] the connection is being set up again
//!   and UDP messages the application offers are dropped. A TCP sender loses nothing for good:
//!   it stops until its retransmission timeout ([`SimConfig::tcp_rto_ns`]) and sends again.
//! - **the receive queue**: [`SimConfig::rq_depth`] large buffers posted, a pool of
//!   [`SimConfig::large_pool`] large and [`SimConfig::small_pool`] small buffers in all, with
//!   exactly [`crate::RxQueue`]'s rules: copybreak copies a frame of at most the threshold into
//!   a small buffer and reposts the large one; a hand-up takes a replacement from the pool or
//!   leaves the slot empty until a buffer comes back from the application.
//! - **the driver CPU** (the NAPI poll): interrupt moderation starts a poll
//!   [`SimConfig::irq_delay_ns`] after the first completion (or once
//!   [`SimConfig::poll_budget`] are waiting); the poll takes one completion at a time, each
//!   costing the measured per-frame time of the path it takes ([`Costs`]) plus a fixed part,
//!   until the completion queue is empty. For TCP, frames go through the coalescer (its
//!   measured cost per frame) and are delivered as one segment per 64 KB, per budget and at
//!   the end of the poll.
//! - **the application**: consumes one delivered unit (a message, a segment) at a time at
//!   [`SimConfig::app_ns`] plus [`SimConfig::app_ns_per_kib`] per KiB, then frees its buffers.
//!   A UDP socket holds at most [`SimConfig::socket_queue`] messages and drops beyond (their
//!   buffers freed at once); TCP's receive window ([`Workload::Tcp::window`] frames
//!   unconsumed) keeps the sender from overrunning it.
//!
//! [`run`] returns a [`SimResult`]: messages delivered per second, RNR NAKs, resets, messages
//! lost. `examples/copybreak_sim.rs` prints them for the seed's workload and for bulk TCP with
//! and without copybreak, with costs measured by `benches/rx_path.rs`.
//!
//! ```
//! use drivers_ipoib::sim::{self, Costs, SimConfig};
//!
//! // The seed's workload with the seed-era per-frame costs (hand-up far dearer than a copy).
//! let mut config = SimConfig::seed_udp(Costs::SEED_ERA);
//! config.duration_ns = 20_000_000; // 20 ms of simulated time
//! let with = sim::run(&config)?;
//! config.copybreak = None;
//! let without = sim::run(&config)?;
//! assert_eq!(with.resets, 0);
//! assert!(without.resets > 0 && without.rnr_naks > 0);
//! assert!(with.delivered > 2 * without.delivered);
//! # Ok::<(), drivers_ipoib::sim::SimError>(())
//! ```

use core::fmt;

/// Bytes of InfiniBand headers on the wire around a reliable-connected IPoIB packet: local
/// route header 8, base transport header 12, invariant CRC 4, variant CRC 2.
pub const IB_OVERHEAD: u32 = 26;

/// IPv4 + UDP header bytes of a UDP message.
const UDP_HEADERS: u32 = 20 + 8;
/// IPv4 + TCP (with timestamps) header bytes of a TCP segment.
const TCP_HEADERS: u32 = 20 + 32;
/// The IPoIB encapsulation header.
const ENCAP: u32 = 4;
/// Largest coalesced IP datagram (lro-core's default `max_ip_len`).
const MAX_SEGMENT_IP: u32 = 65535;

/// Largest send queue the model keeps (messages in flight).
pub const MAX_SEND_QUEUE: usize = 4096;
/// Largest socket queue or TCP window, in delivered units.
pub const MAX_SOCKET_QUEUE: usize = 16384;

/// What the sender sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// UDP messages of `payload` bytes, one IPoIB packet each (netperf `UDP_STREAM`).
    Udp {
        /// Payload bytes per message (the seed: 128).
        payload: u32,
    },
    /// Bulk TCP: segments of `mss` payload bytes.
    Tcp {
        /// Payload bytes per segment.
        mss: u32,
        /// The receive window in segments: the sender keeps at most this many in flight or
        /// waiting at the receiver unconsumed.
        window: u32,
        /// Frames go through the coalescer (delivered as 64 KB segments) or one by one.
        coalesce: bool,
    },
}

impl Workload {
    /// Bytes of one IPoIB packet (encapsulation header included).
    pub const fn frame_len(&self) -> u32 {
        match *self {
            Workload::Udp { payload } => ENCAP + UDP_HEADERS + payload,
            Workload::Tcp { mss, .. } => ENCAP + TCP_HEADERS + mss,
        }
    }

    /// Payload bytes of one message.
    pub const fn payload(&self) -> u32 {
        match *self {
            Workload::Udp { payload } => payload,
            Workload::Tcp { mss, .. } => mss,
        }
    }

    /// TCP?
    pub const fn is_tcp(&self) -> bool {
        matches!(self, Workload::Tcp { .. })
    }
}

/// Per-frame driver costs in picoseconds: this crate's code, measured (`benches/rx_path.rs`),
/// or another receive path's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// A copybreak completion: copy into a small buffer, repost the large one.
    pub copy_ps: u64,
    /// A hand-up completion: pass the large buffer up, post a replacement.
    pub handup_ps: u64,
    /// The coalescer's cost per TCP frame (parse, merge, its share of the segment's delivery).
    pub coalesce_ps: u64,
    /// Everything else the driver CPU does per completion (interrupt and CQ handling, IP and
    /// UDP or TCP input before the socket).
    pub fixed_ps: u64,
}

impl Costs {
    /// The seed's receive path as its numbers imply (Linux 2.6.2x, the hardware of 2008): the
    /// receiver handled 1,130,489 messages in 10 s without copybreak (8.8 us each) and about
    /// 307,000 per second with it (3.3 us); the seed ascribes the difference to allocating a
    /// full-sized replacement buffer and moving its page fragments. Here 8.6 us and 3.1 us per
    /// completion on the driver CPU (116,000 and 322,000 per second). Derived, not measured.
    pub const SEED_ERA: Costs = Costs {
        copy_ps: 3_100_000,
        handup_ps: 8_600_000,
        coalesce_ps: 0,
        fixed_ps: 0,
    };
}

/// The model's parameters. [`SimConfig::seed_udp`] and [`SimConfig::bulk_tcp`] give the
/// defaults the example prints; every field can be changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimConfig {
    /// What is sent.
    pub workload: Workload,
    /// Messages per second the sending application sends while the connection is up: its own
    /// limit (it blocks when its send queue is full).
    pub offered_rate: u64,
    /// Messages per second it "sends" while the connection is down: each dropped at once
    /// (UDP; a TCP sender waits for its timeout instead).
    pub down_rate: u64,
    /// Link data rate in Gb/s (4x DDR InfiniBand: 16).
    pub link_gbps: u32,
    /// One-way latency, sender to receiver.
    pub latency_ns: u64,
    /// The sender's send queue: work requests posted and not yet acknowledged.
    pub send_queue: u32,
    /// Receive buffers kept posted.
    pub rq_depth: u32,
    /// Large receive buffers in all (posted, free, and up the stack).
    pub large_pool: u32,
    /// Small (copybreak) buffers in all.
    pub small_pool: u32,
    /// Copybreak threshold in bytes (frames of at most this size are copied); `None`: off.
    pub copybreak: Option<u32>,
    /// Per-frame driver costs.
    pub costs: Costs,
    /// NAPI budget: completions per poll (the coalescer flushes at the end of a poll).
    pub poll_budget: u32,
    /// Interrupt moderation: a poll starts this long after the first completion that found
    /// the driver idle (or at once when `poll_budget` completions wait).
    pub irq_delay_ns: u64,
    /// The application's cost per delivered unit (a message, a segment).
    pub app_ns: u64,
    /// And per KiB of payload it copies out.
    pub app_ns_per_kib: u64,
    /// UDP socket queue: messages it holds; more are dropped.
    pub socket_queue: u32,
    /// RNR retries before the connection is reset (0-6; 7: retry forever).
    pub rnr_retry: u8,
    /// RNR NAK timer: how long the sender waits before retrying.
    pub rnr_timer_ns: u64,
    /// Time to set a reset connection up again.
    pub reconnect_ns: u64,
    /// TCP retransmission timeout after a reset lost segments.
    pub tcp_rto_ns: u64,
    /// Simulated time.
    pub duration_ns: u64,
}

impl SimConfig {
    /// The seed's workload: 128-byte UDP messages over connected mode, sent at 307,000 per
    /// second while the connection is up (the seed's sender when its messages were really
    /// transmitted: 315 Mb/s) and 720,000 per second while it is down (what makes the seed's
    /// 5,142,034 messages in 10 s with 1,543,996 leaving the port); receive queue 256 deep
    /// with 256 spare large buffers and 1024 small ones, copybreak at 256, Linux's RNR policy
    /// (no retries), a socket that holds 1024 messages, the application 3 us per message.
    pub const fn seed_udp(costs: Costs) -> Self {
        Self {
            workload: Workload::Udp { payload: 128 },
            offered_rate: 307_000,
            down_rate: 720_000,
            link_gbps: 16,
            latency_ns: 1_500,
            send_queue: 128,
            rq_depth: 256,
            large_pool: 512,
            small_pool: 1024,
            copybreak: Some(256),
            costs,
            poll_budget: 64,
            irq_delay_ns: 8_000,
            app_ns: 3_000,
            app_ns_per_kib: 0,
            socket_queue: 1024,
            rnr_retry: 0,
            rnr_timer_ns: 10_000,
            reconnect_ns: 500_000,
            tcp_rto_ns: 200_000_000,
            duration_ns: 1_000_000_000,
        }
    }

    /// Bulk TCP through the coalescer over connected mode with the MTU left at 2044 (1992-byte
    /// segments with timestamps), a 512-segment window, the application 2 us per delivered
    /// unit plus 100 ns per KiB copied; the rest as [`SimConfig::seed_udp`].
    pub const fn bulk_tcp(costs: Costs) -> Self {
        let mut c = Self::seed_udp(costs);
        c.workload = Workload::Tcp {
            mss: 1992,
            window: 512,
            coalesce: true,
        };
        c.offered_rate = 1_000_000;
        c.down_rate = 1_000_000;
        c.app_ns = 2_000;
        c.app_ns_per_kib = 100;
        c
    }

    fn check(&self) -> Result<(), SimError> {
        let bad = |what| Err(SimError(what));
        if self.offered_rate == 0 || self.down_rate == 0 || self.link_gbps == 0 {
            return bad("offered_rate, down_rate and link_gbps must be positive");
        }
        if self.send_queue == 0 || self.send_queue as usize > MAX_SEND_QUEUE {
            return bad("send_queue must be 1 to MAX_SEND_QUEUE");
        }
        if self.rq_depth == 0 || self.rq_depth > self.large_pool {
            return bad("rq_depth must be 1 to large_pool");
        }
        if self.socket_queue == 0 || self.socket_queue as usize > MAX_SOCKET_QUEUE {
            return bad("socket_queue must be 1 to MAX_SOCKET_QUEUE");
        }
        if let Workload::Tcp { mss, window, .. } = self.workload {
            if mss == 0 || window == 0 || window as usize > MAX_SOCKET_QUEUE {
                return bad("TCP mss must be positive and window 1 to MAX_SOCKET_QUEUE");
            }
        }
        // `Workload::frame_len` adds the headers (TCP's are the longer) to the payload.
        if self.workload.payload() > u32::MAX - ENCAP - TCP_HEADERS {
            return bad("payload too large: the frame length must fit 32 bits");
        }
        if self.poll_budget == 0 {
            return bad("poll_budget must be positive");
        }
        if self.rnr_retry > 7 {
            return bad("rnr_retry is 0 to 7 (7: retry forever)");
        }
        // The clock counts picoseconds in 64 bits: the end of the run must leave room for the
        // delays added to it (each capped just below `NEVER` by `later`).
        if self.duration_ns > MAX_DURATION_NS {
            return bad("duration_ns too long: simulated time is kept in 64-bit picoseconds");
        }
        Ok(())
    }
}

/// A configuration the model cannot run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimError(pub &'static str);

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl core::error::Error for SimError {}

/// What a run measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SimResult {
    /// Simulated time.
    pub duration_ns: u64,
    /// Messages the sending application offered (sent, as far as it knows).
    pub offered: u64,
    /// Messages the receiver's HCA accepted.
    pub received: u64,
    /// Messages the application consumed.
    pub delivered: u64,
    /// Units the application consumed (messages, or coalesced segments).
    pub units: u64,
    /// RNR NAKs the receiver sent.
    pub rnr_naks: u64,
    /// Connection resets (RNR retries exhausted).
    pub resets: u64,
    /// Messages flushed from the send queue by resets.
    pub lost_in_resets: u64,
    /// UDP messages the application offered while the connection was down, dropped.
    pub lost_while_down: u64,
    /// UDP messages dropped because the socket queue was full.
    pub socket_drops: u64,
    /// Frames copied (copybreak).
    pub copied: u64,
    /// Frames handed up in their large buffer.
    pub handed_up: u64,
    /// Hand-ups that left an RQ slot empty (no large buffer free).
    pub slot_waits: u64,
    /// The fewest receive buffers posted at any moment.
    pub min_posted: u32,
    /// Time the driver CPU was busy.
    pub driver_busy_ns: u64,
    /// Time the application was busy.
    pub app_busy_ns: u64,
}

impl SimResult {
    /// Messages delivered to the application per second.
    pub fn delivered_per_sec(&self) -> f64 {
        self.per_sec(self.delivered)
    }

    /// `n` events of the run per second of it (a run of no time counts as one nanosecond: a
    /// number, never NaN or infinite).
    pub fn per_sec(&self, n: u64) -> f64 {
        n as f64 * 1e9 / self.duration_ns.max(1) as f64
    }

    /// Messages lost: flushed by resets, dropped while reconnecting (UDP). TCP sends those
    /// again after its timeout.
    pub fn lost(&self) -> u64 {
        self.lost_in_resets + self.lost_while_down
    }
}

/// Where every large and small buffer of the model is (the same places as
/// [`crate::Accounting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimAccounting {
    /// Large buffers free.
    pub large_free: u32,
    /// Posted to the RQ.
    pub posted: u32,
    /// Completed, waiting for the driver (or being processed).
    pub completed: u32,
    /// Large buffers held by the coalescer.
    pub held: u32,
    /// In the socket queue or being consumed.
    pub large_up: u32,
    /// Small buffers free.
    pub small_free: u32,
    /// Small buffers up (held by the coalescer, in the socket queue or being consumed).
    pub small_up: u32,
    /// RQ slots waiting for a buffer.
    pub owed: u32,
}

const NEVER: u64 = u64::MAX;
const PS_PER_NS: u64 = 1_000;
/// The longest simulated time: half the picosecond clock, so an event time (at most just
/// below [`NEVER`]) is always past the end.
const MAX_DURATION_NS: u64 = u64::MAX / PS_PER_NS / 2;

/// Nanoseconds as picoseconds, saturating.
const fn ps(ns: u64) -> u64 {
    ns.saturating_mul(PS_PER_NS)
}

/// The time `delay` picoseconds after `t`: saturating just below [`NEVER`] (which means "no
/// event"), so any delay, however long, is an event after the end of the run.
const fn later(t: u64, delay: u64) -> u64 {
    let at = t.saturating_add(delay);
    if at == NEVER {
        NEVER - 1
    } else {
        at
    }
}

/// A delivered unit: `frames` frames, `small` of them in small buffers and the rest in large
/// ones (a coalesced segment can have both: copybreak copies small TCP frames too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Unit {
    frames: u16,
    small: u16,
}

impl Unit {
    fn large(self) -> u32 {
        u32::from(self.frames - self.small)
    }
}

/// A fixed-capacity FIFO (no allocation).
struct Ring<T: Copy + Default, const N: usize> {
    items: [T; N],
    head: usize,
    len: usize,
}

impl<T: Copy + Default, const N: usize> Ring<T, N> {
    fn new() -> Self {
        Self {
            items: [T::default(); N],
            head: 0,
            len: 0,
        }
    }
    fn push(&mut self, v: T) -> bool {
        if self.len == N {
            return false;
        }
        self.items[(self.head + self.len) % N] = v;
        self.len += 1;
        true
    }
    fn front(&self) -> Option<T> {
        (self.len > 0).then(|| self.items[self.head])
    }
    fn pop(&mut self) -> Option<T> {
        let v = self.front()?;
        self.head = (self.head + 1) % N;
        self.len -= 1;
        Some(v)
    }
    fn clear(&mut self) {
        self.len = 0;
    }
}

/// The connection's state at the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Conn {
    Up,
    /// Waiting out the RNR timer until then.
    RnrWait(u64),
    /// Reset; set up again at that time.
    Down(u64),
}

/// The model's state. Build with [`Simulation::new`], run with [`Simulation::run`] (or
/// [`run`]); [`Simulation::step`] advances one event, for tests that watch the accounting.
pub struct Simulation {
    cfg: SimConfig,
    now: u64,
    end: u64,
    // Sender.
    offer_interval: u64,
    down_interval: u64,
    next_offer: u64,
    app_blocked: bool,
    sq: u32,
    inflight: Ring<u64, MAX_SEND_QUEUE>,
    link_free: u64,
    wire_ps: u64,
    conn: Conn,
    retries: u8,
    tcp_stall_until: u64,
    // Receiver.
    posted: u32,
    cq: u32,
    large_free: u32,
    small_free: u32,
    owed: u32,
    /// The completion the driver is processing: done at `driver_done`, copied or not.
    driver_done: u64,
    driver_copy: bool,
    poll_frames: u32,
    polling: bool,
    /// When moderation lets the next poll start (the driver idle, completions waiting).
    irq_at: u64,
    held: u32,
    /// Of the frames held, those in small buffers.
    held_small: u32,
    seg_frames: u32,
    socket: Ring<Unit, MAX_SOCKET_QUEUE>,
    socket_large: u32,
    socket_small: u32,
    app_done: u64,
    app_unit: Unit,
    res: SimResult,
}

impl Simulation {
    /// A model at time 0: every receive buffer posted, the sender about to offer.
    ///
    /// # Errors
    /// [`SimError`] for parameters out of range.
    pub fn new(cfg: &SimConfig) -> Result<Self, SimError> {
        cfg.check()?;
        let frame = u64::from(cfg.workload.frame_len());
        let seg_frames = match cfg.workload {
            Workload::Tcp {
                mss,
                coalesce: true,
                ..
            } => ((MAX_SEGMENT_IP - TCP_HEADERS) / mss).max(1),
            _ => 1,
        };
        Ok(Self {
            cfg: *cfg,
            now: 0,
            end: cfg.duration_ns.saturating_mul(PS_PER_NS),
            offer_interval: (1_000_000_000_000 / cfg.offered_rate).max(1),
            down_interval: (1_000_000_000_000 / cfg.down_rate).max(1),
            next_offer: 0,
            app_blocked: false,
            sq: 0,
            inflight: Ring::new(),
            link_free: 0,
            wire_ps: (frame + u64::from(IB_OVERHEAD)) * 8 * 1000 / u64::from(cfg.link_gbps),
            conn: Conn::Up,
            retries: 0,
            tcp_stall_until: 0,
            posted: cfg.rq_depth,
            cq: 0,
            large_free: cfg.large_pool - cfg.rq_depth,
            small_free: cfg.small_pool,
            owed: 0,
            driver_done: NEVER,
            driver_copy: false,
            poll_frames: 0,
            polling: false,
            irq_at: NEVER,
            held: 0,
            held_small: 0,
            seg_frames,
            socket: Ring::new(),
            socket_large: 0,
            socket_small: 0,
            app_done: NEVER,
            app_unit: Unit::default(),
            res: SimResult {
                min_posted: cfg.rq_depth,
                ..SimResult::default()
            },
        })
    }

    /// Where every buffer is now.
    pub fn accounting(&self) -> SimAccounting {
        let processing = u32::from(self.driver_done != NEVER);
        let (app_large, app_small) = match self.app_done {
            NEVER => (0, 0),
            _ => (self.app_unit.large(), u32::from(self.app_unit.small)),
        };
        // The completion being processed keeps its large buffer (counted as completed) until
        // the driver is done with it.
        SimAccounting {
            large_free: self.large_free,
            posted: self.posted,
            completed: self.cq + processing,
            held: self.held - self.held_small,
            large_up: self.socket_large + app_large,
            small_free: self.small_free,
            small_up: self.held_small + self.socket_small + app_small,
            owed: self.owed,
        }
    }

    /// Every buffer in exactly one place, the RQ's slots adding up to its depth.
    pub fn is_consistent(&self) -> bool {
        let a = self.accounting();
        a.large_free + a.posted + a.completed + a.held + a.large_up == self.cfg.large_pool
            && a.small_free + a.small_up == self.cfg.small_pool
            && a.posted + a.completed + a.owed == self.cfg.rq_depth
    }

    /// The simulated time, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        self.now / PS_PER_NS
    }

    /// The sender's next transmission time, if it can transmit.
    fn next_tx(&self) -> u64 {
        let untx = self.sq as usize - self.inflight.len;
        if self.conn != Conn::Up || untx == 0 {
            return NEVER;
        }
        self.link_free.max(self.now)
    }

    fn next_offer_time(&self) -> u64 {
        if self.app_blocked || self.now_tcp_stalled() {
            return NEVER;
        }
        self.next_offer
    }

    fn now_tcp_stalled(&self) -> bool {
        self.cfg.workload.is_tcp() && self.tcp_stall_until > self.now
    }

    /// Advances to the next event and handles it; `false` once the simulated time is over.
    pub fn step(&mut self) -> bool {
        let conn_t = match self.conn {
            Conn::Up => NEVER,
            Conn::RnrWait(t) | Conn::Down(t) => t,
        };
        let stall_t = if self.now_tcp_stalled() {
            self.tcp_stall_until
        } else {
            NEVER
        };
        let irq_t = if self.driver_done == NEVER && !self.polling {
            self.irq_at
        } else {
            NEVER
        };
        let times = [
            conn_t,
            self.driver_done,
            self.app_done,
            self.inflight.front().unwrap_or(NEVER),
            self.next_tx(),
            self.next_offer_time(),
            stall_t,
            irq_t,
        ];
        let (which, t) = times
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(i, t)| (t, i))
            .unwrap_or((0, NEVER));
        if t >= self.end {
            self.now = self.end;
            return false;
        }
        self.now = self.now.max(t);
        match which {
            0 => self.conn = Conn::Up,
            1 => self.driver_finish(),
            2 => self.app_finish(),
            3 => self.arrival(),
            4 => self.transmit(),
            5 => self.offer(),
            // The TCP stall ended (offers resume), or moderation lets the driver poll: both
            // are picked up below.
            _ => {}
        }
        self.start_work();
        true
    }

    /// Runs to the end of the simulated time.
    pub fn run(mut self) -> SimResult {
        while self.step() {}
        self.finish();
        self.res
    }

    /// Ends the run: the result's duration is the time of the last event.
    fn finish(&mut self) {
        self.res.duration_ns = self.now_ns();
    }

    fn offer(&mut self) {
        if let Conn::Down(_) = self.conn {
            if !self.cfg.workload.is_tcp() {
                self.next_offer += self.down_interval;
                self.res.offered += 1;
                self.res.lost_while_down += 1;
                return;
            }
        }
        self.next_offer += self.offer_interval;
        let room = match self.cfg.workload {
            Workload::Tcp { window, .. } => {
                let unconsumed = self.cq
                    + u32::from(self.driver_done != NEVER)
                    + self.held
                    + self.socket_large
                    + self.socket_small;
                self.sq < self.cfg.send_queue && self.sq + unconsumed < window
            }
            Workload::Udp { .. } => self.sq < self.cfg.send_queue,
        };
        if room {
            self.sq += 1;
            self.res.offered += 1;
        } else {
            // The application blocks until a send completes; this offer waits.
            self.next_offer -= self.offer_interval;
            self.app_blocked = true;
        }
    }

    fn unblock(&mut self) {
        if self.app_blocked {
            self.app_blocked = false;
            self.next_offer = self.next_offer.max(self.now);
        }
    }

    fn transmit(&mut self) {
        let start = self.link_free.max(self.now);
        self.link_free = later(start, self.wire_ps);
        let arrival = later(self.link_free, ps(self.cfg.latency_ns));
        self.inflight.push(arrival);
    }

    fn arrival(&mut self) {
        self.inflight.pop();
        if self.posted > 0 {
            self.posted -= 1;
            self.cq += 1;
            self.sq -= 1;
            self.retries = 0;
            self.res.received += 1;
            self.unblock();
            return;
        }
        // RNR NAK: this message and everything behind it will be sent again.
        self.res.rnr_naks += 1;
        self.inflight.clear();
        let nak_back = later(self.now, ps(self.cfg.latency_ns));
        self.link_free = self.link_free.max(nak_back);
        if self.cfg.rnr_retry < 7 && self.retries >= self.cfg.rnr_retry {
            // Retries exhausted: the queue pair goes to error, the send queue is flushed.
            self.res.resets += 1;
            self.res.lost_in_resets += u64::from(self.sq);
            self.sq = 0;
            self.retries = 0;
            self.conn = Conn::Down(later(nak_back, ps(self.cfg.reconnect_ns)));
            if self.cfg.workload.is_tcp() {
                self.tcp_stall_until = later(nak_back, ps(self.cfg.tcp_rto_ns));
            }
            self.unblock();
        } else {
            self.retries = self.retries.saturating_add(1);
            self.conn = Conn::RnrWait(later(nak_back, ps(self.cfg.rnr_timer_ns)));
        }
    }

    /// Starts the driver and the application when they are idle and have work.
    fn start_work(&mut self) {
        if self.driver_done == NEVER {
            self.drive();
        }
        if self.app_done == NEVER {
            if let Some(unit) = self.socket.pop() {
                self.socket_small -= u32::from(unit.small);
                self.socket_large -= unit.large();
                let bytes = u64::from(unit.frames) * u64::from(self.cfg.workload.payload());
                let per_kib = self.cfg.app_ns_per_kib.saturating_mul(bytes) / 1024;
                let cost = ps(self.cfg.app_ns.saturating_add(per_kib));
                self.app_unit = unit;
                self.app_done = later(self.now, cost);
                self.res.app_busy_ns = self.res.app_busy_ns.saturating_add(cost / PS_PER_NS);
            }
        }
        self.res.min_posted = self.res.min_posted.min(self.posted);
    }

    /// The idle driver: ends the poll when nothing is left (or the budget is spent), and takes
    /// the next completion, starting a poll when interrupt moderation lets it.
    fn drive(&mut self) {
        if self.polling && (self.cq == 0 || self.poll_frames >= self.cfg.poll_budget) {
            // End of the poll: the coalescer flushes. With completions still waiting NAPI
            // polls again at once.
            self.deliver_held();
            self.poll_frames = 0;
            self.polling = self.cq > 0;
        }
        if self.cq == 0 {
            self.irq_at = NEVER;
            return;
        }
        if !self.polling {
            if self.irq_at == NEVER {
                self.irq_at = later(self.now, ps(self.cfg.irq_delay_ns));
            }
            if self.now < self.irq_at && self.cq < self.cfg.poll_budget {
                return;
            }
            self.polling = true;
            self.irq_at = NEVER;
        }
        self.cq -= 1;
        let frame = self.cfg.workload.frame_len();
        self.driver_copy = self.cfg.copybreak.is_some_and(|t| frame <= t) && self.small_free > 0;
        let c = self.cfg.costs;
        let mut cost = c.fixed_ps.saturating_add(if self.driver_copy {
            c.copy_ps
        } else {
            c.handup_ps
        });
        if self.cfg.workload.is_tcp() {
            cost = cost.saturating_add(c.coalesce_ps);
        }
        self.driver_done = later(self.now, cost);
        self.res.driver_busy_ns = self.res.driver_busy_ns.saturating_add(cost / PS_PER_NS);
    }

    fn driver_finish(&mut self) {
        self.driver_done = NEVER;
        let small = self.driver_copy;
        if small {
            self.small_free -= 1;
            self.posted += 1;
            self.res.copied += 1;
        } else {
            self.res.handed_up += 1;
            if self.large_free > 0 {
                self.large_free -= 1;
                self.posted += 1;
            } else {
                self.owed += 1;
                self.res.slot_waits += 1;
            }
        }
        self.poll_frames += 1;
        if self.cfg.workload.is_tcp() {
            // Held by the coalescer (in its small buffer when copied) until the segment is full
            // or the poll ends.
            self.held += 1;
            self.held_small += u32::from(small);
            if self.held >= self.seg_frames {
                self.deliver_held();
            }
        } else {
            self.deliver(Unit {
                frames: 1,
                small: u16::from(small),
            });
        }
    }

    fn deliver_held(&mut self) {
        if self.held > 0 {
            let (frames, small) = (self.held as u16, self.held_small as u16);
            self.held = 0;
            self.held_small = 0;
            self.deliver(Unit { frames, small });
        }
    }

    fn deliver(&mut self, unit: Unit) {
        let limit = match self.cfg.workload {
            Workload::Udp { .. } => self.cfg.socket_queue as usize,
            Workload::Tcp { .. } => MAX_SOCKET_QUEUE,
        };
        if self.socket.len >= limit || !self.socket.push(unit) {
            // UDP socket full: dropped, the buffer freed at once.
            self.res.socket_drops += u64::from(unit.frames);
            self.free(unit);
            return;
        }
        self.socket_small += u32::from(unit.small);
        self.socket_large += unit.large();
    }

    fn app_finish(&mut self) {
        self.app_done = NEVER;
        let unit = self.app_unit;
        self.res.delivered += u64::from(unit.frames);
        self.res.units += 1;
        self.free(unit);
        if self.cfg.workload.is_tcp() {
            // The window opened.
            self.unblock();
        }
    }

    /// Buffers coming back: small to their pool, large to an empty RQ slot first.
    fn free(&mut self, unit: Unit) {
        self.small_free += u32::from(unit.small);
        let n = unit.large();
        let to_rq = n.min(self.owed);
        self.owed -= to_rq;
        self.posted += to_rq;
        self.large_free += n - to_rq;
    }
}

/// Runs the model once.
///
/// # Errors
/// [`SimError`] for parameters out of range.
pub fn run(cfg: &SimConfig) -> Result<SimResult, SimError> {
    Ok(Simulation::new(cfg)?.run())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(mut c: SimConfig) -> SimConfig {
        c.duration_ns = 10_000_000;
        c
    }

    #[test]
    fn deterministic() {
        let c = short(SimConfig::seed_udp(Costs::SEED_ERA));
        assert_eq!(run(&c).unwrap(), run(&c).unwrap());
    }

    #[test]
    fn a_fast_receiver_never_naks() {
        let costs = Costs {
            copy_ps: 50_000,
            handup_ps: 60_000,
            coalesce_ps: 0,
            fixed_ps: 0,
        };
        let mut c = short(SimConfig::seed_udp(costs));
        c.offered_rate = 100_000; // below the application's 333k/s
        for cb in [Some(256), None] {
            c.copybreak = cb;
            let r = run(&c).unwrap();
            assert_eq!(
                (r.rnr_naks, r.resets, r.lost(), r.socket_drops),
                (0, 0, 0, 0)
            );
            // Everything offered arrives, but for the last few microseconds' worth in flight.
            assert!(r.offered - r.delivered < 10, "{r:?}");
        }
    }

    #[test]
    fn rnr_retries_delay_or_avoid_the_reset() {
        let mut c = short(SimConfig::seed_udp(Costs::SEED_ERA));
        c.copybreak = None;
        let linux = run(&c).unwrap();
        // Linux: no retries, the first NAK resets.
        assert!(linux.resets > 0);
        assert_eq!(linux.rnr_naks, linux.resets);
        // One retry 1 us later: a reset after the second NAK in a row, when the receiver has
        // not posted a buffer by then.
        c.rnr_retry = 1;
        c.rnr_timer_ns = 1_000;
        let quick = run(&c).unwrap();
        assert!(
            quick.resets > 0 && quick.rnr_naks >= 2 * quick.resets,
            "{quick:?}"
        );
        assert!(quick.rnr_naks > quick.resets, "retried: {quick:?}");
        // Three retries 10 us apart: the receiver frees a buffer in time, the NAKs only slow
        // the sender down.
        c.rnr_retry = 3;
        c.rnr_timer_ns = 10_000;
        let patient = run(&c).unwrap();
        assert!(patient.rnr_naks > 0, "{patient:?}");
        assert_eq!((patient.resets, patient.lost()), (0, 0), "{patient:?}");
    }

    #[test]
    fn buffers_are_accounted_for_at_every_step() {
        for (mut c, cb) in [
            (SimConfig::seed_udp(Costs::SEED_ERA), None),
            (SimConfig::seed_udp(Costs::SEED_ERA), Some(256)),
            (SimConfig::bulk_tcp(Costs::SEED_ERA), Some(256)),
        ] {
            c.duration_ns = 2_000_000;
            c.copybreak = cb;
            c.large_pool = 300;
            let mut steps = 0;
            watch(&c, |s| {
                assert!(s.is_consistent(), "step {steps}: {:?}", s.accounting());
                steps += 1;
            });
            assert!(steps > 1000);
        }
    }

    #[test]
    fn small_tcp_frames_copied_by_copybreak_are_accounted_for() {
        // 100-byte segments: 156-byte frames, below the copybreak threshold.
        let mut c = SimConfig::bulk_tcp(Costs::SEED_ERA);
        c.duration_ns = 2_000_000;
        c.workload = Workload::Tcp {
            mss: 100,
            window: 512,
            coalesce: true,
        };
        let mut steps = 0;
        let r = watch(&c, |s| {
            assert!(s.is_consistent(), "step {steps}: {:?}", s.accounting());
            steps += 1;
        })
        .res;
        assert!(r.copied > 0 && r.delivered > 0, "{r:?}");
    }

    #[test]
    fn every_parameter_bound_is_exact() {
        // What the error names; an edit to the last value accepted; one to the first refused.
        type Edit = fn(&mut SimConfig);
        fn tcp(c: &mut SimConfig, mss: u32, window: u32) {
            c.workload = Workload::Tcp {
                mss,
                window,
                coalesce: true,
            };
        }
        let cases: [(&str, Edit, Edit); 16] = [
            (
                "offered_rate",
                |c| c.offered_rate = 1,
                |c| c.offered_rate = 0,
            ),
            ("down_rate", |c| c.down_rate = 1, |c| c.down_rate = 0),
            ("link_gbps", |c| c.link_gbps = 1, |c| c.link_gbps = 0),
            ("send_queue", |c| c.send_queue = 1, |c| c.send_queue = 0),
            (
                "send_queue",
                |c| c.send_queue = MAX_SEND_QUEUE as u32,
                |c| c.send_queue = MAX_SEND_QUEUE as u32 + 1,
            ),
            ("rq_depth", |c| c.rq_depth = 1, |c| c.rq_depth = 0),
            (
                "rq_depth",
                |c| c.rq_depth = c.large_pool,
                |c| c.rq_depth = c.large_pool + 1,
            ),
            (
                "socket_queue",
                |c| c.socket_queue = 1,
                |c| c.socket_queue = 0,
            ),
            (
                "socket_queue",
                |c| c.socket_queue = MAX_SOCKET_QUEUE as u32,
                |c| c.socket_queue = MAX_SOCKET_QUEUE as u32 + 1,
            ),
            ("mss", |c| tcp(c, 1, 512), |c| tcp(c, 0, 512)),
            ("window", |c| tcp(c, 1992, 1), |c| tcp(c, 1992, 0)),
            (
                "window",
                |c| tcp(c, 1992, MAX_SOCKET_QUEUE as u32),
                |c| tcp(c, 1992, MAX_SOCKET_QUEUE as u32 + 1),
            ),
            (
                "payload",
                |c| {
                    c.workload = Workload::Udp {
                        payload: u32::MAX - ENCAP - TCP_HEADERS,
                    }
                },
                |c| {
                    c.workload = Workload::Udp {
                        payload: u32::MAX - ENCAP - TCP_HEADERS + 1,
                    }
                },
            ),
            ("poll_budget", |c| c.poll_budget = 1, |c| c.poll_budget = 0),
            ("rnr_retry", |c| c.rnr_retry = 7, |c| c.rnr_retry = 8),
            (
                "duration_ns",
                |c| c.duration_ns = MAX_DURATION_NS,
                |c| c.duration_ns = MAX_DURATION_NS + 1,
            ),
        ];
        for (what, accepted, refused) in cases {
            let mut c = SimConfig::bulk_tcp(Costs::SEED_ERA);
            accepted(&mut c);
            if let Err(e) = Simulation::new(&c) {
                panic!("{what}: the bound itself is refused: {e}");
            }
            let mut c = SimConfig::bulk_tcp(Costs::SEED_ERA);
            refused(&mut c);
            match Simulation::new(&c) {
                Ok(_) => panic!("{what}: past the bound, accepted"),
                Err(e) => assert!(e.0.contains(what), "{what}: {e}"),
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
        c.rq_depth = c.large_pool + 1;
        assert!(Simulation::new(&c).is_err());
        let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
        c.rnr_retry = 8;
        assert!(run(&c).is_err());
        let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
        c.send_queue = MAX_SEND_QUEUE as u32 + 1;
        assert!(run(&c).is_err());
        // A frame length that does not fit 32 bits: an error, not an overflow.
        let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
        c.workload = Workload::Udp { payload: u32::MAX };
        assert!(Simulation::new(&c).is_err());
        let mut c = SimConfig::bulk_tcp(Costs::SEED_ERA);
        c.workload = Workload::Tcp {
            mss: u32::MAX - 20,
            window: 1,
            coalesce: true,
        };
        assert!(Simulation::new(&c).is_err());
    }

    /// Runs `c` to its end, calling `each` after every event; the model at the end, finished
    /// as [`Simulation::run`] finishes it.
    fn watch(c: &SimConfig, mut each: impl FnMut(&Simulation)) -> Simulation {
        let mut s = Simulation::new(c).unwrap();
        while s.step() {
            each(&s);
        }
        s.finish();
        s
    }

    /// The frames of the unit the application is consuming, if it is consuming one.
    fn consuming(s: &Simulation) -> Option<u64> {
        (s.app_done != NEVER).then(|| u64::from(s.app_unit.frames))
    }

    /// The times (picoseconds) at which a counter reached 1, 2, ... `N`.
    struct Times<const N: usize> {
        at: [u64; N],
        seen: u64,
    }

    impl<const N: usize> Times<N> {
        fn new() -> Self {
            Self {
                at: [NEVER; N],
                seen: 0,
            }
        }

        fn note(&mut self, count: u64, now: u64) {
            while self.seen < count {
                if let Some(t) = self.at.get_mut(self.seen as usize) {
                    *t = now;
                }
                self.seen += 1;
            }
        }
    }

    #[test]
    fn one_message_takes_each_delay_in_turn() {
        // One UDP message (the next offer would come after the end): the wire and the
        // latency, interrupt moderation (one completion, far from the budget), the driver's
        // cost, then the application's, per message and per KiB.
        let costs = Costs {
            copy_ps: 1_000_000,
            handup_ps: 2_000_000,
            coalesce_ps: 0,
            fixed_ps: 500_000,
        };
        let mut c = SimConfig::seed_udp(costs);
        c.offered_rate = 1_000;
        c.duration_ns = 500_000;
        c.app_ns_per_kib = 2_048;
        let frame = c.workload.frame_len();
        let wire = u64::from(frame + IB_OVERHEAD) * 8 * 1000 / u64::from(c.link_gbps);
        let received = wire + ps(c.latency_ns);
        let polled = received + ps(c.irq_delay_ns);
        // 2048 ns per KiB of a 128-byte payload: 256 ns.
        let app = ps(c.app_ns + 256);
        // The copybreak threshold is inclusive: a frame of exactly its size is copied.
        for (copybreak, driver) in [
            (None, costs.fixed_ps + costs.handup_ps),
            (Some(frame), costs.fixed_ps + costs.copy_ps),
        ] {
            c.copybreak = copybreak;
            let (mut arrived, mut driven, mut delivered) =
                (Times::<1>::new(), Times::<1>::new(), Times::<1>::new());
            let s = watch(&c, |s| {
                arrived.note(s.res.received, s.now);
                driven.note(s.res.copied + s.res.handed_up, s.now);
                delivered.note(s.res.delivered, s.now);
            });
            let r = s.res;
            let ctx = (copybreak, r);
            assert_eq!((r.offered, r.received, r.delivered, r.units), (1, 1, 1, 1));
            assert_eq!(
                (r.copied, r.handed_up),
                if copybreak.is_some() { (1, 0) } else { (0, 1) },
                "{ctx:?}"
            );
            assert_eq!(arrived.at, [received], "{ctx:?}");
            assert_eq!(driven.at, [polled + driver], "{ctx:?}");
            assert_eq!(delivered.at, [polled + driver + app], "{ctx:?}");
            assert_eq!(r.driver_busy_ns, driver / PS_PER_NS, "{ctx:?}");
            assert_eq!(r.app_busy_ns, app / PS_PER_NS, "{ctx:?}");
            // The message's buffer was off the RQ from its arrival until the driver reposted.
            assert_eq!(r.min_posted, c.rq_depth - 1, "{ctx:?}");
            assert_eq!((r.slot_waits, r.rnr_naks), (0, 0), "{ctx:?}");
        }
        // No spare large buffer: the hand-up leaves its RQ slot empty until the application
        // gives the buffer back.
        c.copybreak = None;
        c.large_pool = c.rq_depth;
        let mut owed = 0;
        let s = watch(&c, |s| owed = owed.max(s.owed));
        assert_eq!((s.res.handed_up, s.res.slot_waits, owed), (1, 1, 1));
        assert_eq!((s.owed, s.posted), (0, c.rq_depth));
        assert_eq!(s.res.min_posted, c.rq_depth - 1);
    }

    #[test]
    fn a_full_budget_ends_moderation_and_a_poll_with_work_left_polls_again() {
        // A message every 2 us, 1.4 us of driver work each, a budget of 4: the fourth
        // completion arrives 6 us after the first, before moderation's 8 us, and starts the
        // poll; the poll ends after 4 frames with completions waiting, and NAPI polls again at
        // once. So the driver is never idle while a completion waits, once polling.
        let costs = Costs {
            copy_ps: 0,
            handup_ps: 1_400_000,
            coalesce_ps: 0,
            fixed_ps: 0,
        };
        let mut c = SimConfig::seed_udp(costs);
        c.copybreak = None;
        c.offered_rate = 500_000;
        c.poll_budget = 4;
        c.duration_ns = 200_000;
        let cost = costs.handup_ps;
        let (mut arrived, mut done) = (Times::<32>::new(), Times::<32>::new());
        let s = watch(&c, |s| {
            arrived.note(s.res.received, s.now);
            done.note(s.res.handed_up, s.now);
        });
        assert!(s.res.handed_up >= 32, "{:?}", s.res);
        let (a, d) = (arrived.at, done.at);
        assert!(a[3] < a[0] + ps(c.irq_delay_ns));
        assert_eq!(d[0], a[3] + cost, "the budget's worth started the poll");
        let mut again = 0;
        for k in 0..31 {
            if a[k + 1] < d[k] {
                assert_eq!(d[k + 1], d[k] + cost, "completion {}: {a:?} {d:?}", k + 1);
                again += usize::from(k % 4 == 3);
            }
        }
        // Some polls ended with completions waiting (else this proved nothing).
        assert!(again > 0, "{a:?} {d:?}");
    }

    #[test]
    fn the_tcp_window_bounds_what_is_unconsumed_and_reopens() {
        // The sender keeps at most `window` segments in flight or unconsumed at the receiver;
        // each one the application consumes lets another go.
        let mut c = SimConfig::bulk_tcp(Costs::SEED_ERA);
        c.workload = Workload::Tcp {
            mss: 1992,
            window: 8,
            coalesce: false,
        };
        c.duration_ns = 5_000_000;
        // Offered and not yet consumed: from the counters, not from the model's own sum of
        // its queues (the unit the application is consuming is consumed).
        let mut most = 0;
        let s = watch(&c, |s| {
            most = most.max(s.res.offered - s.res.delivered - consuming(s).unwrap_or(0));
        });
        assert_eq!((most, s.res.resets), (8, 0), "{:?}", s.res);
        // Seed-era hand-ups (8.6 us) set the pace: hundreds in 5 ms, not one window.
        assert!(s.res.delivered > 400, "{:?}", s.res);
    }

    #[test]
    fn a_full_udp_socket_drops_what_it_cannot_hold() {
        let mut c = short(SimConfig::seed_udp(Costs::SEED_ERA));
        c.socket_queue = 16;
        c.app_ns = 100_000;
        let mut most = 0;
        let s = watch(&c, |s| most = most.max(s.socket.len));
        assert_eq!(most, 16);
        assert!(s.res.socket_drops > 0, "{:?}", s.res);
        assert_eq!(
            s.res.delivered + s.res.socket_drops + s.socket.len as u64,
            s.res.copied + s.res.handed_up - u64::from(consuming(&s).is_some()),
            "every message the driver handled is delivered, dropped or queued: {:?}",
            s.res
        );
    }

    #[test]
    fn rnr_retry_7_retries_for_ever_and_6_resets_after_the_seventh_nak() {
        // Four large buffers, all posted, and an application that takes 1 ms per message:
        // the RQ runs dry for about a millisecond at a time, long runs of NAKs 10 us apart.
        let mut c = SimConfig::seed_udp(Costs::SEED_ERA);
        c.copybreak = None;
        c.rq_depth = 4;
        c.large_pool = 4;
        c.app_ns = 1_000_000;
        c.duration_ns = 20_000_000;
        for (retry, resets) in [(7, false), (6, true)] {
            c.rnr_retry = retry;
            let mut longest = 0;
            let s = watch(&c, |s| longest = longest.max(s.retries));
            let r = s.res;
            assert!(r.rnr_naks > 100, "{r:?}");
            assert_eq!(r.resets > 0, resets, "rnr_retry {retry}: {r:?}");
            if resets {
                assert_eq!(longest, 6, "the seventh NAK in a row resets: {r:?}");
            } else {
                assert!(longest > 7, "{longest} NAKs in a row: {r:?}");
            }
        }
    }

    #[test]
    fn a_reset_loses_the_send_queue_and_what_is_sent_while_down() {
        // Linux's policy (no retries), no copybreak: the RQ runs dry and the first NAK resets.
        let mut c = short(SimConfig::seed_udp(Costs::SEED_ERA));
        c.copybreak = None;
        let r = run(&c).unwrap();
        assert!(r.resets > 0, "{r:?}");
        // The NAKed message is in the send queue that the reset flushes.
        assert!(r.lost_in_resets >= r.resets, "{r:?}");
        // Down for the NAK's way back and 500 us of reconnection, "sending" 720,000 a
        // second: about 360 messages per reset dropped (the last reset's down time may be
        // cut short by the end of the run).
        let per_reset = r.lost_while_down as f64 / r.resets as f64;
        assert!((300.0..=365.0).contains(&per_reset), "{per_reset}: {r:?}");
    }

    #[test]
    fn a_tcp_sender_waits_out_its_timeout_after_a_reset() {
        // Bulk TCP that outruns the receiver: the RQ runs dry and the NAK resets. With a
        // retransmission timeout longer than the run, nothing is offered after the reset.
        let mut c = short(SimConfig::bulk_tcp(Costs::SEED_ERA));
        c.copybreak = None;
        c.tcp_rto_ns = c.duration_ns;
        let mut at_reset = None;
        let s = watch(&c, |s| {
            if s.res.resets > 0 && at_reset.is_none() {
                at_reset = Some(s.res.offered);
            }
        });
        assert_eq!(s.res.resets, 1, "{:?}", s.res);
        assert_eq!(Some(s.res.offered), at_reset, "{:?}", s.res);
        // Resumed once the timeout is short enough.
        c.tcp_rto_ns = 1_000_000;
        let r = run(&c).unwrap();
        assert!(r.offered > s.res.offered, "{r:?}");
    }

    #[test]
    fn coalesced_tcp_segments_hold_as_many_frames_as_fit_64_kb() {
        // 1992-byte segments with 52 bytes of headers: 32 frames to a 64 KB datagram.
        let c = short(SimConfig::bulk_tcp(Costs::SEED_ERA));
        let mut most = 0;
        let s = watch(&c, |s| most = most.max(consuming(s).unwrap_or(0)));
        assert_eq!(most, 32, "{:?}", s.res);
        assert!(s.res.units < s.res.delivered / 8, "{:?}", s.res);
    }
}
