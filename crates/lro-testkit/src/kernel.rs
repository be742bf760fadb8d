//! The running kernel as a reference (feature `sys`, Linux, root): its GRO and its GSO on
//! veth pairs in a namespace of the caller's own, next to the engine's, for the tests that
//! require the engine's `Gro` output to be Linux's, byte for byte.
//!
//! GRO: `va` to `vb`, GRO on at `vb` (`ethtool -K vb gro on` gives a veth a NAPI context,
//! and `va` must not do TSO for a frame to reach it). An `AF_PACKET` socket sends each frame
//! out of `va`; a second one on `vb` receives what GRO made of them, as every tap sees it. To
//! put a whole batch into one NAPI poll (one "burst"), `vb` defers its interrupt-less NAPI
//! completion (`napi_defer_hard_irqs` 1, `gro_flush_timeout` 10 ms): a first frame of a
//! protocol without GRO starts a poll and arms the timer, and the batch, sent within
//! microseconds, waits in the veth ring for the timer's poll, which takes all of it (at most
//! 64 frames: the poll's budget). GRO then flushes what it holds a timer later.
//!
//! GSO: `vc` to `vd`, where `vc` can neither segment nor checksum, so the kernel does both in
//! software on the way out (`tcp_gso_segment`), and `vd` has no GRO. A third socket sends
//! each segment out of `vc` with a `virtio_net_hdr` (`PACKET_VNET_HDR`).
//!
//! What is compared ([`by_flow`]): per flow, the multiset of frames that came out (the
//! kernel flushes its flows in an order of its own).

use crate::built::{Built, Pushed, Step};
use crate::capture;
use crate::check;
use crate::frame::Out;
use crate::oracle::{self, Identity};
use crate::scenario::{FlowSeed, Knobs, Scenario, Step as ScenarioStep};
use crate::sys::{self, Cleanup, Gso, PacketSocket};
use lro_core::encap::Encap;
use lro_core::testing::TCP_CWR;
use lro_core::{Config, Engine, OutChecksum, RxChecksum, RxMeta, SegmentInfo, Sizes};
use proptest::strategy::Strategy;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Ethertype of the frame that starts each batch's poll: an IEEE local experimental one, for
/// which Linux has no GRO handler (delivered at once, and left out of the comparison).
pub const KICK: [u8; 2] = [0x88, 0xb5];

/// The most frames a batch has: a NAPI poll takes 64, and the kick is one of them.
pub const BATCH: usize = 63;

/// The kernel's side: the namespace, its two veth pairs (`va` to `vb` through GRO, `vc` to
/// `vd` through GSO), their sockets, and the cleanup of it all (when this drops).
#[derive(Debug)]
pub struct Kernel {
    tx: PacketSocket,
    rx: PacketSocket,
    gso_tx: PacketSocket,
    gso_rx: PacketSocket,
    _cleanup: Cleanup,
}

impl Kernel {
    /// The namespace (named after `tag`) and its two veth pairs, or why they cannot be made
    /// here.
    /// Moves the calling thread into the namespace.
    pub fn new(tag: &str) -> Result<Self, String> {
        if let Some(why) = sys::not_root("namespaces, veth, AF_PACKET") {
            return Err(why);
        }
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let mut version = release
            .trim()
            .split(['.', '-'])
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let (major, minor) = (version.next().unwrap_or(0), version.next().unwrap_or(0));
        if (major, minor) < (6, 18) {
            return Err(format!(
                "Linux {} predates the GRO rules the engine follows (6.18: the IPv6 hop limit, \
                 the IPv4 ID rules, the flag word with CWR)",
                release.trim()
            ));
        }
        for tool in ["ip", "ethtool"] {
            if let Some(why) = sys::tool_missing(tool, "-V", "(apt-get install iproute2 ethtool)") {
                return Err(why);
            }
        }
        let ns = format!("lro-kgro-{}-{tag}", std::process::id());
        let cleanup = Cleanup::netns(&ns);
        let inside = |cmd: &str| sys::run(&["ip", "netns", "exec", &ns, "sh", "-c", cmd]);
        sys::run(&["ip", "netns", "add", &ns])?;
        // No IPv6 link-local traffic of the test's own devices among the frames received.
        inside("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")?;
        inside("sysctl -qw net.ipv6.conf.default.disable_ipv6=1")?;
        // Jumbo MTU: the generator's frames reach 1,600 bytes (IPv6 with extension headers, TCP
        // options and segments longer than the MSS).
        inside("ip link add va mtu 9000 type veth peer name vb mtu 9000")?;
        inside("ip link set va up && ip link set vb up")?;
        // A veth hands a frame to its peer's NAPI (and so to GRO) only when the sending end
        // cannot do TSO (`veth_skb_is_eligible_for_gro`).
        inside("ethtool -K vb gro on && ethtool -K va tso off gso off")
            .map_err(|e| format!("this kernel's veth cannot do GRO: {e}"))?;
        // The second pair: `vc` can neither segment nor checksum (the kernel does both in
        // software, as GSO), `vd` has no GRO (the segments come up as they were cut).
        inside("ip link add vc mtu 9000 type veth peer name vd mtu 9000")?;
        inside("ip link set vc up && ip link set vd up")?;
        inside("ethtool -K vc tx off tso off gso off && ethtool -K vd gro off")?;
        let vb = "/sys/class/net/vb";
        inside(&format!("echo 10000000 > {vb}/gro_flush_timeout"))
            .and_then(|()| inside(&format!("echo 1 > {vb}/napi_defer_hard_irqs")))
            .map_err(|e| format!("no deferred NAPI completion here: {e}"))?;
        sys::enter_netns(&ns).map_err(|e| format!("setns {ns}: {e}"))?;
        let tx = PacketSocket::sender("va").map_err(|e| format!("AF_PACKET on va: {e}"))?;
        let rx = PacketSocket::receiver("vb").map_err(|e| format!("AF_PACKET on vb: {e}"))?;
        let gso_tx = PacketSocket::gso_sender("vc").map_err(|e| format!("AF_PACKET on vc: {e}"))?;
        let gso_rx = PacketSocket::receiver("vd").map_err(|e| format!("AF_PACKET on vd: {e}"))?;
        Ok(Self {
            tx,
            rx,
            gso_tx,
            gso_rx,
            _cleanup: cleanup,
        })
    }

    /// [`Kernel::new`] for a test, or `None` after printing why the test is skipped.
    pub fn or_skip(tag: &str) -> Option<Self> {
        Self::new(tag).map_err(|why| sys::skip(&why)).ok()
    }

    /// What the kernel's GRO makes of `frames` (at most [`BATCH`]), in the order the tap saw:
    /// received until `done` says it is all (a poll's output comes up one to two timer
    /// periods after the batch), or nothing came for 300 ms.
    pub fn gro(
        &self,
        frames: &[Vec<u8>],
        done: impl Fn(&[Vec<u8>]) -> bool,
    ) -> Result<Vec<Vec<u8>>, String> {
        assert!(frames.len() <= BATCH);
        drain(&self.rx)?;
        let mut kick = vec![0u8; 60];
        kick[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xee]);
        kick[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xef]);
        kick[12..14].copy_from_slice(&KICK);
        self.tx.send(&kick).map_err(|e| format!("send: {e}"))?;
        for f in frames {
            self.tx.send(f).map_err(|e| format!("send: {e}"))?;
        }
        receive(&self.rx, done, |f| f.get(12..14) != Some(&KICK[..]))
    }

    /// The frames Linux's GSO cuts `frame` into as `gso` says: received until `n` came, or
    /// nothing came for 300 ms.
    pub fn gso(&self, frame: &[u8], gso: &Gso, n: usize) -> Result<Vec<Vec<u8>>, String> {
        drain(&self.gso_rx)?;
        self.gso_tx
            .send_gso(frame, gso)
            .map_err(|e| format!("send ({} bytes, {gso:?}): {e}", frame.len()))?;
        receive(&self.gso_rx, |got| got.len() >= n, |_| true)
    }

    /// [`Kernel::gro`] of `input` compared with the engine's `ours`: `Err` with an account of
    /// the difference. A batch that came up split (the machine stalled the sender for a timer
    /// period) is sent again, twice at most.
    pub fn agrees(&self, input: &[Vec<u8>], ours: &[Vec<u8>]) -> Result<(), String> {
        self.agrees_but(input, ours, |f| f.to_vec())
    }

    /// [`Kernel::agrees`], both sides' frames seen through `seen` first (a field where the
    /// engine differs from Linux on purpose, blanked).
    pub fn agrees_but(
        &self,
        input: &[Vec<u8>],
        ours: &[Vec<u8>],
        seen: impl Fn(&[u8]) -> Vec<u8>,
    ) -> Result<(), String> {
        let view = |v: &[Vec<u8>]| v.iter().map(|f| seen(f)).collect::<Vec<_>>();
        let ours = view(ours);
        let want = by_flow(&ours);
        let mut linux = Vec::new();
        for _ in 0..3 {
            linux = view(&self.gro(input, |got| by_flow(&view(got)) == want)?);
            if by_flow(&linux) == want {
                return Ok(());
            }
        }
        if let Some(path) = std::env::var_os("LRO_KERNEL_GRO_DUMP") {
            write_pcap(std::path::Path::new(&path), input);
        }
        Err(describe(input, &linux, &ours))
    }
}

/// Takes whatever `socket` has received already (what an earlier batch left: nothing,
/// unless it came up late).
fn drain(socket: &PacketSocket) -> Result<(), String> {
    while socket
        .recv(Duration::ZERO)
        .map_err(|e| format!("recv: {e}"))?
        .is_some()
    {}
    Ok(())
}

/// The frames `socket` receives that `keep` keeps, until `done` says they are all, or
/// nothing came for 300 ms; an error if frames keep coming for 5 s.
fn receive(
    socket: &PacketSocket,
    done: impl Fn(&[Vec<u8>]) -> bool,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(&out) {
        match socket
            .recv(Duration::from_millis(300))
            .map_err(|e| format!("recv: {e}"))?
        {
            Some(f) if keep(&f) => out.push(f),
            Some(_) => {}
            None => break,
        }
        if Instant::now() > deadline {
            return Err("frames kept coming for 5 s".into());
        }
    }
    Ok(out)
}

/// Writes `frames` to `path` as a pcap of Ethernet frames.
pub fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    std::fs::write(path, capture::pcap(1, frames))
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Where Linux's frame `linux` and the frame `other` (named `name`) first differ, as a line
/// of a report, `what` saying which frame it is (`None` when one is a prefix of the other).
fn first_difference(linux: &[u8], other: &[u8], name: &str, what: &str) -> Option<String> {
    let at = (0..linux.len().min(other.len())).find(|&i| linux[i] != other[i])?;
    Some(format!(
        "first difference: {what}byte {at}: linux {:#04x}, {name} {:#04x}\n",
        linux[at], other[at]
    ))
}

/// One frame the engine delivered: its bytes (one contiguous frame), the input frames in it
/// (indices) and what the engine said of it.
#[derive(Debug)]
pub struct Delivered {
    /// The bytes, as one contiguous frame.
    pub bytes: Vec<u8>,
    /// The input frames in it, by index.
    pub ids: Vec<usize>,
    /// What the engine said of it.
    pub info: SegmentInfo,
    /// When it came out: `i + 1` while the input frame `i` was pushed, the input's length plus
    /// one at the flush after the last.
    pub emitted: usize,
}

/// What an engine with the encapsulation `E` delivers for `frames` under `Config::gro()`
/// with partial output checksums, flushed once at the end (after [`check::run`]'s checks).
///
/// The frames go in three times, with each kind of checksum metadata a NIC gives: none
/// (software verification, as the kernel on a veth does), hardware-verified (the frames
/// whose checksums are right) and CHECKSUM_COMPLETE (the frame's full sum). Header prediction
/// and the general path read each differently; what comes out must be the same, frame for
/// frame, or this panics. Returns the first run's.
pub fn engine_gro<E: Encap>(frames: &[Vec<u8>]) -> Vec<Delivered> {
    let config = Config::gro().with_checksum_out(OutChecksum::Partial);
    let built = Built {
        frames: frames
            .iter()
            .map(|b| Pushed::new(b.clone(), RxMeta::ethernet(0)))
            .collect(),
        steps: (0..frames.len())
            .map(Step::Push)
            .chain([Step::FlushAll])
            .collect(),
        truth: None,
    };
    let mut complete = built.clone();
    for f in &mut complete.frames {
        let sum = lro_core::testing::complete_checksum(&f.bytes, f.meta.link);
        *f = Pushed::new(
            f.bytes.clone(),
            f.meta.with_checksum(RxChecksum::Complete(sum)),
        );
    }
    let run = |built: &Built| -> Vec<Delivered> {
        let mut engine: Box<Engine<_, Sizes<64, 64>, E>> = Box::new(Engine::new(config));
        let run = check::run(&mut *engine, built, true);
        run.rec
            .out
            .into_iter()
            .zip(run.steps_done)
            .map(|(o, emitted)| match o {
                Out::Seg {
                    bytes, ids, info, ..
                } => Delivered {
                    bytes,
                    ids,
                    info,
                    emitted,
                },
                Out::Rel(id) => panic!("frame {id} released under Gro"),
            })
            .collect()
    };
    let out = run(&built);
    let same = |other: &[Delivered]| {
        out.len() == other.len()
            && out
                .iter()
                .zip(other)
                .all(|(a, b)| a.bytes == b.bytes && a.ids == b.ids)
    };
    assert!(
        same(&run(&built.all_verified())),
        "hardware-verified frames came out otherwise"
    );
    assert!(
        same(&run(&complete)),
        "frames with CHECKSUM_COMPLETE came out otherwise"
    );
    out
}

/// The most packets Linux's GRO holds in one of its hash buckets (`MAX_GRO_SKBS`). For one
/// more, it completes the bucket's oldest (`gro_flush_oldest`), whatever its flow. On these
/// veths the frames carry no skb hash, so every flow is in one bucket: Linux holds 8 segments
/// at most (tried: of 8 flows interleaved frame by frame, each merges; of 9, none does). A
/// capacity, not a merge rule: the engine holds as many as its table has entries (64 here).
pub const MAX_GRO_SKBS: usize = 8;

/// The most segments the engine held (of what [`engine_gro`] delivered) when a frame came
/// that started a held segment of its own.
pub fn most_held(out: &[Delivered]) -> usize {
    let first = |d: &Delivered| d.ids.first().copied().unwrap_or(usize::MAX);
    out.iter()
        .filter(|d| d.ids.len() > 1 || d.emitted > first(d) + 1)
        .map(|d| {
            let j = first(d);
            out.iter().filter(|h| first(h) < j && h.emitted > j).count()
        })
        .max()
        .unwrap_or(0)
}

/// Whether Linux may have run out of room for what the engine delivered: a segment started
/// while [`MAX_GRO_SKBS`] or more were held ([`most_held`]). Linux then completed its oldest
/// segment, which the engine kept open, so the two can differ without a rule being at stake:
/// the tests leave such a batch out (and count it).
pub fn crowded(out: &[Delivered]) -> bool {
    most_held(out) >= MAX_GRO_SKBS
}

/// The bytes of what the engine delivered.
pub fn frames_of(out: &[Delivered]) -> Vec<Vec<u8>> {
    out.iter().map(|d| d.bytes.clone()).collect()
}

/// Linux's GSO of every segment the engine merged (a forwarding stack would hand it to the
/// kernel so) must give back the frames merged into it, byte for byte (DESIGN.md invariant
/// 8 with Linux's segmentation in place of the engine's own). Left out: segments whose IPv4
/// IDs were all equal and tunnelled ones (a `virtio_net_hdr` can ask for neither
/// `SKB_GSO_TCP_FIXEDID` nor a tunnel's segmentation), and those with CWR (Linux's GSO
/// without AccECN keeps it on the first segment only). Returns how many segments were
/// checked.
pub fn gso_gives_back(
    kernel: &Kernel,
    input: &[Vec<u8>],
    out: &[Delivered],
) -> Result<usize, String> {
    let mut checked = 0;
    for d in out {
        let (l3, l4) = (d.info.l3 as usize, d.info.l4 as usize);
        let cwr = d.bytes.get(l4 + 13).is_some_and(|f| f & TCP_CWR != 0);
        if d.info.gso_segs < 2 || d.info.fixed_id || cwr || d.info.tunnel.is_some() {
            continue;
        }
        let gso = Gso {
            v6: d.bytes[l3] >> 4 == 6,
            l4: l4 as u16,
            header_len: (d.info.len - d.info.payload_len as usize) as u16,
            size: d.info.gso_size,
        };
        let want: Vec<Vec<u8>> = d.ids.iter().map(|&i| input[i].clone()).collect();
        let got = kernel.gso(&d.bytes, &gso, want.len())?;
        if got != want {
            let list = |v: &[Vec<u8>]| v.iter().map(|f| f.len().to_string()).collect::<Vec<_>>();
            let mut s = format!(
                "Linux's GSO of a segment of {} frames ({gso:?}) gave {:?}, not the frames {:?}\n",
                want.len(),
                list(&got),
                list(&want)
            );
            if let Some((a, b)) = got.iter().zip(&want).find(|(a, b)| a != b) {
                s += &first_difference(a, b, "the frame", "").unwrap_or_default();
            }
            return Err(s);
        }
        checked += 1;
    }
    Ok(checked)
}

/// Frames by flow (the reference reader's identity, through GRE too; `None` for what is not
/// TCP), each flow's frames sorted: the multiset compared.
pub fn by_flow(frames: &[Vec<u8>]) -> BTreeMap<Option<String>, Vec<Vec<u8>>> {
    let mut flows: BTreeMap<Option<String>, Vec<Vec<u8>>> = BTreeMap::new();
    for f in frames {
        let id: Option<Identity> = oracle::tcp_of_gre(f, &RxMeta::ethernet(0)).map(|t| t.id);
        flows
            .entry(id.map(|i| format!("{i:?}")))
            .or_default()
            .push(f.clone());
    }
    flows.values_mut().for_each(|v| v.sort());
    flows
}

/// A readable account of a difference: per flow, each side's frames as (length, TCP sequence
/// number) in arrival order.
pub fn describe(input: &[Vec<u8>], kernel: &[Vec<u8>], ours: &[Vec<u8>]) -> String {
    let seq = |f: &Vec<u8>| match oracle::tcp_of_gre(f, &RxMeta::ethernet(0)) {
        Some(t) => format!("{}@{}", f.len(), t.seq),
        None => format!("{}", f.len()),
    };
    let list = |v: &[Vec<u8>]| v.iter().map(seq).collect::<Vec<_>>().join(" ");
    let (k, o) = (by_flow(kernel), by_flow(ours));
    let mut s = format!("input: {}\n", list(input));
    for key in k
        .keys()
        .chain(o.keys())
        .collect::<std::collections::BTreeSet<_>>()
    {
        let (kf, of) = (k.get(key), o.get(key));
        if kf != of {
            let (kf, of) = (kf.map_or(&[][..], |v| v), of.map_or(&[][..], |v| v));
            s += &format!(
                "flow {}:\n  linux: {}\n  lro:   {}\n",
                key.as_deref().unwrap_or("(not TCP)"),
                list(kf),
                list(of)
            );
            // The same frames by length and sequence number: say which bytes differ.
            if let Some((a, b)) = kf.iter().zip(of).find(|(a, b)| a != b) {
                let what = format!("frame {}, ", seq(a));
                s += &first_difference(a, b, "lro", &what)
                    .map_or(String::new(), |l| format!("  {l}"));
            }
        }
    }
    s
}

/// 1 to 6 flow seeds of the scenario generator ([`crate::scenario`]) whose link layer a wire
/// can carry, of the first `links` of: untagged Ethernet, one 802.1Q tag, 802.1ad over 802.1Q.
pub fn wire_seeds(links: u8) -> impl Strategy<Value = Vec<FlowSeed>> {
    let seed = (FlowSeed::strategy(), 0..links.max(1)).prop_map(|(seed, link)| {
        // Bits 1 to 3 of the shape choose the link layer with the others
        // (`built::link_shape`, modulo 6): pick the value that makes it `link`.
        let shape = (0u8..8)
            .map(|k| (seed.shape & !0x0e) | (k << 1))
            .find(|s| (s >> 1) % 6 == link % 3)
            .expect("eight consecutive values cover every remainder modulo 6");
        FlowSeed { shape, ..seed }
    });
    proptest::collection::vec(seed, 1..=6)
}

/// 1 to [`BATCH`] scenario steps with no flush point (the batch is one poll; `t` picks only
/// the clock step).
pub fn poll_steps() -> impl Strategy<Value = Vec<ScenarioStep>> {
    let step = ScenarioStep::strategy().prop_map(|s| ScenarioStep {
        t: 0x30 | (s.t & 0x0f),
        ..s
    });
    proptest::collection::vec(step, 1..=BATCH)
}

/// The kernel tests' runner of generated batches and their number: `LRO_KERNEL_GRO_CASES`
/// batches (`cases` without it), from the seed `LRO_KERNEL_GRO_SEED` (`seed` without it), so
/// the same batches every run; no failure file, at most 200 shrinking steps (each a round
/// through the kernel).
pub fn runner(cases: u32, seed: u64) -> (TestRunner, u32) {
    let cases = setting("LRO_KERNEL_GRO_CASES", u64::from(cases)) as u32;
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..RunnerConfig::default()
    };
    let key = rng_seed(setting("LRO_KERNEL_GRO_SEED", seed));
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &key);
    (TestRunner::new_with_rng(config, rng), cases)
}

/// The frames of a generated scenario (`Gro`, software checksums) with the flow each belongs
/// to, less what the comparisons with Linux leave out: frames Linux does not offer to TCP GRO
/// (a bad checksum, IPv4 options, a fragment: Linux keeps the flow's segment open across them,
/// the engine delivers it first, DESIGN.md invariant 2; the same for an IPv6 frame whose
/// extension headers differ from its flow's, another flow to Linux), a twin that differs only
/// by a tag the NIC stripped (metadata, not on a wire), and, unless `cwr`, CWR (the
/// generator's step kind 91 turns it on or off).
pub fn wire_batch(
    seeds: &[FlowSeed],
    steps: &[ScenarioStep],
    cwr: bool,
) -> Vec<(Option<usize>, Vec<u8>)> {
    let knobs = Knobs {
        gro: true,
        partial: true,
        verify: true,
        max_ip: 0,
        hash_mode: 0,
        timers: false,
        small: false,
        raw_twin: false,
        truncate: false,
        dup_mode: 0,
        verified: false,
    };
    let steps: Vec<ScenarioStep> = steps
        .iter()
        .filter(|s| cwr || s.kind % 100 != 91)
        .copied()
        .collect();
    let sc = Scenario::build(knobs, seeds, &steps);
    // Each flow's IP header length (IPv6 extension headers included), from its first frame.
    let mut ip_len: BTreeMap<usize, usize> = BTreeMap::new();
    sc.inputs()
        .iter()
        .filter(|i| i.meta.vlan_stripped.is_none())
        .filter(|i| !(i.corrupt || i.ip_opts || i.fragment))
        // Linux counts an IPv6 frame whose extension headers differ from its flow's as
        // another flow and keeps the flow's segment open across it; the engine, for which
        // it is the same flow, delivers the segment first (invariant 2).
        .filter(|i| match i.flow {
            Some(f) => *ip_len.entry(f).or_insert(i.l4 - i.l3) == i.l4 - i.l3,
            None => true,
        })
        .map(|i| (i.flow, i.bytes.clone()))
        .collect()
}

/// The Ethernet frames of the committed capture `data/<name>` ([`capture::committed`]),
/// `limit` of them at most unless `LRO_KERNEL_GRO_FULL` is set; then, as `(name, frames)` too,
/// the whole pcap `LRO_KERNEL_GRO_PCAP` names, if any: what the kernel tests compare in polls.
pub fn captures(committed: &[(&str, usize)]) -> Vec<(String, Vec<Vec<u8>>)> {
    let full = std::env::var_os("LRO_KERNEL_GRO_FULL").is_some();
    let ethernet = |name: &str, frames: Vec<(u32, Vec<u8>)>| -> Vec<Vec<u8>> {
        assert!(
            frames.iter().all(|(link, _)| *link == 1),
            "{name}: Ethernet frames"
        );
        frames.into_iter().map(|(_, f)| f).collect()
    };
    let mut out: Vec<(String, Vec<Vec<u8>>)> = committed
        .iter()
        .map(|&(name, limit)| {
            let mut frames = ethernet(name, capture::committed(name));
            frames.truncate(if full { usize::MAX } else { limit });
            (name.to_string(), frames)
        })
        .collect();
    if let Some(path) = std::env::var_os("LRO_KERNEL_GRO_PCAP") {
        let name = path.to_string_lossy().into_owned();
        let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let frames = capture::read(&raw).unwrap_or_else(|| panic!("{name}: not a pcap"));
        let frames = ethernet(&name, frames);
        out.push((name, frames));
    }
    out
}

/// The number in the environment variable `name`, or `default` when it is unset or not a
/// number (the kernel tests' `LRO_KERNEL_GRO_CASES` and `LRO_KERNEL_GRO_SEED`).
fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A 32-byte RNG seed (proptest's ChaCha `TestRng::from_seed`) made from `seed`: the same
/// batches every run for the same number.
fn rng_seed(seed: u64) -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key
}
