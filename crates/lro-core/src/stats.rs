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

        impl Reason for $name {
            fn name(self) -> &'static str {
                $name::name(self)
            }
        }

        impl core::fmt::Display for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

/// A reason type's name for each variant, for [`Stats::counters`] (not public: the reasons'
/// own `name` is).
trait Reason: Copy {
    fn name(self) -> &'static str;
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
        /// flow's next ACK can then be held. The state is kept in
        /// [`Capacity::ACKS`](crate::Capacity::ACKS) records (256 with the default
        /// [`Sizes`](crate::Sizes)), direct-mapped by flow hash, and cleared by SYN and RST.
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
        /// control flags, bad checksum, options...) arrived, or a frame of its inner connection
        /// through a tunnel header that never merges (GRE with a sequence number): the held
        /// segment goes first so the flow's order is kept.
        Unmergeable => "unmergeable",
        /// A TCP frame whose ports could not be read (a fragment, a truncated header) arrived
        /// for this address pair, or a tunnelled frame whose inner flow could not be read for
        /// this tunnel's outer pair: held segments of that pair go first.
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
        // Without `..`: a counter added to the struct and not here does not compile.
        let TunnelStats {
            frames_in,
            frames_merged,
            acks_merged,
            passed,
        } = other;
        self.frames_in += frames_in;
        self.frames_merged += frames_merged;
        self.acks_merged += acks_merged;
        add_each(&mut self.passed, passed);
    }

    /// Every counter, named (see [`Stats::counters`]): the totals, then `passed.*`.
    fn counters(&self) -> impl Iterator<Item = Counter> + '_ {
        // Without `..`: a counter added to the struct and not here does not compile.
        let TunnelStats {
            frames_in,
            frames_merged,
            acks_merged,
            passed,
        } = self;
        let totals = [
            ("frames_in", *frames_in),
            ("frames_merged", *frames_merged),
            ("acks_merged", *acks_merged),
        ];
        totals
            .into_iter()
            .map(|(name, value)| Counter {
                group: Group::Tunnel,
                name,
                value,
            })
            .chain(by_reason(Group::TunnelPassed, PassReason::ALL, passed))
    }
}

impl Default for TunnelStats {
    fn default() -> Self {
        Self::new()
    }
}

/// 64-bit counters, FreeBSD style (`counter_u64`): they never wrap in practice.
///
/// [`Stats::counters`] yields every one with its name, for reports that must not miss one.
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
    /// Frames header prediction took ([`Config::header_prediction`](crate::Config::header_prediction)), without
    /// the parser and the flow lookup: appended, absorbed, starting their flow's next segment,
    /// or passed alone (a pure ACK under `Gro`; a SACK pure ACK read as a variant of its
    /// flow's template, under either policy).
    pub predicted: u64,
    /// Bursts (the frames between two `flush_all` or `flush_idle` calls) run without header
    /// prediction: it pauses after a burst in which it took fewer than one frame in eight, for
    /// 1 to 16 bursts (see [`Config::header_prediction`](crate::Config::header_prediction)).
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
        for (a, (_, b)) in self.totals_mut().into_iter().zip(other.totals()) {
            *a += b;
        }
        add_each(&mut self.passed, &other.passed);
        add_each(&mut self.flushes, &other.flushes);
        self.tunnel.add(&other.tunnel);
    }

    /// Every counter, each with its name: the totals (named as their fields), then
    /// `passed.*` and `flushes.*` (named by [`PassReason::name`] and [`FlushReason::name`]),
    /// then the tunnel's, under `tunnel.` ([`TunnelStats`]). The names are unique, and the
    /// order is the same for every `Stats` of this version of the crate.
    ///
    /// For reports and logs that must not miss a counter, such as a line printed over a
    /// serial port: no allocation, and a counter added to `Stats` in a later version comes
    /// with it.
    ///
    /// ```
    /// use core::fmt::Write;
    /// use lro_core::{PassReason, Stats};
    ///
    /// let mut stats = Stats::new();
    /// stats.frames_in = 3;
    /// stats.passed[PassReason::NotIp.index()] = 1;
    ///
    /// let mut line = String::new();
    /// for c in stats.counters().filter(|c| c.value != 0) {
    ///     write!(line, " {c}").unwrap();
    /// }
    /// assert_eq!(line, " frames_in=3 passed.not_ip=1");
    ///
    /// let names: Vec<String> = stats.counters().map(|c| c.key().to_string()).collect();
    /// assert_eq!(names[0], "frames_in");
    /// assert!(names.contains(&"flushes.seq_gap".to_string()));
    /// assert!(names.contains(&"tunnel.passed.encap".to_string()));
    /// ```
    pub fn counters(&self) -> impl Iterator<Item = Counter> + '_ {
        self.totals()
            .into_iter()
            .map(|(name, value)| Counter {
                group: Group::Totals,
                name,
                value,
            })
            .chain(by_reason(Group::Passed, PassReason::ALL, &self.passed))
            .chain(by_reason(Group::Flushes, FlushReason::ALL, &self.flushes))
            .chain(self.tunnel.counters())
    }
}

/// The totals of [`Stats`] (its fields but the by-reason arrays and the tunnel's part), listed
/// once for [`Stats::add`] and [`Stats::counters`]: `Stats::totals` (each with the field's
/// name) and `Stats::totals_mut`. Both destructure `Stats` without `..`, so a field added to the
/// struct and not to this list does not compile.
macro_rules! totals {
    ($($field:ident),+ $(,)?) => {
        impl Stats {
            const TOTALS: usize = [$(stringify!($field)),+].len();

            fn totals(&self) -> [(&'static str, u64); Self::TOTALS] {
                let Stats { $($field,)+ passed: _, flushes: _, tunnel: _ } = self;
                [$((stringify!($field), *$field)),+]
            }

            fn totals_mut(&mut self) -> [&mut u64; Self::TOTALS] {
                let Stats { $($field,)+ passed: _, flushes: _, tunnel: _ } = self;
                [$($field),+]
            }
        }
    };
}

totals!(
    frames_in,
    frames_out,
    segments,
    coalesced,
    data_in,
    data_out,
    frames_merged,
    acks_merged,
    absorbed,
    trimmed,
    evictions,
    forgotten,
    predicted,
    prediction_paused,
    bypassed_bursts,
);

/// `a[i] += b[i]` for every counter of a by-reason array.
fn add_each<const N: usize>(a: &mut [u64; N], b: &[u64; N]) {
    for (a, b) in a.iter_mut().zip(b) {
        *a += b;
    }
}

/// The counters of a by-reason array, named by their reasons.
fn by_reason<'a, R: Reason>(
    group: Group,
    reasons: &'static [R],
    values: &'a [u64],
) -> impl Iterator<Item = Counter> + 'a {
    reasons.iter().zip(values).map(move |(&r, &value)| Counter {
        group,
        name: r.name(),
        value,
    })
}

/// Where a [`Counter`] sits in [`Stats`]: the prefix of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Group {
    /// The totals: `Stats`' own fields (`frames_in`, `segments`...).
    Totals,
    /// [`Stats::passed`], by [`PassReason`]: `passed.*`.
    Passed,
    /// [`Stats::flushes`], by [`FlushReason`]: `flushes.*`.
    Flushes,
    /// The totals of [`Stats::tunnel`]: `tunnel.*`.
    Tunnel,
    /// [`TunnelStats::passed`], by [`PassReason`]: `tunnel.passed.*`.
    TunnelPassed,
}

impl Group {
    /// The prefix of the names of its counters, with its dot (empty for the totals).
    pub const fn prefix(self) -> &'static str {
        match self {
            Group::Totals => "",
            Group::Passed => "passed.",
            Group::Flushes => "flushes.",
            Group::Tunnel => "tunnel.",
            Group::TunnelPassed => "tunnel.passed.",
        }
    }
}

/// One counter of [`Stats`], as [`Stats::counters`] yields it.
///
/// Displays as `key=value` (`passed.not_ip=3`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Counter {
    /// Where it sits: the prefix of its name.
    pub group: Group,
    /// Its name within the group: a field's name, or a reason's ([`PassReason::name`],
    /// [`FlushReason::name`]).
    pub name: &'static str,
    /// Its value.
    pub value: u64,
}

impl Counter {
    /// Its full name, unique among [`Stats::counters`]: the group's prefix and the name
    /// (`frames_in`, `passed.not_ip`, `tunnel.passed.encap`). Displays without allocating.
    pub const fn key(&self) -> Key {
        Key {
            group: self.group,
            name: self.name,
        }
    }
}

impl core::fmt::Display for Counter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}={}", self.key(), self.value)
    }
}

/// The full name of a [`Counter`] ([`Counter::key`]), displayed as `prefix` + `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    group: Group,
    name: &'static str,
}

impl core::fmt::Display for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.group.prefix())?;
        f.write_str(self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter a distinct value: the field's position, counted from 1.
    fn numbered() -> Stats {
        let mut n = 0u64;
        let mut next = || {
            n += 1;
            n
        };
        let mut s = Stats {
            frames_in: next(),
            frames_out: next(),
            segments: next(),
            coalesced: next(),
            data_in: next(),
            data_out: next(),
            frames_merged: next(),
            acks_merged: next(),
            absorbed: next(),
            trimmed: next(),
            evictions: next(),
            forgotten: next(),
            predicted: next(),
            prediction_paused: next(),
            bypassed_bursts: next(),
            passed: [0; PassReason::COUNT],
            flushes: [0; FlushReason::COUNT],
            tunnel: TunnelStats::new(),
        };
        s.passed.iter_mut().for_each(|c| *c = next());
        s.flushes.iter_mut().for_each(|c| *c = next());
        s.tunnel.frames_in = next();
        s.tunnel.frames_merged = next();
        s.tunnel.acks_merged = next();
        s.tunnel.passed.iter_mut().for_each(|c| *c = next());
        s
    }

    const TOTAL: usize =
        Stats::TOTALS + PassReason::COUNT + FlushReason::COUNT + 3 + PassReason::COUNT;

    #[test]
    fn counters_cover_every_field_once_in_order() {
        let s = numbered();
        let mut seen = 0;
        for (i, c) in s.counters().enumerate() {
            assert_eq!(c.value, i as u64 + 1, "{c} out of place");
            seen += 1;
        }
        assert_eq!(seen, TOTAL);
        let c: heapless::Vec<Counter, TOTAL> = s.counters().collect();
        assert_eq!((c[0].key().name, c[0].group), ("frames_in", Group::Totals));
        assert_eq!(c[14].name, "bypassed_bursts");
        assert_eq!((c[15].group, c[15].name), (Group::Passed, "not_ip"));
        assert_eq!(c[15].value, s.passed(PassReason::NotIp));
        let f = 15 + PassReason::COUNT;
        assert_eq!((c[f].group, c[f].name), (Group::Flushes, "flush_all"));
        assert_eq!(
            (
                c[f + FlushReason::COUNT].group,
                c[f + FlushReason::COUNT].name
            ),
            (Group::Tunnel, "frames_in")
        );
        let last = c[TOTAL - 1];
        assert_eq!((last.group, last.name), (Group::TunnelPassed, "bypassed"));
        assert_eq!(last.value, s.tunnel.passed[PassReason::Bypassed.index()]);
    }

    #[test]
    fn counter_names_are_unique() {
        let s = Stats::new();
        let keys: heapless::Vec<heapless::String<48>, TOTAL> = s
            .counters()
            .map(|c| {
                let mut k = heapless::String::new();
                core::fmt::write(&mut k, format_args!("{}", c.key())).unwrap();
                k
            })
            .collect();
        for (i, a) in keys.iter().enumerate() {
            assert!(!keys[i + 1..].contains(a), "{a} twice");
        }
        assert!(keys.iter().any(|k| k == "tunnel.passed.not_ip"));
        assert!(keys.iter().any(|k| k == "flushes.unknown_flow"));
    }

    #[test]
    fn counter_displays_as_key_equals_value() {
        let s = numbered();
        let mut line = heapless::String::<64>::new();
        let c = s
            .counters()
            .find(|c| c.group == Group::Flushes && c.name == "seq_gap");
        core::fmt::write(&mut line, format_args!("{}", c.unwrap())).unwrap();
        let want = 15 + PassReason::COUNT + FlushReason::SeqGap.index() + 1;
        let mut expected = heapless::String::<64>::new();
        core::fmt::write(&mut expected, format_args!("flushes.seq_gap={want}")).unwrap();
        assert_eq!(line, expected);
    }

    #[test]
    fn merged_verdicts_are_the_ones_that_joined_a_segment() {
        let merged = [
            Verdict::Merged,
            Verdict::MergedAndFlushed(FlushReason::PushFin),
            Verdict::Absorbed,
        ];
        let alone = [
            Verdict::Held,
            Verdict::Passed(PassReason::NotTcp),
            Verdict::Queued,
        ];
        assert!(merged.iter().all(|v| v.is_merged()));
        assert!(alone.iter().all(|v| !v.is_merged()));
    }

    #[test]
    fn conservation_counts_absorbed_frames_as_returned() {
        let mut s = Stats::new();
        assert!(s.is_conserved());
        (s.frames_in, s.frames_out, s.absorbed) = (10, 7, 3);
        assert!(s.is_conserved());
        // A frame missing, or one too many.
        for (out, absorbed) in [(6, 3), (7, 2), (8, 3), (10, 3)] {
            (s.frames_out, s.absorbed) = (out, absorbed);
            assert!(!s.is_conserved(), "{out} out, {absorbed} absorbed");
        }
    }

    #[test]
    fn add_sums_every_counter() {
        let (a, b) = (numbered(), numbered());
        let mut sum = a.clone();
        sum.add(&b);
        for ((s, a), b) in sum.counters().zip(a.counters()).zip(b.counters()) {
            assert_eq!(s.value, a.value + b.value, "{}", s.key());
        }
        assert_eq!(sum.counters().count(), TOTAL);
    }
}
