//! `Policy::Gro` against the running kernel's GRO: the same frames, through Linux's GRO and
//! through the engine, must come out as the same frames, byte for byte (lengths, IPv4 header
//! checksums, the pseudo-header TCP checksum that Linux leaves for `CHECKSUM_PARTIAL`). And
//! the way back: every segment the engine merged, handed to Linux's GSO as a forwarding stack
//! would hand it (a `virtio_net_hdr` with the segment's `gso_size`), must be cut into exactly
//! the frames that went into it (DESIGN.md invariant 8, with Linux's segmentation).
//!
//! The kernel's side: a veth pair in a namespace of the test's own, GRO on at the receiving
//! end (`ethtool -K vb gro on` gives a veth a NAPI context). An `AF_PACKET` socket sends each
//! generated frame out of `va`; a second one on `vb` receives what GRO made of them, as every
//! tap sees it. To put a whole batch into one NAPI poll (one "burst"), `vb` defers its
//! interrupt-less NAPI completion (`napi_defer_hard_irqs` 1, `gro_flush_timeout` 10 ms): a
//! first frame of a protocol without GRO starts a poll and arms the timer, and the batch,
//! sent within microseconds, waits in the veth ring for the timer's poll, which takes all of
//! it (at most 64 frames: the poll's budget). GRO then flushes what it holds a timer later.
//!
//! The engine's side: the same frames, pushed with no checksum metadata (the kernel verifies
//! in software as well), then `flush_all`, with `Config::gro()` and `OutChecksum::Partial`.
//!
//! GSO: a second veth pair, `vc` to `vd`, where `vc` can neither segment nor checksum, so
//! the kernel does both in software on the way out (`tcp_gso_segment`), and `vd` has no GRO.
//! A third socket sends each merged segment out of `vc` with `PACKET_VNET_HDR`.
//!
//! What is compared: per flow, the multiset of frames that came out. Two differences are
//! deliberate, and the batches leave out the frames that would show them:
//! - Linux passes a frame it does not offer to TCP GRO (a bad checksum, IPv4 options, a
//!   fragment) up at once, ahead of a segment its flow holds, and keeps that segment open, so
//!   a later frame (a pure ACK's successor, a retransmission) can still join it. The engine
//!   delivers the held segment first (DESIGN.md invariant 2: a non-mergeable frame of a flow
//!   is preceded by that flow's held segment). Such frames are left out.
//! - Before its 2026 AccECN change, Linux flushes on every frame with CWR; since, only a
//!   change of CWR flushes, and the engine follows that. A probe finds which rule the running
//!   kernel has; under the old one, frames with CWR are left out.
//!
//! A kernel built without 802.1Q support has no VLAN GRO at all; a second probe finds out,
//! and then only untagged frames are compared.
//!
//! Everything else is Linux's to decide, byte for byte.
//!
//! Two sources of frames:
//! - the property tests' scenario generator (`lro_testkit::scenario`), 48 batches with a fixed
//!   seed: up to 6 flows over Ethernet (untagged, one 802.1Q tag, 802.1ad over 802.1Q),
//!   IPv4 and IPv6 (with extension headers), near-twin identities, and per frame the
//!   generator's mutations (short and long segments, PSH, FIN, SYN, RST, URG, ECE, CWR (see
//!   above), ACK and window changes, sequence gaps and retransmissions, SACK, timestamps,
//!   TOS/TTL and hop-limit changes, IP IDs fixed or jumping, padding, frames that are not IP);
//! - real Linux TCP traffic: the committed captures, in polls of 63 frames.
//!
//! Settings (environment): `LRO_KERNEL_GRO_CASES` (batches, 48), `LRO_KERNEL_GRO_SEED` (the
//! generator's seed, a number), `LRO_KERNEL_GRO_FULL=1` (every frame of the captures),
//! `LRO_KERNEL_GRO_PCAP` (one more Ethernet pcap to compare, whole), `LRO_KERNEL_GRO_DUMP` (a
//! file to write a failing batch to, as a pcap).
//!
//! Needs root, `ip`, `ethtool` and Linux 6.18 or later (the rules the engine follows; older
//! kernels differ, `shared/research/linux-gro-rules.md` says where); skips with the reason
//! otherwise. Deletes its namespace also when it fails.

use lro_core::testing::{FrameSpec, TCP_ACK, TCP_CWR, TPID_8021Q};
use lro_core::{Config, Engine, OutChecksum, RxMeta, SegmentInfo, Sizes};
use lro_testkit::built::{Built, Pushed, Step as Do};
use lro_testkit::check;
use lro_testkit::frame::Out;
use lro_testkit::oracle::{self, Class, Identity};
use lro_testkit::scenario::{FlowSeed, Knobs, Scenario, Step};
use lro_testkit::sys::{self, Cleanup, Gso, PacketSocket};
use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, RngAlgorithm, TestRng, TestRunner};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Ethertype of the frame that starts each batch's poll: an IEEE local experimental one, for
/// which Linux has no GRO handler (delivered at once, and left out of the comparison).
const KICK: [u8; 2] = [0x88, 0xb5];

/// The most frames a batch has: a NAPI poll takes 64, and the kick is one of them.
const BATCH: usize = 63;

/// The kernel's side: the namespace, its two veth pairs (`va` to `vb` through GRO, `vc` to
/// `vd` through GSO), their sockets, and the cleanup of it all.
struct Kernel {
    tx: PacketSocket,
    rx: PacketSocket,
    gso_tx: PacketSocket,
    gso_rx: PacketSocket,
    _cleanup: Cleanup,
}

impl Kernel {
    /// The namespace (named after `tag`) and veth pair, or why they cannot be made here.
    /// Moves the calling thread into the namespace.
    fn new(tag: &str) -> Result<Self, String> {
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

    /// What the kernel's GRO makes of `frames` (at most [`BATCH`]), in the order the tap saw:
    /// received until `done` says it is all (a poll's output comes up one to two timer
    /// periods after the batch), or nothing came for 300 ms.
    fn gro(
        &self,
        frames: &[Vec<u8>],
        done: impl Fn(&[Vec<u8>]) -> bool,
    ) -> Result<Vec<Vec<u8>>, String> {
        assert!(frames.len() <= BATCH);
        // Whatever an earlier batch left (nothing, unless it came up late).
        while self
            .rx
            .recv(Duration::ZERO)
            .map_err(|e| e.to_string())?
            .is_some()
        {}
        let mut kick = vec![0u8; 60];
        kick[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xee]);
        kick[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0xef]);
        kick[12..14].copy_from_slice(&KICK);
        self.tx.send(&kick).map_err(|e| format!("send: {e}"))?;
        for f in frames {
            self.tx.send(f).map_err(|e| format!("send: {e}"))?;
        }
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done(&out) {
            match self
                .rx
                .recv(Duration::from_millis(300))
                .map_err(|e| format!("recv: {e}"))?
            {
                Some(f) if f.get(12..14) == Some(&KICK[..]) => {}
                Some(f) => out.push(f),
                None => break,
            }
            if Instant::now() > deadline {
                return Err("frames kept coming for 5 s".into());
            }
        }
        Ok(out)
    }

    /// The frames Linux's GSO cuts `frame` into as `gso` says: received until `n` came, or
    /// nothing came for 300 ms.
    fn gso(&self, frame: &[u8], gso: &Gso, n: usize) -> Result<Vec<Vec<u8>>, String> {
        while self
            .gso_rx
            .recv(Duration::ZERO)
            .map_err(|e| e.to_string())?
            .is_some()
        {}
        self.gso_tx
            .send_gso(frame, gso)
            .map_err(|e| format!("send ({} bytes, {gso:?}): {e}", frame.len()))?;
        let mut out = Vec::new();
        while out.len() < n {
            match self
                .gso_rx
                .recv(Duration::from_millis(300))
                .map_err(|e| format!("recv: {e}"))?
            {
                Some(f) => out.push(f),
                None => break,
            }
        }
        Ok(out)
    }

    /// [`Kernel::gro`] of `input` compared with the engine's `ours`: `Err` with an account of
    /// the difference. A batch that came up split (the machine stalled the sender for a timer
    /// period) is sent again, twice at most.
    fn agrees(&self, input: &[Vec<u8>], ours: &[Vec<u8>]) -> Result<(), String> {
        let want = by_flow(ours);
        let mut linux = Vec::new();
        for _ in 0..3 {
            linux = self.gro(input, |got| by_flow(got) == want)?;
            if by_flow(&linux) == want {
                return Ok(());
            }
        }
        if let Some(path) = std::env::var_os("LRO_KERNEL_GRO_DUMP") {
            write_pcap(std::path::Path::new(&path), input);
        }
        Err(describe(input, &linux, ours))
    }
}

/// Writes `frames` to `path` as a pcap of Ethernet frames.
fn write_pcap(path: &std::path::Path, frames: &[Vec<u8>]) {
    // Magic, version 2.4, zone, accuracy, snap length 262144, link type 1 (Ethernet).
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&262_144u32.to_le_bytes());
    pcap.extend_from_slice(&1u32.to_le_bytes());
    for f in frames {
        let len = (f.len() as u32).to_le_bytes();
        pcap.extend_from_slice(&[0; 8]);
        pcap.extend_from_slice(&len);
        pcap.extend_from_slice(&len);
        pcap.extend_from_slice(f);
    }
    std::fs::write(path, pcap).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Two consecutive data frames of one flow, each with `flags`, through `vlan` (an 802.1Q tag)
/// or untagged.
fn pair(flags: u8, vlan: Option<u16>) -> Vec<Vec<u8>> {
    let payload = [0x5a; 100];
    (0..2u32)
        .map(|i| {
            let mut spec = FrameSpec::ipv4_tcp(40000, 443)
                .seq(1000 + 100 * i)
                .flags(flags)
                .payload(&payload);
            if let Some(tci) = vlan {
                spec = spec.vlan(TPID_8021Q, tci);
            }
            let mut b = vec![0u8; spec.len()];
            spec.write(&mut b).expect("sized");
            b
        })
        .collect()
}

/// What the running kernel's GRO does where kernels differ, the engine's rule being the
/// `true` one.
struct Rules {
    /// Frames with CWR merge with each other, only a change of CWR flushes (Linux since its
    /// 2026 AccECN change); before it, every frame with CWR flushes.
    cwr: bool,
    /// VLAN-tagged frames go through GRO (`vlan_gro_receive`, in a kernel built with 802.1Q
    /// support).
    vlan: bool,
}

impl Rules {
    /// Asks the kernel with two pairs of frames that the engine merges.
    fn probe(kernel: &Kernel) -> Result<Self, String> {
        let merges = |frames: Vec<Vec<u8>>| -> Result<bool, String> {
            assert_eq!(engine_gro(&frames).len(), 1, "the engine merges the probe");
            let out = kernel.gro(&frames, |got| got.len() == 2)?;
            match out.len() {
                1 => Ok(true),
                // Not merged: the frames come back as they went, tags included (the
                // receiver puts back what Linux took out of them).
                2 if by_flow(&out) == by_flow(&frames) => Ok(false),
                _ => Err(format!(
                    "probe: the frames did not come back as sent (\"lro\": as sent)\n{}",
                    describe(&frames, &out, &frames)
                )),
            }
        };
        Ok(Self {
            cwr: merges(pair(TCP_ACK | TCP_CWR, None))?,
            vlan: merges(pair(TCP_ACK, Some(7)))?,
        })
    }
}

/// One frame the engine delivered: its bytes (one contiguous frame), the input frames in it
/// (indices) and what the engine said of it.
struct Delivered {
    bytes: Vec<u8>,
    ids: Vec<usize>,
    info: SegmentInfo,
}

/// What the engine delivers for `frames` under `Config::gro()` with partial output
/// checksums, flushed once at the end.
fn engine_gro(frames: &[Vec<u8>]) -> Vec<Delivered> {
    let config = Config::gro().with_checksum_out(OutChecksum::Partial);
    let built = Built {
        frames: frames
            .iter()
            .map(|b| Pushed::new(b.clone(), RxMeta::ethernet(0)))
            .collect(),
        steps: (0..frames.len())
            .map(Do::Push)
            .chain([Do::FlushAll])
            .collect(),
        truth: None,
    };
    let mut engine: Box<Engine<_, Sizes<64, 64>>> = Box::new(Engine::new(config));
    let run = check::run(&mut *engine, &built, true);
    run.rec
        .out
        .into_iter()
        .map(|o| match o {
            Out::Seg {
                bytes, ids, info, ..
            } => Delivered { bytes, ids, info },
            Out::Rel(id) => panic!("frame {id} released under Gro"),
        })
        .collect()
}

/// The bytes of what the engine delivered.
fn frames_of(out: &[Delivered]) -> Vec<Vec<u8>> {
    out.iter().map(|d| d.bytes.clone()).collect()
}

/// Linux's GSO of every segment the engine merged (a forwarding stack would hand it to the
/// kernel so) must give back the frames merged into it, byte for byte (DESIGN.md invariant
/// 8 with Linux's segmentation in place of the engine's own). Segments whose IPv4 IDs were
/// all equal are left out (a `virtio_net_hdr` cannot ask for `SKB_GSO_TCP_FIXEDID`), and so
/// are those with CWR (Linux's GSO without AccECN keeps it on the first segment only).
/// Returns how many segments were checked.
fn gso_gives_back(kernel: &Kernel, input: &[Vec<u8>], out: &[Delivered]) -> Result<usize, String> {
    let mut checked = 0;
    for d in out {
        let (l3, l4) = (d.info.l3 as usize, d.info.l4 as usize);
        let cwr = d.bytes.get(l4 + 13).is_some_and(|f| f & TCP_CWR != 0);
        if d.info.gso_segs < 2 || d.info.fixed_id || cwr {
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
                if let Some(at) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
                    s += &format!(
                        "first difference: byte {at}: linux {:#04x}, the frame {:#04x}\n",
                        a[at], b[at]
                    );
                }
            }
            return Err(s);
        }
        checked += 1;
    }
    Ok(checked)
}

/// Frames by flow (the reference reader's identity; `None` for what is not TCP), each flow's
/// frames sorted: the multiset compared.
fn by_flow(frames: &[Vec<u8>]) -> BTreeMap<Option<String>, Vec<Vec<u8>>> {
    let mut flows: BTreeMap<Option<String>, Vec<Vec<u8>>> = BTreeMap::new();
    for f in frames {
        let id: Option<Identity> = match oracle::classify(f, &RxMeta::ethernet(0)) {
            Class::Tcp(p) => Some(p.id),
            _ => None,
        };
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
fn describe(input: &[Vec<u8>], kernel: &[Vec<u8>], ours: &[Vec<u8>]) -> String {
    let seq = |f: &Vec<u8>| match oracle::classify(f, &RxMeta::ethernet(0)) {
        Class::Tcp(p) => format!("{}@{}", f.len(), p.seq),
        _ => format!("{}", f.len()),
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
                if let Some(at) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
                    s += &format!(
                        "  first difference: frame {}, byte {at}: linux {:#04x}, lro {:#04x}\n",
                        seq(a),
                        a[at],
                        b[at]
                    );
                }
            }
        }
    }
    s
}

/// A flow seed whose link layer is Ethernet: untagged, or with `vlan`, also with its tags in
/// the frame (one 802.1Q tag, or 802.1ad over 802.1Q).
fn seed(vlan: bool) -> impl Strategy<Value = FlowSeed> {
    let links: u8 = if vlan { 3 } else { 1 };
    (any::<u8>(), any::<u8>(), any::<u32>(), 0..links).prop_map(|(shape, twin, misc, link)| {
        // Bits 1 to 3 of the shape choose the link layer with the others (`built::link_shape`,
        // modulo 6): pick the value that makes it `link`.
        let shape = (0u8..8)
            .map(|k| (shape & !0x0e) | (k << 1))
            .find(|s| (s >> 1) % 6 == link)
            .expect("eight consecutive values cover every remainder modulo 6");
        FlowSeed { shape, twin, misc }
    })
}

/// A step with no flush point (the batch is one poll).
fn step() -> impl Strategy<Value = Step> {
    (any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>(), 0u8..16).prop_map(
        |(flow, kind, a, m, t)| Step {
            flow,
            kind,
            a,
            m,
            t: 0x30 | t,
        },
    )
}

/// The batch of a generated scenario: its frames, less those Linux does not offer to TCP GRO
/// (see the module documentation); without CWR unless the kernel has the CWR rule the engine
/// follows.
fn batch(seeds: &[FlowSeed], steps: &[Step], rules: &Rules) -> Vec<Vec<u8>> {
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
    // The generator's step kind 91 turns CWR on or off for the frames that follow.
    let steps: Vec<Step> = steps
        .iter()
        .filter(|s| rules.cwr || s.kind % 100 != 91)
        .copied()
        .collect();
    let sc = Scenario::build(knobs, seeds, &steps);
    sc.inputs()
        .iter()
        // A twin that differs from its flow by a tag the NIC stripped exists only as
        // metadata: not on a wire.
        .filter(|i| i.meta.vlan_stripped.is_none())
        .filter(|i| !(i.corrupt || i.ip_opts || i.fragment))
        .map(|i| i.bytes.clone())
        .collect()
}

#[test]
fn gro_policy_makes_the_frames_linux_gro_makes() {
    let kernel = match Kernel::new("gen") {
        Ok(k) => k,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let rules = Rules::probe(&kernel).unwrap_or_else(|e| panic!("{e}"));
    println!(
        "{}",
        if rules.cwr {
            "this kernel merges frames with CWR as the engine does: CWR compared"
        } else {
            "this kernel flushes on every frame with CWR (before Linux's 2026 AccECN change, \
             which the engine follows): frames with CWR left out"
        }
    );
    println!(
        "{}",
        if rules.vlan {
            "this kernel coalesces VLAN-tagged frames: 802.1Q and 802.1ad compared"
        } else {
            "this kernel has no VLAN GRO (built without 802.1Q support): untagged frames only"
        }
    );
    let cases = std::env::var("LRO_KERNEL_GRO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let config = RunnerConfig {
        cases,
        failure_persistence: None,
        max_shrink_iters: 200,
        ..RunnerConfig::default()
    };
    // A fixed seed: the same batches every run (set LRO_KERNEL_GRO_SEED for others).
    let seed_value: u64 = std::env::var("LRO_KERNEL_GRO_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x6c72_6f2d_6b67_726f);
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed_value.to_le_bytes());
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &key));
    let (frames_in, frames_out, segmented) = (Cell::new(0usize), Cell::new(0usize), Cell::new(0));
    let strategy = (
        proptest::collection::vec(seed(rules.vlan), 1..=6),
        proptest::collection::vec(step(), 1..=BATCH),
    );
    let result = runner.run(&strategy, |(seeds, steps)| {
        let input = batch(&seeds, &steps, &rules);
        let out = engine_gro(&input);
        let ours = frames_of(&out);
        kernel.agrees(&input, &ours).map_err(TestCaseError::fail)?;
        let n = gso_gives_back(&kernel, &input, &out).map_err(TestCaseError::fail)?;
        segmented.set(segmented.get() + n);
        frames_in.set(frames_in.get() + input.len());
        frames_out.set(frames_out.get() + ours.len());
        Ok(())
    });
    let (frames_in, frames_out, segmented) = (frames_in.get(), frames_out.get(), segmented.get());
    let merged = frames_in - frames_out;
    println!(
        "{cases} batches: {frames_in} frames in, {frames_out} out, the same from Linux GRO \
         ({merged} frames merged); Linux's GSO gave back the frames of {segmented} segments"
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    // The comparison saw merging at all (a kernel that merged nothing would agree with an
    // engine that merged nothing).
    assert!(
        merged * 10 > frames_in,
        "{merged} of {frames_in} frames merged"
    );
}

/// The Ethernet frames of a committed capture (`data/<name>.pcap.xz` of the workspace).
fn capture(name: &str) -> Vec<Vec<u8>> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../data")
        .join(format!("{name}.pcap.xz"));
    let xz = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut raw = Vec::new();
    lzma_rs::xz_decompress(&mut &xz[..], &mut raw).expect("xz");
    let frames = lro_testkit::capture::read(&raw).expect("a pcap");
    assert!(
        frames.iter().all(|(link, _)| *link == 1),
        "{name}: Ethernet"
    );
    frames.into_iter().map(|(_, f)| f).collect()
}

/// Real Linux TCP traffic in polls of 63 frames: the built-in capture whole, and the first
/// 2,520 frames of each of the two traces `scripts/make-capture.sh` made for the DPDK
/// comparison (an ACK-heavy one, and a lossy one with SACK); every frame of all three with
/// `LRO_KERNEL_GRO_FULL=1`, and any Ethernet pcap named by `LRO_KERNEL_GRO_PCAP`.
#[test]
fn gro_policy_makes_the_frames_linux_gro_makes_of_real_traffic() {
    let kernel = match Kernel::new("cap") {
        Ok(k) => k,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let full = std::env::var_os("LRO_KERNEL_GRO_FULL").is_some();
    let mut captures: Vec<(String, Vec<Vec<u8>>, usize)> = [
        ("default", usize::MAX),
        ("bench/ack-heavy", 2520),
        ("bench/lossy", 2520),
    ]
    .into_iter()
    .map(|(name, limit)| (name.to_string(), capture(name), limit))
    .collect();
    // Any other Ethernet pcap, whole: LRO_KERNEL_GRO_PCAP=path.
    if let Some(path) = std::env::var_os("LRO_KERNEL_GRO_PCAP") {
        let raw = std::fs::read(&path).expect("LRO_KERNEL_GRO_PCAP");
        let frames = lro_testkit::capture::read(&raw).expect("a pcap");
        let frames = frames.into_iter().map(|(_, f)| f).collect();
        captures.push((path.to_string_lossy().into_owned(), frames, usize::MAX));
    }
    for (name, frames, limit) in captures {
        let frames = &frames[..if full {
            frames.len()
        } else {
            limit.min(frames.len())
        }];
        let (mut out, mut segmented) = (0, 0);
        for (i, poll) in frames.chunks(BATCH).enumerate() {
            let delivered = engine_gro(poll);
            let ours = frames_of(&delivered);
            if let Err(e) = kernel.agrees(poll, &ours) {
                panic!("{name}, poll {i} (frames {} on):\n{e}", i * BATCH);
            }
            match gso_gives_back(&kernel, poll, &delivered) {
                Ok(n) => segmented += n,
                Err(e) => panic!("{name}, poll {i} (frames {} on):\n{e}", i * BATCH),
            }
            out += ours.len();
        }
        println!(
            "{name}: {} frames in polls of {BATCH}, {out} out, the same from Linux GRO; \
             Linux's GSO gave back the frames of {segmented} segments",
            frames.len()
        );
        assert!(out < frames.len(), "{name}: nothing merged");
        assert!(segmented > 0, "{name}: no segment through GSO");
    }
}
