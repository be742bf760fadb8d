//! Hostile input: every frame of the tcpdump test captures (odd and malformed packets), a
//! committed handful of the nastiest frames (`tests/fixtures/`), and adversarial traffic
//! (hash collisions, eviction storms, sequence wrap, the 64 KB limit, zero windows, duplicate
//! ACK floods, truncation at every byte). Each run checks that nothing panics and that the
//! output keeps DESIGN.md's invariants: every frame back exactly once, flows kept apart,
//! per-flow payload in order, and rewritten segments valid (lengths and checksums, computed
//! here with `lro_core::testing`'s reference sum, not the engine's).
//!
//! Flows, payloads and the output's offsets are read with the reference reader
//! (`lro_testkit::oracle`), written from the protocol rules and not from the engine's parser,
//! so a parser that left a field out of the flow key could not hide behind its own answer.
//!
//! The capture replay reads `../shared/corpus/tcpdump-tests` (or `$LRO_TCPDUMP_TESTS`) with
//! `lro_testkit::capture`'s tolerant reader, and is skipped with a message when the folder is
//! absent.

use lro_core::flow::FlowHasher;
use lro_core::rss::RssSorted;
use lro_core::testing::{self, FrameSpec, IpSpec, TCP_ACK, TCP_PSH, TPID_8021Q};
use lro_core::{parse, FlowKey};
use lro_core::{
    Coalescer, Config, Engine, FlushReason, LinkKind, OutChecksum, PassReason, Policy, RssHash,
    RssType, RxChecksum, RxMeta, Segment, SegmentInfo, Sink, Sizes, Verdict,
};
use lro_testkit::frame::bytes_of;
use lro_testkit::oracle::{self, Class, Identity, Tcp};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A frame that carries its input index; not `Clone`, so whatever comes back was pushed.
#[derive(Debug)]
struct TFrame {
    id: usize,
    buf: Vec<u8>,
}

impl AsRef<[u8]> for TFrame {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl AsMut<[u8]> for TFrame {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // test records
enum Out {
    Seg {
        ids: Vec<usize>,
        bytes: Vec<u8>,
        info: SegmentInfo,
    },
    Rel(usize),
}

#[derive(Default)]
struct Rec {
    out: Vec<Out>,
}

impl Sink<TFrame> for Rec {
    fn segment(&mut self, seg: Segment<'_, TFrame>) {
        let info = *seg.info();
        let mut bytes = vec![0u8; seg.len()];
        assert_eq!(seg.copy_to(&mut bytes), Ok(seg.len()));
        let ids = seg.into_frames().map(|f| f.id).collect();
        self.out.push(Out::Seg { ids, bytes, info });
    }

    fn release(&mut self, frame: TFrame) {
        self.out.push(Out::Rel(frame.id));
    }
}

/// One input frame.
#[derive(Clone)]
struct In {
    bytes: Vec<u8>,
    meta: RxMeta,
}

impl In {
    fn new(bytes: Vec<u8>, meta: RxMeta) -> Self {
        Self { bytes, meta }
    }

    /// The reference reader's view, when it reads a TCP segment.
    fn tcp(&self) -> Option<Box<Tcp>> {
        match oracle::classify(&self.bytes, &self.meta) {
            Class::Tcp(t) => Some(t),
            _ => None,
        }
    }

    fn key(&self) -> Option<Identity> {
        self.tcp().map(|t| t.id)
    }

    /// The engine's own flow key (what its table hashes).
    fn engine_key(&self) -> Option<FlowKey> {
        parse::flow_key(&self.bytes, &self.meta)
    }

    fn payload(&self) -> &[u8] {
        match self.tcp() {
            Some(t) => &self.bytes[t.payload..t.ip_end],
            None => &[],
        }
    }
}

/// Operations of a run.
#[derive(Clone, Copy)]
enum Op {
    Push(usize),
    FlushAll,
}

fn pushes(n: usize) -> Vec<Op> {
    (0..n).map(Op::Push).collect()
}

/// Runs `ops` on `engine` (then a teardown `flush_all`) and checks the output.
fn run<C: Coalescer<TFrame>>(
    engine: &mut C,
    inputs: &[In],
    ops: &[Op],
    config: &Config,
    frames_max: usize,
) -> Rec {
    let mut rec = Rec::default();
    for op in ops {
        match *op {
            Op::Push(i) => {
                let f = TFrame {
                    id: i,
                    buf: inputs[i].bytes.clone(),
                };
                engine.push(f, &inputs[i].meta, &mut rec);
            }
            Op::FlushAll => engine.flush_all(&mut rec),
        }
    }
    engine.flush_all(&mut rec);
    assert_eq!(engine.held_frames(), 0, "frames held after flush_all");
    assert!(engine.stats().is_conserved(), "{:?}", engine.stats());
    check(inputs, ops, config, frames_max, &rec);
    rec
}

fn ones(data: &[u8]) -> u16 {
    testing::ones_complement_sum(data)
}

fn is_zero(s: u16) -> bool {
    s == 0 || s == 0xffff
}

/// Conservation, isolation, per-flow order and bytes, valid rewritten output.
fn check(inputs: &[In], ops: &[Op], config: &Config, frames_max: usize, rec: &Rec) {
    let pushed: Vec<usize> = ops
        .iter()
        .filter_map(|o| match o {
            Op::Push(i) => Some(*i),
            Op::FlushAll => None,
        })
        .collect();
    let mut seen = vec![0u32; inputs.len()];
    for o in &rec.out {
        match o {
            Out::Seg { ids, .. } => ids.iter().for_each(|&i| seen[i] += 1),
            Out::Rel(i) => seen[*i] += 1,
        }
    }
    for &i in &pushed {
        assert_eq!(
            seen[i], 1,
            "conservation: frame {i} came back {} times",
            seen[i]
        );
        seen[i] = 0;
    }
    assert!(seen.iter().all(|&c| c == 0), "a frame came back unpushed");
    // Per-flow order (so per-flow bytes: each segment's payload is checked below).
    let mut last: HashMap<Identity, usize> = HashMap::new();
    let mut flow_out: HashMap<Identity, Vec<u8>> = HashMap::new();
    for o in &rec.out {
        let Out::Seg { ids, bytes, info } = o else {
            if let Out::Rel(i) = o {
                assert_eq!(config.policy, Policy::Lro, "released under Gro");
                assert!(
                    inputs[*i].payload().is_empty(),
                    "frame {i} released with data"
                );
            }
            continue;
        };
        assert_eq!(usize::from(info.frames), ids.len());
        assert_eq!(info.len, bytes.len());
        assert!(ids.len() <= frames_max);
        let head = &inputs[ids[0]];
        for &i in ids {
            if let Some(k) = inputs[i].key() {
                if let Some(&p) = last.get(&k) {
                    assert!(p < i, "order: frame {i} after {p}");
                }
                last.insert(k, i);
                flow_out
                    .entry(k)
                    .or_default()
                    .extend_from_slice(inputs[i].payload());
            }
        }
        if info.checksum == OutChecksum::AsReceived {
            assert_eq!(ids.len(), 1, "AsReceived with several frames");
            assert!(
                head.bytes.starts_with(bytes),
                "frame {}: delivered as received, but changed",
                ids[0]
            );
            continue;
        }
        // Rewritten: every member of the head's flow, the output valid.
        let key = head.key().expect("a rewritten segment's head is TCP");
        for &i in ids {
            assert_eq!(inputs[i].key(), Some(key), "isolation: segment {ids:?}");
        }
        let Class::Tcp(p) = oracle::classify(bytes, &head.meta) else {
            panic!("segment {ids:?}: a rewritten segment is TCP");
        };
        assert_eq!(p.id, key, "segment {ids:?}: the flow of its frames");
        assert_eq!(p.ip_end, bytes.len(), "segment {ids:?}: IP length");
        let (l3, l4) = (p.l3, p.l4);
        if !p.v6 {
            assert!(
                is_zero(ones(&bytes[l3..l4])),
                "segment {ids:?}: IPv4 checksum"
            );
        } else {
            let plen = usize::from(u16::from_be_bytes([bytes[l3 + 4], bytes[l3 + 5]]));
            assert_eq!(plen + 40, bytes.len() - l3, "segment {ids:?}: IPv6 length");
        }
        let tcp_len = (bytes.len() - l4) as u32;
        let (src, dst) = (p.id.src, p.id.dst);
        let pseudo = if p.v6 {
            testing::pseudo_header_sum_v6(src, dst, tcp_len)
        } else {
            let four = |a: [u8; 16]| [a[0], a[1], a[2], a[3]];
            testing::pseudo_header_sum_v4(four(src), four(dst), tcp_len)
        };
        match info.checksum {
            OutChecksum::Full => assert!(
                is_zero(testing::add16(pseudo, ones(&bytes[l4..]))),
                "segment {ids:?}: TCP checksum"
            ),
            OutChecksum::Partial => {
                assert_eq!(u16::from_be_bytes([bytes[l4 + 16], bytes[l4 + 17]]), pseudo)
            }
            other => panic!("checksum state {other:?}"),
        }
        let payload: Vec<u8> = ids
            .iter()
            .flat_map(|&i| inputs[i].payload().to_vec())
            .collect();
        assert_eq!(
            &bytes[p.payload..],
            &payload[..],
            "segment {ids:?}: payload"
        );
        if ids.len() > 1 {
            assert!(bytes.len() - l3 <= usize::from(config.max_ip_len));
        }
    }
    // Bytes per flow: what went in (minus released pure ACKs, which carry none) came out.
    let mut flow_in: HashMap<Identity, Vec<u8>> = HashMap::new();
    for &i in &pushed {
        if let Some(k) = inputs[i].key() {
            flow_in
                .entry(k)
                .or_default()
                .extend_from_slice(inputs[i].payload());
        }
    }
    for (k, data) in &flow_in {
        assert_eq!(
            flow_out.get(k).map(Vec::as_slice).unwrap_or(&[]),
            &data[..],
            "bytes of flow {k:?}"
        );
    }
}

/// Both policies, two table shapes, and the RSS wrapper.
fn run_all(inputs: &[In], ops: &[Op]) {
    for config in [
        Config::gro(),
        Config::lro(),
        Config::lro().with_checksum_out(OutChecksum::Partial),
    ] {
        let mut small: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
        run(&mut *small, inputs, ops, &config, 8);
        let mut large: Box<Engine<TFrame, Sizes<64, 64>>> = Box::new(Engine::new(config));
        run(&mut *large, inputs, ops, &config, 64);
    }
    let inner: Engine<TFrame, Sizes<4, 16>> = Engine::new(Config::lro());
    let mut sorted: Box<RssSorted<_, TFrame, 64>> = Box::new(RssSorted::new(inner));
    let mut rec = Rec::default();
    for op in ops {
        match *op {
            Op::Push(i) => {
                let f = TFrame {
                    id: i,
                    buf: inputs[i].bytes.clone(),
                };
                sorted.push(f, &inputs[i].meta, &mut rec);
            }
            Op::FlushAll => sorted.flush_all(&mut rec),
        }
    }
    sorted.flush_all(&mut rec);
    assert!(sorted.stats().is_conserved());
    let n: usize = rec
        .out
        .iter()
        .map(|o| match o {
            Out::Seg { ids, .. } => ids.len(),
            Out::Rel(_) => 1,
        })
        .sum();
    let pushed = ops.iter().filter(|o| matches!(o, Op::Push(_))).count();
    assert_eq!(n, pushed, "RssSorted: frames out");
}

/// The metadata variants a frame is offered with: unverified, and CHECKSUM_COMPLETE with the
/// true sum (a NIC that lies is out of scope).
fn metas(bytes: &[u8], link: LinkKind) -> [RxMeta; 2] {
    let base = RxMeta::new(link, 0);
    let complete = testing::complete_checksum(bytes, link);
    [base, base.with_checksum(RxChecksum::Complete(complete))]
}

// ---------------------------------------------------------------------------------------------
// Captures (read with `lro_testkit::capture`): how their frames are offered.

/// How a capture's link type is offered to the engine: Ethernet and raw IP as themselves,
/// Linux cooked captures as raw IP after their header, anything else as both (hostile bytes).
fn frames_for(link: u32, frame: &[u8]) -> Vec<(LinkKind, Vec<u8>)> {
    match link {
        1 => vec![(LinkKind::Ethernet, frame.to_vec())],
        12 | 14 | 101 | 228 | 229 => vec![(LinkKind::RawIp, frame.to_vec())],
        113 => vec![(LinkKind::RawIp, frame.get(16..).unwrap_or(&[]).to_vec())],
        276 => vec![(LinkKind::RawIp, frame.get(20..).unwrap_or(&[]).to_vec())],
        _ => vec![
            (LinkKind::Ethernet, frame.to_vec()),
            (LinkKind::RawIp, frame.to_vec()),
        ],
    }
}

fn tcpdump_tests() -> PathBuf {
    std::env::var_os("LRO_TCPDUMP_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus/tcpdump-tests")
        })
}

#[test]
fn every_frame_of_the_tcpdump_test_captures() {
    let dir = tcpdump_tests();
    let Ok(entries) = std::fs::read_dir(&dir) else {
        println!(
            "skipped: {} is absent (set LRO_TCPDUMP_TESTS to the tcpdump test captures)",
            dir.display()
        );
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let (mut files, mut frames) = (0, 0);
    for path in &paths {
        let Ok(data) = std::fs::read(path) else {
            continue;
        };
        let Some(packets) = lro_testkit::capture::read(&data) else {
            println!("not a capture, skipped: {}", path.display());
            continue;
        };
        files += 1;
        // Each capture is one poll's worth of traffic: its frames in order, every offered
        // with both checksum metadata variants.
        let mut inputs = Vec::new();
        for (link, frame) in &packets {
            for (kind, bytes) in frames_for(*link, frame) {
                assert_parsers_agree(&bytes);
                for meta in metas(&bytes, kind) {
                    inputs.push(In::new(bytes.clone(), meta));
                }
            }
        }
        frames += inputs.len();
        let ops = pushes(inputs.len());
        run_all(&inputs, &ops);
    }
    println!("{files} captures, {frames} frames offered");
    assert!(files > 0, "no capture in {}", dir.display());
}

#[test]
fn committed_nasty_frames() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/fixtures")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    names.sort();
    assert!(names.len() >= 10, "fixtures missing");
    for path in &names {
        let bytes = std::fs::read(path).expect("fixture");
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let kind = if name.starts_with("raw-") {
            LinkKind::RawIp
        } else {
            LinkKind::Ethernet
        };
        // The frame, twice (a flow of itself), then every prefix of it.
        let mut inputs = Vec::new();
        for meta in metas(&bytes, kind) {
            inputs.push(In::new(bytes.clone(), meta));
            inputs.push(In::new(bytes.clone(), meta));
        }
        for cut in 0..bytes.len().min(200) {
            inputs.push(In::new(bytes[..cut].to_vec(), metas(&bytes, kind)[0]));
        }
        let ops = pushes(inputs.len());
        run_all(&inputs, &ops);
    }
}

// ---------------------------------------------------------------------------------------------
// Adversarial traffic.

fn spec(port: u16) -> FrameSpec<'static> {
    FrameSpec::ipv4_tcp(port, 5201)
}

const PAYLOAD: [u8; 1448] = {
    let mut p = [0u8; 1448];
    let mut i = 0;
    while i < p.len() {
        p[i] = (i * 7 + 3) as u8;
        i += 1;
    }
    p
};

/// `frames` segments of `flows` interleaved flows made by `make(flow) -> spec`.
fn interleaved(
    flows: usize,
    frames: usize,
    make: &dyn Fn(usize) -> FrameSpec<'static>,
    rss: Option<u32>,
) -> Vec<In> {
    let mut seq = vec![1u32; flows];
    (0..frames)
        .map(|i| {
            let f = i % flows;
            let s = make(f).seq(seq[f]).payload(&PAYLOAD[..1000]);
            seq[f] = seq[f].wrapping_add(1000);
            let mut meta = RxMeta::ethernet(i as u64).with_checksum(RxChecksum::Verified);
            if let Some(value) = rss {
                meta = meta.with_rss(RssHash {
                    value,
                    kind: RssType::TcpIpv4,
                });
            }
            In::new(bytes_of(&s), meta)
        })
        .collect()
}

/// Source ports whose flow keys land in one bucket chain of every table up to 256 entries
/// under the hash seed `seed`: what an attacker who knows the seed can find by trying ports
/// (about 256 tries per flow). A caller who gives the engine a random seed
/// ([`Config::hash_seed`]) leaves nothing to find.
fn colliding_ports(seed: u64, n: usize) -> Vec<u16> {
    let hasher = FlowHasher::new(seed);
    let key = |port: u16| build_key(&spec(port));
    let target = hasher.hash(&key(1024)) & 0xff;
    (1024..=u16::MAX)
        .filter(|&p| hasher.hash(&key(p)) & 0xff == target)
        .take(n)
        .collect()
}

fn build_key(s: &FrameSpec<'_>) -> FlowKey {
    parse::flow_key(&bytes_of(&s.payload(&PAYLOAD[..10])), &RxMeta::ethernet(0)).expect("TCP")
}

#[test]
fn flows_crafted_to_collide_in_the_key_hash_stay_apart() {
    let ports = colliding_ports(Config::DEFAULT_HASH_SEED, 64);
    assert_eq!(ports.len(), 64, "enough colliding ports");
    let inputs = interleaved(64, 64 * 8, &|k| spec(ports[k]), None);
    let hasher = FlowHasher::new(Config::DEFAULT_HASH_SEED);
    let buckets: std::collections::HashSet<u32> = inputs
        .iter()
        .map(|f| hasher.hash(&f.engine_key().expect("TCP")) & 0xff)
        .collect();
    let keys: std::collections::HashSet<FlowKey> = inputs
        .iter()
        .map(|f| f.engine_key().expect("TCP"))
        .collect();
    assert_eq!(
        (buckets.len(), keys.len()),
        (1, 64),
        "the crafted flows share one bucket"
    );
    run_all(&inputs, &pushes(inputs.len()));
    // Colliding flows still aggregate: a table of 64 holds all of them.
    let config = Config::lro();
    let mut e: Box<Engine<TFrame, Sizes<64, 64>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 64);
    assert_eq!(e.stats().segments, 64, "one segment per flow");
    // Under another seed the same flows spread over the buckets.
    let other = FlowHasher::new(0x0123_4567_89ab_cdef);
    let spread: std::collections::HashSet<u32> =
        keys.iter().map(|k| other.hash(k) & 0xff).collect();
    assert!(spread.len() > 40, "{} buckets", spread.len());
}

/// A new hash seed re-buckets the held flows: every one is still found and its next frame
/// merges, even when all of them share one bucket chain under the new seed.
#[test]
fn a_new_hash_seed_keeps_every_held_flow_found() {
    let seed = 0x0123_4567_89ab_cdef;
    let ports = colliding_ports(seed, 32);
    assert_eq!(ports.len(), 32, "enough colliding ports");
    let frame = |id: usize, port: u16, seq: u32| TFrame {
        id,
        buf: bytes_of(&spec(port).seq(seq).payload(&PAYLOAD[..1000])),
    };
    let meta = RxMeta::ethernet(0).with_checksum(RxChecksum::Verified);
    for config in [Config::lro(), Config::gro()] {
        let mut out = Rec::default();
        let mut e: Box<Engine<TFrame, Sizes<64, 64>>> = Box::new(Engine::new(config));
        for (k, &p) in ports.iter().enumerate() {
            assert_eq!(e.push(frame(k, p, 1), &meta, &mut out), Verdict::Held);
        }
        e.set_config(config.with_hash_seed(seed));
        for (k, &p) in ports.iter().enumerate() {
            let v = e.push(frame(32 + k, p, 1001), &meta, &mut out);
            assert_eq!(
                v,
                Verdict::Merged,
                "port {p}: its held segment was not found"
            );
        }
        e.flush_all(&mut out);
        let pairs = out
            .out
            .iter()
            .filter(|o| matches!(o, Out::Seg { ids, .. } if ids.len() == 2))
            .count();
        assert_eq!(
            (out.out.len(), pairs),
            (32, 32),
            "{:?}: one segment of two frames per flow",
            config.policy
        );
    }
}

#[test]
fn many_flows_sharing_one_rss_hash() {
    let inputs = interleaved(200, 200 * 4, &|f| spec(2000 + f as u16), Some(0x1234_5678));
    run_all(&inputs, &pushes(inputs.len()));
    // The RSS wrapper groups by hash: one group of 200 flows through 4 entries still only
    // merges frames of one flow (checked by `run_all`), and loses nothing.
    let inner: Engine<TFrame, Sizes<4, 16>> = Engine::new(Config::lro());
    let mut sorted: Box<RssSorted<_, TFrame, 1024>> = Box::new(RssSorted::new(inner));
    let config = Config::lro();
    run(&mut *sorted, &inputs, &pushes(inputs.len()), &config, 16);
    assert_eq!(sorted.rss_stats().runs, 1, "one hash, one run");
}

#[test]
fn eviction_storm() {
    // 1000 flows round-robin through 4 entries: every push past the fourth evicts.
    let inputs = interleaved(1000, 3000, &|f| spec(f as u16), None);
    let config = Config::gro();
    let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    assert_eq!(e.stats().evictions, 3000 - 4);
    assert_eq!(e.stats().forgotten, 3000 - 4);
    assert_eq!(e.stats().frames_merged, 0);
    assert_eq!(e.stats().flushed(FlushReason::Evicted), 3000 - 4);
}

#[test]
fn pure_ack_flows_beyond_the_table_are_counted_as_forgotten() {
    // 100 flows' pure ACKs round-robin through 4 entries (each delivered alone, its flow's
    // entry kept idle for header prediction): entries go from one ACK flow to another,
    // which evicts nothing.
    let inputs: Vec<In> = (0..1000)
        .map(|i| {
            let s = spec(2000 + (i % 100) as u16)
                .ack(1 + i as u32)
                .flags(TCP_ACK);
            In::new(
                bytes_of(&s),
                RxMeta::ethernet(i as u64).with_checksum(RxChecksum::Verified),
            )
        })
        .collect();
    let config = Config::gro();
    let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
    run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    let s = e.stats();
    assert_eq!((s.evictions, s.frames_merged), (0, 0));
    assert!(
        s.forgotten > 50 && s.forgotten < 1000,
        "{} flows forgotten",
        s.forgotten
    );
}

#[test]
fn sequence_numbers_wrapping_at_2_32() {
    for start in [
        u32::MAX - 999,
        u32::MAX - 1000,
        u32::MAX,
        0u32.wrapping_sub(2500),
    ] {
        let inputs: Vec<In> = (0..8u32)
            .map(|k| {
                let s = spec(7)
                    .seq(start.wrapping_add(k * 1000))
                    .payload(&PAYLOAD[..1000]);
                In::new(bytes_of(&s), RxMeta::ethernet(0))
            })
            .collect();
        for config in [Config::gro(), Config::lro()] {
            let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
            let rec = run(&mut *e, &inputs, &pushes(8), &config, 8);
            let Out::Seg { ids, bytes, .. } = &rec.out[0] else {
                panic!("a segment");
            };
            assert_eq!(ids.len(), 8, "merged across the wrap ({start:#x})");
            let seq = u32::from_be_bytes(bytes[38..42].try_into().unwrap());
            assert_eq!(seq, start);
        }
    }
}

#[test]
fn the_64_kb_limit() {
    // 9000-byte jumbo segments: a segment stops below 65535 bytes of IP datagram.
    let big = vec![0xa5u8; 9000];
    let inputs: Vec<In> = (0..40u32)
        .map(|k| {
            let s = spec(9).seq(1 + k * 9000).payload(&big);
            In::new(bytes_of(&s), RxMeta::ethernet(0))
        })
        .collect();
    for config in [Config::gro(), Config::lro()] {
        let mut e: Box<Engine<TFrame, Sizes<4, 64>>> = Box::new(Engine::new(config));
        let rec = run(&mut *e, &inputs, &pushes(40), &config, 64);
        assert!(e.stats().flushed(FlushReason::SizeLimit) > 0);
        let sizes: Vec<usize> = rec
            .out
            .iter()
            .map(|o| match o {
                Out::Seg { bytes, ids, .. } => {
                    assert!(bytes.len() - 14 <= 65535);
                    ids.len()
                }
                Out::Rel(_) => panic!("no pure ACKs here"),
            })
            .collect();
        // 7 x 9000 bytes fit in one datagram, 8 do not.
        assert_eq!(sizes, [7, 7, 7, 7, 7, 5]);
    }
    // A single IPv4 datagram of exactly 65535 bytes, and the largest IPv6 payload.
    let p4 = vec![1u8; 65535 - 40];
    let p6 = vec![2u8; 65535 - 20];
    let frames = [
        bytes_of(&spec(1).payload(&p4)),
        bytes_of(&FrameSpec::ipv6_tcp(1, 2).payload(&p6)),
        bytes_of(&spec(1).seq(65495).payload(&PAYLOAD[..100])),
    ];
    let inputs: Vec<In> = frames
        .iter()
        .map(|b| In::new(b.clone(), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(3));
}

#[test]
fn zero_window() {
    // The receiver's window closes (zero-window ACKs), a probe arrives, the window reopens.
    let mut frames = Vec::new();
    let mut ack = 100u32;
    for k in 0..6 {
        frames.push(spec(3).ack(ack).window(0));
        if k % 2 == 1 {
            ack += 1;
        }
    }
    frames.push(spec(3).ack(ack).window(0).payload(&PAYLOAD[..1])); // a probe
    frames.push(spec(3).ack(ack).window(0));
    frames.push(spec(3).ack(ack).window(4096)); // window update
    frames.push(spec(3).ack(ack).window(65535)); // another
    let inputs: Vec<In> = frames
        .iter()
        .map(|s| In::new(bytes_of(s), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(inputs.len()));
    let config = Config::lro();
    let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &inputs, &pushes(inputs.len()), &config, 8);
    // Identical zero-window ACKs are duplicates: never superseded.
    let released: Vec<usize> = rec
        .out
        .iter()
        .filter_map(|o| match o {
            Out::Rel(i) => Some(*i),
            Out::Seg { .. } => None,
        })
        .collect();
    for pair in [(0, 1), (2, 3), (4, 5)] {
        assert!(
            !released.contains(&pair.1),
            "duplicate zero-window ACK {} released",
            pair.1
        );
    }
}

#[test]
fn a_flood_of_duplicate_acks() {
    let n = 5000;
    let inputs: Vec<In> = (0..n)
        .map(|_| {
            In::new(
                bytes_of(&spec(4).ack(777).window(1000)),
                RxMeta::ethernet(0),
            )
        })
        .collect();
    run_all(&inputs, &pushes(n));
    let config = Config::lro();
    let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &inputs, &pushes(n), &config, 8);
    // None is superseded: every duplicate reaches the stack (RFC 5681 fast retransmit).
    assert_eq!(e.stats().absorbed, 0);
    assert_eq!(rec.out.len(), n);
    assert!(e.stats().passed(PassReason::DupAck) >= n as u64 - 2);
}

#[test]
fn truncated_headers_at_every_byte_offset() {
    let mut six = FrameSpec::ipv6_tcp(5, 6).payload(&PAYLOAD[..64]);
    if let IpSpec::V6(ip) = &mut six.ip {
        ip.ext[0] = Some(testing::Ipv6Ext::new(
            testing::Ipv6ExtKind::HopByHop,
            &[1, 4, 0, 0, 0, 0],
        ));
    }
    let shapes = [
        spec(5).payload(&PAYLOAD[..64]).timestamps(1, 2),
        spec(5)
            .vlan(TPID_8021Q, 3)
            .vlan(TPID_8021Q, 4)
            .payload(&PAYLOAD[..64]),
        six,
        spec(5).raw_ip().payload(&PAYLOAD[..64]),
    ];
    for s in &shapes {
        let full = bytes_of(s);
        let kind = if s.link_len() == 0 {
            LinkKind::RawIp
        } else {
            LinkKind::Ethernet
        };
        // A valid frame of the flow, every truncation of the next one, then the next one.
        let next = bytes_of(&s.seq(64).flags(TCP_ACK | TCP_PSH));
        let mut inputs = vec![In::new(full.clone(), metas(&full, kind)[0])];
        for cut in 0..next.len() {
            for meta in metas(&next[..cut], kind) {
                inputs.push(In::new(next[..cut].to_vec(), meta));
            }
        }
        inputs.push(In::new(next.clone(), metas(&next, kind)[0]));
        run_all(&inputs, &pushes(inputs.len()));
        let config = Config::lro();
        let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
        let mut rec = Rec::default();
        for (i, f) in inputs.iter().enumerate().skip(1).take(inputs.len() - 2) {
            let v = e.push(
                TFrame {
                    id: i,
                    buf: f.bytes.clone(),
                },
                &f.meta,
                &mut rec,
            );
            assert!(
                matches!(v, Verdict::Passed(_)),
                "a truncated frame ({} bytes) was {v:?}",
                f.bytes.len()
            );
        }
    }
}

#[test]
fn reordered_old_ack_and_its_repeat_are_not_superseded_wrongly() {
    // From the coalesce fuzz target: a pure ACK, an older data+PSH segment (reordered), then a
    // pure ACK repeating the older one's ACK and window. The repeat is not a duplicate in RFC
    // 5681's sense (its ACK is not the greatest seen), so it may be held; whatever the engine
    // does, everything must come back and nothing merge across the PSH.
    let a = spec(35342)
        .ack(0x784c_89ef)
        .window(63)
        .timestamps(0x4786_e138, 1);
    let b = spec(35342)
        .ack(0x784c_89ee)
        .window(63)
        .timestamps(0x4786_e137, 1)
        .flags(TCP_ACK | TCP_PSH)
        .seq(0x23a9_c20c)
        .payload(&PAYLOAD[..37]);
    let c = spec(35342)
        .ack(0x784c_89ee)
        .window(63)
        .timestamps(0x4786_e137, 1)
        .seq(0x23a9_c231);
    let inputs: Vec<In> = [a, b, c]
        .iter()
        .map(|s| In::new(bytes_of(s), RxMeta::ethernet(0)))
        .collect();
    run_all(&inputs, &pushes(3));
    // And with the same ACK state repeated once more, it is a duplicate: never released.
    let mut more = inputs.clone();
    more.push(inputs[2].clone());
    let config = Config::lro();
    let mut e: Box<Engine<TFrame, Sizes<4, 8>>> = Box::new(Engine::new(config));
    let rec = run(&mut *e, &more, &pushes(4), &config, 8);
    assert!(
        !rec.out.iter().any(|o| matches!(o, Out::Rel(3))),
        "a duplicate of the held ACK was superseded"
    );
    let mut flushed = more.clone();
    flushed.push(inputs[0].clone());
    let ops = [
        Op::Push(0),
        Op::Push(1),
        Op::Push(2),
        Op::FlushAll,
        Op::Push(3),
    ];
    run(&mut *e, &flushed, &ops, &config, 8);
}

// ---------------------------------------------------------------------------------------------
// The engine's parser (`parse_into`, with its fast path) against the general one.

/// Every metadata variant the parser branches on.
fn parse_metas() -> [RxMeta; 3] {
    [
        RxMeta::ethernet(0),
        RxMeta::ethernet(0).with_vlan_stripped(7),
        RxMeta::raw_ip(0),
    ]
}

/// `parse_into` says exactly what `parse` says: the same `Parsed` on success, the same
/// `Unparsed` (reason and flow hint) on failure.
fn assert_parsers_agree(bytes: &[u8]) {
    for meta in parse_metas() {
        let mut p = parse::Parsed::EMPTY;
        let got = parse::parse_into::<lro_core::encap::NoEncap>(bytes, &meta, &mut p).map(|()| p);
        assert_eq!(got, parse::parse(bytes, &meta), "{meta:?} {bytes:02x?}");
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4096))]

    /// Frames of the fast path's shape and near misses: any header byte changed, cut short or
    /// padded, with and without options.
    #[test]
    fn parse_into_agrees_with_parse(
        options in 0u8..4,
        payload_len in 0usize..64,
        edits in proptest::collection::vec((0usize..80, proptest::num::u8::ANY), 0..4),
        cut in proptest::option::of(0usize..140),
        pad in 0usize..8,
        vlan in proptest::bool::ANY,
    ) {
        let payload = &PAYLOAD[..payload_len];
        let mut s = spec(40000).seq(1).ack(2).payload(payload);
        s = match options {
            0 => s,
            1 => s.timestamps(3, 4),
            2 => s.sack(&[(5, 6)]),
            _ => s.timestamps(3, 4).sack(&[(7, 8)]),
        };
        if vlan {
            s = s.vlan(TPID_8021Q, 5);
        }
        let mut b = bytes_of(&s);
        b.extend(std::iter::repeat_n(0u8, pad));
        for (at, v) in edits {
            if let Some(x) = b.get_mut(at) {
                *x = v;
            }
        }
        if let Some(cut) = cut {
            b.truncate(cut);
        }
        assert_parsers_agree(&b);
    }
}

#[test]
fn parse_into_agrees_with_parse_on_every_truncation_and_the_committed_frames() {
    let full = bytes_of(&spec(40000).timestamps(1, 2).payload(&PAYLOAD[..100]));
    for len in 0..=full.len() {
        assert_parsers_agree(&full[..len]);
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).expect("fixtures") {
        let bytes = std::fs::read(entry.expect("entry").path()).expect("fixture");
        assert_parsers_agree(&bytes);
        n += 1;
    }
    assert!(n > 0, "no fixture in {}", dir.display());
}
