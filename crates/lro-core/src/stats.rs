//! Verdicts, reasons and 64-bit counters.
//!
//! Every way a frame can leave the engine has a reason, and every reason has a counter, so a
//! person looking at poor aggregation can see why (`lro explain` prints them per flow).

macro_rules! reason_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// Every variant, in counter order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];
            /// Number of variants (the length of the counter array).
            pub const COUNT: usize = Self::ALL.len();

            /// A short, stable, snake_case name (used in JSON output and reports).
            pub const fn name(self) -> &'static str {
                match self { $($name::$variant => $label),+ }
            }

            /// Index of this reason's counter.
            #[inline]
            pub const fn index(self) -> usize {
                self as usize
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

reason_enum! {
    /// Why a frame was delivered on its own, without being held or merged.
    pub enum PassReason {
        /// Not IPv4 or IPv6 (ARP, LLDP, unknown EtherType, three or more VLAN tags).
        NotIp => "not_ip",
        /// IP, but not TCP (UDP, ICMP, an IPv6 extension header the engine does not walk, an
        /// encapsulation the engine was not built for).
        NotTcp => "not_tcp",
        /// Truncated or inconsistent headers: lengths that do not fit the frame, a TCP data
        /// offset below 5, an IPv6 jumbogram.
        Malformed => "malformed",
        /// IPv4 header with options (IHL > 5). Linux `inet_gro_receive` flushes these.
        IpOptions => "ip_options",
        /// An IP fragment (IPv4 MF or offset, the IPv4 reserved flag, an IPv6 Fragment header).
        Fragment => "fragment",
        /// An IPv6 Routing header with segments left (the frame is on its way through the
        /// route, not at its end) or a Mobile IPv6 Home Address option: the TCP checksum's
        /// pseudo-header holds the route's final destination (RFC 8200 section 8.1) or the
        /// sender's home address (RFC 6275 section 6.3), not the IPv6 header's, so the
        /// checksum could be neither verified nor rewritten from the header. Linux merges
        /// these into a segment whose checksum is left partial (`tcp_gro_complete`); a
        /// segment here carries a full one.
        Routed => "routed",
        /// The IPv4 header checksum is wrong.
        BadIpChecksum => "bad_ip_checksum",
        /// The TCP checksum is wrong (verified in software or from a CHECKSUM_COMPLETE sum).
        BadTcpChecksum => "bad_tcp_checksum",
        /// The checksum of the encapsulation header (a GRE checksum) is wrong.
        BadEncapChecksum => "bad_encap_checksum",
        /// The encapsulation header forbids merging (for GRE: the sequence or routing flag, a
        /// version other than 0; Linux `gre_gro_receive`), or a tunnel inside a tunnel.
        Encap => "encap",
        /// No checksum information and software verification is off: never merged.
        Unverified => "unverified",
        /// The frame is longer than its IP datagram and the padding cannot be trimmed
        /// (its ones'-complement sum is not zero, or the `Gro` policy, which never trims).
        Padding => "padding",
        /// SYN, RST or URG set, or flags without ACK: never merged (RFC 9293 control segments).
        Control => "control",
        /// PSH or FIN on a segment that starts no aggregate: delivered at once, as Linux does.
        PushFin => "push_fin",
        /// A segment without payload under the `Gro` policy (Linux never merges these).
        PureAck => "pure_ack",
        /// A duplicate ACK (no data, same ACK number and window as the flow's held state):
        /// never merged, it signals loss to the sender (RFC 5681 section 2).
        DupAck => "dup_ack",
        /// TCP options other than the aligned NOP,NOP,Timestamp layout (SACK among them)
        /// under the `Lro` policy.
        Options => "options",
        /// A pure ACK with nothing held whose flow has no recorded ACK state (`Lro`): it could
        /// be a duplicate, and a held ACK may be superseded, so it is delivered alone; the
        /// flow's next ACK can then be held. The state is kept for `M` flows
        /// ([`Engine`](crate::Engine)) and cleared by SYN and RST.
        UnknownAck => "unknown_ack",
        /// Passed through unparsed during a pause of coalescing
        /// ([`Config::adaptive_bypass`](crate::Config::adaptive_bypass)): the last burst
        /// merged (almost) nothing.
        Bypassed => "bypassed",
    }
}

reason_enum! {
    /// Why a held segment was completed and delivered.
    pub enum FlushReason {
        /// [`flush_all`](crate::Coalescer::flush_all): the end of a poll or burst.
        FlushAll => "flush_all",
        /// Idle longer than the configured timeout ([`flush_idle`](crate::Coalescer::flush_idle)).
        Idle => "idle",
        /// Held longer than the configured maximum hold time.
        MaxHold => "max_hold",
        /// The flow table was full and this was the least recently used flow.
        Evicted => "evicted",
        /// Merging the next segment would exceed the size limit (65535-byte IP datagram).
        SizeLimit => "size_limit",
        /// The segment holds as many frames as the table allows per flow.
        FrameLimit => "frame_limit",
        /// PSH or FIN was merged: the segment is complete (Linux `tcp_gro_receive`).
        PushFin => "push_fin",
        /// A segment shorter than the flow's MSS was merged: the segment is complete.
        ShortSegment => "short_segment",
        /// The next segment did not start at the expected sequence number.
        SeqGap => "seq_gap",
        /// The ACK number differs (`Gro`) or went backwards (`Lro`).
        Ack => "ack",
        /// The TCP flags word differs beyond PSH/FIN (CWR, ECE, data offset, reserved bits).
        Flags => "flags",
        /// The TCP window differs (`Gro`; `Lro` takes the newest window).
        Window => "window",
        /// The TCP options differ (`Gro`), or a timestamp went backwards (`Lro`).
        Options => "options",
        /// TTL/hop limit, TOS/traffic class (ECN included) or DF differ, or the IPv6 extension
        /// headers, in the inner or the outer (tunnel) IP header.
        IpFields => "ip_fields",
        /// The IPv4 ID is neither incrementing nor fixed (`Gro`, Linux `inet_gro_flush`), in the
        /// inner or the outer header.
        IpId => "ip_id",
        /// The encapsulation says the two frames' tunnel headers may not merge
        /// ([`Encap::may_merge`](crate::encap::Encap::may_merge)).
        Encap => "encap",
        /// A segment longer than the flow's MSS (`Gro`).
        Mss => "mss",
        /// A frame of this flow that is delivered unmerged (pure ACK in `Gro`, duplicate ACK,
        /// control flags, bad checksum, options...) arrived: the held segment goes first so the
        /// flow's order is kept.
        Unmergeable => "unmergeable",
        /// A TCP frame whose ports could not be read (a fragment, a truncated header) arrived
        /// for this address pair: held segments of that pair go first.
        Unknown => "unknown_flow",
        /// Coalescing paused ([`Config::adaptive_bypass`](crate::Config::adaptive_bypass))
        /// while segments were held across polls: they go before the frames passed through.
        Bypass => "bypass",
    }
}

/// What happened to a frame handed to [`Coalescer::push`](crate::Coalescer::push).
///
/// Segments the push completed (the frame's own, or others it flushed) have been delivered to
/// the sink before `push` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// The frame started a new held segment.
    Held,
    /// The frame's payload was appended to a held segment, which stays held.
    Merged,
    /// The frame's payload was appended to a held segment, and that completed the segment: it
    /// was delivered at once, for this reason ([`FlushReason::PushFin`],
    /// [`FlushReason::ShortSegment`]).
    MergedAndFlushed(FlushReason),
    /// A pure ACK superseded by the held segment's newer ACK (`Lro` only): its ACK number,
    /// window and timestamps were taken over and the frame itself was handed back to the sink
    /// through [`Sink::release`](crate::Sink::release).
    Absorbed,
    /// The frame was delivered on its own at once.
    Passed(PassReason),
    /// A batching wrapper (such as [`RssSorted`](crate::rss::RssSorted)) queued the frame; the
    /// inner engine sees it when the batch is flushed.
    Queued,
}

impl Verdict {
    /// True when the frame went into a segment with others (merged or absorbed).
    pub const fn is_merged(self) -> bool {
        matches!(
            self,
            Verdict::Merged | Verdict::MergedAndFlushed(_) | Verdict::Absorbed
        )
    }
}

/// Counters of the frames that arrived in a tunnel (outer IP + an encapsulation such as GRE).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct TunnelStats {
    /// Tunnelled TCP frames pushed (also counted in [`Stats::frames_in`]).
    pub frames_in: u64,
    /// Tunnelled frames whose payload went into a segment headed by another frame.
    pub frames_merged: u64,
    /// Tunnelled pure ACKs absorbed.
    pub acks_merged: u64,
    /// Tunnelled frames delivered on their own, by reason (also counted in [`Stats::passed`]).
    pub passed: [u64; PassReason::COUNT],
}

impl TunnelStats {
    /// All counters zero.
    pub const fn new() -> Self {
        Self {
            frames_in: 0,
            frames_merged: 0,
            acks_merged: 0,
            passed: [0; PassReason::COUNT],
        }
    }

    fn add(&mut self, other: &TunnelStats) {
        self.frames_in += other.frames_in;
        self.frames_merged += other.frames_merged;
        self.acks_merged += other.acks_merged;
        for (a, b) in self.passed.iter_mut().zip(other.passed.iter()) {
            *a += b;
        }
    }
}

impl Default for TunnelStats {
    fn default() -> Self {
        Self::new()
    }
}

/// 64-bit counters, FreeBSD style (`counter_u64`): they never wrap in practice.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Stats {
    /// Frames pushed.
    pub frames_in: u64,
    /// Frames handed to the sink inside segments (a segment of ten frames counts ten).
    pub frames_out: u64,
    /// Segments handed to the sink ([`Sink::segment`](crate::Sink::segment) calls): what the
    /// stack above processes. `frames_in / segments` is the aggregation ratio.
    pub segments: u64,
    /// Segments delivered that hold more than one frame (coalesced segments).
    pub coalesced: u64,
    /// Frames pushed that carry TCP payload (what Linux GRO statistics count).
    pub data_in: u64,
    /// Segments delivered that carry TCP payload: `data_in / data_out` is the aggregation ratio
    /// of data, the figure comparable with Linux GRO's.
    pub data_out: u64,
    /// Frames whose payload went into a segment headed by another frame.
    pub frames_merged: u64,
    /// Pure ACKs absorbed (superseded by a newer ACK of their flow).
    pub acks_merged: u64,
    /// Frames absorbed into a segment without being delivered, and handed back through
    /// [`Sink::release`](crate::Sink::release) to be recycled (the pure ACKs of `acks_merged`).
    pub absorbed: u64,
    /// Frames whose Ethernet padding was trimmed (checksum-neutral padding).
    pub trimmed: u64,
    /// Flows evicted because the table was full (also counted in `flushes`).
    pub evictions: u64,
    /// Flows forgotten to make room: the table had no free entry, so a flow's entry (with
    /// its state and header prediction's template) went to another flow. The flow's next
    /// frame takes the parser and the flow lookup again. Those that were holding a segment
    /// are counted in `evictions` too. Many of them, against `frames_in`, mean the table has
    /// fewer entries than the traffic has active flows (each direction of a connection is
    /// one): a larger one ([`Sizes`](crate::Sizes)) keeps them.
    pub forgotten: u64,
    /// Frames header prediction took ([`Config::header_prediction`](crate::Config)), without
    /// the parser and the flow lookup: appended, absorbed, starting their flow's next segment,
    /// or passed alone (a pure ACK under `Gro`; a SACK pure ACK read as a variant of its
    /// flow's template, under either policy).
    pub predicted: u64,
    /// Bursts (the frames between two `flush_all` or `flush_idle` calls) run without header
    /// prediction: it pauses after a burst in which it took fewer than one frame in eight, for
    /// 1 to 16 bursts (see [`Config::header_prediction`](crate::Config)).
    pub prediction_paused: u64,
    /// Bursts whose frames passed through without coalescing
    /// ([`Config::adaptive_bypass`](crate::Config::adaptive_bypass)): it pauses after a burst
    /// in which fewer than one frame in 32 merged, for 1 to 16 bursts.
    pub bypassed_bursts: u64,
    /// Frames delivered on their own, by reason.
    pub passed: [u64; PassReason::COUNT],
    /// Held segments completed, by reason.
    pub flushes: [u64; FlushReason::COUNT],
    /// The part of these counters about tunnelled frames.
    pub tunnel: TunnelStats,
}

impl Default for Stats {
    fn default() -> Self {
        Self::new()
    }
}

impl Stats {
    /// All counters zero.
    pub const fn new() -> Self {
        Self {
            frames_in: 0,
            frames_out: 0,
            segments: 0,
            coalesced: 0,
            data_in: 0,
            data_out: 0,
            frames_merged: 0,
            acks_merged: 0,
            absorbed: 0,
            trimmed: 0,
            evictions: 0,
            forgotten: 0,
            predicted: 0,
            prediction_paused: 0,
            bypassed_bursts: 0,
            passed: [0; PassReason::COUNT],
            flushes: [0; FlushReason::COUNT],
            tunnel: TunnelStats::new(),
        }
    }

    /// The counter of one pass-through reason.
    pub fn passed(&self, reason: PassReason) -> u64 {
        self.passed[reason.index()]
    }

    /// The counter of one flush reason.
    pub fn flushed(&self, reason: FlushReason) -> u64 {
        self.flushes[reason.index()]
    }

    /// Conservation: once nothing is held, every frame pushed came back exactly once, inside
    /// a segment, alone, or absorbed and released.
    pub fn is_conserved(&self) -> bool {
        self.frames_in == self.frames_out + self.absorbed
    }

    /// Adds another set of counters to this one (e.g. to sum per-queue engines).
    pub fn add(&mut self, other: &Stats) {
        self.frames_in += other.frames_in;
        self.frames_out += other.frames_out;
        self.segments += other.segments;
        self.coalesced += other.coalesced;
        self.data_in += other.data_in;
        self.data_out += other.data_out;
        self.frames_merged += other.frames_merged;
        self.acks_merged += other.acks_merged;
        self.absorbed += other.absorbed;
        self.trimmed += other.trimmed;
        self.evictions += other.evictions;
        self.forgotten += other.forgotten;
        self.predicted += other.predicted;
        self.prediction_paused += other.prediction_paused;
        self.bypassed_bursts += other.bypassed_bursts;
        for (a, b) in self.passed.iter_mut().zip(other.passed.iter()) {
            *a += b;
        }
        for (a, b) in self.flushes.iter_mut().zip(other.flushes.iter()) {
            *a += b;
        }
        self.tunnel.add(&other.tunnel);
    }
}
